//! The shared log tail on arbitrary bytes written in arbitrary pieces, with truncations:
//! it must never panic, never hand out a line with a newline or over the line limit, and
//! its checkpoint must never pass the bytes it read.
#![no_main]
use libfuzzer_sys::fuzz_target;
use std::io::Write;
use std::ops::ControlFlow;
use svc::watch::tail::{FileSource, MAX_LINE_BYTES};

fuzz_target!(|data: &[u8]| {
    let dir = std::env::temp_dir().join(format!("svc-fuzz-tail-{}", std::process::id()));
    let _ = std::fs::create_dir_all(&dir);
    let path = dir.join("auth.log");
    let _ = std::fs::remove_file(&path);
    let mut source = FileSource::from_start(&path);
    // Each piece: one control byte (low bits: length; 0xFF: truncate), then its bytes.
    let mut rest = data;
    let mut n = 0usize;
    while let Some((&ctl, tail)) = rest.split_first() {
        if ctl == 0xFF {
            let _ = std::fs::OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(true)
                .open(&path);
            rest = tail;
        } else {
            let len = usize::from(ctl).min(tail.len());
            let (piece, after) = tail.split_at(len);
            if let Ok(mut f) = std::fs::OpenOptions::new().create(true).append(true).open(&path) {
                let _ = f.write_all(piece);
            }
            rest = after;
        }
        n += 1;
        let _ = source.poll_with(&mut |line| {
            assert!(!line.contains('\n'));
            assert!(line.len() <= MAX_LINE_BYTES * 3, "{}", line.len()); // U+FFFD may grow invalid bytes
            if n % 3 == 0 {
                ControlFlow::Break(())
            } else {
                ControlFlow::Continue(())
            }
        });
        if let Some(cp) = source.checkpoint() {
            assert!(cp.offset <= source.offset());
        }
    }
    let _ = std::fs::remove_file(&path);
});
