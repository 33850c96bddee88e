//! Tolerant, streaming base64 and quoted-printable decoders for mail bodies.
//!
//! Both decoders take input in chunks of any size (a chunk may end in the middle of a
//! quartet or an escape) and never fail: whatever cannot be decoded is counted in their
//! statistics and decoding goes on with the next byte.
//!
//! # Base64 ([`Base64Decoder`])
//!
//! Whitespace is skipped. Three interpretations of one body are defined; they differ only
//! when padding (`=`) closes a partial quartet and alphabet data follows it:
//!
//! | Interpretation | Rule |
//! |---|---|
//! | `quartet` (primary) | Characters outside the alphabet are skipped; `=` closes the quartet in progress (two characters give one byte, three give two) and decoding starts a fresh quartet after it, as for concatenated base64 documents. |
//! | `alphabet_only` | Every character outside `A-Z a-z 0-9 + /`, `=` included, is ignored (RFC 2045 section 6.8): the remaining characters form one stream. |
//! | `padded_prefix` | The primary output up to the first valid padding (a quartet closed by `=` after two or three characters), scanned on its own because many decoders stop there. |
//!
//! The alternative interpretations exist only once data follows such padding
//! ([`Base64Decoder::take_divergence`]); before that point all three are the primary
//! output, so the common case decodes once. A final quartet of two or three characters
//! without padding is decoded (missing padding is tolerated and not an error); a final
//! single character carries no whole byte and is reported as `truncated`.
//!
//! # Quoted-printable ([`QpDecoder`])
//!
//! `=XX` (hex digits in either case) is a byte; `=` before a line break, also with spaces or
//! tabs between, is a soft line break; any other `=` is a malformed escape kept literally
//! (`=` and what follows are output as they are, so nothing is lost); spaces and tabs at the
//! end of a line are removed (RFC 2045 section 6.7 rule 3).

/// Base64 alphabet value, or one of the classes below.
const WS: u8 = 64;
const PAD: u8 = 65;
const STRAY: u8 = 66;

const fn b64_table() -> [u8; 256] {
    let mut t = [STRAY; 256];
    let mut i = 0;
    while i < 26 {
        t[b'A' as usize + i] = i as u8;
        t[b'a' as usize + i] = 26 + i as u8;
        i += 1;
    }
    let mut d = 0;
    while d < 10 {
        t[b'0' as usize + d] = 52 + d as u8;
        d += 1;
    }
    t[b'+' as usize] = 62;
    t[b'/' as usize] = 63;
    t[b'=' as usize] = PAD;
    t[b' ' as usize] = WS;
    t[b'\t' as usize] = WS;
    t[b'\r' as usize] = WS;
    t[b'\n' as usize] = WS;
    t[0x0b] = WS;
    t[0x0c] = WS;
    t
}

static B64: [u8; 256] = b64_table();

/// What a base64 body contained besides clean data.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Base64Stats {
    /// Characters outside the alphabet, padding and whitespace (skipped).
    pub stray: u64,
    /// A quartet held a single character when it ended (6 bits, no whole byte).
    pub truncated: bool,
    /// Alphabet data followed valid padding (the body has several interpretations).
    pub data_after_padding: bool,
    /// The final quartet had two or three characters and no padding (tolerated).
    pub missing_padding: bool,
}

impl Base64Stats {
    /// Whether the body had a decoding error (a reason to report the message incompletely
    /// scanned): stray characters, a truncated quartet or data after padding. Missing final
    /// padding alone is not one.
    pub fn is_error(&self) -> bool {
        self.stray > 0 || self.truncated || self.data_after_padding
    }
}

/// Where the interpretations part, reported once ([`Base64Decoder::take_divergence`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Divergence {
    /// The `alphabet_only` output starts with this many bytes of the primary output; the
    /// rest comes from [`Base64Decoder::alpha_out`].
    pub alpha_prefix_len: u64,
    /// Length of the `padded_prefix` interpretation (a prefix of the primary output);
    /// `None` when the padding that diverged was not valid (a single character before `=`).
    pub padded_prefix_len: Option<u64>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    /// No padding that closed a partial quartet yet: one stream.
    Clean,
    /// Such padding was seen; the alternative state is parked until data follows.
    Padded,
    /// Data followed: the alphabet-only machine runs beside the primary one.
    Diverged,
}

