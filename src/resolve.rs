//! Turning one uid's lists into deny keys, in long-lived resolver processes.
//!
//! Every launch re-reads the base list ([`BASE_LIST`]) and the user's home list
//! (`~/`[`HOME_LIST`]); the daemon itself never resolves a listed path. Per
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
//!   for the administrator's log, a fatal problem (refuse the launch).
//!
//! Fixed-size binary keys cost a copy to write and to read, where decimal and
//! hex text cost formatting and parsing (most of the per-entry cost of a
//! no-change relaunch, before).

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

use nix::sys::signal::{Signal, kill};
use nix::sys::socket::{ControlMessage, ControlMessageOwned, MsgFlags, recvmsg, sendmsg};
use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
use nix::unistd::{Pid, Uid, User};

use crate::denylist::{self, Anchor};
use crate::keys::{
    DenySet, FileKey, HAS_DIRS_KEY, KIND_DIR_BASE, KIND_DIR_USER, KIND_EXC_BASE, KIND_EXC_USER,
    KIND_FOLDING_DIR, KIND_LISTED_DIR, KIND_OPEN, KIND_PATH, KeyContext, KeyError, LastComponent,
    ListingSink, MAX_SCAN_KEYS, NAME_MAX, NameKey,
};

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

/// Parses the records of resolver answers, one after the other, into one
/// resolution. A malformed record is fatal (it cannot come from a working
/// resolver); what was read before it is kept.
pub fn parse_output(outs: &[&[u8]]) -> Resolution {
    let mut r = Resolution::default();
    let mut files = Vec::new();
    let mut names = Vec::new();
    let mut has_dirs = false;
    'answers: for out in outs {
        let mut rest = *out;
        while let Some((&tag, body)) = rest.split_first() {
            // Repeats are allowed (two lines may name one file), but not without
            // bound: past twice the per-user limit, stop before the sort.
            if files.len().max(names.len()) > 2 * MAX_KEYS_PER_UID {
                r.fatal = Some(format!(
                    "the lists name more than {} files, more than the {MAX_KEYS_PER_UID} allowed per user",
                    2 * MAX_KEYS_PER_UID
                ));
                break 'answers;
            }
            let parsed = match tag {
                b'K' | b'P' | b'D' | b'C' => take_key(body).map(|(k, after)| {
                    files.push(k.with_kind(match tag {
                        b'P' => KIND_PATH,
                        b'D' => KIND_LISTED_DIR,
                        b'C' => KIND_FOLDING_DIR,
                        _ => KIND_OPEN,
                    }));
                    after
                }),
                b'N' => take_name(body).map(|(n, after)| {
                    names.push(n);
                    after
                }),
                b'M' => take_kind(body)
                    .and_then(|(kind, b)| take_key(b).map(|(k, after)| (k.with_kind(kind), after)))
                    .map(|(k, after)| {
                        has_dirs |= k.kind == KIND_DIR_BASE || k.kind == KIND_DIR_USER;
                        files.push(k);
                        after
                    }),
                b'n' => take_kind(body).and_then(|(kind, b)| {
                    take_name(b).map(|(mut n, after)| {
                        n.dir.kind = kind;
                        names.push(n);
                        after
                    })
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
                    break 'answers;
                }
            }
        }
    }
    if has_dirs {
        files.push(HAS_DIRS_KEY);
    }
    r.deny = DenySet::new(files, names);
    r
}

/// A mark kind byte: one of `KIND_DIR_*`, `KIND_EXC_*`.
fn take_kind(b: &[u8]) -> Option<(u32, &[u8])> {
    let (&kind, rest) = b.split_first()?;
    let kind = u32::from(kind);
    (KIND_DIR_BASE..=KIND_EXC_USER)
        .contains(&kind)
        .then_some((kind, rest))
}

