#!/bin/bash
# shellcheck disable=SC2016,SC2317,SC2034,SC2088,SC2015
# (SC2016: the single-quoted sh -c programs expand their own variables; SC2317: the check_* functions
#  are called through run_check; SC2034: test-lib.sh reads the counters; SC2088: ~ is list text;
#  SC2015: A && B || fail reports a failure of any step)
#
# scripts/test-dirscan.sh - the reuse of a directory entry's launch-time scan (issue 16,
# bench 2b): the per-user resolver watches every directory the scan of `~/.ssh/` reads and
# every file there with one link (src/resolve/watch.rs), sends its last answer again while nothing
# changed, and scans again after any change that could give a file below the entry a name
# outside it.
#
# How a scan is seen: strace attached to the test user's resolver process
# (agent-sandbox-exec-resolver, uid of the user) for one launch; the scan reads directories
# (getdents64), a reused answer reads none. Every traced launch also checks the trace shows the
# resolver served it (it opens the user's list), so an empty trace is never taken for "no scan".
#
# Run as root in a throwaway guest where the package is installed and the daemon runs.
#
# Checks (in this order; names for ASX_DIRSCAN_ONLY / ASX_DIRSCAN_SKIP):
#   no_rescan     a relaunch with nothing changed reads no directory (no scan); a file made
#                 below the entry makes the next launch scan; the one after reads none again
#   ln_outside    a key below the entry with one link at launch, then `ln` to a name outside
#                 made outside between launches: the next launch denies that name
#   new_subdir    a new subdirectory with a key linked from outside: the next launch denies
#                 the outside name
#   mv_in         a directory holding a key linked from outside moved into the entry: the
#                 next launch denies the outside name
#   cap_fallback  fs.inotify.max_user_watches lowered so that the scan's watches pass the
#                 cap: the launch warns that every launch reads the tree again, relaunches
#                 do scan, and an outside link is still denied (restored afterwards)
#   scan_fails    (issue 23) a key below the entry linked from outside before launch; the
#                 agent, opening nothing, makes the scan miss it: `chmod 000` of its
#                 subdirectory (refused), the same by a POSIX ACL (setxattr), then (mode restored) a move of that subdirectory 66 levels
#                 deep within the entry; each time the user's next launch from outside still
#                 denies the outside name (the first one warns that it removes nothing)
#
# Output: "PASS: <what>", "FAIL: <what> (<detail>)", "SKIP: <why>", notes ("# ...");
# then a count line and "ALL PASS" (exit 0) or "<n> FAILED" (exit 1).
#
# Environment:
#   ASX_DIRSCAN_ONLY="name ..."  run only these checks;  ASX_DIRSCAN_SKIP="name ..."  skip these

set -u -o pipefail
umask 022
export LC_ALL=C
HERE=$(cd "$(dirname "$0")" && pwd) || exit 1
cd / || exit 1

readonly SUITE=test-dirscan.sh
readonly LAUNCHER=agent-sandbox-exec
readonly USR=asx-dirscan
readonly GECOS="agent-sandbox-exec dirscan test user"
readonly EPERM_MSG="Operation not permitted"
readonly HOME_LIST_REL=.config/agent-sandbox-exec/denylist
readonly WATCHES=/proc/sys/fs/inotify/max_user_watches

CHECKS=(no_rescan ln_outside new_subdir mv_in cap_fallback scan_fails scan_race)

PASS_N=0 FAIL_N=0 SKIP_N=0

# shellcheck source=scripts/test-lib.sh
. "$HERE/test-lib.sh" || exit 1
FILTER=ASX_DIRSCAN # run_check: ASX_DIRSCAN_ONLY / ASX_DIRSCAN_SKIP choose the checks
CMD_TIMEOUT=60
T="" OUT="" ERR="" RC=0 UH="" TOK="" USR_UID="" WATCHES_SAVED="" SCANS=""

put() { mkdir -p "$(dirname "$1")" && printf '%s\n' "$3" >"$1" && chown -R "$USR:$USR" "$UH" && chmod "$2" "$1"; }
sec() { printf 'asx-secret-%s-%s' "$1" "$TOK"; }

# denied WHAT PATH SECRET: cat PATH from inside fails with EPERM and shows nothing
denied() {
	local want=$3
	run_in "$USR" cat "$2"
	okl "$1" 'rc=$RC out=$(snip "$OUT") err=$(snip "$ERR")' \
		eval '[ "$RC" -ne 0 ] && has "$EPERM_MSG" "$ERR" && ! has "$want" "$OUT"'
}

