/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The decision on an open file (file_refused(): its key and name, then the
 * walk; agent_sandbox.bpf.c describes the steps) and the hook that makes it.
 * lsm/file_receive (sockets.bpf.h) judges a passed descriptor the same way.
 * Uses: gate.bpf.h, events.bpf.h, keys.bpf.h, walk.bpf.h, proc.bpf.h. Hooks: lsm/file_open.
 */
#ifndef AGENT_SANDBOX_OPEN_BPF_H
#define AGENT_SANDBOX_OPEN_BPF_H

/*
 * The whole decision on an open file for sandbox `cgid`: by its inode and
 * name (open_denied()), then, for a sandbox with directory entries, by the
 * directories above it (open_walk_denied(); directories stay listable below
 * a directory entry). Shared by file_open and file_receive, so a descriptor
 * passed in is judged as an open of the same file would be.
 */
static __always_inline bool file_refused(__u64 cgid, __u32 sbx, struct file *file)
{
	__u32 bits;

	if (open_denied(cgid, file, &bits))
		return true;
	return (sbx & SBX_DIRS) && (file->f_inode->i_mode & S_IFMT) != S_IFDIR &&
	       open_walk_denied(cgid, file, bits);
}

SEC("lsm/file_open")
int BPF_PROG(file_open, struct file *file, int ret)
{
	__u64 cgid;
	__u32 sbx;

	ONLY_SANDBOXED_AS(ret, cgid, sbx);
	/* BTF-typed pointers: direct loads, relocated by CO-RE. */
	if (file_refused(cgid, sbx, file)) {
		report_file(AGENT_SANDBOX_OP_OPEN, cgid, file);
		return -EPERM;
	}
	if (proc_write_refused(cgid, file)) {
		report_file(AGENT_SANDBOX_OP_PROC_WRITE, cgid, file);
		return -EPERM;
	}
	return 0;
}

#endif /* AGENT_SANDBOX_OPEN_BPF_H */
