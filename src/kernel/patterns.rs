//! The shapes of the sandboxes' name patterns in `pattern_shapes`
//! (agent_sandbox.h: struct pattern_shape): the union of the shape keys
//! ([`KIND_PAT_SHAPE`]) every sandbox's mirror holds, one per slot. A shape
//! is written before any pattern key that needs it ([`Bpf::add_shapes`],
//! before an apply's inserts) and freed after the last such key is gone
//! ([`Bpf::drop_unused_shapes`], after removals), so a hook that reads a
//! slot while it is rewritten can only miss keys that are not there yet or
//! any more.
//!
//! The patterns' first test, `pat_prefilter` ([`Prefilter`]), follows
//! the same order: the bits a sandbox's patterns need
//! ([`KIND_PAT_PREFILTER`] keys) are set before its keys are written, and
//! the union is computed again from the mirrors after removals.

use std::collections::BTreeSet;

use libbpf_rs::{MapCore, MapFlags};

use crate::kernel::error::{BpfError, lb};
use crate::kernel::programs::Bpf;
use crate::lists::entries::{DenySet, KIND_PAT_PREFILTER, KIND_PAT_SHAPE};
use crate::lists::pattern::{
    MAX_DEEP_SHAPES, MAX_SHAPES, SHAPE_FREE, SHAPE_IN_USE, SHAPE_LEN, SHAPE_STATE_AT, Shape,
    prefilter_bit,
};

/// Words of `struct pattern_prefilter`'s bits (agent_sandbox.h).
const PREFILTER_WORDS: usize = 1024;

/// The patterns' first test as the daemon last wrote it (agent_sandbox.h:
/// struct pattern_prefilter): the bits of the ends some pattern needs
/// ([`prefilter_bit`]), and whether one needs the test off.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Prefilter {
    bits: Vec<u64>,
    always: bool,
}

impl Default for Prefilter {
    fn default() -> Self {
        Prefilter {
            bits: vec![0; PREFILTER_WORDS],
            always: false,
        }
    }
}

impl Prefilter {
    /// Adds the bit of one [`KIND_PAT_PREFILTER`] key's name (`h` or `t`
    /// and two or three bytes, or `*`); any other name turns the test off
    /// (the full match, never a miss).
    fn add(&mut self, name: &[u8]) {
        let (side, bytes) = match name.split_first() {
            Some((b'h', b)) if (2..=3).contains(&b.len()) => (0, b),
            Some((b't', b)) if (2..=3).contains(&b.len()) => (1, b),
            _ => {
                self.always = true;
                return;
            }
        };
        let i = prefilter_bit(side, bytes);
        self.bits[i / 64] |= 1 << (i % 64);
    }

    /// The union of the bits every set in `sets` needs.
    fn of<'a>(sets: impl Iterator<Item = &'a DenySet>) -> Prefilter {
        let mut p = Prefilter::default();
        for n in sets
            .flat_map(|s| s.names())
            .filter(|n| n.dir.kind == KIND_PAT_PREFILTER)
        {
            p.add(&n.name);
        }
        p
    }

    /// Whether `name` (folded, at least two bytes) passes the test, as the
    /// hook decides (prefilter_passes()).
    #[cfg(test)]
    fn passes(&self, name: &[u8]) -> bool {
        let on = |i: usize| self.bits[i / 64] >> (i % 64) & 1 == 1;
        let n = name.len();
        self.always
            || on(prefilter_bit(0, &name[..2]))
            || on(prefilter_bit(1, &name[n - 2..]))
            || (n >= 3
                && (on(prefilter_bit(0, &name[..3])) || on(prefilter_bit(1, &name[n - 3..]))))
    }

    /// The map value's bytes (native byte order).
    fn bytes(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(8 * PREFILTER_WORDS + 8);
        for w in &self.bits {
            v.extend_from_slice(&w.to_ne_bytes());
        }
        v.extend_from_slice(&u32::from(self.always).to_ne_bytes());
        v.extend_from_slice(&0u32.to_ne_bytes());
        v
    }
}

/// What each slot of pattern_shapes holds, as the daemon wrote it.
#[derive(Debug, Clone, Default)]
pub struct ShapeSlots {
    /// Per slot: the shape's text, or None (free, or never used).
    slots: Vec<Option<Vec<u8>>>,
}

/// The shape texts `set` uses (its [`KIND_PAT_SHAPE`] names).
fn shapes_of(set: &DenySet) -> impl Iterator<Item = &[u8]> {
    set.names()
        .iter()
        .filter(|n| n.dir.kind == KIND_PAT_SHAPE)
        .map(|n| n.name.as_slice())
}

