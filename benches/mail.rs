//! Mail antivirus figures (issue 13), side by side with clamd in the same run.
//!
//! 1. Decoding and extraction on one core: the MIME walker with the tolerant decoders over
//!    a base64-heavy corpus (messages with several base64 attachments), staged like the
//!    daemon stages them; MB/s of message bytes.
//! 2. Per-message overhead of the whole pipeline (walk, decode, unpack, clamd `INSTREAM` of
//!    each decoded part, content signatures) over raw clamd `INSTREAM` of the same message
//!    bytes, alternating the two per message.
//! 3. Peak RSS of a process scanning one 50 MB message through the pipeline (a child
//!    process of this bench, so the figure is its own).
//!
//! The bench starts its own clamd (Debian `clamav-daemon`) on a unix socket with a one-line
//! signature database; without clamd, parts 2 and 3 say so and are skipped.
//!
//! `cargo bench --bench mail -- [--messages N] [--dir DIR]`

#![allow(
    clippy::disallowed_methods,
    reason = "test and benchmark fixtures are built with plain std::fs calls, as an attacker would"
)]

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use svc::clock::SystemClock;
use svc::mail::archive::ArchiveLimits;
use svc::mail::clamd::{self, Clamd, Endpoint};
use svc::mail::mime::{Limits, PartInfo, Sink, Walker};
use svc::mail::scanner::{scan_message, Engines, ScanOptions};
use svc::mail::staging::{Spill, Staging};
use svc::queue::{QueueHealth, RowConfig};
use svc::scan::signatures::SignatureSet;

const MARKER: &str = "SVC-BENCH-MALWARE-MARKER-51c2";

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn bytes(&mut self, n: usize) -> Vec<u8> {
        let mut v = Vec::with_capacity(n + 8);
        while v.len() < n {
            v.extend_from_slice(&self.next().to_le_bytes());
        }
        v.truncate(n);
        v
    }
}

fn b64_lines(data: &[u8]) -> String {
    svc::mail::decode::encode_base64(data, 76)
}

/// A message with a text part and `attachments` base64 attachments of `size` bytes each.
fn message(rng: &mut Rng, i: usize, attachments: usize, size: usize) -> Vec<u8> {
    let mut m = format!(
        "From: a{i}@example.test\r\nTo: b@example.org\r\nSubject: report {i}\r\nMessage-ID: <{i}@example.test>\r\nMIME-Version: 1.0\r\nContent-Type: multipart/mixed; boundary=\"=_b{i}\"\r\n\r\n--=_b{i}\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Transfer-Encoding: quoted-printable\r\n\r\nHello,=20please find the files attached.=0D=0A\r\nRegards\r\n"
    );
    for a in 0..attachments {
        m.push_str(&format!(
            "--=_b{i}\r\nContent-Type: application/octet-stream; name=\"file{a}.bin\"\r\nContent-Disposition: attachment; filename=\"file{a}.bin\"\r\nContent-Transfer-Encoding: base64\r\n\r\n{}\r\n",
            b64_lines(&rng.bytes(size)).replace('\n', "\r\n")
        ));
    }
    m.push_str(&format!("--=_b{i}--\r\n"));
    m.into_bytes()
}

struct Count(u64);

impl Sink for Count {
    fn part(&mut self, _: &PartInfo, _: &Spill, len: u64) {
        self.0 += len;
    }
}

