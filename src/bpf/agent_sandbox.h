/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The one definition of the map layout shared by the BPF program and the
 * daemon. The skeleton generator turns these types into Rust
 * (`types::deny_key`, ...); `src/kernel/codec.rs` checks its own key types against
 * them and repeats filter_bit() (its unit test holds values computed with gcc
 * from this header).
 *
 * Change anything here and bump AGENT_SANDBOX_LAYOUT_VERSION: the daemon pins
 * the maps under a directory named after it, so a daemon of another layout
 * never reads these maps with the wrong shape.
 */
#ifndef AGENT_SANDBOX_H
#define AGENT_SANDBOX_H

#define AGENT_SANDBOX_LAYOUT_VERSION 13

/*
 * deny_map and name_map capacity, shared by all sandboxes. Entries are
 * allocated on demand (BPF_F_NO_PREALLOC), so an unused capacity costs no
 * memory; the daemon caps each uid at 131072 entries so that no user can fill
 * the maps for the others.
 */
enum agent_sandbox_max_deny { AGENT_SANDBOX_MAX_DENY = 1048576 };
/* agent_cgid_set capacity: one entry per sandbox cgroup (one per uid). */
enum agent_sandbox_max_sandboxes { AGENT_SANDBOX_MAX_SANDBOXES = 65536 };
/*
 * made_dirs capacity (maps.bpf.h): directories made inside a sandbox and
 * still in the inode cache, shared by all sandboxes; entries allocated on
 * demand (about 100 bytes each).
 */
enum agent_sandbox_max_made_dirs { AGENT_SANDBOX_MAX_MADE_DIRS = 1048576 };
/*
 * Walk memos kept in the LRU hash walk_memo_hash when inode storage cannot
 * be used (maps.bpf.h: walk_memo_store): about 150 bytes each,
 * preallocated (2.5 MiB); not pinned, so not part of the layout.
 */
enum agent_sandbox_memo_hash_entries { AGENT_SANDBOX_MEMO_HASH_ENTRIES = 16384 };

/*
 * sandbox_slots: an array indexed by the low bits of the cgroup id. A slot
 * holds 0 (no sandbox has these low bits), the one sandbox cgroup id that has
 * them, or AGENT_SANDBOX_SLOT_SHARED (several do: ask agent_cgid_set). The
 * verifier inlines array lookups, so a task outside every sandbox pays one
 * helper call, one load and a compare instead of a hash lookup.
 */
enum agent_sandbox_slots { AGENT_SANDBOX_SLOTS = 4096 };
#define AGENT_SANDBOX_SLOT_SHARED 0xffffffffffffffffULL
/*
 * Or-ed into a slot that holds one sandbox's cgroup id when that sandbox has
 * directory entries, so the hooks learn it from the same load. Cgroup ids
 * are kernfs node ids (the inode number, plus a generation in the high 32
 * bits: kernfs_node.id in include/linux/kernfs.h), far below bit 63. A
 * shared slot says nothing: the KIND_HAS_DIRS key does.
 */
#define AGENT_SANDBOX_SLOT_DIRS 0x8000000000000000ULL
/*
 * Or-ed into such a slot when that sandbox has audit entries (`audit`
 * lines: KIND_AUDIT*), so file_open looks for them only then. A shared slot
 * says nothing: the KIND_HAS_AUDIT key does.
 */
#define AGENT_SANDBOX_SLOT_AUDIT 0x4000000000000000ULL
/*
 * Or-ed into such a slot when that sandbox has read-only entries
 * (`readonly` lines: KIND_RO*), so the write hooks look for them only then.
 * A shared slot says nothing: the KIND_HAS_RO key does.
 */
#define AGENT_SANDBOX_SLOT_RO 0x2000000000000000ULL
/*
 * Or-ed in besides AGENT_SANDBOX_SLOT_RO when the read-only entries hold a
 * directory entry that needs the whole walk (KIND_RO_DIR_BASE/_USER; not
 * KIND_RO_DIR_OWN alone). A shared slot: the KIND_HAS_RO_DIRS key.
 */
