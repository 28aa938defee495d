/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Denial events (issue 28): every refusal of a hook becomes a record in the
 * ring buffer `denials` (struct denial, agent_sandbox.h), which the daemon
 * reads in its poll loop, unless a token bucket says the sandbox or the
 * same {sandbox, operation, file} has sent enough lately.
 * Uses: maps.bpf.h. Hooks: none; the hooks call report_file(),
 * report_dentry() and report_other() where they refuse.
 */
#ifndef AGENT_SANDBOX_EVENTS_BPF_H
#define AGENT_SANDBOX_EVENTS_BPF_H

/*
 * Token buckets, in BPF so that a storm of refusals costs the ring buffer
 * and the daemon nothing: one per {sandbox, op, dev, ino} (DENIAL_KEY_*),
 * then one per sandbox (op 0, DENIAL_SBX_*). A bucket holds up to BURST
 * tokens and gains one per INTERVAL; a refusal takes one from its key's
 * bucket and then one from its sandbox's, and with none left is dropped:
 * counted in its key's bucket (`suppressed`, carried by the key's next
 * event), in denial_dropped (per sandbox, which the daemon sums up in the
 * journal) and in denial_stats. The updates are not atomic: two CPUs may
 * both take the last token, which lets one event more through.
 */
#define DENIAL_KEY_BURST 8
#define DENIAL_KEY_INTERVAL_NS 1000000000ULL /* one event per second per key after the burst */
#define DENIAL_SBX_BURST 64
#define DENIAL_SBX_INTERVAL_NS 50000000ULL /* twenty a second per sandbox after the burst */

/* denial_stats slots: ring-buffer records lost (the ring was full), refusals rate-limited. */
#define DENIAL_STAT_LOST 0
#define DENIAL_STAT_SUPPRESSED 1

/* Takes a token from the bucket `key` (burst, interval); false if none is left. */
static __always_inline bool bucket_take(struct denial_bucket_key *key, __u32 burst, __u64 interval,
					__u64 now, __u32 *suppressed)
{
	struct denial_bucket *b = bpf_map_lookup_elem(&denial_buckets, key);
	struct denial_bucket fresh = {};
	__u64 gained;

	if (!b) {
		fresh.last_ns = now;
		fresh.tokens = burst - 1;
		bpf_map_update_elem(&denial_buckets, key, &fresh, BPF_ANY);
		*suppressed = 0;
		return true;
	}
	gained = (now - b->last_ns) / interval;
	if (gained) {
		b->last_ns = now;
		b->tokens = gained >= burst - b->tokens ? burst : b->tokens + (__u32)gained;
	}
	if (b->tokens == 0) {
		b->suppressed++;
		return false;
	}
	b->tokens--;
	*suppressed = b->suppressed;
	b->suppressed = 0;
	return true;
}

/* Counts one event in denial_stats slot `slot`. */
static __always_inline void denial_stat(__u32 slot)
{
	__u64 *n = bpf_map_lookup_elem(&denial_stats, &slot);

	if (n)
		__sync_fetch_and_add(n, 1);
}

/* Counts one refusal of sandbox `cgid` that the rate limit dropped. */
static __always_inline void denial_dropped_one(__u64 cgid)
{
	__u64 one = 1, *n = bpf_map_lookup_elem(&denial_dropped, &cgid);

	if (n)
		__sync_fetch_and_add(n, 1);
	else
		bpf_map_update_elem(&denial_dropped, &cgid, &one, BPF_NOEXIST);
	denial_stat(DENIAL_STAT_SUPPRESSED);
}

/*
 * The per-CPU record for a refusal of `op` in sandbox `cgid` of {`dev`,
 * `ino`}, its header filled and its path empty; NULL when the rate limit
 * drops it (then counted).
 */
