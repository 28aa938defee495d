/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The repository guard (list line `readonly **` then `/.git/`, deny_map key
 * KIND_REPO_GUARD): in every git repository, cloned before or after the
 * launch, a sandboxed task may not change what git runs or takes its
 * configuration from, which the user's next `git status` or `git commit`
 * outside would run with the user's rights (`core.fsmonitor`,
 * `core.hooksPath`, a hook). By the names of the dentry and of the
 * directories above it (live, no path strings; repo_guarded()), with G the
 * nearest `.git` above (or at) the dentry, and a git directory being G, a
 * directory directly in G/worktrees, or one below G/.../modules (a
 * submodule's, whose name may hold `/`) reached through no name git makes
 * inside a git directory (repo_internal: objects, refs, logs, ...), it
 * refuses:
 *   - in a git directory: a change, creation, removal or rename of
 *     `config`, `config.worktree`, `commondir` (it moves where git reads
 *     `config` from) and `hooks`, and of every name directly in `hooks`;
 *   - G itself, a submodule's git directory, G/modules and G/worktrees
 *     that exist: no rename, removal or change (no swap for another);
 *   - a new G/modules, and a new directory or symlink below G/.../modules
 *     (not below a name of repo_internal): a submodule's git directory
 *     planted before the user initialises it;
 *   - a new `.git` (a directory, a `gitdir:` file, a symlink, made or
 *     moved there) in a directory no sandboxed task of the uid made, so
 *     that no directory of the user's becomes a repository (or a
 *     repository above one, which git falls back to when it finds the
 *     nearer `.git` unusable).
 * Names compare ASCII case-insensitively (a case-insensitive directory
 * finds `CONFIG` for `config`).
 *
 * Every directory a sandboxed task makes is recorded (fexit/vfs_mkdir) in
 * made_dirs with the task's uid and the inode's generation; a git
 * directory so made (G, or the git directory itself) is not guarded for
 * sandboxed tasks of that uid: `git init` and `git clone` inside write its
 * config and hook samples, and the agent's own repository is the agent's.
 * The record goes with the directory's inode (inode_free_security), so a
 * directory read back from disk after eviction is the user's again (fail
 * closed), as is every directory after the maps are made anew.
 *
 * Uses: maps.bpf.h, gate.bpf.h, walk.bpf.h (read_key()). Hooks:
 * fexit/vfs_mkdir. repo_guarded() is declared in walk.bpf.h, whose
 * read-only checks call it.
 */
#ifndef AGENT_SANDBOX_REPO_BPF_H
#define AGENT_SANDBOX_REPO_BPF_H

/* repo_name_of()'s answers. */
#define REPO_NAME_OTHER 0
#define REPO_NAME_GIT 1
#define REPO_NAME_HOOKS 2
#define REPO_NAME_CONFIG 3	/* config, config.worktree, commondir */
#define REPO_NAME_MODULES 4
#define REPO_NAME_WORKTREES 5
#define REPO_NAME_INTERNAL 6	/* a directory git makes inside a git directory */

/* Levels repo_guarded() reads: the dentry and the directories above it. */
#define REPO_DEPTH 16

/* Every byte or-ed with 0x20: ASCII letters compare without case. */
#define REPO_FOLD 0x2020202020202020ULL

/*
 * Is the name in `w` (its first 16 bytes, zero after its `len` bytes, each
 * word or-ed with REPO_FOLD) the `n` bytes of `lit`? Besides the upper
 * case, a control byte 0x00-0x1f may match a byte 0x20 higher: a name no
 * tool makes, guarded for nothing worse than being unwritable.
 */
static __always_inline bool repo_name_is(const __u64 *w, __u32 len, const char *lit, __u32 n)
{
	__u64 c[2] = {};
	int i;

	if (len != n)
		return false;
	/* Folded to constants by the compiler (no copy on the stack). */
	for (i = 0; i < 16; i++)
		if (i < n)
			c[i / 8] |= (__u64)(unsigned char)lit[i] << (8 * (i % 8));
	return w[0] == (c[0] | REPO_FOLD) && w[1] == (c[1] | REPO_FOLD);
}

/*
 * Which of the guard's names (REPO_NAME_*) the dentry at address `d` has
 * (REPO_NAME_OTHER for 0). Probe reads only. A global function: the
 * verifier checks its many branches once per program, and its callers
 * see its answer as a number it does not know (one state per level of
 * repo_guarded()'s walk, not one per name a level could have).
 */
