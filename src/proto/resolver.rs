//! The wire format between the daemon and a resolver process
//! ([`crate::resolver`]): the records a resolver writes ([`Sink`]) and the
//! daemon's reader ([`parse_output`]), side by side, so that one change
//! updates both; the resolver's roles, exit statuses and errors.
//!
//! Wire format of the records: binary, one after the other, in the byte order of
//! this machine (both ends are the same binary on the same machine). A file
//! key is 20 bytes: `ino` (u64), `subvol` (u64), `dev` (u32).
//! - `K` key: a file key to deny;
//! - `P` key, `D` key, `C` key: a directory or symlink on the way to a listed
//!   name, a directory holding one, a case-insensitive one (deny_map entries
//!   of kind `KIND_PATH`, `KIND_LISTED_DIR`, `KIND_FOLDING_DIR`; see
//!   [`KeyContext::take_marks`]);
//! - `N` key, length (u8, 1..=255), name: a directory key and a name in it;
//! - `M` kind (u8), key: a directory-entry, exception or audit mark (deny_map
//!   entry of kind `KIND_DIR_*` / `KIND_EXC_*` / `KIND_AUDIT*` / `KIND_RO*`);
//! - `n` kind (u8), key, length, name: the same mark by name (name_map entry
//!   whose directory key has that kind);
//! - `U`/`A`/`F` length (u32), UTF-8 text: a warning for the user, a warning
//!   for the administrator's log, a fatal problem (refuse the launch);
//! - `E` origin (u8: 0 base, 1 user), shape (u8: bit 0 a directory entry,
//!   bit 1 an exception, bit 2 an audit entry, bit 3 a read-only entry, bit 4
//!   a name pattern), line
//!   (u32; 0 for the fixed protection of the user's own lists), length (u16),
//!   path, length (u16), the included file the line is in (empty for the
//!   list itself): one accepted list
//!   line, which the daemon keeps to name the line a denial comes from
//!   ([`crate::policy::denials::attribute`]);
//! - `I` length (u32), UTF-8 text: a directory entry's scan did not read
//!   everything below it, and why (the launch then removes no key, see
//!   [`crate::policy::rules::keys_mode`]).
//!
//! Fixed-size binary keys cost a copy to write and to read, where decimal and
//! hex text cost formatting and parsing (most of the per-entry cost of a
//! no-change relaunch, before).

use crate::lists::entries::{
    DenySet, FileKey, HAS_AUDIT_KEY, HAS_DEEP_KEY, HAS_DIRS_KEY, HAS_PATTERNS_KEY, HAS_RO_DIRS_KEY,
    HAS_RO_KEY, KIND_DEEP_SCOPE, KIND_DIR_BASE, KIND_DIR_USER, KIND_EXC_USER, KIND_FOLDING_DIR,
    KIND_LISTED_DIR, KIND_OPEN, KIND_PAT_PREFILTER, KIND_PAT_SHAPE, KIND_PATH, KIND_REPO_GUARD,
    KIND_RO_DIR_BASE, KIND_RO_DIR_USER, ListEntry, ListOrigin, NAME_MAX, NameKey, is_audit,
    is_pattern, is_ro,
};
use crate::resolve::keys::ListingSink;

/// What a resolver found for one uid.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Resolution {
    /// The file keys and names to deny.
    pub deny: DenySet,
    /// Warnings about the user's own list, for the launcher to show.
    pub user_warnings: Vec<String>,
    /// Warnings about the base list, for the daemon's log.
    pub admin_warnings: Vec<String>,
    /// Why the launch must be refused, if it must.
    pub fatal: Option<String>,
    /// Why a directory entry's scan did not read everything below it, if
    /// one did not (the first `I` record): the apply must then remove no key
    /// ([`crate::policy::rules::keys_mode`]).
    pub incomplete: Option<String>,
    /// The accepted lines of both lists, in order (`E` records).
    pub entries: Vec<ListEntry>,
}

/// Bytes of a file key on the wire.
pub(crate) const KEY_BYTES: usize = 20;

