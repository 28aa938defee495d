//! From a listed path to the keys the LSM hook compares: the file's
//! {s_dev, i_ino, subvolume} and its directory's key plus its name.
//!
//! The hook reads `file->f_inode->i_sb->s_dev` and `->i_ino`, the btrfs
//! subvolume id of the inode, and the same three for the parent directory of
//! the opened dentry together with the dentry's name. Userspace must produce
//! the same numbers:
//! - `s_dev` uses the kernel's internal encoding `MAJOR << 20 | MINOR`
//!   (include/linux/kdev_t.h, MINORBITS = 20), not glibc's `st_dev` encoding.
//!   The two agree only for small numbers, so we never reuse `st_dev` bits.
//! - `statx()` reports, on btrfs, a per-subvolume anonymous device instead of
//!   the superblock's `s_dev`. The mount's major:minor in /proc/self/mountinfo
//!   (found through `STATX_MNT_ID`) is the superblock's `s_dev` on every
//!   filesystem, so that is what we use; the statx device is only a fallback
//!   for kernels before 5.8 that lack `STATX_MNT_ID`.
//! - btrfs numbers inodes per subvolume (and a snapshot repeats its source's
//!   numbers) under one superblock, so the key carries the subvolume (tree)
//!   id: `BTRFS_IOC_INO_LOOKUP` with `treeid = 0` and
//!   `objectid = BTRFS_FIRST_FREE_OBJECTID` returns it without privileges
//!   (fs/btrfs/ioctl.c: btrfs_ioctl_ino_lookup). It is 0 everywhere else.
//! - overlayfs reports the directory inode numbers the hook sees only when
//!   all layers share one filesystem or `xino` is on; otherwise a directory
//!   cannot be watched and only the file's own key applies (with a warning).

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::fs;
use std::io;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use nix::poll::{PollFd, PollFlags, PollTimeout, poll};

use crate::os::fd;
use crate::os::fs_magic;
use crate::os::ioctl::{
    FS_CASEFOLD_FL, XFS_FSOP_GEOM_FLAGS_DIRV2CI, btrfs_subvol, fs_flags, xfs_geometry_flags,
};
use crate::os::sys::{fs_type, open_at, statx_at};
#[cfg(test)]
use crate::resolve::witness::NoWitness;
use crate::resolve::witness::Witness;

#[cfg(test)]
use crate::lists::entries::NameKey;
use crate::lists::entries::{
    FileKey, KIND_DIR_BASE, KIND_DIR_USER, KIND_EXC_BASE, KIND_EXC_USER, KIND_FOLDING_DIR,
    KIND_LISTED_DIR, KIND_OPEN, KIND_PATH, NAME_MAX, kernel_dev,
};

/// Most inode keys one resolution adds for files found below directory
/// entries (see [`KeyContext::resolve_dir`]).
pub const MAX_SCAN_KEYS: usize = 65_536;
/// Most directory entries one resolution reads below directory entries.
pub const MAX_SCAN_ENTRIES: usize = 1_000_000;

/// Mount id → device (major, minor) of the mounted superblock, and the
/// mount points, from /proc/self/mountinfo (Documentation/filesystems/proc.rst,
/// "3.5 mountinfo").
#[derive(Debug, Default, Clone)]
pub struct MountTable {
    by_id: HashMap<u64, (u32, u32)>,
    /// Every mount point (field 5), unescaped ([`crate::os::procfs::unescape`]),
    /// in table order; one path may appear more than once (stacked mounts).
    points: Vec<Vec<u8>>,
}

impl MountTable {
    /// Reads an open /proc/self/mountinfo (of the calling process's mount
    /// namespace) again from its start.
    ///
    /// # Errors
    /// The seek or read error.
    pub fn read_from(file: &mut fs::File) -> io::Result<MountTable> {
        use std::io::Seek;
        file.rewind()?;
        Ok(MountTable::parse(&crate::os::procfs::read_pseudo_from(
            file,
        )?))
    }

    /// Parses mountinfo text; lines that do not parse are ignored.
    pub fn parse(text: &[u8]) -> MountTable {
        let mut by_id = HashMap::new();
        let mut points = Vec::new();
        for m in crate::os::procfs::mountinfo(text) {
            by_id.insert(m.mount_id, (m.major, m.minor));
            points.push(crate::os::procfs::unescape(m.mount_point));
        }
        MountTable { by_id, points }
    }

    /// The mount points, unescaped, in table order (a path may repeat).
    pub fn points(&self) -> impl Iterator<Item = &[u8]> {
        self.points.iter().map(Vec::as_slice)
    }

    /// The (major, minor) of mount `mnt_id`, if known.
    pub fn device(&self, mnt_id: u64) -> Option<(u32, u32)> {
        self.by_id.get(&mnt_id).copied()
    }
}

/// What kind of file a path named, for messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileKind {
    /// A directory.
    Directory,
    /// A symbolic link (only seen when the last component is not followed).
    Symlink,
    /// A character or block device.
    Device,
    /// A FIFO.
    Fifo,
    /// A socket.
    Socket,
    /// Anything else.
    Other,
}

impl fmt::Display for FileKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            FileKind::Directory => "a directory",
            FileKind::Symlink => "a symbolic link",
            FileKind::Device => "a device node",
            FileKind::Fifo => "a FIFO",
            FileKind::Socket => "a socket",
            FileKind::Other => "not a regular file",
        })
    }
}

/// How the last path component is treated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LastComponent {
    /// Follow a symlink in the last component (base-list entries).
    Follow,
    /// Do not follow: a symlink there is [`FileKind::Symlink`] (entries the user controls).
    NoFollow,
}

#[cfg(test)]
/// What one listed path turned into.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Listing {
    /// The key of the file there now, if there is one.
    pub file: Option<FileKey>,
    /// Directory + name pairs to watch: the listed name (and, for a followed
    /// symlink, its target's name too).
    pub names: Vec<NameKey>,
    /// Why a name could not be watched, if so (for a warning).
    pub unwatched: Option<String>,
}

/// Receives what [`KeyContext::resolve`] finds for one listed path, as it
/// finds it (no allocation per path).
pub trait ListingSink {
    /// The key of the file there now ([`KIND_OPEN`]).
    fn file(&mut self, key: FileKey);
    /// A directory and a name in it (1 to [`NAME_MAX`] bytes) to watch.
    fn name(&mut self, dir: FileKey, name: &[u8]);
}

/// What [`KeyContext::resolve_dir`] found below a directory entry.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct DirScan {
    /// Files with more than one link, whose inode keys were sent.
    pub marked: usize,
    /// Files with more than one link left unmarked past [`MAX_SCAN_KEYS`],
    /// or names past [`MAX_SCAN_ENTRIES`] (then at least 1).
    pub unmarked: usize,
    /// Why the scan did not read everything below the entry, if it did not:
    /// a name it could not examine or a directory it could not open (EACCES
    /// after a `chmod 000`, EMFILE, EIO; a name gone meanwhile, ENOENT, is
    /// not counted), or more than [`MAX_SCAN_ENTRIES`] names. Its keys may
    /// then lack files an earlier scan marked, so the launch must not remove
    /// keys ([`crate::policy::rules::keys_mode`]; issue 23). There is no depth
    /// bound: a directory moved deeper below the entry is read all the same.
    pub incomplete: Option<String>,
    /// Why the scan's directories and files could not all be watched
    /// ([`crate::resolve::watch`]), if so: then the resolution is not reused and the
    /// next launch scans again.
    pub unwatched: Option<String>,
}

#[cfg(test)]
impl ListingSink for Listing {
    fn file(&mut self, key: FileKey) {
        self.file = Some(key);
    }
    fn name(&mut self, dir: FileKey, name: &[u8]) {
        self.names.push(NameKey {
            dir,
            name: name.to_vec(),
        });
    }
}

/// Why no key could be made for a path.
#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    /// The directory that would hold the path does not exist (ENOENT or ENOTDIR).
    #[error("its directory does not exist")]
    Missing,
    /// The path names something other than a regular file.
    #[error("is {0}, not a regular file")]
    NotRegular(FileKind),
    /// The path is on a filesystem whose inode numbers the hook cannot rely on.
    #[error(
        "is on {0}, whose inode numbers change when a file drops out of the kernel's cache, \
         so it cannot be denied reliably; move it to another filesystem"
    )]
    Unsupported(&'static str),
    /// Any other failure to examine the path (EACCES, ELOOP, EIO, ...).
    #[error("cannot stat: {0}")]
    Stat(io::Error),
}

/// Filesystems that number inodes with iunique() when an inode enters the
/// cache (fs/fat/inode.c fat_build_inode, fs/exfat/inode.c exfat_build_inode),
/// so the number a key holds may not be the number the hook sees later.
pub fn unstable_inode_numbers(f_type: i64) -> Option<&'static str> {
    match f_type {
        fs_magic::MSDOS => Some("a FAT (vfat/msdos) filesystem"),
        fs_magic::EXFAT => Some("an exFAT filesystem"),
        _ => None,
    }
}

