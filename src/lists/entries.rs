//! The domain's values: the keys the LSM hook compares (a file's
//! {s_dev, i_ino, subvolume} with the kind of entry it is, a directory's key
//! plus a name) and the set of them a sandbox denies. No I/O: the resolver
//! (src/resolve/keys.rs) makes them, the BPF layer (src/kernel/sandboxes.rs) writes them, the
//! record (src/daemon/record.rs) digests them.

/// What the hook reads from an inode (`struct file_key` in
/// src/bpf/agent_sandbox.h), with what a deny_map entry for it says.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FileKey {
    /// `i_sb->s_dev` in kernel encoding (see [`kernel_dev`]).
    pub dev: u32,
    /// `i_ino`.
    pub ino: u64,
    /// btrfs subvolume (tree) id; 0 on other filesystems.
    pub subvol: u64,
    /// [`KIND_OPEN`], [`KIND_PATH`] or [`KIND_LISTED_DIR`]; always
    /// [`KIND_OPEN`] (0) in a [`NameKey`]'s directory.
    pub kind: u32,
}

/// `AGENT_SANDBOX_KIND_OPEN` (agent_sandbox.h): the inode may not be opened.
pub const KIND_OPEN: u32 = 0;
/// `AGENT_SANDBOX_KIND_PATH`: a directory or symlink on the way to a listed
/// name, which a sandbox may not remove, rename or replace.
pub const KIND_PATH: u32 = 1;
/// `AGENT_SANDBOX_KIND_LISTED_DIR`: the directory holding a listed name (also
/// on the way); if it is case-insensitive, a sandbox may open, create, link
/// or rename nothing in it.
pub const KIND_LISTED_DIR: u32 = 2;
/// `AGENT_SANDBOX_KIND_FOLDING_DIR`: a directory holding a listed name that
/// `case_insensitive()` (src/resolve/keys.rs) found case-insensitive, for filesystems where the
/// hook cannot tell by itself (XFS ASCII-ci).
pub const KIND_FOLDING_DIR: u32 = 3;
/// `AGENT_SANDBOX_KIND_DIR_BASE`: a directory entry (`DIR/`) of the base
/// list, on the directory's key (deny_map) or on its parent's key with its
/// name (name_map): every non-directory below it is denied.
pub const KIND_DIR_BASE: u32 = 4;
/// `AGENT_SANDBOX_KIND_DIR_USER`: the same for the user's list.
pub const KIND_DIR_USER: u32 = 5;
/// `AGENT_SANDBOX_KIND_EXC_BASE`: an exception (`!PATH`, `!DIR/`) of the
/// base list: re-allows what the base list's directory entries deny.
pub const KIND_EXC_BASE: u32 = 6;
/// `AGENT_SANDBOX_KIND_EXC_USER`: the same for the user's list.
pub const KIND_EXC_USER: u32 = 7;
/// `AGENT_SANDBOX_KIND_HAS_DIRS`: on the all-zero key, the sandbox has
/// directory entries (the hook walks only then).
pub const KIND_HAS_DIRS: u32 = 8;
/// `AGENT_SANDBOX_KIND_AUDIT`: an audit entry (`audit PATH`) on a file's key
/// and as the kind of the directory key of its name: an open it matches is
/// allowed and reported as "would deny".
pub const KIND_AUDIT: u32 = 9;
/// `AGENT_SANDBOX_KIND_AUDIT_DIR_BASE`: an audit directory entry
/// (`audit DIR/`) of the base list, placed as [`KIND_DIR_BASE`] is.
pub const KIND_AUDIT_DIR_BASE: u32 = 10;
/// `AGENT_SANDBOX_KIND_AUDIT_DIR_USER`: the same for the user's list.
pub const KIND_AUDIT_DIR_USER: u32 = 11;
/// `AGENT_SANDBOX_KIND_HAS_AUDIT`: on the all-zero key, the sandbox has
/// audit entries (file_open looks for them only then).
pub const KIND_HAS_AUDIT: u32 = 12;

