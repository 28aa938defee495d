//! The BPF side, from userspace: load, pin and attach the program, and typed,
//! diff-applied updates of `deny_map` and `agent_cgid_set`.
//!
//! Pins live under `/sys/fs/bpf/agent-sandbox-exec/v<layout>/`: the two maps
//! and one `link-<n>` for the attached program. Because the maps are pinned,
//! deny data and sandbox membership survive a daemon restart; because the link
//! is pinned, the program stays attached while the daemon is down, so a
//! running sandbox is never left unenforced. A new daemon attaches its own
//! program before it unpins the old link (both deny the same; no gap).
//! Removing the pins (package purge) is what detaches the program.
//!
//! This module holds the only `include!` of the generated skeleton.

use std::collections::{HashMap, HashSet};
use std::fs;
use std::io;
use std::mem::MaybeUninit;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use libbpf_rs::skel::{OpenSkel, SkelBuilder};
use libbpf_rs::{MapCore, MapFlags};

use crate::keys::FileKey;

#[allow(clippy::all, missing_docs, unused_imports, dead_code)]
mod skel {
    include!(concat!(env!("OUT_DIR"), "/agent_sandbox.skel.rs"));
}
use skel::{AgentSandboxSkel, AgentSandboxSkelBuilder};

/// Root of this program's pins on bpffs.
pub const PIN_ROOT: &str = "/sys/fs/bpf/agent-sandbox-exec";
/// Where bpffs is normally mounted.
pub const BPFFS: &str = "/sys/fs/bpf";
/// statfs f_type of bpffs (include/uapi/linux/magic.h: BPF_FS_MAGIC).
const BPF_FS_MAGIC: i64 = 0xcafe_4a11;
/// Value stored for every present key (the maps are sets).
const PRESENT: [u8; 1] = [1];

/// Key of `deny_map`, byte-for-byte `struct deny_key` in
/// src/bpf/agent_sandbox.h (24 bytes, no implicit padding).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct DenyKey {
    /// Sandbox cgroup id.
    pub cgid: u64,
    /// `i_ino`.
    pub ino: u64,
    /// `i_sb->s_dev`, kernel encoding.
    pub dev: u32,
    /// Always zero.
    pub reserved: u32,
}

impl DenyKey {
    /// The key denying `file` to the sandbox `cgid`.
    pub fn new(cgid: u64, file: FileKey) -> DenyKey {
        DenyKey {
            cgid,
            ino: file.ino,
            dev: file.dev,
            reserved: 0,
        }
    }

    /// The key's bytes as the kernel compares them (native endianness).
    pub fn to_bytes(self) -> [u8; 24] {
        let mut b = [0u8; 24];
        b[0..8].copy_from_slice(&self.cgid.to_ne_bytes());
        b[8..16].copy_from_slice(&self.ino.to_ne_bytes());
        b[16..20].copy_from_slice(&self.dev.to_ne_bytes());
        b[20..24].copy_from_slice(&self.reserved.to_ne_bytes());
        b
    }

    /// Parses bytes read back from the map.
    pub fn from_bytes(b: &[u8]) -> Option<DenyKey> {
        if b.len() != 24 {
            return None;
        }
        let u64_at = |i: usize| u64::from_ne_bytes(b[i..i + 8].try_into().unwrap_or_default());
        let u32_at = |i: usize| u32::from_ne_bytes(b[i..i + 4].try_into().unwrap_or_default());
        Some(DenyKey {
            cgid: u64_at(0),
            ino: u64_at(8),
            dev: u32_at(16),
            reserved: u32_at(20),
        })
    }

    fn file(&self) -> FileKey {
        FileKey {
            dev: self.dev,
            ino: self.ino,
        }
    }
}

/// Errors of the BPF side; each names the cause and, where there is one, the fix.
#[derive(Debug, thiserror::Error)]
pub enum BpfError {
    /// The kernel lacks a prerequisite; retrying cannot help.
    #[error("{0}")]
    Unsupported(String),
    /// A libbpf operation failed.
    #[error("{what}: {source}")]
    Libbpf {
        /// What was being done.
        what: String,
        /// The libbpf error.
        #[source]
        source: libbpf_rs::Error,
    },
    /// A filesystem operation on bpffs failed.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// The error.
        #[source]
        source: io::Error,
    },
}

fn lb(what: impl Into<String>) -> impl FnOnce(libbpf_rs::Error) -> BpfError {
    let what = what.into();
    move |source| BpfError::Libbpf { what, source }
}

