//! The web console: one HTML shell per page, and the stylesheet and ES modules it loads,
//! embedded in the binary (no build step, no CDN: the console works on a server with no
//! Internet). Every page draws its data in the browser from the JSON routes, with the
//! session cookie (or the caller's Bearer token) and the page's CSRF token.
//!
//! Guarantees:
//! - Every page and asset answers with the console's Content-Security-Policy
//!   ([`CSP`]: no inline script or style, no frames), `Referrer-Policy: same-origin`, and
//!   (from the HTTP layer) `X-Content-Type-Options: nosniff` and `Cache-Control: no-store`.
//! - The shell names the caller's scope (`<meta name="svc-scope">`); the modules create no
//!   write control for a read-scope caller, and the API refuses its writes anyway. Pages
//!   whose every route needs admin scope answer a read-scope caller with a notice and no
//!   script.
//! - The only text the server puts into a shell is escaped ([`super::pages::escape`]); the
//!   modules insert data with `textContent` and DOM nodes only, never as HTML.

use crate::config::Scope;
use crate::http::{Request, Response};

use super::auth::{Caller, Via};
use super::pages::escape;
use super::App;

/// The console's policy: everything from this origin, nothing inline, never framed.
pub const CSP: &str =
    "default-src 'self'; frame-ancestors 'none'; form-action 'self'; base-uri 'none'";

/// One console page.
pub struct Page {
    /// The route (also in `api::router::ROUTES` with `Access::Page`).
    pub path: &'static str,
    /// Heading, title and navigation label.
    pub title: &'static str,
    /// The ES module under `/assets/` that draws the page.
    pub module: &'static str,
    /// Every route the page reads needs admin scope.
    pub admin_only: bool,
}

/// The pages in navigation order.
pub const PAGES: &[Page] = &[
    entry("/", "Dashboard", "dashboard.js", false),
    entry("/findings", "Findings", "findings.js", false),
    entry("/history", "History", "history.js", false),
    entry("/incidents", "Incidents", "incidents.js", true),
    entry("/threat", "Threat", "threat.js", false),
    entry("/waf", "WAF", "waf.js", false),
    entry("/waf/rules", "WAF rules", "rules.js", true),
    entry("/email", "Email", "email.js", false),
    entry("/firewall", "Firewall", "firewall.js", true),
    entry("/quarantine", "Quarantine", "quarantine.js", true),
    entry("/sessions", "Sessions", "sessions.js", true),
    entry("/audit", "Audit", "audit.js", true),
    entry("/settings", "Settings", "settings.js", true),
];

const fn entry(
    path: &'static str,
    title: &'static str,
    module: &'static str,
    admin_only: bool,
) -> Page {
    Page {
        path,
        title,
        module,
        admin_only,
    }
}

/// One embedded file under `/assets/`.
pub struct Asset {
    pub name: &'static str,
    pub content_type: &'static str,
    pub body: &'static [u8],
}

macro_rules! asset {
    ($name:literal, $ct:expr) => {
        Asset {
            name: $name,
            content_type: $ct,
            body: include_bytes!($name),
        }
    };
}

const JS: &str = "text/javascript; charset=utf-8";

/// Every file the console serves besides its shells.
pub const ASSETS: &[Asset] = &[
    asset!("console.css", "text/css; charset=utf-8"),
    asset!("icon.svg", "image/svg+xml"),
    asset!("lib.js", JS),
    asset!("chart.js", JS),
    asset!("dashboard.js", JS),
    asset!("findings.js", JS),
    asset!("history.js", JS),
    asset!("incidents.js", JS),
    asset!("threat.js", JS),
    asset!("waf.js", JS),
    asset!("rules.js", JS),
    asset!("email.js", JS),
    asset!("firewall.js", JS),
    asset!("quarantine.js", JS),
    asset!("sessions.js", JS),
    asset!("audit.js", JS),
    asset!("settings.js", JS),
];

fn with_headers(r: Response) -> Response {
    r.with_header("Content-Security-Policy", CSP)
        .with_header("X-Frame-Options", "DENY")
        // `same-origin`, not `no-referrer`: with no-referrer Chromium sends `Origin: null`
        // on the login form's post; other sites still get no referrer (decision 285).
        .with_header("Referrer-Policy", "same-origin")
}

/// An HTML answer with the console's headers.
pub fn html(status: u16, body: String) -> Response {
    with_headers(Response::new(
        status,
        "text/html; charset=utf-8",
        body.into_bytes(),
    ))
}

/// `GET /assets/<name>`: an embedded file; 404 for any other name.
pub fn asset(_app: &App, req: &Request, _c: &Caller) -> Response {
    let name = req.path.rsplit('/').next().unwrap_or("");
    match ASSETS.iter().find(|a| a.name == name) {
        Some(a) => with_headers(Response::new(200, a.content_type, a.body.to_vec())),
        None => Response::error(404, "no such asset"),
    }
}

