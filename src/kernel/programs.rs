//! The programs: open the object, choose the variant a kernel's verifier
//! accepts, pin the maps, load, attach and pin the links ([`Bpf::load_and_attach`]),
//! or load them unpinned for the doctor's trial ([`Bpf::load_unpinned`]).

use std::collections::{HashMap, HashSet};
use std::fs;
use std::io;
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, AsRawFd};
use std::path::{Path, PathBuf};
use std::ptr::NonNull;
use std::time::{SystemTime, UNIX_EPOCH};

use libbpf_rs::ProgramType;
use libbpf_rs::skel::{OpenSkel, Skel, SkelBuilder};

use crate::kernel::error::{BpfError, io_e, lb};
use crate::kernel::filter::{FILTER_WORDS, Filter, SLOTS, WALK_GENS, WordArray};
use crate::kernel::maps::Maps;
use crate::kernel::pins::{remove_empty_pin_dirs, remove_other_links};
use crate::kernel::preflight::{
    COMPAT_IOCTL_HOOK, FILE_SETATTR_HOOK, REMOVE_ACL_HOOK, SET_ACL_HOOK, kernel_has_func,
    probe_memo_store, warn_hidden_ksyms,
};
use crate::kernel::skel::{AgentSandboxSkel, AgentSandboxSkelBuilder};
use crate::kernel::variant::{self, Part, Variant, Why};
use crate::lists::entries::DenySet;

/// How many instructions the verifier processed for each loaded program
/// (`bpf_prog_info.verified_insns`, kernel 5.16 and later: the figure its
/// `BPF_LOG_STATS` summary prints as "processed N insns"), largest first, as
/// one line: "verifier steps 123456 in all: file_open 80000, ...". The
/// steps drive the load time (most of it is the verifier's), so this line is
/// what to compare between kernels and versions of the programs.
fn verifier_steps(skel: &AgentSandboxSkel<'_>) -> String {
    let mut steps: Vec<(u32, String)> = skel
        .object()
        .progs()
        .filter(|p| p.autoload())
        .filter_map(|p| {
            let mut info = libbpf_rs::libbpf_sys::bpf_prog_info::default();
            let mut len = std::mem::size_of_val(&info) as u32;
            // SAFETY: `info` is a bpf_prog_info of `len` bytes; the kernel
            // writes at most `len` bytes of it.
            let rc = unsafe {
                libbpf_rs::libbpf_sys::bpf_prog_get_info_by_fd(
                    p.as_fd().as_raw_fd(),
                    &mut info,
                    &mut len,
                )
            };
            (rc == 0).then(|| (info.verified_insns, p.name().to_string_lossy().into_owned()))
        })
        .collect();
    steps.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
    let total: u64 = steps.iter().map(|(n, _)| u64::from(*n)).sum();
    let each: Vec<String> = steps
        .iter()
        .map(|(n, name)| format!("{name} {n}"))
        .collect();
    format!("verifier steps {total} in all: {}", each.join(", "))
}

/// Routes libbpf's own log lines into `log` at debug level (`RUST_LOG=debug`
/// shows them). Failures reach the log once, as this module's errors; libbpf's
/// generic hints (such as raising `ulimit -l` on EPERM) would mislead there.
pub fn route_libbpf_log() {
    fn print(_level: libbpf_rs::PrintLevel, msg: String) {
        log::debug!(target: "libbpf", "{}", msg.trim_end());
        if let Ok(mut c) = CAPTURED.lock()
            && let Some(buf) = c.as_mut()
            && buf.len() + msg.len() <= MAX_CAPTURED
        {
            buf.push_str(&msg);
        }
    }
    libbpf_rs::set_print(Some((libbpf_rs::PrintLevel::Debug, print)));
}

/// libbpf's lines while a load runs ([`capture_libbpf_log`]).
pub(super) static CAPTURED: std::sync::Mutex<Option<String>> = std::sync::Mutex::new(None);

/// Most bytes of libbpf's lines kept for one load: a rejected program's
/// verifier log runs to about 0.6 MB on 7.3 (the reason is at its end).
pub(super) const MAX_CAPTURED: usize = 8 << 20;

