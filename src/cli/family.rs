//! The one runner of the commands that send a verb to the daemon (`firewall`, `threat`,
//! `waf`, `mail`): build the control request, ask, print the answer.
//!
//! Output rules, the same for every family:
//! - `--json` prints the daemon's answer as it came (pretty), also when it is a refusal;
//! - a refusal (`error` in the answer) prints `svc CMD VERB: reason` on standard error and
//!   exits 1; a partial result (`changed` beside the error) is shown on standard error
//!   first;
//! - a `warning` beside a success goes to standard error; the exit status stays 0.

use std::time::Duration;

use serde_json::Value;

use super::args::Args;
use super::defs::Command;
use crate::text::escape_controls;

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
    /// The request of a parsed command line, or a usage error (without the prefix).
    pub request: fn(&Args) -> Result<Request, String>,
    /// The human text of a (successful or partial) answer to control command `cmd`.
    pub human: fn(cmd: &str, answer: &Value) -> String,
}

/// Prints a usage error and the command's help to standard error; returns 2.
pub fn usage_error(c: &Command, message: &str) -> i32 {
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
        return usage_error(c, "missing command");
    }
    let req = match (f.request)(a) {
        Ok(r) => r,
        Err(e) => return usage_error(c, &e),
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
pub fn one(a: &Args, what: &str) -> Result<String, String> {
    match a.rest() {
        [x] => Ok(x.clone()),
        [] => Err(format!("{} needs {what}", a.verb())),
        _ => Err(format!("{} takes one {what}", a.verb())),
    }
}

/// A usage error when the verb got arguments.
pub fn none(a: &Args) -> Result<(), String> {
    if a.rest().is_empty() {
        Ok(())
    } else {
        Err(format!("{} takes no argument", a.verb()))
    }
}

/// The usage error of an unknown verb.
pub fn unknown(a: &Args) -> String {
    format!("unknown command {:?}", escape_controls(a.verb()))
}
