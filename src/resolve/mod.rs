//! Turning one uid's lists into deny keys, in long-lived resolver processes.
//!
//! Every launch re-reads the base list ([`crate::paths::Paths::base_list`]) and
//! the user's home list (`~/`[`HOME_LIST`]); the daemon itself never resolves
//! a listed path. Per
//! uid, it keeps two resolver processes, exec'd from its own binary as
//! [`WORKER_NAME`] (so they share none of its memory or descriptors) and kept
//! for [`IDLE_LIMIT`] after their last request:
//! - the *base-list* process stays root and resolves the base list's absolute
//!   entries as root (following a symlink in the last component);
//! - the *user* process drops to the user's uid, gid and supplementary groups
//!   for good when it starts (setgroups + setresgid + setresuid; a user cannot
//!   make it read what the user cannot, and root-squashed NFS homes work), and
//!   resolves the base list's `~/` entries and the home list, without following
//!   a symlink in the last component of a home-list entry (symlinks higher up
//!   resolve normally).
//!
//! For each launch the daemon opens the base list itself and sends its
//! descriptor (SCM_RIGHTS) with a one-byte request over a socket pair to both;
//! each answers with a length and its records. A user may signal or prlimit(2)
//! the process that runs as them (it is not dumpable, so not ptrace): a process
//! that died is replaced and the request sent again once; one whose groups or
//! resource limits changed since it started exits on its next request
//! ([`EXIT_STALE`]) and is replaced the same way.
//!
//! The daemon gives a resolution [`DEADLINE`]; processes stuck on a stalled
//! FUSE or NFS mount are killed and only that request is refused, while other
//! users' launches go on in the daemon's poll loop.
//!
//! Wire format of the records: binary, one after the other, in the byte order of
//! this machine (both ends are the same binary on the same machine). A file
//! key is 20 bytes: `ino` (u64), `subvol` (u64), `dev` (u32).
//! - `K` key: a file key to deny;
//! - `P` key, `D` key, `C` key: a directory or symlink on the way to a listed
//!   name, a directory holding one, a case-insensitive one (deny_map entries
//!   of kind `KIND_PATH`, `KIND_LISTED_DIR`, `KIND_FOLDING_DIR`; see
//!   [`KeyContext::take_marks`]);
//! - `N` key, length (u8, 1..=255), name: a directory key and a name in it;
//! - `M` kind (u8), key: a directory-entry or exception mark (deny_map entry
//!   of kind `KIND_DIR_*` / `KIND_EXC_*`);
//! - `n` kind (u8), key, length, name: the same mark by name (name_map entry
//!   whose directory key has that kind);
//! - `U`/`A`/`F` length (u32), UTF-8 text: a warning for the user, a warning
//!   for the administrator's log, a fatal problem (refuse the launch);
//! - `I` length (u32), UTF-8 text: a directory entry's scan did not read
//!   everything below it, and why (the launch then removes no key, see
//!   [`crate::policy::keys_mode`]).
//!
//! Fixed-size binary keys cost a copy to write and to read, where decimal and
//! hex text cost formatting and parsing (most of the per-entry cost of a
//! no-change relaunch, before).

mod pool;
mod wire;
mod worker;

pub use pool::*;
pub use wire::*;
pub use worker::*;

