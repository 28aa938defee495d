//! Name patterns: the last component of a list line with `*` or `?`
//! (`**/.env`, `**/*.pem`, `~/.ssh/id_*`), matched live by the hooks against
//! the opened dentry's own name. Pure; no I/O.
//!
//! A pattern is a *shape* (which bytes of a name it looks at: a fixed head,
//! an optional `*`, a fixed tail, `?` holes) and the bytes it wants there.
//! The hook does not compare strings: for each shape in use (at most
//! [`MAX_SHAPES`] on the machine) it hashes the name's bytes under the
//! shape's masks and looks the hash up, so the cost of an open grows with
//! the number of shapes, not of patterns. This module is the one definition
//! of that hash on the Rust side; `src/bpf/agent_sandbox.h`
//! (`agent_sandbox_mix()`, `agent_sandbox_fold()`) and `src/bpf/patterns.bpf.h`
//! are the C side, and the unit test below holds values computed with gcc
//! from the header.
//!
//! Matching is by bytes, ASCII letters in either case (`**/.env` covers
//! `.ENV`); `*` matches any run of bytes (none too), `?` exactly one byte;
//! neither matches `/` (a name has none). `\` makes the next byte literal.

use std::fmt;

/// How many bytes of a name's start, and of its end, a pattern can look at
/// (`AGENT_SANDBOX_PATTERN_WINDOW`, agent_sandbox.h): the longest fixed head
/// and the longest fixed tail, and the longest name without `*`.
pub const WINDOW: usize = 64;

/// How many shapes the machine's patterns may use together
/// (`AGENT_SANDBOX_MAX_SHAPES`, agent_sandbox.h).
pub const MAX_SHAPES: usize = 32;

/// Characters of a pattern key's name: the 64-bit hash, 6 bits a character.
pub const KEY_CHARS: usize = 11;

/// How many of the machine's shapes may be deep ones (`DIR/**/NAME`;
/// `AGENT_SANDBOX_MAX_DEEP_SHAPES`, agent_sandbox.h): each costs a walk up
/// from a name of its shape, with one `key_filter` test per directory.
pub const MAX_DEEP_SHAPES: usize = 4;

/// One byte position of a pattern's fixed part: a byte (ASCII lowercased)
/// or `?` (any byte).
type Slot = Option<u8>;

/// A parsed name pattern: its head and, after a `*`, its tail.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct NamePattern {
    head: Vec<Slot>,
    tail: Option<Vec<Slot>>,
}

/// Why a last component is not a pattern the hook can match.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PatternProblem {
    /// More than one `*` in the name.
    TwoStars,
    /// `[`: character classes are not supported.
    Class,
    /// A `\` with nothing after it.
    TrailingEscape,
    /// The fixed part before or after `*` (or a name without `*`) is
    /// longer than [`WINDOW`] bytes; holds its length.
    TooLong(usize),
    /// The pattern is `*` alone (every name).
    Everything,
    /// `**` elsewhere than as the last directory before the name, or
    /// `/**/NAME` (which is `**/NAME`).
    DeepScope,
    /// `*`, `?` or `[` in a directory part of the path (`~/a*/x`).
    GlobInDirectory,
    /// A directory entry (`DIR/`) with `*` or `?` in it.
    DirectoryPattern,
    /// `audit` or `readonly` before a pattern.
    NotReadEntry,
}

