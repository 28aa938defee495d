//! `include PATH` lines: a list and the files it includes, as one sequence
//! of list files whose lines all count as the including list's. Pure: the
//! caller reads each file (and decides whether it may be trusted) through
//! the `read` function it passes to [`expand`].
//!
//! Rules (also in agent-sandbox-exec-denylist(5)):
//! - An included file may include others, to [`MAX_INCLUDE_DEPTH`] levels
//!   below the list itself and [`MAX_INCLUDED_FILES`] files in all.
//! - A file that includes one already on its chain (a cycle) has that line
//!   skipped, with a warning naming the chain.
//! - A file included twice (two lines, or two files that include it) is
//!   read once, where it is met first (breadth first: at its smallest
//!   depth): its lines already apply.
//! - A missing file includes nothing (a warning); one the caller refuses
//!   ([`Read::Refused`], e.g. a base-list include a user could change)
//!   includes nothing and says why.
//! - `~/` resolves against the home of the list's user; in a list without
//!   one (the base list) a `~/` include is refused: every user would
//!   control a line of the administrator's list.

use std::fmt;

use crate::lists::denylist::{self, Anchor};

/// How many levels of `include` below the list itself are followed.
pub const MAX_INCLUDE_DEPTH: usize = 8;

/// How many files one list may include in all (every level counted).
pub const MAX_INCLUDED_FILES: usize = 64;

/// A file's identity: `st_dev` and `st_ino`, which tell one file under two
/// names.
pub type FileId = (u64, u64);

/// What the caller's `read` found at an include's path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Read {
    /// The file's bytes and its identity.
    Bytes(Vec<u8>, FileId),
    /// No file there (ENOENT or ENOTDIR).
    Missing,
    /// It may not be used, and why (a read error, or an owner or mode the
    /// caller does not trust).
    Refused(String),
}

/// One file of an expanded list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListFile {
    /// The path: the list's own, or the include line's (`~/` joined with
    /// the home).
    pub path: Vec<u8>,
    /// Its bytes.
    pub bytes: Vec<u8>,
    /// Where it was included: the index in [`Expanded::files`] of the file
    /// that holds the line, and the line's 1-based number; None for the
    /// list itself.
    pub from: Option<(usize, usize)>,
}

/// Why an `include` line included nothing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IncludeProblem {
    /// The file does not exist.
    Missing,
    /// The caller refused it; holds why.
    Refused(String),
    /// The file is already on the chain that includes it: the chain, from
    /// the list itself to the file named again.
    Cycle(Vec<Vec<u8>>),
    /// More than [`MAX_INCLUDE_DEPTH`] levels.
    TooDeep,
    /// More than [`MAX_INCLUDED_FILES`] files.
    TooMany,
    /// A `~/` include in a list that belongs to no user (the base list).
    HomeInBase,
}

impl fmt::Display for IncludeProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            IncludeProblem::Missing => f.write_str("the file does not exist; nothing included"),
            IncludeProblem::Refused(why) => write!(f, "{why}; nothing included"),
            IncludeProblem::Cycle(chain) => {
                let names: Vec<String> = chain
                    .iter()
                    .map(|p| String::from_utf8_lossy(p).into_owned())
                    .collect();
                write!(
                    f,
                    "an include cycle ({}); line skipped",
                    names.join(" includes ")
                )
            }
            IncludeProblem::TooDeep => write!(
                f,
                "more than {MAX_INCLUDE_DEPTH} levels of include; line skipped"
            ),
            IncludeProblem::TooMany => write!(
                f,
                "more than {MAX_INCLUDED_FILES} included files in one list; line skipped"
            ),
            IncludeProblem::HomeInBase => f.write_str(
                "the base list may include only absolute paths (a `~/` file is its user's to \
                 change); line skipped",
            ),
        }
    }
}

/// An `include` line that included nothing, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IncludeWarning {
    /// The index in [`Expanded::files`] of the file holding the line.
    pub file: usize,
    /// Its 1-based line number.
    pub line: usize,
    /// The path it names (`~/` joined).
    pub path: Vec<u8>,
    /// Why.
    pub problem: IncludeProblem,
}

