//! Parser of the kernel's socket tables `/proc/net/tcp` and `/proc/net/tcp6`.
//!
//! Each row: `sl local_address rem_address st tx_queue:rx_queue tr:tm->when retrnsmt uid
//! timeout inode ...`, addresses as hex `ADDR:PORT` with the address in the kernel's byte
//! order (32-bit words in host order). Rows that do not have that shape are skipped and
//! counted; nothing panics (fuzz target `mail_procnet`).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

/// TCP states of interest (`include/net/tcp_states.h`).
pub const ESTABLISHED: u8 = 0x01;
pub const SYN_SENT: u8 = 0x02;

/// One socket row.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Socket {
    pub local: SocketAddr,
    pub remote: SocketAddr,
    pub state: u8,
    pub uid: u32,
    pub inode: u64,
}

fn hex_u32(s: &str) -> Option<u32> {
    if s.len() != 8 {
        return None;
    }
    u32::from_str_radix(s, 16).ok()
}

/// `0100007F:0019` (IPv4) or 32 hex digits `:PORT` (IPv6).
pub fn parse_addr(s: &str) -> Option<SocketAddr> {
    let (a, p) = s.split_once(':')?;
    if p.len() != 4 {
        return None;
    }
    let port = u16::from_str_radix(p, 16).ok()?;
    let ip = match a.len() {
        8 => IpAddr::V4(Ipv4Addr::from(hex_u32(a)?.to_ne_bytes())),
        32 => {
            let mut bytes = [0u8; 16];
            for (i, chunk) in bytes.chunks_exact_mut(4).enumerate() {
                let w = hex_u32(a.get(i * 8..i * 8 + 8)?)?;
                chunk.copy_from_slice(&w.to_ne_bytes());
            }
            let v6 = Ipv6Addr::from(bytes);
            match v6.to_ipv4_mapped() {
                Some(v4) => IpAddr::V4(v4),
                None => IpAddr::V6(v6),
            }
        }
        _ => return None,
    };
    Some(SocketAddr::new(ip, port))
}

/// Parses one row.
pub fn parse_row(line: &str) -> Option<Socket> {
    let mut f = line.split_ascii_whitespace();
    let sl = f.next()?;
    if !sl.ends_with(':') {
        return None;
    }
    let local = parse_addr(f.next()?)?;
    let remote = parse_addr(f.next()?)?;
    let st = f.next()?;
    if st.len() != 2 {
        return None;
    }
    let state = u8::from_str_radix(st, 16).ok()?;
    let _queues = f.next()?;
    let _timer = f.next()?;
    let _retr = f.next()?;
    let uid: u32 = f.next()?.parse().ok()?;
    let _timeout = f.next()?;
    let inode: u64 = f.next()?.parse().ok()?;
    Some(Socket {
        local,
        remote,
        state,
        uid,
        inode,
    })
}

/// Parses a whole table (header line first). Returns the sockets and the rows skipped.
pub fn parse_table(text: &str) -> (Vec<Socket>, u64) {
    let mut out = Vec::new();
    let mut skipped = 0;
    for (i, line) in text.lines().enumerate() {
        if i == 0 || line.trim().is_empty() {
            continue;
        }
        match parse_row(line) {
            Some(s) => out.push(s),
            None => skipped += 1,
        }
    }
    (out, skipped)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_of_both_tables() {
        let v4 = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n   0: 0100007F:0019 00000000:0000 0A 00000000:00000000 00:00000000 00000000   101        0 31337 1 0000000000000000 100 0 0 10 0\n   1: 0F02000A:C350 0700A8C0:0019 01 00000000:00000000 02:000A7D6B 00000000    33        0 424242 2 0000000000000000 20 4 30 10 -1\n garbage row\n";
        let (s, skipped) = parse_table(v4);
        assert_eq!(skipped, 1);
        assert_eq!(s[0].local, "127.0.0.1:25".parse().unwrap());
        assert_eq!(s[0].state, 0x0A);
        assert_eq!(s[1].remote, "192.168.0.7:25".parse().unwrap());
        assert_eq!(s[1].local, "10.0.2.15:50000".parse().unwrap());
        assert_eq!(
            (s[1].state, s[1].uid, s[1].inode),
            (ESTABLISHED, 33, 424242)
        );
        let v6 = "  sl  local_address                         remote_address                        st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n   0: 00000000000000000000000001000000:0019 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 555 1 0000000000000000 100 0 0 10 0\n   1: 0000000000000000FFFF00000100007F:D431 0000000000000000FFFF00000700A8C0:0019 02 00000000:00000000 00:00000000 00000000  1000        0 777 1 0000000000000000 100 0 0 10 0\n";
        let (s, skipped) = parse_table(v6);
        assert_eq!(skipped, 0);
        assert_eq!(s[0].local, "[::1]:25".parse().unwrap());
        assert_eq!(s[1].remote, "192.168.0.7:25".parse().unwrap(), "v4-mapped");
        assert_eq!((s[1].state, s[1].uid), (SYN_SENT, 1000));
        for bad in [
            "",
            "0: x y",
            "0: 0100007F:0019 00000000:0000 0A",
            "0: 0100007F:19 00000000:0000 0A a b c 1 0 2",
        ] {
            assert!(parse_row(bad).is_none(), "{bad}");
        }
    }

    #[test]
    fn this_hosts_tables_parse() {
        for t in ["/proc/net/tcp", "/proc/net/tcp6"] {
            let Ok(text) = std::fs::read_to_string(t) else {
                continue;
            };
            let (_, skipped) = parse_table(&text);
            assert_eq!(skipped, 0, "{t}");
        }
    }
}