/// A directory already examined in this resolution.
struct Dir {
    fd: OwnedFd,
    key: FileKey,
    mnt_id: u64,
    /// Err(reason) when the hook cannot recognise this directory.
    watchable: Result<(), String>,
    /// Whether its names are compared without regard to case (see
    /// [`case_insensitive`]).
    folding: bool,
}

/// Turns listed paths into [`Listing`]s with the caller's credentials, in the
/// caller's mount namespace. Holds the mount table and a small cache of open
/// directories (lists tend to name several files per directory). A
/// long-lived resolver keeps one across resolutions and calls
/// [`KeyContext::renew`] before each. What it reads it tells a
/// [`Witness`] first.
pub struct KeyContext {
    mounts: MountTable,
    /// /proc/self/mountinfo, kept open to learn of mount changes by poll(2).
    mountinfo: fs::File,
    /// Open directories by path, most recently opened last (lists name
    /// their files directory by directory, so a hit is usually the last one).
    dirs: Vec<(Vec<u8>, Dir)>,
    /// The [`KIND_PATH`] and [`KIND_LISTED_DIR`] keys found in the current
    /// resolution (see [`KeyContext::take_marks`]).
    marks: HashSet<FileKey>,
    /// Paths whose inode is in `marks` already.
    marked_paths: HashSet<Vec<u8>>,
    /// The directory whose [`KIND_LISTED_DIR`] mark was added last: lists
    /// name their files directory by directory, so most names need no
    /// insert into `marks`.
    last_listed: Option<FileKey>,
    /// The canonical directories of the `DIR/` and `!DIR/` lines resolved
    /// since the last [`KeyContext::mark_mounts_below`], with their kinds.
    dir_lines: Vec<(Vec<u8>, u32)>,
}

/// How many directories [`KeyContext`] keeps open at most.
const DIR_CACHE: usize = 64;

/// Symlinks followed in one [`KeyContext::mark_path`] at most, as the
/// kernel's `MAXSYMLINKS` (include/linux/namei.h).
pub(crate) const MAX_SYMLINKS: usize = 40;

impl KeyContext {
    /// Reads the mount table.
    ///
    /// # Errors
    /// The read error of /proc/self/mountinfo.
    pub fn new() -> io::Result<KeyContext> {
        let mut mountinfo = fs::File::open("/proc/self/mountinfo")?;
        Ok(KeyContext {
            mounts: MountTable::read_from(&mut mountinfo)?,
            mountinfo,
            dirs: Vec::new(),
            marks: HashSet::new(),
            marked_paths: HashSet::new(),
            last_listed: None,
            dir_lines: Vec::new(),
        })
    }

    /// The keys of the directories and symlinks on the way to every name
    /// found since the last call ([`KIND_PATH`]), and of the directories
    /// holding those names ([`KIND_LISTED_DIR`], and [`KIND_FOLDING_DIR`]
    /// for a case-insensitive one); forgets them.
    ///
    /// Each is a deny_map entry by which the hook refuses a sandbox the
    /// rmdir, unlink, rename or replacement of that inode: the name watch is
    /// keyed on the directory a listed path leads to at launch, and a
    /// sandbox that could move or replace a directory or symlink on the way
    /// (`mv ~/.config ~/.c; mkdir -p ~/.config/gh`) would make the user's
    /// later writes to the path land where nothing watches.
    ///
    /// Sorted, so that a resolution that finds the same keys sends the same
    /// bytes: the daemon skips the parse and apply of an answer equal to the
    /// last one (a set's iteration order differs between processes).
    pub fn take_marks(&mut self) -> Vec<FileKey> {
        self.marked_paths.clear();
        self.last_listed = None;
        let mut marks: Vec<FileKey> = self.marks.drain().collect();
        marks.sort_unstable();
        marks
    }

    /// Closes the cached directories. Call when a resolution ends: an open
    /// directory, even O_PATH, keeps its mount busy (umount fails with
    /// EBUSY) for as long as a long-lived resolver waits for its next request.
    pub fn forget_dirs(&mut self) {
        self.dirs.clear();
    }

    /// Prepares a new resolution: forgets the cached directories (a name may
    /// now be another directory) and the marks, and re-reads the mount table
    /// if a mount or unmount happened in this mount namespace since it was
    /// read. The kernel reports one as POLLERR|POLLPRI on an open mountinfo
    /// file, once per change of the namespace's event count
    /// (fs/proc_namespace.c, `mounts_poll`; proc(5), /proc/pid/mounts).
    /// Mount ids are reused after an unmount, so a table kept across a
    /// change could map a new mount to an old device.
    ///
    /// Returns whether a mount changed (the table was read again): then
    /// what the previous resolution found may have changed too.
    ///
    /// # Errors
    /// The poll or read error of /proc/self/mountinfo.
    pub fn renew(&mut self) -> io::Result<bool> {
        self.dirs.clear();
        self.take_marks();
        let mut fds = [PollFd::new(self.mountinfo.as_fd(), PollFlags::POLLPRI)];
        poll(&mut fds, PollTimeout::ZERO)?;
        if fds[0]
            .revents()
            .is_none_or(|r| r.intersects(PollFlags::POLLPRI | PollFlags::POLLERR))
        {
            self.mounts = MountTable::read_from(&mut self.mountinfo)?;
            return Ok(true);
        }
        Ok(false)
    }

    /// Resolves one listed path: the directory part is followed through
    /// symlinks; the last component is looked up in that directory without
    /// following (or, with [`LastComponent::Follow`], a symlink there is
    /// followed to its target, whose name is watched as well).
    ///
    /// A missing last component is not an error: the name is watched, so the
    /// file is denied as soon as it appears.
    ///
    /// # Errors
    /// [`KeyError`]: the directory is missing, the path is not a regular file,
    /// or a system call failed.
    #[cfg(test)]
    pub fn listing(&mut self, path: &Path, last: LastComponent) -> Result<Listing, KeyError> {
        let mut listing = Listing::default();
        listing.unwatched = self.resolve(path, last, &mut listing, &mut NoWitness)?;
        Ok(listing)
    }

