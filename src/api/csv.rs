//! CSV output for `/api/v1/history/csv`: RFC 4180 with spreadsheet formula neutralisation.
//!
//! Guarantees:
//! - Records end with CRLF. A field containing a comma, a double quote, CR or LF is enclosed
//!   in double quotes with its quotes doubled; other fields are written as they are.
//! - A field whose first character is `=`, `+`, `-`, `@`, TAB or CR gets a leading `'`.
//!   Spreadsheets (Excel, LibreOffice, Google Sheets) run such a cell as a formula, so an
//!   attacker who controls a logged value (a path, a user agent, a mail subject) could make an
//!   operator's spreadsheet fetch URLs (`=HYPERLINK`, `=WEBSERVICE`) or run DDE commands. The
//!   apostrophe makes the cell text and is not displayed. It is added *before* quoting
//!   because the quotes are CSV syntax the spreadsheet strips: the apostrophe must be the
//!   first character of the cell's content, inside the quotes (`"'=A1,B1"`), not in front of
//!   them, which would also break RFC 4180. The cost is that a value such as `-2` reads back
//!   as `'-2`; the history export holds text (checks, messages, paths, instants, labels), so
//!   no numeric column is affected.
//! - Any UTF-8 passes through unchanged; no byte-order mark is written.
//! - Each record is encoded in memory first and handed to the writer with one `write_all`.

use std::io::{self, Write};

/// First characters that make a spreadsheet read a cell as a formula.
const FORMULA_TRIGGERS: [char; 6] = ['=', '+', '-', '@', '\t', '\r'];

/// Writes RFC 4180 records to `W` (wrap a socket or file in a `BufWriter`).
#[derive(Debug)]
pub struct CsvWriter<W: Write> {
    out: W,
    buf: Vec<u8>,
    records: u64,
    neutralised: u64,
}

impl<W: Write> CsvWriter<W> {
    pub fn new(out: W) -> Self {
        CsvWriter {
            out,
            buf: Vec::with_capacity(256),
            records: 0,
            neutralised: 0,
        }
    }

    /// Writes one record. An empty slice writes an empty line; a single empty field is
    /// written as `""` so that it reads back as one field.
    pub fn write_record(&mut self, fields: &[&str]) -> io::Result<()> {
        self.buf.clear();
        let mut neutralised = 0;
        for (i, field) in fields.iter().enumerate() {
            if i > 0 {
                self.buf.push(b',');
            }
            if encode_field(field, &mut self.buf) {
                neutralised += 1;
            }
        }
        if fields == [""] {
            self.buf.extend_from_slice(b"\"\"");
        }
        self.buf.extend_from_slice(b"\r\n");
        self.out.write_all(&self.buf)?;
        self.records += 1;
        self.neutralised += neutralised;
        Ok(())
    }

    /// Records written successfully.
    pub fn records_written(&self) -> u64 {
        self.records
    }

    /// Cells that received a leading `'` (in successfully written records).
    pub fn cells_neutralised(&self) -> u64 {
        self.neutralised
    }

    pub fn flush(&mut self) -> io::Result<()> {
        self.out.flush()
    }

    pub fn get_ref(&self) -> &W {
        &self.out
    }

    pub fn into_inner(self) -> W {
        self.out
    }
}

/// Whether a spreadsheet would read `field` as a formula.
pub fn is_formula_like(field: &str) -> bool {
    field
        .chars()
        .next()
        .is_some_and(|c| FORMULA_TRIGGERS.contains(&c))
}

/// Appends one encoded field to `out`; returns whether it was neutralised.
fn encode_field(field: &str, out: &mut Vec<u8>) -> bool {
    let neutralise = is_formula_like(field);
    let quote = field
        .bytes()
        .any(|b| matches!(b, b',' | b'"' | b'\r' | b'\n'));
    if quote {
        out.push(b'"');
    }
    if neutralise {
        out.push(b'\'');
    }
    if quote {
        for part in field.split('"').enumerate() {
            if part.0 > 0 {
                out.extend_from_slice(b"\"\"");
            }
            out.extend_from_slice(part.1.as_bytes());
        }
        out.push(b'"');
    } else {
        out.extend_from_slice(field.as_bytes());
    }
    neutralise
}

#[cfg(test)]
mod tests {
    use super::*;

    fn csv(records: &[&[&str]]) -> String {
        let mut w = CsvWriter::new(Vec::new());
        for r in records {
            w.write_record(r).unwrap();
        }
        String::from_utf8(w.into_inner()).unwrap()
    }

    /// A minimal RFC 4180 reader, to check that output reads back.
    fn parse(s: &str) -> Vec<Vec<String>> {
        let mut rows = Vec::new();
        let mut row = Vec::new();
        let mut field = String::new();
        let mut chars = s.chars().peekable();
        let mut quoted = false;
        while let Some(c) = chars.next() {
            match (quoted, c) {
                (true, '"') if chars.peek() == Some(&'"') => {
                    chars.next();
                    field.push('"');
                }
                (true, '"') => quoted = false,
                (true, c) => field.push(c),
                (false, '"') => quoted = true,
                (false, ',') => row.push(std::mem::take(&mut field)),
                (false, '\r') => {
                    assert_eq!(chars.next(), Some('\n'), "bare CR outside quotes");
                    row.push(std::mem::take(&mut field));
                    rows.push(std::mem::take(&mut row));
                }
                (false, '\n') => panic!("bare LF outside quotes"),
                (false, c) => field.push(c),
            }
        }
        assert!(
            !quoted && field.is_empty() && row.is_empty(),
            "unterminated"
        );
        rows
    }

