//! `agent-sandbox-execd --check`: the kernel doctor (root). Gathers the
//! facts enforcement needs ([`Facts::gather`]: securityfs, the active LSM
//! list, BTF, cgroup2, bpffs, lockdown, a trial load and attach of the
//! programs, then the canary of [`crate::daemon::canary`] on the trial's maps) and
//! turns them into findings with the exact cause and fix
//! ([`diagnose`], pure and unit-tested: this is where "this kernel forbids
//! BPF LSM programs" is decided).

use std::fmt::Write as _;
use std::path::Path;

use crate::daemon::canary;
use crate::kernel::errno::{self, ENOTSUPP};
use crate::kernel::error::BpfError;
use crate::kernel::programs::Bpf;
use crate::os::cgroup::{self, Tree};
use crate::os::paths::Paths;

/// Exit status of a healthy check.
pub const EXIT_HEALTHY: u8 = 0;
/// Exit status when enforcement cannot work on this kernel or system.
pub const EXIT_UNHEALTHY: u8 = 1;

/// The GRUB file where the kernel command line is set on Debian.
pub const GRUB_FILE: &str = "/etc/default/grub";

/// What the doctor found out about the running system.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Facts {
    /// securityfs was not mounted at /sys/kernel/security and the doctor
    /// mounted it.
    pub mounted_securityfs: bool,
    /// /sys/kernel/security/lsm, trimmed (None: unreadable even after
    /// mounting securityfs).
    pub lsm: Option<String>,
    /// /sys/kernel/btf/vmlinux exists.
    pub btf: bool,
    /// Where cgroup2 is mounted, if it is.
    pub cgroup2: Option<String>,
    /// bpffs is mounted at /sys/fs/bpf (or the doctor mounted it); Err: why not.
    pub bpffs: Result<(), String>,
    /// /sys/kernel/security/lockdown, e.g. `[none] integrity confidentiality`.
    pub lockdown: Option<String>,
    /// The trial load and attach: Ok((programs attached, one line per
    /// optional part the loaded variant left out: [`crate::kernel::variant::Variant::describe`]))
    /// or the step that failed, its errno and, when the verifier rejected a
    /// program that no variant could leave out, that rejection.
    pub trial: Option<Result<(usize, Vec<String>), TrialFailure>>,
    /// The canary on the trial's maps: Ok(what was seen) or Err((cause,
    /// fix)); None when it could not run (no trial, or no cgroup2).
    pub canary: Option<Result<String, (String, String)>>,
    /// /etc/os-release's ID (`debian`, `ubuntu`...).
    pub distro: Option<String>,
    /// Whether [`GRUB_FILE`] exists.
    pub grub: bool,
    /// The members of each root-equivalent group that has any
    /// ([`crate::policy::privilege::ROOT_EQUIVALENT`]): (group, members).
    pub root_like: Vec<(String, Vec<String>)>,
}

/// A trial load or attach that failed: what was being done, its errno,
/// and the verifier's rejection if it named one.
pub type TrialFailure = (
    String,
    Option<i32>,
    Option<crate::kernel::verifier::Rejection>,
);

/// One finding: a check that passed, or a failure with its cause and fix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Finding {
    /// The check passed; what was seen.
    Ok(String),
    /// Something the user should know that does not stop enforcement.
    Note(String),
    /// Enforcement cannot work: the cause and what to do.
    Fail {
        /// The exact cause.
        cause: String,
        /// The fix.
        fix: String,
    },
}

/// The active LSM list's fix: the kernel command line to add, the GRUB file,
/// and a note for distributions whose default list lacks bpf. Pure.
pub fn lsm_fix(current: &str, distro: Option<&str>, grub: bool) -> String {
    let want = if current.is_empty() {
        "bpf".to_string()
    } else {
        format!("{current},bpf")
    };
    let mut fix = format!("add `lsm={want}` to the kernel command line and reboot");
    let with = if grub {
        "with GRUB"
    } else {
        "if the boot loader is GRUB (there is no GRUB file here)"
    };
    let _ = write!(
        fix,
        "; {with}: append it to GRUB_CMDLINE_LINUX in {GRUB_FILE}, run update-grub, reboot"
    );
    if distro == Some("ubuntu") {
        fix.push_str(
            "; Ubuntu's default LSM list lacks bpf (keep its other entries, e.g. apparmor, in the list)",
        );
    }
    fix
}

