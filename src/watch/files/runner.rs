//! Backend selection and the watch thread's loop.

use std::io;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use super::ctx::Ctx;
use super::fanotify_src::FanotifySource;
use super::inotify_src::InotifySource;
use super::reconcile::Reconcile;
use super::stats::WatchCounters;
use super::{Backend, BackendChoice, Control, Source, WatchOptions};
use crate::sys::poll::poll_readable;

pub(crate) type Selected = (Box<dyn Source>, Ctx, Backend, &'static str);

const FID_DESC: &str = "fanotify (filesystem marks, FID: close-write, moves and links)";
const PLAIN_DESC: &str = "fanotify (mount marks: close-write only)";
const INOTIFY_DESC: &str = "inotify (recursive directory watches)";

fn fanotify(
    roots: &[PathBuf],
    opts: &WatchOptions,
    counters: &Arc<WatchCounters>,
    reconcile: &Arc<Reconcile>,
) -> io::Result<Selected> {
    let mut ctx = Ctx::new(roots, opts, counters.clone(), reconcile.clone());
    let src = FanotifySource::new(&mut ctx, opts.fanotify_fid)?;
    let desc = if src.fid_mode() { FID_DESC } else { PLAIN_DESC };
    Ok((Box::new(src), ctx, Backend::Fanotify, desc))
}

fn inotify(
    roots: &[PathBuf],
    opts: &WatchOptions,
    counters: &Arc<WatchCounters>,
    reconcile: &Arc<Reconcile>,
) -> io::Result<Selected> {
    let mut ctx = Ctx::new(roots, opts, counters.clone(), reconcile.clone());
    let src = InotifySource::new(&mut ctx)?;
    Ok((Box::new(src), ctx, Backend::Inotify, INOTIFY_DESC))
}

/// Builds the backend `opts.backend` asks for, falling back from fanotify to inotify in
/// `Auto` mode (with a log line saying why).
pub(crate) fn select(
    roots: &[PathBuf],
    opts: &WatchOptions,
    counters: &Arc<WatchCounters>,
    reconcile: &Arc<Reconcile>,
) -> io::Result<Selected> {
    match opts.backend {
        BackendChoice::Inotify => inotify(roots, opts, counters, reconcile),
        BackendChoice::Fanotify => fanotify(roots, opts, counters, reconcile),
        BackendChoice::Auto => match fanotify(roots, opts, counters, reconcile) {
            Ok(s) => Ok(s),
            Err(e) => {
                log::info!("file watcher: fanotify unavailable ({e}); falling back to inotify");
                // Start the fallback from clean counters.
                for c in [&counters.watches, &counters.roots_attached] {
                    c.store(0, Ordering::Relaxed);
                }
                reconcile.set_roots(Vec::new());
                inotify(roots, opts, counters, reconcile)
            }
        },
    }
}

fn drain(fd: &OwnedFd) {
    let mut buf = [0u8; 64];
    while let Ok(n) = nix::unistd::read(fd.as_raw_fd(), &mut buf) {
        if n == 0 {
            break;
        }
    }
}

fn nanos(d: Duration) -> i64 {
    i64::try_from(d.as_nanos()).unwrap_or(i64::MAX)
}

/// The watch thread: waits on the backend and the wake pipe, handles events, and runs the
/// root check when the clock passes the retry deadline or a rescan is requested.
pub(crate) fn run(
    mut src: Box<dyn Source>,
    mut ctx: Ctx,
    control: Arc<Control>,
    wake: OwnedFd,
    poll: Duration,
    retry: Duration,
) {
    let mut next_check = ctx.now().saturating_add(nanos(retry));
    while !control.stop.load(Ordering::SeqCst) {
        let ready = match poll_readable(&[src.fd(), wake.as_fd()], poll) {
            Ok(r) => r,
            Err(e) => {
                log::error!("file watcher: poll failed: {e}");
                std::thread::sleep(poll);
                continue;
            }
        };
        if control.stop.load(Ordering::SeqCst) {
            break;
        }
        if ready.get(1).copied().unwrap_or(false) {
            drain(&wake);
        }
        if ready.first().copied().unwrap_or(false) {
            src.on_readable(&mut ctx);
        }
        let now = ctx.now();
        if control.rescan.swap(false, Ordering::SeqCst) || now >= next_check {
            ctx.excluded.refresh();
            src.check_roots(&mut ctx);
            next_check = now.saturating_add(nanos(retry));
        }
    }
    log::info!("file watcher: stopped");
}
