//! Reading and parsing `/proc`: the one place that knows the formats of
//! `/proc/<pid>/status`, `/proc/<pid>/stat`, `/proc/<pid>/cgroup` and
//! `/proc/<pid>/mountinfo` (proc(5); Documentation/filesystems/proc.rst).
//! Parsers are pure functions of the text, unit-tested; the readers add the
//! read.

use std::fs;
use std::io;
use std::path::Path;

/// Real, effective, saved and filesystem uid, in the order of the `Uid:`
/// line of /proc/<pid>/status.
pub type Uids = [u32; 4];

/// Reads a /proc file (or another file whose size stat reports as 0) in
/// one or two read(2) calls: `fs::read` sizes its buffer from the reported
/// size and so reads /proc files 32 bytes at first, in up to ten calls, each
/// of which makes the kernel walk the seq_file again.
///
/// # Errors
/// The open or read error.
pub fn read_pseudo(path: impl AsRef<Path>) -> io::Result<Vec<u8>> {
    read_pseudo_from(&mut fs::File::open(path)?)
}

/// [`read_pseudo`] of a file already open, from its current offset.
///
/// # Errors
/// The read error.
pub fn read_pseudo_from(file: &mut fs::File) -> io::Result<Vec<u8>> {
    use std::io::Read;
    let mut buf = Vec::with_capacity(16 << 10);
    file.read_to_end(&mut buf)?;
    Ok(buf)
}

/// [`read_pseudo`] for text.
///
/// # Errors
/// The open or read error; InvalidData if the text is not UTF-8.
pub fn read_pseudo_text(path: impl AsRef<Path>) -> io::Result<String> {
    String::from_utf8(read_pseudo(path)?).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
}

/// Reads the `Uid:` line of /proc/<pid>/status.
///
/// # Errors
/// The read error, or InvalidData when the line is missing or malformed.
pub fn read_uids(pid: i32) -> io::Result<Uids> {
    let text = read_pseudo_text(format!("/proc/{pid}/status"))?;
    parse_uids(&text).ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "no Uid: line"))
}

/// Parses the `Uid:` line of /proc/<pid>/status text.
pub fn parse_uids(status: &str) -> Option<Uids> {
    let line = status.lines().find_map(|l| l.strip_prefix("Uid:"))?;
    let mut it = line.split_ascii_whitespace().map(|f| f.parse::<u32>());
    let mut uids = [0u32; 4];
    for slot in &mut uids {
        *slot = it.next()?.ok()?;
    }
    Some(uids)
}

/// Reads /proc/<pid>/cgroup and returns its v2 path (`0::<path>`).
///
/// # Errors
/// The read error, or InvalidData when there is no v2 line.
pub fn read_v2_cgroup(pid: i32) -> io::Result<String> {
    let text = read_pseudo_text(format!("/proc/{pid}/cgroup"))?;
    v2_path_of(&text)
        .map(str::to_owned)
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "no cgroup v2 line"))
}

/// The v2 cgroup path of a process from the text of /proc/<pid>/cgroup: the
/// `0::<path>` line (Documentation/admin-guide/cgroup-v2.rst, "Processes").
pub fn v2_path_of(proc_cgroup: &str) -> Option<&str> {
    proc_cgroup.lines().find_map(|l| l.strip_prefix("0::"))
}

/// Field 22 (starttime, clock ticks since boot) and field 4 (ppid) of
/// /proc/<pid>/stat text. The command name (field 2) may hold spaces and
/// parentheses, so parsing starts after its last `)`.
pub fn parse_stat_start_ppid(stat: &str) -> Option<(u64, i32)> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_ascii_whitespace().collect();
    // rest[0] is field 3 (state).
    let ppid = fields.get(1)?.parse().ok()?;
    let start = fields.get(19)?.parse().ok()?;
    Some((start, ppid))
}

/// Reads (starttime, ppid) of `pid`.
///
/// # Errors
/// The read error, or InvalidData.
pub fn read_start_ppid(pid: i32) -> io::Result<(u64, i32)> {
    let text = read_pseudo_text(format!("/proc/{pid}/stat"))?;
    parse_stat_start_ppid(&text)
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "malformed stat"))
}

/// One line of /proc/<pid>/mountinfo (Documentation/filesystems/proc.rst,
/// "3.5 /proc/<pid>/mountinfo"): `36 35 98:0 /mnt1 /mnt2 rw,noatime master:1
/// - ext3 /dev/root rw,errors=continue`. Path fields stay as the kernel
/// escapes them (space, tab, newline and backslash as `\ooo`; see
/// [`unescape`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MountInfo<'a> {
    /// Field 1: the mount id (`STATX_MNT_ID` reports it too).
    pub mount_id: u64,
    /// Field 2: the parent mount's id.
    pub parent_id: u64,
    /// Field 3, before the colon: the superblock's device major (`st_dev`
    /// as the kernel holds it in `s_dev`, not glibc's encoding).
    pub major: u32,
    /// Field 3, after the colon: its minor.
    pub minor: u32,
    /// Field 4: the mount's root within its filesystem.
    pub root: &'a [u8],
    /// Field 5: the mount point, relative to the process's root.
    pub mount_point: &'a [u8],
    /// The first field after the ` - ` separator: the filesystem type.
    pub fs_type: &'a [u8],
    /// The second: the mount source (a device, or the type again).
    pub source: &'a [u8],
}

