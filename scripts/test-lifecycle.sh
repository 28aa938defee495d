#!/bin/bash
# shellcheck disable=SC2016,SC2317
# (SC2016: the single-quoted 'sh -c' programs expand their own variables;
#  SC2317: the step_* functions and some predicates are called indirectly)
#
# scripts/test-lifecycle.sh - the package and daemon lifecycle against ONE
# long-running sandboxed process.
#
# Run as root in a throwaway guest where version N of the package is installed
# and its daemon runs (the QEMU guest of `make vm-test`; it ends by PURGING the
# package, so it runs last).  One sandboxed loop opens a listed secret as fast
# as it can for the whole run; around it the script kills, stops, restarts,
# reinstalls, upgrades (N -> N+1, which also moves the pins to a new map
# layout), disables and finally purges.  Through every step up to the
# deliberate --disable the loop must never read the secret, and it must have
# kept trying during the step.
#
# Steps (one function each, in this order):
#   setup       test user, secret, list; start the loop; it is in uid-<uid> and denied
#   a kill      kill -9 of MainPID: a launch right after fails closed (or, racing the
#               automatic restart, runs only once the new daemon serves it); with
#               RestartSec widened by a runtime drop-in a launch while down must exit 2;
#               the unit restarts by itself
#   b stop      systemctl stop: launches exit 2 and never run PROGRAM; the pins and the
#               lsm links (bpftool) stay; the loop keeps being denied; systemctl start
#   c restart   three back-to-back restarts, each adopting the attached programs (the same
#               build: nothing verified again); exactly one link per program afterwards
#   d reinstall apt-get install --reinstall N.deb
#   e upgrade   apt-get install N+1.deb: new version, its programs loaded (not adopted),
#               daemon serving, pins moved from the
#               old layout directory (v1) to the new one (v2), new launches denied
#   f disable   --disable refuses while the daemon serves; with the service stopped it
#               unpins everything: the loop now reads the secret (proving it can see a
#               read), no file_open link is left; systemctl start with nothing pinned
#               (as at boot) under a MemoryMax= drop-in (F_CAUSE) fails with ENOMEM,
#               exits 75 and is restarted until the drop-in goes; then denied again
#   h record    the removal note across a restart (a second user, asx-lc2, without the
#               loop): an agent empties the list from inside and its launch stays denied;
#               with no sandboxed process left, a restart forgets the sandbox; the first
#               launch from outside still prints "N entries denied until now are no
#               longer denied", once; a corrupt record gives the fail-safe note, once,
#               and a log line, and the daemon keeps serving
#   i transient a runtime drop-in makes loading the programs fail with a cause that
#               passes (H_CAUSE): the daemon names it and exits 75, not 78; a launch
#               exits 2; systemd restarts it more often than StartLimitBurst and never
#               gives up; the loop stays denied; once the drop-in is gone the service
#               serves again by itself (no reset-failed, no start)
#   g purge     apt-get purge while the loop runs: unit, /etc, /var/lib records, cgroup
#               tree, pins, links and programs are gone; the loop lives on outside the
#               tree, unconfined
#
# Output: one line per assertion, "PASS: <what>" or "FAIL: <what> (<detail>)";
# lines starting with "# " are notes (what was observed, for the record).  Then
# "<n> passed, <n> failed" and finally "ALL PASS" (exit 0) or "<n> FAILED"
# (exit 1).  A failed assertion never stops the run.
#
# Environment:
#   VM_DEBS   space-separated paths of the .debs: the first is version N (installed
#             already), the second version N+1 of the same package.  Arguments
#             (N.deb [N+1.deb]) override it.
#   ASX_LC_KEEP=1   leave the test user and the temporary directory behind
#
# It creates the users asx-lc and asx-lc2, a temporary directory /tmp/asx-lc.*, and, during
# steps a and i only, the runtime drop-in
# /run/systemd/system/agent-sandbox-execd.service.d/50-asx-lifecycle-test.conf;
# all of that is removed at exit.

set -u -o pipefail
umask 022
export LC_ALL=C DEBIAN_FRONTEND=noninteractive

readonly UNIT=agent-sandbox-execd.service
readonly SUITE=test-lifecycle.sh
readonly LAUNCHER=agent-sandbox-exec
readonly DAEMON=agent-sandbox-execd
readonly ETC_DIR=/etc/agent-sandbox-exec
readonly RUN_DIR=/run/agent-sandbox-exec
readonly READY=$RUN_DIR/ready
readonly BPF_DIR=/sys/fs/bpf/agent-sandbox-exec
readonly TEST_USER=asx-lc
readonly NOTE_USER=asx-lc2 # step h: a user without the loop, whose sandbox can be forgotten
readonly RECORD_DIR=/var/lib/agent-sandbox-exec
readonly GONE_NOTE="entries denied until now are no longer denied to your sandboxes"
readonly UNKNOWN_NOTE="could not be read (the daemon's log says why): entries denied until now may no longer be denied"
readonly GECOS="agent-sandbox-exec lifecycle test user"
readonly EPERM_MSG="Operation not permitted"
readonly HOME_LIST_REL=.config/agent-sandbox-exec/denylist
readonly DROPIN_DIR=/run/systemd/system/$UNIT.d
readonly DROPIN=$DROPIN_DIR/50-asx-lifecycle-test.conf
readonly APT_OPTS=(-y -o Dpkg::Use-Pty=0 -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold)

# Timings (seconds).  The guest is QEMU/TCG: slow forks, slow systemd.
readonly CMD_TIMEOUT=60    # one command as the test user (the launcher itself waits <= 30 s)
readonly SC_TIMEOUT=30     # systemctl queries, daemon-reload, bpftool
readonly SC_OP_TIMEOUT=240 # systemctl start/stop/restart (a start verifies the programs: up to a minute in a loaded 7.x guest)
readonly APT_TIMEOUT=900   # one apt-get run
readonly LOOP_MAX_S=1800   # the loop's own bound; timeout(1) adds a minute on top
readonly LOOP_BATCH=20     # the loop writes its attempt counter every LOOP_BATCH attempts
readonly LOOP_PAUSE=0.2    # the loop's wait after each attempt
readonly START_S=30        # the loop must have written its first counter by then
readonly ADVANCE_S=60      # longest wait for the loop to complete one more batch
readonly BACK_S=300        # longest wait for the daemon to serve again after a kill/start (a 7.x
                           # guest sharing two host cores with three others verifies the programs for a minute or more)
readonly DOWN_S=12         # RestartSec while step a measures the crash window
readonly HITS_S=20         # after --disable, the loop must have read the secret by then
readonly REAPPLY_S=45      # after the start that follows --disable, hits must stop by then (a
                           # window is a batch: LOOP_BATCH attempts, each with its pause)
readonly GONE_S=10         # unpinned links and programs must have left bpftool by then
readonly RESTARTS=3        # back-to-back restarts in step c
# Step h: the cause of a transient start-up failure, as a runtime drop-in line,
# and the text (std's strerror) the daemon's log must name.  LimitNOFILE: a
# bpf(2) that needs a descriptor beyond it fails with EMFILE while the daemon
# opens or loads the object (3 std + lock + BTF + maps + programs + links need
# far more than 16; with the loopback maps, on 6.1 the open already fails).
# Not MemoryMax=: measured on 6.1, lowering it in 64 KiB steps
# goes from a start that works straight to the OOM killer (SIGKILL, restarted
# by any version), never to ENOMEM, since the pinned maps are reused and the
# user-space peak of parsing the kernel's BTF comes first.
readonly H_CAUSE="LimitNOFILE=16"
readonly H_ERRNO="Too many open files"
# Step f: after --disable nothing is pinned (as at every boot), so the start
# creates the maps, whose hash buckets alone take 16 MiB each (1,048,576 x 16
# bytes, charged to the unit's memory cgroup) and fail with ENOMEM under this
# limit; the process itself peaks at about 10 MiB (measured on 6.1: 8M is
# OOM-killed, 12M-16M fail with ENOMEM).
readonly F_CAUSE="MemoryMax=20M"
readonly F_ERRNO="Cannot allocate memory"
readonly H_FAIL_S=60       # the first start under the drop-in has failed by then
readonly H_RETRY_S=300     # StartLimitBurst more restarts (RestartSec=5s each) by then (each failed start parses the kernel BTF first: 150 s was too short with five guests on two cores)
readonly H_BACK_S=300      # after the drop-in is gone, the next automatic start serves by then

PASS_N=0 FAIL_N=0

# shellcheck source=scripts/test-lib.sh
. "$(dirname "$0")/test-lib.sh"
T="" OUT="" ERR="" RC=0 CGROOT=""
N_DEB="" NEXT_DEB="" PKG="" N_VER="" NEXT_VER=""
TOK="" SECRET="" S="" H="" TUID="" LD="" LOOP_BG="" LOOP_PID=""
STEP="" STEP_C0=0 STEP_H0=0 HITS_AFTER_F="" LAYOUT_N=""
SETUP_DONE=0 CLEANED=0 DROPIN_MADE=0
NOTE_MADE=0 NUID="" NSECRET="" NS=""
BPF_ERR="" BPF_OUR_LINKS="" BPF_OUR_PROGS=""

