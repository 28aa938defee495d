#!/bin/bash
# shellcheck disable=SC2016,SC2317
# (SC2016: the single-quoted 'sh -c' and python programs expand their own variables;
#  SC2317: the check_* functions are called indirectly, through run_check)
#
# scripts/test-fs.sh - file systems, mounts and files that change under a
# running sandbox (GitHub issue 4).
#
# Run as root in a throwaway guest where the package is installed and the
# daemon runs (the QEMU guest of `make vm-test`, after scripts/test.sh).  For
# every case the script builds the file system itself (loop devices, tmpfs,
# btrfs subvolumes and snapshots, overlay, bind and second mounts), puts a
# secret with known content into a directory the test user owns, lists it in
# the user's ~/.config/agent-sandbox-exec/denylist and checks from inside
# `agent-sandbox-exec` that opening it fails with EPERM and shows nothing,
# that stat still works and that a control file next to it is readable.
#
# Checks (in this order; names for ASX_FS_ONLY / ASX_FS_SKIP):
#   root_disk         a file on the guest's virtio root disk (major 254)
#   ext4_big_minor    ext4 on /dev/loop300 (minor >= 256, made with mknod)
#   xfs_big_minor     xfs on /dev/loop301
#   tmpfs             a tmpfs mount
#   btrfs             top-level subvolume, subvolumes, snapshots, subvol= mounts; a deny
#                     must not spill over to the same inode number in another subvolume
#   bind_second_mount a bind mount of the directory, a second mount of the same device
#   overlay_samefs    overlay with lower and upper on one ext4: listed overlay path, listed
#                     lower path; still denied after copy-up (running sandbox, new launch)
#   overlay_crossfs   the same with the lower layer on tmpfs and the upper on ext4
#   replace_running   sed -i, atomic save, delete-and-recreate, late creation under a
#                     running sandbox, with a tight sandboxed open loop during 50 changes
#   link_rename       ln and mv of a listed file from inside fail with EPERM (also after
#                     the file was replaced under the running sandbox)
#   agent_tricks      planting an inode at a listed name (ln, symlink, create, O_TMPFILE
#                     + linkat, rm + mv over), an overlay in a user namespace over a
#                     replaced file, a snapshot of a user-owned btrfs subvolume
#   freed_inodes      a freed listed inode number reused by an unrelated new file is
#                     readable in a running sandbox; a listed inode with another name left
#                     stays denied
#   drop_rewrite      a listed file deleted (its key dropped by the kernel), another user's
#                     launch, then a new file with the same inode number at the listed path:
#                     the next launch writes the key again, so another name of it is denied
#   missing_parent    a listed path whose directory does not exist: the launch works
#   mount_reuse       between two launches a mount is replaced by one of another device
#                     at the same place (the freed mount id is usually reused): the user's
#                     long-lived resolver must key the file with the new device
#   compat_ioctl      a static 32-bit program (asx-ioctl32, whose ioctls reach the kernel's
#                     compat entry point) snapshots a btrfs subvolume the user owns: EPERM
#   path_dirs         mkdir at a listed name; rmdir, rename, rename-over and unlink of the
#                     directories and symlinks on the way to listed names; then the user's
#                     later writes to the listed paths land where the name watch is
#   casefold          ext4 casefold and XFS ASCII-ci directories: another spelling of a
#                     listed name cannot be created, linked or renamed to from inside, no
#                     file in such a directory opens (also a listed file created after
#                     launch under another spelling, or looked up anew after the dentry
#                     cache was dropped); chattr +F refused inside (64- and 32-bit); the
#                     launch warns; files elsewhere on the filesystem stay readable
#   answer_reuse      a relaunch with nothing changed reuses the resolver's last answer
#                     (src/resolve/watch.rs); a change between two launches must reach the next one:
#                     a symlink in the middle of the listed path, in a directory the path
#                     does not name, pointed elsewhere (refused inside, done outside); the listed file's
#                     directory renamed away and made again; a directory on the path made
#                     unsearchable (the last answer still denies; after an entry changes
#                     there too, the launch is refused)
#
# A running sandbox here is one launch of a small command server (a shell loop
# reading job names from a FIFO) that runs the checks as jobs: a launch from
# outside re-reads the list for every sandbox of the user, so between a
# server's start and its last job no other launch of that user happens.
#
# It creates the users asx-fs and asx-fs2, /srv/asx-fs.* (images and mount points),
# /tmp/asx-fs.*, loop devices (and the nodes /dev/loop300, /dev/loop301 if
# missing) and the mounts under /srv/asx-fs.*; all of that is undone at exit.
#
# Output: "PASS: <what>", "FAIL: <what> (<detail>)", "SKIP: <why>" and notes
# ("# ..."); then a count line and "ALL PASS" (exit 0) or "<n> FAILED" (exit 1).
#
# Environment:
#   ASX_FS_ONLY="name ..."  run only these checks;  ASX_FS_SKIP="name ..."  skip these
#   ASX_FS_KEEP=1           leave the user, files and mounts behind for debugging

set -u -o pipefail
umask 022
export LC_ALL=C # stable strerror() texts
HERE=$(cd "$(dirname "$0")" && pwd) || exit 1
cd / || exit 1

readonly SUITE=test-fs.sh
readonly LAUNCHER=agent-sandbox-exec
readonly USR=asx-fs
readonly USR2=asx-fs2 # the other user of drop_rewrite
readonly GECOS="agent-sandbox-exec fs test user"
readonly EPERM_MSG="Operation not permitted"
readonly HOME_LIST_REL=.config/agent-sandbox-exec/denylist
readonly REPLACEMENTS=50 # changes of a listed file while a sandboxed loop opens it
readonly MIN_OPENS=200   # the loop must have tried at least this often meanwhile
readonly REUSE_TRIES=40  # new files made until one reuses a freed inode number

CHECKS=(
	root_disk ext4_big_minor xfs_big_minor tmpfs
	btrfs bind_second_mount overlay_samefs overlay_crossfs
	replace_running link_rename agent_tricks compat_ioctl path_dirs casefold freed_inodes
	drop_rewrite missing_parent mount_reuse answer_reuse
)

PASS_N=0 FAIL_N=0 SKIP_N=0

# shellcheck source=scripts/test-lib.sh
. "$HERE/test-lib.sh" || exit 1
FILTER=ASX_FS # run_check: ASX_FS_ONLY / ASX_FS_SKIP choose the checks
CMD_TIMEOUT=30
T="" W="" OUT="" ERR="" RC=0 TOK="" UH="" USR_UID=""
E="" E_DEV="" # the ext4 on /dev/loop300: mount point, device (set up once, shared by several checks)
LOOPDEV=""
SETUP_DONE=0 CLEANED=0 SRV_SEQ=0 IOCTL32_INSTALLED=0
BG_PIDS=() MOUNTS=() LOOPS=() NODES=() LOOP_NUMS=()
declare -A SRV_BG=() SRV_DIR=()

# ---------------------------------------------------------------- helpers

# put PATH MODE CONTENT: a file owned by the test user
put() { printf '%s\n' "$3" >"$1" && chown "$USR:$USR" "$1" && chmod "$2" "$1"; }

# udir DIR...: directories owned by the test user
udir() { install -d -o "$USR" -g "$USR" -m 0755 "$@"; }

sec() { printf 'asx-secret-%s-%s' "$1" "$TOK"; } # the secret content of case TAG
ctl() { printf 'asx-ctl-%s-%s' "$1" "$TOK"; }    # the control file content of case TAG

# pair DIR TAG: DIR (the user's) with DIR/secret (0600, content $(sec TAG)) and DIR/ctl
pair() { udir "$1" && put "$1/secret" 0600 "$(sec "$2")" && put "$1/ctl" 0600 "$(ctl "$2")"; }

ino() { stat -c %i "$1" 2>/dev/null; }

# majmin PATH: the device of PATH's mount as /proc/self/mountinfo shows it (the superblock's)
majmin() { findmnt -n -o MAJ:MIN -T "$1" 2>/dev/null | head -n 1 | tr -d ' '; }

# set_list PATH...: the user's home list is exactly these paths
set_list() {
	install -d -o "$USR" -g "$USR" -m 0755 "$UH/.config" "$UH/.config/agent-sandbox-exec"
	printf '%s\n' "# $SUITE" "$@" >"$T/list"
	rm -f "$UH/$HOME_LIST_REL"
	install -o "$USR" -g "$USR" -m 0644 "$T/list" "$UH/$HOME_LIST_REL"
}

# image NAME SIZE: a sparse image file; prints its path
image() {
	local f=$W/img/$1.img
	truncate -s "$2" "$f" && printf '%s' "$f"
}

# loop_at NUM IMAGE: attach IMAGE to /dev/loopNUM, making the node (and the
# device) first if missing; the device in $LOOPDEV (not in a subshell: it is
# remembered for cleanup)
loop_at() {
	local n=$1 img=$2 dev=/dev/loop$1
	LOOPDEV=""
	if [ ! -b "$dev" ]; then
		mknod "$dev" b 7 "$n" && NODES+=("$dev") || return 1
	fi
	if ! losetup "$dev" "$img" 2>"$T/losetup.err"; then
		# kernels without legacy block autoload: ask loop-control for the device
		python3 -c 'import fcntl, os, sys
fd = os.open("/dev/loop-control", os.O_RDWR)
try:
    fcntl.ioctl(fd, 0x4C80, int(sys.argv[1]))  # LOOP_CTL_ADD
except OSError:
    pass' "$n" 2>/dev/null
		losetup "$dev" "$img" 2>"$T/losetup.err" || {
			echo "losetup $dev: $(snip "$T/losetup.err")" >&2
			return 1
		}
	fi
	LOOPS+=("$dev") LOOP_NUMS+=("$n")
	LOOPDEV=$dev
}

# loop_any IMAGE: attach IMAGE to a free loop device, in $LOOPDEV
loop_any() {
	LOOPDEV=$(losetup -f --show "$1") || return 1
	LOOPS+=("$LOOPDEV")
}

