/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Name changes: the hooks that make, move or remove a name; a mode or ACL
 * change of a directory or file below a directory entry; and every change
 * of a read-only file or of anything below a read-only directory entry
 * (ro_walk_denied()), or of a listed file's attributes (write_protected()).
 * Uses: gate.bpf.h, events.bpf.h, keys.bpf.h, walk.bpf.h, patterns.bpf.h. Hooks: lsm/inode_link,
 * lsm/inode_rename, lsm/inode_create, lsm/inode_mknod, lsm/inode_symlink,
 * lsm/inode_mkdir, lsm/inode_unlink, lsm/inode_rmdir, lsm/inode_setattr,
 * lsm/inode_setxattr, lsm/inode_removexattr, lsm/inode_set_acl,
 * lsm/inode_remove_acl, lsm/inode_file_setattr.
 */
#ifndef AGENT_SANDBOX_NAMES_BPF_H
#define AGENT_SANDBOX_NAMES_BPF_H

/*
 * Is the dentry at address `d` (probe reads only) a listed file of sandbox
 * `cgid`: its inode's key (KIND_OPEN) or its name in its parent? A read
 * entry protects its file from changes too (its attributes: size, mode,
 * owner, times, extended attributes).
 */
static __always_inline bool dentry_listed(__u64 cgid, __u64 d)
{
	struct dentry *dentry = (struct dentry *)d;
	struct deny_key dk = {};
	struct inode *inode;
	__u64 ino;

	inode = BPF_CORE_READ(dentry, d_inode);
	if (inode) {
		ino = BPF_CORE_READ(inode, i_ino);
		if (filter_has(ino, AGENT_SANDBOX_FILTER_TAG_FILE)) {
			read_key(&dk.file, inode, ino);
			dk.cgid = cgid;
			if (bpf_map_lookup_elem(&deny_map, &dk))
				return true;
		}
	}
	return alias_listed(cgid, dentry);
}

/*
 * May sandbox `cgid` (of sandbox_of() `sbx`) not change the file at dentry
 * address `d`: a read entry lists it, the repository guard or a read-only
 * entry protects it?
 */
static __always_inline bool write_protected(__u64 cgid, __u32 sbx, __u64 d)
{
	return dentry_listed(cgid, d) || ((sbx & SBX_RO) && repo_guarded(cgid, d, 0)) ||
	       ro_walk_denied(cgid, sbx, d, 0);
}

/* Reports the refusal of `op` on dentry address `d` and returns -EPERM, opaque to the verifier (see entry_verdict()). */
static __always_inline int refuse_dentry(__u32 op, __u64 cgid, __u64 d)
{
	int eperm = -EPERM;

	barrier_var(eperm);
	report_dentry(op, cgid, d);
	return eperm;
}

/*
 * Would a read of the (possibly negative) dentry at address `d` be denied
 * to sandbox `cgid` (of sandbox_of() `sbx`, with directory entries) by its
 * place: the directory-entry walk from it, where a pattern exception at its
 * name (the nearest level) decides for its list (as file_refused() does)?
 */
static __always_inline bool placed_denied(__u64 cgid, __u32 sbx, __u64 d)
{
	int pat = (sbx & SBX_PATTERNS) ? pattern_states(cgid, d) : 0;
	int r;

	if (PAT_DENIES(pat))
		return true;
	if (!PAT_ALLOWS(pat))
		return walk_denied(cgid, d, 0);
	r = memo_walk(cgid, d, 0);
	if (r & MEMO_WALK_FAILED)
		return true;
	return (PAT_BASE(pat) != WALK_ALLOW && MEMO_WALK_STATE(r, 0) == WALK_DENY) ||
	       (PAT_USER(pat) != WALK_ALLOW && MEMO_WALK_STATE(r, 2) == WALK_DENY);
}

/*
 * May `old` not get the name `new` (link, rename) in sandbox `cgid`, of
 * sandbox_of() `sbx`: would a read of it be decided otherwise there (a
 * directory entry's edge, or a pattern exception's name: `mv id_rsa
 * .env.example` below `~/.ssh/`)?
 */
static __always_inline bool moves_across_entry(__u64 cgid, __u32 sbx, struct dentry *old,
					       struct dentry *new)
{
	__u64 o = 0, n = 0;

	if (!(sbx & SBX_DIRS))
		return false;
	bpf_probe_read_kernel(&o, sizeof(o), &old);
	bpf_probe_read_kernel(&n, sizeof(n), &new);
	return placed_denied(cgid, sbx, o) != placed_denied(cgid, sbx, n);
}

