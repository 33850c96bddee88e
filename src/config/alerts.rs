//! `[alerts]` and `[alerts.webhook]`: which findings notify, the hourly budget, the webhook.

use super::reader::{Errors, TableReader};
use crate::model::finding::Severity;

/// `[alerts]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AlertsConfig {
    /// Notifications per hour window before the rest are held back for the summary.
    pub max_per_hour: u32,
    /// Findings below this severity never notify.
    pub min_severity: Severity,
    /// `[alerts.webhook]`; alerts are active only when a notifier is configured.
    pub webhook: Option<WebhookConfig>,
}

impl Default for AlertsConfig {
    /// The defaults of `config::keys::KEYS`.
    fn default() -> Self {
        read(&mut TableReader::new(None, ""), &mut Errors::default())
    }
}

/// `[alerts.webhook]`.
#[derive(Clone, PartialEq, Eq)]
pub struct WebhookConfig {
    /// `https://...`, or `http://` to a loopback address only. May carry a secret (a token in
    /// the path): never logged; [`WebhookConfig::redacted`] is what logs show.
    pub url: String,
    /// Deadline of one attempt (connect, send, answer).
    pub timeout_seconds: u64,
    /// Attempts per notification, the first included.
    pub max_attempts: u32,
}

impl WebhookConfig {
    /// Scheme, host and port only (no path, query or credentials).
    pub fn redacted(&self) -> String {
        match parse_url(&self.url) {
            Ok(u) => format!("{}://{}", u.scheme, u.authority),
            Err(_) => "<invalid url>".to_string(),
        }
    }

    /// Whether the destination is a loopback address (no proxy is used for it).
    pub fn is_loopback(&self) -> bool {
        parse_url(&self.url).is_ok_and(|u| is_loopback_host(&u.host))
    }
}

impl std::fmt::Debug for WebhookConfig {
    // The URL may carry a secret: only scheme and host are printed.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WebhookConfig")
            .field("url", &self.redacted())
            .field("timeout_seconds", &self.timeout_seconds)
            .field("max_attempts", &self.max_attempts)
            .finish()
    }
}

struct ParsedUrl {
    scheme: String,
    authority: String,
    host: String,
}

/// Minimal absolute-URL check: `scheme://[userinfo@]host[:port][/...]`.
fn parse_url(url: &str) -> Result<ParsedUrl, &'static str> {
    if url.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err("must not contain spaces or control characters");
    }
    let (scheme, rest) = url
        .split_once("://")
        .ok_or("must be an absolute URL such as https://hooks.example.com/svc")?;
    let scheme = scheme.to_ascii_lowercase();
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let authority = &rest[..end];
    let hostport = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    let host = if let Some(v6) = hostport.strip_prefix('[') {
        let (h, after) = v6
            .split_once(']')
            .ok_or("has an unterminated [IPv6] host")?;
        if !(after.is_empty() || after.starts_with(':')) {
            return Err("has an invalid port");
        }
        check_port(after.strip_prefix(':'))?;
        h.to_string()
    } else {
        let (h, port) = match hostport.rsplit_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (hostport, None),
        };
        check_port(port)?;
        h.to_ascii_lowercase()
    };
    if host.is_empty() {
        return Err("has no host");
    }
    Ok(ParsedUrl {
        scheme,
        authority: hostport.to_string(),
        host,
    })
}

fn check_port(port: Option<&str>) -> Result<(), &'static str> {
    match port {
        None => Ok(()),
        Some(p) if p.parse::<u16>().is_ok_and(|n| n > 0) => Ok(()),
        Some(_) => Err("has an invalid port"),
    }
}

fn is_loopback_host(host: &str) -> bool {
    if host == "localhost" {
        return true;
    }
    host.parse::<std::net::IpAddr>()
        .is_ok_and(|ip| ip.is_loopback())
}

/// Why an outbound URL is refused: the rest of the sentence that starts with its key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UrlError(pub &'static str);

impl std::fmt::Display for UrlError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.0)
    }
}

impl std::error::Error for UrlError {}

/// Checks a webhook URL: `https://` anywhere, `http://` only to a loopback address
/// (127.0.0.0/8, ::1, localhost), nothing else.
pub fn validate_webhook_url(url: &str) -> Result<(), UrlError> {
    let u = parse_url(url).map_err(UrlError)?;
    // The HTTP client parses the URL itself: both readings must name the same host.
    let uri: ureq::http::Uri = url.parse().map_err(|_| UrlError("is not a valid URL"))?;
    let client_host = uri.host().map(|h| {
        h.trim_start_matches('[')
            .trim_end_matches(']')
            .to_ascii_lowercase()
    });
    if client_host.as_deref() != Some(u.host.to_ascii_lowercase().as_str()) {
        return Err(UrlError("has an ambiguous host"));
    }
    match u.scheme.as_str() {
        "https" => Ok(()),
        "http" if is_loopback_host(&u.host) => Ok(()),
        "http" => Err(UrlError(
            "plain http:// is accepted only for loopback addresses (127.0.0.0/8, ::1, localhost); use https://",
        )),
        _ => Err(UrlError(
            "must start with https:// (or http:// to a loopback address)",
        )),
    }
}

