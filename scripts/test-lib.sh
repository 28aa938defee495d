#!/bin/bash
# Helpers shared by scripts/test.sh, scripts/test-fs.sh and
# scripts/test-lifecycle.sh (sourced, not run). Reporting: pass/fail/skip/note
# and ok/okl print one PASS:/FAIL:/SKIP:/# line each and count into PASS_N,
# FAIL_N, SKIP_N. Running: run_as and run_in run a command as a user, outside
# or inside the sandbox, with output in $OUT/$ERR and status in $RC, bounded by
# $CMD_TIMEOUT; $LAUNCHER names the launcher; finish calls the caller's cleanup
# and names the suite $SUITE. The caller sets those variables and defines
# cleanup.
# shellcheck disable=SC2034  # PASS_N etc. are read by the sourcing script
: "${SKIP_N:=0}"

pass() { PASS_N=$((PASS_N + 1)); printf 'PASS: %s\n' "$1"; }

fail() { FAIL_N=$((FAIL_N + 1)); printf 'FAIL: %s (%s)\n' "$1" "$2"; }

skip() { SKIP_N=$((SKIP_N + 1)); printf 'SKIP: %s\n' "$1"; }

note() { printf '# %s\n' "$*"; }

# ok WHAT DETAIL CMD...: PASS if CMD succeeds, else FAIL with DETAIL
ok() {
	local what=$1 detail=$2
	shift 2
	if "$@"; then pass "$what"; else fail "$what" "$detail"; fi
}

# okl WHAT 'DETAIL' CMD...: like ok, but DETAIL (give it in single quotes) is
# expanded only on failure, after CMD ran, so that it shows the failing state
okl() {
	local _w=$1 _d=$2
	shift 2
	if "$@"; then pass "$_w"; else fail "$_w" "$(eval "printf '%s' \"$_d\"")"; fi
}

# snip FILE: the start of FILE on one printable line, for FAIL details
snip() {
	local s
	s=$(head -c 240 "$1" 2>/dev/null | tr '\n\r\t' '|||' | tr -c '[:print:]' '?')
	printf '%s' "${s:-<empty>}"
}

# tailsnip FILE: the end of FILE on one printable line (apt logs)
tailsnip() {
	local s
	s=$(tail -c 300 "$1" 2>/dev/null | tr '\n\r\t' '|||' | tr -c '[:print:]' '?')
	printf '%s' "${s:-<empty>}"
}

# why: exit status and stderr of the last run_as/run_in, for FAIL details
why() {
	local t=""
	[ "$RC" -eq 124 ] && t=" (timed out)"
	printf 'rc=%s%s; stderr: %s' "$RC" "$t" "$(snip "$ERR")"
}

# has STRING FILE...: some FILE contains STRING (binary-safe)
has() { grep -qaF -- "$1" "${@:2}" 2>/dev/null; }

# run_as USER CMD...: run CMD as USER outside any sandbox, stdin from /dev/null,
# stdout to $OUT, stderr to $ERR, exit status in $RC; bounded by $CMD_TIMEOUT.
run_as() {
	local user=$1
	shift
	RC=0
	timeout -k 5 "$CMD_TIMEOUT" runuser -u "$user" -- "$@" </dev/null >"$OUT" 2>"$ERR" || RC=$?
}

# run_in USER CMD...: the same, inside USER's sandbox
run_in() {
	local user=$1
	shift
	run_as "$user" "$LAUNCHER" "$@"
}

# run_in_after USER EDIT CMD...: start a sandbox of USER (a launch from outside) that waits,
# eval EDIT outside, as root (an edit of the user's list, which a sandboxed task cannot
# make), then run CMD in that sandbox (a launch from inside, when CMD is the launcher);
# stdout in $OUT, stderr in $ERR, exit status in $RC, as run_in
run_in_after() {
	local user=$1 edit=$2 go waiter
	shift 2
	# The sandbox waits in a read of a FIFO (root's, readable by all: no O_CREAT open of another
	# user's FIFO in sticky /tmp, which fs.protected_fifos refuses), not in a loop of sleeps:
	# it takes no CPU from the edit.
	go=$(mktemp -u /tmp/asx-go.XXXXXX)
	RC=0
	if ! mkfifo -m 0644 "$go" 2>"$ERR"; then
		RC=125
		return 1
	fi
	# CMD runs only after the edit: a failed open or read of the FIFO ends the sandbox (125).
	# shellcheck disable=SC2016 # the sandboxed shell expands them
	timeout -k 5 "$CMD_TIMEOUT" runuser -u "$user" -- "$LAUNCHER" sh -c \
		'read -r _ <"$0" || exit 125; exec "$@"' "$go" "$@" </dev/null >"$OUT" 2>"$ERR" &
	waiter=$!
	# the sandboxed sh itself (the launcher's argv holds $go too, before its launch is done)
	wait_for 30 pgrep -u "$user" -f "^sh -c read .* $go" >/dev/null
	eval "$edit"
	# the open waits for the reader; bounded, in case the sandbox is gone
	# shellcheck disable=SC2016 # the inner shell expands it
	timeout 30 sh -c 'echo go >"$1"' sh "$go" || true
	wait "$waiter" || RC=$?
	rm -f "$go"
}

