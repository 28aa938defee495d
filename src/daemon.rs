//! `agent-sandbox-execd`: the root daemon, one synchronous poll loop.
//!
//! Start-up: check the kernel (bpf LSM, BTF) → mount bpffs if needed → find
//! the cgroup2 tree → load the program with the pinned maps, attach and pin its
//! link → drop state of sandboxes whose cgroup is gone → prepare the request
//! directory → write the ready file and tell systemd READY=1 → re-apply every
//! existing sandbox's lists in the background of the loop.
//!
//! One launch: a `req.<token>` file appears → read it safely, take its owner as
//! the requester's uid, pin the named process with a pidfd and check its uids
//! → queue it → one resolver child per uid reads the lists
//! ([`crate::resolve`]) → create `uid-<uid>` if needed, diff-apply the keys
//! ([`crate::maps::Bpf::apply`]) → move each queued process in, checking its
//! pidfd around the write → write `rep.<token>`.
//!
//! Signals: SIGTERM/SIGINT stop serving (the program stays attached through its
//! pinned link; new launches fail closed until a daemon is back); SIGHUP
//! re-applies every sandbox's lists.

use std::collections::{HashMap, VecDeque};
use std::ffi::OsString;
use std::fs;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::Path;

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime};

use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use nix::sys::inotify::{AddWatchFlags, InitFlags, Inotify};

use crate::cgroup::{self, CgroupError, Tree};
use crate::failure;
use crate::maps::{self, ApplyMode, Bpf, BpfError};
use crate::process::{self, Pidfd};
use crate::request::{self, Name, Reply, Request};
use crate::resolve::{self, Outcome, Resolver};

/// Files in the request directory older than this are removed, in seconds.
const STALE_AFTER: i64 = 120;
/// Requests one uid may have waiting at once.
const MAX_QUEUED_PER_UID: usize = 64;
/// Resolutions running at once (one per uid at most).
const MAX_RESOLVERS: usize = 16;
/// Resolver processes killed while they owed an answer and not reaped yet
/// that one uid may have before its launches are refused: each may sit in
/// the daemon's cgroup for good (a request to a FUSE server that never
/// answers), counted against its task limit. A pair just killed for a
/// retry counts too, so this leaves room for one.
const MAX_STUCK_PER_UID: usize = 4;
/// Warnings about a user's list carried in one reply.
const MAX_WARNINGS: usize = 50;
/// Applies that parse or remove at least this many entries are followed by
/// a malloc_trim(3).
const TRIM_AFTER: usize = 10_000;
/// Longest sleep of the loop, for housekeeping.
const TICK: Duration = Duration::from_millis(1000);

static STOP: AtomicBool = AtomicBool::new(false);
static RELOAD: AtomicBool = AtomicBool::new(false);

/// Errors that stop the daemon.
#[derive(Debug, thiserror::Error)]
pub enum DaemonError {
    /// The BPF side failed.
    #[error(transparent)]
    Bpf(#[from] BpfError),
    /// The cgroup tree failed.
    #[error(transparent)]
    Cgroup(#[from] CgroupError),
    /// Any other set-up step failed.
    #[error("{what}: {source}")]
    Setup {
        /// The step.
        what: String,
        /// The error.
        #[source]
        source: io::Error,
    },
}

fn setup(what: impl Into<String>) -> impl FnOnce(io::Error) -> DaemonError {
    let what = what.into();
    move |source| DaemonError::Setup { what, source }
}

/// Entry point of the daemon mode; `args` excludes argv[0].
pub fn main(args: &[OsString]) -> u8 {
    match args.first().map(|a| a.to_str().unwrap_or("\u{fffd}")) {
        None => {}
        Some("--help" | "-h") => {
            println!(
                "Usage: agent-sandbox-execd\n\n\
                 Root daemon of agent-sandbox-exec: loads the BPF LSM program, keeps each user's\n\
                 denylist in its maps and moves launchers into their sandbox cgroup.\n\
                 Runs in the foreground; normally started by agent-sandbox-execd.service.\n\
                 SIGHUP re-applies every sandbox's lists; SIGTERM stops serving (enforcement stays).\n\
                 \n\
                 agent-sandbox-execd --disable\n\
                 \x20   turns enforcement off on purpose: unpins the programs and maps, so running\n\
                 \x20   sandboxes are no longer enforced. Stop the service first; starting it again\n\
                 \x20   turns enforcement back on.\n\
                 See agent-sandbox-execd(8)."
            );
            return 0;
        }
        Some("--version" | "-V") => {
            println!("agent-sandbox-execd {}", env!("CARGO_PKG_VERSION"));
            return 0;
        }
        Some("--disable") if args.len() == 1 => return disable(),
        Some(other) => {
            eprintln!("agent-sandbox-execd: unknown argument {other:?}; try --help");
            return 64;
        }
    }
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("info"))
        .format_timestamp(None)
        .format_target(false)
        .init();
    match run() {
        Ok(()) => 0,
        Err(e) => {
            // Permanent (78, not restarted) or not (75/1, systemd restarts it).
            let verdict = failure::classify(&e, failure::KernelFacts::read());
            log::error!("{}", verdict.message);
            verdict.class.exit_status()
        }
    }
}

/// `agent-sandbox-execd --disable`: unpins every program link and map under
/// [`maps::PIN_ROOT`], which detaches the programs. Refuses while a daemon
/// serves (it would keep answering launches with nothing enforced).
fn disable() -> u8 {
    if !nix::unistd::geteuid().is_root() {
        eprintln!("agent-sandbox-execd: --disable must run as root");
        return 1;
    }
    match lock_instance() {
        Ok(Some(_lock)) => {}
        Ok(None) => {
            eprintln!(
                "agent-sandbox-execd: a daemon is running ({LOCK_FILE} is locked); stop it first: systemctl stop agent-sandbox-execd"
            );
            return 1;
        }
        Err(e) => {
            eprintln!("agent-sandbox-execd: --disable: {e}");
            return 1;
        }
    }
    match maps::unpin_all() {
        Ok(removed) if removed.is_empty() => {
            println!(
                "agent-sandbox-execd: nothing pinned under {}; enforcement was already off",
                maps::PIN_ROOT
            );
            0
        }
        Ok(removed) => {
            for r in &removed {
                println!("unpinned {}", r.display());
            }
            println!(
                "agent-sandbox-execd: enforcement is OFF: the LSM programs are detached and running sandboxes \
                 are no longer enforced; `systemctl start agent-sandbox-execd` turns it back on"
            );
            0
        }
        Err(e) => {
            eprintln!("agent-sandbox-execd: --disable: {e}");
            1
        }
    }
}

fn run() -> Result<(), DaemonError> {
    if !nix::unistd::geteuid().is_root() {
        return Err(DaemonError::Setup {
            what: "agent-sandbox-execd must run as root".into(),
            source: io::Error::from(io::ErrorKind::PermissionDenied),
        });
    }
    let _lock = lock_instance()?.ok_or_else(|| DaemonError::Setup {
        what: format!("another agent-sandbox-execd holds {LOCK_FILE}"),
        source: io::Error::from(io::ErrorKind::AddrInUse),
    })?;
    maps::check_kernel(
        maps::read_lsm_list().as_deref(),
        Path::new("/sys/kernel/btf/vmlinux").exists(),
    )?;
    maps::ensure_bpffs()?;
    let tree = Tree::open()?;
    maps::route_libbpf_log();
    let bpf = Bpf::load_and_attach()?;
    log::info!(
        "lsm/file_open attached; maps pinned in {}",
        bpf.pin_dir().display()
    );

    let (wake_r, wake_w) =
        nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC | nix::fcntl::OFlag::O_NONBLOCK)
            .map_err(|e| setup("create the signal pipe")(io::Error::from(e)))?;
    for sig in [libc::SIGTERM, libc::SIGINT, libc::SIGHUP] {
        let flag = if sig == libc::SIGHUP { &RELOAD } else { &STOP };
        signal_hook::flag::register(sig, flag).map_err(setup("install signal handlers"))?;
        let w = wake_w.try_clone().map_err(setup("dup the signal pipe"))?;
        signal_hook::low_level::pipe::register(sig, w).map_err(setup("install signal handlers"))?;
    }