impl fmt::Display for PatternProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PatternProblem::TwoStars => f.write_str(
                "a name pattern may hold one `*` (e.g. `**/.env.*`, `~/.ssh/id_*`); line skipped",
            ),
            PatternProblem::Class => f.write_str(
                "`[` character classes are not supported in a name pattern (write `\\[` for a \
                 literal `[`, or one line per name); line skipped",
            ),
            PatternProblem::TrailingEscape => {
                f.write_str("a name pattern ends in `\\`, which escapes nothing; line skipped")
            }
            PatternProblem::TooLong(n) => write!(
                f,
                "a name pattern's fixed part is {n} bytes; at most {WINDOW} before and {WINDOW} \
                 after its `*`; line skipped"
            ),
            PatternProblem::Everything => f.write_str(
                "a name pattern of `*` alone matches every file; name a directory entry \
                 (`DIR/`) instead; line skipped",
            ),
            PatternProblem::DeepScope => f.write_str(
                "`**` stands only as the last directory before the name (`DIR/**/NAME`: NAME \
                 at any depth below DIR); for every directory write `**/NAME`; line skipped",
            ),
            PatternProblem::GlobInDirectory => f.write_str(
                "`*`, `?` and `[` match in the last component only (`**/NAME` covers every \
                 directory); escape a literal one with `\\`; line skipped",
            ),
            PatternProblem::DirectoryPattern => f.write_str(
                "a directory entry (ending in `/`) cannot be a pattern; a pattern covers files \
                 by their own name; line skipped",
            ),
            PatternProblem::NotReadEntry => {
                f.write_str("`audit` and `readonly` do not take a name pattern yet; line skipped")
            }
        }
    }
}

/// The directory a `DIR/NAME` or `DIR/**/NAME` line covers, from its path
/// `path` (absolute, `~/` joined): the part before the last `/`, less a
/// trailing `/**`; `/` for a name at the root.
pub fn scope_dir(path: &[u8]) -> &[u8] {
    let dir = match path.iter().rposition(|&b| b == b'/') {
        Some(0) | None => return b"/",
        Some(i) => &path[..i],
    };
    match dir.strip_suffix(b"/**") {
        Some(b"") => b"/",
        Some(d) => d,
        None => dir,
    }
}

/// Whether `component` (one path component, as written) is a pattern:
/// it holds `*`, `?` or `\` (an escape: `\*` is a literal `*`).
pub fn is_pattern(component: &[u8]) -> bool {
    component.iter().any(|&b| matches!(b, b'*' | b'?' | b'\\'))
}

/// Whether `path` (as written, no last-component rule) holds a glob byte
/// `*`, `?` or `[` anywhere.
pub fn has_glob(path: &[u8]) -> bool {
    path.iter().any(|&b| matches!(b, b'*' | b'?' | b'['))
}

/// ASCII lowercase of one byte (the fold the hook applies to names).
fn fold(b: u8) -> u8 {
    b.to_ascii_lowercase()
}

impl NamePattern {
    /// Parses one last component as written in a list.
    ///
    /// # Errors
    /// [`PatternProblem`]: two stars, a class, a trailing `\`, a fixed part
    /// longer than [`WINDOW`], or `*` alone.
    pub fn parse(component: &[u8]) -> Result<NamePattern, PatternProblem> {
        let mut head = Vec::new();
        let mut tail: Option<Vec<Slot>> = None;
        let mut bytes = component.iter();
        while let Some(&b) = bytes.next() {
            let slot = match b {
                b'\\' => Some(fold(*bytes.next().ok_or(PatternProblem::TrailingEscape)?)),
                b'*' => {
                    if tail.is_some() {
                        return Err(PatternProblem::TwoStars);
                    }
                    tail = Some(Vec::new());
                    continue;
                }
                b'?' => None,
                b'[' => return Err(PatternProblem::Class),
                _ => Some(fold(b)),
            };
            match &mut tail {
                Some(t) => t.push(slot),
                None => head.push(slot),
            }
        }
        for part in std::iter::once(&head).chain(tail.as_ref()) {
            if part.len() > WINDOW {
                return Err(PatternProblem::TooLong(part.len()));
            }
        }
        if head.is_empty() && tail.as_ref().is_some_and(Vec::is_empty) {
            return Err(PatternProblem::Everything);
        }
        Ok(NamePattern { head, tail })
    }

    /// Whether the pattern matches `name` (one component), as the hook
    /// decides it: ASCII case folded, `?` one byte, `*` any run.
    pub fn matches(&self, name: &[u8]) -> bool {
        let fits = |part: &[Slot], bytes: &[u8]| {
            part.iter()
                .zip(bytes)
                .all(|(s, &b)| s.is_none_or(|c| c == fold(b)))
        };
        match &self.tail {
            None => name.len() == self.head.len() && fits(&self.head, name),
            Some(tail) => {
                name.len() >= self.head.len() + tail.len()
                    && fits(&self.head, &name[..self.head.len()])
                    && fits(tail, &name[name.len() - tail.len()..])
            }
        }
    }

