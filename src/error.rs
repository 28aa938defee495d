//! The one error convention: every module has its own `thiserror` enum whose
//! message carries its cause (so that each printer shows it once); a mode's
//! entry point prints [`error_chain`] once and maps the error to an exit
//! status.

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
