#!/bin/bash
# shellcheck disable=SC2016,SC2088,SC2317,SC2034
# (SC2016: okl's details are expanded on failure; SC2088: list lines are literal
#  `~/...`; SC2317: check_* are called through run_check; SC2034: the counters
#  and SUITE are read by test-lib.sh)
# test-status.sh: guest suite of "know where you stand" (issue 17): the
# launcher's --status and --check, the root doctor `agent-sandbox-execd
# --check`, the daemon's reason when it cannot serve, and the note of a
# launch that denies nothing. Runs as root in a QEMU guest with the package
# installed and the daemon started by systemd (scripts/vm-test.sh).
#
# Checks (names for ASX_STATUS_ONLY / ASX_STATUS_SKIP):
#   status_outside   --status as a user outside: "sandbox: no", daemon serving, exit 0
#   status_inside    --status -v from inside a sandbox: "sandbox: yes", the counts of
#                    what is enforced, and no list text echoed to the sandbox
#   check_mistakes   --check of a list with a trailing "# comment", a `[` (literal), a typo
#                    next to the real name, a directory and an exception below no directory
#                    entry: each named as a mistake, exit 1;
#                    a name pattern shown live, not as a mistake; a clean list exits 0
#   doctor_healthy   agent-sandbox-execd --check on this kernel: every check ok (the
#                    canary among them), exit 0, nothing of its canary left behind
#   canary           the daemon ran its canary (a temporary sandbox refused a denied
#                    temporary file with EPERM) before it reported ready, and removed it
#   nothing_denied   a launch whose lists deny nothing prints a one-line note
#   include          `include` (issue 25): the user's list includes the shipped catalogue's
#                    `recommended` and a list of the user's own: the groups' files are
#                    denied (~/.aws/credentials, a private key), their exceptions readable
#                    (known_hosts, a .pub, ssh's config, read-only from inside), the own
#                    included list's entry denied; an include of a directory refuses; the
#                    included list cannot be changed, moved or planted (a missing one) from
#                    inside; --check shows each included file; the base list's include of a
#                    root-owned file applies its ~/ lines, a cycle is skipped with a warning
#                    in the daemon's log, an include of a user-owned file refuses every launch
#   failed_start     a daemon whose load fails (started without CAP_PERFMON and
#                    CAP_SYS_ADMIN: EPERM) leaves neither an empty pin directory nor
#                    the cgroup tree behind; the service serves again after
#   no_bpf           only in a guest booted with an lsm= list without bpf (the
#                    Makefile's short vm-test boot): the daemon does not report ready,
#                    the doctor names `lsm=<list>,bpf`, the launcher refuses quoting the
#                    daemon's reason, a mistyped PROGRAM is named as such
#
#   ASX_STATUS_ONLY="name ..."  run only these checks;  ASX_STATUS_SKIP="name ..."  skip these
# Prints PASS:/FAIL:/SKIP: lines; ends with ALL PASS or N FAILED (exit 1).

set -u -o pipefail
umask 022
export LC_ALL=C
HERE=$(cd "$(dirname "$0")" && pwd) || exit 1
cd / || exit 1

readonly SUITE=test-status.sh
readonly LAUNCHER=agent-sandbox-exec
readonly USR=asx-st
readonly GECOS="agent-sandbox-exec status test user"
readonly HOME_LIST_REL=.config/agent-sandbox-exec/denylist

CHECKS=(status_outside status_inside check_mistakes doctor_healthy canary nothing_denied include failed_start no_bpf)

PASS_N=0 FAIL_N=0 SKIP_N=0

# shellcheck source=scripts/test-lib.sh
. "$HERE/test-lib.sh" || exit 1
FILTER=ASX_STATUS # run_check: ASX_STATUS_ONLY / ASX_STATUS_SKIP choose the checks
# check_wanted NAME (run_check): in a boot without the bpf LSM, only no_bpf can run.
check_wanted() { [ "$NO_BPF" != 1 ] || [ "$1" = no_bpf ]; }
CMD_TIMEOUT=60
T="" OUT="" ERR="" RC=0 UH="" USR_UID="" CLEANED=0 NO_BPF=0

