/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Directory entries and exceptions (the section below): the walk up an opened
 * file's dentry and mount chain (walk_denied()), the walk of file_open with
 * its memos (open_walk_denied()), and the program that makes every memo stale
 * after a directory moved.
 * Uses: maps.bpf.h, keys.bpf.h. Programs: fexit/vfs_rename.
 */
#ifndef AGENT_SANDBOX_WALK_BPF_H
#define AGENT_SANDBOX_WALK_BPF_H

/*
 * ---- Directory entries and exceptions -------------------------------------
 *
 * A list line `DIR/` denies every non-directory below DIR, at any depth and
 * by any name; `!PATH` and `!DIR/` re-allow what the same list's directory
 * entries deny (agent_sandbox.h: KIND_DIR_*, KIND_EXC_*). For a sandboxed
 * task whose sandbox has directory entries (SBX_DIRS), file_open walks the
 * opened dentry's d_parent chain: the dentry tree of the superblock, which no
 * bind mount, mount namespace or user namespace can fake (a bind mount of a
 * subdirectory shares its dentries, so the walk goes on above the bind
 * root). At a superblock's root (d_parent == itself) it continues at the
 * mount point of the file's mount (struct mount: mnt_mountpoint,
 * mnt_parent; fs/mount.h, real_mount()), so a filesystem mounted below an
 * entry is covered through that mount. At each level, one key_filter probe
 * per key (the inode by FILTER_TAG_FILE, its parent by FILTER_TAG_DIR for
 * the name) answers "no mark here" before any hash lookup. Per list, the
 * nearest mark decides (src/lists/denylist.rs: decide()); either list denying
 * denies. A walk that does not reach the root within
 * AGENT_SANDBOX_WALK_DEPTH levels denies (fail closed), and so does one
 * that a rename anywhere overlapped twice: rename_lock's sequence count
 * (fs/dcache.c: d_move() and d_exchange() take write_seqlock(&rename_lock))
 * is read before and after each attempt.
 *
 * Walk memos. The walk from a directory up depends only on the sandbox, the
 * marks, the dentry tree above the directory and, past its superblock's
 * root, the mounts above the file's mount. file_open keeps the walk's result
 * from an opened file's parent directory in that directory's inode storage
 * (walk_memos, struct walk_memo), and the next open of a file there by the
 * same sandbox judges the file's own level, then takes the rest from the
 * memo: an inode-storage lookup instead of a walk. A memo is used only
 * while the marks (walk_gens.marks, bumped by the daemon after each apply),
 * the directories (walk_gens.moves, bumped after each directory rename by
 * fexit/vfs_rename) and, for the part past the superblock's root, the
 * mounts (mount_lock's sequence count, fs/namespace.c: every change of the
 * mount tree takes write_seqlock(&mount_lock)) are as when it was made; the
 * counts are read before the walk that makes it, so a change during that
 * walk leaves a memo that is never used. Memos are made only on
 * filesystems whose directories move only through vfs_rename()
 * (memo_fs()): on a network or FUSE filesystem d_splice_alias() may move a
 * directory's dentry on a lookup, without a rename here. A memo lives as
 * long as the directory's inode is in the inode cache. The read-only walk
 * of a sandbox with read-only directory entries (SBX_RO_DIRS: every write,
 * new name, removal and rename walks to the root) keeps its answer in the
 * same memo, a part of its own (struct walk_memo: part[], parts), made and
 * used by the same rules (memo_walk_denied()); a memo made for one walk
 * never answers the other.
 *
 * inode_link, inode_rename and inode_symlink refuse a sandboxed task a name
 * that would carry a file or directory out of, or an inode of its own into,
 * a directory entry (the walk's answer differs between the old and the new
 * name), and a symlink below an entry (a user's tool writing through it
 * would write the secret where the agent reads).
 */

/* fs/dcache.c: seqlock_t rename_lock; its sequence count is the first word. */
extern const void rename_lock __ksym __weak;
/* fs/namespace.c: seqlock_t mount_lock, the same shape. */
extern const void mount_lock __ksym __weak;

#define WALK_OPEN 0
#define WALK_DENY 1
#define WALK_ALLOW 2

/* What a walk looks for: directory entries; audit entries; read-only entries. */
#define WALK_MODE_READ 0
#define WALK_MODE_AUDIT 1
#define WALK_MODE_RO 2
/* WALK_MODE_READ that also keeps what a walk memo needs (at_sb, sb_*, cross_memo). */
#define WALK_MODE_READ_MEMO 3
/* WALK_MODE_RO that keeps the same. */
#define WALK_MODE_RO_MEMO 4

/* Does walk mode `mode` keep what a memo needs? */
#define WALK_MEMO_MODE(mode) ((mode) == WALK_MODE_READ_MEMO || (mode) == WALK_MODE_RO_MEMO)

/* The state of one walk; its pointers are plain numbers, read through probe reads. */
struct walk_ctx {
	__u64 cgid;
	__u64 dentry;  /* struct dentry * of this level */
	__u64 mnt;     /* struct mount * of that dentry, 0: do not cross mounts */
	__u32 base;    /* WALK_* for the base list */
	__u32 user;    /* WALK_* for the user's list */
	__u32 done;    /* the root was reached or both lists decided */
	__u32 sb_base; /* base and user as the first superblock root was reached */
	__u32 sb_user;
	__u32 at_sb;      /* 1 once the walk has passed the first superblock root */
	__u32 cross_memo; /* 0 once a mount crossed leads to a filesystem memo_fs() refuses */
	__u32 pad;
};

