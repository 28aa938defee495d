//! What each uid's sandboxes were denied until now, kept on disk so that the
//! removal note survives a daemon restart, a package upgrade and a reboot.
//!
//! A launch from outside a sandbox applies the lists exactly and tells the
//! user how many entries denied until now are no longer denied
//! ([`crate::daemon`]). While the sandbox lives, the daemon's mirror of the
//! maps knows what was denied. A sandbox without processes is forgotten when
//! the daemon starts (and a reboot loses every sandbox), so the first launch
//! after that would find nothing held and say nothing, even if an agent had
//! emptied the user's list meanwhile. This module keeps, per uid, a record
//! of the entries the sandbox held after its last apply, in
//! [`STATE_DIR`]`/uid-<uid>` (root-owned, written atomically), and decides
//! from it how many of them the new lists no longer deny.
//!
//! # What an entry is
//!
//! The same thing the live note counts: a file key `{s_dev, i_ino, subvol}`
//! or a name key `{directory key, name}` (see [`crate::resolve::keys`]), not a list
//! line. A line names a place, and the note must also fire when the file
//! listed there was moved away (its inode key is gone from the desired set
//! while the line stays), which only the keys show. Keys are not all stable
//! across a reboot, though: inode numbers on ext4, XFS and btrfs are, but
//! `s_dev` is a device number the kernel hands out at probe or mount time
//! (dm, NVMe and anonymous devices: btrfs, tmpfs, overlayfs, NFS, FUSE). So
//! the device part is compared as recorded within the boot that wrote the
//! record (same `boot_id`), and otherwise by a stable name of the file
//! system: its type and cause from `/proc/self/mountinfo` (plus the first
//! mount point, for devices without a block device). A file system that
//! cannot be named, or whose name changed, makes its entries count as gone:
//! the error is a note too many, never one too few.
//!
//! # Size and form
//!
//! The rest of each key (inode, subvolume, name) is kept as a 64-bit
//! SipHash-2-4 digest under a random 128-bit key stored in the record: the
//! record stays small (about 20 bytes per entry, at most [`MAX_RECORD_BYTES`]
//! for a uid at the daemon's cap) and an agent, which cannot read the
//! root-only record, cannot build a listed entry whose digest equals a
//! removed one's. The text form:
//!
//! ```text
//! agent-sandbox-exec denied-record 1
//! boot <boot_id>
//! key <32 hex digits>
//! fs <s_dev> <hex of the file system's name, or ->     (index 0, 1, ...)
//! f <fs index> <16 hex digits>                          (a file key)
//! n <fs index> <16 hex digits>                          (a name key)
//! end <number of f and n lines>
//! ```
//!
//! or, when the entries would not fit, the three header lines and
//! `unknown <reason>`. Anything else is corrupt; a corrupt, foreign or
//! unknown record fails safe: the next exact apply prints a note that
//! entries may no longer be denied.

use std::collections::{HashMap, HashSet};
use std::fs;
use std::hash::Hasher;
use std::io::{self, Read, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use crate::lists::entries::{DenySet, FileKey, NameKey, is_entry_file, is_entry_name, kernel_dev};
use crate::os::{procfs, sys};

/// Largest record read or written, in bytes (a uid at the cap of 131,072
/// file keys and as many names takes about 5.5 MB).
pub const MAX_RECORD_BYTES: u64 = 16 << 20;
/// Most distinct file systems a record names; beyond, it is `unknown`.
pub const MAX_FILESYSTEMS: usize = 4096;
/// Longest file system name kept (longer ones are not named, so their
/// entries count as gone after a reboot).
const MAX_LABEL_BYTES: usize = 1024;
const MAGIC: &str = "agent-sandbox-exec denied-record 1";

/// Errors reading or writing a record.
#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    /// A system call on the record failed.
    #[error("{what}: {cause}")]
    Io {
        /// What was done, with the path.
        what: String,
        /// The error.
        cause: io::Error,
    },
}

/// One recorded file system: its `s_dev` then and its name, if it had one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordedFs {
    /// `s_dev` in kernel encoding, as of the boot that wrote the record.
    pub dev: u32,
    /// Its stable name ([`labels_from_mountinfo`]), if it was mounted.
    pub label: Option<Vec<u8>>,
}

/// A parsed record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    /// `/proc/sys/kernel/random/boot_id` of the boot that wrote it.
    pub boot: String,
    /// The SipHash key of its digests.
    pub key: [u64; 2],
    /// The file systems its entries refer to, by index.
    pub filesystems: Vec<RecordedFs>,
    /// (kind, fs index, digest) of each entry; kind `b'f'` or `b'n'`.
    pub entries: Vec<(u8, u32, u64)>,
    /// Set when the writer could not keep the entries (the reason).
    pub unknown: Option<String>,
}

/// What a uid's record says before an exact apply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Prior {
    /// No record: nothing was ever recorded for this uid.
    None,
    /// A record.
    Known(Record),
    /// A record that cannot be used (the reason, for the log).
    Unreadable(String),
}

/// How many recorded entries an exact apply of the desired set frees.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// This many recorded entries are not in the desired set.
    Gone(usize),
    /// The record cannot tell (corrupt, foreign or unknown): fail safe.
    Unknown(String),
}

