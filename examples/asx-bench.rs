//! asx-bench: the measurement primitives of `make bench` (scripts/bench-guest.sh
//! runs them in the QEMU guest). Not part of the package.
//!
//! Every timing uses CLOCK_MONOTONIC (`Instant`); in an icount guest that
//! clock counts executed instructions. Results are printed on stdout as one
//! line `MEDIAN MIN MAX N` (ns, over N runs) unless a command says otherwise;
//! anything that goes wrong exits non-zero with one line on stderr.
//!
//! ```text
//! asx-bench openloop FILE ITERS RUNS   open(O_RDONLY)+close of FILE: ns per op (after 1 s idle)
//! asx-bench openloop --denied FILE ITERS RUNS
//! asx-bench openloop --write FILE ITERS RUNS   open(O_WRONLY)+close of FILE, as openloop
//!                                      open(O_RDONLY) of FILE, which must fail with EPERM: ns per op
//! asx-bench sysloop OP PID ITERS RUNS  one syscall ITERS times per run, as openloop: OP is kill0
//!                                      (kill(PID, 0)), kill (kill(PID, SIGWINCH), which a process
//!                                      that keeps SIGWINCH's default ignores) or fcntl
//!                                      (fcntl(F_SETOWN, PID) of a pipe's read end): ns per op
//! asx-bench fsloop OP DIR ITERS RUNS   name changes in DIR, ITERS per run, as openloop: OP is
//!                                      create (open(O_CREAT|O_EXCL|O_WRONLY)+close+unlink of a
//!                                      new file) or rename (a file renamed to another name and
//!                                      back: two renames an op): ns per op
//! asx-bench connectloop DIR ITERS RUNS
//!                                      socket+connect+accept+close to a Unix stream listener this
//!                                      process binds at DIR/asx-bench.sock: ns per op (as openloop)
//! asx-bench netloop tcp|udp ITERS RUNS
//!                                      tcp: socket+connect+accept+close (RST, no TIME_WAIT) to a
//!                                      listener this process binds on 127.0.0.1; udp: sendto of
//!                                      8 bytes to a socket this process binds on 127.0.0.1 and
//!                                      its recv: ns per op (as openloop)
//! asx-bench time [--cold] [--touch DIR] RUNS -- CMD...
//!                                      run CMD RUNS times (must exit 0; stdout discarded; each
//!                                      after 100 ms idle; after one untimed run unless --cold;
//!                                      with --touch, a file is created in DIR and removed before
//!                                      each run's idle, so a resolver watching DIR sees a change):
//!                                      ns per run, then a 5th field: the median busy time per run
//!                                      (ns the CPUs ran any task from the start until 50 ms after
//!                                      CMD's exit, from /proc/schedstat; -1 if unavailable)
//! asx-bench stat LIST RUNS [--missing-ok]
//!                                      statx() every path of LIST as the resolver does: ns per pass;
//!                                      --missing-ok counts a missing path (ENOENT, ENOTDIR) as done
//! asx-bench migrate RUNS               write a sleeping child's pid to cgroup.procs of a new cgroup
//!                                      (root), after 100 ms idle each time: ns per write, then the
//!                                      median busy time per write (as `time`)
//! asx-bench mapfloor N RUNS            batched insert of N file keys and N name keys into fresh maps
//!                                      shaped like deny_map and name_map: ns
//! asx-bench load USERS TOTAL PAR -- CMD...
//!                                      TOTAL runs of CMD, PAR at a time, as the comma-separated
//!                                      USERS in turn: prints `OK FAILED MEDIAN P95 MAX` (ns)
//! asx-bench stats V...                 MEDIAN MIN MAX N of the given numbers
//! asx-bench mapcount NAME              the number of keys in every loaded map named NAME (root)
//! asx-bench landlock -- CMD...         exec CMD under a Landlock ruleset that handles READ_FILE and
//!                                      allows it beneath /
//! asx-bench empty-prog OBJ             load OBJ, attach its LSM programs (its cgroup sock_addr ones
//!                                      to a new cgroup no measured task is in), print `ready`, hold
//!                                      the links until SIGTERM or SIGINT
//! asx-bench as USER CMD...             exec CMD as USER (uid, gid, groups, HOME, USER, cwd = home)
//! ```