    let dir = prepare_request_dir()?;
    let inotify = Inotify::init(InitFlags::IN_NONBLOCK | InitFlags::IN_CLOEXEC)
        .map_err(|e| setup("inotify_init")(io::Error::from(e)))?;
    inotify
        .add_watch(
            request::REQ_DIR,
            // Requests arrive by rename (`.req.<token>` -> `req.<token>`);
            // anything else is found by the scan of every wake-up and tick.
            AddWatchFlags::IN_MOVED_TO,
        )
        .map_err(|e| setup(format!("watch {}", request::REQ_DIR))(io::Error::from(e)))?;

    let mut d = Daemon {
        tree,
        bpf,
        dir,
        queue: HashMap::new(),
        running: Vec::new(),
        reapply: VecDeque::new(),
        killed: Vec::new(),
        pool: resolve::Pool::default(),
        stuck: HashMap::new(),
        own_cgroup: process::read_v2_cgroup(std::process::id() as i32)
            .map_err(setup("read /proc/self/cgroup"))?,
        last_expire: Instant::now(),
        reapply_failures: 0,
        applied: HashMap::new(),
    };
    d.reconcile();
    // Re-apply every existing sandbox into this layout's maps before serving,
    // so that earlier layouts can be retired without a gap.
    d.settle();
    d.carry_over_other_layouts();
    if d.reapply_failures == 0 {
        maps::retire_other_layouts(d.bpf.pin_dir());
    } else {
        log::warn!(
            "{} sandbox(es) could not be re-applied; earlier map layouts (if any) stay attached",
            d.reapply_failures
        );
    }
    publish_ready()?;
    sd_notify("READY=1\nSTATUS=serving");
    log::info!("ready; requests in {}", request::REQ_DIR);

    let result = d.serve(&inotify, wake_r);
    let _ = fs::remove_file(request::READY_FILE);
    sd_notify("STOPPING=1");
    for r in d.running.drain(..) {
        r.resolver.kill(&mut d.killed);
    }
    d.killed.extend(d.stuck.drain().flat_map(|(_, pids)| pids));
    d.pool.clear(&mut d.killed);
    resolve::reap(&mut d.killed);
    log::info!(
        "stopped serving; the program stays attached (pinned in {})",
        d.bpf.pin_dir().display()
    );
    result
}

/// Held (flock) by the running daemon for its whole life.
const LOCK_FILE: &str = "/run/agent-sandbox-exec/daemon.lock";

/// Takes the instance lock: Some(file) while we hold it, None if another
/// process (a running daemon, even one still starting) holds it.
fn lock_instance() -> Result<Option<fs::File>, DaemonError> {
    match fs::create_dir(request::RUN_DIR) {
        Ok(()) => fs::set_permissions(request::RUN_DIR, fs::Permissions::from_mode(0o755))
            .map_err(setup(format!("chmod {}", request::RUN_DIR)))?,
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(setup(format!("create {}", request::RUN_DIR))(e)),
    }
    let file = fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(LOCK_FILE)
        .map_err(setup(format!("open {LOCK_FILE}")))?;
    // SAFETY: flock on a descriptor we own.
    if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0 {
        return Ok(Some(file));
    }
    let e = io::Error::last_os_error();
    if e.raw_os_error() == Some(libc::EWOULDBLOCK) {
        return Ok(None);
    }
    Err(setup(format!("lock {LOCK_FILE}"))(e))
}

