//! What one user may cost the daemon: which connections it takes, and how
//! often it logs one user's misbehaviour.
//!
//! Every connection the daemon holds, from accept(2) until its reply, holds a
//! [`Ticket`] counted per uid in a [`Ledger`]: one uid may hold at most
//! [`Limits::per_uid`] of them, all users together [`Limits::total`]. A
//! connection over either limit is answered with a refusal and closed at
//! once. Since `per_uid` is far below `total`, no single user can take the
//! connections another user needs. Each kind of [`Abuse`] is logged at most
//! once per uid per [`LOG_INTERVAL`] ([`LogLimiter`]), so a flood costs the
//! journal a bounded number of lines.

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;
use std::time::{Duration, Instant};

use crate::proto::request::{Received, Request, RequestError};

/// Connections one uid may have open to the daemon at once: waiting to send
/// their request, queued for a resolution, or being answered.
pub const MAX_PER_UID: usize = 64;
/// Connections all users together may have open at once. The daemon raises
/// its open-file limit above this (see [`crate::daemon`]), so accept(2)
/// never fails with EMFILE.
pub const MAX_TOTAL: usize = 1024;
/// How often one kind of abuse is logged for one uid, at most.
pub const LOG_INTERVAL: Duration = Duration::from_secs(60);

/// The two caps of [`decide`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Connections one uid may hold.
    pub per_uid: usize,
    /// Connections all uids together may hold.
    pub total: usize,
}

/// The daemon's limits.
pub const LIMITS: Limits = Limits {
    per_uid: MAX_PER_UID,
    total: MAX_TOTAL,
};

/// A kind of misbehaviour on the request socket, logged at most once per uid
/// per [`LOG_INTERVAL`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Abuse {
    /// A connection over the uid's cap.
    TooManyOfUid,
    /// A connection over the total cap.
    TooManyInAll,
    /// A request that does not parse.
    Malformed,
    /// A request larger than allowed.
    TooLarge,
    /// A connection that sent no request in time.
    Silent,
    /// A well-formed request that failed authentication.
    Refused,
}

/// Whether a new connection of a uid that holds `of_uid` connections, while
/// all uids hold `in_all`, is taken: Ok, or the cap it would exceed (the
/// uid's is checked first, so a flooder is told about its own cap).
///
/// # Errors
/// [`Abuse::TooManyOfUid`] or [`Abuse::TooManyInAll`].
pub fn decide(of_uid: usize, in_all: usize, limits: Limits) -> Result<(), Abuse> {
    if of_uid >= limits.per_uid {
        Err(Abuse::TooManyOfUid)
    } else if in_all >= limits.total {
        Err(Abuse::TooManyInAll)
    } else {
        Ok(())
    }
}

#[derive(Debug, Default)]
struct Counts {
    of_uid: HashMap<u32, usize>,
    in_all: usize,
}

/// The count of connections held, per uid and in all.
#[derive(Debug, Default, Clone)]
pub struct Ledger(Rc<RefCell<Counts>>);

/// One held connection of a uid; dropping it gives its place back.
#[derive(Debug)]
pub struct Ticket {
    uid: u32,
    counts: Rc<RefCell<Counts>>,
}

impl Ledger {
    /// Takes a place for a connection of `uid`, if [`decide`] allows it.
    ///
    /// # Errors
    /// The cap it would exceed.
    pub fn admit(&self, uid: u32, limits: Limits) -> Result<Ticket, Abuse> {
        let mut c = self.0.borrow_mut();
        let of_uid = c.of_uid.get(&uid).copied().unwrap_or(0);
        decide(of_uid, c.in_all, limits)?;
        c.of_uid.insert(uid, of_uid + 1);
        c.in_all += 1;
        Ok(Ticket {
            uid,
            counts: Rc::clone(&self.0),
        })
    }

    /// Connections `uid` holds.
    #[cfg(test)]
    pub fn of_uid(&self, uid: u32) -> usize {
        self.0.borrow().of_uid.get(&uid).copied().unwrap_or(0)
    }

    /// Connections all uids hold.
    #[cfg(test)]
    pub fn in_all(&self) -> usize {
        self.0.borrow().in_all
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        let mut c = self.counts.borrow_mut();
        c.in_all = c.in_all.saturating_sub(1);
        if let Some(n) = c.of_uid.get_mut(&self.uid) {
            *n -= 1;
            if *n == 0 {
                c.of_uid.remove(&self.uid);
            }
        }
    }
}