/// Streaming tolerant base64 decoder (see the module docs).
pub struct Base64Decoder {
    acc: u32,
    n: u8,
    alpha_acc: u32,
    alpha_n: u8,
    phase: Phase,
    /// Primary (`quartet`) output not yet taken by the caller.
    pub out: Vec<u8>,
    /// `alphabet_only` output not yet taken (only after divergence, while tracked).
    pub alpha_out: Vec<u8>,
    track_alpha: bool,
    emitted: u64,
    alpha_prefix_len: u64,
    padded_prefix_len: Option<u64>,
    divergence: Option<Divergence>,
    pub stats: Base64Stats,
}

impl Default for Base64Decoder {
    fn default() -> Self {
        Self::new()
    }
}

impl Base64Decoder {
    pub fn new() -> Self {
        Base64Decoder {
            acc: 0,
            n: 0,
            alpha_acc: 0,
            alpha_n: 0,
            phase: Phase::Clean,
            out: Vec::with_capacity(64 * 1024),
            alpha_out: Vec::new(),
            track_alpha: true,
            emitted: 0,
            alpha_prefix_len: 0,
            padded_prefix_len: None,
            divergence: None,
            stats: Base64Stats::default(),
        }
    }

    /// The divergence point, once, right after the chunk in which data followed padding.
    pub fn take_divergence(&mut self) -> Option<Divergence> {
        self.divergence.take()
    }

    /// Stops producing `alphabet_only` output (the caller's interpretation budget is spent).
    pub fn stop_alpha(&mut self) {
        self.track_alpha = false;
        self.alpha_out = Vec::new();
    }

    #[inline]
    fn push3(&mut self, v: u32) {
        self.out
            .extend_from_slice(&[(v >> 16) as u8, (v >> 8) as u8, v as u8]);
    }

    /// Decodes a chunk. Output accumulates in [`Self::out`] (and [`Self::alpha_out`]).
    pub fn feed(&mut self, input: &[u8]) {
        let mut i = 0;
        let len = input.len();
        while i < len {
            // Fast path: whole quartets of alphabet characters on a clean stream.
            if self.phase == Phase::Clean && self.n == 0 {
                while i + 4 <= len {
                    let (a, b, c, d) = (
                        B64[input[i] as usize],
                        B64[input[i + 1] as usize],
                        B64[input[i + 2] as usize],
                        B64[input[i + 3] as usize],
                    );
                    if (a | b | c | d) >= 64 {
                        break;
                    }
                    let v = (u32::from(a) << 18)
                        | (u32::from(b) << 12)
                        | (u32::from(c) << 6)
                        | u32::from(d);
                    self.push3(v);
                    i += 4;
                }
                if i >= len {
                    break;
                }
            }
            let c = B64[input[i] as usize];
            i += 1;
            self.byte(c);
        }
    }

    /// Primary bytes produced so far (taken or pending).
    fn produced(&self) -> u64 {
        self.emitted + self.out.len() as u64
    }

    /// Takes [`Self::out`].
    pub fn take_out(&mut self) -> Vec<u8> {
        let v = std::mem::take(&mut self.out);
        self.emitted += v.len() as u64;
        self.out = Vec::with_capacity(64 * 1024);
        v
    }

    /// Drains [`Self::out`] into `f` without giving up its allocation.
    pub fn drain_out(&mut self, mut f: impl FnMut(&[u8])) {
        if !self.out.is_empty() {
            f(&self.out);
            self.emitted += self.out.len() as u64;
            self.out.clear();
        }
    }

    /// Drains [`Self::alpha_out`] into `f`.
    pub fn drain_alpha(&mut self, mut f: impl FnMut(&[u8])) {
        if !self.alpha_out.is_empty() {
            f(&self.alpha_out);
            self.alpha_out.clear();
        }
    }