# need_ext4: the shared ext4 on /dev/loop300, mounted on $E (once)
need_ext4() {
	local img
	[ -n "$E" ] && return 0
	img=$(image ext4 160M) && loop_at 300 "$img" && E_DEV=$LOOPDEV &&
		mkfs.ext4 -q -F "$E_DEV" >/dev/null 2>&1 && mnt "$W/mnt/ext4" "$E_DEV" || return 1
	E=$W/mnt/ext4
	note "ext4 on $E_DEV, mountinfo device $(majmin "$E")"
}

# ---------------------------------------------------------------- in-sandbox operations
#
# A batch of operations runs in ONE sandboxed shell (a new launch, or a job of a
# running server); each operation's stdout, stderr and exit status land in
# RES/<n>.out, .err, .rc; the expectations are checked afterwards, one
# PASS/FAIL line each.

OPS_SH='d=$1; shift; i=0
while [ $# -ge 3 ]; do
	i=$((i + 1))
	case $1 in
	cat) cat "$2" ;;
	stat) stat -c %s "$2" ;;
	ln) ln "$2" "$3" ;;
	mv) mv "$2" "$3" ;;
	symlink) ln -s "$2" "$3" ;;
	create) touch "$2" ;;
	rm) rm -f "$2" ;;
	tmplink) python3 -c "import os, sys
fd = os.open(sys.argv[1], os.O_TMPFILE | os.O_WRONLY, 0o600)
proc = os.open(\"/proc/self/fd\", os.O_RDONLY | os.O_DIRECTORY)
os.link(str(fd), sys.argv[2], src_dir_fd=proc, follow_symlinks=True)" "$2" "$3" ;;
	ovl) unshare -Urm sh -c "mount -t overlay asx -o lowerdir=\$1:\$1-empty \$1-mnt && cat \$1-mnt/\$2" sh "$2" "$3" ;;
	snapshot) btrfs subvolume snapshot "$2" "$3" ;;
	mkdir) mkdir "$2" ;;
	rmdir) rmdir "$2" ;;
	rename) python3 -c "import os, sys; os.rename(sys.argv[1], sys.argv[2])" "$2" "$3" ;;
	chattr) chattr +F "$2" ;;
	snap32) asx-ioctl32 snap "$2" "${3%/*}" "${3##*/}" ;;
	casefold32) asx-ioctl32 casefold "$2" ;;
	*) echo "unknown operation $1" >&2; false ;;
	esac >"$d/$i.out" 2>"$d/$i.err"
	echo "$?" >"$d/$i.rc"
	shift 3
done
echo done >"$d/done"'

Q_ARGS=() Q_I=() Q_K=() Q_V=() Q_W=()

q_reset() { Q_ARGS=() Q_I=() Q_K=() Q_V=() Q_W=(); }

# q_op OP A [B]: add an operation
q_op() { Q_ARGS+=("$1" "$2" "${3:--}"); }

# q_expect KIND VALUE WHAT: an expectation about the last operation
q_expect() {
	Q_I+=("$((${#Q_ARGS[@]} / 3))") Q_K+=("$1") Q_V+=("$2") Q_W+=("$3")
}

# q_denied FILE SECRET LABEL: cat FILE fails with EPERM and shows nothing of SECRET; stat works
q_denied() {
	q_op cat "$1"
	q_expect denied "$2" "$3: cat fails with EPERM, content hidden"
	q_op stat "$1"
	q_expect stat "$(stat -c %s "$1" 2>/dev/null)" "$3: stat works"
}

# q_read FILE CONTENT LABEL: cat FILE succeeds and prints CONTENT
q_read() {
	q_op cat "$1"
	q_expect read "$2" "$3"
}

# q_eperm OP A B LABEL: OP A B fails with EPERM
q_eperm() {
	q_op "$1" "$2" "$3"
	q_expect eperm - "$4"
}

# q_ok OP A B LABEL: OP A B succeeds
q_ok() {
	q_op "$1" "$2" "$3"
	q_expect ok - "$4"
}

# q_hidden FILE SECRET LABEL: cat FILE (existing or not) shows nothing of SECRET
q_hidden() {
	q_op cat "$1"
	q_expect hidden "$2" "$3"
}

# q_probe FILE SECRET LABEL: cat FILE; what happened is noted, not asserted
q_probe() {
	q_op cat "$1"
	q_expect probe "$2" "$3"
}

# q_run WHERE: run the batch (WHERE: "new" = a new launch, else a server's name), check it
q_run() {
	local res=$UH/asx-res j i k v w o e rc
	rm -rf "$res"
	udir "$res"
	if [ "$1" = new ]; then
		# A batch is many commands in one launch: the suite's 30 s were too little once for the
		# btrfs batch (a 7.x guest beside four others on two cores).
		CMD_TIMEOUT=180 run_in "$USR" sh -c "$OPS_SH" sh "$res" "${Q_ARGS[@]}"
	else
		srv_run "$1" "$OPS_SH" "$res" "${Q_ARGS[@]}"
	fi
	for j in "${!Q_I[@]}"; do
		i=${Q_I[j]} k=${Q_K[j]} v=${Q_V[j]} w=${Q_W[j]}
		o=$res/$i.out e=$res/$i.err
		rc=$(cat "$res/$i.rc" 2>/dev/null)
		if [ ! -e "$res/done" ] || [ -z "$rc" ]; then
			fail "$w" "the sandboxed batch did not complete: $(why)"
			continue
		fi
		case $k in
		denied)
			if has "$v" "$o" "$e"; then
				fail "$w" "secret revealed; rc=$rc"
			elif [ "$rc" -eq 0 ]; then
				fail "$w" "exit status 0; stdout: $(snip "$o")"
			elif ! has "$EPERM_MSG" "$e"; then
				fail "$w" "no '$EPERM_MSG'; rc=$rc; stderr: $(snip "$e")"
			else
				pass "$w"
			fi
			;;
		hidden)
			if has "$v" "$o" "$e"; then fail "$w" "secret revealed; rc=$rc"; else pass "$w"; fi
			;;
		probe)
			if has "$v" "$o"; then
				note "$w: READABLE (rc=$rc)"
			else
				note "$w: not readable (rc=$rc; $(snip "$e"))"
			fi
			;;
		ok)
			if [ "$rc" -eq 0 ]; then pass "$w"; else fail "$w" "rc=$rc; stderr: $(snip "$e")"; fi
			;;
		eperm)
			if [ "$rc" -ne 0 ] && has "$EPERM_MSG" "$e"; then
				pass "$w"
			else
				fail "$w" "rc=$rc; stderr: $(snip "$e")"
			fi
			;;
		read)
			if [ "$rc" -eq 0 ] && has "$v" "$o"; then
				pass "$w"
			else
				fail "$w" "rc=$rc; stdout: $(snip "$o"); stderr: $(snip "$e")"
			fi
			;;
		stat)
			if [ "$rc" -eq 0 ] && [ -n "$v" ] && [ "$(cat "$o")" = "$v" ]; then
				pass "$w"
			else
				fail "$w" "rc=$rc; expected size '$v'; stdout: $(snip "$o"); stderr: $(snip "$e")"
			fi
			;;
		esac
	done
	q_reset
}

# ---------------------------------------------------------------- running sandboxes
#
# A server is one launch of a shell loop inside the sandbox; it reads job names
# from DIR/fifo and runs DIR/<job>.sh with bash, output in DIR/<job>.out/.err/.rc.

SERVER_SH='d=$1
echo "$$" >"$d/pid"
exec 3<>"$d/fifo"
while IFS= read -r job <&3; do
	case $job in quit) exit 0 ;; esac
	bash "$d/$job.sh" >"$d/$job.out" 2>"$d/$job.err" </dev/null
	echo "$?" >"$d/$job.rc.new"
	mv -f "$d/$job.rc.new" "$d/$job.rc"
done'

# srv_start NAME: launch server NAME in the user's sandbox; status 1 if it is not running inside
srv_start() {
	local name=$1 d pid
	d=$UH/asx-srv-$name
	rm -rf "$d"
	udir "$d"
	mkfifo -m 0600 "$d/fifo" && chown "$USR:$USR" "$d/fifo" || return 1
	timeout -k 5 600 runuser -u "$USR" -- "$LAUNCHER" sh -c "$SERVER_SH" sh "$d" \
		</dev/null >"$T/srv-$name.out" 2>"$T/srv-$name.err" &
	SRV_BG[$name]=$! SRV_DIR[$name]=$d
	BG_PIDS+=("$!")
	if ! wait_for 30 test -s "$d/pid"; then
		echo "server $name did not start: $(snip "$T/srv-$name.err")" >&2
		return 1
	fi
	pid=$(cat "$d/pid")
	in_sandbox_cgroup "/proc/$pid/cgroup" "$USR_UID" && return 0
	echo "server $name runs outside the sandbox: $(cat "/proc/$pid/cgroup" 2>&1)" >&2
	return 1
}

# srv_run NAME SCRIPT ARGS...: run `bash -c SCRIPT` with ARGS as a job of server NAME;
# its output in $OUT/$ERR, status in $RC (124 if it did not finish within $CMD_TIMEOUT)
srv_run() {
	local name=$1 script=$2 d job
	shift 2
	d=${SRV_DIR[$name]}
	SRV_SEQ=$((SRV_SEQ + 1))
	job=job$SRV_SEQ
	{
		printf 'set --'
		printf ' %q' "$@"
		printf '\n%s\n' "$script"
	} >"$d/$job.sh"
	: >"$OUT"
	: >"$ERR"
	RC=0
	# the FIFO is held open by the server; without a server, opening it would block
	if ! timeout 10 bash -c 'printf "%s\n" "$1" >"$2"' sh "$job" "$d/fifo"; then
		RC=125
		echo "server $name does not take jobs" >"$ERR"
		return
	fi
	if ! wait_for "$CMD_TIMEOUT" test -e "$d/$job.rc"; then
		RC=124
		return
	fi
	cp "$d/$job.out" "$OUT"
	cp "$d/$job.err" "$ERR"
	RC=$(cat "$d/$job.rc")
}

