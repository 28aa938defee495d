//! Knowing, without looking again, that the directories a resolution read are
//! as they were: inotify watches on every directory that a lookup of a listed
//! path reads.
//!
//! A resolver answers a launch with nothing changed by sending its previous
//! answer again, instead of resolving every listed path anew, when (1) the
//! lists and the home directory are byte for byte the same, (2) no mount or
//! unmount happened in its mount namespace ([`crate::resolve::keys::KeyContext::renew`])
//! and (3) [`Watches::intact`]: no event arrived on any watch set during the
//! last full resolution, and every directory that resolution read got one
//! (the resolver's `reuse` module decides; [`Watches`] is the
//! [`Witness`] key derivation tells what it reads).
//!
//! What a lookup of a path depends on is the entries of the directories it
//! reads, their permissions and the mounts on the way. [`Watches::walk`]
//! repeats the lookup one component at a time — following symlinks, `..` and
//! mounts as the kernel does (path_resolution(7)) — and watches each directory
//! *before* it reads a name in it, so a change made after the read raises an
//! event, and one made before it is seen by the walk and by the resolution
//! that follows. The watch mask is every change of a directory's entries
//! (`IN_CREATE`, `IN_DELETE`, `IN_MOVED_FROM`, `IN_MOVED_TO`) and of the
//! directory itself (`IN_DELETE_SELF`, `IN_MOVE_SELF`); the kernel adds
//! `IN_UNMOUNT`, `IN_IGNORED` (a watch gone) and `IN_Q_OVERFLOW` (events
//! lost) on its own (inotify(7)). Any event at all makes the watches not
//! intact: no event is interpreted, so none can be misread.
//!
//! Not `IN_ATTRIB`: it is an event a directory's watch also gets for its
//! children, and watching any such event flags every child dentry
//! (`DCACHE_FSNOTIFY_PARENT_WATCHED`), so that every open, read, write and
//! close of every file in the directory — the user's home is one — takes
//! the slow path of `__fsnotify_parent` (fs/notify/fsnotify.c): 6 % more per
//! open+close in the benchmark. Permissions decide only whether a lookup
//! fails, never where it leads: with no entry changed, the keys found are
//! the same, and an answer sent again after a `chmod` still denies every
//! file the lists name (where a full resolution would refuse the launch on
//! `EACCES`).
//!
//! inotify sees only changes made through this kernel's VFS. A directory on a
//! filesystem where other machines or a FUSE server change entries, or an
//! overlayfs whose layers may change underneath it, is never trusted: a
//! directory not on one of [`LOCAL_FILESYSTEMS`], or one that cannot be
//! watched (no read permission, the user's inotify limits reached), leaves
//! the walk incomplete, and the next launch resolves every path again. So
//! does an encrypted directory (fscrypt, `STATX_ATTR_ENCRYPTED`): adding or
//! removing its key, which its owner may do, makes its names appear or
//! vanish without an event. And so do more than [`MAX_WATCHES`] directories
//! in one resolution: a base-list line through a directory a user can write
//! must not let that user make the root resolver hold root's watches. The
//! watches of a resolution that cannot be reused are removed at once, and so
//! are all of them at the first event ([`Watches::stop`], called by an idle
//! resolver): from then on the next resolution is a full one anyway, and
//! further changes in the watched directories (the home among them) should
//! not queue events for the rest of the resolver's idle time.
//!
//! A directory entry's scan (`KeyContext::resolve_dir`) reads every
//! directory below the entry and marks by inode each regular file with more
//! than one link. What its answer depends on is those directories' entries
//! (watched as above, [`Watches::watch_scanned_dir`], before each is read)
//! and the link count of every file with one link, which an `ln` elsewhere
//! raises. That change raises `IN_ATTRIB` on the file's own inode only: the
//! kernel's `fsnotify_link_count` (include/linux/fsnotify.h, called by
//! `vfs_link`) reports it with `fsnotify_inode`, not to the parent's
//! watches, so a directory watch never sees it. Each file with one link is
//! therefore watched itself, for `IN_ATTRIB` ([`Watches::watch_scanned_file`];
//! no parent gets a child-event mask, so opens elsewhere keep their fast
//! path). A file with more links is marked by inode already: more names
//! change nothing. The scan's watches are capped per resolution at
//! [`scan_watch_cap`] (a quarter of the user's `max_user_watches`); past
//! the cap, on `ENOSPC`, or on a directory that cannot be trusted, the
//! resolution is not reusable and every launch scans again, as it did
//! before, and the resolver says why in a warning about the list line.

use std::collections::{HashMap, HashSet};
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::rc::Rc;

use nix::errno::Errno;
use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use nix::sys::inotify::{AddWatchFlags, InitFlags, Inotify, WatchDescriptor};

