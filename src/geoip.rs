//! GeoIP lookups from MaxMind DB files (`[geoip] city_db`, `asn_db`).
//!
//! Guarantees:
//! - Each configured file is opened once, at start, into memory (no `mmap`, so replacing or
//!   truncating the file on disk cannot disturb the running daemon; restart to load a new
//!   edition). A missing or damaged file, or a file of the wrong database type, is a startup
//!   error naming the key and the file.
//! - Lookups never fail the caller: an address the databases do not cover yields `None`, and
//!   a record that cannot be decoded is counted in [`GeoIp::lookup_errors`] and skipped.

use std::net::{IpAddr, Ipv4Addr};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use maxminddb::{geoip2, Reader};
use serde::Serialize;

/// What the databases say about one address. Unknown parts are omitted.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Geo {
    /// ISO 3166-1 alpha-2 country code.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub country: Option<String>,
    /// English country name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub country_name: Option<String>,
    /// English city name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub city: Option<String>,
    /// Autonomous system number.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub asn: Option<u32>,
    /// Organisation registered for the autonomous system.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub org: Option<String>,
}

impl Geo {
    pub fn is_empty(&self) -> bool {
        *self == Geo::default()
    }
}

struct Db {
    path: PathBuf,
    reader: Reader<Vec<u8>>,
}

/// Open GeoIP databases.
pub struct GeoIp {
    city: Option<Db>,
    asn: Option<Db>,
    /// Lookups that found a record but could not decode it.
    pub lookup_errors: AtomicU64,
}

/// Database types accepted for `city_db` (GeoIP2/GeoLite2 City, Country, Enterprise, and
/// compatible editions such as DB-IP's).
const CITY_TYPES: &[&str] = &["city", "country", "enterprise"];
/// Database types accepted for `asn_db`.
const ASN_TYPES: &[&str] = &["asn", "isp"];

/// Why a `[geoip]` database could not be used: the key, the file and the cause.
#[derive(Debug)]
pub struct GeoIpError {
    pub key: &'static str,
    pub path: std::path::PathBuf,
    pub cause: GeoIpCause,
}

/// The cause inside a [`GeoIpError`].
#[derive(Debug)]
pub enum GeoIpCause {
    /// Not a regular file with a MaxMind metadata marker.
    NotMmdb(crate::config::geoip::MmdbError),
    /// The reader refused the file.
    Open(maxminddb::MaxMindDbError),
    /// The database's type does not fit the key.
    WrongType {
        kind: String,
        expected: &'static [&'static str],
    },
    /// A test lookup failed.
    Damaged,
}

impl std::fmt::Display for GeoIpError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}: ", self.key, self.path.display())?;
        match &self.cause {
            GeoIpCause::NotMmdb(e) => write!(f, "{e}"),
            GeoIpCause::Open(e) => write!(f, "cannot open as a MaxMind DB: {e}"),
            GeoIpCause::WrongType { kind, expected } => write!(
                f,
                "database type {kind:?} does not fit this key (expected a {} database)",
                expected.join(" / ")
            ),
            GeoIpCause::Damaged => f.write_str("the database is damaged (a test lookup failed)"),
        }
    }
}

impl std::error::Error for GeoIpError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match &self.cause {
            GeoIpCause::Open(e) => Some(e),
            _ => None,
        }
    }
}

fn open_db(
    key: &'static str,
    path: &Path,
    kinds: &'static [&'static str],
    probe: fn(&Db) -> bool,
) -> Result<Db, GeoIpError> {
    let err = |cause| GeoIpError {
        key,
        path: path.to_path_buf(),
        cause,
    };
    // A regular file with a metadata marker (never blocks on a FIFO or device).
    crate::config::geoip::looks_like_mmdb(path).map_err(|e| err(GeoIpCause::NotMmdb(e)))?;
    let reader = Reader::open_readfile(path).map_err(|e| err(GeoIpCause::Open(e)))?;
    let kind = reader.metadata().database_type.clone();
    let lower = kind.to_ascii_lowercase();
    if !kinds.iter().any(|k| lower.contains(k)) {
        return Err(err(GeoIpCause::WrongType {
            kind,
            expected: kinds,
        }));
    }
    let db = Db {
        path: path.to_path_buf(),
        reader,
    };
    if !probe(&db) {
        return Err(err(GeoIpCause::Damaged));
    }
    Ok(db)
}

