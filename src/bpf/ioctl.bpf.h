/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The ioctls a sandboxed task may not issue (ioctl_refused()): btrfs
 * snapshots, inode flags of directories, and the terminal and SIGIO-owner
 * side doors of tasks.bpf.h ("Side doors II"); and those that change a
 * listed or read-only file's flags (ioctl_changes_file()).
 * Uses: gate.bpf.h, names.bpf.h (write_protected()). Hooks: lsm/file_ioctl,
 * lsm/file_ioctl_compat.
 */
#ifndef AGENT_SANDBOX_IOCTL_BPF_H
#define AGENT_SANDBOX_IOCTL_BPF_H

/*
 * ioctl numbers from include/uapi/linux/btrfs.h and include/uapi/linux/fs.h
 * (_IOW encodes the argument's size, so a number can differ between the
 * 64-bit and the 32-bit ABI).
 * - btrfs snapshots copy every file of a subvolume into a new subvolume (new
 *   key, same bytes) without opening them, and users may snapshot
 *   subvolumes they own: _IOW(0x94, 1 / 23, 4096-byte args), the same size
 *   on every ABI, and btrfs_compat_ioctl() passes them on unchanged.
 * - FS_IOC_SETFLAGS sets FS_CASEFOLD_FL, which makes an empty directory
 *   case-insensitive (ext4, F2FS): _IOW('f', 2, long), whose 32-bit number
 *   FS_IOC32_SETFLAGS is _IOW('f', 2, int).
 */
/*
 * - FS_IOC_FSSETXATTR, _IOW('X', 32, struct fsxattr) (28 bytes on every
 *   ABI), sets the same flags and the project id the XFS way (`xfs_io -c
 *   chattr`); FS_IOC_ENABLE_VERITY, _IOW('f', 133, struct
 *   fsverity_enable_arg) (128 bytes), needs only a read descriptor and
 *   makes the file unwritable for good (include/uapi/linux/fsverity.h).
 */
#define FS_IOC_FSSETXATTR 0x401c5820U
#define FS_IOC_ENABLE_VERITY 0x40806685U
#define BTRFS_IOC_SNAP_CREATE 0x50009401U
#define BTRFS_IOC_SNAP_CREATE_V2 0x50009417U
#define FS_IOC_SETFLAGS 0x40086602U
#define FS_IOC32_SETFLAGS 0x40046602U
/*
 * Side doors II: terminal input injection and SIGIO owners, numbers from
 * include/uapi/asm-generic/ioctls.h and include/uapi/linux/sockios.h (not
 * size-encoded: the same on every ABI). TIOCSTI pushes bytes into a
 * terminal's input queue, which the user's shell then reads as typed
 * (tiocsti() in drivers/tty/tty_io.c); TIOCLINUX's TIOCL_PASTESEL does the
 * same with the console selection. FIOSETOWN and SIOCSPGRP are the ioctl
 * forms of F_SETOWN (do_vfs_ioctl(), sock_ioctl()): their argument is a
 * pointer another thread could change after a check, so both are refused.
 */
/*
 * FIDEDUPERANGE, _IOWR(0x94, 54, struct file_dedupe_range) (24 bytes on
 * every ABI): it compares the source's bytes with a destination open for
 * writing and tells whether they are equal, an oracle on a file the
 * sandbox may write but not read (a new file at a covered name,
 * open.bpf.h: created_write_only()).
 */
#define FIDEDUPERANGE 0xC0189436U
#define TIOCSTI 0x5412U
#define TIOCLINUX 0x541CU
#define FIOSETOWN 0x8901U
#define SIOCSPGRP 0x8902U

/*
 * May a sandboxed task not issue `cmd` on `file`? Snapshots, dedupe, TIOCSTI,
 * TIOCLINUX, FIOSETOWN and SIOCSPGRP never; inode
 * flags not on directories (the file's own flags, such as chattr +i, are
 * inert for reading). The flags are refused whatever the argument: a value
 * read here could be changed by another thread before the kernel copies it.
 */
static __always_inline bool ioctl_refused(struct file *file, unsigned int cmd)
{
	switch (cmd) {
	case BTRFS_IOC_SNAP_CREATE:
	case BTRFS_IOC_SNAP_CREATE_V2:
	case FIDEDUPERANGE:
	case TIOCSTI:
	case TIOCLINUX:
	case FIOSETOWN:
	case SIOCSPGRP:
		return true;
	case FS_IOC_SETFLAGS:
	case FS_IOC32_SETFLAGS:
		return (file->f_inode->i_mode & S_IFMT) == S_IFDIR;
	default:
		return false;
	}
}

/*
 * Does `cmd` change a file's inode flags or attributes (chattr,
 * `xfs_io -c chattr`, `fsverity enable`)? Refused on a listed or read-only
 * file (names.bpf.h: write_protected()), like its mode, times and extended
 * attributes.
 */
static __always_inline bool ioctl_changes_file(unsigned int cmd)
{
	switch (cmd) {
	case FS_IOC_SETFLAGS:
	case FS_IOC32_SETFLAGS:
	case FS_IOC_FSSETXATTR:
	case FS_IOC_ENABLE_VERITY:
		return true;
	default:
		return false;
	}
}

/* The shared body of both ioctl entry points. */
static __always_inline int ioctl_check(struct file *file, unsigned int cmd, int ret)
{
	__u64 cgid, d = 0;
	bool changes;
	__u32 sbx;

	if (ret != 0)
		return pass_on(ret);
	changes = !ioctl_refused(file, cmd);
	if (changes && !ioctl_changes_file(cmd))
		return 0;
	cgid = bpf_get_current_cgroup_id();
	if (!in_sandbox(cgid))
		return 0;
	if (changes) {
		sbx = sandbox_of(cgid);
		BPF_CORE_READ_INTO(&d, file, f_path.dentry);
		if (!d || !write_protected(cgid, sbx, d))
			return 0;
	}
	report_other(AGENT_SANDBOX_OP_IOCTL, cgid, cmd, BPF_CORE_READ(file, f_inode, i_ino));
	return -EPERM;
}

/* ioctl(2) of a 64-bit task: security_file_ioctl() in fs/ioctl.c. */
SEC("lsm/file_ioctl")
int BPF_PROG(file_ioctl, struct file *file, unsigned int cmd, unsigned long arg, int ret)
{
	return ioctl_check(file, cmd, ret);
}

/*
 * ioctl(2) of a 32-bit task: compat_sys_ioctl() calls
 * security_file_ioctl_compat() instead ("lsm: new
 * security_file_ioctl_compat() hook", mainline 6.8, in the 6.1 and 6.6
 * stable series). The daemon loads this program only where the kernel's
 * BTF has the hook (bpf_lsm_file_ioctl_compat).
 */
SEC("lsm/file_ioctl_compat")
int BPF_PROG(file_ioctl_compat, struct file *file, unsigned int cmd, unsigned long arg, int ret)
{
	return ioctl_check(file, cmd, ret);
}

#endif /* AGENT_SANDBOX_IOCTL_BPF_H */
