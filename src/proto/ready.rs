//! The daemon's state files in its run directory, both sides: the *ready*
//! file ([`Paths::ready`]: the serving daemon's pid and a newline, mode
//! 0644, replaced by rename) that the daemon publishes once it serves, and
//! the *failure* file ([`Paths::failure`]: one line, the reason it last
//! could not start) that the launcher quotes when no daemon serves.

use std::fs;
use std::io;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};

use crate::os::paths::Paths;
use crate::proto::request::one_line;

/// A step of [`publish`] that failed.
#[derive(Debug, thiserror::Error)]
#[error("{what}: {cause}")]
pub struct PublishError {
    /// The step and its path, e.g. `write /run/agent-sandbox-exec/ready.tmp`.
    pub what: String,
    /// Its error.
    pub cause: io::Error,
}

/// Publishes this process as the serving daemon: writes its pid to a
/// temporary file beside [`Paths::ready`], makes it world-readable and
/// renames it into place (a reader sees the old file or the whole new one).
///
/// # Errors
/// [`PublishError`]: the write, chmod or rename that failed.
pub fn publish(paths: &Paths) -> Result<(), PublishError> {
    let ready = paths.ready();
    let tmp = ready.with_extension("tmp");
    let step = |what: &str| {
        let what = format!("{what} {}", tmp.display());
        move |cause| PublishError { what, cause }
    };
    fs::write(&tmp, format!("{}\n", std::process::id())).map_err(step("write"))?;
    fs::set_permissions(&tmp, fs::Permissions::from_mode(0o644)).map_err(step("chmod"))?;
    fs::rename(&tmp, &ready).map_err(step("rename"))
}

/// Leaves `message` (on one line) in [`Paths::failure`] for the launcher to
/// quote; a failure to write it is logged, not returned (the daemon is
/// exiting for a better reason already).
pub fn leave_reason(paths: &Paths, message: &str) {
    let failure = paths.failure();
    let tmp = failure.with_extension("tmp");
    let _ = fs::create_dir(&paths.run_dir);
    let text = format!("{}\n", one_line(message));
    let written = fs::OpenOptions::new()
        .create(true)
        .truncate(true)
        .write(true)
        .mode(0o644)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&tmp)
        .and_then(|mut f| io::Write::write_all(&mut f, text.as_bytes()))
        .and_then(|()| fs::rename(&tmp, &failure));
    if let Err(e) = written {
        log::warn!("cannot leave the reason in {}: {e}", failure.display());
    }
}

/// Why no daemon serves, worded for the user: the cause, the daemon's last
/// failure when it left one, and where to look.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct NotServing(pub String);

/// The serving daemon's pid, from the ready file, if that process is alive.
///
/// # Errors
/// [`NotServing`]: no ready file (quoting the daemon's reason from
/// [`Paths::failure`] if it left one), a malformed one, or a pid that is gone.
pub fn serving_pid(paths: &Paths) -> Result<i32, NotServing> {
    let ready = paths.ready();
    let reason = || fs::read_to_string(paths.failure()).ok();
    let text = fs::read_to_string(&ready).map_err(|e| {
        let cause = if e.kind() == io::ErrorKind::NotFound {
            format!("{} does not exist", ready.display())
        } else {
            format!("{}: {e}", ready.display())
        };
        NotServing(not_serving(&cause, reason().as_deref()))
    })?;
    let pid: i32 = text
        .trim()
        .parse()
        .map_err(|_| NotServing(format!("{} is malformed", ready.display())))?;
    if !alive(pid) {
        return Err(NotServing(format!(
            "pid {pid} from {} is gone",
            ready.display()
        )));
    }
    Ok(pid)
}

/// The message for a daemon that does not serve: `cause`, then the daemon's
/// last failure (`reason`, from [`Paths::failure`]) or where to look.
pub fn not_serving(cause: &str, reason: Option<&str>) -> String {
    match reason.map(str::trim).filter(|r| !r.is_empty()) {
        Some(r) => format!(
            "{cause}; the daemon's last failure: {}; see journalctl -u agent-sandbox-execd",
            one_line(r)
        ),
        None => format!(
            "{cause}; see systemctl status agent-sandbox-execd and journalctl -u agent-sandbox-execd"
        ),
    }
}

/// Whether `pid` names a live process (kill(pid, 0); EPERM means it exists
/// but is not ours, as for the root daemon).
pub fn alive(pid: i32) -> bool {
    match nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None) {
        Ok(()) => true,
        Err(e) => e == nix::errno::Errno::EPERM,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ready_and_failure_files_reach_the_launcher() {
        let root = std::env::temp_dir().join(format!("asx-ready-{}", std::process::id()));
        let _ = fs::remove_dir_all(&root);
        fs::create_dir_all(&root).unwrap();
        let paths = Paths::under(&root);
        fs::create_dir_all(&paths.run_dir).unwrap();
        // No daemon yet, and one that failed: the launcher quotes its reason.
        leave_reason(
            &paths,
            "enforcement unavailable: the kernel said EPERM\nsecond line",
        );
        let text = fs::read_to_string(paths.failure()).unwrap();
        assert_eq!(text.lines().count(), 1, "one line: {text:?}");
        let e = serving_pid(&paths).unwrap_err().to_string();
        assert!(e.contains("does not exist"), "{e}");
        assert!(e.contains("the kernel said EPERM"), "{e}");
        assert!(e.contains("journalctl -u agent-sandbox-execd"), "{e}");
        // Ready: the launcher finds this process.
        publish(&paths).unwrap();
        let mode = fs::metadata(paths.ready()).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o644);
        assert_eq!(serving_pid(&paths).unwrap(), std::process::id() as i32);
        // A ready file naming a pid that is gone, or garbage.
        fs::write(paths.ready(), "2147483646\n").unwrap();
        let e = serving_pid(&paths).unwrap_err().to_string();
        assert!(e.contains("is gone"), "{e}");
        fs::write(paths.ready(), "not a pid\n").unwrap();
        let e = serving_pid(&paths).unwrap_err().to_string();
        assert!(e.contains("is malformed"), "{e}");
        fs::remove_dir_all(root).unwrap();
    }

    #[test]
    fn refusal_quotes_the_daemons_reason() {
        let m = not_serving("x does not exist", Some("cannot load: EPERM\n"));
        assert_eq!(
            m,
            "x does not exist; the daemon's last failure: cannot load: EPERM; see journalctl -u agent-sandbox-execd"
        );
        assert!(not_serving("x", None).contains("journalctl -u agent-sandbox-execd"));
        assert!(!not_serving("x", Some("  ")).contains("last failure"));
    }
}
