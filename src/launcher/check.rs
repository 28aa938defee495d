//! `agent-sandbox-exec --check [LIST]`: what each line of a list would deny
//! now, resolved offline as the caller (no daemon, no BPF), with the lines
//! that look like mistakes. Also the per-line part of `--status -v`.
//!
//! The decisions are pure functions, unit-tested on fixture trees:
//! [`state_of`] (what the resolution of one line means), [`lint`] (a `#`
//! later in the line, glob characters), [`similar`] (a near name in the
//! directory of a missing file), [`echo_allowed`] (the README's rule on
//! echoing list lines) and [`exit_status`]. [`check_list`] is the thin
//! driver that reads the file system.
//!
//! The resolution is the resolver's ([`crate::resolve::keys::KeyContext::resolve`]),
//! run with the caller's credentials: the base list's absolute lines are
//! resolved by the daemon as root, so what `--check` shows for them may
//! differ (a directory the caller cannot read).

use std::ffi::OsStr;
use std::fmt::Write as _;
use std::fs;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use crate::lists::denylist::{self, Anchor};
use crate::lists::entries::FileKey;
use crate::lists::include;
use crate::lists::pattern::scope_dir;
use crate::os::paths::{CATALOG_DIR, DEFAULTS_LIST, HOME_LIST, Paths};
use crate::resolve::keys::{FileKind, KeyContext, KeyError, LastComponent, ListingSink};
use crate::resolve::list_file::{
    Defaults, Trust, read_defaults, read_include, unknown_group_warning,
};
use crate::resolve::witness::NoWitness;

/// Exit status of `--check` when every line is in force and none looks
/// like a mistake.
pub const EXIT_CLEAN: u8 = 0;
/// Exit status when a line is skipped, would refuse the launch, or looks
/// like a mistake.
pub const EXIT_PROBLEMS: u8 = 1;
/// Exit status when a list cannot be read (or for a usage error).
pub const EXIT_ERROR: u8 = 2;

/// What one listed line amounts to now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum State {
    /// A regular file exists there: opening it is denied.
    Denied,
    /// Nothing is there but the directory exists: the name is watched and
    /// the file is denied as soon as it appears.
    Watched,
    /// The line is skipped (not in force), and why.
    Skipped(String),
    /// The path cannot be checked: a launch is refused until it is fixed.
    Refuses(String),
    /// An exception (`!PATH`, `!DIR/`): it denies nothing, it re-allows.
    Exception,
    /// A line of the shipped catalogue whose directory does not exist: a
    /// tool not used here, no mistake (protected from the first launch
    /// after the directory exists).
    Absent,
    /// A name pattern (`**/NAME`, `DIR/NAME` with `*` or `?`): live, by
    /// name; holds what it matches now.
    Pattern(String),
    /// The repository guard (`readonly **/.git/`): live, in every git
    /// repository.
    RepoGuard,
}

impl State {
    /// A short label for the line's state.
    pub fn label(&self) -> String {
        match self {
            State::Denied => "denied".into(),
            State::Watched => "watched by name (missing now; denied as soon as it appears)".into(),
            State::Skipped(why) => format!("skipped: {why}"),
            State::Refuses(why) => format!("refuses every launch: {why}"),
            State::Exception => "exception: re-allows what a directory entry of this list denies \
                 (never a file a file entry names)"
                .into(),
            State::Absent => "not on this machine: its directory does not exist (protected \
                 from the first launch after it exists)"
                .into(),
            State::RepoGuard => "repository guard, live: in every git repository not made \
                 inside a sandbox, its hooks and what git reads its configuration from \
                 (.git/config, config.worktree, commondir, hooks/; submodules' and worktrees' \
                 too) cannot be changed from inside, nor a .git made in a directory of yours, \
                 so git config, git remote add and git init in your directories fail there, \
                 and git push -u and new tracking branches record no upstream"
                .into(),
            State::Pattern(now) => format!(
                "name pattern, live (every file given a matching name later is covered too; \
                 nothing is linked, renamed or symlinked to or from such a name inside): {now}"
            ),
        }
    }
}

/// What a directory entry's line (`DIR/`, without the `/` in `dir`)
/// amounts to now, as the daemon resolves it: a directory there is denied
/// below; nothing there, in a directory that exists, is watched by name.
/// `base`: a base-list line (an unreadable path is the daemon's to check as
/// root). Returns the state and whether the directory above is missing.
pub fn dir_state(dir: &Path, base: bool) -> (State, bool) {
    match fs::metadata(dir) {
        Ok(m) if m.is_dir() => (State::Denied, false),
        Ok(_) => (
            State::Skipped("it ends in / but is not a directory".into()),
            false,
        ),
        Err(e) if matches!(e.raw_os_error(), Some(libc::ENOENT) | Some(libc::ENOTDIR)) => {
            match dir.parent().map(fs::metadata) {
                Some(Ok(p)) if p.is_dir() => (State::Watched, false),
                _ => (state_of(&Err(KeyError::Missing), false, base), true),
            }
        }
        // As for a file's line: the daemon's to check as root, or refusing.
        Err(e) => (state_of(&Err(KeyError::Stat(e)), false, base), false),
    }
}

/// What the resolution of one line found: its result and whether a file
/// key was sent (a regular file exists at the path or at its symlink's
/// target). Pure.
pub fn state_of(found: &Result<Option<String>, KeyError>, file: bool, base: bool) -> State {
    match found {
        Ok(Some(why)) => State::Skipped(format!("the name cannot be watched: {why}")),
        Ok(None) if file => State::Denied,
        Ok(None) => State::Watched,
        Err(KeyError::Missing) => State::Skipped(
            "its directory does not exist (denied from the first launch after it exists)".into(),
        ),
        Err(KeyError::NotRegular(FileKind::Symlink)) => State::Skipped(
            "the last component is a symbolic link; list the file it points to instead".into(),
        ),
        Err(KeyError::NotRegular(FileKind::Directory)) => State::Skipped(
            "it names a directory; only files are denied: list the files in it".into(),
        ),
        Err(KeyError::Stat(e)) if base && e.raw_os_error() == Some(libc::EACCES) => State::Skipped(
            format!("cannot check it as you ({e}); the daemon resolves it as root"),
        ),
        Err(KeyError::Stat(e)) => State::Refuses(format!(
            "cannot check the path: {e}; fix the path's permissions or the list"
        )),
        Err(e) => State::Skipped(format!("the path {e}")),
    }
}