#define AGENT_SANDBOX_SLOT_RO_DIRS 0x1000000000000000ULL
/*
 * Or-ed into such a slot when that sandbox has name patterns
 * (KIND_PAT_*). A shared slot: the KIND_HAS_PATTERNS key.
 */
#define AGENT_SANDBOX_SLOT_PATTERNS 0x0800000000000000ULL

/*
 * key_filter: a bitmap of 2^23 bits (1 MiB) in 64-bit words. Bit
 * filter_bit(ino, tag) is set when some sandbox lists a file with inode
 * number ino (tag FILTER_TAG_FILE) or watches a directory with inode number
 * ino (FILTER_TAG_DIR). A clear bit means "not listed" without a hash lookup;
 * a set bit is confirmed in deny_map or name_map. Only the inode number is
 * hashed: the hook then loads s_dev and the btrfs subvolume only after a hit
 * (every field load through a BTF pointer is a checked load, about seven
 * instructions on x86-64), and a file that shares an inode number with a
 * listed one on another filesystem pays one hash lookup (and, when such an
 * unlinked inode is freed, one delete attempt per sandbox). Only the daemon
 * writes the bitmap (through mmap), and it never clears a bit that a live key
 * still needs.
 */
enum agent_sandbox_filter_bits_log2 { AGENT_SANDBOX_FILTER_BITS_LOG2 = 23 };
#define AGENT_SANDBOX_FILTER_WORDS (1U << (AGENT_SANDBOX_FILTER_BITS_LOG2 - 6))
enum agent_sandbox_filter_tag_file { AGENT_SANDBOX_FILTER_TAG_FILE = 0 };
enum agent_sandbox_filter_tag_dir { AGENT_SANDBOX_FILTER_TAG_DIR = 1 };

/* NAME_MAX from include/uapi/linux/limits.h, plus room for a NUL. */
enum agent_sandbox_name_len { AGENT_SANDBOX_NAME_LEN = 256 };

/*
 * file_key.kind: what a deny_map entry says about its inode. name_map's
 * directory keys always have kind 0.
 * - KIND_OPEN: the sandbox may not open the inode (a file listed at launch).
 * - KIND_PATH: the inode is a directory or symlink on the way to a listed
 *   name; the sandbox may not remove, rename or replace it (so the name the
 *   hook watches stays the one the user's tools write to).
 * - KIND_LISTED_DIR: the directory that holds a listed name (it is on the
 *   way too). In a case-insensitive directory, where one name has many
 *   spellings and the hook compares bytes, the sandbox may open, create,
 *   link or rename no name at all (see case_insensitive()).
 * - KIND_FOLDING_DIR: a directory holding a listed name that the daemon
 *   found case-insensitive where the hook cannot see it by itself: XFS's
 *   ASCII-ci mode looks names up without case in its directories' lookup
 *   operation and leaves the dentry cache byte-wise. Treated as a
 *   case-insensitive KIND_LISTED_DIR.
 */
/*
 * The constants the daemon shares are enumerators, not macros (but the
 * layout version, which scripts/build-next.sh raises with sed), so that they
 * reach the object's BTF (through the .rodata variables in maps.bpf.h) and
 * the skeleton emits them for Rust (src/kernel/codec.rs compares the Rust
 * side's copies with them).
 */
