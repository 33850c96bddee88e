//! A PHP tokenizer for the taint analysis: just enough of the language to tell code from
//! inline HTML, comments and strings, and to see which variables a double-quoted string,
//! heredoc or backtick command interpolates. It works on bytes, never fails and never
//! panics; it stops at [`MAX_TOKENS`] tokens (the caller counts the refusal).

/// Tokens kept at most per file; past that the file is analysed no further.
pub const MAX_TOKENS: usize = 200_000;

/// A variable interpolated into a string: its name (without `$`) and the first array key
/// when one follows (`"$_SERVER[HTTP_X]"`, `"{$_GET['a']}"`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Interp {
    pub name: String,
    pub key: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Kind {
    /// `$name` (the name without `$`).
    Var(String),
    /// An identifier or keyword, lower-cased, a leading namespace `\` removed.
    Ident(String),
    /// A string literal: its body as written (escapes left in) and what it interpolates
    /// (always empty for single-quoted strings and nowdocs).
    Str {
        body: String,
        vars: Vec<Interp>,
    },
    /// A backtick command and what it interpolates.
    Backtick {
        vars: Vec<Interp>,
    },
    /// A cast to a scalar that cannot carry code: `(int)`, `(bool)`, `(float)`...
    ScalarCast,
    Number,
    /// An operator or punctuation, as written.
    Op(&'static str),
    /// `?>`: ends a statement like `;`.
    CloseTag,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Token {
    pub kind: Kind,
    pub line: u32,
}

/// The tokens of one file, and whether [`MAX_TOKENS`] cut it short.
#[derive(Debug, Default)]
pub struct Tokens {
    pub tokens: Vec<Token>,
    pub truncated: bool,
}

/// Operators, longest first (a prefix never shadows a longer operator).
const OPS: [&str; 47] = [
    "<=>", "**=", "...", "<<=", ">>=", "===", "!==", "??=", "?->", ".=", "->", "::", "=>", "==",
    "!=", "<>", "??", "<=", ">=", "&&", "||", "++", "--", "+=", "-=", "*=", "/=", "%=", "&=", "|=",
    "^=", "<<", ">>", "**", "=", ".", "(", ")", "[", "]", "{", "}", ";", ",", "?", ":", "!",
];

/// Casts that leave no string behind.
const SCALAR_CASTS: [&str; 7] = [
    "int", "integer", "bool", "boolean", "float", "double", "real",
];

fn ident_start(b: u8) -> bool {
    b.is_ascii_alphabetic() || b == b'_' || b >= 0x80
}

fn ident_byte(b: u8) -> bool {
    ident_start(b) || b.is_ascii_digit()
}

struct Lexer<'a> {
    src: &'a [u8],
    pos: usize,
    line: u32,
    out: Tokens,
}

/// Splits `src` into tokens; inline HTML outside `<?php ... ?>` is skipped.
pub fn tokenize(src: &[u8]) -> Tokens {
    let mut lx = Lexer {
        src,
        pos: 0,
        line: 1,
        out: Tokens::default(),
    };
    lx.run();
    lx.out
}

impl Lexer<'_> {
    fn peek(&self, off: usize) -> u8 {
        self.src.get(self.pos + off).copied().unwrap_or(0)
    }

    fn starts_with_ci(&self, s: &[u8]) -> bool {
        self.src
            .get(self.pos..self.pos + s.len())
            .is_some_and(|w| w.eq_ignore_ascii_case(s))
    }

    /// Moves `n` bytes on, counting lines.
    fn advance(&mut self, n: usize) {
        let end = (self.pos + n).min(self.src.len());
        self.line = self
            .line
            .saturating_add(memchr::memchr_iter(b'\n', &self.src[self.pos..end]).count() as u32);
        self.pos = end;
    }

    fn push(&mut self, kind: Kind, line: u32) -> bool {
        if self.out.tokens.len() >= MAX_TOKENS {
            self.out.truncated = true;
            return false;
        }
        self.out.tokens.push(Token { kind, line });
        true
    }

    fn run(&mut self) {
        while self.pos < self.src.len() {
            self.skip_html();
            if !self.php() {
                return;
            }
        }
    }

    /// Skips inline HTML up to and including the next open tag.
    fn skip_html(&mut self) {
        while self.pos < self.src.len() {
            let Some(at) = memchr::memchr(b'<', &self.src[self.pos..]) else {
                self.advance(self.src.len() - self.pos);
                return;
            };
            self.advance(at);
            if self.starts_with_ci(b"<?php") {
                self.advance(5);
                return;
            }
            if self.starts_with_ci(b"<?=") {
                self.advance(3);
                return;
            }
            if self.starts_with_ci(b"<?") && !self.starts_with_ci(b"<?xml") {
                self.advance(2);
                return;
            }
            self.advance(1);
        }
    }

    /// Tokens up to the next `?>`; false when the token cap was reached.
    fn php(&mut self) -> bool {
        while self.pos < self.src.len() {
            let line = self.line;
            let b = self.peek(0);
            match b {
                b' ' | b'\t' | b'\r' | b'\n' | 0x0b | 0x0c => self.advance(1),
                b'?' if self.peek(1) == b'>' => {
                    self.advance(2);
                    return self.push(Kind::CloseTag, line);
                }
                b'#' if self.peek(1) == b'[' => {
                    // A PHP 8 attribute: its brackets are ordinary tokens.
                    self.advance(1);
                }
                b'#' => self.line_comment(),
                b'/' if self.peek(1) == b'/' => self.line_comment(),
                b'/' if self.peek(1) == b'*' => self.block_comment(),
                b'\'' => {
                    let body = self.single_quoted();
                    if !self.push(
                        Kind::Str {
                            body,
                            vars: Vec::new(),
                        },
                        line,
                    ) {
                        return false;
                    }
                }
                b'"' | b'`' => {
                    let (body, vars) = self.interpolated(b);
                    let kind = if b == b'"' {
                        Kind::Str { body, vars }
                    } else {
                        Kind::Backtick { vars }
                    };
                    if !self.push(kind, line) {
                        return false;
                    }
                }
                b'<' if self.starts_with_ci(b"<<<") => {
                    let Some(kind) = self.heredoc() else {
                        // Not a heredoc after all: the shift operator and `<`.
                        self.advance(3);
                        if !self.push(Kind::Op("<<"), line) {
                            return false;
                        }
                        continue;
                    };
                    if !self.push(kind, line) {
                        return false;
                    }
                }
                b'$' if ident_start(self.peek(1)) => {
                    self.advance(1);
                    let name = self.ident_text();
                    if !self.push(Kind::Var(name), line) {
                        return false;
                    }
                }
                b'\\' if ident_start(self.peek(1)) => self.advance(1),
                _ if ident_start(b) => {
                    let name = self.ident_text().to_ascii_lowercase();
                    if !self.push(Kind::Ident(name), line) {
                        return false;
                    }
                }
                _ if b.is_ascii_digit() => {
                    while self.pos < self.src.len()
                        && (self.peek(0).is_ascii_alphanumeric()
                            || self.peek(0) == b'.'
                            || self.peek(0) == b'_')
                    {
                        self.advance(1);
                    }
                    if !self.push(Kind::Number, line) {
                        return false;
                    }
                }
                b'(' if self.scalar_cast() => {
                    if !self.push(Kind::ScalarCast, line) {
                        return false;
                    }
                }
                _ => {
                    let op = OPS.iter().find(|op| {
                        self.src
                            .get(self.pos..self.pos + op.len())
                            .is_some_and(|w| w == op.as_bytes())
                    });
                    match op {
                        Some(op) => {
                            self.advance(op.len());
                            if !self.push(Kind::Op(op), line) {
                                return false;
                            }
                        }
                        // Anything else (`$$`, `@`, `&`, `+`...) says nothing about flows.
                        None => self.advance(1),
                    }
                }
            }
        }
        true
    }

    fn ident_text(&mut self) -> String {
        let start = self.pos;
        while self.pos < self.src.len() && (ident_byte(self.peek(0)) || self.namespace_sep()) {
            self.pos += 1;
        }
        let text = String::from_utf8_lossy(&self.src[start..self.pos]);
        // `Foo\bar` calls `bar` in namespace Foo: only the last part names the function.
        match text.rfind('\\') {
            Some(i) => text[i + 1..].to_string(),
            None => text.into_owned(),
        }
    }

    /// A `\` inside a qualified name (followed by a name).
    fn namespace_sep(&self) -> bool {
        self.peek(0) == b'\\' && ident_start(self.peek(1))
    }

    /// `(` spaces `int` spaces `)` and the other scalar casts; consumed when it is one.
    fn scalar_cast(&mut self) -> bool {
        let mut i = self.pos + 1;
        let ws = |b: u8| b == b' ' || b == b'\t';
        while self.src.get(i).copied().is_some_and(ws) {
            i += 1;
        }
        let start = i;
        while self
            .src
            .get(i)
            .copied()
            .is_some_and(|b| b.is_ascii_alphabetic())
        {
            i += 1;
        }
        let word = &self.src[start..i];
        while self.src.get(i).copied().is_some_and(ws) {
            i += 1;
        }
        if self.src.get(i) != Some(&b')') {
            return false;
        }
        if !SCALAR_CASTS
            .iter()
            .any(|c| c.as_bytes().eq_ignore_ascii_case(word))
        {
            return false;
        }
        self.advance(i + 1 - self.pos);
        true
    }

    /// `//` or `#` up to the end of the line or a `?>` (which the caller then reads).
    fn line_comment(&mut self) {
        while self.pos < self.src.len() {
            match self.peek(0) {
                b'\n' => return,
                b'?' if self.peek(1) == b'>' => return,
                _ => self.pos += 1,
            }
        }
    }

    fn block_comment(&mut self) {
        let rest = &self.src[self.pos + 2..];
        let len = memchr::memmem::find(rest, b"*/").map_or(rest.len() + 2, |i| i + 4);
        self.advance(len);
    }

    fn single_quoted(&mut self) -> String {
        self.advance(1);
        let start = self.pos;
        while self.pos < self.src.len() {
            match self.peek(0) {
                b'\\' => self.advance(2),
                b'\'' => {
                    let body = String::from_utf8_lossy(&self.src[start..self.pos]).into_owned();
                    self.advance(1);
                    return body;
                }
                _ => self.advance(1),
            }
        }
        String::from_utf8_lossy(&self.src[start.min(self.src.len())..]).into_owned()
    }

    /// A double-quoted string or backtick command opened by `quote`.
    fn interpolated(&mut self, quote: u8) -> (String, Vec<Interp>) {
        self.advance(1);
        let start = self.pos;
        while self.pos < self.src.len() {
            match self.peek(0) {
                b'\\' => self.advance(2),
                b if b == quote => {
                    let raw = &self.src[start..self.pos];
                    self.advance(1);
                    return (
                        String::from_utf8_lossy(raw).into_owned(),
                        interpolations(raw),
                    );
                }
                _ => self.advance(1),
            }
        }
        let raw = &self.src[start.min(self.src.len())..];
        (
            String::from_utf8_lossy(raw).into_owned(),
            interpolations(raw),
        )
    }

    /// `<<<ID`, `<<<"ID"` (heredoc) or `<<<'ID'` (nowdoc) up to its closing identifier;
    /// None when no identifier follows `<<<`.
    fn heredoc(&mut self) -> Option<Kind> {
        let mut i = self.pos + 3;
        while matches!(self.src.get(i), Some(b' ' | b'\t')) {
            i += 1;
        }
        let quote = match self.src.get(i) {
            Some(q @ (b'\'' | b'"')) => {
                i += 1;
                Some(*q)
            }
            _ => None,
        };
        let id_start = i;
        if !self.src.get(i).copied().is_some_and(ident_start) {
            return None;
        }
        while self.src.get(i).copied().is_some_and(ident_byte) {
            i += 1;
        }
        let id = self.src[id_start..i].to_vec();
        if let Some(q) = quote {
            if self.src.get(i) != Some(&q) {
                return None;
            }
            i += 1;
        }
        // The body starts on the next line.
        let body_start = match memchr::memchr(b'\n', &self.src[i..]) {
            Some(n) => i + n + 1,
            None => self.src.len(),
        };
        // The closing identifier: first on its line (after indentation), not followed by a
        // name character.
        let mut line_start = body_start;
        let (body_end, after) = loop {
            if line_start >= self.src.len() {
                break (self.src.len(), self.src.len());
            }
            let mut j = line_start;
            while matches!(self.src.get(j), Some(b' ' | b'\t')) {
                j += 1;
            }
            if self.src[j..].starts_with(&id)
                && !self.src.get(j + id.len()).copied().is_some_and(ident_byte)
            {
                break (line_start, j + id.len());
            }
            line_start = match memchr::memchr(b'\n', &self.src[line_start..]) {
                Some(n) => line_start + n + 1,
                None => self.src.len(),
            };
        };
        let raw = &self.src[body_start.min(body_end)..body_end];
        let body = String::from_utf8_lossy(raw).into_owned();
        let vars = if quote == Some(b'\'') {
            Vec::new()
        } else {
            interpolations(raw)
        };
        self.advance(after - self.pos);
        Some(Kind::Str { body, vars })
    }
}

