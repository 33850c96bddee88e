//! The one parser loop: a command line against its [`Command`]'s flags.
//!
//! Guarantees:
//! - A flag the command does not list is refused (`unknown option --x`); a value flag
//!   without its value is refused; a flag given twice keeps the last value.
//! - A verb-specific flag given with a verb that does not take it is refused
//!   (`--for does not apply to unblock`), so a typo never silently does less.
//! - `--dev` with `--config` is refused (one place for that rule).
//! - Positional words are accepted only by commands with verbs.

use std::ffi::OsString;
use std::fmt;
use std::path::PathBuf;

use super::defs::{Command, Flag, Positional};

/// A parsed command line.
#[derive(Debug, Default, PartialEq)]
pub struct Args {
    /// The verb and its arguments (commands with verbs only).
    pub words: Vec<String>,
    pub config: Option<PathBuf>,
    pub dev: bool,
    pub json: bool,
    pub help: bool,
    /// The other flags given, by long name: their value, or `None` for a switch.
    given: Vec<(&'static str, Option<String>)>,
}

impl Args {
    /// The arguments of a command that names only its configuration.
    pub fn for_config(config: Option<PathBuf>, dev: bool) -> Args {
        Args {
            config,
            dev,
            ..Args::default()
        }
    }

    /// The value of flag `--long`, if given.
    pub fn value(&self, long: &str) -> Option<&str> {
        self.given
            .iter()
            .rev()
            .find(|(l, _)| *l == long)
            .and_then(|(_, v)| v.as_deref())
    }

    /// Whether switch `--long` was given.
    pub fn switch(&self, long: &str) -> bool {
        self.given.iter().any(|(l, _)| *l == long)
    }

    /// The verb (first word), or "".
    pub fn verb(&self) -> &str {
        self.words.first().map(String::as_str).unwrap_or("")
    }

    /// The verb's arguments.
    pub fn rest(&self) -> &[String] {
        self.words.get(1..).unwrap_or(&[])
    }
}

/// Why a command line's flags did not parse. Display is the message without the
/// `svc CMD: ` prefix.
#[derive(Debug)]
pub enum ArgsError {
    /// lexopt's refusal (a value flag without its value, a value not valid here).
    Lexopt(lexopt::Error),
    /// A word given to a command without verbs.
    UnexpectedArgument(OsString),
    UnknownShort(char),
    UnknownLong(String),
    DevWithConfig,
    /// A verb-specific flag given with another verb.
    NotForVerb {
        flag: &'static str,
        verb: &'static str,
    },
}

impl fmt::Display for ArgsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ArgsError::Lexopt(e) => write!(f, "{e}"),
            ArgsError::UnexpectedArgument(v) => write!(f, "unexpected argument {v:?}"),
            ArgsError::UnknownShort(s) => write!(f, "unknown option -{s}"),
            ArgsError::UnknownLong(l) => write!(f, "unknown option --{l}"),
            ArgsError::DevWithConfig => f.write_str("--dev and --config cannot be combined"),
            ArgsError::NotForVerb { flag, verb } => write!(f, "--{flag} does not apply to {verb}"),
        }
    }
}

impl std::error::Error for ArgsError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ArgsError::Lexopt(e) => Some(e),
            _ => None,
        }
    }
}

fn find_flag(c: &Command, arg: &lexopt::Arg<'_>) -> Option<&'static Flag> {
    c.flags.iter().copied().find(|f| match arg {
        lexopt::Arg::Short(s) => f.short == Some(*s),
        lexopt::Arg::Long(l) => f.long == *l,
        lexopt::Arg::Value(_) => false,
    })
}

/// Parses the arguments after the command name.
pub fn parse(c: &Command, args: Vec<OsString>) -> Result<Args, ArgsError> {
    use lexopt::Arg;
    let mut p = lexopt::Parser::from_args(args);
    let mut a = Args::default();
    while let Some(arg) = p.next().map_err(ArgsError::Lexopt)? {
        if let Arg::Value(v) = &arg {
            if c.positional == Positional::None {
                return Err(ArgsError::UnexpectedArgument(v.clone()));
            }
            a.words.push(v.to_string_lossy().into_owned());
            continue;
        }
        let Some(flag) = find_flag(c, &arg) else {
            return Err(match arg {
                Arg::Short(s) => ArgsError::UnknownShort(s),
                Arg::Long(l) => ArgsError::UnknownLong(l.to_string()),
                Arg::Value(v) => ArgsError::UnexpectedArgument(v),
            });
        };
        let value = match flag.value {
            Some(_) => Some(
                p.value()
                    .map_err(ArgsError::Lexopt)?
                    .to_string_lossy()
                    .into_owned(),
            ),
            None => None,
        };
        match (flag.long, value) {
            ("config", Some(v)) => a.config = Some(PathBuf::from(v)),
            ("dev", _) => a.dev = true,
            ("json", _) => a.json = true,
            ("help", _) => a.help = true,
            (long, v) => a.given.push((long, v)),
        }
    }
    if a.dev && a.config.is_some() {
        return Err(ArgsError::DevWithConfig);
    }
    if let Some(verb) = c.verb(a.verb()) {
        for (long, _) in &a.given {
            let Some(flag) = c.flags.iter().find(|f| f.long == *long) else {
                continue;
            };
            let owners = c.verbs_of(flag);
            if !owners.is_empty() && !owners.contains(&verb.name) {
                return Err(ArgsError::NotForVerb {
                    flag: long,
                    verb: verb.name,
                });
            }
        }
    }
    Ok(a)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::defs::command;

    fn p(cmd: &str, args: &[&str]) -> Result<Args, ArgsError> {
        parse(
            command(cmd).unwrap(),
            args.iter().map(OsString::from).collect(),
        )
    }

    #[test]
    fn flags_values_and_words() {
        let a = p(
            "firewall",
            &[
                "block",
                "192.0.2.7",
                "--for",
                "15m",
                "--reason=ssh",
                "-c",
                "/x.toml",
            ],
        )
        .unwrap();
        assert_eq!(a.words, ["block", "192.0.2.7"]);
        assert_eq!(a.value("for"), Some("15m"));
        assert_eq!(a.value("reason"), Some("ssh"));
        assert_eq!(a.config, Some(PathBuf::from("/x.toml")));
        assert!(p("threat", &["block", "192.0.2.7", "--permanent"])
            .unwrap()
            .switch("permanent"));
        assert!(p("status", &["--json", "--dev"]).unwrap().json);
    }

    #[test]
    fn refusals_say_what_is_wrong() {
        let e = |cmd: &str, args: &[&str]| p(cmd, args).unwrap_err().to_string();
        assert_eq!(e("status", &["--bogus"]), "unknown option --bogus");
        assert_eq!(e("daemon", &["-x"]), "unknown option -x");
        assert!(e("validate", &["extra"]).starts_with("unexpected argument"));
        assert_eq!(
            e("status", &["--dev", "-c", "/x"]),
            "--dev and --config cannot be combined"
        );
        assert_eq!(
            e("firewall", &["unblock", "192.0.2.1", "--for", "4s"]),
            "--for does not apply to unblock"
        );
        assert_eq!(
            e("waf", &["stats", "--write"]),
            "--write does not apply to stats"
        );
        assert!(e("firewall", &["block", "--for"]).contains("--for"));
        // validate talks to no daemon: --dev is not its flag.
        assert_eq!(e("validate", &["--dev"]), "unknown option --dev");
    }
}
