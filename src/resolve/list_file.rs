//! Reading a list file safely: never blocking on a FIFO, never more than
//! [`MAX_LIST_BYTES`], from its start whoever else shares the open file.

use std::fs;
use std::io;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use crate::lists::include::{Expanded, Read, expand};
use crate::os::paths::CATALOG_DIR;

/// Largest list file read, in bytes (16 MiB: about 200,000 typical paths).
pub const MAX_LIST_BYTES: u64 = 16 << 20;

/// Opens a list file: Ok(None) when it does not exist. Opened without
/// blocking (a FIFO cannot hang us); must be a regular file of at most
/// [`MAX_LIST_BYTES`]. A symlink as the list file itself is followed.
///
/// # Errors
/// The open or fstat error, or `InvalidInput` for another file type or size.
pub fn open_list(path: &Path) -> io::Result<Option<fs::File>> {
    let file = match fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)
    {
        Ok(f) => f,
        Err(e) if matches!(e.raw_os_error(), Some(libc::ENOENT) | Some(libc::ENOTDIR)) => {
            return Ok(None);
        }
        Err(e) => return Err(e),
    };
    let md = file.metadata()?;
    if !md.file_type().is_file() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "not a regular file",
        ));
    }
    if md.len() > MAX_LIST_BYTES {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{} bytes, more than the {MAX_LIST_BYTES} allowed", md.len()),
        ));
    }
    Ok(Some(file))
}

/// Reads a list file opened by [`open_list`] from its start, with pread(2):
/// the base list's open file is shared by two processes, so its offset is
/// not used.
pub fn read_all(file: &fs::File) -> io::Result<Vec<u8>> {
    use std::os::unix::fs::FileExt;
    let mut buf = Vec::with_capacity(file.metadata()?.len() as usize);
    let mut chunk = vec![0u8; 64 << 10];
    loop {
        let n = match file.read_at(&mut chunk, buf.len() as u64) {
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if n == 0 {
            return Ok(buf);
        }
        buf.extend_from_slice(&chunk[..n]);
        if buf.len() as u64 > MAX_LIST_BYTES {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "grew past the size limit",
            ));
        }
    }
}

/// Whose included list files may be read ([`read_include`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Trust {
    /// The base list's: owned by root and writable by root alone, as is
    /// every directory on its way (else a user could change a line of the
    /// administrator's list, or swap the file).
    Root,
    /// A user's list's: owned by that uid or root and writable by its owner
    /// alone (another user must not change what this user's sandbox denies).
    User(u32),
}

/// Reads an included list file for [`crate::lists::include::expand`].
/// The path must name a regular file (its type is checked before any open,
/// so no device or FIFO is opened); a part of its path that is not a
/// directory is refused, not taken as missing (nothing could be guarded
/// there). For [`Trust::Root`] the path is taken as written: every
/// directory on it, from `/`, must be root's alone and none may be a
/// symbolic link, and the file is opened with `O_NOFOLLOW` and must be the
/// one checked (device and inode). The owner and mode `trust` asks are read
/// from the open file. Every failure is [`Read::Refused`] with its cause.
pub fn read_include(path: &Path, trust: Trust) -> Read {
    use std::os::unix::fs::MetadataExt;
    let cannot = |e: io::Error| Read::Refused(format!("cannot read it: {e}"));
    let checked = match trust {
        Trust::Root => match root_path(path) {
            Ok(m) => m,
            Err(r) => return r,
        },
        Trust::User(_) => match fs::metadata(path) {
            Ok(m) => m,
            Err(e) => return not_there(e),
        },
    };
    if !checked.file_type().is_file() {
        return Read::Refused("it is not a regular file".into());
    }
    let nofollow = if trust == Trust::Root {
        libc::O_NOFOLLOW
    } else {
        0
    };
    let file = match fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY | nofollow)
        .open(path)
    {
        Ok(f) => f,
        Err(e) => return cannot(e),
    };
    let md = match file.metadata() {
        Ok(m) => m,
        Err(e) => return cannot(e),
    };
    if !md.file_type().is_file() || (md.dev(), md.ino()) != (checked.dev(), checked.ino()) {
        return Read::Refused("it changed while it was read; try again".into());
    }
    if md.len() > MAX_LIST_BYTES {
        return Read::Refused(format!(
            "{} bytes, more than the {MAX_LIST_BYTES} allowed",
            md.len()
        ));
    }
    if let Some(why) = untrusted(md.uid(), md.mode(), trust) {
        return Read::Refused(format!("the file is {why}"));
    }
    match read_all(&file) {
        Ok(bytes) => Read::Bytes(bytes, (md.dev(), md.ino())),
        Err(e) => cannot(e),
    }
}