    /// The shape of this pattern used below one directory at any depth
    /// (`DIR/**/NAME`): [`NamePattern::shape_text`] after a `+` (a shape
    /// key's name holds no `/`).
    pub fn deep_shape_text(&self) -> Vec<u8> {
        [&b"+"[..], &self.shape_text()].concat()
    }

    /// The hash of this pattern as a deep one ([`NamePattern::deep_shape_text`]'s seed).
    pub fn deep_hash(&self) -> u64 {
        self.hash_under(Shape::parse(&self.deep_shape_text()).expect("a valid deep shape"))
    }

    /// The name of this pattern's deep key ([`key_name`] of [`NamePattern::deep_hash`]).
    pub fn deep_key_name(&self) -> Vec<u8> {
        key_name(self.deep_hash())
    }

    /// The shape, as text: `x` for a fixed byte, `?`, and `*` (`.env.*` is
    /// `xxxxx*`). What a shape key's name holds ([`Shape::parse`]).
    pub fn shape_text(&self) -> Vec<u8> {
        let mut out =
            Vec::with_capacity(self.head.len() + 1 + self.tail.as_ref().map_or(0, Vec::len));
        let mark = |s: &Slot| if s.is_some() { b'x' } else { b'?' };
        out.extend(self.head.iter().map(mark));
        if let Some(t) = &self.tail {
            out.push(b'*');
            out.extend(t.iter().map(mark));
        }
        out
    }

    /// The bit of the patterns' first test (`struct pattern_prefilter`,
    /// agent_sandbox.h) every name this pattern matches sets, as the name of
    /// its [`crate::lists::entries::KIND_PAT_PREFILTER`] key: `h` and the
    /// pattern's first three (or, when only two are fixed, two) bytes, else
    /// `t` and its last three or two (the end of the tail after `*`, or of
    /// the whole pattern without one), else `*` (the test cannot rule a
    /// name out: the prefilter is off while the pattern is used). Bytes are
    /// ASCII-folded, as the hook folds the name's.
    pub fn prefilter(&self) -> Vec<u8> {
        let fixed = |part: &[Slot]| -> Vec<u8> { part.iter().map_while(|s| *s).take(3).collect() };
        let start = fixed(&self.head);
        let end: Vec<u8> = match &self.tail {
            Some(t) => t.iter().rev().map_while(|s| *s).take(3).collect(),
            None => self.head.iter().rev().map_while(|s| *s).take(3).collect(),
        };
        if start.len() >= 2 {
            [&b"h"[..], &start].concat()
        } else if end.len() >= 2 {
            std::iter::once(b't').chain(end.into_iter().rev()).collect()
        } else {
            b"*".to_vec()
        }
    }

    /// The shape the hook hashes this pattern's names under.
    pub fn shape(&self) -> Shape {
        Shape::parse(&self.shape_text()).expect("a parsed pattern's shape text is valid")
    }

    /// The hash the hook computes for a name this pattern matches: the
    /// shape's seed, then the head words and the tail words under its masks
    /// (see [`Shape`]).
    pub fn hash(&self) -> u64 {
        self.hash_under(self.shape())
    }

    /// The hash under `shape` (this pattern's, deep or not).
    fn hash_under(&self, shape: Shape) -> u64 {
        let bytes = |part: &[Slot]| -> Vec<u8> { part.iter().map(|s| s.unwrap_or(0)).collect() };
        let head = bytes(&self.head);
        let tail = self.tail.as_deref().map(bytes).unwrap_or_default();
        shape.hash_words(|k| word_at(&head, 8 * k), |j| tail_word(&tail, j))
    }

    /// The name of this pattern's key ([`key_name`] of [`NamePattern::hash`]).
    pub fn key_name(&self) -> Vec<u8> {
        key_name(self.hash())
    }
}

