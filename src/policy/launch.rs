//! The launch machine: the order of a launch, from the request admitted to
//! the last reply, without I/O. Per uid it holds the launches waiting, the
//! one resolution in flight and what the last successful apply was made of;
//! it takes [`Event`]s in (a request admitted, a turn of the daemon's loop,
//! a resolver's answer or death, time passing, a reload, and the results of
//! the commands it gave) and gives [`Command`]s out (start or kill a
//! resolver, look at the launchers and the sandbox, apply keys with a mode,
//! move a launcher, reply, log). Time is the caller's: [`Millis`] passed
//! with each event (the daemon's monotonic clock; a fake one in tests).
//!
//! The decisions themselves are [`crate::policy::rules`]'s; this module
//! says when each is asked and what follows from its answer. The daemon
//! (`src/daemon/mod.rs`) executes the commands: it does the I/O and answers
//! each command marked *→ event* with that event, which it hands back at
//! once. The commands that event leads to run before the rest of the plan
//! ([`Plan`]), so a launch reads top to bottom as the command sequence.
//!
//! The stages of one uid's resolution: `starting`
//! (resolver asked for) → `resolving` (until its answer or deadline) →
//! `observing` (its launchers' cgroups, the sandbox's id and version) →
//! `ensuring` (the sandbox cgroup) → `counting` (an add-only apply's union)
//! → `applying` (the maps) → `sockets` → `checking` (enforcement on, what
//! the sandbox holds) → for each launcher `inspecting` → `moving` (→
//! `rechecking` if it died during the move) → reply; then idle. A relaunch
//! whose answers and sandbox are unchanged goes from `observing` straight
//! to `sockets`; any refusal ends the resolution with a reply to each of
//! its launches. Every launch admitted gets exactly one [`Command::Reply`].

use std::collections::{BTreeMap, VecDeque};
use std::rc::Rc;

use crate::lists::entries::{DenySet, FileKey, KIND_PAT_SHAPE, ListEntry};
use crate::os::cgroup::sandbox_path_for;
use crate::policy::rules::{self, AfterBreak, ApplyMode, LastApply, MoveRefusal, Requester};
use crate::proto::request::{AllowedPort, AllowedSocket, Reply};
use crate::proto::resolver::{MAX_KEYS_PER_UID, Resolution, parse_output};

/// A time in milliseconds on the caller's monotonic clock (the daemon's:
/// since it started). Only differences count.
pub type Millis = u64;

/// A launch's number, given by the daemon when it admits the request;
/// unique while the daemon runs.
pub type LaunchId = u64;

/// The note of a launch whose lists deny nothing.
pub const NOTHING_DENIED: &str = "your lists deny nothing: this sandbox denies no file \
    (agent-sandbox-exec --check shows what each line does)";

/// Why launches are refused once the program links were unpinned
/// (`agent-sandbox-execd --disable` under a running daemon).
pub const ENFORCEMENT_OFF: &str = "enforcement was turned off (the program links were unpinned); \
    restart agent-sandbox-execd to turn it back on";

/// The two answers of one resolution, as received (a u64 length, then the
/// records): the base-list process's and the user process's. Kept as bytes
/// so that an answer applied before is told without parsing it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answers(pub [Vec<u8>; 2]);

impl Answers {
    /// Parses both answers into one resolution ([`parse_output`]); an
    /// answer shorter than its length prefix holds no records.
    pub fn parse(&self) -> Resolution {
        fn records(a: &[u8]) -> &[u8] {
            a.get(8..).unwrap_or_default()
        }
        parse_output(&[records(&self.0[0]), records(&self.0[1])])
    }
}

/// The machine's bounds, fixed when it is made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// How long a resolution may take, in milliseconds, before its
    /// resolver is killed and its launches refused.
    pub deadline: Millis,
    /// Resolutions in flight at once, at most (one per uid).
    pub max_resolving: usize,
}

/// A request the daemon authenticated (its uid from `SO_PEERCRED`, its
/// process pinned by a pidfd that the daemon keeps under `id`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Launch {
    /// The daemon's number for it.
    pub id: LaunchId,
    /// The requesting uid.
    pub uid: u32,
    /// The launcher's pid.
    pub pid: i32,
    /// The sockets its `socket` list lines allow (applied only from outside).
    pub sockets: Vec<AllowedSocket>,
    /// The loopback ports its `socket tcp:PORT`/`udp:PORT` lines allow
    /// (applied only from outside).
    pub ports: Vec<AllowedPort>,
}

/// How a resolution ended, as the resolver pool saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    /// Both answers, not parsed yet.
    Done(Answers),
    /// A process broke while it owed an answer (its processes are killed):
    /// `why` for the user; `retryable` if it died or was stale rather than
    /// answering something wrong ([`rules::after_break`]).
    Broken {
        /// The reason, for the log and the refusal.
        why: String,
        /// Whether fresh processes may well succeed.
        retryable: bool,
    },
}

/// What the daemon found about a launcher just before its move
/// ([`Command::Inspect`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Inspection {
    /// It holds a descriptor of a file the sandbox denies: the refusal
    /// ([`rules::denied_descriptor`]).
    Holds(String),
    /// Its uids or start time could not be read (`process PID: ERROR`).
    Unreadable(String),
    /// Its state: real, effective, saved and filesystem uid, its start time
    /// (clock ticks since boot, `/proc/PID/stat`), and whether its pidfd
    /// reported it alive after those reads.
    Seen {
        /// Real, effective, saved, filesystem uid.
        uids: [u32; 4],
        /// Its start time.
        start: u64,
        /// Alive after the reads.
        alive: bool,
    },
}

/// What an apply did ([`Command::Apply`]), as the maps report it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ApplyReport {
    /// Keys written.
    pub added: usize,
    /// Keys removed (exact) or kept though unlisted (add-only).
    pub removed: usize,
    /// Of those, listed entries (for the notice).
    pub removed_entries: usize,
    /// Exceptions written (a launch from outside re-allows files).
    pub exceptions_added: usize,
    /// New exceptions left out (from inside, by the strictness rule).
    pub exceptions_held_back: usize,
    /// Only when the apply asked to recall and removed no entry: the note
    /// from the uid's record of what its sandboxes denied until now, if
    /// that record says something is gone or cannot be used.
    pub recorded: Option<String>,
    /// Keys the sandbox holds beyond the applied ones, after the apply.
    pub unlisted: usize,
    /// Of those, listed entries.
    pub unlisted_entries: usize,
    /// The sandbox's version after the apply (`None`: not known).
    pub version: Option<u64>,
}

/// The level of a log line ([`Command::Log`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    /// `log::error!`.
    Error,
    /// `log::warn!`.
    Warn,
    /// `log::info!`.
    Info,
}

/// What happens to the machine: the daemon's own events, and the results
/// of the commands marked *→ event*. A result that does not fit its uid's
/// stage is logged as a bug and ignored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// A request passed authentication: it waits for its uid's next
    /// resolution (one already in flight serves only the launches it
    /// started with).
    Admitted(Launch),
    /// Re-apply these uids' sandboxes without a launch (start-up, SIGHUP),
    /// in this order; a uid already waiting for a re-apply keeps its place.
    Reload {
        /// The uids with a sandbox cgroup.
        uids: Vec<u32>,
    },
    /// A turn of the daemon's loop: resolutions start for the uids with
    /// launches waiting (lowest uid first), then for the re-applies, one
    /// uid at a time, up to [`Limits::max_resolving`].
    Dispatch,
    /// Time passed: resolutions past their deadline fail (their resolvers
    /// killed, their launches refused).
    Tick,
    /// [`Command::Start`]'s result: the resolver processes have the
    /// request, or why they could not be started or reached.
    Started {
        /// The uid.
        uid: u32,
        /// `Err`: the reason to give the user.
        result: Result<(), String>,
    },
    /// The uid's resolution ended (only while it is resolving).
    Answered {
        /// The uid.
        uid: u32,
        /// Its answers, or how it broke.
        answer: Answer,
    },
    /// [`Command::Observe`]'s result.
    Observed {
        /// The uid.
        uid: u32,
        /// Each launcher of the batch, in order: its cgroup then, and
        /// whether it was alive after that read.
        requesters: Vec<Requester>,
        /// The sandbox cgroup's id now (`None`: it does not exist).
        sandbox: Option<u64>,
        /// Whether the sandbox is as the last apply left it (asked only
        /// with a `since`): `false` when the kernel dropped a key meanwhile
        /// (a freed inode) or something else changed it. This is where a
        /// kernel drop is seen.
        unchanged: bool,
    },
    /// [`Command::Ensure`]'s result: the sandbox cgroup's id, or why it
    /// could not be made.
    Ensured {
        /// The uid.
        uid: u32,
        /// Its id, or the error's text.
        result: Result<u64, String>,
    },
    /// [`Command::CountUnion`]'s result: file keys and names of the union
    /// of what the sandbox holds and the keys.
    Counted {
        /// The uid.
        uid: u32,
        /// File keys.
        files: usize,
        /// Names.
        names: usize,
    },
    /// [`Command::Apply`]'s result, or why it failed (the reason to give
    /// the user).
    Applied {
        /// The uid.
        uid: u32,
        /// What the apply did.
        result: Result<ApplyReport, String>,
    },
    /// [`Command::AllowSockets`]'s result: how many were new, or why they
    /// could not be written.
    SocketsAllowed {
        /// The uid.
        uid: u32,
        /// New ones, or the reason.
        result: Result<usize, String>,
    },
    /// [`Command::CheckSandbox`]'s result.
    SandboxChecked {
        /// The uid.
        uid: u32,
        /// Whether the program links are still pinned.
        enforcing: bool,
        /// The sandbox cgroup's id now.
        sandbox: Option<u64>,
        /// Whether it exists and holds no entry.
        denies_nothing: bool,
    },
    /// [`Command::Inspect`]'s result.
    Inspected {
        /// The uid.
        uid: u32,
        /// What was found.
        inspection: Inspection,
    },
    /// [`Command::Move`]'s result.
    Moved {
        /// The uid.
        uid: u32,
        /// The write to `cgroup.procs` (`Err`: its error's text).
        moved: Result<(), String>,
        /// Whether the launcher's pidfd reported it alive after the write.
        alive_after: bool,
    },
    /// [`Command::Recheck`]'s result: who holds the pid now.
    Rechecked {
        /// The uid.
        uid: u32,
        /// The holder's start time and parent pid (`None`: nobody).
        holder: Option<(u64, i32)>,
        /// Whether the holder sits in the uid's sandbox.
        in_sandbox: bool,
    },
}