fn take_key(b: &[u8]) -> Option<(FileKey, &[u8])> {
    let (k, rest) = b.split_at_checked(KEY_BYTES)?;
    let u64_at = |i: usize| u64::from_ne_bytes(k[i..i + 8].try_into().expect("8 bytes"));
    let key = FileKey {
        ino: u64_at(0),
        subvol: u64_at(8),
        dev: u32::from_ne_bytes(k[16..20].try_into().expect("4 bytes")),
        kind: KIND_OPEN,
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

/// argv[0] of a resolver process; [`worker_main`] serves it.
pub const WORKER_NAME: &str = "agent-sandbox-exec-resolver";
/// How long a uid's resolver processes stay alive without a request.
pub const IDLE_LIMIT: Duration = Duration::from_secs(60);
/// Most uids whose idle resolvers are kept; past it, the longest idle go.
pub const MAX_IDLE_UIDS: usize = 32;
/// Exit status of a resolver whose credentials or resource limits no longer
/// match what a fresh one would get (EX_TEMPFAIL): the daemon starts a new one.
const EXIT_STALE: i32 = 75;

/// What one resolver process resolves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Role {
    /// The base list's absolute entries, as root.
    Base,
    /// The base list's `~/` entries and the home list of this uid, as that
    /// uid (for good: it drops root when it starts).
    User(u32),
}

/// One long-lived resolver process, from the daemon's side: its pid and our
/// end of the socket pair that is its standard input. A request is one byte
/// (`B`: the base list's descriptor is attached with SCM_RIGHTS; `N`: there
/// is no base list); the answer is a u64 length and that many bytes of
/// records (the wire format above).
#[derive(Debug)]
struct Worker {
    pid: Pid,
    sock: UnixStream,
}

impl Worker {
    /// Starts `/proc/self/exe` as [`WORKER_NAME`] with an empty environment,
    /// `/` as working directory, the socket as stdin, stdout on /dev/null and
    /// the daemon's stderr (the journal). Exec'd rather than forked alone, so
    /// that it holds none of the daemon's memory or descriptors.
    fn spawn(role: Role) -> io::Result<Worker> {
        let (ours, theirs) = UnixStream::pair()?;
        let mut cmd = Command::new("/proc/self/exe");
        cmd.arg0(WORKER_NAME)
            .env_clear()
            .current_dir("/")
            .stdin(Stdio::from(OwnedFd::from(theirs)))
            .stdout(Stdio::null())
            .stderr(Stdio::inherit());
        match role {
            Role::Base => cmd.arg("base"),
            Role::User(uid) => cmd.arg("user").arg(uid.to_string()),
        };
        // SAFETY: only async-signal-safe calls between fork and exec.
        unsafe {
            cmd.pre_exec(|| {
                // Dies with the daemon; no descriptor but stdio crosses exec.
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0);
                libc::close_range(3, u32::MAX, libc::CLOSE_RANGE_CLOEXEC as libc::c_int);
                Ok(())
            });
        }
        let child = cmd.spawn()?;
        ours.set_nonblocking(true)?;
        Ok(Worker {
            pid: Pid::from_raw(child.id() as i32),
            sock: ours,
        })
    }

    /// Sends one request, with the base list's descriptor if there is one.
    fn send(&self, base: Option<&fs::File>) -> io::Result<()> {
        let fds;
        let (tag, cmsgs): (&[u8], Vec<ControlMessage<'_>>) = match base {
            Some(f) => {
                fds = [f.as_raw_fd()];
                (b"B", vec![ControlMessage::ScmRights(&fds)])
            }
            None => (b"N", Vec::new()),
        };
        let sent = sendmsg::<()>(
            self.sock.as_raw_fd(),
            &[io::IoSlice::new(tag)],
            &cmsgs,
            MsgFlags::MSG_NOSIGNAL | MsgFlags::MSG_DONTWAIT,
            None,
        )
        .map_err(io::Error::from)?;
        if sent == 1 {
            Ok(())
        } else {
            Err(io::Error::new(io::ErrorKind::WriteZero, "request not sent"))
        }
    }

    /// Kills the process; its pid goes to `reap` (see [`reap`]).
    fn kill(self, reap: &mut Vec<Pid>) {
        let _ = kill(self.pid, Signal::SIGKILL);
        reap.push(self.pid);
    }
}

/// The idle resolver processes, a base-list one and a user one per uid.
/// Kept between launches so that a launch costs two socket round trips
/// instead of a fork, its copy-on-write faults and an exit.
#[derive(Debug, Default)]
pub struct Pool {
    idle: HashMap<u32, ([Worker; 2], Instant)>,
}

impl Pool {
    /// Idle processes of `uid`, or new ones.
    fn take(&mut self, uid: u32, reap: &mut Vec<Pid>) -> io::Result<[Worker; 2]> {
        if let Some((pair, _)) = self.idle.remove(&uid) {
            return Ok(pair);
        }
        let base = Worker::spawn(Role::Base)?;
        match Worker::spawn(Role::User(uid)) {
            Ok(user) => Ok([base, user]),
            Err(e) => {
                base.kill(reap);
                Err(e)
            }
        }
    }

    fn put(&mut self, uid: u32, pair: [Worker; 2], reap: &mut Vec<Pid>) {
        self.idle.insert(uid, (pair, Instant::now()));
        while self.idle.len() > MAX_IDLE_UIDS {
            let oldest = self
                .idle
                .iter()
                .min_by_key(|(_, (_, t))| *t)
                .map(|(u, _)| *u);
            if let Some((pair, _)) = oldest.and_then(|u| self.idle.remove(&u)) {
                pair.into_iter().for_each(|w| w.kill(reap));
            }
        }
    }

    /// Ends the processes idle for longer than [`IDLE_LIMIT`] and the pairs
    /// of which one process has exited (a user may kill the resolver that
    /// runs as them; that one is reaped here, the other killed). The pids of
    /// killed processes go to `reap`.
    pub fn expire(&mut self, reap: &mut Vec<Pid>) {
        let now = Instant::now();
        let uids: Vec<u32> = self.idle.keys().copied().collect();
        for uid in uids {
            let (pair, since) = &self.idle[&uid];
            let exited: Vec<bool> = pair
                .iter()
                .map(|w| {
                    !matches!(
                        waitpid(w.pid, Some(WaitPidFlag::WNOHANG)),
                        Ok(WaitStatus::StillAlive)
                    )
                })
                .collect();
            if now.duration_since(*since) <= IDLE_LIMIT && !exited.contains(&true) {
                continue;
            }
            let (pair, _) = self.idle.remove(&uid).expect("listed above");
            for (w, gone) in pair.into_iter().zip(exited) {
                if !gone {
                    w.kill(reap);
                }
            }
        }
    }