# ---------------------------------------------------------------- reporting

# ---------------------------------------------------------------- running things

# run_root TIMEOUT CMD...: CMD as root, output in $OUT/$ERR, status $RC
run_root() {
	local t=$1
	shift
	RC=0
	timeout -k 10 "$t" "$@" </dev/null >"$OUT" 2>"$ERR" || RC=$?
}

pid_alive() { [ -n "$1" ] && ! pid_gone "$1"; }

# cgroup_of PID: the cgroup v2 path of PID
cgroup_of() { sed -n 's/^0:://p' "/proc/$1/cgroup" 2>/dev/null; }

# ---------------------------------------------------------------- daemon and package

sc() { timeout -k 5 "$SC_TIMEOUT" systemctl "$@"; }
daemon_active() { sc is-active --quiet "$UNIT"; }
daemon_inactive() { ! daemon_active; }
main_pid() { sc show -p MainPID --value "$UNIT" 2>/dev/null; }
unit_state() { sc show -p ActiveState,SubState --value "$UNIT" 2>/dev/null | tr '\n' '/' | sed 's#/$##'; }
ready_pid() { tr -d ' \n' 2>/dev/null <"$READY"; }

# daemon_serves: active, and the ready file names the live main process
daemon_serves() {
	local pid
	daemon_active || return 1
	pid=$(main_pid)
	[ -n "$pid" ] && [ "$pid" != 0 ] && [ "$(ready_pid)" = "$pid" ] && pid_alive "$pid"
}

# daemon_replaced OLD: a daemon other than OLD serves
daemon_replaced() { daemon_serves && [ "$(main_pid)" != "$1" ]; }

# daemon_down OLD: OLD has exited and the unit is not active
daemon_down() { pid_gone "$1" && daemon_inactive; }

# daemon_op VERB: systemctl VERB the unit, bounded; output in $T/systemctl.log
daemon_op() {
	timeout -k 10 "$SC_OP_TIMEOUT" systemctl "$1" "$UNIT" >"$T/systemctl.log" 2>&1
}

# daemon_ensure: start the daemon if it does not serve; 1 if it still does not
daemon_ensure() {
	daemon_serves && return 0
	sc reset-failed "$UNIT" >/dev/null 2>&1
	daemon_active || daemon_op start
	wait_for "$BACK_S" daemon_serves
}

# require_serving STEP: FAIL (once) if the daemon does not serve at the start of STEP
require_serving() {
	daemon_ensure || fail "$1: the daemon serves at the start of the step" \
		"state $(unit_state), MainPID $(main_pid), ready '$(ready_pid)'"
}

pkg_version() { dpkg-query -W -f='${Version}' "$PKG" 2>/dev/null; }
pkg_status() { dpkg-query -W -f='${Status}' "$PKG" 2>/dev/null; }
pkg_installed() { [ "$(pkg_status)" = "install ok installed" ]; }

# ---------------------------------------------------------------- the loop
#
# The loop runs as the test user in its sandbox.  Between attempts it waits
# LOOP_PAUSE seconds (bash's read -t on a FIFO nobody writes: no fork), so that
# it leaves most of the guest's CPU to apt and the daemon: nice alone does not,
# because the loop's sandbox cgroup and the daemon's unit are sibling groups of
# equal weight when the cpu controller is on (Debian 13: a full load of the
# programs took 67-125 s beside the unpaused loop, 27 s without it).  Its directory $LD
# holds: pid (the loop's pid), count (attempts so far, rewritten after every
# LOOP_BATCH attempts with the shell's builtin echo, so it may briefly read
# empty), err (stderr of the last attempt of the last batch), hits (one line
# per successful open), stop (create to end it), done (written when it ends).

LOOP_SH='d=$1 f=$2 batch=$3 max_s=$4 pause=$5
echo "$$" > "$d/pid"
mkfifo "$d/tick" && exec 3<> "$d/tick" || exit 1
end=$(( $(date +%s) + max_s ))
n=0
while [ ! -e "$d/stop" ]; do
	i=1
	while [ "$i" -lt "$batch" ] && [ ! -e "$d/stop" ]; do
		cat "$f" > /dev/null 2>&1 && echo hit >> "$d/hits"
		read -r -t "$pause" -u 3 _
		i=$((i + 1))
	done
	cat "$f" > /dev/null 2> "$d/err" && echo hit >> "$d/hits"
	read -r -t "$pause" -u 3 _
	n=$((n + batch))
	echo "$n" > "$d/count"
	[ "$(date +%s)" -lt "$end" ] || break
done
echo "$n" > "$d/done"'

# read_num FILE: the number in FILE (retries briefly on an empty read; 0 if none)
read_num() {
	local v="" i
	for i in 1 2 3 4 5 6 7 8 9 10; do
		v=$(cat "$1" 2>/dev/null)
		case $v in '' | *[!0-9]*) v="" ;; *) break ;; esac
		[ -e "$1" ] || break
		sleep 0.05
	done
	printf '%s' "${v:-0}"
}

loop_count() { read_num "$LD/count"; }
hits_count() {
	local n=0
	[ -e "$LD/hits" ] && n=$(wc -l 2>/dev/null <"$LD/hits")
	printf '%s' "$((${n:-0} + 0))"
}
loop_beyond() { [ "$(loop_count)" -gt "$1" ]; }
hits_beyond() { [ "$(hits_count)" -gt "$1" ]; }
loop_started() { [ -s "$LD/pid" ] && [ "$(loop_count)" -gt 0 ]; }
loop_denied() { has "$EPERM_MSG" "$LD/err"; }

# loop_in_tree: the loop is alive and in its sandbox cgroup
loop_in_tree() {
	pid_alive "$LOOP_PID" && in_sandbox_cgroup "/proc/$LOOP_PID/cgroup" "$TUID" &&
		grep -qx "$LOOP_PID" "$CGROOT/agent-sandbox-exec/uid-$TUID/cgroup.procs" 2>/dev/null
}

start_loop() {
	rm -rf "$LD"
	install -d -o "$TEST_USER" -g "$TEST_USER" -m 0755 "$LD"
	timeout -k 10 "$((LOOP_MAX_S + 60))" runuser -u "$TEST_USER" -- \
		nice -n 10 "$LAUNCHER" bash -c "$LOOP_SH" loop "$LD" "$S" "$LOOP_BATCH" "$LOOP_MAX_S" "$LOOP_PAUSE" \
		</dev/null >/dev/null 2>"$T/loop.err" &
	LOOP_BG=$!
	wait_for "$START_S" loop_started || return 1
	LOOP_PID=$(read_num "$LD/pid")
}

# stop_loop: ask the loop to end, then end what is left of it (by pid)
stop_loop() {
	[ -n "$LD" ] && [ -d "$LD" ] && touch "$LD/stop" 2>/dev/null
	if [ -n "$LOOP_BG" ]; then
		wait_for 10 pid_gone "$LOOP_BG" || kill "$LOOP_BG" 2>/dev/null
		wait_for 5 pid_gone "$LOOP_BG" || kill -KILL "$LOOP_BG" 2>/dev/null
		wait "$LOOP_BG" 2>/dev/null
	fi
	if pid_alive "$LOOP_PID"; then
		kill "$LOOP_PID" 2>/dev/null
		wait_for 5 pid_gone "$LOOP_PID" || kill -KILL "$LOOP_PID" 2>/dev/null
	fi
	return 0
}

# step_begin NAME: remember the loop's counters at the start of a step
step_begin() {
	STEP=$1
	STEP_C0=$(loop_count)
	STEP_H0=$(hits_count)
	note "step $STEP: loop attempts $STEP_C0, hits $STEP_H0, daemon $(unit_state) MainPID $(main_pid)"
}

# step_check_loop [hits-ok]: the loop made attempts since step_begin and (unless
# hits-ok) has never read the secret
step_check_loop() {
	local c1 h1 late=""
	c1=$(loop_count)
	if [ "$c1" -le "$STEP_C0" ]; then
		wait_for "$ADVANCE_S" loop_beyond "$STEP_C0"
		c1=$(loop_count)
		late=", seen only after waiting up to ${ADVANCE_S}s"
	fi
	ok "$STEP: the loop kept trying through the step (attempts $STEP_C0 -> $c1$late)" \
		"no new attempts in ${ADVANCE_S}s; loop stderr: $(snip "$T/loop.err")" test "$c1" -gt "$STEP_C0"
	if [ "${1:-}" != hits-ok ]; then
		h1=$(hits_count)
		ok "$STEP: zero hits during the step" "hits $STEP_H0 -> $h1: the secret was read" \
			test "$h1" -eq 0
	fi
}

