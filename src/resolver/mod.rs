//! `agent-sandbox-exec-resolver`: the resolver process ([`main`]), started
//! only by the daemon ([`crate::daemon::pool`] starts and feeds it; the
//! wire format is [`crate::proto::resolver`]). It drops to the user (or stays
//! root for the base list), reads the lists it is sent and writes the keys.
//!
//! Turning one uid's lists into deny keys, in long-lived resolver processes.
//!
//! Every launch re-reads the base list ([`crate::os::paths::Paths::base_list`]) and
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
//! A request with nothing changed since the last one gets the last answer
//! again, without a lookup ([`reuse`]).

pub mod reuse;

use crate::lists::denylist::{self, Anchor};
use crate::lists::entries::{
    FileKey, KIND_AUDIT, KIND_DEEP_SCOPE, KIND_DIR_BASE, KIND_DIR_USER, KIND_EXC_BASE,
    KIND_EXC_USER, KIND_OPEN, KIND_PAT_BASE, KIND_PAT_DEEP_BASE, KIND_PAT_DEEP_EXC_BASE,
    KIND_PAT_DEEP_EXC_USER, KIND_PAT_DEEP_USER, KIND_PAT_EXC_BASE, KIND_PAT_EXC_USER,
    KIND_PAT_PREFILTER, KIND_PAT_SHAPE, KIND_PAT_USER, KIND_RO, KIND_RO_DIR_BASE, KIND_RO_DIR_OWN,
    ListEntry, ListOrigin, REPO_GUARD_KEY, audit_dir_kind, ro_dir_kind,
};
use crate::lists::include::{Expanded, ListFile, expand};
use crate::os::fd;
use crate::os::paths::{CATALOG_DIR, DEFAULTS_LIST, HOME_LIST};
use crate::proto::resolver::{
    EXIT_STALE, KindSink, ResolveError, RewriteSink, Role, Sink, WORKER_NAME,
};
use crate::resolve::keys::{
    KeyContext, KeyError, LastComponent, ListingSink, MAX_SCAN_KEYS, MAX_SYMLINKS,
};
use crate::resolve::list_file::{
    Trust, open_list, read_all, read_defaults, read_include, unknown_group_warning,
};
use crate::resolver::reuse::Reuse;
use nix::sys::prctl;
use nix::sys::signal::Signal;
use nix::unistd::{Pid, Uid, User};
use std::ffi::{OsStr, OsString};
use std::fs;
use std::io::{self, Write};
use std::os::fd::AsFd;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::net::UnixStream;
use std::path::{Component, Path, PathBuf};

/// Entry point of a resolver process (`agent-sandbox-exec-resolver base` or
/// `agent-sandbox-exec-resolver user UID`), started by the daemon as root
/// with its request socket as stdin. Serves requests until the socket
/// closes. Exit status: 0 when the daemon closed the socket, 64 for a bad
/// command line or a start by anyone but root, 71 when the socket broke,
/// 75 when stale (see [`EXIT_STALE`]).
pub fn main(args: &[OsString]) -> u8 {
    let role = match args {
        [b] if b == "base" => Some(Role::Base),
        [u, uid] if u == "user" => uid.to_str().and_then(|s| s.parse().ok()).map(Role::User),
        _ => None,
    };
    let (Some(role), true) = (role, nix::unistd::getuid().is_root()) else {
        eprintln!("{WORKER_NAME}: internal to agent-sandbox-execd, which starts it as root");
        return 64;
    };
    // The socket the daemon passed (checked below).
    let sock = fd::take_stdin().map(UnixStream::from);
    let Some(sock) = sock.filter(|s| s.local_addr().is_ok()) else {
        eprintln!("{WORKER_NAME}: standard input is not the daemon's socket");
        return 64;
    };
    let daemon = nix::unistd::getppid();
    let _ = prctl::set_no_new_privs();
    if !die_with(daemon) {
        return 0;
    }
    serve(role, &sock, daemon) as u8
}

/// Sets SIGKILL as this process's parent-death signal (again: a change of
/// credentials clears it, prctl(2)) and checks the parent is still `daemon`
/// (it may have died before). False if it is not.
pub(crate) fn die_with(daemon: Pid) -> bool {
    let _ = prctl::set_pdeathsig(Signal::SIGKILL);
    nix::unistd::getppid() == daemon
}

/// The resource limits of this process, to notice a change made from outside
/// (a process of the same uid may lower them with prlimit(2)).
pub(crate) fn limits() -> Vec<(libc::rlim_t, libc::rlim_t)> {
    use nix::sys::resource::Resource as R;
    // RLIM_NLIMITS: 16 resources since Linux 2.6.25, by number
    // (include/uapi/asm-generic/resource.h).
    [
        R::RLIMIT_CPU,
        R::RLIMIT_FSIZE,
        R::RLIMIT_DATA,
        R::RLIMIT_STACK,
        R::RLIMIT_CORE,
        R::RLIMIT_RSS,
        R::RLIMIT_NPROC,
        R::RLIMIT_NOFILE,
        R::RLIMIT_MEMLOCK,
        R::RLIMIT_AS,
        R::RLIMIT_LOCKS,
        R::RLIMIT_SIGPENDING,
        R::RLIMIT_MSGQUEUE,
        R::RLIMIT_NICE,
        R::RLIMIT_RTPRIO,
        R::RLIMIT_RTTIME,
    ]
    .into_iter()
    .map(|r| nix::sys::resource::getrlimit(r).unwrap_or((0, 0)))
    .collect()
}

