//! The MIME walker: takes a message as a byte stream and hands every leaf part, decoded,
//! to a [`Sink`], in bounded memory.
//!
//! How a message is walked:
//! - Every header block (the message's, each part's, each attached message's) is parsed by
//!   `mailparse` (folding, RFC 2047 words, RFC 2231 parameters, content types and
//!   dispositions). Bodies are walked here, streaming: a multipart body is split at its
//!   **declared** boundary (a delimiter line is `--boundary` or `--boundary--` plus
//!   optional whitespace), nested multiparts keep a stack of boundaries so a missing close
//!   delimiter ends at the enclosing one.
//! - A leaf is decoded by its `Content-Transfer-Encoding` with the tolerant decoders of
//!   [`super::decode`] into a [`Spill`]; base64 may add the `alphabet_only` and
//!   `padded_prefix` interpretations (at most [`Limits::max_interpretations`] extra ones per
//!   message, the rest is refused and reported).
//! - A multipart or `message/rfc822` body that is itself base64 or quoted-printable encoded
//!   is decoded and then walked (encoded bodies are decoded at every level).
//! - Errors never stop the walk: a decoding error, an unclosed multipart, a missing
//!   boundary parameter or an unparsable header block is recorded as an [`Incomplete`]
//!   reason and the walk goes on with what was recovered and with later parts.
//! - Limits: nesting depth, number of leaf parts, total decoded bytes, header block size.
//!   What a limit refuses is an [`Incomplete`] reason; nothing past the size limit is ever
//!   decoded.
//!
//! Guarantees: never panics on any input (fuzz target `mime_walk`); memory per message is
//! bounded by the read buffer, the header limit and the spills' memory threshold (larger
//! parts go to staged files).

pub mod lines;

use std::io::{self, Read};

use mailparse::{MailHeaderMap, ParsedContentType};
use serde::{Deserialize, Serialize};

use super::decode::{Base64Decoder, QpDecoder};
use super::staging::{Spill, SpillError, Staging};
use lines::{LineSrc, Piece};

pub use crate::config::mail::{Limits, MAX_INTERPRETATIONS};

/// Why a message was scanned incompletely.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Reason {
    /// Stray characters, a truncated quartet or data after padding in base64.
    Base64Error,
    /// A multipart ended without its close delimiter.
    MultipartUnclosed,
    /// A multipart without a boundary parameter (scanned as one part).
    MultipartNoBoundary,
    HeaderTooLong,
    HeaderUnparsable,
    DepthLimit,
    PartLimit,
    SizeLimit,
    InterpretationLimit,
    /// Staging refused (directory check) or a staged write failed.
    Staging,
    /// The spool file could not be read to the end.
    Read,
    ArchiveSizeLimit,
    ArchiveFileLimit,
    ArchiveRatioLimit,
    ArchiveDepthLimit,
    ArchiveEncrypted,
    ArchiveError,
    /// clamd could not scan a part (unreachable, error answer, size limit).
    ClamdError,
}

