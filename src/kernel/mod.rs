//! The BPF object from userspace, and the only user of its skeleton:
//! loading, attaching and pinning the programs, the sandbox maps
//! ([`maps`]); which optional parts a load holds ([`variant`]) and what a
//! kernel's verifier said when it refused one ([`verifier`]).

pub mod errno;
pub mod maps;
pub mod variant;
pub mod verifier;