/// Whether a line is due for an event last logged at `last` (None: never),
/// `now`, logging at most once per `interval`.
pub fn due(last: Option<Instant>, now: Instant, interval: Duration) -> bool {
    last.is_none_or(|l| now.saturating_duration_since(l) >= interval)
}

/// Logs each kind of abuse at most once per uid per interval, counting the
/// events it did not log.
#[derive(Debug)]
pub struct LogLimiter {
    interval: Duration,
    /// Per (uid, kind): when it was last logged, and events since then.
    seen: HashMap<(u32, Abuse), (Instant, u64)>,
}

impl LogLimiter {
    /// A limiter logging each (uid, kind) at most once per `interval`.
    pub fn new(interval: Duration) -> LogLimiter {
        LogLimiter {
            interval,
            seen: HashMap::new(),
        }
    }

    /// Records one event; Some(n) when it should be logged now, n being the
    /// events of that uid and kind not logged since the last line.
    pub fn note(&mut self, uid: u32, kind: Abuse, now: Instant) -> Option<u64> {
        let entry = self.seen.get_mut(&(uid, kind));
        match entry {
            Some((last, quiet)) if !due(Some(*last), now, self.interval) => {
                *quiet += 1;
                None
            }
            Some((last, quiet)) => {
                let n = *quiet;
                *last = now;
                *quiet = 0;
                Some(n)
            }
            None => {
                self.seen.insert((uid, kind), (now, 0));
                Some(0)
            }
        }
    }

    /// Forgets (uid, kind) pairs logged more than an interval ago with no
    /// event since, so the table holds only uids misbehaving lately.
    pub fn expire(&mut self, now: Instant) {
        let interval = self.interval;
        self.seen
            .retain(|_, (last, quiet)| *quiet > 0 || !due(Some(*last), now, interval));
    }

    /// The (uid, kind) pairs remembered.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.seen.len()
    }
}

/// What to do with what one receive on a connection found.
#[derive(Debug, PartialEq, Eq)]
pub enum Screened {
    /// A well-formed request for the connecting process itself (its pid,
    /// to authenticate, and what it asks for).
    Request(Request),
    /// A well-formed status question (`op=status`) of the connecting
    /// process: answered at once, nothing moved or applied.
    Status(i32),
    /// A well-formed question for the uid's recent refusals (`op=denials`)
    /// numbered above this: answered at once, nothing moved or applied.
    Denials(u64),
    /// Refuse, with this kind (for the log) and reason (for the reply).
    Refuse(Abuse, String),
    /// Nothing arrived yet: keep waiting (until the deadline).
    Wait,
    /// The peer is gone (or sent an empty packet): close without a reply.
    Close,
}

