//! The sandboxes in the maps: a mirror of what each sandbox's entries are
//! (deny_map, name_map, agent_cgid_set, sock_allow), diff-applied
//! ([`Bpf::apply`]), versioned, and forgotten with their cgroup.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::Ordering;

use libbpf_rs::{MapCore, MapFlags};

use crate::kernel::codec::{
    CDenyKey, DENY_KEY_LEN, KeyBytes, NAME_KEY_LEN, deny_key, deny_key_bytes, into_sets,
    name_keys_bytes, parse_deny_key, parse_name_key,
};
use crate::kernel::error::{BpfError, lb};
use crate::kernel::filter::{
    SLOT_AUDIT, SLOT_DIRS, SLOT_PATTERNS, SLOT_RO, SLOT_RO_DIRS, SLOT_SHARED, SLOTS, TAG_FILE,
    WALK_GEN_MARKS, filter_bit, has_audit, has_dirs, has_patterns, has_ro, has_ro_dirs,
    name_filter_bit, uses_filter,
};
use crate::kernel::programs::Bpf;
use crate::lists::entries::{
    DenySet, FileKey, KIND_EXC_BASE, KIND_EXC_USER, KIND_HAS_AUDIT, KIND_PAT_DEEP_EXC_BASE,
    KIND_PAT_DEEP_EXC_USER, KIND_PAT_EXC_BASE, KIND_PAT_EXC_USER, NameKey, is_audit,
};

/// Length of `struct port_key` (agent_sandbox.h).
pub(super) const PORT_KEY_LEN: usize = 16;

/// `struct port_key` for {`cgid`, `proto`, `port`}: the cgroup id, the port
/// and the protocol in native byte order, zero padding.
pub(super) fn port_key(cgid: u64, proto: u8, port: u16) -> [u8; PORT_KEY_LEN] {
    let mut k = [0u8; PORT_KEY_LEN];
    k[..8].copy_from_slice(&cgid.to_ne_bytes());
    k[8..10].copy_from_slice(&port.to_ne_bytes());
    k[10] = proto;
    k
}

/// Value stored for every present key (the maps are sets).
pub(super) const PRESENT: [u8; 1] = [1];

/// What an apply ([`Bpf::apply`]) does with what the desired set lacks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Prune {
    /// Remove a sandbox's stale entries and write new exception keys: the
    /// maps then hold exactly the desired set (the daemon asks for it only
    /// where its policy lets a launch loosen a sandbox).
    Stale,
    /// Keep stale entries and hold new exception and audit keys back: the
    /// maps then hold at least the desired set's denials (a launch from
    /// inside a sandbox, or an incomplete scan).
    Keep,
}

/// Counts of one diff-apply (file keys and names together).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct ApplyStats {
    /// Entries inserted.
    pub added: usize,
    /// Stale entries removed (with [`Prune::Keep`]: stale entries kept).
    pub removed: usize,
    /// Of those, listed entries ([`DenySet::entries`]): what the user is told.
    pub removed_entries: usize,
    /// Entries already present and kept.
    pub kept: usize,
    /// New exception keys (`!PATH` lines) written: an exact apply that
    /// re-allows files, which the launcher is told.
    pub exceptions_added: usize,
    /// New exception and audit keys not written because the apply is
    /// add-only (a launch from inside a sandbox): they take effect at the
    /// next launch from outside.
    pub exceptions_held_back: usize,
}

/// Whether deny_map entry `f` is an exception (`KIND_EXC_*`).
pub(super) fn is_exception(f: &FileKey) -> bool {
    (KIND_EXC_BASE..=KIND_EXC_USER).contains(&f.kind)
        || f.kind == KIND_PAT_EXC_BASE
        || f.kind == KIND_PAT_EXC_USER
        || f.kind == KIND_PAT_DEEP_EXC_BASE
        || f.kind == KIND_PAT_DEEP_EXC_USER
}

