//! Detections over parsed probe records: pure functions, no I/O (the chain and account are
//! added by enrichment, `context`).
//!
//! - `process_spawned_by_web`: an exec of a shell with `-c`, a downloader or an inline
//!   interpreter whose parent chain holds a web server or PHP worker (by comm).
//! - `outbound_connection_unusual`: a non-root process connecting out to a port outside
//!   `[probes] allowed_out_ports` (or, decided later by the advisory verdict pool, to an
//!   address the threat database scores high).
//! - `sensitive_file_access`: a non-root uid that does not own the file opening a path of
//!   `[probes] sensitive_files`.
//! - `af_alg_socket`: any AF_ALG socket; HIGH from a web-facing process, WARNING otherwise.

use crate::config::probes::Pattern;
use crate::model::finding::Severity;
use crate::net::cidr::PortRange;

use super::record::{Alg, Conn, Direction, Exec, Head, Open};

pub const CHECK_WEB_SPAWN: &str = "process_spawned_by_web";
pub const CHECK_OUTBOUND: &str = "outbound_connection_unusual";
pub const CHECK_SENSITIVE: &str = "sensitive_file_access";
pub const CHECK_AF_ALG: &str = "af_alg_socket";

/// Every check the probes report.
pub const CHECKS: [&str; 4] = [
    CHECK_WEB_SPAWN,
    CHECK_OUTBOUND,
    CHECK_SENSITIVE,
    CHECK_AF_ALG,
];

/// Account names that serve the web on common distributions (decision 419).
const WEB_ACCOUNTS: [&str; 6] = [
    "www-data",
    "apache",
    "nginx",
    "nobody",
    "lsadm",
    "litespeed",
];

/// True when `comm` is a web server or PHP worker (`php-fpm*`, `php-cgi*`, `lsphp*`,
/// `httpd`, `apache2`, `nginx`, `litespeed*`).
pub fn is_web_comm(comm: &str) -> bool {
    ["php-fpm", "php-cgi", "lsphp", "litespeed"]
        .iter()
        .any(|p| comm.starts_with(p))
        || matches!(comm, "httpd" | "apache2" | "nginx")
}

/// The web server or PHP worker in `head`'s parent chain, nearest first.
pub fn web_parent(head: &Head) -> Option<&str> {
    head.parents
        .iter()
        .map(|p| p.comm.as_str())
        .find(|c| is_web_comm(c))
}

/// Web-facing (decision 419): the process or a parent is a web server or PHP worker, or its
/// account is one the web runs as.
pub fn is_web_facing(head: &Head, account: Option<&str>) -> bool {
    is_web_comm(&head.actor.comm)
        || web_parent(head).is_some()
        || account.is_some_and(|a| WEB_ACCOUNTS.contains(&a))
}

fn base(s: &str) -> &str {
    s.rsplit('/').next().unwrap_or(s)
}

/// True for a short option cluster holding `flag` (`-c`, `-ec`), not a long option.
fn has_flag(argv: &[String], flag: char) -> bool {
    argv.iter().skip(1).any(|a| {
        a.len() >= 2 && a.starts_with('-') && !a.starts_with("--") && a[1..].contains(flag)
    })
}

/// What makes an exec a shell or downloader (`sh -c`, `curl`, `python -c`, ...), or `None`.
pub fn spawned_tool(e: &Exec) -> Option<String> {
    let argv = &e.head.actor.argv;
    let name = base(&e.filename);
    let name = if name.is_empty() {
        argv.first().map(|a| base(a)).unwrap_or("")
    } else {
        name
    };
    let interpreter = name.trim_end_matches(|c: char| c.is_ascii_digit() || c == '.');
    match interpreter {
        "sh" | "bash" | "dash" | "zsh" | "ash" | "ksh" if has_flag(argv, 'c') => {
            Some(format!("{name} -c"))
        }
        "curl" | "wget" | "nc" | "ncat" | "netcat" => Some(name.to_string()),
        "python" if has_flag(argv, 'c') => Some(format!("{name} -c")),
        "perl" if has_flag(argv, 'e') || has_flag(argv, 'E') => Some(format!("{name} -e")),
        _ => None,
    }
}