/// The word the hook loads from `bytes[at..at + 8]` (native byte order, as
/// a load from memory gives it), zero past the end.
fn word_at(bytes: &[u8], at: usize) -> u64 {
    let mut w = [0u8; 8];
    for (i, slot) in w.iter_mut().enumerate() {
        *slot = bytes.get(at + i).copied().unwrap_or(0);
    }
    u64::from_ne_bytes(w)
}

/// Word `j` from the end of `bytes`: its last 8 bytes for `j` 0, the 8
/// before for 1, ..., as the hook loads those bytes in order (native byte
/// order; zero before the start).
fn tail_word(bytes: &[u8], j: usize) -> u64 {
    let mut w = [0u8; 8];
    let end = bytes.len() as isize - 8 * j as isize;
    for (t, slot) in w.iter_mut().enumerate() {
        let at = end - 8 + t as isize;
        if at >= 0 {
            *slot = bytes.get(at as usize).copied().unwrap_or(0);
        }
    }
    u64::from_ne_bytes(w)
}

/// The bit of `struct pattern_prefilter` for `bytes` (2 or 3, in name
/// order) at `side` (0 a name's start, 1 its end): as
/// agent_sandbox_prefilter_bit() in agent_sandbox.h computes it.
pub fn prefilter_bit(side: u8, bytes: &[u8]) -> usize {
    let b = |i: usize| u64::from(bytes.get(i).copied().unwrap_or(0));
    let x = b(0) | b(1) << 8 | b(2) << 16 | (bytes.len() as u64) << 24 | u64::from(side) << 28;
    (x.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 48) as usize
}

/// `agent_sandbox_mix()` (agent_sandbox.h): one word into the hash.
pub fn mix(h: u64, w: u64) -> u64 {
    let h = (h ^ w).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    h ^ (h >> 29)
}

/// `agent_sandbox_fold()` (agent_sandbox.h): ASCII `A`-`Z` of each byte of
/// a word lowercased, without a branch.
pub fn fold_word(w: u64) -> u64 {
    u64::from_ne_bytes(w.to_ne_bytes().map(fold))
}

/// The name of a pattern key in name_map for hash `h`: [`KEY_CHARS`]
/// characters, character `i` `0x40 + ((h >> 6i) & 63)` (`@` to DEL: no `/`,
/// no NUL), as `pattern_key_name()` writes it (patterns.bpf.h).
pub fn key_name(h: u64) -> Vec<u8> {
    (0..KEY_CHARS)
        .map(|i| 0x40 + ((h >> (6 * i)) & 63) as u8)
        .collect()
}

/// The hash [`key_name`] holds, if `name` is one.
pub fn hash_of_key_name(name: &[u8]) -> Option<u64> {
    if name.len() != KEY_CHARS || name.iter().any(|&c| !(0x40..0x80).contains(&c)) {
        return None;
    }
    Some(
        name.iter()
            .enumerate()
            .fold(0u64, |h, (i, &c)| h | (u64::from(c - 0x40) << (6 * i))),
    )
}

/// Which bytes of a name a pattern looks at, as the hook's
/// `struct pattern_shape` (agent_sandbox.h) holds it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Shape {
    /// The shape text ([`NamePattern::shape_text`]).
    pub text: Vec<u8>,
    /// The hash's start: [`mix`] of each shape-text byte from 0, so two
    /// shapes never share a key.
    pub seed: u64,
    /// A deep shape (its text starts with `+`): the shape of `DIR/**/NAME`
    /// patterns, looked up at each directory above a name.
    pub deep: bool,
    /// Byte masks: words 0..8 of the name's head, then 8..16 of its tail
    /// (word `j` from the end; see [`NamePattern::hash`]).
    pub masks: [u64; 16],
    /// Head words hashed (0 to 8).
    pub head_words: u8,
    /// Tail words hashed (0 to 8).
    pub tail_words: u8,
    /// The shortest name it can match.
    pub min_len: u8,
    /// The one length it matches (no `*`), or 0.
    pub exact_len: u8,
}

