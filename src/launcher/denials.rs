//! `agent-sandbox-exec --denials [--follow] [--since DURATION] [--json]`:
//! the caller's uid's recent refusals, as the daemon keeps them (`op=denials`,
//! [`crate::proto::request::DenialsReply`]). The daemon answers each user
//! with that user's records only (by `SO_PEERCRED`); a sandboxed agent may
//! ask too, to learn why its command failed.

use std::ffi::OsString;
use std::io::Write;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::policy::denials::printable;
use crate::proto::request::{DenialsReply, Request};

/// How often `--follow` asks again.
const FOLLOW_EVERY: Duration = Duration::from_secs(1);

/// The options after `--denials`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Options {
    follow: bool,
    json: bool,
    /// Only records at most this old, in milliseconds.
    since_ms: Option<u64>,
}

/// A duration as `--since` takes it: a number and a unit (`s`, `m`, `h`,
/// `d`; seconds without one), in milliseconds.
fn parse_duration(text: &str) -> Option<u64> {
    let (num, unit) = match text.find(|c: char| !c.is_ascii_digit()) {
        Some(i) => text.split_at(i),
        None => (text, "s"),
    };
    let n: u64 = num.parse().ok()?;
    let secs = match unit {
        "s" => 1,
        "m" => 60,
        "h" => 3600,
        "d" => 86_400,
        _ => return None,
    };
    n.checked_mul(secs)?.checked_mul(1000)
}

fn parse_options(args: &[OsString]) -> Result<Options, String> {
    let mut o = Options::default();
    let mut it = args.iter().map(|a| a.to_str());
    while let Some(a) = it.next() {
        match a {
            Some("--follow" | "-f") => o.follow = true,
            Some("--json") => o.json = true,
            Some("--since") => {
                let v = it
                    .next()
                    .flatten()
                    .ok_or("--since needs a DURATION (10m, 2h, 1d)")?;
                o.since_ms = Some(
                    parse_duration(v)
                        .ok_or_else(|| format!("--since {v:?}: not a DURATION (10m, 2h, 1d)"))?,
                );
            }
            _ => {
                return Err(format!(
                    "unknown --denials option {:?}; usage: agent-sandbox-exec --denials \
                     [--follow] [--since DURATION] [--json]",
                    a.unwrap_or("(not UTF-8)")
                ));
            }
        }
    }
    Ok(o)
}

/// One record for a person: `2026-12-05 11:52:03  open of /x refused to cat (pid 7): cause`.
fn render(v: &serde_json::Value) -> String {
    let s = |k: &str| v[k].as_str().unwrap_or("?").to_owned();
    let when = v["time_ms"]
        .as_u64()
        .and_then(|ms| crate::os::sys::local_time(i64::try_from(ms / 1000).ok()?))
        .unwrap_or_else(|| "?".into());
    // The daemon's text is escaped already; a control character here is escaped again, so a
    // record is one line that a terminal only prints.
    let verdict = v["verdict"].as_str().unwrap_or("refused");
    let mut line = format!(
        "{when}  {} {} to {} (pid {}{}): {}",
        printable(&s("what")),
        printable(verdict),
        printable(&s("comm")),
        v["pid"].as_u64().unwrap_or(0),
        v["exe"]
            .as_str()
            .map(|e| format!(", {}", printable(e)))
            .unwrap_or_default(),
        printable(&s("cause"))
    );
    if let Some(n) = v["suppressed"].as_u64().filter(|n| *n > 0) {
        line.push_str(&format!(" ({n} more like it not reported)"));
    }
    line
}

