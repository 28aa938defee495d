//! The variant of the BPF object a load asks for: which optional parts it
//! holds, and which part to leave out when a kernel's verifier rejects a
//! program (a fallback that keeps enforcement and says what it costs).
//!
//! An optional part is an optimisation or a guarantee the rest of the
//! program does not depend on. Every denial of the lists holds without any
//! of them; each part's [`Part::cost`] says what its absence costs. The
//! administrator may leave parts out (the unit's
//! `Environment=AGENT_SANDBOX_EXECD_WITHOUT=walk-memos`, [`parse_without`]);
//! nothing inside a sandbox can.

use crate::kernel::verifier::Rejection;

/// The environment variable naming parts to leave out, comma-separated.
pub const WITHOUT_ENV: &str = "AGENT_SANDBOX_EXECD_WITHOUT";

/// An optional part of the BPF object.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Part {
    /// Walk memos in the directory's inode storage: without this part (but
    /// with [`Part::WalkMemos`]) they live in an LRU hash keyed by the
    /// directory inode's address, which the inode's free deletes.
    MemoInodeStorage,
    /// Walk memos (`walk_memo_store` in the program's .rodata, the
    /// `vfs_rename_exit` fexit program that keeps them valid): in a sandbox
    /// with directory entries, an open takes the directories above the
    /// file from its directory's memo instead of walking them.
    WalkMemos,
    /// `lsm/file_ioctl_compat`: the ioctl refusals for 32-bit tasks
    /// (security_file_ioctl_compat(), mainline 6.8 and Debian's 6.1).
    CompatIoctl,
}

impl Part {
    /// Every part, in the order a fallback leaves them out.
    pub const ALL: [Part; 3] = [Part::MemoInodeStorage, Part::WalkMemos, Part::CompatIoctl];

    /// The part's name in [`WITHOUT_ENV`], logs and `--status`.
    pub fn name(self) -> &'static str {
        match self {
            Part::MemoInodeStorage => "memo-inode-storage",
            Part::WalkMemos => "walk-memos",
            Part::CompatIoctl => "compat-ioctl",
        }
    }

    /// The part named `name`, if any.
    pub fn from_name(name: &str) -> Option<Part> {
        Part::ALL.into_iter().find(|p| p.name() == name)
    }

    /// The programs (by their names in the object) whose code holds the
    /// part: a rejection of one of them may be the part's.
    pub fn programs(self) -> &'static [&'static str] {
        match self {
            // file_open and file_receive share the memo path (file_refused()).
            Part::MemoInodeStorage => &["file_open", "file_receive"],
            Part::WalkMemos => &[
                "file_open",
                "file_receive",
                "vfs_rename_exit",
                "inode_free_security",
            ],
            Part::CompatIoctl => &["file_ioctl_compat"],
        }
    }

    /// What a load without the part costs, in one sentence.
    pub fn cost(self) -> &'static str {
        match self {
            Part::MemoInodeStorage => {
                "walk memos live in an LRU hash of 16,384 directories keyed by the inode's \
                 address (one hash lookup instead of an inode-storage lookup; a directory beyond \
                 that is walked; 2.5 MiB preallocated), and every directory inode freed costs a \
                 hash delete"
            }
            Part::WalkMemos => {
                "every open in a sandbox with directory entries walks the directories above the \
                 file (about 590 instructions a level instead of one memo lookup: slower opens, \
                 the same denials)"
            }
            Part::CompatIoctl => {
                "ioctls of 32-bit processes in a sandbox are not checked (TIOCSTI, FICLONE and \
                 the other refused ioctls stay refused for 64-bit processes only)"
            }
        }
    }
}

/// Why a part is not in the loaded variant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Why {
    /// The administrator left it out ([`WITHOUT_ENV`]).
    Forced,
    /// The kernel lacks what it needs (e.g. the compat ioctl hook).
    NotInKernel(String),
    /// The kernel's verifier rejected a program holding it.
    Rejected(Rejection),
}

/// The parts a load leaves out, each with its reason; every other part is in.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Variant {
    without: Vec<(Part, Why)>,
}

impl Variant {
    /// The full variant less `forced` (each [`Why::Forced`]).
    pub fn without(forced: &[Part]) -> Variant {
        let mut v = Variant::default();
        for &p in forced {
            v.leave_out(p, Why::Forced);
        }
        v
    }