fn decode_throughput(dir: &Path, staging: &Arc<Staging>) {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let corpus: Vec<Vec<u8>> = (0..24)
        .map(|i| message(&mut rng, i, 4, 600 * 1024))
        .collect();
    let total: usize = corpus.iter().map(Vec::len).sum();
    let _ = dir;
    let mut best = f64::MAX;
    let mut best_cpu = f64::MAX;
    let mut decoded = 0;
    for _ in 0..3 {
        let t = Instant::now();
        let c = thread_cpu();
        decoded = 0;
        for m in &corpus {
            let mut sink = Count(0);
            let mut w = Walker::new(Limits::default(), Some(staging.clone()), &mut sink);
            let mut r = m.as_slice();
            let _ = w.walk_message(&mut r);
            decoded += sink.0;
        }
        best = best.min(t.elapsed().as_secs_f64());
        best_cpu = best_cpu.min(thread_cpu() - c);
    }
    println!(
        "decode+extract (one thread, staged like the daemon): {:.1} MB of base64-heavy mail: wall {:.3} s = {:.0} MB/s; CPU {:.3} s = {:.0} MB/s per core ({:.1} MB decoded)",
        total as f64 / 1e6,
        best,
        total as f64 / 1e6 / best,
        best_cpu,
        total as f64 / 1e6 / best_cpu,
        decoded as f64 / 1e6
    );
    // The tolerant base64 decoder alone over the same attachments' text.
    let text: Vec<u8> = corpus
        .iter()
        .flat_map(|m| m.iter().copied())
        .filter(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/' | b'\n' | b'\r'))
        .collect();
    let c = thread_cpu();
    let out = svc::mail::decode::decode_base64(&text);
    let cpu = thread_cpu() - c;
    println!(
        "tolerant base64 decoder alone: {:.1} MB in CPU {:.3} s = {:.0} MB/s ({} bytes out)",
        text.len() as f64 / 1e6,
        cpu,
        text.len() as f64 / 1e6 / cpu,
        out.quartet.len()
    );
}

/// CPU time of this thread, in seconds (the machine is shared: wall time overstates).
fn thread_cpu() -> f64 {
    use nix::sys::resource::{getrusage, UsageWho};
    match getrusage(UsageWho::RUSAGE_THREAD) {
        Ok(u) => {
            let t = |tv: nix::sys::time::TimeVal| tv.tv_sec() as f64 + tv.tv_usec() as f64 / 1e6;
            t(u.user_time()) + t(u.system_time())
        }
        Err(_) => 0.0,
    }
}

struct ClamdProc {
    child: Child,
    socket: PathBuf,
}

impl Drop for ClamdProc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start_clamd(dir: &Path) -> Option<ClamdProc> {
    let db = dir.join("clamdb");
    std::fs::create_dir_all(&db).ok()?;
    let hex: String = MARKER.bytes().map(|b| format!("{b:02x}")).collect();
    std::fs::write(
        db.join("bench.ndb"),
        format!("Svc.Bench.Marker:0:*:{hex}\n"),
    )
    .ok()?;
    let socket = dir.join("clamd.sock");
    let _ = std::fs::remove_file(&socket);
    let conf = dir.join("clamd.conf");
    std::fs::write(
        &conf,
        format!(
            "LocalSocket {}\nDatabaseDirectory {}\nTemporaryDirectory {}\nForeground yes\nUser root\nStreamMaxLength 200M\nMaxThreads 2\n",
            socket.display(),
            db.display(),
            dir.display()
        ),
    )
    .ok()?;
    let child = Command::new("clamd")
        .arg("-c")
        .arg(&conf)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .ok()?;
    let p = ClamdProc { child, socket };
    let c = Clamd::new(Endpoint::Unix(p.socket.clone()), Duration::from_secs(60));
    let deadline = Instant::now() + Duration::from_secs(60);
    while c.ping().is_err() {
        if Instant::now() > deadline {
            return None;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    Some(p)
}

fn engines(socket: &Path) -> Engines {
    let clock = SystemClock::shared();
    Engines {
        clamd: Some(Clamd::new(
            Endpoint::Unix(socket.to_path_buf()),
            Duration::from_secs(60),
        )),
        clamd_health: Arc::new(clamd::Health::default()),
        signatures: Arc::new(SignatureSet::shipped().expect("shipped signatures")),
        row: QueueHealth::new(clock.clone(), RowConfig::new("scans").capacity(2)),
        clock,
    }
}

fn options(staging: &Arc<Staging>) -> ScanOptions {
    ScanOptions {
        limits: Limits::default(),
        archive: ArchiveLimits::default(),
        staging: Some(staging.clone()),
        outbound: false,
    }
}

fn overhead(socket: &Path, staging: &Arc<Staging>, n: usize) {
    let mut rng = Rng(0x1234_5678_9abc_def1);
    // Typical office mail: one or two attachments of 40-200 KB; every tenth carries the
    // marker in an attachment.
    let corpus: Vec<Vec<u8>> = (0..n)
        .map(|i| {
            let size = 40 * 1024 + (rng.next() % (160 * 1024)) as usize;
            let mut m = message(&mut rng, i, 1 + i % 2, size);
            if i % 10 == 0 {
                let s = String::from_utf8(m).unwrap();
                let inject = format!(
                    "--=_b{i}\r\nContent-Type: application/octet-stream; name=\"x.bin\"\r\nContent-Transfer-Encoding: base64\r\n\r\n{}\r\n--=_b{i}--\r\n",
                    b64_lines(format!("xx {MARKER} yy").as_bytes())
                );
                m = s.replace(&format!("--=_b{i}--\r\n"), &inject).into_bytes();
            }
            m
        })
        .collect();
    let e = engines(socket);
    let raw = Clamd::new(
        Endpoint::Unix(socket.to_path_buf()),
        Duration::from_secs(60),
    );
    let o = options(staging);
    let (mut t_raw, mut t_pipe) = (Duration::ZERO, Duration::ZERO);
    let (mut found_raw, mut found_pipe) = (0, 0);
    // Warm-up.
    for m in corpus.iter().take(5) {
        let _ = raw.scan(&mut m.as_slice());
        let _ = scan_message(&mut m.as_slice(), &e, &o);
    }
    for m in &corpus {
        let t = Instant::now();
        if matches!(raw.scan(&mut m.as_slice()), Ok(clamd::Verdict::Found(_))) {
            found_raw += 1;
        }
        t_raw += t.elapsed();
        let t = Instant::now();
        let r = scan_message(&mut m.as_slice(), &e, &o);
        t_pipe += t.elapsed();
        if r.infected() {
            found_pipe += 1;
        }
    }
    let bytes: usize = corpus.iter().map(Vec::len).sum();
    let per = |d: Duration| d.as_secs_f64() * 1e3 / n as f64;
    println!(
        "{n} messages ({:.1} MB, 40-200 KB attachments): raw clamd INSTREAM {:.2} ms/message ({found_raw} found); svc pipeline {:.2} ms/message ({found_pipe} found); overhead {:+.1}%",
        bytes as f64 / 1e6,
        per(t_raw),
        per(t_pipe),
        (t_pipe.as_secs_f64() / t_raw.as_secs_f64() - 1.0) * 100.0
    );
}

fn status_kb(key: &str) -> u64 {
    let s = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    s.lines()
        .find(|l| l.starts_with(key))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// Child mode: scans one 50 MB message read from a file, prints RSS figures.
fn rss_child(socket: &Path, msg: &Path, state: &Path) {
    let staging = Arc::new(Staging::prepare(state).expect("staging"));
    let e = engines(socket);
    let before = status_kb("VmRSS:");
    let f = std::fs::File::open(msg).unwrap();
    let mut r = std::io::BufReader::with_capacity(64 * 1024, f);
    let t = Instant::now();
    let res = scan_message(&mut r, &e, &options(&staging));
    println!(
        "rss_before_kb={before} rss_peak_kb={} seconds={:.2} infected={} parts={}",
        status_kb("VmHWM:"),
        t.elapsed().as_secs_f64(),
        res.infected(),
        res.parts.len()
    );
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let get = |name: &str| {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1))
            .cloned()
    };
    if let (Some(sock), Some(msg), Some(state)) = (get("--rss-child"), get("--msg"), get("--state"))
    {
        rss_child(Path::new(&sock), Path::new(&msg), Path::new(&state));
        return;
    }
    let n: usize = get("--messages")
        .and_then(|v| v.parse().ok())
        .unwrap_or(200);
    let dir = get("--dir").map(PathBuf::from).unwrap_or_else(|| {
        std::env::temp_dir().join(format!("svc-bench-mail-{}", std::process::id()))
    });
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let state = dir.join("state");
    std::fs::create_dir_all(&state).unwrap();
    std::fs::set_permissions(&state, std::os::unix::fs::PermissionsExt::from_mode(0o700)).unwrap();
    let staging = Arc::new(Staging::prepare(&state).expect("staging"));
    println!("mail antivirus bench (2-core machine shared with other work: figures are noisy)");
    decode_throughput(&dir, &staging);
    match start_clamd(&dir) {
        None => println!("clamd not available: overhead and RSS figures skipped"),
        Some(c) => {
            overhead(&c.socket, &staging, n);
            // 50 MB message: two 25 MB base64 attachments (one zipped content).
            let mut rng = Rng(7);
            let msg = message(&mut rng, 0, 2, 18 * 1024 * 1024);
            let path = dir.join("big.eml");
            std::fs::File::create(&path)
                .unwrap()
                .write_all(&msg)
                .unwrap();
            let out = Command::new(std::env::current_exe().unwrap())
                .args(["--rss-child"])
                .arg(&c.socket)
                .arg("--msg")
                .arg(&path)
                .arg("--state")
                .arg(&state)
                .output()
                .unwrap();
            let text = String::from_utf8_lossy(&out.stdout);
            println!(
                "one {:.1} MB message through the pipeline (separate process): {}",
                msg.len() as f64 / 1e6,
                text.trim()
            );
            // clamd's own RSS (its whole process, database loaded) for scale.
            let status = std::fs::read_to_string(format!("/proc/{}/status", c.child.id()))
                .unwrap_or_default();
            let hwm = status
                .lines()
                .find(|l| l.starts_with("VmHWM:"))
                .unwrap_or("VmHWM: ?")
                .to_string();
            println!(
                "clamd process after the run: {}",
                hwm.split_whitespace().collect::<Vec<_>>().join(" ")
            );
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}