# step_check_tree: the loop is still in uid-<uid>
step_check_tree() {
	ok "$STEP: the loop (pid $LOOP_PID) is still alive in agent-sandbox-exec/uid-$TUID" \
		"alive: $(pid_alive "$LOOP_PID" && echo yes || echo no); cgroup: $(cgroup_of "$LOOP_PID")" loop_in_tree
}

# ---------------------------------------------------------------- launches

# launch_probe MARKER: launch, as the test user, a program that writes its own
# cgroup to MARKER (so a run is visible, and where it ran)
launch_probe() {
	rm -f "$1"
	run_in "$TEST_USER" sh -c 'cat /proc/self/cgroup > "$1"' sh "$1"
}

# expect_refused WHAT MARKER: the last launch_probe exited 2 with one
# 'agent-sandbox-exec: ...' line and PROGRAM did not run
expect_refused() {
	local what=$1 m=$2
	if [ -e "$m" ]; then
		fail "$what" "PROGRAM ran: marker $(snip "$m"); $(why)"
	elif [ "$RC" -eq 2 ] && [ "$(wc -l <"$ERR")" -eq 1 ] && grep -q "^$LAUNCHER: " "$ERR"; then
		pass "$what"
		sleep 1
		[ ! -e "$m" ] || fail "$what: no late start of PROGRAM" "marker appeared after the launcher returned"
	else
		fail "$what" "$(why)"
	fi
	rm -f "$m"
}

# expect_new_launch_denied WHAT: a new launch cannot read the secret (EPERM),
# and a new launch runs in the sandbox cgroup
expect_new_launch_denied() {
	local what=$1
	run_in "$TEST_USER" cat "$S"
	if has "$SECRET" "$OUT" "$ERR"; then
		fail "$what: a new launch of cat secret fails with EPERM" "secret revealed; rc=$RC"
	elif [ "$RC" -eq 0 ] || ! has "$EPERM_MSG" "$ERR"; then
		fail "$what: a new launch of cat secret fails with EPERM" "$(why)"
	else
		pass "$what: a new launch of cat secret fails with EPERM"
	fi
	run_in "$TEST_USER" cat /proc/self/cgroup
	if [ "$RC" -eq 0 ] && in_sandbox_cgroup "$OUT" "$TUID"; then
		pass "$what: a new launch runs (exit 0) in uid-$TUID"
	else
		fail "$what: a new launch runs (exit 0) in uid-$TUID" "cgroup: $(snip "$OUT"); $(why)"
	fi
}

# ---------------------------------------------------------------- bpftool
#
# `bpftool prog show` (plain) starts each program with
#     "<id>: lsm  name file_open  tag <hex>  gpl"
# and `bpftool link show` each link with
#     "<id>: tracing  prog <prog id>  "
# followed by "\tprog_type lsm  attach_type lsm_mac  " (bpftool 7.1 / Linux 6.1
# and later).  Our programs are the "lsm" programs named in OUR_PROGS; the
# kernel keeps 15 characters of a name ("ptrace_access_c"), newer bpftool
# prints the full name from BTF, so names are matched by those 15-character
# prefixes.  A link is ours if its program is one of ours.
# Program names as the kernel keeps them (BPF_OBJ_NAME_LEN: at most 15 characters);
# bpftool shows the whole name from BTF (inode_free_security), or the kernel's
# (inode_free_secu). The matches below take either for a 15-character name, and
# only the name itself for a shorter one (file_ioctl is not file_ioctl_compat).
OUR_PROGS="file_open inode_link inode_rename inode_create inode_mknod inode_symlink inode_mkdir"
readonly OUR_PROGS="$OUR_PROGS inode_unlink inode_rmdir file_ioctl file_ioctl_comp inode_free_secu ptrace_access_c"

# bpf_scan: fill BPF_OUR_PROGS ("id name" lines) and BPF_OUR_LINKS
# ("link-id prog-id name link-type attach-type" lines); 1 (with BPF_ERR) if
# bpftool is missing or fails, so that "nothing found" is never a false PASS
bpf_scan() {
	BPF_OUR_PROGS="" BPF_OUR_LINKS="" BPF_ERR=""
	if ! command -v bpftool >/dev/null; then
		BPF_ERR="bpftool is not installed"
		return 1
	fi
	if ! timeout -k 5 "$SC_TIMEOUT" bpftool prog show >"$T/bpf-progs.txt" 2>"$T/bpf.err"; then
		BPF_ERR="bpftool prog show failed: $(snip "$T/bpf.err")"
		return 1
	fi
	if ! timeout -k 5 "$SC_TIMEOUT" bpftool link show >"$T/bpf-links.txt" 2>"$T/bpf.err"; then
		BPF_ERR="bpftool link show failed: $(snip "$T/bpf.err")"
		return 1
	fi
	awk -v ours="$OUR_PROGS" 'BEGIN { n = split(ours, want, " ") }
		/^[0-9]+: / {
			id = $1; sub(/:$/, "", id); name = ""
			for (i = 3; i < NF; i++) if ($i == "name") name = $(i + 1)
			if ($2 != "lsm") next
			for (j = 1; j <= n; j++) if (name == want[j] || (length(want[j]) == 15 && substr(name, 1, 15) == want[j])) { print id, name; next }
		}' "$T/bpf-progs.txt" >"$T/bpf-ours.txt"
	awk 'FILENAME == ARGV[1] { name[$1] = $2; next }
		function flush() { if (lid != "" && (pid in name)) print lid, pid, name[pid], ltype, att; lid = "" }
		/^[0-9]+: / {
			flush(); lid = $1; sub(/:$/, "", lid); ltype = $2; pid = ""; att = "-"
			for (i = 3; i < NF; i++) if ($i == "prog") pid = $(i + 1)
			next
		}
		{ for (i = 1; i < NF; i++) if ($i == "attach_type") att = $(i + 1) }
		END { flush() }' "$T/bpf-ours.txt" "$T/bpf-links.txt" >"$T/bpf-our-links.txt"
	BPF_OUR_PROGS=$(cat "$T/bpf-ours.txt")
	BPF_OUR_LINKS=$(cat "$T/bpf-our-links.txt")
	return 0
}

# our_links_of NAME: how many of our links belong to the program named NAME
our_links_of() {
	awk -v n="$1" '$3 == n || (length(n) == 15 && substr($3, 1, 15) == n) { c++ } END { print c + 0 }' <<<"$BPF_OUR_LINKS"
}

# bpf_links_attached: a tracing/lsm link for each of our programs
bpf_links_attached() {
	bpf_scan || return 1
	awk -v ours="$OUR_PROGS" 'BEGIN { n = split(ours, want, " ") }
		$4 == "tracing" && $5 ~ /^lsm/ {
			for (j = 1; j <= n; j++) if ($3 == want[j] || (length(want[j]) == 15 && substr($3, 1, 15) == want[j])) seen[j] = 1
		}
		END { for (j = 1; j <= n; j++) if (!seen[j]) exit 1 }' <<<"$BPF_OUR_LINKS"
}

# bpf_links_one_each: exactly one link per program (earlier daemons' links are gone)
bpf_links_one_each() {
	local p
	bpf_links_attached || return 1
	for p in $OUR_PROGS; do
		[ "$(our_links_of "$p")" -eq 1 ] || return 1
	done
}

bpf_no_file_open_link() { bpf_scan && [ "$(our_links_of file_open)" -eq 0 ]; }
bpf_none_of_ours() { bpf_scan && [ -z "$BPF_OUR_LINKS" ] && [ -z "$BPF_OUR_PROGS" ]; }

# bpf_detail: what bpftool showed, on one line, for FAIL details
bpf_detail() {
	if [ -n "$BPF_ERR" ]; then
		printf '%s' "$BPF_ERR"
	else
		printf 'our links: [%s]; our programs: [%s]' "$(tr '\n' ';' <<<"$BPF_OUR_LINKS")" "$(tr '\n' ';' <<<"$BPF_OUR_PROGS")"
	fi
}

# note_bpf WHAT: record our links as bpftool printed them
note_bpf() {
	local id _rest
	bpf_scan || { note "$1: $BPF_ERR"; return 0; }
	note "$1: our links (link prog name type attach_type): $(tr '\n' ';' <<<"$BPF_OUR_LINKS")"
	while read -r id _rest; do
		[ -n "$id" ] || continue
		awk -v id="$id" '/^[0-9]+: / { p = ($1 == id ":") } p { print "#   " $0 }' "$T/bpf-links.txt"
	done <<<"$BPF_OUR_LINKS"
}

# ---------------------------------------------------------------- pins

# layout_dirs: the v* directories under BPF_DIR, space-separated
layout_dirs() {
	local d out=""
	for d in "$BPF_DIR"/v*; do
		[ -d "$d" ] && out="$out ${d##*/}"
	done
	printf '%s' "${out# }"
}

