//! The nftables netlink messages the engine sends itself: set-element batches and a few
//! probes (generation, table, sets, rule count).
//!
//! Why not the nft program for elements: nft 1.0.x loads every element of every set in the
//! table before it adds or removes a single one, so with 100,000 blocks one `nft add
//! element` took about three seconds. A batch built here goes straight to the kernel.
//! Rules, chains and set definitions still go through `nft -f -` (see `script`), which
//! does not load elements for them.
//!
//! Guarantees:
//! - One [`Batch`] is one nfnetlink batch (`BATCH_BEGIN` .. `BATCH_END`) sent with one
//!   `send`: the kernel commits every message in it or none (one transaction).
//! - [`Netlink::commit`] returns only after the kernel answered the batch's last message;
//!   every error the kernel reported for any message of the batch is returned.
//! - Replies are parsed defensively: a short or malformed message is an error, never a
//!   panic (fuzz target `firewall_input`).

use std::fmt;
use std::net::IpAddr;
use std::os::fd::{AsRawFd, OwnedFd};
use std::time::Duration;

use nix::errno::Errno;
use nix::sys::socket::{
    bind, recv, send, setsockopt, socket, sockopt, AddressFamily, MsgFlags, NetlinkAddr, SockFlag,
    SockProtocol, SockType,
};
use nix::sys::time::TimeVal;

use super::net::Net;

const NFNL_SUBSYS_NFTABLES: u16 = 10;
const NFNL_MSG_BATCH_BEGIN: u16 = 16;
const NFNL_MSG_BATCH_END: u16 = 17;
const NFT_MSG_GETTABLE: u16 = 1;
const NFT_MSG_GETRULE: u16 = 7;
const NFT_MSG_GETSET: u16 = 10;
const NFT_MSG_NEWSETELEM: u16 = 12;
const NFT_MSG_DELSETELEM: u16 = 14;
const NFT_MSG_GETGEN: u16 = 16;

const NLM_F_REQUEST: u16 = 1;
const NLM_F_ACK: u16 = 4;
const NLM_F_DUMP: u16 = 0x300;
const NLM_F_EXCL: u16 = 0x200;
const NLMSG_ERROR: u16 = 2;
const NLMSG_DONE: u16 = 3;
const NLA_F_NESTED: u16 = 0x8000;

const NFPROTO_INET: u8 = 1;

const NFTA_TABLE_NAME: u16 = 1;
const NFTA_TABLE_HANDLE: u16 = 4;
const NFTA_SET_TABLE: u16 = 1;
const NFTA_SET_NAME: u16 = 2;
const NFTA_RULE_TABLE: u16 = 1;
const NFTA_RULE_CHAIN: u16 = 2;
const NFTA_SET_ELEM_LIST_TABLE: u16 = 1;
const NFTA_SET_ELEM_LIST_SET: u16 = 2;
const NFTA_SET_ELEM_LIST_ELEMENTS: u16 = 3;
const NFTA_LIST_ELEM: u16 = 1;
const NFTA_SET_ELEM_KEY: u16 = 1;
const NFTA_SET_ELEM_FLAGS: u16 = 3;
const NFTA_SET_ELEM_TIMEOUT: u16 = 4;
const NFTA_DATA_VALUE: u16 = 1;
const NFTA_GEN_ID: u16 = 1;
const NFT_SET_ELEM_INTERVAL_END: u32 = 1;

/// Bytes of elements per message: the elements list is one attribute, whose length is 16
/// bits.
const MAX_ELEMS_BYTES: usize = 60_000;
/// Receive buffer for one `recv` (a dump part is at most a few pages).
const RECV_BUF: usize = 256 * 1024;

