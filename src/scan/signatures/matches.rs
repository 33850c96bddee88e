//! What a scan reports: [`Match`], and its conversion into a finding.

use std::path::Path;

use jiff::Timestamp;
use serde::Serialize;

use super::rules::Confidence;
use crate::findings::{Finding, Severity};

/// One rule that matched one file.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Match {
    pub rule_id: String,
    /// The rule's snake_case name, e.g. `php_eval_request`.
    pub name: String,
    /// The rule's category, e.g. `webshell`; the finding's `check`.
    pub category: String,
    pub severity: Severity,
    pub confidence: Confidence,
    /// Absolute byte offset in the file of the first regex match (or of the first anchor
    /// when the rule has no regex).
    pub offset: u64,
    /// At most [`ScanLimits::excerpt_max`] printable ASCII characters from the match
    /// (others shown as `.`, whitespace as a space).
    pub excerpt: String,
}

impl Match {
    /// Whether the rule is sure enough for automatic quarantine.
    pub fn is_high_confidence(&self) -> bool {
        self.confidence == Confidence::High
    }

    /// The finding for this match: `check` = category, message stable per (rule, path), e.g.
    /// `Webshell signature php_eval_request in /var/www/x.php`, `path` set; details carry the
    /// rule id, confidence, offset and excerpt. The caller sets `account`.
    pub fn to_finding(&self, path: &Path, now: Timestamp) -> Finding {
        let shown = sanitize_path(path);
        let message = format!(
            "{} signature {} in {}",
            category_label(&self.category),
            self.name,
            shown
        );
        let details = format!(
            "rule {} ({} confidence) matched at offset {}: {}",
            self.rule_id, self.confidence, self.offset, self.excerpt
        );
        Finding::new(self.category.clone(), self.severity, message, now)
            .with_details(details)
            .with_path(path.to_string_lossy().into_owned())
    }
}

/// Human label of a category: `webshell` -> `Webshell`, `obfuscated_php` -> `Obfuscated PHP`,
/// `htaccess_injection` -> `.htaccess injection`.
pub fn category_label(category: &str) -> String {
    let words: Vec<String> = category
        .split('_')
        .filter(|w| !w.is_empty())
        .map(|w| match w {
            "php" | "js" | "html" | "url" | "ip" => w.to_ascii_uppercase(),
            "htaccess" => ".htaccess".to_string(),
            _ => w.to_string(),
        })
        .collect();
    let mut s = words.join(" ");
    if let Some(first) = s.get(..1) {
        let up = first.to_ascii_uppercase();
        s.replace_range(..1, &up);
    }
    s
}

/// A path for a message: lossy UTF-8 with control characters escaped as `\xNN`.
fn sanitize_path(path: &Path) -> String {
    let lossy = path.to_string_lossy();
    let mut out = String::with_capacity(lossy.len());
    for c in lossy.chars() {
        if c.is_control() {
            out.push_str(&format!("\\x{:02x}", u32::from(c) & 0xff));
        } else {
            out.push(c);
        }
    }
    out
}

/// Up to `max` sanitized characters starting a little before `at`.
pub(crate) fn excerpt(data: &[u8], at: usize, max: usize) -> String {
    let start = at.saturating_sub(16).min(data.len());
    let end = start.saturating_add(max).min(data.len());
    data.get(start..end)
        .unwrap_or(&[])
        .iter()
        .map(|&b| match b {
            b'\t' | b'\n' | b'\r' => ' ',
            0x20..=0x7e => b as char,
            _ => '.',
        })
        .collect()
}