/*
 * Names: a sandboxed task may not give a protected file a new name (link,
 * rename away; a file a name pattern covers: pattern_covers()), nor put an
 * inode of its own at a listed name (create, mknod,
 * symlink, mkdir, link or rename onto it, or unlink the listed file first),
 * where a later write by the user would land in an inode the agent can read,
 * nor remove, move or replace a directory or symlink on the way to a listed
 * name. At a name a pattern covers, it may create a new file (which it can
 * write in the open that creates it and never read: open.bpf.h,
 * created_write_only()), but not link or rename anything onto it, nor make
 * a symlink there.
 */
SEC("lsm/inode_link")
int BPF_PROG(inode_link, struct dentry *old_dentry, struct inode *dir, struct dentry *new_dentry,
	     int ret)
{
	struct walk_gens *gens;
	__u32 zero = 0, sbx;
	__u64 cgid;

	/* In any task: the inode gets another name, so its file memo is stale (file_memo.bpf.h). */
	gens = bpf_map_lookup_elem(&walk_gens, &zero);
	if (gens)
		__sync_fetch_and_add(&gens->names, 1);
	ONLY_SANDBOXED_AS(ret, cgid, sbx);
	if (inode_listed(cgid, old_dentry->d_inode) ||
	    name_listed(cgid, old_dentry->d_parent->d_inode, old_dentry) ||
	    name_refused(cgid, dir, new_dentry, true) || pattern_covers(cgid, sbx, old_dentry) ||
	    pattern_covers(cgid, sbx, new_dentry) ||
	    moves_across_entry(cgid, sbx, old_dentry, new_dentry) ||
	    ro_dentry_denied(cgid, sbx, old_dentry, NULL, 0) ||
	    ro_dentry_denied(cgid, sbx, new_dentry, dir, 0)) {
		report_dentry(AGENT_SANDBOX_OP_LINK, cgid, dentry_addr(old_dentry));
		return -EPERM;
	}
	return 0;
}

/* repo_guarded()'s `how` for a name `d` moves to: REPO_MAKES_DIR for a directory or symlink. */
static __always_inline __u32 makes_dir(struct dentry *d)
{
	struct inode *inode = NULL;
	__u32 mode = 0;

	BPF_CORE_READ_INTO(&inode, d, d_inode);
	if (inode)
		BPF_CORE_READ_INTO(&mode, inode, i_mode);
	mode &= S_IFMT;
	return (mode == S_IFDIR || mode == S_IFLNK) ? REPO_MAKES_DIR : 0;
}

/*
 * Called once per moved dentry: twice, swapped, for RENAME_EXCHANGE
 * (security/security.c). A rename onto an existing name replaces that
 * inode (an empty directory, for directories): on the way, it is refused too.
 */
SEC("lsm/inode_rename")
int BPF_PROG(inode_rename, struct inode *old_dir, struct dentry *old_dentry, struct inode *new_dir,
	     struct dentry *new_dentry, int ret)
{
	__u64 cgid;
	__u32 sbx;

	ONLY_SANDBOXED_AS(ret, cgid, sbx);
	if (inode_listed(cgid, old_dentry->d_inode) ||
	    name_refused(cgid, old_dir, old_dentry, true) ||
	    name_refused(cgid, new_dir, new_dentry, true) || pattern_covers(cgid, sbx, old_dentry) ||
	    pattern_covers(cgid, sbx, new_dentry) ||
	    crosses_deep_scope(cgid, sbx, old_dentry, new_dentry) || on_path(cgid, old_dentry->d_inode) ||
	    (positive(new_dentry) && on_path(cgid, new_dentry->d_inode)) ||
	    moves_across_entry(cgid, sbx, old_dentry, new_dentry) ||
	    ro_dentry_denied(cgid, sbx, old_dentry, old_dir, 0) ||
	    ro_dentry_denied(cgid, sbx, new_dentry, new_dir, makes_dir(old_dentry))) {
		report_dentry(AGENT_SANDBOX_OP_RENAME, cgid, dentry_addr(old_dentry));
		return -EPERM;
	}
	return 0;
}

/*
 * The shared body of the hooks that make one name in `dir`; `how`
 * REPO_MAKES_DIR for a directory or symlink (repo_guarded()).
 */
