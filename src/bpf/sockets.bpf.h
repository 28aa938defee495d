/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Side doors I (the section below): the user's own daemons, reached over Unix
 * sockets, the agent's listeners, reached from outside, and descriptors
 * passed in.
 * Uses: maps.bpf.h, gate.bpf.h, keys.bpf.h, open.bpf.h. Hooks:
 * lsm/unix_stream_connect, lsm/unix_may_send, lsm/file_receive.
 */
#ifndef AGENT_SANDBOX_SOCKETS_BPF_H
#define AGENT_SANDBOX_SOCKETS_BPF_H

/*
 * ==== Side doors I (issue 14): the user's own daemons, passed descriptors ====
 *
 * The file hooks judge the task that opens. Whatever a sandboxed task gets a
 * process outside its sandbox to open for it runs unconfined, so:
 *
 * - lsm/unix_stream_connect (stream and seqpacket connect(2):
 *   unix_stream_connect() in net/unix/af_unix.c calls
 *   security_unix_stream_connect(sk, other, newsk)) and lsm/unix_may_send
 *   (a datagram's send or connect: unix_dgram_sendmsg() and
 *   unix_dgram_connect() call security_unix_may_send()) refuse a sandboxed
 *   task a Unix socket, path or abstract, whose owner (sk_uid, the creator's
 *   fsuid: sock_init_data()) is the caller's uid and that was not created
 *   in the caller's sandbox cgroup (sk_cgrp_data, set by cgroup_sk_alloc()
 *   from sk_alloc() in the creating task's context; a socket of a kernel
 *   without it counts as outside). The judged socket is the listening or
 *   receiving one: the server end of a new stream connection is created in
 *   the connecting task's context and says nothing. Other uids' sockets
 *   (journald, the system bus, NSS daemons, the daemon's own) stay allowed;
 *   so do bound sockets the daemon put in sock_allow (`socket` list lines)
 *   while their inode lives (inode_free_security drops the keys of a freed
 *   one).
 * - The same two hooks refuse a task outside every sandbox a Unix socket of
 *   its own uid that a sandbox created (issue 27): the agent could remove
 *   `$SSH_AUTH_SOCK` or gpg-agent's socket and bind its own listener there,
 *   and the user's next `ssh-add` would hand it the decrypted key. Root's and
 *   other uids' clients are not judged; a client inside the sandbox that
 *   made the socket is not refused (`agent-sandbox-exec tmux attach` reaches
 *   a tmux server the agent started).
 * - lsm/file_receive (__receive_fd() in fs/file.c: SCM_RIGHTS, pidfd_getfd,
 *   seccomp addfd) refuses a sandboxed task a descriptor of a file it could
 *   not open itself (file_refused(), the file_open decision).
 * file_receive is inert outside sandboxes (one cgroup lookup, then return);
 * the socket hooks outside read the socket's owner first, and only a socket
 * of the caller's uid costs the cgroup lookup of its creator.
 */

/* sock_allow (the allowed sockets) is in maps.bpf.h; inode_free_security drops its keys. */

/* The cgroup v2 id of the task that created `sk`; 0 if unknown. */
static __always_inline __u64 sock_creator_cgid(struct sock *sk)
{
	if (!bpf_core_field_exists(struct sock, sk_cgrp_data))
		return 0;
	return BPF_CORE_READ(sk, sk_cgrp_data.cgroup, kn, id);
}

/* Is the socket bound at the path of Unix socket `sk` in sock_allow for `cgid`? */
static __always_inline bool sock_allowed(__u64 cgid, struct sock *sk)
{
	struct deny_key k = {};
	struct inode *inode;

	inode = BPF_CORE_READ((struct unix_sock *)sk, path.dentry, d_inode);
	if (!inode)
		return false; /* abstract or unbound: no name to allow */
	k.cgid = cgid;
	k.file.ino = BPF_CORE_READ(inode, i_ino);
	k.file.dev = BPF_CORE_READ(inode, i_sb, s_dev);
	k.file.subvol = subvol_from(inode, BPF_CORE_READ(inode, i_sb, s_magic));
	return bpf_map_lookup_elem(&sock_allow, &k) != NULL;
}

