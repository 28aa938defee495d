/* SPDX-License-Identifier: GPL-2.0 */
/*
 * proc_write_refused(): the check of file_open (open.bpf.h) that refuses a
 * sandboxed task the write-open of an outside task's /proc/<pid>/ files, one
 * of the side doors of tasks.bpf.h ("Side doors II").
 * Uses: no other .bpf.h. Hooks: none.
 */
#ifndef AGENT_SANDBOX_PROC_BPF_H
#define AGENT_SANDBOX_PROC_BPF_H

/*
 * Is `file` (being opened by sandbox `cgid`) a /proc/<pid>/ file opened for
 * writing whose task is outside the sandbox? The task is PROC_I(inode)->pid's
 * (proc_pid() in fs/proc/internal.h), found through pid->tasks[PIDTYPE_PID]
 * (pid_task() in kernel/pid.c), every field by probe read. A /proc file of
 * no task (/proc/sys, ...) is not concerned; a task that has gone makes the
 * write fail anyway (ESRCH). Without struct proc_inode in the kernel's BTF
 * every write-open under /proc is refused (fail closed).
 */
static __always_inline bool proc_write_refused(__u64 cgid, struct file *file)
{
	struct inode *inode = file->f_inode;
	struct proc_inode *pi;
	struct hlist_node *first;
	struct task_struct *t;
	struct pid *pid;

	if (!(file->f_mode & FMODE_WRITE) || sb_of(inode)->s_magic != PROC_SUPER_MAGIC)
		return false;
	if (!bpf_core_type_exists(struct proc_inode))
		return true;
	pi = (void *)inode - bpf_core_field_offset(struct proc_inode, vfs_inode);
	pid = BPF_CORE_READ(pi, pid);
	if (!pid)
		return false;
	first = BPF_CORE_READ(pid, tasks[PIDTYPE_PID].first);
	if (!first)
		return false;
	t = (void *)first - bpf_core_field_offset(struct task_struct, pid_links);
	return BPF_CORE_READ(t, cgroups, dfl_cgrp, kn, id) != cgid;
}

#endif /* AGENT_SANDBOX_PROC_BPF_H */
