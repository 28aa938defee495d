//! Denylist parsing: bytes in, entries and per-line warnings out. Pure; no I/O.
//!
//! Format (also in `scripts/denylist.example` and agent-sandbox-exec-denylist(5)):
//! - The file is split on `\n`. Each line is a byte string: a non-UTF-8 line is a
//!   valid path like any other and never spoils the lines around it.
//! - Leading and trailing ASCII whitespace (space, tab, CR, vertical tab, form
//!   feed) is removed, so CRLF files work. A path that itself begins or ends with
//!   whitespace cannot be listed.
//! - Empty lines and lines whose first non-blank byte is `#` are ignored. There
//!   are no trailing comments: `#` inside a path is part of the path.
//! - Every other line is one path: absolute (`/...`), or `~/...` for a path in
//!   the requesting user's home directory. Anything else is a warning.
//! - A path may hold no NUL byte and at most [`PATH_MAX`] bytes.
//! - `socket ARG` (the word `socket`, blanks, then `$NAME`, `${NAME}` or an
//!   absolute path) allows a sandbox to reach the bound Unix socket there
//!   although a process of the same uid made it outside (ssh-agent:
//!   `socket $SSH_AUTH_SOCK`). The launcher resolves it, with its own
//!   environment, at a launch from outside a sandbox; it is not a path to
//!   deny. It does not clash with `DIR/` or `!PATH` lines.
//! - `socket tcp:PORT` and `socket udp:PORT` (PORT in 1..=65535) allow a
//!   sandbox to reach a server of the same uid made outside on that loopback
//!   port (a local model server: `socket tcp:11434`); like other `socket`
//!   lines, only a launch from outside applies them.
//! - A path ending in `/` is a *directory entry* ([`Entry::dir`]): every
//!   regular file below that directory, at any depth, now or later. One that
//!   would cover `/`, a top-level directory (`/etc/`, `/home/`, ...) or the
//!   whole home (`~/`) is refused ([`LineProblem::TooBroad`]); so is one with a
//!   `.` or `..` component ([`LineProblem::DotComponent`]).
//! - A line starting with `!` is an *exception* ([`Entry::exception`]): `!PATH`
//!   or `!DIR/` re-allows what a directory entry of the same list denies
//!   (precedence: [`decide`]).
//! - `audit PATH` and `audit DIR/` (the word `audit`, blanks, then an entry)
//!   are *audit entries* ([`Entry::audit`], shadow mode): an open they would
//!   deny is allowed and reported as "would deny". A line `audit all` makes
//!   every entry of its list an audit entry (exceptions stay exceptions).
//!   An enforced entry of either list that matches the same open decides:
//!   deny beats audit, so an audit line never weakens another line.
//! - `readonly PATH` and `readonly DIR/` are *read-only entries*
//!   ([`Entry::readonly`]): a sandbox may read the file (or what is below the
//!   directory) but not change it: no write-open, truncate, attribute change,
//!   new name, removal or rename there. The same list's exceptions apply to
//!   read-only directory entries (`!PATH` re-allows reading and writing).
//!   `audit all` leaves read-only entries enforced.
//! - `include PATH` (the word `include`, blanks, then an absolute or `~/`
//!   path) reads another list file as part of this one: its entries,
//!   exceptions and `socket` lines count as this list's
//!   ([`crate::lists::include`] expands them, bounds the depth and refuses
//!   cycles). `audit all` in a file covers that file's own lines only.

use std::fmt;

use crate::lists::pattern::{self, NamePattern, PatternProblem};

/// Longest accepted path in bytes, NUL excluded (`PATH_MAX` is 4096 with the NUL,
/// include/uapi/linux/limits.h).
pub const PATH_MAX: usize = 4095;

/// Where a listed path is anchored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Anchor {
    /// An absolute path, as written.
    Root,
    /// `~/rest`: relative to the requesting user's home directory; holds `rest`.
    Home,
    /// `**/NAME`: a name pattern in every directory; holds `NAME`.
    Anywhere,
}

/// One accepted line of a list, borrowing its path from the list's bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry<'a> {
    /// 1-based line number in the list file.
    pub line: usize,
    /// How `path` is anchored.
    pub anchor: Anchor,
    /// For [`Anchor::Root`] the absolute path (starts with `/`); for
    /// [`Anchor::Home`] the part after `~/` (may be empty only if the line was `~/`,
    /// which is rejected).
    pub path: &'a [u8],
    /// The line ended in `/`: a directory entry (or, with `exception`, a
    /// directory exception). `path` holds no trailing `/` (except `/` itself,
    /// which is refused).
    pub dir: bool,
    /// The line started with `!`: an exception to the same list's directory
    /// entries.
    pub exception: bool,
    /// An audit entry: the line started with `audit`, or the list has an
    /// `audit all` line. Never set on an exception or a read-only entry.
    pub audit: bool,
    /// A read-only entry: the line started with `readonly`.
    pub readonly: bool,
    /// A name pattern ([`crate::lists::pattern`]): the last component holds
    /// `*`, `?` or `\`; `path` is then the line's path as written (for
    /// [`Anchor::Anywhere`], the name pattern alone), and the entry covers
    /// every file of a matching name in the directory before it (or in
    /// every directory), now or later.
    pub pattern: Option<NamePattern>,
    /// A deep name pattern (`DIR/**/NAME`): the pattern covers NAME at any
    /// depth below DIR (`path` as written, `**` included).
    pub deep: bool,
    /// The repository guard, the line `readonly **/.git/` (`path` is
    /// [`REPO_GUARD_LINE`] without `readonly `): the hooks and
    /// configuration of every git repository are read-only, except in the
    /// repositories a sandboxed task made (src/bpf/repo.bpf.h says which
    /// names). No other field but `line` and `readonly` is set.
    pub repo_guard: bool,
}

