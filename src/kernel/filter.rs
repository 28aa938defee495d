//! The two arrays the daemon writes through mmap: `sandbox_slots` (the
//! cheap "is this cgroup a sandbox" gate of every hook) and `key_filter`
//! (the "certainly not listed" bitmap, kept here as per-bit counts), and
//! `walk_gens` (the walk memos' generation).

use crate::kernel::skel::types;
use std::collections::HashMap;
use std::io;
use std::os::fd::{AsFd, AsRawFd};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::kernel::error::{BpfError, io_e};
use crate::lists::entries::{
    DenySet, FileKey, HAS_AUDIT_KEY, HAS_PATTERNS_KEY, HAS_RO_DIRS_KEY, HAS_RO_KEY,
    KIND_DEEP_SCOPE, KIND_DIR_BASE, KIND_EXC_USER, KIND_HAS_DIRS, KIND_OPEN, NameKey, is_audit,
    is_deep_pattern, is_pattern, is_ro,
};
use crate::lists::pattern::hash_of_key_name;

/// AGENT_SANDBOX_SLOTS, AGENT_SANDBOX_SLOT_SHARED, AGENT_SANDBOX_SLOT_DIRS
/// AGENT_SANDBOX_SLOT_AUDIT, AGENT_SANDBOX_SLOT_RO and
/// AGENT_SANDBOX_SLOT_RO_DIRS (agent_sandbox.h).
pub(super) const SLOTS: usize = types::agent_sandbox_slots::AGENT_SANDBOX_SLOTS.0 as usize;

pub(super) const SLOT_SHARED: u64 = u64::MAX;

pub(super) const SLOT_DIRS: u64 = 1 << 63;

pub(super) const SLOT_AUDIT: u64 = 1 << 62;

pub(super) const SLOT_RO: u64 = 1 << 61;

pub(super) const SLOT_RO_DIRS: u64 = 1 << 60;

pub(super) const SLOT_PATTERNS: u64 = 1 << 59;

/// walk_gens' one value, struct walk_gens (agent_sandbox.h), as 64-bit words:
/// `marks` is word 0 (written here), `moves` and `names` words 1 and 2 (the
/// kernel's).
pub(super) const WALK_GENS: usize = 3;

pub(super) const WALK_GEN_MARKS: usize = 0;

/// AGENT_SANDBOX_FILTER_BITS_LOG2 (agent_sandbox.h).
pub(super) const FILTER_BITS_LOG2: u32 =
    types::agent_sandbox_filter_bits_log2::AGENT_SANDBOX_FILTER_BITS_LOG2.0;

pub(super) const FILTER_WORDS: usize = 1 << (FILTER_BITS_LOG2 - 6);

pub(super) const TAG_FILE: u64 =
    types::agent_sandbox_filter_tag_file::AGENT_SANDBOX_FILTER_TAG_FILE.0 as u64;

pub(super) const TAG_DIR: u64 =
    types::agent_sandbox_filter_tag_dir::AGENT_SANDBOX_FILTER_TAG_DIR.0 as u64;

/// Whether deny_map entry `f` has a key_filter bit: the kinds the open
/// hook looks up ([`KIND_OPEN`], directory entries, exceptions, audit
/// entries, read-only entries); the hooks that read the other kinds (rmdir, unlink, rename,
/// and opens in case-insensitive directories) are rare enough to go to the
/// map directly.
pub(super) fn uses_filter(f: &FileKey) -> bool {
    f.kind == KIND_OPEN
        || (KIND_DIR_BASE..=KIND_EXC_USER).contains(&f.kind)
        || is_audit(f.kind)
        || is_ro(f.kind)
        || f.kind == KIND_DEEP_SCOPE
}

/// Whether `set` holds read-only entries (the [`HAS_RO_KEY`]).
pub(super) fn has_ro(set: &DenySet) -> bool {
    set.files().binary_search(&HAS_RO_KEY).is_ok()
}

/// Whether `set` holds read-only directory entries that need the whole
/// walk (the [`HAS_RO_DIRS_KEY`]).
pub(super) fn has_ro_dirs(set: &DenySet) -> bool {
    set.files().binary_search(&HAS_RO_DIRS_KEY).is_ok()
}

/// Whether `set` holds name patterns (the [`HAS_PATTERNS_KEY`]).
pub(super) fn has_patterns(set: &DenySet) -> bool {
    set.files().binary_search(&HAS_PATTERNS_KEY).is_ok()
}

/// The key_filter bit of name_map key `n`: its directory's inode number
/// under [`TAG_DIR`] (the hooks look a name up after that bit), or, for a
/// name pattern ([`is_pattern`]), its hash under [`TAG_FILE`]
/// (patterns.bpf.h looks the hash up after that bit).
pub fn name_filter_bit(n: &NameKey) -> u32 {
    match is_pattern(n.dir.kind)
        .then(|| hash_of_key_name(&n.name))
        .flatten()
    {
        // A deep pattern is looked up at each directory above a name: its
        // hash and its scope's inode number (patterns.bpf.h, deep_step()).
        Some(h) if is_deep_pattern(n.dir.kind) => filter_bit(h ^ n.dir.ino, TAG_FILE),
        Some(h) => filter_bit(h, TAG_FILE),
        None => filter_bit(n.dir.ino, TAG_DIR),
    }
}