use crate::os::fs_magic;
use crate::os::sys::{fs_type, open_at, statx_fd};
use crate::resolve::witness::{WalkEnd, Witness};

/// statfs `f_type` of the filesystems whose directory changes all pass
/// through this kernel's VFS, and so raise inotify events
/// (include/uapi/linux/magic.h): ext2/3/4, XFS, btrfs, tmpfs, F2FS.
pub const LOCAL_FILESYSTEMS: [i64; 5] = [
    fs_magic::EXT4,
    fs_magic::XFS,
    fs_magic::BTRFS,
    fs_magic::TMPFS,
    fs_magic::F2FS,
];

/// Directories watched in one resolution at most; past that, the resolution
/// is not reusable (see the module docs). inotify watches count against the
/// resolver's user's `fs.inotify.max_user_watches` (8,192 before Linux 5.11,
/// inotify(7)); a base-list resolver is root's, one per uid with launches.
pub const MAX_WATCHES: usize = 1024;

/// Scan watches ([`Watches::watch_scanned_dir`], [`Watches::watch_scanned_file`])
/// in one resolution at most, whatever the user's limit.
pub const MAX_SCAN_WATCHES: usize = 65_536;

/// Scan watches in one resolution at most for a resolver running as root
/// (the base list's): root's `max_user_watches` is shared by the base-list
/// resolvers of every user with launches and by root's own tools, and a
/// user who can write below a base-list directory entry must not be able to
/// make root hold more than the walk's own [`MAX_WATCHES`] for it.
pub const MAX_ROOT_SCAN_WATCHES: usize = MAX_WATCHES;

/// Where the kernel publishes the per-user watch limit (inotify(7)).
const MAX_USER_WATCHES: &str = "/proc/sys/fs/inotify/max_user_watches";

/// The cap on scan watches in one resolution, for a user whose
/// `fs.inotify.max_user_watches` is `limit` (None: unreadable, then the
/// pre-5.11 default 8,192 is assumed): a quarter of it, so that the user's
/// editors and file watchers keep the rest, and at most
/// [`MAX_SCAN_WATCHES`]. The limit counts the watches of every inotify
/// instance whose creator has that uid (fs/notify/inotify/inotify_user.c,
/// `inotify_new_watch`: `inc_inotify_watches(group->inotify_data.ucounts)`);
/// a resolver creates its instance after dropping privileges, so they are
/// the user's. For a resolver running as root (`root`), at most
/// [`MAX_ROOT_SCAN_WATCHES`].
pub fn scan_watch_cap(limit: Option<u64>, root: bool) -> usize {
    let limit = usize::try_from(limit.unwrap_or(8192)).unwrap_or(usize::MAX);
    let cap = (limit / 4).min(MAX_SCAN_WATCHES);
    if root {
        cap.min(MAX_ROOT_SCAN_WATCHES)
    } else {
        cap
    }
}

/// What a directory entry's scan watches of one name it found, from its
/// statx mode and link count: a directory is read, so its entries are
/// watched; a regular file with one link is watched for a new link (which
/// would give it a name the hook's walk does not cover); anything else
/// needs no watch (a file with more links is marked by inode, and the
/// hook does not judge what is not a regular file).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScanWatch {
    /// A directory, to read: watch its entries.
    Entries,
    /// A regular file with one link: watch its link count (`IN_ATTRIB`).
    LinkCount,
    /// Nothing to watch.
    Nothing,
}

impl ScanWatch {
    /// The watch for a name of mode `mode` (`S_IFMT` bits and others) with
    /// `nlink` links.
    pub fn of(mode: u32, nlink: u32) -> ScanWatch {
        match mode & libc::S_IFMT {
            libc::S_IFDIR => ScanWatch::Entries,
            libc::S_IFREG if nlink <= 1 => ScanWatch::LinkCount,
            _ => ScanWatch::Nothing,
        }
    }
}

/// Symlinks followed in one walk before it gives up, as the kernel's
/// `MAXSYMLINKS` (include/linux/namei.h).
const MAX_SYMLINKS: usize = 40;

