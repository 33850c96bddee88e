//! `[firewall]`: the nftables engine (see `firewall`).
//!
//! The same reader validates the configuration file and a tentative settings change
//! (`POST /api/v1/settings/firewall/tentative-apply`): a change is applied to the effective
//! settings as a TOML table and read again, so both report errors the same way, naming
//! `firewall.<key>`.

use toml::value::{Array, Table};
use toml::Value;

use super::reader::{Errors, TableReader};
use crate::net::cidr::{Net, PortRange};

/// `firewall.mode`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Only the drop and allow sets, in an input chain before the distribution's filter.
    Blocklist,
    /// Default-drop input with port lists, connection tracking, ICMP essentials and meters.
    Full,
}

impl Mode {
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Blocklist => "blocklist",
            Mode::Full => "full",
        }
    }
}

/// `[firewall]`, validated.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FirewallConfig {
    /// `firewall.enabled`: false leaves nftables alone (the engine is absent).
    pub enabled: bool,
    pub mode: Mode,
    /// Ports open to new inbound TCP connections in `full` mode.
    pub tcp_in: Vec<PortRange>,
    /// Ports open to inbound UDP in `full` mode.
    pub udp_in: Vec<PortRange>,
    /// Ports new outbound TCP connections may use in `full` mode; empty leaves outbound TCP
    /// unrestricted.
    pub tcp_out: Vec<PortRange>,
    /// Infrastructure addresses: accepted first, never blocked.
    pub infra_ips: Vec<Net>,
    /// Ranges the rate meters and the connection cap skip (`full` mode).
    pub dos_exempt_ranges: Vec<Net>,
    /// New TCP SYNs per second per source (IPv6 per /64) before drops; 0 turns the meter off.
    pub syn_flood_rate: u32,
    pub syn_flood_burst: u32,
    /// New connections per second per source (IPv6 per /64); 0 turns the meter off.
    pub conn_rate: u32,
    pub conn_rate_burst: u32,
    /// Concurrent TCP connections per IPv4 source; 0 turns the cap off.
    pub conn_limit: u32,
    /// Address and subnet blocks kept at most (dry-run records are bounded the same way).
    pub max_blocks: usize,
    /// Allow entries kept at most.
    pub max_allows: usize,
    /// Seconds between checks that the table is still in place.
    pub check_interval_seconds: u64,
    /// The nft program (a name looked up in PATH, /usr/sbin and /sbin, or an absolute path).
    pub nft_path: String,
}

impl Default for FirewallConfig {
    /// The defaults of `config::keys::KEYS`.
    fn default() -> Self {
        read_table(
            &mut TableReader::new(None, "firewall"),
            &mut Errors::default(),
        )
    }
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::String(_) => "a string",
        Value::Integer(_) => "an integer",
        Value::Float(_) => "a float",
        Value::Boolean(_) => "a boolean",
        Value::Datetime(_) => "a datetime",
        Value::Array(_) => "an array",
        Value::Table(_) => "a table",
    }
}

pub(super) fn port_list(
    t: &mut TableReader<'_>,
    key: &'static str,
    errs: &mut Errors,
) -> Vec<PortRange> {
    let name = t.key(key);
    // Absent: the table's default, read the same way as a configured value.
    match t.raw_or_default(key).as_ref() {
        None => Vec::new(),
        Some(Value::Array(items)) => {
            let mut out = Vec::new();
            for (i, item) in items.iter().enumerate() {
                let parsed = match item {
                    Value::Integer(p) if (1..=65_535).contains(p) => Ok(PortRange {
                        lo: *p as u16,
                        hi: *p as u16,
                    }),
                    Value::Integer(p) => Err(format!("{p} is not a port from 1 to 65535")),
                    Value::String(s) => PortRange::parse(s).map_err(|e| e.to_string()),
                    v => Err(format!(
                        "must be a port or a \"low-high\" range, found {}",
                        type_name(v)
                    )),
                };
                match parsed {
                    Ok(r) => out.push(r),
                    Err(m) => errs.push(format!("{name}[{i}]"), m),
                }
            }
            out.sort();
            out.dedup();
            out
        }
        Some(v) => {
            errs.push(
                name,
                format!("must be an array of ports, found {}", type_name(v)),
            );
            Vec::new()
        }
    }
}

fn net_list(t: &mut TableReader<'_>, key: &'static str, errs: &mut Errors) -> Vec<Net> {
    let name = t.key(key);
    let mut out = Vec::new();
    for (i, s) in t.string_list(key, errs).into_iter().enumerate() {
        match Net::parse(&s) {
            Ok(n) if n.is_default_route() => errs.push(
                format!("{name}[{i}]"),
                "must not be a default route (0.0.0.0/0 or ::/0)",
            ),
            Ok(n) => out.push(n),
            Err(e) => errs.push(format!("{name}[{i}]"), e.to_string()),
        }
    }
    out
}