/// A console page: the shell for `req.path`.
pub fn page(app: &App, req: &Request, c: &Caller) -> Response {
    let Some(p) = PAGES.iter().find(|p| p.path == req.path) else {
        return Response::error(404, "no such page");
    };
    html(200, shell(app, p, c))
}

fn shell(app: &App, p: &Page, c: &Caller) -> String {
    let admin = c.scope == Some(Scope::Admin);
    let scope = if admin { "admin" } else { "read" };
    let csrf = c.session.as_ref().map(|(_, t)| t.as_str()).unwrap_or("");
    let mut nav = String::new();
    for q in PAGES.iter().filter(|q| admin || !q.admin_only) {
        let current = if q.path == p.path {
            " aria-current=\"page\""
        } else {
            ""
        };
        nav.push_str(&format!(
            "<li><a href=\"{}\"{current}>{}</a></li>",
            q.path, q.title
        ));
    }
    let logout = if c.via == Via::Browser {
        format!(
            "<form method=\"post\" action=\"/logout\"><input type=\"hidden\" name=\"csrf_token\" value=\"{}\"><button type=\"submit\" class=\"logout\">Log out</button></form>",
            escape(csrf)
        )
    } else {
        String::new()
    };
    // A read-scope caller on an admin page gets the notice and no script: every route the
    // script would read refuses it.
    let (script, content) = if p.admin_only && !admin {
        (
            String::new(),
            "<p class=\"notice\">This page needs an admin session.</p>".to_string(),
        )
    } else {
        (
            format!(
                "<script type=\"module\" src=\"/assets/{}\"></script>\n",
                p.module
            ),
            "<p class=\"loading\">Loading…</p>".to_string(),
        )
    };
    format!(
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<meta name=\"csrf-token\" content=\"{csrf}\">\n<meta name=\"svc-scope\" content=\"{scope}\">\n<title>{title} · svc</title>\n<link rel=\"stylesheet\" href=\"/assets/console.css\">\n<link rel=\"icon\" href=\"/assets/icon.svg\">\n{script}</head>\n<body data-scope=\"{scope}\">\n<a class=\"skip\" href=\"#main\">Skip to content</a>\n<header class=\"top\"><a class=\"brand\" href=\"/\">svc <span class=\"ver\">{version}</span></a>\n<nav aria-label=\"Pages\"><ul>{nav}</ul></nav>\n<div class=\"who\"><span>Signed in as <strong>{name}</strong> <span class=\"scope\">({scope})</span></span>{logout}</div></header>\n<main id=\"main\" tabindex=\"-1\"><h1>{title}</h1>\n<div id=\"app\">{content}</div></main>\n</body></html>\n",
        csrf = escape(csrf),
        title = p.title,
        version = escape(app.runtime.version),
        name = escape(&c.name),
    )
}

/// Bytes of the whole console: every asset plus the largest shell.
pub fn weight() -> usize {
    ASSETS.iter().map(|a| a.body.len()).sum::<usize>() + SHELL_ALLOWANCE
}

/// An upper bound of a shell's size (the navigation, the meta tags, a long user name).
pub const SHELL_ALLOWANCE: usize = 4096;

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 26: HTML, JS and CSS of the whole console stay under 150 KiB, uncompressed.
    #[test]
    fn console_weight_is_within_budget() {
        let w = weight();
        eprintln!("console weight: {w} bytes ({:.1} KiB)", w as f64 / 1024.0);
        assert!(w < 150 * 1024, "console weighs {w} bytes");
    }

    /// Every page is a route with page access, and every page route is a console page.
    #[test]
    fn every_page_has_its_route() {
        use crate::api::{Access, ROUTES};
        for p in PAGES {
            let r = ROUTES.iter().find(|r| r.path == p.path).expect(p.path);
            assert_eq!(r.access, Access::Page, "{}", p.path);
        }
        for r in ROUTES.iter().filter(|r| r.access == Access::Page) {
            assert!(PAGES.iter().any(|p| p.path == r.path), "{}", r.path);
        }
    }

    /// Every page's module is an embedded asset, and no asset holds inline-HTML sinks.
    #[test]
    fn pages_name_embedded_modules_and_modules_write_text_only() {
        for p in PAGES {
            assert!(ASSETS.iter().any(|a| a.name == p.module), "{}", p.module);
        }
        for a in ASSETS {
            let text = std::str::from_utf8(a.body).unwrap();
            for sink in [
                "innerHTML",
                "outerHTML",
                "insertAdjacentHTML",
                "document.write",
                "eval(",
            ] {
                assert!(!text.contains(sink), "{} uses {sink}", a.name);
            }
        }
    }
}
