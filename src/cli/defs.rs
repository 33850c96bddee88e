//! Every command and flag of `svc`, each defined once (ripgrep's `flags/defs.rs` manner).
//!
//! [`COMMANDS`] is the one list: the parser ([`super::args`]), `svc --help`,
//! `svc CMD --help`, the man page `svc.8` and the shell completions
//! ([`super::gen`]) are all rendered from it, so a flag added here appears everywhere and a
//! flag not added here is refused everywhere.
//!
//! Guarantees (held by the tests below):
//! - within one command no two flags share a long or a short name, and no two verbs a name;
//! - every flag and verb has help text, every value flag names its value;
//! - a verb-specific flag ([`Verb::flags`]) is also one of its command's flags.

/// One flag.
#[derive(Debug)]
pub struct Flag {
    /// The long name without `--`.
    pub long: &'static str,
    /// The short name without `-`.
    pub short: Option<char>,
    /// The name of its value (`FILE`), or `None` for a switch.
    pub value: Option<&'static str>,
    /// One line of help.
    pub help: &'static str,
}

impl Flag {
    /// `-c, --config FILE` / `--json`.
    pub fn spelling(&self) -> String {
        let mut s = match self.short {
            Some(c) => format!("-{c}, --{}", self.long),
            None => format!("--{}", self.long),
        };
        if let Some(v) = self.value {
            s.push(' ');
            s.push_str(v);
        }
        s
    }
}

/// What a command takes besides flags.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Positional {
    /// Nothing.
    None,
    /// A verb from [`Command::verbs`] and its arguments (checked by the command).
    Verbs,
}

/// A verb of a command with sub-actions (`svc firewall block IP`).
#[derive(Debug)]
pub struct Verb {
    pub name: &'static str,
    /// Its arguments as shown in help (`IP`, `[RULE on|off]`).
    pub args: &'static str,
    pub summary: &'static str,
    /// The verb-specific flags it accepts; flags of the command that no verb names apply
    /// to every verb.
    pub flags: &'static [&'static Flag],
}

/// One subcommand.
#[derive(Debug)]
pub struct Command {
    pub name: &'static str,
    /// One line for `svc --help`.
    pub summary: &'static str,
    /// A paragraph for `svc CMD --help` and the man page (may be empty).
    pub about: &'static str,
    pub positional: Positional,
    pub verbs: &'static [Verb],
    pub flags: &'static [&'static Flag],
    /// Exit statuses beyond the usual (0 done, 1 failed, 2 usage error), for help and man.
    pub exit: &'static str,
}

/// A verb (a constructor keeps the table one line a verb).
const fn verb(
    name: &'static str,
    args: &'static str,
    summary: &'static str,
    flags: &'static [&'static Flag],
) -> Verb {
    Verb {
        name,
        args,
        summary,
        flags,
    }
}

impl Command {
    /// The verb named `name`.
    pub fn verb(&self, name: &str) -> Option<&'static Verb> {
        self.verbs.iter().find(|v| v.name == name)
    }

    /// The verbs that name `flag` as theirs (empty: the flag applies to every verb).
    pub fn verbs_of(&self, flag: &Flag) -> Vec<&'static str> {
        self.verbs
            .iter()
            .filter(|v| v.flags.iter().any(|f| std::ptr::eq(*f, flag)))
            .map(|v| v.name)
            .collect()
    }

    /// `svc firewall <command> [ARG...] [options]`.
    pub fn synopsis(&self) -> String {
        match self.positional {
            Positional::None => format!("svc {} [options]", self.name),
            Positional::Verbs => format!("svc {} <command> [ARG...] [options]", self.name),
        }
    }
}

// ---- flags ----------------------------------------------------------------------------