/// The variables a double-quoted body interpolates: `$a`, `$a[k]`, `$a['k']`, `{$a['k']}`,
/// `${a}`; `\$` is no variable.
pub fn interpolations(raw: &[u8]) -> Vec<Interp> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < raw.len() {
        match raw[i] {
            b'\\' => i += 2,
            b'$' if raw.get(i + 1) == Some(&b'{') => {
                // `${name}` or `${name[...]}`
                let (name, end) = name_at(raw, i + 2);
                if !name.is_empty() {
                    let (key, end) = key_at(raw, end);
                    out.push(Interp { name, key });
                    i = end;
                } else {
                    i += 2;
                }
            }
            b'$' => {
                let (name, end) = name_at(raw, i + 1);
                if name.is_empty() {
                    i += 1;
                } else {
                    let (key, end) = key_at(raw, end);
                    out.push(Interp { name, key });
                    i = end;
                }
            }
            _ => i += 1,
        }
    }
    out
}

fn name_at(raw: &[u8], start: usize) -> (String, usize) {
    if !raw.get(start).copied().is_some_and(ident_start) {
        return (String::new(), start);
    }
    let mut end = start;
    while raw.get(end).copied().is_some_and(ident_byte) {
        end += 1;
    }
    (String::from_utf8_lossy(&raw[start..end]).into_owned(), end)
}

