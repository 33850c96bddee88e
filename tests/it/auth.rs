//! Authentication matrix, CSRF, origin, scopes, rate limiting: through the real binary.

use crate::common::*;

#[derive(Clone, Copy, PartialEq, Debug)]
enum Need {
    Read,
    Admin,
    Metrics,
}

/// Read-only GET routes of this build and the scope they need.
const GET_ROUTES: &[(&str, Need)] = &[
    ("/api/v1/status", Need::Read),
    ("/api/v1/capabilities", Need::Read),
    ("/api/v1/health", Need::Read),
    ("/api/v1/components", Need::Read),
    ("/api/v1/sessions", Need::Admin),
    ("/metrics", Need::Metrics),
];

fn bearer(t: &str) -> String {
    format!("Bearer {t}")
}

#[test]
fn auth_matrix_on_every_get_route() {
    let d = Daemon::start("matrix", "");
    let (cookie, _csrf) = login(&d, ADMIN);
    let cookie_h = format!("svc_auth={cookie}");
    for &(path, need) in GET_ROUTES {
        // No credential.
        d.req("GET", path, &[], b"").expect(401);
        // Wrong token.
        d.get(path, "not-a-valid-token-at-all").expect(401);
        // Read token.
        let r = d.get(path, READ);
        match need {
            Need::Admin => r.expect(403),
            _ => r.expect(200),
        };
        // Admin token.
        d.get(path, ADMIN).expect(200);
        // Metrics token: /metrics only.
        let r = d.get(path, METRICS);
        if need == Need::Metrics {
            r.expect(200);
        } else {
            r.expect(401);
        }
        // Browser session cookie.
        d.req("GET", path, &[("Cookie", &cookie_h)], b"")
            .expect(200);
        // An API token is never accepted as the cookie.
        d.req(
            "GET",
            path,
            &[("Cookie", &format!("svc_auth={ADMIN}"))],
            b"",
        )
        .expect(401);
        // HEAD: GET's status and headers, no body (issue 23 item 4: it was 405).
        let mut c = d.client();
        let get = c.send("GET", path, &[("Authorization", &bearer(ADMIN))], b"");
        c.write_request("HEAD", path, &[("Authorization", &bearer(ADMIN))], b"");
        let head = c.read_head();
        assert_eq!(head.status, 200, "HEAD {path}");
        assert_eq!(head.header("content-type"), get.header("content-type"));
        // The connection stays usable: no body bytes were sent after the head.
        let after = c.send("GET", path, &[("Authorization", &bearer(ADMIN))], b"");
        after.expect(200);
        // HEAD names the length GET would send. Most pages change between two requests
        // (counters, connections, times): the exact length is compared on pages that do
        // not, every other page must name a length.
        let length = head.header("content-length");
        assert!(
            length.is_some_and(|l| l.parse::<u64>().is_ok()),
            "HEAD {path}: {length:?}"
        );
        if matches!(path, "/login" | "/api/v1/capabilities") {
            assert_eq!(length, get.header("content-length"), "HEAD {path}");
            assert_eq!(length, after.header("content-length"), "HEAD {path}");
        }
        // Any other method: 405 with Allow, JSON.
        for m in ["POST", "PUT", "PATCH"] {
            if path == "/api/v1/sessions" {
                continue;
            }
            let r = d.req(m, path, &[("Authorization", &bearer(ADMIN))], b"");
            r.expect(405);
            assert_eq!(r.header("allow"), Some("GET, HEAD"), "{m} {path}");
        }
    }
    // HEAD on the event stream: its head, then the connection closes (no subscriber kept).
    let mut c = d.client();
    c.write_request(
        "HEAD",
        "/api/v1/events",
        &[("Authorization", &bearer(READ))],
        b"",
    );
    let head = c.read_head();
    assert_eq!(head.status, 200);
    assert_eq!(head.header("content-type"), Some("text/event-stream"));
    assert_eq!(c.read_until(|_| false), "");
    // HEAD on the public login page and on a page redirecting to it.
    let mut c = d.client();
    c.write_request("HEAD", "/login", &[], b"");
    let head = c.read_head();
    assert_eq!(head.status, 200);
    assert!(head
        .header("content-type")
        .unwrap()
        .starts_with("text/html"));
    assert_eq!(head.header("referrer-policy"), Some("same-origin"));
    assert_ne!(head.header("content-length"), Some("0"));
    c.send("GET", "/login", &[], b"").expect(200);
    let mut c = d.client();
    c.write_request("HEAD", "/", &[], b"");
    let head = c.read_head();
    assert_eq!(head.status, 303);
    assert_eq!(head.header("location"), Some("/login"));
}

