//! Route table and dispatch.

use crate::config::Scope;
use crate::http::{Handler, Request, Response};

use super::audit::Entry;
use super::auth::{Caller, FailReason, Via};
use super::{challenge, console, events, findings, incident, pages, session_routes, status, App};

/// Who may call a route.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    /// No credential needed (login form).
    Public,
    /// Browser page: without a credential, redirect to /login.
    Page,
    /// Any authenticated caller.
    Authenticated,
    Read,
    Admin,
    /// Read tokens, admin tokens, sessions, and the metrics token.
    Metrics,
}

pub type HandlerFn = fn(&App, &Request, &Caller) -> Response;

pub struct Route {
    /// Exact path, or a prefix ending in `/*` that matches one more segment.
    pub path: &'static str,
    pub methods: &'static [(&'static str, HandlerFn)],
    pub access: Access,
    /// Audit action name for state-changing methods.
    pub action: &'static str,
}

macro_rules! get {
    ($path:expr, $access:expr, $f:expr) => {
        Route {
            path: $path,
            methods: &[("GET", $f)],
            access: $access,
            action: "",
        }
    };
}

pub static ROUTES: &[Route] = &[
    get!("/api/v1/status", Access::Read, status::status),
    get!("/api/v1/capabilities", Access::Read, status::capabilities),
    get!("/api/v1/challenge/stats", Access::Read, challenge::stats),
    get!("/api/v1/health", Access::Read, status::health),
    get!("/api/v1/components", Access::Read, status::components),
    get!("/api/v1/findings", Access::Read, findings::list),
    get!("/api/v1/incident", Access::Admin, incident::timeline),
    // Scan jobs (scan_jobs.rs): read scope lists, admins queue and cancel
    get!("/api/v1/scan-jobs", Access::Read, super::scan_jobs::list),
    Route {
        path: "/api/v1/scan-jobs",
        methods: &[("POST", super::scan_jobs::create)],
        access: Access::Admin,
        action: "scan_job.create",
    },
    get!("/api/v1/scan-jobs/*", Access::Read, super::scan_jobs::get),
    Route {
        path: "/api/v1/scan-jobs/*/cancel",
        methods: &[("POST", super::scan_jobs::cancel)],
        access: Access::Admin,
        action: "scan_job.cancel",
    },
    // Mail accounts (mail_accounts.rs)
    get!(
        "/api/v1/email/groups",
        Access::Read,
        super::mail_accounts::groups
    ),
    get!(
        "/api/v1/email/relay-abuse",
        Access::Read,
        super::mail_accounts::relay_abuse
    ),
    get!(
        "/api/v1/email/forwarders",
        Access::Read,
        super::mail_accounts::forwarders
    ),
    get!(
        "/api/v1/email/queue-composition",
        Access::Read,
        super::mail_accounts::queue_composition
    ),
    // History, stats (history.rs)
    get!("/api/v1/history", Access::Read, super::history::list),
    get!("/api/v1/history/csv", Access::Read, super::history::csv),
    get!("/api/v1/stats", Access::Read, super::history::stats),
    get!("/api/v1/stats/trend", Access::Read, super::history::trend),
    get!(
        "/api/v1/stats/timeline",
        Access::Read,
        super::history::timeline
    ),
    // Events (events.rs)
    get!("/api/v1/events", Access::Read, events::stream),
    // Data routes
    get!(
        "/api/v1/findings/enriched",
        Access::Read,
        super::data::enriched
    ),
    get!(
        "/api/v1/finding-detail",
        Access::Read,
        super::data::finding_detail
    ),
    get!(
        "/api/v1/blocked-ips",
        Access::Read,
        super::data::blocked_ips
    ),
    get!("/api/v1/accounts", Access::Read, super::accounts::list),
    get!("/api/v1/account", Access::Admin, super::accounts::detail),
    get!("/api/v1/audit", Access::Admin, super::data::audit),
    get!("/api/v1/export", Access::Admin, super::data::export),
    get!(
        "/api/v1/quarantine",
        Access::Admin,
        super::backups::quarantine
    ),
    get!(
        "/api/v1/quarantine-preview",
        Access::Admin,
        super::backups::quarantine_preview
    ),
    Route {
        path: "/api/v1/quarantine-restore",
        methods: &[("POST", super::remedy::quarantine_restore)],
        access: Access::Admin,
        action: "quarantine.restore",
    },
    Route {
        path: "/api/v1/quarantine/bulk-delete",
        methods: &[("POST", super::remedy::quarantine_bulk_delete)],
        access: Access::Admin,
        action: "quarantine.bulk_delete",
    },
    // Console preferences (prefs.rs): read per credential, admins save
    get!("/api/v1/prefs/user", Access::Read, super::prefs::get),
    Route {
        path: "/api/v1/prefs/user",
        methods: &[("POST", super::prefs::set)],
        access: Access::Admin,
        action: "prefs.user",
    },
    get!("/api/v1/prefs/views", Access::Read, super::prefs::get),
    Route {
        path: "/api/v1/prefs/views",
        methods: &[("POST", super::prefs::set)],
        access: Access::Admin,
        action: "prefs.views",
    },
    // Performance fixes (remedy.rs), each for its own finding kind
    Route {
        path: "/api/v1/perf/fix-error-log",
        methods: &[("POST", super::remedy::fix_error_log)],
        access: Access::Admin,
        action: "perf.fix_error_log",
    },
    Route {
        path: "/api/v1/perf/fix-display-errors",
        methods: &[("POST", super::remedy::fix_display_errors)],
        access: Access::Admin,
        action: "perf.fix_display_errors",
    },
    Route {
        path: "/api/v1/perf/fix-cms-cron",
        methods: &[("POST", super::remedy::fix_cms_cron)],
        access: Access::Admin,
        action: "perf.fix_cms_cron",
    },
    // Fixes (remedy.rs)
    Route {
        path: "/api/v1/fix",
        methods: &[("POST", super::remedy::fix)],
        access: Access::Admin,
        action: "finding.fix",
    },
    Route {
        path: "/api/v1/fix-bulk",
        methods: &[("POST", super::remedy::fix_bulk)],
        access: Access::Admin,
        action: "finding.fix_bulk",
    },
    Route {
        path: "/api/v1/dismiss",
        methods: &[("POST", super::remedy::dismiss)],
        access: Access::Admin,
        action: "finding.dismiss",
    },
    Route {
        path: "/api/v1/verify-finding",
        methods: &[("POST", super::remedy::verify_finding)],
        access: Access::Admin,
        action: "finding.verify",
    },
    get!(
        "/api/v1/db-object-backups",
        Access::Admin,
        super::backups::db_object_backups
    ),
    Route {
        path: "/api/v1/db-object-backups/restore",
        methods: &[("POST", super::backups::db_object_backup_restore)],
        access: Access::Admin,
        action: "db_object_backup.restore",
    },
    get!(
        "/api/v1/db-object-backup-preview",
        Access::Admin,
        super::backups::db_object_backup_preview
    ),
    get!(
        "/api/v1/performance",
        Access::Admin,
        super::perf::performance
    ),
    get!("/api/v1/hardening", Access::Admin, super::perf::hardening),
    Route {
        path: "/api/v1/suppressions",
        methods: &[
            ("GET", super::suppressions::list),
            ("POST", super::suppressions::create),
        ],
        access: Access::Admin,
        action: "suppression.create",
    },
    Route {
        path: "/api/v1/suppressions/*",
        methods: &[("DELETE", super::suppressions::delete)],
        access: Access::Admin,
        action: "suppression.delete",
    },
    // Firewall (firewall.rs): admin scope, firewall internals
    get!(
        "/api/v1/firewall/status",
        Access::Admin,
        super::firewall::status
    ),
    get!(
        "/api/v1/firewall/check",
        Access::Admin,
        super::firewall::check
    ),
    Route {
        path: "/api/v1/firewall/unban",
        methods: &[("POST", super::firewall::unban)],
        access: Access::Admin,
        action: "firewall.unban",
    },
    Route {
        path: "/api/v1/firewall/allow-ip",
        methods: &[("POST", super::firewall::allow_ip)],
        access: Access::Admin,
        action: "firewall.allow_ip",
    },
    Route {
        path: "/api/v1/firewall/remove-allow",
        methods: &[("POST", super::firewall::remove_allow)],
        access: Access::Admin,
        action: "firewall.remove_allow",
    },
    Route {
        path: "/api/v1/firewall/deny-subnet",
        methods: &[("POST", super::firewall::deny_subnet)],
        access: Access::Admin,
        action: "firewall.deny_subnet",
    },
    Route {
        path: "/api/v1/firewall/remove-subnet",
        methods: &[("POST", super::firewall::remove_subnet)],
        access: Access::Admin,
        action: "firewall.remove_subnet",
    },
    Route {
        path: "/api/v1/firewall/flush",
        methods: &[("POST", super::firewall::flush)],
        access: Access::Admin,
        action: "firewall.flush",
    },
    Route {
        path: "/api/v1/settings/firewall/tentative-apply",
        methods: &[("POST", super::firewall::tentative_apply)],
        access: Access::Admin,
        action: "settings.firewall.tentative_apply",
    },
    Route {
        path: "/api/v1/settings/firewall/confirm",
        methods: &[("POST", super::firewall::confirm)],
        access: Access::Admin,
        action: "settings.firewall.confirm",
    },
    Route {
        path: "/api/v1/settings/firewall/revert",
        methods: &[("POST", super::firewall::revert)],
        access: Access::Admin,
        action: "settings.firewall.revert",
    },
    get!(
        "/api/v1/settings/firewall/rollback",
        Access::Admin,
        super::firewall::rollback
    ),
    // Settings (settings.rs): the restart route before the section wildcard
    get!("/api/v1/settings", Access::Admin, super::settings::list),
    Route {
        path: "/api/v1/settings/restart",
        methods: &[("POST", super::settings::restart)],
        access: Access::Admin,
        action: "settings.restart",
    },
    Route {
        path: "/api/v1/settings/*",
        methods: &[
            ("GET", super::settings::get),
            ("POST", super::settings::set),
        ],
        access: Access::Admin,
        action: "settings.save",
    },
    // Mail antivirus (mail.rs)
    get!("/api/v1/email/stats", Access::Read, super::mail::stats),
    get!(
        "/api/v1/email/av/status",
        Access::Read,
        super::mail::av_status
    ),
    get!(
        "/api/v1/email/quarantine",
        Access::Admin,
        super::mail::quarantine
    ),
    Route {
        path: "/api/v1/email/quarantine/*/release",
        methods: &[("POST", super::mail::action)],
        access: Access::Admin,
        action: "email.quarantine.release",
    },
    Route {
        path: "/api/v1/email/quarantine/*/delete",
        methods: &[("POST", super::mail::action)],
        access: Access::Admin,
        action: "email.quarantine.delete",
    },
    // Fleet mode (fleet.rs)
    get!("/api/v1/fleet", Access::Read, super::fleet::status),
    // WAF (waf.rs)
    get!("/api/v1/waf/stats", Access::Read, super::waf::stats),
    get!("/api/v1/waf/events", Access::Read, super::waf::events),
    get!("/api/v1/waf/blocks", Access::Read, super::waf::blocks),
    get!("/api/v1/waf/rules", Access::Admin, super::waf::rules),
    Route {
        path: "/api/v1/waf/rules/apply",
        methods: &[("POST", super::waf::apply)],
        access: Access::Admin,
        action: "waf.rules.apply",
    },
    Route {
        path: "/api/v1/waf/rules/escalation",
        methods: &[
            ("GET", super::waf::escalation),
            ("POST", super::waf::set_escalation),
        ],
        access: Access::Admin,
        action: "waf.rules.escalation",
    },
    // Threat (threat.rs, undo.rs): statistics read scope; detail and changes admin
    get!("/api/v1/threat/stats", Access::Read, super::threat::stats),
    get!(
        "/api/v1/threat/top-attackers",
        Access::Read,
        super::threat::top_attackers
    ),
    get!(
        "/api/v1/threat/db-stats",
        Access::Read,
        super::threat::db_stats
    ),
    get!("/api/v1/threat/ip", Access::Admin, super::threat::ip),
    get!(
        "/api/v1/threat/events",
        Access::Admin,
        super::threat::events
    ),
    get!(
        "/api/v1/threat/whitelist",
        Access::Admin,
        super::threat::whitelist
    ),
    Route {
        path: "/api/v1/threat/block-ip",
        methods: &[("POST", super::threat::block_ip)],
        access: Access::Admin,
        action: "threat.block_ip",
    },
    Route {
        path: "/api/v1/threat/block-ip-permanent",
        methods: &[("POST", super::threat::block_ip_permanent)],
        access: Access::Admin,
        action: "threat.block_ip_permanent",
    },
    Route {
        path: "/api/v1/threat/whitelist-ip",
        methods: &[("POST", super::threat::whitelist_ip)],
        access: Access::Admin,
        action: "threat.whitelist_ip",
    },
    Route {
        path: "/api/v1/threat/temp-whitelist-ip",
        methods: &[("POST", super::threat::temp_whitelist_ip)],
        access: Access::Admin,
        action: "threat.temp_whitelist_ip",
    },
    Route {
        path: "/api/v1/threat/unwhitelist-ip",
        methods: &[("POST", super::threat::unwhitelist_ip)],
        access: Access::Admin,
        action: "threat.unwhitelist_ip",
    },
    Route {
        path: "/api/v1/threat/clear-ip",
        methods: &[("POST", super::threat::clear_ip)],
        access: Access::Admin,
        action: "threat.clear_ip",
    },
    get!("/api/v1/undo/pending", Access::Admin, super::undo::pending),
    Route {
        path: "/api/v1/undo/run",
        methods: &[("POST", super::undo::run)],
        access: Access::Admin,
        action: "undo.run",
    },
    Route {
        path: "/api/v1/sessions",
        methods: &[
            ("GET", session_routes::list),
            ("DELETE", session_routes::revoke_all),
        ],
        access: Access::Admin,
        action: "sessions.revoke_all",
    },
    Route {
        path: "/api/v1/sessions/*",
        methods: &[("DELETE", session_routes::revoke_one)],
        access: Access::Admin,
        action: "session.revoke",
    },
    get!("/metrics", Access::Metrics, status::metrics),
    Route {
        path: "/login",
        methods: &[("GET", pages::login_form), ("POST", pages::login)],
        access: Access::Public,
        action: "login",
    },
    Route {
        path: "/logout",
        methods: &[("POST", pages::logout)],
        access: Access::Authenticated,
        action: "logout",
    },
    // The web console (console/): one shell per page, its assets public (no data in them).
    get!("/", Access::Page, console::page),
    get!("/findings", Access::Page, console::page),
    get!("/history", Access::Page, console::page),
    get!("/incidents", Access::Page, console::page),
    get!("/threat", Access::Page, console::page),
    get!("/waf", Access::Page, console::page),
    get!("/waf/rules", Access::Page, console::page),
    get!("/email", Access::Page, console::page),
    get!("/firewall", Access::Page, console::page),
    get!("/quarantine", Access::Page, console::page),
    get!("/sessions", Access::Page, console::page),
    get!("/audit", Access::Page, console::page),
    get!("/settings", Access::Page, console::page),
    get!("/assets/*", Access::Public, console::asset),
];