__noinline int repo_name_of(__u64 d)
{
	struct dentry *dentry = (struct dentry *)d;
	const unsigned char *name = NULL;
	__u64 w[2] = {};
	__u32 len = 0;

	if (!d)
		return REPO_NAME_OTHER;
	BPF_CORE_READ_INTO(&len, dentry, d_name.len);
	BPF_CORE_READ_INTO(&name, dentry, d_name.name);
	if (len < 3 || len > 15 || !name)
		return REPO_NAME_OTHER;
	if (bpf_probe_read_kernel(w, len & 15, name))
		return REPO_NAME_OTHER;
	w[0] |= REPO_FOLD;
	w[1] |= REPO_FOLD;
	switch (len) {
	case 3:
		return repo_name_is(w, len, "lfs", 3) ? REPO_NAME_INTERNAL : REPO_NAME_OTHER;
	case 4:
		if (repo_name_is(w, len, ".git", 4))
			return REPO_NAME_GIT;
		return (repo_name_is(w, len, "refs", 4) || repo_name_is(w, len, "logs", 4) ||
			repo_name_is(w, len, "info", 4)) ? REPO_NAME_INTERNAL : REPO_NAME_OTHER;
	case 5:
		return repo_name_is(w, len, "hooks", 5) ? REPO_NAME_HOOKS : REPO_NAME_OTHER;
	case 6:
		return repo_name_is(w, len, "config", 6) ? REPO_NAME_CONFIG : REPO_NAME_OTHER;
	case 7:
		if (repo_name_is(w, len, "modules", 7))
			return REPO_NAME_MODULES;
		return (repo_name_is(w, len, "objects", 7) || repo_name_is(w, len, "remotes", 7)) ?
			REPO_NAME_INTERNAL : REPO_NAME_OTHER;
	case 8:
		return (repo_name_is(w, len, "rr-cache", 8) || repo_name_is(w, len, "branches", 8)) ?
			REPO_NAME_INTERNAL : REPO_NAME_OTHER;
	case 9:
		if (repo_name_is(w, len, "commondir", 9))
			return REPO_NAME_CONFIG;
		if (repo_name_is(w, len, "worktrees", 9))
			return REPO_NAME_WORKTREES;
		return repo_name_is(w, len, "sequencer", 9) ? REPO_NAME_INTERNAL : REPO_NAME_OTHER;
	case 12:
		return (repo_name_is(w, len, "rebase-merge", 12) ||
			repo_name_is(w, len, "rebase-apply", 12)) ? REPO_NAME_INTERNAL : REPO_NAME_OTHER;
	case 15:
		return repo_name_is(w, len, "config.worktree", 15) ? REPO_NAME_CONFIG : REPO_NAME_OTHER;
	}
	return REPO_NAME_OTHER;
}

/* The parent of the dentry at address `d`, as an address (0 when `d` is 0). */
static __always_inline __u64 repo_parent(__u64 d)
{
	__u64 parent = 0;

	if (d)
		BPF_CORE_READ_INTO(&parent, (struct dentry *)d, d_parent);
	return parent;
}

/* The inode at dentry address `d`, as a number (0 for a negative dentry). */
static __always_inline __u64 repo_inode(__u64 d)
{
	struct inode *inode = NULL;

	BPF_CORE_READ_INTO(&inode, (struct dentry *)d, d_inode);
	return (__u64)inode;
}

/*
 * What repo_guarded()'s walk read of a path, as bit masks over its levels
 * (bit L: level L, 0 the dentry, up to the nearest `.git`, excluded): the
 * levels named like a directory git makes inside a git directory
 * (REPO_NAME_INTERNAL), `modules` and `worktrees`. Built without a branch
 * per name, so the verifier follows one path through the walk.
 */
struct repo_masks {
	__u32 internal;
	__u32 modules;
	__u32 worktrees;
};

/* 1 at bit `lv` when name class `n` (repo_name_of()) is `cls`, else 0. */
#define REPO_LEVEL_BIT(n, cls, lv) ((((1U << ((n) & 7)) >> (cls)) & 1U) << (lv))

/*
 * Is level `lv` (0-2) below the nearest `modules` (the lowest level so
 * named below the `.git` at level `git`, 0-15) through no repo_internal
 * name, `m` the walk's masks? Arithmetic only.
 */
