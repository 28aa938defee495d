//! From a path to the {s_dev, i_ino} pair the LSM hook sees for that file.
//!
//! The hook reads `file->f_inode->i_sb->s_dev` and `->i_ino`. Userspace must
//! produce the same numbers:
//! - `s_dev` uses the kernel's internal encoding `MAJOR << 20 | MINOR`
//!   (include/linux/kdev_t.h, MINORBITS = 20), not glibc's `st_dev` encoding.
//!   The two agree only for small numbers, so we never reuse `st_dev` bits.
//! - `statx()` reports, on btrfs, a per-subvolume anonymous device instead of
//!   the superblock's `s_dev`. The mount's major:minor in /proc/self/mountinfo
//!   (found through `STATX_MNT_ID`) is the superblock's `s_dev` on every
//!   filesystem, so that is what we use; the statx device is only a fallback
//!   for kernels before 5.8 that lack `STATX_MNT_ID`.

use std::collections::HashMap;
use std::ffi::CString;
use std::fmt;
use std::io;
use std::mem::MaybeUninit;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// The file part of a deny key: what the hook reads from the opened inode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FileKey {
    /// `i_sb->s_dev` in kernel encoding (see [`kernel_dev`]).
    pub dev: u32,
    /// `i_ino`.
    pub ino: u64,
}

/// Encodes a device number as the kernel stores it in `s_dev`:
/// `MAJOR << 20 | MINOR` (include/linux/kdev_t.h: MINORBITS = 20, MKDEV).
/// Majors above 4095 or minors above 2^20-1 cannot occur in `s_dev`; they are
/// masked like `MKDEV` would.
pub fn kernel_dev(major: u32, minor: u32) -> u32 {
    ((major & 0xfff) << 20) | (minor & 0xf_ffff)
}

/// Mount id → device (major, minor) of the mounted superblock, from
/// /proc/self/mountinfo (Documentation/filesystems/proc.rst, "3.5 mountinfo").
#[derive(Debug, Default, Clone)]
pub struct MountTable {
    by_id: HashMap<u64, (u32, u32)>,
}

impl MountTable {
    /// Reads /proc/self/mountinfo of the calling process's mount namespace.
    ///
    /// # Errors
    /// The read error of /proc/self/mountinfo.
    pub fn read() -> io::Result<MountTable> {
        Ok(MountTable::parse(&std::fs::read("/proc/self/mountinfo")?))
    }

    /// Parses mountinfo text; lines that do not parse are ignored.
    pub fn parse(text: &[u8]) -> MountTable {
        let mut by_id = HashMap::new();
        for line in text.split(|&b| b == b'\n') {
            if let Some((id, dev)) = parse_mountinfo_ids(line) {
                by_id.insert(id, dev);
            }
        }
        MountTable { by_id }
    }

    /// The (major, minor) of mount `mnt_id`, if known.
    pub fn device(&self, mnt_id: u64) -> Option<(u32, u32)> {
        self.by_id.get(&mnt_id).copied()
    }
}

/// Fields 1 (mount id) and 3 (major:minor) of one mountinfo line.
fn parse_mountinfo_ids(line: &[u8]) -> Option<(u64, (u32, u32))> {
    let mut fields = std::str::from_utf8(line_prefix(line)?).ok()?.split(' ');
    let id = fields.next()?.parse().ok()?;
    let _parent = fields.next()?;
    let (major, minor) = fields.next()?.split_once(':')?;
    Some((id, (major.parse().ok()?, minor.parse().ok()?)))
}

/// The first three space-separated fields of a mountinfo line (always ASCII).
fn line_prefix(line: &[u8]) -> Option<&[u8]> {
    let mut spaces = 0;
    for (i, &b) in line.iter().enumerate() {
        if b == b' ' {
            spaces += 1;
            if spaces == 3 {
                return Some(&line[..i]);
            }
        }
    }
    None
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

/// Why no key could be made for a path.
#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    /// The path does not exist (ENOENT or ENOTDIR).
    #[error("no such file")]
    Missing,
    /// The path names something other than a regular file.
    #[error("is {0}, not a regular file")]
    NotRegular(FileKind),
    /// Any other statx() failure (EACCES, ELOOP, EIO, ...).
    #[error("cannot stat: {0}")]
    Stat(#[source] io::Error),
}

/// How the last path component is treated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LastComponent {
    /// Follow a symlink in the last component (base-list entries).
    Follow,
    /// Do not follow: a symlink there is [`FileKind::Symlink`] (entries the user controls).
    NoFollow,
}

