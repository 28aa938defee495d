//! The request protocol, both sides: files in a world-writable sticky directory.
//!
//! ```text
//! /run/agent-sandbox-exec/           0755 root (systemd RuntimeDirectory)
//! ├── ready                          daemon pid; exists only while it serves
//! └── req/                           1733 root: anyone may create, nobody but root may list
//!     ├── .req.<token>               launcher writes here first ...
//!     ├── req.<token>                ... then renames (the daemon sees only whole files)
//!     ├── .rep.<token>               daemon writes here first ...
//!     └── rep.<token>                ... then renames; chowned to the requester, mode 0400
//! ```
//! `<token>` is 32 lowercase hex digits from getrandom(2): as the directory
//! cannot be listed, only the requester knows its reply's name.
//!
//! A request is `key=value` lines: `version=1`, `pid=<pid>`; unknown keys are
//! ignored. A reply is `status=ok` or `status=refused`, optional
//! `reason=<text>`, and any number of `warning=<text>` lines.
//!
//! The daemon opens request files with O_NOFOLLOW|O_NONBLOCK relative to a
//! directory descriptor, and accepts only small regular files with one link.
//! The requester's identity is the file owner, checked against the process's
//! uids (see [`crate::daemon`]).

use std::ffi::{CStr, CString};
use std::fs;
use std::io::{self, Read, Write};
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

/// The daemon's runtime directory.
pub const RUN_DIR: &str = "/run/agent-sandbox-exec";
/// The request directory (mode 1733).
pub const REQ_DIR: &str = "/run/agent-sandbox-exec/req";
/// Exists, holding the daemon's pid, only while the daemon serves requests.
pub const READY_FILE: &str = "/run/agent-sandbox-exec/ready";
/// Largest request or reply file accepted, in bytes.
pub const MAX_REQUEST_BYTES: u64 = 1024;
/// Largest reply accepted by the launcher, in bytes (it carries warnings).
pub const MAX_REPLY_BYTES: u64 = 1 << 20;
/// Protocol version written by this launcher and understood by this daemon.
pub const VERSION: u32 = 1;

/// Errors of reading, writing or parsing protocol files.
#[derive(Debug, thiserror::Error)]
pub enum RequestError {
    /// A system call failed.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// The error.
        #[source]
        source: io::Error,
    },
    /// The file is not a regular file with exactly one link.
    #[error("not a regular file with one link (mode {mode:o}, {nlink} links)")]
    NotPlainFile {
        /// st_mode.
        mode: u32,
        /// st_nlink.
        nlink: u64,
    },
    /// The file is larger than allowed.
    #[error("{size} bytes, more than the {max} allowed")]
    TooLarge {
        /// st_size.
        size: u64,
        /// The limit.
        max: u64,
    },
    /// The content does not follow the protocol.
    #[error("malformed: {0}")]
    Malformed(String),
}

fn io_err(what: impl Into<String>) -> impl FnOnce(io::Error) -> RequestError {
    let what = what.into();
    move |source| RequestError::Io { what, source }
}

/// The kind of a name found in the request directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Name {
    /// `req.<token>`: a complete request.
    Request(String),
    /// `rep.<token>`: a reply waiting for its launcher.
    Reply(String),
    /// `.req.<token>` / `.rep.<token>`: being written.
    Partial,
    /// Anything else.
    Foreign,
}