# The kernel command line sets an lsm= list without bpf.
no_bpf_boot() {
	local a
	for a in $(</proc/cmdline); do
		case $a in lsm=*) case ",${a#lsm=}," in *,bpf,*) return 1 ;; *) return 0 ;; esac ;; esac
	done
	return 1
}

# set_list TEXT: the test user's own list
set_list() {
	runuser -u "$USR" -- mkdir -p "$UH/.config/agent-sandbox-exec" &&
		printf '%s' "$1" | runuser -u "$USR" -- tee "$UH/$HOME_LIST_REL" >/dev/null
}

daemon_serving() { [ -s /run/agent-sandbox-exec/ready ]; }

check_status_outside() {
	set_list "~/.ssh/id_ed25519
"
	run_as "$USR" "$LAUNCHER" --status
	okl "status_outside: exit 0 while the daemon serves" '$(why)' [ "$RC" -eq 0 ]
	okl "status_outside: says not in a sandbox" '$(snip "$OUT")' has "sandbox: no" "$OUT"
	okl "status_outside: says the daemon serves" '$(snip "$OUT")' has "daemon: serving (pid" "$OUT"
}

check_status_inside() {
	runuser -u "$USR" -- mkdir -p "$UH/.aws"
	set_list "~/.ssh/id_ed25519
~/.aws/credentials
"
	run_in "$USR" "$LAUNCHER" --status -v
	okl "status_inside: exit 0" '$(why)' [ "$RC" -eq 0 ]
	okl "status_inside: says in the sandbox" '$(snip "$OUT")' \
		has "sandbox: yes, this process is in /agent-sandbox-exec/uid-$USR_UID" "$OUT"
	# One file exists (denied), one is missing (watched by name): 1 file, 2 names,
	# plus the base list's absolute lines (the shipped one names /usr/bin/crontab
	# and /usr/bin/at): each existing file is a file and a name, each missing one
	# in an existing directory a name; a directory entry (/var/lib/AccountsService/)
	# is a name in its parent, existing or not (its own key is a mark, not a file).
	local bf=0 bn=0 l
	while IFS= read -r l; do
		case $l in
		/*/)
			[ -d "$(dirname "${l%/}")" ] && bn=$((bn + 1))
			continue
			;;
		/*) ;;
		*) continue ;;
		esac
		if [ -f "$l" ]; then
			bf=$((bf + 1)) bn=$((bn + 1))
		elif [ -d "${l%/*}" ]; then
			bn=$((bn + 1))
		fi
	done </etc/agent-sandbox-exec/denylist
	okl "status_inside: counts what is enforced" '$(snip "$OUT")' \
		has "enforced for uid $USR_UID: $((1 + bf)) file(s) denied, $((2 + bn)) name(s) watched" "$OUT"
	okl "status_inside: -v names lines by number inside a sandbox" '$(snip "$OUT")' \
		has "lines named by number only (you are inside a sandbox)" "$OUT"
	if has ".ssh/id_ed25519" "$OUT"; then
		fail "status_inside: no list text echoed to a sandbox" "$(snip "$OUT")"
	else
		pass "status_inside: no list text echoed to a sandbox"
	fi
}

check_check_mistakes() {
	run_as "$USR" mkdir -p "$UH/.aws" "$UH/.ssh"
	run_as "$USR" touch "$UH/.aws/credentials"
	set_list "~/.ssh/id_ed25519
/etc/shadow # the passwords
~/.ssh/id_*
~/.aws/credentails
~/.ssh
~/.ssh/key[1]
!~/.aws/credentials
"
	# A base-list line in a directory the user cannot read: the daemon's, as root.
	local base=/etc/agent-sandbox-exec/denylist saved=""
	[ -f "$base" ] && saved=$T/base.saved && cp -p "$base" "$saved"
	printf '/root/.asx-st-secret\n' >"$base"
	run_as "$USR" "$LAUNCHER" --check
	if [ -n "$saved" ]; then cp -p "$saved" "$base"; else rm -f "$base"; fi
	okl "check_mistakes: exit 1 for a list with mistakes" '$(why)' [ "$RC" -eq 1 ]
	okl "check_mistakes: a base line the user cannot check is the daemon's" '$(snip "$OUT")' \
		has "denylist:1: skipped: cannot check it as you" "$OUT"
	okl "check_mistakes: the existing file is denied" '$(snip "$OUT")' \
		has "$HOME_LIST_REL:1: denied: ~/.ssh/id_ed25519" "$OUT"
	okl "check_mistakes: a # later in the line" '$(snip "$OUT")' \
		has ":2: mistake? it holds a \`#\`" "$OUT"
	okl "check_mistakes: the name before the # is suggested" '$(snip "$OUT")' \
		has ":2: mistake? did you mean /etc/shadow?" "$OUT"
	okl "check_mistakes: a name pattern is shown live, not as a mistake" '$(snip "$OUT")' \
		eval 'has ":3: name pattern, live" "$OUT" && ! has ":3: mistake?" "$OUT"'
	okl "check_mistakes: a [ is taken literally" '$(snip "$OUT")' has ":6: mistake? it holds a \`[\`" "$OUT"
	okl "check_mistakes: a typo next to the real name" '$(snip "$OUT")' \
		has ":4: mistake? did you mean $UH/.aws/credentials?" "$OUT"
	okl "check_mistakes: a directory" '$(snip "$OUT")' has ":5: mistake? a line names a file, never a directory" "$OUT"
	okl "check_mistakes: an exception below no directory entry excepts nothing" '$(snip "$OUT")' \
		has ":7: mistake? it excepts nothing: no directory entry" "$OUT"
	okl "check_mistakes: base-list lines resolved as root may differ" '$(snip "$OUT")' \
		has "the daemon resolves them as root" "$OUT"
	printf '~/.ssh/id_ed25519\n~/.aws/credentials\n' >"$T/clean.list"
	run_as "$USR" "$LAUNCHER" --check "$T/clean.list"
	okl "check_mistakes: a clean list exits 0" '$(why); $(snip "$OUT")' [ "$RC" -eq 0 ]
}

check_doctor_healthy() {
	RC=0
	# The doctor's trial load verifies every program: 6.12 under TCG takes up to a minute alone,
	# several beside other guests; 300 s as the unit's start timeout.
	timeout 300 agent-sandbox-execd --check >"$OUT" 2>"$ERR" || RC=$?
	okl "doctor_healthy: exit 0" '$(why); $(snip "$OUT")' [ "$RC" -eq 0 ]
	okl "doctor_healthy: trial load and attach" '$(snip "$OUT")' has "ok: trial load and attach:" "$OUT"
	okl "doctor_healthy: verdict" '$(snip "$OUT")' has "verdict: enforcement can work on this kernel" "$OUT"
	okl "doctor_healthy: the canary was refused with EPERM" '$(snip "$OUT")' \
		grep -q '^ok: canary: .* with EPERM' "$OUT"
	okl "doctor_healthy: nothing of its canary left" '$(canary_leftovers)' no_canary_leftovers
	okl "doctor_healthy: the daemon still serves after it" 'no ready file' daemon_serving
}

canary_leftovers() {
	local p
	for p in /sys/fs/cgroup/agent-sandbox-exec/canary-* /run/agent-sandbox-exec/canary-*; do
		[ -e "$p" ] && printf '%s ' "$p"
	done
	return 0
}
no_canary_leftovers() { [ -z "$(canary_leftovers)" ]; }

check_canary() {
	local j="$T/journal"
	journalctl -b -u agent-sandbox-execd -o cat --no-pager >"$j" 2>&1
	# The last start: its canary line comes before its ready line (both after
	# the log level, e.g. "[INFO ] canary: ...").
	okl "canary: the daemon's canary was refused with EPERM" '$(tailsnip "$j")' \
		grep -q '] canary: .* with EPERM' "$j"
	okl "canary: it ran before the daemon reported ready" '$(tailsnip "$j")' \
		awk '/\] canary: .* with EPERM/ { c = NR } /\] ready; requests on/ { r = NR }
			END { exit !(c && r && c < r) }' "$j"
	okl "canary: nothing of it left" '$(canary_leftovers)' no_canary_leftovers
}

# The sandbox tree and pins as a first start finds them: none.
clear_tree_and_pins() {
	local d
	systemctl stop agent-sandbox-execd || return 1
	agent-sandbox-execd --disable >/dev/null || return 1
	for d in /sys/fs/cgroup/agent-sandbox-exec/*/; do
		[ -d "$d" ] && { rmdir "$d" || return 1; }
	done
	[ ! -e /sys/fs/cgroup/agent-sandbox-exec ] || rmdir /sys/fs/cgroup/agent-sandbox-exec || return 1
	[ ! -e /sys/fs/bpf/agent-sandbox-exec ] || find /sys/fs/bpf/agent-sandbox-exec -depth -type d -delete || return 1
	[ ! -e /sys/fs/cgroup/agent-sandbox-exec ] && [ ! -e /sys/fs/bpf/agent-sandbox-exec ]
}

