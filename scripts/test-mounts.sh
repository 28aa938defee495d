#!/bin/bash
# shellcheck disable=SC2016,SC2317,SC2034,SC2088,SC2015
# (SC2016: the single-quoted sh -c programs expand their own variables; SC2317: the check_* functions
#  are called through run_check; SC2034: test-lib.sh reads the counters; SC2088: ~ is list text;
#  SC2015: A && B || fail reports a failure of any step)
#
# scripts/test-mounts.sh - filesystems mounted below a directory entry, cloned
# by the agent in a user namespace (GitHub issue 16, docs/BYPASS_CATALOG.md
# "A filesystem below a directory entry, bind-mounted again by the agent").
#
# Run as root in a throwaway guest where the package is installed and the
# daemon runs (the QEMU guest of `make vm-test`). Root mounts a tmpfs at
# ~/.ssh/keys and bind-mounts /srv/asx-keys at ~/.ssh/bound; the test user's
# list is `~/.ssh/`; inside the sandbox the agent runs `unshare -Urm` and
# bind-mounts those filesystems elsewhere (a clone whose mount point is not
# below ~/.ssh).
#
# Checks (in this order; names for ASX_MOUNTS_ONLY / ASX_MOUNTS_SKIP):
#   userns        unshare -Urm works inside the sandbox (the other checks need it)
#   clone_tmpfs   a key on the tmpfs at ~/.ssh/keys: denied by its path, and through
#                 the agent's bind mount of ~/.ssh/keys in a user namespace
#   clone_bind    a key in /srv/asx-keys, bind-mounted at ~/.ssh/bound: denied through
#                 the agent's clone of ~/.ssh/bound, and by its /srv path (the bind
#                 mount puts that directory below the entry)
#   control       an unlisted tmpfs elsewhere, cloned the same way, stays readable
#   exception     a tmpfs at ~/.ssh/pubmnt with !~/.ssh/pubmnt/ stays readable
#   unreadable    a mount point below ~/.ssh that the user cannot reach: the launch
#                 warns, naming it
#   fuse_over     (issue 23) the agent's own FUSE filesystem, mounted through the setuid
#                 fusermount3 over ~/.aws (whose listed credentials does not exist yet) and
#                 over ~/.ssh/ (a directory entry), in the user's mount namespace: refused
#                 with EPERM, so the user's later write outside lands on disk, not in the
#                 agent's filesystem; the same FUSE program outside the sandbox mounts and
#                 receives such a write (the check can fail)
#   user_mount    (issue 23) a `user` bind mount of fstab through the setuid mount(8):
#                 refused inside (mount and umount), works outside; the agent's mounts in
#                 its own user namespace keep working (check userns)
#
# Output: "PASS: <what>", "FAIL: <what> (<detail>)", "SKIP: <why>", notes ("# ...");
# then a count line and "ALL PASS" (exit 0) or "<n> FAILED" (exit 1).
#
# Environment:
#   ASX_MOUNTS_ONLY="name ..."  run only these checks;  ASX_MOUNTS_SKIP="name ..."  skip these

set -u -o pipefail
umask 022
export LC_ALL=C
HERE=$(cd "$(dirname "$0")" && pwd) || exit 1
cd / || exit 1

readonly SUITE=test-mounts.sh
readonly LAUNCHER=agent-sandbox-exec
readonly USR=asx-mnts
readonly GECOS="agent-sandbox-exec mounts test user"
readonly EPERM_MSG="Operation not permitted"
readonly HOME_LIST_REL=.config/agent-sandbox-exec/denylist
readonly SRV=/srv/asx-keys
readonly OPEN=/srv/asx-open

CHECKS=(userns clone_tmpfs clone_bind control exception unreadable fuse_over user_mount)

PASS_N=0 FAIL_N=0 SKIP_N=0

# shellcheck source=scripts/test-lib.sh
. "$HERE/test-lib.sh" || exit 1
FILTER=ASX_MOUNTS # run_check: ASX_MOUNTS_ONLY / ASX_MOUNTS_SKIP choose the checks
CMD_TIMEOUT=60
T="" OUT="" ERR="" RC=0 UH="" TOK="" USERNS=0
MOUNTS=()

sec() { printf 'asx-secret-%s-%s' "$1" "$TOK"; }

# put FILE MODE TEXT: FILE (and its directories) owned by the test user
put() {
	install -d -o "$USR" -g "$USR" -m 0755 "$(dirname "$1")" && printf '%s\n' "$3" >"$1" &&
		chown "$USR:$USR" "$1" && chmod "$2" "$1"
}

