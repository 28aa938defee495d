//! A restart that verifies nothing: the daemon takes over the programs an
//! earlier start of the same build attached on this kernel, instead of
//! loading (and having the kernel verify) them again, which takes seconds
//! to tens of seconds on 6.12 and 7.x.
//!
//! After a load that pinned its links, [`write_stamp`] records in the state
//! directory ([`STAMP_FILE`]) what was loaded: the kernel, a hash of the
//! object and one of the daemon's binary, whether the kernel symbols the
//! walk needs were shown to it, the variant's left-out parts, whether
//! btrfs's types were there, and the links' generation. [`adopt`] takes the
//! pinned programs over only if all of that is what a load now would be
//! (and the symbols were shown), every program a load would attach has a
//! pinned link of that generation (and no other link is pinned), the cgroup
//! programs' links are attached to the sandboxes' parent cgroup as it is
//! now, and every one of those programs uses the pinned maps of the layout
//! (the kernel's map ids, from `bpf_prog_info.map_ids`): then they are the
//! very programs a load would make, already attached. Anything else is a
//! full load, which replaces them without a gap as before.

use std::collections::HashMap;
use std::fs;
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};
use std::path::Path;

use libbpf_rs::skel::OpenSkel;
use libbpf_rs::{MapCore, MapHandle};

use crate::kernel::error::{BpfError, lb};
use crate::kernel::maps::{Maps, NAMES};
use crate::kernel::programs::{
    Bpf, ObjectStorage, kernel_id, object_id, open_configured, pinned_map,
};
use crate::kernel::variant::Variant;

/// The stamp of the last pinned load, in the daemon's state directory.
pub const STAMP_FILE: &str = "loaded-programs";

/// What a pinned load was (one line of [`STAMP_FILE`], tab-separated).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Stamp {
    /// [`kernel_id`] then.
    pub(super) kernel: String,
    /// [`object_id`] then.
    pub(super) object: u64,
    /// [`build_id`] then: the daemon's own binary, which decides how the
    /// object is configured.
    pub(super) build: u64,
    /// Whether /proc/kallsyms showed the walk's kernel symbols at the load
    /// (`crate::kernel::preflight::warn_hidden_ksyms`): programs loaded
    /// without them are never adopted (a load may now resolve them).
    pub(super) ksyms: bool,
    /// [`Variant::key`] of the variant loaded.
    pub(super) variant: String,
    /// Whether /sys/fs/btrfs existed (the btrfs types were relocated).
    pub(super) btrfs: bool,
    /// The links' name prefix (`link-<ns>-`).
    pub(super) generation: String,
}

impl Stamp {
    fn line(&self) -> String {
        let clean = |s: &str| s.replace(['\t', '\n'], " ");
        format!(
            "{}\t{:016x}\t{:016x}\t{}\t{}\t{}\t{}\n",
            clean(&self.kernel),
            self.object,
            self.build,
            u8::from(self.ksyms),
            clean(&self.variant),
            u8::from(self.btrfs),
            clean(&self.generation)
        )
    }

    fn parse(text: &str) -> Option<Stamp> {
        let mut f = text.strip_suffix('\n')?.split('\t');
        let flag = |v: &str| match v {
            "0" => Some(false),
            "1" => Some(true),
            _ => None,
        };
        let s = Stamp {
            kernel: f.next()?.to_string(),
            object: u64::from_str_radix(f.next()?, 16).ok()?,
            build: u64::from_str_radix(f.next()?, 16).ok()?,
            ksyms: flag(f.next()?)?,
            variant: f.next()?.to_string(),
            btrfs: flag(f.next()?)?,
            generation: f.next()?.to_string(),
        };
        (f.next().is_none() && s.generation.starts_with("link-")).then_some(s)
    }
}

/// Records `bpf` (a load that pinned its links) as [`STAMP_FILE`] in
/// `state_dir`; a failure is logged (the next start then loads in full).
pub(super) fn write_stamp(state_dir: &Path, bpf: &Bpf) {
    let stamp = Stamp {
        kernel: kernel_id(),
        object: object_id(),
        build: build_id(),
        ksyms: bpf.ksyms_shown,
        variant: bpf.variant.key(),
        btrfs: bpf.btrfs_loaded,
        generation: bpf.generation.clone(),
    };
    let file = state_dir.join(STAMP_FILE);
    let tmp = file.with_extension("tmp");
    let written = fs::create_dir_all(state_dir)
        .and_then(|()| fs::write(&tmp, stamp.line()))
        .and_then(|()| fs::rename(&tmp, &file));
    if let Err(e) = written {
        log::warn!(
            "cannot record the loaded programs in {}: {e}; the next start verifies them again",
            file.display()
        );
    }
}

/// Removes [`STAMP_FILE`] from `state_dir`: the next start loads the
/// programs in full (after a canary that failed with adopted programs).
pub fn forget(state_dir: &Path) {
    let file = state_dir.join(STAMP_FILE);
    if let Err(e) = fs::remove_file(&file)
        && e.kind() != std::io::ErrorKind::NotFound
    {
        log::warn!("cannot remove {}: {e}", file.display());
    }
}