/// Whether a new key of `f`'s kind waits for a launch from outside: an
/// exception (it re-allows) or an audit key (the strictness rule: no audit
/// mark takes effect from inside), with [`KIND_HAS_AUDIT`].
fn held_back(f: &FileKey) -> bool {
    is_exception(f) || is_audit(f.kind) || f.kind == KIND_HAS_AUDIT
}

/// The keys of `set` (file keys and names) for which `which` holds, counted.
fn count(set: &DenySet, which: impl Fn(&FileKey) -> bool) -> usize {
    set.files().iter().filter(|f| which(f)).count()
        + set.names().iter().filter(|n| which(&n.dir)).count()
}

/// The exception keys of `set`, counted.
pub(super) fn exceptions(set: &DenySet) -> usize {
    count(set, is_exception)
}

/// The keys of `set` that [`held_back`] holds, counted ([`KIND_HAS_AUDIT`]
/// aside: it says, it lists nothing).
pub(super) fn held_back_keys(set: &DenySet) -> usize {
    count(set, |f| held_back(f) && f.kind != KIND_HAS_AUDIT)
}

/// `desired` without the exception and audit keys that `current` lacks:
/// what an add-only apply may write (from inside a sandbox, an exception
/// must not loosen it, nor an audit mark appear).
pub fn without_new_exceptions(desired: &DenySet, current: &DenySet) -> DenySet {
    let new = desired.minus(current);
    let drop = DenySet::new(
        new.files()
            .iter()
            .filter(|f| held_back(f))
            .copied()
            .collect(),
        new.names()
            .iter()
            .filter(|n| held_back(&n.dir))
            .cloned()
            .collect(),
    );
    desired.minus(&drop)
}

/// The cause of [`Bpf::version`] numbers: one counter for the process, so
/// that a number is never handed out twice, even by a `Bpf` loaded again.
pub(super) static NEXT_VERSION: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

impl Bpf {
    /// Makes `sockets` (file keys of bound Unix sockets' inodes, kind 0)
    /// exactly the sockets sandbox `cgid` may reach although a process of its
    /// uid made them outside (the `sock_allow` map read by
    /// lsm/unix_stream_connect and lsm/unix_may_send). Entries of other
    /// sandboxes are untouched. Returns how many entries were added.
    ///
    /// # Errors
    /// [`BpfError::Libbpf`] for the first failed update or delete.
    pub fn set_sock_allow(&self, cgid: u64, sockets: &[FileKey]) -> Result<usize, BpfError> {
        let want: HashSet<Vec<u8>> = sockets
            .iter()
            .map(|f| deny_key(cgid, f.with_kind(0)).bytes().to_vec())
            .collect();
        let ours = |k: &[u8]| CDenyKey::from_bytes(k).is_some_and(|d| d.cgid == cgid);
        set_exactly(&self.maps.sock_allow, "sock_allow", &want, ours).map(|(added, _)| added)
    }

    /// Makes `ports` ({IP protocol (6 TCP, 17 UDP), port}) exactly the
    /// loopback ports where sandbox `cgid` may reach servers its uid made
    /// outside (the `port_allow` map read by the cgroup sock_addr programs,
    /// loopback.bpf.h; key `struct port_key` of agent_sandbox.h). Entries of
    /// other sandboxes are untouched. Returns how many entries were added.
    ///
    /// # Errors
    /// [`BpfError::Libbpf`] for the first failed update or delete.
    pub fn set_port_allow(&self, cgid: u64, ports: &[(u8, u16)]) -> Result<usize, BpfError> {
        let want: HashSet<Vec<u8>> = ports
            .iter()
            .map(|&(proto, port)| port_key(cgid, proto, port).to_vec())
            .collect();
        let ours = |k: &[u8]| k.len() == PORT_KEY_LEN && k[..8] == cgid.to_ne_bytes();
        set_exactly(&self.maps.port_allow, "port_allow", &want, ours).map(|(added, _)| added)
    }

