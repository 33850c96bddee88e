//! The web-server side: the map files the daemon rewrites and the snippets
//! `svc webserver-integration` installs.
//!
//! Files (paths from `[challenge]`):
//! - `{map_dir}/nginx.map`: one `<address> 1;` line per challenged address, included by an
//!   nginx `geo $svc_challenge` block (nginx reads it at start and reload; see
//!   `challenge.reload_command`).
//! - `{map_dir}/apache.map`: one `<address> 1` line per address, an Apache `RewriteMap`
//!   `txt:` map (Apache re-reads it when its modification time changes).
//! - `challenge.nginx_http_file`: the `geo` block (include in `http {}`; Debian's
//!   `conf.d/` is).
//! - `challenge.nginx_server_file`: `if ($svc_challenge) { return 302 <public_url>; }`
//!   (include in each `server {}` to protect).
//! - `challenge.apache_file`: `RewriteEngine On`, the `RewriteMap` and the redirect
//!   (`Include` it inside each `<VirtualHost>` to protect: mod_rewrite rules of the server
//!   configuration do not reach a virtual host).
//!
//! Guarantees: every file is written atomically (`fsutil::write_atomic`, 0644: web-server
//! workers read the maps); each file starts with [`MARKER`], and `remove` deletes only
//! files that carry it. The daemon rewrites the maps at least every
//! [`MAP_REFRESH_SECS`] while it runs, so a map older than [`MAP_STALE_SECS`] means the
//! daemon (or its challenge) is not running.

use std::io;
use std::net::IpAddr;
use std::path::{Path, PathBuf};

use crate::config::challenge::ChallengeConfig;

/// First line of every file svc writes here.
pub const MARKER: &str = "# Managed by svc (proof-of-work challenge); do not edit.";
/// The daemon rewrites the maps at least this often.
pub const MAP_REFRESH_SECS: i64 = 300;
/// A map older than this is reported stale.
pub const MAP_STALE_SECS: i64 = 900;

pub fn nginx_map_path(c: &ChallengeConfig) -> PathBuf {
    c.map_dir.join("nginx.map")
}

pub fn apache_map_path(c: &ChallengeConfig) -> PathBuf {
    c.map_dir.join("apache.map")
}

/// The nginx map for `addrs`.
pub fn nginx_map(addrs: &[IpAddr]) -> String {
    let mut s = format!("{MARKER}\n");
    for a in addrs {
        s.push_str(&format!("{a} 1;\n"));
    }
    s
}

/// The Apache `txt:` map for `addrs`.
pub fn apache_map(addrs: &[IpAddr]) -> String {
    let mut s = format!("{MARKER}\n");
    for a in addrs {
        s.push_str(&format!("{a} 1\n"));
    }
    s
}

/// Writes both maps atomically (the directory is created 0755 when missing).
pub fn write_maps(c: &ChallengeConfig, addrs: &[IpAddr]) -> io::Result<()> {
    crate::fsutil::ensure_dir(&c.map_dir, 0o755)?;
    crate::fsutil::write_atomic(&nginx_map_path(c), nginx_map(addrs).as_bytes(), 0o644, None)?;
    crate::fsutil::write_atomic(
        &apache_map_path(c),
        apache_map(addrs).as_bytes(),
        0o644,
        None,
    )
}

/// A web server svc integrates with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Server {
    Apache,
    Nginx,
}

impl Server {
    pub const ALL: [Server; 2] = [Server::Apache, Server::Nginx];

    pub fn name(self) -> &'static str {
        match self {
            Server::Apache => "apache",
            Server::Nginx => "nginx",
        }
    }

    pub fn parse(s: &str) -> Option<Server> {
        Server::ALL.into_iter().find(|x| x.name() == s)
    }

    /// The snippet files of this server, with their content.
    pub fn files(self, c: &ChallengeConfig) -> Vec<(PathBuf, String)> {
        let url = &c.public_url;
        match self {
            Server::Nginx => vec![
                (
                    c.nginx_http_file.clone(),
                    format!(
                        "{MARKER}\n# Addresses svc routes to its challenge (include in http {{}}).\ngeo $svc_challenge {{\n    default 0;\n    include \"{}\";\n}}\n",
                        nginx_map_path(c).display()
                    ),
                ),
                (
                    c.nginx_server_file.clone(),
                    format!(
                        "{MARKER}\n# Include in each server {{}} to protect: challenged addresses go to the challenge.\nif ($svc_challenge) {{\n    return 302 \"{url}\";\n}}\n"
                    ),
                ),
            ],
            Server::Apache => vec![(
                c.apache_file.clone(),
                format!(
                    "{MARKER}\n# Include inside each <VirtualHost> to protect: challenged addresses go to the challenge.\n<IfModule mod_rewrite.c>\n    RewriteEngine On\n    RewriteMap svc_challenge \"txt:{}\"\n    RewriteCond \"${{svc_challenge:%{{REMOTE_ADDR}}|0}}\" \"=1\"\n    RewriteRule \"^\" \"{url}\" [R=302,L]\n</IfModule>\n",
                    apache_map_path(c).display()
                ),
            )],
        }
    }

    /// Whether this server looks installed (the directory of its first snippet exists).
    pub fn present(self, c: &ChallengeConfig) -> bool {
        self.files(c)
            .first()
            .and_then(|(p, _)| p.parent().map(Path::is_dir))
            .unwrap_or(false)
    }
}

