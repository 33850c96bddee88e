//! `[waf]`: the ModSecurity integration (see `waf`).
//!
//! Rule management (`POST /api/v1/waf/rules/apply`) needs the three keys `rules_file`,
//! `overrides_file` and `reload_command`; escalation exclusions, detection, staleness and
//! event parsing work without them. Every key here is applied live by a reload (the WAF
//! check reads the section in effect at each run, the log collector's thresholds are
//! shared); `logs.waf` (beside `logs.auth`) restarts the WAF log collector.

use std::path::PathBuf;

use toml::Value;

use super::reader::{Errors, TableReader};

/// `[waf]`, validated.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WafConfig {
    /// `waf.enabled`: false turns the whole integration off (no check, no log collector).
    pub enabled: bool,
    /// `waf.rules_file`: where svc's rules (IDs 900000-900999) are deployed. On the
    /// hosting-panel platform the daemon writes it; elsewhere `svc waf install-rules --write`.
    pub rules_file: Option<PathBuf>,
    /// `waf.overrides_file`: the file of `SecRuleRemoveById` lines the daemon owns (include
    /// it after every rule file).
    pub overrides_file: Option<PathBuf>,
    /// `waf.reload_command`: argv of the web-server reload (a service-manager command, run
    /// without a shell). Empty: no reload; rules wait for the next web-server restart.
    pub reload_command: Vec<String>,
    /// `waf.reload_timeout_seconds`: deadline of one reload run.
    pub reload_timeout_seconds: u64,
    /// `waf.escalation_denies`: denies from one address within the window that raise
    /// `modsec_block_escalation`.
    pub escalation_denies: u32,
    /// `waf.escalation_window_minutes`.
    pub escalation_window_minutes: u64,
    /// `waf.rules_stale_days`: rule trees older than this raise `waf_status`.
    pub rules_stale_days: u64,
    /// `waf.event_retention_days`: WAF events older than this are deleted.
    pub event_retention_days: u64,
    /// `waf.max_events`: WAF events kept at most (the oldest are deleted first).
    pub max_events: u64,
    /// `waf.max_tracked_addresses`: addresses with an open escalation window at once.
    pub max_tracked_addresses: usize,
}

impl Default for WafConfig {
    /// The defaults of `config::keys::KEYS`.
    fn default() -> Self {
        read(&mut TableReader::new(None, ""), &mut Errors::default())
    }
}

impl WafConfig {
    /// The three keys rule management needs, named when one is missing.
    pub fn management_missing(&self) -> Vec<&'static str> {
        let mut out = Vec::new();
        if self.rules_file.is_none() {
            out.push("waf.rules_file");
        }
        if self.overrides_file.is_none() {
            out.push("waf.overrides_file");
        }
        if self.reload_command.is_empty() {
            out.push("waf.reload_command");
        }
        out
    }
}

fn absolute(t: &mut TableReader<'_>, key: &'static str, errs: &mut Errors) -> Option<PathBuf> {
    let v = t.string(key, errs);
    if v.is_empty() {
        return None;
    }
    if !v.starts_with('/') || v.contains('\0') {
        errs.push(t.key(key), "must be an absolute path");
        return None;
    }
    Some(PathBuf::from(v))
}

/// Longest accepted reload command (all arguments), in bytes.
const MAX_COMMAND_BYTES: usize = 4096;

fn command(t: &mut TableReader<'_>, errs: &mut Errors) -> Vec<String> {
    let key = t.key("reload_command");
    let argv: Vec<String> = match t.raw("reload_command") {
        None => return Vec::new(),
        Some(Value::String(s)) => s.split_whitespace().map(str::to_string).collect(),
        Some(Value::Array(items)) => {
            let mut out = Vec::new();
            for (i, v) in items.iter().enumerate() {
                match v {
                    Value::String(s) => out.push(s.clone()),
                    _ => errs.push(format!("{key}[{i}]"), "must be a string"),
                }
            }
            out
        }
        Some(_) => {
            errs.push(key, "must be a string or an array of strings");
            return Vec::new();
        }
    };
    if argv.iter().any(|a| a.contains('\0')) {
        errs.push(key, "must not contain NUL");
        return Vec::new();
    }
    if argv.iter().map(String::len).sum::<usize>() > MAX_COMMAND_BYTES {
        errs.push(key, format!("must be at most {MAX_COMMAND_BYTES} bytes"));
        return Vec::new();
    }
    if let Some(first) = argv.first() {
        if first.is_empty() || (first.contains('/') && !first.starts_with('/')) {
            errs.push(
                key,
                "the program must be a name looked up in PATH or an absolute path",
            );
            return Vec::new();
        }
    }
    argv
}