/// The repository guard's list line, as written: one fixed line, not a
/// name pattern (a pattern names a file by its last component only).
pub const REPO_GUARD_LINE: &[u8] = b"readonly **/.git/";

/// A line that was skipped, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LineWarning {
    /// 1-based line number in the list file.
    pub line: usize,
    /// Why the line was skipped.
    pub kind: LineProblem,
}

/// Why a line was not accepted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LineProblem {
    /// Neither `/...` nor `~/...`.
    NotAbsolute,
    /// The line holds a NUL byte.
    Nul,
    /// Longer than [`PATH_MAX`] bytes.
    TooLong(usize),
    /// `~/` with nothing after it (the home directory itself is not a file).
    EmptyHomePath,
    /// A `socket` line whose argument is neither `$NAME`, `${NAME}` nor `/...`.
    BadSocket,
    /// A directory entry that covers too much; holds why.
    TooBroad(&'static str),
    /// A directory entry or exception with a `.` or `..` component.
    DotComponent,
    /// `audit` before something that is not an entry (`!PATH`, `socket`,
    /// `readonly`, nothing).
    BadAudit,
    /// `readonly` before something that is not an entry (`!PATH`, `socket`,
    /// `audit`, nothing).
    BadReadonly,
    /// `include` before something that is not one absolute or `~/` path
    /// of a file (one ending in `/`, or with a `.` or `..` component).
    BadInclude,
    /// A name pattern the hook cannot match; holds why.
    Pattern(PatternProblem),
    /// `defaults` not followed by `off` and group names.
    BadDefaults,
}

impl fmt::Display for LineProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LineProblem::NotAbsolute => {
                f.write_str("not an absolute path (write /... or ~/...); line skipped")
            }
            LineProblem::Nul => f.write_str("contains a NUL byte; line skipped"),
            LineProblem::TooLong(n) => {
                write!(f, "path is {n} bytes, longer than {PATH_MAX}; line skipped")
            }
            LineProblem::EmptyHomePath => {
                f.write_str("`~/` names the home directory, not a file; line skipped")
            }
            LineProblem::BadSocket => f.write_str(
                "a socket line takes one $NAME, ${NAME}, absolute path, tcp:PORT or udp:PORT \
                 (e.g. `socket $SSH_AUTH_SOCK`, `socket tcp:11434`); line skipped",
            ),
            LineProblem::TooBroad(why) => write!(
                f,
                "a directory entry may not cover {why}: every program would lose its \
                 files; name a smaller directory; line skipped"
            ),
            LineProblem::DotComponent => f.write_str(
                "a directory entry or exception may not hold a `.` or `..` component \
                 (write the path plainly); line skipped",
            ),
            LineProblem::BadAudit => f.write_str(
                "`audit` takes one entry (`audit PATH`, `audit DIR/`) or `all`; an exception, a \
                 socket line or a read-only entry cannot be audited; line skipped",
            ),
            LineProblem::BadReadonly => f.write_str(
                "`readonly` takes one entry (`readonly PATH`, `readonly DIR/`); an exception, a \
                 socket line or an audit entry cannot be read-only; line skipped",
            ),
            LineProblem::BadInclude => f.write_str(
                "`include` takes one list file, as an absolute or `~/` path without `.` or `..` \
                 components (e.g. `include /usr/share/agent-sandbox-exec/catalog/cloud`); line \
                 skipped",
            ),
            LineProblem::Pattern(why) => write!(f, "{why}"),
            LineProblem::BadDefaults => f.write_str(
                "`defaults` takes `off`, then nothing (every default) or the groups to turn off \
                 (catalogue names: `defaults off ssh browsers`); line skipped",
            ),
        }
    }
}

/// What a `socket` line names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SocketSpec<'a> {
    /// `$NAME` or `${NAME}`: the path in the launcher's environment variable NAME.
    Var(&'a str),
    /// An absolute path, as written.
    Path(&'a [u8]),
    /// `tcp:PORT` or `udp:PORT`: the user's own server on that loopback port.
    Port(Transport, u16),
}

/// The transport of a `socket tcp:PORT` or `socket udp:PORT` line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Transport {
    /// TCP (and MPTCP, whose listeners listen through TCP).
    Tcp,
    /// UDP.
    Udp,
}

impl Transport {
    /// The IP protocol number (include/uapi/linux/in.h): 6 or 17.
    pub fn protocol(self) -> u8 {
        match self {
            Transport::Tcp => 6,
            Transport::Udp => 17,
        }
    }

    /// `tcp` or `udp`, as list lines and requests spell it.
    pub fn name(self) -> &'static str {
        match self {
            Transport::Tcp => "tcp",
            Transport::Udp => "udp",
        }
    }

    /// The transport spelled `name` (`tcp` or `udp`).
    pub fn from_name(name: &[u8]) -> Option<Transport> {
        match name {
            b"tcp" => Some(Transport::Tcp),
            b"udp" => Some(Transport::Udp),
            _ => None,
        }
    }
}

/// `PORT` of a `tcp:PORT` or `udp:PORT` argument: 1 to 65535 in plain decimal.
pub fn parse_port(digits: &[u8]) -> Option<u16> {
    if digits.is_empty() || digits.len() > 5 || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let n: u32 = std::str::from_utf8(digits).ok()?.parse().ok()?;
    u16::try_from(n).ok().filter(|&p| p != 0)
}

/// One accepted `socket` line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SocketLine<'a> {
    /// 1-based line number in the list file.
    pub line: usize,
    /// What it names.
    pub spec: SocketSpec<'a>,
}

/// One accepted `include` line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IncludeLine<'a> {
    /// 1-based line number in the list file.
    pub line: usize,
    /// How `path` is anchored.
    pub anchor: Anchor,
    /// As [`Entry::path`]: absolute, or the part after `~/`.
    pub path: &'a [u8],
}