/// Takes over the programs attached under `pin_root` by an earlier start,
/// if they are what a load of `variant` would attach now (see the module's
/// docs): Ok(None) when they are not, with the reason at debug level.
///
/// # Errors
/// [`BpfError`] when the kernel refuses a query about them (the caller
/// then loads in full).
pub(super) fn adopt(
    pin_root: &Path,
    state_dir: &Path,
    cgroup: &Path,
    variant: &Variant,
) -> Result<Option<Bpf>, BpfError> {
    let Some(stamp) = fs::read_to_string(state_dir.join(STAMP_FILE))
        .ok()
        .and_then(|t| Stamp::parse(&t))
    else {
        return Ok(None);
    };
    let now = Stamp {
        kernel: kernel_id(),
        object: object_id(),
        build: build_id(),
        ksyms: true,
        variant: variant.key(),
        btrfs: Path::new("/sys/fs/btrfs").exists(),
        generation: stamp.generation.clone(),
    };
    if now != stamp || now.build == 0 {
        log::debug!("not adopting the attached programs: they were {stamp:?}, a load is {now:?}");
        return Ok(None);
    }
    // The names a load would attach, and the layout, from the object
    // opened and configured as a load would (nothing is loaded).
    let storage = ObjectStorage::new();
    // `open` is dropped before `storage` (declared after it).
    let (open, layout) = open_configured(&storage, variant)?;
    let names: Vec<String> = open
        .open_object()
        .progs()
        .filter(|p| p.autoload())
        .map(|p| p.name().to_string_lossy().into_owned())
        .collect();
    drop(open);
    let pin_dir = pin_root.join(format!("v{layout}"));
    let links: Vec<String> = fs::read_dir(&pin_dir)
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.starts_with("link-"))
                .collect()
        })
        .unwrap_or_default();
    let ours = |n: &str| n.strip_prefix(&stamp.generation).map(str::to_owned);
    let mut pinned: Vec<String> = links.iter().filter_map(|n| ours(n)).collect();
    pinned.sort();
    let mut want = names.clone();
    want.sort();
    if links.len() != pinned.len() || pinned != want {
        log::debug!(
            "not adopting the attached programs: links {links:?}, a load attaches {want:?}"
        );
        return Ok(None);
    }
    // The cgroup programs must still be attached to the sandboxes' parent
    // cgroup (its id is its directory's inode number): one made anew after
    // the earlier start removed it has none.
    let parent = {
        use std::os::unix::fs::MetadataExt;
        fs::metadata(cgroup)
            .map_err(crate::kernel::error::io_e(format!(
                "stat {}",
                cgroup.display()
            )))?
            .ino()
    };
    // Every program must use this layout's pinned maps; the maps the
    // daemon needs that are not pinned come from the programs.
    let mut handles: HashMap<String, MapHandle> = HashMap::new();
    let mut pinned_ids: HashMap<String, u32> = HashMap::new();
    for name in &names {
        let link = libbpf_rs::Link::open(pin_dir.join(format!("{}{name}", stamp.generation)))
            .map_err(lb(format!("open the pinned {name} link")))?;
        let (ids, attached_to) = prog_map_ids(link.as_fd().as_raw_fd(), name)?;
        if let Some(cgid) = attached_to
            && cgid != parent
        {
            log::info!(
                "not adopting the attached programs: {name} is attached to cgroup {cgid}, not \
                 to {} ({parent})",
                cgroup.display()
            );
            return Ok(None);
        }
        for id in ids {
            let map = MapHandle::from_map_id(id).map_err(lb(format!("open map id {id}")))?;
            let map_name = map.name().to_string_lossy().into_owned();
            if pinned_map(&map_name) {
                let want_id = match pinned_ids.get(&map_name) {
                    Some(i) => *i,
                    None => {
                        let p = MapHandle::from_pinned_path(pin_dir.join(&map_name))
                            .map_err(lb(format!("open the pinned {map_name} map")))?;
                        let i = map_id(&p)?;
                        pinned_ids.insert(map_name.clone(), i);
                        i
                    }
                };
                if want_id != id {
                    log::info!(
                        "not adopting the attached programs: {name} uses another {map_name} \
                         than the one pinned"
                    );
                    return Ok(None);
                }
            }
            if NAMES.contains(&map_name.as_str()) {
                handles.entry(map_name).or_insert(map);
            }
        }
    }
    let maps = match Maps::by_name(handles) {
        Ok(m) => m,
        Err(e) => {
            log::info!("not adopting the attached programs: {e}");
            return Ok(None);
        }
    };
    drop(storage);
    Bpf::serve_with(
        maps,
        pin_dir,
        stamp.generation,
        names,
        Vec::new(),
        stamp.btrfs,
    )
    .map(Some)
}