/* The key of inode `inode` (an address), through probe reads. */
static __always_inline void read_key(struct file_key *k, struct inode *inode, __u64 ino)
{
	struct super_block *sb = BPF_CORE_READ(inode, i_sb);

	k->ino = ino;
	k->dev = BPF_CORE_READ(sb, s_dev);
	k->subvol = subvol_from(inode, BPF_CORE_READ(sb, s_magic));
	k->kind = 0;
}

/* Does `map` hold key `key` (a deny_key or name_key) with file kind `kind`? */
static __always_inline bool has_kind(void *map, void *key, __u32 *kind_field, __u32 kind)
{
	*kind_field = kind;
	return bpf_map_lookup_elem(map, key) != NULL;
}

/* One list's state after this level's marks: the nearest mark decides. */
static __always_inline void walk_note(__u32 *state, void *map, void *key, __u32 *kind_field,
				      __u32 dir_kind, __u32 exc_kind)
{
	if (*state != WALK_OPEN)
		return;
	if (has_kind(map, key, kind_field, dir_kind))
		*state = WALK_DENY;
	else if (has_kind(map, key, kind_field, exc_kind))
		*state = WALK_ALLOW;
}

/* Both lists' states after the marks of one key (the directory-entry walk). */
static __always_inline void note_marks(__u32 *base, __u32 *user, void *map, void *key,
				       __u32 *kind_field)
{
	walk_note(base, map, key, kind_field, AGENT_SANDBOX_KIND_DIR_BASE,
		  AGENT_SANDBOX_KIND_EXC_BASE);
	walk_note(user, map, key, kind_field, AGENT_SANDBOX_KIND_DIR_USER,
		  AGENT_SANDBOX_KIND_EXC_USER);
}

/* The same for an audit walk: audit directory entries, the same exceptions. */
static __always_inline void note_audit_marks(__u32 *base, __u32 *user, void *map, void *key,
					     __u32 *kind_field)
{
	walk_note(base, map, key, kind_field, AGENT_SANDBOX_KIND_AUDIT_DIR_BASE,
		  AGENT_SANDBOX_KIND_EXC_BASE);
	walk_note(user, map, key, kind_field, AGENT_SANDBOX_KIND_AUDIT_DIR_USER,
		  AGENT_SANDBOX_KIND_EXC_USER);
}

/*
 * The same for a read-only walk: a read-only file or name (KIND_RO) at any
 * level protects for both lists, whatever an exception says; the user's
 * own lists' directory (KIND_RO_DIR_OWN) for the base list; then the
 * read-only directory entries and the same lists' exceptions.
 */
static __always_inline void note_ro_marks(__u32 *base, __u32 *user, void *map, void *key,
					  __u32 *kind_field)
{
	if (has_kind(map, key, kind_field, AGENT_SANDBOX_KIND_RO)) {
		*base = *user = WALK_DENY;
		return;
	}
	if (*base == WALK_OPEN && has_kind(map, key, kind_field, AGENT_SANDBOX_KIND_RO_DIR_OWN))
		*base = WALK_DENY;
	walk_note(base, map, key, kind_field, AGENT_SANDBOX_KIND_RO_DIR_BASE,
		  AGENT_SANDBOX_KIND_EXC_BASE);
	walk_note(user, map, key, kind_field, AGENT_SANDBOX_KIND_RO_DIR_USER,
		  AGENT_SANDBOX_KIND_EXC_USER);
}

/*
 * One key's marks into the walk `c`, of the kinds `mode` says (a constant:
 * each mode has a callback of its own, walk_step*(), so that the verifier
 * explores in each only its own lookups; it explores a bpf_loop() callback
 * until its states converge, which a branch on the mode made several times
 * slower).
 */
static __always_inline void walk_marks(struct walk_ctx *c, void *map, void *key, __u32 *kind_field,
				       const __u32 mode)
{
	if (mode == WALK_MODE_AUDIT)
		note_audit_marks(&c->base, &c->user, map, key, kind_field);
	else if (mode == WALK_MODE_RO || mode == WALK_MODE_RO_MEMO)
		note_ro_marks(&c->base, &c->user, map, key, kind_field);
	else
		note_marks(&c->base, &c->user, map, key, kind_field);
}

/* Is the walk decided: a list denies, or both have decided? */
static __always_inline bool walk_decided(__u32 base, __u32 user)
{
	return base == WALK_DENY || user == WALK_DENY || (base != WALK_OPEN && user != WALK_OPEN);
}

/*
 * May a walk memo be made for a directory of a filesystem with magic
 * `magic`: one whose directory dentries move only in d_move() and
 * d_exchange() from vfs_rename() (ext2/3/4, XFS, btrfs, tmpfs, F2FS, and
 * ramfs: the initramfs's rootfs, below the real root after switch_root, so
 * every walk that leaves the root filesystem crosses into it)?
 */
static __always_inline bool memo_fs(unsigned long magic)
{
	return magic == EXT4_SUPER_MAGIC || magic == XFS_SUPER_MAGIC ||
	       magic == BTRFS_SUPER_MAGIC || magic == TMPFS_MAGIC || magic == F2FS_SUPER_MAGIC ||
	       magic == RAMFS_MAGIC;
}

