//! `svc webserver-integration install|status|remove`: the web-server snippets that send
//! addresses routed to the proof-of-work challenge to `challenge.public_url`
//! (`crate::challenge::webserver` has the files and their exact content). Works without
//! the daemon: it reads the configuration (defaults when there is no file).
//!
//! - `install [--server apache|nginx]`: writes the snippets of the named server, or of
//!   every server whose snippet directory exists; writes empty maps when none exist yet.
//!   Refuses when `challenge.public_url` is unset or a file at a snippet path was not
//!   written by svc. Prints what the operator still has to do (enable, include, reload,
//!   and, while `challenge.trusted_proxies` is empty, list the web server there if it
//!   proxies `challenge.public_url` to the listener). It never edits svc's own
//!   configuration: which address a proxy connects from is the operator's to say, and a
//!   wrong entry would let that peer name any client.
//! - `status`: each server's files (`installed`, `outdated`, `foreign`, `missing`) and the
//!   map's age (`fresh` when the daemon rewrote it within 15 minutes). Exit 1 when nothing
//!   is installed or the map is not fresh.
//! - `remove [--server ...]`: deletes the snippets svc wrote (never a foreign file); the
//!   maps stay (the daemon owns them).
//!
//! Exit codes: 0 done; 1 refused or failed; 2 usage error.

use serde_json::json;

use super::args::Args;
use super::family::{usage_error, UsageError};
use crate::challenge::webserver::{self, Server};
use crate::config::challenge::ChallengeConfig;

use super::defs::WEBSERVER_INTEGRATION as COMMAND;

fn config(a: &Args) -> Result<ChallengeConfig, Vec<String>> {
    let path = super::config_path(a);
    if a.config.is_none() && !path.exists() {
        return Ok(ChallengeConfig::default());
    }
    crate::config::load(&path)
        .map(|c| c.challenge)
        .map_err(|errs| errs.iter().map(|e| e.to_string()).collect())
}

/// Runs `svc webserver-integration` (flags parsed, `--help` handled).
pub fn run(a: &Args) -> i32 {
    match a.words.as_slice() {
        [w] if COMMAND.verb(w).is_some() => {}
        [] => return usage_error(&COMMAND, "missing command (install, status or remove)"),
        [w] => return usage_error(&COMMAND, format!("unknown command {w:?}")),
        _ => return usage_error(&COMMAND, "one command at a time"),
    }
    let server = match a.value("server").map(|v| (v, Server::parse(v))) {
        None => None,
        Some((_, Some(s))) => Some(s),
        Some((v, None)) => {
            return usage_error(
                &COMMAND,
                UsageError::Choice {
                    what: "--server",
                    expected: "apache or nginx",
                    got: v.to_string(),
                },
            )
        }
    };
    let c = match config(a) {
        Ok(c) => c,
        Err(errs) => {
            for e in errs {
                eprintln!("svc webserver-integration: {e}");
            }
            return 1;
        }
    };
    let servers: Vec<Server> = match server {
        Some(s) => vec![s],
        None => Server::ALL.into_iter().filter(|s| s.present(&c)).collect(),
    };
    match a.words[0].as_str() {
        "install" => install(a, &c, &servers),
        "remove" => remove(a, &c, &servers),
        _ => status(a, &c),
    }
}

fn install(a: &Args, c: &ChallengeConfig, servers: &[Server]) -> i32 {
    if servers.is_empty() {
        eprintln!("svc webserver-integration install: no web server found (no directory for challenge.apache_file or challenge.nginx_http_file); name one with --server");
        return 1;
    }
    let mut written = Vec::new();
    for s in servers {
        match webserver::install(c, *s) {
            Ok(paths) => written.extend(paths.into_iter().map(|p| (s.name(), p))),
            Err(e) => {
                eprintln!("svc webserver-integration install: {}: {e}", s.name());
                return 1;
            }
        }
    }
    if a.json {
        let files: Vec<_> = written
            .iter()
            .map(|(s, p)| json!({"server": s, "path": p.display().to_string()}))
            .collect();
        super::out(&format!("{}\n", json!({ "ok": true, "written": files })));
        return 0;
    }
    let mut text = String::new();
    for (s, p) in &written {
        text.push_str(&format!("wrote {s}: {}\n", p.display()));
    }
    if servers.contains(&Server::Apache) {
        text.push_str(&format!(
            "apache: add `Include {}` inside each <VirtualHost> to protect (a2enmod rewrite), then reload Apache\n",
            c.apache_file.display()
        ));
    }
    if servers.contains(&Server::Nginx) {
        text.push_str(&format!(
            "nginx: add `include {};` to each server {{}} to protect, reload nginx, and set challenge.reload_command (nginx reads the map at reload)\n",
            c.nginx_server_file.display()
        ));
    }
    text.push_str(&proxy_note(c));
    super::out(&text);
    0
}

