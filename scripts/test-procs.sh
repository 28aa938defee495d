#!/bin/bash
# shellcheck disable=SC2016,SC2317
# (SC2016: the single-quoted 'sh -c' programs expand their own variables;
#  SC2317: the check_* functions are called indirectly, through run_check)
#
# scripts/test-procs.sh - side doors II (issue 15): the user's other
# processes and terminal cannot be made to leak a listed file for the agent.
#
# Run as root in a throwaway guest where the package is installed and the
# daemon runs (the QEMU guest of `make vm-test`). A secret with known content
# is listed in the test user's ~/.config/agent-sandbox-exec/denylist; a
# process of the same user OUTSIDE the sandbox holds or has read its bytes, and
# the checks try, from inside `agent-sandbox-exec`, to get them through that
# process. Each door check first shows that the outside route itself works.
#
# Checks (in this order; names for ASX_PROCS_ONLY / ASX_PROCS_SKIP):
#   proc_fd_pipe     an outside `cat SECRET | slow-reader` pipeline: reopening the reader's
#                    /proc/PID/fd/0 from inside is refused (no bytes); /proc/PID/environ of
#                    an outside process is refused; inside, /dev/stdin from a pipe,
#                    /proc/self/fd/N and another sandboxed process's /proc/PID/fd keep working
#   proc_tools       inside, `ps aux`, `pgrep -f` and `top -bn1` still list the user's outside
#                    processes (with their command lines)
#   core_dump        prlimit --core of an outside process that read the secret, a write to its
#                    /proc/PID/coredump_filter, kill -SEGV: each refused, no core with the bytes;
#                    the same on the agent's own child works
#   signals          kill -TERM of an outside process refused (it lives), kill -0 allowed;
#                    kill of the agent's own child works
#   sigio_owner      F_SETOWN of an inherited pipe to an outside pid (then SIGIO on input)
#                    refused; F_SETSIG and F_SETOWN_EX refused; F_SETOWN to itself works
#   tiocsti          TIOCSTI of `cat SECRET` into the outside shell on the controlling tty
#                    (64-bit, and 32-bit through asx-ioctl32 if present) refused: the shell
#                    reads no injected line; TIOCLINUX refused (EPERM). On kernels with
#                    dev.tty.legacy_tiocsti, it is set to 1 for the check (restored after)
#   scheduled        `echo CMD | at now` and `crontab -` from inside fail (the base list the
#                    package ships denies /usr/bin/at and /usr/bin/crontab), so no command of
#                    the agent runs outside later; from outside both work
#
# It creates the user asx-procs and /tmp/asx-procs.*; changes
# kernel.core_pattern and dev.tty.legacy_tiocsti for a while; all of that is
# undone at exit.
#
# Output: "PASS: <what>", "FAIL: <what> (<detail>)", "SKIP: <why>" and notes
# ("# ..."); then a count line and "ALL PASS" (exit 0) or "<n> FAILED" (exit 1).
#
# Environment:
#   ASX_PROCS_ONLY="name ..."  run only these checks;  ASX_PROCS_SKIP="name ..."  skip these
#   ASX_PROCS_KEEP=1           leave the user and files behind for debugging

set -u -o pipefail
umask 022
export LC_ALL=C # stable strerror() texts
HERE=$(cd "$(dirname "$0")" && pwd) || exit 1
cd / || exit 1

readonly SUITE=test-procs.sh
readonly LAUNCHER=agent-sandbox-exec
readonly USR=asx-procs
readonly GECOS="agent-sandbox-exec procs test user"
readonly EPERM_MSG="Operation not permitted"
readonly HOME_LIST_REL=.config/agent-sandbox-exec/denylist
readonly CORE_PATTERN=/proc/sys/kernel/core_pattern
readonly LEGACY_TIOCSTI=/proc/sys/dev/tty/legacy_tiocsti

CHECKS=(
	proc_fd_pipe proc_tools core_dump signals sigio_owner tiocsti scheduled
)

PASS_N=0 FAIL_N=0 SKIP_N=0