check_failed_start() {
	if ! clear_tree_and_pins; then
		fail "failed_start: clear the tree and pins first" "$(find /sys/fs/bpf/agent-sandbox-exec /sys/fs/cgroup/agent-sandbox-exec -maxdepth 2 2>&1 | head -c 200)"
		systemctl start agent-sandbox-execd
		return
	fi
	# BPF_PROG_LOAD of an LSM program needs perfmon_capable() (CAP_PERFMON or
	# CAP_SYS_ADMIN; kernel/bpf/syscall.c bpf_prog_load): EPERM after the maps
	# were made and pinned (CAP_BPF stays).
	RC=0
	timeout 120 systemd-run --wait --quiet --collect --unit=asx-st-failed-start \
		-p 'CapabilityBoundingSet=~CAP_SYS_ADMIN CAP_PERFMON' /usr/sbin/agent-sandbox-execd \
		>"$OUT" 2>"$ERR" || RC=$?
	okl "failed_start: the daemon fails" '$(why)' [ "$RC" -ne 0 ]
	okl "failed_start: its reason names EPERM at the load" '$(snip /run/agent-sandbox-exec/failure)' \
		grep -q 'cannot load the BPF LSM programs.*EPERM' /run/agent-sandbox-exec/failure
	okl "failed_start: no pin directory left behind" '$(find /sys/fs/bpf/agent-sandbox-exec 2>&1 | tr "\n" " ")' \
		[ ! -e /sys/fs/bpf/agent-sandbox-exec ]
	okl "failed_start: no cgroup tree left behind" '$(ls -d /sys/fs/cgroup/agent-sandbox-exec 2>&1)' \
		[ ! -e /sys/fs/cgroup/agent-sandbox-exec ]
	systemctl reset-failed agent-sandbox-execd 2>/dev/null
	systemctl start agent-sandbox-execd
	okl "failed_start: the service serves again" '$(systemctl is-active agent-sandbox-execd)' \
		wait_for 300 daemon_serving
}

