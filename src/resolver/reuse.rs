//! Answer reuse: whether a resolver's last answer still holds, so that it is
//! sent again instead of resolving every listed path anew. It does when (1)
//! the lists and the home directory are byte for byte the same (the
//! resolver compares them), (2) no mount or unmount happened in its mount
//! namespace ([`KeyContext::renew`]) and (3) the watches on everything the
//! last full resolution read are intact: no event arrived on any, and
//! every directory it read got one (`crate::resolve::watch` tells how and
//! why).
//!
//! [`Reuse`] owns the watches. Key derivation tells it what it reads before
//! it reads it (it is the [`Witness`] of [`KeyContext::resolve`] and
//! [`KeyContext::resolve_dir`]); between requests, the first change makes
//! it stop watching ([`Reuse::stop_watching_on_change`]).

use std::io;
use std::os::fd::{AsFd, BorrowedFd};

use nix::errno::Errno;
use nix::poll::{PollFd, PollFlags, PollTimeout, poll};

use crate::resolve::keys::KeyContext;
use crate::resolve::watch::Watches;
#[cfg(doc)]
use crate::resolve::witness::Witness;

/// The watches on what a resolver's last full resolution read.
pub(crate) struct Reuse {
    /// None when inotify is not available (then nothing is ever known
    /// unchanged).
    watches: Option<Watches>,
}

impl Reuse {
    /// A new inotify instance, without watches (none when it cannot be
    /// made: `EMFILE`, the user's `max_user_instances` reached).
    pub(crate) fn new() -> Reuse {
        Reuse {
            watches: Watches::new().ok(),
        }
    }

    /// Prepares `keys` for a new resolution ([`KeyContext::renew`]) and
    /// returns whether everything the previous resolution read is known
    /// unchanged: no mount change, and its watches intact. Then resolving
    /// the same paths again would find the same keys.
    ///
    /// # Errors
    /// [`KeyContext::renew`]'s.
    pub(crate) fn renew(&self, keys: &mut KeyContext) -> io::Result<bool> {
        Ok(!keys.renew()? && self.settled())
    }

    /// Starts watching anew, for a resolution of every path: the watches of
    /// the previous one are removed. Without inotify (or when removing
    /// fails), nothing is watched and [`Reuse::settled`] stays false.
    pub(crate) fn watch_anew(&mut self) {
        if let Some(w) = self.watches.as_mut()
            && w.restart().is_err()
        {
            self.watches = None;
        }
    }

    /// Closes the directories the watches keep open between lookups: call
    /// when a resolution ends, as [`KeyContext::forget_dirs`] (an open
    /// directory keeps its mount busy). The watches stay.
    pub(crate) fn forget_dirs(&mut self) {
        if let Some(w) = self.watches.as_mut() {
            w.forget_dirs();
        }
    }

    /// Waits until `sock` is readable; if a watched directory changes
    /// meanwhile, removes the watches and discards the events (the next
    /// resolution will be a full one) and goes on waiting.
    ///
    /// # Errors
    /// poll(2)'s, other than `EINTR`.
    pub(crate) fn stop_watching_on_change(&mut self, sock: BorrowedFd<'_>) -> io::Result<()> {
        loop {
            let Some(w) = self.watches.as_mut().filter(|w| w.intact()) else {
                return Ok(());
            };
            let mut fds = [
                PollFd::new(sock, PollFlags::POLLIN),
                PollFd::new(w.as_fd(), PollFlags::POLLIN),
            ];
            match poll(&mut fds, PollTimeout::NONE) {
                Ok(_) => {}
                Err(Errno::EINTR) => continue,
                Err(e) => return Err(e.into()),
            }
            let (sock_ready, changed) = (ready(&fds[0]), ready(&fds[1]));
            if sock_ready {
                return Ok(());
            }
            if changed {
                w.stop()?;
            }
        }
    }

    /// Removes the watches of the current resolution, which will not be
    /// reused (a fatal problem, or the lists cannot be compared).
    pub(crate) fn drop_watches(&mut self) {
        if let Some(w) = self.watches.as_mut() {
            w.give_up();
        }
    }

    /// The witness key derivation tells what it reads: the watches, if any
    /// (`Option<Watches>` is a [`Witness`] that does nothing when empty).
    pub(crate) fn witness(&mut self) -> &mut Option<Watches> {
        &mut self.watches
    }

    /// Whether every directory read since [`Reuse::watch_anew`] (or since
    /// this was made) is watched and none changed.
    pub(crate) fn settled(&self) -> bool {
        self.watches.as_ref().is_some_and(Watches::intact)
    }
}

