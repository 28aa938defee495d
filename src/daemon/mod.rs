//! `agent-sandbox-execd`: the root daemon, one synchronous poll loop.
//!
//! Start-up: check the kernel (bpf LSM, BTF) → mount bpffs if needed → find
//! the cgroup2 tree → load the program with the pinned maps, attach and pin its
//! link → the canary ([`crate::daemon::canary`]: a temporary sandbox must be refused a
//! denied temporary file with EPERM) → drop state of sandboxes whose cgroup is gone → listen on the request
//! socket → re-apply every existing sandbox's lists → write the ready file and
//! tell systemd READY=1.
//!
//! One launch: a connection is accepted (non-blocking) and admitted against
//! the per-uid and total caps ([`crate::policy::admission`]) → its one request packet
//! is read, bounded in size and time → the kernel's `SO_PEERCRED` gives the
//! requester's uid and pid; the request must name that pid; pin it with a
//! pidfd and check its uids and executable → hand it to the launch machine
//! ([`crate::policy::launch`]), which orders the rest as commands this
//! daemon executes ([`Daemon::execute`]): one resolver child per uid reads
//! the lists ([`crate::resolve`]) → create `uid-<uid>` if needed, diff-apply
//! the keys ([`crate::kernel::programs::Bpf::apply`]) → move each queued
//! process in, checking its pidfd around the write → send the reply on the
//! connection and close it.
//!
//! Signals: SIGTERM/SIGINT stop serving (the program stays attached through its
//! pinned link; new launches fail closed until a daemon is back); SIGHUP
//! re-applies every sandbox's lists.

pub mod canary;
pub mod denials;
pub mod doctor;
pub mod failure;
pub mod pool;
pub mod record;

use std::collections::HashMap;
use std::ffi::OsString;
use std::fs;
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::Path;

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use nix::poll::{PollFd, PollFlags, PollTimeout, poll};

use crate::kernel::programs::Bpf;
use crate::kernel::sandboxes::Prune;
use crate::lists::entries::{DenySet, KIND_OPEN};
use crate::os::cgroup::{self, Tree};
use crate::os::host_addrs::AddrWatch;
use crate::os::paths::Paths;
use crate::os::process::{self, Pidfd};
use crate::os::procfs;
use crate::policy::admission::{self, Abuse, Ledger, LogLimiter, Screened, Ticket};
use crate::policy::launch::{
    ApplyReport, Command, Event, Inspection, Launch, LaunchId, Level, Limits, Machine, Millis, Plan,
};
use crate::policy::rules::{self, ApplyMode, RecordedLoss, Requester};
use crate::proto::ready;
use crate::proto::request::{self, Peer, Reply, Request};
use failure::DaemonError;
use pool::{Pool, Resolver};
use record::Verdict;

/// How long an accepted connection may take to send its request.
const REQUEST_DEADLINE: Duration = Duration::from_secs(5);
/// Connections accepted per turn of the loop, at most, so that a flood of
/// connections never keeps the loop from its resolvers.
const ACCEPT_BATCH: usize = 256;
/// The listen(2) backlog of the request socket: connections the kernel
/// holds for the daemon before it accepts them. The daemon drains it on
/// every turn of its loop, so its bound is the time a turn takes; a
/// connect(2) that finds it full waits, bounded by the launcher's timeout.
const LISTEN_BACKLOG: i32 = 512;
/// The soft open-file limit the daemon raises itself to (at most to the
/// hard limit): room for [`admission::MAX_TOTAL`] connections besides its
/// maps, resolver pipes and watches.
const NOFILE_WANTED: u64 = 8192;
/// Resolutions running at once (one per uid at most).
const MAX_RESOLVERS: usize = 16;
/// Applies that parse or remove at least this many entries are followed by
/// a malloc_trim(3).
const TRIM_AFTER: usize = 10_000;
/// Longest sleep of the loop, for housekeeping.
const TICK: Duration = Duration::from_millis(1000);

static STOP: AtomicBool = AtomicBool::new(false);
static RELOAD: AtomicBool = AtomicBool::new(false);

fn setup(what: impl Into<String>) -> impl FnOnce(io::Error) -> DaemonError {
    let what = what.into();
    move |cause| DaemonError::Setup { what, cause }
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
                 agent-sandbox-execd --check\n\
                 \x20   the kernel doctor: securityfs, LSM list, BTF, cgroup2, bpffs, lockdown, a\n\
                 \x20   trial load and attach, and a canary (a temporary sandbox must be refused a\n\
                 \x20   denied temporary file with EPERM), each failure with its cause and fix;\n\
                 \x20   exit 0 healthy, 1 when enforcement cannot work here.\n\
                 See agent-sandbox-execd(8)."
            );
            return 0;
        }
        Some("--version" | "-V") => {
            println!("agent-sandbox-execd {}", env!("CARGO_PKG_VERSION"));
            return 0;
        }
        Some("--disable") if args.len() == 1 => return disable(&Paths::system()),
        Some("--check") if args.len() == 1 => return crate::daemon::doctor::main(&Paths::system()),
        Some(other) => {
            eprintln!("agent-sandbox-execd: unknown argument {other:?}; try --help");
            return 64;
        }
    }
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("info"))
        .format_timestamp(None)
        .format_target(false)
        .init();
    let paths = Paths::system();
    match run(&paths) {
        Ok(()) => 0,
        Err(e) => {
            // Permanent (78, not restarted) or not (75/1, systemd restarts it).
            let verdict = failure::classify(&e, failure::KernelFacts::read());
            log::error!("{}", verdict.message);
            // Another daemon serving is not this daemon's failure to report.
            let other_instance = matches!(&e, DaemonError::Setup { cause, .. }
                if cause.kind() == io::ErrorKind::AddrInUse);
            if !other_instance {
                ready::leave_reason(&paths, &verdict.message);
            }
            verdict.class.exit_status()
        }
    }
}