/// Parses the records of resolver answers, one after the other, into one
/// resolution. A malformed record is fatal (it cannot come from a working
/// resolver); what was read before it is kept.
pub fn parse_output(outs: &[&[u8]]) -> Resolution {
    let mut r = Resolution::default();
    let mut files = Vec::new();
    let mut names = Vec::new();
    let mut has_dirs = false;
    let mut has_patterns = false;
    let mut has_deep = false;
    let mut has_audit = false;
    let mut has_ro = false;
    let mut has_ro_dirs = false;
    'answers: for out in outs {
        let mut rest = *out;
        while let Some((&tag, body)) = rest.split_first() {
            // Repeats are allowed (two lines may name one file), but not without
            // bound: past twice the per-user limit, stop before the sort.
            if files.len().max(names.len()) > 2 * MAX_KEYS_PER_UID {
                r.fatal = Some(format!(
                    "the lists name more than {} files, more than the {MAX_KEYS_PER_UID} allowed per user",
                    2 * MAX_KEYS_PER_UID
                ));
                break 'answers;
            }
            let parsed = match tag {
                b'K' | b'P' | b'D' | b'C' => take_key(body).map(|(k, after)| {
                    files.push(k.with_kind(match tag {
                        b'P' => KIND_PATH,
                        b'D' => KIND_LISTED_DIR,
                        b'C' => KIND_FOLDING_DIR,
                        _ => KIND_OPEN,
                    }));
                    after
                }),
                b'N' => take_name(body).map(|(n, after)| {
                    names.push(n);
                    after
                }),
                b'M' => take_kind(body)
                    .and_then(|(kind, b)| take_key(b).map(|(k, after)| (k.with_kind(kind), after)))
                    .map(|(k, after)| {
                        has_dirs |= k.kind == KIND_DIR_BASE || k.kind == KIND_DIR_USER;
                        has_audit |= is_audit(k.kind);
                        // The repository guard is a read-only check (SBX_RO).
                        has_ro |= is_ro(k.kind) || k.kind == KIND_REPO_GUARD;
                        has_ro_dirs |= whole_ro_dir(k.kind);
                        has_deep |= k.kind == KIND_DEEP_SCOPE;
                        files.push(k);
                        after
                    }),
                b'n' => take_kind(body).and_then(|(kind, b)| {
                    take_name(b).map(|(mut n, after)| {
                        // A directory entry whose directory does not exist
                        // yet is its name alone: the walk must run for it.
                        has_dirs |= kind == KIND_DIR_BASE || kind == KIND_DIR_USER;
                        has_audit |= is_audit(kind);
                        has_ro |= is_ro(kind);
                        has_ro_dirs |= whole_ro_dir(kind);
                        has_patterns |= is_pattern(kind);
                        n.dir.kind = kind;
                        names.push(n);
                        after
                    })
                }),
                b'E' => take_entry(body).map(|(e, after)| {
                    r.entries.push(e);
                    after
                }),
                b'U' | b'A' | b'F' | b'I' => take_text(body).map(|(text, after)| {
                    match tag {
                        b'U' => r.user_warnings.push(text),
                        b'A' => r.admin_warnings.push(text),
                        b'I' => {
                            r.incomplete.get_or_insert(text);
                        }
                        _ => r.fatal = Some(text),
                    }
                    after
                }),
                _ => None,
            };
            match parsed {
                Some(after) => rest = after,
                None => {
                    r.fatal = Some(format!(
                        "resolver sent a malformed {:?} record",
                        char::from(tag)
                    ));
                    break 'answers;
                }
            }
        }
    }
    if has_dirs {
        files.push(HAS_DIRS_KEY);
    }
    if has_audit {
        files.push(HAS_AUDIT_KEY);
    }
    if has_ro {
        files.push(HAS_RO_KEY);
    }
    if has_ro_dirs {
        files.push(HAS_RO_DIRS_KEY);
    }
    if has_patterns {
        files.push(HAS_PATTERNS_KEY);
    }
    if has_deep {
        files.push(HAS_DEEP_KEY);
    }
    r.deny = DenySet::new(files, names);
    r
}

/// Whether `kind` is a read-only directory entry that the write hooks must
/// walk to the root for (`KIND_RO_DIR_BASE`, `KIND_RO_DIR_USER`).
fn whole_ro_dir(kind: u32) -> bool {
    kind == KIND_RO_DIR_BASE || kind == KIND_RO_DIR_USER
}