/// What the daemon is to do. Commands marked *→ event* are answered with
/// that event at once ([`Plan`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    /// Keep the uid's accepted list lines, to name the line a denial comes
    /// from: in place of the kept ones (`replace`, a launch that may remove
    /// keys), or besides them (an add-only launch from inside keeps what
    /// the sandbox holds, so its lines stay nameable too). No event.
    Entries {
        /// The uid.
        uid: u32,
        /// The lines, in list order.
        entries: Vec<ListEntry>,
        /// Replace the kept lines rather than add to them.
        replace: bool,
    },
    /// Start a resolution of the uid's lists (its idle resolver processes,
    /// or new ones) → [`Event::Started`].
    Start {
        /// The uid.
        uid: u32,
    },
    /// Kill the uid's resolver (past its deadline); its processes count
    /// as stuck until they exit.
    Kill {
        /// The uid.
        uid: u32,
    },
    /// Read each launcher's cgroup and liveness, the sandbox's id, and
    /// whether the sandbox is unchanged `since` (cgroup id, version) →
    /// [`Event::Observed`].
    Observe {
        /// The uid.
        uid: u32,
        /// The launches of the batch, in order.
        launches: Vec<LaunchId>,
        /// The last apply's cgroup id and version, if it is remembered.
        since: Option<(u64, u64)>,
    },
    /// Make the uid's sandbox cgroup if needed → [`Event::Ensured`].
    Ensure {
        /// The uid.
        uid: u32,
    },
    /// Count the union of what sandbox `cgid` holds and `keys` →
    /// [`Event::Counted`].
    CountUnion {
        /// The uid.
        uid: u32,
        /// The sandbox cgroup's id.
        cgid: u64,
        /// The keys the lists resolve to.
        keys: Rc<DenySet>,
    },
    /// Apply `keys` to sandbox `cgid` in `mode` (loading the programs again
    /// first if the keys need it); with `recall`, a sandbox that held
    /// nothing is compared with the uid's record → [`Event::Applied`].
    Apply {
        /// The uid.
        uid: u32,
        /// The sandbox cgroup's id.
        cgid: u64,
        /// The keys the lists resolve to.
        keys: Rc<DenySet>,
        /// Exact or add-only ([`rules::keys_mode`]).
        mode: ApplyMode,
        /// Whether to consult the record (a launch from outside).
        recall: bool,
        /// Why a directory entry's scan was incomplete, if it was: to a
        /// sandbox that held nothing, in either mode, an apply that would
        /// lose entries the record holds is refused instead
        /// ([`rules::incomplete_scan_refusal`]).
        incomplete: Option<String>,
        /// Launches served (for the log line).
        launches: usize,
    },
    /// Write the uid's record of what sandbox `cgid` denies, unless it was
    /// last written from that sandbox and nothing `changed`.
    Record {
        /// The uid.
        uid: u32,
        /// The sandbox cgroup's id.
        cgid: u64,
        /// Whether the apply changed the sandbox.
        changed: bool,
    },
    /// Make `keys` exactly the sockets sandbox `cgid` may reach →
    /// [`Event::SocketsAllowed`].
    AllowSockets {
        /// The uid.
        uid: u32,
        /// The sandbox cgroup's id.
        cgid: u64,
        /// The socket files' keys (the batch's, each once).
        keys: Vec<FileKey>,
        /// The loopback ports (the batch's, each once).
        ports: Vec<AllowedPort>,
    },
    /// Check that enforcement is on and what the sandbox holds →
    /// [`Event::SandboxChecked`].
    CheckSandbox {
        /// The uid.
        uid: u32,
    },
    /// Look at a launcher before its move: its descriptors against what
    /// `sandbox` holds, then its uids, start time and liveness →
    /// [`Event::Inspected`].
    Inspect {
        /// The uid.
        uid: u32,
        /// The launch.
        launch: LaunchId,
        /// The sandbox cgroup's id ([`Event::SandboxChecked`]).
        sandbox: Option<u64>,
    },
    /// Write the launcher's pid to the sandbox's `cgroup.procs`, then test
    /// its pidfd → [`Event::Moved`].
    Move {
        /// The uid.
        uid: u32,
        /// The launch.
        launch: LaunchId,
    },
    /// The launcher died during its move: look at who holds its pid now →
    /// [`Event::Rechecked`].
    Recheck {
        /// The uid.
        uid: u32,
        /// The launch.
        launch: LaunchId,
    },
    /// Send `reply` on the launch's connection and close it.
    Reply {
        /// The launch.
        launch: LaunchId,
        /// Ok (no refusal) or refused, with warnings and notices.
        reply: Reply,
    },
    /// Log a line.
    Log {
        /// Its level.
        level: Level,
        /// Its text.
        text: String,
    },
    /// Count a re-apply without a launch that failed (start-up reports
    /// them).
    ReapplyFailed,
    /// A resolution parsed or removed this many entries, now freed (the
    /// daemon may hand the heap back).
    Freed {
        /// Entries, more than 0.
        entries: usize,
    },
}

/// Commands still to run, in order: the executor takes them one by one
/// (`while let Some(command) = plan.next()`); when one yields an event, the
/// commands that event leads to go [`Plan::then`], before the rest, so the
/// consequences of a result come right after the command that produced it.
#[derive(Debug, Default)]
pub struct Plan(VecDeque<Command>);

impl Plan {
    /// A plan of `commands`.
    pub fn new(commands: Vec<Command>) -> Plan {
        Plan(commands.into())
    }

    /// Runs `commands` before the rest.
    pub fn then(&mut self, commands: Vec<Command>) {
        for c in commands.into_iter().rev() {
            self.0.push_front(c);
        }
    }
}

impl Iterator for Plan {
    type Item = Command;

    fn next(&mut self) -> Option<Command> {
        self.0.pop_front()
    }
}

/// What a uid's last successful apply was made of: a resolution with these
/// same answers, to a sandbox still as that apply left it, may skip the
/// parse and the apply ([`rules::may_reuse`]).
#[derive(Debug)]
struct Last {
    answers: Answers,
    cgid: u64,
    /// The sandbox's version after that apply.
    version: u64,
    /// Entries the sandbox held beyond these answers' keys after it.
    unlisted: usize,
    /// Of those, listed entries (for the add-only notice).
    unlisted_entries: usize,
    /// Entries the answers hold.
    entries: usize,
    user_warnings: Vec<String>,
    admin_warnings: Vec<String>,
}

/// A resolution, from the answer to the apply.
#[derive(Debug)]
struct Work {
    answers: Answers,
    keys: Rc<DenySet>,
    user_warnings: Vec<String>,
    admin_warnings: Vec<String>,
    /// The launch's mode: for the sockets and the record.
    launch_mode: ApplyMode,
    /// The keys' mode ([`rules::keys_mode`]).
    mode: ApplyMode,
    /// Why a directory entry's scan was incomplete, if it was.
    incomplete: Option<String>,
    /// Entries parsed.
    parsed: usize,
}

/// A resolution, from the apply to the last reply.
#[derive(Debug)]
struct Admit {
    cgid: u64,
    launch_mode: ApplyMode,
    warnings: Vec<String>,
    notices: Vec<String>,
    /// Entries freed if the sockets cannot be written.
    parsed: usize,
    /// Entries freed otherwise.
    handled: usize,
    /// The sandbox's id at the check, for the descriptors.
    sandbox: Option<u64>,
    /// The launcher of the batch being moved.
    next: usize,
}

#[derive(Debug)]
enum Stage {
    Starting { retried: bool },
    Resolving { retried: bool, deadline: Millis },
    Observing(Answers),
    Ensuring(Work),
    Counting(Work, u64),
    Applying(Work, u64),
    Sockets(Admit),
    Checking(Admit),
    Inspecting(Admit),
    Moving(Admit, u64),
    Rechecking(Admit, u64),
}

impl Stage {
    fn name(&self) -> &'static str {
        match self {
            Stage::Starting { .. } => "starting",
            Stage::Resolving { .. } => "resolving",
            Stage::Observing(_) => "observing",
            Stage::Ensuring(_) => "ensuring",
            Stage::Counting(..) => "counting",
            Stage::Applying(..) => "applying",
            Stage::Sockets(_) => "sockets",
            Stage::Checking(_) => "checking",
            Stage::Inspecting(_) => "inspecting",
            Stage::Moving(..) => "moving",
            Stage::Rechecking(..) => "rechecking",
        }
    }
}

/// One uid's resolution in flight and the launches it serves (none for a
/// re-apply).
#[derive(Debug)]
struct Flight {
    batch: Vec<Launch>,
    stage: Stage,
}

#[derive(Debug, Default)]
struct Uid {
    waiting: Vec<Launch>,
    flight: Option<Flight>,
    last: Option<Last>,
}

/// The launch machine (see the module's documentation).
#[derive(Debug)]
pub struct Machine {
    limits: Limits,
    uids: BTreeMap<u32, Uid>,
    /// uids to re-apply without a launch, in order.
    reapply: VecDeque<u32>,
    /// The uids this turn's dispatch has still to look at.
    dispatching: VecDeque<u32>,
}

impl Machine {
    /// A machine with nothing waiting and nothing remembered.
    pub fn new(limits: Limits) -> Machine {
        Machine {
            limits,
            uids: BTreeMap::new(),
            reapply: VecDeque::new(),
            dispatching: VecDeque::new(),
        }
    }