/// A route path matches segment by segment; a `*` segment matches one non-empty segment.
fn matches(pattern: &str, path: &str) -> bool {
    if !pattern.contains('*') {
        return pattern == path;
    }
    let (mut p, mut q) = (pattern.split('/'), path.split('/'));
    loop {
        match (p.next(), q.next()) {
            (None, None) => return true,
            (Some("*"), Some(seg)) if !seg.is_empty() => {}
            (Some(a), Some(b)) if a == b => {}
            _ => return false,
        }
    }
}

#[cfg(test)]
fn find(path: &str) -> Option<&'static Route> {
    ROUTES.iter().find(|r| matches(r.path, path))
}

/// The route serving `method` on `path`: a path may have one route per scope (reads for
/// read tokens, writes for admins, as `/api/v1/scan-jobs`); without a route for the method,
/// the path's first route (which answers 405).
fn find_for(path: &str, method: &str) -> Option<&'static Route> {
    let mut first = None;
    for r in ROUTES.iter().filter(|r| matches(r.path, path)) {
        if handler_for(r, method).is_some() {
            return Some(r);
        }
        first.get_or_insert(r);
    }
    first
}

/// The path segment a route's first `*` matched (the audit target), or "".
fn wildcard_target<'p>(pattern: &str, path: &'p str) -> &'p str {
    pattern
        .split('/')
        .zip(path.split('/'))
        .find(|(a, _)| *a == "*")
        .map_or("", |(_, b)| b)
}

