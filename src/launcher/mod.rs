//! `agent-sandbox-exec PROGRAM [ARGS...]`: enter the caller's sandbox, then exec.
//!
//! 0. Make the home's XDG base directories that are missing
//!    ([`make_base_dirs`]), so that a read-only line of the shipped
//!    defaults for a directory below them (`readonly ~/.config/autostart/`)
//!    guards only that directory, not all of `~/.config`.
//! 1. The daemon must be serving: the ready file names a live process.
//! 2. Connect to its socket (listened on by root) and send the request, which
//!    names this very process (the daemon checks it is the one that connected).
//! 3. Wait, bounded, for the reply on the same connection; an EOF, a timeout
//!    or a daemon that stopped refuses. Show the user's list warnings.
//! 4. Check /proc/self/cgroup names `agent-sandbox-exec/uid-<uid>`.
//! 5. Check the inherited descriptors (see [`check_inherited_fds`]): one
//!    open on a file the sandbox denies refuses, naming it. The request
//!    carries their keys too ([`descriptors`]), and the daemon refuses a
//!    launch whose descriptor's key its sandbox denies, whatever the file's
//!    permissions say now.
//! 6. execvp(PROGRAM, ARGS) with argv and environment unchanged.
//!
//! With the request go the sockets that the user's lists allow (`socket`
//! lines, resolved here with this process's environment and credentials:
//! [`allowed_sockets`]); the daemon applies them only to a launch from
//! outside every sandbox. The launcher keeps each socket's `O_PATH`
//! descriptor until the daemon's answer, so that no allowed inode is freed
//! (and its number handed to another socket) before the daemon stored it.
//!
//! Anything not ready or not as expected refuses with exit status
//! [`EXIT_REFUSED`] and one line on stderr; PROGRAM never runs. There is no
//! flag or environment variable that skips a step.

pub mod check;
pub mod denials;

use std::ffi::{OsStr, OsString};
use std::fs;
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::time::{Duration, Instant};

use nix::fcntl::OFlag;
use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use nix::sys::stat::Mode;

use crate::lists::denylist::SocketSpec;
use crate::lists::include;
use crate::os::cgroup;
use crate::os::paths::Paths;
use crate::os::procfs;
use crate::policy::privilege;
use crate::proto::ready::{alive, serving_pid};
use crate::proto::request::{
    self, AllowedPort, AllowedSocket, Received, Reply, Request, RequestError,
};
use crate::resolve::list_file::{Trust, read_include};

/// Exit status of every refusal.
pub const EXIT_REFUSED: u8 = 2;
/// How long to wait for the daemon's reply, from the start of the connect.
/// Longer than the resolver deadline plus a queue of other users' launches.
pub const REPLY_TIMEOUT: Duration = Duration::from_secs(30);

/// Why the launcher refuses; printed as `agent-sandbox-exec: <this>`.
#[derive(Debug, thiserror::Error)]
pub enum LaunchError {
    /// The daemon is not serving.
    #[error(
        "the agent-sandbox-execd daemon is not running ({0}); refusing to start without the sandbox"
    )]
    NoDaemon(String),
    /// Writing the request failed.
    #[error("cannot send the request to the daemon: {0}")]
    Request(String),
    /// The daemon refused.
    #[error("the daemon refused: {0}")]
    Refused(String),
    /// No reply in time, or the daemon went away while waiting.
    #[error("no answer from the daemon: {0}")]
    NoReply(String),
    /// The reply said ok but this process is not in its sandbox.
    #[error("not in the sandbox cgroup after the daemon's answer ({0}); refusing")]
    NotInSandbox(String),
    /// The inherited descriptors cannot be told apart (their keys).
    #[error("cannot examine the inherited descriptors ({0}); refusing to start")]
    Descriptors(String),
    /// An inherited descriptor is open on a file the sandbox denies.
    #[error(
        "descriptor {fd} ({path}) is open on a file your sandbox denies, and PROGRAM would \
         inherit it; close it before launching (e.g. `{fd}<&-`)"
    )]
    DeniedDescriptor {
        /// The descriptor number.
        fd: i32,
        /// What /proc/self/fd/<fd> links to.
        path: String,
    },
}

