/* SPDX-License-Identifier: GPL-2.0 */
/*
 * File keys and their lookups: untrusted views (sb_of(), file_view()), an
 * inode's key {s_dev, i_ino, btrfs subvolume} (fill_key(), subvol_from()),
 * the key_filter bitmap (filter_has()), whether an inode or a name is listed (deny_map, name_map) or marked (deny_map keys
 * of another kind: PATH, LISTED_DIR, ...) for a sandbox, name_refused() with
 * its case-insensitive directories, and open_denied(): steps 3 and 4 of the
 * decision for an open (agent_sandbox.bpf.c).
 * Uses: maps.bpf.h. Hooks: none.
 */
#ifndef AGENT_SANDBOX_KEYS_BPF_H
#define AGENT_SANDBOX_KEYS_BPF_H

/*
 * A read-only, untrusted view of a BTF-typed kernel object: kernel/bpf/
 * helpers.c, a kfunc since 6.2, which the verifier replaces by a register
 * move (fixup_kfunc_call()), so it costs an open nothing there. Weak: on a
 * kernel without it libbpf turns the call into one the verifier refuses if
 * reached; sb_of() never reaches it there.
 */
extern void *bpf_rdonly_cast(const void *obj, __u32 btf_id) __ksym __weak;

/*
 * inode->i_sb, loaded through an untrusted view of `inode` where the kernel
 * has open-coded iterators (6.4 and later; a CO-RE test, a constant after
 * relocation, so 6.1 verifies only the plain load). Why: since trusted
 * pointers may be walked (BTF_TYPE_SAFE_TRUSTED in kernel/bpf/verifier.c),
 * every load of a pointer field through a trusted pointer (an LSM hook's
 * argument, file->f_inode, dentry->d_inode) makes check_ptr_to_btf_access()
 * look up to four "<struct>__safe_..." names in vmlinux's BTF
 * (btf_nested_type_is_trusted()), and on 6.12 btf_find_by_name_kind() does
 * that by a linear search of all of vmlinux's types, at each visit of the load.
 * In a 6.12 guest that search was 62 % of the daemon's full load (perf);
 * with the superblock loaded through the view a full load took 26 s instead
 * of 50 s. The superblock is only read (s_magic, s_dev), never passed to a
 * helper, which would refuse an untrusted pointer.
 */
/*
 * untrusted_view(p): `p` (a pointer to a kernel struct) as an untrusted
 * pointer of the same type where the kernel has open-coded iterators, else
 * `p` itself. For plain reads only: see sb_of() for why.
 */
#define untrusted_view(p)                                                                 \
	(bpf_core_type_exists(struct bpf_iter_num)                                        \
		 ? (typeof(p))bpf_rdonly_cast(p, bpf_core_type_id_kernel(typeof(*(p)))) \
		 : (p))

static __always_inline struct super_block *sb_of(struct inode *inode)
{
	return untrusted_view(inode)->i_sb;
}

/*
 * An untrusted view of file `file` (an LSM hook's trusted argument), as
 * sb_of() makes one of an inode: the open decision reads the file's inode
 * and dentry through it, so the 6.4+ verifier looks up no names for each
 * visit of those loads. Only the walk memos' inode-storage lookups need a
 * directory inode reached from the trusted `file` (a helper refuses an
 * untrusted pointer): path_walk_denied() and write_open_refused() load
 * theirs from `file` itself.
 */
static __always_inline struct file *file_view(struct file *file)
{
	return untrusted_view(file);
}

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
	return subvol_from(inode, sb_of(inode)->s_magic);
}

static __always_inline void fill_key(struct file_key *k, struct inode *inode)
{
	k->ino = inode->i_ino;
	k->dev = sb_of(inode)->s_dev;
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
	magic = sb_of(dir)->s_magic;
	return magic != EXT4_SUPER_MAGIC && magic != F2FS_SUPER_MAGIC;
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
	return sb_of(dir)->s_magic == XFS_SUPER_MAGIC &&
	       key_marked(cgid, &dk, AGENT_SANDBOX_KIND_FOLDING_DIR);
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
static __always_inline bool name_refused(__u64 cgid, struct inode *dir, struct dentry *dentry,
					 bool folding)
{
	if (!dir || !dentry || !filter_has(dir->i_ino, AGENT_SANDBOX_FILTER_TAG_DIR))
		return false;
	return name_refused_in(cgid, dir, dentry, folding);
}

/*
 * Steps 3 and 4 of the decision for an open: the inode, then its name. A
 * backing file opened by overlayfs carries the overlay's path (6.1:
 * open_with_fake_path()) with the real inode; its name is then checked on
 * the real inode's first alias, so an overlay mounted in a user namespace
 * over a listed directory cannot hide a replaced file's name.
 */
/*
 * open_denied()'s `bits`: key_filter had the file's inode (FILTER_TAG_FILE),
 * its parent (FILTER_TAG_DIR); the file's dentry is its inode's
 * (f_path.dentry->d_inode == f_inode: not an overlayfs backing file opened
 * with the overlay's path), so the callers need not load both again.
 */
#define BIT_FILE 1U
#define BIT_DIR 2U
#define BIT_OWN 4U

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
		*bits |= BIT_OWN;
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

#endif /* AGENT_SANDBOX_KEYS_BPF_H */
