//! The map keys' layouts: the C key types as the skeleton generates them
//! from src/bpf/agent_sandbox.h, and their codecs (a file key or name key of
//! a sandbox ↔ the bytes libbpf sends and reads back).

use std::collections::HashMap;

use crate::kernel::skel::{self};
use crate::lists::entries::{DenySet, FileKey, KIND_OPEN, NAME_MAX, NameKey};

/// The map keys as the skeleton generates them from the object's BTF, i.e.
/// from src/bpf/agent_sandbox.h as clang laid it out: the one description of
/// their layout ([`KeyBytes`] turns them into the bytes libbpf sends).
pub(super) type CDenyKey = skel::types::deny_key;

pub(super) type CFileKey = skel::types::file_key;

pub(super) type CNameKey = skel::types::name_key;

/// Bytes of a deny_map key (`struct deny_key`: 32).
pub(super) const DENY_KEY_LEN: usize = size_of::<CDenyKey>();

/// Bytes of a name_map key (`struct name_key`: 288).
pub(super) const NAME_KEY_LEN: usize = size_of::<CNameKey>();

/// Bytes of a layout-2 deny_map key ({cgid, ino, dev, reserved}, before the
/// btrfs subvolume; read only to carry old pins over).
pub(super) const LAYOUT2_KEY_LEN: usize = 24;

/// A key type of the skeleton, seen as the bytes the kernel hashes.
///
/// # Safety
/// Implement only for `#[repr(C)]` types without padding bytes (every byte
/// initialised) for which any bit pattern is valid; the unit test
/// `rust_keys_match_the_c_layout` checks their sizes.
pub(super) unsafe trait KeyBytes: Copy + Default {
    /// The key's bytes, native endianness.
    fn bytes(&self) -> &[u8] {
        // SAFETY: per the trait's contract, all size_of::<Self>() bytes are initialised.
        unsafe { std::slice::from_raw_parts((self as *const Self).cast::<u8>(), size_of::<Self>()) }
    }

    /// The key in `b` (read back from a map), if `b` has its size.
    fn from_bytes(b: &[u8]) -> Option<Self> {
        if b.len() != size_of::<Self>() {
            return None;
        }
        // SAFETY: b holds size_of::<Self>() bytes and any bit pattern is a valid Self.
        Some(unsafe { std::ptr::read_unaligned(b.as_ptr().cast::<Self>()) })
    }
}

// SAFETY: repr(C) {u64, {u64, u64, u32, u32}}: 32 bytes, no padding.
unsafe impl KeyBytes for CDenyKey {}

// SAFETY: repr(C) {u64, {u64, u64, u32, u32}, [i8; 256]}: 288 bytes, no padding.
unsafe impl KeyBytes for CNameKey {}

pub(super) fn c_file(k: FileKey) -> CFileKey {
    CFileKey {
        ino: k.ino,
        subvol: k.subvol,
        dev: k.dev,
        kind: k.kind,
    }
}

pub(super) fn file_of(c: &CFileKey) -> FileKey {
    FileKey {
        ino: c.ino,
        subvol: c.subvol,
        dev: c.dev,
        kind: c.kind,
    }
}

/// The deny_map key denying `file` to sandbox `cgid`.
pub(super) fn deny_key(cgid: u64, file: FileKey) -> CDenyKey {
    CDenyKey {
        cgid,
        file: c_file(file),
    }
}

/// Parses a deny_map key read back from a map: this layout's, or a
/// layout-2 one ([`LAYOUT2_KEY_LEN`]; subvolume 0, kind [`KIND_OPEN`]).
pub(super) fn parse_deny_key(b: &[u8]) -> Option<(u64, FileKey)> {
    if b.len() == LAYOUT2_KEY_LEN {
        let u64_at = |i: usize| u64::from_ne_bytes(b[i..i + 8].try_into().unwrap_or_default());
        let dev = u32::from_ne_bytes(b[16..20].try_into().unwrap_or_default());
        return Some((
            u64_at(0),
            FileKey {
                ino: u64_at(8),
                subvol: 0,
                dev,
                kind: KIND_OPEN,
            },
        ));
    }
    CDenyKey::from_bytes(b).map(|k| (k.cgid, file_of(&k.file)))
}

