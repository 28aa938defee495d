//! What the kernel must offer before the programs load: the bpf LSM in the
//! active list, BTF, bpffs mounted where the pins live, the hooks a kernel
//! may lack, the kernel symbols the walk reads, and the feature probe of
//! walk memos in inode storage.

use std::fs;
use std::io;
use std::mem::MaybeUninit;

use libbpf_rs::skel::{OpenSkel, SkelBuilder};

use crate::kernel::error::{BpfError, io_e};
use crate::kernel::programs::capture_libbpf_log;
use crate::kernel::skel::{self};

/// Where bpffs is normally mounted.
pub const BPFFS: &str = "/sys/fs/bpf";

/// The program that only kernels with `security_file_ioctl_compat()` can
/// attach ("lsm: new security_file_ioctl_compat() hook": mainline 6.8, and
/// the 6.1 and 6.6 stable series); found by its BPF LSM attach point in the
/// kernel's BTF (`bpf_lsm_<hook>`, kernel/bpf/bpf_lsm.c).
pub(super) const COMPAT_IOCTL_HOOK: &str = "bpf_lsm_file_ioctl_compat";

/// The hook kernels since 6.2 call for a POSIX ACL set (vfs_set_acl(),
/// fs/posix_acl.c) instead of the setxattr hook, which 6.1 calls for it:
/// `lsm/inode_set_acl` is attached where the kernel's BTF has it, and
/// `lsm/inode_setxattr` covers ACLs where it does not.
pub(super) const SET_ACL_HOOK: &str = "bpf_lsm_inode_set_acl";

/// Its pair for a POSIX ACL removed (vfs_remove_acl(), fs/posix_acl.c,
/// since 6.2): `lsm/inode_remove_acl` is attached where the kernel's BTF has
/// it, and `lsm/inode_removexattr` covers the removal where it does not.
pub(super) const REMOVE_ACL_HOOK: &str = "bpf_lsm_inode_remove_acl";

/// The hook kernels since 6.17 call for a change of a file's attribute
/// flags (vfs_fileattr_set(), fs/file_attr.c): the FS_IOC_SETFLAGS and
/// FS_IOC_FSSETXATTR ioctls and file_setattr(2), which no ioctl hook sees.
/// `lsm/inode_file_setattr` is attached where the kernel's BTF has it.
pub(super) const FILE_SETATTR_HOOK: &str = "bpf_lsm_inode_file_setattr";

/// Whether the running kernel's BTF has the function `name` (a BPF LSM
/// attach point is `bpf_lsm_<hook>`, kernel/bpf/bpf_lsm.c). False when the
/// kernel BTF cannot be read (the load then fails on its own, saying so).
pub(super) fn kernel_has_func(name: &str) -> bool {
    libbpf_rs::btf::Btf::from_vmlinux()
        .map(|btf| {
            btf.type_by_name::<libbpf_rs::btf::types::Func<'_>>(name)
                .is_some()
        })
        .unwrap_or(false)
}

/// Checks the kernel can run the program at all: the bpf LSM is active and
/// kernel BTF exists. `lsm_list` is the content of /sys/kernel/security/lsm
/// (None if unreadable); `has_btf` whether /sys/kernel/btf/vmlinux exists.
///
/// # Errors
/// [`BpfError::Unsupported`] with what to change.
pub fn check_kernel(lsm_list: Option<&str>, has_btf: bool) -> Result<(), BpfError> {
    if !has_btf {
        return Err(BpfError::Unsupported(
            "the kernel has no BTF (/sys/kernel/btf/vmlinux is missing; it needs CONFIG_DEBUG_INFO_BTF=y)"
                .into(),
        ));
    }
    match lsm_list {
        None => Err(BpfError::Unsupported(
            "cannot read /sys/kernel/security/lsm (is securityfs mounted?) to check that the bpf LSM is active"
                .into(),
        )),
        Some(list) if list.trim().split(',').any(|l| l == "bpf") => Ok(()),
        Some(list) => Err(BpfError::Unsupported(format!(
            "the bpf LSM is not active (active LSMs: {}); add `lsm={},bpf` to the kernel command line and reboot",
            list.trim(),
            list.trim()
        ))),
    }
}

