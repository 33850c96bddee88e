//! `[geoip]`: MaxMind DB files for GeoIP enrichment (`city_db`, `asn_db`).
//!
//! Validation checks what is cheap: an absolute path to a readable regular file whose tail
//! holds the MaxMind DB metadata marker. The daemon opens the files once at start (see
//! `geoip`), where a damaged file is a startup error.

use std::io::{Read, Seek, SeekFrom};
use std::path::PathBuf;

use super::reader::{Errors, TableReader};

/// The marker that starts the metadata section of a MaxMind DB file.
pub const METADATA_MARKER: &[u8] = b"\xAB\xCD\xEFMaxMind.com";
/// The metadata section must start within this many bytes of the end (format 2.0).
const METADATA_WINDOW: u64 = 128 * 1024;

/// `[geoip]`. Unset keys are `None`: no enrichment from that database.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GeoIp {
    /// `geoip.city_db`: a GeoIP2/GeoLite2 City or Country database.
    pub city_db: Option<PathBuf>,
    /// `geoip.asn_db`: a GeoLite2 ASN (or GeoIP2 ISP) database.
    pub asn_db: Option<PathBuf>,
}

/// Reads `[geoip]` from the root table.
pub(super) fn read(root: &mut TableReader<'_>, errs: &mut Errors) -> GeoIp {
    let mut t = root.table("geoip", errs);
    let city_db = db_path(&mut t, "city_db", errs);
    let asn_db = db_path(&mut t, "asn_db", errs);
    t.finish(errs);
    GeoIp { city_db, asn_db }
}

fn db_path(t: &mut TableReader<'_>, key: &'static str, errs: &mut Errors) -> Option<PathBuf> {
    let value = t.string(key, errs);
    if value.is_empty() {
        return None;
    }
    if !value.starts_with('/') {
        errs.push(t.key(key), "must be an absolute path");
        return None;
    }
    let path = PathBuf::from(&value);
    if let Err(e) = looks_like_mmdb(&path) {
        errs.push(t.key(key), e);
        return None;
    }
    Some(path)
}

/// Why a file is not taken as a MaxMind DB (each names the path).
#[derive(Debug)]
pub enum MmdbError {
    Open(PathBuf, std::io::Error),
    NotFile(PathBuf),
    Read(PathBuf, std::io::Error),
    NoMarker(PathBuf),
}

impl std::fmt::Display for MmdbError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            MmdbError::Open(p, e) => write!(f, "cannot open {}: {e}", p.display()),
            MmdbError::NotFile(p) => write!(f, "{} is not a regular file", p.display()),
            MmdbError::Read(p, e) => write!(f, "cannot read {}: {e}", p.display()),
            MmdbError::NoMarker(p) => write!(
                f,
                "{} is not a MaxMind DB file (no metadata marker)",
                p.display()
            ),
        }
    }
}

impl std::error::Error for MmdbError {}

/// Cheap check that `path` is a readable MaxMind DB file: a regular file whose last
/// 128 KiB hold the metadata marker.
pub fn looks_like_mmdb(path: &std::path::Path) -> Result<(), MmdbError> {
    use std::os::unix::fs::OpenOptionsExt;
    let open = |e| MmdbError::Open(path.to_path_buf(), e);
    let read = |e| MmdbError::Read(path.to_path_buf(), e);
    // Checked before opening: opening a FIFO would wait for a writer.
    let meta = std::fs::metadata(path).map_err(open)?;
    if !meta.is_file() {
        return Err(MmdbError::NotFile(path.to_path_buf()));
    }
    let mut f = crate::fsutil::open_daemon_file_with(
        path,
        std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK),
    )
    .map_err(open)?;
    let start = meta.len().saturating_sub(METADATA_WINDOW);
    f.seek(SeekFrom::Start(start)).map_err(read)?;
    let mut tail = Vec::new();
    f.take(METADATA_WINDOW)
        .read_to_end(&mut tail)
        .map_err(read)?;
    if memchr::memmem::rfind(&tail, METADATA_MARKER).is_none() {
        return Err(MmdbError::NoMarker(path.to_path_buf()));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(text: &str) -> Result<GeoIp, Vec<String>> {
        let t = super::super::parse_str(text).map_err(|e| vec![e.to_string()])?;
        super::super::from_table(&t, vec![])
            .map(|c| c.geoip)
            .map_err(|es| es.iter().map(|e| e.to_string()).collect())
    }

    #[test]
    fn unset_keys_mean_no_database() {
        assert_eq!(check("").unwrap(), GeoIp::default());
        assert_eq!(
            check("[geoip]\ncity_db = \"\"\n").unwrap(),
            GeoIp::default()
        );
    }

    #[test]
    fn relative_missing_garbage_and_unknown_keys_are_errors() {
        let dir = std::env::temp_dir().join(format!("svc-geoip-cfg-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let junk = dir.join("junk.mmdb");
        std::fs::write(&junk, b"not a database").unwrap();
        let e = check(&format!(
            "[geoip]\ncity_db = \"GeoLite2-City.mmdb\"\nasn_db = {:?}\nlang = \"en\"\n",
            junk.display().to_string()
        ))
        .unwrap_err()
        .join("\n");
        assert!(e.contains("geoip.city_db: must be an absolute path"), "{e}");
        assert!(
            e.contains("geoip.asn_db: ") && e.contains("is not a MaxMind DB file"),
            "{e}"
        );
        assert!(e.contains("geoip.lang: unknown key"), "{e}");
        let e = check("[geoip]\ncity_db = \"/nonexistent/city.mmdb\"\n")
            .unwrap_err()
            .join("\n");
        assert!(
            e.contains("geoip.city_db: cannot open /nonexistent/city.mmdb"),
            "{e}"
        );
        let fifo = dir.join("fifo.mmdb");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
        assert_eq!(
            looks_like_mmdb(&fifo).map_err(|e| e.to_string()),
            Err(format!("{} is not a regular file", fifo.display())),
            "refused without waiting for a writer"
        );
        let ok = dir.join("ok.mmdb");
        let mut bytes = vec![0u8; 300_000];
        bytes.extend_from_slice(METADATA_MARKER);
        bytes.extend_from_slice(b"\xe0");
        std::fs::write(&ok, &bytes).unwrap();
        let g = check(&format!(
            "[geoip]\ncity_db = {:?}\n",
            ok.display().to_string()
        ))
        .unwrap();
        assert_eq!(g.city_db, Some(ok));
        std::fs::remove_dir_all(dir).unwrap();
    }
}
