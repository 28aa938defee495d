// SPDX-License-Identifier: GPL-2.0
/*
 * agent-sandbox-exec: BPF LSM programs that deny tasks in a tracked sandbox
 * cgroup the opening of listed files.
 *
 * Decision of lsm/file_open, for every open(2)-like call on the machine:
 *   1. an earlier BPF LSM program on this hook already refused: pass that on;
 *   2. the current task's cgroup v2 id is not a sandbox (sandbox_slots, then
 *      agent_cgid_set when a slot is shared): allow;
 *   3. {cgroup id, s_dev, i_ino, btrfs subvolume} of the opened inode is in
 *      deny_map: -EPERM (the inode listed at launch, under any name);
 *   4. {cgroup id, parent directory's key, name} of the opened dentry is in
 *      name_map: -EPERM (whatever inode now sits at a listed path: a file
 *      replaced by rename, re-created or created after launch);
 *   5. otherwise allow.
 * key_filter answers "certainly not listed" for steps 3 and 4 from the inode
 * number alone, without a hash lookup. The hook runs after the DAC and other
 * LSMs' checks for the same open (security_file_open() in fs/open.c:
 * do_dentry_open()), so it can only take permissions away.
 *
 * lsm/inode_link and lsm/inode_rename refuse a sandboxed task a new name for,
 * or a move of, a file that steps 3-4 protect, so a file protected only by
 * its name cannot be carried away from it. These and lsm/inode_create,
 * inode_mknod, inode_symlink and inode_mkdir refuse it any new inode at a
 * listed name; lsm/inode_rmdir, inode_unlink and inode_rename refuse it the
 * removal or move of a directory or symlink on the way to a listed name
 * (KIND_PATH), which would leave the name watch on a directory the user's
 * tools no longer write to. In a case-insensitive directory holding a
 * listed name, where the hook's byte comparison cannot see every spelling
 * of that name, it may open, create, link or rename nothing (see
 * case_insensitive()).
 *
 * lsm/file_ioctl and, for 32-bit tasks, lsm/file_ioctl_compat refuse a
 * sandboxed task the ioctls in ioctl_refused().
 *
 * lsm/inode_free_security drops the deny_map keys of an inode that is being
 * freed with no links left, so a new file that reuses its inode number is not
 * denied by mistake, and the sock_allow keys of such a socket inode, so a new
 * socket that reuses it is not allowed by mistake.
 *
 * lsm/ptrace_access_check keeps a sandboxed task from attaching to (ptrace,
 * /proc/<pid>/mem, process_vm_readv, pidfd_getfd) a task outside its own
 * sandbox cgroup, which could otherwise be made to read a listed file for it,
 * and, since issue 15, from read-mode access too: /proc/<pid>/fd/N and
 * map_files reopen that task's pipes, memfds and deleted files (see the
 * section "Side doors II" at the end for what else it and the hooks there
 * refuse: signals, resource limits, coredump_filter, F_SETOWN, TIOCSTI).
 *
 * lsm/sb_mount, lsm/move_mount and lsm/sb_umount refuse a sandboxed task any
 * mount change in a mount namespace the user's outside processes share
 * (section "Mounts" at the end), and lsm/inode_setattr a mode change of a
 * directory at or below a directory entry (issue 23).
 */
#include "kernel_types.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "agent_sandbox.h"

char LICENSE[] SEC("license") = "GPL";

static __always_inline int pass_on(int ret)
{
	/*
	 * Pass on an earlier program's verdict. Since 6.12 the verifier only
	 * accepts returns in [-MAX_ERRNO, 0], so anything else becomes -EPERM
	 * (fail closed).
	 */
	return (ret < 0 && ret >= -MAX_ERRNO) ? ret : -EPERM;
}

/* Read by the daemon from the skeleton's rodata to name its pin directory. */
const volatile __u32 layout_version = AGENT_SANDBOX_LAYOUT_VERSION;

/*
 * Where walk memos live, set by the daemon before load (src/variant.rs):
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

static __always_inline bool in_sandbox(__u64 cgid)
{
	__u32 idx = (__u32)cgid & (AGENT_SANDBOX_SLOTS - 1);
	__u64 *slot = bpf_map_lookup_elem(&sandbox_slots, &idx);

	if (!slot || *slot == 0)
		return false;
	if (*slot == AGENT_SANDBOX_SLOT_SHARED)
		return bpf_map_lookup_elem(&agent_cgid_set, &cgid) != NULL;
	return (*slot & ~AGENT_SANDBOX_SLOT_DIRS) == cgid;
}

/* sandbox_of(): the task is in a sandbox; that sandbox has directory entries. */
#define SBX_IN 1U
#define SBX_DIRS 2U

/*
 * 0 for a cgroup outside every sandbox; else SBX_IN, with SBX_DIRS when the
 * sandbox has directory entries (AGENT_SANDBOX_SLOT_DIRS in its slot, or,
 * for a shared slot, the KIND_HAS_DIRS key): sandboxes without directory
 * entries learn it from the slot's one load.
 */
static __always_inline __u32 sandbox_of(__u64 cgid)
{
	__u32 idx = (__u32)cgid & (AGENT_SANDBOX_SLOTS - 1);
	__u64 *slot = bpf_map_lookup_elem(&sandbox_slots, &idx);
	struct deny_key dk = {};
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
		return bpf_map_lookup_elem(&deny_map, &dk) ? SBX_IN | SBX_DIRS : SBX_IN;
	}
	if ((v & ~AGENT_SANDBOX_SLOT_DIRS) != cgid)
		return 0;
	return (v & AGENT_SANDBOX_SLOT_DIRS) ? SBX_IN | SBX_DIRS : SBX_IN;
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

/*
 * The btrfs subvolume (tree) id of a btrfs inode, 0 for other filesystems.
 * btrfs gives every subvolume and snapshot its own inode-number space under
 * one superblock, so (s_dev, i_ino) alone is ambiguous there: the key adds
 * BTRFS_I(inode)->root->root_key.objectid, which userspace reads with
 * BTRFS_IOC_INO_LOOKUP. If the btrfs types were not available when the
 * program was loaded (module not loaded yet), a btrfs inode gets
 * SLOT_SHARED, which no key holds, and the daemon reloads the program before
 * it installs btrfs keys.
 */
static __always_inline __u64 subvol_from(struct inode *inode, unsigned long magic)
{
	struct btrfs_inode *bi;
	struct btrfs_root *root;

	if (magic != BTRFS_SUPER_MAGIC)
		return 0;
	if (!bpf_core_type_exists(struct btrfs_inode) ||
	    !bpf_core_field_exists(struct btrfs_root, root_key))
		return AGENT_SANDBOX_SLOT_SHARED;
	bi = (void *)inode - bpf_core_field_offset(struct btrfs_inode, vfs_inode);
	root = BPF_CORE_READ(bi, root);
	if (!root)
		return AGENT_SANDBOX_SLOT_SHARED;
	return BPF_CORE_READ(root, root_key.objectid);
}

static __always_inline __u64 subvol_of(struct inode *inode)
{
	return subvol_from(inode, inode->i_sb->s_magic);
}

static __always_inline void fill_key(struct file_key *k, struct inode *inode)
{
	k->ino = inode->i_ino;
	k->dev = inode->i_sb->s_dev;
	k->subvol = subvol_of(inode);
}

/*
 * The offset of d_alias (the node in inode->i_dentry) in struct dentry: in
 * the union d_u up to 6.x, in an anonymous union since 7.x. The check is a
 * constant after relocation, so the verifier never sees the other branch,
 * whose relocation libbpf could not resolve.
 */
static __always_inline __u64 dentry_alias_offset(void)
{
	if (bpf_core_field_exists(struct dentry, d_u))
		return bpf_core_field_offset(struct dentry, d_u.d_alias);
	return bpf_core_field_offset(struct dentry___anon_alias, d_alias);
}

/* Is bit filter_bit(ino, tag) of key_filter set? */
static __always_inline bool filter_has(__u64 ino, __u64 tag)
{
	__u32 bit = agent_sandbox_filter_bit(ino, tag);
	__u32 word = bit >> 6;
	__u64 *w = bpf_map_lookup_elem(&key_filter, &word);

	return w && (*w >> (bit & 63)) & 1;
}

/* Is inode `inode` listed (deny_map) for sandbox `cgid`? */
static __always_inline bool inode_key_listed(__u64 cgid, struct inode *inode)
{
	struct deny_key dk = {};

	fill_key(&dk.file, inode);
	dk.cgid = cgid;
	return bpf_map_lookup_elem(&deny_map, &dk) != NULL;
}

static __always_inline bool inode_listed(__u64 cgid, struct inode *inode)
{
	if (!inode || !filter_has(inode->i_ino, AGENT_SANDBOX_FILTER_TAG_FILE))
		return false;
	return inode_key_listed(cgid, inode);
}