/// The result of parsing one list file (its entries borrow from the bytes).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Parsed<'a> {
    /// Accepted entries, in file order (duplicates kept; the key set dedups).
    pub entries: Vec<Entry<'a>>,
    /// Accepted `socket` lines, in file order.
    pub sockets: Vec<SocketLine<'a>>,
    /// Accepted `include` lines, in file order.
    pub includes: Vec<IncludeLine<'a>>,
    /// Skipped lines, in file order.
    pub warnings: Vec<LineWarning>,
    /// The line number of the list's first `audit all` line, if any: then
    /// every entry is an audit entry.
    pub audit_all: Option<usize>,
    /// `defaults off` lines (a user's list): the shipped defaults this
    /// list turns off, all of them or by group.
    pub defaults_off: Vec<DefaultsOff<'a>>,
}

/// A `defaults off [GROUP...]` line: the shipped defaults
/// (`/etc/agent-sandbox-exec/defaults`) a user's list turns off.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DefaultsOff<'a> {
    /// 1-based line number.
    pub line: usize,
    /// The groups (catalogue file names, e.g. `ssh`), or empty: every
    /// default.
    pub groups: Vec<&'a [u8]>,
}

fn is_blank(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\r' | b'\x0b' | b'\x0c')
}

fn trim(mut line: &[u8]) -> &[u8] {
    while let [first, rest @ ..] = line {
        if !is_blank(*first) {
            break;
        }
        line = rest;
    }
    while let [rest @ .., last] = line {
        if !is_blank(*last) {
            break;
        }
        line = rest;
    }
    line
}

/// Parses a whole list file. Never fails: each bad line becomes a [`LineWarning`].
pub fn parse(contents: &[u8]) -> Parsed<'_> {
    let mut parsed = Parsed::default();
    for (index, raw) in contents.split(|&b| b == b'\n').enumerate() {
        let line = index + 1;
        let text = trim(raw);
        if text.is_empty() || text[0] == b'#' {
            continue;
        }
        if let Some(arg) = socket_arg(text) {
            match parse_socket(arg) {
                Some(spec) => parsed.sockets.push(SocketLine { line, spec }),
                None => parsed.warnings.push(LineWarning {
                    line,
                    kind: LineProblem::BadSocket,
                }),
            }
            continue;
        }
        if let Some(arg) = word_arg(text, b"include") {
            let parsed_arg = if arg.is_empty() {
                Err(LineProblem::NotAbsolute)
            } else {
                parse_line(arg)
            };
            match parsed_arg {
                Ok((anchor, path))
                    if arg.last() != Some(&b'/')
                        && !path.split(|&b| b == b'/').any(|c| c == b"." || c == b"..") =>
                {
                    parsed.includes.push(IncludeLine { line, anchor, path })
                }
                Ok(_) | Err(LineProblem::NotAbsolute) | Err(LineProblem::EmptyHomePath) => {
                    parsed.warnings.push(LineWarning {
                        line,
                        kind: LineProblem::BadInclude,
                    })
                }
                Err(kind) => parsed.warnings.push(LineWarning { line, kind }),
            }
            continue;
        }
        if let Some(arg) = word_arg(text, b"defaults") {
            match word_arg(arg, b"off") {
                Some(groups) => {
                    let groups: Vec<&[u8]> = groups
                        .split(|&b| is_blank(b))
                        .filter(|g| !g.is_empty())
                        .collect();
                    if groups.iter().all(|g| {
                        g.iter()
                            .all(|&b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
                    }) {
                        parsed.defaults_off.push(DefaultsOff { line, groups });
                    } else {
                        parsed.warnings.push(LineWarning {
                            line,
                            kind: LineProblem::BadDefaults,
                        });
                    }
                }
                None => parsed.warnings.push(LineWarning {
                    line,
                    kind: LineProblem::BadDefaults,
                }),
            }
            continue;
        }
        let (audit, text) = match word_arg(text, b"audit") {
            Some(b"all") => {
                parsed.audit_all.get_or_insert(line);
                continue;
            }
            Some(arg) if plain_entry(arg) => (true, arg),
            Some(_) => {
                parsed.warnings.push(LineWarning {
                    line,
                    kind: LineProblem::BadAudit,
                });
                continue;
            }
            None => (false, text),
        };
        let (readonly, text) = match word_arg(text, b"readonly") {
            Some(arg) if !audit && plain_entry(arg) => (true, arg),
            Some(_) => {
                parsed.warnings.push(LineWarning {
                    line,
                    kind: LineProblem::BadReadonly,
                });
                continue;
            }
            None => (false, text),
        };
        if readonly && text == &REPO_GUARD_LINE[b"readonly ".len()..] {
            parsed.entries.push(Entry {
                line,
                anchor: Anchor::Anywhere,
                path: b"**/.git/",
                dir: true,
                exception: false,
                audit: false,
                readonly: true,
                pattern: None,
                deep: false,
                repo_guard: true,
            });
            continue;
        }
        let (exception, text) = match text.strip_prefix(b"!") {
            Some(rest) => (true, rest),
            None => (false, text),
        };
        let dir = text.len() > 1 && text.last() == Some(&b'/');
        match pattern_entry(text, dir, audit || readonly) {
            Some(Ok((anchor, path, pattern, deep))) => {
                parsed.entries.push(Entry {
                    line,
                    anchor,
                    path,
                    dir: false,
                    exception,
                    audit: false,
                    readonly: false,
                    pattern: Some(pattern),
                    deep,
                    repo_guard: false,
                });
                continue;
            }
            Some(Err(kind)) => {
                parsed.warnings.push(LineWarning { line, kind });
                continue;
            }
            None => {}
        }
        let result = if text.is_empty() {
            Err(LineProblem::NotAbsolute)
        } else if dir || text == b"/" || text == b"~/" {
            parse_dir_line(text, exception)
        } else {
            parse_line(text)
        };
        match result {
            Ok((anchor, path)) => parsed.entries.push(Entry {
                line,
                anchor,
                path,
                dir,
                exception,
                audit,
                readonly,
                pattern: None,
                deep: false,
                repo_guard: false,
            }),
            Err(kind) => parsed.warnings.push(LineWarning { line, kind }),
        }
    }
    if parsed.audit_all.is_some() {
        for e in parsed
            .entries
            .iter_mut()
            .filter(|e| !e.exception && !e.readonly && e.pattern.is_none())
        {
            e.audit = true;
        }
    }
    parsed
}

