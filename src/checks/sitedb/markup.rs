//! Injected markup in database values: `<script>` and `<iframe>` elements, which of them are
//! foreign (a `src` on another host) or suspicious inline code, and the value with them
//! removed. PHP-serialized values (widget options) keep valid string lengths after removal.

/// One flagged element: its byte range in the value and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Flagged {
    pub start: usize,
    pub end: usize,
    pub why: String,
}

/// Inline script code that injected scripts use and themes rarely do.
const SUSPICIOUS_INLINE: [&str; 6] = [
    "eval(",
    "atob(",
    "fromcharcode",
    "unescape(",
    "document.write",
    "\\x",
];

fn find_ci(hay: &[u8], needle: &[u8], from: usize) -> Option<usize> {
    if from >= hay.len() || needle.is_empty() {
        return None;
    }
    hay[from..]
        .windows(needle.len())
        .position(|w| w.eq_ignore_ascii_case(needle))
        .map(|i| i + from)
}

/// The host of a URL (`https://h/`, `//h/`); None for relative URLs.
pub fn url_host(url: &str) -> Option<String> {
    let url = url.trim();
    let rest = match url.find("//") {
        Some(i)
            if url[..i]
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == ':' || c == '+') =>
        {
            &url[i + 2..]
        }
        _ => return None,
    };
    let end = rest.find(['/', '?', '#', '\\']).unwrap_or(rest.len());
    let authority = &rest[..end];
    let host = authority.rsplit('@').next().unwrap_or(authority);
    let host = match host.rfind(':') {
        Some(i) if !host.starts_with('[') || host[..i].ends_with(']') => &host[..i],
        _ => host,
    };
    let host = host.trim_end_matches('.').to_ascii_lowercase();
    (!host.is_empty()).then_some(host)
}

/// A host other than the site's (its `www.` twin is the site's too).
pub fn foreign(host: &str, site: Option<&str>) -> bool {
    let Some(site) = site else {
        return true;
    };
    let strip = |h: &str| h.strip_prefix("www.").unwrap_or(h).to_string();
    strip(host) != strip(site)
}

/// The `src` attribute in a start tag.
fn src_of(tag: &[u8]) -> Option<String> {
    let at = find_ci(tag, b"src", 0)?;
    let mut i = at + 3;
    while tag.get(i).is_some_and(|b| b.is_ascii_whitespace()) {
        i += 1;
    }
    if tag.get(i) != Some(&b'=') {
        return None;
    }
    i += 1;
    while tag.get(i).is_some_and(|b| b.is_ascii_whitespace()) {
        i += 1;
    }
    // Serialized or escaped values may carry `\"`.
    while tag.get(i) == Some(&b'\\') {
        i += 1;
    }
    let (quote, start) = match tag.get(i) {
        Some(q @ (b'"' | b'\'')) => (Some(*q), i + 1),
        _ => (None, i),
    };
    let end = (start..tag.len())
        .find(|&j| match quote {
            Some(q) => tag[j] == q || tag[j] == b'\\',
            None => tag[j].is_ascii_whitespace() || tag[j] == b'>',
        })
        .unwrap_or(tag.len());
    Some(String::from_utf8_lossy(&tag[start..end]).into_owned())
}

/// Scripts and iframes in `value` that look injected: every script when `all_scripts`
/// (widget options hold none legitimately often enough), otherwise scripts loaded from a
/// foreign host or with suspicious inline code; iframes from a foreign host.
pub fn flagged(value: &[u8], site: Option<&str>, all_scripts: bool) -> Vec<Flagged> {
    let mut out = Vec::new();
    let mut from = 0;
    loop {
        let s = find_ci(value, b"<script", from);
        let f = find_ci(value, b"<iframe", from);
        let (start, script) = match (s, f) {
            (Some(s), Some(f)) if f < s => (f, false),
            (Some(s), _) => (s, true),
            (None, Some(f)) => (f, false),
            (None, None) => return out,
        };
        let tag_end = value[start..]
            .iter()
            .position(|b| *b == b'>')
            .map_or(value.len(), |i| start + i + 1);
        let tag = &value[start..tag_end];
        let close: &[u8] = if script { b"</script" } else { b"</iframe" };
        let end = match find_ci(value, close, tag_end) {
            Some(c) => value[c..]
                .iter()
                .position(|b| *b == b'>')
                .map_or(value.len(), |i| c + i + 1),
            None => tag_end,
        };
        let src = src_of(tag);
        let src_host = src.as_deref().and_then(url_host);
        let why = match (script, &src_host) {
            (_, Some(h)) if foreign(h, site) => Some(format!(
                "{} from {h}",
                if script { "script" } else { "iframe" }
            )),
            (true, _) if all_scripts => Some("script in a widget".to_string()),
            (true, None) => {
                let body = String::from_utf8_lossy(&value[tag_end..end]).to_ascii_lowercase();
                SUSPICIOUS_INLINE
                    .iter()
                    .find(|s| body.contains(*s))
                    .map(|s| format!("inline script with {s}"))
            }
            _ => None,
        };
        if let Some(why) = why {
            out.push(Flagged { start, end, why });
        }
        from = end.max(start + 1);
    }
}