/// `AGENT_SANDBOX_KIND_RO`: a read-only entry (`readonly PATH`) on a file's
/// key and as the kind of the directory key of its name: the sandbox may
/// read the file, not change it.
pub const KIND_RO: u32 = 13;
/// `AGENT_SANDBOX_KIND_RO_DIR_BASE`: a read-only directory entry
/// (`readonly DIR/`) of the base list (and the user's own lists' directory,
/// always), placed as [`KIND_DIR_BASE`] is.
pub const KIND_RO_DIR_BASE: u32 = 14;
/// `AGENT_SANDBOX_KIND_RO_DIR_USER`: the same for the user's list.
pub const KIND_RO_DIR_USER: u32 = 15;
/// `AGENT_SANDBOX_KIND_HAS_RO`: on the all-zero key, the sandbox has
/// read-only entries (the write hooks walk only then).
pub const KIND_HAS_RO: u32 = 16;

/// `AGENT_SANDBOX_KIND_RO_DIR_OWN`: the user's own lists' directory,
/// read-only always, when nothing below it is a directory (the write hooks
/// then walk two levels, not to the root).
pub const KIND_RO_DIR_OWN: u32 = 17;
/// `AGENT_SANDBOX_KIND_HAS_RO_DIRS`: on the all-zero key, the sandbox has
/// `KIND_RO_DIR_BASE`/`_USER` marks (the write hooks walk to the root).
pub const KIND_HAS_RO_DIRS: u32 = 18;

/// `AGENT_SANDBOX_KIND_PAT_BASE`: a name pattern of the base list
/// (`**/NAME`, `DIR/NAME` with `*` or `?`), as the kind of a name key whose
/// directory is the pattern's scope (all zero for every directory) and
/// whose name is [`crate::lists::pattern::key_name`] of its hash.
pub const KIND_PAT_BASE: u32 = 19;
/// `AGENT_SANDBOX_KIND_PAT_USER`: the same for the user's list.
pub const KIND_PAT_USER: u32 = 20;
/// `AGENT_SANDBOX_KIND_PAT_EXC_BASE`: a pattern exception (`!**/NAME`) of
/// the base list: re-allows what the base list's patterns deny, and, at the
/// file's own level, its directory entries.
pub const KIND_PAT_EXC_BASE: u32 = 21;
/// `AGENT_SANDBOX_KIND_PAT_EXC_USER`: the same for the user's list.
pub const KIND_PAT_EXC_USER: u32 = 22;
/// `AGENT_SANDBOX_KIND_PAT_SHAPE`: a shape the sandbox's patterns use, as
/// the kind of a name key with the all-zero directory and the shape's text
/// ([`crate::lists::pattern::Shape`]) as its name.
pub const KIND_PAT_SHAPE: u32 = 23;
/// `AGENT_SANDBOX_KIND_HAS_PATTERNS`: on the all-zero key, the sandbox has
/// name patterns (the hooks match names only then).
pub const KIND_HAS_PATTERNS: u32 = 24;

/// `AGENT_SANDBOX_KIND_PAT_DEEP_BASE`: a deep name pattern of the base list
/// (`DIR/**/NAME`: NAME at any depth below DIR), as the kind of a name key
/// whose directory is DIR's key and whose name is the hash.
pub const KIND_PAT_DEEP_BASE: u32 = 25;
/// `AGENT_SANDBOX_KIND_PAT_DEEP_USER`: the same for the user's list.
pub const KIND_PAT_DEEP_USER: u32 = 26;
/// `AGENT_SANDBOX_KIND_PAT_DEEP_EXC_BASE`: a deep pattern exception of the
/// base list.
pub const KIND_PAT_DEEP_EXC_BASE: u32 = 27;
/// `AGENT_SANDBOX_KIND_PAT_DEEP_EXC_USER`: the same for the user's list.
pub const KIND_PAT_DEEP_EXC_USER: u32 = 28;
/// `AGENT_SANDBOX_KIND_DEEP_SCOPE`: on a deep pattern's DIR (deny_map): no
/// directory is moved across its edge from inside.
pub const KIND_DEEP_SCOPE: u32 = 29;
/// `AGENT_SANDBOX_KIND_HAS_DEEP`: on the all-zero key, the sandbox has deep
/// name patterns.
pub const KIND_HAS_DEEP: u32 = 30;