/// What the command line asks for.
#[derive(Debug, PartialEq, Eq)]
enum Cli<'a> {
    Help,
    Version,
    /// `--check [LIST]`: resolve the lists offline ([`crate::launcher::check`]).
    Check(Option<&'a OsString>),
    /// `--status [-v]`: where this process stands ([`status`]).
    Status {
        verbose: bool,
    },
    /// `--denials [...]`: the uid's recent refusals ([`denials::main`]).
    Denials(&'a [OsString]),
    /// PROGRAM and its arguments, exactly as given (bytes, any encoding).
    Run(&'a OsString, &'a [OsString]),
    /// A usage error, to print after `agent-sandbox-exec: `.
    Usage(String),
}

/// Parses the arguments after argv[0]. Only a first argument that is
/// `--help`/`-h`, `--version`/`-V`, `--check`, `--status`, `--` or another
/// `-x` is an option; anything else, including a non-UTF-8 name, is PROGRAM.
fn parse_cli(args: &[OsString]) -> Cli<'_> {
    match args.first().and_then(|a| a.to_str()) {
        Some("--check") => {
            return match args {
                [_] => Cli::Check(None),
                [_, list] => Cli::Check(Some(list)),
                _ => Cli::Usage("usage: agent-sandbox-exec --check [LIST]".into()),
            };
        }
        Some("--denials") => return Cli::Denials(&args[1..]),
        Some("--status") => {
            return match args.get(1).map(|a| a.to_str()) {
                None => Cli::Status { verbose: false },
                Some(Some("-v" | "--verbose")) if args.len() == 2 => Cli::Status { verbose: true },
                _ => Cli::Usage("usage: agent-sandbox-exec --status [-v]".into()),
            };
        }
        _ => {}
    }
    let rest = match args.first().map(|a| a.to_str()) {
        None => {
            return Cli::Usage(
                "no PROGRAM given; usage: agent-sandbox-exec [--] PROGRAM [ARGS...]".into(),
            );
        }
        Some(Some("--help" | "-h")) => return Cli::Help,
        Some(Some("--version" | "-V")) => return Cli::Version,
        Some(Some("--")) => &args[1..],
        Some(Some(s)) if s.starts_with('-') && s.len() > 1 => {
            return Cli::Usage(format!(
                "unknown option {s:?} (options: --help, --version, --check [LIST], --status [-v], \
                 --denials [--follow] [--since DURATION] [--json]); \
                 put -- before a PROGRAM whose name starts with '-'"
            ));
        }
        Some(_) => args,
    };
    match rest.split_first() {
        Some((program, rest)) => Cli::Run(program, rest),
        None => Cli::Usage("no PROGRAM given after --".into()),
    }
}

/// Entry point of the launcher mode; `args` excludes argv[0].
pub fn main(args: &[OsString]) -> u8 {
    let paths = Paths::system();
    let (program, rest) = match parse_cli(args) {
        Cli::Help => {
            println!(
                "Usage: agent-sandbox-exec [--] PROGRAM [ARGS...]\n\
                 \x20      agent-sandbox-exec --check [LIST]\n\
                 \x20      agent-sandbox-exec --status [-v]\n\
                 \x20      agent-sandbox-exec --denials [--follow] [--since DURATION] [--json]\n\n\
                 Runs PROGRAM (found in PATH like a shell does) in your agent sandbox: it and\n\
                 every process it starts get \"Operation not permitted\" when opening a file in\n\
                 {} or ~/{}.\n\
                 Exit status: PROGRAM's, or {EXIT_REFUSED} if the sandbox could not be set up\n\
                 (PROGRAM then never runs).\n\n\
                 --check [LIST]  resolve the lists (or LIST) as you, without the daemon, and print\n\
                 \x20               what each line would deny now and lines that look like mistakes;\n\
                 \x20               exit 0 clean, 1 problems, 2 a list cannot be read\n\
                 --status [-v]   whether you are in a sandbox, whether the daemon serves, what is\n\
                 \x20               enforced for you (-v: each line of your lists); exit 0 when the\n\
                 \x20               daemon serves, 1 when it does not, 2 for a usage error\n\
                 --denials       what your sandbox was refused lately (the daemon keeps your last\n\
                 \x20               200), oldest first, and which list line caused it; --follow\n\
                 \x20               waits for more, --since 10m (s, m, h, d) only the recent ones,\n\
                 \x20               --json one JSON object per line; works inside a sandbox too; also\n\
                 \x20               the opens an `audit PATH` or `audit DIR/` line would deny (allowed)\n\
                 See agent-sandbox-exec(1).",
                paths.base_list.display(),
                crate::os::paths::HOME_LIST
            );
            return 0;
        }
        Cli::Version => {
            println!("agent-sandbox-exec {}", env!("CARGO_PKG_VERSION"));
            return 0;
        }
        Cli::Usage(why) => {
            eprintln!("agent-sandbox-exec: {why}");
            return EXIT_REFUSED;
        }
        Cli::Check(list) => {
            return crate::launcher::check::main(&paths, list.map(std::path::Path::new));
        }
        Cli::Status { verbose } => return status(&paths, verbose),
        Cli::Denials(opts) => {
            let ask = |r: &Request| ask(&paths, r).map(|(_, m)| m).map_err(|e| e.to_string());
            return crate::launcher::denials::main(opts, &ask, EXIT_REFUSED);
        }
        Cli::Run(program, rest) => (program, rest),
    };
    // A mistyped PROGRAM is named as such, not as a daemon problem (the
    // exec below looks it up again; this only picks the message).
    if !findable(program) {
        eprintln!(
            "agent-sandbox-exec: cannot run {}: not found in PATH (nothing was started)",
            program.to_string_lossy()
        );
        return 127;
    }
    if let Err(e) = enter_sandbox(&paths).and_then(|()| check_inherited_fds()) {
        eprintln!("agent-sandbox-exec: {e}");
        return EXIT_REFUSED;
    }
    let err = std::process::Command::new(program).args(rest).exec();
    eprintln!(
        "agent-sandbox-exec: cannot run {}: {err}",
        program.to_string_lossy()
    );
    // Like a shell: 127 when not found, 126 when found but not runnable.
    if err.kind() == io::ErrorKind::NotFound {
        127
    } else {
        126
    }
}

