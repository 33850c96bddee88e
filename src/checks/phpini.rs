//! php.ini parsing: the settings PHP would use from a php.ini plus its scan directory.
//!
//! Later assignments override earlier ones (as PHP does), across files in the order merged.
//! `[HOST=...]` and `[PATH=...]` sections apply only to some requests and are ignored
//! (like sshd Match blocks); any other section name is just grouping.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// A setting and where it was set.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IniValue {
    pub value: String,
    pub file: PathBuf,
    /// 1-based line number.
    pub line: usize,
}

/// One parsed line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum IniLine {
    Blank,
    Section(String),
    /// Lower-case key, unquoted value.
    Assign(String, String),
}

/// Why a php.ini line was rejected.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum IniLineError {
    NoEquals,
    EmptyKey,
    UnterminatedSection,
    UnterminatedQuote,
}

/// Parses one line.
pub fn parse_ini_line(line: &str) -> Result<IniLine, IniLineError> {
    let t = line.trim();
    if t.is_empty() || t.starts_with(';') || t.starts_with('#') {
        return Ok(IniLine::Blank);
    }
    if let Some(rest) = t.strip_prefix('[') {
        let end = rest.find(']').ok_or(IniLineError::UnterminatedSection)?;
        return Ok(IniLine::Section(
            rest.get(..end).unwrap_or("").trim().to_string(),
        ));
    }
    let (key, value) = t.split_once('=').ok_or(IniLineError::NoEquals)?;
    let key = key.trim();
    if key.is_empty() {
        return Err(IniLineError::EmptyKey);
    }
    let value = value.trim();
    let value = if let Some(q) = value.strip_prefix('"') {
        let end = q.find('"').ok_or(IniLineError::UnterminatedQuote)?;
        q.get(..end).unwrap_or("").to_string()
    } else {
        let v = value.split(';').next().unwrap_or("").trim();
        v.trim_matches('\'').to_string()
    };
    Ok(IniLine::Assign(key.to_ascii_lowercase(), value))
}

/// PHP's reading of a boolean setting: `Some(true)` for on/yes/true/stdout/stderr/non-zero
/// numbers, `Some(false)` for off/no/false/none/0/empty, `None` otherwise.
pub fn ini_bool(v: &str) -> Option<bool> {
    let l = v.trim().to_ascii_lowercase();
    match l.as_str() {
        "on" | "yes" | "true" | "stdout" | "stderr" => Some(true),
        "off" | "no" | "false" | "none" | "" => Some(false),
        _ => l.parse::<i64>().ok().map(|n| n != 0),
    }
}

/// Settings merged from one or more ini files.
#[derive(Clone, Debug, Default)]
pub struct PhpIni {
    pub values: BTreeMap<String, IniValue>,
    pub files: Vec<PathBuf>,
    pub bad_lines: usize,
}

impl PhpIni {
    /// Merges one file's text over what is already there.
    pub fn merge_text(&mut self, text: &str, file: &Path) {
        self.files.push(file.to_path_buf());
        let mut conditional = false;
        for (i, line) in text.split('\n').enumerate() {
            match parse_ini_line(line) {
                Ok(IniLine::Blank) => {}
                Ok(IniLine::Section(name)) => {
                    let n = name.to_ascii_uppercase();
                    conditional = n.starts_with("HOST=") || n.starts_with("PATH=");
                }
                Ok(IniLine::Assign(k, v)) if !conditional => {
                    self.values.insert(
                        k,
                        IniValue {
                            value: v,
                            file: file.to_path_buf(),
                            line: i + 1,
                        },
                    );
                }
                Ok(IniLine::Assign(..)) => {}
                Err(_) => self.bad_lines += 1,
            }
        }
    }

    pub fn get(&self, key: &str) -> Option<&IniValue> {
        self.values.get(key)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checks::testutil::garbage;

    #[test]
    fn parses_lines() {
        assert_eq!(parse_ini_line("; c"), Ok(IniLine::Blank));
        assert_eq!(
            parse_ini_line("expose_php = On ; comment"),
            Ok(IniLine::Assign("expose_php".into(), "On".into()))
        );
        assert_eq!(
            parse_ini_line("disable_functions = \"exec;system\""),
            Ok(IniLine::Assign(
                "disable_functions".into(),
                "exec;system".into()
            ))
        );
        assert_eq!(parse_ini_line("[PHP]"), Ok(IniLine::Section("PHP".into())));
        assert_eq!(parse_ini_line("novalue"), Err(IniLineError::NoEquals));
        assert_eq!(parse_ini_line("= x"), Err(IniLineError::EmptyKey));
        assert_eq!(
            parse_ini_line("[PHP"),
            Err(IniLineError::UnterminatedSection)
        );
        assert_eq!(
            parse_ini_line("a = \"x"),
            Err(IniLineError::UnterminatedQuote)
        );
    }

    #[test]
    fn later_values_win_and_host_sections_are_ignored() {
        let mut ini = PhpIni::default();
        ini.merge_text(
            "[PHP]\nexpose_php = On\ndisplay_errors=Off\n[HOST=dev.example]\ndisplay_errors = On\n",
            Path::new("/etc/php.ini"),
        );
        ini.merge_text("expose_php = Off\n", Path::new("/etc/php.d/90-x.ini"));
        assert_eq!(ini.get("expose_php").unwrap().value, "Off");
        assert_eq!(ini.get("expose_php").unwrap().line, 1);
        assert_eq!(ini.get("display_errors").unwrap().value, "Off");
    }

    #[test]
    fn booleans() {
        assert_eq!(ini_bool("On"), Some(true));
        assert_eq!(ini_bool("stderr"), Some(true));
        assert_eq!(ini_bool("0"), Some(false));
        assert_eq!(ini_bool(""), Some(false));
        assert_eq!(ini_bool("maybe"), None);
    }

    #[test]
    fn garbage_never_panics() {
        for seed in 0..300 {
            let g = garbage(seed, 600);
            let mut ini = PhpIni::default();
            ini.merge_text(&String::from_utf8_lossy(&g), Path::new("/x"));
        }
    }
}
