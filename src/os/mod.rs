//! The operating system as this crate uses it: thin system-call wrappers
//! ([`sys`]), descriptors known by number ([`fd`]), the filesystem ioctls
//! ([`ioctl`]), child processes that run code of ours after fork
//! ([`child`]), `/proc` formats ([`procfs`]), naming a process by pidfd
//! ([`process`]), the sandbox cgroup tree ([`cgroup`]), the host's own IP
//! addresses ([`host_addrs`]) and where the
//! installed files live ([`paths`]). Imports only [`crate::lists`].
//!
//! With [`crate::kernel`], the only place with `unsafe` code: every other
//! module reaches the system through safe interfaces (nix's, or these), and
//! the `import_rule` test in main.rs checks it.

pub mod cgroup;
pub mod child;
pub mod fd;
pub mod fs_magic;
pub mod host_addrs;
pub mod ioctl;
pub mod paths;
pub mod process;
pub mod procfs;
pub mod sys;