srv_stop() {
	local d=${SRV_DIR[$1]} bg=${SRV_BG[$1]}
	timeout 10 bash -c 'printf "quit\n" >"$1"' sh "$d/fifo" 2>/dev/null
	wait_for 10 pid_gone "$bg"
	stop_bg "$bg"
}

# The tight loop: python3 in the sandbox opens FILE as fast as it can until
# DIR/stop appears (at most 120 s), then writes DIR/result:
# n=<attempts> ok=<successful opens> leak=<reads showing TOKEN> eperm=<EPERM> enoent=<ENOENT> other=<other errors>
LOOP_PY='import errno, os, sys, time
f, d, tok = sys.argv[1], sys.argv[2], sys.argv[3].encode()
with open("/proc/self/cgroup") as c, open(d + "/cgroup", "w") as o:
    o.write(c.read())
stop = d + "/stop"
n = ok = leak = eperm = enoent = other = 0
end = time.monotonic() + 120
open(d + "/started", "w").close()
while True:
    if n % 32 == 0 and (os.path.exists(stop) or time.monotonic() > end):
        break
    n += 1
    try:
        fd = os.open(f, os.O_RDONLY)
    except OSError as e:
        if e.errno == errno.EPERM:
            eperm += 1
        elif e.errno == errno.ENOENT:
            enoent += 1
        else:
            other += 1
        continue
    try:
        data = os.read(fd, 4096)
    finally:
        os.close(fd)
    ok += 1
    if tok in data:
        leak += 1
with open(d + "/result.new", "w") as r:
    r.write("n=%d ok=%d leak=%d eperm=%d enoent=%d other=%d\n" % (n, ok, leak, eperm, enoent, other))
os.rename(d + "/result.new", d + "/result")'

LOOP_JOB='d=$1; f=$2; tok=$3
python3 -c "$4" "$f" "$d" "$tok" </dev/null >"$d/py.out" 2>"$d/py.err" &
echo "$!" >"$d/pypid"'