/// Parses one mountinfo line; `None` for a malformed one.
pub fn parse_mountinfo_line(line: &[u8]) -> Option<MountInfo<'_>> {
    let fields: Vec<&[u8]> = line.split(|&b| b == b' ').collect();
    // Fields 1-6, any number of optional fields, "-", type, source, options.
    let sep = fields.iter().skip(6).position(|f| *f == b"-")? + 6;
    if fields.len() < sep + 3 {
        return None;
    }
    let num = |f: &[u8]| std::str::from_utf8(f).ok()?.parse().ok();
    let (major, minor) = {
        let s = std::str::from_utf8(fields[2]).ok()?;
        let (a, b) = s.split_once(':')?;
        (a.parse().ok()?, b.parse().ok()?)
    };
    Some(MountInfo {
        mount_id: num(fields[0])?,
        parent_id: num(fields[1])?,
        major,
        minor,
        root: fields[3],
        mount_point: fields[4],
        fs_type: fields[sep + 1],
        source: fields[sep + 2],
    })
}

/// The well-formed lines of mountinfo text, in order.
pub fn mountinfo(text: &[u8]) -> impl Iterator<Item = MountInfo<'_>> {
    text.split(|&b| b == b'\n').filter_map(parse_mountinfo_line)
}

/// Undoes mountinfo's octal escapes (`\040` for space, etc.; fs/proc_namespace.c
/// mangle(): space, tab, newline and backslash).
pub fn unescape(field: &[u8]) -> Vec<u8> {
    let b = field;
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\'
            && i + 3 < b.len()
            && b[i + 1..i + 4].iter().all(|c| (b'0'..=b'7').contains(c))
        {
            out.push((b[i + 1] - b'0') * 64 + (b[i + 2] - b'0') * 8 + (b[i + 3] - b'0'));
            i += 4;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uids_from_status() {
        let s = "Name:\tcat\nUmask:\t0022\nUid:\t1000\t1001\t1002\t1003\nGid:\t5\t5\t5\t5\n";
        assert_eq!(parse_uids(s), Some([1000, 1001, 1002, 1003]));
        assert_eq!(parse_uids("Uid:\t1\t2\n"), None);
        assert_eq!(parse_uids("Gid:\t1\t2\t3\t4\n"), None);
        assert_eq!(parse_uids("Uid:\tx\t2\t3\t4\n"), None);
    }

    #[test]
    fn stat_with_hostile_comm() {
        let s = "1234 (a) b) (c) S 77 1234 1234 0 -1 4194560 1 0 0 0 0 0 0 0 20 0 1 0 98765 1 1";
        assert_eq!(parse_stat_start_ppid(s), Some((98765, 77)));
        assert_eq!(parse_stat_start_ppid("garbage"), None);
    }

    #[test]
    fn cgroup_v2_line() {
        assert_eq!(
            v2_path_of("12:pids:/x\n0::/user.slice/a\n"),
            Some("/user.slice/a")
        );
        assert_eq!(v2_path_of("12:pids:/x\n"), None);
        assert_eq!(v2_path_of("0::/\n"), Some("/"));
    }

    #[test]
    fn own_process_facts() {
        let me = std::process::id() as i32;
        let uid = nix::unistd::getuid().as_raw();
        assert_eq!(read_uids(me).unwrap()[0], uid);
        let (_, ppid) = read_start_ppid(me).unwrap();
        assert_eq!(ppid, nix::unistd::getppid().as_raw());
    }

    #[test]
    fn mountinfo_lines() {
        let text =
            b"36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw,errors=continue\n\
                     25 1 0:22 / /sys/fs/cgroup rw shared:9 unbindable:3 - cgroup2 cgroup2 rw\n\
                     26 1 0:23 / /mnt/my\\040cg rw - tmpfs tmpfs rw\n\
                     garbage\n\
                     27 1 x:1 / /a rw - ext4 /dev/sda rw\n\
                     28 1 8:1 / /b rw - ext4\n";
        let all: Vec<MountInfo<'_>> = mountinfo(text).collect();
        assert_eq!(all.len(), 3);
        assert_eq!(
            all[0],
            MountInfo {
                mount_id: 36,
                parent_id: 35,
                major: 98,
                minor: 0,
                root: b"/mnt1",
                mount_point: b"/mnt2",
                fs_type: b"ext3",
                source: b"/dev/root",
            }
        );
        // Several optional fields before the separator.
        assert_eq!(all[1].fs_type, b"cgroup2");
        assert_eq!((all[1].major, all[1].minor), (0, 22));
        assert_eq!(unescape(all[2].mount_point), b"/mnt/my cg");
        // A "-" among the first six fields is not the separator.
        assert_eq!(
            parse_mountinfo_line(b"1 2 0:1 - /m rw - tmpfs t rw"),
            Some(MountInfo {
                mount_id: 1,
                parent_id: 2,
                major: 0,
                minor: 1,
                root: b"-",
                mount_point: b"/m",
                fs_type: b"tmpfs",
                source: b"t",
            })
        );
    }

    #[test]
    fn unescaping() {
        assert_eq!(unescape(b"a\\134b\\011c"), b"a\\b\tc");
        assert_eq!(unescape(b"trailing\\04"), b"trailing\\04");
        assert_eq!(unescape(b"not\\999"), b"not\\999");
    }
}