/*
 * `v`, as a number the verifier does not know (a global function's answer
 * is any number to its caller; the empty asm keeps the compiler from
 * seeing through it). The walk's states pass through it once a level: a
 * bpf_loop() callback is explored until its states converge (6.8+), and
 * states the verifier knows converge only once every combination of them
 * was explored.
 */
__noinline __u32 walk_opaque(__u32 v)
{
	asm volatile("" : "+r"(v));
	return v;
}

/* The walk's states in `c`, made unknown to the verifier (walk_opaque()). */
static __always_inline void walk_forget(struct walk_ctx *c)
{
	__u32 w = walk_opaque((c->base & 3) | (c->user & 3) << 2 | (c->sb_base & 3) << 4 |
			      (c->sb_user & 3) << 6 | (c->at_sb & 1) << 8 |
			      (c->cross_memo & 1) << 9);

	c->base = w & 3;
	c->user = (w >> 2) & 3;
	c->sb_base = (w >> 4) & 3;
	c->sb_user = (w >> 6) & 3;
	c->at_sb = (w >> 8) & 1;
	c->cross_memo = (w >> 9) & 1;
}

/* One level of the walk, for the entries `mode` says (walk_step*() call it): 1 stops the loop. */
static __always_inline long walk_level(struct walk_ctx *c, const __u32 mode)
{
	struct dentry *d = (struct dentry *)c->dentry;
	struct dentry *parent;
	struct inode *inode;
	struct deny_key dk = {};
	struct name_key *nk;
	const unsigned char *name;
	__u32 zero = 0, len;
	__u64 ino, size;

	walk_forget(c);
	inode = BPF_CORE_READ(d, d_inode);
	if (inode) {
		ino = BPF_CORE_READ(inode, i_ino);
		if (filter_has(ino, AGENT_SANDBOX_FILTER_TAG_FILE)) {
			read_key(&dk.file, inode, ino);
			dk.cgid = c->cgid;
			walk_marks(c, &deny_map, &dk, &dk.file.kind, mode);
		}
	}
	parent = BPF_CORE_READ(d, d_parent);
	if (!parent || parent == d) {
		struct mount *m = (struct mount *)c->mnt;
		struct mount *up;

		if (WALK_MEMO_MODE(mode) && !c->at_sb) {
			c->at_sb = 1;
			c->sb_base = c->base;
			c->sb_user = c->user;
		}
		if (!m)
			goto root;
		up = BPF_CORE_READ(m, mnt_parent);
		if (!up || up == m)
			goto root;
		d = BPF_CORE_READ(m, mnt_mountpoint);
		c->dentry = (__u64)d;
		c->mnt = (__u64)up;
		if (WALK_MEMO_MODE(mode) && !memo_fs(BPF_CORE_READ(d, d_sb, s_magic)))
			c->cross_memo = 0;
		goto next;
	}
	inode = BPF_CORE_READ(parent, d_inode);
	if (inode) {
		ino = BPF_CORE_READ(inode, i_ino);
		if (filter_has(ino, AGENT_SANDBOX_FILTER_TAG_DIR)) {
			nk = bpf_map_lookup_elem(&name_scratch, &zero);
			if (!nk) {
				c->base = c->user = WALK_DENY; /* cannot happen; fail closed */
				goto next;
			}
			__builtin_memset(nk, 0, sizeof(*nk));
			nk->cgid = c->cgid;
			read_key(&nk->dir, inode, ino);
			len = BPF_CORE_READ(d, d_name.len);
			name = BPF_CORE_READ(d, d_name.name);
			if (len > 0 && len < AGENT_SANDBOX_NAME_LEN) {
				size = len;
				asm volatile("%[size] &= 255" : [size] "+r"(size));
				if (bpf_probe_read_kernel(nk->name, size, name))
					c->base = c->user =
						WALK_DENY; /* unreadable name: fail closed */
				else
					walk_marks(c, &name_map, nk, &nk->dir.kind, mode);
			}
		}
	}
	c->dentry = (__u64)parent;
next:
	if (walk_decided(c->base, c->user)) {
		c->done = 1;
		if (WALK_MEMO_MODE(mode) && !c->at_sb) {
			c->at_sb = 1;
			c->sb_base = c->base;
			c->sb_user = c->user;
		}
		return 1;
	}
	return 0;
root:
	c->done = 1;
	return 1;
}

/*
 * One level of the walk for each mode (bpf_loop() callbacks): 1 stops the
 * loop. Only the walk that makes memos keeps the superblock states: every
 * field a callback writes multiplies the states the verifier explores
 * until they converge.
 */
static long walk_step_memo(__u64 index, void *ctx)
{
	return walk_level(ctx, WALK_MODE_READ_MEMO);
}

static long walk_step_audit(__u64 index, void *ctx)
{
	return walk_level(ctx, WALK_MODE_AUDIT);
}

static long walk_step_ro_memo(__u64 index, void *ctx)
{
	return walk_level(ctx, WALK_MODE_RO_MEMO);
}

/* The first word of a seqlock_t at `lock` (its sequence count), or 0 if the kernel symbol is unknown. */
static __always_inline __u32 seq_of(const void *lock)
{
	__u32 seq = 0;

	if (lock)
		bpf_probe_read_kernel(&seq, sizeof(seq), lock);
	return seq;
}