/// What went wrong talking to the kernel.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NlError {
    /// A system call failed (socket, send, recv).
    Io(&'static str, Errno),
    /// The kernel refused a message: errno and what the message was.
    Kernel { errno: Errno, what: String },
    /// No answer before the receive deadline.
    Timeout,
    /// A reply that does not parse.
    Malformed(&'static str),
}

impl NlError {
    /// The errno of a kernel refusal or a failed call.
    pub fn errno(&self) -> Option<Errno> {
        match self {
            NlError::Io(_, e) | NlError::Kernel { errno: e, .. } => Some(*e),
            _ => None,
        }
    }
}

impl fmt::Display for NlError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NlError::Io(call, e) => write!(f, "netlink {call}: {}", e.desc()),
            NlError::Kernel { errno, what } => {
                write!(f, "nftables refused {what}: {}", errno.desc())
            }
            NlError::Timeout => f.write_str("nftables did not answer in time"),
            NlError::Malformed(what) => write!(f, "malformed netlink reply: {what}"),
        }
    }
}

impl std::error::Error for NlError {}

fn align4(n: usize) -> usize {
    (n + 3) & !3
}

fn put_attr(buf: &mut Vec<u8>, ty: u16, payload: &[u8]) {
    let len = 4 + payload.len();
    buf.extend_from_slice(&(len as u16).to_ne_bytes());
    buf.extend_from_slice(&ty.to_ne_bytes());
    buf.extend_from_slice(payload);
    buf.resize(align4(buf.len()), 0);
}

fn put_str(buf: &mut Vec<u8>, ty: u16, s: &str) {
    let mut p = s.as_bytes().to_vec();
    p.push(0);
    put_attr(buf, ty, &p);
}

/// Starts a nested attribute; returns its offset for [`end_nest`].
fn begin_nest(buf: &mut Vec<u8>, ty: u16) -> usize {
    let at = buf.len();
    buf.extend_from_slice(&0u16.to_ne_bytes());
    buf.extend_from_slice(&(ty | NLA_F_NESTED).to_ne_bytes());
    at
}

fn end_nest(buf: &mut [u8], at: usize) {
    let len = (buf.len() - at).min(u16::MAX as usize) as u16;
    buf[at..at + 2].copy_from_slice(&len.to_ne_bytes());
}

/// A message header plus `nfgenmsg`; the length is patched by [`finish_msg`].
fn begin_msg(ty: u16, flags: u16, family: u8, res_id: u16) -> Vec<u8> {
    let mut b = Vec::with_capacity(64);
    b.extend_from_slice(&0u32.to_ne_bytes()); // length
    b.extend_from_slice(&ty.to_ne_bytes());
    b.extend_from_slice(&flags.to_ne_bytes());
    b.extend_from_slice(&0u32.to_ne_bytes()); // seq, set when sent
    b.extend_from_slice(&0u32.to_ne_bytes()); // port id
    b.push(family);
    b.push(0); // version
    b.extend_from_slice(&res_id.to_be_bytes());
    b
}

fn finish_msg(b: &mut Vec<u8>) {
    b.resize(align4(b.len()), 0);
    let len = b.len() as u32;
    b[0..4].copy_from_slice(&len.to_ne_bytes());
}

fn set_seq(b: &mut [u8], seq: u32) {
    b[8..12].copy_from_slice(&seq.to_ne_bytes());
}

fn add_flags(b: &mut [u8], flags: u16) {
    let f = u16::from_ne_bytes([b[6], b[7]]) | flags;
    b[6..8].copy_from_slice(&f.to_ne_bytes());
}

fn nft_type(msg: u16) -> u16 {
    (NFNL_SUBSYS_NFTABLES << 8) | msg
}

fn key_bytes(ip: IpAddr) -> Vec<u8> {
    match ip {
        IpAddr::V4(a) => a.octets().to_vec(),
        IpAddr::V6(a) => a.octets().to_vec(),
    }
}

/// A set of table `inet svc` as element messages need it: its name, and whether it is an
/// interval set (elements are ranges: a start and an end key) or a hash set (one key).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SetRef {
    pub name: &'static str,
    pub interval: bool,
}