/*
 * Is {directory `dir`, `name` of `len` bytes} in name_map for sandbox `cgid`?
 * The caller has found the directory's bit set in key_filter.
 */
static __always_inline bool name_in_map(__u64 cgid, const struct file_key *dir,
					const unsigned char *name, __u32 len)
{
	struct name_key *nk;
	__u32 zero = 0;
	__u64 size;

	if (len == 0 || len >= AGENT_SANDBOX_NAME_LEN)
		return false;
	nk = bpf_map_lookup_elem(&name_scratch, &zero);
	if (!nk)
		return true; /* cannot happen; fail closed */
	__builtin_memset(nk, 0, sizeof(*nk));
	nk->cgid = cgid;
	nk->dir = *dir;
	/*
	 * Bound the size in the register the call takes: a bound set earlier
	 * can be lost when the compiler spills the value (the 6.1 verifier then
	 * sees an unbounded size).
	 */
	size = len;
	asm volatile("%[size] &= 255" : [size] "+r"(size));
	if (bpf_probe_read_kernel(nk->name, size, name))
		return true; /* unreadable name: fail closed */
	return bpf_map_lookup_elem(&name_map, nk) != NULL;
}

/* Is `dentry` (a name in directory `dir`) a listed name for sandbox `cgid`? */
static __always_inline bool name_listed(__u64 cgid, struct inode *dir, struct dentry *dentry)
{
	struct file_key dk = {};

	if (!dir || !dentry || !filter_has(dir->i_ino, AGENT_SANDBOX_FILTER_TAG_DIR))
		return false;
	fill_key(&dk, dir);
	return name_in_map(cgid, &dk, dentry->d_name.name, dentry->d_name.len);
}

/*
 * The same for a dentry reached by address, not through a BTF-typed pointer
 * (the alias of a backing file's inode): every field through probe reads.
 */
static __always_inline bool alias_listed(__u64 cgid, struct dentry *dentry)
{
	struct file_key dk = {};
	struct inode *dir;

	dir = BPF_CORE_READ(dentry, d_parent, d_inode);
	if (!dir)
		return false;
	dk.ino = BPF_CORE_READ(dir, i_ino);
	if (!filter_has(dk.ino, AGENT_SANDBOX_FILTER_TAG_DIR))
		return false;
	dk.dev = BPF_CORE_READ(dir, i_sb, s_dev);
	dk.subvol = subvol_from(dir, BPF_CORE_READ(dir, i_sb, s_magic));
	return name_in_map(cgid, &dk, BPF_CORE_READ(dentry, d_name.name),
			   BPF_CORE_READ(dentry, d_name.len));
}

/* Does sandbox `cgid` hold the deny_map entry {inode key `key`, kind}? */
static __always_inline bool key_marked(__u64 cgid, const struct file_key *key, __u32 kind)
{
	struct deny_key dk = {};

	dk.cgid = cgid;
	dk.file = *key;
	dk.file.kind = kind;
	return bpf_map_lookup_elem(&deny_map, &dk) != NULL;
}

/* Does sandbox `cgid` hold the deny_map entry {inode, kind}? */
static __always_inline bool marked(__u64 cgid, struct inode *inode, __u32 kind)
{
	struct file_key key = {};

	if (!inode)
		return false;
	fill_key(&key, inode);
	return key_marked(cgid, &key, kind);
}

/*
 * Does `dentry`, which may be negative (the new name of a rename), have an
 * inode? The verifier takes dentry->d_inode as a trusted pointer that is
 * never NULL ("no negative dentry-s in places where bpf can see it":
 * BTF_TYPE_SAFE_TRUSTED(struct dentry) in kernel/bpf/verifier.c, 6.6 and
 * later), so loads through it are not fault-checked and a NULL test on it
 * may be dropped: a rename to a new name then oopses (seen on 6.12). The
 * pointer's value is read with bpf_probe_read_kernel() instead, which the
 * verifier takes for a plain number.
 */
static __always_inline bool positive(struct dentry *dentry)
{
	struct inode *inode = NULL;

	BPF_CORE_READ_INTO(&inode, dentry, d_inode);
	return inode != NULL;
}

/* Is `inode` a directory or symlink on the way to a name sandbox `cgid` lists? */
static __always_inline bool on_path(__u64 cgid, struct inode *inode)
{
	return marked(cgid, inode, AGENT_SANDBOX_KIND_PATH) ||
	       marked(cgid, inode, AGENT_SANDBOX_KIND_LISTED_DIR);
}

/*
 * Does looking `dentry` up in directory `dir` ignore case, as far as the
 * hook can see by itself? ext4 and F2FS fold case per directory (S_CASEFOLD
 * in i_flags; since 6.7 they set case-folding dentry operations on every
 * dentry of a casefold-capable filesystem, so the flag is what tells).
 * Elsewhere a dentry with its own d_compare (CIFS nocase, JFS, HFS+, NTFS3)
 * compares names other than byte for byte; all such are taken as
 * case-insensitive. XFS's ASCII-ci mode shows neither (KIND_FOLDING_DIR).
 */
static __always_inline bool case_insensitive(struct inode *dir, struct dentry *dentry)
{
	unsigned long magic;

	if (dir->i_flags & S_CASEFOLD)
		return true;
	if (!(dentry->d_flags & DCACHE_OP_COMPARE))
		return false;
	magic = dir->i_sb->s_magic;
	return magic != EXT4_SUPER_MAGIC && magic != F2FS_SUPER_MAGIC;
}

/*
 * Is `dentry` refused to sandbox `cgid` by its name in directory `dir`: a
 * listed name, or, if `folding`, any name in a case-insensitive directory
 * that holds a listed name? There any name may be a spelling of the listed
 * one (Unicode case folding cannot be done here), so the name watch works by
 * refusal: no open, create, link or rename of a name in it. One key_filter
 * lookup answers "no" for every directory that holds no listed name, the
 * common case, before any key is built.
 */
static __always_inline bool name_refused_in(__u64 cgid, struct inode *dir, struct dentry *dentry,
					    bool folding);

static __always_inline bool name_refused(__u64 cgid, struct inode *dir, struct dentry *dentry,
					 bool folding)
{
	if (!dir || !dentry || !filter_has(dir->i_ino, AGENT_SANDBOX_FILTER_TAG_DIR))
		return false;
	return name_refused_in(cgid, dir, dentry, folding);
}

/* name_refused() once `dir`'s key_filter bit was found set. */
static __always_inline bool name_refused_in(__u64 cgid, struct inode *dir, struct dentry *dentry,
					    bool folding)
{
	struct file_key dk = {};

	fill_key(&dk, dir);
	if (name_in_map(cgid, &dk, dentry->d_name.name, dentry->d_name.len))
		return true;
	if (!folding)
		return false;
	if (case_insensitive(dir, dentry))
		return key_marked(cgid, &dk, AGENT_SANDBOX_KIND_LISTED_DIR);
	return dir->i_sb->s_magic == XFS_SUPER_MAGIC &&
	       key_marked(cgid, &dk, AGENT_SANDBOX_KIND_FOLDING_DIR);
}

/*
 * Steps 3 and 4 of the decision for an open: the inode, then its name. A
 * backing file opened by overlayfs carries the overlay's path (6.1:
 * open_with_fake_path()) with the real inode; its name is then checked on
 * the real inode's first alias, so an overlay mounted in a user namespace
 * over a listed directory cannot hide a replaced file's name.
 */
/* open_denied()'s `bits`: key_filter had the file's inode (FILTER_TAG_FILE), its parent (FILTER_TAG_DIR). */
#define BIT_FILE 1U
#define BIT_DIR 2U

static __always_inline bool open_denied(__u64 cgid, struct file *file, __u32 *bits)
{
	struct inode *inode = file->f_inode;
	struct dentry *dentry = file->f_path.dentry;
	struct hlist_node *first;
	struct inode *dir;

	*bits = BIT_FILE | BIT_DIR; /* unknown: the walk checks both */
	if (!inode)
		return false;
	if (filter_has(inode->i_ino, AGENT_SANDBOX_FILTER_TAG_FILE)) {
		if (inode_key_listed(cgid, inode))
			return true;
	} else {
		*bits &= ~BIT_FILE;
	}
	if (dentry->d_inode == inode) {
		dir = dentry->d_parent->d_inode;
		if (!dir || !filter_has(dir->i_ino, AGENT_SANDBOX_FILTER_TAG_DIR)) {
			*bits &= ~BIT_DIR;
			return false;
		}
		/* Subdirectories of a case-insensitive directory stay listable. */
		return name_refused_in(cgid, dir, dentry, (inode->i_mode & S_IFMT) != S_IFDIR);
	}
	first = inode->i_dentry.first;
	if (!first)
		return false;
	return alias_listed(cgid, (void *)first - dentry_alias_offset());
}

/* Side doors II (end of file): a write-open of an outside task's /proc/<pid>/ file. */
static __always_inline bool proc_write_refused(__u64 cgid, struct file *file);