/// Starts (`on`) keeping libbpf's lines (routed by [`route_libbpf_log`]), or
/// stops and returns what was kept since.
pub(super) fn capture_libbpf_log(on: bool) -> String {
    let mut c = CAPTURED.lock().unwrap_or_else(|p| p.into_inner());
    let kept = c.take().unwrap_or_default();
    if on {
        *c = Some(String::new());
    }
    kept
}

/// The running kernel, for [`variant::REMEMBERED_FILE`]: its release and
/// build (`/proc/sys/kernel/osrelease`, `/proc/sys/kernel/version`).
pub(super) fn kernel_id() -> String {
    let read = |p: &str| fs::read_to_string(p).unwrap_or_default().trim().to_string();
    format!(
        "{} {}",
        read("/proc/sys/kernel/osrelease"),
        read("/proc/sys/kernel/version")
    )
}

/// A hash of the embedded BPF object, for [`variant::REMEMBERED_FILE`]: a
/// new build is tried in full again.
pub(super) fn object_id() -> u64 {
    use std::hash::Hasher;
    static OBJECT: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/agent_sandbox.bpf.o"));
    let mut h = siphasher::sip::SipHasher13::new();
    h.write(OBJECT);
    h.finish()
}

/// Adds `parts` (rejected at this start) to [`variant::REMEMBERED_FILE`]
/// `file`, keeping its lines of other kernels; a failure to write is logged
/// (the next start then pays for the rejection again, nothing else).
pub(super) fn remember_rejections(
    file: &Path,
    kernel: &str,
    parts: &[(Part, crate::kernel::verifier::Rejection)],
) {
    let mut text: String = fs::read_to_string(file)
        .unwrap_or_default()
        .lines()
        .filter(|l| !l.starts_with(&format!("{}\t", kernel.replace(['\t', '\n'], " "))))
        .map(|l| format!("{l}\n"))
        .collect();
    for (part, r) in parts {
        text.push_str(&variant::remembered_line(kernel, object_id(), *part, r));
    }
    let write = || -> io::Result<()> {
        if let Some(dir) = file.parent() {
            fs::create_dir_all(dir)?;
        }
        let tmp = file.with_extension("tmp");
        fs::write(&tmp, &text)?;
        fs::rename(&tmp, file)
    };
    if let Err(e) = write() {
        log::warn!(
            "cannot remember the rejected parts in {}: {e}",
            file.display()
        );
    }
}

/// The object's maps that a load leaves unpinned: per-CPU scratch room
/// (`name_scratch`, `denial_scratch`), the count of keys the kernel dropped since this load
/// (`dropped_keys`, which the daemon compares with its own record of this
/// load), the hash walk memos (`walk_memo_hash`, keyed by inode
/// addresses that mean nothing to the next load) and the file memos' guess
/// of which files were opened before (`file_memo_seen`, a hint). Every other
/// map is pinned, so a map added to src/bpf/ outlives the daemon unless it
/// is named here.
const UNPINNED_MAPS: [&str; 6] = [
    "dropped_keys",
    "name_scratch",
    "pattern_scratch",
    "denial_scratch",
    "walk_memo_hash",
    "file_memo_seen",
];

/// Whether the map `name` of the object is pinned: not libbpf's own map of a
/// data section (`.rodata`, `.bss`: their names hold a dot) nor in
/// [`UNPINNED_MAPS`].
pub(super) fn pinned_map(name: &str) -> bool {
    !name.contains('.') && !UNPINNED_MAPS.contains(&name)
}

/// The storage of one opened BPF object (`OpenObject`, which the skeleton
/// borrows for as long as it lives), on the heap at a fixed address and
/// freed when this is dropped. Whatever borrows it must be dropped first:
/// a load and an adoption declare the storage before the skeleton (Rust
/// drops locals in reverse) and a load drops both before it returns.
pub(super) struct ObjectStorage(NonNull<MaybeUninit<libbpf_rs::OpenObject>>);

impl ObjectStorage {
    pub(super) fn new() -> ObjectStorage {
        let raw = Box::into_raw(Box::new(MaybeUninit::uninit()));
        // Box::into_raw never returns null.
        ObjectStorage(NonNull::new(raw).unwrap_or_else(|| unreachable!()))
    }