/// Asks the daemon to move this process into its sandbox and checks that it
/// did. Prints the daemon's warnings about the user's own list
/// (`agent-sandbox-exec: warning: <list>:<line>: ...`) and its notices
/// (`agent-sandbox-exec: note: ...`) on stderr.
///
/// # Errors
/// [`LaunchError`] for every way the sandbox is not in place.
pub fn enter_sandbox(paths: &Paths) -> Result<(), LaunchError> {
    let daemon = serving_pid(paths).map_err(|e| LaunchError::NoDaemon(e.0))?;
    let uid = nix::unistd::getuid().as_raw();
    if let Some(home) = home_of(uid) {
        make_base_dirs(&home);
    }
    let deadline = Instant::now() + REPLY_TIMEOUT;
    let conn = connect_daemon(paths, |e| match &e {
        RequestError::Io { cause, .. } if cause.raw_os_error() == Some(libc::EAGAIN) => {
            LaunchError::NoReply(format!(
                "its socket's queue stayed full for {} s",
                REPLY_TIMEOUT.as_secs()
            ))
        }
        _ => LaunchError::NoDaemon(e.to_string()),
    })?;
    let descriptors = descriptors()?;
    // Held until the answer: see the module docs.
    let (sockets, ports, socket_fds) = allowed_sockets(paths, uid);
    let req = Request {
        pid: std::process::id() as i32,
        status: false,
        denials_after: None,
        sockets,
        ports,
        descriptors,
    };
    request::send_packet(conn.as_fd(), req.encode().as_bytes())
        .map_err(|e| LaunchError::Request(e.to_string()))?;
    let reply = wait_reply(paths, &conn, daemon, deadline);
    drop(conn);
    drop(socket_fds);
    let reply = reply?;
    for w in &reply.warnings {
        eprintln!("agent-sandbox-exec: warning: {w}");
    }
    for n in &reply.notices {
        eprintln!("agent-sandbox-exec: note: {n}");
    }
    if let Some(w) = privilege::warning(&privilege::root_equivalent(&own_group_names()), false) {
        eprintln!("agent-sandbox-exec: warning: {w}");
    }
    if let Some(why) = reply.refusal {
        return Err(LaunchError::Refused(why));
    }
    let own = procfs::read_pseudo_text("/proc/self/cgroup")
        .map_err(|e| LaunchError::NotInSandbox(format!("/proc/self/cgroup: {e}")))?;
    let want = cgroup::sandbox_path_for(uid);
    match procfs::v2_path_of(&own) {
        Some(p) if p == want => Ok(()),
        other => Err(LaunchError::NotInSandbox(format!(
            "cgroup is {}, expected {want}",
            other.unwrap_or("unknown")
        ))),
    }
}

/// The home directory of `uid` in the user database, if it has an entry.
fn home_of(uid: u32) -> Option<std::path::PathBuf> {
    nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(uid))
        .ok()
        .flatten()
        .map(|u| u.dir)
}

/// The XDG base directories below the home that a launch makes when they
/// are missing, parents first: `~/.config` (`$XDG_CONFIG_HOME`'s default),
/// `~/.local` and `~/.local/share` (`$XDG_DATA_HOME`'s default), as the XDG
/// Base Directory Specification has applications make them (mode 0700).
pub const BASE_DIRS: [&str; 3] = [".config", ".local", ".local/share"];

/// Makes each of [`BASE_DIRS`] below `home` that is missing (mode 0700, as
/// this user). A read-only line whose directory is missing is guarded at
/// its first missing part, where nothing can then be made from inside a
/// sandbox (the resolver's rule): without this, `readonly
/// ~/.config/autostart/` of the shipped defaults would keep a user without
/// `~/.config` from having one made by any tool inside. Best effort: a
/// directory that cannot be made (a launch from inside, where the guard
/// already stands; a read-only home) is left to that rule.
fn make_base_dirs(home: &Path) {
    use std::os::unix::fs::DirBuilderExt;
    for rel in BASE_DIRS {
        let dir = home.join(rel);
        if fs::symlink_metadata(&dir).is_err_and(|e| e.kind() == io::ErrorKind::NotFound) {
            let _ = fs::DirBuilder::new().mode(0o700).create(&dir);
        }
    }
}

/// Whether `program` names an existing file: a name with a `/` as is, else
/// in a directory of `PATH` (as execvp(3) searches it; the default path
/// when `PATH` is unset).
fn findable(program: &OsString) -> bool {
    use std::os::unix::ffi::OsStrExt;
    let name = program.as_bytes();
    if name.is_empty() {
        return false;
    }
    if name.contains(&b'/') {
        return std::path::Path::new(program).exists();
    }
    let path = std::env::var_os("PATH").unwrap_or_else(|| "/usr/local/bin:/usr/bin:/bin".into());
    std::env::split_paths(&path).any(|d| {
        let d = if d.as_os_str().is_empty() {
            std::path::PathBuf::from(".")
        } else {
            d
        };
        d.join(program).is_file()
    })
}