check_nothing_denied() {
	set_list "# nothing listed
"
	# The base list may deny files for everyone; empty it for this launch.
	local base=/etc/agent-sandbox-exec/denylist saved=""
	[ -f "$base" ] && saved=$T/base.saved && cp -p "$base" "$saved"
	: >"$base"
	run_in "$USR" true
	if [ -n "$saved" ]; then cp -p "$saved" "$base"; else rm -f "$base"; fi
	okl "nothing_denied: the launch runs" '$(why)' [ "$RC" -eq 0 ]
	okl "nothing_denied: one-line note" '$(snip "$ERR")' has "note: your lists deny nothing" "$ERR"
}

# cat_in FILE: read FILE inside the test user's sandbox ($OUT, $ERR, $RC)
cat_in() { run_in "$USR" cat "$1"; }
denied_in() { cat_in "$1" && [ "$RC" -ne 0 ] && has "Operation not permitted" "$ERR" && ! has SECRET "$OUT"; }
readable_in() { cat_in "$1" && [ "$RC" -eq 0 ] && has "$2" "$OUT"; }

check_include() {
	local cat=/usr/share/agent-sandbox-exec/catalog base=/etc/agent-sandbox-exec/denylist saved="" f
	runuser -u "$USR" -- sh -c 'umask 022; mkdir -p ~/.aws ~/.ssh ~/more &&
		echo AWS-SECRET >~/.aws/credentials && echo SSH-SECRET >~/.ssh/id_ed25519 &&
		echo KNOWN-HOST >~/.ssh/known_hosts && echo PUBLIC-KEY >~/.ssh/id_ed25519.pub &&
		echo "Host x" >~/.ssh/config && mkdir -p ~/.ssh/config.d ~/adir &&
		echo "Host y" >~/.ssh/config.d/y.conf &&
		echo EXTRA-SECRET >~/more/extra.secret && echo BASE-SECRET >~/base.secret &&
		echo "~/more/extra.secret" >~/more/extra.list'
	okl "include: the catalogue is installed" '$(ls "$cat" 2>&1 | tr "\n" " ")' \
		sh -c "[ -f '$cat/recommended' ] && [ -f '$cat/cloud' ] && [ -f '$cat/ssh' ]"
	set_list "include $cat/recommended
include ~/more/extra.list
include ~/more/later.list
"
	# The base list includes a root-owned list (its ~/ line applies to every
	# user) and itself (a cycle: skipped, with a warning).
	[ -f "$base" ] && saved=$T/base.saved && cp -p "$base" "$saved"
	printf '~/base.secret\n' >/etc/agent-sandbox-exec/include-test.list
	chmod 0644 /etc/agent-sandbox-exec/include-test.list
	printf 'include /etc/agent-sandbox-exec/include-test.list\ninclude %s\n' "$base" >"$base"
	local since
	since=$(date '+%Y-%m-%d %H:%M:%S')
	okl "include: a file of a catalogue group is denied (~/.aws/credentials)" '$(why); $(snip "$ERR")' \
		denied_in "$UH/.aws/credentials"
	okl "include: no warning about the catalogue's lines of tools that are not installed" \
		'$(snip "$ERR")' eval '! has "$cat/" "$ERR"'
	okl "include: a private key below ~/.ssh/ is denied" '$(why); $(snip "$ERR")' denied_in "$UH/.ssh/id_ed25519"
	okl "include: known_hosts is excepted" '$(why); $(snip "$ERR")' readable_in "$UH/.ssh/known_hosts" KNOWN-HOST
	okl "include: a public key is excepted" '$(why); $(snip "$ERR")' readable_in "$UH/.ssh/id_ed25519.pub" PUBLIC-KEY
	okl "include: ssh's config is excepted (readable)" '$(why); $(snip "$ERR")' readable_in "$UH/.ssh/config" "Host x"
	run_in "$USR" sh -c 'echo "ProxyCommand x" >>~/.ssh/config'
	okl "include: ssh's config is read-only from inside" '$(why); $(snip "$ERR")' \
		sh -c "[ $RC -ne 0 ] && grep -q 'Operation not permitted' '$ERR' && ! grep -q ProxyCommand '$UH/.ssh/config'"
	run_in "$USR" sh -c 'echo "ssh-ed25519 AAAA agent" >~/.ssh/id_ed25519.pub'
	okl "include: an excepted public key is read-only from inside" '$(why); $(snip "$ERR")' \
		sh -c "[ $RC -ne 0 ] && grep -q PUBLIC-KEY '$UH/.ssh/id_ed25519.pub'"
	okl "include: a file of ssh's config.d is readable" '$(why); $(snip "$ERR")' \
		readable_in "$UH/.ssh/config.d/y.conf" "Host y"
	run_in "$USR" sh -c 'echo "Match exec x" >~/.ssh/config.d/z.conf'
	okl "include: nothing is made in ssh's config.d from inside" '$(why); $(snip "$ERR")' \
		sh -c "[ $RC -ne 0 ] && [ ! -e '$UH/.ssh/config.d/z.conf' ]"
	okl "include: the user's own included list applies" '$(why); $(snip "$ERR")' \
		denied_in "$UH/more/extra.secret"
	okl "include: the base list's root-owned include applies its ~/ line" '$(why); $(snip "$ERR")' \
		denied_in "$UH/base.secret"
	# From inside, the included list can be neither changed, moved nor planted.
	run_in "$USR" sh -c 'echo "!~/more/extra.secret" >>~/more/extra.list'
	okl "include: the included list cannot be appended to from inside" '$(why); $(snip "$ERR")' \
		sh -c "[ $RC -ne 0 ] && grep -q 'Operation not permitted' '$ERR'"
	run_in "$USR" mv "$UH/more/extra.list" "$UH/more/moved.list"
	okl "include: the included list cannot be moved from inside" '$(why); $(snip "$ERR")' \
		sh -c "[ $RC -ne 0 ] && [ -f '$UH/more/extra.list' ]"
	run_in "$USR" mv "$UH/more" "$UH/more2"
	okl "include: the included list's directory cannot be moved from inside" '$(why); $(snip "$ERR")' \
		sh -c "[ $RC -ne 0 ] && [ -f '$UH/more/extra.list' ]"
	run_in "$USR" sh -c 'echo "!~/.aws/credentials" >~/more/later.list'
	okl "include: a missing included list cannot be planted from inside" '$(why); $(snip "$ERR")' \
		sh -c "[ $RC -ne 0 ] && [ ! -e '$UH/more/later.list' ]"
	# Outside, the user may edit their own included list.
	run_as "$USR" sh -c 'echo "~/.lesshst" >>~/more/extra.list'
	okl "include: the included list can be changed outside" '$(why); $(snip "$ERR")' [ "$RC" -eq 0 ]
	run_as "$USR" "$LAUNCHER" --check
	okl "include: --check shows the included files" '$(snip "$OUT")' \
		sh -c "grep -qF '$cat/cloud: included by $cat/recommended:' '$OUT' &&
			grep -qF '$UH/more/extra.list: included by $UH/$HOME_LIST_REL:2' '$OUT' &&
			grep -qF '$cat/cloud:' '$OUT'"
	okl "include: --check names the missing include" '$(snip "$OUT")' \
		has "include $UH/more/later.list: the file does not exist" "$OUT"
	# An include of something that is not a regular file refuses the launch:
	# nothing could be guarded there, and the agent could replace it.
	set_list "include $cat/ssh
include ~/adir
"
	run_in "$USR" true
	okl "include: an include of a directory refuses the launch" '$(why); $(snip "$ERR")' \
		sh -c "[ $RC -eq 2 ] && grep -q 'include $UH/adir: it is not a regular file' '$ERR'"
	f=$T/journal
	journalctl -u agent-sandbox-execd --since "$since" -o cat --no-pager >"$f" 2>&1
	okl "include: a base include cycle is refused in the daemon's log" '$(tailsnip "$f")' \
		has "an include cycle ($base includes $base)" "$f"
	# A base-list include a user could change refuses every launch: the
	# administrator's lines are never dropped quietly.
	printf 'include %s/more/extra.list\n' "$UH" >"$base"
	set_list "~/.ssh/id_ed25519
"
	run_in "$USR" true
	okl "include: a user-owned base include refuses every launch, naming why" '$(why); $(snip "$ERR")' \
		sh -c "[ $RC -eq 2 ] && grep -q 'include $UH/more/extra.list: its directory $UH is owned by uid $USR_UID, not root' '$ERR'"
	if [ -n "$saved" ]; then cp -p "$saved" "$base"; else rm -f "$base"; fi
	rm -f /etc/agent-sandbox-exec/include-test.list
	set_list "~/.ssh/id_ed25519
"
}

