#!/bin/bash
# shellcheck disable=SC2016,SC2317,SC2034,SC2088,SC2015
# (SC2016: the single-quoted sh -c programs expand their own variables; SC2317: the check_* functions
#  are called through run_check; SC2034: test-lib.sh reads the counters; SC2088: ~ is list text;
#  SC2015: A && B || fail reports a failure of any step)
#
# scripts/test-dirs.sh - directory entries (`DIR/`) and exceptions (`!PATH`,
# `!DIR/`) in the lists (GitHub issue 16).
#
# Run as root in a throwaway guest where the package is installed and the
# daemon runs (the QEMU guest of `make vm-test`). Every check writes the test
# user's ~/.config/agent-sandbox-exec/denylist (and, for base_vs_user, the base
# list, restored at exit) and opens files from inside `agent-sandbox-exec`.
#
# Checks (in this order; names for ASX_DIRS_ONLY / ASX_DIRS_SKIP):
#   existing_key    ~/.ssh/ denies a key there at launch; ls and stat of ~/.ssh work;
#                   !~/.ssh/config is readable; a file elsewhere is readable; a
#                   directory line without / is skipped with the hint
#   later_key       a running sandbox: a key made afterwards outside (ssh-keygen) is
#                   denied; one written from inside cannot be opened
#   exceptions      !~/.ssh/known_hosts stays readable after an outside temp+rename
#                   rewrite; !~/.ssh/pub/ re-allows that subdirectory; a file named by a
#                   file entry too stays denied; an entry below an exception denies again
#   deep            a file 40 levels below an entry is denied
#   depth_bound     an unlisted file just within the walk bound is readable, one level
#                   past it is denied (fail closed), and a file in an entry past it too
#   bind_cwd        a bind mount of a subdirectory of an entry; a cwd inside the entry
#                   opened before launch (relative open and /proc/self/cwd)
#   mount_below     a tmpfs mounted below an entry: its files are denied
#   mv_ln_out       mv and ln of a file, mv of a directory out of an entry, a symlink made
#                   below it, mv of an outside file into it: all EPERM from inside
#   dir_replaced    mv ~/.aws ~/.aws.old; mkdir ~/.aws under a running sandbox: files in
#                   both are denied
#   filesystems     the same guarantees on tmpfs, btrfs (subvolume and snapshot), xfs
#                   and overlayfs
#   base_vs_user    a user's exception never re-allows a base-list directory entry
#   inside_exc      an exception added from inside changes nothing for the running
#                   sandbox or a nested launch; the next outside launch applies it
#   walk_levels     the file's own mark and the walk above it: a base entry above a user's
#                   entry with a user's exception on the file still denies; a hard link
#                   made from inside past the depth bound to a file the base list
#                   excepts and the user's list denies stays denied; a pipe reopened
#                   through /dev/stdin stays readable
#   memos           the walk memos of a running sandbox (README, "Directory entries"):
#                   a file read there again after its directory's ancestor was moved
#                   into an entry outside, after an outside launch made its directory
#                   an entry, and after its filesystem's mount was moved below an
#                   entry (mount --move): denied each time
#   file_memos      the file memos of a running sandbox (src/bpf/file_memo.bpf.h): a file
#                   read twice there, then, outside, its sandbox's first name pattern
#                   added by a launch (the sandbox's flags change), the file renamed to a
#                   name a pattern covers, linked to such a name and its first name
#                   removed: denied each time; a file read twice below a read-only entry
#                   still cannot be opened for writing
#   sighup          SIGHUP to the daemon re-applies every sandbox's lists: a line added
#                   outside reaches a running sandbox without a launch (daemon --help)
#   memos_hash      the same with the memos in the LRU hash (AGENT_SANDBOX_EXECD_WITHOUT=
#                   memo-inode-storage, the variant of a kernel that refuses inode storage)
#   fallback        the daemon loaded without its optional parts
#                   (AGENT_SANDBOX_EXECD_WITHOUT=walk-memos,compat-ioctl in a unit drop-in, as
#                   after a kernel's verifier rejected them): --status and the doctor name
#                   them; a key in a directory entry, its other name, a file moved into the
#                   entry after it was read, a listed file and a listed name stay denied, an
#                   exception readable; without the drop-in the daemon loads them again
#
# Output: "PASS: <what>", "FAIL: <what> (<detail>)", "SKIP: <why>", notes ("# ...");
# then a count line and "ALL PASS" (exit 0) or "<n> FAILED" (exit 1).
#
# Environment:
#   ASX_DIRS_ONLY="name ..."  run only these checks;  ASX_DIRS_SKIP="name ..."  skip these

set -u -o pipefail
umask 022
export LC_ALL=C
HERE=$(cd "$(dirname "$0")" && pwd) || exit 1
cd / || exit 1

readonly SUITE=test-dirs.sh
readonly LAUNCHER=agent-sandbox-exec
readonly USR=asx-dirs
readonly GECOS="agent-sandbox-exec dirs test user"
readonly EPERM_MSG="Operation not permitted"
readonly HOME_LIST_REL=.config/agent-sandbox-exec/denylist
readonly BASE_LIST=/etc/agent-sandbox-exec/denylist