/// A mark kind byte: one of `KIND_DIR_*`, `KIND_EXC_*`, [`KIND_AUDIT`](crate::lists::entries::KIND_AUDIT),
/// `KIND_AUDIT_DIR_*`, [`KIND_RO`](crate::lists::entries::KIND_RO), `KIND_RO_DIR_*`, the pattern
/// kinds, [`KIND_DEEP_SCOPE`], [`KIND_REPO_GUARD`].
pub(crate) fn take_kind(b: &[u8]) -> Option<(u32, &[u8])> {
    let (&kind, rest) = b.split_first()?;
    let kind = u32::from(kind);
    ((KIND_DIR_BASE..=KIND_EXC_USER).contains(&kind)
        || is_audit(kind)
        || is_ro(kind)
        || is_pattern(kind)
        || kind == KIND_PAT_SHAPE
        || kind == KIND_PAT_PREFILTER
        || kind == KIND_DEEP_SCOPE
        || kind == KIND_REPO_GUARD)
        .then_some((kind, rest))
}

pub(crate) fn take_key(b: &[u8]) -> Option<(FileKey, &[u8])> {
    let (k, rest) = b.split_at_checked(KEY_BYTES)?;
    let u64_at = |i: usize| u64::from_ne_bytes(k[i..i + 8].try_into().expect("8 bytes"));
    let key = FileKey {
        ino: u64_at(0),
        subvol: u64_at(8),
        dev: u32::from_ne_bytes(k[16..20].try_into().expect("4 bytes")),
        kind: KIND_OPEN,
    };
    Some((key, rest))
}

pub(crate) fn take_name(b: &[u8]) -> Option<(NameKey, &[u8])> {
    let (dir, rest) = take_key(b)?;
    let (&len, rest) = rest.split_first()?;
    let (name, rest) = rest.split_at_checked(usize::from(len))?;
    if name.is_empty() || name.contains(&b'/') || name.contains(&0) {
        return None;
    }
    let name = name.to_vec();
    Some((NameKey { dir, name }, rest))
}

pub(crate) fn take_entry(b: &[u8]) -> Option<(ListEntry, &[u8])> {
    let (&origin, b) = b.split_first()?;
    let (&shape, b) = b.split_first()?;
    let (line, b) = b.split_at_checked(4)?;
    let (len, b) = b.split_at_checked(2)?;
    let (path, b) = b.split_at_checked(usize::from(u16::from_ne_bytes(len.try_into().ok()?)))?;
    let (len, b) = b.split_at_checked(2)?;
    let (file, rest) = b.split_at_checked(usize::from(u16::from_ne_bytes(len.try_into().ok()?)))?;
    let origin = match origin {
        0 => ListOrigin::Base,
        1 => ListOrigin::User,
        _ => return None,
    };
    let e = ListEntry {
        origin,
        line: u32::from_ne_bytes(line.try_into().ok()?),
        dir: shape & 1 != 0,
        exception: shape & 2 != 0,
        audit: shape & 4 != 0,
        readonly: shape & 8 != 0,
        pattern: shape & 16 != 0,
        path: path.to_vec(),
        file: file.to_vec(),
    };
    Some((e, rest))
}

pub(crate) fn take_text(b: &[u8]) -> Option<(String, &[u8])> {
    let (len, rest) = b.split_at_checked(4)?;
    let len = u32::from_ne_bytes(len.try_into().expect("4 bytes")) as usize;
    let (text, rest) = rest.split_at_checked(len)?;
    Some((String::from_utf8_lossy(text).into_owned(), rest))
}

/// Resolver records, appended to a buffer (see the wire format above).
pub(crate) struct Sink<'a> {
    pub(crate) out: &'a mut Vec<u8>,
}