/// One element: the start key (with its timeout) and, in an interval set and unless the
/// range reaches the top of its family, the end key flagged `INTERVAL_END`. In a hash set
/// the element is the address itself.
fn encode_range(out: &mut Vec<u8>, net: &Net, interval: bool, timeout_ms: Option<u64>) {
    let e = begin_nest(out, NFTA_LIST_ELEM);
    if let Some(t) = timeout_ms {
        put_attr(out, NFTA_SET_ELEM_TIMEOUT, &t.max(1).to_be_bytes());
    }
    let k = begin_nest(out, NFTA_SET_ELEM_KEY);
    put_attr(out, NFTA_DATA_VALUE, &key_bytes(net.first()));
    end_nest(out, k);
    end_nest(out, e);
    if let Some(end) = net.end_exclusive().filter(|_| interval) {
        let e = begin_nest(out, NFTA_LIST_ELEM);
        put_attr(
            out,
            NFTA_SET_ELEM_FLAGS,
            &NFT_SET_ELEM_INTERVAL_END.to_be_bytes(),
        );
        let k = begin_nest(out, NFTA_SET_ELEM_KEY);
        put_attr(out, NFTA_DATA_VALUE, &key_bytes(end));
        end_nest(out, k);
        end_nest(out, e);
    }
}

/// One message of a batch and what it does, for error reports.
struct Msg {
    bytes: Vec<u8>,
    what: String,
}

/// Set-element changes committed as one transaction by [`Netlink::commit`].
#[derive(Default)]
pub struct Batch {
    msgs: Vec<Msg>,
    /// Element bytes being collected for the current (op, set).
    open: Option<(u16, String, Vec<u8>, usize)>,
    elements: usize,
}

impl Batch {
    pub fn new() -> Batch {
        Batch::default()
    }

    /// True when nothing was added.
    pub fn is_empty(&self) -> bool {
        self.msgs.is_empty() && self.open.is_none()
    }

    /// Elements (ranges) added or deleted so far.
    pub fn elements(&self) -> usize {
        self.elements
    }

    fn close(&mut self) {
        if let Some((op, set, elems, n)) = self.open.take() {
            // Adds are exclusive: an element the engine believes absent but the kernel
            // still holds fails the batch, and the engine re-creates the sets from memory
            // instead of keeping a stale timeout.
            let flags = if op == NFT_MSG_NEWSETELEM {
                NLM_F_REQUEST | NLM_F_EXCL
            } else {
                NLM_F_REQUEST
            };
            let mut b = begin_msg(nft_type(op), flags, NFPROTO_INET, 0);
            put_str(&mut b, NFTA_SET_ELEM_LIST_TABLE, super::TABLE);
            put_str(&mut b, NFTA_SET_ELEM_LIST_SET, &set);
            let at = begin_nest(&mut b, NFTA_SET_ELEM_LIST_ELEMENTS);
            b.extend_from_slice(&elems);
            end_nest(&mut b, at);
            finish_msg(&mut b);
            let verb = if op == NFT_MSG_NEWSETELEM {
                "adding"
            } else {
                "deleting"
            };
            self.msgs.push(Msg {
                bytes: b,
                what: format!("{verb} {n} element(s) of set {set}"),
            });
        }
    }

    fn push(&mut self, op: u16, set: SetRef, net: &Net, timeout_ms: Option<u64>) {
        debug_assert!(
            set.interval || net.is_host(),
            "a range needs an interval set"
        );
        let mut one = Vec::with_capacity(64);
        encode_range(&mut one, net, set.interval, timeout_ms);
        let set = set.name;
        let reuse = matches!(&self.open, Some((o, s, e, _)) if *o == op && s == set && e.len() + one.len() <= MAX_ELEMS_BYTES);
        if !reuse {
            self.close();
            self.open = Some((op, set.to_string(), Vec::with_capacity(8192), 0));
        }
        if let Some((_, _, e, n)) = self.open.as_mut() {
            e.extend_from_slice(&one);
            *n += 1;
        }
        self.elements += 1;
    }

