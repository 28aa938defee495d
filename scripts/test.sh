#!/bin/bash
# shellcheck disable=SC2016,SC2317
# (SC2016: the single-quoted 'sh -c' programs expand their own variables;
#  SC2317: the check_* functions are called indirectly, through run_check)
#
# scripts/test.sh - operator verification harness for agent-sandbox-exec.
#
# Run as root on a host where the package is installed and the daemon
# (agent-sandbox-execd.service) is running; in CI this is the Debian 12 QEMU
# guest (kernel 6.1, bpf LSM enabled, loopback network only).
#
# It creates its own test users (asx-alice, asx-bob), a supplementary group
# (asx-grp), files under /srv/asx-test.* and /tmp/asx-test.*, and temporarily
# edits /etc/agent-sandbox-exec/denylist and /etc/sudoers.d/asx-test; all of
# that is undone at exit.  It restarts, stops, freezes and SIGKILLs the daemon
# on purpose and makes sure it is running again at the end.
#
# Output: one line per assertion, "PASS: <what>", "FAIL: <what> (<detail>)" or
# "SKIP: <why>"; then a count line and finally "ALL PASS" (exit 0) or
# "<n> FAILED" (exit 1).
#
# Environment:
#   ASX_TEST_ONLY="name ..."  run only these checks (names: see CHECKS below)
#   ASX_TEST_SKIP="name ..."  skip these checks
#   ASX_TEST_KEEP=1           leave test users and files behind for debugging
#                             (the base list, sudoers and the daemon are still restored)

set -u -o pipefail
umask 022
export LC_ALL=C # stable strerror() texts and sort order, outside and inside alike
cd / || exit 1

readonly UNIT=agent-sandbox-execd.service
readonly SUITE=test.sh
readonly LAUNCHER=agent-sandbox-exec
readonly DAEMON=agent-sandbox-execd
readonly BASE_LIST=/etc/agent-sandbox-exec/denylist
readonly RUN_DIR=/run/agent-sandbox-exec
readonly BPF_DIR=/sys/fs/bpf/agent-sandbox-exec
readonly ALICE=asx-alice BOB=asx-bob GROUP=asx-grp GROUP2=asx-grp2
readonly GECOS="agent-sandbox-exec test user"
readonly SUDOERS_FILE=/etc/sudoers.d/asx-test
readonly MARKER=/tmp/asx-marker
readonly EPERM_MSG="Operation not permitted"
readonly HOME_LIST_REL=.config/agent-sandbox-exec/denylist
readonly TILDE='~'

# The checks, in the order they run.  The ones that disturb the daemon come last.
CHECKS=(
	service_and_launch runtime_layout
	secret_denied bypass_shell bypass_copy bypass_links bypass_programs
	bypass_rename bypass_path_spellings bypass_proc_fd_reopen write_open_denied
	base_list
	unchanged_ids unchanged_proc unchanged_dev unchanged_mountinfo
	unchanged_namespaces unchanged_hostname unchanged_credentials
	unchanged_limits unchanged_fds unchanged_cwd
	list_reload cross_uid
	ssh_keygen curl_netrc
	bad_list_lines list_not_read_as_root list_links_listed_file list_fifo
	nested_launch nested_cannot_lift resolvers
	exit_status argv_passthrough path_lookup env_passthrough stdin_passthrough
	launcher_execs
	concurrent_launches sudo_child ptrace_outside cgroup_escape forged_request
	request_channel request_flood
	daemon_restart daemon_crash daemon_frozen fail_closed socket_impostor
)

PASS_N=0 FAIL_N=0 SKIP_N=0

# shellcheck source=scripts/test-lib.sh
. "$(dirname "$0")/test-lib.sh"
FILTER=ASX_TEST # run_check: ASX_TEST_ONLY / ASX_TEST_SKIP choose the checks
CMD_TIMEOUT=30          # seconds any single user command may take
T="" SRV="" OUT="" ERR="" RC=0
TOK="" SECRET="" S="" AH="" BH="" ALICE_UID="" BOB_UID="" CGROOT=""
NETRC_PASS="" HTTP_PID=""
BASE_BACKUP="" BASE_EXISTED=0 BASE_TOUCHED=0
DAEMON_TOUCHED=0 SETUP_DONE=0 CLEANED=0
BG_PIDS=()
HOLDER_BG="" HOLDER_PID=""
declare -A PROBER_BG=() PROBER_DIR=()

# ---------------------------------------------------------------- reporting

# ---------------------------------------------------------------- running things

# ---------------------------------------------------------------- expectations

# expect_denied WHAT SECRET: the last command failed, said EPERM, and did not print SECRET
expect_denied() {
	local what=$1 secret=$2
	if has "$secret" "$OUT" "$ERR"; then
		fail "$what" "secret revealed; rc=$RC"
	elif [ "$RC" -eq 0 ]; then
		fail "$what" "exit status 0, expected a failure; stdout: $(snip "$OUT")"
	elif ! has "$EPERM_MSG" "$ERR"; then
		fail "$what" "no '$EPERM_MSG'; $(why)"
	else
		pass "$what"
	fi
}

# expect_hidden WHAT SECRET: like expect_denied, exit status ignored (pipelines)
expect_hidden() {
	local what=$1 secret=$2
	if has "$secret" "$OUT" "$ERR"; then
		fail "$what" "secret revealed; rc=$RC"
	elif ! has "$EPERM_MSG" "$ERR"; then
		fail "$what" "no '$EPERM_MSG'; $(why)"
	else
		pass "$what"
	fi
}

# expect_read WHAT CONTENT: the last command succeeded and printed CONTENT
expect_read() {
	local what=$1 content=$2
	if [ "$RC" -ne 0 ]; then
		fail "$what" "$(why)"
	elif ! has "$content" "$OUT"; then
		fail "$what" "expected content missing; stdout: $(snip "$OUT")"
	else
		pass "$what"
	fi
}

# expect_rc WHAT N: the last command exited with status N
expect_rc() {
	if [ "$RC" -eq "$2" ]; then pass "$1"; else fail "$1" "expected exit $2; $(why)"; fi
}

# expect_cgroup WHAT UID: the last command printed /proc/self/cgroup of UID's sandbox
expect_cgroup() {
	if [ "$RC" -eq 0 ] && in_sandbox_cgroup "$OUT" "$2"; then
		pass "$1"
	else
		fail "$1" "cgroup: $(snip "$OUT"); $(why)"
	fi
}

# same_io WHAT USER CMD...: CMD exits the same and prints the same outside and
# inside USER's sandbox (and prints something)
same_io() {
	local what=$1 user=$2 rc_out
	shift 2
	run_as "$user" "$@"
	rc_out=$RC
	cp "$OUT" "$T/outside.out"
	cp "$ERR" "$T/outside.err"
	run_in "$user" "$@"
	cp "$OUT" "$T/inside.out"
	if [ ! -s "$T/outside.out" ]; then
		fail "$what" "no output outside (rc=$rc_out): $(snip "$T/outside.err")"
	elif [ "$rc_out" -ne "$RC" ]; then
		fail "$what" "exit $rc_out outside, inside $(why)"
	elif cmp -s "$T/outside.out" "$T/inside.out"; then
		pass "$what"
	else
		fail "$what" "differs: $(diff "$T/outside.out" "$T/inside.out" | grep '^[<>]' | head -c 300 | tr '\n' '|')"
	fi
}

# ---------------------------------------------------------------- daemon and lists

daemon_active() { systemctl is-active --quiet "$UNIT"; }
daemon_inactive() { ! daemon_active; }
main_pid() { systemctl show -p MainPID --value "$UNIT" 2>/dev/null; }
daemon_replaced() { daemon_active && [ "$(main_pid)" != "$1" ] && [ "$(main_pid)" != 0 ]; }

# daemon_ensure_running: thaw, and (re)start the daemon if it is not active
daemon_ensure_running() {
	systemctl kill --kill-whom=main --signal=SIGCONT "$UNIT" >/dev/null 2>&1
	daemon_active && return 0
	systemctl reset-failed "$UNIT" >/dev/null 2>&1
	timeout 240 systemctl start "$UNIT" >/dev/null 2>&1
	wait_for 30 daemon_active
}

# write_list USER FILE: install FILE as USER's home list
write_list() {
	local user=$1 src=$2 home
	home=$(home_of "$user")
	install -d -o "$user" -g "$user" -m 0755 "$home/.config" "$home/.config/agent-sandbox-exec"
	rm -f "$home/$HOME_LIST_REL"
	install -o "$user" -g "$user" -m 0644 "$src" "$home/$HOME_LIST_REL"
}

alice_list_default() { write_list "$ALICE" "$T/alice.list"; }

# alice_list_plus LINE...: alice's default list with extra lines
alice_list_plus() {
	cat "$T/alice.list" >"$T/alice.plus"
	printf '%s\n' "$@" >>"$T/alice.plus"
	write_list "$ALICE" "$T/alice.plus"
}

# put USER PATH MODE CONTENT: a file owned by USER
put() {
	printf '%s\n' "$4" >"$2" && chown "$1:$1" "$2" && chmod "$3" "$2"
}

# warned_lines FILE LISTNAME: sorted line numbers that warnings in FILE name for
# the list whose path ends in LISTNAME
warned_lines() {
	sed -n -E 's#^agent-sandbox-exec: warning: ([^:]*):([0-9]+): .*#\1 \2#p' "$1" |
		awk -v n="$2" 'substr($1, length($1) - length(n) + 1) == n { print $2 }' |
		sort -n -u | tr '\n' ' ' | sed 's/ $//'
}

# ---------------------------------------------------------------- probers
#
# A prober is a long-running sandboxed loop that tries to read a file every
# 0.1 s (bash's read -t on a FIFO nobody writes: no sleep process to fork).  Its
# directory holds: pid (the loop's pid), count (attempts so far), err (stderr of
# the last attempt), leak (anything a successful read printed).

PROBER_SH='d=$1; f=$2; n=0
echo "$$" > "$d/pid"
mkfifo "$d/tick" && exec 3<> "$d/tick" || exit 1
while [ "$n" -lt 1500 ] && [ ! -e "$d/stop" ]; do
	if cat "$f" >> "$d/leak" 2> "$d/err.new"; then echo "(read succeeded at attempt $n)" >> "$d/leak"; fi
	mv -f "$d/err.new" "$d/err"
	n=$((n + 1))
	echo "$n" > "$d/count.new"; mv -f "$d/count.new" "$d/count"
	read -r -t 0.1 -u 3 _
done'

# start_prober NAME USER FILE: start it in USER's sandbox; 1 if it does not run
start_prober() {
	local name=$1 user=$2 file=$3 d
	d=$(home_of "$user")/asx-probe-$name
	rm -rf "$d"
	install -d -o "$user" -g "$user" -m 0755 "$d"
	timeout -k 5 300 runuser -u "$user" -- "$LAUNCHER" bash -c "$PROBER_SH" prober "$d" "$file" \
		</dev/null >"$T/probe-$name.out" 2>"$T/probe-$name.err" &
	PROBER_BG[$name]=$!
	PROBER_DIR[$name]=$d
	BG_PIDS+=("$!")
	wait_for 15 test -s "$d/count"
}

prober_count() {
	local c
	c=$(cat "${PROBER_DIR[$1]}/count" 2>/dev/null)
	case $c in '' | *[!0-9]*) c=0 ;; esac
	printf '%s' "$c"
}
prober_reached() { [ "$(prober_count "$1")" -ge "$2" ]; }

# prober_advance NAME N SECONDS: wait until NAME has made N more attempts
prober_advance() {
	local target=$(($(prober_count "$1") + $2))
	wait_for "$3" prober_reached "$1" "$target"
}

# prober_verdict WHAT NAME: PASS if no read succeeded so far and the last one got EPERM
prober_verdict() {
	local what=$1 d=${PROBER_DIR[$2]}
	if [ -s "$d/leak" ]; then
		fail "$what" "a read succeeded: $(snip "$d/leak")"
	elif ! has "$EPERM_MSG" "$d/err"; then
		fail "$what" "last attempt: $(snip "$d/err")"
	else
		pass "$what"
	fi
}

stop_prober() {
	local d=${PROBER_DIR[$1]} bg=${PROBER_BG[$1]}
	touch "$d/stop"
	wait_for 5 pid_gone "$bg"
	stop_bg "$bg"
}

# ================================================================ checks

