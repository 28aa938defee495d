//! agent-sandbox-exec: a BPF-LSM file-read denylist for interactive CLI coding agents.
//!
//! One multi-call binary; the name it is run as picks the mode:
//! - `agent-sandbox-execd` — the root daemon ([`daemon`]): loads and attaches the
//!   `lsm/file_open` program, owns `deny_map` and `agent_cgid_set`, and moves
//!   authenticated launchers into their `agent-sandbox-exec/uid-<uid>` cgroup.
//! - `agent-sandbox-exec` — the launcher ([`launcher`]), for any user: asks the
//!   daemon for its sandbox, checks it is in it, and execs the agent.
//! - `agent-sandbox-exec-resolver` — a list resolver ([`resolve`]), started
//!   only by the daemon: turns one uid's lists into deny keys.
//!
//! Follow one launch: [`launcher`] → [`request`] → [`daemon`] ([`admission`])
//! → ([`resolve`]: [`denylist`] → [`keys`]) → [`maps`] → [`cgroup`] →
//! [`request`] reply → exec.

#![cfg_attr(not(test), no_main)]

// Layers, lowest first; a module imports only from the layers below it and
// its own folder (docs/DESIGN.md "Layout and the import rule";
// `import_rule` below checks it).
mod error;
mod kernel;
mod lists;
mod os;
mod policy;
mod proto;
mod resolve;
// The modes: each is an entry point, none imports another.
mod daemon;
mod launcher;
mod resolver;
#[cfg(test)]
mod wiring_tests;

use std::ffi::{OsStr, OsString};
use std::path::Path;

/// What the binary does, chosen from argv[0].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Daemon,
    Launcher,
    Resolver,
}

/// Maps the program name (argv[0], any directory part ignored) to a mode.
fn mode_for(argv0: &OsStr) -> Option<Mode> {
    match Path::new(argv0).file_name()?.to_str()? {
        "agent-sandbox-execd" => Some(Mode::Daemon),
        "agent-sandbox-exec" => Some(Mode::Launcher),
        proto::resolver::WORKER_NAME => Some(Mode::Resolver),
        _ => None,
    }
}

/// Runs the mode argv[0] names; returns the exit status.
#[cfg_attr(test, allow(dead_code))]
fn run() -> u8 {
    let args: Vec<OsString> = std::env::args_os().collect();
    let argv0 = args.first().cloned().unwrap_or_default();
    match mode_for(&argv0) {
        Some(Mode::Daemon) => daemon::main(&args[1..]),
        Some(Mode::Launcher) => launcher::main(&args[1..]),
        Some(Mode::Resolver) => resolver::main(&args[1..]),
        None => {
            eprintln!(
                "{}: run this binary as agent-sandbox-exec (launcher) or agent-sandbox-execd (daemon)",
                argv0.to_string_lossy()
            );
            64
        }
    }
}

