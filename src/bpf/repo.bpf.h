/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The repository guard (list line `readonly **` then `/.git/`, deny_map key
 * KIND_REPO_GUARD): in every git repository, cloned before or after the
 * launch, a sandboxed task may not change what git runs or takes its
 * configuration from, which the user's next `git status` or `git commit`
 * outside would run with the user's rights (`core.fsmonitor`,
 * `core.hooksPath`, a hook). Guarded, by the names of the dentry and of
 * the directories above it (live, no path strings):
 *   - in a git directory G: `config`, `config.worktree`, `commondir` (it
 *     moves where git reads `config` from) and `hooks` with every name
 *     directly in it;
 *   - G itself, a `.git` that exists (a directory, or the `gitdir:` file
 *     of a linked worktree or submodule): not renamed, removed or changed,
 *     so a repository's git directory cannot be swapped for a new one;
 * where G is a directory named `.git`, or one directly in a `modules` or
 * `worktrees` directory of a `.git` (submodules and linked worktrees; a
 * submodule nested deeper is not recognised). Names compare ASCII
 * case-insensitively (a case-insensitive directory finds `CONFIG` for
 * `config`).
 *
 * A git directory a sandboxed task made (mkdir, recorded by
 * fexit/vfs_mkdir in made_repos with the task's uid) is not guarded for
 * sandboxed tasks of that uid: `git init` and `git clone` inside write its
 * config and hook samples, and the agent's own repository is the agent's.
 * The record goes with the directory's inode (inode_free_security), so a
 * git directory read back from disk after eviction is guarded again (fail
 * closed), as is every git directory after the maps are made anew.
 *
 * Uses: maps.bpf.h, gate.bpf.h, walk.bpf.h (read_key()). Hooks:
 * fexit/vfs_mkdir. repo_guarded() is declared in walk.bpf.h, whose
 * read-only checks call it.
 */
#ifndef AGENT_SANDBOX_REPO_BPF_H
#define AGENT_SANDBOX_REPO_BPF_H

/* repo_name()'s answers. */
#define REPO_NAME_OTHER 0
#define REPO_NAME_GIT 1
#define REPO_NAME_HOOKS 2
#define REPO_NAME_CONFIG 3	/* config, config.worktree, commondir */
#define REPO_NAME_MODULES 4
#define REPO_NAME_WORKTREES 5

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

	if (len != n)
		return false;
	__builtin_memcpy(c, lit, n);
	return w[0] == (c[0] | REPO_FOLD) && w[1] == (c[1] | REPO_FOLD);
}

/*
 * Which of the guard's names (REPO_NAME_*) the dentry at address `d` has;
 * its parent's address into `*parent` (0 when `d` is 0). Probe reads only.
 */
static __always_inline int repo_name(__u64 d, __u64 *parent)
{
	struct dentry *dentry = (struct dentry *)d;
	const unsigned char *name = NULL;
	__u64 w[2] = {};
	__u32 len = 0;

	*parent = 0;
	if (!d)
		return REPO_NAME_OTHER;
	BPF_CORE_READ_INTO(parent, dentry, d_parent);
	BPF_CORE_READ_INTO(&len, dentry, d_name.len);
	BPF_CORE_READ_INTO(&name, dentry, d_name.name);
	if (len < 4 || len > 15 || !name)
		return REPO_NAME_OTHER;
	if (bpf_probe_read_kernel(w, len & 15, name))
		return REPO_NAME_OTHER;
	w[0] |= REPO_FOLD;
	w[1] |= REPO_FOLD;
	if (repo_name_is(w, len, ".git", 4))
		return REPO_NAME_GIT;
	if (repo_name_is(w, len, "hooks", 5))
		return REPO_NAME_HOOKS;
	if (repo_name_is(w, len, "config", 6) || repo_name_is(w, len, "config.worktree", 15) ||
	    repo_name_is(w, len, "commondir", 9))
		return REPO_NAME_CONFIG;
	if (repo_name_is(w, len, "modules", 7))
		return REPO_NAME_MODULES;
	if (repo_name_is(w, len, "worktrees", 9))
		return REPO_NAME_WORKTREES;
	return REPO_NAME_OTHER;
}

/* Do names `a` (a directory's), `b` (its parent's), `c` (the grandparent's) make the directory a git directory? */
static __always_inline bool repo_git_dir(int a, int b, int c)
{
	return a == REPO_NAME_GIT ||
	       ((b == REPO_NAME_MODULES || b == REPO_NAME_WORKTREES) && c == REPO_NAME_GIT);
}