    /// Reads the maps back into the mirror, the filter counts and the slots.
    pub(super) fn load_mirror(&mut self) {
        let mut found: HashMap<u64, (Vec<FileKey>, Vec<NameKey>)> = HashMap::new();
        for k in self.maps.deny_map.keys() {
            if let Some((cgid, f)) = parse_deny_key(&k) {
                found.entry(cgid).or_default().0.push(f);
            }
        }
        for k in self.maps.name_map.keys() {
            if let Some((cgid, n)) = parse_name_key(&k) {
                found.entry(cgid).or_default().1.push(n);
            }
        }
        self.mirror = into_sets(found);
        for k in self.maps.agent_cgid_set.keys() {
            if let Ok(b) = <[u8; 8]>::try_from(k.as_slice()) {
                self.sandboxes.insert(u64::from_ne_bytes(b));
            }
        }
        for set in self.mirror.values() {
            for f in set.files().iter().filter(|f| uses_filter(f)) {
                *self
                    .filter
                    .counts
                    .entry(filter_bit(f.ino, TAG_FILE))
                    .or_insert(0) += 1;
            }
            for n in set.names() {
                *self.filter.counts.entry(name_filter_bit(n)).or_insert(0) += 1;
            }
        }
        // With nothing listed, leave the bitmap's pages untouched (they would
        // count in the daemon's RSS); a stale bit only costs a hash lookup.
        if !self.filter.counts.is_empty() {
            self.filter.rewrite();
        }
        for slot in 0..SLOTS {
            self.write_slot(slot);
        }
        self.load_shapes();
        // The flags and shapes just written may differ from those the memos rest on.
        self.stale_walk_memos();
    }

    /// Recomputes slot `slot` of sandbox_slots from the sandbox set: 0, the
    /// one sandbox's cgroup id (with [`SLOT_DIRS`] when its mirror holds
    /// directory entries, [`SLOT_AUDIT`] when it holds audit entries,
    /// [`SLOT_RO`] when it holds read-only entries, [`SLOT_RO_DIRS`] when
    /// some need the whole walk) or
    /// [`SLOT_SHARED`].
    pub(super) fn write_slot(&self, slot: usize) {
        let mut holders = self
            .sandboxes
            .iter()
            .filter(|&&c| (c as usize) & (SLOTS - 1) == slot);
        let value = match (holders.next(), holders.next()) {
            (None, _) => 0,
            (Some(&c), None) => match self.mirror.get(&c) {
                Some(set) => {
                    let dirs = if has_dirs(set) { SLOT_DIRS } else { 0 };
                    let audit = if has_audit(set) { SLOT_AUDIT } else { 0 };
                    let ro = if has_ro(set) { SLOT_RO } else { 0 };
                    let ro_dirs = if has_ro_dirs(set) { SLOT_RO_DIRS } else { 0 };
                    let patterns = if has_patterns(set) { SLOT_PATTERNS } else { 0 };
                    c | dirs | audit | ro | ro_dirs | patterns
                }
                None => c,
            },
            (Some(_), Some(_)) => SLOT_SHARED,
        };
        self.slots.word(slot).store(value, Ordering::SeqCst);
    }

    /// Makes every walk memo and file memo of the programs stale
    /// (walk_gens.marks): called after deny_map, name_map or a sandbox's
    /// flags in sandbox_slots changed, before the change is reported.
    pub(super) fn stale_walk_memos(&self) {
        self.walk_gens
            .word(WALK_GEN_MARKS)
            .fetch_add(1, Ordering::SeqCst);
    }

    /// How many file keys and names sandbox `cgid` would hold after an
    /// add-only apply of `desired`: (files, names) of the union.
    pub fn union_len(&self, cgid: u64, desired: &DenySet) -> (usize, usize) {
        self.mirror
            .get(&cgid)
            .map_or((desired.files().len(), desired.names().len()), |held| {
                held.union_len(desired)
            })
    }

    /// The version of sandbox `cgid`'s entries: it changes with every apply,
    /// removal or forgetting of them (never back to an earlier number), so
    /// a caller that saw the same version before an apply and after it knows
    /// nothing else touched them in between.
    pub fn version(&self, cgid: u64) -> Option<u64> {
        self.versions.get(&cgid).copied()
    }

