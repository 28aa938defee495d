//! The pins under `/sys/fs/bpf/agent-sandbox-exec/v<layout>/`: the maps and
//! one `link-<n>-<program>` per attached program. Because the maps are
//! pinned, deny data and sandbox membership survive a daemon restart;
//! because the links are pinned, the programs stay attached while the daemon
//! is down, so a running sandbox is never left unenforced. A new daemon
//! attaches its own programs before it unpins the old links (both deny the
//! same; no gap); keys of another layout are carried over before its pins
//! go. Removing the pins (package purge) is what detaches the programs.

use std::collections::{HashMap, HashSet};
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use libbpf_rs::MapCore;

use crate::kernel::codec::{NAME_KEY_LEN, into_sets, parse_deny_key, parse_name_key};
use crate::lists::entries::{DenySet, FileKey, NameKey};

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
pub(super) fn unpin_dir(dir: &Path) -> io::Result<Vec<PathBuf>> {
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
pub(super) fn remove_other_links(dir: &Path, keep: &str) {
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