/*
 * ---- Directory entries and exceptions -------------------------------------
 *
 * A list line `DIR/` denies every non-directory below DIR, at any depth and
 * by any name; `!PATH` and `!DIR/` re-allow what the same list's directory
 * entries deny (agent_sandbox.h: KIND_DIR_*, KIND_EXC_*). For a sandboxed
 * task whose sandbox has directory entries (SBX_DIRS), file_open walks the
 * opened dentry's d_parent chain: the dentry tree of the superblock, which no
 * bind mount, mount namespace or user namespace can fake (a bind mount of a
 * subdirectory shares its dentries, so the walk goes on above the bind
 * root). At a superblock's root (d_parent == itself) it continues at the
 * mount point of the file's mount (struct mount: mnt_mountpoint,
 * mnt_parent; fs/mount.h, real_mount()), so a filesystem mounted below an
 * entry is covered through that mount. At each level, one key_filter probe
 * per key (the inode by FILTER_TAG_FILE, its parent by FILTER_TAG_DIR for
 * the name) answers "no mark here" before any hash lookup. Per list, the
 * nearest mark decides (src/denylist.rs: decide()); either list denying
 * denies. A walk that does not reach the root within
 * AGENT_SANDBOX_WALK_DEPTH levels denies (fail closed), and so does one
 * that a rename anywhere overlapped twice: rename_lock's sequence count
 * (fs/dcache.c: d_move() and d_exchange() take write_seqlock(&rename_lock))
 * is read before and after each attempt.
 *
 * Walk memos. The walk from a directory up depends only on the sandbox, the
 * marks, the dentry tree above the directory and, past its superblock's
 * root, the mounts above the file's mount. file_open keeps the walk's result
 * from an opened file's parent directory in that directory's inode storage
 * (walk_memos, struct walk_memo), and the next open of a file there by the
 * same sandbox judges the file's own level, then takes the rest from the
 * memo: an inode-storage lookup instead of a walk. A memo is used only
 * while the marks (walk_gens.marks, bumped by the daemon after each apply),
 * the directories (walk_gens.moves, bumped after each directory rename by
 * fexit/vfs_rename) and, for the part past the superblock's root, the
 * mounts (mount_lock's sequence count, fs/namespace.c: every change of the
 * mount tree takes write_seqlock(&mount_lock)) are as when it was made; the
 * counts are read before the walk that makes it, so a change during that
 * walk leaves a memo that is never used. Memos are made only on
 * filesystems whose directories move only through vfs_rename()
 * (memo_fs()): on a network or FUSE filesystem d_splice_alias() may move a
 * directory's dentry on a lookup, without a rename here. A memo lives as
 * long as the directory's inode is in the inode cache.
 *
 * inode_link, inode_rename and inode_symlink refuse a sandboxed task a name
 * that would carry a file or directory out of, or an inode of its own into,
 * a directory entry (the walk's answer differs between the old and the new
 * name), and a symlink below an entry (a user's tool writing through it
 * would write the secret where the agent reads).
 */

/* One struct walk_gens (agent_sandbox.h). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__uint(map_flags, BPF_F_MMAPABLE);
	__type(key, __u32);
	__type(value, struct walk_gens);
} walk_gens SEC(".maps");

/* Directory inode -> its walk memo (agent_sandbox.h). */
struct {
	__uint(type, BPF_MAP_TYPE_INODE_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct walk_memo);
} walk_memos SEC(".maps");

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

/* fs/dcache.c: seqlock_t rename_lock; its sequence count is the first word. */
extern const void rename_lock __ksym __weak;
/* fs/namespace.c: seqlock_t mount_lock, the same shape. */
extern const void mount_lock __ksym __weak;

#define WALK_OPEN 0
#define WALK_DENY 1
#define WALK_ALLOW 2

/* The state of one walk; its pointers are plain numbers, read through probe reads. */
struct walk_ctx {
	__u64 cgid;
	__u64 dentry; /* struct dentry * of this level */
	__u64 mnt;    /* struct mount * of that dentry, 0: do not cross mounts */
	__u32 base;   /* WALK_* for the base list */
	__u32 user;   /* WALK_* for the user's list */
	__u32 done;   /* the root was reached or both lists decided */
	__u32 sb_base; /* base and user as the first superblock root was reached */
	__u32 sb_user;
	__u32 at_sb;   /* 1 once the walk has passed the first superblock root */
	__u32 cross_memo; /* 0 once a mount crossed leads to a filesystem memo_fs() refuses */
	__u32 pad;
};

/* The key of inode `inode` (an address), through probe reads. */
static __always_inline void read_key(struct file_key *k, struct inode *inode, __u64 ino)
{
	struct super_block *sb = BPF_CORE_READ(inode, i_sb);

	k->ino = ino;
	k->dev = BPF_CORE_READ(sb, s_dev);
	k->subvol = subvol_from(inode, BPF_CORE_READ(sb, s_magic));
	k->kind = 0;
}

/* Does `map` hold key `key` (a deny_key or name_key) with file kind `kind`? */
static __always_inline bool has_kind(void *map, void *key, __u32 *kind_field, __u32 kind)
{
	*kind_field = kind;
	return bpf_map_lookup_elem(map, key) != NULL;
}

/* One list's state after this level's marks: the nearest mark decides. */
static __always_inline void walk_note(__u32 *state, void *map, void *key, __u32 *kind_field,
				      __u32 dir_kind, __u32 exc_kind)
{
	if (*state != WALK_OPEN)
		return;
	if (has_kind(map, key, kind_field, dir_kind))
		*state = WALK_DENY;
	else if (has_kind(map, key, kind_field, exc_kind))
		*state = WALK_ALLOW;
}

/* Both lists' states after the marks of one key. */
static __always_inline void note_marks(__u32 *base, __u32 *user, void *map, void *key,
				       __u32 *kind_field)
{
	walk_note(base, map, key, kind_field, AGENT_SANDBOX_KIND_DIR_BASE,
		  AGENT_SANDBOX_KIND_EXC_BASE);
	walk_note(user, map, key, kind_field, AGENT_SANDBOX_KIND_DIR_USER,
		  AGENT_SANDBOX_KIND_EXC_USER);
}

/* Is the walk decided: a list denies, or both have decided? */
static __always_inline bool walk_decided(__u32 base, __u32 user)
{
	return base == WALK_DENY || user == WALK_DENY || (base != WALK_OPEN && user != WALK_OPEN);
}

/*
 * May a walk memo be made for a directory of a filesystem with magic
 * `magic`: one whose directory dentries move only in d_move() and
 * d_exchange() from vfs_rename() (ext2/3/4, XFS, btrfs, tmpfs, F2FS, and
 * ramfs: the initramfs's rootfs, below the real root after switch_root, so
 * every walk that leaves the root filesystem crosses into it)?
 */
static __always_inline bool memo_fs(unsigned long magic)
{
	return magic == EXT4_SUPER_MAGIC || magic == XFS_SUPER_MAGIC ||
	       magic == BTRFS_SUPER_MAGIC || magic == TMPFS_MAGIC || magic == F2FS_SUPER_MAGIC ||
	       magic == RAMFS_MAGIC;
}

/* One level of the walk (a bpf_loop() callback): 1 stops the loop. */
static long walk_step(__u64 index, void *ctx)
{
	struct walk_ctx *c = ctx;
	struct dentry *d = (struct dentry *)c->dentry;
	struct dentry *parent;
	struct inode *inode;
	struct deny_key dk = {};
	struct name_key *nk;
	const unsigned char *name;
	__u32 zero = 0, len;
	__u64 ino, size;

	inode = BPF_CORE_READ(d, d_inode);
	if (inode) {
		ino = BPF_CORE_READ(inode, i_ino);
		if (filter_has(ino, AGENT_SANDBOX_FILTER_TAG_FILE)) {
			read_key(&dk.file, inode, ino);
			dk.cgid = c->cgid;
			note_marks(&c->base, &c->user, &deny_map, &dk, &dk.file.kind);
		}
	}
	parent = BPF_CORE_READ(d, d_parent);
	if (!parent || parent == d) {
		struct mount *m = (struct mount *)c->mnt;
		struct mount *up;

		if (!c->at_sb) {
			c->at_sb = 1;
			c->sb_base = c->base;
			c->sb_user = c->user;
		}
		if (!m)
			goto root;
		up = BPF_CORE_READ(m, mnt_parent);
		if (!up || up == m)
			goto root;
		d = BPF_CORE_READ(m, mnt_mountpoint);
		c->dentry = (__u64)d;
		c->mnt = (__u64)up;
		if (!memo_fs(BPF_CORE_READ(d, d_sb, s_magic)))
			c->cross_memo = 0;
		goto next;
	}
	inode = BPF_CORE_READ(parent, d_inode);
	if (inode) {
		ino = BPF_CORE_READ(inode, i_ino);
		if (filter_has(ino, AGENT_SANDBOX_FILTER_TAG_DIR)) {
			nk = bpf_map_lookup_elem(&name_scratch, &zero);
			if (!nk) {
				c->base = c->user = WALK_DENY; /* cannot happen; fail closed */
				goto next;
			}
			__builtin_memset(nk, 0, sizeof(*nk));
			nk->cgid = c->cgid;
			read_key(&nk->dir, inode, ino);
			len = BPF_CORE_READ(d, d_name.len);
			name = BPF_CORE_READ(d, d_name.name);
			if (len > 0 && len < AGENT_SANDBOX_NAME_LEN) {
				size = len;
				asm volatile("%[size] &= 255" : [size] "+r"(size));
				if (bpf_probe_read_kernel(nk->name, size, name))
					c->base = c->user = WALK_DENY; /* unreadable name: fail closed */
				else
					note_marks(&c->base, &c->user, &name_map, nk,
						   &nk->dir.kind);
			}
		}
	}
	c->dentry = (__u64)parent;
next:
	if (walk_decided(c->base, c->user)) {
		c->done = 1;
		if (!c->at_sb) {
			c->at_sb = 1;
			c->sb_base = c->base;
			c->sb_user = c->user;
		}
		return 1;
	}
	return 0;
root:
	c->done = 1;
	return 1;
}

