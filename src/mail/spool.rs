//! MTA spool layouts and queue files: Exim's `input/` tree (`-H` envelope and headers,
//! `-D` body, `-J` journal, `msglog/`) and Postfix's `incoming`/`active` queue files.
//!
//! Guarantees: the parsers never panic on any bytes and are bounded (fuzz target
//! `exim_header`); outside text (addresses, headers) is returned as received, escaped only
//! where it is shown.

use std::io::{self, Read};
use std::path::{Path, PathBuf};

/// Which MTA owns a spool.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Mta {
    Exim,
    Postfix,
}

impl Mta {
    pub fn as_str(self) -> &'static str {
        match self {
            Mta::Exim => "exim",
            Mta::Postfix => "postfix",
        }
    }

    pub fn parse(s: &str) -> Option<Mta> {
        match s {
            "exim" => Some(Mta::Exim),
            "postfix" => Some(Mta::Postfix),
            _ => None,
        }
    }
}

/// Spool directories tried when `mail.spool_path` is empty, in order.
pub const CANDIDATES: &[&str] = &["/var/spool/exim4", "/var/spool/exim", "/var/spool/postfix"];

/// Postfix queues watched (messages wait or are being delivered there).
pub const POSTFIX_QUEUES: &[&str] = &["incoming", "active", "deferred", "hold"];

/// The MTA of the spool at `root`, from its layout: Exim has `input/`, Postfix has
/// `incoming/` or `active/`.
pub fn layout_of(root: &Path) -> Option<Mta> {
    let d = crate::sys::dir::Dir::walk_trusted(root).ok()?;
    let is_dir = |n: &str| {
        d.lstat(std::ffi::OsStr::new(n))
            .ok()
            .flatten()
            .is_some_and(|i| i.kind == crate::sys::dir::Kind::Dir)
    };
    if is_dir("input") {
        Some(Mta::Exim)
    } else if is_dir("incoming") || is_dir("active") {
        Some(Mta::Postfix)
    } else {
        None
    }
}

/// The spool to watch: the configured one, or the first candidate with a known layout.
pub fn detect(configured: Option<&Path>) -> Option<(PathBuf, Mta)> {
    match configured {
        Some(p) => layout_of(p).map(|m| (p.to_path_buf(), m)),
        None => CANDIDATES
            .iter()
            .map(PathBuf::from)
            .find_map(|p| layout_of(&p).map(|m| (p, m))),
    }
}

/// Whether `name` is an Exim message id (4.96: `1abcDE-0000AB-Cd`; 4.97+:
/// `1abcDE-0000ABcdEFg-ABCD`).
pub fn is_exim_id(name: &str) -> bool {
    let parts: Vec<&str> = name.split('-').collect();
    let alnum = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_alphanumeric());
    match parts.as_slice() {
        [a, b, c] => {
            alnum(a)
                && alnum(b)
                && alnum(c)
                && a.len() == 6
                && ((b.len() == 6 && c.len() == 2) || (b.len() == 11 && c.len() == 4))
        }
        _ => false,
    }
}

/// The message id of an Exim spool file name (`<id>-H`, `<id>-D`, `<id>-J`).
pub fn exim_id_of(file: &str, suffix: &str) -> Option<String> {
    let id = file.strip_suffix(suffix)?;
    is_exim_id(id).then(|| id.to_string())
}

/// Whether `name` looks like a Postfix queue file name (hex short ids or long ids).
pub fn is_postfix_id(name: &str) -> bool {
    (6..=32).contains(&name.len()) && name.bytes().all(|b| b.is_ascii_alphanumeric())
}

/// The envelope of a queued message.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Envelope {
    pub sender: String,
    pub recipients: Vec<String>,
    /// The header block as RFC 5322 text (Exim: deleted headers left out), ending with the
    /// empty line; empty for Postfix (its queue file holds the whole message).
    pub headers: Vec<u8>,
    /// Submitted locally or by an authenticated client (outbound mail).
    pub outbound: bool,
    /// `-auth_id` (Exim), when present.
    pub auth_id: Option<String>,
    pub received_protocol: Option<String>,
}