/// Stable names of the mounted file systems, by `s_dev` (kernel encoding),
/// from the text of a `/proc/<pid>/mountinfo` (proc(5)): for each device
/// the first mount that shows it, named `<fstype> NUL <cause>`, plus
/// `NUL <mount point>` for devices without a block device (major 0:
/// tmpfs, btrfs, overlayfs, NFS, FUSE), whose numbers are handed out at
/// mount time and whose cause is often just the type. Fields stay as the
/// kernel escapes them. Malformed lines are skipped.
pub fn labels_from_mountinfo(text: &[u8]) -> HashMap<u32, Vec<u8>> {
    let mut out = HashMap::new();
    for m in procfs::mountinfo(text) {
        let mut label = Vec::new();
        label.extend_from_slice(m.fs_type);
        label.push(0);
        label.extend_from_slice(m.source);
        if m.major == 0 {
            label.push(0);
            label.extend_from_slice(m.mount_point);
        }
        if label.len() <= MAX_LABEL_BYTES {
            out.entry(kernel_dev(m.major, m.minor)).or_insert(label);
        }
    }
    out
}

/// The record text of `held` (the entries a sandbox holds), written in boot
/// `boot` with digest key `key`; `labels` names the file systems
/// ([`labels_from_mountinfo`]). A set that would take more than
/// [`MAX_RECORD_BYTES`] or name more than [`MAX_FILESYSTEMS`] file systems
/// gives an `unknown` record.
pub fn encode(
    held: &DenySet,
    boot: &str,
    key: [u64; 2],
    labels: &HashMap<u32, Vec<u8>>,
) -> Vec<u8> {
    // An unreadable boot id is recorded as "-", which matches no boot.
    let boot = if boot.is_empty() { "-" } else { boot };
    let mut head =
        format!("{MAGIC}\nboot {boot}\nkey {:016x}{:016x}\n", key[0], key[1]).into_bytes();
    let mut index: HashMap<u32, u32> = HashMap::new();
    let mut fs_lines = Vec::new();
    let mut body = Vec::new();
    let mut fs_of = |dev: u32, fs_lines: &mut Vec<u8>| -> u32 {
        let next = index.len() as u32;
        *index.entry(dev).or_insert_with(|| {
            let label = labels.get(&dev).map_or_else(|| "-".to_owned(), |l| hex(l));
            fs_lines.extend_from_slice(format!("fs {dev} {label}\n").as_bytes());
            next
        })
    };
    // Listed entries only (DenySet::entries): the marks on the way follow
    // from the names, and the note counts entries.
    for f in held.files().iter().filter(|f| is_entry_file(f)) {
        let i = fs_of(f.dev, &mut fs_lines);
        // Writing to a Vec cannot fail.
        let _ = writeln!(body, "f {i} {:016x}", file_digest(key, f));
    }
    for n in held.names().iter().filter(|n| is_entry_name(n)) {
        let i = fs_of(n.dir.dev, &mut fs_lines);
        let _ = writeln!(body, "n {i} {:016x}", name_digest(key, n));
    }
    body.extend_from_slice(format!("end {}\n", held.entries()).as_bytes());
    let size = head.len() + fs_lines.len() + body.len();
    if index.len() > MAX_FILESYSTEMS || size as u64 > MAX_RECORD_BYTES {
        head.extend_from_slice(
            format!(
                "unknown {} entries on {} file systems did not fit in {MAX_RECORD_BYTES} bytes\n",
                held.entries(),
                index.len()
            )
            .as_bytes(),
        );
        return head;
    }
    head.extend_from_slice(&fs_lines);
    head.extend_from_slice(&body);
    head
}