/// The name_map key for `n` in sandbox `cgid` (name zero-padded; a name is
/// at most [`NAME_MAX`] bytes, so the last byte stays 0).
pub(super) fn name_key(cgid: u64, n: &NameKey) -> CNameKey {
    let mut k = CNameKey {
        cgid,
        dir: c_file(n.dir),
        ..Default::default()
    };
    for (slot, &c) in k.name.iter_mut().zip(n.name.iter().take(NAME_MAX)) {
        *slot = c as i8;
    }
    k
}

/// Parses a name_map key read back from a map.
pub(super) fn parse_name_key(b: &[u8]) -> Option<(u64, NameKey)> {
    let k = CNameKey::from_bytes(b)?;
    let len = k.name.iter().position(|&c| c == 0).unwrap_or(k.name.len());
    let name = k.name[..len].iter().map(|&c| c as u8).collect();
    Some((
        k.cgid,
        NameKey {
            dir: file_of(&k.dir),
            name,
        },
    ))
}

/// The deny_map keys of `files` for sandbox `cgid`, back to back
/// ([`DENY_KEY_LEN`] bytes each).
pub(super) fn deny_key_bytes(cgid: u64, files: &[FileKey]) -> Vec<u8> {
    files
        .iter()
        .flat_map(|f| deny_key(cgid, *f).bytes().to_vec())
        .collect()
}

/// The name_map keys of `names` for sandbox `cgid`, back to back
/// ([`NAME_KEY_LEN`] bytes each).
pub(super) fn name_keys_bytes(cgid: u64, names: &[NameKey]) -> Vec<u8> {
    let mut out = Vec::with_capacity(names.len() * NAME_KEY_LEN);
    for n in names {
        out.extend_from_slice(name_key(cgid, n).bytes());
    }
    out
}

