/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The decision on an open file (file_refused(): its key and name, then the
 * walk; agent_sandbox.bpf.c describes the steps) and the hook that makes it.
 * lsm/file_receive (sockets.bpf.h) judges a passed descriptor the same way.
 * audit_matches() is the same decision for audit entries (shadow mode).
 * Uses: gate.bpf.h, events.bpf.h, keys.bpf.h, walk.bpf.h, patterns.bpf.h, proc.bpf.h,
 * file_memo.bpf.h.
 * Hooks: lsm/file_open.
 */
#ifndef AGENT_SANDBOX_OPEN_BPF_H
#define AGENT_SANDBOX_OPEN_BPF_H

/*
 * The whole decision on an open file for sandbox `cgid`: by its inode and
 * name (open_denied()), by the name patterns on its name (pattern_states():
 * a non-directory), then, for a sandbox with directory entries, by the
 * directories above it (open_walk_denied(); directories stay listable below
 * a directory entry), with walk memos where `memos` (a constant). Shared by
 * file_open and file_receive, so a descriptor passed in is judged as an open
 * of the same file would be.
 */
/*
 * Did this open create `file`, for writing only? A name pattern lets a
 * sandbox write the new file it creates at a covered name (a `git clone`
 * or a scaffolding tool writing a `.env`: the open that creates it), but
 * never read it, open it again, or open one that existed (names.bpf.h
 * refuses linking, renaming and symlinks at such names, so no other name
 * of the inode is the agent's).
 */
static __always_inline bool created_write_only(struct file *file)
{
	unsigned long magic;

	if (!(file->f_mode & FMODE_CREATED) || (file->f_mode & FMODE_READ))
		return false;
	/*
	 * Local filesystems only: FUSE's atomic_open sets FMODE_CREATED before
	 * the server says whether it created the file (fuse_create_open()), so
	 * there an existing file could be opened for writing.
	 */
	magic = sb_of(file->f_inode)->s_magic;
	return memo_fs(magic) || magic == OVERLAYFS_SUPER_MAGIC;
}

static __always_inline bool file_refused(__u64 cgid, __u32 sbx, struct file *file,
					 struct file *fv, const bool memos)
{
	__u64 d = 0, mnt = 0;
	__u32 bits;
	int pat = 0, r;

	if (open_denied(cgid, fv, &bits))
		return true;
	if ((fv->f_inode->i_mode & S_IFMT) == S_IFDIR)
		return false;
	if (sbx & SBX_PATTERNS) {
		/*
		 * The first test without the pass, on the file's own dentry
		 * (nearly every open): no pattern, nothing more to read here.
		 */
		if (!(bits & BIT_OWN) || !pattern_surely_none(fv->f_path.dentry)) {
			if (!file_walk_start(fv, &d, &mnt))
				return false;
			pat = pattern_states(cgid, d);
		}
		if (PAT_DENIES(pat) && !created_write_only(fv))
			return true;
	}
	if (!(sbx & SBX_DIRS))
		return false;
	if (!PAT_ALLOWS(pat))
		return open_walk_denied(cgid, file, fv, bits, memos);
	/*
	 * A pattern exception at the file's own level, the nearest: it decides
	 * for its list; the walk from the file (memo_walk(), every level, its
	 * own too) decides for the other. (`pat` is not 0, so pattern_states()
	 * ran and `d`, `mnt` are set.)
	 */
	r = memo_walk(cgid, d, mnt);
	if (r & MEMO_WALK_FAILED)
		return true;
	return (PAT_BASE(pat) != WALK_ALLOW && MEMO_WALK_STATE(r, 0) == WALK_DENY) ||
	       (PAT_USER(pat) != WALK_ALLOW && MEMO_WALK_STATE(r, 2) == WALK_DENY);
}

/*
 * The audit walk of audit_matches() from the dentry at address `d` on the
 * mount at address `mnt`: 1 when an audit directory entry matches. A global
 * function, verified once (file_open's own walk is one bpf_loop() already).
 * A walk that renames overlapped twice matches nothing.
 */
__noinline int audit_walk_matches(__u64 cgid, __u64 d, __u64 mnt)
{
	struct walk_ctx c;

	if (!walk_from_as(&c, cgid, d, mnt, AGENT_SANDBOX_WALK_DEPTH, WALK_MODE_AUDIT, true))
		return 0;
	return c.base == WALK_DENY || c.user == WALK_DENY;
}

/*
 * Would an audit entry of sandbox `cgid` deny opening `file` (an open its
 * enforced entries allowed)? The same steps as file_refused() with the
 * audit kinds: the inode (KIND_AUDIT), its name (name_map, KIND_AUDIT),
 * then, for a non-directory, the audit directory entries above it and the
 * same lists' exceptions (KIND_AUDIT_DIR_*, KIND_EXC_*), walked without
 * memos: only sandboxes with audit entries (SBX_AUDIT) pay it. A backing
 * file opened by overlayfs with the overlay's path is judged by its inode
 * only. A walk that renames overlapped twice reports nothing.
 */