    /// Ends every idle process.
    pub fn clear(&mut self, reap: &mut Vec<Pid>) {
        for (_, (pair, _)) in self.idle.drain() {
            pair.into_iter().for_each(|w| w.kill(reap));
        }
    }

    /// Whether `uid` has idle resolvers.
    pub fn has_uid(&self, uid: u32) -> bool {
        self.idle.contains_key(&uid)
    }

    /// Whether `pid` is one of the idle resolvers.
    pub fn holds(&self, pid: i32) -> bool {
        self.idle
            .values()
            .any(|(pair, _)| pair.iter().any(|w| w.pid.as_raw() == pid))
    }
}

/// Where one process's answer stands.
#[derive(Debug)]
enum State {
    Reading,
    Done,
    /// Unusable; `retry`: a fresh process may well succeed (this one died,
    /// was stale, or broke the protocol).
    Broken {
        why: String,
        retry: bool,
    },
}

#[derive(Debug)]
struct Part {
    worker: Worker,
    /// The answer so far: u64 length, then the records.
    out: Vec<u8>,
    state: State,
}

impl Part {
    /// Bytes of the answer still missing (after its length is known), or
    /// Err if that length is over [`MAX_OUTPUT_BYTES`].
    fn missing(&self) -> Result<usize, String> {
        let Some(head) = self.out.get(..8) else {
            return Ok(8 - self.out.len());
        };
        let len = u64::from_ne_bytes(head.try_into().expect("8 bytes"));
        if len > MAX_OUTPUT_BYTES as u64 {
            return Err("the lists produced more output than the daemon accepts".into());
        }
        Ok(8 + len as usize - self.out.len())
    }

    /// Reads what is available, never past the answer's end.
    fn pump(&mut self) {
        while matches!(self.state, State::Reading) {
            let need = match self.missing() {
                Ok(0) => {
                    self.state = State::Done;
                    return;
                }
                Ok(n) => n,
                Err(why) => {
                    self.state = State::Broken { why, retry: false };
                    return;
                }
            };
            let before = self.out.len();
            match (&self.worker.sock)
                .take(need as u64)
                .read_to_end(&mut self.out)
            {
                Ok(_) if self.out.len() - before < need => {
                    self.state = State::Broken {
                        why: "the list resolver exited without answering".into(),
                        retry: true,
                    };
                }
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    self.state = State::Broken {
                        why: format!("reading the list resolver: {e}"),
                        retry: true,
                    };
                }
            }
        }
    }

    #[cfg(test)]
    fn records(&self) -> &[u8] {
        self.out.get(8..).unwrap_or_default()
    }
}

/// One uid's resolution in flight: a request sent to its base-list and user
/// resolver processes, and their answers so far.
#[derive(Debug)]
pub struct Resolver {
    /// The uid whose lists it resolves.
    pub uid: u32,
    /// When both answers must be in.
    pub deadline: Instant,
    /// Whether this is already the second try (see [`Outcome::Retry`]).
    pub retried: bool,
    parts: [Part; 2],
}

/// The two answers of one resolution, as received (length, then records):
/// the base-list process's and the user process's. Kept as bytes so that the
/// daemon can tell an answer it applied before without parsing it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answers(pub [Vec<u8>; 2]);

impl Answers {
    /// Parses both answers into one resolution (see [`parse_output`]).
    pub fn parse(&self) -> Resolution {
        fn records(a: &[u8]) -> &[u8] {
            a.get(8..).unwrap_or_default()
        }
        parse_output(&[records(&self.0[0]), records(&self.0[1])])
    }
}

/// How a resolution ended.
#[derive(Debug)]
pub enum Outcome {
    /// Both answers, not parsed yet.
    Done(Answers),
    /// Anything else, with the reason to give the user.
    Failed(String),
    /// A process died or was stale, and this was the first try: start again
    /// with fresh processes.
    Retry(String),
}

impl Resolver {
    /// Opens the base list (as root, without blocking on a FIFO: a regular
    /// file of at most [`MAX_LIST_BYTES`]) and sends its descriptor to the
    /// uid's two resolver processes, started if none are idle. A process that
    /// cannot take the request (it died while idle) is replaced once.
    ///
    /// # Errors
    /// The reason to give the user: the base list cannot be opened, or no
    /// process could be started or reached.
    pub fn start(
        pool: &mut Pool,
        uid: u32,
        retried: bool,
        reap: &mut Vec<Pid>,
    ) -> Result<Resolver, String> {
        let base = open_list(Path::new(BASE_LIST))
            .map_err(|e| format!("cannot read the base list {BASE_LIST}: {e}"))?;
        // Idle processes may have died since their last request: one fresh
        // pair is tried after them.
        let mut tries = 2;
        let pair = loop {
            let pair = pool
                .take(uid, reap)
                .map_err(|e| format!("cannot start the list resolver: {e}"))?;
            match pair.iter().try_for_each(|w| w.send(base.as_ref())) {
                Ok(()) => break pair,
                Err(e) => {
                    pair.into_iter().for_each(|w| w.kill(reap));
                    tries -= 1;
                    if tries == 0 {
                        return Err(format!("cannot reach the list resolver: {e}"));
                    }
                }
            }
        };
        Ok(Resolver {
            uid,
            deadline: Instant::now() + DEADLINE,
            retried,
            parts: pair.map(|worker| Part {
                worker,
                out: Vec::new(),
                state: State::Reading,
            }),
        })
    }