/// Reads `[alerts]` (and `[alerts.webhook]`) from the root table.
pub(super) fn read(root: &mut TableReader<'_>, errs: &mut Errors) -> AlertsConfig {
    let mut a = root.table("alerts", errs);
    let max_per_hour = a.int("max_per_hour", errs) as u32;
    let sev = a.string("min_severity", errs);
    let min_severity = match sev.to_ascii_uppercase().as_str() {
        "CRITICAL" => Severity::Critical,
        "HIGH" => Severity::High,
        "WARNING" => Severity::Warning,
        _ => {
            errs.push(
                a.key("min_severity"),
                "must be \"CRITICAL\", \"HIGH\" or \"WARNING\"",
            );
            Severity::High
        }
    };
    let webhook = if a.has("webhook") {
        let mut w = a.table("webhook", errs);
        let url = w.string("url", errs);
        let timeout_seconds = w.int("timeout_seconds", errs) as u64;
        let max_attempts = w.int("max_attempts", errs) as u32;
        let mut ok = true;
        if url.is_empty() {
            errs.push(w.key("url"), "must be set when [alerts.webhook] is present");
            ok = false;
        } else if let Err(e) = validate_webhook_url(&url) {
            errs.push(w.key("url"), e);
            ok = false;
        }
        w.finish(errs);
        ok.then_some(WebhookConfig {
            url,
            timeout_seconds,
            max_attempts,
        })
    } else {
        None
    };
    a.finish(errs);
    AlertsConfig {
        max_per_hour,
        min_severity,
        webhook,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{from_table, parse_str};

    fn check(text: &str) -> Result<AlertsConfig, Vec<String>> {
        let t = parse_str(text).map_err(|e| vec![e.to_string()])?;
        from_table(&t, vec![])
            .map(|c| c.alerts)
            .map_err(|es| es.iter().map(|e| e.to_string()).collect())
    }

    #[test]
    fn defaults_without_a_notifier() {
        let a = check("").unwrap();
        assert_eq!(a, AlertsConfig::default());
        assert_eq!((a.max_per_hour, a.min_severity), (30, Severity::High));
        assert!(a.webhook.is_none());
    }

    #[test]
    fn webhook_keys_and_bounds() {
        let a = check(
            "[alerts]\nmax_per_hour = 2\nmin_severity = \"critical\"\n[alerts.webhook]\nurl = \"https://hooks.example.com/svc/SECRET\"\ntimeout_seconds = 3\nmax_attempts = 4\n",
        )
        .unwrap();
        assert_eq!((a.max_per_hour, a.min_severity), (2, Severity::Critical));
        let w = a.webhook.unwrap();
        assert_eq!((w.timeout_seconds, w.max_attempts), (3, 4));
        assert_eq!(w.redacted(), "https://hooks.example.com");
        assert!(!format!("{w:?}").contains("SECRET"));
        let e = check("[alerts]\nmax_per_hour = 0\nmin_severity = \"info\"\nbogus = 1\n[alerts.webhook]\nurl = \"https://x\"\nmax_attempts = 11\nextra = true\n")
            .unwrap_err()
            .join("\n");
        for want in [
            "alerts.max_per_hour: must be between 1 and 100000",
            "alerts.min_severity: must be",
            "alerts.bogus: unknown key",
            "alerts.webhook.max_attempts: must be between 1 and 10",
            "alerts.webhook.extra: unknown key",
        ] {
            assert!(e.contains(want), "{want} missing in:\n{e}");
        }
    }

    #[test]
    fn plain_http_only_to_loopback() {
        for ok in [
            "https://hooks.example.com/x",
            "HTTPS://user:pw@hooks.example.com:8443/x?y=1",
            "http://127.0.0.1:8080/hook",
            "http://127.9.9.9/hook",
            "http://[::1]:9000/hook",
            "http://localhost/hook",
        ] {
            assert!(validate_webhook_url(ok).is_ok(), "{ok}");
        }
        for bad in [
            "http://hooks.example.com/x",
            "http://10.0.0.1/x",
            "http://127.0.0.1.evil.example/x",
            "http://localhost.evil.example/x",
            "http://user@evil.example/@127.0.0.1",
            "ftp://127.0.0.1/x",
            "hooks.example.com/x",
            "https://",
            "https://host:0/x",
            "https://host:99999/x",
            "https://[::1/x",
            "https://host/a b",
        ] {
            assert!(validate_webhook_url(bad).is_err(), "{bad}");
        }
        let e = check("[alerts.webhook]\nurl = \"http://203.0.113.9/hook\"\n")
            .unwrap_err()
            .join("\n");
        assert!(e.contains("alerts.webhook.url: plain http://"), "{e}");
        assert!(check("[alerts.webhook]\ntimeout_seconds = 3\n").is_err());
    }
}