fn is_state_changing(method: &str) -> bool {
    matches!(method, "POST" | "PUT" | "PATCH" | "DELETE")
}

enum Auth {
    Ok(Caller),
    /// A credential was presented and is wrong: counted by the failure limiter.
    Bad(FailReason, &'static str),
    /// No usable credential (none, a stale session cookie, the metrics token elsewhere):
    /// 401 without counting a failure.
    None(FailReason),
}

pub(super) fn bearer(req: &Request) -> Option<&str> {
    let h = req.header("authorization")?;
    let (scheme, rest) = h.split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then(|| rest.trim())
}

fn authenticate(app: &App, req: &Request, metrics_route: bool) -> Auth {
    if let Some(tok) = bearer(req) {
        if let Some((name, scope)) = app.tokens.lookup(tok) {
            return Auth::Ok(Caller {
                name,
                scope: Some(scope),
                via: Via::Token,
                session: None,
            });
        }
        if app.tokens.is_metrics(tok) {
            if metrics_route {
                return Auth::Ok(Caller {
                    name: "metrics".into(),
                    scope: None,
                    via: Via::Metrics,
                    session: None,
                });
            }
            // A known credential that is not valid here: refused without counting a failure.
            return Auth::None(FailReason::MetricsTokenElsewhere);
        }
        return Auth::Bad(FailReason::InvalidToken, "invalid token");
    }
    if req.header("authorization").is_some() {
        return Auth::Bad(
            FailReason::UnsupportedScheme,
            "unsupported Authorization scheme; use Bearer",
        );
    }
    if let Some(secret) = req.cookie(super::sessions::COOKIE) {
        if let Some(s) = app.sessions.authenticate(secret) {
            return Auth::Ok(Caller {
                name: s.name,
                scope: Some(Scope::Admin),
                via: Via::Browser,
                session: Some((s.id, s.csrf)),
            });
        }
        return Auth::None(FailReason::InvalidSession);
    }
    Auth::None(FailReason::NoCredential)
}

/// Same-origin check for browser writes (the login form, cookie-authenticated writes).
/// The rule (decision 285):
/// - `Sec-Fetch-Site: cross-site` or `same-site` is refused: the browser says another site
///   (or a sibling host) sent it.
/// - `Origin` naming this server (`https://` + `Host`) passes; any other origin is refused.
/// - `Origin: null` (an opaque origin: a sandboxed frame, a `data:` page, a cross-origin
///   redirect, or a page sent with `Referrer-Policy: no-referrer`) passes only beside
///   `Sec-Fetch-Site: same-origin`. Both are forbidden header names that no page script can
///   set, so a browser that sends them attests the request came from this server's own
///   page; without that attestation `null` is refused, as an attacker's sandboxed frame
///   in an older browser would send it.
/// - No `Origin` at all passes (non-browser clients; browsers send it on every POST).
pub(super) fn origin_ok(req: &Request) -> bool {
    let site = req.header("sec-fetch-site");
    if site.is_some_and(|s| {
        s.eq_ignore_ascii_case("cross-site") || s.eq_ignore_ascii_case("same-site")
    }) {
        return false;
    }
    match req.header("origin") {
        None => true,
        Some(origin) if origin.trim() == "null" => {
            site.is_some_and(|s| s.eq_ignore_ascii_case("same-origin"))
        }
        Some(origin) => match req.header("host") {
            Some(host) => origin.eq_ignore_ascii_case(&format!("https://{host}")),
            None => false,
        },
    }
}

fn csrf_ok(req: &Request, expected: &str) -> bool {
    use subtle::ConstantTimeEq;
    let presented = match req.header("x-csrf-token") {
        Some(h) => h.to_string(),
        None => match req.form_field("csrf_token") {
            Some(f) => f,
            None => return false,
        },
    };
    presented.len() == expected.len() && bool::from(presented.as_bytes().ct_eq(expected.as_bytes()))
}

/// Request bodies of this size or more mark memory for trimming.
pub const LARGE_REQUEST: usize = 64 * 1024;
/// Answers of this size or more mark memory for trimming.
pub const LARGE_ANSWER: usize = 1024 * 1024;

/// Longest request path written to a log line, in characters.
pub const LOG_PATH_CHARS: usize = 200;

impl App {
    /// Counts a failed credential (invalid token, failed login) against the client's
    /// address and logs it (one line per address a minute, path cut and escaped). Returns
    /// the reason to answer with: `reason`, or [`FailReason::RateLimited`] over the limit.
    pub(super) fn credential_failed(&self, req: &Request, reason: FailReason) -> FailReason {
        let ip = req.remote.ip();
        let answer = if self.limiter.record_failure(ip) {
            FailReason::RateLimited
        } else {
            reason
        };
        self.limiter.by_reason.count(answer);
        let key = super::auth::address_key(ip).to_string();
        crate::warn_limited!(
            self.client_log,
            "auth_failure",
            &key,
            "authentication failure ({}) from {ip}: {} {}",
            answer.as_str(),
            crate::text::for_log(&req.method, 16),
            crate::text::for_log(&req.path, LOG_PATH_CHARS)
        );
        answer
    }

