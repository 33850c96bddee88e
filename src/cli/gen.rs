//! `svc gen man DIR`, `svc gen completions SHELL` and `svc gen config-docs FILE`: the man
//! page `svc.8` and the bash, zsh and fish completions, rendered from
//! [`super::defs::COMMANDS`] (the same table as the parser and `--help`, so none of them can
//! drift from the others); `svc.toml.5` and the key tables of `docs/configuration.md`,
//! rendered from `config::keys::KEYS`.

use std::path::Path;

use super::args::Args;
use super::defs::{Command, Flag, COMMANDS, GEN};
use super::family::{usage_error, UsageError};

/// Runs `svc gen` (flags parsed, `--help` handled).
pub fn run(a: &Args) -> i32 {
    match (a.verb(), a.rest()) {
        ("man", [dir]) => {
            if let Err(e) = crate::fsutil::ensure_dir(Path::new(dir), 0o755) {
                eprintln!("svc gen man: {dir}: {e}");
                return 1;
            }
            let pages = [
                ("svc.8", man_page()),
                ("svc.toml.5", crate::config::keys::man_page()),
            ];
            for (name, text) in pages {
                let path = Path::new(dir).join(name);
                match crate::fsutil::write_atomic(&path, text.as_bytes(), 0o644, None) {
                    Ok(()) => super::out(&format!("wrote {}\n", path.display())),
                    Err(e) => {
                        eprintln!("svc gen man: {}: {e}", path.display());
                        return 1;
                    }
                }
            }
            0
        }
        ("config-docs", [file]) => {
            // The key tables between the file's marker comments are generated; the prose
            // around them is kept.
            let path = Path::new(file);
            let text = match crate::fsutil::read_daemon_string(path) {
                Ok(t) => t,
                Err(e) => {
                    eprintln!("svc gen config-docs: {file}: {e}");
                    return 1;
                }
            };
            let next = crate::config::keys::render_docs(&text);
            match crate::fsutil::write_atomic(path, next.as_bytes(), 0o644, None) {
                Ok(()) => {
                    super::out(&format!("wrote {file}\n"));
                    0
                }
                Err(e) => {
                    eprintln!("svc gen config-docs: {file}: {e}");
                    1
                }
            }
        }
        ("example-config", [file]) => {
            let path = Path::new(file);
            match crate::fsutil::write_atomic(path, example_config().as_bytes(), 0o644, None) {
                Ok(()) => {
                    super::out(&format!("wrote {file}\n"));
                    0
                }
                Err(e) => {
                    eprintln!("svc gen example-config: {file}: {e}");
                    1
                }
            }
        }
        ("example-config", _) => {
            usage_error(&GEN, "example-config takes one file (contrib/svc.toml)")
        }
        ("config-docs", _) => {
            usage_error(&GEN, "config-docs takes one file (docs/configuration.md)")
        }
        ("man", _) => usage_error(&GEN, "man takes one directory"),
        ("completions", [shell]) => match completions(shell) {
            Some(text) => {
                super::out(&text);
                0
            }
            None => usage_error(
                &GEN,
                UsageError::Choice {
                    what: "completions",
                    expected: "bash, zsh or fish",
                    got: shell.to_string(),
                },
            ),
        },
        ("completions", _) => usage_error(&GEN, "completions takes one shell: bash, zsh or fish"),
        ("", _) => usage_error(&GEN, "missing command"),
        _ => usage_error(&GEN, super::family::unknown(a)),
    }
}

/// Text escaped for roff: backslashes, hyphens that are options, a leading dot or quote.
fn roff(text: &str) -> String {
    let mut s = text.replace('\\', "\\e").replace('-', "\\-");
    if s.starts_with('.') || s.starts_with('\'') {
        s.insert_str(0, "\\&");
    }
    s
}

fn roff_flag(f: &Flag) -> String {
    let mut s = match f.short {
        Some(c) => format!("\\fB\\-{c}\\fR, \\fB\\-\\-{}\\fR", roff(f.long)),
        None => format!("\\fB\\-\\-{}\\fR", roff(f.long)),
    };
    if let Some(v) = f.value {
        s.push_str(&format!(" \\fI{v}\\fR"));
    }
    s
}

/// Flags described once under OPTIONS rather than under each command.
fn is_common(f: &Flag) -> bool {
    matches!(f.long, "help" | "json" | "config" | "dev")
}

