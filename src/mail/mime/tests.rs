use super::*;

fn walk(msg: &str) -> (Collect, WalkReport) {
    walk_bytes(msg.as_bytes(), Limits::default())
}

fn reasons(r: &WalkReport) -> Vec<Reason> {
    r.incomplete.iter().map(|i| i.reason).collect()
}

#[test]
fn single_part_message() {
    let (c, r) = walk("Subject: hi\r\nMessage-ID: <a@b>\r\n\r\nhello\r\nworld\r\n");
    assert_eq!(c.parts.len(), 1);
    assert_eq!(c.parts[0].1, b"hello\r\nworld\r\n");
    assert_eq!(c.parts[0].0.path, "1");
    assert_eq!(r.headers.message_id.as_deref(), Some("a@b"));
    assert_eq!(r.headers.subject.as_deref(), Some("hi"));
    assert!(r.incomplete.is_empty());
}

#[test]
fn multipart_with_base64_attachment_and_sanitised_name() {
    let msg = "Content-Type: multipart/mixed; boundary=\"XYZ\"\r\n\r\npreamble\r\n--XYZ\r\nContent-Type: text/plain\r\n\r\nbody text\r\n--XYZ\r\nContent-Type: application/octet-stream; name=\"x\"\r\nContent-Disposition: attachment; filename=\"../../etc/\u{202e}gpj.exe\"\r\nContent-Transfer-Encoding: base64\r\n\r\nSGVsbG8s\r\nIHdvcmxk\r\n--XYZ--\r\nepilogue\r\n";
    let (c, r) = walk(msg);
    assert!(r.incomplete.is_empty(), "{:?}", r.incomplete);
    assert_eq!(c.parts.len(), 2);
    assert_eq!(c.parts[0].1, b"body text");
    assert_eq!(c.parts[0].0.path, "1.1");
    assert_eq!(c.parts[1].1, b"Hello, world");
    assert_eq!(c.parts[1].0.name.as_deref(), Some("_gpj.exe"));
    assert_eq!(c.parts[1].0.encoding, "base64");
}

#[test]
fn nested_four_levels_deep() {
    let mut msg = String::from("Content-Type: multipart/mixed; boundary=b0\r\n\r\n");
    let mut close = String::new();
    for i in 1..4 {
        msg.push_str(&format!(
            "--b{}\r\nContent-Type: multipart/mixed; boundary=b{i}\r\n\r\n",
            i - 1
        ));
        close = format!("--b{i}--\r\n{close}");
    }
    msg.push_str("--b3\r\nContent-Type: text/plain\r\nContent-Transfer-Encoding: quoted-printable\r\n\r\ndeep=3Dpayload\r\n");
    msg.push_str(&close);
    msg.push_str("--b0--\r\n");
    let (c, r) = walk(&msg);
    assert!(r.incomplete.is_empty(), "{:?}", r.incomplete);
    assert_eq!(c.parts.len(), 1);
    assert_eq!(c.parts[0].1, b"deep=payload");
    assert_eq!(c.parts[0].0.path, "1.1.1.1.1");
    assert_eq!(c.parts[0].0.depth, 4);
    // With a depth limit of 2 the inner multiparts are one leaf.
    let lim = Limits {
        max_depth: 2,
        ..Limits::default()
    };
    let (c, r) = walk_bytes(msg.as_bytes(), lim);
    assert!(reasons(&r).contains(&Reason::DepthLimit));
    assert!(c.parts.iter().any(|(_, b)| b
        .windows(b"deep=3Dpayload".len())
        .any(|w| w == b"deep=3Dpayload")));
}

#[test]
fn unclosed_inner_multipart_recovers_at_the_outer_boundary() {
    let msg = "Content-Type: multipart/mixed; boundary=out\r\n\r\n--out\r\nContent-Type: multipart/alternative; boundary=in\r\n\r\n--in\r\n\r\nfirst\r\n--out\r\nContent-Type: text/plain\r\n\r\nlater part\r\n--out--\r\n";
    let (c, r) = walk(msg);
    assert_eq!(
        c.parts.iter().map(|p| p.1.clone()).collect::<Vec<_>>(),
        vec![b"first".to_vec(), b"later part".to_vec()]
    );
    assert!(reasons(&r).contains(&Reason::MultipartUnclosed));
}

#[test]
fn malformed_base64_is_recovered_and_reported() {
    let msg = "Content-Type: multipart/mixed; boundary=B\r\n\r\n--B\r\nContent-Type: application/octet-stream\r\nContent-Transfer-Encoding: base64\r\n\r\nSGVs!!bG8s*IHdv\r\ncmxk\r\n--B\r\nContent-Type: text/plain\r\n\r\nnext\r\n--B--\r\n";
    let (c, r) = walk(msg);
    assert_eq!(c.parts[0].1, b"Hello, world");
    assert_eq!(c.parts[1].1, b"next");
    assert_eq!(reasons(&r), vec![Reason::Base64Error]);
}