    /// The sockets still to be read, to poll for input.
    pub fn fds(&self) -> impl Iterator<Item = BorrowedFd<'_>> {
        self.parts
            .iter()
            .filter(|p| matches!(p.state, State::Reading))
            .map(|p| p.worker.sock.as_fd())
    }

    /// Whether `pid` is one of its processes.
    pub fn holds(&self, pid: i32) -> bool {
        self.parts.iter().any(|p| p.worker.pid.as_raw() == pid)
    }

    /// Reads what is available; true once no answer is awaited any more
    /// (both in, or one broken).
    pub fn pump(&mut self) -> bool {
        for p in &mut self.parts {
            p.pump();
        }
        self.parts
            .iter()
            .all(|p| !matches!(p.state, State::Reading))
            || self
                .parts
                .iter()
                .any(|p| matches!(p.state, State::Broken { .. }))
    }

    /// Kills both processes (a resolution past its deadline, a daemon that
    /// stops); their pids go to `reap`.
    pub fn kill(self, reap: &mut Vec<Pid>) {
        self.parts.into_iter().for_each(|p| p.worker.kill(reap));
    }

    /// After [`Resolver::pump`] returned true: the findings, with the
    /// processes back in `pool`; or the failure, with them killed.
    pub fn finish(self, pool: &mut Pool, reap: &mut Vec<Pid>) -> Outcome {
        let broken = self.parts.iter().find_map(|p| match &p.state {
            State::Broken { why, retry } => Some((why.clone(), *retry)),
            _ => None,
        });
        if let Some((why, retry)) = broken {
            let retried = self.retried;
            self.kill(reap);
            return if retry && !retried {
                Outcome::Retry(why)
            } else {
                Outcome::Failed(why)
            };
        }
        let [base, user] = self.parts;
        pool.put(self.uid, [base.worker, user.worker], reap);
        Outcome::Done(Answers([base.out, user.out]))
    }
}

/// Reaps those of the ended resolvers `pids` that have exited, without
/// blocking; keeps the others. Only these pids are waited for, never "any
/// child", so a resolver still in use is not reaped behind its back.
pub fn reap(pids: &mut Vec<Pid>) {
    pids.retain(|&pid| {
        matches!(
            waitpid(pid, Some(WaitPidFlag::WNOHANG)),
            Ok(WaitStatus::StillAlive)
        )
    });
}

/// Entry point of a resolver process (`agent-sandbox-exec-resolver base` or
/// `agent-sandbox-exec-resolver user UID`), started by the daemon as root
/// with its request socket as stdin. Serves requests until the socket
/// closes. Exit status: 0 when the daemon closed the socket, 64 for a bad
/// command line or a start by anyone but root, 71 when the socket broke,
/// 75 when stale (see [`EXIT_STALE`]).
pub fn worker_main(args: &[OsString]) -> u8 {
    let role = match args {
        [b] if b == "base" => Some(Role::Base),
        [u, uid] if u == "user" => uid.to_str().and_then(|s| s.parse().ok()).map(Role::User),
        _ => None,
    };
    let (Some(role), true) = (role, nix::unistd::getuid().is_root()) else {
        eprintln!("{WORKER_NAME}: internal to agent-sandbox-execd, which starts it as root");
        return 64;
    };
    // SAFETY: fd 0 is the socket the daemon passed (checked below).
    let sock = UnixStream::from(unsafe { OwnedFd::from_raw_fd(0) });
    if sock.local_addr().is_err() {
        eprintln!("{WORKER_NAME}: standard input is not the daemon's socket");
        return 64;
    }
    let daemon = nix::unistd::getppid();
    // SAFETY: a plain prctl call.
    unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) };
    if !die_with(daemon) {
        return 0;
    }
    serve(role, &sock, daemon) as u8
}

/// Sets SIGKILL as this process's parent-death signal (again: a change of
/// credentials clears it, prctl(2)) and checks the parent is still `daemon`
/// (it may have died before). False if it is not.
fn die_with(daemon: Pid) -> bool {
    // SAFETY: a plain prctl call.
    unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0) };
    nix::unistd::getppid() == daemon
}

/// The resource limits of this process, to notice a change made from outside
/// (a process of the same uid may lower them with prlimit(2)).
fn limits() -> Vec<(libc::rlim_t, libc::rlim_t)> {
    // RLIM_NLIMITS: 16 resources since Linux 2.6.25
    // (include/uapi/asm-generic/resource.h).
    (0..16)
        .map(|r| {
            let mut l = libc::rlimit {
                rlim_cur: 0,
                rlim_max: 0,
            };
            // SAFETY: getrlimit writes into the local struct.
            unsafe { libc::getrlimit(r as _, &mut l) };
            (l.rlim_cur, l.rlim_max)
        })
        .collect()
}

