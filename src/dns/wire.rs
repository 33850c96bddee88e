//! DNS wire format (RFC 1035): building one query and reading the answer to it.
//!
//! Guarantees: [`parse_response`] never panics and never reads outside the packet, whatever
//! the bytes; a response is accepted only when it is a response (QR set, opcode 0) carrying
//! the query's ID and exactly the query's question (name compared case-insensitively, type
//! and class equal). Compression pointers are followed with a jump limit and must point
//! backwards, so pointer loops end. Names longer than 255 bytes or with labels over 63 are
//! rejected. Only answer records whose owner is the question name, or a name the answer's
//! CNAME chain leads to (at most 8 links), are returned; everything else in the packet is
//! ignored, so an unrelated record smuggled into a response is never believed.

use std::fmt;
use std::net::{Ipv4Addr, Ipv6Addr};

/// Record types the stub resolver asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Qtype {
    A,
    Aaaa,
    Ptr,
}

impl Qtype {
    pub fn code(self) -> u16 {
        match self {
            Qtype::A => 1,
            Qtype::Ptr => 12,
            Qtype::Aaaa => 28,
        }
    }
}

const CLASS_IN: u16 = 1;
const TYPE_CNAME: u16 = 5;
const TYPE_OPT: u16 = 41;
/// The UDP payload size announced in EDNS(0): the size the DNS flag day 2020 recommends.
pub const EDNS_PAYLOAD: u16 = 1232;
const MAX_NAME: usize = 255;
const MAX_JUMPS: usize = 32;
const MAX_CNAME_LINKS: usize = 8;
/// At most this many records of the answer section are read; the rest is ignored.
const MAX_ANSWERS: usize = 64;

/// Why a packet was not accepted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WireError {
    /// The name to query is not a valid domain name (empty label, label over 63 bytes,
    /// name over 255 bytes).
    BadName,
    /// The packet ended before a field it announced.
    Short,
    /// Not a response to our query (QR clear, wrong ID, other opcode).
    NotOurs,
    /// The question section is not exactly our question.
    QuestionMismatch,
    /// A name in the packet is malformed (bad label type, pointer forwards or looping,
    /// over 255 bytes).
    BadPacketName,
}

impl fmt::Display for WireError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            WireError::BadName => "not a valid domain name",
            WireError::Short => "packet shorter than its header says",
            WireError::NotOurs => "not a response to this query",
            WireError::QuestionMismatch => "question section differs from the query",
            WireError::BadPacketName => "malformed name in packet",
        })
    }
}

impl std::error::Error for WireError {}

/// One record of the answer section that matters to the caller.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Rdata {
    A(Ipv4Addr),
    Aaaa(Ipv6Addr),
    /// A PTR target: lower-case, no trailing dot.
    Ptr(String),
}

/// A parsed response.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Response {
    /// RCODE (0 no error, 2 server failure, 3 NXDOMAIN, 5 refused, ...).
    pub rcode: u8,
    /// TC: the server cut the answer to fit UDP.
    pub truncated: bool,
    /// Records of the asked type owned by the question name or its CNAME chain.
    pub answers: Vec<Rdata>,
    /// Records skipped because their data was malformed or a name had characters outside
    /// letters, digits, `-` and `_`.
    pub skipped: usize,
}

/// Encodes `name` (dotted, an optional trailing dot) as wire labels.
fn encode_name(name: &str, out: &mut Vec<u8>) -> Result<(), WireError> {
    let name = name.strip_suffix('.').unwrap_or(name);
    if name.is_empty() || name.len() > MAX_NAME - 2 {
        return Err(WireError::BadName);
    }
    for label in name.split('.') {
        let bytes = label.as_bytes();
        if bytes.is_empty() || bytes.len() > 63 {
            return Err(WireError::BadName);
        }
        out.push(bytes.len() as u8);
        out.extend_from_slice(bytes);
    }
    out.push(0);
    Ok(())
}