/// Whether `set` holds audit entries (the [`HAS_AUDIT_KEY`]).
pub(super) fn has_audit(set: &DenySet) -> bool {
    set.files().binary_search(&HAS_AUDIT_KEY).is_ok()
}

/// Whether `set` holds directory entries (the [`KIND_HAS_DIRS`] key).
pub(super) fn has_dirs(set: &DenySet) -> bool {
    set.files()
        .binary_search(&FileKey {
            dev: 0,
            ino: 0,
            subvol: 0,
            kind: KIND_HAS_DIRS,
        })
        .is_ok()
}

/// The key_filter bit of inode number `ino` under `tag` ([`TAG_FILE`] or
/// [`TAG_DIR`]), in `0..2^FILTER_BITS_LOG2`: agent_sandbox_filter_bit() in
/// src/bpf/agent_sandbox.h, the same arithmetic (Fibonacci hashing of
/// `ino << 1 | tag`). Only the inode number is hashed; s_dev and the btrfs
/// subvolume are checked by the map lookup after a hit.
pub fn filter_bit(ino: u64, tag: u64) -> u32 {
    ((ino << 1 | tag).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - FILTER_BITS_LOG2)) as u32
}

/// A shared, writable mapping of a BPF_F_MMAPABLE array of u64 values.
pub(super) struct WordArray {
    ptr: NonNull<AtomicU64>,
    len: usize,
}

impl WordArray {
    pub(super) fn map(map: &impl AsFd, len: usize, what: &str) -> Result<WordArray, BpfError> {
        let bytes = len * 8;
        // SAFETY: maps `bytes` of the array map's value area, shared; the
        // kernel keeps it alive while mapped; freed in Drop.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                bytes,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                map.as_fd().as_raw_fd(),
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(io_e(format!("mmap {what}"))(io::Error::last_os_error()));
        }
        Ok(WordArray {
            ptr: NonNull::new(p.cast()).ok_or_else(|| {
                io_e(format!("mmap {what}"))(io::Error::from(io::ErrorKind::Other))
            })?,
            len,
        })
    }

    pub(super) fn word(&self, i: usize) -> &AtomicU64 {
        assert!(i < self.len);
        // SAFETY: in bounds of the mapping; u64 slots are 8-byte aligned (page-aligned base).
        unsafe { &*self.ptr.as_ptr().add(i) }
    }
}

impl Drop for WordArray {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly what map() mapped.
        unsafe { libc::munmap(self.ptr.as_ptr().cast(), self.len * 8) };
    }
}

/// key_filter with the count of live keys behind every set bit. A bit is set
/// before its key can matter and cleared only when its count drops to zero;
/// keys the kernel dropped (freed inodes) keep their counts, which costs a
/// little filter precision until the next daemon start, never a miss.
pub(super) struct Filter {
    pub(super) words: WordArray,
    pub(super) counts: HashMap<u32, u32>,
}

impl Filter {
    pub(super) fn add(&mut self, bit: u32) {
        let c = self.counts.entry(bit).or_insert(0);
        *c += 1;
        if *c == 1 {
            self.words
                .word((bit >> 6) as usize)
                .fetch_or(1 << (bit & 63), Ordering::SeqCst);
        }
    }

    pub(super) fn remove(&mut self, bit: u32) {
        if let Some(c) = self.counts.get_mut(&bit) {
            *c -= 1;
            if *c == 0 {
                self.counts.remove(&bit);
                self.words
                    .word((bit >> 6) as usize)
                    .fetch_and(!(1 << (bit & 63)), Ordering::SeqCst);
            }
        }
    }

    /// Rewrites every word from the counts (start-up: the mirror is complete).
    pub(super) fn rewrite(&mut self) {
        let mut words = vec![0u64; FILTER_WORDS];
        for &bit in self.counts.keys() {
            words[(bit >> 6) as usize] |= 1 << (bit & 63);
        }
        for (i, w) in words.into_iter().enumerate() {
            self.words.word(i).store(w, Ordering::SeqCst);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn filter_bits_are_spread_and_tagged() {
        // Values agent_sandbox_filter_bit() in src/bpf/agent_sandbox.h gives
        // for the same inode numbers (compiled with gcc on x86-64): a change
        // on either side must show here.
        assert_eq!(filter_bit(0, TAG_FILE), 0);
        assert_eq!(filter_bit(1234, TAG_FILE), 2_582_720);
        assert_eq!(filter_bit(256, TAG_FILE), 3_635_641);
        assert_eq!(filter_bit(42, TAG_DIR), 4_470_197);
        assert_eq!(filter_bit(256, TAG_DIR), 431_478);
        let a = filter_bit(1234, TAG_FILE);
        assert_ne!(a, filter_bit(1234, TAG_DIR));
        assert!(a < 1 << FILTER_BITS_LOG2);
        // 100,000 consecutive inode numbers fill about as many distinct bits
        // as a uniform hash would (1 - e^(-n/m) of 2^23 bits), and so do the
        // directory bits of the same numbers.
        for tag in [TAG_FILE, TAG_DIR] {
            let bits: HashSet<u32> = (0..100_000u64).map(|i| filter_bit(1000 + i, tag)).collect();
            assert!(bits.len() > 99_000, "{} distinct bits", bits.len());
        }
    }
}
