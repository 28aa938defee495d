//! The wire format between a resolver process and the daemon: the records
//! a resolver writes ([`Sink`]) and the daemon's reader ([`parse_output`]),
//! side by side, so that one change updates both. See the parent module for
//! the record tags.

#[allow(unused_imports)]
use super::*;

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
    /// ([`crate::policy::keys_mode`]).
    pub incomplete: Option<String>,
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
                        files.push(k);
                        after
                    }),
                b'n' => take_kind(body).and_then(|(kind, b)| {
                    take_name(b).map(|(mut n, after)| {
                        // A directory entry whose directory does not exist
                        // yet is its name alone: the walk must run for it.
                        has_dirs |= kind == KIND_DIR_BASE || kind == KIND_DIR_USER;
                        n.dir.kind = kind;
                        names.push(n);
                        after
                    })
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
    r.deny = DenySet::new(files, names);
    r
}

/// A mark kind byte: one of `KIND_DIR_*`, `KIND_EXC_*`.
pub(crate) fn take_kind(b: &[u8]) -> Option<(u32, &[u8])> {
    let (&kind, rest) = b.split_first()?;
    let kind = u32::from(kind);
    (KIND_DIR_BASE..=KIND_EXC_USER)
        .contains(&kind)
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
        let line = crate::request::one_line(text);
        let len = u32::try_from(line.len()).unwrap_or(u32::MAX);
        self.out.push(tag);
        self.out.extend_from_slice(&len.to_ne_bytes());
        self.out.extend_from_slice(&line.as_bytes()[..len as usize]);
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
