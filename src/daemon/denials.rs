//! The daemon's side of denial events: reads the kernel's records
//! ([`crate::kernel::denials`]) in the poll loop, completes them (wall
//! time, executable, the path in the mount tree, the list line), logs them
//! to the journal with structured fields, bounded per uid
//! ([`crate::policy::denials::Limiter`]), keeps each uid's recent ones for
//! `agent-sandbox-exec --denials` ([`crate::policy::denials::Store`]) and
//! reports the kernel's counts of lost and rate-limited records.

use std::collections::HashMap;
use std::os::fd::BorrowedFd;
use std::time::{SystemTime, UNIX_EPOCH};

use crate::kernel::denials::DenialReader;
use crate::kernel::programs::Bpf;
use crate::lists::entries::{ListEntry, ListOrigin};
use crate::os::paths::HOME_LIST;
use crate::os::procfs;
use crate::policy::denials::{self, Denial, EntryRef, Limiter, Record, Store};
use crate::proto::request::DenialsReply;

/// Uids whose list lines are kept, at most (those with a sandbox).
const MAX_UIDS_WITH_LINES: usize = 4096;

/// Denial events, from the ring buffer to the journal and `--denials`.
pub struct Denials {
    reader: Option<DenialReader>,
    store: Store,
    limiter: Limiter,
    /// Per uid: the accepted lines of its lists at its last applies.
    lines: HashMap<u32, Vec<ListEntry>>,
    /// Per uid: its home directory, to name its list file.
    homes: HashMap<u32, String>,
    /// Per uid: its account (name and home) at its last apply.
    accounts: HashMap<u32, String>,
    journal: Option<systemd_journal_logger::JournalLog>,
    /// The kernel's counters as last seen: (lost, rate-limited).
    seen: (u64, u64),
    /// Per sandbox cgroup id: its count in `denial_dropped` as last seen.
    dropped_seen: HashMap<u64, u64>,
    /// Sandbox cgroup id -> uid, learnt from the records.
    owners: HashMap<u64, u32>,
    /// The daemon's own mount table (the host's) and when it was read, for
    /// the mount points of filesystem-relative paths: read at most once a
    /// second, whatever a sandboxed task's own mount namespace holds.
    mounts: Option<(std::time::Instant, Vec<u8>)>,
}

impl Denials {
    /// Starts reading `bpf`'s ring buffer; without it (logged) there are no
    /// events, and enforcement is unchanged.
    pub fn new(bpf: &Bpf) -> Denials {
        let reader = bpf
            .denial_reader()
            .map_err(|e| log::error!("denial events are off: {}", crate::error::error_chain(&e)))
            .ok();
        let journal = systemd_journal_logger::connected_to_journal()
            .then(|| {
                systemd_journal_logger::JournalLog::new()
                    .map(|j| j.with_syslog_identifier("agent-sandbox-execd".into()))
                    .ok()
            })
            .flatten();
        Denials {
            reader,
            store: Store::default(),
            limiter: Limiter::default(),
            lines: HashMap::new(),
            homes: HashMap::new(),
            accounts: HashMap::new(),
            journal,
            seen: bpf.denial_stats(),
            dropped_seen: bpf.denial_dropped().into_iter().collect(),
            owners: HashMap::new(),
            mounts: None,
        }
    }