/// Builds a recursive query for `name`/`qtype` with ID `id` and an EDNS(0) OPT record.
pub fn build_query(id: u16, name: &str, qtype: Qtype) -> Result<Vec<u8>, WireError> {
    let mut out = Vec::with_capacity(32 + name.len());
    out.extend_from_slice(&id.to_be_bytes());
    out.extend_from_slice(&[0x01, 0x00]); // RD
    out.extend_from_slice(&[0, 1, 0, 0, 0, 0, 0, 1]); // QD 1, AN 0, NS 0, AR 1
    encode_name(name, &mut out)?;
    out.extend_from_slice(&qtype.code().to_be_bytes());
    out.extend_from_slice(&CLASS_IN.to_be_bytes());
    // OPT: root owner, type 41, class = payload size, TTL 0, no options.
    out.push(0);
    out.extend_from_slice(&TYPE_OPT.to_be_bytes());
    out.extend_from_slice(&EDNS_PAYLOAD.to_be_bytes());
    out.extend_from_slice(&[0, 0, 0, 0, 0, 0]);
    Ok(out)
}

/// The reverse-lookup name of an address (`4.3.2.1.in-addr.arpa`, nibbles for IPv6).
pub fn reverse_name(ip: std::net::IpAddr) -> String {
    match ip {
        std::net::IpAddr::V4(v4) => {
            let o = v4.octets();
            format!("{}.{}.{}.{}.in-addr.arpa", o[3], o[2], o[1], o[0])
        }
        std::net::IpAddr::V6(v6) => {
            let mut s = String::with_capacity(72);
            for b in v6.octets().iter().rev() {
                for nib in [b & 0xf, b >> 4] {
                    s.push(char::from_digit(u32::from(nib), 16).unwrap_or('0'));
                    s.push('.');
                }
            }
            s.push_str("ip6.arpa");
            s
        }
    }
}

struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn u8(&mut self) -> Result<u8, WireError> {
        let b = *self.buf.get(self.pos).ok_or(WireError::Short)?;
        self.pos += 1;
        Ok(b)
    }
    fn u16(&mut self) -> Result<u16, WireError> {
        Ok(u16::from_be_bytes([self.u8()?, self.u8()?]))
    }
    fn take(&mut self, n: usize) -> Result<&'a [u8], WireError> {
        let end = self.pos.checked_add(n).ok_or(WireError::Short)?;
        let s = self.buf.get(self.pos..end).ok_or(WireError::Short)?;
        self.pos = end;
        Ok(s)
    }
}

/// A decoded name: lower-cased, dotted, no trailing dot (the root is ""); `clean` is false
/// when a label holds a byte outside letters, digits, `-` and `_` (such bytes are kept as
/// `?` so the name can be compared but never matches a real suffix).
struct Name {
    text: String,
    clean: bool,
}

/// Reads a possibly compressed name starting at `r.pos`; leaves `r.pos` after the name's
/// in-place bytes.
fn read_name(r: &mut Reader<'_>) -> Result<Name, WireError> {
    let buf = r.buf;
    let mut pos = r.pos;
    let mut jumped = false;
    let mut jumps = 0;
    let mut text = String::new();
    let mut wire_len = 1usize;
    let mut clean = true;
    loop {
        let len = *buf.get(pos).ok_or(WireError::Short)?;
        match len & 0xc0 {
            0x00 => {
                if len == 0 {
                    if !jumped {
                        r.pos = pos + 1;
                    }
                    return Ok(Name { text, clean });
                }
                let start = pos + 1;
                let end = start + usize::from(len);
                let label = buf.get(start..end).ok_or(WireError::Short)?;
                wire_len += 1 + label.len();
                if wire_len > MAX_NAME {
                    return Err(WireError::BadPacketName);
                }
                if !text.is_empty() {
                    text.push('.');
                }
                for &b in label {
                    if b.is_ascii_alphanumeric() || b == b'-' || b == b'_' {
                        text.push(char::from(b.to_ascii_lowercase()));
                    } else {
                        clean = false;
                        text.push('?');
                    }
                }
                pos = end;
            }
            0xc0 => {
                let lo = *buf.get(pos + 1).ok_or(WireError::Short)?;
                let target = (usize::from(len & 0x3f) << 8) | usize::from(lo);
                if !jumped {
                    r.pos = pos + 2;
                }
                // A pointer must point backwards: to before the place it was found.
                if target >= pos || jumps >= MAX_JUMPS {
                    return Err(WireError::BadPacketName);
                }
                jumps += 1;
                jumped = true;
                pos = target;
            }
            _ => return Err(WireError::BadPacketName),
        }
    }
}