# 1. Sanity: service active, version output, a launch works, cgroup inside/outside
check_service_and_launch() {
	local pid ready lsm
	lsm=$(cat /sys/kernel/security/lsm 2>/dev/null)
	ok "the bpf LSM is active (/sys/kernel/security/lsm)" "lsm='$lsm'" listed bpf "${lsm//,/ }"
	ok "daemon unit $UNIT is active" "is-active: $(systemctl is-active "$UNIT" 2>&1)" daemon_active
	pid=$(main_pid)
	ready=$(tr -d ' \n' <"$RUN_DIR/ready" 2>/dev/null)
	if [ -n "$pid" ] && [ "$pid" != 0 ] && [ "$ready" = "$pid" ]; then
		pass "$RUN_DIR/ready holds the daemon's pid"
	else
		fail "$RUN_DIR/ready holds the daemon's pid" "ready='$ready' MainPID='$pid'"
	fi

	run_as "$ALICE" "$LAUNCHER" --version
	if [ "$RC" -eq 0 ] && grep -qE "^$LAUNCHER [^ ]+\$" "$OUT"; then
		pass "$LAUNCHER --version prints '<name> <version>'"
	else
		fail "$LAUNCHER --version prints '<name> <version>'" "stdout: $(snip "$OUT"); $(why)"
	fi
	run_as "$ALICE" "$(command -v "$DAEMON" || echo "/usr/sbin/$DAEMON")" --version
	if [ "$RC" -eq 0 ] && grep -qE "^$DAEMON [^ ]+\$" "$OUT"; then
		pass "$DAEMON --version prints '<name> <version>'"
	else
		fail "$DAEMON --version prints '<name> <version>'" "stdout: $(snip "$OUT"); $(why)"
	fi

	run_as "$ALICE" "$LAUNCHER"
	if [ "$RC" -eq 2 ] && [ "$(wc -l <"$ERR")" -eq 1 ]; then
		pass "launcher without PROGRAM refuses: exit 2, one line on stderr"
	else
		fail "launcher without PROGRAM refuses: exit 2, one line on stderr" "$(why)"
	fi

	run_in "$ALICE" true
	expect_rc "launcher runs 'true' as $ALICE (exit 0)" 0
	run_in "$ALICE" cat /proc/self/cgroup
	expect_cgroup "inside: /proc/self/cgroup shows agent-sandbox-exec/uid-$ALICE_UID" "$ALICE_UID"
	run_as "$ALICE" cat /proc/self/cgroup
	if [ "$RC" -eq 0 ] && [ -s "$OUT" ] && ! grep -q 'agent-sandbox-exec' "$OUT"; then
		pass "outside: /proc/self/cgroup shows no agent-sandbox-exec cgroup"
	else
		fail "outside: /proc/self/cgroup shows no agent-sandbox-exec cgroup" "cgroup: $(snip "$OUT")"
	fi
}

# The runtime files and cgroups are root-owned and users cannot reach the BPF objects
check_runtime_layout() {
	local got f cg=$CGROOT/agent-sandbox-exec
	got=$(stat -c '%a %U' "$RUN_DIR" 2>&1)
	ok "$RUN_DIR is 0755 root" "got: $got" test "$got" = "755 root"
	got=$(stat -c '%a %U %F' "$RUN_DIR/socket" 2>&1)
	ok "$RUN_DIR/socket is a socket, 0666 root" "got: $got" test "$got" = "666 root socket"
	ok "there is no request directory $RUN_DIR/req" "$(ls -ld "$RUN_DIR/req" 2>&1)" test ! -e "$RUN_DIR/req"
	run_as "$ALICE" touch "$RUN_DIR/asx-user-file"
	ok "a user cannot create a file in $RUN_DIR" "touch: $(why)" test "$RC" -ne 0 -a ! -e "$RUN_DIR/asx-user-file"

	run_in "$ALICE" true # makes sure the uid cgroup exists
	got=$(stat -c '%a %U' "$cg/uid-$ALICE_UID" 2>&1)
	ok "sandbox cgroup $cg/uid-$ALICE_UID is 0755 root" "got: $got" test "$got" = "755 root"
	for f in "$CGROOT/cgroup.procs" "$cg/cgroup.procs" "$cg/uid-$ALICE_UID/cgroup.procs"; do
		run_as "$ALICE" test -w "$f"
		ok "$ALICE cannot write $f" "it is writable (or missing: $(ls -l "$f" 2>&1))" test "$RC" -eq 1 -a -e "$f"
	done
	run_as "$ALICE" mkdir "$cg/uid-$ALICE_UID/asx-sub"
	ok "$ALICE cannot create a child cgroup in her sandbox cgroup" "mkdir: $(why)" \
		test "$RC" -ne 0 -a -d "$cg/uid-$ALICE_UID"
	rmdir "$cg/uid-$ALICE_UID/asx-sub" 2>/dev/null

	ok "pinned BPF objects exist in $BPF_DIR" "$(ls -ld "$BPF_DIR" 2>&1)" test -d "$BPF_DIR"
	run_as "$ALICE" ls "$BPF_DIR"
	ok "$ALICE cannot list the pinned BPF objects" "ls: $(why)" test "$RC" -ne 0 -a -d "$BPF_DIR"
}

# 2. A secret in alice's home list: denied inside, stat works inside, readable outside
check_secret_denied() {
	run_in "$ALICE" cat "$S"
	expect_denied "inside: cat of a home-listed secret fails with EPERM" "$SECRET"
	run_in "$ALICE" stat -c '%s %U %a' "$S"
	if [ "$RC" -eq 0 ] && [ "$(cat "$OUT")" = "$((${#SECRET} + 1)) $ALICE 600" ]; then
		pass "inside: stat of the secret works"
	else
		fail "inside: stat of the secret works" "stdout: $(snip "$OUT"); $(why)"
	fi
	run_in "$ALICE" ls -l "$S"
	expect_rc "inside: ls -l of the secret works" 0
	run_as "$ALICE" cat "$S"
	expect_read "outside: $ALICE reads the secret" "$SECRET"
}

# 3. Ways around: shells, pipes, children of children
check_bypass_shell() {
	run_in "$ALICE" sh -c 'cat "$1" | cat' sh "$S"
	expect_hidden "inside: sh -c 'cat secret | cat' reveals nothing" "$SECRET"
	run_in "$ALICE" sh -c 'sh -c "cat $1; true"; true' sh "$S"
	expect_hidden "inside: a child of a child (sh -c 'sh -c cat') reveals nothing" "$SECRET"
	run_in "$ALICE" sh -c 'while IFS= read -r l; do echo "$l"; done < "$1"' sh "$S"
	expect_denied "inside: shell redirection '< secret' fails with EPERM" "$SECRET"
	run_in "$ALICE" sh -c 'cd && tar -cf - . | cat' sh
	expect_hidden "inside: tar of the whole home directory reveals nothing" "$SECRET"
}

check_bypass_copy() {
	rm -f "$AH/asx-copy.txt"
	run_in "$ALICE" cp "$S" "$AH/asx-copy.txt"
	expect_denied "inside: cp secret copy fails with EPERM" "$SECRET"
	if has "$SECRET" "$AH/asx-copy.txt"; then
		fail "inside: cp leaves no copy of the secret" "the copy contains the secret"
	else
		pass "inside: cp leaves no copy of the secret"
	fi
	rm -f "$AH/asx-copy.txt"
	run_in "$ALICE" dd if="$S" status=none
	expect_denied "inside: dd if=secret fails with EPERM" "$SECRET"
}

check_bypass_links() {
	run_in "$ALICE" cat "$AH/hl-out.txt"
	expect_denied "inside: a hardlink made outside before the launch is denied" "$SECRET"
	rm -f "$AH/asx-sl-in.txt" "$AH/asx-hl-in.txt"
	run_in "$ALICE" sh -c 'ln -s "$1" "$2" && cat "$2"' sh "$S" "$AH/asx-sl-in.txt"
	expect_denied "inside: a symlink to the secret made inside is denied" "$SECRET"
	run_in "$ALICE" sh -c 'ln "$1" "$2"; cat "$2"' sh "$S" "$AH/asx-hl-in.txt"
	expect_denied "inside: ln of the secret is refused and reveals nothing" "$SECRET"
	ok "inside: the refused hardlink was not created" "$AH/asx-hl-in.txt exists" test ! -e "$AH/asx-hl-in.txt"
	rm -f "$AH/asx-sl-in.txt" "$AH/asx-hl-in.txt"
}

check_bypass_programs() {
	if ! command -v python3 >/dev/null; then
		skip "python3 bypass checks: python3 not installed"
		return
	fi
	run_in "$ALICE" python3 -c 'import sys; sys.stdout.write(open(sys.argv[1]).read())' "$S"
	expect_denied "inside: python3 open() fails with EPERM" "$SECRET"
	run_in "$ALICE" python3 -c '
import os, sys
fd = os.open(sys.argv[1], os.O_PATH)
sys.stdout.write(open("/proc/self/fd/%d" % fd).read())' "$S"
	expect_denied "inside: O_PATH open + reopen via /proc/self/fd is denied" "$SECRET"
	run_in "$ALICE" python3 -c '
import os, sys
d = os.open(os.path.dirname(sys.argv[1]), os.O_RDONLY | os.O_DIRECTORY)
fd = os.open(os.path.basename(sys.argv[1]), os.O_RDONLY | os.O_NOFOLLOW, dir_fd=d)
sys.stdout.write(os.read(fd, 4096).decode())' "$S"
	expect_denied "inside: openat() relative to a directory fd is denied" "$SECRET"
}

# a sandboxed mv of a listed file is refused (lsm/inode_rename)
check_bypass_rename() {
	run_in "$ALICE" sh -c 'mv "$1" "$2" || exit 3; cat "$2"' sh "$S" "$AH/asx-moved.txt"
	expect_denied "inside: mv secret other is refused and cat other reveals nothing" "$SECRET"
	if [ -e "$AH/asx-moved.txt" ]; then
		run_as "$ALICE" mv "$AH/asx-moved.txt" "$S"
	fi
	ok "secret is back in place after the rename check" "missing: $S" test -f "$S"
}

check_bypass_path_spellings() {
	local base
	base=$(basename "$AH")
	run_in "$ALICE" cat "$AH/./secret.txt"
	expect_denied "inside: cat HOME/./secret.txt is denied" "$SECRET"
	run_in "$ALICE" cat "/$AH//../$base/secret.txt"
	expect_denied "inside: cat //HOME//../USER/secret.txt is denied" "$SECRET"
	run_in "$ALICE" sh -c 'cd && cat ./secret.txt'
	expect_denied "inside: relative path ./secret.txt from HOME is denied" "$SECRET"
}

# start_holder DIR SCRIPT ARGS...: run `sh -c SCRIPT sh DIR ARGS...` as alice,
# outside any sandbox, in the background; SCRIPT writes its pid to DIR/pid
# once it is ready. Sets HOLDER_BG (the job) and HOLDER_PID; status 1, with the
# job stopped, if no pid appears within 10 s.
start_holder() {
	local d=$1 script=$2
	shift 2
	rm -rf "$d"
	install -d -o "$ALICE" -g "$ALICE" "$d"
	timeout -k 5 60 runuser -u "$ALICE" -- sh -c "$script" sh "$d" "$@" </dev/null >/dev/null 2>&1 &
	HOLDER_BG=$!
	BG_PIDS+=("$HOLDER_BG")
	if ! wait_for 10 test -s "$d/pid"; then
		stop_bg "$HOLDER_BG"
		return 1
	fi
	HOLDER_PID=$(cat "$d/pid")
}

# An unsandboxed process of the same user holds the secret open; reopening it via
# /proc/PID/fd from inside the sandbox must still be denied
check_bypass_proc_fd_reopen() {
	local bg pid
	if ! start_holder "$AH/asx-holder" 'exec 3< "$2"; echo "$$" > "$1/pid"; exec sleep 50' "$S"; then
		fail "inside: reopen via /proc/PID/fd of an outside holder is denied" "holder did not start"
		return
	fi
	bg=$HOLDER_BG pid=$HOLDER_PID
	run_in "$ALICE" cat "/proc/$pid/fd/3"
	# Refused at the link itself since issue 15 (read-mode ptrace access to an
	# outside task: EACCES from proc_pid_get_link()), else at the open (EPERM).
	if has "$SECRET" "$OUT" "$ERR"; then
		fail "inside: reopen via /proc/PID/fd of an unsandboxed holder is denied" "secret revealed"
	elif [ "$RC" -eq 0 ] || ! grep -qaE "Permission denied|$EPERM_MSG" "$ERR"; then
		fail "inside: reopen via /proc/PID/fd of an unsandboxed holder is denied" "$(why)"
	else
		pass "inside: reopen via /proc/PID/fd of an unsandboxed holder is denied"
	fi
	kill "$pid" 2>/dev/null
	stop_bg "$bg"
}

