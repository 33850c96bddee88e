//! Kernel probes (issue 29). With the `bpf` feature (CI: `scripts/test.sh` builds with it
//! and runs as root) one daemon runs every backend and real processes trip each detection:
//! a `php-fpm` parent running `/bin/sh -c 'curl ...'`, a non-root connect to a loopback port
//! outside the allow list, a non-owner reading a file configured as sensitive, and an
//! AF_ALG socket; the rows exist with the spec's capacities. Without the feature the
//! backends are components reported as not built.

use crate::common::*;

/// The backend components the daemon reports (`/api/v1/components`).
fn probe_components(d: &Daemon) -> Vec<serde_json::Value> {
    let v = d.get("/api/v1/components", READ).expect(200).json();
    v["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["kind"] == "probe")
        .cloned()
        .collect()
}

/// A daemon whose `[probes]` table is `probes`.
fn start(tag: &str, probes: &str) -> Daemon {
    let dir = temp_dir(tag);
    let state = dir.join("state");
    let config = dir.join("svc.toml");
    let text = base_config(&state).replace(PROBES_OFF, probes);
    assert!(text.contains(probes));
    std::fs::write(&config, text).unwrap();
    Daemon::start_with(dir, config, state, &[])
}

#[cfg(not(feature = "bpf"))]
#[test]
fn probes_without_the_feature_are_reported_as_not_built() {
    let d = start(
        "probes-off",
        "[probes]\nbackends = [\"execution\", \"af_alg\"]\n",
    );
    let comps = probe_components(&d);
    assert_eq!(comps.len(), 2, "{comps:?}");
    for c in &comps {
        assert_eq!(c["attached"], false);
        assert!(c["detail"].as_str().unwrap().contains("not built"), "{c}");
    }
    let doctor = d.cli(&["doctor", "--json"]);
    let text = String::from_utf8_lossy(&doctor.stdout);
    let v: serde_json::Value = serde_json::from_slice(&doctor.stdout).unwrap();
    let check = v["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "collector:probe.execution")
        .unwrap_or_else(|| panic!("{text}"));
    // A build choice, not a fault.
    assert_eq!(check["status"], "ok", "{check}");
    let status = d.cli(&["status"]);
    let text = String::from_utf8_lossy(&status.stdout);
    assert!(text.contains("kernel probes:"), "{text}");
    assert!(
        text.contains("probe.af_alg") && text.contains("not built"),
        "{text}"
    );
}

#[cfg(feature = "bpf")]
mod kernel {
    use std::os::unix::fs::PermissionsExt;
    use std::os::unix::process::CommandExt;
    use std::process::Command;

    use super::*;

    const NOBODY: u32 = 65534;

    /// A loopback port nothing listens on (bound, then released).
    fn closed_port() -> u16 {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    }

    fn finding_with(d: &Daemon, check: &str, needle: &str) -> serde_json::Value {
        wait_until(60, &format!("{check} finding with {needle:?}"), || {
            findings_of(d, check)
                .into_iter()
                .find(|f| f.to_string().contains(needle))
        })
    }

    #[test]
    fn kernel_probes_report_web_spawn_connection_sensitive_file_and_af_alg() {
        assert!(
            nix::unistd::geteuid().is_root(),
            "kernel probe tests need root (CI runs as root)"
        );
        let dir = temp_dir("probes-files");
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        let secret = dir.join("probe-secret.key");
        std::fs::write(&secret, "s3cret\n").unwrap();
        std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o644)).unwrap();
        let d = start(
            "probes",
            &format!(
                "[probes]\nallowed_out_ports = [80, 443]\nsensitive_files = [{:?}, \"/etc/shadow\"]\n",
                secret.display().to_string()
            ),
        );
        let comps = wait_until(30, "four probe components", || {
            let c = probe_components(&d);
            (c.len() == 4).then_some(c)
        });
        for c in &comps {
            assert_eq!(c["attached"], true, "{c}");
        }
        let status = d.cli(&["status"]);
        let text = String::from_utf8_lossy(&status.stdout);
        assert!(
            text.contains("probe.sensitive_files") && text.contains("attached"),
            "{text}"
        );

        // A PHP worker (a shell copied under the name php-fpm) running sh -c 'curl ...'.
        let php = dir.join("php-fpm");
        std::fs::copy("/bin/dash", &php).unwrap();
        std::fs::set_permissions(&php, std::fs::Permissions::from_mode(0o755)).unwrap();
        let port = closed_port();
        let status = Command::new(&php)
            .arg("-c")
            .arg(format!(
                "/bin/sh -c 'curl -s --max-time 5 http://127.0.0.1:{port}/ || true'; true"
            ))
            .status()
            .unwrap();
        assert!(status.success());
        let f = finding_with(&d, "process_spawned_by_web", "php-fpm started sh -c");
        let details = f["details"].as_str().unwrap_or_default();
        assert!(
            details.contains("php-fpm") && details.contains(" sh "),
            "{f}"
        );
        assert_eq!(f["severity"], "HIGH");
        finding_with(&d, "process_spawned_by_web", "php-fpm started curl");

        // A non-root connect to a loopback port outside allowed_out_ports.
        let port = closed_port();
        let _ = Command::new("curl")
            .args([
                "-s",
                "--max-time",
                "5",
                &format!("http://127.0.0.1:{port}/"),
            ])
            .uid(NOBODY)
            .gid(NOBODY)
            .status()
            .unwrap();
        let f = finding_with(&d, "outbound_connection_unusual", &format!("port {port} "));
        assert_eq!(f["ip"], "127.0.0.1", "{f}");
        assert_eq!(f["account"], "nobody", "{f}");

        // A non-owner (nobody) reading a root-owned file configured as sensitive.
        let out = Command::new("cat")
            .arg(&secret)
            .uid(NOBODY)
            .gid(NOBODY)
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        let f = finding_with(&d, "sensitive_file_access", "probe-secret.key");
        assert!(
            f["message"].as_str().unwrap().contains("owned by uid 0"),
            "{f}"
        );

        // An AF_ALG socket (perl: socket(2) with family 38, SOCK_SEQPACKET).
        let _ = Command::new("perl")
            .args(["-e", "socket(my $s, 38, 5, 0)"])
            .uid(NOBODY)
            .gid(NOBODY)
            .status()
            .unwrap();
        let f = finding_with(&d, "af_alg_socket", "perl opened an AF_ALG socket");
        // nobody is a web account (decision 419): HIGH.
        assert_eq!(f["severity"], "HIGH", "{f}");

        // Rows as the spec defines them.
        let q = d.get("/api/v1/status", READ).expect(200).json()["queues"].clone();
        for b in ["execution", "connection", "sensitive_files", "af_alg"] {
            let k = &q[format!("{b}.kernel")];
            assert_eq!(k["depth_unit"], "bytes", "{q}");
            assert_eq!(k["capacity"], 262_144);
            assert_eq!(k["lag_basis"], "consumer_progress");
            assert_eq!(q[format!("bpf.{b}.output")]["capacity"], 256, "{q}");
        }
        assert_eq!(q["bpf.connection.verdict"]["capacity"], 256);
        assert_eq!(q["processctx.enrichment"]["capacity"], 1024);
        assert_eq!(q["processctx.proc_reads"]["capacity"], 64);
        // Rows move: every backend counted the records its consumer handled.
        let comps = probe_components(&d);
        for c in &comps {
            assert!(c["events_total"].as_u64().unwrap() > 0, "{c}");
        }
    }
}
