use super::*;
use crate::watch::tail::testutil::TempDir;
use std::fs::OpenOptions;
use std::io::Write;
use std::ops::ControlFlow;

fn append(path: &Path, s: &[u8]) {
    let mut f = OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .unwrap();
    f.write_all(s).unwrap();
}

fn poll(t: &mut FileSource) -> (Vec<String>, PollStats) {
    let mut out = Vec::new();
    let st = t.poll(&mut out).unwrap();
    (out, st)
}

#[test]
fn attaches_at_end_and_reads_new_lines() {
    let d = TempDir::new("end");
    let p = d.path().join("auth.log");
    append(&p, b"old 1\nold 2\n");
    let mut t = FileSource::new(&p);
    let (lines, st) = poll(&mut t);
    assert!(lines.is_empty() && st.opened);
    assert_eq!(t.bytes_behind(), 0);
    append(&p, b"new 1\nnew 2\n");
    assert_eq!(poll(&mut t).0, ["new 1", "new 2"]);
    assert!(poll(&mut t).0.is_empty());
}

#[test]
fn attaching_mid_line_skips_the_rest_of_that_line() {
    let d = TempDir::new("mid");
    let p = d.path().join("auth.log");
    append(&p, b"old\nhalf a li");
    let mut t = FileSource::new(&p);
    poll(&mut t);
    append(&p, b"ne\nnext\n");
    assert_eq!(poll(&mut t).0, ["next"]);
    assert_eq!(t.totals().overlong_lines, 0);
}

#[test]
fn partial_lines_wait_for_their_newline() {
    let d = TempDir::new("partial");
    let p = d.path().join("auth.log");
    append(&p, b"");
    let mut t = FileSource::new(&p);
    poll(&mut t);
    append(&p, b"first li");
    assert!(poll(&mut t).0.is_empty());
    append(&p, b"ne\r\nsecond");
    assert_eq!(poll(&mut t).0, ["first line"]);
    append(&p, b"\n\n\nthird\n");
    assert_eq!(poll(&mut t).0, ["second", "third"]);
}

#[test]
fn rotation_by_rename_drains_old_then_reads_new_from_start() {
    let d = TempDir::new("rename");
    let p = d.path().join("auth.log");
    let old = d.path().join("auth.log.1");
    append(&p, b"history\n");
    let mut t = FileSource::new(&p);
    poll(&mut t);
    append(&p, b"a\n");
    // The writer adds to the old file after the rename, before reopening.
    std::fs::rename(&p, &old).unwrap();
    append(&old, b"b\nunterminated");
    // Path missing: keep reading the old descriptor.
    let (lines, st) = poll(&mut t);
    assert_eq!(lines, ["a", "b"]);
    assert!(!st.rotated && !st.missing);
    append(&p, b"c\n");
    append(&old, b" end");
    let (lines, st) = poll(&mut t);
    assert!(st.rotated);
    assert_eq!(lines, ["unterminated end", "c"]);
    append(&p, b"d\n");
    assert_eq!(poll(&mut t).0, ["d"]);
    assert_eq!(t.totals().rotations, 1);
}

#[test]
fn copytruncate_restarts_at_zero() {
    let d = TempDir::new("trunc");
    let p = d.path().join("auth.log");
    append(&p, b"history line that is long enough\n");
    let mut t = FileSource::new(&p);
    poll(&mut t);
    append(&p, b"x\npartial");
    assert_eq!(poll(&mut t).0, ["x"]);
    // Truncated in place without a copy (or the copy was removed at once).
    OpenOptions::new()
        .write(true)
        .open(&p)
        .unwrap()
        .set_len(0)
        .unwrap();
    append(&p, b"after\n");
    let (lines, st) = poll(&mut t);
    assert!(st.truncated && !st.rotated);
    assert_eq!(lines, ["after"]);
    assert_eq!(t.totals().partial_dropped, 1);
    assert_eq!(t.totals().truncations, 1);
}

#[test]
fn copytruncate_reads_the_rest_of_the_copy_first() {
    let d = TempDir::new("trunc-copy");
    let p = d.path().join("auth.log");
    append(&p, b"history line that is long enough\n");
    let mut t = FileSource::new(&p);
    poll(&mut t);
    append(&p, b"x\npartial");
    assert_eq!(poll(&mut t).0, ["x"]);
    // Written after the last read, then logrotate's copytruncate, then new lines.
    append(&p, b" line\ny\n");
    std::fs::copy(&p, d.path().join("auth.log.1")).unwrap();
    OpenOptions::new()
        .write(true)
        .open(&p)
        .unwrap()
        .set_len(0)
        .unwrap();
    append(&p, b"after\n");
    let (lines, st) = poll(&mut t);
    assert!(st.truncated);
    assert_eq!(lines, ["partial line", "y", "after"]);
    assert_eq!(t.totals().partial_dropped, 0);
    append(&p, b"more\n");
    assert_eq!(poll(&mut t).0, ["more"]);
}

