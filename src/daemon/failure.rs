//! Why the daemon could not start, and whether systemd should try again.
//!
//! A cause a restart cannot fix (no bpf LSM, no BTF, a kernel that refuses
//! or lacks what the programs need) exits [`EXIT_PERMANENT`], which the
//! unit's `RestartPreventExitStatus=` names, so there is no restart loop.
//! Anything else must not disable the service for good: a BPF failure that
//! may pass (ENOMEM under the unit's memory limit, EAGAIN, EBUSY, EINTR, an
//! errno not known to be permanent) exits [`EXIT_TRANSIENT`], any other
//! failure [`EXIT_OTHER`]; systemd restarts both (`Restart=on-failure`).
//! [`classify`] is the decision, a pure function of the error and the
//! kernel facts.

use std::io;

use crate::daemon::canary::CanaryError;
use crate::kernel::errno::{ENOTSUPP, errno_name, errno_of};
use crate::kernel::error::BpfError;
use crate::os::cgroup::CgroupError;

/// Errors that stop the daemon.
#[derive(Debug, thiserror::Error)]
pub enum DaemonError {
    /// The BPF side failed.
    #[error(transparent)]
    Bpf(#[from] BpfError),
    /// The cgroup tree failed.
    #[error(transparent)]
    Cgroup(#[from] CgroupError),
    /// The canary found the attached programs not denying, or could not run.
    #[error(transparent)]
    Canary(#[from] CanaryError),
    /// Any other set-up step failed.
    #[error("{what}: {cause}")]
    Setup {
        /// The step.
        what: String,
        /// The error.
        cause: io::Error,
    },
}

/// Exit status for a cause that a restart cannot fix (EX_CONFIG, sysexits.h);
/// the unit's `RestartPreventExitStatus=` names it.
pub const EXIT_PERMANENT: u8 = 78;
/// Exit status for a BPF failure that may pass (EX_TEMPFAIL, sysexits.h);
/// systemd restarts the daemon after `RestartSec=`.
pub const EXIT_TRANSIENT: u8 = 75;
/// Exit status for any other failure to start or serve; systemd restarts it.
pub const EXIT_OTHER: u8 = 1;

/// What the daemon does about a failure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Class {
    /// A restart cannot fix it: exit [`EXIT_PERMANENT`], not restarted.
    Permanent,
    /// A BPF failure that may pass: exit [`EXIT_TRANSIENT`], restarted.
    Transient,
    /// Another failure (cgroup tree, request directory, instance lock...):
    /// exit [`EXIT_OTHER`], restarted.
    Other,
}

impl Class {
    /// The daemon's exit status for this class.
    pub fn exit_status(self) -> u8 {
        match self {
            Class::Permanent => EXIT_PERMANENT,
            Class::Transient => EXIT_TRANSIENT,
            Class::Other => EXIT_OTHER,
        }
    }
}

/// What the kernel showed before the failure (the prerequisites that
/// [`crate::kernel::preflight::check_kernel`] tests).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KernelFacts {
    /// `bpf` is in /sys/kernel/security/lsm.
    pub bpf_lsm: bool,
    /// /sys/kernel/btf/vmlinux exists.
    pub btf: bool,
}

impl KernelFacts {
    /// Reads the facts from the running kernel (mounts securityfs if needed).
    pub fn read() -> KernelFacts {
        KernelFacts {
            bpf_lsm: crate::kernel::preflight::read_lsm_list()
                .is_some_and(|l| l.trim().split(',').any(|m| m == "bpf")),
            btf: std::path::Path::new("/sys/kernel/btf/vmlinux").exists(),
        }
    }
}

/// A classified failure: its class and the one log line that names the
/// cause and what follows (the fix, or that systemd will retry).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verdict {
    /// What the daemon does.
    pub class: Class,
    /// The message to log.
    pub message: String,
}