/// One inotify instance and the watches of the current resolution.
pub struct Watches {
    inotify: Inotify,
    /// The watches set since [`Watches::restart`].
    set: Vec<WatchDescriptor>,
    /// Directories (device, inode) watched since then, with their watch.
    watched: HashMap<(u32, u32, u64), WatchDescriptor>,
    /// The watches the current directory-entry scan relies on (those it
    /// set and those set before on what it read), since
    /// [`Witness::scan_begins`].
    scan_wds: Vec<WatchDescriptor>,
    /// Watches that got an event, from events read by
    /// [`Witness::scan_changed`] since [`Watches::restart`].
    changed_wds: HashSet<WatchDescriptor>,
    /// Whether [`Witness::scan_changed`] read (and so consumed) an event
    /// since [`Watches::restart`]: the resolution is then not intact.
    consumed: bool,
    /// Devices (major, minor) found on [`LOCAL_FILESYSTEMS`] since then.
    local_devs: Vec<(u32, u32)>,
    /// Paths walked since then, with where each walk ended.
    walked: HashMap<Vec<u8>, Option<WalkEnd>>,
    /// The last walk of an absolute path: for each of its leading names,
    /// the directory its lookup found. Open only while a resolution runs
    /// (see [`Watches::forget_dirs`]).
    prefix: Vec<(Vec<u8>, Rc<OwnedFd>, WalkEnd)>,
    /// False once a directory could not be watched since then.
    complete: bool,
    /// How many of `set` a directory entry's scan added.
    scan_watches: usize,
    /// [`scan_watch_cap`] for this resolution, read at its first scan watch.
    scan_cap: Option<usize>,
}

impl AsFd for Watches {
    /// The inotify descriptor: readable when an event is queued.
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.inotify.as_fd()
    }
}

impl Watches {
    /// A new inotify instance, without watches.
    ///
    /// # Errors
    /// inotify_init1(2)'s: `EMFILE` when the user's `max_user_instances` is
    /// reached, among others.
    pub fn new() -> io::Result<Watches> {
        let inotify = Inotify::init(InitFlags::IN_NONBLOCK | InitFlags::IN_CLOEXEC)?;
        Ok(Watches {
            inotify,
            set: Vec::new(),
            watched: HashMap::new(),
            scan_wds: Vec::new(),
            changed_wds: HashSet::new(),
            consumed: false,
            local_devs: Vec::new(),
            walked: HashMap::new(),
            prefix: Vec::new(),
            complete: true,
            scan_watches: 0,
            scan_cap: None,
        })
    }

    /// Whether every directory walked since [`Watches::restart`] got a watch
    /// and no event arrived since. Does not consume the events.
    pub fn intact(&self) -> bool {
        if !self.complete || self.consumed {
            return false;
        }
        let mut fds = [PollFd::new(self.inotify.as_fd(), PollFlags::POLLIN)];
        // An error (never expected) counts as a change.
        poll(&mut fds, PollTimeout::ZERO) == Ok(0)
    }

    /// Removes every watch and discards the events queued so far, for a new
    /// resolution. Watches are removed one by one rather than by closing the
    /// instance: closing waits for an SRCU grace period
    /// (fs/notify/group.c, `fsnotify_destroy_group`).
    ///
    /// # Errors
    /// The read error of the inotify descriptor, other than `EAGAIN`.
    pub fn restart(&mut self) -> io::Result<()> {
        self.stop()?;
        self.changed_wds.clear();
        self.consumed = false;
        self.local_devs.clear();
        self.walked.clear();
        self.complete = true;
        self.scan_cap = None;
        Ok(())
    }

    /// Closes the directories kept from the last walk: an open directory,
    /// even O_PATH, keeps its mount busy. The watches stay.
    pub fn forget_dirs(&mut self) {
        self.prefix.clear();
    }

    /// Marks the current resolution as not fully watched (for what the walk
    /// cannot see on its own: a lookup that ended elsewhere than the walk)
    /// and removes its watches: it will not be reused, and watches held
    /// meanwhile would only count against the user's inotify limits.
    pub fn give_up(&mut self) {
        self.complete = false;
        for wd in self.set.drain(..) {
            // EINVAL: already gone (its directory was deleted or unmounted).
            let _ = self.inotify.rm_watch(wd);
        }
        self.watched.clear();
        self.scan_wds.clear();
        self.prefix.clear();
        self.scan_watches = 0;
    }

    /// Whether no directory failed to be watched since [`Watches::restart`]
    /// (events are not looked at): watching more can still make the
    /// resolution reusable.
    pub fn watching(&self) -> bool {
        self.complete
    }

    /// Watches directory `fd` (any open mode), found by a directory entry's
    /// scan, before the scan reads it: its entries and itself, as a walked
    /// directory ([`ScanWatch::Entries`]). Nothing when the resolution is
    /// not reusable already.
    ///
    /// # Errors
    /// Why it cannot be watched: not on [`LOCAL_FILESYSTEMS`], encrypted,
    /// past [`scan_watch_cap`], or inotify_add_watch(2)'s (`ENOSPC`: the
    /// user's `max_user_watches` reached). The caller gives up
    /// ([`Watches::give_up`]).
    pub fn watch_scanned_dir(&mut self, fd: &OwnedFd) -> io::Result<()> {
        if !self.complete {
            return Ok(());
        }
        let stx = statx_fd(fd.as_raw_fd())?;
        self.watch_examined(fd, &stx, Some(DIR_MASK)).map(drop)
    }