# The changes, made outside the sandbox as the user: KIND FILE N SECRET [AVOID]
# sed: sed -i; atomic: write a temporary file in the same directory, mv -f over
# FILE; recreate: rm, then write FILE anew.  ext4 hands out the lowest free
# inode number, so a new FILE tends to get a number that was just freed, often
# one listed at launch.  On odd rounds a spacer file takes the freed number, so
# that FILE moves on to a number never listed (even rounds reuse numbers, as in
# real life).  Then, while FILE's inode number is one of AVOID (the listed
# files' numbers at launch, space-separated), up to 10 more changes, each with
# a spacer, so that the final FILE is an inode whose number was never listed.
REPLACE_SH='kind=$1 f=$2 n=$3 sec=$4 avoid=${5:-}
dir=${f%/*}
change() { # ROUND SPACER(0/1)
	case $kind in
	sed) sed -i "s/^.*\$/$sec-r$1/" "$f" || return 1 ;;
	atomic) printf "%s\n" "$sec-r$1" >"$dir/.asx-tmp" && mv -f "$dir/.asx-tmp" "$f" || return 1 ;;
	recreate) rm -f "$f" || return 1 ;;
	esac
	if [ "$2" = 1 ]; then : >"$dir/.asx-spacer-$1" || return 1; fi
	if [ "$kind" = recreate ]; then printf "%s\n" "$sec-r$1" >"$f" || return 1; fi
}
avoided() { case " $avoid " in *" $(stat -c %i "$f") "*) return 0 ;; esac; return 1; }
i=1
while [ "$i" -le "$n" ]; do
	change "$i" $((i % 2)) || exit 1
	i=$((i + 1))
done
while [ -n "$avoid" ] && avoided && [ "$i" -le $((n + 10)) ]; do
	change "$i" 1 || exit 1
	i=$((i + 1))
done
rm -f "$dir"/.asx-spacer-*'

# result_field RESULT NAME: the number NAME=<n> in a loop's result line (0 if missing)
result_field() {
	local v
	v=$(tr ' ' '\n' <"$1" 2>/dev/null | sed -n "s/^$2=//p")
	printf '%s' "${v:-0}"
}

# storm WHAT SERVER KIND FILE SECRET [AVOID]: a tight loop in SERVER's sandbox opens
# FILE while FILE gets $REPLACEMENTS changes of KIND from outside (REPLACE_SH); PASS
# if the loop ran inside, tried at least $MIN_OPENS times, saw EPERM and never
# opened the file
storm() {
	local what=$1 srv=$2 kind=$3 f=$4 secret=$5 avoid=${6:-} ld r n okn leak eperm rrc CMD_TIMEOUT=120
	ld=$UH/asx-loop
	rm -rf "$ld"
	udir "$ld"
	srv_run "$srv" "$LOOP_JOB" "$ld" "$f" "$TOK" "$LOOP_PY"
	if [ "$RC" -ne 0 ] || ! wait_for 60 test -e "$ld/started"; then
		fail "$what" "the loop did not start: $(why); $(snip "$ld/py.err")"
		return
	fi
	run_as "$USR" sh -c "$REPLACE_SH" sh "$kind" "$f" "$REPLACEMENTS" "$secret" "$avoid"
	rrc=$RC
	touch "$ld/stop"
	wait_for 60 test -e "$ld/result"
	r=$(cat "$ld/result" 2>/dev/null)
	n=$(result_field "$ld/result" n) okn=$(result_field "$ld/result" ok)
	leak=$(result_field "$ld/result" leak) eperm=$(result_field "$ld/result" eperm)
	note "$kind loop: ${r:-no result}"
	if [ -z "$r" ]; then
		fail "$what" "no result from the loop: $(snip "$ld/py.err")"
	elif ! in_sandbox_cgroup "$ld/cgroup" "$USR_UID"; then
		fail "$what" "the loop ran outside the sandbox: $(snip "$ld/cgroup")"
	elif [ "$rrc" -ne 0 ]; then
		fail "$what" "the changes from outside failed: $(why)"
	elif [ "$leak" -ne 0 ] || [ "$okn" -ne 0 ]; then
		fail "$what" "$okn successful opens, $leak showed the secret ($r)"
	elif [ "$n" -lt "$MIN_OPENS" ] || [ "$eperm" -eq 0 ]; then
		fail "$what" "the loop did not run enough to tell: $r"
	else
		pass "$what"
	fi
}

# ================================================================ checks

# Every listed file sits in a directory the user owns; the checks take one launch each.

check_root_disk() {
	local d=$UH/asx-root
	pair "$d" root || { fail "root disk: setup" "cannot create files in $d"; return; }
	note "root disk: $(findmnt -n -o SOURCE -T "$d"), mountinfo device $(majmin "$d"), st_dev $(stat -c '%Hd:%Ld' "$d/secret")"
	ok "root disk: the home directory is on the virtio disk (major 254)" "device $(majmin "$d")" \
		test "$(majmin "$d" | cut -d: -f1)" = 254
	set_list "$d/secret"
	q_denied "$d/secret" "$(sec root)" "root disk (virtio)"
	q_read "$d/ctl" "$(ctl root)" "root disk: the control file next to it is readable"
	q_run new
}

check_ext4_big_minor() {
	if ! need_ext4; then
		fail "ext4 on /dev/loop300: setup" "see stderr"
		return
	fi
	ok "ext4: the mount's device has minor >= 256" "device $(majmin "$E")" test "$(majmin "$E")" = 7:300
	pair "$E/big" ext4 || { fail "ext4: setup" "files"; return; }
	set_list "$E/big/secret"
	q_denied "$E/big/secret" "$(sec ext4)" "ext4 on /dev/loop300"
	q_read "$E/big/ctl" "$(ctl ext4)" "ext4 on /dev/loop300: the control file is readable"
	q_run new
}

check_xfs_big_minor() {
	local img dev m=$W/mnt/xfs
	if ! command -v mkfs.xfs >/dev/null; then
		skip "xfs: mkfs.xfs not installed"
		return
	fi
	if ! { img=$(image xfs 320M) && loop_at 301 "$img" && dev=$LOOPDEV &&
		mkfs.xfs -q -f "$dev" >/dev/null 2>&1 && mnt "$m" -t xfs "$dev"; }; then
		fail "xfs on /dev/loop301: setup" "see stderr"
		return
	fi
	note "xfs on $dev, mountinfo device $(majmin "$m")"
	ok "xfs: the mount's device has minor >= 256" "device $(majmin "$m")" test "$(majmin "$m")" = 7:301
	pair "$m/d" xfs || { fail "xfs: setup" "files"; return; }
	set_list "$m/d/secret"
	q_denied "$m/d/secret" "$(sec xfs)" "xfs on /dev/loop301"
	q_read "$m/d/ctl" "$(ctl xfs)" "xfs on /dev/loop301: the control file is readable"
	q_run new
}

check_tmpfs() {
	local m=$W/mnt/tmpfs
	if ! mnt "$m" -t tmpfs -o size=8m,mode=0755 asx-tmpfs || ! pair "$m/d" tmpfs; then
		fail "tmpfs: setup" "see stderr"
		return
	fi
	note "tmpfs: mountinfo device $(majmin "$m")"
	set_list "$m/d/secret"
	q_denied "$m/d/secret" "$(sec tmpfs)" "tmpfs"
	q_read "$m/d/ctl" "$(ctl tmpfs)" "tmpfs: the control file is readable"
	q_run new
}

# btrfs: inode numbers restart in every subvolume (the first file is 257) and a
# snapshot keeps them, while all subvolumes share one superblock (s_dev); stat
# shows a device per subvolume.
#   top/secret  (top-level subvolume)  listed
#   A/secret, A/ctl, A/snapfile        A/secret listed
#   B = snapshot of A                  B/snapfile listed; B/secret (same inode number as
#                                      A/secret) not listed
#   C (fresh subvolume): f1 f2 f3      none listed; same inode numbers as A's files
#   A/viamnt                           listed through the subvol=A mount
check_btrfs() {
	local img dev m=$W/mnt/btrfs ma=$W/mnt/btrfs-A mb=$W/mnt/btrfs-B f
	if ! command -v mkfs.btrfs >/dev/null || ! command -v btrfs >/dev/null; then
		skip "btrfs: btrfs-progs not installed"
		return
	fi
	if ! { img=$(image btrfs 256M) && loop_any "$img" && dev=$LOOPDEV &&
		mkfs.btrfs -q -f "$dev" >/dev/null 2>&1 && mnt "$m" -t btrfs "$dev"; }; then
		fail "btrfs: setup" "see stderr"
		return
	fi
	if ! {
		pair "$m/top" top &&
			btrfs -q subvolume create "$m/A" >/dev/null && chown "$USR:$USR" "$m/A" &&
			put "$m/A/secret" 0600 "$(sec btrfs-A)" && put "$m/A/ctl" 0600 "$(ctl btrfs-A)" &&
			put "$m/A/snapfile" 0600 "$(sec btrfs-snap)" &&
			btrfs -q subvolume snapshot "$m/A" "$m/B" >/dev/null &&
			btrfs -q subvolume create "$m/C" >/dev/null && chown "$USR:$USR" "$m/C" &&
			put "$m/C/f1" 0600 "asx-c1-$TOK" && put "$m/C/f2" 0600 "asx-c2-$TOK" &&
			put "$m/C/f3" 0600 "asx-c3-$TOK" &&
			put "$m/A/viamnt" 0600 "$(sec btrfs-viamnt)" &&
			mnt "$ma" -t btrfs -o subvol=A "$dev" && mnt "$mb" -t btrfs -o subvol=B "$dev"
	}; then
		fail "btrfs: setup (subvolumes, snapshot, subvol= mounts)" "see stderr"
		return
	fi
	note "btrfs: mountinfo device $(majmin "$m") (also $(majmin "$ma") for subvol=A); st_dev top $(stat -c '%Hd:%Ld' "$m/top/secret"), A $(stat -c '%Hd:%Ld' "$m/A/secret"), B $(stat -c '%Hd:%Ld' "$m/B/secret"), C $(stat -c '%Hd:%Ld' "$m/C/f1")"
	for f in top/secret top/ctl A/secret A/ctl A/snapfile B/secret B/ctl B/snapfile C/f1 C/f2 C/f3; do
		printf '%s=%s ' "$f" "$(ino "$m/$f")"
	done >"$T/inos"
	note "btrfs inode numbers: $(cat "$T/inos")"
	ok "btrfs: snapshot B/secret and fresh C/f1 have A/secret's inode number" "$(cat "$T/inos")" \
		test "$(ino "$m/A/secret")" = "$(ino "$m/B/secret")" -a "$(ino "$m/A/secret")" = "$(ino "$m/C/f1")"
	ok "btrfs: A/snapfile and C/f3 have B/snapfile's inode number" "$(cat "$T/inos")" \
		test "$(ino "$m/B/snapfile")" = "$(ino "$m/A/snapfile")" -a "$(ino "$m/B/snapfile")" = "$(ino "$m/C/f3")"
	ok "btrfs: A/ctl and C/f2 have top/secret's inode number" "$(cat "$T/inos")" \
		test "$(ino "$m/top/secret")" = "$(ino "$m/A/ctl")" -a "$(ino "$m/top/secret")" = "$(ino "$m/C/f2")"

	set_list "$m/top/secret" "$m/A/secret" "$m/B/snapfile" "$ma/viamnt"
	# The btrfs module came after the daemon's start: the first launch with btrfs keys makes it
	# load its programs again (keys.bpf.h: subvol_from()), which in a loaded 7.x guest can take
	# longer than a launcher waits (30 s). Wait for a launch to pass, then run the batch.
	local t0=$SECONDS
	wait_for 300 eval 'run_in "$USR" true; [ "$RC" -eq 0 ]'
	note "btrfs: the first launch with btrfs keys passed after $((SECONDS - t0)) s"
	q_denied "$m/top/secret" "$(sec top)" "btrfs top-level subvolume"
	q_read "$m/top/ctl" "$(ctl top)" "btrfs top-level subvolume: the control file is readable"
	q_denied "$m/A/secret" "$(sec btrfs-A)" "btrfs subvolume A"
	q_read "$m/A/ctl" "$(ctl btrfs-A)" "btrfs: A/ctl (top/secret's inode number, other subvolume) is readable"
	q_denied "$m/B/snapfile" "$(sec btrfs-snap)" "btrfs snapshot B, B/snapfile"
	q_read "$m/B/ctl" "$(ctl btrfs-A)" "btrfs snapshot B: the control file is readable"
	q_read "$m/B/secret" "$(sec btrfs-A)" "btrfs: the snapshot's copy B/secret (A/secret's inode number) is readable"
	q_read "$m/A/snapfile" "$(sec btrfs-snap)" "btrfs: A/snapfile, origin of the listed B/snapfile (same inode number), is readable"
	q_read "$m/C/f1" "asx-c1-$TOK" "btrfs: fresh subvolume C/f1 (A/secret's inode number) is readable"
	q_read "$m/C/f2" "asx-c2-$TOK" "btrfs: fresh subvolume C/f2 (top/secret's inode number) is readable"
	q_read "$m/C/f3" "asx-c3-$TOK" "btrfs: fresh subvolume C/f3 (B/snapfile's inode number) is readable"
	q_denied "$ma/secret" "$(sec btrfs-A)" "btrfs: A/secret through a subvol=A mount"
	q_read "$ma/ctl" "$(ctl btrfs-A)" "btrfs: subvol=A mount: the control file is readable"
	q_denied "$mb/snapfile" "$(sec btrfs-snap)" "btrfs: B/snapfile through a subvol=B mount"
	q_read "$mb/secret" "$(sec btrfs-A)" "btrfs: subvol=B mount: B/secret is readable"
	q_denied "$m/A/viamnt" "$(sec btrfs-viamnt)" "btrfs: a file listed through the subvol=A mount, opened through the top mount"
	q_run new
}

check_bind_second_mount() {
	local b=$W/mnt/bind a=$W/mnt/ext4-again
	if ! need_ext4 || ! pair "$E/bind" bind || ! put "$E/bind/secret2" 0600 "$(sec bind2)" ||
		! mnt "$b" --bind "$E/bind" || ! mnt "$a" "$E_DEV"; then
		fail "bind and second mount: setup" "see stderr"
		return
	fi
	note "second mount of $E_DEV: mountinfo device $(majmin "$a")"
	set_list "$E/bind/secret" "$b/secret2"
	q_denied "$b/secret" "$(sec bind)" "bind mount of the listed file's directory"
	q_read "$b/ctl" "$(ctl bind)" "bind mount: the control file is readable"
	q_denied "$a/bind/secret" "$(sec bind)" "a second mount of the same device"
	q_read "$a/bind/ctl" "$(ctl bind)" "second mount: the control file is readable"
	q_denied "$E/bind/secret2" "$(sec bind2)" "a file listed through the bind mount, opened through the original mount"
	q_denied "$a/bind/secret2" "$(sec bind2)" "a file listed through the bind mount, opened through the second mount"
	q_run new
}

# overlay_case TAG LOWER UPPERBASE: an overlay of LOWER (a directory) with upper
# and work directories under UPPERBASE, mounted on $W/mnt/ovl-TAG.  Listed:
# o/secret and o/wsecret (overlay paths), LOWER/lsecret (the lower layer's path).
# Copy-up from outside: chmod of o/secret, an append to o/wsecret.
overlay_case() {
	local tag=$1 l=$2 ub=$3 o=$W/mnt/ovl-$1
	if ! { udir "$l" "$ub/upper" && install -d -m 0755 "$ub/work" &&
		put "$l/secret" 0600 "$(sec "ovl-$tag")" && put "$l/wsecret" 0600 "$(sec "ovlw-$tag")" &&
		put "$l/lsecret" 0600 "$(sec "ovll-$tag")" && put "$l/ctl" 0600 "$(ctl "ovl-$tag")" &&
		mnt "$o" -t overlay "asx-ovl-$tag" -o "lowerdir=$l,upperdir=$ub/upper,workdir=$ub/work"; }; then
		fail "overlay ($tag): setup" "see stderr"
		return
	fi
	note "overlay ($tag): mountinfo device $(majmin "$o"), lower $(majmin "$l"); overlay secret st_dev:ino $(stat -c '%Hd:%Ld:%i' "$o/secret"), lower $(stat -c '%Hd:%Ld:%i' "$l/secret")"
	set_list "$o/secret" "$o/wsecret" "$l/lsecret"
	q_denied "$o/secret" "$(sec "ovl-$tag")" "overlay ($tag): a listed overlay file from the lower layer"
	q_denied "$o/lsecret" "$(sec "ovll-$tag")" "overlay ($tag): a file listed by its lower-layer path, opened through the overlay"
	q_read "$o/ctl" "$(ctl "ovl-$tag")" "overlay ($tag): the control file is readable"
	q_run new

	if ! srv_start "ovl-$tag"; then
		fail "overlay ($tag): a running sandbox starts" "see stderr"
		return
	fi
	q_denied "$o/secret" "$(sec "ovl-$tag")" "overlay ($tag), running sandbox, before copy-up"
	q_run "ovl-$tag"
	run_as "$USR" sh -c 'chmod 0640 "$1/secret" && printf "%s\n" more >>"$1/wsecret" && chmod 0640 "$1/lsecret"' sh "$o"
	okl "overlay ($tag): chmod and append from outside copy the files up" \
		'$(why); upper: $(ls "$ub/upper" | tr "\n" " ")' \
		test "$RC" -eq 0 -a -e "$ub/upper/secret" -a -e "$ub/upper/wsecret"
	note "overlay ($tag) after copy-up: overlay secret st_dev:ino $(stat -c '%Hd:%Ld:%i' "$o/secret"), upper $(stat -c '%Hd:%Ld:%i' "$ub/upper/secret"), lower $(stat -c '%Hd:%Ld:%i' "$l/secret"); mountinfo upper $(majmin "$ub/upper")"
	q_denied "$o/secret" "$(sec "ovl-$tag")" "overlay ($tag), running sandbox: still denied after a copy-up by chmod"
	q_denied "$o/wsecret" "$(sec "ovlw-$tag")" "overlay ($tag), running sandbox: still denied after a copy-up by a write"
	q_read "$o/ctl" "$(ctl "ovl-$tag")" "overlay ($tag), running sandbox: the control file is readable"
	# the lower-listed file after its copy-up: the overlay now shows a copy in
	# the upper layer; what happens is recorded, not asserted
	q_probe "$o/lsecret" "$(sec "ovll-$tag")" "overlay ($tag), running sandbox: lower-listed lsecret after its copy-up"
	q_run "ovl-$tag"
	srv_stop "ovl-$tag"

	q_denied "$o/secret" "$(sec "ovl-$tag")" "overlay ($tag), new launch: denied after a copy-up by chmod"
	q_denied "$o/wsecret" "$(sec "ovlw-$tag")" "overlay ($tag), new launch: denied after a copy-up by a write"
	q_read "$o/ctl" "$(ctl "ovl-$tag")" "overlay ($tag), new launch: the control file is readable"
	q_denied "$l/lsecret" "$(sec "ovll-$tag")" "overlay ($tag), new launch: the lower-layer file itself stays denied"
	q_probe "$o/lsecret" "$(sec "ovll-$tag")" "overlay ($tag), new launch: lower-listed lsecret after its copy-up"
	q_run new
}

check_overlay_samefs() {
	if ! need_ext4; then
		fail "overlay (same fs): setup" "no ext4"
		return
	fi
	overlay_case samefs "$E/ovl-samefs/lower" "$E/ovl-samefs"
}

check_overlay_crossfs() {
	local lm=$W/mnt/ovl-lower-tmpfs
	if ! need_ext4 || ! mnt "$lm" -t tmpfs -o size=8m,mode=0755 asx-ovl-lower; then
		fail "overlay (lower tmpfs, upper ext4): setup" "see stderr"
		return
	fi
	overlay_case crossfs "$lm/lower" "$E/ovl-crossfs"
}

# Files that change under a running sandbox.  Listed: sedf, atomf, recf and latef
# (which does not exist at launch; its directory does).
check_replace_running() {
	local d kind f ino0 ino1 listed_inos
	if ! command -v python3 >/dev/null; then
		skip "replace_running: python3 not installed"
		return
	fi
	if ! need_ext4; then
		fail "replace_running: setup" "no ext4"
		return
	fi
	d=$E/repl
	if ! udir "$d" || ! put "$d/sedf" 0600 "$(sec sed)" ||
		! put "$d/atomf" 0600 "$(sec atomic)" || ! put "$d/recf" 0600 "$(sec recreate)" ||
		! put "$d/ctl" 0600 "$(ctl repl)"; then
		fail "replace_running: setup" "see stderr"
		return
	fi
	set_list "$d/sedf" "$d/atomf" "$d/recf" "$d/latef"
	listed_inos="$(ino "$d/sedf") $(ino "$d/atomf") $(ino "$d/recf")"
	note "listed inode numbers at launch: $listed_inos"
	if ! srv_start repl; then
		fail "replace_running: a running sandbox starts" "see stderr"
		return
	fi
	note "launch warnings: $(snip "$T/srv-repl.err")"
	for kind in sed atomic recreate late; do
		case $kind in
		sed) f=$d/sedf ;; atomic) f=$d/atomf ;; recreate) f=$d/recf ;; late) f=$d/latef ;;
		esac
		ino0=$(ino "$f")
		if [ "$kind" = late ]; then
			storm "running sandbox: a tight open loop never opens a listed file created after launch and recreated $REPLACEMENTS times" \
				repl recreate "$f" "$(sec late)" "$listed_inos"
		else
			storm "running sandbox: a tight open loop never opens the listed file during $REPLACEMENTS changes ($kind)" \
				repl "$kind" "$f" "$(sec "$kind")" "$listed_inos"
		fi
		ino1=$(ino "$f")
		ok "$kind: after the changes the file's inode number is none listed at launch" \
			"${ino0:-none} at launch, now $ino1; listed: $listed_inos" listed_not "$ino1" "$listed_inos"
		q_denied "$f" "$(sec "$kind")" "running sandbox, after the $kind changes"
		q_read "$d/ctl" "$(ctl repl)" "running sandbox, after the $kind changes: the control file is readable"
		q_run repl
	done
	srv_stop repl
	for kind in sed atomic recreate late; do
		case $kind in
		sed) f=$d/sedf ;; atomic) f=$d/atomf ;; recreate) f=$d/recf ;; late) f=$d/latef ;;
		esac
		q_denied "$f" "$(sec "$kind")" "new launch, after the $kind changes"
	done
	q_read "$d/ctl" "$(ctl repl)" "new launch: the control file is readable"
	q_run new
}

# link(2) and rename(2) of a listed file from inside.  Listed: lk, and lr, which
# is replaced (atomic save) under the running sandbox.
check_link_rename() {
	local d t
	if ! need_ext4; then
		fail "link_rename: setup" "no ext4"
		return
	fi
	d=$E/lnk t=$E/lnk-to
	# restore: undo what a successful ln or mv did, as the user
	restore() {
		rm -f "$t"/x*
		local y
		for y in "$t"/y*; do
			[ -e "$y" ] || continue
			case ${y##*/} in y-lk*) run_as "$USR" mv "$y" "$d/lk" ;; y-lr*) run_as "$USR" mv "$y" "$d/lr" ;; esac
		done
	}
	if ! udir "$d" "$t" || ! put "$d/lk" 0600 "$(sec lk)" ||
		! put "$d/lr" 0600 "$(sec lr)" || ! put "$d/ctl" 0600 "$(ctl lnk)"; then
		fail "link_rename: setup" "see stderr"
		return
	fi
	set_list "$d/lk" "$d/lr"
	q_eperm ln "$d/lk" "$t/x-lk1" "new launch: ln LISTED other-name fails with EPERM"
	q_hidden "$t/x-lk1" "$(sec lk)" "new launch: the listed content is not readable through the new link"
	q_eperm mv "$d/lk" "$t/y-lk1" "new launch: mv LISTED other-dir/name fails with EPERM"
	q_hidden "$t/y-lk1" "$(sec lk)" "new launch: the listed content is not readable under the new name"
	q_denied "$d/lk" "$(sec lk)" "new launch: the listed file is still in place after ln/mv"
	q_run new
	restore

	if ! srv_start lnk; then
		fail "link_rename: a running sandbox starts" "see stderr"
		return
	fi
	run_as "$USR" sh -c 'printf "%s\n" "$2" >"$1/.asx-tmp" && mv -f "$1/.asx-tmp" "$1/lr"' sh "$d" "$(sec lr)-new"
	ok "link_rename: lr replaced outside (atomic save)" "$(why)" test "$RC" -eq 0
	q_eperm ln "$d/lr" "$t/x-lr2" "running sandbox: ln of a listed file replaced after launch fails with EPERM"
	q_hidden "$t/x-lr2" "$(sec lr)" "running sandbox: the replaced listed file is not readable through a new link"
	q_eperm mv "$d/lr" "$t/y-lr2" "running sandbox: mv of a listed file replaced after launch fails with EPERM"
	q_hidden "$t/y-lr2" "$(sec lr)" "running sandbox: the replaced listed file is not readable under a new name"
	q_denied "$d/lr" "$(sec lr)" "running sandbox: the replaced listed file is still in place and denied"
	q_eperm ln "$d/lk" "$t/x-lk3" "running sandbox: ln LISTED other-name fails with EPERM"
	q_eperm mv "$d/lk" "$t/y-lk3" "running sandbox: mv LISTED other-dir/name fails with EPERM"
	q_hidden "$t/x-lk3" "$(sec lk)" "running sandbox: the listed content is not readable through the new link"
	q_hidden "$t/y-lk3" "$(sec lk)" "running sandbox: the listed content is not readable under the new name"
	q_read "$d/ctl" "$(ctl lnk)" "running sandbox: the control file is readable"
	q_run lnk
	srv_stop lnk
	restore
}

