#![allow(
    clippy::disallowed_methods,
    reason = "test fixtures are built with plain std::fs calls"
)]

use std::io::Write;

use super::*;
use crate::clock::ManualClock;
use crate::mail::archive::{zip_of, ArchiveLimits, PackageUnpacker};

const WEBSHELL: &[u8] = b"<?php\n// innocent looking header\n@eval($_POST['cmd']);\n?>\n";

struct Env {
    dir: crate::checks::testutil::Fixture,
    reg: Arc<Registry>,
    staged: StagedPackages,
    sigs: SignatureSet,
}

fn env() -> Env {
    let reg = Registry::new();
    let staged = StagedPackages::start(
        Arc::new(PackageUnpacker {
            limits: ArchiveLimits::default(),
        }),
        ManualClock::at_epoch_2026(),
        &reg,
    )
    .unwrap();
    Env {
        dir: crate::checks::testutil::Fixture::new(),
        reg,
        staged,
        sigs: SignatureSet::shipped().unwrap(),
    }
}

impl Env {
    fn verify(&self, name: &str, data: &[u8]) -> Vec<Finding> {
        let p = self.dir.write(name, data);
        let f = File::open(&p).unwrap();
        self.staged.verify(&p, &f, &self.sigs)
    }
}

#[test]
fn a_shell_inside_a_zip_is_found_before_extraction() {
    let e = env();
    let z = zip_of(&[("readme.txt", b"hello"), ("wp/shell.php", WEBSHELL)]);
    let f = e.verify("plugin.zip", &z);
    assert_eq!(f.len(), 1, "{f:?}");
    assert_eq!(f[0].check, CHECK_MALWARE);
    assert!(
        f[0].message.ends_with("plugin.zip: plugin.zip/shell.php"),
        "{}",
        f[0].message
    );
    let row = &e.reg.snapshot()[ROW];
    assert_eq!(
        (row.waiting, row.running, row.dropped_total),
        (Some(0), 0, 0)
    );
    assert_eq!(e.staged.counters.packages.load(Ordering::Relaxed), 1);
}

#[test]
fn a_shell_inside_a_tar_gz_and_a_phar_is_found() {
    let e = env();
    let mut tar = tar::Builder::new(Vec::new());
    let mut h = tar::Header::new_gnu();
    h.set_size(WEBSHELL.len() as u64);
    h.set_mode(0o644);
    h.set_cksum();
    tar.append_data(&mut h, "x/s.php", WEBSHELL).unwrap();
    let tar = tar.into_inner().unwrap();
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(&tar).unwrap();
    let f = e.verify("site.tar.gz", &gz.finish().unwrap());
    assert_eq!(f.len(), 1, "{f:?}");
    assert!(
        f[0].message.ends_with("site.tar.gz/s.php"),
        "{}",
        f[0].message
    );
    let p = phar::build(
        b"<?php __HALT_COMPILER(); ?>\n",
        &[("src/s.php", WEBSHELL, false)],
    );
    let f = e.verify("tool.phar", &p);
    assert_eq!(f.len(), 1, "{f:?}");
    assert!(
        f[0].message.ends_with("tool.phar/src/s.php"),
        "{}",
        f[0].message
    );
}

#[test]
fn bombs_deep_nesting_and_truncation_are_refused_and_counted() {
    let e = env();
    let zeros = vec![0u8; 20 * 1024 * 1024];
    let bomb = zip_of(&[("zeros.bin", &zeros)]);
    let f = e.verify("bomb.zip", &bomb);
    assert_eq!(f.len(), 1);
    assert_eq!(f[0].check, CHECK_UNVERIFIED);
    assert!(
        f[0].details.contains("archive_ratio_limit"),
        "{}",
        f[0].details
    );

    let l3 = zip_of(&[("s.php", WEBSHELL)]);
    let l2 = zip_of(&[("l3.zip", &l3)]);
    let l1 = zip_of(&[("l2.zip", &l2)]);
    let f = e.verify("nested.zip", &l1);
    assert!(
        f.iter()
            .any(|f| f.check == CHECK_UNVERIFIED && f.details.contains("archive_depth_limit")),
        "{f:?}"
    );

    let z = zip_of(&[("a.txt", b"hello"), ("b.php", WEBSHELL)]);
    let f = e.verify("cut.zip", &z[..z.len() / 2]);
    assert!(
        f.iter()
            .any(|f| f.check == CHECK_UNVERIFIED && f.details.contains("archive_error")),
        "{f:?}"
    );
    let f = e.verify("fake.zip", b"not an archive at all");
    assert!(f[0].details.contains("not_an_archive"));
    let by = e.staged.counters.refused.lock().clone();
    assert_eq!(by.get("archive_ratio_limit"), Some(&1));
    assert_eq!(by.get("archive_depth_limit"), Some(&1));
    assert_eq!(by.get("archive_error"), Some(&1));
    assert_eq!(e.staged.counters.unverified.load(Ordering::Relaxed), 4);
    // Garbage never panics.
    for seed in 0..20 {
        let mut g = b"PK\x03\x04".to_vec();
        g.extend(crate::checks::testutil::garbage(seed, 2048));
        e.verify("g.zip", &g);
    }
    assert_eq!(e.reg.snapshot()[ROW].dropped_total, 0);
}

#[test]
fn package_names() {
    for n in ["a.zip", "A.TGZ", "b.tar.gz", "c.phar", "d.tar", "e.gz"] {
        assert!(is_package_name(n.as_bytes()), "{n}");
    }
    for n in ["zip", ".zip", "a.php", "a.zipx"] {
        assert!(!is_package_name(n.as_bytes()), "{n}");
    }
}