#[test]
fn absence_then_creation_reads_from_start_without_errors() {
    let d = TempDir::new("absent");
    let p = d.path().join("auth.log");
    let mut t = FileSource::new(&p);
    for _ in 0..3 {
        let (lines, st) = poll(&mut t);
        assert!(lines.is_empty() && st.missing);
    }
    append(&p, b"created 1\ncreated 2\n");
    let (lines, st) = poll(&mut t);
    assert!(st.opened);
    assert_eq!(lines, ["created 1", "created 2"]);
}

#[test]
fn deleted_and_recreated_file_is_followed() {
    let d = TempDir::new("recreate");
    let p = d.path().join("auth.log");
    append(&p, b"h\n");
    let mut t = FileSource::new(&p);
    poll(&mut t);
    std::fs::remove_file(&p).unwrap();
    assert!(poll(&mut t).0.is_empty());
    append(&p, b"again\n");
    let (lines, st) = poll(&mut t);
    assert!(st.rotated);
    assert_eq!(lines, ["again"]);
}

#[test]
fn over_long_lines_are_dropped_whole_and_counted() {
    let d = TempDir::new("long");
    let p = d.path().join("auth.log");
    append(&p, b"");
    let mut t = FileSource::new(&p);
    poll(&mut t);
    let long = vec![b'x'; MAX_LINE_BYTES + 1];
    append(&p, &long);
    append(&p, b"\nok\n");
    // Also a long line built across polls.
    append(&p, &long[..MAX_LINE_BYTES - 10]);
    let (lines, st) = poll(&mut t);
    assert_eq!(lines, ["ok"]);
    assert_eq!(st.overlong_lines, 1);
    assert!(!t.discarding());
    append(&p, b"0123456789abcdef");
    // Counted as soon as it is known to be too long, before its newline arrives; the
    // source stays attached with a valid checkpoint at the start of that line.
    let (lines, st) = poll(&mut t);
    assert!(lines.is_empty());
    assert_eq!(st.overlong_lines, 1);
    assert!(t.discarding() && t.is_open());
    let cp = t.checkpoint().expect("a checkpoint while discarding");
    assert_eq!(cp.offset as usize, MAX_LINE_BYTES + 1 + 1 + 3);
    append(&p, b"more of it\nfine\n");
    let (lines, st) = poll(&mut t);
    assert_eq!(lines, ["fine"]);
    assert_eq!(st.overlong_lines, 0);
    assert_eq!(t.totals().overlong_lines, 2);
    assert!(!t.discarding());
    // Exactly the cap is allowed.
    append(&p, &long[..MAX_LINE_BYTES]);
    append(&p, b"\n");
    assert_eq!(poll(&mut t).0.len(), 1);
}

#[test]
fn per_poll_budget_and_bytes_behind() {
    let d = TempDir::new("budget");
    let p = d.path().join("auth.log");
    let line = b"0123456789012345678901234567890123456789012345678901234567890123456789\n";
    let mut big = Vec::new();
    while (big.len() as u64) < MAX_BYTES_PER_POLL + 1_000_000 {
        big.extend_from_slice(line);
    }
    append(&p, &big);
    let mut t = FileSource::from_start(&p);
    let (lines, st) = poll(&mut t);
    assert!(st.more);
    assert!(t.bytes_behind() > 0);
    let (rest, st2) = poll(&mut t);
    assert!(!st2.more);
    assert_eq!(t.bytes_behind(), 0);
    assert_eq!(lines.len() + rest.len(), big.len() / line.len());
}

#[test]
fn garbage_bytes_never_panic() {
    let d = TempDir::new("garbage");
    let p = d.path().join("auth.log");
    let mut t = FileSource::from_start(&p);
    let mut s = 7u64;
    let mut total = 0;
    for round in 0..200 {
        let mut b = Vec::new();
        for _ in 0..(round * 37 % 3000) {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            b.push(if s % 11 < 1 { b'\n' } else { s as u8 });
        }
        append(&p, &b);
        let mut out = Vec::new();
        t.poll(&mut out).unwrap();
        total += out.len();
    }
    assert!(total > 0);
}