# shellcheck source=scripts/test-lib.sh
. "$HERE/test-lib.sh" || exit 1
FILTER=ASX_PROCS # run_check: ASX_PROCS_ONLY / ASX_PROCS_SKIP choose the checks
CMD_TIMEOUT=60
T="" OUT="" ERR="" RC=0 TOK="" UH="" S="" SECRET=""
SETUP_DONE=0 CLEANED=0 IOCTL32_INSTALLED=0
OLD_CORE_PATTERN="" OLD_LEGACY_TIOCSTI=""
BG_PIDS=()
BG_PID="" BG_TASK=""

# ---------------------------------------------------------------- helpers

# udir DIR: a fresh directory owned by the test user
udir() { rm -rf "$1" && install -d -o "$USR" -g "$USR" -m 0755 "$1"; }

# start_outside DIR SCRIPT [ARGS...]: run SCRIPT (sh -c, $1 = DIR) as the user
# outside any sandbox, in the background; SCRIPT writes the pid of the process
# of interest to DIR/pid. BG_PID: the background job, BG_TASK: that pid.
start_outside() {
	local d=$1 script=$2
	shift 2
	udir "$d"
	(cd "$d" && exec timeout -k 5 120 runuser -u "$USR" -- sh -c "$script" sh "$d" "$@") \
		</dev/null >/dev/null 2>&1 &
	BG_PID=$!
	BG_PIDS+=("$BG_PID")
	if ! wait_for 15 test -s "$d/pid"; then
		stop_bg "$BG_PID"
		return 1
	fi
	BG_TASK=$(cat "$d/pid")
}

alive() { [ -e "/proc/$1" ] && ! pid_gone "$1"; }

# hidden_fail WHAT: PASS if the last run failed and showed nothing of the secret
hidden_fail() {
	if has "$SECRET" "$OUT" "$ERR"; then
		fail "$1" "secret revealed; rc=$RC"
	elif [ "$RC" -eq 0 ]; then
		fail "$1" "exit status 0, expected a failure; stdout: $(snip "$OUT")"
	else
		pass "$1"
	fi
}

# ---------------------------------------------------------------- checks

# 1. Reopening an outside process's pipe through /proc/PID/fd: a fresh open of
# the same pipe, which reads the bytes buffered in it (proc_fd_link() after
# proc_fd_access_allowed(): ptrace_may_access(PTRACE_MODE_READ_FSCREDS)).
check_proc_fd_pipe() {
	local d=$T/pipe
	if ! start_outside "$d" 'cat "$2" | sh -c "echo \$\$ > \"\$1/pid\"; exec sleep 60" sh "$1"' "$S"; then
		fail "proc_fd_pipe: outside pipeline started" "no pid"
		return
	fi
	sleep 1 # cat has written the secret into the pipe
	run_as "$USR" timeout 5 cat "/proc/$BG_TASK/fd/0"
	okl "proc_fd_pipe: control: outside, /proc/PID/fd/0 of the slow reader reads the piped secret" \
		'$(why)' has "$SECRET" "$OUT"
	# The control read drained the pipe: refill it the same way.
	kill "$BG_TASK" 2>/dev/null
	stop_bg "$BG_PID"
	if ! start_outside "$d" 'cat "$2" | sh -c "echo \$\$ > \"\$1/pid\"; exec sleep 60" sh "$1"' "$S"; then
		fail "proc_fd_pipe: outside pipeline started again" "no pid"
		return
	fi
	sleep 1
	run_in "$USR" timeout 5 cat "/proc/$BG_TASK/fd/0"
	hidden_fail "proc_fd_pipe: inside: reopening /proc/PID/fd/0 of an outside pipeline's reader is refused"
	run_in "$USR" cat "/proc/$BG_TASK/environ"
	okl "proc_fd_pipe: inside: /proc/PID/environ of an outside process is refused" '$(why)' \
		eval '[ "$RC" -ne 0 ]'
	run_in "$USR" cat "/proc/$BG_TASK/status"
	okl "proc_fd_pipe: inside: /proc/PID/status of an outside process still reads" '$(why)' \
		eval '[ "$RC" -eq 0 ] && has "Name:" "$OUT"'
	kill "$BG_TASK" 2>/dev/null
	stop_bg "$BG_PID"
	# What keeps working inside. The pipe is the user's own (a pipe made by
	# root is mode 0600 root: reopening it through /proc is refused anyway).
	run_as "$USR" sh -c 'printf "piped-%s\n" "$1" | "$2" cat /dev/stdin' sh "$TOK" "$LAUNCHER"
	okl "proc_fd_pipe: inside: /dev/stdin from a pipe reads" '$(why)' has "piped-$TOK" "$OUT"
	run_in "$USR" sh -c 'exec 3<"$1"; cat /proc/self/fd/3' sh "$T/ctl"
	okl "proc_fd_pipe: inside: /proc/self/fd/N reads" '$(why)' has "ctl-$TOK" "$OUT"
	run_in "$USR" sh -c 'printf "inner-%s\n" "$1" | sleep 10 & p=$!; sleep 1; timeout 5 cat /proc/$p/fd/0; kill $p' \
		sh "$TOK"
	okl "proc_fd_pipe: inside: /proc/PID/fd/0 of another process of the same sandbox reads" '$(why)' \
		has "inner-$TOK" "$OUT"
}