/// Parses a record's text. Every line must be as [`encode`] writes it, in
/// its order; the error names the first line that is not.
pub fn decode(text: &[u8]) -> Result<Record, String> {
    let text =
        std::str::from_utf8(text).map_err(|e| format!("not UTF-8 at byte {}", e.valid_up_to()))?;
    let body = text
        .strip_suffix('\n')
        .ok_or("truncated: no newline at the end")?;
    let mut lines = body.split('\n').enumerate().map(|(i, l)| (i + 1, l));
    let mut next = |what: &str| lines.next().ok_or(format!("truncated: no {what} line"));
    let (_, magic) = next("header")?;
    if magic != MAGIC {
        return Err(format!(
            "line 1: not a record of this daemon (expected {MAGIC:?})"
        ));
    }
    let (n, boot) = next("boot")?;
    let boot = boot
        .strip_prefix("boot ")
        .filter(|b| {
            !b.is_empty() && b.len() <= 64 && b.bytes().all(|c| c.is_ascii_hexdigit() || c == b'-')
        })
        .ok_or(format!("line {n}: bad boot line"))?
        .to_owned();
    let (n, key) = next("key")?;
    let key = key
        .strip_prefix("key ")
        .filter(|k| k.len() == 32)
        .and_then(|k| Some([hex_u64(&k[..16])?, hex_u64(&k[16..])?]))
        .ok_or(format!("line {n}: bad key line"))?;
    let mut rec = Record {
        boot,
        key,
        filesystems: Vec::new(),
        entries: Vec::new(),
        unknown: None,
    };
    for (n, line) in lines.by_ref() {
        let bad = |what: &str| format!("line {n}: {what}");
        let (tag, rest) = line.split_once(' ').ok_or_else(|| bad("no field"))?;
        match tag {
            "unknown" if rec.filesystems.is_empty() && rec.entries.is_empty() => {
                rec.unknown = Some(rest.to_owned());
                return if lines.next().is_some() {
                    Err(format!("line {}: text after the unknown line", n + 1))
                } else {
                    Ok(rec)
                };
            }
            "fs" if rec.entries.is_empty() => {
                if rec.filesystems.len() >= MAX_FILESYSTEMS {
                    return Err(bad("too many file systems"));
                }
                let (dev, label) = rest.split_once(' ').ok_or_else(|| bad("bad fs line"))?;
                let dev = dev.parse::<u32>().map_err(|_| bad("bad device number"))?;
                let label = match label {
                    "-" => None,
                    h => Some(unhex(h).ok_or_else(|| bad("bad file system name"))?),
                };
                rec.filesystems.push(RecordedFs { dev, label });
            }
            "f" | "n" => {
                let (i, d) = rest.split_once(' ').ok_or_else(|| bad("bad entry"))?;
                let i = i
                    .parse::<u32>()
                    .ok()
                    .filter(|&i| (i as usize) < rec.filesystems.len())
                    .ok_or_else(|| bad("bad file system index"))?;
                let d = Some(d)
                    .filter(|d| d.len() == 16)
                    .and_then(hex_u64)
                    .ok_or_else(|| bad("bad digest"))?;
                rec.entries.push((tag.as_bytes()[0], i, d));
            }
            "end" => {
                let count = rest.parse::<usize>().map_err(|_| bad("bad count"))?;
                if count != rec.entries.len() {
                    return Err(bad(&format!(
                        "says {count} entries, the record has {}",
                        rec.entries.len()
                    )));
                }
                return match lines.next() {
                    Some((n, _)) => Err(format!("line {n}: text after the end line")),
                    None => Ok(rec),
                };
            }
            _ => return Err(bad("unexpected line")),
        }
    }
    Err("truncated: no end line".to_owned())
}

/// How many entries of `prior` an exact apply of `desired` no longer denies.
/// `boot` is the current boot's id; `labels` names the file systems mounted
/// now ([`labels_from_mountinfo`]). Within the boot that wrote the record a
/// device is its `s_dev`; after a reboot it is its name, and a recorded file
/// system without a name, or with a name no mounted one has now, keeps none
/// of its entries. None for [`Prior::None`] (nothing recorded, nothing
/// to say).
pub fn verdict(
    prior: &Prior,
    desired: &DenySet,
    boot: &str,
    labels: &HashMap<u32, Vec<u8>>,
) -> Option<Verdict> {
    let rec = match prior {
        Prior::None => return None,
        Prior::Unreadable(why) => return Some(Verdict::Unknown(why.clone())),
        Prior::Known(r) => r,
    };
    if let Some(why) = &rec.unknown {
        return Some(Verdict::Unknown(format!("the record says: {why}")));
    }
    let same_boot = !boot.is_empty() && rec.boot == boot;
    // The recorded file system a device of the desired set is, if any.
    let mut fs_index: HashMap<u32, Option<u32>> = HashMap::new();
    let mut index_of = |dev: u32| -> Option<u32> {
        *fs_index.entry(dev).or_insert_with(|| {
            let mut found = rec.filesystems.iter().enumerate().filter(|(_, fs)| {
                if same_boot {
                    fs.dev == dev
                } else {
                    fs.label.is_some() && fs.label.as_ref() == labels.get(&dev)
                }
            });
            match (found.next(), found.next()) {
                // Two recorded file systems under one name cannot be told apart.
                (Some((i, _)), None) => Some(i as u32),
                _ => None,
            }
        })
    };
    let mut kept: HashSet<(u8, u32, u64)> = HashSet::new();
    for f in desired.files().iter().filter(|f| is_entry_file(f)) {
        if let Some(i) = index_of(f.dev) {
            kept.insert((b'f', i, file_digest(rec.key, f)));
        }
    }
    for n in desired.names().iter().filter(|n| is_entry_name(n)) {
        if let Some(i) = index_of(n.dir.dev) {
            kept.insert((b'n', i, name_digest(rec.key, n)));
        }
    }
    Some(Verdict::Gone(
        rec.entries.iter().filter(|e| !kept.contains(e)).count(),
    ))
}

/// The path of `uid`'s record under `dir`.
pub fn path_for(dir: &Path, uid: u32) -> PathBuf {
    dir.join(format!("uid-{uid}"))
}