/// Reads /sys/kernel/security/lsm, mounting securityfs first if needed.
pub fn read_lsm_list() -> Option<String> {
    const LSM: &str = "/sys/kernel/security/lsm";
    if let Ok(s) = fs::read_to_string(LSM) {
        return Some(s);
    }
    let _ = nix::mount::mount(
        Some("securityfs"),
        "/sys/kernel/security",
        Some("securityfs"),
        nix::mount::MsFlags::empty(),
        None::<&str>,
    );
    fs::read_to_string(LSM).ok()
}

/// Makes sure bpffs is mounted at [`BPFFS`] (mounting it, mode 0700, if not).
///
/// # Errors
/// The statfs or mount error.
pub fn ensure_bpffs() -> Result<(), BpfError> {
    let is_bpffs = |p: &str| {
        nix::sys::statfs::statfs(p)
            .map(|s| s.filesystem_type().0 == crate::os::fs_magic::BPFFS)
            .unwrap_or(false)
    };
    if is_bpffs(BPFFS) {
        return Ok(());
    }
    // A bpffs mounted inside a private mount namespace (e.g. one systemd made
    // for the unit) dies with it, and so would our pins and links.
    let ns = |p: &str| fs::metadata(p).map(|m| std::os::unix::fs::MetadataExt::ino(&m));
    match (ns("/proc/self/ns/mnt"), ns("/proc/1/ns/mnt")) {
        (Ok(a), Ok(b)) if a == b => {}
        (Ok(_), Ok(_)) => {
            return Err(BpfError::Unsupported(format!(
                "bpffs is not mounted at {BPFFS}, and this daemon runs in a private mount namespace where a \
                 mount would not outlive it; mount bpffs on the host (`mount -t bpf bpf {BPFFS}`; systemd does this at boot)"
            )));
        }
        (Err(e), _) | (_, Err(e)) => {
            // "cannot tell" is not "private": /proc/1/ns/mnt may be
            // unreadable even for root (EACCES on some hosts).
            return Err(BpfError::Unsupported(format!(
                "bpffs is not mounted at {BPFFS}, and whether this daemon shares PID 1's mount namespace \
                 cannot be told (reading /proc/1/ns/mnt or /proc/self/ns/mnt: {e}), so a mount here might \
                 not outlive it; mount bpffs on the host (`mount -t bpf bpf {BPFFS}`; systemd does this at boot)"
            )));
        }
    }
    nix::mount::mount(
        Some("bpf"),
        BPFFS,
        Some("bpf"),
        nix::mount::MsFlags::MS_NOSUID
            | nix::mount::MsFlags::MS_NODEV
            | nix::mount::MsFlags::MS_NOEXEC,
        Some("mode=0700"),
    )
    .map_err(|e| io_e(format!("mount bpffs on {BPFFS}"))(io::Error::from(e)))?;
    if !is_bpffs(BPFFS) {
        return Err(BpfError::Unsupported(format!(
            "{BPFFS} is not bpffs after mounting it"
        )));
    }
    Ok(())
}

/// The kernel variables the programs read through untyped ksyms, which
/// libbpf resolves from /proc/kallsyms at load: rename_lock (the walk's
/// rename guard) and mount_lock (walk memos past the root filesystem).
pub const WALK_KSYMS: [&str; 2] = ["rename_lock", "mount_lock"];

/// Which of `names` the kallsyms lines of `text` (the format of
/// /proc/kallsyms: `ADDRESS TYPE NAME [MODULE]` a line) show without an
/// address: missing, or listed at 0, as the kernel shows every address to a
/// reader without CAP_SYSLOG (kernel/kallsyms.c: kallsyms_show_value()).
/// Reads line by line and stops once every name was seen, so the 10 MB
/// file is never held in memory.
pub fn hidden_ksyms<'a>(text: impl io::BufRead, names: &[&'a str]) -> Vec<&'a str> {
    let mut shown = vec![false; names.len()];
    for line in text.lines() {
        let Ok(line) = line else { break };
        let mut f = line.split_whitespace();
        let addr = f.next().and_then(|a| u64::from_str_radix(a, 16).ok());
        f.next();
        if let Some(i) = f.next().and_then(|n| names.iter().position(|&x| x == n)) {
            shown[i] |= addr.is_some_and(|a| a != 0);
        }
        if shown.iter().all(|&s| s) {
            break;
        }
    }
    names
        .iter()
        .zip(shown)
        .filter(|(_, s)| !s)
        .map(|(n, _)| *n)
        .collect()
}