/// The names of this process's groups: its real gid's and its
/// supplementary ones (getgroups(2)); a gid without a name is left out.
fn own_group_names() -> Vec<String> {
    use nix::unistd::{Gid, Group, getgid, getgroups};
    let mut gids = getgroups().unwrap_or_default();
    gids.push(getgid());
    gids.sort_unstable_by_key(|g: &Gid| g.as_raw());
    gids.dedup();
    gids.into_iter()
        .filter_map(|g| Group::from_gid(g).ok().flatten().map(|g| g.name))
        .collect()
}

/// Whether sudo runs a command as root for this user now without asking for
/// a password (`sudo -n true` exits 0: a NOPASSWD rule or a cached
/// timestamp); false when sudo is not installed or refuses.
fn sudo_without_password() -> bool {
    std::process::Command::new("sudo")
        .args(["-n", "true"])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Exit status of `--status` when the daemon does not serve.
pub const EXIT_STATUS_NOT_SERVING: u8 = 1;

/// `agent-sandbox-exec --status [-v]`: prints whether this process is in a
/// sandbox, whether the daemon serves (with its reason when it does not),
/// and what its sandbox enforces for the caller's uid (counts by kind);
/// `verbose` adds each line of the lists as they resolve now (the text only
/// where [`crate::launcher::check::echo_allowed`] allows). Returns 0 when the daemon
/// serves, [`EXIT_STATUS_NOT_SERVING`] when it does not.
fn status(paths: &Paths, verbose: bool) -> u8 {
    let uid = nix::unistd::getuid().as_raw();
    match crate::launcher::check::own_sandbox() {
        Some(path) => println!("sandbox: yes, this process is in {path}"),
        None => println!("sandbox: no, this process is not in a sandbox"),
    }
    let code = match ask_status(paths) {
        Ok((pid, s)) => {
            println!("daemon: serving (pid {pid})");
            for w in &s.without {
                println!("daemon: loaded without {w}; every denial of the lists holds");
            }
            if s.sandbox {
                println!(
                    "enforced for uid {uid}: {} file(s) denied, {} name(s) watched, {} directories and symlinks on the way guarded",
                    s.files, s.names, s.marks
                );
            } else {
                println!(
                    "enforced for uid {uid}: nothing yet (no sandbox of yours exists; the next launch creates it)"
                );
            }
            for w in &s.warnings {
                println!("warning at the last launch: {w}");
            }
            let groups = privilege::root_equivalent(&own_group_names());
            if let Some(w) = privilege::warning(&groups, sudo_without_password()) {
                println!("warning: {w}");
            }
            0
        }
        Err(e) => {
            println!("daemon: not serving: {e}");
            println!(
                "enforced for uid {uid}: unknown without the daemon; new launches are refused (see journalctl -u agent-sandbox-execd)"
            );
            EXIT_STATUS_NOT_SERVING
        }
    };
    if verbose {
        println!("your lists as they resolve now (the next launch applies them):");
        match crate::launcher::check::check_lists(paths, None) {
            Ok(reports) => print!("{}", crate::launcher::check::render(&reports)),
            Err(e) => println!("cannot resolve the lists: {e}"),
        }
    }
    code
}

/// Connects to the daemon's request socket ([`Paths::socket`]), waiting at
/// most [`REPLY_TIMEOUT`] for room in its queue, and checks that root
/// listens there.
///
/// # Errors
/// `on_connect`'s error for a failed connect; [`LaunchError::Request`] if
/// the listener's credentials cannot be read or are not root's.
fn connect_daemon(
    paths: &Paths,
    on_connect: impl FnOnce(RequestError) -> LaunchError,
) -> Result<OwnedFd, LaunchError> {
    let socket = paths.socket();
    let conn = request::connect_to(&socket, REPLY_TIMEOUT).map_err(on_connect)?;
    // The listening end's credentials are those of the process that called
    // listen(2): only root can bind in the daemon's 0755 root directory,
    // checked anyway so that a misconfigured tree fails closed.
    let server = request::peer_of(conn.as_fd()).map_err(|e| LaunchError::Request(e.to_string()))?;
    if server.uid != 0 {
        return Err(LaunchError::Request(format!(
            "{} is served by uid {}, not by root",
            socket.display(),
            server.uid
        )));
    }
    Ok(conn)
}

/// Asks the daemon for this uid's status; its pid and the answer.
fn ask_status(paths: &Paths) -> Result<(i32, request::StatusReply), LaunchError> {
    let req = Request {
        pid: std::process::id() as i32,
        status: true,
        ..Default::default()
    };
    let (daemon, m) = ask(paths, &req)?;
    request::StatusReply::parse(&m)
        .map(|s| (daemon, s))
        .map_err(|e| LaunchError::NoReply(e.to_string()))
}

/// Sends `req`, a question that moves nothing (`op=status`, `op=denials`),
/// and returns the daemon's pid and its answer, waiting 10 s at most.
///
/// # Errors
/// [`LaunchError`]: no daemon, no answer.
fn ask(paths: &Paths, req: &Request) -> Result<(i32, Vec<u8>), LaunchError> {
    let daemon = serving_pid(paths).map_err(|e| LaunchError::NoDaemon(e.0))?;
    let conn = connect_daemon(paths, |e| LaunchError::NoDaemon(e.to_string()))?;
    request::send_packet(conn.as_fd(), req.encode().as_bytes())
        .map_err(|e| LaunchError::Request(e.to_string()))?;
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let mut fds = [PollFd::new(conn.as_fd(), PollFlags::POLLIN)];
        let _ = poll(&mut fds, PollTimeout::from(250u16));
        match request::recv_packet(conn.as_fd(), request::MAX_REPLY_BYTES) {
            Ok(Received::Message(m)) => return Ok((daemon, m)),
            Ok(Received::Closed) => {
                return Err(LaunchError::NoReply(
                    "the daemon closed the connection without an answer".into(),
                ));
            }
            Ok(_) => {}
            Err(e) => return Err(LaunchError::NoReply(e.to_string())),
        }
        if Instant::now() >= deadline || !alive(daemon) {
            return Err(LaunchError::NoReply("no answer within 10 s".into()));
        }
    }
}

