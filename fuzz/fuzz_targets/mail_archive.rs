//! Archive attachments (zip, gzip, tar): unpacking arbitrary bytes within the limits never
//! panics and never hands out more than the size and file-count limits allow.
#![no_main]
use libfuzzer_sys::fuzz_target;
use svc::mail::archive::{detect, ArchiveLimits, Kind, Unpacker};
use svc::mail::staging::Spill;

fuzz_target!(|data: &[u8]| {
    let limits = ArchiveLimits {
        max_bytes: 1 << 20,
        max_files: 32,
        max_ratio: 100,
        max_depth: 2,
    };
    let mut spill = Spill::new(usize::MAX, None);
    if spill.write(data).is_err() {
        return;
    }
    let kinds = match detect(data) {
        Some(k) => vec![k],
        None => vec![Kind::Zip, Kind::Gzip, Kind::Tar],
    };
    for kind in kinds {
        let (mut files, mut bytes) = (0usize, 0u64);
        let mut visit = |_: &svc::mail::archive::Member, s: &Spill| {
            files += 1;
            bytes += s.len();
        };
        let mut u = Unpacker::new(limits, None, 1 << 20, &mut visit);
        u.unpack(kind, &spill, data.len() as u64, "fuzz", 1);
        drop(u);
        assert!(files <= limits.max_files, "{files} files");
        assert!(bytes <= limits.max_bytes, "{bytes} bytes");
    }
});