/// Checks /run/agent-sandbox-exec and creates its req/ directory (root, 1733).
fn prepare_request_dir() -> Result<OwnedFd, DaemonError> {
    // RUN_DIR itself was created by lock_instance().
    let run_md = fs::symlink_metadata(request::RUN_DIR)
        .map_err(setup(format!("stat {}", request::RUN_DIR)))?;
    if !run_md.is_dir() || run_md.uid() != 0 || run_md.mode() & 0o022 != 0 {
        return Err(DaemonError::Setup {
            what: format!(
                "{} must be a root-owned directory not writable by others",
                request::RUN_DIR
            ),
            source: io::Error::from(io::ErrorKind::PermissionDenied),
        });
    }
    match fs::symlink_metadata(request::REQ_DIR) {
        Ok(md) if md.is_dir() && md.uid() == 0 => {}
        Ok(md) if md.is_dir() => fs::remove_dir_all(request::REQ_DIR)
            .map_err(setup(format!("remove foreign {}", request::REQ_DIR)))?,
        Ok(_) => fs::remove_file(request::REQ_DIR)
            .map_err(setup(format!("remove {}", request::REQ_DIR)))?,
        Err(_) => {}
    }
    match fs::create_dir(request::REQ_DIR) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(setup(format!("create {}", request::REQ_DIR))(e)),
    }
    fs::set_permissions(request::REQ_DIR, fs::Permissions::from_mode(0o1733))
        .map_err(setup(format!("chmod {}", request::REQ_DIR)))?;
    request::open_dir(request::REQ_DIR).map_err(setup(format!("open {}", request::REQ_DIR)))
}

fn publish_ready() -> Result<(), DaemonError> {
    let tmp = format!("{}.tmp", request::READY_FILE);
    fs::write(&tmp, format!("{}\n", std::process::id())).map_err(setup(format!("write {tmp}")))?;
    fs::set_permissions(&tmp, fs::Permissions::from_mode(0o644))
        .map_err(setup(format!("chmod {tmp}")))?;
    fs::rename(&tmp, request::READY_FILE).map_err(setup(format!("rename {tmp}")))
}

/// Sends a state string to systemd's notification socket, if there is one
/// (sd_notify(3) protocol: one datagram to $NOTIFY_SOCKET, `@` = abstract).
fn sd_notify(state: &str) {
    use std::os::linux::net::SocketAddrExt;
    use std::os::unix::net::{SocketAddr, UnixDatagram};
    let Some(path) = std::env::var_os("NOTIFY_SOCKET") else {
        return;
    };
    let bytes = std::os::unix::ffi::OsStrExt::as_bytes(path.as_os_str());
    let addr = match bytes.strip_prefix(b"@") {
        Some(name) => SocketAddr::from_abstract_name(name),
        None => SocketAddr::from_pathname(Path::new(&path)),
    };
    let sent = addr.and_then(|a| UnixDatagram::unbound()?.send_to_addr(state.as_bytes(), &a));
    if let Err(e) = sent {
        log::warn!("cannot notify systemd: {e}");
    }
}

/// A request that passed authentication and waits for its uid's resolver.
#[derive(Debug)]
struct Pending {
    token: String,
    uid: u32,
    pidfd: Pidfd,
}

/// A resolver in flight and the requests it serves (empty for a re-apply).
struct Running {
    resolver: Resolver,
    batch: Vec<Pending>,
}

struct Daemon {
    tree: Tree,
    bpf: Bpf,
    dir: OwnedFd,
    /// Authenticated requests waiting for a resolver, per uid.
    queue: HashMap<u32, Vec<Pending>>,
    running: Vec<Running>,
    /// uids whose sandbox must be re-applied without a request (start-up, SIGHUP).
    reapply: VecDeque<u32>,
    /// Ended resolver processes not reaped yet.
    killed: Vec<nix::unistd::Pid>,
    /// Idle resolver processes, kept for the next launch of their uid.
    pool: resolve::Pool,
    /// Resolver processes killed at the deadline and not reaped yet, per
    /// uid: one stuck on a stalled FUSE or NFS request may never die.
    stuck: HashMap<u32, Vec<nix::unistd::Pid>>,
    /// The daemon's own cgroup v2 path (its resolvers run there too).
    own_cgroup: String,
    /// When the pool was last checked for idle and dead processes.
    last_expire: Instant,
    /// Re-applies (without a launch) that failed since start-up.
    reapply_failures: usize,
    /// Per uid: the answers its last successful apply was made of, while
    /// its resolvers are kept (see [`Applied`]).
    applied: HashMap<u32, Applied>,
}

/// What a uid's last successful apply was made of. A resolver that finds
/// nothing changed sends its last answer again (src/watch.rs); when both
/// answers are byte for byte these, and the sandbox's entries are as that
/// apply left them ([`Bpf::unchanged_since`]), applying them again would
/// change nothing, and the daemon skips the parse and the apply.
struct Applied {
    answers: resolve::Answers,
    cgid: u64,
    /// [`Bpf::version`] of the sandbox after that apply.
    version: u64,
    /// How many entries the sandbox holds beyond these answers' keys: 0
    /// after an exact apply (unless a stale key's deletion failed), which a
    /// launch from outside must otherwise try to remove again; shown in the
    /// add-only notice.
    unlisted: usize,
    /// How many entries the answers hold.
    entries: usize,
    user_warnings: Vec<String>,
    admin_warnings: Vec<String>,
}