/// Warns when libbpf could not resolve the walk's kernel symbols for this
/// process ([`hidden_ksyms`] of /proc/kallsyms as this process reads it);
/// returns whether it could.
pub(super) fn warn_hidden_ksyms() -> bool {
    let Ok(file) = fs::File::open("/proc/kallsyms") else {
        log::warn!("cannot read /proc/kallsyms: the walk's kernel symbols are not checked");
        return false;
    };
    let hidden = hidden_ksyms(io::BufReader::new(file), &WALK_KSYMS);
    let shown = hidden.is_empty();
    if !shown {
        log::warn!(
            "/proc/kallsyms shows this process no address for {} (it lacks CAP_SYSLOG, or \
             kernel.kptr_restrict is 2): the directory-entry walk cannot see a rename that \
             overlaps it, and keeps no walk memo past the root filesystem (slower); the \
             package's unit grants CAP_SYSLOG for this",
            hidden.join(" and ")
        );
    }
    shown
}

/// The feature probe of walk memos in inode storage (src/bpf/probe.bpf.c):
/// loads (never attaches) a program that passes the opened file's directory
/// inode to `bpf_inode_storage_get()` as `file_open` does. The verifier's
/// rejection if it refuses it (7.x), else None; a probe that fails for
/// another reason (no verifier log) is None too: the real load then decides.
pub(super) fn probe_memo_store() -> Option<crate::kernel::verifier::Rejection> {
    let mut object = MaybeUninit::uninit();
    let open = skel::probe::ProbeSkelBuilder::default()
        .open(&mut object)
        .ok()?;
    capture_libbpf_log(true);
    let loaded = open.load();
    let log = capture_libbpf_log(false);
    match loaded {
        Ok(_) => None,
        Err(_) => {
            let mut r = crate::kernel::verifier::rejection(&log)?;
            r.reason.push_str(
                " [the feature probe of file_open's walk memos in inode storage, src/bpf/probe.bpf.c]",
            );
            Some(r)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernel_checks() {
        assert!(
            check_kernel(
                Some("lockdown,capability,landlock,yama,apparmor,bpf\n"),
                true
            )
            .is_ok()
        );
        let e = check_kernel(Some("lockdown,capability,apparmor\n"), true)
            .unwrap_err()
            .to_string();
        assert!(e.contains("lsm=lockdown,capability,apparmor,bpf"), "{e}");
        assert!(check_kernel(Some("bpfx,bpf_lsm\n"), true).is_err());
        assert!(check_kernel(None, true).is_err());
        assert!(
            check_kernel(Some("bpf"), false)
                .unwrap_err()
                .to_string()
                .contains("BTF")
        );
    }

    #[test]
    fn kernel_symbols_hidden_or_missing() {
        let shown = "ffffffff82a09600 D rename_lock\nffffffff82a09680 D mount_lock\n\
                     ffffffffc0a00000 t foo\t[btrfs]\n";
        assert!(hidden_ksyms(shown.as_bytes(), &WALK_KSYMS).is_empty());
        // Without CAP_SYSLOG every address reads 0.
        let zeros = "0000000000000000 D rename_lock\n0000000000000000 D mount_lock\n";
        assert_eq!(hidden_ksyms(zeros.as_bytes(), &WALK_KSYMS), WALK_KSYMS);
        // A name must match whole: mount_lock_key is not mount_lock.
        let other = "ffffffff82a09600 D rename_lock\nffffffff82a09680 d mount_lock_key\n";
        assert_eq!(hidden_ksyms(other.as_bytes(), &WALK_KSYMS), ["mount_lock"]);
    }
}