# resolver: the pid of the test user's resolver process (exactly one), or status 1
resolver() {
	local pids
	pids=$(pgrep -u "$USR_UID" -f '^agent-sandbox-exec-resolver') || return 1
	[ "$(printf '%s\n' "$pids" | wc -l)" -eq 1 ] || return 1
	printf '%s' "$pids"
}

# traced_launch CMD...: run_in CMD with strace on the user's resolver; SCANS = the number of
# getdents64 calls it made (directories read), or "" (with a FAIL naming WHY) if the trace
# cannot be trusted: no resolver, strace did not attach, or the trace does not show the
# resolver serving the launch (its open of the user's list)
traced_launch() {
	local pid st
	SCANS=""
	if ! pid=$(resolver); then
		fail "traced launch: one resolver process of uid $USR_UID" "$(pgrep -a -u "$USR_UID" | tr '\n' '|')"
		return 1
	fi
	# Any mount or unmount in the resolver's namespace (a user's /run/user tmpfs coming or going)
	# makes it resolve anew, rightly: MOUNTED says whether one came since the last traced launch.
	MOUNTED=""
	if [ -f "$T/mounts.last" ] && ! cmp -s "$T/mounts.last" "/proc/$pid/mountinfo"; then
		MOUNTED=$(diff "$T/mounts.last" "/proc/$pid/mountinfo" | grep '^[<>]' | cut -d' ' -f1,6 | head -n 3 | tr '\n' '|')
	fi
	rm -f "$T/trace" "$T/strace.err"
	strace -f -e trace=openat,getdents64 -o "$T/trace" -p "$pid" 2>"$T/strace.err" &
	st=$!
	if ! wait_for 20 grep -q 'attached' "$T/strace.err"; then
		stop_bg "$st"
		fail "traced launch: strace attaches to the resolver $pid" "$(snip "$T/strace.err")"
		return 1
	fi
	run_in "$USR" "$@"
	sleep 0.5
	stop_bg "$st"
	if ! has 'denylist' "$T/trace"; then
		fail "traced launch: the trace shows the resolver reading the list" "$(snip "$T/trace")"
		return 1
	fi
	# grep -c exits 1 when it counts 0: that count is the answer, not a failure.
	SCANS=$(grep -c 'getdents64(' "$T/trace") || true
	cat "/proc/$pid/mountinfo" >"$T/mounts.last" 2>/dev/null || rm -f "$T/mounts.last"
	return 0
}

# reused WHAT: a traced relaunch of true reads no directory
reused() {
	traced_launch true || return 1
	if [ "$SCANS" -gt 0 ] && [ -n "$MOUNTED" ]; then
		skip "$1 (a mount changed in the resolver's namespace meanwhile: $MOUNTED; it rightly resolved anew)"
		return 0
	fi
	okl "$1" 'launch rc=$RC; $SCANS getdents64 calls: $(grep -m3 getdents64 "$T/trace" | tr "\n" "|")' \
		eval '[ "$RC" -eq 0 ] && [ "$SCANS" -eq 0 ]'
}

# scanned WHAT: a traced launch of true reads directories (the scan ran)
scanned() {
	traced_launch true || return 1
	okl "$1" 'launch rc=$RC; $SCANS getdents64 calls' eval '[ "$RC" -eq 0 ] && [ "$SCANS" -gt 0 ]'
}

# fresh_tree: ~/.ssh/ with keys in two levels (one with one link, one with two), ~/outside,
# the list ~/.ssh/, and two launches: the first resolves, the second must reuse
fresh_tree() {
	rm -rf "$UH/.ssh" "$UH/outside"
	put "$UH/.ssh/id_ed25519" 0600 "$(sec top)"
	put "$UH/.ssh/sub/newkey" 0600 "$(sec newkey)"
	put "$UH/.ssh/sub/multi" 0600 "$(sec multi)"
	put "$UH/outside/keep" 0644 "keep"
	runuser -u "$USR" -- ln "$UH/.ssh/sub/multi" "$UH/outside/multi"
	set_list "~/.ssh/"
	run_in "$USR" true
	[ "$RC" -eq 0 ] || { fail "$1: setup launch" "$(why)"; return 1; }
	reused "$1: a relaunch with nothing changed reads no directory (the last answer sent again)"
}