impl Reason {
    pub fn as_str(self) -> &'static str {
        match self {
            Reason::Base64Error => "base64_error",
            Reason::MultipartUnclosed => "multipart_unclosed",
            Reason::MultipartNoBoundary => "multipart_no_boundary",
            Reason::HeaderTooLong => "header_too_long",
            Reason::HeaderUnparsable => "header_unparsable",
            Reason::DepthLimit => "depth_limit",
            Reason::PartLimit => "part_limit",
            Reason::SizeLimit => "size_limit",
            Reason::InterpretationLimit => "interpretation_limit",
            Reason::Staging => "staging",
            Reason::Read => "read_error",
            Reason::ArchiveSizeLimit => "archive_size_limit",
            Reason::ArchiveFileLimit => "archive_file_limit",
            Reason::ArchiveRatioLimit => "archive_ratio_limit",
            Reason::ArchiveDepthLimit => "archive_depth_limit",
            Reason::ArchiveEncrypted => "archive_encrypted",
            Reason::ArchiveError => "archive_error",
            Reason::ClamdError => "clamd_error",
        }
    }

    /// Human text for finding messages.
    pub fn describe(self) -> &'static str {
        match self {
            Reason::Base64Error => "malformed base64",
            Reason::MultipartUnclosed => "unclosed multipart",
            Reason::MultipartNoBoundary => "multipart without boundary",
            Reason::HeaderTooLong => "header block over the limit",
            Reason::HeaderUnparsable => "unparsable header block",
            Reason::DepthLimit => "MIME nesting over the limit",
            Reason::PartLimit => "more parts than the limit",
            Reason::SizeLimit => "extraction size limit reached",
            Reason::InterpretationLimit => "base64 interpretation limit reached",
            Reason::Staging => "staging refused or failed",
            Reason::Read => "spool file unreadable",
            Reason::ArchiveSizeLimit => "archive over the size limit",
            Reason::ArchiveFileLimit => "archive over the file-count limit",
            Reason::ArchiveRatioLimit => {
                "archive over the compression-ratio limit (zip bomb refused)"
            }
            Reason::ArchiveDepthLimit => "archive nested deeper than the limit",
            Reason::ArchiveEncrypted => "encrypted archive member",
            Reason::ArchiveError => "damaged archive",
            Reason::ClamdError => "clamd could not scan a part",
        }
    }
}

/// One reason, with the part it concerns (MIME position, `""` for the message).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Incomplete {
    pub reason: Reason,
    pub part: String,
}

/// Which reading of a base64 body a part is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Interp {
    AlphabetOnly,
    PaddedPrefix,
}

/// A leaf handed to the [`Sink`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct PartInfo {
    /// 1-based number of the leaf in the message.
    pub index: usize,
    /// MIME position: `1` for a single-part message, `1.2.1` for nested parts.
    pub path: String,
    pub content_type: String,
    /// Sanitised base name of the attachment ([`sanitize_name`]), when it has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Declared transfer encoding, lower case (`7bit` when absent).
    pub encoding: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub interpretation: Option<Interp>,
    /// Decoded bytes.
    pub size: u64,
    pub depth: usize,
}

/// Receives decoded leaves. `content` holds at least `len` bytes (a prefix view for
/// `padded_prefix`), flushed.
pub trait Sink {
    fn part(&mut self, info: &PartInfo, content: &Spill, len: u64);
}

/// Top-level header values (decoded, at most 998 characters each).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct TopHeaders {
    pub message_id: Option<String>,
    pub subject: Option<String>,
    pub from: Option<String>,
    pub to: Option<String>,
}

/// What walking a message found besides the parts.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WalkReport {
    pub headers: TopHeaders,
    pub leaves: usize,
    pub extracted: u64,
    pub extra_interpretations: usize,
    pub incomplete: Vec<Incomplete>,
    /// Raw bytes read.
    pub read: u64,
}

impl WalkReport {
    pub fn add(&mut self, reason: Reason, part: &str) {
        // One entry per (reason, part); a bounded list.
        if self.incomplete.len() < 64
            && !self
                .incomplete
                .iter()
                .any(|i| i.reason == reason && i.part == part)
        {
            self.incomplete.push(Incomplete {
                reason,
                part: part.to_string(),
            });
        }
    }
}

/// An attachment name as logs, findings and the API show it: the last path component
/// (`/` or `\` separated) with control, bidirectional and other invisible formatting
/// characters replaced by `_`, at most 128 characters; `None` when nothing is left.
pub fn sanitize_name(raw: &str) -> Option<String> {
    let base = raw
        .rsplit(['/', '\\'])
        .next()
        .unwrap_or("")
        .trim_matches(|c: char| c.is_whitespace());
    let mut out = String::new();
    for c in base.chars().take(128) {
        let bad = crate::text::needs_escape(c)
            || matches!(
                c,
                '\u{200b}'..='\u{200f}' | '\u{feff}' | '\u{2028}' | '\u{2029}'
            );
        out.push(if bad { '_' } else { c });
    }
    if out.is_empty() || out == "." || out == ".." {
        None
    } else {
        Some(out)
    }
}