CHECKS=(
	existing_key later_key exceptions deep depth_bound bind_cwd mount_below mv_ln_out
	dir_replaced filesystems base_vs_user inside_exc walk_levels memos file_memos sighup memos_hash
	fallback
)

PASS_N=0 FAIL_N=0 SKIP_N=0

# shellcheck source=scripts/test-lib.sh
. "$HERE/test-lib.sh" || exit 1
FILTER=ASX_DIRS # run_check: ASX_DIRS_ONLY / ASX_DIRS_SKIP choose the checks
CMD_TIMEOUT=60
T="" OUT="" ERR="" RC=0 UH="" TOK="" BASE_SAVED=""
MOUNTS=() LOOPS=() BG_PIDS=()

put() { mkdir -p "$(dirname "$1")" && printf '%s\n' "$3" >"$1" && chown -R "$USR:$USR" "$UH" && chmod "$2" "$1"; }
udir() { install -d -o "$USR" -g "$USR" -m 0755 "$@"; }
sec() { printf 'asx-secret-%s-%s' "$1" "$TOK"; }

# denied WHAT PATH SECRET: cat PATH from inside fails with EPERM and shows nothing
denied() {
	local want=$3
	run_in "$USR" cat "$2"
	okl "$1" 'rc=$RC out=$(snip "$OUT") err=$(snip "$ERR")' \
		eval '[ "$RC" -ne 0 ] && has "$EPERM_MSG" "$ERR" && ! has "$want" "$OUT"'
}

# readable WHAT PATH CONTENT: cat PATH from inside shows CONTENT
readable() {
	local want=$3
	run_in "$USR" cat "$2"
	okl "$1" 'rc=$RC out=$(snip "$OUT") err=$(snip "$ERR")' \
		eval '[ "$RC" -eq 0 ] && has "$want" "$OUT"'
}

# inside_fails WHAT CMD...: CMD (sh -c text) from inside fails with EPERM
inside_fails() {
	local what=$1
	shift
	run_in "$USR" sh -c "$*"
	okl "$what" 'rc=$RC err=$(snip "$ERR")' eval '[ "$RC" -ne 0 ] && has "$EPERM_MSG" "$ERR"'
}

# server: a running sandbox that runs each line written to $T/fifo as a job
# (sh -c), its output appended to $T/srv.out; started by start_server
start_server() {
	rm -f "$T/fifo" "$T/srv.out"
	mkfifo "$T/fifo" && chown "$USR" "$T/fifo" && install -o "$USR" -m 0644 /dev/null "$T/srv.out"
	runuser -u "$USR" -- "$LAUNCHER" sh -c '
		exec 3<>"$1"
		echo ready >>"$2"
		while read -r job <&3; do
			[ "$job" = quit ] && exit 0
			sh -c "$job" >>"$2" 2>&1
			echo "rc=$? done" >>"$2"
		done' sh "$T/fifo" "$T/srv.out" </dev/null >"$T/srv.log" 2>&1 &
	BG_PIDS+=("$!")
	SRV=$!
	wait_for 30 grep -q '^ready$' "$T/srv.out" || fail "server: start" "$(snip "$T/srv.log")"
}

# job CMD: run CMD in the running sandbox; its output in $T/job.out
job() {
	local n
	n=$(grep -c ' done$' "$T/srv.out")
	printf '%s\n' "$1" >"$T/fifo"
	wait_for 30 eval '[ "$(grep -c " done\$" "$T/srv.out")" -gt "$n" ]'
	awk -v n="$n" 'c >= n { print } / done$/ { c++ }' "$T/srv.out" >"$T/job.out"
}

stop_server() {
	printf 'quit\n' >"$T/fifo"
	stop_bg "$SRV"
}

# ---------------------------------------------------------------- checks

check_existing_key() {
	put "$UH/.ssh/id_ed25519" 0600 "$(sec key)"
	put "$UH/.ssh/config" 0644 "cfg-$TOK"
	put "$UH/asx-other/file" 0644 "other-$TOK"
	udir "$UH/.aws"
	set_list "~/.ssh/" "!~/.ssh/config" "~/.aws"
	denied "existing_key: a key in ~/.ssh at launch is denied" "$UH/.ssh/id_ed25519" "$(sec key)"
	readable "existing_key: !~/.ssh/config is readable" "$UH/.ssh/config" "cfg-$TOK"
	readable "existing_key: a file outside the entry is readable" "$UH/asx-other/file" "other-$TOK"
	run_in "$USR" sh -c 'ls "$1" && stat -c %s "$1/id_ed25519"' sh "$UH/.ssh"
	okl "existing_key: ls and stat of ~/.ssh work" 'rc=$RC out=$(snip "$OUT") err=$(snip "$ERR")' \
		eval '[ "$RC" -eq 0 ] && has id_ed25519 "$OUT"'
	okl "existing_key: a directory line without / says to add a trailing /" 'err=$(snip "$ERR")' \
		has "add a trailing / to deny the whole directory" "$ERR"
	# A hard link made outside before launch, elsewhere: denied by inode.
	ln -f "$UH/.ssh/id_ed25519" "$UH/asx-other/hardlink"
	denied "existing_key: another name made outside before launch is denied" \
		"$UH/asx-other/hardlink" "$(sec key)"
	rm -f "$UH/asx-other/hardlink"
}

