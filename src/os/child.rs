//! Child processes that run code of ours between fork(2) and exec(2), or
//! instead of exec: the daemon's resolver processes ([`die_with_parent`])
//! and the canary's child ([`fork_join_open`]). The daemon has threads
//! (libbpf's, the log's), so a forked child may only make async-signal-safe
//! calls (signal-safety(7)) until it execs or exits: no allocation, no lock.
//! Both keep that in this file, where every call the child makes is in sight.

use std::ffi::CStr;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::os::unix::process::CommandExt;
use std::process::Command;

use nix::unistd::Pid;

/// Makes `cmd`'s child, between its fork and its exec, take SIGKILL as its
/// parent-death signal (`PR_SET_PDEATHSIG`: it dies with the daemon) and
/// mark every descriptor from 3 up close-on-exec (`close_range(2)` with
/// `CLOSE_RANGE_CLOEXEC`: no descriptor but stdio crosses exec). Failures
/// of either are ignored, as the exec'd program checks what it needs.
pub fn die_with_parent(cmd: &mut Command) {
    // SAFETY: the closure makes two system calls (prctl, close_range),
    // both async-signal-safe, on no memory of the parent's; it allocates
    // nothing and takes no lock.
    unsafe {
        cmd.pre_exec(|| {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0);
            libc::close_range(3, u32::MAX, libc::CLOSE_RANGE_CLOEXEC as libc::c_int);
            Ok(())
        });
    }
}

/// The step a [`fork_join_open`] child reports first: writing to
/// `cgroup.procs` (joining the cgroup) failed.
pub const STEP_JOIN: u8 = 1;
/// The step a [`fork_join_open`] child reports when it got to the open: the
/// errno is the open's (0: it succeeded).
pub const STEP_OPEN: u8 = 2;
/// Bytes of a [`fork_join_open`] child's report: the step, then the errno
/// (native-endian i32).
pub const REPORT_LEN: usize = 5;

/// Forks a child that writes `0\n` to `procs` (a `cgroup.procs` file: the
/// child moves itself into that cgroup), then opens `file` read-only, and
/// writes its report (step and errno, [`REPORT_LEN`] bytes, see
/// [`parse_report`]) to `report`, the write end of a pipe, then `_exit(0)`s.
/// The child makes only async-signal-safe calls (open, write, `_exit`) on
/// memory prepared before the fork; the descriptors it opens are not
/// closed (its exit does). In the parent, `report` is closed before this
/// returns, so the read end sees end-of-file once the child is gone.
///
/// The caller reaps the child (waitpid(2)).
///
/// # Errors
/// fork's.
pub fn fork_join_open(procs: &CStr, file: &CStr, report: OwnedFd) -> io::Result<Pid> {
    // SAFETY: in the child, only async-signal-safe calls follow (see
    // child_join_open), on memory prepared before the fork, and the child
    // never returns from here.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(io::Error::last_os_error());
    }
    if pid == 0 {
        // SAFETY: this is the forked child.
        unsafe { child_join_open(procs, file, report.as_raw_fd()) }
    }
    drop(report);
    Ok(Pid::from_raw(pid))
}

/// The forked child's whole life: join, open, report, exit.
///
/// # Safety
/// Only in a child just forked: it never returns.
unsafe fn child_join_open(procs: &CStr, file: &CStr, w: RawFd) -> ! {
    // SAFETY: both strings are NUL-terminated and were made before the
    // fork; `b"0\n"` is 2 valid bytes; errno is this thread's.
    unsafe {
        let p = libc::open(procs.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
        if p < 0 || libc::write(p, b"0\n".as_ptr().cast(), 2) != 2 {
            child_report(w, STEP_JOIN, *libc::__errno_location());
        }
        let f = libc::open(file.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC);
        let errno = if f < 0 { *libc::__errno_location() } else { 0 };
        child_report(w, STEP_OPEN, errno)
    }
}

/// The child's last act: writes (step, errno) to `w` and exits.
///
/// # Safety
/// Only in the forked child: it never returns.
unsafe fn child_report(w: RawFd, step: u8, errno: i32) -> ! {
    let mut msg = [0u8; REPORT_LEN];
    msg[0] = step;
    msg[1..].copy_from_slice(&errno.to_ne_bytes());
    // SAFETY: msg is valid for msg.len() bytes; _exit never returns.
    unsafe {
        libc::write(w, msg.as_ptr().cast(), msg.len());
        libc::_exit(0)
    }
}

/// A [`fork_join_open`] child's report: (step, errno).
pub fn parse_report(msg: &[u8; REPORT_LEN]) -> (u8, i32) {
    (msg[0], i32::from_ne_bytes([msg[1], msg[2], msg[3], msg[4]]))
}