/// Reads the keys of a `[firewall]` table (the caller finishes the reader).
pub fn read_table(t: &mut TableReader<'_>, errs: &mut Errors) -> FirewallConfig {
    let enabled = t.bool("enabled", errs);
    let mode = match t.string("mode", errs).as_str() {
        "blocklist" => Mode::Blocklist,
        "full" => Mode::Full,
        // `string` refused any other value and gave the default.
        _ => Mode::Blocklist,
    };
    let tcp_in = port_list(t, "tcp_in", errs);
    let udp_in = port_list(t, "udp_in", errs);
    let tcp_out = port_list(t, "tcp_out", errs);
    let infra_ips = net_list(t, "infra_ips", errs);
    let dos_exempt_ranges = net_list(t, "dos_exempt_ranges", errs);
    let syn_flood_rate = t.int("syn_flood_rate", errs) as u32;
    let syn_flood_burst = t.int("syn_flood_burst", errs) as u32;
    let conn_rate = t.int("conn_rate", errs) as u32;
    let conn_rate_burst = t.int("conn_rate_burst", errs) as u32;
    let conn_limit = t.int("conn_limit", errs) as u32;
    let max_blocks = t.int("max_blocks", errs) as usize;
    let max_allows = t.int("max_allows", errs) as usize;
    let check_interval_seconds = t.int("check_interval_seconds", errs) as u64;
    let nft_path = t.string("nft_path", errs);
    if nft_path.is_empty() || (nft_path.contains('/') && !nft_path.starts_with('/')) {
        errs.push(
            t.key("nft_path"),
            "must be a program name or an absolute path",
        );
    }
    FirewallConfig {
        enabled,
        mode,
        tcp_in,
        udp_in,
        tcp_out,
        infra_ips,
        dos_exempt_ranges,
        syn_flood_rate,
        syn_flood_burst,
        conn_rate,
        conn_rate_burst,
        conn_limit,
        max_blocks,
        max_allows,
        check_interval_seconds,
        nft_path,
    }
}

/// Reads `[firewall]` from the root table.
pub(super) fn read(root: &mut TableReader<'_>, errs: &mut Errors) -> FirewallConfig {
    let mut t = root.table("firewall", errs);
    let c = read_table(&mut t, errs);
    t.finish(errs);
    c
}

fn port_values(list: &[PortRange]) -> Value {
    Value::Array(
        list.iter()
            .map(|r| {
                if r.lo == r.hi {
                    Value::Integer(r.lo as i64)
                } else {
                    Value::String(r.to_string())
                }
            })
            .collect::<Array>(),
    )
}

fn net_values(list: &[Net]) -> Value {
    Value::Array(list.iter().map(|n| Value::String(n.to_string())).collect())
}

impl FirewallConfig {
    /// The settings as a `[firewall]` table (every key), the inverse of [`read_table`].
    pub fn to_toml(&self) -> Table {
        let mut t = Table::new();
        let int = |v: u64| Value::Integer(v.min(i64::MAX as u64) as i64);
        t.insert("enabled".into(), Value::Boolean(self.enabled));
        t.insert("mode".into(), Value::String(self.mode.as_str().into()));
        t.insert("tcp_in".into(), port_values(&self.tcp_in));
        t.insert("udp_in".into(), port_values(&self.udp_in));
        t.insert("tcp_out".into(), port_values(&self.tcp_out));
        t.insert("infra_ips".into(), net_values(&self.infra_ips));
        t.insert(
            "dos_exempt_ranges".into(),
            net_values(&self.dos_exempt_ranges),
        );
        t.insert("syn_flood_rate".into(), int(self.syn_flood_rate as u64));
        t.insert("syn_flood_burst".into(), int(self.syn_flood_burst as u64));
        t.insert("conn_rate".into(), int(self.conn_rate as u64));
        t.insert("conn_rate_burst".into(), int(self.conn_rate_burst as u64));
        t.insert("conn_limit".into(), int(self.conn_limit as u64));
        t.insert("max_blocks".into(), int(self.max_blocks as u64));
        t.insert("max_allows".into(), int(self.max_allows as u64));
        t.insert(
            "check_interval_seconds".into(),
            int(self.check_interval_seconds),
        );
        t.insert("nft_path".into(), Value::String(self.nft_path.clone()));
        t
    }

    /// The run-time settings as JSON (the [`Class::Tentative`](super::keys::Class) keys),
    /// for status answers.
    pub fn runtime_json(&self) -> serde_json::Value {
        let t = self.to_toml();
        let mut m = serde_json::Map::new();
        for k in super::keys::firewall_runtime() {
            if let Some(v) = t.get(k) {
                m.insert(
                    k.to_string(),
                    serde_json::to_value(v).unwrap_or(serde_json::Value::Null),
                );
            }
        }
        serde_json::Value::Object(m)
    }

