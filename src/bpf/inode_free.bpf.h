/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The keys of a freed inode: its deny_map keys and marks and its sock_allow
 * keys in every sandbox, and its walk memo in walk_memo_hash, so that a new
 * inode reusing its number or its memory inherits none of them.
 * Uses: maps.bpf.h, keys.bpf.h, repo.bpf.h (repo_forget()). Hooks: lsm/inode_free_security.
 */
#ifndef AGENT_SANDBOX_INODE_FREE_BPF_H
#define AGENT_SANDBOX_INODE_FREE_BPF_H

struct drop_ctx {
	struct file_key file;
};

static long drop_key(struct bpf_map *map, __u64 *cgid, __u8 *value, struct drop_ctx *ctx)
{
	struct deny_key dk = {};
	__u32 zero = 0;
	__u64 *count;

	dk.cgid = *cgid;
	dk.file = ctx->file;
	if (bpf_map_delete_elem(&deny_map, &dk) == 0) {
		count = bpf_map_lookup_elem(&dropped_keys, &zero);
		if (count)
			__sync_fetch_and_add(count, 1);
	}
	/*
	 * Directory-entry, exception, audit and read-only marks of a freed
	 * directory or file (KIND_DIR_BASE .. KIND_RO_DIR_OWN; the KIND_HAS_*
	 * kinds between sit on the all-zero key only), so a new inode reusing
	 * the number is not covered by mistake: a file git or cargo just made
	 * inside must not be read-only because a read-only file the user saved
	 * by renaming over it had its number. Not counted: the daemon rewrites
	 * only KIND_OPEN keys after a drop, and a lost mark of a freed inode is
	 * never needed again.
	 */
	for (__u32 kind = AGENT_SANDBOX_KIND_DIR_BASE; kind <= AGENT_SANDBOX_KIND_RO_DIR_OWN;
	     kind++) {
		dk.file.kind = kind;
		bpf_map_delete_elem(&deny_map, &dk);
	}
	return 0;
}

/* The sock_allow key of sandbox `*cgid` for the freed socket inode in `ctx`, if any. */
static long drop_sock(struct bpf_map *map, __u64 *cgid, __u8 *value, struct drop_ctx *ctx)
{
	struct deny_key dk = {};

	dk.cgid = *cgid;
	dk.file = ctx->file;
	bpf_map_delete_elem(&sock_allow, &dk);
	return 0;
}

/*
 * Called from __destroy_inode() for every inode the kernel frees (fs/inode.c).
 * With i_nlink == 0 the file is gone for good (no name, no open file), and
 * its inode number may be reused at once: drop its keys from every sandbox.
 * An inode merely evicted from the cache still has links and keeps its keys.
 * A bound socket's file (S_IFSOCK on the socket's filesystem; its inode is
 * freed once the file is removed and the socket that holds its path,
 * unix_sock.path, is closed) also loses its sock_allow keys: ext4 and XFS
 * hand a freed inode number to the next file made in the same group, so
 * another daemon's socket could otherwise be reached as the allowed one.
 * The sockets of sockfs (socket(2)) keep i_nlink 1 (inode_init_always())
 * and leave at the first test.
 */
SEC("lsm/inode_free_security")
int BPF_PROG(inode_free_security, struct inode *inode)
{
	struct drop_ctx drop = {};
	struct memo_key mk = {};
	bool sock, listed;

	/* Before the inode's memory can hold another directory's inode. */
	if (walk_memo_store == MEMO_HASH && (inode->i_mode & S_IFMT) == S_IFDIR) {
		bpf_probe_read_kernel(&mk.inode, sizeof(mk.inode), &inode);
		mk.ino = inode->i_ino;
		bpf_map_delete_elem(&walk_memo_hash, &mk);
	}
	if ((inode->i_mode & S_IFMT) == S_IFDIR)
		repo_forget(inode);
	if (inode->i_nlink != 0)
		return 0;
	sock = (inode->i_mode & S_IFMT) == S_IFSOCK;
	listed = filter_has(inode->i_ino, AGENT_SANDBOX_FILTER_TAG_FILE);
	if (!sock && !listed)
		return 0;
	fill_key(&drop.file, inode);
	if (sock)
		bpf_for_each_map_elem(&agent_cgid_set, drop_sock, &drop, 0);
	if (listed)
		bpf_for_each_map_elem(&agent_cgid_set, drop_key, &drop, 0);
	return 0;
}

#endif /* AGENT_SANDBOX_INODE_FREE_BPF_H */