    fn dispatch(&self, req: &Request) -> (&'static str, Response, Option<Caller>) {
        // Unknown paths are 404 for every caller, before any credential is looked at
        // (spec Errors 3): nothing is counted, audited or logged for them.
        let Some(route) = find_for(&req.path, &req.method) else {
            return (
                "unmatched",
                Response::error(
                    404,
                    &format!(
                        "no such route: {}",
                        crate::text::for_log(&req.path, LOG_PATH_CHARS)
                    ),
                ),
                None,
            );
        };
        let label = route.path;
        let writes = is_state_changing(&req.method);
        if route.access == Access::Public {
            // The login form reads no credential: a stale (or live) session cookie or an
            // Authorization header must not stand in the way of logging in.
            if writes && !origin_ok(req) {
                return (
                    label,
                    Response::error(403, "cross-origin request refused"),
                    None,
                );
            }
            return self.run(route, req, Caller::anonymous());
        }
        let caller = match authenticate(self, req, route.access == Access::Metrics) {
            Auth::Ok(c) => c,
            Auth::Bad(reason, msg) => {
                let resp = match self.credential_failed(req, reason) {
                    FailReason::RateLimited => too_many(),
                    _ => Response::error(401, msg).with_header("WWW-Authenticate", "Bearer"),
                };
                return (label, resp, None);
            }
            Auth::None(_) if route.access == Access::Page => {
                return (label, redirect("/login"), None);
            }
            Auth::None(reason) => {
                self.limiter.by_reason.count(reason);
                return (label, unauthorized(), None);
            }
        };
        if caller.via == Via::Metrics && route.access != Access::Metrics {
            self.limiter
                .by_reason
                .count(FailReason::MetricsTokenElsewhere);
            return (label, unauthorized(), None);
        }
        if handler_for(route, &req.method).is_none() {
            return (label, method_not_allowed(route, req), Some(caller));
        }
        let needed = match route.access {
            Access::Admin => Some(Scope::Admin),
            Access::Read => Some(Scope::Read),
            _ => None,
        };
        if let Some(needed) = needed {
            if caller.scope.is_none_or(|s| s < needed) {
                return (
                    label,
                    Response::error(403, "this route needs an admin token"),
                    Some(caller),
                );
            }
        }
        if writes && caller.via == Via::Browser {
            if !origin_ok(req) {
                return (
                    label,
                    Response::error(403, "cross-origin request refused"),
                    Some(caller),
                );
            }
            let expected = caller
                .session
                .as_ref()
                .map(|(_, c)| c.as_str())
                .unwrap_or("");
            if !csrf_ok(req, expected) {
                return (
                    label,
                    Response::error(403, "missing or invalid CSRF token"),
                    Some(caller),
                );
            }
        }
        self.run(route, req, caller)
    }