    /// Whether sandbox `cgid` is as it was at `version`: no apply, removal
    /// or forgetting since, and no key of any sandbox dropped by the kernel
    /// since its last apply wrote every key (a drop may have taken one of its
    /// keys; see [`Bpf::apply`]). Then an apply of the set it was last
    /// applied with would change nothing.
    pub fn unchanged_since(&self, cgid: u64, version: u64) -> bool {
        self.version(cgid) == Some(version)
            && self.sandboxes.contains(&cgid)
            && self
                .dropped_keys()
                .is_some_and(|d| self.drops_seen.get(&cgid) == Some(&d))
    }

    /// How many file keys and names the mirror holds for sandbox `cgid`.
    pub fn held_len(&self, cgid: u64) -> usize {
        self.mirror.get(&cgid).map_or(0, DenySet::len)
    }

    /// How many entries that deny a read ([`DenySet::read_entries`]) the mirror holds for
    /// sandbox `cgid`.
    pub fn held_entries(&self, cgid: u64) -> usize {
        self.mirror.get(&cgid).map_or(0, DenySet::read_entries)
    }

    /// What the mirror holds for sandbox `cgid` (what its last applies put in
    /// the maps, less what they removed), if anything.
    pub fn held(&self, cgid: u64) -> Option<&DenySet> {
        self.mirror.get(&cgid)
    }

    pub(super) fn bump(&mut self, cgid: u64) {
        let v = NEXT_VERSION.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.versions.insert(cgid, v);
    }

    /// Cgroup ids that have entries in any map.
    pub fn known_sandboxes(&self) -> HashSet<u64> {
        self.sandboxes
            .iter()
            .chain(self.mirror.keys())
            .copied()
            .collect()
    }

    /// Makes the maps hold exactly `desired` (with [`Prune::Keep`]: at
    /// least `desired`) for sandbox `cgid` and marks `cgid` as a sandbox:
    /// inserts the new entries (and their filter bits), then adds `cgid` to
    /// agent_cgid_set and sandbox_slots, then removes stale entries, so the
    /// live set never drops below the desired set. When the kernel has
    /// dropped keys of freed inodes since the last apply (dropped_keys moved),
    /// every desired file key is written again, not only the new ones: a
    /// listed file may now reuse a dropped inode number the mirror still holds.
    ///
    /// # Errors
    /// A failed insert (map full, ...) returns the error before anything is
    /// removed; entries inserted so far stay (they only add denials).
    pub fn apply(
        &mut self,
        cgid: u64,
        desired: &DenySet,
        prune: Prune,
    ) -> Result<ApplyStats, BpfError> {
        self.bump(cgid);
        let current = self.mirror.remove(&cgid).unwrap_or_default();
        let mut new = desired.minus(&current);
        let fresh_exceptions = exceptions(&new);
        let fresh_held = held_back_keys(&new);
        let filtered;
        let desired = if prune == Prune::Keep && (fresh_held > 0 || has_audit(&new)) {
            filtered = without_new_exceptions(desired, &current);
            new = filtered.minus(&current);
            &filtered
        } else {
            desired
        };
        let stale = current.minus(desired);
        let stats = ApplyStats {
            added: new.len(),
            removed: stale.len(),
            removed_entries: stale.entries(),
            kept: desired.len() - new.len(),
            exceptions_added: if prune == Prune::Stale {
                fresh_exceptions
            } else {
                0
            },
            exceptions_held_back: if prune == Prune::Keep { fresh_held } else { 0 },
        };
        let drops = self.dropped_keys();
        let write_all = drops.is_none() || drops != self.drops_seen.get(&cgid).copied();
        let total = current.len() + self.mirror.values().map(DenySet::len).sum::<usize>();
        let files = if write_all {
            desired.files()
        } else {
            new.files()
        };
        // The shapes before the pattern keys that need them.
        if let Err(e) = self.add_shapes(&new) {
            self.mirror.insert(cgid, current);
            return Err(e);
        }
        let file_keys = deny_key_bytes(cgid, files);
        let inserted = insert(
            &self.maps.deny_map,
            "deny_map",
            &file_keys,
            DENY_KEY_LEN,
            total,
        );
        if let Err(e) = inserted {
            // Keys inserted before the error stay: memos made without them go stale.
            self.stale_walk_memos();
            self.mirror.insert(cgid, current);
            return Err(e);
        }
        for f in new.files().iter().filter(|f| uses_filter(f)) {
            self.filter.add(filter_bit(f.ino, TAG_FILE));
        }
        let inserted = insert(
            &self.maps.name_map,
            "name_map",
            &name_keys_bytes(cgid, new.names()),
            NAME_KEY_LEN,
            total,
        );
        if let Err(e) = inserted {
            self.stale_walk_memos();
            let with_files = DenySet::new(new.files().to_vec(), Vec::new());
            self.mirror.insert(cgid, current.union(&with_files));
            return Err(e);
        }
        for n in new.names() {
            self.filter.add(name_filter_bit(n));
        }
        // After the keys and their key_filter bits: a walk that read the
        // old count may have missed either, and its memo must not be used
        // (a walk that reads the new count sees both).
        if !file_keys.is_empty() || !new.names().is_empty() {
            self.stale_walk_memos();
        }
        // A no-change apply keeps the set it had: no copy of 100,000 keys.
        let held = if new.is_empty() {
            current
        } else {
            current.union(&new)
        };
        self.mirror.insert(cgid, held);
        self.write_slot((cgid as usize) & (SLOTS - 1));
        self.add_sandbox(cgid)?;
        if prune == Prune::Stale {
            self.remove(cgid, stale.files(), stale.names());
        }
        if let (true, Some(d)) = (write_all, drops) {
            self.drops_seen.insert(cgid, d);
        }
        Ok(stats)
    }