fn io_e(what: impl Into<String>) -> impl FnOnce(io::Error) -> BpfError {
    let what = what.into();
    move |source| BpfError::Io { what, source }
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
            .map(|s| s.filesystem_type().0 == BPF_FS_MAGIC)
            .unwrap_or(false)
    };
    if is_bpffs(BPFFS) {
        return Ok(());
    }
    // A bpffs mounted inside a private mount namespace (e.g. one systemd made
    // for the unit) dies with it, and so would our pins and links.
    let ns = |p: &str| {
        fs::metadata(p)
            .map(|m| std::os::unix::fs::MetadataExt::ino(&m))
            .ok()
    };
    if ns("/proc/self/ns/mnt") != ns("/proc/1/ns/mnt") {
        return Err(BpfError::Unsupported(format!(
            "bpffs is not mounted at {BPFFS}, and this daemon runs in a private mount namespace where a \
             mount would not outlive it; mount bpffs on the host (`mount -t bpf bpf {BPFFS}`; systemd does this at boot)"
        )));
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

/// Routes libbpf's own log lines into `log` at debug level (`RUST_LOG=debug`
/// shows them). Failures reach the log once, as this module's errors; libbpf's
/// generic hints (such as raising `ulimit -l` on EPERM) would mislead there.
pub fn route_libbpf_log() {
    fn print(_level: libbpf_rs::PrintLevel, msg: String) {
        log::debug!(target: "libbpf", "{}", msg.trim_end());
    }
    libbpf_rs::set_print(Some((libbpf_rs::PrintLevel::Debug, print)));
}

/// Whether an apply may remove keys.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ApplyMode {
    /// Make the sandbox's keys exactly the desired set.
    Exact,
    /// Only add: keys no longer desired stay (launches from inside a sandbox,
    /// whose agent may have edited the user's list, and re-applies without a launch).
    AddOnly,
}

/// Counts of one diff-apply.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct ApplyStats {
    /// Keys inserted.
    pub added: usize,
    /// Stale keys removed (with [`ApplyMode::AddOnly`]: stale keys kept).
    pub removed: usize,
    /// Keys already present and kept.
    pub kept: usize,
}

/// The loaded, attached program and its maps, with a mirror of their content.
pub struct Bpf {
    skel: AgentSandboxSkel<'static>,
    pin_dir: PathBuf,
    /// Name prefix of this daemon's link pins (`link-<ns>-`).
    generation: String,
    /// cgid -> file keys currently in deny_map for that sandbox.
    mirror: HashMap<u64, HashSet<FileKey>>,
    /// Sandbox cgroup ids currently in agent_cgid_set.
    sandboxes: HashSet<u64>,
}

impl Bpf {
    /// Opens the object, reuses the pinned maps (or creates and pins them),
    /// loads and attaches both programs, pins their links and then unpins the
    /// links of earlier daemons.
    ///
    /// # Errors
    /// [`BpfError`]; a kernel that refuses the program is [`BpfError::Unsupported`].
    pub fn load_and_attach() -> Result<Bpf, BpfError> {
        let object = Box::leak(Box::new(MaybeUninit::uninit()));
        let mut open = AgentSandboxSkelBuilder::default()
            .open(object)
            .map_err(lb("open the BPF object"))?;
        let layout = open
            .maps
            .rodata_data
            .as_ref()
            .map(|r| r.layout_version)
            .ok_or_else(|| BpfError::Unsupported("BPF object has no .rodata".into()))?;
        let pin_dir = Path::new(PIN_ROOT).join(format!("v{layout}"));
        fs::create_dir_all(&pin_dir).map_err(io_e(format!("create {}", pin_dir.display())))?;
        open.maps
            .deny_map
            .set_pin_path(pin_dir.join("deny_map"))
            .map_err(lb("set the deny_map pin path"))?;
        open.maps
            .agent_cgid_set
            .set_pin_path(pin_dir.join("agent_cgid_set"))
            .map_err(lb("set the agent_cgid_set pin path"))?;
        let skel = open.load().map_err(|e| {
            BpfError::Unsupported(format!(
                "the kernel refused to load the BPF LSM programs ({e}); \
                 BPF LSM programs need a kernel with CONFIG_BPF_LSM=y and bpf in the active LSM list"
            ))
        })?;
        let stamp = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or_default();
        let generation = format!("link-{stamp}-");
        let progs = [
            ("file_open", &skel.progs.file_open),
            ("ptrace_access_check", &skel.progs.ptrace_access_check),
        ];
        for (name, prog) in progs {
            let mut link = prog.attach_lsm().map_err(|e| {
                BpfError::Unsupported(format!(
                    "the kernel refused to attach the lsm/{name} program ({e})"
                ))
            })?;
            link.pin(pin_dir.join(format!("{generation}{name}")))
                .map_err(lb(format!("pin the lsm/{name} link")))?;
            // Pinned: the program now stays attached after we exit.
            link.disconnect();
        }
        remove_other_links(&pin_dir, &generation);
        let mut bpf = Bpf {
            skel,
            pin_dir,
            generation,
            mirror: HashMap::new(),
            sandboxes: HashSet::new(),
        };
        bpf.load_mirror();
        Ok(bpf)
    }

