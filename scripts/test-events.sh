#!/bin/bash
# shellcheck disable=SC2016,SC2088,SC2317,SC2034
# (SC2016: okl's details are expanded on failure; SC2088: list lines are literal
#  `~/...`; SC2317: check_* are called through run_check; SC2034: the counters
#  and SUITE are read by test-lib.sh)
# test-events.sh: guest suite of denial events (issue 28): every refusal is
# reported through the BPF ring buffer to the daemon, which logs it to the
# journal with structured fields (ASE_UID=, ASE_OP=, ASE_PATH=, ASE_ENTRY=...),
# bounded per uid, and keeps each uid's recent ones for
# `agent-sandbox-exec --denials`. Runs as root in a QEMU guest with the
# package installed and the daemon started by systemd (scripts/vm-test.sh).
#
# Checks (names for ASX_EVENTS_ONLY / ASX_EVENTS_SKIP):
#   open_event     a denied open inside yields one journal line naming the uid, the
#                  path and the list line (ASE_ENTRY=<list>:<line>)
#   dir_entry      a file below a directory entry: the event names that line
#   denials_cli    --denials as the user outside, as its agent inside a sandbox, with
#                  --json, with --since; another user sees nothing of the first
#   other_ops      the other hooks' refusals each yield their event: link, rename,
#                  unlink, chmod below a directory entry, a signal, /proc/<pid>/environ
#                  (ptrace), F_SETOWN, a Unix socket and a loopback TCP server of the
#                  user's made outside
#   audit          audit entries (shadow mode): `audit PATH`, `audit DIR/` with an
#                  exception, `audit all`: opens allowed and reported as "would deny"
#                  naming the audit line; deny beats audit; from inside, a new audit
#                  line and an entry turned audit change nothing until an outside launch
#   storm          100,000 denied opens: a bounded number of journal lines, one
#                  "not logged (rate limit)" summary, the daemon's memory bounded
#   lost           a forced overflow (the daemon stopped while a sandbox is denied for
#                  25 s): the daemon reports the lost records, --denials says so
#   restart        refusals made while the daemon is stopped are logged once it is back
#
#   ASX_EVENTS_ONLY="name ..."  run only these checks;  ASX_EVENTS_SKIP="name ..."  skip these
# Prints PASS:/FAIL:/SKIP: lines; ends with ALL PASS or N FAILED (exit 1).

set -u -o pipefail
umask 022
export LC_ALL=C
HERE=$(cd "$(dirname "$0")" && pwd) || exit 1
cd / || exit 1

readonly SUITE=test-events.sh
readonly LAUNCHER=agent-sandbox-exec
readonly USR=asx-ev
readonly USR2=asx-ev2
readonly GECOS="agent-sandbox-exec events test user"
readonly HOME_LIST_REL=.config/agent-sandbox-exec/denylist

CHECKS=(open_event dir_entry denials_cli other_ops audit storm lost restart)

PASS_N=0 FAIL_N=0 SKIP_N=0

# shellcheck source=scripts/test-lib.sh
. "$HERE/test-lib.sh" || exit 1
FILTER=ASX_EVENTS # run_check: ASX_EVENTS_ONLY / ASX_EVENTS_SKIP choose the checks
CMD_TIMEOUT=60
T="" OUT="" ERR="" RC=0 UH="" USR_UID="" CLEANED=0 STARTED=0 BG_PIDS=() BIND=""

# The user's list: line 1 a comment, then the lines the checks rely on.
set_events_list() {
	runuser -u "$USR" -- mkdir -p "$UH/.config/agent-sandbox-exec" &&
		printf '%s\n' "# $SUITE" "~/.ssh/id_ed25519" "~/secrets/" "~/restart-secret" |
		runuser -u "$USR" -- tee "$UH/$HOME_LIST_REL" >/dev/null
}

# journal_has FIELD=VALUE... : the daemon's journal since the suite started has an
# entry with every FIELD=VALUE (journalctl matches fields; all must hold)
journal_has() {
	journalctl -q --no-pager -o cat --since "@$STARTED" "$@" 2>/dev/null | grep -q .
}

# journal_count FIELD=VALUE... SINCE: entries with those fields since @SINCE
journal_count() {
	local since=${*: -1}
	journalctl -q --no-pager -o cat --since "@$since" "${@:1:$#-1}" 2>/dev/null | wc -l
}