/// The findings for `f`, in the order of the checks. Pure.
pub fn diagnose(f: &Facts) -> Vec<Finding> {
    let mut out = Vec::new();
    if f.mounted_securityfs {
        out.push(Finding::Note(
            "securityfs was not mounted; mounted it at /sys/kernel/security (the README's \
             `cat /sys/kernel/security/lsm` needs it)"
                .into(),
        ));
    }
    let bpf_lsm = match &f.lsm {
        None => {
            out.push(Finding::Fail {
                cause: "cannot read /sys/kernel/security/lsm, even after mounting securityfs"
                    .into(),
                fix: "a kernel with CONFIG_SECURITYFS=y (and run this as root)".into(),
            });
            false
        }
        Some(list) if list.split(',').any(|m| m == "bpf") => {
            out.push(Finding::Ok(format!(
                "active LSMs: {list} (bpf is among them)"
            )));
            true
        }
        Some(list) => {
            out.push(Finding::Fail {
                cause: format!("the bpf LSM is not active (active LSMs: {list})"),
                fix: lsm_fix(list, f.distro.as_deref(), f.grub),
            });
            false
        }
    };
    if f.btf {
        out.push(Finding::Ok("kernel BTF: /sys/kernel/btf/vmlinux".into()));
    } else {
        out.push(Finding::Fail {
            cause: "the kernel has no BTF (/sys/kernel/btf/vmlinux is missing)".into(),
            fix: "a kernel built with CONFIG_DEBUG_INFO_BTF=y (Debian's and Ubuntu's are)".into(),
        });
    }
    match &f.cgroup2 {
        Some(p) => out.push(Finding::Ok(format!("cgroup2 mounted at {p}"))),
        None => out.push(Finding::Fail {
            cause: "no cgroup2 file system is mounted".into(),
            fix: "boot with the unified cgroup hierarchy (systemd's default; drop \
                  systemd.unified_cgroup_hierarchy=0 from the kernel command line)"
                .into(),
        }),
    }
    match &f.bpffs {
        Ok(()) => out.push(Finding::Ok(format!(
            "bpffs at {}",
            crate::kernel::preflight::BPFFS
        ))),
        Err(why) => out.push(Finding::Fail {
            cause: why.clone(),
            fix: format!(
                "mount -t bpf bpf {} (systemd mounts it at boot)",
                crate::kernel::preflight::BPFFS
            ),
        }),
    }
    match &f.lockdown {
        Some(l) if l.contains("[confidentiality]") => out.push(Finding::Note(format!(
            "kernel lockdown: {l}; confidentiality mode restricts BPF; if the trial below fails, \
             this is a likely cause"
        ))),
        Some(l) => out.push(Finding::Ok(format!("kernel lockdown: {l}"))),
        None => out.push(Finding::Ok("kernel lockdown: not available".into())),
    }
    let prerequisites = bpf_lsm && f.btf;
    match &f.trial {
        None => out.push(Finding::Note(
            "trial load and attach not run (a prerequisite above is missing)".into(),
        )),
        Some(Ok((n, without))) => {
            out.push(Finding::Ok(format!(
                "trial load and attach: {n} programs attached and detached"
            )));
            for line in without {
                out.push(Finding::Note(format!(
                    "loaded without {line}; every denial of the lists holds"
                )));
            }
        }
        Some(Err((_, _, Some(rejection)))) => out.push(Finding::Fail {
            cause: format!("{rejection}"),
            fix: format!(
                "the program holds no optional part that a variant could leave out \
                 ({} names those that exist), so this kernel cannot run the programs: report \
                 it with `uname -r` and the verifier's whole log (`RUST_LOG=debug \
                 agent-sandbox-execd --check 2>&1`)",
                crate::kernel::variant::WITHOUT_ENV
            ),
        }),
        Some(Err((what, errno, None))) => {
            let name = errno
                .and_then(errno::errno_name)
                .unwrap_or("an unknown errno");
            let cause = match errno {
                Some(libc::EPERM) if prerequisites => format!(
                    "this kernel forbids BPF LSM programs: {what} failed with EPERM although bpf \
                     is in the active LSM list and kernel BTF is present"
                ),
                Some(libc::EPERM | libc::EACCES) if !prerequisites => {
                    format!("cannot {what}: {name}, expected while a prerequisite above is missing")
                }
                Some(libc::EACCES) => format!(
                    "cannot {what}: EACCES: the kernel's verifier rejected a program, and \
                     libbpf's log did not name it"
                ),
                _ => format!("cannot {what}: {name}"),
            };
            let fix = match errno {
                Some(libc::EPERM) if prerequisites => {
                    "enforcement needs another kernel or host (a kernel or hypervisor policy \
                     forbids BPF trampolines; libbpf's `ulimit -l` hint does not apply)"
                        .to_string()
                }
                Some(libc::EPERM | libc::EACCES) if !prerequisites => {
                    "fix the failures above first".to_string()
                }
                Some(libc::EINVAL | libc::ESRCH) => {
                    "Linux 6.1 or later with CONFIG_BPF_LSM=y (see /proc/config.gz or \
                     /boot/config-$(uname -r))"
                        .to_string()
                }
                Some(libc::EOPNOTSUPP | ENOTSUPP | libc::ENOSYS) => {
                    "a kernel with CONFIG_BPF_SYSCALL, CONFIG_BPF_JIT and BPF trampolines".into()
                }
                Some(libc::ENOMEM) => "free memory, then try again".into(),
                _ => "see `RUST_LOG=debug agent-sandbox-execd --check` for libbpf's whole log, \
                      and report it with `uname -r`"
                    .into(),
            };
            out.push(Finding::Fail { cause, fix });
        }
    }
    match (&f.canary, &f.trial) {
        (Some(Ok(seen)), _) => out.push(Finding::Ok(format!("canary: {seen}"))),
        (Some(Err((cause, fix))), _) => out.push(Finding::Fail {
            cause: cause.clone(),
            fix: fix.clone(),
        }),
        (None, Some(Ok(_))) => out.push(Finding::Note(
            "canary not run: it needs the cgroup2 hierarchy (see above)".into(),
        )),
        (None, _) => {}
    }
    for (group, members) in &f.root_like {
        let why = crate::policy::privilege::ROOT_EQUIVALENT
            .iter()
            .find(|(g, _)| g == group)
            .map_or("", |(_, w)| w);
        out.push(Finding::Note(format!(
            "{} in the {group} group, root by another name ({why}): no sandbox can keep their \
             secrets from an agent they run",
            members.join(", ")
        )));
    }
    out
}

