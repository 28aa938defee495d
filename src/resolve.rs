//! Turning one uid's lists into deny keys, in a short-lived child process.
//!
//! Every launch re-reads the base list ([`BASE_LIST`]) and the user's home list
//! (`~/`[`HOME_LIST`]). The daemon forks one resolver per uid and request
//! batch; the daemon itself never touches a user's path. The resolver:
//! 1. reads the base list as root and resolves its absolute entries as root
//!    (following a symlink in the last component);
//! 2. drops to the user's uid, gid and supplementary groups for good
//!    (setgroups + setresgid + setresuid): a user cannot make it read what the
//!    user cannot, and root-squashed NFS homes work;
//! 3. resolves the base list's `~/` entries, reads the home list and resolves
//!    its entries, all as the user and without following a symlink in the last
//!    component (symlinks higher up resolve normally);
//! 4. writes the keys and warnings to a pipe as records and exits.
//!
//! The daemon gives it [`DEADLINE`]; a resolver stuck on a stalled FUSE or NFS
//! mount is killed and only that request is refused, while other users'
//! launches go on in the daemon's poll loop.
//!
//! Wire format: binary records, one after the other, in the byte order of
//! this machine (both ends are the same binary on the same machine). A file
//! key is 20 bytes: `ino` (u64), `subvol` (u64), `dev` (u32).
//! - `K` key: a file key to deny;
//! - `N` key, length (u8, 1..=255), name: a directory key and a name in it;
//! - `U`/`A`/`F` length (u32), UTF-8 text: a warning for the user, a warning
//!   for the administrator's log, a fatal problem (refuse the launch).
//!
//! Fixed-size binary keys cost a copy to write and to read, where decimal and
//! hex text cost formatting and parsing (most of the per-entry cost of a
//! no-change relaunch, before).

use std::ffi::OsStr;
use std::fs;
use std::io::{self, Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
use nix::unistd::{ForkResult, Pid, Uid, User, fork};

use crate::denylist::{self, Anchor};
use crate::keys::{DenySet, FileKey, KeyContext, KeyError, LastComponent, NAME_MAX, NameKey};

/// The administrator's base list, applied to every user.
pub const BASE_LIST: &str = "/etc/agent-sandbox-exec/denylist";
/// The user's list, relative to the home directory from the passwd entry.
pub const HOME_LIST: &str = ".config/agent-sandbox-exec/denylist";
/// Largest list file read, in bytes (16 MiB: about 200,000 typical paths).
pub const MAX_LIST_BYTES: u64 = 16 << 20;
/// Largest resolver output accepted by the daemon, in bytes (a key record is
/// 21 bytes and a name record at most 277; 131,072 listed paths with names of
/// any length, and their warnings, fit).
pub const MAX_OUTPUT_BYTES: usize = 64 << 20;
/// Most files one uid's lists may name: at most this many file keys in
/// deny_map and this many names in name_map. Eight users at the limit fill
/// each map (1,048,576 entries), so no single user can exhaust it for the others.
pub const MAX_KEYS_PER_UID: usize = 131_072;
/// How long a resolver may take before it is killed and the request refused.
pub const DEADLINE: Duration = Duration::from_secs(5);

/// What a resolver found for one uid.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Resolution {
    /// The file keys and names to deny.
    pub deny: DenySet,
    /// Warnings about the user's own list, for the launcher to show.
    pub user_warnings: Vec<String>,
    /// Warnings about the base list, for the daemon's log.
    pub admin_warnings: Vec<String>,
    /// Why the launch must be refused, if it must.
    pub fatal: Option<String>,
}

/// Bytes of a file key on the wire.
const KEY_BYTES: usize = 20;

