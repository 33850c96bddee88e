//! ModSecurity's message text: `Access denied with code 403 (phase 1). ... [id "900112"]
//! [msg "..."] [severity "WARNING"] [hostname "..."] [uri "..."] [unique_id "..."]`.

use std::borrow::Cow;

use super::super::event::Action;

/// The bracketed `[name "value"]` fields svc reads (first occurrence of each).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Fields<'a> {
    pub id: Option<Cow<'a, str>>,
    pub msg: Option<Cow<'a, str>>,
    pub severity: Option<Cow<'a, str>>,
    pub hostname: Option<Cow<'a, str>>,
    pub uri: Option<Cow<'a, str>>,
    pub unique_id: Option<Cow<'a, str>>,
    pub data: Option<Cow<'a, str>>,
}

/// A value as ModSecurity escapes it: `\"` and `\\` stand for `"` and `\`.
fn unescape(v: &str) -> Cow<'_, str> {
    if !v.contains('\\') {
        return Cow::Borrowed(v);
    }
    let mut out = String::with_capacity(v.len());
    let mut chars = v.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            match chars.next() {
                Some(n @ ('"' | '\\')) => out.push(n),
                Some(n) => {
                    out.push('\\');
                    out.push(n);
                }
                None => out.push('\\'),
            }
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// Scans `text` for `[name "value"]` fields. A value ends at a `"` not
/// escaped by a backslash and must be followed by `]`; anything else is skipped.
pub fn scan(text: &str) -> Fields<'_> {
    let mut f = Fields::default();
    let b = text.as_bytes();
    let mut i = 0;
    while let Some(off) = b.get(i..).and_then(|r| memchr::memchr(b'[', r)) {
        let start = i + off + 1;
        i = start;
        // Name: lower-case letters and underscores.
        let mut j = start;
        while b
            .get(j)
            .is_some_and(|c| c.is_ascii_lowercase() || *c == b'_')
        {
            j += 1;
        }
        let Some(name) = text.get(start..j) else {
            continue;
        };
        if name.is_empty() || b.get(j) != Some(&b' ') {
            continue;
        }
        if b.get(j + 1) != Some(&b'"') {
            continue;
        }
        let vstart = j + 2;
        let mut k = vstart;
        let mut escaped = false;
        let mut end = None;
        while let Some(&c) = b.get(k) {
            if escaped {
                escaped = false;
            } else if c == b'\\' {
                escaped = true;
            } else if c == b'"' {
                end = Some(k);
                break;
            }
            k += 1;
        }
        let Some(vend) = end else {
            break;
        };
        if b.get(vend + 1) != Some(&b']') {
            continue;
        }
        i = vend + 2;
        let Some(raw) = text.get(vstart..vend) else {
            continue;
        };
        let slot = match name {
            "id" => &mut f.id,
            "msg" => &mut f.msg,
            "severity" => &mut f.severity,
            "hostname" => &mut f.hostname,
            "uri" => &mut f.uri,
            "unique_id" => &mut f.unique_id,
            "data" => &mut f.data,
            _ => continue,
        };
        if slot.is_none() {
            *slot = Some(unescape(raw));
        }
    }
    f
}

/// A ModSecurity message: whether it says the request was denied, its fields, and its
/// first sentence (the message when there is no `[msg]`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ModsecMessage<'a> {
    /// `Some(Deny)` for "Access denied ...", `Some(Pass)` for "Warning." and "Access
    /// allowed"; `None` when the text does not say (LiteSpeed "triggered!").
    pub disposition: Option<Action>,
    pub fields: Fields<'a>,
    pub head: &'a str,
}

/// Reads the text after `ModSecurity: ` (or a native audit `Message: `).
pub fn message(text: &str) -> ModsecMessage<'_> {
    let t = text.trim_start();
    let disposition = if t.starts_with("Access denied") {
        Some(Action::Deny)
    } else if t.starts_with("Warning.") || t.starts_with("Access allowed") {
        Some(Action::Pass)
    } else {
        None
    };
    let head_end = t.find(" [").unwrap_or(t.len());
    let head = t.get(..head_end).unwrap_or("");
    ModsecMessage {
        disposition,
        fields: scan(t),
        head,
    }
}

/// The `[data "method GET"]` svc's rules log, read as a method.
pub fn method_of(data: Option<&str>) -> Option<&str> {
    let m = data?.strip_prefix("method ")?;
    (!m.is_empty() && m.len() <= 32 && m.bytes().all(|b| b.is_ascii_alphabetic())).then_some(m)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_and_escapes() {
        let f = scan(
            r#"[client 127.0.0.1:45272] [client 127.0.0.1] ModSecurity: Access denied. [file "/x"] [id "900112"] [msg "say \"hi\" \\ ok"] [uri "/a\"] [id \"1"] [unique_id "u1"] [id "2"]"#,
        );
        assert_eq!(f.id.as_deref(), Some("900112"));
        assert_eq!(f.msg.as_deref(), Some(r#"say "hi" \ ok"#));
        assert_eq!(f.uri.as_deref(), Some(r#"/a"] [id "1"#));
        assert_eq!(f.unique_id.as_deref(), Some("u1"));
    }

    #[test]
    fn dispositions() {
        assert_eq!(
            message("Access denied with code 403 (phase 1). x [id \"1\"]").disposition,
            Some(Action::Deny)
        );
        assert_eq!(
            message("Warning. Pattern match").disposition,
            Some(Action::Pass)
        );
        let m = message("mod_security rule [id \"920170\"] at [/x.conf:180] triggered!");
        assert_eq!(m.disposition, None);
        assert_eq!(m.fields.id.as_deref(), Some("920170"));
        assert_eq!(method_of(Some("method POST")), Some("POST"));
        assert_eq!(method_of(Some("method P OST")), None);
    }

    #[test]
    fn garbage_never_panics() {
        for s in [
            "[",
            "[id",
            "[id ",
            "[id \"",
            "[id \"\\",
            "[id \"x\"",
            "[id \"x\"]]",
            "[client",
            "[client ",
            "[é \"x\"]",
        ] {
            let _ = scan(s);
            let _ = message(s);
        }
    }
}