pub static CONFIG: Flag = Flag {
    long: "config",
    short: Some('c'),
    value: Some("FILE"),
    help: "main configuration file (default /etc/svc/svc.toml; drop-ins in conf.d/ beside it)",
};
pub static DEV: Flag = Flag {
    long: "dev",
    short: None,
    value: None,
    help: "use the --dev configuration of this directory (./.svc-dev): talk to a daemon started with --dev here",
};
pub static DEV_DAEMON: Flag = Flag {
    long: "dev",
    short: None,
    value: None,
    help: "embedded default: state in ./.svc-dev, HTTPS on 127.0.0.1:9443, generated tokens",
};
pub static JSON: Flag = Flag {
    long: "json",
    short: None,
    value: None,
    help: "print the answer as JSON",
};
pub static HELP: Flag = Flag {
    long: "help",
    short: Some('h'),
    value: None,
    help: "print this help",
};
pub static FOR: Flag = Flag {
    long: "for",
    short: None,
    value: Some("DURATION"),
    help: "lifetime such as 4s, 90s, 15m, 24h, 7d (default: permanent)",
};
pub static REASON: Flag = Flag {
    long: "reason",
    short: None,
    value: Some("TEXT"),
    help: "why (shown in lists and checks)",
};
pub static PERMANENT: Flag = Flag {
    long: "permanent",
    short: None,
    value: None,
    help: "no expiry (permanent evidence)",
};
pub static HOURS: Flag = Flag {
    long: "hours",
    short: None,
    value: Some("H"),
    help: "a temporary whitelist of H hours (1-168), one address",
};
pub static LIMIT: Flag = Flag {
    long: "limit",
    short: None,
    value: Some("N"),
    help: "how many (1-1000)",
};
pub static SERVER: Flag = Flag {
    long: "server",
    short: None,
    value: Some("NAME"),
    help:
        "the web server: apache or nginx (waf install-rules: also litespeed); default: those found",
};
pub static FROM: Flag = Flag {
    long: "from",
    short: None,
    value: Some("SOURCE"),
    help: "update-cms-vulnerabilities: the new list, a JSON file or an https:// URL (http:// to loopback only)",
};
pub static WRITE: Flag = Flag {
    long: "write",
    short: None,
    value: None,
    help: "write the rules to waf.rules_file and an empty waf.overrides_file when absent",
};

// ---- commands -------------------------------------------------------------------------

/// The flags of a command that talks to a running daemon.
const CLIENT: &[&Flag] = &[&JSON, &CONFIG, &DEV, &HELP];

pub static DAEMON: Command = Command {
    name: "daemon",
    summary: "run the daemon in the foreground until SIGTERM or SIGINT",
    about: "Runs the daemon in the foreground: file and log watchers, the engine, the HTTPS API and the control socket. SIGHUP re-reads the configuration; SIGTERM or SIGINT stop it cleanly.",
    positional: Positional::None,
    verbs: &[],
    flags: &[&CONFIG, &DEV_DAEMON, &HELP],
    exit: "1 when the daemon cannot start (the reason on standard error)",
};

pub static VALIDATE: Command = Command {
    name: "validate",
    summary: "check the configuration; one line per error, naming the key",
    about: "Reads the configuration and its drop-ins and prints every error, one line each, naming the full dotted key.",
    positional: Positional::None,
    verbs: &[],
    flags: &[&CONFIG, &HELP],
    exit: "1 when the configuration is invalid",
};

pub static RELOAD: Command = Command {
    name: "reload",
    summary: "make the running daemon re-read its configuration (as SIGHUP; systemd ExecReload); errors print like validate, exit 1",
    about: "Asks the running daemon to re-read its configuration, as SIGHUP does. Keys that need a restart are listed; an invalid configuration is refused and nothing changes.",
    positional: Positional::None,
    verbs: &[],
    flags: CLIENT,
    exit: "1 when the daemon refused the configuration, could not apply it or is not running",
};

pub static STATUS: Command = Command {
    name: "status",
    summary: "ask the running daemon for its status over the control socket",
    about: "Prints the daemon's status; with --json, {\"snapshot\": ...}: the object GET /api/v1/status returns.",
    positional: Positional::None,
    verbs: &[],
    flags: CLIENT,
    exit: "1 when the daemon is not running or not responding",
};

pub static DOCTOR: Command = Command {
    name: "doctor",
    summary: "named health checks of the running daemon: config, store, TLS, collectors, queues; exit 1 when anything is degraded",
    about: "",
    positional: Positional::None,
    verbs: &[],
    flags: CLIENT,
    exit: "1 when any check is degraded or failing, or the daemon is not running",
};