# 1b. The read-mode refusal leaves ps, pgrep and top working.
check_proc_tools() {
	local d=$T/tools
	if ! start_outside "$d" 'echo $$ > "$1/pid"; exec sleep 61' ; then
		fail "proc_tools: outside process started" "no pid"
		return
	fi
	run_in "$USR" ps aux
	okl "proc_tools: inside: ps aux lists the outside process with its command line" '$(why)' \
		eval '[ "$RC" -eq 0 ] && awk -v p="$BG_TASK" "\$2 == p && /sleep 61/ { f = 1 } END { exit !f }" "$OUT"'
	run_in "$USR" pgrep -u "$USR" -f "sleep 61"
	okl "proc_tools: inside: pgrep -f finds it" '$(why); out: $(snip "$OUT")' \
		eval '[ "$RC" -eq 0 ] && grep -qx "$BG_TASK" "$OUT"'
	run_in "$USR" env COLUMNS=200 top -bn1 -w 200
	okl "proc_tools: inside: top -bn1 lists it" '$(why); out: $(snip "$OUT")' \
		eval '[ "$RC" -eq 0 ] && grep -qE "^ *$BG_TASK .* sleep *\$" "$OUT"'
	kill "$BG_TASK" 2>/dev/null
	stop_bg "$BG_PID"
}