/// `AGENT_SANDBOX_KIND_PAT_PREFILTER`: a bit of the patterns' first test
/// a pattern of the sandbox needs, as the kind of a name key with the
/// all-zero directory ([`crate::lists::pattern::NamePattern::prefilter`]);
/// never looked up by the hooks.
pub const KIND_PAT_PREFILTER: u32 = 32;

/// `AGENT_SANDBOX_KIND_REPO_GUARD`: on the all-zero key, the sandbox has
/// the repository guard (the list line `readonly **/.git/`;
/// src/bpf/repo.bpf.h).
pub const KIND_REPO_GUARD: u32 = 31;

/// The key that says a sandbox has the repository guard ([`KIND_REPO_GUARD`]).
pub const REPO_GUARD_KEY: FileKey = FileKey {
    dev: 0,
    ino: 0,
    subvol: 0,
    kind: KIND_REPO_GUARD,
};

/// The key that says a sandbox has deep name patterns ([`KIND_HAS_DEEP`]).
pub const HAS_DEEP_KEY: FileKey = FileKey {
    dev: 0,
    ino: 0,
    subvol: 0,
    kind: KIND_HAS_DEEP,
};

/// Whether `kind` is a pattern kind that matches names ([`KIND_PAT_BASE`]
/// to [`KIND_PAT_EXC_USER`], [`KIND_PAT_DEEP_BASE`] to
/// [`KIND_PAT_DEEP_EXC_USER`]), not a shape.
pub fn is_pattern(kind: u32) -> bool {
    (KIND_PAT_BASE..=KIND_PAT_EXC_USER).contains(&kind) || is_deep_pattern(kind)
}

/// Whether `kind` is a deep pattern kind ([`KIND_PAT_DEEP_BASE`] to
/// [`KIND_PAT_DEEP_EXC_USER`]).
pub fn is_deep_pattern(kind: u32) -> bool {
    (KIND_PAT_DEEP_BASE..=KIND_PAT_DEEP_EXC_USER).contains(&kind)
}

/// The key that says a sandbox has name patterns ([`KIND_HAS_PATTERNS`]).
pub const HAS_PATTERNS_KEY: FileKey = FileKey {
    dev: 0,
    ino: 0,
    subvol: 0,
    kind: KIND_HAS_PATTERNS,
};

/// Whether `kind` is a read-only kind ([`KIND_RO`], `KIND_RO_DIR_*`).
pub fn is_ro(kind: u32) -> bool {
    (KIND_RO..=KIND_RO_DIR_USER).contains(&kind) || kind == KIND_RO_DIR_OWN
}

/// Whether file key `f` is a listed entry ([`DenySet::entries`]): a denied
/// file ([`KIND_OPEN`]) or a read-only one, not a mark on the way or an audit key.
pub fn is_entry_file(f: &FileKey) -> bool {
    f.kind == KIND_OPEN || is_ro(f.kind)
}

/// Whether name key `n` is a listed entry ([`DenySet::entries`]): any but
/// an audit one or a pattern's shape or prefilter bit.
pub fn is_entry_name(n: &NameKey) -> bool {
    !is_audit(n.dir.kind) && n.dir.kind != KIND_PAT_SHAPE && n.dir.kind != KIND_PAT_PREFILTER
}

/// Whether a name key of `kind` denies a read (a listed name, a directory
/// entry or exception by name): not an audit or read-only one.
pub fn denies_read(kind: u32) -> bool {
    !is_audit(kind) && !is_ro(kind) && kind != KIND_PAT_SHAPE && kind != KIND_PAT_PREFILTER
}

/// The read-only directory-entry kind of a list whose directory-entry kind
/// is `dir_kind` ([`KIND_DIR_BASE`] or [`KIND_DIR_USER`]).
pub fn ro_dir_kind(dir_kind: u32) -> u32 {
    if dir_kind == KIND_DIR_BASE {
        KIND_RO_DIR_BASE
    } else {
        KIND_RO_DIR_USER
    }
}