enum agent_sandbox_kind {
	AGENT_SANDBOX_KIND_OPEN = 0,
	AGENT_SANDBOX_KIND_PATH = 1,
	AGENT_SANDBOX_KIND_LISTED_DIR = 2,
	AGENT_SANDBOX_KIND_FOLDING_DIR = 3,
/*
 * Directory entries and exceptions (list lines `DIR/`, `!PATH`, `!DIR/`),
 * per list: the base list's (_BASE) and the user's (_USER). On a directory's
 * key in deny_map (KIND_DIR_*: every non-directory below it is denied;
 * KIND_EXC_* on a file or directory: re-allowed for that list's entries
 * above it), and as the kind of name_map's directory key for the same marks
 * by name ({parent, name}: a directory replaced at the listed path, a file
 * replaced at an excepted name). KIND_HAS_DIRS, on the all-zero file key,
 * says the sandbox has directory entries where its slot is shared (else
 * AGENT_SANDBOX_SLOT_DIRS in the slot says it). These kinds have
 * key_filter bits (FILTER_TAG_FILE by inode, FILTER_TAG_DIR by the parent of
 * a name), except KIND_HAS_DIRS.
 */
	AGENT_SANDBOX_KIND_DIR_BASE = 4,
	AGENT_SANDBOX_KIND_DIR_USER = 5,
	AGENT_SANDBOX_KIND_EXC_BASE = 6,
	AGENT_SANDBOX_KIND_EXC_USER = 7,
	AGENT_SANDBOX_KIND_HAS_DIRS = 8,
/*
 * Audit entries (list lines `audit PATH`, `audit DIR/`; shadow mode): an
 * open they match is allowed and reported as "would deny"
 * (AGENT_SANDBOX_OP_AUDIT_OPEN). KIND_AUDIT on a file's key (deny_map) and
 * as the kind of name_map's directory key for its name; KIND_AUDIT_DIR_*
 * like KIND_DIR_* (the same list's KIND_EXC_* exceptions apply to them).
 * KIND_HAS_AUDIT, on the all-zero file key, says the sandbox has audit
 * entries where its slot is shared (else AGENT_SANDBOX_SLOT_AUDIT). They
 * never refuse anything: an enforced entry of either list that matches the
 * same open decides (deny beats audit). These kinds have key_filter bits,
 * except KIND_HAS_AUDIT.
 */
	AGENT_SANDBOX_KIND_AUDIT = 9,
	AGENT_SANDBOX_KIND_AUDIT_DIR_BASE = 10,
	AGENT_SANDBOX_KIND_AUDIT_DIR_USER = 11,
	AGENT_SANDBOX_KIND_HAS_AUDIT = 12,
/*
 * Read-only entries (list lines `readonly PATH`, `readonly DIR/`, and the
 * user's own lists, always): the sandbox may read the file but not change
 * it, nor anything below the directory (walk.bpf.h: the write walk).
 * KIND_RO on a file's key (deny_map) and as the kind of name_map's
 * directory key for its name; KIND_RO_DIR_* like KIND_DIR_* (the same
 * list's KIND_EXC_* exceptions apply to them). KIND_HAS_RO, on the all-zero
 * file key, says the sandbox has read-only entries where its slot is shared
 * (else AGENT_SANDBOX_SLOT_RO). These kinds have key_filter bits, except
 * KIND_HAS_RO.
 */
	AGENT_SANDBOX_KIND_RO = 13,
	AGENT_SANDBOX_KIND_RO_DIR_BASE = 14,
	AGENT_SANDBOX_KIND_RO_DIR_USER = 15,
	AGENT_SANDBOX_KIND_HAS_RO = 16,
/*
 * KIND_RO_DIR_OWN: the user's own lists' directory
 * (~/.config/agent-sandbox-exec/, always read-only; base-list exceptions
 * apply), when nothing below it is a directory: a file there is at most
 * two levels below the mark, so a sandbox whose only read-only directory
 * entry this is walks two levels (SBX_RO without SBX_RO_DIRS), not to the
 * root. With a subdirectory there, the daemon marks it KIND_RO_DIR_BASE.
 * KIND_HAS_RO_DIRS, on the all-zero file key: the sandbox has
 * KIND_RO_DIR_BASE/_USER marks, where its slot is shared.
 */
	AGENT_SANDBOX_KIND_RO_DIR_OWN = 17,
	AGENT_SANDBOX_KIND_HAS_RO_DIRS = 18,
/*
 * Name patterns (list lines `DIR/NAME`, and `**` then `/NAME` for every
 * directory, whose NAME holds `*` or `?`; src/lists/pattern.rs): name_map keys whose directory key has one of
 * these kinds and whose name is the pattern's hash as
 * AGENT_SANDBOX_PATTERN_KEY_CHARS characters (patterns.bpf.h:
 * pattern_key_name()). The directory key is all zero for `**` (every
 * directory) and the directory's key for `DIR/NAME` (that directory only).
 * KIND_PAT_BASE/_USER deny, KIND_PAT_EXC_BASE/_USER re-allow for the same
 * list (its patterns and, at the file's own level, its directory entries).
 * KIND_PAT_SHAPE keys (all-zero directory, name the shape's text: `x`, `?`,
 * `*`) say which shapes the sandbox uses; the daemon keeps the union of
 * them in pattern_shapes and never looks these up in the hooks.
 * KIND_HAS_PATTERNS, on the all-zero file key, says the sandbox has
 * patterns where its slot is shared (else AGENT_SANDBOX_SLOT_PATTERNS).
 * A pattern key's key_filter bit is filter_bit(hash, FILTER_TAG_FILE).
 */
	AGENT_SANDBOX_KIND_PAT_BASE = 19,
	AGENT_SANDBOX_KIND_PAT_USER = 20,
	AGENT_SANDBOX_KIND_PAT_EXC_BASE = 21,
	AGENT_SANDBOX_KIND_PAT_EXC_USER = 22,
	AGENT_SANDBOX_KIND_PAT_SHAPE = 23,
	AGENT_SANDBOX_KIND_HAS_PATTERNS = 24,
/*
 * Deep name patterns (`DIR/` `**` `/NAME`: NAME at any depth below DIR):
 * name_map keys like KIND_PAT_*, with DIR's key as the directory and these
 * kinds; their key_filter bit is filter_bit(hash ^ DIR's inode number,
 * FILTER_TAG_FILE), tested at each directory above a name whose shape is a
 * deep one (struct pattern_shape.deep). KIND_DEEP_SCOPE on DIR's key
 * (deny_map, key_filter bit by inode) marks it for the rename check: no
 * directory moves across a deep scope's edge from inside. KIND_HAS_DEEP, on
 * the all-zero file key: the sandbox has deep patterns.
 */
	AGENT_SANDBOX_KIND_PAT_DEEP_BASE = 25,
	AGENT_SANDBOX_KIND_PAT_DEEP_USER = 26,
	AGENT_SANDBOX_KIND_PAT_DEEP_EXC_BASE = 27,
	AGENT_SANDBOX_KIND_PAT_DEEP_EXC_USER = 28,
	AGENT_SANDBOX_KIND_DEEP_SCOPE = 29,
	AGENT_SANDBOX_KIND_HAS_DEEP = 30,
/*
 * KIND_REPO_GUARD, on the all-zero file key (deny_map): the sandbox has the
 * repository guard (list line `readonly **` then `/.git/`; repo.bpf.h):
 * the files git runs or takes its configuration from, in every
 * repository's git directory, are read-only unless a sandboxed task of the
 * same uid made that git directory (or the directory a new `.git` is
 * made in). No key_filter bit.
 */
	AGENT_SANDBOX_KIND_REPO_GUARD = 31,
/*
 * KIND_PAT_PREFILTER: name_map keys (all-zero directory) that say which
 * bit of pat_prefilter a pattern of the sandbox needs: name `h` and the
 * pattern's first two bytes, `t` and its last two, or `*` (neither is
 * fixed: the prefilter is off). Like KIND_PAT_SHAPE keys, the daemon keeps
 * their union in pat_prefilter and the hooks never look them up.
 */
	AGENT_SANDBOX_KIND_PAT_PREFILTER = 32,
};

