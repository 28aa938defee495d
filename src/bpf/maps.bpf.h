/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Every map of agent_sandbox.bpf.o and its load-time constants (.rodata),
 * in one place: what the programs keep, and what the daemon reads and writes
 * (src/kernel/sandboxes.rs and filter.rs, through the skeleton). The key and value types are in
 * agent_sandbox.h, shared with the daemon.
 * Uses: no other .bpf.h. Hooks: none.
 */
#ifndef AGENT_SANDBOX_MAPS_BPF_H
#define AGENT_SANDBOX_MAPS_BPF_H

/* Read by the daemon from the skeleton's rodata to name its pin directory. */
const volatile __u32 layout_version = AGENT_SANDBOX_LAYOUT_VERSION;

/*
 * Where walk memos live, set by the daemon before load (src/kernel/variant.rs):
 * MEMO_INODE_STORAGE, the directory's inode storage; MEMO_HASH, the LRU hash
 * walk_memo_hash keyed by the directory inode's address, for a kernel whose
 * verifier refuses inode storage there (7.x types file->f_path.dentry as
 * untrusted, and bpf_inode_storage_get() refuses the directory's inode
 * reached through it); MEMO_NONE, no memos (every open in a sandbox with
 * directory entries walks from the file). .rodata is frozen at load, so the
 * verifier takes this for a constant and never visits the branches it rules
 * out (kernel/bpf/verifier.c: a load from a read-only map whose value is
 * known; dead branches are removed before JIT), and the test costs nothing
 * at run time.
 */
#define MEMO_NONE 0
#define MEMO_INODE_STORAGE 1
#define MEMO_HASH 2
const volatile __u32 walk_memo_store = MEMO_INODE_STORAGE;
/* The shared enums' carrier into BTF (agent_sandbox.h); nothing reads it. */
const volatile struct agent_sandbox_shared agent_sandbox_shared = {};

/* {sandbox cgroup id, file key} -> 1. Written by agent-sandbox-execd; keys of freed inodes are deleted here. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, AGENT_SANDBOX_MAX_DENY);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct deny_key);
	__type(value, __u8);
} deny_map SEC(".maps");

/* {sandbox cgroup id, directory key, name} -> 1. Written only by agent-sandbox-execd. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, AGENT_SANDBOX_MAX_DENY);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct name_key);
	__type(value, __u8);
} name_map SEC(".maps");

/* Set of sandbox cgroup ids (u64 -> 1). Written only by agent-sandbox-execd. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, AGENT_SANDBOX_MAX_SANDBOXES);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, __u64);
	__type(value, __u8);
} agent_cgid_set SEC(".maps");

/* Low bits of a cgroup id -> that sandbox's id, 0 or SLOT_SHARED (agent_sandbox.h). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, AGENT_SANDBOX_SLOTS);
	__uint(map_flags, BPF_F_MMAPABLE);
	__type(key, __u32);
	__type(value, __u64);
} sandbox_slots SEC(".maps");

/* The listed-key bitmap (agent_sandbox.h). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, AGENT_SANDBOX_FILTER_WORDS);
	__uint(map_flags, BPF_F_MMAPABLE);
	__type(key, __u32);
	__type(value, __u64);
} key_filter SEC(".maps");

/*
 * Count of deny_map keys dropped by inode_free_security, for the daemon: while
 * it is unchanged, the daemon's record of deny_map is exact and a no-change
 * apply need not write the keys again.
 */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} dropped_keys SEC(".maps");

/* Per-CPU room for a name_key, too big for the 512-byte BPF stack. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct name_key);
} name_scratch SEC(".maps");

/* ---- Walk memos (walk.bpf.h: "Directory entries and exceptions") ---- */

/* One struct walk_gens (agent_sandbox.h). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__uint(map_flags, BPF_F_MMAPABLE);
	__type(key, __u32);
	__type(value, struct walk_gens);
} walk_gens SEC(".maps");

/* Directory inode -> its walk memo; a non-directory's: its file memo (agent_sandbox.h). */
struct {
	__uint(type, BPF_MAP_TYPE_INODE_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct walk_memo);
} walk_memos SEC(".maps");