fn command_section(out: &mut String, c: &Command) {
    out.push_str(&format!(".SS \"svc {}\"\n", c.name));
    out.push_str(&format!("{}\n", roff(c.summary)));
    if !c.about.is_empty() {
        out.push_str(&format!(".PP\n{}\n", roff(c.about)));
    }
    for v in c.verbs {
        out.push_str(".TP\n");
        out.push_str(&format!("\\fB{}\\fR", roff(v.name)));
        if !v.args.is_empty() {
            out.push_str(&format!(" \\fI{}\\fR", roff(v.args)));
        }
        out.push_str(&format!("\n{}\n", roff(v.summary)));
    }
    // The common flags are described once, under OPTIONS; the daemon's --dev is its own.
    let own: Vec<&&Flag> = c
        .flags
        .iter()
        .filter(|f| !is_common(f) || (f.long == "dev" && c.name == "daemon"))
        .collect();
    if !own.is_empty() {
        out.push_str(".PP\nOptions:\n");
        for f in own {
            out.push_str(&format!(
                ".TP\n{}\n{}\n",
                roff_flag(f),
                roff(&super::help::flag_help(c, f))
            ));
        }
    }
    let common: Vec<String> = c
        .flags
        .iter()
        .filter(|f| is_common(f) && f.long != "help" && !(f.long == "dev" && c.name == "daemon"))
        .map(|f| format!("\\fB\\-\\-{}\\fR", f.long))
        .collect();
    if !common.is_empty() {
        out.push_str(&format!(".PP\nAlso takes {}.\n", common.join(", ")));
    }
    if !c.exit.is_empty() {
        out.push_str(&format!(".PP\nExit status {}.\n", roff(c.exit)));
    }
}

