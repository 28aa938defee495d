//! The canary: proof that the attached programs really deny. A temporary
//! sandbox cgroup (`<cgroup2>/agent-sandbox-exec/canary-<tag>-<pid>`) gets
//! one deny_map entry, for a temporary file the caller can open
//! (`/run/agent-sandbox-exec/canary-<tag>-<pid>`); a child moves itself into
//! that cgroup and opens the file, which must fail with EPERM. Everything is
//! removed after, whatever the outcome: the entry and the cgroup id from the
//! maps ([`Bpf::forget_sandbox`]), the cgroup, the file.
//!
//! The daemon runs it on its own maps before it reports ready; the doctor
//! (`agent-sandbox-execd --check`) on the trial's unpinned maps. The keys
//! come from [`KeyContext::resolve`], the path every list line takes, so a
//! key the hook would not match (a device encoding, a filesystem) fails the
//! canary as it would fail a user's list.

use std::fs;
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::kernel::error::BpfError;
use crate::kernel::programs::Bpf;
use crate::kernel::sandboxes::Prune;
use crate::lists::entries::{DenySet, FileKey};
use crate::os::child::{self, STEP_JOIN, STEP_OPEN};
use crate::resolve::keys::{KeyContext, LastComponent, ListingSink};
use crate::resolve::witness::NoWitness;

/// How long the child may take to join its cgroup and open the file (slow
/// emulated guests take milliseconds; a stuck child is a failure).
const CHILD_DEADLINE: Duration = Duration::from_secs(20);

/// Why the canary failed; each names the step and, for the checks, what the
/// kernel did instead of denying.
#[derive(Debug, thiserror::Error)]
pub enum CanaryError {
    /// Making or removing the temporary file or cgroup, forking, a pipe.
    #[error("canary: cannot {what}: {source}")]
    Setup {
        /// The step, with its path.
        what: String,
        /// The error.
        #[source]
        source: io::Error,
    },
    /// The temporary file's key could not be computed.
    #[error("canary: cannot compute the key of {path}: {why}")]
    Key {
        /// The temporary file.
        path: PathBuf,
        /// The resolver's reason.
        why: String,
    },
    /// Inserting the entry into the maps failed.
    #[error("canary: cannot insert its entry into the maps: {0}")]
    Apply(#[source] BpfError),
    /// The child could not move itself into the canary cgroup.
    #[error("canary: the child cannot join {cgroup}: {}", errno_text(*.errno))]
    Join {
        /// The canary cgroup's directory.
        cgroup: PathBuf,
        /// write(2)'s errno on its cgroup.procs.
        errno: i32,
    },
    /// The open succeeded: the programs are attached but do not deny.
    #[error(
        "canary: a process in the sandbox cgroup {cgroup} opened the denied file {file}: the \
         programs are attached but this kernel does not apply their denial"
    )]
    NotDenied {
        /// The canary cgroup's directory.
        cgroup: PathBuf,
        /// The temporary file.
        file: PathBuf,
    },
    /// The open failed, but not with EPERM (the hook's answer).
    #[error(
        "canary: opening the denied file {file} from the sandbox cgroup failed with {}, not \
         EPERM (the programs' denial)",
        errno_text(*.errno)
    )]
    WrongErrno {
        /// The temporary file.
        file: PathBuf,
        /// open(2)'s errno.
        errno: i32,
    },
    /// The child neither answered nor exited in time, or died without answering.
    #[error("canary: the child {0}")]
    Child(String),
}

fn errno_text(errno: i32) -> String {
    match crate::kernel::errno::errno_name(errno) {
        Some(n) => format!("{n} (errno {errno})"),
        None => format!("errno {errno}"),
    }
}

impl CanaryError {
    /// What to do about it. Pure.
    pub fn fix(&self) -> &'static str {
        match self {
            CanaryError::NotDenied { .. } => {
                "enforcement does not work on this kernel although the programs load and attach; \
                 do not rely on sandboxes here; report `uname -r` and /sys/kernel/security/lsm"
            }
            CanaryError::WrongErrno { .. } => {
                "another security module or policy refused the open first (see the errno); \
                 sandboxes are not proven to be enforced here"
            }
            CanaryError::Join { .. } => {
                "run as root on the host's cgroup2 hierarchy (not inside a container's delegated tree)"
            }
            CanaryError::Apply(_) => "free memory or map capacity, then try again",
            CanaryError::Setup { .. } | CanaryError::Key { .. } | CanaryError::Child(_) => {
                "fix the cause named, then try again"
            }
        }
    }

    /// Whether a restart may help (the daemon exits 75 then, not 78).
    pub fn transient(&self) -> bool {
        !matches!(
            self,
            CanaryError::NotDenied { .. } | CanaryError::WrongErrno { .. }
        )
    }
}

