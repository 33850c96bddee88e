//! The records the kernel programs of `bpf/` write to their rings, parsed from bytes.
//!
//! Layouts mirror `bpf/common.h` and each `bpf/<backend>.bpf.c` (native endian, C
//! alignment). A record shorter than its layout is refused ([`RecordError`]), never read
//! past; strings are cut at their first NUL and read lossily.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// Parents recorded in the kernel above the actor (`ANCESTORS` in `bpf/common.h`).
pub const ANCESTORS: usize = 8;
const COMM_LEN: usize = 16;
const ANCESTOR_LEN: usize = 8 + COMM_LEN;
/// `struct head`: pid, ppid, uid, pad, cgroup, comm, ancestors.
pub const HEAD_LEN: usize = 24 + COMM_LEN + ANCESTORS * ANCESTOR_LEN;
const FILENAME_LEN: usize = 256;
const ARGV_LEN: usize = 512;
/// `struct exec_record`.
pub const EXEC_LEN: usize = HEAD_LEN + 8 + FILENAME_LEN + ARGV_LEN;
/// `struct alg_record`.
pub const ALG_LEN: usize = HEAD_LEN + 8;
/// `struct conn_record`.
pub const CONN_LEN: usize = HEAD_LEN + 8 + 32;
const NAME_LEN: usize = 32;
const DEPTH: usize = 8;
/// `struct open_record`.
pub const OPEN_LEN: usize = HEAD_LEN + 16 + DEPTH * NAME_LEN;

/// A record the parser refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecordError {
    /// Fewer bytes than the layout needs.
    Short { need: usize, got: usize },
}

impl std::fmt::Display for RecordError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RecordError::Short { need, got } => {
                write!(f, "record of {got} bytes, the layout needs {need}")
            }
        }
    }
}

impl std::error::Error for RecordError {}

/// One process of a chain: as recorded in the kernel, then enriched from `/proc`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Proc {
    pub pid: u32,
    pub uid: u32,
    pub comm: String,
    /// Empty until enrichment reads `/proc/<pid>/cmdline` (or the exec record has it).
    pub argv: Vec<String>,
}

/// Who did it: the actor, its cgroup and its parents (nearest first).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Head {
    pub actor: Proc,
    pub ppid: u32,
    pub cgroup: u64,
    pub parents: Vec<Proc>,
}

/// An exec (`sched_process_exec`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Exec {
    pub head: Head,
    pub filename: String,
}

/// Direction of a TCP connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    Outbound,
    Inbound,
}

/// A TCP connect or accept.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Conn {
    pub head: Head,
    pub direction: Direction,
    pub local: (IpAddr, u16),
    pub remote: (IpAddr, u16),
}

/// A non-owner open of a watched name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Open {
    pub head: Head,
    /// Owner uid of the opened file.
    pub owner: u32,
    pub fd: u32,
    /// Path from the dentry names (the mount's root may cut it short).
    pub path: String,
}

/// `socket(AF_ALG, ...)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Alg {
    pub head: Head,
    pub sock_type: u32,
}

fn need(b: &[u8], n: usize) -> Result<(), RecordError> {
    if b.len() < n {
        return Err(RecordError::Short {
            need: n,
            got: b.len(),
        });
    }
    Ok(())
}

fn u16_at(b: &[u8], at: usize) -> u16 {
    let mut a = [0u8; 2];
    a.copy_from_slice(&b[at..at + 2]);
    u16::from_ne_bytes(a)
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    let mut a = [0u8; 4];
    a.copy_from_slice(&b[at..at + 4]);
    u32::from_ne_bytes(a)
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[at..at + 8]);
    u64::from_ne_bytes(a)
}

/// The C string in `b` (up to its first NUL), lossily.
pub fn cstr(b: &[u8]) -> String {
    let end = b.iter().position(|&c| c == 0).unwrap_or(b.len());
    String::from_utf8_lossy(&b[..end]).into_owned()
}

