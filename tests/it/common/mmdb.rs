//! A minimal MaxMind DB (format 2.0) writer for tests: a binary search tree over address
//! bits with 24-bit records, the 16-byte data-section separator, a data section, and the
//! metadata map after `\xAB\xCD\xEFMaxMind.com`.
//!
//! Used by the integration tests (through `common`) and by the unit tests of `src/geoip.rs`
//! (through `#[path]`), so both read files built the same way. Networks must not overlap.

use std::net::IpAddr;

/// A value of the MaxMind DB data format.
#[derive(Clone, Debug)]
pub enum V {
    Str(String),
    U16(u16),
    U32(u32),
    U64(u64),
    Map(Vec<(String, V)>),
    Array(Vec<V>),
}

/// `V::Str` from anything string-like.
pub fn s(text: &str) -> V {
    V::Str(text.to_string())
}

/// `V::Map` from `(key, value)` pairs.
pub fn map(pairs: Vec<(&str, V)>) -> V {
    V::Map(pairs.into_iter().map(|(k, v)| (k.to_string(), v)).collect())
}

/// A GeoIP2-City style record: country ISO code and English names, city English name.
pub fn city_record(iso: &str, country: &str, city: &str) -> V {
    map(vec![
        ("city", map(vec![("names", map(vec![("en", s(city))]))])),
        (
            "country",
            map(vec![
                ("iso_code", s(iso)),
                ("names", map(vec![("en", s(country))])),
            ]),
        ),
    ])
}

/// A GeoLite2-ASN style record.
pub fn asn_record(asn: u32, org: &str) -> V {
    map(vec![
        ("autonomous_system_number", V::U32(asn)),
        ("autonomous_system_organization", s(org)),
    ])
}

fn control(out: &mut Vec<u8>, kind: u8, size: usize) {
    let (bits, extra): (u8, Vec<u8>) = if size < 29 {
        (size as u8, vec![])
    } else if size < 29 + 256 {
        (29, vec![(size - 29) as u8])
    } else if size < 285 + 65_536 {
        let n = size - 285;
        (30, vec![(n >> 8) as u8, n as u8])
    } else {
        let n = size - 65_821;
        (31, vec![(n >> 16) as u8, (n >> 8) as u8, n as u8])
    };
    if kind <= 7 {
        out.push((kind << 5) | bits);
    } else {
        out.push(bits);
        out.push(kind - 7);
    }
    out.extend_from_slice(&extra);
}

fn uint(out: &mut Vec<u8>, kind: u8, v: u64, width: usize) {
    let bytes = v.to_be_bytes();
    let skip = bytes.iter().take_while(|b| **b == 0).count();
    let used = &bytes[skip.max(8 - width)..];
    control(out, kind, used.len());
    out.extend_from_slice(used);
}

/// Appends the encoding of `v`.
pub fn encode(v: &V, out: &mut Vec<u8>) {
    match v {
        V::Str(t) => {
            control(out, 2, t.len());
            out.extend_from_slice(t.as_bytes());
        }
        V::U16(n) => uint(out, 5, u64::from(*n), 2),
        V::U32(n) => uint(out, 6, u64::from(*n), 4),
        V::U64(n) => uint(out, 9, *n, 8),
        V::Map(pairs) => {
            control(out, 7, pairs.len());
            for (k, v) in pairs {
                encode(&V::Str(k.clone()), out);
                encode(v, out);
            }
        }
        V::Array(items) => {
            control(out, 11, items.len());
            for v in items {
                encode(v, out);
            }
        }
    }
}

#[derive(Clone, Copy)]
enum Rec {
    Empty,
    Node(usize),
    Data(usize),
}

fn bits_of(ip: IpAddr, ip_version: u16) -> Vec<bool> {
    let bytes: Vec<u8> = match (ip, ip_version) {
        (IpAddr::V4(a), 4) => a.octets().to_vec(),
        (IpAddr::V4(a), _) => {
            // IPv4 lives at ::a.b.c.d in an IPv6 tree.
            let mut b = vec![0u8; 12];
            b.extend_from_slice(&a.octets());
            b
        }
        (IpAddr::V6(a), _) => a.octets().to_vec(),
    };
    bytes
        .iter()
        .flat_map(|b| (0..8).rev().map(move |i| (b >> i) & 1 == 1))
        .collect()
}

/// Builds a database of `database_type` holding `networks` (address, prefix length, record).
/// For an IPv6 tree (`ip_version` 6) an IPv4 prefix length counts IPv4 bits.
pub fn build(ip_version: u16, database_type: &str, networks: &[(IpAddr, u8, V)]) -> Vec<u8> {
    let mut nodes: Vec<[Rec; 2]> = vec![[Rec::Empty, Rec::Empty]];
    for (i, (ip, prefix, _)) in networks.iter().enumerate() {
        let bits = bits_of(*ip, ip_version);
        let prefix = match (ip, ip_version) {
            (IpAddr::V4(_), 6) => usize::from(*prefix) + 96,
            _ => usize::from(*prefix),
        };
        assert!((1..=bits.len()).contains(&prefix), "bad prefix");
        let mut node = 0usize;
        for (depth, bit) in bits.iter().take(prefix).enumerate() {
            let side = usize::from(*bit);
            if depth + 1 == prefix {
                nodes[node][side] = Rec::Data(i);
                break;
            }
            node = match nodes[node][side] {
                Rec::Node(n) => n,
                Rec::Empty => {
                    nodes.push([Rec::Empty, Rec::Empty]);
                    let n = nodes.len() - 1;
                    nodes[node][side] = Rec::Node(n);
                    n
                }
                Rec::Data(_) => panic!("overlapping networks"),
            };
        }
    }
    let mut data = Vec::new();
    let mut offsets = Vec::new();
    for (_, _, v) in networks {
        offsets.push(data.len());
        encode(v, &mut data);
    }
    let count = nodes.len();
    let mut out = Vec::new();
    for n in &nodes {
        for r in n {
            let v = match *r {
                Rec::Empty => count,
                Rec::Node(i) => i,
                Rec::Data(i) => count + 16 + offsets[i],
            };
            assert!(v < (1 << 24), "database too large for 24-bit records");
            out.extend_from_slice(&[(v >> 16) as u8, (v >> 8) as u8, v as u8]);
        }
    }
    out.extend_from_slice(&[0u8; 16]);
    out.extend_from_slice(&data);
    out.extend_from_slice(b"\xAB\xCD\xEFMaxMind.com");
    let meta = map(vec![
        ("binary_format_major_version", V::U16(2)),
        ("binary_format_minor_version", V::U16(0)),
        ("build_epoch", V::U64(1_767_225_600)),
        ("database_type", s(database_type)),
        ("description", map(vec![("en", s("svc test database"))])),
        ("ip_version", V::U16(ip_version)),
        ("languages", V::Array(vec![s("en")])),
        ("node_count", V::U32(count as u32)),
        ("record_size", V::U16(24)),
    ]);
    encode(&meta, &mut out);
    out
}