/// State of one snippet file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FileState {
    /// Present with the content `install` writes now.
    Installed,
    /// Present, written by svc, but with other content (another URL or path).
    Outdated,
    /// Present but not written by svc (never touched).
    Foreign,
    Missing,
}

impl FileState {
    pub fn name(self) -> &'static str {
        match self {
            FileState::Installed => "installed",
            FileState::Outdated => "outdated",
            FileState::Foreign => "foreign",
            FileState::Missing => "missing",
        }
    }
}

fn state_of(path: &Path, want: &str) -> FileState {
    match crate::fsutil::read_daemon_string(path) {
        Ok(s) if s == want => FileState::Installed,
        Ok(s) if s.starts_with(MARKER) => FileState::Outdated,
        Ok(_) => FileState::Foreign,
        Err(_) => FileState::Missing,
    }
}

/// Why an installation was refused.
#[derive(Debug)]
pub enum InstallError {
    NoPublicUrl,
    /// A file at the path was not written by svc.
    Foreign(PathBuf),
    Io(PathBuf, io::Error),
}

impl std::fmt::Display for InstallError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            InstallError::NoPublicUrl => {
                f.write_str("challenge.public_url is not set (where should the web server send challenged addresses?)")
            }
            InstallError::Foreign(p) => {
                write!(f, "{} exists and was not written by svc; not replaced", p.display())
            }
            InstallError::Io(p, e) => write!(f, "{}: {e}", p.display()),
        }
    }
}

/// Writes the snippets of `server` (and empty maps when none exist yet, so the web server
/// can load its configuration before the daemon first writes them). Returns the paths.
pub fn install(c: &ChallengeConfig, server: Server) -> Result<Vec<PathBuf>, InstallError> {
    if c.public_url.is_empty() {
        return Err(InstallError::NoPublicUrl);
    }
    let files = server.files(c);
    for (p, want) in &files {
        if state_of(p, want) == FileState::Foreign {
            return Err(InstallError::Foreign(p.clone()));
        }
    }
    if !nginx_map_path(c).exists() || !apache_map_path(c).exists() {
        write_maps(c, &[]).map_err(|e| InstallError::Io(c.map_dir.clone(), e))?;
    }
    let mut out = Vec::new();
    for (p, content) in files {
        if let Some(dir) = p.parent() {
            crate::fsutil::ensure_dir(dir, 0o755).map_err(|e| InstallError::Io(p.clone(), e))?;
        }
        crate::fsutil::write_atomic(&p, content.as_bytes(), 0o644, None)
            .map_err(|e| InstallError::Io(p.clone(), e))?;
        out.push(p);
    }
    Ok(out)
}

/// Removes the snippets of `server` that svc wrote; returns the removed paths.
pub fn remove(c: &ChallengeConfig, server: Server) -> Result<Vec<PathBuf>, InstallError> {
    let mut out = Vec::new();
    for (p, want) in server.files(c) {
        match state_of(&p, &want) {
            FileState::Installed | FileState::Outdated => {
                crate::fsutil::remove_daemon_file(&p)
                    .map_err(|e| InstallError::Io(p.clone(), e))?;
                out.push(p);
            }
            FileState::Foreign | FileState::Missing => {}
        }
    }
    Ok(out)
}

/// One server's integration state.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Status {
    pub server: &'static str,
    /// `installed` when every file is; else the worst file state.
    pub state: &'static str,
    pub files: Vec<(String, &'static str)>,
}

/// The integration state of every server, and of the map.
pub fn status(c: &ChallengeConfig) -> Vec<Status> {
    Server::ALL
        .into_iter()
        .map(|s| {
            let files: Vec<(String, FileState)> = s
                .files(c)
                .iter()
                .map(|(p, want)| (p.display().to_string(), state_of(p, want)))
                .collect();
            let state = if files.iter().all(|(_, f)| *f == FileState::Installed) {
                FileState::Installed
            } else if files.iter().any(|(_, f)| *f == FileState::Foreign) {
                FileState::Foreign
            } else if files.iter().any(|(_, f)| *f == FileState::Outdated) {
                FileState::Outdated
            } else {
                FileState::Missing
            };
            Status {
                server: s.name(),
                state: state.name(),
                files: files.into_iter().map(|(p, f)| (p, f.name())).collect(),
            }
        })
        .collect()
}

