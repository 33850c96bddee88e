//! `poll(2)` for readability on a few descriptors (nix's `poll` feature is not enabled).

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};
use std::time::Duration;

/// Waits until at least one of `fds` is readable (or reports an error / hang-up), or until
/// `timeout` passes. Returns one flag per descriptor, in order; all `false` on timeout or
/// when interrupted by a signal.
pub fn poll_readable(fds: &[BorrowedFd<'_>], timeout: Duration) -> io::Result<Vec<bool>> {
    let mut pfds: Vec<libc::pollfd> = fds
        .iter()
        .map(|fd| libc::pollfd {
            fd: fd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        })
        .collect();
    let ms = libc::c_int::try_from(timeout.as_millis()).unwrap_or(libc::c_int::MAX);
    let nfds = libc::nfds_t::try_from(pfds.len())
        .map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    // SAFETY: `pfds` is a live, properly initialised array of `nfds` pollfd structs that
    // the kernel may write `revents` into; every fd is borrowed and so open for the call.
    let rc = unsafe { libc::poll(pfds.as_mut_ptr(), nfds, ms) };
    if rc < 0 {
        let err = io::Error::last_os_error();
        if err.kind() == io::ErrorKind::Interrupted {
            return Ok(vec![false; pfds.len()]);
        }
        return Err(err);
    }
    Ok(pfds
        .iter()
        .map(|p| p.revents & (libc::POLLIN | libc::POLLERR | libc::POLLHUP) != 0)
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsFd;

    #[test]
    fn pipe_readability_is_reported() {
        let (r, w) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).expect("pipe");
        let got = poll_readable(&[r.as_fd()], Duration::ZERO).expect("poll");
        assert_eq!(got, vec![false]);
        nix::unistd::write(&w, b"x").expect("write");
        let got = poll_readable(&[r.as_fd()], Duration::from_secs(5)).expect("poll");
        assert_eq!(got, vec![true]);
    }
}