/// Entry point of `--denials`; `args` are the options after it, `ask`
/// sends a question to the daemon and returns its answer (or why not).
/// Returns the exit status: 0, or `refused` for a usage error or no daemon.
pub fn main(
    args: &[OsString],
    ask: &dyn Fn(&Request) -> Result<Vec<u8>, String>,
    refused: u8,
) -> u8 {
    let o = match parse_options(args) {
        Ok(o) => o,
        Err(why) => {
            eprintln!("agent-sandbox-exec: {why}");
            return refused;
        }
    };
    let now_ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
    let oldest = o.since_ms.map_or(0, |s| now_ms.saturating_sub(s));
    let mut after = 0;
    let mut lost_seen = None;
    let mut shown = 0usize;
    let mut out = std::io::stdout().lock();
    loop {
        let req = Request {
            pid: std::process::id() as i32,
            denials_after: Some(after),
            ..Default::default()
        };
        let reply = match ask(&req).and_then(|m| {
            DenialsReply::parse(&m).map_err(|e| format!("no answer from the daemon: {e}"))
        }) {
            Ok(r) => r,
            Err(e) => {
                eprintln!("agent-sandbox-exec: {e}");
                return refused;
            }
        };
        let lost_new = reply.lost - lost_seen.unwrap_or(0).min(reply.lost);
        if lost_new > 0 {
            eprintln!(
                "agent-sandbox-exec: note: {lost_new} denial records were lost{} (the kernel's \
                 buffer was full while the daemon did not read it): some refusals are missing",
                if lost_seen.is_none() {
                    " since the daemon's maps were made"
                } else {
                    ""
                }
            );
        }
        lost_seen = Some(reply.lost);
        for r in &reply.records {
            let Ok(v) = serde_json::from_str::<serde_json::Value>(r) else {
                eprintln!("agent-sandbox-exec: warning: a record that is not JSON: {r}");
                continue;
            };
            if v["time_ms"].as_u64().unwrap_or(0) < oldest {
                continue;
            }
            let line = if o.json { r.clone() } else { render(&v) };
            if writeln!(out, "{line}").and_then(|()| out.flush()).is_err() {
                return 0; // the reader went away (a pipe to head)
            }
            shown += 1;
        }
        if reply.next > after {
            after = reply.next;
        }
        if reply.more {
            continue;
        }
        if !o.follow {
            break;
        }
        std::thread::sleep(FOLLOW_EVERY);
    }
    if shown == 0 && !o.json {
        println!(
            "no refusals kept for you{}",
            if o.since_ms.is_some() {
                " in that time"
            } else {
                ""
            }
        );
    }
    0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn os(a: &[&str]) -> Vec<OsString> {
        a.iter().map(OsString::from).collect()
    }

    #[test]
    fn options() {
        assert_eq!(parse_options(&[]).unwrap(), Options::default());
        let o = parse_options(&os(&["--follow", "--since", "10m", "--json"])).unwrap();
        assert_eq!((o.follow, o.json, o.since_ms), (true, true, Some(600_000)));
        assert_eq!(parse_duration("90"), Some(90_000));
        assert_eq!(parse_duration("2h"), Some(7_200_000));
        assert_eq!(parse_duration("1d"), Some(86_400_000));
        assert_eq!(parse_duration("5y"), None);
        assert_eq!(parse_duration("m"), None);
        assert!(
            parse_options(&os(&["--since"]))
                .unwrap_err()
                .contains("needs a DURATION")
        );
        assert!(
            parse_options(&os(&["--bogus"]))
                .unwrap_err()
                .contains("--bogus")
        );
    }

    #[test]
    fn renders_a_record() {
        let v = serde_json::json!({
            "time_ms": 0, "what": "open of /home/u/.ssh/id", "comm": "cat", "pid": 7,
            "exe": "/usr/bin/cat", "cause": "/home/u/.config/agent-sandbox-exec/denylist:3 (a file entry)",
            "suppressed": 2,
        });
        let line = render(&v);
        assert!(line.contains("open of /home/u/.ssh/id refused to cat (pid 7, /usr/bin/cat): "));
        assert!(line.contains("denylist:3 (a file entry) (2 more like it not reported)"));
        let evil = serde_json::json!({"what": "open of /x\u{1b}[2J", "comm": "\u{7}", "pid": 1});
        let line = render(&evil);
        assert!(!line.chars().any(char::is_control), "{line:?}");
    }
}