/*
 * The file memos' guess of whether a file was opened before
 * (file_memo.bpf.h: file_memo_opened_before()): slot hash(i_ino) holds a
 * tag of the inode number of the last file kept there. A hint only: a
 * wrong guess makes a memo one open early or late. Not pinned.
 */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, AGENT_SANDBOX_FILE_MEMO_SEEN);
	__type(key, __u32);
	__type(value, __u32);
} file_memo_seen SEC(".maps");

/*
 * The same memos for MEMO_HASH: {directory inode's address, i_ino} -> memo.
 * inode_free_security deletes a directory's memo before the inode's memory
 * can be reused, as inode storage is freed with its inode; LRU, so that
 * memos of directories that stay cached cannot fill it (an evicted memo is
 * a walk, nothing else). max_entries is set by the daemon (1 when unused).
 */
struct memo_key {
	__u64 inode;
	__u64 ino;
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, AGENT_SANDBOX_MEMO_HASH_ENTRIES);
	__type(key, struct memo_key);
	__type(value, struct walk_memo);
} walk_memo_hash SEC(".maps");

/* ---- The repository guard (repo.bpf.h) ---- */

/* What made_dirs holds for a directory a sandboxed task made. */
struct made_dir {
	__u32 uid;        /* the task's uid */
	__u32 generation; /* the inode's i_generation: a reused number is not the same directory */
};

/*
 * The directories sandboxed tasks made (fexit/vfs_mkdir): their file key
 * (kind 0) -> struct made_dir. Deleted when the directory's inode is freed
 * (evicted or removed: a directory read back from disk later is the
 * user's again, fail closed). Full: a new directory is not recorded (it is
 * guarded like the user's).
 */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, AGENT_SANDBOX_MAX_MADE_DIRS);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct file_key);
	__type(value, struct made_dir);
} made_dirs SEC(".maps");

/* ---- Side doors I (sockets.bpf.h) ---- */

/* Room for allowed sockets, shared by all sandboxes (a few per user). */
#define SOCK_ALLOW_MAX 65536

/*
 * {sandbox cgroup id, file key (kind 0) of a bound socket's inode} -> 1: a
 * socket this sandbox may connect and send to although a process of the same
 * uid made it outside (see "Side doors I" in sockets.bpf.h). Written by
 * agent-sandbox-execd; the keys of a freed socket inode are deleted by
 * inode_free_security, so a socket that later gets the same inode number is
 * not allowed by mistake.
 */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, SOCK_ALLOW_MAX);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct deny_key);
	__type(value, __u8);
} sock_allow SEC(".maps");

/* Room for allowed loopback ports, shared by all sandboxes (a few per user). */
#define PORT_ALLOW_MAX 16384
/* Room for the host's own addresses (every interface's, IPv4 and IPv6). */
#define HOST_ADDRS_MAX 1024

/*
 * {sandbox cgroup id, protocol, port} -> 1: a loopback port where this
 * sandbox may reach a server its uid made outside (`port` list lines; see
 * "Side doors III" in loopback.bpf.h). Written by agent-sandbox-execd at a
 * launch from outside.
 */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, PORT_ALLOW_MAX);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct port_key);
	__type(value, __u8);
} port_allow SEC(".maps");

/*
 * The host's own addresses (struct host_addr) -> 1, which reach the host's
 * own servers as loopback does. Kept by agent-sandbox-execd from rtnetlink
 * (RTM_NEWADDR, RTM_DELADDR) of the initial network namespace.
 */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, HOST_ADDRS_MAX);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct host_addr);
	__type(value, __u8);
} host_addrs SEC(".maps");

/*
 * Per bound UDP socket: its owner and creating cgroup (struct sock_owner),
 * set by lsm/socket_bind; freed with the socket. A cgroup sock_addr program
 * has no other way to learn a looked-up UDP socket's owner on 6.1.
 */
struct {
	__uint(type, BPF_MAP_TYPE_SK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct sock_owner);
} udp_owner SEC(".maps");

/* ---- Name patterns (patterns.bpf.h) ---- */