use crate::denylist::{self, Anchor};
use crate::keys::{
    DenySet, FileKey, HAS_DIRS_KEY, KIND_DIR_BASE, KIND_DIR_USER, KIND_EXC_BASE, KIND_EXC_USER,
    KIND_FOLDING_DIR, KIND_LISTED_DIR, KIND_OPEN, KIND_PATH, KeyContext, KeyError, LastComponent,
    ListingSink, MAX_SCAN_KEYS, NAME_MAX, NameKey,
};
use nix::sys::signal::{Signal, kill};
use nix::sys::socket::{ControlMessage, ControlMessageOwned, MsgFlags, recvmsg, sendmsg};
use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
use nix::unistd::{Pid, Uid, User};
use std::collections::HashMap;
use std::ffi::{OsStr, OsString};
use std::fs;
use std::io::{self, Read, Write};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Why a resolution could not start or finish, worded for the user who
/// launched (the daemon's refusal quotes it).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ResolveError {
    /// The daemon cannot open the base list (as root).
    #[error("cannot read the base list {path}: {why}")]
    BaseList {
        /// The base list's path.
        path: String,
        /// The open's or read's error.
        why: String,
    },
    /// No resolver process could be started.
    #[error("cannot start the list resolver: {0}")]
    Start(String),
    /// The resolver processes took no request.
    #[error("cannot reach the list resolver: {0}")]
    Reach(String),
    /// An answer announced more than [`MAX_OUTPUT_BYTES`].
    #[error("the lists produced more output than the daemon accepts")]
    OutputTooLarge,
    /// The user process cannot look its uid up.
    #[error("cannot look up uid {uid}: {why}")]
    LookUp {
        /// The uid.
        uid: u32,
        /// The lookup's error.
        why: String,
    },
    /// The uid has no passwd entry.
    #[error("uid {0} has no passwd entry, so its home list cannot be found")]
    NoPasswd(u32),
    /// The user process cannot become the user for good.
    #[error("cannot drop privileges to {user}: {why}")]
    Privileges {
        /// The user's name.
        user: String,
        /// The step that failed and its error.
        why: String,
    },
    /// The mount table cannot be read (it maps mount ids to devices).
    #[error("cannot read /proc/self/mountinfo: {0}")]
    MountTable(String),
    /// The base list's descriptor cannot be read.
    #[error("cannot read the base list: {0}")]
    BaseListRead(String),
    /// The user's own list cannot be read: the launch is refused, not the
    /// list skipped.
    #[error("cannot read your list {path}: {why} (fix or remove it)")]
    OwnList {
        /// The list's path.
        path: String,
        /// The open's or read's error.
        why: String,
    },
    /// A listed path exists but cannot be checked (EACCES on a directory,
    /// ELOOP, EIO): skipping it would let anyone who can chmod a directory
    /// take a file off the list, so the launch is refused.
    #[error("{at}: cannot check the path: {why}; fix the path's permissions or the list")]
    Unchecked {
        /// The list and line (and, for the base list, the path).
        at: String,
        /// The error.
        why: String,
    },
    /// The daemon's request came without the base list's descriptor.
    #[error("the base list's descriptor did not arrive (too many open files?)")]
    NoDescriptor,
    /// The daemon sent a request this resolver does not know.
    #[error("bad request {0:?} from the daemon")]
    BadRequest(char),
}

pub use crate::paths::HOME_LIST;

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

/// argv[0] of a resolver process; [`worker_main`] serves it.
pub const WORKER_NAME: &str = "agent-sandbox-exec-resolver";

/// How long a uid's resolver processes stay alive without a request.
pub const IDLE_LIMIT: Duration = Duration::from_secs(60);

/// Most uids whose idle resolvers are kept; past it, the longest idle go.
pub const MAX_IDLE_UIDS: usize = 32;