    /// The kernel's count of dropped deny_map keys (None if unreadable).
    pub(super) fn dropped_keys(&self) -> Option<u64> {
        let v = self
            .maps
            .dropped_keys
            .lookup(&0u32.to_ne_bytes(), MapFlags::ANY)
            .ok()??;
        Some(u64::from_ne_bytes(v.get(..8)?.try_into().ok()?))
    }

    pub(super) fn add_sandbox(&mut self, cgid: u64) -> Result<(), BpfError> {
        if self.sandboxes.contains(&cgid) {
            return Ok(());
        }
        self.maps
            .agent_cgid_set
            .update(&cgid.to_ne_bytes(), &PRESENT, MapFlags::ANY)
            .map_err(lb("insert into agent_cgid_set"))?;
        self.sandboxes.insert(cgid);
        self.write_slot((cgid as usize) & (SLOTS - 1));
        Ok(())
    }

    /// Removes entries of sandbox `cgid` from the maps, the mirror and the filter.
    pub(super) fn remove(&mut self, cgid: u64, files: &[FileKey], names: &[NameKey]) {
        if files.is_empty() && names.is_empty() {
            return;
        }
        self.bump(cgid);
        let gone = delete(
            &self.maps.deny_map,
            "deny_map",
            cgid,
            &deny_key_bytes(cgid, files),
            DENY_KEY_LEN,
        );
        let mut gone_files = Vec::new();
        for (f, ok) in files.iter().zip(gone) {
            if ok {
                if uses_filter(f) {
                    self.filter.remove(filter_bit(f.ino, TAG_FILE));
                }
                gone_files.push(*f);
            }
        }
        let gone = delete(
            &self.maps.name_map,
            "name_map",
            cgid,
            &name_keys_bytes(cgid, names),
            NAME_KEY_LEN,
        );
        let mut gone_names = Vec::new();
        for (n, ok) in names.iter().zip(gone) {
            if ok {
                self.filter.remove(name_filter_bit(n));
                gone_names.push(n.clone());
            }
        }
        let held = self.mirror.entry(cgid).or_default();
        *held = held.minus(&DenySet::new(gone_files, gone_names));
        self.drop_unused_shapes();
        self.stale_walk_memos();
        self.write_slot((cgid as usize) & (SLOTS - 1));
    }