impl Daemon {
    /// Removes sandbox cgroups no process uses any more, drops map state of
    /// sandboxes whose cgroup is gone, and schedules a re-apply of every
    /// remaining sandbox.
    fn reconcile(&mut self) {
        let mut live = match self.tree.list() {
            Ok(l) => l,
            Err(e) => {
                log::error!("cannot list sandboxes: {e}");
                return;
            }
        };
        live.retain(|(uid, _)| {
            let removed = self.tree.remove_if_empty(*uid);
            if removed {
                log::info!("removed the empty sandbox cgroup of uid {uid}");
            }
            !removed
        });
        let live_ids: Vec<u64> = live.iter().map(|(_, id)| *id).collect();
        for cgid in self.bpf.known_sandboxes() {
            if !live_ids.contains(&cgid) {
                log::info!("dropping the state of vanished sandbox cgroup {cgid}");
                self.bpf.forget_sandbox(cgid);
            }
        }
        for (uid, _) in live {
            if !self.reapply.contains(&uid) {
                self.reapply.push_back(uid);
            }
        }
    }

    /// Adds to this layout's maps every key an earlier layout's maps hold for
    /// a live sandbox, so retiring that layout frees nothing.
    fn carry_over_other_layouts(&mut self) {
        let live: std::collections::HashSet<u64> = match self.tree.list() {
            Ok(l) => l.into_iter().map(|(_, id)| id).collect(),
            Err(e) => {
                log::error!("cannot list sandboxes: {e}");
                self.reapply_failures += 1;
                return;
            }
        };
        let (found, errors) = maps::keys_in_other_layouts(self.bpf.pin_dir(), &live);
        for e in errors {
            log::warn!("{e}");
            self.reapply_failures += 1;
        }
        for (cgid, files) in found {
            match self.bpf.apply(cgid, &files, ApplyMode::AddOnly) {
                Ok(stats) if stats.added > 0 => {
                    log::info!(
                        "cgroup {cgid}: carried {} keys over from an earlier layout",
                        stats.added
                    )
                }
                Ok(_) => {}
                Err(e) => {
                    log::error!(
                        "cgroup {cgid}: cannot carry keys over: {}",
                        crate::error_chain(&e)
                    );
                    self.reapply_failures += 1;
                }
            }
        }
    }

    /// Runs the pending re-applies to completion (each bounded by the resolver
    /// deadline) without serving requests. Used once at start-up.
    fn settle(&mut self) {
        let busy = |d: &Daemon| !d.reapply.is_empty() || !d.running.is_empty();
        while busy(self) && !STOP.load(Ordering::SeqCst) {
            self.dispatch();
            match self.wait(&[]) {
                Ok(ready) => self.pump_resolvers(&ready),
                Err(e) => {
                    log::error!("poll: {e}");
                    return;
                }
            }
        }
    }

    /// Polls `extra` and every running resolver's sockets until one is
    /// readable or the nearest resolver deadline (at most [`TICK`]) passes.
    /// Returns the readiness of `extra`, then of `self.running` (a resolver
    /// is ready if any of its sockets is), in order; an interrupted poll
    /// reports nothing ready.
    fn wait(&self, extra: &[BorrowedFd<'_>]) -> nix::Result<Vec<bool>> {
        // owner[i]: which entry of the result fds[i] counts for.
        let mut owner: Vec<usize> = (0..extra.len()).collect();
        let mut fds: Vec<PollFd> = extra
            .iter()
            .map(|fd| PollFd::new(*fd, PollFlags::POLLIN))
            .collect();
        for (i, r) in self.running.iter().enumerate() {
            for fd in r.resolver.fds() {
                fds.push(PollFd::new(fd, PollFlags::POLLIN));
                owner.push(extra.len() + i);
            }
        }
        let mut ready = vec![false; extra.len() + self.running.len()];
        let ms = u16::try_from(self.next_timeout().as_millis()).unwrap_or(u16::MAX);
        match poll(&mut fds, PollTimeout::from(ms)) {
            Ok(_) => {
                for (f, &o) in fds.iter().zip(&owner) {
                    ready[o] |= f.revents().is_some_and(|r| !r.is_empty());
                }
                Ok(ready)
            }
            Err(nix::errno::Errno::EINTR) => Ok(ready),
            Err(e) => Err(e),
        }
    }

    fn serve(&mut self, inotify: &Inotify, wake: OwnedFd) -> Result<(), DaemonError> {
        self.scan();
        while !STOP.load(Ordering::SeqCst) {
            if RELOAD.swap(false, Ordering::SeqCst) {
                log::info!("SIGHUP: re-applying every sandbox");
                self.reconcile();
            }
            self.dispatch();
            let ready = self
                .wait(&[inotify.as_fd(), wake.as_fd()])
                .map_err(|e| setup("poll")(io::Error::from(e)))?;
            if ready[1] {
                drain(&wake);
            }
            if ready[0] {
                let _ = inotify.read_events();
            }
            self.pump_resolvers(&ready[2..]);
            // Scan on every wake-up: cheap (a few names) and robust against
            // inotify queue overflow.
            self.scan();
            if self.last_expire.elapsed() >= TICK {
                self.last_expire = Instant::now();
                self.pool.expire(&mut self.killed);
                // Without its resolvers a uid's next answers come from new
                // processes: not worth the memory of keeping the last ones.
                let (pool, running) = (&self.pool, &self.running);
                let mut freed = 0;
                self.applied.retain(|uid, a| {
                    let keep = pool.has_uid(*uid) || running.iter().any(|r| r.resolver.uid == *uid);
                    if !keep {
                        freed += a.entries;
                    }
                    keep
                });
                // Launches that reused large answers left the buffers they
                // read them into free but not trimmed (the next answer would
                // reuse them): hand them back with the answers.
                if freed >= TRIM_AFTER {
                    trim();
                }
            }
            resolve::reap(&mut self.killed);
            self.stuck.retain(|_, pids| {
                resolve::reap(pids);
                !pids.is_empty()
            });
        }
        Ok(())
    }

    fn next_timeout(&self) -> Duration {
        let now = Instant::now();
        self.running
            .iter()
            .map(|r| r.resolver.deadline.saturating_duration_since(now))
            .min()
            .map_or(TICK, |d| d.min(TICK))
    }

    /// Looks at every name in the request directory.
    fn scan(&mut self) {
        let entries = match fs::read_dir(request::REQ_DIR) {
            Ok(e) => e,
            Err(e) => {
                log::error!("cannot read {}: {e}", request::REQ_DIR);
                return;
            }
        };
        let now = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs() as i64);
        for entry in entries.flatten() {
            let name = entry.file_name();
            match request::classify(std::os::unix::ffi::OsStrExt::as_bytes(name.as_os_str())) {
                Name::Request(token) => self.accept(&token),
                kind => {
                    // Foreign names and oversized files go at once; replies nobody
                    // collected and partial requests when old. Age is taken from
                    // ctime, which a user cannot set (unlike mtime).
                    let doomed = entry.metadata().is_ok_and(|m| {
                        kind == Name::Foreign
                            || m.len() > request::MAX_REPLY_BYTES
                            || (kind == Name::Partial && m.len() > request::MAX_REQUEST_BYTES)
                            || now - m.ctime() > STALE_AFTER
                    });
                    if doomed {
                        let n = name.to_string_lossy().into_owned();
                        log::debug!("removing stale {n}");
                        let _ = request::unlink_at(self.dir.as_fd(), &n);
                    }
                }
            }
        }
    }