    /// The storage, for the skeleton to open the object in.
    ///
    /// # Safety
    /// Call once; everything that borrows the result must be dropped
    /// before `self` is.
    unsafe fn borrow(&self) -> &'static mut MaybeUninit<libbpf_rs::OpenObject> {
        // SAFETY: the pointer came from Box::into_raw and stays valid until
        // Drop; the caller holds the only reference and drops it first.
        unsafe { &mut *self.0.as_ptr() }
    }
}

impl Drop for ObjectStorage {
    fn drop(&mut self) {
        // SAFETY: made by Box::into_raw in new(); the skeleton that borrowed
        // it is gone (see the type's docs) and has dropped the object in it.
        drop(unsafe { Box::from_raw(self.0.as_ptr()) });
    }
}

/// Opens the object in `storage` and sets it up for `variant`
/// ([`configure`]); returns it and the map layout version. The result
/// borrows `storage`, and must be dropped before it.
///
/// # Errors
/// [`BpfError`] when the object cannot be opened or configured.
pub(super) fn open_configured(
    storage: &ObjectStorage,
    variant: &Variant,
) -> Result<(crate::kernel::skel::OpenAgentSandboxSkel<'static>, u32), BpfError> {
    // SAFETY: each ObjectStorage is borrowed once, here; the caller drops
    // the skeleton before the storage (see the type's docs).
    let object = unsafe { storage.borrow() };
    let mut open = AgentSandboxSkelBuilder::default()
        .open(object)
        .map_err(lb("open the BPF object"))?;
    let layout = configure(&mut open, variant)?;
    Ok((open, layout))
}

/// Sets up an opened object for `variant`: the memo store in `.rodata`,
/// which programs load (the optional parts, and the hooks this kernel
/// lacks), the hash memos' size. Returns the map layout version
/// (`AGENT_SANDBOX_LAYOUT_VERSION`, the pin directory's `v<n>`).
///
/// # Errors
/// [`BpfError`] for an object without `.rodata` or a map that cannot be sized.
pub(super) fn configure(
    open: &mut crate::kernel::skel::OpenAgentSandboxSkel<'_>,
    variant: &Variant,
) -> Result<u32, BpfError> {
    let rodata = open
        .maps
        .rodata_data
        .as_mut()
        .ok_or_else(|| BpfError::Unsupported("BPF object has no .rodata".into()))?;
    let layout = rodata.layout_version;
    rodata.walk_memo_store = variant::memo_store(variant);
    open.progs
        .file_ioctl_compat
        .set_autoload(variant.has(Part::CompatIoctl));
    // Not a part: where the hook is missing (6.1), ACLs reach the
    // setxattr hook, which refuses them the same way.
    open.progs
        .inode_set_acl
        .set_autoload(kernel_has_func(SET_ACL_HOOK));
    open.progs
        .inode_remove_acl
        .set_autoload(kernel_has_func(REMOVE_ACL_HOOK));
    open.progs
        .inode_file_setattr
        .set_autoload(kernel_has_func(FILE_SETATTR_HOOK));
    // The hash memos' map takes memory only where they are used.
    if variant::memo_store(variant) != 2 {
        open.maps
            .walk_memo_hash
            .set_max_entries(1)
            .map_err(lb("size the walk_memo_hash map"))?;
    }
    // Its only job is to keep memos valid.
    open.progs
        .vfs_rename_exit
        .set_autoload(variant.has(Part::WalkMemos));
    Ok(layout)
}