fn setup(what: String) -> impl FnOnce(io::Error) -> CanaryError {
    move |source| CanaryError::Setup { what, source }
}

/// The key of the temporary file, as a list line naming it would give.
struct OneFile(Option<FileKey>);

impl ListingSink for OneFile {
    fn file(&mut self, key: FileKey) {
        self.0 = Some(key);
    }
    fn name(&mut self, _dir: FileKey, _name: &[u8]) {}
}

/// Runs the canary with `bpf`'s maps below the cgroup `parent` (the sandbox
/// tree's parent directory); `tag` tells the daemon's and the doctor's
/// temporary names apart. Returns a one-line description of what was seen.
///
/// # Errors
/// [`CanaryError`]; everything made is removed before returning either way
/// (a removal that fails is an error when the canary itself passed).
pub fn run(bpf: &mut Bpf, parent: &Path, run_dir: &Path, tag: &str) -> Result<String, CanaryError> {
    let name = format!("canary-{tag}-{}", std::process::id());
    let cgroup = parent.join(&name);
    let file = run_dir.join(&name);
    let _ = fs::DirBuilder::new().mode(0o755).create(run_dir);
    // A leftover of an earlier process with the same pid.
    let _ = fs::remove_file(&file);
    let _ = fs::remove_dir(&cgroup);
    fs::OpenOptions::new()
        .create_new(true)
        .write(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&file)
        .map_err(setup(format!("create {}", file.display())))?;
    let mut cgid = None;
    let outcome = denied_in(bpf, &cgroup, &file, &mut cgid);
    // Clean up: entries first (the file's inode is still there), then the
    // cgroup (empty once the child is reaped), then the file.
    if let Some(id) = cgid {
        bpf.forget_sandbox(id);
    }
    let removed = remove_cgroup(&cgroup)
        .and(fs::remove_file(&file).map_err(setup(format!("remove {}", file.display()))));
    let seen = outcome?;
    removed?;
    Ok(seen)
}

/// Removes the (empty) canary cgroup; rmdir(2) may see it busy for a moment
/// after the child was reaped.
fn remove_cgroup(cgroup: &Path) -> Result<(), CanaryError> {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        match fs::remove_dir(cgroup) {
            Ok(()) => return Ok(()),
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
            Err(e) if e.raw_os_error() == Some(libc::EBUSY) && Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(50));
            }
            Err(e) => return Err(setup(format!("remove the cgroup {}", cgroup.display()))(e)),
        }
    }
}

fn denied_in(
    bpf: &mut Bpf,
    cgroup: &Path,
    file: &Path,
    cgid: &mut Option<u64>,
) -> Result<String, CanaryError> {
    // Readable outside: what the child sees is the sandbox's doing.
    fs::File::open(file).map_err(setup(format!(
        "open {} outside the sandbox",
        file.display()
    )))?;
    let mut ctx = KeyContext::new().map_err(setup("read the mount table".into()))?;
    let mut one = OneFile(None);
    ctx.resolve(file, LastComponent::NoFollow, &mut one, &mut NoWitness)
        .map_err(|e| CanaryError::Key {
            path: file.to_path_buf(),
            why: e.to_string(),
        })?;
    let key = one.0.ok_or_else(|| CanaryError::Key {
        path: file.to_path_buf(),
        why: "no file found there".into(),
    })?;
    fs::DirBuilder::new()
        .mode(0o700)
        .create(cgroup)
        .map_err(setup(format!("create the cgroup {}", cgroup.display())))?;
    let id = crate::os::cgroup::cgroup_id(cgroup).map_err(|e| CanaryError::Setup {
        what: format!("stat the cgroup {}", cgroup.display()),
        source: io::Error::other(e.to_string()),
    })?;
    *cgid = Some(id);
    bpf.apply(id, &DenySet::new(vec![key], Vec::new()), Prune::Stale)
        .map_err(CanaryError::Apply)?;
    let (step, errno) = child_open(&cgroup.join("cgroup.procs"), file)?;
    match (step, errno) {
        (STEP_JOIN, e) => Err(CanaryError::Join {
            cgroup: cgroup.to_path_buf(),
            errno: e,
        }),
        (STEP_OPEN, 0) => Err(CanaryError::NotDenied {
            cgroup: cgroup.to_path_buf(),
            file: file.to_path_buf(),
        }),
        (STEP_OPEN, libc::EPERM) => Ok(format!(
            "a child in the temporary sandbox cgroup {} was refused the denied temporary file {} \
             with EPERM; both removed",
            cgroup.display(),
            file.display()
        )),
        (STEP_OPEN, e) => Err(CanaryError::WrongErrno {
            file: file.to_path_buf(),
            errno: e,
        }),
        (s, _) => Err(CanaryError::Child(format!("reported an unknown step {s}"))),
    }
}

