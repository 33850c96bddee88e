//! `svc --help` and `svc CMD --help`, rendered from [`super::defs::COMMANDS`].

use super::defs::{Command, COMMANDS};

/// `svc --help`.
pub fn usage() -> String {
    let mut s = format!(
        "svc {} — host security daemon\n\nUsage: svc <command> [options]\n\nCommands:\n",
        env!("CARGO_PKG_VERSION")
    );
    let width = COMMANDS.iter().map(|c| c.name.len()).max().unwrap_or(0);
    for c in COMMANDS {
        s.push_str(&format!("  {:<width$}  {}\n", c.name, c.summary));
    }
    s.push_str("\nRun `svc <command> --help` for a command's options.\n");
    s
}

/// The help of flag `f` in command `c`: its verbs (when it is verb-specific) and its help.
pub fn flag_help(c: &Command, f: &super::defs::Flag) -> String {
    let verbs = c.verbs_of(f);
    if verbs.is_empty() {
        f.help.to_string()
    } else {
        format!("{}: {}", verbs.join(", "), f.help)
    }
}

/// The exit-status sentence of a command.
pub fn exit_status(c: &Command) -> String {
    let mut s = String::from("0 done, 1 refused or failed (reason on standard error)");
    if !c.exit.is_empty() {
        s.push_str(&format!("; {}", c.exit));
    }
    s.push_str(", 2 usage error.");
    s
}

/// `svc CMD --help`.
pub fn command_help(c: &Command) -> String {
    let mut s = format!(
        "svc {} — {}\n\nUsage: {}\n",
        c.name,
        c.summary,
        c.synopsis()
    );
    if !c.about.is_empty() {
        s.push_str(&format!("\n{}\n", c.about));
    }
    if !c.verbs.is_empty() {
        s.push_str("\nCommands:\n");
        let heads: Vec<String> = c
            .verbs
            .iter()
            .map(|v| format!("{} {}", v.name, v.args).trim_end().to_string())
            .collect();
        let width = heads.iter().map(String::len).max().unwrap_or(0);
        for (v, head) in c.verbs.iter().zip(&heads) {
            s.push_str(&format!("  {head:<width$}  {}\n", v.summary));
        }
    }
    s.push_str("\nOptions:\n");
    let width = c
        .flags
        .iter()
        .map(|f| f.spelling().len())
        .max()
        .unwrap_or(0);
    for f in c.flags {
        s.push_str(&format!(
            "  {:<width$}  {}\n",
            f.spelling(),
            flag_help(c, f)
        ));
    }
    s.push_str(&format!("\nExit status: {}\n", exit_status(c)));
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_command_flag_and_verb_is_in_the_help() {
        let top = usage();
        for c in COMMANDS {
            assert!(top.contains(c.name), "{}", c.name);
            let h = command_help(c);
            assert!(h.starts_with(&format!("svc {} — ", c.name)));
            for f in c.flags {
                assert!(h.contains(&f.spelling()), "svc {}: {}", c.name, f.long);
            }
            for v in c.verbs {
                assert!(
                    h.contains(&format!("  {}", v.name)),
                    "svc {} {}",
                    c.name,
                    v.name
                );
            }
        }
        let fw = command_help(crate::cli::defs::command("firewall").unwrap());
        assert!(fw.contains("block, allow: lifetime such as"), "{fw}");
    }
}
