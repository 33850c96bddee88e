//! [`AddrNames`]: the user and service names remembered for one address, in at most one
//! allocation.
//!
//! The detector remembers up to five user names and four service names per attacking
//! address, for up to `auth_max_tracked_addresses` addresses. Service names are nearly
//! always a few daemon names ([`SERVICES`]), kept inline as 4-bit codes. User names and any
//! other service name are packed in one boxed slice that grows by exactly the name added
//! (it changes at most a few times per address, so the copy on each addition is cheap):
//! a name brute-force dictionaries try first ([`COMMON_NAMES`]) as one byte, any other as
//! a length byte and its text.

/// Service names kept as a code (its index + 1) instead of text.
const SERVICES: [&str; 14] = [
    "sshd",
    "sshd-session",
    "auth",
    "auth-worker",
    "imap-login",
    "pop3-login",
    "submission-login",
    "managesieve-login",
    "dovecot",
    "vsftpd",
    "proftpd",
    "pure-ftpd",
    "su",
    "login",
];
/// The code of a service whose name is the next packed service name.
const PACKED_SERVICE: u16 = 15;
/// Service codes in [`AddrNames::services`].
const SERVICE_SLOTS: usize = 4;
/// Longest name kept (bytes; longer ones are cut at a character boundary). The detector
/// keeps at most 64.
const MAX_NAME_BYTES: usize = 127;
/// A packed byte with this bit is a whole name: [`COMMON_NAMES`] at the other bits.
const COMMON: u8 = 0x80;
/// User names packed as one byte (at most 128), from the lists brute-force dictionaries
/// start with, sorted. Matching runs only when a name is added;
/// a lookup compares the packed names' text as before.
const COMMON_NAMES: [&str; 64] = [
    "a",
    "admin",
    "administrator",
    "ansible",
    "apache",
    "azureuser",
    "backup",
    "centos",
    "debian",
    "default",
    "deploy",
    "dev",
    "devops",
    "docker",
    "ec2-user",
    "elastic",
    "es",
    "ftp",
    "ftpuser",
    "git",
    "guest",
    "hadoop",
    "hduser",
    "info",
    "jenkins",
    "kafka",
    "mail",
    "minecraft",
    "mysql",
    "nagios",
    "nginx",
    "nobody",
    "node",
    "odoo",
    "operator",
    "oracle",
    "pi",
    "postfix",
    "postgres",
    "redis",
    "root",
    "server",
    "service",
    "sol",
    "solana",
    "steam",
    "student",
    "support",
    "sysadmin",
    "teamspeak",
    "test",
    "test1",
    "testuser",
    "tomcat",
    "ts3",
    "ubnt",
    "ubuntu",
    "user",
    "user1",
    "vagrant",
    "web",
    "www",
    "www-data",
    "zabbix",
];

/// User names (at most 255) and service names (at most four), each list in the order added
/// and without repeats, names of at most 127 bytes (longer ones are cut at a character
/// boundary). 24 bytes inline and one allocation, none while no user name and no unusual
/// service name was added.
#[derive(Debug, Default)]
pub(crate) struct AddrNames {
    /// The user names, then the service names that have no code, each as one byte
    /// [`COMMON`] | its index in [`COMMON_NAMES`], or as one length byte (below 128)
    /// followed by its UTF-8 bytes.
    packed: Box<[u8]>,
    /// User names not kept because the caller's cap was reached (saturating).
    users_more: u32,
    /// How many of the packed names are user names.
    users: u8,
    /// Up to four 4-bit service codes in the order added, first in the lowest bits:
    /// 0 none, 1-14 [`SERVICES`], [`PACKED_SERVICE`] the next packed service name.
    services: u16,
}

impl AddrNames {
    pub(crate) fn users_len(&self) -> usize {
        usize::from(self.users)
    }

    /// User names not kept (counted by [`AddrNames::count_user_not_kept`]).
    pub(crate) fn users_more(&self) -> u32 {
        self.users_more
    }

    pub(crate) fn count_user_not_kept(&mut self) {
        self.users_more = self.users_more.saturating_add(1);
    }

    /// Called for every failure line: compares bytes, no UTF-8 check.
    pub(crate) fn has_user(&self, name: &str) -> bool {
        let name = crate::text::prefix_within(name, MAX_NAME_BYTES).as_bytes();
        self.packed_names()
            .take(self.users_len())
            .any(|n| n == name)
    }