    /// Adds `net` to `set`, expiring after `timeout_ms` (None: no timeout).
    pub fn add(&mut self, set: SetRef, net: &Net, timeout_ms: Option<u64>) {
        self.push(NFT_MSG_NEWSETELEM, set, net, timeout_ms);
    }

    /// Deletes `net` from `set` (the kernel refuses an element that is not there).
    pub fn delete(&mut self, set: SetRef, net: &Net) {
        self.push(NFT_MSG_DELSETELEM, set, net, None);
    }

    /// Removes every element of `set`.
    pub fn flush(&mut self, set: &str) {
        self.close();
        let mut b = begin_msg(nft_type(NFT_MSG_DELSETELEM), NLM_F_REQUEST, NFPROTO_INET, 0);
        put_str(&mut b, NFTA_SET_ELEM_LIST_TABLE, super::TABLE);
        put_str(&mut b, NFTA_SET_ELEM_LIST_SET, set);
        finish_msg(&mut b);
        self.msgs.push(Msg {
            bytes: b,
            what: format!("flushing set {set}"),
        });
    }

    /// The batch as sent (begin, messages with sequence numbers from `seq`, end), and what
    /// each sequence number did.
    fn encode(mut self, seq: u32) -> (Vec<u8>, Vec<(u32, String)>) {
        self.close();
        let total: usize = self.msgs.iter().map(|m| m.bytes.len()).sum::<usize>() + 40;
        let mut out = Vec::with_capacity(total);
        let mut begin = begin_msg(NFNL_MSG_BATCH_BEGIN, NLM_F_REQUEST, 0, NFNL_SUBSYS_NFTABLES);
        finish_msg(&mut begin);
        set_seq(&mut begin, seq);
        out.extend_from_slice(&begin);
        let mut whats = Vec::with_capacity(self.msgs.len());
        let last = self.msgs.len().saturating_sub(1);
        for (i, mut m) in self.msgs.into_iter().enumerate() {
            let s = seq.wrapping_add(1 + i as u32);
            set_seq(&mut m.bytes, s);
            if i == last {
                add_flags(&mut m.bytes, NLM_F_ACK);
            }
            out.extend_from_slice(&m.bytes);
            whats.push((s, m.what));
        }
        let mut end = begin_msg(NFNL_MSG_BATCH_END, NLM_F_REQUEST, 0, NFNL_SUBSYS_NFTABLES);
        finish_msg(&mut end);
        set_seq(&mut end, seq.wrapping_add(1 + whats.len() as u32));
        out.extend_from_slice(&end);
        (out, whats)
    }
}

/// One parsed netlink message: type, flags, sequence, payload after the header.
struct Reply<'a> {
    ty: u16,
    seq: u32,
    payload: &'a [u8],
}

fn parse_replies(buf: &[u8]) -> Result<Vec<Reply<'_>>, NlError> {
    let mut out = Vec::new();
    let mut at = 0usize;
    while at + 16 <= buf.len() {
        let len = u32::from_ne_bytes([buf[at], buf[at + 1], buf[at + 2], buf[at + 3]]) as usize;
        if len < 16 || at + len > buf.len() {
            return Err(NlError::Malformed("message length"));
        }
        let ty = u16::from_ne_bytes([buf[at + 4], buf[at + 5]]);
        let seq = u32::from_ne_bytes([buf[at + 8], buf[at + 9], buf[at + 10], buf[at + 11]]);
        out.push(Reply {
            ty,
            seq,
            payload: &buf[at + 16..at + len],
        });
        at += align4(len);
    }
    Ok(out)
}