    #[test]
    fn plain_fields_and_crlf() {
        assert_eq!(
            csv(&[&["a", "b c", ""], &["1", "2", "3"]]),
            "a,b c,\r\n1,2,3\r\n"
        );
    }

    #[test]
    fn quoting() {
        assert_eq!(csv(&[&["a,b"]]), "\"a,b\"\r\n");
        assert_eq!(csv(&[&["say \"hi\""]]), "\"say \"\"hi\"\"\"\r\n");
        assert_eq!(csv(&[&["\""]]), "\"\"\"\"\r\n");
        assert_eq!(csv(&[&["line1\nline2", "x"]]), "\"line1\nline2\",x\r\n");
        assert_eq!(csv(&[&["a\r\nb"]]), "\"a\r\nb\"\r\n");
        assert_eq!(csv(&[&["a\rb"]]), "\"a\rb\"\r\n");
    }

    #[test]
    fn empty_records() {
        assert_eq!(csv(&[&[]]), "\r\n");
        assert_eq!(csv(&[&[""]]), "\"\"\r\n");
        assert_eq!(parse(&csv(&[&[""]])), vec![vec![String::new()]]);
        assert_eq!(csv(&[&["", ""]]), ",\r\n");
    }

    #[test]
    fn formula_cells_are_neutralised() {
        assert_eq!(
            csv(&[&["=HYPERLINK(\"http://x\",\"click\")"]]),
            "\"'=HYPERLINK(\"\"http://x\"\",\"\"click\"\")\"\r\n"
        );
        assert_eq!(csv(&[&["-2+3"]]), "'-2+3\r\n");
        assert_eq!(csv(&[&["+1"]]), "'+1\r\n");
        assert_eq!(csv(&[&["@SUM(A1:A9)"]]), "'@SUM(A1:A9)\r\n");
        assert_eq!(csv(&[&["\tcmd"]]), "'\tcmd\r\n");
        assert_eq!(csv(&[&["\r=1"]]), "\"'\r=1\"\r\n");
        assert_eq!(csv(&[&["=1,2"]]), "\"'=1,2\"\r\n");
        // Only the first character matters.
        assert_eq!(csv(&[&["a=1", " =1", "x-2"]]), "a=1, =1,x-2\r\n");
    }

    #[test]
    fn neutralised_cells_read_back_with_apostrophe() {
        let out = csv(&[&["=cmd|' /C calc'!A0", "ok"]]);
        assert_eq!(parse(&out), vec![vec!["'=cmd|' /C calc'!A0", "ok"]]);
    }

    #[test]
    fn unicode_passes_through() {
        let s = "Zürich ✓ 日本語 🚀";
        assert_eq!(csv(&[&[s, "ünï,cödé"]]), format!("{s},\"ünï,cödé\"\r\n"));
        assert_eq!(csv(&[&["＝1"]]), "＝1\r\n");
    }

    #[test]
    fn counters() {
        let mut w = CsvWriter::new(Vec::new());
        w.write_record(&["check", "message"]).unwrap();
        w.write_record(&["=1", "-2"]).unwrap();
        assert_eq!(w.records_written(), 2);
        assert_eq!(w.cells_neutralised(), 2);
        w.flush().unwrap();
        assert!(!w.get_ref().is_empty());
    }

    #[test]
    fn write_error_is_returned_and_not_counted() {
        struct Broken;
        impl Write for Broken {
            fn write(&mut self, _: &[u8]) -> io::Result<usize> {
                Err(io::Error::new(io::ErrorKind::BrokenPipe, "gone"))
            }
            fn flush(&mut self) -> io::Result<()> {
                Ok(())
            }
        }
        let mut w = CsvWriter::new(Broken);
        assert!(w.write_record(&["=a"]).is_err());
        assert_eq!((w.records_written(), w.cells_neutralised()), (0, 0));
    }

    /// Random fields (xorshift, no dependency) always read back as written, apart from the
    /// apostrophe on formula-like cells.
    #[test]
    fn random_fields_round_trip() {
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        const PIECES: [&str; 12] = [
            "a", ",", "\"", "\r", "\n", "=", "-", "@", "\t", "+", "é", " ",
        ];
        for _ in 0..5_000 {
            let n = 1 + (next() % 5) as usize;
            let fields: Vec<String> = (0..n)
                .map(|_| {
                    let len = (next() % 8) as usize;
                    (0..len)
                        .map(|_| PIECES[(next() % PIECES.len() as u64) as usize])
                        .collect()
                })
                .collect();
            let refs: Vec<&str> = fields.iter().map(String::as_str).collect();
            let out = csv(&[&refs]);
            assert!(out.ends_with("\r\n"));
            let expect: Vec<String> = fields
                .iter()
                .map(|f| {
                    if is_formula_like(f) {
                        format!("'{f}")
                    } else {
                        f.clone()
                    }
                })
                .collect();
            assert_eq!(parse(&out), vec![expect], "{out:?}");
        }
    }
}