/// The loaded (or adopted), attached programs and their maps, with a mirror
/// of their content.
pub struct Bpf {
    /// The maps, by handles of their own (the skeleton is gone after the load).
    pub(super) maps: Maps,
    pub(super) pin_dir: PathBuf,
    /// Name prefix of this daemon's link pins (`link-<ns>-`).
    pub(super) generation: String,
    /// The programs attached (and pinned), by name.
    pub(super) attached: Vec<String>,
    /// cgid -> what the daemon put in deny_map and name_map for that sandbox
    /// (a superset of deny_map: the kernel drops keys of freed inodes).
    pub(super) mirror: HashMap<u64, DenySet>,
    /// Sandbox cgroup ids currently in agent_cgid_set.
    pub(super) sandboxes: HashSet<u64>,
    pub(super) slots: WordArray,
    /// walk_gens (agent_sandbox.h): its `marks` count is bumped here.
    pub(super) walk_gens: WordArray,
    pub(super) filter: Filter,
    /// Per sandbox: dropped_keys as of its last apply that wrote every
    /// desired file key. Per sandbox, not one value: a drop may have taken a
    /// key of any sandbox, so each must rewrite its keys once after it.
    pub(super) drops_seen: HashMap<u64, u64>,
    /// The links of an unpinned load ([`Bpf::load_unpinned`]): the programs
    /// stay attached while these live. Empty for a pinned load.
    pub(super) _links: Vec<libbpf_rs::Link>,
    /// Whether the btrfs types were in the kernel's BTF when the programs
    /// were loaded (else btrfs keys cannot match; see [`Bpf::needs_reload_for`]).
    pub(super) btrfs_loaded: bool,
    /// Per sandbox: a number that changes whenever its entries in the maps
    /// or the mirror do (see [`Bpf::version`]).
    pub(super) versions: HashMap<u64, u64>,
    /// The optional parts this load left out ([`Bpf::variant`]).
    pub(super) variant: Variant,
    /// Whether /proc/kallsyms showed the walk's kernel symbols at the load
    /// (libbpf resolved them), as [`crate::kernel::adopt`] records it.
    pub(super) ksyms_shown: bool,
    /// What pattern_shapes' slots hold ([`crate::kernel::patterns`]).
    pub(super) shapes: crate::kernel::patterns::ShapeSlots,
    /// pat_prefilter as last written (None: not yet this start).
    pub(super) prefilter: Option<crate::kernel::patterns::Prefilter>,
}

impl Bpf {
    /// Opens the object, reuses the pinned maps (or creates and pins them),
    /// loads and attaches the programs (the LSM and fexit ones to their
    /// hooks, the cgroup sock_addr ones to the cgroup directory `cgroup`, the
    /// sandboxes' parent), pins their links and then unpins the
    /// links of earlier daemons. The parts a verifier rejected are
    /// remembered in `state_dir` ([`variant::REMEMBERED_FILE`]) for the next
    /// start on the same kernel.
    ///
    /// # Errors
    /// [`BpfError`]; the kernel's refusal to load or attach is
    /// [`BpfError::Kernel`] with its errno.
    pub fn load_and_attach(
        pin_root: &Path,
        state_dir: &Path,
        cgroup: &Path,
    ) -> Result<Bpf, BpfError> {
        Bpf::load(Some(pin_root), Some(state_dir), Some(cgroup))
    }

    /// The doctor's trial (`agent-sandbox-execd --check`): the object with
    /// fresh, unpinned maps, loaded and attached (the cgroup sock_addr
    /// programs loaded only: they have no cgroup to attach to); dropping the result
    /// detaches the programs and frees the maps. Nothing pinned is read or
    /// written, so a running daemon is not disturbed; with empty
    /// maps the programs deny nothing while attached.
    ///
    /// # Errors
    /// As [`Bpf::load_and_attach`].
    pub fn load_unpinned() -> Result<Bpf, BpfError> {
        Bpf::load(None, None, None)
    }

    /// The variant loaded: the optional parts left out, and why.
    pub fn variant(&self) -> &Variant {
        &self.variant
    }

    /// How many programs are attached.
    pub fn attached_count(&self) -> usize {
        self.attached.len()
    }