use std::ffi::{CString, OsString};
use std::io::{self, Write};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::process::CommandExt;
use std::process::{Command, ExitCode, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use libbpf_rs::{MapCore, MapFlags, MapHandle, MapType, ObjectBuilder};
use nix::sys::signal::{SigSet, Signal};
use nix::unistd::{Gid, Uid, User};

type Res<T> = Result<T, String>;

fn main() -> ExitCode {
    let args: Vec<OsString> = std::env::args_os().skip(1).collect();
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("asx-bench: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run(args: &[OsString]) -> Res<()> {
    let (cmd, rest) = args
        .split_first()
        .ok_or("no command (see the comment at the top of examples/asx-bench.rs)")?;
    match cmd.to_str().unwrap_or("") {
        "openloop" => openloop(rest),
        "sysloop" => sysloop(rest),
        "fsloop" => fsloop(rest),
        "connectloop" => connectloop(rest),
        "netloop" => netloop(rest),
        "time" => time_cmd(rest),
        "stat" => stat_floor(rest),
        "migrate" => migrate(rest),
        "mapfloor" => map_floor(rest),
        "load" => load(rest),
        "stats" => {
            let v: Vec<u64> = rest.iter().map(num).collect::<Res<_>>()?;
            print_stats(&v)
        }
        "mapcount" => map_count(rest),
        "landlock" => landlock(after_dashes(rest)?),
        "empty-prog" => empty_prog(rest),
        "as" => as_user(rest),
        other => Err(format!("unknown command {other:?}")),
    }
}

fn num(a: &OsString) -> Res<u64> {
    a.to_str()
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| format!("not a number: {a:?}"))
}

fn arg<'a>(args: &'a [OsString], i: usize, what: &str) -> Res<&'a OsString> {
    args.get(i).ok_or_else(|| format!("missing {what}"))
}

/// The command after a leading `--`.
fn after_dashes(args: &[OsString]) -> Res<&[OsString]> {
    match args.split_first() {
        Some((d, cmd)) if d == "--" && !cmd.is_empty() => Ok(cmd),
        _ => Err("expected -- CMD...".into()),
    }
}

fn median(sorted: &[u64]) -> u64 {
    let n = sorted.len();
    if n % 2 == 1 {
        sorted[n / 2]
    } else {
        (sorted[n / 2 - 1] + sorted[n / 2]) / 2
    }
}

fn print_stats(v: &[u64]) -> Res<()> {
    if v.is_empty() {
        return Err("no values".into());
    }
    let mut s = v.to_vec();
    s.sort_unstable();
    println!("{} {} {} {}", median(&s), s[0], s[s.len() - 1], s.len());
    Ok(())
}

/// Prints `MEDIAN MIN MAX N BUSY` of timed runs; BUSY is the median of
/// `busy` (-1 unless there is a busy time for every run).
fn print_times(mut times: Vec<u64>, mut busy: Vec<u64>) -> Res<()> {
    if times.is_empty() {
        return Err("no runs".into());
    }
    times.sort_unstable();
    busy.sort_unstable();
    let busy = if busy.len() == times.len() {
        median(&busy).to_string()
    } else {
        "-1".into()
    };
    println!(
        "{} {} {} {} {busy}",
        median(&times),
        times[0],
        times[times.len() - 1],
        times.len()
    );
    Ok(())
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

fn cstring(bytes: &[u8]) -> Res<CString> {
    CString::new(bytes).map_err(|_| format!("NUL in {:?}", String::from_utf8_lossy(bytes)))
}

/// open+close of FILE (`--write`: for writing), ITERS times per run, RUNS runs after a one-second
/// pause (lets the work that started this process, e.g. a launch's apply,
/// settle; costs no host time in an icount guest) and one short warm-up run;
/// prints the median, min and max of the per-run mean in ns per op (one
/// decimal).
fn openloop(args: &[OsString]) -> Res<()> {
    let denied = args.first().is_some_and(|a| a == "--denied");
    let write = args.first().is_some_and(|a| a == "--write");
    let args = if denied || write { &args[1..] } else { args };
    let flags = if write {
        libc::O_WRONLY
    } else {
        libc::O_RDONLY
    };
    let path = cstring(arg(args, 0, "FILE")?.as_bytes())?;
    let iters = num(arg(args, 1, "ITERS")?)?.max(1);
    let runs = num(arg(args, 2, "RUNS")?)?.max(1);
    op_loop(iters, runs, || {
        // SAFETY: path is NUL-terminated; the fd is closed right away.
        let fd = unsafe { libc::open(path.as_ptr(), flags | libc::O_CLOEXEC) };
        if denied {
            let e = io::Error::last_os_error();
            if fd >= 0 {
                // SAFETY: fd was just opened by us.
                unsafe { libc::close(fd) };
                return Err(format!("open {path:?} was not refused"));
            }
            return match e.raw_os_error() {
                Some(libc::EPERM) => Ok(()),
                _ => Err(format!("open {path:?}: {e}, not EPERM")),
            };
        }
        if fd < 0 {
            return Err(format!("open {path:?}: {}", io::Error::last_os_error()));
        }
        // SAFETY: fd was just opened by us.
        unsafe { libc::close(fd) };
        Ok(())
    })
}

/// One syscall per op, as `openloop` times them: OP `kill0` is kill(PID, 0),
/// `kill` is kill(PID, SIGWINCH) (the signal hooks: security_task_kill() from
/// check_kill_permission() in kernel/signal.c), `fcntl` is fcntl(F_SETOWN,
/// PID) of the read end of a pipe of its own (security_file_fcntl() in
/// fs/fcntl.c). Errors: a failing call (with its errno), a bad OP or number.
fn sysloop(args: &[OsString]) -> Res<()> {
    let op = arg(args, 0, "OP")?.to_str().unwrap_or("").to_owned();
    let pid = libc::pid_t::try_from(num(arg(args, 1, "PID")?)?)
        .map_err(|_| "PID out of range".to_string())?;
    let iters = num(arg(args, 2, "ITERS")?)?.max(1);
    let runs = num(arg(args, 3, "RUNS")?)?.max(1);
    let call = |what: &str, r: libc::c_int| -> Res<()> {
        if r < 0 {
            return Err(format!("{what}: {}", io::Error::last_os_error()));
        }
        Ok(())
    };
    match op.as_str() {
        // SAFETY: kill has no memory arguments.
        "kill0" => op_loop(iters, runs, || call("kill", unsafe { libc::kill(pid, 0) })),
        "kill" => op_loop(iters, runs, || {
            // SAFETY: kill has no memory arguments.
            call("kill", unsafe { libc::kill(pid, libc::SIGWINCH) })
        }),
        "fcntl" => {
            let mut fds = [0 as libc::c_int; 2];
            // SAFETY: fds has room for the two descriptors pipe2 writes.
            call("pipe2", unsafe {
                libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC)
            })?;
            op_loop(iters, runs, || {
                // SAFETY: fds[0] is our pipe's read end; F_SETOWN takes an int.
                call("fcntl F_SETOWN", unsafe {
                    libc::fcntl(fds[0], libc::F_SETOWN, pid)
                })
            })
        }
        other => Err(format!(
            "unknown sysloop OP {other:?} (kill0, kill or fcntl)"
        )),
    }
}