# 2a. A core dump of an outside process that read the secret: raise its
# RLIMIT_CORE (prlimit: do_prlimit() -> security_task_setrlimit()), widen its
# coredump_filter (owner-writable, no ptrace check), kill -SEGV, read the core.
check_core_dump() {
	local d=$T/core res p
	if ! start_outside "$d" 'exec python3 -c "import os, sys, time
s = open(sys.argv[2]).read()
open(sys.argv[1] + \"/pid\", \"w\").write(str(os.getpid()))
time.sleep(90)" "$1" "$2"' "$S"; then
		fail "core_dump: outside reader started" "no pid"
		return
	fi
	p=$BG_TASK
	run_in "$USR" sh -c 'd=$1 p=$2
		prlimit --core=unlimited --pid "$p" && echo "prlimit-ok"
		(echo 0x7f > "/proc/$p/coredump_filter") && echo "filter-ok"
		kill -SEGV "$p" && echo "kill-ok"
		i=0; while [ $i -lt 50 ] && [ ! -s "$d/core.$p" ]; do sleep 0.2; i=$((i + 1)); done
		sleep 1; cat "$d/core.$p"' sh "$d" "$p"
	# shellcheck disable=SC2034 # res is read in the okl conditions below
	res=$OUT
	okl "core_dump: inside: prlimit --core of an outside process is refused" '$(snip "$ERR")' \
		eval '! grep -qa "^prlimit-ok" "$res"'
	okl "core_dump: inside: writing an outside process's /proc/PID/coredump_filter is refused" \
		'$(snip "$ERR")' eval '! grep -qa "^filter-ok" "$res"'
	okl "core_dump: inside: kill -SEGV of an outside process is refused" '$(snip "$ERR")' \
		eval '! grep -qa "^kill-ok" "$res"'
	okl "core_dump: no core of the outside process shows the secret" 'rc=$RC; core: $(ls -l "$d" | tr "\n" "|")' \
		eval '! has "$SECRET" "$res"'
	ok "core_dump: the outside process still runs" "it died" alive "$p"
	kill "$p" 2>/dev/null
	stop_bg "$BG_PID"
	# The agent's own child: its limits, filter and signals stay the agent's.
	run_in "$USR" sh -c 'cd "$1" || exit 1; sleep 30 & p=$!; sleep 0.5
		prlimit --core=unlimited --pid "$p" && echo "prlimit-ok"
		(echo 0x33 > "/proc/$p/coredump_filter") && echo "filter-ok"
		kill -SEGV "$p"; wait "$p"; echo "status=$?"' sh "$d"
	okl "core_dump: inside: prlimit, coredump_filter and kill -SEGV of the agent's own child work" \
		'$(why); out: $(snip "$OUT")' \
		eval 'has prlimit-ok "$OUT" && has filter-ok "$OUT" && has status=139 "$OUT"'
}

# 2b. Signals (check_kill_permission() -> security_task_kill()).
check_signals() {
	local d=$T/sig p
	if ! start_outside "$d" 'echo $$ > "$1/pid"; exec sleep 62'; then
		fail "signals: outside process started" "no pid"
		return
	fi
	p=$BG_TASK
	run_in "$USR" kill -0 "$p"
	ok "signals: inside: kill -0 (no signal) of an outside process works" "$(why)" test "$RC" -eq 0
	run_in "$USR" kill -TERM "$p"
	okl "signals: inside: kill -TERM of an outside process is refused with EPERM" '$(why)' \
		eval '[ "$RC" -ne 0 ] && has "$EPERM_MSG" "$ERR"'
	sleep 0.5
	ok "signals: the outside process still runs" "it died" alive "$p"
	run_in "$USR" python3 -c 'import os, signal, sys
try:
    os.kill(int(sys.argv[1]), signal.SIGKILL); print("sent")
except OSError as e:
    print("refused", e.errno)' "$p"
	okl "signals: inside: SIGKILL through os.kill is refused" '$(snip "$OUT")' has "refused 1" "$OUT"
	run_as "$USR" kill -TERM "$p"
	ok "signals: control: outside, kill -TERM of it works" "$(why)" test "$RC" -eq 0
	stop_bg "$BG_PID"
	run_in "$USR" sh -c 'sleep 30 & p=$!; kill -TERM "$p"; wait "$p"; echo "status=$?"'
	okl "signals: inside: kill of the agent's own child works" '$(why); out: $(snip "$OUT")' \
		has "status=143" "$OUT"
}

# 2c. SIGIO to another process: F_SETOWN (fs/fcntl.c: security_file_fcntl()
# before f_setown()), F_SETSIG and F_SETOWN_EX. A pipe whose read end is owned
# by the outside process and set O_ASYNC raises SIGIO (default: terminate)
# there when data arrives.
check_sigio_owner() {
	local d=$T/sigio p
	if ! start_outside "$d" 'echo $$ > "$1/pid"; exec sleep 63'; then
		fail "sigio_owner: outside process started" "no pid"
		return
	fi
	p=$BG_TASK
	# (0 + : perl passes a string argument of fcntl as a pointer, a number as is.)
	run_in "$USR" perl -e 'my $p = 0 + shift;
		pipe(my $r, my $w) or die "pipe: $!\n";
		fcntl($r, 8, $p) or die "F_SETOWN: $!\n";        # F_SETOWN
		fcntl($r, 4, 0x2000 | 0x800) or die "F_SETFL: $!\n"; # O_ASYNC | O_NONBLOCK
		syswrite($w, "x"); sleep 1; print "sent\n";' "$p"
	okl "sigio_owner: inside: F_SETOWN of a pipe to an outside process is refused with EPERM" \
		'$(why)' eval '! has sent "$OUT" && has "F_SETOWN: $EPERM_MSG" "$ERR"'
	sleep 0.5
	ok "sigio_owner: the outside process did not get SIGIO" "it died" alive "$p"
	run_in "$USR" perl -e 'pipe(my $r, my $w) or die;
		print fcntl($r, 10, 11) ? "setsig-ok\n" : "setsig: $!\n";  # F_SETSIG SIGSEGV
		my $ex = pack("ii", 1, $$);                             # F_OWNER_PID, itself
		print fcntl($r, 15, $ex) ? "setownex-ok\n" : "setownex: $!\n";
		print fcntl($r, 8, $$) ? "self-ok\n" : "self: $!\n";
		print fcntl($r, 8, -getpgrp()) ? "pgrp-ok\n" : "pgrp: $!\n";
		print fcntl($r, 8, 0) ? "clear-ok\n" : "clear: $!\n";'
	okl "sigio_owner: inside: F_SETSIG and F_SETOWN_EX are refused with EPERM" '$(snip "$OUT")' \
		eval 'has "setsig: $EPERM_MSG" "$OUT" && has "setownex: $EPERM_MSG" "$OUT"'
	okl "sigio_owner: inside: F_SETOWN to itself, its process group and 0 works" '$(snip "$OUT")' \
		eval 'has self-ok "$OUT" && has pgrp-ok "$OUT" && has clear-ok "$OUT"'
	kill "$p" 2>/dev/null
	stop_bg "$BG_PID"
}

# tty_inject INJECTOR...: in a pty (script(1)) with an outside shell on it,
# run INJECTOR inside the sandbox, then let that shell read one line from the
# terminal and run it; output of all in $OUT.
tty_inject() {
	printf '%s\n' "$@" >"$T/tty.args"
	cat >"$T/tty.sh" <<'SH'
mapfile -t args <"$1"
agent-sandbox-exec "${args[@]}"
echo "inject-rc=$?"
if read -r -t 5 line; then echo "shell-read=[$line]"; eval "$line"; else echo "shell-read-nothing"; fi
SH
	chmod 0644 "$T/tty.sh" "$T/tty.args"
	RC=0
	# sleep keeps script's stdin open (it ends on EOF there); through a process
	# substitution, which the shell does not wait for, so script's end ends this.
	timeout -k 5 40 runuser -u "$USR" -- script -qec "bash $T/tty.sh $T/tty.args" /dev/null \
		< <(sleep 20) >"$OUT" 2>"$ERR" || RC=$?
}

# 3. Terminal injection: TIOCSTI pushes bytes into the terminal's input
# queue, which the outside shell then reads as typed by the user.
check_tiocsti() {
	local line="cat $S" legacy=""
	if ! command -v script >/dev/null; then
		skip "tiocsti: script(1) is not installed (util-linux), no controlling tty to test with"
		return
	fi
	if [ -e "$LEGACY_TIOCSTI" ]; then
		legacy=$(cat "$LEGACY_TIOCSTI")
		OLD_LEGACY_TIOCSTI=$legacy
		echo 1 >"$LEGACY_TIOCSTI"
		note "tiocsti: dev.tty.legacy_tiocsti was $legacy, set to 1 for this check"
	fi
	tty_inject perl -e 'for (split //, shift . "\n") { ioctl(STDIN, 0x5412, $_) or die "TIOCSTI: $!\n" }' "$line"
	okl "tiocsti: inside: TIOCSTI into the outside shell's terminal is refused (64-bit)" \
		'$(snip "$OUT")' eval '! has "$SECRET" "$OUT" && has "TIOCSTI: $EPERM_MSG" "$OUT"'
	if [ -x /usr/local/bin/asx-ioctl32 ]; then
		tty_inject asx-ioctl32 sti "$line"
		okl "tiocsti: inside: TIOCSTI into the outside shell's terminal is refused (32-bit)" \
			'$(snip "$OUT")' eval '! has "$SECRET" "$OUT" && has "$EPERM_MSG" "$OUT"'
	else
		skip "tiocsti: asx-ioctl32 is not in the share (make guest-tools): no 32-bit TIOCSTI"
	fi
	tty_inject perl -e 'my $a = pack("C", 7) . "\0" x 8; ioctl(STDIN, 0x541C, $a) or die "TIOCLINUX: $!\n"'
	okl "tiocsti: inside: TIOCLINUX is refused with EPERM" '$(snip "$OUT")' \
		has "TIOCLINUX: $EPERM_MSG" "$OUT"
	# Control: the same outside shell reads what is typed into it (the harness works).
	RC=0
	timeout -k 5 40 runuser -u "$USR" -- \
		script -qec "bash -c 'if read -r -t 8 l; then eval \"\$l\"; fi'" /dev/null \
		< <(sleep 2; printf 'echo typed-%s\n' "$TOK"; sleep 10) >"$OUT" 2>"$ERR" || RC=$?
	okl "tiocsti: control: the outside shell in the pty runs a line typed on its terminal" \
		'$(snip "$OUT")' has "typed-$TOK" "$OUT"
	[ -z "$legacy" ] || echo "$legacy" >"$LEGACY_TIOCSTI"
	OLD_LEGACY_TIOCSTI=""
}

# wait_file SECONDS FILE: FILE exists and is not empty within SECONDS
wait_file() { wait_for "$1" test -s "$2"; }

# 4. Scheduled runs: at(1) and crontab(1) hand a command to a root daemon
# (atd, cron) that runs it later outside the sandbox.
check_scheduled() {
	local d=$T/sched
	udir "$d"
	systemctl start atd.service cron.service 2>/dev/null
	if ! command -v at >/dev/null || ! systemctl is-active -q atd.service; then
		skip "scheduled: at/atd not installed or not running: at not checked"
	else
		run_in "$USR" sh -c 'echo "cat $1 > $2/at-inside" | at now' sh "$S" "$d"
		okl "scheduled: inside: echo CMD | at now fails with EPERM" '$(why)' \
			eval '[ "$RC" -ne 0 ] && has "$EPERM_MSG" "$ERR"'
		if [ "$RC" -eq 0 ]; then # the door is open: wait for atd
			wait_file 90 "$d/at-inside"
		fi
		okl "scheduled: no job queued from inside ran outside (no secret)" '$(snip "$d/at-inside")' \
			eval '! has "$SECRET" "$d/at-inside"'
		run_as "$USR" sh -c 'echo "echo at-ok-$1 > $2/at-outside" | at now' sh "$TOK" "$d"
		okl "scheduled: outside: echo CMD | at now works and atd runs it" '$(why)' \
			eval '[ "$RC" -eq 0 ] && wait_file 90 "$d/at-outside" && has "at-ok-$TOK" "$d/at-outside"'
	fi
	if ! command -v crontab >/dev/null; then
		skip "scheduled: crontab not installed: cron not checked"
		return
	fi
	run_in "$USR" sh -c 'echo "* * * * * cat $1 > $2/cron-inside" | crontab -' sh "$S" "$d"
	okl "scheduled: inside: crontab - fails with EPERM" '$(why)' \
		eval '[ "$RC" -ne 0 ] && has "$EPERM_MSG" "$ERR"'
	if [ "$RC" -eq 0 ]; then
		run_as "$USR" crontab -l
		note "scheduled: the crontab installed from inside: $(snip "$OUT")"
		wait_file 130 "$d/cron-inside"
	fi
	okl "scheduled: no crontab line written from inside ran outside (no secret)" \
		'$(snip "$d/cron-inside")' eval '! has "$SECRET" "$d/cron-inside"'
	run_as "$USR" sh -c 'echo "# asx-$1" | crontab - && crontab -l' sh "$TOK"
	okl "scheduled: outside: crontab - works" '$(why)' eval '[ "$RC" -eq 0 ] && has "asx-$TOK" "$OUT"'
	run_as "$USR" crontab -r
}

# ================================================================ setup and cleanup

preflight() {
	if [ "$(id -u)" -ne 0 ]; then
		fail "running as root" "uid $(id -u)"
		return 1
	fi
	require_commands "$LAUNCHER" runuser timeout useradd userdel python3 perl prlimit ps pgrep top || return 1
}

setup() {
	T=$(mktemp -d /tmp/asx-procs.XXXXXX) || return 1
	chmod 0755 "$T"
	OUT=$T/out ERR=$T/err
	TOK=$(od -An -N8 -tx1 /dev/urandom | tr -d ' \n')
	SECRET="asx-procs-secret-$TOK"
	remove_test_user "$USR" || { echo "user $USR exists and is not a test user" >&2; return 1; }
	SETUP_DONE=1
	useradd -m -s /bin/sh -c "$GECOS" "$USR" || return 1
	UH=$(home_of "$USR")
	chmod 0755 "$UH"
	S=$UH/secret
	printf '%s\n' "$SECRET" >"$S" && chown "$USR:$USR" "$S" && chmod 0600 "$S" || return 1
	install -d -o "$USR" -g "$USR" -m 0755 "$UH/.config" "$UH/.config/agent-sandbox-exec"
	printf '%s\n' "# $SUITE" "$S" >"$T/list"
	install -o "$USR" -g "$USR" -m 0644 "$T/list" "$UH/$HOME_LIST_REL"
	printf 'ctl-%s\n' "$TOK" >"$T/ctl" && chmod 0644 "$T/ctl"
	if [ -f "$HERE/asx-ioctl32" ] && [ ! -e /usr/local/bin/asx-ioctl32 ]; then
		install -m 0755 "$HERE/asx-ioctl32" /usr/local/bin/asx-ioctl32 && IOCTL32_INSTALLED=1
	fi
	OLD_CORE_PATTERN=$(cat "$CORE_PATTERN")
	echo 'core.%p' >"$CORE_PATTERN"
	run_in "$USR" cat "$S"
	if [ "$RC" -eq 0 ] || ! has "$EPERM_MSG" "$ERR"; then
		echo "the listed secret is not denied inside: $(why)" >&2
		return 1
	fi
	# The inside checks below rely on this: a sandboxed task is in the sandbox.
	run_in "$USR" cat /proc/self/cgroup
	in_sandbox_cgroup "$OUT" "$(id -u "$USR")" || { echo "not in the sandbox: $(snip "$OUT")" >&2; return 1; }
	return 0
}

cleanup() {
	local p
	[ "$CLEANED" -eq 1 ] && return 0
	CLEANED=1
	for p in "${BG_PIDS[@]}"; do
		stop_bg "$p"
	done
	[ -n "$OLD_CORE_PATTERN" ] && printf '%s\n' "$OLD_CORE_PATTERN" >"$CORE_PATTERN"
	[ -n "$OLD_LEGACY_TIOCSTI" ] && echo "$OLD_LEGACY_TIOCSTI" >"$LEGACY_TIOCSTI"
	[ "$SETUP_DONE" -eq 1 ] || return 0
	if [ "${ASX_PROCS_KEEP:-0}" = 1 ]; then
		printf 'kept: user %s, %s\n' "$USR" "$T" >&2
		return 0
	fi
	crontab -u "$USR" -r 2>/dev/null
	kill_user_procs "$USR"
	remove_test_user "$USR"
	[ "$IOCTL32_INSTALLED" = 1 ] && rm -f /usr/local/bin/asx-ioctl32
	[ -n "$T" ] && rm -rf "$T"
	return 0
}

run_suite "setup (test user, list, secret)"