/// Computes the hook's key for the regular file at `path`, with the caller's
/// credentials, in the caller's mount namespace.
///
/// One `statx()` call gives type, inode number and mount id together, so the
/// checks and the key describe the same inode. Symlinks in directory
/// components are followed.
///
/// # Errors
/// [`KeyError`]: missing, not a regular file, or the statx() error.
pub fn key_for_path(
    path: &Path,
    last: LastComponent,
    mounts: &mut MountTable,
) -> Result<FileKey, KeyError> {
    let c_path = CString::new(path.as_os_str().as_bytes())
        .map_err(|_| KeyError::Stat(io::Error::from(io::ErrorKind::InvalidInput)))?;
    let mut flags = libc::AT_STATX_SYNC_AS_STAT;
    if last == LastComponent::NoFollow {
        flags |= libc::AT_SYMLINK_NOFOLLOW;
    }
    let mask = libc::STATX_TYPE | libc::STATX_INO | libc::STATX_MNT_ID;
    let mut stx = MaybeUninit::<libc::statx>::zeroed();
    // SAFETY: c_path is NUL-terminated; stx is a valid out-buffer of the right type.
    let rc = unsafe {
        libc::statx(
            libc::AT_FDCWD,
            c_path.as_ptr(),
            flags,
            mask,
            stx.as_mut_ptr(),
        )
    };
    if rc != 0 {
        let err = io::Error::last_os_error();
        return Err(match err.raw_os_error() {
            Some(libc::ENOENT) | Some(libc::ENOTDIR) => KeyError::Missing,
            _ => KeyError::Stat(err),
        });
    }
    // SAFETY: statx() returned 0, so it filled the buffer.
    let stx = unsafe { stx.assume_init() };
    let mode = u32::from(stx.stx_mode) & libc::S_IFMT;
    if mode != libc::S_IFREG {
        return Err(KeyError::NotRegular(kind_of(mode)));
    }
    let dev = if stx.stx_mask & libc::STATX_MNT_ID != 0 {
        device_of_mount(stx.stx_mnt_id, mounts)
            .unwrap_or_else(|| kernel_dev(stx.stx_dev_major, stx.stx_dev_minor))
    } else {
        kernel_dev(stx.stx_dev_major, stx.stx_dev_minor)
    };
    Ok(FileKey {
        dev,
        ino: stx.stx_ino,
    })
}

/// Looks `mnt_id` up, re-reading the table once if the mount is newer than it.
fn device_of_mount(mnt_id: u64, mounts: &mut MountTable) -> Option<u32> {
    if mounts.device(mnt_id).is_none()
        && let Ok(fresh) = MountTable::read()
    {
        *mounts = fresh;
    }
    mounts.device(mnt_id).map(|(ma, mi)| kernel_dev(ma, mi))
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
    fn kernel_dev_encoding() {
        // tmpfs-style anonymous device 0:45 and virtio disk 254:1 (kdev_t.h MKDEV).
        assert_eq!(kernel_dev(0, 45), 45);
        assert_eq!(kernel_dev(254, 1), (254 << 20) | 1);
        // loop device with minor >= 256: glibc's st_dev would put minor bits 8..
        // above the major; the kernel keeps all 20 minor bits together.
        assert_eq!(kernel_dev(7, 300), (7 << 20) | 300);
        assert_ne!(
            u64::from(kernel_dev(7, 300)),
            libc::makedev(7, 300),
            "glibc's st_dev differs from s_dev for large minors"
        );
        assert_eq!(kernel_dev(8, 0), 8 << 20);
    }

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
    fn key_matches_stat_on_this_host_and_rejects_non_regular() {
        let dir = std::env::temp_dir().join(format!("asx-keys-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("f");
        std::fs::write(&file, b"x").unwrap();
        let link = dir.join("l");
        let _ = std::fs::remove_file(&link);
        symlink(&file, &link).unwrap();
        let mut mounts = MountTable::read().unwrap();

        let key = key_for_path(&file, LastComponent::NoFollow, &mut mounts).unwrap();
        let md = std::fs::metadata(&file).unwrap();
        assert_eq!(key.ino, md.ino());

        let via_link = key_for_path(&link, LastComponent::Follow, &mut mounts).unwrap();
        assert_eq!(via_link, key);
        assert!(matches!(
            key_for_path(&link, LastComponent::NoFollow, &mut mounts),
            Err(KeyError::NotRegular(FileKind::Symlink))
        ));
        assert!(matches!(
            key_for_path(&dir, LastComponent::Follow, &mut mounts),
            Err(KeyError::NotRegular(FileKind::Directory))
        ));
        assert!(matches!(
            key_for_path(&dir.join("missing"), LastComponent::Follow, &mut mounts),
            Err(KeyError::Missing)
        ));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