/// Screens one receive on a connection from the process `peer_pid` (its
/// `SO_PEERCRED` pid): the request must parse, and must name `peer_pid`.
/// A launcher asks only for itself; a pid of 0 (a peer outside the
/// daemon's pid namespace) never matches.
pub fn screen(peer_pid: i32, received: Received) -> Screened {
    let content = match received {
        Received::Message(m) => m,
        Received::TooLarge(size) => {
            let e = RequestError::TooLarge {
                size,
                max: crate::proto::request::MAX_REQUEST_BYTES,
            };
            return Screened::Refuse(Abuse::TooLarge, format!("bad request: {e}"));
        }
        Received::Nothing => return Screened::Wait,
        Received::Closed => return Screened::Close,
    };
    let req = match Request::parse(&content) {
        Ok(r) => r,
        Err(e) => return Screened::Refuse(Abuse::Malformed, format!("bad request: {e}")),
    };
    if peer_pid <= 0 || req.pid != peer_pid {
        return Screened::Refuse(
            Abuse::Refused,
            format!(
                "the request names process {}, but process {peer_pid} connected; a launcher can \
                 only ask for itself (from the daemon's pid namespace)",
                req.pid
            ),
        );
    }
    if req.status {
        Screened::Status(req.pid)
    } else if let Some(after) = req.denials_after {
        Screened::Denials(after)
    } else {
        Screened::Request(req)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn screen_requests() {
        let msg = |t: &str| Received::Message(t.as_bytes().to_vec());
        assert_eq!(
            screen(42, msg("version=2\npid=42\n")),
            Screened::Request(Request {
                pid: 42,
                ..Default::default()
            })
        );
        assert_eq!(
            screen(42, msg("version=2\npid=42\nop=status\n")),
            Screened::Status(42)
        );
        assert!(matches!(
            screen(42, msg("version=2\npid=43\nop=status\n")),
            Screened::Refuse(Abuse::Refused, _)
        ));
        assert_eq!(screen(42, Received::Nothing), Screened::Wait);
        assert_eq!(screen(42, Received::Closed), Screened::Close);
        let refused = |s: Screened| match s {
            Screened::Refuse(kind, why) => (kind, why),
            other => panic!("{other:?}"),
        };
        let (kind, why) = refused(screen(42, msg("version=2\npid=43\n")));
        assert_eq!(kind, Abuse::Refused);
        assert!(
            why.contains("names process 43, but process 42 connected"),
            "{why}"
        );
        // A peer outside the daemon's pid namespace shows as pid 0.
        assert_eq!(
            refused(screen(0, msg("version=2\npid=1\n"))).0,
            Abuse::Refused
        );
        let (kind, why) = refused(screen(42, Received::TooLarge(100_000)));
        assert_eq!(kind, Abuse::TooLarge);
        assert!(
            why.contains("100000 bytes, more than the 8192 allowed"),
            "{why}"
        );
        let (kind, why) = refused(screen(42, msg("\u{ff}garbage")));
        assert_eq!(kind, Abuse::Malformed);
        assert!(why.starts_with("bad request: malformed"), "{why}");
        let (_, why) = refused(screen(42, msg("version=1\npid=42\n")));
        assert!(why.contains("this daemon speaks 2"), "{why}");
    }

    #[test]
    fn decide_caps_per_uid_before_total() {
        let l = Limits {
            per_uid: 2,
            total: 3,
        };
        assert_eq!(decide(0, 0, l), Ok(()));
        assert_eq!(decide(1, 2, l), Ok(()));
        assert_eq!(decide(2, 2, l), Err(Abuse::TooManyOfUid));
        assert_eq!(decide(2, 3, l), Err(Abuse::TooManyOfUid));
        assert_eq!(decide(0, 3, l), Err(Abuse::TooManyInAll));
        assert_eq!(decide(1, 5, l), Err(Abuse::TooManyInAll));
        const { assert!(LIMITS.per_uid * 8 <= LIMITS.total) };
    }

    #[test]
    fn ledger_counts_tickets_and_gives_places_back() {
        let l = Limits {
            per_uid: 2,
            total: 3,
        };
        let ledger = Ledger::default();
        let a1 = ledger.admit(1, l).unwrap();
        let a2 = ledger.admit(1, l).unwrap();
        // uid 1 is at its cap; uid 2 is not stopped by it.
        assert_eq!(ledger.admit(1, l).unwrap_err(), Abuse::TooManyOfUid);
        let b1 = ledger.admit(2, l).unwrap();
        assert_eq!(ledger.in_all(), 3);
        assert_eq!(ledger.admit(3, l).unwrap_err(), Abuse::TooManyInAll);
        drop(a1);
        assert_eq!(ledger.of_uid(1), 1);
        let a3 = ledger.admit(1, l).unwrap();
        drop((a2, a3, b1));
        assert_eq!(
            (ledger.of_uid(1), ledger.of_uid(2), ledger.in_all()),
            (0, 0, 0)
        );
        assert!(ledger.0.borrow().of_uid.is_empty());
    }

    #[test]
    fn logs_once_per_uid_and_kind_per_interval() {
        let t0 = Instant::now();
        let s = Duration::from_secs(1);
        let mut lim = LogLimiter::new(Duration::from_secs(60));
        assert_eq!(lim.note(7, Abuse::Malformed, t0), Some(0));
        for i in 1..=1000 {
            assert_eq!(lim.note(7, Abuse::Malformed, t0 + s * (i % 59)), None);
        }
        // Another kind, another uid: logged at once.
        assert_eq!(lim.note(7, Abuse::Silent, t0), Some(0));
        assert_eq!(lim.note(8, Abuse::Malformed, t0), Some(0));
        // After the interval: one line, counting the quiet events.
        assert_eq!(lim.note(7, Abuse::Malformed, t0 + s * 60), Some(1000));
        assert_eq!(lim.note(7, Abuse::Malformed, t0 + s * 61), None);
        lim.expire(t0 + s * 200);
        // (7, Malformed) had an event since its last line: kept.
        assert_eq!(lim.len(), 1);
        assert!(due(None, t0, s));
        assert!(!due(Some(t0), t0, s));
        assert!(due(Some(t0), t0 + s, s));
    }
}