/// Why a queue file was not understood.
#[derive(Debug)]
pub enum ParseError {
    Io(io::Error),
    Format(&'static str),
    TooLarge,
}

impl std::fmt::Display for ParseError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ParseError::Io(e) => write!(f, "{e}"),
            ParseError::Format(m) => write!(f, "not a queue file: {m}"),
            ParseError::TooLarge => f.write_str("queue file over the size limit"),
        }
    }
}

/// Largest `-H` file read.
pub const MAX_HEADER_FILE: u64 = 16 * 1024 * 1024;
/// Most recipients kept.
pub const MAX_RECIPIENTS: usize = 10_000;

struct Cursor<'a> {
    b: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    fn line(&mut self) -> Option<&'a [u8]> {
        if self.pos >= self.b.len() {
            return None;
        }
        let rest = &self.b[self.pos..];
        let end = memchr::memchr(b'\n', rest).unwrap_or(rest.len());
        self.pos += (end + 1).min(rest.len() + 1);
        Some(&rest[..end])
    }

    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let s = self.b.get(self.pos..self.pos.checked_add(n)?)?;
        self.pos += n;
        Some(s)
    }
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Parses an Exim `-H` file.
pub fn parse_exim_header(data: &[u8]) -> Result<Envelope, ParseError> {
    let mut c = Cursor { b: data, pos: 0 };
    let first = c.line().ok_or(ParseError::Format("empty"))?;
    if !first.ends_with(b"-H") {
        return Err(ParseError::Format("first line is not <id>-H"));
    }
    c.line().ok_or(ParseError::Format("no owner line"))?;
    let sender_line = c.line().ok_or(ParseError::Format("no sender line"))?;
    let sender = text(sender_line)
        .trim()
        .trim_start_matches('<')
        .trim_end_matches('>')
        .to_string();
    c.line().ok_or(ParseError::Format("no time line"))?;
    let mut env = Envelope {
        sender,
        ..Envelope::default()
    };
    let mut local = false;
    // Flags: lines starting with `-`; `-acl` values carry a byte count and may span lines.
    let tree_line = loop {
        let l = c.line().ok_or(ParseError::Format("truncated flags"))?;
        if !l.starts_with(b"-") {
            break l;
        }
        let l = text(l);
        let mut it = l.splitn(2, ' ');
        let flag = it.next().unwrap_or("");
        let value = it.next().unwrap_or("").trim();
        match flag {
            "-local" => local = true,
            "-auth_id" => env.auth_id = Some(value.to_string()),
            "-received_protocol" => env.received_protocol = Some(value.to_string()),
            f if f.starts_with("-acl") => {
                // `-aclc <name> <length>` then <length> bytes and a newline.
                let n: usize = value
                    .rsplit(' ')
                    .next()
                    .and_then(|v| v.parse().ok())
                    .ok_or(ParseError::Format("bad acl variable"))?;
                c.take(n)
                    .ok_or(ParseError::Format("truncated acl variable"))?;
                c.take(1);
            }
            _ => {}
        }
    };
    // The tree of addresses already delivered: `XX` when empty, else nodes whose first two
    // characters say whether a left and a right subtree follow.
    skip_tree(&mut c, tree_line, 0)?;
    let count_line = c.line().ok_or(ParseError::Format("no recipient count"))?;
    let count: usize = text(count_line)
        .trim()
        .parse()
        .map_err(|_| ParseError::Format("bad recipient count"))?;
    for _ in 0..count {
        let l = c.line().ok_or(ParseError::Format("truncated recipients"))?;
        if env.recipients.len() < MAX_RECIPIENTS {
            env.recipients.push(recipient(&text(l)));
        }
    }
    // An empty line, then the headers.
    c.line();
    while c.pos < data.len() {
        let rest = &data[c.pos..];
        let digits = rest.iter().take_while(|b| b.is_ascii_digit()).count();
        if digits == 0 || rest.len() < digits + 2 {
            break;
        }
        let len: usize = std::str::from_utf8(&rest[..digits])
            .ok()
            .and_then(|s| s.parse().ok())
            .ok_or(ParseError::Format("bad header length"))?;
        let flag = rest[digits];
        c.pos += digits + 2;
        let h = c
            .take(len.min(data.len() - c.pos))
            .ok_or(ParseError::Format("truncated header"))?;
        if flag != b'*' {
            env.headers.extend_from_slice(h);
        }
    }
    if !env.headers.ends_with(b"\n") && !env.headers.is_empty() {
        env.headers.push(b'\n');
    }
    env.headers.push(b'\n');
    let proto = env.received_protocol.as_deref().unwrap_or("");
    env.outbound = local
        || env.auth_id.is_some()
        || proto.starts_with("local")
        || proto.ends_with("esmtpa")
        || proto.ends_with("esmtpsa");
    Ok(env)
}