/// The man page `svc.8`.
pub fn man_page() -> String {
    let mut m = String::new();
    m.push_str(&format!(
        ".\\\" Generated by `svc gen man` from src/cli/defs.rs; do not edit.\n.TH SVC 8 \"\" \"svc {}\" \"System Administration\"\n",
        env!("CARGO_PKG_VERSION")
    ));
    m.push_str(".SH NAME\nsvc \\- host security daemon for Linux web\\-hosting servers\n");
    m.push_str(".SH SYNOPSIS\n");
    for c in COMMANDS {
        m.push_str(&format!(".B svc {}\n", roff(c.name)));
        if !c.verbs.is_empty() {
            m.push_str("\\fICOMMAND\\fR [\\fIARG\\fR...]\n");
        }
        m.push_str("[\\fIOPTIONS\\fR]\n.br\n");
    }
    m.push_str(concat!(
        ".SH DESCRIPTION\n",
        "\\fBsvc\\fR watches files, logs, the web application firewall and the mail spool of a ",
        "hosting server, turns what it sees into findings, responds (quarantine, firewall ",
        "blocks), and exposes all of it through an HTTPS API, a Server\\-Sent Events stream, ",
        "Prometheus metrics and this command line. \\fBsvc daemon\\fR runs the daemon; the other ",
        "commands talk to a running daemon over its control socket, or work on the ",
        "configuration and files directly where their description says so.\n",
        ".SH COMMANDS\n",
    ));
    for c in COMMANDS {
        command_section(&mut m, c);
    }
    m.push_str(".SH OPTIONS\nOptions every command that talks to the daemon takes:\n");
    for f in [
        &super::defs::CONFIG,
        &super::defs::DEV,
        &super::defs::JSON,
        &super::defs::HELP,
    ] {
        m.push_str(&format!(".TP\n{}\n{}\n", roff_flag(f), roff(f.help)));
    }
    m.push_str(&format!(
        ".TP\n\\fB\\-\\-dev\\fR (svc daemon)\n{}\n",
        roff(super::defs::DEV_DAEMON.help)
    ));
    m.push_str(concat!(
        ".PP\n\\fB\\-\\-dev\\fR and \\fB\\-\\-config\\fR cannot be combined.\n",
        ".SH FILES\n",
        ".TP\n/etc/svc/svc.toml\nThe main configuration file; see \\fBsvc.toml\\fR(5).\n",
        ".TP\n/etc/svc/conf.d/*.toml\nDrop\\-ins, applied in lexicographic order: tables merge, scalars replace, arrays append.\n",
        ".TP\n/etc/svc/conf.d/admin\\-token.toml\nThe admin API token the packages generate at first install (mode 0600, root only).\n",
        ".TP\n/lib/systemd/system/svc.service\nThe systemd unit the .deb installs (the .rpm: /usr/lib/systemd/system/svc.service) (\\fBType=notify\\fR, \\fBWatchdogSec=\\fR, hardening); local changes go in a drop\\-in (\\fBsystemctl edit svc\\fR).\n",
        ".TP\n/var/lib/svc\nThe default \\fBstate_path\\fR: the store \\fIsvc.db\\fR, the control socket \\fIsvc.sock\\fR (mode 0600), quarantined files, the generated TLS pair.\n",
        ".TP\n\\&./.svc\\-dev\nThe state of \\fB\\-\\-dev\\fR runs, in the current directory, with the generated tokens in \\fItokens\\fR (mode 0600).\n",
        ".SH SIGNALS\n",
        ".TP\nSIGHUP\nRe\\-read the configuration (as \\fBsvc reload\\fR); an invalid one is refused and nothing changes.\n",
        ".TP\nSIGTERM, SIGINT\nStop cleanly: end event streams, stop the HTTPS server and the control socket, flush the store.\n",
        ".SH ENVIRONMENT\n",
        ".TP\nSVC_LOG\nThe daemon's log filter (env_logger syntax; default \\fBinfo\\fR), for example \\fBSVC_LOG=debug\\fR.\n",
        ".TP\nNOTIFY_SOCKET\nSet by systemd for \\fBType=notify\\fR: the daemon sends \\fBREADY=1\\fR once the HTTPS API answers, \\fBRELOADING=1\\fR and \\fBREADY=1\\fR around a SIGHUP reload and \\fBSTOPPING=1\\fR at shutdown (a path, or \\fB@\\fR and an abstract name). Unset: nothing is sent.\n",
        ".TP\nWATCHDOG_USEC, WATCHDOG_PID\nSet by systemd for \\fBWatchdogSec=\\fR: \\fBWATCHDOG=1\\fR is sent every half interval, but only while every subsystem thread (findings dispatcher, store writer, incident writer, file\\-event forwarder, scan scheduler, HTTPS front) turned within the interval; the log names a stuck thread once, and systemd restarts the daemon.\n",
        ".SH EXIT STATUS\n",
        ".TP\n0\nDone.\n",
        ".TP\n1\nRefused or failed; the reason is on standard error. Commands that ask the daemon also exit 1 when it is not running or not responding.\n",
        ".TP\n2\nUsage error: an unknown command or option, a missing or extra argument.\n",
        ".SH EXAMPLES\n",
        ".nf\n",
        "systemctl enable \\-\\-now svc\n",
        "svc validate \\-c /etc/svc/svc.toml\n",
        "svc daemon \\-c /etc/svc/svc.toml\n",
        "svc reload\n",
        "svc status \\-\\-json\n",
        "svc firewall block 192.0.2.7 \\-\\-for 24h \\-\\-reason \"ssh brute force\"\n",
        "svc threat lookup 192.0.2.7\n",
        "svc quarantine restore 42\n",
        "svc gen completions bash > /usr/share/bash\\-completion/completions/svc\n",
        ".fi\n",
        ".SH SEE ALSO\n",
        "\\fBsvc.toml\\fR(5), \\fBnft\\fR(8), \\fBsystemctl\\fR(1), \\fBsystemd.service\\fR(5), \\fBsd_notify\\fR(3)\n",
    ));
    m
}

/// `text` as `# ` comment lines of at most 90 columns.
fn comment(text: &str) -> String {
    let mut out = String::new();
    let mut line = String::from("#");
    for word in text.split_whitespace() {
        if line.len() + 1 + word.len() > 90 && line.len() > 1 {
            out.push_str(&line);
            out.push('\n');
            line = String::from("#");
        }
        line.push(' ');
        line.push_str(word);
    }
    out.push_str(&line);
    out.push('\n');
    out
}

