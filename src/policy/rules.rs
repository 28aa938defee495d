//! Each of the daemon's decisions, as a pure function of what the daemon has
//! seen: no I/O, no clock, no kernel. `src/daemon/mod.rs` gathers the facts
//! (a request's cgroup, a resolver's answer, the maps' version), asks here
//! what to do and does it (apply, move, reply); `cargo test` exercises every
//! decision on any host, including the cases the guest suites found the hard
//! way.
//!
//! What is decided here:
//! - the apply mode ([`apply_mode`]): exact only for a batch of launches all
//!   seen outside a sandbox and alive after that was seen; otherwise add-only
//!   (the strictness rule: nothing done from inside makes a sandbox less
//!   strict, see [`may_loosen`]), and add-only too after an incomplete scan
//!   of a directory entry ([`keys_mode`]); such a launch refused when its
//!   sandbox was forgotten and it would lose what the uid's record holds
//!   ([`incomplete_scan_refusal`]);
//! - answer reuse ([`may_reuse`]): a relaunch with unchanged lists skips the
//!   parse and the apply only if the sandbox is exactly as that apply left it;
//! - the caps ([`check_keys`], [`check_union`], [`check_stuck`]);
//! - a broken resolver: one retry with fresh processes ([`after_break`]);
//! - moving a launcher in ([`check_before_move`], [`judge_move`],
//!   [`reused_pid_stays`]), and not one that holds a descriptor of a denied
//!   file ([`denied_descriptor`]);
//! - what a launch is told ([`removal_notice`], [`capped`]).

/// How an apply may change a sandbox's entries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ApplyMode {
    /// Make the sandbox's keys exactly the desired set (entries no longer
    /// listed are removed; allows and exceptions take effect).
    Exact,
    /// Only add: keys no longer desired stay (launches from inside a sandbox,
    /// whose agent may have edited the user's list, and re-applies without a
    /// launch).
    AddOnly,
}

/// Longest list of warnings carried in one reply; the rest are counted in a
/// notice ([`capped`]).
pub const MAX_WARNINGS: usize = 50;

/// Killed resolver processes of one uid that have not exited, at most,
/// before its launches are refused ([`check_stuck`]): each may sit in the
/// daemon's cgroup for good (a request to a FUSE server that never answers),
/// counted against its task limit. A pair just killed for a retry counts
/// too, so this leaves room for one.
pub const MAX_STUCK_PER_UID: usize = 4;

/// A refusal of a launch, with the reason the user is given.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// The lists name more keys than one user may have.
    #[error("the lists name {need} files, more than the {cap} allowed per user")]
    TooManyKeys {
        /// Files or names the lists resolve to (the larger count).
        need: usize,
        /// The per-user cap.
        cap: usize,
    },
    /// The lists' name patterns use more shapes than one user may.
    #[error(
        "the lists' name patterns use {need} shapes (where a pattern's fixed bytes, `?` and `*` \
         are: `*.pem` and `*.key` share one), more than the {cap} allowed per user; give \
         patterns the same shape or list fewer"
    )]
    TooManyShapes {
        /// Distinct shapes of the lists' patterns.
        need: usize,
        /// The per-user cap.
        cap: usize,
    },
    /// An add-only apply would hold more keys than one user may have.
    #[error(
        "with what the running sandbox already denies, the lists would name {after} files, \
         more than the {cap} allowed per user; launch from outside a sandbox to drop old entries"
    )]
    TooManyWithHeld {
        /// Files or names the sandbox would hold after the apply.
        after: usize,
        /// The per-user cap.
        cap: usize,
    },
    /// Too many killed resolvers of the uid have not exited.
    #[error(
        "{count} list resolver processes of uid {uid} were killed and have not exited \
         (a listed path on a stalled FUSE or NFS mount?); fix or unmount it"
    )]
    Stuck {
        /// The uid.
        uid: u32,
        /// Its killed processes not reaped yet.
        count: usize,
    },
}

