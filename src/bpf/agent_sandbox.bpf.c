// SPDX-License-Identifier: GPL-2.0
/*
 * agent-sandbox-exec: BPF LSM programs that deny tasks in a tracked sandbox
 * cgroup the opening of listed files.
 *
 * Decision of lsm/file_open, for every open(2)-like call on the machine:
 *   1. an earlier BPF LSM program on this hook already refused: pass that on;
 *   2. the current task's cgroup v2 id is not a sandbox (sandbox_slots, then
 *      agent_cgid_set when a slot is shared): allow;
 *   3. {cgroup id, s_dev, i_ino, btrfs subvolume} of the opened inode is in
 *      deny_map: -EPERM (the inode listed at launch, under any name);
 *   4. {cgroup id, parent directory's key, name} of the opened dentry is in
 *      name_map: -EPERM (whatever inode now sits at a listed path: a file
 *      replaced by rename, re-created or created after launch);
 *   5. otherwise allow.
 * key_filter answers "certainly not listed" for steps 3 and 4 from the inode
 * number alone, without a hash lookup. The hook runs after the DAC and other
 * LSMs' checks for the same open (security_file_open() in fs/open.c:
 * do_dentry_open()), so it can only take permissions away.
 *
 * lsm/inode_link and lsm/inode_rename refuse a sandboxed task a new name for,
 * or a move of, a file that steps 3-4 protect, so a file protected only by
 * its name cannot be carried away from it. These and lsm/inode_create,
 * inode_mknod, inode_symlink and inode_mkdir refuse it any new inode at a
 * listed name; lsm/inode_rmdir, inode_unlink and inode_rename refuse it the
 * removal or move of a directory or symlink on the way to a listed name
 * (KIND_PATH), which would leave the name watch on a directory the user's
 * tools no longer write to. In a case-insensitive directory holding a
 * listed name, where the hook's byte comparison cannot see every spelling
 * of that name, it may open, create, link or rename nothing (see
 * case_insensitive()).
 *
 * lsm/file_ioctl and, for 32-bit tasks, lsm/file_ioctl_compat refuse a
 * sandboxed task the ioctls in ioctl_refused().
 *
 * lsm/inode_free_security drops the deny_map keys of an inode that is being
 * freed with no links left, so a new file that reuses its inode number is not
 * denied by mistake, and the sock_allow keys of such a socket inode, so a new
 * socket that reuses it is not allowed by mistake.
 *
 * lsm/ptrace_access_check keeps a sandboxed task from attaching to (ptrace,
 * /proc/<pid>/mem, process_vm_readv, pidfd_getfd) a task outside its own
 * sandbox cgroup, which could otherwise be made to read a listed file for it,
 * and, since issue 15, from read-mode access too: /proc/<pid>/fd/N and
 * map_files reopen that task's pipes, memfds and deleted files (see
 * "Side doors II" in tasks.bpf.h for what else it and the hooks there
 * refuse: signals, resource limits, coredump_filter, F_SETOWN, TIOCSTI).
 *
 * lsm/sb_mount, lsm/move_mount and lsm/sb_umount refuse a sandboxed task any
 * mount change in a mount namespace the user's outside processes share
 * (mounts.bpf.h), and lsm/inode_setattr, inode_setxattr and inode_set_acl
 * a mode or ACL change of a directory at or below a directory entry
 * (issue 23).
 *
 * lsm/unix_stream_connect, lsm/unix_may_send and lsm/file_receive refuse a
 * sandboxed task the user's own daemons and descriptors of files it could
 * not open ("Side doors I" in sockets.bpf.h).
 *
 * cgroup/connect4, connect6, sendmsg4 and sendmsg6, attached to the
 * sandboxes' parent cgroup, refuse a sandboxed socket a TCP, MPTCP or UDP
 * server of its uid made outside its sandbox on an address of this host;
 * lsm/socket_bind stores a bound UDP socket's owner for them ("Side doors
 * III" in loopback.bpf.h).
 *
 * The repository guard (repo.bpf.h), part of the read-only checks, keeps a
 * sandboxed task from changing the hooks and configuration of every git
 * repository it did not make; fexit/vfs_mkdir records the git directories
 * it makes.
 *
 * Every refusal is reported to the daemon through the ring buffer
 * `denials`, rate-limited (events.bpf.h).
 *
 * One compilation unit, one object, one skeleton: the maps and programs are
 * in the headers below, included here once each, in dependency order (each
 * uses only those above it). Each header says what it holds and which hooks
 * it defines; docs/DESIGN.md has the table.
 */
#include "kernel_types.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_endian.h>
#include "agent_sandbox.h"

char LICENSE[] SEC("license") = "GPL";

#include "maps.bpf.h"       /* every map; the .rodata constants */
#include "gate.bpf.h"       /* is the task sandboxed: in_sandbox(), sandbox_of(), ONLY_SANDBOXED */
#include "events.bpf.h"     /* denial events: report_file(), report_dentry(), report_other() */
#include "keys.bpf.h"       /* file keys, key_filter, listed and marked inodes and names */
#include "walk.bpf.h"       /* directory entries: the walk and its memos; fexit/vfs_rename */
#include "repo.bpf.h"       /* the repository guard: repo_guarded(); fexit/vfs_mkdir */
#include "patterns.bpf.h"   /* name patterns: pattern_states() */
#include "proc.bpf.h"       /* write-opens of an outside task's /proc/<pid>/ files */
#include "file_memo.bpf.h"  /* file memos: file_open's decision kept on the file's inode */
#include "open.bpf.h"       /* lsm/file_open */
#include "names.bpf.h"      /* lsm/inode_link, inode_rename, ..., inode_setattr, inode_setxattr, inode_set_acl */
#include "ioctl.bpf.h"      /* lsm/file_ioctl, file_ioctl_compat */
#include "inode_free.bpf.h" /* lsm/inode_free_security */
#include "tasks.bpf.h"      /* lsm/ptrace_access_check, task_kill, task_setrlimit, file_fcntl */
#include "sockets.bpf.h"    /* lsm/unix_stream_connect, unix_may_send, file_receive */
#include "loopback.bpf.h"   /* cgroup/connect4, connect6, sendmsg4, sendmsg6; lsm/socket_bind */
#include "mounts.bpf.h"     /* lsm/sb_mount, move_mount, sb_umount */
