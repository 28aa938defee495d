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
 * Field names and types: include/linux/fs.h, include/linux/dcache.h,
 * include/linux/path.h, include/linux/types.h (v6.1); btrfs types from
 * fs/btrfs/btrfs_inode.h and fs/btrfs/ctree.h, which live in the btrfs
 * module's BTF (/sys/kernel/btf/btrfs) and are used only behind
 * bpf_core_type_exists().
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
#define true 1
#define false 0

struct bpf_map;

/* include/uapi/linux/bpf.h */
enum bpf_map_type {
	BPF_MAP_TYPE_HASH = 1,
	BPF_MAP_TYPE_ARRAY = 2,
	BPF_MAP_TYPE_PERCPU_ARRAY = 6,
	BPF_MAP_TYPE_LRU_HASH = 9,
	BPF_MAP_TYPE_RINGBUF = 27,
	BPF_MAP_TYPE_SK_STORAGE = 24,
	BPF_MAP_TYPE_INODE_STORAGE = 28,
};
#define BPF_ANY 0 /* bpf_map_update_elem(): create or replace */
#define BPF_NOEXIST 1 /* bpf_map_update_elem(): create only */
#define BPF_F_NO_PREALLOC (1U << 0)
#define BPF_LOCAL_STORAGE_GET_F_CREATE (1ULL << 0)
#define BPF_F_MMAPABLE (1U << 10)

/* include/uapi/asm-generic/errno-base.h */
#define EPERM 1
/* include/linux/ptrace.h */
#define PTRACE_MODE_ATTACH 0x02
/* include/linux/fs.h: file->f_mode */
#define FMODE_READ 0x1
#define FMODE_WRITE 0x2
/*
 * Set by do_open()/atomic_open() when this open created the file, before
 * security_file_open() (fs/namei.c); 0x100000 since 4.19 ("introduce
 * FMODE_CREATED"), and (1 << 20) in 6.10's renumbered list.
 */
#define FMODE_CREATED 0x100000
/* include/uapi/asm-generic/fcntl.h */
#define O_TRUNC 00001000
/* include/uapi/linux/magic.h */
#define PROC_SUPER_MAGIC 0x9fa0
/* include/linux/pid.h: enum pid_type */
#define PIDTYPE_PID 0
#define PIDTYPE_PGID 2
#define PIDTYPE_MAX 4
/* include/linux/err.h: the largest errno a hook may return */
#define MAX_ERRNO 4095
/* include/uapi/linux/magic.h */
#define BTRFS_SUPER_MAGIC 0x9123683E
#define EXT4_SUPER_MAGIC 0xEF53
#define F2FS_SUPER_MAGIC 0xF2F52010
#define XFS_SUPER_MAGIC 0x58465342
#define TMPFS_MAGIC 0x01021994
#define RAMFS_MAGIC 0x858458f6
#define OVERLAYFS_SUPER_MAGIC 0x794c7630
/* include/uapi/linux/fs.h: renameat2() flags */
#define RENAME_EXCHANGE (1 << 1)
/* include/linux/fs.h (v6.1 .. v6.12): inode->i_flags of a casefolded directory */
#define S_CASEFOLD (1 << 15)
/* include/linux/fs.h (v6.1 .. v6.12): inode->i_flags of an encrypted (fscrypt) inode */
#define S_ENCRYPTED (1 << 14)
/* include/uapi/linux/stat.h */
#define S_IFMT 00170000
#define S_IFDIR 0040000
#define S_IFSOCK 0140000
#define S_IFLNK 0120000
/* include/linux/dcache.h (v6.1 .. v6.12): dentry->d_flags, d_op->d_compare is set */
#define DCACHE_OP_COMPARE 0x00000002

#pragma clang attribute push(__attribute__((preserve_access_index)), apply_to = record)

/*
 * Only its existence is read (sb_of() in src/bpf/keys.bpf.h): the
 * open-coded numeric iterator, in kernels since 6.4.
 */
struct bpf_iter_num {
	__u64 __opaque[1];
};