/// The descriptors of files and directories this process holds (which
/// PROGRAM would inherit) with their files' keys, for the request.
///
/// # Errors
/// [`LaunchError::Descriptors`]: /proc/self/fd or a descriptor cannot be
/// read, or there are more than [`request::MAX_DESCRIPTORS`].
fn descriptors() -> Result<Vec<request::Descriptor>, LaunchError> {
    let fds: Vec<i32> = fs::read_dir("/proc/self/fd")
        .map_err(|e| LaunchError::Descriptors(format!("/proc/self/fd: {e}")))?
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .collect();
    // The directory's own descriptor, closed by now, is left out (EBADF).
    let keys = crate::resolve::keys::descriptor_keys(&fds)
        .map_err(|e| LaunchError::Descriptors(e.to_string()))?;
    if keys.len() > request::MAX_DESCRIPTORS {
        return Err(LaunchError::Descriptors(format!(
            "{} are open on files or directories, more than the {} a launch may pass on; \
             close some",
            keys.len(),
            request::MAX_DESCRIPTORS
        )));
    }
    Ok(keys
        .into_iter()
        .map(|(fd, key)| request::Descriptor { fd, key })
        .collect())
}

/// The sockets the `socket` lines of the base list and the user's list
/// allow, resolved now with this process's environment and credentials, at
/// most [`request::MAX_SOCKETS`], and the `O_PATH` descriptors their keys
/// were read from (keep them until the daemon's answer). A line that names
/// no socket gets a warning on stderr (`agent-sandbox-exec: warning:
/// <list>:<line>: ...`) and is skipped; an unreadable list is left to the
/// daemon to report.
fn allowed_sockets(
    paths: &Paths,
    uid: u32,
) -> (Vec<AllowedSocket>, Vec<AllowedPort>, Vec<OwnedFd>) {
    let home = home_of(uid);
    let mut lists = vec![(paths.base_list.clone(), None)];
    if let Some(h) = &home {
        lists.push((Paths::home_list(h), Some(h.as_os_str().as_bytes())));
    }
    let mut out: Vec<AllowedSocket> = Vec::new();
    let mut ports: Vec<AllowedPort> = Vec::new();
    let mut held: Vec<OwnedFd> = Vec::new();
    for (list, home) in lists {
        let Ok(bytes) = fs::read(&list) else { continue };
        // Most lists have no socket or include line: skip their parse (every
        // launch reads both lists here; a 10,000-line list took milliseconds).
        if !may_hold_socket_lines(&bytes) {
            continue;
        }
        // The files a list includes are read as the daemon's resolvers
        // read them (crate::resolver::Inputs::read).
        let trust = match home {
            None => Trust::Root,
            Some(_) => Trust::User(uid),
        };
        // The list's own identity, as the resolvers pass it: a list that
        // includes itself under another name is read once.
        let id = fs::metadata(&list).ok().map(|m| {
            use std::os::unix::fs::MetadataExt;
            (m.dev(), m.ino())
        });
        let expanded = include::expand(list.as_os_str().as_bytes(), bytes, id, home, &mut |p| {
            read_include(Path::new(OsStr::from_bytes(p)), trust)
        });
        for (file, line) in expanded.files.iter().flat_map(|f| {
            let path = Path::new(OsStr::from_bytes(&f.path));
            crate::lists::denylist::parse(&f.bytes)
                .sockets
                .into_iter()
                .map(move |l| (path, l))
        }) {
            let at = format!("{}:{}", file.display(), line.line);
            if let SocketSpec::Port(transport, port) = line.spec {
                let p = AllowedPort { transport, port };
                if ports.contains(&p) {
                    continue;
                }
                if ports.len() == request::MAX_PORTS {
                    eprintln!(
                        "agent-sandbox-exec: warning: {at}: more than {} ports allowed; {p} skipped",
                        request::MAX_PORTS
                    );
                } else {
                    ports.push(p);
                }
                continue;
            }
            match resolve_socket(&line.spec, |n| std::env::var_os(n)) {
                Ok((s, _)) if out.iter().any(|o| o.key == s.key) => {}
                Ok((s, _)) if out.len() == request::MAX_SOCKETS => eprintln!(
                    "agent-sandbox-exec: warning: {at}: more than {} sockets allowed; {} skipped",
                    request::MAX_SOCKETS,
                    s.path
                ),
                Ok((s, fd)) => {
                    out.push(s);
                    held.push(fd);
                }
                Err(why) => eprintln!("agent-sandbox-exec: warning: {at}: {why}"),
            }
        }
    }
    (out, ports, held)
}

