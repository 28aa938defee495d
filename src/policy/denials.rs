//! Denial events (issue 28) once they leave the kernel: what each refusal
//! was ([`Denial`], decoded by `kernel::denials` from `struct denial` in
//! src/bpf/agent_sandbox.h), which list line caused it ([`attribute`]), how
//! many reach the journal ([`Limiter`]), the recent ones a user may read back
//! ([`Store`], `agent-sandbox-exec --denials`) and how they are shown
//! ([`message`], [`to_json`], [`journal_fields`]). No I/O.

use std::collections::{HashMap, VecDeque};

use crate::lists::entries::{ListEntry, ListOrigin};
use crate::lists::pattern::NamePattern;
use crate::os::procfs::{MountInfo, unescape};

/// What a hook refused (`enum agent_sandbox_denial_op`, agent_sandbox.h).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Op {
    /// `file_open`: an open (or exec) of a denied file.
    Open,
    /// `file_receive`: a descriptor of a denied file passed in.
    Receive,
    /// `inode_link`: a new name for a protected file.
    Link,
    /// `inode_rename`: a move of a protected file, or onto a listed name.
    Rename,
    /// `inode_create`, `mknod`, `symlink`, `mkdir`: a new inode at a listed name.
    Create,
    /// `inode_unlink`, `inode_rmdir`.
    Unlink,
    /// `inode_setattr`: a mode change below a directory entry, or any
    /// attribute change (size, mode, owner, times) of a listed or read-only file.
    Setattr,
    /// `inode_setxattr`, `inode_removexattr`, `inode_set_acl`, `inode_remove_acl`: an ACL below a
    /// directory entry, or any extended attribute of a listed or read-only file.
    Xattr,
    /// `file_ioctl`: `dev` holds the command.
    Ioctl,
    /// `ptrace_access_check`: `ino` holds the target's pid.
    Ptrace,
    /// `task_kill`: `ino` the target's pid, `dev` the signal.
    Signal,
    /// `task_setrlimit`: `ino` the target's pid.
    Rlimit,
    /// `file_fcntl`: `dev` the command.
    Fcntl,
    /// `unix_stream_connect`, `unix_may_send`.
    Unix,
    /// A TCP, MPTCP or UDP connect or send to the user's server on this
    /// host: `ino` the port, `dev` the protocol number.
    Inet,
    /// `sb_mount`, `move_mount`, `sb_umount`.
    Mount,
    /// A write-open of an outside task's `/proc/<pid>/` file.
    ProcWrite,
    /// `file_open`: an open an audit entry would deny, allowed (shadow mode).
    AuditOpen,
    /// `file_open`: an open for writing (or with `O_TRUNC`) of a read-only file.
    WriteOpen,
    /// A code this build does not know (a newer program).
    Unknown(u32),
}

impl Op {
    /// The op for `code` (`AGENT_SANDBOX_OP_*`).
    pub fn from_code(code: u32) -> Op {
        match code {
            1 => Op::Open,
            2 => Op::Receive,
            3 => Op::Link,
            4 => Op::Rename,
            5 => Op::Create,
            6 => Op::Unlink,
            7 => Op::Setattr,
            8 => Op::Xattr,
            9 => Op::Ioctl,
            10 => Op::Ptrace,
            11 => Op::Signal,
            12 => Op::Rlimit,
            13 => Op::Fcntl,
            14 => Op::Unix,
            15 => Op::Inet,
            16 => Op::Mount,
            17 => Op::ProcWrite,
            18 => Op::AuditOpen,
            19 => Op::WriteOpen,
            n => Op::Unknown(n),
        }
    }

    /// A short name: the `ASE_OP=` field and the JSON `op`.
    pub fn name(self) -> &'static str {
        match self {
            Op::Open => "open",
            Op::Receive => "receive",
            Op::Link => "link",
            Op::Rename => "rename",
            Op::Create => "create",
            Op::Unlink => "unlink",
            Op::Setattr => "setattr",
            Op::Xattr => "setxattr",
            Op::Ioctl => "ioctl",
            Op::Ptrace => "ptrace",
            Op::Signal => "signal",
            Op::Rlimit => "setrlimit",
            Op::Fcntl => "fcntl",
            Op::Unix => "unix-connect",
            Op::Inet => "inet-connect",
            Op::Mount => "mount",
            Op::ProcWrite => "proc-write",
            Op::AuditOpen => "audit-open",
            Op::WriteOpen => "write-open",
            Op::Unknown(_) => "unknown",
        }
    }

    /// Whether the op acts on a file that a list line may have caused.
    pub fn on_listed_file(self) -> bool {
        matches!(
            self,
            Op::Open
                | Op::Receive
                | Op::Link
                | Op::Rename
                | Op::Create
                | Op::Unlink
                | Op::Setattr
                | Op::Xattr
                | Op::AuditOpen
                | Op::WriteOpen
        )
    }

    /// Whether the op was allowed and only reported: an audit entry's match.
    pub fn audit(self) -> bool {
        self == Op::AuditOpen
    }
}