/// Whether an errno of the kernel's answer to loading or attaching the
/// programs (`BPF_PROG_LOAD`, `BPF_MAP_CREATE` of the object's maps,
/// `BPF_LINK_CREATE`, or libbpf's checks before them) is permanent.
///
/// Permanent: EPERM/EACCES (the kernel refuses LSM programs, or the
/// verifier rejects them; with bpf in the LSM list and BTF present nothing
/// the daemon can change), EINVAL (a program type, attach type or hook the
/// kernel lacks, or pinned maps of an incompatible build), ENOTSUPP,
/// EOPNOTSUPP, ENOSYS (no BPF trampolines, no bpf(2)), E2BIG (programs beyond
/// the verifier's limits) and ESRCH (libbpf found no BTF type of a hook or
/// of a kernel structure the programs read). Everything else, known
/// (ENOMEM, EAGAIN, EBUSY, EINTR, EMFILE, ENFILE, ENOSPC, ETIMEDOUT, ENOENT)
/// or not, and a missing errno, is [`Class::Transient`]: retrying costs
/// a restart every `RestartSec=`, a wrong "permanent" costs the service.
pub fn classify_kernel_errno(errno: Option<i32>) -> Class {
    match errno {
        Some(
            libc::EPERM
            | libc::EACCES
            | libc::EINVAL
            | libc::EOPNOTSUPP
            | libc::ENOSYS
            | libc::E2BIG
            | libc::ESRCH
            | ENOTSUPP,
        ) => Class::Permanent,
        _ => Class::Transient,
    }
}

/// The cause an errno of a load or attach names (and, when permanent, the fix).
fn kernel_cause(errno: Option<i32>, facts: KernelFacts) -> String {
    let Some(n) = errno else {
        return "an error without an errno".into();
    };
    let name = errno_name(n).unwrap_or("an unknown errno");
    match n {
        libc::EPERM | libc::EACCES if !(facts.bpf_lsm && facts.btf) => format!(
            "{name}: {}",
            missing(facts)
        ),
        libc::EPERM => "EPERM: this kernel forbids BPF LSM programs: it refuses them although bpf is in the active LSM \
                        list and kernel BTF is present (a kernel or hypervisor policy that forbids BPF \
                        trampolines, or a unit without CAP_BPF, CAP_PERFMON and CAP_SYS_ADMIN in its \
                        CapabilityBoundingSet=); enforcement needs another kernel or host"
            .into(),
        libc::EACCES => "EACCES: the kernel's verifier rejected a program (no verifier log was \
                         captured to name it); `RUST_LOG=debug agent-sandbox-execd --check` prints \
                         libbpf's whole log: report it"
            .into(),
        libc::EINVAL => "EINVAL: the kernel lacks a program type, attach type or LSM hook the \
                         programs need (Linux 6.1 or later with CONFIG_BPF_LSM=y), or maps pinned \
                         under /sys/fs/bpf/agent-sandbox-exec by an incompatible build do not match \
                         (`agent-sandbox-execd --disable` removes them)"
            .into(),
        libc::EOPNOTSUPP | ENOTSUPP | libc::ENOSYS => format!(
            "{name}: the kernel does not support what the programs need (BPF trampolines need \
             CONFIG_BPF_JIT and an architecture with them; bpf(2) needs CONFIG_BPF_SYSCALL)"
        ),
        libc::E2BIG => "E2BIG: the programs exceed this kernel's verifier limits; \
                        `RUST_LOG=debug agent-sandbox-execd --check` prints libbpf's whole log: \
                        report it"
            .into(),
        libc::ESRCH => "ESRCH: the kernel's BTF lacks a type or LSM hook the programs need (a \
                        kernel older than 6.1, or built without the hook)"
            .into(),
        libc::ENOMEM => "ENOMEM: out of memory; BPF maps and programs are charged to the unit's \
                         memory cgroup, so the unit's MemoryMax=/MemoryHigh= or the system's free \
                         memory is short"
            .into(),
        libc::EMFILE => "EMFILE: out of file descriptors (the unit's LimitNOFILE=)".into(),
        libc::ENFILE => "ENFILE: the system is out of file descriptors (fs.file-max)".into(),
        libc::EAGAIN => "EAGAIN: the kernel asked to try again".into(),
        libc::EBUSY => "EBUSY: a resource the kernel needs is busy".into(),
        libc::EINTR => "EINTR: interrupted by a signal".into(),
        _ => format!("{name} (errno {n})"),
    }
}