/// Whether this process still has the groups a fresh resolver for `user`
/// would get.
fn groups_current(user: &User) -> bool {
    let Ok(name) = std::ffi::CString::new(user.name.as_bytes()) else {
        return false;
    };
    let want = nix::unistd::getgrouplist(&name, user.gid);
    let have = nix::unistd::getgroups();
    match (want, have) {
        (Ok(mut w), Ok(mut h)) => {
            w.sort_unstable_by_key(|g| g.as_raw());
            w.dedup();
            h.sort_unstable_by_key(|g| g.as_raw());
            h.dedup();
            w == h && nix::unistd::getgid() == user.gid
        }
        _ => false,
    }
}

fn serve(role: Role, sock: &UnixStream, daemon: Pid) -> i32 {
    let setup: Result<Option<User>, String> = match role {
        Role::Base => Ok(None),
        Role::User(uid) => User::from_uid(Uid::from_raw(uid))
            .map_err(|e| format!("cannot look up uid {uid}: {e}"))
            .and_then(|u| {
                u.ok_or_else(|| {
                    format!("uid {uid} has no passwd entry, so its home list cannot be found")
                })
            })
            .and_then(|u| drop_privileges(&u).map(|()| Some(u))),
    };
    if !die_with(daemon) {
        return 0;
    }
    let spawned_limits = limits();
    let mut served = 0u64;
    // Kept across requests: the mount table is read again only after a
    // mount change (see KeyContext::renew), and the watches of the last
    // resolution tell whether its answer still holds.
    let mut keys: Option<KeyContext> = None;
    let mut last: Option<Answer> = None;
    loop {
        if let Some(k) = keys.as_mut() {
            // The first event settles it (the next resolution is a full
            // one): stop watching then, rather than have every change in
            // the watched directories queue an event until the next launch.
            if let Err(e) = k.stop_watching_on_change(sock.as_fd()) {
                eprintln!("{WORKER_NAME}: {e}");
                return 71;
            }
        }
        let base = match receive(sock) {
            Ok(Some(b)) => b,
            Ok(None) => return 0,
            Err(e) => {
                eprintln!("{WORKER_NAME}: {e}");
                return 71;
            }
        };
        // Stale: a fresh process would have other groups (or home) or
        // limits. Never on the first request, which a fresh process serves.
        let user = match (&setup, role) {
            (Ok(Some(_)), Role::User(uid)) if served > 0 => {
                match User::from_uid(Uid::from_raw(uid)) {
                    Ok(Some(now)) if groups_current(&now) => Some(now),
                    _ => return EXIT_STALE,
                }
            }
            (Ok(Some(u)), _) => Some(u.clone()),
            _ => None,
        };
        if served > 0 && limits() != spawned_limits {
            return EXIT_STALE;
        }
        served += 1;
        // With no context yet, no path was resolved: the answer rests on
        // the lists alone.
        let unchanged = match keys.as_mut().map(KeyContext::renew) {
            None => true,
            Some(Ok(unchanged)) => unchanged,
            Some(Err(_)) => {
                keys = None; // made anew on first use, which reports the error
                false
            }
        };
        let inputs = match (&setup, base) {
            (Err(e), _) => Err(e.clone()),
            (Ok(_), Err(e)) => Err(e),
            (Ok(_), Ok(base)) => Inputs::read(user.as_ref(), base.as_ref()),
        };
        let hit = match (&inputs, &last) {
            (
                Ok(now),
                Some(Answer {
                    inputs: Some(then), ..
                }),
            ) => unchanged && now == then,
            _ => false,
        };
        if !hit {
            if let Some(k) = keys.as_mut() {
                k.watch_anew();
            }
            // Its length (filled in below), then the records.
            let mut records = vec![0u8; 8];
            let mut sink = Sink { out: &mut records };
            let result = inputs.and_then(|inputs| {
                match &user {
                    None => resolve_base(inputs.base.as_deref(), &mut keys, &mut sink),
                    Some(u) => resolve_user(u, &inputs, &mut keys, &mut sink),
                }
                .map(|()| inputs)
            });
            if let Some(k) = keys.as_mut() {
                let marks = k.take_marks();
                if result.is_ok() {
                    let mut sink = Sink { out: &mut records };
                    for m in marks {
                        sink.mark(m);
                    }
                }
                k.forget_dirs(); // hold no mount busy while idle
            }
            let inputs = match result {
                // Reusable only if every directory read is watched and
                // none changed while it was read.
                Ok(inputs) => keys
                    .as_ref()
                    .is_none_or(KeyContext::settled)
                    .then_some(inputs),
                Err(fatal) => {
                    Sink { out: &mut records }.record(b'F', &fatal);
                    None
                }
            };
            if inputs.is_none()
                && let Some(k) = keys.as_mut()
            {
                k.drop_watches();
            }
            let len = (records.len() - 8) as u64;
            records[..8].copy_from_slice(&len.to_ne_bytes());
            last = Some(Answer { inputs, records });
        }
        let answer = last.as_ref().map(|a| &a.records[..]).unwrap_or_default();
        if (&*sock).write_all(answer).is_err() {
            return 71;
        }
        if setup.is_err() {
            // Nothing this process can fix; the next request gets a new one.
            return 0;
        }
    }
}