fn cut_header(s: String) -> String {
    crate::text::cut(&s, 998).into_owned()
}

/// How a body ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum End {
    Eof,
    /// A delimiter of the boundary at this stack index.
    Delim {
        idx: usize,
        close: bool,
    },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Cte {
    Identity,
    Base64,
    Qp,
}

fn cte_of(v: &str) -> Cte {
    let v = v.trim().to_ascii_lowercase();
    match v.as_str() {
        "base64" => Cte::Base64,
        "quoted-printable" => Cte::Qp,
        _ => Cte::Identity,
    }
}

/// Tests a whole line against the boundary stack, innermost first.
fn delimiter(line: &[u8], stack: &[Vec<u8>]) -> Option<(usize, bool)> {
    let rest = line.strip_prefix(b"--")?;
    let trimmed = trim_end_ws(rest);
    for (idx, b) in stack.iter().enumerate().rev() {
        if let Some(after) = trimmed.strip_prefix(b.as_slice()) {
            if after.is_empty() {
                return Some((idx, false));
            }
            if after == b"--" {
                return Some((idx, true));
            }
        }
    }
    None
}

fn trim_end_ws(b: &[u8]) -> &[u8] {
    let mut e = b.len();
    while e > 0 && matches!(b[e - 1], b' ' | b'\t' | b'\r' | b'\n') {
        e -= 1;
    }
    &b[..e]
}

/// Parsed headers of one entity.
struct Entity {
    ctype: ParsedContentType,
    cte_raw: String,
    name: Option<String>,
}

fn parse_entity(block: &[u8], report: &mut WalkReport, part: &str) -> Entity {
    let headers = match mailparse::parse_headers(block) {
        Ok((h, _)) => h,
        Err(_) => {
            report.add(Reason::HeaderUnparsable, part);
            Vec::new()
        }
    };
    let ctype = headers
        .get_first_value("Content-Type")
        .map(|v| mailparse::parse_content_type(&v))
        .unwrap_or_else(|| mailparse::parse_content_type(""));
    let cte_raw = headers
        .get_first_value("Content-Transfer-Encoding")
        .map(|v| v.trim().to_ascii_lowercase())
        .unwrap_or_default();
    let disp_name = headers
        .get_first_value("Content-Disposition")
        .map(|v| mailparse::parse_content_disposition(&v))
        .and_then(|d| d.params.get("filename").cloned());
    let name = disp_name
        .or_else(|| ctype.params.get("name").cloned())
        .and_then(|n| sanitize_name(&n));
    Entity {
        ctype,
        cte_raw,
        name,
    }
}

fn top_headers(block: &[u8]) -> TopHeaders {
    let Ok((h, _)) = mailparse::parse_headers(block) else {
        return TopHeaders::default();
    };
    let get = |n: &str| h.get_first_value(n).map(cut_header);
    TopHeaders {
        message_id: get("Message-ID").map(|v| {
            cut_header(
                v.trim()
                    .trim_start_matches('<')
                    .trim_end_matches('>')
                    .to_string(),
            )
        }),
        subject: get("Subject"),
        from: get("From"),
        to: get("To"),
    }
}

/// Walks messages for one sink.
pub struct Walker<'s, S: Sink> {
    limits: Limits,
    staging: Option<std::sync::Arc<Staging>>,
    sink: &'s mut S,
    pub report: WalkReport,
    stop: bool,
}

enum Dec {
    Identity,
    B64(Box<Base64Decoder>),
    Qp(Box<QpDecoder>),
}

/// Outputs of one leaf being decoded.
struct LeafOut {
    primary: Spill,
    alpha: Option<Spill>,
    prefix: Option<u64>,
    /// Writing stopped (limit or staging failure).
    full: bool,
}

