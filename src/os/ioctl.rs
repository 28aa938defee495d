//! The filesystem ioctls key derivation asks: the btrfs subvolume of an
//! inode ([`btrfs_subvol`]), and whether a directory's names fold case
//! ([`fs_flags`] with [`FS_CASEFOLD_FL`] on ext4 and F2FS,
//! [`xfs_geometry_flags`] with [`XFS_FSOP_GEOM_FLAGS_DIRV2CI`] on XFS).
//! Each takes an open descriptor and returns an `io::Error` for the
//! ioctl's errno.

use std::io;
use std::mem::MaybeUninit;
use std::os::fd::{AsRawFd, BorrowedFd};

/// `BTRFS_FIRST_FREE_OBJECTID` (include/uapi/linux/btrfs_tree.h): the first
/// inode number of a subvolume, its root directory's.
const BTRFS_FIRST_FREE_OBJECTID: u64 = 256;

/// `struct btrfs_ioctl_ino_lookup_args` (include/uapi/linux/btrfs.h), 4096 bytes.
#[repr(C)]
struct InoLookupArgs {
    treeid: u64,
    objectid: u64,
    name: [u8; 4080],
}
// BTRFS_IOC_INO_LOOKUP: _IOWR(BTRFS_IOCTL_MAGIC (0x94), 18, struct
// btrfs_ioctl_ino_lookup_args) (include/uapi/linux/btrfs.h).
nix::ioctl_readwrite!(btrfs_ino_lookup, 0x94, 18, InoLookupArgs);

// FS_IOC_GETFLAGS: _IOR('f', 1, long) (include/uapi/linux/fs.h).
nix::ioctl_read!(fs_ioc_getflags, b'f', 1, libc::c_long);

// XFS_IOC_FSGEOMETRY_V1: _IOR('X', 100, struct xfs_fsop_geom_v1)
// (fs/xfs/libxfs/xfs_fs.h).
nix::ioctl_read!(xfs_ioc_fsgeometry_v1, b'X', 100, XfsGeometryV1);

/// `FS_CASEFOLD_FL` (include/uapi/linux/fs.h): a case-insensitive directory.
pub const FS_CASEFOLD_FL: libc::c_long = 0x4000_0000;
/// `XFS_FSOP_GEOM_FLAGS_DIRV2CI` (fs/xfs/libxfs/xfs_fs.h): ASCII-ci names.
pub const XFS_FSOP_GEOM_FLAGS_DIRV2CI: u32 = 0x1000;

/// `struct xfs_fsop_geom_v1` (fs/xfs/libxfs/xfs_fs.h), 112 bytes.
#[repr(C)]
struct XfsGeometryV1 {
    sizes: [u32; 8],
    blocks: [u64; 4],
    uuid: [u8; 16],
    sunit: u32,
    swidth: u32,
    version: i32,
    flags: u32,
    logsectsize: u32,
    rtsectsize: u32,
    dirblocksize: u32,
}

/// The btrfs subvolume (tree id) holding the inode open at `fd`:
/// `BTRFS_IOC_INO_LOOKUP` with `treeid = 0` and `objectid =
/// BTRFS_FIRST_FREE_OBJECTID`, which needs no privilege and no access to
/// the file (fs/btrfs/ioctl.c: btrfs_ioctl_ino_lookup), but a real open
/// file, not `O_PATH`.
///
/// # Errors
/// The ioctl's (`ENOTTY` off btrfs, `EBADF` on an `O_PATH` descriptor).
pub fn btrfs_subvol(fd: BorrowedFd<'_>) -> io::Result<u64> {
    let mut args = InoLookupArgs {
        treeid: 0,
        objectid: BTRFS_FIRST_FREE_OBJECTID,
        name: [0; 4080],
    };
    // SAFETY: fd is open for the borrow; args is the ioctl's in/out struct,
    // of the size its number encodes.
    unsafe { btrfs_ino_lookup(fd.as_raw_fd(), &mut args) }.map_err(io::Error::from)?;
    Ok(args.treeid)
}

/// The inode flags of the file open at `fd` (`FS_IOC_GETFLAGS`; for a
/// directory, open it for reading: not `O_PATH`).
///
/// # Errors
/// The ioctl's (`ENOTTY` where the filesystem has none).
pub fn fs_flags(fd: BorrowedFd<'_>) -> io::Result<libc::c_long> {
    let mut flags: libc::c_long = 0;
    // SAFETY: fd is open for the borrow; flags is the ioctl's out-parameter
    // (the kernel writes an int there, the low bytes on this little-endian
    // machine, or a long on others).
    unsafe { fs_ioc_getflags(fd.as_raw_fd(), &mut flags) }.map_err(io::Error::from)?;
    Ok(flags)
}

/// The `flags` of the XFS filesystem holding the file open at `fd`
/// (`XFS_IOC_FSGEOMETRY_V1`; open for reading, not `O_PATH`).
///
/// # Errors
/// The ioctl's (`ENOTTY` off XFS).
pub fn xfs_geometry_flags(fd: BorrowedFd<'_>) -> io::Result<u32> {
    let mut geo = MaybeUninit::<XfsGeometryV1>::zeroed();
    // SAFETY: fd is open for the borrow; geo is the ioctl's out-buffer, of
    // the size its number encodes.
    unsafe { xfs_ioc_fsgeometry_v1(fd.as_raw_fd(), geo.as_mut_ptr()) }.map_err(io::Error::from)?;
    // SAFETY: the ioctl succeeded, so it filled the buffer (and zeroed()
    // made every byte initialised anyway).
    Ok(unsafe { geo.assume_init() }.flags)
}