/// NUL-separated arguments (as in `/proc/<pid>/cmdline`); a trailing NUL ends the list.
pub fn split_argv(b: &[u8]) -> Vec<String> {
    let b = b.strip_suffix(&[0]).unwrap_or(b);
    if b.is_empty() {
        return Vec::new();
    }
    b.split(|&c| c == 0)
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect()
}

fn head(b: &[u8]) -> Result<Head, RecordError> {
    need(b, HEAD_LEN)?;
    let mut parents = Vec::new();
    for i in 0..ANCESTORS {
        let at = 24 + COMM_LEN + i * ANCESTOR_LEN;
        let pid = u32_at(b, at);
        if pid == 0 {
            break;
        }
        parents.push(Proc {
            pid,
            uid: u32_at(b, at + 4),
            comm: cstr(&b[at + 8..at + 8 + COMM_LEN]),
            argv: Vec::new(),
        });
    }
    Ok(Head {
        actor: Proc {
            pid: u32_at(b, 0),
            uid: u32_at(b, 8),
            comm: cstr(&b[24..24 + COMM_LEN]),
            argv: Vec::new(),
        },
        ppid: u32_at(b, 4),
        cgroup: u64_at(b, 16),
        parents,
    })
}

/// Parses an execution record.
pub fn exec(b: &[u8]) -> Result<Exec, RecordError> {
    need(b, EXEC_LEN)?;
    let mut head = head(b)?;
    let argv_len = (u32_at(b, HEAD_LEN) as usize).min(ARGV_LEN);
    let argv_at = HEAD_LEN + 8 + FILENAME_LEN;
    head.actor.argv = split_argv(&b[argv_at..argv_at + argv_len]);
    Ok(Exec {
        head,
        filename: cstr(&b[HEAD_LEN + 8..HEAD_LEN + 8 + FILENAME_LEN]),
    })
}

fn addr(family: u16, b: &[u8]) -> IpAddr {
    if family == 2 {
        IpAddr::V4(Ipv4Addr::new(b[0], b[1], b[2], b[3]))
    } else {
        let mut a = [0u8; 16];
        a.copy_from_slice(&b[..16]);
        IpAddr::V6(Ipv6Addr::from(a))
    }
}

/// Parses a connection record.
pub fn conn(b: &[u8]) -> Result<Conn, RecordError> {
    need(b, CONN_LEN)?;
    let head = head(b)?;
    let family = u16_at(b, HEAD_LEN);
    let direction = if u16_at(b, HEAD_LEN + 2) == 2 {
        Direction::Inbound
    } else {
        Direction::Outbound
    };
    let local_port = u16_at(b, HEAD_LEN + 4);
    let remote_port = u16_at(b, HEAD_LEN + 6);
    Ok(Conn {
        head,
        direction,
        local: (addr(family, &b[HEAD_LEN + 8..]), local_port),
        remote: (addr(family, &b[HEAD_LEN + 24..]), remote_port),
    })
}

/// Parses a sensitive-file open record; the path is joined from the dentry names.
pub fn open(b: &[u8]) -> Result<Open, RecordError> {
    need(b, OPEN_LEN)?;
    let head = head(b)?;
    let depth = (u32_at(b, HEAD_LEN + 8) as usize).min(DEPTH);
    let mut parts: Vec<String> = (0..depth)
        .map(|i| {
            let at = HEAD_LEN + 16 + i * NAME_LEN;
            cstr(&b[at..at + NAME_LEN])
        })
        .filter(|p| !p.is_empty() && p != "/")
        .collect();
    parts.reverse();
    Ok(Open {
        head,
        owner: u32_at(b, HEAD_LEN),
        fd: u32_at(b, HEAD_LEN + 4),
        path: format!("/{}", parts.join("/")),
    })
}