/// What a verifier rejection that no fallback could avoid means, and what
/// to do: the program, the verifier's reason, and where its whole log is.
pub fn rejected_message(r: &crate::kernel::verifier::Rejection) -> String {
    format!(
        "cannot load the BPF LSM programs: {r}; the program holds no optional part that a \
         variant could leave out (see {}), so enforcement cannot start on this kernel; \
         `RUST_LOG=debug agent-sandbox-execd --check 2>&1` prints the verifier's whole log: \
         report it with `uname -r`",
        crate::kernel::variant::WITHOUT_ENV
    )
}

/// The prerequisite that is missing, with its fix.
fn missing(facts: KernelFacts) -> &'static str {
    if !facts.btf {
        "the kernel has no BTF (/sys/kernel/btf/vmlinux is missing; it needs CONFIG_DEBUG_INFO_BTF=y)"
    } else {
        "the bpf LSM is not active (bpf is not in /sys/kernel/security/lsm); add bpf to the \
         kernel's lsm= command line and reboot"
    }
}

const PERMANENT_TAIL: &str = "a restart cannot fix this: exiting with status 78, which the unit \
    does not restart; launches are refused; after fixing it: systemctl start agent-sandbox-execd";

const TRANSIENT_TAIL: &str = "this may pass: exiting with status 75, systemd restarts the daemon \
    (RestartSec=); pinned programs keep enforcing running sandboxes, new launches are refused \
    until a daemon serves";

const OTHER_TAIL: &str = "exiting with status 1, systemd restarts the daemon (RestartSec=)";