static __always_inline bool audit_matches(__u64 cgid, struct file *file)
{
	struct inode *inode = file->f_inode;
	struct dentry *dentry = file->f_path.dentry;
	struct file_key k = {};
	struct inode *dir;
	__u64 d = 0, mnt = 0;

	if (!inode)
		return false;
	if (filter_has(inode->i_ino, AGENT_SANDBOX_FILTER_TAG_FILE)) {
		fill_key(&k, inode);
		if (key_marked(cgid, &k, AGENT_SANDBOX_KIND_AUDIT))
			return true;
	}
	if (dentry->d_inode != inode)
		return false;
	dir = dentry->d_parent->d_inode;
	if (dir && filter_has(dir->i_ino, AGENT_SANDBOX_FILTER_TAG_DIR)) {
		fill_key(&k, dir);
		k.kind = AGENT_SANDBOX_KIND_AUDIT;
		if (name_in_map(cgid, &k, dentry->d_name.name, dentry->d_name.len))
			return true;
	}
	if ((inode->i_mode & S_IFMT) == S_IFDIR)
		return false;
	BPF_CORE_READ_INTO(&mnt, file, f_path.mnt);
	if (mnt)
		mnt -= bpf_core_field_offset(struct mount, mnt);
	bpf_probe_read_kernel(&d, sizeof(d), &dentry);
	return audit_walk_matches(cgid, d, mnt) != 0;
}

/*
 * Is an open of `file` for writing (or with O_TRUNC) refused: the
 * repository guard (repo_guarded(), by its path's names) or a read-only
 * entry of sandbox `cgid` protects it (ro_walk_denied(), from the file's
 * dentry across the mounts above it, with the directory's memo where the
 * walk is whole)? An overlayfs backing file is judged by its real inode's
 * first alias, within its filesystem.
 */
static __always_inline bool write_open_refused(__u64 cgid, __u32 sbx, struct file *file,
					       struct file *fv)
{
	struct dentry *dentry = fv->f_path.dentry, *parent;
	__u64 d, mnt = 0;
	int verdict;

	if (!(sbx & SBX_RO))
		return false;
	if (repo_may_guard(dentry, 0) && repo_guarded(cgid, dentry_addr(dentry), 0))
		return true;
	if (dentry->d_inode == fv->f_inode) {
		/* The file's own dentry: nothing near it marked, nothing to walk (ro_near_marks()). */
		if (!(sbx & SBX_RO_DIRS)) {
			if (!ro_near_marks(dentry, fv->f_inode))
				return false;
		} else {
			/* A whole walk: from its directory's memo (ro_memo_denied(): trusted `file`). */
			dentry = file->f_path.dentry;
			parent = dentry->d_parent;
			verdict = ro_memo_denied(cgid, file->f_inode, true, dentry, parent,
						 parent->d_inode, (__u64)file->f_path.mnt);
			if (verdict != PATH_WALK_WHOLE)
				return verdict;
		}
	}
	if (!file_walk_start(fv, &d, &mnt))
		return false;
	return ro_walk_denied(cgid, sbx, d, mnt);
}

SEC("lsm/file_open")
int BPF_PROG(file_open, struct file *file, int ret)
{
	struct file *fv;
	__u64 cgid, epoch = 1;
	__u32 sbx;
	unsigned int mode; /* fmode_t */

	ONLY_SANDBOXED_AS(ret, cgid, sbx);
	/* Most opens end here: the file's memo allows them (file_memo.bpf.h). */
	if (file_memo_used(sbx)) {
		epoch = file_memo_check(cgid, sbx, file);
		if (!epoch)
			return 0;
	}
	/* BTF-typed pointers: direct loads, relocated by CO-RE, through the view. */
	fv = file_view(file);
	if (file_refused(cgid, sbx, file, fv, true)) {
		report_file(AGENT_SANDBOX_OP_OPEN, cgid, file);
		return -EPERM;
	}
	mode = file->f_mode; /* once, for both tests below */
	if ((mode & FMODE_WRITE) && proc_write_refused(cgid, fv)) {
		report_file(AGENT_SANDBOX_OP_PROC_WRITE, cgid, file);
		return -EPERM;
	}
	if ((sbx & SBX_RO) && ((mode & FMODE_WRITE) || (file->f_flags & O_TRUNC)) &&
	    write_open_refused(cgid, sbx, file, fv)) {
		report_file(AGENT_SANDBOX_OP_WRITE_OPEN, cgid, file);
		return -EPERM;
	}
	/* Allowed: kept as the file's memo where it may be (epoch 1: never). */
	if (epoch != 1)
		file_memo_keep(cgid, sbx, file, epoch);
	/* Shadow mode: allowed, reported as "would deny" (no file memos: file_memo_used()). */
	else if ((sbx & SBX_AUDIT) && audit_matches(cgid, fv))
		report_file(AGENT_SANDBOX_OP_AUDIT_OPEN, cgid, file);
	return 0;
}

#endif /* AGENT_SANDBOX_OPEN_BPF_H */