/// Parses an AF_ALG record.
pub fn alg(b: &[u8]) -> Result<Alg, RecordError> {
    need(b, ALG_LEN)?;
    Ok(Alg {
        head: head(b)?,
        sock_type: u32_at(b, HEAD_LEN + 4),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn put(b: &mut [u8], at: usize, v: &[u8]) {
        b[at..at + v.len()].copy_from_slice(v);
    }

    fn with_head(len: usize) -> Vec<u8> {
        let mut b = vec![0u8; len];
        put(&mut b, 0, &4242u32.to_ne_bytes());
        put(&mut b, 4, &4241u32.to_ne_bytes());
        put(&mut b, 8, &33u32.to_ne_bytes());
        put(&mut b, 16, &77u64.to_ne_bytes());
        put(&mut b, 24, b"sh\0");
        let a0 = 24 + COMM_LEN;
        put(&mut b, a0, &4241u32.to_ne_bytes());
        put(&mut b, a0 + 4, &33u32.to_ne_bytes());
        put(&mut b, a0 + 8, b"php-fpm8.2\0");
        put(&mut b, a0 + ANCESTOR_LEN, &1u32.to_ne_bytes());
        put(&mut b, a0 + ANCESTOR_LEN + 8, b"systemd\0");
        b
    }

    #[test]
    fn exec_record_parses_head_chain_and_argv() {
        let mut b = with_head(EXEC_LEN);
        put(&mut b, HEAD_LEN, &13u32.to_ne_bytes());
        put(&mut b, HEAD_LEN + 8, b"/bin/sh\0");
        put(&mut b, HEAD_LEN + 8 + FILENAME_LEN, b"sh\0-c\0curl x\0");
        let e = exec(&b).unwrap();
        assert_eq!(e.filename, "/bin/sh");
        assert_eq!(e.head.actor.argv, ["sh", "-c", "curl x"]);
        assert_eq!(e.head.actor.pid, 4242);
        assert_eq!(e.head.cgroup, 77);
        let comms: Vec<_> = e.head.parents.iter().map(|p| p.comm.as_str()).collect();
        assert_eq!(comms, ["php-fpm8.2", "systemd"]);
    }

    #[test]
    fn short_and_hostile_records_are_refused_or_bounded() {
        assert!(matches!(exec(&[0u8; 10]), Err(RecordError::Short { .. })));
        assert!(conn(&[]).is_err() && open(&[1u8; 3]).is_err() && alg(&[]).is_err());
        // A length past the buffer and no NUL anywhere: bounded, no panic.
        let mut b = vec![0xffu8; EXEC_LEN];
        put(&mut b, 0, &1u32.to_ne_bytes());
        let e = exec(&b).unwrap();
        assert_eq!(e.filename.chars().count(), FILENAME_LEN);
        let mut o = vec![0xffu8; OPEN_LEN];
        put(&mut o, HEAD_LEN + 8, &u32::MAX.to_ne_bytes());
        assert!(open(&o).is_ok());
        assert!(conn(&vec![0xffu8; CONN_LEN]).is_ok());
    }

    #[test]
    fn conn_and_open_records() {
        let mut b = with_head(CONN_LEN);
        put(&mut b, HEAD_LEN, &2u16.to_ne_bytes());
        put(&mut b, HEAD_LEN + 2, &1u16.to_ne_bytes());
        put(&mut b, HEAD_LEN + 4, &40000u16.to_ne_bytes());
        put(&mut b, HEAD_LEN + 6, &4444u16.to_ne_bytes());
        put(&mut b, HEAD_LEN + 8, &[127, 0, 0, 1]);
        put(&mut b, HEAD_LEN + 24, &[192, 0, 2, 7]);
        let c = conn(&b).unwrap();
        assert_eq!(c.direction, Direction::Outbound);
        assert_eq!(c.remote, ("192.0.2.7".parse().unwrap(), 4444));
        let mut o = with_head(OPEN_LEN);
        put(&mut o, HEAD_LEN, &0u32.to_ne_bytes());
        put(&mut o, HEAD_LEN + 8, &3u32.to_ne_bytes());
        put(&mut o, HEAD_LEN + 16, b"shadow\0");
        put(&mut o, HEAD_LEN + 16 + NAME_LEN, b"etc\0");
        put(&mut o, HEAD_LEN + 16 + 2 * NAME_LEN, b"/\0");
        assert_eq!(open(&o).unwrap().path, "/etc/shadow");
    }
}