    /// The descriptor to poll for records, if events are on.
    pub fn fd(&self) -> Option<BorrowedFd<'_>> {
        self.reader.as_ref().map(DenialReader::fd)
    }

    /// Keeps `uid`'s list lines (see [`crate::policy::launch::Command::Entries`]).
    pub fn set_lines(&mut self, uid: u32, entries: Vec<ListEntry>, replace: bool) {
        if !self.lines.contains_key(&uid) && self.lines.len() >= MAX_UIDS_WITH_LINES {
            return;
        }
        let kept = self.lines.entry(uid).or_default();
        if replace {
            *kept = entries;
        } else {
            for e in entries {
                if !kept.contains(&e) {
                    kept.push(e);
                }
            }
        }
        // Looked up at every apply: a uid may be a new user with another home since the last.
        // A uid whose account changed (deleted, and made again for someone
        // else: another name or home) starts with no records.
        match nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(uid)) {
            Ok(Some(u)) => {
                let account = format!("{}\0{}", u.name, u.dir.to_string_lossy());
                if self.accounts.get(&uid).is_some_and(|a| *a != account) {
                    self.store.forget(uid);
                }
                self.accounts.insert(uid, account);
                self.homes.insert(uid, u.dir.to_string_lossy().into_owned());
            }
            _ => {
                self.homes.remove(&uid);
            }
        }
    }

    /// Reads every waiting record: logs it (within the rate limit) and keeps it.
    pub fn pump(&mut self) {
        let Some(reader) = &self.reader else {
            return;
        };
        for got in reader.drain() {
            match got {
                Ok(d) => self.take(d),
                Err(why) => log::warn!("a denial record that does not decode: {why}"),
            }
        }
    }

    fn take(&mut self, d: Denial) {
        let now = now_ms();
        if self.owners.len() >= MAX_UIDS_WITH_LINES && !self.owners.contains_key(&d.cgid) {
            self.owners.clear(); // learnt again from the next records
        }
        self.owners.insert(d.cgid, d.uid);
        let time_ms = now.saturating_sub(boot_now_ns().saturating_sub(d.boot_ns) / 1_000_000);
        let exe = std::fs::read_link(format!("/proc/{}/exe", d.pid))
            .ok()
            .map(|p| p.to_string_lossy().into_owned());
        let path = d.path.as_ref().map(|p| {
            let shown = if d.path_fs_relative {
                self.mount_tree_path(d.dev, p).unwrap_or_else(|| p.clone())
            } else {
                p.clone()
            };
            let mut s = String::from_utf8_lossy(&shown).into_owned();
            if d.path_truncated {
                s.insert(0, '…');
            }
            s
        });
        let entry = match (&path, d.op.on_listed_file(), d.path_truncated) {
            (Some(p), true, false) => self
                .lines
                .get(&d.uid)
                .and_then(|lines| denials::attribute_op(lines, p.as_bytes(), d.op))
                .map(|e| self.entry_ref(d.uid, e)),
            _ => None,
        };
        let r = Record {
            seq: self.store.next_seq(),
            time_ms,
            denial: d,
            exe,
            path,
            entry,
        };
        if self.limiter.admit(r.denial.uid, now) {
            self.log(&r);
        }
        self.store.push(r);
    }

    fn entry_ref(&self, uid: u32, e: &ListEntry) -> EntryRef {
        let list = match e.origin {
            // A line of an included file is named by that file.
            _ if !e.file.is_empty() => String::from_utf8_lossy(&e.file).into_owned(),
            ListOrigin::Base => crate::os::paths::Paths::system()
                .base_list
                .to_string_lossy()
                .into_owned(),
            ListOrigin::User => match self.homes.get(&uid) {
                Some(h) => format!("{h}/{HOME_LIST}"),
                None => format!("~/{HOME_LIST}"),
            },
        };
        EntryRef {
            origin: e.origin,
            list,
            line: e.line,
            dir: e.dir,
            audit: e.audit,
            readonly: e.readonly,
        }
    }

    fn log(&self, r: &Record) {
        let message = denials::message(r);
        match &self.journal {
            Some(j) => {
                let fields = denials::journal_fields(r);
                let kvs: Vec<(&str, &str)> = fields.iter().map(|(k, v)| (*k, v.as_str())).collect();
                let sent = j.journal_send(
                    &log::Record::builder()
                        .level(log::Level::Warn)
                        .target("agent_sandbox_exec::denials")
                        .key_values(&kvs)
                        .args(format_args!("{message}"))
                        .build(),
                );
                if sent.is_err() {
                    log::warn!("{message}");
                }
            }
            None => log::warn!("{message}"),
        }
    }

    /// Once a second: the rate limit's summaries, and the kernel's lost
    /// and rate-limited counts when they moved.
    pub fn tick(&mut self, bpf: &Bpf) {
        let now = now_ms();
        // Rebuilt from the map each time: a sandbox that is gone leaves both.
        let dropped: HashMap<u64, u64> = bpf.denial_dropped().into_iter().collect();
        for (cgid, n) in &dropped {
            let before = self.dropped_seen.get(cgid).copied().unwrap_or(0);
            if let Some(uid) = self.owners.get(cgid)
                && *n > before
            {
                self.limiter.add_dropped(*uid, n - before, now);
            }
        }
        self.dropped_seen = dropped;
        for (uid, n) in self.limiter.expire(now) {
            log::warn!(
                "uid {uid}: {n} more refusals in the last {} s not logged (rate limit; \
                 `agent-sandbox-exec --denials` as that user shows the latest)",
                Limiter::WINDOW_MS / 1000
            );
        }
        let (lost, limited) = bpf.denial_stats();
        if lost > self.seen.0 {
            log::warn!(
                "{} denial records lost: the ring buffer was full ({} lost since it was made)",
                lost - self.seen.0,
                lost
            );
        }
        self.seen = (lost, limited);
    }

    /// `uid`'s records after number `after`, as many as fit one reply.
    pub fn answer(&self, uid: u32, after: u64) -> DenialsReply {
        let mut reply = DenialsReply::default();
        reply.lost = self.seen.0;
        for r in self.store.since(uid, after) {
            if !reply.push(denials::to_json(r), r.seq) {
                reply.more = true;
                break;
            }
        }
        reply
    }
}

impl Denials {
    /// The path in the host's mount tree (the daemon's mount namespace) of
    /// `fs_path` on device `dev`. Not the denied task's own table: a
    /// sandboxed task may make a mount namespace of its own with any number
    /// of mounts (reading it per record would stall the poll loop) and
    /// decoy mounts of the device (which would change the path shown and
    /// the list line it is traced to).
    fn mount_tree_path(&mut self, dev: u32, fs_path: &[u8]) -> Option<Vec<u8>> {
        let fresh = self
            .mounts
            .as_ref()
            .is_some_and(|(at, _)| at.elapsed() < std::time::Duration::from_secs(1));
        if !fresh {
            let text = procfs::read_pseudo("/proc/self/mountinfo").ok()?;
            self.mounts = Some((std::time::Instant::now(), text));
        }
        let (_, text) = self.mounts.as_ref()?;
        denials::mounted_path(procfs::mountinfo(text), dev, fs_path)
    }
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// `CLOCK_BOOTTIME` now, in nanoseconds (what `bpf_ktime_get_boot_ns()` reads).
fn boot_now_ns() -> u64 {
    nix::time::clock_gettime(nix::time::ClockId::CLOCK_BOOTTIME).map_or(0, |t| {
        u64::try_from(t.tv_sec()).unwrap_or(0) * 1_000_000_000
            + u64::try_from(t.tv_nsec()).unwrap_or(0)
    })
}