impl Bpf {
    /// Reads pattern_shapes back after a start: a slot whose shape some
    /// sandbox's mirror uses (same seed and masks) keeps it; any other slot
    /// in use is freed once no key can need it (now: the mirror is what the
    /// maps hold), and a used shape missing from the map is written.
    pub(super) fn load_shapes(&mut self) {
        let used: BTreeSet<Vec<u8>> = self
            .mirror
            .values()
            .flat_map(shapes_of)
            .map(<[u8]>::to_vec)
            .collect();
        self.shapes.slots = vec![None; MAX_SHAPES];
        for i in 0..MAX_SHAPES {
            let Ok(Some(v)) = self
                .maps
                .pattern_shapes
                .lookup(&(i as u32).to_ne_bytes(), MapFlags::ANY)
            else {
                continue;
            };
            if v.get(SHAPE_STATE_AT) != Some(&SHAPE_IN_USE) {
                continue;
            }
            let held = used
                .iter()
                .find(|t| Shape::parse(t).is_some_and(|s| s.c_bytes()[..] == v[..SHAPE_LEN]));
            match held {
                Some(t) => self.shapes.slots[i] = Some(t.clone()),
                None => self.free_shape_slot(i),
            }
        }
        let missing: Vec<Vec<u8>> = used
            .into_iter()
            .filter(|t| !self.shapes.slots.iter().flatten().any(|s| s == t))
            .collect();
        for t in missing {
            if let Err(e) = self.write_shape(&t) {
                log::warn!("{e}");
            }
        }
        let prefilter = Prefilter::of(self.mirror.values());
        if let Err(e) = self.write_prefilter(prefilter) {
            log::warn!("{e}");
        }
    }

    /// Writes the patterns' first test, if it changed.
    ///
    /// # Errors
    /// A libbpf error of the update (the hooks keep the last one written).
    fn write_prefilter(&mut self, p: Prefilter) -> Result<(), BpfError> {
        if self.prefilter.as_ref() == Some(&p) {
            return Ok(());
        }
        self.maps
            .pat_prefilter
            .update(&0u32.to_ne_bytes(), &p.bytes(), MapFlags::ANY)
            .map_err(lb("write the patterns' first test into pat_prefilter"))?;
        self.prefilter = Some(p);
        Ok(())
    }

    /// Writes every shape `set` uses that pattern_shapes lacks.
    ///
    /// # Errors
    /// [`BpfError::Unsupported`] when every slot is taken (the machine's
    /// sandboxes use [`MAX_SHAPES`] other shapes); a libbpf error of the
    /// update.
    pub(super) fn add_shapes(&mut self, set: &DenySet) -> Result<(), BpfError> {
        let new: Vec<Vec<u8>> = shapes_of(set)
            .filter(|t| !self.shapes.slots.iter().flatten().any(|s| s == t))
            .map(<[u8]>::to_vec)
            .collect();
        for t in new {
            self.write_shape(&t)?;
        }
        // The bits `set` needs, added to those written (before its keys).
        let mut p = self.prefilter.clone().unwrap_or_default();
        for n in set
            .names()
            .iter()
            .filter(|n| n.dir.kind == KIND_PAT_PREFILTER)
        {
            p.add(&n.name);
        }
        self.write_prefilter(p)
    }

    /// Frees the slots of shapes no sandbox's mirror uses any more.
    pub(super) fn drop_unused_shapes(&mut self) {
        let used: BTreeSet<&[u8]> = self.mirror.values().flat_map(shapes_of).collect();
        let unused: Vec<usize> = (0..self.shapes.slots.len())
            .filter(|&i| {
                self.shapes.slots[i]
                    .as_deref()
                    .is_some_and(|t| !used.contains(t))
            })
            .collect();
        for i in unused {
            self.free_shape_slot(i);
            self.shapes.slots[i] = None;
        }
        let prefilter = Prefilter::of(self.mirror.values());
        if let Err(e) = self.write_prefilter(prefilter) {
            log::warn!("{e}");
        }
    }

    /// Writes shape `text` into the lowest free slot.
    fn write_shape(&mut self, text: &[u8]) -> Result<(), BpfError> {
        let shape = Shape::parse(text).ok_or_else(|| {
            BpfError::Unsupported(format!(
                "a name pattern's shape {:?} is not one the hook can match",
                String::from_utf8_lossy(text)
            ))
        })?;
        if self.shapes.slots.len() < MAX_SHAPES {
            self.shapes.slots.resize(MAX_SHAPES, None);
        }
        let deep = self
            .shapes
            .slots
            .iter()
            .flatten()
            .filter(|t| t.starts_with(b"+"))
            .count();
        if shape.deep && deep >= MAX_DEEP_SHAPES {
            return Err(BpfError::Unsupported(format!(
                "the sandboxes on this machine use {MAX_DEEP_SHAPES} shapes of `DIR/**/NAME` \
                 patterns already (each costs a walk up from every name of its shape); give \
                 such patterns the same shape or use `**/NAME`"
            )));
        }
        let Some(i) = self.shapes.slots.iter().position(Option::is_none) else {
            return Err(BpfError::Unsupported(format!(
                "the sandboxes on this machine use {MAX_SHAPES} name-pattern shapes already (a \
                 shape is where a pattern's fixed bytes, `?` and `*` are: `.env.*` and `.aws.*` \
                 share one); use fewer distinct shapes"
            )));
        };
        self.maps
            .pattern_shapes
            .update(&(i as u32).to_ne_bytes(), &shape.c_bytes(), MapFlags::ANY)
            .map_err(lb("write a shape into pattern_shapes"))?;
        self.shapes.slots[i] = Some(text.to_vec());
        Ok(())
    }