static __always_inline bool repo_below_modules(const struct repo_masks *m, __u32 git, __u32 lv)
{
	__u32 first = m->modules & ((1U << git) - 1);

	first &= -first;
	return first > (1U << lv) && !(m->internal & (first - 1) & ~((1U << lv) - 1));
}

/*
 * Is level `lv` (0-2) a git directory, with the nearest `.git` at level
 * `git` (0-15): the `.git` itself, a directory directly in its
 * `worktrees`, or one below its nearest `modules` (repo_below_modules())?
 */
static __always_inline bool repo_git_dir_at(const struct repo_masks *m, __u32 git, __u32 lv)
{
	return lv == git || (lv + 2 == git && ((m->worktrees >> (lv + 1)) & 1)) ||
	       repo_below_modules(m, git, lv);
}

/*
 * Is the directory at dentry address `d` recorded in made_dirs as made by
 * a sandboxed task of the current uid (its inode's generation too)? `k`:
 * room for its key.
 */
static __always_inline bool repo_made_here(__u64 d, struct file_key *k)
{
	struct inode *inode = (struct inode *)repo_inode(d);
	struct made_dir *m;

	if (!inode)
		return false;
	read_key(k, inode, BPF_CORE_READ(inode, i_ino));
	m = bpf_map_lookup_elem(&made_dirs, k);
	return m && m->uid == (__u32)bpf_get_current_uid_gid() &&
	       m->generation == BPF_CORE_READ(inode, i_generation);
}

/*
 * repo_guarded()'s answer once it found a name the guard covers: 1 if
 * sandbox `cgid` has the guard (KIND_REPO_GUARD) and neither the directory
 * at address `first` (the git directory concerned, or the directory a new
 * `.git` goes in) nor, unless 0, the `.git` at address `second` was made
 * by a sandboxed task of the current uid. A global function of its own, so
 * that its key is not on repo_guarded()'s stack (file_open's, repo_guarded()'s and
 * repo_name_of()'s frames share the 512 bytes).
 */
__noinline int repo_refuses(__u64 cgid, __u64 first, __u64 second)
{
	struct deny_key dk = {};

	dk.cgid = cgid;
	dk.file.kind = AGENT_SANDBOX_KIND_REPO_GUARD;
	if (!bpf_map_lookup_elem(&deny_map, &dk))
		return 0;
	if (repo_made_here(first, &dk.file))
		return 0;
	return !second || !repo_made_here(second, &dk.file);
}

/*
 * 1 if a sandboxed task of sandbox `cgid` may not change the (possibly
 * negative) dentry at address `d` by the repository guard (this file's
 * head), `how` REPO_MAKES_DIR when it is to become a directory or symlink:
 * the sandbox has the guard (KIND_REPO_GUARD) and neither the git
 * directory concerned nor its `.git` was made by a sandboxed task of the
 * current uid (made_dirs). A global function: the verifier checks it once
 * per program. Verifier cost matters here (15 programs call it): the walk
 * keeps what it reads in masks, and the level of the `.git` is made a
 * number the verifier does not know, so the decision after the walk is
 * checked once, not once per level.
 */