    /// Reads, consumes and authenticates one request; queues it or refuses it.
    fn accept(&mut self, token: &str) {
        let name = format!("req.{token}");
        let opened = request::open_plain(self.dir.as_fd(), &name, request::MAX_REQUEST_BYTES);
        if let Err(e) = request::unlink_at(self.dir.as_fd(), &name) {
            log::warn!("cannot remove request {}: {e}", shown(token));
        }
        let opened = match opened {
            Ok(o) => o,
            Err(e) => {
                // Without a plain file there is no trustworthy owner to reply to.
                log::warn!("request {} rejected: {e}", shown(token));
                return;
            }
        };
        let uid = opened.uid;
        let refuse = |d: &Daemon, why: String| {
            log::warn!("request {} from uid {uid} refused: {why}", shown(token));
            d.reply(token, uid, &Reply::refused(why));
        };
        let req = match Request::parse(&opened.content) {
            Ok(r) => r,
            Err(e) => return refuse(self, format!("bad request: {e}")),
        };
        let pidfd = match authenticate(uid, req.pid) {
            Ok(p) => p,
            Err(why) => return refuse(self, why),
        };
        // A resolver process runs this binary as the user too; moving one in
        // would pass its request off as a launch from outside.
        if self.is_resolver(req.pid) {
            return refuse(
                self,
                format!(
                    "process {} is one of the daemon's list resolvers, not a launcher",
                    req.pid
                ),
            );
        }
        if self.queue.get(&uid).map_or(0, Vec::len) >= MAX_QUEUED_PER_UID {
            return refuse(
                self,
                format!("uid {uid} already has {MAX_QUEUED_PER_UID} launches waiting"),
            );
        }
        log::debug!("request {}: uid {uid} pid {}", shown(token), req.pid);
        self.queue.entry(uid).or_default().push(Pending {
            token: token.to_owned(),
            uid,
            pidfd,
        });
    }

    /// Starts resolvers for uids with waiting requests or pending re-applies.
    fn dispatch(&mut self) {
        let mut uids: Vec<u32> = self
            .queue
            .iter()
            .filter(|(_, q)| !q.is_empty())
            .map(|(u, _)| *u)
            .collect();
        uids.sort_unstable();
        let mut reapply_now = Vec::new();
        for u in self.reapply.iter() {
            if !uids.contains(u) {
                reapply_now.push(*u);
            }
        }
        for uid in uids.into_iter().chain(reapply_now) {
            if self.running.len() >= MAX_RESOLVERS {
                break;
            }
            if self.running.iter().any(|r| r.resolver.uid == uid) {
                continue;
            }
            let batch = self.queue.remove(&uid).unwrap_or_default();
            self.reapply.retain(|u| *u != uid);
            match self.start_resolver(uid, false) {
                Ok(resolver) => self.running.push(Running { resolver, batch }),
                Err(why) => {
                    log::error!("uid {uid}: {why}");
                    if batch.is_empty() {
                        self.reapply_failures += 1;
                    }
                    self.refuse_all(batch, &why);
                }
            }
        }
    }

    /// Whether `pid` is one of this daemon's resolver processes. Any process
    /// in the daemon's own cgroup is (users cannot move processes there),
    /// including a killed resolver still stuck in the kernel; a daemon in the
    /// root cgroup, outside systemd, shares it with anything, so the pids it
    /// knows are checked too.
    fn is_resolver(&self, pid: i32) -> bool {
        let in_service = self.own_cgroup != "/"
            && process::read_v2_cgroup(pid).is_ok_and(|c| c == self.own_cgroup);
        let known = |pids: &[nix::unistd::Pid]| pids.iter().any(|p| p.as_raw() == pid);
        in_service
            || self.pool.holds(pid)
            || self.running.iter().any(|r| r.resolver.holds(pid))
            || known(&self.killed)
            || self.stuck.values().any(|pids| known(pids))
    }