/// Whether this process still has the groups a fresh resolver for `user`
/// would get.
pub(crate) fn groups_current(user: &User) -> bool {
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

pub(crate) fn serve(role: Role, sock: &UnixStream, daemon: Pid) -> i32 {
    let setup: Result<Option<User>, ResolveError> = match role {
        Role::Base => Ok(None),
        Role::User(uid) => User::from_uid(Uid::from_raw(uid))
            .map_err(|e| ResolveError::LookUp {
                uid,
                why: e.to_string(),
            })
            .and_then(|u| u.ok_or(ResolveError::NoPasswd(uid)))
            .and_then(|u| drop_privileges(&u).map(|()| Some(u))),
    };
    if !die_with(daemon) {
        return 0;
    }
    let spawned_limits = limits();
    let mut served = 0u64;
    // Kept across requests: the mount table is read again only after a
    // mount change (see KeyContext::renew), and the watches of the last
    // resolution tell whether its answer still holds (reuse).
    let mut keys: Option<Keys> = None;
    let mut last: Option<Answer> = None;
    loop {
        if let Some(k) = keys.as_mut() {
            // The first event settles it (the next resolution is a full
            // one): stop watching then, rather than have every change in
            // the watched directories queue an event until the next launch.
            if let Err(e) = k.reuse.stop_watching_on_change(sock.as_fd()) {
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
        let unchanged = match keys.as_mut().map(|k| k.reuse.renew(&mut k.ctx)) {
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
                k.reuse.watch_anew();
            }
            // Its length (filled in below), then the records.
            let mut records = vec![0u8; 8];
            let mut sink = Sink { out: &mut records };
            let result = inputs.and_then(|inputs| {
                match &user {
                    None => resolve_base(inputs.base.as_ref(), &mut keys, &mut sink),
                    Some(u) => resolve_user(u, &inputs, &mut keys, &mut sink),
                }
                .map(|()| inputs)
            });
            if let Some(k) = keys.as_mut() {
                if result.is_ok() {
                    mark_mounts(k, &mut Sink { out: &mut records });
                }
                let marks = k.ctx.take_marks();
                if result.is_ok() {
                    let mut sink = Sink { out: &mut records };
                    for m in marks {
                        sink.mark(m);
                    }
                }
                // Hold no mount busy while idle.
                k.ctx.forget_dirs();
                k.reuse.forget_dirs();
            }
            let inputs = match result {
                // Reusable only if every directory read is watched and
                // none changed while it was read.
                Ok(inputs) => keys
                    .as_ref()
                    .is_none_or(|k| k.reuse.settled())
                    .then_some(inputs),
                Err(fatal) => {
                    Sink { out: &mut records }.record(b'F', &fatal.to_string());
                    None
                }
            };
            if inputs.is_none()
                && let Some(k) = keys.as_mut()
            {
                k.reuse.drop_watches();
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
pub(crate) fn receive(
    sock: &UnixStream,
) -> io::Result<Option<Result<Option<fs::File>, ResolveError>>> {
    let mut tag = [0u8; 1];
    let got = fd::recv_with_fd(sock.as_fd(), &mut tag)?;
    if got.bytes == 0 {
        return Ok(None);
    }
    let mut files: Vec<fs::File> = got.fds.into_iter().map(fs::File::from).collect();
    Ok(Some(match (tag[0], files.len(), got.truncated) {
        (b'N', 0, false) => Ok(None),
        (b'B', 1, false) => Ok(files.pop()),
        (b'B', _, _) => Err(ResolveError::NoDescriptor),
        (t, ..) => Err(ResolveError::BadRequest(char::from(t))),
    }))
}

/// Which list an entry came from, for messages and the symlink rule.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Source {
    Base,
    Home,
}

impl Source {
    /// The list an entry of this source is reported as.
    fn origin(self) -> ListOrigin {
        match self {
            Source::Base => ListOrigin::Base,
            Source::Home => ListOrigin::User,
        }
    }
}

/// What a resolution reads besides the filesystem: the lists' bytes (with
/// the files they include) and, for a user process, the home directory.
/// Two resolutions of equal inputs find the same keys if nothing they
/// looked at changed ([`reuse`]).
#[derive(PartialEq, Eq)]
pub(crate) struct Inputs {
    /// The base list and its includes; None when there is none.
    pub(crate) base: Option<Expanded>,
    /// The user's home directory (a user process's only).
    pub(crate) home: Vec<u8>,
    /// The home list and its includes; None when there is none (or for the
    /// base process).
    pub(crate) own: Option<Expanded>,
    /// The shipped defaults ([`DEFAULTS_LIST`]) and their includes, less
    /// what the user's list turns off (`defaults off [GROUP...]`); None
    /// when there are none, all are off, or for the base process.
    pub(crate) defaults: Option<Expanded>,
    /// The groups the user's `defaults off` lines name that the defaults
    /// do not have (each line naming one gets a warning).
    pub(crate) unknown_off: Vec<Vec<u8>>,
}

impl Inputs {
    /// Reads the base list from the daemon's descriptor and, for `user`, the
    /// home list, each with the files it includes. Errors are fatal to the
    /// launch: a list that cannot be read is not skipped, nor is a file the
    /// base list includes that may not be read (not root's alone, a
    /// symbolic link on its way, unreadable by the user process, whose `~/`
    /// lines are its to resolve): the administrator's lines are never
    /// dropped quietly.
    pub(crate) fn read(
        user: Option<&User>,
        base: Option<&fs::File>,
    ) -> Result<Inputs, ResolveError> {
        let id = base.and_then(|f| f.metadata().ok()).map(|m| {
            use std::os::unix::fs::MetadataExt;
            (m.dev(), m.ino())
        });
        let base = read_base(base)?.map(|bytes| {
            let path = base_list_name();
            expand(path.as_os_str().as_bytes(), bytes, id, None, &mut |p| {
                read_include(Path::new(OsStr::from_bytes(p)), Trust::Root)
            })
        });
        if let Some((at, why)) = base.as_ref().and_then(|b| b.first_refused(|_| true)) {
            return Err(ResolveError::BaseInclude { at, why });
        }
        let Some(user) = user else {
            return Ok(Inputs {
                base,
                home: Vec::new(),
                own: None,
                defaults: None,
                unknown_off: Vec::new(),
            });
        };
        let home = user.dir.as_os_str().as_bytes().to_vec();
        let list_path = home_list(&home);
        let opened = open_list(&list_path)
            .and_then(|f| {
                f.map(|f| {
                    use std::os::unix::fs::MetadataExt;
                    let md = f.metadata()?;
                    read_all(&f).map(|b| (b, (md.dev(), md.ino())))
                })
                .transpose()
            })
            .map_err(|e| ResolveError::OwnList {
                path: list_path.display().to_string(),
                why: e.to_string(),
            })?;
        let uid = user.uid.as_raw();
        let own = opened.map(|(bytes, id)| {
            expand(
                list_path.as_os_str().as_bytes(),
                bytes,
                Some(id),
                Some(&home),
                &mut |p| read_include(Path::new(OsStr::from_bytes(p)), Trust::User(uid)),
            )
        });
        // An include that names something other than a missing file or
        // one that may be read refuses the launch: it could not be guarded.
        if let Some((at, why)) = own.as_ref().and_then(|o| o.first_refused(|_| true)) {
            return Err(ResolveError::OwnInclude { at, why });
        }
        let off = own.as_ref().and_then(Expanded::defaults_off);
        let defaults = read_defaults(Path::new(DEFAULTS_LIST), off.as_deref())
            .map_err(|(at, why)| ResolveError::BaseInclude { at, why })?;
        Ok(Inputs {
            base,
            home,
            own,
            defaults: defaults.list,
            unknown_off: defaults.unknown_off,
        })
    }
}

/// A resolver's last answer, as sent (u64 length, records), with its inputs
/// when it may be sent again: every directory it read was watched and none
/// changed while it was read.
pub(crate) struct Answer {
    pub(crate) inputs: Option<Inputs>,
    pub(crate) records: Vec<u8>,
}

/// The home list of a user whose home is `home`.
pub(crate) fn home_list(home: &[u8]) -> PathBuf {
    PathBuf::from(OsStr::from_bytes(&denylist::join_home(
        home,
        HOME_LIST.as_bytes(),
    )))
}

/// The base list's name in messages. The daemon opened the list and sent its
/// descriptor; the installed daemon always opens this one.
pub(crate) fn base_list_name() -> PathBuf {
    crate::os::paths::Paths::system().base_list
}

/// Resolves the base list's absolute entries, and those of the files it
/// includes (as root, following a symlink in the last component), with
/// their warnings for the log.
pub(crate) fn resolve_base(
    base: Option<&Expanded>,
    keys: &mut Option<Keys>,
    sink: &mut Sink<'_>,
) -> Result<(), ResolveError> {
    let Some(base) = base else {
        sink.record(
            b'A',
            &format!(
                "{}: missing; only users' lists apply",
                base_list_name().display()
            ),
        );
        return Ok(());
    };
    record_include_warnings(base, b'A', sink);
    for (i, file) in base.files.iter().enumerate() {
        let parsed = denylist::parse(&file.bytes);
        for w in &parsed.warnings {
            sink.record(
                b'A',
                &format!("{}:{}: {}", base.describe(i), w.line, w.kind),
            );
        }
        let at = ListAt::of(file);
        for e in parsed.entries.iter().filter(|e| e.anchor != Anchor::Home) {
            if e.repo_guard {
                emit_repo_guard(sink, Source::Base, &at, e.line);
                continue;
            }
            if e.pattern.is_some() {
                emit_pattern(sink, Source::Base, &at, e, e.path, keys)?;
                continue;
            }
            emit_base(sink, &at, e.line, e.path, Shape::of(e), keys)?;
        }
    }
    Ok(())
}

/// Resolves a base-list entry: the administrator's, so a symlink in its last
/// component is followed.
pub(crate) fn emit_base(
    sink: &mut Sink<'_>,
    at: &ListAt<'_>,
    line: usize,
    path: &[u8],
    shape: Shape,
    keys: &mut Option<Keys>,
) -> Result<(), ResolveError> {
    let path = Path::new(OsStr::from_bytes(path));
    emit(
        sink,
        Source::Base,
        at,
        line,
        path,
        shape,
        LastComponent::Follow,
        context(keys)?,
    )
}

/// The repository guard's line (`readonly **/.git/`, line `line` of
/// `list`): its entry and the sandbox's [`REPO_GUARD_KEY`]. Nothing to
/// resolve: the hooks judge every repository by its names
/// (src/bpf/repo.bpf.h).
pub(crate) fn emit_repo_guard(sink: &mut Sink<'_>, source: Source, list: &ListAt<'_>, line: usize) {
    sink.entry(&ListEntry {
        pattern: true,
        origin: source.origin(),
        line: u32::try_from(line).unwrap_or(u32::MAX),
        dir: true,
        exception: false,
        audit: false,
        readonly: true,
        path: b"**/.git".to_vec(),
        file: list.entry_file(),
    });
    sink.file(REPO_GUARD_KEY);
}

/// Resolves a name-pattern line `e` (its pattern parsed; `path` the
/// line's path with `~/` joined, or for `**/NAME` the name): its entry, its
/// shape key ([`KIND_PAT_SHAPE`]) and its pattern key, in every directory
/// (the all-zero scope) or in the directory `DIR/NAME` names (whose way is
/// marked like a listed file's directory's). A missing or unusable
/// directory skips the line with a warning (none for the catalogue's).
pub(crate) fn emit_pattern(
    sink: &mut Sink<'_>,
    source: Source,
    list: &ListAt<'_>,
    e: &denylist::Entry<'_>,
    path: &[u8],
    keys: &mut Option<Keys>,
) -> Result<(), ResolveError> {
    let Some(pattern) = &e.pattern else {
        return Ok(());
    };
    let (tag, origin, kind) = match (source, e.exception, e.deep) {
        (Source::Base, false, false) => (b'A', ListOrigin::Base, KIND_PAT_BASE),
        (Source::Base, true, false) => (b'A', ListOrigin::Base, KIND_PAT_EXC_BASE),
        (Source::Home, false, false) => (b'U', ListOrigin::User, KIND_PAT_USER),
        (Source::Home, true, false) => (b'U', ListOrigin::User, KIND_PAT_EXC_USER),
        (Source::Base, false, true) => (b'A', ListOrigin::Base, KIND_PAT_DEEP_BASE),
        (Source::Base, true, true) => (b'A', ListOrigin::Base, KIND_PAT_DEEP_EXC_BASE),
        (Source::Home, false, true) => (b'U', ListOrigin::User, KIND_PAT_DEEP_USER),
        (Source::Home, true, true) => (b'U', ListOrigin::User, KIND_PAT_DEEP_EXC_USER),
    };
    let shown = if e.anchor == Anchor::Anywhere {
        [&b"**/"[..], path].concat()
    } else {
        path.to_vec()
    };
    let scope = if e.anchor == Anchor::Anywhere {
        FileKey {
            dev: 0,
            ino: 0,
            subvol: 0,
            kind: KIND_OPEN,
        }
    } else {
        let dir = crate::lists::pattern::scope_dir(path);
        let Keys { ctx, reuse } = context(keys)?;
        match ctx.pattern_scope(dir, reuse.witness()) {
            Ok(k) => k,
            Err(KeyError::Missing) if list.catalogue() => return Ok(()),
            Err(err) => {
                let at = match source {
                    Source::Home => format!("{}:{}", list.path.display(), e.line),
                    Source::Base => format!(
                        "{}:{}: {}",
                        list.path.display(),
                        e.line,
                        String::from_utf8_lossy(&shown)
                    ),
                };
                let why = match err {
                    KeyError::Missing => "its directory does not exist, so a file made there \
                         is covered only from the next launch on"
                        .to_string(),
                    other => format!("its directory {other}"),
                };
                sink.record(tag, &format!("{at}: {why}; skipped"));
                return Ok(());
            }
        }
    };
    sink.entry(&ListEntry {
        origin,
        line: u32::try_from(e.line).unwrap_or(u32::MAX),
        dir: false,
        exception: e.exception,
        audit: false,
        readonly: false,
        pattern: true,
        path: shown,
        file: list.entry_file(),
    });
    let zero = FileKey {
        dev: 0,
        ino: 0,
        subvol: 0,
        kind: KIND_PAT_SHAPE,
    };
    // The bit of the patterns' first test it needs (exceptions too: a name
    // an exception matches must reach the lookups).
    ListingSink::name(
        sink,
        zero.with_kind(KIND_PAT_PREFILTER),
        &pattern.prefilter(),
    );
    if e.deep {
        ListingSink::name(sink, zero, &pattern.deep_shape_text());
        ListingSink::name(sink, scope.with_kind(kind), &pattern.deep_key_name());
        // The scope's edge, for the rename check (no directory moved across it).
        ListingSink::file(sink, scope.with_kind(KIND_DEEP_SCOPE));
    } else {
        ListingSink::name(sink, zero, &pattern.shape_text());
        ListingSink::name(sink, scope.with_kind(kind), &pattern.key_name());
    }
    Ok(())
}

/// The list file a line is in: the list itself or a file it includes.
pub(crate) struct ListAt<'a> {
    /// Its path.
    pub(crate) path: &'a Path,
    /// An included file (its path goes into the entry: [`ListEntry::file`]).
    pub(crate) included: bool,
}

impl ListAt<'_> {
    /// [`ListEntry::file`] of a line of this file: its path if included,
    /// else empty.
    fn entry_file(&self) -> Vec<u8> {
        if self.included {
            self.path.as_os_str().as_bytes().to_vec()
        } else {
            Vec::new()
        }
    }

    pub(crate) fn of(file: &ListFile) -> ListAt<'_> {
        ListAt {
            path: Path::new(OsStr::from_bytes(&file.path)),
            included: file.from.is_some(),
        }
    }

    /// A file of the shipped catalogue ([`CATALOG_DIR`]): its lines name
    /// where tools keep secrets, on machines that may not have the tool, so
    /// a line whose directory does not exist is no mistake and is not
    /// warned about at every launch (`--check` still shows it).
    fn catalogue(&self) -> bool {
        self.included && self.path.parent() == Some(Path::new(CATALOG_DIR))
    }
}

/// What a list line asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Shape {
    /// `PATH`: one file.
    File,
    /// `DIR/`: every file below a directory.
    Dir,
    /// `!PATH`: an exception for one file.
    Exception,
    /// `!DIR/`: an exception for every file below a directory.
    DirException,
    /// `audit PATH`: one file, reported and not enforced.
    AuditFile,
    /// `audit DIR/`: every file below a directory, reported and not enforced.
    AuditDir,
    /// `readonly PATH`: one file, readable and not changed.
    ReadonlyFile,
    /// `readonly DIR/`: everything below a directory, readable and not changed.
    ReadonlyDir,
}

impl Shape {
    pub(crate) fn of(e: &denylist::Entry<'_>) -> Shape {
        match (e.dir, e.exception, e.audit, e.readonly) {
            (false, true, _, _) => Shape::Exception,
            (true, true, _, _) => Shape::DirException,
            (false, false, _, true) => Shape::ReadonlyFile,
            (true, false, _, true) => Shape::ReadonlyDir,
            (false, false, true, false) => Shape::AuditFile,
            (true, false, true, false) => Shape::AuditDir,
            (false, false, false, false) => Shape::File,
            (true, false, false, false) => Shape::Dir,
        }
    }

    fn dir(self) -> bool {
        matches!(
            self,
            Shape::Dir | Shape::DirException | Shape::AuditDir | Shape::ReadonlyDir
        )
    }

    /// The kind a [`KIND_OPEN`] key of this shape's findings gets.
    fn open_as(self) -> u32 {
        match self {
            Shape::AuditFile | Shape::AuditDir => KIND_AUDIT,
            Shape::ReadonlyFile | Shape::ReadonlyDir => KIND_RO,
            _ => KIND_OPEN,
        }
    }
}

/// The base list's bytes; None when there is none.
pub(crate) fn read_base(base: Option<&fs::File>) -> Result<Option<Vec<u8>>, ResolveError> {
    base.map(|f| read_all(f).map_err(|e| ResolveError::BaseListRead(e.to_string())))
        .transpose()
}

/// A resolver's key context and the watches on what it read ([`reuse`]),
/// made together and kept across requests.
pub(crate) struct Keys {
    pub(crate) ctx: KeyContext,
    pub(crate) reuse: Reuse,
}

/// The key context and its watches, made on first use (reading the mount
/// table is the largest fixed cost of a resolution, and a list may have no
/// entry of a kind).
pub(crate) fn context(keys: &mut Option<Keys>) -> Result<&mut Keys, ResolveError> {
    if keys.is_none() {
        let ctx = KeyContext::new().map_err(|e| ResolveError::MountTable(e.to_string()))?;
        *keys = Some(Keys {
            ctx,
            reuse: Reuse::new(),
        });
    }
    Ok(keys.as_mut().expect("just set"))
}

/// Resolves, as `user` (this process already is), the base list's `~/`
/// entries and the home list, with the warnings about the home list for the
/// user.
pub(crate) fn resolve_user(
    user: &User,
    inputs: &Inputs,
    keys: &mut Option<Keys>,
    sink: &mut Sink<'_>,
) -> Result<(), ResolveError> {
    let home = user.dir.as_os_str().as_bytes();
    let mut joined = Vec::new();
    // The base list's `~/` entries are the administrator's: resolved as the
    // user (root may not reach a home), but following a symlink in the last
    // component, so that an agent replacing the file by a symlink to a renamed
    // copy does not take it off the list. Its warnings are the base-list
    // process's to report.
    if let Some(base) = &inputs.base {
        for file in &base.files {
            let at = ListAt::of(file);
            for e in denylist::parse(&file.bytes)
                .entries
                .iter()
                .filter(|e| e.anchor == Anchor::Home)
            {
                denylist::join_home_into(&mut joined, home, e.path);
                if e.pattern.is_some() {
                    emit_pattern(sink, Source::Base, &at, e, &joined, keys)?;
                    continue;
                }
                emit_base(sink, &at, e.line, &joined, Shape::of(e), keys)?;
            }
        }
    }
    protect_own_lists(home, keys, sink)?;
    if let Some(defaults) = &inputs.defaults {
        resolve_defaults(defaults, home, keys, sink)?;
    }
    let Some(own) = &inputs.own else {
        return Ok(());
    };
    record_include_warnings(own, b'U', sink);
    protect_included(&own.named, keys, sink)?;
    for (i, file) in own.files.iter().enumerate() {
        let at = ListAt::of(file);
        let parsed = denylist::parse(&file.bytes);
        for w in &parsed.warnings {
            sink.record(b'U', &format!("{}:{}: {}", own.describe(i), w.line, w.kind));
        }
        for off in &parsed.defaults_off {
            for g in off
                .groups
                .iter()
                .filter(|g| inputs.unknown_off.iter().any(|u| u == *g))
            {
                sink.record(
                    b'U',
                    &format!(
                        "{}:{}: {}",
                        own.describe(i),
                        off.line,
                        unknown_group_warning(g, inputs.defaults.as_ref())
                    ),
                );
            }
        }
        for e in &parsed.entries {
            let path = match e.anchor {
                Anchor::Root | Anchor::Anywhere => e.path,
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
                        own.describe(i),
                        e.line,
                        denylist::LineProblem::TooBroad("the whole home directory")
                    ),
                );
                continue;
            }
            emit_user_line(sink, &at, e, path, keys)?;
        }
    }
    Ok(())
}

