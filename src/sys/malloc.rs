//! glibc allocator settings: how the daemon gives memory back after a burst.
//!
//! By default glibc raises its mmap threshold each time a large block is freed, so after a
//! burst of 1 MiB request bodies every later large buffer comes from the heap arenas and
//! stays there: 32 parallel 1 MiB requests left about 70 MiB resident for good (measured
//! figures: `benches/api-memory.sh`, `docs/decisions.md`). Two settings fix that:
//!
//! - [`tune`] freezes the mmap threshold at [`MMAP_THRESHOLD`] (`M_MMAP_THRESHOLD`; setting
//!   it turns off the dynamic adjustment), so buffers of that size or more are mapped on
//!   their own and returned to the kernel when freed. Called once by `main` before any
//!   thread starts.
//! - [`tune`] also caps the number of malloc arenas at [`ARENA_MAX`] (`M_ARENA_MAX`; glibc's
//!   default is eight per core). Each thread that allocates under contention gets its own
//!   arena, and the free memory of each stays resident: the collector, dispatcher, store
//!   writer and event threads of a log drain each left their own partly used heap behind.
//!   With two arenas the peak RSS of that drain fell (figures in `docs/decisions.md`).
//! - [`note_large`] marks that a large request was handled; a background thread calls
//!   `malloc_trim(0)` at most once per [`TRIM_EVERY`] while marks arrive, returning the free
//!   pages the smaller allocations of that request left in the arenas.
//!
//! On other C libraries both are no-ops.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;
use std::time::Duration;

/// Allocations of this many bytes or more are mapped on their own (glibc's initial default,
/// frozen).
pub const MMAP_THRESHOLD: usize = 128 * 1024;
/// Most malloc arenas (threads share them beyond this).
pub const ARENA_MAX: libc::c_int = 2;
/// The trimming thread looks for marks this often.
pub const TRIM_EVERY: Duration = Duration::from_secs(1);

/// Sets the allocator options above. Returns false when the C library refused (or is not
/// glibc).
pub fn tune() -> bool {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        let v = libc::c_int::try_from(MMAP_THRESHOLD).unwrap_or(libc::c_int::MAX);
        // SAFETY: mallopt only changes allocator parameters; M_MMAP_THRESHOLD with a value
        // below HEAP_MAX (32 MiB on 64-bit) is valid input, and it is called before other
        // threads exist.
        let mmap = unsafe { libc::mallopt(libc::M_MMAP_THRESHOLD, v) == 1 };
        // SAFETY: as above; M_ARENA_MAX takes any positive count.
        let arenas = unsafe { libc::mallopt(libc::M_ARENA_MAX, ARENA_MAX) == 1 };
        mmap && arenas
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    {
        false
    }
}

/// Returns free memory at the top and inside every arena to the kernel now. True when some
/// memory was released.
pub fn trim() -> bool {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        // SAFETY: malloc_trim takes the allocator's own locks and only releases free pages;
        // it is safe to call from any thread at any time.
        unsafe { libc::malloc_trim(0) == 1 }
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    {
        false
    }
}

static MARKED: AtomicBool = AtomicBool::new(false);
static TRIMMER: OnceLock<()> = OnceLock::new();

/// Marks that a large request was handled: memory is trimmed within [`TRIM_EVERY`]. Starts
/// the trimming thread on first use; costs an atomic store otherwise.
pub fn note_large() {
    MARKED.store(true, Ordering::Release);
    TRIMMER.get_or_init(|| {
        let spawned = std::thread::Builder::new()
            .name("malloc-trim".into())
            .stack_size(64 * 1024)
            .spawn(|| loop {
                std::thread::sleep(TRIM_EVERY);
                if MARKED.swap(false, Ordering::AcqRel) {
                    trim();
                }
            });
        if let Err(e) = spawned {
            log::warn!("cannot start the malloc-trim thread: {e}");
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trim_and_marks_are_harmless() {
        let v: Vec<u8> = vec![1; 4 << 20];
        drop(v);
        let _ = trim();
        note_large();
        note_large();
    }
}