/// Name changes per op, as `openloop` times them, in directory DIR: OP
/// `create` is open(DIR/asx-fsloop-c, O_CREAT|O_EXCL|O_WRONLY) + close +
/// unlink (security_inode_create(), security_file_open() and
/// security_inode_unlink() in fs/namei.c and fs/open.c), `rename` is
/// rename(DIR/asx-fsloop-a, DIR/asx-fsloop-b) and back (security_inode_rename()
/// and vfs_rename()'s fexit programs, twice). Errors: a failing call (with its
/// errno), a bad OP or number; the files are removed at the end.
fn fsloop(args: &[OsString]) -> Res<()> {
    let op = arg(args, 0, "OP")?.to_str().unwrap_or("").to_owned();
    let dir = std::path::PathBuf::from(arg(args, 1, "DIR")?);
    let iters = num(arg(args, 2, "ITERS")?)?.max(1);
    let runs = num(arg(args, 3, "RUNS")?)?.max(1);
    let c_path = |name: &str| -> Res<std::ffi::CString> {
        std::ffi::CString::new(dir.join(name).into_os_string().into_vec())
            .map_err(|_| format!("{dir:?}: a NUL in the path"))
    };
    let fail = |what: &str| -> String { format!("{what}: {}", io::Error::last_os_error()) };
    match op.as_str() {
        "create" => {
            let c = c_path("asx-fsloop-c")?;
            op_loop(iters, runs, || {
                // SAFETY: c is a NUL-terminated path; the flags need a mode.
                let fd = unsafe {
                    libc::open(
                        c.as_ptr(),
                        libc::O_CREAT | libc::O_EXCL | libc::O_WRONLY | libc::O_CLOEXEC,
                        0o600,
                    )
                };
                if fd < 0 {
                    return Err(fail("open O_CREAT"));
                }
                // SAFETY: fd was just opened by us.
                unsafe { libc::close(fd) };
                // SAFETY: c is a NUL-terminated path.
                let r = unsafe { libc::unlink(c.as_ptr()) };
                if r < 0 {
                    return Err(fail("unlink"));
                }
                Ok(())
            })
        }
        "rename" => {
            let (a, b) = (c_path("asx-fsloop-a")?, c_path("asx-fsloop-b")?);
            std::fs::write(dir.join("asx-fsloop-a"), b"x").map_err(|e| format!("create: {e}"))?;
            let r = op_loop(iters, runs, || {
                for (from, to) in [(&a, &b), (&b, &a)] {
                    // SAFETY: from and to are NUL-terminated paths.
                    if unsafe { libc::rename(from.as_ptr(), to.as_ptr()) } < 0 {
                        return Err(fail("rename"));
                    }
                }
                Ok(())
            });
            let _ = std::fs::remove_file(dir.join("asx-fsloop-a"));
            r
        }
        other => Err(format!("unknown fsloop OP {other:?} (create or rename)")),
    }
}