fn skip_tree(c: &mut Cursor<'_>, line: &[u8], depth: usize) -> Result<(), ParseError> {
    if depth > 64 {
        return Err(ParseError::Format("non-recipient tree too deep"));
    }
    if line.starts_with(b"XX") {
        return Ok(());
    }
    let (l, r) = (line.first() == Some(&b'Y'), line.get(1) == Some(&b'Y'));
    if l {
        let next = c.line().ok_or(ParseError::Format("truncated tree"))?;
        skip_tree(c, next, depth + 1)?;
    }
    if r {
        let next = c.line().ok_or(ParseError::Format("truncated tree"))?;
        skip_tree(c, next, depth + 1)?;
    }
    Ok(())
}

/// A recipient line without Exim's trailing `errors_to,pno#flags` annotation.
fn recipient(l: &str) -> String {
    let l = l.trim();
    if let Some((addr, tail)) = l.rsplit_once(' ') {
        if !tail.is_empty()
            && tail
                .bytes()
                .all(|b| b.is_ascii_digit() || b == b',' || b == b'#')
        {
            return addr.trim().to_string();
        }
    }
    l.to_string()
}

/// Reads an Exim `-D` file after its first line (`<id>-D`).
pub fn skip_data_id_line(r: &mut dyn Read) -> io::Result<()> {
    let mut b = [0u8; 1];
    for _ in 0..256 {
        if r.read(&mut b)? == 0 || b[0] == b'\n' {
            return Ok(());
        }
    }
    Err(io::Error::new(
        io::ErrorKind::InvalidData,
        "first line of the -D file is too long",
    ))
}

/// A Postfix queue file record reader: yields the message content (headers and body)
/// and collects the envelope.
pub struct PostfixReader<R: Read> {
    r: R,
    pub env: Envelope,
    in_content: bool,
    done: bool,
    pending: Vec<u8>,
    pos: usize,
}

impl<R: Read> PostfixReader<R> {
    pub fn new(r: R) -> Self {
        PostfixReader {
            r,
            env: Envelope::default(),
            in_content: false,
            done: false,
            pending: Vec::new(),
            pos: 0,
        }
    }

    fn byte(&mut self) -> io::Result<Option<u8>> {
        let mut b = [0u8; 1];
        Ok((self.r.read(&mut b)? == 1).then_some(b[0]))
    }

    /// The next record: (type, data).
    fn record(&mut self) -> io::Result<Option<(u8, Vec<u8>)>> {
        let Some(t) = self.byte()? else {
            return Ok(None);
        };
        let mut len: usize = 0;
        let mut shift = 0;
        loop {
            let b = self.byte()?.ok_or(io::ErrorKind::UnexpectedEof)?;
            len |= usize::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                break;
            }
            shift += 7;
            if shift > 28 {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    "bad record length",
                ));
            }
        }
        if len > 1 << 24 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "record too long",
            ));
        }
        let mut data = vec![0u8; len];
        self.r.read_exact(&mut data)?;
        Ok(Some((t, data)))
    }

    /// Reads records up to the next content bytes; false at the end.
    fn advance(&mut self) -> io::Result<bool> {
        while !self.done {
            let Some((t, data)) = self.record()? else {
                self.done = true;
                break;
            };
            match t {
                b'S' => self.env.sender = text(&data),
                b'R' if self.env.recipients.len() < MAX_RECIPIENTS => {
                    self.env.recipients.push(text(&data))
                }
                b'M' => self.in_content = true,
                b'X' | b'E' => self.in_content = false,
                b'N' if self.in_content => {
                    self.pending = data;
                    self.pending.push(b'\n');
                    self.pos = 0;
                    return Ok(true);
                }
                b'L' if self.in_content => {
                    self.pending = data;
                    self.pos = 0;
                    return Ok(true);
                }
                _ => {}
            }
        }
        Ok(false)
    }

    /// Reads the records after the content (envelope records may follow it).
    pub fn finish(&mut self) -> io::Result<()> {
        while self.advance()? {}
        Ok(())
    }
}

