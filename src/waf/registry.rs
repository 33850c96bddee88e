//! The rule-action registry (which rules deny) and svc's shipped rules.
//!
//! Formats that do not say whether a match denied (LiteSpeed's "triggered!" lines,
//! ModSecurity 3 JSON) are classified by the disruptive action the rule declares. The
//! registry reads rule files: each directive (continuation lines joined) with an `id:N`
//! action and a disruptive action (`deny`, `drop`, `block`, `redirect`: deny; `pass`,
//! `allow`: pass) is recorded; chained rules take the first rule's action, which is where
//! ModSecurity requires it.
//!
//! Guarantees: at most [`MAX_RULES`] rules and [`MAX_LINES`] lines per file are read (the
//! rest is counted in [`Registry::over_limit`]); parsing never panics.

use std::collections::HashMap;

use super::event::Action;
use super::parse::RuleActions;

/// svc's shipped rules (installed to `waf.rules_file`).
pub const SHIPPED_RULES: &str = include_str!("../../rules/modsecurity/svc-rules.conf");
/// svc's rule id range.
pub const SVC_RANGE: std::ops::RangeInclusive<u32> = 900_000..=900_999;
/// Most rules kept.
pub const MAX_RULES: usize = 200_000;
/// Most lines read per file.
pub const MAX_LINES: usize = 1_000_000;

/// Rule id to declared action.
#[derive(Default, Debug)]
pub struct Registry {
    actions: HashMap<u32, Action>,
    /// Files (or rules) left out over the limits.
    pub over_limit: u64,
}

impl RuleActions for Registry {
    fn action(&self, rule_id: u32) -> Option<Action> {
        self.actions.get(&rule_id).copied()
    }
}

/// One rule directive: its id, declared action, and the comment block above it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RuleInfo {
    pub id: u32,
    pub action: Option<Action>,
    pub description: String,
}

impl Registry {
    /// Adds the rules of one file's text.
    pub fn add_text(&mut self, text: &str) {
        for r in directives(text, &mut self.over_limit) {
            if self.actions.len() >= MAX_RULES {
                self.over_limit += 1;
                return;
            }
            if let Some(a) = r.action {
                self.actions.insert(r.id, a);
            }
        }
    }

    pub fn len(&self) -> usize {
        self.actions.len()
    }

    pub fn is_empty(&self) -> bool {
        self.actions.is_empty()
    }
}

/// The rules of a file, in order, with the comments above them.
pub fn directives(text: &str, over_limit: &mut u64) -> Vec<RuleInfo> {
    let mut out = Vec::new();
    let mut comment: Vec<&str> = Vec::new();
    let mut current = String::new();
    let mut chained = false;
    let mut n = 0usize;
    for raw in text.lines() {
        n += 1;
        if n > MAX_LINES {
            *over_limit += 1;
            break;
        }
        let line = raw.trim();
        if let Some(c) = line.strip_prefix('#') {
            if current.is_empty() {
                comment.push(c.trim());
            }
            continue;
        }
        if line.is_empty() {
            if current.is_empty() {
                comment.clear();
            }
            continue;
        }
        if let Some(head) = line.strip_suffix('\\') {
            if current.len() < 64 * 1024 {
                current.push_str(head);
                current.push(' ');
            }
            continue;
        }
        if current.len() < 64 * 1024 {
            current.push_str(line);
        }
        let directive = std::mem::take(&mut current);
        let was_chained = chained;
        if was_chained {
            // A chained rule: the first rule carried the id and action.
            chained = has_action(&directive, "chain");
            comment.clear();
            continue;
        }
        chained = has_action(&directive, "chain");
        if let Some(id) = id_of(&directive) {
            out.push(RuleInfo {
                id,
                action: action_of(&directive),
                description: describe(&comment, id),
            });
        }
        comment.clear();
    }
    out
}

/// The actions string of a directive: its last double-quoted argument.
fn actions_of(d: &str) -> &str {
    let Some(end) = d.rfind('"') else { return "" };
    let Some(start) = d[..end].rfind('"') else {
        return "";
    };
    &d[start + 1..end]
}

fn split_actions(d: &str) -> impl Iterator<Item = &str> {
    actions_of(d).split(',').map(str::trim)
}

fn has_action(d: &str, name: &str) -> bool {
    split_actions(d).any(|a| a.eq_ignore_ascii_case(name))
}

fn id_of(d: &str) -> Option<u32> {
    split_actions(d)
        .find_map(|a| a.strip_prefix("id:"))
        .and_then(|v| super::parse::rule_id(v.trim_matches('\'')))
}

fn action_of(d: &str) -> Option<Action> {
    for a in split_actions(d) {
        let name = a.split(':').next().unwrap_or("").to_ascii_lowercase();
        match name.as_str() {
            "deny" | "drop" | "block" | "redirect" => return Some(Action::Deny),
            "pass" | "allow" => return Some(Action::Pass),
            _ => {}
        }
    }
    None
}

/// The comment above a rule without its `NNNNNN:` prefix, one line.
fn describe(comment: &[&str], id: u32) -> String {
    let text = comment.join(" ");
    let prefix = format!("{id}:");
    text.strip_prefix(&prefix)
        .unwrap_or(&text)
        .trim()
        .to_string()
}

/// svc's shipped rules that act on requests (the marker and helper rules only set flags,
/// they are listed too, so an operator sees the whole file).
pub fn shipped() -> Vec<RuleInfo> {
    let mut over = 0;
    directives(SHIPPED_RULES, &mut over)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shipped_rules_are_in_range_with_descriptions() {
        let rules = shipped();
        assert!(rules.len() >= 10, "{rules:?}");
        for r in &rules {
            assert!(SVC_RANGE.contains(&r.id), "{r:?}");
            assert!(!r.description.is_empty(), "{r:?}");
        }
        let r112 = rules.iter().find(|r| r.id == 900112).unwrap();
        assert_eq!(r112.action, Some(Action::Deny));
        assert!(
            r112.description.contains("Denies an anonymous request"),
            "{}",
            r112.description
        );
        let r110 = rules.iter().find(|r| r.id == 900110).unwrap();
        assert_eq!(r110.action, Some(Action::Pass));
        let mut reg = Registry::default();
        reg.add_text(SHIPPED_RULES);
        assert_eq!(reg.action(900109), Some(Action::Deny));
        assert_eq!(reg.action(900100), Some(Action::Pass));
        assert_eq!(reg.action(1), None);
    }

    #[test]
    fn other_rule_files_and_garbage() {
        let mut reg = Registry::default();
        reg.add_text("SecRule ARGS \"@rx x\" \"id:1001,phase:2,block,log\"\nSecAction \\\n  \"id:1002,phase:1,pass,nolog\"\nSecRule A \"b\" \"id:'1003',deny,chain\"\n  SecRule B \"c\" \"id:9,pass\"\n\"\"\"\\");
        assert_eq!(reg.action(1001), Some(Action::Deny));
        assert_eq!(reg.action(1002), Some(Action::Pass));
        assert_eq!(reg.action(1003), Some(Action::Deny));
        assert_eq!(
            reg.action(9),
            None,
            "a chained rule's actions are not its own"
        );
    }
}