/// Parses `packet` as the response to the query built with `id`, `name`, `qtype`.
pub fn parse_response(
    packet: &[u8],
    id: u16,
    name: &str,
    qtype: Qtype,
) -> Result<Response, WireError> {
    let mut r = Reader {
        buf: packet,
        pos: 0,
    };
    let rid = r.u16()?;
    let flags = r.u16()?;
    let qd = r.u16()?;
    let an = r.u16()?;
    let _ns = r.u16()?;
    let _ar = r.u16()?;
    if rid != id || flags & 0x8000 == 0 || (flags >> 11) & 0xf != 0 {
        return Err(WireError::NotOurs);
    }
    let rcode = (flags & 0xf) as u8;
    let truncated = flags & 0x0200 != 0;
    let want = name.strip_suffix('.').unwrap_or(name).to_ascii_lowercase();
    if qd != 1 {
        return Err(WireError::QuestionMismatch);
    }
    let qname = read_name(&mut r)?;
    let qt = r.u16()?;
    let qc = r.u16()?;
    if qname.text != want || qt != qtype.code() || qc != CLASS_IN {
        return Err(WireError::QuestionMismatch);
    }
    let mut owners: Vec<String> = vec![want];
    let mut answers = Vec::new();
    let mut skipped = 0;
    // Records are read in order; a CNAME extends the set of accepted owners when its owner
    // is already accepted (servers put the chain in order).
    for _ in 0..usize::from(an).min(MAX_ANSWERS) {
        let owner = read_name(&mut r)?;
        let rtype = r.u16()?;
        let class = r.u16()?;
        let _ttl = r.take(4)?;
        let rdlen = usize::from(r.u16()?);
        let rdata_start = r.pos;
        let rdata = r.take(rdlen)?;
        if class != CLASS_IN || !owners.contains(&owner.text) {
            continue;
        }
        if rtype == TYPE_CNAME {
            let mut sub = Reader {
                buf: packet,
                pos: rdata_start,
            };
            match read_name(&mut sub) {
                Ok(target) if target.clean && sub.pos == rdata_start + rdlen => {
                    if owners.len() <= MAX_CNAME_LINKS && !owners.contains(&target.text) {
                        owners.push(target.text);
                    }
                }
                _ => skipped += 1,
            }
            continue;
        }
        if rtype != qtype.code() {
            continue;
        }
        match qtype {
            Qtype::A => match <[u8; 4]>::try_from(rdata) {
                Ok(o) => answers.push(Rdata::A(Ipv4Addr::from(o))),
                Err(_) => skipped += 1,
            },
            Qtype::Aaaa => match <[u8; 16]>::try_from(rdata) {
                Ok(o) => answers.push(Rdata::Aaaa(Ipv6Addr::from(o))),
                Err(_) => skipped += 1,
            },
            Qtype::Ptr => {
                let mut sub = Reader {
                    buf: packet,
                    pos: rdata_start,
                };
                match read_name(&mut sub) {
                    Ok(target)
                        if target.clean
                            && !target.text.is_empty()
                            && sub.pos == rdata_start + rdlen =>
                    {
                        answers.push(Rdata::Ptr(target.text))
                    }
                    _ => skipped += 1,
                }
            }
        }
    }
    Ok(Response {
        rcode,
        truncated,
        answers,
        skipped,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(id: u16, flags: u16, an: u16) -> Vec<u8> {
        let mut p = Vec::new();
        p.extend_from_slice(&id.to_be_bytes());
        p.extend_from_slice(&flags.to_be_bytes());
        p.extend_from_slice(&[0, 1]);
        p.extend_from_slice(&an.to_be_bytes());
        p.extend_from_slice(&[0, 0, 0, 0]);
        p
    }

    fn question(p: &mut Vec<u8>, name: &str, qt: Qtype) {
        encode_name(name, p).unwrap();
        p.extend_from_slice(&qt.code().to_be_bytes());
        p.extend_from_slice(&[0, 1]);
    }

    fn rr(p: &mut Vec<u8>, owner: &[u8], rtype: u16, rdata: &[u8]) {
        p.extend_from_slice(owner);
        p.extend_from_slice(&rtype.to_be_bytes());
        p.extend_from_slice(&[0, 1, 0, 0, 0, 60]);
        p.extend_from_slice(&(rdata.len() as u16).to_be_bytes());
        p.extend_from_slice(rdata);
    }

    #[test]
    fn query_has_header_question_and_opt() {
        let q = build_query(0x1234, "Crawl-1.Googlebot.com.", Qtype::A).unwrap();
        assert_eq!(&q[..2], &[0x12, 0x34]);
        assert_eq!(&q[4..6], &[0, 1]);
        assert_eq!(q[12], 7);
        assert_eq!(&q[13..20], b"Crawl-1");
        assert!(build_query(1, "", Qtype::A).is_err());
        assert!(build_query(1, "a..b", Qtype::A).is_err());
        assert!(build_query(1, &"a".repeat(64), Qtype::A).is_err());
    }

    #[test]
    fn reverse_names() {
        assert_eq!(
            reverse_name("192.0.2.7".parse().unwrap()),
            "7.2.0.192.in-addr.arpa"
        );
        let v6 = reverse_name("2001:db8::1".parse().unwrap());
        assert!(v6.starts_with("1.0.0.0.0.0.0.0."));
        assert!(v6.ends_with("8.b.d.0.1.0.0.2.ip6.arpa"));
    }

    #[test]
    fn compressed_ptr_answer_is_read() {
        let qn = "7.2.0.192.in-addr.arpa";
        let mut p = header(7, 0x8180, 1);
        question(&mut p, qn, Qtype::Ptr);
        let mut rd = Vec::new();
        encode_name("crawl-1.googlebot.com", &mut rd).unwrap();
        rr(&mut p, &[0xc0, 12], 12, &rd);
        let r = parse_response(&p, 7, qn, Qtype::Ptr).unwrap();
        assert_eq!(r.answers, vec![Rdata::Ptr("crawl-1.googlebot.com".into())]);
        assert_eq!(r.rcode, 0);
        // Wrong ID, not a response, other question.
        assert_eq!(
            parse_response(&p, 8, qn, Qtype::Ptr),
            Err(WireError::NotOurs)
        );
        assert_eq!(
            parse_response(&p, 7, "8.2.0.192.in-addr.arpa", Qtype::Ptr),
            Err(WireError::QuestionMismatch)
        );
        let mut q = p.clone();
        q[2] &= 0x7f;
        assert_eq!(
            parse_response(&q, 7, qn, Qtype::Ptr),
            Err(WireError::NotOurs)
        );
    }

    #[test]
    fn cname_chain_and_foreign_records() {
        let qn = "crawl.example.com";
        let mut p = header(9, 0x8180, 3);
        question(&mut p, qn, Qtype::A);
        let mut rd = Vec::new();
        encode_name("real.example.net", &mut rd).unwrap();
        rr(&mut p, &[0xc0, 12], TYPE_CNAME, &rd);
        let mut owner = Vec::new();
        encode_name("real.example.net", &mut owner).unwrap();
        rr(&mut p, &owner, 1, &[192, 0, 2, 1]);
        let mut other = Vec::new();
        encode_name("evil.example.org", &mut other).unwrap();
        rr(&mut p, &other, 1, &[203, 0, 113, 9]);
        let r = parse_response(&p, 9, qn, Qtype::A).unwrap();
        assert_eq!(r.answers, vec![Rdata::A(Ipv4Addr::new(192, 0, 2, 1))]);
    }

    #[test]
    fn pointer_loops_and_forward_pointers_are_refused() {
        let qn = "x.example";
        let mut p = header(1, 0x8180, 1);
        question(&mut p, qn, Qtype::A);
        let here = p.len() as u8;
        rr(&mut p, &[0xc0, here], 1, &[1, 2, 3, 4]);
        assert_eq!(
            parse_response(&p, 1, qn, Qtype::A),
            Err(WireError::BadPacketName)
        );
    }

    #[test]
    fn odd_ptr_bytes_are_skipped_not_believed() {
        let qn = "7.2.0.192.in-addr.arpa";
        let mut p = header(7, 0x8180, 1);
        question(&mut p, qn, Qtype::Ptr);
        rr(&mut p, &[0xc0, 12], 12, b"\x05a b.c\x03com\x00");
        let r = parse_response(&p, 7, qn, Qtype::Ptr).unwrap();
        assert!(r.answers.is_empty());
        assert_eq!(r.skipped, 1);
    }

    #[test]
    fn every_truncation_is_an_error_not_a_panic() {
        let qn = "7.2.0.192.in-addr.arpa";
        let mut p = header(7, 0x8180, 1);
        question(&mut p, qn, Qtype::Ptr);
        let mut rd = Vec::new();
        encode_name("crawl-1.googlebot.com", &mut rd).unwrap();
        rr(&mut p, &[0xc0, 12], 12, &rd);
        for n in 0..p.len() {
            assert!(
                parse_response(&p[..n], 7, qn, Qtype::Ptr).is_err(),
                "prefix {n}"
            );
        }
    }
}