/// Renders findings and the verdict; returns the text and the exit status.
/// Pure.
pub fn report(findings: &[Finding]) -> (String, u8) {
    let mut text = String::new();
    let mut failed = 0;
    for f in findings {
        match f {
            Finding::Ok(what) => {
                let _ = writeln!(text, "ok: {what}");
            }
            Finding::Note(what) => {
                let _ = writeln!(text, "note: {what}");
            }
            Finding::Fail { cause, fix } => {
                failed += 1;
                let _ = writeln!(text, "FAIL: {cause}\n  fix: {fix}");
            }
        }
    }
    if failed == 0 {
        text.push_str("verdict: enforcement can work on this kernel\n");
        (text, EXIT_HEALTHY)
    } else {
        let _ = writeln!(
            text,
            "verdict: enforcement cannot work here ({failed} problem(s)); sandboxes cannot start"
        );
        (text, EXIT_UNHEALTHY)
    }
}

impl Facts {
    /// Reads the facts of the running system; mounts securityfs and bpffs
    /// if they are missing, and runs the trial when the prerequisites are
    /// there.
    pub fn gather(paths: &Paths) -> Facts {
        const LSM: &str = "/sys/kernel/security/lsm";
        let before = Path::new(LSM).exists();
        let lsm = crate::kernel::preflight::read_lsm_list().map(|l| l.trim().to_string());
        let btf = Path::new("/sys/kernel/btf/vmlinux").exists();
        let cgroup2 = crate::os::procfs::read_pseudo_text("/proc/self/mountinfo")
            .ok()
            .and_then(|i| crate::os::cgroup::find_cgroup2(&i))
            .map(|p| p.display().to_string());
        let bpffs =
            crate::kernel::preflight::ensure_bpffs().map_err(|e| crate::error::error_chain(&e));
        let lockdown = std::fs::read_to_string("/sys/kernel/security/lockdown")
            .ok()
            .map(|l| l.trim().to_string());
        let os = std::fs::read_to_string("/etc/os-release").unwrap_or_default();
        let distro = os
            .lines()
            .find_map(|l| l.strip_prefix("ID="))
            .map(|v| v.trim_matches('"').to_string());
        let bpf_lsm = lsm
            .as_deref()
            .is_some_and(|l| l.split(',').any(|m| m == "bpf"));
        let mut canary = None;
        let trial = (bpf_lsm && btf).then(|| match Bpf::load_unpinned() {
            Ok(mut bpf) => {
                canary = cgroup2
                    .as_deref()
                    .map(|root| run_canary(&mut bpf, root, &paths.run_dir));
                Ok((bpf.attached_count(), bpf.variant().describe()))
            }
            Err(e) => Err(match &e {
                BpfError::Kernel {
                    what,
                    cause: source,
                } => (what.clone(), errno::errno_of(source), None),
                BpfError::Rejected { rejection, cause } => (
                    "load the BPF LSM programs".into(),
                    errno::errno_of(cause),
                    Some(rejection.clone()),
                ),
                other => (crate::error::error_chain(other), None, None),
            }),
        });
        Facts {
            mounted_securityfs: !before && lsm.is_some(),
            lsm,
            btf,
            cgroup2,
            bpffs,
            lockdown,
            trial,
            canary,
            distro,
            grub: Path::new(GRUB_FILE).exists(),
            root_like: root_like_members(),
        }
    }
}