/// Receives one request: Ok(None) when the daemon closed the socket;
/// Ok(Ok(file)) with the base list's descriptor, if any; Ok(Err(why)) when
/// the request says a descriptor was attached but none arrived (fatal: the
/// base list would otherwise be skipped).
#[allow(clippy::type_complexity)]
fn receive(sock: &UnixStream) -> io::Result<Option<Result<Option<fs::File>, String>>> {
    let mut tag = [0u8; 1];
    let mut cmsg = nix::cmsg_space!([std::os::fd::RawFd; 1]);
    loop {
        let mut iov = [io::IoSliceMut::new(&mut tag)];
        let msg = match recvmsg::<()>(
            sock.as_raw_fd(),
            &mut iov,
            Some(&mut cmsg),
            MsgFlags::MSG_CMSG_CLOEXEC,
        ) {
            Ok(m) => m,
            Err(nix::errno::Errno::EINTR) => continue,
            Err(e) => return Err(e.into()),
        };
        if msg.bytes == 0 {
            return Ok(None);
        }
        let mut files: Vec<fs::File> = Vec::new();
        let truncated = match msg.cmsgs() {
            Ok(cmsgs) => {
                for c in cmsgs {
                    if let ControlMessageOwned::ScmRights(fds) = c {
                        // SAFETY: descriptors just received are ours.
                        files.extend(
                            fds.into_iter()
                                .map(|fd| fs::File::from(unsafe { OwnedFd::from_raw_fd(fd) })),
                        );
                    }
                }
                false
            }
            Err(_) => true,
        };
        return Ok(Some(match (tag[0], files.len(), truncated) {
            (b'N', 0, false) => Ok(None),
            (b'B', 1, false) => Ok(files.pop()),
            (b'B', _, _) => {
                Err("the base list's descriptor did not arrive (too many open files?)".to_string())
            }
            (t, ..) => Err(format!("bad request {:?} from the daemon", char::from(t))),
        }));
    }
}

/// Resolver records, appended to a buffer (see the wire format above).
struct Sink<'a> {
    out: &'a mut Vec<u8>,
}

impl Sink<'_> {
    fn record(&mut self, tag: u8, text: &str) {
        let line = crate::request::one_line(text);
        let len = u32::try_from(line.len()).unwrap_or(u32::MAX);
        self.out.push(tag);
        self.out.extend_from_slice(&len.to_ne_bytes());
        self.out.extend_from_slice(&line.as_bytes()[..len as usize]);
    }
    fn key_bytes(k: FileKey, tag: u8) -> [u8; 1 + KEY_BYTES] {
        let mut b = [tag; 1 + KEY_BYTES];
        b[1..9].copy_from_slice(&k.ino.to_ne_bytes());
        b[9..17].copy_from_slice(&k.subvol.to_ne_bytes());
        b[17..21].copy_from_slice(&k.dev.to_ne_bytes());
        b
    }
}

impl Sink<'_> {
    /// A `P`, `D` or `C` record for a key of kind [`KIND_PATH`],
    /// [`KIND_LISTED_DIR`] or [`KIND_FOLDING_DIR`].
    fn mark(&mut self, k: FileKey) {
        let tag = match k.kind {
            KIND_LISTED_DIR => b'D',
            KIND_FOLDING_DIR => b'C',
            _ => b'P',
        };
        self.out.extend_from_slice(&Self::key_bytes(k, tag));
    }
}

impl ListingSink for Sink<'_> {
    /// A file key; one of a directory-entry or exception kind as an `M` record.
    fn file(&mut self, k: FileKey) {
        if k.kind == KIND_OPEN {
            self.out.extend_from_slice(&Self::key_bytes(k, b'K'));
        } else {
            self.out.push(b'M');
            self.out
                .extend_from_slice(&Self::key_bytes(k, k.kind as u8));
        }
    }
    /// A name of 1 to [`NAME_MAX`] bytes (what [`KeyContext`] gives); with a
    /// directory key of a mark kind, an `n` record.
    fn name(&mut self, dir: FileKey, name: &[u8]) {
        let len = name.len().min(NAME_MAX);
        if dir.kind == KIND_OPEN {
            self.out.extend_from_slice(&Self::key_bytes(dir, b'N'));
        } else {
            self.out.push(b'n');
            self.out
                .extend_from_slice(&Self::key_bytes(dir, dir.kind as u8));
        }
        self.out.push(len as u8);
        self.out.extend_from_slice(&name[..len]);
    }
}

/// Which list an entry came from, for messages and the symlink rule.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Source {
    Base,
    Home,
}

/// What a resolution reads besides the filesystem: the lists' bytes and,
/// for a user process, the home directory. Two resolutions of equal inputs
/// find the same keys if nothing they looked at changed ([`crate::watch`]).
#[derive(PartialEq, Eq)]
struct Inputs {
    /// The base list; None when there is none.
    base: Option<Vec<u8>>,
    /// The user's home directory (a user process's only).
    home: Vec<u8>,
    /// The home list; None when there is none (or for the base process).
    own: Option<Vec<u8>>,
}