    /// Adds `name` (cut to 127 bytes) after the other user names; callers check
    /// [`AddrNames::has_user`] and their own cap first. At most 255 user names are kept.
    pub(crate) fn push_user(&mut self, name: &str) {
        let Some(users) = self.users.checked_add(1) else {
            return;
        };
        let end = self.packed_end(self.users_len());
        self.insert_packed(end, name);
        self.users = users;
    }

    /// The user names in the order added.
    pub(crate) fn users(&self) -> impl Iterator<Item = &str> {
        self.packed_strs().take(self.users_len())
    }

    pub(crate) fn services_len(&self) -> usize {
        self.service_codes().count()
    }

    /// Called for every failure line while fewer than four services are kept.
    pub(crate) fn has_service(&self, name: &str) -> bool {
        let name = crate::text::prefix_within(name, MAX_NAME_BYTES);
        match service_code(name) {
            Some(code) => self.service_codes().any(|c| c == code),
            None => self
                .packed_names()
                .skip(self.users_len())
                .any(|n| n == name.as_bytes()),
        }
    }

    /// Adds `name` (cut to 127 bytes) after the other service names; callers check
    /// [`AddrNames::has_service`] first. At most four service names are kept.
    pub(crate) fn push_service(&mut self, name: &str) {
        let at = self.services_len();
        if at >= SERVICE_SLOTS {
            return;
        }
        let name = crate::text::prefix_within(name, MAX_NAME_BYTES);
        let code = match service_code(name) {
            Some(code) => code,
            None => {
                self.insert_packed(self.packed.len(), name);
                PACKED_SERVICE
            }
        };
        self.services |= code << (4 * at);
    }

    /// The service names in the order added.
    pub(crate) fn services(&self) -> impl Iterator<Item = &str> {
        let mut packed = self.packed_strs().skip(self.users_len());
        self.service_codes().map_while(move |code| match code {
            PACKED_SERVICE => packed.next(),
            _ => SERVICES.get(usize::from(code) - 1).copied(),
        })
    }

    fn service_codes(&self) -> impl Iterator<Item = u16> {
        let codes = self.services;
        (0..SERVICE_SLOTS)
            .map(move |i| (codes >> (4 * i)) & 0xF)
            .take_while(|&c| c != 0)
    }

    fn packed_names(&self) -> impl Iterator<Item = &[u8]> {
        let mut rest: &[u8] = &self.packed;
        std::iter::from_fn(move || {
            let (&n, tail) = rest.split_first()?;
            if n & COMMON != 0 {
                rest = tail;
                return COMMON_NAMES
                    .get(usize::from(n & !COMMON))
                    .map(|name| name.as_bytes());
            }
            let (name, tail) = tail.split_at_checked(usize::from(n))?;
            rest = tail;
            Some(name)
        })
    }

    fn packed_strs(&self) -> impl Iterator<Item = &str> {
        // Only whole `&str`s cut at character boundaries are packed.
        self.packed_names()
            .filter_map(|name| std::str::from_utf8(name).ok())
    }

    /// The byte offset where the `n`-th packed name starts (the end when there are fewer).
    fn packed_end(&self, n: usize) -> usize {
        let mut at = 0;
        for _ in 0..n {
            match self.packed.get(at) {
                Some(&b) if b & COMMON != 0 => at += 1,
                Some(&len) => at += 1 + usize::from(len),
                None => break,
            }
        }
        at.min(self.packed.len())
    }

    /// Inserts `name` (cut to 127 bytes) as a packed name at byte offset `at`, in a new
    /// allocation of exactly the new size.
    fn insert_packed(&mut self, at: usize, name: &str) {
        let name = crate::text::prefix_within(name, MAX_NAME_BYTES);
        let common = COMMON_NAMES
            .iter()
            .position(|c| *c == name)
            .and_then(|i| u8::try_from(i).ok());
        let (first, text) = match common {
            Some(i) => (COMMON | i, ""),
            None => match u8::try_from(name.len()) {
                Ok(len) => (len, name),
                Err(_) => return,
            },
        };
        let (head, tail) = self.packed.split_at(at.min(self.packed.len()));
        let mut packed = Vec::with_capacity(self.packed.len() + 1 + text.len());
        packed.extend_from_slice(head);
        packed.push(first);
        packed.extend_from_slice(text.as_bytes());
        packed.extend_from_slice(tail);
        self.packed = packed.into_boxed_slice();
    }
}