/// `op` ITERS times per run, RUNS runs after a one-second pause (see
/// `openloop`) and one short warm-up run; prints the median, min and max of
/// the per-run mean in ns per op (one decimal). Errors: `op`'s first.
fn op_loop(iters: u64, runs: u64, mut op: impl FnMut() -> Res<()>) -> Res<()> {
    let mut one_run = |n: u64| -> Res<f64> {
        let start = Instant::now();
        for _ in 0..n {
            op()?;
        }
        Ok(nanos(start.elapsed()) as f64 / n as f64)
    };
    std::thread::sleep(Duration::from_secs(1));
    one_run(iters / 10 + 1)?;
    let mut per_op = Vec::new();
    for _ in 0..runs {
        per_op.push(one_run(iters)?);
    }
    per_op.sort_by(f64::total_cmp);
    let n = per_op.len();
    let med = if n % 2 == 1 {
        per_op[n / 2]
    } else {
        (per_op[n / 2 - 1] + per_op[n / 2]) / 2.0
    };
    println!("{med:.1} {:.1} {:.1} {n}", per_op[0], per_op[n - 1]);
    Ok(())
}

/// socket+connect+accept+close of a Unix stream connection to a listener
/// bound by this process (so a sandboxed run connects to a socket made in
/// its own sandbox, which the connect hook allows), ITERS times per run,
/// RUNS runs, after the same pause and warm-up as [`openloop`]; prints its
/// line format.
fn connectloop(args: &[OsString]) -> Res<()> {
    use std::os::unix::net::{UnixListener, UnixStream};
    let dir = std::path::PathBuf::from(arg(args, 0, "DIR")?);
    let iters = num(arg(args, 1, "ITERS")?)?.max(1);
    let runs = num(arg(args, 2, "RUNS")?)?.max(1);
    let path = dir.join("asx-bench.sock");
    let _ = std::fs::remove_file(&path);
    let listener = UnixListener::bind(&path).map_err(|e| format!("bind {path:?}: {e}"))?;
    let timed = op_loop(iters, runs, || {
        let c = UnixStream::connect(&path).map_err(|e| format!("connect {path:?}: {e}"))?;
        let (a, _) = listener.accept().map_err(|e| format!("accept: {e}"))?;
        drop(a);
        drop(c);
        Ok(())
    });
    let _ = std::fs::remove_file(&path);
    timed
}

/// TCP connects or UDP sends to a server bound by this process on
/// 127.0.0.1 (so a sandboxed run reaches a server made in its own sandbox,
/// which the loopback programs look up and allow), ITERS times per run,
/// RUNS runs, as [`connectloop`]; prints its line format.
fn netloop(args: &[OsString]) -> Res<()> {
    use std::net::{TcpListener, TcpStream, UdpSocket};
    let kind = arg(args, 0, "tcp|udp")?;
    let iters = num(arg(args, 1, "ITERS")?)?.max(1);
    let runs = num(arg(args, 2, "RUNS")?)?.max(1);
    match kind.to_str() {
        Some("tcp") => {
            let listener =
                TcpListener::bind("127.0.0.1:0").map_err(|e| format!("bind 127.0.0.1: {e}"))?;
            let at = listener
                .local_addr()
                .map_err(|e| format!("local_addr: {e}"))?;
            op_loop(iters, runs, || {
                let c = TcpStream::connect(at).map_err(|e| format!("connect {at}: {e}"))?;
                // Closed with an RST: no TIME_WAIT to use up the ephemeral ports.
                nix::sys::socket::setsockopt(
                    &c,
                    nix::sys::socket::sockopt::Linger,
                    &libc::linger {
                        l_onoff: 1,
                        l_linger: 0,
                    },
                )
                .map_err(|e| format!("SO_LINGER: {e}"))?;
                let (a, _) = listener.accept().map_err(|e| format!("accept: {e}"))?;
                drop(c);
                drop(a);
                Ok(())
            })
        }
        Some("udp") => {
            let server =
                UdpSocket::bind("127.0.0.1:0").map_err(|e| format!("bind 127.0.0.1: {e}"))?;
            let at = server
                .local_addr()
                .map_err(|e| format!("local_addr: {e}"))?;
            let client =
                UdpSocket::bind("127.0.0.1:0").map_err(|e| format!("bind 127.0.0.1: {e}"))?;
            let mut buf = [0u8; 16];
            op_loop(iters, runs, || {
                client
                    .send_to(b"asxbench", at)
                    .map_err(|e| format!("sendto {at}: {e}"))?;
                server.recv(&mut buf).map_err(|e| format!("recv: {e}"))?;
                Ok(())
            })
        }
        _ => Err("netloop takes tcp or udp".into()),
    }
}

/// Sum over CPUs of the time they ran tasks other than idle (rq_cpu_time,
/// the 7th number of each `cpuN` line of /proc/schedstat), in ns.
fn busy_ns() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/schedstat").ok()?;
    let mut sum = 0u64;
    let mut found = false;
    for line in text.lines().filter(|l| l.starts_with("cpu")) {
        sum += line.split_whitespace().nth(7)?.parse::<u64>().ok()?;
        found = true;
    }
    found.then_some(sum)
}