/// A pattern line's anchor, path as written, pattern and whether it is
/// deep (`DIR/**/NAME`).
type PatternLine<'a> = (Anchor, &'a [u8], NamePattern, bool);

/// A name-pattern line (`**/NAME`, or a path whose last component
/// [`pattern::is_pattern`]): its anchor, path and pattern, or why it cannot
/// be one; None for a line that is not a pattern. `dir`: the line ends in
/// `/`; `not_read`: it started with `audit` or `readonly`.
fn pattern_entry(
    text: &[u8],
    dir: bool,
    not_read: bool,
) -> Option<Result<PatternLine<'_>, LineProblem>> {
    let bad = |why| Some(Err(LineProblem::Pattern(why)));
    let anywhere = text.strip_prefix(b"**/");
    let body = anywhere.unwrap_or(text);
    let body = if dir { &body[..body.len() - 1] } else { body };
    let (dir_part, last) = match body.iter().rposition(|&b| b == b'/') {
        Some(i) => (&body[..i], &body[i + 1..]),
        None => (&body[..0], body),
    };
    let globbed = |part: &[u8]| pattern::has_glob(part) || part.contains(&b'\\');
    if anywhere.is_none() && !pattern::is_pattern(last) && !globbed(dir_part) {
        return None;
    }
    if text.contains(&0) {
        return Some(Err(LineProblem::Nul));
    }
    if text.len() > PATH_MAX {
        return Some(Err(LineProblem::TooLong(text.len())));
    }
    if dir {
        return bad(PatternProblem::DirectoryPattern);
    }
    if not_read {
        return bad(PatternProblem::NotReadEntry);
    }
    if let Some(name) = anywhere {
        if name.contains(&b'/') {
            return bad(if name.split(|&b| b == b'/').any(|c| c == b"**") {
                PatternProblem::DeepScope
            } else {
                PatternProblem::GlobInDirectory
            });
        }
        return Some(
            NamePattern::parse(name)
                .map(|p| (Anchor::Anywhere, name, p, false))
                .map_err(LineProblem::Pattern),
        );
    }
    // `DIR/**/NAME`: `**` as the last directory component only.
    let (scope, deep) = match dir_part.strip_suffix(b"/**") {
        Some(scope) => (scope, true),
        None => (dir_part, false),
    };
    if scope.split(|&b| b == b'/').any(|c| c == b"**") {
        return bad(PatternProblem::DeepScope);
    }
    if globbed(scope) {
        return bad(PatternProblem::GlobInDirectory);
    }
    let (anchor, path) = match parse_line(text) {
        Ok(x) => x,
        Err(e) => return Some(Err(e)),
    };
    if path.split(|&b| b == b'/').any(|c| c == b"." || c == b"..") {
        return Some(Err(LineProblem::DotComponent));
    }
    if deep && anchor == Anchor::Root && scope.split(|&b| b == b'/').all(|c| c.is_empty()) {
        // `/**/NAME`: every directory, which `**/NAME` says.
        return bad(PatternProblem::DeepScope);
    }
    Some(
        NamePattern::parse(last)
            .map(|p| (anchor, path, p, deep))
            .map_err(LineProblem::Pattern),
    )
}

fn parse_line(text: &[u8]) -> Result<(Anchor, &[u8]), LineProblem> {
    if text.contains(&0) {
        return Err(LineProblem::Nul);
    }
    let (anchor, path) = if text[0] == b'/' {
        (Anchor::Root, text)
    } else if let Some(rest) = text.strip_prefix(b"~/") {
        let rest = trim_leading_slashes(rest);
        if rest.is_empty() {
            return Err(LineProblem::EmptyHomePath);
        }
        (Anchor::Home, rest)
    } else {
        return Err(LineProblem::NotAbsolute);
    };
    if text.len() > PATH_MAX {
        return Err(LineProblem::TooLong(text.len()));
    }
    Ok((anchor, path))
}

/// The argument of a `socket` line (`socket` and at least one blank), if it is one.
fn socket_arg(text: &[u8]) -> Option<&[u8]> {
    word_arg(text, b"socket")
}

/// Whether `arg` (what follows `audit` or `readonly`) may be an entry: not
/// empty, not an exception, a `socket` line, or another such word.
fn plain_entry(arg: &[u8]) -> bool {
    !arg.is_empty()
        && arg[0] != b'!'
        && socket_arg(arg).is_none()
        && word_arg(arg, b"audit").is_none()
        && word_arg(arg, b"readonly").is_none()
        && word_arg(arg, b"include").is_none()
}

/// The rest of a line that starts with the word `word` followed by blanks or
/// nothing, trimmed; None if it does not (a path never starts with a word:
/// it starts with `/`, `~/` or `!`).
fn word_arg<'a>(text: &'a [u8], word: &[u8]) -> Option<&'a [u8]> {
    let rest = text.strip_prefix(word)?;
    match rest.first() {
        Some(b) if is_blank(*b) => Some(trim(rest)),
        None => Some(rest),
        _ => None,
    }
}

