//! The BPF object from userspace, and the only user of its skeleton
//! ([`skel`]): the kernel's prerequisites ([`preflight`]), loading,
//! attaching and pinning the programs ([`programs`], [`pins`]), taking them
//! over at a restart of the same build ([`adopt`]), the map handles the
//! daemon serves through ([`maps`]), the
//! sandboxes in the maps ([`sandboxes`]: mirror, diff-apply), the name
//! patterns' shapes ([`patterns`]), the arrays
//! written through mmap ([`filter`]: slots and key filter), the keys'
//! layouts ([`codec`]); which optional parts a load holds ([`variant`]),
//! what a verifier said when it refused one ([`verifier`]), and errnos
//! ([`errno`]).
//!
//! Maps (src/bpf/agent_sandbox.h has the layout): `deny_map` (file keys),
//! `name_map` (directory key + name), `agent_cgid_set` (sandbox cgroup
//! ids), `sock_allow`, `port_allow` and `host_addrs` (the loopback
//! programs' allowed ports and the host's addresses, [`net`]), and the arrays `sandbox_slots`, `key_filter` and
//! `walk_gens` the daemon writes through mmap, and `pattern_shapes` (the
//! union of the sandboxes' name-pattern shapes).

pub mod adopt;
pub mod codec;
pub mod denials;
pub mod errno;
pub mod error;
pub mod filter;
pub mod maps;
pub mod net;
pub mod patterns;
pub mod pins;
pub mod preflight;
pub mod programs;
pub mod sandboxes;
pub mod skel;
pub mod variant;
pub mod verifier;
