//! Scheduling priority of the calling thread.

use std::io;

/// The calling thread's id, by the raw system call: glibc has `gettid()` only from 2.30,
/// and the packaged binary runs on 2.28, where a call through the symbol would jump to
/// address zero (a fat-LTO link turns the reference weak; a plain link refuses it).
fn thread_id() -> libc::id_t {
    // SAFETY: SYS_gettid takes no arguments and cannot fail.
    let tid = unsafe { libc::syscall(libc::SYS_gettid) };
    tid as libc::id_t
}

/// Sets the nice value of the calling thread (Linux keeps one per thread): lower runs
/// first when the CPU is contended. Lowering it below the current value needs
/// `CAP_SYS_NICE` (the daemon runs as root); the error tells the caller it stayed as it was.
pub fn set_thread_nice(nice: i32) -> io::Result<()> {
    let tid = thread_id();
    // SAFETY: setpriority only reads its integer arguments; PRIO_PROCESS with a thread id
    // changes that one thread of this process.
    let r = unsafe { libc::setpriority(libc::PRIO_PROCESS, tid, nice) };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// The nice value of the calling thread.
pub fn thread_nice() -> io::Result<i32> {
    let tid = thread_id();
    // getpriority may legitimately return -1: errno tells an error apart.
    // SAFETY: clearing errno through the libc accessor; the pointer is this thread's errno.
    unsafe { *libc::__errno_location() = 0 };
    // SAFETY: getpriority only reads its integer arguments.
    let r = unsafe { libc::getpriority(libc::PRIO_PROCESS, tid) };
    let err = io::Error::last_os_error();
    if r == -1 && err.raw_os_error().is_some_and(|e| e != 0) {
        return Err(err);
    }
    Ok(r)
}

/// Nice value of the dispatcher and the store's writer: when API requests (or anything
/// else) keep the CPU busy, the threads that take findings in still run first.
pub const INGEST_NICE: i32 = -10;

/// Raises the calling thread to [`INGEST_NICE`] where permitted (root, `CAP_SYS_NICE`, and
/// `setpriority` allowed: the shipped unit denies it, decision 448); otherwise it keeps the
/// default priority, said once in the log.
pub fn raise_priority(what: &str) {
    if let Err(e) = set_thread_nice(INGEST_NICE) {
        log::info!("{what}: runs at the default priority ({e})");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_thread_can_lower_its_own_priority() {
        std::thread::spawn(|| {
            let before = thread_nice().unwrap();
            set_thread_nice(before + 1).unwrap();
            assert_eq!(thread_nice().unwrap(), before + 1);
        })
        .join()
        .unwrap();
        // Other threads keep theirs.
        assert!(thread_nice().is_ok());
    }
}