/// A launcher of a batch, as the daemon saw it once the lists were resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Requester {
    /// Its cgroup v2 path then (`/proc/<pid>/cgroup`), `None` if it could
    /// not be read (the process is gone, or hides it).
    pub cgroup: Option<String>,
    /// Whether its pidfd still reported it alive after the cgroup was read:
    /// a launcher that died meanwhile may have been an agent's, and its pid
    /// may now belong to anybody.
    pub alive_after: bool,
}

/// The apply mode for a batch of launches of one uid whose sandbox cgroup
/// is `sandbox` (its v2 path). Exact only if the batch is not empty (an
/// empty batch is a re-apply without a launch: start-up, SIGHUP) and every
/// requester was seen outside that sandbox and alive after it was seen;
/// anything else (inside, unreadable, dead) counts as a launch from inside.
pub fn apply_mode(sandbox: &str, batch: &[Requester]) -> ApplyMode {
    let outside =
        |r: &Requester| r.alive_after && r.cgroup.as_deref().is_some_and(|c| c != sandbox);
    if !batch.is_empty() && batch.iter().all(outside) {
        ApplyMode::Exact
    } else {
        ApplyMode::AddOnly
    }
}

/// Whether an apply in `mode` may make a sandbox less strict: remove
/// entries, or give effect to allows and exceptions added since the last
/// exact apply. Only a launch seen outside every sandbox may (the
/// strictness rule); from inside, such changes wait for the next outside
/// launch, which says what it removed.
pub fn may_loosen(mode: ApplyMode) -> bool {
    mode == ApplyMode::Exact
}

/// The apply mode for the keys of a launch in `mode` (from [`apply_mode`])
/// whose resolution's directory-entry scans all read everything below
/// their entries (`scans_complete`), or not. An incomplete scan (a
/// directory below an entry made unreadable, `chmod 000`, or too many
/// names) sends fewer keys than a complete one would, without any list
/// change: the file an earlier scan marked by inode, for its second name
/// outside the entry, may be below what this one could not read. Removing
/// keys then would let an agent loosen the next launch from outside by
/// making the scan fail (issue 23), so such an apply only adds; the
/// earlier keys stay until a complete scan. (Sockets keep `mode`: the scan
/// says nothing about them.)
pub fn keys_mode(mode: ApplyMode, scans_complete: bool) -> ApplyMode {
    if scans_complete {
        mode
    } else {
        ApplyMode::AddOnly
    }
}

/// What the daemon kept of a uid's last successful apply, for [`may_reuse`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LastApply {
    /// The sandbox cgroup id it was applied to.
    pub cgid: u64,
    /// Whether the resolvers' new answers are byte for byte those it applied.
    pub same_answers: bool,
    /// Entries the sandbox held beyond those answers after it: stale keys
    /// kept by an add-only apply, or whose deletion failed.
    pub unlisted: usize,
    /// Whether the sandbox's entries are still as that apply left them: no
    /// other apply, no key dropped by the kernel (`inode_free_security`)
    /// since ([`crate::kernel::programs::Bpf::unchanged_since`]).
    pub unchanged: bool,
}

/// Whether a launch in `mode` may skip the parse and the apply and reuse
/// `last`: the sandbox cgroup is the same one (`existing`: its id now,
/// `None` if it does not exist), the answers are the same, nothing changed
/// the sandbox since, and an exact launch has nothing stale to remove.
pub fn may_reuse(last: Option<&LastApply>, existing: Option<u64>, mode: ApplyMode) -> bool {
    last.is_some_and(|a| {
        existing == Some(a.cgid)
            && a.same_answers
            && a.unchanged
            && (a.unlisted == 0 || mode == ApplyMode::AddOnly)
    })
}

