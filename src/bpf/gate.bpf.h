/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The gate of every hook: whether the current task's cgroup is a sandbox
 * (in_sandbox(), sandbox_of(): sandbox_slots, then agent_cgid_set for a
 * shared slot), the ONLY_SANDBOXED macros that start the hooks, and
 * pass_on(), an earlier program's verdict.
 * Uses: maps.bpf.h. Hooks: none.
 */
#ifndef AGENT_SANDBOX_GATE_BPF_H
#define AGENT_SANDBOX_GATE_BPF_H

static __always_inline int pass_on(int ret)
{
	/*
	 * Pass on an earlier program's verdict. Since 6.12 the verifier only
	 * accepts returns in [-MAX_ERRNO, 0], so anything else becomes -EPERM
	 * (fail closed).
	 */
	return (ret < 0 && ret >= -MAX_ERRNO) ? ret : -EPERM;
}

static __always_inline bool in_sandbox(__u64 cgid)
{
	__u32 idx = (__u32)cgid & (AGENT_SANDBOX_SLOTS - 1);
	__u64 *slot = bpf_map_lookup_elem(&sandbox_slots, &idx);

	if (!slot || *slot == 0)
		return false;
	if (*slot == AGENT_SANDBOX_SLOT_SHARED)
		return bpf_map_lookup_elem(&agent_cgid_set, &cgid) != NULL;
	return (*slot & ~(AGENT_SANDBOX_SLOT_DIRS | AGENT_SANDBOX_SLOT_AUDIT | AGENT_SANDBOX_SLOT_RO |
		   AGENT_SANDBOX_SLOT_RO_DIRS | AGENT_SANDBOX_SLOT_PATTERNS)) == cgid;
}

/*
 * sandbox_of(): the task is in a sandbox; that sandbox has directory
 * entries; audit entries; read-only entries; read-only directory entries;
 * name patterns. Each flag is its AGENT_SANDBOX_SLOT_ bit shifted right by
 * 58 (SLOT_DIRS is bit 63), so a slot's word gives them all in one shift.
 */
#define SBX_IN 1U
#define SBX_PATTERNS 2U
#define SBX_RO_DIRS 4U
#define SBX_RO 8U
#define SBX_AUDIT 16U
#define SBX_DIRS 32U
#define SBX_SLOT_SHIFT 58
_Static_assert((AGENT_SANDBOX_SLOT_DIRS >> SBX_SLOT_SHIFT) == SBX_DIRS &&
		       (AGENT_SANDBOX_SLOT_AUDIT >> SBX_SLOT_SHIFT) == SBX_AUDIT &&
		       (AGENT_SANDBOX_SLOT_RO >> SBX_SLOT_SHIFT) == SBX_RO &&
		       (AGENT_SANDBOX_SLOT_RO_DIRS >> SBX_SLOT_SHIFT) == SBX_RO_DIRS &&
		       (AGENT_SANDBOX_SLOT_PATTERNS >> SBX_SLOT_SHIFT) == SBX_PATTERNS,
	       "the SBX_ flags are the slot's bits shifted");

/*
 * 0 for a cgroup outside every sandbox; else SBX_IN, with SBX_DIRS when the
 * sandbox has directory entries (AGENT_SANDBOX_SLOT_DIRS in its slot, or,
 * for a shared slot, the KIND_HAS_DIRS key) and SBX_AUDIT when it has audit
 * entries (AGENT_SANDBOX_SLOT_AUDIT, or the KIND_HAS_AUDIT key) and SBX_RO
 * when it has read-only entries (AGENT_SANDBOX_SLOT_RO, or KIND_HAS_RO),
 * SBX_RO_DIRS when some need the whole walk (AGENT_SANDBOX_SLOT_RO_DIRS, or
 * KIND_HAS_RO_DIRS), SBX_PATTERNS when it has name patterns
 * (AGENT_SANDBOX_SLOT_PATTERNS, or KIND_HAS_PATTERNS):
 * sandboxes without them learn it from the slot's one load.
 */
static __always_inline __u32 sandbox_of(__u64 cgid)
{
	__u32 idx = (__u32)cgid & (AGENT_SANDBOX_SLOTS - 1);
	__u64 *slot = bpf_map_lookup_elem(&sandbox_slots, &idx);
	struct deny_key dk = {};
	__u32 sbx = SBX_IN;
	__u64 v;

	if (!slot)
		return 0;
	v = *slot;
	if (v == 0)
		return 0;
	if (v == AGENT_SANDBOX_SLOT_SHARED) {
		if (!bpf_map_lookup_elem(&agent_cgid_set, &cgid))
			return 0;
		dk.cgid = cgid;
		dk.file.kind = AGENT_SANDBOX_KIND_HAS_DIRS;
		if (bpf_map_lookup_elem(&deny_map, &dk))
			sbx |= SBX_DIRS;
		dk.file.kind = AGENT_SANDBOX_KIND_HAS_AUDIT;
		if (bpf_map_lookup_elem(&deny_map, &dk))
			sbx |= SBX_AUDIT;
		dk.file.kind = AGENT_SANDBOX_KIND_HAS_RO;
		if (bpf_map_lookup_elem(&deny_map, &dk))
			sbx |= SBX_RO;
		dk.file.kind = AGENT_SANDBOX_KIND_HAS_RO_DIRS;
		if (bpf_map_lookup_elem(&deny_map, &dk))
			sbx |= SBX_RO_DIRS;
		dk.file.kind = AGENT_SANDBOX_KIND_HAS_PATTERNS;
		if (bpf_map_lookup_elem(&deny_map, &dk))
			sbx |= SBX_PATTERNS;
		return sbx;
	}
	if ((v & ~(AGENT_SANDBOX_SLOT_DIRS | AGENT_SANDBOX_SLOT_AUDIT | AGENT_SANDBOX_SLOT_RO |
		   AGENT_SANDBOX_SLOT_RO_DIRS | AGENT_SANDBOX_SLOT_PATTERNS)) != cgid)
		return 0;
	/* The five flags in one shift (bit 58, below them, is the cgroup id's, and SBX_IN's place). */
	return (__u32)(v >> SBX_SLOT_SHIFT) | SBX_IN;
}

/*
 * The start of the hooks that judge the current task: an earlier verdict
 * `ret` stands (pass_on()), and a task outside every sandbox is not judged
 * (one cgroup-id lookup); otherwise `cgid` is the task's sandbox cgroup id.
 */
#define ONLY_SANDBOXED(ret, cgid)                     \
	do {                                          \
		if ((ret) != 0)                       \
			return pass_on(ret);          \
		(cgid) = bpf_get_current_cgroup_id(); \
		if (!in_sandbox(cgid))                \
			return 0;                     \
	} while (0)

/* The same, also setting `sbx` to sandbox_of(cgid), for the hooks that look at directory entries. */
#define ONLY_SANDBOXED_AS(ret, cgid, sbx)             \
	do {                                          \
		if ((ret) != 0)                       \
			return pass_on(ret);          \
		(cgid) = bpf_get_current_cgroup_id(); \
		(sbx) = sandbox_of(cgid);             \
		if (!(sbx))                           \
			return 0;                     \
	} while (0)

#endif /* AGENT_SANDBOX_GATE_BPF_H */