/*
 * The walk of sandbox `cgid` from the (possibly negative) dentry at address
 * `dentry`, on mount `mnt` (struct mount address, 0 to not cross mounts),
 * at most `depth` levels, into `c`, for the entries `mode` says
 * (WALK_MODE_*). False when renames overlapped both attempts (then nothing
 * in `c` may be used).
 */
static __always_inline bool walk_from_as(struct walk_ctx *c, __u64 cgid, __u64 dentry, __u64 mnt,
					 __u32 depth, __u32 mode, bool fail_closed)
{
	__u32 seq;
	int attempt;

	for (attempt = 0; attempt < 2; attempt++) {
		seq = seq_of(&rename_lock);
		__builtin_memset(c, 0, sizeof(*c));
		c->cgid = cgid;
		c->dentry = dentry;
		c->mnt = mnt;
		c->cross_memo = 1;
		if (mode == WALK_MODE_AUDIT)
			bpf_loop(depth, walk_step_audit, c, 0);
		else if (mode == WALK_MODE_RO_MEMO)
			bpf_loop(depth, walk_step_ro_memo, c, 0);
		else
			bpf_loop(depth, walk_step_memo, c, 0);
		if (!(seq & 1) && seq_of(&rename_lock) == seq) {
			if (!c->done && fail_closed) {
				/*
				 * Out of levels: fail closed, for both lists, so that
				 * no nearer exception can re-allow.
				 */
				c->base = c->user = WALK_DENY;
				if (!c->at_sb)
					c->sb_base = c->sb_user = WALK_DENY;
			}
			return true;
		}
	}
	return false;
}

/*
 * A walk's answer packed into an int (what a global function can return):
 * both lists' states at the top (bits 0-1, 2-3), as the first superblock
 * root was reached (bits 4-5, 6-7), whether every mount crossed leads to a
 * filesystem memo_fs() accepts (bit 8), and, alone, that renames
 * overlapped both attempts (MEMO_WALK_FAILED: nothing else may be used).
 */
#define MEMO_WALK_FAILED (1 << 9)
#define MEMO_WALK_STATE(r, shift) (((r) >> (shift)) & 3)
#define MEMO_WALK_CROSS(r) (((r) >> 8) & 1)
/* Does packed answer `r` deny (or did the walk fail: fail closed)? */
#define MEMO_WALK_DENIES(r)                                                                       \
	(((r) & MEMO_WALK_FAILED) || MEMO_WALK_STATE(r, 0) == WALK_DENY ||                         \
	 MEMO_WALK_STATE(r, 2) == WALK_DENY)

/* walk_from_as() of `mode` (a constant), packed as above. */
static __always_inline int walk_packed(__u64 cgid, __u64 dentry, __u64 mnt, __u32 depth,
				       bool fail_closed, const __u32 mode)
{
	struct walk_ctx c;

	if (!walk_from_as(&c, cgid, dentry, mnt, depth, mode, fail_closed))
		return MEMO_WALK_FAILED;
	return (c.base & 3) | (c.user & 3) << 2 | (c.sb_base & 3) << 4 | (c.sb_user & 3) << 6 |
	       (c.cross_memo & 1) << 8;
}

/*
 * The walk for directory entries from the (possibly negative) dentry at
 * address `dentry` on mount `mnt` (0: within its filesystem), `depth`
 * levels at most (fail closed past them), packed as above; and the same
 * for read-only entries (`fail_closed`: whether running out of levels
 * denies: a two-level read-only walk does not). Global functions: the
 * verifier checks each once per program, whatever state a caller reaches
 * it with (inlined, a bpf_loop() callback was explored again for each
 * caller, which made the load several times slower on 6.12 and 7.x); one
 * for every use of its kind (a whole walk, a memo's walk from the
 * directory), so that each program verifies one callback of each kind.
 */
__noinline int read_walk(__u64 cgid, __u64 dentry, __u64 mnt, __u32 depth)
{
	return walk_packed(cgid, dentry, mnt, depth, true, WALK_MODE_READ_MEMO);
}

__noinline int ro_walk(__u64 cgid, __u64 dentry, __u64 mnt, __u32 depth, __u32 fail_closed)
{
	return walk_packed(cgid, dentry, mnt, depth, fail_closed != 0, WALK_MODE_RO_MEMO);
}

/* repo.bpf.h: the repository guard, which the read-only checks below apply too. */
__noinline int repo_guarded(__u64 cgid, __u64 d, __u32 how);

/*
 * repo_guarded()'s `how`: the dentry is about to become a directory or
 * symlink (mkdir, symlink, a rename of one), or is a directory (rmdir).
 */
#define REPO_MAKES_DIR 1U
#define REPO_IS_DIR 2U

/*
 * Could repo_guarded() refuse BTF-typed dentry `d`, a file unless `how`
 * says otherwise? Two direct loads: only a directory or a name of one of
 * the guard's lengths (`.git` 4, `hooks` 5, `config` 6, `modules` 7,
 * `commondir` and `worktrees` 9, `config.worktree` 15) or in a directory
 * named like `hooks` can be, so most writes skip its probe reads.
 */
static __always_inline bool repo_may_guard(struct dentry *d, __u32 how)
{
	__u32 l0 = d->d_name.len, l1 = d->d_parent->d_name.len;

	return how || l0 == 4 || l0 == 5 || l0 == 6 || l0 == 7 || l0 == 9 || l0 == 15 || l1 == 5;
}

