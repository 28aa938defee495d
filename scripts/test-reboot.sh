#!/bin/bash
# shellcheck disable=SC2016,SC2317
# (SC2016: the single-quoted sh -c program expands its own variables;
#  SC2317: cleanup and the predicates are called indirectly)
#
# scripts/test-reboot.sh - the removal note across a reboot.
#
# Two halves, one per boot of the same guest disk (scripts/vm-test.sh
# --second-boot; `make vm-test` runs the first half at the end of
# scripts/guest-suite.sh and the second in the second boot):
#
#   test-reboot.sh prepare   (first boot) installs the package if the lifecycle
#       suite purged it, lists a secret of the user asx-rb, checks that a launch
#       from outside is denied, then, as an agent would, empties the list from
#       inside a sandbox and launches from inside (still denied, with the
#       "stay denied" note); leaves no sandboxed process and writes what the
#       second half needs to /var/lib/asx-test-reboot.
#   test-reboot.sh           (second boot, no arguments) checks that the boot id
#       changed, that the daemon serves, and that the first launch from outside
#       reads the file (the empty list applies) and prints "N entries denied
#       until now are no longer denied to your sandboxes", and the next one no
#       note; then removes the user and its state.
#
# Output and exit status as the other suites (scripts/test-lib.sh): PASS:/FAIL:
# lines, a summary, ALL PASS (0) or N FAILED (1).

set -u -o pipefail
umask 022
export LC_ALL=C DEBIAN_FRONTEND=noninteractive

readonly SUITE=test-reboot.sh
readonly LAUNCHER=agent-sandbox-exec
readonly PKG=agent-sandbox-exec
readonly READY=/run/agent-sandbox-exec/ready
readonly TEST_USER=asx-rb
readonly GECOS="agent-sandbox-exec reboot test user"
readonly STATE=/var/lib/asx-test-reboot
readonly EPERM_MSG="Operation not permitted"
readonly GONE_NOTE="entries denied until now are no longer denied to your sandboxes"
readonly CMD_TIMEOUT=60
readonly BACK_S=300

PASS_N=0 FAIL_N=0
# shellcheck source=scripts/test-lib.sh
. "$(dirname "$0")/test-lib.sh"
T=$(mktemp -d /tmp/asx-rb.XXXXXX) || exit 1
OUT=$T/out ERR=$T/err RC=0
PHASE=check

cleanup() {
	rm -rf "$T"
	# The second half ends the test: nothing of it stays behind.
	if [ "$PHASE" = check ]; then
		remove_test_user "$TEST_USER"
		rm -rf "$STATE"
	fi
}

boot_id() { cat /proc/sys/kernel/random/boot_id; }

daemon_serves() {
	local pid
	pid=$(systemctl show -p MainPID --value agent-sandbox-execd.service 2>/dev/null)
	[ -n "$pid" ] && [ "$pid" != 0 ] && [ "$(tr -d ' \n' 2>/dev/null <"$READY")" = "$pid" ]
}

read_secret() { has "$SECRET" "$OUT"; }
denied() { ! has "$SECRET" "$OUT" "$ERR" && [ "$RC" -ne 0 ] && has "$EPERM_MSG" "$ERR"; }

prepare() {
	local deb h list s
	PHASE=prepare
	if [ "$(dpkg-query -W -f='${Status}' "$PKG" 2>/dev/null)" != "install ok installed" ]; then
		read -r deb _ <<<"${VM_DEBS:-}"
		timeout 900 apt-get install -y -o Dpkg::Use-Pty=0 "$(readlink -f -- "$deb")" \
			</dev/null >"$T/apt.log" 2>&1
		ok "prepare: $PKG installs again (${deb##*/})" "$(tailsnip "$T/apt.log")" \
			eval '[ "$(dpkg-query -W -f="\${Status}" "$PKG")" = "install ok installed" ]'
	fi
	okl "prepare: the daemon serves" '$(systemctl is-active agent-sandbox-execd.service)' \
		wait_for "$BACK_S" daemon_serves
	remove_test_user "$TEST_USER" || { fail "prepare: user $TEST_USER" "exists and is not a test user"; return; }
	useradd -m -s /bin/sh -c "$GECOS" "$TEST_USER" || { fail "prepare: useradd" "failed"; return; }
	h=$(home_of "$TEST_USER")
	s=$h/secret.txt
	SECRET="asx-rb-secret-$(od -An -N8 -tx1 /dev/urandom | tr -d ' \n')"
	list=$h/.config/agent-sandbox-exec/denylist
	printf '%s\n' "$SECRET" >"$s" && chown "$TEST_USER:" "$s" && chmod 0600 "$s"
	install -d -o "$TEST_USER" -g "$TEST_USER" -m 0755 "$h/.config" "$h/.config/agent-sandbox-exec"
	printf '%s\n' "$s" >"$list" && chown "$TEST_USER:" "$list"

	run_in "$TEST_USER" cat "$s"
	ok "prepare: a launch from outside is denied the listed file" "$(why)" denied
	run_in_after "$TEST_USER" ': >"$list"' agent-sandbox-exec cat "$s"
	ok "prepare: with the list emptied (outside, while a sandbox runs), a launch from inside is still denied" "$(why)" denied
	okl "prepare: ... and told the entry stays denied" '$(why)' has "stay denied" "$ERR"
	kill_user_procs "$TEST_USER"
	mkdir -p "$STATE"
	printf '%s\n%s\n%s\n' "$(boot_id)" "$s" "$SECRET" >"$STATE/prepared"
	sync
	note "prepared in boot $(boot_id); the second boot checks the note"
}

check() {
	local boot0 s
	if ! { read -r boot0 && read -r s && read -r SECRET; } <"$STATE/prepared" 2>/dev/null; then
		fail "check: the first boot prepared the test" "no $STATE/prepared (run 'test-reboot.sh prepare' first)"
		return
	fi
	ok "check: this is another boot (boot id $(boot_id), was $boot0)" "same boot id" \
		test "$(boot_id)" != "$boot0"
	okl "check: the daemon serves after the reboot" '$(systemctl is-active agent-sandbox-execd.service)' \
		wait_for "$BACK_S" daemon_serves
	run_in "$TEST_USER" cat "$s"
	ok "check: the first launch from outside after the reboot applies the empty list (reads the file)" \
		"$(why)" read_secret
	okl "check: ... and prints the note '... $GONE_NOTE ...'" '$(why)' has "$GONE_NOTE" "$ERR"
	note "check: the note: $(grep -a 'note:' "$ERR" | head -n 2 | tr '\n' '|')"
	run_in "$TEST_USER" cat "$s"
	ok "check: the next launch prints no note (said once)" "$(why)" \
		eval 'read_secret && ! has "note:" "$ERR"'
}

SECRET=""
trap cleanup EXIT
case ${1:-} in
prepare) prepare ;;
'') check ;;
*)
	echo "usage: $0 [prepare]" >&2
	exit 2
	;;
esac
finish