/// `agent-sandbox-execd --disable`: unpins every program link and map under
/// the pin root ([`Paths::pin_root`]), which detaches the programs. Refuses
/// while a daemon serves (it would keep answering launches with nothing
/// enforced).
fn disable(paths: &Paths) -> u8 {
    if !nix::unistd::geteuid().is_root() {
        eprintln!("agent-sandbox-execd: --disable must run as root");
        return 1;
    }
    match lock_instance(paths) {
        Ok(Some(_lock)) => {}
        Ok(None) => {
            eprintln!(
                "agent-sandbox-execd: a daemon is running ({} is locked); stop it first: systemctl stop agent-sandbox-execd",
                lock_file(paths).display()
            );
            return 1;
        }
        Err(e) => {
            eprintln!("agent-sandbox-execd: --disable: {e}");
            return 1;
        }
    }
    match crate::kernel::pins::unpin_all(&paths.pin_root) {
        Ok(removed) if removed.is_empty() => {
            println!(
                "agent-sandbox-execd: nothing pinned under {}; enforcement was already off",
                paths.pin_root.display()
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

fn run(paths: &Paths) -> Result<(), DaemonError> {
    if !nix::unistd::geteuid().is_root() {
        return Err(DaemonError::Setup {
            what: "agent-sandbox-execd must run as root".into(),
            cause: io::Error::from(io::ErrorKind::PermissionDenied),
        });
    }
    let _lock = lock_instance(paths)?.ok_or_else(|| DaemonError::Setup {
        what: format!(
            "another agent-sandbox-execd holds {}",
            lock_file(paths).display()
        ),
        cause: io::Error::from(io::ErrorKind::AddrInUse),
    })?;
    crate::kernel::preflight::check_kernel(
        crate::kernel::preflight::read_lsm_list().as_deref(),
        Path::new("/sys/kernel/btf/vmlinux").exists(),
    )?;
    crate::kernel::preflight::ensure_bpffs()?;
    let tree = Tree::open()?;
    crate::kernel::programs::route_libbpf_log();
    let mut bpf = Bpf::load_and_attach(&paths.pin_root, &paths.state_dir, tree.parent())
        .inspect_err(|_| {
            // A first start that failed leaves no cgroup tree behind (the load
            // removes the pin directories it made).
            tree.remove_if_unused();
        })?;
    log::info!(
        "lsm/file_open attached; maps pinned in {}",
        bpf.pin_dir().display()
    );
    // Proof that the attached programs deny, before anything is served.
    // A canary that fails makes the next start load the programs in full
    // rather than adopt the same ones again.
    let seen = crate::daemon::canary::run(&mut bpf, tree.parent(), &paths.run_dir, "daemon")
        .inspect_err(|_| crate::kernel::adopt::forget(&paths.state_dir))?;
    log::info!("canary: {seen}");

    let (wake_r, wake_w) =
        nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC | nix::fcntl::OFlag::O_NONBLOCK)
            .map_err(|e| setup("create the signal pipe")(io::Error::from(e)))?;
    for sig in [libc::SIGTERM, libc::SIGINT, libc::SIGHUP] {
        let flag = if sig == libc::SIGHUP { &RELOAD } else { &STOP };
        signal_hook::flag::register(sig, flag).map_err(setup("install signal handlers"))?;
        let w = wake_w.try_clone().map_err(setup("dup the signal pipe"))?;
        signal_hook::low_level::pipe::register(sig, w).map_err(setup("install signal handlers"))?;
    }

    raise_nofile();
    let listener = prepare_socket(paths)?;

    let denials = denials::Denials::new(&bpf);
    let mut d = Daemon {
        paths: paths.clone(),
        tree,
        bpf,
        denials,
        listener,
        incoming: Vec::new(),
        ledger: Ledger::default(),
        abuse: LogLimiter::new(admission::LOG_INTERVAL),
        launches: Machine::new(Limits {
            deadline: Millis::try_from(pool::DEADLINE.as_millis()).unwrap_or(Millis::MAX),
            max_resolving: MAX_RESOLVERS,
        }),
        pending: HashMap::new(),
        last_launch: 0,
        running: Vec::new(),
        epoch: Instant::now(),
        killed: Vec::new(),
        pool: Pool::default(),
        stuck: HashMap::new(),
        own_cgroup: procfs::read_v2_cgroup(std::process::id() as i32)
            .map_err(setup("read /proc/self/cgroup"))?,
        last_expire: Instant::now(),
        reapply_failures: 0,
        boot: record::boot_id(),
        recorded: HashMap::new(),
        addr_watch: AddrWatch::open()
            .inspect_err(|e| {
                log::warn!(
                    "cannot follow the host's address changes (route netlink socket: {e}); \
                     a sandbox may reach the user's servers through an address added after now"
                )
            })
            .ok(),
    };
    d.sync_host_addrs();
    d.reconcile();
    // Re-apply every existing sandbox into this layout's maps before serving,
    // so that earlier layouts can be retired without a gap.
    d.settle();
    d.carry_over_other_layouts();
    if d.reapply_failures == 0 {
        crate::kernel::pins::retire_other_layouts(d.bpf.pin_dir());
    } else {
        log::warn!(
            "{} sandbox(es) could not be re-applied; earlier map layouts (if any) stay attached",
            d.reapply_failures
        );
    }
    let _ = fs::remove_file(paths.failure());
    // The load's peak (libbpf's parse of the kernel's BTF, about 8 MiB) is
    // free now, but below later allocations that glibc does not give back
    // by itself (seen: 9.4 MiB of heap idle instead of 1.3).
    trim();
    ready::publish(paths).map_err(|e| DaemonError::Setup {
        what: e.what,
        cause: e.cause,
    })?;
    sd_notify("READY=1\nSTATUS=serving");
    log::info!("ready; requests on {}", paths.socket().display());

    let result = d.serve(wake_r);
    let _ = fs::remove_file(paths.ready());
    let _ = fs::remove_file(paths.socket());
    sd_notify("STOPPING=1");
    for r in d.running.drain(..) {
        r.kill(&mut d.killed);
    }
    d.killed.extend(d.stuck.drain().flat_map(|(_, pids)| pids));
    d.pool.clear(&mut d.killed);
    pool::reap(&mut d.killed);
    log::info!(
        "stopped serving; the program stays attached (pinned in {})",
        d.bpf.pin_dir().display()
    );
    result
}

/// The file the running daemon holds (flock) for its whole life.
fn lock_file(paths: &Paths) -> std::path::PathBuf {
    paths.run_dir.join("daemon.lock")
}

/// Takes the instance lock: Some(locked file) while we hold it, None if
/// another process (a running daemon, even one still starting) holds it.
fn lock_instance(paths: &Paths) -> Result<Option<nix::fcntl::Flock<fs::File>>, DaemonError> {
    let run = paths.run_dir.display();
    match fs::create_dir(&paths.run_dir) {
        Ok(()) => fs::set_permissions(&paths.run_dir, fs::Permissions::from_mode(0o755))
            .map_err(setup(format!("chmod {run}")))?,
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(setup(format!("create {run}"))(e)),
    }
    let lock = lock_file(paths);
    let file = fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&lock)
        .map_err(setup(format!("open {}", lock.display())))?;
    match nix::fcntl::Flock::lock(file, nix::fcntl::FlockArg::LockExclusiveNonblock) {
        Ok(locked) => Ok(Some(locked)),
        Err((_, nix::errno::Errno::EWOULDBLOCK)) => Ok(None),
        Err((_, e)) => Err(setup(format!("lock {}", lock.display()))(e.into())),
    }
}

/// Checks /run/agent-sandbox-exec, removes the request directory of 0.5.0
/// if one is left, and listens on the request socket.
fn prepare_socket(paths: &Paths) -> Result<OwnedFd, DaemonError> {
    // The runtime directory itself was created by lock_instance().
    let run = paths.run_dir.display();
    let run_md = fs::symlink_metadata(&paths.run_dir).map_err(setup(format!("stat {run}")))?;
    if !run_md.is_dir() || run_md.uid() != 0 || run_md.mode() & 0o022 != 0 {
        return Err(DaemonError::Setup {
            what: format!("{run} must be a root-owned directory not writable by others"),
            cause: io::Error::from(io::ErrorKind::PermissionDenied),
        });
    }
    // std's remove_dir_all does not follow symlinks in the tree it removes.
    let old = paths.old_req_dir();
    match fs::symlink_metadata(&old) {
        Ok(md) if md.is_dir() => {
            fs::remove_dir_all(&old).map_err(setup(format!("remove the old {}", old.display())))?
        }
        Ok(_) => fs::remove_file(&old).map_err(setup(format!("remove {}", old.display())))?,
        Err(_) => {}
    }
    let socket = paths.socket();
    request::listen_at(&socket, LISTEN_BACKLOG).map_err(|e| DaemonError::Setup {
        what: format!("listen on {}", socket.display()),
        cause: io::Error::other(e.to_string()),
    })
}

/// Raises the soft RLIMIT_NOFILE to [`NOFILE_WANTED`] (or the hard limit, if
/// lower), so the connection caps, not the file limit, bound what the
/// daemon accepts. A failure is logged: the caps still hold, and accept(2)
/// failing with EMFILE only delays connections.
fn raise_nofile() {
    use nix::sys::resource::{Resource, getrlimit, setrlimit};
    let (cur, max) = match getrlimit(Resource::RLIMIT_NOFILE) {
        Ok(lim) => lim,
        Err(e) => {
            log::warn!("getrlimit(RLIMIT_NOFILE): {}", io::Error::from(e));
            return;
        }
    };
    let want = NOFILE_WANTED.min(max);
    if cur < want
        && let Err(e) = setrlimit(Resource::RLIMIT_NOFILE, want, max)
    {
        log::warn!("setrlimit(RLIMIT_NOFILE): {}", io::Error::from(e));
    }
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

/// An accepted connection: its socket, the kernel's record of who
/// connected, and its place in the [`Ledger`] (given back when it is
/// dropped, which closes the socket).
#[derive(Debug)]
struct Conn {
    fd: OwnedFd,
    peer: Peer,
    _ticket: Ticket,
}

/// A connection that has not sent its request yet.
#[derive(Debug)]
struct Incoming {
    conn: Conn,
    deadline: Instant,
}

/// A request that passed authentication, from its admission into the
/// launch machine to its reply: what the commands about it act on.
#[derive(Debug)]
struct Pending {
    conn: Conn,
    pidfd: Pidfd,
    /// Its descriptors of files and directories, with their keys: it is not
    /// moved in if its sandbox denies one ([`rules::denied_descriptor`]).
    descriptors: Vec<request::Descriptor>,
}

struct Daemon {
    /// Where the daemon's files are.
    paths: Paths,
    tree: Tree,
    bpf: Bpf,
    /// Address changes of the host (rtnetlink), for the loopback programs'
    /// `host_addrs`; None if the socket could not be opened (logged).
    addr_watch: Option<AddrWatch>,
    /// The listening request socket (non-blocking).
    listener: OwnedFd,
    /// Accepted connections waiting for their request.
    incoming: Vec<Incoming>,
    /// The connections held, per uid: the caps of [`crate::policy::admission`].
    ledger: Ledger,
    /// One line per uid and kind of abuse per interval.
    abuse: LogLimiter,
    /// The order of every launch and re-apply ([`crate::policy::launch`]).
    launches: Machine,
    /// The launches the machine holds, by their number.
    pending: HashMap<LaunchId, Pending>,
    /// The number of the last launch admitted.
    last_launch: LaunchId,
    /// The resolutions in flight (one per uid), in the order they started.
    running: Vec<Resolver>,
    /// The machine's clock: [`Millis`] since then ([`Daemon::now`]).
    epoch: Instant,
    /// Ended resolver processes not reaped yet.
    killed: Vec<nix::unistd::Pid>,
    /// Idle resolver processes, kept for the next launch of their uid.
    pool: Pool,
    /// Resolver processes killed at the deadline and not reaped yet, per
    /// uid: one stuck on a stalled FUSE or NFS request may never die.
    stuck: HashMap<u32, Vec<nix::unistd::Pid>>,
    /// The daemon's own cgroup v2 path (its resolvers run there too).
    own_cgroup: String,
    /// When the pool was last checked for idle and dead processes.
    last_expire: Instant,
    /// Re-applies (without a launch) that failed since start-up.
    reapply_failures: usize,
    /// This boot's id ([`record::boot_id`]).
    boot: String,
    /// Per uid: the sandbox cgroup id whose entries, as the mirror holds
    /// them, its record on disk ([`record`]) was last written from.
    recorded: HashMap<u32, u64>,
    /// Denial events: the ring buffer's reader, the journal, `--denials`.
    denials: denials::Denials,
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
        let uids = live.into_iter().map(|(uid, _)| uid).collect();
        self.drive(Event::Reload { uids });
    }

    /// Adds to this layout's maps every key an earlier layout's maps hold for
    /// a live sandbox, so retiring that layout frees nothing.
    fn carry_over_other_layouts(&mut self) {
        let uids: HashMap<u64, u32> = match self.tree.list() {
            Ok(l) => l.into_iter().map(|(uid, id)| (id, uid)).collect(),
            Err(e) => {
                log::error!("cannot list sandboxes: {e}");
                self.reapply_failures += 1;
                return;
            }
        };
        let live: std::collections::HashSet<u64> = uids.keys().copied().collect();
        let (found, errors) = crate::kernel::pins::keys_in_other_layouts(self.bpf.pin_dir(), &live);
        for e in errors {
            log::warn!("{e}");
            self.reapply_failures += 1;
        }
        for (cgid, files) in found {
            match self.bpf.apply(cgid, &files, Prune::Keep) {
                Ok(stats) if stats.added > 0 => {
                    log::info!(
                        "cgroup {cgid}: carried {} keys over from an earlier layout",
                        stats.added
                    );
                    // They are denied until now too: the record must say so.
                    if let Some(&uid) = uids.get(&cgid) {
                        self.record(uid, cgid, true);
                    }
                }
                Ok(_) => {}
                Err(e) => {
                    log::error!(
                        "cgroup {cgid}: cannot carry keys over: {}",
                        crate::error::error_chain(&e)
                    );
                    self.reapply_failures += 1;
                }
            }
        }
    }

    /// Runs the pending re-applies to completion (each bounded by the resolver
    /// deadline) without serving requests. Used once at start-up.
    fn settle(&mut self) {
        while self.launches.busy() && !STOP.load(Ordering::SeqCst) {
            self.drive(Event::Dispatch);
            match self.wait(&[], &[]) {
                Ok(ready) => self.pump_resolvers(&ready),
                Err(e) => {
                    log::error!("poll: {e}");
                    return;
                }
            }
        }
    }

    /// Polls `extra` and every running resolver's sockets until one is
    /// readable or the nearest resolver or `incoming` deadline (at most
    /// [`TICK`]) passes.
    /// Returns the readiness of `extra`, then of `self.running` (a resolver
    /// is ready if any of its sockets is), in order; an interrupted poll
    /// reports nothing ready.
    fn wait(&self, extra: &[BorrowedFd<'_>], incoming: &[Incoming]) -> nix::Result<Vec<bool>> {
        // owner[i]: which entry of the result fds[i] counts for.
        let mut owner: Vec<usize> = (0..extra.len()).collect();
        let mut fds: Vec<PollFd<'_>> = extra
            .iter()
            .map(|fd| PollFd::new(*fd, PollFlags::POLLIN))
            .collect();
        for (i, r) in self.running.iter().enumerate() {
            for fd in r.fds() {
                fds.push(PollFd::new(fd, PollFlags::POLLIN));
                owner.push(extra.len() + i);
            }
        }
        let mut ready = vec![false; extra.len() + self.running.len()];
        let now = Instant::now();
        let timeout = incoming
            .iter()
            .map(|i| i.deadline.saturating_duration_since(now))
            .fold(self.next_timeout(), Duration::min);
        let ms = u16::try_from(timeout.as_millis()).unwrap_or(u16::MAX);
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

    fn serve(&mut self, wake: OwnedFd) -> Result<(), DaemonError> {
        while !STOP.load(Ordering::SeqCst) {
            if RELOAD.swap(false, Ordering::SeqCst) {
                log::info!("SIGHUP: re-applying every sandbox");
                self.reconcile();
            }
            self.drive(Event::Dispatch);
            let incoming = std::mem::take(&mut self.incoming);
            let ready = {
                // Without an address watch the wake pipe stands in (drained first).
                let addrs = self.addr_watch.as_ref().map_or(wake.as_fd(), AsFd::as_fd);
                // Without denial events the wake pipe stands in too.
                let events = self.denials.fd().unwrap_or(wake.as_fd());
                let mut extra = vec![self.listener.as_fd(), wake.as_fd(), addrs, events];
                extra.extend(incoming.iter().map(|i| i.conn.fd.as_fd()));
                self.wait(&extra, &incoming)
                    .map_err(|e| setup("poll")(io::Error::from(e)))?
            };
            if ready[1] {
                drain(&wake);
            }
            if ready[2] && self.addr_watch.as_ref().is_some_and(AddrWatch::drain) {
                self.sync_host_addrs();
            }
            if ready[3] {
                self.denials.pump();
            }
            let (conn_ready, resolver_ready) = ready[4..].split_at(incoming.len());
            self.pump_resolvers(resolver_ready);
            self.read_requests(incoming, conn_ready);
            if ready[0] {
                self.accept_connections();
            }
            if self.last_expire.elapsed() >= TICK {
                self.last_expire = Instant::now();
                self.abuse.expire(self.last_expire);
                self.denials.tick(&self.bpf);
                self.pool.expire(&mut self.killed);
                // Without its resolvers a uid's next answers come from new
                // processes: not worth the memory of keeping the last ones.
                let (pool, running) = (&self.pool, &self.running);
                let freed = self
                    .launches
                    .forget_unless(|uid| pool.has_uid(uid) || running.iter().any(|r| r.uid == uid));
                // Launches that reused large answers left the buffers they
                // read them into free but not trimmed (the next answer would
                // reuse them): hand them back with the answers.
                if freed >= TRIM_AFTER {
                    trim();
                }
            }
            pool::reap(&mut self.killed);
            self.stuck.retain(|_, pids| {
                pool::reap(pids);
                !pids.is_empty()
            });
        }
        Ok(())
    }

    /// Writes the host's addresses (every interface's, now) into the
    /// loopback programs' `host_addrs`; a failure is logged and the map
    /// keeps what it held.
    fn sync_host_addrs(&mut self) {
        let result = crate::os::host_addrs::host_addrs()
            .map_err(|e| format!("getifaddrs: {e}"))
            .and_then(|addrs| {
                self.bpf
                    .set_host_addrs(&addrs)
                    .map_err(|e| crate::error::error_chain(&e))
            });
        match result {
            Ok((0, 0)) => {}
            Ok((added, removed)) => {
                log::info!("host addresses: {added} added, {removed} removed")
            }
            Err(e) => log::error!("cannot update the host addresses for the loopback check: {e}"),
        }
    }

    fn next_timeout(&self) -> Duration {
        let now = self.now();
        self.launches.next_deadline().map_or(TICK, |d| {
            Duration::from_millis(d.saturating_sub(now)).min(TICK)
        })
    }

    /// The launch machine's clock: milliseconds since the daemon started.
    fn now(&self) -> Millis {
        Millis::try_from(self.epoch.elapsed().as_millis()).unwrap_or(Millis::MAX)
    }

    /// Accepts up to [`ACCEPT_BATCH`] waiting connections. Each takes a
    /// place in the [`Ledger`] or is refused and closed at once.
    fn accept_connections(&mut self) {
        let deadline = Instant::now() + REQUEST_DEADLINE;
        for _ in 0..ACCEPT_BATCH {
            let fd = match request::accept(self.listener.as_fd()) {
                Ok(Some(fd)) => fd,
                Ok(None) => return,
                Err(e) => {
                    // Not a user's doing (EMFILE, ENOMEM): once per interval.
                    if self
                        .abuse
                        .note(0, Abuse::TooManyInAll, Instant::now())
                        .is_some()
                    {
                        log::error!("{e}");
                    }
                    return;
                }
            };
            let peer = match request::peer_of(fd.as_fd()) {
                Ok(p) => p,
                Err(e) => {
                    log::debug!("dropping a connection: {e}");
                    continue;
                }
            };
            match self.ledger.admit(peer.uid, admission::LIMITS) {
                Ok(ticket) => self.incoming.push(Incoming {
                    conn: Conn {
                        fd,
                        peer,
                        _ticket: ticket,
                    },
                    deadline,
                }),
                Err(kind) => {
                    let why = match kind {
                        Abuse::TooManyOfUid => format!(
                            "uid {} already has {} connections open to the daemon",
                            peer.uid,
                            admission::MAX_PER_UID
                        ),
                        _ => format!(
                            "the daemon holds {} connections, its limit; try again",
                            admission::MAX_TOTAL
                        ),
                    };
                    self.log_abuse(peer, kind, &why);
                    let _ =
                        request::send_packet(fd.as_fd(), Reply::refused(why).encode().as_bytes());
                }
            }
        }
    }

    /// Reads the request of each connection in `incoming` that polled ready
    /// (`ready[i]` belongs to `incoming[i]`), and drops the ones past their
    /// deadline; the others wait on.
    fn read_requests(&mut self, incoming: Vec<Incoming>, ready: &[bool]) {
        let now = Instant::now();
        for (i, inc) in incoming.into_iter().enumerate() {
            if !ready.get(i).copied().unwrap_or(false) {
                if now >= inc.deadline {
                    let why = format!(
                        "a connection sent no request within {} s",
                        REQUEST_DEADLINE.as_secs()
                    );
                    self.log_abuse(inc.conn.peer, Abuse::Silent, &why);
                } else {
                    self.incoming.push(inc);
                }
                continue;
            }
            let received =
                match request::recv_packet(inc.conn.fd.as_fd(), request::MAX_REQUEST_BYTES) {
                    Ok(r) => r,
                    Err(e) => {
                        log::debug!("uid {}: {e}", inc.conn.peer.uid);
                        continue;
                    }
                };
            match admission::screen(inc.conn.peer.pid, received) {
                Screened::Request(req) => self.take_request(inc.conn, req),
                Screened::Status(_) => self.answer_status(&inc.conn),
                Screened::Denials(after) => {
                    let answer = self.denials.answer(inc.conn.peer.uid, after);
                    if let Err(e) =
                        request::send_packet(inc.conn.fd.as_fd(), answer.encode().as_bytes())
                    {
                        log::debug!(
                            "cannot answer the denials of uid {}: {e}",
                            inc.conn.peer.uid
                        );
                    }
                }
                Screened::Refuse(kind, why) => self.refuse_conn(inc.conn, kind, why),
                Screened::Wait => self.incoming.push(inc),
                Screened::Close => {}
            }
        }
    }

    /// Logs `why` for the connection's uid, unless this kind was logged for
    /// it less than [`admission::LOG_INTERVAL`] ago.
    fn log_abuse(&mut self, peer: Peer, kind: Abuse, why: &str) {
        let Some(quiet) = self.abuse.note(peer.uid, kind, Instant::now()) else {
            return;
        };
        let since = if quiet > 0 {
            format!("; {quiet} more like it since the last such line")
        } else {
            String::new()
        };
        log::warn!(
            "uid {} pid {}: {why} (logged at most once every {} s per uid{since})",
            peer.uid,
            peer.pid,
            admission::LOG_INTERVAL.as_secs()
        );
    }

    /// Refuses a request before it is queued: a rate-limited log line and
    /// the refusal on its connection, which is then closed.
    fn refuse_conn(&mut self, conn: Conn, kind: Abuse, why: String) {
        self.log_abuse(conn.peer, kind, &why);
        self.reply(&conn, &Reply::refused(why));
    }

    /// Authenticates the request of process `pid`, which [`admission::screen`]
    /// found to be the connecting process (`SO_PEERCRED`), for the uid the
    /// kernel recorded; queues it or refuses it.
    fn take_request(&mut self, conn: Conn, req: Request) {
        let pid = req.pid;
        let uid = conn.peer.uid;
        let pidfd = match authenticate(uid, pid) {
            Ok(p) => p,
            Err(why) => return self.refuse_conn(conn, Abuse::Refused, why),
        };
        // A resolver process runs this binary as the user too; moving one in
        // would pass its request off as a launch from outside.
        if self.is_resolver(pid) {
            let why =
                format!("process {pid} is one of the daemon's list resolvers, not a launcher");
            return self.refuse_conn(conn, Abuse::Refused, why);
        }
        log::debug!("request: uid {uid} pid {pid}");
        self.last_launch += 1;
        let id = self.last_launch;
        self.pending.insert(
            id,
            Pending {
                conn,
                pidfd,
                descriptors: req.descriptors,
            },
        );
        self.drive(Event::Admitted(Launch {
            id,
            uid,
            pid,
            sockets: req.sockets,
            ports: req.ports,
        }));
    }

    /// Runs `event` through the launch machine and executes its plan: each
    /// command in order, and the commands a command's result leads to right
    /// after it ([`Plan`]).
    fn drive(&mut self, event: Event) {
        let mut plan = Plan::new(self.launches.handle(self.now(), event));
        while let Some(command) = plan.next() {
            if let Some(result) = self.execute(command) {
                plan.then(self.launches.handle(self.now(), result));
            }
        }
    }

    /// Does what `command` says (the I/O of a launch: resolvers, /proc, the
    /// cgroup tree, the maps, replies, the log) and returns its result, for
    /// the commands that have one.
    fn execute(&mut self, command: Command) -> Option<Event> {
        match command {
            Command::Start { uid } => {
                let result = self.start_resolver(uid).map(|r| self.running.push(r));
                Some(Event::Started { uid, result })
            }
            Command::Kill { uid } => {
                if let Some(i) = self.running.iter().position(|r| r.uid == uid) {
                    let r = self.running.swap_remove(i);
                    r.kill(self.stuck.entry(uid).or_default());
                }
                None
            }
            Command::Observe {
                uid,
                launches,
                since,
            } => Some(self.observe(uid, &launches, since)),
            Command::Ensure { uid } => {
                let result = self.tree.ensure(uid).map_err(|e| e.to_string());
                Some(Event::Ensured { uid, result })
            }
            Command::CountUnion { uid, cgid, keys } => {
                let (files, names) = self.bpf.union_len(cgid, &keys);
                Some(Event::Counted { uid, files, names })
            }
            Command::Apply {
                uid,
                cgid,
                keys,
                mode,
                recall,
                incomplete,
                launches,
            } => {
                let result = self.apply(
                    uid,
                    cgid,
                    &keys,
                    mode,
                    recall,
                    incomplete.as_deref(),
                    launches,
                );
                Some(Event::Applied { uid, result })
            }
            Command::Entries {
                uid,
                entries,
                replace,
            } => {
                self.denials.set_lines(uid, entries, replace);
                None
            }
            Command::Record { uid, cgid, changed } => {
                self.record(uid, cgid, changed);
                None
            }
            Command::AllowSockets {
                uid,
                cgid,
                keys,
                ports,
            } => {
                let ports: Vec<(u8, u16)> = ports
                    .iter()
                    .map(|p| (p.transport.protocol(), p.port))
                    .collect();
                let result = self
                    .bpf
                    .set_sock_allow(cgid, &keys)
                    .and_then(|n| Ok(n + self.bpf.set_port_allow(cgid, &ports)?))
                    .map_err(|e| {
                        format!(
                            "cannot set the allowed sockets: {}",
                            crate::error::error_chain(&e)
                        )
                    });
                Some(Event::SocketsAllowed { uid, result })
            }
            Command::CheckSandbox { uid } => {
                let sandbox = cgroup::cgroup_id(&self.tree.dir_for(uid)).ok();
                Some(Event::SandboxChecked {
                    uid,
                    enforcing: self.bpf.links_pinned(),
                    sandbox,
                    denies_nothing: sandbox.is_some_and(|c| self.bpf.held_entries(c) == 0),
                })
            }
            Command::Inspect {
                uid,
                launch,
                sandbox,
            } => {
                let inspection = self.inspect(launch, sandbox);
                Some(Event::Inspected { uid, inspection })
            }
            Command::Move { uid, launch } => {
                let (moved, alive_after) = match self.pending.get(&launch) {
                    Some(p) => {
                        let moved = self.tree.migrate(uid, p.pidfd.pid());
                        (moved.map_err(|e| e.to_string()), p.pidfd.alive())
                    }
                    None => (Err("the launch is gone".to_owned()), false),
                };
                Some(Event::Moved {
                    uid,
                    moved,
                    alive_after,
                })
            }
            Command::Recheck { uid, launch } => {
                let pid = self.pending.get(&launch).map_or(0, |p| p.pidfd.pid());
                let holder = procfs::read_start_ppid(pid).ok();
                let in_sandbox =
                    procfs::read_v2_cgroup(pid).is_ok_and(|c| c == cgroup::sandbox_path_for(uid));
                Some(Event::Rechecked {
                    uid,
                    holder,
                    in_sandbox,
                })
            }
            Command::Reply { launch, reply } => {
                if let Some(p) = self.pending.remove(&launch) {
                    self.reply(&p.conn, &reply);
                }
                None
            }
            Command::Log { level, text } => {
                match level {
                    Level::Error => log::error!("{text}"),
                    Level::Warn => log::warn!("{text}"),
                    Level::Info => log::info!("{text}"),
                }
                None
            }
            Command::ReapplyFailed => {
                self.reapply_failures += 1;
                None
            }
            Command::Freed { entries } => {
                if entries >= TRIM_AFTER {
                    // A large list's parse, or a large old set, is freed now;
                    // hand the pages back, so that the daemon's RSS is that
                    // of its mirror (and the last answers it keeps).
                    trim();
                }
                None
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
            && procfs::read_v2_cgroup(pid).is_ok_and(|c| c == self.own_cgroup);
        let known = |pids: &[nix::unistd::Pid]| pids.iter().any(|p| p.as_raw() == pid);
        in_service
            || self.pool.holds(pid)
            || self.running.iter().any(|r| r.holds(pid))
            || known(&self.killed)
            || self.stuck.values().any(|pids| known(pids))
    }

    /// Starts a resolution for `uid`, unless it has too many killed
    /// resolver processes that have not exited ([`rules::check_stuck`]).
    fn start_resolver(&mut self, uid: u32) -> Result<Resolver, String> {
        if let Some(pids) = self.stuck.get_mut(&uid) {
            pool::reap(pids);
            rules::check_stuck(uid, pids.len()).map_err(|r| r.to_string())?;
        }
        Resolver::start(&mut self.pool, &self.paths.base_list, uid, &mut self.killed)
            .map_err(|e| e.to_string())
    }

    /// Reads from the resolvers whose pipes polled readable (`readable[i]`
    /// belongs to `self.running[i]`) and hands the finished ones' answers
    /// to the launch machine, then tells it the time (the ones past their
    /// deadline fail). Walks backwards so that `swap_remove` only moves
    /// entries already looked at.
    fn pump_resolvers(&mut self, readable: &[bool]) {
        for i in (0..self.running.len()).rev() {
            let has_input = readable.get(i).copied().unwrap_or(false);
            if has_input && self.running[i].pump() {
                let resolver = self.running.swap_remove(i);
                let uid = resolver.uid;
                // A process that died or broke while it owed an answer may
                // be stuck in the kernel: it counts against the uid's cap.
                let answer = resolver.finish(&mut self.pool, self.stuck.entry(uid).or_default());
                self.drive(Event::Answered { uid, answer });
            }
        }
        self.drive(Event::Tick);
    }

    /// [`Command::Observe`]: how each launcher of the batch is seen now
    /// (its cgroup, then whether it is still alive: a launcher that died
    /// meanwhile may have been an agent's), the sandbox's id as it is (a
    /// cgroup made anew has another one), and whether the sandbox is as the
    /// last apply (`since`) left it: no other apply, no key dropped by the
    /// kernel since.
    fn observe(&self, uid: u32, launches: &[LaunchId], since: Option<(u64, u64)>) -> Event {
        let requesters = launches
            .iter()
            .map(|id| match self.pending.get(id) {
                Some(p) => Requester {
                    cgroup: procfs::read_v2_cgroup(p.pidfd.pid()).ok(),
                    alive_after: p.pidfd.alive(),
                },
                None => Requester {
                    cgroup: None,
                    alive_after: false,
                },
            })
            .collect();
        let sandbox = cgroup::cgroup_id(&self.tree.dir_for(uid)).ok();
        let unchanged =
            since.is_some_and(|(cgid, version)| self.bpf.unchanged_since(cgid, version));
        Event::Observed {
            uid,
            requesters,
            sandbox,
            unchanged,
        }
    }

    /// [`Command::Apply`]: applies `keys` to sandbox `cgid` of `uid` in
    /// `mode`, after loading the programs again if the keys need it; with
    /// `recall`, a sandbox that held nothing is compared with the uid's
    /// record once nothing was removed ([`Daemon::recorded_notice`]); after
    /// an `incomplete` directory-entry scan, in either mode, such a sandbox
    /// is refused keys that lose what the record holds
    /// ([`rules::incomplete_scan_refusal`]).
    ///
    /// # Errors
    /// The reason to give the user: the programs could not be loaded again,
    /// the maps not written, or the scan would loosen a forgotten sandbox.
    #[allow(clippy::too_many_arguments)]
    fn apply(
        &mut self,
        uid: u32,
        cgid: u64,
        keys: &DenySet,
        mode: ApplyMode,
        recall: bool,
        incomplete: Option<&str>,
        launches: usize,
    ) -> Result<ApplyReport, String> {
        if self.bpf.needs_reload_for(keys) {
            // btrfs was loaded after the programs: load them again so that
            // their CO-RE relocations find its types (no gap: the new links
            // are attached before the old ones go).
            log::info!("uid {uid}: btrfs keys ahead; loading the programs again for btrfs");
            let b = Bpf::load_and_attach(
                &self.paths.pin_root,
                &self.paths.state_dir,
                self.tree.parent(),
            )
            .map_err(|e| {
                format!(
                    "cannot load the programs again for btrfs: {}",
                    crate::error::error_chain(&e)
                )
            })?;
            self.bpf = b;
        }
        // A sandbox that holds nothing may have been forgotten (a daemon
        // restart drops sandboxes without processes, a reboot all of them):
        // what it denied until then is in its uid's record.
        // An incomplete scan is checked against the record in any mode.
        let prior = ((recall || incomplete.is_some()) && self.bpf.held_len(cgid) == 0)
            .then(|| record::load(&self.paths.state_dir, uid));
        let verdict = prior
            .as_ref()
            .and_then(|prior| record::verdict(prior, keys, &self.boot, &mount_labels()));
        let loss = match &verdict {
            None | Some(Verdict::Gone(0)) => RecordedLoss::Nothing,
            Some(Verdict::Gone(n)) => RecordedLoss::Entries(*n),
            Some(Verdict::Unknown(_)) => RecordedLoss::Unknown,
        };
        if let Some(why) = rules::incomplete_scan_refusal(incomplete, loss) {
            return Err(why);
        }
        let stats = self.bpf.apply(cgid, keys, prune_for(mode)).map_err(|e| {
            format!(
                "cannot apply the denylist: {}",
                crate::error::error_chain(&e)
            )
        })?;
        log::info!(
            "uid {uid}: {} files and {} names denied ({} added, {} {}); {} launch(es)",
            keys.files().len(),
            keys.names().len(),
            stats.added,
            stats.removed,
            if mode == ApplyMode::Exact {
                "removed"
            } else {
                "kept though unlisted"
            },
            launches
        );
        // The record speaks only when the apply itself removed nothing.
        let recorded = match verdict {
            Some(verdict) if recall && stats.removed_entries == 0 => {
                Self::recorded_notice(uid, verdict)
            }
            _ => None,
        };
        // What the sandbox holds beyond the lists: after an exact apply,
        // stale keys whose deletion failed; after an add-only one, also those
        // it kept on purpose.
        Ok(ApplyReport {
            added: stats.added,
            removed: stats.removed,
            removed_entries: stats.removed_entries,
            exceptions_added: stats.exceptions_added,
            exceptions_held_back: stats.exceptions_held_back,
            recorded,
            unlisted: self.bpf.held_len(cgid).saturating_sub(keys.len()),
            unlisted_entries: self
                .bpf
                .held(cgid)
                .map_or(0, crate::lists::entries::DenySet::entries)
                .saturating_sub(keys.entries()),
            version: self.bpf.version(cgid),
        })
    }

    /// The note for an exact apply to a sandbox of `uid` that held nothing,
    /// from the `verdict` of what its record says it denied until now: how
    /// many of those entries the new keys lack, or, if the record cannot be
    /// used, that entries may no longer be denied (fail safe; the log says
    /// why).
    fn recorded_notice(uid: u32, verdict: Verdict) -> Option<String> {
        match verdict {
            Verdict::Gone(0) => None,
            Verdict::Gone(n) => {
                log::info!(
                    "uid {uid}: {n} entries its record says were denied until now are no longer denied"
                );
                Some(rules::removal_notice(ApplyMode::Exact, n))
            }
            Verdict::Unknown(why) => {
                log::error!(
                    "uid {uid}: cannot use the record of what its sandboxes denied: {why}; \
                     the launch gets a note that entries may no longer be denied, and the record is written anew"
                );
                Some(
                    "the record of what your sandboxes denied until now could not be read \
                     (the daemon's log says why): entries denied until now may no longer be denied \
                     to your sandboxes"
                        .to_owned(),
                )
            }
        }
    }

    /// Writes `uid`'s record from what the mirror holds for sandbox `cgid`,
    /// unless it was last written from that sandbox and `changed` is false.
    /// A failure is logged: after a restart or reboot, entries removed from
    /// the lists may then go without a note.
    fn record(&mut self, uid: u32, cgid: u64, changed: bool) {
        if !changed && self.recorded.get(&uid) == Some(&cgid) {
            return;
        }
        self.recorded.remove(&uid);
        let empty = DenySet::default();
        let held = self.bpf.held(cgid).unwrap_or(&empty);
        let stored = record::new_key()
            .map_err(|e| format!("getrandom: {e}"))
            .and_then(|key| {
                let text = record::encode(held, &self.boot, key, &mount_labels());
                record::store(&self.paths.state_dir, uid, &text).map_err(|e| e.to_string())
            });
        match stored {
            Ok(()) => {
                self.recorded.insert(uid, cgid);
            }
            Err(e) => log::error!(
                "uid {uid}: cannot record what its sandbox denies: {e}; after a restart or reboot, \
                 entries removed from its lists meanwhile may go without a note"
            ),
        }
    }

    /// [`Command::Inspect`]: a launcher just before its move. First its
    /// descriptors, against what `sandbox` holds after this apply
    /// ([`rules::denied_descriptor`]); then its uids and start time, and
    /// its pidfd tested alive after those reads.
    fn inspect(&self, launch: LaunchId, sandbox: Option<u64>) -> Inspection {
        let Some(p) = self.pending.get(&launch) else {
            return Inspection::Unreadable("the launch is gone".to_owned());
        };
        let held = sandbox.and_then(|cgid| self.bpf.held(cgid));
        if let Some(why) = rules::denied_descriptor(&p.descriptors, held) {
            return Inspection::Holds(why);
        }
        let pid = p.pidfd.pid();
        let uids = match procfs::read_uids(pid) {
            Ok(uids) => uids,
            Err(e) => return Inspection::Unreadable(format!("process {pid}: {e}")),
        };
        match procfs::read_start_ppid(pid) {
            Ok((start, _)) => Inspection::Seen {
                uids,
                start,
                alive: p.pidfd.alive(),
            },
            Err(e) => Inspection::Unreadable(format!("process {pid}: {e}")),
        }
    }

    /// Answers a status question (`op=status`, `agent-sandbox-exec --status`)
    /// of the connecting uid from the daemon's state: the counts its
    /// sandbox's entries in the maps (the mirror, [`Bpf::held`]) and the
    /// warnings about its own list at its last apply. Only the uid's own
    /// state, and no list text (the warnings name lines by number).
    fn answer_status(&self, conn: &Conn) {
        let uid = conn.peer.uid;
        let cgid = cgroup::cgroup_id(&self.tree.dir_for(uid)).ok();
        let held = cgid.and_then(|c| self.bpf.held(c));
        let mut answer = request::StatusReply {
            sandbox: cgid.is_some(),
            without: self.bpf.variant().describe(),
            ..Default::default()
        };
        if let Some(set) = held {
            answer.files = set.files().iter().filter(|k| k.kind == KIND_OPEN).count();
            answer.marks = set.files().len() - answer.files;
            answer.names = set
                .names()
                .iter()
                .filter(|n| crate::lists::entries::denies_read(n.dir.kind))
                .count();
        }
        if let Some(w) = self.launches.user_warnings(uid) {
            answer.warnings = w.to_vec();
        }
        log::debug!("status: uid {uid} pid {}", conn.peer.pid);
        if let Err(e) = request::send_packet(conn.fd.as_fd(), answer.encode().as_bytes()) {
            log::debug!("cannot answer the status of uid {uid}: {e}");
        }
    }

    /// Sends `reply` on the connection (one packet, never blocking). A
    /// failure means the launcher is gone or stopped reading: it is logged at
    /// debug level only, since any user can cause it at will.
    fn reply(&self, conn: &Conn, reply: &Reply) {
        if let Err(e) = request::send_packet(conn.fd.as_fd(), reply.encode().as_bytes()) {
            log::debug!(
                "cannot reply to uid {} pid {}: {e}",
                conn.peer.uid,
                conn.peer.pid
            );
        }
    }
}

/// Returns the heap's free pages to the kernel (malloc_trim(3)).
fn trim() {
    crate::os::sys::trim_heap();
}

/// Stable names of the file systems mounted in the daemon's namespace
/// ([`record::labels_from_mountinfo`]); none if the table cannot be read.
fn mount_labels() -> HashMap<u32, Vec<u8>> {
    match fs::read("/proc/self/mountinfo") {
        Ok(text) => record::labels_from_mountinfo(&text),
        Err(e) => {
            log::warn!(
                "cannot read /proc/self/mountinfo: {e}; file systems are not named in records"
            );
            HashMap::new()
        }
    }
}

/// Checks that process `pid` runs entirely as `uid` (real, effective, saved
/// and filesystem uid) and is executing this very binary (the launcher), and
/// returns a pidfd pinning it. The uids are read after
/// the pidfd is taken and the pidfd is checked alive after the read, so they
/// belong to the pinned process.
fn authenticate(uid: u32, pid: i32) -> Result<Pidfd, String> {
    let pidfd = Pidfd::open(pid).map_err(|e| format!("process {pid}: {e}"))?;
    let uids = procfs::read_uids(pid).map_err(|e| format!("process {pid}: {e}"))?;
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
            "process {pid} runs as uids {uids:?}, not only as uid {uid}, which connected"
        ));
    }
    Ok(pidfd)
}

fn drain(fd: &OwnedFd) {
    let mut buf = [0u8; 64];
    // A non-blocking pipe: read until it is empty (EAGAIN) or closed.
    while matches!(nix::unistd::read(fd, &mut buf), Ok(n) if n > 0) {}
}

/// The maps' side of an apply mode: only a mode that may loosen a sandbox
/// ([`rules::may_loosen`]) prunes its stale entries.
fn prune_for(mode: ApplyMode) -> Prune {
    if rules::may_loosen(mode) {
        Prune::Stale
    } else {
        Prune::Keep
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fresh directory for one test's [`Paths`].
    fn scratch(name: &str) -> (std::path::PathBuf, Paths) {
        let root = std::env::temp_dir().join(format!("asx-daemon-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&root);
        fs::create_dir_all(&root).unwrap();
        let paths = Paths::under(&root);
        (root, paths)
    }

    #[test]
    fn one_instance_at_a_time() {
        let (root, paths) = scratch("lock");
        let first = lock_instance(&paths).unwrap();
        assert!(first.is_some(), "the first daemon takes the lock");
        assert!(paths.run_dir.is_dir());
        // Another open file description of the same lock file: refused.
        assert!(lock_instance(&paths).unwrap().is_none());
        drop(first);
        assert!(lock_instance(&paths).unwrap().is_some(), "free again");
        fs::remove_dir_all(root).unwrap();
    }
}