/// The example `svc.toml` shipped as `/etc/svc/svc.toml`: every table of the key table once
/// (in its first order), its header and each key commented out with the key's doc and
/// default, so the file as shipped is the defaults and validates. Table headers are
/// commented too: an empty `[alerts.webhook]` or `[reputation.upstream]` turns its feature
/// on and then needs its `url` (decision 327).
pub fn example_config() -> String {
    use crate::config::keys::KEYS;
    let mut out = String::new();
    out.push_str(&comment(&format!(
        "svc.toml: configuration of the svc {} host security daemon; every key is described in svc.toml(5). Generated by `svc gen example-config` from src/config/keys.rs. Every table and key below is commented out and shows its default: uncomment the table's header and the key to change it. Drop-ins in /etc/svc/conf.d/*.toml are read after this file (the packages put the generated admin token there). Automatic responses stay in dry run (auto_response.dry_run = true, auto_response.quarantine = false) until you change them. Check with `svc validate`, apply with `systemctl reload svc`.",
        env!("CARGO_PKG_VERSION")
    )));
    let mut tables: Vec<&str> = Vec::new();
    for k in KEYS {
        if !tables.contains(&k.table()) {
            tables.push(k.table());
        }
    }
    for t in tables {
        out.push('\n');
        if let Some(array) = t.strip_suffix("[]") {
            out.push_str(&format!("# [[{array}]]\n"));
        } else if !t.is_empty() {
            out.push_str(&format!("# [{t}]\n"));
        }
        for k in KEYS.iter().filter(|k| k.table() == t) {
            out.push_str(&comment(k.doc));
            let value = if k.default.is_empty() {
                "(no default: unset)"
            } else {
                k.default
            };
            out.push_str(&format!("# {} = {value}\n", k.name()));
        }
    }
    out
}

/// The completion script of `shell`, or `None` for a shell it does not know.
pub fn completions(shell: &str) -> Option<String> {
    match shell {
        "bash" => Some(bash()),
        "zsh" => Some(zsh()),
        "fish" => Some(fish()),
        _ => None,
    }
}

fn flag_words(c: &Command) -> Vec<String> {
    let mut w = Vec::new();
    for f in c.flags {
        if let Some(s) = f.short {
            w.push(format!("-{s}"));
        }
        w.push(format!("--{}", f.long));
    }
    w
}

fn bash() -> String {
    let names: Vec<&str> = COMMANDS.iter().map(|c| c.name).collect();
    let mut s = String::from("# bash completion for svc; generated by `svc gen completions bash`.\n_svc() {\n    local cur prev cmd\n    cur=\"${COMP_WORDS[COMP_CWORD]}\"\n    prev=\"${COMP_WORDS[COMP_CWORD-1]}\"\n    cmd=\"${COMP_WORDS[1]}\"\n    if [ \"$COMP_CWORD\" -eq 1 ]; then\n        COMPREPLY=($(compgen -W \"");
    s.push_str(&names.join(" "));
    s.push_str(" --help --version\" -- \"$cur\"))\n        return\n    fi\n    case \"$prev\" in\n        -c|--config) COMPREPLY=($(compgen -f -- \"$cur\")); return ;;\n    esac\n    case \"$cmd\" in\n");
    for c in COMMANDS {
        let mut words = flag_words(c);
        words.extend(c.verbs.iter().map(|v| v.name.to_string()));
        s.push_str(&format!(
            "        {}) COMPREPLY=($(compgen -W \"{}\" -- \"$cur\")) ;;\n",
            c.name,
            words.join(" ")
        ));
    }
    s.push_str("    esac\n}\ncomplete -F _svc svc\n");
    s
}

/// Text for a single-quoted shell string.
fn quoted(text: &str) -> String {
    text.replace('\'', "'\\''")
}

fn zsh() -> String {
    let mut s = String::from("#compdef svc\n# zsh completion for svc; generated by `svc gen completions zsh`.\n_svc() {\n    local -a commands\n    commands=(\n");
    for c in COMMANDS {
        s.push_str(&format!(
            "        '{}:{}'\n",
            c.name,
            quoted(&c.summary.replace(':', "\\:"))
        ));
    }
    s.push_str("    )\n    if (( CURRENT == 2 )); then\n        _describe 'command' commands\n        return\n    fi\n    case $words[2] in\n");
    for c in COMMANDS {
        s.push_str(&format!("        {})\n            _arguments", c.name));
        for f in c.flags {
            let help = quoted(&f.help.replace(['[', ']'], ""));
            let value = match f.value {
                Some("FILE" | "DIR") => format!(":{}:_files", f.value.unwrap_or("")),
                Some(v) => format!(":{v}:"),
                None => String::new(),
            };
            match f.short {
                Some(sh) => s.push_str(&format!(
                    " \\\n                '(-{sh} --{l})'{{-{sh},--{l}}}'[{help}]{value}'",
                    l = f.long
                )),
                None => s.push_str(&format!(
                    " \\\n                '--{}[{help}]{value}'",
                    f.long
                )),
            }
        }
        if !c.verbs.is_empty() {
            let verbs: Vec<&str> = c.verbs.iter().map(|v| v.name).collect();
            s.push_str(&format!(
                " \\\n                '1:command:({})' '*::argument:'",
                verbs.join(" ")
            ));
        }
        s.push_str(" ;;\n");
    }
    s.push_str("    esac\n}\n_svc \"$@\"\n");
    s
}