/// Looks up an address the reader can hold: IPv4-mapped IPv6 becomes IPv4, and IPv6 is
/// skipped in an IPv4-only database.
fn fit(db: &Db, ip: IpAddr) -> Option<IpAddr> {
    let ip = match ip {
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => IpAddr::V6(v6),
        },
        v4 => v4,
    };
    if ip.is_ipv6() && db.reader.metadata().ip_version == 4 {
        return None;
    }
    Some(ip)
}

fn city_of(db: &Db, ip: IpAddr) -> Result<Option<Geo>, maxminddb::MaxMindDbError> {
    let Some(ip) = fit(db, ip) else {
        return Ok(None);
    };
    let r = db.reader.lookup(ip)?;
    let Some(c) = r.decode::<geoip2::City>()? else {
        return Ok(None);
    };
    Ok(Some(Geo {
        country: c.country.iso_code.map(String::from),
        country_name: c.country.names.english.map(String::from),
        city: c.city.names.english.map(String::from),
        ..Geo::default()
    }))
}

fn asn_of(db: &Db, ip: IpAddr) -> Result<Option<Geo>, maxminddb::MaxMindDbError> {
    let Some(ip) = fit(db, ip) else {
        return Ok(None);
    };
    let r = db.reader.lookup(ip)?;
    let Some(a) = r.decode::<geoip2::Asn>()? else {
        return Ok(None);
    };
    Ok(Some(Geo {
        asn: a.autonomous_system_number,
        org: a.autonomous_system_organization.map(String::from),
        ..Geo::default()
    }))
}

const PROBE: IpAddr = IpAddr::V4(Ipv4Addr::new(1, 1, 1, 1));

impl GeoIp {
    /// Opens what `[geoip]` configures; `Ok(None)` when nothing is configured.
    pub fn open(cfg: &crate::config::geoip::GeoIp) -> Result<Option<GeoIp>, GeoIpError> {
        if cfg.city_db.is_none() && cfg.asn_db.is_none() {
            return Ok(None);
        }
        GeoIp::from_paths(cfg.city_db.as_deref(), cfg.asn_db.as_deref()).map(Some)
    }

    /// Opens the given files (either may be absent).
    pub fn from_paths(city: Option<&Path>, asn: Option<&Path>) -> Result<GeoIp, GeoIpError> {
        let city = city
            .map(|p| {
                open_db("geoip.city_db", p, CITY_TYPES, |db| {
                    city_of(db, PROBE).is_ok()
                })
            })
            .transpose()?;
        let asn = asn
            .map(|p| open_db("geoip.asn_db", p, ASN_TYPES, |db| asn_of(db, PROBE).is_ok()))
            .transpose()?;
        Ok(GeoIp {
            city,
            asn,
            lookup_errors: AtomicU64::new(0),
        })
    }

    /// What the databases know about `ip`; `None` when neither has a record.
    pub fn lookup(&self, ip: IpAddr) -> Option<Geo> {
        let mut geo = Geo::default();
        if let Some(db) = &self.city {
            match city_of(db, ip) {
                Ok(Some(g)) => geo = g,
                Ok(None) => {}
                Err(e) => self.count_error(db, ip, &e),
            }
        }
        if let Some(db) = &self.asn {
            match asn_of(db, ip) {
                Ok(Some(g)) => {
                    geo.asn = g.asn;
                    geo.org = g.org;
                }
                Ok(None) => {}
                Err(e) => self.count_error(db, ip, &e),
            }
        }
        (!geo.is_empty()).then_some(geo)
    }

    fn count_error(&self, db: &Db, ip: IpAddr, e: &maxminddb::MaxMindDbError) {
        // Logged once; later failures are only counted.
        if self.lookup_errors.fetch_add(1, Ordering::Relaxed) == 0 {
            log::warn!("geoip: lookup of {ip} in {} failed: {e}", db.path.display());
        }
    }

    /// `{city_db: {path, database_type, build_epoch}, asn_db: ...}` for diagnostics.
    pub fn describe(&self) -> serde_json::Value {
        let one = |db: &Db| {
            let m = db.reader.metadata();
            serde_json::json!({
                "path": db.path.display().to_string(),
                "database_type": m.database_type,
                "build_epoch": m.build_epoch,
            })
        };
        let mut out = serde_json::Map::new();
        if let Some(db) = &self.city {
            out.insert("city_db".into(), one(db));
        }
        if let Some(db) = &self.asn {
            out.insert("asn_db".into(), one(db));
        }
        out.insert(
            "lookup_errors".into(),
            self.lookup_errors.load(Ordering::Relaxed).into(),
        );
        serde_json::Value::Object(out)
    }
}