/* The first word of a seqlock_t at `lock` (its sequence count), or 0 if the kernel symbol is unknown. */
static __always_inline __u32 seq_of(const void *lock)
{
	__u32 seq = 0;

	if (lock)
		bpf_probe_read_kernel(&seq, sizeof(seq), lock);
	return seq;
}

/*
 * The walk of sandbox `cgid` from the (possibly negative) dentry at address
 * `dentry`, on mount `mnt` (struct mount address, 0 to not cross mounts),
 * at most `depth` levels, into `c`. False when renames overlapped both
 * attempts (then nothing in `c` may be used).
 */
static __always_inline bool walk_from(struct walk_ctx *c, __u64 cgid, __u64 dentry, __u64 mnt,
				      __u32 depth)
{
	__u32 seq;
	int attempt;

	for (attempt = 0; attempt < 2; attempt++) {
		seq = seq_of(&rename_lock);
		__builtin_memset(c, 0, sizeof(*c));
		c->cgid = cgid;
		c->dentry = dentry;
		c->mnt = mnt;
		c->cross_memo = 1;
		bpf_loop(depth, walk_step, c, 0);
		if (!(seq & 1) && seq_of(&rename_lock) == seq) {
			if (!c->done) {
				/*
				 * Out of levels: fail closed, for both lists, so that
				 * no nearer exception can re-allow.
				 */
				c->base = c->user = WALK_DENY;
				if (!c->at_sb)
					c->sb_base = c->sb_user = WALK_DENY;
			}
			return true;
		}
	}
	return false;
}

/*
 * Does a directory entry of sandbox `cgid` deny the (possibly negative)
 * dentry at address `dentry`, on mount `mnt` (as walk_from())? Denied past
 * the depth bound or when renames overlap both attempts.
 */
static __always_inline bool walk_denied(__u64 cgid, __u64 dentry, __u64 mnt)
{
	struct walk_ctx c;

	if (!walk_from(&c, cgid, dentry, mnt, AGENT_SANDBOX_WALK_DEPTH))
		return true;
	return c.base == WALK_DENY || c.user == WALK_DENY;
}

/*
 * The marks of one level reached through BTF pointers: inode `inode`, named
 * `dentry` in directory `dir`, whose key_filter bits open_denied() found
 * (`bits`: BIT_FILE, BIT_DIR); the states of both lists in `base`, `user`.
 */
static __always_inline void level_marks(__u64 cgid, struct inode *inode, struct dentry *dentry,
					struct inode *dir, __u32 bits, __u32 *base, __u32 *user)
{
	struct deny_key dk = {};
	struct name_key *nk;
	__u32 zero = 0, len;
	__u64 size;

	if (bits & BIT_FILE) {
		fill_key(&dk.file, inode);
		dk.cgid = cgid;
		note_marks(base, user, &deny_map, &dk, &dk.file.kind);
	}
	if (!(bits & BIT_DIR))
		return;
	nk = bpf_map_lookup_elem(&name_scratch, &zero);
	if (!nk) {
		*base = *user = WALK_DENY; /* cannot happen; fail closed */
		return;
	}
	__builtin_memset(nk, 0, sizeof(*nk));
	nk->cgid = cgid;
	fill_key(&nk->dir, dir);
	len = dentry->d_name.len;
	if (len == 0 || len >= AGENT_SANDBOX_NAME_LEN)
		return;
	size = len;
	asm volatile("%[size] &= 255" : [size] "+r"(size));
	if (bpf_probe_read_kernel(nk->name, size, dentry->d_name.name))
		*base = *user = WALK_DENY; /* unreadable name: fail closed */
	else
		note_marks(base, user, &name_map, nk, &nk->dir.kind);
}

/* path_walk_denied(): no memo can be used; walk from the file itself. */
#define PATH_WALK_WHOLE 2

/*
 * The walk for a file opened on its own path (`dentry` is the file's): the
 * file's level here, the rest from the memo of its parent directory, or
 * walked from there and then kept in its memo. 1: denied, 0: allowed,
 * PATH_WALK_WHOLE: the caller walks from the file (a mark on the file's
 * own level, or a file that is its own parent).
 */

static __always_inline int path_walk_denied(__u64 cgid, struct file *file, struct dentry *dentry,
					    __u32 bits)
{
	struct dentry *parent = dentry->d_parent;
	struct inode *dir = parent->d_inode;
	struct walk_memo *memo, fresh = {};
	struct memo_key mk = {};
	struct walk_ctx c;
	struct walk_gens *gens;
	__u32 base = WALK_OPEN, user = WALK_OPEN, zero = 0;
	__u32 mseq, rest_base, rest_user;
	__u64 mnt = 0, vmnt, p = 0;

	level_marks(cgid, file->f_inode, dentry, dir, bits, &base, &user);
	if (base == WALK_DENY || user == WALK_DENY)
		return true;
	/*
	 * A mark on the file's own level (an exception, or a walk that failed
	 * closed there): one walk from the file itself, as without memos. A
	 * walk from the parent stops at the first deny and leaves the other
	 * list unwalked, which the file's exception must not then override.
	 */
	if (base != WALK_OPEN || user != WALK_OPEN)
		goto whole;
	gens = bpf_map_lookup_elem(&walk_gens, &zero);
	if (!gens)
		return true; /* cannot happen; fail closed */
	/* The vfsmount's address, compared and kept as a number. */
	vmnt = (__u64)file->f_path.mnt;
	if (walk_memo_store == MEMO_INODE_STORAGE) {
		memo = bpf_inode_storage_get(&walk_memos, dir, 0, 0);
	} else {
		/* The address as a number (a key), not a pointer. */
		bpf_probe_read_kernel(&mk.inode, sizeof(mk.inode), &dir);
		mk.ino = dir->i_ino;
		memo = bpf_map_lookup_elem(&walk_memo_hash, &mk);
	}
	if (memo && memo->cgid == cgid && memo->marks_gen == gens->marks &&
	    memo->moves_gen == gens->moves) {
		rest_base = memo->sb_base;
		rest_user = memo->sb_user;
		if (walk_decided(rest_base, rest_user))
			goto combine;
		if (memo->mnt == vmnt && vmnt && &mount_lock) {
			mseq = seq_of(&mount_lock);
			if (!(mseq & 1) && mseq == memo->mount_seq) {
				rest_base = memo->full_base;
				rest_user = memo->full_user;
				goto combine;
			}
		}
	}
	/* No memo to use: walk from the parent, then keep the result there. */
	fresh.cgid = cgid;
	fresh.marks_gen = gens->marks;
	fresh.moves_gen = gens->moves;
	mseq = seq_of(&mount_lock);
	/* Through a probe read, so that the walk's arithmetic is on a number. */
	BPF_CORE_READ_INTO(&mnt, file, f_path.mnt);
	if (mnt)
		mnt -= bpf_core_field_offset(struct mount, mnt);
	bpf_probe_read_kernel(&p, sizeof(p), &parent);
	/* Pipes, sockets, memfds, nsfs (d_alloc_pseudo()): their own parent, no directory to keep a memo on. */
	if (p == (__u64)dentry)
		goto whole;
	if (!walk_from(&c, cgid, p, mnt, AGENT_SANDBOX_WALK_DEPTH - 1))
		return true;
	rest_base = c.base;
	rest_user = c.user;
	/*
	 * Not on an encrypted directory (fscrypt): a locked one's names are
	 * no-key names until the key is added, which changes them without a
	 * rename (and its subdirectories are all encrypted too).
	 */
	if (memo_fs(dir->i_sb->s_magic) && !(dir->i_flags & S_ENCRYPTED)) {
		fresh.sb_base = c.sb_base;
		fresh.sb_user = c.sb_user;
		fresh.full_base = c.base;
		fresh.full_user = c.user;
		if (c.cross_memo && &mount_lock && !(mseq & 1) && vmnt) {
			fresh.mnt = vmnt;
			fresh.mount_seq = mseq;
		}
		if (walk_memo_store == MEMO_INODE_STORAGE) {
			bpf_inode_storage_delete(&walk_memos, dir);
			bpf_inode_storage_get(&walk_memos, dir, &fresh,
					      BPF_LOCAL_STORAGE_GET_F_CREATE);
		} else {
			/* Replaced whole: a reader sees the old memo or this one. */
			bpf_map_update_elem(&walk_memo_hash, &mk, &fresh, BPF_ANY);
		}
	}
combine:
	/* Both lists were OPEN at the file's own level: the rest decides. */
	return rest_base == WALK_DENY || rest_user == WALK_DENY;
whole:
	return PATH_WALK_WHOLE;
}