/// A line ending in `/` (a directory entry or exception): the path without
/// its trailing slashes.
fn parse_dir_line(text: &[u8], exception: bool) -> Result<(Anchor, &[u8]), LineProblem> {
    let mut path = text;
    while path.len() > 1 && path.last() == Some(&b'/') {
        path = &path[..path.len() - 1];
    }
    if path == b"~" || path == b"~/" {
        return Err(if exception {
            LineProblem::EmptyHomePath
        } else {
            LineProblem::TooBroad("the whole home directory")
        });
    }
    let (anchor, path) = parse_line(path)?;
    if path.split(|&b| b == b'/').any(|c| c == b"." || c == b"..") {
        return Err(LineProblem::DotComponent);
    }
    if !exception
        && anchor == Anchor::Root
        && let Some(why) = too_broad(path)
    {
        return Err(LineProblem::TooBroad(why));
    }
    Ok((anchor, path))
}

/// Why a directory entry at absolute `path` (no trailing `/`) covers too
/// much, if it does: `/` itself or a top-level directory (`/etc`, `/home`,
/// `/usr`, ...: one component).
pub fn too_broad(path: &[u8]) -> Option<&'static str> {
    match path.split(|&b| b == b'/').filter(|c| !c.is_empty()).count() {
        0 => Some("the root directory /"),
        1 => Some("a top-level directory"),
        _ => None,
    }
}

fn parse_socket(arg: &[u8]) -> Option<SocketSpec<'_>> {
    if let Some((name, digits)) = arg.split_at_checked(4)
        && let Some(t) = name.strip_suffix(b":").and_then(Transport::from_name)
    {
        return parse_port(digits).map(|p| SocketSpec::Port(t, p));
    }
    let is_name = |n: &[u8]| {
        !n.is_empty()
            && !n[0].is_ascii_digit()
            && n.iter().all(|b| b.is_ascii_alphanumeric() || *b == b'_')
    };
    if arg.first() == Some(&b'/') {
        return (!arg.contains(&0) && arg.len() <= PATH_MAX).then_some(SocketSpec::Path(arg));
    }
    let name = arg.strip_prefix(b"$")?;
    let name = match name.strip_prefix(b"{") {
        Some(braced) => braced.strip_suffix(b"}")?,
        None => name,
    };
    if !is_name(name) {
        return None;
    }
    std::str::from_utf8(name).ok().map(SocketSpec::Var)
}

/// Whether a directory entry at absolute `path` covers the home directory
/// `home` (is it or one of its ancestors), compared by components.
pub fn covers_home(path: &[u8], home: &[u8]) -> bool {
    let parts = |p: &[u8]| -> Vec<Vec<u8>> {
        p.split(|&b| b == b'/')
            .filter(|c| !c.is_empty() && *c != b".")
            .map(<[u8]>::to_vec)
            .collect()
    };
    let (p, h) = (parts(path), parts(home));
    p.len() <= h.len() && h[..p.len()] == p[..]
}

/// Which list an entry comes from, for [`decide`].
#[cfg(test)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ListSource {
    /// The administrator's base list.
    Base,
    /// The user's own list.
    User,
}

/// A mark found on one level of the way from a file up to the root: what the
/// hook finds in deny_map / name_map (kinds `KIND_DIR_*`, `KIND_EXC_*`).
#[cfg(test)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mark {
    /// A directory entry of that list on this directory.
    Dir(ListSource),
    /// An exception of that list on this file or directory.
    Exception(ListSource),
}

/// The precedence rule the hook implements (src/bpf/agent_sandbox.bpf.c,
/// dir_walk_step()), as a pure function: `levels[0]` holds the marks of the
/// opened file itself, `levels[i]` those of its i-th ancestor. Per list, the
/// nearest mark decides: a directory entry denies, an exception allows; on
/// one level an entry beats an exception of the same list. A list's
/// exception never touches the other list's entries, so the file is denied
/// when either list denies it. File entries are decided before (a file also
/// named by a file entry stays denied whatever the exceptions), and a walk
/// longer than the hook's depth bound is denied before this applies.
#[cfg(test)]
pub fn decide(levels: &[Vec<Mark>]) -> bool {
    [ListSource::Base, ListSource::User].iter().any(|&list| {
        for marks in levels {
            if marks.contains(&Mark::Dir(list)) {
                return true;
            }
            if marks.contains(&Mark::Exception(list)) {
                return false;
            }
        }
        false
    })
}

fn trim_leading_slashes(mut s: &[u8]) -> &[u8] {
    while let [b'/', rest @ ..] = s {
        s = rest;
    }
    s
}

/// Joins a home directory and the part of a `~/` entry after the `~/`.
///
/// `home` is the passwd entry's home directory (bytes); the result is
/// `home/rest` with exactly one `/` between them.
pub fn join_home(home: &[u8], rest: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    join_home_into(&mut out, home, rest);
    out
}

