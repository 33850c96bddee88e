//! The challenge listener's handler (served by `crate::http` on `challenge.listen`, with the
//! same connection limits and deadlines as the API).
//!
//! | Request | Answer |
//! |---|---|
//! | `GET /challenge.js` | the script |
//! | `POST /verify` (form or JSON: `nonce`, `counter`) | 200 `{"ok": true}` and the cookie; 400 unreadable; 403 refused |
//! | `GET` or `HEAD` anything else | the verified page for a valid cookie, else the challenge page with a fresh nonce (503 when the nonce table is full) |
//! | other methods | 405 |
//!
//! The client is the connection's peer. Only when the peer is in
//! `challenge.trusted_proxies` (a reverse proxy in front of the listener; empty by
//! default) the last address of the last `X-Forwarded-For` header counts, if it parses:
//! that is the one the proxy appended. From any other peer, loopback included, the header
//! is client text and ignored (counted `forwarded_untrusted`): a local user could
//! otherwise solve for any address and fill the nonce table with made-up clients.
//! Every answer carries a strict content security policy, `Cache-Control: no-store` and
//! `X-Content-Type-Options: nosniff`. The cookie is `HttpOnly; Secure; SameSite=Lax`.

use std::net::IpAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::{page, pow, Challenge};
use crate::http::{Handler, Request, Response};

pub struct ChallengeHandler {
    pub challenge: Arc<Challenge>,
}

/// Who a request is from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Client {
    /// The address nonces and proofs are bound to.
    pub ip: IpAddr,
    /// The trusted proxy that named `ip` in `X-Forwarded-For`; `None`: `ip` is the peer.
    pub proxy: Option<IpAddr>,
    /// The request carried `X-Forwarded-For` from a peer that is not trusted (ignored).
    pub untrusted_forward: bool,
}

/// The client of a request (see the module doc); `trusted`: whether a peer is in
/// `challenge.trusted_proxies`.
pub fn client_of(req: &Request, trusted: impl Fn(IpAddr) -> bool) -> Client {
    let peer = req.remote.ip().to_canonical();
    // The last header line: a proxy that adds its own line (rather than appending to the
    // client's) puts it last.
    let xff = req
        .headers
        .iter()
        .rev()
        .find(|(n, _)| n == "x-forwarded-for")
        .map(|(_, v)| v.as_str());
    let direct = Client {
        ip: peer,
        proxy: None,
        untrusted_forward: false,
    };
    let Some(xff) = xff else { return direct };
    if !trusted(peer) {
        return Client {
            untrusted_forward: true,
            ..direct
        };
    }
    match xff.rsplit(',').next().map(|l| l.trim().parse::<IpAddr>()) {
        Some(Ok(ip)) => Client {
            ip: ip.to_canonical(),
            proxy: Some(peer),
            untrusted_forward: false,
        },
        _ => direct,
    }
}

fn secure(r: Response) -> Response {
    r.with_header("Content-Security-Policy", page::CSP)
        .with_header("Cache-Control", "no-store")
        .with_header("X-Content-Type-Options", "nosniff")
        .with_header("Referrer-Policy", "no-referrer")
        .with_header("X-Frame-Options", "DENY")
}

impl ChallengeHandler {
    fn verify(&self, req: &Request, ip: IpAddr) -> Response {
        let proof = match pow::parse_proof(&req.body) {
            Ok(p) => p,
            Err(e) => {
                self.challenge
                    .counters
                    .bad_requests
                    .fetch_add(1, Ordering::Relaxed);
                return Response::error(400, &e.to_string());
            }
        };
        match self.challenge.verify(ip, &proof) {
            Ok((cookie, max_age)) => {
                self.challenge.log_solved(ip);
                Response::json(200, &serde_json::json!({ "ok": true })).with_header(
                    "Set-Cookie",
                    format!(
                        "{}={cookie}; Max-Age={max_age}; Path=/; HttpOnly; Secure; SameSite=Lax",
                        pow::COOKIE
                    ),
                )
            }
            Err(e) => Response::error(403, &e.to_string()),
        }
    }
}

impl Handler for ChallengeHandler {
    fn handle(&self, req: &Request) -> Response {
        let client = client_of(req, |p| self.challenge.trusts(p));
        if client.untrusted_forward {
            self.challenge.note_untrusted_forward(client.ip);
        }
        let ip = client.ip;
        let r = match (req.method.as_str(), req.path.as_str()) {
            ("GET" | "HEAD", page::SCRIPT_PATH) => Response::new(
                200,
                "application/javascript; charset=utf-8",
                page::SCRIPT.as_bytes().to_vec(),
            ),
            ("POST", page::VERIFY_PATH) => self.verify(req, ip),
            (_, page::VERIFY_PATH) | (_, page::SCRIPT_PATH) => {
                Response::error(405, "method not allowed")
            }
            ("GET" | "HEAD", _) => {
                let verified = req
                    .cookie(pow::COOKIE)
                    .is_some_and(|c| self.challenge.cookie_ok(ip, c));
                if verified {
                    Response::new(
                        200,
                        "text/html; charset=utf-8",
                        page::verified_page().into_bytes(),
                    )
                } else {
                    match self.challenge.issue(ip, client.proxy) {
                        Some((nonce, bits)) => Response::new(
                            200,
                            "text/html; charset=utf-8",
                            page::challenge_page(&nonce, bits).into_bytes(),
                        ),
                        None => Response::error(
                            503,
                            "too many challenges outstanding; try again shortly",
                        )
                        .with_header("Retry-After", "30"),
                    }
                }
            }
            _ => Response::error(405, "method not allowed"),
        };
        secure(r)
    }
}