/*
 * Name patterns' shapes: pattern_shapes, an array of
 * AGENT_SANDBOX_MAX_SHAPES struct pattern_shape, the union of the shapes
 * every sandbox's patterns use. A pattern looks at most
 * AGENT_SANDBOX_PATTERN_WINDOW bytes of a name's start and as many of its
 * end.
 */
enum agent_sandbox_max_shapes { AGENT_SANDBOX_MAX_SHAPES = 32 };
enum agent_sandbox_pattern_window { AGENT_SANDBOX_PATTERN_WINDOW = 64 };
enum agent_sandbox_pattern_key_chars { AGENT_SANDBOX_PATTERN_KEY_CHARS = 11 };
/* How many of the shapes in use may be deep ones (struct pattern_shape.deep). */
enum agent_sandbox_max_deep_shapes { AGENT_SANDBOX_MAX_DEEP_SHAPES = 4 };
/* pattern_shape.state */
enum agent_sandbox_shape_state {
	AGENT_SANDBOX_SHAPE_END = 0,    /* no shape here or in any later slot */
	AGENT_SANDBOX_SHAPE_FREE = 1,   /* no shape here; a later slot may hold one */
	AGENT_SANDBOX_SHAPE_IN_USE = 2,
};

/*
 * One shape: a name of a length it applies to (at least min_len; exactly
 * exact_len unless 0) hashes to seed, mixed (agent_sandbox_mix()) with its
 * first head_words words as loaded from memory, ASCII-folded
 * (agent_sandbox_fold()) and masked by mask[0..], then its last tail_words
 * words from the end (word j: bytes [len - 8j - 8, len - 8j)), masked by
 * mask[8..]. src/lists/pattern.rs (Shape) computes the same. 144 bytes.
 */