/*
 * ro_walk_denied()'s walk: the whole walk where the sandbox has read-only
 * directory entries (SBX_RO_DIRS), else two levels. 1: refused.
 */
static __always_inline int ro_walk_refused(__u64 cgid, __u32 sbx, __u64 dentry, __u64 mnt)
{
	bool whole = sbx & SBX_RO_DIRS;

	if (!dentry)
		return 0;
	return MEMO_WALK_DENIES(
		ro_walk(cgid, dentry, mnt, whole ? AGENT_SANDBOX_WALK_DEPTH : 2, whole));
}

/*
 * Is the (possibly negative) dentry at address `dentry` read-only for
 * sandbox `cgid` of sandbox_of() `sbx`: a read-only file or name at it, or
 * a read-only directory entry above it that no nearer exception of the same
 * list re-allows (on mount `mnt`, 0 to not cross mounts)? Only sandboxes
 * with read-only entries walk, and only two levels (the dentry and its
 * parent) where KIND_RO_DIR_OWN is their only directory entry
 * (agent_sandbox.h). Refused past the depth bound of a whole walk or when
 * renames overlap both attempts (fail closed).
 */
static __always_inline bool ro_walk_denied(__u64 cgid, __u32 sbx, __u64 dentry, __u64 mnt)
{
	return (sbx & SBX_RO) && ro_walk_refused(cgid, sbx, dentry, mnt) != 0;
}

/*
 * Could a two-level read-only walk from BTF-typed dentry `d` find a mark:
 * is one of the key_filter bits it would look at set (the inode of `d` and
 * of its parent by FILTER_TAG_FILE, the parent and grandparent by
 * FILTER_TAG_DIR for the names)? Direct loads, no helper call but the two
 * reads of rename_lock's count and, where the caller does not give `d`'s
 * inode as `self` (an open file's f_inode, `d` its own dentry), two probe
 * reads for it (d_inode is trusted, taken for never NULL: see positive()),
 * so that a write far from every read-only entry costs a few loads
 * instead of the walk. Also true where the walk would see what these
 * loads cannot: a filesystem root on the way (the walk crosses mounts) or
 * a rename while they ran (rename_lock's count moved: the chain read may
 * be stale). False only when the walk would find nothing.
 */
static __always_inline bool ro_near_marks(struct dentry *d, struct inode *self)
{
	struct dentry *p, *gp;
	struct inode *inode = NULL;
	__u32 seq = seq_of(&rename_lock);

	if (seq & 1)
		return true;
	if (self) {
		if (filter_has(self->i_ino, AGENT_SANDBOX_FILTER_TAG_FILE))
			return true;
	} else {
		BPF_CORE_READ_INTO(&inode, d, d_inode);
		if (inode && filter_has(BPF_CORE_READ(inode, i_ino), AGENT_SANDBOX_FILTER_TAG_FILE))
			return true;
	}
	p = d->d_parent;
	if (!p || p == d)
		return true;
	inode = p->d_inode;
	if (!inode || filter_has(inode->i_ino, AGENT_SANDBOX_FILTER_TAG_FILE) ||
	    filter_has(inode->i_ino, AGENT_SANDBOX_FILTER_TAG_DIR))
		return true;
	gp = p->d_parent;
	if (!gp || gp == p)
		return true;
	inode = gp->d_inode;
	if (!inode || filter_has(inode->i_ino, AGENT_SANDBOX_FILTER_TAG_DIR))
		return true;
	return seq_of(&rename_lock) != seq;
}

/*
 * Does a directory entry of sandbox `cgid` deny the (possibly negative)
 * dentry at address `dentry`, on mount `mnt` (0: within its filesystem)?
 * Denied past the depth bound or when renames overlap both attempts.
 */
static __always_inline bool walk_denied(__u64 cgid, __u64 dentry, __u64 mnt)
{
	return MEMO_WALK_DENIES(read_walk(cgid, dentry, mnt, AGENT_SANDBOX_WALK_DEPTH));
}

/*
 * The walk a memo keeps: from the directory dentry at address `dentry` on
 * mount `mnt` (0: within its filesystem), one level less than a whole walk
 * (the name's own level is judged by the caller), packed as above.
 */
static __always_inline int memo_walk(__u64 cgid, __u64 dentry, __u64 mnt)
{
	return read_walk(cgid, dentry, mnt, AGENT_SANDBOX_WALK_DEPTH - 1);
}

/* memo_walk() for read-only entries. */
static __always_inline int ro_memo_walk(__u64 cgid, __u64 dentry, __u64 mnt)
{
	return ro_walk(cgid, dentry, mnt, AGENT_SANDBOX_WALK_DEPTH - 1, 1);
}

/*
 * The marks of one level reached through BTF pointers: inode `inode` (only
 * looked at where `bits` has BIT_FILE), named `dentry` in directory `dir`,
 * whose key_filter bits the caller found (BIT_FILE, BIT_DIR: `how` & 0xff);
 * the states of both lists, packed as base | user << 2, for the entries
 * walk mode `how` >> 8 (WALK_MODE_READ or WALK_MODE_RO) looks for (BPF
 * calls take five arguments). Not inlined: its
 * key and name lookups keep their registers and stack to themselves, out of
 * file_open's frame (6.1's bound on a chain of frames); most levels have
 * no bit set and do not call it.
 */