# Opening a listed file for writing is an open too: denied, file unchanged
check_write_open_denied() {
	run_in "$ALICE" sh -c 'printf x >> "$1"' sh "$S"
	expect_denied "inside: opening the secret for append fails with EPERM" "$SECRET"
	run_in "$ALICE" sh -c ': > "$1"' sh "$S"
	expect_denied "inside: opening the secret with O_TRUNC fails with EPERM" "$SECRET"
	ok "the secret is unchanged after the write attempts" "contents now: $(snip "$S")" \
		cmp -s "$S" "$T/secret.orig"
	cmp -s "$S" "$T/secret.orig" || cat "$T/secret.orig" >"$S" # same inode, for the later checks
}

# base_warning_seen N SINCE: a warning for line N of the base list is on the
# last launch's stderr or in the daemon's journal since epoch SINCE
base_warning_seen() {
	grep -aq "^$LAUNCHER: warning: $BASE_LIST:$1: " "$ERR" && return 0
	command -v journalctl >/dev/null &&
		journalctl -q -u "$UNIT" --since "@$2" --no-pager -o cat 2>/dev/null | grep -aqF "$BASE_LIST:$1: "
}

# 4. An entry in the base list denies every user; ~/ there means each user's home
check_base_list() {
	local n since
	since=$(date +%s)
	cat "$BASE_BACKUP" >"$T/base.new"
	printf '\n# added by scripts/test.sh\n%s\n%s\nasx-relative-base-entry\n' \
		"$SRV/base-secret.txt" "$TILDE/asx-base-tilde.txt" >>"$T/base.new"
	n=$(grep -n -x 'asx-relative-base-entry' "$T/base.new" | cut -d: -f1)
	BASE_TOUCHED=1
	cat "$T/base.new" >"$BASE_LIST"

	run_as "$ALICE" cat "$SRV/base-secret.txt"
	expect_read "outside: the base-listed file is world-readable" "asx-base-$TOK"
	run_in "$ALICE" cat "$SRV/base-secret.txt"
	expect_denied "base list denies $ALICE" "asx-base-$TOK"
	run_in "$BOB" cat "$SRV/base-secret.txt"
	expect_denied "base list denies $BOB" "asx-base-$TOK"
	if wait_for 10 base_warning_seen "$n" "$((since - 1))"; then
		pass "base list: a relative entry warns with $BASE_LIST:$n (stderr or daemon journal)"
	else
		fail "base list: a relative entry warns with $BASE_LIST:$n (stderr or daemon journal)" \
			"not on stderr ($(snip "$ERR")) nor in journalctl -u $UNIT"
	fi
	run_in "$ALICE" cat "$AH/asx-base-tilde.txt"
	expect_denied "base list ~/ entry denies $ALICE's own file" "asx-base-tilde-$ALICE-$TOK"
	run_in "$BOB" cat "$BH/asx-base-tilde.txt"
	expect_denied "base list ~/ entry denies $BOB's own file" "asx-base-tilde-$BOB-$TOK"

	cat "$BASE_BACKUP" >"$BASE_LIST"
	ok "base list restored byte for byte" "cmp differs" cmp -s "$BASE_BACKUP" "$BASE_LIST"
	run_in "$ALICE" cat "$SRV/base-secret.txt"
	expect_read "after restoring the base list the file is readable on the next launch" "asx-base-$TOK"
}

# 5. Nothing else changes
check_unchanged_ids() {
	same_io "id -G (supplementary groups) identical inside and outside" "$ALICE" id -G
	run_in "$ALICE" id -Gn
	if [ "$RC" -eq 0 ] && grep -qw "$GROUP" "$OUT"; then
		pass "inside: $ALICE is still in the supplementary group $GROUP"
	else
		fail "inside: $ALICE is still in the supplementary group $GROUP" "id -Gn: $(snip "$OUT")"
	fi
	same_io "id identical inside and outside" "$ALICE" id
}

check_unchanged_proc() {
	same_io "ls -ld /proc/1 and /proc/1/stat identity fields identical" "$ALICE" \
		sh -c 'ls -ld /proc/1 && cut -d" " -f1-2,4-7 /proc/1/stat && test -r /proc/1/cmdline && echo cmdline-readable'
	same_io "/proc/1 and the script's own process visible alike" "$ALICE" \
		sh -c 'ls -ld "/proc/$1" && cut -d" " -f1-2 "/proc/$1/stat"' sh "$$"
}

check_unchanged_dev() {
	same_io "stat of /dev/* (owner, group, mode, major, minor) identical" "$ALICE" \
		sh -c "stat -c '%n %U %G %a %t %T' /dev/*"
}

check_unchanged_mountinfo() {
	run_as "$ALICE" cat /proc/self/mountinfo
	cp "$OUT" "$T/mi.out1"
	run_in "$ALICE" cat /proc/self/mountinfo
	cp "$OUT" "$T/mi.in"
	run_as "$ALICE" cat /proc/self/mountinfo
	cp "$OUT" "$T/mi.out2"
	if [ ! -s "$T/mi.in" ]; then
		fail "/proc/self/mountinfo identical inside and outside" "empty inside; $(why)"
	elif cmp -s "$T/mi.out1" "$T/mi.in" || cmp -s "$T/mi.out2" "$T/mi.in"; then
		pass "/proc/self/mountinfo identical inside and outside"
	else
		fail "/proc/self/mountinfo identical inside and outside" \
			"differs: $(diff "$T/mi.out2" "$T/mi.in" | grep '^[<>]' | head -c 300 | tr '\n' '|')"
	fi
}

check_unchanged_namespaces() {
	same_io "all /proc/self/ns/* links identical (no namespaces)" "$ALICE" \
		sh -c 'for n in /proc/self/ns/*; do printf "%s %s\n" "${n##*/}" "$(readlink "$n")"; done'
}

check_unchanged_hostname() {
	same_io "hostname identical" "$ALICE" sh -c 'uname -n; cat /proc/sys/kernel/hostname'
}

check_unchanged_credentials() {
	same_io "uids, gids, capabilities, NoNewPrivs, seccomp and LSM label identical" "$ALICE" \
		sh -c 'grep -E "^(Uid|Gid|Groups|Cap(Inh|Prm|Eff|Bnd|Amb)|NoNewPrivs|Seccomp|Seccomp_filters):" /proc/self/status;
			cat /proc/self/attr/current 2>/dev/null; echo'
}

check_unchanged_limits() {
	same_io "umask, rlimits, nice and oom_score_adj identical" "$ALICE" \
		sh -c 'umask; ulimit -a; nice; cat /proc/self/oom_score_adj'
	# the launcher blocks SIGURG while it waits for the daemon's wake-up
	# (SigIgn is not compared: PROGRAM starts with SIGPIPE at its default
	# action, like from a shell, whatever the caller ignored; see README)
	same_io "signal mask and pending signals identical (no SIGURG left behind)" "$ALICE" \
		sh -c 'grep -E "^(SigPnd|ShdPnd|SigBlk)" /proc/self/status'
	# A signal the caller blocked stays blocked in PROGRAM (the caller's mask, not an empty one):
	# SIGUSR1 is bit 9 of SigBlk. PROGRAM is grep itself: a shell would clear the mask of its child.
	local blk='use POSIX; sigprocmask(SIG_BLOCK, POSIX::SigSet->new(SIGUSR1)) or die "sigprocmask: $!"; exec @ARGV'
	run_as "$ALICE" perl -e "$blk" "$LAUNCHER" grep '^SigBlk:' /proc/self/status
	okl "PROGRAM starts with a signal the caller blocked (SIGUSR1) still blocked" '$(snip "$OUT") $(why)' \
		eval '[ "$RC" -eq 0 ] && [ $((0x$(awk "{ print \$2 }" "$OUT") & 0x200)) -ne 0 ]'
	# SIGPIPE ignored by the caller is at its default action in PROGRAM, as from a shell (bit 12 of
	# SigIgn); the first line, the caller's own child, shows it ignored there.
	# shellcheck disable=SC2016 # expanded by the user's shell
	run_as "$ALICE" sh -c 'trap "" PIPE; grep "^SigIgn:" /proc/self/status; exec "$0" grep "^SigIgn:" /proc/self/status' \
		"$LAUNCHER"
	okl "PROGRAM starts with SIGPIPE at its default action though the caller ignored it" '$(snip "$OUT") $(why)' \
		eval '[ "$RC" -eq 0 ] && [ "$(wc -l <"$OUT")" -eq 2 ] &&
			[ $((0x$(awk "NR == 1 { print \$2 }" "$OUT") & 0x1000)) -ne 0 ] &&
			[ $((0x$(awk "NR == 2 { print \$2 }" "$OUT") & 0x1000)) -eq 0 ]'
}

# No extra file descriptors (e.g. BPF map or daemon socket fds) leak into PROGRAM
check_unchanged_fds() {
	same_io "open file descriptors identical (nothing leaks into PROGRAM)" "$ALICE" \
		sh -c 'ls /proc/$$/fd'
	run_in "$ALICE" sh -c 'ls -l /proc/$$/fd'
	if grep -qE 'bpf|socket:|anon_inode' "$OUT"; then
		fail "no bpf/socket/anon_inode fds inside" "$(snip "$OUT")"
	else
		pass "no bpf/socket/anon_inode fds inside"
	fi
}

check_unchanged_cwd() {
	run_as "$ALICE" sh -c 'cd /usr/share && exec "$@"' sh "$LAUNCHER" pwd
	if [ "$RC" -eq 0 ] && [ "$(cat "$OUT")" = /usr/share ]; then
		pass "working directory is kept"
	else
		fail "working directory is kept" "pwd: $(snip "$OUT"); $(why)"
	fi
}

# 6. Home list edits take effect on the next launch, without a daemon restart
check_list_reload() {
	local f=$AH/asx-second.txt pid
	pid=$(main_pid)
	run_in "$ALICE" cat "$f"
	expect_read "second file readable before it is listed" "asx-second-$TOK"
	alice_list_plus "$f"
	run_in "$ALICE" cat "$f"
	expect_denied "home list addition takes effect on the next launch" "asx-second-$TOK"
	alice_list_default
	run_in "$ALICE" cat "$f"
	expect_read "home list removal takes effect on the next launch" "asx-second-$TOK"
	ok "the launch that frees a file says so (agent-sandbox-exec: note: ... no longer denied)" "$(snip "$ERR")" \
		grep -q "^agent-sandbox-exec: note: .*no longer denied" "$ERR"
	# A removal made from inside reaches only a launch from outside, also when that launch's
	# lists resolve to just what the launch from inside applied (the daemon skips a repeated
	# apply only if the sandbox holds exactly those keys).
	# The removal is the user's (outside, while the sandbox runs): a sandboxed agent cannot
	# edit the list (test-writes.sh::check_own_list).
	alice_list_plus "$f"
	run_in_after "$ALICE" alice_list_default sh -c \
		'agent-sandbox-exec true 2>/dev/null && exec agent-sandbox-exec cat "$1"' sh "$f"
	expect_denied "a removal from inside: nested launches keep the file denied" "asx-second-$TOK"
	ok "the second nested launch, with the same lists, says so too (note: ... stay denied)" "$(snip "$ERR")" \
		grep -q "^agent-sandbox-exec: note: .*stay denied" "$ERR"
	run_in "$ALICE" cat "$f"
	expect_read "the same lists, then launched from outside: the removal takes effect" "asx-second-$TOK"
	alice_list_default
	ok "no daemon restart was involved" "MainPID $pid -> $(main_pid)" test "$(main_pid)" = "$pid"
}

# 8. A file in alice's list only is denied to alice, not to bob; separate cgroups
check_cross_uid() {
	run_in "$BOB" cat "$SRV/alice-only.txt"
	expect_read "$BOB reads a file listed only by $ALICE, in his own sandbox" "asx-alice-only-$TOK"
	run_in "$ALICE" cat "$SRV/alice-only.txt"
	expect_denied "$ALICE is denied the file from her list" "asx-alice-only-$TOK"
	run_in "$BOB" cat "$SRV/bob-only.txt"
	expect_denied "$BOB is denied the file from his list" "asx-bob-only-$TOK"
	run_in "$ALICE" cat "$SRV/bob-only.txt"
	expect_read "$ALICE reads a file listed only by $BOB" "asx-bob-only-$TOK"
	run_in "$BOB" cat /proc/self/cgroup
	expect_cgroup "$BOB's sandbox is the cgroup uid-$BOB_UID" "$BOB_UID"

	if ! start_prober cross "$ALICE" "$SRV/alice-only.txt"; then
		fail "$BOB's launches leave $ALICE's running sandbox enforced" "prober did not start: $(snip "$T/probe-cross.err")"
		stop_prober cross
		return
	fi
	run_in "$BOB" cat "$SRV/alice-only.txt"
	run_in "$BOB" true
	if prober_advance cross 3 10; then
		prober_verdict "$BOB's launches leave $ALICE's running sandbox enforced" cross
	else
		fail "$BOB's launches leave $ALICE's running sandbox enforced" "prober stalled: $(snip "$T/probe-cross.err")"
	fi
	stop_prober cross
}