/// Whether list text `bytes` may hold a `socket` line, or include a file
/// that may: false when neither word occurs at all, so the list need not be
/// parsed for them.
fn may_hold_socket_lines(bytes: &[u8]) -> bool {
    bytes
        .windows(b"socket".len())
        .any(|w| w == b"socket" || w == b"includ")
}

/// The socket a `socket` line names, with `env` as the environment, and the
/// `O_PATH` descriptor its key was read from ([`crate::resolve::keys::socket_key`]).
///
/// # Errors
/// Why it names none: an unset or empty variable, a path that is not UTF-8
/// or holds a newline, or one that is not a Unix socket.
fn resolve_socket(
    spec: &SocketSpec<'_>,
    env: impl Fn(&str) -> Option<OsString>,
) -> Result<(AllowedSocket, OwnedFd), String> {
    use std::os::unix::ffi::OsStrExt;
    let (shown, path) = match spec {
        SocketSpec::Var(name) => match env(name) {
            Some(v) if !v.is_empty() => (format!("socket ${name} ({})", v.to_string_lossy()), v),
            _ => {
                return Err(format!(
                    "socket ${name}: {name} is not set in this launch's environment; nothing allowed"
                ));
            }
        },
        SocketSpec::Path(p) => {
            let v = OsString::from(std::ffi::OsStr::from_bytes(p));
            (format!("socket {}", v.to_string_lossy()), v)
        }
        SocketSpec::Port(t, port) => {
            return Err(format!(
                "socket {}:{port} is a port, not a socket file",
                t.name()
            ));
        }
    };
    let text = path
        .to_str()
        .filter(|t| !t.contains('\n') && t.starts_with('/'))
        .ok_or_else(|| format!("{shown}: not an absolute UTF-8 path; nothing allowed"))?;
    let (key, fd) = crate::resolve::keys::socket_key(text.as_bytes())
        .map_err(|e| format!("{shown}: {e}; nothing allowed"))?;
    let socket = AllowedSocket {
        key,
        path: text.to_owned(),
    };
    Ok((socket, fd))
}

/// May a launch go on with a descriptor of file type `mode` (st_mode)
/// whose reopen through /proc/self/fd gave `reopen` (the errno, or None
/// when it opened)? Only regular files and directories are reopened; EPERM
/// is the sandbox's refusal (lsm/file_open), while EACCES and the like are
/// the file's own permissions (a write-only descriptor), not a denial.
fn descriptor_refused(mode: u32, reopen: Option<i32>) -> bool {
    let kind = mode & libc::S_IFMT;
    (kind == libc::S_IFREG || kind == libc::S_IFDIR) && reopen == Some(libc::EPERM)
}

/// Checks, once in the sandbox, every descriptor this process holds: a
/// regular file or directory that reopening through /proc/self/fd/<n>
/// (a fresh open, judged by lsm/file_open) refuses with EPERM is a file the
/// sandbox denies, which PROGRAM would otherwise read through the inherited
/// descriptor. The daemon has judged their keys already (`descriptors()`);
/// this covers what has no key of its own, files below directory entries,
/// as far as their mode lets the reopen reach the hook. Sockets, pipes and terminals are left alone (see the README:
/// an inherited socket connected to an outside daemon stays usable).
///
/// # Errors
/// [`LaunchError::DeniedDescriptor`] for the first such descriptor.
pub fn check_inherited_fds() -> Result<(), LaunchError> {
    let entries = fs::read_dir("/proc/self/fd")
        .map_err(|e| LaunchError::NotInSandbox(format!("/proc/self/fd: {e}")))?;
    let fds: Vec<i32> = entries
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .collect();
    for fd in fds {
        // A closed fd (the read_dir one) fails with EBADF.
        let Ok(st) = crate::os::fd::fstat(fd) else {
            continue;
        };
        let mode = st.st_mode;
        let kind = mode & libc::S_IFMT;
        if kind != libc::S_IFREG && kind != libc::S_IFDIR {
            continue;
        }
        let proc_path = format!("/proc/self/fd/{fd}");
        let flags = OFlag::O_RDONLY | OFlag::O_CLOEXEC | OFlag::O_NOCTTY | OFlag::O_NONBLOCK;
        // Closed at once (dropped) if it opens.
        let errno = nix::fcntl::open(proc_path.as_str(), flags, Mode::empty())
            .err()
            .map(|e| e as i32);
        if descriptor_refused(mode, errno) {
            let path = fs::read_link(&proc_path)
                .map(|p| p.to_string_lossy().into_owned())
                .unwrap_or_else(|_| "?".into());
            return Err(LaunchError::DeniedDescriptor { fd, path });
        }
    }
    Ok(())
}