/// Age of the map in seconds at `now` (Unix seconds), `None` when it does not exist.
pub fn map_age(c: &ChallengeConfig, now: i64) -> Option<i64> {
    let m = std::fs::metadata(nginx_map_path(c)).ok()?;
    let t = m
        .modified()
        .ok()?
        .duration_since(std::time::UNIX_EPOCH)
        .ok()?
        .as_secs() as i64;
    Some((now - t).max(0))
}

/// The `svc doctor` check `webserver_integration`: (`ok` or `warning`, detail). `ok` when
/// a server's snippets are installed and the map is fresh.
pub fn doctor(c: &ChallengeConfig, now: i64) -> (&'static str, String) {
    let st = status(c);
    let installed: Vec<&str> = st
        .iter()
        .filter(|s| s.state == "installed")
        .map(|s| s.server)
        .collect();
    let map = match map_age(c, now) {
        Some(a) if a <= MAP_STALE_SECS => None,
        Some(a) => Some(format!(
            "the map {} is {a} s old",
            nginx_map_path(c).display()
        )),
        None => Some(format!(
            "the map {} is missing",
            nginx_map_path(c).display()
        )),
    };
    if installed.is_empty() {
        return (
            "warning",
            "no web server sends challenged addresses to the challenge (run svc webserver-integration install)".into(),
        );
    }
    let outdated: Vec<&str> = st
        .iter()
        .filter(|s| s.state == "outdated")
        .map(|s| s.server)
        .collect();
    match (map, outdated.is_empty()) {
        (Some(m), _) => ("warning", m),
        (None, false) => (
            "warning",
            format!("snippets of {} differ from the configuration (run svc webserver-integration install)", outdated.join(", ")),
        ),
        (None, true) => ("ok", format!("{} installed; map fresh", installed.join(", "))),
    }
}

/// Addresses listed in a map file's text (`<address> 1` or `<address> 1;` lines; others
/// ignored): what the web server sees.
pub fn parse_map(text: &str) -> Vec<IpAddr> {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| l.split_whitespace().next()?.parse().ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(dir: &Path) -> ChallengeConfig {
        ChallengeConfig {
            public_url: "https://challenge.example.com/".into(),
            map_dir: dir.join("maps"),
            apache_file: dir.join("apache2/conf-available/svc-challenge.conf"),
            nginx_http_file: dir.join("nginx/conf.d/svc-challenge.conf"),
            nginx_server_file: dir.join("nginx/snippets/svc-challenge.conf"),
            ..ChallengeConfig::default()
        }
    }

    #[test]
    fn install_status_remove() {
        let dir = std::env::temp_dir().join(format!("svc-ws-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("nginx/conf.d")).unwrap();
        let mut c = cfg(&dir);
        assert!(Server::Nginx.present(&c) && !Server::Apache.present(&c));
        assert_eq!(status(&c)[1].state, "missing");
        let written = install(&c, Server::Nginx).unwrap();
        assert_eq!(written.len(), 2);
        assert_eq!(status(&c)[1].state, "installed");
        assert_eq!(status(&c)[0].state, "missing");
        let map = std::fs::read_to_string(nginx_map_path(&c)).unwrap();
        assert!(parse_map(&map).is_empty());
        assert!(map_age(&c, jiff::Timestamp::now().as_second()).unwrap() < 60);
        c.public_url = "https://other.example.com/".into();
        assert_eq!(status(&c)[1].state, "outdated");
        // A file svc did not write is never replaced nor removed.
        crate::fsutil::ensure_dir(c.apache_file.parent().unwrap(), 0o755).unwrap();
        std::fs::write(&c.apache_file, "# mine\n").unwrap();
        assert!(matches!(
            install(&c, Server::Apache),
            Err(InstallError::Foreign(_))
        ));
        assert!(remove(&c, Server::Apache).unwrap().is_empty());
        assert_eq!(remove(&c, Server::Nginx).unwrap().len(), 2);
        assert_eq!(status(&c)[1].state, "missing");
        let addrs: Vec<IpAddr> = vec!["192.0.2.1".parse().unwrap(), "2001:db8::1".parse().unwrap()];
        write_maps(&c, &addrs).unwrap();
        let text = std::fs::read_to_string(apache_map_path(&c)).unwrap();
        assert_eq!(parse_map(&text), addrs);
        assert!(text.contains("192.0.2.1 1\n"));
        assert!(std::fs::read_to_string(nginx_map_path(&c))
            .unwrap()
            .contains("2001:db8::1 1;\n"));
        c.public_url.clear();
        assert!(matches!(
            install(&c, Server::Nginx),
            Err(InstallError::NoPublicUrl)
        ));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