/// A detection before enrichment: check, severity and the parts of its message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hit {
    pub check: &'static str,
    pub severity: Severity,
    /// Without the account (enrichment appends it): the finding's merge key.
    pub message: String,
    pub path: Option<String>,
    pub ip: Option<std::net::IpAddr>,
}

/// `process_spawned_by_web` for an exec.
pub fn web_spawn(e: &Exec) -> Option<Hit> {
    let tool = spawned_tool(e)?;
    let parent = web_parent(&e.head)?;
    Some(Hit {
        check: CHECK_WEB_SPAWN,
        severity: Severity::High,
        message: format!("{parent} started {tool}"),
        path: Some(e.filename.clone()),
        ip: None,
    })
}

/// True when `port` is inside one of `allowed`.
pub fn port_allowed(allowed: &[PortRange], port: u16) -> bool {
    allowed.iter().any(|r| r.lo <= port && port <= r.hi)
}

/// `outbound_connection_unusual` by port: a non-root process connecting out to a port
/// outside `allowed`.
pub fn unusual_port(c: &Conn, allowed: &[PortRange]) -> Option<Hit> {
    if c.direction != Direction::Outbound || c.head.actor.uid == 0 {
        return None;
    }
    let (ip, port) = c.remote;
    if port_allowed(allowed, port) {
        return None;
    }
    Some(Hit {
        check: CHECK_OUTBOUND,
        severity: Severity::Warning,
        message: format!(
            "{} connected out to port {port} (not allowed)",
            c.head.actor.comm
        ),
        path: None,
        ip: Some(ip),
    })
}

/// `outbound_connection_unusual` by reputation: the threat database scores the remote
/// address `score` (0-100), at or over `high`.
pub fn high_score(c: &Conn, score: u8, high: u8) -> Option<Hit> {
    if c.direction != Direction::Outbound || c.head.actor.uid == 0 || score < high {
        return None;
    }
    let (ip, port) = c.remote;
    Some(Hit {
        check: CHECK_OUTBOUND,
        severity: Severity::High,
        message: format!(
            "{} connected out to {ip} port {port} (threat score {score})",
            c.head.actor.comm
        ),
        path: None,
        ip: Some(ip),
    })
}

/// `sensitive_file_access`: `path` is the full path when known (`/proc/<pid>/fd`), else the
/// kernel's dentry path (matched by its tail).
pub fn sensitive(o: &Open, full_path: Option<&str>, patterns: &[Pattern]) -> Option<Hit> {
    if o.head.actor.uid == 0 || o.head.actor.uid == o.owner {
        return None;
    }
    let path = full_path.unwrap_or(&o.path);
    let hit = patterns.iter().any(|p| match full_path {
        Some(full) => p.matches(full),
        None => p.matches_tail(&o.path),
    });
    hit.then(|| Hit {
        check: CHECK_SENSITIVE,
        severity: Severity::High,
        message: format!(
            "{} (uid {}) opened {path} owned by uid {}",
            o.head.actor.comm, o.head.actor.uid, o.owner
        ),
        path: Some(path.to_string()),
        ip: None,
    })
}

/// `af_alg_socket`.
pub fn af_alg(a: &Alg, account: Option<&str>) -> Hit {
    let web = is_web_facing(&a.head, account);
    Hit {
        check: CHECK_AF_ALG,
        severity: if web {
            Severity::High
        } else {
            Severity::Warning
        },
        message: format!(
            "{} opened an AF_ALG socket{}",
            a.head.actor.comm,
            if web { " (web-facing)" } else { "" }
        ),
        path: None,
        ip: None,
    }
}

#[cfg(test)]
mod tests {
    use super::super::record::Proc;
    use super::*;

    fn proc(pid: u32, uid: u32, comm: &str) -> Proc {
        Proc {
            pid,
            uid,
            comm: comm.into(),
            argv: Vec::new(),
        }
    }