/// The C entry point (`#![no_main]`): the Rust runtime's start-up is skipped
/// because it looks up the main thread's stack guard with glibc's
/// `pthread_getattr_np`, which reads and parses /proc/self/maps on every
/// start — a fifth of the launcher's user-space instructions, paid by every
/// agent launch (BENCHMARKS.md). What this binary needs of that start-up is
/// done here: SIGPIPE is ignored (a closed pipe is a write error, not death;
/// `exec` restores the default for the program), a panic exits 101, and
/// stdout is flushed at the end. `std::env::args_os` works as before: glibc
/// hands argv to std's `.init_array` hook.
#[cfg(not(test))]
#[unsafe(no_mangle)]
pub extern "C" fn main(
    _argc: std::ffi::c_int,
    _argv: *const *const std::ffi::c_char,
) -> std::ffi::c_int {
    // Before any thread exists.
    os::sys::ignore_sigpipe();
    let code = std::panic::catch_unwind(run).unwrap_or(101);
    let _ = std::io::Write::flush(&mut std::io::stdout());
    std::ffi::c_int::from(code)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::error_chain;

    #[test]
    fn argv0_dispatch() {
        assert_eq!(
            mode_for(OsStr::new("agent-sandbox-execd")),
            Some(Mode::Daemon)
        );
        assert_eq!(
            mode_for(OsStr::new("/usr/sbin/agent-sandbox-execd")),
            Some(Mode::Daemon)
        );
        assert_eq!(
            mode_for(OsStr::new("agent-sandbox-exec")),
            Some(Mode::Launcher)
        );
        assert_eq!(
            mode_for(OsStr::new("./target/release/agent-sandbox-exec")),
            Some(Mode::Launcher)
        );
        assert_eq!(
            mode_for(OsStr::new("agent-sandbox-exec-resolver")),
            Some(Mode::Resolver)
        );
        assert_eq!(mode_for(OsStr::new("agent-sandbox-exec-foo")), None);
        assert_eq!(mode_for(OsStr::new("sh")), None);
        assert_eq!(mode_for(OsStr::new("")), None);
    }

    #[test]
    fn error_chain_joins_sources() {
        let inner = std::io::Error::other("inner cause");
        let outer = crate::daemon::failure::DaemonError::Setup {
            what: "step".into(),
            cause: inner,
        };
        assert_eq!(error_chain(&outer), "step: inner cause");
        // Through a transparent wrapper, the cause is printed once.
        let wrapped =
            crate::daemon::failure::DaemonError::Cgroup(crate::os::cgroup::CgroupError::Io {
                what: "mkdir",
                path: "/sys/fs/cgroup/x".into(),
                cause: std::io::Error::other("inner cause"),
            });
        let text = error_chain(&wrapped);
        assert_eq!(text, "mkdir /sys/fs/cgroup/x: inner cause");
        assert_eq!(wrapped.to_string(), text);
    }
}

/// The import rule of docs/DESIGN.md ("Layout and the import rule"), checked
/// on the sources: a module imports only its own folder and the layers below
/// it; the modes import no other mode; nothing imports main.rs; nothing
/// re-exports; `unsafe` code only in src/os/ and src/kernel/.
#[cfg(test)]
mod import_rule {
    /// The folders (and top-level files) by layer, lowest first.
    const LAYERS: [&[&str]; 7] = [
        &["error", "lists"],
        &["os"],
        &["resolve"],
        &["proto"],
        &["policy"],
        &["kernel"],
        &["daemon", "launcher", "resolver"],
    ];

    fn layer(name: &str) -> Option<usize> {
        LAYERS.iter().position(|l| l.contains(&name))
    }

    /// The folders that may hold `unsafe` code: the system-call wrappers
    /// and the BPF object's.
    const UNSAFE_HOMES: [&str; 2] = ["os", "kernel"];

    /// `line` without its comment and without the contents of its string
    /// literals (as far as one line shows them).
    fn code_only(line: &str) -> String {
        let mut out = String::new();
        let mut chars = line.chars().peekable();
        let mut in_string = false;
        while let Some(c) = chars.next() {
            if in_string {
                match c {
                    '\\' => {
                        chars.next();
                    }
                    '"' => {
                        in_string = false;
                        out.push(c);
                    }
                    _ => {}
                }
                continue;
            }
            match c {
                '/' if chars.peek() == Some(&'/') => break,
                '"' => {
                    in_string = true;
                    out.push(c);
                }
                // The character literal '"'.
                '\'' if chars.peek() == Some(&'"') => {
                    out.push(c);
                    out.extend(chars.next());
                }
                _ => out.push(c),
            }
        }
        out
    }

    /// Whether `code` (a line as [`code_only`] leaves it) has an `unsafe`
    /// block, fn, impl, trait or extern block. An attribute
    /// (`#[unsafe(no_mangle)]`) is none, nor a name that contains the word
    /// (`unsafe_code`).
    fn has_unsafe(code: &str) -> bool {
        code.match_indices("unsafe").any(|(i, w)| {
            let word = |c: char| c.is_ascii_alphanumeric() || c == '_';
            let before = code[..i].chars().next_back();
            let after = code[i + w.len()..].trim_start();
            !before.is_some_and(word)
                && ["{", "fn ", "impl", "trait ", "extern "]
                    .iter()
                    .any(|k| after.starts_with(k))
        })
    }