/// Whether `token` has the form of a token (32 lowercase hex digits).
pub fn is_token(token: &str) -> bool {
    token.len() == 32
        && token
            .bytes()
            .all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// Classifies a directory entry name.
pub fn classify(name: &[u8]) -> Name {
    let Ok(name) = std::str::from_utf8(name) else {
        return Name::Foreign;
    };
    let token_of = |prefix: &str| name.strip_prefix(prefix).filter(|t| is_token(t));
    if let Some(t) = token_of("req.") {
        Name::Request(t.to_owned())
    } else if let Some(t) = token_of("rep.") {
        Name::Reply(t.to_owned())
    } else if token_of(".req.").is_some() || token_of(".rep.").is_some() {
        Name::Partial
    } else {
        Name::Foreign
    }
}

/// A fresh random token.
///
/// # Errors
/// The getrandom(2) error.
pub fn new_token() -> io::Result<String> {
    let mut buf = [0u8; 16];
    let mut filled = 0;
    while filled < buf.len() {
        // SAFETY: writes at most buf.len() - filled bytes into buf[filled..].
        let n =
            unsafe { libc::getrandom(buf[filled..].as_mut_ptr().cast(), buf.len() - filled, 0) };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        filled += n as usize;
    }
    Ok(buf.iter().map(|b| format!("{b:02x}")).collect())
}

/// A parsed request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    /// The process to move into the sandbox (the launcher itself).
    pub pid: i32,
}

impl Request {
    /// The file content for this request.
    pub fn encode(&self) -> String {
        format!("version={VERSION}\npid={}\n", self.pid)
    }

    /// Parses request content. Unknown keys are ignored; `version` must be
    /// [`VERSION`]; `pid` must be a positive decimal.
    ///
    /// # Errors
    /// [`RequestError::Malformed`] naming the problem.
    pub fn parse(content: &[u8]) -> Result<Request, RequestError> {
        let text = std::str::from_utf8(content)
            .map_err(|_| RequestError::Malformed("not UTF-8".into()))?;
        let mut version = None;
        let mut pid = None;
        for line in text.lines() {
            let Some((key, value)) = line.split_once('=') else {
                return Err(RequestError::Malformed(format!(
                    "line without '=': {line:?}"
                )));
            };
            match key {
                "version" => version = Some(value),
                "pid" => pid = Some(value),
                _ => {}
            }
        }
        match version {
            Some(v) if v == VERSION.to_string() => {}
            Some(v) => {
                return Err(RequestError::Malformed(format!(
                    "protocol version {v:?}, this daemon speaks {VERSION}"
                )));
            }
            None => return Err(RequestError::Malformed("no version".into())),
        }
        let pid = pid.ok_or_else(|| RequestError::Malformed("no pid".into()))?;
        match pid.parse::<i32>() {
            Ok(p) if p > 0 && !pid.starts_with('+') => Ok(Request { pid: p }),
            _ => Err(RequestError::Malformed(format!("bad pid {pid:?}"))),
        }
    }
}

/// The daemon's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reply {
    /// None: the requester is in its sandbox; Some(reason): refused.
    pub refusal: Option<String>,
    /// Problems with the requester's own list, one line each.
    pub warnings: Vec<String>,
    /// Other things the user should know, not tied to a list line.
    pub notices: Vec<String>,
}

/// Replaces control characters so a text stays on one protocol line.
pub fn one_line(text: &str) -> String {
    text.chars()
        .map(|c| if c.is_control() { '?' } else { c })
        .collect()
}

impl Reply {
    /// A refusal with no warnings.
    pub fn refused(why: impl Into<String>) -> Reply {
        Reply {
            refusal: Some(why.into()),
            warnings: vec![],
            notices: vec![],
        }
    }

    /// The file content for this reply.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        match &self.refusal {
            None => out.push_str("status=ok\n"),
            Some(reason) => {
                out.push_str("status=refused\n");
                out.push_str(&format!("reason={}\n", one_line(reason)));
            }
        }
        for w in &self.warnings {
            out.push_str(&format!("warning={}\n", one_line(w)));
        }
        for n in &self.notices {
            out.push_str(&format!("notice={}\n", one_line(n)));
        }
        out
    }

    /// Parses reply content.
    ///
    /// # Errors
    /// [`RequestError::Malformed`] when there is no valid status line.
    pub fn parse(content: &[u8]) -> Result<Reply, RequestError> {
        let text = String::from_utf8_lossy(content);
        let mut status = None;
        let mut reason = None;
        let mut warnings = Vec::new();
        let mut notices = Vec::new();
        for line in text.lines() {
            match line.split_once('=') {
                Some(("status", v)) => status = Some(v.to_owned()),
                Some(("reason", v)) => reason = Some(v.to_owned()),
                Some(("warning", v)) => warnings.push(v.to_owned()),
                Some(("notice", v)) => notices.push(v.to_owned()),
                _ => {}
            }
        }
        let refusal = match status.as_deref() {
            Some("ok") => None,
            Some("refused") => Some(reason.unwrap_or_else(|| "no reason given".into())),
            other => return Err(RequestError::Malformed(format!("reply status {other:?}"))),
        };
        Ok(Reply {
            refusal,
            warnings,
            notices,
        })
    }
}