static __always_inline int name_change(struct inode *dir, struct dentry *dentry, int ret,
				       const __u32 how)
{
	__u64 cgid;
	__u32 sbx;

	ONLY_SANDBOXED_AS(ret, cgid, sbx);
	if (name_refused(cgid, dir, dentry, true) || ro_dentry_denied(cgid, sbx, dentry, dir, how)) {
		report_dentry(AGENT_SANDBOX_OP_CREATE, cgid, dentry_addr(dentry));
		return -EPERM;
	}
	return 0;
}

SEC("lsm/inode_create")
int BPF_PROG(inode_create, struct inode *dir, struct dentry *dentry, unsigned short mode, int ret)
{
	return name_change(dir, dentry, ret, 0);
}

SEC("lsm/inode_mknod")
int BPF_PROG(inode_mknod, struct inode *dir, struct dentry *dentry, unsigned short mode, dev_t dev,
	     int ret)
{
	return name_change(dir, dentry, ret, 0);
}

SEC("lsm/inode_symlink")
int BPF_PROG(inode_symlink, struct inode *dir, struct dentry *dentry, const char *old_name, int ret)
{
	__u64 cgid, d = 0;
	__u32 sbx;

	ret = name_change(dir, dentry, ret, REPO_MAKES_DIR);
	if (ret != 0)
		return ret;
	cgid = bpf_get_current_cgroup_id();
	sbx = sandbox_of(cgid);
	/*
	 * A symlink at a covered name (the user's tools would write through it
	 * to the agent's file), or below a deep pattern's scope (a directory of
	 * the user's later state files led out of it).
	 */
	if (pattern_covers(cgid, sbx, dentry) || below_deep_scope(cgid, sbx, dentry)) {
		report_dentry(AGENT_SANDBOX_OP_CREATE, cgid, dentry_addr(dentry));
		return -EPERM;
	}
	if (!(sbx & SBX_DIRS))
		return 0;
	/* A symlink below a directory entry: see the directory-entry section (walk.bpf.h). */
	bpf_probe_read_kernel(&d, sizeof(d), &dentry);
	if (walk_denied(cgid, d, 0)) {
		report_dentry(AGENT_SANDBOX_OP_CREATE, cgid, d);
		return -EPERM;
	}
	return 0;
}

SEC("lsm/inode_mkdir")
int BPF_PROG(inode_mkdir, struct inode *dir, struct dentry *dentry, unsigned short mode, int ret)
{
	return name_change(dir, dentry, ret, REPO_MAKES_DIR);
}

/* A symlink on the way to a listed name is removed by unlink. */
SEC("lsm/inode_unlink")
int BPF_PROG(inode_unlink, struct inode *dir, struct dentry *dentry, int ret)
{
	__u64 cgid;
	__u32 sbx;

	ONLY_SANDBOXED_AS(ret, cgid, sbx);
	if (name_listed(cgid, dir, dentry) || inode_listed(cgid, dentry->d_inode) ||
	    on_path(cgid, dentry->d_inode) || ro_dentry_denied(cgid, sbx, dentry, dir, 0)) {
		report_dentry(AGENT_SANDBOX_OP_UNLINK, cgid, dentry_addr(dentry));
		return -EPERM;
	}
	return 0;
}

SEC("lsm/inode_rmdir")
int BPF_PROG(inode_rmdir, struct inode *dir, struct dentry *dentry, int ret)
{
	__u64 cgid;
	__u32 sbx;

	ONLY_SANDBOXED_AS(ret, cgid, sbx);
	if (on_path(cgid, dentry->d_inode) || ro_dentry_denied(cgid, sbx, dentry, dir, REPO_IS_DIR)) {
		report_dentry(AGENT_SANDBOX_OP_UNLINK, cgid, dentry_addr(dentry));
		return -EPERM;
	}
	return 0;
}

/*
 * No mode change (chmod, ATTR_MODE) of a directory or file at or below a
 * directory entry (issue 23): `chmod 000` of a subdirectory makes the next
 * launch's scan miss the files below it, among them one with a second name
 * outside the entry that an earlier scan marked by inode. The daemon keeps
 * the earlier keys after such a scan anyway (policy::keys_mode); this
 * refuses the direct way to cause it. Of a file, it would make the
 * launcher's reopen of an inherited descriptor fail with EACCES instead of
 * the hook's EPERM (see entry_verdict()). (A POSIX ACL can change the mode bits too,
 * without this hook: inode_setxattr and inode_set_acl below refuse it.)
 *
 * The hook's arguments are (dentry, attr) before Linux 6.8 and (idmap,
 * dentry, attr) since ("security: Align inode_setattr hook definition with
 * EVM", include/linux/lsm_hook_defs.h), so they are read
 * by position from the end (bpf_get_func_arg(), bpf_get_func_arg_cnt()),
 * as numbers, and the earlier verdict with bpf_get_func_ret() (for an LSM
 * program the helper reads the slot after the arguments, ctx[nr_args]; the
 * verifier inlines it only for fexit and fmod_ret programs).
 */
