//! Naming a process safely: pidfds, and the /proc facts the daemon checks.
//!
//! A pid alone does not name a process: it can exit and its number be reused
//! (polkit, CVE-2019-6133). A pidfd (pidfd_open(2), Linux 5.3) pins the
//! process's `struct pid`; `pidfd_send_signal(fd, 0)` fails with ESRCH once that
//! process has exited, even if the number now belongs to another process. So a
//! fact read from /proc/<pid> is known to describe the pidfd's process when the
//! pidfd is still alive after the read.

use std::fs;
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

/// The four uids of a process (real, effective, saved, filesystem).
pub type Uids = [u32; 4];

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

/// Reads a /proc file (or another file whose size stat reports as 0) in
/// one or two read(2) calls: `fs::read` sizes its buffer from the reported
/// size and so reads /proc files 32 bytes at first, in up to ten calls, each
/// of which makes the kernel walk the seq_file again.
///
/// # Errors
/// The open or read error.
pub fn read_pseudo(path: impl AsRef<std::path::Path>) -> io::Result<Vec<u8>> {
    read_pseudo_from(&mut fs::File::open(path)?)
}

/// [`read_pseudo`] of a file already open, from its current offset.
///
/// # Errors
/// The read error.
pub fn read_pseudo_from(file: &mut fs::File) -> io::Result<Vec<u8>> {
    use std::io::Read;
    let mut buf = Vec::with_capacity(16 << 10);
    file.read_to_end(&mut buf)?;
    Ok(buf)
}

/// [`read_pseudo`] for text.
///
/// # Errors
/// The open or read error; InvalidData if the text is not UTF-8.
pub fn read_pseudo_text(path: impl AsRef<std::path::Path>) -> io::Result<String> {
    String::from_utf8(read_pseudo(path)?).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
}

/// Reads the `Uid:` line of /proc/<pid>/status (proc(5)).
///
/// # Errors
/// The read error, or InvalidData when the line is missing or malformed.
pub fn read_uids(pid: i32) -> io::Result<Uids> {
    let text = read_pseudo_text(format!("/proc/{pid}/status"))?;
    parse_uids(&text).ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "no Uid: line"))
}

/// Parses the `Uid:` line of /proc/<pid>/status text.
pub fn parse_uids(status: &str) -> Option<Uids> {
    let line = status.lines().find_map(|l| l.strip_prefix("Uid:"))?;
    let mut it = line.split_ascii_whitespace().map(|f| f.parse::<u32>());
    let mut uids = [0u32; 4];
    for slot in &mut uids {
        *slot = it.next()?.ok()?;
    }
    Some(uids)
}

/// Reads /proc/<pid>/cgroup and returns its v2 path (`0::<path>`).
///
/// # Errors
/// The read error, or InvalidData when there is no v2 line.
pub fn read_v2_cgroup(pid: i32) -> io::Result<String> {
    let text = read_pseudo_text(format!("/proc/{pid}/cgroup"))?;
    crate::cgroup::v2_path_of(&text)
        .map(str::to_owned)
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "no cgroup v2 line"))
}

/// Field 22 (starttime, clock ticks since boot) and field 4 (ppid) of
/// /proc/<pid>/stat text (proc(5)). The command name (field 2) may hold spaces
/// and parentheses, so parsing starts after its last `)`.
pub fn parse_stat_start_ppid(stat: &str) -> Option<(u64, i32)> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_ascii_whitespace().collect();
    // rest[0] is field 3 (state).
    let ppid = fields.get(1)?.parse().ok()?;
    let start = fields.get(19)?.parse().ok()?;
    Some((start, ppid))
}

/// Reads (starttime, ppid) of `pid`.
///
/// # Errors
/// The read error, or InvalidData.
pub fn read_start_ppid(pid: i32) -> io::Result<(u64, i32)> {
    let text = read_pseudo_text(format!("/proc/{pid}/stat"))?;
    parse_stat_start_ppid(&text)
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "malformed stat"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uids_from_status() {
        let s = "Name:\tcat\nUmask:\t0022\nUid:\t1000\t1001\t1002\t1003\nGid:\t5\t5\t5\t5\n";
        assert_eq!(parse_uids(s), Some([1000, 1001, 1002, 1003]));
        assert_eq!(parse_uids("Uid:\t1\t2\n"), None);
        assert_eq!(parse_uids("Gid:\t1\t2\t3\t4\n"), None);
        assert_eq!(parse_uids("Uid:\tx\t2\t3\t4\n"), None);
    }

    #[test]
    fn stat_with_hostile_comm() {
        let s = "1234 (a) b) (c) S 77 1234 1234 0 -1 4194560 1 0 0 0 0 0 0 0 20 0 1 0 98765 1 1";
        assert_eq!(parse_stat_start_ppid(s), Some((98765, 77)));
        assert_eq!(parse_stat_start_ppid("garbage"), None);
    }

    #[test]
    fn own_process_facts() {
        let me = std::process::id() as i32;
        let fd = Pidfd::open(me).unwrap();
        assert!(fd.alive());
        assert_eq!(fd.pid(), me);
        let uid = nix::unistd::getuid().as_raw();
        assert_eq!(read_uids(me).unwrap()[0], uid);
        let (_, ppid) = read_start_ppid(me).unwrap();
        assert_eq!(ppid, nix::unistd::getppid().as_raw());
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