/// Checks the per-user cap `cap` against what the lists resolve to: `files`
/// file keys and `names` names.
///
/// # Errors
/// [`Refusal::TooManyKeys`] if either count exceeds the cap.
pub fn check_keys(files: usize, names: usize, cap: usize) -> Result<(), Refusal> {
    let need = files.max(names);
    if need > cap {
        return Err(Refusal::TooManyKeys { need, cap });
    }
    Ok(())
}

/// The shapes one user's name patterns may use: half the machine's
/// ([`crate::lists::pattern::MAX_SHAPES`]), so that no one user takes every
/// slot (the shipped catalogue uses 9).
pub const MAX_SHAPES_PER_UID: usize = crate::lists::pattern::MAX_SHAPES / 2;

/// Checks the per-user cap on name-pattern shapes: `shapes` distinct
/// shapes against `cap`.
///
/// # Errors
/// [`Refusal::TooManyShapes`] past the cap.
pub fn check_shapes(shapes: usize, cap: usize) -> Result<(), Refusal> {
    if shapes > cap {
        return Err(Refusal::TooManyShapes { need: shapes, cap });
    }
    Ok(())
}

/// Checks the per-user cap for an add-only apply, which keeps what the
/// sandbox holds: the cap is on the union (`files`, `names`: counts of the
/// union of held and desired keys), or launches from inside with ever new
/// lists would fill the maps every user shares.
///
/// # Errors
/// [`Refusal::TooManyWithHeld`] if the union exceeds the cap.
pub fn check_union(files: usize, names: usize, cap: usize) -> Result<(), Refusal> {
    let after = files.max(names);
    if after > cap {
        return Err(Refusal::TooManyWithHeld { after, cap });
    }
    Ok(())
}

/// Whether a resolution may start for `uid`, which has `stuck` killed
/// resolver processes not reaped yet.
///
/// # Errors
/// [`Refusal::Stuck`] at [`MAX_STUCK_PER_UID`] or more.
pub fn check_stuck(uid: u32, stuck: usize) -> Result<(), Refusal> {
    if stuck >= MAX_STUCK_PER_UID {
        return Err(Refusal::Stuck { uid, count: stuck });
    }
    Ok(())
}

/// What follows a resolver that broke while it owed an answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AfterBreak {
    /// Start again with fresh processes (once).
    Retry,
    /// Refuse the batch.
    Fail,
}

/// A resolver broke (`retryable`: it died or was stale, rather than
/// answering something wrong); `retried`: it was already the second try.
pub fn after_break(retryable: bool, retried: bool) -> AfterBreak {
    if retryable && !retried {
        AfterBreak::Retry
    } else {
        AfterBreak::Fail
    }
}

/// Why a launcher is not moved into its sandbox.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MoveRefusal {
    /// It exited before the move.
    #[error("process {pid} exited before it could be moved")]
    Exited {
        /// Its pid.
        pid: i32,
    },
    /// Its uids are no longer all the requesting uid.
    #[error("process {pid} changed its uids to {uids:?}")]
    ChangedUids {
        /// Its pid.
        pid: i32,
        /// Real, effective, saved and filesystem uid, read just before.
        uids: [u32; 4],
    },
    /// The write to `cgroup.procs` failed.
    #[error("cannot move process {pid} into its sandbox: {why}")]
    Failed {
        /// Its pid.
        pid: i32,
        /// The error of the write.
        why: String,
    },
    /// It exited during the move: the pid may have been reused, and the
    /// write may have moved another process in.
    #[error("process {pid} exited while being moved")]
    ExitedDuringMove {
        /// Its pid.
        pid: i32,
    },
}

/// Checks a launcher just before its move: its pidfd `alive`, and its
/// `uids` (real, effective, saved, filesystem) all `uid`.
///
/// # Errors
/// [`MoveRefusal::Exited`] or [`MoveRefusal::ChangedUids`].
pub fn check_before_move(
    pid: i32,
    uid: u32,
    uids: [u32; 4],
    alive: bool,
) -> Result<(), MoveRefusal> {
    if !alive {
        return Err(MoveRefusal::Exited { pid });
    }
    if uids != [uid; 4] {
        return Err(MoveRefusal::ChangedUids { pid, uids });
    }
    Ok(())
}