/*
 * Reports the refusal of a connect or send to Unix socket `sk`, for sandbox
 * `cgid` (the caller's, or, for an outside caller, the socket's): its path,
 * or no path for an abstract or unbound one.
 */
static __always_inline void report_unix(__u64 cgid, struct sock *sk)
{
	__u64 d = 0, vmnt = 0;

	BPF_CORE_READ_INTO(&d, (struct unix_sock *)sk, path.dentry);
	BPF_CORE_READ_INTO(&vmnt, (struct unix_sock *)sk, path.mnt);
	if (d)
		report_path(AGENT_SANDBOX_OP_UNIX, cgid, d, vmnt);
	else
		report_other(AGENT_SANDBOX_OP_UNIX, cgid, 0, 0);
}

/* The verdict on sandbox `cgid` reaching Unix socket `other` (listening or receiving). */
static __always_inline int sock_verdict(__u64 cgid, struct sock *other)
{
	__u32 uid = (__u32)bpf_get_current_uid_gid();

	if (!other)
		return -EPERM; /* cannot happen; fail closed */
	if (BPF_CORE_READ(other, sk_uid.val) != uid)
		return 0;
	if (sock_creator_cgid(other) == cgid)
		return 0;
	if (sock_allowed(cgid, other))
		return 0;
	report_unix(cgid, other);
	return -EPERM;
}

/*
 * The verdict on a task outside every sandbox reaching Unix socket `other`:
 * -EPERM if a sandbox of its uid made it. On every connect and datagram of
 * the machine, so the socket is read with direct (BTF, CO-RE) loads, not
 * bpf_probe_read_kernel() calls: with those, a connect outside cost 1.6 %
 * over the empty program instead of the 0.7 % before this check (make bench,
 * section 1c).
 */
static __always_inline int outside_sock_verdict(struct sock *other)
{
	struct cgroup *cg;

	if (!other || other->sk_uid.val != (__u32)bpf_get_current_uid_gid())
		return 0;
	if (!bpf_core_field_exists(struct sock, sk_cgrp_data))
		return 0;
	cg = other->sk_cgrp_data.cgroup;
	if (cg && in_sandbox(cg->kn->id)) {
		report_unix(cg->kn->id, other);
		return -EPERM;
	}
	return 0;
}

SEC("lsm/unix_stream_connect")
int BPF_PROG(unix_stream_connect, struct sock *sock, struct sock *other, struct sock *newsk,
	     int ret)
{
	__u64 cgid;

	if (ret != 0)
		return pass_on(ret);
	cgid = bpf_get_current_cgroup_id();
	if (!in_sandbox(cgid))
		return outside_sock_verdict(other);
	return sock_verdict(cgid, other);
}

SEC("lsm/unix_may_send")
int BPF_PROG(unix_may_send, struct socket *sock, struct socket *other, int ret)
{
	__u64 cgid;

	if (ret != 0)
		return pass_on(ret);
	cgid = bpf_get_current_cgroup_id();
	if (!in_sandbox(cgid))
		return outside_sock_verdict(other ? other->sk : NULL);
	return sock_verdict(cgid, BPF_CORE_READ(other, sk));
}

SEC("lsm/file_receive")
int BPF_PROG(file_receive, struct file *file, int ret)
{
	struct file *fv;
	__u64 cgid;
	__u32 sbx;

	ONLY_SANDBOXED_AS(ret, cgid, sbx);
	fv = file_view(file);
	/* Without walk memos: a passed descriptor is rare, and each use of them costs load time. */
	if (file_refused(cgid, sbx, file, fv, false)) {
		report_file(AGENT_SANDBOX_OP_RECEIVE, cgid, file);
		return -EPERM;
	}
	/* A writable descriptor of a read-only file, judged as an open for writing would be. */
	if ((sbx & SBX_RO) && (file->f_mode & FMODE_WRITE) && write_open_refused(cgid, sbx, file, fv)) {
		report_file(AGENT_SANDBOX_OP_RECEIVE, cgid, file);
		return -EPERM;
	}
	return 0;
}
/* ==== end of side doors I ==== */

#endif /* AGENT_SANDBOX_SOCKETS_BPF_H */