impl<'s, S: Sink> Walker<'s, S> {
    pub fn new(
        limits: Limits,
        staging: Option<std::sync::Arc<Staging>>,
        sink: &'s mut S,
    ) -> Walker<'s, S> {
        Walker {
            limits,
            staging,
            sink,
            report: WalkReport::default(),
            stop: false,
        }
    }

    fn spill(&self) -> Spill {
        Spill::new(self.limits.mem_part_bytes, self.staging.clone())
    }

    /// Walks a whole message (header block, then body). Read errors end the walk and are
    /// reported as [`Reason::Read`]; everything extracted before is delivered.
    pub fn walk_message(&mut self, r: &mut dyn Read) -> WalkReport {
        let mut counted = CountingReader { r, n: 0 };
        {
            let mut src = LineSrc::new(&mut counted);
            if let Err(_e) = self.message(&mut src, 0, &mut Vec::new(), "", true) {
                self.report.add(Reason::Read, "");
            }
        }
        self.report.read = counted.n;
        std::mem::take(&mut self.report)
    }

    /// A message (header block and body) read from `src`; `stack` holds the boundaries of
    /// enclosing multiparts (for an attached message that is not encoded).
    fn message(
        &mut self,
        src: &mut LineSrc<'_>,
        depth: usize,
        stack: &mut Vec<Vec<u8>>,
        path: &str,
        top: bool,
    ) -> io::Result<End> {
        let (block, ended) = self.header_block(src, stack, path)?;
        if top {
            self.report.headers = top_headers(&block);
        }
        if let Some(end) = ended {
            return Ok(end);
        }
        let ent = parse_entity(&block, &mut self.report, path);
        let p = if path.is_empty() { "1" } else { path };
        self.entity(src, &ent, depth, stack, p)
    }

    /// Reads a header block up to the empty line. A delimiter line ends it early (returned).
    fn header_block(
        &mut self,
        src: &mut LineSrc<'_>,
        stack: &[Vec<u8>],
        part: &str,
    ) -> io::Result<(Vec<u8>, Option<End>)> {
        let mut block = Vec::new();
        let mut too_long = false;
        while let Some(p) = src.next_piece()? {
            let b = src.bytes(&p);
            if p.starts_line {
                if LineSrc::whole_line(&p) {
                    if let Some((idx, close)) = delimiter(b, stack) {
                        return Ok((block, Some(End::Delim { idx, close })));
                    }
                }
                if b == b"\n" || b == b"\r\n" {
                    return Ok((block, None));
                }
            }
            if block.len() + b.len() <= self.limits.max_header_bytes {
                block.extend_from_slice(b);
            } else if !too_long {
                too_long = true;
                self.report.add(Reason::HeaderTooLong, part);
            }
        }
        Ok((block, Some(End::Eof)))
    }

    fn entity(
        &mut self,
        src: &mut LineSrc<'_>,
        ent: &Entity,
        depth: usize,
        stack: &mut Vec<Vec<u8>>,
        path: &str,
    ) -> io::Result<End> {
        if self.stop {
            return Ok(End::Eof);
        }
        let mime = ent.ctype.mimetype.to_ascii_lowercase();
        let cte = cte_of(&ent.cte_raw);
        let container =
            mime.starts_with("multipart/") || mime == "message/rfc822" || mime == "message/global";
        if container && depth >= self.limits.max_depth {
            self.report.add(Reason::DepthLimit, path);
            return self.leaf(src, ent, cte, depth, stack, path);
        }
        if mime.starts_with("multipart/") {
            let Some(boundary) = ent.ctype.params.get("boundary").filter(|b| !b.is_empty()) else {
                self.report.add(Reason::MultipartNoBoundary, path);
                return self.leaf(src, ent, cte, depth, stack, path);
            };
            let boundary = boundary.as_bytes().to_vec();
            if cte != Cte::Identity {
                return self.encoded_container(src, cte, stack, path, |w, inner| {
                    let mut s = vec![boundary.clone()];
                    w.multipart_body(inner, &mut s, depth + 1, path).map(|_| ())
                });
            }
            stack.push(boundary);
            let end = self.multipart_body(src, stack, depth, path);
            stack.pop();
            return end;
        }
        if container {
            // An attached message.
            if cte != Cte::Identity {
                return self.encoded_container(src, cte, stack, path, |w, inner| {
                    w.message(
                        inner,
                        depth + 1,
                        &mut Vec::new(),
                        &format!("{path}.1"),
                        false,
                    )
                    .map(|_| ())
                });
            }
            return self.message(src, depth + 1, stack, &format!("{path}.1"), false);
        }
        self.leaf(src, ent, cte, depth, stack, path)
    }

    /// The body of a multipart whose boundary is the top of `stack`: preamble, parts,
    /// epilogue. Returns how the enclosing body ended.
    fn multipart_body(
        &mut self,
        src: &mut LineSrc<'_>,
        stack: &mut Vec<Vec<u8>>,
        depth: usize,
        path: &str,
    ) -> io::Result<End> {
        let me = stack.len() - 1;
        let mut end = self.skip(src, stack)?;
        let mut n = 0usize;
        loop {
            if self.stop {
                return Ok(End::Eof);
            }
            match end {
                End::Eof => {
                    self.report.add(Reason::MultipartUnclosed, path);
                    return Ok(End::Eof);
                }
                End::Delim { idx, .. } if idx < me => {
                    self.report.add(Reason::MultipartUnclosed, path);
                    return Ok(end);
                }
                End::Delim { close: true, .. } => {
                    // Epilogue: up to the enclosing boundary.
                    let outer = &stack[..me];
                    return self.skip(src, outer);
                }
                End::Delim { .. } => {
                    n += 1;
                    let part = format!("{path}.{n}");
                    let (block, ended) = self.header_block(src, stack, &part)?;
                    if let Some(e) = ended {
                        end = e;
                        continue;
                    }
                    let ent = parse_entity(&block, &mut self.report, &part);
                    end = self.entity(src, &ent, depth + 1, stack, &part)?;
                }
            }
        }
    }

    /// Skips lines up to a delimiter of `stack` (preamble, epilogue).
    fn skip(&mut self, src: &mut LineSrc<'_>, stack: &[Vec<u8>]) -> io::Result<End> {
        while let Some(p) = src.next_piece()? {
            if LineSrc::whole_line(&p) {
                if let Some((idx, close)) = delimiter(src.bytes(&p), stack) {
                    return Ok(End::Delim { idx, close });
                }
            }
        }
        Ok(End::Eof)
    }

    /// Decodes an encoded multipart or message body into a spill, then walks the decoded
    /// bytes with `walk`. Returns how the encoded body ended in `src`.
    fn encoded_container(
        &mut self,
        src: &mut LineSrc<'_>,
        cte: Cte,
        stack: &mut [Vec<u8>],
        path: &str,
        walk: impl FnOnce(&mut Self, &mut LineSrc<'_>) -> io::Result<()>,
    ) -> io::Result<End> {
        let (out, end) = self.decode_body(src, cte, stack, path, false)?;
        let mut r = out.primary.reader(out.primary.len());
        let mut inner = LineSrc::new(&mut r);
        if walk(self, &mut inner).is_err() {
            self.report.add(Reason::Staging, path);
        }
        Ok(end)
    }

    /// Reads a body up to a delimiter of `stack`, decoding it. `interpretations` allows the
    /// extra base64 readings (leaves only).
    fn decode_body(
        &mut self,
        src: &mut LineSrc<'_>,
        cte: Cte,
        stack: &[Vec<u8>],
        path: &str,
        interpretations: bool,
    ) -> io::Result<(LeafOut, End)> {
        let mut dec = match cte {
            Cte::Identity => Dec::Identity,
            Cte::Base64 => Dec::B64(Box::default()),
            Cte::Qp => Dec::Qp(Box::default()),
        };
        let mut out = LeafOut {
            primary: self.spill(),
            alpha: None,
            prefix: None,
            full: false,
        };
        let mut hold: Vec<u8> = Vec::with_capacity(2);
        let mut end = End::Eof;
        while let Some(p) = src.next_piece()? {
            if LineSrc::whole_line(&p) {
                if let Some((idx, close)) = delimiter(src.bytes(&p), stack) {
                    end = End::Delim { idx, close };
                    break;
                }
            }
            let held = std::mem::take(&mut hold);
            self.feed(&mut dec, &mut out, &held, path, interpretations);
            hold = held;
            hold.clear();
            let (body, eol) = split_eol(src.bytes(&p), &p);
            self.feed(&mut dec, &mut out, body, path, interpretations);
            hold.extend_from_slice(eol);
        }
        // The line break before a delimiter belongs to it; at the end of input it is data.
        if end == End::Eof && !hold.is_empty() {
            let held = std::mem::take(&mut hold);
            self.feed(&mut dec, &mut out, &held, path, interpretations);
        }
        self.finish_dec(&mut dec, &mut out, path, interpretations);
        if out.primary.flush().is_err() {
            self.report.add(Reason::Staging, path);
        }
        if let Some(a) = out.alpha.as_mut() {
            if a.flush().is_err() {
                self.report.add(Reason::Staging, path);
            }
        }
        Ok((out, end))
    }

    /// Writes decoded bytes to `spill` within the extraction limit.
    fn put(&mut self, spill: &mut Spill, full: &mut bool, data: &[u8], path: &str) {
        if *full || data.is_empty() {
            return;
        }
        let room = self
            .limits
            .max_extract_bytes
            .saturating_sub(self.report.extracted);
        let take = (data.len() as u64).min(room) as usize;
        if take > 0 {
            match spill.write(&data[..take]) {
                Ok(()) => self.report.extracted += take as u64,
                Err(SpillError::NoStaging) | Err(SpillError::Io(_)) => {
                    self.report.add(Reason::Staging, path);
                    *full = true;
                    return;
                }
            }
        }
        if take < data.len() {
            self.report.add(Reason::SizeLimit, path);
            *full = true;
            self.stop = true;
        }
    }

    fn feed(
        &mut self,
        dec: &mut Dec,
        out: &mut LeafOut,
        input: &[u8],
        path: &str,
        interpretations: bool,
    ) {
        if input.is_empty() {
            return;
        }
        match dec {
            Dec::Identity => {
                let mut full = out.full;
                self.put(&mut out.primary, &mut full, input, path);
                out.full = full;
            }
            Dec::Qp(d) => {
                d.feed(input);
                let data = std::mem::take(&mut d.out);
                let mut full = out.full;
                self.put(&mut out.primary, &mut full, &data, path);
                out.full = full;
                d.out = data;
                d.out.clear();
            }
            Dec::B64(d) => {
                d.feed(input);
                self.drain_b64(d, out, path, interpretations);
            }
        }
    }

    fn drain_b64(
        &mut self,
        d: &mut Base64Decoder,
        out: &mut LeafOut,
        path: &str,
        interpretations: bool,
    ) {
        let data = std::mem::take(&mut d.out);
        let mut full = out.full;
        self.put(&mut out.primary, &mut full, &data, path);
        out.full = full;
        d.out = data;
        d.drain_out(|_| {});
        if let Some(div) = d.take_divergence() {
            self.diverge(d, out, div, path, interpretations);
        }
        if let Some(mut a) = out.alpha.take() {
            let data = std::mem::take(&mut d.alpha_out);
            let mut afull = false;
            self.put(&mut a, &mut afull, &data, path);
            d.alpha_out = data;
            d.alpha_out.clear();
            out.alpha = Some(a);
        } else {
            d.alpha_out.clear();
        }
    }

    fn diverge(
        &mut self,
        d: &mut Base64Decoder,
        out: &mut LeafOut,
        div: super::decode::Divergence,
        path: &str,
        interpretations: bool,
    ) {
        if !interpretations {
            d.stop_alpha();
            return;
        }
        let budget = self.limits.max_interpretations;
        if self.report.extra_interpretations < budget {
            self.report.extra_interpretations += 1;
            let mut a = self.spill();
            if out.primary.flush().is_ok() {
                let n = div.alpha_prefix_len.min(out.primary.len());
                if a.copy_prefix(&out.primary, n).is_ok() {
                    self.report.extracted += n;
                    out.alpha = Some(a);
                } else {
                    self.report.add(Reason::Staging, path);
                    d.stop_alpha();
                }
            }
        } else {
            self.report.add(Reason::InterpretationLimit, path);
            d.stop_alpha();
        }
        if let Some(n) = div.padded_prefix_len {
            if self.report.extra_interpretations < budget {
                self.report.extra_interpretations += 1;
                out.prefix = Some(n);
            } else {
                self.report.add(Reason::InterpretationLimit, path);
            }
        }
    }

    fn finish_dec(&mut self, dec: &mut Dec, out: &mut LeafOut, path: &str, interpretations: bool) {
        match dec {
            Dec::Identity => {}
            Dec::Qp(d) => {
                d.finish();
                let data = std::mem::take(&mut d.out);
                let mut full = out.full;
                self.put(&mut out.primary, &mut full, &data, path);
                out.full = full;
            }
            Dec::B64(d) => {
                d.finish();
                self.drain_b64(d, out, path, interpretations);
                if d.stats.is_error() {
                    self.report.add(Reason::Base64Error, path);
                }
            }
        }
    }

    fn leaf(
        &mut self,
        src: &mut LineSrc<'_>,
        ent: &Entity,
        cte: Cte,
        depth: usize,
        stack: &mut [Vec<u8>],
        path: &str,
    ) -> io::Result<End> {
        if self.report.leaves >= self.limits.max_parts {
            self.report.add(Reason::PartLimit, path);
            self.stop = true;
            return Ok(End::Eof);
        }
        self.report.leaves += 1;
        let (out, end) = self.decode_body(src, cte, stack, path, true)?;
        let mut info = PartInfo {
            index: self.report.leaves,
            path: path.to_string(),
            content_type: ent.ctype.mimetype.to_ascii_lowercase(),
            name: ent.name.clone(),
            encoding: if ent.cte_raw.is_empty() {
                "7bit".into()
            } else {
                crate::text::cut(&ent.cte_raw, 40).into_owned()
            },
            interpretation: None,
            size: out.primary.len(),
            depth,
        };
        self.sink.part(&info, &out.primary, out.primary.len());
        if let Some(n) = out.prefix {
            info.interpretation = Some(Interp::PaddedPrefix);
            info.size = n;
            self.sink.part(&info, &out.primary, n);
        }
        if let Some(a) = &out.alpha {
            info.interpretation = Some(Interp::AlphabetOnly);
            info.size = a.len();
            self.sink.part(&info, a, a.len());
        }
        Ok(end)
    }
}

