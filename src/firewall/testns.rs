//! Test support: a network namespace the test creates, so nftables changes never reach
//! the machine's own ruleset. Dropping it deletes the namespace (also when a test fails).
//!
//! Without root, `ip` or `nft`, [`TestNs::require`] prints why and returns `None`; with
//! `CI=true` it panics instead, so CI never skips these tests silently.

use std::os::fd::AsFd;
use std::process::{Command, Output};
use std::sync::atomic::{AtomicU32, Ordering};

static COUNTER: AtomicU32 = AtomicU32::new(0);

pub struct TestNs {
    pub name: String,
}

fn run(cmd: &str, args: &[&str]) -> Result<Output, String> {
    Command::new(cmd)
        .args(args)
        .output()
        .map_err(|e| format!("{cmd}: {e}"))
}

impl TestNs {
    fn create(tag: &str) -> Result<TestNs, String> {
        if !nix::unistd::geteuid().is_root() {
            return Err("not running as root".into());
        }
        if super::script::locate("nft").is_none() {
            return Err("nft is not installed".into());
        }
        let n = COUNTER.fetch_add(1, Ordering::SeqCst);
        let name = format!("svcu-{tag}-{}-{n}", std::process::id());
        let out = run("ip", &["netns", "add", &name])?;
        if !out.status.success() {
            return Err(format!(
                "ip netns add failed: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        let ns = TestNs { name };
        let out = run("ip", &["-n", &ns.name, "link", "set", "lo", "up"])?;
        if !out.status.success() {
            return Err("cannot bring lo up in the namespace".into());
        }
        Ok(ns)
    }

    /// A namespace, or `None` (printing why) when this machine cannot make one.
    pub fn require(tag: &str) -> Option<TestNs> {
        match TestNs::create(tag) {
            Ok(ns) => Some(ns),
            Err(why) => {
                if std::env::var("CI").is_ok_and(|v| v == "true") {
                    panic!("nftables test needs root and network namespaces: {why}");
                }
                eprintln!("skipping nftables test: {why}");
                None
            }
        }
    }

    /// Moves the calling thread into the namespace (threads and processes it starts
    /// follow).
    pub fn enter(&self) {
        let f = std::fs::File::open(format!("/run/netns/{}", self.name)).expect("netns file");
        nix::sched::setns(f.as_fd(), nix::sched::CloneFlags::CLONE_NEWNET).expect("setns");
    }

    /// Runs `nft` inside the namespace.
    pub fn nft(&self, args: &[&str]) -> String {
        let mut full = vec!["netns", "exec", &self.name, "nft"];
        full.extend_from_slice(args);
        let out = run("ip", &full).expect("ip netns exec");
        assert!(
            out.status.success(),
            "nft {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Runs `nft -f -` with `script` inside the namespace.
    pub fn nft_script(&self, script: &str) {
        use std::io::Write;
        let mut child = Command::new("ip")
            .args(["netns", "exec", &self.name, "nft", "-f", "-"])
            .stdin(std::process::Stdio::piped())
            .spawn()
            .expect("nft");
        child
            .stdin
            .take()
            .unwrap()
            .write_all(script.as_bytes())
            .unwrap();
        assert!(child.wait().unwrap().success(), "nft -f failed");
    }
}

impl Drop for TestNs {
    fn drop(&mut self) {
        let _ = run("ip", &["netns", "del", &self.name]);
    }
}

/// A firewall engine with the default `[firewall]` settings, automatic blocks taking effect
/// (not dry run), in the namespace the calling thread entered.
pub fn engine(
    clock: crate::clock::SharedClock,
    store: crate::store::Store,
    registry: &std::sync::Arc<crate::queue::Registry>,
) -> std::sync::Arc<super::Firewall> {
    super::Firewall::start(
        super::engine::Options {
            file: crate::config::firewall::FirewallConfig::default(),
            auto_dry_run: false,
            extra_tcp_in: vec![],
            nft: super::script::locate("nft").expect("nft"),
        },
        clock,
        store,
        registry,
    )
    .expect("the firewall engine")
}