/// Idle time before each timed run of `time` (costs no host time in an
/// icount guest: the idle guest jumps to its next timer).
const IDLE_BEFORE_RUN: Duration = Duration::from_millis(100);
/// Idle time after each timed run of `time`, inside its busy-time window.
const IDLE_AFTER_RUN: Duration = Duration::from_millis(50);

/// Runs CMD RUNS times, each to completion; every run must exit 0.
fn time_cmd(args: &[OsString]) -> Res<()> {
    let mut cold = false;
    let mut touch: Option<std::path::PathBuf> = None;
    let mut args = args;
    loop {
        match args.first().and_then(|a| a.to_str()) {
            Some("--cold") => {
                cold = true;
                args = &args[1..];
            }
            Some("--touch") => {
                touch = Some(arg(args, 1, "DIR")?.into());
                args = &args[2..];
            }
            _ => break,
        }
    }
    let runs = num(arg(args, 0, "RUNS")?)?.max(1);
    let cmd = after_dashes(&args[1..])?;
    // Each run: idle first (an agent is launched after idleness, not in a
    // tight loop, so work whose cost depends on the time since the last launch,
    // an RCU grace period in the cgroup move, is paid every time, as in use);
    // then the timed run, to the command's exit; then a short idle so that
    // what the run left to others (the daemon's last steps, exits, RCU
    // callbacks) is in its busy time, and not in the next run's.
    let run_once = |busy: &mut Vec<u64>| -> Res<u64> {
        if let Some(dir) = &touch {
            let f = dir.join(".asx-bench-touch");
            std::fs::write(&f, b"").map_err(|e| format!("{}: {e}", f.display()))?;
            std::fs::remove_file(&f).map_err(|e| format!("{}: {e}", f.display()))?;
        }
        std::thread::sleep(IDLE_BEFORE_RUN);
        let b0 = busy_ns();
        let start = Instant::now();
        let status = Command::new(&cmd[0])
            .args(&cmd[1..])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .status()
            .map_err(|e| format!("{:?}: {e}", cmd[0]))?;
        let t = nanos(start.elapsed());
        if !status.success() {
            return Err(format!("{cmd:?}: {status}"));
        }
        std::thread::sleep(IDLE_AFTER_RUN);
        if let (Some(b0), Some(b1)) = (b0, busy_ns()) {
            busy.push(b1.saturating_sub(b0));
        }
        Ok(t)
    };
    let mut busy = Vec::new();
    if !cold {
        run_once(&mut busy)?;
        busy.clear();
    }
    let mut times = Vec::new();
    for _ in 0..runs {
        times.push(run_once(&mut busy)?);
    }
    print_times(times, busy)
}

