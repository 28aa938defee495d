// SPDX-License-Identifier: GPL-2.0
/*
 * Feature probes of agent-sandbox-execd: tiny programs the daemon loads (and
 * never attaches) before the real ones, so that it can choose the variant of
 * agent_sandbox.bpf.c a kernel's verifier accepts at once, instead of paying
 * for the verification of the whole object only to have it rejected
 * (src/kernel/variant.rs).
 *
 * probe_memo_store: walk memos in inode storage. file_open passes the
 * opened file's directory inode, reached as file->f_path.dentry->d_parent->
 * d_inode, to bpf_inode_storage_get(). Up to 6.12 the verifier takes that
 * pointer for a plain PTR_TO_BTF_ID, which the helper accepts; 7.x (seen on
 * 7.3.4) types f_path.dentry as untrusted, and the helper refuses it ("R2
 * type=untrusted_ptr_ expected=ptr_, trusted_ptr_, rcu_ptr_").
 */
#include "kernel_types.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

char LICENSE[] SEC("license") = "GPL";

struct {
	__uint(type, BPF_MAP_TYPE_INODE_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, __u64);
} probe_store SEC(".maps");

SEC("lsm/file_open")
int BPF_PROG(probe_memo_store, struct file *file)
{
	struct inode *dir = file->f_path.dentry->d_parent->d_inode;

	bpf_inode_storage_get(&probe_store, dir, 0, 0);
	return 0;
}