static __noinline __u32 level_marks_of(__u64 cgid, struct inode *inode, struct dentry *dentry,
				       struct inode *dir, __u32 how)
{
	__u32 base = WALK_OPEN, user = WALK_OPEN, bits = how & 0xff, mode = how >> 8;
	struct deny_key dk;
	struct name_key *nk;
	__u32 zero = 0, len;
	__u64 size;

	if ((bits & BIT_FILE) && inode) {
		__builtin_memset(&dk, 0, sizeof(dk));
		fill_key(&dk.file, inode);
		dk.cgid = cgid;
		if (mode == WALK_MODE_RO)
			note_ro_marks(&base, &user, &deny_map, &dk, &dk.file.kind);
		else
			note_marks(&base, &user, &deny_map, &dk, &dk.file.kind);
	}
	if (!(bits & BIT_DIR))
		return base | user << 2;
	nk = bpf_map_lookup_elem(&name_scratch, &zero);
	if (!nk)
		return WALK_DENY | WALK_DENY << 2; /* cannot happen; fail closed */
	__builtin_memset(nk, 0, sizeof(*nk));
	nk->cgid = cgid;
	fill_key(&nk->dir, dir);
	len = dentry->d_name.len;
	if (len == 0 || len >= AGENT_SANDBOX_NAME_LEN)
		return base | user << 2;
	size = len;
	asm volatile("%[size] &= 255" : [size] "+r"(size));
	if (bpf_probe_read_kernel(nk->name, size, dentry->d_name.name))
		return WALK_DENY | WALK_DENY << 2; /* unreadable name: fail closed */
	if (mode == WALK_MODE_RO)
		note_ro_marks(&base, &user, &name_map, nk, &nk->dir.kind);
	else
		note_marks(&base, &user, &name_map, nk, &nk->dir.kind);
	return base | user << 2;
}

/* memo_walk_denied(): no memo can be used; walk from the name itself. */
#define PATH_WALK_WHOLE 2

/*
 * The walk of `mode` (WALK_MODE_READ: directory entries; WALK_MODE_RO:
 * read-only entries; a constant) for inode `self` (only looked at where
 * `bits` has BIT_FILE; a negative dentry has none) named `dentry` in
 * directory `parent`, whose inode is `dir` (read once by the caller: a
 * rename between two reads would pair one directory's memo with another's
 * walk), and whose key_filter bits are `bits`: this level here, the rest
 * from the memo of `dir` (its part for `mode`), or walked from `parent`
 * and then kept in that memo beside the other part. `vmnt`: the address
 * of the path's vfsmount, where the walk crosses the mounts above it, or 0
 * where it stops at the superblock's root (a hook that has no path); its
 * struct mount is computed only for a walk (a memo that answers needs
 * none: one probe read less on every open that uses one). 1: denied, 0: allowed, PATH_WALK_WHOLE: the
 * caller walks from the name (a mark on its own level, or a dentry that
 * is its own parent).
 */
static __always_inline int memo_walk_denied(__u64 cgid, const __u32 mode, struct inode *self,
					    struct dentry *dentry, struct dentry *parent,
					    struct inode *dir, __u32 bits, __u64 vmnt)
{
	const __u32 at = mode == WALK_MODE_RO ? AGENT_SANDBOX_MEMO_RO : AGENT_SANDBOX_MEMO_READ;
	const __u32 other = 1 - at;
	/* fresh and mk are zeroed only where used: not on the path of a memo that answers. */
	struct walk_memo *memo, fresh;
	struct walk_memo_part *part;
	struct memo_key mk;
	struct walk_gens *gens;
	__u32 base = WALK_OPEN, user = WALK_OPEN, zero = 0, carry = 0;
	__u32 mseq, rest_base, rest_user;
	__u64 marks, moves, mnt = 0;
	int r;
	__u64 p = 0;