/// Reads `uid`'s record under `dir`. A missing record is [`Prior::None`];
/// one that is not a regular root-owned file with one link and without
/// group or other write permission, is too large, or does not parse, is
/// [`Prior::Unreadable`] with the reason, as is any while a failed
/// [`store`] left its stale mark.
pub fn load(dir: &Path, uid: u32) -> Prior {
    let path = path_for(dir, uid);
    let shown = path.display().to_string();
    let unusable = |why: String| Prior::Unreadable(format!("{shown}: {why}"));
    if fs::symlink_metadata(stale_path_for(dir, uid)).is_ok() {
        return unusable(format!(
            "its last write failed ({} is there): it may lack entries denied since",
            stale_path_for(dir, uid).display()
        ));
    }
    let file = fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC | libc::O_NOCTTY)
        .open(&path);
    let mut file = match file {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Prior::None,
        Err(e) if e.raw_os_error() == Some(libc::ELOOP) => {
            return unusable("is a symbolic link".to_owned());
        }
        Err(e) => return unusable(format!("cannot open: {e}")),
    };
    let md = match file.metadata() {
        Ok(m) => m,
        Err(e) => return unusable(format!("cannot stat: {e}")),
    };
    if let Err(why) = check_owner(md.is_file(), md.uid(), md.mode(), md.nlink(), md.len()) {
        return unusable(why);
    }
    let mut text = Vec::new();
    if let Err(e) = Read::by_ref(&mut file)
        .take(MAX_RECORD_BYTES + 1)
        .read_to_end(&mut text)
    {
        return unusable(format!("cannot read: {e}"));
    }
    if text.len() as u64 > MAX_RECORD_BYTES {
        return unusable(format!("larger than {MAX_RECORD_BYTES} bytes"));
    }
    match decode(&text) {
        Ok(r) => Prior::Known(r),
        Err(why) => unusable(why),
    }
}

/// Whether a file with these attributes may be a record this daemon wrote.
fn check_owner(regular: bool, uid: u32, mode: u32, nlink: u64, len: u64) -> Result<(), String> {
    if !regular {
        return Err("not a regular file".to_owned());
    }
    if uid != 0 {
        return Err(format!("owned by uid {uid}, not root"));
    }
    if mode & 0o022 != 0 {
        return Err(format!("mode {:o} lets others write it", mode & 0o7777));
    }
    if nlink != 1 {
        return Err(format!("has {nlink} links"));
    }
    if len > MAX_RECORD_BYTES {
        return Err(format!("larger than {MAX_RECORD_BYTES} bytes"));
    }
    Ok(())
}

/// Where a failed [`store`] leaves `uid`'s last record, renamed (or an
/// empty file when there was none): while it exists, [`load`] says the
/// record cannot be used.
pub fn stale_path_for(dir: &Path, uid: u32) -> PathBuf {
    dir.join(format!("uid-{uid}.stale"))
}

/// Replaces `uid`'s record under `dir` with `text`, atomically: a
/// temporary file (0600, `O_EXCL|O_NOFOLLOW`) is written, fsync'd and
/// renamed over the record, then the directory is fsync'd, and a stale
/// mark of an earlier failure is removed. Creates `dir` (0700) if it is
/// missing (a daemon run outside its unit).
///
/// A record older than the sandbox's entries would let a forgotten
/// sandbox's incomplete scan agree with it (an agent can make the write
/// fail by filling the file system): when the write fails, the old record
/// is renamed to [`stale_path_for`] (a rename needs no free block), so
/// that [`load`] fails safe until a write succeeds.
///
/// # Errors
/// [`RecordError::Io`] naming the step.
pub fn store(dir: &Path, uid: u32, text: &[u8]) -> Result<(), RecordError> {
    let stored = replace(dir, uid, text);
    let stale = stale_path_for(dir, uid);
    match &stored {
        Ok(()) => match fs::remove_file(&stale) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => {
                return Err(RecordError::Io {
                    what: format!("remove {}", stale.display()),
                    cause: e,
                });
            }
            _ => {}
        },
        Err(_) => mark_stale(dir, uid),
    }
    stored
}

/// Marks `uid`'s record as stale after a failed write: renames it to
/// [`stale_path_for`], or makes that file empty when there is no record.
fn mark_stale(dir: &Path, uid: u32) {
    let stale = stale_path_for(dir, uid);
    match fs::rename(path_for(dir, uid), &stale) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            let _ = fs::OpenOptions::new()
                .write(true)
                .create(true)
                .mode(0o600)
                .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
                .open(&stale);
        }
        Err(e) => log::error!("cannot mark the record {} stale: {e}", stale.display()),
    }
}

/// [`store`]'s write and rename, without the stale mark.
fn replace(dir: &Path, uid: u32, text: &[u8]) -> Result<(), RecordError> {
    let io = |what: String| move |cause| RecordError::Io { what, cause };
    match fs::DirBuilder::new().mode(0o700).create(dir) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(io(format!("create {}", dir.display()))(e)),
    }
    let path = path_for(dir, uid);
    let tmp = dir.join(format!(".uid-{uid}.tmp"));
    match fs::remove_file(&tmp) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(io(format!("remove {}", tmp.display()))(e)),
    }
    let written = (|| {
        let mut f = fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(&tmp)?;
        f.write_all(text)?;
        f.sync_all()
    })();
    if let Err(e) = written {
        let _ = fs::remove_file(&tmp);
        return Err(io(format!("write {}", tmp.display()))(e));
    }
    if let Err(e) = fs::rename(&tmp, &path) {
        let _ = fs::remove_file(&tmp);
        return Err(io(format!(
            "rename {} to {}",
            tmp.display(),
            path.display()
        ))(e));
    }
    fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(io(format!("fsync {}", dir.display())))
}

