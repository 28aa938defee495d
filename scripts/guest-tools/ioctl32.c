// SPDX-License-Identifier: GPL-2.0
/*
 * asx-ioctl32: ioctls issued by a 32-bit process, for scripts/test-fs.sh.
 *
 * A 32-bit task's ioctl(2) enters the kernel through compat_sys_ioctl(),
 * which calls security_file_ioctl_compat(), not security_file_ioctl()
 * (fs/ioctl.c, since "lsm: new security_file_ioctl_compat() hook"), so a
 * sandbox that checked only lsm/file_ioctl would let these through. Built on
 * the host with `gcc -m32 -static` (the Makefile's guest-tools target), so
 * the guest runs it without any 32-bit library.
 *
 *   asx-ioctl32 snap SUBVOL DESTDIR NAME   BTRFS_IOC_SNAP_CREATE_V2 of SUBVOL as DESTDIR/NAME
 *   asx-ioctl32 casefold DIR               FS_IOC32_SETFLAGS: add FS_CASEFOLD_FL to DIR
 *   asx-ioctl32 sti TEXT                   TIOCSTI: push TEXT and a newline, byte by byte,
 *                                          into the input of the terminal on fd 0
 *                                          (scripts/test-procs.sh)
 *
 * Exit status 0 on success; 1 with "asx-ioctl32: <what>: <strerror>" on
 * stderr; 2 on bad usage or when not built as 32-bit code.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

/* include/uapi/linux/btrfs.h: 4096 bytes on every ABI. */
struct btrfs_ioctl_vol_args_v2 {
	int64_t fd;
	uint64_t transid;
	uint64_t flags;
	uint64_t unused[4];
	char name[4040];
};
#define BTRFS_IOC_SNAP_CREATE_V2 0x50009417U /* _IOW(0x94, 23, struct btrfs_ioctl_vol_args_v2) */

/* include/uapi/linux/fs.h: the 32-bit ABI's numbers (int, not long). */
#define FS_IOC32_GETFLAGS 0x80046601U /* _IOR('f', 1, int) */
#define FS_IOC32_SETFLAGS 0x40046602U /* _IOW('f', 2, int) */
#define FS_CASEFOLD_FL 0x40000000

/* include/uapi/asm-generic/ioctls.h: the same number on every ABI. */
#define ASX_TIOCSTI 0x5412

static int fail(const char *what, const char *path)
{
	fprintf(stderr, "asx-ioctl32: %s %s: %s\n", what, path, strerror(errno));
	return 1;
}

int main(int argc, char **argv)
{
	int fd, src, flags;

	if (sizeof(long) != 4) {
		fprintf(stderr, "asx-ioctl32: not built as 32-bit code\n");
		return 2;
	}
	if (argc == 5 && strcmp(argv[1], "snap") == 0) {
		struct btrfs_ioctl_vol_args_v2 args;

		src = open(argv[2], O_RDONLY | O_DIRECTORY);
		if (src < 0)
			return fail("open", argv[2]);
		fd = open(argv[3], O_RDONLY | O_DIRECTORY);
		if (fd < 0)
			return fail("open", argv[3]);
		memset(&args, 0, sizeof(args));
		args.fd = src;
		strncpy(args.name, argv[4], sizeof(args.name) - 1);
		if (ioctl(fd, BTRFS_IOC_SNAP_CREATE_V2, &args) != 0)
			return fail("BTRFS_IOC_SNAP_CREATE_V2 in", argv[3]);
		return 0;
	}
	if (argc == 3 && strcmp(argv[1], "casefold") == 0) {
		fd = open(argv[2], O_RDONLY | O_DIRECTORY);
		if (fd < 0)
			return fail("open", argv[2]);
		if (ioctl(fd, FS_IOC32_GETFLAGS, &flags) != 0)
			return fail("FS_IOC32_GETFLAGS of", argv[2]);
		flags |= FS_CASEFOLD_FL;
		if (ioctl(fd, FS_IOC32_SETFLAGS, &flags) != 0)
			return fail("FS_IOC32_SETFLAGS of", argv[2]);
		return 0;
	}
	if (argc == 3 && strcmp(argv[1], "sti") == 0) {
		size_t i, n = strlen(argv[2]);
		char c;

		for (i = 0; i <= n; i++) {
			c = i < n ? argv[2][i] : '\n';
			if (ioctl(0, ASX_TIOCSTI, &c) != 0)
				return fail("TIOCSTI on", "fd 0");
		}
		return 0;
	}
	fprintf(stderr, "usage: asx-ioctl32 snap SUBVOL DESTDIR NAME | casefold DIR | sti TEXT\n");
	return 2;
}