# clone SRC: inside the sandbox, in a new user + mount namespace, bind-mount
# SRC at a fresh directory of the user's and cat its file `secret`
clone() {
	local dst=$T/u/x$((${#MOUNTS[@]} + RANDOM))
	run_in "$USR" sh -c 'mkdir -p "$2" && exec unshare -Urm sh -c '\''mount --bind "$1" "$2" && cat "$2/secret"'\'' sh "$1" "$2"' \
		sh "$1" "$dst"
}

# need_userns WHAT: 0 if unshare -Urm worked in check userns, else one FAIL line saying so
need_userns() {
	[ "$USERNS" = 1 ] && return 0
	fail "$1" "cannot run: unshare -Urm fails in the sandbox (see the userns check)"
	return 1
}

# ---------------------------------------------------------------- checks

check_userns() {
	set_list "~/.ssh/"
	run_in "$USR" unshare -Urm sh -c 'id -u; mount -t tmpfs none /mnt && echo mounted'
	if [ "$RC" -eq 0 ] && has mounted "$OUT"; then
		USERNS=1
		pass "userns: unshare -Urm and a mount work inside the sandbox"
	else
		fail "userns: unshare -Urm and a mount work inside the sandbox" \
			"$(why); kernel.unprivileged_userns_clone=$(sysctl -n kernel.unprivileged_userns_clone 2>&1) user.max_user_namespaces=$(sysctl -n user.max_user_namespaces 2>&1)"
	fi
}

check_clone_tmpfs() {
	mnt "$UH/.ssh/keys" -t tmpfs -o size=4m,mode=0755 asx-mnts-keys || { fail "clone_tmpfs: setup" "mount"; return; }
	put "$UH/.ssh/keys/secret" 0600 "$(sec tmpfs)"
	set_list "~/.ssh/"
	run_in "$USR" cat "$UH/.ssh/keys/secret"
	okl "clone_tmpfs: the key on the tmpfs at ~/.ssh/keys is denied by its path" 'rc=$RC out=$(snip "$OUT") err=$(snip "$ERR")' \
		eval '[ "$RC" -ne 0 ] && has "$EPERM_MSG" "$ERR" && ! has "$(sec tmpfs)" "$OUT"'
	need_userns "clone_tmpfs: through a bind mount the agent makes in a user namespace" || return
	clone "$UH/.ssh/keys"
	okl "clone_tmpfs: denied through a bind mount the agent makes in a user namespace" 'rc=$RC out=$(snip "$OUT") err=$(snip "$ERR")' \
		eval '[ "$RC" -ne 0 ] && has "$EPERM_MSG" "$ERR" && ! has "$(sec tmpfs)" "$OUT"'
}

check_clone_bind() {
	install -d -m 0755 "$SRV" && put "$SRV/secret" 0600 "$(sec bind)" &&
		mnt "$UH/.ssh/bound" --bind "$SRV" || { fail "clone_bind: setup" "bind mount"; return; }
	set_list "~/.ssh/"
	run_in "$USR" cat "$UH/.ssh/bound/secret"
	okl "clone_bind: the key of $SRV bound at ~/.ssh/bound is denied by that path" 'rc=$RC out=$(snip "$OUT") err=$(snip "$ERR")' \
		eval '[ "$RC" -ne 0 ] && has "$EPERM_MSG" "$ERR" && ! has "$(sec bind)" "$OUT"'
	run_in "$USR" cat "$SRV/secret"
	okl "clone_bind: it is denied by its $SRV path too" 'rc=$RC out=$(snip "$OUT") err=$(snip "$ERR")' \
		eval '[ "$RC" -ne 0 ] && has "$EPERM_MSG" "$ERR" && ! has "$(sec bind)" "$OUT"'
	need_userns "clone_bind: through the agent's clone of ~/.ssh/bound" || return
	clone "$UH/.ssh/bound"
	okl "clone_bind: denied through the agent's clone of ~/.ssh/bound in a user namespace" 'rc=$RC out=$(snip "$OUT") err=$(snip "$ERR")' \
		eval '[ "$RC" -ne 0 ] && has "$EPERM_MSG" "$ERR" && ! has "$(sec bind)" "$OUT"'
}

check_control() {
	mnt "$OPEN" -t tmpfs -o size=4m,mode=0755 asx-mnts-open || { fail "control: setup" "mount"; return; }
	put "$OPEN/secret" 0600 "open-$TOK"
	set_list "~/.ssh/"
	need_userns "control: an unlisted tmpfs cloned in a user namespace" || return
	clone "$OPEN"
	okl "control: an unlisted tmpfs cloned in a user namespace stays readable" 'rc=$RC out=$(snip "$OUT") err=$(snip "$ERR")' \
		eval '[ "$RC" -eq 0 ] && has "open-$TOK" "$OUT"'
}

check_exception() {
	mnt "$UH/.ssh/pubmnt" -t tmpfs -o size=4m,mode=0755 asx-mnts-pub || { fail "exception: setup" "mount"; return; }
	put "$UH/.ssh/pubmnt/secret" 0644 "pub-$TOK"
	set_list "~/.ssh/" "!~/.ssh/pubmnt/"
	run_in "$USR" cat "$UH/.ssh/pubmnt/secret"
	okl "exception: a tmpfs at ~/.ssh/pubmnt with !~/.ssh/pubmnt/ stays readable" 'rc=$RC out=$(snip "$OUT") err=$(snip "$ERR")' \
		eval '[ "$RC" -eq 0 ] && has "pub-$TOK" "$OUT"'
	need_userns "exception: and through a clone" || return
	clone "$UH/.ssh/pubmnt"
	okl "exception: and through the agent's clone of it" 'rc=$RC out=$(snip "$OUT") err=$(snip "$ERR")' \
		eval '[ "$RC" -eq 0 ] && has "pub-$TOK" "$OUT"'
}

check_unreadable() {
	install -d -m 0700 -o root -g root "$UH/.ssh/locked" &&
		mnt "$UH/.ssh/locked/m" -t tmpfs -o size=1m asx-mnts-locked || { fail "unreadable: setup" "mount"; return; }
	set_list "~/.ssh/"
	run_in "$USR" true
	okl "unreadable: the launch warns, naming a mount point below ~/.ssh it cannot reach" 'rc=$RC err=$(snip "$ERR")' \
		eval '[ "$RC" -eq 0 ] && has "$UH/.ssh/locked/m" "$ERR"'
	umount "$UH/.ssh/locked/m" && rmdir "$UH/.ssh/locked/m" "$UH/.ssh/locked"
}

# A FUSE filesystem of the agent's (python3, no libfuse): `fusesrv.py MOUNTPOINT LOOT SECONDS`
# mounts itself at MOUNTPOINT through fusermount3 (which opens /dev/fuse and mounts as root, then
# passes the descriptor back over $_FUSE_COMMFD), prints "mounted", and answers the kernel's
# requests: an empty root directory where any name can be created; every byte written to it is
# appended to LOOT. It exits after the first release of a written file, or after SECONDS. A
# failed mount: exit 3 with fusermount3's message on stderr.
FUSE_SRV='import os, select, socket, struct, sys, time
mp, loot, secs = sys.argv[1], sys.argv[2], float(sys.argv[3])
a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
pid = os.fork()
if pid == 0:
    os.set_inheritable(b.fileno(), True)
    env = dict(os.environ, _FUSE_COMMFD=str(b.fileno()))
    os.execvpe("fusermount3", ["fusermount3", "-o", "fsname=asx-agent,subtype=asx", "--", mp], env)
b.close()
if os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) != 0:
    print("mount failed", file=sys.stderr)
    sys.exit(3)
fd = socket.recv_fds(a, 1, 1)[1][0]
print("mounted", flush=True)
uid, gid, now = os.getuid(), os.getgid(), int(time.time())
data = bytearray()
def attr(ino):
    mode, nlink, size = (0o40755, 2, 0) if ino == 1 else (0o100600, 1, len(data))
    return struct.pack("<QQQQQQIIIIIIIIII", ino, size, (size + 511) // 512, now, now, now,
                       0, 0, 0, mode, nlink, uid, gid, 0, 4096, 0)
def entry(ino):
    return struct.pack("<QQQQII", ino, 0, 1, 1, 0, 0) + attr(ino)
def reply(unique, err=0, body=b""):
    os.write(fd, struct.pack("<IiQ", 16 + len(body), -err, unique) + body)
deadline, released = time.monotonic() + secs, False
while time.monotonic() < deadline and not released:
    if not select.select([fd], [], [], 0.5)[0]:
        continue
    try:
        req = os.read(fd, 1 << 20)
    except OSError:
        break
    ln, op, unique, node = struct.unpack_from("<IIQQ", req)
    arg = req[40:ln]
    if op == 26:  # INIT: protocol 7.31, max_write 128 KiB
        reply(unique, 0, struct.pack("<IIIIHHIIHHI7I", 7, 31, 0, 0, 0, 0, 131072, 1, 0, 0, 0, *[0] * 7))
    elif op == 1:  # LOOKUP: only the file made by CREATE exists
        reply(unique, 0, entry(2)) if node == 1 and data else reply(unique, 2)
    elif op in (3, 4):  # GETATTR, SETATTR
        reply(unique, 0, struct.pack("<QII", 1, 0, 0) + attr(node))
    elif op == 35:  # CREATE
        reply(unique, 0, entry(2) + struct.pack("<QII", 1, 0, 0))
    elif op == 14:  # OPEN
        reply(unique, 0, struct.pack("<QII", 1, 0, 0))
    elif op == 16:  # WRITE
        size = struct.unpack_from("<I", arg, 16)[0]
        data += arg[40:40 + size]
        with open(loot, "ab") as f:
            f.write(arg[40:40 + size])
        reply(unique, 0, struct.pack("<II", size, 0))
    elif op in (25, 18):  # FLUSH, RELEASE
        reply(unique, 0)
        released = op == 18 and bool(data)
    elif op not in (2, 42, 36):  # FORGET, BATCH_FORGET and INTERRUPT get no reply
        reply(unique, 38)  # ENOSYS
print("served %d bytes" % len(data), flush=True)'

# fuse_try WHAT MOUNTPOINT FILE INSIDE: as the test user, inside the sandbox if INSIDE=1 (else
# outside), start the agent's FUSE filesystem at MOUNTPOINT; then, outside, the user writes a
# secret to MOUNTPOINT/FILE (as `aws configure` or `ssh-keygen` would). Sets FUSE_MOUNTED=1 if
# it mounted, FUSE_LOOT to what the filesystem received, FUSE_ERR to its stderr; the written
# file's secret is $(sec WHAT). A mount left behind is removed.
fuse_try() {
	local what=$1 mp=$2 file=$3 inside=$4 d=$T/fuse-$1 pid launcher=()
	[ "$inside" = 1 ] && launcher=("$LAUNCHER")
	install -d -o "$USR" -g "$USR" -m 0755 "$d"
	printf '%s\n' "$FUSE_SRV" >"$d/srv.py"
	FUSE_MOUNTED=0 FUSE_LOOT="" FUSE_ERR=""
	timeout -k 5 "$CMD_TIMEOUT" runuser -u "$USR" -- "${launcher[@]}" \
		python3 "$d/srv.py" "$mp" "$d/loot" 30 </dev/null >"$d/out" 2>"$d/err" &
	pid=$!
	wait_for 30 eval 'has mounted "$d/out" || pid_gone "$pid"'
	if has mounted "$d/out"; then
		FUSE_MOUNTED=1
		MOUNTS+=("$mp")
	fi
	run_as "$USR" sh -c 'umask 077; printf "%s\n" "$2" >"$1"' sh "$mp/$file" "$(sec "$what")"
	wait_for 30 pid_gone "$pid"
	stop_bg "$pid"
	FUSE_LOOT=$(cat "$d/loot" 2>/dev/null)
	FUSE_ERR=$(snip "$d/err")
	[ "$FUSE_MOUNTED" = 1 ] && umount -l "$mp" 2>/dev/null
	return 0
}

check_fuse_over() {
	local mp
	# Control: outside the sandbox the same program mounts, and receives the user's write.
	install -d -o "$USR" -g "$USR" -m 0755 "$UH/fusectl"
	fuse_try ctl "$UH/fusectl" credentials 0
	okl "fuse_over: outside the sandbox, the FUSE program mounts through fusermount3 and receives a write" \
		'mounted=$FUSE_MOUNTED loot=$FUSE_LOOT err=$FUSE_ERR' \
		eval '[ "$FUSE_MOUNTED" = 1 ] && [ "$FUSE_LOOT" = "$(sec ctl)" ]'
	[ "$FUSE_MOUNTED" = 1 ] || return
	install -d -o "$USR" -g "$USR" -m 0700 "$UH/.aws"
	for mp in .aws .ssh; do
		rm -f "$UH/$mp/credentials"
		set_list "~/.aws/credentials" "~/.ssh/"
		fuse_try "$mp" "$UH/$mp" credentials 1
		okl "fuse_over: inside, a FUSE mount over ~/$mp through fusermount3 is refused with EPERM" \
			'mounted=$FUSE_MOUNTED err=$FUSE_ERR' \
			eval '[ "$FUSE_MOUNTED" = 0 ] && has "$EPERM_MSG" "$T/fuse-$mp/err"'
		okl "fuse_over: the user's later write to ~/$mp/credentials is not served to the agent" \
			'loot=$FUSE_LOOT' eval '[ -z "$FUSE_LOOT" ]'
		run_in "$USR" cat "$UH/$mp/credentials"
		okl "fuse_over: that file, on disk, is denied inside" 'rc=$RC out=$(snip "$OUT") err=$(snip "$ERR")' \
			eval '[ "$RC" -ne 0 ] && has "$EPERM_MSG" "$ERR" && ! has "$(sec "$mp")" "$OUT"'
	done
}

check_user_mount() {
	local src=$T/usrc dst=$UH/.ssh/um
	install -d -o "$USR" -g "$USR" -m 0755 "$src" "$dst"
	cp /etc/fstab "$T/fstab.orig" && printf '%s %s none bind,user,noauto 0 0\n' "$src" "$dst" >>/etc/fstab ||
		{ fail "user_mount: setup" "fstab"; return; }
	FSTAB_SAVED=1
	# The status is printed, so that a launch that failed is not taken for a refusal.
	run_in "$USR" sh -c 'mount "$1"; echo "mount-rc=$?"' sh "$dst"
	okl "user_mount: inside, mount(8) of a user bind mount of fstab is refused" \
		'rc=$RC out=$(snip "$OUT") err=$(snip "$ERR") mounted=$(findmnt -n "$dst" | head -1)' \
		eval 'has "mount-rc=" "$OUT" && ! has "mount-rc=0" "$OUT" && ! mountpoint -q "$dst"'
	note "user_mount: inside, mount(8) said: $(snip "$ERR")"
	mountpoint -q "$dst" && umount -l "$dst"
	run_as "$USR" mount "$dst"
	okl "user_mount: outside, the same mount works" 'rc=$RC err=$(snip "$ERR")' \
		eval '[ "$RC" -eq 0 ] && mountpoint -q "$dst"'
	if mountpoint -q "$dst"; then
		MOUNTS+=("$dst")
		run_in "$USR" sh -c 'umount "$1"; echo "umount-rc=$?"' sh "$dst"
		okl "user_mount: inside, umount of it is refused" 'rc=$RC out=$(snip "$OUT") err=$(snip "$ERR")' \
			eval 'has "umount-rc=" "$OUT" && ! has "umount-rc=0" "$OUT" && mountpoint -q "$dst"'
		run_as "$USR" umount "$dst"
		okl "user_mount: outside, umount of it works" 'rc=$RC err=$(snip "$ERR")' \
			eval '[ "$RC" -eq 0 ] && ! mountpoint -q "$dst"'
	fi
	cp "$T/fstab.orig" /etc/fstab && FSTAB_SAVED=0
}

# ---------------------------------------------------------------- setup

preflight() {
	if [ "$(id -u)" -ne 0 ]; then
		fail "preflight" "must run as root"
		return 1
	fi
	command -v "$LAUNCHER" >/dev/null || { fail "preflight" "$LAUNCHER not installed"; return 1; }
	require_commands unshare mount mountpoint fusermount3 python3
}

setup() {
	T=$(mktemp -d /tmp/asx-mnts.XXXXXX) && chmod 0755 "$T" || return 1
	OUT=$T/out ERR=$T/err
	TOK=$(head -c 8 /dev/urandom | od -An -tx1 | tr -d ' \n')
	remove_test_user "$USR" || return 1
	useradd -m -c "$GECOS" -s /bin/sh "$USR" || return 1
	UH=$(home_of "$USR")
	chmod 0755 "$UH"
	install -d -o "$USR" -g "$USR" -m 0755 "$UH/.ssh" "$T/u"
}

cleanup() {
	local i
	[ "${CLEANED:-0}" = 1 ] && return 0
	CLEANED=1
	[ "${FSTAB_SAVED:-0}" = 1 ] && cp "$T/fstab.orig" /etc/fstab
	for ((i = ${#MOUNTS[@]} - 1; i >= 0; i--)); do umount -l "${MOUNTS[i]}" 2>/dev/null; done
	remove_test_user "$USR"
	rm -rf "$SRV" "$OPEN"
	[ -n "$T" ] && rm -rf "$T"
	return 0
}

run_suite "setup (test user, directories)"