# restart_daemon WHAT: restart the unit (after a daemon-reload) and PASS WHAT once it serves
# again, else FAIL with systemctl's output; needs $T
restart_daemon() {
	systemctl daemon-reload
	timeout 240 systemctl restart agent-sandbox-execd >"$T/restart.log" 2>&1
	# shellcheck disable=SC2016  # DETAIL is expanded by okl, on failure
	okl "$1" '$(snip "$T/restart.log") is-active: $(systemctl is-active agent-sandbox-execd)' \
		wait_for 240 test -e /run/agent-sandbox-exec/ready
}

# A FIFO that nobody writes, for pause: bash's read -t on it waits without a child process.
# Under TCG a fork and exec of sleep(1) costs tens of milliseconds of the guest's one CPU, so
# ten of them a second took a fifth of it from the daemon a test waits for. Empty if mkfifo
# fails (pause then runs sleep).
TICK_FIFO=$(mktemp -u /tmp/asx-tick.XXXXXX)
mkfifo -m 0600 "$TICK_FIFO" 2>/dev/null || TICK_FIFO=

# pause SECONDS: wait SECONDS (a fraction allowed), forking nothing; the FIFO is opened for
# the read only, so no descriptor of it reaches the commands a test runs. Tested first: were
# it gone, `<>` would create a regular file, whose read returns at once.
pause() {
	if [ -n "$TICK_FIFO" ] && [ -p "$TICK_FIFO" ]; then
		read -r -t "$1" _ <>"$TICK_FIFO" || :
	else
		sleep "$1"
	fi
}

# wait_for SECONDS CMD...: poll CMD until it succeeds, every 0.1 s for the first 2 s, then
# every 0.5 s (a long wait, such as a daemon verifying its programs, then runs CMD twice a
# second instead of ten times); status 1 on timeout. Its locals have names of their own: CMD
# (often an eval of the caller's text) sees the caller's variables, such as job()'s n.
wait_for() {
	local _wait_for_end=$((SECONDS + $1)) _wait_for_polls=0
	shift
	until "$@"; do
		[ "$SECONDS" -lt "$_wait_for_end" ] || return 1
		if [ "$_wait_for_polls" -lt 20 ]; then pause 0.1; else pause 0.5; fi
		_wait_for_polls=$((_wait_for_polls + 1))
	done
}

# pid_gone PID: PID has exited (a not yet reaped child counts as exited)
pid_gone() {
	[ ! -e "/proc/$1" ] || [ "$(cut -d' ' -f3 "/proc/$1/stat" 2>/dev/null)" = Z ]
}

# stop_bg PID: end a background job this script started (TERM, then KILL), reap it
stop_bg() {
	pid_gone "$1" || kill "$1" 2>/dev/null
	wait_for 5 pid_gone "$1" || kill -KILL "$1" 2>/dev/null
	wait "$1" 2>/dev/null
	return 0
}

home_of() { getent passwd "$1" | cut -d: -f6; }

in_sandbox_cgroup() { # FILE UID: FILE (a /proc/*/cgroup text) names the sandbox cgroup of UID
	grep -qE "^0::.*/agent-sandbox-exec/uid-$2\$" "$1" 2>/dev/null
}

# kill_user_procs USER: end leftover processes of a test user (by pid)
kill_user_procs() {
	local uid pids
	uid=$(id -u "$1" 2>/dev/null) || return 0
	pids=$(pgrep -u "$uid" | tr '\n' ' ')
	[ -n "$pids" ] || return 0
	# shellcheck disable=SC2086
	kill -TERM $pids 2>/dev/null
	sleep 1
	pids=$(pgrep -u "$uid" | tr '\n' ' ')
	# shellcheck disable=SC2086
	[ -z "$pids" ] || kill -KILL $pids 2>/dev/null
	return 0
}