    /// Watches the regular file `name` in scanned directory `dir`, found
    /// with one link ([`ScanWatch::LinkCount`]), for `IN_ATTRIB` (a link
    /// count change, among metadata changes; see the module docs), and
    /// returns its link count looked up again after the watch is set (a
    /// link made before that is seen there, one made after raises an
    /// event): the caller marks the file if it is more than one now.
    /// `dev` is the (major, minor) statx found for it: a file on another
    /// device than a filesystem already checked (a file bind-mounted there)
    /// is not trusted. Nothing, and Ok(1), when the resolution is not
    /// reusable already.
    ///
    /// # Errors
    /// As [`Watches::watch_scanned_dir`]; the caller gives up.
    pub fn watch_scanned_file(
        &mut self,
        dir: &OwnedFd,
        name: &[u8],
        dev: (u32, u32),
    ) -> io::Result<u32> {
        if !self.complete {
            return Ok(1);
        }
        if !self.local_devs.contains(&dev) {
            return Err(io::Error::new(
                io::ErrorKind::Unsupported,
                "a file mounted on another filesystem",
            ));
        }
        self.take_scan_slot()?;
        let mut path = format!("/proc/self/fd/{}/", dir.as_raw_fd()).into_bytes();
        path.extend_from_slice(name);
        let wd = self.inotify.add_watch(
            std::ffi::OsStr::from_bytes(&path),
            AddWatchFlags::IN_ATTRIB | AddWatchFlags::IN_DONT_FOLLOW,
        )?;
        self.set.push(wd);
        self.scan_wds.push(wd);
        self.scan_watches += 1;
        let stx = crate::os::sys::statx_at(dir.as_raw_fd(), name, libc::AT_SYMLINK_NOFOLLOW)?;
        Ok(stx.stx_nlink)
    }

    /// Counts one more scan watch against [`scan_watch_cap`].
    fn take_scan_slot(&mut self) -> io::Result<()> {
        let cap = *self.scan_cap.get_or_insert_with(|| {
            scan_watch_cap(
                std::fs::read_to_string(MAX_USER_WATCHES)
                    .ok()
                    .and_then(|s| s.trim().parse().ok()),
                nix::unistd::geteuid().is_root(),
            )
        });
        if self.scan_watches >= cap {
            return Err(io::Error::new(
                io::ErrorKind::Unsupported,
                format!(
                    "more than {cap} directories and single-link files below directory entries \
                     (a quarter of fs.inotify.max_user_watches, at most {MAX_SCAN_WATCHES}; \
                     {MAX_ROOT_SCAN_WATCHES} for the base list, resolved as root)"
                ),
            ));
        }
        Ok(())
    }

    /// Gives up the current resolution ([`Watches::give_up`]) and discards
    /// the events queued so far.
    ///
    /// # Errors
    /// The read error of the inotify descriptor, other than `EAGAIN`.
    pub fn stop(&mut self) -> io::Result<()> {
        self.give_up();
        self.drain()
    }

    fn drain(&mut self) -> io::Result<()> {
        loop {
            match self.inotify.read_events() {
                Ok(_) => {}
                Err(Errno::EAGAIN) => return Ok(()),
                Err(Errno::EINTR) => {}
                Err(e) => return Err(e.into()),
            }
        }
    }

    /// Looks `path` up one component at a time from `/` (or the working
    /// directory, for a relative path), following every symlink, the last
    /// component's too, and watching every directory before reading a name
    /// in it. A missing component ends the walk (its directory is watched,
    /// so its creation is seen). Returns the directory the walk ended in,
    /// for the caller to compare with its own lookup: None if the path does
    /// not lead to one. On any directory that cannot be watched (see the
    /// module docs), the resolution is marked incomplete and None is
    /// returned. A path walked before in this resolution is not walked
    /// again.
    pub fn walk(&mut self, path: &[u8]) -> Option<WalkEnd> {
        if !self.complete {
            return None;
        }
        if let Some(end) = self.walked.get(path) {
            return *end;
        }
        let end = match self.walk_anew(path) {
            Ok(end) => end,
            Err(_) => {
                self.give_up();
                return None;
            }
        };
        self.walked.insert(path.to_vec(), end);
        end
    }