/// What a failed stat of an include's path means: missing, or refused.
fn not_there(e: io::Error) -> Read {
    match e.raw_os_error() {
        Some(libc::ENOENT) => Read::Missing,
        Some(libc::ENOTDIR) => Read::Refused(
            "a part of its path is not a directory (nothing could be guarded there)".into(),
        ),
        _ => Read::Refused(format!("cannot read it: {e}")),
    }
}

/// A base-list include's path, checked as written: each directory from
/// `/` is root's alone and no part is a symbolic link. Returns the last
/// part's metadata (not followed).
fn root_path(path: &Path) -> Result<fs::Metadata, Read> {
    use std::os::unix::fs::MetadataExt;
    let mut at = std::path::PathBuf::from("/");
    let root = fs::symlink_metadata(&at).map_err(not_there)?;
    if let Some(why) = untrusted(root.uid(), root.mode(), Trust::Root) {
        return Err(Read::Refused(format!("the directory / is {why}")));
    }
    let parts: Vec<_> = path.components().skip(1).collect();
    let mut last = root;
    for (i, part) in parts.iter().enumerate() {
        at.push(part);
        let m = fs::symlink_metadata(&at).map_err(not_there)?;
        if m.file_type().is_symlink() {
            return Err(Read::Refused(format!(
                "{} is a symbolic link: a base-list include names the file by its real path",
                at.display()
            )));
        }
        if i + 1 < parts.len() {
            if !m.is_dir() {
                return Err(not_there(io::Error::from_raw_os_error(libc::ENOTDIR)));
            }
            // The sticky bit does not make a directory anyone else's to write.
            if let Some(why) = untrusted(m.uid(), m.mode() & !0o1000, Trust::Root) {
                return Err(Read::Refused(format!(
                    "its directory {} is {why}",
                    at.display()
                )));
            }
        }
        last = m;
    }
    Ok(last)
}

/// Why an owner `uid` and `mode` (st_mode) do not meet `trust`, if they do not.
fn untrusted(uid: u32, mode: u32, trust: Trust) -> Option<String> {
    let owner_ok = match trust {
        Trust::Root => uid == 0,
        Trust::User(u) => uid == 0 || uid == u,
    };
    if !owner_ok {
        let wanted = match trust {
            Trust::Root => "root".to_string(),
            Trust::User(u) => format!("uid {u} or root"),
        };
        return Some(format!("owned by uid {uid}, not {wanted}"));
    }
    if mode & 0o022 != 0 {
        return Some(format!(
            "writable by its group or others (mode {:o}; chmod go-w fixes it)",
            mode & 0o7777
        ));
    }
    None
}

/// The shipped defaults as one user has them: see [`read_defaults`].
#[derive(Debug, Default)]
pub struct Defaults {
    /// The defaults and the files they include, less the groups the user
    /// turned off; None when there are none or every one is off.
    pub list: Option<Expanded>,
    /// The names of the user's `defaults off` lines that name no group of
    /// them (a misspelling, `recommended`): they turned nothing off.
    pub unknown_off: Vec<Vec<u8>>,
}

/// The shipped defaults at `path` (root's file, read with [`Trust::Root`],
/// with the files it includes) less the catalogue groups `off` names
/// ([`Expanded::defaults_off`]); no list when `path` does not exist or `off`
/// turns every default off.
///
/// # Errors
/// `(at, why)`: the file or one it includes may not be read (not root's
/// alone, a symbolic link on its way); the administrator's defaults are not
/// dropped quietly (the resolver refuses the launch, `--check` says so).
pub fn read_defaults(path: &Path, off: Option<&[Vec<u8>]>) -> Result<Defaults, (String, String)> {
    use std::os::unix::ffi::OsStrExt;
    if off.is_some_and(<[Vec<u8>]>::is_empty) {
        return Ok(Defaults::default());
    }
    let (bytes, id) = match read_include(path, Trust::Root) {
        Read::Bytes(bytes, id) => (bytes, id),
        Read::Missing => return Ok(Defaults::default()),
        Read::Refused(why) => return Err((path.display().to_string(), why)),
    };
    let mut e = expand(
        path.as_os_str().as_bytes(),
        bytes,
        Some(id),
        None,
        &mut |p| read_include(Path::new(std::ffi::OsStr::from_bytes(p)), Trust::Root),
    );
    if let Some(refused) = e.first_refused(|_| true) {
        return Err(refused);
    }
    let unknown_off = match off {
        Some(off) => e.drop_groups(CATALOG_DIR.as_bytes(), off),
        None => Vec::new(),
    };
    Ok(Defaults {
        list: Some(e),
        unknown_off,
    })
}