pub static CHECK: Command = Command {
    name: "check",
    summary: "run every scheduled check through the daemon now and print its findings",
    about: "",
    positional: Positional::None,
    verbs: &[],
    flags: CLIENT,
    exit: "",
};

pub static QUARANTINE: Command = Command {
    name: "quarantine",
    summary: "list quarantined files, or restore one exactly (`svc quarantine list`, `svc quarantine restore ID`)",
    about: "",
    positional: Positional::Verbs,
    verbs: &[
        verb("list", "", "quarantined files, newest first", &[]),
        verb("restore", "ID", "put one back exactly (path, owner, mode, times)", &[]),
    ],
    flags: CLIENT,
    exit: "",
};

pub static FIREWALL: Command = Command {
    name: "firewall",
    summary: "the daemon's nftables firewall: status, list, check, block, unblock, allow, rollback (`svc firewall --help`)",
    about: "The daemon's nftables firewall (table inet svc), over the control socket; this command never runs nft itself.",
    positional: Positional::Verbs,
    verbs: &[
        verb("status", "", "mode, table, set sizes, last re-assertion, rollback state", &[]),
        verb("list", "", "blocks and dry-run records, newest first", &[]),
        verb("check", "IP", "what the firewall does with an address", &[]),
        verb("block", "IP", "block an address (permanent unless --for)", &[&FOR, &REASON]),
        verb("unblock", "IP", "remove every block of an address (not subnets)", &[]),
        verb("allow", "IP", "put an address or range on the allow list (--for for a time)", &[&FOR, &REASON]),
        verb("unallow", "IP", "remove an allow entry", &[]),
        verb("deny-subnet", "CIDR", "block a range permanently", &[&REASON]),
        verb("remove-subnet", "CIDR", "remove a range block", &[]),
        verb("flush", "", "remove every temporary block (permanent ones stay)", &[]),
        verb("rollback", "[status|confirm|revert]", "the tentative settings change and its timer", &[]),
        verb("confirm", "", "keep the tentative settings change (same as rollback confirm)", &[]),
        verb("revert", "", "undo the tentative settings change now (same as rollback revert)", &[]),
    ],
    flags: &[&FOR, &REASON, &JSON, &CONFIG, &DEV, &HELP],
    exit: "",
};

pub static MAIL: Command = Command {
    name: "mail",
    summary:
        "the mail antivirus: status, stats, quarantined mail, release, delete (`svc mail --help`)",
    about: "The mail antivirus (spool watcher, clamd, mail quarantine), over the control socket.",
    positional: Positional::Verbs,
    verbs: &[
        verb(
            "status",
            "",
            "watcher, spool, clamd health and version, staging",
            &[],
        ),
        verb(
            "stats",
            "",
            "messages scanned, infected, quarantined, incomplete",
            &[],
        ),
        verb("list", "", "quarantined messages, newest first", &[]),
        verb(
            "release",
            "ID",
            "put a quarantined message back into its spool",
            &[],
        ),
        verb("delete", "ID", "delete a quarantined message", &[]),
    ],
    flags: CLIENT,
    exit: "",
};

pub static WAF: Command = Command {
    name: "waf",
    summary: "the ModSecurity integration: install-rules, stats, rules, escalation, apply (`svc waf --help`)",
    about: "The ModSecurity integration. install-rules works without the daemon (it reads the configuration and the rules built into this binary); the other commands ask the running daemon.",
    positional: Positional::Verbs,
    verbs: &[
        verb("install-rules", "", "print the include lines for the web server (--server), or install svc's rules (--write)", &[&SERVER, &WRITE]),
        verb("stats", "", "collector, denies in 24 h, top rules and addresses", &[]),
        verb("rules", "", "svc's rules: enabled, staged, escalation, hits in 24 h", &[]),
        verb("escalation", "[RULE on|off]", "list the rules excluded from escalation, or turn a rule's escalation on or off", &[]),
        verb("apply", "[RULE...]", "disable exactly these rules (none: enable all) and reload the web server once", &[]),
    ],
    flags: &[&SERVER, &WRITE, &JSON, &CONFIG, &DEV, &HELP],
    exit: "",
};

