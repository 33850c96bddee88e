//! Baseline hashing rate of the file index (issue 28): writes a tree of small files (by
//! default 65,536 files of 4-28 KiB, about 1 GiB, in 256 directories), then indexes it on
//! one thread with an empty baseline (every file opened through `sys::dir` and hashed), and
//! again against that baseline (the incremental run: only stats).
//!
//! `cargo bench --bench file_index -- [--dir DIR] [--files N] [--drop-caches]`
//!
//! The tree is reused when DIR already holds it. `--drop-caches` writes `3` to
//! `/proc/sys/vm/drop_caches` before the full run (root only), to time a cold cache.

#![allow(
    clippy::disallowed_methods,
    reason = "benchmark fixtures are built with plain std::fs calls"
)]

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::Instant;

use svc::checks::file_index::index::{index_root, IndexLimits};
use svc::store::file_index::IndexedFile;
use svc::sys::dir::Dir;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let arg = |k: &str| {
        args.iter()
            .position(|a| a == k)
            .and_then(|i| args.get(i + 1))
            .cloned()
    };
    let files: usize = arg("--files")
        .and_then(|s| s.parse().ok())
        .unwrap_or(65_536);
    let dir = arg("--dir")
        .map(PathBuf::from)
        .unwrap_or_else(|| std::env::temp_dir().join(format!("svc-bench-file-index-{files}")));
    let marker = dir.join(".complete");
    let mut total = 0u64;
    if !marker.exists() {
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        for i in 0..files {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let len = 4096 + (seed % (24 * 1024)) as usize;
            let sub = dir.join(format!("d{:03}", i % 256));
            std::fs::create_dir_all(&sub).unwrap();
            let body: Vec<u8> = (0..len).map(|j| (j as u64 ^ seed) as u8).collect();
            std::fs::write(sub.join(format!("f{i}.php")), &body).unwrap();
        }
        std::fs::write(&marker, b"").unwrap();
    }
    if args.iter().any(|a| a == "--drop-caches") {
        let _ = std::process::Command::new("sync").status();
        std::fs::write("/proc/sys/vm/drop_caches", b"3").expect("drop caches (root)");
    }
    let root = Dir::walk_trusted(&dir).unwrap();
    let limits = IndexLimits {
        max_entries: usize::MAX,
        max_depth: 64,
        deadline: None,
    };
    let now = || 0i64;
    let t = Instant::now();
    let full = index_root(&root, &HashMap::new(), limits, &now);
    let full_secs = t.elapsed().as_secs_f64();
    total += full.stats.bytes_hashed;
    let baseline: HashMap<Vec<u8>, IndexedFile> = full
        .changes
        .into_iter()
        .map(|c| (c.file.path.clone(), c.file))
        .collect();
    let t = Instant::now();
    let inc = index_root(&root, &baseline, limits, &now);
    let inc_secs = t.elapsed().as_secs_f64();
    let mib = total as f64 / (1024.0 * 1024.0);
    println!(
        "full: {} files, {:.0} MiB hashed in {:.2} s = {:.0} MiB/s, {:.0} files/s (one thread)",
        full.stats.files,
        mib,
        full_secs,
        mib / full_secs,
        full.stats.files as f64 / full_secs
    );
    println!(
        "incremental: {} files, {} hashed, {} unchanged in {:.2} s",
        inc.stats.files, inc.stats.hashed, inc.stats.unchanged, inc_secs
    );
}