/// The warning for `defaults off GROUP` whose GROUP (`g`) names no group
/// of the shipped defaults `defaults` (as the user has them).
pub fn unknown_group_warning(g: &[u8], defaults: Option<&Expanded>) -> String {
    let prefix = format!("{CATALOG_DIR}/");
    let groups: Vec<String> = defaults
        .map(|d| {
            d.files
                .iter()
                .filter_map(|f| f.path.strip_prefix(prefix.as_bytes()))
                .filter(|n| *n != b"recommended")
                .map(|n| String::from_utf8_lossy(n).into_owned())
                .collect()
        })
        .unwrap_or_default();
    format!(
        "defaults off {}: no group of the shipped defaults has that name, so it turns nothing off \
         (`defaults off` alone turns every default off){}",
        String::from_utf8_lossy(g),
        if groups.is_empty() {
            String::new()
        } else {
            format!("; their groups now: {}", groups.join(" "))
        }
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The warning names the misspelt group and the groups there are,
    /// `recommended` (which includes them) not among them.
    #[test]
    fn an_unknown_group_is_named_with_the_groups_there_are() {
        let file = |name: &str| crate::lists::include::ListFile {
            path: format!("{CATALOG_DIR}/{name}").into_bytes(),
            bytes: Vec::new(),
            from: None,
        };
        let e = Expanded {
            files: vec![file("recommended"), file("ssh"), file("cloud")],
            ..Expanded::default()
        };
        let w = unknown_group_warning(b"clouds", Some(&e));
        assert!(w.starts_with("defaults off clouds: "), "{w}");
        assert!(w.contains("turns nothing off"), "{w}");
        assert!(w.ends_with("their groups now: ssh cloud"), "{w}");
        assert!(!unknown_group_warning(b"x", None).contains("groups now"));
    }

    #[test]
    fn an_include_must_be_its_owner_s_alone() {
        use std::os::unix::fs::PermissionsExt;
        let me = nix::unistd::getuid().as_raw();
        let dir = std::env::temp_dir().join(format!("asx-inc-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let f = dir.join("list");
        fs::write(&f, b"/x\n").unwrap();
        fs::set_permissions(&f, fs::Permissions::from_mode(0o644)).unwrap();
        assert!(matches!(read_include(&f, Trust::User(me)), Read::Bytes(b, _) if b == b"/x\n"));
        fs::set_permissions(&f, fs::Permissions::from_mode(0o664)).unwrap();
        match read_include(&f, Trust::User(me)) {
            Read::Refused(why) => assert!(
                why.contains("writable by its group or others (mode 664"),
                "{why}"
            ),
            other => panic!("{other:?}"),
        }
        fs::set_permissions(&f, fs::Permissions::from_mode(0o644)).unwrap();
        // Another owner: refused for a user's list, by uid.
        assert_eq!(
            untrusted(4242, 0o100644, Trust::User(1000)).as_deref(),
            Some("owned by uid 4242, not uid 1000 or root")
        );
        assert_eq!(untrusted(0, 0o100644, Trust::User(1000)), None);
        // For the base list every directory on the way counts: the temporary
        // directory is writable by everyone (sticky or not).
        match read_include(&f, Trust::Root) {
            Read::Refused(why) => assert!(
                why.contains("owned by uid") || why.contains("writable by its group or others"),
                "{why}"
            ),
            other => panic!("{other:?}"),
        }
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn list_file_limits() {
        let dir = std::env::temp_dir().join(format!("asx-rl-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        assert!(open_list(&dir.join("absent")).unwrap().is_none());
        fs::write(dir.join("l"), b"/a\n").unwrap();
        let l = open_list(&dir.join("l")).unwrap().unwrap();
        assert_eq!(read_all(&l).unwrap(), b"/a\n");
        assert!(open_list(&dir).is_err(), "a directory is not a list");
        let fifo = dir.join("fifo");
        let _ = fs::remove_file(&fifo);
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
        assert!(open_list(&fifo).is_err(), "a FIFO must not block or pass");
        fs::remove_dir_all(&dir).unwrap();
    }
}