    /// Takes `event`, which happened at `now`, and returns the commands it
    /// leads to, in order (at most one *→ event* command, last).
    pub fn handle(&mut self, now: Millis, event: Event) -> Vec<Command> {
        let mut out = Vec::new();
        match event {
            Event::Admitted(launch) => self.uid(launch.uid).waiting.push(launch),
            Event::Reload { uids } => {
                for uid in uids {
                    if !self.reapply.contains(&uid) {
                        self.reapply.push_back(uid);
                    }
                }
            }
            Event::Dispatch => {
                let mut order: Vec<u32> = self
                    .uids
                    .iter()
                    .filter(|(_, u)| !u.waiting.is_empty())
                    .map(|(uid, _)| *uid)
                    .collect();
                for uid in &self.reapply {
                    if !order.contains(uid) {
                        order.push(*uid);
                    }
                }
                self.dispatching = order.into();
                self.dispatch(&mut out);
            }
            Event::Tick => self.expire(now, &mut out),
            Event::Started { uid, result } => self.started(now, uid, result, &mut out),
            Event::Answered { uid, answer } => self.answered(uid, answer, &mut out),
            Event::Observed {
                uid,
                requesters,
                sandbox,
                unchanged,
            } => self.observed(uid, &requesters, sandbox, unchanged, &mut out),
            Event::Ensured { uid, result } => self.ensured(uid, result, &mut out),
            Event::Counted { uid, files, names } => self.counted(uid, files, names, &mut out),
            Event::Applied { uid, result } => self.applied(uid, result, &mut out),
            Event::SocketsAllowed { uid, result } => self.sockets_allowed(uid, result, &mut out),
            Event::SandboxChecked {
                uid,
                enforcing,
                sandbox,
                denies_nothing,
            } => self.checked(uid, enforcing, sandbox, denies_nothing, &mut out),
            Event::Inspected { uid, inspection } => self.inspected(uid, inspection, &mut out),
            Event::Moved {
                uid,
                moved,
                alive_after,
            } => self.moved(uid, moved, alive_after, &mut out),
            Event::Rechecked {
                uid,
                holder,
                in_sandbox,
            } => self.rechecked(uid, holder, in_sandbox, &mut out),
        }
        out
    }

    /// Whether anything is to do without a new request: a re-apply waits
    /// or a resolution is in flight.
    pub fn busy(&self) -> bool {
        !self.reapply.is_empty() || self.uids.values().any(|u| u.flight.is_some())
    }

    /// The nearest deadline of a resolution in flight, if any: the daemon
    /// sends [`Event::Tick`] once it has passed.
    pub fn next_deadline(&self) -> Option<Millis> {
        self.uids
            .values()
            .filter_map(|u| match u.flight.as_ref()?.stage {
                Stage::Resolving { deadline, .. } => Some(deadline),
                _ => None,
            })
            .min()
    }