/// One refusal as the kernel reported it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Denial {
    /// `CLOCK_BOOTTIME` of the refusal, in nanoseconds.
    pub boot_ns: u64,
    /// The sandbox's cgroup id.
    pub cgid: u64,
    /// The file's inode number, or what [`Op`] says.
    pub ino: u64,
    /// The file's `s_dev` (kernel encoding, `MAJOR << 20 | MINOR`), or what [`Op`] says.
    pub dev: u32,
    /// The task's real uid.
    pub uid: u32,
    /// The task's thread-group id.
    pub pid: u32,
    /// What was refused.
    pub op: Op,
    /// Refusals of the same sandbox, op and file the kernel's rate limit
    /// dropped before this one.
    pub suppressed: u32,
    /// The task's `comm` (at most 15 bytes; lossy UTF-8).
    pub comm: String,
    /// The path, '/'-separated, if the hook had a file; see the two flags.
    pub path: Option<Vec<u8>>,
    /// The path's start is missing (too deep or too long).
    pub path_truncated: bool,
    /// The path is from its filesystem's root, not the mount tree's: the
    /// hook had no mount.
    pub path_fs_relative: bool,
}

/// A denial as the daemon keeps and shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    /// Its number: increasing over the daemon's life, for `--denials`' paging.
    pub seq: u64,
    /// When, in milliseconds since the Unix epoch.
    pub time_ms: u64,
    /// The kernel's report.
    pub denial: Denial,
    /// The task's executable (`/proc/<pid>/exe` when the daemon read the
    /// record), if it could be read.
    pub exe: Option<String>,
    /// The path as shown: absolute where the mount was known or could be
    /// found, else [`Denial::path`] as it came.
    pub path: Option<String>,
    /// The list line that caused it, when it can be told.
    pub entry: Option<EntryRef>,
}

/// The list line a denial is traced to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EntryRef {
    /// Which list.
    pub origin: ListOrigin,
    /// The list file's path (the user's own, the base list, or the file one
    /// of them includes that holds the line).
    pub list: String,
    /// 1-based line number.
    pub line: u32,
    /// A directory entry.
    pub dir: bool,
    /// An audit entry.
    pub audit: bool,
    /// A read-only entry (line 0 of the base list: the fixed protection of
    /// the user's own lists).
    pub readonly: bool,
}

/// Which lines can have caused a refusal, by what the hook refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Class {
    /// An open: the enforced read entries.
    Read,
    /// An audit entry's "would deny": the audit entries.
    Audit,
    /// A change of a file: the read-only entries and the read file entries
    /// (a listed file is protected from changes too).
    Write,
}

impl Class {
    /// Whether a line that is not an exception can be of this class.
    fn takes(self, e: &ListEntry) -> bool {
        match self {
            Class::Read => !e.audit && !e.readonly,
            Class::Audit => e.audit,
            Class::Write => e.readonly || (!e.audit && !e.dir),
        }
    }
}

/// Whether `path` is `dir` or below it, component-wise (`/a/b` is below
/// `/a`, `/ab` is not).
fn at_or_below(path: &[u8], dir: &[u8]) -> bool {
    path.starts_with(dir) && (path.len() == dir.len() || path.get(dir.len()) == Some(&b'/'))
}

/// Whether the repository guard (`readonly **/.git/`: a pattern entry
/// ending in `/`, the only one) covers `path`: a component of it is `.git`
/// (ASCII case folded, as the hook compares), so the refusal of a change of
/// a repository's hook or configuration is traced to that line.
fn repo_guard_covers(path: &[u8]) -> bool {
    path.split(|&b| b == b'/')
        .any(|c| c.eq_ignore_ascii_case(b".git"))
}

/// Whether name-pattern line `line` (`**/NAME`, or `DIR/NAME` or
/// `DIR/**/NAME` with `~/` joined) covers `path`: its last component
/// matches, in any directory, in DIR itself, or at any depth below DIR.
fn pattern_covers(line: &[u8], path: &[u8]) -> bool {
    let split = |p: &'_ [u8]| -> Option<(Vec<u8>, Vec<u8>)> {
        let i = p.iter().rposition(|&b| b == b'/')?;
        Some((p[..i].to_vec(), p[i + 1..].to_vec()))
    };
    let (Some((scope, pat)), Some((dir, name))) = (split(line), split(path)) else {
        return false;
    };
    let Ok(pattern) = NamePattern::parse(&pat) else {
        return false;
    };
    let within = match scope.strip_suffix(b"/**") {
        Some(top) => at_or_below(&dir, top),
        None => scope == b"**" || scope == dir,
    };
    within && pattern.matches(&name)
}

