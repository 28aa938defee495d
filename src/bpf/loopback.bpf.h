/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Side doors III (issue 27): the user's servers on loopback, reached from a
 * sandbox over TCP, MPTCP or UDP.
 * Uses: maps.bpf.h, gate.bpf.h. Hooks: cgroup/connect4, cgroup/connect6,
 * cgroup/sendmsg4, cgroup/sendmsg6 (attached to the sandboxes' parent
 * cgroup, so they run for sockets made in a sandbox only), lsm/socket_bind.
 */
#ifndef AGENT_SANDBOX_LOOPBACK_BPF_H
#define AGENT_SANDBOX_LOOPBACK_BPF_H

/*
 * ==== Side doors III (issue 27): the user's servers on loopback ====
 *
 * A dev server, `python3 -m http.server` in the home, Jupyter or a browser's
 * debugging port, started by the user outside, reads files for whoever asks.
 * A sandboxed task may not connect (TCP, MPTCP; UDP connect) or send (UDP
 * sendto/sendmsg) to a server of its own uid that was made outside its
 * sandbox, on an address of this host: 127.0.0.0/8, ::1, 0.0.0.0 and ::
 * (which reach loopback), their IPv4-mapped spellings, and the host's own
 * addresses (host_addrs, kept by the daemon). Other uids' servers (a
 * root-owned database), the sandbox's own servers and remote hosts stay
 * reachable; a `port` list line allows a port (port_allow).
 *
 * The programs are cgroup sock_addr programs, not LSM ones, because only
 * they may look the server up as the kernel would route the connection:
 * bpf_sk_lookup_tcp()/bpf_sk_lookup_udp() (net/core/filter.c,
 * sock_addr_func_proto()) in the caller's network namespace. The kernel
 * runs them from inet_stream_connect()'s pre_connect (TCP, and the MPTCP
 * subflow, which carries its parent's cgroup), ip4/ip6_datagram_connect()
 * and udp_sendmsg()/udpv6_sendmsg() with an address; they run for sockets
 * whose creating cgroup is below the one they are attached to (the
 * sandboxes' parent), so a task outside every sandbox pays nothing.
 *
 * The owner of a found TCP listener is read through bpf_skc_to_tcp_sock().
 * A UDP socket has no such cast on 6.1, so lsm/socket_bind stores the owner
 * and creating cgroup of every bound UDP socket in its sk_storage
 * (udp_owner); a UDP socket bound before the programs were first loaded has
 * none and is not judged.
 *
 * A wildcard listener (0.0.0.0, ::) answers a lookup for any address, a
 * remote one too, so only an address of this host is looked up at all: a
 * loopback one or one of host_addrs (a remote address costs no lookup).
 * Returns: 1 lets the call go on, 0 refuses it with EPERM.
 */

#define IPPROTO_MPTCP 262

/* 127.0.0.0/8; `a` in network byte order. */
static __always_inline bool v4_loopback(__be32 a)
{
	return (bpf_ntohl(a) >> 24) == 127;
}

/* Is `a` (IPv4, network byte order) one of the host's own addresses? */
static __always_inline bool v4_host_addr(__be32 a)
{
	struct host_addr h = {};

	h.addr[10] = 0xff;
	h.addr[11] = 0xff;
	__builtin_memcpy(&h.addr[12], &a, 4);
	return bpf_map_lookup_elem(&host_addrs, &h) != NULL;
}

/* Is `a` (IPv6, network byte order) ::1 or one of the host's own addresses? */
static __always_inline bool v6_host_addr(const __be32 a[4])
{
	struct host_addr h = {};

	if (a[0] == 0 && a[1] == 0 && a[2] == 0 && a[3] == bpf_htonl(1))
		return true;
	__builtin_memcpy(h.addr, a, 16);
	return bpf_map_lookup_elem(&host_addrs, &h) != NULL;
}

/*
 * The owner and creating cgroup of `sk`, a socket bpf_sk_lookup_*() found
 * for protocol `proto` (IPPROTO_TCP or IPPROTO_UDP); false if unknown.
 */
static __always_inline bool inet_owner(struct bpf_sock *sk, __u32 proto, struct sock_owner *o)
{
	struct sock_owner *tag;
	struct tcp_sock *tp;
	struct cgroup *cg;
	__u64 id;

	if (proto != IPPROTO_TCP) {
		tag = bpf_sk_storage_get(&udp_owner, sk, 0, 0);
		if (!tag)
			return false;
		o->uid = tag->uid;
		id = tag->cgid;
		/* Keeps clang from sharing this load with the one below: the verifier refuses an insn on two kinds of pointer. */
		barrier_var(id);
		o->cgid = id;
		return true;
	}
	tp = bpf_skc_to_tcp_sock(sk);
	if (!tp)
		return false;
	o->uid = tp->inet_conn.icsk_inet.sk.sk_uid.val;
	o->cgid = 0;
	if (bpf_core_field_exists(struct sock, sk_cgrp_data)) {
		cg = tp->inet_conn.icsk_inet.sk.sk_cgrp_data.cgroup;
		if (cg) {
			id = cg->kn->id;
			barrier_var(id);
			o->cgid = id;
		}
	}
	return true;
}