/// Parses resolver output. A malformed record is fatal (it cannot come from
/// a working resolver); what was read before it is kept.
pub fn parse_output(out: &[u8]) -> Resolution {
    let mut r = Resolution::default();
    let mut files = Vec::new();
    let mut names = Vec::new();
    let mut rest = out;
    while let Some((&tag, body)) = rest.split_first() {
        // Repeats are allowed (two lines may name one file), but not without
        // bound: past twice the per-user limit, stop before the sort.
        if files.len().max(names.len()) > 2 * MAX_KEYS_PER_UID {
            r.fatal = Some(format!(
                "the lists name more than {} files, more than the {MAX_KEYS_PER_UID} allowed per user",
                2 * MAX_KEYS_PER_UID
            ));
            break;
        }
        let parsed = match tag {
            b'K' => take_key(body).map(|(k, after)| {
                files.push(k);
                after
            }),
            b'N' => take_name(body).map(|(n, after)| {
                names.push(n);
                after
            }),
            b'U' | b'A' | b'F' => take_text(body).map(|(text, after)| {
                match tag {
                    b'U' => r.user_warnings.push(text),
                    b'A' => r.admin_warnings.push(text),
                    _ => r.fatal = Some(text),
                }
                after
            }),
            _ => None,
        };
        match parsed {
            Some(after) => rest = after,
            None => {
                r.fatal = Some(format!(
                    "resolver sent a malformed {:?} record",
                    char::from(tag)
                ));
                break;
            }
        }
    }
    r.deny = DenySet::new(files, names);
    r
}

fn take_key(b: &[u8]) -> Option<(FileKey, &[u8])> {
    let (k, rest) = b.split_at_checked(KEY_BYTES)?;
    let u64_at = |i: usize| u64::from_ne_bytes(k[i..i + 8].try_into().expect("8 bytes"));
    let key = FileKey {
        ino: u64_at(0),
        subvol: u64_at(8),
        dev: u32::from_ne_bytes(k[16..20].try_into().expect("4 bytes")),
    };
    Some((key, rest))
}

fn take_name(b: &[u8]) -> Option<(NameKey, &[u8])> {
    let (dir, rest) = take_key(b)?;
    let (&len, rest) = rest.split_first()?;
    let (name, rest) = rest.split_at_checked(usize::from(len))?;
    if name.is_empty() || name.contains(&b'/') || name.contains(&0) {
        return None;
    }
    let name = name.to_vec();
    Some((NameKey { dir, name }, rest))
}

fn take_text(b: &[u8]) -> Option<(String, &[u8])> {
    let (len, rest) = b.split_at_checked(4)?;
    let len = u32::from_ne_bytes(len.try_into().expect("4 bytes")) as usize;
    let (text, rest) = rest.split_at_checked(len)?;
    Some((String::from_utf8_lossy(text).into_owned(), rest))
}

/// A running resolver child, from the daemon's side.
#[derive(Debug)]
pub struct Resolver {
    /// The uid whose lists it resolves.
    pub uid: u32,
    /// Its pid.
    pub pid: Pid,
    /// When it must have finished.
    pub deadline: Instant,
    pipe: fs::File,
    out: Vec<u8>,
    overflow: bool,
}

/// How a finished resolver ended.
#[derive(Debug)]
pub enum Outcome {
    /// Exited 0: its findings.
    Done(Resolution),
    /// Anything else, with the reason to give the user.
    Failed(String),
}

