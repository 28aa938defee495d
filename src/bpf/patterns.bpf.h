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
 * hash per shape, whatever the number of patterns; and a name that no
 * pattern begins or ends as (pat_prefilter: four bits, of its first
 * two and three and its last two and three bytes) costs none of the
 * hashes.
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


/*
 * Writes hash `h` as the name of pattern key `nk`: character i is 0x40 +
 * bits [6i, 6i + 6) of the hash (src/lists/pattern.rs: key_name()); the
 * rest of the name stays as it was (zero).
 */
static __always_inline void pattern_key_name(struct name_key *nk, __u64 h)
{
#pragma unroll
	for (int i = 0; i < AGENT_SANDBOX_PATTERN_KEY_CHARS; i++)
		nk->name[i] = 0x40 + ((h >> (6 * i)) & 63);
}

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
 * The key's name is pattern_key_name()'s.
 */
static __always_inline void pattern_lookup(struct pattern_ctx *c, struct pattern_room *r, __u64 h)
{
	struct name_key *nk = &r->nk;
	struct inode *dir = (struct inode *)c->dir;

	__builtin_memset(nk, 0, sizeof(*nk));
	nk->cgid = c->cgid;
	pattern_key_name(nk, h);
	c->found |= pattern_keys_found(nk);
	if (!dir)
		return;
	read_key(&nk->dir, dir, BPF_CORE_READ(dir, i_ino));
	c->found |= pattern_keys_found(nk);
}

/* One shape of pattern_shapes (bpf_loop() callback): 1 stops at the end of the used slots. */
static long pattern_step(__u64 index, void *ctx)
{
	struct pattern_ctx *c;
	struct pattern_shape *sh;
	struct pattern_room *r;
	__u32 i = index, zero = 0;
	__u64 h;
	int k;

	r = bpf_map_lookup_elem(&pattern_scratch, &zero);
	if (!r)
		return 1;
	c = &r->c;
	sh = bpf_map_lookup_elem(&pattern_shapes, &i);
	if (!sh || sh->state == AGENT_SANDBOX_SHAPE_END)
		return 1;
	if (sh->state != AGENT_SANDBOX_SHAPE_IN_USE || c->len < sh->min_len ||
	    (sh->exact_len && c->len != sh->exact_len))
		return 0;
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
	if (sh->deep) {
		if (c->ndeep < AGENT_SANDBOX_MAX_DEEP_SHAPES)
			c->deep_h[c->ndeep & (AGENT_SANDBOX_MAX_DEEP_SHAPES - 1)] = h;
		c->ndeep++;
		return 0;
	}
	if (filter_has(h, AGENT_SANDBOX_FILTER_TAG_FILE))
		pattern_lookup(c, r, h);
	return 0;
}

/* The deep kinds of key `nk` (its scope set), as PAT_FOUND_* bits. */
static __always_inline __u32 deep_keys_found(struct name_key *nk)
{
	return pattern_kind_found(nk, AGENT_SANDBOX_KIND_PAT_DEEP_BASE, PAT_FOUND_BASE) |
	       pattern_kind_found(nk, AGENT_SANDBOX_KIND_PAT_DEEP_USER, PAT_FOUND_USER) |
	       pattern_kind_found(nk, AGENT_SANDBOX_KIND_PAT_DEEP_EXC_BASE, PAT_FOUND_EXC_BASE) |
	       pattern_kind_found(nk, AGENT_SANDBOX_KIND_PAT_DEEP_EXC_USER, PAT_FOUND_EXC_USER);
}

/*
 * One directory above the name (bpf_loop() callback): the deep pattern
 * keys of each deep hash with this directory as their scope. 1 stops at
 * the root of the directory's filesystem (deep scopes are looked for in
 * the dentry tree, which a bind mount shares; a filesystem mounted below
 * a scope is not in it).
 */