/// Resolves line `e` of the user's list (or of a file it includes, or of
/// the defaults), its path `path` with `~/` joined: a name pattern, or any
/// other entry (the last component not followed).
fn emit_user_line(
    sink: &mut Sink<'_>,
    at: &ListAt<'_>,
    e: &denylist::Entry<'_>,
    path: &[u8],
    keys: &mut Option<Keys>,
) -> Result<(), ResolveError> {
    if e.repo_guard {
        emit_repo_guard(sink, Source::Home, at, e.line);
        return Ok(());
    }
    if e.pattern.is_some() {
        return emit_pattern(sink, Source::Home, at, e, path, keys);
    }
    emit(
        sink,
        Source::Home,
        at,
        e.line,
        Path::new(OsStr::from_bytes(path)),
        Shape::of(e),
        LastComponent::NoFollow,
        context(keys)?,
    )
}

/// The include warnings of `e` under `tag`: b'A' for root's files (the
/// base list, the defaults), for the administrator's log, each naming its
/// file, line and the path; b'U' for the user's list, by file and line
/// (the path is the user's own line).
fn record_include_warnings(e: &Expanded, tag: u8, sink: &mut Sink<'_>) {
    for w in &e.warnings {
        let path = if tag == b'A' {
            format!(" {}", String::from_utf8_lossy(&w.path))
        } else {
            String::new()
        };
        sink.record(
            tag,
            &format!(
                "{}:{}: include{path}: {}",
                e.describe(w.file),
                w.line,
                w.problem
            ),
        );
    }
}

