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
//! The client is the connection's peer; when the peer is loopback (the local web server
//! proxies to the listener), the last `X-Forwarded-For` address, if it parses.
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

/// The client address of a request (see the module doc).
pub fn client_ip(req: &Request) -> IpAddr {
    let peer = req.remote.ip().to_canonical();
    if peer.is_loopback() {
        if let Some(xff) = req.header("x-forwarded-for") {
            if let Some(last) = xff.rsplit(',').next() {
                if let Ok(ip) = last.trim().parse::<IpAddr>() {
                    return ip.to_canonical();
                }
            }
        }
    }
    peer
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
        let ip = client_ip(req);
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
                    match self.challenge.issue(ip) {
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