    /// [`KeyContext::listing`] without collecting: the file key and the names
    /// go to `sink` as they are found; the directories read are told to
    /// `witness` first. Returns why a name could not be watched, if so. On
    /// an error, `sink` may already hold some of the path's findings: the
    /// caller discards them.
    ///
    /// # Errors
    /// As [`KeyContext::listing`].
    pub fn resolve(
        &mut self,
        path: &Path,
        last: LastComponent,
        sink: &mut impl ListingSink,
        witness: &mut impl Witness,
    ) -> Result<Option<String>, KeyError> {
        let bytes = path.as_os_str().as_bytes();
        let (dir_part, name) = match bytes.iter().rposition(|&b| b == b'/') {
            Some(0) => (&b"/"[..], &bytes[1..]),
            Some(i) => (&bytes[..i], &bytes[i + 1..]),
            None => (&b"."[..], bytes),
        };
        if name.is_empty() || name == b"." || name == b".." {
            return Err(KeyError::NotRegular(FileKind::Directory));
        }
        if name.len() > NAME_MAX {
            return Err(KeyError::Stat(io::Error::from_raw_os_error(
                libc::ENAMETOOLONG,
            )));
        }
        let at = self.dir(dir_part, witness)?;
        let dir = &self.dirs[at].1;
        let unwatched = match &dir.watchable {
            Ok(()) => {
                sink.name(dir.key, name);
                if self.last_listed != Some(dir.key) {
                    self.marks.insert(dir.key.with_kind(KIND_LISTED_DIR));
                    if dir.folding {
                        self.marks.insert(dir.key.with_kind(KIND_FOLDING_DIR));
                    }
                    self.last_listed = Some(dir.key);
                }
                dir.folding.then(|| CASE_INSENSITIVE.to_string())
            }
            Err(why) => Some(why.clone()),
        };
        let dir_fd = dir.fd.as_raw_fd();
        let (dir_key, dir_mnt) = (dir.key, dir.mnt_id);
        let stx = match statx_at(dir_fd, name, libc::AT_SYMLINK_NOFOLLOW) {
            Ok(s) => s,
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => return Ok(unwatched),
            Err(e) => return Err(KeyError::Stat(e)),
        };
        let mode = u32::from(stx.stx_mode) & libc::S_IFMT;
        match mode {
            libc::S_IFREG => {
                // A regular file is never a subvolume root, so on the
                // directory's mount it is in the directory's subvolume; a
                // file bind-mounted over the name is asked itself.
                let subvol = if stx.stx_mnt_id == dir_mnt {
                    dir_key.subvol
                } else {
                    let fd = open_at(dir_fd, name, libc::O_PATH | libc::O_NOFOLLOW)
                        .map_err(KeyError::Stat)?;
                    if fs_type(&fd).map_err(KeyError::Stat)? == fs_magic::BTRFS {
                        subvol_of(&fd, libc::O_RDONLY | libc::O_NONBLOCK | libc::O_NOCTTY)
                            .map_err(KeyError::Stat)?
                    } else {
                        0
                    }
                };
                // One mount is one superblock: the directory's s_dev.
                let dev = if stx.stx_mnt_id == dir_mnt && stx.stx_mask & libc::STATX_MNT_ID != 0 {
                    dir_key.dev
                } else {
                    self.device(&stx)
                };
                sink.file(FileKey {
                    dev,
                    ino: stx.stx_ino,
                    subvol,
                    kind: KIND_OPEN,
                });
                Ok(unwatched)
            }
            libc::S_IFLNK if last == LastComponent::Follow => {
                // The directories of the symlinks it goes through, watched
                // before the kernel follows them below.
                witness.before_lookup(bytes);
                // Every symlink on the way from the listed name to the file
                // (a symlinked directory in the link's target, a link to a
                // link) as KIND_PATH: a sandbox cannot swap one of them to
                // point the listed name elsewhere. The marks end where the
                // chain does (a dangling link: at the missing part).
                match self.mark_path(bytes) {
                    Err(e) if e.raw_os_error() != Some(libc::ENOENT) => {
                        return Err(KeyError::Stat(e));
                    }
                    _ => {}
                }
                let fd = match open_at(dir_fd, name, libc::O_PATH) {
                    Ok(fd) => fd,
                    // Dangling: the listed name is watched; the target is not known.
                    Err(e) if e.raw_os_error() == Some(libc::ENOENT) => return Ok(unwatched),
                    Err(e) => return Err(KeyError::Stat(e)),
                };
                let target = std::fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd()))
                    .map_err(KeyError::Stat)?;
                let t = self.resolve(&target, LastComponent::NoFollow, sink, witness)?;
                Ok(unwatched.or(t))
            }
            _ => Err(KeyError::NotRegular(kind_of(mode))),
        }
    }

    /// The key of directory `path`, the scope of a `DIR/NAME` name pattern,
    /// with the way to it marked ([`KIND_PATH`], as for a listed file's
    /// directory) so a sandbox cannot move or replace it.
    ///
    /// # Errors
    /// [`KeyError::Missing`] if there is no directory there, a system
    /// call's, [`KeyError::Unsupported`] on a filesystem without stable
    /// inode numbers.
    pub fn pattern_scope(
        &mut self,
        path: &[u8],
        witness: &mut impl Witness,
    ) -> Result<FileKey, KeyError> {
        let at = self.dir(path, witness)?;
        let dir = &self.dirs[at].1;
        if let Err(why) = &dir.watchable {
            return Err(KeyError::Stat(io::Error::other(why.clone())));
        }
        Ok(dir.key)
    }

    /// Resolves a directory entry or directory exception at `path`: sends
    /// the directory's key with `kind` ([`ListingSink::file`], kind set), its
    /// name in its parent with the parent's key of `kind`
    /// ([`ListingSink::name`]), and marks the way to it ([`KIND_PATH`]) so a
    /// sandbox cannot move it. With `scan_budget` (directory entries, not
    /// exceptions), also sends the inode key ([`KIND_OPEN`]) of every regular
    /// file below with more than one link, up to `scan_budget` keys: a file
    /// with one link has no name outside the directory, which the hook's
    /// walk covers, while one with another link made elsewhere before
    /// launch is reachable by that name too.
    ///
    /// # Errors
    /// [`KeyError::Missing`] if there is no directory there,
    /// [`KeyError::NotRegular`] if it is not a directory, a system call's.
    pub fn resolve_dir(
        &mut self,
        path: &Path,
        kind: u32,
        scan_budget: Option<usize>,
        sink: &mut impl ListingSink,
        witness: &mut impl Witness,
    ) -> Result<DirScan, KeyError> {
        let bytes = path.as_os_str().as_bytes();
        match statx_at(libc::AT_FDCWD, bytes, 0) {
            Ok(stx) if u32::from(stx.stx_mode) & libc::S_IFMT == libc::S_IFDIR => {}
            Ok(stx) => {
                return Err(KeyError::NotRegular(kind_of(
                    u32::from(stx.stx_mode) & libc::S_IFMT,
                )));
            }
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => {
                return self.missing_dir(bytes, kind, sink, witness);
            }
            Err(e) if e.raw_os_error() == Some(libc::ENOTDIR) => return Err(KeyError::Missing),
            Err(e) => return Err(KeyError::Stat(e)),
        }
        let at = self.dir(bytes, witness)?;
        let key = self.dirs[at].1.key;
        sink.file(key.with_kind(kind));
        if let Some(i) = bytes.iter().rposition(|&b| b == b'/') {
            let (parent, name) = (&bytes[..i.max(1)], &bytes[i + 1..]);
            if !name.is_empty() && name.len() <= NAME_MAX {
                let p = self.dir(parent, witness)?;
                if self.dirs[p].1.watchable.is_ok() {
                    sink.name(self.dirs[p].1.key.with_kind(kind), name);
                }
            }
        }
        // For mark_mounts_below: mountinfo names mount points canonically.
        if let Ok(canon) = fs::canonicalize(path) {
            self.dir_lines
                .push((canon.as_os_str().as_bytes().to_vec(), kind));
        }
        let Some(budget) = scan_budget else {
            return Ok(DirScan::default());
        };
        // Every directory the scan reads is told to the witness before it is
        // read, and every file with one link (answer reuse watches them for a
        // new link, crate::resolve::watch), so that the answer can be sent
        // again while no event arrives. When that fails, the answer is not
        // reused: the next launch scans again.
        let fd = open_at(
            libc::AT_FDCWD,
            bytes,
            libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NONBLOCK,
        )
        .map_err(KeyError::Stat)?;
        let mut scan = DirScan::default();
        let mut seen = 0usize;
        let mut todo = vec![(fd, key)];
        witness.scan_begins();
        while let Some((fd, dkey)) = todo.pop() {
            if let Err(e) = witness.before_reading(&fd) {
                witness.distrust();
                scan.unwatched = Some(e.to_string());
            }
            let names = read_names(&fd).map_err(KeyError::Stat)?;
            for name in names {
                seen += 1;
                if seen > MAX_SCAN_ENTRIES {
                    scan.unmarked += 1;
                    scan.incomplete = Some(format!("more than {MAX_SCAN_ENTRIES} names below it"));
                    // The rest is unread and unwatched.
                    if witness.trusting() {
                        witness.distrust();
                        scan.unwatched =
                            Some(format!("more than {MAX_SCAN_ENTRIES} names below it"));
                    }
                    return Ok(scan);
                }
                let stx = match statx_at(fd.as_raw_fd(), &name, libc::AT_SYMLINK_NOFOLLOW) {
                    Ok(stx) => stx,
                    Err(e) => {
                        unwatchable_below(&mut scan, &e, "examine a name", witness);
                        continue;
                    }
                };
                let mode = u32::from(stx.stx_mode);
                let dev = (stx.stx_dev_major, stx.stx_dev_minor);
                let nlink = match witness.scanned_file(&fd, &name, mode, stx.stx_nlink, dev) {
                    Ok(now) => now,
                    // Gone meanwhile: its directory's watch saw that, but
                    // the scan may have missed what took its place.
                    Err(e) if e.raw_os_error() == Some(libc::ENOENT) => {
                        changed_below(&mut scan);
                        continue;
                    }
                    Err(e) => {
                        witness.distrust();
                        scan.unwatched = Some(e.to_string());
                        stx.stx_nlink
                    }
                };
                match mode & libc::S_IFMT {
                    libc::S_IFREG if nlink > 1 => {
                        if scan.marked >= budget {
                            // A file left unmarked may be one an earlier
                            // scan marked (an agent can make decoy links
                            // from inside): the apply must not drop keys.
                            scan.unmarked += 1;
                            if scan.incomplete.is_none() {
                                scan.incomplete = Some(format!(
                                    "more than {budget} files with other names below it"
                                ));
                            }
                            continue;
                        }
                        let same_mount = stx.stx_mask & libc::STATX_MNT_ID != 0
                            && stx.stx_mnt_id == self.dirs[at].1.mnt_id;
                        let dev = if same_mount {
                            dkey.dev
                        } else {
                            self.device(&stx)
                        };
                        sink.file(FileKey {
                            dev,
                            ino: stx.stx_ino,
                            subvol: dkey.subvol,
                            kind: KIND_OPEN,
                        });
                        scan.marked += 1;
                    }
                    libc::S_IFDIR => {
                        let sub = match open_at(
                            fd.as_raw_fd(),
                            &name,
                            libc::O_RDONLY
                                | libc::O_DIRECTORY
                                | libc::O_NOFOLLOW
                                | libc::O_NONBLOCK,
                        ) {
                            Ok(sub) => sub,
                            Err(e) => {
                                unwatchable_below(&mut scan, &e, "open a directory", witness);
                                continue;
                            }
                        };
                        let ft = fs_type(&sub).map_err(KeyError::Stat)?;
                        let subvol = if ft == fs_magic::BTRFS {
                            subvol_of(&sub, libc::O_RDONLY | libc::O_DIRECTORY)
                                .map_err(KeyError::Stat)?
                        } else {
                            0
                        };
                        let skey = FileKey {
                            dev: self.device(&stx),
                            ino: stx.stx_ino,
                            subvol,
                            kind: KIND_OPEN,
                        };
                        todo.push((sub, skey));
                    }
                    _ => {}
                }
            }
        }
        // A name moved while its directory was read may be in neither
        // listing (an agent renaming a subdirectory back and forth from
        // inside, issue 23): a change the watches saw makes the scan
        // incomplete. Without watches (no inotify, past the watch cap) this
        // cannot be seen (docs/BYPASS_CATALOG.md).
        if witness.scan_changed() && scan.incomplete.is_none() {
            scan.incomplete = Some("a directory below it changed while it was read".to_owned());
        }
        Ok(scan)
    }

    /// Marks, for every `DIR/` line resolved since the last call, the root
    /// inode of each filesystem mounted at or below its directory (in this
    /// process's mount namespace) with the line's kind, unless an `!DIR/`
    /// of the same list is nearer ([`mounts_to_mark`]); forgets the lines.
    ///
    /// The hook's walk climbs a filesystem's dentries to its superblock root
    /// and only then follows the opened path's mount to its mount point, so
    /// a clone of such a mount made elsewhere (`unshare -Urm; mount --bind
    /// ~/.ssh/keys /tmp/x`, or open_tree(OPEN_TREE_CLONE) + move_mount)
    /// never passes the entry; the mark on the mounted root is passed by
    /// every path into that tree. For a bind mount of a subdirectory
    /// (`/srv/keys` at `~/.ssh/keys`) that root is `/srv/keys`, which is
    /// then denied by its own path too. The key is the one [`KeyContext`]
    /// gives any directory (the mount's device from the mount table, the
    /// btrfs subvolume); statx of the mount point reaches the top mount
    /// there, the only one a path (or a clone of one) can reach.
    ///
    /// Returns the mount points that could not be examined, with why (a
    /// mount point the caller cannot reach, EACCES; a FAT filesystem), for
    /// warnings; each is `(kind, point, reason)`. A mount point gone since
    /// the table was read is skipped (the mount change makes the next
    /// request resolve again, [`KeyContext::renew`]).
    ///
    /// # Errors
    /// The read error of /proc/self/mountinfo.
    pub fn mark_mounts_below(
        &mut self,
        sink: &mut impl ListingSink,
        witness: &mut impl Witness,
    ) -> io::Result<Vec<(u32, Vec<u8>, String)>> {
        let lines = std::mem::take(&mut self.dir_lines);
        if lines.is_empty() {
            return Ok(Vec::new());
        }
        self.mounts = MountTable::read_from(&mut self.mountinfo)?;
        let todo = mounts_to_mark(self.mounts.points(), &lines);
        let mut problems = Vec::new();
        for (point, kind) in todo {
            match self.dir(&point, witness) {
                Ok(at) => sink.file(self.dirs[at].1.key.with_kind(kind)),
                Err(KeyError::Missing) => {}
                Err(e) => problems.push((kind, point, e.to_string())),
            }
        }
        Ok(problems)
    }

    /// A directory entry whose directory does not exist (ENOENT): if its
    /// parent exists and can be watched, sends the entry's name in that
    /// parent with `kind`, so that a directory made there later (a package
    /// installed after the launch: `/var/lib/AccountsService/`) is covered
    /// by the hook's walk, which looks up every level's `{parent, name}`,
    /// from the moment it appears; the parent is watched, so the next launch
    /// resolves the entry in full. A missing parent, or one that cannot be
    /// watched, is [`KeyError::Missing`] (skipped with a warning).
    fn missing_dir(
        &mut self,
        path: &[u8],
        kind: u32,
        sink: &mut impl ListingSink,
        witness: &mut impl Witness,
    ) -> Result<DirScan, KeyError> {
        let Some(i) = path.iter().rposition(|&b| b == b'/') else {
            return Err(KeyError::Missing);
        };
        let (parent, name) = (&path[..i.max(1)], &path[i + 1..]);
        if name.is_empty() || name == b"." || name == b".." || name.len() > NAME_MAX {
            return Err(KeyError::Missing);
        }
        let p = self.dir(parent, witness)?;
        let dir = &self.dirs[p].1;
        if dir.watchable.is_err() {
            return Err(KeyError::Missing);
        }
        // The parent was read after the witness was told (Self::dir): a
        // directory made at the name since then raises an event there.
        match statx_at(dir.fd.as_raw_fd(), name, libc::AT_SYMLINK_NOFOLLOW) {
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => {}
            // Made meanwhile, or something else there now: the caller's
            // error, as if it had seen it first.
            Ok(_) => return Err(KeyError::Missing),
            Err(e) => return Err(KeyError::Stat(e)),
        }
        sink.name(dir.key.with_kind(kind), name);
        Ok(DirScan::default())
    }

    /// Opens and examines directory `path` (cached), told to `witness`
    /// first; returns its index in `self.dirs`.
    fn dir(&mut self, path: &[u8], witness: &mut impl Witness) -> Result<usize, KeyError> {
        if let Some(at) = self.dirs.iter().rposition(|(p, _)| p == path) {
            return Ok(at);
        }
        if self.dirs.len() >= DIR_CACHE {
            self.dirs.remove(0);
        }
        // Watched before the lookup below reads them (see crate::resolve::watch).
        let walked = witness.before_lookup(path);
        let fd =
            open_at(libc::AT_FDCWD, path, libc::O_PATH | libc::O_DIRECTORY).map_err(|e| match e
                .raw_os_error()
            {
                Some(libc::ENOENT) | Some(libc::ENOTDIR) => KeyError::Missing,
                _ => KeyError::Stat(e),
            })?;
        let stx = statx_at(fd.as_raw_fd(), b"", libc::AT_EMPTY_PATH).map_err(KeyError::Stat)?;
        if walked != Some((stx.stx_ino, stx.stx_dev_major, stx.stx_dev_minor)) {
            // The walk and this lookup disagree: trust neither to be watched.
            witness.distrust();
        }
        let fs_type = fs_type(&fd).map_err(KeyError::Stat)?;
        if let Some(name) = unstable_inode_numbers(fs_type) {
            return Err(KeyError::Unsupported(name));
        }
        self.mark_path(path).map_err(KeyError::Stat)?;
        let dev = self.device(&stx);
        let subvol = if fs_type == fs_magic::BTRFS {
            subvol_of(&fd, libc::O_RDONLY | libc::O_DIRECTORY).map_err(KeyError::Stat)?
        } else {
            0
        };
        let watchable = if fs_type == fs_magic::OVERLAYFS
            && kernel_dev(stx.stx_dev_major, stx.stx_dev_minor) != dev
        {
            Err(
                "its directory is on an overlayfs whose layers are on different filesystems \
                 without xino, where directory inode numbers are not stable: a file that \
                 replaces the listed one is not denied until the next launch"
                    .to_string(),
            )
        } else {
            Ok(())
        };
        let folding = case_insensitive(&fd, fs_type);
        self.dirs.push((
            path.to_vec(),
            Dir {
                folding,
                fd,
                key: FileKey {
                    dev,
                    ino: stx.stx_ino,
                    subvol,
                    kind: KIND_OPEN,
                },
                mnt_id: stx.stx_mnt_id,
                watchable,
            },
        ));
        Ok(self.dirs.len() - 1)
    }

    /// Adds to the marks, as [`KIND_PATH`], the key of every directory and
    /// symlink the kernel's lookup of directory `path` passes through: each
    /// leading part of `path` (`/`, `/home`, `/home/me`, ...) as it is now,
    /// a symlink as itself, and for a symlink also the leading parts of its
    /// target, up to [`MAX_SYMLINKS`] symlinks (path_resolution(7)). Parts
    /// seen before in this resolution are not looked at again.
    ///
    /// # Errors
    /// The open, statx, readlink or btrfs ioctl error of a part; `ELOOP`
    /// past [`MAX_SYMLINKS`].
    fn mark_path(&mut self, path: &[u8]) -> io::Result<()> {
        let mut todo = vec![path.to_vec()];
        let mut links = 0;
        while let Some(path) = todo.pop() {
            let mut part = Vec::with_capacity(path.len());
            let mut names = path.split(|&b| b == b'/').filter(|c| !c.is_empty());
            let mut next = if path.first() == Some(&b'/') {
                part.push(b'/');
                Some(&b""[..])
            } else {
                names.next()
            };
            while let Some(name) = next {
                if !name.is_empty() {
                    if !part.is_empty() && part.last() != Some(&b'/') {
                        part.push(b'/');
                    }
                    part.extend_from_slice(name);
                }
                next = names.next();
                if self.marked_paths.contains(&part) {
                    continue;
                }
                let fd = open_at(libc::AT_FDCWD, &part, libc::O_PATH | libc::O_NOFOLLOW)?;
                let stx = statx_at(
                    fd.as_raw_fd(),
                    b"",
                    libc::AT_EMPTY_PATH | libc::AT_SYMLINK_NOFOLLOW,
                )?;
                let dev = self.device(&stx);
                let mode = u32::from(stx.stx_mode) & libc::S_IFMT;
                let subvol = match mode {
                    libc::S_IFDIR if fs_type(&fd)? == fs_magic::BTRFS => {
                        subvol_of(&fd, libc::O_RDONLY | libc::O_DIRECTORY)?
                    }
                    // A symlink is never a subvolume root: its directory's.
                    libc::S_IFLNK if fs_type(&fd)? == fs_magic::BTRFS => {
                        let at = part.iter().rposition(|&b| b == b'/').unwrap_or(0);
                        let parent = if at == 0 { &b"/"[..] } else { &part[..at] };
                        let dir =
                            open_at(libc::AT_FDCWD, parent, libc::O_PATH | libc::O_DIRECTORY)?;
                        subvol_of(&dir, libc::O_RDONLY | libc::O_DIRECTORY)?
                    }
                    _ => 0,
                };
                self.marks.insert(FileKey {
                    dev,
                    ino: stx.stx_ino,
                    subvol,
                    kind: KIND_PATH,
                });
                self.marked_paths.insert(part.clone());
                if mode == libc::S_IFLNK {
                    links += 1;
                    if links > MAX_SYMLINKS {
                        return Err(io::Error::from_raw_os_error(libc::ELOOP));
                    }
                    let target = nix::fcntl::readlinkat(&fd, "")?;
                    let target = target.as_bytes();
                    if target.first() == Some(&b'/') {
                        todo.push(target.to_vec());
                    } else {
                        let at = part.iter().rposition(|&b| b == b'/').unwrap_or(0);
                        let mut t = part[..at.max(1)].to_vec();
                        t.push(b'/');
                        t.extend_from_slice(target);
                        todo.push(t);
                    }
                } else if mode != libc::S_IFDIR {
                    break; // the kernel's lookup fails here too
                }
            }
        }
        Ok(())
    }

    /// The superblock's s_dev for a statx result (see the module docs).
    fn device(&mut self, stx: &libc::statx) -> u32 {
        if stx.stx_mask & libc::STATX_MNT_ID != 0 {
            device_of_mount(stx.stx_mnt_id, &mut self.mounts, &mut self.mountinfo)
                .unwrap_or_else(|| kernel_dev(stx.stx_dev_major, stx.stx_dev_minor))
        } else {
            kernel_dev(stx.stx_dev_major, stx.stx_dev_minor)
        }
    }
}

