use super::*;
use crate::clock::ManualClock;
use crate::mail::log::parse_line;
use crate::store::Store;

const EXIM_DEFAULT: &str = include_str!("../fixtures/exim-mainlog-default.log");
const EXIM_ALL: &str = include_str!("../fixtures/exim-mainlog-all.log");
const POSTFIX: &str = include_str!("../fixtures/postfix-mail.log");

fn ledger(settings: LedgerSettings) -> Ledger {
    Ledger::new(settings, ManualClock::at_epoch_2026(), TimeZone::UTC)
}

fn feed(l: &mut Ledger, text: &str) -> Vec<Finding> {
    let mut out = Vec::new();
    for line in text.lines() {
        if let Some(p) = parse_line(line) {
            l.handle(&p, &mut |f| out.push(f));
        }
    }
    out
}

struct TempStore {
    dir: std::path::PathBuf,
    store: Store,
}

impl TempStore {
    fn new(tag: &str) -> TempStore {
        let dir = std::env::temp_dir().join(format!("svc-ledger-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let store = Store::open(&dir.join("svc.db")).unwrap();
        TempStore { dir, store }
    }
}

impl Drop for TempStore {
    fn drop(&mut self) {
        self.store.close();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn messages(writes: &[MailWrite]) -> Vec<&NewMessage> {
    writes
        .iter()
        .filter_map(|w| match w {
            MailWrite::Message(m) => Some(m),
            _ => None,
        })
        .collect()
}

#[test]
fn exim_relay_abuse_forward_and_origins() {
    for text in [EXIM_DEFAULT, EXIM_ALL] {
        let mut l = ledger(LedgerSettings::default());
        let findings = feed(&mut l, text);
        let checks: Vec<(&str, &str)> = findings
            .iter()
            .map(|f| (f.check.as_str(), f.message.as_str()))
            .collect();
        assert_eq!(
            checks,
            [
                (
                    CHECK_PER_ACCOUNT,
                    "account alice@example.com sent as bank.example (relay abuse)"
                ),
                (
                    CHECK_FORWARDER,
                    "mailbox fwd@example.com forwards to external address someone@example.org"
                ),
            ],
            "{text}"
        );
        let writes = l.take_writes();
        let msgs = messages(&writes);
        let by_sender = |s: &str| msgs.iter().find(|m| m.sender == s).unwrap();
        assert_eq!(by_sender("alice@example.com").origin, "auth");
        assert_eq!(by_sender("alice@example.com").account, "alice@example.com");
        assert!(by_sender("ceo@bank.example").relay_mismatch);
        assert!(!by_sender("alice@example.com").relay_mismatch);
        assert_eq!(by_sender("x@example.org").origin, "inbound");
        assert_eq!(by_sender("www@example.com").origin, "local");
        assert_eq!(by_sender("www@example.com").account, "root");
        // Exim's time of the `<=` line, read in the zone given (UTC here).
        assert!(by_sender("alice@example.com").at > 1_795_000_000_000_000);
        assert!(writes
            .iter()
            .any(|w| matches!(w, MailWrite::Forward { original, target, .. }
            if original == "fwd@example.com" && target == "someone@example.org")));
    }
}

#[test]
fn postfix_lines_merge_by_queue_id() {
    let mut l = ledger(LedgerSettings::default());
    let findings = feed(&mut l, POSTFIX);
    assert_eq!(findings.len(), 2, "{findings:?}");
    let writes = l.take_writes();
    let msgs = messages(&writes);
    let first = msgs
        .iter()
        .rev()
        .find(|m| m.queue_id == "4chq1d2zx9z9txk")
        .unwrap();
    assert_eq!(
        (
            first.sender.as_str(),
            first.origin,
            first.auth_user.as_str(),
            first.recipients
        ),
        ("alice@example.com", "auth", "alice@example.com", 3)
    );
    assert_eq!(first.client_ip.as_deref(), Some("203.0.113.5"));
    let local = msgs
        .iter()
        .rev()
        .find(|m| m.queue_id == "4chq1k5lq1z9txp")
        .unwrap();
    assert_eq!((local.origin, local.account.as_str()), ("local", "33"));
    // Recorded into the store: grouped counts per sender.
    let ts = TempStore::new("pf");
    let w = writes.clone();
    ts.store
        .write(move |c| crate::store::mail_accounts::apply(c, &w))
        .unwrap();
    let groups = ts
        .store
        .read(|c| {
            crate::store::mail_accounts::groups(
                c,
                crate::store::mail_accounts::GroupBy::Sender,
                None,
                None,
                100,
                0,
            )
        })
        .unwrap()
        .0;
    let alice = groups
        .iter()
        .find(|g| g.key == "alice@example.com")
        .unwrap();
    assert_eq!(
        (alice.messages, alice.sent, alice.bounced, alice.deferred),
        (1, 1, 1, 1)
    );
}

#[test]
fn hourly_volume_is_reported_once_per_hour() {
    let mut l = ledger(LedgerSettings {
        hourly_limit: 3,
        auth_failures: 10,
    });
    let line = |i: u32, min: u32| {
        format!(
            "2026-11-23 10:{min:02}:00 1xVY9l-0007{i:04}-1i <= a@example.com H=(h) [203.0.113.4] P=esmtpa A=plain:a@example.com S=1"
        )
    };
    let mut text = String::new();
    for i in 0..6 {
        text.push_str(&line(i, 10 + i));
        text.push('\n');
    }
    let f = feed(&mut l, &text);
    assert_eq!(f.len(), 1);
    assert_eq!(
        f[0].message,
        "account a@example.com sent over 3 messages in an hour"
    );
    assert_eq!(f[0].account.as_deref(), Some("a@example.com"));
    // The next hour starts a new count.
    let mut text = String::new();
    for i in 0..4 {
        text.push_str(&line(100 + i, 0).replace("10:00:00", "11:00:00"));
        text.push('\n');
    }
    assert_eq!(feed(&mut l, &text).len(), 1);
}

#[test]
fn forwarding_loop_and_auth_bruteforce() {
    let mut l = ledger(LedgerSettings {
        hourly_limit: 500,
        auth_failures: 3,
    });
    let text = "\
2026-11-23 10:00:00 1xVY9l-00070A-1i => b@example.net <a@example.com> R=remote T=remote_smtp H=mx [198.51.100.1]
2026-11-23 10:00:01 1xVY9l-00070B-1i => a@example.com <b@example.net> R=remote T=remote_smtp H=mx [198.51.100.2]
2026-11-23 10:00:02 1xVY9l-00070C-1i => a@example.com <b@example.net> R=remote T=remote_smtp H=mx [198.51.100.2]
2026-11-23 10:00:03 plain authenticator failed for (h) [203.0.113.7]: 535 Incorrect authentication data (set_id=x)
2026-11-23 10:00:04 plain authenticator failed for (h) [203.0.113.7]: 535 Incorrect authentication data (set_id=y)
2026-11-23 10:20:04 plain authenticator failed for (h) [203.0.113.7]: 535 Incorrect authentication data (set_id=y)
2026-11-23 10:20:05 plain authenticator failed for (h) [203.0.113.7]: 535 Incorrect authentication data (set_id=y)
2026-11-23 10:20:06 plain authenticator failed for (h) [203.0.113.7]: 535 Incorrect authentication data (set_id=\x1b[31mz)
";
    let f = feed(&mut l, text);
    let got: Vec<_> = f
        .iter()
        .map(|f| (f.check.as_str(), f.severity, f.message.as_str()))
        .collect();
    assert_eq!(
        got,
        [
            (
                CHECK_FORWARDER,
                Severity::Warning,
                "mailbox a@example.com forwards to external address b@example.net"
            ),
            (
                CHECK_FORWARDER,
                Severity::High,
                "forwarding loop between b@example.net and a@example.com"
            ),
            (
                CHECK_AUTH_BRUTEFORCE,
                Severity::High,
                "SMTP AUTH brute force from 203.0.113.7"
            ),
        ]
    );
    assert!(!f[2].details.contains('\x1b'), "{}", f[2].details);
}

#[test]
fn bounds_hold() {
    let mut l = ledger(LedgerSettings::default());
    let mut text = String::new();
    for i in 0..(MAX_PENDING + 10) {
        text.push_str(&format!(
            "Nov 23 17:50:01 m postfix/smtpd[1]: Q{i:010}: client=unknown[203.0.113.5]\n"
        ));
    }
    feed(&mut l, &text);
    assert_eq!(l.pending_len(), MAX_PENDING);
    assert_eq!(l.stats().pending_evicted, 10);
    // A BSD header's year: never more than a day ahead of now.
    let t = parse_line("Dec 31 23:00:00 m postfix/qmgr[1]: ABCDEF: removed")
        .unwrap()
        .time;
    let at = l.line_instant(t.as_ref());
    assert!(at <= l.clock.now() + SignedDuration::from_hours(24));
}