    /// Starts a resolution for `uid`, unless it has [`MAX_STUCK_PER_UID`]
    /// killed resolver processes that have not exited.
    fn start_resolver(&mut self, uid: u32, retried: bool) -> Result<Resolver, String> {
        if let Some(pids) = self.stuck.get_mut(&uid) {
            resolve::reap(pids);
            if pids.len() >= MAX_STUCK_PER_UID {
                return Err(format!(
                    "{} list resolver processes of uid {uid} were killed and have not exited \
                     (a listed path on a stalled FUSE or NFS mount?); fix or unmount it",
                    pids.len()
                ));
            }
        }
        Resolver::start(&mut self.pool, uid, retried, &mut self.killed)
    }

    /// Reads from the resolvers whose pipes polled readable (`readable[i]`
    /// belongs to `self.running[i]`), completes the finished ones and fails
    /// the ones past their deadline. Walks backwards so that `swap_remove`
    /// only moves entries already looked at.
    fn pump_resolvers(&mut self, readable: &[bool]) {
        let now = Instant::now();
        for i in (0..self.running.len()).rev() {
            let has_input = readable.get(i).copied().unwrap_or(false);
            if has_input && self.running[i].resolver.pump() {
                let run = self.running.swap_remove(i);
                let uid = run.resolver.uid;
                // A process that died or broke while it owed an answer may
                // be stuck in the kernel: it counts against the uid's cap.
                let stuck = self.stuck.entry(uid).or_default();
                let outcome = run.resolver.finish(&mut self.pool, stuck);
                let outcome = match outcome {
                    Outcome::Retry(why) => {
                        log::info!("uid {uid}: {why}; starting new list resolvers");
                        match self.start_resolver(uid, true) {
                            Ok(resolver) => {
                                self.running.push(Running {
                                    resolver,
                                    batch: run.batch,
                                });
                                continue;
                            }
                            Err(why) => Outcome::Failed(why),
                        }
                    }
                    other => other,
                };
                let handled = self.complete(uid, run.batch, outcome);
                if handled >= TRIM_AFTER {
                    // A large list's parse, or a large old set, is freed now;
                    // hand the pages back, so that the daemon's RSS is that
                    // of its mirror (and the last answers it keeps).
                    trim();
                }
            } else if now >= self.running[i].resolver.deadline {
                let run = self.running.swap_remove(i);
                let uid = run.resolver.uid;
                run.resolver.kill(self.stuck.entry(uid).or_default());
                let why = format!(
                    "reading the denylists of uid {uid} took longer than {} s (a listed path on a stalled mount?)",
                    resolve::DEADLINE.as_secs()
                );
                self.complete(uid, run.batch, Outcome::Failed(why));
            }
        }
    }