#[test]
fn unreadable_then_readable_file_is_still_history() {
    use std::os::unix::fs::PermissionsExt;
    if nix::unistd::Uid::effective().is_root() {
        eprintln!("skipped: root reads mode-0000 files");
        return;
    }
    let d = TempDir::new("unreadable");
    let p = d.path().join("auth.log");
    append(&p, b"history\n");
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o000)).unwrap();
    let mut t = FileSource::new(&p);
    let mut out = Vec::new();
    assert!(t.poll(&mut out).is_err());
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).unwrap();
    t.poll(&mut out).unwrap();
    assert!(out.is_empty(), "history must not be replayed: {out:?}");
    append(&p, b"new\n");
    t.poll(&mut out).unwrap();
    assert_eq!(out, ["new"]);
}

#[test]
fn read_errors_recover_when_the_path_is_replaced() {
    let d = TempDir::new("isdir");
    let p = d.path().join("auth.log");
    std::fs::create_dir(&p).unwrap();
    let mut t = FileSource::new(&p);
    let mut out = Vec::new();
    // A directory opens but cannot be read: an error each poll, not a panic.
    assert!(t.poll(&mut out).is_err());
    assert!(t.poll(&mut out).is_err());
    std::fs::remove_dir(&p).unwrap();
    append(&p, b"created after\n");
    let _ = t.poll(&mut out);
    t.poll(&mut out).unwrap();
    assert_eq!(out, ["created after"]);
}

#[test]
fn truncated_and_refilled_past_the_offset_is_read_from_zero() {
    let d = TempDir::new("refill");
    let p = d.path().join("auth.log");
    append(&p, b"");
    let mut t = FileSource::new(&p);
    poll(&mut t);
    append(&p, b"first line\nsecond line\n");
    assert_eq!(poll(&mut t).0, ["first line", "second line"]);
    // Between two polls: truncated, then refilled beyond the old read position.
    std::fs::write(&p, b"rewritten one\nrewritten two\nrewritten three\n").unwrap();
    let (lines, st) = poll(&mut t);
    assert!(st.truncated);
    assert_eq!(lines, ["rewritten one", "rewritten two", "rewritten three"]);
    assert_eq!(t.totals().truncations, 1);
    // Plain growth is not a truncation.
    append(&p, b"four\n");
    let (lines, st) = poll(&mut t);
    assert!(!st.truncated);
    assert_eq!(lines, ["four"]);
}

#[test]
fn resumes_at_a_checkpoint_and_reads_replacements_from_the_start() {
    let d = TempDir::new("resume");
    let p = d.path().join("auth.log");
    std::fs::write(&p, "one\ntwo\npart").unwrap();
    let mut t = FileSource::from_start(&p);
    assert_eq!(poll(&mut t).0, ["one", "two"]);
    let cp = t.checkpoint().unwrap();
    assert_eq!(cp.offset, 8, "the partial line is not past the checkpoint");
    // Same file, more lines: resume continues after the last complete line.
    append(&p, b"ial\nthree\n");
    let mut r = FileSource::resume(&p, cp);
    assert_eq!(poll(&mut r).0, ["partial", "three"]);
    // Same inode rewritten while down (fingerprint differs): read from its start.
    std::fs::write(&p, "other\ncontent\nlonger than before\n").unwrap();
    let mut r = FileSource::resume(&p, cp);
    let (lines, st) = poll(&mut r);
    assert!(st.truncated);
    assert_eq!(lines, ["other", "content", "longer than before"]);
    // A different inode at the path and no rotated file with the old one: from its start.
    // (The old file is kept elsewhere so that its inode number is not reused.)
    std::fs::create_dir(d.path().join("archive")).unwrap();
    std::fs::rename(&p, d.path().join("archive/old")).unwrap();
    std::fs::write(&p, "fresh\n").unwrap();
    let mut r = FileSource::resume(&p, cp);
    assert_eq!(poll(&mut r).0, ["fresh"]);
    assert_eq!(r.totals().resume_lost, 1);
}