static __always_inline struct denial *denial_start(__u32 op, __u64 cgid, __u32 dev, __u64 ino)
{
	struct denial_bucket_key k = {};
	struct denial_room *room;
	struct denial *e;
	__u32 zero = 0, suppressed = 0, ignored;
	__u64 now = bpf_ktime_get_boot_ns();

	k.cgid = cgid;
	k.op = op;
	k.dev = dev;
	k.ino = ino;
	if (!bucket_take(&k, DENIAL_KEY_BURST, DENIAL_KEY_INTERVAL_NS, now, &suppressed)) {
		denial_dropped_one(cgid);
		return NULL;
	}
	k.op = 0;
	k.dev = 0;
	k.ino = 0;
	if (!bucket_take(&k, DENIAL_SBX_BURST, DENIAL_SBX_INTERVAL_NS, now, &ignored)) {
		denial_dropped_one(cgid);
		return NULL;
	}
	room = bpf_map_lookup_elem(&denial_scratch, &zero);
	if (!room)
		return NULL;
	/* Another record is being built on this CPU (a preempted program): this one is lost. */
	if (__sync_val_compare_and_swap(&room->busy, 0, 1) != 0) {
		denial_stat(DENIAL_STAT_LOST);
		return NULL;
	}
	e = &room->d;
	e->boot_ns = now;
	e->cgid = cgid;
	e->ino = ino;
	e->dev = dev;
	e->uid = (__u32)bpf_get_current_uid_gid();
	e->pid = (__u32)(bpf_get_current_pid_tgid() >> 32);
	e->op = op;
	e->suppressed = suppressed;
	e->path_off = AGENT_SANDBOX_DENIAL_PATH;
	e->flags = 0;
	bpf_get_current_comm(e->comm, sizeof(e->comm));
	return e;
}

/* Sends the record `e` (of denial_start()) to the daemon, or counts it lost; frees its room. */
static __always_inline void denial_send(struct denial *e)
{
	struct denial_room *room = (void *)e - __builtin_offsetof(struct denial_room, d);

	if (bpf_ringbuf_output(&denials, e, sizeof(*e), 0))
		denial_stat(DENIAL_STAT_LOST);
	room->busy = 0;
}

/* State of the path walk (a bpf_loop() callback's context). */
struct denial_path_ctx {
	__u64 dentry; /* struct dentry * of the next component */
	__u64 mnt;    /* struct mount * it is on; 0: stop at its filesystem's root */
	__u32 pos;    /* the path so far starts at path[pos] */
	__u32 flags;  /* AGENT_SANDBOX_DENIAL_PATH_* */
	__u32 done;   /* the walk reached a root */
	__u32 pad;
};

/* Prepends one name (or crosses one mount) to the per-CPU record's path; 1 stops the loop. */
static long denial_path_step(__u64 index, void *ctx)
{
	struct denial_path_ctx *c = ctx;
	struct dentry *d = (struct dentry *)c->dentry;
	struct mount *here = (struct mount *)c->mnt;
	struct dentry *parent;
	const unsigned char *name;
	struct denial_room *room;
	struct denial *e;
	__u32 zero = 0, len;
	__u64 pos, size;
	long n;

	parent = BPF_CORE_READ(d, d_parent);
	/*
	 * The top of this mount: its root dentry, which for a bind mount of a
	 * directory or a btrfs subvolume is not its filesystem's root (whose
	 * d_parent is itself), so both are tested.
	 */
	if (!parent || parent == d || (here && d == BPF_CORE_READ(here, mnt.mnt_root))) {
		struct mount *m = here;
		struct mount *up;

		c->done = 1;
		if (!m) {
			c->flags |= AGENT_SANDBOX_DENIAL_PATH_FS;
			return 1;
		}
		up = BPF_CORE_READ(m, mnt_parent);
		if (!up || up == m)
			return 1; /* the root of the mount tree */
		c->done = 0;
		c->dentry = (__u64)BPF_CORE_READ(m, mnt_mountpoint);
		c->mnt = (__u64)up;
		return 0;
	}
	room = bpf_map_lookup_elem(&denial_scratch, &zero);
	if (!room)
		return 1;
	e = &room->d;
	/*
	 * The name, then its length (the order of prepend_name() in
	 * fs/d_path.c); a rename may change both between the two reads (no
	 * rename_lock is held), so the copy is a string copy bounded by the
	 * length read: it stops at the name's NUL and never reads past the
	 * name it got, and a length that does not match ends the path as
	 * truncated.
	 */
	name = BPF_CORE_READ(d, d_name.name);
	len = BPF_CORE_READ(d, d_name.len);
	if (len == 0 || len > 255 || c->pos < len + 1) {
		c->flags |= AGENT_SANDBOX_DENIAL_PATH_TRUNCATED;
		return 1;
	}
	pos = (c->pos - len) & (AGENT_SANDBOX_DENIAL_PATH - 1);
	/* len + 1 (room for the NUL), bounded to 256 in the register the call takes. */
	size = len;
	asm volatile("%[size] &= 255\n\t%[size] += 1" : [size] "+r"(size));
	/* Into the spare room past the path, then the name alone into place. */
	n = bpf_probe_read_kernel_str(&e->path[AGENT_SANDBOX_DENIAL_PATH], size, name);
	if (n != (long)len + 1) {
		c->flags |= AGENT_SANDBOX_DENIAL_PATH_TRUNCATED;
		return 1;
	}
	size = len;
	asm volatile("%[size] &= 255" : [size] "+r"(size));
	if (bpf_probe_read_kernel(&e->path[pos], size, &e->path[AGENT_SANDBOX_DENIAL_PATH])) {
		c->flags |= AGENT_SANDBOX_DENIAL_PATH_TRUNCATED;
		return 1;
	}
	pos = (pos - 1) & (AGENT_SANDBOX_DENIAL_PATH - 1);
	e->path[pos] = '/';
	c->pos = pos;
	c->dentry = (__u64)parent;
	return 0;
}