/// Whether `kind` is an audit kind ([`KIND_AUDIT`], `KIND_AUDIT_DIR_*`):
/// keys that refuse nothing.
pub fn is_audit(kind: u32) -> bool {
    (KIND_AUDIT..=KIND_AUDIT_DIR_USER).contains(&kind)
}

/// The audit directory-entry kind of a list whose directory-entry kind is
/// `dir_kind` ([`KIND_DIR_BASE`] or [`KIND_DIR_USER`]).
pub fn audit_dir_kind(dir_kind: u32) -> u32 {
    if dir_kind == KIND_DIR_BASE {
        KIND_AUDIT_DIR_BASE
    } else {
        KIND_AUDIT_DIR_USER
    }
}

/// The key that says a sandbox has directory entries ([`KIND_HAS_DIRS`]).
pub const HAS_DIRS_KEY: FileKey = FileKey {
    dev: 0,
    ino: 0,
    subvol: 0,
    kind: KIND_HAS_DIRS,
};

/// The key that says a sandbox has read-only entries ([`KIND_HAS_RO`]).
pub const HAS_RO_KEY: FileKey = FileKey {
    dev: 0,
    ino: 0,
    subvol: 0,
    kind: KIND_HAS_RO,
};

/// The key that says a sandbox has read-only directory entries that need
/// the whole walk ([`KIND_HAS_RO_DIRS`]).
pub const HAS_RO_DIRS_KEY: FileKey = FileKey {
    dev: 0,
    ino: 0,
    subvol: 0,
    kind: KIND_HAS_RO_DIRS,
};

/// The key that says a sandbox has audit entries ([`KIND_HAS_AUDIT`]).
pub const HAS_AUDIT_KEY: FileKey = FileKey {
    dev: 0,
    ino: 0,
    subvol: 0,
    kind: KIND_HAS_AUDIT,
};

impl FileKey {
    /// The same inode with another `kind`.
    pub fn with_kind(self, kind: u32) -> FileKey {
        FileKey { kind, ..self }
    }
}

/// "Whatever inode is linked as `name` in directory `dir`": the name part of
/// a listing, which keeps a replaced or re-created file denied.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct NameKey {
    /// The directory's key.
    pub dir: FileKey,
    /// One path component: 1 to [`NAME_MAX`] bytes, no `/` or NUL.
    pub name: Vec<u8>,
}

/// Which list a line is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ListOrigin {
    /// The administrator's base list (`/etc/agent-sandbox-exec/denylist`).
    Base,
    /// The user's own list (`~/.config/agent-sandbox-exec/denylist`).
    User,
}

/// One accepted line of a list as resolved for a uid: where it is, what it
/// asks, and the absolute path it names (`~/` joined with the home). What a
/// denial is traced back to ([`crate::policy::denials`]); its path is never
/// shown for the user's list (lines are named by number only).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ListEntry {
    /// The list.
    pub origin: ListOrigin,
    /// 1-based line number.
    pub line: u32,
    /// A directory entry (`DIR/`) rather than one file.
    pub dir: bool,
    /// An exception (`!PATH`, `!DIR/`).
    pub exception: bool,
    /// An audit entry (`audit PATH`, `audit DIR/`, or any entry of a list
    /// with an `audit all` line): reported, not enforced.
    pub audit: bool,
    /// A read-only entry (`readonly PATH`, `readonly DIR/`, or line 0 of
    /// the base list: the user's own lists, always): readable, not changed.
    pub readonly: bool,
    /// A name pattern (`**/NAME`, `DIR/NAME` with `*` or `?`): `path` is
    /// the line's pattern as written, `~/` joined.
    pub pattern: bool,
    /// The absolute path, without a trailing `/`.
    pub path: Vec<u8>,
    /// The file the line is in when the list includes it (`include PATH`);
    /// empty for a line of the list itself.
    pub file: Vec<u8>,
}