check_later_key() {
	set_list "~/.ssh/"
	start_server
	runuser -u "$USR" -- ssh-keygen -q -t ed25519 -N '' -f "$UH/.ssh/id_late" >/dev/null 2>&1
	job "cat $UH/.ssh/id_late"
	okl "later_key: a key made outside after launch (ssh-keygen) is denied" 'job=$(snip "$T/job.out")' \
		eval 'has "$EPERM_MSG" "$T/job.out" && ! has "PRIVATE KEY" "$T/job.out"'
	job "echo inside-$TOK > $UH/.ssh/id_inside; cat $UH/.ssh/id_inside"
	okl "later_key: a key written from inside cannot be opened" 'job=$(snip "$T/job.out")' \
		eval 'has "$EPERM_MSG" "$T/job.out" && ! has "inside-$TOK" "$T/job.out"'
	stop_server
	rm -f "$UH/.ssh/id_late" "$UH/.ssh/id_late.pub" "$UH/.ssh/id_inside"
}

check_exceptions() {
	put "$UH/.ssh/known_hosts" 0644 "kh-$TOK"
	put "$UH/.ssh/pub/id.pub" 0644 "pub-$TOK"
	put "$UH/.ssh/pub/priv/k" 0600 "$(sec below)"
	put "$UH/.ssh/both" 0600 "$(sec both)"
	set_list "~/.ssh/" "!~/.ssh/known_hosts" "!~/.ssh/pub/" "~/.ssh/pub/priv/" \
		"~/.ssh/both" "!~/.ssh/both"
	start_server
	job "cat $UH/.ssh/known_hosts"
	okl "exceptions: !~/.ssh/known_hosts is readable" 'job=$(snip "$T/job.out")' has "kh-$TOK" "$T/job.out"
	printf 'kh2-%s\n' "$TOK" >"$UH/.ssh/known_hosts.tmp" && chown "$USR" "$UH/.ssh/known_hosts.tmp" &&
		mv -f "$UH/.ssh/known_hosts.tmp" "$UH/.ssh/known_hosts"
	job "cat $UH/.ssh/known_hosts"
	okl "exceptions: known_hosts replaced outside by temp + rename stays readable" \
		'job=$(snip "$T/job.out")' has "kh2-$TOK" "$T/job.out"
	job "cat $UH/.ssh/pub/id.pub"
	okl "exceptions: a file in !~/.ssh/pub/ is readable" 'job=$(snip "$T/job.out")' has "pub-$TOK" "$T/job.out"
	job "cat $UH/.ssh/pub/priv/k"
	okl "exceptions: an entry below an exception denies again" 'job=$(snip "$T/job.out")' \
		eval 'has "$EPERM_MSG" "$T/job.out" && ! has "$(sec below)" "$T/job.out"'
	job "cat $UH/.ssh/both"
	okl "exceptions: a file also named by a file entry stays denied" 'job=$(snip "$T/job.out")' \
		eval 'has "$EPERM_MSG" "$T/job.out" && ! has "$(sec both)" "$T/job.out"'
	stop_server
}

# mkdeep BASE N: a chain of N directories below BASE (d1/d2/...); prints the deepest
mkdeep() {
	local p=$1 i
	for ((i = 1; i <= $2; i++)); do p=$p/d; done
	mkdir -p "$p" && printf '%s' "$p"
}

check_deep() {
	local p
	p=$(mkdeep "$UH/.ssh/deep" 40) || { fail "deep: setup" "mkdir"; return; }
	put "$p/key" 0600 "$(sec deep)"
	set_list "~/.ssh/"
	denied "deep: a file 40 levels below ~/.ssh/ is denied" "$p/key" "$(sec deep)"
}

check_depth_bound() {
	local n first="" p
	# Unlisted files at growing depths in one sandbox: the first depth whose
	# open fails is the bound (mounts crossed on the way count as levels).
	rm -rf "$UH/asx-deep"
	p=$(mkdeep "$UH/asx-deep" 80) || { fail "depth_bound: setup" "mkdir"; return; }
	p=$UH/asx-deep
	for ((n = 1; n <= 80; n++)); do
		p=$p/d
		printf 'deep-%s\n' "$n" >"$p/f"
	done
	chown -R "$USR:$USR" "$UH/asx-deep"
	set_list "~/.ssh/"
	run_in "$USR" sh -c 'p=$1; n=0; while [ $n -lt 80 ]; do n=$((n+1)); p=$p/d;
		cat "$p/f" >/dev/null 2>&1 || { echo "first=$n"; exit 0; }; done; echo first=none' sh "$UH/asx-deep"
	first=$(sed -n 's/^first=//p' "$OUT")
	note "depth_bound: the first unlisted depth below $UH/asx-deep that is denied: $first"
	okl "depth_bound: unlisted files deep enough are denied (fail closed) past the bound" \
		'first=$first out=$(snip "$OUT")' eval '[ "$first" != none ] && [ -n "$first" ] && [ "$first" -gt 50 ]'
	[ -n "$first" ] && [ "$first" != none ] || return
	p=$UH/asx-deep
	for ((n = 1; n < first; n++)); do p=$p/d; done
	readable "depth_bound: an unlisted file one level above the bound is readable" "$p/f" "deep-$((first - 1))"
	# A directory entry two levels above that file: the walk still decides it.
	set_list "~/.ssh/" "~/asx-deep$(for ((n = 1; n < first - 1; n++)); do printf '/d'; done)/"
	denied "depth_bound: that file, in a directory entry two levels above it, is denied" \
		"$p/f" "deep-$((first - 1))"
	denied "depth_bound: a file one level past the bound is denied" "$p/d/f" "deep-$first"
	rm -rf "$UH/asx-deep"
}