/// Judges a move from its result `moved` and whether the launcher's pidfd
/// was `alive_after` it. Dead after the write means the pid may have been
/// reused in between: the launch is refused whatever the write said (the
/// requester is gone anyway), and the caller checks the pid's new holder
/// ([`reused_pid_stays`]).
///
/// # Errors
/// [`MoveRefusal::Failed`] or [`MoveRefusal::ExitedDuringMove`].
pub fn judge_move(
    pid: i32,
    moved: Result<(), String>,
    alive_after: bool,
) -> Result<(), MoveRefusal> {
    if !alive_after {
        return Err(MoveRefusal::ExitedDuringMove { pid });
    }
    moved.map_err(|why| MoveRefusal::Failed { pid, why })
}

/// After [`MoveRefusal::ExitedDuringMove`]: whether another process now
/// holds the pid (`start_now`: the pid's start time now, `None` if nobody
/// holds it; `start_before`: the launcher's) and sits in the sandbox
/// (`in_sandbox`), so that the write moved it in. It is left there on
/// purpose (the caller logs it): confinement only takes rights away, and
/// moving a process *out* on a guess about where it came from would give an
/// attacker who wins the race a way out.
pub fn reused_pid_stays(start_before: u64, start_now: Option<u64>, in_sandbox: bool) -> bool {
    start_now.is_some_and(|now| now != start_before) && in_sandbox
}

/// Why a launcher holding `descriptors` (which PROGRAM would inherit) may
/// not be moved into a sandbox that holds `held` (the keys its applies
/// wrote, from the resolvers' answers; `None`: nothing): the first
/// descriptor whose file's key is denied there as a file ([`KIND_OPEN`]),
/// if any. Decided by the key alone, never by what the user may open now:
/// a listed file made unreadable (`chmod 000`) after the descriptor was
/// opened is still read through it. Marks of other kinds (directories on
/// the way to a listed name, directory entries) deny no inode by its key;
/// a file below a directory entry is left to the launcher's reopen, which
/// the hook's walk judges.
///
/// [`KIND_OPEN`]: crate::lists::entries::KIND_OPEN
pub fn denied_descriptor(
    descriptors: &[crate::proto::request::Descriptor],
    held: Option<&crate::lists::entries::DenySet>,
) -> Option<String> {
    let files = held?.files();
    let d = descriptors.iter().find(|d| {
        let key = crate::lists::entries::FileKey {
            kind: crate::lists::entries::KIND_OPEN,
            ..d.key
        };
        files.binary_search(&key).is_ok()
    })?;
    Some(format!(
        "descriptor {fd} is open on a file your sandbox denies, and PROGRAM would inherit it; \
         close it before launching (e.g. `{fd}<&-`)",
        fd = d.fd
    ))
}

/// What the uid's record (kept across daemon restarts and reboots) says an
/// apply to a sandbox that held nothing would no longer deny.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecordedLoss {
    /// Nothing: no record, or every recorded entry is in the new keys.
    Nothing,
    /// This many recorded entries (file or name keys) are not.
    Entries(usize),
    /// The record cannot tell (unreadable, corrupt or foreign).
    Unknown,
}