    /// Marks slot `i` free (its state [`SHAPE_FREE`]: the hooks skip it).
    fn free_shape_slot(&self, i: usize) {
        let mut v = [0u8; SHAPE_LEN];
        v[SHAPE_STATE_AT] = SHAPE_FREE;
        if let Err(e) =
            self.maps
                .pattern_shapes
                .update(&(i as u32).to_ne_bytes(), &v, MapFlags::ANY)
        {
            log::warn!("cannot free slot {i} of pattern_shapes: {e}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lists::denylist;
    use crate::lists::entries::{FileKey, NameKey};
    use crate::lists::pattern::NamePattern;

    /// The set of the prefilter keys of `patterns`, as a resolver sends them.
    fn set_of(patterns: &[NamePattern]) -> DenySet {
        let dir = FileKey {
            dev: 0,
            ino: 0,
            subvol: 0,
            kind: KIND_PAT_PREFILTER,
        };
        let names = patterns
            .iter()
            .map(|p| NameKey {
                dir,
                name: p.prefilter(),
            })
            .collect();
        DenySet::new(Vec::new(), names)
    }

    /// A name ASCII-folded as the hook folds it.
    fn folded(name: &str) -> Vec<u8> {
        name.to_ascii_lowercase().into_bytes()
    }

    #[test]
    fn the_first_test_passes_every_name_a_pattern_matches_and_is_off_when_it_must_be() {
        let p = |s: &str| NamePattern::parse(s.as_bytes()).unwrap();
        assert_eq!(p(".env").prefilter(), b"h.en");
        assert_eq!(p(".ENV.*").prefilter(), b"h.en");
        assert_eq!(p("id*").prefilter(), b"hid");
        assert_eq!(p("*.pem").prefilter(), b"tpem");
        assert_eq!(p("?d_*.key").prefilter(), b"tkey");
        assert_eq!(p("?d_*y").prefilter(), b"*");
        assert_eq!(p("?ab").prefilter(), b"tab");
        assert_eq!(p("??x").prefilter(), b"*");
        assert_eq!(p("a*b").prefilter(), b"*");
        let pats = [
            p(".env"),
            p(".env.*"),
            p("*.pem"),
            p("id_*"),
            p("?ecret.txt"),
        ];
        let f = Prefilter::of(std::iter::once(&set_of(&pats)));
        assert!(!f.always);
        for name in [
            ".env",
            ".ENV.local",
            "server.PEM",
            "id_ed25519",
            "secret.txt",
            "Xecret.TXT",
        ] {
            assert!(pats.iter().any(|q| q.matches(name.as_bytes())), "{name}");
            assert!(f.passes(&folded(name)), "{name} must reach the lookups");
        }
        for name in ["main.rs", "README.md", "Cargo.toml", "envoy", "ab"] {
            assert!(!f.passes(&folded(name)), "{name} matches no pattern");
        }
        // A pattern with neither end fixed turns the test off for everyone.
        let off = Prefilter::of(std::iter::once(&set_of(&[p("a*b")])));
        assert!(off.always && off.passes(b"zz"));
        // The value is the C struct's size.
        assert_eq!(f.bytes().len(), 8 * PREFILTER_WORDS + 8);
    }

    #[test]
    fn the_shipped_catalogue_keeps_the_first_test_on_and_source_files_out() {
        let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("packaging/catalog");
        let mut pats = Vec::new();
        for e in std::fs::read_dir(&src).unwrap() {
            let text = std::fs::read(e.unwrap().path()).unwrap();
            for entry in denylist::parse(&text).entries {
                pats.extend(entry.pattern);
            }
        }
        assert!(pats.len() >= 10, "{}", pats.len());
        let f = Prefilter::of(std::iter::once(&set_of(&pats)));
        assert!(
            !f.always,
            "a catalogue pattern turns the patterns' first test off"
        );
        for name in [
            "main.rs",
            "index.js",
            "lib.rs",
            "Cargo.toml",
            "package.json",
            "README.md",
            "app.py",
            "Makefile",
        ] {
            assert!(
                !f.passes(&folded(name)),
                "{name}: a source file goes through every shape"
            );
        }
    }
}
