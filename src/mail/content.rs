//! Check `email_content`: outbound text parts (decoded by the same tolerant walker, with
//! the message's own MIME headers and declared boundaries) searched for credentials and
//! suspicious links.
//!
//! What counts:
//! - `credentials`: a password assignment (`password: ...`, `pwd=...`) next to a login
//!   (`user`, `login`, `email`, `account`) in one part, or a list of five or more
//!   `address:secret` lines (a credential dump). The secret is never reported.
//! - `suspicious_link`: a link whose host is a bare IP address, an IDN (`xn--`) host, an
//!   authority with user info (`https://bank.example@203.0.113.9/`), or, in HTML, a link
//!   whose visible text names another host than its target.
//!
//! Bounded: at most [`MAX_TEXT`] bytes of a part are inspected and at most
//! [`MAX_HITS`] hits are kept per message.

use std::sync::OnceLock;

use regex::bytes::Regex;

/// Bytes of one part inspected at most.
pub const MAX_TEXT: usize = 1024 * 1024;
/// Hits kept per message.
pub const MAX_HITS: usize = 8;

/// One thing found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Hit {
    /// `credentials` or `suspicious_link`.
    pub kind: &'static str,
    /// What was seen, safe to show (no secret): the link's host, or the kind of credential.
    pub detail: String,
}

struct Res {
    password: Regex,
    login: Regex,
    combo: Regex,
    url: Regex,
    anchor: Regex,
}

fn res() -> &'static Res {
    static R: OnceLock<Res> = OnceLock::new();
    R.get_or_init(|| Res {
        password: Regex::new(r"(?i)\b(?:pass(?:word|wd)?|pwd|passcode|kennwort|mot de passe)\s*[:=]\s*\S{4,}")
            .expect("static regex"),
        login: Regex::new(r"(?i)\b(?:user(?:name)?|login|e-?mail|account|benutzer)\s*[:=]\s*\S+")
            .expect("static regex"),
        combo: Regex::new(r"(?m)^[^\s:@]{1,64}@[^\s:@]{1,255}\.[A-Za-z]{2,24}:\S{4,}\r?$")
            .expect("static regex"),
        url: Regex::new(r#"(?i)\bhttps?://([^\s"'<>/?#]{1,300})"#).expect("static regex"),
        anchor: Regex::new(r#"(?is)<a\s[^>]*href\s*=\s*["']?https?://([^\s"'<>/?#]{1,300})[^>]*>\s*(?:<[^>]{0,200}>\s*)*(?:https?://)?([A-Za-z0-9.-]{3,253}\.[A-Za-z]{2,24})"#)
            .expect("static regex"),
    })
}

fn host_of(authority: &[u8]) -> (String, bool) {
    let a = String::from_utf8_lossy(authority).to_ascii_lowercase();
    let userinfo = a.contains('@');
    let host = a.rsplit('@').next().unwrap_or("");
    let host = if host.starts_with('[') {
        host.split(']')
            .next()
            .unwrap_or("")
            .trim_start_matches('[')
            .to_string()
    } else {
        host.split(':').next().unwrap_or("").to_string()
    };
    (host, userinfo)
}

fn push(hits: &mut Vec<Hit>, kind: &'static str, detail: String) {
    if hits.len() < MAX_HITS && !hits.iter().any(|h| h.kind == kind && h.detail == detail) {
        hits.push(Hit { kind, detail });
    }
}

/// Inspects one decoded text part (`html` for `text/html`).
pub fn inspect(text: &[u8], html: bool, hits: &mut Vec<Hit>) {
    let text = &text[..text.len().min(MAX_TEXT)];
    let r = res();
    if r.password.is_match(text) && r.login.is_match(text) {
        push(hits, "credentials", "login and password".into());
    }
    if r.combo.find_iter(text).take(5).count() >= 5 {
        push(hits, "credentials", "list of address:password lines".into());
    }
    for c in r.url.captures_iter(text).take(1000) {
        let Some(auth) = c.get(1) else { continue };
        let (host, userinfo) = host_of(auth.as_bytes());
        let shown = crate::text::for_log(&host, 100);
        if userinfo {
            push(
                hits,
                "suspicious_link",
                format!("link with user info before host {shown}"),
            );
        } else if host.parse::<std::net::IpAddr>().is_ok() {
            push(
                hits,
                "suspicious_link",
                format!("link to bare address {shown}"),
            );
        } else if host.split('.').any(|l| l.starts_with("xn--")) {
            push(hits, "suspicious_link", format!("link to IDN host {shown}"));
        }
    }
    if html {
        for c in r.anchor.captures_iter(text).take(1000) {
            let (Some(href), Some(shown)) = (c.get(1), c.get(2)) else {
                continue;
            };
            let (target, _) = host_of(href.as_bytes());
            let visible = String::from_utf8_lossy(shown.as_bytes()).to_ascii_lowercase();
            let same = target == visible
                || target.ends_with(&format!(".{visible}"))
                || visible.ends_with(&format!(".{target}"));
            if !same && visible.contains('.') {
                push(
                    hits,
                    "suspicious_link",
                    format!(
                        "link text names {} but leads to {}",
                        crate::text::for_log(&visible, 100),
                        crate::text::for_log(&target, 100)
                    ),
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hits(t: &str, html: bool) -> Vec<Hit> {
        let mut h = Vec::new();
        inspect(t.as_bytes(), html, &mut h);
        h
    }

    #[test]
    fn credentials_and_links() {
        let h = hits("Your account\nUsername: bob\nPassword: hunter22\n", false);
        assert_eq!(h[0].kind, "credentials");
        assert!(!format!("{h:?}").contains("hunter22"));
        let dump: String = (0..6)
            .map(|i| format!("u{i}@example.com:secret{i}\n"))
            .collect();
        assert_eq!(
            hits(&dump, false)[0].detail,
            "list of address:password lines"
        );
        let h = hits("see http://203.0.113.9/login and https://paypal.com@198.51.100.2/x and http://xn--pypal-4ve.com/", false);
        assert_eq!(h.len(), 3, "{h:?}");
        let h = hits(
            "<a href=\"https://evil.example.net/x\">https://www.bank.example.com</a>",
            true,
        );
        assert!(h[0].detail.contains("bank.example.com"), "{h:?}");
        assert!(hits(
            "<a href=\"https://www.example.com/\">example.com</a> password reset help",
            true
        )
        .is_empty());
    }
}
