/* SPDX-License-Identifier: GPL-2.0 */
/*
 * File memos: file_open's whole decision on a file, kept in the file's own
 * inode storage (walk_memos, as a struct file_memo) for the next open of
 * it by the same sandbox, by the same name, on the same mount. An open
 * that a memo answers costs one inode-storage lookup and a few loads
 * instead of the key probes, the name patterns' first test and the
 * directory's walk memo (about 440 instead of 620 to 1,200 program
 * instructions on 6.1: BENCHMARKS.md, session 23).
 *
 * A memo says only "allowed" (for reading, and for writing where
 * FILE_MEMO_WRITE is set), and only while nothing it was decided on can
 * have changed:
 *   - the lists: every apply that changes a key bumps walk_gens.marks (the
 *     daemon, after the keys), and so does a restart (after the slots and
 *     pattern shapes);
 *   - the directories above: walk_gens.moves (fexit/vfs_rename, a
 *     directory moved);
 *   - the file's own name: walk_gens.names (fexit/vfs_rename after every
 *     rename, lsm/inode_link before every link, in any task). A memo is made
 *     and used only while the inode has one link (i_nlink 1), so the dentry
 *     it names, checked by address, parent and hash and length of its name,
 *     is the inode's only name;
 *   - the mounts: the same vfsmount, and mount_lock's sequence count as it
 *     was (any mount change anywhere makes every memo stale);
 *   - the sandbox's flags (sandbox_of()), kept in the memo and compared:
 *     an apply writes them after its keys and bump, so an open may read the
 *     new epoch with the old flags.
 * The counts are read once, as one epoch, before the decision
 * (file_memo_check()), and the memo is made only if it is unchanged after
 * it (file_memo_keep()): a decision that overlapped an apply, a rename, a
 * link or a mount change is not kept.
 *
 * A memo is made at a file's second open (file_memo_opened_before()): most
 * files a scan opens are opened once, and making a memo costs more than
 * the decision it saves.
 *
 * Not kept: refusals (each is decided and reported again), files this open
 * created (a name pattern may allow only that open: created_write_only()),
 * directories, files on filesystems other than memo_fs() ones or in
 * encrypted directories, sandboxes with audit entries (each open is
 * reported), and sandboxes whose decision is cheaper than a memo: without
 * directory entries, patterns or read-only directory entries (file entries
 * alone: two key_filter probes). A memo is replaced whole (delete, then
 * create from a copy on the stack), never written in place, so a reader on
 * another CPU sees the old memo or the new one.
 * Uses: maps.bpf.h, gate.bpf.h, keys.bpf.h, walk.bpf.h. Hooks: none.
 */
#ifndef AGENT_SANDBOX_FILE_MEMO_BPF_H
#define AGENT_SANDBOX_FILE_MEMO_BPF_H

_Static_assert(sizeof(struct file_memo) == sizeof(struct walk_memo) &&
		       __builtin_offsetof(struct file_memo, verdicts) ==
			       __builtin_offsetof(struct walk_memo, parts),
	       "a file memo shares walk_memos with directories' walk memos");

/* Does sandbox `sbx` (sandbox_of()) use file memos? See above for why not all do. */
static __always_inline bool file_memo_used(__u32 sbx)
{
	/* The common test first: a sandbox of file entries only pays one. */
	return (sbx & (SBX_DIRS | SBX_PATTERNS | SBX_RO_DIRS)) && !(sbx & SBX_AUDIT) &&
	       walk_memo_store == MEMO_INODE_STORAGE;
}

/*
 * Everything a memo's answer rests on besides the lists' keys, as one
 * number, read now: walk_gens' three counts and mount_lock's sequence
 * count, summed, plus one (each only grows, so the sum changes whenever
 * one does; never 0 or 1). 1 when a memo cannot be kept: walk_gens
 * unreadable, mount_lock unknown, or a mount change under way (the count
 * odd).
 */
static __always_inline __u64 file_memo_epoch(void)
{
	struct walk_gens *g;
	__u32 zero = 0, seq;

	g = bpf_map_lookup_elem(&walk_gens, &zero);
	if (!g || !&mount_lock)
		return 1;
	seq = seq_of(&mount_lock);
	if (seq & 1)
		return 1;
	return g->marks + g->moves + g->names + seq + 2;
}

/* What an open of `file` needs a memo to allow: reading, and writing for a write or O_TRUNC. */
static __always_inline __u32 file_memo_need(struct file *file)
{
	if ((file->f_mode & FMODE_WRITE) || (file->f_flags & O_TRUNC))
		return AGENT_SANDBOX_FILE_MEMO_READ | AGENT_SANDBOX_FILE_MEMO_WRITE;
	return AGENT_SANDBOX_FILE_MEMO_READ;
}