    /// The stage of `uid`'s resolution (`"idle"` without one): one of the
    /// names in the module's documentation.
    #[cfg(test)]
    pub fn stage(&self, uid: u32) -> &'static str {
        self.uids
            .get(&uid)
            .and_then(|u| u.flight.as_ref())
            .map_or("idle", |f| f.stage.name())
    }

    /// The warnings about `uid`'s own list at its last apply, while that
    /// apply is remembered (for `--status`).
    pub fn user_warnings(&self, uid: u32) -> Option<&[String]> {
        let last = self.uids.get(&uid)?.last.as_ref()?;
        Some(&last.user_warnings)
    }

    /// Forgets the last apply of every uid for which `keep` is false (its
    /// resolver processes are gone, so its next answers come from new ones:
    /// not worth the memory). Returns how many entries those applies held.
    pub fn forget_unless(&mut self, keep: impl Fn(u32) -> bool) -> usize {
        let mut freed = 0;
        for (uid, u) in &mut self.uids {
            if !keep(*uid)
                && let Some(last) = u.last.take()
            {
                freed += last.entries;
            }
        }
        self.uids
            .retain(|_, u| !u.waiting.is_empty() || u.flight.is_some() || u.last.is_some());
        freed
    }

    fn uid(&mut self, uid: u32) -> &mut Uid {
        self.uids.entry(uid).or_default()
    }

    fn in_flight(&self) -> usize {
        self.uids.values().filter(|u| u.flight.is_some()).count()
    }

    /// Starts the next resolution this turn's dispatch may start; the rest
    /// follow its [`Event::Started`].
    fn dispatch(&mut self, out: &mut Vec<Command>) {
        while let Some(uid) = self.dispatching.pop_front() {
            if self.in_flight() >= self.limits.max_resolving {
                self.dispatching.clear();
                return;
            }
            if self.uids.get(&uid).is_some_and(|u| u.flight.is_some()) {
                continue;
            }
            let u = self.uid(uid);
            let batch = std::mem::take(&mut u.waiting);
            u.flight = Some(Flight {
                batch,
                stage: Stage::Starting { retried: false },
            });
            self.reapply.retain(|u| *u != uid);
            out.push(Command::Start { uid });
            return;
        }
    }

    /// Fails the resolutions past their deadline.
    fn expire(&mut self, now: Millis, out: &mut Vec<Command>) {
        let late: Vec<u32> = self
            .uids
            .iter()
            .filter(|(_, u)| {
                matches!(u.flight, Some(Flight { stage: Stage::Resolving { deadline, .. }, .. })
                    if now >= deadline)
            })
            .map(|(uid, _)| *uid)
            .collect();
        for uid in late {
            let Some(flight) = self.uid(uid).flight.take() else {
                continue;
            };
            out.push(Command::Kill { uid });
            let why = format!(
                "reading the denylists of uid {uid} took longer than {} s (a listed path on a stalled mount?)",
                self.limits.deadline / 1000
            );
            self.fail(uid, flight.batch, &why, out);
        }
    }

    /// Takes `uid`'s flight for a result event, if it is in a stage `fits`
    /// accepts; otherwise logs the stray event and leaves the flight be.
    fn flight_for(
        &mut self,
        uid: u32,
        what: &str,
        fits: impl Fn(&Stage) -> bool,
        out: &mut Vec<Command>,
    ) -> Option<Flight> {
        let flight = self.uids.get_mut(&uid).and_then(|u| u.flight.as_mut());
        let stage = flight.as_ref().map_or("idle", |f| f.stage.name());
        if flight.as_ref().is_some_and(|f| fits(&f.stage)) {
            return self.uids.get_mut(&uid).and_then(|u| u.flight.take());
        }
        log(
            out,
            Level::Error,
            format!("uid {uid}: the launch machine got {what} while {stage}; ignored"),
        );
        None
    }

    fn put(&mut self, uid: u32, batch: Vec<Launch>, stage: Stage) {
        self.uid(uid).flight = Some(Flight { batch, stage });
    }

    fn started(
        &mut self,
        now: Millis,
        uid: u32,
        result: Result<(), String>,
        out: &mut Vec<Command>,
    ) {
        let fits = |s: &Stage| matches!(s, Stage::Starting { .. });
        let Some(flight) = self.flight_for(uid, "a start", fits, out) else {
            return;
        };
        let Stage::Starting { retried } = flight.stage else {
            return;
        };
        match result {
            Ok(()) => {
                let deadline = now.saturating_add(self.limits.deadline);
                self.put(uid, flight.batch, Stage::Resolving { retried, deadline });
            }
            // A retry that cannot start is a failed resolution.
            Err(why) if retried => self.fail(uid, flight.batch, &why, out),
            Err(why) => {
                log(out, Level::Error, format!("uid {uid}: {why}"));
                if flight.batch.is_empty() {
                    out.push(Command::ReapplyFailed);
                }
                refuse_all(out, flight.batch, &why);
            }
        }
        if !retried {
            self.dispatch(out);
        }
    }

    fn answered(&mut self, uid: u32, answer: Answer, out: &mut Vec<Command>) {
        let fits = |s: &Stage| matches!(s, Stage::Resolving { .. });
        let Some(flight) = self.flight_for(uid, "an answer", fits, out) else {
            return;
        };
        let Stage::Resolving { retried, .. } = flight.stage else {
            return;
        };
        match answer {
            Answer::Done(answers) => {
                let since = self.uid(uid).last.as_ref().map(|a| (a.cgid, a.version));
                out.push(Command::Observe {
                    uid,
                    launches: flight.batch.iter().map(|l| l.id).collect(),
                    since,
                });
                self.put(uid, flight.batch, Stage::Observing(answers));
            }
            Answer::Broken { why, retryable } => match rules::after_break(retryable, retried) {
                AfterBreak::Retry => {
                    log(
                        out,
                        Level::Info,
                        format!("uid {uid}: {why}; starting new list resolvers"),
                    );
                    out.push(Command::Start { uid });
                    self.put(uid, flight.batch, Stage::Starting { retried: true });
                }
                AfterBreak::Fail => self.fail(uid, flight.batch, &why, out),
            },
        }
    }

    /// The launch's mode is known: reuse the last apply, or parse and
    /// check the answers and make sure of the sandbox.
    fn observed(
        &mut self,
        uid: u32,
        requesters: &[Requester],
        sandbox: Option<u64>,
        unchanged: bool,
        out: &mut Vec<Command>,
    ) {
        let fits = |s: &Stage| matches!(s, Stage::Observing(_));
        let Some(flight) = self.flight_for(uid, "an observation", fits, out) else {
            return;
        };
        let Stage::Observing(answers) = flight.stage else {
            return;
        };
        let batch = flight.batch;
        let mode = rules::apply_mode(&sandbox_path_for(uid), requesters);
        let u = self.uid(uid);
        let last = u.last.as_ref().map(|a| LastApply {
            cgid: a.cgid,
            same_answers: a.answers == answers,
            unlisted: a.unlisted,
            unchanged,
        });
        if let Some(a) = u
            .last
            .as_ref()
            .filter(|_| rules::may_reuse(last.as_ref(), sandbox, mode))
        {
            for w in &a.admin_warnings {
                log(out, Level::Warn, w.clone());
            }
            log(
                out,
                Level::Info,
                format!(
                    "uid {uid}: lists and sandbox unchanged since the last apply; {} launch(es)",
                    batch.len()
                ),
            );
            let (warnings, mut notices) = rules::capped(&a.user_warnings);
            // What a full add-only apply would say again; an exact one
            // would remove nothing, so it would say nothing.
            if mode == ApplyMode::AddOnly && a.unlisted_entries > 0 {
                notices.push(rules::removal_notice(
                    ApplyMode::AddOnly,
                    a.unlisted_entries,
                ));
            }
            let cgid = a.cgid;
            out.push(Command::Record {
                uid,
                cgid,
                changed: false,
            });
            let admit = Admit {
                cgid,
                launch_mode: mode,
                warnings,
                notices,
                parsed: 0,
                handled: 0,
                sandbox: None,
                next: 0,
            };
            return self.sockets(uid, batch, admit, out);
        }
        u.last = None;
        let Resolution {
            deny,
            user_warnings,
            admin_warnings,
            fatal,
            incomplete,
            entries,
        } = answers.parse();
        let parsed = deny.len();
        if let Some(fatal) = fatal {
            self.fail(uid, batch, &fatal, out);
            return freed(out, parsed);
        }
        // The launch's own mode stays for the sockets and the record's
        // note; the keys only add after an incomplete directory-entry scan.
        let launch_mode = mode;
        let mode = rules::keys_mode(launch_mode, incomplete.is_none());
        if let Some(why) = &incomplete {
            log(
                out,
                Level::Warn,
                format!(
                    "uid {uid}: a directory entry's scan is incomplete ({why}); no key is removed"
                ),
            );
        }
        for w in &admin_warnings {
            log(out, Level::Warn, w.clone());
        }
        let (files, names) = (deny.files().len(), deny.names().len());
        let shapes = deny
            .names()
            .iter()
            .filter(|n| n.dir.kind == KIND_PAT_SHAPE)
            .count();
        if let Err(r) = rules::check_keys(files, names, MAX_KEYS_PER_UID)
            .and_then(|()| rules::check_shapes(shapes, rules::MAX_SHAPES_PER_UID))
        {
            log(out, Level::Warn, format!("uid {uid}: {r}"));
            refuse_all(out, batch, &r.to_string());
            return freed(out, parsed);
        }
        out.push(Command::Entries {
            uid,
            entries,
            replace: mode != ApplyMode::AddOnly,
        });
        out.push(Command::Ensure { uid });
        let work = Work {
            answers,
            keys: Rc::new(deny),
            user_warnings,
            admin_warnings,
            launch_mode,
            mode,
            incomplete,
            parsed,
        };
        self.put(uid, batch, Stage::Ensuring(work));
    }

    fn ensured(&mut self, uid: u32, result: Result<u64, String>, out: &mut Vec<Command>) {
        let fits = |s: &Stage| matches!(s, Stage::Ensuring(_));
        let Some(flight) = self.flight_for(uid, "a sandbox cgroup", fits, out) else {
            return;
        };
        let Stage::Ensuring(work) = flight.stage else {
            return;
        };
        let cgid = match result {
            Ok(cgid) => cgid,
            Err(e) => {
                log(out, Level::Error, format!("uid {uid}: {e}"));
                let why = format!("cannot create the sandbox cgroup: {e}");
                refuse_all(out, flight.batch, &why);
                return freed(out, work.parsed);
            }
        };
        if work.mode == ApplyMode::AddOnly {
            // An add-only apply keeps what the sandbox holds: the cap is on
            // the union, or launches from inside with ever new lists would
            // fill the shared maps for every other user.
            out.push(Command::CountUnion {
                uid,
                cgid,
                keys: Rc::clone(&work.keys),
            });
            self.put(uid, flight.batch, Stage::Counting(work, cgid));
        } else {
            self.apply(uid, flight.batch, work, cgid, out);
        }
    }

    fn counted(&mut self, uid: u32, files: usize, names: usize, out: &mut Vec<Command>) {
        let fits = |s: &Stage| matches!(s, Stage::Counting(..));
        let Some(flight) = self.flight_for(uid, "a count", fits, out) else {
            return;
        };
        let Stage::Counting(work, cgid) = flight.stage else {
            return;
        };
        if let Err(r) = rules::check_union(files, names, MAX_KEYS_PER_UID) {
            log(out, Level::Warn, format!("uid {uid}: {r}"));
            return refuse_all(out, flight.batch, &r.to_string());
        }
        self.apply(uid, flight.batch, work, cgid, out);
    }

    fn apply(
        &mut self,
        uid: u32,
        batch: Vec<Launch>,
        work: Work,
        cgid: u64,
        out: &mut Vec<Command>,
    ) {
        out.push(Command::Apply {
            uid,
            cgid,
            keys: Rc::clone(&work.keys),
            mode: work.mode,
            // A sandbox that holds nothing may have been forgotten (a
            // daemon restart drops sandboxes without processes, a reboot
            // all of them): what it denied until then is in the record.
            recall: work.launch_mode == ApplyMode::Exact,
            incomplete: work.incomplete.clone(),
            launches: batch.len(),
        });
        self.put(uid, batch, Stage::Applying(work, cgid));
    }

    fn applied(&mut self, uid: u32, result: Result<ApplyReport, String>, out: &mut Vec<Command>) {
        let fits = |s: &Stage| matches!(s, Stage::Applying(..));
        let Some(flight) = self.flight_for(uid, "an apply", fits, out) else {
            return;
        };
        let Stage::Applying(work, cgid) = flight.stage else {
            return;
        };
        let r = match result {
            Ok(r) => r,
            Err(why) => {
                log(out, Level::Error, format!("uid {uid}: {why}"));
                refuse_all(out, flight.batch, &why);
                return freed(out, work.parsed);
            }
        };
        let (warnings, mut notices) = rules::capped(&work.user_warnings);
        if r.removed_entries > 0 {
            notices.push(rules::removal_notice(work.mode, r.removed_entries));
        } else {
            notices.extend(r.recorded);
        }
        notices.extend(rules::exception_notice(
            r.exceptions_held_back,
            r.exceptions_added,
        ));
        let changed = r.added > 0 || (work.mode == ApplyMode::Exact && r.removed > 0);
        out.push(Command::Record { uid, cgid, changed });
        // New exceptions an add-only apply left out: the next apply must
        // not be skipped as a repeat of this one.
        if let Some(version) = r.version.filter(|_| r.exceptions_held_back == 0) {
            self.uid(uid).last = Some(Last {
                answers: work.answers,
                cgid,
                version,
                unlisted: r.unlisted,
                unlisted_entries: r.unlisted_entries,
                entries: work.keys.len(),
                user_warnings: work.user_warnings,
                admin_warnings: work.admin_warnings,
            });
        }
        let handled = match work.mode {
            ApplyMode::Exact => work.parsed.max(r.removed),
            ApplyMode::AddOnly => work.parsed,
        };
        let admit = Admit {
            cgid,
            launch_mode: work.launch_mode,
            warnings,
            notices,
            parsed: work.parsed,
            handled,
            sandbox: None,
            next: 0,
        };
        self.sockets(uid, flight.batch, admit, out);
    }

    /// The `socket` lines of the batch: an exact launch (every launcher
    /// outside) makes their union exactly what the sandbox may reach of the
    /// user's own sockets made outside; an add-only one changes nothing, by
    /// the strictness rule, and says so if it asked for sockets.
    fn sockets(&mut self, uid: u32, batch: Vec<Launch>, mut admit: Admit, out: &mut Vec<Command>) {
        let asked = asked_sockets(&batch);
        let ports = asked_ports(&batch);
        if admit.launch_mode == ApplyMode::AddOnly {
            if !batch.is_empty() && (!asked.is_empty() || !ports.is_empty()) {
                let mut paths: Vec<String> = asked.iter().map(|a| a.path.clone()).collect();
                paths.extend(ports.iter().map(|p| format!("port {p}")));
                admit.notices.push(format!(
                    "socket lines are not applied by a launch from inside a sandbox: {} stays \
                     refused unless a launch from outside allowed it",
                    paths.join(", ")
                ));
            }
            return self.check(uid, batch, admit, out);
        }
        out.push(Command::AllowSockets {
            uid,
            cgid: admit.cgid,
            keys: asked.iter().map(|a| a.key).collect(),
            ports,
        });
        self.put(uid, batch, Stage::Sockets(admit));
    }

    fn sockets_allowed(&mut self, uid: u32, result: Result<usize, String>, out: &mut Vec<Command>) {
        let fits = |s: &Stage| matches!(s, Stage::Sockets(_));
        let Some(flight) = self.flight_for(uid, "the sockets", fits, out) else {
            return;
        };
        let Stage::Sockets(mut admit) = flight.stage else {
            return;
        };
        let added = match result {
            Ok(added) => added,
            Err(why) => {
                // The map may hold more than the lists allow.
                log(out, Level::Error, format!("uid {uid}: {why}"));
                refuse_all(out, flight.batch, &why);
                return freed(out, admit.parsed);
            }
        };
        let asked = asked_sockets(&flight.batch);
        let ports = asked_ports(&flight.batch);
        if !asked.is_empty() || !ports.is_empty() {
            log(
                out,
                Level::Info,
                format!(
                    "uid {uid}: {} socket(s) and {} port(s) allowed ({added} new)",
                    asked.len(),
                    ports.len()
                ),
            );
        }
        admit.notices.extend(asked.iter().map(|a| {
            format!(
                "socket {} allowed: your sandbox may connect to it although one of your \
                 processes outside made it (an ssh-agent signs with your keys for the agent)",
                a.path
            )
        }));
        admit.notices.extend(ports.iter().map(|p| {
            format!(
                "socket {p} allowed: your sandbox may reach your own server on that port of \
                 this host although you started it outside (it serves the agent whatever it \
                 serves you)"
            )
        }));
        self.check(uid, flight.batch, admit, out);
    }

    /// Before the moves: enforcement must be on; a sandbox that denies
    /// nothing says so, once per launch.
    fn check(&mut self, uid: u32, batch: Vec<Launch>, admit: Admit, out: &mut Vec<Command>) {
        if batch.is_empty() {
            return freed(out, admit.handled);
        }
        out.push(Command::CheckSandbox { uid });
        self.put(uid, batch, Stage::Checking(admit));
    }

    fn checked(
        &mut self,
        uid: u32,
        enforcing: bool,
        sandbox: Option<u64>,
        denies_nothing: bool,
        out: &mut Vec<Command>,
    ) {
        let fits = |s: &Stage| matches!(s, Stage::Checking(_));
        let Some(flight) = self.flight_for(uid, "a sandbox check", fits, out) else {
            return;
        };
        let Stage::Checking(mut admit) = flight.stage else {
            return;
        };
        if !enforcing {
            log(out, Level::Error, ENFORCEMENT_OFF.to_owned());
            refuse_all(out, flight.batch, ENFORCEMENT_OFF);
            return freed(out, admit.handled);
        }
        if denies_nothing {
            admit.notices.push(NOTHING_DENIED.to_owned());
        }
        admit.sandbox = sandbox;
        self.next_launcher(uid, flight.batch, admit, out);
    }

    /// Inspects the next launcher of the batch, or ends the resolution.
    fn next_launcher(
        &mut self,
        uid: u32,
        batch: Vec<Launch>,
        admit: Admit,
        out: &mut Vec<Command>,
    ) {
        let Some(launch) = batch.get(admit.next) else {
            return freed(out, admit.handled);
        };
        out.push(Command::Inspect {
            uid,
            launch: launch.id,
            sandbox: admit.sandbox,
        });
        self.put(uid, batch, Stage::Inspecting(admit));
    }

    /// Replies to the launcher being moved (`refusal`: why it is not in its
    /// sandbox, logged) and goes on with the next one.
    fn answer(
        &mut self,
        uid: u32,
        batch: Vec<Launch>,
        mut admit: Admit,
        refusal: Option<String>,
        out: &mut Vec<Command>,
    ) {
        let launch = &batch[admit.next];
        if let Some(why) = &refusal {
            log(
                out,
                Level::Warn,
                format!("uid {uid} pid {}: {why}", launch.pid),
            );
        }
        out.push(Command::Reply {
            launch: launch.id,
            reply: Reply {
                refusal,
                warnings: admit.warnings.clone(),
                notices: admit.notices.clone(),
            },
        });
        admit.next += 1;
        self.next_launcher(uid, batch, admit, out);
    }

    fn inspected(&mut self, uid: u32, inspection: Inspection, out: &mut Vec<Command>) {
        let fits = |s: &Stage| matches!(s, Stage::Inspecting(_));
        let Some(flight) = self.flight_for(uid, "an inspection", fits, out) else {
            return;
        };
        let Stage::Inspecting(admit) = flight.stage else {
            return;
        };
        let launch = &flight.batch[admit.next];
        let (pid, id) = (launch.pid, launch.id);
        match inspection {
            Inspection::Holds(why) | Inspection::Unreadable(why) => {
                self.answer(uid, flight.batch, admit, Some(why), out);
            }
            Inspection::Seen { uids, start, alive } => {
                match rules::check_before_move(pid, uid, uids, alive) {
                    Err(r) => self.answer(uid, flight.batch, admit, Some(r.to_string()), out),
                    Ok(()) => {
                        out.push(Command::Move { uid, launch: id });
                        self.put(uid, flight.batch, Stage::Moving(admit, start));
                    }
                }
            }
        }
    }

    fn moved(
        &mut self,
        uid: u32,
        moved: Result<(), String>,
        alive_after: bool,
        out: &mut Vec<Command>,
    ) {
        let fits = |s: &Stage| matches!(s, Stage::Moving(..));
        let Some(flight) = self.flight_for(uid, "a move", fits, out) else {
            return;
        };
        let Stage::Moving(admit, start) = flight.stage else {
            return;
        };
        let launch = &flight.batch[admit.next];
        let (pid, id) = (launch.pid, launch.id);
        match rules::judge_move(pid, moved, alive_after) {
            Ok(()) => self.answer(uid, flight.batch, admit, None, out),
            Err(MoveRefusal::ExitedDuringMove { .. }) => {
                // The pid may have been reused in between, and the write
                // may have moved another process in.
                log(
                    out,
                    Level::Error,
                    format!("pid {pid} exited while being moved; checking for a reused pid"),
                );
                out.push(Command::Recheck { uid, launch: id });
                self.put(uid, flight.batch, Stage::Rechecking(admit, start));
            }
            Err(r) => self.answer(uid, flight.batch, admit, Some(r.to_string()), out),
        }
    }

    fn rechecked(
        &mut self,
        uid: u32,
        holder: Option<(u64, i32)>,
        in_sandbox: bool,
        out: &mut Vec<Command>,
    ) {
        let fits = |s: &Stage| matches!(s, Stage::Rechecking(..));
        let Some(flight) = self.flight_for(uid, "a recheck", fits, out) else {
            return;
        };
        let Stage::Rechecking(admit, start) = flight.stage else {
            return;
        };
        let pid = flight.batch[admit.next].pid;
        // The new holder stays in the sandbox on purpose (see
        // rules::reused_pid_stays).
        if let Some((start_now, ppid)) = holder
            && rules::reused_pid_stays(start, Some(start_now), in_sandbox)
        {
            log(
                out,
                Level::Error,
                format!(
                    "pid {pid} was reused during the move: the new process (parent {ppid}) is now in uid {uid}'s sandbox and stays there"
                ),
            );
        }
        let why = MoveRefusal::ExitedDuringMove { pid }.to_string();
        self.answer(uid, flight.batch, admit, Some(why), out);
    }

    /// A resolution of `uid` failed: its last apply is forgotten and
    /// `batch` refused (a re-apply without a launch counts as a failed
    /// re-apply).
    fn fail(&mut self, uid: u32, batch: Vec<Launch>, why: &str, out: &mut Vec<Command>) {
        self.uid(uid).last = None;
        log(out, Level::Warn, format!("uid {uid}: {why}"));
        if batch.is_empty() {
            out.push(Command::ReapplyFailed);
        }
        refuse_all(out, batch, why);
    }
}