/// A file opened from the request directory, with its fstat facts.
#[derive(Debug)]
pub struct Opened {
    /// The owner (st_uid): the requester's identity.
    pub uid: u32,
    /// The content.
    pub content: Vec<u8>,
}

fn cstr(name: &str) -> Result<CString, RequestError> {
    CString::new(name).map_err(|_| RequestError::Malformed("NUL in name".into()))
}

/// Opens `name` in `dir` without following a symlink and without blocking on
/// a FIFO, checks it is a regular file with one link of at most `max` bytes,
/// and reads it.
///
/// # Errors
/// [`RequestError`]: the open/read error, not a plain file, too large.
pub fn open_plain(dir: BorrowedFd<'_>, name: &str, max: u64) -> Result<Opened, RequestError> {
    let c = cstr(name)?;
    let flags =
        libc::O_RDONLY | libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_NOCTTY | libc::O_CLOEXEC;
    // SAFETY: c is NUL-terminated; dir is a valid descriptor.
    let fd = unsafe { libc::openat(dir.as_raw_fd(), c.as_ptr(), flags) };
    if fd < 0 {
        return Err(io_err(format!("open {name}"))(io::Error::last_os_error()));
    }
    // SAFETY: openat returned a new descriptor that we own.
    let file = fs::File::from(unsafe { OwnedFd::from_raw_fd(fd) });
    let st = nix::sys::stat::fstat(&file)
        .map_err(|e| io_err(format!("fstat {name}"))(io::Error::from(e)))?;
    let mode = st.st_mode;
    let nlink = st.st_nlink;
    if mode & libc::S_IFMT != libc::S_IFREG || nlink != 1 {
        return Err(RequestError::NotPlainFile { mode, nlink });
    }
    let size = u64::try_from(st.st_size).unwrap_or(u64::MAX);
    if size > max {
        return Err(RequestError::TooLarge { size, max });
    }
    let mut content = Vec::new();
    file.take(max + 1)
        .read_to_end(&mut content)
        .map_err(io_err(format!("read {name}")))?;
    if content.len() as u64 > max {
        return Err(RequestError::TooLarge {
            size: content.len() as u64,
            max,
        });
    }
    Ok(Opened {
        uid: st.st_uid,
        content,
    })
}

/// Writes `content` to a new file `tmp` in `dir` (O_EXCL|O_NOFOLLOW, `mode`),
/// optionally chowns it to `owner`, then renames it to `name` without
/// replacing an existing file (RENAME_NOREPLACE). Nothing is written through
/// a name that already exists.
///
/// # Errors
/// The first failing call; the temporary file is removed on failure.
pub fn publish(
    dir: BorrowedFd<'_>,
    tmp: &str,
    name: &str,
    content: &[u8],
    mode: u32,
    owner: Option<u32>,
) -> Result<(), RequestError> {
    let c_tmp = cstr(tmp)?;
    let c_name = cstr(name)?;
    let flags = libc::O_WRONLY
        | libc::O_CREAT
        | libc::O_EXCL
        | libc::O_NOFOLLOW
        | libc::O_NOCTTY
        | libc::O_CLOEXEC;
    // SAFETY: valid NUL-terminated name and descriptor.
    let fd = unsafe { libc::openat(dir.as_raw_fd(), c_tmp.as_ptr(), flags, mode) };
    if fd < 0 {
        return Err(io_err(format!("create {tmp}"))(io::Error::last_os_error()));
    }
    // SAFETY: openat returned a new descriptor that we own.
    let mut file = fs::File::from(unsafe { OwnedFd::from_raw_fd(fd) });
    let result = (|| {
        file.write_all(content)
            .map_err(io_err(format!("write {tmp}")))?;
        if let Some(uid) = owner {
            std::os::unix::fs::fchown(&file, Some(uid), None)
                .map_err(io_err(format!("chown {tmp}")))?;
        }
        rename_noreplace(dir, &c_tmp, &c_name).map_err(io_err(format!("rename {tmp} to {name}")))
    })();
    if result.is_err() {
        let _ = unlink_at(dir, tmp);
    }
    result
}

