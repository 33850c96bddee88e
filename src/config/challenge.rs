//! `[challenge]`: the proof-of-work challenge (see `challenge`).
//!
//! `enabled`, `listen`, `tls_cert` and `tls_key` are read once at start (the listener);
//! every other key applies live on reload.

use std::net::SocketAddr;
use std::path::PathBuf;

use toml::Value;

use super::reader::{Errors, TableReader};
use crate::net::cidr::Net;

/// `[challenge]`, validated.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChallengeConfig {
    /// `challenge.enabled`: run the listener and route pre-auth signals to it.
    pub enabled: bool,
    /// `challenge.listen`: address of the challenge listener (TLS).
    pub listen: SocketAddr,
    /// `challenge.trusted_proxies`: connection peers whose last `X-Forwarded-For` address
    /// is the client (a reverse proxy in front of the listener). Empty: the header is
    /// ignored from every peer, loopback included.
    pub trusted_proxies: Vec<Net>,
    /// `challenge.tls_cert` / `challenge.tls_key`: the listener's pair; empty: the web UI's.
    pub tls_cert: String,
    pub tls_key: String,
    /// `challenge.public_url`: where the web server sends challenged addresses.
    pub public_url: String,
    /// `challenge.difficulty`: leading zero bits a proof needs.
    pub difficulty: u8,
    /// `challenge.timeout_minutes`: an address that does not solve the challenge in this
    /// time is blocked (claimed-crawler routes expire instead).
    pub timeout_minutes: u64,
    /// `challenge.allow_hours`: how long a solved challenge exempts the address.
    pub allow_hours: u64,
    /// `challenge.max_pending`: addresses routed to the challenge at once.
    pub max_pending: usize,
    /// `challenge.map_dir`: where the daemon writes the web-server map files.
    pub map_dir: PathBuf,
    /// `challenge.apache_file`: the Apache snippet `svc webserver-integration` writes.
    pub apache_file: PathBuf,
    /// `challenge.nginx_http_file`: the nginx `http`-level snippet (the `geo` map).
    pub nginx_http_file: PathBuf,
    /// `challenge.nginx_server_file`: the nginx `server`-level snippet (the redirect).
    pub nginx_server_file: PathBuf,
    /// `challenge.reload_command`: argv run (no shell) after the map changed, at most once
    /// every 10 seconds (nginx reads its map only at reload). Empty: none.
    pub reload_command: Vec<String>,
}

impl Default for ChallengeConfig {
    /// The defaults of `config::keys::KEYS`.
    fn default() -> Self {
        read(&mut TableReader::new(None, ""), &mut Errors::default())
    }
}

fn path(t: &mut TableReader<'_>, key: &'static str, errs: &mut Errors) -> PathBuf {
    let v = t.string(key, errs);
    if !v.starts_with('/') || v.contains('\0') || v.contains('\n') || v.contains('"') {
        errs.push(
            t.key(key),
            "must be an absolute path without quotes or newlines",
        );
        // Any value: the configuration is refused.
        return PathBuf::new();
    }
    PathBuf::from(v)
}

/// Whether `url` is an absolute http(s) URL safe to write into a web-server snippet.
pub fn url_ok(url: &str) -> bool {
    let rest = url
        .strip_prefix("https://")
        .or_else(|| url.strip_prefix("http://"));
    let Some(rest) = rest else { return false };
    let host = rest.split('/').next().unwrap_or("");
    !host.is_empty()
        && url.len() <= 2048
        && url.bytes().all(|b| {
            b.is_ascii_graphic()
                && !matches!(
                    b,
                    b'"' | b'\'' | b'\\' | b';' | b'{' | b'}' | b'$' | b'<' | b'>' | b'`'
                )
        })
}

/// At most this many `challenge.trusted_proxies` entries (each request scans the list).
pub const MAX_TRUSTED_PROXIES: usize = 64;

fn trusted_proxies(t: &mut TableReader<'_>, errs: &mut Errors) -> Vec<Net> {
    let name = t.key("trusted_proxies");
    let mut out = Vec::new();
    let items = t.string_list("trusted_proxies", errs);
    if items.len() > MAX_TRUSTED_PROXIES {
        errs.push(
            name.clone(),
            format!("at most {MAX_TRUSTED_PROXIES} entries"),
        );
    }
    for (i, s) in items.iter().enumerate().take(MAX_TRUSTED_PROXIES) {
        match Net::parse(s) {
            // Trusting every peer would let any client name any address again.
            Ok(n) if n.is_default_route() => errs.push(
                format!("{name}[{i}]"),
                "must not be a default route (0.0.0.0/0 or ::/0): list the proxies",
            ),
            Ok(n) => out.push(n),
            Err(e) => errs.push(format!("{name}[{i}]"), e.to_string()),
        }
    }
    out
}

