//! The operating system as this crate uses it: thin system-call wrappers
//! ([`sys`]), `/proc` formats ([`procfs`]), naming a process by pidfd
//! ([`process`]), the sandbox cgroup tree ([`cgroup`]) and where the
//! installed files live ([`paths`]). Imports only [`crate::lists`].

pub mod cgroup;
pub mod paths;
pub mod process;
pub mod procfs;
pub mod sys;
