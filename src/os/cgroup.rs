//! The sandbox cgroup tree on the cgroup v2 hierarchy.
//!
//! Layout: `<cgroup2 root>/agent-sandbox-exec/uid-<uid>`, directories owned by
//! root, mode 0755, never delegated: a user can read them but can neither create
//! cgroups below them nor move processes in or out (moving needs write access
//! to `cgroup.procs` of the common ancestor, Documentation/admin-guide/cgroup-v2.rst
//! "Delegation Containment"). The tree sits at the hierarchy's root, never under
//! the daemon's own unit, so stopping the daemon kills no agent.
//!
//! A cgroup's id, as `bpf_get_current_cgroup_id()` returns it, is the kernfs
//! node id, which is the inode number of the cgroup's directory (kernfs
//! `kernfs_ino()`, include/linux/kernfs.h).

use std::fs;
use std::io::{self, Write};
use std::os::unix::ffi::OsStringExt;
use std::os::unix::fs::{DirBuilderExt, MetadataExt};
use std::path::{Path, PathBuf};

use crate::os::procfs;

/// Name of the parent cgroup directly below the cgroup2 root.
pub const PARENT: &str = "agent-sandbox-exec";

/// Errors of cgroup operations, each naming the path it concerns.
#[derive(Debug, thiserror::Error)]
pub enum CgroupError {
    /// No cgroup2 mount in /proc/self/mountinfo.
    #[error("no cgroup2 hierarchy is mounted (looked in /proc/self/mountinfo)")]
    NoCgroup2,
    /// A filesystem operation on the tree failed.
    #[error("{what} {path}: {cause}")]
    Io {
        /// The operation.
        what: &'static str,
        /// The path operated on.
        path: PathBuf,
        /// The underlying error.
        cause: io::Error,
    },
}

fn io_err<'a>(what: &'static str, path: &'a Path) -> impl FnOnce(io::Error) -> CgroupError + 'a {
    move |cause| CgroupError::Io {
        what,
        path: path.to_path_buf(),
        cause,
    }
}

/// Finds the cgroup2 mount point in mountinfo text (pure v2: /sys/fs/cgroup;
/// hybrid: usually /sys/fs/cgroup/unified). Only mounts of the hierarchy's
/// root (mountinfo field 4 is `/`) qualify; the first one wins.
pub fn find_cgroup2(mountinfo: &str) -> Option<PathBuf> {
    procfs::mountinfo(mountinfo.as_bytes())
        .find(|m| m.fs_type == b"cgroup2" && m.root == b"/")
        .map(|m| {
            PathBuf::from(std::ffi::OsString::from_vec(procfs::unescape(
                m.mount_point,
            )))
        })
}

/// The cgroup path, relative to the cgroup2 root, of uid `uid`'s sandbox
/// as /proc/<pid>/cgroup shows it.
pub fn sandbox_path_for(uid: u32) -> String {
    format!("/{PARENT}/uid-{uid}")
}

/// Parses `uid-<n>` directory names.
pub fn parse_uid_dir(name: &str) -> Option<u32> {
    let digits = name.strip_prefix("uid-")?;
    if digits.is_empty() || digits.len() > 10 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    if digits.len() > 1 && digits.starts_with('0') {
        return None;
    }
    digits.parse().ok()
}

/// The sandbox tree below one cgroup2 mount.
#[derive(Debug, Clone)]
pub struct Tree {
    parent: PathBuf,
}

impl Tree {
    /// Finds the cgroup2 mount and creates the parent cgroup (0755) if needed.
    ///
    /// # Errors
    /// [`CgroupError::NoCgroup2`], or the mkdir/read error.
    pub fn open() -> Result<Tree, CgroupError> {
        let info = procfs::read_pseudo_text("/proc/self/mountinfo")
            .map_err(io_err("read", Path::new("/proc/self/mountinfo")))?;
        let root = find_cgroup2(&info).ok_or(CgroupError::NoCgroup2)?;
        Tree::at(&root)
    }

    /// The tree below the cgroup2 root `root` (the mount point, or a
    /// directory standing in for it in tests); creates the parent cgroup
    /// (0755) if needed.
    ///
    /// # Errors
    /// The mkdir error.
    pub fn at(root: &Path) -> Result<Tree, CgroupError> {
        let parent = root.join(PARENT);
        mkdir_0755(&parent)?;
        Ok(Tree { parent })
    }

    /// The parent cgroup's directory (`<cgroup2 root>/agent-sandbox-exec`).
    pub fn parent(&self) -> &Path {
        &self.parent
    }

    /// Removes the parent cgroup if nothing is below it (rmdir(2) fails with
    /// EBUSY while it holds a child cgroup or a process): what a start-up
    /// that failed, or the doctor, made and leaves unused. Returns whether
    /// it was removed.
    pub fn remove_if_unused(&self) -> bool {
        fs::remove_dir(&self.parent).is_ok()
    }

    /// Directory of uid `uid`'s sandbox cgroup.
    pub fn dir_for(&self, uid: u32) -> PathBuf {
        self.parent.join(format!("uid-{uid}"))
    }

    /// Creates uid `uid`'s sandbox cgroup if needed; returns its cgroup id.
    ///
    /// # Errors
    /// The mkdir or stat error.
    pub fn ensure(&self, uid: u32) -> Result<u64, CgroupError> {
        let dir = self.dir_for(uid);
        mkdir_0755(&dir)?;
        cgroup_id(&dir)
    }