# What an agent could do to a listed name or its bytes without opening the
# listed file: plant its own inode at a listed name (so a later in-place write
# by the user lands in a file it can read), look at a replaced file through an
# overlay it mounts in a user namespace, snapshot a btrfs subvolume it owns.
check_agent_tricks() {
	local d t img dev m=$W/mnt/trkb
	if ! need_ext4; then
		fail "agent_tricks: setup" "no ext4"
		return
	fi
	d=$E/trk t=$E/trk-own
	if ! udir "$d" "$t" "$d-empty" "$d-mnt" || ! put "$d/victim" 0600 "$(sec victim)" ||
		! put "$t/own" 0600 "own" || ! put "$d/ctl" 0600 "$(ctl trk)"; then
		fail "agent_tricks: setup" "see stderr"
		return
	fi
	set_list "$d/victim" "$d/late"
	q_eperm ln "$t/own" "$d/late" "inside: ln of the agent's file to a listed (missing) name fails with EPERM"
	q_eperm symlink "$t/own" "$d/late" "inside: a symlink at a listed name fails with EPERM"
	q_eperm create "$d/late" - "inside: creating a file at a listed name fails with EPERM"
	q_eperm tmplink "$d" "$d/late" "inside: O_TMPFILE + linkat to a listed name fails with EPERM"
	q_eperm rm "$d/victim" - "inside: deleting a listed file fails with EPERM"
	q_eperm mv "$t/own" "$d/victim" "inside: renaming the agent's file over a listed file fails with EPERM"
	q_denied "$d/victim" "$(sec victim)" "inside: the listed file is untouched"
	q_read "$d/ctl" "$(ctl trk)" "inside: the control file is readable"
	q_run new
	ok "agent_tricks: no file appeared at the listed missing name" "$(find "$d" -maxdepth 1 -printf '%f ' 2>&1)" \
		test ! -e "$d/late" -a ! -L "$d/late"

	# An overlay mounted in a user namespace over the directory of a file
	# replaced after launch: the backing file's name is checked too.
	run_as "$USR" unshare -Urm true
	if [ "$RC" -ne 0 ]; then
		fail "agent_tricks: unprivileged user namespaces work in this guest (needed for the overlay case)" "$(why)"
	elif ! srv_start trk; then
		fail "agent_tricks: a running sandbox starts" "see stderr"
	else
		run_as "$USR" sh -c 'printf "%s\n" "$2" >"$1/.asx-tmp" && mv -f "$1/.asx-tmp" "$1/victim"' sh "$d" "$(sec victim)-new"
		ok "agent_tricks: victim replaced outside (atomic save)" "$(why)" test "$RC" -eq 0
		q_hidden "$d/victim" "$(sec victim)" "running sandbox: the replaced file is denied by name"
		q_op ovl "$d" victim
		q_expect hidden "$(sec victim)" "running sandbox: the replaced file read through an overlay mounted in a user namespace shows nothing"
		q_run trk
		srv_stop trk
	fi

	# A btrfs subvolume the user owns: a snapshot would copy the listed file.
	if ! { img=$(image trkb 256M) && loop_any "$img" && dev=$LOOPDEV &&
		mkfs.btrfs -q -f "$dev" >/dev/null 2>&1 && mnt "$m" "$dev" &&
		btrfs -q subvolume create "$m/sub" >/dev/null && chown "$USR:$USR" "$m/sub" &&
		put "$m/sub/secret" 0600 "$(sec trkb)"; }; then
		fail "agent_tricks: btrfs setup" "see stderr"
		return
	fi
	set_list "$m/sub/secret"
	q_eperm snapshot "$m/sub" "$m/sub/snap" "inside: a snapshot of a btrfs subvolume the user owns fails with EPERM"
	q_hidden "$m/sub/snap/secret" "$(sec trkb)" "inside: no snapshot copy of the listed file is readable"
	q_run new
	run_as "$USR" btrfs subvolume snapshot "$m/sub" "$m/sub/snap-outside"
	ok "agent_tricks: the same snapshot works outside the sandbox (the check above can fail)" "$(why)" test "$RC" -eq 0
}