#[test]
fn unknown_paths_are_json_404_for_every_caller() {
    let d = Daemon::start("notfound", "");
    for path in [
        "/api/v1/no-such-route",
        "/api/v2/status",
        "/api/",
        "/api/v1/sessions/",
        "/api/v1/sessions/a/b",
        "/no-such-page",
    ] {
        // With and without credentials, a wrong one included: spec Errors 3.
        d.req("GET", path, &[], b"").expect(404);
        d.get(path, READ).expect(404);
        d.get(path, ADMIN).expect(404);
        d.get(path, "not-a-valid-token-at-all").expect(404);
        d.req("DELETE", path, &[], b"").expect(404);
        d.req("GET", path, &[("Cookie", "svc_auth=stale")], b"")
            .expect(404);
    }
    // Known routes without a credential stay 401, before 405.
    d.req("GET", "/api/v1/status", &[], b"").expect(401);
    d.req("DELETE", "/api/v1/status", &[], b"").expect(401);
    let r = d.req(
        "DELETE",
        "/api/v1/status",
        &[("Authorization", &bearer(ADMIN))],
        b"",
    );
    r.expect(405);
    // 404s of unknown paths are not authentication failures.
    let m = d.get("/metrics", METRICS).expect(200).text();
    assert!(
        m.contains("svc_auth_failures_total{reason=\"invalid_token\"} 0"),
        "{m}"
    );
}

/// Every route of the router without a credential: 401 (the login form is public, the
/// index page redirects to it).
#[test]
fn every_route_needs_a_credential() {
    use svc::api::Access;
    let d = Daemon::start("everyroute", "");
    for route in svc::api::ROUTES {
        let path = route
            .path
            .replace("/*", "/0123456789abcdef0123456789abcdef");
        for (method, _) in route.methods {
            let r = d.req(method, &path, &[], b"");
            match route.access {
                Access::Public => assert_ne!(r.status, 401, "{method} {path}"),
                Access::Page => {
                    assert_eq!(r.status, 303, "{method} {path}");
                    assert_eq!(
                        r.json(),
                        serde_json::json!({"ok": true, "location": "/login"})
                    );
                }
                _ => {
                    r.expect(401);
                    assert_eq!(r.header("www-authenticate"), Some("Bearer"), "{path}");
                }
            }
        }
    }
}

#[test]
fn browser_writes_need_csrf_of_the_same_session_and_same_origin() {
    let d = Daemon::start("csrf", "");
    let (cookie_a, csrf_a) = login(&d, ADMIN);
    let (cookie_b, csrf_b) = login(&d, ADMIN);
    let (cookie_c, _csrf_c) = login(&d, ADMIN);
    let ca = format!("svc_auth={cookie_a}");
    let list = d
        .req("GET", "/api/v1/sessions", &[("Cookie", &ca)], b"")
        .expect(200)
        .json();
    let items = list["items"].as_array().unwrap();
    assert_eq!(items.len(), 3);
    let c_id = items
        .iter()
        .find(|s| s["current"] == false)
        .map(|s| s["id"].as_str().unwrap().to_string())
        .unwrap();
    let path = format!("/api/v1/sessions/{c_id}");
    // No CSRF token.
    d.req("DELETE", &path, &[("Cookie", &ca)], b"").expect(403);
    // Another session's token.
    d.req(
        "DELETE",
        &path,
        &[("Cookie", &ca), ("X-CSRF-Token", &csrf_b)],
        b"",
    )
    .expect(403);
    // CSRF in the query string is not read.
    d.req(
        "DELETE",
        &format!("{path}?csrf_token={csrf_a}"),
        &[("Cookie", &ca)],
        b"",
    )
    .expect(403);
    // Cross-origin request with the right token.
    d.req(
        "DELETE",
        &path,
        &[
            ("Cookie", &ca),
            ("X-CSRF-Token", &csrf_a),
            ("Origin", "https://evil.example"),
        ],
        b"",
    )
    .expect(403);
    // Form field in the body works.
    let body = format!("csrf_token={csrf_a}");
    let r = d.req(
        "DELETE",
        &path,
        &[
            ("Cookie", &ca),
            ("Content-Type", "application/x-www-form-urlencoded"),
            ("Origin", "https://localhost"),
        ],
        body.as_bytes(),
    );
    r.expect(200);
    assert_eq!(r.json()["ok"], true);
    // The revoked session no longer works; the others do.
    d.req(
        "GET",
        "/api/v1/status",
        &[("Cookie", &format!("svc_auth={cookie_c}"))],
        b"",
    )
    .expect(401);
    d.req(
        "GET",
        "/api/v1/status",
        &[("Cookie", &format!("svc_auth={cookie_b}"))],
        b"",
    )
    .expect(200);
    // Admin Bearer requests are exempt from CSRF.
    let r = d.req(
        "DELETE",
        "/api/v1/sessions/0123456789abcdef0123456789abcdef",
        &[("Authorization", &bearer(ADMIN))],
        b"",
    );
    r.expect(404);
    d.req(
        "DELETE",
        "/api/v1/sessions/not-an-id",
        &[("Authorization", &bearer(ADMIN))],
        b"",
    )
    .expect(404);
    // Read tokens cannot revoke.
    d.req(
        "DELETE",
        "/api/v1/sessions",
        &[("Authorization", &bearer(READ))],
        b"",
    )
    .expect(403);
    // Metrics token cannot either.
    d.req(
        "DELETE",
        "/api/v1/sessions",
        &[("Authorization", &bearer(METRICS))],
        b"",
    )
    .expect(401);
}

