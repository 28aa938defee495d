/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The few kernel types and constants the BPF program touches, declared by hand
 * instead of a generated vmlinux.h, so the build does not depend on the build
 * host's kernel.
 *
 * Every struct carries preserve_access_index: clang records each field access
 * as a CO-RE relocation and libbpf rewrites the offset against the running
 * kernel's BTF (/sys/kernel/btf/vmlinux) at load time, so only the field names
 * and types below must match the kernel, not the struct layout.
 * Field names and types: include/linux/fs.h and include/linux/types.h (v6.1).
 */
#ifndef AGENT_SANDBOX_KERNEL_TYPES_H
#define AGENT_SANDBOX_KERNEL_TYPES_H

typedef unsigned char __u8;
typedef short unsigned int __u16;
typedef unsigned int __u32;
typedef long long unsigned int __u64;
typedef signed char __s8;
typedef short int __s16;
typedef int __s32;
typedef long long int __s64;
typedef __u16 __be16;
typedef __u32 __be32;
typedef __u32 __wsum;
typedef __u32 dev_t;
typedef _Bool bool;

/* include/uapi/linux/bpf.h */
enum bpf_map_type {
	BPF_MAP_TYPE_HASH = 1,
};
#define BPF_F_NO_PREALLOC (1U << 0)

/* include/uapi/asm-generic/errno-base.h */
#define EPERM 1
/* include/linux/ptrace.h */
#define PTRACE_MODE_ATTACH 0x02
/* include/linux/err.h: the largest errno a hook may return */
#define MAX_ERRNO 4095

#pragma clang attribute push(__attribute__((preserve_access_index)), apply_to = record)

struct super_block {
	dev_t s_dev; /* kernel encoding: MAJOR << 20 | MINOR (include/linux/kdev_t.h) */
};

struct inode {
	unsigned long i_ino;
	struct super_block *i_sb;
};

struct file {
	struct inode *f_inode;
};

/* include/linux/kernfs.h: the node id is the cgroup id (kernfs_ino()). */
struct kernfs_node {
	__u64 id;
};

/* include/linux/cgroup-defs.h */
struct cgroup {
	struct kernfs_node *kn;
};

struct css_set {
	struct cgroup *dfl_cgrp; /* the task's cgroup on the v2 hierarchy */
};

/* include/linux/sched.h */
struct task_struct {
	struct css_set *cgroups;
};

#pragma clang attribute pop

#endif