impl<R: Read> Read for PostfixReader<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        while self.pos >= self.pending.len() {
            if !self.advance()? {
                return Ok(0);
            }
        }
        let n = buf.len().min(self.pending.len() - self.pos);
        buf[..n].copy_from_slice(&self.pending[self.pos..self.pos + n]);
        self.pos += n;
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h_file() -> String {
        let mut s = String::from("1tAbCd-000123-Xy-H\nDebian-exim 101 101\n<alice@example.com>\n1700000000 0\n-received_time_usec .123\n-ident root\n-received_protocol local\n-aclc _x 5\nab\ncd\n-local\nXX\n2\nbob@example.org\ncarol@example.net 0,0#1\n\n");
        for (flag, h) in [
            (
                ' ',
                "Received: from root by host with local (Exim)\n\tid 1tAbCd-000123-Xy\n",
            ),
            ('T', "To: bob@example.org\n"),
            ('*', "X-Deleted: removed!!\n"),
            (' ', "Subject: report 42\n"),
        ] {
            s.push_str(&format!("{:03}{flag} {h}", h.len()));
        }
        s
    }

    #[test]
    fn exim_header_file() {
        let e = parse_exim_header(h_file().as_bytes()).unwrap();
        assert_eq!(e.sender, "alice@example.com");
        assert_eq!(e.recipients, ["bob@example.org", "carol@example.net"]);
        assert!(e.outbound);
        let h = String::from_utf8(e.headers).unwrap();
        assert!(h.contains("To: bob@example.org\n"), "{h}");
        assert!(h.contains("Subject: report 42\n"), "{h}");
        assert!(!h.contains("X-Deleted"), "{h}");
        assert!(h.ends_with("\n\n"));
    }

    #[test]
    fn exim_ids() {
        assert!(is_exim_id("1tAbCd-000123-Xy"));
        assert!(is_exim_id("1tAbCd-000123ABCDE-XyZw"));
        assert!(!is_exim_id("hdr.1234"));
        assert!(!is_exim_id("../../etc"));
        assert_eq!(
            exim_id_of("1tAbCd-000123-Xy-H", "-H").as_deref(),
            Some("1tAbCd-000123-Xy")
        );
        assert_eq!(exim_id_of("1tAbCd-000123-Xy-D", "-H"), None);
    }

    #[test]
    fn postfix_records() {
        let mut f = Vec::new();
        let mut rec = |t: u8, d: &[u8]| {
            f.push(t);
            f.push(d.len() as u8);
            f.extend_from_slice(d);
        };
        rec(b'C', b"   100    200 0 1");
        rec(b'S', b"alice@example.com");
        rec(b'M', b"");
        rec(b'N', b"Subject: x");
        rec(b'N', b"");
        rec(b'L', b"long ");
        rec(b'N', b"line");
        rec(b'X', b"");
        rec(b'R', b"bob@example.org");
        rec(b'E', b"");
        let mut r = PostfixReader::new(f.as_slice());
        let mut content = String::new();
        r.read_to_string(&mut content).unwrap();
        r.finish().unwrap();
        assert_eq!(content, "Subject: x\n\nlong line\n");
        assert_eq!(r.env.sender, "alice@example.com");
        assert_eq!(r.env.recipients, ["bob@example.org"]);
    }

    #[test]
    fn garbage_never_panics() {
        let h = h_file();
        let base = h.as_bytes();
        for cut in 0..base.len() {
            let _ = parse_exim_header(&base[..cut]);
            let mut r = PostfixReader::new(&base[..cut]);
            let mut v = Vec::new();
            let _ = r.read_to_end(&mut v);
        }
    }
}