fn log(out: &mut Vec<Command>, level: Level, text: String) {
    out.push(Command::Log { level, text });
}

fn refuse_all(out: &mut Vec<Command>, batch: Vec<Launch>, why: &str) {
    for l in batch {
        out.push(Command::Reply {
            launch: l.id,
            reply: Reply::refused(why.to_owned()),
        });
    }
}

fn freed(out: &mut Vec<Command>, entries: usize) {
    if entries > 0 {
        out.push(Command::Freed { entries });
    }
}

/// The sockets the launches of `batch` ask for, each key once, first
/// asker's path.
fn asked_sockets(batch: &[Launch]) -> Vec<&AllowedSocket> {
    let mut asked: Vec<&AllowedSocket> = Vec::new();
    for s in batch.iter().flat_map(|l| &l.sockets) {
        if !asked.iter().any(|a| a.key == s.key) {
            asked.push(s);
        }
    }
    asked
}

/// The loopback ports the batch's launches ask for, each once, in order.
fn asked_ports(batch: &[Launch]) -> Vec<AllowedPort> {
    let mut asked: Vec<AllowedPort> = Vec::new();
    for p in batch.iter().flat_map(|l| &l.ports) {
        if !asked.contains(p) {
            asked.push(*p);
        }
    }
    asked
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lists::entries::KIND_OPEN;
    use crate::proto::resolver::Sink;

    const UID: u32 = 1000;
    const CGID: u64 = 7;
    const LIMITS: Limits = Limits {
        deadline: 5000,
        max_resolving: 16,
    };
    const OUTSIDE: &str = "/user.slice/user-1000.slice/session-1.scope";

    fn key(ino: u64) -> FileKey {
        FileKey {
            dev: 8 << 20 | 1,
            ino,
            subvol: 0,
            kind: KIND_OPEN,
        }
    }

    /// A resolution's answers: the base list's denies the files `inos`
    /// and carries the `records` (tag, text); the user's is empty.
    fn answers(inos: &[u64], records: &[(u8, &str)]) -> Answers {
        let mut recs = Vec::new();
        for &ino in inos {
            recs.extend_from_slice(&Sink::key_bytes(key(ino), b'K'));
        }
        for (tag, text) in records {
            Sink { out: &mut recs }.record(*tag, text);
        }
        let mut base = (recs.len() as u64).to_ne_bytes().to_vec();
        base.extend(recs);
        Answers([base, 0u64.to_ne_bytes().to_vec()])
    }

    fn done(inos: &[u64]) -> Event {
        Event::Answered {
            uid: UID,
            answer: Answer::Done(answers(inos, &[])),
        }
    }

    fn pid(id: LaunchId) -> i32 {
        4000 + i32::try_from(id).unwrap()
    }

    fn admitted(id: LaunchId) -> Event {
        Event::Admitted(Launch {
            id,
            uid: UID,
            pid: pid(id),
            sockets: Vec::new(),
            ports: Vec::new(),
        })
    }

    /// A fake of everything the daemon does: it answers the commands marked
    /// → event from the state a test set, keeps a sandbox's keys as the
    /// maps would, and records each command as one line.
    #[derive(Default)]
    struct World {
        now: Millis,
        trace: Vec<String>,
        replies: Vec<(LaunchId, Reply)>,
        /// Results of the next starts (then `Ok`).
        starts: VecDeque<Result<(), String>>,
        /// Launches whose launcher runs inside the sandbox.
        inside: Vec<LaunchId>,
        /// Launchers that die before their move.
        dead: Vec<LaunchId>,
        /// Launchers that die during their move.
        dies_moving: Vec<LaunchId>,
        /// Whether the sandbox cgroup exists.
        exists: bool,
        /// What the sandbox holds.
        held: DenySet,
        version: u64,
        /// Whether the kernel dropped a key since the last apply.
        dropped: bool,
        /// The uid's record: what its sandboxes denied until now.
        recorded: DenySet,
        /// The Entries commands: (uid, lines, replace).
        entries: Vec<(u32, usize, bool)>,
    }

    impl World {
        fn new() -> World {
            World::default()
        }

        /// Hands `event` to the machine and executes the plan as the daemon
        /// does.
        fn run(&mut self, m: &mut Machine, event: Event) {
            let mut plan = Plan::new(m.handle(self.now, event));
            while let Some(command) = plan.next() {
                // The kept list lines change no key: the traces leave them out.
                if let Command::Entries {
                    uid,
                    entries,
                    replace,
                } = &command
                {
                    self.entries.push((*uid, entries.len(), *replace));
                    continue;
                }
                self.trace.push(show(&command));
                if let Some(result) = self.execute(command) {
                    plan.then(m.handle(self.now, result));
                }
            }
        }

        /// The lines recorded since the last call.
        fn take(&mut self) -> Vec<String> {
            std::mem::take(&mut self.trace)
        }

        fn execute(&mut self, command: Command) -> Option<Event> {
            Some(match command {
                Command::Entries { .. } => return None,
                Command::Start { uid } => Event::Started {
                    uid,
                    result: self.starts.pop_front().unwrap_or(Ok(())),
                },
                Command::Observe {
                    uid,
                    launches,
                    since,
                } => Event::Observed {
                    uid,
                    requesters: launches
                        .iter()
                        .map(|id| Requester {
                            cgroup: Some(if self.inside.contains(id) {
                                sandbox_path_for(uid)
                            } else {
                                OUTSIDE.to_owned()
                            }),
                            alive_after: true,
                        })
                        .collect(),
                    sandbox: self.exists.then_some(CGID),
                    unchanged: since == Some((CGID, self.version)) && !self.dropped,
                },
                Command::Ensure { uid } => {
                    self.exists = true;
                    Event::Ensured {
                        uid,
                        result: Ok(CGID),
                    }
                }
                Command::CountUnion { uid, keys, .. } => {
                    let (files, names) = self.held.union_len(&keys);
                    Event::Counted { uid, files, names }
                }
                Command::Apply {
                    uid,
                    keys,
                    mode,
                    recall,
                    incomplete,
                    ..
                } => {
                    // The daemon's check of a forgotten sandbox against the
                    // record, with the record as the set it held.
                    let lost = self.recorded.minus(&keys).entries();
                    let loss = rules::RecordedLoss::Entries(lost);
                    if (recall || incomplete.is_some())
                        && self.held.entries() == 0
                        && let Some(why) =
                            rules::incomplete_scan_refusal(incomplete.as_deref(), loss)
                    {
                        return Some(Event::Applied {
                            uid,
                            result: Err(why),
                        });
                    }
                    let before = std::mem::take(&mut self.held);
                    let stale = before.minus(&keys);
                    let added = keys.minus(&before).len();
                    self.held = match mode {
                        ApplyMode::Exact => (*keys).clone(),
                        ApplyMode::AddOnly => before.union(&keys),
                    };
                    self.version += 1;
                    self.dropped = false;
                    Event::Applied {
                        uid,
                        result: Ok(ApplyReport {
                            added,
                            removed: stale.len(),
                            removed_entries: stale.entries(),
                            unlisted: self.held.len() - keys.len(),
                            unlisted_entries: self.held.entries() - keys.entries(),
                            version: Some(self.version),
                            ..ApplyReport::default()
                        }),
                    }
                }
                Command::AllowSockets { uid, keys, .. } => Event::SocketsAllowed {
                    uid,
                    result: Ok(keys.len()),
                },
                Command::CheckSandbox { uid } => Event::SandboxChecked {
                    uid,
                    enforcing: true,
                    sandbox: self.exists.then_some(CGID),
                    denies_nothing: self.held.entries() == 0,
                },
                Command::Inspect { uid, launch, .. } => Event::Inspected {
                    uid,
                    inspection: Inspection::Seen {
                        uids: [uid; 4],
                        start: 100,
                        alive: !self.dead.contains(&launch),
                    },
                },
                Command::Move { uid, launch } => Event::Moved {
                    uid,
                    moved: Ok(()),
                    alive_after: !self.dies_moving.contains(&launch),
                },
                Command::Recheck { uid, .. } => Event::Rechecked {
                    uid,
                    holder: Some((200, 1)),
                    in_sandbox: true,
                },
                Command::Reply { launch, reply } => {
                    self.replies.push((launch, reply));
                    return None;
                }
                Command::Kill { .. }
                | Command::Record { .. }
                | Command::Log { .. }
                | Command::ReapplyFailed
                | Command::Freed { .. } => return None,
            })
        }
    }

    /// One line per command.
    fn show(c: &Command) -> String {
        let mode = |m: &ApplyMode| match m {
            ApplyMode::Exact => "exact",
            ApplyMode::AddOnly => "add-only",
        };
        match c {
            Command::Entries {
                uid,
                entries,
                replace,
            } => format!("entries {uid} {} replace={replace}", entries.len()),
            Command::Start { uid } => format!("start {uid}"),
            Command::Kill { uid } => format!("kill {uid}"),
            Command::Observe {
                uid,
                launches,
                since,
            } => {
                let since = since.map_or(String::new(), |(c, v)| format!(" since cg{c}@{v}"));
                format!("observe {uid} {launches:?}{since}")
            }
            Command::Ensure { uid } => format!("ensure {uid}"),
            Command::CountUnion { uid, cgid, keys } => {
                format!("count {uid} cg{cgid} with {} keys", keys.len())
            }
            Command::Apply {
                uid,
                cgid,
                keys,
                mode: m,
                recall,
                incomplete,
                launches,
            } => format!(
                "apply {uid} cg{cgid} {} keys {}{}{} for {launches}",
                keys.len(),
                mode(m),
                if *recall { " recall" } else { "" },
                if incomplete.is_some() {
                    " incomplete"
                } else {
                    ""
                }
            ),
            Command::Record { uid, cgid, changed } => format!(
                "record {uid} cg{cgid}{}",
                if *changed { " changed" } else { "" }
            ),
            Command::AllowSockets {
                uid,
                cgid,
                keys,
                ports,
            } => match ports.len() {
                0 => format!("sockets {uid} cg{cgid} {}", keys.len()),
                n => format!("sockets {uid} cg{cgid} {} ports {n}", keys.len()),
            },
            Command::CheckSandbox { uid } => format!("check {uid}"),
            Command::Inspect { launch, .. } => format!("inspect #{launch}"),
            Command::Move { launch, .. } => format!("move #{launch}"),
            Command::Recheck { launch, .. } => format!("recheck #{launch}"),
            Command::Reply { launch, reply } => match &reply.refusal {
                None => format!("reply #{launch} ok"),
                Some(why) => format!("reply #{launch} refused: {why}"),
            },
            Command::Log { level, text } => {
                format!("{}: {text}", format!("{level:?}").to_lowercase())
            }
            Command::ReapplyFailed => "reapply failed".to_owned(),
            Command::Freed { entries } => format!("freed {entries}"),
        }
    }

    /// The lines of one launch `id` from its inspection to its reply.
    fn moved(id: LaunchId) -> [String; 3] {
        [
            format!("inspect #{id}"),
            format!("move #{id}"),
            format!("reply #{id} ok"),
        ]
    }

    fn lines(parts: &[&[String]]) -> Vec<String> {
        parts.concat()
    }

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|l| (*l).to_owned()).collect()
    }

    /// A machine and world after one launch (#1) of `inos` from outside.
    fn launched(inos: &[u64]) -> (Machine, World) {
        let mut m = Machine::new(LIMITS);
        let mut w = World::new();
        w.run(&mut m, admitted(1));
        w.run(&mut m, Event::Dispatch);
        w.run(&mut m, done(inos));
        assert_eq!(w.replies.len(), 1);
        w.take();
        (m, w)
    }

    #[test]
    fn a_normal_launch() {
        let mut m = Machine::new(LIMITS);
        let mut w = World::new();
        w.run(&mut m, admitted(1));
        assert!(w.take().is_empty(), "admitted: it waits for the turn");
        assert_eq!(m.stage(UID), "idle");
        w.run(&mut m, Event::Dispatch);
        assert_eq!(w.take(), s(&["start 1000"]));
        assert_eq!(m.stage(UID), "resolving");
        assert_eq!(m.next_deadline(), Some(5000));
        w.run(&mut m, done(&[1, 2]));
        assert_eq!(
            w.take(),
            lines(&[
                &s(&[
                    "observe 1000 [1]",
                    "ensure 1000",
                    "apply 1000 cg7 2 keys exact recall for 1",
                    "record 1000 cg7 changed",
                    "sockets 1000 cg7 0",
                    "check 1000",
                ]),
                &moved(1),
                &s(&["freed 2"]),
            ])
        );
        assert_eq!(w.replies[0].1.notices, Vec::<String>::new());
        assert_eq!(m.stage(UID), "idle");
        assert!(!m.busy());
        assert_eq!(m.next_deadline(), None);
    }

    #[test]
    fn an_outside_launch_allows_its_ports_and_says_so() {
        let mut m = Machine::new(LIMITS);
        let mut w = World::new();
        let tcp = AllowedPort {
            transport: crate::lists::denylist::Transport::Tcp,
            port: 11434,
        };
        let launch = |id| {
            Event::Admitted(Launch {
                id,
                uid: UID,
                pid: pid(id),
                sockets: Vec::new(),
                ports: vec![tcp],
            })
        };
        // Two launches of one batch ask for the same port: allowed once.
        w.run(&mut m, launch(1));
        w.run(&mut m, launch(2));
        w.run(&mut m, Event::Dispatch);
        w.run(&mut m, done(&[1]));
        let lines = w.take();
        assert!(
            lines.contains(&"sockets 1000 cg7 0 ports 1".to_owned()),
            "{lines:?}"
        );
        for (_, reply) in &w.replies {
            assert_eq!(reply.refusal, None);
            assert!(
                reply
                    .notices
                    .iter()
                    .any(|n| n.starts_with("socket tcp:11434 allowed: your sandbox may reach")),
                "{:?}",
                reply.notices
            );
        }
    }

    #[test]
    fn a_batch_of_two_launches_of_one_uid() {
        let mut m = Machine::new(LIMITS);
        let mut w = World::new();
        w.run(&mut m, admitted(1));
        w.run(&mut m, admitted(2));
        w.run(&mut m, Event::Dispatch);
        // A third launch while the first two resolve waits for the next turn.
        w.run(&mut m, admitted(3));
        w.run(&mut m, Event::Dispatch);
        assert_eq!(w.take(), s(&["start 1000"]));
        w.run(&mut m, done(&[1, 2]));
        assert_eq!(
            w.take(),
            lines(&[
                &s(&[
                    "observe 1000 [1, 2]",
                    "ensure 1000",
                    "apply 1000 cg7 2 keys exact recall for 2",
                    "record 1000 cg7 changed",
                    "sockets 1000 cg7 0",
                    "check 1000",
                ]),
                &moved(1),
                &moved(2),
                &s(&["freed 2"]),
            ])
        );
        // The third: same answers, sandbox unchanged: reused, no apply.
        w.run(&mut m, Event::Dispatch);
        w.run(&mut m, done(&[1, 2]));
        assert_eq!(
            w.take(),
            lines(&[
                &s(&[
                    "start 1000",
                    "observe 1000 [3] since cg7@1",
                    "info: uid 1000: lists and sandbox unchanged since the last apply; 1 launch(es)",
                    "record 1000 cg7",
                    "sockets 1000 cg7 0",
                    "check 1000",
                ]),
                &moved(3),
            ])
        );
    }

    #[test]
    fn a_resolver_that_dies_once_is_retried() {
        let mut m = Machine::new(LIMITS);
        let mut w = World::new();
        w.run(&mut m, admitted(1));
        w.run(&mut m, Event::Dispatch);
        w.take();
        let died = || Event::Answered {
            uid: UID,
            answer: Answer::Broken {
                why: "the list resolver exited without answering".into(),
                retryable: true,
            },
        };
        w.now = 3000;
        w.run(&mut m, died());
        assert_eq!(
            w.take(),
            s(&[
                "info: uid 1000: the list resolver exited without answering; starting new list resolvers",
                "start 1000",
            ])
        );
        // The second try has a deadline of its own.
        assert_eq!(m.next_deadline(), Some(8000));
        w.run(&mut m, done(&[1]));
        let t = w.take();
        assert_eq!(t[..2], s(&["observe 1000 [1]", "ensure 1000"]));
        assert_eq!(w.replies[0].1.refusal, None);

        // Dying again on the second try refuses.
        w.run(&mut m, admitted(2));
        w.run(&mut m, Event::Dispatch);
        w.run(&mut m, died());
        w.run(&mut m, died());
        assert_eq!(
            w.take(),
            s(&[
                "start 1000",
                "info: uid 1000: the list resolver exited without answering; starting new list resolvers",
                "start 1000",
                "warn: uid 1000: the list resolver exited without answering",
                "reply #2 refused: the list resolver exited without answering",
            ])
        );
    }

    #[test]
    fn a_failing_resolver_refuses_with_its_reason() {
        let mut m = Machine::new(LIMITS);
        let mut w = World::new();
        // It answered something wrong: no retry.
        w.run(&mut m, admitted(1));
        w.run(&mut m, Event::Dispatch);
        w.run(
            &mut m,
            Event::Answered {
                uid: UID,
                answer: Answer::Broken {
                    why: "the list resolver's answer is too long".into(),
                    retryable: false,
                },
            },
        );
        assert_eq!(
            w.take(),
            s(&[
                "start 1000",
                "warn: uid 1000: the list resolver's answer is too long",
                "reply #1 refused: the list resolver's answer is too long",
            ])
        );
        // It could not be started: logged as an error.
        w.starts
            .push_back(Err("cannot start the list resolver: EAGAIN".into()));
        w.run(&mut m, admitted(2));
        w.run(&mut m, Event::Dispatch);
        assert_eq!(
            w.take(),
            s(&[
                "start 1000",
                "error: uid 1000: cannot start the list resolver: EAGAIN",
                "reply #2 refused: cannot start the list resolver: EAGAIN",
            ])
        );
        // Its answer says the launch must be refused (a fatal record).
        w.run(&mut m, admitted(3));
        w.run(&mut m, Event::Dispatch);
        let fatal = answers(&[1], &[(b'F', "cannot read /etc/x: EIO")]);
        w.run(
            &mut m,
            Event::Answered {
                uid: UID,
                answer: Answer::Done(fatal),
            },
        );
        assert_eq!(
            w.take(),
            s(&[
                "start 1000",
                "observe 1000 [3]",
                "warn: uid 1000: cannot read /etc/x: EIO",
                "reply #3 refused: cannot read /etc/x: EIO",
                "freed 1",
            ])
        );
        assert_eq!(m.stage(UID), "idle");
    }

    #[test]
    fn a_deadline_passing_kills_and_refuses() {
        let mut m = Machine::new(LIMITS);
        let mut w = World::new();
        w.now = 1000;
        w.run(&mut m, admitted(1));
        w.run(&mut m, Event::Dispatch);
        assert_eq!(m.next_deadline(), Some(6000));
        w.now = 5999;
        w.run(&mut m, Event::Tick);
        assert_eq!(w.take(), s(&["start 1000"]), "not yet");
        w.now = 6000;
        w.run(&mut m, Event::Tick);
        let why = "reading the denylists of uid 1000 took longer than 5 s \
                   (a listed path on a stalled mount?)";
        assert_eq!(
            w.take(),
            vec![
                "kill 1000".to_owned(),
                format!("warn: uid 1000: {why}"),
                format!("reply #1 refused: {why}"),
            ]
        );
        assert!(!m.busy());
        // An answer after the kill belongs to nobody.
        w.run(&mut m, done(&[1]));
        assert_eq!(
            w.take(),
            s(&["error: uid 1000: the launch machine got an answer while idle; ignored"])
        );
    }

    #[test]
    fn a_launch_from_inside_only_adds() {
        let (mut m, mut w) = launched(&[1, 2]);
        // The agent edited the list (key 2 gone) and launches from inside,
        // asking for a socket.
        w.inside.push(2);
        w.run(
            &mut m,
            Event::Admitted(Launch {
                id: 2,
                uid: UID,
                pid: pid(2),
                sockets: vec![AllowedSocket {
                    key: key(90),
                    path: "/run/user/1000/agent.sock".into(),
                }],
                ports: vec![AllowedPort {
                    transport: crate::lists::denylist::Transport::Tcp,
                    port: 8000,
                }],
            }),
        );
        w.run(&mut m, Event::Dispatch);
        w.run(&mut m, done(&[1]));
        assert_eq!(
            w.take(),
            lines(&[
                &s(&[
                    "start 1000",
                    "observe 1000 [2] since cg7@1",
                    "ensure 1000",
                    "count 1000 cg7 with 1 keys",
                    "apply 1000 cg7 1 keys add-only for 1",
                    "record 1000 cg7",
                    "check 1000",
                ]),
                &moved(2),
                &s(&["freed 1"]),
            ])
        );
        // Nothing removed, no socket allowed, and the launch is told so.
        assert_eq!(w.held.files(), &[key(1), key(2)]);
        // The lines that name denials: replaced from outside, added to from
        // inside (the kept keys' lines stay nameable).
        assert_eq!(
            w.entries.iter().map(|e| e.2).collect::<Vec<_>>(),
            [true, false]
        );
        let notices = &w.replies[1].1.notices;
        assert_eq!(notices.len(), 2, "{notices:?}");
        assert!(notices[0].starts_with("1 entries no longer in the lists stay denied"));
        assert!(notices[1].starts_with(
            "socket lines are not applied by a launch from inside a sandbox: \
             /run/user/1000/agent.sock, port tcp:8000 stays refused"
        ));
        // The same lists again from inside: reused, and told so again.
        w.inside.push(9);
        w.run(&mut m, admitted(9));
        w.run(&mut m, Event::Dispatch);
        w.run(&mut m, done(&[1]));
        let t = w.take();
        assert_eq!(t[1], "observe 1000 [9] since cg7@2");
        assert!(
            t[2].starts_with("info: uid 1000: lists and sandbox unchanged"),
            "{t:?}"
        );
        assert!(!t.iter().any(|l| l.starts_with("apply")), "{t:?}");
        assert!(
            w.replies[2].1.notices[0].starts_with("1 entries no longer in the lists stay denied")
        );
        // A batch with one launcher inside is add-only as a whole.
        w.run(&mut m, admitted(3));
        w.run(&mut m, admitted(4));
        w.inside.push(4);
        w.run(&mut m, Event::Dispatch);
        w.run(&mut m, done(&[3]));
        let t = w.take();
        assert!(
            t.contains(&"apply 1000 cg7 1 keys add-only for 2".to_owned()),
            "{t:?}"
        );
        assert_eq!(w.held.files(), &[key(1), key(2), key(3)]);
        // The next launch from outside removes what is no longer listed.
        w.run(&mut m, admitted(5));
        w.run(&mut m, Event::Dispatch);
        w.run(&mut m, done(&[3]));
        let t = w.take();
        assert!(
            t.contains(&"apply 1000 cg7 1 keys exact recall for 1".to_owned()),
            "{t:?}"
        );
        assert_eq!(w.held.files(), &[key(3)]);
        assert!(w.replies[5].1.notices[0].starts_with("2 entries denied until now are no longer"));
    }

    #[test]
    fn an_incomplete_scan_only_adds_keys() {
        let (mut m, mut w) = launched(&[1, 2]);
        w.run(&mut m, admitted(2));
        w.run(&mut m, Event::Dispatch);
        let scan = answers(&[1], &[(b'I', "/home/u/secret/x: permission denied")]);
        w.run(
            &mut m,
            Event::Answered {
                uid: UID,
                answer: Answer::Done(scan),
            },
        );
        assert_eq!(
            w.take(),
            lines(&[
                &s(&[
                    "start 1000",
                    "observe 1000 [2] since cg7@1",
                    "warn: uid 1000: a directory entry's scan is incomplete \
                     (/home/u/secret/x: permission denied); no key is removed",
                    "ensure 1000",
                    "count 1000 cg7 with 1 keys",
                    // The keys only add; the launch itself is from outside
                    // (the record is consulted, the sockets are set).
                    "apply 1000 cg7 1 keys add-only recall incomplete for 1",
                    "record 1000 cg7",
                    "sockets 1000 cg7 0",
                    "check 1000",
                ]),
                &moved(2),
                &s(&["freed 1"]),
            ])
        );
        assert_eq!(w.held.files(), &[key(1), key(2)]);
    }

    #[test]
    fn a_forgotten_sandbox_is_refused_an_incomplete_scan_that_loses_recorded_keys() {
        let (mut m, mut w) = launched(&[1, 2]);
        // A daemon restart or a reboot forgot the sandbox; the record
        // holds keys 1 and 2. The agent had made the directory holding the
        // file of key 2 unreadable: the scan misses it.
        w.held = DenySet::default();
        w.recorded = DenySet::new(vec![key(1), key(2)], vec![]);
        let incomplete = |m: &mut Machine, w: &mut World, id: LaunchId, inos: &[u64]| {
            w.run(m, admitted(id));
            w.run(m, Event::Dispatch);
            let scan = answers(inos, &[(b'I', "/home/u/.ssh/locked: permission denied")]);
            w.run(
                m,
                Event::Answered {
                    uid: UID,
                    answer: Answer::Done(scan),
                },
            );
            w.take()
        };
        let why = rules::incomplete_scan_refusal(
            Some("/home/u/.ssh/locked: permission denied"),
            rules::RecordedLoss::Entries(1),
        )
        .unwrap();
        assert_eq!(
            incomplete(&mut m, &mut w, 2, &[1]),
            s(&[
                "start 1000",
                "observe 1000 [2] since cg7@1",
                "warn: uid 1000: a directory entry's scan is incomplete \
                 (/home/u/.ssh/locked: permission denied); no key is removed",
                "ensure 1000",
                "count 1000 cg7 with 1 keys",
                "apply 1000 cg7 1 keys add-only recall incomplete for 1",
                &format!("error: uid 1000: {why}"),
                &format!("reply #2 refused: {why}"),
                "freed 1",
            ])
        );
        // Nothing applied, nothing recorded, nobody moved: the next launch
        // is judged the same way.
        assert_eq!(w.held.entries(), 0);
        assert!(incomplete(&mut m, &mut w, 3, &[1]).contains(&format!("reply #3 refused: {why}")));
        // An incomplete scan that still finds every recorded key launches.
        let t = incomplete(&mut m, &mut w, 4, &[1, 2]);
        assert!(t.contains(&"reply #4 ok".to_owned()), "{t:?}");
        assert_eq!(w.held.files(), &[key(1), key(2)]);
    }

    #[test]
    fn a_kernel_drop_rewrites_the_keys_once() {
        let (mut m, mut w) = launched(&[1, 2]);
        let relaunch = |m: &mut Machine, w: &mut World, id: LaunchId| {
            w.run(m, admitted(id));
            w.run(m, Event::Dispatch);
            w.run(m, done(&[1, 2]));
            w.take()
        };
        let reused = "info: uid 1000: lists and sandbox unchanged since the last apply; \
                      1 launch(es)";
        assert!(relaunch(&mut m, &mut w, 2).contains(&reused.to_owned()));
        // The kernel dropped key 2 (its inode was freed and reused).
        w.held = DenySet::new(vec![key(1)], vec![]);
        w.dropped = true;
        assert_eq!(
            relaunch(&mut m, &mut w, 3),
            lines(&[
                &s(&[
                    "start 1000",
                    "observe 1000 [3] since cg7@1",
                    "ensure 1000",
                    "apply 1000 cg7 2 keys exact recall for 1",
                    "record 1000 cg7 changed",
                    "sockets 1000 cg7 0",
                    "check 1000",
                ]),
                &moved(3),
                &s(&["freed 2"]),
            ])
        );
        assert_eq!(w.held.files(), &[key(1), key(2)]);
        // Once: the next relaunch reuses again.
        let t = relaunch(&mut m, &mut w, 4);
        assert_eq!(t[1], "observe 1000 [4] since cg7@2");
        assert_eq!(t[2], reused);
    }

    #[test]
    fn a_reload_reapplies_without_a_launch() {
        let (mut m, mut w) = launched(&[1]);
        w.run(
            &mut m,
            Event::Reload {
                uids: vec![UID, 1001],
            },
        );
        w.run(&mut m, Event::Reload { uids: vec![1001] });
        assert!(m.busy(), "re-applies wait");
        w.run(&mut m, Event::Dispatch);
        assert_eq!(w.take(), s(&["start 1000", "start 1001"]));
        // uid 1000: unchanged, reused; no launch, nothing to move.
        w.run(&mut m, done(&[1]));
        assert_eq!(
            w.take(),
            s(&[
                "observe 1000 [] since cg7@1",
                "info: uid 1000: lists and sandbox unchanged since the last apply; 0 launch(es)",
                "record 1000 cg7",
            ])
        );
        // uid 1001: an add-only apply (no launch seen outside), no sockets.
        w.exists = false;
        w.held = DenySet::default();
        w.run(
            &mut m,
            Event::Answered {
                uid: 1001,
                answer: Answer::Done(answers(&[5], &[])),
            },
        );
        assert_eq!(
            w.take(),
            s(&[
                "observe 1001 []",
                "ensure 1001",
                "count 1001 cg7 with 1 keys",
                "apply 1001 cg7 1 keys add-only for 0",
                "record 1001 cg7 changed",
                "freed 1",
            ])
        );
        assert!(!m.busy());
        // A re-apply that fails is counted.
        w.run(&mut m, Event::Reload { uids: vec![UID] });
        w.run(&mut m, Event::Dispatch);
        w.now = 10_000;
        w.run(&mut m, Event::Tick);
        let t = w.take();
        assert_eq!(t[0], "start 1000");
        assert_eq!(t[1], "kill 1000");
        assert_eq!(t.last().map(String::as_str), Some("reapply failed"));
        // A launch waiting wins over a re-apply of its uid: one resolution.
        w.run(&mut m, Event::Reload { uids: vec![UID] });
        w.run(&mut m, admitted(2));
        w.run(&mut m, Event::Dispatch);
        assert_eq!(w.take(), s(&["start 1000"]));
        assert!(!m.reapply.contains(&UID));
    }

    #[test]
    fn a_launcher_dead_before_its_move_is_not_moved() {
        let mut m = Machine::new(LIMITS);
        let mut w = World::new();
        w.dead.push(1);
        w.run(&mut m, admitted(1));
        w.run(&mut m, admitted(2));
        w.run(&mut m, Event::Dispatch);
        w.run(&mut m, done(&[1]));
        let why = "process 4001 exited before it could be moved";
        assert_eq!(
            w.take(),
            lines(&[
                &s(&[
                    "start 1000",
                    "observe 1000 [1, 2]",
                    "ensure 1000",
                    "apply 1000 cg7 1 keys exact recall for 2",
                    "record 1000 cg7 changed",
                    "sockets 1000 cg7 0",
                    "check 1000",
                    "inspect #1",
                    // No move: only the refusal, to a launcher that is gone.
                    &format!("warn: uid 1000 pid 4001: {why}"),
                    &format!("reply #1 refused: {why}"),
                ]),
                &moved(2),
                &s(&["freed 1"]),
            ])
        );
    }

    #[test]
    fn a_launcher_dead_during_its_move_is_refused_and_its_pid_checked() {
        let mut m = Machine::new(LIMITS);
        let mut w = World::new();
        w.dies_moving.push(1);
        w.run(&mut m, admitted(1));
        w.run(&mut m, Event::Dispatch);
        w.run(&mut m, done(&[1]));
        let t = w.take();
        let why = "process 4001 exited while being moved";
        assert_eq!(
            t[t.len() - 8..],
            s(&[
                "inspect #1",
                "move #1",
                "error: pid 4001 exited while being moved; checking for a reused pid",
                "recheck #1",
                "error: pid 4001 was reused during the move: the new process (parent 1) is now \
                 in uid 1000's sandbox and stays there",
                &format!("warn: uid 1000 pid 4001: {why}"),
                &format!("reply #1 refused: {why}"),
                "freed 1",
            ])
        );
    }

    #[test]
    fn dispatch_respects_the_cap_and_goes_on_after_a_failed_start() {
        let mut m = Machine::new(Limits {
            deadline: 5000,
            max_resolving: 1,
        });
        let mut w = World::new();
        for (id, uid) in [(1, 1003), (2, 1001), (3, 1002)] {
            w.run(
                &mut m,
                Event::Admitted(Launch {
                    id,
                    uid,
                    pid: pid(id),
                    sockets: Vec::new(),
                    ports: Vec::new(),
                }),
            );
        }
        // The lowest uid first; its start fails, so the next one starts;
        // then the cap.
        w.starts.push_back(Err("no".into()));
        w.run(&mut m, Event::Dispatch);
        assert_eq!(
            w.take(),
            s(&[
                "start 1001",
                "error: uid 1001: no",
                "reply #2 refused: no",
                "start 1002",
            ])
        );
        assert_eq!((m.stage(1002), m.stage(1003)), ("resolving", "idle"));
    }
}