/// A name below a directory entry that the scan cannot examine or read
/// (EACCES, say; `what` the scan tried, for the message): skipped, as
/// are its contents, and the scan is incomplete ([`DirScan::incomplete`]).
/// A permission change that would let a later scan read it raises no
/// event on the watched directory holding it, so `witness` distrusts the
/// resolution. A name gone meanwhile (ENOENT) raised an event there already
/// ([`changed_below`]).
fn unwatchable_below(scan: &mut DirScan, e: &io::Error, what: &str, witness: &mut impl Witness) {
    if e.raw_os_error() == Some(libc::ENOENT) {
        return changed_below(scan);
    }
    if scan.incomplete.is_none() {
        scan.incomplete = Some(format!("cannot {what} below it: {e}"));
    }
    if witness.trusting() {
        witness.distrust();
        scan.unwatched = Some(format!("a name below it cannot be examined: {e}"));
    }
}

/// A name the scan listed went away before it was examined: the directory
/// changed while it was read, and a directory read during a rename may
/// return neither the old name nor the new one (an agent renaming a
/// subdirectory back and forth from inside would hide it from the scan).
/// The scan is incomplete, so the apply removes no key.
fn changed_below(scan: &mut DirScan) {
    if scan.incomplete.is_none() {
        scan.incomplete = Some("a name below it went away while it was read".to_owned());
    }
}