impl Resolver {
    /// Forks a resolver for `uid`.
    ///
    /// # Errors
    /// The pipe or fork error.
    pub fn spawn(uid: u32) -> io::Result<Resolver> {
        let (read, write) =
            nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).map_err(io::Error::from)?;
        // SAFETY: the daemon is single-threaded (a synchronous poll loop), so the
        // child may allocate and take locks freely; it leaves with _exit.
        match unsafe { fork() }.map_err(io::Error::from)? {
            ForkResult::Child => {
                drop(read);
                let code = child(uid, write);
                // SAFETY: terminate the forked child without running the parent's destructors.
                unsafe { libc::_exit(code) }
            }
            ForkResult::Parent { child } => {
                drop(write);
                let pipe = fs::File::from(read);
                nix::fcntl::fcntl(
                    &pipe,
                    nix::fcntl::FcntlArg::F_SETFL(nix::fcntl::OFlag::O_NONBLOCK),
                )
                .map_err(io::Error::from)?;
                Ok(Resolver {
                    uid,
                    pid: child,
                    deadline: Instant::now() + DEADLINE,
                    pipe,
                    out: Vec::new(),
                    overflow: false,
                })
            }
        }
    }

    /// The pipe's descriptor, to poll for input.
    pub fn fd(&self) -> std::os::fd::BorrowedFd<'_> {
        use std::os::fd::AsFd;
        self.pipe.as_fd()
    }

    /// Reads what is available; true once the child closed its end (or its
    /// output passed [`MAX_OUTPUT_BYTES`]). Reads straight into the output
    /// buffer: no intermediate buffer to zero on every call.
    pub fn pump(&mut self) -> bool {
        let room = (MAX_OUTPUT_BYTES + 1).saturating_sub(self.out.len()) as u64;
        let result = (&mut self.pipe).take(room).read_to_end(&mut self.out);
        if self.out.len() > MAX_OUTPUT_BYTES {
            self.overflow = true;
            return true;
        }
        match result {
            Ok(_) => true,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => false,
            Err(_) => true,
        }
    }

    /// Kills the child and returns its pid, to be reaped later with [`reap`]
    /// (a child stuck in the kernel on a stalled mount dies only when it
    /// leaves the kernel).
    pub fn kill(self) -> Pid {
        let _ = kill(self.pid, Signal::SIGKILL);
        self.pid
    }

    /// Waits for the child after its pipe closed and returns what it found.
    /// A child that overflowed is killed and left in `killed` for [`reap`]:
    /// the daemon's loop never blocks on a child.
    pub fn finish(self, killed: &mut Vec<Pid>) -> Outcome {
        if self.overflow {
            killed.push(self.kill());
            return Outcome::Failed(
                "the lists produced more output than the daemon accepts".into(),
            );
        }
        // The pipe reached EOF: the child closed it by exiting (it holds no
        // other copy), so this wait is short.
        match waitpid(self.pid, None) {
            Ok(WaitStatus::Exited(_, 0)) => {
                let r = parse_output(&self.out);
                match r.fatal.clone() {
                    Some(f) => Outcome::Failed(f),
                    None => Outcome::Done(r),
                }
            }
            Ok(status) => Outcome::Failed(format!("list resolver failed ({status:?})")),
            Err(e) => Outcome::Failed(format!("list resolver lost: {e}")),
        }
    }
}

/// Reaps those of the killed resolvers `pids` that have exited, without
/// blocking; keeps the others. Only these pids are waited for, never "any
/// child", so a resolver still being read is not reaped behind its back.
pub fn reap(pids: &mut Vec<Pid>) {
    pids.retain(|&pid| {
        matches!(
            waitpid(pid, Some(WaitPidFlag::WNOHANG)),
            Ok(WaitStatus::StillAlive)
        )
    });
}

/// The child's body; returns its exit code.
fn child(uid: u32, write: OwnedFd) -> i32 {
    // Keep only the pipe (as fd 3) and stdio: no BPF map or request-directory
    // descriptor reaches code running as the user.
    let raw = write.as_raw_fd();
    // SAFETY: dup2 onto fd 3; the original is closed by close_range below or
    // is fd 3 itself.
    if raw != 3 && unsafe { libc::dup2(raw, 3) } < 0 {
        return 70;
    }
    std::mem::forget(write);
    // SAFETY: closes descriptors >= 4; nothing else in this process uses them.
    unsafe {
        libc::close_range(4, u32::MAX, 0);
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0);
        libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
    }
    let _ = std::env::set_current_dir("/");
    // SAFETY: fd 3 is ours now.
    let out = fs::File::from(unsafe { OwnedFd::from_raw_fd(3) });
    let mut out = io::BufWriter::new(out);
    let mut sink = Sink { out: &mut out };
    let code = match resolve_for(uid, &mut sink) {
        Ok(()) => 0,
        Err(fatal) => {
            sink.record(b'F', &fatal);
            0
        }
    };
    if out.flush().is_err() {
        return 71;
    }
    code
}