impl Sink<'_> {
    pub(crate) fn record(&mut self, tag: u8, text: &str) {
        let line = crate::proto::request::one_line(text);
        let len = u32::try_from(line.len()).unwrap_or(u32::MAX);
        self.out.push(tag);
        self.out.extend_from_slice(&len.to_ne_bytes());
        self.out.extend_from_slice(&line.as_bytes()[..len as usize]);
    }
    /// An `E` record for `e` (a path or file longer than 65,535 bytes is
    /// cut: it only names the line).
    pub(crate) fn entry(&mut self, e: &ListEntry) {
        let len = e.path.len().min(usize::from(u16::MAX));
        self.out.push(b'E');
        self.out.push(match e.origin {
            ListOrigin::Base => 0,
            ListOrigin::User => 1,
        });
        self.out.push(
            u8::from(e.dir)
                | u8::from(e.exception) << 1
                | u8::from(e.audit) << 2
                | u8::from(e.readonly) << 3
                | u8::from(e.pattern) << 4,
        );
        self.out.extend_from_slice(&e.line.to_ne_bytes());
        self.out.extend_from_slice(&(len as u16).to_ne_bytes());
        self.out.extend_from_slice(&e.path[..len]);
        let len = e.file.len().min(usize::from(u16::MAX));
        self.out.extend_from_slice(&(len as u16).to_ne_bytes());
        self.out.extend_from_slice(&e.file[..len]);
    }
    pub(crate) fn key_bytes(k: FileKey, tag: u8) -> [u8; 1 + KEY_BYTES] {
        let mut b = [tag; 1 + KEY_BYTES];
        b[1..9].copy_from_slice(&k.ino.to_ne_bytes());
        b[9..17].copy_from_slice(&k.subvol.to_ne_bytes());
        b[17..21].copy_from_slice(&k.dev.to_ne_bytes());
        b
    }
}

impl Sink<'_> {
    /// A `P`, `D` or `C` record for a key of kind [`KIND_PATH`],
    /// [`KIND_LISTED_DIR`] or [`KIND_FOLDING_DIR`].
    pub(crate) fn mark(&mut self, k: FileKey) {
        let tag = match k.kind {
            KIND_LISTED_DIR => b'D',
            KIND_FOLDING_DIR => b'C',
            _ => b'P',
        };
        self.out.extend_from_slice(&Self::key_bytes(k, tag));
    }
}

impl ListingSink for Sink<'_> {
    /// A file key; one of a directory-entry or exception kind as an `M` record.
    fn file(&mut self, k: FileKey) {
        if k.kind == KIND_OPEN {
            self.out.extend_from_slice(&Self::key_bytes(k, b'K'));
        } else {
            self.out.push(b'M');
            self.out
                .extend_from_slice(&Self::key_bytes(k, k.kind as u8));
        }
    }
    /// A name of 1 to [`NAME_MAX`] bytes (what [`KeyContext`] gives); with a
    /// directory key of a mark kind, an `n` record.
    fn name(&mut self, dir: FileKey, name: &[u8]) {
        let len = name.len().min(NAME_MAX);
        if dir.kind == KIND_OPEN {
            self.out.extend_from_slice(&Self::key_bytes(dir, b'N'));
        } else {
            self.out.push(b'n');
            self.out
                .extend_from_slice(&Self::key_bytes(dir, dir.kind as u8));
        }
        self.out.push(len as u8);
        self.out.extend_from_slice(&name[..len]);
    }
}

/// What one resolver process resolves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Role {
    /// The base list's absolute entries, as root.
    Base,
    /// The base list's `~/` entries and the home list of this uid, as that
    /// uid (for good: it drops root when it starts).
    User(u32),
}

/// Passes a file's findings on with a mark kind: the file key and the
/// names' directory keys get `kind` (an exception `!PATH`).
pub(crate) struct KindSink<'s, 'a> {
    pub(crate) inner: &'s mut Sink<'a>,
    pub(crate) kind: u32,
}

impl ListingSink for KindSink<'_, '_> {
    fn file(&mut self, k: FileKey) {
        self.inner.file(k.with_kind(self.kind));
    }
    fn name(&mut self, dir: FileKey, name: &[u8]) {
        self.inner.name(dir.with_kind(self.kind), name);
    }
}

