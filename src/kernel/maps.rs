//! The BPF side, from userspace: load, pin and attach the programs, and typed,
//! diff-applied updates of their maps.
//!
//! Pins live under `/sys/fs/bpf/agent-sandbox-exec/v<layout>/`: the maps and
//! one `link-<n>-<program>` per attached program. Because the maps are pinned,
//! deny data and sandbox membership survive a daemon restart; because the links
//! are pinned, the programs stay attached while the daemon is down, so a
//! running sandbox is never left unenforced. A new daemon attaches its own
//! programs before it unpins the old links (both deny the same; no gap).
//! Removing the pins (package purge) is what detaches the programs.
//!
//! Maps (src/bpf/agent_sandbox.h has the layout): `deny_map` (file keys),
//! `name_map` (directory key + name), `agent_cgid_set` (sandbox cgroup ids),
//! and two arrays the daemon writes through mmap: `sandbox_slots` (the cheap
//! "is this cgroup a sandbox" gate) and `key_filter` (the "certainly not
//! listed" bitmap, kept as per-bit counts here).
//!
//! This module holds the only `include!` of the generated skeleton.

use std::collections::{HashMap, HashSet};
use std::fs;
use std::io;
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, AsRawFd};
use std::path::{Path, PathBuf};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use libbpf_rs::skel::{OpenSkel, Skel, SkelBuilder};
use libbpf_rs::{MapCore, MapFlags};

use crate::lists::entries::{
    DenySet, FileKey, KIND_DIR_BASE, KIND_EXC_BASE, KIND_EXC_USER, KIND_HAS_DIRS, KIND_OPEN,
    NAME_MAX, NameKey,
};

#[allow(
    clippy::all,
    clippy::unwrap_used,
    clippy::undocumented_unsafe_blocks,
    missing_docs,
    unused_imports,
    dead_code
)]
mod skel {
    include!(concat!(env!("OUT_DIR"), "/agent_sandbox.skel.rs"));
}
#[allow(
    clippy::all,
    clippy::unwrap_used,
    clippy::undocumented_unsafe_blocks,
    missing_docs,
    unused_imports,
    dead_code
)]
mod probe_skel {
    include!(concat!(env!("OUT_DIR"), "/probe.skel.rs"));
}
use crate::kernel::variant::{self, Part, Variant, Why};
use skel::{AgentSandboxSkel, AgentSandboxSkelBuilder};

/// Where bpffs is normally mounted.
pub const BPFFS: &str = "/sys/fs/bpf";
/// statfs f_type of bpffs (include/uapi/linux/magic.h: BPF_FS_MAGIC).
const BPF_FS_MAGIC: i64 = 0xcafe_4a11;
/// Value stored for every present key (the maps are sets).
const PRESENT: [u8; 1] = [1];
/// The program that only kernels with `security_file_ioctl_compat()` can
/// attach ("lsm: new security_file_ioctl_compat() hook": mainline 6.8, and
/// the 6.1 and 6.6 stable series); found by its BPF LSM attach point in the
/// kernel's BTF (`bpf_lsm_<hook>`, kernel/bpf/bpf_lsm.c).
const COMPAT_IOCTL_HOOK: &str = "bpf_lsm_file_ioctl_compat";
/// AGENT_SANDBOX_SLOTS, AGENT_SANDBOX_SLOT_SHARED and
/// AGENT_SANDBOX_SLOT_DIRS (agent_sandbox.h).
const SLOTS: usize = 4096;
const SLOT_SHARED: u64 = u64::MAX;
const SLOT_DIRS: u64 = 1 << 63;
/// walk_gens' one value, struct walk_gens (agent_sandbox.h), as 64-bit words:
/// `marks` is word 0 (written here), `moves` word 1 (the kernel's).
const WALK_GENS: usize = 2;
const WALK_GEN_MARKS: usize = 0;
/// AGENT_SANDBOX_FILTER_BITS_LOG2 (agent_sandbox.h).
const FILTER_BITS_LOG2: u32 = 23;
const FILTER_WORDS: usize = 1 << (FILTER_BITS_LOG2 - 6);
const TAG_FILE: u64 = 0;
const TAG_DIR: u64 = 1;
/// The map keys as the skeleton generates them from the object's BTF, i.e.
/// from src/bpf/agent_sandbox.h as clang laid it out: the one description of
/// their layout ([`KeyBytes`] turns them into the bytes libbpf sends).
type CDenyKey = skel::types::deny_key;
type CFileKey = skel::types::file_key;
type CNameKey = skel::types::name_key;
/// Bytes of a deny_map key (`struct deny_key`: 32).
const DENY_KEY_LEN: usize = size_of::<CDenyKey>();
/// Bytes of a name_map key (`struct name_key`: 288).
const NAME_KEY_LEN: usize = size_of::<CNameKey>();
/// Bytes of a layout-2 deny_map key ({cgid, ino, dev, reserved}, before the
/// btrfs subvolume; read only to carry old pins over).
const LAYOUT2_KEY_LEN: usize = 24;

/// A key type of the skeleton, seen as the bytes the kernel hashes.
///
/// # Safety
/// Implement only for `#[repr(C)]` types without padding bytes (every byte
/// initialised) for which any bit pattern is valid; the unit test
/// `rust_keys_match_the_c_layout` checks their sizes.
unsafe trait KeyBytes: Copy + Default {
    /// The key's bytes, native endianness.
    fn bytes(&self) -> &[u8] {
        // SAFETY: per the trait's contract, all size_of::<Self>() bytes are initialised.
        unsafe { std::slice::from_raw_parts((self as *const Self).cast::<u8>(), size_of::<Self>()) }
    }

    /// The key in `b` (read back from a map), if `b` has its size.
    fn from_bytes(b: &[u8]) -> Option<Self> {
        if b.len() != size_of::<Self>() {
            return None;
        }
        // SAFETY: b holds size_of::<Self>() bytes and any bit pattern is a valid Self.
        Some(unsafe { std::ptr::read_unaligned(b.as_ptr().cast::<Self>()) })
    }
}

// SAFETY: repr(C) {u64, {u64, u64, u32, u32}}: 32 bytes, no padding.
unsafe impl KeyBytes for CDenyKey {}
// SAFETY: repr(C) {u64, {u64, u64, u32, u32}, [i8; 256]}: 288 bytes, no padding.
unsafe impl KeyBytes for CNameKey {}