/// The floor under a launch's move into its cgroup: one write of a pid to
/// `cgroup.procs`, the daemon's own step. A migration takes
/// cgroup_threadgroup_rwsem for writing (kernel/cgroup/cgroup.c), whose
/// percpu_rwsem waits for an RCU grace period unless the hierarchy is mounted
/// with `favordynmods` or another writer was just there; so each write comes
/// after 100 ms of idleness, as a launch's does.
fn migrate(args: &[OsString]) -> Res<()> {
    let runs = num(arg(args, 0, "RUNS")?)?.max(1);
    let root = std::path::Path::new("/sys/fs/cgroup");
    let dirs = [root.join("asx-bench-a"), root.join("asx-bench-b")];
    for d in &dirs {
        match std::fs::create_dir(d) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(format!("{}: {e}", d.display())),
        }
    }
    let mut child = Command::new("sleep")
        .arg("3600")
        .spawn()
        .map_err(|e| format!("sleep: {e}"))?;
    let pid = child.id().to_string();
    let mut times = Vec::new();
    let mut busy = Vec::new();
    let mut result = Ok(());
    for i in 0..=runs {
        std::thread::sleep(IDLE_BEFORE_RUN);
        let procs = dirs[(i % 2) as usize].join("cgroup.procs");
        let b0 = busy_ns();
        let start = Instant::now();
        if let Err(e) = std::fs::write(&procs, &pid) {
            result = Err(format!("{}: {e}", procs.display()));
            break;
        }
        let t = nanos(start.elapsed());
        if i == 0 {
            continue; // the first move also creates the cgroup's css_set
        }
        times.push(t);
        if let (Some(b0), Some(b1)) = (b0, busy_ns()) {
            busy.push(b1.saturating_sub(b0));
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    for d in &dirs {
        let _ = std::fs::remove_dir(d);
    }
    result?;
    print_times(times, busy)
}

/// The paths of a list file as the benchmark writes them: one absolute path
/// a line, blank lines and `#` comments skipped.
fn read_paths(list: &OsString) -> Res<Vec<CString>> {
    let text = std::fs::read(list).map_err(|e| format!("{list:?}: {e}"))?;
    text.split(|b| *b == b'\n')
        .map(|l| l.trim_ascii())
        .filter(|l| !l.is_empty() && !l.starts_with(b"#"))
        .map(cstring)
        .collect()
}

/// The floor under resolving a list: one statx() per path with the flags and
/// mask of src/resolve/keys.rs (key_for_path), nothing else. With
/// `--missing-ok` a path that does not exist (ENOENT, ENOTDIR: the failed
/// lookup a resolver pays for a listed path that is not there) counts as done;
/// any other error stops the measurement.
fn stat_floor(args: &[OsString]) -> Res<()> {
    let paths = read_paths(arg(args, 0, "LIST")?)?;
    let runs = num(arg(args, 1, "RUNS")?)?.max(1);
    let missing_ok = match args.get(2).map(|a| a.as_os_str()) {
        None => false,
        Some(a) if a == "--missing-ok" => true,
        Some(a) => return Err(format!("stat: unknown option {a:?} (only --missing-ok)")),
    };
    let flags = libc::AT_STATX_SYNC_AS_STAT | libc::AT_SYMLINK_NOFOLLOW;
    let mask = libc::STATX_TYPE | libc::STATX_INO | libc::STATX_MNT_ID;
    let mut times = Vec::new();
    for _ in 0..runs {
        let start = Instant::now();
        for p in &paths {
            let mut stx = std::mem::MaybeUninit::<libc::statx>::zeroed();
            // SAFETY: p is NUL-terminated; stx is a valid out-buffer.
            let rc =
                unsafe { libc::statx(libc::AT_FDCWD, p.as_ptr(), flags, mask, stx.as_mut_ptr()) };
            if rc != 0 {
                let e = io::Error::last_os_error();
                let missing = matches!(e.raw_os_error(), Some(libc::ENOENT | libc::ENOTDIR));
                if !(missing_ok && missing) {
                    return Err(format!("statx {p:?}: {e}"));
                }
            }
        }
        times.push(nanos(start.elapsed()));
    }
    print_stats(&times)
}

/// The floor under applying a list: the batched inserts the daemon does for N
/// listed paths (chunks of 4096 keys, value 1 byte): N 32-byte file keys into
/// a fresh hash map of deny_map's shape and N 288-byte name keys into one of
/// name_map's. New maps per run, so every run inserts 2N new keys.
fn map_floor(args: &[OsString]) -> Res<()> {
    const CHUNK: usize = 4096;
    const DENY_KEY: usize = 32; // struct deny_key: cgid, ino, subvol, dev, reserved
    const NAME_KEY: usize = 288; // struct name_key: cgid, directory key, name[256]
    let n = usize::try_from(num(arg(args, 0, "N")?)?).map_err(|e| e.to_string())?;
    let runs = num(arg(args, 1, "RUNS")?)?.max(1);
    let dev = (8u32 << 20 | 1).to_ne_bytes();
    let mut deny = Vec::with_capacity(n * DENY_KEY);
    let mut names = Vec::with_capacity(n * NAME_KEY);
    for i in 0..n as u64 {
        deny.extend_from_slice(&4242u64.to_ne_bytes()); // cgid
        deny.extend_from_slice(&(1_000_000 + i).to_ne_bytes()); // ino
        deny.extend_from_slice(&0u64.to_ne_bytes()); // subvol
        deny.extend_from_slice(&dev);
        deny.extend_from_slice(&0u32.to_ne_bytes()); // reserved
        // As the benchmark's lists: 1,000 files f0..f999 per directory.
        let mut key = [0u8; NAME_KEY];
        key[..8].copy_from_slice(&4242u64.to_ne_bytes());
        key[8..16].copy_from_slice(&(500_000 + i / 1000).to_ne_bytes());
        key[24..28].copy_from_slice(&dev);
        let name = format!("f{}", i % 1000);
        key[32..32 + name.len()].copy_from_slice(name.as_bytes());
        names.extend_from_slice(&key);
    }
    let values = vec![1u8; CHUNK];
    let mut times = Vec::new();
    for _ in 0..runs {
        let opts = libbpf_rs::libbpf_sys::bpf_map_create_opts {
            sz: std::mem::size_of::<libbpf_rs::libbpf_sys::bpf_map_create_opts>() as _,
            map_flags: libbpf_rs::libbpf_sys::BPF_F_NO_PREALLOC,
            ..Default::default()
        };
        let create = |name: &str, key_len: usize| {
            MapHandle::create(MapType::Hash, Some(name), key_len as u32, 1, 1 << 20, &opts)
                .map_err(|e| format!("creating a hash map: {e}"))
        };
        let maps = [
            (create("asx_floor_deny", DENY_KEY)?, &deny, DENY_KEY),
            (create("asx_floor_name", NAME_KEY)?, &names, NAME_KEY),
        ];
        let start = Instant::now();
        for (map, keys, len) in &maps {
            for chunk in keys.chunks(CHUNK * len) {
                let count = chunk.len() / len;
                map.update_batch(
                    chunk,
                    &values[..count],
                    count as u32,
                    MapFlags::ANY,
                    MapFlags::ANY,
                )
                .map_err(|e| format!("batch update: {e}"))?;
            }
        }
        times.push(nanos(start.elapsed()));
    }
    print_stats(&times)
}

fn map_count(args: &[OsString]) -> Res<()> {
    let name = arg(args, 0, "NAME")?;
    let mut total = 0usize;
    for info in libbpf_rs::query::MapInfoIter::default().filter(|i| &i.name == name) {
        let map =
            MapHandle::from_map_id(info.id).map_err(|e| format!("map id {}: {e}", info.id))?;
        total += map.keys().count();
    }
    println!("{total}");
    Ok(())
}

struct Account {
    name: String,
    uid: Uid,
    gid: Gid,
    home: std::path::PathBuf,
}

fn account(name: &str) -> Res<Account> {
    let u = User::from_name(name)
        .map_err(|e| format!("user {name}: {e}"))?
        .ok_or_else(|| format!("no user {name}"))?;
    Ok(Account {
        name: u.name,
        uid: u.uid,
        gid: u.gid,
        home: u.dir,
    })
}

/// CMD as the account, for `load`: the spawned child sets gid and uid (std
/// also drops the supplementary groups when root sets a uid), HOME, USER,
/// LOGNAME and cwd.
fn command_as(a: &Account, cmd: &[OsString]) -> Command {
    let mut c = Command::new(&cmd[0]);
    c.args(&cmd[1..])
        .uid(a.uid.as_raw())
        .gid(a.gid.as_raw())
        .env("HOME", &a.home)
        .env("USER", &a.name)
        .env("LOGNAME", &a.name)
        .stdin(Stdio::null());
    if a.home.is_dir() {
        c.current_dir(&a.home);
    }
    c
}

/// TOTAL runs of CMD, PAR at a time, the i-th as USERS[i % len]; prints
/// `OK FAILED MEDIAN P95 MAX` over all runs (ns, start of spawn to exit).
fn load(args: &[OsString]) -> Res<()> {
    let users = arg(args, 0, "USERS")?
        .to_str()
        .ok_or("USERS is not UTF-8")?
        .split(',')
        .map(account)
        .collect::<Res<Vec<_>>>()?;
    let total = usize::try_from(num(arg(args, 1, "TOTAL")?)?).map_err(|e| e.to_string())?;
    let par = usize::try_from(num(arg(args, 2, "PAR")?)?).map_err(|e| e.to_string())?;
    let cmd: Vec<OsString> = after_dashes(&args[3..])?.to_vec();
    let users = Arc::new(users);
    let next = Arc::new(AtomicUsize::new(0));
    let results = Arc::new(Mutex::new(Vec::<(u64, bool)>::new()));
    let workers: Vec<_> = (0..par.max(1))
        .map(|_| {
            let (users, next, results, cmd) = (
                Arc::clone(&users),
                Arc::clone(&next),
                Arc::clone(&results),
                cmd.clone(),
            );
            std::thread::spawn(move || {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= total {
                        break;
                    }
                    let start = Instant::now();
                    let ok = match command_as(&users[i % users.len()], &cmd).status() {
                        Ok(s) => s.success(),
                        Err(e) => {
                            eprintln!("asx-bench: load: {:?}: {e}", cmd[0]);
                            false
                        }
                    };
                    let t = nanos(start.elapsed());
                    results
                        .lock()
                        .expect("a timing thread panicked")
                        .push((t, ok));
                }
            })
        })
        .collect();
    for w in workers {
        w.join().map_err(|_| "a worker thread panicked")?;
    }
    let res = results.lock().expect("a timing thread panicked");
    let ok = res.iter().filter(|r| r.1).count();
    let mut t: Vec<u64> = res.iter().map(|r| r.0).collect();
    t.sort_unstable();
    if t.is_empty() {
        return Err("no runs".into());
    }
    let p95 = t[(t.len() * 95).div_ceil(100) - 1];
    println!(
        "{ok} {} {} {p95} {}",
        t.len() - ok,
        median(&t),
        t[t.len() - 1]
    );
    Ok(())
}