/// Entries that look like mistakes, from the path's text alone: a `#`
/// after the start (there are no trailing comments) and glob characters
/// (never expanded). Pure; only reported for a line that denies nothing now.
pub fn lint(path: &[u8]) -> Vec<String> {
    let mut out = Vec::new();
    if path.contains(&b'#') {
        out.push(
            "it holds a `#`, which is part of the path: there are no trailing comments; \
             put a comment on a line of its own"
                .to_string(),
        );
    }
    if path.contains(&b'[') {
        out.push(
            "it holds a `[`, which is taken literally (a name pattern has `*` and `?` only); \
             list each file"
                .to_string(),
        );
    }
    out
}

/// Names below `dir` the walk of [`pattern_now`] reads at most.
const PATTERN_SCAN_NAMES: usize = 20_000;
/// Levels below the home the walk of [`pattern_now`] goes down at most.
const PATTERN_SCAN_DEPTH: usize = 6;

/// What name pattern `p` matches now, as a phrase: the files of a
/// matching name in `dir` (or, with `deep`, in `dir` and the directories
/// below it, up to [`PATTERN_SCAN_DEPTH`] levels and
/// [`PATTERN_SCAN_NAMES`] names); None when `dir` cannot be read.
pub fn pattern_now(
    p: &crate::lists::pattern::NamePattern,
    dir: &Path,
    deep: bool,
) -> Option<String> {
    let mut todo = vec![(dir.to_path_buf(), 0usize)];
    let (mut found, mut seen, mut first): (usize, usize, Option<PathBuf>) = (0, 0, None);
    let mut top = true;
    while let Some((d, depth)) = todo.pop() {
        let rd = match fs::read_dir(&d) {
            Ok(rd) => rd,
            Err(_) if !top => continue,
            Err(_) => return None,
        };
        top = false;
        for ent in rd.flatten() {
            seen += 1;
            if seen > PATTERN_SCAN_NAMES {
                break;
            }
            let Ok(ft) = ent.file_type() else { continue };
            if ft.is_dir() {
                if deep && depth < PATTERN_SCAN_DEPTH {
                    todo.push((ent.path(), depth + 1));
                }
            } else if p.matches(ent.file_name().as_bytes()) {
                found += 1;
                first.get_or_insert_with(|| ent.path());
            }
        }
        if seen > PATTERN_SCAN_NAMES {
            break;
        }
    }
    let scope = if deep {
        format!(
            "{} and below (up to {PATTERN_SCAN_DEPTH} levels{})",
            dir.display(),
            if seen > PATTERN_SCAN_NAMES {
                format!(", the first {PATTERN_SCAN_NAMES} names")
            } else {
                String::new()
            }
        )
    } else {
        dir.display().to_string()
    };
    Some(match (found, first) {
        (0, _) => format!("no file matches now in {scope}"),
        (n, Some(f)) => format!("{n} file(s) match now in {scope}, e.g. {}", f.display()),
        (n, None) => format!("{n} file(s) match now in {scope}"),
    })
}

/// Edit distance (insertions, deletions, substitutions and transpositions
/// of adjacent bytes) between `a` and `b`, ASCII case ignored. Pure.
pub fn distance(a: &[u8], b: &[u8]) -> usize {
    let a: Vec<u8> = a.iter().map(u8::to_ascii_lowercase).collect();
    let b: Vec<u8> = b.iter().map(u8::to_ascii_lowercase).collect();
    let (n, m) = (a.len(), b.len());
    let mut d = vec![vec![0usize; m + 1]; n + 1];
    for (i, row) in d.iter_mut().enumerate() {
        row[0] = i;
    }
    for (j, cell) in d[0].iter_mut().enumerate() {
        *cell = j;
    }
    for i in 1..=n {
        for j in 1..=m {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut v = (d[i - 1][j] + 1)
                .min(d[i][j - 1] + 1)
                .min(d[i - 1][j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                v = v.min(d[i - 2][j - 2] + 1);
            }
            d[i][j] = v;
        }
    }
    d[n][m]
}

/// The candidate most like `name` (a missing file's last component), if one
/// is close: the same name in another case, or within 1 edit for names of
/// up to 5 bytes and 2 edits for longer ones; the part of `name` before a
/// ` #` counts as the name too. Ties go to the first. Pure.
pub fn similar<'c>(name: &[u8], candidates: &'c [Vec<u8>]) -> Option<&'c [u8]> {
    let before_hash = name
        .windows(2)
        .position(|w| w[1] == b'#' && matches!(w[0], b' ' | b'\t'))
        .map(|i| trim_end(&name[..i]));
    let limit = if name.len() <= 5 { 1 } else { 2 };
    let mut best: Option<(usize, &'c [u8])> = None;
    for c in candidates {
        if c.as_slice() == name {
            continue;
        }
        let d = if before_hash == Some(c.as_slice()) {
            0
        } else {
            distance(name, c)
        };
        if d <= limit && best.is_none_or(|(bd, _)| d < bd) {
            best = Some((d, c));
        }
    }
    best.map(|(_, c)| c)
}

fn trim_end(mut s: &[u8]) -> &[u8] {
    while let [rest @ .., b' ' | b'\t'] = s {
        s = rest;
    }
    s
}

/// Whether a list's lines may be shown with their text (the README's rule):
/// never for a list that is a symlink or is itself a denied file, never to
/// a caller inside a sandbox. Err(why) when not. Pure.
pub fn echo_allowed(symlink: bool, denied: bool, in_sandbox: bool) -> Result<(), &'static str> {
    if in_sandbox {
        Err("you are inside a sandbox")
    } else if symlink {
        Err("the list is a symbolic link")
    } else if denied {
        Err("the list is itself a denied file")
    } else {
        Ok(())
    }
}

/// Whether the text of /proc/self/cgroup places the process in a sandbox
/// (the cgroup v2 path is below `/agent-sandbox-exec/uid-<n>`); the uid's
/// sandbox path if so. Pure.
pub fn sandbox_of(proc_cgroup: &str) -> Option<&str> {
    let path = crate::os::procfs::v2_path_of(proc_cgroup)?;
    let rest = path.strip_prefix("/agent-sandbox-exec/")?;
    let dir = rest.split('/').next()?;
    crate::os::cgroup::parse_uid_dir(dir).map(|_| path)
}

/// One line of a list and what it amounts to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LineReport {
    /// 1-based line number.
    pub line: usize,
    /// The line's text (trimmed), for display when the echo rule allows.
    pub text: String,
    /// What it amounts to now.
    pub state: State,
    /// Why it looks like a mistake, if it does.
    pub mistakes: Vec<String>,
    /// Whether the line came from the base list (resolved as root by the
    /// daemon) and is absolute.
    pub as_root: bool,
    /// An audit entry: what it matches is reported, not denied.
    pub audit: bool,
    /// A read-only entry: readable, never changed from inside.
    pub readonly: bool,
    /// A directory entry (`DIR/`): every file below it.
    pub dir: bool,
    /// The whole path of a line that names one (`~/` joined to the home):
    /// None for a name pattern and the repository guard.
    pub path: Option<PathBuf>,
}