/*
 * The walk for an opened file: from its dentry on its mount (with memos),
 * or, for a backing file that overlayfs opened with the overlay's path (6.1:
 * open_with_fake_path()), from the real inode's first alias without
 * crossing mounts.
 */
static __always_inline bool open_walk_denied(__u64 cgid, struct file *file, __u32 bits)
{
	struct inode *inode = file->f_inode;
	struct dentry *dentry = file->f_path.dentry;
	struct hlist_node *first;
	__u64 d = 0, mnt = 0;
	int verdict;

	if (dentry->d_inode == inode) {
		if (walk_memo_store != MEMO_NONE) {
			verdict = path_walk_denied(cgid, file, dentry, bits);
			if (verdict != PATH_WALK_WHOLE)
				return verdict;
		}
		BPF_CORE_READ_INTO(&mnt, file, f_path.mnt);
		if (mnt)
			mnt -= bpf_core_field_offset(struct mount, mnt);
		bpf_probe_read_kernel(&d, sizeof(d), &dentry);
	} else {
		first = inode->i_dentry.first;
		if (!first)
			return false;
		d = (__u64)first - dentry_alias_offset();
	}
	/* One walk for both (each call of bpf_loop() is verified on its own). */
	return walk_denied(cgid, d, mnt);
}

/* May `old` not get the name `new` (link, rename) in sandbox `cgid`, of sandbox_of() `sbx`? */
static __always_inline bool moves_across_entry(__u64 cgid, __u32 sbx, struct dentry *old,
					       struct dentry *new)
{
	__u64 o = 0, n = 0;

	if (!(sbx & SBX_DIRS))
		return false;
	bpf_probe_read_kernel(&o, sizeof(o), &old);
	bpf_probe_read_kernel(&n, sizeof(n), &new);
	return walk_denied(cgid, o, 0) != walk_denied(cgid, n, 0);
}

/*
 * After a rename (vfs_rename() in fs/namei.c, the one caller of d_move()
 * and d_exchange() for a rename on a local filesystem) that moved a
 * directory: every walk memo is stale (walk_gens.moves). Runs for every
 * task; a rename of a non-directory changes no memo.
 */
SEC("fexit/vfs_rename")
int BPF_PROG(vfs_rename_exit, struct renamedata *rd, int ret)
{
	struct inode *moved = NULL, *other = NULL;
	struct walk_gens *gens;
	unsigned int flags = 0;
	__u32 zero = 0;

	if (ret != 0)
		return 0;
	BPF_CORE_READ_INTO(&moved, rd, old_dentry, d_inode);
	BPF_CORE_READ_INTO(&other, rd, new_dentry, d_inode);
	BPF_CORE_READ_INTO(&flags, rd, flags);
	if (!((moved && (BPF_CORE_READ(moved, i_mode) & S_IFMT) == S_IFDIR) ||
	      ((flags & RENAME_EXCHANGE) && other &&
	       (BPF_CORE_READ(other, i_mode) & S_IFMT) == S_IFDIR)))
		return 0;
	gens = bpf_map_lookup_elem(&walk_gens, &zero);
	if (gens)
		__sync_fetch_and_add(&gens->moves, 1);
	return 0;
}

/* ---- end of directory entries and exceptions ---------------------------- */

/*
 * The whole decision on an open file for sandbox `cgid`: by its inode and
 * name (open_denied()), then, for a sandbox with directory entries, by the
 * directories above it (open_walk_denied(); directories stay listable below
 * a directory entry). Shared by file_open and file_receive, so a descriptor
 * passed in is judged as an open of the same file would be.
 */
static __always_inline bool file_refused(__u64 cgid, __u32 sbx, struct file *file)
{
	__u32 bits;

	if (open_denied(cgid, file, &bits))
		return true;
	return (sbx & SBX_DIRS) && (file->f_inode->i_mode & S_IFMT) != S_IFDIR &&
	       open_walk_denied(cgid, file, bits);
}

SEC("lsm/file_open")
int BPF_PROG(file_open, struct file *file, int ret)
{
	__u64 cgid;
	__u32 sbx;

	ONLY_SANDBOXED_AS(ret, cgid, sbx);
	/* BTF-typed pointers: direct loads, relocated by CO-RE. */
	if (file_refused(cgid, sbx, file) || proc_write_refused(cgid, file))
		return -EPERM;
	return 0;
}

/*
 * Names: a sandboxed task may not give a protected file a new name (link,
 * rename away), nor put an inode of its own at a listed name (create, mknod,
 * symlink, mkdir, link or rename onto it, or unlink the listed file first),
 * where a later write by the user would land in an inode the agent can read,
 * nor remove, move or replace a directory or symlink on the way to a listed
 * name.
 */
SEC("lsm/inode_link")
int BPF_PROG(inode_link, struct dentry *old_dentry, struct inode *dir, struct dentry *new_dentry,
	     int ret)
{
	__u64 cgid;
	__u32 sbx;

	ONLY_SANDBOXED_AS(ret, cgid, sbx);
	if (inode_listed(cgid, old_dentry->d_inode) ||
	    name_listed(cgid, old_dentry->d_parent->d_inode, old_dentry) ||
	    name_refused(cgid, dir, new_dentry, true) ||
	    moves_across_entry(cgid, sbx, old_dentry, new_dentry))
		return -EPERM;
	return 0;
}

/*
 * Called once per moved dentry: twice, swapped, for RENAME_EXCHANGE
 * (security/security.c). A rename onto an existing name replaces that
 * inode (an empty directory, for directories): on the way, it is refused too.
 */
SEC("lsm/inode_rename")
int BPF_PROG(inode_rename, struct inode *old_dir, struct dentry *old_dentry, struct inode *new_dir,
	     struct dentry *new_dentry, int ret)
{
	__u64 cgid;
	__u32 sbx;

	ONLY_SANDBOXED_AS(ret, cgid, sbx);
	if (inode_listed(cgid, old_dentry->d_inode) || name_refused(cgid, old_dir, old_dentry, true) ||
	    name_refused(cgid, new_dir, new_dentry, true) || on_path(cgid, old_dentry->d_inode) ||
	    (positive(new_dentry) && on_path(cgid, new_dentry->d_inode)) ||
	    moves_across_entry(cgid, sbx, old_dentry, new_dentry))
		return -EPERM;
	return 0;
}

/* The shared body of the hooks that make or remove one name in `dir`. */
static __always_inline int name_change(struct inode *dir, struct dentry *dentry, int ret)
{
	__u64 cgid;

	ONLY_SANDBOXED(ret, cgid);
	if (name_refused(cgid, dir, dentry, true))
		return -EPERM;
	return 0;
}

SEC("lsm/inode_create")
int BPF_PROG(inode_create, struct inode *dir, struct dentry *dentry, unsigned short mode, int ret)
{
	return name_change(dir, dentry, ret);
}

SEC("lsm/inode_mknod")
int BPF_PROG(inode_mknod, struct inode *dir, struct dentry *dentry, unsigned short mode, dev_t dev,
	     int ret)
{
	return name_change(dir, dentry, ret);
}

SEC("lsm/inode_symlink")
int BPF_PROG(inode_symlink, struct inode *dir, struct dentry *dentry, const char *old_name, int ret)
{
	__u64 cgid, d = 0;

	ret = name_change(dir, dentry, ret);
	if (ret != 0)
		return ret;
	cgid = bpf_get_current_cgroup_id();
	if (!(sandbox_of(cgid) & SBX_DIRS))
		return 0;
	/* A symlink below a directory entry: see the directory-entry section. */
	bpf_probe_read_kernel(&d, sizeof(d), &dentry);
	if (walk_denied(cgid, d, 0))
		return -EPERM;
	return 0;
}

SEC("lsm/inode_mkdir")
int BPF_PROG(inode_mkdir, struct inode *dir, struct dentry *dentry, unsigned short mode, int ret)
{
	return name_change(dir, dentry, ret);
}

