//! The one runner of the commands that send a verb to the daemon (`firewall`, `threat`,
//! `waf`, `mail`): build the control request, ask, print the answer.
//!
//! Output rules, the same for every family:
//! - `--json` prints the daemon's answer as it came (pretty), also when it is a refusal;
//! - a refusal (`error` in the answer) prints `svc CMD VERB: reason` on standard error and
//!   exits 1; a partial result (`changed` beside the error) is shown on standard error
//!   first;
//! - a `warning` beside a success goes to standard error; the exit status stays 0.

use std::fmt;
use std::time::Duration;

use serde_json::Value;

use super::args::{Args, ArgsError};
use super::defs::Command;
use crate::firewall::duration::DurationError;
use crate::text::escape_controls;

/// A usage error of a family command (exit status 2, the command's help below it).
/// Display is the message without the `svc CMD: ` prefix.
#[derive(Debug)]
pub enum UsageError {
    /// The flags did not parse.
    Args(ArgsError),
    /// No verb.
    MissingCommand,
    UnknownVerb(String),
    /// `block needs an IP address`.
    Needs {
        verb: String,
        what: &'static str,
    },
    /// `block takes one IP address`.
    TakesOne {
        verb: String,
        what: &'static str,
    },
    /// `stats takes no argument`.
    TakesNone {
        verb: String,
    },
    /// The verb's arguments in another form: `rollback takes status, confirm or revert`.
    Takes {
        verb: &'static str,
        form: &'static str,
    },
    /// A word outside its choices: `--server: expected apache, nginx or litespeed, got "iis"`.
    Choice {
        what: &'static str,
        expected: &'static str,
        got: String,
    },
    /// `apply: "x" is not a rule id`.
    NotA {
        verb: String,
        text: String,
        what: &'static str,
    },
    /// `--hours must be a number from 1 to 168`.
    OutOfRange {
        flag: &'static str,
        lo: u64,
        hi: u64,
    },
    /// `--for` is not a lifetime.
    Duration(DurationError),
}

impl fmt::Display for UsageError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            UsageError::Args(e) => write!(f, "{e}"),
            UsageError::MissingCommand => f.write_str("missing command"),
            UsageError::UnknownVerb(v) => write!(f, "unknown command {:?}", escape_controls(v)),
            UsageError::Needs { verb, what } => write!(f, "{verb} needs {what}"),
            UsageError::TakesOne { verb, what } => {
                // `what` reads after "needs": "an IP address"; after "one" without article.
                let bare = what
                    .strip_prefix("an ")
                    .or_else(|| what.strip_prefix("a "))
                    .unwrap_or(what);
                write!(f, "{verb} takes one {bare}")
            }
            UsageError::TakesNone { verb } => write!(f, "{verb} takes no argument"),
            UsageError::Takes { verb, form } => write!(f, "{verb} takes {form}"),
            UsageError::Choice {
                what,
                expected,
                got,
            } => write!(f, "{what}: expected {expected}, got {got:?}"),
            UsageError::NotA { verb, text, what } => write!(f, "{verb}: {text:?} is not a {what}"),
            UsageError::OutOfRange { flag, lo, hi } => {
                write!(f, "{flag} must be a number from {lo} to {hi}")
            }
            UsageError::Duration(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for UsageError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            UsageError::Args(e) => Some(e),
            UsageError::Duration(e) => Some(e),
            _ => None,
        }
    }
}

impl From<ArgsError> for UsageError {
    fn from(e: ArgsError) -> UsageError {
        UsageError::Args(e)
    }
}

/// One control request built from a command line.
#[derive(Debug, PartialEq)]
pub struct Request {
    /// The control command (`firewall.block`).
    pub command: &'static str,
    pub body: Value,
    /// The whole exchange's budget.
    pub timeout: Duration,
}

impl Request {
    /// A request with the usual two-minute budget.
    pub fn new(command: &'static str, body: Value) -> Request {
        Request {
            command,
            body,
            timeout: Duration::from_secs(120),
        }
    }
}

/// A command whose verbs become control requests.
pub struct Family {
    pub command: &'static Command,
    /// The request of a parsed command line, or a usage error.
    pub request: fn(&Args) -> Result<Request, UsageError>,
    /// The human text of a (successful or partial) answer to control command `cmd`.
    pub human: fn(cmd: &str, answer: &Value) -> String,
}

/// Prints a usage error and the command's help to standard error; returns 2.
pub fn usage_error(c: &Command, message: impl fmt::Display) -> i32 {
    eprintln!("svc {}: {message}\n", c.name);
    eprint!("{}", super::help::command_help(c));
    2
}

fn pretty(v: &Value) -> String {
    format!("{}\n", serde_json::to_string_pretty(v).unwrap_or_default())
}