    /// Every `(file, line, problem)` that breaks the rule in `src/`.
    fn breaches() -> Vec<String> {
        let mut out = Vec::new();
        let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let mut dirs = vec![src.clone()];
        while let Some(dir) = dirs.pop() {
            for entry in std::fs::read_dir(&dir).unwrap() {
                let path = entry.unwrap().path();
                if path.is_dir() {
                    dirs.push(path);
                    continue;
                }
                let rel = path
                    .strip_prefix(&src)
                    .unwrap()
                    .to_string_lossy()
                    .into_owned();
                let Some(stem) = rel.strip_suffix(".rs") else {
                    continue;
                };
                let home = stem.split('/').next().unwrap();
                let text = std::fs::read_to_string(&path).unwrap();
                if !UNSAFE_HOMES.contains(&home) {
                    for (n, line) in text.lines().enumerate() {
                        if has_unsafe(&code_only(line)) {
                            out.push(format!(
                                "src/{rel}:{}: unsafe code outside src/os/ and src/kernel/",
                                n + 1
                            ));
                        }
                    }
                }
                // main.rs (this test) and its in-process tests sit above every layer.
                if matches!(home, "main" | "wiring_tests") {
                    continue;
                }
                let own = layer(home).unwrap_or_else(|| panic!("src/{rel}: not in LAYERS"));
                for (n, line) in text.lines().enumerate() {
                    let code = line.split("//").next().unwrap();
                    let at = format!("src/{rel}:{}", n + 1);
                    let code_t = code.trim_start();
                    let reexport =
                        code_t.starts_with("pub use ") || code_t.starts_with("pub(crate) use ");
                    if reexport || code.contains("super::super") {
                        out.push(format!("{at}: a re-export or a path up two levels"));
                    }
                    for (i, _) in code.match_indices("crate::") {
                        let name: String = code[i + 7..]
                            .chars()
                            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                            .collect();
                        // A child module names its siblings, never its mod.rs's items
                        // (no import circle inside a folder).
                        let next: String = code[i + 7 + name.len()..]
                            .trim_start_matches("::")
                            .chars()
                            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                            .collect();
                        let sibling = src.join(&name).join(format!("{next}.rs")).exists()
                            || src.join(&name).join(&next).is_dir();
                        let child = stem.contains('/') && !stem.ends_with("/mod");
                        match layer(&name) {
                            Some(_) if name == home && child && !sibling => {
                                out.push(format!("{at}: imports its folder's mod.rs ({next})"))
                            }
                            Some(l) if name == home || l < own => {}
                            Some(_) => out.push(format!("{at}: {home} imports {name}")),
                            None => out.push(format!("{at}: crate::{name} is not a folder")),
                        }
                    }
                }
            }
        }
        out
    }

    #[test]
    fn imports_point_down() {
        let found = breaches();
        assert!(found.is_empty(), "{}", found.join("\n"));
    }

    #[test]
    fn unsafe_code_is_told_from_its_mentions() {
        assert!(has_unsafe("    let n = unsafe { libc::getpid() };"));
        assert!(has_unsafe("unsafe fn child() -> ! {"));
        assert!(has_unsafe("pub unsafe fn f() {}"));
        assert!(has_unsafe("unsafe impl Send for X {}"));
        assert!(has_unsafe("unsafe extern \"C\" {"));
        assert!(has_unsafe("    unsafe {"));
        assert!(!has_unsafe("#[unsafe(no_mangle)]"));
        assert!(!has_unsafe("#![deny(unsafe_code)]"));
        assert!(!has_unsafe("let not_unsafe = 1;"));
        assert!(!has_unsafe(&code_only("    // unsafe { in a comment }")));
        assert!(!has_unsafe(&code_only(
            "    let s = \"unsafe { in a string }\";"
        )));
        assert!(has_unsafe(&code_only(
            "    let (q, n) = ('\"', unsafe { f(\"\\\"//\") }); // unsafe {"
        )));
    }
}
