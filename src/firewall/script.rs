//! The structure of table `inet svc` as an `nft -f -` script, and the runner of the nft
//! program.
//!
//! Guarantees:
//! - Every statement names table `inet svc`; the script never lists, changes or flushes
//!   another table, and never uses `flush ruleset`.
//! - The script is idempotent and one transaction (nft commits a whole file or nothing).
//!   It declares every set (a no-op for existing ones, so blocks and allows survive it),
//!   re-creates the chains' rules and the small settings sets (infrastructure and
//!   DoS-exempt ranges), and never touches the elements of the block and allow sets: nft
//!   does not load elements for these statements, so the script runs in milliseconds
//!   beside 100,000 blocks.
//! - Rule order in `input` is the documented precedence: (loopback in `full` mode), infra
//!   accept, blocked addresses and subnets drop, allowed accept, then the `full` policy, in
//!   which the daemon's own HTTPS port is accepted before the DoS meters (a connection cap
//!   never throttles the operator's API connections).
//! - Meter sets hold state made under the rule that filled them (a `ct count over N`
//!   element keeps its N). The script re-creates, empty, every meter set whose rule
//!   differs from the one last applied, so a meter never outlives its settings (a revert
//!   included); unchanged meters keep their state.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::config::firewall::{FirewallConfig, Mode};

use super::net::{Net, PortRange};
use super::netlink::SetRef;

/// Hook priority of the input and output chains: before the distribution's filter (0).
pub const PRIORITY: i32 = -10;

/// A set holding blocks or allows, filled by netlink batches.
#[derive(Clone, Copy, Debug)]
pub struct SetDef {
    pub name: &'static str,
    pub v4: bool,
    /// `flags interval, timeout` (ranges) rather than `flags timeout` (addresses).
    pub interval: bool,
}

impl SetDef {
    pub fn set_ref(&self) -> SetRef {
        SetRef {
            name: self.name,
            interval: self.interval,
        }
    }
}

const fn def(name: &'static str, v4: bool, interval: bool) -> SetDef {
    SetDef { name, v4, interval }
}

/// Sets holding blocks and allows. Single addresses live in hash sets (`flags timeout`):
/// the kernel's interval sets cost time proportional to their size on every insert (44 ms
/// per address beside 100,000 on Linux 6.18, against 0.01 ms in a hash set). Ranges live
/// in interval sets.
pub const ELEMENT_SETS: &[SetDef] = &[
    def("block4", true, false),
    def("block6", false, false),
    def("blocknet4", true, true),
    def("blocknet6", false, true),
    def("allow4", true, false),
    def("allow6", false, false),
    def("allownet4", true, true),
    def("allownet6", false, true),
];

/// Sets filled from the settings by the script itself.
pub const SETTINGS_SETS: &[(&str, bool)] = &[
    ("infra4", true),
    ("infra6", false),
    ("dosx4", true),
    ("dosx6", false),
];

/// Dynamic sets of the rate meters and the connection cap.
const METER_SETS: &[(&str, &str)] = &[
    (
        "syn4",
        "type ipv4_addr; size 65535; flags dynamic, timeout; timeout 60s;",
    ),
    (
        "syn6",
        "type ipv6_addr; size 65535; flags dynamic, timeout; timeout 60s;",
    ),
    (
        "new4",
        "type ipv4_addr; size 65535; flags dynamic, timeout; timeout 60s;",
    ),
    (
        "new6",
        "type ipv6_addr; size 65535; flags dynamic, timeout; timeout 60s;",
    ),
    ("conn4", "type ipv4_addr; size 65535; flags dynamic;"),
];

/// Every set name the table must hold.
pub fn all_set_names() -> Vec<&'static str> {
    ELEMENT_SETS
        .iter()
        .map(|d| d.name)
        .chain(SETTINGS_SETS.iter().map(|(n, _)| *n))
        .chain(METER_SETS.iter().map(|(n, _)| *n))
        .collect()
}

fn set_type(v4: bool) -> &'static str {
    if v4 {
        "ipv4_addr"
    } else {
        "ipv6_addr"
    }
}