pub static THREAT: Command = Command {
    name: "threat",
    summary: "threat intelligence: lookup, block, whitelist, clear, stats, undo (`svc threat --help`)",
    about: "Threat intelligence (attack database, verdicts, blocks, whitelist) over the control socket: the same requests as the /api/v1/threat/* routes.",
    positional: Positional::Verbs,
    verbs: &[
        verb("lookup", "IP", "verdict, score, sources, GeoIP, RDAP, block state and recent events of an address", &[]),
        verb("block", "IP...", "block for 24 hours (--permanent: with no expiry and permanent evidence)", &[&PERMANENT, &REASON]),
        verb("whitelist", "IP...", "put on the permanent whitelist (--hours H: one address for H hours, 1-168)", &[&HOURS, &REASON]),
        verb("unwhitelist", "IP...", "remove from the whitelist", &[]),
        verb("clear", "IP...", "clear the score and evidence (events, firewall and blocklist entries stay)", &[]),
        verb("stats", "", "attack statistics and type breakdown", &[]),
        verb("top", "", "top attacking addresses (--limit N)", &[&LIMIT]),
        verb("events", "IP", "event history of an address (--limit N)", &[&LIMIT]),
        verb("undo", "[TOKEN]", "list the undoable changes made from the command line, or undo one", &[]),
    ],
    flags: &[&PERMANENT, &HOURS, &REASON, &LIMIT, &JSON, &CONFIG, &DEV, &HELP],
    exit: "",
};

pub static FLEET: Command = Command {
    name: "fleet",
    summary: "fleet mode (CrowdSec Local API): status (`svc fleet --help`)",
    about: "Fleet mode: the link to the CrowdSec Local API, over the control socket (the same answer as GET /api/v1/fleet).",
    positional: Positional::Verbs,
    verbs: &[verb(
        "status",
        "",
        "the LAPI link, decisions received/applied/refused/skipped, alerts sent/pending",
        &[],
    )],
    flags: CLIENT,
    exit: "",
};

pub static WEBSERVER_INTEGRATION: Command = Command {
    name: "webserver-integration",
    summary: "Apache/nginx snippets that send challenged addresses to the proof-of-work challenge: install, status, remove",
    about: "The web-server snippets that send addresses routed to the proof-of-work challenge to challenge.public_url. Works without the daemon: it reads the configuration (defaults when there is no file).",
    positional: Positional::Verbs,
    verbs: &[
        verb("install", "", "write the Apache and/or nginx snippets (challenge.apache_file, challenge.nginx_*_file)", &[&SERVER]),
        verb("status", "", "which snippets are installed, and whether the daemon keeps the map fresh", &[]),
        verb("remove", "", "delete the snippets svc wrote", &[&SERVER]),
    ],
    flags: &[&SERVER, &JSON, &CONFIG, &HELP],
    exit: "1 (status) when nothing is installed or the map is not fresh",
};

pub static UPDATE_BOT_RANGES: Command = Command {
    name: "update-bot-ranges",
    summary:
        "fetch published crawler ranges, write the snapshot and have the running daemon apply it",
    about: "",
    positional: Positional::None,
    verbs: &[],
    flags: CLIENT,
    exit: "1 when a feed failed (the others are still written) or nothing could be written",
};

pub static UPDATE_CMS_VULNERABILITIES: Command = Command {
    name: "update-cms-vulnerabilities",
    summary: "replace the plugin and theme vulnerability list the CMS verification uses (`--from FILE|URL`)",
    about: "Reads a JSON array of {slug, type, fixed_in, title} from a file or an https:// URL, checks it and writes it atomically to cms.vulnerability_file, or to state_path/cms-vulnerabilities.json when that key is unset. The daemon reads the list at each deep scan: no restart is needed.",
    positional: Positional::None,
    verbs: &[],
    flags: &[&FROM, &JSON, &CONFIG, &DEV, &HELP],
    exit: "1 when the source could not be read or holds no usable entry, or the list could not be written",
};

pub static STORE: Command = Command {
    name: "store",
    summary: "state-database maintenance: `svc store reset-bot-verify` clears crawler verification records",
    about: "",
    positional: Positional::Verbs,
    verbs: &[verb("reset-bot-verify", "", "clear crawler verification records and cached results (through the daemon, or in the store when it is stopped)", &[])],
    flags: CLIENT,
    exit: "",
};