/// The reason to refuse a launch from outside whose directory-entry scan
/// was incomplete (`incomplete`: why, from the resolver) and whose sandbox
/// held nothing, by what the uid's record says that apply would lose
/// (`loss`); None if the scan was complete or nothing is lost.
///
/// While a sandbox lives, an incomplete scan only adds ([`keys_mode`]), so
/// what an earlier scan marked stays. A sandbox that was forgotten (a daemon
/// restart drops sandboxes without processes, a reboot all of them) holds
/// no earlier keys to keep, so an agent that made a directory below an
/// entry unreadable from inside (a `mkdir -m 300` it then moved a
/// subdirectory into: neither is a mode change) would make that launch miss
/// a file there whose second name outside the entry was denied by inode
/// (issue 23). By the strictness rule that launch is refused, saying why,
/// until the scan is complete again or the record agrees.
pub fn incomplete_scan_refusal(incomplete: Option<&str>, loss: RecordedLoss) -> Option<String> {
    let why = incomplete?;
    let lost = match loss {
        RecordedLoss::Nothing | RecordedLoss::Entries(0) => return None,
        RecordedLoss::Entries(n) => {
            format!("{n} entries your sandboxes denied until now would no longer be denied")
        }
        RecordedLoss::Unknown => "the record of what your sandboxes denied until now cannot \
             tell what that leaves out (the daemon's log says why; a launch whose scan is \
             complete writes it anew)"
            .to_owned(),
    };
    Some(format!(
        "a directory entry's scan could not read everything below it ({why}), and {lost}: a file \
         below it may have a second name outside the entry. From outside a sandbox, remove the \
         cause (make an unreadable directory readable to you again: chmod u+rx, setfacl -b; or \
         wait until nothing changes below the entry) and launch again"
    ))
}

/// The note for `n` (> 0) entries that an apply in `mode` removed (exact)
/// or kept though no longer listed (add-only).
pub fn removal_notice(mode: ApplyMode, n: usize) -> String {
    match mode {
        ApplyMode::Exact => format!(
            "{n} entries denied until now are no longer denied to your sandboxes \
             (paths removed from the lists, or files replaced or moved away)"
        ),
        ApplyMode::AddOnly => format!(
            "{n} entries no longer in the lists stay denied: a launch from inside \
             a sandbox only adds; launch from outside to apply removals"
        ),
    }
}

/// The note for exceptions (`!PATH` lines) and audit entries an apply left
/// out (`held_back`: from inside a sandbox an exception must not loosen it
/// nor an audit mark appear, by the strictness rule, see [`may_loosen`]) or
/// exceptions it wrote (`added`: a launch from outside re-allows files);
/// none if neither.
pub fn exception_notice(held_back: usize, added: usize) -> Option<String> {
    if held_back > 0 {
        Some(format!(
            "{held_back} new exception or audit key(s) in the lists are not applied: a launch \
             from inside a sandbox cannot re-allow files or mark entries audit; launch from \
             outside a sandbox to apply them"
        ))
    } else if added > 0 {
        Some(format!(
            "{added} new exception(s) in the lists now re-allow files below directory entries \
             to your sandboxes"
        ))
    } else {
        None
    }
}