# denials_json: the user's --denials --json in $OUT (outside)
denials_json() { run_as "$USR" "$LAUNCHER" --denials --json; }

# has_op OP [PATH]: $OUT (--denials --json) holds a record of OP (on PATH)
has_op() {
	python3 -c 'import json, sys
op, path = sys.argv[2], (sys.argv[3] if len(sys.argv) > 3 else None)
for line in open(sys.argv[1]):
    r = json.loads(line)
    if r["op"] == op and (path is None or r.get("path") == path):
        sys.exit(0)
sys.exit(1)' "$OUT" "$@"
}

# has_rec KEY=VALUE...: $OUT (--denials --json) holds a record with every KEY equal to
# VALUE (as JSON text: audit=true, path="/x" is written path=/x for strings)
has_rec() {
	python3 -c 'import json, sys
want = [a.split("=", 1) for a in sys.argv[2:]]
def same(v, w):
    return json.dumps(v) == w or v == w
for line in open(sys.argv[1]):
    r = json.loads(line)
    if all(same(r.get(k), w) for k, w in want):
        sys.exit(0)
sys.exit(1)' "$OUT" "$@"
}

daemon_pid() { systemctl show -p MainPID --value agent-sandbox-execd; }
daemon_rss_kb() { awk '/^VmRSS:/ {print $2}' "/proc/$(daemon_pid)/status" 2>/dev/null; }
# daemon_cpu_ms: the daemon's user + system CPU time so far, in ms (proc(5): stat fields 14, 15)
daemon_cpu_ms() {
	local stat hz f
	stat=$(cat "/proc/$(daemon_pid)/stat" 2>/dev/null) || return 0
	hz=$(getconf CLK_TCK)
	read -ra f <<<"${stat##*) }" # f[0] is field 3 (state)
	echo $(((f[11] + f[12]) * 1000 / hz))
}

check_open_event() {
	run_in "$USR" cat "$UH/.ssh/id_ed25519"
	okl "open_event: control: the open is refused inside" '$(why)' has "Operation not permitted" "$ERR"
	okl "open_event: one journal entry with ASE_UID, ASE_OP=open and ASE_PATH" \
		'$(journalctl -q --no-pager -o verbose --since "@$STARTED" ASE_UID="$USR_UID" | head -c 600 | tr "\n" "|")' \
		wait_for 20 journal_has ASE_UID="$USR_UID" ASE_OP=open ASE_PATH="$UH/.ssh/id_ed25519"
	okl "open_event: the entry names the list line (ASE_ENTRY)" \
		'$(journalctl -q --no-pager -o verbose --since "@$STARTED" ASE_UID="$USR_UID" | grep ASE_ | tr "\n" "|")' \
		journal_has ASE_UID="$USR_UID" ASE_ENTRY="$UH/$HOME_LIST_REL:2"
	okl "open_event: the message names the program and the line" \
		'$(journalctl -q --no-pager -o cat --since "@$STARTED" ASE_UID="$USR_UID" | head -3 | tr "\n" "|")' \
		eval 'journalctl -q --no-pager -o cat --since "@$STARTED" ASE_UID="$USR_UID" ASE_OP=open |
			grep -qF "open of $UH/.ssh/id_ed25519 refused to cat (pid"'
}

check_dir_entry() {
	run_as "$USR" mkdir -p "$UH/secrets/deep/er"
	run_as "$USR" sh -c 'echo s >"$1"' sh "$UH/secrets/deep/er/token"
	run_in "$USR" cat "$UH/secrets/deep/er/token"
	okl "dir_entry: control: the open below the directory entry is refused" '$(why)' \
		has "Operation not permitted" "$ERR"
	okl "dir_entry: the event names the directory entry's line" \
		'$(journalctl -q --no-pager -o verbose --since "@$STARTED" ASE_UID="$USR_UID" | grep ASE_ | tr "\n" "|")' \
		wait_for 20 journal_has ASE_UID="$USR_UID" ASE_PATH="$UH/secrets/deep/er/token" ASE_ENTRY="$UH/$HOME_LIST_REL:3"
	# The same file through a bind mount of the entry's directory: the path is the one opened
	# (the walk stops at the bind mount's root, not at its filesystem's).
	mkdir -p "$T/bind" && mount --bind "$UH/secrets" "$T/bind" && BIND=$T/bind
	run_in "$USR" cat "$T/bind/deep/er/token"
	okl "dir_entry: through a bind mount, the event's path is the one opened" \
		'$(journalctl -q --no-pager -o verbose --since "@$STARTED" ASE_UID="$USR_UID" | grep ASE_PATH | tail -3 | tr "\n" "|")' \
		wait_for 20 journal_has ASE_UID="$USR_UID" ASE_PATH="$T/bind/deep/er/token"
	umount "$T/bind" && BIND=""
}