# ---------------------------------------------------------------- checks

check_no_rescan() {
	fresh_tree no_rescan || return
	denied "no_rescan: a name made outside before launch is denied" "$UH/outside/multi" "$(sec multi)"
	put "$UH/.ssh/sub/later" 0600 "$(sec later)"
	scanned "no_rescan: a file made below the entry: the next launch scans again"
	reused "no_rescan: and the launch after that reads no directory again"
	cat "$UH/.ssh/sub/newkey" >/dev/null && stat "$UH/.ssh/sub" >/dev/null
	reused "no_rescan: reading a file and stat of the directory change nothing"
}

check_ln_outside() {
	fresh_tree ln_outside || return
	# Not /tmp: on trixie it is a tmpfs, and a hard link cannot cross filesystems.
	run_as "$USR" ln "$UH/.ssh/sub/newkey" "$UH/outside/elsewhere"
	ok "ln_outside: outside: ln ~/.ssh/sub/newkey ~/outside/elsewhere" "$(why)" test "$RC" -eq 0
	denied "ln_outside: the next launch denies the new outside name" "$UH/outside/elsewhere" "$(sec newkey)"
	run_as "$USR" ln "$UH/.ssh/id_ed25519" "$UH/outside/top"
	denied "ln_outside: the same for a key at the entry's top level" "$UH/outside/top" "$(sec top)"
	run_in "$USR" cat "$UH/outside/keep"
	ok "ln_outside: an unlisted file outside stays readable" "$(why)" has keep "$OUT"
}

check_new_subdir() {
	fresh_tree new_subdir || return
	run_as "$USR" sh -c 'mkdir -p "$1/.ssh/sub/new/deeper" && echo "$2" >"$1/.ssh/sub/new/deeper/k" &&
		ln "$1/.ssh/sub/new/deeper/k" "$1/outside/k-new"' sh "$UH" "$(sec new)"
	ok "new_subdir: outside: a new subdirectory with a key linked to ~/outside/k-new" "$(why)" test "$RC" -eq 0
	denied "new_subdir: the next launch denies the outside name" "$UH/outside/k-new" "$(sec new)"
}

check_mv_in() {
	fresh_tree mv_in || return
	run_as "$USR" sh -c 'mkdir -p "$1/outside/d" && echo "$2" >"$1/outside/d/k" &&
		ln "$1/outside/d/k" "$1/outside/k-moved"' sh "$UH" "$(sec moved)"
	ok "mv_in: outside: a directory with a key, also linked as ~/outside/k-moved" "$(why)" test "$RC" -eq 0
	reused "mv_in: a change outside the entry only: no scan"
	run_as "$USR" mv "$UH/outside/d" "$UH/.ssh/sub/d"
	ok "mv_in: outside: mv ~/outside/d ~/.ssh/sub/d" "$(why)" test "$RC" -eq 0
	denied "mv_in: the next launch denies the outside name" "$UH/outside/k-moved" "$(sec moved)"
}

check_cap_fallback() {
	local i
	fresh_tree cap_fallback || return
	for i in $(seq 1 80); do printf 'x\n' >"$UH/.ssh/sub/f$i"; done
	chown -R "$USR:$USR" "$UH/.ssh"
	WATCHES_SAVED=$(cat "$WATCHES")
	# A quarter of 200 (src/resolve/watch.rs scan_watch_cap): 50 scan watches, fewer than the 80 files.
	echo 200 >"$WATCHES"
	run_in "$USR" true
	okl "cap_fallback: past the cap the launch says every launch reads the tree again" \
		'$(why)' eval '[ "$RC" -eq 0 ] && has "cannot all be watched" "$ERR" && has "reads the whole tree again" "$ERR"'
	scanned "cap_fallback: a relaunch with nothing changed scans again"
	run_as "$USR" ln "$UH/.ssh/sub/f7" "$UH/outside/f7"
	denied "cap_fallback: an outside link is still denied at the next launch" "$UH/outside/f7" "x"
	echo "$WATCHES_SAVED" >"$WATCHES" && WATCHES_SAVED=""
	run_in "$USR" true
	okl "cap_fallback: limit restored: the launch gives no such warning" '$(why)' \
		eval '[ "$RC" -eq 0 ] && ! has "cannot all be watched" "$ERR"'
	reused "cap_fallback: limit restored: the relaunch after reads no directory"
}

