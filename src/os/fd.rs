//! Descriptors known by number: this process's own, listed or sent to it,
//! which may be closed by the time they are looked at ([`fstat`],
//! [`status_flags`], [`dup`]: the kernel checks the number, `EBADF`);
//! standard input taken as the socket it is ([`take_stdin`]); and
//! descriptors received with `SCM_RIGHTS` ([`recv_with_fd`]), owned from
//! the moment they arrive.

use std::io;
use std::mem::MaybeUninit;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, Ordering};

use nix::sys::socket::{ControlMessageOwned, MsgFlags, recvmsg};

/// fstat(2) of descriptor number `n`.
///
/// # Errors
/// fstat's: `EBADF` when `n` is not open.
pub fn fstat(n: RawFd) -> io::Result<libc::stat> {
    let mut st = MaybeUninit::<libc::stat>::zeroed();
    // SAFETY: st is a valid out-buffer; the kernel checks n (EBADF).
    if unsafe { libc::fstat(n, st.as_mut_ptr()) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: fstat() returned 0, so it filled the buffer.
    Ok(unsafe { st.assume_init() })
}

/// The file status flags (`fcntl(n, F_GETFL)`: access mode, `O_PATH`,
/// `O_NONBLOCK`, ...) of descriptor number `n`.
///
/// # Errors
/// fcntl's: `EBADF` when `n` is not open.
pub fn status_flags(n: RawFd) -> io::Result<i32> {
    // SAFETY: F_GETFL takes no argument and only reads the flags of n;
    // the kernel checks n (EBADF).
    let flags = unsafe { libc::fcntl(n, libc::F_GETFL) };
    if flags < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(flags)
}

/// A close-on-exec duplicate of descriptor number `n`, numbered 3 or above
/// (`fcntl(n, F_DUPFD_CLOEXEC, 3)`, as std's `try_clone_to_owned`).
///
/// # Errors
/// fcntl's: `EBADF` when `n` is not open, `EMFILE`.
pub fn dup(n: RawFd) -> io::Result<OwnedFd> {
    // SAFETY: F_DUPFD_CLOEXEC takes an int; the kernel checks n (EBADF).
    let fd = unsafe { libc::fcntl(n, libc::F_DUPFD_CLOEXEC, 3) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: fcntl() returned a new descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Whether [`take_stdin`] was called.
static STDIN_TAKEN: AtomicBool = AtomicBool::new(false);

/// Standard input (descriptor 0) as an owned descriptor, for a process
/// whose standard input is its socket (a resolver's): dropping it closes
/// descriptor 0. None when descriptor 0 is not open (this binary skips
/// std's start-up, which would have opened /dev/null there) or was taken
/// already.
pub fn take_stdin() -> Option<OwnedFd> {
    if STDIN_TAKEN.swap(true, Ordering::SeqCst) {
        return None;
    }
    // SAFETY: F_GETFD takes no argument and only reads descriptor 0's flags.
    if unsafe { libc::fcntl(0, libc::F_GETFD) } < 0 {
        return None;
    }
    // SAFETY: descriptor 0 is open (F_GETFD succeeded), and nothing else in
    // this process owns it: std's stdin handle does not close it, and
    // STDIN_TAKEN makes this the only OwnedFd made of it.
    Some(unsafe { OwnedFd::from_raw_fd(0) })
}

/// What one [`recv_with_fd`] got.
#[derive(Debug)]
pub struct Received {
    /// Bytes of data read; 0 when the peer closed the connection.
    pub bytes: usize,
    /// The descriptors that came with it (close-on-exec).
    pub fds: Vec<OwnedFd>,
    /// Whether the control data was cut short (`MSG_CTRUNC`: more
    /// descriptors were sent than there is room for); then `fds` is empty.
    pub truncated: bool,
}

/// One recvmsg(2) on `sock` into `buf`, with room for one descriptor
/// (`SCM_RIGHTS`, received with `MSG_CMSG_CLOEXEC`), retried on `EINTR`.
///
/// # Errors
/// recvmsg's, other than `EINTR`.
pub fn recv_with_fd(sock: BorrowedFd<'_>, buf: &mut [u8]) -> io::Result<Received> {
    let mut cmsg = nix::cmsg_space!([RawFd; 1]);
    loop {
        let mut iov = [io::IoSliceMut::new(&mut *buf)];
        let msg = match recvmsg::<()>(
            sock.as_raw_fd(),
            &mut iov,
            Some(&mut cmsg),
            MsgFlags::MSG_CMSG_CLOEXEC,
        ) {
            Ok(m) => m,
            Err(nix::errno::Errno::EINTR) => continue,
            Err(e) => return Err(e.into()),
        };
        let mut fds = Vec::new();
        let truncated = match msg.cmsgs() {
            Ok(cmsgs) => {
                for c in cmsgs {
                    if let ControlMessageOwned::ScmRights(raw) = c {
                        // SAFETY: descriptors just received are new in
                        // this process, and nothing else owns them.
                        fds.extend(
                            raw.into_iter()
                                .map(|fd| unsafe { OwnedFd::from_raw_fd(fd) }),
                        );
                    }
                }
                false
            }
            Err(_) => true,
        };
        return Ok(Received {
            bytes: msg.bytes,
            fds,
            truncated,
        });
    }
}