/* The inode at dentry address `d`, as a number (0 for a negative dentry). */
static __always_inline __u64 repo_inode(__u64 d)
{
	struct inode *inode = NULL;

	BPF_CORE_READ_INTO(&inode, (struct dentry *)d, d_inode);
	return (__u64)inode;
}

/*
 * 1 if a sandboxed task of sandbox `cgid` may not change the (possibly
 * negative) dentry at address `d` by the repository guard: its name and
 * those above it make it guarded (this file's head), the sandbox has the
 * guard (KIND_REPO_GUARD), and its git directory was not made by a
 * sandboxed task of the current uid (made_repos). A global function: the
 * verifier checks it once per program.
 */
__noinline int repo_guarded(__u64 cgid, __u64 d)
{
	__u64 p1, p2, p3, p4, p5, git = 0, inode;
	struct deny_key dk = {};
	struct file_key k = {};
	int n0, n1, n2, n3, n4;
	bool positive;
	__u32 *uid;

	n0 = repo_name(d, &p1);
	n1 = repo_name(p1, &p2);
	/* Most names: neither one of the guard's nor in a directory of one. */
	if (n0 == REPO_NAME_OTHER && n1 == REPO_NAME_OTHER)
		return 0;
	n2 = repo_name(p2, &p3);
	n3 = repo_name(p3, &p4);
	n4 = repo_name(p4, &p5);
	positive = repo_inode(d) != 0;
	if ((n0 == REPO_NAME_CONFIG || n0 == REPO_NAME_HOOKS) && repo_git_dir(n1, n2, n3))
		git = p1;	/* G/config, G/hooks */
	else if (n1 == REPO_NAME_HOOKS && repo_git_dir(n2, n3, n4))
		git = p2;	/* G/hooks/NAME */
	else if (positive && repo_git_dir(n0, n1, n2))
		git = d;	/* G itself */
	else if (positive && (n0 == REPO_NAME_MODULES || n0 == REPO_NAME_WORKTREES) &&
		 n1 == REPO_NAME_GIT)
		git = p1;	/* .git/modules, .git/worktrees */
	else if (!positive && n1 == REPO_NAME_MODULES && n2 == REPO_NAME_GIT)
		git = p2;	/* a new .git/modules/NAME: a submodule's git directory planted */
	if (!git)
		return 0;
	dk.cgid = cgid;
	dk.file.kind = AGENT_SANDBOX_KIND_REPO_GUARD;
	if (!bpf_map_lookup_elem(&deny_map, &dk))
		return 0;
	inode = repo_inode(git);
	if (!inode)
		return 1;
	read_key(&k, (struct inode *)inode, BPF_CORE_READ((struct inode *)inode, i_ino));
	uid = bpf_map_lookup_elem(&made_repos, &k);
	return !uid || *uid != (__u32)bpf_get_current_uid_gid();
}

/* Set once a git directory was recorded: inode_free_security looks in made_repos only then. */
__u32 repo_recorded = 0;

/*
 * After a mkdir (vfs_mkdir() in fs/namei.c) by a sandboxed task: a new git
 * directory (repo_git_dir() by its name and those above it) is recorded in
 * made_repos with the task's uid. The dentry made is the third argument
 * while vfs_mkdir() returns an int (0: made), and its return value since it
 * returns a dentry (6.15: "Change inode_operations.mkdir to return struct
 * dentry *"), told apart by the value: 0, or a kernel address below the
 * error range. A filesystem whose mkdir leaves the dentry negative records
 * nothing (guarded as the user's).
 */
SEC("fexit/vfs_mkdir")
int BPF_PROG(vfs_mkdir_exit)
{
	__u64 ret = 0, d = 0, p1, p2, p3, inode;
	struct file_key k = {};
	__u32 uid;
	int n0, n1, n2;

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
	n0 = repo_name(d, &p1);
	n1 = repo_name(p1, &p2);
	n2 = repo_name(p2, &p3);
	if (!repo_git_dir(n0, n1, n2))
		return 0;
	inode = repo_inode(d);
	if (!inode)
		return 0;
	read_key(&k, (struct inode *)inode, BPF_CORE_READ((struct inode *)inode, i_ino));
	uid = (__u32)bpf_get_current_uid_gid();
	if (bpf_map_update_elem(&made_repos, &k, &uid, BPF_ANY) == 0)
		repo_recorded = 1;
	return 0;
}

/* Forgets directory `inode` in made_repos (inode_free_security: before its number can be another's). */
static __always_inline void repo_forget(struct inode *inode)
{
	struct file_key k = {};

	if (!repo_recorded)
		return;
	read_key(&k, inode, inode->i_ino);
	bpf_map_delete_elem(&made_repos, &k);
}

#endif /* AGENT_SANDBOX_REPO_BPF_H */