# A 32-bit process: its ioctls enter through compat_sys_ioctl(), which calls
# security_file_ioctl_compat() and not security_file_ioctl() (since "lsm: new
# security_file_ioctl_compat() hook"), so lsm/file_ioctl alone would not see
# its btrfs snapshot of a subvolume the user owns.
check_compat_ioctl() {
	local img dev m=$W/mnt/c32
	if ! command -v asx-ioctl32 >/dev/null; then
		fail "compat_ioctl: the 32-bit helper asx-ioctl32 is in the guest" "not in PATH; build it with 'make guest-tools'"
		return
	fi
	run_as "$USR" asx-ioctl32
	ok "compat_ioctl: the guest runs the static 32-bit helper (usage, exit 2)" "$(why)" test "$RC" -eq 2
	if ! { img=$(image c32 256M) && loop_any "$img" && dev=$LOOPDEV &&
		mkfs.btrfs -q -f "$dev" >/dev/null 2>&1 && mnt "$m" "$dev" &&
		btrfs -q subvolume create "$m/sub" >/dev/null && chown "$USR:$USR" "$m/sub" &&
		put "$m/sub/secret" 0600 "$(sec c32)"; }; then
		fail "compat_ioctl: btrfs setup" "see stderr"
		return
	fi
	set_list "$m/sub/secret"
	q_eperm snap32 "$m/sub" "$m/sub/snap32" "inside, 32-bit: BTRFS_IOC_SNAP_CREATE_V2 of a subvolume the user owns fails with EPERM"
	q_hidden "$m/sub/snap32/secret" "$(sec c32)" "inside, 32-bit: no snapshot copy of the listed file is readable"
	q_run new
	ok "compat_ioctl: no snapshot was made inside" "$(find "$m/sub" -mindepth 1 -maxdepth 1 -printf '%f ' 2>&1)" test ! -e "$m/sub/snap32"
	run_as "$USR" asx-ioctl32 snap "$m/sub" "$m/sub" snap32-outside
	ok "compat_ioctl: the same 32-bit snapshot works outside the sandbox (the check above can fail)" "$(why)" test "$RC" -eq 0
}

# Directories at or on the way to a listed name: the name watch is keyed on
# the directory a listed path leads to at launch, so from inside, no mkdir at
# a listed name (the user's later cp would land inside the agent's
# directory), and no rmdir, rename or replacement of a directory or symlink on
# the way (the user's later write would land in a directory nothing watches).
check_path_dirs() {
	local h
	if ! need_ext4; then
		fail "path_dirs: setup" "no ext4"
		return
	fi
	h=$E/pd/home
	if ! { udir "$E/pd" "$h" "$h/.aws" "$h/.config" "$h/.config/gh" "$h/free" "$UH/pd-src" &&
		put "$h/.config/gh/hosts.yml" 0600 "$(sec pd-gh)" && ln -s .config "$h/cfg" &&
		chown -h "$USR:$USR" "$h/cfg" && put "$h/ctl" 0600 "$(ctl pd)" &&
		put "$UH/pd-src/credentials" 0600 "$(sec pd-aws)"; }; then
		fail "path_dirs: setup" "see stderr"
		return
	fi
	set_list "$h/.aws/credentials" "$h/cfg/gh/token" "$h/.config/gh/hosts.yml"
	if ! srv_start pd; then
		fail "path_dirs: a running sandbox starts" "see stderr"
		return
	fi
	q_eperm mkdir "$h/.aws/credentials" - "inside: mkdir at a listed (missing) name fails with EPERM"
	q_eperm rmdir "$h/.aws" - "inside: rmdir of the empty directory holding a listed name fails with EPERM"
	q_eperm mv "$h/.config" "$h/.c" "inside: renaming a directory two levels above a listed name fails with EPERM"
	q_op mkdir "$h/.config" # in the old code's world: mkdir -p ~/.config/gh after the mv
	q_op mkdir "$h/.config/gh"
	q_eperm mv "$h" "$E/pd/home2" "inside: renaming an ancestor further up fails with EPERM"
	q_eperm rm "$h/cfg" - "inside: removing a symlink on the way to a listed name fails with EPERM"
	q_op mkdir "$h/cfg" # in the old code's world: a directory in the symlink's place
	q_op mkdir "$h/cfg/gh"
	q_eperm mv "$h/cfg" "$h/cfg2" "inside: renaming that symlink fails with EPERM"
	q_ok mkdir "$h/new" - "inside: mkdir of an unlisted directory works"
	q_eperm rename "$h/new" "$h/.aws" "inside: renaming a directory over the empty directory of a listed name fails with EPERM"
	q_ok rmdir "$h/free" - "inside: rmdir of a directory on no listed path works"
	q_ok rmdir "$h/new" - "inside: rmdir of the directory it made works"
	q_denied "$h/.config/gh/hosts.yml" "$(sec pd-gh)" "inside: the listed file is denied"
	q_read "$h/ctl" "$(ctl pd)" "inside: the control file is readable"
	q_run pd
	ok "path_dirs: the directories and the symlink on the way are where they were" \
		"$(find "$h" -mindepth 1 -maxdepth 1 -printf '%f:%y ' 2>&1)" \
		test -d "$h/.aws" -a ! -e "$h/.aws/credentials" -a -L "$h/cfg" -a -e "$h/.config/gh/hosts.yml"
	# The user's later writes, outside: a cp to the missing listed name, an
	# atomic save of the listed file, a new file at a name listed through the symlink.
	run_as "$USR" cp "$UH/pd-src/credentials" "$h/.aws/credentials"
	ok "path_dirs: the user's cp to the listed path works outside" "$(why)" test "$RC" -eq 0
	run_as "$USR" sh -c 'printf "%s\n" "$2" >"$1.tmp" && mv -f "$1.tmp" "$1"' sh "$h/.config/gh/hosts.yml" "$(sec pd-gh2)"
	ok "path_dirs: the user's atomic save of the listed file works outside" "$(why)" test "$RC" -eq 0
	run_as "$USR" sh -c 'printf "%s\n" "$2" >"$1"' sh "$h/cfg/gh/token" "$(sec pd-tok)"
	ok "path_dirs: the user's write through the symlink works outside" "$(why)" test "$RC" -eq 0
	q_denied "$h/.aws/credentials" "$(sec pd-aws)" "running sandbox: the user's later cp to the listed path is denied"
	q_hidden "$h/.aws/credentials/credentials" "$(sec pd-aws)" "running sandbox: no copy landed in a directory the agent made"
	q_denied "$h/.config/gh/hosts.yml" "$(sec pd-gh2)" "running sandbox: the user's atomic save of the listed file is denied"
	q_hidden "$h/.c/gh/hosts.yml" "$(sec pd-gh2)" "running sandbox: nothing of it under the old directory's new name"
	q_denied "$h/cfg/gh/token" "$(sec pd-tok)" "running sandbox: the user's new file at the name listed through the symlink is denied"
	q_run pd
	srv_stop pd
}