/// A fresh random digest key (getrandom(2)).
///
/// # Errors
/// The getrandom error.
pub fn new_key() -> io::Result<[u64; 2]> {
    let mut b = [0u8; 16];
    sys::fill_random(&mut b)?;
    let (a, c) = b.split_at(8);
    Ok([
        u64::from_le_bytes(a.try_into().unwrap_or_default()),
        u64::from_le_bytes(c.try_into().unwrap_or_default()),
    ])
}

/// The current boot's id (`/proc/sys/kernel/random/boot_id`), or "" if it
/// cannot be read (then no record counts as written in this boot).
pub fn boot_id() -> String {
    fs::read_to_string("/proc/sys/kernel/random/boot_id")
        .map(|s| s.trim().to_owned())
        .unwrap_or_default()
}

/// The digest of a file key: SipHash-2-4 of `f`, its inode number and its
/// subvolume (little-endian), fed in pieces (no buffer per entry).
fn file_digest(key: [u64; 2], f: &FileKey) -> u64 {
    let mut h = siphasher::sip::SipHasher24::new_with_keys(key[0], key[1]);
    h.write(b"f");
    h.write(&f.ino.to_le_bytes());
    h.write(&f.subvol.to_le_bytes());
    h.finish()
}

/// The digest of a name key: SipHash-2-4 of `n`, the directory's inode
/// number and subvolume (little-endian) and the name.
fn name_digest(key: [u64; 2], n: &NameKey) -> u64 {
    let mut h = siphasher::sip::SipHasher24::new_with_keys(key[0], key[1]);
    h.write(b"n");
    h.write(&n.dir.ino.to_le_bytes());
    h.write(&n.dir.subvol.to_le_bytes());
    h.write(&n.name);
    h.finish()
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn unhex(s: &str) -> Option<Vec<u8>> {
    if s.is_empty() || !s.len().is_multiple_of(2) || s.len() > 2 * MAX_LABEL_BYTES {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
        .collect()
}

fn hex_u64(s: &str) -> Option<u64> {
    if s.bytes().all(|c| c.is_ascii_hexdigit()) {
        u64::from_str_radix(s, 16).ok()
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lists::entries::KIND_OPEN;

    /// SipHash-2-4 (Aumasson and Bernstein, "SipHash: a fast short-input PRF",
    /// 2012) of `msg` under the key `k` (k0, k1 as little-endian halves of the
    /// 16 key bytes), from the siphasher crate: std's hasher may change between
    /// Rust releases, and a record must read the same after an upgrade.
    fn siphash24(k: [u64; 2], msg: &[u8]) -> u64 {
        let mut h = siphasher::sip::SipHasher24::new_with_keys(k[0], k[1]);
        h.write(msg);
        h.finish()
    }

    #[test]
    fn digests_are_siphash_of_the_key_bytes() {
        let key = [0x0706_0504_0302_0100, 0x0f0e_0d0c_0b0a_0908];
        let f = FileKey {
            dev: 7,
            ino: 0x1122,
            subvol: 5,
            kind: KIND_OPEN,
        };
        let mut m = b"f".to_vec();
        m.extend_from_slice(&f.ino.to_le_bytes());
        m.extend_from_slice(&f.subvol.to_le_bytes());
        assert_eq!(file_digest(key, &f), siphash24(key, &m));
        let n = NameKey {
            dir: f,
            name: b"id_ed25519".to_vec(),
        };
        let mut m = b"n".to_vec();
        m.extend_from_slice(&f.ino.to_le_bytes());
        m.extend_from_slice(&f.subvol.to_le_bytes());
        m.extend_from_slice(b"id_ed25519");
        assert_eq!(name_digest(key, &n), siphash24(key, &m));
    }

    fn fk(dev: u32, ino: u64) -> FileKey {
        FileKey {
            dev,
            ino,
            subvol: 0,
            kind: KIND_OPEN,
        }
    }

    fn nk(dev: u32, dir: u64, name: &str) -> NameKey {
        NameKey {
            dir: fk(dev, dir),
            name: name.as_bytes().to_vec(),
        }
    }

    const BOOT: &str = "0b5e9d52-7a3c-4c1b-9d1e-5f0c2b3a4d5e";
    const OTHER_BOOT: &str = "11111111-2222-3333-4444-555555555555";
    const KEY: [u64; 2] = [0x0706_0504_0302_0100, 0x0f0e_0d0c_0b0a_0908];
    const VDA: u32 = (254 << 20) | 1;
    const TMP: u32 = 40;

    fn labels(pairs: &[(u32, &str)]) -> HashMap<u32, Vec<u8>> {
        pairs
            .iter()
            .map(|(d, l)| (*d, l.as_bytes().to_vec()))
            .collect()
    }

    fn secrets() -> DenySet {
        DenySet::new(
            vec![fk(VDA, 100), fk(VDA, 200), fk(TMP, 7)],
            vec![nk(VDA, 10, "id_ed25519"), nk(VDA, 10, ".netrc")],
        )
    }

    fn mounted() -> HashMap<u32, Vec<u8>> {
        labels(&[(VDA, "ext4\0/dev/vda1"), (TMP, "tmpfs\0tmpfs\0/tmp")])
    }

    fn prior_of(set: &DenySet, boot: &str, l: &HashMap<u32, Vec<u8>>) -> Prior {
        Prior::Known(decode(&encode(set, boot, KEY, l)).expect("own record parses"))
    }

    #[test]
    fn siphash_reference_vector() {
        // The SipHash paper, appendix A: key 00..0f, message 00..0e.
        let msg: Vec<u8> = (0u8..15).collect();
        assert_eq!(siphash24(KEY, &msg), 0xa129_ca61_49be_45e5);
        // The first entry of the reference implementation's vectors.h (empty message).
        assert_eq!(siphash24(KEY, b""), 0x726f_db47_dd0e_0e31);
    }

    #[test]
    fn read_only_and_audit_keys_round_trip() {
        use crate::lists::entries::{KIND_AUDIT, KIND_PATH, KIND_RO, KIND_RO_DIR_OWN};
        let k = |ino, kind| FileKey {
            dev: VDA,
            ino,
            subvol: 0,
            kind,
        };
        let set = DenySet::new(
            vec![
                k(1, KIND_OPEN),
                k(2, KIND_RO),
                k(3, KIND_AUDIT),
                k(4, KIND_PATH),
            ],
            vec![
                NameKey {
                    dir: k(5, KIND_RO_DIR_OWN),
                    name: b"agent-sandbox-exec".to_vec(),
                },
                NameKey {
                    dir: k(5, KIND_AUDIT),
                    name: b".env".to_vec(),
                },
            ],
        );
        let rec = decode(&encode(&set, BOOT, KEY, &mounted())).expect("parses");
        assert_eq!(
            rec.entries.len(),
            set.entries(),
            "the read-only entries are recorded"
        );
        assert_eq!(rec.entries.len(), 3);
    }

    #[test]
    fn round_trip() {
        let text = encode(&secrets(), BOOT, KEY, &mounted());
        let rec = decode(&text).expect("parses");
        assert_eq!(rec.boot, BOOT);
        assert_eq!(rec.key, KEY);
        assert_eq!(rec.entries.len(), 5);
        assert_eq!(rec.filesystems.len(), 2);
        assert_eq!(rec.unknown, None);
        let vda = rec
            .filesystems
            .iter()
            .find(|f| f.dev == VDA)
            .expect("the disk");
        assert_eq!(vda.label.as_deref(), Some(&b"ext4\0/dev/vda1"[..]));
    }

    #[test]
    fn nothing_recorded_says_nothing() {
        assert_eq!(verdict(&Prior::None, &secrets(), BOOT, &mounted()), None);
    }

    #[test]
    fn same_set_frees_nothing() {
        let p = prior_of(&secrets(), BOOT, &mounted());
        assert_eq!(
            verdict(&p, &secrets(), BOOT, &mounted()),
            Some(Verdict::Gone(0))
        );
    }

    #[test]
    fn emptied_list_frees_every_entry() {
        let p = prior_of(&secrets(), BOOT, &mounted());
        let v = verdict(&p, &DenySet::default(), BOOT, &mounted());
        assert_eq!(v, Some(Verdict::Gone(5)));
        // After a reboot too.
        let v = verdict(&p, &DenySet::default(), OTHER_BOOT, &mounted());
        assert_eq!(v, Some(Verdict::Gone(5)));
    }

    #[test]
    fn a_file_moved_away_counts_though_its_line_stays() {
        let p = prior_of(&secrets(), BOOT, &mounted());
        // Same names, but inode 200 is no longer at its listed path.
        let now = DenySet::new(
            vec![fk(VDA, 100), fk(TMP, 7)],
            vec![nk(VDA, 10, "id_ed25519"), nk(VDA, 10, ".netrc")],
        );
        assert_eq!(verdict(&p, &now, BOOT, &mounted()), Some(Verdict::Gone(1)));
    }

    #[test]
    fn added_entries_do_not_hide_removed_ones() {
        let p = prior_of(&secrets(), BOOT, &mounted());
        let now = DenySet::new(
            vec![fk(VDA, 100), fk(VDA, 200), fk(VDA, 300), fk(TMP, 7)],
            vec![nk(VDA, 10, "id_ed25519"), nk(VDA, 11, ".netrc")],
        );
        assert_eq!(verdict(&p, &now, BOOT, &mounted()), Some(Verdict::Gone(1)));
    }

    #[test]
    fn same_inode_on_another_device_is_another_entry() {
        let p = prior_of(&secrets(), BOOT, &mounted());
        let other = (8 << 20) | 17;
        let l = labels(&[
            (VDA, "ext4\0/dev/vda1"),
            (TMP, "tmpfs\0tmpfs\0/tmp"),
            (other, "ext4\0/dev/sdb1"),
        ]);
        let now = DenySet::new(
            vec![fk(other, 100), fk(VDA, 200), fk(TMP, 7)],
            vec![nk(VDA, 10, "id_ed25519"), nk(VDA, 10, ".netrc")],
        );
        assert_eq!(verdict(&p, &now, BOOT, &l), Some(Verdict::Gone(1)));
        assert_eq!(verdict(&p, &now, OTHER_BOOT, &l), Some(Verdict::Gone(1)));
    }

    #[test]
    fn after_a_reboot_devices_are_matched_by_name() {
        let p = prior_of(&secrets(), BOOT, &mounted());
        // The next boot numbered the disk and the tmpfs differently.
        let (vda2, tmp2) = ((254 << 20) | 3, 41);
        let l = labels(&[(vda2, "ext4\0/dev/vda1"), (tmp2, "tmpfs\0tmpfs\0/tmp")]);
        let now = DenySet::new(
            vec![fk(vda2, 100), fk(vda2, 200), fk(tmp2, 7)],
            vec![nk(vda2, 10, "id_ed25519"), nk(vda2, 10, ".netrc")],
        );
        assert_eq!(verdict(&p, &now, OTHER_BOOT, &l), Some(Verdict::Gone(0)));
        // Within the boot that wrote the record, the number is what counts.
        assert_eq!(verdict(&p, &now, BOOT, &l), Some(Verdict::Gone(5)));
    }

    #[test]
    fn after_a_reboot_an_unnamed_or_renamed_file_system_keeps_nothing() {
        // The tmpfs was not in the mount table when the record was written.
        let l = labels(&[(VDA, "ext4\0/dev/vda1")]);
        let p = prior_of(&secrets(), BOOT, &l);
        assert_eq!(
            verdict(&p, &secrets(), OTHER_BOOT, &mounted()),
            Some(Verdict::Gone(1))
        );
        // The disk now shows under another cause.
        let l = labels(&[(VDA, "ext4\0/dev/vdb1"), (TMP, "tmpfs\0tmpfs\0/tmp")]);
        let p = prior_of(&secrets(), BOOT, &mounted());
        assert_eq!(
            verdict(&p, &secrets(), OTHER_BOOT, &l),
            Some(Verdict::Gone(4))
        );
    }

    #[test]
    fn two_recorded_file_systems_under_one_name_match_nothing() {
        let a = 50;
        let l = labels(&[(TMP, "tmpfs\0tmpfs\0/tmp"), (a, "tmpfs\0tmpfs\0/tmp")]);
        let set = DenySet::new(vec![fk(TMP, 7), fk(a, 8)], Vec::new());
        let p = prior_of(&set, BOOT, &l);
        assert_eq!(verdict(&p, &set, OTHER_BOOT, &l), Some(Verdict::Gone(2)));
        assert_eq!(verdict(&p, &set, BOOT, &l), Some(Verdict::Gone(0)));
    }

    #[test]
    fn no_boot_id_never_counts_as_the_same_boot() {
        let (vda2, tmp2) = ((254 << 20) | 3, 41);
        let l = labels(&[(vda2, "ext4\0/dev/vda1"), (tmp2, "tmpfs\0tmpfs\0/tmp")]);
        let now = DenySet::new(vec![fk(vda2, 100)], Vec::new());
        // Written without one: devices are matched by name, even in the same boot.
        let p = prior_of(&secrets(), "", &mounted());
        assert_eq!(verdict(&p, &now, "", &l), Some(Verdict::Gone(4)));
        // Read without one.
        let p = prior_of(&secrets(), BOOT, &mounted());
        assert_eq!(verdict(&p, &now, "", &l), Some(Verdict::Gone(4)));
    }

    #[test]
    fn unreadable_and_unknown_records_fail_safe() {
        let p = Prior::Unreadable("x: line 3: bad key line".to_owned());
        assert!(matches!(
            verdict(&p, &secrets(), BOOT, &mounted()),
            Some(Verdict::Unknown(w)) if w.contains("bad key line")
        ));
        let mut rec = decode(&encode(&secrets(), BOOT, KEY, &mounted())).expect("parses");
        rec.unknown = Some("too large".to_owned());
        assert!(matches!(
            verdict(&Prior::Known(rec), &secrets(), BOOT, &mounted()),
            Some(Verdict::Unknown(w)) if w.contains("too large")
        ));
    }

    #[test]
    fn corrupt_records_are_refused_with_the_line() {
        let good = String::from_utf8(encode(&secrets(), BOOT, KEY, &mounted())).expect("text");
        let cases: Vec<(String, &str)> = vec![
            (String::new(), "truncated"),
            ("garbage\n".to_owned(), "line 1"),
            (good.replace("end 5\n", "end 4\n"), "says 4 entries"),
            (good.replace("end 5\n", ""), "no end line"),
            (good.trim_end().to_owned(), "no newline"),
            (good.replace("key ", "key x"), "bad key line"),
            (good.replacen("f 0 ", "f 9 ", 1), "bad file system index"),
            (good.replacen("\nn 1 ", "\nn 1 zz", 1), "bad digest"),
            (good.replacen("\nfs ", "\nfs x", 1), "bad device number"),
            (
                format!("{good}f 0 0000000000000000\n"),
                "text after the end",
            ),
            (good.replacen("boot ", "boot /", 1), "bad boot line"),
            (good.replacen("f 0", "g 0", 1), "unexpected line"),
        ];
        for (text, want) in cases {
            match decode(text.as_bytes()) {
                Err(e) => assert!(e.contains(want), "{want:?} not in {e:?}"),
                Ok(_) => panic!("accepted a record that should say {want:?}"),
            }
        }
        assert!(decode(&[0xff, b'\n']).is_err_and(|e| e.contains("UTF-8")));
    }

    #[test]
    fn an_oversized_set_gives_an_unknown_record() {
        let files: Vec<FileKey> = (0..5000u32).map(|d| fk(d + 1, 1)).collect();
        let text = encode(&DenySet::new(files, Vec::new()), BOOT, KEY, &HashMap::new());
        let rec = decode(&text).expect("parses");
        assert!(rec.unknown.is_some_and(|w| w.contains("5000 entries")));
    }

    #[test]
    fn mountinfo_labels() {
        let text = b"22 1 254:1 / / rw,relatime shared:1 - ext4 /dev/vda1 rw\n\
            25 22 0:40 / /tmp rw shared:5 - tmpfs tmpfs rw\n\
            26 22 0:41 / /dev/shm rw - tmpfs tmpfs rw\n\
            27 22 254:1 /home /srv rw - ext4 /dev/vda1 rw\n\
            28 22 0:42 /@home /home rw shared:9 master:2 - btrfs /dev/vdb rw\n\
            bad line\n\
            29 22 x:y / /x rw - tmpfs tmpfs rw\n";
        let l = labels_from_mountinfo(text);
        assert_eq!(l.len(), 4);
        assert_eq!(l[&kernel_dev(254, 1)], b"ext4\0/dev/vda1");
        assert_eq!(l[&40], b"tmpfs\0tmpfs\0/tmp");
        assert_eq!(l[&41], b"tmpfs\0tmpfs\0/dev/shm");
        assert_eq!(l[&42], b"btrfs\0/dev/vdb\0/home");
    }

    #[test]
    fn owner_checks() {
        assert!(check_owner(true, 0, 0o100600, 1, 10).is_ok());
        assert!(check_owner(false, 0, 0o600, 1, 10).is_err_and(|e| e.contains("regular")));
        assert!(check_owner(true, 1000, 0o600, 1, 10).is_err_and(|e| e.contains("uid 1000")));
        assert!(check_owner(true, 0, 0o620, 1, 10).is_err_and(|e| e.contains("620")));
        assert!(check_owner(true, 0, 0o600, 2, 10).is_err_and(|e| e.contains("2 links")));
        assert!(check_owner(true, 0, 0o600, 1, MAX_RECORD_BYTES + 1).is_err());
    }

    #[test]
    fn store_then_load() {
        let dir = std::env::temp_dir().join(format!("asx-record-test-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        assert_eq!(load(&dir, 1000), Prior::None);
        let text = encode(&secrets(), BOOT, KEY, &mounted());
        store(&dir, 1000, &text).expect("store");
        let md = fs::metadata(path_for(&dir, 1000)).expect("stat");
        assert_eq!(md.mode() & 0o777, 0o600);
        assert!(!dir.join(".uid-1000.tmp").exists());
        let want = decode(&text).expect("parses");
        let root = nix::unistd::geteuid().is_root();
        match load(&dir, 1000) {
            Prior::Known(r) => assert_eq!(r, want),
            Prior::Unreadable(w) if !root => assert!(w.contains("not root"), "{w}"),
            other => panic!("unexpected {other:?}"),
        }
        // A symlink in its place is refused, not followed.
        let link_uid = 1001;
        std::os::unix::fs::symlink(path_for(&dir, 1000), path_for(&dir, link_uid))
            .expect("symlink");
        assert!(
            matches!(load(&dir, link_uid), Prior::Unreadable(w) if w.contains("symbolic link"))
        );
        // A failed write marks the record stale until a write succeeds.
        mark_stale(&dir, 1000);
        assert!(!path_for(&dir, 1000).exists());
        assert!(
            matches!(load(&dir, 1000), Prior::Unreadable(w) if w.contains("last write failed"))
        );
        store(&dir, 1000, &text).expect("store");
        assert!(!stale_path_for(&dir, 1000).exists());
        assert!(
            !matches!(load(&dir, 1000), Prior::Unreadable(w) if w.contains("last write failed"))
        );
        // With no record at all, the mark is an empty file.
        mark_stale(&dir, 1003);
        assert!(
            matches!(load(&dir, 1003), Prior::Unreadable(w) if w.contains("last write failed"))
        );
        // A torn or foreign file is refused with the reason.
        fs::write(
            path_for(&dir, 1002),
            b"agent-sandbox-exec denied-record 1\nboot x",
        )
        .expect("write");
        if root {
            assert!(matches!(load(&dir, 1002), Prior::Unreadable(w) if w.contains("no newline")));
        }
        let _ = fs::remove_dir_all(&dir);
    }
}
