//! The page a challenged browser gets and its script. The script finds a counter so that
//! `SHA-256("<nonce>:<counter>")` has the page's number of leading zero bits (Web Crypto,
//! `crypto.subtle.digest`), posts `nonce` and `counter` to `/verify` and shows the outcome;
//! the page's `<main>` carries `data-state` (`working`, `verified`, `failed`) for scripts
//! and tests.

/// Path of the script (served by the listener; the page's policy allows only it).
pub const SCRIPT_PATH: &str = "/challenge.js";
/// Path proofs are posted to.
pub const VERIFY_PATH: &str = "/verify";

/// The content security policy of every answer.
pub const CSP: &str =
    "default-src 'none'; script-src 'self'; connect-src 'self'; style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

const STYLE: &str = "body{font-family:sans-serif;max-width:36em;margin:4em auto;padding:0 1em;color:#222}h1{font-size:1.4em}";

/// The challenge page for `nonce` at `bits` of difficulty.
pub fn challenge_page(nonce: &str, bits: u8) -> String {
    format!(
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><meta name=\"robots\" content=\"noindex\"><meta name=\"viewport\" content=\"width=device-width\"><title>Checking your browser</title><style>{STYLE}</style></head><body><main id=\"challenge\" data-state=\"working\" data-nonce=\"{nonce}\" data-bits=\"{bits}\"><h1>Checking your browser</h1><p id=\"status\">Your browser is solving a short puzzle to show it is not an automated attack. This takes a few seconds.</p><noscript><p>This check needs JavaScript.</p></noscript></main><script src=\"{SCRIPT_PATH}\"></script></body></html>"
    )
}

/// The page for an address that holds a valid cookie.
pub fn verified_page() -> String {
    format!(
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><meta name=\"robots\" content=\"noindex\"><title>Verified</title><style>{STYLE}</style></head><body><main id=\"challenge\" data-state=\"verified\"><h1>Verified</h1><p id=\"status\">Your browser is verified. You can return to the site.</p></main></body></html>"
    )
}

/// The script.
pub const SCRIPT: &str = r#"'use strict';
(function () {
  var main = document.getElementById('challenge');
  var status = document.getElementById('status');
  if (!main || main.dataset.state !== 'working') { return; }
  var nonce = main.dataset.nonce;
  var bits = parseInt(main.dataset.bits, 10);
  var enc = new TextEncoder();
  function zeroBits(buf) {
    var b = new Uint8Array(buf), n = 0;
    for (var i = 0; i < b.length; i++) {
      if (b[i] === 0) { n += 8; continue; }
      var x = b[i];
      while ((x & 0x80) === 0) { n++; x <<= 1; }
      return n;
    }
    return n;
  }
  function fail(msg) {
    main.dataset.state = 'failed';
    status.textContent = msg;
  }
  async function solve() {
    if (!window.crypto || !crypto.subtle) { fail('This browser cannot run the check (no Web Crypto).'); return; }
    var counter = 0;
    for (;;) {
      var batch = [];
      for (var k = 0; k < 256; k++) {
        batch.push(crypto.subtle.digest('SHA-256', enc.encode(nonce + ':' + (counter + k))));
      }
      var out = await Promise.all(batch);
      for (var j = 0; j < out.length; j++) {
        if (zeroBits(out[j]) >= bits) { return counter + j; }
      }
      counter += 256;
    }
  }
  solve().then(function (counter) {
    if (counter === undefined) { return; }
    return fetch('/verify', {
      method: 'POST',
      credentials: 'same-origin',
      headers: { 'Content-Type': 'application/x-www-form-urlencoded' },
      body: 'nonce=' + nonce + '&counter=' + counter
    }).then(function (r) {
      return r.json().then(function (j) {
        if (r.ok && j.ok) {
          main.dataset.state = 'verified';
          status.textContent = 'Verified. You can return to the site.';
        } else {
          fail('The check failed: ' + (j.error || r.status) + '. Reload the page to try again.');
        }
      });
    });
  }).catch(function (e) { fail('The check failed: ' + e + '. Reload the page to try again.'); });
})();
"#;