/// Classifies the error that stopped the daemon's start-up (or its loop)
/// and writes the message naming the cause; `facts` is what the kernel
/// showed at the failure ([`KernelFacts::read`]).
///
/// [`BpfError::Unsupported`] is permanent by construction (a missing
/// prerequisite found before loading); [`BpfError::Kernel`] follows
/// [`classify_kernel_errno`] of its errno ([`errno_of`]); the other BPF
/// errors (opening the embedded object, pinning, mmap of a map) are
/// [`Class::Transient`]; every non-BPF error is [`Class::Other`].
pub fn classify(e: &DaemonError, facts: KernelFacts) -> Verdict {
    let chain = crate::error::error_chain(e);
    match e {
        DaemonError::Bpf(BpfError::Unsupported(_)) => Verdict {
            class: Class::Permanent,
            message: format!("enforcement unavailable: {chain}; {PERMANENT_TAIL}"),
        },
        DaemonError::Bpf(BpfError::Kernel { what, cause: err }) => {
            let errno = errno_of(err);
            let class = classify_kernel_errno(errno);
            let cause = kernel_cause(errno, facts);
            let tail = match class {
                Class::Permanent => PERMANENT_TAIL,
                _ => TRANSIENT_TAIL,
            };
            Verdict {
                class,
                message: format!("cannot {what} ({err:#}): {cause}; {tail}"),
            }
        }
        DaemonError::Bpf(BpfError::Rejected { rejection, .. }) => Verdict {
            class: Class::Permanent,
            message: format!("{}; {PERMANENT_TAIL}", rejected_message(rejection)),
        },
        DaemonError::Bpf(_) => Verdict {
            class: Class::Transient,
            message: format!("{chain}; {TRANSIENT_TAIL}"),
        },
        DaemonError::Canary(c) => {
            let (class, tail) = if c.transient() {
                (Class::Transient, TRANSIENT_TAIL)
            } else {
                (Class::Permanent, PERMANENT_TAIL)
            };
            Verdict {
                class,
                message: format!("{chain}; {}; {tail}", c.fix()),
            }
        }
        DaemonError::Cgroup(_) | DaemonError::Setup { .. } => Verdict {
            class: Class::Other,
            message: format!("{chain}; {OTHER_TAIL}"),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use libbpf_rs::ErrorExt;

    const MET: KernelFacts = KernelFacts {
        bpf_lsm: true,
        btf: true,
    };

    /// A load failure as the skeleton's load() returns it.
    fn load_err(errno: i32) -> DaemonError {
        DaemonError::Bpf(BpfError::Kernel {
            what: "load the BPF LSM programs".into(),
            cause: libbpf_rs::Error::from_raw_os_error(errno),
        })
    }

    /// An attach failure as attach_lsm() returns it: the errno under a context.
    fn attach_err(errno: i32) -> DaemonError {
        DaemonError::Bpf(BpfError::Kernel {
            what: "attach the lsm/file_open program".into(),
            cause: libbpf_rs::Error::from_raw_os_error(errno).context("failed to attach LSM"),
        })
    }

    #[test]
    fn a_verifier_rejection_is_permanent_and_named() {
        let rejection =
            crate::kernel::verifier::rejection(include_str!("../testdata/verifier-7.3-return.log"))
                .expect("a rejection");
        let e = DaemonError::Bpf(BpfError::Rejected {
            rejection,
            cause: libbpf_rs::Error::from_raw_os_error(libc::EINVAL),
        });
        let v = classify(&e, MET);
        assert_eq!(v.class, Class::Permanent);
        assert!(
            v.message
                .contains("rejected the program task_kill: At program exit the register R0"),
            "{}",
            v.message
        );
        assert!(v.message.contains("report it"), "{}", v.message);
        assert!(!v.message.contains("needs a build"), "{}", v.message);
        // EACCES without a log: no advice about a build that does not exist.
        let v = classify(&load_err(libc::EACCES), MET);
        assert!(!v.message.contains("needs a build"), "{}", v.message);
    }

    #[test]
    fn errno_is_found_under_libbpf_context() {
        let plain = libbpf_rs::Error::from_raw_os_error(libc::ENOMEM);
        assert_eq!(errno_of(&plain), Some(libc::ENOMEM));
        let layered = libbpf_rs::Error::from_raw_os_error(libc::EBUSY)
            .context("failed to attach LSM")
            .context(String::from("outer"));
        // What kind() says is no help for EBUSY: that is why the text is read.
        assert_eq!(layered.kind(), libbpf_rs::ErrorKind::Other);
        assert_eq!(errno_of(&layered), Some(libc::EBUSY));
        let internal = libbpf_rs::Error::from_raw_os_error(ENOTSUPP).context("x");
        assert_eq!(errno_of(&internal), Some(ENOTSUPP));
    }

    #[test]
    fn errno_is_none_without_an_os_error() {
        let e = libbpf_rs::Error::from(std::io::Error::other("no number here"));
        assert_eq!(errno_of(&e), None);
        // A context that itself looks like an os error does not win over the
        // innermost error's number.
        let e = libbpf_rs::Error::from_raw_os_error(libc::EAGAIN).context("(os error 1)");
        assert_eq!(errno_of(&e), Some(libc::EAGAIN));
    }

    #[test]
    fn permanent_errnos() {
        for n in [
            libc::EPERM,
            libc::EACCES,
            libc::EINVAL,
            libc::EOPNOTSUPP,
            ENOTSUPP,
            libc::ENOSYS,
            libc::E2BIG,
            libc::ESRCH,
        ] {
            assert_eq!(
                classify_kernel_errno(Some(n)),
                Class::Permanent,
                "errno {n}"
            );
            for e in [load_err(n), attach_err(n)] {
                let v = classify(&e, MET);
                assert_eq!(v.class, Class::Permanent, "errno {n}: {}", v.message);
                assert_eq!(v.class.exit_status(), 78);
                assert!(v.message.contains(errno_name(n).unwrap()), "{}", v.message);
                assert!(
                    v.message.contains("a restart cannot fix this"),
                    "{}",
                    v.message
                );
            }
        }
    }

    #[test]
    fn transient_errnos() {
        for n in [
            libc::ENOMEM,
            libc::EAGAIN,
            libc::EBUSY,
            libc::EINTR,
            libc::EMFILE,
            libc::ENFILE,
            libc::ENOSPC,
            libc::ETIMEDOUT,
            libc::ENOENT,
            libc::EIO,
        ] {
            assert_eq!(
                classify_kernel_errno(Some(n)),
                Class::Transient,
                "errno {n}"
            );
            for e in [load_err(n), attach_err(n)] {
                let v = classify(&e, MET);
                assert_eq!(v.class, Class::Transient, "errno {n}: {}", v.message);
                assert_eq!(v.class.exit_status(), 75);
                assert!(
                    v.message.contains("systemd restarts the daemon"),
                    "{}",
                    v.message
                );
            }
        }
        assert_eq!(classify_kernel_errno(None), Class::Transient);
    }

    #[test]
    fn enomem_names_the_memory_cgroup() {
        let v = classify(&load_err(libc::ENOMEM), MET);
        assert!(
            v.message.starts_with(
                "cannot load the BPF LSM programs (Cannot allocate memory (os error 12)): ENOMEM"
            ),
            "{}",
            v.message
        );
        assert!(v.message.contains("MemoryMax="), "{}", v.message);
        let v = classify(&attach_err(libc::EBUSY), MET);
        assert!(
            v.message
                .contains("failed to attach LSM: Device or resource busy (os error 16)"),
            "{}",
            v.message
        );
        assert!(v.message.contains("lsm/file_open"), "{}", v.message);
    }

    #[test]
    fn eperm_message_depends_on_the_kernel_facts() {
        let v = classify(&load_err(libc::EPERM), MET);
        assert!(
            v.message.contains("although bpf is in the active LSM list"),
            "{}",
            v.message
        );
        let no_lsm = KernelFacts {
            bpf_lsm: false,
            btf: true,
        };
        let v = classify(&load_err(libc::EPERM), no_lsm);
        assert_eq!(v.class, Class::Permanent);
        assert!(
            v.message.contains("the bpf LSM is not active"),
            "{}",
            v.message
        );
        let no_btf = KernelFacts {
            bpf_lsm: true,
            btf: false,
        };
        let v = classify(&attach_err(libc::EACCES), no_btf);
        assert!(
            v.message.contains("CONFIG_DEBUG_INFO_BTF=y"),
            "{}",
            v.message
        );
    }

    #[test]
    fn prerequisites_are_permanent() {
        let e = crate::kernel::preflight::check_kernel(Some("lockdown,capability,yama"), true)
            .unwrap_err();
        let v = classify(&DaemonError::Bpf(e), MET);
        assert_eq!(v.class, Class::Permanent);
        assert!(
            v.message.contains("the bpf LSM is not active"),
            "{}",
            v.message
        );
        let e = crate::kernel::preflight::check_kernel(Some("bpf"), false).unwrap_err();
        let v = classify(&DaemonError::Bpf(e), MET);
        assert_eq!(v.class.exit_status(), 78);
        assert!(v.message.contains("no BTF"), "{}", v.message);
    }

    #[test]
    fn other_bpf_errors_are_transient_and_the_rest_other() {
        let pin = DaemonError::Bpf(BpfError::Libbpf {
            what: "pin the lsm/file_open link".into(),
            cause: libbpf_rs::Error::from_raw_os_error(libc::EPERM),
        });
        let v = classify(&pin, MET);
        assert_eq!(v.class, Class::Transient, "{}", v.message);
        assert!(
            v.message.starts_with("pin the lsm/file_open link: "),
            "{}",
            v.message
        );
        let io = DaemonError::Bpf(BpfError::Io {
            what: "mmap key_filter".into(),
            cause: std::io::Error::from_raw_os_error(libc::ENOMEM),
        });
        assert_eq!(classify(&io, MET).class, Class::Transient);
        let setup = DaemonError::Setup {
            what: "watch /run/agent-sandbox-exec/req".into(),
            cause: std::io::Error::from_raw_os_error(libc::ENOSPC),
        };
        let v = classify(&setup, MET);
        assert_eq!(v.class, Class::Other);
        assert_eq!(v.class.exit_status(), 1);
        assert!(
            v.message.contains("systemd restarts the daemon"),
            "{}",
            v.message
        );
    }
}