# remove_test_user USER: remove USER if it is ours (its GECOS field is $GECOS) (GECOS); 1 if foreign
remove_test_user() {
	getent passwd "$1" >/dev/null || return 0
	[ "$(getent passwd "$1" | cut -d: -f5)" = "$GECOS" ] || return 1
	kill_user_procs "$1"
	timeout 60 userdel -r "$1" >/dev/null 2>&1 || timeout 60 userdel -f -r "$1" >/dev/null 2>&1
}

# finish: run the caller's cleanup, print the summary line
# `$SUITE: N passed, N failed, N skipped`, then ALL PASS (exit 0) or N FAILED (exit 1)
finish() {
	trap - EXIT INT TERM
	cleanup
	printf '%s: %d passed, %d failed, %d skipped\n' "$SUITE" "$PASS_N" "$FAIL_N" "$SKIP_N"
	if [ "$FAIL_N" -eq 0 ]; then
		echo "ALL PASS"
		exit 0
	fi
	echo "$FAIL_N FAILED"
	exit 1
}

# require_commands CMD...: every CMD is in PATH, else one FAIL naming the missing
# ones ("required commands present") and status 1
require_commands() {
	local c missing=""
	for c in "$@"; do
		command -v "$c" >/dev/null || missing="$missing $c"
	done
	[ -z "$missing" ] && return 0
	fail "required commands present" "missing:$missing"
	return 1
}

# set_list LINE...: the test user's list ($UH/$HOME_LIST_REL, made by $USR's
# rules) holds "# $SUITE" and the LINEs; $T/list is its copy.
set_list() {
	install -d -o "$USR" -g "$USR" -m 0755 "$UH/.config" "$UH/.config/agent-sandbox-exec"
	printf '%s\n' "# $SUITE" "$@" >"$T/list"
	install -o "$USR" -g "$USR" -m 0644 "$T/list" "$UH/$HOME_LIST_REL"
}

# mnt TARGET MOUNT-ARGS...: mount (MOUNT-ARGS without the target) on TARGET as
# root, remembered in MOUNTS for the suite's cleanup
mnt() {
	local target=$1
	shift
	mkdir -p "$target" || return 1
	if mount "$@" "$target" 2>"$T/mount.err"; then
		MOUNTS+=("$target")
		return 0
	fi
	echo "mount $* $target: $(snip "$T/mount.err")" >&2
	return 1
}

# listed WORD LIST: WORD is one of the space-separated LIST
listed() { case " $2 " in *" $1 "*) return 0 ;; esac; return 1; }

# run_check NAME: run check_NAME, unless the suite's filters leave it out: the
# caller's FILTER names them (FILTER=ASX_FS: ASX_FS_ONLY="name ..." runs only
# those checks, ASX_FS_SKIP="name ..." skips those) and an optional
# check_wanted NAME of the suite may refuse it; notes how long it took
run_check() {
	local t0=$SECONDS
	check_runs "$1" say || return 0
	"check_$1"
	note "$1: $((SECONDS - t0)) s"
}

# check_runs NAME [say]: run_check runs check NAME in this run of the suite (the filters and
# check_wanted do not leave it out; CHECKS is the caller's to test); with `say`, a check
# that the SKIP filter leaves out is reported as skipped
check_runs() {
	local only="${FILTER}_ONLY" skips="${FILTER}_SKIP"
	if [ -n "${!only:-}" ] && ! listed "$1" "${!only}"; then
		return 1
	fi
	if listed "$1" "${!skips:-}"; then
		[ "${2:-}" = say ] && skip "$1 (disabled by $skips)"
		return 1
	fi
	if declare -F check_wanted >/dev/null && ! check_wanted "$1"; then
		return 1
	fi
	return 0
}

# run_suite WHAT: a suite's main: the caller's preflight (or finish), its
# cleanup on exit, its setup (WHAT names that step in a FAIL), run_check of
# every name in CHECKS, then finish
run_suite() {
	local c
	preflight || finish
	trap cleanup EXIT
	trap 'fail "run" "interrupted"; finish' INT TERM
	if ! setup; then
		fail "$1" "see stderr"
		finish
	fi
	for c in "${CHECKS[@]}"; do
		run_check "$c"
	done
	finish
}