/// The line of `entries` that denies `path` by name, as the hook decides:
/// per list, the nearest line that names the path or a directory above it
/// decides (an exception nearer than a directory entry re-allows for that
/// list); a file line names the path exactly. The base list's line is
/// preferred when both lists deny. Only lines of `class` and exceptions
/// count (an audit entry's "would deny" is traced to an audit line, a
/// write-open refusal to a read-only line). None when no line denies the path by
/// name: the file was denied by inode (another name of a listed file, or a
/// mark on the way to a listed name), or by a line of an earlier launch.
pub fn attribute<'e>(entries: &'e [ListEntry], path: &[u8], class: Class) -> Option<&'e ListEntry> {
    let nearest = |origin: ListOrigin| {
        entries
            .iter()
            .filter(|e| e.origin == origin && (e.exception || class.takes(e)))
            .filter(|e| {
                if e.pattern && e.dir {
                    repo_guard_covers(path)
                } else if e.pattern {
                    pattern_covers(&e.path, path)
                } else if e.dir {
                    at_or_below(path, &e.path)
                } else {
                    e.path == path
                }
            })
            // Longest path first (a pattern is at the file's own level); a
            // file line before a directory line of the same path.
            .max_by_key(|e| {
                let len = if e.pattern { path.len() } else { e.path.len() };
                (len, !e.dir, e.exception)
            })
            .filter(|e| !e.exception)
    };
    nearest(ListOrigin::Base).or_else(|| nearest(ListOrigin::User))
}

/// [`attribute`] for a refusal of `op`: an audit entry's match among the
/// audit lines, a write-open among the write-protecting ones, a change of a
/// name or of attributes among the read lines and then the write-protecting
/// ones (both protect a file's name and attributes), any other among the
/// read lines.
pub fn attribute_op<'e>(entries: &'e [ListEntry], path: &[u8], op: Op) -> Option<&'e ListEntry> {
    match op {
        Op::AuditOpen => attribute(entries, path, Class::Audit),
        Op::WriteOpen => attribute(entries, path, Class::Write),
        Op::Setattr | Op::Xattr | Op::Create | Op::Link | Op::Rename | Op::Unlink => {
            attribute(entries, path, Class::Read).or_else(|| attribute(entries, path, Class::Write))
        }
        _ => attribute(entries, path, Class::Read),
    }
}

/// The path, in the mount tree, of `fs_path` (a path from the root of the
/// filesystem on device `dev`, kernel encoding) by `mounts` (a mountinfo
/// table): the first mount of that device whose root is at or above the
/// path. None if no mount of the device shows it.
pub fn mounted_path<'m>(
    mounts: impl Iterator<Item = MountInfo<'m>>,
    dev: u32,
    fs_path: &[u8],
) -> Option<Vec<u8>> {
    let (major, minor) = (dev >> 20, dev & 0xf_ffff);
    mounts
        .filter(|m| m.major == major && m.minor == minor)
        .find_map(|m| {
            let root = unescape(m.root);
            let below = if root == b"/" {
                fs_path
            } else if at_or_below(fs_path, &root) {
                &fs_path[root.len()..]
            } else {
                return None;
            };
            let mut out = unescape(m.mount_point);
            if out == b"/" {
                out.clear();
            }
            out.extend_from_slice(below);
            if out.is_empty() {
                out.push(b'/');
            }
            Some(out)
        })
}

/// Journal lines per uid per [`Limiter::WINDOW_MS`], at most; the rest are
/// counted and summarised once the window ends.
#[derive(Debug, Default)]
pub struct Limiter {
    windows: HashMap<u32, Window>,
}

#[derive(Debug, Clone, Copy)]
struct Window {
    start_ms: u64,
    logged: u32,
    suppressed: u64,
}

impl Limiter {
    /// The window, in milliseconds.
    pub const WINDOW_MS: u64 = 10_000;
    /// Lines per uid per window.
    pub const LINES: u32 = 10;

    /// Whether a denial of `uid` at `now_ms` may be logged; if not, it is
    /// counted for the window's summary.
    pub fn admit(&mut self, uid: u32, now_ms: u64) -> bool {
        let w = self.window(uid, now_ms);
        if w.logged < Self::LINES {
            w.logged += 1;
            return true;
        }
        w.suppressed += 1;
        false
    }

    /// Counts `n` refusals of `uid` that the kernel's rate limit dropped
    /// (they never reached the daemon) into the window's summary.
    pub fn add_dropped(&mut self, uid: u32, n: u64, now_ms: u64) {
        self.window(uid, now_ms).suppressed += n;
    }

    fn window(&mut self, uid: u32, now_ms: u64) -> &mut Window {
        self.windows.entry(uid).or_insert(Window {
            start_ms: now_ms,
            logged: 0,
            suppressed: 0,
        })
    }

    /// Ends the windows older than [`Self::WINDOW_MS`] at `now_ms`: the
    /// `(uid, refusals not logged)` of each that dropped any, sorted by uid.
    /// A uid's state is then forgotten, so the map holds only uids denied
    /// in the last window.
    pub fn expire(&mut self, now_ms: u64) -> Vec<(u32, u64)> {
        let mut out = Vec::new();
        self.windows.retain(|uid, w| {
            if now_ms.saturating_sub(w.start_ms) < Self::WINDOW_MS {
                return true;
            }
            if w.suppressed > 0 {
                out.push((*uid, w.suppressed));
            }
            false
        });
        out.sort_unstable();
        out
    }
}