check_no_bpf() {
	if [ "$NO_BPF" != 1 ]; then
		note "no_bpf: not run: this boot's kernel command line has no lsm= list without bpf (see the Makefile's vm-test)"
		return
	fi
	local lsm st
	lsm=$(cat /sys/kernel/security/lsm)
	# The unit exits 78 (permanent), so it ends failed, not restarting.
	wait_for 90 sh -c '[ "$(systemctl is-active agent-sandbox-execd)" = failed ]'
	st=$(systemctl is-active agent-sandbox-execd)
	okl "no_bpf: the daemon does not report ready" '$st; ready: $(snip /run/agent-sandbox-exec/ready)' \
		sh -c "[ ! -e /run/agent-sandbox-exec/ready ] && [ '$st' != active ]"
	RC=0
	timeout 120 agent-sandbox-execd --check >"$OUT" 2>"$ERR" || RC=$?
	okl "no_bpf: doctor exits 1" '$(why)' [ "$RC" -eq 1 ]
	okl "no_bpf: doctor names the kernel command line" '$(snip "$OUT")' has "lsm=$lsm,bpf" "$OUT"
	okl "no_bpf: doctor names the GRUB file" '$(snip "$OUT")' has "/etc/default/grub" "$OUT"
	run_as "$USR" "$LAUNCHER" true
	okl "no_bpf: the launcher refuses" '$(why)' [ "$RC" -eq 2 ]
	okl "no_bpf: the refusal quotes the daemon's reason" '$(snip "$ERR")' \
		has "the daemon's last failure: enforcement unavailable: the bpf LSM is not active" "$ERR"
	okl "no_bpf: the refusal points to the journal" '$(snip "$ERR")' has "journalctl -u agent-sandbox-execd" "$ERR"
	run_as "$USR" "$LAUNCHER" no-such-program-asx
	okl "no_bpf: a mistyped PROGRAM is named, not the daemon" '$(why)' \
		sh -c "[ $RC -eq 127 ] && grep -q 'not found in PATH' '$ERR'"
	run_as "$USR" "$LAUNCHER" --status
	okl "no_bpf: --status exits 1 and quotes the reason" '$(why); $(snip "$OUT")' \
		sh -c "[ $RC -eq 1 ] && grep -q 'daemon: not serving:.*last failure' '$OUT'"
}