struct pattern_shape {
	__u64 seed;
	__u64 mask[16];
	__u8 state;      /* enum agent_sandbox_shape_state */
	__u8 head_words; /* 0 to 8 */
	__u8 tail_words; /* 0 to 8 */
	__u8 min_len;
	__u8 exact_len;  /* 0: any length from min_len */
	__u8 deep;       /* 1: the shape of deep patterns (KIND_PAT_DEEP_*), looked up above the name */
	__u8 pad[2];
};

/*
 * The first test of a name against the patterns (patterns.bpf.h): a bit
 * per end of a pattern, set when some sandbox's pattern begins (side 0) or
 * ends (side 1) with 2 or 3 fixed bytes (ASCII-folded), at
 * agent_sandbox_prefilter_bit(); `always` is 1 when a pattern has neither
 * two fixed bytes at its start nor at its end. With `always` 0, a name of
 * one byte, or one whose first two and three and last two and three bytes
 * find no bit, matches no pattern, and the shapes are not hashed. The union
 * over every sandbox, written by the daemon (src/kernel/patterns.rs) before
 * the keys that need a bit and cleared after they are gone. 8,200 bytes.
 */
enum agent_sandbox_prefilter_words { AGENT_SANDBOX_PREFILTER_WORDS = 1024 };
struct pattern_prefilter {
	__u64 bits[AGENT_SANDBOX_PREFILTER_WORDS];
	__u32 always;
	__u32 pad;
};

/*
 * The bit of pat_prefilter for `k` (2 or 3) bytes b0, b1, b2 (0 when
 * k is 2) at side `side` (0 the start, 1 the end, bytes in name order):
 * 16 bits of a multiplicative hash. src/lists/pattern.rs: prefilter_bit().
 */
static inline __u32 agent_sandbox_prefilter_bit(__u32 side, __u32 k, __u32 b0, __u32 b1, __u32 b2)
{
	__u64 x = (__u64)b0 | (__u64)b1 << 8 | (__u64)b2 << 16 | (__u64)k << 24 | (__u64)side << 28;

	return (__u32)((x * 0x9E3779B97F4A7C15ULL) >> 48);
}

/* One word into a pattern hash. src/lists/pattern.rs: mix(). */
static inline __u64 agent_sandbox_mix(__u64 h, __u64 w)
{
	h = (h ^ w) * 0x9E3779B97F4A7C15ULL;
	return h ^ (h >> 29);
}

/*
 * Each byte of `w` in 'A'..'Z' lowercased, without a branch: the high bit
 * of (b & 0x7f) + 0x3f is set for b >= 'A', of (b & 0x7f) + 0x25 for
 * b > 'Z'; bytes with the high bit set (non-ASCII) are left alone.
 * src/lists/pattern.rs: fold_word().
 */
static inline __u64 agent_sandbox_fold(__u64 w)
{
	__u64 low = w & 0x7f7f7f7f7f7f7f7fULL;
	__u64 ge_a = low + 0x3f3f3f3f3f3f3f3fULL;
	__u64 gt_z = low + 0x2525252525252525ULL;
	__u64 upper = (ge_a ^ gt_z) & ~w & 0x8080808080808080ULL;

	return w | (upper >> 2);
}