__noinline int repo_guarded(__u64 cgid, __u64 d, __u32 how)
{
	struct repo_masks m = {};
	__u64 d1, d2, cur, up, prev = 0, git_dentry = 0, dir = 0, git_dir = 0;
	__u32 mode = 0, git = 0, found = REPO_DEPTH;
	bool positive, is_dir = false;
	int n0, n1, n, i;

	if (!d)
		return 0;
	positive = repo_inode(d) != 0;
	if (positive) {
		BPF_CORE_READ_INTO(&mode, (struct inode *)repo_inode(d), i_mode);
		is_dir = (mode & S_IFMT) == S_IFDIR;
	}
	d1 = repo_parent(d);
	n0 = repo_name_of(d);
	n1 = d1 != d ? repo_name_of(d1) : REPO_NAME_OTHER;
	/* Most names: a file, neither one of the guard's nor in a `hooks`. */
	if ((n0 == REPO_NAME_OTHER || n0 == REPO_NAME_INTERNAL) && n1 != REPO_NAME_HOOKS &&
	    !is_dir && !(how & REPO_MAKES_DIR))
		return 0;
	d2 = d1 != d ? repo_parent(d1) : 0;
	if (n0 == REPO_NAME_GIT && !is_dir) {
		/* A new `.git`, a `gitdir:` file or symlink: only in a directory made inside. */
		if (!d1 || d1 == d)
			return 0;
		dir = d1;
		goto decide;
	}
	/* The names up to the nearest `.git` (REPO_DEPTH levels, not past the root). */
	cur = d;
	for (i = 0; i < REPO_DEPTH; i++) {
		if (!cur || cur == prev)
			break;
		/* Levels 0 and 1 as read above (one read of each parent: a rename may race). */
		up = i == 0 ? d1 : i == 1 ? d2 : repo_parent(cur);
		n = i == 0 ? n0 : i == 1 ? n1 : repo_name_of(cur);
		/* (A `.git` at level 0 that is no directory was decided above.) */
		if (n == REPO_NAME_GIT) {
			found = i;
			git_dentry = cur;
			break;
		}
		m.internal |= REPO_LEVEL_BIT(n, REPO_NAME_INTERNAL, i);
		m.modules |= REPO_LEVEL_BIT(n, REPO_NAME_MODULES, i);
		m.worktrees |= REPO_LEVEL_BIT(n, REPO_NAME_WORKTREES, i);
		prev = cur;
		cur = up;
	}
	if (found >= REPO_DEPTH)
		return 0;
	/* The level as a number the verifier does not know (see above). */
	bpf_probe_read_kernel(&git, sizeof(git), &found);
	git &= REPO_DEPTH - 1;
	if ((n0 == REPO_NAME_CONFIG || n0 == REPO_NAME_HOOKS) && repo_git_dir_at(&m, git, 1))
		git_dir = d1;		/* G/config, G/hooks */
	else if (n1 == REPO_NAME_HOOKS && repo_git_dir_at(&m, git, 2))
		git_dir = d2;		/* G/hooks/NAME */
	else if (is_dir && repo_git_dir_at(&m, git, 0))
		git_dir = d;		/* a git directory itself */
	else if ((n0 == REPO_NAME_MODULES || (positive && n0 == REPO_NAME_WORKTREES)) && git == 1)
		git_dir = d1;		/* G/modules (new or not), G/worktrees */
	else if (!positive && (how & REPO_MAKES_DIR) && repo_below_modules(&m, git, 0))
		git_dir = git_dentry;	/* a submodule's git directory planted */
	if (!git_dir)
		return 0;
decide:
	return repo_refuses(cgid, dir ? dir : git_dir, dir ? 0 : git_dentry);
}

/* Set once a directory was recorded: inode_free_security looks in made_dirs only then. */
__u32 repo_recorded = 0;

/*
 * After a mkdir (vfs_mkdir() in fs/namei.c) by a sandboxed task: the new
 * directory is recorded in made_dirs with the task's uid and the inode's
 * generation. The dentry made is the third argument while vfs_mkdir()
 * returns an int (0: made), and its return value since it returns a dentry
 * (6.15: "Change inode_operations.mkdir to return struct dentry *"), told
 * apart by the value: 0, or a kernel address below the error range. A
 * filesystem whose mkdir leaves the dentry negative records nothing (its
 * new directories are the user's). A full map records nothing either.
 */
SEC("fexit/vfs_mkdir")
int BPF_PROG(vfs_mkdir_exit)
{
	__u64 ret = 0, d = 0;
	struct file_key k = {};
	struct made_dir m = {};
	struct inode *inode;

	if (!sandbox_of(bpf_get_current_cgroup_id()))
		return 0;
	if (bpf_get_func_ret(ctx, &ret))
		return 0;
	if (ret == 0) {
		if (bpf_get_func_arg(ctx, 2, &d))
			return 0;
	} else if (ret >= 0xffff800000000000ULL && ret < (__u64)-4095) {
		d = ret;
	} else {
		return 0;
	}
	inode = (struct inode *)repo_inode(d);
	if (!inode)
		return 0;
	read_key(&k, inode, BPF_CORE_READ(inode, i_ino));
	m.uid = (__u32)bpf_get_current_uid_gid();
	m.generation = BPF_CORE_READ(inode, i_generation);
	if (bpf_map_update_elem(&made_dirs, &k, &m, BPF_ANY) == 0 && !repo_recorded)
		repo_recorded = 1;
	return 0;
}

/* Forgets directory `inode` in made_dirs (inode_free_security: before its number can be another's). */
static __always_inline void repo_forget(struct inode *inode)
{
	struct file_key k = {};

	if (!repo_recorded)
		return;
	read_key(&k, inode, inode->i_ino);
	bpf_map_delete_elem(&made_dirs, &k);
}

#endif /* AGENT_SANDBOX_REPO_BPF_H */