/// What one sandbox denies: file keys and directory + name pairs, each kept
/// sorted and free of duplicates, so that two sets compare in one merge
/// (no hashing: a no-change relaunch of 100,000 entries walks two sorted
/// vectors once).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct DenySet {
    files: Vec<FileKey>,
    names: Vec<NameKey>,
}

impl DenySet {
    /// A set of `files` and `names`, in any order and with repeats.
    pub fn new(mut files: Vec<FileKey>, mut names: Vec<NameKey>) -> DenySet {
        files.sort_unstable();
        files.dedup();
        names.sort_unstable();
        names.dedup();
        DenySet { files, names }
    }

    /// Inodes denied under any name, sorted.
    pub fn files(&self) -> &[FileKey] {
        &self.files
    }

    /// Names denied whatever inode they link to, sorted.
    pub fn names(&self) -> &[NameKey] {
        &self.names
    }

    /// Number of map entries this set takes.
    pub fn len(&self) -> usize {
        self.files.len() + self.names.len()
    }

    /// Number of listed entries: file keys of kind [`KIND_OPEN`] or a
    /// read-only kind, and names but audit ones; the marks on the way to the names ([`KIND_PATH`],
    /// ...) follow from the names and are not counted, and audit keys deny
    /// nothing. What messages to the user count.
    pub fn entries(&self) -> usize {
        self.files.iter().filter(|f| is_entry_file(f)).count()
            + self.names.iter().filter(|n| is_entry_name(n)).count()
    }

    /// Number of entries that deny a read: [`DenySet::entries`] without the
    /// read-only ones (which deny changes only). What "your lists deny
    /// nothing" and `--status` count.
    pub fn read_entries(&self) -> usize {
        self.files.iter().filter(|f| f.kind == KIND_OPEN).count()
            + self
                .names
                .iter()
                .filter(|n| denies_read(n.dir.kind))
                .count()
    }

    /// Whether the set is empty.
    pub fn is_empty(&self) -> bool {
        self.files.is_empty() && self.names.is_empty()
    }

    /// The entries of `self` that `other` lacks.
    pub fn minus(&self, other: &DenySet) -> DenySet {
        DenySet {
            files: merge(&self.files, &other.files, Merge::Minus),
            names: merge(&self.names, &other.names, Merge::Minus),
        }
    }

    /// (files, names) of `self.union(other)`, counted without building it.
    pub fn union_len(&self, other: &DenySet) -> (usize, usize) {
        (
            self.files.len() + not_in(&other.files, &self.files),
            self.names.len() + not_in(&other.names, &self.names),
        )
    }