/// Forks a child that writes `0` (itself) to `procs`, then opens `file`
/// read-only, and reports (step, errno) on a pipe
/// ([`child::fork_join_open`]: only async-signal-safe calls in the child).
fn child_open(procs: &Path, file: &Path) -> Result<(u8, i32), CanaryError> {
    let c_procs = std::ffi::CString::new(procs.as_os_str().as_bytes())
        .map_err(|_| setup("name the cgroup".into())(io::ErrorKind::InvalidInput.into()))?;
    let c_file = std::ffi::CString::new(file.as_os_str().as_bytes())
        .map_err(|_| setup("name the file".into())(io::ErrorKind::InvalidInput.into()))?;
    let (r, w) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)
        .map_err(|e| setup("create a pipe".into())(e.into()))?;
    let pid = child::fork_join_open(&c_procs, &c_file, w).map_err(setup("fork".into()))?;
    let answer = read_answer(&r);
    if answer.is_err() {
        let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGKILL);
    }
    let _ = nix::sys::wait::waitpid(pid, None);
    answer
}

fn read_answer(r: &OwnedFd) -> Result<(u8, i32), CanaryError> {
    use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
    let deadline = Instant::now() + CHILD_DEADLINE;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(CanaryError::Child(format!(
                "did not answer within {} s",
                CHILD_DEADLINE.as_secs()
            )));
        }
        let mut pfd = [PollFd::new(r.as_fd(), PollFlags::POLLIN)];
        // Below 20 s: in range.
        let timeout = PollTimeout::try_from(left.as_millis()).unwrap_or(PollTimeout::MAX);
        match poll(&mut pfd, timeout) {
            Ok(n) if n > 0 => break,
            Ok(_) | Err(nix::errno::Errno::EINTR) => {}
            Err(e) => return Err(setup("poll the child's pipe".into())(e.into())),
        }
    }
    let mut msg = [0u8; child::REPORT_LEN];
    if nix::unistd::read(r, &mut msg) != Ok(msg.len()) {
        return Err(CanaryError::Child("exited without answering".into()));
    }
    Ok(child::parse_report(&msg))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outcomes_name_cause_and_fix() {
        let nd = CanaryError::NotDenied {
            cgroup: "/sys/fs/cgroup/agent-sandbox-exec/canary-d-1".into(),
            file: "/run/agent-sandbox-exec/canary-d-1".into(),
        };
        let text = nd.to_string();
        assert!(text.contains("opened the denied file"), "{text}");
        assert!(text.contains("canary-d-1"), "{text}");
        assert!(nd.fix().contains("does not work on this kernel"));
        assert!(
            !nd.transient(),
            "a kernel that does not deny will not on a restart"
        );
        let we = CanaryError::WrongErrno {
            file: "/run/x".into(),
            errno: libc::EACCES,
        };
        assert!(
            we.to_string().contains("EACCES (errno 13), not EPERM"),
            "{we}"
        );
        assert!(!we.transient());
        let j = CanaryError::Join {
            cgroup: "/sys/fs/cgroup/x".into(),
            errno: libc::EACCES,
        };
        assert!(
            j.to_string()
                .contains("cannot join /sys/fs/cgroup/x: EACCES"),
            "{j}"
        );
        assert!(j.transient());
        assert!(CanaryError::Child("did not answer".into()).transient());
    }
}