/* A symlink on the way to a listed name is removed by unlink. */
SEC("lsm/inode_unlink")
int BPF_PROG(inode_unlink, struct inode *dir, struct dentry *dentry, int ret)
{
	__u64 cgid;

	ONLY_SANDBOXED(ret, cgid);
	if (name_listed(cgid, dir, dentry) || inode_listed(cgid, dentry->d_inode) ||
	    on_path(cgid, dentry->d_inode))
		return -EPERM;
	return 0;
}

SEC("lsm/inode_rmdir")
int BPF_PROG(inode_rmdir, struct inode *dir, struct dentry *dentry, int ret)
{
	__u64 cgid;

	ONLY_SANDBOXED(ret, cgid);
	if (on_path(cgid, dentry->d_inode))
		return -EPERM;
	return 0;
}

/*
 * No mode change (chmod, ATTR_MODE) of a directory at or below a directory
 * entry (issue 23): `chmod 000` of a subdirectory makes the next launch's
 * scan miss the files below it, among them one with a second name outside
 * the entry that an earlier scan marked by inode. The daemon keeps the
 * earlier keys after such a scan anyway (policy::keys_mode); this refuses
 * the direct way to cause it. (A POSIX ACL written with setxattr can change
 * the mode bits too, without this hook: the daemon's rule covers it.)
 *
 * The hook's arguments are (dentry, attr) before Linux 6.8 and (idmap,
 * dentry, attr) since ("security: Align inode_setattr hook definition with
 * EVM", include/linux/lsm_hook_defs.h), so they are read
 * by position from the end (bpf_get_func_arg(), bpf_get_func_arg_cnt()),
 * as numbers, and the earlier verdict with bpf_get_func_ret() (for an LSM
 * program the helper reads the slot after the arguments, ctx[nr_args]; the
 * verifier inlines it only for fexit and fmod_ret programs).
 */
#define ATTR_MODE 1U

SEC("lsm/inode_setattr")
int BPF_PROG(inode_setattr)
{
	__u64 n, d = 0, a = 0, r = 0, cgid;
	__u32 sbx;
	int eperm;

	/*
	 * An earlier verdict, or no slot to read (none: the hook has 2 or 3
	 * arguments): -EPERM. Not pass_on(): narrowed from the 64-bit slot, the
	 * value it returned was unbounded in its upper half for the 6.12
	 * verifier's [-4095, 0] check (seen in the load log on Debian 13).
	 */
	if (bpf_get_func_ret(ctx, &r) || r != 0)
		return -EPERM;
	ONLY_SANDBOXED_AS(0, cgid, sbx);
	n = bpf_get_func_arg_cnt(ctx);
	if (!(sbx & SBX_DIRS) || n < 2)
		return 0;
	if (bpf_get_func_arg(ctx, n - 2, &d) || bpf_get_func_arg(ctx, n - 1, &a) || !d || !a)
		return -EPERM;
	if (!(BPF_CORE_READ((struct iattr *)a, ia_valid) & ATTR_MODE))
		return 0;
	if ((BPF_CORE_READ((struct dentry *)d, d_inode, i_mode) & S_IFMT) != S_IFDIR)
		return 0;
	/*
	 * -EPERM made opaque: `walk_denied() ? -EPERM : 0` was folded into a
	 * negation of the walk's answer, which the 6.12 verifier does not bound
	 * (R0 not in [-4095, 0], seen in the load log; see file_fcntl).
	 */
	eperm = -EPERM;
	barrier_var(eperm);
	if (walk_denied(cgid, d, 0))
		return eperm;
	return 0;
}

/*
 * ioctl numbers from include/uapi/linux/btrfs.h and include/uapi/linux/fs.h
 * (_IOW encodes the argument's size, so a number can differ between the
 * 64-bit and the 32-bit ABI).
 * - btrfs snapshots copy every file of a subvolume into a new subvolume (new
 *   key, same bytes) without opening them, and users may snapshot
 *   subvolumes they own: _IOW(0x94, 1 / 23, 4096-byte args), the same size
 *   on every ABI, and btrfs_compat_ioctl() passes them on unchanged.
 * - FS_IOC_SETFLAGS sets FS_CASEFOLD_FL, which makes an empty directory
 *   case-insensitive (ext4, F2FS): _IOW('f', 2, long), whose 32-bit number
 *   FS_IOC32_SETFLAGS is _IOW('f', 2, int).
 */
#define BTRFS_IOC_SNAP_CREATE 0x50009401U
#define BTRFS_IOC_SNAP_CREATE_V2 0x50009417U
#define FS_IOC_SETFLAGS 0x40086602U
#define FS_IOC32_SETFLAGS 0x40046602U
/*
 * Side doors II: terminal input injection and SIGIO owners, numbers from
 * include/uapi/asm-generic/ioctls.h and include/uapi/linux/sockios.h (not
 * size-encoded: the same on every ABI). TIOCSTI pushes bytes into a
 * terminal's input queue, which the user's shell then reads as typed
 * (tiocsti() in drivers/tty/tty_io.c); TIOCLINUX's TIOCL_PASTESEL does the
 * same with the console selection. FIOSETOWN and SIOCSPGRP are the ioctl
 * forms of F_SETOWN (do_vfs_ioctl(), sock_ioctl()): their argument is a
 * pointer another thread could change after a check, so both are refused.
 */
#define TIOCSTI 0x5412U
#define TIOCLINUX 0x541CU
#define FIOSETOWN 0x8901U
#define SIOCSPGRP 0x8902U

/*
 * May a sandboxed task not issue `cmd` on `file`? Snapshots, TIOCSTI,
 * TIOCLINUX, FIOSETOWN and SIOCSPGRP never; inode
 * flags not on directories (the file's own flags, such as chattr +i, are
 * inert for reading). The flags are refused whatever the argument: a value
 * read here could be changed by another thread before the kernel copies it.
 */
static __always_inline bool ioctl_refused(struct file *file, unsigned int cmd)
{
	switch (cmd) {
	case BTRFS_IOC_SNAP_CREATE:
	case BTRFS_IOC_SNAP_CREATE_V2:
	case TIOCSTI:
	case TIOCLINUX:
	case FIOSETOWN:
	case SIOCSPGRP:
		return true;
	case FS_IOC_SETFLAGS:
	case FS_IOC32_SETFLAGS:
		return (file->f_inode->i_mode & S_IFMT) == S_IFDIR;
	default:
		return false;
	}
}

/* The shared body of both ioctl entry points. */
static __always_inline int ioctl_check(struct file *file, unsigned int cmd, int ret)
{
	__u64 cgid;

	if (ret != 0)
		return pass_on(ret);
	if (!ioctl_refused(file, cmd))
		return 0;
	cgid = bpf_get_current_cgroup_id();
	if (!in_sandbox(cgid))
		return 0;
	return -EPERM;
}

/* ioctl(2) of a 64-bit task: security_file_ioctl() in fs/ioctl.c. */
SEC("lsm/file_ioctl")
int BPF_PROG(file_ioctl, struct file *file, unsigned int cmd, unsigned long arg, int ret)
{
	return ioctl_check(file, cmd, ret);
}

/*
 * ioctl(2) of a 32-bit task: compat_sys_ioctl() calls
 * security_file_ioctl_compat() instead ("lsm: new
 * security_file_ioctl_compat() hook", mainline 6.8, in the 6.1 and 6.6
 * stable series). The daemon loads this program only where the kernel's
 * BTF has the hook (bpf_lsm_file_ioctl_compat).
 */
SEC("lsm/file_ioctl_compat")
int BPF_PROG(file_ioctl_compat, struct file *file, unsigned int cmd, unsigned long arg, int ret)
{
	return ioctl_check(file, cmd, ret);
}

/* Room for allowed sockets, shared by all sandboxes (a few per user). */
#define SOCK_ALLOW_MAX 65536

/*
 * {sandbox cgroup id, file key (kind 0) of a bound socket's inode} -> 1: a
 * socket this sandbox may connect and send to although a process of the same
 * uid made it outside (see "Side doors I" below). Written by
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

struct drop_ctx {
	struct file_key file;
};

static long drop_key(struct bpf_map *map, __u64 *cgid, __u8 *value, struct drop_ctx *ctx)
{
	struct deny_key dk = {};
	__u32 zero = 0;
	__u64 *count;

	dk.cgid = *cgid;
	dk.file = ctx->file;
	if (bpf_map_delete_elem(&deny_map, &dk) == 0) {
		count = bpf_map_lookup_elem(&dropped_keys, &zero);
		if (count)
			__sync_fetch_and_add(count, 1);
	}
	/*
	 * Directory-entry and exception marks of a freed directory or file
	 * (KIND_DIR_BASE .. KIND_EXC_USER), so a new inode reusing the number
	 * is not covered by mistake. Not counted: the daemon rewrites only
	 * KIND_OPEN keys after a drop, and a lost mark of a freed inode is
	 * never needed again.
	 */
	for (__u32 kind = AGENT_SANDBOX_KIND_DIR_BASE; kind <= AGENT_SANDBOX_KIND_EXC_USER; kind++) {
		dk.file.kind = kind;
		bpf_map_delete_elem(&deny_map, &dk);
	}
	return 0;
}