/// At most [`MAX_WARNINGS`] of `warnings`, and the notices to send with
/// them (a line counting the warnings left out, if any).
pub fn capped(warnings: &[String]) -> (Vec<String>, Vec<String>) {
    let kept = warnings.iter().take(MAX_WARNINGS).cloned().collect();
    let mut notices = Vec::new();
    if warnings.len() > MAX_WARNINGS {
        notices.push(format!(
            "{} more problems in your list are not shown",
            warnings.len() - MAX_WARNINGS
        ));
    }
    (kept, notices)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SANDBOX: &str = "/agent-sandbox-exec/uid-1000";

    fn at(cgroup: &str) -> Requester {
        Requester {
            cgroup: Some(cgroup.to_owned()),
            alive_after: true,
        }
    }

    #[test]
    fn outside_launch_is_exact() {
        assert_eq!(
            apply_mode(SANDBOX, &[at("/user.slice/u.scope")]),
            ApplyMode::Exact
        );
        assert_eq!(
            apply_mode(SANDBOX, &[at("/user.slice/a"), at("/user.slice/b")]),
            ApplyMode::Exact
        );
    }

    #[test]
    fn inside_launch_only_adds() {
        assert_eq!(apply_mode(SANDBOX, &[at(SANDBOX)]), ApplyMode::AddOnly);
        // One launcher from inside in a batch makes the whole batch add-only.
        assert_eq!(
            apply_mode(SANDBOX, &[at("/user.slice/a"), at(SANDBOX)]),
            ApplyMode::AddOnly
        );
    }

    #[test]
    fn reapply_without_launch_only_adds() {
        assert_eq!(apply_mode(SANDBOX, &[]), ApplyMode::AddOnly);
    }

    #[test]
    fn forged_outside_launch_only_adds() {
        // A launcher from inside that exits right after its request: its
        // pid may now be an outside process's, so "seen outside" proves
        // nothing unless it is still alive after the read.
        let dead = Requester {
            cgroup: Some("/user.slice/u.scope".to_owned()),
            alive_after: false,
        };
        assert_eq!(apply_mode(SANDBOX, &[dead]), ApplyMode::AddOnly);
        let unreadable = Requester {
            cgroup: None,
            alive_after: true,
        };
        assert_eq!(apply_mode(SANDBOX, &[unreadable]), ApplyMode::AddOnly);
    }

    #[test]
    fn only_exact_loosens() {
        assert!(may_loosen(ApplyMode::Exact));
        assert!(!may_loosen(ApplyMode::AddOnly));
        assert!(!may_loosen(apply_mode(SANDBOX, &[at(SANDBOX)])));
    }

    #[test]
    fn an_incomplete_scan_only_adds() {
        let outside = apply_mode(SANDBOX, &[at("/user.slice")]);
        assert_eq!(keys_mode(outside, true), ApplyMode::Exact);
        assert_eq!(keys_mode(outside, false), ApplyMode::AddOnly);
        assert!(!may_loosen(keys_mode(outside, false)));
        let inside = apply_mode(SANDBOX, &[at(SANDBOX)]);
        assert_eq!(keys_mode(inside, true), ApplyMode::AddOnly);
        assert_eq!(keys_mode(inside, false), ApplyMode::AddOnly);
    }

    #[test]
    fn an_incomplete_scan_that_would_lose_recorded_entries_is_refused() {
        use RecordedLoss::*;
        let why = Some("cannot open below it: Permission denied");
        // A complete scan, or nothing lost: no refusal.
        for loss in [Nothing, Entries(0), Entries(3), Unknown] {
            assert_eq!(incomplete_scan_refusal(None, loss), None);
        }
        assert_eq!(incomplete_scan_refusal(why, Nothing), None);
        assert_eq!(incomplete_scan_refusal(why, Entries(0)), None);
        // Incomplete and losing: refused, saying why and what to do.
        let r = incomplete_scan_refusal(why, Entries(3)).unwrap();
        assert!(
            r.contains("(cannot open below it: Permission denied)"),
            "{r}"
        );
        assert!(r.contains("3 entries your sandboxes denied"), "{r}");
        assert!(r.contains("chmod u+rx"), "{r}");
        let r = incomplete_scan_refusal(why, Unknown).unwrap();
        assert!(r.contains("cannot tell"), "{r}");
    }

    fn last() -> LastApply {
        LastApply {
            cgid: 7,
            same_answers: true,
            unlisted: 0,
            unchanged: true,
        }
    }

    #[test]
    fn unchanged_relaunch_reuses() {
        assert!(may_reuse(Some(&last()), Some(7), ApplyMode::Exact));
        assert!(may_reuse(Some(&last()), Some(7), ApplyMode::AddOnly));
    }

    #[test]
    fn no_reuse_without_a_last_apply_or_cgroup() {
        assert!(!may_reuse(None, Some(7), ApplyMode::Exact));
        assert!(!may_reuse(Some(&last()), None, ApplyMode::Exact));
        // A sandbox cgroup made anew has another id.
        assert!(!may_reuse(Some(&last()), Some(8), ApplyMode::Exact));
    }

    #[test]
    fn changed_answers_are_applied() {
        let a = LastApply {
            same_answers: false,
            ..last()
        };
        assert!(!may_reuse(Some(&a), Some(7), ApplyMode::AddOnly));
    }

    #[test]
    fn kernel_drop_between_two_applies_is_applied() {
        // inode_free_security dropped a key since: the sandbox is no longer
        // what the last apply left, so the keys are written again.
        let a = LastApply {
            unchanged: false,
            ..last()
        };
        assert!(!may_reuse(Some(&a), Some(7), ApplyMode::Exact));
        assert!(!may_reuse(Some(&a), Some(7), ApplyMode::AddOnly));
    }

    #[test]
    fn add_only_then_outside_launch_applies_exactly() {
        // An add-only apply kept 3 unlisted entries; an outside launch with
        // the same answers must remove them, not reuse.
        let a = LastApply {
            unlisted: 3,
            ..last()
        };
        assert!(!may_reuse(Some(&a), Some(7), ApplyMode::Exact));
        // Another launch from inside may reuse: it would keep them anyway.
        assert!(may_reuse(Some(&a), Some(7), ApplyMode::AddOnly));
    }

    #[test]
    fn failed_stale_delete_is_retried_by_the_next_outside_launch() {
        // An exact apply whose deletion of one stale key failed leaves
        // unlisted = 1: the next outside launch tries again.
        let a = LastApply {
            unlisted: 1,
            ..last()
        };
        assert!(!may_reuse(Some(&a), Some(7), ApplyMode::Exact));
    }

    #[test]
    fn caps() {
        assert_eq!(check_keys(10, 3, 10), Ok(()));
        assert_eq!(
            check_keys(3, 11, 10),
            Err(Refusal::TooManyKeys { need: 11, cap: 10 })
        );
        assert_eq!(check_shapes(MAX_SHAPES_PER_UID, MAX_SHAPES_PER_UID), Ok(()));
        let e = check_shapes(17, 16).unwrap_err();
        assert_eq!(e, Refusal::TooManyShapes { need: 17, cap: 16 });
        assert!(e.to_string().contains("17 shapes"));
        assert_eq!(check_union(10, 10, 10), Ok(()));
        let e = check_union(11, 2, 10).unwrap_err();
        assert_eq!(e, Refusal::TooManyWithHeld { after: 11, cap: 10 });
        assert!(e.to_string().contains("launch from outside"));
    }

    #[test]
    fn stuck_resolvers() {
        assert_eq!(check_stuck(1000, MAX_STUCK_PER_UID - 1), Ok(()));
        let e = check_stuck(1000, MAX_STUCK_PER_UID).unwrap_err();
        assert!(e.to_string().contains("uid 1000"), "{e}");
    }

    #[test]
    fn resolver_killed_mid_answer_is_retried_once() {
        assert_eq!(after_break(true, false), AfterBreak::Retry);
        assert_eq!(after_break(true, true), AfterBreak::Fail);
        // A malformed answer is not a death: no retry.
        assert_eq!(after_break(false, false), AfterBreak::Fail);
    }

    #[test]
    fn move_checks() {
        assert_eq!(check_before_move(5, 1000, [1000; 4], true), Ok(()));
        assert_eq!(
            check_before_move(5, 1000, [1000; 4], false),
            Err(MoveRefusal::Exited { pid: 5 })
        );
        assert_eq!(
            check_before_move(5, 1000, [1000, 0, 1000, 1000], true),
            Err(MoveRefusal::ChangedUids {
                pid: 5,
                uids: [1000, 0, 1000, 1000]
            })
        );
        assert_eq!(judge_move(5, Ok(()), true), Ok(()));
        assert_eq!(
            judge_move(5, Err("EBUSY".into()), true),
            Err(MoveRefusal::Failed {
                pid: 5,
                why: "EBUSY".into()
            })
        );
    }

    #[test]
    fn pid_reuse_during_migration() {
        // The launcher died during the write: refused even if the write
        // reported success (it may have moved another process).
        assert_eq!(
            judge_move(5, Ok(()), false),
            Err(MoveRefusal::ExitedDuringMove { pid: 5 })
        );
        // A new holder of the pid, now in the sandbox: it stays there.
        assert!(reused_pid_stays(100, Some(200), true));
        // The same process (same start time), nobody, or a holder outside.
        assert!(!reused_pid_stays(100, Some(100), true));
        assert!(!reused_pid_stays(100, None, true));
        assert!(!reused_pid_stays(100, Some(200), false));
    }

    #[test]
    fn exception_notices() {
        let held = exception_notice(2, 0).unwrap();
        assert!(
            held.starts_with("2 new exception or audit key(s)") && held.contains("not applied"),
            "{held}"
        );
        // Held back wins: an inside apply says what it did not do.
        assert!(exception_notice(1, 3).unwrap().contains("not applied"));
        assert!(exception_notice(0, 3).unwrap().contains("now re-allow"));
        assert_eq!(exception_notice(0, 0), None);
    }

    #[test]
    fn notices() {
        assert!(
            removal_notice(ApplyMode::Exact, 2)
                .starts_with("2 entries denied until now are no longer")
        );
        assert!(removal_notice(ApplyMode::AddOnly, 2).contains("stay denied"));
        let many: Vec<String> = (0..MAX_WARNINGS + 3).map(|i| format!("w{i}")).collect();
        let (kept, notes) = capped(&many);
        assert_eq!(kept.len(), MAX_WARNINGS);
        assert_eq!(
            notes,
            vec!["3 more problems in your list are not shown".to_owned()]
        );
        let (kept, notes) = capped(&many[..2]);
        assert_eq!((kept.len(), notes.len()), (2, 0));
    }

    #[test]
    fn a_descriptor_is_judged_by_its_key() {
        use crate::lists::entries::{DenySet, FileKey, KIND_OPEN, KIND_PATH};
        use crate::proto::request::Descriptor;
        let key = |ino: u64, kind: u32| FileKey {
            dev: 8 << 20 | 1,
            ino,
            subvol: 0,
            kind,
        };
        let held = DenySet::new(vec![key(12, KIND_OPEN), key(2, KIND_PATH)], vec![]);
        let fd = |fd: i32, ino: u64| Descriptor {
            fd,
            key: key(ino, KIND_OPEN),
        };
        // A listed file's key refuses, naming the descriptor.
        let why = denied_descriptor(&[fd(0, 40), fd(3, 12)], Some(&held)).unwrap();
        assert!(why.starts_with("descriptor 3 is open on a file"), "{why}");
        assert!(why.contains("`3<&-`"), "{why}");
        // The first denied one is named.
        let why = denied_descriptor(&[fd(5, 12), fd(3, 12)], Some(&held)).unwrap();
        assert!(why.starts_with("descriptor 5 "), "{why}");
        // A directory on the way (KIND_PATH) is no denied file; others pass.
        assert_eq!(denied_descriptor(&[fd(3, 2), fd(4, 13)], Some(&held)), None);
        // Another filesystem or subvolume is another file.
        let other_dev = Descriptor {
            fd: 3,
            key: FileKey {
                dev: 9,
                ..key(12, KIND_OPEN)
            },
        };
        let other_subvol = Descriptor {
            fd: 3,
            key: FileKey {
                subvol: 257,
                ..key(12, KIND_OPEN)
            },
        };
        assert_eq!(
            denied_descriptor(&[other_dev, other_subvol], Some(&held)),
            None
        );
        // Nothing held, nothing inherited: nothing to refuse.
        assert_eq!(denied_descriptor(&[fd(3, 12)], None), None);
        assert_eq!(denied_descriptor(&[], Some(&held)), None);
    }
}
