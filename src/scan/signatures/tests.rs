//! Unit tests of the scan engine with small inline rule sets.

use jiff::Timestamp;

use super::matches::excerpt;
use super::*;
use crate::findings::Severity;

const ONE: &str = r#"
[[rule]]
id = "T-1"
name = "eval_post"
category = "webshell"
severity = "CRITICAL"
confidence = "high"
extensions = ["php"]
nocase = true
anchors = ["eval"]
all = ["$_post"]
regex = ['''eval\s*\(\s*\$_POST''']

[[rule]]
id = "T-2"
name = "case_marker"
category = "obfuscated_php"
severity = "HIGH"
confidence = "medium"
extensions = ["*"]
anchors = ["FilesMan"]

[[rule]]
id = "T-3"
name = "upload_php"
category = "php_in_uploads"
severity = "HIGH"
confidence = "medium"
extensions = ["php"]
path_contains = ["/uploads/"]
anchors = ["<?php"]
none = ["Silence is golden"]
"#;

fn set() -> SignatureSet {
    SignatureSet::from_toml_strs(&[("t.toml", ONE)]).unwrap()
}

#[test]
fn nocase_and_exact_anchors() {
    let s = set();
    let m = s.scan_bytes(Path::new("/x/a.php"), b"<?php EVAL ( $_post['x']);");
    assert_eq!(m.len(), 1);
    assert_eq!(m[0].name, "eval_post");
    assert_eq!(m[0].offset, 6);
    assert!(s.scan_bytes(Path::new("/x/a.txt"), b"filesman").is_empty());
    let m = s.scan_bytes(Path::new("/x/a.txt"), b"..FilesMan..");
    assert_eq!(m.len(), 1);
    assert_eq!(m[0].offset, 2);
}

#[test]
fn path_conditions_and_none_literals() {
    let s = set();
    let p = Path::new("/var/www/wp-content/uploads/2024/a.php");
    assert_eq!(s.scan_bytes(p, b"<?php echo 1;")[0].name, "upload_php");
    assert!(s.scan_bytes(p, b"<?php // Silence is golden.").is_empty());
    assert!(s
        .scan_bytes(Path::new("/var/www/a.php"), b"<?php echo 1;")
        .is_empty());
    assert!(!s.applies_to(Path::new("/x/a.jpg")) || s.rules().len() == 3);
}

#[test]
fn head_and_tail_windows_only() {
    let s = set().with_limits(ScanLimits {
        whole_file_max: 1000,
        head_window: 100,
        tail_window: 100,
        ..ScanLimits::default()
    });
    let mut data = vec![b' '; 5000];
    data[4950..4958].copy_from_slice(b"FilesMan");
    let m = s.scan_bytes(Path::new("a.txt"), &data);
    assert_eq!(m[0].offset, 4950);
    let mut mid = vec![b' '; 5000];
    mid[2500..2508].copy_from_slice(b"FilesMan");
    assert!(s.scan_bytes(Path::new("a.txt"), &mid).is_empty());
    let st = s.stats();
    assert_eq!(st.files_windowed, 2);
    assert_eq!(st.bytes_scanned, 400);
    assert_eq!(st.bytes_skipped, 2 * 4800);
}

#[test]
fn match_cap_is_counted() {
    let s = set().with_limits(ScanLimits {
        max_matches_per_file: 1,
        ..ScanLimits::default()
    });
    let m = s.scan_bytes(
        Path::new("/uploads/a.php"),
        b"<?php eval($_POST[1]); // FilesMan",
    );
    assert_eq!(m.len(), 1);
    assert_eq!(s.stats().matches_dropped, 2);
}

#[test]
fn excerpt_is_bounded_and_sanitized() {
    let e = excerpt(b"\x00\x01ab\ncd\xffef", 0, 16);
    assert_eq!(e, "..ab cd.ef");
    let long = vec![b'a'; 1000];
    assert_eq!(excerpt(&long, 500, 96).len(), 96);
    assert_eq!(excerpt(b"abc", 10, 96), "abc");
}

#[test]
fn finding_message_is_stable_and_escaped() {
    let m = Match {
        rule_id: "X".into(),
        name: "php_eval_request".into(),
        category: "webshell".into(),
        severity: Severity::Critical,
        confidence: Confidence::High,
        offset: 7,
        excerpt: "eval(".into(),
    };
    let t = Timestamp::from_second(0).unwrap();
    let f = m.to_finding(Path::new("/var/www/x.php"), t);
    assert_eq!(f.check, "webshell");
    assert_eq!(
        f.message,
        "Webshell signature php_eval_request in /var/www/x.php"
    );
    assert_eq!(f.path.as_deref(), Some("/var/www/x.php"));
    assert!(f.details.contains("offset 7"));
    let f = m.to_finding(Path::new("/a\nb.php"), t);
    assert!(f.message.ends_with("/a\\x0ab.php"));
    assert_eq!(category_label("obfuscated_php"), "Obfuscated PHP");
    assert_eq!(category_label("htaccess_injection"), ".htaccess injection");
    assert_eq!(category_label("php_in_uploads"), "PHP in uploads");
}

#[test]
fn garbage_bytes_never_panic() {
    let s = SignatureSet::shipped().unwrap();
    let mut x: u64 = 88172645463325252;
    let names = [
        "a.php",
        ".htaccess",
        "x.html",
        "i.jpg",
        "/uploads/u.php",
        "m.js",
    ];
    for round in 0..300 {
        let len = (round * 37) % 5000;
        let mut buf = Vec::with_capacity(len);
        for _ in 0..len {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            buf.push((x >> 24) as u8);
        }
        // Sprinkle anchors so rule evaluation runs on garbage too.
        if len > 40 {
            buf[3..8].copy_from_slice(b"eval(");
            buf[20..25].copy_from_slice(b"<?php");
        }
        let _ = s.scan_bytes(Path::new(names[round % names.len()]), &buf);
    }
}

#[test]
fn set_is_shareable_between_threads() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<SignatureSet>();
}

#[test]
fn empty_set_scans_nothing() {
    let s = SignatureSet::from_toml_strs(&[]).unwrap();
    assert!(s
        .scan_bytes(Path::new("a.php"), b"eval($_POST[1])")
        .is_empty());
    assert_eq!(s.stats().files_skipped_no_rules, 1);
}

#[test]
fn the_shipped_rule_count_needs_no_compile_and_matches_the_set() {
    let n = SignatureSet::shipped_rule_count().unwrap();
    assert_eq!(n, SignatureSet::shipped().unwrap().rules().len());
    assert!(n > 0);
}