/// `[key]` or `['key']` right after an interpolated name.
fn key_at(raw: &[u8], start: usize) -> (Option<String>, usize) {
    if raw.get(start) != Some(&b'[') {
        return (None, start);
    }
    let Some(close) = memchr::memchr(b']', &raw[start..]) else {
        return (None, start);
    };
    let inner = &raw[start + 1..start + close];
    let inner = inner
        .strip_prefix(b"'")
        .and_then(|k| k.strip_suffix(b"'"))
        .or_else(|| {
            inner
                .strip_prefix(b"\"")
                .and_then(|k| k.strip_suffix(b"\""))
        })
        .unwrap_or(inner);
    (
        Some(String::from_utf8_lossy(inner).into_owned()),
        start + close + 1,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kinds(src: &str) -> Vec<Kind> {
        tokenize(src.as_bytes())
            .tokens
            .into_iter()
            .map(|t| t.kind)
            .collect()
    }

    #[test]
    fn html_comments_and_strings_are_not_code() {
        let k = kinds("<p>eval($_GET[1])</p><?php // eval($x)\n# system($y)\n/* exec($z) */ 'eval($a)'; ?>x<?= $b ?>");
        assert_eq!(
            k,
            vec![
                Kind::Str {
                    body: "eval($a)".into(),
                    vars: vec![]
                },
                Kind::Op(";"),
                Kind::CloseTag,
                Kind::Var("b".into()),
                Kind::CloseTag,
            ]
        );
    }

    #[test]
    fn interpolation_heredoc_nowdoc_backticks_and_lines() {
        let t = tokenize(
            b"<?php\n$a = \"x{$_GET['c']} \\$no $_SERVER[HTTP_X]\";\n$h = <<<EOT\n  $v\n  EOT;\n$n = <<<'N'\n$w\nN;\n`ls $d`;\n\\System(1);(int) $i; ( float )$f;",
        );
        let k: Vec<_> = t.tokens.iter().map(|t| t.kind.clone()).collect();
        let interp = |name: &str, key: Option<&str>| Interp {
            name: name.into(),
            key: key.map(str::to_string),
        };
        assert!(
            matches!(&k[2], Kind::Str { vars, .. } if *vars == vec![interp("_GET", Some("c")), interp("_SERVER", Some("HTTP_X"))])
        );
        assert!(matches!(&k[6], Kind::Str { vars, .. } if *vars == vec![interp("v", None)]));
        assert!(matches!(&k[10], Kind::Str { vars, .. } if vars.is_empty()));
        assert_eq!(
            k[12],
            Kind::Backtick {
                vars: vec![interp("d", None)]
            }
        );
        assert_eq!(k[14], Kind::Ident("system".into()));
        assert_eq!(t.tokens[14].line, 10);
        assert_eq!(t.tokens[12].line, 9);
        assert!(k.contains(&Kind::ScalarCast));
        assert_eq!(k.iter().filter(|k| **k == Kind::ScalarCast).count(), 2);
    }

    #[test]
    fn never_panics_on_cut_input() {
        let src = b"<?php $a = \"{$x['y\" . <<<'E' `a $b ?> <?php /* ' \\";
        for end in 0..=src.len() {
            let _ = tokenize(&src[..end]);
        }
        let _ = tokenize(&[0xff, b'<', b'?', b'$', 0x80, b'"', b'$', b'{']);
    }

    #[test]
    fn the_token_cap_stops_the_lexer() {
        let src = format!("<?php {}", "$a;".repeat(MAX_TOKENS));
        let t = tokenize(src.as_bytes());
        assert!(t.truncated);
        assert_eq!(t.tokens.len(), MAX_TOKENS);
    }
}