impl LineReport {
    /// The report of line `line` (shown as `text`) judged by name, live (a
    /// name pattern, the repository guard): no mistakes, nothing resolved.
    fn live(line: usize, text: String, state: State) -> LineReport {
        LineReport {
            line,
            text,
            state,
            mistakes: Vec::new(),
            as_root: false,
            audit: false,
            readonly: false,
            dir: false,
            path: None,
        }
    }
}

/// One list file and its lines.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListReport {
    /// The list file.
    pub path: PathBuf,
    /// Whether it is the administrator's base list.
    pub base: bool,
    /// The list does not exist.
    pub missing: bool,
    /// It could not be read (an error, exit [`EXIT_ERROR`]).
    pub error: Option<String>,
    /// Lines skipped by the parser (not absolute, NUL, too long...).
    pub parse_warnings: Vec<String>,
    /// The accepted lines.
    pub lines: Vec<LineReport>,
    /// Err(why) when the lines' text may not be shown ([`echo_allowed`]).
    pub echo: Result<(), &'static str>,
    /// For a file a list includes: the list and line that include it.
    pub included_from: Option<String>,
}

impl ListReport {
    fn empty(path: &Path, base: bool) -> ListReport {
        ListReport {
            path: path.to_path_buf(),
            base,
            missing: false,
            error: None,
            parse_warnings: Vec::new(),
            lines: Vec::new(),
            echo: Ok(()),
            included_from: None,
        }
    }
}

/// The exit status for `reports`: [`EXIT_ERROR`] if a list could not be
/// read, [`EXIT_PROBLEMS`] if a line is skipped, refuses, looks like a
/// mistake or was dropped by the parser, else [`EXIT_CLEAN`]. Pure.
pub fn exit_status(reports: &[ListReport]) -> u8 {
    if reports.iter().any(|r| r.error.is_some()) {
        return EXIT_ERROR;
    }
    let problem = reports.iter().any(|r| {
        !r.parse_warnings.is_empty()
            || r.lines.iter().any(|l| {
                !l.mistakes.is_empty() || matches!(l.state, State::Skipped(_) | State::Refuses(_))
            })
    });
    if problem { EXIT_PROBLEMS } else { EXIT_CLEAN }
}

/// Collects what the resolution of one path sends.
#[derive(Default)]
struct Found {
    files: Vec<FileKey>,
    names: usize,
}

impl ListingSink for Found {
    fn file(&mut self, key: FileKey) {
        self.files.push(key);
    }
    fn name(&mut self, _dir: FileKey, _name: &[u8]) {
        self.names += 1;
    }
}

/// A near name for the first missing component of `path`, as the full
/// path it would give, if the directory above it holds one.
fn near_name(path: &Path) -> Option<String> {
    let mut p = path.to_path_buf();
    // The deepest ancestor that exists and the component below it.
    let mut missing = None;
    while fs::symlink_metadata(&p).is_err() {
        missing = Some(p.file_name()?.to_os_string());
        if !p.pop() {
            return None;
        }
    }
    let missing = missing?;
    let names: Vec<Vec<u8>> = fs::read_dir(&p)
        .ok()?
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().as_bytes().to_vec())
        .collect();
    let hit = similar(missing.as_bytes(), &names)?;
    Some(p.join(OsStr::from_bytes(hit)).display().to_string())
}

/// Reads and resolves one list as the caller (the files it includes are
/// not followed: [`check_list_and_includes`]). `base`: the administrator's
/// list (a symlink in the last component is followed, absolute lines are
/// the daemon's to resolve as root). `home`: the caller's home directory.
/// `in_sandbox`: the caller is inside a sandbox (texts are not shown).
pub fn check_list(
    path: &Path,
    base: bool,
    home: &[u8],
    ctx: &mut KeyContext,
    in_sandbox: bool,
) -> ListReport {
    match read_list(path) {
        Ok(Some((bytes, _))) => check_bytes(path, &bytes, base, home, ctx, in_sandbox),
        Ok(None) => ListReport {
            missing: true,
            ..ListReport::empty(path, base)
        },
        Err(e) => ListReport {
            error: Some(e),
            ..ListReport::empty(path, base)
        },
    }
}

/// A list's bytes and identity (`st_dev`, `st_ino`); None when missing.
fn read_list(path: &Path) -> Result<Option<(Vec<u8>, include::FileId)>, String> {
    use std::os::unix::fs::MetadataExt;
    let cannot = |e: std::io::Error| format!("cannot read {}: {e}", path.display());
    let Some(f) = crate::resolve::list_file::open_list(path).map_err(cannot)? else {
        return Ok(None);
    };
    let md = f.metadata().map_err(cannot)?;
    let bytes = crate::resolve::list_file::read_all(&f).map_err(cannot)?;
    Ok(Some((bytes, (md.dev(), md.ino()))))
}

/// [`check_list`] of a list and then of each file it includes, read as the
/// daemon's resolvers read them (a base list's includes must be root's
/// alone, a user's the user's or root's: [`Trust`]): one report per file,
/// One report per file of `expanded` (a list and the files it includes,
/// checked as [`check_bytes`] does: `base`, `home`, `ctx`, `in_sandbox` as
/// there), each naming where it was included (`LIST:LINE`); the list
/// itself is named so by `top` (None: not at all).
fn file_reports(
    expanded: &include::Expanded,
    base: bool,
    home: &[u8],
    ctx: &mut KeyContext,
    in_sandbox: bool,
    top: Option<&str>,
) -> Vec<ListReport> {
    expanded
        .files
        .iter()
        .map(|f| {
            let p = Path::new(OsStr::from_bytes(&f.path));
            let mut r = check_bytes(p, &f.bytes, base, home, ctx, in_sandbox);
            r.included_from = match f.from {
                Some((i, line)) => Some(format!(
                    "{}:{line}",
                    String::from_utf8_lossy(&expanded.files[i].path)
                )),
                None => top.map(str::to_string),
            };
            r
        })
        .collect()
}

/// an include that included nothing a warning of the file that names it.
pub fn check_list_and_includes(
    path: &Path,
    base: bool,
    home: &[u8],
    ctx: &mut KeyContext,
    in_sandbox: bool,
) -> Vec<ListReport> {
    let (bytes, id) = match read_list(path) {
        Ok(Some(b)) => b,
        _ => return vec![check_list(path, base, home, ctx, in_sandbox)],
    };
    let trust = if base {
        Trust::Root
    } else {
        Trust::User(nix::unistd::getuid().as_raw())
    };
    let expanded = include::expand(
        path.as_os_str().as_bytes(),
        bytes,
        Some(id),
        (!base).then_some(home),
        &mut |p| read_include(Path::new(OsStr::from_bytes(p)), trust),
    );
    let mut reports = file_reports(&expanded, base, home, ctx, in_sandbox, None);
    for w in &expanded.warnings {
        // A file that may not be read refuses every launch, as the
        // resolvers do (resolver::Inputs::read); the rest are warnings.
        let problem = match &w.problem {
            include::IncludeProblem::Refused(why) => format!("refuses every launch: {why}"),
            p => p.to_string(),
        };
        let text = format!(
            "{}:{}: include {}: {problem}",
            reports[w.file].path.display(),
            w.line,
            String::from_utf8_lossy(&w.path),
        );
        reports[w.file].parse_warnings.push(text);
    }
    reports
}

