//! The daemon's side: the idle resolver processes per uid ([`Pool`]) and one
//! resolution in flight ([`Resolver`]), which ends in an [`Answer`]; its
//! deadline and retry are the launch machine's ([`crate::policy::launch`]).

use crate::os::child;
use crate::policy::launch::{Answer, Answers};
use crate::proto::resolver::{MAX_OUTPUT_BYTES, ResolveError, Role, WORKER_NAME};
use crate::resolve::list_file::open_list;
use nix::sys::signal::{Signal, kill};
use nix::sys::socket::{ControlMessage, MsgFlags, sendmsg};
use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
use nix::unistd::Pid;
use std::collections::HashMap;
use std::fs;
use std::io::{self, Read};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// One long-lived resolver process, from the daemon's side: its pid and our
/// end of the socket pair that is its standard input. A request is one byte
/// (`B`: the base list's descriptor is attached with SCM_RIGHTS; `N`: there
/// is no base list); the answer is a u64 length and that many bytes of
/// records (the wire format above).
#[derive(Debug)]
pub(crate) struct Worker {
    pub(crate) pid: Pid,
    pub(crate) sock: UnixStream,
}

impl Worker {
    /// Starts `/proc/self/exe` as [`WORKER_NAME`] with an empty environment,
    /// `/` as working directory, the socket as stdin, stdout on /dev/null and
    /// the daemon's stderr (the journal). Exec'd rather than forked alone, so
    /// that it holds none of the daemon's memory or descriptors.
    pub(crate) fn spawn(role: Role) -> io::Result<Worker> {
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
        // Dies with the daemon; no descriptor but stdio crosses exec.
        child::die_with_parent(&mut cmd);
        let child = cmd.spawn()?;
        ours.set_nonblocking(true)?;
        Ok(Worker {
            pid: Pid::from_raw(child.id() as i32),
            sock: ours,
        })
    }

    /// Sends one request, with the base list's descriptor if there is one.
    pub(crate) fn send(&self, base: Option<&fs::File>) -> io::Result<()> {
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
    pub(crate) fn kill(self, reap: &mut Vec<Pid>) {
        let _ = kill(self.pid, Signal::SIGKILL);
        reap.push(self.pid);
    }
}

/// The idle resolver processes, a base-list one and a user one per uid.
/// Kept between launches so that a launch costs two socket round trips
/// instead of a fork, its copy-on-write faults and an exit.
#[derive(Debug, Default)]
pub struct Pool {
    pub(crate) idle: HashMap<u32, ([Worker; 2], Instant)>,
}

impl Pool {
    /// Idle processes of `uid`, or new ones.
    pub(crate) fn take(&mut self, uid: u32, reap: &mut Vec<Pid>) -> io::Result<[Worker; 2]> {
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

    pub(crate) fn put(&mut self, uid: u32, pair: [Worker; 2], reap: &mut Vec<Pid>) {
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
pub(crate) enum State {
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
pub(crate) struct Part {
    pub(crate) worker: Worker,
    /// The answer so far: u64 length, then the records.
    pub(crate) out: Vec<u8>,
    pub(crate) state: State,
}

impl Part {
    /// Bytes of the answer still missing (after its length is known), or
    /// Err if that length is over [`MAX_OUTPUT_BYTES`].
    pub(crate) fn missing(&self) -> Result<usize, ResolveError> {
        let Some(head) = self.out.get(..8) else {
            return Ok(8 - self.out.len());
        };
        let len = u64::from_ne_bytes(head.try_into().expect("8 bytes"));
        if len > MAX_OUTPUT_BYTES as u64 {
            return Err(ResolveError::OutputTooLarge);
        }
        Ok(8 + len as usize - self.out.len())
    }

    /// Reads what is available, never past the answer's end.
    pub(crate) fn pump(&mut self) {
        while matches!(self.state, State::Reading) {
            let need = match self.missing() {
                Ok(0) => {
                    self.state = State::Done;
                    return;
                }
                Ok(n) => n,
                Err(e) => {
                    self.state = State::Broken {
                        why: e.to_string(),
                        retry: false,
                    };
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
    pub(crate) fn records(&self) -> &[u8] {
        self.out.get(8..).unwrap_or_default()
    }
}

/// One uid's resolution in flight: a request sent to its base-list and user
/// resolver processes, and their answers so far.
#[derive(Debug)]
pub struct Resolver {
    /// The uid whose lists it resolves.
    pub uid: u32,
    pub(crate) parts: [Part; 2],
}

impl Resolver {
    /// Opens the base list `base_list` (as root, without blocking on a FIFO: a regular
    /// file of at most [`MAX_LIST_BYTES`]) and sends its descriptor to the
    /// uid's two resolver processes, started if none are idle. A process that
    /// cannot take the request (it died while idle) is replaced once.
    ///
    /// # Errors
    /// The reason to give the user: the base list cannot be opened, or no
    /// process could be started or reached.
    pub fn start(
        pool: &mut Pool,
        base_list: &Path,
        uid: u32,
        reap: &mut Vec<Pid>,
    ) -> Result<Resolver, ResolveError> {
        let base = open_list(base_list).map_err(|e| ResolveError::BaseList {
            path: base_list.display().to_string(),
            why: e.to_string(),
        })?;
        // Idle processes may have died since their last request: one fresh
        // pair is tried after them.
        let mut tries = 2;
        let pair = loop {
            let pair = pool
                .take(uid, reap)
                .map_err(|e| ResolveError::Start(e.to_string()))?;
            match pair.iter().try_for_each(|w| w.send(base.as_ref())) {
                Ok(()) => break pair,
                Err(e) => {
                    pair.into_iter().for_each(|w| w.kill(reap));
                    tries -= 1;
                    if tries == 0 {
                        return Err(ResolveError::Reach(e.to_string()));
                    }
                }
            }
        };
        Ok(Resolver {
            uid,
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

    /// After [`Resolver::pump`] returned true: the answers, with the
    /// processes back in `pool`; or how one broke, with both killed (whether
    /// to try again is the launch machine's decision).
    pub fn finish(self, pool: &mut Pool, reap: &mut Vec<Pid>) -> Answer {
        let broken = self.parts.iter().find_map(|p| match &p.state {
            State::Broken { why, retry } => Some((why.clone(), *retry)),
            _ => None,
        });
        if let Some((why, retryable)) = broken {
            self.kill(reap);
            return Answer::Broken { why, retryable };
        }
        let [base, user] = self.parts;
        pool.put(self.uid, [base.worker, user.worker], reap);
        Answer::Done(Answers([base.out, user.out]))
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

/// How long a resolution may take before its resolver is killed and its
/// launches refused (the launch machine's deadline, which it keeps).
pub const DEADLINE: Duration = Duration::from_secs(5);

/// How long a uid's resolver processes stay alive without a request.
pub const IDLE_LIMIT: Duration = Duration::from_secs(60);

/// Most uids whose idle resolvers are kept; past it, the longest idle go.
pub const MAX_IDLE_UIDS: usize = 32;

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

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
}