check_denials_cli() {
	run_in "$USR" cat "$UH/.ssh/id_ed25519"
	wait_for 20 journal_has ASE_UID="$USR_UID" ASE_OP=open
	run_as "$USR" "$LAUNCHER" --denials
	okl "denials_cli: outside, --denials shows the refusal and its line" 'rc $RC; $(snip "$OUT")' \
		eval 'has "open of $UH/.ssh/id_ed25519 refused to cat" "$OUT" && has "denylist:2 (a file entry)" "$OUT"'
	run_in "$USR" "$LAUNCHER" --denials
	okl "denials_cli: inside a sandbox, the agent's --denials shows it too" '$(why); $(snip "$OUT")' \
		eval '[ "$RC" -eq 0 ] && has "open of $UH/.ssh/id_ed25519 refused to cat" "$OUT"'
	denials_json
	okl "denials_cli: --json gives one object per line, with the path" '$(snip "$OUT")' \
		has_op open "$UH/.ssh/id_ed25519"
	run_as "$USR2" "$LAUNCHER" --denials
	okl "denials_cli: another user sees nothing of the first" '$(snip "$OUT")' \
		eval 'has "no refusals kept for you" "$OUT" && ! has "$UH" "$OUT"'
	# --follow: a refusal made after it started shows up while it waits.
	timeout -k 5 30 runuser -u "$USR" -- "$LAUNCHER" --denials --follow --json </dev/null >"$T/follow.out" 2>&1 &
	BG_PIDS+=("$!")
	wait_for 10 test -s "$T/follow.out"
	run_as "$USR" sh -c 'echo f >"$1"' sh "$UH/secrets/follow-me"
	run_in "$USR" cat "$UH/secrets/follow-me"
	okl "denials_cli: --follow shows a refusal made after it started" '$(snip "$T/follow.out")' \
		wait_for 20 grep -q "\"path\":\"$UH/secrets/follow-me\"" "$T/follow.out"
	sleep 3
	run_as "$USR" "$LAUNCHER" --denials --since 2s
	okl "denials_cli: --since 2s leaves the older ones out" '$(snip "$OUT")' \
		has "no refusals kept for you in that time" "$OUT"
	run_as "$USR" "$LAUNCHER" --denials --since 1y
	okl "denials_cli: a bad --since is a usage error naming it" '$(why)' \
		eval '[ "$RC" -eq 2 ] && has "not a DURATION" "$ERR"'
}

# PY_OPS PID SOCK PORT: the agent's other refused acts, each printing "<op>: <result>"
PY_OPS='import fcntl, os, socket, sys
pid, sock, port = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
def act(name, f):
    try:
        f()
        print(name + ": done")
    except OSError as e:
        print(name + ": " + (e.strerror or str(e)))
act("signal", lambda: os.kill(pid, 15))
act("environ", lambda: open("/proc/%d/environ" % pid, "rb").read())
def setown():
    r, w = os.pipe()
    fcntl.fcntl(r, fcntl.F_SETOWN, pid)
act("fcntl", setown)
def unix():
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(sock)
act("unix", unix)
def tcp():
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.settimeout(5)
    s.connect(("127.0.0.1", port))
act("tcp", tcp)'

# PY_LISTEN SOCK PORT UP: the user's Unix and TCP listeners outside; writes UP when both listen
PY_LISTEN='import socket, sys, os, time
u = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
u.bind(sys.argv[1]); u.listen(4)
t = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
t.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
t.bind(("127.0.0.1", int(sys.argv[2]))); t.listen(4)
open(sys.argv[3], "w").write("up\n")
time.sleep(120)'