    /// Applies a resolver's outcome for `uid` and answers its batch. Returns
    /// how many entries it parsed or removed from the maps, whichever is
    /// more (0 if it failed or applied nothing new).
    fn complete(&mut self, uid: u32, batch: Vec<Pending>, outcome: Outcome) -> usize {
        let answers = match outcome {
            Outcome::Failed(why) | Outcome::Retry(why) => {
                self.applied.remove(&uid);
                self.fail(uid, batch, &why);
                return 0;
            }
            Outcome::Done(a) => a,
        };
        let mode = self.mode_for(uid, &batch);
        // The sandbox's id as it is (a cgroup made anew has another one).
        let existing = cgroup::cgroup_id(&self.tree.dir_for(uid)).ok();
        let repeat = self.applied.get(&uid).filter(|a| {
            existing == Some(a.cgid)
                && a.answers == answers
                && (a.unlisted == 0 || mode == ApplyMode::AddOnly)
                && self.bpf.unchanged_since(a.cgid, a.version)
        });
        if let Some(a) = repeat {
            for w in &a.admin_warnings {
                log::warn!("{w}");
            }
            log::info!(
                "uid {uid}: lists and sandbox unchanged since the last apply; {} launch(es)",
                batch.len()
            );
            let (warnings, mut notices) = capped(&a.user_warnings);
            // What a full add-only apply would say again; an exact one
            // would remove nothing, so it would say nothing.
            if mode == ApplyMode::AddOnly && a.unlisted > 0 {
                notices.push(removal_notice(ApplyMode::AddOnly, a.unlisted));
            }
            self.admit(uid, batch, &warnings, &notices);
            return 0;
        }
        self.applied.remove(&uid);
        let res = answers.parse();
        let parsed = res.deny.len();
        if let Some(fatal) = &res.fatal {
            self.fail(uid, batch, fatal);
            return parsed;
        }
        for w in &res.admin_warnings {
            log::warn!("{w}");
        }
        let need = res.deny.files().len().max(res.deny.names().len());
        if need > resolve::MAX_KEYS_PER_UID {
            let why = format!(
                "the lists name {need} files, more than the {} allowed per user",
                resolve::MAX_KEYS_PER_UID
            );
            log::warn!("uid {uid}: {why}");
            self.refuse_all(batch, &why);
            return parsed;
        }
        let cgid = match self.tree.ensure(uid) {
            Ok(id) => id,
            Err(e) => {
                log::error!("uid {uid}: {e}");
                self.refuse_all(batch, &format!("cannot create the sandbox cgroup: {e}"));
                return parsed;
            }
        };
        if mode == ApplyMode::AddOnly {
            // An add-only apply keeps what the sandbox holds: the cap is on
            // the union, or launches from inside with ever new lists would
            // fill the shared maps for every other user.
            let (files, names) = self.bpf.union_len(cgid, &res.deny);
            let after = files.max(names);
            if after > resolve::MAX_KEYS_PER_UID {
                let why = format!(
                    "with what the running sandbox already denies, the lists would name {after} files, \
                     more than the {} allowed per user; launch from outside a sandbox to drop old entries",
                    resolve::MAX_KEYS_PER_UID
                );
                log::warn!("uid {uid}: {why}");
                self.refuse_all(batch, &why);
                return 0;
            }
        }
        let (warnings, mut notices) = capped(&res.user_warnings);
        if self.bpf.needs_reload_for(&res.deny) {
            // btrfs was loaded after the programs: load them again so that
            // their CO-RE relocations find its types (no gap: the new links
            // are attached before the old ones go).
            log::info!("uid {uid}: btrfs keys ahead; loading the programs again for btrfs");
            match Bpf::load_and_attach() {
                Ok(b) => self.bpf = b,
                Err(e) => {
                    let why = format!(
                        "cannot load the programs again for btrfs: {}",
                        crate::error_chain(&e)
                    );
                    log::error!("uid {uid}: {why}");
                    self.refuse_all(batch, &why);
                    return 0;
                }
            }
        }
        let removed = match self.bpf.apply(cgid, &res.deny, mode) {
            Ok(stats) => {
                log::info!(
                    "uid {uid}: {} files and {} names denied ({} added, {} {}); {} launch(es)",
                    res.deny.files().len(),
                    res.deny.names().len(),
                    stats.added,
                    stats.removed,
                    if mode == ApplyMode::Exact {
                        "removed"
                    } else {
                        "kept though unlisted"
                    },
                    batch.len()
                );
                if stats.removed > 0 {
                    notices.push(removal_notice(mode, stats.removed));
                }
                stats.removed
            }
            Err(e) => {
                let why = format!("cannot apply the denylist: {}", crate::error_chain(&e));
                log::error!("uid {uid}: {why}");
                self.refuse_all(batch, &why);
                return 0;
            }
        };
        // What the sandbox holds beyond the lists: after an exact apply,
        // stale keys whose deletion failed; after an add-only one, also those
        // it kept on purpose.
        let unlisted = self.bpf.held_len(cgid).saturating_sub(res.deny.len());
        if let Some(version) = self.bpf.version(cgid) {
            self.applied.insert(
                uid,
                Applied {
                    answers,
                    cgid,
                    version,
                    unlisted,
                    entries: res.deny.len(),
                    user_warnings: res.user_warnings.clone(),
                    admin_warnings: res.admin_warnings.clone(),
                },
            );
        }
        self.admit(uid, batch, &warnings, &notices);
        match mode {
            ApplyMode::Exact => parsed.max(removed),
            ApplyMode::AddOnly => parsed,
        }
    }

    /// Refuses `batch` for a resolution of `uid` that failed (a re-apply
    /// without a launch counts as a failed re-apply).
    fn fail(&mut self, uid: u32, batch: Vec<Pending>, why: &str) {
        log::warn!("uid {uid}: {why}");
        if batch.is_empty() {
            self.reapply_failures += 1;
        }
        self.refuse_all(batch, why);
    }

    /// How an apply for `uid` requested by `batch` may change its sandbox. A
    /// launch from inside a sandbox, or a re-apply without any launch, only
    /// adds keys: the agent may have edited the user's list, and its edit
    /// must not free what the running sandbox denies. A requester counts as
    /// outside only if it is seen outside and is still alive after that
    /// read: a launcher that died meanwhile (its cgroup can no longer be
    /// read) may have been an agent's. Called once the lists are resolved.
    fn mode_for(&self, uid: u32, batch: &[Pending]) -> ApplyMode {
        let sandboxed = cgroup::sandbox_path_for(uid);
        let outside = |p: &Pending| {
            process::read_v2_cgroup(p.pidfd.pid()).is_ok_and(|c| c != sandboxed) && p.pidfd.alive()
        };
        if batch.is_empty() || !batch.iter().all(outside) {
            ApplyMode::AddOnly
        } else {
            ApplyMode::Exact
        }
    }

    /// Moves the launchers of `batch` (their lists applied) into the sandbox
    /// of `uid` and replies to each, unless enforcement was turned off.
    fn admit(&self, uid: u32, batch: Vec<Pending>, warnings: &[String], notices: &[String]) {
        if !batch.is_empty() && !self.bpf.links_pinned() {
            let why = "enforcement was turned off (the program links were unpinned); \
                       restart agent-sandbox-execd to turn it back on";
            log::error!("{why}");
            self.refuse_all(batch, why);
            return;
        }
        for p in batch {
            let refusal = self.migrate_checked(&p).err();
            if let Some(why) = &refusal {
                log::warn!("uid {uid} pid {}: {why}", p.pidfd.pid());
            }
            let reply = Reply {
                refusal,
                warnings: warnings.to_vec(),
                notices: notices.to_vec(),
            };
            self.reply(&p.token, p.uid, &reply);
            p.pidfd.wake();
        }
    }

    fn refuse_all(&self, batch: Vec<Pending>, why: &str) {
        for p in batch {
            self.reply(&p.token, p.uid, &Reply::refused(why.to_owned()));
            p.pidfd.wake();
        }
    }