/// The content of a piece without its line break, and the line break.
fn split_eol<'a>(b: &'a [u8], p: &Piece) -> (&'a [u8], &'a [u8]) {
    if !p.ends_line {
        return (b, &[]);
    }
    let n = if b.ends_with(b"\r\n") { 2 } else { 1 };
    b.split_at(b.len().saturating_sub(n))
}

struct CountingReader<'a> {
    r: &'a mut dyn Read,
    n: u64,
}

impl Read for CountingReader<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let k = self.r.read(buf)?;
        self.n += k as u64;
        Ok(k)
    }
}

/// A sink that collects every part in memory (tests, fuzzing).
#[derive(Default)]
pub struct Collect {
    pub parts: Vec<(PartInfo, Vec<u8>)>,
}

impl Sink for Collect {
    fn part(&mut self, info: &PartInfo, content: &Spill, len: u64) {
        let mut v = Vec::new();
        let _ = content.reader(len).read_to_end(&mut v);
        self.parts.push((info.clone(), v));
    }
}

/// Walks `msg` in memory with `limits` (no staging: parts over the memory threshold are
/// refused as [`Reason::Staging`]).
pub fn walk_bytes(msg: &[u8], limits: Limits) -> (Collect, WalkReport) {
    let mut sink = Collect::default();
    let report = {
        let mut w = Walker::new(limits, None, &mut sink);
        let mut r = msg;
        w.walk_message(&mut r)
    };
    (sink, report)
}

#[cfg(test)]
mod tests;