/// Per-sandbox sets from keys read back from maps, in any order.
pub(super) fn into_sets(
    found: HashMap<u64, (Vec<FileKey>, Vec<NameKey>)>,
) -> HashMap<u64, DenySet> {
    found
        .into_iter()
        .map(|(cgid, (files, names))| (cgid, DenySet::new(files, names)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::mem::{offset_of, size_of};

    fn fk(dev: u32, ino: u64, subvol: u64) -> FileKey {
        FileKey {
            dev,
            ino,
            subvol,
            kind: KIND_OPEN,
        }
    }

    /// The Rust side's copies of agent_sandbox.h's enums: lists/ (below the
    /// skeleton's layer) keeps its own kinds, resolve/ and proto/ their caps.
    #[test]
    fn shared_constants_match_the_c_side() {
        use crate::kernel::skel::types::*;
        use crate::lists::entries as e;
        let kinds = [
            (e::KIND_OPEN, agent_sandbox_kind::AGENT_SANDBOX_KIND_OPEN),
            (e::KIND_PATH, agent_sandbox_kind::AGENT_SANDBOX_KIND_PATH),
            (
                e::KIND_LISTED_DIR,
                agent_sandbox_kind::AGENT_SANDBOX_KIND_LISTED_DIR,
            ),
            (
                e::KIND_FOLDING_DIR,
                agent_sandbox_kind::AGENT_SANDBOX_KIND_FOLDING_DIR,
            ),
            (
                e::KIND_DIR_BASE,
                agent_sandbox_kind::AGENT_SANDBOX_KIND_DIR_BASE,
            ),
            (
                e::KIND_DIR_USER,
                agent_sandbox_kind::AGENT_SANDBOX_KIND_DIR_USER,
            ),
            (
                e::KIND_EXC_BASE,
                agent_sandbox_kind::AGENT_SANDBOX_KIND_EXC_BASE,
            ),
            (
                e::KIND_EXC_USER,
                agent_sandbox_kind::AGENT_SANDBOX_KIND_EXC_USER,
            ),
            (
                e::KIND_HAS_DIRS,
                agent_sandbox_kind::AGENT_SANDBOX_KIND_HAS_DIRS,
            ),
            (e::KIND_AUDIT, agent_sandbox_kind::AGENT_SANDBOX_KIND_AUDIT),
            (
                e::KIND_AUDIT_DIR_BASE,
                agent_sandbox_kind::AGENT_SANDBOX_KIND_AUDIT_DIR_BASE,
            ),
            (
                e::KIND_AUDIT_DIR_USER,
                agent_sandbox_kind::AGENT_SANDBOX_KIND_AUDIT_DIR_USER,
            ),
            (
                e::KIND_HAS_AUDIT,
                agent_sandbox_kind::AGENT_SANDBOX_KIND_HAS_AUDIT,
            ),
            (e::KIND_RO, agent_sandbox_kind::AGENT_SANDBOX_KIND_RO),
            (
                e::KIND_RO_DIR_BASE,
                agent_sandbox_kind::AGENT_SANDBOX_KIND_RO_DIR_BASE,
            ),
            (
                e::KIND_RO_DIR_USER,
                agent_sandbox_kind::AGENT_SANDBOX_KIND_RO_DIR_USER,
            ),
            (
                e::KIND_HAS_RO,
                agent_sandbox_kind::AGENT_SANDBOX_KIND_HAS_RO,
            ),
            (
                e::KIND_RO_DIR_OWN,
                agent_sandbox_kind::AGENT_SANDBOX_KIND_RO_DIR_OWN,
            ),
            (
                e::KIND_HAS_RO_DIRS,
                agent_sandbox_kind::AGENT_SANDBOX_KIND_HAS_RO_DIRS,
            ),
            (
                e::KIND_PAT_BASE,
                agent_sandbox_kind::AGENT_SANDBOX_KIND_PAT_BASE,
            ),
            (
                e::KIND_PAT_USER,
                agent_sandbox_kind::AGENT_SANDBOX_KIND_PAT_USER,
            ),
            (
                e::KIND_PAT_EXC_BASE,
                agent_sandbox_kind::AGENT_SANDBOX_KIND_PAT_EXC_BASE,
            ),
            (
                e::KIND_PAT_EXC_USER,
                agent_sandbox_kind::AGENT_SANDBOX_KIND_PAT_EXC_USER,
            ),
            (
                e::KIND_PAT_SHAPE,
                agent_sandbox_kind::AGENT_SANDBOX_KIND_PAT_SHAPE,
            ),
            (
                e::KIND_HAS_PATTERNS,
                agent_sandbox_kind::AGENT_SANDBOX_KIND_HAS_PATTERNS,
            ),
            (
                e::KIND_PAT_DEEP_BASE,
                agent_sandbox_kind::AGENT_SANDBOX_KIND_PAT_DEEP_BASE,
            ),
            (
                e::KIND_PAT_DEEP_USER,
                agent_sandbox_kind::AGENT_SANDBOX_KIND_PAT_DEEP_USER,
            ),
            (
                e::KIND_PAT_DEEP_EXC_BASE,
                agent_sandbox_kind::AGENT_SANDBOX_KIND_PAT_DEEP_EXC_BASE,
            ),
            (
                e::KIND_PAT_DEEP_EXC_USER,
                agent_sandbox_kind::AGENT_SANDBOX_KIND_PAT_DEEP_EXC_USER,
            ),
            (
                e::KIND_DEEP_SCOPE,
                agent_sandbox_kind::AGENT_SANDBOX_KIND_DEEP_SCOPE,
            ),
            (
                e::KIND_HAS_DEEP,
                agent_sandbox_kind::AGENT_SANDBOX_KIND_HAS_DEEP,
            ),
            (
                e::KIND_REPO_GUARD,
                agent_sandbox_kind::AGENT_SANDBOX_KIND_REPO_GUARD,
            ),
            (
                e::KIND_PAT_PREFILTER,
                agent_sandbox_kind::AGENT_SANDBOX_KIND_PAT_PREFILTER,
            ),
        ];
        for (ours, c) in kinds {
            assert_eq!(ours, c.0);
        }
        assert_eq!(
            e::NAME_MAX + 1,
            agent_sandbox_name_len::AGENT_SANDBOX_NAME_LEN.0 as usize
        );
        // The name patterns' shapes (src/lists/pattern.rs).
        use crate::kernel::skel::types::{
            agent_sandbox_max_shapes, agent_sandbox_pattern_key_chars,
            agent_sandbox_pattern_window, agent_sandbox_shape_state, pattern_shape,
        };
        use crate::lists::pattern as p;
        assert_eq!(
            p::MAX_SHAPES,
            agent_sandbox_max_shapes::AGENT_SANDBOX_MAX_SHAPES.0 as usize
        );
        assert_eq!(
            p::WINDOW,
            agent_sandbox_pattern_window::AGENT_SANDBOX_PATTERN_WINDOW.0 as usize
        );
        assert_eq!(
            p::KEY_CHARS,
            agent_sandbox_pattern_key_chars::AGENT_SANDBOX_PATTERN_KEY_CHARS.0 as usize
        );
        for (ours, c) in [
            (
                p::SHAPE_END,
                agent_sandbox_shape_state::AGENT_SANDBOX_SHAPE_END,
            ),
            (
                p::SHAPE_FREE,
                agent_sandbox_shape_state::AGENT_SANDBOX_SHAPE_FREE,
            ),
            (
                p::SHAPE_IN_USE,
                agent_sandbox_shape_state::AGENT_SANDBOX_SHAPE_IN_USE,
            ),
        ] {
            assert_eq!(u32::from(ours), c.0);
        }
        assert_eq!(p::SHAPE_LEN, size_of::<pattern_shape>());
        assert_eq!(offset_of!(pattern_shape, state), p::SHAPE_STATE_AT);
        assert_eq!(offset_of!(pattern_shape, exact_len), 140);
        assert_eq!(offset_of!(pattern_shape, deep), 141);
        assert_eq!(
            p::MAX_DEEP_SHAPES,
            crate::kernel::skel::types::agent_sandbox_max_deep_shapes::AGENT_SANDBOX_MAX_DEEP_SHAPES
                .0 as usize
        );
        // Eight users at the per-uid cap fill deny_map (proto/resolver.rs).
        assert_eq!(
            8 * crate::proto::resolver::MAX_KEYS_PER_UID,
            agent_sandbox_max_deny::AGENT_SANDBOX_MAX_DENY.0 as usize
        );
    }

    #[test]
    fn rust_keys_match_the_c_layout() {
        // The KeyBytes contract: no padding, so every byte is a field's.
        assert_eq!(size_of::<CFileKey>(), 8 + 8 + 4 + 4);
        assert_eq!(DENY_KEY_LEN, 8 + size_of::<CFileKey>());
        assert_eq!(DENY_KEY_LEN, 32);
        assert_eq!(NAME_KEY_LEN, 8 + size_of::<CFileKey>() + NAME_MAX + 1);
        assert_eq!(offset_of!(CNameKey, dir), 8);
        assert_eq!(offset_of!(CNameKey, name), 32);
        assert_eq!(offset_of!(CDenyKey, file), 8);
        assert_eq!(offset_of!(CFileKey, kind), 20);
    }

    #[test]
    fn key_bytes_round_trip_and_zero_padding() {
        let f = fk((254 << 20) | 1, 42, 257);
        let k = deny_key(0x1122_3344_5566_7788, f);
        let b = k.bytes().to_vec();
        assert_eq!(b.len(), 32);
        assert_eq!(&b[0..8], &0x1122_3344_5566_7788u64.to_ne_bytes());
        assert_eq!(&b[8..16], &42u64.to_ne_bytes());
        assert_eq!(&b[16..24], &257u64.to_ne_bytes());
        assert_eq!(&b[24..28], &((254u32 << 20) | 1).to_ne_bytes());
        assert_eq!(&b[28..32], &[0, 0, 0, 0]);
        assert_eq!(parse_deny_key(&b), Some((0x1122_3344_5566_7788, f)));
        assert_eq!(parse_deny_key(&b[..23]), None);
        // The kind of an entry is the C struct's last field.
        let p = deny_key(
            7,
            fk(99, 42, 0).with_kind(crate::lists::entries::KIND_LISTED_DIR),
        );
        assert_eq!(&p.bytes()[28..32], &2u32.to_ne_bytes());
        assert_eq!(parse_deny_key(p.bytes()).map(|(_, f)| f.kind), Some(2));
        // Layout 2 keys: {cgid, ino, dev, reserved}.
        let mut old = [0u8; 24];
        old[0..8].copy_from_slice(&7u64.to_ne_bytes());
        old[8..16].copy_from_slice(&42u64.to_ne_bytes());
        old[16..20].copy_from_slice(&99u32.to_ne_bytes());
        assert_eq!(parse_deny_key(&old), Some((7, fk(99, 42, 0))));
        let n = NameKey {
            dir: fk(45, 7, 5),
            name: b"id_ed25519".to_vec(),
        };
        let nk = name_key(9, &n);
        let nb = nk.bytes();
        assert_eq!(nb.len(), 288);
        assert_eq!(&nb[32..42], b"id_ed25519");
        assert!(nb[32 + 10..].iter().all(|&c| c == 0));
        assert_eq!(parse_name_key(nb), Some((9, n)));
        // A 255-byte name keeps its terminating NUL.
        let long = NameKey {
            dir: fk(45, 7, 5),
            name: vec![b'x'; NAME_MAX],
        };
        let lb = name_key(1, &long);
        assert_eq!(lb.bytes()[287], 0);
        assert_eq!(parse_name_key(lb.bytes()), Some((1, long)));
    }
}