preflight() {
	if [ "$(id -u)" -ne 0 ]; then
		fail "running as root" "uid $(id -u)"
		return 1
	fi
	command -v "$LAUNCHER" >/dev/null || { fail "launcher installed" "no $LAUNCHER"; return 1; }
}

setup() {
	T=$(mktemp -d /tmp/asx-st.XXXXXX) || return 1
	chmod 0755 "$T"
	OUT=$T/out ERR=$T/err
	remove_test_user "$USR" || { echo "user $USR exists and is not a test user" >&2; return 1; }
	useradd -m -s /bin/sh -c "$GECOS" "$USR" || return 1
	USR_UID=$(id -u "$USR") UH=$(home_of "$USR")
	runuser -u "$USR" -- mkdir -p "$UH/.ssh" && runuser -u "$USR" -- touch "$UH/.ssh/id_ed25519"
	if no_bpf_boot; then
		NO_BPF=1
		note "this boot has no bpf LSM ($(cat /proc/cmdline)); only no_bpf runs"
	else
		wait_for 300 daemon_serving || { echo "the daemon is not serving" >&2; return 1; }
	fi
}

cleanup() {
	[ "$CLEANED" -eq 1 ] && return 0
	CLEANED=1
	remove_test_user "$USR"
	[ -n "$T" ] && rm -rf "$T"
	return 0
}

run_suite "setup (test user, daemon)"