/// `struct landlock_path_beneath_attr` (packed in the uapi header).
#[repr(C, packed)]
struct PathBeneath {
    allowed_access: u64,
    parent_fd: i32,
}

const LANDLOCK_ACCESS_FS_READ_FILE: u64 = 1 << 2;
const LANDLOCK_RULE_PATH_BENEATH: libc::c_long = 1;

fn landlock(cmd: &[OsString]) -> Res<()> {
    let sys = |what: &str, rc: libc::c_long| -> Res<libc::c_long> {
        if rc < 0 {
            Err(format!("{what}: {}", io::Error::last_os_error()))
        } else {
            Ok(rc)
        }
    };
    // struct landlock_ruleset_attr, ABI 1: handled_access_fs only.
    let handled: u64 = LANDLOCK_ACCESS_FS_READ_FILE;
    // SAFETY: the attribute is a valid u64 of the size passed.
    let ruleset = sys("landlock_create_ruleset", unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            &handled as *const u64,
            std::mem::size_of::<u64>(),
            0u32,
        )
    })?;
    let root = CString::new("/").expect("no NUL in /");
    // SAFETY: NUL-terminated path.
    let root_fd = unsafe { libc::open(root.as_ptr(), libc::O_PATH | libc::O_CLOEXEC) };
    sys("open /", root_fd.into())?;
    let rule = PathBeneath {
        allowed_access: LANDLOCK_ACCESS_FS_READ_FILE,
        parent_fd: root_fd,
    };
    // SAFETY: rule is a valid landlock_path_beneath_attr.
    sys("landlock_add_rule", unsafe {
        libc::syscall(
            libc::SYS_landlock_add_rule,
            ruleset as libc::c_int,
            LANDLOCK_RULE_PATH_BENEATH,
            &rule as *const PathBeneath,
            0u32,
        )
    })?;
    // SAFETY: plain prctl and syscalls on our own fds.
    sys("PR_SET_NO_NEW_PRIVS", unsafe {
        libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0).into()
    })?;
    // SAFETY: a plain syscall on the ruleset fd we own.
    sys("landlock_restrict_self", unsafe {
        libc::syscall(
            libc::SYS_landlock_restrict_self,
            ruleset as libc::c_int,
            0u32,
        )
    })?;
    // SAFETY: closing fds we opened; they are not used again.
    unsafe {
        libc::close(ruleset as libc::c_int);
        libc::close(root_fd);
    }
    let e = Command::new(&cmd[0]).args(&cmd[1..]).exec();
    Err(format!("exec {:?}: {e}", cmd[0]))
}