#[cfg(test)]
#[allow(dead_code)]
#[path = "../tests/it/common/mmdb.rs"]
pub(crate) mod mmdb;

#[cfg(test)]
mod tests {
    use super::*;

    fn dir(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("svc-geoip-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    fn write_dbs(d: &Path, ip_version: u16) -> (PathBuf, PathBuf) {
        let city = d.join(format!("city{ip_version}.mmdb"));
        let asn = d.join(format!("asn{ip_version}.mmdb"));
        std::fs::write(
            &city,
            mmdb::build(
                ip_version,
                "GeoLite2-City",
                &[(
                    ip("203.0.113.0"),
                    24,
                    mmdb::city_record("AU", "Australia", "Sydney"),
                )],
            ),
        )
        .unwrap();
        std::fs::write(
            &asn,
            mmdb::build(
                ip_version,
                "GeoLite2-ASN",
                &[
                    (
                        ip("203.0.113.0"),
                        25,
                        mmdb::asn_record(64_500, "Example Net"),
                    ),
                    (
                        ip("198.51.100.0"),
                        24,
                        mmdb::asn_record(64_501, "Other Net"),
                    ),
                ],
            ),
        )
        .unwrap();
        (city, asn)
    }

    #[test]
    fn city_and_asn_lookups_in_ipv4_and_ipv6_trees() {
        let d = dir("lookup");
        for v in [4u16, 6] {
            let (city, asn) = write_dbs(&d, v);
            let g = GeoIp::from_paths(Some(&city), Some(&asn)).unwrap();
            let hit = g.lookup(ip("203.0.113.7")).unwrap();
            assert_eq!(hit.country.as_deref(), Some("AU"));
            assert_eq!(hit.country_name.as_deref(), Some("Australia"));
            assert_eq!(hit.city.as_deref(), Some("Sydney"));
            assert_eq!(hit.asn, Some(64_500));
            assert_eq!(hit.org.as_deref(), Some("Example Net"));
            // The upper half of the /24 has no ASN record; the mapped form finds the city.
            let upper = g.lookup(ip("::ffff:203.0.113.200")).unwrap();
            assert_eq!(upper.city.as_deref(), Some("Sydney"));
            assert_eq!(upper.asn, None);
            let asn_only = g.lookup(ip("198.51.100.1")).unwrap();
            assert_eq!(
                (asn_only.country.as_deref(), asn_only.asn),
                (None, Some(64_501))
            );
            assert_eq!(g.lookup(ip("192.0.2.1")), None);
            assert_eq!(g.lookup(ip("2001:db8::1")), None);
            assert_eq!(g.lookup_errors.load(Ordering::Relaxed), 0);
            let json = serde_json::to_value(&asn_only).unwrap();
            assert!(json.get("country").is_none(), "unknown parts omitted");
        }
        std::fs::remove_dir_all(d).unwrap();
    }

    #[test]
    fn missing_garbage_and_swapped_files_are_errors_naming_the_key() {
        let d = dir("errors");
        let (city, asn) = write_dbs(&d, 4);
        let e = GeoIp::from_paths(Some(&d.join("nope.mmdb")), None)
            .err()
            .unwrap()
            .to_string();
        assert!(
            e.starts_with("geoip.city_db ") && e.contains("nope.mmdb"),
            "{e}"
        );
        let junk = d.join("junk.mmdb");
        std::fs::write(&junk, b"garbage\xAB\xCD\xEFMaxMind.com\x00").unwrap();
        let e = GeoIp::from_paths(None, Some(&junk)).err().unwrap();
        assert!(e.to_string().starts_with("geoip.asn_db "), "{e}");
        assert!(
            matches!(e.cause, GeoIpCause::NotMmdb(_) | GeoIpCause::Open(_)),
            "{e:?}"
        );
        let e = GeoIp::from_paths(Some(&asn), Some(&city)).err().unwrap();
        assert!(e.to_string().contains("does not fit"), "{e}");
        assert!(matches!(e.cause, GeoIpCause::WrongType { .. }), "{e:?}");
        // A truncated file loses its metadata.
        let bytes = std::fs::read(&city).unwrap();
        let cut = d.join("cut.mmdb");
        std::fs::write(&cut, &bytes[..bytes.len() / 2]).unwrap();
        assert!(GeoIp::from_paths(Some(&cut), None).is_err());
        assert!(GeoIp::open(&crate::config::geoip::GeoIp::default())
            .unwrap()
            .is_none());
        std::fs::remove_dir_all(d).unwrap();
    }
}