/* The hash and length of dentry `d`'s name, as struct qstr's hash_len holds them. */
static __always_inline __u64 file_memo_name(struct dentry *d)
{
	return (__u64)d->d_name.len << 32 | d->d_name.hash;
}

/*
 * Was the file of inode number `ino` opened before, as far as
 * file_memo_seen remembers (a direct-mapped table of tags, so a guess)?
 * Remembers it if not. A memo is made only at the second open of a file:
 * its making (an allocation, and the inode's storage the first time) costs
 * about 3,600 program instructions on 6.1, paid back only by a file opened
 * again, while a scan (`grep -r`, a build reading its sources) opens most
 * files once.
 */
static __always_inline bool file_memo_opened_before(__u64 ino)
{
	__u32 slot = (__u32)((ino * 0x9E3779B97F4A7C15ULL) >> (64 - AGENT_SANDBOX_FILE_MEMO_SEEN_LOG2));
	__u32 tag = (__u32)(ino ^ (ino >> 32)) | 1, *seen;

	seen = bpf_map_lookup_elem(&file_memo_seen, &slot);
	if (!seen || *seen == tag)
		return true;
	*seen = tag;
	return false;
}

/*
 * Does the memo of `file`'s inode allow this open by sandbox `cgid`, whose
 * flags are `sbx` (sandbox_of(), read before this)? 0: yes, the open is
 * allowed. Otherwise the epoch (file_memo_epoch()) read now, before the
 * caller decides, for file_memo_keep() (1: no memo is to be kept).
 * Not inlined: file_open's frame stays as it was (6.1's stack bound).
 */
static __noinline __u64 file_memo_check(__u64 cgid, __u32 sbx, struct file *file)
{
	struct file_memo *m = bpf_inode_storage_get(&walk_memos, file->f_inode, 0, 0);
	struct file *fv = file_view(file);
	struct dentry *d = fv->f_path.dentry;
	__u64 epoch = file_memo_epoch();
	__u32 need;

	/* The flags too: read before the epoch, they may be older than it (the daemon bumps after them). */
	if (epoch == 1 || !m || m->cgid != cgid || m->epoch != epoch || m->sbx != sbx)
		return epoch;
	need = file_memo_need(fv);
	if ((m->verdicts & need) != need || m->dentry != (__u64)d ||
	    m->parent != (__u64)d->d_parent || m->name != file_memo_name(d) ||
	    m->vmnt != (__u64)fv->f_path.mnt || fv->f_inode->i_nlink != 1)
		return epoch;
	return 0;
}

/*
 * After file_open allowed `file` to sandbox `cgid` of flags `sbx`: keep
 * that as the memo of its inode, if the epoch is still `epoch` (what
 * file_memo_check() read before the decision) and the file may have one
 * (above). A memo of the same sandbox, flags, name and epoch that allowed
 * the other kind of open (read or write) keeps allowing it. Not inlined,
 * for file_open's frame.
 */
static __noinline void file_memo_keep(__u64 cgid, __u32 sbx, struct file *file, __u64 epoch)
{
	struct file *fv = file_view(file);
	struct inode *inode = fv->f_inode;
	struct dentry *d = fv->f_path.dentry;
	struct file_memo fresh = {}, *old;

	/* A file this open created: perhaps allowed only as that (created_write_only()). */
	if (!inode || (fv->f_mode & FMODE_CREATED) || d->d_inode != inode ||
	    (inode->i_mode & S_IFMT) == S_IFDIR || inode->i_nlink != 1 ||
	    !memo_fs(sb_of(inode)->s_magic) || (inode->i_flags & S_ENCRYPTED))
		return;
	if (file_memo_epoch() != epoch || !file_memo_opened_before(inode->i_ino))
		return;
	fresh.cgid = cgid;
	fresh.epoch = epoch;
	fresh.sbx = sbx;
	fresh.verdicts = file_memo_need(fv);
	fresh.dentry = (__u64)d;
	fresh.parent = (__u64)d->d_parent;
	fresh.name = file_memo_name(d);
	fresh.vmnt = (__u64)fv->f_path.mnt;
	old = bpf_inode_storage_get(&walk_memos, file->f_inode, 0, 0);
	if (old && old->cgid == cgid && old->epoch == epoch && old->sbx == sbx &&
	    old->dentry == fresh.dentry && old->parent == fresh.parent && old->name == fresh.name &&
	    old->vmnt == fresh.vmnt)
		fresh.verdicts |= old->verdicts & (AGENT_SANDBOX_FILE_MEMO_READ |
						   AGENT_SANDBOX_FILE_MEMO_WRITE);
	bpf_inode_storage_delete(&walk_memos, file->f_inode);
	bpf_inode_storage_get(&walk_memos, file->f_inode, &fresh, BPF_LOCAL_STORAGE_GET_F_CREATE);
}

#endif /* AGENT_SANDBOX_FILE_MEMO_BPF_H */