/// [`join_home`] into `out` (cleared first), reusing its allocation.
pub fn join_home_into(out: &mut Vec<u8>, home: &[u8], rest: &[u8]) {
    out.clear();
    out.extend_from_slice(home);
    while out.len() > 1 && out.last() == Some(&b'/') {
        out.pop();
    }
    if out.last() != Some(&b'/') {
        out.push(b'/');
    }
    out.extend_from_slice(rest);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// (line, problem) of each warning of `p`, in order.
    fn warning_kinds(p: &Parsed<'_>) -> Vec<(usize, LineProblem)> {
        p.warnings
            .iter()
            .map(|w| (w.line, w.kind.clone()))
            .collect()
    }

    fn paths(p: &Parsed<'_>) -> Vec<(usize, Anchor, Vec<u8>)> {
        p.entries
            .iter()
            .map(|e| (e.line, e.anchor.clone(), e.path.to_vec()))
            .collect()
    }

    #[test]
    fn comments_blank_lines_and_whitespace() {
        let p = parse(b"# header\n\n  /etc/a  \n\t# indented comment\n/b#not-a-comment\n");
        assert_eq!(
            paths(&p),
            vec![
                (3, Anchor::Root, b"/etc/a".to_vec()),
                (5, Anchor::Root, b"/b#not-a-comment".to_vec()),
            ]
        );
        assert!(p.warnings.is_empty());
    }

    #[test]
    fn crlf_is_trimmed() {
        let p = parse(b"/one\r\n/two\r\n");
        assert_eq!(p.entries[0].path, b"/one");
        assert_eq!(p.entries[1].path, b"/two");
    }

    #[test]
    fn non_utf8_line_does_not_spoil_others() {
        let p = parse(b"/ok1\n/bad\xff\xfe\n/ok2");
        assert_eq!(p.entries.len(), 3);
        assert_eq!(p.entries[1].path, b"/bad\xff\xfe");
        assert_eq!(p.entries[2].line, 3);
    }

    #[test]
    fn bad_lines_become_warnings_with_line_numbers() {
        let long = [b"/".as_slice(), &[b'a'; PATH_MAX]].concat();
        let mut input = b"relative/path\n/nul\0byte\n~/\n".to_vec();
        input.extend_from_slice(&long);
        input.extend_from_slice(b"\n/fine\n");
        let p = parse(&input);
        let kinds: Vec<_> = warning_kinds(&p);
        assert_eq!(
            kinds,
            vec![
                (1, LineProblem::NotAbsolute),
                (2, LineProblem::Nul),
                (3, LineProblem::TooBroad("the whole home directory")),
                (4, LineProblem::TooLong(PATH_MAX + 1)),
            ]
        );
        assert_eq!(paths(&p), vec![(5, Anchor::Root, b"/fine".to_vec())]);
    }

    #[test]
    fn home_entries() {
        let p = parse(b"~/.ssh/id_ed25519\n~//x\n~user/x\n");
        assert_eq!(
            paths(&p),
            vec![
                (1, Anchor::Home, b".ssh/id_ed25519".to_vec()),
                (2, Anchor::Home, b"x".to_vec()),
            ]
        );
        assert_eq!(p.warnings[0].kind, LineProblem::NotAbsolute);
    }

    #[test]
    fn join_home_normalises_one_slash() {
        assert_eq!(join_home(b"/home/a", b"x/y"), b"/home/a/x/y");
        assert_eq!(join_home(b"/home/a//", b"x"), b"/home/a/x");
        assert_eq!(join_home(b"/", b"x"), b"/x");
    }

    fn kinds(p: &Parsed<'_>) -> Vec<(Anchor, Vec<u8>, bool, bool)> {
        p.entries
            .iter()
            .map(|e| (e.anchor.clone(), e.path.to_vec(), e.dir, e.exception))
            .collect()
    }

    #[test]
    fn directory_entries_and_exceptions() {
        let p =
            parse(b"~/.ssh/\n!~/.ssh/known_hosts\n!~/.ssh/pub/\n/srv/secrets//\n~/.aws\n!/etc/x\n");
        assert_eq!(
            kinds(&p),
            vec![
                (Anchor::Home, b".ssh".to_vec(), true, false),
                (Anchor::Home, b".ssh/known_hosts".to_vec(), false, true),
                (Anchor::Home, b".ssh/pub".to_vec(), true, true),
                (Anchor::Root, b"/srv/secrets".to_vec(), true, false),
                (Anchor::Home, b".aws".to_vec(), false, false),
                (Anchor::Root, b"/etc/x".to_vec(), false, true),
            ]
        );
        assert!(p.warnings.is_empty());
    }

    #[test]
    fn too_broad_directory_entries_are_refused() {
        let p = parse(b"/\n/etc/\n//home//\n~/\n/srv/a/../\n!relative\n!\n/srv/ok/\n");
        let kinds: Vec<_> = warning_kinds(&p);
        assert_eq!(
            kinds,
            vec![
                (1, LineProblem::TooBroad("the root directory /")),
                (2, LineProblem::TooBroad("a top-level directory")),
                (3, LineProblem::TooBroad("a top-level directory")),
                (4, LineProblem::TooBroad("the whole home directory")),
                (5, LineProblem::DotComponent),
                (6, LineProblem::NotAbsolute),
                (7, LineProblem::NotAbsolute),
            ]
        );
        assert_eq!(p.entries.len(), 1);
        assert_eq!(p.entries[0].path, b"/srv/ok");
    }

    #[test]
    fn covers_home_by_components() {
        assert!(covers_home(b"/home/me", b"/home/me/"));
        assert!(covers_home(b"/home", b"/home/me"));
        assert!(!covers_home(b"/home/me/.ssh", b"/home/me"));
        assert!(!covers_home(b"/home/m", b"/home/me"));
    }

    #[test]
    fn precedence_nearest_mark_of_the_same_list() {
        use ListSource::{Base, User};
        use Mark::{Dir, Exception};
        // ~/.ssh/ with !~/.ssh/known_hosts (user list): the exception wins.
        assert!(!decide(&[vec![Exception(User)], vec![Dir(User)]]));
        // A user exception never re-allows a base-list directory entry.
        assert!(decide(&[vec![Exception(User)], vec![Dir(Base)]]));
        // A base exception does not re-allow a user entry either.
        assert!(decide(&[vec![Exception(Base)], vec![Dir(User)]]));
        // Nearest wins: entry below an excepted directory denies again.
        assert!(decide(&[
            vec![],
            vec![Dir(User)],
            vec![Exception(User)],
            vec![Dir(User)]
        ]));
        // An exception below an entry below an exception: allowed.
        assert!(!decide(&[
            vec![Exception(User)],
            vec![Dir(User)],
            vec![Exception(User)]
        ]));
        // Entry and exception on one directory: the entry.
        assert!(decide(&[vec![], vec![Dir(User), Exception(User)]]));
        // No marks: allowed.
        assert!(!decide(&[vec![], vec![]]));
        // An exception with no entry above it changes nothing.
        assert!(!decide(&[vec![Exception(Base)]]));
    }

    #[test]
    fn socket_lines() {
        let p = parse(
            b"socket $SSH_AUTH_SOCK\nsocket\t${GPG_SOCK}\nsocket /run/x.sock\n\
              socket\nsocket relative\nsocket $1X\nsocket ${A\nsockets/x\n/socket $X\n\
              socket tcp:11434\nsocket udp:53\nsocket tcp:0\nsocket tcp:65536\nsocket sctp:1\n\
              socket tcp:+8\nsocket udp:\n",
        );
        assert_eq!(
            p.sockets,
            vec![
                SocketLine {
                    line: 1,
                    spec: SocketSpec::Var("SSH_AUTH_SOCK")
                },
                SocketLine {
                    line: 2,
                    spec: SocketSpec::Var("GPG_SOCK")
                },
                SocketLine {
                    line: 3,
                    spec: SocketSpec::Path(b"/run/x.sock")
                },
                SocketLine {
                    line: 10,
                    spec: SocketSpec::Port(Transport::Tcp, 11434)
                },
                SocketLine {
                    line: 11,
                    spec: SocketSpec::Port(Transport::Udp, 53)
                },
            ]
        );
        let bad: Vec<_> = warning_kinds(&p);
        assert_eq!(
            bad,
            vec![
                (4, LineProblem::BadSocket),
                (5, LineProblem::BadSocket),
                (6, LineProblem::BadSocket),
                (7, LineProblem::BadSocket),
                (8, LineProblem::NotAbsolute),
                (12, LineProblem::BadSocket),
                (13, LineProblem::BadSocket),
                (14, LineProblem::BadSocket),
                (15, LineProblem::BadSocket),
                (16, LineProblem::BadSocket),
            ]
        );
        // `/socket $X` is a path like any other.
        assert_eq!(paths(&p), vec![(9, Anchor::Root, b"/socket $X".to_vec())]);
    }

    #[test]
    fn audit_lines() {
        let p = parse(
            b"audit ~/.env\naudit\t/srv/keys/\naudit !~/x\naudit socket tcp:1\naudit\n\
              auditor\n/plain\n!~/.aws/config\n",
        );
        let got: Vec<_> = p
            .entries
            .iter()
            .map(|e| (e.line, e.path.to_vec(), e.dir, e.exception, e.audit))
            .collect();
        assert_eq!(
            got,
            vec![
                (1, b".env".to_vec(), false, false, true),
                (2, b"/srv/keys".to_vec(), true, false, true),
                (7, b"/plain".to_vec(), false, false, false),
                (8, b".aws/config".to_vec(), false, true, false),
            ]
        );
        assert_eq!(
            warning_kinds(&p),
            vec![
                (3, LineProblem::BadAudit),
                (4, LineProblem::BadAudit),
                (5, LineProblem::BadAudit),
                (6, LineProblem::NotAbsolute),
            ]
        );
        assert_eq!(p.audit_all, None);
        assert!(
            p.sockets.is_empty(),
            "an audited socket line is no socket line"
        );
        // `audit all` anywhere: every entry of the list, exceptions aside.
        let all = parse(b"/a\n!/a/b\naudit all\n/c/d/\naudit all\n");
        assert_eq!(all.audit_all, Some(3));
        let flags: Vec<_> = all.entries.iter().map(|e| (e.exception, e.audit)).collect();
        assert_eq!(flags, vec![(false, true), (true, false), (false, true)]);
        assert!(all.warnings.is_empty());
        // The checks of a directory entry hold for an audit one.
        let broad = parse(b"audit /etc/\naudit ~/\n");
        assert_eq!(
            warning_kinds(&broad),
            vec![
                (1, LineProblem::TooBroad("a top-level directory")),
                (2, LineProblem::TooBroad("the whole home directory")),
            ]
        );
    }

    #[test]
    fn readonly_lines() {
        let p = parse(
            b"readonly ~/.bashrc\nreadonly ~/.config/systemd/user/\nreadonly !~/x\n\
              audit readonly ~/y\nreadonly audit ~/z\nreadonly\naudit all\n",
        );
        let got: Vec<_> = p
            .entries
            .iter()
            .map(|e| (e.line, e.path.to_vec(), e.dir, e.audit, e.readonly))
            .collect();
        assert_eq!(
            got,
            vec![
                (1, b".bashrc".to_vec(), false, false, true),
                (2, b".config/systemd/user".to_vec(), true, false, true),
            ],
            "`audit all` leaves read-only entries enforced"
        );
        assert_eq!(
            warning_kinds(&p),
            vec![
                (3, LineProblem::BadReadonly),
                (4, LineProblem::BadAudit),
                (5, LineProblem::BadReadonly),
                (6, LineProblem::BadReadonly),
            ]
        );
    }

    #[test]
    fn name_pattern_lines() {
        let p = parse(
            b"**/.env\n!**/.env.example\n~/.ssh/id_*\n/srv/keys/*.pem\n~/literal\\*star\n\
              **/a*b*\n~/x/**/y/**/z*\n**/[ab]\n~/a*/b\n**/.git/hooks/\nreadonly **/.env\n\
              audit ~/x/*.key\n**/sub/name\n/plain/[x]\n**/*\n~/.ssh/../id_*\n\
              ~/projects/**/terraform.tfstate*\n/**/x*\n~/**/.env\n",
        );
        let got: Vec<_> = p
            .entries
            .iter()
            .map(|e| {
                (
                    e.line,
                    e.anchor.clone(),
                    e.path.to_vec(),
                    e.exception,
                    e.pattern.as_ref().map(|x| x.shape_text()),
                    e.deep,
                )
            })
            .collect();
        let x = |n: usize| Some(vec![b'x'; n]);
        let star = |s: &str| Some(s.as_bytes().to_vec());
        let e = |line, anchor, path: &str, exc, shape, deep| {
            (line, anchor, path.as_bytes().to_vec(), exc, shape, deep)
        };
        assert_eq!(
            got,
            vec![
                e(1, Anchor::Anywhere, ".env", false, x(4), false),
                e(2, Anchor::Anywhere, ".env.example", true, x(12), false),
                e(3, Anchor::Home, ".ssh/id_*", false, star("xxx*"), false),
                e(
                    4,
                    Anchor::Root,
                    "/srv/keys/*.pem",
                    false,
                    star("*xxxx"),
                    false
                ),
                e(5, Anchor::Home, "literal\\*star", false, x(12), false),
                e(14, Anchor::Root, "/plain/[x]", false, None, false),
                e(
                    17,
                    Anchor::Home,
                    "projects/**/terraform.tfstate*",
                    false,
                    star("xxxxxxxxxxxxxxxxx*"),
                    true
                ),
                e(19, Anchor::Home, "**/.env", false, x(4), true),
            ]
        );
        let pat = |why| LineProblem::Pattern(why);
        assert_eq!(
            warning_kinds(&p),
            vec![
                (6, pat(PatternProblem::TwoStars)),
                (7, pat(PatternProblem::DeepScope)),
                (8, pat(PatternProblem::Class)),
                (9, pat(PatternProblem::GlobInDirectory)),
                (10, pat(PatternProblem::DirectoryPattern)),
                (11, pat(PatternProblem::NotReadEntry)),
                (12, pat(PatternProblem::NotReadEntry)),
                (13, pat(PatternProblem::GlobInDirectory)),
                (15, pat(PatternProblem::Everything)),
                (16, LineProblem::DotComponent),
                (18, pat(PatternProblem::DeepScope)),
            ]
        );
        assert!(
            p.entries[4]
                .pattern
                .as_ref()
                .unwrap()
                .matches(b"literal*star")
        );
    }

    #[test]
    fn defaults_off_lines() {
        let p = parse(
            b"defaults off\ndefaults off ssh  browsers\ndefaults\ndefaults on\ndefaults off ../x\n",
        );
        let got: Vec<_> = p
            .defaults_off
            .iter()
            .map(|d| (d.line, d.groups.clone()))
            .collect();
        assert_eq!(
            got,
            vec![(1, vec![]), (2, vec![&b"ssh"[..], &b"browsers"[..]])]
        );
        assert_eq!(
            warning_kinds(&p),
            vec![
                (3, LineProblem::BadDefaults),
                (4, LineProblem::BadDefaults),
                (5, LineProblem::BadDefaults),
            ]
        );
    }

    #[test]
    fn include_lines() {
        let p = parse(
            b"include /usr/share/agent-sandbox-exec/catalog/cloud\ninclude\t~/more.list \n\
              include\ninclude relative\ninclude /etc/dir/\ninclude ~/\naudit include /x\n\
              readonly include /x\n/includes/are/paths\ninclude /etc/x/.\ninclude ~/a/../b\n",
        );
        let got: Vec<_> = p
            .includes
            .iter()
            .map(|i| (i.line, i.anchor.clone(), i.path.to_vec()))
            .collect();
        assert_eq!(
            got,
            vec![
                (
                    1,
                    Anchor::Root,
                    b"/usr/share/agent-sandbox-exec/catalog/cloud".to_vec()
                ),
                (2, Anchor::Home, b"more.list".to_vec()),
            ]
        );
        assert_eq!(
            warning_kinds(&p),
            vec![
                (3, LineProblem::BadInclude),
                (4, LineProblem::BadInclude),
                (5, LineProblem::BadInclude),
                (6, LineProblem::BadInclude),
                (7, LineProblem::BadAudit),
                (8, LineProblem::BadReadonly),
                (10, LineProblem::BadInclude),
                (11, LineProblem::BadInclude),
            ]
        );
        assert_eq!(
            paths(&p),
            vec![(9, Anchor::Root, b"/includes/are/paths".to_vec())]
        );
    }

    #[test]
    fn the_repository_guard_is_one_fixed_line() {
        let p = parse(
            b"readonly **/.git/\n  readonly   **/.git/  \n**/.git/\nreadonly **/.git\n\
              readonly !**/.git/\naudit readonly **/.git/\nreadonly **/.Git/\n",
        );
        let guards: Vec<usize> = p
            .entries
            .iter()
            .filter(|e| e.repo_guard)
            .map(|e| e.line)
            .collect();
        assert_eq!(guards, vec![1, 2], "{p:?}");
        assert!(p.entries.iter().filter(|e| e.repo_guard).all(|e| e.readonly
            && e.dir
            && !e.exception
            && !e.audit
            && e.pattern.is_none()
            && e.anchor == Anchor::Anywhere));
        // Anything else spelt like it is not the guard, and skipped with a
        // warning: a directory pattern, a read-only pattern, a read-only
        // exception, an audit one, another case.
        assert!(p.entries.iter().all(|e| e.repo_guard));
        let warned: Vec<usize> = p.warnings.iter().map(|w| w.line).collect();
        assert_eq!(warned, vec![3, 4, 5, 6, 7], "{:?}", p.warnings);
    }

    #[test]
    fn empty_input() {
        assert_eq!(parse(b""), Parsed::default());
    }
}