static long deep_step(__u64 index, void *ctx)
{
	struct pattern_ctx *p, *c;
	struct dentry *d, *parent;
	struct inode *inode;
	struct pattern_room *r;
	struct name_key *nk;
	__u32 zero = 0, hits = 0;
	__u64 ino, h;
	int i;

	r = bpf_map_lookup_elem(&pattern_scratch, &zero);
	if (!r)
		return 1; /* cannot happen; not done: fails closed */
	p = c = &r->c;
	d = (struct dentry *)c->dentry;

	inode = BPF_CORE_READ(d, d_inode);
	if (!inode) {
		c->done = 1;
		return 1;
	}
	ino = BPF_CORE_READ(inode, i_ino);
	for (i = 0; i < AGENT_SANDBOX_MAX_DEEP_SHAPES; i++) {
		if (i >= p->ndeep)
			break;
		if (filter_has(p->deep_h[i] ^ ino, AGENT_SANDBOX_FILTER_TAG_FILE))
			hits |= 1U << i;
	}
	if (!hits)
		goto up;
	/*
	 * The directory's key once, outside any loop: inside one the compiler
	 * hoisted subvol_from()'s btrfs offset above its "btrfs known" test,
	 * and the relocation libbpf poisons when btrfs is not loaded was
	 * reached (the load failed on 6.1 and 7.x).
	 */
	r = bpf_map_lookup_elem(&pattern_scratch, &zero);
	if (!r)
		return 1; /* cannot happen; not done: fails closed */
	nk = &r->nk;
	/* The key's directory once (in the room: the stack is the callers' too), its name per hash. */
	__builtin_memset(nk, 0, sizeof(*nk));
	nk->cgid = p->cgid;
	read_key(&nk->dir, inode, ino);
	for (i = 0; i < AGENT_SANDBOX_MAX_DEEP_SHAPES; i++) {
		if (!(hits & (1U << i)))
			continue;
		h = p->deep_h[i];
		pattern_key_name(nk, h);
		p->found |= deep_keys_found(nk);
	}
up:
	parent = BPF_CORE_READ(d, d_parent);
	if (!parent || parent == d) {
		c->done = 1;
		return 1;
	}
	c->dentry = (__u64)parent;
	return 0;
}

/* pattern_dir_folds(): the directory folds case; its names may have 8.3 short aliases. */
#define FOLDS_CASE 1U
#define FOLDS_SHORT 2U

/*
 * Is the name's directory case-insensitive (keys.bpf.h: case_insensitive(),
 * through probe reads): `dir` its inode, `d` the dentry, as addresses?
 * FOLDS_CASE, and FOLDS_SHORT where the filesystem compares names itself
 * (d_compare: vfat, CIFS, ntfs3, ...), whose 8.3 short names (`ENV~1`)
 * reach a long name with other bytes.
 */
static __always_inline __u32 pattern_dir_folds(struct inode *dir, struct dentry *d)
{
	unsigned long magic;

	if (BPF_CORE_READ(dir, i_flags) & S_CASEFOLD)
		return FOLDS_CASE;
	if (!(BPF_CORE_READ(d, d_flags) & DCACHE_OP_COMPARE))
		return 0;
	magic = BPF_CORE_READ(dir, i_sb, s_magic);
	if (magic == EXT4_SUPER_MAGIC || magic == F2FS_SUPER_MAGIC)
		return 0;
	return FOLDS_CASE | FOLDS_SHORT;
}

/* Whether a byte of `w` is `~` (0x7e), without a branch (the classic has-zero-byte test). */
static __always_inline bool has_tilde(__u64 w)
{
	__u64 x = w ^ 0x7e7e7e7e7e7e7e7eULL;

	return ((x - 0x0101010101010101ULL) & ~x & 0x8080808080808080ULL) != 0;
}

/* Is bit `b` of the prefilter `pf` set? */
static __always_inline bool prefilter_has(const struct pattern_prefilter *pf, __u32 b)
{
	return (pf->bits[(b >> 6) & (AGENT_SANDBOX_PREFILTER_WORDS - 1)] >> (b & 63)) & 1;
}

/* Byte `i` of word `w` (little-endian: byte 0 is the first in memory). */
#define PAT_BYTE(w, i) (((w) >> (8 * (i))) & 0xff)

/*
 * Could a pattern of any sandbox match a name of `len` bytes whose first
 * 8 bytes are `head` and whose last 8 are `tail` (its last byte byte 7),
 * both folded (agent_sandbox_fold())? pat_prefilter `pf`'s bits of its
 * first two and three and its last two and three bytes (agent_sandbox.h);
 * every pattern has two fixed bytes, so none matches a one-byte name.
 */
static __always_inline bool prefilter_ends_pass(const struct pattern_prefilter *pf, __u32 len,
						__u64 head, __u64 tail)
{
	if (len < 2)
		return false;
	if (prefilter_has(pf, agent_sandbox_prefilter_bit(0, 2, PAT_BYTE(head, 0), PAT_BYTE(head, 1), 0)) ||
	    prefilter_has(pf, agent_sandbox_prefilter_bit(1, 2, PAT_BYTE(tail, 6), PAT_BYTE(tail, 7), 0)))
		return true;
	return len >= 3 &&
	       (prefilter_has(pf, agent_sandbox_prefilter_bit(0, 3, PAT_BYTE(head, 0), PAT_BYTE(head, 1),
							      PAT_BYTE(head, 2))) ||
		prefilter_has(pf, agent_sandbox_prefilter_bit(1, 3, PAT_BYTE(tail, 5), PAT_BYTE(tail, 6),
							      PAT_BYTE(tail, 7))));
}

