//! Command line: subcommands and their flags, each defined once (usage and parsing).

pub mod check;
pub mod control;
pub mod crawler;
pub mod doctor;
pub mod firewall;
pub mod mail;
pub mod reload;
pub mod status;
pub mod threat;
pub mod validate;
pub mod waf;
pub mod webserver;

use std::ffi::OsString;
use std::path::PathBuf;

/// A subcommand: name, one-line summary, flag lines for its help.
pub struct Subcommand {
    pub name: &'static str,
    pub summary: &'static str,
    pub flags: &'static [(&'static str, &'static str)],
}

const CONFIG_FLAG: (&str, &str) = (
    "-c, --config FILE",
    "main configuration file (default /etc/svc/svc.toml; drop-ins in conf.d/ beside it)",
);
const HELP_FLAG: (&str, &str) = ("-h, --help", "print this help");

pub static SUBCOMMANDS: &[Subcommand] = &[
    Subcommand {
        name: "daemon",
        summary: "run the daemon in the foreground until SIGTERM or SIGINT",
        flags: &[
            CONFIG_FLAG,
            (
                "--dev",
                "embedded default: state in ./.svc-dev, HTTPS on 127.0.0.1:9443, generated tokens",
            ),
            HELP_FLAG,
        ],
    },
    Subcommand {
        name: "validate",
        summary: "check the configuration; one line per error, naming the key",
        flags: &[CONFIG_FLAG, HELP_FLAG],
    },
    Subcommand {
        name: "reload",
        summary: "make the running daemon re-read its configuration (as SIGHUP; systemd ExecReload); errors print like validate, exit 1",
        flags: &[
            ("--json", "print the daemon's answer as JSON"),
            CONFIG_FLAG,
            (
                "--dev",
                "talk to a daemon started with --dev in this directory",
            ),
            HELP_FLAG,
        ],
    },
    Subcommand {
        name: "status",
        summary: "ask the running daemon for its status over the control socket",
        flags: &[
            (
                "--json",
                "print {\"snapshot\": ...}: the object GET /api/v1/status returns",
            ),
            CONFIG_FLAG,
            (
                "--dev",
                "talk to a daemon started with --dev in this directory",
            ),
            HELP_FLAG,
        ],
    },
    Subcommand {
        name: "doctor",
        summary: "named health checks of the running daemon: config, store, TLS, collectors, queues; exit 1 when anything is degraded",
        flags: &[("--json", "print the checks as JSON"), CONFIG_FLAG, ("--dev", "talk to a daemon started with --dev in this directory"), HELP_FLAG],
    },
    Subcommand {
        name: "check",
        summary: "run every scheduled check through the daemon now and print its findings",
        flags: &[("--json", "print the scan job and its findings as JSON"), CONFIG_FLAG, ("--dev", "talk to a daemon started with --dev in this directory"), HELP_FLAG],
    },
    Subcommand {
        name: "quarantine",
        summary: "list quarantined files, or restore one exactly (`svc quarantine list`, `svc quarantine restore ID`)",
        flags: &[("--json", "print JSON"), CONFIG_FLAG, ("--dev", "talk to a daemon started with --dev in this directory"), HELP_FLAG],
    },
    Subcommand {
        name: "firewall",
        summary: "the daemon's nftables firewall: status, list, check, block, unblock, allow, rollback (`svc firewall --help`)",
        flags: firewall::FLAGS,
    },
    Subcommand {
        name: "mail",
        summary: "the mail antivirus: status, stats, quarantined mail, release, delete (`svc mail --help`)",
        flags: mail::FLAGS,
    },
    Subcommand {
        name: "waf",
        summary: "the ModSecurity integration: install-rules, stats, rules, escalation, apply (`svc waf --help`)",
        flags: waf::FLAGS,
    },
    Subcommand {
        name: "threat",
        summary: "threat intelligence: lookup, block, whitelist, clear, stats, undo (`svc threat --help`)",
        flags: threat::FLAGS,
    },
    Subcommand {
        name: "webserver-integration",
        summary: "Apache/nginx snippets that send challenged addresses to the proof-of-work challenge: install, status, remove",
        flags: webserver::FLAGS,
    },
    Subcommand {
        name: "update-bot-ranges",
        summary: "fetch published crawler ranges, write the snapshot and have the running daemon apply it",
        flags: &[("--json", "print the outcome as JSON"), CONFIG_FLAG, ("--dev", "use the --dev configuration of this directory"), HELP_FLAG],
    },
    Subcommand {
        name: "store",
        summary: "state-database maintenance: `svc store reset-bot-verify` clears crawler verification records",
        flags: &[("--json", "print the outcome as JSON"), CONFIG_FLAG, ("--dev", "use the --dev configuration of this directory"), HELP_FLAG],
    },
    Subcommand {
        name: "version",
        summary: "print the version",
        flags: &[HELP_FLAG],
    },
];

pub fn usage() -> String {
    let mut s = format!(
        "svc {} — host security daemon\n\nUsage: svc <command> [options]\n\nCommands:\n",
        env!("CARGO_PKG_VERSION")
    );
    for c in SUBCOMMANDS {
        s.push_str(&format!("  {:<10} {}\n", c.name, c.summary));
    }
    s.push_str("\nRun `svc <command> --help` for a command's options.\n");
    s
}

pub fn sub_usage(c: &Subcommand) -> String {
    let mut s = format!(
        "svc {} — {}\n\nUsage: svc {} [options]\n\nOptions:\n",
        c.name, c.summary, c.name
    );
    for (flag, help) in c.flags {
        s.push_str(&format!("  {flag:<20} {help}\n"));
    }
    s
}