# 10. Real programs: ssh-keygen with a listed private key
check_ssh_keygen() {
	local key=$AH/.ssh/asx_ed25519 pub
	if ! command -v ssh-keygen >/dev/null || [ ! -s "$key.pub" ]; then
		skip "ssh-keygen check: ssh-keygen not installed or key generation failed"
		return
	fi
	pub=$(cut -d' ' -f2 "$key.pub")
	run_as "$ALICE" ssh-keygen -y -f "$key"
	expect_read "outside: ssh-keygen -y derives the public key" "$pub"
	run_in "$ALICE" ssh-keygen -y -f "$key"
	expect_denied "inside: ssh-keygen -y cannot load the listed private key" "$pub"
}

# 10. Real programs: curl --netrc-file against a local echo server
check_curl_netrc() {
	local port url b64 netrc=$AH/.asx-netrc trace=$AH/asx-curl.strace
	if ! command -v curl >/dev/null || ! command -v python3 >/dev/null; then
		skip "curl netrc check: curl or python3 not installed"
		return
	fi
	python3 "$T/http-echo.py" "$T/http.port" 8 </dev/null >"$T/http.log" 2>&1 &
	HTTP_PID=$!
	BG_PIDS+=("$HTTP_PID")
	if ! wait_for 10 test -s "$T/http.port"; then
		fail "local HTTP echo server starts" "$(snip "$T/http.log")"
		return
	fi
	port=$(cat "$T/http.port")
	url=http://127.0.0.1:$port/asx
	b64=$(printf '%s' "asxuser:$NETRC_PASS" | base64 -w0)

	run_as "$ALICE" curl -sS --max-time 10 --netrc-file "$netrc" "$url"
	expect_read "outside: curl sends the netrc credentials" "Authorization: Basic $b64"
	run_in "$ALICE" curl -sS --max-time 10 --netrc-file "$netrc" "$url"
	# curl 7.88 (Debian 12) goes on without the unreadable netrc; curl 8.14
	# (Debian 13) stops with error 26 ".netrc error". Either way no credential
	# may reach the server.
	if has "$NETRC_PASS" "$OUT" "$ERR" || has "$b64" "$OUT" "$ERR" || grep -qi '^authorization:' "$OUT"; then
		fail "inside: curl sends no netrc credentials" "credentials sent: $(snip "$OUT")"
	elif [ "$RC" -eq 0 ] && has "GET /asx" "$OUT"; then
		pass "inside: curl sends no netrc credentials (request made without them)"
	elif [ "$RC" -eq 26 ] && has "netrc" "$ERR"; then
		pass "inside: curl sends no netrc credentials (curl refused: cannot read the netrc)"
	else
		fail "inside: curl sends no netrc credentials" "unexpected: $(why)"
	fi
	if command -v strace >/dev/null; then
		rm -f "$trace"
		run_in "$ALICE" strace -f -qq -e trace=open,openat,openat2 -o "$trace" \
			curl -sS --max-time 10 --netrc-file "$netrc" "$url"
		if grep -F "\"$netrc\"" "$trace" 2>/dev/null | grep -q 'EPERM'; then
			pass "inside: curl's open of the netrc fails with EPERM (strace)"
		else
			fail "inside: curl's open of the netrc fails with EPERM (strace)" \
				"trace: $(grep -F "$netrc" "$trace" 2>/dev/null | head -c 200 | tr '\n' '|'); $(why)"
		fi
		rm -f "$trace"
	fi
	stop_bg "$HTTP_PID"
}

# The home list replaced, from inside, by a symlink to a listed file whose
# lines look like paths: the warnings must not echo them (the list is read
# outside the sandbox).
check_list_links_listed_file() {
	local home_list=$AH/$HOME_LIST_REL leak="/asx-leak-$TOK/not-there"
	put "$ALICE" "$AH/paths-secret.txt" 0600 "$leak"
	alice_list_plus "$AH/paths-secret.txt"
	run_in "$ALICE" sh -c 'ln -sfn "$1" "$2" && agent-sandbox-exec cat "$1"' sh \
		"$AH/paths-secret.txt" "$home_list"
	ok "a home list linked to a listed file: its lines are not echoed" "$(snip "$ERR")" \
		eval '! has "asx-leak-$TOK" "$OUT" "$ERR"'
	expect_denied "a home list linked to a listed file: the file stays denied" "$leak"
	rm -f "$home_list" "$AH/paths-secret.txt"
	alice_list_default
}

# 11. Bad lines in a home list: warnings naming file:line, launch still works,
# valid lines still enforced; a symlink entry is skipped
check_bad_list_lines() {
	local list=$T/bad.list long got f
	long=/$(printf '%05000d' 0 | tr 0 a)
	{
		printf '# a comment line\n'                 # 1
		printf '\n'                                 # 2
		printf '   \t \n'                           # 3  blank after trimming
		printf 'asx/relative/path.txt\n'            # 4  warn: relative
		printf '%s\n' "$AH/asx-missing.txt"         # 5  missing: watched, denied once created
		printf '%s\n' "$AH/asx-dir"                 # 6  warn: directory
		printf '%s/asx-\377\376-bad.txt\n' "$AH"    # 7  not UTF-8, missing: watched
		printf '%s\r\n' "$AH/asx-crlf.txt"          # 8  CRLF: enforced
		printf ' \t%s \t\n' "$AH/asx-padded.txt"    # 9  padded: enforced
		printf '%s\n' "$AH/asx-symlink.txt"         # 10 warn: last component is a symlink
		printf '%s\n' "$TILDE/asx-tilde.txt"        # 11 ~/: enforced
		printf '%s\n' "$S"                          # 12 enforced
		printf '%s\n' "$long"                       # 13 warn: too long
		printf '%s' "$AH/asx-lastline.txt"          # 14 no final newline: enforced
	} >"$list"
	write_list "$ALICE" "$list"

	run_in "$ALICE" true
	cp "$ERR" "$T/bad.err"
	expect_rc "launch succeeds despite bad home-list lines" 0
	got=$(warned_lines "$T/bad.err" "$HOME_LIST_REL")
	if [ "$got" = "4 6 10 13" ]; then
		pass "warnings '$LAUNCHER: warning: <list>:<line>: ...' for exactly the bad lines"
	else
		fail "warnings '$LAUNCHER: warning: <list>:<line>: ...' for exactly the bad lines" \
			"warned lines '$got', expected '4 6 10 13'; stderr: $(snip "$T/bad.err")"
	fi
	if grep -a "^$LAUNCHER: warning: " "$T/bad.err" | grep -qavE "^$LAUNCHER: warning: [^:]*:[0-9]+: "; then
		fail "every warning has the form <file>:<line>: <message>" "$(snip "$T/bad.err")"
	else
		pass "every warning has the form <file>:<line>: <message>"
	fi
	for f in crlf padded tilde lastline; do
		run_in "$ALICE" cat "$AH/asx-$f.txt"
		expect_denied "valid entry ($f) in a list with bad lines is enforced" "asx-$f-$TOK"
	done
	run_in "$ALICE" cat "$S"
	expect_denied "valid absolute entry in a list with bad lines is enforced" "$SECRET"
	run_in "$ALICE" cat "$AH/asx-symtarget.txt"
	expect_read "a symlink entry is skipped: its target stays readable" "asx-symtarget-$TOK"
	run_as "$ALICE" sh -c 'printf "%s\n" "$2" >"$1"' sh "$AH/asx-missing.txt" "asx-late-$TOK"
	run_as "$ALICE" sh -c 'printf "%s\n" "$2" >"$1"' sh "$(printf '%s/asx-\377\376-bad.txt' "$AH")" "asx-late8-$TOK"
	run_in "$ALICE" cat "$AH/asx-missing.txt"
	expect_denied "a listed path missing at one launch (no warning) and created later is denied" "asx-late-$TOK"
	run_in "$ALICE" cat "$(printf '%s/asx-\377\376-bad.txt' "$AH")"
	expect_denied "the same for a non-UTF-8 name" "asx-late8-$TOK"
	rm -f "$AH/asx-missing.txt" "$(printf '%s/asx-\377\376-bad.txt' "$AH")"
	alice_list_default
}

# A home list must be read with the user's credentials: a symlink to a root-only
# file must neither leak its lines in warnings nor have its entries enforced
check_list_not_read_as_root() {
	local home_list=$AH/$HOME_LIST_REL
	printf 'asx-root-only-line-%s\n%s\n' "$TOK" "$SRV/root-listed.txt" >"$T/root-only.list"
	chmod 0600 "$T/root-only.list"
	rm -f "$home_list"
	ln -s "$T/root-only.list" "$home_list"
	chown -h "$ALICE:$ALICE" "$home_list"
	run_in "$ALICE" cat "$SRV/root-listed.txt"
	if has "asx-root-only-line-$TOK" "$OUT" "$ERR"; then
		fail "a home list pointing at a root-only file leaks nothing" "its contents appear: $(snip "$ERR")"
	else
		pass "a home list pointing at a root-only file leaks nothing"
	fi
	if [ "$RC" -eq 2 ] || { [ "$RC" -eq 0 ] && has "asx-root-listed-$TOK" "$OUT"; }; then
		pass "entries of a list the user cannot read are not enforced"
	else
		fail "entries of a list the user cannot read are not enforced" "$(why)"
	fi
	alice_list_default
}

# A FIFO as home list must not hang the daemon for other users
check_list_fifo() {
	local home_list=$AH/$HOME_LIST_REL bg
	rm -f "$home_list"
	run_as "$ALICE" mkfifo "$home_list"
	timeout -k 2 10 runuser -u "$ALICE" -- "$LAUNCHER" true </dev/null >"$T/fifo.out" 2>"$T/fifo.err" &
	bg=$!
	BG_PIDS+=("$bg")
	sleep 1
	run_in "$BOB" true
	expect_rc "$BOB's launch works while $ALICE's home list is a FIFO" 0
	# unblock whoever may be stuck opening the FIFO for reading
	timeout 2 sh -c ': > "$1"' sh "$home_list" 2>/dev/null
	stop_bg "$bg"
	alice_list_default
	ok "daemon still active after the FIFO list" "is-active: $(systemctl is-active "$UNIT" 2>&1)" daemon_active
	run_in "$ALICE" true
	expect_rc "$ALICE's next launch with a normal list works" 0
}

# 12. A launch from inside a sandbox works and re-reads the lists
check_nested_launch() {
	local d=$AH/asx-nest f=$AH/asx-fresh.txt bg rc
	run_in "$ALICE" "$LAUNCHER" true
	expect_rc "nested launch runs 'true' (exit 0)" 0
	run_in "$ALICE" "$LAUNCHER" cat "$S"
	expect_denied "nested launch: cat secret denied" "$SECRET"
	run_in "$ALICE" "$LAUNCHER" cat /proc/self/cgroup
	expect_cgroup "nested launch stays in uid-$ALICE_UID" "$ALICE_UID"

	# outer sandbox reads f, waits until f is listed, then launches again
	rm -rf "$d"
	install -d -o "$ALICE" -g "$ALICE" "$d"
	timeout -k 5 60 runuser -u "$ALICE" -- "$LAUNCHER" sh -c '
		cat "$2" > /dev/null && : > "$1/first-read-ok"
		: > "$1/waiting"; i=0
		while [ ! -e "$1/go" ] && [ "$i" -lt 300 ]; do sleep 0.1; i=$((i + 1)); done
		exec agent-sandbox-exec cat "$2"' sh "$d" "$f" </dev/null >"$T/nest.out" 2>"$T/nest.err" &
	bg=$!
	BG_PIDS+=("$bg")
	wait_for 20 test -e "$d/waiting"
	alice_list_plus "$f"
	touch "$d/go"
	wait_for 40 pid_gone "$bg"
	wait "$bg"
	rc=$?
	ok "nested re-read: the file was readable before it was listed" "outer sandbox: $(snip "$T/nest.err")" \
		test -e "$d/first-read-ok"
	if has "asx-fresh-$TOK" "$T/nest.out" "$T/nest.err"; then
		fail "nested launch re-reads the home list (newly listed file denied)" "content revealed"
	elif [ "$rc" -eq 0 ] || ! has "$EPERM_MSG" "$T/nest.err"; then
		fail "nested launch re-reads the home list (newly listed file denied)" "rc=$rc; stderr: $(snip "$T/nest.err")"
	else
		pass "nested launch re-reads the home list (newly listed file denied)"
	fi
	alice_list_default
}