/*
 * Could a pattern of any sandbox match the name of `len` bytes whose
 * folded first and last words the room `r` holds? prefilter_ends_pass();
 * true when the prefilter is off.
 */
static __always_inline bool prefilter_passes(struct pattern_room *r, __u32 len)
{
	struct pattern_prefilter *pf;
	__u32 zero = 0;

	pf = bpf_map_lookup_elem(&pat_prefilter, &zero);
	if (!pf || pf->always)
		return true;
	return prefilter_ends_pass(pf, len, r->head[0], r->tail_words[0]);
}

/*
 * Is it certain, before pattern_states(), that no name pattern of any
 * sandbox matches the name of BTF-typed dentry `d`? pattern_states()'
 * first test (prefilter_passes()) on the name's first and last two and
 * three bytes, made with direct loads and one probe read of at most 8
 * bytes (two for a longer name) instead of the pass's room, windows and
 * folding: most opens of a sandbox with patterns end here. False (ask
 * pattern_states()) when the prefilter is off, in a case-insensitive
 * directory (keys.bpf.h: case_insensitive(); there a non-ASCII byte fails
 * closed, which only the pass checks), when the name cannot be read, and
 * when a bit is set.
 */
static __always_inline bool pattern_surely_none(struct dentry *d)
{
	struct pattern_prefilter *pf;
	struct inode *dir = d->d_parent->d_inode;
	const unsigned char *name = d->d_name.name;
	__u32 len = d->d_name.len, zero = 0;
	__u64 w = 0, head, tail, size;

	pf = bpf_map_lookup_elem(&pat_prefilter, &zero);
	if (!pf || pf->always || !dir || case_insensitive(dir, d))
		return false;
	/* (None matches a one-byte name, nor an empty one: prefilter_ends_pass().) */
	if (len < 2)
		return true;
	/* 2 to 8 bytes, bounded in the register the call takes. */
	size = (len < 8 ? len : 8) - 1;
	asm volatile("%[size] &= 7" : [size] "+r"(size));
	size += 1;
	if (bpf_probe_read_kernel(&w, size, name))
		return false;
	head = agent_sandbox_fold(w);
	if (len > 8) {
		if (bpf_probe_read_kernel(&w, 8, name + len - 8))
			return false;
		tail = agent_sandbox_fold(w);
	} else {
		/* The name's last byte to byte 7, as the pass's last window word has it. */
		tail = head << (8 * ((8 - len) & 7));
	}
	return !prefilter_ends_pass(pf, len, head, tail);
}

/* pattern_states() for both lists: denied (fail closed). */
#define PAT_DENY_BOTH (WALK_DENY | WALK_DENY << 2)

/*
 * pattern_states() once the room `r` is this call's: the name's windows,
 * the shapes, the deep walk.
 */