struct Sink<'a, W: Write> {
    out: &'a mut W,
}

impl<W: Write> Sink<'_, W> {
    fn record(&mut self, tag: u8, text: &str) {
        let line = crate::request::one_line(text);
        let len = u32::try_from(line.len()).unwrap_or(u32::MAX);
        let _ = self.out.write_all(&[tag]);
        let _ = self.out.write_all(&len.to_ne_bytes());
        let _ = self.out.write_all(&line.as_bytes()[..len as usize]);
    }
    fn key_bytes(k: FileKey, tag: u8) -> [u8; 1 + KEY_BYTES] {
        let mut b = [tag; 1 + KEY_BYTES];
        b[1..9].copy_from_slice(&k.ino.to_ne_bytes());
        b[9..17].copy_from_slice(&k.subvol.to_ne_bytes());
        b[17..21].copy_from_slice(&k.dev.to_ne_bytes());
        b
    }
    fn key(&mut self, k: FileKey) {
        let _ = self.out.write_all(&Self::key_bytes(k, b'K'));
    }
    /// A name of 1 to [`NAME_MAX`] bytes (what [`KeyContext`] returns).
    fn name(&mut self, n: &NameKey) {
        let len = n.name.len().min(NAME_MAX);
        let _ = self.out.write_all(&Self::key_bytes(n.dir, b'N'));
        let _ = self.out.write_all(&[len as u8]);
        let _ = self.out.write_all(&n.name[..len]);
    }
}

/// Which list an entry came from, for messages and the symlink rule.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Source {
    Base,
    Home,
}

fn resolve_for<W: Write>(uid: u32, sink: &mut Sink<'_, W>) -> Result<(), String> {
    let mut keys =
        KeyContext::new().map_err(|e| format!("cannot read /proc/self/mountinfo: {e}"))?;
    let base_path = Path::new(BASE_LIST);
    let base = match read_list(base_path) {
        Ok(Some(b)) => denylist::parse(&b),
        Ok(None) => {
            sink.record(
                b'A',
                &format!("{BASE_LIST}: missing; only users' lists apply"),
            );
            denylist::Parsed::default()
        }
        Err(e) => return Err(format!("cannot read the base list: {e}")),
    };
    for w in &base.warnings {
        sink.record(b'A', &format!("{BASE_LIST}:{}: {}", w.line, w.kind));
    }
    for e in base.entries.iter().filter(|e| e.anchor == Anchor::Root) {
        let path = Path::new(OsStr::from_bytes(&e.path));
        emit(
            sink,
            Source::Base,
            base_path,
            e.line,
            path,
            LastComponent::Follow,
            &mut keys,
        )?;
    }

    let user = User::from_uid(Uid::from_raw(uid))
        .map_err(|e| format!("cannot look up uid {uid}: {e}"))?
        .ok_or_else(|| {
            format!("uid {uid} has no passwd entry, so its home list cannot be found")
        })?;
    drop_privileges(&user)?;
    // Directories opened as root must not be reused as the user.
    keys.forget_dirs();
    let home = user.dir.as_os_str().as_bytes().to_vec();

    // The base list's `~/` entries are the administrator's: resolved as the
    // user (root may not reach a home), but following a symlink in the last
    // component, so that an agent replacing the file by a symlink to a renamed
    // copy does not take it off the list.
    for e in base.entries.iter().filter(|e| e.anchor == Anchor::Home) {
        let joined = denylist::join_home(&home, &e.path);
        let path = Path::new(OsStr::from_bytes(&joined));
        emit(
            sink,
            Source::Base,
            base_path,
            e.line,
            path,
            LastComponent::Follow,
            &mut keys,
        )?;
    }

    let list_path = PathBuf::from(OsStr::from_bytes(&denylist::join_home(
        &home,
        HOME_LIST.as_bytes(),
    )));
    let own = match read_list(&list_path) {
        Ok(Some(b)) => denylist::parse(&b),
        Ok(None) => return Ok(()),
        Err(e) => {
            return Err(format!(
                "cannot read your list {}: {e} (fix or remove it)",
                list_path.display()
            ));
        }
    };
    for w in &own.warnings {
        sink.record(
            b'U',
            &format!("{}:{}: {}", list_path.display(), w.line, w.kind),
        );
    }
    for e in &own.entries {
        let joined = match e.anchor {
            Anchor::Root => e.path.clone(),
            Anchor::Home => denylist::join_home(&home, &e.path),
        };
        let path = Path::new(OsStr::from_bytes(&joined));
        emit(
            sink,
            Source::Home,
            &list_path,
            e.line,
            path,
            LastComponent::NoFollow,
            &mut keys,
        )?;
    }
    Ok(())
}