check_bind_cwd() {
	put "$UH/.ssh/sub/key" 0600 "$(sec bind)"
	set_list "~/.ssh/"
	mnt "$T/bind" --bind "$UH/.ssh/sub" || { fail "bind_cwd: setup" "bind mount"; return; }
	denied "bind_cwd: a key through a bind mount of a subdirectory is denied" "$T/bind/key" "$(sec bind)"
	RC=0
	(cd "$UH/.ssh/sub" && timeout 60 runuser -u "$USR" -- "$LAUNCHER" sh -c 'cat key; cat /proc/self/cwd/key' \
		</dev/null >"$OUT" 2>"$ERR") || RC=$?
	okl "bind_cwd: with the cwd inside the entry at launch, key and /proc/self/cwd/key are denied" \
		'rc=$RC out=$(snip "$OUT") err=$(snip "$ERR")' \
		eval '[ "$(grep -c "$EPERM_MSG" "$ERR")" -ge 2 ] && ! has "$(sec bind)" "$OUT"'
}

check_mount_below() {
	set_list "~/.ssh/"
	mnt "$UH/.ssh/mnt" -t tmpfs -o size=4m,mode=0755 asx-dirs-below || { fail "mount_below: setup" "mount"; return; }
	put "$UH/.ssh/mnt/k" 0600 "$(sec below)"
	denied "mount_below: a file on a tmpfs mounted below ~/.ssh/ is denied" "$UH/.ssh/mnt/k" "$(sec below)"
}

check_mv_ln_out() {
	put "$UH/.ssh/id_mv" 0600 "$(sec mv)"
	put "$UH/.ssh/subdir/k" 0600 "$(sec mvdir)"
	put "$UH/out/mine" 0644 "mine"
	set_list "~/.ssh/"
	inside_fails "mv_ln_out: mv of a file out of the entry is refused" "mv $UH/.ssh/id_mv $UH/out/k"
	inside_fails "mv_ln_out: ln of a file out of the entry is refused" "ln $UH/.ssh/id_mv $UH/out/k2"
	inside_fails "mv_ln_out: mv of a directory out of the entry is refused" "mv $UH/.ssh/subdir $UH/out/"
	inside_fails "mv_ln_out: a symlink below the entry is refused" "ln -s $UH/out/mine $UH/.ssh/link"
	inside_fails "mv_ln_out: mv of an outside file into the entry is refused" "mv $UH/out/mine $UH/.ssh/planted"
	okl "mv_ln_out: the files are where they were" 'ls: $(ls "$UH/out" "$UH/.ssh" | tr "\n" " ")' \
		eval '[ -e "$UH/.ssh/id_mv" ] && [ -e "$UH/.ssh/subdir/k" ] && [ ! -e "$UH/out/k" ] && [ ! -e "$UH/out/k2" ] && [ ! -e "$UH/.ssh/link" ]'
}

check_dir_replaced() {
	rm -rf "$UH/.aws" "$UH/.aws.old"
	put "$UH/.aws/credentials" 0600 "$(sec aws1)"
	set_list "~/.aws/"
	start_server
	mv "$UH/.aws" "$UH/.aws.old" && mkdir "$UH/.aws" && put "$UH/.aws/credentials" 0600 "$(sec aws2)"
	job "cat $UH/.aws/credentials"
	okl "dir_replaced: a file in the new ~/.aws is denied to the running sandbox" 'job=$(snip "$T/job.out")' \
		eval 'has "$EPERM_MSG" "$T/job.out" && ! has "$(sec aws2)" "$T/job.out"'
	job "cat $UH/.aws.old/credentials"
	okl "dir_replaced: the old directory moved away stays denied" 'job=$(snip "$T/job.out")' \
		eval 'has "$EPERM_MSG" "$T/job.out" && ! has "$(sec aws1)" "$T/job.out"'
	stop_server
}

# fs_case NAME DIR: an entry DIR/ on some file system; a key in it denied, a file next to it readable
fs_case() {
	put "$2/sec/k" 0600 "$(sec "$1")"
	put "$2/open/f" 0644 "open-$1-$TOK"
	chown -R "$USR:$USR" "$2"
	set_list "$2/sec/"
	denied "filesystems: $1: a file below the entry is denied" "$2/sec/k" "$(sec "$1")"
	readable "filesystems: $1: a file next to the entry is readable" "$2/open/f" "open-$1-$TOK"
}