    fn run(
        &self,
        route: &'static Route,
        req: &Request,
        caller: Caller,
    ) -> (&'static str, Response, Option<Caller>) {
        match handler_for(route, &req.method) {
            Some(handler) => {
                let resp = handler(self, req, &caller);
                let resp = if req.method == "HEAD" {
                    head_only(resp)
                } else {
                    resp
                };
                (route.path, resp, Some(caller))
            }
            None => (route.path, method_not_allowed(route, req), Some(caller)),
        }
    }
}

/// The handler of `method` on `route`. Every GET route answers HEAD with its GET handler
/// (RFC 9110 9.3.2): the HTTP layer sends the head of a HEAD answer without its body.
fn handler_for(route: &Route, method: &str) -> Option<HandlerFn> {
    let wanted = if method == "HEAD" { "GET" } else { method };
    route
        .methods
        .iter()
        .find(|(m, _)| *m == wanted)
        .map(|&(_, h)| h)
}

/// A HEAD answer: a full body is left for the HTTP layer to drop (its Content-Length
/// stays that of the GET answer); a stream is replaced by one that writes nothing, so the
/// head goes out as GET's would and the connection closes, with no subscriber kept.
fn head_only(mut resp: Response) -> Response {
    if resp.is_stream() {
        resp.body = crate::http::Body::Stream(Box::new(|_| Ok(())));
    }
    resp
}

/// The methods a route answers: its own, and HEAD beside GET.
fn allowed(route: &Route) -> Vec<&'static str> {
    let mut allow = Vec::with_capacity(route.methods.len() + 1);
    for (m, _) in route.methods {
        allow.push(*m);
        if *m == "GET" {
            allow.push("HEAD");
        }
    }
    allow
}