	if (bits) {
		r = level_marks_of(cgid, self, dentry, dir, bits | mode << 8);
		base = r & 3;
		user = r >> 2;
	}
	if (base == WALK_DENY || user == WALK_DENY)
		return true;
	/*
	 * A mark on the name's own level (an exception, or a walk that failed
	 * closed there): one walk from the name itself, as without memos. A
	 * walk from the parent stops at the first deny and leaves the other
	 * list unwalked, which the name's exception must not then override.
	 */
	if (base != WALK_OPEN || user != WALK_OPEN)
		goto whole;
	gens = bpf_map_lookup_elem(&walk_gens, &zero);
	if (!gens)
		return true; /* cannot happen; fail closed */
	/* Once: the memo is judged and the new one stamped under the same counts. */
	marks = gens->marks;
	moves = gens->moves;
	if (walk_memo_store == MEMO_INODE_STORAGE) {
		memo = bpf_inode_storage_get(&walk_memos, dir, 0, 0);
	} else {
		__builtin_memset(&mk, 0, sizeof(mk));
		/* The address as a number (a key), not a pointer. */
		bpf_probe_read_kernel(&mk.inode, sizeof(mk.inode), &dir);
		mk.ino = dir->i_ino;
		memo = bpf_map_lookup_elem(&walk_memo_hash, &mk);
	}
	if (memo && memo->cgid == cgid && memo->marks_gen == marks && memo->moves_gen == moves) {
		if (memo->parts & (1U << at)) {
			part = &memo->part[at];
			rest_base = part->sb_base;
			rest_user = part->sb_user;
			/* Decided within the superblock, or a walk that stops at its root. */
			if (walk_decided(rest_base, rest_user) || !vmnt)
				goto combine;
			if (part->mnt == vmnt && &mount_lock) {
				mseq = seq_of(&mount_lock);
				if (!(mseq & 1) && mseq == part->mount_seq) {
					rest_base = part->full_base;
					rest_user = part->full_user;
					goto combine;
				}
			}
		}
		/*
		 * The other walk's part stays (made under the same counts), in
		 * inode storage only: an element of the preallocated LRU hash
		 * can be reused while another CPU reads it, and a part copied
		 * from a half-read element would stay.
		 */
		if (walk_memo_store == MEMO_INODE_STORAGE && (memo->parts & (1U << other)))
			carry = 1;
	}
	/* No memo to use: walk from the parent, then keep the result there. */
	__builtin_memset(&fresh, 0, sizeof(fresh));
	if (carry && memo) {
		fresh.part[other] = memo->part[other];
		fresh.parts = 1U << other;
	}
	fresh.cgid = cgid;
	fresh.marks_gen = marks;
	fresh.moves_gen = moves;
	mseq = seq_of(&mount_lock);
	bpf_probe_read_kernel(&p, sizeof(p), &parent);
	/* Pipes, sockets, memfds, nsfs (d_alloc_pseudo()): their own parent, no directory to keep a memo on. */
	if (p == dentry_addr(dentry))
		goto whole;
	/* The struct mount of the path, through a probe read, so that the walk's arithmetic is on a number. */
	if (vmnt) {
		bpf_probe_read_kernel(&mnt, sizeof(mnt), &vmnt);
		mnt -= bpf_core_field_offset(struct mount, mnt);
	}
	if (mode == WALK_MODE_RO)
		r = ro_memo_walk(cgid, p, mnt);
	else
		r = memo_walk(cgid, p, mnt);
	if (r & MEMO_WALK_FAILED)
		return true;
	rest_base = MEMO_WALK_STATE(r, 0);
	rest_user = MEMO_WALK_STATE(r, 2);
	/*
	 * Not on an encrypted directory (fscrypt): a locked one's names are
	 * no-key names until the key is added, which changes them without a
	 * rename (and its subdirectories are all encrypted too).
	 */
	if (memo_fs(sb_of(dir)->s_magic) && !(dir->i_flags & S_ENCRYPTED)) {
		part = &fresh.part[at];
		part->sb_base = MEMO_WALK_STATE(r, 4);
		part->sb_user = MEMO_WALK_STATE(r, 6);
		part->full_base = rest_base;
		part->full_user = rest_user;
		if (MEMO_WALK_CROSS(r) && &mount_lock && !(mseq & 1) && vmnt) {
			part->mnt = vmnt;
			part->mount_seq = mseq;
		}
		fresh.parts |= 1U << at;
		if (walk_memo_store == MEMO_INODE_STORAGE) {
			bpf_inode_storage_delete(&walk_memos, dir);
			bpf_inode_storage_get(&walk_memos, dir, &fresh,
					      BPF_LOCAL_STORAGE_GET_F_CREATE);
		} else {
			/* Replaced whole: a reader sees the old memo or this one. */
			bpf_map_update_elem(&walk_memo_hash, &mk, &fresh, BPF_ANY);
		}
	}
combine:
	/* Both lists were OPEN at the name's own level: the rest decides. */
	return rest_base == WALK_DENY || rest_user == WALK_DENY;
whole:
	return PATH_WALK_WHOLE;
}

/*
 * The directory-entry walk for a file opened on its own path (its dentry is
 * the file's; `bits` from open_denied()), with memos (memo_walk_denied()),
 * from the hook's trusted `file`: inode storage refuses an untrusted inode.
 */
static __always_inline int path_walk_denied(__u64 cgid, struct file *file, __u32 bits)
{
	struct dentry *dentry = file->f_path.dentry;
	struct dentry *parent = dentry->d_parent;

	return memo_walk_denied(cgid, WALK_MODE_READ, file->f_inode, dentry, parent,
				parent->d_inode, bits, (__u64)file->f_path.mnt);
}

/*
 * The read-only walk of a sandbox with read-only directory entries
 * (SBX_RO_DIRS) for the name `dentry` in directory `parent` (inode `dir`,
 * read once by the caller), of inode `self` where `has_inode` (a negative
 * dentry's d_inode is not loaded: see keys.bpf.h, positive()), with memos
 * (memo_walk_denied(): `vmnt` as there). 1: refused, 0: allowed,
 * PATH_WALK_WHOLE: walk from the name.
 */
static __always_inline int ro_memo_denied(__u64 cgid, struct inode *self, bool has_inode,
					  struct dentry *dentry, struct dentry *parent,
					  struct inode *dir, __u64 vmnt)
{
	__u32 bits = 0;

	if (walk_memo_store == MEMO_NONE || !dir)
		return PATH_WALK_WHOLE;
	/*
	 * Both tests: `has_inode` for 6.6 to 6.12, whose verifier takes
	 * d_inode for never NULL and may drop a test of the pointer; the
	 * pointer's own for 7.x, whose verifier takes it for nullable.
	 */
	if (has_inode && self && filter_has(self->i_ino, AGENT_SANDBOX_FILTER_TAG_FILE))
		bits |= BIT_FILE;
	if (filter_has(dir->i_ino, AGENT_SANDBOX_FILTER_TAG_DIR))
		bits |= BIT_DIR;
	return memo_walk_denied(cgid, WALK_MODE_RO, self, dentry, parent, dir, bits, vmnt);
}