# The sandboxed agent must not be able to lift its own denials by editing or
# redirecting its home list and launching again
check_nested_cannot_lift() {
	local fake=$AH/asx-fakehome
	run_in "$ALICE" sh -c '(: >"$1") 2>/dev/null; agent-sandbox-exec cat "$2"' sh "$AH/$HOME_LIST_REL" "$S"
	if has "$SECRET" "$OUT" "$ERR"; then
		fail "inside: emptying the home list + nested launch does not reveal the secret" \
			"secret revealed: the nested launch replaced the deny set with the edited list"
	else
		pass "inside: emptying the home list + nested launch does not reveal the secret"
	fi
	alice_list_default

	rm -rf "$fake"
	install -d -o "$ALICE" -g "$ALICE" "$fake" "$fake/.config" "$fake/.config/agent-sandbox-exec"
	install -o "$ALICE" -g "$ALICE" -m 0644 /dev/null "$fake/$HOME_LIST_REL"
	run_in "$ALICE" env HOME="$fake" XDG_CONFIG_HOME="$fake/.config" "$LAUNCHER" cat "$S"
	if has "$SECRET" "$OUT" "$ERR"; then
		fail "inside: nested launch with HOME/XDG_CONFIG_HOME pointing elsewhere does not reveal the secret" "secret revealed; rc=$RC"
	else
		pass "inside: nested launch with HOME/XDG_CONFIG_HOME pointing elsewhere does not reveal the secret"
	fi

	run_in "$ALICE" sh -c 'cd && mv .config/agent-sandbox-exec .config/asx-moved-away; agent-sandbox-exec cat "$1"' sh "$S"
	if has "$SECRET" "$OUT" "$ERR"; then
		fail "inside: renaming the list directory + nested launch does not reveal the secret" \
			"secret revealed: the nested launch found no home list and dropped its entries"
	else
		pass "inside: renaming the list directory + nested launch does not reveal the secret"
	fi
	rm -rf "$AH/.config/asx-moved-away" "$fake"
	alice_list_default
}

# 13. argv, exit status, PATH, environment, stdin pass through
check_exit_status() {
	local s got="" rc_out
	for s in 0 1 7 255; do
		run_in "$ALICE" sh -c "exit $s"
		got="$got $RC"
	done
	ok "exit statuses 0 1 7 255 pass through" "got:$got" test "$got" = " 0 1 7 255"
	run_as "$ALICE" sh -c 'kill -TERM $$'
	rc_out=$RC
	run_in "$ALICE" sh -c 'kill -TERM $$'
	ok "death by SIGTERM reported as outside (status $rc_out)" "inside: $RC" test "$RC" -eq "$rc_out"
}

check_argv_passthrough() {
	local args=('a b' $'c\nd' '' '  lead and trail  ' '--help' '--version' '-x' '*' '$HOME' $'\xff\xfe' 'é' "'\"\\")
	run_as "$ALICE" printf '[%s]\n' "${args[@]}"
	cp "$OUT" "$T/argv.out"
	run_in "$ALICE" printf '[%s]\n' "${args[@]}"
	if [ "$RC" -eq 0 ] && [ -s "$OUT" ] && cmp -s "$T/argv.out" "$OUT"; then
		pass "arguments (spaces, newlines, empty, options, globs, bytes) arrive unchanged"
	else
		fail "arguments (spaces, newlines, empty, options, globs, bytes) arrive unchanged" "got: $(snip "$OUT"); $(why)"
	fi
}

check_path_lookup() {
	run_in "$ALICE" id -u
	if [ "$RC" -eq 0 ] && [ "$(cat "$OUT")" = "$ALICE_UID" ]; then
		pass "PATH lookup: '$LAUNCHER id -u' prints $ALICE_UID"
	else
		fail "PATH lookup: '$LAUNCHER id -u' prints $ALICE_UID" "stdout: $(snip "$OUT"); $(why)"
	fi
	run_as "$ALICE" env PATH="$AH/asx-bin:$PATH" "$LAUNCHER" asx-hello
	expect_read "PATH lookup uses the caller's PATH (program in ~/asx-bin)" "asx-hello-$TOK"
	run_in "$ALICE" asx-no-such-program-$$
	if [ "$RC" -ne 0 ] && [ -s "$ERR" ]; then
		pass "a missing PROGRAM fails with a message"
	else
		fail "a missing PROGRAM fails with a message" "$(why)"
	fi
}

check_env_passthrough() {
	local v=$'spaces and\nnewline = "quotes"'
	run_as "$ALICE" env "ASX_TEST_VAR=$v" LD_LIBRARY_PATH=/asx/nonexistent env -0
	sort -z "$OUT" >"$T/env.out"
	run_as "$ALICE" env "ASX_TEST_VAR=$v" LD_LIBRARY_PATH=/asx/nonexistent "$LAUNCHER" env -0
	sort -z "$OUT" >"$T/env.in"
	if [ "$RC" -ne 0 ] || [ ! -s "$T/env.in" ]; then
		fail "environment identical inside and outside" "$(why)"
	elif cmp -s "$T/env.out" "$T/env.in"; then
		pass "environment identical inside and outside"
	else
		fail "environment identical inside and outside" \
			"differs: $(diff <(tr '\0' '\n' <"$T/env.out") <(tr '\0' '\n' <"$T/env.in") | grep '^[<>]' | head -c 300 | tr '\n' '|')"
	fi
}

check_stdin_passthrough() {
	local data
	data="asx-stdin-$TOK"
	RC=0
	printf '%s\n' "$data" | timeout -k 5 "$CMD_TIMEOUT" runuser -u "$ALICE" -- "$LAUNCHER" cat >"$OUT" 2>"$ERR" || RC=$?
	if [ "$RC" -eq 0 ] && [ "$(cat "$OUT")" = "$data" ]; then
		pass "stdin passes through"
	else
		fail "stdin passes through" "stdout: $(snip "$OUT"); $(why)"
	fi
}

# The launcher execs PROGRAM: PROGRAM's parent is the caller (runuser here)
check_launcher_execs() {
	same_io "the launcher execs PROGRAM (PROGRAM's parent is the caller)" "$ALICE" \
		sh -c 'cat "/proc/$PPID/comm"'
}

# Parallel launches of two users: all denied where listed, each in its own cgroup
check_concurrent_launches() {
	local i pids=() bad=""
	for i in 1 2 3 4 5 6; do
		(
			timeout -k 5 60 runuser -u "$ALICE" -- "$LAUNCHER" cat "$S" </dev/null >"$T/par-a$i.out" 2>"$T/par-a$i.err"
			echo $? >"$T/par-a$i.rc"
		) &
		pids+=("$!")
		(
			timeout -k 5 60 runuser -u "$BOB" -- "$LAUNCHER" cat /proc/self/cgroup </dev/null >"$T/par-b$i.out" 2>"$T/par-b$i.err"
			echo $? >"$T/par-b$i.rc"
		) &
		pids+=("$!")
	done
	wait "${pids[@]}"
	for i in 1 2 3 4 5 6; do
		if has "$SECRET" "$T/par-a$i.out" "$T/par-a$i.err" || [ "$(cat "$T/par-a$i.rc")" = 0 ] ||
			! has "$EPERM_MSG" "$T/par-a$i.err"; then
			bad="$bad alice#$i(rc=$(cat "$T/par-a$i.rc"): $(snip "$T/par-a$i.err"))"
		fi
		if [ "$(cat "$T/par-b$i.rc")" != 0 ] || ! in_sandbox_cgroup "$T/par-b$i.out" "$BOB_UID"; then
			bad="$bad bob#$i(rc=$(cat "$T/par-b$i.rc"): $(snip "$T/par-b$i.err"))"
		fi
	done
	ok "12 concurrent launches by two users: all denied/placed correctly" "${bad# }" test -z "$bad"
}

# A setuid child (sudo -> root) of the sandboxed agent stays confined
check_sudo_child() {
	if ! command -v sudo >/dev/null || ! command -v visudo >/dev/null; then
		skip "sudo check: sudo not installed"
		return
	fi
	printf '%s ALL=(root) NOPASSWD: /usr/bin/cat\n' "$ALICE" >"$T/sudoers"
	if ! visudo -cqf "$T/sudoers" >/dev/null 2>&1; then
		fail "sudo test rule is valid" "visudo rejected it"
		return
	fi
	install -m 0440 "$T/sudoers" "$SUDOERS_FILE"
	run_as "$ALICE" sudo -n /usr/bin/cat "$S"
	expect_read "outside: sudo -n cat works (control)" "$SECRET"
	run_in "$ALICE" sudo -n /usr/bin/cat "$S"
	expect_denied "inside: a root child via sudo is still denied" "$SECRET"
	run_in "$ALICE" sudo -n /usr/bin/cat /proc/self/cgroup
	expect_cgroup "inside: a root child via sudo stays in uid-$ALICE_UID" "$ALICE_UID"
	rm -f "$SUDOERS_FILE"
}

# A sandboxed process must not ptrace an unsandboxed process of the same user
# that reads the secret (strace -p would show the read() data). Yama is set to
# its most permissive mode (0, Debian's default) for the check so that the
# product's lsm/ptrace_access_check hook is what is tested; a control run of
# the same strace outside the sandbox must see the secret.
check_ptrace_outside() {
	local d=$AH/asx-ptrace bg pid scope=none what="inside: ptrace (strace -p) of the user's unsandboxed process is refused"
	local yama=/proc/sys/kernel/yama/ptrace_scope
	if ! command -v strace >/dev/null; then
		skip "ptrace check: strace not installed"
		return
	fi
	if [ -w "$yama" ]; then
		scope=$(cat "$yama")
		echo 0 > "$yama"
	fi
	if ! start_holder "$d" 'echo "$$" > "$1/pid"; i=0
		while [ "$i" -lt 400 ] && [ ! -e "$1/stop" ]; do cat "$2" > /dev/null; sleep 0.1; i=$((i + 1)); done' "$S"; then
		fail "$what" "reader did not start"
		[ "$scope" = none ] || echo "$scope" > "$yama"
		return
	fi
	bg=$HOLDER_BG pid=$HOLDER_PID
	run_as "$ALICE" timeout 3 strace -f -qq -s 256 -e trace=read -p "$pid"
	if has "$SECRET" "$OUT" "$ERR"; then
		pass "control: outside, strace -p of the reader shows the secret"
	else
		fail "control: outside, strace -p of the reader shows the secret" "$(snip "$ERR")"
	fi
	run_in "$ALICE" timeout 3 strace -f -qq -s 256 -e trace=read -p "$pid"
	if has "$SECRET" "$OUT" "$ERR"; then
		fail "$what" "strace -p showed the secret being read"
	elif has "Operation not permitted" "$ERR"; then
		pass "$what"
	else
		fail "$what" "no EPERM from strace: $(snip "$ERR")"
	fi
	run_in "$ALICE" python3 -c 'import sys
try:
    open("/proc/%s/mem" % sys.argv[1], "rb")
    print("opened")
except OSError as e:
    print("refused", e.errno)' "$pid"
	if has "refused" "$OUT"; then
		pass "inside: /proc/PID/mem of the user's unsandboxed process cannot be opened"
	else
		fail "inside: /proc/PID/mem of the user's unsandboxed process cannot be opened" "$(snip "$OUT")"
	fi
	touch "$d/stop"
	stop_bg "$bg"
	[ "$scope" = none ] || echo "$scope" > "$yama"
}

# A sandboxed process cannot move itself out of its cgroup
check_cgroup_escape() {
	local targets=("$CGROOT/cgroup.procs" "$CGROOT/agent-sandbox-exec/cgroup.procs")
	[ -e "$CGROOT/user.slice/cgroup.procs" ] && targets+=("$CGROOT/user.slice/cgroup.procs")
	run_in "$ALICE" sh -c 's=$1; shift
		for f in "$@"; do (echo "$$" > "$f") 2>/dev/null && echo "moved-via $f"; done
		cat /proc/self/cgroup; cat "$s"' sh "$S" "${targets[@]}"
	if grep -q '^moved-via' "$OUT" || ! in_sandbox_cgroup "$OUT" "$ALICE_UID"; then
		fail "inside: writing cgroup.procs elsewhere does not move the process out" "$(snip "$OUT")"
	else
		pass "inside: writing cgroup.procs elsewhere does not move the process out"
	fi
	expect_hidden "inside: after the escape attempt the secret is still denied" "$SECRET"
}