# pins_complete DIR: both maps and a link pin for each program
pins_complete() {
	local p
	[ -e "$1/deny_map" ] && [ -e "$1/name_map" ] && [ -e "$1/agent_cgid_set" ] || return 1
	for p in file_open inode_link inode_rename inode_create inode_mknod inode_symlink \
		inode_mkdir inode_unlink inode_rmdir file_ioctl file_ioctl_compat inode_free_security \
		ptrace_access_check; do
		compgen -G "$1/link-*$p" >/dev/null || return 1
	done
}

# note_sandboxes WHAT: record the sandbox cgroups (a new layout's daemon re-applies
# every one of them before it retires the old layout)
note_sandboxes() {
	local d uid who line=""
	for d in "$CGROOT"/agent-sandbox-exec/uid-*; do
		[ -d "$d" ] || continue
		uid=${d##*/uid-}
		who=$(getent passwd "$uid" | cut -d: -f1)
		line="$line ${d##*/}(${who:-no passwd entry}, $(wc -l 2>/dev/null <"$d/cgroup.procs") procs)"
	done
	note "$1: sandbox cgroups:${line:- none}"
}

pins_listing() { find "$BPF_DIR" -mindepth 1 -printf '%P ' 2>/dev/null || printf '(absent)'; }

# ================================================================ steps

step_setup() {
	local cg
	STEP=setup
	okl "setup: $UNIT serves at the start (active, ready file = MainPID)" \
		'state $(unit_state), MainPID $(main_pid), ready file $(ready_pid)' wait_for "$BACK_S" daemon_serves
	ok "setup: version N ($N_VER) of $PKG is installed" "dpkg says '$(pkg_status)' '$(pkg_version)'" \
		test "$(pkg_version)" = "$N_VER"
	LAYOUT_N=$(layout_dirs)
	ok "setup: one map-layout directory under $BPF_DIR, with maps and links ($LAYOUT_N)" \
		"found '$LAYOUT_N': $(pins_listing)" eval '[ -n "$LAYOUT_N" ] && [ "${LAYOUT_N// /}" = "$LAYOUT_N" ] && pins_complete "$BPF_DIR/$LAYOUT_N"'

	run_as "$TEST_USER" cat "$S"
	ok "setup: outside the sandbox the test user reads the secret (so a hit is possible)" "$(why)" \
		has "$SECRET" "$OUT"

	if ! start_loop; then
		fail "setup: the sandboxed loop starts" "no counter after ${START_S}s; loop stderr: $(snip "$T/loop.err")"
		return 1
	fi
	pass "setup: the sandboxed loop starts (pid $LOOP_PID)"
	cg=$CGROOT/agent-sandbox-exec/uid-$TUID
	ok "setup: the loop is in $cg" "cgroup: $(cgroup_of "$LOOP_PID"); cgroup.procs: $(snip "$cg/cgroup.procs")" loop_in_tree
	# The loop rewrites its error file every batch, so poll instead of
	# sampling it once.
	okl "setup: the loop's attempts are denied with EPERM" 'last error: $(snip "$LD/err")' \
		wait_for "$ADVANCE_S" loop_denied
	ok "setup: zero hits so far" "hits: $(hits_count)" test "$(hits_count)" -eq 0
	expect_new_launch_denied "setup"
	okl "setup: bpftool link show lists tracing/lsm links of all our programs" \
		'$(bpf_detail)' bpf_links_attached
	note_bpf "setup"
	return 0
}

# kill_main PID: SIGKILL the daemon's main process PID (never 0, 1 or a non-number:
# kill -KILL 0 would hit this script's own process group)
kill_main() {
	case $1 in
	'' | 0 | 1 | *[!0-9]*)
		fail "$STEP: the daemon has a MainPID to kill" "MainPID '$1', state $(unit_state)"
		return 1
		;;
	esac
	kill -KILL "$1"
}

step_a_kill() {
	local old new m=$LD/marker-a c_kill c1 state
	step_begin "a (kill -9)"
	require_serving "$STEP"

	# a1: the unit as shipped (RestartSec default): a launch right after the kill
	old=$(main_pid)
	kill_main "$old" || return
	launch_probe "$m"
	if [ "$RC" -eq 2 ] && [ ! -e "$m" ]; then
		pass "$STEP: a launch right after kill -9 fails closed (exit 2, PROGRAM not run)"
	elif [ "$RC" -eq 0 ] && in_sandbox_cgroup "$m" "$TUID" && daemon_replaced "$old"; then
		pass "$STEP: a launch right after kill -9 raced the automatic restart; it ran only once the new daemon (pid $(main_pid)) served it"
	else
		fail "$STEP: a launch right after kill -9 fails closed or is served by the restarted daemon" \
			"marker: $(snip "$m"); state $(unit_state) MainPID $(main_pid); $(why)"
	fi
	rm -f "$m"
	okl "$STEP: systemd restarts the daemon by itself (Restart=on-failure) and it serves again" \
		'state $(unit_state), MainPID $(main_pid) (was $old), ready file $(ready_pid)' wait_for "$BACK_S" daemon_replaced "$old"

	# a2: the same crash with RestartSec widened, so the down window is certain
	mkdir -p "$DROPIN_DIR" && printf '[Service]\nRestartSec=%ss\n' "$DOWN_S" >"$DROPIN" && DROPIN_MADE=1
	sc daemon-reload
	old=$(main_pid)
	c_kill=$(loop_count)
	if ! kill_main "$old"; then
		rm -f "$DROPIN"
		rmdir "$DROPIN_DIR" 2>/dev/null
		DROPIN_MADE=0
		sc daemon-reload
		return
	fi
	if ! wait_for 10 daemon_down "$old"; then
		fail "$STEP: with RestartSec=${DOWN_S}s the unit is down after kill -9" "state $(unit_state), MainPID $(main_pid)"
	fi
	state=$(unit_state)
	launch_probe "$m"
	if daemon_inactive; then
		expect_refused "$STEP: while the daemon is down (unit $state) a launch exits 2 with one line and PROGRAM does not run" "$m"
	elif [ "$RC" -eq 2 ] && [ ! -e "$m" ]; then
		pass "$STEP: while the daemon is down (unit $state) a launch exits 2 and PROGRAM does not run (the daemon was back when it returned)"
	else
		fail "$STEP: while the daemon is down a launch exits 2" "the daemon came back during the launch; marker: $(snip "$m"); $(why)"
	fi
	rm -f "$m"
	wait_for "$ADVANCE_S" loop_beyond "$c_kill"
	c1=$(loop_count)
	if [ "$c1" -gt "$c_kill" ] && daemon_inactive; then
		pass "$STEP: the loop kept trying while the daemon was down (attempts $c_kill -> $c1, hits $(hits_count))"
	elif [ "$c1" -gt "$c_kill" ]; then
		pass "$STEP: the loop kept trying around the crash (attempts $c_kill -> $c1, hits $(hits_count); the daemon was back before a batch completed)"
	else
		fail "$STEP: the loop kept trying while the daemon was down" "attempts stuck at $c1"
	fi
	ok "$STEP: zero hits while the daemon was down" "hits: $(hits_count)" test "$(hits_count)" -eq 0
	okl "$STEP: after RestartSec=${DOWN_S}s systemd restarts the daemon by itself and it serves" \
		'state $(unit_state), MainPID $(main_pid) (was $old), ready file $(ready_pid)' \
		wait_for "$((DOWN_S + BACK_S))" daemon_replaced "$old"
	rm -f "$DROPIN"
	rmdir "$DROPIN_DIR" 2>/dev/null
	DROPIN_MADE=0
	sc daemon-reload
	new=$(main_pid)
	note "step $STEP: daemon back as pid $new"
	step_check_loop
	step_check_tree
	expect_new_launch_denied "$STEP"
}

step_b_stop() {
	local m=$LD/marker-b c0 c1
	step_begin "b (systemctl stop)"
	require_serving "$STEP"
	daemon_op stop
	okl "$STEP: systemctl stop stops the daemon" '$(snip "$T/systemctl.log"); state $(unit_state)' \
		wait_for 30 daemon_inactive
	ok "$STEP: $READY is absent while stopped" "ready '$(ready_pid)'" test ! -e "$READY"
	launch_probe "$m"
	expect_refused "$STEP: while stopped a launch exits 2 with one line and PROGRAM does not run" "$m"
	c0=$(loop_count)
	wait_for "$ADVANCE_S" loop_beyond "$c0"
	c1=$(loop_count)
	ok "$STEP: while stopped the loop keeps trying (attempts $c0 -> $c1) and is denied" \
		"attempts $c0 -> $c1; hits $(hits_count); last error: $(snip "$LD/err"); state $(unit_state)" \
		eval '[ "$c1" -gt "$c0" ] && [ "$(hits_count)" -eq 0 ] && wait_for 10 loop_denied && daemon_inactive'
	ok "$STEP: while stopped the pins stay in $BPF_DIR/$LAYOUT_N" "$(pins_listing)" pins_complete "$BPF_DIR/$LAYOUT_N"
	okl "$STEP: while stopped bpftool link show still lists the tracing/lsm links of file_open and ptrace_access_check" \
		'$(bpf_detail)' bpf_links_attached
	daemon_op start
	okl "$STEP: systemctl start: the daemon serves again" \
		'$(snip "$T/systemctl.log"); state $(unit_state), ready file $(ready_pid)' wait_for "$BACK_S" daemon_serves
	step_check_loop
	step_check_tree
	expect_new_launch_denied "$STEP"
}