check_scan_fails() {
	local deep
	fresh_tree scan_fails || return
	denied "scan_fails: a name made outside before launch is denied" "$UH/outside/multi" "$(sec multi)"
	# 1. The subdirectory holding the key made unreadable from inside: a mode change (chmod) and
	# a POSIX ACL equal to mode 000 (setxattr; since Linux 6.2 the ACL goes to the set_acl hook)
	# are both refused.
	run_in "$USR" chmod 000 "$UH/.ssh/sub"
	okl "scan_fails: inside, chmod 000 of a directory below the entry is refused with EPERM" \
		'rc=$RC err=$(snip "$ERR") mode=$(stat -c %a "$UH/.ssh/sub")' \
		eval '[ "$RC" -ne 0 ] && has "$EPERM_MSG" "$ERR" && [ "$(stat -c %a "$UH/.ssh/sub")" != 0 ]'
	run_in "$USR" python3 -c 'import os, struct, sys
os.setxattr(sys.argv[1], "system.posix_acl_access",
            struct.pack("<IHHIHHIHHI", 2, 1, 0, 0xffffffff, 4, 0, 0xffffffff, 0x20, 0, 0xffffffff))' \
		"$UH/.ssh/sub"
	okl "scan_fails: inside, a POSIX ACL of mode 000 on it (setxattr) is refused with EPERM" \
		'rc=$RC err=$(snip "$ERR") mode=$(stat -c %a "$UH/.ssh/sub")' \
		eval '[ "$RC" -ne 0 ] && has "$EPERM_MSG" "$ERR" && [ "$(stat -c %a "$UH/.ssh/sub")" != 0 ]'
	run_in "$USR" python3 -c 'import os, struct, sys
os.setxattr(sys.argv[1], "system.posix_acl_access",
            struct.pack("<IHHIHHIHHI", 2, 1, 7, 0xffffffff, 4, 5, 0xffffffff, 0x20, 5, 0xffffffff))' \
		"$UH/outside"
	ok "scan_fails: inside, an ACL (mode 755) on a directory outside every entry is set as before" \
		"$(why)" test "$RC" -eq 0
	# 2. The subdirectory moved 66 levels deep within the entry from inside (past the
	# hook's walk bound of 64, which the scan once shared).
	deep=$UH/.ssh/deep$(for ((i = 0; i < 65; i++)); do printf '/d'; done)
	run_in "$USR" sh -c 'mkdir -p "$1" && mv "$2" "$1/sub"' sh "$deep" "$UH/.ssh/sub"
	note "scan_fails: inside: mkdir -p ~/.ssh/deep/d/... (66 levels) and mv ~/.ssh/sub there: rc=$RC $(snip "$ERR")"
	denied "scan_fails: after that move from inside, the next launch from outside denies the outside name" \
		"$UH/outside/multi" "$(sec multi)"
	# 3. What no hook sees: a directory made from inside without read permission (mkdir -m 300
	# is not a mode change), the subdirectory moved into it (a rename within the entry). A file
	# made in the home (watched: on the way to the list) makes the next launch resolve anew.
	run_in "$USR" sh -c 'mkdir -m 300 "$1" && mv "$2" "$1/" && echo x >"$3"' sh \
		"$UH/.ssh/locked" "$deep/sub" "$UH/asx-rescan"
	ok "scan_fails: inside, mkdir -m 300 ~/.ssh/locked and a move of the subdirectory into it work" \
		"$(why)" test "$RC" -eq 0
	denied "scan_fails: after that, the next launch from outside denies the outside name" \
		"$UH/outside/multi" "$(sec multi)"
	okl "scan_fails: that launch says it removes nothing, as the scan could not read everything" \
		'err=$(snip "$ERR")' has "removes nothing from your sandbox" "$ERR"
	# The sandbox forgotten (a daemon restart drops sandboxes without processes; a reboot
	# drops all): no earlier keys to keep. The uid's record says the scan now misses one.
	restart_daemon "scan_fails: the daemon restarted (the sandbox, without processes, is forgotten)"
	run_in "$USR" cat "$UH/outside/multi"
	okl "scan_fails: then a launch from outside is refused, saying the scan could not read everything" \
		'rc=$RC out=$(snip "$OUT") err=$(snip "$ERR")' \
		eval '[ "$RC" -ne 0 ] && ! has "$(sec multi)" "$OUT" && has "could not read everything below it" "$ERR"'
	run_in "$USR" cat "$UH/outside/multi"
	okl "scan_fails: and so is the next one (nothing was applied or recorded)" \
		'rc=$RC out=$(snip "$OUT") err=$(snip "$ERR")' \
		eval '[ "$RC" -ne 0 ] && ! has "$(sec multi)" "$OUT" && has "could not read everything below it" "$ERR"'
	chmod 0700 "$UH/.ssh/locked"
	denied "scan_fails: once the directory is readable again, the launch denies the outside name" \
		"$UH/outside/multi" "$(sec multi)"
	run_in "$USR" cat "$UH/outside/keep"
	ok "scan_fails: an unlisted file outside stays readable" "$(why)" has keep "$OUT"
}