#define ATTR_MODE 1U

/*
 * -EPERM if dentry `d` (as a number) is at or below a directory entry of
 * sandbox `cgid` (not excepted), else 0. Files too: a file below an entry
 * has no key of its own, so a descriptor of it that the user's shell holds
 * is judged by the launcher's reopen, which a mode or ACL keeping the user
 * out (`chmod 000` from inside) would fail with EACCES before the hook.
 */
static __always_inline int entry_verdict(__u64 cgid, __u64 d, __u32 op)
{
	int eperm;

	/*
	 * -EPERM made opaque: `walk_denied() ? -EPERM : 0` was folded into a
	 * negation of the walk's answer, which the 6.12 verifier does not bound
	 * (R0 not in [-4095, 0], seen in the load log; see file_fcntl).
	 */
	eperm = -EPERM;
	barrier_var(eperm);
	if (walk_denied(cgid, d, 0)) {
		report_dentry(op, cgid, d);
		return eperm;
	}
	return 0;
}

SEC("lsm/inode_setattr")
int BPF_PROG(inode_setattr)
{
	__u64 n, d = 0, a = 0, r = 0, cgid;
	__u32 sbx;

	/*
	 * An earlier verdict, or no slot to read (none: the hook has 2 or 3
	 * arguments): -EPERM. Not pass_on(): narrowed from the 64-bit slot, the
	 * value it returned was unbounded in its upper half for the 6.12
	 * verifier's [-4095, 0] check (seen in the load log on Debian 13).
	 */
	if (bpf_get_func_ret(ctx, &r) || r != 0)
		return -EPERM;
	ONLY_SANDBOXED_AS(0, cgid, sbx);
	n = bpf_get_func_arg_cnt(ctx);
	if (n < 2)
		return 0;
	if (bpf_get_func_arg(ctx, n - 2, &d) || bpf_get_func_arg(ctx, n - 1, &a) || !d || !a)
		return -EPERM;
	/* Any change (mode, owner, size, times) of a listed or read-only file. */
	if (write_protected(cgid, sbx, d))
		return refuse_dentry(AGENT_SANDBOX_OP_SETATTR, cgid, d);
	if (!(sbx & SBX_DIRS) || !(BPF_CORE_READ((struct iattr *)a, ia_valid) & ATTR_MODE))
		return 0;
	return entry_verdict(cgid, d, AGENT_SANDBOX_OP_SETATTR);
}

/*
 * No ACL set from inside on a directory or file at or below a directory entry
 * (issue 23): a POSIX access ACL equal to mode 000 (or an NFSv4 or CIFS ACL
 * denying the owner) makes the directory as unreadable to the next launch's
 * scan as `chmod 000` (inode_setattr above), without a mode change; a
 * default ACL makes the directories made in it so. Any xattr of the system
 * namespace is refused there; removing one stays allowed.
 *
 * Linux 6.1 sets an ACL through the xattr handlers, behind
 * security_inode_setxattr() with the name system.posix_acl_access or
 * system.posix_acl_default (fs/xattr.c), as every kernel does for the
 * other system.* names (NFSv4, CIFS ACLs); since 6.2 (vfs_set_acl(),
 * fs/posix_acl.c) an ACL goes to security_inode_set_acl() instead and no
 * longer to the setxattr hook. The daemon attaches lsm/inode_set_acl where
 * the kernel's BTF has bpf_lsm_inode_set_acl. Both hooks take (mnt_userns or
 * idmap, dentry, name, ...) (include/linux/lsm_hook_defs.h): the dentry is
 * argument 1 and the name argument 2, read as numbers with
 * bpf_get_func_arg() and the earlier verdict with bpf_get_func_ret(), as in
 * inode_setattr.
 */