/// [`check_list`] of a list's `bytes`, read from `path`.
fn check_bytes(
    path: &Path,
    bytes: &[u8],
    base: bool,
    home: &[u8],
    ctx: &mut KeyContext,
    in_sandbox: bool,
) -> ListReport {
    let mut report = ListReport::empty(path, base);
    let catalogue = path.parent() == Some(Path::new(CATALOG_DIR));
    let symlink = fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink());
    let parsed = denylist::parse(bytes);
    for w in &parsed.warnings {
        report
            .parse_warnings
            .push(format!("{}:{}: {}", path.display(), w.line, w.kind));
    }
    let last = if base {
        LastComponent::Follow
    } else {
        LastComponent::NoFollow
    };
    let mut denied_keys = Vec::new();
    let mut joined = Vec::new();
    for e in &parsed.entries {
        if e.repo_guard {
            report.lines.push(LineReport::live(
                e.line,
                String::from_utf8_lossy(denylist::REPO_GUARD_LINE).into_owned(),
                State::RepoGuard,
            ));
            continue;
        }
        if let Some(p) = &e.pattern {
            let mut text = match e.anchor {
                Anchor::Anywhere => [&b"**/"[..], e.path].concat(),
                Anchor::Home => [&b"~/"[..], e.path].concat(),
                Anchor::Root => e.path.to_vec(),
            };
            let (dir, deep) = match e.anchor {
                Anchor::Anywhere => (home.to_vec(), true),
                Anchor::Home => {
                    denylist::join_home_into(&mut joined, home, e.path);
                    (scope_dir(&joined).to_vec(), e.deep)
                }
                Anchor::Root => (scope_dir(e.path).to_vec(), e.deep),
            };
            let state = if e.exception {
                State::Exception
            } else {
                match pattern_now(p, Path::new(OsStr::from_bytes(&dir)), deep) {
                    Some(now) => State::Pattern(now),
                    None if catalogue => State::Absent,
                    None => State::Skipped(format!(
                        "its directory {} cannot be read or does not exist",
                        String::from_utf8_lossy(&dir)
                    )),
                }
            };
            if e.exception {
                text.insert(0, b'!');
            }
            report.lines.push(LineReport::live(
                e.line,
                crate::proto::request::one_line(&String::from_utf8_lossy(&text)),
                state,
            ));
            continue;
        }
        let (full, text) = match e.anchor {
            Anchor::Anywhere => continue,
            Anchor::Root => (e.path, e.path.to_vec()),
            Anchor::Home => {
                denylist::join_home_into(&mut joined, home, e.path);
                let mut t = b"~/".to_vec();
                t.extend_from_slice(e.path);
                (joined.as_slice(), t)
            }
        };
        let full = Path::new(OsStr::from_bytes(full));
        let mut text = text;
        if e.dir {
            text.push(b'/');
        }
        if e.exception {
            text.insert(0, b'!');
        }
        let mut found = Found::default();
        // A read-only line follows a symlink at its end, as the daemon does.
        let last = if e.readonly {
            LastComponent::Follow
        } else {
            last
        };
        let (mut state, missing_dir, result) = if e.exception {
            (State::Exception, false, None)
        } else if e.dir {
            let (state, missing) = dir_state(full, base);
            (state, missing, None)
        } else {
            let result = ctx.resolve(full, last, &mut found, &mut NoWitness);
            let missing = matches!(result, Err(KeyError::Missing));
            (
                state_of(&result, !found.files.is_empty(), base),
                missing,
                Some(result),
            )
        };
        // A read-only line whose directories are missing is guarded at the
        // first missing part (resolver::guard_missing): watched, not skipped.
        if e.readonly && missing_dir {
            state = State::Watched;
        } else if catalogue && missing_dir {
            state = State::Absent;
        }
        if state == State::Denied && !e.audit && !e.readonly {
            denied_keys.extend(found.files.iter().copied());
        }
        let mut mistakes = Vec::new();
        // The catalogue's lines are the package's, not the user's to fix.
        if !catalogue && !matches!(state, State::Denied | State::Exception) {
            mistakes = lint(&text);
            if matches!(result, Some(Err(KeyError::NotRegular(FileKind::Directory)))) {
                mistakes.push("a line names a file, never a directory".into());
            }
            if let Some(near) = near_name(full) {
                mistakes.push(format!(
                    "did you mean {near}? (a similar name exists there)"
                ));
            }
        }
        report.lines.push(LineReport {
            line: e.line,
            text: crate::proto::request::one_line(&String::from_utf8_lossy(&text)),
            state,
            mistakes,
            as_root: base && e.anchor == Anchor::Root,
            audit: e.audit,
            readonly: e.readonly,
            dir: e.dir,
            path: Some(full.to_path_buf()),
        });
    }
    // Is the list itself one of the files it denies (a link an agent made)?
    let mut me = Found::default();
    let denied = ctx
        .resolve(path, LastComponent::Follow, &mut me, &mut NoWitness)
        .is_ok_and(|_| me.files.iter().any(|k| denied_keys.contains(k)));
    report.echo = echo_allowed(symlink, denied, in_sandbox);
    report
}

/// What a line's state means for its kind: an audit line's file "would be
/// denied (audit: reported, allowed)", a read-only line's is "read-only".
fn line_label(l: &LineReport) -> String {
    let label = match (&l.state, l.audit, l.readonly) {
        (State::Denied, true, _) => "would be denied (audit: opens reported, allowed)".into(),
        (State::Denied, _, true) => "read-only (readable, not changed from inside)".into(),
        (State::Watched, true, _) => {
            "watched by name (audit: opens reported once it appears)".into()
        }
        (State::Watched, _, true) => {
            "watched by name (missing now; read-only as soon as it appears)".into()
        }
        (state, true, _) => format!("audit: {}", state.label()),
        (state, _, true) => format!("read-only: {}", state.label()),
        (state, false, false) => state.label(),
    };
    match (&l.state, l.dir) {
        (State::Denied | State::Watched, true) => {
            format!("{label}; a directory entry: every file below it, now and later")
        }
        _ => label,
    }
}