check_filesystems() {
	local img dev
	mnt "$T/m/tmpfs" -t tmpfs -o size=8m asx-dirs-tmpfs && fs_case tmpfs "$T/m/tmpfs" ||
		fail "filesystems: tmpfs: setup" "see stderr"
	if command -v mkfs.btrfs >/dev/null && command -v btrfs >/dev/null; then
		img=$T/btrfs.img && truncate -s 300M "$img" && dev=$(losetup -f --show "$img") && LOOPS+=("$dev") &&
			mkfs.btrfs -q -f "$dev" >/dev/null 2>&1 && mnt "$T/m/btrfs" "$dev" &&
			btrfs -q subvolume create "$T/m/btrfs/sv" >/dev/null || fail "filesystems: btrfs: setup" "see stderr"
		if [ -d "$T/m/btrfs/sv" ]; then
			# The btrfs module came after the daemon's start: the first launch with btrfs keys
			# makes it load its programs again, which in a loaded guest can take longer than a
			# launcher waits (30 s). Wait for a launch to pass first (as test-fs.sh does).
			local t0=$SECONDS
			set_list "$T/m/btrfs/sv/"
			wait_for 300 eval 'run_in "$USR" true; [ "$RC" -eq 0 ]'
			note "filesystems: btrfs: the first launch with btrfs keys passed after $((SECONDS - t0)) s"
			fs_case "btrfs subvolume" "$T/m/btrfs/sv"
			btrfs -q subvolume snapshot "$T/m/btrfs/sv" "$T/m/btrfs/snap" >/dev/null
			# The snapshot repeats the inode numbers: its copy is not listed.
			readable "filesystems: btrfs: the snapshot's copy (same inode numbers, other subvolume) is readable" \
				"$T/m/btrfs/snap/sec/k" "$(sec "btrfs subvolume")"
			set_list "$T/m/btrfs/snap/sec/"
			denied "filesystems: btrfs: an entry on the snapshot denies its copy" "$T/m/btrfs/snap/sec/k" \
				"$(sec "btrfs subvolume")"
		fi
	else
		skip "filesystems: btrfs: btrfs-progs not installed"
	fi
	if command -v mkfs.xfs >/dev/null; then
		img=$T/xfs.img && truncate -s 320M "$img" && dev=$(losetup -f --show "$img") && LOOPS+=("$dev") &&
			mkfs.xfs -q -f "$dev" >/dev/null 2>&1 && mnt "$T/m/xfs" -t xfs "$dev" && fs_case xfs "$T/m/xfs" ||
			fail "filesystems: xfs: setup" "see stderr"
	else
		skip "filesystems: xfs: xfsprogs not installed"
	fi
	mkdir -p "$T/m/ovl"/{lower,upper,work,merged}
	put "$T/m/ovl/lower/sec/k" 0600 "$(sec ovl)"
	put "$T/m/ovl/lower/open/f" 0644 "open-ovl-$TOK"
	chown -R "$USR:$USR" "$T/m/ovl"
	if mnt "$T/m/ovl/merged" -t overlay -o "lowerdir=$T/m/ovl/lower,upperdir=$T/m/ovl/upper,workdir=$T/m/ovl/work" asx-ovl; then
		set_list "$T/m/ovl/merged/sec/"
		denied "filesystems: overlayfs: a file below an entry on the overlay is denied" "$T/m/ovl/merged/sec/k" "$(sec ovl)"
		readable "filesystems: overlayfs: a file next to it is readable" "$T/m/ovl/merged/open/f" "open-ovl-$TOK"
		set_list "$T/m/ovl/lower/sec/"
		denied "filesystems: overlayfs: an entry on the lower layer denies the file through the overlay" \
			"$T/m/ovl/merged/sec/k" "$(sec ovl)"
	else
		fail "filesystems: overlayfs: setup" "see stderr"
	fi
}

check_base_vs_user() {
	put "$UH/.gnupg/private-keys-v1.d/k.key" 0600 "$(sec gpg)"
	if [ -z "$BASE_SAVED" ]; then
		BASE_SAVED=$T/base.saved
		cp -a "$BASE_LIST" "$BASE_SAVED" 2>/dev/null || : >"$BASE_SAVED"
	fi
	printf '%s\n' "~/.gnupg/" >>"$BASE_LIST"
	set_list "!~/.gnupg/private-keys-v1.d/k.key" "!~/.gnupg/"
	denied "base_vs_user: a user's exception never re-allows a base-list directory entry" \
		"$UH/.gnupg/private-keys-v1.d/k.key" "$(sec gpg)"
	cat "$BASE_SAVED" >"$BASE_LIST"
}