    /// Forgets a sandbox that no longer exists: removes `cgid` from
    /// agent_cgid_set and sandbox_slots, then its entries.
    pub fn forget_sandbox(&mut self, cgid: u64) {
        self.drops_seen.remove(&cgid);
        if self.sandboxes.remove(&cgid) {
            self.write_slot((cgid as usize) & (SLOTS - 1));
            if let Err(e) = self.maps.agent_cgid_set.delete(&cgid.to_ne_bytes()) {
                log::warn!("cannot remove cgroup {cgid} from agent_cgid_set: {e}");
            }
        }
        let set = self.mirror.get(&cgid).cloned().unwrap_or_default();
        self.remove(cgid, set.files(), set.names());
        if self.mirror.get(&cgid).is_some_and(DenySet::is_empty) {
            self.mirror.remove(&cgid);
        }
        // Gone from agent_cgid_set, so never unchanged_since() again.
        self.versions.remove(&cgid);
        // Cgroup ids are not reused: these only take room.
        for e in [
            self.set_sock_allow(cgid, &[]),
            self.set_port_allow(cgid, &[]),
        ] {
            if let Err(e) = e {
                log::warn!("cgroup {cgid}: cannot remove its allowed sockets: {e}");
            }
        }
        // Absent unless the rate limit dropped one of its denial events.
        let _ = self.maps.denial_dropped.delete(&cgid.to_ne_bytes());
    }
}

/// Makes `want` exactly the keys of `map` (a set: value 1) among those
/// `ours` claims; keys `ours` does not claim are untouched. Returns how many
/// keys were added and how many removed. `what` names the map in errors.
///
/// # Errors
/// [`BpfError::Libbpf`] for the first failed update or delete.
pub(super) fn set_exactly(
    map: &libbpf_rs::MapHandle,
    what: &str,
    want: &HashSet<Vec<u8>>,
    ours: impl Fn(&[u8]) -> bool,
) -> Result<(usize, usize), BpfError> {
    let stale: Vec<Vec<u8>> = map
        .keys()
        .filter(|k| ours(k) && !want.contains(k))
        .collect();
    for k in &stale {
        map.delete(k)
            .map_err(lb(format!("delete a {what} entry")))?;
    }
    let mut added = 0;
    for k in want {
        if map.lookup(k, MapFlags::ANY).ok().flatten().is_none() {
            map.update(k, &PRESENT, MapFlags::ANY)
                .map_err(lb(format!("add a {what} entry")))?;
            added += 1;
        }
    }
    Ok((added, stale.len()))
}

/// Inserts `keys` (`key_len` bytes each, back to back; value 1) into `map` in
/// batches of 4,096, falling back to one by one when a batch fails part-way.
/// `total` is for the error message.
pub(super) fn insert(
    map: &libbpf_rs::MapHandle,
    what: &str,
    keys: &[u8],
    key_len: usize,
    total: usize,
) -> Result<(), BpfError> {
    let values = vec![PRESENT[0]; 4096];
    for chunk in keys.chunks(4096 * key_len) {
        let n = chunk.len() / key_len;
        let r = map.update_batch(chunk, &values[..n], n as u32, MapFlags::ANY, MapFlags::ANY);
        if let Err(e) = r {
            for k in chunk.chunks(key_len) {
                map.update(k, &PRESENT, MapFlags::ANY)
                    .map_err(|e2| BpfError::Libbpf {
                        what: format!(
                            "insert into {what} ({total} entries, capacity {}; batch error: {e})",
                            map.max_entries()
                        ),
                        cause: e2,
                    })?;
            }
        }
    }
    Ok(())
}

