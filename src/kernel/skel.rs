//! The generated libbpf-rs skeletons (build.rs compiles src/bpf/*.bpf.c):
//! the programs' object, and the feature probes' ([`probe`]). The only
//! `include!` of them; only `kernel/` uses them.
#![allow(
    clippy::all,
    clippy::unwrap_used,
    clippy::undocumented_unsafe_blocks,
    missing_docs,
    unused_imports,
    dead_code
)]

include!(concat!(env!("OUT_DIR"), "/agent_sandbox.skel.rs"));

/// The feature probes' skeleton (src/bpf/probe.bpf.c).
pub mod probe {
    include!(concat!(env!("OUT_DIR"), "/probe.skel.rs"));
}