check_walk_levels() {
	local p
	put "$UH/.gnupg/private-keys-v1.d/k2.key" 0600 "$(sec gpg2)"
	put "$UH/.ssh/config" 0644 "$(sec cfg)"
	if [ -z "$BASE_SAVED" ]; then
		BASE_SAVED=$T/base.saved
		cp -a "$BASE_LIST" "$BASE_SAVED" 2>/dev/null || : >"$BASE_SAVED"
	fi
	printf '%s\n' "~/.gnupg/" "~/.ssh/" "!~/.ssh/config" >>"$BASE_LIST"
	set_list "~/.gnupg/private-keys-v1.d/" "!~/.gnupg/private-keys-v1.d/k2.key" "~/.ssh/"
	denied "walk_levels: a base entry above a user's entry still denies a file the user's list excepts" \
		"$UH/.gnupg/private-keys-v1.d/k2.key" "$(sec gpg2)"
	p=$(mkdeep "$UH/asx-deep" 70) || { fail "walk_levels: setup" "mkdir"; return; }
	chown -R "$USR:$USR" "$UH/asx-deep"
	run_in "$USR" sh -c 'ln "$1" "$2"; cat "$2"' sh "$UH/.ssh/config" "$p/c"
	okl "walk_levels: a link made inside past the depth bound to a file both lists judge stays denied" \
		'rc=$RC out=$(snip "$OUT") err=$(snip "$ERR")' \
		eval '[ "$RC" -ne 0 ] && has "$EPERM_MSG" "$ERR" && ! has "$(sec cfg)" "$OUT"'
	rm -rf "$UH/asx-deep"
	run_in "$USR" sh -c 'echo "pipe-$1" | sh -c "cat /dev/stdin"' sh "$TOK"
	okl "walk_levels: a pipe reopened through /dev/stdin stays readable" \
		'rc=$RC out=$(snip "$OUT") err=$(snip "$ERR")' eval '[ "$RC" -eq 0 ] && has "pipe-$TOK" "$OUT"'
	cat "$BASE_SAVED" >"$BASE_LIST"
}

check_inside_exc() {
	put "$UH/.ssh/id_exc" 0600 "$(sec exc)"
	set_list "~/.ssh/"
	start_server
	# An exception is added (by the user, outside: a sandboxed agent cannot edit the list,
	# test-writes.sh::check_own_list) while the sandbox runs, and it launches a nested sandbox.
	set_list "~/.ssh/" "!~/.ssh/id_exc"
	job "$LAUNCHER cat $UH/.ssh/id_exc"
	okl "inside_exc: an exception added while a sandbox runs does not open the file to a nested launch" \
		'job=$(snip "$T/job.out")' eval 'has "$EPERM_MSG" "$T/job.out" && ! has "$(sec exc)" "$T/job.out"'
	job "cat $UH/.ssh/id_exc"
	okl "inside_exc: nor to the running sandbox" 'job=$(snip "$T/job.out")' \
		eval 'has "$EPERM_MSG" "$T/job.out" && ! has "$(sec exc)" "$T/job.out"'
	stop_server
	readable "inside_exc: the next launch from outside applies the exception" "$UH/.ssh/id_exc" "$(sec exc)"
	okl "inside_exc: that launch says an exception now re-allows files" 'err=$(snip "$ERR")' \
		has "exception" "$ERR"
}

# ---------------------------------------------------------------- setup

preflight() {
	if [ "$(id -u)" -ne 0 ]; then
		fail "preflight" "must run as root"
		return 1
	fi
	command -v "$LAUNCHER" >/dev/null || { fail "preflight" "$LAUNCHER not installed"; return 1; }
}

setup() {
	T=$(mktemp -d /tmp/asx-dirs.XXXXXX) && chmod 0755 "$T" || return 1
	OUT=$T/out ERR=$T/err
	TOK=$(head -c 8 /dev/urandom | od -An -tx1 | tr -d ' \n')
	remove_test_user "$USR" || return 1
	useradd -m -c "$GECOS" -s /bin/sh "$USR" || return 1
	UH=$(home_of "$USR")
	chmod 0755 "$UH"
}

# memo_read WHAT PATH SECRET: the running sandbox reads PATH twice (the second read uses a memo)
memo_read() {
	local want=$3
	job "cat $2; cat $2"
	okl "memos: $1: read twice before" 'job=$(snip "$T/job.out")' \
		eval '[ "$(grep -c "$want" "$T/job.out")" -eq 2 ]'
}

# memo_denied WHAT PATH SECRET: the running sandbox is now denied PATH
memo_denied() {
	local want=$3
	job "cat $2"
	okl "memos: $1" 'job=$(snip "$T/job.out")' \
		eval 'has "$EPERM_MSG" "$T/job.out" && ! has "$want" "$T/job.out"'
}

check_memos() {
	memo_checks ""
}