step_c_restart() {
	local i old pids="" bad=""
	step_begin "c (systemctl restart x$RESTARTS)"
	require_serving "$STEP"
	local t0
	t0=$(date +%s)
	for i in $(seq "$RESTARTS"); do
		old=$(main_pid)
		daemon_op restart || bad="$bad restart $i: $(snip "$T/systemctl.log");"
		if wait_for "$BACK_S" daemon_replaced "$old"; then
			pids="$pids $old->$(main_pid)"
		else
			bad="$bad restart $i: old $old, state $(unit_state), MainPID $(main_pid);"
		fi
	done
	ok "$STEP: each restart replaced the daemon, which serves (pids$pids)" "$bad" test -z "$bad"
	# The same build on the same kernel: each start takes over the attached
	# programs instead of having the kernel verify them again.
	journal_since "$t0" >"$T/journal-c.log"
	ok "$STEP: each restart adopted the attached programs, none loaded them again" \
		"$(grep -aE 'adopted the BPF programs|BPF programs loaded' "$T/journal-c.log" | tail -n 4)" \
		eval '[ "$(grep -ac "adopted the BPF programs" "$T/journal-c.log")" -eq "$RESTARTS" ] &&
			! grep -aq "BPF programs loaded (verified)" "$T/journal-c.log"'
	okl "$STEP: exactly one link per program is attached afterwards (earlier ones unpinned)" \
		'$(bpf_detail)' wait_for "$GONE_S" bpf_links_one_each
	step_check_loop
	step_check_tree
	expect_new_launch_denied "$STEP"
}

step_d_reinstall() {
	local old
	step_begin "d (apt-get install --reinstall N)"
	require_serving "$STEP"
	old=$(main_pid)
	run_root "$APT_TIMEOUT" apt-get install --reinstall "${APT_OPTS[@]}" "$N_DEB"
	cat "$OUT" "$ERR" >"$T/apt-reinstall.log"
	ok "$STEP: apt-get install --reinstall exits 0" "rc=$RC; $(tailsnip "$T/apt-reinstall.log")" test "$RC" -eq 0
	ok "$STEP: dpkg still reports version $N_VER" "'$(pkg_status)' '$(pkg_version)'" \
		eval 'pkg_installed && [ "$(pkg_version)" = "$N_VER" ]'
	okl "$STEP: the package scripts restarted the daemon and it serves" \
		'state $(unit_state), MainPID $(main_pid) (was $old), ready file $(ready_pid)' wait_for "$BACK_S" daemon_replaced "$old"
	note "step $STEP: daemon pid $old -> $(main_pid)"
	ok "$STEP: the pins are still in $BPF_DIR/$LAYOUT_N only" "$(pins_listing)" \
		eval '[ "$(layout_dirs)" = "$LAYOUT_N" ] && pins_complete "$BPF_DIR/$LAYOUT_N"'
	okl "$STEP: exactly one link per program is attached" '$(bpf_detail)' wait_for "$GONE_S" bpf_links_one_each
	step_check_loop
	step_check_tree
	expect_new_launch_denied "$STEP"
}

step_e_upgrade() {
	local old new_layout got
	step_begin "e (upgrade N -> N+1)"
	if [ -z "$NEXT_DEB" ] || [ ! -f "$NEXT_DEB" ]; then
		fail "$STEP: a second .deb (version N+1) is given" "VM_DEBS='${VM_DEBS:-}'"
		return
	fi
	if [ "$(dpkg-deb -f "$NEXT_DEB" Package 2>/dev/null)" != "$PKG" ] ||
		! dpkg --compare-versions "$NEXT_VER" gt "$N_VER"; then
		fail "$STEP: the second .deb is a later version of $PKG" \
			"$(dpkg-deb -f "$NEXT_DEB" Package 2>&1) $NEXT_VER vs $PKG $N_VER"
		return
	fi
	require_serving "$STEP"
	note_sandboxes "step $STEP"
	old=$(main_pid)
	local t0
	t0=$(date +%s)
	# A local edit of the base list (a conffile) must survive the upgrade
	# without a question: no --force-conf* options here, stdin is /dev/null,
	# so a conffile prompt would fail the install.
	local marker="# local edit before the upgrade $$"
	echo "$marker" >>/etc/agent-sandbox-exec/denylist
	run_root "$APT_TIMEOUT" apt-get install -y -o Dpkg::Use-Pty=0 "$NEXT_DEB"
	cat "$OUT" "$ERR" >"$T/apt-upgrade.log"
	ok "$STEP: apt-get install of $NEXT_VER exits 0 without a conffile question" \
		"rc=$RC; $(tailsnip "$T/apt-upgrade.log")" test "$RC" -eq 0
	ok "$STEP: the local edit of the base list is kept" "$(tail -n 2 /etc/agent-sandbox-exec/denylist)" \
		grep -qxF -- "$marker" /etc/agent-sandbox-exec/denylist
	ok "$STEP: no .dpkg-dist/.dpkg-new copy of the base list" "$(ls /etc/agent-sandbox-exec)" \
		eval '! ls /etc/agent-sandbox-exec | grep -q "\.dpkg-"'
	sed -i "\|^$marker\$|d" /etc/agent-sandbox-exec/denylist
	ok "$STEP: the upgrade keeps the records in $RECORD_DIR (uid-$TUID)" \
		"$(find "$RECORD_DIR" 2>&1 | tr '\n' ' ')" test -f "$RECORD_DIR/uid-$TUID"
	ok "$STEP: dpkg reports version $NEXT_VER installed" "'$(pkg_status)' '$(pkg_version)'" \
		eval 'pkg_installed && [ "$(pkg_version)" = "$NEXT_VER" ]'
	okl "$STEP: the service is active and the new daemon serves" \
		'state $(unit_state), MainPID $(main_pid) (was $old), ready file $(ready_pid)' wait_for "$BACK_S" daemon_replaced "$old"
	note "step $STEP: daemon pid $old -> $(main_pid)"
	journal_since "$t0" >"$T/journal-e.log"
	ok "$STEP: the new build loaded (and the kernel verified) its programs, adopting none" \
		"$(grep -aE 'adopted the BPF programs|BPF programs loaded' "$T/journal-e.log" | tail -n 4)" \
		eval 'grep -aq "BPF programs loaded (verified)" "$T/journal-e.log" &&
			! grep -aq "adopted the BPF programs" "$T/journal-e.log"'
	run_as "$TEST_USER" "$LAUNCHER" --version
	got=$(cat "$OUT" 2>/dev/null)
	ok "$STEP: the installed launcher is version $NEXT_VER" "--version: '$got'; $(why)" \
		test "$got" = "$LAUNCHER $NEXT_VER"

	new_layout=$(layout_dirs)
	note "step $STEP: layout directories before: '$LAYOUT_N', after: '$new_layout'; pins: $(pins_listing)"
	ok "$STEP: the pins moved to one new layout directory ($LAYOUT_N -> $new_layout) holding maps and links" \
		"layout dirs now '$new_layout'; $(pins_listing)" \
		eval '[ -n "$new_layout" ] && [ "${new_layout// /}" = "$new_layout" ] && [ "$new_layout" != "$LAYOUT_N" ] && pins_complete "$BPF_DIR/$new_layout"'
	ok "$STEP: the old layout directory $BPF_DIR/$LAYOUT_N is gone" \
		"still there: $(find "$BPF_DIR/$LAYOUT_N" -mindepth 1 -printf '%P ' 2>/dev/null)" test ! -e "$BPF_DIR/$LAYOUT_N"
	okl "$STEP: exactly one link per program is attached (the old layout's are detached)" \
		'$(bpf_detail)' wait_for "$GONE_S" bpf_links_one_each
	note_bpf "step $STEP"
	[ -n "$new_layout" ] && LAYOUT_N=$new_layout
	step_check_loop
	step_check_tree
	expect_new_launch_denied "$STEP (upgraded launcher)"
}

