//! Account routes: the accounts a server-wide scan covers, and one account's detail.
//!
//! An account is a system user owning a web root. Web roots are the check context's
//! `web_roots` patterns expanded (`/var/www`, `/home/*/public_html`, ...) plus, one level
//! down only, the directories directly inside an expanded root that belong to someone else
//! than the root's owner (the sites inside a shared `/var/www`). Nothing deeper is read,
//! symlinks inside a root are not followed, root-owned directories are not accounts, and
//! each root contributes at most [`MAX_ROOT_ENTRIES`] entries.

use std::collections::{BTreeMap, HashMap};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use crate::checks::accounts::parse_passwd;
use crate::checks::CheckContext;
use crate::findings::Finding;
use crate::hostfs::read_bounded;
use crate::http::{Request, Response};

use super::auth::Caller;
use super::data::{required, store_failed, tri};
use super::App;

/// Entries directly inside one web root looked at, at most.
pub const MAX_ROOT_ENTRIES: usize = 10_000;
/// Accounts listed at most.
pub const MAX_ACCOUNTS: usize = 10_000;
/// History rows on the account detail.
pub const ACCOUNT_HISTORY: usize = 100;
/// Longest account name accepted.
const MAX_NAME: usize = 256;

/// User names: the context's passwd file first (so a re-rooted layout names its own
/// users), then the system's name service.
pub(super) struct Users {
    by_uid: HashMap<u32, String>,
    by_name: HashMap<String, u32>,
    nss: crate::hostfs::OwnerCache,
}

impl Users {
    pub(super) fn load(ctx: &CheckContext) -> Users {
        let mut u = Users {
            by_uid: HashMap::new(),
            by_name: HashMap::new(),
            nss: crate::hostfs::OwnerCache::default(),
        };
        if let Some(p) = &ctx.passwd_path {
            if let Ok(bytes) = read_bounded(p, ctx.limits.max_file_bytes, true) {
                for e in parse_passwd(&bytes).0 {
                    u.by_uid.entry(e.uid).or_insert_with(|| e.name.clone());
                    u.by_name.entry(e.name).or_insert(e.uid);
                }
            }
        }
        u
    }

    pub(super) fn name(&mut self, uid: u32) -> Option<String> {
        if let Some(n) = self.by_uid.get(&uid) {
            return Some(n.clone());
        }
        self.nss.name(uid)
    }

    pub(super) fn uid(&self, name: &str) -> Option<u32> {
        if let Some(u) = self.by_name.get(name) {
            return Some(*u);
        }
        nix::unistd::User::from_name(name)
            .ok()
            .flatten()
            .map(|u| u.uid.as_raw())
    }

    /// The user owning `path` (not following a final symlink), unless it is root.
    pub(super) fn owner_of(&mut self, path: &Path) -> Option<String> {
        let uid = std::fs::symlink_metadata(path).ok()?.uid();
        if uid == 0 {
            return None;
        }
        self.name(uid)
    }
}

/// Web-root directories by owner uid.
struct Scan {
    by_uid: BTreeMap<u32, Vec<String>>,
    truncated: bool,
}

impl Scan {
    fn add(&mut self, uid: u32, path: &Path) {
        if uid == 0 {
            return;
        }
        if !self.by_uid.contains_key(&uid) && self.by_uid.len() >= MAX_ACCOUNTS {
            self.truncated = true;
            return;
        }
        let shown = path.display().to_string();
        let roots = self.by_uid.entry(uid).or_default();
        if !roots.contains(&shown) {
            roots.push(shown);
        }
    }
}

/// Metadata of a configured root: a symlink is followed only when root owns it.
fn root_meta(p: &Path) -> Option<std::fs::Metadata> {
    let l = std::fs::symlink_metadata(p).ok()?;
    if !l.file_type().is_symlink() {
        return Some(l);
    }
    if l.uid() != 0 {
        return None;
    }
    std::fs::metadata(p).ok()
}