    /// The entries of either set.
    pub fn union(&self, other: &DenySet) -> DenySet {
        DenySet {
            files: merge(&self.files, &other.files, Merge::Union),
            names: merge(&self.names, &other.names, Merge::Union),
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Merge {
    Minus,
    Union,
}

/// How many of `a` are not in the sorted slice `b`.
fn not_in<T: Ord>(a: &[T], b: &[T]) -> usize {
    a.iter().filter(|x| b.binary_search(x).is_err()).count()
}

/// One pass over two sorted, duplicate-free slices: `a` without `b`, or both.
fn merge<T: Ord + Clone>(a: &[T], b: &[T], how: Merge) -> Vec<T> {
    use std::cmp::Ordering::{Equal, Greater, Less};
    let mut out = Vec::with_capacity(if how == Merge::Union {
        a.len() + b.len()
    } else {
        a.len()
    });
    let (mut i, mut j) = (0, 0);
    while i < a.len() && j < b.len() {
        match a[i].cmp(&b[j]) {
            Less => {
                out.push(a[i].clone());
                i += 1;
            }
            Equal => {
                if how == Merge::Union {
                    out.push(a[i].clone());
                }
                i += 1;
                j += 1;
            }
            Greater => {
                if how == Merge::Union {
                    out.push(b[j].clone());
                }
                j += 1;
            }
        }
    }
    out.extend_from_slice(&a[i..]);
    if how == Merge::Union {
        out.extend_from_slice(&b[j..]);
    }
    out
}

/// Longest file name component (include/uapi/linux/limits.h: NAME_MAX).
pub const NAME_MAX: usize = 255;

/// Encodes a device number as the kernel stores it in `s_dev`:
/// `MAJOR << 20 | MINOR` (include/linux/kdev_t.h: MINORBITS = 20, MKDEV).
/// Majors above 4095 or minors above 2^20-1 cannot occur in `s_dev`; they are
/// masked like `MKDEV` would.
pub fn kernel_dev(major: u32, minor: u32) -> u32 {
    ((major & 0xfff) << 20) | (minor & 0xf_ffff)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deny_sets_sort_dedup_and_merge() {
        let f = |ino| FileKey {
            dev: 45,
            ino,
            subvol: 0,
            kind: KIND_OPEN,
        };
        let n = |ino, name: &[u8]| NameKey {
            dir: f(ino),
            name: name.to_vec(),
        };
        let a = DenySet::new(
            vec![f(3), f(1), f(3), f(2)],
            vec![n(9, b"b"), n(9, b"a"), n(9, b"b")],
        );
        assert_eq!(a.files(), &[f(1), f(2), f(3)][..]);
        assert_eq!(a.names(), &[n(9, b"a"), n(9, b"b")][..]);
        assert_eq!(a.len(), 5);
        let b = DenySet::new(vec![f(2), f(4)], vec![n(9, b"b"), n(8, b"z")]);
        let a_b = a.minus(&b);
        assert_eq!(a_b.files(), &[f(1), f(3)][..]);
        assert_eq!(a_b.names(), &[n(9, b"a")][..]);
        let u = a.union(&b);
        assert_eq!(u.files(), &[f(1), f(2), f(3), f(4)][..]);
        assert_eq!(u.names(), &[n(8, b"z"), n(9, b"a"), n(9, b"b")][..]);
        assert_eq!(a.union_len(&b), (u.files().len(), u.names().len()));
        assert_eq!(b.union_len(&a), (4, 3));
        assert_eq!(a.union_len(&DenySet::default()), (3, 2));
        assert!(a.minus(&a).is_empty());
        assert_eq!(a.union(&DenySet::default()), a);
        assert_eq!(DenySet::default().minus(&a), DenySet::default());
    }

    #[test]
    fn read_only_keys_are_entries_that_deny_no_read() {
        let f = |ino, kind| FileKey {
            dev: 45,
            ino,
            subvol: 0,
            kind,
        };
        let n = |kind, name: &[u8]| NameKey {
            dir: f(9, kind),
            name: name.to_vec(),
        };
        let set = DenySet::new(
            vec![
                f(1, KIND_OPEN),
                f(2, KIND_RO),
                f(3, KIND_AUDIT),
                f(4, KIND_PATH),
            ],
            vec![
                n(KIND_OPEN, b"a"),
                n(KIND_RO_DIR_OWN, b"b"),
                n(KIND_AUDIT, b"c"),
            ],
        );
        assert_eq!(
            set.entries(),
            4,
            "a removal of a read-only entry is a loosening"
        );
        assert_eq!(
            set.read_entries(),
            2,
            "read-only and audit keys deny no read"
        );
    }

    #[test]
    fn kernel_dev_encoding() {
        // tmpfs-style anonymous device 0:45 and virtio disk 254:1 (kdev_t.h MKDEV).
        assert_eq!(kernel_dev(0, 45), 45);
        assert_eq!(kernel_dev(254, 1), (254 << 20) | 1);
        // loop device with minor >= 256: glibc's st_dev would put minor bits 8..
        // above the major; the kernel keeps all 20 minor bits together.
        assert_eq!(kernel_dev(7, 300), (7 << 20) | 300);
        assert_ne!(
            u64::from(kernel_dev(7, 300)),
            libc::makedev(7, 300),
            "glibc's st_dev differs from s_dev for large minors"
        );
        assert_eq!(kernel_dev(8, 0), 8 << 20);
    }
}