impl Inputs {
    /// Reads the base list from the daemon's descriptor and, for `user`, the
    /// home list. Errors are fatal to the launch: a list that cannot be read
    /// is not skipped.
    fn read(user: Option<&User>, base: Option<&fs::File>) -> Result<Inputs, String> {
        let base = read_base(base)?;
        let Some(user) = user else {
            return Ok(Inputs {
                base,
                home: Vec::new(),
                own: None,
            });
        };
        let home = user.dir.as_os_str().as_bytes().to_vec();
        let list_path = home_list(&home);
        let own = open_list(&list_path)
            .and_then(|f| f.as_ref().map(read_all).transpose())
            .map_err(|e| {
                format!(
                    "cannot read your list {}: {e} (fix or remove it)",
                    list_path.display()
                )
            })?;
        Ok(Inputs { base, home, own })
    }
}

/// A resolver's last answer, as sent (u64 length, records), with its inputs
/// when it may be sent again: every directory it read was watched and none
/// changed while it was read.
struct Answer {
    inputs: Option<Inputs>,
    records: Vec<u8>,
}

/// The home list of a user whose home is `home`.
fn home_list(home: &[u8]) -> PathBuf {
    PathBuf::from(OsStr::from_bytes(&denylist::join_home(
        home,
        HOME_LIST.as_bytes(),
    )))
}

/// Resolves the base list's absolute entries (as root, following a
/// symlink in the last component), with its warnings for the log.
fn resolve_base(
    base: Option<&[u8]>,
    keys: &mut Option<KeyContext>,
    sink: &mut Sink<'_>,
) -> Result<(), String> {
    let Some(bytes) = base else {
        sink.record(
            b'A',
            &format!("{BASE_LIST}: missing; only users' lists apply"),
        );
        return Ok(());
    };
    let base = denylist::parse(bytes);
    for w in &base.warnings {
        sink.record(b'A', &format!("{BASE_LIST}:{}: {}", w.line, w.kind));
    }
    for e in base.entries.iter().filter(|e| e.anchor == Anchor::Root) {
        emit_base(sink, e.line, e.path, Shape::of(e), keys)?;
    }
    Ok(())
}

/// Resolves a base-list entry: the administrator's, so a symlink in its last
/// component is followed.
fn emit_base(
    sink: &mut Sink<'_>,
    line: usize,
    path: &[u8],
    shape: Shape,
    keys: &mut Option<KeyContext>,
) -> Result<(), String> {
    let path = Path::new(OsStr::from_bytes(path));
    let list = Path::new(BASE_LIST);
    emit(
        sink,
        Source::Base,
        list,
        line,
        path,
        shape,
        LastComponent::Follow,
        context(keys)?,
    )
}

/// What a list line asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Shape {
    /// `PATH`: one file.
    File,
    /// `DIR/`: every file below a directory.
    Dir,
    /// `!PATH`: an exception for one file.
    Exception,
    /// `!DIR/`: an exception for every file below a directory.
    DirException,
}

impl Shape {
    fn of(e: &denylist::Entry<'_>) -> Shape {
        match (e.dir, e.exception) {
            (false, false) => Shape::File,
            (true, false) => Shape::Dir,
            (false, true) => Shape::Exception,
            (true, true) => Shape::DirException,
        }
    }
}

/// Passes a file's findings on with a mark kind: the file key and the
/// names' directory keys get `kind` (an exception `!PATH`).
struct KindSink<'s, 'a> {
    inner: &'s mut Sink<'a>,
    kind: u32,
}

impl ListingSink for KindSink<'_, '_> {
    fn file(&mut self, k: FileKey) {
        self.inner.file(k.with_kind(self.kind));
    }
    fn name(&mut self, dir: FileKey, name: &[u8]) {
        self.inner.name(dir.with_kind(self.kind), name);
    }
}

/// The base list's bytes; None when there is none.
fn read_base(base: Option<&fs::File>) -> Result<Option<Vec<u8>>, String> {
    base.map(|f| read_all(f).map_err(|e| format!("cannot read the base list: {e}")))
        .transpose()
}

/// The key context, made on first use (reading the mount table is the
/// largest fixed cost of a resolution, and a list may have no entry of a
/// kind).
fn context(keys: &mut Option<KeyContext>) -> Result<&mut KeyContext, String> {
    if keys.is_none() {
        *keys =
            Some(KeyContext::new().map_err(|e| format!("cannot read /proc/self/mountinfo: {e}"))?);
    }
    Ok(keys.as_mut().expect("just set"))
}