/// Resolves the shipped defaults as lines of the user's list (the user's
/// exceptions apply to them, a base-list entry stays the administrator's),
/// each named by its file (a denial shows the catalogue file and line).
/// Their warnings are the administrator's.
fn resolve_defaults(
    defaults: &Expanded,
    home: &[u8],
    keys: &mut Option<Keys>,
    sink: &mut Sink<'_>,
) -> Result<(), ResolveError> {
    let mut joined = Vec::new();
    record_include_warnings(defaults, b'A', sink);
    for (i, file) in defaults.files.iter().enumerate() {
        let at = ListAt {
            path: Path::new(OsStr::from_bytes(&file.path)),
            included: true,
        };
        let parsed = denylist::parse(&file.bytes);
        for w in &parsed.warnings {
            sink.record(
                b'A',
                &format!("{}:{}: {}", defaults.describe(i), w.line, w.kind),
            );
        }
        for e in &parsed.entries {
            let path = match e.anchor {
                Anchor::Root | Anchor::Anywhere => e.path,
                Anchor::Home => {
                    denylist::join_home_into(&mut joined, home, e.path);
                    &joined
                }
            };
            emit_user_line(sink, &at, e, path, keys)?;
        }
    }
    Ok(())
}

/// The files the user's list includes (`named`: every path an include line
/// names, read or missing), as read-only entries of the base list (line 0,
/// as [`protect_own_lists`]): a sandboxed agent cannot change, replace or
/// plant a file whose lines the user's next launch from outside would apply.
/// A missing one is guarded at its first missing part
/// ([`emit`]'s rule for a read-only line).
///
/// # Errors
/// [`ResolveError::OwnInclude`] when a path cannot be protected so (a
/// filesystem whose names are not watched, a guard that cannot be placed):
/// the launch is refused rather than leave it open to the agent.
pub(crate) fn protect_included(
    named: &[Vec<u8>],
    keys: &mut Option<Keys>,
    sink: &mut Sink<'_>,
) -> Result<(), ResolveError> {
    let list = base_list_name();
    let at = ListAt {
        path: &list,
        included: false,
    };
    for path in named {
        let mark = sink.out.len();
        emit_base(sink, &at, 0, path, Shape::ReadonlyFile, keys)?;
        let found = crate::proto::resolver::parse_output(&[&sink.out[mark..]]);
        // A guard at a missing directory warns and protects; a line that
        // was skipped protects nothing.
        let skipped = found
            .admin_warnings
            .iter()
            .find(|w| w.ends_with("; skipped"));
        if found.deny.is_empty() || skipped.is_some() {
            sink.out.truncate(mark);
            return Err(ResolveError::OwnInclude {
                at: format!("include {}", String::from_utf8_lossy(path)),
                why: format!(
                    "it cannot be made read-only for your sandboxes ({}), so an agent could \
                     change what your next launch applies",
                    skipped.map_or("nothing there could be guarded", String::as_str)
                ),
            });
        }
    }
    Ok(())
}