impl Shape {
    /// A shape from its text (`x`, `?`, at most one `*`, fixed parts at
    /// most [`WINDOW`] bytes, not `*` alone); None otherwise.
    pub fn parse(full: &[u8]) -> Option<Shape> {
        let (deep, text) = match full.strip_prefix(b"+") {
            Some(rest) => (true, rest),
            None => (false, full),
        };
        if text.iter().any(|&c| !matches!(c, b'x' | b'?' | b'*')) {
            return None;
        }
        let star = text.iter().position(|&c| c == b'*');
        let (head, tail) = match star {
            Some(i) => (&text[..i], &text[i + 1..]),
            None => (text, &text[..0]),
        };
        if tail.contains(&b'*')
            || head.len() > WINDOW
            || tail.len() > WINDOW
            || head.len() + tail.len() == 0
        {
            return None;
        }
        // Byte masks in memory order, as the hook's words hold the bytes.
        let mut bytes = [[0u8; 8]; 16];
        for (i, &c) in head.iter().enumerate() {
            if c == b'x' {
                bytes[i / 8][i % 8] = 0xff;
            }
        }
        for (q, &c) in tail.iter().rev().enumerate() {
            if c == b'x' {
                bytes[8 + q / 8][7 - q % 8] = 0xff;
            }
        }
        let masks = bytes.map(u64::from_ne_bytes);
        let seed = full.iter().fold(0, |h, &c| mix(h, u64::from(c)));
        Some(Shape {
            text: full.to_vec(),
            deep,
            seed,
            masks,
            head_words: head.len().div_ceil(8) as u8,
            tail_words: tail.len().div_ceil(8) as u8,
            min_len: (head.len() + tail.len()) as u8,
            exact_len: if star.is_none() { head.len() as u8 } else { 0 },
        })
    }

    /// The hash under this shape of the words `head(k)` and `tail(j)`.
    fn hash_words(&self, head: impl Fn(usize) -> u64, tail: impl Fn(usize) -> u64) -> u64 {
        let mut h = self.seed;
        for k in 0..usize::from(self.head_words) {
            h = mix(h, fold_word(head(k)) & self.masks[k]);
        }
        for j in 0..usize::from(self.tail_words) {
            h = mix(h, fold_word(tail(j)) & self.masks[8 + j]);
        }
        h
    }

    /// The hash the hook computes under this shape for `name`, or None
    /// when the shape does not apply to its length (the hook's model, for
    /// tests).
    #[cfg(test)]
    pub fn hash_name(&self, name: &[u8]) -> Option<u64> {
        let len = name.len();
        if len < usize::from(self.min_len)
            || (self.exact_len != 0 && len != usize::from(self.exact_len))
        {
            return None;
        }
        Some(self.hash_words(|k| word_at(name, 8 * k), |j| tail_word(name, j)))
    }

    /// `struct pattern_shape` (agent_sandbox.h) in use, native byte order:
    /// seed, the 16 masks, then state 2 (in use), head_words, tail_words,
    /// min_len, exact_len, deep and 2 bytes of padding. 144 bytes.
    pub fn c_bytes(&self) -> [u8; SHAPE_LEN] {
        let mut out = [0u8; SHAPE_LEN];
        out[..8].copy_from_slice(&self.seed.to_ne_bytes());
        for (i, m) in self.masks.iter().enumerate() {
            out[8 + 8 * i..16 + 8 * i].copy_from_slice(&m.to_ne_bytes());
        }
        out[SHAPE_STATE_AT] = SHAPE_IN_USE;
        out[137] = self.head_words;
        out[138] = self.tail_words;
        out[139] = self.min_len;
        out[140] = self.exact_len;
        out[141] = u8::from(self.deep);
        out
    }
}