/// Resolves, as `user` (this process already is), the base list's `~/`
/// entries and the home list, with the warnings about the home list for the
/// user.
fn resolve_user(
    user: &User,
    inputs: &Inputs,
    keys: &mut Option<KeyContext>,
    sink: &mut Sink<'_>,
) -> Result<(), String> {
    let home = user.dir.as_os_str().as_bytes();
    let mut joined = Vec::new();
    // The base list's `~/` entries are the administrator's: resolved as the
    // user (root may not reach a home), but following a symlink in the last
    // component, so that an agent replacing the file by a symlink to a renamed
    // copy does not take it off the list. Its warnings are the base-list
    // process's to report.
    if let Some(bytes) = &inputs.base {
        let base = denylist::parse(bytes);
        for e in base.entries.iter().filter(|e| e.anchor == Anchor::Home) {
            denylist::join_home_into(&mut joined, home, e.path);
            emit_base(sink, e.line, &joined, Shape::of(e), keys)?;
        }
    }
    let Some(bytes) = &inputs.own else {
        return Ok(());
    };
    let list_path = home_list(home);
    let own = denylist::parse(bytes);
    for w in &own.warnings {
        sink.record(
            b'U',
            &format!("{}:{}: {}", list_path.display(), w.line, w.kind),
        );
    }
    for e in &own.entries {
        let path = match e.anchor {
            Anchor::Root => e.path,
            Anchor::Home => {
                denylist::join_home_into(&mut joined, home, e.path);
                &joined
            }
        };
        if e.dir && !e.exception && denylist::covers_home(path, home) {
            sink.record(
                b'U',
                &format!(
                    "{}:{}: {}",
                    list_path.display(),
                    e.line,
                    denylist::LineProblem::TooBroad("the whole home directory")
                ),
            );
            continue;
        }
        let path = Path::new(OsStr::from_bytes(path));
        emit(
            sink,
            Source::Home,
            &list_path,
            e.line,
            path,
            Shape::of(e),
            LastComponent::NoFollow,
            context(keys)?,
        )?;
    }
    Ok(())
}

/// Resolves one entry into `sink`: its records, or a warning and none of
/// them (a record written before a problem showed is taken back).
#[allow(clippy::too_many_arguments)]
fn emit(
    sink: &mut Sink<'_>,
    source: Source,
    list: &Path,
    line: usize,
    path: &Path,
    shape: Shape,
    last: LastComponent,
    keys: &mut KeyContext,
) -> Result<(), String> {
    let tag = if source == Source::Home { b'U' } else { b'A' };
    // The user's list names paths by line number only: it is read outside
    // the sandbox, and were it a link to a listed file, an echoed line would
    // be that file's bytes. The base list is the administrator's.
    // Formatted only for a message: most entries have none.
    let at = || match source {
        Source::Home => format!("{}:{line}", list.display()),
        Source::Base => format!("{}:{line}: {}", list.display(), path.display()),
    };
    let mark = sink.out.len();
    let (dir_kind, exc_kind) = match source {
        Source::Base => (KIND_DIR_BASE, KIND_EXC_BASE),
        Source::Home => (KIND_DIR_USER, KIND_EXC_USER),
    };
    let found = match shape {
        Shape::File => keys.resolve(path, last, sink),
        Shape::Exception => keys.resolve(
            path,
            last,
            &mut KindSink {
                inner: sink,
                kind: exc_kind,
            },
        ),
        Shape::Dir | Shape::DirException => {
            let (kind, budget) = if shape == Shape::Dir {
                (dir_kind, Some(MAX_SCAN_KEYS))
            } else {
                (exc_kind, None)
            };
            match keys.resolve_dir(path, kind, budget, sink) {
                Ok(scan) => Ok((scan.unmarked > 0).then(|| {
                    format!(
                        "{} files below it with other names, or directories deeper than {} \
                         levels, were not marked by inode (past {} per launch): they are \
                         denied by path; a name made for one outside the directory before \
                         launch is not",
                        scan.unmarked,
                        crate::keys::MAX_SCAN_DEPTH,
                        MAX_SCAN_KEYS
                    )
                })),
                Err(KeyError::NotRegular(kind)) => {
                    sink.out.truncate(mark);
                    sink.record(
                        tag,
                        &format!(
                            "{}: ends in / but is {kind}, not a directory; skipped",
                            at()
                        ),
                    );
                    return Ok(());
                }
                Err(e) => Err(e),
            }
        }
    };
    if found.is_err() {
        sink.out.truncate(mark);
    }
    let problem = match found {
        Ok(unwatched) => {
            if let Some(why) = unwatched {
                sink.record(tag, &format!("{}: {why}", at()));
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
                "{}: cannot check the path: {e}; fix the path's permissions or the list",
                at()
            ));
        }
        Err(KeyError::NotRegular(crate::keys::FileKind::Directory)) => {
            "the path is a directory, not a regular file; add a trailing / to deny the whole \
             directory"
                .to_string()
        }
        Err(e) => format!("the path {e}"),
    };
    sink.record(tag, &format!("{}: {problem}; skipped", at()));
    Ok(())
}

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
fn read_all(file: &fs::File) -> io::Result<Vec<u8>> {
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

/// Becomes `user` for good: supplementary groups, then gid, then uid (real,
/// effective and saved), and checks root cannot be regained. The process is
/// then not dumpable (the kernel makes it so on the uid change unless
/// `fs.suid_dumpable` is 1; set here whatever it is): the user it now runs as
/// cannot ptrace it or open its /proc files.
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
    // SAFETY: a plain prctl call.
    if unsafe { libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0) } != 0 {
        return Err(format!("PR_SET_DUMPABLE: {}", io::Error::last_os_error()));
    }
    Ok(())
}

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
}