/// `value` without the flagged elements; in a PHP-serialized value (`s:N:"...";`) each
/// string is cleaned on its own and its length rewritten.
pub fn cleaned(value: &[u8], site: Option<&str>, all_scripts: bool) -> Vec<u8> {
    if let Some(v) = clean_serialized(value, site, all_scripts) {
        return v;
    }
    cleaned_plain(value, site, all_scripts)
}

/// `value` without the flagged elements, as plain text (post content).
pub fn cleaned_plain(value: &[u8], site: Option<&str>, all_scripts: bool) -> Vec<u8> {
    remove(value, &flagged(value, site, all_scripts))
}

fn remove(value: &[u8], flags: &[Flagged]) -> Vec<u8> {
    let mut out = Vec::with_capacity(value.len());
    let mut at = 0;
    for f in flags {
        if f.start >= at {
            out.extend_from_slice(&value[at..f.start]);
            at = f.end;
        }
    }
    out.extend_from_slice(&value[at.min(value.len())..]);
    out
}

/// Rewrites every `s:N:"...";` of a serialized value; None when it is not one (a length
/// that does not fit the bytes).
fn clean_serialized(value: &[u8], site: Option<&str>, all_scripts: bool) -> Option<Vec<u8>> {
    let kind_ok = value.starts_with(b"a:") || value.starts_with(b"s:") || value.starts_with(b"O:");
    if !kind_ok || !value.get(2).is_some_and(u8::is_ascii_digit) {
        return None;
    }
    let mut out = Vec::with_capacity(value.len());
    let mut i = 0;
    while i < value.len() {
        if value[i..].starts_with(b"s:") && (i == 0 || matches!(value[i - 1], b';' | b'{' | b'}')) {
            let digits_start = i + 2;
            let digits_end = (digits_start..value.len()).find(|&j| !value[j].is_ascii_digit())?;
            let n: usize = std::str::from_utf8(&value[digits_start..digits_end])
                .ok()?
                .parse()
                .ok()?;
            if value.get(digits_end..digits_end + 2) != Some(b":\"") {
                return None;
            }
            let body_start = digits_end + 2;
            let body_end = body_start.checked_add(n)?;
            if value.get(body_end..body_end + 2) != Some(b"\";") {
                return None;
            }
            let body = &value[body_start..body_end];
            let clean = remove(body, &flagged(body, site, all_scripts));
            out.extend_from_slice(format!("s:{}:\"", clean.len()).as_bytes());
            out.extend_from_slice(&clean);
            out.extend_from_slice(b"\";");
            i = body_end + 2;
        } else {
            out.push(value[i]);
            i += 1;
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_of_urls() {
        assert_eq!(
            url_host("https://Shop.Example.org/x").as_deref(),
            Some("shop.example.org")
        );
        assert_eq!(
            url_host("//cdn.example.net:8443/a.js").as_deref(),
            Some("cdn.example.net")
        );
        assert_eq!(url_host("/wp-includes/a.js"), None);
        assert!(!foreign("www.example.org", Some("example.org")));
        assert!(foreign("evil.example", Some("example.org")));
    }

    #[test]
    fn widget_scripts_and_foreign_elements_are_flagged_and_removed() {
        let v = br#"<p>Hi</p><script src="https://evil.example/x.js"></script><iframe src="https://example.org/map"></iframe>"#;
        let f = flagged(v, Some("example.org"), false);
        assert_eq!(f.len(), 1);
        assert_eq!(f[0].why, "script from evil.example");
        assert_eq!(
            cleaned(v, Some("example.org"), false),
            br#"<p>Hi</p><iframe src="https://example.org/map"></iframe>"#.to_vec()
        );
        assert!(flagged(b"<script>var a = 1;</script>", Some("example.org"), false).is_empty());
        assert_eq!(
            flagged(b"<script>eval(atob('YQ=='))</script>", None, false).len(),
            1
        );
        assert_eq!(flagged(b"<SCRIPT>var a = 1;</SCRIPT>", None, true).len(), 1);
    }

    #[test]
    fn serialized_lengths_are_rewritten() {
        let inner = r#"ok<script src=\"https://evil.example/x.js\"></script>"#;
        let v = format!(
            "a:2:{{i:2;a:2:{{s:5:\"title\";s:0:\"\";s:4:\"text\";s:{}:\"{inner}\";}}s:12:\"_multiwidget\";i:1;}}",
            inner.len()
        );
        let c = cleaned(v.as_bytes(), Some("example.org"), true);
        assert_eq!(
            String::from_utf8(c).unwrap(),
            "a:2:{i:2;a:2:{s:5:\"title\";s:0:\"\";s:4:\"text\";s:2:\"ok\";}s:12:\"_multiwidget\";i:1;}"
        );
        // Not serialized after all: cleaned as plain text.
        assert_eq!(cleaned(b"a:<script>x</script>", None, true), b"a:".to_vec());
    }
}
