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
 * they may look the server up by address:
 * bpf_sk_lookup_tcp()/bpf_sk_lookup_udp() (net/core/filter.c,
 * sock_addr_func_proto()) in the socket's network namespace. The kernel
 * runs them from inet_stream_connect()'s pre_connect (TCP, and the MPTCP
 * subflow, which carries its parent's cgroup), udp_pre_connect()/
 * udpv6_pre_connect() and udp_sendmsg()/udpv6_sendmsg() with an address; they run for sockets
 * whose creating cgroup is below the one they are attached to (the
 * sandboxes' parent), so a task outside every sandbox pays nothing.
 *
 * The owner of a found TCP listener is read through bpf_skc_to_tcp_sock().
 * An IPv4 UDP socket has no such cast (bpf_skc_to_udp6_sock() knows IPv6
 * ones only), so lsm/socket_bind stores the owner
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

/*
 * The IPv4 source address a connect or send from `ctx`'s socket would use
 * (network byte order), 0 if none is chosen yet: for sendmsg4, the source
 * the kernel hands the program (the bound address, or IP_PKTINFO's); else
 * the socket's bound address, for an AF_INET6 socket only if IPv4-mapped.
 */
static __always_inline __be32 v4_source(struct bpf_sock_addr *ctx, bool v6, bool sendmsg)
{
	struct bpf_sock *s = ctx->sk;

	if (sendmsg && !v6)
		return ctx->msg_src_ip4;
	if (!v6)
		return s->src_ip4;
	if (s->src_ip6[0] == 0 && s->src_ip6[1] == 0 && s->src_ip6[2] == bpf_htonl(0xffff))
		return s->src_ip6[3];
	return 0;
}

/* Is an AF_INET6 socket bound to an IPv4-mapped address (::ffff:a.b.c.d)? */
static __always_inline bool v6_bound_mapped(struct bpf_sock_addr *ctx)
{
	struct bpf_sock *s = ctx->sk;

	return s->src_ip6[0] == 0 && s->src_ip6[1] == 0 && s->src_ip6[2] == bpf_htonl(0xffff);
}

/*
 * The verdict on a sandboxed socket's connect or send to `ctx`'s address
 * (`v6`: an AF_INET6 one; `sendmsg`: a send, not a connect).
 *
 * The address looked up is the one the kernel will use:
 * - `::` goes to ::1, or to 127.0.0.1 when the socket is bound to an
 *   IPv4-mapped address (tcp_v6_connect(), __ip6_datagram_connect(),
 *   udpv6_sendmsg(): "::" is loopback, the BSD way).
 * - 0.0.0.0 goes to the source address, or to 127.0.0.1 if none
 *   (ip_route_output_key_hash_rcu(), net/ipv4/route.c); the program writes
 *   that address into the call, so a socket bound to a device
 *   (SO_BINDTODEVICE), whose source the kernel would pick only later, goes
 *   where it was judged.
 * - A UDP datagram to a broadcast (255.255.255.255, a subnet's, which the
 *   daemon keeps in host_addrs) or multicast address (224.0.0.0/4,
 *   ff00::/8) is looped back to this host's wildcard sockets on its port
 *   too (ip_mc_output(), ip6_finish_output2()): it is judged as local.
 */
static __always_inline int inet_verdict(struct bpf_sock_addr *ctx, bool v6, bool sendmsg)
{
	struct bpf_sock_tuple t = {};
	struct sock_owner o = {};
	struct port_key pk = {};
	struct bpf_sock *sk;
	__u64 cgid = bpf_get_current_cgroup_id();
	__u32 proto, size;
	__be32 a = 0;
	__be16 port;
	bool local = false, known, v4 = !v6;

	if (!in_sandbox(cgid))
		return 1;
	proto = ctx->protocol;
	if (proto == IPPROTO_MPTCP)
		proto = IPPROTO_TCP; /* an MPTCP listener listens through a TCP subflow */
	if (proto != IPPROTO_TCP && proto != IPPROTO_UDP)
		return 1;
	port = (__be16)ctx->user_port;
	if (v6) {
		if (ctx->user_ip6[0] == 0 && ctx->user_ip6[1] == 0 &&
		    ctx->user_ip6[2] == bpf_htonl(0xffff)) {
			v4 = true;
			a = ctx->user_ip6[3];
		} else if ((ctx->user_ip6[0] | ctx->user_ip6[1] | ctx->user_ip6[2] |
			    ctx->user_ip6[3]) == 0 && v6_bound_mapped(ctx)) {
			v4 = true; /* "::" from a socket bound to a mapped address */
			a = bpf_htonl(0x7f000001);
		}
	} else {
		a = ctx->user_ip4;
	}
	if (v4) {
		if (a == 0) {
			a = v4_source(ctx, v6, sendmsg);
			if (a == 0)
				a = bpf_htonl(0x7f000001);
			if (v6)
				ctx->user_ip6[3] = a;
			else
				ctx->user_ip4 = a;
			local = true;
		}
		t.ipv4.daddr = a;
		t.ipv4.dport = port;
		local = local || v4_loopback(a) || v4_host_addr(a) ||
			(proto == IPPROTO_UDP &&
			 (a == 0xffffffff || (bpf_ntohl(a) >> 28) == 0xe));
		size = sizeof(t.ipv4);
	} else {
		t.ipv6.daddr[0] = ctx->user_ip6[0];
		t.ipv6.daddr[1] = ctx->user_ip6[1];
		t.ipv6.daddr[2] = ctx->user_ip6[2];
		t.ipv6.daddr[3] = ctx->user_ip6[3];
		if ((t.ipv6.daddr[0] | t.ipv6.daddr[1] | t.ipv6.daddr[2] | t.ipv6.daddr[3]) == 0)
			t.ipv6.daddr[3] = bpf_htonl(1); /* :: reaches ::1 */
		t.ipv6.dport = port;
		local = v6_host_addr(t.ipv6.daddr) ||
			(proto == IPPROTO_UDP && (bpf_ntohl(t.ipv6.daddr[0]) >> 24) == 0xff);
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
	report_other(AGENT_SANDBOX_OP_INET, cgid, proto, pk.port);
	return 0;
}

SEC("cgroup/connect4")
int connect4(struct bpf_sock_addr *ctx)
{
	return inet_verdict(ctx, false, false);
}

SEC("cgroup/connect6")
int connect6(struct bpf_sock_addr *ctx)
{
	return inet_verdict(ctx, true, false);
}

SEC("cgroup/sendmsg4")
int sendmsg4(struct bpf_sock_addr *ctx)
{
	return inet_verdict(ctx, false, true);
}

SEC("cgroup/sendmsg6")
int sendmsg6(struct bpf_sock_addr *ctx)
{
	return inet_verdict(ctx, true, true);
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