struct super_block {
	dev_t s_dev; /* kernel encoding: MAJOR << 20 | MINOR (include/linux/kdev_t.h) */
	unsigned long s_magic;
};

struct hlist_node {
	struct hlist_node *next;
};

struct hlist_head {
	struct hlist_node *first;
};

struct inode {
	unsigned short i_mode;
	unsigned int i_flags;
	unsigned long i_ino;
	struct super_block *i_sb;
	unsigned int i_nlink; /* in an anonymous union with __i_nlink; CO-RE finds it there */
	struct hlist_head i_dentry; /* the inode's dentries (aliases), linked by d_u.d_alias */
	__u32 i_generation;
};

/* include/linux/dcache.h; hash and len sit in an anonymous struct in a union. */
struct qstr {
	__u32 hash;
	__u32 len;
	const unsigned char *name;
};

struct dentry {
	unsigned int d_flags;
	struct dentry *d_parent;
	struct super_block *d_sb;
	struct qstr d_name; /* since 7.x in an anonymous union with __d_name: CO-RE finds it there */
	struct inode *d_inode;
	union {
		struct hlist_node d_alias; /* node in d_inode->i_dentry */
	} d_u;
};

/*
 * The same dentry since 7.x (seen on 7.3.4): d_alias in an anonymous union,
 * no d_u. A "___" flavour: libbpf matches it against the kernel's struct
 * dentry. Use dentry_alias_offset(), which picks the one the kernel has.
 */
struct dentry___anon_alias {
	struct hlist_node d_alias;
};

/* include/linux/fs.h: vfs_rename()'s argument */
struct renamedata {
	struct dentry *old_dentry;
	struct dentry *new_dentry;
	unsigned int flags;
};

/* include/linux/mount.h */
struct vfsmount {
	struct dentry *mnt_root;
};

/* fs/mount.h: a mount, with its vfsmount embedded (real_mount()). */
struct mount {
	struct mount *mnt_parent;
	struct dentry *mnt_mountpoint;
	struct vfsmount mnt;
};

struct path {
	struct vfsmount *mnt;
	struct dentry *dentry;
};

struct file {
	struct path f_path;
	struct inode *f_inode;
	unsigned int f_mode; /* fmode_t */
	unsigned int f_flags; /* O_* of the open */
};

/* fs/btrfs/ctree.h (v6.1 .. v6.12): the subvolume id is root_key.objectid. */
struct btrfs_key {
	__u64 objectid;
};

struct btrfs_root {
	struct btrfs_key root_key;
};

