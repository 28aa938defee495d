//! The errors of the BPF side.

use std::io;

/// Errors of the BPF side; each names the cause and, where there is one, the fix.
#[derive(Debug, thiserror::Error)]
pub enum BpfError {
    /// The kernel lacks a prerequisite; retrying cannot help.
    #[error("{0}")]
    Unsupported(String),
    /// The kernel (or libbpf's checks before the syscall) refused to load
    /// or attach the programs; [`crate::daemon::failure::classify`] tells from the
    /// errno whether a restart can help.
    #[error("cannot {what}: {cause:#}")]
    Kernel {
        /// What was being done ("load the BPF LSM programs", "attach the
        /// lsm/<hook> program").
        what: String,
        /// The libbpf error, carrying the errno.
        cause: libbpf_rs::Error,
    },
    /// The kernel's verifier rejected a program and no variant without an
    /// optional part could be loaded instead; a restart cannot help.
    #[error("cannot load the BPF LSM programs: {rejection}")]
    Rejected {
        /// The program and the verifier's reason.
        rejection: crate::kernel::verifier::Rejection,
        /// The libbpf error, carrying the errno.
        cause: libbpf_rs::Error,
    },
    /// A libbpf operation failed.
    #[error("{what}: {cause}")]
    Libbpf {
        /// What was being done.
        what: String,
        /// The libbpf error.
        cause: libbpf_rs::Error,
    },
    /// A filesystem operation on bpffs failed.
    #[error("{what}: {cause}")]
    Io {
        /// What was being done.
        what: String,
        /// The error.
        cause: io::Error,
    },
}

pub(super) fn lb(what: impl Into<String>) -> impl FnOnce(libbpf_rs::Error) -> BpfError {
    let what = what.into();
    move |cause| BpfError::Libbpf { what, cause }
}

pub(super) fn io_e(what: impl Into<String>) -> impl FnOnce(io::Error) -> BpfError {
    let what = what.into();
    move |cause| BpfError::Io { what, cause }
}