/// Reads `[challenge]` from the root table.
pub(super) fn read(root: &mut TableReader<'_>, errs: &mut Errors) -> ChallengeConfig {
    let mut t = root.table("challenge", errs);
    let enabled = t.bool("enabled", errs);
    let listen_s = t.string("listen", errs);
    let listen = listen_s.parse::<SocketAddr>().unwrap_or_else(|_| {
        errs.push(
            t.key("listen"),
            "must be an address and port such as 127.0.0.1:8439",
        );
        // Any value: the configuration is refused.
        SocketAddr::from(([127, 0, 0, 1], 0))
    });
    let trusted_proxies = trusted_proxies(&mut t, errs);
    let tls_cert = t.string("tls_cert", errs);
    let tls_key = t.string("tls_key", errs);
    if tls_cert.is_empty() != tls_key.is_empty() {
        let missing = if tls_cert.is_empty() {
            "tls_cert"
        } else {
            "tls_key"
        };
        errs.push(
            t.key(missing),
            "must be set together with the other (or both left empty)",
        );
    }
    let public_url = t.string("public_url", errs);
    if !public_url.is_empty() && !url_ok(&public_url) {
        errs.push(
            t.key("public_url"),
            "must be an absolute http(s) URL without quotes, spaces, ';', '$', braces or angle brackets",
        );
    }
    let difficulty = t.int("difficulty", errs) as u8;
    let timeout_minutes = t.int("timeout_minutes", errs) as u64;
    let allow_hours = t.int("allow_hours", errs) as u64;
    let max_pending = t.int("max_pending", errs) as usize;
    let map_dir = path(&mut t, "map_dir", errs);
    let apache_file = path(&mut t, "apache_file", errs);
    let nginx_http_file = path(&mut t, "nginx_http_file", errs);
    let nginx_server_file = path(&mut t, "nginx_server_file", errs);
    let reload_command = match t.raw("reload_command") {
        None => Vec::new(),
        Some(Value::String(s)) => s.split_whitespace().map(str::to_string).collect(),
        Some(Value::Array(items)) => {
            let mut out = Vec::new();
            for (i, v) in items.iter().enumerate() {
                match v {
                    Value::String(s) if !s.contains('\0') => out.push(s.clone()),
                    _ => errs.push(
                        format!("{}[{i}]", t.key("reload_command")),
                        "must be a string",
                    ),
                }
            }
            out
        }
        Some(_) => {
            errs.push(
                t.key("reload_command"),
                "must be a string or an array of strings",
            );
            Vec::new()
        }
    };
    if let Some(first) = reload_command.first() {
        if first.is_empty() || (first.contains('/') && !first.starts_with('/')) {
            errs.push(
                t.key("reload_command"),
                "the program must be a name looked up in PATH or an absolute path",
            );
        }
    }
    if nginx_http_file == nginx_server_file {
        errs.push(
            t.key("nginx_server_file"),
            "must differ from challenge.nginx_http_file",
        );
    }
    t.finish(errs);
    ChallengeConfig {
        enabled,
        listen,
        trusted_proxies,
        tls_cert,
        tls_key,
        public_url,
        difficulty,
        timeout_minutes,
        allow_hours,
        max_pending,
        map_dir,
        apache_file,
        nginx_http_file,
        nginx_server_file,
        reload_command,
    }
}

#[cfg(test)]
mod tests {
    use crate::config::{from_table, parse_str};

    fn check(text: &str) -> Result<super::ChallengeConfig, Vec<String>> {
        let t = parse_str(text).map_err(|e| vec![e.to_string()])?;
        from_table(&t, vec![])
            .map(|c| c.challenge)
            .map_err(|es| es.iter().map(|e| e.to_string()).collect())
    }

    #[test]
    fn defaults_and_errors() {
        let c = check("").unwrap();
        assert_eq!(c, super::ChallengeConfig::default());
        assert!(!c.enabled);
        assert_eq!(c.listen.to_string(), "127.0.0.1:8439");
        assert!(
            c.trusted_proxies.is_empty(),
            "no proxy is trusted by default"
        );
        let c = check("[challenge]\nenabled = true\npublic_url = \"https://challenge.example.com/\"\ndifficulty = 12\nreload_command = \"nginx -s reload\"\ntrusted_proxies = [\"127.0.0.1\", \"::1\", \"198.51.100.0/24\"]\n").unwrap();
        assert_eq!((c.difficulty, c.reload_command.len()), (12, 3));
        let shown: Vec<String> = c.trusted_proxies.iter().map(|n| n.to_string()).collect();
        assert_eq!(shown, ["127.0.0.1", "::1", "198.51.100.0/24"]);
        let e = check("[challenge]\ntrusted_proxies = [\"0.0.0.0/0\", \"x\", \"192.0.2.1/24\"]\n")
            .unwrap_err()
            .join("\n");
        for k in [
            "challenge.trusted_proxies[0]: must not be a default route",
            "challenge.trusted_proxies[1]:",
            "challenge.trusted_proxies[2]:",
        ] {
            assert!(e.contains(k), "{k}: {e}");
        }
        let e = check("[challenge]\nlisten = \"x\"\ndifficulty = 40\npublic_url = \"https://a.example.com/$x\"\nmap_dir = \"rel\"\ntls_cert = \"/c\"\nbogus = 1\n")
            .unwrap_err()
            .join("\n");
        for k in [
            "challenge.listen: must be",
            "challenge.difficulty: must be between",
            "challenge.public_url: must be",
            "challenge.map_dir: must be",
            "challenge.tls_key: must be set together",
            "challenge.bogus: unknown key",
        ] {
            assert!(e.contains(k), "{k}: {e}");
        }
    }

    #[test]
    fn urls() {
        assert!(super::url_ok("https://c.example.com/"));
        assert!(super::url_ok("http://127.0.0.1:8439"));
        for bad in [
            "",
            "ftp://x",
            "https://",
            "https://a b",
            "https://a/\";",
            "https://a/{x}",
        ] {
            assert!(!super::url_ok(bad), "{bad}");
        }
    }
}