fn emit<W: Write>(
    sink: &mut Sink<'_, W>,
    source: Source,
    list: &Path,
    line: usize,
    path: &Path,
    last: LastComponent,
    keys: &mut KeyContext,
) -> Result<(), String> {
    let tag = if source == Source::Home { b'U' } else { b'A' };
    let problem = match keys.listing(path, last) {
        Ok(l) => {
            if let Some(k) = l.file {
                sink.key(k);
            }
            for n in &l.names {
                sink.name(n);
            }
            if let Some(why) = l.unwatched {
                sink.record(tag, &format!("{}:{line}: {why}", list.display()));
            }
            return Ok(());
        }
        Err(KeyError::Missing) => "its directory does not exist, so a file created there \
             is denied only from the next launch on"
            .to_string(),
        Err(KeyError::NotRegular(crate::keys::FileKind::Symlink)) => {
            "the last component is a symbolic link; list the file it points to instead".to_string()
        }
        Err(KeyError::Stat(e)) => {
            // Not "missing", not "not a file": the path exists but cannot be
            // checked (EACCES on a directory, ELOOP, EIO, ...). Skipping it would
            // let anyone who can chmod a directory take a file off the list.
            return Err(format!(
                "{}:{line}: cannot check {}: {e}; fix the path's permissions or the list",
                list.display(),
                path.display()
            ));
        }
        Err(e) => e.to_string(),
    };
    sink.record(
        tag,
        &format!(
            "{}:{line}: {}: {problem}; skipped",
            list.display(),
            path.display()
        ),
    );
    Ok(())
}

/// Reads a list file: Ok(None) when it does not exist. Opened without
/// blocking (a FIFO cannot hang us), and must be a regular file of at most
/// [`MAX_LIST_BYTES`]. A symlink as the list file itself is followed.
fn read_list(path: &Path) -> io::Result<Option<Vec<u8>>> {
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
    let mut buf = Vec::with_capacity(md.len() as usize);
    file.take(MAX_LIST_BYTES + 1).read_to_end(&mut buf)?;
    if buf.len() as u64 > MAX_LIST_BYTES {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "grew past the size limit",
        ));
    }
    Ok(Some(buf))
}