#[test]
fn login_accepts_admin_tokens_only() {
    let d = Daemon::start("login", "");
    let form = d.req("GET", "/login", &[], b"");
    assert_eq!(form.status, 200);
    assert!(form.text().contains("name=\"token\""));
    let ct = ("Content-Type", "application/x-www-form-urlencoded");
    d.req("POST", "/login", &[ct], format!("token={READ}").as_bytes())
        .expect(403);
    d.req("POST", "/login", &[ct], b"token=wrong-token-wrong-token")
        .expect(401);
    d.req("POST", "/login", &[ct], b"").expect(400);
    d.req(
        "POST",
        "/login",
        &[ct, ("Origin", "https://evil.example")],
        format!("token={ADMIN}").as_bytes(),
    )
    .expect(403);
    // The token in the query string is not a form field.
    d.req("POST", &format!("/login?token={ADMIN}"), &[ct], b"x=1")
        .expect(400);
    // Unauthenticated page redirects to the login form.
    let r = d.req("GET", "/", &[], b"");
    assert_eq!(r.status, 303);
    assert_eq!(r.header("location"), Some("/login"));
}

#[test]
fn logout_revokes_only_on_post_and_clears_cookie() {
    let d = Daemon::start("logout", "");
    let (cookie, csrf) = login(&d, ADMIN);
    let ch = format!("svc_auth={cookie}");
    d.req("GET", "/logout", &[("Cookie", &ch)], b"").expect(405);
    d.req("GET", "/api/v1/status", &[("Cookie", &ch)], b"")
        .expect(200);
    d.req("POST", "/logout", &[("Cookie", &ch)], b"")
        .expect(403);
    let r = d.req(
        "POST",
        "/logout",
        &[("Cookie", &ch), ("X-CSRF-Token", &csrf)],
        b"",
    );
    r.expect(200);
    assert_eq!(r.json()["ok"], true);
    assert!(r.header("set-cookie").unwrap().contains("Max-Age=0"));
    d.req("GET", "/api/v1/status", &[("Cookie", &ch)], b"")
        .expect(401);
    d.req("POST", "/logout", &[], b"").expect(401);
}

#[test]
fn revoke_all_includes_the_caller() {
    let d = Daemon::start("revokeall", "");
    let (cookie, csrf) = login(&d, ADMIN);
    let (other, _) = login(&d, ADMIN);
    let ch = format!("svc_auth={cookie}");
    let r = d.req(
        "DELETE",
        "/api/v1/sessions",
        &[("Cookie", &ch), ("X-CSRF-Token", &csrf)],
        b"",
    );
    r.expect(200);
    assert_eq!(r.json()["ok"], true);
    d.req("GET", "/api/v1/status", &[("Cookie", &ch)], b"")
        .expect(401);
    d.req(
        "GET",
        "/api/v1/status",
        &[("Cookie", &format!("svc_auth={other}"))],
        b"",
    )
    .expect(401);
    let list = d.get("/api/v1/sessions", ADMIN).expect(200).json();
    assert_eq!(list["items"].as_array().unwrap().len(), 0);
}