/*
 * ro_walk_denied() for BTF-typed dentry `d` (the hooks that have one), in
 * directory `dir` (the hook's own argument, or NULL where it has none),
 * `how` repo_guarded()'s (REPO_MAKES_DIR: `d` is to be a directory),
 * within its filesystem: where the walk is two levels (no read-only
 * directory entry but the user's own lists'), ro_near_marks() first, and
 * the walk only if it answers yes; where it is whole, from the memo of
 * `dir` (ro_memo_denied()), walking only when that memo is missing or
 * stale.
 */
static __always_inline bool ro_dentry_denied(__u64 cgid, __u32 sbx, struct dentry *d,
					     struct inode *dir, __u32 how)
{
	int verdict;

	if (!(sbx & SBX_RO))
		return false;
	if (repo_may_guard(d, how) && repo_guarded(cgid, dentry_addr(d), how))
		return true;
	if (!(sbx & SBX_RO_DIRS) && !ro_near_marks(d, NULL))
		return false;
	if ((sbx & SBX_RO_DIRS) && dir) {
		/* The hook holds `dir` locked: d's parent stays d_parent. */
		verdict = ro_memo_denied(cgid, d->d_inode, positive(d), d, d->d_parent, dir, 0);
		if (verdict != PATH_WALK_WHOLE)
			return verdict;
	}
	return ro_walk_refused(cgid, sbx, dentry_addr(d), 0) != 0;
}

/*
 * Where a walk for open file `file` starts, as numbers (what the global
 * walk functions take): its dentry and the struct mount of its path, or, for
 * a backing file that overlayfs opened with the overlay's path (6.1:
 * open_with_fake_path()), the real inode's first alias and no mount (`*mnt`
 * 0: within its filesystem). False when that inode has no alias.
 */
static __always_inline bool file_walk_start(struct file *file, __u64 *d, __u64 *mnt)
{
	struct inode *inode = file->f_inode;
	struct dentry *dentry = file->f_path.dentry;
	struct hlist_node *first;

	*d = 0;
	*mnt = 0;
	if (dentry->d_inode == inode) {
		BPF_CORE_READ_INTO(mnt, file, f_path.mnt);
		if (*mnt)
			*mnt -= bpf_core_field_offset(struct mount, mnt);
		bpf_probe_read_kernel(d, sizeof(*d), &dentry);
		return true;
	}
	first = inode->i_dentry.first;
	if (!first)
		return false;
	bpf_probe_read_kernel(d, sizeof(*d), &first);
	*d -= dentry_alias_offset();
	return true;
}

/*
 * The walk for an opened file (`bits` from open_denied()): from its dentry
 * on its mount (with memos where `memos`, a constant: file_open's, and the
 * dentry is the file's own, BIT_OWN; file_receive, rare, walks whole),
 * or, for a backing file that overlayfs opened with the overlay's path (6.1:
 * open_with_fake_path()), from the real inode's first alias without
 * crossing mounts.
 */
static __always_inline bool open_walk_denied(__u64 cgid, struct file *file, struct file *fv,
					     __u32 bits, const bool memos)
{
	__u64 d, mnt;
	int verdict;

	if (memos && walk_memo_store != MEMO_NONE && (bits & BIT_OWN)) {
		verdict = path_walk_denied(cgid, file, bits);
		if (verdict != PATH_WALK_WHOLE)
			return verdict;
	}
	if (!file_walk_start(fv, &d, &mnt))
		return false;
	return walk_denied(cgid, d, mnt);
}

/*
 * After a rename (vfs_rename() in fs/namei.c, the one caller of d_move()
 * and d_exchange() for a rename on a local filesystem): every file memo is
 * stale (walk_gens.names), and, if it moved a directory, every walk memo
 * (walk_gens.moves; a rename of a non-directory changes no walk memo).
 * Runs for every task.
 */
SEC("fexit/vfs_rename")
int BPF_PROG(vfs_rename_exit, struct renamedata *rd, int ret)
{
	struct inode *moved, *other;
	struct walk_gens *gens;
	__u32 zero = 0;

	if (ret != 0)
		return 0;
	gens = bpf_map_lookup_elem(&walk_gens, &zero);
	if (!gens)
		return 0;
	/* Every rename renames a file: its file memo (file_memo.bpf.h) is stale. */
	__sync_fetch_and_add(&gens->names, 1);
	/*
	 * Direct loads through the BTF-typed argument (every rename of the
	 * machine runs this: a probe read each cost about 40 instructions more).
	 */
	moved = rd->old_dentry->d_inode;
	other = rd->new_dentry->d_inode;
	if ((moved && (moved->i_mode & S_IFMT) == S_IFDIR) ||
	    ((rd->flags & RENAME_EXCHANGE) && other && (other->i_mode & S_IFMT) == S_IFDIR))
		__sync_fetch_and_add(&gens->moves, 1);
	return 0;
}

/* ---- end of directory entries and exceptions ---------------------------- */

#endif /* AGENT_SANDBOX_WALK_BPF_H */