/// Renders reports as the lines `--check` prints (and `--status -v`).
pub fn render(reports: &[ListReport]) -> String {
    let mut out = String::new();
    let mut counts = [0usize; 7];
    let (mut read_only, mut audit) = (0usize, 0usize);
    let mut mistakes = 0;
    for r in reports {
        let shown = r.path.display();
        if r.missing {
            let _ = writeln!(out, "{shown}: does not exist (nothing listed there)");
            continue;
        }
        if let Some(e) = &r.error {
            let _ = writeln!(out, "{shown}: error: {e}");
            continue;
        }
        if let Some(from) = &r.included_from {
            let _ = writeln!(
                out,
                "{shown}: included by {from}; its lines count as that list's"
            );
        }
        if let Err(why) = r.echo {
            let _ = writeln!(out, "{shown}: lines named by number only ({why})");
        }
        for w in &r.parse_warnings {
            let _ = writeln!(out, "{w}");
        }
        for l in &r.lines {
            let text = match r.echo {
                Ok(()) => format!(": {}", l.text),
                Err(_) => String::new(),
            };
            let _ = writeln!(out, "{shown}:{}: {}{text}", l.line, line_label(l));
            for m in &l.mistakes {
                let _ = writeln!(out, "{shown}:{}: mistake? {m}", l.line);
            }
            mistakes += usize::from(!l.mistakes.is_empty());
            let in_force = matches!(l.state, State::Denied | State::Watched);
            read_only += usize::from(in_force && l.readonly);
            audit += usize::from(in_force && l.audit);
            counts[match l.state {
                State::Denied => 0,
                State::Watched => 1,
                State::Skipped(_) => 2,
                State::Refuses(_) => 3,
                State::Exception => 4,
                State::Absent => 5,
                State::Pattern(_) | State::RepoGuard => 6,
            }] += 1;
        }
        if r.lines.iter().any(|l| l.as_root) {
            let _ = writeln!(
                out,
                "{shown}: note: its absolute lines were resolved as you; the daemon resolves them \
                 as root, so where you cannot read a directory the result may differ"
            );
        }
    }
    let kinds = if read_only + audit > 0 {
        format!(" (of them {read_only} read-only, {audit} audit)")
    } else {
        String::new()
    };
    let _ = writeln!(
        out,
        "summary: {} denied, {} watched by name{kinds}, {} name pattern(s), {} exception(s), {} \
         not on this machine, {} skipped, {} refusing every launch; {mistakes} line(s) look like \
         mistakes",
        counts[0], counts[1], counts[6], counts[4], counts[5], counts[2], counts[3]
    );
    out
}

/// The caller's home directory from the passwd entry.
///
/// # Errors
/// A text naming the problem.
pub fn own_home() -> Result<Vec<u8>, String> {
    let uid = nix::unistd::getuid();
    match nix::unistd::User::from_uid(uid) {
        Ok(Some(u)) => Ok(u.dir.as_os_str().as_bytes().to_vec()),
        Ok(None) => Err(format!("uid {uid} has no passwd entry")),
        Err(e) => Err(format!("cannot read the passwd entry of uid {uid}: {e}")),
    }
}

/// Whether this process is in a sandbox: its cgroup path if so.
pub fn own_sandbox() -> Option<String> {
    let text = crate::os::procfs::read_pseudo_text("/proc/self/cgroup").ok()?;
    sandbox_of(&text).map(str::to_owned)
}

/// Whether `path` is `dir` or below it, by name or, where both exist, by
/// what they resolve to (a directory entry written through a symlink).
fn at_or_below(path: &Path, dir: &Path) -> bool {
    if path.starts_with(dir) {
        return true;
    }
    match (fs::canonicalize(path), fs::canonicalize(dir)) {
        (Ok(p), Ok(d)) => p.starts_with(d),
        _ => false,
    }
}

/// Marks as mistakes the exceptions of `reports` that can never take effect
/// (README, "Exceptions": an exception re-allows only what a directory entry
/// of the same list denies, and a file that a file line also names stays
/// denied): a `!PATH` with no directory entry of its list at or above it,
/// and one whose path a file line of its list names. The lists are the
/// base list with its includes, and the user's list with its includes and
/// the shipped defaults; a name pattern's exception is not judged (it
/// excepts what the list's patterns match), nor are the catalogue's own
/// lines (the package's, not the user's to fix).
pub fn mark_idle_exceptions(reports: &mut [ListReport]) {
    for base in [true, false] {
        let lines = |want_dir: bool| -> Vec<PathBuf> {
            reports
                .iter()
                .filter(|r| r.base == base)
                .flat_map(|r| &r.lines)
                .filter(|l| l.dir == want_dir && l.state != State::Exception)
                .filter_map(|l| l.path.clone())
                .collect()
        };
        let (dirs, files) = (lines(true), lines(false));
        for r in reports.iter_mut().filter(|r| r.base == base) {
            if r.path.parent() == Some(Path::new(CATALOG_DIR)) {
                continue;
            }
            for l in r.lines.iter_mut().filter(|l| l.state == State::Exception) {
                let Some(p) = &l.path else { continue };
                if files.iter().any(|f| f == p) {
                    l.mistakes.push(
                        "it excepts nothing: a file line of this list names the same file, and a \
                         file line is never excepted"
                            .into(),
                    );
                } else if !dirs.iter().any(|d| at_or_below(p, d)) {
                    l.mistakes.push(
                        "it excepts nothing: no directory entry of this list (its includes and, \
                         for yours, the shipped defaults count) is at or above it; an exception \
                         re-allows only what such an entry denies"
                            .into(),
                    );
                }
            }
        }
    }
}

/// Checks `lists` (or, if None, the base list and the caller's home list)
/// and returns the reports.
///
/// # Errors
/// A text when the home directory or the mount table cannot be read.
pub fn check_lists(paths: &Paths, list: Option<&Path>) -> Result<Vec<ListReport>, String> {
    let home = own_home()?;
    let mut ctx =
        KeyContext::new().map_err(|e| format!("cannot read /proc/self/mountinfo: {e}"))?;
    let in_sandbox = own_sandbox().is_some();
    let home_list = PathBuf::from(OsStr::from_bytes(&denylist::join_home(
        &home,
        HOME_LIST.as_bytes(),
    )));
    let lists: Vec<(PathBuf, bool)> = match list {
        Some(p) => vec![(p.to_path_buf(), p == paths.base_list)],
        None => vec![(paths.base_list.clone(), true), (home_list.clone(), false)],
    };
    let mut reports: Vec<ListReport> = lists
        .iter()
        .flat_map(|(p, base)| check_list_and_includes(p, *base, &home, &mut ctx, in_sandbox))
        .collect();
    if list.is_none() {
        reports.extend(check_defaults(&home_list, &home, &mut ctx, in_sandbox));
    }
    mark_idle_exceptions(&mut reports);
    Ok(reports)
}

