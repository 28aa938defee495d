/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Mounts (the section below): no mount change in a mount namespace the
 * user's outside processes share.
 * Uses: gate.bpf.h. Hooks: lsm/sb_mount, lsm/move_mount, lsm/sb_umount.
 */
#ifndef AGENT_SANDBOX_MOUNTS_BPF_H
#define AGENT_SANDBOX_MOUNTS_BPF_H

/*
 * ==== Mounts in the user's own mount namespace (issue 23) ====
 * A sandboxed task may not mount, move a mount or unmount in a mount
 * namespace owned by the initial user namespace: the user's own (or one
 * only root makes, which the user's other processes may share). An
 * unprivileged user mounts there only through a setuid helper, fusermount3
 * (a FUSE filesystem of the agent's at ~/.aws or over ~/.ssh/, where the
 * user's later `aws configure` or `ssh-keygen` writes land in the agent's
 * filesystem) or mount(8) with a `user` line of fstab; the helper stays in
 * the caller's cgroup, which is what the hook judges. A mount namespace of
 * the agent's own user namespace (`unshare -Urm`) is owned by that user
 * namespace (level > 0) and keeps every mount: its mounts do not propagate
 * back (copy_mnt_ns() makes shared mounts slaves, CL_SHARED_TO_SLAVE, in a
 * namespace of a less privileged owner), so outside processes never see
 * them. The namespace judged is the caller's: mount(2), move_mount(2) and
 * umount(2) act only in it (check_mnt() in fs/namespace.c).
 *   - sb_mount: every mount(2) (new, bind, move, remount, propagation),
 *     from path_mount() before it acts (fs/namespace.c);
 *   - move_mount: move_mount(2), which attaches open_tree() and fsmount()
 *     mounts, and moves mounts (since 5.2);
 *   - sb_umount: umount(2), umount2(2) (do_umount()).
 * Signatures: include/linux/lsm_hook_defs.h, the same in 6.1 and 6.12.
 */

/* Whether the current task's mount namespace is owned by the initial user namespace (a NULL on the way: yes). */
static __always_inline bool in_initial_mount_owner(void)
{
	struct task_struct *t = bpf_get_current_task_btf();

	return t->nsproxy->mnt_ns->user_ns->level == 0;
}

/* The verdict of the mount hooks, for an earlier verdict `ret`. */
static __always_inline int mount_check(int ret)
{
	__u64 cgid;

	ONLY_SANDBOXED(ret, cgid);
	if (!in_initial_mount_owner())
		return 0;
	report_other(AGENT_SANDBOX_OP_MOUNT, cgid, 0, 0);
	return -EPERM;
}

SEC("lsm/sb_mount")
int BPF_PROG(sb_mount, const char *dev_name, const struct path *path, const char *type,
	     unsigned long flags, void *data, int ret)
{
	return mount_check(ret);
}

SEC("lsm/move_mount")
int BPF_PROG(move_mount, const struct path *from_path, const struct path *to_path, int ret)
{
	return mount_check(ret);
}

SEC("lsm/sb_umount")
int BPF_PROG(sb_umount, struct vfsmount *mnt, int flags, int ret)
{
	return mount_check(ret);
}
/* ==== end of mounts ==== */

#endif /* AGENT_SANDBOX_MOUNTS_BPF_H */
