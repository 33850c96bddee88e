//! The mail-log reader (Exim `mainlog`, Postfix `mail.log`).