/// The members of each root-equivalent group of this system that has any
/// (the group file's member list, getgrnam(3); users whose primary group it
/// is are not listed).
fn root_like_members() -> Vec<(String, Vec<String>)> {
    crate::policy::privilege::ROOT_EQUIVALENT
        .iter()
        .filter_map(|(name, _)| {
            let g = nix::unistd::Group::from_name(name).ok().flatten()?;
            (!g.mem.is_empty()).then(|| (name.to_string(), g.mem))
        })
        .collect()
}

/// The canary below the cgroup2 hierarchy at `root`; the parent cgroup and
/// the runtime directory are removed after if the doctor made them.
fn run_canary(bpf: &mut Bpf, root: &str, run_dir: &Path) -> Result<String, (String, String)> {
    let existed = Path::new(root).join(cgroup::PARENT).exists();
    let run_dir_existed = run_dir.exists();
    let tree = Tree::open().map_err(|e| {
        (
            format!("canary: cannot open the sandbox cgroup tree: {e}"),
            "run as root on the host's cgroup2 hierarchy".to_string(),
        )
    })?;
    let result = canary::run(bpf, tree.parent(), run_dir, "doctor").map_err(|e| {
        let fix = e.fix().to_string();
        (crate::error::error_chain(&e), fix)
    });
    if !existed {
        tree.remove_if_unused();
    }
    if !run_dir_existed {
        let _ = std::fs::remove_dir(run_dir);
    }
    result
}

/// `agent-sandbox-execd --check`; returns the exit status.
pub fn main(paths: &Paths) -> u8 {
    if !nix::unistd::geteuid().is_root() {
        eprintln!("agent-sandbox-execd: --check must run as root");
        return 2;
    }
    crate::kernel::programs::route_libbpf_log();
    let (text, code) = report(&diagnose(&Facts::gather(paths)));
    print!("{text}");
    code
}

#[cfg(test)]
mod tests {
    use super::*;