/// A list with its includes: the list itself first, then each included
/// file in the order its `include` line is met (breadth first).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Expanded {
    /// The files whose lines make up the list.
    pub files: Vec<ListFile>,
    /// The include lines that included nothing.
    pub warnings: Vec<IncludeWarning>,
    /// Every path an include line names (`~/` joined), read or not, each
    /// once, in order: what a user's sandbox must not be able to change or
    /// plant ([`crate::resolver`] makes each read-only).
    pub named: Vec<Vec<u8>>,
}

impl Expanded {
    /// What these files turn off of the shipped defaults: their
    /// `defaults off` lines (denylist.rs). None: nothing; `Some(empty)`:
    /// every default; else the groups (catalogue file names).
    pub fn defaults_off(&self) -> Option<Vec<Vec<u8>>> {
        let mut groups: Option<Vec<Vec<u8>>> = None;
        for file in &self.files {
            for off in denylist::parse(&file.bytes).defaults_off {
                if off.groups.is_empty() {
                    return Some(Vec::new());
                }
                groups
                    .get_or_insert_with(Vec::new)
                    .extend(off.groups.iter().map(|g| g.to_vec()));
            }
        }
        groups
    }

    /// Drops the files named `dir/GROUP` for each of `groups` (the
    /// catalogue groups a user turned off). A group includes no other; a
    /// file of `dir` that includes others (`recommended`) is no group and
    /// stays (dropping it alone would leave its groups in). Returns the
    /// names among `groups` that named no group here, each once, for the
    /// user's warning.
    pub fn drop_groups(&mut self, dir: &[u8], groups: &[Vec<u8>]) -> Vec<Vec<u8>> {
        let named = |f: &ListFile, g: &[u8]| {
            f.path.len() == dir.len() + 1 + g.len()
                && f.path.starts_with(dir)
                && f.path[dir.len()] == b'/'
                && f.path.ends_with(g)
        };
        let includer: Vec<bool> = (0..self.files.len())
            .map(|i| {
                self.files
                    .iter()
                    .any(|f| f.from.is_some_and(|(from, _)| from == i))
            })
            .collect();
        let mut unknown: Vec<Vec<u8>> = Vec::new();
        for g in groups {
            let group = self
                .files
                .iter()
                .zip(&includer)
                .any(|(f, inc)| !inc && named(f, g));
            if !group && !unknown.contains(g) {
                unknown.push(g.clone());
            }
        }
        let mut i = 0;
        self.files.retain(|f| {
            let keep = includer[i] || !groups.iter().any(|g| named(f, g));
            i += 1;
            keep
        });
        unknown
    }

    /// Just the list itself (no include followed): for a list read
    /// elsewhere, and for tests.
    pub fn single(path: &[u8], bytes: Vec<u8>) -> Expanded {
        Expanded {
            files: vec![ListFile {
                path: path.to_vec(),
                bytes,
                from: None,
            }],
            ..Expanded::default()
        }
    }

    /// The first include line whose file was refused for a reason `why`
    /// accepts: where it is (`LIST:LINE: include PATH`, as [`Expanded::describe`]
    /// names the list) and the reason.
    pub fn first_refused(&self, why: impl Fn(&str) -> bool) -> Option<(String, String)> {
        self.warnings.iter().find_map(|w| match &w.problem {
            IncludeProblem::Refused(r) if why(r) => Some((
                format!(
                    "{}:{}: include {}",
                    self.describe(w.file),
                    w.line,
                    String::from_utf8_lossy(&w.path)
                ),
                r.clone(),
            )),
            _ => None,
        })
    }

    /// Where file `i` sits, for messages: its path, and for an included
    /// file " (included from LIST:LINE)".
    pub fn describe(&self, i: usize) -> String {
        let Some(f) = self.files.get(i) else {
            return String::new();
        };
        let path = String::from_utf8_lossy(&f.path);
        match f
            .from
            .and_then(|(p, l)| self.files.get(p).map(|pf| (pf, l)))
        {
            Some((pf, l)) => format!(
                "{path} (included from {}:{l})",
                String::from_utf8_lossy(&pf.path)
            ),
            None => path.into_owned(),
        }
    }
}