# memo_checks SUFFIX: the memo checks in directories named with SUFFIX
memo_checks() {
	local x=$1
	rm -rf "$UH/.ssh/moved$x" "$UH/mw$x"
	put "$UH/mw$x/a/b/file" 0600 "$(sec moved)"
	put "$UH/mw2$x/c/file" 0600 "$(sec marked)"
	udir "$UH/.ssh" "$UH/mp$x"
	set_list "~/.ssh/"
	start_server
	# 1. A directory above the memo's moves into the entry (fexit/vfs_rename).
	memo_read "ancestor moved" "$UH/mw$x/a/b/file" "$(sec moved)"
	mv "$UH/mw$x/a" "$UH/.ssh/moved$x"
	memo_denied "a file read before, after an ancestor of its directory moved into ~/.ssh/ outside" \
		"$UH/.ssh/moved$x/b/file" "$(sec moved)"
	# 2. An outside launch adds a directory entry above it (WALK_GEN_MARKS).
	memo_read "entry added" "$UH/mw2$x/c/file" "$(sec marked)"
	set_list "~/.ssh/" "~/mw2$x/"
	run_in "$USR" true
	memo_denied "a file read before, after an outside launch listed ~/mw2$x/" "$UH/mw2$x/c/file" "$(sec marked)"
	# 3. Its mount moves below the entry: same vfsmount, new place (mount_lock).
	if mount --bind "$UH/mp$x" "$UH/mp$x" && MOUNTS+=("$UH/mp$x") && mount --make-private "$UH/mp$x" &&
		mnt "$UH/mp$x/t" -t tmpfs -o size=4m,mode=0755 asx-dirs-memo; then
		put "$UH/mp$x/t/file" 0600 "$(sec mounted)"
		memo_read "mount moved" "$UH/mp$x/t/file" "$(sec mounted)"
		udir "$UH/.ssh/t$x"
		if mount --move "$UH/mp$x/t" "$UH/.ssh/t$x" 2>"$T/move.err"; then
			MOUNTS+=("$UH/.ssh/t$x")
			memo_denied "a file read before, after its mount was moved below ~/.ssh/ (mount --move)" \
				"$UH/.ssh/t$x/file" "$(sec mounted)"
		else
			fail "memos: mount --move" "$(snip "$T/move.err")"
		fi
	else
		fail "memos: setup of the private bind mount and tmpfs" "see stderr"
	fi
	stop_server
}

# File memos: a memo of an open that was allowed never outlives what allowed it.
check_file_memos() {
	local d=$UH/fmemo
	rm -rf "$d"
	put "$d/flag.key" 0600 "$(sec fm-flags)"
	put "$d/r/plain" 0600 "$(sec fm-renamed)"
	put "$d/l/orig" 0600 "$(sec fm-linked)"
	put "$d/ro/file" 0600 "$(sec fm-ro)"
	udir "$UH/.ssh"
	set_list "~/.ssh/"
	start_server
	# 1. The sandbox's first name pattern, by an outside launch: keys and flags (SBX_PATTERNS).
	memo_read "file memos, first pattern" "$d/flag.key" "$(sec fm-flags)"
	set_list "~/.ssh/" "**/*.key" "**/.env" "readonly ~/fmemo/ro/"
	run_in "$USR" true
	memo_denied "file memos: a file read before, after an outside launch added **/*.key (the sandbox's first pattern)" \
		"$d/flag.key" "$(sec fm-flags)"
	# 2. Renamed outside to a covered name (walk_gens.names, fexit/vfs_rename).
	memo_read "file memos, renamed" "$d/r/plain" "$(sec fm-renamed)"
	mv "$d/r/plain" "$d/r/.env"
	memo_denied "file memos: a file read before, after it was renamed to .env outside" "$d/r/.env" "$(sec fm-renamed)"
	# 3. Linked outside to a covered name, then its first name removed (lsm/inode_link).
	memo_read "file memos, linked" "$d/l/orig" "$(sec fm-linked)"
	ln "$d/l/orig" "$d/l/.env" && rm "$d/l/orig"
	memo_denied "file memos: a file read before, after a link named .env was made outside and its first name removed" \
		"$d/l/.env" "$(sec fm-linked)"
	# 4. A read's memo allows no write (below a read-only entry).
	memo_read "file memos, read-only" "$d/ro/file" "$(sec fm-ro)"
	job "echo changed >>$d/ro/file"
	okl "file memos: a file read twice below a read-only entry still cannot be opened for writing" \
		'job=$(snip "$T/job.out"); file=$(snip "$d/ro/file")' \
		eval 'has "$EPERM_MSG" "$T/job.out" && ! has changed "$d/ro/file"'
	stop_server
	rm -rf "$d"
}

check_sighup() {
	put "$UH/hup-file" 0600 "$(sec hup)"
	set_list "~/.ssh/"
	start_server
	job "cat $UH/hup-file"
	okl "sighup: control: an unlisted file is readable in the running sandbox" 'job=$(snip "$T/job.out")' \
		has "$(sec hup)" "$T/job.out"
	set_list "~/.ssh/" "~/hup-file"
	job "cat $UH/hup-file"
	okl "sighup: control: a line added outside does not reach the running sandbox by itself" \
		'job=$(snip "$T/job.out")' has "$(sec hup)" "$T/job.out"
	systemctl kill -s HUP --kill-whom=main agent-sandbox-execd
	okl "sighup: after SIGHUP to the daemon the running sandbox is denied the file the line lists" \
		'job=$(snip "$T/job.out"); journal: $(journalctl -u agent-sandbox-execd -n 3 -o cat | tr "\n" "|")' \
		wait_for 30 eval 'job "cat $UH/hup-file"; has "$EPERM_MSG" "$T/job.out" && ! has "$(sec hup)" "$T/job.out"'
	stop_server
	rm -f "$UH/hup-file"
}