#[test]
fn session_list_never_shows_secrets() {
    let d = Daemon::start("sesslist", "");
    let (cookie, csrf) = login(&d, ADMIN);
    let r = d.req(
        "GET",
        "/api/v1/sessions",
        &[
            ("Cookie", &format!("svc_auth={cookie}")),
            ("User-Agent", "test-agent/1"),
        ],
        b"",
    );
    let text = r.text();
    assert!(!text.contains(&cookie) && !text.contains(&csrf) && !text.contains(ADMIN));
    let v = r.json();
    let s = &v["items"][0];
    for key in [
        "id",
        "name",
        "created",
        "last_seen",
        "expires",
        "remote_ip",
        "user_agent",
        "current",
    ] {
        assert!(s.get(key).is_some(), "missing {key}: {s}");
    }
    assert_eq!(s["name"], "ops-admin");
    assert_eq!(s["current"], true);
    assert_eq!(s["remote_ip"], "127.0.0.1");
    for key in ["verifier", "hash", "csrf", "token"] {
        assert!(s.get(key).is_none());
    }
    let created = s["created"].as_str().unwrap();
    assert!(created.ends_with('Z') && created.contains('.'), "{created}");
}

#[test]
fn repeated_failures_are_rate_limited_but_valid_tokens_pass() {
    let d = Daemon::start(
        "ratelimit",
        "[webui.limits]\nauth_failures_per_minute = 5\n",
    );
    for _ in 0..5 {
        d.get("/api/v1/status", "wrong-token-wrong-token")
            .expect(401);
    }
    let r = d.get("/api/v1/status", "wrong-token-wrong-token");
    r.expect(429);
    assert!(r.header("retry-after").is_some());
    let ct = ("Content-Type", "application/x-www-form-urlencoded");
    d.req("POST", "/login", &[ct], b"token=wrong-token-wrong-token")
        .expect(429);
    d.get("/api/v1/status", ADMIN).expect(200);
    // A valid admin token still logs in from the limited address (decision 4).
    let r = d.req("POST", "/login", &[ct], format!("token={ADMIN}").as_bytes());
    assert_eq!(r.status, 303, "{}", r.text());
    let m = d.get("/metrics", METRICS).expect(200).text();
    assert!(
        m.contains("svc_auth_failures_total{reason=\"invalid_token\"} 5\n"),
        "{m}"
    );
    assert!(
        m.contains("svc_auth_failures_total{reason=\"rate_limited\"} 2\n"),
        "{m}"
    );
    assert!(m.contains("svc_auth_rate_limited_total 2\n"), "{m}");
}

#[test]
fn audit_records_state_changes_with_actor_and_via() {
    let mut d = Daemon::start("audit", "");
    let (cookie, csrf) = login(&d, ADMIN);
    let ch = format!("svc_auth={cookie}");
    d.req(
        "DELETE",
        "/api/v1/sessions/0123456789abcdef0123456789abcdef",
        &[("Authorization", &bearer(ADMIN))],
        b"",
    )
    .expect(404);
    d.req(
        "POST",
        "/logout",
        &[("Cookie", &ch), ("X-CSRF-Token", &csrf)],
        b"",
    )
    .expect(200);
    assert_eq!(d.stop(), 0);
    let db = rusqlite::Connection::open(d.state.join("svc.db")).unwrap();
    let mut st = db
        .prepare("SELECT actor, via, action, target, outcome, remote_ip FROM audit ORDER BY id")
        .unwrap();
    let rows: Vec<(String, String, String, String, String, String)> = st
        .query_map([], |r| {
            Ok((
                r.get(0)?,
                r.get(1)?,
                r.get(2)?,
                r.get(3)?,
                r.get(4)?,
                r.get(5)?,
            ))
        })
        .unwrap()
        .map(Result::unwrap)
        .collect();
    let actions: Vec<&str> = rows.iter().map(|r| r.2.as_str()).collect();
    assert_eq!(actions, ["login", "session.revoke", "logout"], "{rows:?}");
    assert_eq!(rows[0].0, "ops-admin");
    assert_eq!(rows[0].1, "browser");
    assert_eq!(rows[1].1, "token");
    assert_eq!(rows[1].3, "0123456789abcdef0123456789abcdef");
    assert_eq!(rows[1].4, "not_found");
    assert_eq!(rows[2].4, "ok");
    assert_eq!(rows[2].5, "127.0.0.1");
}
