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

mod admission;
mod canary;
mod cgroup;
mod check;
mod daemon;
mod denylist;
mod doctor;
mod entries;
mod failure;
mod keys;
mod launcher;
mod maps;
mod paths;
mod policy;
mod process;
mod procfs;
mod record;
mod request;
mod resolve;
mod sys;
mod variant;
mod verifier;
mod watch;

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
        resolve::WORKER_NAME => Some(Mode::Resolver),
        _ => None,
    }
}

/// Formats an error with its whole `source()` chain on one line. The
/// project's own errors carry their cause in their message and not as a
/// `source()` (so that every printer shows it once); the chain adds what
/// foreign errors keep behind `source()`, skipping text already shown.
pub fn error_chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut cur = e.source();
    while let Some(s) = cur {
        let text = s.to_string();
        if !out.contains(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        cur = s.source();
    }
    out
}

/// Runs the mode argv[0] names; returns the exit status.
#[cfg_attr(test, allow(dead_code))]
fn run() -> u8 {
    let args: Vec<OsString> = std::env::args_os().collect();
    let argv0 = args.first().cloned().unwrap_or_default();
    match mode_for(&argv0) {
        Some(Mode::Daemon) => daemon::main(&args[1..]),
        Some(Mode::Launcher) => launcher::main(&args[1..]),
        Some(Mode::Resolver) => resolve::worker_main(&args[1..]),
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
    // SAFETY: sets a signal disposition before any thread exists.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_IGN) };
    let code = std::panic::catch_unwind(run).unwrap_or(101);
    let _ = std::io::Write::flush(&mut std::io::stdout());
    std::ffi::c_int::from(code)
}

#[cfg(test)]
mod tests {
    use super::*;

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
        let outer = crate::daemon::DaemonError::Setup {
            what: "step".into(),
            cause: inner,
        };
        assert_eq!(error_chain(&outer), "step: inner cause");
        // Through a transparent wrapper, the cause is printed once.
        let wrapped = crate::daemon::DaemonError::Cgroup(crate::cgroup::CgroupError::Io {
            what: "mkdir",
            path: "/sys/fs/cgroup/x".into(),
            cause: std::io::Error::other("inner cause"),
        });
        let text = error_chain(&wrapped);
        assert_eq!(text, "mkdir /sys/fs/cgroup/x: inner cause");
        assert_eq!(wrapped.to_string(), text);
    }
}