/// Whether poll(2) returned any event for `fd` (a bit nix does not name
/// counts too).
fn ready(fd: &PollFd<'_>) -> bool {
    fd.revents().is_none_or(|r| !r.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lists::entries::KIND_DIR_USER;
    use crate::os::sys::fs_type;
    use crate::resolve::keys::{DirScan, LastComponent, Listing};
    use std::os::fd::OwnedFd;
    use std::path::Path;

    /// Whether the temporary directory is on a filesystem whose changes
    /// inotify sees (said on stderr if not: the test is skipped).
    fn local_tmp(root: &Path) -> bool {
        let probe = OwnedFd::from(std::fs::File::open(root).unwrap());
        if crate::resolve::watch::LOCAL_FILESYSTEMS.contains(&fs_type(&probe).unwrap()) {
            return true;
        }
        eprintln!("skipped: the temporary directory is not on a local filesystem here");
        false
    }

    /// Resolves directory entry `e` anew (as a resolver's full resolution
    /// does) until no event arrived meanwhile; its scan.
    fn scan_quietly(k: &mut KeyContext, r: &mut Reuse, e: &Path) -> DirScan {
        for _ in 0..200 {
            r.renew(k).unwrap();
            r.watch_anew();
            let mut l = Listing::default();
            let scan = k
                .resolve_dir(e, KIND_DIR_USER, Some(100), &mut l, r.witness())
                .unwrap();
            k.take_marks();
            k.forget_dirs();
            r.forget_dirs();
            if r.settled() {
                return scan;
            }
        }
        panic!("an event after every one of 200 scans");
    }

    #[test]
    fn a_scan_is_reused_until_what_it_marks_may_change() {
        let root = std::env::temp_dir().join(format!("asx-scan-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let (e, out) = (root.join("e"), root.join("out"));
        std::fs::create_dir_all(e.join("sub")).unwrap();
        std::fs::create_dir_all(out.join("d")).unwrap();
        if !local_tmp(&root) {
            std::fs::remove_dir_all(&root).unwrap();
            return;
        }
        std::fs::write(e.join("f"), b"").unwrap();
        std::fs::write(e.join("sub/g"), b"").unwrap();
        std::fs::write(e.join("m"), b"").unwrap();
        std::fs::hard_link(e.join("m"), out.join("m")).unwrap();
        let mut k = KeyContext::new().unwrap();
        let mut r = Reuse::new();
        let scan = scan_quietly(&mut k, &mut r, &e);
        assert_eq!((scan.marked, scan.unwatched), (1, None));
        // Reading and listing change nothing.
        std::fs::read(e.join("sub/g")).unwrap();
        std::fs::read_dir(e.join("sub")).unwrap().for_each(drop);
        assert!(r.settled());
        // The outside name of a marked file removed: no event, and the last
        // answer, which still marks it, is the stricter one.
        std::fs::remove_file(out.join("m")).unwrap();
        assert!(r.settled());
        // A single-link file deep below linked from outside.
        std::fs::hard_link(e.join("sub/g"), out.join("g")).unwrap();
        assert!(!r.settled());
        assert_eq!(
            scan_quietly(&mut k, &mut r, &e).marked,
            1,
            "sub/g, not m (one link now)"
        );
        // A new directory with a file linked from outside.
        std::fs::create_dir(e.join("new")).unwrap();
        std::fs::write(e.join("new/h"), b"").unwrap();
        std::fs::hard_link(e.join("new/h"), out.join("h")).unwrap();
        assert!(!r.settled());
        assert_eq!(scan_quietly(&mut k, &mut r, &e).marked, 2);
        // A directory holding such a file moved in.
        std::fs::write(out.join("d/x"), b"").unwrap();
        std::fs::hard_link(out.join("d/x"), out.join("x")).unwrap();
        let _ = scan_quietly(&mut k, &mut r, &e);
        std::fs::rename(out.join("d"), e.join("sub/d")).unwrap();
        assert!(!r.settled());
        assert_eq!(scan_quietly(&mut k, &mut r, &e).marked, 3);
        // A directory moved out, and the entry itself renamed.
        std::fs::rename(e.join("sub/d"), out.join("d")).unwrap();
        assert!(!r.settled());
        assert_eq!(scan_quietly(&mut k, &mut r, &e).marked, 2);
        std::fs::rename(&e, root.join("e2")).unwrap();
        assert!(!r.settled());
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn a_directory_replaced_between_resolutions_is_not_reused() {
        let dir = std::env::temp_dir().join(format!("asx-reuse-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        if !local_tmp(&dir) {
            std::fs::remove_dir_all(&dir).unwrap();
            return;
        }
        let file = dir.join("f");
        std::fs::write(&file, b"x").unwrap();
        let mut k = KeyContext::new().unwrap();
        let mut r = Reuse::new();
        let mut settled = false;
        for _ in 0..200 {
            r.renew(&mut k).unwrap();
            r.watch_anew();
            let mut l = Listing::default();
            k.resolve(&file, LastComponent::NoFollow, &mut l, r.witness())
                .unwrap();
            k.forget_dirs();
            r.forget_dirs();
            if r.settled() {
                settled = true;
                break;
            }
        }
        assert!(settled, "an event after every one of 200 resolutions");
        std::fs::rename(&dir, dir.with_extension("old")).unwrap();
        std::fs::create_dir_all(&dir).unwrap();
        assert!(
            !r.renew(&mut k).unwrap(),
            "the directory's rename was watched"
        );
        std::fs::remove_dir_all(&dir).unwrap();
        std::fs::remove_dir_all(dir.with_extension("old")).unwrap();
    }
}