fn fish() -> String {
    let names: Vec<&str> = COMMANDS.iter().map(|c| c.name).collect();
    let mut s = format!(
        "# fish completion for svc; generated by `svc gen completions fish`.\ncomplete -c svc -f\ncomplete -c svc -n 'not __fish_seen_subcommand_from {}' -a '{}'\n",
        names.join(" "),
        names.join(" ")
    );
    for c in COMMANDS {
        s.push_str(&format!(
            "complete -c svc -n 'not __fish_seen_subcommand_from {}' -a '{}' -d '{}'\n",
            names.join(" "),
            c.name,
            quoted(c.summary)
        ));
        for v in c.verbs {
            s.push_str(&format!(
                "complete -c svc -n '__fish_seen_subcommand_from {}' -a '{}' -d '{}'\n",
                c.name,
                v.name,
                quoted(v.summary)
            ));
        }
        for f in c.flags {
            let mut line = format!(
                "complete -c svc -n '__fish_seen_subcommand_from {}' -l {}",
                c.name, f.long
            );
            if let Some(sh) = f.short {
                line.push_str(&format!(" -s {sh}"));
            }
            match f.value {
                Some("FILE" | "DIR") => line.push_str(" -r -F"),
                Some(_) => line.push_str(" -r"),
                None => {}
            }
            line.push_str(&format!(" -d '{}'\n", quoted(f.help)));
            s.push_str(&line);
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_man_page_names_every_command_verb_and_flag() {
        let m = man_page();
        for section in [
            "NAME",
            "SYNOPSIS",
            "DESCRIPTION",
            "COMMANDS",
            "OPTIONS",
            "FILES",
            "SIGNALS",
            "ENVIRONMENT",
            "EXIT STATUS",
            "EXAMPLES",
            "SEE ALSO",
        ] {
            assert!(m.contains(&format!(".SH {section}\n")), "{section}");
        }
        for c in COMMANDS {
            assert!(m.contains(&format!(".SS \"svc {}\"", c.name)), "{}", c.name);
            for v in c.verbs {
                assert!(
                    m.contains(&format!("\\fB{}\\fR", roff(v.name))),
                    "{}",
                    v.name
                );
            }
            for f in c.flags {
                assert!(
                    m.contains(&format!("\\-\\-{}", roff(f.long))),
                    "{} --{}",
                    c.name,
                    f.long
                );
            }
        }
        // No line starts with a control character roff would read as a request.
        for line in m.lines() {
            assert!(!line.starts_with('\''), "{line}");
        }
    }

    #[test]
    fn completions_name_every_command_and_flag() {
        for shell in ["bash", "zsh", "fish"] {
            let text = completions(shell).unwrap();
            for c in COMMANDS {
                assert!(text.contains(c.name), "{shell}: {}", c.name);
                for f in c.flags {
                    assert!(text.contains(f.long), "{shell}: {} --{}", c.name, f.long);
                }
            }
        }
        assert!(completions("tcsh").is_none());
    }

    /// `man/svc.8` is committed for packagers and readers of the source; it must be what
    /// `svc gen man` writes today (run `cargo run -- gen man man` after changing the table).
    #[test]
    fn the_committed_man_page_is_current() {
        let committed = include_str!("../../man/svc.8");
        assert!(
            committed == man_page(),
            "man/svc.8 is stale: run `cargo run -- gen man man`"
        );
    }

    /// `contrib/svc.toml` is what `svc gen example-config` writes today, and it validates
    /// as shipped (the defaults).
    #[test]
    fn the_committed_example_config_is_current_and_valid() {
        let committed = include_str!("../../contrib/svc.toml");
        assert!(
            committed == example_config(),
            "contrib/svc.toml is stale: run `cargo run -- gen example-config contrib/svc.toml`"
        );
        let dir = std::env::temp_dir().join(format!("svc-example-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("svc.toml");
        std::fs::write(&path, committed).unwrap();
        let loaded = crate::config::load(&path);
        let _ = std::fs::remove_dir_all(&dir);
        assert!(loaded.is_ok(), "{:?}", loaded.err());
        for k in crate::config::keys::KEYS {
            assert!(
                committed.contains(&format!("# {} = ", k.name())),
                "{}",
                k.path
            );
        }
    }

    #[test]
    fn roff_escapes() {
        assert_eq!(roff("a-b\\c"), "a\\-b\\ec");
        assert_eq!(roff(".x"), "\\&.x");
    }
}