/// The errno of an `NLMSG_ERROR` payload (0 for an acknowledgement).
fn error_code(payload: &[u8]) -> Result<i32, NlError> {
    let b = payload
        .get(0..4)
        .ok_or(NlError::Malformed("short error message"))?;
    Ok(i32::from_ne_bytes([b[0], b[1], b[2], b[3]]))
}

/// Attributes after the 4-byte `nfgenmsg` of an nftables message: (type, payload).
fn attrs(payload: &[u8]) -> Result<Vec<(u16, &[u8])>, NlError> {
    let mut out = Vec::new();
    let mut at = 4usize;
    if payload.len() < 4 {
        return Err(NlError::Malformed("short nftables message"));
    }
    while at + 4 <= payload.len() {
        let len = u16::from_ne_bytes([payload[at], payload[at + 1]]) as usize;
        let ty = u16::from_ne_bytes([payload[at + 2], payload[at + 3]]) & 0x3fff;
        if len < 4 || at + len > payload.len() {
            return Err(NlError::Malformed("attribute length"));
        }
        out.push((ty, &payload[at + 4..at + len]));
        at += align4(len);
    }
    Ok(out)
}

fn c_str(b: &[u8]) -> String {
    let end = b.iter().position(|&c| c == 0).unwrap_or(b.len());
    String::from_utf8_lossy(&b[..end]).into_owned()
}

/// A netlink socket to nftables in the calling thread's network namespace.
pub struct Netlink {
    fd: OwnedFd,
    seq: u32,
    sndbuf: usize,
    buf: Vec<u8>,
}

impl Netlink {
    /// Opens and binds the socket; answers wait at most `timeout`.
    pub fn open(timeout: Duration) -> Result<Netlink, NlError> {
        let fd = socket(
            AddressFamily::Netlink,
            SockType::Raw,
            SockFlag::SOCK_CLOEXEC,
            SockProtocol::NetlinkNetFilter,
        )
        .map_err(|e| NlError::Io("socket", e))?;
        bind(fd.as_raw_fd(), &NetlinkAddr::new(0, 0)).map_err(|e| NlError::Io("bind", e))?;
        let tv = TimeVal::new(
            timeout.as_secs() as i64,
            timeout.subsec_micros() as nix::libc::suseconds_t,
        );
        setsockopt(&fd, sockopt::ReceiveTimeout, &tv).map_err(|e| NlError::Io("setsockopt", e))?;
        setsockopt(&fd, sockopt::SendTimeout, &tv).map_err(|e| NlError::Io("setsockopt", e))?;
        // Room for many error answers of one batch; the forced size needs CAP_NET_ADMIN,
        // which a working engine has anyway.
        let _ = setsockopt(&fd, sockopt::RcvBufForce, &(4 << 20));
        let seed = (std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(1))
            | 1;
        Ok(Netlink {
            fd,
            seq: seed,
            sndbuf: 0,
            buf: vec![0u8; RECV_BUF],
        })
    }

    fn next_seq(&mut self, n: u32) -> u32 {
        let s = self.seq;
        self.seq = self.seq.wrapping_add(n + 1);
        s
    }

    fn send_all(&mut self, bytes: &[u8]) -> Result<(), NlError> {
        if bytes.len() + 4096 > self.sndbuf {
            let want = (bytes.len() + 65_536).next_power_of_two();
            setsockopt(&self.fd, sockopt::SndBufForce, &want)
                .or_else(|_| setsockopt(&self.fd, sockopt::SndBuf, &want))
                .map_err(|e| NlError::Io("setsockopt", e))?;
            self.sndbuf = want;
        }
        loop {
            match send(self.fd.as_raw_fd(), bytes, MsgFlags::empty()) {
                Ok(n) if n == bytes.len() => return Ok(()),
                Ok(_) => return Err(NlError::Io("send", Errno::EMSGSIZE)),
                Err(Errno::EINTR) => continue,
                Err(e) => return Err(NlError::Io("send", e)),
            }
        }
    }

