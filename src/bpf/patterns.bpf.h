/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Name patterns (list lines `DIR/NAME` and the every-directory form, whose
 * NAME holds `*` or `?`: agent_sandbox.h, KIND_PAT_*): is a dentry's own
 * name one a pattern of the sandbox covers (pattern_states())? Live, by the
 * name the file has when it is opened, created, linked or renamed: a `.env`
 * made after the launch is covered as one made before.
 *
 * No strings are compared. For each shape in pattern_shapes (at most
 * AGENT_SANDBOX_MAX_SHAPES, the union of every sandbox's), the name's
 * first and last words, ASCII-folded, are hashed under the shape's masks
 * (agent_sandbox.h: struct pattern_shape); a clear key_filter bit for the
 * hash answers "no pattern of this shape" without a lookup, and a set one
 * is confirmed in name_map, whose pattern keys are {sandbox, scope, the
 * hash as AGENT_SANDBOX_PATTERN_KEY_CHARS characters}: scope the all-zero
 * key (every directory) or the parent directory's key (`DIR/NAME`). So an
 * open costs one pass over the name's first and last 64 bytes and one
 * hash per shape, whatever the number of patterns.
 *
 * In a case-insensitive directory (keys.bpf.h: case_insensitive()), where
 * Unicode case folding could spell a covered name with other bytes than
 * ASCII folding sees, a name with a non-ASCII byte in what a pattern
 * looks at is covered for both lists (fail closed).
 * Uses: maps.bpf.h, keys.bpf.h (filter_has(), read_key()), walk.bpf.h
 * (WALK_* states). Hooks: none.
 */
#ifndef AGENT_SANDBOX_PATTERNS_BPF_H
#define AGENT_SANDBOX_PATTERNS_BPF_H

/* pattern_states()' answer: each list's state for the name (WALK_OPEN, WALK_DENY, WALK_ALLOW). */
#define PAT_STATE(r, shift) (((r) >> (shift)) & 3)
#define PAT_BASE(r) PAT_STATE(r, 0)
#define PAT_USER(r) PAT_STATE(r, 2)
#define PAT_DENIES(r) (PAT_BASE(r) == WALK_DENY || PAT_USER(r) == WALK_DENY)
#define PAT_ALLOWS(r) (PAT_BASE(r) == WALK_ALLOW || PAT_USER(r) == WALK_ALLOW)

/* Which kinds of pattern key matched: bits of pattern_ctx.found. */
#define PAT_FOUND_BASE 1U
#define PAT_FOUND_USER 2U
#define PAT_FOUND_EXC_BASE 4U
#define PAT_FOUND_EXC_USER 8U

/* The state of one pattern_states() pass (pattern_step() is its bpf_loop() callback). */
struct pattern_ctx {
	__u64 cgid;
	__u64 dir;   /* address of the name's directory's inode, 0 if none */
	__u32 len;   /* the name's length */
	__u32 found; /* PAT_FOUND_* */
};

/* Does name_map hold the pattern key {sandbox, `nk->dir` with `kind`, name}? */
static __always_inline __u32 pattern_kind_found(struct name_key *nk, __u32 kind, __u32 bit)
{
	nk->dir.kind = kind;
	return bpf_map_lookup_elem(&name_map, nk) ? bit : 0;
}

/* The four pattern kinds of key `nk` (its scope set), as PAT_FOUND_* bits. */
static __always_inline __u32 pattern_keys_found(struct name_key *nk)
{
	return pattern_kind_found(nk, AGENT_SANDBOX_KIND_PAT_BASE, PAT_FOUND_BASE) |
	       pattern_kind_found(nk, AGENT_SANDBOX_KIND_PAT_USER, PAT_FOUND_USER) |
	       pattern_kind_found(nk, AGENT_SANDBOX_KIND_PAT_EXC_BASE, PAT_FOUND_EXC_BASE) |
	       pattern_kind_found(nk, AGENT_SANDBOX_KIND_PAT_EXC_USER, PAT_FOUND_EXC_USER);
}

/*
 * The pattern keys of hash `h` for sandbox `c->cgid`, in every directory
 * (the all-zero scope) and in the name's own directory, into `c->found`.
 * The key's name is pattern_key_name(): character i is 0x40 + bits
 * [6i, 6i + 6) of the hash (src/lists/pattern.rs: key_name()).
 */
static __always_inline void pattern_lookup(struct pattern_ctx *c, __u64 h)
{
	struct name_key *nk;
	struct inode *dir = (struct inode *)c->dir;
	__u32 zero = 0;

	nk = bpf_map_lookup_elem(&name_scratch, &zero);
	if (!nk) {
		c->found |= PAT_FOUND_BASE | PAT_FOUND_USER; /* cannot happen; fail closed */
		return;
	}
	__builtin_memset(nk, 0, sizeof(*nk));
	nk->cgid = c->cgid;
#pragma unroll
	for (int i = 0; i < AGENT_SANDBOX_PATTERN_KEY_CHARS; i++)
		nk->name[i] = 0x40 + ((h >> (6 * i)) & 63);
	c->found |= pattern_keys_found(nk);
	if (!dir)
		return;
	read_key(&nk->dir, dir, BPF_CORE_READ(dir, i_ino));
	c->found |= pattern_keys_found(nk);
}

/* One shape of pattern_shapes (bpf_loop() callback): 1 stops at the end of the used slots. */
static long pattern_step(__u64 index, void *ctx)
{
	struct pattern_ctx *c = ctx;
	struct pattern_shape *sh;
	struct pattern_room *r;
	__u32 i = index, zero = 0;
	__u64 h;
	int k;

	sh = bpf_map_lookup_elem(&pattern_shapes, &i);
	if (!sh || sh->state == AGENT_SANDBOX_SHAPE_END)
		return 1;
	if (sh->state != AGENT_SANDBOX_SHAPE_IN_USE || c->len < sh->min_len ||
	    (sh->exact_len && c->len != sh->exact_len))
		return 0;
	r = bpf_map_lookup_elem(&pattern_scratch, &zero);
	if (!r)
		return 1;
	h = sh->seed;
	for (k = 0; k < AGENT_SANDBOX_PATTERN_WINDOW / 8; k++) {
		if (k >= sh->head_words)
			break;
		h = agent_sandbox_mix(h, r->head[k] & sh->mask[k]);
	}
	for (k = 0; k < AGENT_SANDBOX_PATTERN_WINDOW / 8; k++) {
		if (k >= sh->tail_words)
			break;
		h = agent_sandbox_mix(h, r->tail_words[k] & sh->mask[8 + k]);
	}
	if (filter_has(h, AGENT_SANDBOX_FILTER_TAG_FILE))
		pattern_lookup(c, h);
	return 0;
}

/*
 * Is the name's directory case-insensitive (keys.bpf.h: case_insensitive(),
 * through probe reads): `dir` its inode, `d` the dentry, as addresses?
 */
static __always_inline bool pattern_dir_folds(struct inode *dir, struct dentry *d)
{
	unsigned long magic;

	if (BPF_CORE_READ(dir, i_flags) & S_CASEFOLD)
		return true;
	if (!(BPF_CORE_READ(d, d_flags) & DCACHE_OP_COMPARE))
		return false;
	magic = BPF_CORE_READ(dir, i_sb, s_magic);
	return magic != EXT4_SUPER_MAGIC && magic != F2FS_SUPER_MAGIC;
}

/*
 * The name patterns of sandbox `cgid` on the (possibly negative) dentry at
 * address `dentry`: each list's state for its name, packed (PAT_BASE(),
 * PAT_USER()): WALK_DENY where a pattern of that list covers it and no
 * pattern exception of the same list does, WALK_ALLOW where an exception
 * does, else WALK_OPEN. A global function: verified once for its callers.
 */
__noinline int pattern_states(__u64 cgid, __u64 dentry)
{
	struct dentry *d = (struct dentry *)dentry;
	struct pattern_ctx c = {};
	struct pattern_room *r;
	struct inode *dir;
	const unsigned char *name;
	__u64 size, off, acc = 0, w;
	__u32 len, words, zero = 0, base = WALK_OPEN, user = WALK_OPEN;
	bool folds;
	int k;

	if (!d)
		return 0;
	len = BPF_CORE_READ(d, d_name.len);
	name = BPF_CORE_READ(d, d_name.name);
	if (len == 0 || len >= AGENT_SANDBOX_NAME_LEN || !name)
		return 0;
	r = bpf_map_lookup_elem(&pattern_scratch, &zero);
	if (!r)
		return WALK_DENY | WALK_DENY << 2; /* cannot happen; fail closed */
	dir = BPF_CORE_READ(d, d_parent, d_inode);
	folds = dir && pattern_dir_folds(dir, d);
	if (folds)
		__builtin_memset(r, 0, sizeof(*r));
	/* 1 to AGENT_SANDBOX_PATTERN_WINDOW bytes, bounded in the register the call takes. */
	size = (len < AGENT_SANDBOX_PATTERN_WINDOW ? len : AGENT_SANDBOX_PATTERN_WINDOW) - 1;
	asm volatile("%[size] &= 63" : [size] "+r"(size));
	size += 1;
	/* The tail's start, a bounded scalar added to the pointer (6.1 refuses a pointer minus a scalar). */
	off = AGENT_SANDBOX_PATTERN_WINDOW - size;
	asm volatile("%[off] &= 63" : [off] "+r"(off));
	if (bpf_probe_read_kernel(r->head, size, name) ||
	    bpf_probe_read_kernel(&r->tail[off], size, name + len - size))
		return WALK_DENY | WALK_DENY << 2; /* unreadable name: fail closed */
	words = (size + 7) / 8;
	for (k = 0; k < AGENT_SANDBOX_PATTERN_WINDOW / 8; k++) {
		if (k >= words)
			break;
		w = *(__u64 *)&r->tail[AGENT_SANDBOX_PATTERN_WINDOW - 8 * (k + 1)];
		acc |= r->head[k] | w;
		r->head[k] = agent_sandbox_fold(r->head[k]);
		r->tail_words[k] = agent_sandbox_fold(w);
	}
	if (folds && (acc & 0x8080808080808080ULL))
		return WALK_DENY | WALK_DENY << 2;
	c.cgid = cgid;
	c.dir = (__u64)dir;
	c.len = len;
	bpf_loop(AGENT_SANDBOX_MAX_SHAPES, pattern_step, &c, 0);
	if (c.found & PAT_FOUND_EXC_BASE)
		base = WALK_ALLOW;
	else if (c.found & PAT_FOUND_BASE)
		base = WALK_DENY;
	if (c.found & PAT_FOUND_EXC_USER)
		user = WALK_ALLOW;
	else if (c.found & PAT_FOUND_USER)
		user = WALK_DENY;
	return base | user << 2;
}

/*
 * Does a name pattern of sandbox `cgid` (of sandbox_of() `sbx`) cover the
 * (possibly negative) dentry `d`: no open, and no new name there from
 * inside (create, link, rename onto), nor a move or link away from it?
 */
static __always_inline bool pattern_covers(__u64 cgid, __u32 sbx, struct dentry *d)
{
	int r;

	if (!(sbx & SBX_PATTERNS))
		return false;
	r = pattern_states(cgid, dentry_addr(d));
	return PAT_DENIES(r);
}

#endif /* AGENT_SANDBOX_PATTERNS_BPF_H */