    fn walk_anew(&mut self, path: &[u8]) -> io::Result<Option<WalkEnd>> {
        let relative = path.first() != Some(&b'/');
        let names: Vec<&[u8]> = path
            .split(|&b| b == b'/')
            .filter(|c| !c.is_empty() && *c != b".")
            .collect();
        // Lists name their files directory by directory: start where the
        // previous walk's lookup of the same leading names ended.
        let mut depth = 0;
        if !relative {
            while depth < names.len().min(self.prefix.len()) && self.prefix[depth].0 == names[depth]
            {
                depth += 1;
            }
        }
        self.prefix.truncate(depth);
        let (mut cur, mut end) = match self.prefix.last() {
            Some((_, fd, end)) => (Rc::clone(fd), *end),
            None => {
                let start: &[u8] = if relative { b"." } else { b"/" };
                let fd = open_at(libc::AT_FDCWD, start, libc::O_PATH | libc::O_DIRECTORY)?;
                let end = self.watch(&fd)?;
                (Rc::new(fd), end)
            }
        };
        let mut links = 0;
        for name in &names[depth..] {
            // This name's lookup, with the names of the symlinks it goes
            // through; the next one last.
            let mut todo: Vec<Vec<u8>> = vec![name.to_vec()];
            while let Some(name) = todo.pop() {
                if name.is_empty() || name == b"." {
                    continue;
                }
                let next = match open_at(cur.as_raw_fd(), &name, libc::O_PATH | libc::O_NOFOLLOW) {
                    Ok(fd) => fd,
                    // The kernel's lookup ends here as well; creating the
                    // name raises an event on the watched directory.
                    Err(e) if matches!(e.raw_os_error(), Some(libc::ENOENT | libc::ENOTDIR)) => {
                        return Ok(None);
                    }
                    Err(e) => return Err(e),
                };
                match self.examine(&next)? {
                    Found::Directory(e) => {
                        end = e;
                        cur = Rc::new(next);
                    }
                    Found::Symlink => {
                        links += 1;
                        if links > MAX_SYMLINKS {
                            return Err(io::Error::from_raw_os_error(libc::ELOOP));
                        }
                        let target = nix::fcntl::readlinkat(&next, "")?;
                        let target = target.as_bytes();
                        if target.first() == Some(&b'/') {
                            let fd =
                                open_at(libc::AT_FDCWD, b"/", libc::O_PATH | libc::O_DIRECTORY)?;
                            end = self.watch(&fd)?;
                            cur = Rc::new(fd);
                        }
                        todo.extend(target.split(|&b| b == b'/').rev().map(<[u8]>::to_vec));
                    }
                    // Not a directory: the end, or a lookup through it
                    // fails here too.
                    Found::Other => return Ok(None),
                }
            }
            if !relative {
                self.prefix.push((name.to_vec(), Rc::clone(&cur), end));
            }
        }
        Ok(Some(end))
    }

    /// What the walk found: a directory is watched.
    fn examine(&mut self, fd: &OwnedFd) -> io::Result<Found> {
        let stx = statx_fd(fd.as_raw_fd())?;
        Ok(match u32::from(stx.stx_mode) & libc::S_IFMT {
            libc::S_IFDIR => Found::Directory(self.watch_examined(fd, &stx, None)?),
            libc::S_IFLNK => Found::Symlink,
            _ => Found::Other,
        })
    }

    fn watch(&mut self, fd: &OwnedFd) -> io::Result<WalkEnd> {
        let stx = statx_fd(fd.as_raw_fd())?;
        self.watch_examined(fd, &stx, None)
    }

    /// Watches directory `fd` (once per resolution), after checking its
    /// filesystem is one where inotify sees every change. `scan`: the mask
    /// of a scan's watch (counted against [`scan_watch_cap`]); None for a
    /// walk's (against [`MAX_WATCHES`]).
    fn watch_examined(
        &mut self,
        fd: &OwnedFd,
        stx: &libc::statx,
        scan: Option<AddWatchFlags>,
    ) -> io::Result<WalkEnd> {
        let id = (stx.stx_dev_major, stx.stx_dev_minor, stx.stx_ino);
        let end = (stx.stx_ino, stx.stx_dev_major, stx.stx_dev_minor);
        if let Some(&wd) = self.watched.get(&id) {
            if scan.is_some() {
                self.scan_wds.push(wd);
            }
            return Ok(end);
        }
        if stx.stx_attributes & libc::STATX_ATTR_ENCRYPTED as u64 != 0 {
            return Err(io::Error::new(
                io::ErrorKind::Unsupported,
                "an encrypted directory: its names change with its key, without events",
            ));
        }
        if scan.is_some() {
            self.take_scan_slot()?;
        } else if self.set.len() - self.scan_watches >= MAX_WATCHES {
            return Err(io::Error::new(
                io::ErrorKind::Unsupported,
                format!("more than {MAX_WATCHES} directories"),
            ));
        }
        // One device number is one filesystem while no mount changes.
        let dev = (stx.stx_dev_major, stx.stx_dev_minor);
        if !self.local_devs.contains(&dev) {
            let f_type = fs_type(fd)?;
            if !LOCAL_FILESYSTEMS.contains(&f_type) {
                return Err(io::Error::new(
                    io::ErrorKind::Unsupported,
                    format!("filesystem type {f_type:#x} may change without inotify events"),
                ));
            }
            self.local_devs.push(dev);
        }
        let wd = self.inotify.add_watch(
            format!("/proc/self/fd/{}", fd.as_raw_fd()).as_str(),
            scan.unwrap_or(DIR_MASK),
        )?;
        self.set.push(wd);
        if scan.is_some() {
            self.scan_watches += 1;
        }
        self.watched.insert(id, wd);
        if scan.is_some() {
            self.scan_wds.push(wd);
        }
        Ok(end)
    }
}

