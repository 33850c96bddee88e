//! The database settings of a WordPress site from its `wp-config.php`, read as text (no PHP
//! runs): `define('DB_NAME', '...')` and the others, `$table_prefix = '...'`. Only literal
//! string values are understood; the password is never logged or shown.

use std::net::IpAddr;
use std::path::PathBuf;
use std::sync::OnceLock;

use regex::Regex;

use crate::store::sitedb::{Endpoint, SiteDb};

/// The socket of `DB_HOST` `localhost` without one (Debian's and most distributions').
pub const DEFAULT_SOCKET: &str = "/run/mysqld/mysqld.sock";
/// Largest `wp-config.php` read.
pub const MAX_CONFIG_BYTES: u64 = 256 * 1024;

/// What a site's configuration says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WpConfig {
    pub db: SiteDb,
    /// `WP_HOME` and `WP_SITEURL` when the configuration pins them.
    pub home: Option<String>,
    pub siteurl: Option<String>,
}

/// Why a configuration gives no usable database.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConfigProblem {
    /// A setting is missing or not a literal string.
    Missing(&'static str),
    /// `DB_HOST` names a server that is not on this host (never contacted).
    RemoteHost,
}

fn define_re() -> &'static Regex {
    static RE: OnceLock<Regex> = OnceLock::new();
    RE.get_or_init(|| {
        Regex::new(
            r#"(?i)define\s*\(\s*['"](DB_NAME|DB_USER|DB_PASSWORD|DB_HOST|WP_HOME|WP_SITEURL)['"]\s*,\s*(?:'((?:[^'\\]|\\.)*)'|"((?:[^"\\$]|\\.)*)")\s*\)"#,
        )
        .expect("static regex")
    })
}

fn prefix_re() -> &'static Regex {
    static RE: OnceLock<Regex> = OnceLock::new();
    RE.get_or_init(|| {
        Regex::new(r#"\$table_prefix\s*=\s*(?:'([^'\\]*)'|"([^"\\$]*)")\s*;"#)
            .expect("static regex")
    })
}

/// PHP string escapes of a literal: `\'` / `\"` and `\\`.
fn unescape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            match chars.next() {
                Some(n @ ('\\' | '\'' | '"')) => out.push(n),
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
    out
}

/// Where `DB_HOST` points, if on this host: `localhost` (the default socket),
/// `localhost:/path.sock`, `localhost:PORT`, a loopback address with an optional port.
pub fn endpoint(host: &str) -> Option<Endpoint> {
    let host = host.trim();
    let (name, rest) = if let Some(r) = host.strip_prefix('[') {
        let (ip, after) = r.split_once(']')?;
        (ip, after.strip_prefix(':'))
    } else {
        match host.split_once(':') {
            Some((n, r)) => (n, Some(r)),
            None => (host, None),
        }
    };
    if name.eq_ignore_ascii_case("localhost") {
        return match rest {
            None | Some("") => Some(Endpoint::Socket(PathBuf::from(DEFAULT_SOCKET))),
            Some(r) if r.starts_with('/') => Some(Endpoint::Socket(PathBuf::from(r))),
            Some(r) => Some(Endpoint::Loopback(
                IpAddr::from([127, 0, 0, 1]),
                r.parse().ok()?,
            )),
        };
    }
    let ip: IpAddr = name.parse().ok()?;
    if !ip.is_loopback() {
        return None;
    }
    let port = match rest {
        None | Some("") => 3306,
        Some(r) => r.parse().ok()?,
    };
    Some(Endpoint::Loopback(ip, port))
}

/// Reads the settings from the text of a `wp-config.php`.
pub fn parse(text: &str) -> Result<WpConfig, ConfigProblem> {
    let mut vals: [Option<String>; 6] = Default::default();
    const NAMES: [&str; 6] = [
        "DB_NAME",
        "DB_USER",
        "DB_PASSWORD",
        "DB_HOST",
        "WP_HOME",
        "WP_SITEURL",
    ];
    for c in define_re().captures_iter(text) {
        let name = c.get(1).map_or("", |m| m.as_str()).to_ascii_uppercase();
        let v = c.get(2).or(c.get(3)).map_or("", |m| m.as_str());
        if let Some(i) = NAMES.iter().position(|n| *n == name) {
            vals[i].get_or_insert_with(|| unescape(v));
        }
    }
    let prefix = prefix_re()
        .captures(text)
        .and_then(|c| c.get(1).or(c.get(2)))
        .map(|m| m.as_str().to_string())
        .ok_or(ConfigProblem::Missing("$table_prefix"))?;
    let [name, user, password, host, home, siteurl] = vals;
    let host = host.ok_or(ConfigProblem::Missing("DB_HOST"))?;
    Ok(WpConfig {
        db: SiteDb {
            endpoint: endpoint(&host).ok_or(ConfigProblem::RemoteHost)?,
            database: name.ok_or(ConfigProblem::Missing("DB_NAME"))?,
            user: user.ok_or(ConfigProblem::Missing("DB_USER"))?,
            password: password.ok_or(ConfigProblem::Missing("DB_PASSWORD"))?,
            prefix,
        },
        home,
        siteurl,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_are_read_from_literals() {
        let c = parse(
            "<?php\ndefine( 'DB_NAME', 'wp_site' );\ndefine('DB_USER', \"site\");\ndefine('DB_PASSWORD', 'p\\'w\\\\d');\ndefine('DB_HOST', 'localhost:/tmp/my.sock');\n// define('DB_HOST', 'x');\n$table_prefix = 'wp2_';\ndefine('WP_HOME', 'https://example.org');\n",
        )
        .unwrap();
        assert_eq!(c.db.database, "wp_site");
        assert_eq!(c.db.user, "site");
        assert_eq!(c.db.password, "p'w\\d");
        assert_eq!(c.db.endpoint, Endpoint::Socket("/tmp/my.sock".into()));
        assert_eq!(c.db.prefix, "wp2_");
        assert_eq!(c.home.as_deref(), Some("https://example.org"));
        assert!(
            !format!("{c:?}").contains("p'w"),
            "the password is never shown"
        );
    }

    #[test]
    fn only_local_servers() {
        assert_eq!(
            endpoint("localhost"),
            Some(Endpoint::Socket(DEFAULT_SOCKET.into()))
        );
        assert_eq!(
            endpoint("127.0.0.1:3307"),
            Some(Endpoint::Loopback([127, 0, 0, 1].into(), 3307))
        );
        assert_eq!(
            endpoint("[::1]"),
            Some(Endpoint::Loopback("::1".parse().unwrap(), 3306))
        );
        assert_eq!(endpoint("db.example.org"), None);
        assert_eq!(endpoint("192.0.2.7:3306"), None);
        assert_eq!(endpoint("localhost:x"), None);
        assert_eq!(
            parse("define('DB_HOST','198.51.100.1');$table_prefix='wp_';"),
            Err(ConfigProblem::RemoteHost)
        );
        assert_eq!(
            parse("define('DB_HOST','localhost');"),
            Err(ConfigProblem::Missing("$table_prefix"))
        );
    }
}