/*
 * The shapes of every sandbox's name patterns (struct pattern_shape,
 * agent_sandbox.h), their union; written only by agent-sandbox-execd
 * (src/kernel/patterns.rs), a shape before any key that needs it and after
 * the last key that needed it is gone.
 */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, AGENT_SANDBOX_MAX_SHAPES);
	__type(key, __u32);
	__type(value, struct pattern_shape);
} pattern_shapes SEC(".maps");

/* The patterns' first test (struct pattern_prefilter); written only by agent-sandbox-execd. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct pattern_prefilter);
} pat_prefilter SEC(".maps");

/* The state of one pattern_states() pass (patterns.bpf.h), kept in its room (below). */
struct pattern_ctx {
	__u64 cgid;
	__u64 dir;   /* address of the name's directory's inode, 0 if none */
	__u32 len;   /* the name's length */
	__u32 found; /* PAT_FOUND_* */
	/* The name's hashes under the deep shapes, for deep_step() */
	__u64 deep_h[AGENT_SANDBOX_MAX_DEEP_SHAPES];
	__u32 ndeep;
	__u32 done;   /* deep_step(): the root of the filesystem was reached */
	__u64 dentry; /* deep_step(): this level's directory dentry (a number) */
};

/*
 * Per-CPU room for one name's words (too big for the stack): its first
 * AGENT_SANDBOX_PATTERN_WINDOW bytes, ASCII-folded, and its last as many,
 * read so that the name ends at tail[AGENT_SANDBOX_PATTERN_WINDOW]; and
 * the name_map key the pattern lookups build. `busy` is 1 while a
 * pattern_states() uses it (cmpxchg): a task that preempts another on the
 * same CPU and finds it busy fails closed instead of mixing two names.
 */
struct pattern_room {
	__u64 busy;
	__u64 head[AGENT_SANDBOX_PATTERN_WINDOW / 8];
	__u8 tail[2 * AGENT_SANDBOX_PATTERN_WINDOW];
	__u64 tail_words[AGENT_SANDBOX_PATTERN_WINDOW / 8];
	struct name_key nk;
	struct pattern_ctx c;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct pattern_room);
} pattern_scratch SEC(".maps");

/* ---- Denial events (events.bpf.h) ---- */

/*
 * The records of refusals (struct denial) for the daemon, which reads them
 * in its poll loop. Pinned, so a record not yet read outlives a restart of
 * the daemon. 512 KiB: 390 records; a full ring drops the newest (counted).
 */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 512 * 1024);
} denials SEC(".maps");

/*
 * Per-CPU room for the record being built (too big for the stack), with a
 * flag that says it is in use: an LSM program can be preempted on its CPU
 * (PREEMPT kernels) by a task whose refusal would build its record in the
 * same room, mixing two refusals (of two users) into one record. The later
 * one finds the room busy and is counted lost instead.
 */
struct denial_room {
	__u64 busy; /* 1 while a record is built here (cmpxchg) */
	struct denial d;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct denial_room);
} denial_scratch SEC(".maps");

/* A token bucket's key: a sandbox (op 0, dev 0, ino 0), or a sandbox's op on one file. */
struct denial_bucket_key {
	__u64 cgid;
	__u64 ino;
	__u32 dev;
	__u32 op;
};

/* A token bucket: tokens left, when it last gained any, refusals dropped since its last event. */
struct denial_bucket {
	__u64 last_ns;
	__u32 tokens;
	__u32 suppressed;
};

/* The rate limit's buckets (events.bpf.h); LRU, so a storm over many files cannot fill it. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 8192);
	__type(key, struct denial_bucket_key);
	__type(value, struct denial_bucket);
} denial_buckets SEC(".maps");

/*
 * Sandbox cgroup id -> refusals of it the rate limit dropped, ever; the
 * daemon reads the growth and deletes the keys of sandboxes that are gone.
 */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, AGENT_SANDBOX_MAX_SANDBOXES);
	__type(key, __u64);
	__type(value, __u64);
} denial_dropped SEC(".maps");

/* [0] records lost to a full ring, [1] refusals the rate limit dropped; read by the daemon. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 2);
	__type(key, __u32);
	__type(value, __u64);
} denial_stats SEC(".maps");

#endif /* AGENT_SANDBOX_MAPS_BPF_H */
