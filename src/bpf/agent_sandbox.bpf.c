// SPDX-License-Identifier: GPL-2.0
/*
 * agent-sandbox-exec: an lsm/file_open program that denies tasks in a tracked
 * sandbox cgroup the opening of listed inodes.
 *
 * Decision, for every open(2)-like call on the machine:
 *   1. an earlier BPF LSM program on this hook already refused: pass that on;
 *   2. the current task's cgroup v2 id is not in agent_cgid_set: allow;
 *   3. {cgroup id, s_dev, i_ino} of the opened inode is in deny_map: -EPERM;
 *   4. otherwise allow.
 * The hook runs after the DAC and other LSMs' checks for the same open
 * (security_file_open() in fs/open.c: do_dentry_open()), so it can only take
 * permissions away.
 *
 * A second hook, lsm/ptrace_access_check, keeps a sandboxed task from
 * attaching to (ptrace, /proc/<pid>/mem, process_vm_readv, pidfd_getfd) a
 * task outside its own sandbox cgroup, which could otherwise be made to read
 * a listed file for it. Read-mode access (/proc/<pid>/status, environ, fd
 * listings) stays allowed so /proc remains useful.
 */
#include "kernel_types.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include "agent_sandbox.h"

char LICENSE[] SEC("license") = "GPL";

static __always_inline int pass_on(int ret)
{
	/*
	 * Pass on an earlier program's verdict. Since 6.12 the verifier only
	 * accepts returns in [-MAX_ERRNO, 0], so anything else becomes -EPERM
	 * (fail closed).
	 */
	return (ret < 0 && ret >= -MAX_ERRNO) ? ret : -EPERM;
}

/* Read by the daemon from the skeleton's rodata to name its pin directory. */
const volatile __u32 layout_version = AGENT_SANDBOX_LAYOUT_VERSION;

/* {sandbox cgroup id, dev, ino} -> 1. Written only by agent-sandbox-execd. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, AGENT_SANDBOX_MAX_DENY);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct deny_key);
	__type(value, __u8);
} deny_map SEC(".maps");

/* Set of sandbox cgroup ids (u64 -> 1). Written only by agent-sandbox-execd. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, AGENT_SANDBOX_MAX_SANDBOXES);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, __u64);
	__type(value, __u8);
} agent_cgid_set SEC(".maps");

SEC("lsm/file_open")
int BPF_PROG(file_open, struct file *file, int ret)
{
	struct deny_key key = {};
	struct inode *inode;
	__u64 cgid;

	if (ret != 0)
		return pass_on(ret);

	cgid = bpf_get_current_cgroup_id();
	if (!bpf_map_lookup_elem(&agent_cgid_set, &cgid))
		return 0;

	/* BTF-typed pointers: direct loads, relocated by CO-RE. */
	inode = file->f_inode;
	key.cgid = cgid;
	key.ino = inode->i_ino;
	key.dev = inode->i_sb->s_dev;
	if (bpf_map_lookup_elem(&deny_map, &key))
		return -EPERM;
	return 0;
}

SEC("lsm/ptrace_access_check")
int BPF_PROG(ptrace_access_check, struct task_struct *child, unsigned int mode, int ret)
{
	__u64 cgid;

	if (ret != 0)
		return pass_on(ret);
	if (!(mode & PTRACE_MODE_ATTACH))
		return 0;
	cgid = bpf_get_current_cgroup_id();
	if (!bpf_map_lookup_elem(&agent_cgid_set, &cgid))
		return 0;
	/* BTF pointer walk; a NULL on the way reads as 0 and denies. */
	if (child->cgroups->dfl_cgrp->kn->id != cgid)
		return -EPERM;
	return 0;
}