static __always_inline int pattern_states_in(struct pattern_room *r, __u64 cgid, __u64 dentry)
{
	struct dentry *d = (struct dentry *)dentry;
	struct pattern_ctx *c = &r->c;
	struct inode *dir;
	const unsigned char *name;
	__u64 size, off, acc = 0, tilde = 0, w;
	__u32 len, words, folds, base = WALK_OPEN, user = WALK_OPEN;
	int k;

	len = BPF_CORE_READ(d, d_name.len);
	name = BPF_CORE_READ(d, d_name.name);
	/* Any length: only the windows are read (FUSE allows names past NAME_MAX). */
	if (len == 0 || !name)
		return 0;
	dir = BPF_CORE_READ(d, d_parent, d_inode);
	folds = dir ? pattern_dir_folds(dir, d) : 0;
	if (folds) {
		__builtin_memset(r->head, 0, sizeof(r->head));
		__builtin_memset(r->tail, 0, sizeof(r->tail));
	}
	/* 1 to AGENT_SANDBOX_PATTERN_WINDOW bytes, bounded in the register the call takes. */
	size = (len < AGENT_SANDBOX_PATTERN_WINDOW ? len : AGENT_SANDBOX_PATTERN_WINDOW) - 1;
	asm volatile("%[size] &= 63" : [size] "+r"(size));
	size += 1;
	/* The tail's start, a bounded scalar added to the pointer (6.1 refuses a pointer minus a scalar). */
	off = AGENT_SANDBOX_PATTERN_WINDOW - size;
	asm volatile("%[off] &= 63" : [off] "+r"(off));
	if (bpf_probe_read_kernel(r->head, size, name) ||
	    bpf_probe_read_kernel(&r->tail[off], size, name + len - size))
		return PAT_DENY_BOTH; /* unreadable name: fail closed */
	words = (size + 7) / 8;
	for (k = 0; k < AGENT_SANDBOX_PATTERN_WINDOW / 8; k++) {
		if (k >= words)
			break;
		w = *(__u64 *)&r->tail[AGENT_SANDBOX_PATTERN_WINDOW - 8 * (k + 1)];
		acc |= r->head[k] | w;
		tilde |= (__u64)has_tilde(r->head[k]) | (__u64)has_tilde(w);
		r->head[k] = agent_sandbox_fold(r->head[k]);
		r->tail_words[k] = agent_sandbox_fold(w);
	}
	/*
	 * Where Unicode folding or 8.3 short names can spell a covered name
	 * with other bytes: a non-ASCII byte (case-insensitive directory) or a
	 * `~` (short names) in what a pattern looks at fails closed.
	 */
	if ((folds & FOLDS_CASE) && (acc & 0x8080808080808080ULL))
		return PAT_DENY_BOTH;
	if ((folds & FOLDS_SHORT) && tilde)
		return PAT_DENY_BOTH;
	/* No pattern begins or ends as this name does: none matches it. */
	if (!prefilter_passes(r, len))
		return 0;
	/* The pass's state lives in the room: bpf_loop() callbacks find it there (stack is short). */
	__builtin_memset(c, 0, sizeof(*c));
	c->cgid = cgid;
	c->dir = (__u64)dir;
	c->len = len;
	bpf_loop(AGENT_SANDBOX_MAX_SHAPES, pattern_step, NULL, 0);
	if (c->ndeep > AGENT_SANDBOX_MAX_DEEP_SHAPES)
		return PAT_DENY_BOTH; /* the daemon never uses more; fail closed */
	if (c->ndeep) {
		c->dentry = (__u64)BPF_CORE_READ(d, d_parent);
		if (c->dentry && c->dentry != dentry)
			bpf_loop(AGENT_SANDBOX_WALK_DEPTH, deep_step, NULL, 0);
		else
			c->done = 1;
		/* A name too deep for the walk to reach the root: fail closed. */
		if (!c->done)
			return PAT_DENY_BOTH;
	}
	if (c->found & PAT_FOUND_EXC_BASE)
		base = WALK_ALLOW;
	else if (c->found & PAT_FOUND_BASE)
		base = WALK_DENY;
	if (c->found & PAT_FOUND_EXC_USER)
		user = WALK_ALLOW;
	else if (c->found & PAT_FOUND_USER)
		user = WALK_DENY;
	return base | user << 2;
}

/*
 * The name patterns of sandbox `cgid` on the (possibly negative) dentry at
 * address `dentry`: each list's state for its name, packed (PAT_BASE(),
 * PAT_USER()): WALK_DENY where a pattern of that list covers it and no
 * pattern exception of the same list does, WALK_ALLOW where an exception
 * does, else WALK_OPEN. Fails closed (both denied) when the name cannot be
 * read, when the per-CPU room is in use (a task preempted on this CPU
 * mid-check), and past the deep walk's depth. A global function: verified
 * once for its callers.
 */
__noinline int pattern_states(__u64 cgid, __u64 dentry)
{
	struct pattern_room *r;
	__u32 zero = 0;
	int ret;

	if (!dentry)
		return 0;
	r = bpf_map_lookup_elem(&pattern_scratch, &zero);
	if (!r)
		return PAT_DENY_BOTH; /* cannot happen; fail closed */
	if (__sync_val_compare_and_swap(&r->busy, 0, 1) != 0)
		return PAT_DENY_BOTH;
	ret = pattern_states_in(r, cgid, dentry);
	r->busy = 0;
	return ret;
}

/*
 * Does a name pattern of sandbox `cgid` (of sandbox_of() `sbx`) cover the
 * (possibly negative) dentry `d`: no open, and no new name there from
 * inside (create, link, rename onto), nor a move or link away from it?
 */
static __always_inline bool pattern_covers(__u64 cgid, __u32 sbx, struct dentry *d)
{
	int r;

	if (!(sbx & SBX_PATTERNS) || pattern_surely_none(d))
		return false;
	r = pattern_states(cgid, dentry_addr(d));
	return PAT_DENIES(r);
}