/*
 * How many levels the directory-entry walk climbs from an opened file
 * (each dentry and each mount crossed is one level). A file whose walk does
 * not reach the root within the bound is denied to a sandbox that has
 * directory entries (fail closed).
 */
enum agent_sandbox_walk_depth { AGENT_SANDBOX_WALK_DEPTH = 64 };

/*
 * walk_gens, a one-element array of this struct: a walk memo (below) is
 * valid only while both counts are what they were when it was made.
 */
struct walk_gens {
	__u64 marks; /* bumped by agent-sandbox-execd after every apply that changed deny_map or name_map */
	__u64 moves; /* bumped by fexit/vfs_rename after every rename that moved a directory */
	__u64 names; /* bumped by fexit/vfs_rename after every rename, lsm/inode_link before every link */
};

/*
 * One walk's answer from a directory up, in a walk memo (below). `sb_*`:
 * the state of each list after the levels up to the root of the
 * directory's superblock; `full_*`: after the whole walk, across the mounts
 * above the vfsmount `mnt` (0 when not kept), valid while mount_lock's
 * sequence count is `mount_seq`. States are WALK_OPEN/WALK_DENY/WALK_ALLOW
 * of the BPF program; a walk that ran out of levels is kept as a deny.
 * 16 bytes.
 */
struct walk_memo_part {
	__u64 mnt;
	__u32 mount_seq;
	__u8 sb_base;
	__u8 sb_user;
	__u8 full_base;
	__u8 full_user;
};

/* walk_memo.parts: which parts hold an answer (indexes of walk_memo.part). */
#define AGENT_SANDBOX_MEMO_READ 0 /* the directory-entry walk of a read open */
#define AGENT_SANDBOX_MEMO_RO 1   /* the read-only walk of a write */

/*
 * A walk memo: the walks' results from one directory up, kept in inode
 * storage on that directory's inode (walk_memos) for the next open, write
 * or new name in it by the same sandbox: part[AGENT_SANDBOX_MEMO_READ] for
 * directory entries, part[AGENT_SANDBOX_MEMO_RO] for read-only entries,
 * each valid only if its bit (1 << index) is set in `parts` and while the
 * generations are `marks_gen` and `moves_gen`. 64 bytes.
 */
struct walk_memo {
	__u64 cgid;
	__u64 marks_gen;
	__u64 moves_gen;
	__u32 parts;
	__u32 pad;
	struct walk_memo_part part[2];
};

/* Slots of file_memo_seen (maps.bpf.h; not pinned): 256 KiB. A power of two. */
#define AGENT_SANDBOX_FILE_MEMO_SEEN_LOG2 16
#define AGENT_SANDBOX_FILE_MEMO_SEEN (1U << AGENT_SANDBOX_FILE_MEMO_SEEN_LOG2)

/* file_memo.verdicts: what the memo allows (bits no walk_memo.parts holds). */
#define AGENT_SANDBOX_FILE_MEMO_READ 4U  /* an open for reading */
#define AGENT_SANDBOX_FILE_MEMO_WRITE 8U /* an open for writing or with O_TRUNC */

/*
 * A file memo (file_memo.bpf.h): file_open's decision on a non-directory
 * inode, kept in its inode storage in walk_memos (the same size as a walk
 * memo, `verdicts` where a walk memo's `parts` is): what it allows to
 * sandbox `cgid` of flags `sbx` (sandbox_of()) while the epoch of
 * walk_gens' counts and mount_lock's count is `epoch`, for the open of the
 * dentry at address `dentry` (its parent at `parent`, its name's hash and
 * length `name`) on the vfsmount at `vmnt`. 64 bytes.
 */
struct file_memo {
	__u64 cgid;
	__u64 epoch;
	__u64 name;
	__u32 verdicts;
	__u32 sbx;
	__u64 dentry;
	__u64 parent;
	__u64 vmnt;
	__u64 reserved;
};

/*
 * Identity of an inode as the hook sees it: 24 bytes, no implicit padding.
 */