    fn healthy() -> Facts {
        Facts {
            mounted_securityfs: false,
            lsm: Some("lockdown,capability,landlock,yama,apparmor,tomoyo,bpf".into()),
            btf: true,
            cgroup2: Some("/sys/fs/cgroup".into()),
            bpffs: Ok(()),
            lockdown: Some("[none] integrity confidentiality".into()),
            trial: Some(Ok((9, vec![]))),
            canary: Some(Ok("a child was refused with EPERM".into())),
            distro: Some("debian".into()),
            grub: true,
            root_like: vec![],
        }
    }

    fn fails(f: &Facts) -> Vec<(String, String)> {
        diagnose(f)
            .into_iter()
            .filter_map(|x| match x {
                Finding::Fail { cause, fix } => Some((cause, fix)),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn healthy_kernel() {
        let (text, code) = report(&diagnose(&healthy()));
        assert_eq!(code, EXIT_HEALTHY, "{text}");
        assert!(text.contains("verdict: enforcement can work"), "{text}");
        assert!(text.contains("9 programs attached and detached"), "{text}");
        assert!(text.contains("ok: canary: a child was refused"), "{text}");
    }

    /// Programs that load and attach but do not deny: the verdict says so.
    #[test]
    fn a_canary_that_was_not_denied() {
        let e = canary::CanaryError::NotDenied {
            cgroup: "/sys/fs/cgroup/agent-sandbox-exec/canary-doctor-7".into(),
            file: "/run/agent-sandbox-exec/canary-doctor-7".into(),
        };
        let f = Facts {
            canary: Some(Err((e.to_string(), e.fix().to_string()))),
            ..healthy()
        };
        let fl = fails(&f);
        assert_eq!(fl.len(), 1, "{fl:?}");
        assert!(fl[0].0.contains("opened the denied file"), "{fl:?}");
        assert!(fl[0].1.contains("enforcement does not work"), "{fl:?}");
        let (text, code) = report(&diagnose(&f));
        assert_eq!(code, EXIT_UNHEALTHY, "{text}");
        // Without cgroup2 the canary cannot run, and says so.
        let f = Facts {
            canary: None,
            cgroup2: None,
            ..healthy()
        };
        assert!(report(&diagnose(&f)).0.contains("note: canary not run"));
    }

    /// This development host: bpf listed, BTF present, EPERM at load.
    #[test]
    fn a_kernel_that_forbids_bpf_lsm_programs() {
        let f = Facts {
            trial: Some(Err((
                "load the BPF LSM programs".into(),
                Some(libc::EPERM),
                None,
            ))),
            cgroup2: Some("/sys/fs/cgroup/unified".into()),
            ..healthy()
        };
        let fl = fails(&f);
        assert_eq!(fl.len(), 1, "{fl:?}");
        assert!(
            fl[0].0.starts_with("this kernel forbids BPF LSM programs"),
            "{fl:?}"
        );
        assert!(fl[0].1.contains("another kernel or host"), "{fl:?}");
        assert!(!fl[0].1.contains("CONFIG_BPF_LSM"), "no advice already met");
        assert_eq!(report(&diagnose(&f)).1, EXIT_UNHEALTHY);
    }

    /// The verifier's rejection on a kernel with every prerequisite, from a
    /// recorded log: the program and the reason, no "prerequisite" text.
    #[test]
    fn a_rejected_program_is_named_with_the_verifiers_reason() {
        let log = include_str!("../testdata/verifier-7.3-file_open.log");
        let rejection = crate::kernel::verifier::rejection(log).expect("a rejection");
        let f = Facts {
            trial: Some(Err((
                "load the BPF LSM programs".into(),
                Some(libc::EACCES),
                Some(rejection),
            ))),
            canary: None,
            ..healthy()
        };
        let fl = fails(&f);
        assert_eq!(fl.len(), 1, "{fl:?}");
        assert!(
            fl[0].0.starts_with(
                "the kernel's verifier rejected the program file_open: The second argument (R2) \
                 to bpf_inode_storage_get"
            ),
            "{fl:?}"
        );
        assert!(fl[0].1.contains("report it"), "{fl:?}");
        let text = report(&diagnose(&f)).0;
        assert!(!text.contains("prerequisite"), "{text}");
        assert!(!text.contains("needs a build"), "{text}");
        // EACCES without a named program, prerequisites met: no "expected".
        let f = Facts {
            trial: Some(Err((
                "load the BPF LSM programs".into(),
                Some(libc::EACCES),
                None,
            ))),
            canary: None,
            ..healthy()
        };
        let fl = fails(&f);
        assert!(fl[0].0.contains("verifier rejected a program"), "{fl:?}");
        assert!(!fl[0].0.contains("expected while"), "{fl:?}");
    }

    /// A variant without an optional part: a note per part, still healthy.
    #[test]
    fn a_variant_without_a_part_is_noted() {
        let mut v = crate::kernel::variant::Variant::default();
        v.leave_out(
            crate::kernel::variant::Part::WalkMemos,
            crate::kernel::variant::Why::Rejected(
                crate::kernel::verifier::rejection(include_str!(
                    "../testdata/verifier-7.3-file_open.log"
                ))
                .expect("a rejection"),
            ),
        );
        let f = Facts {
            trial: Some(Ok((9, v.describe()))),
            ..healthy()
        };
        let (text, code) = report(&diagnose(&f));
        assert_eq!(code, EXIT_HEALTHY, "{text}");
        assert!(
            text.contains("note: loaded without walk-memos (the kernel's verifier rejected the program file_open"),
            "{text}"
        );
    }

    #[test]
    fn lsm_list_without_bpf_names_the_command_line() {
        let f = Facts {
            lsm: Some("lockdown,capability,yama".into()),
            trial: None,
            ..healthy()
        };
        let fl = fails(&f);
        assert_eq!(fl.len(), 1, "{fl:?}");
        assert!(fl[0].0.contains("active LSMs: lockdown,capability,yama"));
        assert!(
            fl[0].1.contains("`lsm=lockdown,capability,yama,bpf`"),
            "{fl:?}"
        );
        assert!(fl[0].1.contains("/etc/default/grub"), "{fl:?}");
        assert!(!fl[0].1.contains("Ubuntu"), "{fl:?}");
        let u = lsm_fix("lockdown,capability,apparmor", Some("ubuntu"), false);
        assert!(u.contains("Ubuntu's default LSM list lacks bpf"), "{u}");
        assert!(u.contains("if the boot loader is GRUB"), "{u}");
        // The trial is not blamed on EPERM when a prerequisite is missing.
        let f = Facts {
            lsm: Some("capability".into()),
            trial: Some(Err((
                "load the BPF LSM programs".into(),
                Some(libc::EPERM),
                None,
            ))),
            ..healthy()
        };
        assert!(fails(&f).iter().all(|(c, _)| !c.contains("forbids")));
    }

    #[test]
    fn root_equivalent_members_are_noted_not_failed() {
        let f = Facts {
            root_like: vec![("docker".into(), vec!["alice".into(), "bob".into()])],
            ..healthy()
        };
        assert!(fails(&f).is_empty());
        let (text, code) = report(&diagnose(&f));
        assert_eq!(code, EXIT_HEALTHY);
        assert!(
            text.contains("alice, bob in the docker group, root by another name"),
            "{text}"
        );
    }

    #[test]
    fn other_prerequisites() {
        let f = Facts {
            btf: false,
            cgroup2: None,
            bpffs: Err("bpffs is not mounted".into()),
            lsm: None,
            mounted_securityfs: false,
            trial: None,
            ..healthy()
        };
        let fl = fails(&f);
        assert_eq!(fl.len(), 4, "{fl:?}");
        assert!(
            fl.iter()
                .any(|(_, fix)| fix.contains("CONFIG_DEBUG_INFO_BTF"))
        );
        let f = Facts {
            mounted_securityfs: true,
            ..healthy()
        };
        assert!(
            report(&diagnose(&f))
                .0
                .contains("mounted it at /sys/kernel/security")
        );
        let f = Facts {
            trial: Some(Err((
                "load the BPF LSM programs".into(),
                Some(libc::EINVAL),
                None,
            ))),
            ..healthy()
        };
        assert!(fails(&f)[0].1.contains("/proc/config.gz"));
    }
}
