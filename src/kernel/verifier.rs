//! What a kernel's verifier said when it rejected one of the programs, read
//! from libbpf's log of the load.
//!
//! When `BPF_PROG_LOAD` fails, libbpf loads the program again with a log
//! buffer and prints (src/libbpf.c, `bpf_object_load_prog()`):
//!
//! ```text
//! libbpf: prog 'NAME': BPF program load failed: -EACCES
//! libbpf: prog 'NAME': -- BEGIN PROG LOAD LOG --
//! ...the verifier's log...
//! -- END PROG LOAD LOG --
//! ```
//!
//! Up to 6.x the verifier's log ends with the instruction it stopped at, a
//! one-line reason and a summary (`processed N insns ...`). The 7.x verifier
//! (seen on 7.3.4) adds, after that line, a report in paragraphs:
//! `Verification failed: <class>`, `Reason:` with an indented sentence,
//! `At:` with `<program> @ <file>:<line>:<column>` and source context.
//! [`rejection`] takes the program's name and the reason: the `Reason:`
//! sentence with its `At:` place where the log has them, else the last line
//! of the log that is not a summary, an instruction or source context.

/// One program the verifier rejected.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rejection {
    /// The program's name as in the object (`file_open`, `vfs_rename_exit`).
    pub program: String,
    /// The verifier's reason in one line (at most [`MAX_REASON`] bytes).
    pub reason: String,
}

/// Longest reason kept, in bytes.
pub const MAX_REASON: usize = 400;

impl std::fmt::Display for Rejection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "the kernel's verifier rejected the program {}: {}",
            self.program, self.reason
        )
    }
}

/// The first program the verifier rejected in `log` (all libbpf lines of one
/// load, as printed; each may or may not keep its `libbpf: ` prefix), or
/// None when the log shows no verifier log for a failed program: a map, BTF
/// or attach problem, or a load refused before verification (EPERM on a
/// host that forbids LSM programs), which the errno then names.
pub fn rejection(log: &str) -> Option<Rejection> {
    let program = log.lines().find_map(|l| {
        let rest = &l[l.find("prog '")? + "prog '".len()..];
        let (name, after) = rest.split_once('\'')?;
        after
            .contains("BPF program load failed")
            .then(|| name.to_string())
    })?;
    let begin = format!("prog '{program}': -- BEGIN PROG LOAD LOG --");
    let body = log
        .find(&begin)
        .map(|i| &log[i + begin.len()..])
        .map(|rest| rest.split("-- END PROG LOAD LOG --").next().unwrap_or(rest))?;
    let reason = reason_of(body)?;
    Some(Rejection { program, reason })
}

/// Is `line` of a verifier log other than the reason: the summary at the
/// end, an instruction (`123: (85) call ...`), register state, source
/// context (`; code`, `file_open @ file.c:858:9`, an indented source line)?
fn is_context(line: &str) -> bool {
    let t = line.trim_start();
    t.is_empty()
        || line.starts_with(' ')
        || line.starts_with('\t')
        || t.starts_with(';')
        || t.starts_with("processed ")
        || t.starts_with("verification time")
        || t.starts_with("stack depth")
        || t.starts_with("max_states_per_insn")
        || t.starts_with("subprog ")
        || t.starts_with("mark_precise:")
        || t.starts_with("libbpf:")
        || t.contains(" @ ") && t.contains(".c:")
        || t.split_once(':')
            .is_some_and(|(n, _)| !n.is_empty() && n.chars().all(|c| c.is_ascii_digit()))
}

/// The indented paragraph after the line `heading` of a 7.x report, joined
/// into one line.
fn paragraph(lines: &[&str], heading: &str) -> Option<String> {
    let at = lines.iter().position(|l| *l == heading)?;
    let text: Vec<&str> = lines[at + 1..]
        .iter()
        .take_while(|l| l.starts_with(' '))
        .map(|l| l.trim())
        .collect();
    (!text.is_empty()).then(|| text.join(" "))
}