struct file_key {
	__u64 ino;      /* inode->i_ino */
	__u64 subvol;   /* btrfs subvolume (tree) id; 0 on every other filesystem */
	__u32 dev;      /* inode->i_sb->s_dev, kernel encoding MAJOR << 20 | MINOR */
	__u32 kind;     /* AGENT_SANDBOX_KIND_*; 0 in name_map */
};

/* Key of deny_map: "this sandbox may not do `file.kind` to this inode". 32 bytes. */
struct deny_key {
	__u64 cgid;     /* cgroup v2 id of the sandbox cgroup (= inode number of its directory) */
	struct file_key file;
};

/*
 * Key of name_map: "this sandbox may not open whatever inode is linked under
 * `name` in directory `dir`". 288 bytes; `name` is zero-padded.
 */
struct name_key {
	__u64 cgid;
	struct file_key dir;
	char name[AGENT_SANDBOX_NAME_LEN];
};

/*
 * Key of port_allow: "this sandbox may reach the user's own server on this
 * loopback port" (a `port` list line). 16 bytes.
 */
struct port_key {
	__u64 cgid;     /* cgroup v2 id of the sandbox cgroup */
	__u16 port;     /* the port, host byte order */
	__u8 proto;     /* IPPROTO_TCP (6) or IPPROTO_UDP (17) */
	__u8 pad[5];    /* zero */
};

/*
 * Key of host_addrs: one of the host's own addresses, IPv6 or IPv4 as
 * IPv4-mapped IPv6 (::ffff:a.b.c.d), network byte order. 16 bytes.
 */
struct host_addr {
	__u8 addr[16];
};

/*
 * Value of udp_owner, the sk_storage of a bound UDP socket: its owner and
 * creating cgroup, set when it was bound (lsm/socket_bind). 16 bytes.
 */
struct sock_owner {
	__u64 cgid;     /* cgroup v2 id of the creating task's cgroup (sk_cgrp_data); 0 if unknown */
	__u32 uid;      /* sk_uid */
	__u32 pad;
};

/*
 * The filter's bit index for inode number `ino` under `tag`: Fibonacci
 * hashing (multiply by 2^64 / golden ratio, keep the top bits), which spreads
 * runs of consecutive inode numbers evenly. src/kernel/filter.rs repeats it; its unit
 * test holds values computed with gcc from this function.
 */
static inline __u32 agent_sandbox_filter_bit(__u64 ino, __u64 tag)
{
	return (__u32)(((ino << 1) | tag) * 0x9E3779B97F4A7C15ULL >>
		       (64 - AGENT_SANDBOX_FILTER_BITS_LOG2));
}

/*
 * Denial events (events.bpf.h): what a hook refused, one record per refusal
 * that passes the rate limit, in the ring buffer `denials`.
 */
enum agent_sandbox_denial_op {
	AGENT_SANDBOX_OP_OPEN = 1,        /* file_open: an open (or exec) of a denied file */
	AGENT_SANDBOX_OP_RECEIVE = 2,     /* file_receive: a descriptor passed in */
	AGENT_SANDBOX_OP_LINK = 3,        /* inode_link */
	AGENT_SANDBOX_OP_RENAME = 4,      /* inode_rename */
	AGENT_SANDBOX_OP_CREATE = 5,      /* inode_create, mknod, symlink, mkdir */
	AGENT_SANDBOX_OP_UNLINK = 6,      /* inode_unlink, inode_rmdir */
	AGENT_SANDBOX_OP_SETATTR = 7,     /* inode_setattr: a mode, owner, size or time change */
	AGENT_SANDBOX_OP_XATTR = 8,       /* inode_setxattr, inode_removexattr, inode_set_acl */
	AGENT_SANDBOX_OP_IOCTL = 9,       /* file_ioctl, file_ioctl_compat; `dev` the command, `ino` the file's inode */
	AGENT_SANDBOX_OP_PTRACE = 10,     /* ptrace_access_check; `ino` the target's pid, `dev` the mode */
	AGENT_SANDBOX_OP_SIGNAL = 11,     /* task_kill; `ino` the target's pid, `dev` the signal */
	AGENT_SANDBOX_OP_RLIMIT = 12,     /* task_setrlimit; `ino` the target's pid, `dev` the resource */
	AGENT_SANDBOX_OP_FCNTL = 13,      /* file_fcntl; `dev` the command (F_SETOWN, ...), `ino` its argument */
	AGENT_SANDBOX_OP_UNIX = 14,       /* unix_stream_connect, unix_may_send: the socket's inode */
	AGENT_SANDBOX_OP_INET = 15,       /* cgroup connect/sendmsg: `ino` the port, `dev` the protocol */
	AGENT_SANDBOX_OP_MOUNT = 16,      /* sb_mount, move_mount, sb_umount */
	AGENT_SANDBOX_OP_PROC_WRITE = 17, /* a write-open of an outside task's /proc/<pid>/ file */
	AGENT_SANDBOX_OP_AUDIT_OPEN = 18, /* file_open: an audit entry would deny this open; allowed */
	AGENT_SANDBOX_OP_WRITE_OPEN = 19, /* file_open: an open for writing (or O_TRUNC) of a read-only file */
};