check_other_ops() {
	local d=$T/ops port=28501 victim
	sleep 11 # a fresh journal window for the uid: ten lines, and these are nine
	mkdir -p "$d" && chown "$USR:$USR" "$d"
	timeout -k 5 150 runuser -u "$USR" -- python3 -c "$PY_LISTEN" "$d/s.sock" "$port" "$d/up" \
		</dev/null >/dev/null 2>"$d/listen.err" &
	BG_PIDS+=("$!")
	timeout -k 5 150 runuser -u "$USR" -- sleep 120 </dev/null >/dev/null 2>&1 &
	BG_PIDS+=("$!")
	if ! wait_for 30 test -s "$d/up"; then
		fail "other_ops: the user's listeners start outside" "$(snip "$d/listen.err")"
		return
	fi
	victim=$(pgrep -u "$USR_UID" -x sleep | head -1)
	run_as "$USR" mkdir -p "$UH/secrets/sub"
	run_in "$USR" sh -c 'ln "$1/.ssh/id_ed25519" "$1/x-link"; mv "$1/.ssh/id_ed25519" "$1/x-moved";
		rm -f "$1/.ssh/id_ed25519"; chmod 000 "$1/secrets/sub"; exec python3 -c "$2" "$3" "$4" "$5"' \
		sh "$UH" "$PY_OPS" "$victim" "$d/s.sock" "$port"
	# /proc/<pid>/environ says EACCES: mm_access() turns the refusal into it.
	okl "other_ops: control: each act is refused inside" '$(snip "$OUT") $(snip "$ERR")' \
		eval '[ "$(grep -c ": Operation not permitted\|: Permission denied" "$OUT")" -eq 5 ] &&
			[ "$(grep -c "Operation not permitted" "$ERR")" -ge 4 ]'
	denials_json
	local op
	for op in link rename unlink setattr signal ptrace fcntl unix-connect inet-connect; do
		okl "other_ops: --denials holds a $op event" '$(snip "$OUT")' has_op "$op"
	done
	okl "other_ops: the journal has a signal event naming the target pid" \
		'$(journalctl -q --no-pager -o cat --since "@$STARTED" ASE_UID="$USR_UID" ASE_OP=signal | head -2)' \
		eval 'journalctl -q --no-pager -o cat --since "@$STARTED" ASE_UID="$USR_UID" ASE_OP=signal |
			grep -qF "signal 15 to pid $victim"'
	okl "other_ops: the journal has the loopback event naming the port" \
		'$(journalctl -q --no-pager -o cat --since "@$STARTED" ASE_UID="$USR_UID" ASE_OP=inet-connect | head -2)' \
		eval 'journalctl -q --no-pager -o cat --since "@$STARTED" ASE_UID="$USR_UID" ASE_OP=inet-connect |
			grep -qF "TCP connect or send to your server on port $port"'
}

# PY_STORM SECONDS DIR [GO]: denied opens of every file in DIR, round and round, for
# SECONDS (after GO exists, if given); prints how many and how many were refused
PY_STORM='import os, sys, time
secs, d = float(sys.argv[1]), sys.argv[2]
paths = [os.path.join(d, n) for n in sorted(os.listdir(d))]
if len(sys.argv) > 3:
    t = time.time() + 120
    while not os.path.exists(sys.argv[3]) and time.time() < t:
        time.sleep(0.05)
n = refused = 0
end = time.time() + secs
while time.time() < end:
    for p in paths:
        n += 1
        try:
            os.close(os.open(p, os.O_RDONLY))
        except PermissionError:
            refused += 1
print("opens", n, "refused", refused, flush=True)'