/// Becomes `user` for good: supplementary groups, then gid, then uid (real,
/// effective and saved), and checks root cannot be regained.
fn drop_privileges(user: &User) -> Result<(), String> {
    let name = std::ffi::CString::new(user.name.as_bytes())
        .map_err(|_| "user name has a NUL".to_string())?;
    let groups = nix::unistd::getgrouplist(&name, user.gid)
        .map_err(|e| format!("cannot list groups of {}: {e}", user.name))?;
    nix::unistd::setgroups(&groups).map_err(|e| format!("setgroups: {e}"))?;
    nix::unistd::setresgid(user.gid, user.gid, user.gid).map_err(|e| format!("setresgid: {e}"))?;
    nix::unistd::setresuid(user.uid, user.uid, user.uid).map_err(|e| format!("setresuid: {e}"))?;
    if !user.uid.is_root() && nix::unistd::setuid(Uid::from_raw(0)).is_ok() {
        return Err("could regain root after dropping privileges".into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn output_parsing() {
        let k = |dev, ino, subvol| FileKey { dev, ino, subvol };
        let n = NameKey {
            dir: k(1, 2, 3),
            name: b"a b\n\xff".to_vec(),
        };
        let mut buf = Vec::new();
        {
            let mut sink = Sink { out: &mut buf };
            sink.key(k(45, 12, 0));
            sink.key(k(45, 12, 0));
            sink.record(b'U', "a:1: w");
            sink.record(b'A', "b:2: x\ny");
            sink.key(k(8388609, 99, 256));
            sink.name(&n);
        }
        let r = parse_output(&buf);
        assert_eq!(r.fatal, None);
        assert_eq!(r.deny.files(), &[k(45, 12, 0), k(8388609, 99, 256)][..]);
        assert_eq!(r.deny.names(), &[n.clone()][..]);
        assert_eq!(r.user_warnings, vec!["a:1: w".to_string()]);
        assert_eq!(r.admin_warnings, vec!["b:2: x?y".to_string()]);

        // Truncated or malformed records are fatal; what came before stays.
        // (record ends: two keys of 1 + 20 bytes, texts of 1 + 4 + 6 and
        // 1 + 4 + 8, a key, then the name record of 1 + 20 + 1 + 5)
        assert_eq!(buf.len(), 114);
        for end in 1..buf.len() {
            let r = parse_output(&buf[..end]);
            let whole = [21, 42, 53, 66, 87].contains(&end);
            assert_eq!(r.fatal.is_none(), whole, "cut at {end}");
        }
        let mut slash = Vec::new();
        Sink { out: &mut slash }.name(&NameKey {
            dir: k(1, 2, 0),
            name: b"a/b".to_vec(),
        });
        assert!(parse_output(&slash).fatal.is_some(), "a slash in a name");
        let mut empty = Sink::<Vec<u8>>::key_bytes(k(1, 2, 0), b'N').to_vec();
        empty.push(0);
        assert!(parse_output(&empty).fatal.is_some(), "an empty name");
        assert!(parse_output(b"Z what").fatal.is_some());
        // Repeats are parsed up to twice the per-user limit, then refused.
        let one = Sink::<Vec<u8>>::key_bytes(k(1, 2, 0), b'K');
        let many = one.repeat(2 * MAX_KEYS_PER_UID);
        let r = parse_output(&many);
        assert_eq!((r.fatal, r.deny.len()), (None, 1));
        let r = parse_output(&one.repeat(2 * MAX_KEYS_PER_UID + 2));
        assert!(r.fatal.is_some_and(|f| f.contains("allowed per user")));
        let mut fatal = Vec::new();
        Sink { out: &mut fatal }.record(b'F', "nope");
        assert_eq!(parse_output(&fatal).fatal.as_deref(), Some("nope"));
    }

    #[test]
    fn pump_reads_until_eof_without_blocking() {
        let (read, write) = nix::unistd::pipe2(nix::fcntl::OFlag::O_NONBLOCK).unwrap();
        let mut r = Resolver {
            uid: 0,
            pid: Pid::from_raw(0),
            deadline: Instant::now(),
            pipe: fs::File::from(read),
            out: Vec::new(),
            overflow: false,
        };
        let mut w = fs::File::from(write);
        assert!(!r.pump(), "nothing yet, writer open");
        w.write_all(b"abc").unwrap();
        assert!(!r.pump(), "data, writer still open");
        w.write_all(b"def").unwrap();
        drop(w);
        assert!(r.pump(), "writer closed");
        assert_eq!(r.out, b"abcdef");
        assert!(!r.overflow);
    }

    #[test]
    fn read_list_limits() {
        let dir = std::env::temp_dir().join(format!("asx-rl-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        assert!(read_list(&dir.join("absent")).unwrap().is_none());
        fs::write(dir.join("l"), b"/a\n").unwrap();
        assert_eq!(read_list(&dir.join("l")).unwrap().unwrap(), b"/a\n");
        assert!(read_list(&dir).is_err(), "a directory is not a list");
        let fifo = dir.join("fifo");
        let _ = fs::remove_file(&fifo);
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
        assert!(read_list(&fifo).is_err(), "a FIFO must not block or pass");
        fs::remove_dir_all(&dir).unwrap();
    }
}