/* fs/btrfs/btrfs_inode.h: the VFS inode is embedded in btrfs_inode. */
struct btrfs_inode {
	struct btrfs_root *root;
	struct inode vfs_inode;
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

/* include/linux/pid.h */
struct upid {
	int nr; /* the number in that level's pid namespace; numbers[0] is the initial one */
};
struct pid {
	unsigned int level;
	struct hlist_head tasks[PIDTYPE_MAX]; /* tasks[PIDTYPE_PID]: the task, by pid_links[0] */
	struct upid numbers[1];
};
/* include/linux/sched/signal.h */
struct signal_struct {
	struct pid *pids[PIDTYPE_MAX];
};
/* include/linux/sched.h */
struct task_struct {
	struct css_set *cgroups;
	int tgid; /* in the initial pid namespace */
	struct signal_struct *signal;
	struct hlist_node pid_links[PIDTYPE_MAX];
	struct nsproxy *nsproxy; /* NULL once the task has exited its namespaces */
};
/* include/linux/fs.h: what a setattr changes (ATTR_* bits). */
struct iattr {
	unsigned int ia_valid;
};
/* include/linux/nsproxy.h */
struct nsproxy {
	struct mnt_namespace *mnt_ns;
};
/* fs/mount.h: the namespace's owner, which mounts in it need CAP_SYS_ADMIN over. */
struct mnt_namespace {
	struct user_namespace *user_ns;
};
/* include/linux/user_namespace.h: level 0 is the initial user namespace only. */
struct user_namespace {
	int level;
};
/* fs/proc/internal.h: the VFS inode of a /proc file is embedded in proc_inode. */
struct proc_inode {
	struct pid *pid; /* the task of a /proc/<pid>/ file; NULL for others (/proc/sys, ...) */
	struct inode vfs_inode;
};
/* Only passed through (hook arguments). */
struct kernel_siginfo;
struct cred;
struct rlimit;

#pragma clang attribute pop

/*
 * ---- Side doors I (issue 14): Unix sockets. ----
 * include/net/sock.h (sk_uid, sk_cgrp_data, sk_socket), include/linux/net.h
 * (struct socket), include/linux/cgroup-defs.h (struct sock_cgroup_data:
 * since 5.15 one `struct cgroup *cgroup`, the creating task's cgroup v2,
 * set by cgroup_sk_alloc() from sk_alloc()), include/net/af_unix.h
 * (struct unix_sock embeds struct sock first; `path` is the bound name).
 */
#pragma clang attribute push(__attribute__((preserve_access_index)), apply_to = record)

typedef struct {
	__u32 val;
} kuid_t;

struct sock_cgroup_data {
	struct cgroup *cgroup;
};

struct socket;

struct sock_common {
	unsigned short skc_family;
};

struct sock {
	struct sock_common __sk_common;
	kuid_t sk_uid;
	struct sock_cgroup_data sk_cgrp_data;
	struct socket *sk_socket;
	__u16 sk_protocol;
};

struct socket {
	struct sock *sk;
};

struct unix_sock {
	struct sock sk;
	struct path path;
};

/*
 * ---- Side doors III (issue 27): the user's servers on loopback. ----
 * include/linux/tcp.h (struct tcp_sock embeds struct inet_connection_sock
 * first), include/net/inet_connection_sock.h (which embeds struct inet_sock
 * first), include/net/inet_sock.h (which embeds struct sock first): what
 * bpf_skc_to_tcp_sock() returns, read down to the struct sock.
 */
struct inet_sock {
	struct sock sk;
};

struct inet_connection_sock {
	struct inet_sock icsk_inet;
};

struct tcp_sock {
	struct inet_connection_sock inet_conn;
};

struct sockaddr {
	unsigned short sa_family;
};

#pragma clang attribute pop

/*
 * include/uapi/linux/bpf.h: the contexts and arguments of the cgroup
 * sock_addr programs. Not CO-RE: the verifier rewrites accesses to these
 * by their uapi offsets, so the layout below is the uapi one.
 */
struct bpf_sock {
	__u32 bound_dev_if;
	__u32 family;
	__u32 type;
	__u32 protocol;
	__u32 mark;
	__u32 priority;
	__u32 src_ip4;
	__u32 src_ip6[4];
	__u32 src_port;
	__be16 dst_port;
	__u16 : 16;
	__u32 dst_ip4;
	__u32 dst_ip6[4];
	__u32 state;
	__s32 rx_queue_mapping;
};

struct bpf_sock_addr {
	__u32 user_family;
	__u32 user_ip4;
	__u32 user_ip6[4];
	__u32 user_port;
	__u32 family;
	__u32 type;
	__u32 protocol;
	__u32 msg_src_ip4;
	__u32 msg_src_ip6[4];
	union {
		struct bpf_sock *sk;
		__u64 : 64;
	};
};

struct bpf_sock_tuple {
	union {
		struct {
			__be32 saddr;
			__be32 daddr;
			__be16 sport;
			__be16 dport;
		} ipv4;
		struct {
			__be32 saddr[4];
			__be32 daddr[4];
			__be16 sport;
			__be16 dport;
		} ipv6;
	};
};

#define BPF_F_CURRENT_NETNS (-1L)
/* include/linux/socket.h, include/uapi/linux/in.h */
#define AF_INET 2
#define AF_INET6 10
#define IPPROTO_TCP 6
#define IPPROTO_UDP 17
/* ---- end of side doors I and III ---- */

#endif