/// The names in the open directory `fd` (without `.` and `..`).
fn read_names(fd: &OwnedFd) -> io::Result<Vec<Vec<u8>>> {
    let mut names = Vec::new();
    for e in fs::read_dir(format!("/proc/self/fd/{}", fd.as_raw_fd()))? {
        names.push(e?.file_name().as_bytes().to_vec());
    }
    Ok(names)
}

/// Why a `socket` list line names no socket that can be allowed.
#[derive(Debug, thiserror::Error)]
pub enum SocketKeyError {
    /// The path cannot be examined (ENOENT, EACCES, ...).
    #[error("cannot stat: {0}")]
    Stat(io::Error),
    /// The path is there but is not a Unix socket.
    #[error("is {0}, not a Unix socket")]
    NotSocket(FileKind),
}

/// The key the socket hooks read from a bound Unix socket's inode
/// (`unix_sk(other)->path.dentry->d_inode` in lsm/unix_stream_connect and
/// lsm/unix_may_send), for the socket file at `path` (symlinks followed),
/// with the caller's credentials; kind 0. With it comes the `O_PATH`
/// descriptor it was read from: while that is open the inode cannot be
/// freed, so its number cannot pass to another socket (lsm/
/// inode_free_security drops the allow of a freed socket inode; a key read
/// from an inode that was freed before the daemon stored it would have
/// nothing left to drop it). Keep it until the daemon has answered.
///
/// # Errors
/// [`SocketKeyError`].
pub fn socket_key(path: &[u8]) -> Result<(FileKey, OwnedFd), SocketKeyError> {
    let fd = open_at(libc::AT_FDCWD, path, libc::O_PATH).map_err(SocketKeyError::Stat)?;
    let stx = statx_at(fd.as_raw_fd(), b"", libc::AT_EMPTY_PATH).map_err(SocketKeyError::Stat)?;
    let mode = u32::from(stx.stx_mode);
    if mode & libc::S_IFMT != libc::S_IFSOCK {
        return Err(SocketKeyError::NotSocket(kind_of(mode)));
    }
    let mut mountinfo = fs::File::open("/proc/self/mountinfo").map_err(SocketKeyError::Stat)?;
    let mut mounts = MountTable::read_from(&mut mountinfo).map_err(SocketKeyError::Stat)?;
    let dev = device_of_statx(&stx, &mut mounts, &mut mountinfo);
    let subvol = if fs_type(&fd).map_err(SocketKeyError::Stat)? == fs_magic::BTRFS {
        // A socket cannot be opened for the ioctl; its directory is in the
        // same subvolume.
        let proc_path = format!("/proc/self/fd/{}", fd.as_raw_fd());
        let real = fs::read_link(&proc_path).map_err(SocketKeyError::Stat)?;
        let parent = real.parent().unwrap_or(Path::new("/"));
        let dir = open_at(
            libc::AT_FDCWD,
            parent.as_os_str().as_bytes(),
            libc::O_PATH | libc::O_DIRECTORY,
        )
        .map_err(SocketKeyError::Stat)?;
        subvol_of(&dir, libc::O_RDONLY | libc::O_DIRECTORY).map_err(SocketKeyError::Stat)?
    } else {
        0
    };
    let key = FileKey {
        dev,
        ino: stx.stx_ino,
        subvol,
        kind: KIND_OPEN,
    };
    Ok((key, fd))
}

/// The superblock's s_dev for statx result `stx`: through its mount
/// (`stx_mnt_id`, looked up in `mounts`, re-read from `mountinfo` once if
/// the mount is newer), else the statx device (see the module docs).
fn device_of_statx(stx: &libc::statx, mounts: &mut MountTable, mountinfo: &mut fs::File) -> u32 {
    if stx.stx_mask & libc::STATX_MNT_ID != 0 {
        device_of_mount(stx.stx_mnt_id, mounts, mountinfo)
            .unwrap_or_else(|| kernel_dev(stx.stx_dev_major, stx.stx_dev_minor))
    } else {
        kernel_dev(stx.stx_dev_major, stx.stx_dev_minor)
    }
}