check_audit() {
	local list=$UH/$HOME_LIST_REL
	run_as "$USR" mkdir -p "$UH/audited/deep" "$UH/audited/public" "$UH/all-dir"
	local f
	for f in audited/deep/token audited/public/readme audit-file new-audit all-file all-dir/x; do
		run_as "$USR" sh -c 'echo "$2" >"$1"' sh "$UH/$f" "$f"
	done
	printf '%s\n' "# $SUITE audit" "~/.ssh/id_ed25519" "audit ~/.ssh/id_ed25519" "audit ~/audited/" \
		"!~/audited/public/" "audit ~/audit-file" "~/all-file" |
		runuser -u "$USR" -- tee "$list" >/dev/null
	run_in "$USR" sh -c 'cat "$1"; cat "$2"; cat "$3"; cat "$4"' sh "$UH/audited/deep/token" \
		"$UH/audited/public/readme" "$UH/audit-file" "$UH/.ssh/id_ed25519"
	okl "audit: files below an audit directory entry and an audit file entry are read" '$(why); $(snip "$OUT")' \
		eval 'has "audited/deep/token" "$OUT" && has "audited/public/readme" "$OUT" && has "audit-file" "$OUT"'
	okl "audit: deny beats audit (a file entry and an audit line of the same file)" '$(why)' \
		has "Operation not permitted" "$ERR"
	wait_for 20 eval 'denials_json; has_rec op=audit-open path="\"$UH/audit-file\""'
	denials_json
	okl "audit: the open below the audit directory is reported as would-deny, naming line 4" '$(snip "$OUT")' \
		has_rec op='"audit-open"' audit=true path="\"$UH/audited/deep/token\"" entry="\"$list:4\""
	okl "audit: the audit file entry's open is reported, naming line 6" '$(snip "$OUT")' \
		has_rec op='"audit-open"' path="\"$UH/audit-file\"" entry="\"$list:6\""
	okl "audit: the same list's exception below the audit directory: nothing reported" '$(snip "$OUT")' \
		eval '! has_rec path="\"$UH/audited/public/readme\""'
	okl "audit: the denied file's refusal is an open refusal naming its enforced line" '$(snip "$OUT")' \
		has_rec op='"open"' audit=false path="\"$UH/.ssh/id_ed25519\"" entry="\"$list:2\""
	run_as "$USR" "$LAUNCHER" --denials
	okl "audit: --denials says allowed (audit: would be refused) and names the audit line" '$(snip "$OUT")' \
		eval 'has "open of $UH/audit-file allowed (audit: would be refused) to cat" "$OUT" &&
			has "denylist:6 (an audit file entry)" "$OUT"'
	okl "audit: the journal entry carries ASE_AUDIT=1 and ASE_OP=audit-open" \
		'$(journalctl -q --no-pager -o verbose --since "@$STARTED" ASE_UID="$USR_UID" ASE_AUDIT=1 | grep ASE_ | head -8 | tr "\n" "|")' \
		wait_for 30 journal_has ASE_UID="$USR_UID" ASE_AUDIT=1 ASE_OP=audit-open
	# Turn line 7 (~/all-file) audit and add `audit ~/new-audit` (the user, outside: a
	# sandboxed agent cannot edit the list, test-writes.sh::check_own_list) while a sandbox
	# runs; a launch from inside it changes nothing (the denial stays, the new audit line
	# waits), and says so.
	run_in_after "$USR" 'runuser -u "$USR" -- sed -i "s|^~/all-file\$|audit ~/all-file|" "$list"
		echo "audit ~/new-audit" | runuser -u "$USR" -- tee -a "$list" >/dev/null' \
		"$LAUNCHER" sh -c 'cat "$1"; cat "$2"' sh "$UH/all-file" "$UH/new-audit"
	okl "audit: from inside, an entry turned audit stays denied" '$(why); $(snip "$OUT")' \
		eval 'has "Operation not permitted" "$ERR" && ! has "all-file" "$OUT"'
	okl "audit: from inside, the launch says the new audit keys are not applied" '$(why)' \
		has "audit key(s) in the lists are not applied" "$ERR"
	sleep 2
	denials_json
	okl "audit: from inside, the new audit line reports nothing" '$(snip "$OUT")' \
		eval '! has_rec op="\"audit-open\"" path="\"$UH/new-audit\""'
	# From outside, the same list applies: the entry turned audit is allowed and reported
	# (the launch says it protects less), the new audit line reports.
	run_in "$USR" sh -c 'cat "$1"; cat "$2"' sh "$UH/all-file" "$UH/new-audit"
	okl "audit: from outside, the entry turned audit is read; the launch says it protects less" '$(why); $(snip "$OUT")' \
		eval 'has "all-file" "$OUT" && has "no longer" "$ERR"'
	wait_for 20 eval 'denials_json; has_rec op="\"audit-open\"" path="\"$UH/new-audit\""'
	okl "audit: from outside, both audit lines report" '$(snip "$OUT")' \
		eval 'has_rec op="\"audit-open\"" path="\"$UH/all-file\"" && has_rec op="\"audit-open\"" path="\"$UH/new-audit\""'
	# `audit all`: every entry of the list is an audit entry; the enforced one is then read.
	printf '%s\n' "# $SUITE audit all" "audit all" "~/all-dir/" "~/.ssh/id_ed25519" |
		runuser -u "$USR" -- tee "$list" >/dev/null
	run_in "$USR" sh -c 'cat "$1"; cat "$2"' sh "$UH/all-dir/x" "$UH/.ssh/id_ed25519"
	okl "audit: with \`audit all\`, the list's entries are read" '$(why); $(snip "$OUT")' \
		eval '[ "$RC" -eq 0 ] && has "all-dir/x" "$OUT" && has "key" "$OUT"'
	wait_for 20 eval 'denials_json; has_rec op="\"audit-open\"" path="\"$UH/all-dir/x\"" entry="\"$list:3\""'
	okl "audit: with \`audit all\`, a directory entry's open is reported naming its line" '$(snip "$OUT")' \
		has_rec op='"audit-open"' path="\"$UH/all-dir/x\"" entry="\"$list:3\""
	set_events_list
	run_in "$USR" true
}