/// The reason in a verifier log (see the module's text).
fn reason_of(body: &str) -> Option<String> {
    let lines: Vec<&str> = body.lines().map(str::trim_end).collect();
    let mut reason = if let Some(why) = paragraph(&lines, "Reason:") {
        match paragraph(&lines, "At:") {
            // Its first line only: the source context follows.
            Some(at) => format!("{why} (at {})", at.split(" Source context:").next()?),
            None => why,
        }
    } else {
        lines
            .iter()
            .rev()
            .find(|l| !is_context(l) && !l.starts_with("Verification failed"))?
            .to_string()
    };
    if reason.len() > MAX_REASON {
        let mut cut = MAX_REASON;
        while !reason.is_char_boundary(cut) {
            cut -= 1;
        }
        reason.truncate(cut);
        reason.push_str("...");
    }
    Some(reason)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 7.3.4+deb13-amd64 (Debian 13 backports) rejecting f39d597's file_open.
    const LOG_7_3: &str = include_str!("../testdata/verifier-7.3-file_open.log");
    /// 7.3.4 rejecting an LSM program that returns 1.
    const LOG_7_3_RETURN: &str = include_str!("../testdata/verifier-7.3-return.log");
    /// 6.12.x (Debian 13) rejecting the same.
    const LOG_6_12_RETURN: &str = include_str!("../testdata/verifier-6.12-return.log");

    #[test]
    fn names_program_and_reason_on_7_3() {
        let r = rejection(LOG_7_3).expect("a rejection");
        assert_eq!(r.program, "file_open");
        assert_eq!(
            r.reason,
            "The second argument (R2) to bpf_inode_storage_get does not satisfy the verifier \
             contract: it has type untrusted_ptr_, but this argument accepts ptr_, trusted_ptr_, \
             rcu_ptr_. (at file_open @ agent_sandbox.bpf.c:858:9)"
        );
    }

    #[test]
    fn names_a_return_range_rejection_on_7_3() {
        let r = rejection(LOG_7_3_RETURN).expect("a rejection");
        assert_eq!(r.program, "task_kill");
        assert_eq!(
            r.reason,
            "At program exit the register R0 has smin=1 smax=1 should have been in [-4095, 0]"
        );
    }

    #[test]
    fn names_program_and_reason_on_6_12() {
        let r = rejection(LOG_6_12_RETURN).expect("a rejection");
        assert_eq!(r.program, "task_kill");
        assert!(
            r.reason.contains("should have been in [-4095, 0]"),
            "reason: {}",
            r.reason
        );
    }

    #[test]
    fn no_rejection_without_a_program_failure() {
        let log = "libbpf: map 'deny_map': failed to create: -ENOMEM\n\
                   libbpf: failed to load object 'agent_sandbox_bpf'\n";
        assert_eq!(rejection(log), None);
        assert_eq!(rejection(""), None);
    }

    #[test]
    fn a_failure_without_a_verifier_log_is_no_rejection() {
        // EPERM before the verifier ran (a host that forbids LSM programs):
        // the errno tells, not a verifier reason.
        let log = "libbpf: prog 'file_open': BPF program load failed: Operation not permitted\n\
                   libbpf: prog 'file_open': failed to load: -1\n";
        assert_eq!(rejection(log), None);
        let log = "libbpf: prog 'file_open': BPF program load failed: Operation not permitted\n\
                   libbpf: prog 'file_open': -- BEGIN PROG LOAD LOG --\n\
                   -- END PROG LOAD LOG --\n";
        assert_eq!(rejection(log), None);
    }

    #[test]
    fn long_reasons_are_cut() {
        let long = "x".repeat(2 * MAX_REASON);
        let log = format!(
            "libbpf: prog 'p': BPF program load failed: -EACCES\n\
             libbpf: prog 'p': -- BEGIN PROG LOAD LOG --\n0: (b7) r0 = 0\n{long}\n\
             processed 1 insns\n-- END PROG LOAD LOG --\n"
        );
        let r = rejection(&log).expect("a rejection");
        assert!(r.reason.len() <= MAX_REASON + 3);
        assert!(r.reason.ends_with("..."));
    }
}
