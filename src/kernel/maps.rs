//! The maps the daemon reads and writes, as handles of their own (each a
//! duplicate descriptor): taken from the skeleton right after a load
//! ([`Maps::of_skeleton`]), or found from the programs a start adopts
//! ([`Maps::by_name`], [`crate::kernel::adopt`]). Nothing after the load
//! needs the skeleton, so both starts serve through the same handles.

use std::collections::HashMap;

use libbpf_rs::skel::Skel;
use libbpf_rs::{MapCore, MapHandle};

use crate::kernel::error::{BpfError, lb};
use crate::kernel::skel::AgentSandboxSkel;

/// The handles, one per map the daemon uses (src/bpf/maps.bpf.h says what
/// each holds).
pub struct Maps {
    pub(super) deny_map: MapHandle,
    pub(super) name_map: MapHandle,
    pub(super) agent_cgid_set: MapHandle,
    pub(super) sock_allow: MapHandle,
    pub(super) port_allow: MapHandle,
    pub(super) host_addrs: MapHandle,
    pub(super) denials: MapHandle,
    pub(super) denial_dropped: MapHandle,
    pub(super) denial_stats: MapHandle,
    pub(super) dropped_keys: MapHandle,
    pub(super) sandbox_slots: MapHandle,
    pub(super) walk_gens: MapHandle,
    pub(super) key_filter: MapHandle,
    pub(super) pattern_shapes: MapHandle,
    pub(super) pat_prefilter: MapHandle,
}

/// The names of [`Maps`]' fields, as the object names the maps (at most
/// 15 bytes each, so the kernel's copy of a name is whole).
pub(super) const NAMES: [&str; 15] = [
    "deny_map",
    "name_map",
    "agent_cgid_set",
    "sock_allow",
    "port_allow",
    "host_addrs",
    "denials",
    "denial_dropped",
    "denial_stats",
    "dropped_keys",
    "sandbox_slots",
    "walk_gens",
    "key_filter",
    "pattern_shapes",
    "pat_prefilter",
];

impl Maps {
    /// The handles of a loaded skeleton's maps.
    ///
    /// # Errors
    /// [`BpfError`] when a descriptor cannot be duplicated (EMFILE).
    pub(super) fn of_skeleton(skel: &AgentSandboxSkel<'_>) -> Result<Maps, BpfError> {
        let mut by_name = HashMap::new();
        for map in skel.object().maps() {
            let name = map.name().to_string_lossy().into_owned();
            if NAMES.contains(&name.as_str()) {
                let h =
                    MapHandle::try_from(&map).map_err(lb(format!("duplicate the {name} map")))?;
                by_name.insert(name, h);
            }
        }
        Maps::by_name(by_name)
    }

    /// The handles from a table by name, which must hold every one of
    /// [`NAMES`].
    ///
    /// # Errors
    /// [`BpfError::Unsupported`] naming a missing map.
    pub(super) fn by_name(mut m: HashMap<String, MapHandle>) -> Result<Maps, BpfError> {
        let mut take = |name: &str| {
            m.remove(name)
                .ok_or_else(|| BpfError::Unsupported(format!("the BPF object has no {name} map")))
        };
        Ok(Maps {
            deny_map: take("deny_map")?,
            name_map: take("name_map")?,
            agent_cgid_set: take("agent_cgid_set")?,
            sock_allow: take("sock_allow")?,
            port_allow: take("port_allow")?,
            host_addrs: take("host_addrs")?,
            denials: take("denials")?,
            denial_dropped: take("denial_dropped")?,
            denial_stats: take("denial_stats")?,
            dropped_keys: take("dropped_keys")?,
            sandbox_slots: take("sandbox_slots")?,
            walk_gens: take("walk_gens")?,
            key_filter: take("key_filter")?,
            pattern_shapes: take("pattern_shapes")?,
            pat_prefilter: take("pat_prefilter")?,
        })
    }
}