    /// Moves the pinned process into its uid's sandbox, acting on that process
    /// only: its uids are re-checked, its start time recorded, and its pidfd
    /// tested alive before and after the write to cgroup.procs.
    ///
    /// If the pidfd is dead after the write, the pid may have been reused in
    /// between and the write may have moved another process into the sandbox.
    /// The launch is refused (the requester is gone anyway) and the event is
    /// logged with the pid's new holder. That process is deliberately left in
    /// the sandbox: confinement only takes rights away, and moving a process
    /// *out* on a guess about where it came from would give an attacker who
    /// wins the race a way out.
    fn migrate_checked(&self, p: &Pending) -> Result<(), String> {
        let pid = p.pidfd.pid();
        let uids = process::read_uids(pid).map_err(|e| format!("process {pid}: {e}"))?;
        let (start, _) =
            process::read_start_ppid(pid).map_err(|e| format!("process {pid}: {e}"))?;
        if !p.pidfd.alive() {
            return Err(format!("process {pid} exited before it could be moved"));
        }
        if uids != [p.uid; 4] {
            return Err(format!("process {pid} changed its uids to {uids:?}"));
        }
        let moved = self.tree.migrate(p.uid, pid);
        if p.pidfd.alive() {
            return moved.map_err(|e| format!("cannot move process {pid} into its sandbox: {e}"));
        }
        log::error!("pid {pid} exited while being moved; checking for a reused pid");
        self.log_reused_pid(p.uid, pid, start);
        Err(format!("process {pid} exited while being moved"))
    }

    fn log_reused_pid(&self, uid: u32, pid: i32, start: u64) {
        let Ok((start_now, ppid)) = process::read_start_ppid(pid) else {
            return; // nobody holds the pid: nothing was moved
        };
        if start_now == start {
            return;
        }
        let cg = process::read_v2_cgroup(pid).unwrap_or_default();
        if cg == cgroup::sandbox_path_for(uid) {
            log::error!(
                "pid {pid} was reused during the move: the new process (parent {ppid}) is now in uid {uid}'s sandbox and stays there"
            );
        }
    }

    /// Writes the reply file for `token`, owned by `uid`. Failure is logged:
    /// the launcher then times out and refuses.
    fn reply(&self, token: &str, uid: u32, reply: &Reply) {
        let result = request::publish(
            self.dir.as_fd(),
            &format!(".rep.{token}"),
            &format!("rep.{token}"),
            reply.encode().as_bytes(),
            0o400,
            Some(uid),
        );
        if let Err(e) = result {
            log::warn!("cannot reply to uid {uid} (request {}): {e}", shown(token));
        }
    }
}

/// A request's name for the log: only the first 8 of the token's 32 hex
/// digits, so the journal (readable by the adm group) cannot be used to plant
/// a file under a waiting launcher's reply name.
/// Returns the heap's free pages to the kernel (malloc_trim(3)).
fn trim() {
    #[cfg(target_env = "gnu")]
    // SAFETY: malloc_trim only releases free heap memory.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// The note for a launcher about entries an apply in `mode` removed
/// (exact) or kept though no longer listed (add-only).
fn removal_notice(mode: ApplyMode, n: usize) -> String {
    match mode {
        ApplyMode::Exact => format!(
            "{n} entries denied until now are no longer denied to your sandboxes \
             (paths removed from the lists, or files replaced or moved away)"
        ),
        ApplyMode::AddOnly => format!(
            "{n} entries no longer in the lists stay denied: a launch from inside \
             a sandbox only adds; launch from outside to apply removals"
        ),
    }
}

fn shown(token: &str) -> String {
    format!("req.{}…", token.get(..8).unwrap_or(token))
}

/// At most [`MAX_WARNINGS`] of `warnings`, and the notices to send with
/// them (a line counting the warnings left out, if any).
fn capped(warnings: &[String]) -> (Vec<String>, Vec<String>) {
    let kept = warnings.iter().take(MAX_WARNINGS).cloned().collect();
    let mut notices = Vec::new();
    if warnings.len() > MAX_WARNINGS {
        notices.push(format!(
            "{} more problems in your list are not shown",
            warnings.len() - MAX_WARNINGS
        ));
    }
    (kept, notices)
}

/// Checks that process `pid` runs entirely as `uid` (real, effective, saved
/// and filesystem uid) and is executing this very binary (the launcher), and
/// returns a pidfd pinning it. The uids are read after
/// the pidfd is taken and the pidfd is checked alive after the read, so they
/// belong to the pinned process.
fn authenticate(uid: u32, pid: i32) -> Result<Pidfd, String> {
    let pidfd = Pidfd::open(pid).map_err(|e| format!("process {pid}: {e}"))?;
    let uids = process::read_uids(pid).map_err(|e| format!("process {pid}: {e}"))?;
    let runs_launcher = process::runs_same_executable(pid);
    if !pidfd.alive() {
        return Err(format!("process {pid} exited"));
    }
    // Only a launcher may be moved: otherwise an agent could name one of the
    // user's processes outside the sandbox, pull it in (and then attach to it),
    // and have its request count as a launch from outside.
    match runs_launcher {
        Ok(true) => {}
        Ok(false) => {
            return Err(format!(
                "process {pid} is not running agent-sandbox-exec; only a launcher can be moved into a sandbox"
            ));
        }
        Err(e) => return Err(format!("process {pid}: cannot check its executable: {e}")),
    }
    if uids != [uid; 4] {
        return Err(format!(
            "process {pid} runs as uids {uids:?}, not as the request file's owner {uid}"
        ));
    }
    Ok(pidfd)
}

fn drain(fd: &OwnedFd) {
    let mut buf = [0u8; 64];
    // SAFETY: reads into a local buffer from a non-blocking pipe we own.
    while unsafe { libc::read(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) } > 0 {}
}