/// Waits until `deadline` for the reply on `conn`, checking every 250 ms
/// that the daemon that was ready is still the one serving.
fn wait_reply(
    paths: &Paths,
    conn: &OwnedFd,
    daemon: i32,
    deadline: Instant,
) -> Result<Reply, LaunchError> {
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(LaunchError::NoReply(format!(
                "timed out after {} s",
                REPLY_TIMEOUT.as_secs()
            )));
        }
        let ms = left.min(Duration::from_millis(250)).as_millis().max(1);
        let mut fds = [PollFd::new(conn.as_fd(), PollFlags::POLLIN)];
        match poll(
            &mut fds,
            PollTimeout::from(u16::try_from(ms).unwrap_or(250)),
        ) {
            Ok(_) | Err(nix::errno::Errno::EINTR) => {}
            Err(e) => return Err(LaunchError::NoReply(format!("poll: {e}"))),
        }
        if fds[0].revents().is_some_and(|r| !r.is_empty()) {
            match request::recv_packet(conn.as_fd(), request::MAX_REPLY_BYTES) {
                Ok(Received::Message(m)) => {
                    return Reply::parse(&m).map_err(|e| LaunchError::NoReply(e.to_string()));
                }
                Ok(Received::TooLarge(n)) => {
                    return Err(LaunchError::NoReply(format!(
                        "a reply of {n} bytes, more than the {} allowed",
                        request::MAX_REPLY_BYTES
                    )));
                }
                Ok(Received::Closed) => {
                    return Err(LaunchError::NoReply(
                        "the daemon closed the connection without an answer".into(),
                    ));
                }
                Ok(Received::Nothing) => {}
                Err(e) => return Err(LaunchError::NoReply(e.to_string())),
            }
        }
        let same = fs::read_to_string(paths.ready())
            .ok()
            .and_then(|t| t.trim().parse::<i32>().ok())
            == Some(daemon);
        if !same || !alive(daemon) {
            return Err(LaunchError::NoDaemon("it stopped while we waited".into()));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::ffi::OsStringExt;

    fn os(v: &[&[u8]]) -> Vec<OsString> {
        v.iter().map(|b| OsString::from_vec(b.to_vec())).collect()
    }

    /// The missing base directories are made 0700, parents first; one
    /// that exists (or a symlink in its place) is left as it is.
    #[test]
    fn base_dirs_are_made_when_missing_and_left_alone_otherwise() {
        use std::os::unix::fs::PermissionsExt;
        let home = std::env::temp_dir().join(format!("asx-base-dirs-{}", std::process::id()));
        let _ = fs::remove_dir_all(&home);
        fs::create_dir(&home).unwrap();
        make_base_dirs(&home);
        for rel in BASE_DIRS {
            let m = fs::symlink_metadata(home.join(rel)).unwrap();
            assert!(m.is_dir(), "{rel}");
            assert_eq!(m.permissions().mode() & 0o7777, 0o700, "{rel}");
        }
        fs::remove_dir_all(&home).unwrap();
        fs::create_dir_all(home.join("elsewhere")).unwrap();
        fs::create_dir(home.join(".local")).unwrap();
        fs::set_permissions(home.join(".local"), fs::Permissions::from_mode(0o755)).unwrap();
        std::os::unix::fs::symlink("elsewhere", home.join(".config")).unwrap();
        make_base_dirs(&home);
        assert!(
            fs::symlink_metadata(home.join(".config"))
                .unwrap()
                .is_symlink()
        );
        let local = fs::metadata(home.join(".local")).unwrap();
        assert_eq!(local.permissions().mode() & 0o7777, 0o755, "not changed");
        assert!(home.join(".local/share").is_dir());
        fs::remove_dir_all(&home).unwrap();
    }

    #[test]
    fn only_an_eperm_reopen_of_a_file_refuses() {
        assert!(descriptor_refused(libc::S_IFREG | 0o600, Some(libc::EPERM)));
        assert!(descriptor_refused(libc::S_IFDIR | 0o755, Some(libc::EPERM)));
        assert!(!descriptor_refused(
            libc::S_IFREG | 0o200,
            Some(libc::EACCES)
        ));
        assert!(!descriptor_refused(libc::S_IFREG | 0o600, None));
        assert!(!descriptor_refused(
            libc::S_IFSOCK | 0o777,
            Some(libc::EPERM)
        ));
        assert!(!descriptor_refused(
            libc::S_IFIFO | 0o600,
            Some(libc::EPERM)
        ));
    }

    #[test]
    fn lists_without_the_word_are_not_parsed_for_sockets() {
        assert!(!may_hold_socket_lines(b"~/.netrc\n/etc/shadow\n"));
        assert!(!may_hold_socket_lines(b""));
        assert!(may_hold_socket_lines(b"~/.netrc\nsocket $SSH_AUTH_SOCK\n"));
        // A path that merely contains the word is parsed (and is no socket line).
        assert!(may_hold_socket_lines(b"/run/user/1000/socket-dir/x\n"));
        assert!(
            crate::lists::denylist::parse(b"/run/user/1000/socket-dir/x\n")
                .sockets
                .is_empty()
        );
    }

    #[test]
    fn socket_lines_resolve_with_the_given_environment() {
        let dir = std::env::temp_dir().join(format!("asx-sock-test-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        let sock = dir.join("agent.sock");
        let _l = std::os::unix::net::UnixListener::bind(&sock).unwrap();
        fs::write(dir.join("plain"), b"x").unwrap();
        let sock_s = sock.to_str().unwrap().to_owned();
        let env = |n: &str| (n == "SSH_AUTH_SOCK").then(|| OsString::from(&sock_s));
        let (got, fd) = resolve_socket(&SocketSpec::Var("SSH_AUTH_SOCK"), env).unwrap();
        // The descriptor held is the socket's own.
        assert_eq!(
            fs::read_link(format!(
                "/proc/self/fd/{}",
                std::os::fd::AsRawFd::as_raw_fd(&fd)
            ))
            .unwrap(),
            sock
        );
        assert_eq!(got.path, sock_s);
        assert_eq!(
            got.key.ino,
            std::os::unix::fs::MetadataExt::ino(&fs::metadata(&sock).unwrap())
        );
        let (by_path, _) = resolve_socket(&SocketSpec::Path(sock_s.as_bytes()), env).unwrap();
        assert_eq!(by_path, got);
        let unset = resolve_socket(&SocketSpec::Var("NOPE"), env).unwrap_err();
        assert!(unset.contains("NOPE is not set"), "{unset}");
        let plain = dir.join("plain");
        let not_sock =
            resolve_socket(&SocketSpec::Path(plain.to_str().unwrap().as_bytes()), env).unwrap_err();
        assert!(not_sock.contains("not a Unix socket"), "{not_sock}");
        let missing = resolve_socket(&SocketSpec::Path(b"/nonexistent/x.sock"), env).unwrap_err();
        assert!(missing.contains("cannot stat"), "{missing}");
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn command_line() {
        assert!(matches!(parse_cli(&os(&[])), Cli::Usage(_)));
        assert_eq!(parse_cli(&os(&[b"--help"])), Cli::Help);
        assert_eq!(parse_cli(&os(&[b"-V"])), Cli::Version);
        assert!(matches!(parse_cli(&os(&[b"-x", b"y"])), Cli::Usage(_)));
        assert!(matches!(parse_cli(&os(&[b"--"])), Cli::Usage(_)));
        let a = os(&[b"--", b"-weird", b"arg"]);
        assert_eq!(parse_cli(&a), Cli::Run(&a[1], &a[2..]));
        let b = os(&[b"cat", b"--help"]);
        assert_eq!(parse_cli(&b), Cli::Run(&b[0], &b[1..]));
        // A non-UTF-8 PROGRAM is a program, not a usage error.
        let c = os(&[b"prog\xff", b"\xfe"]);
        assert_eq!(parse_cli(&c), Cli::Run(&c[0], &c[1..]));
        assert_eq!(parse_cli(&os(&[b"--check"])), Cli::Check(None));
        let l = os(&[b"--check", b"/tmp/list"]);
        assert_eq!(parse_cli(&l), Cli::Check(Some(&l[1])));
        assert!(matches!(
            parse_cli(&os(&[b"--check", b"a", b"b"])),
            Cli::Usage(_)
        ));
        assert_eq!(
            parse_cli(&os(&[b"--status"])),
            Cli::Status { verbose: false }
        );
        assert_eq!(
            parse_cli(&os(&[b"--status", b"-v"])),
            Cli::Status { verbose: true }
        );
        assert!(matches!(
            parse_cli(&os(&[b"--status", b"x"])),
            Cli::Usage(_)
        ));
        // A program called --check runs after --.
        let d = os(&[b"--", b"--check"]);
        assert_eq!(parse_cli(&d), Cli::Run(&d[1], &d[2..]));
        match parse_cli(&os(&[b"--stauts"])) {
            Cli::Usage(why) => assert!(why.contains("--status [-v]"), "{why}"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn program_lookup() {
        assert!(findable(&OsString::from("sh")));
        assert!(findable(&OsString::from("/bin/sh")));
        assert!(!findable(&OsString::from("no-such-program-asx")));
        assert!(!findable(&OsString::from("/no/such/prog")));
        assert!(!findable(&OsString::from("")));
    }
}