/* The walk of deep_scope_step(): the nearest deep scope above a dentry. */
struct scope_ctx {
	__u64 cgid;
	__u64 dentry; /* this level (a number) */
	__u64 scope;  /* the nearest deep scope's inode number, 0: none yet */
	__u64 done;   /* a scope or the root was reached */
};

/* deep_scope_of(): the walk ran out of levels (never a scope's inode number). */
#define DEEP_SCOPE_UNKNOWN 0xffffffffffffffffULL

/* One level of deep_scope_of() (bpf_loop() callback): 1 stops. */
static long deep_scope_step(__u64 index, void *ctx)
{
	struct scope_ctx *c = ctx;
	struct dentry *d = (struct dentry *)c->dentry;
	struct dentry *parent;
	struct inode *inode;
	struct deny_key dk = {};
	__u64 ino;

	inode = BPF_CORE_READ(d, d_inode);
	if (inode) {
		ino = BPF_CORE_READ(inode, i_ino);
		if (filter_has(ino, AGENT_SANDBOX_FILTER_TAG_FILE)) {
			read_key(&dk.file, inode, ino);
			dk.cgid = c->cgid;
			dk.file.kind = AGENT_SANDBOX_KIND_DEEP_SCOPE;
			if (bpf_map_lookup_elem(&deny_map, &dk)) {
				c->scope = ino;
				c->done = 1;
				return 1;
			}
		}
	}
	parent = BPF_CORE_READ(d, d_parent);
	if (!parent || parent == d) {
		c->done = 1;
		return 1;
	}
	c->dentry = (__u64)parent;
	return 0;
}

/*
 * The inode number of the nearest deep scope (KIND_DEEP_SCOPE) of sandbox
 * `cgid` at or above the dentry at address `dentry`, within its
 * filesystem; 0 for none; DEEP_SCOPE_UNKNOWN when the walk ran out of
 * levels. A global function (verified once).
 */
__noinline __u64 deep_scope_of(__u64 cgid, __u64 dentry)
{
	struct scope_ctx c = {};

	if (!dentry)
		return 0;
	c.cgid = cgid;
	c.dentry = dentry;
	bpf_loop(AGENT_SANDBOX_WALK_DEPTH, deep_scope_step, &c, 0);
	return c.done ? c.scope : DEEP_SCOPE_UNKNOWN;
}

/* Does the sandbox `cgid` (of sandbox_of() `sbx`) have deep patterns (the KIND_HAS_DEEP key)? */
static __always_inline bool has_deep(__u64 cgid, __u32 sbx)
{
	struct deny_key dk = {};

	if (!(sbx & SBX_PATTERNS))
		return false;
	dk.cgid = cgid;
	dk.file.kind = AGENT_SANDBOX_KIND_HAS_DEEP;
	return bpf_map_lookup_elem(&deny_map, &dk) != NULL;
}

/*
 * Is the (possibly negative) dentry `d` below a deep scope of sandbox
 * `cgid`, or too deep to tell? A symlink made there would take the user's
 * later writes (a tool's state file) out of the scope.
 */
static __always_inline bool below_deep_scope(__u64 cgid, __u32 sbx, struct dentry *d)
{
	__u64 p = 0;

	if (!has_deep(cgid, sbx))
		return false;
	BPF_CORE_READ_INTO(&p, d, d_parent);
	return deep_scope_of(cgid, p) != 0;
}

/*
 * Would moving the directory `old` to the name `new` carry it across a
 * deep scope's edge (`DIR/` `**` `/NAME` of sandbox `cgid`: the files of
 * covered names below it leaving or entering the scope)? Only for a
 * sandbox with deep patterns (the KIND_HAS_DEEP key).
 */
static __always_inline bool crosses_deep_scope(__u64 cgid, __u32 sbx, struct dentry *old,
					       struct dentry *new)
{
	struct inode *inode = NULL;
	__u64 o = 0, n = 0, so, sn;

	if (!has_deep(cgid, sbx))
		return false;
	BPF_CORE_READ_INTO(&inode, old, d_inode);
	if (!inode || (BPF_CORE_READ(inode, i_mode) & S_IFMT) != S_IFDIR)
		return false;
	BPF_CORE_READ_INTO(&o, old, d_parent);
	BPF_CORE_READ_INTO(&n, new, d_parent);
	so = deep_scope_of(cgid, o);
	sn = deep_scope_of(cgid, n);
	return so != sn || so == DEEP_SCOPE_UNKNOWN;
}

#endif /* AGENT_SANDBOX_PATTERNS_BPF_H */