/// Expands the list at `path` (its `bytes` and identity `id`, if known):
/// follows its `include` lines through `read`, as the rules above say,
/// breadth first, so that a file is first met at its smallest depth (and
/// its own includes are cut by the depth bound only if every way to it is
/// that deep). `home` is the list's user's home directory; None for the
/// base list.
pub fn expand(
    path: &[u8],
    bytes: Vec<u8>,
    id: Option<FileId>,
    home: Option<&[u8]>,
    read: &mut dyn FnMut(&[u8]) -> Read,
) -> Expanded {
    let mut out = Expanded::single(path, bytes);
    let mut seen: Vec<FileId> = id.into_iter().collect();
    // Each file to follow, with its chain from the list itself (paths and
    // identities), in the order met.
    let mut queue: std::collections::VecDeque<(usize, Chain)> = std::collections::VecDeque::new();
    queue.push_back((0, vec![(path.to_vec(), id)]));
    while let Some((index, chain)) = queue.pop_front() {
        follow(index, &chain, &mut seen, home, read, &mut out, &mut queue);
    }
    out
}

/// The files from the list itself to one included file: paths and identities.
type Chain = Vec<(Vec<u8>, Option<FileId>)>;

/// Reads the files the include lines of `out.files[index]` name, whose
/// chain from the list itself is `chain`, and queues each new one.
fn follow(
    index: usize,
    chain: &Chain,
    seen: &mut Vec<FileId>,
    home: Option<&[u8]>,
    read: &mut dyn FnMut(&[u8]) -> Read,
    out: &mut Expanded,
    queue: &mut std::collections::VecDeque<(usize, Chain)>,
) {
    // Most lists include nothing: no parse for them (every launch reads
    // the lists; a 10,000-line list takes milliseconds to parse).
    if !out.files[index]
        .bytes
        .windows(b"include".len())
        .any(|w| w == b"include")
    {
        return;
    }
    let bytes = out.files[index].bytes.clone();
    let parsed = denylist::parse(&bytes);
    for inc in &parsed.includes {
        let warn = |out: &mut Expanded, path: Vec<u8>, problem| {
            out.warnings.push(IncludeWarning {
                file: index,
                line: inc.line,
                path,
                problem,
            })
        };
        let path = match (&inc.anchor, home) {
            (Anchor::Root | Anchor::Anywhere, _) => inc.path.to_vec(),
            (Anchor::Home, Some(h)) => denylist::join_home(h, inc.path),
            (Anchor::Home, None) => {
                let mut p = b"~/".to_vec();
                p.extend_from_slice(inc.path);
                warn(out, p, IncludeProblem::HomeInBase);
                continue;
            }
        };
        if !out.named.contains(&path) {
            out.named.push(path.clone());
        }
        let cycle = |chain: &Chain, path: &Vec<u8>| {
            let mut names: Vec<Vec<u8>> = chain.iter().map(|(p, _)| p.clone()).collect();
            names.push(path.clone());
            IncludeProblem::Cycle(names)
        };
        if chain.iter().any(|(p, _)| *p == path) {
            let problem = cycle(chain, &path);
            warn(out, path, problem);
            continue;
        }
        // Already read (met first at a smaller depth, breadth first): its
        // lines apply, so a deeper line naming it again is no problem.
        if out.files.iter().any(|f| f.path == path) {
            continue;
        }
        if chain.len() > MAX_INCLUDE_DEPTH {
            warn(out, path, IncludeProblem::TooDeep);
            continue;
        }
        match read(&path) {
            Read::Missing => warn(out, path, IncludeProblem::Missing),
            Read::Refused(why) => warn(out, path, IncludeProblem::Refused(why)),
            Read::Bytes(bytes, id) => {
                // A file on the chain under another name: still a cycle.
                if chain.iter().any(|(_, i)| *i == Some(id)) {
                    let problem = cycle(chain, &path);
                    warn(out, path, problem);
                    continue;
                }
                if seen.contains(&id) {
                    continue;
                }
                if out.files.len() > MAX_INCLUDED_FILES {
                    warn(out, path, IncludeProblem::TooMany);
                    continue;
                }
                seen.push(id);
                out.files.push(ListFile {
                    path: path.clone(),
                    bytes,
                    from: Some((index, inc.line)),
                });
                let mut longer = chain.clone();
                longer.push((path, Some(id)));
                queue.push_back((out.files.len() - 1, longer));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    /// A reader over an in-memory tree: path -> (bytes, inode).
    fn reader(files: &[(&str, &str, u64)]) -> impl FnMut(&[u8]) -> Read + use<> {
        let map: HashMap<Vec<u8>, (Vec<u8>, u64)> = files
            .iter()
            .map(|(p, b, i)| (p.as_bytes().to_vec(), (b.as_bytes().to_vec(), *i)))
            .collect();
        move |p: &[u8]| match map.get(p) {
            Some((b, i)) => Read::Bytes(b.clone(), (1, *i)),
            None => Read::Missing,
        }
    }

    fn paths(e: &Expanded) -> Vec<String> {
        e.files
            .iter()
            .map(|f| String::from_utf8_lossy(&f.path).into_owned())
            .collect()
    }

    #[test]
    fn includes_are_followed_breadth_first_with_home_paths_joined() {
        let mut read = reader(&[
            ("/etc/a", "include /etc/b\n/x\n", 2),
            ("/etc/b", "/y\n", 3),
            ("/home/u/more", "~/z\n", 4),
        ]);
        let e = expand(
            b"/home/u/list",
            b"include /etc/a\ninclude ~/more\n".to_vec(),
            Some((1, 1)),
            Some(b"/home/u"),
            &mut read,
        );
        assert_eq!(
            paths(&e),
            ["/home/u/list", "/etc/a", "/home/u/more", "/etc/b"],
            "breadth first"
        );
        assert_eq!(e.files[2].from, Some((0, 2)));
        assert_eq!(e.files[3].from, Some((1, 1)));
        assert!(e.warnings.is_empty());
        assert_eq!(e.named.len(), 3);
        assert_eq!(e.describe(3), "/etc/b (included from /etc/a:1)");
    }

    #[test]
    fn a_cycle_is_refused_with_its_chain_and_a_file_is_read_once() {
        let mut read = reader(&[
            ("/l/a", "include /l/b\n", 2),
            ("/l/b", "include /l/a\ninclude /l/c\n", 3),
            ("/l/c", "/secret\n", 4),
            // The list itself under another name (same inode).
            ("/l/alias", "include /l/a\n", 1),
        ]);
        let e = expand(
            b"/l/top",
            b"include /l/a\ninclude /l/c\ninclude /l/alias\n".to_vec(),
            Some((1, 1)),
            None,
            &mut read,
        );
        assert_eq!(paths(&e), ["/l/top", "/l/a", "/l/c", "/l/b"]);
        let cycles: Vec<String> = e
            .warnings
            .iter()
            .filter(|w| matches!(w.problem, IncludeProblem::Cycle(_)))
            .map(|w| w.problem.to_string())
            .collect();
        assert_eq!(cycles.len(), 2, "{:?}", e.warnings);
        assert!(cycles[0].contains("/l/top includes /l/alias"));
        assert!(cycles[1].contains("/l/top includes /l/a includes /l/b includes /l/a"));
    }

    #[test]
    fn depth_missing_refused_and_home_in_base_are_warnings() {
        let mut files: Vec<(String, String, u64)> = (0..12)
            .map(|i| (format!("/d/{i}"), format!("include /d/{}\n", i + 1), i + 10))
            .collect();
        files.push(("/d/bad".into(), String::new(), 99));
        let owned: Vec<(&str, &str, u64)> = files
            .iter()
            .map(|(p, b, i)| (p.as_str(), b.as_str(), *i))
            .collect();
        let mut inner = reader(&owned);
        let mut read = |p: &[u8]| {
            if p == b"/d/bad" {
                Read::Refused("owned by uid 1000, not root".into())
            } else {
                inner(p)
            }
        };
        let e = expand(
            b"/etc/list",
            b"include /d/0\ninclude /nope\ninclude /d/bad\ninclude ~/x\n".to_vec(),
            None,
            None,
            &mut read,
        );
        assert_eq!(e.files.len(), 1 + MAX_INCLUDE_DEPTH);
        let kinds: Vec<&IncludeProblem> = e.warnings.iter().map(|w| &w.problem).collect();
        assert!(kinds.contains(&&IncludeProblem::TooDeep));
        assert!(kinds.contains(&&IncludeProblem::Missing));
        assert!(kinds.contains(&&IncludeProblem::Refused(
            "owned by uid 1000, not root".into()
        )));
        assert!(kinds.contains(&&IncludeProblem::HomeInBase));
    }

    /// `/top` including `/d/0` and `/x`, where `/d/0` .. `/d/{n-1}` include
    /// each the next and the last includes `/x`; `x` is `/x`'s text and
    /// `extra` more files.
    fn chain_to_x(n: u64, x: &str, extra: &[(&str, &str, u64)]) -> Expanded {
        let mut files: Vec<(String, String, u64)> = (0..n)
            .map(|i| {
                let next = if i + 1 == n {
                    "/x".to_string()
                } else {
                    format!("/d/{}", i + 1)
                };
                (format!("/d/{i}"), format!("include {next}\n"), i + 10)
            })
            .collect();
        files.push(("/x".into(), x.into(), 50));
        let mut owned: Vec<(&str, &str, u64)> = files
            .iter()
            .map(|(p, b, i)| (p.as_str(), b.as_str(), *i))
            .collect();
        owned.extend_from_slice(extra);
        let mut read = reader(&owned);
        expand(
            b"/top",
            b"include /d/0\ninclude /x\n".to_vec(),
            None,
            None,
            &mut read,
        )
    }

    #[test]
    fn a_file_met_deep_and_shallow_keeps_its_includes() {
        // /x is 8 levels down one way (its includes would be cut there) and
        // 1 level down another: its include of /y applies.
        let e = chain_to_x(7, "include /y\n", &[("/y", "/secret\n", 51)]);
        assert!(
            paths(&e).contains(&"/y".to_string()),
            "{:?} {:?}",
            paths(&e),
            e.warnings
        );
        assert!(e.warnings.is_empty(), "{:?}", e.warnings);
    }

    #[test]
    fn a_file_already_read_named_again_too_deep_is_no_problem() {
        // /d/7 is at the depth bound; its include of /x would be too deep,
        // but /x was read already (from the list itself): its lines apply.
        let e = chain_to_x(8, "/secret\n", &[]);
        assert_eq!(e.files.len(), 10, "{:?}", paths(&e));
        assert!(e.warnings.is_empty(), "{:?}", e.warnings);
    }

    #[test]
    fn the_number_of_files_is_bounded() {
        let files: Vec<(String, String, u64)> = (0..100)
            .map(|i| (format!("/f/{i}"), "/x\n".to_string(), i + 10))
            .collect();
        let owned: Vec<(&str, &str, u64)> = files
            .iter()
            .map(|(p, b, i)| (p.as_str(), b.as_str(), *i))
            .collect();
        let mut read = reader(&owned);
        let top: String = (0..100).map(|i| format!("include /f/{i}\n")).collect();
        let e = expand(b"/top", top.into_bytes(), None, None, &mut read);
        assert_eq!(e.files.len(), MAX_INCLUDED_FILES + 1);
        assert!(
            e.warnings
                .iter()
                .all(|w| w.problem == IncludeProblem::TooMany)
        );
        assert_eq!(e.warnings.len(), 100 - MAX_INCLUDED_FILES);
    }

    #[test]
    fn defaults_off_reads_every_file_and_drops_whole_groups() {
        let files = [
            (
                "/c/recommended",
                "include /c/ssh\ninclude /c/ssh-extra\ninclude /c/cloud\n",
                1,
            ),
            ("/c/ssh", "~/.ssh/\n", 2),
            ("/c/ssh-extra", "~/.x\n", 3),
            ("/c/cloud", "~/.aws/credentials\n", 4),
        ];
        let mut read = reader(&files);
        let mut e = expand(
            b"/etc/defaults",
            b"include /c/recommended\n".to_vec(),
            None,
            None,
            &mut read,
        );
        let unknown = e.drop_groups(
            b"/c",
            &[
                b"ssh".to_vec(),
                b"clouds".to_vec(),
                b"recommended".to_vec(),
                b"clouds".to_vec(),
            ],
        );
        assert_eq!(
            paths(&e),
            [
                "/etc/defaults",
                "/c/recommended",
                "/c/ssh-extra",
                "/c/cloud"
            ]
        );
        // A misspelt group, and the file that includes the groups (no group:
        // it stays, with its groups), are named back, once each.
        assert_eq!(unknown, [b"clouds".to_vec(), b"recommended".to_vec()]);
        assert_eq!(e.files[3].from, Some((1, 3)), "indexes still hold");
        let mut read = reader(&[("/home/u/more", "defaults off cloud\n", 5)]);
        let own = expand(
            b"/home/u/list",
            b"defaults off ssh\ninclude ~/more\n".to_vec(),
            None,
            Some(b"/home/u"),
            &mut read,
        );
        assert_eq!(
            own.defaults_off(),
            Some(vec![b"ssh".to_vec(), b"cloud".to_vec()])
        );
        let mut read = reader(&[]);
        let all = expand(
            b"/home/u/list",
            b"defaults off ssh\ndefaults off\n".to_vec(),
            None,
            None,
            &mut read,
        );
        assert_eq!(all.defaults_off(), Some(vec![]));
        let none = expand(b"/home/u/list", b"/x\n".to_vec(), None, None, &mut read);
        assert_eq!(none.defaults_off(), None);
    }

    /// The shipped catalogue (packaging/catalog/, installed in
    /// /usr/share/agent-sandbox-exec/catalog/): every line of every group is
    /// accepted, each group says how to include it, and `recommended`
    /// includes every group but agent-logins and agent-settings (which keep
    /// an agent from logging in: the groups' comments say why), with
    /// nothing left over.
    #[test]
    fn the_shipped_catalogue_parses_cleanly() {
        const DIR: &str = "/usr/share/agent-sandbox-exec/catalog";
        let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("packaging/catalog");
        let mut groups: Vec<String> = std::fs::read_dir(&src)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        groups.sort();
        assert!(groups.len() >= 10, "{groups:?}");
        let mut files: Vec<(String, String, u64)> = Vec::new();
        let mut shapes = std::collections::BTreeSet::new();
        for (i, g) in groups.iter().enumerate() {
            let text = std::fs::read_to_string(src.join(g)).unwrap();
            let p = denylist::parse(text.as_bytes());
            assert!(p.warnings.is_empty(), "{g}: {:?}", p.warnings);
            assert!(p.sockets.is_empty() && p.audit_all.is_none(), "{g}");
            assert!(
                p.entries.iter().all(|e| !e.audit
                    && (e.anchor == Anchor::Home
                        || (e.anchor == Anchor::Anywhere
                            && (e.pattern.is_some() || e.repo_guard)))),
                "{g}: the groups name files in the home, or names anywhere, enforced"
            );
            for e in p.entries.iter().filter_map(|e| e.pattern.as_ref()) {
                shapes.insert(e.shape_text());
            }
            // An exception re-allows writing too: every excepted file is
            // read-only as well (what the agent wrote there would be run,
            // copied to a server or trusted later, outside). A pattern's
            // exceptions name templates that hold no secret, which an
            // agent scaffolding a project writes.
            for e in p
                .entries
                .iter()
                .filter(|e| e.exception && e.pattern.is_none())
            {
                let name = String::from_utf8_lossy(e.path);
                assert!(
                    !name.contains("authorized_keys"),
                    "{g}: {name}: sshd's, never a client's"
                );
                assert!(
                    p.entries
                        .iter()
                        .any(|r| r.readonly && r.path == e.path && r.dir == e.dir),
                    "{g}: {name} is excepted but not read-only"
                );
            }
            assert!(
                text.contains(&format!("`include {DIR}/{g}`")),
                "{g}: says how to include it"
            );
            files.push((format!("{DIR}/{g}"), text, i as u64 + 10));
        }
        // Room for the users' own patterns on the machine's shapes.
        assert!(
            shapes.len() <= crate::lists::pattern::MAX_SHAPES / 2,
            "{} shapes: {shapes:?}",
            shapes.len()
        );
        let owned: Vec<(&str, &str, u64)> = files
            .iter()
            .map(|(p, t, i)| (p.as_str(), t.as_str(), *i))
            .collect();
        let mut read = reader(&owned);
        let e = expand(
            b"/home/u/list",
            format!("include {DIR}/recommended\n").into_bytes(),
            None,
            Some(b"/home/u"),
            &mut read,
        );
        assert!(e.warnings.is_empty(), "{:?}", e.warnings);
        let mut got: Vec<String> = paths(&e)[1..].to_vec();
        got.sort();
        let want: Vec<String> = groups
            .iter()
            .filter(|g| *g != "agent-logins" && *g != "agent-settings")
            .map(|g| format!("{DIR}/{g}"))
            .collect();
        assert_eq!(got, want);
    }
}
