//! The lists and the values they become, with no I/O: list parsing
//! ([`denylist`]), `include` lines ([`include`]) and the keys and entry kinds the LSM hooks compare
//! ([`entries`]). The lowest layer: imports nothing of the crate.

pub mod denylist;
pub mod entries;
pub mod include;
pub mod pattern;