/*
 * The name prefix "system." as a little-endian word masked to its 7 bytes:
 * the system namespace holds the ACLs of every file system that has them
 * (system.posix_acl_*, NFSv4's system.nfs4_acl, CIFS's system.cifs_acl), all
 * of which can make a directory unreadable. Compared as one word, without a
 * branch per byte: a branch per byte made the verifier keep 2^17 paths into
 * the walk, each with other known bytes, and give up (1,000,001
 * instructions on Linux 6.1, seen in the guest).
 */
#define SYSTEM_PREFIX 0x2e6d6574737973ULL /* "system." */
#define SYSTEM_PREFIX_MASK 0xffffffffffffffULL

/* The earlier verdict on dentry argument 1 of `ctx`: -EPERM for any, or none to read (see inode_setattr). */
static __always_inline int earlier_verdict(__u64 *ctx)
{
	__u64 r = 0;

	if (bpf_get_func_ret(ctx, &r) || r != 0)
		return -EPERM;
	return 0;
}

/*
 * The verdict on an extended attribute set or removed on dentry argument 1
 * of `ctx`: refused on a listed or read-only file (any name); and, if
 * `acl` (an ACL set), on a directory or file at or below a directory entry.
 */
static __always_inline int xattr_verdict(__u64 *ctx, bool acl)
{
	__u64 d = 0, cgid;
	__u32 sbx;

	if (earlier_verdict(ctx))
		return -EPERM;
	ONLY_SANDBOXED_AS(0, cgid, sbx);
	if (bpf_get_func_arg(ctx, 1, &d) || !d)
		return -EPERM;
	if (write_protected(cgid, sbx, d))
		return refuse_dentry(AGENT_SANDBOX_OP_XATTR, cgid, d);
	if (!acl || !(sbx & SBX_DIRS))
		return 0;
	return entry_verdict(cgid, d, AGENT_SANDBOX_OP_XATTR);
}

SEC("lsm/inode_setxattr")
int BPF_PROG(inode_setxattr)
{
	__u64 w = 0, n = 0;
	long len = -1;

	if (!bpf_get_func_arg(ctx, 2, &n) && n)
		len = bpf_probe_read_kernel_str(&w, sizeof(w), (const void *)n);
	/* Outside the system namespace: not an ACL. A name that cannot be read is judged as one. */
	return xattr_verdict(ctx, !(len >= 0 && ((w ^ SYSTEM_PREFIX) & SYSTEM_PREFIX_MASK)));
}

/* inode_removexattr takes (mnt_userns or idmap, dentry, name) (include/linux/lsm_hook_defs.h). */
SEC("lsm/inode_removexattr")
int BPF_PROG(inode_removexattr)
{
	return xattr_verdict(ctx, false);
}

SEC("lsm/inode_set_acl")
int BPF_PROG(inode_set_acl)
{
	return xattr_verdict(ctx, true);
}

/*
 * inode_remove_acl takes (idmap, dentry, acl_name); since 6.2 a removal of
 * system.posix_acl_* goes here (vfs_remove_acl()), not to
 * inode_removexattr: refused on a listed or read-only file, as a
 * removexattr is. Loaded where the hook exists (the daemon checks
 * bpf_lsm_inode_remove_acl).
 */
SEC("lsm/inode_remove_acl")
int BPF_PROG(inode_remove_acl)
{
	return xattr_verdict(ctx, false);
}

/*
 * inode_file_setattr takes (dentry, struct file_kattr *) (since 6.17,
 * "lsm: introduce new hooks for setting/getting inode fsxattr"):
 * vfs_fileattr_set() calls it for the FS_IOC_SETFLAGS and
 * FS_IOC_FSSETXATTR ioctls and for file_setattr(2), which reaches no ioctl
 * hook. A change of a listed or read-only file's attribute flags (chattr)
 * is refused, as the ioctls are (ioctl.bpf.h). Loaded where the hook exists
 * (the daemon checks bpf_lsm_inode_file_setattr).
 */
SEC("lsm/inode_file_setattr")
int BPF_PROG(inode_file_setattr, struct dentry *dentry, void *fa, int ret)
{
	__u64 cgid, d;
	__u32 sbx;

	ONLY_SANDBOXED_AS(ret, cgid, sbx);
	d = dentry_addr(dentry);
	if (write_protected(cgid, sbx, d))
		return refuse_dentry(AGENT_SANDBOX_OP_SETATTR, cgid, d);
	return 0;
}

#endif /* AGENT_SANDBOX_NAMES_BPF_H */