#[test]
fn resume_across_rotations_reads_the_rotated_files_first() {
    let d = TempDir::new("resume-rot");
    let p = d.path().join("auth.log");
    append(&p, b"a1\na2\n");
    let mut t = FileSource::from_start(&p);
    assert_eq!(poll(&mut t).0, ["a1", "a2"]);
    let cp = t.checkpoint().unwrap();
    drop(t);
    // While down: more lines, rotation (auth.log -> auth.log.1), new lines, another
    // rotation (auth.log.1 -> auth.log.2, auth.log -> auth.log.1), a compressed old file
    // that must be ignored, and a current file.
    append(&p, b"a3\na4 unterminated");
    std::fs::rename(&p, d.path().join("auth.log.1")).unwrap();
    std::thread::sleep(std::time::Duration::from_millis(20));
    append(&p, b"b1\nb2\n");
    std::fs::rename(d.path().join("auth.log.1"), d.path().join("auth.log.2")).unwrap();
    std::fs::rename(&p, d.path().join("auth.log.1")).unwrap();
    std::fs::write(d.path().join("auth.log.3.gz"), b"not text\n").unwrap();
    std::thread::sleep(std::time::Duration::from_millis(20));
    append(&p, b"c1\n");
    let mut r = FileSource::resume(&p, cp);
    let mut all = Vec::new();
    loop {
        let (lines, st) = poll(&mut r);
        all.extend(lines);
        if !st.more && !st.rotated {
            break;
        }
    }
    assert_eq!(all, ["a3", "a4 unterminated", "b1", "b2", "c1"]);
    assert_eq!(r.totals().resumed_rotated, 1);
    append(&p, b"c2\n");
    assert_eq!(poll(&mut r).0, ["c2"]);
}

#[test]
fn a_pausing_sink_gets_the_rest_at_the_next_poll() {
    let d = TempDir::new("pause");
    let p = d.path().join("auth.log");
    append(&p, b"l1\nl2\nl3\nl4\nl5 partial");
    let mut t = FileSource::from_start(&p);
    let mut got = Vec::new();
    let mut polls = 0;
    loop {
        polls += 1;
        let st = t
            .poll_with(&mut |l| {
                got.push(l.to_string());
                if l == "l2" || l == "l4" {
                    ControlFlow::Break(())
                } else {
                    ControlFlow::Continue(())
                }
            })
            .unwrap();
        if got.len() == 2 {
            assert!(st.more);
            let cp = t.checkpoint().unwrap();
            assert_eq!(cp.offset, 6, "checkpoint right after the pausing line");
        }
        if !st.more {
            break;
        }
    }
    assert_eq!(got, ["l1", "l2", "l3", "l4"]);
    assert_eq!(polls, 3);
    append(&p, b"\n");
    assert_eq!(poll(&mut t).0, ["l5 partial"]);
}

#[test]
fn checkpoint_fingerprints_cover_the_bytes_before_the_offset() {
    let d = TempDir::new("fp");
    let p = d.path().join("auth.log");
    let mut text = Vec::new();
    for i in 0..100 {
        text.extend_from_slice(format!("line number {i}\n").as_bytes());
    }
    append(&p, &text);
    append(&p, b"partial");
    let mut t = FileSource::from_start(&p);
    poll(&mut t);
    let cp = t.checkpoint().unwrap();
    assert_eq!(cp.offset as usize, text.len());
    let start = text.len() - crate::watch::tail::checkpoint::FINGERPRINT_BYTES;
    assert_eq!(
        cp.fingerprint,
        Some(crate::watch::tail::checkpoint::fingerprint(&text[start..]))
    );
    // A resumed source reports the same fingerprint for the same position.
    let r = {
        let mut r = FileSource::resume(&p, cp);
        poll(&mut r);
        r
    };
    assert_eq!(r.checkpoint(), Some(cp));
}

#[test]
fn resume_after_a_copytruncate_while_down_reads_the_copy_first() {
    let d = TempDir::new("resume-copy");
    let p = d.path().join("auth.log");
    append(&p, b"a1\na2\n");
    let mut t = FileSource::from_start(&p);
    assert_eq!(poll(&mut t).0, ["a1", "a2"]);
    let cp = t.checkpoint().unwrap();
    drop(t);
    // While down: more lines, then logrotate's copytruncate (copy, truncate in place), then
    // new lines in the (same inode) live file.
    append(&p, b"a3\na4\n");
    std::fs::copy(&p, d.path().join("auth.log.1")).unwrap();
    OpenOptions::new()
        .write(true)
        .open(&p)
        .unwrap()
        .set_len(0)
        .unwrap();
    append(&p, b"b1\n");
    let mut r = FileSource::resume(&p, cp);
    let (lines, _) = poll(&mut r);
    assert_eq!(lines, ["a3", "a4", "b1"]);
    assert_eq!(r.totals().resumed_rotated, 1);
    append(&p, b"b2\n");
    assert_eq!(poll(&mut r).0, ["b2"]);
}