/// Passes an audit or read-only entry's findings on: a file key or a
/// name's directory key of kind [`KIND_OPEN`] gets the kind `open_as`
/// ([`KIND_AUDIT`](crate::lists::entries::KIND_AUDIT) for an `audit PATH` line and the files an `audit DIR/`
/// scan marks, [`KIND_RO`](crate::lists::entries::KIND_RO) for `readonly`); every other kind passes
/// unchanged, and so does everything when `open_as` is [`KIND_OPEN`].
pub(crate) struct RewriteSink<'s, 'a> {
    inner: &'s mut Sink<'a>,
    open_as: u32,
}

impl<'s, 'a> RewriteSink<'s, 'a> {
    /// A sink onto `inner` that gives [`KIND_OPEN`] keys the kind `open_as`.
    pub(crate) fn new(inner: &'s mut Sink<'a>, open_as: u32) -> Self {
        RewriteSink { inner, open_as }
    }

    fn kind(&self, kind: u32) -> u32 {
        if kind == KIND_OPEN {
            self.open_as
        } else {
            kind
        }
    }
}

impl ListingSink for RewriteSink<'_, '_> {
    fn file(&mut self, k: FileKey) {
        let kind = self.kind(k.kind);
        self.inner.file(k.with_kind(kind));
    }
    fn name(&mut self, dir: FileKey, name: &[u8]) {
        let kind = self.kind(dir.kind);
        self.inner.name(dir.with_kind(kind), name);
    }
}

/// Why a resolution could not start or finish, worded for the user who
/// launched (the daemon's refusal quotes it).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ResolveError {
    /// The daemon cannot open the base list (as root).
    #[error("cannot read the base list {path}: {why}")]
    BaseList {
        /// The base list's path.
        path: String,
        /// The open's or read's error.
        why: String,
    },
    /// No resolver process could be started.
    #[error("cannot start the list resolver: {0}")]
    Start(String),
    /// The resolver processes took no request.
    #[error("cannot reach the list resolver: {0}")]
    Reach(String),
    /// An answer announced more than [`MAX_OUTPUT_BYTES`].
    #[error("the lists produced more output than the daemon accepts")]
    OutputTooLarge,
    /// The user process cannot look its uid up.
    #[error("cannot look up uid {uid}: {why}")]
    LookUp {
        /// The uid.
        uid: u32,
        /// The lookup's error.
        why: String,
    },
    /// The uid has no passwd entry.
    #[error("uid {0} has no passwd entry, so its home list cannot be found")]
    NoPasswd(u32),
    /// The user process cannot become the user for good.
    #[error("cannot drop privileges to {user}: {why}")]
    Privileges {
        /// The user's name.
        user: String,
        /// The step that failed and its error.
        why: String,
    },
    /// The mount table cannot be read (it maps mount ids to devices).
    #[error("cannot read /proc/self/mountinfo: {0}")]
    MountTable(String),
    /// The base list's descriptor cannot be read.
    #[error("cannot read the base list: {0}")]
    BaseListRead(String),
    /// A file the base list includes may not be read (not root's alone, a
    /// symbolic link on its way, unreadable by the user's resolver, whose
    /// `~/` lines it is to resolve): its lines would be lost, so every launch
    /// is refused until an administrator fixes it.
    #[error(
        "{at}: {why}; the administrator's list cannot apply, so launches are refused until \
         the file or the line is fixed (an included file must be root's alone, by its real \
         path, and readable by all)"
    )]
    BaseInclude {
        /// The include line (list and line number) and the file.
        at: String,
        /// The read's error.
        why: String,
    },
    /// A file the user's list includes exists but may not be read (not a
    /// regular file, another owner, writable by others, unreadable): the
    /// launch is refused, as for the list itself, since a file there that
    /// is not guarded could be replaced from inside before the next launch.
    #[error("{at}: {why} (fix the file or remove the line)")]
    OwnInclude {
        /// The include line (list and line number) and the file.
        at: String,
        /// Why it may not be read.
        why: String,
    },
    /// The user's own list cannot be read: the launch is refused, not the
    /// list skipped.
    #[error("cannot read your list {path}: {why} (fix or remove it)")]
    OwnList {
        /// The list's path.
        path: String,
        /// The open's or read's error.
        why: String,
    },
    /// A listed path exists but cannot be checked (EACCES on a directory,
    /// ELOOP, EIO): skipping it would let anyone who can chmod a directory
    /// take a file off the list, so the launch is refused.
    #[error("{at}: cannot check the path: {why}; fix the path's permissions or the list")]
    Unchecked {
        /// The list and line (and, for the base list, the path).
        at: String,
        /// The error.
        why: String,
    },
    /// The daemon's request came without the base list's descriptor.
    #[error("the base list's descriptor did not arrive (too many open files?)")]
    NoDescriptor,
    /// The daemon sent a request this resolver does not know.
    #[error("bad request {0:?} from the daemon")]
    BadRequest(char),
}

