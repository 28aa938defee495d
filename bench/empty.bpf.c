// SPDX-License-Identifier: GPL-2.0
/*
 * The floor of `make bench`: an lsm/file_open program that allows every open
 * at once. The cost of running any BPF LSM program on the hook (trampoline,
 * call, return) is in its figure; whatever agent_sandbox.bpf.c does beyond
 * that is the difference to it. Likewise empty lsm/unix_stream_connect,
 * lsm/task_kill and lsm/file_fcntl programs are the floors of the connect
 * loop (asx-bench connectloop) and of the signal and fcntl loops (asx-bench
 * sysloop); an empty lsm/inode_free_security, which ours also attaches and
 * the connect loop's freed sockets run, belongs to the connect loop's floor.
 * The empty cgroup/connect4, connect6, sendmsg4 and sendmsg6 programs, on a
 * cgroup of their own, are the floor of the loopback loops (asx-bench
 * netloop): once any such program is attached anywhere, the kernel runs the
 * cgroup path (lock_sock(), an empty program array) on every connect and
 * addressed UDP send of the machine. Empty lsm/inode_create, inode_unlink,
 * inode_rename and fexit/vfs_rename programs are the floor of the name-change
 * loops (asx-bench fsloop). Built by the Makefile's bench target with
 * `clang -O2 -g -target bpf`; loaded by `asx-bench empty-prog`.
 */
#define SEC(name) __attribute__((section(name), used))

char LICENSE[] SEC("license") = "GPL";

SEC("lsm/file_open")
int empty_file_open(void *ctx)
{
	return 0;
}

SEC("lsm/task_kill")
int empty_task_kill(void *ctx)
{
	return 0;
}

SEC("lsm/file_fcntl")
int empty_file_fcntl(void *ctx)
{
	return 0;
}

SEC("lsm/unix_stream_connect")
int empty_unix_stream_connect(void *ctx)
{
	return 0;
}

/* Every freed inode (a socket of the connect loop) runs ours too: the floor has it. */
SEC("lsm/inode_free_security")
int empty_inode_free_security(void *ctx)
{
	return 0;
}

SEC("cgroup/connect4")
int empty_connect4(void *ctx)
{
	return 1;
}

SEC("cgroup/connect6")
int empty_connect6(void *ctx)
{
	return 1;
}

SEC("cgroup/sendmsg4")
int empty_sendmsg4(void *ctx)
{
	return 1;
}

SEC("cgroup/sendmsg6")
int empty_sendmsg6(void *ctx)
{
	return 1;
}

/* The floors of the name-change loops (asx-bench fsloop): the hooks ours attaches there. */
SEC("lsm/inode_create")
int empty_inode_create(void *ctx)
{
	return 0;
}

SEC("lsm/inode_unlink")
int empty_inode_unlink(void *ctx)
{
	return 0;
}

SEC("lsm/inode_rename")
int empty_inode_rename(void *ctx)
{
	return 0;
}

SEC("fexit/vfs_rename")
int empty_vfs_rename(void *ctx)
{
	return 0;
}
