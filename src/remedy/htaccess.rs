//! The injected directives an `.htaccess` (or `.user.ini`) fix removes: the lines the
//! `htaccess_injection` signatures report. Each is removed whole; every other byte stays.
//!
//! - `auto_prepend_file` / `auto_append_file` set by `php_value`, `php_admin_value` or an
//!   ini line, pointing at a temp directory, a hidden file, a URL or a non-PHP file;
//! - `AddHandler` / `AddType` mapping an image or text extension to PHP;
//! - `SetHandler` / `ForceType` / `AddHandler` to PHP (inside a `<Files>` block for static
//!   files; the block's other lines stay);
//! - a `RewriteRule` to another host (`http://`, `https://`) whose `RewriteCond` lines test
//!   the referer or user agent for search engines or bots, with those conditions (the
//!   cloaking redirect of SEO spam); other rewrite rules stay.

use std::sync::OnceLock;

use regex::bytes::Regex;

const STATIC_EXT: &str = r"(?:jpe?g|png|gif|bmp|ico|webp|txt|log|css|pdf|svg|zip|tiff?)";

fn patterns() -> &'static [Regex] {
    static P: OnceLock<Vec<Regex>> = OnceLock::new();
    P.get_or_init(|| {
        [
            format!(
                r#"(?i)^\s*(?:php_(?:admin_)?value\s+)?auto_(?:prepend|append)_file["' \t=]+["']?(?:[^"' \t\r\n]*/tmp/|[^"' \t\r\n]*/dev/shm/|php://|data:|https?://|ftp://|[^"' \t\r\n]*/\.[^/"' \t\r\n]+|[^"' \t\r\n]*\.(?:{STATIC_EXT}|js)(?:["' \t\r\n]|$))"#
            ),
            format!(r"(?i)^\s*(?:addhandler|addtype)\s+\S*php\S*.*[ \t]\.?{STATIC_EXT}\b"),
            r"(?i)^\s*(?:sethandler|forcetype)\s+\S*php".to_string(),
        ]
        .iter()
        .filter_map(|p| Regex::new(p).ok())
        .collect()
    })
}

struct Rewrite {
    cond: Regex,
    search_cond: Regex,
    remote_rule: Regex,
    rule: Regex,
}

fn rewrite() -> Option<&'static Rewrite> {
    static R: OnceLock<Option<Rewrite>> = OnceLock::new();
    R.get_or_init(|| {
        Some(Rewrite {
            cond: Regex::new(r"(?i)^\s*rewritecond\s").ok()?,
            search_cond: Regex::new(
                r"(?i)^\s*rewritecond\s+%\{http_(?:referer|user_agent)\}.*(?:google|bing|yahoo|baidu|yandex|duckduckgo|aol|ask|msn|bot|crawl|spider)",
            )
            .ok()?,
            remote_rule: Regex::new(r#"(?i)^\s*rewriterule\s+\S+\s+["']?https?://"#).ok()?,
            rule: Regex::new(r"(?i)^\s*rewriterule\s").ok()?,
        })
    })
    .as_ref()
}

/// Lines (0-based) of cloaking redirects: a remote `RewriteRule` and its conditions, when
/// one of them tests the referer or user agent for search engines or bots.
fn cloaking_lines(lines: &[&[u8]]) -> Vec<usize> {
    let Some(rw) = rewrite() else {
        return Vec::new();
    };
    let mut out = Vec::new();
    let mut conds: Vec<usize> = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        if rw.cond.is_match(line) {
            conds.push(i);
            continue;
        }
        if rw.rule.is_match(line)
            && rw.remote_rule.is_match(line)
            && conds.iter().any(|&c| rw.search_cond.is_match(lines[c]))
        {
            out.append(&mut conds);
            out.push(i);
        }
        conds.clear();
    }
    out
}

/// The file without its injected lines, and the 1-based numbers of the removed lines.
pub fn without_injections(bytes: &[u8]) -> (Vec<u8>, Vec<usize>) {
    let lines: Vec<&[u8]> = bytes.split_inclusive(|b| *b == b'\n').collect();
    let cloaking = cloaking_lines(&lines);
    let mut out = Vec::with_capacity(bytes.len());
    let mut removed = Vec::new();
    let p = patterns();
    for (i, line) in lines.iter().enumerate() {
        if cloaking.contains(&i) || p.iter().any(|r| r.is_match(line)) {
            removed.push(i + 1);
        } else {
            out.extend_from_slice(line);
        }
    }
    (out, removed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_injected_lines_go() {
        assert_eq!(patterns().len(), 3, "every pattern compiles");
        let f = b"RewriteEngine On\nphp_value auto_prepend_file /tmp/.x.php\nAddHandler application/x-httpd-php .jpg\nAddHandler application/x-httpd-php .php\n<FilesMatch \"\\.png$\">\nSetHandler application/x-httpd-php\n</FilesMatch>\nphp_value auto_prepend_file /var/www/site/prepend.php\n";
        let (out, removed) = without_injections(f);
        assert_eq!(removed, [2, 3, 6]);
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "RewriteEngine On\nAddHandler application/x-httpd-php .php\n<FilesMatch \"\\.png$\">\n</FilesMatch>\nphp_value auto_prepend_file /var/www/site/prepend.php\n"
        );
        assert_eq!(
            without_injections(b"Options -Indexes").1,
            Vec::<usize>::new()
        );
    }
}