/// The shipped defaults ([`DEFAULTS_LIST`]) as the user's resolver reads
/// them: less what the user's list at `home_list` turns off, each file a
/// report whose lines count as the user's list's.
fn check_defaults(
    home_list: &Path,
    home: &[u8],
    ctx: &mut KeyContext,
    in_sandbox: bool,
) -> Vec<ListReport> {
    let uid = nix::unistd::getuid().as_raw();
    let off = match read_list(home_list) {
        Ok(Some((bytes, id))) => include::expand(
            home_list.as_os_str().as_bytes(),
            bytes,
            Some(id),
            Some(home),
            &mut |p| read_include(Path::new(OsStr::from_bytes(p)), Trust::User(uid)),
        )
        .defaults_off(),
        _ => None,
    };
    let path = Path::new(DEFAULTS_LIST);
    match read_defaults(path, off.as_deref()) {
        Ok(Defaults {
            list: Some(e),
            unknown_off,
        }) => {
            let top = "the shipped defaults, with which every user's list starts \
                       (`defaults off [GROUP...]` in your list turns them off)";
            let mut reports = file_reports(&e, false, home, ctx, in_sandbox, Some(top));
            // A `defaults off` name that names no group: said with the defaults.
            if let Some(first) = reports.first_mut() {
                for g in &unknown_off {
                    first
                        .parse_warnings
                        .push(format!("your list: {}", unknown_group_warning(g, Some(&e))));
                }
            }
            reports
        }
        Ok(Defaults { list: None, .. }) => Vec::new(),
        Err((at, why)) => {
            let mut r = ListReport::empty(path, false);
            r.parse_warnings
                .push(format!("{at}: refuses every launch: {why}"));
            vec![r]
        }
    }
}