# Case-insensitive directories: ext4 casefold (chattr +F) and XFS ASCII-ci.
# One name has many spellings there and the hook compares bytes, so in such a
# directory holding a listed name a sandbox may create, link, rename to and
# open nothing; chattr +F is refused inside (an owner may set it on an empty
# directory after launch).
check_casefold() {
	local img m=$W/mnt/cf x=$W/mnt/xci ci
	ci=$m/ci
	if ! { img=$(image cf 64M) && loop_any "$img" &&
		mkfs.ext4 -q -F -O casefold "$LOOPDEV" >/dev/null 2>&1 && mnt "$m" "$LOOPDEV" &&
		udir "$ci" "$m/ci2" "$m/plain" "$m/plain/empty" "$m/plain/empty32" "$m/own" &&
		chattr +F "$ci" "$m/ci2" && put "$ci/ctl" 0600 "$(ctl cf)" &&
		put "$m/ci2/ctl" 0600 "$(ctl cf2)" && put "$m/plain/ctl" 0600 "$(ctl cfp)" &&
		put "$m/own/f" 0600 own; }; then
		fail "casefold: ext4 casefold setup" "see stderr"
		return
	fi
	set_list "$ci/token" "$ci/Mixed" "$m/plain/missing"
	run_in "$USR" true
	okl "casefold: the launch warns that the name watch in a case-insensitive directory is by refusal" \
		'$(why)' has "case-insensitive" "$ERR"
	if ! srv_start cf; then
		fail "casefold: a running sandbox starts" "see stderr"
		return
	fi
	q_eperm create "$ci/TOKEN" - "inside: creating TOKEN where token is listed (casefold directory) fails with EPERM"
	q_eperm mkdir "$ci/ToKeN" - "inside: mkdir ToKeN there fails with EPERM"
	q_eperm ln "$m/own/f" "$ci/TOKEN" "inside: a hardlink as TOKEN there fails with EPERM"
	q_eperm mv "$m/own/f" "$ci/Token" "inside: renaming a file to Token there fails with EPERM"
	q_eperm symlink "$m/own/f" "$ci/tOKEN" "inside: a symlink tOKEN there fails with EPERM"
	q_eperm cat "$ci/ctl" - "inside: opening any file in a casefold directory holding a listed name fails with EPERM"
	q_read "$m/ci2/ctl" "$(ctl cf2)" "inside: a file in a casefold directory without a listed name is readable"
	q_read "$m/plain/ctl" "$(ctl cfp)" "inside: a file in a case-sensitive directory of the same filesystem is readable"
	q_eperm chattr "$m/plain/empty" - "inside: chattr +F of an empty directory fails with EPERM"
	q_eperm casefold32 "$m/plain/empty32" - "inside, 32-bit: FS_IOC32_SETFLAGS casefold of an empty directory fails with EPERM"
	q_run cf
	ok "casefold: no other spelling of the listed name appeared" "$(find "$ci" -mindepth 1 -printf '%f ' 2>&1)" \
		test "$(find "$ci" -mindepth 1 -printf '%f\n' | sort | tr '\n' ' ')" = "ctl "
	ok "casefold: the directories stayed case-sensitive" "$(lsattr -d "$m/plain/empty" "$m/plain/empty32" 2>&1)" \
		eval '! lsattr -d "$m/plain/empty" "$m/plain/empty32" 2>/dev/null | awk "{ print \$1 }" | grep -q F'
	# The user creates the listed files after launch, one spelled otherwise
	# than in the list; dropping the dentry cache makes the next lookup spell
	# a name as it is asked for.
	run_as "$USR" sh -c 'printf "%s\n" "$2" >"$1/token" && printf "%s\n" "$3" >"$1/mixed"' sh "$ci" "$(sec cf-token)" "$(sec cf-mixed)"
	ok "casefold: the user creates token and mixed outside" "$(why)" test "$RC" -eq 0
	sync
	echo 2 >/proc/sys/vm/drop_caches
	q_hidden "$ci/TOKEN" "$(sec cf-token)" "running sandbox: the listed file created after launch, opened as TOKEN after a dentry cache drop, shows nothing"
	q_hidden "$ci/mixed" "$(sec cf-mixed)" "running sandbox: a listed file created after launch as mixed (listed as Mixed) shows nothing"
	q_hidden "$ci/MIXED" "$(sec cf-mixed)" "running sandbox: nor as MIXED"
	q_run cf
	srv_stop cf

	# XFS in ASCII-ci mode: every directory compares names without case. Kernels built
	# without CONFIG_XFS_SUPPORT_ASCII_CI (deprecated since 6.2; Debian's 7.x) refuse to
	# mount such a filesystem, so there is no case-insensitive XFS directory to get around.
	local xfs_log
	if ! { img=$(image xci 320M) && loop_any "$img" &&
		mkfs.xfs -q -f -n version=ci "$LOOPDEV" >/dev/null 2>&1; }; then
		fail "casefold: xfs ASCII-ci setup (mkfs)" "see stderr"
		return
	fi
	if ! mnt "$x" "$LOOPDEV"; then
		xfs_log=$(dmesg | tail -n 20 | grep -i 'ascii' | tail -n 1)
		if [ -n "$xfs_log" ]; then
			skip "casefold: XFS ASCII-ci: kernel $(uname -r) refuses to mount it (${xfs_log#*] }); no such directory can exist here"
		else
			fail "casefold: xfs ASCII-ci setup (mount)" "$(dmesg | tail -n 3 | tr '\n' '|')"
		fi
		return
	fi
	if ! { udir "$x/d" "$x/other" && put "$x/other/ctl" 0600 "$(ctl xci)"; }; then
		fail "casefold: xfs ASCII-ci setup" "see stderr"
		return
	fi
	set_list "$x/d/token"
	run_in "$USR" true
	okl "casefold: the launch warns about the XFS ASCII-ci directory" '$(why)' has "case-insensitive" "$ERR"
	q_eperm create "$x/d/TOKEN" - "inside: creating TOKEN where token is listed (XFS ASCII-ci) fails with EPERM"
	q_read "$x/other/ctl" "$(ctl xci)" "inside: a file in another directory of that XFS is readable"
	q_run new
	ok "casefold: no TOKEN appeared on the XFS" "$(find "$x/d" -mindepth 1 -printf '%f ' 2>&1)" test ! -e "$x/d/TOKEN"
}

# fresh_ext4 NAME MOUNTPOINT CHECK: a new small ext4 (it hands a freed inode number out again
# at once) mounted on MOUNTPOINT; else a FAIL line "CHECK: setup" and status 1
fresh_ext4() {
	local img
	if ! { img=$(image "$1" 16M) && loop_any "$img" &&
		mkfs.ext4 -q -F "$LOOPDEV" >/dev/null 2>&1 && mnt "$2" "$LOOPDEV"; }; then
		fail "$3: setup" "see stderr"
		return 1
	fi
}

# Freed inodes, on a fresh small ext4.
check_freed_inodes() {
	local m=$W/mnt/fresh d ino1 found
	fresh_ext4 fresh "$m" freed_inodes || return
	d=$m/d
	if ! { udir "$d" && put "$d/ctl" 0600 "$(ctl fresh)" && put "$d/f1" 0600 "$(sec f1)" &&
		put "$d/f2" 0600 "$(sec f2)"; }; then
		fail "freed_inodes: setup" "files"
		return
	fi
	run_as "$USR" ln "$d/f2" "$d/f2-other"
	ok "freed_inodes: a hardlink f2-other made outside before the launch" "$(why)" test "$RC" -eq 0
	set_list "$d/f1" "$d/f2"
	if ! srv_start fresh; then
		fail "freed_inodes: a running sandbox starts" "see stderr"
		return
	fi
	q_denied "$d/f1" "$(sec f1)" "freed_inodes: running sandbox, f1 before its deletion"
	q_denied "$d/f2-other" "$(sec f2)" "freed_inodes: running sandbox, f2's other name before f2's deletion"
	q_run fresh
	ino1=$(ino "$d/f1")
	run_as "$USR" sh -c 'rm "$1/f1" || exit 2; i=1
while [ "$i" -le "$4" ]; do
	printf "%s\n" "asx-fresh-$i-$2" >"$1/new-$i" || exit 2
	if [ "$(stat -c %i "$1/new-$i")" = "$3" ]; then echo "$i"; exit 0; fi
	i=$((i + 1))
done
exit 1' sh "$d" "$TOK" "$ino1" "$REUSE_TRIES"
	found=$(cat "$OUT")
	okl "freed_inodes: after rm f1 a new file reuses its inode number $ino1" \
		'$(why); inodes now: $(ls -i "$d" | tr "\n" " ")' test "$RC" -eq 0 -a -n "$found"
	if [ -n "$found" ] && [ "$RC" -eq 0 ]; then
		note "freed_inodes: new-$found got inode $ino1 (f1's)"
		q_read "$d/new-$found" "asx-fresh-$found-$TOK" \
			"running sandbox: an unrelated new file reusing a deleted listed file's inode number is readable"
	fi
	run_as "$USR" rm "$d/f2"
	ok "freed_inodes: rm f2 (f2-other keeps the inode)" "$(why)" test "$RC" -eq 0 -a -e "$d/f2-other"
	q_denied "$d/f2-other" "$(sec f2)" "running sandbox: a listed inode that keeps another name stays denied after rm of the listed name"
	q_read "$d/ctl" "$(ctl fresh)" "freed_inodes: running sandbox, the control file is readable"
	q_run fresh
	srv_stop fresh
}

# The kernel drops a deny_map key when its inode is freed (lsm/inode_free_security) and
# counts the drop; the daemon then writes every key of a sandbox again at its next apply,
# once per sandbox: an apply for another user's sandbox in between must not use it up.
check_drop_rewrite() {
	local m=$W/mnt/drop d y found
	fresh_ext4 drop "$m" drop_rewrite || return
	d=$m/d
	if ! { udir "$d" && put "$d/f" 0600 "$(sec drop-old)" && put "$d/ctl" 0600 "$(ctl drop)"; }; then
		fail "drop_rewrite: setup" "files"
		return
	fi
	set_list "$d/f"
	run_in "$USR" true
	ok "drop_rewrite: a launch with $d/f listed" "$(why)" test "$RC" -eq 0
	y=$(ino "$d/f")
	run_as "$USR" rm "$d/f"
	ok "drop_rewrite: rm of the listed file (its inode $y is freed, its key dropped)" "$(why)" test "$RC" -eq 0
	run_in "$USR2" true
	ok "drop_rewrite: a launch of another user ($USR2) in between" "$(why)" test "$RC" -eq 0
	run_as "$USR" sh -c 'i=1
while [ "$i" -le "$4" ]; do
	printf "%s\n" "$2" >"$1/new-$i" || exit 2
	if [ "$(stat -c %i "$1/new-$i")" = "$3" ]; then
		mv "$1/new-$i" "$1/f" && ln "$1/f" "$1/alias" && exit 0
		exit 2
	fi
	i=$((i + 1))
done
exit 1' sh "$d" "$(sec drop-new)" "$y" "$REUSE_TRIES"
	found=$RC
	okl "drop_rewrite: a new file with inode $y put at the listed path, with a second name alias" \
		'$(why); inodes now: $(ls -i "$d" | tr "\n" " ")' test "$found" -eq 0
	[ "$found" -eq 0 ] || return
	run_in "$USR" cat "$d/alias"
	okl "drop_rewrite: next launch: the listed inode under another name is denied (EPERM)" \
		'$(why)' eval '[ "$RC" -ne 0 ] && has "$EPERM_MSG" "$ERR" && ! has "$(sec drop-new)" "$OUT"'
	run_in "$USR" cat "$d/ctl"
	ok "drop_rewrite: the control file is readable" "$(why)" has "$(ctl drop)" "$OUT"
}