fn c_file(k: FileKey) -> CFileKey {
    CFileKey {
        ino: k.ino,
        subvol: k.subvol,
        dev: k.dev,
        kind: k.kind,
    }
}

fn file_of(c: &CFileKey) -> FileKey {
    FileKey {
        ino: c.ino,
        subvol: c.subvol,
        dev: c.dev,
        kind: c.kind,
    }
}

/// The deny_map key denying `file` to sandbox `cgid`.
fn deny_key(cgid: u64, file: FileKey) -> CDenyKey {
    CDenyKey {
        cgid,
        file: c_file(file),
    }
}

/// Parses a deny_map key read back from a map: this layout's, or a
/// layout-2 one ([`LAYOUT2_KEY_LEN`]; subvolume 0, kind [`KIND_OPEN`]).
fn parse_deny_key(b: &[u8]) -> Option<(u64, FileKey)> {
    if b.len() == LAYOUT2_KEY_LEN {
        let u64_at = |i: usize| u64::from_ne_bytes(b[i..i + 8].try_into().unwrap_or_default());
        let dev = u32::from_ne_bytes(b[16..20].try_into().unwrap_or_default());
        return Some((
            u64_at(0),
            FileKey {
                ino: u64_at(8),
                subvol: 0,
                dev,
                kind: KIND_OPEN,
            },
        ));
    }
    CDenyKey::from_bytes(b).map(|k| (k.cgid, file_of(&k.file)))
}

/// The name_map key for `n` in sandbox `cgid` (name zero-padded; a name is
/// at most [`NAME_MAX`] bytes, so the last byte stays 0).
fn name_key(cgid: u64, n: &NameKey) -> CNameKey {
    let mut k = CNameKey {
        cgid,
        dir: c_file(n.dir),
        ..Default::default()
    };
    for (slot, &c) in k.name.iter_mut().zip(n.name.iter().take(NAME_MAX)) {
        *slot = c as i8;
    }
    k
}

/// Parses a name_map key read back from a map.
fn parse_name_key(b: &[u8]) -> Option<(u64, NameKey)> {
    let k = CNameKey::from_bytes(b)?;
    let len = k.name.iter().position(|&c| c == 0).unwrap_or(k.name.len());
    let name = k.name[..len].iter().map(|&c| c as u8).collect();
    Some((
        k.cgid,
        NameKey {
            dir: file_of(&k.dir),
            name,
        },
    ))
}

/// Whether deny_map entry `f` has a key_filter bit: only [`KIND_OPEN`] ones,
/// which the open hook looks up; the hooks that read the other kinds
/// (rmdir, unlink, rename, and opens in case-insensitive directories) are
/// rare enough to go to the map directly.
fn uses_filter(f: &FileKey) -> bool {
    f.kind == KIND_OPEN || (KIND_DIR_BASE..=KIND_EXC_USER).contains(&f.kind)
}

/// Whether `set` holds directory entries (the [`KIND_HAS_DIRS`] key).
fn has_dirs(set: &DenySet) -> bool {
    set.files()
        .binary_search(&FileKey {
            dev: 0,
            ino: 0,
            subvol: 0,
            kind: KIND_HAS_DIRS,
        })
        .is_ok()
}

/// The key_filter bit of inode number `ino` under `tag` ([`TAG_FILE`] or
/// [`TAG_DIR`]), in `0..2^FILTER_BITS_LOG2`: agent_sandbox_filter_bit() in
/// src/bpf/agent_sandbox.h, the same arithmetic (Fibonacci hashing of
/// `ino << 1 | tag`). Only the inode number is hashed; s_dev and the btrfs
/// subvolume are checked by the map lookup after a hit.
pub fn filter_bit(ino: u64, tag: u64) -> u32 {
    ((ino << 1 | tag).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - FILTER_BITS_LOG2)) as u32
}

/// A shared, writable mapping of a BPF_F_MMAPABLE array of u64 values.
struct WordArray {
    ptr: NonNull<AtomicU64>,
    len: usize,
}

impl WordArray {
    fn map(map: &impl AsFd, len: usize, what: &str) -> Result<WordArray, BpfError> {
        let bytes = len * 8;
        // SAFETY: maps `bytes` of the array map's value area, shared; the
        // kernel keeps it alive while mapped; freed in Drop.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                bytes,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                map.as_fd().as_raw_fd(),
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(io_e(format!("mmap {what}"))(io::Error::last_os_error()));
        }
        Ok(WordArray {
            ptr: NonNull::new(p.cast()).ok_or_else(|| {
                io_e(format!("mmap {what}"))(io::Error::from(io::ErrorKind::Other))
            })?,
            len,
        })
    }

    fn word(&self, i: usize) -> &AtomicU64 {
        assert!(i < self.len);
        // SAFETY: in bounds of the mapping; u64 slots are 8-byte aligned (page-aligned base).
        unsafe { &*self.ptr.as_ptr().add(i) }
    }
}

impl Drop for WordArray {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly what map() mapped.
        unsafe { libc::munmap(self.ptr.as_ptr().cast(), self.len * 8) };
    }
}

/// key_filter with the count of live keys behind every set bit. A bit is set
/// before its key can matter and cleared only when its count drops to zero;
/// keys the kernel dropped (freed inodes) keep their counts, which costs a
/// little filter precision until the next daemon start, never a miss.
struct Filter {
    words: WordArray,
    counts: HashMap<u32, u32>,
}

impl Filter {
    fn add(&mut self, bit: u32) {
        let c = self.counts.entry(bit).or_insert(0);
        *c += 1;
        if *c == 1 {
            self.words
                .word((bit >> 6) as usize)
                .fetch_or(1 << (bit & 63), Ordering::SeqCst);
        }
    }

    fn remove(&mut self, bit: u32) {
        if let Some(c) = self.counts.get_mut(&bit) {
            *c -= 1;
            if *c == 0 {
                self.counts.remove(&bit);
                self.words
                    .word((bit >> 6) as usize)
                    .fetch_and(!(1 << (bit & 63)), Ordering::SeqCst);
            }
        }
    }

    /// Rewrites every word from the counts (start-up: the mirror is complete).
    fn rewrite(&mut self) {
        let mut words = vec![0u64; FILTER_WORDS];
        for &bit in self.counts.keys() {
            words[(bit >> 6) as usize] |= 1 << (bit & 63);
        }
        for (i, w) in words.into_iter().enumerate() {
            self.words.word(i).store(w, Ordering::SeqCst);
        }
    }
}

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