/// Key derivation's reads, watched: a lookup is walked first
/// ([`Watches::walk`]), a scanned directory and a scanned single-link file
/// watched ([`Watches::watch_scanned_dir`], [`Watches::watch_scanned_file`]).
impl Witness for Watches {
    fn before_lookup(&mut self, path: &[u8]) -> Option<WalkEnd> {
        self.walk(path)
    }

    fn distrust(&mut self) {
        self.give_up();
    }

    fn trusting(&self) -> bool {
        self.watching()
    }

    fn before_reading(&mut self, dir: &OwnedFd) -> io::Result<()> {
        self.watch_scanned_dir(dir)
    }

    fn scanned_file(
        &mut self,
        dir: &OwnedFd,
        name: &[u8],
        mode: u32,
        nlink: u32,
        dev: (u32, u32),
    ) -> io::Result<u32> {
        if ScanWatch::of(mode, nlink) != ScanWatch::LinkCount {
            return Ok(nlink);
        }
        self.watch_scanned_file(dir, name, dev)
    }

    fn scan_begins(&mut self) {
        self.scan_wds.clear();
    }

    fn scan_changed(&mut self) -> bool {
        // After a give-up the removed watches queue IN_IGNORED events, and
        // nothing is watched: no answer.
        if !self.watching() {
            return false;
        }
        // Events on the lookups' watches (a file made in the home) say
        // nothing of the scan: only those on what it read count. Read
        // events stay remembered (`consumed`, `changed_wds`): the
        // resolution is not intact, and a later scan sees them too.
        loop {
            match self.inotify.read_events() {
                Ok(events) => {
                    self.consumed |= !events.is_empty();
                    self.changed_wds.extend(events.iter().map(|e| e.wd));
                }
                Err(Errno::EINTR) => {}
                // EAGAIN: none left. Another error (never expected): a change.
                Err(Errno::EAGAIN) => break,
                Err(_) => return true,
            }
        }
        self.scan_wds.iter().any(|wd| self.changed_wds.contains(wd))
    }
}

/// A directory's watch: every change of its entries and of itself.
const DIR_MASK: AddWatchFlags = AddWatchFlags::IN_CREATE
    .union(AddWatchFlags::IN_DELETE)
    .union(AddWatchFlags::IN_MOVED_FROM)
    .union(AddWatchFlags::IN_MOVED_TO)
    .union(AddWatchFlags::IN_DELETE_SELF)
    .union(AddWatchFlags::IN_MOVE_SELF)
    .union(AddWatchFlags::IN_ONLYDIR);

/// What a name turned out to be, in a walk.
enum Found {
    Directory(WalkEnd),
    Symlink,
    Other,
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;
    use std::path::{Path, PathBuf};