    /// The directory holding this layout's pins.
    pub fn pin_dir(&self) -> &Path {
        &self.pin_dir
    }

    fn load_mirror(&mut self) {
        for k in self.skel.maps.deny_map.keys() {
            if let Some(k) = DenyKey::from_bytes(&k) {
                self.mirror.entry(k.cgid).or_default().insert(k.file());
            }
        }
        for k in self.skel.maps.agent_cgid_set.keys() {
            if let Ok(b) = <[u8; 8]>::try_from(k.as_slice()) {
                self.sandboxes.insert(u64::from_ne_bytes(b));
            }
        }
    }

    /// Whether this daemon's two program links are still pinned (an
    /// administrator's `--disable` or `rm` unpins, and so detaches, them).
    pub fn links_pinned(&self) -> bool {
        ["file_open", "ptrace_access_check"].iter().all(|p| {
            self.pin_dir
                .join(format!("{}{p}", self.generation))
                .exists()
        })
    }

    /// Cgroup ids that have entries in either map.
    pub fn known_sandboxes(&self) -> HashSet<u64> {
        self.sandboxes
            .iter()
            .chain(self.mirror.keys())
            .copied()
            .collect()
    }

    /// Makes deny_map hold exactly `desired` (with [`ApplyMode::AddOnly`]: at
    /// least `desired`) for sandbox `cgid` and marks
    /// `cgid` as a sandbox: inserts the new keys, then adds `cgid` to
    /// agent_cgid_set, then removes stale keys, so the live set never drops
    /// below the desired set.
    ///
    /// # Errors
    /// A failed insert (map full, ...) returns the error before anything is
    /// removed; keys inserted so far stay (they only add denials).
    pub fn apply(
        &mut self,
        cgid: u64,
        desired: &HashSet<FileKey>,
        mode: ApplyMode,
    ) -> Result<ApplyStats, BpfError> {
        let current = self.mirror.entry(cgid).or_default();
        let to_add: Vec<FileKey> = desired.difference(current).copied().collect();
        let to_remove: Vec<FileKey> = current.difference(desired).copied().collect();
        let stats = ApplyStats {
            added: to_add.len(),
            removed: to_remove.len(),
            kept: desired.len() - to_add.len(),
        };
        let map = &self.skel.maps.deny_map;
        for chunk in to_add.chunks(4096) {
            let mut keys = Vec::with_capacity(chunk.len() * 24);
            for f in chunk {
                keys.extend_from_slice(&DenyKey::new(cgid, *f).to_bytes());
            }
            let values = vec![PRESENT[0]; chunk.len()];
            let r = map.update_batch(
                &keys,
                &values,
                chunk.len() as u32,
                MapFlags::ANY,
                MapFlags::ANY,
            );
            if let Err(e) = r {
                // The batch may have stopped part-way: fall back to one by one,
                // recording exactly what is in.
                for f in chunk {
                    let k = DenyKey::new(cgid, *f).to_bytes();
                    map.update(&k, &PRESENT, MapFlags::ANY)
                        .map_err(|e2| BpfError::Libbpf {
                            what: format!(
                                "insert into deny_map ({} entries, capacity {}; batch error: {e})",
                                self.mirror.values().map(HashSet::len).sum::<usize>(),
                                map.max_entries()
                            ),
                            source: e2,
                        })?;
                    self.mirror.entry(cgid).or_default().insert(*f);
                }
                continue;
            }
            self.mirror
                .entry(cgid)
                .or_default()
                .extend(chunk.iter().copied());
        }
        self.add_sandbox(cgid)?;
        if mode == ApplyMode::Exact {
            self.remove_keys(cgid, &to_remove);
        }
        Ok(stats)
    }