    #[inline]
    fn byte(&mut self, c: u8) {
        match c {
            WS => {}
            STRAY => self.stats.stray += 1,
            PAD => self.pad(),
            v => {
                if self.phase == Phase::Padded {
                    self.phase = Phase::Diverged;
                    self.stats.data_after_padding = true;
                    self.divergence = Some(Divergence {
                        alpha_prefix_len: self.alpha_prefix_len,
                        padded_prefix_len: self.padded_prefix_len,
                    });
                }
                if self.phase == Phase::Diverged && self.track_alpha {
                    self.alpha_acc = (self.alpha_acc << 6) | u32::from(v);
                    self.alpha_n += 1;
                    if self.alpha_n == 4 {
                        let a = self.alpha_acc;
                        self.alpha_out.extend_from_slice(&[
                            (a >> 16) as u8,
                            (a >> 8) as u8,
                            a as u8,
                        ]);
                        self.alpha_acc = 0;
                        self.alpha_n = 0;
                    }
                }
                self.acc = (self.acc << 6) | u32::from(v);
                self.n += 1;
                if self.n == 4 {
                    let a = self.acc;
                    self.push3(a);
                    self.acc = 0;
                    self.n = 0;
                }
            }
        }
    }

    fn pad(&mut self) {
        if self.n == 0 {
            // Extra padding, or `=` where a quartet would start: nothing to close.
            return;
        }
        if self.phase == Phase::Clean {
            // The alphabet-only machine goes on from here, ignoring this `=`.
            self.alpha_acc = self.acc;
            self.alpha_n = self.n;
            self.alpha_prefix_len = self.produced();
        }
        let valid = self.flush_partial();
        if self.phase == Phase::Clean {
            self.padded_prefix_len = valid.then(|| self.produced());
            self.phase = Phase::Padded;
        }
    }

    /// Closes the quartet in progress; false when it held a single character.
    fn flush_partial(&mut self) -> bool {
        let (acc, n) = (self.acc, self.n);
        self.acc = 0;
        self.n = 0;
        match n {
            2 => {
                self.out.push((acc >> 4) as u8);
                true
            }
            3 => {
                self.out
                    .extend_from_slice(&[(acc >> 10) as u8, (acc >> 2) as u8]);
                true
            }
            1 => {
                self.stats.truncated = true;
                false
            }
            _ => true,
        }
    }

    /// Ends the body: a final partial quartet is decoded (missing padding tolerated).
    pub fn finish(&mut self) {
        if self.n >= 2 {
            self.stats.missing_padding = true;
        }
        self.flush_partial();
        if self.phase == Phase::Diverged && self.track_alpha {
            let (acc, n) = (self.alpha_acc, self.alpha_n);
            match n {
                2 => self.alpha_out.push((acc >> 4) as u8),
                3 => self
                    .alpha_out
                    .extend_from_slice(&[(acc >> 10) as u8, (acc >> 2) as u8]),
                _ => {}
            }
            self.alpha_n = 0;
        }
    }
}

/// Everything of a base64 body at once (tests, fuzzing, small bodies): the primary
/// output, the `alphabet_only` and `padded_prefix` interpretations when they exist, and
/// the statistics.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Base64All {
    pub quartet: Vec<u8>,
    pub alphabet_only: Option<Vec<u8>>,
    pub padded_prefix: Option<Vec<u8>>,
    pub stats: Base64Stats,
}

pub fn decode_base64(input: &[u8]) -> Base64All {
    let mut d = Base64Decoder::new();
    d.feed(input);
    d.finish();
    let div = d.take_divergence();
    let quartet = d.take_out();
    let mut all = Base64All {
        stats: d.stats,
        ..Base64All::default()
    };
    if let Some(div) = div {
        let mut alpha = quartet
            .get(..div.alpha_prefix_len as usize)
            .unwrap_or(&[])
            .to_vec();
        alpha.extend_from_slice(&d.alpha_out);
        all.alphabet_only = Some(alpha);
        all.padded_prefix = div
            .padded_prefix_len
            .and_then(|n| quartet.get(..n as usize).map(<[u8]>::to_vec));
    }
    all.quartet = quartet;
    all
}

