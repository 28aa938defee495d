//! Naming a process safely: pidfds, and the /proc facts the daemon checks.
//!
//! A pid alone does not name a process: it can exit and its number be reused
//! (polkit, CVE-2019-6133). A pidfd (pidfd_open(2), Linux 5.3) pins the
//! process's `struct pid`; `pidfd_send_signal(fd, 0)` fails with ESRCH once that
//! process has exited, even if the number now belongs to another process. So a
//! fact read from /proc/<pid> is known to describe the pidfd's process when the
//! pidfd is still alive after the read.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// A pidfd for one process.
#[derive(Debug)]
pub struct Pidfd {
    fd: OwnedFd,
    pid: i32,
}

impl Pidfd {
    /// pidfd_open(2) on `pid`.
    ///
    /// # Errors
    /// ESRCH: no such process; EINVAL: not a thread-group leader; ENOSYS: kernel < 5.3.
    pub fn open(pid: i32) -> io::Result<Pidfd> {
        if pid <= 0 {
            return Err(io::Error::from_raw_os_error(libc::EINVAL));
        }
        // SAFETY: plain syscall with integer arguments.
        let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: the kernel returned a new descriptor that we own.
        let fd = unsafe { OwnedFd::from_raw_fd(fd as i32) };
        Ok(Pidfd { fd, pid })
    }

    /// The pid this pidfd was opened for.
    pub fn pid(&self) -> i32 {
        self.pid
    }

    /// Whether the process has not exited yet (pidfd_send_signal with signal 0).
    pub fn alive(&self) -> bool {
        // SAFETY: plain syscall; a null siginfo is allowed.
        let rc = unsafe {
            libc::syscall(
                libc::SYS_pidfd_send_signal,
                self.fd.as_raw_fd(),
                0,
                std::ptr::null::<libc::siginfo_t>(),
                0,
            )
        };
        rc == 0
    }
}

/// Whether process `pid` executes the same file as this process: the
/// device and inode number of /proc/<pid>/exe and /proc/self/exe agree.
/// Reading another user's exe link needs CAP_SYS_PTRACE (ptrace_may_access,
/// proc(5)).
///
/// The executable is stat'ed with `AT_STATX_DONT_SYNC` (statx(2)): from the
/// inode the kernel holds, without asking its file system. A plain stat of
/// a program run from a FUSE file system (e.g. through an overlay in a user
/// namespace, whose lower-layer stat runs with the mounter's credentials)
/// sends the user's FUSE server a request it may never answer, and the
/// daemon would wait in the kernel, unkillable, for every user.
///
/// # Errors
/// The statx error (ENOENT: exited; EACCES: no CAP_SYS_PTRACE).
pub fn runs_same_executable(pid: i32) -> io::Result<bool> {
    let theirs = exe_identity(&format!("/proc/{pid}/exe"))?;
    let ours = exe_identity("/proc/self/exe")?;
    Ok(theirs == ours)
}

/// (major, minor, inode) of the file a path names, from the kernel's cached
/// inode (`AT_STATX_DONT_SYNC`).
fn exe_identity(path: &str) -> io::Result<(u32, u32, u64)> {
    let c =
        std::ffi::CString::new(path).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    let mut stx = std::mem::MaybeUninit::<libc::statx>::zeroed();
    // SAFETY: c is NUL-terminated; statx writes into the zeroed buffer.
    let rc = unsafe {
        libc::statx(
            libc::AT_FDCWD,
            c.as_ptr(),
            libc::AT_STATX_DONT_SYNC,
            libc::STATX_INO,
            stx.as_mut_ptr(),
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: statx succeeded and filled the buffer.
    let stx = unsafe { stx.assume_init() };
    Ok((stx.stx_dev_major, stx.stx_dev_minor, stx.stx_ino))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_process_facts() {
        let me = std::process::id() as i32;
        let fd = Pidfd::open(me).unwrap();
        assert!(fd.alive());
        assert_eq!(fd.pid(), me);
        assert!(Pidfd::open(0).is_err());
        assert!(runs_same_executable(me).unwrap());
    }

    #[test]
    fn another_program_is_not_the_same_executable() {
        let mut child = std::process::Command::new("sleep")
            .arg("5")
            .spawn()
            .unwrap();
        let same = runs_same_executable(child.id() as i32).unwrap();
        child.kill().unwrap();
        child.wait().unwrap();
        assert!(!same);
    }

    #[test]
    fn pidfd_of_exited_child_is_dead() {
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let fd = Pidfd::open(child.id() as i32).unwrap();
        child.wait().unwrap();
        assert!(!fd.alive());
    }
}