    /// [`Bpf::load_and_attach`] with the pins below `pin_root`, or
    /// [`Bpf::load_unpinned`] without. Starts from the full variant less
    /// the parts [`variant::WITHOUT_ENV`] names; when the verifier rejects a
    /// program that holds an optional part ([`variant::fallback`]), loads
    /// again without that part, logging once what is missing and what it
    /// costs.
    pub(super) fn load(
        pin_root: Option<&Path>,
        state_dir: Option<&Path>,
        cgroup: Option<&Path>,
    ) -> Result<Bpf, BpfError> {
        let forced = std::env::var(variant::WITHOUT_ENV).unwrap_or_default();
        let forced = variant::parse_without(&forced).map_err(BpfError::Unsupported)?;
        let mut variant = Variant::without(&forced);
        // Without the hook in the kernel, loading its program would fail.
        if !kernel_has_func(COMPAT_IOCTL_HOOK) {
            variant.leave_out(
                Part::CompatIoctl,
                Why::NotInKernel(format!(
                    "no {COMPAT_IOCTL_HOOK} (kernels before 6.8 without the backport send \
                     32-bit ioctls to the file_ioctl hook, which checks them)"
                )),
            );
        }
        if variant.has(Part::MemoInodeStorage)
            && variant.has(Part::WalkMemos)
            && let Some(rejection) = probe_memo_store()
        {
            variant.leave_out(Part::MemoInodeStorage, Why::Rejected(rejection));
        }
        let kernel = kernel_id();
        let remembered_file = state_dir.map(|d| d.join(variant::REMEMBERED_FILE));
        let mut remembered = Vec::new();
        if let Some(file) = &remembered_file {
            let text = fs::read_to_string(file).unwrap_or_default();
            for (part, mut r) in variant::remembered(&text, &kernel, object_id()) {
                r.reason
                    .push_str(" [remembered from an earlier start on this kernel]");
                variant.leave_out(part, Why::Rejected(r));
            }
        }
        // A restart of the same build on the same kernel takes over the
        // programs it left attached: nothing to verify again.
        if let (Some(root), Some(dir), Some(cg)) = (pin_root, state_dir, cgroup) {
            let started = std::time::Instant::now();
            match crate::kernel::adopt::adopt(root, dir, cg, &variant) {
                Ok(Some(mut bpf)) => {
                    log::info!(
                        "adopted the BPF programs an earlier start of this build attached \
                         ({} programs, {}; nothing verified again) in {} ms",
                        bpf.attached.len(),
                        bpf.generation.trim_end_matches('-'),
                        started.elapsed().as_millis()
                    );
                    for line in variant.describe() {
                        log::warn!("loaded without {line}");
                    }
                    bpf.variant = variant;
                    return Ok(bpf);
                }
                Ok(None) => {}
                Err(e) => log::info!("cannot adopt the attached programs ({e}); loading them"),
            }
        }
        loop {
            match Bpf::load_variant(pin_root, &variant, cgroup) {
                Ok(mut bpf) => {
                    for line in variant.describe() {
                        log::warn!("loaded without {line}");
                    }
                    if let Some(file) = &remembered_file
                        && !remembered.is_empty()
                    {
                        remember_rejections(file, &kernel, &remembered);
                    }
                    bpf.variant = variant;
                    if let (Some(_), Some(dir), Some(_)) = (pin_root, state_dir, cgroup) {
                        crate::kernel::adopt::write_stamp(dir, &bpf);
                    }
                    return Ok(bpf);
                }
                Err(BpfError::Rejected { rejection, cause }) => {
                    match variant::fallback(&rejection.program, &variant) {
                        Some(part) => {
                            log::warn!(
                                "{rejection}; loading again without {} ({})",
                                part.name(),
                                part.cost()
                            );
                            remembered.push((part, rejection.clone()));
                            variant.leave_out(part, Why::Rejected(rejection));
                        }
                        None => return Err(BpfError::Rejected { rejection, cause }),
                    }
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// One load of `variant` (see [`Bpf::load`]).
    pub(super) fn load_variant(
        pin_root: Option<&Path>,
        variant: &Variant,
        cgroup: Option<&Path>,
    ) -> Result<Bpf, BpfError> {
        let pinned = pin_root.is_some();
        // btrfs registers /sys/fs/btrfs when its module initialises; its BTF
        // (module or vmlinux) is then there for the CO-RE relocations.
        let btrfs_loaded = Path::new("/sys/fs/btrfs").exists();
        let storage = ObjectStorage::new();
        // `open` and the skeleton it becomes are dropped before `storage`
        // (declared after it; dropped explicitly below).
        let (mut open, layout) = open_configured(&storage, variant)?;
        // Unpinned: no directory (an empty path, used for nothing).
        let pin_dir = pin_root
            .map(|r| r.join(format!("v{layout}")))
            .unwrap_or_default();
        if pinned {
            fs::create_dir_all(&pin_dir).map_err(io_e(format!("create {}", pin_dir.display())))?;
        }
        if pinned {
            for mut map in open.open_object_mut().maps_mut() {
                let name = map.name().to_string_lossy().into_owned();
                if !pinned_map(&name) {
                    continue;
                }
                map.set_pin_path(pin_dir.join(&name))
                    .map_err(lb(format!("set the {name} pin path")))?;
            }
        }
        capture_libbpf_log(true);
        let started = std::time::Instant::now();
        let loaded = open.load();
        let log = capture_libbpf_log(false);
        let skel = match loaded {
            Ok(s) => {
                log::info!(
                    "BPF programs loaded (verified) in {} ms; {}",
                    started.elapsed().as_millis(),
                    verifier_steps(&s)
                );
                s
            }
            Err(cause) => {
                // libbpf unpins the maps it pinned for a load that failed
                // (bpf_object_load), leaving the directories it was given.
                if pinned {
                    remove_empty_pin_dirs(&pin_dir);
                }
                if let Some(rejection) = crate::kernel::verifier::rejection(&log) {
                    return Err(BpfError::Rejected { rejection, cause });
                }
                return Err(BpfError::Kernel {
                    what: "load the BPF LSM programs".into(),
                    cause,
                });
            }
        };
        let ksyms_shown = warn_hidden_ksyms();
        let maps = Maps::of_skeleton(&skel)?;
        let stamp = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or_default();
        let generation = format!("link-{stamp}-");
        let mut attached = Vec::new();
        let mut links = Vec::new();
        // The cgroup sock_addr programs attach to the sandboxes' parent
        // cgroup: they run for sockets made in a sandbox only.
        let parent = match cgroup {
            Some(dir) => Some(fs::File::open(dir).map_err(io_e(format!(
                "open the cgroup {} for the loopback programs",
                dir.display()
            )))?),
            None => None,
        };
        for prog in skel.object().progs_mut().filter(|p| p.autoload()) {
            let name = prog.name().to_string_lossy().into_owned();
            let attach = if prog.prog_type() == ProgramType::CgroupSockAddr {
                // Without a cgroup (the doctor's trial): loaded, not attached.
                let Some(dir) = &parent else { continue };
                prog.attach_cgroup(dir.as_raw_fd())
            } else {
                // By its section: lsm/ hooks and the one fexit/ program.
                prog.attach()
            };
            let mut link = attach.map_err(|cause| BpfError::Kernel {
                what: format!("attach the {name} program"),
                cause,
            })?;
            if pinned {
                link.pin(pin_dir.join(format!("{generation}{name}")))
                    .map_err(lb(format!("pin the {name} link")))?;
                // Pinned: the program now stays attached after we exit.
                link.disconnect();
            } else {
                links.push(link);
            }
            attached.push(name);
        }
        if pinned {
            remove_other_links(&pin_dir, &generation);
        }
        // Attached (and pinned): the programs and their maps live on without
        // the skeleton, which is dropped here, before its storage.
        drop(skel);
        drop(storage);
        let mut bpf = Bpf::serve_with(maps, pin_dir, generation, attached, links, btrfs_loaded)?;
        bpf.ksyms_shown = ksyms_shown;
        Ok(bpf)
    }

    /// The daemon's side of attached programs whose maps are `maps`: the
    /// mmapped arrays and the mirror of what the maps hold (a load's or an
    /// adopted one's, [`crate::kernel::adopt`]).
    ///
    /// # Errors
    /// [`BpfError`] when an array cannot be mapped.
    pub(super) fn serve_with(
        maps: Maps,
        pin_dir: PathBuf,
        generation: String,
        attached: Vec<String>,
        links: Vec<libbpf_rs::Link>,
        btrfs_loaded: bool,
    ) -> Result<Bpf, BpfError> {
        let slots = WordArray::map(&maps.sandbox_slots, SLOTS, "sandbox_slots")?;
        let walk_gens = WordArray::map(&maps.walk_gens, WALK_GENS, "walk_gens")?;
        let words = WordArray::map(&maps.key_filter, FILTER_WORDS, "key_filter")?;
        let mut bpf = Bpf {
            maps,
            pin_dir,
            generation,
            attached,
            mirror: HashMap::new(),
            versions: HashMap::new(),
            sandboxes: HashSet::new(),
            slots,
            walk_gens,
            filter: Filter {
                words,
                counts: HashMap::new(),
            },
            btrfs_loaded,
            drops_seen: HashMap::new(),
            _links: links,
            variant: Variant::default(),
            ksyms_shown: true,
            shapes: Default::default(),
            prefilter: None,
        };
        bpf.load_mirror();
        Ok(bpf)
    }

    /// The directory holding this layout's pins.
    pub fn pin_dir(&self) -> &Path {
        &self.pin_dir
    }

    /// Whether the programs must be loaded again before `set` can match:
    /// it holds btrfs keys and btrfs was not loaded when they were.
    pub fn needs_reload_for(&self, set: &DenySet) -> bool {
        !self.btrfs_loaded
            && (set.files().iter().any(|f| f.subvol != 0)
                || set.names().iter().any(|n| n.dir.subvol != 0))
    }

    /// Whether this daemon's program links are still pinned (an
    /// administrator's `--disable` or `rm` unpins, and so detaches, them).
    pub fn links_pinned(&self) -> bool {
        self.attached.iter().all(|p| {
            self.pin_dir
                .join(format!("{}{p}", self.generation))
                .exists()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pinned_maps_are_the_state_a_restart_keeps() {
        let storage = ObjectStorage::new();
        // SAFETY: borrowed once; `open` is dropped before `storage`.
        let object = unsafe { storage.borrow() };
        let mut open = AgentSandboxSkelBuilder::default().open(object).unwrap();
        let mut pinned: Vec<String> = open
            .open_object_mut()
            .maps_mut()
            .map(|m| m.name().to_string_lossy().into_owned())
            .filter(|n| pinned_map(n))
            .collect();
        pinned.sort();
        // The kernel keeps 15 bytes of a map's name (BPF_OBJ_NAME_LEN): a
        // longer one would not be found by its pin when a restart adopts
        // the programs (seen: `pattern_prefilter`, a full load at every
        // restart).
        for n in &pinned {
            assert!(
                n.len() <= 15,
                "map name {n} is longer than the kernel keeps"
            );
        }
        assert_eq!(
            pinned,
            [
                "agent_cgid_set",
                "denial_buckets",
                "denial_dropped",
                "denial_stats",
                "denials",
                "deny_map",
                "host_addrs",
                "key_filter",
                "made_dirs",
                "name_map",
                "pat_prefilter",
                "pattern_shapes",
                "port_allow",
                "sandbox_slots",
                "sock_allow",
                "udp_owner",
                "walk_gens",
                "walk_memos"
            ]
        );
    }

    #[test]
    fn object_carries_the_hooks_and_maps() {
        let obj = include_bytes!(concat!(env!("OUT_DIR"), "/agent_sandbox.bpf.o"));
        let has = |needle: &[u8]| obj.windows(needle.len()).any(|w| w == needle);
        for p in [
            "file_open",
            "inode_link",
            "inode_rename",
            "inode_create",
            "inode_mknod",
            "inode_symlink",
            "inode_mkdir",
            "inode_unlink",
            "inode_rmdir",
            "file_ioctl",
            "file_ioctl_compat",
            "inode_free_security",
            "ptrace_access_check",
            "task_kill",
            "task_setrlimit",
            "file_fcntl",
            "unix_stream_connect",
            "unix_may_send",
            "file_receive",
            "sb_mount",
            "move_mount",
            "sb_umount",
            "inode_setattr",
            "inode_setxattr",
            "inode_removexattr",
            "inode_set_acl",
            "inode_remove_acl",
            "inode_file_setattr",
            "socket_bind",
        ] {
            assert!(has(format!("lsm/{p}").as_bytes()), "{p}");
        }
        for p in ["connect4", "connect6", "sendmsg4", "sendmsg6"] {
            assert!(has(format!("cgroup/{p}").as_bytes()), "{p}");
        }
        assert!(has(b"fexit/vfs_rename"), "vfs_rename");
        assert!(has(b"fexit/vfs_mkdir"), "vfs_mkdir");
        for m in [
            "deny_map",
            "name_map",
            "agent_cgid_set",
            "sandbox_slots",
            "key_filter",
            "sock_allow",
            "port_allow",
            "host_addrs",
            "udp_owner",
            "walk_gens",
            "walk_memos",
        ] {
            assert!(has(m.as_bytes()), "{m}");
        }
    }
}