/// The recent denials of each uid, for `--denials`: at most
/// [`Store::PER_UID`] per uid and [`Store::UIDS`] uids (the uid whose last
/// denial is oldest goes first), so memory does not grow with a storm.
#[derive(Debug, Default)]
pub struct Store {
    by_uid: HashMap<u32, VecDeque<Record>>,
    next_seq: u64,
}

impl Store {
    /// Records kept per uid.
    pub const PER_UID: usize = 200;
    /// Uids kept.
    pub const UIDS: usize = 256;

    /// The number the next record gets (1 for the first).
    pub fn next_seq(&mut self) -> u64 {
        self.next_seq += 1;
        self.next_seq
    }

    /// Keeps `r`, dropping the oldest of its uid (or the stalest uid) when full.
    pub fn push(&mut self, r: Record) {
        let uid = r.denial.uid;
        if !self.by_uid.contains_key(&uid) && self.by_uid.len() >= Self::UIDS {
            let stalest = self
                .by_uid
                .iter()
                .min_by_key(|(_, q)| q.back().map_or(0, |r| r.seq))
                .map(|(u, _)| *u);
            if let Some(u) = stalest {
                self.by_uid.remove(&u);
            }
        }
        let q = self.by_uid.entry(uid).or_default();
        if q.len() >= Self::PER_UID {
            q.pop_front();
        }
        q.push_back(r);
    }

    /// Forgets `uid`'s records: the uid now belongs to another account (a
    /// user deleted and another made with the same uid), which must not read
    /// the first one's refusals.
    pub fn forget(&mut self, uid: u32) {
        self.by_uid.remove(&uid);
    }

    /// `uid`'s records numbered above `after`, oldest first.
    pub fn since(&self, uid: u32, after: u64) -> impl Iterator<Item = &Record> {
        self.by_uid
            .get(&uid)
            .into_iter()
            .flat_map(|q| q.iter())
            .filter(move |r| r.seq > after)
    }
}

/// `text` with every control character (C0, DEL, C1) written as `\xNN`:
/// paths and `comm` are the agent's to choose, and a terminal would act on an
/// escape sequence in them (set the title, write the clipboard) when the user
/// reads `--denials` or the journal.
pub fn printable(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if c.is_control() {
            out.push_str(&format!("\\x{:02x}", u32::from(c)));
        } else {
            out.push(c);
        }
    }
    out
}

/// What was refused, in words: "open of /home/u/.ssh/id", "signal 9 to pid 77".
pub fn what(r: &Record) -> String {
    let d = &r.denial;
    let path = printable(r.path.as_deref().unwrap_or("(no path)"));
    match d.op {
        Op::Ioctl => format!("ioctl {:#x} on {path}", d.dev),
        Op::Ptrace => format!("ptrace of pid {}", d.ino),
        Op::Signal => format!("signal {} to pid {}", d.dev, d.ino),
        Op::Rlimit => format!("setrlimit of pid {}", d.ino),
        Op::Fcntl => format!("fcntl {} (owner {})", d.dev, d.ino as i64),
        Op::Inet => format!(
            "{} connect or send to your server on port {}",
            match d.dev {
                6 => "TCP",
                17 => "UDP",
                _ => "IP",
            },
            d.ino
        ),
        Op::Mount => "a mount change".to_owned(),
        Op::Unix if r.path.is_none() => "connect to an abstract Unix socket".to_owned(),
        Op::AuditOpen => format!("open of {path}"),
        Op::WriteOpen => format!("open for writing of {path}"),
        Op::Setattr => format!("attribute change (mode, owner, size or times) of {path}"),
        Op::Xattr => format!("extended attribute change of {path}"),
        op => format!("{} of {path}", op.name()),
    }
}

/// Which line, in words: "~/.config/agent-sandbox-exec/denylist:3 (a directory entry)".
pub fn cause(r: &Record) -> String {
    match &r.entry {
        Some(e) if e.readonly && e.line == 0 => {
            "the fixed write protection of your own lists (~/.config/agent-sandbox-exec/)"
                .to_owned()
        }
        Some(e) => format!(
            "{}:{} ({}{})",
            e.list,
            e.line,
            if e.audit {
                "an audit "
            } else if e.readonly {
                "a read-only "
            } else {
                "a "
            },
            if e.dir {
                "directory entry"
            } else {
                "file entry"
            }
        ),
        None if r.denial.op.audit() => {
            "an audit entry (another name of an audited file, or a line of an earlier launch)"
                .to_owned()
        }
        None if r.denial.op.on_listed_file() => {
            "another name of a listed file or directory (a link or a mount), a name on the way \
             to one, or a line of an earlier launch"
                .to_owned()
        }
        None => "the sandbox's fixed rules".to_owned(),
    }
}

