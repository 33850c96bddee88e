//! `/proc/self/mountinfo` parsing (proc(5) format).

/// One mount.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MountEntry {
    /// Mount point, octal escapes (`\040`) decoded.
    pub mount_point: String,
    /// Per-mount options (field 6): `rw`, `nosuid`, `nodev`, `noexec`, ...
    pub options: Vec<String>,
    pub fstype: String,
    pub source: String,
    pub super_options: Vec<String>,
}

impl MountEntry {
    pub fn has_option(&self, opt: &str) -> bool {
        self.options.iter().any(|o| o == opt)
    }
}

/// Why a mountinfo line was rejected.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MountLineError {
    TooFewFields,
    MissingSeparator,
}

/// Decodes `\ooo` octal escapes.
pub fn unescape_octal(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while let Some(&c) = b.get(i) {
        if c == b'\\' {
            if let Some(d) = b.get(i + 1..i + 4) {
                if d.iter().all(|x| (b'0'..=b'7').contains(x)) {
                    let v = d.iter().fold(0u32, |a, x| a * 8 + u32::from(x - b'0'));
                    if let Ok(byte) = u8::try_from(v) {
                        out.push(byte);
                        i += 4;
                        continue;
                    }
                }
            }
        }
        out.push(c);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Parses one line:
/// `36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw,errors=continue`.
pub fn parse_mountinfo_line(line: &str) -> Result<MountEntry, MountLineError> {
    let f: Vec<&str> = line.split(' ').filter(|s| !s.is_empty()).collect();
    let (Some(mount_point), Some(options)) = (f.get(4), f.get(5)) else {
        return Err(MountLineError::TooFewFields);
    };
    let sep = f
        .iter()
        .skip(6)
        .position(|x| *x == "-")
        .map(|p| p + 6)
        .ok_or(MountLineError::MissingSeparator)?;
    let fstype = f.get(sep + 1).ok_or(MountLineError::TooFewFields)?;
    let source = f.get(sep + 2).copied().unwrap_or("");
    let super_opts = f.get(sep + 3).copied().unwrap_or("");
    let split = |s: &str| {
        s.split(',')
            .filter(|o| !o.is_empty())
            .map(str::to_string)
            .collect()
    };
    Ok(MountEntry {
        mount_point: unescape_octal(mount_point),
        options: split(options),
        fstype: unescape_octal(fstype),
        source: unescape_octal(source),
        super_options: split(super_opts),
    })
}

/// Parses a whole mountinfo file: entries and the count of bad lines.
pub fn parse_mountinfo(bytes: &[u8]) -> (Vec<MountEntry>, usize) {
    let text = String::from_utf8_lossy(bytes);
    let mut out = Vec::new();
    let mut bad = 0;
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        match parse_mountinfo_line(line) {
            Ok(e) => out.push(e),
            Err(_) => bad += 1,
        }
    }
    (out, bad)
}

/// The mount that holds `path`: the longest mount-point prefix, the last one listed on a
/// tie (later mounts are stacked on top).
pub fn covering_mount<'a>(mounts: &'a [MountEntry], path: &str) -> Option<&'a MountEntry> {
    let p = std::path::Path::new(path);
    mounts
        .iter()
        .filter(|m| p.starts_with(&m.mount_point))
        .fold(None, |best: Option<&MountEntry>, m| match best {
            Some(b) if b.mount_point.len() > m.mount_point.len() => Some(b),
            _ => Some(m),
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checks::testutil::garbage;

    const SAMPLE: &str = "22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw\n\
        25 22 0:21 / /dev/shm rw,nosuid,nodev shared:3 - tmpfs tmpfs rw\n\
        30 22 0:30 / /tmp rw,nosuid,nodev,noexec,relatime shared:9 - tmpfs tmpfs rw,size=1g\n\
        31 22 0:31 / /mnt/my\\040disk rw - ext4 /dev/sdb1 rw\n\
        garbage line\n";

    #[test]
    fn parses_sample_and_counts_bad_lines() {
        let (m, bad) = parse_mountinfo(SAMPLE.as_bytes());
        assert_eq!(m.len(), 4);
        assert_eq!(bad, 1);
        assert_eq!(m[2].mount_point, "/tmp");
        assert!(m[2].has_option("noexec"));
        assert_eq!(m[2].fstype, "tmpfs");
        assert_eq!(m[2].super_options, vec!["rw", "size=1g"]);
        assert_eq!(m[3].mount_point, "/mnt/my disk");
    }

    #[test]
    fn covering_mount_prefers_longest_then_last() {
        let (mut m, _) = parse_mountinfo(SAMPLE.as_bytes());
        assert_eq!(covering_mount(&m, "/tmp").unwrap().mount_point, "/tmp");
        assert_eq!(covering_mount(&m, "/var/tmp").unwrap().mount_point, "/");
        assert_eq!(covering_mount(&m, "/tmpx").unwrap().mount_point, "/");
        m.push(parse_mountinfo_line("40 30 0:40 / /tmp rw - tmpfs t rw").unwrap());
        assert!(!covering_mount(&m, "/tmp").unwrap().has_option("noexec"));
    }

    #[test]
    fn garbage_never_panics() {
        for seed in 0..300 {
            let _ = parse_mountinfo(&garbage(seed, 600));
        }
        assert_eq!(unescape_octal("a\\777b\\04"), "a\\777b\\04");
        assert_eq!(
            parse_mountinfo_line("1 2 3 4"),
            Err(MountLineError::TooFewFields)
        );
        assert_eq!(
            parse_mountinfo_line("1 2 3 4 /x rw a b c"),
            Err(MountLineError::MissingSeparator)
        );
    }
}