fn empty_prog(args: &[OsString]) -> Res<()> {
    let path = arg(args, 0, "OBJ")?;
    let obj = ObjectBuilder::default()
        .open_file(path)
        .and_then(|o| o.load())
        .map_err(|e| format!("loading {path:?}: {e}"))?;
    let mut links = Vec::new();
    // Cgroup sock_addr programs go on a cgroup of their own, which no task
    // of the measurements is in: what they cost everyone else is the floor.
    let cgroup = std::path::Path::new(EMPTY_CGROUP);
    let mut cgroup_fd = None;
    for prog in obj.progs_mut() {
        let name = prog.name().to_string_lossy().into_owned();
        let link = if prog.prog_type() == libbpf_rs::ProgramType::CgroupSockAddr {
            if cgroup_fd.is_none() {
                let _ = std::fs::create_dir(cgroup);
                cgroup_fd =
                    Some(std::fs::File::open(cgroup).map_err(|e| format!("open {cgroup:?}: {e}"))?);
            }
            let fd = cgroup_fd.as_ref().map(std::os::fd::AsRawFd::as_raw_fd);
            prog.attach_cgroup(fd.unwrap_or(-1))
        } else {
            // lsm/ and fexit/ sections alike, by their section name.
            prog.attach()
        };
        links.push(link.map_err(|e| format!("attaching {name}: {e}"))?);
    }
    if links.is_empty() {
        return Err(format!("{path:?} has no program"));
    }
    let mut set = SigSet::empty();
    set.add(Signal::SIGTERM);
    set.add(Signal::SIGINT);
    set.thread_block()
        .map_err(|e| format!("sigprocmask: {e}"))?;
    println!("ready");
    io::stdout().flush().map_err(|e| e.to_string())?;
    set.wait().map_err(|e| format!("sigwait: {e}"))?;
    drop(links);
    drop(cgroup_fd);
    if cgroup.exists() {
        let _ = std::fs::remove_dir(cgroup);
    }
    Ok(())
}

/// The cgroup `empty-prog` attaches the empty cgroup programs to.
const EMPTY_CGROUP: &str = "/sys/fs/cgroup/asx-bench-empty";

fn as_user(args: &[OsString]) -> Res<()> {
    let name = arg(args, 0, "USER")?.to_str().ok_or("USER is not UTF-8")?;
    let cmd = &args[1..];
    if cmd.is_empty() {
        return Err("missing CMD".into());
    }
    let a = account(name)?;
    let cname = cstring(&OsString::from(&a.name).into_vec())?;
    nix::unistd::initgroups(&cname, a.gid).map_err(|e| format!("initgroups: {e}"))?;
    nix::unistd::setresgid(a.gid, a.gid, a.gid).map_err(|e| format!("setresgid: {e}"))?;
    nix::unistd::setresuid(a.uid, a.uid, a.uid).map_err(|e| format!("setresuid: {e}"))?;
    let mut c = Command::new(&cmd[0]);
    c.args(&cmd[1..])
        .env("HOME", &a.home)
        .env("USER", &a.name)
        .env("LOGNAME", &a.name);
    if a.home.is_dir() {
        c.current_dir(&a.home);
    }
    let e = c.exec();
    Err(format!("exec {:?}: {e}", cmd[0]))
}
