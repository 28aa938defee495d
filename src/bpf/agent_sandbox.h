/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The one definition of the map layout shared by the BPF program and the
 * daemon. The skeleton generator turns these types into Rust
 * (`types::deny_key`); `src/maps.rs` checks its own key type against them.
 *
 * Change anything here and bump AGENT_SANDBOX_LAYOUT_VERSION: the daemon pins
 * the maps under a directory named after it, so a daemon of another layout
 * never reads these maps with the wrong shape.
 */
#ifndef AGENT_SANDBOX_H
#define AGENT_SANDBOX_H

#define AGENT_SANDBOX_LAYOUT_VERSION 2

/*
 * deny_map capacity, shared by all sandboxes. Entries are allocated on demand
 * (BPF_F_NO_PREALLOC), so an unused capacity costs no memory; the daemon caps
 * each uid at 131072 keys so that no user can fill the map for the others.
 */
#define AGENT_SANDBOX_MAX_DENY 1048576
/* agent_cgid_set capacity: one entry per sandbox cgroup (one per uid). */
#define AGENT_SANDBOX_MAX_SANDBOXES 65536

/*
 * Key of deny_map: "this sandbox may not open this inode". 24 bytes, no
 * implicit padding; `reserved` must be zero on both sides.
 */
struct deny_key {
	__u64 cgid;     /* cgroup v2 id of the sandbox cgroup (= inode number of its directory) */
	__u64 ino;      /* inode->i_ino */
	__u32 dev;      /* inode->i_sb->s_dev, kernel encoding MAJOR << 20 | MINOR */
	__u32 reserved; /* zero */
};

#endif