/* The sock_allow key of sandbox `*cgid` for the freed socket inode in `ctx`, if any. */
static long drop_sock(struct bpf_map *map, __u64 *cgid, __u8 *value, struct drop_ctx *ctx)
{
	struct deny_key dk = {};

	dk.cgid = *cgid;
	dk.file = ctx->file;
	bpf_map_delete_elem(&sock_allow, &dk);
	return 0;
}

/*
 * Called from __destroy_inode() for every inode the kernel frees (fs/inode.c).
 * With i_nlink == 0 the file is gone for good (no name, no open file), and
 * its inode number may be reused at once: drop its keys from every sandbox.
 * An inode merely evicted from the cache still has links and keeps its keys.
 * A bound socket's file (S_IFSOCK on the socket's filesystem; its inode is
 * freed once the file is removed and the socket that holds its path,
 * unix_sock.path, is closed) also loses its sock_allow keys: ext4 and XFS
 * hand a freed inode number to the next file made in the same group, so
 * another daemon's socket could otherwise be reached as the allowed one.
 * The sockets of sockfs (socket(2)) keep i_nlink 1 (inode_init_always())
 * and leave at the first test.
 */
SEC("lsm/inode_free_security")
int BPF_PROG(inode_free_security, struct inode *inode)
{
	struct drop_ctx drop = {};
	struct memo_key mk = {};
	bool sock, listed;

	/* Before the inode's memory can hold another directory's inode. */
	if (walk_memo_store == MEMO_HASH && (inode->i_mode & S_IFMT) == S_IFDIR) {
		bpf_probe_read_kernel(&mk.inode, sizeof(mk.inode), &inode);
		mk.ino = inode->i_ino;
		bpf_map_delete_elem(&walk_memo_hash, &mk);
	}
	if (inode->i_nlink != 0)
		return 0;
	sock = (inode->i_mode & S_IFMT) == S_IFSOCK;
	listed = filter_has(inode->i_ino, AGENT_SANDBOX_FILTER_TAG_FILE);
	if (!sock && !listed)
		return 0;
	fill_key(&drop.file, inode);
	if (sock)
		bpf_for_each_map_elem(&agent_cgid_set, drop_sock, &drop, 0);
	if (listed)
		bpf_for_each_map_elem(&agent_cgid_set, drop_key, &drop, 0);
	return 0;
}

/*
 * Side doors II (issue 15): the user's other processes and terminal.
 *
 * A task outside the sandbox, of the same user, may hold or have read the
 * bytes of a listed file: a `cat key | ssh-add -` pipeline (the pipe's
 * buffer), a process with the file's contents in its memory, the user's
 * shell on the agent's terminal. A sandboxed task may not reach into such a
 * task:
 * - ptrace_access_check: no ptrace access of any mode (attach or read) to a
 *   task outside its own sandbox cgroup. Read mode guards reopening its
 *   descriptors (/proc/<pid>/fd/N: proc_fd_link() after
 *   proc_fd_access_allowed(); map_files), its environ, maps, auxv, io,
 *   fdinfo, ns/, cwd, root and exe, and the code and stack fields of its
 *   stat (do_task_stat(): `permitted`); status, stat, statm and cmdline,
 *   what ps, pgrep and top read, need no such check (fs/proc/base.c, array.c).
 * - task_kill: no signal (check_kill_permission() in kernel/signal.c) to a
 *   task outside its sandbox: SIGSEGV after a raised RLIMIT_CORE dumps the
 *   target's memory to a core file the agent could read. Signal 0 delivers
 *   nothing and stays allowed.
 * - file_fcntl: F_SETOWN only to itself, its process group or 0, no F_SETSIG
 *   or F_SETOWN_EX: SIGIO (and, after F_SETSIG, any signal) is sent to the
 *   file's owner when I/O is ready, with no task_kill check at delivery
 *   (send_sigio() in fs/fcntl.c), and there the hook cannot tell who set
 *   the owner.
 * - task_setrlimit: no change of an outside task's limits (prlimit(2):
 *   do_prlimit() in kernel/sys.c).
 * - file_open (proc_write_refused()): no write-open of an outside task's
 *   /proc/<pid>/ files, such as coredump_filter (owner-writable, no ptrace
 *   check: proc_coredump_filter_write()), oom_score_adj and clear_refs.
 * - ioctl_refused(): TIOCSTI and TIOCLINUX (see there).
 * setpriority(2), ioprio_set(2) and sched_setaffinity(2) of outside tasks
 * stay allowed (task_setnice, task_setioprio, task_setscheduler): they change
 * when a task runs, not what it reads or where its bytes go.
 * Each hook is inert outside sandboxes: one cgroup lookup (or a compare of
 * its command first), then return.
 */

/* The cgroup v2 id of task `t` (a BTF pointer walk; a NULL on the way reads as 0). */
static __always_inline __u64 task_cgid(struct task_struct *t)
{
	return t->cgroups->dfl_cgrp->kn->id;
}

/*
 * The verdict of the hooks that act on another task `t`, for an earlier
 * verdict `ret`: a sandboxed caller may act only on tasks of its own
 * sandbox cgroup; others are not judged (one cgroup lookup).
 */
static __always_inline int other_task_check(struct task_struct *t, int ret)
{
	__u64 cgid;

	ONLY_SANDBOXED(ret, cgid);
	return task_cgid(t) != cgid ? -EPERM : 0;
}

/* __ptrace_may_access() does not call the hook for the caller's own thread group. */
SEC("lsm/ptrace_access_check")
int BPF_PROG(ptrace_access_check, struct task_struct *child, unsigned int mode, int ret)
{
	return other_task_check(child, ret);
}

/*
 * `cred` is NULL for a signal sent by the current task; a non-NULL one comes
 * from kill_pid_usb_asyncio(), in interrupt context, where the current task
 * is not the sender (the URB's submitter set it up for itself). It is read
 * as a number with bpf_get_func_arg(): the 6.12 verifier types a hook's
 * pointer arguments as trusted, never NULL, so a test of `cred` itself is
 * taken as always true and everything after it dropped as dead code (seen
 * in `bpftool prog dump xlated` on Debian 13: the program returned 0 for
 * every signal). 6.1 keeps the test.
 */
SEC("lsm/task_kill")
int BPF_PROG(task_kill, struct task_struct *p, struct kernel_siginfo *info, int sig,
	     const struct cred *cred, int ret)
{
	__u64 sender_cred = 0;

	if (ret != 0)
		return pass_on(ret);
	if (sig == 0)
		return 0;
	/* Argument 3 is `cred`; an error (none: the hook has 4) leaves 0: checked, fail closed. */
	bpf_get_func_arg(ctx, 3, &sender_cred);
	if (sender_cred != 0)
		return 0;
	return other_task_check(p, 0);
}

SEC("lsm/task_setrlimit")
int BPF_PROG(task_setrlimit, struct task_struct *p, unsigned int resource, struct rlimit *new_rlim,
	     int ret)
{
	return other_task_check(p, ret);
}

/* include/uapi/asm-generic/fcntl.h, include/uapi/linux/fcntl.h */
#define F_SETOWN 8U
#define F_SETSIG 10U
#define F_SETOWN_EX 15U

/*
 * Is `who`, F_SETOWN's argument (a pid, or minus a process group id, in the
 * caller's pid namespace), the caller itself, its own process group or 0
 * (no owner)? Compared with the numbers of the initial pid namespace: in a
 * pid namespace of its own the caller's other numbers are refused, which is
 * strict, never loose (such a namespace holds only its descendants).
 */
static __always_inline bool owner_is_self(int who)
{
	struct task_struct *cur;
	long long pgid;

	if (who == 0)
		return true;
	if (who > 0)
		return (__u32)who == (__u32)(bpf_get_current_pid_tgid() >> 32);
	cur = bpf_get_current_task_btf();
	pgid = BPF_CORE_READ(cur, signal, pids[PIDTYPE_PGID], numbers[0].nr);
	return pgid != 0 && -(long long)who == pgid;
}

/* fcntl(2), 64- and 32-bit: security_file_fcntl() in fs/fcntl.c, before do_fcntl(). */
SEC("lsm/file_fcntl")
int BPF_PROG(file_fcntl, struct file *file, unsigned int cmd, unsigned long arg, int ret)
{
	__u64 cgid;

	if (ret != 0)
		return pass_on(ret);
	if (cmd != F_SETOWN && cmd != F_SETSIG && cmd != F_SETOWN_EX)
		return 0;
	cgid = bpf_get_current_cgroup_id();
	if (!in_sandbox(cgid))
		return 0;
	/*
	 * F_SETOWN_EX's argument is a pointer: a value read here could change
	 * before do_fcntl(). Written as two returns of constants: a form the
	 * compiler folded into -in_sandbox() was refused by the 6.12 verifier
	 * (R0 not in [-4095, 0]; it does not bound a negation).
	 */
	if (cmd == F_SETOWN && owner_is_self((int)arg))
		return 0;
	return -EPERM;
}