/// What a quoted-printable body contained besides clean data.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct QpStats {
    /// `=` not followed by two hex digits or a line break: kept literally.
    pub malformed: u64,
    /// Soft line breaks removed.
    pub soft_breaks: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum QpState {
    Normal,
    /// After `=`.
    Eq,
    /// After `=` and one hex digit.
    Eq1(u8),
    /// After `=` and spaces or tabs (held in `held`).
    EqWs,
    /// After `=\r`.
    EqCr,
}

/// Streaming tolerant quoted-printable decoder (see the module docs).
pub struct QpDecoder {
    state: QpState,
    /// Spaces and tabs not yet known to be trailing (or, in `EqWs`, after `=`).
    held: Vec<u8>,
    pub out: Vec<u8>,
    pub stats: QpStats,
}

impl Default for QpDecoder {
    fn default() -> Self {
        Self::new()
    }
}

/// Most held whitespace: a longer run is not line-end padding and is output.
const MAX_HELD_WS: usize = 1024;

fn hex_val(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

const fn qp_special() -> [bool; 256] {
    let mut t = [false; 256];
    t[b'=' as usize] = true;
    t[b' ' as usize] = true;
    t[b'\t' as usize] = true;
    t[b'\r' as usize] = true;
    t[b'\n' as usize] = true;
    t
}

static QP_SPECIAL: [bool; 256] = qp_special();

impl QpDecoder {
    pub fn new() -> Self {
        QpDecoder {
            state: QpState::Normal,
            held: Vec::new(),
            out: Vec::with_capacity(64 * 1024),
            stats: QpStats::default(),
        }
    }

    /// Drains [`Self::out`] into `f`.
    pub fn drain_out(&mut self, mut f: impl FnMut(&[u8])) {
        if !self.out.is_empty() {
            f(&self.out);
            self.out.clear();
        }
    }

    fn flush_held(&mut self) {
        self.out.extend_from_slice(&self.held);
        self.held.clear();
    }

    pub fn feed(&mut self, input: &[u8]) {
        let mut i = 0;
        while i < input.len() {
            if self.state == QpState::Normal && self.held.is_empty() {
                let start = i;
                while i < input.len() && !QP_SPECIAL[input[i] as usize] {
                    i += 1;
                }
                self.out.extend_from_slice(&input[start..i]);
                if i >= input.len() {
                    break;
                }
            }
            let b = input[i];
            i += 1;
            self.byte(b);
        }
    }

    fn byte(&mut self, b: u8) {
        match self.state {
            QpState::Normal => match b {
                b' ' | b'\t' => {
                    if self.held.len() >= MAX_HELD_WS {
                        self.flush_held();
                    }
                    self.held.push(b);
                }
                b'\r' | b'\n' => {
                    // Trailing whitespace before a line break is transport padding.
                    self.held.clear();
                    self.out.push(b);
                }
                b'=' => {
                    self.flush_held();
                    self.state = QpState::Eq;
                }
                _ => {
                    self.flush_held();
                    self.out.push(b);
                }
            },
            QpState::Eq => match b {
                b'\n' => {
                    self.stats.soft_breaks += 1;
                    self.state = QpState::Normal;
                }
                b'\r' => self.state = QpState::EqCr,
                b' ' | b'\t' => {
                    self.held.push(b);
                    self.state = QpState::EqWs;
                }
                _ => match hex_val(b) {
                    Some(_) => self.state = QpState::Eq1(b),
                    None => {
                        self.stats.malformed += 1;
                        self.out.push(b'=');
                        self.state = QpState::Normal;
                        self.byte(b);
                    }
                },
            },
            QpState::Eq1(h) => match (hex_val(h), hex_val(b)) {
                (Some(hi), Some(lo)) => {
                    self.out.push((hi << 4) | lo);
                    self.state = QpState::Normal;
                }
                _ => {
                    self.stats.malformed += 1;
                    self.out.extend_from_slice(&[b'=', h]);
                    self.state = QpState::Normal;
                    self.byte(b);
                }
            },
            QpState::EqWs => match b {
                b' ' | b'\t' if self.held.len() < MAX_HELD_WS => self.held.push(b),
                b'\n' => {
                    self.held.clear();
                    self.stats.soft_breaks += 1;
                    self.state = QpState::Normal;
                }
                b'\r' => {
                    self.held.clear();
                    self.state = QpState::EqCr;
                }
                _ => {
                    self.stats.malformed += 1;
                    self.out.push(b'=');
                    self.flush_held();
                    self.state = QpState::Normal;
                    self.byte(b);
                }
            },
            QpState::EqCr => {
                self.stats.soft_breaks += 1;
                self.state = QpState::Normal;
                if b != b'\n' {
                    self.byte(b);
                }
            }
        }
    }

    /// Ends the body: a pending escape is output literally.
    pub fn finish(&mut self) {
        match self.state {
            QpState::Eq => {
                // `=` at the very end: a soft break without its line break.
                self.stats.soft_breaks += 1;
            }
            QpState::Eq1(h) => {
                self.stats.malformed += 1;
                self.out.extend_from_slice(&[b'=', h]);
            }
            QpState::EqWs => {
                self.held.clear();
                self.stats.soft_breaks += 1;
            }
            QpState::EqCr => self.stats.soft_breaks += 1,
            QpState::Normal => {}
        }
        self.flush_held();
        self.state = QpState::Normal;
    }
}

/// A whole quoted-printable body at once.
pub fn decode_qp(input: &[u8]) -> (Vec<u8>, QpStats) {
    let mut d = QpDecoder::new();
    d.feed(input);
    d.finish();
    (std::mem::take(&mut d.out), d.stats)
}

const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/// Standard padded base64 of `bytes`, with CRLF after every `line` characters (0: one
/// line). For building test messages and benchmarks.
pub fn encode_base64(bytes: &[u8], line: usize) -> String {
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4 + bytes.len() / 28);
    let mut col = 0;
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if line > 0 && col == line {
                out.push_str("\r\n");
                col = 0;
            }
            if i <= chunk.len() {
                out.push(char::from(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize]));
            } else {
                out.push('=');
            }
            col += 1;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encoder_round_trips() {
        let data: Vec<u8> = (0..=255u8).cycle().take(1000).collect();
        let e = encode_base64(&data, 76);
        assert!(e.lines().all(|l| l.trim_end().len() <= 76));
        let d = decode_base64(e.as_bytes());
        assert_eq!(d.quartet, data);
        assert!(!d.stats.is_error());
    }

    fn b64(s: &str) -> Base64All {
        decode_base64(s.as_bytes())
    }

    fn chunked_b64(input: &[u8], size: usize) -> Base64All {
        let mut d = Base64Decoder::new();
        let mut primary = Vec::new();
        let mut alpha = Vec::new();
        let mut div = None;
        for c in input.chunks(size.max(1)) {
            d.feed(c);
            d.drain_out(|b| primary.extend_from_slice(b));
            if let Some(x) = d.take_divergence() {
                div = Some(x);
            }
            d.drain_alpha(|b| alpha.extend_from_slice(b));
        }
        d.finish();
        d.drain_out(|b| primary.extend_from_slice(b));
        d.drain_alpha(|b| alpha.extend_from_slice(b));
        let mut all = Base64All {
            stats: d.stats,
            ..Default::default()
        };
        if let Some(div) = div {
            let mut a = primary[..div.alpha_prefix_len as usize].to_vec();
            a.extend_from_slice(&alpha);
            all.alphabet_only = Some(a);
            all.padded_prefix = div
                .padded_prefix_len
                .map(|n| primary[..n as usize].to_vec());
        }
        all.quartet = primary;
        all
    }

    #[test]
    fn clean_base64_with_line_breaks() {
        let r = b64("SGVsbG8s\r\nIHdvcmxk\r\nIQ==\r\n");
        assert_eq!(r.quartet, b"Hello, world!");
        assert_eq!(r.alphabet_only, None);
        assert_eq!(r.padded_prefix, None);
        assert!(!r.stats.is_error());
    }

    #[test]
    fn stray_characters_and_missing_padding_are_tolerated() {
        let r = b64("SGV!sbG8*sIHdv\x00cmxkIQ");
        assert_eq!(r.quartet, b"Hello, world!");
        assert_eq!(r.stats.stray, 3);
        assert!(r.stats.missing_padding);
        assert!(r.stats.is_error());
        let r = b64("SGVsbG8");
        assert_eq!(r.quartet, b"Hello");
        assert!(r.stats.missing_padding && !r.stats.is_error());
    }

    #[test]
    fn data_after_padding_gives_three_interpretations() {
        // "QQ==" is "A"; "QUJD" is "ABC".
        let r = b64("QQ==QUJD");
        assert_eq!(r.quartet, b"AABC");
        assert_eq!(r.padded_prefix.as_deref(), Some(&b"A"[..]));
        // Alphabet-only: "QQQUJD" -> 0x41 0x04 0x14 0x09 ...
        let alpha = r.alphabet_only.unwrap();
        assert_eq!(alpha, decode_base64(b"QQQUJD").quartet);
        assert!(r.stats.data_after_padding);
    }

    #[test]
    fn chunking_never_changes_the_result() {
        let inputs: &[&[u8]] = &[
            b"SGVsbG8s\r\nIHdvcmxk\r\nIQ==\r\n",
            b"QQ==QUJD\r\nZm9vYmFy=Zm9v",
            b"a!b@c#d$e%f^==g&h*i(j)",
            b"Q=QUJD",
            b"",
            b"====",
        ];
        for inp in inputs {
            let whole = decode_base64(inp);
            for size in 1..9 {
                assert_eq!(chunked_b64(inp, size), whole, "{inp:?} size {size}");
            }
        }
    }

    #[test]
    fn single_character_quartet_is_truncated() {
        let r = b64("QUJDR");
        assert_eq!(r.quartet, b"ABC");
        assert!(r.stats.truncated);
        let r = b64("Q=QUJD");
        assert!(r.stats.truncated && r.stats.data_after_padding);
        assert_eq!(r.padded_prefix, None);
        assert_eq!(r.quartet, b"ABC");
    }

    #[test]
    fn qp_decodes_escapes_soft_breaks_and_keeps_malformed_ones() {
        let (out, st) = decode_qp(b"caf=C3=A9 =\r\nsuite=3D  \r\nx=ZZ y=4 end=");
        assert_eq!(out, "café suite=\r\nx=ZZ y=4 end".as_bytes());
        assert_eq!(st.malformed, 2);
        assert_eq!(st.soft_breaks, 2);
        let (out, _) = decode_qp(b"a=  \nb=e9");
        assert_eq!(out, b"ab\xe9");
    }

    #[test]
    fn qp_chunking_never_changes_the_result() {
        let inp: &[u8] = b"caf=C3=A9 =\r\nsuite=3D  \r\nx=ZZ y=4 end=\nq=\r\r\n  \t \n=";
        let whole = decode_qp(inp);
        for size in 1..7 {
            let mut d = QpDecoder::new();
            let mut out = Vec::new();
            for c in inp.chunks(size) {
                d.feed(c);
                d.drain_out(|b| out.extend_from_slice(b));
            }
            d.finish();
            d.drain_out(|b| out.extend_from_slice(b));
            assert_eq!((out, d.stats), whole, "size {size}");
        }
    }

    #[test]
    fn garbage_never_panics() {
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        for len in 0..3000usize {
            let mut v = Vec::with_capacity(len % 200);
            for _ in 0..(len % 200) {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                v.push(b"AZaz09+/=\r\n \t!=\x00\xff"[(x % 17) as usize]);
            }
            let _ = decode_base64(&v);
            let _ = decode_qp(&v);
        }
    }
}
