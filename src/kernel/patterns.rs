//! The shapes of the sandboxes' name patterns in `pattern_shapes`
//! (agent_sandbox.h: struct pattern_shape): the union of the shape keys
//! ([`KIND_PAT_SHAPE`]) every sandbox's mirror holds, one per slot. A shape
//! is written before any pattern key that needs it ([`Bpf::add_shapes`],
//! before an apply's inserts) and freed after the last such key is gone
//! ([`Bpf::drop_unused_shapes`], after removals), so a hook that reads a
//! slot while it is rewritten can only miss keys that are not there yet or
//! any more.

use std::collections::BTreeSet;

use libbpf_rs::{MapCore, MapFlags};

use crate::kernel::error::{BpfError, lb};
use crate::kernel::programs::Bpf;
use crate::lists::entries::{DenySet, KIND_PAT_SHAPE};
use crate::lists::pattern::{
    MAX_DEEP_SHAPES, MAX_SHAPES, SHAPE_FREE, SHAPE_IN_USE, SHAPE_LEN, SHAPE_STATE_AT, Shape,
};

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
        Ok(())
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