check_scan_race() {
	local bg i read=0 said=0
	fresh_tree scan_race || return
	denied "scan_race: a name made outside before launch is denied" "$UH/outside/multi" "$(sec multi)"
	# Inside: the subdirectory holding the key renamed back and forth within the entry (each
	# os.rename a few microseconds), for at most 120 s, while the user launches from outside. A
	# scan could list one name and find it gone, or list neither, and miss the key's file.
	timeout -k 5 120 runuser -u "$USR" -- "$LAUNCHER" python3 -c 'import os, sys
a, b = sys.argv[1], sys.argv[2]
while True:
    os.rename(a, b)
    os.rename(b, a)' "$UH/.ssh/sub" "$UH/.ssh/sub2" </dev/null >/dev/null 2>"$T/race.err" &
	bg=$!
	okl "scan_race: inside, a loop renames ~/.ssh/sub to ~/.ssh/sub2 and back" \
		'err=$(snip "$T/race.err")' wait_for 30 test -e "$UH/.ssh/sub2"
	# At least 6 launches, and more (up to 24) until one's scan has met the loop: whether a
	# scan overlaps a rename is up to the scheduler (one vCPU: 0 of 6 happened once).
	for ((i = 1; i <= 24; i++)); do
		[ "$i" -le 6 ] || [ "$said" -eq 0 ] || break
		run_in "$USR" cat "$UH/outside/multi"
		if [ "$RC" -eq 0 ] || has "$(sec multi)" "$OUT"; then
			read=$((read + 1))
			note "scan_race: launch $i read the outside name: $(snip "$ERR")"
		fi
		has "removes nothing from your sandbox" "$ERR" && said=$((said + 1))
	done
	i=$((i - 1))
	ok "scan_race: meanwhile $i launches from outside all deny the outside name" "$read of $i read it" \
		test "$read" -eq 0
	ok "scan_race: and one or more say they remove nothing (a change below the entry during the scan)" \
		"$said of $i said so" test "$said" -gt 0
	stop_bg "$bg"
	[ -d "$UH/.ssh/sub" ] || mv "$UH/.ssh/sub2" "$UH/.ssh/sub"
	denied "scan_race: after the loop, the next launch denies the outside name" "$UH/outside/multi" "$(sec multi)"
}

# ================================================================ setup and cleanup

preflight() {
	if [ "$(id -u)" -ne 0 ]; then
		fail "preflight" "must run as root"
		return 1
	fi
	command -v "$LAUNCHER" >/dev/null || { fail "preflight" "$LAUNCHER not installed"; return 1; }
	require_commands strace pgrep runuser || return 1
}

setup() {
	T=$(mktemp -d /tmp/asx-dirscan.XXXXXX) && chmod 0755 "$T" || return 1
	OUT=$T/out ERR=$T/err
	TOK=$(head -c 8 /dev/urandom | od -An -tx1 | tr -d ' \n')
	remove_test_user "$USR" || return 1
	useradd -m -c "$GECOS" -s /bin/sh "$USR" || return 1
	UH=$(home_of "$USR") USR_UID=$(id -u "$USR")
	chmod 0755 "$UH"
}

cleanup() {
	[ "${CLEANED:-0}" = 1 ] && return 0
	CLEANED=1
	[ -n "$WATCHES_SAVED" ] && echo "$WATCHES_SAVED" >"$WATCHES"
	remove_test_user "$USR"
	[ -n "$T" ] && rm -rf "$T"
	return 0
}

run_suite "setup (test user)"