/// 405 with `Allow` listing the methods of every route on the path.
fn method_not_allowed(route: &Route, req: &Request) -> Response {
    let mut allow = allowed(route);
    for other in ROUTES.iter().filter(|r| r.path == route.path) {
        for m in allowed(other) {
            if !allow.contains(&m) {
                allow.push(m);
            }
        }
    }
    Response::error(
        405,
        &format!(
            "method {} not allowed; allowed: {}",
            crate::text::for_log(&req.method, 16),
            allow.join(", ")
        ),
    )
    .with_header("Allow", allow.join(", "))
}

fn unauthorized() -> Response {
    Response::error(401, "authentication required").with_header("WWW-Authenticate", "Bearer")
}

/// The 429 answer for a failing attempt from an address over the failure limit.
pub(super) fn too_many() -> Response {
    Response::error(
        429,
        "too many authentication failures from this address; try again later",
    )
    .with_header("Retry-After", "60")
}

/// A 303 redirect. Not a failure: its JSON body is `{"ok": true, "location": to}`.
pub(super) fn redirect(to: &str) -> Response {
    Response::json(303, &serde_json::json!({ "ok": true, "location": to }))
        .with_header("Location", to)
}

impl Handler for App {
    fn handle(&self, req: &Request) -> Response {
        let (label, resp, caller) = self.dispatch(req);
        self.metrics.count(label, resp.status);
        // Large requests and answers leave free memory in the allocator's arenas: have it
        // returned to the kernel shortly after (see crate::sys::malloc).
        let large_answer =
            matches!(&resp.body, crate::http::Body::Full(b) if b.len() >= LARGE_ANSWER);
        if req.body.len() >= LARGE_REQUEST || large_answer {
            crate::sys::malloc::note_large();
        }
        // Requests that failed authentication (401, 429) never reach the audit table: they
        // carry no caller. They are counted by reason and logged (rate-limited) instead.
        if let Some(c) = caller {
            if is_state_changing(&req.method) && !matches!(resp.status, 401 | 429) {
                self.audit_request(req, &c, resp.status);
            }
        }
        resp
    }