pub static GEN: Command = Command {
    name: "gen",
    summary: "write the man pages, shell completions, the key reference or the example configuration from the tables (`svc gen man DIR`, `svc gen completions SHELL`, `svc gen config-docs FILE`, `svc gen example-config FILE`)",
    about: "Generators for packagers: the man pages svc.8 and svc.toml.5, shell completions, the key tables of docs/configuration.md and the example svc.toml, rendered from the same tables as --help and the configuration reader.",
    positional: Positional::Verbs,
    verbs: &[
        verb("man", "DIR", "write svc.8 and svc.toml.5 into DIR", &[]),
        verb("completions", "bash|zsh|fish", "print the completion script of a shell", &[]),
        verb(
            "config-docs",
            "FILE",
            "write the key tables of FILE (docs/configuration.md) from the key table",
            &[],
        ),
        verb(
            "example-config",
            "FILE",
            "write FILE (contrib/svc.toml): every section, every key commented out with its default",
            &[],
        ),
    ],
    flags: &[&HELP],
    exit: "",
};

pub static VERSION: Command = Command {
    name: "version",
    summary: "print the version",
    about: "",
    positional: Positional::None,
    verbs: &[],
    flags: &[&HELP],
    exit: "",
};

/// Every command, in the order `svc --help` lists them.
pub static COMMANDS: &[&Command] = &[
    &DAEMON,
    &VALIDATE,
    &RELOAD,
    &STATUS,
    &DOCTOR,
    &CHECK,
    &QUARANTINE,
    &FIREWALL,
    &MAIL,
    &WAF,
    &THREAT,
    &FLEET,
    &WEBSERVER_INTEGRATION,
    &UPDATE_BOT_RANGES,
    &UPDATE_CMS_VULNERABILITIES,
    &STORE,
    &GEN,
    &VERSION,
];

/// The command named `name`.
pub fn command(name: &str) -> Option<&'static Command> {
    COMMANDS.iter().copied().find(|c| c.name == name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn names_are_unique_and_documented() {
        let mut commands = HashSet::new();
        for c in COMMANDS {
            assert!(commands.insert(c.name), "command {} twice", c.name);
            assert!(!c.summary.is_empty(), "{} has no summary", c.name);
            let (mut longs, mut shorts) = (HashSet::new(), HashSet::new());
            for f in c.flags {
                assert!(longs.insert(f.long), "svc {}: --{} twice", c.name, f.long);
                if let Some(s) = f.short {
                    assert!(shorts.insert(s), "svc {}: -{s} twice", c.name);
                }
                assert!(!f.help.is_empty(), "--{} has no help", f.long);
                if let Some(v) = f.value {
                    assert!(
                        !v.is_empty() && v.bytes().all(|b| b.is_ascii_uppercase()),
                        "--{} value name {v:?}",
                        f.long
                    );
                }
            }
            assert!(c.flags.iter().any(|f| f.long == "help"), "{}", c.name);
            let mut verbs = HashSet::new();
            for v in c.verbs {
                assert!(verbs.insert(v.name), "svc {} {} twice", c.name, v.name);
                assert!(!v.summary.is_empty(), "svc {} {}", c.name, v.name);
                for f in v.flags {
                    assert!(
                        c.flags.iter().any(|g| std::ptr::eq(*g, *f)),
                        "svc {} {}: --{} is not a flag of the command",
                        c.name,
                        v.name,
                        f.long
                    );
                }
            }
            assert_eq!(
                c.positional == Positional::Verbs,
                !c.verbs.is_empty(),
                "{}: verbs and positional agree",
                c.name
            );
        }
    }

    #[test]
    fn every_flag_of_the_table_is_used_by_a_command() {
        for f in [
            &CONFIG,
            &DEV,
            &DEV_DAEMON,
            &JSON,
            &HELP,
            &FOR,
            &REASON,
            &PERMANENT,
            &HOURS,
            &LIMIT,
            &SERVER,
            &WRITE,
        ] {
            assert!(
                COMMANDS
                    .iter()
                    .any(|c| c.flags.iter().any(|g| std::ptr::eq(*g, f))),
                "--{} is defined but no command takes it",
                f.long
            );
        }
    }
}