    fn add_sandbox(&mut self, cgid: u64) -> Result<(), BpfError> {
        if self.sandboxes.contains(&cgid) {
            return Ok(());
        }
        self.skel
            .maps
            .agent_cgid_set
            .update(&cgid.to_ne_bytes(), &PRESENT, MapFlags::ANY)
            .map_err(lb("insert into agent_cgid_set"))?;
        self.sandboxes.insert(cgid);
        Ok(())
    }

    fn remove_keys(&mut self, cgid: u64, files: &[FileKey]) {
        let map = &self.skel.maps.deny_map;
        let mirror = self.mirror.entry(cgid).or_default();
        for chunk in files.chunks(4096) {
            let mut keys = Vec::with_capacity(chunk.len() * 24);
            for f in chunk {
                keys.extend_from_slice(&DenyKey::new(cgid, *f).to_bytes());
            }
            if map
                .delete_batch(&keys, chunk.len() as u32, MapFlags::ANY, MapFlags::ANY)
                .is_ok()
            {
                for f in chunk {
                    mirror.remove(f);
                }
                continue;
            }
            for f in chunk {
                let k = DenyKey::new(cgid, *f).to_bytes();
                match map.delete(&k) {
                    Ok(()) => {
                        mirror.remove(f);
                    }
                    Err(e) if e.kind() == libbpf_rs::ErrorKind::NotFound => {
                        mirror.remove(f);
                    }
                    Err(e) => {
                        log::warn!("cannot remove a stale deny_map key of cgroup {cgid}: {e}")
                    }
                }
            }
        }
    }

    /// Forgets a sandbox that no longer exists: removes `cgid` from
    /// agent_cgid_set, then its keys.
    pub fn forget_sandbox(&mut self, cgid: u64) {
        if self.sandboxes.remove(&cgid)
            && let Err(e) = self.skel.maps.agent_cgid_set.delete(&cgid.to_ne_bytes())
        {
            log::warn!("cannot remove cgroup {cgid} from agent_cgid_set: {e}");
        }
        let files: Vec<FileKey> = self
            .mirror
            .get(&cgid)
            .into_iter()
            .flatten()
            .copied()
            .collect();
        self.remove_keys(cgid, &files);
        if self.mirror.get(&cgid).is_some_and(HashSet::is_empty) {
            self.mirror.remove(&cgid);
        }
    }
}

/// The keys that other layouts' pinned `deny_map`s hold for the sandboxes
/// `cgids`, so a new layout can start with everything the old one denied
/// (including keys kept by add-only applies). A map whose key is not this
/// layout's 24-byte [`DenyKey`] cannot be read; it is reported in the error
/// list and its layout must then stay attached.
pub fn keys_in_other_layouts(
    ours: &Path,
    cgids: &HashSet<u64>,
) -> (HashMap<u64, HashSet<FileKey>>, Vec<String>) {
    let mut found: HashMap<u64, HashSet<FileKey>> = HashMap::new();
    let mut errors = Vec::new();
    let Some(root) = ours.parent() else {
        return (found, errors);
    };
    let Ok(entries) = fs::read_dir(root) else {
        return (found, errors);
    };
    for e in entries.flatten() {
        let dir = e.path();
        if dir == ours {
            continue;
        }
        let path = dir.join("deny_map");
        let map = match libbpf_rs::MapHandle::from_pinned_path(&path) {
            Ok(m) => m,
            Err(err) if !path.exists() => {
                log::debug!("{}: {err}", path.display());
                continue;
            }
            Err(err) => {
                errors.push(format!("cannot open {}: {err}", path.display()));
                continue;
            }
        };
        if map.key_size() as usize != std::mem::size_of::<DenyKey>() {
            errors.push(format!(
                "{} has {}-byte keys; this version cannot carry them over",
                path.display(),
                map.key_size()
            ));
            continue;
        }
        for k in map.keys() {
            if let Some(k) = DenyKey::from_bytes(&k).filter(|k| cgids.contains(&k.cgid)) {
                found.entry(k.cgid).or_default().insert(k.file());
            }
        }
    }
    (found, errors)
}