/// The user's own lists' directory (`~/.config/agent-sandbox-exec/`), as a
/// fixed read-only directory entry of the base list (line 0), in every
/// sandbox of the user: a sandboxed agent cannot add a line (a `socket`
/// line, an exception) that the user's next launch from outside would
/// apply, nor replace, move or remove the list, nor plant one where there
/// is none (the directory is watched by name when missing). The user's
/// exceptions do not re-allow it (they are the user list's). Nothing is
/// said when it cannot be resolved: without a `~/.config` there is no
/// place to watch (docs/BYPASS_CATALOG.md).
pub(crate) fn protect_own_lists(
    home: &[u8],
    keys: &mut Option<Keys>,
    sink: &mut Sink<'_>,
) -> Result<(), ResolveError> {
    let list = home_list(home);
    let Some(dir) = list.parent() else {
        return Ok(());
    };
    let mark = sink.out.len();
    sink.entry(&ListEntry {
        pattern: false,
        origin: ListOrigin::Base,
        line: 0,
        dir: true,
        exception: false,
        audit: false,
        readonly: true,
        path: dir.as_os_str().as_bytes().to_vec(),
        file: Vec::new(),
    });
    // Two levels of walk cover it while no directory is below it.
    let nested = fs::read_dir(dir).is_ok_and(|entries| {
        entries
            .flatten()
            .any(|e| e.file_type().is_ok_and(|t| t.is_dir()))
    });
    let kind = if nested {
        KIND_RO_DIR_BASE
    } else {
        KIND_RO_DIR_OWN
    };
    let Keys { ctx, reuse } = context(keys)?;
    let found = ctx.resolve_dir(
        dir,
        kind,
        Some(MAX_SCAN_KEYS),
        &mut RewriteSink::new(sink, KIND_RO),
        reuse.witness(),
    );
    if found.is_err() {
        sink.out.truncate(mark);
    }
    // The list file itself, following a symlink (a dotfiles manager's link
    // into another directory): the file it points to is read-only too,
    // by its inode and its name, wherever it is.
    let mark = sink.out.len();
    let Keys { ctx, reuse } = context(keys)?;
    if ctx
        .resolve(
            &list,
            LastComponent::Follow,
            &mut RewriteSink::new(sink, KIND_RO),
            reuse.witness(),
        )
        .is_err()
    {
        sink.out.truncate(mark);
    }
    Ok(())
}