    /// Every existing `uid-<n>` sandbox: (uid, cgroup id).
    ///
    /// # Errors
    /// The readdir error of the parent; entries that vanish meanwhile are skipped.
    pub fn list(&self) -> Result<Vec<(u32, u64)>, CgroupError> {
        let mut out = Vec::new();
        for entry in fs::read_dir(&self.parent).map_err(io_err("list", &self.parent))? {
            let entry = entry.map_err(io_err("list", &self.parent))?;
            let Some(uid) = entry.file_name().to_str().and_then(parse_uid_dir) else {
                continue;
            };
            if let Ok(id) = cgroup_id(&entry.path()) {
                out.push((uid, id));
            }
        }
        out.sort_unstable();
        Ok(out)
    }

    /// Removes uid `uid`'s sandbox cgroup if no process is in it (rmdir fails
    /// with EBUSY otherwise). Returns whether it was removed.
    pub fn remove_if_empty(&self, uid: u32) -> bool {
        let dir = self.dir_for(uid);
        let empty = fs::read_to_string(dir.join("cgroup.procs")).is_ok_and(|p| p.trim().is_empty());
        empty && fs::remove_dir(&dir).is_ok()
    }

    /// Moves the whole thread group `pid` into uid `uid`'s sandbox by writing
    /// to its `cgroup.procs`.
    ///
    /// # Errors
    /// The open/write error (ESRCH: no such process).
    pub fn migrate(&self, uid: u32, pid: i32) -> Result<(), CgroupError> {
        write_procs(&self.dir_for(uid).join("cgroup.procs"), pid)
    }
}

fn write_procs(procs: &Path, pid: i32) -> Result<(), CgroupError> {
    let mut f = fs::OpenOptions::new()
        .write(true)
        .open(procs)
        .map_err(io_err("open", procs))?;
    f.write_all(format!("{pid}\n").as_bytes())
        .map_err(io_err("write pid to", procs))
}

fn mkdir_0755(dir: &Path) -> Result<(), CgroupError> {
    match fs::DirBuilder::new().mode(0o755).create(dir) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(io_err("create cgroup", dir)(e)),
    }
}

/// The cgroup id of the cgroup at `dir`: its directory's inode number.
///
/// # Errors
/// The stat error.
pub fn cgroup_id(dir: &Path) -> Result<u64, CgroupError> {
    Ok(fs::metadata(dir).map_err(io_err("stat", dir))?.ino())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_pure_and_hybrid_cgroup2() {
        let pure = "30 22 0:26 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw,nsdelegate\n";
        assert_eq!(find_cgroup2(pure), Some(PathBuf::from("/sys/fs/cgroup")));
        let hybrid = "25 22 0:23 / /sys/fs/cgroup ro - tmpfs tmpfs ro,mode=755\n\
            26 25 0:24 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw\n\
            27 25 0:25 / /sys/fs/cgroup/systemd rw - cgroup cgroup rw,name=systemd\n";
        assert_eq!(
            find_cgroup2(hybrid),
            Some(PathBuf::from("/sys/fs/cgroup/unified"))
        );
        // A bind mount of a sub-cgroup (field 4 not "/") is not the root.
        let sub = "40 22 0:26 /user.slice /mnt/cg rw - cgroup2 cgroup2 rw\n";
        assert_eq!(find_cgroup2(sub), None);
        let escaped = "40 22 0:26 / /mnt/my\\040cg rw - cgroup2 cgroup2 rw\n";
        assert_eq!(find_cgroup2(escaped), Some(PathBuf::from("/mnt/my cg")));
        // Optional fields between field 6 and the separator.
        let opt = "30 22 0:26 / /cg rw shared:4 master:1 - cgroup2 none rw\n";
        assert_eq!(find_cgroup2(opt), Some(PathBuf::from("/cg")));
        assert_eq!(find_cgroup2("no mounts\n"), None);
    }

    #[test]
    fn proc_cgroup_v2_line() {
        let hybrid =
            "12:pids:/user.slice\n1:name=systemd:/user.slice/x\n0::/agent-sandbox-exec/uid-1000\n";
        assert_eq!(
            procfs::v2_path_of(hybrid),
            Some(sandbox_path_for(1000).as_str())
        );
        assert_eq!(sandbox_path_for(1000), "/agent-sandbox-exec/uid-1000");
    }

    #[test]
    fn uid_dir_names() {
        assert_eq!(parse_uid_dir("uid-0"), Some(0));
        assert_eq!(parse_uid_dir("uid-1000"), Some(1000));
        assert_eq!(parse_uid_dir("uid-4294967295"), Some(u32::MAX));
        for bad in [
            "uid-",
            "uid-01",
            "uid-4294967296",
            "uid-1a",
            "cgroup.procs",
            "uid--1",
        ] {
            assert_eq!(parse_uid_dir(bad), None, "{bad}");
        }
    }

    #[test]
    fn a_tree_below_a_given_root() {
        let root = std::env::temp_dir().join(format!("asx-cgroup-{}", std::process::id()));
        let _ = fs::remove_dir_all(&root);
        fs::create_dir_all(&root).unwrap();
        let tree = Tree::at(&root).unwrap();
        assert_eq!(tree.parent(), root.join(PARENT));
        assert_eq!(tree.dir_for(1000), root.join(PARENT).join("uid-1000"));
        // Outside cgroupfs the ids are inode numbers of plain directories.
        let id = tree.ensure(1000).unwrap();
        assert_eq!(tree.list().unwrap(), vec![(1000, id)]);
        assert!(!tree.remove_if_unused(), "the parent holds uid-1000");
        fs::remove_dir(tree.dir_for(1000)).unwrap();
        assert!(tree.remove_if_unused());
        fs::remove_dir_all(root).unwrap();
    }
}