    /// Receives one datagram into the internal buffer; returns its length.
    fn recv_one(&mut self) -> Result<usize, NlError> {
        loop {
            match recv(self.fd.as_raw_fd(), &mut self.buf, MsgFlags::empty()) {
                Ok(n) => return Ok(n),
                Err(Errno::EINTR) => continue,
                Err(Errno::EAGAIN) => return Err(NlError::Timeout),
                Err(e) => return Err(NlError::Io("recv", e)),
            }
        }
    }

    /// Sends `batch` as one transaction and waits for the kernel's answer.
    pub fn commit(&mut self, batch: Batch) -> Result<(), NlError> {
        if batch.is_empty() {
            return Ok(());
        }
        let n = (batch.msgs.len() + 2) as u32;
        let seq = self.next_seq(n);
        let (bytes, whats) = batch.encode(seq);
        let last = whats.last().map(|(s, _)| *s).unwrap_or(seq);
        self.send_all(&bytes)?;
        let mut first_err: Option<NlError> = None;
        loop {
            let len = self.recv_one()?;
            let replies = parse_replies(&self.buf[..len])?;
            let mut done = false;
            for r in replies {
                if r.ty != NLMSG_ERROR {
                    continue;
                }
                let code = error_code(r.payload)?;
                if code != 0 && first_err.is_none() {
                    let what = whats
                        .iter()
                        .find(|(s, _)| *s == r.seq)
                        .map(|(_, w)| w.clone())
                        .unwrap_or_else(|| "the batch".into());
                    first_err = Some(NlError::Kernel {
                        errno: Errno::from_raw(-code),
                        what,
                    });
                }
                if r.seq == last {
                    done = true;
                }
            }
            if done {
                break;
            }
        }
        match first_err {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// Sends one request and collects its answer messages: a dump until `DONE`, a single
    /// query until its acknowledgement. Messages of other sequence numbers (late answers
    /// to earlier requests) are skipped.
    fn request(&mut self, mut msg: Vec<u8>) -> Result<Vec<Vec<u8>>, NlError> {
        let seq = self.next_seq(1);
        set_seq(&mut msg, seq);
        self.send_all(&msg)?;
        let mut out = Vec::new();
        loop {
            let len = self.recv_one()?;
            let replies = parse_replies(&self.buf[..len])?;
            let mut finished = false;
            let mut kept = Vec::new();
            for r in replies {
                if r.seq != seq {
                    continue;
                }
                match r.ty {
                    NLMSG_ERROR => {
                        let code = error_code(r.payload)?;
                        if code != 0 {
                            return Err(NlError::Kernel {
                                errno: Errno::from_raw(-code),
                                what: "a query".into(),
                            });
                        }
                        finished = true;
                    }
                    NLMSG_DONE => finished = true,
                    _ => kept.push(r.payload.to_vec()),
                }
            }
            out.extend(kept);
            if finished {
                return Ok(out);
            }
        }
    }

    /// The ruleset generation (also the availability probe: needs CAP_NET_ADMIN).
    pub fn generation(&mut self) -> Result<u32, NlError> {
        let mut m = begin_msg(nft_type(NFT_MSG_GETGEN), NLM_F_REQUEST | NLM_F_ACK, 0, 0);
        finish_msg(&mut m);
        let answers = self.request(m)?;
        for a in &answers {
            for (ty, v) in attrs(a)? {
                if ty == NFTA_GEN_ID && v.len() >= 4 {
                    return Ok(u32::from_be_bytes([v[0], v[1], v[2], v[3]]));
                }
            }
        }
        Err(NlError::Malformed("no generation id"))
    }

    /// The handle of table `inet svc`, `None` when it does not exist.
    pub fn table_handle(&mut self) -> Result<Option<u64>, NlError> {
        let mut m = begin_msg(
            nft_type(NFT_MSG_GETTABLE),
            NLM_F_REQUEST | NLM_F_ACK,
            NFPROTO_INET,
            0,
        );
        put_str(&mut m, NFTA_TABLE_NAME, super::TABLE);
        finish_msg(&mut m);
        let answers = match self.request(m) {
            Ok(a) => a,
            Err(e) if e.errno() == Some(Errno::ENOENT) => return Ok(None),
            Err(e) => return Err(e),
        };
        for a in &answers {
            for (ty, v) in attrs(a)? {
                if ty == NFTA_TABLE_HANDLE && v.len() >= 8 {
                    let mut h = [0u8; 8];
                    h.copy_from_slice(&v[..8]);
                    return Ok(Some(u64::from_be_bytes(h)));
                }
            }
        }
        Err(NlError::Malformed("table without a handle"))
    }

    /// Names of the sets in table `inet svc` (empty when the table is gone).
    pub fn set_names(&mut self) -> Result<Vec<String>, NlError> {
        let mut m = begin_msg(
            nft_type(NFT_MSG_GETSET),
            NLM_F_REQUEST | NLM_F_DUMP | NLM_F_ACK,
            NFPROTO_INET,
            0,
        );
        put_str(&mut m, NFTA_SET_TABLE, super::TABLE);
        finish_msg(&mut m);
        let answers = match self.request(m) {
            Ok(a) => a,
            Err(e) if e.errno() == Some(Errno::ENOENT) => return Ok(Vec::new()),
            Err(e) => return Err(e),
        };
        let mut names = Vec::new();
        for a in &answers {
            let mut table_ok = false;
            let mut name = None;
            for (ty, v) in attrs(a)? {
                match ty {
                    NFTA_SET_TABLE => table_ok = c_str(v) == super::TABLE,
                    NFTA_SET_NAME => name = Some(c_str(v)),
                    _ => {}
                }
            }
            if let (true, Some(n)) = (table_ok, name) {
                names.push(n);
            }
        }
        Ok(names)
    }

    /// Rules in chain `chain` of table `inet svc` (0 when it is gone).
    pub fn rule_count(&mut self, chain: &str) -> Result<usize, NlError> {
        let mut m = begin_msg(
            nft_type(NFT_MSG_GETRULE),
            NLM_F_REQUEST | NLM_F_DUMP | NLM_F_ACK,
            NFPROTO_INET,
            0,
        );
        put_str(&mut m, NFTA_RULE_TABLE, super::TABLE);
        put_str(&mut m, NFTA_RULE_CHAIN, chain);
        finish_msg(&mut m);
        let answers = match self.request(m) {
            Ok(a) => a,
            Err(e) if e.errno() == Some(Errno::ENOENT) => return Ok(0),
            Err(e) => return Err(e),
        };
        let mut n = 0;
        for a in &answers {
            let mut t = false;
            let mut c = false;
            for (ty, v) in attrs(a)? {
                match ty {
                    NFTA_RULE_TABLE => t = c_str(v) == super::TABLE,
                    NFTA_RULE_CHAIN => c = c_str(v) == chain,
                    _ => {}
                }
            }
            if t && c {
                n += 1;
            }
        }
        Ok(n)
    }
}

/// Parses a buffer of netlink replies the way the engine does (for the fuzz target):
/// messages, error codes and nftables attributes. Never panics.
pub fn parse_for_fuzz(buf: &[u8]) -> usize {
    let mut n = 0;
    if let Ok(replies) = parse_replies(buf) {
        for r in replies {
            n += 1;
            let _ = error_code(r.payload);
            if let Ok(a) = attrs(r.payload) {
                n += a.len();
                for (_, v) in a {
                    let _ = c_str(v);
                }
            }
        }
    }
    n
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batch_encoding_matches_what_nft_sends() {
        // `nft --debug=mnl add element inet svc b4 { 192.0.2.9 timeout 10s }` sends a
        // NEWSETELEM whose element list holds a start key with the timeout and an end key
        // flagged INTERVAL_END.
        let mut b = Batch::new();
        b.add(
            SetRef {
                name: "b4",
                interval: true,
            },
            &Net::parse("192.0.2.9").unwrap(),
            Some(10_000),
        );
        let (bytes, whats) = b.encode(100);
        assert_eq!(whats.len(), 1);
        assert_eq!(whats[0].0, 101);
        let replies = parse_replies(&bytes).unwrap();
        assert_eq!(replies.len(), 3);
        assert_eq!(replies[0].ty, NFNL_MSG_BATCH_BEGIN);
        assert_eq!(replies[1].ty, nft_type(NFT_MSG_NEWSETELEM));
        assert_eq!(replies[2].ty, NFNL_MSG_BATCH_END);
        let a = attrs(replies[1].payload).unwrap();
        assert_eq!(c_str(a[0].1), "svc");
        assert_eq!(c_str(a[1].1), "b4");
        assert_eq!(a[2].0, NFTA_SET_ELEM_LIST_ELEMENTS);
        let elems = a[2].1;
        // first element: timeout 10000 ms (big endian), key c0000209
        let hex = hex::encode(elems);
        assert!(hex.contains("0000000000002710"), "{hex}");
        assert!(hex.contains("c0000209"), "{hex}");
        assert!(hex.contains("c000020a"), "{hex}");
        assert!(hex.contains("00000001"), "{hex}");
    }

    #[test]
    fn large_batches_split_into_messages_under_the_attribute_limit() {
        let mut b = Batch::new();
        for i in 0..10_000u32 {
            let ip = std::net::Ipv4Addr::from(0x0a00_0000 + i * 2);
            b.add(
                SetRef {
                    name: "block4",
                    interval: false,
                },
                &Net::host(ip.into()),
                Some(60_000),
            );
        }
        b.delete(
            SetRef {
                name: "block6",
                interval: false,
            },
            &Net::parse("2001:db8::1").unwrap(),
        );
        assert_eq!(b.elements(), 10_001);
        let (bytes, whats) = b.encode(1);
        assert!(whats.len() > 5, "{}", whats.len());
        for r in parse_replies(&bytes).unwrap() {
            assert!(r.payload.len() < 65_536);
        }
        assert!(whats
            .last()
            .unwrap()
            .1
            .contains("deleting 1 element(s) of set block6"));
    }

    #[test]
    fn hash_set_elements_are_one_key() {
        let mut out = Vec::new();
        encode_range(&mut out, &Net::parse("192.0.2.9").unwrap(), false, Some(5));
        assert_eq!(u16::from_ne_bytes([out[0], out[1]]) as usize, out.len());
        let mut out2 = Vec::new();
        encode_range(&mut out2, &Net::parse("192.0.2.9").unwrap(), true, Some(5));
        assert!(out2.len() > out.len());
    }

    #[test]
    fn the_top_of_the_address_space_has_no_end_key() {
        let mut out = Vec::new();
        encode_range(
            &mut out,
            &Net::parse("255.255.255.255").unwrap(),
            true,
            None,
        );
        // One list element only.
        assert_eq!(u16::from_ne_bytes([out[0], out[1]]) as usize, out.len());
    }

    #[test]
    fn malformed_replies_are_errors_not_panics() {
        assert!(parse_replies(&[1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]).is_err());
        assert!(error_code(&[1, 2]).is_err());
        assert!(attrs(&[0, 0, 0, 0, 2, 0, 1, 0]).is_err());
        let mut x: u64 = 0x243f6a8885a308d3;
        for len in 0..3000usize {
            let mut b = Vec::with_capacity(len);
            for _ in 0..len {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                b.push((x & 0xff) as u8);
            }
            if b.len() >= 4 {
                let l = (b.len() as u32).to_ne_bytes();
                b[..4].copy_from_slice(&l);
            }
            let _ = parse_for_fuzz(&b);
        }
    }
}