/// What `install` says about `challenge.trusted_proxies`.
pub fn proxy_note(c: &ChallengeConfig) -> String {
    if c.trusted_proxies.is_empty() {
        format!(
            "proxy: if this web server proxies {} to the challenge listener ({}), list the address it connects from in challenge.trusted_proxies (for a local proxy: trusted_proxies = [\"127.0.0.1\", \"::1\"]) and reload svc; until then X-Forwarded-For is ignored and every visitor's proof is bound to the proxy's address\n",
            c.public_url, c.listen
        )
    } else {
        let list: Vec<String> = c.trusted_proxies.iter().map(|n| n.to_string()).collect();
        format!(
            "proxy: X-Forwarded-For counts from {} (challenge.trusted_proxies); a proxy in front of the listener must set it (nginx: proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for)\n",
            list.join(", ")
        )
    }
}

fn remove(a: &Args, c: &ChallengeConfig, servers: &[Server]) -> i32 {
    let servers: Vec<Server> = if a.value("server").is_some() {
        servers.to_vec()
    } else {
        Server::ALL.to_vec()
    };
    let mut removed = Vec::new();
    for s in servers {
        match webserver::remove(c, s) {
            Ok(paths) => removed.extend(paths),
            Err(e) => {
                eprintln!("svc webserver-integration remove: {}: {e}", s.name());
                return 1;
            }
        }
    }
    if a.json {
        let files: Vec<String> = removed.iter().map(|p| p.display().to_string()).collect();
        super::out(&format!("{}\n", json!({ "ok": true, "removed": files })));
    } else if removed.is_empty() {
        super::out("nothing to remove\n");
    } else {
        let mut text = String::new();
        for p in &removed {
            text.push_str(&format!("removed {}\n", p.display()));
        }
        text.push_str("reload the web server (and remove its include lines) to finish\n");
        super::out(&text);
    }
    0
}

/// The map's state: (`fresh`, `stale` or `missing`, age in seconds).
pub fn map_state(c: &ChallengeConfig) -> (&'static str, Option<i64>) {
    let now = jiff::Timestamp::now().as_second();
    match webserver::map_age(c, now) {
        Some(age) if age <= webserver::MAP_STALE_SECS => ("fresh", Some(age)),
        Some(age) => ("stale", Some(age)),
        None => ("missing", None),
    }
}

fn status(a: &Args, c: &ChallengeConfig) -> i32 {
    let st = webserver::status(c);
    let (map, age) = map_state(c);
    let any = st.iter().any(|s| s.state == "installed");
    let ok = any && map == "fresh";
    if a.json {
        super::out(&format!(
            "{}\n",
            json!({
                "ok": ok, "servers": st, "map": map, "map_age_seconds": age,
                "map_file": webserver::nginx_map_path(c).display().to_string(),
                "public_url": c.public_url,
                "trusted_proxies": c.trusted_proxies.iter().map(|n| n.to_string()).collect::<Vec<_>>(),
            })
        ));
    } else {
        let mut text = String::new();
        for s in &st {
            text.push_str(&format!("{:<7} {}\n", s.server, s.state));
            for (p, f) in &s.files {
                text.push_str(&format!("        {f:<9} {p}\n"));
            }
        }
        text.push_str(&format!(
            "map     {map}{} ({})\n",
            age.map(|a| format!(", written {a} s ago"))
                .unwrap_or_default(),
            c.map_dir.display()
        ));
        super::out(&text);
    }
    if ok {
        0
    } else {
        1
    }
}