check_missing_parent() {
	local p=$W/asx-no-such-dir/secret l
	set_list "$p"
	run_in "$USR" true
	okl "a listed path whose directory does not exist: the launch works (exit 0)" '$(why)' test "$RC" -eq 0
	note "launch stderr for $p:"
	while IFS= read -r l; do note "  $l"; done <"$ERR"
}

check_mount_reuse() {
	local m=$W/mnt/reuse id1 id2 dev1 dev2 img
	fresh_ext4 reuse1 "$m" mount_reuse || return
	pair "$m/d" reuse1 || { fail "mount_reuse: setup" "files"; return; }
	set_list "$m/d/secret"
	q_denied "$m/d/secret" "$(sec reuse1)" "mount_reuse: the first file system"
	q_run new
	id1=$(findmnt -n -o ID -M "$m") dev1=$(majmin "$m")
	# The user's resolver waits for its next launch: it must hold nothing open there.
	umount "$m" 2>"$T/umount.err"
	ok "mount_reuse: the file system unmounts right after a launch" "$(snip "$T/umount.err")" \
		eval '! mountpoint -q "$m"'
	mountpoint -q "$m" && return
	# The same place, another file system (mount() directly: $m is already
	# in MOUNTS); a mount id is freed an RCU grace period after the unmount.
	if ! { sleep 1 && img=$(image reuse2 16M) && loop_any "$img" &&
		mkfs.ext4 -q -F "$LOOPDEV" >/dev/null 2>&1 && mount "$LOOPDEV" "$m" &&
		pair "$m/d" reuse2; }; then
		fail "mount_reuse: the second file system" "see stderr"
		return
	fi
	id2=$(findmnt -n -o ID -M "$m") dev2=$(majmin "$m")
	note "mount_reuse: mount id $id1 -> $id2, device $dev1 -> $dev2"
	ok "mount_reuse: the new mount has another device" "$dev1 -> $dev2" test "$dev1" != "$dev2"
	q_denied "$m/d/secret" "$(sec reuse2)" "mount_reuse: the second file system, same path"
	q_run new
}

check_answer_reuse() {
	local r=$W/reuse
	if ! { udir "$r" "$r/m" && pair "$r/a" reuse-a && pair "$r/b" reuse-b; }; then
		fail "answer_reuse: setup" "files"
		return
	fi
	# $r/l1 -> m/l2 -> $r/a: the listed path goes through $r/m, which it does not name.
	run_as "$USR" sh -c 'ln -s "$1/a" "$1/m/l2" && ln -s m/l2 "$1/l1"' sh "$r"
	ok "answer_reuse: the symlinks l1 -> m/l2 -> a" "$(why)" test "$RC" -eq 0
	set_list "$r/l1/secret"
	run_in "$USR" true
	run_in "$USR" cat "$r/l1/secret"
	okl "answer_reuse: a relaunch with nothing changed denies the listed file" '$(why)' \
		eval '[ "$RC" -ne 0 ] && has "$EPERM_MSG" "$ERR" && ! has "$(sec reuse-a)" "$OUT"'
	# From inside, a symlink on the way to a listed name stays (path_dirs); the user may
	# re-point it outside.
	run_in "$USR" ln -sfn "$r/b" "$r/m/l2"
	okl "answer_reuse: inside: re-pointing the middle symlink fails with EPERM" '$(why)' \
		eval '[ "$RC" -ne 0 ] && has "$EPERM_MSG" "$ERR" && [ "$(readlink "$r/m/l2")" = "$r/a" ]'
	run_as "$USR" ln -sfn "$r/b" "$r/m/l2"
	ok "answer_reuse: outside: the middle symlink pointed at another directory" "$(why)" test "$RC" -eq 0
	run_in "$USR" cat "$r/l1/secret"
	okl "answer_reuse: next launch: the file the listed path now names is denied" '$(why)' \
		eval '[ "$RC" -ne 0 ] && has "$EPERM_MSG" "$ERR" && ! has "$(sec reuse-b)" "$OUT"'
	run_as "$USR" sh -c 'mv "$1/b" "$1/b.old" && mkdir "$1/b" && printf "%s\n" "$2" >"$1/b/secret"' \
		sh "$r" "$(sec reuse-new)"
	ok "answer_reuse: the listed file's directory renamed away and made again, a new file in it" \
		"$(why)" test "$RC" -eq 0
	run_in "$USR" cat "$r/b/secret"
	okl "answer_reuse: next launch: the new file is denied" '$(why)' \
		eval '[ "$RC" -ne 0 ] && has "$EPERM_MSG" "$ERR" && ! has "$(sec reuse-new)" "$OUT"'
	run_in "$USR" cat "$r/a/ctl"
	ok "answer_reuse: the control file is readable" "$(why)" has "$(ctl reuse-a)" "$OUT"
	# Permissions are not watched (src/resolve/watch.rs: IN_ATTRIB would slow every open in the
	# directory): the last answer still denies what the list names.
	chmod 0600 "$r/m"
	run_in "$USR" cat "$r/b/secret"
	okl "answer_reuse: a directory on the path made unsearchable, nothing else: the listed file stays denied" \
		'$(why)' eval '[ "$RC" -ne 0 ] && has "$EPERM_MSG" "$ERR" && ! has "$(sec reuse-new)" "$OUT"'
	touch "$r/m/entry"
	run_in "$USR" true
	okl "answer_reuse: an entry made there too: the next launch resolves again and is refused" '$(why)' \
		eval '[ "$RC" -ne 0 ] && has "cannot check the path" "$ERR"'
	chmod 0755 "$r/m"
	run_in "$USR" true
	ok "answer_reuse: searchable again: the launch works" "$(why)" test "$RC" -eq 0
}

# ================================================================ setup and cleanup

preflight() {
	if [ "$(id -u)" -ne 0 ]; then
		fail "running as root" "uid $(id -u)"
		return 1
	fi
	require_commands "$LAUNCHER" runuser timeout useradd userdel mount umount losetup mknod mkfs.ext4 \
		findmnt truncate mkfifo python3 || return 1
}

setup() {
	T=$(mktemp -d /tmp/asx-fs.XXXXXX) || return 1
	OUT=$T/out ERR=$T/err
	TOK=$(od -An -N8 -tx1 /dev/urandom | tr -d ' \n')
	mkdir -p /srv && W=$(mktemp -d /srv/asx-fs.XXXXXX) && chmod 0755 "$W" &&
		mkdir -p "$W/img" "$W/mnt" || return 1
	remove_test_user "$USR" || { echo "user $USR exists and is not a test user" >&2; return 1; }
	remove_test_user "$USR2" || { echo "user $USR2 exists and is not a test user" >&2; return 1; }
	SETUP_DONE=1
	useradd -m -s /bin/sh -c "$GECOS" "$USR" || return 1
	useradd -m -s /bin/sh -c "$GECOS" "$USR2" || return 1
	USR_UID=$(id -u "$USR") UH=$(home_of "$USR")
	if [ -f "$HERE/asx-ioctl32" ]; then # from the share (make guest-tools)
		install -m 0755 "$HERE/asx-ioctl32" /usr/local/bin/asx-ioctl32 && IOCTL32_INSTALLED=1
	fi
	modprobe loop 2>/dev/null
	return 0
}

cleanup() {
	local p i n
	[ "$CLEANED" -eq 1 ] && return 0
	CLEANED=1
	for p in "${BG_PIDS[@]}"; do
		pid_gone "$p" || kill "$p" 2>/dev/null
	done
	for p in "${BG_PIDS[@]}"; do
		stop_bg "$p"
	done
	[ "$SETUP_DONE" -eq 1 ] || return 0
	if [ "${ASX_FS_KEEP:-0}" = 1 ]; then
		printf 'kept: users %s %s, %s (mounts), %s\n' "$USR" "$USR2" "$W" "$T" >&2
		return 0
	fi
	kill_user_procs "$USR"
	kill_user_procs "$USR2"
	for ((i = ${#MOUNTS[@]} - 1; i >= 0; i--)); do
		umount "${MOUNTS[i]}" 2>/dev/null || umount -l "${MOUNTS[i]}" 2>/dev/null ||
			echo "cleanup: cannot unmount ${MOUNTS[i]}" >&2
	done
	for p in "${LOOPS[@]}"; do
		losetup -d "$p" 2>/dev/null
	done
	for n in "${LOOP_NUMS[@]}"; do # remove the devices we had the kernel add
		python3 -c 'import fcntl, os, sys
fd = os.open("/dev/loop-control", os.O_RDWR)
fcntl.ioctl(fd, 0x4C81, int(sys.argv[1]))  # LOOP_CTL_REMOVE' "$n" 2>/dev/null
	done
	for p in "${NODES[@]}"; do
		rm -f "$p"
	done
	remove_test_user "$USR"
	remove_test_user "$USR2"
	[ "$IOCTL32_INSTALLED" = 1 ] && rm -f /usr/local/bin/asx-ioctl32
	[ -n "$W" ] && rm -rf "$W"
	[ -n "$T" ] && rm -rf "$T"
	return 0
}

# listed_not WORD LIST: WORD is not empty and not one of LIST
listed_not() { [ -n "$1" ] && ! listed "$1" "$2"; }

run_suite "setup (test user, directories)"
