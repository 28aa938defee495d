#!/bin/bash
# bench-guest.sh: guest entry of `make bench` (runs as root in the QEMU guest started by
# scripts/vm-test.sh, cwd = the share, the package installed and its daemon running).
#
# Usage: bench-guest.sh [--mode icount|mttcg] [--rev TEXT] [--quick] [--only dirlaunch|hooks|fsloops] [--without PARTS]
#
#   --mode   how the guest was booted (scripts/vm-test.sh --icount or not); printed with every
#            figure. icount: guest time = executed instructions (1 ns = 1 instruction)
#   --rev    what was built (e.g. git describe), printed in the header
#   --quick  small iteration counts, to try the script out (figures not for the record)
#   --only dirlaunch
#            only the launches with a directory entry (2b.) and the figures they are judged
#            against (/bin/true, bwrap, a first apply of 10,000 file entries)
#   --only hooks
#            only the hooks' cost per operation (1., 1b., 1c., 1d., 1e.)
#   --only fsloops
#            only the name-change loops (1e.)
#   --without PARTS
#            the daemon loads without these optional parts (AGENT_SANDBOX_EXECD_WITHOUT, a unit
#            drop-in): e.g. memo-inode-storage measures the walk memos in the LRU hash, as a
#            kernel that refuses inode storage there (7.x) runs them
#
# Needs on the share: bench/asx-bench (cargo example) and bench/empty.bpf.o (bench/empty.bpf.c).
# Creates users asx-bench1..4 and 100,000 files in a home; the guest is thrown away afterwards.
# Prints progress lines starting with "..", then the tables; exits non-zero if a measurement
# failed (a target that is missed is reported, not an error).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
readonly here
mode=unknown
rev=unknown
quick=
only=
without=

while [ $# -gt 0 ]; do
	case $1 in
	--mode) mode=$2; shift 2 ;;
	--rev) rev=$2; shift 2 ;;
	--quick) quick=1; shift ;;
	--only) only=$2; shift 2 ;;
	--without) without=$2; shift 2 ;;
	*) echo "bench-guest.sh: unknown argument $1" >&2; exit 2 ;;
	esac
done

# Iteration counts. Open loop: ITERS open+close per run, RUNS runs, median of the per-run means.
# Launches: LAUNCH_RUNS timed launches (relaunch, /bin/true, bwrap; 3 for lists of more than
# 1,000 entries, which take long and vary little), FIRST_RUNS first applies.
if [ -n "$quick" ]; then
	ITERS=2000 RUNS=3 LAUNCH_RUNS=3 FIRST_RUNS=2 STAT_RUNS=3 MAP_RUNS=2
	BIG=20000 LOAD_TOTAL=40 LOAD_PAR=8 DTREE=1000
else
	ITERS=20000 RUNS=5 LAUNCH_RUNS=11 FIRST_RUNS=3 STAT_RUNS=5 MAP_RUNS=3
	BIG=100000 LOAD_TOTAL=200 LOAD_PAR=16 DTREE=10000
fi
readonly ITERS RUNS LAUNCH_RUNS FIRST_RUNS STAT_RUNS MAP_RUNS BIG LOAD_TOTAL LOAD_PAR DTREE
readonly LOAD_BOUND_S=5    # the stated bound for every launch of the load test
readonly RESOLVER_IDLE=60  # src/daemon/pool.rs IDLE_LIMIT, seconds
readonly SIZES=(10 1000 10000)    # list sizes of the launch table
readonly APPLY_SIZES=(1000 10000 "$BIG")
readonly USERS=(asx-bench1 asx-bench2 asx-bench3 asx-bench4)
readonly U=${USERS[0]}
readonly UHOME=/home/$U
readonly FILE=$UHOME/plain    # the unlisted file of the open loop
readonly DEEP=$UHOME/deep/a/b/c/d/e/f/g/h # the unlisted file 8 levels below the home (directory entries)
# The same depth with a name of a usual length (the patterns' first test reads a name's bytes; `h`
# is one byte, which no pattern matches).
readonly DEEPRS=$UHOME/deep/a/b/c/d/e/f/g/main.rs
readonly BIN=/usr/local/bin/asx-bench
readonly OBJ=/usr/local/lib/asx-bench/empty.bpf.o
readonly UNIT=agent-sandbox-execd.service

declare -A R    # results: name -> "MEDIAN MIN MAX N [BUSY]"
N=0             # the list size empty_then_list writes (set by first_apply)

progress() { printf '.. [%4d s] %s\n' "$SECONDS" "$*"; }    # guest clock since the start
die() {
	printf 'bench-guest.sh: %s\n' "$*" >&2
	exit 1
}

# Run a measurement; store its "MEDIAN MIN MAX N" line under a name. Dirty pages are written
# back first, so that writeback does not run in the middle of it.
measure() {
	local name=$1 out
	shift
	sync
	out=$("$@") || die "measurement $name failed: $*"
	R[$name]=$out
	progress "$name: $out"
}

field() { # NAME INDEX(1=median 2=min 3=max 4=n 5=median busy time)
	local v
	read -r -a v <<<"${R[$1]:?no result $1}"
	printf '%s' "${v[$(($2 - 1))]}"
}
med() { field "$1" 1; }
cpu() { # NAME: the median busy time, or the median time where busy time is unavailable
	local b
	b=$(field "$1" 5)
	if [ "$b" = -1 ]; then med "$1"; else printf '%s' "$b"; fi
}

as_user() { "$BIN" as "$@"; }
daemon_pid() { systemctl show -p MainPID --value "$UNIT"; }
lsm_progs() { bpftool prog show 2>/dev/null | grep -c ' lsm ' || true; }
wait_serving() { # the daemon's ready file, after a restart (it restarts by adopting its programs)
	local i
	for ((i = 0; i < 600; i++)); do
		[ -s /run/agent-sandbox-exec/ready ] && return 0
		sleep 0.5
	done
	die "the daemon did not become ready after a restart"
}

set_list() { # USER N: that user's list = the first N files (N=0: empty)
	local user=$1 n=$2 dir=/home/$1/.config/agent-sandbox-exec
	if [ "$n" -eq 0 ]; then
		: >"$dir/denylist"
	else
		head -n "$n" "$UHOME/all.list" >"$dir/denylist"
	fi
	chown "$user:" "$dir/denylist"
}

launch_as() { # USER: one launch from outside, untimed; must succeed
	as_user "$1" agent-sandbox-exec /bin/true || die "launch as $1 failed"
}

setup() {
	local u d
	# The shipped defaults (every user's list starts with the recommended catalogue) are set
	# aside, so that each section measures the lists it writes, as in earlier sessions; the
	# catalogue's own cost is measured by lines that include it (hook.catalog*).
	[ -f /etc/agent-sandbox-exec/defaults ] && mv /etc/agent-sandbox-exec/defaults /var/tmp/asx-defaults.aside
	install -m 0755 "$here/bench/asx-bench" "$BIN"
	install -D -m 0644 "$here/bench/empty.bpf.o" "$OBJ"
	for u in "${USERS[@]}"; do
		id "$u" >/dev/null 2>&1 || useradd -m -s /bin/bash "$u"
		install -d -o "$u" -g "$u" "/home/$u/.config" "/home/$u/.config/agent-sandbox-exec"
		: >"/home/$u/.config/agent-sandbox-exec/denylist"
		chown "$u:" "/home/$u/.config/agent-sandbox-exec/denylist"
	done
	progress "creating $BIG files in $UHOME/files"
	mkdir -p "$UHOME/files"
	for ((d = 0; d < BIG / 1000; d++)); do
		mkdir "$UHOME/files/d$d"
		(cd "$UHOME/files/d$d" && touch f{0..999})
	done
	for ((d = 0; d < BIG / 1000; d++)); do
		printf '%s\n' "$UHOME/files/d$d/f"{0..999}
	done >"$UHOME/all.list"
	echo plain >"$FILE"
	# Directory entries (issue 16): an unlisted file 8 levels deep, and 1,000 directories to list.
	mkdir -p "$UHOME/deep/a/b/c/d/e/f/g" "$UHOME/dirs"
	echo plain >"$DEEP"
	echo plain >"$DEEPRS"
	for ((d = 0; d < 1000; d++)); do mkdir "$UHOME/dirs/e$d"; done
	chown -R "$U:" "$UHOME"
	# The other users list 10 files of their own.
	for u in "${USERS[@]:1}"; do
		mkdir -p "/home/$u/files"
		(cd "/home/$u/files" && touch f{0..9})
		printf '%s\n' "/home/$u/files/f"{0..9} >"/home/$u/.config/agent-sandbox-exec/denylist"
		chown -R "$u:" "/home/$u"
	done
}