fn ports(list: &[PortRange]) -> String {
    list.iter()
        .map(|p| p.to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

/// Drops entries contained in another one (an interval set refuses overlaps).
fn disjoint(list: &[Net], v4: bool) -> Vec<Net> {
    let mut l: Vec<Net> = list.iter().copied().filter(|n| n.is_v4() == v4).collect();
    l.sort_by_key(|n| (n.prefix(), *n));
    let mut out: Vec<Net> = Vec::new();
    for n in l {
        if !out.iter().any(|o| o.contains(&n)) {
            out.push(n);
        }
    }
    out.sort();
    out
}

/// The rule filling each meter set in use, by set name (a set no rule uses is absent).
pub type Meters = BTreeMap<&'static str, String>;

/// The rendered structure, the number of rules it puts in `input` (for the probe) and the
/// meter rules it installs (for the next render).
pub struct Structure {
    pub script: String,
    pub input_rules: usize,
    pub meters: Meters,
}

/// `tcp dport` operand: one port bare, several as an anonymous set.
fn dports(list: &[u16]) -> String {
    match list {
        [one] => one.to_string(),
        _ => format!(
            "{{ {} }}",
            list.iter()
                .map(|p| p.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

/// Renders the structure for `s`. `extra_tcp_in` are ports opened in `full` mode ahead of
/// the meters (the daemon's own HTTPS port). `rebuild` deletes the table first (recovery
/// when a set definition no longer matches); the element sets then start empty. `applied`
/// are the meter rules the kernel holds (`None`: unknown, every meter set starts empty).
pub fn render(
    s: &FirewallConfig,
    extra_tcp_in: &[u16],
    rebuild: bool,
    applied: Option<&Meters>,
) -> Structure {
    let t = format!("inet {}", super::TABLE);
    let mut o = String::with_capacity(4096);
    let full = s.mode == Mode::Full;
    if rebuild {
        let _ = writeln!(o, "add table {t}\ndelete table {t}");
    }
    let _ = writeln!(o, "add table {t}");
    for d in ELEMENT_SETS {
        let flags = if d.interval {
            "interval, timeout"
        } else {
            "timeout"
        };
        let _ = writeln!(
            o,
            "add set {t} {} {{ type {}; flags {flags}; }}",
            d.name,
            set_type(d.v4)
        );
    }
    for (name, v4) in SETTINGS_SETS {
        let _ = writeln!(
            o,
            "add set {t} {name} {{ type {}; flags interval, timeout; }}",
            set_type(*v4)
        );
    }
    for (name, def) in METER_SETS {
        let _ = writeln!(o, "add set {t} {name} {{ {def} }}");
    }
    let policy = if full { "drop" } else { "accept" };
    let _ = writeln!(
        o,
        "add chain {t} input {{ type filter hook input priority {PRIORITY}; policy {policy}; }}"
    );
    let _ = writeln!(
        o,
        "add chain {t} output {{ type filter hook output priority {PRIORITY}; policy accept; }}"
    );
    let _ = writeln!(o, "add chain {t} dos");
    for c in ["input", "output", "dos"] {
        let _ = writeln!(o, "flush chain {t} {c}");
    }
    for (name, v4) in SETTINGS_SETS {
        let list = if name.starts_with("infra") {
            &s.infra_ips
        } else {
            &s.dos_exempt_ranges
        };
        let elems = disjoint(list, *v4);
        let _ = writeln!(o, "delete set {t} {name}");
        if elems.is_empty() {
            let _ = writeln!(
                o,
                "add set {t} {name} {{ type {}; flags interval, timeout; }}",
                set_type(*v4)
            );
        } else {
            let list = elems
                .iter()
                .map(|n| n.to_string())
                .collect::<Vec<_>>()
                .join(", ");
            let _ = writeln!(
                o,
                "add set {t} {name} {{ type {}; flags interval, timeout; elements = {{ {list} }}; }}",
                set_type(*v4)
            );
        }
    }
    let mut input = Vec::new();
    if full {
        input.push("iif lo accept".to_string());
    }
    input.extend(
        [
            "ip saddr @infra4 accept",
            "ip6 saddr @infra6 accept",
            "ip saddr @block4 counter drop",
            "ip6 saddr @block6 counter drop",
            "ip saddr @blocknet4 counter drop",
            "ip6 saddr @blocknet6 counter drop",
            "ip saddr @allow4 accept",
            "ip6 saddr @allow6 accept",
            "ip saddr @allownet4 accept",
            "ip6 saddr @allownet6 accept",
        ]
        .map(String::from),
    );
    let mut dos = Vec::new();
    let mut meters = Meters::new();
    let mut output = Vec::new();
    if full {
        input.extend(
            [
                "ct state established,related accept",
                "ct state invalid drop",
                "icmp type { echo-reply, destination-unreachable, time-exceeded, parameter-problem } accept",
                "icmp type echo-request limit rate 20/second burst 50 packets accept",
                "icmpv6 type { echo-reply, destination-unreachable, packet-too-big, time-exceeded, parameter-problem, nd-router-solicit, nd-router-advert, nd-neighbor-solicit, nd-neighbor-advert, mld-listener-query, mld-listener-report, mld2-listener-report } accept",
                "icmpv6 type echo-request limit rate 20/second burst 50 packets accept",
            ]
            .map(String::from),
        );
        let mask = "and ffff:ffff:ffff:ffff::";
        if s.syn_flood_rate > 0 {
            let (r, b) = (s.syn_flood_rate, s.syn_flood_burst);
            meters.insert("syn4", format!("tcp flags & (syn | ack) == syn add @syn4 {{ ip saddr limit rate over {r}/second burst {b} packets }} counter drop"));
            meters.insert("syn6", format!("tcp flags & (syn | ack) == syn add @syn6 {{ ip6 saddr {mask} limit rate over {r}/second burst {b} packets }} counter drop"));
        }
        if s.conn_rate > 0 {
            let (r, b) = (s.conn_rate, s.conn_rate_burst);
            meters.insert(
                "new4",
                format!(
                    "add @new4 {{ ip saddr limit rate over {r}/second burst {b} packets }} counter drop"
                ),
            );
            meters.insert("new6", format!("add @new6 {{ ip6 saddr {mask} limit rate over {r}/second burst {b} packets }} counter drop"));
        }
        if s.conn_limit > 0 {
            meters.insert(
                "conn4",
                format!(
                    "meta l4proto tcp add @conn4 {{ ip saddr ct count over {} }} counter drop",
                    s.conn_limit
                ),
            );
        }
        // In the order of METER_SETS: SYN rate, new-connection rate, connection cap.
        for (name, _) in METER_SETS {
            if let Some(r) = meters.get(name) {
                dos.push(r.clone());
            }
        }
        // The daemon's own port first: the meters below never throttle the operator's API
        // connections (blocked addresses were dropped above all the same).
        let mut own: Vec<u16> = extra_tcp_in.to_vec();
        own.sort_unstable();
        own.dedup();
        if !own.is_empty() {
            input.push(format!("tcp dport {} accept", dports(&own)));
        }
        if !dos.is_empty() {
            dos.insert(0, "ip6 saddr @dosx6 return".into());
            dos.insert(0, "ip saddr @dosx4 return".into());
            input.push("ct state new jump dos".into());
        }
        if !s.tcp_in.is_empty() {
            input.push(format!("tcp dport {{ {} }} accept", ports(&s.tcp_in)));
        }
        if !s.udp_in.is_empty() {
            input.push(format!("udp dport {{ {} }} accept", ports(&s.udp_in)));
        }
        if !s.tcp_out.is_empty() {
            output.extend(
                [
                    "oif lo accept",
                    "ct state established,related accept",
                    "ip daddr @infra4 accept",
                    "ip6 daddr @infra6 accept",
                ]
                .map(String::from),
            );
            output.push(format!("tcp dport {{ {} }} accept", ports(&s.tcp_out)));
            output.push("meta l4proto tcp ct state new counter drop".into());
        }
    }
    // Meter sets whose rule changed start empty (the chains referring to them were
    // flushed above): their elements carry the limits of the rule that made them.
    for (name, def) in METER_SETS {
        if applied.is_none_or(|a| a.get(name) != meters.get(name)) {
            let _ = writeln!(o, "delete set {t} {name}");
            let _ = writeln!(o, "add set {t} {name} {{ {def} }}");
        }
    }
    for r in &dos {
        let _ = writeln!(o, "add rule {t} dos {r}");
    }
    for r in &input {
        let _ = writeln!(o, "add rule {t} input {r}");
    }
    for r in &output {
        let _ = writeln!(o, "add rule {t} output {r}");
    }
    if output.is_empty() {
        let _ = writeln!(o, "delete chain {t} output");
    }
    if dos.is_empty() {
        let _ = writeln!(o, "delete chain {t} dos");
    }
    Structure {
        script: o,
        input_rules: input.len(),
        meters,
    }
}

/// Why the nft program failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NftError {
    Spawn(String),
    Timeout,
    Failed { code: Option<i32>, stderr: String },
}

impl std::fmt::Display for NftError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NftError::Spawn(e) => write!(f, "cannot run nft: {e}"),
            NftError::Timeout => f.write_str("nft did not finish within 60 s"),
            NftError::Failed { code, stderr } => write!(
                f,
                "nft failed (exit {}): {}",
                code.map_or("signal".to_string(), |c| c.to_string()),
                crate::text::for_log(stderr.trim(), 600)
            ),
        }
    }
}

impl std::error::Error for NftError {}

/// Finds the nft program: an absolute path as given, else `name` in PATH, /usr/sbin, /sbin,
/// /usr/local/sbin.
pub fn locate(name: &str) -> Option<PathBuf> {
    if name.starts_with('/') {
        return Path::new(name).is_file().then(|| PathBuf::from(name));
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(["/usr/sbin", "/sbin", "/usr/local/sbin"].map(PathBuf::from))
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

/// Runs `nft -f -` with `script` on standard input (one transaction).
pub fn run(nft: &Path, script: &str) -> Result<(), NftError> {
    let mut child = Command::new(nft)
        .args(["-f", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| NftError::Spawn(e.to_string()))?;
    let mut stderr = child.stderr.take();
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        if let Some(e) = stderr.as_mut() {
            let _ = e.take(64 * 1024).read_to_string(&mut s);
        }
        s
    });
    if let Some(mut stdin) = child.stdin.take() {
        let _ = stdin.write_all(script.as_bytes());
    }
    let deadline = Instant::now() + Duration::from_secs(60);
    let status = loop {
        match child.try_wait() {
            Ok(Some(st)) => break st,
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(2)),
            Ok(None) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(NftError::Timeout);
            }
            Err(e) => return Err(NftError::Spawn(e.to_string())),
        }
    };
    let err = reader.join().unwrap_or_default();
    if status.success() {
        Ok(())
    } else {
        Err(NftError::Failed {
            code: status.code(),
            stderr: err,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocklist_mode_has_only_the_sets_in_precedence_order() {
        let mut s = FirewallConfig {
            infra_ips: vec![
                Net::parse("192.0.2.0/24").unwrap(),
                Net::parse("192.0.2.10").unwrap(),
                Net::parse("2001:db8::1").unwrap(),
            ],
            ..FirewallConfig::default()
        };
        let st = render(&s, &[9443], false, None);
        let o = &st.script;
        assert!(o.contains("policy accept;"));
        assert!(!o.contains("tcp dport"), "{o}");
        assert!(o.contains("delete chain inet svc output"));
        assert!(o.contains("delete chain inet svc dos"));
        // 192.0.2.10 lies in 192.0.2.0/24: only the range is an element.
        assert!(o.contains("elements = { 192.0.2.0/24 }"), "{o}");
        assert!(o.contains("elements = { 2001:db8::1 }"), "{o}");
        let infra = o.find("input ip saddr @infra4 accept").unwrap();
        let block = o.find("input ip saddr @block4 counter drop").unwrap();
        let net = o.find("input ip saddr @blocknet4 counter drop").unwrap();
        let allow = o.find("input ip saddr @allow4 accept").unwrap();
        assert!(infra < block && block < net && net < allow);
        assert_eq!(st.input_rules, 10);
        assert!(o.contains("add set inet svc block4 { type ipv4_addr; flags timeout; }"));
        assert!(
            o.contains("add set inet svc blocknet6 { type ipv6_addr; flags interval, timeout; }")
        );
        for line in o.lines() {
            assert!(
                line.contains(" inet svc"),
                "every statement names the table: {line}"
            );
            assert!(!line.contains("ruleset"));
        }
        s.mode = Mode::Full;
        s.tcp_in = vec![PortRange { lo: 22, hi: 22 }];
        s.udp_in = vec![];
        s.dos_exempt_ranges = vec![Net::parse("203.0.113.0/24").unwrap()];
        let st = render(&s, &[9443], true, None);
        let o = &st.script;
        assert!(o.starts_with("add table inet svc\ndelete table inet svc\n"));
        assert!(o.contains("policy drop;"));
        assert!(o.contains("input tcp dport { 22 } accept"), "{o}");
        assert!(!o.contains("udp dport"));
        assert!(o.contains("input iif lo accept"));
        assert!(o.contains("ip6 saddr and ffff:ffff:ffff:ffff:: limit rate over 100/second"));
        assert!(o.contains("add @conn4 { ip saddr ct count over 300 }"));
        assert!(o.contains("dos ip saddr @dosx4 return"));
        assert!(o.contains("output tcp dport {"));
        assert!(!o.contains("delete chain inet svc output"));
        let lo = o.find("input iif lo accept").unwrap();
        let allow = o.find("input ip6 saddr @allownet6 accept").unwrap();
        let est = o.find("input ct state established").unwrap();
        let jump = o.find("input ct state new jump dos").unwrap();
        let own = o.find("input tcp dport 9443 accept").unwrap();
        let tcp = o.find("input tcp dport { 22 }").unwrap();
        assert!(lo < allow && allow < est && est < own && own < jump && jump < tcp);
    }

    fn recreated(o: &str) -> Vec<&str> {
        ["syn4", "syn6", "new4", "new6", "conn4"]
            .into_iter()
            .filter(|n| o.contains(&format!("delete set inet svc {n}\n")))
            .collect()
    }

    /// Issue 23 item 6: a meter set keeps the state made under its rule (`ct count over 1`
    /// stays 1), so it starts empty whenever its rule changes, a revert included.
    #[test]
    fn meter_sets_start_empty_when_their_rule_changes() {
        let mut s = FirewallConfig {
            mode: Mode::Full,
            conn_limit: 1,
            ..FirewallConfig::default()
        };
        let first = render(&s, &[], false, None);
        assert_eq!(
            recreated(&first.script),
            ["syn4", "syn6", "new4", "new6", "conn4"]
        );
        // The same settings again: every meter keeps its state.
        let again = render(&s, &[], false, Some(&first.meters));
        assert!(recreated(&again.script).is_empty(), "{}", again.script);
        // Back to blocklist mode (the revert): the meters leave the rules and are emptied.
        s.mode = Mode::Blocklist;
        let off = render(&s, &[], false, Some(&first.meters));
        assert!(off.meters.is_empty());
        assert_eq!(
            recreated(&off.script),
            ["syn4", "syn6", "new4", "new6", "conn4"]
        );
        // Full mode with the default cap: only the cap's set changes.
        s.mode = Mode::Full;
        s.conn_limit = FirewallConfig::default().conn_limit;
        let capped = render(&s, &[], false, Some(&first.meters));
        assert_eq!(recreated(&capped.script), ["conn4"]);
        let del = capped.script.find("delete set inet svc conn4").unwrap();
        let flush = capped.script.find("flush chain inet svc dos").unwrap();
        let rule = capped
            .script
            .find("add rule inet svc dos meta l4proto tcp add @conn4")
            .unwrap();
        assert!(flush < del && del < rule, "{}", capped.script);
    }

    #[test]
    fn meters_off_drop_the_dos_chain() {
        let s = FirewallConfig {
            mode: Mode::Full,
            syn_flood_rate: 0,
            conn_rate: 0,
            conn_limit: 0,
            tcp_out: vec![],
            ..FirewallConfig::default()
        };
        let o = render(&s, &[], false, None).script;
        assert!(o.contains("delete chain inet svc dos"));
        assert!(!o.contains("jump dos"));
        assert!(o.contains("delete chain inet svc output"));
    }
}