    fn head(comm: &str, uid: u32, parents: &[&str]) -> Head {
        Head {
            actor: proc(100, uid, comm),
            ppid: 99,
            cgroup: 1,
            parents: parents
                .iter()
                .enumerate()
                .map(|(i, c)| proc(99 - i as u32, uid, c))
                .collect(),
        }
    }

    fn exec(file: &str, argv: &[&str], parents: &[&str]) -> Exec {
        let mut h = head(base(file), 33, parents);
        h.actor.argv = argv.iter().map(|a| a.to_string()).collect();
        Exec {
            head: h,
            filename: file.into(),
        }
    }

    #[test]
    fn web_spawn_needs_a_tool_and_a_web_parent() {
        let e = exec(
            "/bin/sh",
            &["sh", "-c", "curl x|sh"],
            &["php-fpm8.2", "systemd"],
        );
        let hit = web_spawn(&e).unwrap();
        assert_eq!(hit.message, "php-fpm8.2 started sh -c");
        assert!(web_spawn(&exec("/usr/bin/curl", &["curl", "x"], &["sh", "apache2"])).is_some());
        assert!(web_spawn(&exec(
            "/usr/bin/python3.11",
            &["python3", "-c", "x"],
            &["lsphp"]
        ))
        .is_some());
        assert!(web_spawn(&exec("/usr/bin/perl", &["perl", "-e", "x"], &["nginx"])).is_some());
        // A shell running a script, or a tool without a web parent: nothing.
        assert!(web_spawn(&exec("/bin/sh", &["sh", "/x.sh"], &["php-fpm"])).is_none());
        assert!(web_spawn(&exec("/bin/sh", &["sh", "--c"], &["php-fpm"])).is_none());
        assert!(web_spawn(&exec("/usr/bin/curl", &["curl"], &["bash", "sshd"])).is_none());
        assert!(web_spawn(&exec("", &[], &["php-fpm"])).is_none());
    }

    #[test]
    fn ports_and_scores() {
        let allowed = vec![
            PortRange { lo: 80, hi: 80 },
            PortRange { lo: 1000, hi: 2000 },
        ];
        let c = |uid: u32, port: u16, dir: Direction| Conn {
            head: head("php", uid, &[]),
            direction: dir,
            local: ("127.0.0.1".parse().unwrap(), 5),
            remote: ("198.51.100.4".parse().unwrap(), port),
        };
        assert!(unusual_port(&c(33, 4444, Direction::Outbound), &allowed).is_some());
        assert!(unusual_port(&c(33, 1500, Direction::Outbound), &allowed).is_none());
        assert!(unusual_port(&c(0, 4444, Direction::Outbound), &allowed).is_none());
        assert!(unusual_port(&c(33, 4444, Direction::Inbound), &allowed).is_none());
        assert!(high_score(&c(33, 80, Direction::Outbound), 90, 80).is_some());
        assert!(high_score(&c(33, 80, Direction::Outbound), 79, 80).is_none());
    }

    #[test]
    fn sensitive_needs_a_non_owner_non_root() {
        let pats = vec![Pattern::parse("/etc/shadow").unwrap()];
        let o = |uid: u32, owner: u32| Open {
            head: head("cat", uid, &[]),
            owner,
            fd: 3,
            path: "/etc/shadow".into(),
        };
        assert!(sensitive(&o(33, 0), None, &pats).is_some());
        assert!(sensitive(&o(33, 0), Some("/etc/passwd"), &pats).is_none());
        assert!(sensitive(&o(0, 33), None, &pats).is_none());
        assert!(sensitive(&o(33, 33), None, &pats).is_none());
    }

    #[test]
    fn af_alg_severity_by_web_facing() {
        let a = |comm: &str, parents: &[&str]| Alg {
            head: head(comm, 1000, parents),
            sock_type: 5,
        };
        assert_eq!(af_alg(&a("x", &["php-fpm"]), None).severity, Severity::High);
        assert_eq!(
            af_alg(&a("x", &["bash"]), Some("www-data")).severity,
            Severity::High
        );
        assert_eq!(
            af_alg(&a("x", &["bash"]), Some("ann")).severity,
            Severity::Warning
        );
    }
}