/// Length of `struct pattern_shape` (agent_sandbox.h).
pub const SHAPE_LEN: usize = 144;
/// Offset of `pattern_shape.state` (after the seed and the 16 masks).
pub const SHAPE_STATE_AT: usize = 136;
/// `pattern_shape.state`: no shape here or in any later slot.
#[cfg(test)]
pub const SHAPE_END: u8 = 0;
/// `pattern_shape.state`: no shape here; later slots may hold one.
pub const SHAPE_FREE: u8 = 1;
/// `pattern_shape.state`: the slot holds a shape.
pub const SHAPE_IN_USE: u8 = 2;

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> NamePattern {
        NamePattern::parse(s.as_bytes()).unwrap()
    }

    #[test]
    fn patterns_parse_and_match_by_bytes_with_ascii_case_folded() {
        assert!(p(".env").matches(b".env"));
        assert!(p(".env").matches(b".ENV"));
        assert!(!p(".env").matches(b".env2"));
        assert!(p(".env.*").matches(b".env."));
        assert!(p(".env.*").matches(b".env.production"));
        assert!(!p(".env.*").matches(b".env"));
        assert!(p("*.pem").matches(b"server.PEM"));
        assert!(p("*.pem").matches(b".pem"));
        assert!(!p("*.pem").matches(b"pem"));
        assert!(p("id_*").matches(b"id_ed25519"));
        assert!(p("id_*.pub").matches(b"id_rsa.pub"));
        assert!(!p("id_*.pub").matches(b"id_.pu"));
        assert!(p("terraform.tfstate*").matches(b"terraform.tfstate.backup"));
        assert!(p("key?.json").matches(b"key1.json"));
        assert!(!p("key?.json").matches(b"key12.json"));
        assert!(p(r"a\*b").matches(b"a*b"));
        assert!(!p(r"a\*b").matches(b"axb"));
        assert_eq!(p(r"a\*b").shape_text(), b"xxx");
        assert_eq!(p(".env.*").shape_text(), b"xxxxx*");
        assert_eq!(p("id_??_*x").shape_text(), b"xxx??x*x");
        assert_eq!(NamePattern::parse(b"a*b*"), Err(PatternProblem::TwoStars));
        assert_eq!(NamePattern::parse(b"[ab]"), Err(PatternProblem::Class));
        assert_eq!(
            NamePattern::parse(b"ab\\"),
            Err(PatternProblem::TrailingEscape)
        );
        assert_eq!(NamePattern::parse(b"*"), Err(PatternProblem::Everything));
        let long = vec![b'a'; WINDOW + 1];
        assert_eq!(
            NamePattern::parse(&long),
            Err(PatternProblem::TooLong(WINDOW + 1))
        );
        let mut ok = vec![b'a'; WINDOW];
        ok.push(b'*');
        ok.extend(vec![b'b'; WINDOW]);
        assert!(NamePattern::parse(&ok).is_ok());
    }

    /// The hook's hash of a name equals the pattern's exactly when the
    /// pattern matches (for these names; a 64-bit collision aside).
    #[test]
    fn the_hook_s_hash_of_a_name_is_the_pattern_s_exactly_when_it_matches() {
        let pats = [
            ".env",
            ".env.*",
            "*.pem",
            "id_*",
            "id_*.pub",
            "key?.json",
            "terraform.tfstate*",
            "?",
            "*?x",
            "a?c*d?f",
        ];
        let mut long_head = vec![b'q'; 70];
        long_head.extend_from_slice(b".pem");
        let names: Vec<Vec<u8>> = [
            &b".env"[..],
            b".ENV",
            b".env.local",
            b".env.",
            b"a.pem",
            b"x.PEM",
            b".pem",
            b"id_rsa",
            b"id_rsa.pub",
            b"id_.pub",
            b"key1.json",
            b"keyX.JSON",
            b"key12.json",
            b"terraform.tfstate",
            b"terraform.tfstate.backup",
            b"x",
            b"xx",
            b"abcXdYf",
            b"abcdef",
            b"main.rs",
            b"envrc",
            &long_head,
        ]
        .iter()
        .map(|n| n.to_vec())
        .collect();
        for pat in pats {
            let pat = p(pat);
            let shape = pat.shape();
            for name in &names {
                let hooked = shape.hash_name(name) == Some(pat.hash());
                assert_eq!(
                    hooked,
                    pat.matches(name),
                    "{pat:?} {:?}",
                    String::from_utf8_lossy(name)
                );
            }
        }
    }

    #[test]
    fn a_deep_pattern_has_a_shape_and_keys_of_its_own() {
        let t = p("terraform.tfstate*");
        let deep = Shape::parse(&t.deep_shape_text()).unwrap();
        assert!(deep.deep && !t.shape().deep);
        assert_eq!(
            (deep.masks, deep.min_len),
            (t.shape().masks, t.shape().min_len)
        );
        assert_ne!(deep.seed, t.shape().seed);
        assert_ne!(t.deep_hash(), t.hash());
        assert_eq!(
            deep.hash_name(b"terraform.tfstate.backup"),
            Some(t.deep_hash())
        );
        assert_eq!(deep.c_bytes()[141], 1);
        assert!(Shape::parse(b"++x").is_none());
    }

    #[test]
    fn a_line_s_scope_directory() {
        assert_eq!(scope_dir(b"/home/u/.ssh/id_*"), b"/home/u/.ssh");
        assert_eq!(scope_dir(b"/home/u/projects/**/x*"), b"/home/u/projects");
        assert_eq!(scope_dir(b"/id_*"), b"/");
        assert_eq!(scope_dir(b"/**/x"), b"/");
    }

    #[test]
    fn key_names_round_trip_and_avoid_slash_and_nul() {
        for h in [0, 1, u64::MAX, 0x0123_4567_89ab_cdef, p(".env").hash()] {
            let n = key_name(h);
            assert_eq!(n.len(), KEY_CHARS);
            assert!(!n.contains(&b'/') && !n.contains(&0));
            assert_eq!(hash_of_key_name(&n), Some(h));
        }
        assert_eq!(hash_of_key_name(b"short"), None);
    }

    #[test]
    fn shapes_parse_from_their_text_only() {
        assert!(Shape::parse(b"xx*x").is_some());
        assert!(Shape::parse(b"*").is_none());
        assert!(Shape::parse(b"x*x*").is_none());
        assert!(Shape::parse(b"xa").is_none());
        let s = Shape::parse(b"xxxxx*").unwrap();
        assert_eq!(
            (s.head_words, s.tail_words, s.min_len, s.exact_len),
            (1, 0, 5, 0)
        );
        assert_eq!(
            s.masks[0].to_ne_bytes(),
            [0xff, 0xff, 0xff, 0xff, 0xff, 0, 0, 0]
        );
        let s = Shape::parse(b"*xxxx").unwrap();
        assert_eq!(
            s.masks[8].to_ne_bytes(),
            [0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff]
        );
        let c = s.c_bytes();
        assert_eq!(c[SHAPE_STATE_AT], SHAPE_IN_USE);
        assert_eq!(c[139], 4);
    }

    /// Values of agent_sandbox_mix() and agent_sandbox_fold() computed with
    /// gcc from src/bpf/agent_sandbox.h (x86-64).
    #[test]
    fn mix_and_fold_equal_the_c_header_s() {
        assert_eq!(
            fold_word(u64::from_le_bytes(*b"AbZ[@z.E")),
            u64::from_le_bytes(*b"abz[@z.e")
        );
        assert_eq!(fold_word(0xc1c2_dada_4142_5a5b), 0xc1c2_dada_6162_7a5b);
        assert_eq!(mix(0, 0), GCC_MIX_0_0);
        assert_eq!(
            mix(0x0123_4567_89ab_cdef, u64::from_le_bytes(*b".env\0\0\0\0")),
            GCC_MIX_ENV
        );
    }

    /// agent_sandbox_prefilter_bit() computed with gcc from
    /// src/bpf/agent_sandbox.h (x86-64).
    #[test]
    fn the_prefilter_bit_equals_the_c_header_s() {
        assert_eq!(prefilter_bit(0, b".e"), 50172);
        assert_eq!(prefilter_bit(0, b".en"), 52016);
        assert_eq!(prefilter_bit(1, b"pem"), 46009);
        assert_eq!(prefilter_bit(1, b"rs"), 27477);
    }

    const GCC_MIX_0_0: u64 = 0;
    const GCC_MIX_ENV: u64 = 0x7787_3bbc_8387_8e2c;
}