    /// Whether `part` is in the variant.
    pub fn has(&self, part: Part) -> bool {
        !self.without.iter().any(|(p, _)| *p == part)
    }

    /// The parts left out, by name, sorted and comma-separated (empty for
    /// the full variant): what tells two variants' programs apart.
    pub fn key(&self) -> String {
        let mut names: Vec<&str> = self.without.iter().map(|(p, _)| p.name()).collect();
        names.sort_unstable();
        names.dedup();
        names.join(",")
    }

    /// Leaves `part` out for `why` (the first reason stays).
    pub fn leave_out(&mut self, part: Part, why: Why) {
        if self.has(part) {
            self.without.push((part, why));
        }
    }

    /// One line for each part left out: its name, why, and what it costs
    /// (`walk-memos (why): cost`; for the daemon's log, `--status` and the
    /// doctor, which say "loaded without" before it).
    pub fn describe(&self) -> Vec<String> {
        self.without
            .iter()
            .map(|(p, why)| {
                let why = match why {
                    Why::Forced => format!("left out by {WITHOUT_ENV}"),
                    Why::NotInKernel(what) => format!("not in this kernel: {what}"),
                    Why::Rejected(r) => format!("{r}"),
                };
                format!("{} ({why}): {}", p.name(), p.cost())
            })
            .collect()
    }
}

/// Where the programs keep walk memos (`walk_memo_store` in their .rodata:
/// 0 none, 1 inode storage, 2 the LRU hash).
pub fn memo_store(v: &Variant) -> u32 {
    match (v.has(Part::WalkMemos), v.has(Part::MemoInodeStorage)) {
        (false, _) => 0,
        (true, true) => 1,
        (true, false) => 2,
    }
}

/// The part to leave out after the verifier rejected `rejected` (a program
/// name) while loading `variant`: the first part still in the variant that
/// the program holds. None: nothing optional is left to drop for that
/// program, and the rejection stands.
pub fn fallback(rejected: &str, variant: &Variant) -> Option<Part> {
    Part::ALL
        .into_iter()
        .find(|p| variant.has(*p) && p.programs().contains(&rejected))
}

/// The file (in the daemon's state directory) where the daemon remembers the
/// parts a kernel's verifier rejected, so that its next start on the same
/// kernel with the same object loads the working variant at once instead of
/// paying for the rejected verification again (seconds on a slow machine).
pub const REMEMBERED_FILE: &str = "rejected-parts";

/// One line of [`REMEMBERED_FILE`]: `kernel`, `object` (a hash of the BPF
/// object), the part and the rejection, tab-separated, ending in a newline.
/// Tabs and newlines inside the fields become spaces.
pub fn remembered_line(kernel: &str, object: u64, part: Part, r: &Rejection) -> String {
    let clean = |s: &str| s.replace(['\t', '\n'], " ");
    format!(
        "{}\t{object:016x}\t{}\t{}\t{}\n",
        clean(kernel),
        part.name(),
        clean(&r.program),
        clean(&r.reason)
    )
}

/// The parts [`REMEMBERED_FILE`]'s `text` names for this `kernel` and
/// `object`, with their rejections; lines of other kernels or objects, and
/// malformed ones, are ignored (the full variant is then tried again).
pub fn remembered(text: &str, kernel: &str, object: u64) -> Vec<(Part, Rejection)> {
    let object = format!("{object:016x}");
    text.lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split('\t').collect();
            if f.len() != 5 || f[0] != kernel.replace(['\t', '\n'], " ") || f[1] != object {
                return None;
            }
            Some((
                Part::from_name(f[2])?,
                Rejection {
                    program: f[3].to_string(),
                    reason: f[4].to_string(),
                },
            ))
        })
        .collect()
}

