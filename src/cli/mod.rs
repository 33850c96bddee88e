//! Command line: every command and flag defined once in [`defs`], parsed by one loop
//! ([`args`]), its help ([`help`]), man page and completions ([`gen`]) rendered from the
//! same table; the commands that send a verb to the daemon share one runner ([`family`]).

pub mod args;
pub mod check;
mod cms;
pub mod control;
pub mod crawler;
pub mod defs;
pub mod doctor;
pub mod family;
pub mod firewall;
pub mod fleet;
pub mod gen;
pub mod help;
pub mod mail;
pub mod reload;
pub mod status;
pub mod threat;
pub mod validate;
pub mod waf;
pub mod webserver;

use std::ffi::OsString;
use std::path::PathBuf;

pub use args::Args;

/// Runs the command line; returns the exit code.
pub fn main(args: Vec<OsString>) -> i32 {
    let mut args = args.into_iter().skip(1);
    let Some(first) = args.next() else {
        eprint!("{}", help::usage());
        return 2;
    };
    let first = first.to_string_lossy().into_owned();
    match first.as_str() {
        "-h" | "--help" | "help" => {
            out(&help::usage());
            return 0;
        }
        "-V" | "--version" => {
            println!("svc {}", env!("CARGO_PKG_VERSION"));
            return 0;
        }
        _ => {}
    }
    let Some(cmd) = defs::command(&first) else {
        eprintln!("svc: unknown command {first:?}\n");
        eprint!("{}", help::usage());
        return 2;
    };
    let a = match args::parse(cmd, args.collect()) {
        Ok(a) => a,
        Err(e) => return family::usage_error(cmd, e),
    };
    if a.help {
        out(&help::command_help(cmd));
        return 0;
    }
    match cmd.name {
        "daemon" => {
            init_logging();
            match crate::daemon::run(crate::daemon::Options {
                config: a.config,
                dev: a.dev,
            }) {
                Ok(()) if crate::daemon::restart_requested() => {
                    let e = crate::daemon::reexec();
                    eprintln!("svc daemon: cannot restart: {e}");
                    1
                }
                Ok(()) => 0,
                Err(e) => {
                    eprintln!("svc daemon: {e}");
                    // Restarted through the API into a configuration that does not start:
                    // the last one that did (returns only when that cannot be executed).
                    if let Some(err) = crate::daemon::fallback::fall_back(&e.to_string()) {
                        eprintln!("svc daemon: cannot start on the last configuration that started: {err}");
                    }
                    1
                }
            }
        }
        "validate" => validate::run(&a),
        "reload" => reload::run(&a),
        "status" => status::run(&a),
        "doctor" => doctor::run(&a),
        "check" => check::run(&a),
        "quarantine" => check::quarantine(&a),
        "firewall" => family::run(&firewall::FAMILY, &a),
        "mail" => family::run(&mail::FAMILY, &a),
        "threat" => family::run(&threat::FAMILY, &a),
        "fleet" => family::run(&fleet::FAMILY, &a),
        "waf" => waf::run(&a),
        "webserver-integration" => webserver::run(&a),
        "update-bot-ranges" => crawler::update_bot_ranges(&a),
        "update-cms-vulnerabilities" => cms::update_vulnerabilities(&a),
        "store" => crawler::store(&a),
        "gen" => gen::run(&a),
        "version" => {
            println!("svc {}", env!("CARGO_PKG_VERSION"));
            0
        }
        other => family::usage_error(cmd, format!("{other} has no runner")),
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
pub fn config_path(flags: &Args) -> PathBuf {
    flags
        .config
        .clone()
        .unwrap_or_else(|| PathBuf::from(crate::config::DEFAULT_PATH))
}