# The memos in the LRU hash (AGENT_SANDBOX_EXECD_WITHOUT=memo-inode-storage, the variant a kernel
# that refuses inode storage there gets, as 7.x does): the same three invalidations.
check_memos_hash() {
	mkdir -p "$(dirname "$DROPIN")"
	printf '[Service]\nEnvironment=AGENT_SANDBOX_EXECD_WITHOUT=memo-inode-storage\n' >"$DROPIN"
	restart_daemon "fallback: the daemon serves with its walk memos in the LRU hash"
	run_as "$USR" "$LAUNCHER" --status
	okl "memos_hash: --status names memo-inode-storage as left out" 'out=$(snip "$OUT")' \
		has "loaded without memo-inode-storage" "$OUT"
	memo_checks -h
	# The drop-in stays for check_fallback, which comes next and replaces it (one full
	# load fewer); cleanup() restores the unit when fallback does not run.
	listed fallback "${CHECKS[*]}" && check_runs fallback && return 0
	rm -f "$DROPIN"
	restart_daemon "fallback: the daemon serves again without the drop-in"
}

readonly DROPIN=/run/systemd/system/agent-sandbox-execd.service.d/asx-test-fallback.conf

check_fallback() {
	mkdir -p "$(dirname "$DROPIN")"
	printf '[Service]\nEnvironment=AGENT_SANDBOX_EXECD_WITHOUT=walk-memos,compat-ioctl\n' >"$DROPIN"
	restart_daemon "fallback: the daemon serves without walk-memos and compat-ioctl"
	run_as "$USR" "$LAUNCHER" --status
	okl "fallback: --status names both parts left out" 'out=$(snip "$OUT")' \
		eval 'has "loaded without walk-memos (left out by AGENT_SANDBOX_EXECD_WITHOUT)" "$OUT" &&
			has "loaded without compat-ioctl (left out by" "$OUT"'
	AGENT_SANDBOX_EXECD_WITHOUT=walk-memos agent-sandbox-execd --check >"$T/check.out" 2>&1
	okl "fallback: the doctor notes the part left out and stays healthy" 'out=$(snip "$T/check.out")' \
		eval 'has "note: loaded without walk-memos" "$T/check.out" &&
			has "verdict: enforcement can work" "$T/check.out"'
	rm -rf "$UH/.ssh/fb" "$UH/fbw"
	put "$UH/.ssh/id_fb" 0600 "$(sec fbkey)"
	put "$UH/.ssh/config" 0644 "cfg-$TOK"
	put "$UH/fbw/a/b/file" 0600 "$(sec fbmoved)"
	put "$UH/fb-listed" 0600 "$(sec fblisted)"
	ln -f "$UH/.ssh/id_fb" "$UH/fb-hardlink"
	set_list "~/.ssh/" "!~/.ssh/config" "~/fb-listed" "~/fb-name"
	denied "fallback: a key in ~/.ssh/ is denied" "$UH/.ssh/id_fb" "$(sec fbkey)"
	denied "fallback: its other name made before launch is denied" "$UH/fb-hardlink" "$(sec fbkey)"
	readable "fallback: !~/.ssh/config is readable" "$UH/.ssh/config" "cfg-$TOK"
	denied "fallback: a listed file is denied" "$UH/fb-listed" "$(sec fblisted)"
	start_server
	job "cat $UH/fbw/a/b/file"
	okl "fallback: a file outside the entry is readable" 'job=$(snip "$T/job.out")' \
		has "$(sec fbmoved)" "$T/job.out"
	mv "$UH/fbw/a" "$UH/.ssh/fb"
	job "cat $UH/.ssh/fb/b/file"
	okl "fallback: the same file, after its directory moved into ~/.ssh/ outside, is denied" \
		'job=$(snip "$T/job.out")' eval 'has "$EPERM_MSG" "$T/job.out" && ! has "$(sec fbmoved)" "$T/job.out"'
	printf '%s\n' "$(sec fbname)" >"$UH/fb-name" && chown "$USR" "$UH/fb-name"
	job "cat $UH/fb-name"
	okl "fallback: a listed name created after launch is denied" 'job=$(snip "$T/job.out")' \
		eval 'has "$EPERM_MSG" "$T/job.out" && ! has "$(sec fbname)" "$T/job.out"'
	stop_server
	rm -f "$UH/fb-hardlink" "$DROPIN"
	restart_daemon "fallback: the daemon serves again without the drop-in"
	run_as "$USR" "$LAUNCHER" --status
	okl "fallback: without the drop-in, --status names no part left out (kernel: $(uname -r))" \
		'out=$(snip "$OUT")' eval '! has "left out by" "$OUT"'
}

cleanup() {
	local i p
	[ "${CLEANED:-0}" = 1 ] && return 0
	CLEANED=1
	for p in "${BG_PIDS[@]}"; do stop_bg "$p"; done
	for ((i = ${#MOUNTS[@]} - 1; i >= 0; i--)); do umount -l "${MOUNTS[i]}" 2>/dev/null; done
	for p in "${LOOPS[@]}"; do losetup -d "$p" 2>/dev/null; done
	[ -n "$BASE_SAVED" ] && [ -e "$BASE_SAVED" ] && cat "$BASE_SAVED" >"$BASE_LIST"
	if [ -e "$DROPIN" ]; then
		rm -f "$DROPIN"
		systemctl daemon-reload
		systemctl restart agent-sandbox-execd
	fi
	remove_test_user "$USR"
	[ -n "$T" ] && rm -rf "$T"
	return 0
}

run_suite "setup (test user, directories)"