/// The kernel's id of the map behind `map` (`bpf_map_info.id`).
fn map_id(map: &MapHandle) -> Result<u32, BpfError> {
    map.info().map(|i| i.info.id).map_err(lb(format!(
        "read the {} map's info",
        map.name().to_string_lossy()
    )))
}

/// A hash of the running binary (`/proc/self/exe`), 0 if it cannot be read.
fn build_id() -> u64 {
    use std::hash::Hasher;
    match fs::read("/proc/self/exe") {
        Ok(bytes) => {
            let mut h = siphasher::sip::SipHasher13::new();
            h.write(&bytes);
            h.finish().max(1)
        }
        Err(_) => 0,
    }
}

/// The ids of the maps the program behind link descriptor `link` uses
/// (`bpf_link_info.prog_id`, then `bpf_prog_info.map_ids`), and for a
/// cgroup link the id of the cgroup it is attached to (0 once detached).
fn prog_map_ids(link: i32, name: &str) -> Result<(Vec<u32>, Option<u64>), BpfError> {
    use libbpf_rs::libbpf_sys as sys;
    let fail = |what: &str, rc: i32| BpfError::Kernel {
        what: format!("{what} of the pinned {name} link"),
        cause: libbpf_rs::Error::from(std::io::Error::from_raw_os_error(-rc)),
    };
    let mut link_info = sys::bpf_link_info::default();
    let mut len = std::mem::size_of_val(&link_info) as u32;
    // SAFETY: `link_info` is a bpf_link_info of `len` bytes.
    let rc = unsafe { sys::bpf_link_get_info_by_fd(link, &mut link_info, &mut len) };
    if rc != 0 {
        return Err(fail("read the info", rc));
    }
    // SAFETY: the union is plain integers, zeroed by default() and filled by
    // the kernel; its cgroup member means something for a cgroup link only.
    let cgroup_id = unsafe { link_info.__bindgen_anon_1.cgroup.cgroup_id };
    let attached_to = (link_info.type_ == sys::BPF_LINK_TYPE_CGROUP).then_some(cgroup_id);
    // SAFETY: plain syscall wrapper; a non-negative result is a new descriptor.
    let fd = unsafe { sys::bpf_prog_get_fd_by_id(link_info.prog_id) };
    if fd < 0 {
        return Err(fail("open the program", fd));
    }
    // SAFETY: just returned by the kernel, owned by nothing else.
    let prog = unsafe { OwnedFd::from_raw_fd(fd) };
    let mut info = sys::bpf_prog_info::default();
    let mut len = std::mem::size_of_val(&info) as u32;
    // SAFETY: `info` is a bpf_prog_info of `len` bytes; no arrays asked.
    let rc = unsafe { sys::bpf_prog_get_info_by_fd(prog.as_raw_fd(), &mut info, &mut len) };
    if rc != 0 {
        return Err(fail("read the program's info", rc));
    }
    let mut ids = vec![0u32; info.nr_map_ids as usize];
    let mut again = sys::bpf_prog_info {
        nr_map_ids: info.nr_map_ids,
        map_ids: ids.as_mut_ptr() as u64,
        ..Default::default()
    };
    let mut len = std::mem::size_of_val(&again) as u32;
    // SAFETY: `again` is a bpf_prog_info of `len` bytes whose map_ids
    // points to `ids`, room for nr_map_ids u32s, which outlives the call.
    let rc = unsafe { sys::bpf_prog_get_info_by_fd(prog.as_raw_fd(), &mut again, &mut len) };
    if rc != 0 {
        return Err(fail("read the program's maps", rc));
    }
    ids.truncate(again.nr_map_ids.min(info.nr_map_ids) as usize);
    Ok((ids, attached_to))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_stamp_is_one_line_that_reads_back() {
        let s = Stamp {
            kernel: "6.12.48+deb13-amd64 #1 SMP\tx".into(),
            object: 0x0123_4567_89ab_cdef,
            build: 42,
            ksyms: true,
            variant: "compat-ioctl,memo-inode-storage".into(),
            btrfs: true,
            generation: "link-1764979200000000000-".into(),
        };
        let line = s.line();
        assert_eq!(line.matches('\n').count(), 1);
        let back = Stamp::parse(&line).unwrap();
        assert_eq!(
            back.kernel, "6.12.48+deb13-amd64 #1 SMP x",
            "tabs become spaces"
        );
        assert_eq!(
            (back.object, back.build, back.ksyms, back.btrfs),
            (s.object, 42, true, true)
        );
        assert_eq!(back.variant, s.variant);
        assert_eq!(back.generation, s.generation);
        for bad in [
            "",
            "k\t0\t\t1\tlink-1-",
            "k\tzz\t\t1\tlink-1-\n",
            "k\t0\t\t2\tlink-1-\n",
            "k\t0\t\t1\tnot-a-link\n",
            "k\t0\t\t1\tlink-1-\textra\n",
        ] {
            assert_eq!(Stamp::parse(bad), None, "{bad:?}");
        }
    }
}