/// The keys (kind 0) of this process's open descriptors `fds` that are
/// regular files or directories, as the hooks read them from the open
/// file's inode: statx of the descriptor itself, its device through its
/// mount as for listed paths, and on btrfs the subvolume from
/// `BTRFS_IOC_INO_LOOKUP` on the descriptor (which needs no privilege and
/// no access to the file: btrfs_ioctl_ino_lookup() in fs/btrfs/ioctl.c).
/// Nothing is opened, so a file its owner has made unreadable since the
/// descriptor was opened has its key all the same. Left out: numbers not
/// open (EBADF), other file types, and `O_PATH` descriptors, which read
/// and write nothing (whatever reopens one is an open(2) that lsm/file_open
/// judges).
///
/// # Errors
/// The statx, fstatfs, fcntl or ioctl error of a descriptor that is open,
/// or the error reading /proc/self/mountinfo.
pub fn descriptor_keys(
    fds: &[std::os::fd::RawFd],
) -> io::Result<Vec<(std::os::fd::RawFd, FileKey)>> {
    let mut out = Vec::new();
    let mut mountinfo = fs::File::open("/proc/self/mountinfo")?;
    let mut mounts = MountTable::read_from(&mut mountinfo)?;
    for &n in fds {
        let flags = match fd::status_flags(n) {
            Ok(flags) => flags,
            Err(e) if e.raw_os_error() == Some(libc::EBADF) => continue,
            Err(e) => return Err(e),
        };
        if flags & libc::O_PATH != 0 {
            continue;
        }
        let stx = statx_at(n, b"", libc::AT_EMPTY_PATH)?;
        let kind = u32::from(stx.stx_mode) & libc::S_IFMT;
        if kind != libc::S_IFREG && kind != libc::S_IFDIR {
            continue;
        }
        // A duplicate, closed when dropped: n is not ours to keep.
        let fd = fd::dup(n)?;
        let subvol = if fs_type(&fd)? == fs_magic::BTRFS {
            btrfs_subvol(fd.as_fd())?
        } else {
            0
        };
        let key = FileKey {
            dev: device_of_statx(&stx, &mut mounts, &mut mountinfo),
            ino: stx.stx_ino,
            subvol,
            kind: KIND_OPEN,
        };
        out.push((n, key));
    }
    Ok(out)
}

/// The warning for a listed name in a case-insensitive directory.
pub const CASE_INSENSITIVE: &str = "its directory is case-insensitive: one name has many spellings \
     there and the hook compares bytes, so a sandbox may open, create, link or rename no file \
     in that directory (the name is watched by refusal, not by match)";

/// Whether directory `fd` (on a filesystem of statfs type `f_type`) looks
/// names up without regard to case: an ext4 or F2FS directory with
/// `FS_CASEFOLD_FL` (`chattr +F`), or any directory of an XFS made with
/// `mkfs.xfs -n version=ci`: for the launch's warning, and for XFS, where
/// the hook cannot see it by itself, a [`KIND_FOLDING_DIR`] entry. False
/// when it cannot be told (a directory the resolver may not open for
/// reading; the hook still sees ext4 and F2FS casefold by itself).
fn case_insensitive(fd: &OwnedFd, f_type: i64) -> bool {
    if ![fs_magic::EXT4, fs_magic::F2FS, fs_magic::XFS].contains(&f_type) {
        return false;
    }
    let proc_path = format!("/proc/self/fd/{}", fd.as_raw_fd());
    let Ok(dir) = open_at(
        libc::AT_FDCWD,
        proc_path.as_bytes(),
        libc::O_RDONLY | libc::O_DIRECTORY,
    ) else {
        return false;
    };
    if f_type == fs_magic::XFS {
        return xfs_geometry_flags(dir.as_fd())
            .is_ok_and(|flags| flags & XFS_FSOP_GEOM_FLAGS_DIRV2CI != 0);
    }
    fs_flags(dir.as_fd()).is_ok_and(|flags| flags & FS_CASEFOLD_FL != 0)
}

/// The btrfs subvolume holding the inode behind the O_PATH descriptor `fd`,
/// reopened with `flags` (the ioctl needs a real open file).
fn subvol_of(fd: &OwnedFd, flags: i32) -> io::Result<u64> {
    let proc_path = format!("/proc/self/fd/{}", fd.as_raw_fd());
    let file = open_at(libc::AT_FDCWD, proc_path.as_bytes(), flags)?;
    btrfs_subvol(file.as_fd())
}

/// Looks `mnt_id` up, re-reading the table once (from the open `mountinfo`)
/// if the mount is newer than it.
fn device_of_mount(mnt_id: u64, mounts: &mut MountTable, mountinfo: &mut fs::File) -> Option<u32> {
    if mounts.device(mnt_id).is_none()
        && let Ok(fresh) = MountTable::read_from(mountinfo)
    {
        *mounts = fresh;
    }
    mounts.device(mnt_id).map(|(ma, mi)| kernel_dev(ma, mi))
}

/// Whether absolute `path` is `dir` or lies below it, comparing whole path
/// components: `/home/u/.sshX` is not below `/home/u/.ssh`. Both are
/// canonical (no `.`, `..`, `//` or trailing `/`, except `/` itself).
pub fn at_or_below(path: &[u8], dir: &[u8]) -> bool {
    if dir == b"/" {
        return path.first() == Some(&b'/');
    }
    path.strip_prefix(dir)
        .is_some_and(|rest| rest.is_empty() || rest.first() == Some(&b'/'))
}

/// The list kinds of a directory entry and of an exception of the same list.
const LIST_KINDS: [(u32, u32); 2] = [
    (KIND_DIR_BASE, KIND_EXC_BASE),
    (KIND_DIR_USER, KIND_EXC_USER),
];

/// Which mount points get a directory-entry mark on the root inode of the
/// mount there, and of which kind ([`KIND_DIR_BASE`], [`KIND_DIR_USER`]).
///
/// `points` are mount points (unescaped mountinfo field 5, any order,
/// repeats allowed); `lines` are the canonical directories of one
/// resolution's `DIR/` lines (kind `KIND_DIR_*`) and `!DIR/` lines (kind
/// `KIND_EXC_*`). Per list, the nearest line at or above a mount point
/// decides, as the hook's walk does (src/lists/denylist.rs: decide(); at one
/// level a directory entry before an exception of the same directory): a
/// directory entry marks the mount's root, an exception leaves it unmarked
/// (its files stay allowed by any path). A mount point that is itself a
/// line's directory is left out: that line's key is the mount's root
/// already. Sorted by point, then kind; no repeats.
pub fn mounts_to_mark<'p>(
    points: impl IntoIterator<Item = &'p [u8]>,
    lines: &[(Vec<u8>, u32)],
) -> Vec<(Vec<u8>, u32)> {
    let mut out = Vec::new();
    for point in points {
        for (dir_kind, exc_kind) in LIST_KINDS {
            let nearest = lines
                .iter()
                .filter(|(d, k)| (*k == dir_kind || *k == exc_kind) && at_or_below(point, d))
                .max_by_key(|(d, k)| (d.len(), *k == dir_kind));
            if let Some((d, k)) = nearest
                && *k == dir_kind
                && d.as_slice() != point
            {
                out.push((point.to_vec(), dir_kind));
            }
        }
    }
    out.sort_unstable();
    out.dedup();
    out
}

