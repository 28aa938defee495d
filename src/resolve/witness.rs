//! The seam between key derivation and answer reuse: what
//! [`crate::resolve::keys::KeyContext`] tells, before it reads them, of the
//! directories it reads and the single-link files a scan finds
//! ([`Witness`]). The resolver's answer reuse watches them
//! ([`crate::resolve::watch::Watches`] is a witness); a derivation whose
//! answer is not kept (`--check`, the canary) tells [`NoWitness`].

use std::io;
use std::os::fd::OwnedFd;

/// Where a lookup of a directory ended: its inode number and the `st_dev`
/// statx reports for it (major, minor).
pub type WalkEnd = (u64, u32, u32);

/// What key derivation tells, before it reads them, of the directories it
/// reads and the single-link files a scan finds: answer reuse watches them,
/// so that a change after the read is seen and one before it is read. The
/// keys found do not depend on the witness, but for a scanned file's link
/// count, looked up again once it is watched.
pub trait Witness {
    /// Before directory `path` (or a listed path through a symlink in its
    /// last component) is looked up: look it up first, component by
    /// component, and watch every directory on the way. Returns the
    /// directory that lookup ended in, if any.
    fn before_lookup(&mut self, path: &[u8]) -> Option<WalkEnd>;
    /// What was seen cannot be trusted to be watched (a lookup ended
    /// elsewhere than [`Witness::before_lookup`] said, or a scan could not
    /// watch what it read): give up on the current resolution.
    fn distrust(&mut self);
    /// Whether nothing was distrusted since the resolution began.
    fn trusting(&self) -> bool;
    /// Before a scan reads the names in directory `dir`.
    ///
    /// # Errors
    /// Why it cannot be watched; the caller distrusts.
    fn before_reading(&mut self, dir: &OwnedFd) -> io::Result<()>;
    /// A scan found `name` in `dir`, of statx mode `mode`, with `nlink`
    /// links, on device `dev` (major, minor): returns its link count, looked
    /// up again if it is watched now.
    ///
    /// # Errors
    /// Why it cannot be watched (`ENOENT`: gone meanwhile); the caller
    /// skips the name on `ENOENT`, distrusts on any other.
    fn scanned_file(
        &mut self,
        dir: &OwnedFd,
        name: &[u8],
        mode: u32,
        nlink: u32,
        dev: (u32, u32),
    ) -> io::Result<u32>;
    /// A directory entry's scan begins: what [`Witness::scan_changed`]
    /// looks at is what the scan reads from now on.
    fn scan_begins(&mut self);
    /// Whether something the scan read changed since it began, as far as
    /// watched (a name made, removed or moved in a directory it read, the
    /// links of a file it watched): a scan that ends with a change may have
    /// missed a name that moved while its directory was read. False when
    /// nothing is watched.
    fn scan_changed(&mut self) -> bool;
}

/// The witness of a derivation nobody reuses: watches nothing, trusts
/// nothing.
pub struct NoWitness;

impl Witness for NoWitness {
    fn before_lookup(&mut self, _path: &[u8]) -> Option<WalkEnd> {
        None
    }
    fn distrust(&mut self) {}
    fn trusting(&self) -> bool {
        false
    }
    fn before_reading(&mut self, _dir: &OwnedFd) -> io::Result<()> {
        Ok(())
    }
    fn scanned_file(
        &mut self,
        _dir: &OwnedFd,
        _name: &[u8],
        _mode: u32,
        nlink: u32,
        _dev: (u32, u32),
    ) -> io::Result<u32> {
        Ok(nlink)
    }
    fn scan_begins(&mut self) {}
    fn scan_changed(&mut self) -> bool {
        false
    }
}

/// A witness that may be missing (inotify unavailable): without one, as
/// [`NoWitness`].
impl<W: Witness> Witness for Option<W> {
    fn before_lookup(&mut self, path: &[u8]) -> Option<WalkEnd> {
        self.as_mut()?.before_lookup(path)
    }
    fn distrust(&mut self) {
        if let Some(w) = self.as_mut() {
            w.distrust();
        }
    }
    fn trusting(&self) -> bool {
        self.as_ref().is_some_and(W::trusting)
    }
    fn before_reading(&mut self, dir: &OwnedFd) -> io::Result<()> {
        self.as_mut().map_or(Ok(()), |w| w.before_reading(dir))
    }
    fn scanned_file(
        &mut self,
        dir: &OwnedFd,
        name: &[u8],
        mode: u32,
        nlink: u32,
        dev: (u32, u32),
    ) -> io::Result<u32> {
        self.as_mut()
            .map_or(Ok(nlink), |w| w.scanned_file(dir, name, mode, nlink, dev))
    }
    fn scan_begins(&mut self) {
        if let Some(w) = self.as_mut() {
            w.scan_begins();
        }
    }
    fn scan_changed(&mut self) -> bool {
        self.as_mut().is_some_and(W::scan_changed)
    }
}