/// Runs a family command whose flags are parsed (and `--help` handled); returns the exit
/// status.
pub fn run(f: &Family, a: &Args) -> i32 {
    let c = f.command;
    if a.words.is_empty() {
        return usage_error(c, UsageError::MissingCommand);
    }
    let req = match (f.request)(a) {
        Ok(r) => r,
        Err(e) => return usage_error(c, e),
    };
    let what = format!("svc {} {}", c.name, escape_controls(a.verb()));
    let answer = match super::control::ask_daemon(
        a.config.clone(),
        a.dev,
        &what,
        req.command,
        req.body,
        req.timeout,
    ) {
        Ok(v) => v,
        Err(code) => return code,
    };
    if a.json {
        super::out(&pretty(&answer));
    }
    if let Some(e) = answer.get("error").and_then(Value::as_str) {
        if !a.json && answer.get("changed").is_some() {
            eprint!("{}", (f.human)(req.command, &answer));
        }
        eprintln!("{what}: {}", escape_controls(e));
        return 1;
    }
    if !a.json {
        super::out(&(f.human)(req.command, &answer));
        if let Some(w) = answer.get("warning").and_then(Value::as_str) {
            eprintln!("{what}: warning: {}", escape_controls(w));
        }
    }
    0
}

/// The verb's only argument, or a usage error naming `what` it needs.
pub fn one(a: &Args, what: &'static str) -> Result<String, UsageError> {
    let verb = a.verb().to_string();
    match a.rest() {
        [x] => Ok(x.clone()),
        [] => Err(UsageError::Needs { verb, what }),
        _ => Err(UsageError::TakesOne { verb, what }),
    }
}

/// A usage error when the verb got arguments.
pub fn none(a: &Args) -> Result<(), UsageError> {
    if a.rest().is_empty() {
        Ok(())
    } else {
        Err(UsageError::TakesNone {
            verb: a.verb().to_string(),
        })
    }
}

/// The usage error of an unknown verb.
pub fn unknown(a: &Args) -> UsageError {
    UsageError::UnknownVerb(a.verb().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The usage error of `svc CMD words...` as printed after `svc CMD: `.
    fn usage(f: &Family, words: &[&str]) -> String {
        let parsed = super::super::args::parse(
            f.command,
            words.iter().map(std::ffi::OsString::from).collect(),
        );
        match parsed
            .map_err(UsageError::from)
            .and_then(|a| (f.request)(&a))
        {
            Ok(r) => panic!("{words:?} gave {}", r.command),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn usage_texts_are_the_ones_printed_before_typed_errors() {
        use super::super::{firewall, mail, threat, waf};
        let cases: &[(&Family, &[&str], &str)] = &[
            (&firewall::FAMILY, &["block"], "block needs an IP address"),
            (
                &firewall::FAMILY,
                &["allow", "a", "b"],
                "allow takes one IP address or range",
            ),
            (
                &firewall::FAMILY,
                &["flush", "x"],
                "flush takes no argument",
            ),
            (
                &firewall::FAMILY,
                &["rollback", "x"],
                "rollback takes status, confirm or revert",
            ),
            (
                &firewall::FAMILY,
                &["block", "192.0.2.1", "--for", "4"],
                "invalid duration \"4\": the last number has no unit (s, m, h or d)",
            ),
            (
                &firewall::FAMILY,
                &["unblock", "192.0.2.1", "--for", "4s"],
                "--for does not apply to unblock",
            ),
            (
                &firewall::FAMILY,
                &["nope\x1b"],
                "unknown command \"nope\\\\x1b\"",
            ),
            (
                &threat::FAMILY,
                &["block"],
                "block needs at least one IP address",
            ),
            (
                &threat::FAMILY,
                &["whitelist", "192.0.2.1", "--hours", "200"],
                "--hours must be a number from 1 to 168",
            ),
            (
                &threat::FAMILY,
                &["lookup", "192.0.2.1", "192.0.2.2"],
                "lookup takes one IP address",
            ),
            (
                &threat::FAMILY,
                &["undo", "a", "b"],
                "undo takes at most one token",
            ),
            (
                &threat::FAMILY,
                &["status", "--dev", "-c", "/x"],
                "--dev and --config cannot be combined",
            ),
            (
                &waf::FAMILY,
                &["escalation", "900112", "maybe"],
                "escalation: expected on or off, got \"maybe\"",
            ),
            (
                &waf::FAMILY,
                &["escalation", "900112"],
                "escalation takes RULE on|off, or nothing",
            ),
            (
                &waf::FAMILY,
                &["apply", "x"],
                "apply: \"x\" is not a rule id",
            ),
            (&waf::FAMILY, &["rules", "x"], "rules takes no argument"),
            (
                &waf::FAMILY,
                &["stats", "--bogus"],
                "unknown option --bogus",
            ),
            (
                &mail::FAMILY,
                &["release"],
                "release takes one quarantine ID",
            ),
            (&mail::FAMILY, &["list", "x"], "list takes no argument"),
        ];
        for (f, words, want) in cases {
            assert_eq!(usage(f, words), *want, "{words:?}");
        }
    }
}