/* Path levels walked at most for an event; deeper paths lose their start. */
#define DENIAL_PATH_LEVELS 64

/* Fills `e`'s path from dentry address `dentry` on mount address `mnt` (0: within its filesystem). */
static __always_inline void denial_path(struct denial *e, __u64 dentry, __u64 mnt)
{
	struct denial_path_ctx c = {};

	c.dentry = dentry;
	c.mnt = mnt;
	c.pos = AGENT_SANDBOX_DENIAL_PATH;
	/*
	 * bpf_loop() returns the number of calls made: DENIAL_PATH_LEVELS
	 * also when the last one ended the walk, so the walk's own end is
	 * kept in c.done.
	 */
	if (bpf_loop(DENIAL_PATH_LEVELS, denial_path_step, &c, 0) == DENIAL_PATH_LEVELS && !c.done)
		c.flags |= AGENT_SANDBOX_DENIAL_PATH_TRUNCATED;
	e->path_off = c.pos;
	e->flags = c.flags;
}

/*
 * Reports the refusal of `op` on the dentry at address `d`, on the vfsmount
 * at address `vmnt` (0: none known), in sandbox `cgid`. A global function
 * (its arguments plain numbers, its result 0): the verifier checks it once,
 * not at each of the thirty refusals that report a path (each would have
 * its bpf_loop() callback explored again).
 */
__noinline int report_path(__u32 op, __u64 cgid, __u64 d, __u64 vmnt)
{
	struct dentry *dentry = (struct dentry *)d;
	struct denial *e;
	struct inode *inode;
	__u64 mnt = 0;

	if (!d)
		return 0;
	inode = BPF_CORE_READ(dentry, d_inode);
	e = denial_start(op, cgid, BPF_CORE_READ(dentry, d_sb, s_dev),
			 inode ? BPF_CORE_READ(inode, i_ino) : 0);
	if (!e)
		return 0;
	if (vmnt)
		mnt = vmnt - bpf_core_field_offset(struct mount, mnt);
	denial_path(e, d, mnt);
	denial_send(e);
	return 0;
}

/* Reports the refusal of `op` on open file `file` in sandbox `cgid`. */
static __always_inline void report_file(__u32 op, __u64 cgid, struct file *file)
{
	__u64 d = 0, vmnt = 0;

	BPF_CORE_READ_INTO(&d, file, f_path.dentry);
	BPF_CORE_READ_INTO(&vmnt, file, f_path.mnt);
	report_path(op, cgid, d, vmnt);
}

/*
 * Reports the refusal of `op` on the dentry at address `d` (its path from
 * its filesystem's root: the name hooks have no mount) in sandbox `cgid`.
 */
static __always_inline void report_dentry(__u32 op, __u64 cgid, __u64 d)
{
	report_path(op, cgid, d, 0);
}

/* The address of BTF-typed dentry `d`, as report_dentry() takes it. */
static __always_inline __u64 dentry_addr(struct dentry *d)
{
	__u64 a = 0;

	bpf_probe_read_kernel(&a, sizeof(a), &d);
	return a;
}

/* Reports the refusal of `op` on no file (`dev`, `ino` as the op says) in sandbox `cgid`. */
static __always_inline void report_other(__u32 op, __u64 cgid, __u32 dev, __u64 ino)
{
	struct denial *e = denial_start(op, cgid, dev, ino);

	if (e)
		denial_send(e);
}

#endif /* AGENT_SANDBOX_EVENTS_BPF_H */