/// Resolves one entry into `sink`: its records, or a warning and none of
/// them (a record written before a problem showed is taken back).
#[allow(clippy::too_many_arguments)]
pub(crate) fn emit(
    sink: &mut Sink<'_>,
    source: Source,
    list: &ListAt<'_>,
    line: usize,
    path: &Path,
    shape: Shape,
    last: LastComponent,
    keys: &mut Keys,
) -> Result<(), ResolveError> {
    let tag = if source == Source::Home { b'U' } else { b'A' };
    // The user's list names paths by line number only: it is read outside
    // the sandbox, and were it a link to a listed file, an echoed line would
    // be that file's bytes. The base list is the administrator's.
    // Formatted only for a message: most entries have none.
    let at = || match source {
        Source::Home => format!("{}:{line}", list.path.display()),
        Source::Base => format!("{}:{line}: {}", list.path.display(), path.display()),
    };
    let mark = sink.out.len();
    let entry = ListEntry {
        pattern: false,
        origin: source.origin(),
        line: u32::try_from(line).unwrap_or(u32::MAX),
        dir: shape.dir(),
        exception: matches!(shape, Shape::Exception | Shape::DirException),
        audit: matches!(shape, Shape::AuditFile | Shape::AuditDir),
        readonly: matches!(shape, Shape::ReadonlyFile | Shape::ReadonlyDir),
        path: path.as_os_str().as_bytes().to_vec(),
        file: list.entry_file(),
    };
    sink.entry(&entry);
    let (dir_kind, exc_kind) = match source {
        Source::Base => (KIND_DIR_BASE, KIND_EXC_BASE),
        Source::Home => (KIND_DIR_USER, KIND_EXC_USER),
    };
    let readonly = matches!(shape, Shape::ReadonlyFile | Shape::ReadonlyDir);
    // A read-only name that is a symlink (a dotfiles manager's `~/.bashrc`)
    // protects the link and the file it points to: writes through the link
    // change that file.
    let last = if readonly {
        LastComponent::Follow
    } else {
        last
    };
    let Keys { ctx, reuse } = keys;
    let reuse = reuse.witness();
    let found = match shape {
        Shape::File => ctx.resolve(path, last, sink, reuse),
        Shape::Exception => ctx.resolve(
            path,
            last,
            &mut KindSink {
                inner: sink,
                kind: exc_kind,
            },
            reuse,
        ),
        Shape::AuditFile | Shape::ReadonlyFile => ctx.resolve(
            path,
            last,
            &mut RewriteSink::new(sink, shape.open_as()),
            reuse,
        ),
        Shape::Dir | Shape::DirException | Shape::AuditDir | Shape::ReadonlyDir => {
            let (kind, budget) = match shape {
                Shape::Dir => (dir_kind, Some(MAX_SCAN_KEYS)),
                Shape::AuditDir => (audit_dir_kind(dir_kind), Some(MAX_SCAN_KEYS)),
                Shape::ReadonlyDir => (ro_dir_kind(dir_kind), Some(MAX_SCAN_KEYS)),
                _ => (exc_kind, None),
            };
            match ctx.resolve_dir(
                path,
                kind,
                budget,
                &mut RewriteSink::new(sink, shape.open_as()),
                reuse,
            ) {
                Ok(scan) => {
                    let unmarked = (scan.unmarked > 0).then(|| {
                        format!(
                            "{} files below it with other names were not marked by inode (past {} \
                             per launch, or past {} names): they are denied by path; a name made \
                             for one outside the directory before launch is not",
                            scan.unmarked,
                            MAX_SCAN_KEYS,
                            crate::resolve::keys::MAX_SCAN_ENTRIES
                        )
                    });
                    // The daemon removes no key after an incomplete scan
                    // (policy::keys_mode): a file an earlier scan marked may
                    // be below what this one could not read.
                    let incomplete = scan.incomplete.map(|why| {
                        sink.record(b'I', &format!("{}: {why}", at()));
                        format!(
                            "not everything below it could be read ({why}), so a file there with \
                             another name may be missed: this launch removes nothing from your \
                             sandbox (what earlier launches denied stays denied)"
                        )
                    });
                    let unwatched = scan.unwatched.map(|why| {
                        format!(
                            "what is below it cannot all be watched ({why}), so every launch \
                             reads the whole tree again instead of reusing the last answer"
                        )
                    });
                    let all: Vec<String> = [unmarked, incomplete, unwatched]
                        .into_iter()
                        .flatten()
                        .collect();
                    Ok((!all.is_empty()).then(|| all.join("; ")))
                }
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
    // A read-only path that does not exist all the way (its directories,
    // or the target of a symlink in it) is guarded where it stops.
    let dangling = readonly
        && found.is_ok()
        && fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink())
        && fs::metadata(path).is_err_and(|e| e.kind() == io::ErrorKind::NotFound);
    if readonly && (dangling || matches!(found, Err(KeyError::Missing))) {
        // The line again (taken back above when the resolution failed), for
        // the guard's refusals.
        let mark = sink.out.len();
        if found.is_err() {
            sink.entry(&entry);
        }
        let guarded = guard_missing(path, shape, ro_dir_kind(dir_kind), keys, sink);
        if guarded.is_none() {
            sink.out.truncate(mark);
        }
        // The user's list is named by line only (above).
        let first = |top: &Path| match source {
            Source::Home => "its first missing part".to_string(),
            Source::Base => top.display().to_string(),
        };
        match (guarded, dangling) {
            // A catalogue line names where a tool keeps its files, on
            // machines that may not have the tool: its missing directory is
            // guarded without a warning at every launch (`--check` shows it).
            (Some(_), false) if list.catalogue() => return Ok(()),
            (Some(top), _) => {
                let what = if dangling {
                    "it is a symbolic link to a path that does not exist"
                } else {
                    "its directory does not exist"
                };
                sink.record(
                    tag,
                    &format!(
                        "{}: {what}; nothing can be made at {} from inside a sandbox until it \
                         is made outside",
                        at(),
                        first(&top)
                    ),
                );
                return Ok(());
            }
            (None, true) => {
                sink.record(
                    tag,
                    &format!(
                        "{}: it is a symbolic link to a path that does not exist and cannot be \
                         watched there: a file made at its target from inside a sandbox is not \
                         refused",
                        at()
                    ),
                );
                return Ok(());
            }
            (None, false) => {}
        }
    }
    let problem = match found {
        Ok(unwatched) => {
            if let Some(why) = unwatched {
                sink.record(tag, &format!("{}: {why}", at()));
            }
            return Ok(());
        }
        Err(KeyError::Missing) if list.catalogue() => return Ok(()),
        Err(KeyError::Missing) => "its directory does not exist, so a file created there \
             is denied only from the next launch on"
            .to_string(),
        Err(KeyError::NotRegular(crate::resolve::keys::FileKind::Symlink)) => {
            "the last component is a symbolic link; list the file it points to instead".to_string()
        }
        Err(KeyError::Stat(e)) => {
            // Not "missing", not "not a file": the path exists but cannot be
            // checked (EACCES on a directory, ELOOP, EIO, ...). Skipping it would
            // let anyone who can chmod a directory take a file off the list.
            return Err(ResolveError::Unchecked {
                at: at(),
                why: e.to_string(),
            });
        }
        Err(KeyError::NotRegular(crate::resolve::keys::FileKind::Directory)) => {
            "the path is a directory, not a regular file; add a trailing / to deny the whole \
             directory"
                .to_string()
        }
        Err(e) => format!("the path {e}"),
    };
    sink.record(tag, &format!("{}: {problem}; skipped", at()));
    Ok(())
}

/// The first part of `path` that does not exist, found as the kernel's
/// lookup would go: a symlink on the way is followed through its target
/// (a relative one from the link's directory, `..` taken from the real
/// directory reached so far), at most [`MAX_SYMLINKS`] of them. Returns that
/// path and whether it is the last name (the file itself) rather than a
/// directory on the way; None when all of it exists, a part is not a
/// directory where one is needed, or a part cannot be examined.
fn first_missing(path: &Path) -> Option<(PathBuf, bool)> {
    let mut todo = path.to_path_buf();
    for _ in 0..=MAX_SYMLINKS {
        let parts: Vec<Component<'_>> = todo.components().collect();
        let mut at = PathBuf::from("/");
        let mut next = None;
        for (i, part) in parts.iter().enumerate() {
            let name = match part {
                Component::Normal(n) => n,
                Component::ParentDir => {
                    at.pop();
                    continue;
                }
                _ => continue,
            };
            let here = at.join(name);
            let last = i + 1 == parts.len();
            match fs::symlink_metadata(&here) {
                Err(e) if e.kind() == io::ErrorKind::NotFound => return Some((here, last)),
                Err(_) => return None,
                Ok(m) if m.file_type().is_symlink() => {
                    let target = fs::read_link(&here).ok()?;
                    let mut t = at.join(target);
                    for rest in &parts[i + 1..] {
                        t.push(rest.as_os_str());
                    }
                    next = Some(t);
                    break;
                }
                Ok(m) if !last && !m.is_dir() => return None,
                Ok(_) => at = here,
            }
        }
        todo = next?;
    }
    None
}

/// For a read-only entry of `shape` that does not exist all the way (its
/// directories, or a symlink's target): its first missing part
/// ([`first_missing`]), watched by name in the directory above it. A missing
/// file gets the read-only file kind (as a missing listed name does); a
/// missing directory the read-only directory kind `ro_dir` (the same list's),
/// so nothing below it can be made either, at any depth (the sandbox's
/// write hooks then walk to the root). Without it, an agent would make the
/// directories and plant the file (a read-only file is code that runs later,
/// outside). A part made there outside later stays guarded until the next
/// launch resolves the line again. Returns the guarded path, or None when
/// nothing is missing, or the name cannot be watched or resolved (the
/// caller warns).
fn guard_missing(
    path: &Path,
    shape: Shape,
    ro_dir: u32,
    keys: &mut Keys,
    sink: &mut Sink<'_>,
) -> Option<PathBuf> {
    let (top, last) = first_missing(path)?;
    let mark = sink.out.len();
    let Keys { ctx, reuse } = keys;
    let found = if last && shape == Shape::ReadonlyFile {
        ctx.resolve(
            &top,
            LastComponent::NoFollow,
            &mut RewriteSink::new(sink, KIND_RO),
            reuse.witness(),
        )
    } else {
        ctx.resolve(
            &top,
            LastComponent::NoFollow,
            &mut KindSink {
                inner: sink,
                kind: ro_dir,
            },
            reuse.witness(),
        )
    };
    match found {
        // Watched by name (an unwatchable directory says why: not guarded).
        Ok(None) => Some(top),
        _ => {
            sink.out.truncate(mark);
            None
        }
    }
}

/// Marks the roots of the filesystems mounted below this resolution's
/// directory entries ([`KeyContext::mark_mounts_below`]) into `sink`, with a
/// warning naming each mount point that could not be examined (for the user
/// for the user's list, for the log for the base list). A mount table that
/// cannot be read is a warning too: the entries themselves still apply.
pub(crate) fn mark_mounts(keys: &mut Keys, sink: &mut Sink<'_>) {
    let problems = match keys.ctx.mark_mounts_below(sink, keys.reuse.witness()) {
        Ok(p) => p,
        Err(e) => {
            sink.record(
                b'A',
                &format!(
                    "cannot read /proc/self/mountinfo to mark the filesystems mounted below \
                     directory entries: {e}; their files are denied only through the mounts \
                     below the entries, not through another mount of them"
                ),
            );
            return;
        }
    };
    for (kind, point, why) in problems {
        let tag = if kind == KIND_DIR_USER { b'U' } else { b'A' };
        sink.record(
            tag,
            &format!(
                "{}: a filesystem mounted here, below a directory entry, {why}; its files are \
                 denied through this path, but not through another mount of it (such as a bind \
                 mount made in a user namespace)",
                Path::new(OsStr::from_bytes(&point)).display()
            ),
        );
    }
}

/// Becomes `user` for good: supplementary groups, then gid, then uid (real,
/// effective and saved), and checks root cannot be regained. The process is
/// then not dumpable (the kernel makes it so on the uid change unless
/// `fs.suid_dumpable` is 1; set here whatever it is): the user it now runs as
/// cannot ptrace it or open its /proc files.
pub(crate) fn drop_privileges(user: &User) -> Result<(), ResolveError> {
    let fail = |why: String| ResolveError::Privileges {
        user: user.name.clone(),
        why,
    };
    let name = std::ffi::CString::new(user.name.as_bytes())
        .map_err(|_| fail("the user name has a NUL byte".into()))?;
    let groups = nix::unistd::getgrouplist(&name, user.gid)
        .map_err(|e| fail(format!("cannot list its groups: {e}")))?;
    nix::unistd::setgroups(&groups).map_err(|e| fail(format!("setgroups: {e}")))?;
    nix::unistd::setresgid(user.gid, user.gid, user.gid)
        .map_err(|e| fail(format!("setresgid: {e}")))?;
    nix::unistd::setresuid(user.uid, user.uid, user.uid)
        .map_err(|e| fail(format!("setresuid: {e}")))?;
    if !user.uid.is_root() && nix::unistd::setuid(Uid::from_raw(0)).is_ok() {
        return Err(fail("root could be regained afterwards".into()));
    }
    prctl::set_dumpable(false)
        .map_err(|e| fail(format!("PR_SET_DUMPABLE: {}", io::Error::from(e))))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lists::entries::HAS_RO_DIRS_KEY;
    use crate::proto::resolver::{Resolution, parse_output};

    /// What the base-list process answers for the list `text`.
    fn resolve_base_text(text: &str) -> Resolution {
        let mut out = Vec::new();
        resolve_base(
            Some(&Expanded::single(b"/etc/list", text.as_bytes().to_vec())),
            &mut None,
            &mut Sink { out: &mut out },
        )
        .unwrap();
        parse_output(&[&out])
    }

    /// [`resolve_base_text`] with the marks on the way ([`KIND_PATH`]) the
    /// serving loop sends after the entries.
    fn resolve_base_with_marks(text: &str) -> Resolution {
        let mut out = Vec::new();
        let mut keys = None;
        resolve_base(
            Some(&Expanded::single(b"/etc/list", text.as_bytes().to_vec())),
            &mut keys,
            &mut Sink { out: &mut out },
        )
        .unwrap();
        let mut sink = Sink { out: &mut out };
        for m in keys.expect("resolved").ctx.take_marks() {
            sink.mark(m);
        }
        parse_output(&[&out])
    }

    #[test]
    fn name_patterns_become_a_shape_key_and_a_pattern_key_in_their_scope() {
        let dir = std::env::temp_dir().join(format!("asx-rpat-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let text = format!(
            "**/.env\n!**/.env.example\n{d}/id_*\n{d}/missing/*.pem\n{d}/**/terraform.tfstate*\n",
            d = dir.display()
        );
        let r = resolve_base_with_marks(&text);
        let ino = std::os::unix::fs::MetadataExt::ino(&fs::metadata(&dir).unwrap());
        let names = r.deny.names();
        let env = crate::lists::pattern::NamePattern::parse(b".env").unwrap();
        let has = |kind, dir_ino, name: &[u8]| {
            names
                .iter()
                .any(|n| n.dir.kind == kind && n.dir.ino == dir_ino && n.name == name)
        };
        assert!(has(KIND_PAT_BASE, 0, &env.key_name()), "{r:?}");
        assert!(has(KIND_PAT_SHAPE, 0, b"xxxx"));
        // The bits of the patterns' first test, an exception's too.
        assert!(has(KIND_PAT_PREFILTER, 0, b"h.en"));
        assert!(has(KIND_PAT_PREFILTER, 0, b"hid_"));
        let example = crate::lists::pattern::NamePattern::parse(b".env.example").unwrap();
        assert!(has(KIND_PAT_EXC_BASE, 0, &example.key_name()));
        let id = crate::lists::pattern::NamePattern::parse(b"id_*").unwrap();
        assert!(
            has(KIND_PAT_BASE, ino, &id.key_name()),
            "scoped to its directory"
        );
        assert!(has(KIND_PAT_SHAPE, 0, b"xxx*"));
        // The scope cannot be moved from inside: it is on the way (KIND_PATH).
        assert!(
            r.deny
                .files()
                .iter()
                .any(|f| f.ino == ino && f.kind == crate::lists::entries::KIND_PATH)
        );
        assert!(
            r.deny
                .files()
                .contains(&crate::lists::entries::HAS_PATTERNS_KEY)
        );
        assert!(
            r.admin_warnings
                .iter()
                .any(|w| w.contains(":4: ") && w.contains("directory does not exist")),
            "{:?}",
            r.admin_warnings
        );
        let tf = crate::lists::pattern::NamePattern::parse(b"terraform.tfstate*").unwrap();
        assert!(
            has(KIND_PAT_DEEP_BASE, ino, &tf.deep_key_name()),
            "deep, scoped to DIR"
        );
        assert!(has(KIND_PAT_SHAPE, 0, &tf.deep_shape_text()));
        assert!(
            r.deny
                .files()
                .iter()
                .any(|f| f.ino == ino && f.kind == KIND_DEEP_SCOPE)
        );
        assert!(
            r.deny
                .files()
                .contains(&crate::lists::entries::HAS_DEEP_KEY)
        );
        assert_eq!(r.entries.iter().filter(|e| e.pattern).count(), 4);
        assert!(r.entries.iter().any(|e| e.path == b"**/.env" && e.pattern));
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
        let base = Expanded::single(b"/etc/list", base);
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
    fn readonly_entry_guards_missing_directories_and_follows_a_symlink() {
        let dir = std::env::temp_dir().join(format!("asx-ro-{}", std::process::id()));
        fs::create_dir_all(dir.join("dots")).unwrap();
        fs::write(dir.join("dots/rc"), b"x").unwrap();
        std::os::unix::fs::symlink(dir.join("dots/rc"), dir.join("rc")).unwrap();
        let list = format!(
            "readonly {d}/a/b/c.desktop\nreadonly {d}/units/\nreadonly {d}/rc\n",
            d = dir.display()
        );
        let r = resolve_base_text(&list);
        let ino = |p: &Path| std::os::unix::fs::MetadataExt::ino(&fs::metadata(p).unwrap());
        let top = ino(&dir);
        let guarded = |name: &[u8]| {
            r.deny
                .names()
                .iter()
                .any(|n| n.dir.ino == top && n.name == name && n.dir.kind == KIND_RO_DIR_BASE)
        };
        // The first missing directory, by name in the nearest one that
        // exists: nothing below can be made from inside.
        assert!(guarded(b"a"), "{r:?}");
        assert!(guarded(b"units"), "{r:?}");
        assert!(
            r.deny.files().contains(&HAS_RO_DIRS_KEY),
            "whole walks: {r:?}"
        );
        assert!(r.entries.iter().any(|e| e.line == 1 && e.readonly), "{r:?}");
        assert_eq!(r.admin_warnings.len(), 1, "{r:?}");
        assert!(r.admin_warnings[0].contains(&format!("made at {}/a from", dir.display())));
        // The symlink's name and the file it points to, by inode and name.
        let target = ino(&dir.join("dots/rc"));
        assert!(
            r.deny
                .files()
                .iter()
                .any(|f| f.ino == target && f.kind == KIND_RO),
            "{r:?}"
        );
        assert!(
            r.deny
                .names()
                .iter()
                .any(|n| n.dir.ino == top && n.name == b"rc" && n.dir.kind == KIND_RO)
        );
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn first_missing_follows_symlinks_as_the_lookup_would() {
        let dir = std::env::temp_dir().join(format!("asx-fm-{}", std::process::id()));
        fs::create_dir_all(dir.join("real/sub")).unwrap();
        std::os::unix::fs::symlink("real", dir.join("link")).unwrap();
        std::os::unix::fs::symlink("../gone/rc", dir.join("real/dangling")).unwrap();
        fs::write(dir.join("real/sub/f"), b"x").unwrap();
        assert_eq!(first_missing(&dir.join("link/sub/f")), None, "all there");
        assert_eq!(
            first_missing(&dir.join("link/sub/new")),
            Some((dir.join("real/sub/new"), true)),
            "through the symlinked directory"
        );
        assert_eq!(
            first_missing(&dir.join("link/a/b")),
            Some((dir.join("real/a"), false))
        );
        // A dangling link's relative target, `..` from the real directory.
        assert_eq!(
            first_missing(&dir.join("link/dangling")),
            Some((dir.join("gone"), false))
        );
        assert_eq!(
            first_missing(&dir.join("real/sub/f/x")),
            None,
            "a file on the way"
        );
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn readonly_dangling_symlink_guards_its_target() {
        let dir = std::env::temp_dir().join(format!("asx-rd-{}", std::process::id()));
        fs::create_dir_all(dir.join("dots")).unwrap();
        std::os::unix::fs::symlink(dir.join("dots/rc"), dir.join("rc")).unwrap();
        std::os::unix::fs::symlink(dir.join("later/rc"), dir.join("rc2")).unwrap();
        let list = format!("readonly {d}/rc\nreadonly {d}/rc2\n", d = dir.display());
        let r = resolve_base_text(&list);
        let ino = |p: &Path| std::os::unix::fs::MetadataExt::ino(&fs::metadata(p).unwrap());
        let has = |dir_ino: u64, name: &[u8], kind: u32| {
            r.deny
                .names()
                .iter()
                .any(|n| n.dir.ino == dir_ino && n.name == name && n.dir.kind == kind)
        };
        // The missing target file by name in its directory; a missing
        // directory as a read-only directory mark.
        assert!(has(ino(&dir.join("dots")), b"rc", KIND_RO), "{r:?}");
        assert!(has(ino(&dir), b"later", KIND_RO_DIR_BASE), "{r:?}");
        assert_eq!(r.admin_warnings.len(), 2, "{r:?}");
        assert!(r.admin_warnings.iter().all(|w| w.contains("symbolic link")));
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn an_included_file_s_lines_are_the_list_s_and_name_their_file() {
        let dir = std::env::temp_dir().join(format!("asx-ri-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        fs::write(dir.join("secret"), b"x").unwrap();
        let inc = format!("{}/secret\n", dir.display());
        let mut read = |p: &[u8]| {
            if p == b"/inc" {
                crate::lists::include::Read::Bytes(inc.clone().into_bytes(), (9, 9))
            } else {
                crate::lists::include::Read::Missing
            }
        };
        let base = expand(
            b"/etc/list",
            b"include /inc\ninclude /gone\n".to_vec(),
            None,
            None,
            &mut read,
        );
        let mut out = Vec::new();
        resolve_base(Some(&base), &mut None, &mut Sink { out: &mut out }).unwrap();
        let r = parse_output(&[&out]);
        let ino = std::os::unix::fs::MetadataExt::ino(&fs::metadata(dir.join("secret")).unwrap());
        assert!(
            r.deny
                .files()
                .iter()
                .any(|f| f.ino == ino && f.kind == KIND_OPEN),
            "{r:?}"
        );
        assert_eq!(r.entries.len(), 1);
        assert_eq!(
            (r.entries[0].line, &r.entries[0].file[..]),
            (1, &b"/inc"[..])
        );
        assert_eq!(r.admin_warnings.len(), 1, "{r:?}");
        assert!(
            r.admin_warnings[0].contains("/etc/list:2: include /gone: the file does not exist")
        );
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_catalogue_line_whose_directory_is_missing_is_not_warned_about() {
        let dir = std::env::temp_dir().join(format!("asx-rc-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let missing = dir.join("no-such-tool/credentials");
        let warnings = |list: &Path, included: bool| {
            let mut out = Vec::new();
            let mut keys = None;
            emit(
                &mut Sink { out: &mut out },
                Source::Home,
                &ListAt {
                    path: list,
                    included,
                },
                3,
                &missing,
                Shape::File,
                LastComponent::NoFollow,
                context(&mut keys).unwrap(),
            )
            .unwrap();
            parse_output(&[&out]).user_warnings
        };
        let cloud = Path::new(CATALOG_DIR).join("cloud");
        assert!(warnings(&cloud, true).is_empty());
        let own = dir.join("my.list");
        let w = warnings(&own, true);
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(w[0].contains("its directory does not exist"), "{w:?}");
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_user_s_included_files_are_read_only_present_or_not() {
        let dir = std::env::temp_dir().join(format!("asx-rp-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        fs::write(dir.join("more.list"), b"/x\n").unwrap();
        let named = vec![
            dir.join("more.list").as_os_str().as_bytes().to_vec(),
            dir.join("later.list").as_os_str().as_bytes().to_vec(),
        ];
        let mut out = Vec::new();
        protect_included(&named, &mut None, &mut Sink { out: &mut out }).unwrap();
        let r = parse_output(&[&out]);
        let ino = |p: &Path| std::os::unix::fs::MetadataExt::ino(&fs::metadata(p).unwrap());
        assert!(
            r.deny
                .files()
                .iter()
                .any(|f| f.ino == ino(&dir.join("more.list")) && f.kind == KIND_RO),
            "{r:?}"
        );
        // The missing one is guarded by name: nothing planted there.
        assert!(
            r.deny.names().iter().any(|n| n.dir.ino == ino(&dir)
                && n.name == b"later.list"
                && n.dir.kind == KIND_RO),
            "{r:?}"
        );
        assert!(
            r.entries
                .iter()
                .all(|e| e.readonly && e.line == 0 && e.origin == ListOrigin::Base)
        );
        // A name that cannot be protected (here a directory) refuses the
        // launch instead of being left to the agent.
        let err = protect_included(
            &[dir.as_os_str().as_bytes().to_vec()],
            &mut None,
            &mut Sink {
                out: &mut Vec::new(),
            },
        )
        .unwrap_err();
        assert!(
            matches!(&err, ResolveError::OwnInclude { why, .. } if why.contains("cannot be made read-only")),
            "{err}"
        );
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn readonly_symlink_marks_every_link_on_the_way() {
        use std::os::unix::fs::MetadataExt;
        let dir = std::env::temp_dir().join(format!("asx-rl-{}", std::process::id()));
        fs::create_dir_all(dir.join("src/sh")).unwrap();
        fs::write(dir.join("src/sh/bashrc"), b"x").unwrap();
        std::os::unix::fs::symlink("src", dir.join(".dots")).unwrap();
        std::os::unix::fs::symlink("sh/bashrc", dir.join("src/bashrc")).unwrap();
        std::os::unix::fs::symlink(".dots/bashrc", dir.join("rc")).unwrap();
        let list = format!("readonly {}/rc\n", dir.display());
        let r = resolve_base_with_marks(&list);
        let lino = |p: &Path| fs::symlink_metadata(p).unwrap().ino();
        let path_mark = |ino: u64| {
            r.deny
                .files()
                .iter()
                .any(|f| f.ino == ino && f.kind == crate::lists::entries::KIND_PATH)
        };
        // The symlinked directory in the link's target and the link to a
        // link: neither can be swapped from inside.
        assert!(path_mark(lino(&dir.join(".dots"))), "{r:?}");
        assert!(path_mark(lino(&dir.join("src/bashrc"))), "{r:?}");
        assert!(
            r.deny
                .files()
                .iter()
                .any(|f| f.ino == lino(&dir.join("src/sh/bashrc")) && f.kind == KIND_RO)
        );
        fs::remove_dir_all(&dir).unwrap();
    }
}