/*
 * Is `file` (being opened by sandbox `cgid`) a /proc/<pid>/ file opened for
 * writing whose task is outside the sandbox? The task is PROC_I(inode)->pid's
 * (proc_pid() in fs/proc/internal.h), found through pid->tasks[PIDTYPE_PID]
 * (pid_task() in kernel/pid.c), every field by probe read. A /proc file of
 * no task (/proc/sys, ...) is not concerned; a task that has gone makes the
 * write fail anyway (ESRCH). Without struct proc_inode in the kernel's BTF
 * every write-open under /proc is refused (fail closed).
 */
static __always_inline bool proc_write_refused(__u64 cgid, struct file *file)
{
	struct inode *inode = file->f_inode;
	struct proc_inode *pi;
	struct hlist_node *first;
	struct task_struct *t;
	struct pid *pid;

	if (!(file->f_mode & FMODE_WRITE) || inode->i_sb->s_magic != PROC_SUPER_MAGIC)
		return false;
	if (!bpf_core_type_exists(struct proc_inode))
		return true;
	pi = (void *)inode - bpf_core_field_offset(struct proc_inode, vfs_inode);
	pid = BPF_CORE_READ(pi, pid);
	if (!pid)
		return false;
	first = BPF_CORE_READ(pid, tasks[PIDTYPE_PID].first);
	if (!first)
		return false;
	t = (void *)first - bpf_core_field_offset(struct task_struct, pid_links);
	return BPF_CORE_READ(t, cgroups, dfl_cgrp, kn, id) != cgid;
}


/*
 * ==== Side doors I (issue 14): the user's own daemons, passed descriptors ====
 *
 * The file hooks judge the task that opens. Whatever a sandboxed task gets a
 * process outside its sandbox to open for it runs unconfined, so:
 *
 * - lsm/unix_stream_connect (stream and seqpacket connect(2):
 *   unix_stream_connect() in net/unix/af_unix.c calls
 *   security_unix_stream_connect(sk, other, newsk)) and lsm/unix_may_send
 *   (a datagram's send or connect: unix_dgram_sendmsg() and
 *   unix_dgram_connect() call security_unix_may_send()) refuse a sandboxed
 *   task a Unix socket, path or abstract, whose owner (sk_uid, the creator's
 *   fsuid: sock_init_data()) is the caller's uid and that was not created
 *   in the caller's sandbox cgroup (sk_cgrp_data, set by cgroup_sk_alloc()
 *   from sk_alloc() in the creating task's context; a socket of a kernel
 *   without it counts as outside). The judged socket is the listening or
 *   receiving one: the server end of a new stream connection is created in
 *   the connecting task's context and says nothing. Other uids' sockets
 *   (journald, the system bus, NSS daemons, the daemon's own) stay allowed;
 *   so do bound sockets the daemon put in sock_allow (`socket` list lines)
 *   while their inode lives (inode_free_security drops the keys of a freed
 *   one).
 * - lsm/file_receive (__receive_fd() in fs/file.c: SCM_RIGHTS, pidfd_getfd,
 *   seccomp addfd) refuses a sandboxed task a descriptor of a file it could
 *   not open itself (file_refused(), the file_open decision).
 * All are inert outside sandboxes: one cgroup lookup, then return.
 */

/* sock_allow (the allowed sockets) is defined before inode_free_security, which drops its keys. */

/* The cgroup v2 id of the task that created `sk`; 0 if unknown. */
static __always_inline __u64 sock_creator_cgid(struct sock *sk)
{
	if (!bpf_core_field_exists(struct sock, sk_cgrp_data))
		return 0;
	return BPF_CORE_READ(sk, sk_cgrp_data.cgroup, kn, id);
}

/* Is the socket bound at the path of Unix socket `sk` in sock_allow for `cgid`? */
static __always_inline bool sock_allowed(__u64 cgid, struct sock *sk)
{
	struct deny_key k = {};
	struct inode *inode;

	inode = BPF_CORE_READ((struct unix_sock *)sk, path.dentry, d_inode);
	if (!inode)
		return false; /* abstract or unbound: no name to allow */
	k.cgid = cgid;
	k.file.ino = BPF_CORE_READ(inode, i_ino);
	k.file.dev = BPF_CORE_READ(inode, i_sb, s_dev);
	k.file.subvol = subvol_from(inode, BPF_CORE_READ(inode, i_sb, s_magic));
	return bpf_map_lookup_elem(&sock_allow, &k) != NULL;
}

/* The verdict on sandbox `cgid` reaching Unix socket `other` (listening or receiving). */
static __always_inline int sock_verdict(__u64 cgid, struct sock *other)
{
	__u32 uid = (__u32)bpf_get_current_uid_gid();

	if (!other)
		return -EPERM; /* cannot happen; fail closed */
	if (BPF_CORE_READ(other, sk_uid.val) != uid)
		return 0;
	if (sock_creator_cgid(other) == cgid)
		return 0;
	if (sock_allowed(cgid, other))
		return 0;
	return -EPERM;
}

SEC("lsm/unix_stream_connect")
int BPF_PROG(unix_stream_connect, struct sock *sock, struct sock *other, struct sock *newsk,
	     int ret)
{
	__u64 cgid;

	ONLY_SANDBOXED(ret, cgid);
	return sock_verdict(cgid, other);
}

SEC("lsm/unix_may_send")
int BPF_PROG(unix_may_send, struct socket *sock, struct socket *other, int ret)
{
	__u64 cgid;

	ONLY_SANDBOXED(ret, cgid);
	return sock_verdict(cgid, BPF_CORE_READ(other, sk));
}

SEC("lsm/file_receive")
int BPF_PROG(file_receive, struct file *file, int ret)
{
	__u64 cgid;
	__u32 sbx;

	ONLY_SANDBOXED_AS(ret, cgid, sbx);
	if (file_refused(cgid, sbx, file))
		return -EPERM;
	return 0;
}
/* ==== end of side doors I ==== */

/*
 * ==== Mounts in the user's own mount namespace (issue 23) ====
 * A sandboxed task may not mount, move a mount or unmount in a mount
 * namespace owned by the initial user namespace: the user's own (or one
 * only root makes, which the user's other processes may share). An
 * unprivileged user mounts there only through a setuid helper, fusermount3
 * (a FUSE filesystem of the agent's at ~/.aws or over ~/.ssh/, where the
 * user's later `aws configure` or `ssh-keygen` writes land in the agent's
 * filesystem) or mount(8) with a `user` line of fstab; the helper stays in
 * the caller's cgroup, which is what the hook judges. A mount namespace of
 * the agent's own user namespace (`unshare -Urm`) is owned by that user
 * namespace (level > 0) and keeps every mount: its mounts do not propagate
 * back (copy_mnt_ns() makes shared mounts slaves, CL_SHARED_TO_SLAVE, in a
 * namespace of a less privileged owner), so outside processes never see
 * them. The namespace judged is the caller's: mount(2), move_mount(2) and
 * umount(2) act only in it (check_mnt() in fs/namespace.c).
 *   - sb_mount: every mount(2) (new, bind, move, remount, propagation),
 *     from path_mount() before it acts (fs/namespace.c);
 *   - move_mount: move_mount(2), which attaches open_tree() and fsmount()
 *     mounts, and moves mounts (since 5.2);
 *   - sb_umount: umount(2), umount2(2) (do_umount()).
 * Signatures: include/linux/lsm_hook_defs.h, the same in 6.1 and 6.12.
 */

/* Whether the current task's mount namespace is owned by the initial user namespace (a NULL on the way: yes). */
static __always_inline bool in_initial_mount_owner(void)
{
	struct task_struct *t = bpf_get_current_task_btf();

	return t->nsproxy->mnt_ns->user_ns->level == 0;
}

/* The verdict of the mount hooks, for an earlier verdict `ret`. */
static __always_inline int mount_check(int ret)
{
	__u64 cgid;

	ONLY_SANDBOXED(ret, cgid);
	return in_initial_mount_owner() ? -EPERM : 0;
}

SEC("lsm/sb_mount")
int BPF_PROG(sb_mount, const char *dev_name, const struct path *path, const char *type,
	     unsigned long flags, void *data, int ret)
{
	return mount_check(ret);
}

SEC("lsm/move_mount")
int BPF_PROG(move_mount, const struct path *from_path, const struct path *to_path, int ret)
{
	return mount_check(ret);
}

SEC("lsm/sb_umount")
int BPF_PROG(sb_umount, struct vfsmount *mnt, int flags, int ret)
{
	return mount_check(ret);
}
/* ==== end of mounts ==== */