/* struct denial's flags. */
#define AGENT_SANDBOX_DENIAL_PATH_TRUNCATED 1 /* the path's start is missing: too deep or too long */
#define AGENT_SANDBOX_DENIAL_PATH_FS 2        /* the path is from its filesystem's root: no mount known */

/* Room for the path in struct denial: components are written from the end. */
enum agent_sandbox_denial_path { AGENT_SANDBOX_DENIAL_PATH = 1024 };

/*
 * One refusal, as the ring buffer carries it: 1,344 bytes, no implicit
 * padding. The path is path[path_off .. AGENT_SANDBOX_DENIAL_PATH), '/'-
 * separated, built by walking the dentry's parents (and, when the hook has
 * the mount, the mounts'); empty for operations on no file.
 */
struct denial {
	__u64 boot_ns;    /* bpf_ktime_get_boot_ns() at the refusal */
	__u64 cgid;       /* the sandbox's cgroup id */
	__u64 ino;        /* the file's inode number, or what the op's comment says */
	__u32 dev;        /* the file's s_dev (kernel encoding), or what the op's comment says */
	__u32 uid;        /* the task's real uid */
	__u32 pid;        /* the task's thread-group id */
	__u32 op;         /* enum agent_sandbox_denial_op */
	__u32 suppressed; /* refusals of the same {sandbox, op, file} the rate limit dropped before this one */
	__u16 path_off;
	__u16 flags;      /* AGENT_SANDBOX_DENIAL_* */
	char comm[16];    /* the task's comm */
	char path[AGENT_SANDBOX_DENIAL_PATH + 256]; /* the last 256 bytes: room for one name past the end */
};

/*
 * One field of each enum above, so that each reaches the object's BTF (the
 * .rodata variable agent_sandbox_shared in maps.bpf.h holds it; nothing reads
 * it) and the skeleton emits it for Rust.
 */
struct agent_sandbox_shared {
	enum agent_sandbox_kind kind;
	enum agent_sandbox_max_deny max_deny;
	enum agent_sandbox_max_sandboxes max_sandboxes;
	enum agent_sandbox_memo_hash_entries memo_hash_entries;
	enum agent_sandbox_slots slots;
	enum agent_sandbox_filter_bits_log2 filter_bits_log2;
	enum agent_sandbox_filter_tag_file filter_tag_file;
	enum agent_sandbox_filter_tag_dir filter_tag_dir;
	enum agent_sandbox_name_len name_len;
	enum agent_sandbox_walk_depth walk_depth;
	enum agent_sandbox_denial_op denial_op;
	enum agent_sandbox_denial_path denial_path;
	enum agent_sandbox_max_shapes max_shapes;
	enum agent_sandbox_pattern_window pattern_window;
	enum agent_sandbox_pattern_key_chars pattern_key_chars;
	enum agent_sandbox_max_deep_shapes max_deep_shapes;
	enum agent_sandbox_shape_state shape_state;
	struct pattern_shape pattern_shape;
	struct denial denial;
};

#endif