#[test]
fn data_after_padding_adds_interpretations_within_the_budget() {
    let body = "QQ==QUJD\r\n";
    let mut msg = String::from("Content-Type: multipart/mixed; boundary=B\r\n\r\n");
    for _ in 0..10 {
        msg.push_str(&format!(
            "--B\r\nContent-Transfer-Encoding: base64\r\n\r\n{body}"
        ));
    }
    msg.push_str("--B--\r\n");
    let (c, r) = walk(&msg);
    assert_eq!(r.extra_interpretations, MAX_INTERPRETATIONS);
    assert!(reasons(&r).contains(&Reason::InterpretationLimit));
    let prefixes = c
        .parts
        .iter()
        .filter(|p| p.0.interpretation == Some(Interp::PaddedPrefix))
        .count();
    let alphas = c
        .parts
        .iter()
        .filter(|p| p.0.interpretation == Some(Interp::AlphabetOnly))
        .count();
    assert_eq!(prefixes + alphas, MAX_INTERPRETATIONS);
    assert_eq!(c.parts[0].1, b"AABC");
    assert_eq!(c.parts[1].1, b"A");
}

#[test]
fn encoded_multipart_and_attached_message_are_walked() {
    let inner = "--I\r\nContent-Type: text/plain\r\n\r\ninside encoded\r\n--I--\r\n";
    let enc = crate::mail::decode::encode_base64(inner.as_bytes(), 76);
    let attached = "Subject: inner\r\nContent-Type: text/html\r\n\r\n<b>attached</b>\r\n";
    let msg = format!(
        "Content-Type: multipart/mixed; boundary=O\r\n\r\n--O\r\nContent-Type: multipart/mixed; boundary=I\r\nContent-Transfer-Encoding: base64\r\n\r\n{enc}\r\n--O\r\nContent-Type: message/rfc822\r\n\r\n{attached}--O--\r\n"
    );
    let (c, r) = walk(&msg);
    assert!(r.incomplete.is_empty(), "{:?}", r.incomplete);
    let bodies: Vec<Vec<u8>> = c.parts.iter().map(|p| p.1.clone()).collect();
    assert_eq!(
        bodies,
        vec![b"inside encoded".to_vec(), b"<b>attached</b>".to_vec()]
    );
    assert_eq!(c.parts[1].0.content_type, "text/html");
    assert_eq!(c.parts[1].0.path, "1.2.1");
}

#[test]
fn limits_refuse_and_report() {
    let mut msg = String::from("Content-Type: multipart/mixed; boundary=B\r\n\r\n");
    for i in 0..20 {
        msg.push_str(&format!("--B\r\n\r\npart {i} {}\r\n", "x".repeat(100)));
    }
    msg.push_str("--B--\r\n");
    let lim = Limits {
        max_parts: 5,
        ..Limits::default()
    };
    let (c, r) = walk_bytes(msg.as_bytes(), lim);
    assert_eq!(c.parts.len(), 5);
    assert!(reasons(&r).contains(&Reason::PartLimit));
    let lim = Limits {
        max_extract_bytes: 250,
        ..Limits::default()
    };
    let (c, r) = walk_bytes(msg.as_bytes(), lim);
    assert!(reasons(&r).contains(&Reason::SizeLimit));
    assert_eq!(c.parts.iter().map(|p| p.1.len()).sum::<usize>(), 250);
    // Without staging, a part over the memory threshold is refused and reported.
    let lim = Limits {
        mem_part_bytes: 50,
        ..Limits::default()
    };
    let (_, r) = walk_bytes(msg.as_bytes(), lim);
    assert!(reasons(&r).contains(&Reason::Staging));
}

#[test]
fn missing_boundary_and_missing_close_are_reported() {
    let (c, r) = walk("Content-Type: multipart/mixed\r\n\r\nno boundary\r\n");
    assert_eq!(c.parts.len(), 1);
    assert!(reasons(&r).contains(&Reason::MultipartNoBoundary));
    let (c, r) = walk("Content-Type: multipart/mixed; boundary=B\r\n\r\n--B\r\n\r\nopen\r\n");
    assert_eq!(c.parts[0].1, b"open\r\n");
    assert!(reasons(&r).contains(&Reason::MultipartUnclosed));
}

#[test]
fn sanitize_name_keeps_base_names_only() {
    assert_eq!(
        sanitize_name("C:\\a\\b\\inv.zip").as_deref(),
        Some("inv.zip")
    );
    assert_eq!(sanitize_name("x\ny.txt").as_deref(), Some("x_y.txt"));
    assert_eq!(sanitize_name("../.."), None);
    assert_eq!(sanitize_name("   "), None);
    assert_eq!(sanitize_name(&"a".repeat(500)).unwrap().len(), 128);
}

#[test]
fn garbage_never_panics() {
    let mut x: u64 = 0x1234_5678_9abc_def1;
    let atoms: &[&[u8]] = &[
        b"--B\r\n",
        b"--B--\r\n",
        b"Content-Type: multipart/mixed; boundary=B\r\n",
        b"Content-Type: message/rfc822\r\n",
        b"Content-Transfer-Encoding: base64\r\n",
        b"Content-Transfer-Encoding: quoted-printable\r\n",
        b"\r\n",
        b"QQ==QUJD",
        b"=4=\r\n",
        b"\xff\x00",
        b"--",
        b"Content-Type: multipart/alternative; boundary=\"\"\r\n",
    ];
    for round in 0..3000 {
        let mut msg = Vec::new();
        for _ in 0..(round % 40) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            msg.extend_from_slice(atoms[(x % atoms.len() as u64) as usize]);
        }
        let _ = walk_bytes(&msg, Limits::default());
    }
}