# VmRSS and VmHWM of the daemon, KiB.
daemon_rss() {
	awk '/^VmRSS:/ { r = $2 } /^VmHWM:/ { h = $2 } END { print r, h }' "/proc/$(daemon_pid)/status"
}

# The daemon's resolver processes: "count total-VmRSS largest-VmRSS" (KiB).
resolver_rss() {
	local p n=0 sum=0 max=0 r
	for p in $(pgrep -P "$(daemon_pid)" -f agent-sandbox-exec-resolver); do
		r=$(awk '/^VmRSS:/ { print $2 }' "/proc/$p/status" 2>/dev/null) || continue
		[ -n "$r" ] || continue
		n=$((n + 1)) sum=$((sum + r))
		[ "$r" -le "$max" ] || max=$r
	done
	echo "$n $sum $max"
}

# memlock of a map (bytes) as bpftool shows it.
map_memlock() {
	bpftool map show name "$1" 2>/dev/null | awk '{ for (i = 1; i < NF; i++) if ($i == "memlock") { sub(/B$/, "", $(i + 1)); print $(i + 1); exit } }'
}

# Kernel memory (Slab + Percpu, KiB).
kernel_kib() { awk '/^(Slab|Percpu):/ { s += $2 } END { print s }' /proc/meminfo; }

# ---------------------------------------------------------------------------------------------
# 1. The hook: open+close of an unlisted file, as user $U.

openloop() { "$BIN" openloop "$FILE" "$ITERS" "$RUNS"; }

# sysloops WHEN: the signal and fcntl loops (asx-bench sysloop) as user $U, outside any sandbox,
# at TARGET (a process of $U, outside too), stored as sys.OP.WHEN
TARGET=""
sysloops() {
	local op
	for op in kill0 kill fcntl; do
		measure "sys.$op.$1" as_user "$U" "$BIN" sysloop "$op" "$TARGET" "$ITERS" "$RUNS"
	done
}

# empty_start: attach the empty programs of bench/empty.bpf.c (asx-bench empty-prog), in the
# background (EMPTY_PID); empty_stop: detach them.
EMPTY_PID=""
empty_start() {
	local ready
	"$BIN" empty-prog "$OBJ" >/run/asx-bench-empty.out &
	EMPTY_PID=$!
	for ((ready = 0; ready < 600; ready++)); do
		! grep -qx ready /run/asx-bench-empty.out || break
		kill -0 "$EMPTY_PID" 2>/dev/null || die "asx-bench empty-prog exited"
		sleep 0.1
	done
	grep -qx ready /run/asx-bench-empty.out || die "the empty program did not attach"
}
empty_stop() {
	kill -TERM "$EMPTY_PID"
	wait "$EMPTY_PID" || die "asx-bench empty-prog failed"
}

# ---------------------------------------------------------------------------------------------
# 1e. Name changes (issue 26), as user $U in its home, outside any sandbox: a new file made and
# removed, a rename and back, a write-open; with no program, with the empty programs of the
# hooks they run (the floor), with ours.

# fsloops WHEN: the three loops, stored as fs.OP.WHEN
fsloops() {
	measure "fs.create.$1" as_user "$U" "$BIN" fsloop create "$UHOME" "$ITERS" "$RUNS"
	measure "fs.rename.$1" as_user "$U" "$BIN" fsloop rename "$UHOME" "$ITERS" "$RUNS"
	measure "fs.wopen.$1" as_user "$U" "$BIN" openloop --write "$FILE" "$ITERS" "$RUNS"
}

fs_suite() {
	progress "name changes: no program (daemon stopped, enforcement disabled)"
	systemctl stop "$UNIT"
	agent-sandbox-execd --disable >/dev/null
	sleep 2
	fsloops none
	progress "name changes: empty programs attached"
	empty_start
	fsloops empty
	empty_stop
	progress "name changes: ours attached (daemon started again)"
	systemctl start "$UNIT"
	fsloops outside
}

report_fs() {
	local op
	echo
	echo "1e. name changes in the home, outside any sandbox [$mode], $ITERS ops x $RUNS runs, ns/op;"
	echo "   floor: empty lsm/inode_create, inode_unlink, inode_rename, file_open and fexit/vfs_rename"
	printf '%-44s %10s %10s %10s %9s\n' "loop" "none" "empty" "ours" "x empty"
	for op in "create:open(O_CREAT)+close+unlink" "rename:rename and back (2 renames)" \
		"wopen:open(O_WRONLY)+close"; do
		printf '%-44s %10s %10s %10s %9s\n' "${op#*:}" "$(med "fs.${op%%:*}.none")" \
			"$(med "fs.${op%%:*}.empty")" "$(med "fs.${op%%:*}.outside")" \
			"$(calc '%.4f' "$(med "fs.${op%%:*}.outside") / $(med "fs.${op%%:*}.empty")")"
	done
	for op in create rename wopen; do
		echo "target: $op outside <= 1.01x floor:" \
			"$(calc '%.4f' "$(med "fs.$op.outside") / $(med "fs.$op.empty")") ->" \
			"$(verdict "$(med "fs.$op.outside") <= $(med "fs.$op.empty") * 1.01")"
	done
}