# Python that talks to the daemon's socket by hand, as an agent could, and
# prints the daemon's reply (or "closed" / "no reply"). argv[1] is the mode:
#   name PID   a well-formed request naming PID ("self": the connecting process)
#   raw TEXT   TEXT as the message (escapes like \xff allowed)
#   big N      a message of N bytes
#   silent     connect and send nothing; prints "closed after S s" at EOF
#   passed WHO connect, fork, and let the child send the request (WHO: "child"
#              names the child, "parent" the parent, which waits meanwhile)
readonly FORGE_PY='import os, socket, sys, time
s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
t0 = time.monotonic()
s.connect("/run/agent-sandbox-exec/socket")
mode = sys.argv[1]
def req(pid):
    return ("version=2\npid=%d\n" % pid).encode()
def answer(t=30):
    s.settimeout(t)
    try:
        m = s.recv(70000)
    except socket.timeout:
        return "no reply"
    return m.decode("utf-8", "replace") if m else "closed"
if mode == "name":
    s.send(req(os.getpid() if sys.argv[2] == "self" else int(sys.argv[2])))
    print(answer())
elif mode == "raw":
    s.send(sys.argv[2].encode().decode("unicode_escape").encode("latin-1"))
    print(answer())
elif mode == "big":
    s.send(b"x" * int(sys.argv[2]))
    print(answer())
elif mode == "silent":
    # From before the connect, on the monotonic clock: the deadline of the daemon runs from its
    # accept, which comes after the connect (the wall clock of a guest may step).
    a = answer(20)
    print("%s after %d s" % ("closed" if a == "closed" else a, time.monotonic() - t0))
elif mode == "passed":
    parent = os.getpid()
    child = os.fork()
    if child == 0:
        s.send(req(os.getpid() if sys.argv[2] == "child" else parent))
        print(answer())
        sys.stdout.flush()
        os._exit(0)
    s.close()
    os.waitpid(child, 0)'

# forge USER [run_in] MODE ARGS...: run FORGE_PY as USER (outside, or inside
# with run_in); the reply in $OUT
forge() {
	local user=$1 how=run_as
	shift
	if [ "$1" = run_in ]; then how=run_in; shift; fi
	"$how" "$user" python3 -c "$FORGE_PY" "$@"
}

# A request written by hand from inside the sandbox that names one of the
# user's processes OUTSIDE the sandbox (not a launcher) is refused: the process
# stays outside, and nothing of the list is re-applied (an emptied home list
# does not free the secret). The same for a request the connecting process
# makes for itself (it is not a launcher), from inside and from outside.
check_forged_request() {
	local d=$AH/asx-forged bg pid list="$AH/$HOME_LIST_REL"
	if ! start_holder "$d" 'echo "$$" > "$1/pid"; exec sleep 50'; then
		fail "forged request: an outside process of the user starts" "no pid"
		return
	fi
	bg=$HOLDER_BG pid=$HOLDER_PID
	cp -p "$list" "$d/list.saved"
	# Inside the sandbox, as an agent would: empty the list, then forge.
	run_in "$ALICE" sh -c '(: >"$3") 2>/dev/null; python3 -c "$4" name "$1"; python3 -c "$4" name self; cat "$2"' \
		sh "$pid" "$S" "$list" "$FORGE_PY"
	if has "status=refused" "$OUT" && has "but process" "$OUT" && has "not running agent-sandbox-exec" "$OUT"; then
		pass "forged requests from inside (naming an outside process; naming the connecting non-launcher) are refused"
	else
		fail "forged requests from inside (naming an outside process; naming the connecting non-launcher) are refused" "$(snip "$OUT")"
	fi
	if in_sandbox_cgroup "/proc/$pid/cgroup" "$ALICE_UID"; then
		fail "forged request: the named outside process stays outside" "$(cat "/proc/$pid/cgroup")"
	else
		pass "forged request: the named outside process stays outside"
	fi
	if has "$SECRET" "$OUT"; then
		fail "forged request with an emptied home list frees nothing" "the secret was read"
	else
		pass "forged request with an emptied home list frees nothing"
	fi
	cp -p "$d/list.saved" "$list"
	forge "$ALICE" name self
	ok "a request an outside non-launcher process makes for itself is refused" "$(snip "$OUT")" \
		eval 'has "status=refused" "$OUT" && has "not running agent-sandbox-exec" "$OUT"'
	stop_bg "$bg"
}

# The request socket, by hand: requests naming another user's process or a
# setuid process, a connection passed to another process, garbage, oversized
# and empty messages, and a silent connection are all refused with a clear
# reason (or closed), and move nothing; a good launch works afterwards.
check_request_channel() {
	local bp sp cg what
	timeout -k 5 60 runuser -u "$BOB" -- sleep 50 </dev/null >/dev/null 2>&1 &
	bp=$!
	BG_PIDS+=("$bp")
	install -m 4755 -o root "$(command -v sleep)" "$SRV/asx-suid-sleep"
	timeout -k 5 60 runuser -u "$ALICE" -- "$SRV/asx-suid-sleep" 50 </dev/null >/dev/null 2>&1 &
	sp=$!
	BG_PIDS+=("$sp")
	wait_for 10 eval '[ -n "$(pgrep -u "$BOB_UID" -x sleep)" ] && [ -n "$(pgrep -f "^$SRV/asx-suid-sleep")" ]'
	bp=$(pgrep -u "$BOB_UID" -x sleep | head -n 1) sp=$(pgrep -f "^$SRV/asx-suid-sleep" | head -n 1)
	ok "the setuid process runs as $ALICE with euid root" "uids '$(uids_of "${sp:-0}")'" \
		test "$(uids_of "${sp:-0}")" = "$ALICE_UID 0 0 0"
	for what in "another user's process:$bp" "a setuid process of $ALICE:$sp"; do
		forge "$ALICE" run_in name "${what##*:}"
		cg=$(cat "/proc/${what##*:}/cgroup" 2>&1)
		ok "a request naming ${what%%:*} is refused, and it is not moved" "$(snip "$OUT"); cgroup $cg" \
			eval 'has "status=refused" "$OUT" && has "but process" "$OUT" && ! in_sandbox_cgroup "/proc/${what##*:}/cgroup" "$ALICE_UID" && ! in_sandbox_cgroup "/proc/${what##*:}/cgroup" "$BOB_UID"'
	done
	forge "$ALICE" passed child
	ok "a connection passed to a child that asks for itself is refused" "$(snip "$OUT")" \
		eval 'has "status=refused" "$OUT" && has "but process" "$OUT"'
	forge "$ALICE" passed parent
	ok "a connection passed to a child that asks for the connecting process is refused (not a launcher)" "$(snip "$OUT")" \
		eval 'has "status=refused" "$OUT" && has "not running agent-sandbox-exec" "$OUT"'
	forge "$ALICE" raw '\xff\xfe garbage'
	ok "a garbage request is refused as malformed" "$(snip "$OUT")" \
		eval 'has "status=refused" "$OUT" && has "bad request: malformed: not UTF-8" "$OUT"'
	forge "$ALICE" raw 'version=1\npid=1\n'
	ok "a request in the 0.5.0 protocol is refused, naming the versions" "$(snip "$OUT")" \
		eval 'has "status=refused" "$OUT" && has "this daemon speaks 2" "$OUT"'
	forge "$ALICE" big 100000
	ok "an oversized request is refused, naming its size" "$(snip "$OUT")" \
		eval 'has "status=refused" "$OUT" && has "100000 bytes, more than the 8192 allowed" "$OUT"'
	forge "$ALICE" silent
	ok "a silent connection is closed after the 5 s deadline" "$(snip "$OUT")" \
		eval 'grep -qE "^closed after [5-9] s" "$OUT"'
	run_in "$ALICE" cat "$S"
	expect_denied "after the forgeries a launch works and denies the secret" "$SECRET"
	stop_bg "$bp"
	stop_bg "$sp"
	rm -f "$SRV/asx-suid-sleep"
}

# Python that floods the daemon's request channel as one user for argv[1]
# seconds, as a hostile user could: argv[2] connections held open (some
# silent, some sending garbage or oversized messages), argv[3] forked
# connectors that connect, send garbage or nothing, and close, as fast as
# they can, and files written in the request directory 0.5.0 used (a
# directory under a request name with a 32 MiB file in it, a partial request
# preallocated with FALLOC_FL_KEEP_SIZE, garbage requests renamed into place).
# Prints key=value counts of what succeeded.
readonly FLOOD_PY='import ctypes, os, resource, socket, sys, time
run = "/run/agent-sandbox-exec"
sock, req = run + "/socket", run + "/req"
end = time.time() + float(sys.argv[1])
hold_max, children = int(sys.argv[2]), int(sys.argv[3])
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
try:
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, hold_max + 256), hard))
except (ValueError, OSError):
    pass
junk = [b"\xff\xfe garbage", b"version=1\npid=1\n", b"no equals sign\n", b"x" * 100000,
        b"version=2\npid=1\n", b"version=2\npid=" + str(os.getpid()).encode() + b"\n"]
def connect():
    s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    s.settimeout(0.5)
    try:
        s.connect(sock)
        return s
    except OSError:
        s.close()
        return None
kids = []
for k in range(children):
    pid = os.fork()
    if pid == 0:
        os.nice(9)
        n = 0
        while time.time() < end:
            s = connect()
            if s is None:
                time.sleep(0.001)
                continue
            n += 1
            try:
                if n % 3:
                    s.send(junk[n % len(junk)])
            except OSError:
                pass
            s.close()
        os._exit(0)
    kids.append(pid)
libc = ctypes.CDLL(None, use_errno=True)
stats = {"held": 0, "filled_bytes": 0, "files_made": 0, "renamed": 0}
def big(path, keep_size):
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        if keep_size:
            ok = libc.fallocate(fd, 1, ctypes.c_long(0), ctypes.c_long(32 << 20)) == 0
        else:
            os.posix_fallocate(fd, 0, 32 << 20)
            ok = True
        if ok:
            stats["filled_bytes"] += 32 << 20
            if keep_size:
                os.fchmod(fd, 0o644)
    finally:
        os.close(fd)
for attempt in ("dir", "partial", "plain"):
    tok = os.urandom(16).hex()
    try:
        if attempt == "dir":
            os.mkdir(req + "/req." + tok)
            big(req + "/req." + tok + "/blob", False)
        elif attempt == "partial":
            big(req + "/.req." + tok, True)
        else:
            big(run + "/asx-flood." + tok, False)
        stats["files_made"] += 1
    except OSError:
        pass