/* The verdict on a sandboxed socket's connect or send to `ctx`'s address (`v6`: an AF_INET6 one). */
static __always_inline int inet_verdict(struct bpf_sock_addr *ctx, bool v6)
{
	struct bpf_sock_tuple t = {};
	struct sock_owner o = {};
	struct port_key pk = {};
	struct bpf_sock *sk;
	__u64 cgid = bpf_get_current_cgroup_id();
	__u32 proto, size;
	__be16 port;
	bool local, known;

	if (!in_sandbox(cgid))
		return 1;
	proto = ctx->protocol;
	if (proto == IPPROTO_MPTCP)
		proto = IPPROTO_TCP; /* an MPTCP listener listens through a TCP subflow */
	if (proto != IPPROTO_TCP && proto != IPPROTO_UDP)
		return 1;
	port = (__be16)ctx->user_port;
	if (!v6 || (ctx->user_ip6[0] == 0 && ctx->user_ip6[1] == 0 &&
		    ctx->user_ip6[2] == bpf_htonl(0xffff))) {
		__be32 a = v6 ? ctx->user_ip6[3] : ctx->user_ip4;

		if (a == 0)
			a = bpf_htonl(0x7f000001); /* 0.0.0.0 reaches 127.0.0.1 */
		t.ipv4.daddr = a;
		t.ipv4.dport = port;
		local = v4_loopback(a) || v4_host_addr(a);
		size = sizeof(t.ipv4);
	} else {
		t.ipv6.daddr[0] = ctx->user_ip6[0];
		t.ipv6.daddr[1] = ctx->user_ip6[1];
		t.ipv6.daddr[2] = ctx->user_ip6[2];
		t.ipv6.daddr[3] = ctx->user_ip6[3];
		if ((t.ipv6.daddr[0] | t.ipv6.daddr[1] | t.ipv6.daddr[2] | t.ipv6.daddr[3]) == 0)
			t.ipv6.daddr[3] = bpf_htonl(1); /* :: reaches ::1 */
		t.ipv6.dport = port;
		local = v6_host_addr(t.ipv6.daddr);
		size = sizeof(t.ipv6);
	}
	if (!local)
		return 1;
	if (proto == IPPROTO_TCP)
		sk = bpf_sk_lookup_tcp(ctx, &t, size, BPF_F_CURRENT_NETNS, 0);
	else
		sk = bpf_sk_lookup_udp(ctx, &t, size, BPF_F_CURRENT_NETNS, 0);
	if (!sk)
		return 1;
	known = inet_owner(sk, proto, &o);
	bpf_sk_release(sk);
	if (!known)
		return 1;
	if (o.uid != (__u32)bpf_get_current_uid_gid() || o.cgid == cgid)
		return 1;
	pk.cgid = cgid;
	pk.port = bpf_ntohs(port);
	pk.proto = (__u8)proto;
	if (bpf_map_lookup_elem(&port_allow, &pk))
		return 1;
	return 0;
}

SEC("cgroup/connect4")
int connect4(struct bpf_sock_addr *ctx)
{
	return inet_verdict(ctx, false);
}

SEC("cgroup/connect6")
int connect6(struct bpf_sock_addr *ctx)
{
	return inet_verdict(ctx, true);
}

SEC("cgroup/sendmsg4")
int sendmsg4(struct bpf_sock_addr *ctx)
{
	return inet_verdict(ctx, false);
}

SEC("cgroup/sendmsg6")
int sendmsg6(struct bpf_sock_addr *ctx)
{
	return inet_verdict(ctx, true);
}

/*
 * Every bind(2) of the machine (security_socket_bind() in __sys_bind(),
 * net/socket.c): a UDP socket's owner and creating cgroup go to its
 * sk_storage (see above). Refuses nothing.
 */
SEC("lsm/socket_bind")
int BPF_PROG(socket_bind, struct socket *sock, struct sockaddr *address, int addrlen, int ret)
{
	struct sock_owner *o;
	struct cgroup *cg;
	struct sock *sk;
	__u16 family;

	if (ret != 0)
		return pass_on(ret);
	sk = sock->sk;
	if (!sk || sk->sk_protocol != IPPROTO_UDP)
		return 0;
	family = sk->__sk_common.skc_family;
	if (family != AF_INET && family != AF_INET6)
		return 0;
	o = bpf_sk_storage_get(&udp_owner, sk, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (!o)
		return 0;
	o->uid = sk->sk_uid.val;
	o->cgid = 0;
	if (bpf_core_field_exists(struct sock, sk_cgrp_data)) {
		cg = sk->sk_cgrp_data.cgroup;
		if (cg)
			o->cgid = cg->kn->id;
	}
	return 0;
}
/* ==== end of side doors III ==== */

#endif /* AGENT_SANDBOX_LOOPBACK_BPF_H */