step_f_disable() {
	local c0 c1 h0 h1 found cmd
	step_begin "f (--disable)"
	require_serving "$STEP"
	cmd=$(command -v "$DAEMON" || echo "/usr/sbin/$DAEMON")

	# While the daemon serves, --disable must refuse and change nothing.
	run_root "$SC_OP_TIMEOUT" "$cmd" --disable
	ok "$STEP: --disable while the daemon serves refuses (non-zero exit)" \
		"rc=$RC; stdout: $(snip "$OUT"); stderr: $(snip "$ERR")" test "$RC" -ne 0
	note "step $STEP: refusal said: $(snip "$ERR")"
	c0=$(loop_count)
	wait_for "$ADVANCE_S" loop_beyond "$c0"
	okl "$STEP: after the refused --disable the daemon still serves, links and pins stay, zero hits" \
		'state $(unit_state); $(bpf_detail); pins: $(pins_listing); hits $(hits_count)' \
		eval 'daemon_serves && bpf_links_one_each && pins_complete "$BPF_DIR/$LAYOUT_N" && [ "$(hits_count)" -eq 0 ] && loop_beyond "$c0"'

	# With the service stopped it disables on purpose.
	daemon_op stop
	okl "$STEP: systemctl stop stops the daemon" '$(snip "$T/systemctl.log"); state $(unit_state)' \
		wait_for 30 daemon_inactive
	h0=$(hits_count)
	run_root "$SC_OP_TIMEOUT" "$cmd" --disable
	ok "$STEP: --disable with the service stopped exits 0 and says what it did ($(tail -n 1 "$OUT" 2>/dev/null | tr -d '\n' | head -c 160 | tr -c '[:print:]' '?'))" \
		"rc=$RC; stdout: $(snip "$OUT"); stderr: $(snip "$ERR")" eval '[ "$RC" -eq 0 ] && [ -s "$OUT" ]'
	note "step $STEP: --disable printed: $(snip "$OUT")"
	if wait_for "$HITS_S" hits_beyond "$h0"; then
		pass "$STEP: now the running loop reads the secret (hits $h0 -> $(hits_count)): the loop does detect reads"
	else
		fail "$STEP: now the running loop reads the secret" \
			"no hit in ${HITS_S}s; attempts $(loop_count); last error: $(snip "$LD/err")"
	fi
	okl "$STEP: bpftool link show lists no file_open link any more" '$(bpf_detail)' \
		wait_for "$GONE_S" bpf_no_file_open_link
	note "step $STEP: after --disable: $BPF_DIR: $(pins_listing); our programs: $(tr '\n' ';' <<<"$BPF_OUR_PROGS")"
	launch_probe "$LD/marker-f"
	expect_refused "$STEP: disabled and stopped, a launch still exits 2 and PROGRAM does not run" "$LD/marker-f"

	# Starting the service turns enforcement back on, for the running loop too.
	# Nothing is pinned now, as at boot: the first start creates the maps,
	# under F_CAUSE too little memory for them (ENOMEM), a cause that passes.
	# Step i proves the restarts beyond the start limit's burst; waiting for
	# them here too made this step 190-460 s of test-lifecycle (CI, 6.1-7.x).
	transient_cycle "$F_CAUSE" "$F_ERRNO" start hits-ok once
	daemon_serves || daemon_op start
	okl "$STEP: systemctl start: the daemon serves again" \
		'$(snip "$T/systemctl.log"); state $(unit_state), ready file $(ready_pid)' wait_for "$BACK_S" daemon_serves
	found=0
	local deadline=$((SECONDS + REAPPLY_S))
	while :; do
		h0=$(hits_count) c0=$(loop_count)
		# a window holding at least one whole batch of attempts
		wait_for "$ADVANCE_S" loop_beyond "$((c0 + LOOP_BATCH))"
		h1=$(hits_count) c1=$(loop_count)
		if [ "$h1" -eq "$h0" ] && [ "$c1" -gt "$((c0 + LOOP_BATCH))" ]; then
			found=1
			break
		fi
		[ "$SECONDS" -lt "$deadline" ] || break
	done
	if [ "$found" -eq 1 ]; then
		pass "$STEP: after the start the running loop is denied again (hits stay at $h1 over attempts $c0 -> $c1)"
	else
		fail "$STEP: after the start the running loop is denied again within ${REAPPLY_S}s" \
			"last window: hits $h0 -> $h1 over attempts $c0 -> $c1; last error: $(snip "$LD/err")"
	fi
	okl "$STEP: the loop's attempts fail with EPERM again" 'last error: $(snip "$LD/err")' \
		wait_for "$ADVANCE_S" loop_denied
	HITS_AFTER_F=$(hits_count)
	okl "$STEP: enforcement is back: pins in one layout directory, one link per program" \
		'$(pins_listing); $(bpf_detail)' eval 'pins_complete "$BPF_DIR/$(layout_dirs)" && wait_for "$GONE_S" bpf_links_one_each'
	step_check_loop hits-ok
	step_check_tree
	expect_new_launch_denied "$STEP"
}

# note_read, note_denied: the last run_as/run_in of cat read the step-h secret, or was denied it
note_read() { has "$NSECRET" "$OUT"; }
note_denied() { ! has "$NSECRET" "$OUT" "$ERR" && [ "$RC" -ne 0 ] && has "$EPERM_MSG" "$ERR"; }

# nu_sandbox_empty: no process is left in the sandbox cgroup of the step-h user
nu_sandbox_empty() {
	local f=$CGROOT/agent-sandbox-exec/uid-$NUID/cgroup.procs
	[ ! -e "$f" ] || [ ! -s "$f" ]
}

# restart_forgetting: kill the step-h user's processes, restart the daemon and
# check that it removed that user's empty sandbox cgroup (forgot the sandbox)
restart_forgetting() {
	local what=$1 old
	kill_user_procs "$NOTE_USER"
	okl "$STEP: $what: no process is left in uid-$NUID" \
		'cgroup.procs: $(snip "$CGROOT/agent-sandbox-exec/uid-$NUID/cgroup.procs")' wait_for 10 nu_sandbox_empty
	old=$(main_pid)
	daemon_op restart
	okl "$STEP: $what: systemctl restart replaced the daemon, which serves" \
		'$(snip "$T/systemctl.log"); old $old, state $(unit_state), MainPID $(main_pid)' \
		wait_for "$BACK_S" daemon_replaced "$old"
	ok "$STEP: $what: the new daemon removed the empty cgroup uid-$NUID (the sandbox is forgotten)" \
		"$(find "$CGROOT/agent-sandbox-exec" -maxdepth 1 2>&1 | tr '\n' ' ')" \
		test ! -e "$CGROOT/agent-sandbox-exec/uid-$NUID"
}

step_h_record() {
	local nh list rec since
	step_begin "h (the removal note across a restart)"
	require_serving "$STEP"
	remove_test_user "$NOTE_USER" || { fail "$STEP: user $NOTE_USER" "exists and is not a test user"; return; }
	useradd -m -s /bin/sh -c "$GECOS" "$NOTE_USER" || { fail "$STEP: useradd $NOTE_USER" "failed"; return; }
	NOTE_MADE=1
	NUID=$(id -u "$NOTE_USER")
	nh=$(home_of "$NOTE_USER")
	NSECRET="asx-lc2-secret-$TOK"
	NS=$nh/secret2.txt
	list=$nh/$HOME_LIST_REL
	rec=$RECORD_DIR/uid-$NUID
	printf '%s\n' "$NSECRET" >"$NS" && chown "$NOTE_USER:" "$NS" && chmod 0600 "$NS"
	install -d -o "$NOTE_USER" -g "$NOTE_USER" -m 0755 "$nh/.config" "$nh/.config/agent-sandbox-exec"
	printf '%s\n' "$NS" >"$list" && chown "$NOTE_USER:" "$list"

	run_in "$NOTE_USER" cat "$NS"
	ok "$STEP: a launch from outside is denied the listed file" "$(why)" note_denied
	ok "$STEP: the record $rec is a root-owned 0600 file in a root-owned 0700 directory" \
		"$(stat -c '%U %a %F %n' "$RECORD_DIR" "$rec" 2>&1 | tr '\n' ' ')" \
		eval '[ "$(stat -c "%U %a" "$RECORD_DIR" "$rec" 2>/dev/null | tr "\n" " ")" = "root 700 root 600 " ] && [ -f "$rec" ] && [ ! -L "$rec" ]'
	# The list emptied (by the user, outside: a sandboxed agent cannot edit it, test-writes.sh),
	# then a launch from inside.
	run_in_after "$NOTE_USER" ': >"$list"' agent-sandbox-exec cat "$NS"
	ok "$STEP: after the list is emptied, a launch from inside is still denied" "$(why)" note_denied
	okl "$STEP: ... and is told the entry stays denied" '$(why)' has "stay denied" "$ERR"

	restart_forgetting "after the list was emptied"
	run_in "$NOTE_USER" cat "$NS"
	ok "$STEP: the first launch from outside after the restart applies the empty list (reads the file)" \
		"$(why)" note_read
	okl "$STEP: ... and prints the note '... $GONE_NOTE ...'" '$(why)' has "$GONE_NOTE" "$ERR"
	note "step $STEP: the note: $(grep -a 'note:' "$ERR" | head -n 2 | tr '\n' '|')"
	run_in "$NOTE_USER" cat "$NS"
	ok "$STEP: the next launch from outside prints no note (said once)" "$(why)" \
		eval 'note_read && ! has "note:" "$ERR"'

	# A corrupt record fails safe.
	printf '%s\n' "$NS" >"$list" && chown "$NOTE_USER:" "$list"
	run_in "$NOTE_USER" cat "$NS"
	ok "$STEP: listed again, a launch from outside is denied" "$(why)" note_denied
	printf 'agent-sandbox-exec denied-record 1\nboot torn' >"$rec"
	restart_forgetting "with a corrupt record"
	since=$(date '+%Y-%m-%d %H:%M:%S')
	run_in "$NOTE_USER" cat "$NS"
	ok "$STEP: with a corrupt record, a launch from outside is denied as listed" "$(why)" note_denied
	okl "$STEP: ... and prints the fail-safe note that entries may no longer be denied" '$(why)' \
		has "$UNKNOWN_NOTE" "$ERR"
	journalctl -u "$UNIT" --since "$since" --no-pager >"$T/journal-h.log" 2>&1
	okl "$STEP: the daemon's log names the record and the cause" '$(tailsnip "$T/journal-h.log")' \
		has "cannot use the record of what its sandboxes denied: $rec: truncated" "$T/journal-h.log"
	run_in "$NOTE_USER" cat "$NS"
	ok "$STEP: the next launch is denied and prints no note (the record was written anew)" "$(why)" \
		eval 'note_denied && ! has "note:" "$ERR"'
	ok "$STEP: the daemon still serves" "state $(unit_state)" daemon_serves
	expect_new_launch_denied "$STEP"
	kill_user_procs "$NOTE_USER"
}