    /// These settings with `changes` (a JSON object of run-time keys; `null` removes an
    /// override and so returns the key to `file`'s value) applied, validated like the file.
    /// Errors name `firewall.<key>`.
    pub fn with_changes(
        &self,
        file: &FirewallConfig,
        changes: &serde_json::Map<String, serde_json::Value>,
    ) -> Result<FirewallConfig, Vec<super::ConfigError>> {
        let mut errs = Errors::default();
        let mut table = self.to_toml();
        let base = file.to_toml();
        for (k, v) in changes {
            if !super::keys::firewall_runtime().any(|r| r == k) {
                let msg = if base.contains_key(k) {
                    "cannot be changed while the daemon runs; edit the configuration file"
                } else {
                    "unknown key"
                };
                errs.push(format!("firewall.{k}"), msg);
                continue;
            }
            if v.is_null() {
                if let Some(b) = base.get(k) {
                    table.insert(k.clone(), b.clone());
                }
                continue;
            }
            match Value::try_from(v) {
                Ok(tv) => {
                    table.insert(k.clone(), tv);
                }
                Err(_) => errs.push(format!("firewall.{k}"), "is not a valid value"),
            }
        }
        let mut r = TableReader::new(Some(&table), "firewall");
        let out = read_table(&mut r, &mut errs);
        r.finish(&mut errs);
        if errs.0.is_empty() {
            Ok(out)
        } else {
            Err(errs.0)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn check(text: &str) -> Result<FirewallConfig, Vec<String>> {
        let t = super::super::parse_str(text).map_err(|e| vec![e.to_string()])?;
        super::super::from_table(&t, vec![])
            .map(|c| c.firewall)
            .map_err(|es| es.iter().map(|e| e.to_string()).collect())
    }

    #[test]
    fn defaults_and_round_trip() {
        let c = check("").unwrap();
        assert_eq!(c, FirewallConfig::default());
        let c = check(
            "[firewall]\nmode = \"full\"\ntcp_in = [443, 22, \"30000-30010\", 22]\ninfra_ips = [\"192.0.2.10\", \"198.51.100.0/24\"]\n",
        )
        .unwrap();
        assert_eq!(c.mode, Mode::Full);
        assert_eq!(
            c.tcp_in.iter().map(|p| p.to_string()).collect::<Vec<_>>(),
            ["22", "443", "30000-30010"]
        );
        let table = c.to_toml();
        let mut r = TableReader::new(Some(&table), "firewall");
        let mut errs = Errors::default();
        let again = read_table(&mut r, &mut errs);
        r.finish(&mut errs);
        assert!(errs.0.is_empty(), "{:?}", errs.0);
        assert_eq!(again, c);
    }

    #[test]
    fn errors_name_the_key() {
        let e = check(
            "[firewall]\nmode = \"strict\"\ntcp_in = [0, \"x\", true]\ninfra_ips = [\"0.0.0.0/0\", \"nope\"]\nconn_limit = -1\nbogus = 1\n",
        )
        .unwrap_err()
        .join("\n");
        for want in [
            "firewall.mode: must be \"blocklist\" or \"full\"",
            "firewall.tcp_in[0]: 0 is not a port",
            "firewall.tcp_in[1]: \"x\" is not a port",
            "firewall.tcp_in[2]: must be a port or a \"low-high\" range, found a boolean",
            "firewall.infra_ips[0]: must not be a default route",
            "firewall.infra_ips[1]: \"nope\" is not an IP address",
            "firewall.conn_limit: must be between 0 and 1000000",
            "firewall.bogus: unknown key",
        ] {
            assert!(e.contains(want), "missing {want:?} in\n{e}");
        }
    }

    #[test]
    fn changes_are_validated_like_the_file() {
        let file = FirewallConfig::default();
        let changes = json!({"tcp_in": [22, 443], "mode": "full"});
        let c = file
            .with_changes(&file, changes.as_object().unwrap())
            .unwrap();
        assert_eq!(c.mode, Mode::Full);
        assert_eq!(c.tcp_in.len(), 2);
        // null returns a key to the file's value.
        let back = c
            .with_changes(&file, json!({"tcp_in": null}).as_object().unwrap())
            .unwrap();
        assert_eq!(back.tcp_in, file.tcp_in);
        assert_eq!(back.mode, Mode::Full);
        let e = file
            .with_changes(
                &file,
                json!({"tcp_in": [70000], "enabled": false, "nope": 1, "infra_ips": "x"})
                    .as_object()
                    .unwrap(),
            )
            .unwrap_err();
        let e: Vec<String> = e.iter().map(|e| e.to_string()).collect();
        let e = e.join("\n");
        assert!(e.contains("firewall.tcp_in[0]: 70000 is not a port"), "{e}");
        assert!(e.contains("firewall.enabled: cannot be changed"), "{e}");
        assert!(e.contains("firewall.nope: unknown key"), "{e}");
        assert!(e.contains("firewall.infra_ips: must be an array"), "{e}");
    }
}