fn scan(ctx: &CheckContext) -> Scan {
    let mut s = Scan {
        by_uid: BTreeMap::new(),
        truncated: false,
    };
    for root in ctx.glob_all(&ctx.web_roots) {
        let Some(meta) = root_meta(&root) else {
            continue;
        };
        if !meta.is_dir() {
            continue;
        }
        s.add(meta.uid(), &root);
        let Ok(rd) = std::fs::read_dir(&root) else {
            continue;
        };
        let mut children: Vec<(PathBuf, u32)> = Vec::new();
        for (i, entry) in rd.enumerate() {
            if i >= MAX_ROOT_ENTRIES {
                s.truncated = true;
                break;
            }
            let Ok(entry) = entry else { break };
            // DirEntry::metadata does not follow symlinks.
            let Ok(m) = entry.metadata() else { continue };
            if m.is_dir() && m.uid() != meta.uid() {
                children.push((entry.path(), m.uid()));
            }
        }
        children.sort();
        for (p, uid) in children {
            s.add(uid, &p);
        }
    }
    s
}

fn active_counts(app: &App) -> HashMap<String, u64> {
    app.services.engine.with_active(|a| {
        let mut m: HashMap<String, u64> = HashMap::new();
        for f in a.iter() {
            if let Some(acc) = &f.account {
                *m.entry(acc.clone()).or_default() += 1;
            }
        }
        m
    })
}

/// The web roots of the account `name` (as `GET /api/v1/accounts` lists them); `None` for
/// an unknown user or one without a web root.
pub(super) fn web_roots_of(ctx: &CheckContext, name: &str) -> Option<Vec<PathBuf>> {
    if name.is_empty() || name.len() > MAX_NAME || name.chars().any(char::is_control) {
        return None;
    }
    let uid = Users::load(ctx).uid(name)?;
    let roots = scan(ctx).by_uid.remove(&uid)?;
    Some(roots.into_iter().map(PathBuf::from).collect())
}

/// `GET /api/v1/accounts`.
pub fn list(app: &App, _req: &Request, _c: &Caller) -> Response {
    let ctx = app.services.jobs.context();
    let s = scan(ctx);
    let mut users = Users::load(ctx);
    let counts = active_counts(app);
    let mut items: Vec<(String, Value)> = s
        .by_uid
        .into_iter()
        .map(|(uid, roots)| {
            let name = users.name(uid).unwrap_or_else(|| uid.to_string());
            let n = counts.get(&name).copied().unwrap_or(0);
            (
                name.clone(),
                json!({ "name": name, "uid": uid, "web_roots": roots, "findings_active": n }),
            )
        })
        .collect();
    items.sort_by(|a, b| a.0.cmp(&b.0));
    let items: Vec<Value> = items.into_iter().map(|(_, v)| v).collect();
    Response::json(
        200,
        &json!({
            "items": items,
            "total": items.len(),
            "offset": 0,
            "limit": MAX_ACCOUNTS,
            "truncated": s.truncated,
        }),
    )
}

/// `GET /api/v1/account?name=`: active findings, quarantine entries and the newest history
/// of one account. 404 when no such user exists and nothing is recorded for the name.
pub fn detail(app: &App, req: &Request, _c: &Caller) -> Response {
    let name = tri!(required(req, "name"));
    if name.len() > MAX_NAME || name.chars().any(char::is_control) {
        return Response::error(400, "invalid name: not an account name");
    }
    let mut findings: Vec<Finding> = app.services.engine.with_active(|a| {
        a.iter()
            .filter(|f| f.account.as_deref() == Some(name.as_str()))
            .cloned()
            .collect()
    });
    findings.sort_by(|a, b| {
        b.severity
            .cmp(&a.severity)
            .then(b.last_seen.cmp(&a.last_seen))
            .then(a.check.cmp(&b.check))
            .then(a.message.cmp(&b.message))
    });
    let n2 = name.clone();
    let read = app.store.read(move |c| {
        Ok((
            crate::store::quarantine::for_account(c, &n2)?,
            crate::store::data::history_of_account(c, &n2, ACCOUNT_HISTORY)?,
        ))
    });
    let (quarantine, (history, history_total)) = match read {
        Ok(v) => v,
        Err(e) => return store_failed(e),
    };
    let ctx = app.services.jobs.context();
    let uid = Users::load(ctx).uid(&name);
    if uid.is_none() && findings.is_empty() && quarantine.is_empty() && history_total == 0 {
        return Response::error(404, &format!("unknown account {name:?}"));
    }
    let mut out = json!({
        "name": name,
        "findings": findings,
        "quarantine": quarantine,
        "history": { "items": history, "total": history_total },
    });
    if let Some(uid) = uid {
        out["uid"] = json!(uid);
        let roots = scan(ctx).by_uid.remove(&uid).unwrap_or_default();
        out["web_roots"] = json!(roots);
    }
    Response::json(200, &out)
}
