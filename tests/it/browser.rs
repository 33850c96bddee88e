//! The web login through a real browser: headless Chromium, driven over its DevTools pipe
//! (`--remote-debugging-pipe`: commands on fd 3, answers on fd 4, JSON messages ended by a
//! NUL byte), loads `/login`, types the admin token, presses the button and must land on
//! the authenticated page. Issue 23 item 4: the page's `Referrer-Policy: no-referrer` made
//! Chromium post the form with `Origin: null`, which the origin check refused (403).

use serde_json::json;

use crate::common::browser::{chromium_present, Browser};
use crate::common::*;

#[test]
fn headless_chromium_logs_in_with_the_admin_token() {
    if !chromium_present("browser login test") {
        return;
    }
    let d = Daemon::start("browser-login", "");
    let profile = d.dir.join("profile");
    let mut b = Browser::start(&format!("https://{}/login", d.addr), &profile);
    let session = b.attach_page();

    // The login form, loaded.
    let ready = b.eval_until(
        &session,
        "document.readyState + '|' + location.pathname + '|' + !!document.getElementById('token')",
        |v| v == "complete|/login|true",
    );
    assert_eq!(ready, "complete|/login|true");

    // Type the token and press the button, as a person would.
    let typed = format!(
        "document.getElementById('token').value = {}; document.querySelector('button[type=submit]').click(); 'sent'",
        json!(ADMIN)
    );
    assert_eq!(b.eval(&session, &typed).unwrap(), "sent");

    // The browser follows the 303 to the authenticated page with its new cookie.
    let page = b.eval_until(
        &session,
        "location.pathname + '|' + (document.body ? document.body.innerText : '')",
        |v| v.as_str().is_some_and(|s| s.contains("Signed in as")),
    );
    let page = page.as_str().unwrap_or_default().to_string();
    assert!(
        page.starts_with("/|") && page.contains("Signed in as ops-admin"),
        "the browser did not reach the signed-in page: {page}"
    );
    // The login is audited as a browser login from loopback.
    let audit = d.get("/api/v1/audit", ADMIN).expect(200).json();
    let items = audit["items"].as_array().unwrap();
    assert!(
        items
            .iter()
            .any(|e| e["action"] == "login" && e["outcome"] == "ok" && e["via"] == "browser"),
        "{audit}"
    );
    let _ = b.call(None, "Browser.close", json!({}));
}