/// The code of `name` in [`SERVICES`]. Runs for every failure line: a `match` compares the
/// length first and then at most a few names.
fn service_code(name: &str) -> Option<u16> {
    Some(match name {
        "sshd" => 1,
        "sshd-session" => 2,
        "auth" => 3,
        "auth-worker" => 4,
        "imap-login" => 5,
        "pop3-login" => 6,
        "submission-login" => 7,
        "managesieve-login" => 8,
        "dovecot" => 9,
        "vsftpd" => 10,
        "proftpd" => 11,
        "pure-ftpd" => 12,
        "su" => 13,
        "login" => 14,
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_order_and_finds_names() {
        let mut l = AddrNames::default();
        assert_eq!(l.users_len(), 0);
        for n in ["root", "", "é-user", "admin"] {
            l.push_user(n);
        }
        assert_eq!(l.users_len(), 4);
        assert_eq!(
            l.users().collect::<Vec<_>>(),
            ["root", "", "é-user", "admin"]
        );
        assert!(l.has_user("é-user") && l.has_user("") && !l.has_user("ro"));
    }

    #[test]
    fn long_names_are_cut_at_a_character_boundary() {
        let mut l = AddrNames::default();
        let long = "é".repeat(200); // 400 bytes
        l.push_user(&long);
        l.push_service(&long);
        let kept = l.users().next().unwrap_or_default();
        assert_eq!(kept.len(), 126);
        assert!(long.starts_with(kept));
        assert!(l.has_user(&long), "the same long name matches its cut form");
        assert!(l.has_service(&long));
        assert_eq!(l.services().collect::<Vec<_>>(), [kept]);
    }

    #[test]
    fn holds_at_most_255_user_names() {
        let mut l = AddrNames::default();
        for i in 0..300 {
            l.push_user(&i.to_string());
        }
        assert_eq!(l.users_len(), 255);
        assert_eq!(l.users().count(), 255);
    }

    #[test]
    fn common_names_take_one_byte_and_read_back() {
        let mut l = AddrNames::default();
        for n in ["root", "alice@example.com", "admin", "a", "rootx"] {
            l.push_user(n);
        }
        l.push_service("x-ftp");
        assert_eq!(l.packed.len(), 3 + (1 + 17) + (1 + 5) + (1 + 5));
        assert_eq!(
            l.users().collect::<Vec<_>>(),
            ["root", "alice@example.com", "admin", "a", "rootx"]
        );
        assert_eq!(l.services().collect::<Vec<_>>(), ["x-ftp"]);
        assert!(l.has_user("admin") && l.has_user("rootx") && !l.has_user("x-ftp"));
        let mut seen = std::collections::HashSet::new();
        for n in COMMON_NAMES {
            assert!(seen.insert(n) && n.len() <= 64, "{n}");
        }
    }

    #[test]
    fn service_codes_match_their_names() {
        for (i, name) in SERVICES.iter().enumerate() {
            assert_eq!(service_code(name).map(usize::from), Some(i + 1), "{name}");
        }
        assert_eq!(service_code("sshd "), None);
    }

    #[test]
    fn services_keep_their_order_known_or_not_beside_users() {
        let mut l = AddrNames::default();
        l.push_service("imap-login");
        assert!(l.packed.is_empty(), "a known service needs no allocation");
        l.push_service("cpanel");
        l.push_user("root");
        l.push_service("sshd");
        l.push_user("admin");
        l.push_service("x-ftp");
        l.push_service("vsftpd"); // a fifth: not kept
        assert_eq!(
            l.services().collect::<Vec<_>>(),
            ["imap-login", "cpanel", "sshd", "x-ftp"]
        );
        assert_eq!(l.services_len(), 4);
        assert_eq!(l.users().collect::<Vec<_>>(), ["root", "admin"]);
        assert!(l.has_service("cpanel") && l.has_service("sshd") && !l.has_service("auth"));
        assert!(!l.has_user("cpanel") && !l.has_service("root"));
        l.count_user_not_kept();
        assert_eq!(l.users_more(), 1);
    }
}