/// Unpins the links and then the maps of every other layout's pin directory
/// (`v<n>` next to `ours`). Called once this layout's maps hold every
/// sandbox, so the older programs can go without a gap.
pub fn retire_other_layouts(ours: &Path) {
    let Some(root) = ours.parent() else { return };
    let Ok(entries) = fs::read_dir(root) else {
        return;
    };
    for e in entries.flatten() {
        let path = e.path();
        if path == ours || !e.file_name().to_string_lossy().starts_with('v') {
            continue;
        }
        match unpin_dir(&path) {
            Ok(_) => log::info!("retired the earlier map layout {}", path.display()),
            Err(err) => log::warn!("cannot remove {}: {err}", path.display()),
        }
    }
}

/// Unpins everything under [`PIN_ROOT`]: links first (detaching the
/// programs), then maps, then the directories. Returns what was removed.
///
/// # Errors
/// The first unpin or rmdir error.
pub fn unpin_all() -> io::Result<Vec<PathBuf>> {
    let mut removed = Vec::new();
    let root = Path::new(PIN_ROOT);
    let dirs = match fs::read_dir(root) {
        Ok(d) => d,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(removed),
        Err(e) => return Err(e),
    };
    for dir in dirs.flatten() {
        removed.extend(unpin_dir(&dir.path())?);
    }
    fs::remove_dir(root)?;
    Ok(removed)
}

/// Unpins everything in one layout directory, links first (the programs
/// detach while their maps still deny), then the maps, then removes the
/// directory. Returns what was unpinned.
///
/// # Errors
/// The first unpin or rmdir error.
fn unpin_dir(dir: &Path) -> io::Result<Vec<PathBuf>> {
    let mut names: Vec<PathBuf> = fs::read_dir(dir)?.flatten().map(|e| e.path()).collect();
    names.sort_by_key(|p| {
        !p.file_name()
            .is_some_and(|n| n.to_string_lossy().starts_with("link-"))
    });
    for p in &names {
        fs::remove_file(p)?;
    }
    fs::remove_dir(dir)?;
    Ok(names)
}

/// Unpins every `link-*` in `dir` not starting with `keep` (detaching earlier
/// daemons' programs once ours are attached).
fn remove_other_links(dir: &Path, keep: &str) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name();
        let name = name.to_string_lossy();
        if name.starts_with("link-") && !name.starts_with(keep) {
            if let Err(err) = fs::remove_file(e.path()) {
                log::warn!("cannot unpin the old link {}: {err}", e.path().display());
            } else {
                log::info!("replaced the earlier program link {name}");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::mem::{offset_of, size_of};

    #[test]
    fn rust_key_matches_the_c_layout() {
        // skel::types::deny_key is generated from the object's BTF, i.e. from
        // src/bpf/agent_sandbox.h as clang laid it out.
        type C = skel::types::deny_key;
        assert_eq!(size_of::<DenyKey>(), size_of::<C>());
        assert_eq!(size_of::<DenyKey>(), 24);
        assert_eq!(offset_of!(DenyKey, cgid), offset_of!(C, cgid));
        assert_eq!(offset_of!(DenyKey, ino), offset_of!(C, ino));
        assert_eq!(offset_of!(DenyKey, dev), offset_of!(C, dev));
        assert_eq!(offset_of!(DenyKey, reserved), offset_of!(C, reserved));
    }

    #[test]
    fn key_bytes_round_trip_and_zero_padding() {
        let k = DenyKey::new(
            0x1122_3344_5566_7788,
            FileKey {
                dev: (254 << 20) | 1,
                ino: 42,
            },
        );
        let b = k.to_bytes();
        assert_eq!(&b[20..24], &[0, 0, 0, 0]);
        assert_eq!(DenyKey::from_bytes(&b), Some(k));
        assert_eq!(DenyKey::from_bytes(&b[..23]), None);
        // Same bytes as the struct in memory (what libbpf would send).
        // SAFETY: DenyKey is repr(C), 24 bytes, no padding.
        let raw: [u8; 24] = unsafe { std::mem::transmute(k) };
        assert_eq!(raw, b);
    }

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
    fn object_carries_the_hook_and_maps() {
        let obj = include_bytes!(concat!(env!("OUT_DIR"), "/agent_sandbox.bpf.o"));
        let has = |needle: &[u8]| obj.windows(needle.len()).any(|w| w == needle);
        assert!(has(b"lsm/file_open"));
        assert!(has(b"deny_map"));
        assert!(has(b"agent_cgid_set"));
    }
}