hook_suite() {
	local n
	# The target of the signal loops: a process of $U outside any sandbox that ignores SIGWINCH.
	"$BIN" as "$U" sleep 100000 &
	TARGET=$!
	sleep 0.5
	[ "$(stat -c %U "/proc/$TARGET")" = "$U" ] || die "the signal target $TARGET is not $U's"
	progress "hook: no program (daemon stopped, enforcement disabled)"
	systemctl stop "$UNIT"
	agent-sandbox-execd --disable >/dev/null
	n=$(lsm_progs)
	[ "$n" -eq 0 ] || die "$n LSM programs still loaded after --disable"
	sleep 2    # let the stop's aftermath (journal writes, ...) settle
	measure hook.none as_user "$U" "$BIN" openloop "$FILE" "$ITERS" "$RUNS"
	measure conn.none as_user "$U" "$BIN" connectloop "$UHOME" "$ITERS" "$RUNS"
	measure net.tcp.none as_user "$U" "$BIN" netloop tcp "$ITERS" "$RUNS"
	measure net.udp.none as_user "$U" "$BIN" netloop udp "$ITERS" "$RUNS"
	measure hook.landlock as_user "$U" "$BIN" landlock -- "$BIN" openloop "$FILE" "$ITERS" "$RUNS"
	measure hook.deeplandlock as_user "$U" "$BIN" landlock -- "$BIN" openloop "$DEEP" "$ITERS" "$RUNS"
	sysloops none

	progress "hook: empty program attached"
	empty_start
	measure hook.empty as_user "$U" "$BIN" openloop "$FILE" "$ITERS" "$RUNS"
	measure hook.deepempty as_user "$U" "$BIN" openloop "$DEEP" "$ITERS" "$RUNS"
	measure hook.deeprsempty as_user "$U" "$BIN" openloop "$DEEPRS" "$ITERS" "$RUNS"
	sysloops empty
	measure conn.empty as_user "$U" "$BIN" connectloop "$UHOME" "$ITERS" "$RUNS"
	measure net.tcp.empty as_user "$U" "$BIN" netloop tcp "$ITERS" "$RUNS"
	measure net.udp.empty as_user "$U" "$BIN" netloop udp "$ITERS" "$RUNS"
	empty_stop

	progress "hook: ours attached (daemon started again)"
	systemctl start "$UNIT"
	measure hook.outside as_user "$U" "$BIN" openloop "$FILE" "$ITERS" "$RUNS"
	sysloops outside
	kill "$TARGET"
	wait "$TARGET" 2>/dev/null || true
	measure conn.outside as_user "$U" "$BIN" connectloop "$UHOME" "$ITERS" "$RUNS"
	measure conn.inside as_user "$U" agent-sandbox-exec "$BIN" connectloop "$UHOME" "$ITERS" "$RUNS"
	local p
	for p in tcp udp; do
		measure "net.$p.outside" as_user "$U" "$BIN" netloop "$p" "$ITERS" "$RUNS"
		measure "net.$p.inside" as_user "$U" agent-sandbox-exec "$BIN" netloop "$p" "$ITERS" "$RUNS"
	done
	for n in 0 1000 "$BIG"; do
		set_list "$U" "$n"
		[ "$n" -ne "$BIG" ] || R[mem.kernel_before]=$(kernel_kib)
		measure "hook.inside$n" as_user "$U" agent-sandbox-exec "$BIN" openloop "$FILE" "$ITERS" "$RUNS"
	done
	# Directory entries (issue 16): the unlisted file 8 levels deep, with 1,000 file entries (the
	# baseline: no walk) and with 1 / 100 / 1,000 directory entries (the walk of 8 levels + home).
	set_list "$U" 1000
	measure hook.deepfiles as_user "$U" agent-sandbox-exec "$BIN" openloop "$DEEP" "$ITERS" "$RUNS"
	# The same 1,000 file entries with no directory entry at all: the package's base list (whose
	# /var/lib/AccountsService/ line is a directory entry, so every sandbox of a default install
	# has one) set aside for this row; the daemon's restart adopts its programs.
	mv /etc/agent-sandbox-exec/denylist /var/tmp/asx-base.aside
	systemctl restart "$UNIT"
	wait_serving
	measure hook.deepfilesonly as_user "$U" agent-sandbox-exec "$BIN" openloop "$DEEP" "$ITERS" "$RUNS"
	mv /var/tmp/asx-base.aside /etc/agent-sandbox-exec/denylist
	systemctl restart "$UNIT"
	wait_serving
	local i
	for n in 1 100 1000; do
		for ((i = 0; i < n; i++)); do
			printf '%s/\n' "$UHOME/dirs/e$i"
		done >"/home/$U/.config/agent-sandbox-exec/denylist"
		chown "$U:" "/home/$U/.config/agent-sandbox-exec/denylist"
		measure "hook.dirs$n" as_user "$U" agent-sandbox-exec "$BIN" openloop "$DEEP" "$ITERS" "$RUNS"
	done
	# Audit entries (issue 28): the same 100 directory entries as audit entries (`audit all`): an
	# allowed open also walks for them, without memos (nothing matches, nothing is reported).
	{
		echo "audit all"
		for ((i = 0; i < 100; i++)); do
			printf '%s/\n' "$UHOME/dirs/e$i"
		done
	} >"/home/$U/.config/agent-sandbox-exec/denylist"
	chown "$U:" "/home/$U/.config/agent-sandbox-exec/denylist"
	measure hook.audit100 as_user "$U" agent-sandbox-exec "$BIN" openloop "$DEEP" "$ITERS" "$RUNS"
	# Name patterns (issue 25): the unlisted file 8 levels deep with 1 and 256 patterns of one
	# shape (no growth: one hash per shape, whatever the number of patterns), and with the whole
	# shipped catalogue (its directory entries and the repo-secrets group's 9 shapes).
	printf '**/secret-%03d.x\n' 0 >"/home/$U/.config/agent-sandbox-exec/denylist"
	chown "$U:" "/home/$U/.config/agent-sandbox-exec/denylist"
	measure hook.pat1 as_user "$U" agent-sandbox-exec "$BIN" openloop "$DEEP" "$ITERS" "$RUNS"
	for ((i = 0; i < 256; i++)); do
		printf '**/secret-%03d.x\n' "$i"
	done >"/home/$U/.config/agent-sandbox-exec/denylist"
	chown "$U:" "/home/$U/.config/agent-sandbox-exec/denylist"
	measure hook.pat256 as_user "$U" agent-sandbox-exec "$BIN" openloop "$DEEP" "$ITERS" "$RUNS"
	echo "include /usr/share/agent-sandbox-exec/catalog/recommended" >"/home/$U/.config/agent-sandbox-exec/denylist"
	chown "$U:" "/home/$U/.config/agent-sandbox-exec/denylist"
	measure hook.catalog as_user "$U" agent-sandbox-exec "$BIN" openloop "$DEEP" "$ITERS" "$RUNS"
	measure hook.catalogrs as_user "$U" agent-sandbox-exec "$BIN" openloop "$DEEPRS" "$ITERS" "$RUNS"
	# The same catalogue, a file directly in the home (where its ~/ file lines watch names).
	measure hook.cataloghome as_user "$U" agent-sandbox-exec "$BIN" openloop "$FILE" "$ITERS" "$RUNS"
	# Write protection (issue 26): a write-open of the unlisted file 8 levels deep outside, in a
	# sandbox whose only read-only entry is the fixed one of the user's own lists (a two-level
	# walk), with 100 `readonly DIR/` entries (the walk to the root, kept in the directory's
	# memo), and with the shipped catalogue (its startup groups' read-only entries).
	measure hook.wdeepout as_user "$U" "$BIN" openloop --write "$DEEP" "$ITERS" "$RUNS"
	set_list "$U" 1000
	measure hook.wdeepown as_user "$U" agent-sandbox-exec "$BIN" openloop --write "$DEEP" "$ITERS" "$RUNS"
	for ((i = 0; i < 100; i++)); do
		printf 'readonly %s/\n' "$UHOME/dirs/e$i"
	done >"/home/$U/.config/agent-sandbox-exec/denylist"
	chown "$U:" "/home/$U/.config/agent-sandbox-exec/denylist"
	measure hook.wdeepro100 as_user "$U" agent-sandbox-exec "$BIN" openloop --write "$DEEP" "$ITERS" "$RUNS"
	echo "include /usr/share/agent-sandbox-exec/catalog/recommended" >"/home/$U/.config/agent-sandbox-exec/denylist"
	chown "$U:" "/home/$U/.config/agent-sandbox-exec/denylist"
	measure hook.wcatalog as_user "$U" agent-sandbox-exec "$BIN" openloop --write "$DEEP" "$ITERS" "$RUNS"
	# Back to the $BIG list, which the honesty check and the memory figures below expect.
	set_list "$U" "$BIG"
	# A denied open in a loop (issue 28): the refusal and its event (after the first 8 a second,
	# dropped by the rate limit: a bucket lookup and update, and a count).
	measure hook.denied as_user "$U" agent-sandbox-exec "$BIN" openloop --denied "$UHOME/files/d0/f0" "$ITERS" "$RUNS"
	# Honesty checks: the loop ran in the sandbox, and a listed file is denied there.
	as_user "$U" agent-sandbox-exec grep -q '^0::/agent-sandbox-exec/uid-' /proc/self/cgroup \
		|| die "a launched process is not in its sandbox cgroup"
	if as_user "$U" agent-sandbox-exec cat "$UHOME/files/d0/f0" >/dev/null 2>&1; then
		die "a listed file was readable in the sandbox"
	fi
	# Memory with $BIG entries applied (user $U's list).
	R[mem.rss_big]=$(daemon_rss)
	R[mem.resolvers]=$(resolver_rss)
	R[mem.kernel_after]=$(kernel_kib)
	R[mem.deny_memlock]=$(map_memlock deny_map)
	R[mem.cgid_memlock]=$(map_memlock agent_cgid_set)
	R[mem.keys]=$("$BIN" mapcount deny_map) || R[mem.keys]="?"
	# Idle again: the resolvers expire RESOLVER_IDLE s after the last launch, and with them the
	# answers the daemon kept (guest idle time costs no host time in icount mode).
	sleep $((RESOLVER_IDLE + 3))
	R[mem.rss_after]=$(daemon_rss)
}

# ---------------------------------------------------------------------------------------------
# 2./3. Launches and applies, as user $U.

# timed_cold NAME PREPARE: FIRST_RUNS launches of user $U, each after PREPARE (a function) and
# timed alone (`time --cold 1`); their median etc. go to R[NAME].
timed_cold() {
	local name=$1 prepare=$2 i t b
	local -a times=() busy=()
	for ((i = 0; i < FIRST_RUNS; i++)); do
		"$prepare"
		read -r t _ _ _ b < <(as_user "$U" "$BIN" time --cold 1 -- agent-sandbox-exec /bin/true) \
			|| die "$name: a launch failed"
		times+=("$t")
		busy+=("$b")
	done
	R[$name]="$("$BIN" stats "${times[@]}") $("$BIN" stats "${busy[@]}" | cut -d' ' -f1)"
	progress "$name: ${R[$name]}"
}

# A first apply of N entries: from an empty list (an untimed launch removes the keys), the
# list of N files is written and one launch is timed.
first_apply() {
	N=$1
	timed_cold "launch.first$1" empty_then_list
}
empty_then_list() {
	set_list "$U" 0
	launch_as "$U"
	set_list "$U" "$N"
}