/// Parsed options shared by subcommands.
#[derive(Debug, Default)]
pub struct Flags {
    pub config: Option<PathBuf>,
    pub dev: bool,
    pub json: bool,
    pub help: bool,
    /// Positional arguments (only subcommands that take them accept any).
    pub positional: Vec<String>,
}

/// A usage error: message for stderr, exit 2.
pub struct UsageError(pub String);

fn allows(c: &Subcommand, flag: &str) -> bool {
    c.flags
        .iter()
        .any(|(f, _)| f.split(", ").any(|p| p.split(' ').next() == Some(flag)))
}

/// Parses the flags of subcommand `c`.
pub fn parse_flags(c: &Subcommand, args: Vec<OsString>) -> Result<Flags, UsageError> {
    use lexopt::prelude::*;
    let mut p = lexopt::Parser::from_args(args);
    let mut f = Flags::default();
    let bad = |e: lexopt::Error| UsageError(format!("svc {}: {e}", c.name));
    while let Some(arg) = p.next().map_err(bad)? {
        let name = match &arg {
            Short(ch) => format!("-{ch}"),
            Long(l) => format!("--{l}"),
            Value(v)
                if (c.name == "quarantine" && f.positional.len() < 2)
                    || (c.name == "store" && f.positional.is_empty()) =>
            {
                f.positional.push(v.to_string_lossy().into_owned());
                continue;
            }
            Value(v) => {
                return Err(UsageError(format!(
                    "svc {}: unexpected argument {:?}",
                    c.name, v
                )))
            }
        };
        if !allows(c, &name) {
            return Err(UsageError(format!("svc {}: unknown option {name}", c.name)));
        }
        match arg {
            Short('c') | Long("config") => f.config = Some(PathBuf::from(p.value().map_err(bad)?)),
            Long("dev") => f.dev = true,
            Long("json") => f.json = true,
            Short('h') | Long("help") => f.help = true,
            _ => return Err(UsageError(format!("svc {}: unknown option {name}", c.name))),
        }
    }
    if f.dev && f.config.is_some() {
        return Err(UsageError(format!(
            "svc {}: --dev and --config cannot be combined",
            c.name
        )));
    }
    Ok(f)
}

/// Runs the command line; returns the exit code.
pub fn main(args: Vec<OsString>) -> i32 {
    let mut args = args.into_iter().skip(1);
    let Some(first) = args.next() else {
        eprint!("{}", usage());
        return 2;
    };
    let first = first.to_string_lossy().into_owned();
    match first.as_str() {
        "-h" | "--help" | "help" => {
            print!("{}", usage());
            return 0;
        }
        "-V" | "--version" => {
            println!("svc {}", env!("CARGO_PKG_VERSION"));
            return 0;
        }
        _ => {}
    }
    let Some(cmd) = SUBCOMMANDS.iter().find(|c| c.name == first) else {
        eprintln!("svc: unknown command {first:?}\n");
        eprint!("{}", usage());
        return 2;
    };
    if cmd.name == "firewall" {
        return firewall::run(args.collect());
    }
    if cmd.name == "mail" {
        return mail::run(args.collect());
    }
    if cmd.name == "waf" {
        return waf::run(args.collect());
    }
    if cmd.name == "threat" {
        return threat::run(args.collect());
    }
    if cmd.name == "webserver-integration" {
        return webserver::run(args.collect());
    }
    let flags = match parse_flags(cmd, args.collect()) {
        Ok(f) => f,
        Err(UsageError(msg)) => {
            eprintln!("{msg}\n");
            eprint!("{}", sub_usage(cmd));
            return 2;
        }
    };
    if flags.help {
        print!("{}", sub_usage(cmd));
        return 0;
    }
    match cmd.name {
        "daemon" => {
            init_logging();
            match crate::daemon::run(crate::daemon::Options {
                config: flags.config,
                dev: flags.dev,
            }) {
                Ok(()) => 0,
                Err(e) => {
                    eprintln!("svc daemon: {e}");
                    1
                }
            }
        }
        "validate" => validate::run(&flags),
        "reload" => reload::run(&flags),
        "status" => status::run(&flags),
        "doctor" => doctor::run(&flags),
        "check" => check::run(&flags),
        "quarantine" => check::quarantine(&flags),
        "update-bot-ranges" => crawler::update_bot_ranges(&flags),
        "store" => crawler::store(&flags),
        "version" => {
            println!("svc {}", env!("CARGO_PKG_VERSION"));
            0
        }
        _ => 2,
    }
}

fn init_logging() {
    let env = env_logger::Env::default().filter_or("SVC_LOG", "info");
    let logger = env_logger::Builder::from_env(env)
        .target(env_logger::Target::Stderr)
        // One record is one line: control and bidirectional-override characters that reach
        // a message from outside (file names, log lines, request paths) are escaped here for
        // every line, so none can forge a line or recolour a terminal.
        .format(|buf, record| {
            use std::io::Write as _;
            let ts = buf.timestamp();
            let message = record.args().to_string();
            writeln!(
                buf,
                "[{ts} {:<5} {}] {}",
                record.level(),
                record.target(),
                crate::text::escape_controls(&message)
            )
        })
        .build();
    // Warnings a client can cause inside dependencies (rustls) are rate-limited.
    let _ = crate::http::logfilter::install(logger);
}

/// Writes to stdout; a closed pipe (`svc status | head`) is not an error.
pub fn out(text: &str) {
    use std::io::Write;
    let mut o = std::io::stdout().lock();
    let _ = o.write_all(text.as_bytes()).and_then(|_| o.flush());
}

/// The configuration path a command uses.
pub fn config_path(flags: &Flags) -> PathBuf {
    flags
        .config
        .clone()
        .unwrap_or_else(|| PathBuf::from(crate::config::DEFAULT_PATH))
}