fn rename_noreplace(dir: BorrowedFd<'_>, from: &CStr, to: &CStr) -> io::Result<()> {
    // SAFETY: valid NUL-terminated names and descriptors.
    let rc = unsafe {
        libc::renameat2(
            dir.as_raw_fd(),
            from.as_ptr(),
            dir.as_raw_fd(),
            to.as_ptr(),
            libc::RENAME_NOREPLACE,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// unlinkat(2) of a plain name in `dir` (never follows anything).
///
/// # Errors
/// The unlinkat error.
pub fn unlink_at(dir: BorrowedFd<'_>, name: &str) -> io::Result<()> {
    let c = CString::new(name).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    // SAFETY: valid NUL-terminated name and descriptor.
    if unsafe { libc::unlinkat(dir.as_raw_fd(), c.as_ptr(), 0) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Opens a directory as a descriptor for the *at() calls
/// (O_PATH|O_DIRECTORY|O_NOFOLLOW: needs search permission only, which is all
/// a user has on the 1733 request directory).
///
/// # Errors
/// The open error.
pub fn open_dir(path: &str) -> io::Result<OwnedFd> {
    let c = CString::new(path).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    // SAFETY: valid NUL-terminated path.
    let fd = unsafe {
        libc::open(
            c.as_ptr(),
            libc::O_PATH | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: open returned a new descriptor that we own.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsFd;

    #[test]
    fn names() {
        let t = "0123456789abcdef0123456789abcdef";
        assert_eq!(
            classify(format!("req.{t}").as_bytes()),
            Name::Request(t.into())
        );
        assert_eq!(
            classify(format!("rep.{t}").as_bytes()),
            Name::Reply(t.into())
        );
        assert_eq!(classify(format!(".req.{t}").as_bytes()), Name::Partial);
        assert_eq!(classify(b"req.0123"), Name::Foreign);
        assert_eq!(
            classify(format!("req.{}", t.to_uppercase()).as_bytes()),
            Name::Foreign
        );
        assert_eq!(classify(b"req.\xff"), Name::Foreign);
        assert_eq!(classify(format!("req.{t}/../x").as_bytes()), Name::Foreign);
        let tok = new_token().unwrap();
        assert!(is_token(&tok));
        assert_ne!(tok, new_token().unwrap());
    }

    #[test]
    fn request_round_trip_and_rejections() {
        let r = Request { pid: 4242 };
        assert_eq!(Request::parse(r.encode().as_bytes()).unwrap(), r);
        assert_eq!(
            Request::parse(b"future=1\nversion=1\npid=7\n").unwrap(),
            Request { pid: 7 }
        );
        for bad in [
            &b"pid=7\n"[..],
            b"version=2\npid=7\n",
            b"version=1\n",
            b"version=1\npid=-1\n",
            b"version=1\npid=0\n",
            b"version=1\npid=+5\n",
            b"version=1\npid=99999999999\n",
            b"version=1\ngarbage\npid=5\n",
            b"version=1\npid=\xff\n",
        ] {
            assert!(
                Request::parse(bad).is_err(),
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
    }

    #[test]
    fn reply_round_trip() {
        let ok = Reply {
            refusal: None,
            warnings: vec!["a:1: x".into(), "line\nbreak".into()],
            notices: vec!["2 files".into()],
        };
        let parsed = Reply::parse(ok.encode().as_bytes()).unwrap();
        assert_eq!(parsed.refusal, None);
        assert_eq!(
            parsed.warnings,
            vec!["a:1: x".to_string(), "line?break".to_string()]
        );
        let no = Reply {
            refusal: Some("map full".into()),
            warnings: vec![],
            notices: vec![],
        };
        assert_eq!(Reply::parse(no.encode().as_bytes()).unwrap(), no);
        assert!(Reply::parse(b"status=maybe\n").is_err());
        assert!(Reply::parse(b"").is_err());
    }

    fn scratch() -> (std::path::PathBuf, OwnedFd) {
        let dir = std::env::temp_dir().join(format!(
            "asx-req-{}-{}",
            std::process::id(),
            new_token().unwrap()
        ));
        fs::create_dir(&dir).unwrap();
        let fd = open_dir(dir.to_str().unwrap()).unwrap();
        (dir, fd)
    }

    #[test]
    fn open_plain_rejects_links_fifos_hardlinks_and_large_files() {
        let (dir, fd) = scratch();
        fs::write(dir.join("ok"), b"version=1\npid=1\n").unwrap();
        let opened = open_plain(fd.as_fd(), "ok", MAX_REQUEST_BYTES).unwrap();
        assert_eq!(opened.uid, nix::unistd::getuid().as_raw());
        assert_eq!(opened.content, b"version=1\npid=1\n");

        std::os::unix::fs::symlink(dir.join("ok"), dir.join("sym")).unwrap();
        assert!(matches!(
            open_plain(fd.as_fd(), "sym", MAX_REQUEST_BYTES),
            Err(RequestError::Io { .. })
        ));
        nix::unistd::mkfifo(
            &dir.join("fifo"),
            nix::sys::stat::Mode::from_bits_truncate(0o600),
        )
        .unwrap();
        assert!(matches!(
            open_plain(fd.as_fd(), "fifo", MAX_REQUEST_BYTES),
            Err(RequestError::NotPlainFile { .. })
        ));
        fs::hard_link(dir.join("ok"), dir.join("hard")).unwrap();
        assert!(matches!(
            open_plain(fd.as_fd(), "hard", MAX_REQUEST_BYTES),
            Err(RequestError::NotPlainFile { nlink: 2, .. })
        ));
        fs::write(dir.join("big"), vec![b'x'; 2000]).unwrap();
        assert!(matches!(
            open_plain(fd.as_fd(), "big", MAX_REQUEST_BYTES),
            Err(RequestError::TooLarge { .. })
        ));
        fs::create_dir(dir.join("d")).unwrap();
        assert!(open_plain(fd.as_fd(), "d", MAX_REQUEST_BYTES).is_err());
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn publish_never_replaces_or_follows() {
        let (dir, fd) = scratch();
        publish(fd.as_fd(), ".t1", "one", b"hello", 0o400, None).unwrap();
        assert_eq!(fs::read(dir.join("one")).unwrap(), b"hello");
        // An existing target is not replaced and the temp file is cleaned up.
        assert!(publish(fd.as_fd(), ".t2", "one", b"other", 0o400, None).is_err());
        assert_eq!(fs::read(dir.join("one")).unwrap(), b"hello");
        assert!(!dir.join(".t2").exists());
        // A pre-planted symlink at the temp name is not written through.
        fs::write(dir.join("victim"), b"v").unwrap();
        std::os::unix::fs::symlink(dir.join("victim"), dir.join(".t3")).unwrap();
        assert!(publish(fd.as_fd(), ".t3", "three", b"evil", 0o400, None).is_err());
        assert_eq!(fs::read(dir.join("victim")).unwrap(), b"v");
        fs::remove_dir_all(&dir).unwrap();
    }
}