# A launch of N entries with no resolver processes, as after RESOLVER_IDLE s without a launch:
# they are killed first, and the daemon's once-a-second check forgets them (and the answers it
# kept to recognise theirs), so every path is resolved and the answers parsed and applied.
cold_launch() {
	set_list "$U" "$1"
	launch_as "$U"
	timed_cold "launch.cold$1" kill_resolvers
}
kill_resolvers() {
	pkill -KILL -f '^agent-sandbox-exec-resolver' || die "no resolver process to kill"
	sleep 1.5
}

# 2b. Launches with a directory entry (issue 16): ~/dtree/ over DTREE files in 100
# directories, each with a second link in ~/dlinks (outside the entry), so that the launch-time
# scan denies every one by inode as well (a map update each, as for a file entry): a first launch
# pays statx and a map update per file; a relaunch with nothing changed gets the resolver's last
# answer again (the scanned directories are watched, src/resolve/watch.rs), so no scan.
dirlaunch_suite() {
	progress "creating $DTREE files below $UHOME/dtree, each linked from $UHOME/dlinks"
	python3 - "$UHOME" "$DTREE" <<'PY' || die "cannot create the directory entry's files"
import os, sys
home, n = sys.argv[1], int(sys.argv[2])
for d in range(100):
    os.makedirs(f"{home}/dtree/d{d}", exist_ok=True)
    os.makedirs(f"{home}/dlinks/d{d}", exist_ok=True)
    for i in range(n // 100):
        p = f"{home}/dtree/d{d}/f{i}"
        open(p, "w").close()
        os.link(p, f"{home}/dlinks/d{d}/f{i}")
PY
	chown -R "$U:" "$UHOME/dtree" "$UHOME/dlinks"
	find "$UHOME/dtree" -type f >/tmp/dtree.list
	measure stat.dtree as_user "$U" "$BIN" stat /tmp/dtree.list "$STAT_RUNS"
	timed_cold launch.dirfirst empty_then_dirlist
	measure launch.dirrelaunch as_user "$U" "$BIN" time 3 -- agent-sandbox-exec /bin/true
	set_list "$U" 0
	launch_as "$U"
	defaults_relaunch
}

# 2c. The shipped defaults (issue 25): a user without a list of their own, whose home now holds
# the DTREE files of 2b. (and the BIG files of the launch table), launches with the shipped
# defaults back in /etc; then a no-change relaunch, timed. Judged against bwrap's overhead after
# the stat floor of DTREE home files (what expanding the defaults' `**/` patterns by a walk of
# such a home would pay at least), and shown against the stat floor of the defaults' own listed
# paths (what a resolution of them pays: one statx each, most of them a failed lookup).
defaults_relaunch() {
	[ -f /var/tmp/asx-defaults.aside ] || die "2c.: the package's /etc/agent-sandbox-exec/defaults was not found at setup"
	defaults_paths >/tmp/defaults.list
	[ -s /tmp/defaults.list ] || die "2c.: no listed path found in the shipped catalogue"
	measure stat.defaults as_user "$U" "$BIN" stat /tmp/defaults.list "$STAT_RUNS" --missing-ok
	cp /var/tmp/asx-defaults.aside /etc/agent-sandbox-exec/defaults
	set_list "$U" 0
	launch_as "$U"
	measure launch.defrelaunch as_user "$U" "$BIN" time "$LAUNCH_RUNS" -- agent-sandbox-exec /bin/true
	rm -f /etc/agent-sandbox-exec/defaults
	launch_as "$U"
}

# defaults_paths: the paths the shipped defaults list for $U, one a line: every line of the
# groups the defaults include (read, `readonly` and `!` lines), `~/` made $UHOME/, without name
# patterns (matched in the hook, never resolved) and without the trailing slash of a directory
defaults_paths() {
	local catalog=/usr/share/agent-sandbox-exec/catalog groups
	groups=$(sed -n 's|^include \(/.*\)|\1|p' "$catalog/recommended")
	# shellcheck disable=SC2086 # one path a word
	awk -v home="$UHOME" '
		/^[ \t]*(#|$)/ || /^include / { next }
		{ p = $0; sub(/^readonly[ \t]+/, "", p); sub(/^!/, "", p) }
		p ~ /[*?]/ { next }
		p ~ /^~\// { p = home substr(p, 2) }
		p !~ /^\// { next }
		{ sub(/\/+$/, "", p); if (!(p in seen)) { seen[p] = 1; print p } }' $groups
}
empty_then_dirlist() {
	set_list "$U" 0
	launch_as "$U"
	# shellcheck disable=SC2088 # the list's own ~/ syntax, not the shell's
	printf '%s\n' '~/dtree/' >"$UHOME/.config/agent-sandbox-exec/denylist"
	chown "$U:" "$UHOME/.config/agent-sandbox-exec/denylist"
}

# What 2b. is judged against, when it runs alone (--only dirlaunch).
dirlaunch_baseline() {
	measure launch.true as_user "$U" "$BIN" time "$LAUNCH_RUNS" -- /bin/true
	measure launch.bwrap as_user "$U" "$BIN" time "$LAUNCH_RUNS" -- bwrap --dev-bind / / /bin/true
	set_list "$U" 0
	launch_as "$U"
	measure launch.relaunch0 as_user "$U" "$BIN" time "$LAUNCH_RUNS" -- agent-sandbox-exec /bin/true
	first_apply 10000
	set_list "$U" 0
	launch_as "$U"
}

# The 2b. table and its targets (issue 16): a relaunch's overhead minus the stat floor of the
# files below the entry under bwrap's overhead; a first launch within 2x the per-entry cost of
# a first apply of as many file entries (statx + map update each).
dir_report() {
	local tr bw_over rel per_dir per_file
	[ -n "${R[launch.dirrelaunch]:-}" ] || return 0
	tr=$(med launch.true)
	bw_over=$(calc '%.0f' "$(med launch.bwrap) - $tr")
	echo
	echo "2b. launches with one directory entry, ~/dtree/, over $DTREE files, each also linked outside it [$mode], ms"
	printf '%-52s %10s %8s %10s\n' launch ms spread overhead
	printf '%-52s %10s %8s %10s\n' "first (from an empty list)" "$(ms "$(med launch.dirfirst)")" \
		"$(spread launch.dirfirst)" "$(ms "$(calc '%.0f' "$(med launch.dirfirst) - $tr")")"
	printf '%-52s %10s %8s %10s\n' "relaunch, nothing changed (the last answer again)" \
		"$(ms "$(med launch.dirrelaunch)")" "$(spread launch.dirrelaunch)" \
		"$(ms "$(calc '%.0f' "$(med launch.dirrelaunch) - $tr")")"
	printf '%-52s %10s %8s %10s\n' "stat floor: statx of the $DTREE files" "$(ms "$(med stat.dtree)")" \
		"$(spread stat.dtree)" -
	rel=$(calc '%.0f' "$(med launch.dirrelaunch) - $tr - $(med stat.dtree)")
	per_dir=$(calc '%.0f' "($(med launch.dirfirst) - $(med launch.relaunch0)) / $DTREE")
	per_file=$(calc '%.0f' "($(med launch.first10000) - $(med launch.relaunch0)) / 10000")
	echo "targets:"
	echo "  relaunch: overhead - stat floor $(ms "$rel") ms < bwrap's $(ms "$bw_over") ms -> $(verdict "$rel < $bw_over")"
	echo "  first launch: $per_dir ns per file below the entry; first apply of 10,000 file entries: $per_file ns" \
		"per entry; within 2x -> $(verdict "$per_dir <= 2 * $per_file")"
	defaults_report
}

# The 2c. lines: wall clock and busy (CPU) time, each against bwrap's in the same boot
defaults_report() {
	local tr btr bw_over bbw_over over bover floor
	[ -n "${R[launch.defrelaunch]:-}" ] || return 0
	tr=$(med launch.true) btr=$(cpu launch.true)
	bw_over=$(calc '%.0f' "$(med launch.bwrap) - $tr") bbw_over=$(calc '%.0f' "$(cpu launch.bwrap) - $btr")
	over=$(calc '%.0f' "$(med launch.defrelaunch) - $tr") bover=$(calc '%.0f' "$(cpu launch.defrelaunch) - $btr")
	floor=$(med stat.dtree)
	echo
	echo "2c. the shipped defaults, no list of one's own, a home of more than $DTREE files [$mode], ms"
	printf '%-52s %10s %8s %10s %10s\n' launch ms spread overhead "busy ovh"
	printf '%-52s %10s %8s %10s %10s\n' "relaunch, nothing changed" "$(ms "$(med launch.defrelaunch)")" \
		"$(spread launch.defrelaunch)" "$(ms "$over")" "$(ms "$bover")"
	printf '%-52s %10s %8s %10s %10s\n' "bwrap --dev-bind / / /bin/true" "$(ms "$(med launch.bwrap)")" \
		"$(spread launch.bwrap)" "$(ms "$bw_over")" "$(ms "$bbw_over")"
	printf '%-52s %10s %8s\n' "stat floor: statx of $DTREE files of the home" "$(ms "$floor")" "$(spread stat.dtree)"
	printf '%-52s %10s %8s\n' "statx of the defaults' $(wc -l </tmp/defaults.list) listed paths" \
		"$(ms "$(med stat.defaults)")" "$(spread stat.defaults)"
	echo "targets:"
	echo "  relaunch: overhead - stat floor of $DTREE home files $(ms "$(calc '%.0f' "$over - $floor")") ms < bwrap's" \
		"$(ms "$bw_over")" "ms -> $(verdict "$over - $floor < $bw_over")"
	echo "  for the record, without a floor: overhead $(ms "$over") ms wall, $(ms "$bover") ms busy; bwrap's" \
		"$(ms "$bw_over") ms wall, $(ms "$bbw_over") ms busy ($(calc '%.2f' "$bover / $bbw_over")x busy)"
}

launch_suite() {
	local n runs
	measure launch.true as_user "$U" "$BIN" time "$LAUNCH_RUNS" -- /bin/true
	measure launch.bwrap as_user "$U" "$BIN" time "$LAUNCH_RUNS" -- bwrap --dev-bind / / /bin/true
	# Parts of a launch's fixed cost: starting the binary, and the daemon's
	# write to cgroup.procs (root), each after idleness as in a launch.
	measure launch.version as_user "$U" "$BIN" time "$LAUNCH_RUNS" -- agent-sandbox-exec --version
	measure launch.migrate "$BIN" migrate "$LAUNCH_RUNS"
	for n in 0 "${SIZES[@]}" "${APPLY_SIZES[@]}"; do
		[ -z "${R[launch.relaunch$n]:-}" ] || continue
		if [ "$n" -gt 0 ]; then
			head -n "$n" "$UHOME/all.list" >"/tmp/list$n"
			measure "stat.$n" as_user "$U" "$BIN" stat "/tmp/list$n" "$STAT_RUNS"
			first_apply "$n"
		else
			set_list "$U" 0
			launch_as "$U"
		fi
		runs=$LAUNCH_RUNS
		[ "$n" -le 1000 ] || runs=3
		measure "launch.relaunch$n" as_user "$U" "$BIN" time "$runs" -- agent-sandbox-exec /bin/true
		# The same after a change in a listed directory (a file created and removed there before
		# each run): the resolver's watches fired, so it resolves every path again.
		[ "$n" -eq 0 ] || measure "launch.changed$n" as_user "$U" "$BIN" time --touch "$UHOME/files/d0" \
			"$runs" -- agent-sandbox-exec /bin/true
	done
	for n in "${SIZES[@]}"; do
		cold_launch "$n"
	done
	for n in "${APPLY_SIZES[@]}"; do
		measure "map.$n" "$BIN" mapfloor "$n" "$MAP_RUNS"
	done
}

# ---------------------------------------------------------------------------------------------
# 5. Load: LOAD_TOTAL launches from 4 users, LOAD_PAR at a time (10-entry lists).

load_suite() {
	local out
	set_list "$U" 10
	launch_as "$U"
	out=$("$BIN" load "$(
		IFS=,
		echo "${USERS[*]}"
	)" "$LOAD_TOTAL" "$LOAD_PAR" -- agent-sandbox-exec /bin/true) || die "load test failed to run"
	R[load]=$out
	progress "load: $out"
}

# ---------------------------------------------------------------------------------------------
# 6. The cgroup move's wait. Writing a pid to cgroup.procs takes cgroup_threadgroup_rwsem for
# writing, which waits for an RCU grace period unless cgroup2 is mounted with favordynmods
# (Documentation/admin-guide/cgroup-v2.rst: cheaper migrations, dearer forks and exits). The same
# move, /bin/true (a fork and an exit) and a 10-entry launch, remounted with it.

favordynmods_suite() {
	# The same daemon, list and history, just before: the baseline of this section.
	set_list "$U" 10
	launch_as "$U"
	measure fdm.before as_user "$U" "$BIN" time "$LAUNCH_RUNS" -- agent-sandbox-exec /bin/true
	# 6.1 keeps favordynmods until the hierarchy is unmounted (a remount without it does not
	# clear it), so this section runs last; the guest is thrown away afterwards.
	if ! mount -o remount,favordynmods /sys/fs/cgroup 2>/dev/null; then
		progress "favordynmods: this kernel refuses the mount option"
		return
	fi
	progress "favordynmods: cgroup2 remounted ($(findmnt -n -o OPTIONS /sys/fs/cgroup))"
	measure fdm.migrate "$BIN" migrate "$LAUNCH_RUNS"
	measure fdm.true as_user "$U" "$BIN" time "$LAUNCH_RUNS" -- /bin/true
	measure fdm.relaunch10 as_user "$U" "$BIN" time "$LAUNCH_RUNS" -- agent-sandbox-exec /bin/true
	for n in 1000 10000; do
		set_list "$U" "$n"
		launch_as "$U"
		measure "fdm.relaunch$n" as_user "$U" "$BIN" time 3 -- agent-sandbox-exec /bin/true
		measure "fdm.changed$n" as_user "$U" "$BIN" time --touch "$UHOME/files/d0" 3 -- agent-sandbox-exec /bin/true
	done
	# The peer under the same mount option (it makes forks and exits take the slower path).
	measure fdm.bwrap as_user "$U" "$BIN" time "$LAUNCH_RUNS" -- bwrap --dev-bind / / /bin/true
}

# ---------------------------------------------------------------------------------------------
# The tables.

# Print with awk: all arithmetic on figures is floating point there.
calc() { awk "BEGIN { printf \"$1\", $2 }"; }
ms() { calc '%.2f' "$1 / 1e6"; }
busy() { # NS [MINUS_NS]: ms, or n/a where /proc/schedstat was missing
	if [ "$1" -lt 0 ] || [ "${2:-0}" -lt 0 ]; then echo n/a; else ms "$(($1 - ${2:-0}))"; fi
}
spread() { # NAME: (max - min) / median, in %
	calc '%.1f%%' "($(field "$1" 3) - $(field "$1" 2)) * 100 / $(field "$1" 1)"
}
verdict() { # CONDITION (awk expression): met / NOT MET
	awk "BEGIN { exit !($1) }" && echo met || echo "NOT MET"
}

# Sections 1, 1b and 1c of the report: the hooks' cost per operation.
report_hooks() {
	local n row none empty ll r_out r_in0 r_in1k r_inbig r_cout
	none=$(med hook.none) empty=$(med hook.empty) ll=$(med hook.landlock)
	r_out=$(calc '%.4f' "$(med hook.outside) / $empty")
	r_in0=$(calc '%.4f' "$(med hook.inside0) / $empty")
	r_in1k=$(calc '%.4f' "$(med hook.inside1000) / $empty")
	r_inbig=$(calc '%.4f' "$(med "hook.inside$BIG") / $empty")
	echo
	echo "1. open+close of an unlisted file [$mode], $ITERS ops x $RUNS runs, ns/op"
	printf '%-44s %10s %8s %9s %9s\n' condition ns/op spread "x none" "x empty"
	for row in "none:no BPF LSM program attached" "empty:empty lsm/file_open program (floor)" \
		"outside:ours, caller outside any sandbox" "inside0:ours, in a sandbox, 0 entries" \
		"inside1000:ours, in a sandbox, 1,000 entries" "inside$BIG:ours, in a sandbox, $BIG entries" \
		"landlock:Landlock READ_FILE ruleset, rule on /"; do
		printf '%-44s %10s %8s %9s %9s\n' "${row#*:}" "$(med "hook.${row%%:*}")" \
			"$(spread "hook.${row%%:*}")" "$(calc '%.4f' "$(med "hook.${row%%:*}") / $none")" \
			"$(calc '%.4f' "$(med "hook.${row%%:*}") / $empty")"
	done
	echo "targets (ratios to the empty-program floor, same boot):"
	echo "  outside <= 1.01x floor: $r_out -> $(verdict "$r_out <= 1.01")"
	echo "  inside <= 1.02x floor at 0 / 1,000 / $BIG entries: $r_in0 / $r_in1k / $r_inbig ->" \
		"$(verdict "$r_in0 <= 1.02 && $r_in1k <= 1.02 && $r_inbig <= 1.02")"
	echo "  no growth 0 -> $BIG entries: $(calc '%+.2f%%' "($(med "hook.inside$BIG") / $(med hook.inside0) - 1) * 100") ->" \
		"$(verdict "$(med "hook.inside$BIG") <= $(med hook.inside0) * 1.002")" \
		"(bound: +0.2 %, twice the repeatability of icount)"
	echo "  both below Landlock ($(calc '%.4f' "$ll / $empty")x floor): $(verdict "$(med hook.outside) < $ll && $(med "hook.inside$BIG") < $ll && $(med hook.inside0) < $ll")"
	echo "a denied open (a listed file, $BIG entries; open only, no close), in a loop: $(med hook.denied) ns/op," \
		"spread $(spread hook.denied); its event is rate-limited (8 a second per file reach the daemon)"
	local dempty dll
	dempty=$(med hook.deepempty) dll=$(med hook.deeplandlock)
	echo "directory entries, open+close of an unlisted file 8 levels deep in the home, ns/op (x floor:"
	echo "the empty program opening the same file, $dempty; Landlock there $dll, $(calc '%.4f' "$dll / $dempty")x):"
	for n in deepfiles dirs1 dirs100 dirs1000 audit100 pat1 pat256 catalog; do
		printf '  %-40s %10s %8s %9s\n' "$n" "$(med "hook.$n")" "$(spread "hook.$n")" \
			"$(calc '%.4f' "$(med "hook.$n") / $dempty")"
	done
	echo "  file entries only (1,000; no directory entry: the base list set aside) <= 1.02x floor:" \
		"$(med hook.deepfilesonly) ns/op, spread $(spread hook.deepfilesonly)," \
		"$(calc '%.4f' "$(med hook.deepfilesonly) / $dempty") -> $(verdict "$(med hook.deepfilesonly) <= $dempty * 1.02")"
	echo "  deepfiles: the same with the package's base list (a directory entry: the walk memo), a default" \
		"install's figure: $(calc '%.4f' "$(med hook.deepfiles) / $dempty")x"
	echo "  100 directory entries <= 1.04x floor: $(calc '%.4f' "$(med hook.dirs100) / $dempty") ->" \
		"$(verdict "$(med hook.dirs100) <= $dempty * 1.04")"
	echo "  below Landlock: $(verdict "$(med hook.dirs100) < $dll")"
	echo "  no growth 1 -> 1,000 directory entries: $(calc '%+.2f%%' "($(med hook.dirs1000) / $(med hook.dirs1) - 1) * 100") ->" \
		"$(verdict "$(med hook.dirs1000) <= $(med hook.dirs1) * 1.002")"
	echo "  name patterns: 1 -> 256 of one shape, no growth: $(calc '%+.2f%%' "($(med hook.pat256) / $(med hook.pat1) - 1) * 100") ->" \
		"$(verdict "$(med hook.pat256) <= $(med hook.pat1) * 1.002")"
	echo "  the shipped catalogue, a file in the home: $(med hook.cataloghome) ns/op," \
		"$(calc '%.4f' "$(med hook.cataloghome) / $empty")x the floor of section 1"
	echo "  the shipped catalogue (recommended: directory entries, 9 pattern shapes) <= 1.04x floor:" \
		"$(calc '%.4f' "$(med hook.catalog) / $dempty") -> $(verdict "$(med hook.catalog) <= $dempty * 1.04")," \
		"below Landlock: $(verdict "$(med hook.catalog) < $dll")"
	echo "  the same, the file named main.rs (a name the first test reads; x the empty program opening it," \
		"$(med hook.deeprsempty)): $(med hook.catalogrs) ns/op, spread $(spread hook.catalogrs)," \
		"$(calc '%.4f' "$(med hook.catalogrs) / $(med hook.deeprsempty)") ->" \
		"$(verdict "$(med hook.catalogrs) <= $(med hook.deeprsempty) * 1.04")"
	echo "write-open+close of the unlisted file 8 levels deep (O_WRONLY), ns/op (x ours outside):"
	for n in wdeepout wdeepown wdeepro100 wcatalog; do
		printf '  %-40s %10s %8s %9s\n' "$n" "$(med "hook.$n")" "$(spread "hook.$n")" \
			"$(calc '%.4f' "$(med "hook.$n") / $(med hook.wdeepout)")"
	done
	echo "  the shipped catalogue (its read-only startup groups) <= 1.04x outside:" \
		"$(calc '%.4f' "$(med hook.wcatalog) / $(med hook.wdeepout)") ->" \
		"$(verdict "$(med hook.wcatalog) <= $(med hook.wdeepout) * 1.04")"
	echo "  100 audit directory entries (\`audit all\`: a walk without memos after the allowed open):" \
		"$(calc '%+.0f' "$(med hook.audit100) - $(med hook.deepfiles)") ns above file entries only"
	echo "  above file entries only, per open (the file's level, then the walk memo of its directory; the"
	echo "  first open there walks all 12 levels to the root): $(calc '%.0f' "$(med hook.dirs100) - $(med hook.deepfiles)") ns"

	local op r_sys
	echo
	echo "1b. signal and fcntl loops, caller and target outside any sandbox [$mode], $ITERS ops x $RUNS runs,"
	echo "   ns/op; floor: empty lsm/task_kill and lsm/file_fcntl programs (bench/empty.bpf.c)"
	printf '%-44s %10s %10s %10s %9s %8s\n' syscall none empty ours "x empty" spread
	for row in "kill0:kill(pid, 0)" "kill:kill(pid, SIGWINCH), ignored there" \
		"fcntl:fcntl(pipe, F_SETOWN, pid)"; do
		op=${row%%:*}
		printf '%-44s %10s %10s %10s %9s %8s\n' "${row#*:}" "$(med "sys.$op.none")" \
			"$(med "sys.$op.empty")" "$(med "sys.$op.outside")" \
			"$(calc '%.4f' "$(med "sys.$op.outside") / $(med "sys.$op.empty")")" "$(spread "sys.$op.outside")"
	done
	echo "targets (ratios to the empty-program floor, same boot):"
	for op in kill0 kill fcntl; do
		r_sys=$(calc '%.4f' "$(med "sys.$op.outside") / $(med "sys.$op.empty")")
		echo "  $op outside <= 1.01x floor: $r_sys -> $(verdict "$r_sys <= 1.01")"
	done
	echo
	echo "1c. Unix stream socket+connect+accept+close, listener made by the same process [$mode], $ITERS ops x $RUNS runs, ns/op"
	printf '%-44s %10s %8s %9s\n' condition ns/op spread "x empty"
	for row in "none:no BPF LSM program attached" "empty:empty lsm/unix_stream_connect (floor)" \
		"outside:ours, caller outside any sandbox" "inside:ours, in a sandbox (own listener)"; do
		printf '%-44s %10s %8s %9s\n' "${row#*:}" "$(med "conn.${row%%:*}")" \
			"$(spread "conn.${row%%:*}")" "$(calc '%.4f' "$(med "conn.${row%%:*}") / $(med conn.empty)")"
	done
	r_cout=$(calc '%.4f' "$(med conn.outside) / $(med conn.empty)")
	echo "target: outside <= 1.01x floor: $r_cout -> $(verdict "$r_cout <= 1.01")"
	echo
	echo "1d. Loopback TCP socket+connect+accept+close (RST) and UDP sendto+recv, server made by the same process [$mode], $ITERS ops x $RUNS runs, ns/op"
	echo "   floor: empty cgroup/connect4, connect6, sendmsg4, sendmsg6 programs on a cgroup of their own (bench/empty.bpf.c):"
	echo "   once one is attached anywhere the kernel takes the cgroup path on every connect and addressed send"
	printf '%-44s %10s %8s %9s %9s\n' condition ns/op spread "x none" "x empty"
	local p r_net
	for p in tcp udp; do
		for row in "none:$p, no BPF program attached" "empty:$p, empty cgroup programs elsewhere (floor)" \
			"outside:$p, ours, caller outside any sandbox" "inside:$p, ours, in a sandbox (own server)"; do
			printf '%-44s %10s %8s %9s %9s\n' "${row#*:}" "$(med "net.$p.${row%%:*}")" \
				"$(spread "net.$p.${row%%:*}")" "$(calc '%.4f' "$(med "net.$p.${row%%:*}") / $(med "net.$p.none")")" \
				"$(calc '%.4f' "$(med "net.$p.${row%%:*}") / $(med "net.$p.empty")")"
		done
	done
	for p in tcp udp; do
		r_net=$(calc '%.4f' "$(med "net.$p.outside") / $(med "net.$p.empty")")
		echo "target: $p outside <= 1.01x floor: $r_net -> $(verdict "$r_net <= 1.01")"
		r_net=$(calc '%.4f' "$(med "net.$p.inside") / $(med "net.$p.empty")")
		echo "target: $p inside <= 1.03x floor: $r_net -> $(verdict "$r_net <= 1.03")"
	done

}

report() {
	local n r row none empty ll btr bbw r_out r_in0 r_in1k r_inbig tr bw bw_over over floor first rel
	local kdelta rss_idle rss_big res_n res_sum res_max load_ok load_fail load_med load_p95 load_max
	local unit="ns"
	[ "$mode" != icount ] || unit="ns (icount: 1 ns = 1 guest instruction)"

	echo
	echo "== agent-sandbox-exec benchmarks [$mode]"
	echo "build: $rev; package $(dpkg-query -W -f '${Version}' agent-sandbox-exec)${without:+; loaded without $without}"
	echo "guest: Debian $(cat /etc/debian_version), kernel $(uname -r), $(nproc) vCPU, mode $mode"
	echo "units: $unit; every figure is a median, spread = (max - min) / median over the runs"
	[ -z "$quick" ] || echo "QUICK RUN: small iteration counts, not for the record"

	report_hooks
	report_fs

	tr=$(med launch.true) bw=$(med launch.bwrap)
	bw_over=$(calc '%.0f' "$bw - $tr")
	btr=$(field launch.true 5) bbw=$(field launch.bwrap 5)
	echo
	echo "2. launch of /bin/true, as a user [$mode], ms, each after 100 ms idle; overhead = launch - /bin/true;"
	echo "   -stat = overhead - stat floor of the list (statx of every listed path); vs bwrap = -stat / bwrap's"
	echo "   overhead; busy = time the CPU ran any task from the launch to 50 ms after it (its work, no waits)"
	local fmt='%-46s %8s %7s %9s %9s %8s %8s %9s\n'
	# shellcheck disable=SC2059  # the format is the one above
	printf "$fmt" command ms spread overhead -stat "vs bwrap" busy "busy ovh"
	# shellcheck disable=SC2059
	printf "$fmt" /bin/true "$(ms "$tr")" "$(spread launch.true)" - - - "$(busy "$btr")" -
	# shellcheck disable=SC2059
	printf "$fmt" "bwrap --dev-bind / / /bin/true" "$(ms "$bw")" "$(spread launch.bwrap)" \
		"$(ms "$bw_over")" - 1.00x "$(busy "$bbw")" "$(busy "$bbw" "$btr")"
	# shellcheck disable=SC2059
	printf "$fmt" "part: agent-sandbox-exec --version" "$(ms "$(med launch.version)")" \
		"$(spread launch.version)" "$(ms "$(calc '%.0f' "$(med launch.version) - $tr")")" - - \
		"$(busy "$(field launch.version 5)")" "$(busy "$(field launch.version 5)" "$btr")"
	# shellcheck disable=SC2059
	printf "$fmt" "part: pid -> cgroup.procs (root, after idle)" "$(ms "$(med launch.migrate)")" \
		"$(spread launch.migrate)" - - - "$(busy "$(field launch.migrate 5)")" -
	for n in 0 "${SIZES[@]}"; do
		for row in first relaunch changed; do
			[ "$n" -ne 0 ] || [ "$row" = relaunch ] || continue
			r=launch.$row$n
			over=$(calc '%.0f' "$(med "$r") - $tr")
			floor=0
			[ "$n" -eq 0 ] || floor=$(med "stat.$n")
			# shellcheck disable=SC2059
			printf "$fmt" "agent-sandbox-exec, $n entries, $row" "$(ms "$(med "$r")")" \
				"$(spread "$r")" "$(ms "$over")" "$(ms "$(calc '%.0f' "$over - $floor")")" \
				"$(calc '%.2fx' "($over - $floor) / $bw_over")" "$(busy "$(field "$r" 5)")" \
				"$(busy "$(field "$r" 5)" "$btr")"
		done
	done
	for n in "${SIZES[@]}"; do
		r=launch.cold$n
		over=$(calc '%.0f' "$(med "$r") - $tr")
		# shellcheck disable=SC2059
		printf "$fmt" "agent-sandbox-exec, $n entries, cold" "$(ms "$(med "$r")")" \
			"$(spread "$r")" "$(ms "$over")" "$(ms "$(calc '%.0f' "$over - $(med "stat.$n")")")" \
			"$(calc '%.2fx' "($over - $(med "stat.$n")) / $bw_over")" "$(busy "$(field "$r" 5)")" \
			"$(busy "$(field "$r" 5)" "$btr")"
	done
	echo "   (relaunch: nothing changed, the resolvers send their last answer again; changed: a file was"
	echo "   created and removed in a listed directory before, so they resolve every path again; cold: no"
	echo "   resolver processes yet, as after $RESOLVER_IDLE s without a launch: both are started)"
	echo "targets (relaunch, nothing changed; first, changed and cold launches shown for the record):"
	over=$(calc '%.0f' "$(med launch.relaunch10) - $tr")
	echo "  10 entries: overhead $(ms "$over") ms < bwrap's $(ms "$bw_over") ms -> $(verdict "$over < $bw_over")"
	local bover bbw_over
	bover=$(calc '%.0f' "$(cpu launch.relaunch10) - $(cpu launch.true)")
	bbw_over=$(calc '%.0f' "$(cpu launch.bwrap) - $(cpu launch.true)")
	echo "    busy overhead (CPU work, the cgroup move's wait excluded) $(ms "$bover") ms < bwrap's" \
		"$(ms "$bbw_over") ms -> $(verdict "$bover < $bbw_over")"
	for n in 1000 10000; do
		over=$(calc '%.0f' "$(med "launch.relaunch$n") - $tr - $(med "stat.$n")")
		echo "  $n entries: overhead - stat floor $(ms "$over") ms < bwrap's $(ms "$bw_over") ms -> $(verdict "$over < $bw_over")"
		over=$(calc '%.0f' "$(med "launch.changed$n") - $tr - $(med "stat.$n")")
		echo "    after a change (every path resolved again): $(ms "$over") ms, for the record"
	done
	dir_report
	echo
	echo "3. applying a list, as a user [$mode], ns per entry = (launch - relaunch with 0 entries) / entries,"
	echo "   from busy time: a launch's idle wait (the cgroup move's RCU grace period, quantized to timer"
	echo "   ticks, up to 4 ms apart from launch to launch) is a fixed cost, not a per-entry one; the floors"
	echo "   are CPU loops without idle. wall: the same from elapsed time, for the record"
	local chg
	printf '%-8s %8s %8s %8s %8s %8s %8s %8s %8s %9s %11s\n' entries first relaunch changed stat map \
		stat+map "rel/stat" "chg/stat" "1st/(s+m)" "wall ch/st"
	for n in "${APPLY_SIZES[@]}"; do
		first=$(calc '%.0f' "($(cpu "launch.first$n") - $(cpu launch.relaunch0)) / $n")
		rel=$(calc '%.0f' "($(cpu "launch.relaunch$n") - $(cpu launch.relaunch0)) / $n")
		chg=$(calc '%.0f' "($(cpu "launch.changed$n") - $(cpu launch.relaunch0)) / $n")
		floor=$(calc '%.0f' "$(med "stat.$n") / $n")
		row=$(calc '%.0f' "$(med "map.$n") / $n")
		printf '%-8s %8s %8s %8s %8s %8s %8s %8s %8s %9s %11s\n' "$n" "$first" "$rel" "$chg" "$floor" \
			"$row" "$((floor + row))" "$(calc '%.2fx' "$rel / $floor")" "$(calc '%.2fx' "$chg / $floor")" \
			"$(calc '%.2fx' "$first / ($floor + $row)")" \
			"$(calc '%.2fx' "($(med "launch.changed$n") - $(med launch.relaunch0)) / $(med "stat.$n")")"
	done
	echo "  (relaunch: nothing changed, the last answers sent again; changed: every path resolved again after a"
	echo "   change in a listed directory; stat: statx of each path, as the resolver calls it, in one process;"
	echo "   map: batched inserts of as many file keys and name keys into fresh maps shaped like deny_map and"
	echo "   name_map, 4096 a call)"
	echo "targets:"
	for n in "${APPLY_SIZES[@]}"; do
		rel=$(calc '%.4f' "($(cpu "launch.relaunch$n") - $(cpu launch.relaunch0)) / $(med "stat.$n")")
		chg=$(calc '%.4f' "($(cpu "launch.changed$n") - $(cpu launch.relaunch0)) / $(med "stat.$n")")
		echo "  no-change relaunch, $n entries <= 1.5x stat floor: ${rel}x -> $(verdict "$rel <= 1.5");" \
			"after a change: ${chg}x -> $(verdict "$chg <= 1.5")"
	done
	first=$(calc '%.4f' "($(cpu "launch.first$BIG") - $(cpu launch.relaunch0)) / ($(med "stat.$BIG") + $(med "map.$BIG"))")
	echo "  first apply, $BIG entries <= 2x (stat + map) floor: ${first}x -> $(verdict "$first <= 2")"

	read -r rss_idle _ <<<"${R[mem.rss_idle]}"
	read -r rss_big _ <<<"${R[mem.rss_big]}"
	echo
	echo "4. memory"
	echo "  daemon VmRSS idle (after start, no launch yet): $rss_idle KiB ($(calc '%.2f' "$rss_idle / 1024") MiB) -> <= 8 MiB: $(verdict "$rss_idle <= 8192")"
	echo "  daemon VmRSS with $BIG entries applied: $rss_big KiB ($(calc '%.2f' "$rss_big / 1024") MiB); peak (VmHWM) $(echo "${R[mem.rss_big]}" | awk '{ print $2 }') KiB"
	echo "  daemon VmRSS idle again (resolvers expired, $RESOLVER_IDLE s later; the $BIG entries still applied): $(echo "${R[mem.rss_after]}" | awk '{ print $1 }') KiB ($(calc '%.2f' "$(echo "${R[mem.rss_after]}" | awk '{ print $1 }') / 1024") MiB)"
	read -r res_n res_sum res_max <<<"${R[mem.resolvers]}"
	echo "  resolver processes then (kept $RESOLVER_IDLE s after a launch): $res_n, VmRSS $res_sum KiB in all, $res_max KiB the largest"
	echo "  deny_map: ${R[mem.keys]:-?} keys; memlock (bpftool map show) $(calc '%.2f' "${R[mem.deny_memlock]:-0} / 1048576") MiB" \
		"(idle: $(calc '%.2f' "${R[mem.deny_memlock_idle]:-0} / 1048576") MiB; on 6.1 the kernel derives it from max_entries)"
	echo "  agent_cgid_set: memlock $(calc '%.2f' "${R[mem.cgid_memlock]:-0} / 1024") KiB"
	kdelta=$((${R[mem.kernel_after]} - ${R[mem.kernel_before]}))
	echo "  kernel Slab+Percpu across the launch that applied $BIG entries: $kdelta KiB" \
		"($(calc '%.0f' "$kdelta * 1024 / $BIG") B per entry; an upper bound: all other activity included)"

	read -r load_ok load_fail load_med load_p95 load_max <<<"${R[load]}"
	echo
	echo "5. load [$mode]: $LOAD_TOTAL launches of agent-sandbox-exec /bin/true from ${#USERS[@]} users (10 entries each), $LOAD_PAR at a time"
	echo "  succeeded $load_ok, failed $load_fail; per launch: median $(ms "$load_med") ms, p95 $(ms "$load_p95") ms, max $(ms "$load_max") ms"
	echo "  target: all succeed, none waits past ${LOAD_BOUND_S} s -> $(verdict "$load_fail == 0 && $load_ok == $LOAD_TOTAL && $load_max <= $LOAD_BOUND_S * 1e9")"

	echo
	echo "6. the cgroup move's wait [$mode]: cgroup2 remounted with favordynmods (an administrator's choice)"
	if [ -z "${R[fdm.migrate]:-}" ]; then
		echo "  not measured: this kernel refuses favordynmods"
		return
	fi
	local ftr fover fbw_over
	ftr=$(med fdm.true)
	fover=$(calc '%.0f' "$(med fdm.relaunch10) - $ftr")
	fbw_over=$(calc '%.0f' "$(med fdm.bwrap) - $ftr")
	echo "  pid -> cgroup.procs after idle: $(ms "$(med fdm.migrate)") ms (without: $(ms "$(med launch.migrate)") ms)"
	echo "  /bin/true (fork, exec, exit): $(ms "$ftr") ms (without: $(ms "$tr") ms; $(calc '%+.1f%%' "($ftr / $tr - 1) * 100"))"
	echo "  bwrap --dev-bind / / /bin/true: $(ms "$(med fdm.bwrap)") ms, spread $(spread fdm.bwrap), overhead $(ms "$fbw_over") ms" \
		"(without: $(ms "$bw_over") ms)"
	echo "  agent-sandbox-exec, 10 entries, relaunch: $(ms "$(med fdm.relaunch10)") ms (just before, without:" \
		"$(ms "$(med fdm.before)") ms), overhead $(ms "$fover") ms < bwrap's $(ms "$fbw_over") ms here -> $(verdict "$fover < $fbw_over")"
	local n row fmin
	fmin=$(calc '%.0f' "$(field fdm.bwrap 2) - $ftr")
	echo "    slowest of its runs $(ms "$(calc '%.0f' "$(field fdm.relaunch10 3) - $ftr")") ms; bwrap's fastest $(ms "$fmin") ms"
	for n in 1000 10000; do
		[ -n "${R[fdm.relaunch$n]:-}" ] || continue
		for row in relaunch changed; do
			fover=$(calc '%.0f' "$(med "fdm.$row$n") - $ftr - $(med "stat.$n")")
			echo "  agent-sandbox-exec, $n entries, $row: overhead - stat floor $(ms "$fover") ms < bwrap's" \
				"$(ms "$fbw_over") ms here -> $(verdict "$fover < $fbw_over"); < its fastest $(ms "$fmin") ms ->" \
				"$(verdict "$fover < $fmin")"
		done
	done
}

main() {
	local t0=$SECONDS
	systemctl is-active -q "$UNIT" || die "$UNIT is not running"
	if [ -n "$without" ]; then
		mkdir -p "/run/systemd/system/$UNIT.d"
		printf '[Service]\nEnvironment=AGENT_SANDBOX_EXECD_WITHOUT=%s\n' "$without" \
			>"/run/systemd/system/$UNIT.d/bench-without.conf"
		systemctl daemon-reload
		systemctl restart "$UNIT" || die "$UNIT does not start with AGENT_SANDBOX_EXECD_WITHOUT=$without"
		progress "the daemon runs without $without"
	fi
	progress "setup"
	setup
	R[mem.rss_idle]=$(daemon_rss)
	R[mem.deny_memlock_idle]=$(map_memlock deny_map)
	progress "daemon idle: VmRSS/VmHWM ${R[mem.rss_idle]} KiB"
	if [ "$only" = dirlaunch ]; then
		dirlaunch_baseline
		dirlaunch_suite
		progress "measurements took $((SECONDS - t0)) s (guest clock)"
		echo
		echo "== agent-sandbox-exec benchmarks [$mode], directory entries only"
		echo "build: $rev; package $(dpkg-query -W -f '${Version}' agent-sandbox-exec)"
		echo "guest: Debian $(cat /etc/debian_version), kernel $(uname -r), $(nproc) vCPU, mode $mode"
		dir_report
		return
	fi
	if [ "$only" = hooks ]; then
		hook_suite
		fs_suite
		progress "measurements took $((SECONDS - t0)) s (guest clock)"
		echo
		echo "== agent-sandbox-exec benchmarks [$mode], hooks only"
		echo "build: $rev; package $(dpkg-query -W -f '${Version}' agent-sandbox-exec)"
		echo "guest: Debian $(cat /etc/debian_version), kernel $(uname -r), $(nproc) vCPU, mode $mode"
		report_hooks
		report_fs
		return
	fi
	if [ "$only" = fsloops ]; then
		fs_suite
		progress "measurements took $((SECONDS - t0)) s (guest clock)"
		echo
		echo "== agent-sandbox-exec benchmarks [$mode], name changes only"
		echo "build: $rev; package $(dpkg-query -W -f '${Version}' agent-sandbox-exec)"
		echo "guest: Debian $(cat /etc/debian_version), kernel $(uname -r), $(nproc) vCPU, mode $mode"
		report_fs
		return
	fi
	[ -z "$only" ] || die "--only: unknown suite $only (dirlaunch, hooks, fsloops)"
	hook_suite
	fs_suite
	launch_suite
	dirlaunch_suite
	load_suite
	favordynmods_suite
	progress "measurements took $((SECONDS - t0)) s (guest clock)"
	report
}

main