check_storm() {
	local t0 t1 rss0 rss1 cpu0 cpu1 lines max
	sleep 11 # a fresh journal window for the uid
	t0=$(date +%s)
	rss0=$(daemon_rss_kb)
	cpu0=$(daemon_cpu_ms)
	CMD_TIMEOUT=300
	run_in "$USR" python3 -c 'import os, sys
n = refused = 0
for _ in range(100000):
    n += 1
    try:
        os.close(os.open(sys.argv[1], os.O_RDONLY))
    except PermissionError:
        refused += 1
print("opens", n, "refused", refused)' "$UH/.ssh/id_ed25519"
	CMD_TIMEOUT=60
	t1=$(date +%s)
	okl "storm: control: 100,000 opens inside, all refused ($((t1 - t0)) s)" '$(snip "$OUT") $(why)' \
		has "opens 100000 refused 100000" "$OUT"
	sleep 2
	lines=$(journal_count ASE_UID="$USR_UID" "$t0")
	# Ten lines per uid per 10 s window, for each window the storm touched.
	max=$((10 * ((t1 - t0) / 10 + 2)))
	okl "storm: the journal got a bounded number of lines ($lines in $((t1 - t0)) s, at most $max)" '' \
		[ "$lines" -ge 1 ] && [ "$lines" -le "$max" ]
	okl "storm: a summary of the refusals not logged (rate limit)" \
		'$(journalctl -q --no-pager -o cat -u agent-sandbox-execd --since "@$t0" | tail -3 | tr "\n" "|")' \
		wait_for 20 eval 'journalctl -q --no-pager -o cat -u agent-sandbox-execd --since "@$t0" |
			grep -q "uid $USR_UID: [0-9]* more refusals in the last 10 s not logged (rate limit"'
	rss1=$(daemon_rss_kb)
	cpu1=$(daemon_cpu_ms)
	note "storm: daemon VmRSS ${rss0} kB before, ${rss1} kB after; daemon CPU time during the storm $((cpu1 - cpu0)) ms; $lines journal lines"
	okl "storm: the daemon's memory grew by less than 4 MiB (${rss0} -> ${rss1} kB)" '' \
		[ $((rss1 - rss0)) -lt 4096 ]
}

