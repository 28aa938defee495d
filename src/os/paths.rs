//! Where the daemon, the launcher and the doctor keep and find their files.
//! The shipped binary uses [`Paths::system`], built once in each entry point
//! and passed down; nothing reads a path from the environment or a flag.
//! Tests build a [`Paths`] below a temporary directory ([`Paths::under`]).

use std::path::{Path, PathBuf};

/// The file-system locations of one installation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Paths {
    /// The runtime directory (`/run/agent-sandbox-exec`, the unit's
    /// `RuntimeDirectory=`): the request socket, the ready and failure files,
    /// the instance lock.
    pub run_dir: PathBuf,
    /// Root of the pins on bpffs (`/sys/fs/bpf/agent-sandbox-exec`): one
    /// `v<layout>` directory per map layout.
    pub pin_root: PathBuf,
    /// The per-uid records of what a sandbox denied (`/var/lib/agent-sandbox-exec`,
    /// the unit's `StateDirectory=`).
    pub state_dir: PathBuf,
    /// The administrator's base list (`/etc/agent-sandbox-exec/denylist`, a conffile).
    pub base_list: PathBuf,
}

/// The user's list, relative to the home directory.
pub const HOME_LIST: &str = ".config/agent-sandbox-exec/denylist";

/// The shipped catalogue of secret locations, one list per group, for
/// `include` lines (packaging/catalog/ in the source tree).
pub const CATALOG_DIR: &str = "/usr/share/agent-sandbox-exec/catalog";

/// The shipped defaults (a conffile): list lines every user's list starts
/// with unless it says `defaults off` (the package's: an `include` of the
/// catalogue's `recommended`). Read by each user's resolver as root's file.
pub const DEFAULTS_LIST: &str = "/etc/agent-sandbox-exec/defaults";

impl Paths {
    /// The installed locations (packaging/agent-sandbox-execd.service and
    /// debian/ name the same).
    pub fn system() -> Paths {
        Paths {
            run_dir: PathBuf::from("/run/agent-sandbox-exec"),
            pin_root: PathBuf::from("/sys/fs/bpf/agent-sandbox-exec"),
            state_dir: PathBuf::from("/var/lib/agent-sandbox-exec"),
            base_list: PathBuf::from("/etc/agent-sandbox-exec/denylist"),
        }
    }

    /// The same layout below `root` (`root/run`, `root/pins`, `root/state`,
    /// `root/denylist`), for tests.
    #[cfg(test)]
    pub fn under(root: &Path) -> Paths {
        Paths {
            run_dir: root.join("run"),
            pin_root: root.join("pins"),
            state_dir: root.join("state"),
            base_list: root.join("denylist"),
        }
    }

    /// The request socket (AF_UNIX, SOCK_SEQPACKET) in the runtime directory.
    pub fn socket(&self) -> PathBuf {
        self.run_dir.join("socket")
    }

    /// The ready file: the serving daemon's pid and start time.
    pub fn ready(&self) -> PathBuf {
        self.run_dir.join("ready")
    }

    /// The failure file: why the daemon last could not serve, kept after the
    /// unit failed (`RuntimeDirectoryPreserve=yes`) for the launcher to quote.
    pub fn failure(&self) -> PathBuf {
        self.run_dir.join("failure")
    }

    /// The request directory of 0.5.0, removed at start-up.
    pub fn old_req_dir(&self) -> PathBuf {
        self.run_dir.join("req")
    }

    /// The user's list for a home directory.
    pub fn home_list(home: &Path) -> PathBuf {
        home.join(HOME_LIST)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn system_and_test_layouts() {
        let p = Paths::system();
        assert_eq!(p.socket(), Path::new("/run/agent-sandbox-exec/socket"));
        assert_eq!(p.ready(), Path::new("/run/agent-sandbox-exec/ready"));
        assert_eq!(p.failure(), Path::new("/run/agent-sandbox-exec/failure"));
        assert_eq!(p.old_req_dir(), Path::new("/run/agent-sandbox-exec/req"));
        let t = Paths::under(Path::new("/tmp/x"));
        assert_eq!(t.socket(), Path::new("/tmp/x/run/socket"));
        assert_eq!(t.base_list, Path::new("/tmp/x/denylist"));
        assert_eq!(
            Paths::home_list(Path::new("/home/u")),
            Path::new("/home/u/.config/agent-sandbox-exec/denylist")
        );
    }
}
