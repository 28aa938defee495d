/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Side doors II (the section below): a sandboxed task may not reach into the
 * user's other tasks. The write-open check of /proc/<pid>/ files is in
 * proc.bpf.h, the ioctls in ioctl.bpf.h.
 * Uses: gate.bpf.h. Hooks: lsm/ptrace_access_check, lsm/task_kill,
 * lsm/task_setrlimit, lsm/file_fcntl.
 */
#ifndef AGENT_SANDBOX_TASKS_BPF_H
#define AGENT_SANDBOX_TASKS_BPF_H

/*
 * Side doors II (issue 15): the user's other processes and terminal.
 *
 * A task outside the sandbox, of the same user, may hold or have read the
 * bytes of a listed file: a `cat key | ssh-add -` pipeline (the pipe's
 * buffer), a process with the file's contents in its memory, the user's
 * shell on the agent's terminal. A sandboxed task may not reach into such a
 * task:
 * - ptrace_access_check: no ptrace access of any mode (attach or read) to a
 *   task outside its own sandbox cgroup. Read mode guards reopening its
 *   descriptors (/proc/<pid>/fd/N: proc_fd_link() after
 *   proc_fd_access_allowed(); map_files), its environ, maps, auxv, io,
 *   fdinfo, ns/, cwd, root and exe, and the code and stack fields of its
 *   stat (do_task_stat(): `permitted`); status, stat, statm and cmdline,
 *   what ps, pgrep and top read, need no such check (fs/proc/base.c, array.c).
 * - task_kill: no signal (check_kill_permission() in kernel/signal.c) to a
 *   task outside its sandbox: SIGSEGV after a raised RLIMIT_CORE dumps the
 *   target's memory to a core file the agent could read. Signal 0 delivers
 *   nothing and stays allowed.
 * - file_fcntl: F_SETOWN only to itself, its process group or 0, no F_SETSIG
 *   or F_SETOWN_EX: SIGIO (and, after F_SETSIG, any signal) is sent to the
 *   file's owner when I/O is ready, with no task_kill check at delivery
 *   (send_sigio() in fs/fcntl.c), and there the hook cannot tell who set
 *   the owner.
 * - task_setrlimit: no change of an outside task's limits (prlimit(2):
 *   do_prlimit() in kernel/sys.c).
 * - file_open (proc_write_refused()): no write-open of an outside task's
 *   /proc/<pid>/ files, such as coredump_filter (owner-writable, no ptrace
 *   check: proc_coredump_filter_write()), oom_score_adj and clear_refs.
 * - ioctl_refused(): TIOCSTI and TIOCLINUX (see there).
 * setpriority(2), ioprio_set(2) and sched_setaffinity(2) of outside tasks
 * stay allowed (task_setnice, task_setioprio, task_setscheduler): they change
 * when a task runs, not what it reads or where its bytes go.
 * Each hook is inert outside sandboxes: one cgroup lookup (or a compare of
 * its command first), then return.
 */

/* The cgroup v2 id of task `t` (a BTF pointer walk; a NULL on the way reads as 0). */
static __always_inline __u64 task_cgid(struct task_struct *t)
{
	return t->cgroups->dfl_cgrp->kn->id;
}

/*
 * The verdict of the hooks that act on another task `t`, for an earlier
 * verdict `ret`: a sandboxed caller may act only on tasks of its own
 * sandbox cgroup; others are not judged (one cgroup lookup).
 */
static __always_inline int other_task_check(struct task_struct *t, int ret, __u32 op, __u32 detail)
{
	__u64 cgid;

	ONLY_SANDBOXED(ret, cgid);
	if (task_cgid(t) == cgid)
		return 0;
	report_other(op, cgid, detail, (__u32)t->tgid);
	return -EPERM;
}