/// Reads `[waf]` from the root table.
pub(super) fn read(root: &mut TableReader<'_>, errs: &mut Errors) -> WafConfig {
    let mut t = root.table("waf", errs);
    let cfg = WafConfig {
        enabled: t.bool("enabled", errs),
        rules_file: absolute(&mut t, "rules_file", errs),
        overrides_file: absolute(&mut t, "overrides_file", errs),
        reload_command: command(&mut t, errs),
        reload_timeout_seconds: t.int("reload_timeout_seconds", errs) as u64,
        escalation_denies: t.int("escalation_denies", errs) as u32,
        escalation_window_minutes: t.int("escalation_window_minutes", errs) as u64,
        rules_stale_days: t.int("rules_stale_days", errs) as u64,
        event_retention_days: t.int("event_retention_days", errs) as u64,
        max_events: t.int("max_events", errs) as u64,
        max_tracked_addresses: t.int("max_tracked_addresses", errs) as usize,
    };
    if let (Some(r), Some(o)) = (&cfg.rules_file, &cfg.overrides_file) {
        if r == o {
            errs.push(t.key("overrides_file"), "must differ from waf.rules_file");
        }
    }
    t.finish(errs);
    cfg
}

#[cfg(test)]
mod tests {
    use crate::config::{from_table, parse_str};

    fn check(text: &str) -> Result<super::WafConfig, Vec<String>> {
        let t = parse_str(text).map_err(|e| vec![e.to_string()])?;
        from_table(&t, vec![])
            .map(|c| c.waf)
            .map_err(|es| es.iter().map(|e| e.to_string()).collect())
    }

    #[test]
    fn defaults_and_keys() {
        let c = check("").unwrap();
        assert_eq!(c, super::WafConfig::default());
        assert_eq!(
            (
                c.escalation_denies,
                c.escalation_window_minutes,
                c.rules_stale_days
            ),
            (3, 10, 90)
        );
        assert_eq!(
            c.management_missing(),
            ["waf.rules_file", "waf.overrides_file", "waf.reload_command"]
        );
        let c = check(
            "[waf]\nrules_file = \"/etc/svc/waf/rules.conf\"\noverrides_file = \"/etc/svc/waf/overrides.conf\"\nreload_command = \"systemctl reload apache2\"\nescalation_denies = 5\n",
        )
        .unwrap();
        assert_eq!(c.reload_command, ["systemctl", "reload", "apache2"]);
        assert!(c.management_missing().is_empty());
        assert_eq!(c.escalation_denies, 5);
        let c = check("[waf]\nreload_command = [\"/usr/sbin/apachectl\", \"-k\", \"graceful\"]\n")
            .unwrap();
        assert_eq!(c.reload_command.len(), 3);
    }

    #[test]
    fn errors_name_their_keys() {
        let e = check(
            "[waf]\nrules_file = \"rel.conf\"\nreload_command = [\"bin/x\"]\nescalation_denies = 0\nbogus = 1\n",
        )
        .unwrap_err();
        let joined = e.join("\n");
        for key in [
            "waf.rules_file: must be an absolute path",
            "waf.reload_command: the program",
            "waf.escalation_denies: must be between",
            "waf.bogus: unknown key",
        ] {
            assert!(joined.contains(key), "{key}: {joined}");
        }
        let e = check("[waf]\nrules_file = \"/a\"\noverrides_file = \"/a\"\n").unwrap_err();
        assert!(e[0].contains("must differ"), "{e:?}");
        let e = check("[waf]\nreload_command = 5\n").unwrap_err();
        assert!(e[0].starts_with("waf.reload_command"), "{e:?}");
    }
}
