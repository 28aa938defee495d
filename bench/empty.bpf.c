// SPDX-License-Identifier: GPL-2.0
/*
 * The floor of `make bench`: an lsm/file_open program that allows every open
 * at once, and an lsm/unix_stream_connect one that allows every connect (the
 * floor of the connect loop). The cost of running any BPF LSM program on the hook (trampoline,
 * call, return) is in its figure; whatever agent_sandbox.bpf.c does beyond
 * that is the difference to it. Built by the Makefile's bench target with
 * `clang -O2 -g -target bpf`; loaded by `asx-bench empty-prog`.
 */
#define SEC(name) __attribute__((section(name), used))

char LICENSE[] SEC("license") = "GPL";

SEC("lsm/file_open")
int empty_file_open(void *ctx)
{
	return 0;
}

SEC("lsm/unix_stream_connect")
int empty_unix_stream_connect(void *ctx)
{
	return 0;
}