held = []
while time.time() < end:
    for _ in range(20 if stats["renamed"] < 500 else 0):
        tok = os.urandom(16).hex()
        try:
            fd = os.open(req + "/.req." + tok, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            os.write(fd, junk[len(held) % len(junk)][:900])
            os.close(fd)
            os.rename(req + "/.req." + tok, req + "/req." + tok)
            stats["renamed"] += 1
        except OSError:
            pass
    while len(held) < hold_max and time.time() < end:
        s = connect()
        if s is None:
            time.sleep(0.001)
            break
        if len(held) % 5 == 1:
            try:
                s.send(junk[len(held) % len(junk)])
            except OSError:
                pass
        held.append(s)
    stats["held"] = max(stats["held"], len(held))
    time.sleep(0.01)
for pid in kids:
    os.waitpid(pid, 0)
print(" ".join("%s=%d" % kv for kv in sorted(stats.items())))'

# avail_run: bytes free on the file system of /run
avail_run() { df --output=avail -B1 /run | tail -n 1 | tr -d ' '; }

# One user floods the request channel (thousands of connections held open,
# garbage, oversized and silent connections, a swarm of forked connectors, and
# files written where 0.5.0 kept its request directory) while another
# launches: the other's launches succeed in their normal time, /run keeps its
# free space, the daemon's journal lines from the flood stay bounded, and the
# flooder can launch again afterwards.
check_request_flood() {
	local flood_s=40 t0 before after ms base bad="" i lines bg stats held
	run_in "$BOB" cat /proc/self/cgroup
	t0=$(date +%s%N)
	run_in "$BOB" cat /proc/self/cgroup
	base=$((($(date +%s%N) - t0) / 1000000))
	expect_cgroup "flood: before, $BOB launches (took $base ms)" "$BOB_UID"
	before=$(avail_run)
	sleep 1
	t0=$(date +%s)
	# niced: the test measures the daemon's admission, not CPU scheduling
	# (any busy loop competes for the CPU with a launch). The process that
	# holds connections runs at nice 10, its 24 busy connectors at 19, so
	# that on one vCPU they do not starve it of the time to open its 1500 and more.
	timeout -k 5 $((flood_s + 30)) runuser -u "$ALICE" -- nice -n 10 \
		python3 -c "$FLOOD_PY" "$flood_s" 3000 24 </dev/null >"$T/flood.out" 2>"$T/flood.err" &
	bg=$!
	BG_PIDS+=("$bg")
	sleep 8
	for i in 1 2 3 4 5; do
		ms=$(date +%s%N)
		run_in "$BOB" cat /proc/self/cgroup
		ms=$((($(date +%s%N) - ms) / 1000000))
		note "flood: $BOB's launch $i took $ms ms (before the flood: $base ms)"
		if [ "$RC" -ne 0 ] || ! in_sandbox_cgroup "$OUT" "$BOB_UID" || [ "$ms" -gt 15000 ]; then
			bad="$bad #$i(${ms} ms, $(why))"
		fi
		sleep 2
	done
	ok "flood: 5 launches of $BOB during $ALICE's flood succeed, each within 15 s" "${bad# }" test -z "$bad"
	wait "$bg"
	stats=$(cat "$T/flood.out")
	note "flood: $ALICE's flooder: ${stats:-<no output>} $(snip "$T/flood.err")"
	held=$(sed -n 's/.*held=\([0-9]*\).*/\1/p' "$T/flood.out")
	# Real: well past the daemon's total cap (src/policy/admission.rs: MAX_TOTAL, 1024). It
	# aims at 3000 in 40 s; a host loaded with other guests reached 1902.
	ok "flood: $ALICE held at least 1500 connections open at once (the flood was real)" \
		"held '${held:-}'" test "${held:-0}" -ge 1500
	sleep 3 # the daemon's housekeeping
	after=$(avail_run)
	note "flood: /run had $before bytes free before the flood, $after after it"
	ok "flood: /run keeps its free space (at most 16 MiB less)" \
		"before $before, after $after bytes free: $ALICE's files stay in /run" \
		test "$after" -ge $((before - (16 << 20)))
	lines=$(find "$RUN_DIR" -user "$ALICE" 2>/dev/null | head -n 5)
	ok "flood: no file of $ALICE under $RUN_DIR" "found: $lines" test -z "$lines"
	find "$RUN_DIR" -depth -user "$ALICE" -delete 2>/dev/null
	lines=$(journalctl -q -u "$UNIT" --since "@$t0" -o cat 2>/dev/null | wc -l)
	journalctl -q -u "$UNIT" --since "@$t0" -o cat 2>/dev/null | head -n 40 | sed 's/^/# journal: /'
	ok "flood: the daemon logged at most 40 lines during the flood" "$lines lines" test "$lines" -le 40
	run_in "$ALICE" cat "$S"
	expect_denied "flood: afterwards $ALICE launches again, and the secret is denied" "$SECRET"
}

# resolver_pid ROLE...: pid of the daemon's resolver process with these
# arguments ("base", or "user UID"); empty if there is none
resolver_pid() {
	pgrep -P "$(main_pid)" -x -f "agent-sandbox-exec-resolver $*" | head -n 1
}

# uids_of PID: "real effective saved fs" uids of PID
uids_of() { awk '/^Uid:/ { print $2, $3, $4, $5 }' "/proc/$1/status" 2>/dev/null; }

# resolver_replaced WHAT PID CMD...: CMD, run as alice against her resolver
# PID, succeeds (same uid); the next launch still denies the secret, and
# another resolver process serves it
resolver_replaced() {
	local what=$1 pid=$2 now
	shift 2
	run_as "$ALICE" "$@"
	ok "$what: $1 succeeds (same uid)" "$(why)" test "$RC" -eq 0
	run_in "$ALICE" cat "$S"
	expect_denied "$what: the next launch works and denies the secret" "$SECRET"
	now=$(resolver_pid user "$ALICE_UID")
	ok "$what: another process serves it" "now '$now', was $pid" eval '[ -n "$now" ] && [ "$now" != "$pid" ]'
}

# The daemon's list resolvers live on between launches (a base-list one as
# root, a user one as the user). The user can kill, prlimit or stop the one
# that runs as them: that costs at most the launch in flight, never a listed
# file. A group added to the user is picked up by the next launch. A
# resolver's pid is not accepted as a launcher's.
check_resolvers() {
	local up bp what g2dir="$SRV/grp2"
	run_in "$ALICE" true
	up=$(resolver_pid user "$ALICE_UID") bp=$(resolver_pid base)
	ok "after a launch, $ALICE's resolver process stays, running as $ALICE" \
		"pid '$up', uids '$(uids_of "${up:-0}")'" \
		eval '[ -n "$up" ] && [ "$(uids_of "$up")" = "$ALICE_UID $ALICE_UID $ALICE_UID $ALICE_UID" ]'
	ok "after a launch, a base-list resolver process stays, running as root" \
		"pid '$bp', uids '$(uids_of "${bp:-0}")'" \
		eval '[ -n "$bp" ] && [ "$(uids_of "$bp")" = "0 0 0 0" ]'
	[ -n "$up" ] || return
	run_as "$ALICE" cat "/proc/$up/environ"
	ok "$ALICE cannot read her resolver's /proc/PID/environ (not dumpable)" "$(why)" test "$RC" -ne 0
	run_in "$ALICE" cat "$S"
	expect_denied "a relaunch denies the secret" "$SECRET"
	ok "a relaunch reuses the resolver process" "now '$(resolver_pid user "$ALICE_UID")', was $up" \
		test "$(resolver_pid user "$ALICE_UID")" = "$up"

	# A request naming the resolver (it runs this binary as the user).
	forge "$ALICE" name "$up"
	ok "a request naming $ALICE's resolver process is refused" "$(snip "$OUT")" \
		eval 'has "status=refused" "$OUT" && has "names process $up, but process" "$OUT"'
	ok "the resolver process stays out of the sandbox" "$(cat "/proc/$up/cgroup" 2>&1)" \
		eval '! in_sandbox_cgroup "/proc/$up/cgroup" "$ALICE_UID"'

	resolver_replaced "after $ALICE SIGKILLs her resolver" "$up" kill -KILL "$up"
	up=$(resolver_pid user "$ALICE_UID")
	resolver_replaced "after $ALICE lowers her resolver's open-file limit" "$up" \
		prlimit --pid "$up" --nofile=4:4
	up=$(resolver_pid user "$ALICE_UID")

	# From inside, as an agent would: take the secret off the list, stop the
	# resolver, launch, kill that launcher while the daemon waits, go on.
	# The dead launcher must not count as a launch from outside.
	what="a launch from inside whose launcher dies before the answer"
	run_in "$ALICE" sh -c 'list=$1 s=$2
u=$(pgrep -u "$(id -u)" -f "^agent-sandbox-exec-resolver user" | head -n 1)
[ -n "$u" ] || { echo "no resolver" >&2; exit 3; }
grep -vF "secret.txt" "$list" >"$list.new" && mv "$list.new" "$list"
kill -STOP "$u"
agent-sandbox-exec true & l=$!
sleep 1
kill -KILL "$l"; wait "$l" 2>/dev/null
kill -CONT "$u"
sleep 2
cat "$s"' sh "$AH/$HOME_LIST_REL" "$S"
	expect_denied "$what: the secret stays denied" "$SECRET"
	alice_list_default

	what="after $ALICE stops her resolver (SIGSTOP)"
	run_as "$ALICE" kill -STOP "$up"
	run_in "$ALICE" true
	ok "$what: the launch is refused (exit 2) after the deadline" "$(why)" \
		eval '[ "$RC" -eq 2 ] && has "took longer than" "$ERR"'
	run_in "$ALICE" cat "$S"
	expect_denied "$what: the launch after it works and denies the secret" "$SECRET"

	# A directory only group $GROUP2 may enter, with a listed file in it.
	what="after $ALICE joins a group"
	if ! { groupadd "$GROUP2" && install -d -m 0750 -o root -g "$GROUP2" "$g2dir" &&
		put root "$g2dir/secret2" 0644 "grp2-$SECRET"; }; then
		fail "$what: setup" "groupadd/install failed"
		return
	fi
	alice_list_plus "$g2dir/secret2"
	run_in "$ALICE" true
	ok "$what: before, a listed file she cannot check refuses the launch" "$(why)" \
		eval '[ "$RC" -eq 2 ] && has "Permission denied" "$ERR"'
	usermod -aG "$GROUP2" "$ALICE"
	run_in "$ALICE" cat "$g2dir/secret2"
	expect_denied "$what: the next launch resolves the file with the new group and denies it" "grp2-$SECRET"
	run_as "$ALICE" cat "$g2dir/secret2"
	expect_read "$what: outside, $ALICE reads it" "grp2-$SECRET"
	alice_list_default
	gpasswd -d "$ALICE" "$GROUP2" >/dev/null 2>&1
	groupdel "$GROUP2"
	rm -rf "$g2dir"
}

# 7. Daemon restart: a running sandbox stays enforced throughout; new launches work
check_daemon_restart() {
	local old new ppid
	if ! start_prober restart "$ALICE" "$S"; then
		fail "long-running sandboxed reader starts" "$(snip "$T/probe-restart.err")"
		stop_prober restart
		return
	fi
	prober_advance restart 3 10
	prober_verdict "long-running sandbox is denied before the restart" restart
	old=$(main_pid)
	DAEMON_TOUCHED=1
	timeout 240 systemctl restart "$UNIT" >"$T/restart.log" 2>&1
	wait_for 30 daemon_active
	new=$(main_pid)
	ok "daemon restarted and active (MainPID $old -> $new)" "$(snip "$T/restart.log"); is-active: $(systemctl is-active "$UNIT")" \
		daemon_replaced "$old"
	if prober_advance restart 3 10; then
		prober_verdict "after the restart the same long-running sandbox is still denied" restart
	else
		fail "after the restart the same long-running sandbox is still denied" "it made no new attempts: $(snip "$T/probe-restart.err")"
	fi
	ppid=$(cat "${PROBER_DIR[restart]}/pid" 2>/dev/null)
	ok "the long-running sandbox is still in uid-$ALICE_UID" "cgroup: $(snip "/proc/$ppid/cgroup")" \
		in_sandbox_cgroup "/proc/$ppid/cgroup" "$ALICE_UID"
	run_in "$ALICE" cat "$S"
	expect_denied "after the restart a new launch is denied" "$SECRET"
	run_in "$ALICE" true
	expect_rc "after the restart a new launch runs (exit 0)" 0
	stop_prober restart
	ok "no read succeeded at any time around the restart" "$(snip "${PROBER_DIR[restart]}/leak")" \
		test ! -s "${PROBER_DIR[restart]}/leak"
}

# SIGKILL of the daemon: enforcement of running sandboxes survives, daemon comes back
check_daemon_crash() {
	local old
	if ! start_prober crash "$ALICE" "$S"; then
		fail "long-running sandboxed reader starts" "$(snip "$T/probe-crash.err")"
		stop_prober crash
		return
	fi
	old=$(main_pid)
	DAEMON_TOUCHED=1
	systemctl kill --kill-whom=main --signal=SIGKILL "$UNIT"
	if prober_advance crash 5 10; then
		prober_verdict "right after SIGKILL of the daemon a running sandbox is still denied" crash
	else
		fail "right after SIGKILL of the daemon a running sandbox is still denied" "no attempts: $(snip "$T/probe-crash.err")"
	fi
	if ! wait_for 20 daemon_replaced "$old"; then
		daemon_ensure_running
	fi
	ok "daemon active again after SIGKILL" "is-active: $(systemctl is-active "$UNIT" 2>&1)" daemon_replaced "$old"
	prober_advance crash 3 10
	prober_verdict "after the daemon came back the running sandbox is still denied" crash
	run_in "$ALICE" cat "$S"
	expect_denied "after the daemon came back a new launch is denied" "$SECRET"
	run_in "$ALICE" true
	expect_rc "after the daemon came back a new launch runs" 0
	stop_prober crash
}

# A frozen (SIGSTOP) daemon: the launch must not run PROGRAM and must not hang forever
check_daemon_frozen() {
	local CMD_TIMEOUT=45
	rm -f "$MARKER"
	DAEMON_TOUCHED=1
	systemctl kill --kill-whom=main --signal=SIGSTOP "$UNIT"
	run_in "$ALICE" touch "$MARKER"
	systemctl kill --kill-whom=main --signal=SIGCONT "$UNIT"
	if [ "$RC" -eq 2 ] && [ ! -e "$MARKER" ]; then
		pass "launch against a frozen daemon refuses (exit 2), PROGRAM not run"
	else
		fail "launch against a frozen daemon refuses (exit 2), PROGRAM not run" "marker: $([ -e "$MARKER" ] && echo created || echo absent); $(why)"
	fi
	sleep 2
	ok "no late start of PROGRAM after the daemon thaws" "marker was created" test ! -e "$MARKER"
	rm -f "$MARKER"
	daemon_ensure_running
	run_in "$ALICE" true
	expect_rc "launch works after the daemon thaws" 0
}

# 9. Fail closed: daemon stopped -> exit 2, one line, PROGRAM not run; running
# sandboxes stay enforced; the daemon starts again
check_fail_closed() {
	if ! start_prober stopped "$ALICE" "$S"; then
		fail "long-running sandboxed reader starts" "$(snip "$T/probe-stopped.err")"
		stop_prober stopped
		return
	fi
	DAEMON_TOUCHED=1
	timeout 90 systemctl stop "$UNIT" >"$T/stop.log" 2>&1
	ok "daemon stopped" "is-active: $(systemctl is-active "$UNIT" 2>&1)" wait_for 30 daemon_inactive
	ok "$RUN_DIR/ready absent while stopped" "it exists" test ! -e "$RUN_DIR/ready"
	rm -f "$MARKER"
	run_in "$ALICE" touch "$MARKER"
	if [ "$RC" -eq 2 ] && [ "$(wc -l <"$ERR")" -eq 1 ] && grep -q "^$LAUNCHER: " "$ERR"; then
		pass "daemon stopped: launch exits 2 with one '$LAUNCHER: ...' line"
	else
		fail "daemon stopped: launch exits 2 with one '$LAUNCHER: ...' line" "$(why)"
	fi
	ok "daemon stopped: PROGRAM did not run ($MARKER absent)" "marker exists" test ! -e "$MARKER"
	rm -f "$MARKER"
	if prober_advance stopped 3 10; then
		prober_verdict "daemon stopped: a sandbox started earlier is still denied" stopped
	else
		fail "daemon stopped: a sandbox started earlier is still denied" "no attempts: $(snip "$T/probe-stopped.err")"
	fi
	timeout 240 systemctl start "$UNIT" >"$T/start.log" 2>&1
	ok "daemon active again after start" "$(snip "$T/start.log"); is-active: $(systemctl is-active "$UNIT" 2>&1)" \
		wait_for 30 daemon_active
	run_in "$ALICE" true
	expect_rc "launch works after the daemon was started again" 0
	stop_prober stopped
	ok "no read succeeded while the daemon was stopped" "$(snip "${PROBER_DIR[stopped]}/leak")" \
		test ! -s "${PROBER_DIR[stopped]}/leak"
}

# An impostor: with the daemon stopped, a socket listened on by a user (moved
# into place by root, as a misconfiguration could) and a ready file naming a
# live process. The launcher refuses because the listening end is not root's,
# and PROGRAM does not run.
readonly IMPOSTOR_PY='import os, socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
s.bind(sys.argv[1])
s.listen(8)
open(sys.argv[2], "w").write("%d\n" % os.getpid())
s.settimeout(40)
while True:
    c, _ = s.accept()
    c.recv(2048)
    c.send(b"status=ok\n")
    c.close()'

check_socket_impostor() {
	local d=/run/asx-impostor bg
	DAEMON_TOUCHED=1
	timeout 90 systemctl stop "$UNIT" >"$T/stop.log" 2>&1
	wait_for 30 daemon_inactive
	rm -rf "$d"
	install -d -m 0755 -o root "$RUN_DIR"
	install -d -m 0755 -o "$ALICE" "$d"
	timeout -k 5 50 runuser -u "$ALICE" -- python3 -c "$IMPOSTOR_PY" "$d/socket" "$d/pid" </dev/null >/dev/null 2>&1 &
	bg=$!
	BG_PIDS+=("$bg")
	if wait_for 10 test -s "$d/pid" && mv "$d/socket" "$RUN_DIR/socket" && cp "$d/pid" "$RUN_DIR/ready"; then
		rm -f "$MARKER"
		run_in "$ALICE" touch "$MARKER"
		ok "a socket listened on by a user is refused: exit 2, 'not by root'" "$(why)" \
			eval '[ "$RC" -eq 2 ] && has "is served by uid $ALICE_UID, not by root" "$ERR"'
		ok "the impostor's 'ok' does not run PROGRAM" "marker exists" test ! -e "$MARKER"
	else
		fail "the impostor socket is in place" "pid: $(cat "$d/pid" 2>&1)"
	fi
	stop_bg "$bg"
	rm -rf "$d" "$RUN_DIR/socket" "$RUN_DIR/ready" "$MARKER"
	timeout 240 systemctl start "$UNIT" >"$T/start.log" 2>&1
	ok "daemon active again after the impostor" "$(snip "$T/start.log")" wait_for 30 daemon_active
	run_in "$ALICE" true
	expect_rc "launch works after the impostor was removed" 0
}

# ================================================================ setup and cleanup

# A small HTTP server on 127.0.0.1 that answers every request with the request
# head (so the Authorization header curl sent is visible). Bounded in time.
write_http_echo() {
	cat >"$1" <<'EOF'
import os, signal, socket, sys
signal.alarm(240)
srv = socket.socket()
srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
srv.bind(("127.0.0.1", 0))
srv.listen(8)
srv.settimeout(60)
with open(sys.argv[1] + ".new", "w") as f:
    f.write(str(srv.getsockname()[1]))
os.rename(sys.argv[1] + ".new", sys.argv[1])
for _ in range(int(sys.argv[2])):
    try:
        conn, _addr = srv.accept()
    except socket.timeout:
        break
    conn.settimeout(10)
    data = b""
    try:
        while b"\r\n\r\n" not in data and len(data) < 65536:
            chunk = conn.recv(4096)
            if not chunk:
                break
            data += chunk
    except socket.timeout:
        pass
    body = data.split(b"\r\n\r\n")[0] + b"\r\n"
    conn.sendall(b"HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\nConnection: close\r\n"
                 b"Content-Length: %d\r\n\r\n" % len(body) + body)
    conn.close()
EOF
}

preflight() {
	if [ "$(id -u)" -ne 0 ]; then
		fail "running as root" "uid $(id -u)"
		return 1
	fi
	require_commands "$LAUNCHER" systemctl runuser timeout useradd userdel groupadd getent pgrep || return 1
}

setup() {
	local u
	T=$(mktemp -d /tmp/asx-test.XXXXXX) || return 1
	OUT=$T/out ERR=$T/err
	TOK=$(od -An -N8 -tx1 /dev/urandom | tr -d ' \n')
	SECRET="asx-secret-$TOK"
	NETRC_PASS="asx-netrc-pw-$TOK"
	mkdir -p /srv && SRV=$(mktemp -d /srv/asx-test.XXXXXX) && chmod 0755 "$SRV" || return 1
	CGROOT=$(findmnt -n -t cgroup2 -o TARGET | head -n1)
	CGROOT=${CGROOT:-/sys/fs/cgroup}

	for u in "$ALICE" "$BOB"; do
		remove_test_user "$u" || { echo "user $u exists and is not a test user" >&2; return 1; }
	done
	if getent group "$GROUP" >/dev/null; then
		groupdel "$GROUP" 2>/dev/null || { echo "group $GROUP exists and cannot be removed" >&2; return 1; }
	fi
	SETUP_DONE=1
	groupadd "$GROUP" &&
		useradd -m -s /bin/sh -c "$GECOS" -G "$GROUP" "$ALICE" &&
		useradd -m -s /bin/sh -c "$GECOS" "$BOB" || return 1
	ALICE_UID=$(id -u "$ALICE") BOB_UID=$(id -u "$BOB")
	AH=$(home_of "$ALICE") BH=$(home_of "$BOB")
	S=$AH/secret.txt

	# base list: keep a copy to restore (create it if the package did not)
	BASE_BACKUP=$T/base.orig
	if [ -f "$BASE_LIST" ]; then
		BASE_EXISTED=1
		cp -a "$BASE_LIST" "$BASE_BACKUP"
	else
		mkdir -p "$(dirname "$BASE_LIST")" && : >"$BASE_BACKUP"
	fi

	# alice's files
	put "$ALICE" "$S" 0600 "$SECRET" && cp "$S" "$T/secret.orig" &&
		put "$ALICE" "$AH/asx-second.txt" 0600 "asx-second-$TOK" &&
		put "$ALICE" "$AH/asx-fresh.txt" 0600 "asx-fresh-$TOK" &&
		put "$ALICE" "$AH/asx-base-tilde.txt" 0600 "asx-base-tilde-$ALICE-$TOK" &&
		put "$BOB" "$BH/asx-base-tilde.txt" 0600 "asx-base-tilde-$BOB-$TOK" &&
		put "$ALICE" "$AH/.asx-netrc" 0600 "machine 127.0.0.1 login asxuser password $NETRC_PASS" || return 1
	for u in crlf padded tilde lastline symtarget; do
		put "$ALICE" "$AH/asx-$u.txt" 0600 "asx-$u-$TOK" || return 1
	done
	ln -s asx-symtarget.txt "$AH/asx-symlink.txt" && chown -h "$ALICE:$ALICE" "$AH/asx-symlink.txt"
	install -d -o "$ALICE" -g "$ALICE" "$AH/asx-dir" "$AH/asx-bin"
	put "$ALICE" "$AH/asx-bin/asx-hello" 0755 "#!/bin/sh
echo asx-hello-$TOK"
	# shared, world-readable files
	put root "$SRV/alice-only.txt" 0644 "asx-alice-only-$TOK" &&
		put root "$SRV/bob-only.txt" 0644 "asx-bob-only-$TOK" &&
		put root "$SRV/base-secret.txt" 0644 "asx-base-$TOK" &&
		put root "$SRV/root-listed.txt" 0644 "asx-root-listed-$TOK" || return 1
	write_http_echo "$T/http-echo.py"

	# hardlink made outside the sandbox, before any launch
	run_as "$ALICE" ln "$S" "$AH/hl-out.txt"
	[ "$RC" -eq 0 ] || { echo "ln failed: $(snip "$ERR")" >&2; return 1; }
	if command -v ssh-keygen >/dev/null; then
		run_as "$ALICE" sh -c 'mkdir -p -m 0700 "$1/.ssh" && ssh-keygen -q -t ed25519 -N "" -C asx-test -f "$1/.ssh/asx_ed25519"' sh "$AH"
	fi

	# the lists
	printf '# agent-sandbox-exec test list of %s\n%s\n%s\n%s\n%s\n' "$ALICE" \
		"$S" "$TILDE/.ssh/asx_ed25519" "$TILDE/.asx-netrc" "$SRV/alice-only.txt" >"$T/alice.list"
	printf '%s\n' "$SRV/bob-only.txt" >"$T/bob.list"
	alice_list_default
	write_list "$BOB" "$T/bob.list"
}

cleanup() {
	local p
	[ "$CLEANED" -eq 1 ] && return 0
	CLEANED=1
	for p in "${BG_PIDS[@]}"; do
		pid_gone "$p" || kill "$p" 2>/dev/null
	done
	for p in "${BG_PIDS[@]}"; do
		stop_bg "$p"
	done
	if [ "$DAEMON_TOUCHED" -eq 1 ]; then
		ok "daemon is active at the end of the run" "is-active: $(systemctl is-active "$UNIT" 2>&1)" \
			daemon_ensure_running
	fi
	if [ "$BASE_TOUCHED" -eq 1 ]; then
		if [ "$BASE_EXISTED" -eq 1 ]; then
			cat "$BASE_BACKUP" >"$BASE_LIST"
			ok "base list is restored at the end of the run" "cmp differs" cmp -s "$BASE_BACKUP" "$BASE_LIST"
		else
			rm -f "$BASE_LIST"
		fi
	fi
	rm -f "$SUDOERS_FILE" "$MARKER"
	[ "$SETUP_DONE" -eq 1 ] || return 0
	if [ "${ASX_TEST_KEEP:-0}" = 1 ]; then
		printf 'kept: users %s %s, %s, %s\n' "$ALICE" "$BOB" "$SRV" "$T" >&2
		return 0
	fi
	remove_test_user "$ALICE"
	remove_test_user "$BOB"
	groupdel "$GROUP" 2>/dev/null
	groupdel "$GROUP2" 2>/dev/null
	[ -n "$SRV" ] && rm -rf "$SRV"
	[ -n "$T" ] && rm -rf "$T"
	return 0
}

run_suite "setup (test users and files)"
