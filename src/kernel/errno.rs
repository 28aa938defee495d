//! The kernel's answers to BPF system calls as libbpf passes them on: the
//! errno inside a libbpf error, and the names of the errnos the daemon
//! explains.

/// The kernel's internal "operation not supported" (`ENOTSUPP`,
/// include/linux/errno.h), which reaches user space from BPF: e.g.
/// `arch_prepare_bpf_trampoline()` on an architecture without trampolines.
/// Not in libc, as it is not a user-space errno.
pub const ENOTSUPP: i32 = 524;

/// The errno carried by a libbpf-rs error, if any.
///
/// libbpf-rs 0.27 builds its errors from the negative return of libbpf
/// (`Error::from_raw_os_error(-ret)`, e.g. the skeleton's load) and may layer
/// context strings on top (`attach_lsm()` adds "failed to attach LSM"). It
/// keeps the `io::Error` private: `source()` yields its own private type, so
/// the errno cannot be downcast, and `kind()` folds many errnos (EBUSY,
/// ESRCH, EMFILE, ENOTSUPP...) into `ErrorKind::Other`. The only place the
/// number survives is the text of the innermost error, which `std` writes as
/// "<description> (os error <n>)"; the alternate form (`{:#}`) prints the
/// whole chain, so the last such number is the errno.
pub fn errno_of(e: &libbpf_rs::Error) -> Option<i32> {
    const TAG: &str = "(os error ";
    let text = format!("{e:#}");
    let start = text.rfind(TAG)? + TAG.len();
    let len = text[start..].find(')')?;
    text[start..start + len]
        .parse()
        .ok()
        .filter(|&n: &i32| n > 0)
}

/// The symbolic name of the errnos [`crate::daemon::failure::classify_kernel_errno`] knows.
pub fn errno_name(errno: i32) -> Option<&'static str> {
    Some(match errno {
        libc::EPERM => "EPERM",
        libc::ENOENT => "ENOENT",
        libc::ESRCH => "ESRCH",
        libc::EINTR => "EINTR",
        libc::E2BIG => "E2BIG",
        libc::EAGAIN => "EAGAIN",
        libc::ENOMEM => "ENOMEM",
        libc::EACCES => "EACCES",
        libc::EBUSY => "EBUSY",
        libc::EINVAL => "EINVAL",
        libc::ENFILE => "ENFILE",
        libc::EMFILE => "EMFILE",
        libc::ENOSPC => "ENOSPC",
        libc::ENOSYS => "ENOSYS",
        libc::EOPNOTSUPP => "EOPNOTSUPP",
        libc::ETIMEDOUT => "ETIMEDOUT",
        ENOTSUPP => "ENOTSUPP",
        _ => return None,
    })
}