/* __ptrace_may_access() does not call the hook for the caller's own thread group. */
SEC("lsm/ptrace_access_check")
int BPF_PROG(ptrace_access_check, struct task_struct *child, unsigned int mode, int ret)
{
	return other_task_check(child, ret, AGENT_SANDBOX_OP_PTRACE, mode);
}

/*
 * `cred` is NULL for a signal sent by the current task; a non-NULL one comes
 * from kill_pid_usb_asyncio(), in interrupt context, where the current task
 * is not the sender (the URB's submitter set it up for itself). It is read
 * as a number with bpf_get_func_arg(): the 6.12 verifier types a hook's
 * pointer arguments as trusted, never NULL, so a test of `cred` itself is
 * taken as always true and everything after it dropped as dead code (seen
 * in `bpftool prog dump xlated` on Debian 13: the program returned 0 for
 * every signal). 6.1 keeps the test.
 */
SEC("lsm/task_kill")
int BPF_PROG(task_kill, struct task_struct *p, struct kernel_siginfo *info, int sig,
	     const struct cred *cred, int ret)
{
	__u64 sender_cred = 0;

	if (ret != 0)
		return pass_on(ret);
	if (sig == 0)
		return 0;
	/* Argument 3 is `cred`; an error (none: the hook has 4) leaves 0: checked, fail closed. */
	bpf_get_func_arg(ctx, 3, &sender_cred);
	if (sender_cred != 0)
		return 0;
	return other_task_check(p, 0, AGENT_SANDBOX_OP_SIGNAL, sig);
}

SEC("lsm/task_setrlimit")
int BPF_PROG(task_setrlimit, struct task_struct *p, unsigned int resource, struct rlimit *new_rlim,
	     int ret)
{
	return other_task_check(p, ret, AGENT_SANDBOX_OP_RLIMIT, resource);
}

/* include/uapi/asm-generic/fcntl.h, include/uapi/linux/fcntl.h */
#define F_SETOWN 8U
#define F_SETSIG 10U
#define F_SETOWN_EX 15U

/*
 * Is `who`, F_SETOWN's argument (a pid, or minus a process group id, in the
 * caller's pid namespace), the caller itself, its own process group or 0
 * (no owner)? Compared with the numbers of the initial pid namespace: in a
 * pid namespace of its own the caller's other numbers are refused, which is
 * strict, never loose (such a namespace holds only its descendants).
 */
static __always_inline bool owner_is_self(int who)
{
	struct task_struct *cur;
	long long pgid;

	if (who == 0)
		return true;
	if (who > 0)
		return (__u32)who == (__u32)(bpf_get_current_pid_tgid() >> 32);
	cur = bpf_get_current_task_btf();
	pgid = BPF_CORE_READ(cur, signal, pids[PIDTYPE_PGID], numbers[0].nr);
	return pgid != 0 && -(long long)who == pgid;
}

/* fcntl(2), 64- and 32-bit: security_file_fcntl() in fs/fcntl.c, before do_fcntl(). */
SEC("lsm/file_fcntl")
int BPF_PROG(file_fcntl, struct file *file, unsigned int cmd, unsigned long arg, int ret)
{
	__u64 cgid;

	if (ret != 0)
		return pass_on(ret);
	if (cmd != F_SETOWN && cmd != F_SETSIG && cmd != F_SETOWN_EX)
		return 0;
	cgid = bpf_get_current_cgroup_id();
	if (!in_sandbox(cgid))
		return 0;
	/*
	 * F_SETOWN_EX's argument is a pointer: a value read here could change
	 * before do_fcntl(). Written as two returns of constants: a form the
	 * compiler folded into -in_sandbox() was refused by the 6.12 verifier
	 * (R0 not in [-4095, 0]; it does not bound a negation).
	 */
	if (cmd == F_SETOWN && owner_is_self((int)arg))
		return 0;
	report_other(AGENT_SANDBOX_OP_FCNTL, cgid, cmd, arg);
	return -EPERM;
}

#endif /* AGENT_SANDBOX_TASKS_BPF_H */
