//! The daemon's decisions, pure: no I/O, no clock, no kernel.
//! `src/daemon/mod.rs` gathers the facts and does what is decided here;
//! `cargo test` exercises every decision on any host.
//!
//! - [`rules`]: each decision on its own: the apply mode (the strictness
//!   rule), answer reuse, caps, retries, the move checks, notices;
//! - [`launch`]: the launch machine, the order of those decisions from a
//!   request admitted to its reply (events in, commands out, time passed
//!   in), which the daemon executes;
//! - [`admission`]: connection caps and abuse logging;
//! - [`privilege`]: users no sandbox can protect (root-equivalent groups).

pub mod admission;
pub mod denials;
pub mod launch;
pub mod privilege;
pub mod rules;