/// Deletes `keys` (`key_len` bytes each, back to back) from `map`; returns,
/// per key, whether it is gone now (deleted, or already absent).
pub(super) fn delete(
    map: &libbpf_rs::MapHandle,
    what: &str,
    cgid: u64,
    keys: &[u8],
    key_len: usize,
) -> Vec<bool> {
    let mut gone = Vec::with_capacity(keys.len() / key_len);
    for chunk in keys.chunks(4096 * key_len) {
        let n = chunk.len() / key_len;
        if map
            .delete_batch(chunk, n as u32, MapFlags::ANY, MapFlags::ANY)
            .is_ok()
        {
            gone.extend(std::iter::repeat_n(true, n));
            continue;
        }
        for k in chunk.chunks(key_len) {
            gone.push(match map.delete(k) {
                Ok(()) => true,
                Err(e) if e.kind() == libbpf_rs::ErrorKind::NotFound => true,
                Err(e) => {
                    log::warn!("cannot remove a stale {what} entry of cgroup {cgid}: {e}");
                    false
                }
            });
        }
    }
    gone
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lists::entries::KIND_OPEN;

    #[test]
    fn add_only_leaves_new_exceptions_out() {
        use crate::lists::entries::{KIND_DIR_USER, KIND_EXC_USER};
        let k = |ino, kind| FileKey {
            dev: 1,
            ino,
            subvol: 0,
            kind,
        };
        let name = |ino, kind, n: &[u8]| NameKey {
            dir: k(ino, kind),
            name: n.to_vec(),
        };
        let current = DenySet::new(
            vec![k(1, KIND_DIR_USER), k(2, KIND_EXC_USER)],
            vec![name(1, KIND_EXC_USER, b"old")],
        );
        let desired = DenySet::new(
            vec![
                k(1, KIND_DIR_USER),
                k(2, KIND_EXC_USER),
                k(3, KIND_EXC_USER),
                k(4, KIND_DIR_USER),
                k(5, KIND_OPEN),
            ],
            vec![
                name(1, KIND_EXC_USER, b"old"),
                name(1, KIND_EXC_USER, b"new"),
            ],
        );
        assert_eq!(exceptions(&desired.minus(&current)), 2);
        let allowed = without_new_exceptions(&desired, &current);
        // Held exceptions stay, new entries and denials go in, new exceptions do not.
        assert_eq!(
            allowed.files(),
            &[
                k(1, KIND_DIR_USER),
                k(2, KIND_EXC_USER),
                k(4, KIND_DIR_USER),
                k(5, KIND_OPEN)
            ][..]
        );
        assert_eq!(allowed.names(), &[name(1, KIND_EXC_USER, b"old")][..]);
    }

    #[test]
    fn add_only_leaves_new_audit_keys_out() {
        use crate::lists::entries::{HAS_AUDIT_KEY, KIND_AUDIT, KIND_AUDIT_DIR_USER};
        let k = |ino, kind| FileKey {
            dev: 1,
            ino,
            subvol: 0,
            kind,
        };
        let name = |ino, kind, n: &[u8]| NameKey {
            dir: k(ino, kind),
            name: n.to_vec(),
        };
        // An entry turned audit from inside: its deny keys stay (nothing is
        // removed add-only), its audit keys and the HAS_AUDIT key wait.
        let current = DenySet::new(vec![k(5, KIND_OPEN)], vec![name(1, KIND_OPEN, b".env")]);
        let desired = DenySet::new(
            vec![k(5, KIND_AUDIT), k(6, KIND_AUDIT_DIR_USER), HAS_AUDIT_KEY],
            vec![
                name(1, KIND_AUDIT, b".env"),
                name(2, KIND_AUDIT_DIR_USER, b"keys"),
            ],
        );
        let new = desired.minus(&current);
        assert_eq!(held_back_keys(&new), 4, "HAS_AUDIT says, it lists nothing");
        assert_eq!(exceptions(&new), 0, "no audit key is an exception");
        assert!(without_new_exceptions(&desired, &current).is_empty());
        assert_eq!(
            current.minus(&desired).entries(),
            2,
            "the removal an outside launch makes"
        );
        assert_eq!(desired.entries(), 0, "audit keys deny nothing");
        // Audit keys an earlier outside launch wrote stay.
        let kept = without_new_exceptions(&desired, &desired);
        assert_eq!(kept, desired);
    }
}