fn lb(what: impl Into<String>) -> impl FnOnce(libbpf_rs::Error) -> BpfError {
    let what = what.into();
    move |cause| BpfError::Libbpf { what, cause }
}

fn io_e(what: impl Into<String>) -> impl FnOnce(io::Error) -> BpfError {
    let what = what.into();
    move |cause| BpfError::Io { what, cause }
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

/// Removes `pin_dir` (a layout's `v<n>`) and then the pin root above it if
/// they are empty (rmdir(2) refuses otherwise): what a start-up whose load
/// failed leaves behind.
pub fn remove_empty_pin_dirs(pin_dir: &Path) {
    if fs::remove_dir(pin_dir).is_ok()
        && let Some(root) = pin_dir.parent()
    {
        let _ = fs::remove_dir(root);
    }
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

/// The feature probe of walk memos in inode storage (src/bpf/probe.bpf.c):
/// loads (never attaches) a program that passes the opened file's directory
/// inode to `bpf_inode_storage_get()` as `file_open` does. The verifier's
/// rejection if it refuses it (7.x), else None; a probe that fails for
/// another reason (no verifier log) is None too: the real load then decides.
fn probe_memo_store() -> Option<crate::kernel::verifier::Rejection> {
    let mut object = MaybeUninit::uninit();
    let open = probe_skel::ProbeSkelBuilder::default()
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

/// The running kernel, for [`variant::REMEMBERED_FILE`]: its release and
/// build (`/proc/sys/kernel/osrelease`, `/proc/sys/kernel/version`).
fn kernel_id() -> String {
    let read = |p: &str| fs::read_to_string(p).unwrap_or_default().trim().to_string();
    format!(
        "{} {}",
        read("/proc/sys/kernel/osrelease"),
        read("/proc/sys/kernel/version")
    )
}

/// A hash of the embedded BPF object, for [`variant::REMEMBERED_FILE`]: a
/// new build is tried in full again.
fn object_id() -> u64 {
    use std::hash::Hasher;
    static OBJECT: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/agent_sandbox.bpf.o"));
    let mut h = siphasher::sip::SipHasher13::new();
    h.write(OBJECT);
    h.finish()
}

/// Adds `parts` (rejected at this start) to [`variant::REMEMBERED_FILE`]
/// `file`, keeping its lines of other kernels; a failure to write is logged
/// (the next start then pays for the rejection again, nothing else).
fn remember_rejections(
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

/// libbpf's lines while a load runs ([`capture_libbpf_log`]).
static CAPTURED: std::sync::Mutex<Option<String>> = std::sync::Mutex::new(None);
/// Most bytes of libbpf's lines kept for one load: a rejected program's
/// verifier log runs to about 0.6 MB on 7.3 (the reason is at its end).
const MAX_CAPTURED: usize = 8 << 20;

/// Starts (`on`) keeping libbpf's lines (routed by [`route_libbpf_log`]), or
/// stops and returns what was kept since.
fn capture_libbpf_log(on: bool) -> String {
    let mut c = CAPTURED.lock().unwrap_or_else(|p| p.into_inner());
    let kept = c.take().unwrap_or_default();
    if on {
        *c = Some(String::new());
    }
    kept
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
/// process ([`hidden_ksyms`] of /proc/kallsyms as this process reads it).
fn warn_hidden_ksyms() {
    let Ok(file) = fs::File::open("/proc/kallsyms") else {
        log::warn!("cannot read /proc/kallsyms: the walk's kernel symbols are not checked");
        return;
    };
    let hidden = hidden_ksyms(io::BufReader::new(file), &WALK_KSYMS);
    if !hidden.is_empty() {
        log::warn!(
            "/proc/kallsyms shows this process no address for {} (it lacks CAP_SYSLOG, or \
             kernel.kptr_restrict is 2): the directory-entry walk cannot see a rename that \
             overlaps it, and keeps no walk memo past the root filesystem (slower); the \
             package's unit grants CAP_SYSLOG for this",
            hidden.join(" and ")
        );
    }
}

use crate::policy::ApplyMode;

/// Counts of one diff-apply (file keys and names together).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct ApplyStats {
    /// Entries inserted.
    pub added: usize,
    /// Stale entries removed (with [`ApplyMode::AddOnly`]: stale entries kept).
    pub removed: usize,
    /// Of those, listed entries ([`DenySet::entries`]): what the user is told.
    pub removed_entries: usize,
    /// Entries already present and kept.
    pub kept: usize,
    /// New exception keys (`!PATH` lines) written: an exact apply that
    /// re-allows files, which the launcher is told.
    pub exceptions_added: usize,
    /// New exception keys not written because the apply is add-only (a
    /// launch from inside a sandbox): they take effect at the next launch
    /// from outside.
    pub exceptions_held_back: usize,
}

/// Whether deny_map entry `f` is an exception (`KIND_EXC_*`).
fn is_exception(f: &FileKey) -> bool {
    (KIND_EXC_BASE..=KIND_EXC_USER).contains(&f.kind)
}

/// The exception keys of `set` (file keys and names), counted.
fn exceptions(set: &DenySet) -> usize {
    set.files().iter().filter(|f| is_exception(f)).count()
        + set.names().iter().filter(|n| is_exception(&n.dir)).count()
}

/// `desired` without the exception keys that `current` lacks: what an
/// add-only apply may write (an exception from inside a sandbox must not
/// loosen it).
pub fn without_new_exceptions(desired: &DenySet, current: &DenySet) -> DenySet {
    let new = desired.minus(current);
    let drop = DenySet::new(
        new.files()
            .iter()
            .filter(|f| is_exception(f))
            .copied()
            .collect(),
        new.names()
            .iter()
            .filter(|n| is_exception(&n.dir))
            .cloned()
            .collect(),
    );
    desired.minus(&drop)
}

/// The loaded, attached programs and their maps, with a mirror of their content.
pub struct Bpf {
    skel: AgentSandboxSkel<'static>,
    pin_dir: PathBuf,
    /// Name prefix of this daemon's link pins (`link-<ns>-`).
    generation: String,
    /// The programs attached (and pinned), by name.
    attached: Vec<String>,
    /// cgid -> what the daemon put in deny_map and name_map for that sandbox
    /// (a superset of deny_map: the kernel drops keys of freed inodes).
    mirror: HashMap<u64, DenySet>,
    /// Sandbox cgroup ids currently in agent_cgid_set.
    sandboxes: HashSet<u64>,
    slots: WordArray,
    /// walk_gens (agent_sandbox.h): its `marks` count is bumped here.
    walk_gens: WordArray,
    filter: Filter,
    /// Per sandbox: dropped_keys as of its last apply that wrote every
    /// desired file key. Per sandbox, not one value: a drop may have taken a
    /// key of any sandbox, so each must rewrite its keys once after it.
    drops_seen: HashMap<u64, u64>,
    /// The links of an unpinned load ([`Bpf::load_unpinned`]): the programs
    /// stay attached while these live. Empty for a pinned load.
    _links: Vec<libbpf_rs::Link>,
    /// Whether the btrfs types were in the kernel's BTF when the programs
    /// were loaded (else btrfs keys cannot match; see [`Bpf::needs_reload_for`]).
    btrfs_loaded: bool,
    /// Per sandbox: a number that changes whenever its entries in the maps
    /// or the mirror do (see [`Bpf::version`]).
    versions: HashMap<u64, u64>,
    /// The optional parts this load left out ([`Bpf::variant`]).
    variant: Variant,
}

/// The cause of [`Bpf::version`] numbers: one counter for the process, so
/// that a number is never handed out twice, even by a `Bpf` loaded again.
static NEXT_VERSION: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

impl Bpf {
    /// Opens the object, reuses the pinned maps (or creates and pins them),
    /// loads and attaches the programs, pins their links and then unpins the
    /// links of earlier daemons. The parts a verifier rejected are
    /// remembered in `state_dir` ([`variant::REMEMBERED_FILE`]) for the next
    /// start on the same kernel.
    ///
    /// # Errors
    /// [`BpfError`]; the kernel's refusal to load or attach is
    /// [`BpfError::Kernel`] with its errno.
    pub fn load_and_attach(pin_root: &Path, state_dir: &Path) -> Result<Bpf, BpfError> {
        Bpf::load(Some(pin_root), Some(state_dir))
    }

    /// The doctor's trial (`agent-sandbox-execd --check`): the object with
    /// fresh, unpinned maps, loaded and attached; dropping the result
    /// detaches the programs and frees the maps. Nothing pinned is read or
    /// written, so a running daemon is not disturbed; with empty
    /// maps the programs deny nothing while attached.
    ///
    /// # Errors
    /// As [`Bpf::load_and_attach`].
    pub fn load_unpinned() -> Result<Bpf, BpfError> {
        Bpf::load(None, None)
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
    fn load(pin_root: Option<&Path>, state_dir: Option<&Path>) -> Result<Bpf, BpfError> {
        let forced = std::env::var(variant::WITHOUT_ENV).unwrap_or_default();
        let forced = variant::parse_without(&forced).map_err(BpfError::Unsupported)?;
        let mut variant = Variant::without(&forced);
        // Without the hook in the kernel, loading its program would fail.
        let compat = libbpf_rs::btf::Btf::from_vmlinux()
            .map(|btf| {
                btf.type_by_name::<libbpf_rs::btf::types::Func<'_>>(COMPAT_IOCTL_HOOK)
                    .is_some()
            })
            .unwrap_or(false);
        if !compat {
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
        loop {
            match Bpf::load_variant(pin_root, &variant) {
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
    fn load_variant(pin_root: Option<&Path>, variant: &Variant) -> Result<Bpf, BpfError> {
        let pinned = pin_root.is_some();
        // btrfs registers /sys/fs/btrfs when its module initialises; its BTF
        // (module or vmlinux) is then there for the CO-RE relocations.
        let btrfs_loaded = Path::new("/sys/fs/btrfs").exists();
        let object = Box::leak(Box::new(MaybeUninit::uninit()));
        let mut open = AgentSandboxSkelBuilder::default()
            .open(object)
            .map_err(lb("open the BPF object"))?;
        let rodata = open
            .maps
            .rodata_data
            .as_mut()
            .ok_or_else(|| BpfError::Unsupported("BPF object has no .rodata".into()))?;
        let layout = rodata.layout_version;
        rodata.walk_memo_store = variant::memo_store(variant);
        // Unpinned: no directory (an empty path, used for nothing).
        let pin_dir = pin_root
            .map(|r| r.join(format!("v{layout}")))
            .unwrap_or_default();
        if pinned {
            fs::create_dir_all(&pin_dir).map_err(io_e(format!("create {}", pin_dir.display())))?;
        }
        for (name, map) in [
            ("deny_map", &mut open.maps.deny_map),
            ("name_map", &mut open.maps.name_map),
            ("agent_cgid_set", &mut open.maps.agent_cgid_set),
            ("sandbox_slots", &mut open.maps.sandbox_slots),
            ("key_filter", &mut open.maps.key_filter),
            ("sock_allow", &mut open.maps.sock_allow),
            ("walk_gens", &mut open.maps.walk_gens),
            ("walk_memos", &mut open.maps.walk_memos),
        ] {
            if !pinned {
                continue;
            }
            map.set_pin_path(pin_dir.join(name))
                .map_err(lb(format!("set the {name} pin path")))?;
        }
        open.progs
            .file_ioctl_compat
            .set_autoload(variant.has(Part::CompatIoctl));
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
        capture_libbpf_log(true);
        let loaded = open.load();
        let log = capture_libbpf_log(false);
        let skel = match loaded {
            Ok(s) => s,
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
        warn_hidden_ksyms();
        let slots = WordArray::map(&skel.maps.sandbox_slots, SLOTS, "sandbox_slots")?;
        let walk_gens = WordArray::map(&skel.maps.walk_gens, WALK_GENS, "walk_gens")?;
        let words = WordArray::map(&skel.maps.key_filter, FILTER_WORDS, "key_filter")?;
        let stamp = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or_default();
        let generation = format!("link-{stamp}-");
        let mut attached = Vec::new();
        let mut links = Vec::new();
        for prog in skel.object().progs_mut().filter(|p| p.autoload()) {
            let name = prog.name().to_string_lossy().into_owned();
            // By its section: lsm/ hooks and the one fexit/ program.
            let mut link = prog.attach().map_err(|cause| BpfError::Kernel {
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
        let mut bpf = Bpf {
            skel,
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
        };
        bpf.load_mirror();
        Ok(bpf)
    }

    /// Makes `sockets` (file keys of bound Unix sockets' inodes, kind 0)
    /// exactly the sockets sandbox `cgid` may reach although a process of its
    /// uid made them outside (the `sock_allow` map read by
    /// lsm/unix_stream_connect and lsm/unix_may_send). Entries of other
    /// sandboxes are untouched. Returns how many entries were added.
    ///
    /// # Errors
    /// [`BpfError::Libbpf`] for the first failed update or delete.
    pub fn set_sock_allow(&self, cgid: u64, sockets: &[FileKey]) -> Result<usize, BpfError> {
        let map = &self.skel.maps.sock_allow;
        let want: HashSet<Vec<u8>> = sockets
            .iter()
            .map(|f| deny_key(cgid, f.with_kind(0)).bytes().to_vec())
            .collect();
        let stale: Vec<Vec<u8>> = map
            .keys()
            .filter(|k| {
                CDenyKey::from_bytes(k).is_some_and(|d| d.cgid == cgid)
                    && !want.iter().any(|w| w.as_slice() == k.as_slice())
            })
            .collect();
        for k in &stale {
            map.delete(k).map_err(lb("delete a sock_allow entry"))?;
        }
        let mut added = 0;
        for k in &want {
            if map.lookup(k, MapFlags::ANY).ok().flatten().is_none() {
                map.update(k, &PRESENT, MapFlags::ANY)
                    .map_err(lb("add a sock_allow entry"))?;
                added += 1;
            }
        }
        Ok(added)
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

    /// Reads the maps back into the mirror, the filter counts and the slots.
    fn load_mirror(&mut self) {
        let mut found: HashMap<u64, (Vec<FileKey>, Vec<NameKey>)> = HashMap::new();
        for k in self.skel.maps.deny_map.keys() {
            if let Some((cgid, f)) = parse_deny_key(&k) {
                found.entry(cgid).or_default().0.push(f);
            }
        }
        for k in self.skel.maps.name_map.keys() {
            if let Some((cgid, n)) = parse_name_key(&k) {
                found.entry(cgid).or_default().1.push(n);
            }
        }
        self.mirror = into_sets(found);
        for k in self.skel.maps.agent_cgid_set.keys() {
            if let Ok(b) = <[u8; 8]>::try_from(k.as_slice()) {
                self.sandboxes.insert(u64::from_ne_bytes(b));
            }
        }
        for set in self.mirror.values() {
            for f in set.files().iter().filter(|f| uses_filter(f)) {
                *self
                    .filter
                    .counts
                    .entry(filter_bit(f.ino, TAG_FILE))
                    .or_insert(0) += 1;
            }
            for n in set.names() {
                *self
                    .filter
                    .counts
                    .entry(filter_bit(n.dir.ino, TAG_DIR))
                    .or_insert(0) += 1;
            }
        }
        // With nothing listed, leave the bitmap's pages untouched (they would
        // count in the daemon's RSS); a stale bit only costs a hash lookup.
        if !self.filter.counts.is_empty() {
            self.filter.rewrite();
        }
        for slot in 0..SLOTS {
            self.write_slot(slot);
        }
    }

    /// Recomputes slot `slot` of sandbox_slots from the sandbox set: 0, the
    /// one sandbox's cgroup id (with [`SLOT_DIRS`] when its mirror holds
    /// directory entries) or [`SLOT_SHARED`].
    fn write_slot(&self, slot: usize) {
        let mut holders = self
            .sandboxes
            .iter()
            .filter(|&&c| (c as usize) & (SLOTS - 1) == slot);
        let value = match (holders.next(), holders.next()) {
            (None, _) => 0,
            (Some(&c), None) if self.mirror.get(&c).is_some_and(has_dirs) => c | SLOT_DIRS,
            (Some(&c), None) => c,
            (Some(_), Some(_)) => SLOT_SHARED,
        };
        self.slots.word(slot).store(value, Ordering::SeqCst);
    }

    /// Makes every walk memo of the programs stale (walk_gens.marks): called
    /// after deny_map or name_map changed, before the change is reported.
    fn stale_walk_memos(&self) {
        self.walk_gens
            .word(WALK_GEN_MARKS)
            .fetch_add(1, Ordering::SeqCst);
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

    /// How many file keys and names sandbox `cgid` would hold after an
    /// add-only apply of `desired`: (files, names) of the union.
    pub fn union_len(&self, cgid: u64, desired: &DenySet) -> (usize, usize) {
        self.mirror
            .get(&cgid)
            .map_or((desired.files().len(), desired.names().len()), |held| {
                held.union_len(desired)
            })
    }

    /// The version of sandbox `cgid`'s entries: it changes with every apply,
    /// removal or forgetting of them (never back to an earlier number), so
    /// a caller that saw the same version before an apply and after it knows
    /// nothing else touched them in between.
    pub fn version(&self, cgid: u64) -> Option<u64> {
        self.versions.get(&cgid).copied()
    }

    /// Whether sandbox `cgid` is as it was at `version`: no apply, removal
    /// or forgetting since, and no key of any sandbox dropped by the kernel
    /// since its last apply wrote every key (a drop may have taken one of its
    /// keys; see [`Bpf::apply`]). Then an apply of the set it was last
    /// applied with would change nothing.
    pub fn unchanged_since(&self, cgid: u64, version: u64) -> bool {
        self.version(cgid) == Some(version)
            && self.sandboxes.contains(&cgid)
            && self
                .dropped_keys()
                .is_some_and(|d| self.drops_seen.get(&cgid) == Some(&d))
    }

    /// How many file keys and names the mirror holds for sandbox `cgid`.
    pub fn held_len(&self, cgid: u64) -> usize {
        self.mirror.get(&cgid).map_or(0, DenySet::len)
    }

    /// How many listed entries ([`DenySet::entries`]) the mirror holds for
    /// sandbox `cgid`.
    pub fn held_entries(&self, cgid: u64) -> usize {
        self.mirror.get(&cgid).map_or(0, DenySet::entries)
    }

    /// What the mirror holds for sandbox `cgid` (what its last applies put in
    /// the maps, less what they removed), if anything.
    pub fn held(&self, cgid: u64) -> Option<&DenySet> {
        self.mirror.get(&cgid)
    }

    fn bump(&mut self, cgid: u64) {
        let v = NEXT_VERSION.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.versions.insert(cgid, v);
    }

    /// Cgroup ids that have entries in any map.
    pub fn known_sandboxes(&self) -> HashSet<u64> {
        self.sandboxes
            .iter()
            .chain(self.mirror.keys())
            .copied()
            .collect()
    }

    /// Makes the maps hold exactly `desired` (with [`ApplyMode::AddOnly`]: at
    /// least `desired`) for sandbox `cgid` and marks `cgid` as a sandbox:
    /// inserts the new entries (and their filter bits), then adds `cgid` to
    /// agent_cgid_set and sandbox_slots, then removes stale entries, so the
    /// live set never drops below the desired set. When the kernel has
    /// dropped keys of freed inodes since the last apply (dropped_keys moved),
    /// every desired file key is written again, not only the new ones: a
    /// listed file may now reuse a dropped inode number the mirror still holds.
    ///
    /// # Errors
    /// A failed insert (map full, ...) returns the error before anything is
    /// removed; entries inserted so far stay (they only add denials).
    pub fn apply(
        &mut self,
        cgid: u64,
        desired: &DenySet,
        mode: ApplyMode,
    ) -> Result<ApplyStats, BpfError> {
        self.bump(cgid);
        let current = self.mirror.remove(&cgid).unwrap_or_default();
        let mut new = desired.minus(&current);
        let fresh_exceptions = exceptions(&new);
        let filtered;
        let desired = if mode == ApplyMode::AddOnly && fresh_exceptions > 0 {
            filtered = without_new_exceptions(desired, &current);
            new = filtered.minus(&current);
            &filtered
        } else {
            desired
        };
        let stale = current.minus(desired);
        let stats = ApplyStats {
            added: new.len(),
            removed: stale.len(),
            removed_entries: stale.entries(),
            kept: desired.len() - new.len(),
            exceptions_added: if mode == ApplyMode::Exact {
                fresh_exceptions
            } else {
                0
            },
            exceptions_held_back: if mode == ApplyMode::AddOnly {
                fresh_exceptions
            } else {
                0
            },
        };
        let drops = self.dropped_keys();
        let write_all = drops.is_none() || drops != self.drops_seen.get(&cgid).copied();
        let total = current.len() + self.mirror.values().map(DenySet::len).sum::<usize>();
        let files = if write_all {
            desired.files()
        } else {
            new.files()
        };
        let file_keys = deny_key_bytes(cgid, files);
        let inserted = insert(
            &self.skel.maps.deny_map,
            "deny_map",
            &file_keys,
            DENY_KEY_LEN,
            total,
        );
        if let Err(e) = inserted {
            // Keys inserted before the error stay: memos made without them go stale.
            self.stale_walk_memos();
            self.mirror.insert(cgid, current);
            return Err(e);
        }
        for f in new.files().iter().filter(|f| uses_filter(f)) {
            self.filter.add(filter_bit(f.ino, TAG_FILE));
        }
        let inserted = insert(
            &self.skel.maps.name_map,
            "name_map",
            &name_keys_bytes(cgid, new.names()),
            NAME_KEY_LEN,
            total,
        );
        if let Err(e) = inserted {
            self.stale_walk_memos();
            let with_files = DenySet::new(new.files().to_vec(), Vec::new());
            self.mirror.insert(cgid, current.union(&with_files));
            return Err(e);
        }
        for n in new.names() {
            self.filter.add(filter_bit(n.dir.ino, TAG_DIR));
        }
        // After the keys and their key_filter bits: a walk that read the
        // old count may have missed either, and its memo must not be used
        // (a walk that reads the new count sees both).
        if !file_keys.is_empty() || !new.names().is_empty() {
            self.stale_walk_memos();
        }
        // A no-change apply keeps the set it had: no copy of 100,000 keys.
        let held = if new.is_empty() {
            current
        } else {
            current.union(&new)
        };
        self.mirror.insert(cgid, held);
        self.write_slot((cgid as usize) & (SLOTS - 1));
        self.add_sandbox(cgid)?;
        if crate::policy::may_loosen(mode) {
            self.remove(cgid, stale.files(), stale.names());
        }
        if let (true, Some(d)) = (write_all, drops) {
            self.drops_seen.insert(cgid, d);
        }
        Ok(stats)
    }

    /// The kernel's count of dropped deny_map keys (None if unreadable).
    fn dropped_keys(&self) -> Option<u64> {
        let v = self
            .skel
            .maps
            .dropped_keys
            .lookup(&0u32.to_ne_bytes(), MapFlags::ANY)
            .ok()??;
        Some(u64::from_ne_bytes(v.get(..8)?.try_into().ok()?))
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
        self.write_slot((cgid as usize) & (SLOTS - 1));
        Ok(())
    }

    /// Removes entries of sandbox `cgid` from the maps, the mirror and the filter.
    fn remove(&mut self, cgid: u64, files: &[FileKey], names: &[NameKey]) {
        if files.is_empty() && names.is_empty() {
            return;
        }
        self.bump(cgid);
        let gone = delete(
            &self.skel.maps.deny_map,
            "deny_map",
            cgid,
            &deny_key_bytes(cgid, files),
            DENY_KEY_LEN,
        );
        let mut gone_files = Vec::new();
        for (f, ok) in files.iter().zip(gone) {
            if ok {
                if uses_filter(f) {
                    self.filter.remove(filter_bit(f.ino, TAG_FILE));
                }
                gone_files.push(*f);
            }
        }
        let gone = delete(
            &self.skel.maps.name_map,
            "name_map",
            cgid,
            &name_keys_bytes(cgid, names),
            NAME_KEY_LEN,
        );
        let mut gone_names = Vec::new();
        for (n, ok) in names.iter().zip(gone) {
            if ok {
                self.filter.remove(filter_bit(n.dir.ino, TAG_DIR));
                gone_names.push(n.clone());
            }
        }
        let held = self.mirror.entry(cgid).or_default();
        *held = held.minus(&DenySet::new(gone_files, gone_names));
        self.stale_walk_memos();
        self.write_slot((cgid as usize) & (SLOTS - 1));
    }

    /// Forgets a sandbox that no longer exists: removes `cgid` from
    /// agent_cgid_set and sandbox_slots, then its entries.
    pub fn forget_sandbox(&mut self, cgid: u64) {
        self.drops_seen.remove(&cgid);
        if self.sandboxes.remove(&cgid) {
            self.write_slot((cgid as usize) & (SLOTS - 1));
            if let Err(e) = self.skel.maps.agent_cgid_set.delete(&cgid.to_ne_bytes()) {
                log::warn!("cannot remove cgroup {cgid} from agent_cgid_set: {e}");
            }
        }
        let set = self.mirror.get(&cgid).cloned().unwrap_or_default();
        self.remove(cgid, set.files(), set.names());
        if self.mirror.get(&cgid).is_some_and(DenySet::is_empty) {
            self.mirror.remove(&cgid);
        }
        // Gone from agent_cgid_set, so never unchanged_since() again.
        self.versions.remove(&cgid);
    }
}

/// The deny_map keys of `files` for sandbox `cgid`, back to back
/// ([`DENY_KEY_LEN`] bytes each).
fn deny_key_bytes(cgid: u64, files: &[FileKey]) -> Vec<u8> {
    files
        .iter()
        .flat_map(|f| deny_key(cgid, *f).bytes().to_vec())
        .collect()
}

/// The name_map keys of `names` for sandbox `cgid`, back to back
/// ([`NAME_KEY_LEN`] bytes each).
fn name_keys_bytes(cgid: u64, names: &[NameKey]) -> Vec<u8> {
    let mut out = Vec::with_capacity(names.len() * NAME_KEY_LEN);
    for n in names {
        out.extend_from_slice(name_key(cgid, n).bytes());
    }
    out
}

/// Per-sandbox sets from keys read back from maps, in any order.
fn into_sets(found: HashMap<u64, (Vec<FileKey>, Vec<NameKey>)>) -> HashMap<u64, DenySet> {
    found
        .into_iter()
        .map(|(cgid, (files, names))| (cgid, DenySet::new(files, names)))
        .collect()
}

/// Inserts `keys` (`key_len` bytes each, back to back; value 1) into `map` in
/// batches of 4,096, falling back to one by one when a batch fails part-way.
/// `total` is for the error message.
fn insert(
    map: &libbpf_rs::Map<'_>,
    what: &str,
    keys: &[u8],
    key_len: usize,
    total: usize,
) -> Result<(), BpfError> {
    let values = vec![PRESENT[0]; 4096];
    for chunk in keys.chunks(4096 * key_len) {
        let n = chunk.len() / key_len;
        let r = map.update_batch(chunk, &values[..n], n as u32, MapFlags::ANY, MapFlags::ANY);
        if let Err(e) = r {
            for k in chunk.chunks(key_len) {
                map.update(k, &PRESENT, MapFlags::ANY)
                    .map_err(|e2| BpfError::Libbpf {
                        what: format!(
                            "insert into {what} ({total} entries, capacity {}; batch error: {e})",
                            map.max_entries()
                        ),
                        cause: e2,
                    })?;
            }
        }
    }
    Ok(())
}

/// Deletes `keys` (`key_len` bytes each, back to back) from `map`; returns,
/// per key, whether it is gone now (deleted, or already absent).
fn delete(
    map: &libbpf_rs::Map<'_>,
    what: &str,
    cgid: u64,
    keys: &[u8],
    key_len: usize,
) -> Vec<bool> {
    let mut gone = Vec::with_capacity(keys.len() / key_len);
    for chunk in keys.chunks(4096 * key_len) {
        let n = chunk.len() / key_len;
        if map
            .delete_batch(chunk, n as u32, MapFlags::ANY, MapFlags::ANY)
            .is_ok()
        {
            gone.extend(std::iter::repeat_n(true, n));
            continue;
        }
        for k in chunk.chunks(key_len) {
            gone.push(match map.delete(k) {
                Ok(()) => true,
                Err(e) if e.kind() == libbpf_rs::ErrorKind::NotFound => true,
                Err(e) => {
                    log::warn!("cannot remove a stale {what} entry of cgroup {cgid}: {e}");
                    false
                }
            });
        }
    }
    gone
}

/// What other layouts' pinned maps hold for the sandboxes `cgids`, so a new
/// layout can start with everything the old one denied (including entries
/// kept by add-only applies). Layout 2's 24-byte deny keys are read too
/// (subvolume 0). A map whose keys this version cannot read is reported in
/// the error list; its layout must then stay attached.
pub fn keys_in_other_layouts(
    ours: &Path,
    cgids: &HashSet<u64>,
) -> (HashMap<u64, DenySet>, Vec<String>) {
    let mut found: HashMap<u64, (Vec<FileKey>, Vec<NameKey>)> = HashMap::new();
    let mut errors = Vec::new();
    let Some(root) = ours.parent() else {
        return (HashMap::new(), errors);
    };
    let Ok(entries) = fs::read_dir(root) else {
        return (HashMap::new(), errors);
    };
    for e in entries.flatten() {
        let dir = e.path();
        if dir == ours {
            continue;
        }
        for (name, sizes) in [
            ("deny_map", &[24usize, 32][..]),
            ("name_map", &[NAME_KEY_LEN][..]),
        ] {
            let path = dir.join(name);
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
            if !sizes.contains(&(map.key_size() as usize)) {
                errors.push(format!(
                    "{} has {}-byte keys; this version cannot carry them over",
                    path.display(),
                    map.key_size()
                ));
                continue;
            }
            for k in map.keys() {
                if name == "deny_map" {
                    if let Some((cgid, f)) = parse_deny_key(&k).filter(|(c, _)| cgids.contains(c)) {
                        found.entry(cgid).or_default().0.push(f);
                    }
                } else if let Some((cgid, n)) =
                    parse_name_key(&k).filter(|(c, _)| cgids.contains(c))
                {
                    found.entry(cgid).or_default().1.push(n);
                }
            }
        }
    }
    (into_sets(found), errors)
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

/// Unpins everything under the pin root `root`: links first (detaching the
/// programs), then maps, then the directories. Returns what was removed.
///
/// # Errors
/// The first unpin or rmdir error.
pub fn unpin_all(root: &Path) -> io::Result<Vec<PathBuf>> {
    let mut removed = Vec::new();
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

    #[test]
    fn add_only_leaves_new_exceptions_out() {
        use crate::lists::entries::{KIND_DIR_USER, KIND_EXC_USER};
        let k = |ino, kind| FileKey {
            dev: 1,
            ino,
            subvol: 0,
            kind,
        };
        let name = |ino, kind, n: &[u8]| NameKey {
            dir: k(ino, kind),
            name: n.to_vec(),
        };
        let current = DenySet::new(
            vec![k(1, KIND_DIR_USER), k(2, KIND_EXC_USER)],
            vec![name(1, KIND_EXC_USER, b"old")],
        );
        let desired = DenySet::new(
            vec![
                k(1, KIND_DIR_USER),
                k(2, KIND_EXC_USER),
                k(3, KIND_EXC_USER),
                k(4, KIND_DIR_USER),
                k(5, KIND_OPEN),
            ],
            vec![
                name(1, KIND_EXC_USER, b"old"),
                name(1, KIND_EXC_USER, b"new"),
            ],
        );
        assert_eq!(exceptions(&desired.minus(&current)), 2);
        let allowed = without_new_exceptions(&desired, &current);
        // Held exceptions stay, new entries and denials go in, new exceptions do not.
        assert_eq!(
            allowed.files(),
            &[
                k(1, KIND_DIR_USER),
                k(2, KIND_EXC_USER),
                k(4, KIND_DIR_USER),
                k(5, KIND_OPEN)
            ][..]
        );
        assert_eq!(allowed.names(), &[name(1, KIND_EXC_USER, b"old")][..]);
    }
    use std::mem::{offset_of, size_of};

    fn fk(dev: u32, ino: u64, subvol: u64) -> FileKey {
        FileKey {
            dev,
            ino,
            subvol,
            kind: KIND_OPEN,
        }
    }

    #[test]
    fn rust_keys_match_the_c_layout() {
        // The KeyBytes contract: no padding, so every byte is a field's.
        assert_eq!(size_of::<CFileKey>(), 8 + 8 + 4 + 4);
        assert_eq!(DENY_KEY_LEN, 8 + size_of::<CFileKey>());
        assert_eq!(DENY_KEY_LEN, 32);
        assert_eq!(NAME_KEY_LEN, 8 + size_of::<CFileKey>() + NAME_MAX + 1);
        assert_eq!(offset_of!(CNameKey, dir), 8);
        assert_eq!(offset_of!(CNameKey, name), 32);
        assert_eq!(offset_of!(CDenyKey, file), 8);
        assert_eq!(offset_of!(CFileKey, kind), 20);
    }

    #[test]
    fn key_bytes_round_trip_and_zero_padding() {
        let f = fk((254 << 20) | 1, 42, 257);
        let k = deny_key(0x1122_3344_5566_7788, f);
        let b = k.bytes().to_vec();
        assert_eq!(b.len(), 32);
        assert_eq!(&b[0..8], &0x1122_3344_5566_7788u64.to_ne_bytes());
        assert_eq!(&b[8..16], &42u64.to_ne_bytes());
        assert_eq!(&b[16..24], &257u64.to_ne_bytes());
        assert_eq!(&b[24..28], &((254u32 << 20) | 1).to_ne_bytes());
        assert_eq!(&b[28..32], &[0, 0, 0, 0]);
        assert_eq!(parse_deny_key(&b), Some((0x1122_3344_5566_7788, f)));
        assert_eq!(parse_deny_key(&b[..23]), None);
        // The kind of an entry is the C struct's last field.
        let p = deny_key(
            7,
            fk(99, 42, 0).with_kind(crate::lists::entries::KIND_LISTED_DIR),
        );
        assert_eq!(&p.bytes()[28..32], &2u32.to_ne_bytes());
        assert_eq!(parse_deny_key(p.bytes()).map(|(_, f)| f.kind), Some(2));
        // Layout 2 keys: {cgid, ino, dev, reserved}.
        let mut old = [0u8; 24];
        old[0..8].copy_from_slice(&7u64.to_ne_bytes());
        old[8..16].copy_from_slice(&42u64.to_ne_bytes());
        old[16..20].copy_from_slice(&99u32.to_ne_bytes());
        assert_eq!(parse_deny_key(&old), Some((7, fk(99, 42, 0))));
        let n = NameKey {
            dir: fk(45, 7, 5),
            name: b"id_ed25519".to_vec(),
        };
        let nk = name_key(9, &n);
        let nb = nk.bytes();
        assert_eq!(nb.len(), 288);
        assert_eq!(&nb[32..42], b"id_ed25519");
        assert!(nb[32 + 10..].iter().all(|&c| c == 0));
        assert_eq!(parse_name_key(nb), Some((9, n)));
        // A 255-byte name keeps its terminating NUL.
        let long = NameKey {
            dir: fk(45, 7, 5),
            name: vec![b'x'; NAME_MAX],
        };
        let lb = name_key(1, &long);
        assert_eq!(lb.bytes()[287], 0);
        assert_eq!(parse_name_key(lb.bytes()), Some((1, long)));
    }

    #[test]
    fn filter_bits_are_spread_and_tagged() {
        // Values agent_sandbox_filter_bit() in src/bpf/agent_sandbox.h gives
        // for the same inode numbers (compiled with gcc on x86-64): a change
        // on either side must show here.
        assert_eq!(filter_bit(0, TAG_FILE), 0);
        assert_eq!(filter_bit(1234, TAG_FILE), 2_582_720);
        assert_eq!(filter_bit(256, TAG_FILE), 3_635_641);
        assert_eq!(filter_bit(42, TAG_DIR), 4_470_197);
        assert_eq!(filter_bit(256, TAG_DIR), 431_478);
        let a = filter_bit(1234, TAG_FILE);
        assert_ne!(a, filter_bit(1234, TAG_DIR));
        assert!(a < 1 << FILTER_BITS_LOG2);
        // 100,000 consecutive inode numbers fill about as many distinct bits
        // as a uniform hash would (1 - e^(-n/m) of 2^23 bits), and so do the
        // directory bits of the same numbers.
        for tag in [TAG_FILE, TAG_DIR] {
            let bits: HashSet<u32> = (0..100_000u64).map(|i| filter_bit(1000 + i, tag)).collect();
            assert!(bits.len() > 99_000, "{} distinct bits", bits.len());
        }
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
        ] {
            assert!(has(format!("lsm/{p}").as_bytes()), "{p}");
        }
        assert!(has(b"fexit/vfs_rename"), "vfs_rename");
        for m in [
            "deny_map",
            "name_map",
            "agent_cgid_set",
            "sandbox_slots",
            "key_filter",
            "sock_allow",
            "walk_gens",
            "walk_memos",
        ] {
            assert!(has(m.as_bytes()), "{m}");
        }
    }
}
