//! The statfs(2) `f_type` values of the filesystems this crate tells apart:
//! the one table on the Rust side (include/uapi/linux/magic.h). The BPF
//! programs' copy is in bpf/kernel_types.h; the unit test `c_side_agrees`
//! compares every `*_MAGIC` defined there with this table.

/// ext2, ext3 and ext4 (`EXT4_SUPER_MAGIC`, shared by the three).
pub const EXT4: i64 = 0xef53;
/// XFS (`XFS_SUPER_MAGIC`).
pub const XFS: i64 = 0x5846_5342;
/// btrfs (`BTRFS_SUPER_MAGIC`).
pub const BTRFS: i64 = 0x9123_683e;
/// F2FS (`F2FS_SUPER_MAGIC`).
pub const F2FS: i64 = 0xf2f5_2010;
/// tmpfs (`TMPFS_MAGIC`).
pub const TMPFS: i64 = 0x0102_1994;
/// ramfs (`RAMFS_MAGIC`); only the BPF side tests for it (walk memos).
#[allow(dead_code)]
pub const RAMFS: i64 = 0x8584_58f6;
/// procfs (`PROC_SUPER_MAGIC`); only the BPF side tests for it (/proc writes).
#[allow(dead_code)]
pub const PROC: i64 = 0x9fa0;
/// overlayfs (`OVERLAYFS_SUPER_MAGIC`).
pub const OVERLAYFS: i64 = 0x794c_7630;
/// bpffs (`BPF_FS_MAGIC`).
pub const BPFFS: i64 = 0xcafe_4a11;
/// FAT: vfat and msdos (`MSDOS_SUPER_MAGIC`).
pub const MSDOS: i64 = 0x4d44;
/// exFAT (`EXFAT_SUPER_MAGIC`).
pub const EXFAT: i64 = 0x2011_bab0;

/// The table by the kernel's names, for the comparison with the C side.
#[cfg(test)]
const BY_KERNEL_NAME: [(&str, i64); 11] = [
    ("EXT4_SUPER_MAGIC", EXT4),
    ("XFS_SUPER_MAGIC", XFS),
    ("BTRFS_SUPER_MAGIC", BTRFS),
    ("F2FS_SUPER_MAGIC", F2FS),
    ("TMPFS_MAGIC", TMPFS),
    ("RAMFS_MAGIC", RAMFS),
    ("PROC_SUPER_MAGIC", PROC),
    ("OVERLAYFS_SUPER_MAGIC", OVERLAYFS),
    ("BPF_FS_MAGIC", BPFFS),
    ("MSDOS_SUPER_MAGIC", MSDOS),
    ("EXFAT_SUPER_MAGIC", EXFAT),
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn c_side_agrees() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
        let mut headers = vec![root.join("bpf/kernel_types.h")];
        for e in std::fs::read_dir(root.join("src/bpf")).unwrap() {
            let p = e.unwrap().path();
            if p.extension().is_some_and(|x| x == "h") {
                headers.push(p);
            }
        }
        let mut seen = 0;
        for h in headers {
            for line in std::fs::read_to_string(&h).unwrap().lines() {
                let mut f = line.split_whitespace();
                let (Some("#define"), Some(name), Some(value)) = (f.next(), f.next(), f.next())
                else {
                    continue;
                };
                if !name.ends_with("_MAGIC") {
                    continue;
                }
                let value = i64::from_str_radix(value.trim_start_matches("0x"), 16).unwrap();
                let ours = BY_KERNEL_NAME.iter().find(|(n, _)| *n == name);
                assert_eq!(
                    ours.map(|(_, v)| *v),
                    Some(value),
                    "{name} in {}: add it to src/os/fs_magic.rs with the same value",
                    h.display()
                );
                seen += 1;
            }
        }
        assert!(seen >= 7, "the C side's magic numbers were not found");
    }
}