/// Parses [`WITHOUT_ENV`]'s value: part names separated by commas (spaces
/// around them ignored; empty means none).
///
/// # Errors
/// The first unknown name, with the known ones.
pub fn parse_without(value: &str) -> Result<Vec<Part>, String> {
    let mut parts = Vec::new();
    for name in value.split(',').map(str::trim).filter(|n| !n.is_empty()) {
        let part = Part::from_name(name).ok_or_else(|| {
            let known: Vec<&str> = Part::ALL.iter().map(|p| p.name()).collect();
            format!(
                "{WITHOUT_ENV}: unknown part {name:?} (known: {})",
                known.join(", ")
            )
        })?;
        if !parts.contains(&part) {
            parts.push(part);
        }
    }
    Ok(parts)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rejected(program: &str) -> Why {
        Why::Rejected(Rejection {
            program: program.into(),
            reason: "R2 type=untrusted_ptr_".into(),
        })
    }

    #[test]
    fn a_rejected_memo_program_drops_inode_storage_then_memos() {
        let mut v = Variant::default();
        assert_eq!(memo_store(&v), 1);
        // 7.x: inode storage refused; the hash memos are tried next.
        assert_eq!(fallback("file_open", &v), Some(Part::MemoInodeStorage));
        v.leave_out(Part::MemoInodeStorage, rejected("file_open"));
        assert_eq!(memo_store(&v), 2);
        assert_eq!(fallback("file_open", &v), Some(Part::WalkMemos));
        v.leave_out(Part::WalkMemos, rejected("file_open"));
        assert_eq!(memo_store(&v), 0);
        // Rejected again without memos: nothing optional is left in it.
        assert_eq!(fallback("file_open", &v), None);
        assert_eq!(fallback("vfs_rename_exit", &v), None);
        // The rename program holds memos only.
        assert_eq!(
            fallback("vfs_rename_exit", &Variant::default()),
            Some(Part::WalkMemos)
        );
        // Forced off without memos at all: none, whatever the store.
        assert_eq!(memo_store(&Variant::without(&[Part::WalkMemos])), 0);
    }

    #[test]
    fn compat_ioctl_and_core_programs() {
        let v = Variant::default();
        assert_eq!(fallback("file_ioctl_compat", &v), Some(Part::CompatIoctl));
        // The core hooks hold no optional part: their rejection stands.
        for p in ["inode_rename", "task_kill", "inode_link", "unknown"] {
            assert_eq!(fallback(p, &v), None, "{p}");
        }
    }

    #[test]
    fn forced_parts_and_their_description() {
        let v = Variant::without(&[Part::WalkMemos]);
        assert!(!v.has(Part::WalkMemos));
        assert!(v.has(Part::CompatIoctl));
        let lines = v.describe();
        assert_eq!(lines.len(), 1);
        assert!(lines[0].starts_with("walk-memos (left out by AGENT_SANDBOX_EXECD_WITHOUT): "));
        let mut v = Variant::default();
        v.leave_out(Part::WalkMemos, rejected("file_open"));
        v.leave_out(Part::WalkMemos, Why::Forced);
        assert_eq!(v.describe().len(), 1, "the first reason stays");
        assert!(v.describe()[0].contains("rejected the program file_open"));
    }

    #[test]
    fn remembered_rejections_match_kernel_and_object() {
        let r = Rejection {
            program: "file_open".into(),
            reason: "R2 type=untrusted_ptr_\tx".into(),
        };
        let k = "7.3.4+deb13-amd64 #1 SMP PREEMPT_DYNAMIC Debian 7.3.4-1~bpo13+1";
        let text = format!(
            "{}{}garbage\n",
            remembered_line(k, 7, Part::WalkMemos, &r),
            remembered_line("6.12.1", 7, Part::CompatIoctl, &r)
        );
        let got = remembered(&text, k, 7);
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].0, Part::WalkMemos);
        assert_eq!(got[0].1.program, "file_open");
        assert_eq!(got[0].1.reason, "R2 type=untrusted_ptr_ x");
        // Another object (a new package) or kernel: tried in full again.
        assert!(remembered(&text, k, 8).is_empty());
        assert!(remembered(&text, "7.3.5", 7).is_empty());
    }

    #[test]
    fn without_env_parsing() {
        assert_eq!(parse_without(""), Ok(vec![]));
        assert_eq!(
            parse_without(" walk-memos , compat-ioctl,walk-memos"),
            Ok(vec![Part::WalkMemos, Part::CompatIoctl])
        );
        let e = parse_without("walk-memos,memos").unwrap_err();
        assert!(e.contains("unknown part \"memos\""), "{e}");
        assert!(
            e.contains("memo-inode-storage, walk-memos, compat-ioctl"),
            "{e}"
        );
    }
}