/// Largest resolver output accepted by the daemon, in bytes (a key record is
/// 21 bytes and a name record at most 277; 131,072 listed paths with names of
/// any length, and their warnings, fit).
pub const MAX_OUTPUT_BYTES: usize = 64 << 20;

/// Most files one uid's lists may name: at most this many file keys in
/// deny_map and this many names in name_map. Eight users at the limit fill
/// each map (1,048,576 entries), so no single user can exhaust it for the others.
pub const MAX_KEYS_PER_UID: usize = 131_072;

/// argv[0] of a resolver process; [`worker_main`] serves it.
pub const WORKER_NAME: &str = "agent-sandbox-exec-resolver";

/// Exit status of a resolver whose credentials or resource limits no longer
/// match what a fresh one would get (EX_TEMPFAIL): the daemon starts a new one.
pub const EXIT_STALE: i32 = 75;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lists::entries::KIND_EXC_BASE;

    #[test]
    fn list_lines_travel_with_the_keys() {
        let lines = [
            ListEntry {
                pattern: false,
                origin: ListOrigin::User,
                line: 3,
                dir: true,
                exception: false,
                audit: false,
                readonly: false,
                path: b"/home/u/.ssh".to_vec(),
                file: Vec::new(),
            },
            ListEntry {
                pattern: false,
                origin: ListOrigin::Base,
                line: 70_000,
                dir: false,
                exception: true,
                audit: false,
                readonly: false,
                path: b"/etc/x y".to_vec(),
                file: b"/usr/share/agent-sandbox-exec/catalog/cloud".to_vec(),
            },
            ListEntry {
                pattern: false,
                origin: ListOrigin::User,
                line: 9,
                dir: true,
                exception: false,
                audit: true,
                readonly: false,
                path: b"/home/u/.aws".to_vec(),
                file: Vec::new(),
            },
        ];
        let mut out = Vec::new();
        let mut sink = Sink { out: &mut out };
        sink.entry(&lines[0]);
        sink.record(b'U', "a warning");
        sink.entry(&lines[1]);
        sink.entry(&lines[2]);
        let r = parse_output(&[&out]);
        assert_eq!(r.fatal, None);
        assert_eq!(r.entries, lines);
        assert_eq!(r.user_warnings, ["a warning"]);
        out.truncate(out.len() - 2);
        let cut = parse_output(&[&out]);
        assert!(cut.fatal.unwrap().contains("malformed 'E' record"));
    }

    #[test]
    fn the_repository_guard_key_makes_the_sandbox_read_only_checked() {
        let mut buf = Vec::new();
        Sink { out: &mut buf }.file(crate::lists::entries::REPO_GUARD_KEY);
        let r = parse_output(&[&buf]);
        assert_eq!(r.fatal, None);
        assert_eq!(
            r.deny.files(),
            &[HAS_RO_KEY, crate::lists::entries::REPO_GUARD_KEY][..]
        );
    }

    #[test]
    fn output_parsing() {
        let k = |dev, ino, subvol| FileKey {
            dev,
            ino,
            subvol,
            kind: KIND_OPEN,
        };
        let n = NameKey {
            dir: k(1, 2, 3),
            name: b"a b\n\xff".to_vec(),
        };
        let mut buf = Vec::new();
        {
            let mut sink = Sink { out: &mut buf };
            sink.file(k(45, 12, 0));
            sink.file(k(45, 12, 0));
            sink.record(b'U', "a:1: w");
            sink.record(b'A', "b:2: x\ny");
            sink.file(k(8388609, 99, 256));
            sink.name(n.dir, &n.name);
        }
        let r = parse_output(&[&buf]);
        assert_eq!(r.fatal, None);
        assert_eq!(r.deny.files(), &[k(45, 12, 0), k(8388609, 99, 256)][..]);
        assert_eq!(r.deny.names(), &[n.clone()][..]);
        assert_eq!(r.user_warnings, vec!["a:1: w".to_string()]);
        assert_eq!(r.admin_warnings, vec!["b:2: x?y".to_string()]);

        // Truncated or malformed records are fatal; what came before stays.
        // (record ends: two keys of 1 + 20 bytes, texts of 1 + 4 + 6 and
        // 1 + 4 + 8, a key, then the name record of 1 + 20 + 1 + 5)
        assert_eq!(buf.len(), 114);
        for end in 1..buf.len() {
            let r = parse_output(&[&buf[..end]]);
            let whole = [21, 42, 53, 66, 87].contains(&end);
            assert_eq!(r.fatal.is_none(), whole, "cut at {end}");
        }
        let mut slash = Vec::new();
        Sink { out: &mut slash }.name(k(1, 2, 0), b"a/b");
        assert!(parse_output(&[&slash]).fatal.is_some(), "a slash in a name");
        let mut empty = Sink::key_bytes(k(1, 2, 0), b'N').to_vec();
        empty.push(0);
        assert!(parse_output(&[&empty]).fatal.is_some(), "an empty name");
        assert!(parse_output(&[b"Z what"]).fatal.is_some());
        // Repeats are parsed up to twice the per-user limit, then refused.
        let one = Sink::key_bytes(k(1, 2, 0), b'K');
        let many = one.repeat(2 * MAX_KEYS_PER_UID);
        let r = parse_output(&[&many]);
        assert_eq!((r.fatal, r.deny.len()), (None, 1));
        let r = parse_output(&[&one.repeat(2 * MAX_KEYS_PER_UID + 2)]);
        assert!(r.fatal.is_some_and(|f| f.contains("allowed per user")));
        let mut fatal = Vec::new();
        Sink { out: &mut fatal }.record(b'F', "nope");
        assert_eq!(parse_output(&[&fatal]).fatal.as_deref(), Some("nope"));
        // An incomplete scan, in either answer: the first reason is kept.
        let (mut first, mut second) = (Vec::new(), Vec::new());
        Sink { out: &mut first }.record(b'I', "l:1: cannot open");
        Sink { out: &mut second }.record(b'I', "l:2: too many");
        let r = parse_output(&[&one, &first]);
        assert_eq!(
            (r.fatal, r.incomplete.as_deref()),
            (None, Some("l:1: cannot open"))
        );
        let r = parse_output(&[&first, &second]);
        assert_eq!(r.incomplete.as_deref(), Some("l:1: cannot open"));
        assert_eq!(parse_output(&[&one]).incomplete, None);
    }

    #[test]
    fn marks_keep_their_kind_on_the_wire() {
        let k = |ino, kind| FileKey {
            dev: 3,
            ino,
            subvol: 9,
            kind,
        };
        let sent = [
            k(1, KIND_OPEN),
            k(2, KIND_PATH),
            k(3, KIND_LISTED_DIR),
            k(3, KIND_FOLDING_DIR),
        ];
        let mut out = Vec::new();
        let mut sink = Sink { out: &mut out };
        sink.file(sent[0]);
        for m in &sent[1..] {
            sink.mark(*m);
        }
        let r = parse_output(&[&out]);
        assert_eq!(r.fatal, None);
        assert_eq!(r.deny.files(), &sent[..]);
    }

    #[test]
    fn directory_marks_and_exceptions_keep_their_kind_on_the_wire() {
        let k = |ino, kind| FileKey {
            dev: 7,
            ino,
            subvol: 0,
            kind,
        };
        let mut out = Vec::new();
        let mut sink = Sink { out: &mut out };
        sink.file(k(10, KIND_DIR_USER));
        sink.name(k(2, KIND_DIR_USER), b".ssh");
        KindSink {
            inner: &mut sink,
            kind: KIND_EXC_USER,
        }
        .file(k(11, KIND_OPEN));
        KindSink {
            inner: &mut sink,
            kind: KIND_EXC_USER,
        }
        .name(k(10, KIND_OPEN), b"known_hosts");
        let r = parse_output(&[&out]);
        assert_eq!(r.fatal, None);
        // A directory entry makes the sandbox's "has directory entries" key.
        assert_eq!(
            r.deny.files(),
            &[HAS_DIRS_KEY, k(10, KIND_DIR_USER), k(11, KIND_EXC_USER)][..]
        );
        let names: Vec<_> = r
            .deny
            .names()
            .iter()
            .map(|n| (n.dir, n.name.clone()))
            .collect();
        assert_eq!(
            names,
            vec![
                (k(2, KIND_DIR_USER), b".ssh".to_vec()),
                (k(10, KIND_EXC_USER), b"known_hosts".to_vec()),
            ]
        );
        // Only exceptions: no walk needed, no flag key.
        let mut out = Vec::new();
        Sink { out: &mut out }.file(k(11, KIND_EXC_BASE));
        assert_eq!(
            parse_output(&[&out]).deny.files(),
            &[k(11, KIND_EXC_BASE)][..]
        );
        // A directory entry whose directory does not exist yet (its name
        // alone) makes the flag key too: the walk checks that name.
        let mut out = Vec::new();
        Sink { out: &mut out }.name(k(2, KIND_DIR_BASE), b"AccountsService");
        assert_eq!(parse_output(&[&out]).deny.files(), &[HAS_DIRS_KEY][..]);
        // An exception's name alone does not.
        let mut out = Vec::new();
        KindSink {
            inner: &mut Sink { out: &mut out },
            kind: KIND_EXC_BASE,
        }
        .name(k(2, KIND_OPEN), b"x");
        assert!(parse_output(&[&out]).deny.files().is_empty());
        // A mark record with a kind outside the directory-entry range is malformed.
        let mut bad = vec![b'M', KIND_PATH as u8];
        bad.extend_from_slice(&[0u8; KEY_BYTES]);
        assert!(parse_output(&[&bad]).fatal.is_some());
    }

    #[test]
    fn answers_parse_together() {
        let k = |ino| FileKey {
            dev: 1,
            ino,
            subvol: 0,
            kind: KIND_OPEN,
        };
        let one = Sink::key_bytes(k(7), b'K');
        let two = Sink::key_bytes(k(8), b'K');
        let r = parse_output(&[&one, &two]);
        assert_eq!((r.fatal, r.deny.files()), (None, &[k(7), k(8)][..]));
        // A record cut at the end of one answer does not continue into the next.
        let r = parse_output(&[&one[..10], &two]);
        assert!(r.fatal.is_some());
        assert!(r.deny.is_empty(), "nothing after the malformed record");
        // The parse cap counts both answers.
        let half = one.repeat(MAX_KEYS_PER_UID + 1);
        let r = parse_output(&[&half, &half]);
        assert!(r.fatal.is_some_and(|f| f.contains("allowed per user")));
    }

    #[test]
    fn resolution_errors_say_what_to_fix() {
        let own = ResolveError::OwnList {
            path: "/home/u/.config/agent-sandbox-exec/denylist".into(),
            why: "Permission denied (os error 13)".into(),
        };
        assert_eq!(
            own.to_string(),
            "cannot read your list /home/u/.config/agent-sandbox-exec/denylist: \
             Permission denied (os error 13) (fix or remove it)"
        );
        let unchecked = ResolveError::Unchecked {
            at: "/home/u/.config/agent-sandbox-exec/denylist:3".into(),
            why: "Permission denied (os error 13)".into(),
        };
        assert!(
            unchecked
                .to_string()
                .ends_with("fix the path's permissions or the list")
        );
        assert!(ResolveError::BadRequest('x').to_string().contains("'x'"));
        let base = ResolveError::BaseList {
            path: "/etc/agent-sandbox-exec/denylist".into(),
            why: "is a FIFO".into(),
        };
        assert_eq!(
            base.to_string(),
            "cannot read the base list /etc/agent-sandbox-exec/denylist: is a FIFO"
        );
    }
}