/// How the op ended, in words: "refused", or for an audit entry's match
/// "allowed (audit: would be refused)".
pub fn verdict(op: Op) -> &'static str {
    if op.audit() {
        "allowed (audit: would be refused)"
    } else {
        "refused"
    }
}

/// The journal's MESSAGE for `r`.
pub fn message(r: &Record) -> String {
    let d = &r.denial;
    let mut m = format!(
        "uid {}: {} {} to {} (pid {}{}): {}",
        d.uid,
        what(r),
        verdict(d.op),
        printable(&d.comm),
        d.pid,
        r.exe
            .as_deref()
            .map(|e| format!(", {}", printable(e)))
            .unwrap_or_default(),
        cause(r)
    );
    if d.suppressed > 0 {
        m.push_str(&format!("; {} more like it not reported", d.suppressed));
    }
    m
}

/// The journal's structured fields for `r` (`journalctl ASE_UID=1000`).
pub fn journal_fields(r: &Record) -> Vec<(&'static str, String)> {
    let d = &r.denial;
    let mut f = vec![
        ("ASE_UID", d.uid.to_string()),
        ("ASE_PID", d.pid.to_string()),
        ("ASE_COMM", d.comm.clone()),
        ("ASE_OP", d.op.name().to_owned()),
        ("ASE_CGROUP", d.cgid.to_string()),
        ("ASE_AUDIT", u8::from(d.op.audit()).to_string()),
    ];
    if let Some(e) = &r.exe {
        f.push(("ASE_EXE", e.clone()));
    }
    if let Some(p) = &r.path {
        f.push(("ASE_PATH", p.clone()));
    }
    if let Some(e) = &r.entry {
        f.push(("ASE_ENTRY", format!("{}:{}", e.list, e.line)));
    }
    if d.suppressed > 0 {
        f.push(("ASE_SUPPRESSED", d.suppressed.to_string()));
    }
    f
}

/// Longest text field of a record's JSON, in bytes before escaping: a path
/// is at most 1,024 bytes from the kernel, plus its mount point.
pub const MAX_FIELD_BYTES: usize = 4096;

/// `s` cut to [`MAX_FIELD_BYTES`] at a character boundary (marked `…`).
fn clip(s: &str) -> String {
    if s.len() <= MAX_FIELD_BYTES {
        return s.to_owned();
    }
    let mut end = MAX_FIELD_BYTES;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &s[..end])
}