check_lost() {
	local d=$T/lost pid
	mkdir -p "$d" && chown "$USR:$USR" "$d"
	# Many files: the kernel's limit of one file's events (8, then 1 a second) is not the bound.
	run_as "$USR" sh -c 'mkdir -p "$1" && cd "$1" && for i in $(seq 1 800); do : >"f$i"; done' sh "$UH/secrets/many"
	timeout -k 5 150 runuser -u "$USR" -- "$LAUNCHER" python3 -c "$PY_STORM" 25 "$UH/secrets/many" "$d/go" \
		</dev/null >"$d/out" 2>"$d/err" &
	pid=$!
	BG_PIDS+=("$pid")
	sleep 3
	kill -STOP "$(daemon_pid)"
	touch "$d/go"
	wait_for 90 pid_gone "$pid"
	kill -CONT "$(daemon_pid)"
	okl "lost: control: the storm ran 25 s inside, refused" '$(snip "$d/out") $(snip "$d/err")' \
		has " refused " "$d/out"
	note "lost: $(snip "$d/out")"
	okl "lost: the daemon reports the records the full ring lost" \
		'$(journalctl -q --no-pager -o cat -u agent-sandbox-execd --since "@$STARTED" | tail -3 | tr "\n" "|")' \
		wait_for 20 eval 'journalctl -q --no-pager -o cat -u agent-sandbox-execd --since "@$STARTED" |
			grep -q "denial records lost: the ring buffer was full"'
	run_as "$USR" "$LAUNCHER" --denials
	okl "lost: --denials says records were lost" '$(snip "$ERR")' has "denial records were lost" "$ERR"
}

check_restart() {
	local d=$T/rs pid
	mkdir -p "$d" && chown "$USR:$USR" "$d"
	run_as "$USR" touch "$UH/restart-secret"
	timeout -k 5 150 runuser -u "$USR" -- "$LAUNCHER" sh -c 'while [ ! -e "$1" ]; do sleep 0.1; done; cat "$2"' \
		sh "$d/go" "$UH/restart-secret" </dev/null >"$d/out" 2>"$d/err" &
	pid=$!
	BG_PIDS+=("$pid")
	wait_for 30 eval 'pgrep -u "$USR_UID" -f "while \[ ! -e" >/dev/null'
	systemctl stop agent-sandbox-execd
	touch "$d/go"
	wait_for 30 pid_gone "$pid"
	okl "restart: control: the open is refused while the daemon is stopped" '$(snip "$d/err")' \
		has "Operation not permitted" "$d/err"
	systemctl start agent-sandbox-execd
	wait_for 300 test -s /run/agent-sandbox-exec/ready
	okl "restart: the refusal made while it was stopped is logged once it is back" \
		'$(journalctl -q --no-pager -o verbose --since "@$STARTED" ASE_UID="$USR_UID" | grep ASE_PATH | tail -3 | tr "\n" "|")' \
		wait_for 30 journal_has ASE_UID="$USR_UID" ASE_PATH="$UH/restart-secret"
}

preflight() {
	if [ "$(id -u)" -ne 0 ]; then
		fail "running as root" "uid $(id -u)"
		return 1
	fi
	require_commands "$LAUNCHER" journalctl python3 pgrep || return 1
}

setup() {
	T=$(mktemp -d /tmp/asx-ev.XXXXXX) || return 1
	chmod 0755 "$T"
	OUT=$T/out ERR=$T/err
	STARTED=$(date +%s)
	local u
	for u in "$USR" "$USR2"; do
		remove_test_user "$u" || { echo "user $u exists and is not a test user" >&2; return 1; }
		useradd -m -s /bin/sh -c "$GECOS" "$u" || return 1
	done
	USR_UID=$(id -u "$USR") UH=$(home_of "$USR")
	runuser -u "$USR" -- mkdir -p "$UH/.ssh" "$UH/secrets" &&
		runuser -u "$USR" -- sh -c 'echo key >"$1"' sh "$UH/.ssh/id_ed25519" || return 1
	set_events_list || return 1
	wait_for 300 test -s /run/agent-sandbox-exec/ready || { echo "the daemon is not serving" >&2; return 1; }
	# A fresh journal window (10 lines per uid per 10 s): the uid may be one an earlier suite's
	# user had, whose refusals used the window up.
	sleep 11
}

cleanup() {
	[ "$CLEANED" -eq 1 ] && return 0
	CLEANED=1
	local p
	for p in "${BG_PIDS[@]}"; do stop_bg "$p"; done
	[ -z "$BIND" ] || umount "$BIND"
	kill -CONT "$(daemon_pid)" 2>/dev/null
	systemctl start agent-sandbox-execd 2>/dev/null
	remove_test_user "$USR"
	remove_test_user "$USR2"
	[ -n "$T" ] && rm -rf "$T"
	return 0
}

run_suite "setup (test users, daemon)"