/// Exit status of a resolver whose credentials or resource limits no longer
/// match what a fresh one would get (EX_TEMPFAIL): the daemon starts a new one.
const EXIT_STALE: i32 = 75;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn output_parsing() {
        let k = |dev, ino, subvol| FileKey {
            dev,
            ino,
            subvol,
            kind: KIND_OPEN,
        };
        let n = NameKey {
            dir: k(1, 2, 3),
            name: b"a b\n\xff".to_vec(),
        };
        let mut buf = Vec::new();
        {
            let mut sink = Sink { out: &mut buf };
            sink.file(k(45, 12, 0));
            sink.file(k(45, 12, 0));
            sink.record(b'U', "a:1: w");
            sink.record(b'A', "b:2: x\ny");
            sink.file(k(8388609, 99, 256));
            sink.name(n.dir, &n.name);
        }
        let r = parse_output(&[&buf]);
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
            let r = parse_output(&[&buf[..end]]);
            let whole = [21, 42, 53, 66, 87].contains(&end);
            assert_eq!(r.fatal.is_none(), whole, "cut at {end}");
        }
        let mut slash = Vec::new();
        Sink { out: &mut slash }.name(k(1, 2, 0), b"a/b");
        assert!(parse_output(&[&slash]).fatal.is_some(), "a slash in a name");
        let mut empty = Sink::key_bytes(k(1, 2, 0), b'N').to_vec();
        empty.push(0);
        assert!(parse_output(&[&empty]).fatal.is_some(), "an empty name");
        assert!(parse_output(&[b"Z what"]).fatal.is_some());
        // Repeats are parsed up to twice the per-user limit, then refused.
        let one = Sink::key_bytes(k(1, 2, 0), b'K');
        let many = one.repeat(2 * MAX_KEYS_PER_UID);
        let r = parse_output(&[&many]);
        assert_eq!((r.fatal, r.deny.len()), (None, 1));
        let r = parse_output(&[&one.repeat(2 * MAX_KEYS_PER_UID + 2)]);
        assert!(r.fatal.is_some_and(|f| f.contains("allowed per user")));
        let mut fatal = Vec::new();
        Sink { out: &mut fatal }.record(b'F', "nope");
        assert_eq!(parse_output(&[&fatal]).fatal.as_deref(), Some("nope"));
        // An incomplete scan, in either answer: the first reason is kept.
        let (mut first, mut second) = (Vec::new(), Vec::new());
        Sink { out: &mut first }.record(b'I', "l:1: cannot open");
        Sink { out: &mut second }.record(b'I', "l:2: too many");
        let r = parse_output(&[&one, &first]);
        assert_eq!(
            (r.fatal, r.incomplete.as_deref()),
            (None, Some("l:1: cannot open"))
        );
        let r = parse_output(&[&first, &second]);
        assert_eq!(r.incomplete.as_deref(), Some("l:1: cannot open"));
        assert_eq!(parse_output(&[&one]).incomplete, None);
    }

    #[test]
    fn marks_keep_their_kind_on_the_wire() {
        let k = |ino, kind| FileKey {
            dev: 3,
            ino,
            subvol: 9,
            kind,
        };
        let sent = [
            k(1, KIND_OPEN),
            k(2, KIND_PATH),
            k(3, KIND_LISTED_DIR),
            k(3, KIND_FOLDING_DIR),
        ];
        let mut out = Vec::new();
        let mut sink = Sink { out: &mut out };
        sink.file(sent[0]);
        for m in &sent[1..] {
            sink.mark(*m);
        }
        let r = parse_output(&[&out]);
        assert_eq!(r.fatal, None);
        assert_eq!(r.deny.files(), &sent[..]);
    }

    #[test]
    fn directory_marks_and_exceptions_keep_their_kind_on_the_wire() {
        let k = |ino, kind| FileKey {
            dev: 7,
            ino,
            subvol: 0,
            kind,
        };
        let mut out = Vec::new();
        let mut sink = Sink { out: &mut out };
        sink.file(k(10, KIND_DIR_USER));
        sink.name(k(2, KIND_DIR_USER), b".ssh");
        KindSink {
            inner: &mut sink,
            kind: KIND_EXC_USER,
        }
        .file(k(11, KIND_OPEN));
        KindSink {
            inner: &mut sink,
            kind: KIND_EXC_USER,
        }
        .name(k(10, KIND_OPEN), b"known_hosts");
        let r = parse_output(&[&out]);
        assert_eq!(r.fatal, None);
        // A directory entry makes the sandbox's "has directory entries" key.
        assert_eq!(
            r.deny.files(),
            &[HAS_DIRS_KEY, k(10, KIND_DIR_USER), k(11, KIND_EXC_USER)][..]
        );
        let names: Vec<_> = r
            .deny
            .names()
            .iter()
            .map(|n| (n.dir, n.name.clone()))
            .collect();
        assert_eq!(
            names,
            vec![
                (k(2, KIND_DIR_USER), b".ssh".to_vec()),
                (k(10, KIND_EXC_USER), b"known_hosts".to_vec()),
            ]
        );
        // Only exceptions: no walk needed, no flag key.
        let mut out = Vec::new();
        Sink { out: &mut out }.file(k(11, KIND_EXC_BASE));
        assert_eq!(
            parse_output(&[&out]).deny.files(),
            &[k(11, KIND_EXC_BASE)][..]
        );
        // A directory entry whose directory does not exist yet (its name
        // alone) makes the flag key too: the walk checks that name.
        let mut out = Vec::new();
        Sink { out: &mut out }.name(k(2, KIND_DIR_BASE), b"AccountsService");
        assert_eq!(parse_output(&[&out]).deny.files(), &[HAS_DIRS_KEY][..]);
        // An exception's name alone does not.
        let mut out = Vec::new();
        KindSink {
            inner: &mut Sink { out: &mut out },
            kind: KIND_EXC_BASE,
        }
        .name(k(2, KIND_OPEN), b"x");
        assert!(parse_output(&[&out]).deny.files().is_empty());
        // A mark record with a kind outside the directory-entry range is malformed.
        let mut bad = vec![b'M', KIND_PATH as u8];
        bad.extend_from_slice(&[0u8; KEY_BYTES]);
        assert!(parse_output(&[&bad]).fatal.is_some());
    }

    #[test]
    fn answers_parse_together() {
        let k = |ino| FileKey {
            dev: 1,
            ino,
            subvol: 0,
            kind: KIND_OPEN,
        };
        let one = Sink::key_bytes(k(7), b'K');
        let two = Sink::key_bytes(k(8), b'K');
        let r = parse_output(&[&one, &two]);
        assert_eq!((r.fatal, r.deny.files()), (None, &[k(7), k(8)][..]));
        // A record cut at the end of one answer does not continue into the next.
        let r = parse_output(&[&one[..10], &two]);
        assert!(r.fatal.is_some());
        assert!(r.deny.is_empty(), "nothing after the malformed record");
        // The parse cap counts both answers.
        let half = one.repeat(MAX_KEYS_PER_UID + 1);
        let r = parse_output(&[&half, &half]);
        assert!(r.fatal.is_some_and(|f| f.contains("allowed per user")));
    }

    fn part() -> (Part, UnixStream) {
        let (ours, theirs) = UnixStream::pair().unwrap();
        ours.set_nonblocking(true).unwrap();
        let part = Part {
            worker: Worker {
                pid: Pid::from_raw(0),
                sock: ours,
            },
            out: Vec::new(),
            state: State::Reading,
        };
        (part, theirs)
    }

    #[test]
    fn answer_read_without_blocking() {
        let (mut p, mut w) = part();
        p.pump();
        assert!(matches!(p.state, State::Reading), "nothing yet");
        w.write_all(&5u64.to_ne_bytes()[..3]).unwrap();
        p.pump();
        assert!(matches!(p.state, State::Reading), "half a length");
        w.write_all(&5u64.to_ne_bytes()[3..]).unwrap();
        w.write_all(b"abc").unwrap();
        p.pump();
        assert!(matches!(p.state, State::Reading), "3 of 5 bytes");
        // The answer's end is not read past: what follows stays unread.
        w.write_all(b"deXYZ").unwrap();
        p.pump();
        assert!(matches!(p.state, State::Done));
        assert_eq!(p.records(), b"abcde");

        // Closed before the end: a dead process, worth a retry.
        let (mut p, mut w) = part();
        w.write_all(&5u64.to_ne_bytes()).unwrap();
        w.write_all(b"ab").unwrap();
        drop(w);
        p.pump();
        assert!(matches!(p.state, State::Broken { retry: true, .. }));

        // Too long an answer is refused before it is read, without a retry.
        let (mut p, mut w) = part();
        w.write_all(&(MAX_OUTPUT_BYTES as u64 + 1).to_ne_bytes())
            .unwrap();
        p.pump();
        assert!(matches!(p.state, State::Broken { retry: false, .. }));
    }

    #[test]
    fn request_carries_the_base_list() {
        let (ours, theirs) = UnixStream::pair().unwrap();
        let w = Worker {
            pid: Pid::from_raw(0),
            sock: ours,
        };
        let dir = std::env::temp_dir().join(format!("asx-rq-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        fs::write(dir.join("base"), b"/a\n").unwrap();
        let base = open_list(&dir.join("base")).unwrap().unwrap();
        w.send(Some(&base)).unwrap();
        w.send(None).unwrap();
        let got = receive(&theirs).unwrap().unwrap().unwrap().unwrap();
        assert_eq!(read_all(&got).unwrap(), b"/a\n");
        // Both processes read the shared open file from its start.
        assert_eq!(read_all(&got).unwrap(), b"/a\n");
        assert!(receive(&theirs).unwrap().unwrap().unwrap().is_none());
        // "B" without a descriptor is fatal, not "no base list".
        (&w.sock).write_all(b"B").unwrap();
        assert!(receive(&theirs).unwrap().unwrap().is_err());
        drop(w);
        assert!(receive(&theirs).unwrap().is_none(), "closed: serve ends");
        fs::remove_dir_all(&dir).unwrap();
    }

    /// Asks a base-list process in a thread of this test, as the daemon
    /// does, and returns its records.
    fn ask(w: &Worker, base: &fs::File) -> Vec<u8> {
        w.send(Some(base)).unwrap();
        let mut len = [0u8; 8];
        (&w.sock).read_exact(&mut len).unwrap();
        let mut out = vec![0u8; u64::from_ne_bytes(len) as usize];
        (&w.sock).read_exact(&mut out).unwrap();
        out
    }

    #[test]
    fn an_answer_is_reused_only_while_nothing_it_read_changed() {
        let (ours, theirs) = UnixStream::pair().unwrap();
        let w = Worker {
            pid: Pid::from_raw(0),
            sock: ours,
        };
        let daemon = nix::unistd::getppid();
        let server = std::thread::spawn(move || serve(Role::Base, &theirs, daemon));
        let dir = std::env::temp_dir().join(format!("asx-reuse-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(dir.join("d")).unwrap();
        let secret = dir.join("d/secret");
        fs::write(&secret, b"x").unwrap();
        fs::write(dir.join("base"), format!("{}\n", secret.display())).unwrap();
        let base = open_list(&dir.join("base")).unwrap().unwrap();
        let ino = |p: &Path| std::os::unix::fs::MetadataExt::ino(&fs::metadata(p).unwrap());
        let file_key = |out: &[u8]| {
            let deny = parse_output(&[out]).deny;
            let open: Vec<_> = deny
                .files()
                .iter()
                .filter(|f| f.kind == KIND_OPEN)
                .collect();
            assert_eq!(open.len(), 1);
            open[0].ino
        };

        let first = ask(&w, &base);
        assert_eq!(file_key(&first), ino(&secret));
        assert_eq!(ask(&w, &base), first, "nothing changed");
        // The listed file's directory replaced: the new file is found.
        fs::rename(dir.join("d"), dir.join("d.old")).unwrap();
        fs::create_dir(dir.join("d")).unwrap();
        fs::write(&secret, b"y").unwrap();
        let second = ask(&w, &base);
        assert_eq!(file_key(&second), ino(&secret));
        assert_ne!(second, first);
        // The list changed: read again.
        fs::write(
            dir.join("base"),
            format!("{}\n", dir.join("d.old/secret").display()),
        )
        .unwrap();
        assert_eq!(file_key(&ask(&w, &base)), ino(&dir.join("d.old/secret")));
        drop(w);
        assert_eq!(server.join().unwrap(), 0);
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn base_process_resolves_absolute_entries() {
        let dir = std::env::temp_dir().join(format!("asx-rb-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let secret = dir.join("secret");
        fs::write(&secret, b"x").unwrap();
        let list = format!("{}\n~/.home-entry\nrelative\n", secret.display());
        fs::write(dir.join("base"), list).unwrap();
        let base = read_all(&open_list(&dir.join("base")).unwrap().unwrap()).unwrap();
        let mut out = Vec::new();
        resolve_base(Some(&base), &mut None, &mut Sink { out: &mut out }).unwrap();
        let r = parse_output(&[&out]);
        let ino = std::os::unix::fs::MetadataExt::ino(&fs::metadata(&secret).unwrap());
        assert_eq!(r.deny.files().len(), 1, "the absolute entry only");
        assert_eq!(r.deny.files()[0].ino, ino);
        assert_eq!(r.deny.names()[0].name, b"secret");
        assert_eq!(r.admin_warnings.len(), 1, "the relative line: {r:?}");
        assert!(r.user_warnings.is_empty());

        let mut out = Vec::new();
        resolve_base(None, &mut None, &mut Sink { out: &mut out }).unwrap();
        let r = parse_output(&[&out]);
        assert!(r.deny.is_empty());
        assert!(r.admin_warnings[0].contains("missing"));
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

    #[test]
    fn resolution_errors_say_what_to_fix() {
        let own = ResolveError::OwnList {
            path: "/home/u/.config/agent-sandbox-exec/denylist".into(),
            why: "Permission denied (os error 13)".into(),
        };
        assert_eq!(
            own.to_string(),
            "cannot read your list /home/u/.config/agent-sandbox-exec/denylist: \
             Permission denied (os error 13) (fix or remove it)"
        );
        let unchecked = ResolveError::Unchecked {
            at: "/home/u/.config/agent-sandbox-exec/denylist:3".into(),
            why: "Permission denied (os error 13)".into(),
        };
        assert!(
            unchecked
                .to_string()
                .ends_with("fix the path's permissions or the list")
        );
        assert!(ResolveError::BadRequest('x').to_string().contains("'x'"));
        let base = ResolveError::BaseList {
            path: "/etc/agent-sandbox-exec/denylist".into(),
            why: "is a FIFO".into(),
        };
        assert_eq!(
            base.to_string(),
            "cannot read the base list /etc/agent-sandbox-exec/denylist: is a FIFO"
        );
    }
}