    /// A fresh tree `a/b` under the temporary directory, or None (said on
    /// stderr) where that is not on a filesystem whose changes inotify sees.
    fn tree(tag: &str) -> Option<PathBuf> {
        let root = std::env::temp_dir().join(format!("asx-watch-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(root.join("a/b")).unwrap();
        let dir = std::fs::File::open(&root).unwrap();
        if LOCAL_FILESYSTEMS.contains(&fs_type(&OwnedFd::from(dir)).unwrap()) {
            return Some(root);
        }
        eprintln!("skipped: the temporary directory is not on a local filesystem here");
        std::fs::remove_dir_all(&root).unwrap();
        None
    }

    fn end_of(p: &Path) -> WalkEnd {
        use std::os::unix::fs::MetadataExt;
        let md = std::fs::metadata(p).unwrap();
        let dev = md.dev();
        (md.ino(), libc::major(dev), libc::minor(dev))
    }

    fn bytes(p: &Path) -> &[u8] {
        p.as_os_str().as_bytes()
    }

    /// Starts `w` anew and runs `walk` until no event arrived meanwhile,
    /// and asserts that happens: every walk watches the temporary
    /// directory, where other tests and processes make and remove names
    /// at any time. A step that itself raises an event fails every try.
    fn quiet(w: &mut Watches, mut walk: impl FnMut(&mut Watches)) {
        let settled = (0..200).any(|_| {
            w.restart().unwrap();
            walk(w);
            w.intact()
        });
        assert!(settled, "an event after every one of 200 walks");
    }

    #[test]
    fn a_change_in_a_walked_directory_is_seen() {
        let Some(root) = tree("change") else {
            return;
        };
        let mut w = Watches::new().unwrap();
        let dir = root.join("a/b");
        // Reading is not a change; a walk of the same path again is free.
        quiet(&mut w, |w| {
            assert_eq!(w.walk(bytes(&dir)), Some(end_of(&dir)));
            std::fs::read_dir(root.join("a")).unwrap().for_each(drop);
            assert_eq!(w.walk(bytes(&dir)), Some(end_of(&dir)));
        });
        // An unrelated name created in a walked directory: not interpreted,
        // so seen as a change.
        std::fs::write(root.join("a/other"), b"").unwrap();
        assert!(!w.intact());
        // Stopped at the first event: no watch left, the queue empty, and
        // still not intact until a new resolution.
        w.stop().unwrap();
        assert!(w.set.is_empty());
        std::fs::write(root.join("a/other2"), b"").unwrap();
        assert!(matches!(w.inotify.read_events(), Err(Errno::EAGAIN)));
        assert!(!w.intact());
        w.restart().unwrap();
        assert!(w.intact());
        quiet(&mut w, |w| {
            w.walk(bytes(&dir));
        });
        // The directory replaced: a rename in its parent.
        std::fs::rename(root.join("a/b"), root.join("a/b.old")).unwrap();
        assert!(!w.intact());
        // Permissions of a walked directory: not watched (see the module
        // docs); its entries still are.
        let mut mode = 0o700;
        quiet(&mut w, |w| {
            w.walk(bytes(&dir));
            mode ^= 0o055;
            std::fs::set_permissions(
                root.join("a"),
                std::os::unix::fs::PermissionsExt::from_mode(mode),
            )
            .unwrap();
        });
        std::fs::create_dir(root.join("a/c")).unwrap();
        assert!(!w.intact());
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn symlinks_on_the_way_are_followed_and_their_directories_watched() {
        let Some(root) = tree("links") else {
            return;
        };
        // root/l1 -> m/l2 (relative), root/m/l2 -> root/a (absolute).
        std::fs::create_dir_all(root.join("m")).unwrap();
        symlink(root.join("a"), root.join("m/l2")).unwrap();
        symlink("m/l2", root.join("l1")).unwrap();
        let mut w = Watches::new().unwrap();
        let listed_dir = root.join("l1/b");
        quiet(&mut w, |w| {
            assert_eq!(w.walk(bytes(&listed_dir)), Some(end_of(&root.join("a/b"))));
        });
        // The middle link lives in a directory the listed path never names.
        std::fs::remove_file(root.join("m/l2")).unwrap();
        assert!(!w.intact());
        symlink(root.join("a/b"), root.join("m/l2")).unwrap();
        w.restart().unwrap();
        // `..` is looked up like any name.
        let up = root.join("a/b/../b");
        assert_eq!(w.walk(bytes(&up)), Some(end_of(&root.join("a/b"))));
        // A followed last component: its own chain is watched too.
        std::fs::write(root.join("a/b/f"), b"").unwrap();
        symlink(root.join("a/b/f"), root.join("m/lf")).unwrap();
        symlink("m/lf", root.join("last")).unwrap();
        quiet(&mut w, |w| {
            assert_eq!(w.walk(bytes(&root.join("last"))), None);
        });
        std::fs::remove_file(root.join("m/lf")).unwrap();
        assert!(!w.intact());
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn what_a_scan_watches_and_how_many() {
        let (dir, reg, lnk) = (libc::S_IFDIR | 0o755, libc::S_IFREG | 0o600, libc::S_IFLNK);
        assert_eq!(ScanWatch::of(dir, 2), ScanWatch::Entries);
        // One link: a new one elsewhere must be seen (the file's own
        // IN_ATTRIB; its directory's watch never gets it).
        assert_eq!(ScanWatch::of(reg, 1), ScanWatch::LinkCount);
        // More links: marked by inode already, whatever its names.
        assert_eq!(ScanWatch::of(reg, 2), ScanWatch::Nothing);
        assert_eq!(ScanWatch::of(lnk, 1), ScanWatch::Nothing);
        assert_eq!(ScanWatch::of(libc::S_IFIFO, 1), ScanWatch::Nothing);
        // A quarter of the user's limit, the pre-5.11 default when unknown.
        assert_eq!(scan_watch_cap(Some(8192), false), 2048);
        assert_eq!(scan_watch_cap(None, false), 2048);
        assert_eq!(scan_watch_cap(Some(3), false), 0);
        // Root's watches are everyone's base lists': never past the walk's own cap.
        assert_eq!(scan_watch_cap(Some(1 << 20), true), MAX_ROOT_SCAN_WATCHES);
        assert_eq!(scan_watch_cap(Some(8192), true), MAX_ROOT_SCAN_WATCHES);
        assert_eq!(scan_watch_cap(Some(400), true), 100);
        assert_eq!(scan_watch_cap(Some(1 << 40), false), MAX_SCAN_WATCHES);
    }

    #[test]
    fn a_new_link_to_a_watched_file_is_seen_and_its_directory_alone_would_not() {
        let Some(root) = tree("link") else {
            return;
        };
        std::fs::write(root.join("a/b/f"), b"").unwrap();
        let dir = OwnedFd::from(std::fs::File::open(root.join("a/b")).unwrap());
        let dev = end_of(&root.join("a/b"));
        let mut w = Watches::new().unwrap();
        quiet(&mut w, |w| {
            w.watch_scanned_dir(&dir).unwrap();
        });
        // The kernel's fsnotify_link_count reports to the inode only.
        std::fs::hard_link(root.join("a/b/f"), root.join("g")).unwrap();
        assert!(w.intact(), "a directory watch got the link count change");
        std::fs::remove_file(root.join("g")).unwrap();
        quiet(&mut w, |w| {
            w.watch_scanned_dir(&dir).unwrap();
            assert_eq!(w.watch_scanned_file(&dir, b"f", (dev.1, dev.2)).unwrap(), 1);
        });
        assert_eq!(w.scan_watches, 2);
        std::fs::hard_link(root.join("a/b/f"), root.join("g")).unwrap();
        assert!(!w.intact());
        // A file on a device not checked is not trusted.
        w.restart().unwrap();
        assert!(w.watch_scanned_file(&dir, b"f", (u32::MAX, 0)).is_err());
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn a_rename_in_a_scanned_directory_is_a_change_and_nothing_after_a_give_up() {
        let Some(root) = tree("renamed") else {
            return;
        };
        std::fs::create_dir_all(root.join("a/b/keys")).unwrap();
        let dir = OwnedFd::from(std::fs::File::open(root.join("a/b")).unwrap());
        let mut w = Watches::new().unwrap();
        // The lookup of a listed path watched root/a (and what is above),
        // then a scan read root/a/b.
        quiet(&mut w, |w| {
            assert!(w.walk(root.join("a").as_os_str().as_bytes()).is_some());
            w.scan_begins();
            w.watch_scanned_dir(&dir).unwrap();
        });
        assert!(!w.scan_changed());
        // A file made where only the lookup looked: not the scan's change,
        // but the resolution is no longer intact.
        std::fs::write(root.join("a/new"), b"").unwrap();
        assert!(!w.scan_changed());
        assert!(!w.intact());
        // What an agent renaming a subdirectory back and forth does.
        std::fs::rename(root.join("a/b/keys"), root.join("a/b/k2")).unwrap();
        std::fs::rename(root.join("a/b/k2"), root.join("a/b/keys")).unwrap();
        assert!(w.scan_changed());
        // A later scan that reads the same directory sees it too.
        w.scan_begins();
        w.watch_scanned_dir(&dir).unwrap();
        assert!(w.scan_changed());
        // A new resolution forgets it.
        quiet(&mut w, |w| {
            w.scan_begins();
            w.watch_scanned_dir(&dir).unwrap();
        });
        assert!(!w.scan_changed());
        assert!(w.intact());
        // Given up, it watches nothing and cannot tell.
        std::fs::rename(root.join("a/b/keys"), root.join("a/b/k2")).unwrap();
        w.give_up();
        assert!(!w.scan_changed());
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn too_many_directories_are_not_watched() {
        let Some(root) = tree("many") else {
            return;
        };
        let mut w = Watches::new().unwrap();
        let mut walked = 0;
        for i in 0..MAX_WATCHES {
            let d = root.join(format!("a/d{i}"));
            std::fs::create_dir(&d).unwrap();
            if w.walk(bytes(&d)).is_some() {
                walked += 1;
            }
        }
        // The root's ancestors and a/ count too: the cap is reached, and
        // the watches are gone at once.
        assert!(walked < MAX_WATCHES);
        assert!(!w.intact());
        assert!(w.set.is_empty());
        w.restart().unwrap();
        assert!(w.intact());
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn missing_components_and_untrusted_filesystems() {
        let Some(root) = tree("missing") else {
            return;
        };
        let mut w = Watches::new().unwrap();
        // A missing directory ends the walk where it would be created.
        quiet(&mut w, |w| {
            assert_eq!(w.walk(bytes(&root.join("a/nodir"))), None);
        });
        std::fs::create_dir(root.join("a/nodir")).unwrap();
        assert!(!w.intact());
        // /proc changes without events: never trusted.
        w.restart().unwrap();
        assert_eq!(w.walk(b"/proc/self"), None);
        assert!(!w.intact());
        w.restart().unwrap();
        assert!(w.intact());
        std::fs::remove_dir_all(&root).unwrap();
    }
}