/// `r` as one line of JSON (the wire format of `--denials`, and its `--json`),
/// each text field at most [`MAX_FIELD_BYTES`], so that a record always fits
/// one reply.
pub fn to_json(r: &Record) -> String {
    let d = &r.denial;
    serde_json::json!({
        "seq": r.seq,
        "time_ms": r.time_ms,
        "uid": d.uid,
        "pid": d.pid,
        "comm": d.comm,
        "exe": r.exe.as_deref().map(clip),
        "op": d.op.name(),
        "what": clip(&what(r)),
        "verdict": verdict(d.op),
        "audit": d.op.audit(),
        "path": r.path.as_deref().map(clip),
        "path_truncated": d.path_truncated,
        "entry": r.entry.as_ref().map(|e| clip(&format!("{}:{}", e.list, e.line))),
        "cause": clip(&cause(r)),
        "suppressed": d.suppressed,
    })
    .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(origin: ListOrigin, line: u32, path: &str, dir: bool, exception: bool) -> ListEntry {
        ListEntry {
            pattern: false,
            origin,
            line,
            dir,
            exception,
            audit: false,
            readonly: false,
            path: path.as_bytes().to_vec(),
            file: Vec::new(),
        }
    }

    fn audit_entry(line: u32, path: &str, dir: bool) -> ListEntry {
        ListEntry {
            audit: true,
            readonly: false,
            ..entry(ListOrigin::User, line, path, dir, false)
        }
    }

    #[test]
    fn a_repository_guard_refusal_is_traced_to_its_line() {
        let guard = ListEntry {
            pattern: true,
            readonly: true,
            ..entry(ListOrigin::User, 3, "**/.git", true, false)
        };
        let env = ListEntry {
            pattern: true,
            ..entry(ListOrigin::User, 4, "**/.env", false, false)
        };
        let entries = [guard, env];
        for path in [
            "/home/u/r/.git/config",
            "/home/u/r/.GIT/hooks/pre-commit",
            "/home/u/r/.git",
        ] {
            let got = attribute_op(&entries, path.as_bytes(), Op::WriteOpen).map(|e| e.line);
            assert_eq!(got, Some(3), "{path}");
        }
        assert_eq!(
            attribute_op(&entries, b"/home/u/r/git/config", Op::WriteOpen).map(|e| e.line),
            None
        );
        assert_eq!(
            attribute_op(&entries, b"/home/u/r/.env", Op::Open).map(|e| e.line),
            Some(4)
        );
    }

    fn denial(uid: u32, op: Op) -> Denial {
        Denial {
            boot_ns: 1,
            cgid: 7,
            ino: 12,
            dev: 8 << 20 | 1,
            uid,
            pid: 4242,
            op,
            suppressed: 0,
            comm: "cat".into(),
            path: Some(b"/home/u/.ssh/id".to_vec()),
            path_truncated: false,
            path_fs_relative: false,
        }
    }

    fn record(seq: u64, uid: u32) -> Record {
        Record {
            seq,
            time_ms: 1_000 * seq,
            denial: denial(uid, Op::Open),
            exe: Some("/usr/bin/cat".into()),
            path: Some("/home/u/.ssh/id".into()),
            entry: None,
        }
    }

    #[test]
    fn a_pattern_line_is_at_the_file_s_own_level() {
        use ListOrigin::User;
        let pat = |line, path: &str, exception| ListEntry {
            pattern: true,
            ..entry(User, line, path, false, exception)
        };
        let e = vec![
            pat(1, "**/.env", false),
            pat(2, "**/*.pem", false),
            pat(3, "**/ok.pem", true),
            entry(User, 4, "/home/u/.ssh", true, false),
            pat(5, "/home/u/.ssh/*.pub", true),
            pat(6, "/home/u/keys/id_*", false),
        ];
        let line = |p: &str| attribute(&e, p.as_bytes(), Class::Read).map(|e| e.line);
        assert_eq!(line("/srv/app/.env"), Some(1));
        assert_eq!(
            line("/srv/app/.ENV"),
            Some(1),
            "ASCII case folded, as the hook"
        );
        assert_eq!(line("/a/b.pem"), Some(2));
        assert_eq!(line("/a/ok.pem"), None, "excepted");
        assert_eq!(line("/home/u/.ssh/id"), Some(4));
        assert_eq!(
            line("/home/u/.ssh/id.pub"),
            None,
            "a pattern exception, nearer"
        );
        assert_eq!(line("/home/u/keys/id_rsa"), Some(6));
        assert_eq!(line("/home/u/keys/sub/id_rsa"), None, "that directory only");
        let deep = vec![pat(1, "/home/u/projects/**/terraform.tfstate*", false)];
        let line = |p: &str| attribute(&deep, p.as_bytes(), Class::Read).map(|e| e.line);
        assert_eq!(line("/home/u/projects/a/b/terraform.tfstate"), Some(1));
        assert_eq!(line("/home/u/projects/terraform.tfstate.backup"), Some(1));
        assert_eq!(line("/home/u/projectsX/terraform.tfstate"), None);
    }

    #[test]
    fn nearest_line_decides_per_list() {
        use ListOrigin::{Base, User};
        let e = vec![
            entry(User, 1, "/home/u/.ssh", true, false),
            entry(User, 2, "/home/u/.ssh/id.pub", false, true),
            entry(User, 3, "/home/u/.ssh/keys", true, false),
            entry(User, 4, "/home/u/.ssh/keys/ok", true, true),
            entry(Base, 5, "/home/u/.aws", true, false),
        ];
        let line = |p: &str| attribute(&e, p.as_bytes(), Class::Read).map(|e| e.line);
        assert_eq!(line("/home/u/.ssh/id"), Some(1));
        assert_eq!(line("/home/u/.ssh/keys/a"), Some(3), "the nearer directory");
        assert_eq!(line("/home/u/.ssh/id.pub"), None, "excepted: by name, none");
        assert_eq!(line("/home/u/.ssh/keys/ok/x"), None, "a nearer exception");
        assert_eq!(line("/home/u/.sshx/id"), None, "component-wise");
        assert_eq!(line("/home/u/.aws/credentials"), Some(5));
        let both = vec![
            entry(User, 1, "/etc/secret", false, false),
            entry(Base, 9, "/etc", true, false),
        ];
        assert_eq!(
            attribute(&both, b"/etc/secret", Class::Read).map(|e| e.line),
            Some(9),
            "the base list's line first"
        );
        let file = vec![entry(User, 1, "/a/b", false, false)];
        assert_eq!(
            attribute(&file, b"/a/b/c", Class::Read).map(|e| e.line),
            None
        );
    }

    #[test]
    fn write_refusals_are_traced_to_read_only_lines() {
        use ListOrigin::{Base, User};
        let ro = |origin, line, path: &str, dir| ListEntry {
            readonly: true,
            ..entry(origin, line, path, dir, false)
        };
        let e = vec![
            ro(Base, 0, "/home/u/.config/agent-sandbox-exec", true),
            entry(User, 1, "/home/u/.ssh/id", false, false),
            entry(User, 2, "/home/u/.ssh", true, false),
            ro(User, 3, "/home/u/.bashrc", false),
            ro(User, 4, "/home/u/.config/systemd/user", true),
            entry(
                User,
                5,
                "/home/u/.config/systemd/user/ok.service",
                false,
                true,
            ),
        ];
        let line = |p: &str, op| attribute_op(&e, p.as_bytes(), op).map(|e| e.line);
        assert_eq!(line("/home/u/.bashrc", Op::WriteOpen), Some(3));
        assert_eq!(
            line("/home/u/.bashrc", Op::Open),
            None,
            "read-only lines deny no open"
        );
        assert_eq!(
            line("/home/u/.config/systemd/user/x.service", Op::Create),
            Some(4)
        );
        assert_eq!(
            line("/home/u/.config/systemd/user/ok.service", Op::Create),
            None
        );
        assert_eq!(
            line("/home/u/.ssh/id", Op::Setattr),
            Some(1),
            "a listed file: its line"
        );
        assert_eq!(
            line("/home/u/.ssh/k", Op::Setattr),
            Some(2),
            "below a directory entry"
        );
        assert_eq!(
            line("/home/u/.config/agent-sandbox-exec/denylist", Op::WriteOpen),
            Some(0)
        );
        let mut r = record(1, 1000);
        r.denial.op = Op::from_code(19);
        r.entry = Some(EntryRef {
            origin: Base,
            list: "/etc/agent-sandbox-exec/denylist".into(),
            line: 0,
            dir: true,
            audit: false,
            readonly: true,
        });
        let m = message(&r);
        assert!(
            m.contains("open for writing of /home/u/.ssh/id refused"),
            "{m}"
        );
        assert!(
            m.contains("the fixed write protection of your own lists"),
            "{m}"
        );
        r.entry.as_mut().unwrap().line = 3;
        r.entry.as_mut().unwrap().dir = false;
        assert!(
            cause(&r).ends_with(":3 (a read-only file entry)"),
            "{}",
            cause(&r)
        );
    }

    #[test]
    fn json_fields_are_bounded_not_cut() {
        let mut r = record(1, 1000);
        r.path = Some(format!("/{}\u{1b}[2J", "é".repeat(5000)));
        let j = to_json(&r);
        assert!(
            !j.contains('\n') && !j.contains('\u{1b}'),
            "escaped by serde_json"
        );
        let v: serde_json::Value = serde_json::from_str(&j).unwrap();
        let path = v["path"].as_str().unwrap();
        assert!(path.len() <= MAX_FIELD_BYTES + '…'.len_utf8() && path.ends_with('…'));
        assert!(v["what"].as_str().unwrap().len() <= MAX_FIELD_BYTES + 3);
    }

    #[test]
    fn audit_denials_are_traced_to_audit_lines() {
        use ListOrigin::User;
        let e = vec![
            entry(User, 1, "/home/u/.aws", true, false),
            audit_entry(2, "/home/u/projects", true),
            entry(User, 3, "/home/u/projects/ok", true, true),
            audit_entry(4, "/home/u/.aws/config", false),
        ];
        let line = |p: &str, op| attribute_op(&e, p.as_bytes(), op).map(|e| e.line);
        assert_eq!(line("/home/u/projects/a/.env", Op::AuditOpen), Some(2));
        assert_eq!(
            line("/home/u/projects/a/.env", Op::Open),
            None,
            "audit lines deny nothing"
        );
        assert_eq!(
            line("/home/u/projects/ok/x", Op::AuditOpen),
            None,
            "the same list's exception"
        );
        assert_eq!(line("/home/u/.aws/config", Op::AuditOpen), Some(4));
        assert_eq!(
            line("/home/u/.aws/config", Op::Open),
            Some(1),
            "deny beats audit"
        );
        let mut r = record(1, 1000);
        r.denial.op = Op::from_code(18);
        r.entry = Some(EntryRef {
            origin: User,
            list: "/home/u/.config/agent-sandbox-exec/denylist".into(),
            line: 2,
            dir: true,
            audit: true,
            readonly: false,
        });
        let m = message(&r);
        assert!(
            m.contains("open of /home/u/.ssh/id allowed (audit: would be refused) to cat"),
            "{m}"
        );
        assert!(m.contains("denylist:2 (an audit directory entry)"), "{m}");
        let j: serde_json::Value = serde_json::from_str(&to_json(&r)).unwrap();
        assert_eq!(j["op"], "audit-open");
        assert_eq!(j["audit"], true);
        assert!(journal_fields(&r).contains(&("ASE_AUDIT", "1".to_owned())));
        assert!(journal_fields(&record(2, 1000)).contains(&("ASE_AUDIT", "0".to_owned())));
    }

    #[test]
    fn paths_from_a_filesystem_root_get_their_mount_point() {
        let table = b"22 1 8:1 / / rw - ext4 /dev/sda1 rw\n\
            30 22 8:2 / /home rw - ext4 /dev/sda2 rw\n\
            31 22 8:2 /u/srv /srv\\040x rw - ext4 /dev/sda2 rw\n";
        let dev = |maj: u32, min: u32| maj << 20 | min;
        let at = |d, p: &[u8]| {
            mounted_path(crate::os::procfs::mountinfo(table), d, p)
                .map(|v| String::from_utf8(v).unwrap())
        };
        assert_eq!(at(dev(8, 1), b"/etc/x").as_deref(), Some("/etc/x"));
        assert_eq!(
            at(dev(8, 2), b"/u/.ssh/id").as_deref(),
            Some("/home/u/.ssh/id")
        );
        assert_eq!(at(dev(8, 3), b"/x"), None, "no mount of the device");
        let bind = b"31 22 8:2 /u/srv /srv\\040x rw - ext4 /dev/sda2 rw\n";
        let got = mounted_path(crate::os::procfs::mountinfo(bind), dev(8, 2), b"/u/srv/a");
        assert_eq!(
            got.as_deref(),
            Some(&b"/srv x/a"[..]),
            "a bind mount of a directory"
        );
        assert_eq!(
            mounted_path(crate::os::procfs::mountinfo(bind), dev(8, 2), b"/u/other"),
            None
        );
    }

    #[test]
    fn limiter_bounds_lines_and_sums_the_rest() {
        let mut l = Limiter::default();
        let logged = (0..100_000).filter(|_| l.admit(1000, 5)).count();
        assert_eq!(logged, Limiter::LINES as usize);
        l.add_dropped(1000, 7, 6);
        assert!(l.admit(1001, 5), "another uid has its own window");
        assert_eq!(l.expire(5 + Limiter::WINDOW_MS - 1), vec![]);
        let dropped = 100_000 - u64::from(Limiter::LINES) + 7;
        assert_eq!(l.expire(5 + Limiter::WINDOW_MS), vec![(1000, dropped)]);
        assert!(l.admit(1000, 20_000), "a new window");
        l.add_dropped(1002, 3, 20_000);
        assert_eq!(
            l.expire(30_000),
            vec![(1002, 3)],
            "kernel drops alone are summed up too"
        );
    }

    #[test]
    fn store_is_bounded_and_per_uid() {
        let mut s = Store::default();
        for _ in 0..(Store::PER_UID + 50) {
            let seq = s.next_seq();
            s.push(record(seq, 1000));
        }
        let seq = s.next_seq();
        s.push(record(seq, 1001));
        let mine: Vec<u64> = s.since(1000, 0).map(|r| r.seq).collect();
        assert_eq!(mine.len(), Store::PER_UID);
        assert_eq!(mine.first(), Some(&51), "the oldest dropped");
        assert_eq!(s.since(1000, 240).count(), 10);
        assert_eq!(s.since(1001, 0).count(), 1);
        assert_eq!(s.since(1002, 0).count(), 0, "another uid sees nothing");
        s.forget(1001);
        assert_eq!(
            s.since(1001, 0).count(),
            0,
            "a uid given to another account"
        );
        for u in 0..(Store::UIDS as u32 + 5) {
            let seq = s.next_seq();
            s.push(record(seq, 2000 + u));
        }
        assert!(s.by_uid.len() <= Store::UIDS);
    }

    #[test]
    fn rendering() {
        let mut r = record(3, 1000);
        r.entry = Some(EntryRef {
            origin: ListOrigin::User,
            list: "/home/u/.config/agent-sandbox-exec/denylist".into(),
            line: 4,
            dir: true,
            audit: false,
            readonly: false,
        });
        r.denial.suppressed = 5;
        let m = message(&r);
        assert!(m.contains("open of /home/u/.ssh/id refused to cat (pid 4242, /usr/bin/cat)"));
        assert!(m.contains("denylist:4 (a directory entry)"), "{m}");
        assert!(m.contains("5 more like it"), "{m}");
        let f = journal_fields(&r);
        assert!(f.contains(&("ASE_UID", "1000".into())));
        assert!(f.contains(&(
            "ASE_ENTRY",
            "/home/u/.config/agent-sandbox-exec/denylist:4".into()
        )));
        let v: serde_json::Value = serde_json::from_str(&to_json(&r)).unwrap();
        assert_eq!(v["seq"], 3);
        assert_eq!(v["op"], "open");
        assert_eq!(v["path"], "/home/u/.ssh/id");
        let mut s = record(1, 1000);
        s.denial.op = Op::Inet;
        s.denial.dev = 6;
        s.denial.ino = 8080;
        s.path = None;
        assert_eq!(what(&s), "TCP connect or send to your server on port 8080");
        assert_eq!(cause(&s), "the sandbox's fixed rules");
        assert_eq!(Op::from_code(17), Op::ProcWrite);
        let mut evil = record(2, 1000);
        evil.path = Some("/home/u/\u{1b}]52;c;aGk=\u{7}\nFAKE\u{9b}".into());
        evil.denial.comm = "x\u{1b}[2J".into();
        let shown = message(&evil);
        assert!(!shown.chars().any(char::is_control), "{shown:?}");
        assert!(
            shown.contains("/home/u/\\x1b]52;c;aGk=\\x07\\x0aFAKE\\x9b"),
            "{shown}"
        );
        assert!(shown.contains("refused to x\\x1b[2J"), "{shown}");
        assert_eq!(Op::from_code(99), Op::Unknown(99));
    }
}