# unit_prop NAME: one property of the unit (systemctl show)
unit_prop() { sc show -p "$1" --value "$UNIT" 2>/dev/null; }
restarts_beyond() { [ "$(unit_prop NRestarts)" -gt "$1" ] 2>/dev/null; }
# retrying_beyond N: restarted more than N times and not given up (failed)
retrying_beyond() { restarts_beyond "$1" && [ "$(unit_prop ActiveState)" != failed ]; }
# unit_failed_or_restarted N: the unit gave up (failed) or restarted more than N times
unit_failed_or_restarted() { [ "$(unit_prop ActiveState)" = failed ] || restarts_beyond "$1"; }
# journal_since T: the unit's journal since epoch T, messages only
journal_since() { timeout -k 5 "$SC_TIMEOUT" journalctl -u "$UNIT" --since "@$1" --no-pager -o cat 2>/dev/null; }
# journal_has_exit T: since epoch T systemd logged an exit of the main process
# (the journal lands in $T/journal-transient.txt)
journal_has_exit() {
	journal_since "$1" >"$T/journal-transient.txt"
	grep -q "Main process exited, code=exited, status=" "$T/journal-transient.txt"
}

# transient_cycle CAUSE STRERROR VERB HITS RETRIES: with a runtime drop-in holding
# the line CAUSE, `systemctl VERB` the unit: its start fails while loading the
# programs, the log names STRERROR, the daemon exits 75 (not 78), a launch
# exits 2, systemd restarts it (with RETRIES beyond-burst: more than
# StartLimitBurst times without giving up; with once: at least once), and
# (unless HITS is hits-ok) the loop is never served a read; then the drop-in
# goes and the service must serve again by itself (no reset-failed, no start).
# Leaves a serving daemon behind even where a check failed.
transient_cycle() {
	local cause=$1 errno=$2 verb=$3 hits=$4 retries=$5 m=$LD/marker-transient r0 st burst want t0 h0 lines
	burst=$(unit_prop StartLimitBurst)
	r0=$(unit_prop NRestarts)
	want=$((r0 + ${burst:-5}))
	[ "$retries" = beyond-burst ] || want=$r0
	h0=$(hits_count)
	note "step $STEP: cause: drop-in '$cause'; RestartSec $(unit_prop RestartUSec), start limit ${burst:-?} in $(unit_prop StartLimitIntervalUSec), NRestarts $r0"
	mkdir -p "$DROPIN_DIR" && printf '[Service]\n%s\n' "$cause" >"$DROPIN" && DROPIN_MADE=1
	sc daemon-reload
	t0=$(date +%s)
	daemon_op "$verb"
	note "step $STEP: systemctl $verb under the drop-in: $(snip "$T/systemctl.log")"

	okl "$STEP: the start under '$cause' fails and systemd either gives up or restarts it" \
		'state $(unit_state), NRestarts $(unit_prop NRestarts), status $(unit_prop ExecMainStatus)' \
		wait_for "$H_FAIL_S" unit_failed_or_restarted "$r0"
	# The exit status as systemd logged it: ExecMainStatus is reset as soon as
	# the next automatic start runs.
	wait_for 10 journal_has_exit "$t0"
	st=$(sed -n 's/.*Main process exited, code=exited, status=\([0-9]*\).*/\1/p' "$T/journal-transient.txt" | head -n 1)
	lines=$(grep -aF "$errno" "$T/journal-transient.txt" | head -n 1 | cut -c1-600)
	note "step $STEP: the daemon said: ${lines:-(nothing naming $errno)}"
	ok "$STEP: the daemon's log names the cause ($errno) of failing to load or attach the programs" \
		"journal: $(tailsnip "$T/journal-transient.txt")" \
		eval 'grep -aF "$errno" "$T/journal-transient.txt" | grep -qaE "open the BPF object|load the BPF LSM programs|attach the lsm/"'
	ok "$STEP: the transient failure exits 75, not 78 (which the unit never restarts)" \
		"first exit status in the journal: '$st'; state $(unit_state), NRestarts $(unit_prop NRestarts)" test "$st" = 75
	ok "$STEP: the log says that systemd will restart the daemon" \
		"journal: $(tailsnip "$T/journal-transient.txt")" has "systemd restarts the daemon" "$T/journal-transient.txt"

	launch_probe "$m"
	expect_refused "$STEP: while the daemon fails to start a launch exits 2 with one line and PROGRAM does not run" "$m"
	okl "$STEP: systemd keeps restarting it$([ "$retries" != beyond-burst ] || echo ", beyond the start limit's burst") (NRestarts $r0 -> > $want) and never gives up" \
		'NRestarts $(unit_prop NRestarts), state $(unit_state), result $(unit_prop Result), status $(unit_prop ExecMainStatus)' \
		wait_for "$H_RETRY_S" retrying_beyond "$want"
	if [ "$hits" != hits-ok ]; then
		ok "$STEP: zero hits while the daemon failed (the pinned programs deny)" "hits: $h0 -> $(hits_count)" \
			test "$(hits_count)" -eq "$h0"
	fi

	rm -f "$DROPIN"
	rmdir "$DROPIN_DIR" 2>/dev/null
	DROPIN_MADE=0
	sc daemon-reload
	okl "$STEP: without the drop-in the service recovers by itself and serves (no reset-failed, no start)" \
		'state $(unit_state), NRestarts $(unit_prop NRestarts), status $(unit_prop ExecMainStatus), ready file $(ready_pid)' \
		wait_for "$H_BACK_S" daemon_serves
	note "step $STEP: serving again as pid $(main_pid) after NRestarts $(unit_prop NRestarts)"
	if ! daemon_serves; then
		note "step $STEP: starting it by hand for the rest of the run"
		daemon_ensure >/dev/null 2>&1
	fi
}

step_h_transient() {
	step_begin "i (transient failure)"
	require_serving "$STEP"
	transient_cycle "$H_CAUSE" "$H_ERRNO" restart no-hits beyond-burst
	# Step f let the loop read on purpose: count the hits of this step only.
	step_check_loop hits-ok
	ok "$STEP: zero new hits during the step" "hits $STEP_H0 -> $(hits_count)" test "$(hits_count)" -eq "$STEP_H0"
	step_check_tree
	expect_new_launch_denied "$STEP"
}