    fn on_refused(&self, status: u16) {
        self.metrics.count("refused", status);
    }
}

impl App {
    /// Audits a state-changing request that reached a known, non-public route.
    fn audit_request(&self, req: &Request, c: &Caller, status: u16) {
        let Some(route) = find_for(&req.path, &req.method) else {
            return;
        };
        if route.action.is_empty() || route.access == Access::Public {
            return;
        }
        let outcome = match status {
            200..=299 => "ok",
            403 => "denied",
            404 => "not_found",
            _ => "error",
        };
        let mut target = wildcard_target(route.path, &req.path).to_string();
        if target.is_empty() {
            // Routes naming their object in the body (`{"id"}`: a finding, a quarantine
            // entry) are audited with it.
            if req.body.len() <= LARGE_REQUEST {
                if let Ok(serde_json::Value::Object(m)) = super::body::parse(&req.body) {
                    if let Some(id) = m.get("id").and_then(|v| v.as_str()) {
                        target = crate::text::for_log(id, 64);
                    }
                }
            }
        }
        let target = target.as_str();
        self.audit.record(Entry {
            at: self.clock.now(),
            actor: &c.name,
            via: c.via.as_str(),
            action: route.action,
            target,
            outcome,
            remote_ip: &req.remote.ip().to_canonical().to_string(),
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn route_patterns_match_one_segment() {
        assert_eq!(find("/api/v1/sessions").unwrap().path, "/api/v1/sessions");
        assert_eq!(
            find("/api/v1/sessions/abc").unwrap().path,
            "/api/v1/sessions/*"
        );
        assert!(find("/api/v1/sessions/").is_none());
        assert!(find("/api/v1/sessions/a/b").is_none());
        assert!(find("/api/v1/nope").is_none());
        let r = "/api/v1/email/quarantine/ab12/release";
        assert_eq!(find(r).unwrap().path, "/api/v1/email/quarantine/*/release");
        assert_eq!(wildcard_target(find(r).unwrap().path, r), "ab12");
        assert!(find("/api/v1/email/quarantine//release").is_none());
        assert!(find("/api/v1/email/quarantine/ab12/other").is_none());
        assert_eq!(
            wildcard_target("/api/v1/sessions/*", "/api/v1/sessions/x"),
            "x"
        );
        assert_eq!(wildcard_target("/api/v1/sessions", "/api/v1/sessions"), "");
    }

    fn post_with(headers: &[(&str, &str)]) -> Request {
        let mut h = vec![("host".to_string(), "127.0.0.1:9443".to_string())];
        h.extend(headers.iter().map(|(k, v)| (k.to_string(), v.to_string())));
        Request {
            method: "POST".into(),
            path: "/login".into(),
            query: String::new(),
            headers: h,
            body: Vec::new(),
            remote: "127.0.0.1:5000".parse().unwrap(),
            wants_close: false,
        }
    }

    /// Issue 23 item 4: a browser's own form post passes, in the forms browsers send it;
    /// an opaque origin without the browser's same-origin attestation does not.
    #[test]
    fn origin_rule_accepts_what_browsers_send_from_this_server() {
        let ok = |h: &[(&str, &str)]| origin_ok(&post_with(h));
        assert!(ok(&[]));
        assert!(ok(&[("origin", "https://127.0.0.1:9443")]));
        assert!(ok(&[
            ("origin", "https://127.0.0.1:9443"),
            ("sec-fetch-site", "same-origin")
        ]));
        assert!(ok(&[("origin", "null"), ("sec-fetch-site", "same-origin")]));
        assert!(ok(&[("sec-fetch-site", "none")]));
        // Refused: opaque origins without attestation, other origins, other sites.
        assert!(!ok(&[("origin", "null")]));
        assert!(!ok(&[("origin", "null"), ("sec-fetch-site", "cross-site")]));
        assert!(!ok(&[("origin", "null"), ("sec-fetch-site", "none")]));
        assert!(!ok(&[("origin", "https://evil.example")]));
        assert!(!ok(&[
            ("origin", "https://evil.example"),
            ("sec-fetch-site", "same-origin")
        ]));
        assert!(!ok(&[("origin", "http://127.0.0.1:9443")]));
        assert!(!ok(&[("sec-fetch-site", "same-site")]));
        assert!(!ok(&[("sec-fetch-site", "cross-site")]));
    }

    #[test]
    fn every_get_route_answers_head() {
        for r in ROUTES {
            let get = handler_for(r, "GET");
            assert_eq!(
                handler_for(r, "HEAD").map(|h| h as usize),
                get.map(|h| h as usize),
                "{}",
                r.path
            );
            assert_eq!(allowed(r).contains(&"HEAD"), get.is_some(), "{}", r.path);
        }
        let login = find("/login").unwrap();
        assert_eq!(allowed(login), ["GET", "HEAD", "POST"]);
    }

    #[test]
    fn redirects_are_not_failures() {
        let r = redirect("/");
        assert_eq!(r.status, 303);
        let crate::http::Body::Full(b) = r.body else {
            panic!("full body")
        };
        let v: serde_json::Value = serde_json::from_slice(&b).unwrap();
        assert_eq!(v, serde_json::json!({ "ok": true, "location": "/" }));
    }
}