/// `agent-sandbox-exec --check [LIST]`; returns the exit status.
pub fn main(paths: &Paths, list: Option<&Path>) -> u8 {
    match check_lists(paths, list) {
        Ok(reports) => {
            print!("{}", render(&reports));
            exit_status(&reports)
        }
        Err(e) => {
            eprintln!("agent-sandbox-exec: --check: {e}");
            EXIT_ERROR
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io;

    /// A fixture tree in a fresh temporary directory, removed on drop.
    struct Tree(PathBuf);
    impl Tree {
        fn new(tag: &str) -> Tree {
            let d = std::env::temp_dir().join(format!("asx-check-{tag}-{}", std::process::id()));
            let _ = fs::remove_dir_all(&d);
            fs::create_dir_all(&d).unwrap();
            Tree(d)
        }
        fn p(&self, rel: &str) -> PathBuf {
            self.0.join(rel)
        }
    }
    impl Drop for Tree {
        fn drop(&mut self) {
            let _ = fs::remove_dir_all(&self.0);
        }
    }

    #[test]
    fn states_of_resolutions() {
        assert_eq!(state_of(&Ok(None), true, false), State::Denied);
        assert_eq!(state_of(&Ok(None), false, false), State::Watched);
        assert!(matches!(
            state_of(&Ok(Some("why".into())), false, false),
            State::Skipped(w) if w.contains("why")
        ));
        assert!(matches!(
            state_of(&Err(KeyError::Missing), false, false),
            State::Skipped(w) if w.contains("directory does not exist")
        ));
        let dir = Err(KeyError::NotRegular(FileKind::Directory));
        assert!(
            matches!(state_of(&dir, false, false), State::Skipped(w) if w.contains("directory"))
        );
        let eacces = || Err(KeyError::Stat(io::Error::from_raw_os_error(libc::EACCES)));
        assert!(matches!(
            state_of(&eacces(), false, false),
            State::Refuses(_)
        ));
        // A base-list line the user cannot check is the daemon's to resolve.
        assert!(matches!(
            state_of(&eacces(), false, true),
            State::Skipped(w) if w.contains("as root")
        ));
    }

    #[test]
    fn lints() {
        assert!(lint(b"/etc/shadow").is_empty());
        let l = lint(b"/etc/shadow # the passwords");
        assert_eq!(l.len(), 1);
        assert!(l[0].contains("no trailing comments"));
        let l = lint(b"~/.ssh/[x]");
        assert_eq!(l.len(), 1);
        assert!(l[0].contains("taken literally"));
        assert_eq!(lint(b"/a/[x]#").len(), 2);
    }

    #[test]
    fn near_names() {
        assert_eq!(distance(b"credentials", b"credentials"), 0);
        assert_eq!(distance(b"credentails", b"credentials"), 1, "transposition");
        assert_eq!(distance(b"ID_RSA", b"id_rsa"), 0, "case");
        assert_eq!(distance(b"abc", b""), 3);
        let c = |v: &[&str]| v.iter().map(|s| s.as_bytes().to_vec()).collect::<Vec<_>>();
        let names = c(&["credentials", "config", "id_rsa", "shadow"]);
        assert_eq!(similar(b"credentails", &names), Some(&b"credentials"[..]));
        assert_eq!(similar(b"id_rsb", &names), Some(&b"id_rsa"[..]));
        assert_eq!(similar(b"shadow # comment", &names), Some(&b"shadow"[..]));
        assert_eq!(similar(b"nothing-like", &names), None);
        // Short names get one edit only.
        assert_eq!(similar(b"cnfg", &c(&["conf"])), None);
        assert_eq!(similar(b"conf", &c(&["cong"])), Some(&b"cong"[..]));
        // The name itself is no suggestion.
        assert_eq!(similar(b"shadow", &names), None);
    }

    #[test]
    fn audit_and_read_only_labels() {
        let l = |state: State, audit, readonly| LineReport {
            line: 1,
            text: String::new(),
            state,
            mistakes: vec![],
            as_root: false,
            audit,
            readonly,
            dir: false,
            path: None,
        };
        assert_eq!(line_label(&l(State::Denied, false, false)), "denied");
        assert!(line_label(&l(State::Denied, true, false)).starts_with("would be denied (audit"));
        assert!(line_label(&l(State::Denied, false, true)).starts_with("read-only (readable"));
        assert!(line_label(&l(State::Watched, false, true)).contains("read-only as soon as"));
        assert!(
            line_label(&l(State::Skipped("x".into()), true, false)).starts_with("audit: skipped")
        );
    }

    #[test]
    fn echo_rule() {
        assert_eq!(echo_allowed(false, false, false), Ok(()));
        assert!(echo_allowed(true, false, false).is_err());
        assert!(echo_allowed(false, true, false).is_err());
        assert!(echo_allowed(false, false, true).is_err());
        assert_eq!(
            sandbox_of("0::/agent-sandbox-exec/uid-1000\n"),
            Some("/agent-sandbox-exec/uid-1000")
        );
        assert_eq!(
            sandbox_of("0::/agent-sandbox-exec/uid-1000/sub\n"),
            Some("/agent-sandbox-exec/uid-1000/sub")
        );
        assert_eq!(sandbox_of("0::/user.slice/user-1000.slice\n"), None);
        assert_eq!(sandbox_of("0::/agent-sandbox-exec/other\n"), None);
        assert_eq!(sandbox_of("1:name=systemd:/\n"), None);
    }

    fn run(t: &Tree, list: &str, base: bool) -> ListReport {
        fs::write(t.p("list"), list).unwrap();
        let home = t.0.as_os_str().as_bytes().to_vec();
        let mut ctx = KeyContext::new().unwrap();
        check_list(&t.p("list"), base, &home, &mut ctx, false)
    }

    #[test]
    fn an_included_file_is_checked_as_part_of_its_list() {
        use std::os::unix::fs::PermissionsExt;
        let t = Tree::new("include");
        fs::write(t.p("secret"), "k").unwrap();
        let inc = t.p("more.list");
        fs::write(
            &inc,
            format!(
                "{}\ninclude {}\n",
                t.p("secret").display(),
                t.p("list").display()
            ),
        )
        .unwrap();
        fs::set_permissions(&inc, fs::Permissions::from_mode(0o644)).unwrap();
        let list = t.p("list");
        fs::write(
            &list,
            format!(
                "include {}\ninclude {}/gone\n",
                inc.display(),
                t.0.display()
            ),
        )
        .unwrap();
        fs::set_permissions(&list, fs::Permissions::from_mode(0o644)).unwrap();
        let home = t.0.as_os_str().as_bytes().to_vec();
        let mut ctx = KeyContext::new().unwrap();
        let reports = check_list_and_includes(&list, false, &home, &mut ctx, false);
        assert_eq!(reports.len(), 2, "{reports:?}");
        assert_eq!(reports[1].path, inc);
        assert_eq!(
            reports[1].included_from,
            Some(format!("{}:1", list.display()))
        );
        assert_eq!(reports[1].lines.len(), 1);
        assert_eq!(reports[1].lines[0].state, State::Denied);
        // The missing include is a warning of the list; the cycle back to
        // the list one of the included file.
        assert!(
            reports[0]
                .parse_warnings
                .iter()
                .any(|w| w.contains("gone: the file does not exist")),
            "{:?}",
            reports[0]
        );
        assert!(
            reports[1]
                .parse_warnings
                .iter()
                .any(|w| w.contains("an include cycle")),
            "{:?}",
            reports[1]
        );
        let text = render(&reports);
        assert!(
            text.contains(&format!(
                "{}: included by {}:1",
                inc.display(),
                list.display()
            )),
            "{text}"
        );
        assert!(text.contains("summary: 1 denied"), "{text}");
    }

    #[test]
    fn directory_entries_exceptions_and_the_catalogue_s_absent_lines() {
        let t = Tree::new("dirs");
        fs::create_dir_all(t.p(".ssh")).unwrap();
        fs::write(t.p(".ssh/known_hosts"), "h").unwrap();
        let list = "~/.ssh/\n!~/.ssh/known_hosts\n~/.gnupg/\n~/.nodir/sub/\n~/.ssh/known_hosts/\n";
        let r = run(&t, list, false);
        let by_line = |n: usize| r.lines.iter().find(|l| l.line == n).unwrap();
        assert_eq!(by_line(1).state, State::Denied);
        assert_eq!(by_line(1).text, "~/.ssh/");
        assert!(line_label(by_line(1)).contains("every file below it"));
        assert_eq!(by_line(2).state, State::Exception);
        assert_eq!(by_line(2).text, "!~/.ssh/known_hosts");
        assert_eq!(
            by_line(3).state,
            State::Watched,
            "missing, in a directory that exists"
        );
        assert!(matches!(&by_line(4).state, State::Skipped(w) if w.contains("does not exist")));
        assert!(matches!(&by_line(5).state, State::Skipped(w) if w.contains("not a directory")));
        let text = render(std::slice::from_ref(&r));
        assert!(
            text.contains("1 denied, 1 watched by name, 0 name pattern(s), 1 exception(s)"),
            "{text}"
        );
        // The same missing line in a catalogue file is no mistake.
        let home = t.0.as_os_str().as_bytes().to_vec();
        let mut ctx = KeyContext::new().unwrap();
        let cat = Path::new(CATALOG_DIR).join("cloud");
        let r = check_bytes(
            &cat,
            b"~/.nodir/sub/\n~/.nodir/credentials\n",
            false,
            &home,
            &mut ctx,
            false,
        );
        assert!(
            r.lines
                .iter()
                .all(|l| l.state == State::Absent && l.mistakes.is_empty()),
            "{r:?}"
        );
        assert_eq!(exit_status(std::slice::from_ref(&r)), EXIT_CLEAN);
    }

    #[test]
    fn exceptions_that_can_never_take_effect_are_mistakes() {
        let t = Tree::new("idle-exc");
        fs::create_dir_all(t.p(".ssh")).unwrap();
        fs::create_dir_all(t.p("app")).unwrap();
        fs::create_dir_all(t.p("real/sub")).unwrap();
        std::os::unix::fs::symlink(t.p("real"), t.p("link")).unwrap();
        for f in [".ssh/config", ".npmrc", "app/.env", "real/sub/f"] {
            fs::write(t.p(f), "x").unwrap();
        }
        let list = "~/.ssh/\n!~/.ssh/config\n~/.npmrc\n!~/.npmrc\n**/.env\n!~/app/.env\n\
                    !**/.env.example\n~/link/\n!~/real/sub/f\n";
        let mut r = run(&t, list, false);
        mark_idle_exceptions(std::slice::from_mut(&mut r));
        let idle = |line: usize| {
            let l = r.lines.iter().find(|l| l.line == line).unwrap();
            l.mistakes
                .iter()
                .any(|m| m.starts_with("it excepts nothing"))
        };
        assert!(!idle(2), "below a directory entry: {r:?}");
        assert!(idle(4), "a file line names it: {r:?}");
        assert!(
            r.lines[3].mistakes[0].contains("file line"),
            "{:?}",
            r.lines[3]
        );
        assert!(idle(6), "a plain exception under a name pattern: {r:?}");
        assert!(!idle(7), "a pattern's exception is not judged: {r:?}");
        assert!(!idle(9), "below the entry through its symlink: {r:?}");
        assert_eq!(exit_status(std::slice::from_ref(&r)), EXIT_PROBLEMS);
        // The base list's directory entries do not make a user's exception work.
        let mut base = run(&t, "~/app/\n", true);
        let mut user = run(&t, "!~/app/.env\n", false);
        user.path = t.p("user.list");
        let mut both = vec![base.clone(), user.clone()];
        mark_idle_exceptions(&mut both);
        assert!(!both[1].lines[0].mistakes.is_empty(), "{both:?}");
        // ...while the user's own includes and the defaults count (every report not base).
        base.base = false;
        let mut both = vec![base, user];
        mark_idle_exceptions(&mut both);
        assert!(both[1].lines[0].mistakes.is_empty(), "{both:?}");
    }

    #[test]
    fn fixture_tree() {
        let t = Tree::new("tree");
        fs::create_dir_all(t.p(".ssh")).unwrap();
        fs::create_dir_all(t.p(".aws")).unwrap();
        fs::write(t.p(".ssh/id_ed25519"), "k").unwrap();
        fs::write(t.p(".aws/credentials"), "k").unwrap();
        fs::write(t.p("shadow"), "k").unwrap();
        let list = format!(
            "# comment\n\
             ~/.ssh/id_ed25519\n\
             ~/.ssh/id_rsa\n\
             ~/.aws/credentails\n\
             {shadow} # the passwords\n\
             ~/.ssh/id_*\n\
             ~/.ssh\n\
             ~/.nodir/file\n\
             relative\n",
            shadow = t.p("shadow").display()
        );
        let r = run(&t, &list, false);
        assert_eq!(r.error, None);
        assert_eq!(r.echo, Ok(()));
        assert_eq!(r.parse_warnings.len(), 1, "the relative line");
        let by_line = |n: usize| r.lines.iter().find(|l| l.line == n).unwrap();
        assert_eq!(by_line(2).state, State::Denied);
        assert!(by_line(2).mistakes.is_empty());
        assert_eq!(by_line(2).text, "~/.ssh/id_ed25519");
        assert_eq!(by_line(3).state, State::Watched);
        assert!(by_line(3).mistakes.is_empty(), "{:?}", by_line(3));
        let typo = by_line(4);
        assert_eq!(typo.state, State::Watched);
        assert!(
            typo.mistakes
                .iter()
                .any(|m| m.contains(".aws/credentials?")),
            "{typo:?}"
        );
        let hash = by_line(5);
        assert_eq!(hash.state, State::Watched);
        assert!(
            hash.mistakes
                .iter()
                .any(|m| m.contains("trailing comments"))
        );
        assert!(
            hash.mistakes.iter().any(|m| m.contains("/shadow?")),
            "{hash:?}"
        );
        let glob = by_line(6);
        assert!(
            matches!(&glob.state, State::Pattern(now) if now.contains("1 file(s) match now")),
            "{glob:?}"
        );
        assert!(line_label(glob).contains("name pattern, live"));
        let dir = by_line(7);
        assert!(matches!(dir.state, State::Skipped(_)));
        assert!(dir.mistakes.iter().any(|m| m.contains("never a directory")));
        assert!(matches!(by_line(8).state, State::Skipped(_)));
        assert_eq!(exit_status(std::slice::from_ref(&r)), EXIT_PROBLEMS);
        let text = render(std::slice::from_ref(&r));
        assert!(text.contains(":2: denied: ~/.ssh/id_ed25519"), "{text}");
        assert!(
            text.contains(
                "summary: 1 denied, 3 watched by name, 1 name pattern(s), 0 exception(s), 0 not on \
                 this machine, 2 skipped"
            ),
            "{text}"
        );
    }

    #[test]
    fn clean_list_exits_zero_and_base_note() {
        let t = Tree::new("clean");
        fs::write(t.p("secret"), "k").unwrap();
        let r = run(
            &t,
            &format!("{}\n~/absent\n", t.p("secret").display()),
            true,
        );
        assert_eq!(exit_status(std::slice::from_ref(&r)), EXIT_CLEAN, "{r:?}");
        assert!(r.lines[0].as_root);
        assert!(!r.lines[1].as_root);
        assert!(render(&[r]).contains("resolved as you; the daemon resolves them as root"));
    }

    #[test]
    fn read_only_lines_follow_a_symlink_and_are_guarded_when_missing() {
        let t = Tree::new("ro");
        fs::write(t.p("target"), "x").unwrap();
        std::os::unix::fs::symlink(t.p("target"), t.p("rc")).unwrap();
        let r = run(
            &t,
            &format!(
                "readonly {}\nreadonly {}\n{}\n",
                t.p("rc").display(),
                t.p("gone/x.desktop").display(),
                t.p("gone/y").display()
            ),
            false,
        );
        assert_eq!(r.lines[0].state, State::Denied, "the link's target: {r:?}");
        assert_eq!(r.lines[1].state, State::Watched, "guarded: {r:?}");
        assert!(
            matches!(r.lines[2].state, State::Skipped(_)),
            "a read line: {r:?}"
        );
    }

    #[test]
    fn a_list_that_is_a_link_to_a_listed_file_is_not_echoed() {
        let t = Tree::new("link");
        fs::write(t.p("secret"), format!("{}\n", t.p("secret").display())).unwrap();
        let home = t.0.as_os_str().as_bytes().to_vec();
        let mut ctx = KeyContext::new().unwrap();
        // The list is the listed file itself (a hardlink would look the same).
        let r = check_list(&t.p("secret"), false, &home, &mut ctx, false);
        assert_eq!(r.lines[0].state, State::Denied);
        assert_eq!(r.echo, Err("the list is itself a denied file"));
        let text = render(std::slice::from_ref(&r));
        assert!(text.contains("by number only"), "{text}");
        assert!(!text.contains(":1: denied: "), "{text}");
        assert!(text.contains(":1: denied\n"), "{text}");
        // A symlink as the list: not echoed either.
        std::os::unix::fs::symlink(t.p("secret"), t.p("lnk")).unwrap();
        let r = check_list(&t.p("lnk"), false, &home, &mut ctx, false);
        assert_eq!(r.echo, Err("the list is a symbolic link"));
        // Inside a sandbox: never.
        fs::write(t.p("plain"), "~/x\n").unwrap();
        let r = check_list(&t.p("plain"), false, &home, &mut ctx, true);
        assert_eq!(r.echo, Err("you are inside a sandbox"));
        assert!(!render(&[r]).contains("~/x"));
    }

    #[test]
    fn missing_and_unreadable_lists() {
        let t = Tree::new("missing");
        let home = t.0.as_os_str().as_bytes().to_vec();
        let mut ctx = KeyContext::new().unwrap();
        let r = check_list(&t.p("none"), false, &home, &mut ctx, false);
        assert!(r.missing);
        assert_eq!(exit_status(std::slice::from_ref(&r)), EXIT_CLEAN);
        let r = check_list(&t.0, false, &home, &mut ctx, false);
        assert!(r.error.is_some(), "a directory as the list");
        assert_eq!(exit_status(&[r]), EXIT_ERROR);
    }
}