step_g_purge() {
	local c0 h0 cg left
	step_begin "g (apt-get purge)"
	h0=$(hits_count)
	if [ -n "$HITS_AFTER_F" ]; then
		ok "$STEP: before the purge, no new hits since enforcement was turned back on" \
			"hits $HITS_AFTER_F -> $h0" test "$h0" -eq "$HITS_AFTER_F"
	fi
	c0=$(loop_count)
	run_root "$APT_TIMEOUT" apt-get purge "${APT_OPTS[@]}" "$PKG"
	cat "$OUT" "$ERR" >"$T/apt-purge.log"
	ok "$STEP: apt-get purge $PKG exits 0" "rc=$RC; $(tailsnip "$T/apt-purge.log")" test "$RC" -eq 0
	note "step $STEP: purge said: $(grep -a "^$PKG: " "$T/apt-purge.log" | tr '\n' '|' | head -c 400)"
	ok "$STEP: dpkg knows no trace of $PKG (not even config-files)" "status '$(pkg_status)'" \
		eval '[ -z "$(pkg_status)" ] || [ "$(pkg_status)" = "unknown ok not-installed" ]'
	sc cat "$UNIT" >"$T/sc-cat.txt" 2>&1
	ok "$STEP: systemctl cat $UNIT finds no unit file" "$(snip "$T/sc-cat.txt")" \
		eval '! sc cat "$UNIT" >/dev/null 2>&1'
	left=$(find /lib/systemd/system /usr/lib/systemd/system /etc/systemd/system /run/systemd/system \
		-name "$UNIT*" 2>/dev/null | tr '\n' ' ')
	ok "$STEP: no unit file, drop-in, enablement or mask link of $UNIT is left" "left: $left" test -z "$left"
	ok "$STEP: the daemon is not running" "state $(unit_state), MainPID $(main_pid)" \
		eval 'daemon_inactive && { [ -z "$(main_pid)" ] || [ "$(main_pid)" = 0 ]; }'
	ok "$STEP: $ETC_DIR is gone" "left: $(find "$ETC_DIR" 2>&1 | head -c 200)" test ! -e "$ETC_DIR"
	ok "$STEP: $RECORD_DIR is gone" "left: $(find "$RECORD_DIR" 2>&1 | head -c 200)" test ! -e "$RECORD_DIR"
	ok "$STEP: $RUN_DIR is gone" "left: $(find "$RUN_DIR" 2>&1 | head -c 200)" test ! -e "$RUN_DIR"
	ok "$STEP: $CGROOT/agent-sandbox-exec is gone" \
		"$(find "$CGROOT/agent-sandbox-exec" -name cgroup.procs 2>/dev/null | head -n 5 | tr '\n' ' ')" \
		test ! -e "$CGROOT/agent-sandbox-exec"
	ok "$STEP: $BPF_DIR is gone" "$(pins_listing)" test ! -e "$BPF_DIR"
	okl "$STEP: bpftool shows no link and no program of ours ($OUR_PROGS)" \
		'$(bpf_detail)' wait_for "$GONE_S" bpf_none_of_ours
	ok "$STEP: $LAUNCHER is gone from PATH" "$(command -v "$LAUNCHER")" eval '! command -v "$LAUNCHER" >/dev/null'

	cg=$(cgroup_of "$LOOP_PID")
	ok "$STEP: the loop (pid $LOOP_PID) is still alive, now outside the sandbox tree (in '${cg:-?}': purge frees it)" \
		"alive: $(pid_alive "$LOOP_PID" && echo yes || echo no); cgroup '$cg'" \
		eval 'pid_alive "$LOOP_PID" && [ -n "$cg" ] && ! in_sandbox_cgroup "/proc/$LOOP_PID/cgroup" "$TUID"'
	c0=$(loop_count)
	okl "$STEP: the loop keeps running after the purge" 'attempts stuck at $(loop_count)' \
		wait_for "$ADVANCE_S" loop_beyond "$c0"
	okl "$STEP: without the package the loop reads the secret (enforcement is gone, as documented)" \
		'hits stay at $(hits_count); last error: $(snip "$LD/err")' wait_for "$HITS_S" hits_beyond "$h0"
}

# ================================================================ setup and cleanup

preflight() {
	if [ "$(id -u)" -ne 0 ]; then
		fail "running as root" "uid $(id -u)"
		return 1
	fi
	require_commands "$LAUNCHER" systemctl runuser timeout nice useradd userdel getent pgrep \
		dpkg-query dpkg-deb apt-get awk find || return 1
	ok "bpftool is installed" "not in PATH" eval 'command -v bpftool >/dev/null'
	if [ -z "$N_DEB" ] || [ ! -f "$N_DEB" ]; then
		fail "the first .deb (version N) is given" "VM_DEBS='${VM_DEBS:-}'"
		return 1
	fi
	PKG=$(dpkg-deb -f "$N_DEB" Package 2>/dev/null)
	N_VER=$(dpkg-deb -f "$N_DEB" Version 2>/dev/null)
	if [ -n "$NEXT_DEB" ] && [ -f "$NEXT_DEB" ]; then
		NEXT_VER=$(dpkg-deb -f "$NEXT_DEB" Version 2>/dev/null)
	fi
	note "package $PKG: N = $N_VER ($N_DEB), N+1 = ${NEXT_VER:-?} (${NEXT_DEB:-none})"
	[ -n "$PKG" ] && [ -n "$N_VER" ] || return 1
	# This run ends by purging the package: never start where it is not installed.
	if ! pkg_installed; then
		fail "$PKG is installed (the run reinstalls, upgrades and purges it)" "dpkg status '$(pkg_status)'"
		return 1
	fi
}

setup_user() {
	T=$(mktemp -d /tmp/asx-lc.XXXXXX) || return 1
	OUT=$T/out ERR=$T/err
	TOK=$(od -An -N8 -tx1 /dev/urandom | tr -d ' \n')
	SECRET="asx-lc-secret-$TOK"
	CGROOT=$(findmnt -n -t cgroup2 -o TARGET | head -n1)
	CGROOT=${CGROOT:-/sys/fs/cgroup}
	remove_test_user "$TEST_USER" || { echo "user $TEST_USER exists and is not a test user" >&2; return 1; }
	SETUP_DONE=1
	useradd -m -s /bin/sh -c "$GECOS" "$TEST_USER" || return 1
	TUID=$(id -u "$TEST_USER")
	H=$(home_of "$TEST_USER")
	S=$H/secret.txt
	LD=$H/asx-lc
	printf '%s\n' "$SECRET" >"$S" && chown "$TEST_USER:$TEST_USER" "$S" && chmod 0600 "$S" || return 1
	install -d -o "$TEST_USER" -g "$TEST_USER" -m 0755 "$H/.config" "$H/.config/agent-sandbox-exec"
	printf '# agent-sandbox-exec lifecycle test\n%s\n' "$S" >"$H/$HOME_LIST_REL"
	chown "$TEST_USER:$TEST_USER" "$H/$HOME_LIST_REL"
}

cleanup() {
	[ "$CLEANED" -eq 1 ] && return 0
	CLEANED=1
	stop_loop
	if [ "$DROPIN_MADE" -eq 1 ] || [ -e "$DROPIN" ]; then
		rm -f "$DROPIN"
		rmdir "$DROPIN_DIR" 2>/dev/null
		sc daemon-reload
	fi
	# Interrupted between a stop and a start: leave a serving daemon behind.
	if [ -n "$PKG" ] && pkg_installed && ! daemon_serves; then
		daemon_ensure >/dev/null 2>&1
	fi
	[ "$SETUP_DONE" -eq 1 ] || return 0
	if [ "${ASX_LC_KEEP:-0}" = 1 ]; then
		printf 'kept: user %s, %s\n' "$TEST_USER" "$T" >&2
		return 0
	fi
	remove_test_user "$TEST_USER"
	[ "$NOTE_MADE" -eq 0 ] || remove_test_user "$NOTE_USER"
	[ -n "$T" ] && rm -rf "$T"
	return 0
}

main() {
	local debs=()
	if [ "$#" -gt 0 ]; then
		debs=("$@")
	else
		read -r -a debs <<<"${VM_DEBS:-}"
	fi
	# apt-get needs a path with a slash: make them absolute before leaving the cwd
	[ "${#debs[@]}" -ge 1 ] && N_DEB=$(readlink -f -- "${debs[0]}")
	[ "${#debs[@]}" -ge 2 ] && NEXT_DEB=$(readlink -f -- "${debs[1]}")
	cd / || exit 1

	preflight || finish
	trap cleanup EXIT
	trap 'fail "run" "interrupted"; finish' INT TERM
	if ! setup_user; then
		fail "setup (test user and files)" "see stderr"
		finish
	fi
	if timed step_setup; then
		timed step_a_kill
		timed step_b_stop
		timed step_c_restart
		timed step_d_reinstall
		timed step_e_upgrade
		timed step_f_disable
		timed step_h_record
		timed step_h_transient
	else
		fail "steps a-f, h, i" "not run: the sandboxed loop did not start"
	fi
	timed step_g_purge
	finish
}

# timed STEP: run the step function STEP, then note how long it took (for the
# time table: this suite is the longest of the guest run); its status is STEP's
timed() {
	local t0=$SECONDS rc=0
	"$1" || rc=$?
	note "$1: $((SECONDS - t0)) s"
	return "$rc"
}

# Sourcing the file (for trying single functions) runs nothing.
if [ "${BASH_SOURCE[0]}" = "$0" ]; then
	main "$@"
fi