fn kind_of(mode: u32) -> FileKind {
    match mode {
        libc::S_IFDIR => FileKind::Directory,
        libc::S_IFLNK => FileKind::Symlink,
        libc::S_IFCHR | libc::S_IFBLK => FileKind::Device,
        libc::S_IFIFO => FileKind::Fifo,
        libc::S_IFSOCK => FileKind::Socket,
        _ => FileKind::Other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::{MetadataExt, symlink};

    #[test]
    fn mountinfo_parsing() {
        let text = b"22 1 254:1 / / rw,relatime shared:1 - ext4 /dev/vda1 rw\n\
            35 22 0:31 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n\
            garbage line\n\
            99 22 7:300 /sub /mnt/x\\040y rw - btrfs /dev/loop300 rw\n";
        let t = MountTable::parse(text);
        assert_eq!(t.device(22), Some((254, 1)));
        assert_eq!(t.device(35), Some((0, 31)));
        assert_eq!(t.device(99), Some((7, 300)));
        assert_eq!(t.device(1), None);
    }

    #[test]
    fn mounts_below_a_directory_entry() {
        // Field 5 as the kernel escapes it (fs/proc_namespace.c: mangle()).
        let text = b"22 1 254:1 / / rw - ext4 /dev/vda1 rw\n\
            30 22 0:40 / /home/u/.ssh/keys rw - tmpfs tmpfs rw\n\
            31 22 254:1 /srv/keys /home/u/.ssh/my\\040keys rw - ext4 /dev/vda1 rw\n\
            32 30 0:41 / /home/u/.ssh/keys/deeper rw - tmpfs tmpfs rw\n\
            33 22 0:42 / /home/u/.sshX rw - tmpfs tmpfs rw\n\
            34 22 0:43 / /home/u/.ssh rw - tmpfs tmpfs rw\n\
            35 22 0:44 / /home/u/.ssh/pub/m rw - tmpfs tmpfs rw\n\
            36 22 0:45 / /home/u/.ssh/pub/priv/m rw - tmpfs tmpfs rw\n\
            37 22 0:46 / /home/u/.ssh/keys rw - tmpfs tmpfs rw\n\
            38 22 0:47 / /home/u/.s rw - tmpfs tmpfs rw\n";
        let t = MountTable::parse(text);
        let ssh = b"/home/u/.ssh".to_vec();
        let lines = vec![
            (ssh.clone(), KIND_DIR_USER),
            (b"/home/u/.ssh/pub".to_vec(), KIND_EXC_USER),
            (b"/home/u/.ssh/pub/priv".to_vec(), KIND_DIR_USER),
        ];
        let got = mounts_to_mark(t.points(), &lines);
        let want: Vec<(Vec<u8>, u32)> = [
            &b"/home/u/.ssh/keys"[..],
            b"/home/u/.ssh/keys/deeper",
            b"/home/u/.ssh/my keys",
            b"/home/u/.ssh/pub/priv/m",
        ]
        .iter()
        .map(|p| (p.to_vec(), KIND_DIR_USER))
        .collect();
        // Not: /home/u/.sshX and /home/u/.s (other names), /home/u/.ssh
        // itself (the entry's own key), /home/u/.ssh/pub/m (an exception is
        // nearer); the stacked /home/u/.ssh/keys once.
        assert_eq!(got, want);

        // The other list's exception does not re-allow; each list decides
        // for its own kind.
        let lines = vec![
            (ssh.clone(), KIND_DIR_BASE),
            (ssh.clone(), KIND_DIR_USER),
            (b"/home/u/.ssh/keys".to_vec(), KIND_EXC_USER),
        ];
        let got = mounts_to_mark([&b"/home/u/.ssh/keys/deeper"[..]], &lines);
        assert_eq!(
            got,
            vec![(b"/home/u/.ssh/keys/deeper".to_vec(), KIND_DIR_BASE)]
        );

        // A directory entry and an exception on one directory: the entry
        // wins, as in the hook (it checks the entry's kind first).
        let lines = vec![(ssh.clone(), KIND_EXC_USER), (ssh.clone(), KIND_DIR_USER)];
        let got = mounts_to_mark([&b"/home/u/.ssh/k"[..]], &lines);
        assert_eq!(got, vec![(b"/home/u/.ssh/k".to_vec(), KIND_DIR_USER)]);

        // Exceptions alone mark nothing.
        assert!(mounts_to_mark(t.points(), &[(ssh, KIND_EXC_BASE)]).is_empty());
    }

    #[test]
    fn paths_below_by_whole_components() {
        assert!(at_or_below(b"/a/b", b"/a/b"));
        assert!(at_or_below(b"/a/b/c", b"/a/b"));
        assert!(!at_or_below(b"/a/bc", b"/a/b"));
        assert!(!at_or_below(b"/a", b"/a/b"));
        assert!(at_or_below(b"/x", b"/"));
        assert!(at_or_below(b"/", b"/"));
    }

    #[test]
    fn fat_and_exfat_are_refused() {
        // statfs f_type values from include/uapi/linux/magic.h.
        assert!(unstable_inode_numbers(0x4d44).is_some());
        assert!(unstable_inode_numbers(0x2011_bab0).is_some());
        assert_eq!(unstable_inode_numbers(fs_magic::EXT4), None, "ext4");
        assert_eq!(unstable_inode_numbers(0x0102_1994), None, "tmpfs");
        assert_eq!(unstable_inode_numbers(fs_magic::BTRFS), None);
        let e = KeyError::Unsupported("an exFAT filesystem").to_string();
        assert!(
            e.contains("exFAT") && e.contains("cannot be denied reliably"),
            "{e}"
        );
    }

    #[test]
    fn missing_directory_entry_is_watched_by_name() {
        let root = std::env::temp_dir().join(format!("asx-missing-dir-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(&root).unwrap();
        let probe = OwnedFd::from(std::fs::File::open(&root).unwrap());
        if !crate::resolve::watch::LOCAL_FILESYSTEMS.contains(&fs_type(&probe).unwrap()) {
            eprintln!("skipped: the temporary directory is not on a local filesystem here");
            std::fs::remove_dir_all(&root).unwrap();
            return;
        }
        let root_key = {
            let stx = statx_at(probe.as_raw_fd(), b"", libc::AT_EMPTY_PATH).unwrap();
            stx.stx_ino
        };
        let mut k = KeyContext::new().unwrap();
        // Missing, in an existing directory: no key of its own, its name in
        // the parent with the entry's kind (the walk checks every level's name).
        let mut l = Listing::default();
        let scan = k
            .resolve_dir(
                &root.join("later"),
                KIND_DIR_BASE,
                Some(100),
                &mut l,
                &mut NoWitness,
            )
            .unwrap();
        assert_eq!(scan, DirScan::default());
        assert_eq!(l.file, None);
        assert_eq!(l.names.len(), 1);
        assert_eq!(l.names[0].name, b"later");
        assert_eq!(l.names[0].dir.ino, root_key);
        assert_eq!(l.names[0].dir.kind, KIND_DIR_BASE);
        // Its parent missing too: skipped, as before.
        let mut l = Listing::default();
        assert!(matches!(
            k.resolve_dir(
                &root.join("no/later"),
                KIND_DIR_BASE,
                Some(100),
                &mut l,
                &mut NoWitness
            ),
            Err(KeyError::Missing)
        ));
        // A file on the way: not a directory there, skipped.
        std::fs::write(root.join("f"), b"").unwrap();
        let mut l = Listing::default();
        assert!(matches!(
            k.resolve_dir(
                &root.join("f/later"),
                KIND_DIR_BASE,
                Some(100),
                &mut l,
                &mut NoWitness
            ),
            Err(KeyError::Missing)
        ));
        // Made: resolved in full (its own key and its name).
        k.renew().unwrap();
        std::fs::create_dir(root.join("later")).unwrap();
        let mut l = Listing::default();
        k.resolve_dir(
            &root.join("later"),
            KIND_DIR_BASE,
            Some(100),
            &mut l,
            &mut NoWitness,
        )
        .unwrap();
        assert_eq!(l.file.map(|f| f.kind), Some(KIND_DIR_BASE));
        assert_eq!(l.names.len(), 1);
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn a_scan_has_no_depth_bound() {
        // A file with a second name outside, moved 80 levels deep below the
        // entry (past the hook's walk bound of 64): still marked by inode,
        // and the scan is complete (issue 23).
        let root = std::env::temp_dir().join(format!("asx-deep-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let e = root.join("e");
        let deep = (0..80).fold(e.clone(), |p, _| p.join("d"));
        std::fs::create_dir_all(&deep).unwrap();
        std::fs::write(deep.join("m"), b"").unwrap();
        std::fs::hard_link(deep.join("m"), root.join("m")).unwrap();
        let ino = std::fs::metadata(root.join("m")).unwrap().ino();
        let mut k = KeyContext::new().unwrap();
        let mut l = Listing::default();
        let scan = k
            .resolve_dir(&e, KIND_DIR_USER, Some(100), &mut l, &mut NoWitness)
            .unwrap();
        std::fs::remove_dir_all(&root).unwrap();
        assert_eq!((scan.marked, scan.unmarked, scan.incomplete), (1, 0, None));
        assert_eq!(l.file.map(|f| (f.ino, f.kind)), Some((ino, KIND_OPEN)));
    }

    #[test]
    fn a_scan_past_its_marking_budget_is_incomplete() {
        // Decoy files with second names outside, made from inside, must not
        // push a marked file out of the scan's keys unnoticed (issue 23):
        // two files with other names and a budget of one.
        let root = std::env::temp_dir().join(format!("asx-budget-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let e = root.join("e");
        std::fs::create_dir_all(&e).unwrap();
        for n in ["a", "b"] {
            std::fs::write(e.join(n), b"").unwrap();
            std::fs::hard_link(e.join(n), root.join(n)).unwrap();
        }
        let mut k = KeyContext::new().unwrap();
        let mut l = Listing::default();
        let scan = k
            .resolve_dir(&e, KIND_DIR_USER, Some(1), &mut l, &mut NoWitness)
            .unwrap();
        std::fs::remove_dir_all(&root).unwrap();
        assert_eq!((scan.marked, scan.unmarked), (1, 1));
        assert_eq!(
            scan.incomplete.as_deref(),
            Some("more than 1 files with other names below it")
        );
    }

    #[test]
    fn a_change_the_watches_saw_during_a_scan_makes_it_incomplete() {
        /// Watches nothing, but says a change was seen.
        struct Changed;
        impl Witness for Changed {
            fn before_lookup(&mut self, _: &[u8]) -> Option<crate::resolve::witness::WalkEnd> {
                None
            }
            fn distrust(&mut self) {}
            fn trusting(&self) -> bool {
                true
            }
            fn before_reading(&mut self, _: &OwnedFd) -> io::Result<()> {
                Ok(())
            }
            fn scanned_file(
                &mut self,
                _: &OwnedFd,
                _: &[u8],
                _: u32,
                nlink: u32,
                _: (u32, u32),
            ) -> io::Result<u32> {
                Ok(nlink)
            }
            fn scan_begins(&mut self) {}
            fn scan_changed(&mut self) -> bool {
                true
            }
        }
        let root = std::env::temp_dir().join(format!("asx-changed-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(root.join("e/sub")).unwrap();
        let mut k = KeyContext::new().unwrap();
        let mut l = Listing::default();
        let e = root.join("e");
        let seen = k
            .resolve_dir(&e, KIND_DIR_USER, Some(10), &mut l, &mut Changed)
            .unwrap();
        let quiet = k
            .resolve_dir(&e, KIND_DIR_USER, Some(10), &mut l, &mut NoWitness)
            .unwrap();
        std::fs::remove_dir_all(&root).unwrap();
        assert_eq!(
            seen.incomplete.as_deref(),
            Some("a directory below it changed while it was read")
        );
        assert_eq!(quiet.incomplete, None);
    }

    #[test]
    fn a_name_gone_while_the_scan_reads_makes_it_incomplete() {
        let mut scan = DirScan::default();
        let gone = io::Error::from_raw_os_error(libc::ENOENT);
        unwatchable_below(&mut scan, &gone, "examine a name", &mut NoWitness);
        assert_eq!(
            scan.incomplete.as_deref(),
            Some("a name below it went away while it was read")
        );
        // The first reason stays.
        let denied = io::Error::from_raw_os_error(libc::EACCES);
        unwatchable_below(&mut scan, &denied, "open a directory", &mut NoWitness);
        assert_eq!(
            scan.incomplete.as_deref(),
            Some("a name below it went away while it was read")
        );
    }

    #[test]
    fn marks_cover_every_directory_and_symlink_on_the_way() {
        let root = std::env::temp_dir().join(format!("asx-marks-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(root.join("a/b")).unwrap();
        std::fs::create_dir_all(root.join("c")).unwrap();
        // l -> a (relative), m -> <root>/c (absolute), c/up -> .. (a symlink in a target)
        symlink("a", root.join("l")).unwrap();
        symlink(root.join("c"), root.join("m")).unwrap();
        symlink("..", root.join("c/up")).unwrap();
        symlink("a", root.join("unused")).unwrap();
        let ino = |p: &Path| std::fs::symlink_metadata(p).unwrap().ino();
        let mut cx = KeyContext::new().unwrap();

        // A missing file in an existing directory: its name is watched.
        let l = cx
            .listing(&root.join("m/up/l/b/secret"), LastComponent::NoFollow)
            .unwrap();
        assert_eq!(l.file, None);
        let marks = cx.take_marks();
        let of_kind = |kind| -> HashSet<u64> {
            marks
                .iter()
                .filter(|m| m.kind == kind)
                .map(|m| m.ino)
                .collect()
        };
        let on_path = of_kind(KIND_PATH);
        for p in ["m", "c", "c/up", "l", "a", "a/b"] {
            assert!(on_path.contains(&ino(&root.join(p))), "{p} is on the way");
        }
        let mut up = Some(root.as_path());
        while let Some(dir) = up {
            assert!(
                on_path.contains(&ino(dir)),
                "{} is on the way",
                dir.display()
            );
            up = dir.parent();
        }
        assert!(!on_path.contains(&ino(&root.join("unused"))));
        // The directory holding the name, with the key its name entry has.
        assert_eq!(
            of_kind(KIND_LISTED_DIR),
            HashSet::from([ino(&root.join("a/b"))])
        );
        let listed = marks.iter().find(|m| m.kind == KIND_LISTED_DIR).unwrap();
        assert_eq!(listed.with_kind(KIND_OPEN), l.names[0].dir);
        assert!(marks.windows(2).all(|w| w[0] < w[1]), "sorted: {marks:?}");
        assert!(cx.take_marks().is_empty(), "taken");
        // A directory that cannot be looked up gives no marks.
        assert!(
            cx.listing(&root.join("nope/x"), LastComponent::NoFollow)
                .is_err()
        );
        assert!(cx.take_marks().is_empty());
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn listing_matches_stat_on_this_host() {
        let dir = std::env::temp_dir().join(format!("asx-keys-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("f");
        std::fs::write(&file, b"x").unwrap();
        let link = dir.join("l");
        let _ = std::fs::remove_file(&link);
        symlink(&file, &link).unwrap();
        let mut cx = KeyContext::new().unwrap();

        let l = cx.listing(&file, LastComponent::NoFollow).unwrap();
        let key = l.file.unwrap();
        let md = std::fs::metadata(&file).unwrap();
        assert_eq!(key.ino, md.ino());
        let dmd = std::fs::metadata(&dir).unwrap();
        assert_eq!(l.names.len(), 1);
        assert_eq!(l.names[0].dir.ino, dmd.ino());
        assert_eq!(l.names[0].dir.dev, key.dev);
        assert_eq!(l.names[0].name, b"f");

        // A followed symlink gives the target's key and watches both names.
        let via_link = cx.listing(&link, LastComponent::Follow).unwrap();
        assert_eq!(via_link.file, Some(key));
        let names: Vec<&[u8]> = via_link.names.iter().map(|n| &n.name[..]).collect();
        assert_eq!(names, vec![&b"l"[..], &b"f"[..]]);
        assert!(matches!(
            cx.listing(&link, LastComponent::NoFollow),
            Err(KeyError::NotRegular(FileKind::Symlink))
        ));
        assert!(matches!(
            cx.listing(&dir, LastComponent::Follow),
            Err(KeyError::NotRegular(FileKind::Directory))
        ));
        assert!(matches!(
            cx.listing(&dir.join("x/.."), LastComponent::Follow),
            Err(KeyError::NotRegular(FileKind::Directory))
        ));
        // Missing file, existing directory: watched by name, no file key yet.
        let absent = cx
            .listing(&dir.join("missing"), LastComponent::Follow)
            .unwrap();
        assert_eq!(absent.file, None);
        assert_eq!(absent.names[0].name, b"missing");
        assert!(matches!(
            cx.listing(&dir.join("nodir/x"), LastComponent::Follow),
            Err(KeyError::Missing)
        ));

        // A directory replaced between two resolutions: renew() forgets the
        // cached one, so the next resolution sees the new directory.
        let old_dir_ino = l.names[0].dir.ino;
        std::fs::rename(&dir, dir.with_extension("old")).unwrap();
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(&file, b"y").unwrap();
        assert!(!cx.renew().unwrap(), "no mount changed");
        let again = cx.listing(&file, LastComponent::NoFollow).unwrap();
        assert_ne!(again.names[0].dir.ino, old_dir_ino);
        assert_eq!(
            again.file.unwrap().ino,
            std::fs::metadata(&file).unwrap().ino()
        );
        std::fs::remove_dir_all(&dir).unwrap();
        std::fs::remove_dir_all(dir.with_extension("old")).unwrap();
    }

    #[test]
    fn descriptor_keys_by_identity_not_by_access() {
        use std::os::fd::AsRawFd;
        use std::os::unix::fs::PermissionsExt;
        let dir = std::env::temp_dir().join(format!("asx-fdkeys-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("f");
        std::fs::write(&file, b"x").unwrap();
        let held = std::fs::File::open(&file).unwrap();
        // Made unreadable after the open: the key is the same (nothing is
        // opened to read it; root would not see the difference anyway).
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o000)).unwrap();
        let listed = cx_key(&file);
        let dir_fd = std::fs::File::open(&dir).unwrap();
        let o_path = open_at(libc::AT_FDCWD, file.as_os_str().as_bytes(), libc::O_PATH).unwrap();
        let (r, w) = nix::unistd::pipe().unwrap();
        let closed = 1_000_000; // above any descriptor this test has open
        let fds = [
            held.as_raw_fd(),
            dir_fd.as_raw_fd(),
            o_path.as_raw_fd(),
            r.as_raw_fd(),
            w.as_raw_fd(),
            closed,
        ];
        let got = descriptor_keys(&fds).unwrap();
        assert_eq!(got.len(), 2, "{got:?}");
        assert_eq!(got[0], (held.as_raw_fd(), listed));
        assert_eq!(got[1].0, dir_fd.as_raw_fd());
        assert_eq!(got[1].1.ino, std::fs::metadata(&dir).unwrap().ino());
        assert_eq!(got[1].1.dev, listed.dev);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// The key the resolver gives the file at `path`.
    fn cx_key(path: &Path) -> FileKey {
        let mut cx = KeyContext::new().unwrap();
        cx.listing(path, LastComponent::NoFollow)
            .unwrap()
            .file
            .unwrap()
    }
}
