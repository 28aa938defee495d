//! Thin wrappers of the system calls the resolver and the watches share:
//! `openat(2)`, `statx(2)`, `fstatfs(2)`, with owned descriptors and
//! `io::Error`s; and of the process-wide calls nix has no safe form of:
//! `getrandom(2)`, `malloc_trim(3)`, ignoring `SIGPIPE`, local time.

use std::ffi::{CStr, CString};
use std::io;
use std::mem::MaybeUninit;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use crate::lists::entries::NAME_MAX;

/// openat(2) with `O_CLOEXEC` added: a new descriptor for `name` in `dir`.
///
/// # Errors
/// openat's, or `InvalidInput` for a name with a NUL byte.
pub fn open_at(dir: RawFd, name: &[u8], flags: i32) -> io::Result<OwnedFd> {
    let c = CString::new(name).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    // SAFETY: c is NUL-terminated; the returned descriptor is owned below.
    let fd = unsafe { libc::openat(dir, c.as_ptr(), flags | libc::O_CLOEXEC) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: openat() returned a new descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// statx(2) of `name` in `dir` (with `flags`; `AT_STATX_SYNC_AS_STAT`
/// added) for type, inode number and mount id; the attributes come with it.
///
/// # Errors
/// statx's, or `InvalidInput` for a name with a NUL byte.
pub fn statx_at(dir: RawFd, name: &[u8], flags: i32) -> io::Result<libc::statx> {
    // A component (at most NAME_MAX bytes) becomes a C string on the stack.
    let mut buf = [0u8; NAME_MAX + 1];
    let owned;
    let c: &CStr = if name.len() < buf.len() && !name.contains(&0) {
        buf[..name.len()].copy_from_slice(name);
        CStr::from_bytes_until_nul(&buf).expect("NUL-terminated")
    } else {
        owned = CString::new(name).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
        &owned
    };
    let mask = libc::STATX_TYPE | libc::STATX_INO | libc::STATX_MNT_ID;
    let mut stx = MaybeUninit::<libc::statx>::zeroed();
    // SAFETY: c is NUL-terminated; stx is a valid out-buffer of the right type.
    let rc = unsafe {
        libc::statx(
            dir,
            c.as_ptr(),
            flags | libc::AT_STATX_SYNC_AS_STAT,
            mask,
            stx.as_mut_ptr(),
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: statx() returned 0, so it filled the buffer.
    Ok(unsafe { stx.assume_init() })
}

/// The statfs `f_type` of the filesystem holding `fd` (an O_PATH descriptor
/// will do).
///
/// # Errors
/// fstatfs's.
pub fn fs_type(fd: &OwnedFd) -> io::Result<i64> {
    let mut st = MaybeUninit::<libc::statfs>::zeroed();
    // SAFETY: fd is open (fstatfs accepts O_PATH descriptors); st is a valid out-buffer.
    if unsafe { libc::fstatfs(fd.as_raw_fd(), st.as_mut_ptr()) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: fstatfs() returned 0, so it filled the buffer.
    Ok(unsafe { st.assume_init() }.f_type)
}

/// statx of the descriptor itself, not following a symlink it names.
///
/// # Errors
/// statx's.
pub fn statx_fd(fd: RawFd) -> io::Result<libc::statx> {
    statx_at(fd, b"", libc::AT_EMPTY_PATH | libc::AT_SYMLINK_NOFOLLOW)
}

/// Fills `buf` with random bytes from getrandom(2) (the urandom source,
/// blocking only until it is initialised at boot), retrying on `EINTR`.
///
/// # Errors
/// getrandom's, other than `EINTR`.
pub fn fill_random(buf: &mut [u8]) -> io::Result<()> {
    let mut got = 0;
    while got < buf.len() {
        let rest = &mut buf[got..];
        // SAFETY: writes at most rest.len() bytes into rest.
        let n = unsafe { libc::getrandom(rest.as_mut_ptr().cast(), rest.len(), 0) };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        got += n as usize;
    }
    Ok(())
}

/// Returns the heap's free pages to the kernel (malloc_trim(3), glibc only;
/// nothing elsewhere).
pub fn trim_heap() {
    #[cfg(target_env = "gnu")]
    // SAFETY: malloc_trim only releases free heap memory.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Ignores `SIGPIPE` (signal(2) with `SIG_IGN`): a write to a closed pipe
/// or socket is then an `EPIPE` error, not death; exec(2) restores the
/// default for the program. Call before any thread exists.
#[cfg_attr(test, allow(dead_code))] // the C entry point's, not built for tests
pub fn ignore_sigpipe() {
    // SAFETY: SIG_IGN is no handler of ours; sets a signal disposition,
    // before any thread exists (the caller's promise).
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_IGN) };
}

/// `secs` since the Unix epoch as local time, `YYYY-MM-DD HH:MM:SS`
/// (localtime_r(3), strftime(3); the time zone from `TZ` or
/// /etc/localtime). None if the C library cannot convert it.
pub fn local_time(secs: i64) -> Option<String> {
    let t: libc::time_t = secs;
    // SAFETY: `tm` is plain data that localtime_r fills; both pointers are
    // valid for the call.
    let mut tm: libc::tm = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    if unsafe { libc::localtime_r(&t, &mut tm) }.is_null() {
        return None;
    }
    let mut buf = [0u8; 32];
    // SAFETY: `buf` has room for `buf.len()` bytes, the format is a NUL-
    // terminated C string, `tm` was filled above.
    let n = unsafe {
        libc::strftime(
            buf.as_mut_ptr().cast(),
            buf.len(),
            c"%Y-%m-%d %H:%M:%S".as_ptr(),
            &tm,
        )
    };
    (n > 0).then(|| String::from_utf8_lossy(&buf[..n]).into_owned())
}
