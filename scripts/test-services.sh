#!/bin/bash
# shellcheck disable=SC2016,SC2317,SC2034,SC2088,SC2015
# (SC2016: the single-quoted sh -c programs expand their own variables; SC2317: the check_* functions
#  are called through run_check; SC2034: test-lib.sh reads the counters; SC2088: ~ is list text;
#  SC2015: A && B || fail reports a failure of any step)
#
# scripts/test-services.sh - system services that read a file for the caller
# (GitHub issue 29, docs/BYPASS_CATALOG.md "A system service copies a listed
# file for the agent: accountsservice's SetIconFile" and the review of system
# services and set-id helpers below it).
#
# Run as root in a throwaway guest where the package is installed, the daemon
# runs, and accountsservice and polkitd are installed (the QEMU guest of
# `make vm-test`). accounts-daemon's SetIconFile reads the file the caller
# names (through a cat it spawns with the caller's uid, outside any sandbox)
# and copies it to /var/lib/AccountsService/icons/<user>, readable by
# everyone; polkit lets a user change their own icon without a password. The
# shipped base list's directory entry /var/lib/AccountsService/ denies
# sandboxed reads of every copy, also when the service is installed after
# the launch.
#
# Checks (in this order; names for ASX_SERVICES_ONLY / ASX_SERVICES_SKIP):
#   icon_control     outside any sandbox, SetIconFile of the listed key copies it to the
#                    icon, which the user can read (the route works, with no password)
#   icon             inside the sandbox the same call still makes the copy, but the
#                    sandbox never gets the key's bytes: cat of the copy is EPERM
#   installed_after  /var/lib/AccountsService made (as by installing the package) after
#                    the launch, the service then started: the copy is denied all the same
#   setuid           a set-uid root reader run inside the sandbox is still sandboxed: a
#                    listed root file it could read outside is EPERM inside
#   legit            what an agent does with system services works inside: timedatectl,
#                    systemctl status, busctl --system introspection and properties,
#                    loginctl, accountsservice's FindUserByName
#
# Output: "PASS: <what>", "FAIL: <what> (<detail>)", "SKIP: <why>", notes ("# ...");
# then a count line and "ALL PASS" (exit 0) or "<n> FAILED" (exit 1).
#
# Environment:
#   ASX_SERVICES_ONLY="name ..."  run only these checks;  ASX_SERVICES_SKIP="name ..."  skip these

set -u -o pipefail
umask 022
export LC_ALL=C
HERE=$(cd "$(dirname "$0")" && pwd) || exit 1
cd / || exit 1

readonly SUITE=test-services.sh
readonly LAUNCHER=agent-sandbox-exec
readonly USR=asx-svcs
readonly GECOS="agent-sandbox-exec services test user"
readonly EPERM_MSG="Operation not permitted"
readonly HOME_LIST_REL=.config/agent-sandbox-exec/denylist
readonly AS_DIR=/var/lib/AccountsService
readonly AS_AWAY=/var/lib/AccountsService.asx-away
readonly SRV=/srv/asx-svcs
readonly SUID_CAT=/usr/local/bin/asx-suid-cat

CHECKS=(icon_control icon installed_after setuid legit)

PASS_N=0 FAIL_N=0 SKIP_N=0

# shellcheck source=scripts/test-lib.sh
. "$HERE/test-lib.sh" || exit 1
FILTER=ASX_SERVICES # run_check: ASX_SERVICES_ONLY / ASX_SERVICES_SKIP choose the checks
CMD_TIMEOUT=60
T="" OUT="" ERR="" RC=0 UH="" TOK="" UOBJ="" ICON=""

sec() { printf 'asx-secret-%s-%s' "$1" "$TOK"; }

# put FILE MODE TEXT: FILE (and its directories) owned by the test user
put() {
	install -d -o "$USR" -g "$USR" -m 0700 "$(dirname "$1")" && printf '%s\n' "$3" >"$1" &&
		chown "$USR:$USR" "$1" && chmod "$2" "$1"
}

# The test user's object path at accounts-daemon (FindUserByName, as root)
user_object() {
	busctl --system call org.freedesktop.Accounts /org/freedesktop/Accounts \
		org.freedesktop.Accounts FindUserByName s "$USR" 2>"$T/find.err" | sed -n 's/^o "\(.*\)"$/\1/p'
}

# The shell program that sets the icon to "$1" and prints the copy; run as the user
# (outside: run_as; inside: run_in). $2 is the object path, $3 the copy's path.
readonly SET_AND_READ='busctl --system call org.freedesktop.Accounts "$2" org.freedesktop.Accounts.User SetIconFile s "$1" || echo "call failed: $?" >&2; sleep 0.5; cat "$3"'

# reset_icon: no icon for the test user (as root)
reset_icon() { rm -f "$ICON"; }

# copied TEXT: the icon accounts-daemon wrote holds TEXT (read as root)
copied() { [ -f "$ICON" ] && grep -qaF -- "$1" "$ICON"; }

# restart_accounts: (re)start accounts-daemon and wait until it answers
restart_accounts() {
	systemctl restart accounts-daemon.service >/dev/null 2>&1 || return 1
	wait_for 30 sh -c 'busctl --system call org.freedesktop.Accounts /org/freedesktop/Accounts org.freedesktop.Accounts FindUserByName s "$1" >/dev/null 2>&1' sh "$USR"
}

# ---------------------------------------------------------------- checks

check_icon_control() {
	put "$UH/.ssh/id_test" 0600 "$(sec control)"
	set_list "~/.ssh/id_test"
	reset_icon
	run_as "$USR" sh -c "$SET_AND_READ" sh "$UH/.ssh/id_test" "$UOBJ" "$ICON"
	okl "icon_control: outside any sandbox, SetIconFile copies the listed key to $ICON, without a password" \
		'rc=$RC err=$(snip "$ERR"); icon: $(ls -l "$ICON" 2>&1)' \
		eval 'copied "$(sec control)"'
	okl "icon_control: and the user reads the copy outside" 'rc=$RC out=$(snip "$OUT") err=$(snip "$ERR")' \
		eval '[ "$RC" -eq 0 ] && has "$(sec control)" "$OUT"'
	run_in "$USR" cat "$UH/.ssh/id_test"
	okl "icon_control: the key itself is denied inside" 'rc=$RC out=$(snip "$OUT") err=$(snip "$ERR")' \
		eval '[ "$RC" -ne 0 ] && has "$EPERM_MSG" "$ERR" && ! has "$(sec control)" "$OUT"'
	reset_icon
}

check_icon() {
	put "$UH/.ssh/id_test" 0600 "$(sec icon)"
	set_list "~/.ssh/id_test"
	reset_icon
	run_in "$USR" sh -c "$SET_AND_READ" sh "$UH/.ssh/id_test" "$UOBJ" "$ICON"
	# The route was taken (else the check proves nothing) ...
	okl "icon: from inside the sandbox, SetIconFile still makes the copy" \
		'rc=$RC err=$(snip "$ERR"); icon: $(ls -l "$ICON" 2>&1)' \
		eval 'copied "$(sec icon)"'
	# ... and the sandbox never saw the bytes.
	okl "icon: the sandbox does not get the key's bytes from the copy (EPERM)" \
		'rc=$RC out=$(snip "$OUT") err=$(snip "$ERR")' \
		eval '! has "$(sec icon)" "$OUT" "$ERR" && has "$EPERM_MSG" "$ERR"'
	# Another name for the copy: its directory through /proc/self/root.
	run_in "$USR" cat "/proc/self/root$ICON"
	okl "icon: nor through another path to it" 'rc=$RC out=$(snip "$OUT") err=$(snip "$ERR")' \
		eval '! has "$(sec icon)" "$OUT" && has "$EPERM_MSG" "$ERR"'
	reset_icon
}

check_installed_after() {
	local pid
	put "$UH/.ssh/id_test" 0600 "$(sec after)"
	set_list "~/.ssh/id_test"
	# The service not installed: no /var/lib/AccountsService at launch.
	systemctl stop accounts-daemon.service >/dev/null 2>&1
	mv "$AS_DIR" "$AS_AWAY" || { fail "installed_after: setup" "mv $AS_DIR"; return; }
	rm -f "$T/u/started" "$T/u/go"
	run_in "$USR" sh -c 'touch "$4/started"; while [ ! -e "$4/go" ]; do sleep 0.2; done; '"$SET_AND_READ" \
		sh "$UH/.ssh/id_test" "$UOBJ" "$ICON" "$T/u" &
	pid=$!
	if ! wait_for 30 test -e "$T/u/started"; then
		stop_bg "$pid"
		fail "installed_after: the sandboxed shell started" "$(why)"
	else
		# Installed now: the directories as the package makes them, the service started.
		install -d -m 0755 "$AS_DIR" && install -d -m 0775 "$AS_DIR/icons" &&
			install -d -m 0700 "$AS_DIR/users" && restart_accounts ||
			fail "installed_after: setup" "make $AS_DIR, start accounts-daemon"
		touch "$T/u/go"
		wait "$pid"
		RC=$?
		okl "installed_after: the service installed after the launch copies the key" \
			'rc=$RC err=$(snip "$ERR"); icon: $(ls -l "$ICON" 2>&1)' \
			eval 'copied "$(sec after)"'
		okl "installed_after: the sandbox launched before does not get the key's bytes (EPERM)" \
			'rc=$RC out=$(snip "$OUT") err=$(snip "$ERR")' \
			eval '! has "$(sec after)" "$OUT" "$ERR" && has "$EPERM_MSG" "$ERR"'
	fi
	systemctl stop accounts-daemon.service >/dev/null 2>&1
	rm -rf "$AS_DIR" && mv "$AS_AWAY" "$AS_DIR" && restart_accounts ||
		fail "installed_after: cleanup" "restore $AS_DIR"
}

check_setuid() {
	install -d -m 0755 "$SRV" && printf '%s\n' "$(sec suid)" >"$SRV/secret" && chmod 0600 "$SRV/secret" &&
		install -o root -g root -m 4755 "$(command -v cat)" "$SUID_CAT" || { fail "setuid: setup" "files"; return; }
	set_list "$SRV/secret"
	run_as "$USR" "$SUID_CAT" "$SRV/secret"
	okl "setuid: outside, a set-uid root reader reads a root-only file for the user (control)" \
		'rc=$RC out=$(snip "$OUT") err=$(snip "$ERR")' \
		eval '[ "$RC" -eq 0 ] && has "$(sec suid)" "$OUT"'
	run_in "$USR" "$SUID_CAT" "$SRV/secret"
	okl "setuid: inside, the same reader runs as root in the sandbox and gets EPERM for the listed file" \
		'rc=$RC out=$(snip "$OUT") err=$(snip "$ERR")' \
		eval '[ "$RC" -ne 0 ] && has "$EPERM_MSG" "$ERR" && ! has "$(sec suid)" "$OUT"'
	rm -f "$SUID_CAT"
}

check_legit() {
	set_list "~/.ssh/id_test"
	run_in "$USR" timedatectl status
	okl "legit: timedatectl works inside" '$(why)' eval '[ "$RC" -eq 0 ] && has "Time zone" "$OUT"'
	run_in "$USR" systemctl status --no-pager dbus.service
	okl "legit: systemctl status works inside" '$(why)' eval '[ "$RC" -eq 0 ] && has "dbus.service" "$OUT"'
	run_in "$USR" busctl --system introspect org.freedesktop.Accounts /org/freedesktop/Accounts
	okl "legit: busctl --system introspect works inside" '$(why)' eval '[ "$RC" -eq 0 ] && has FindUserByName "$OUT"'
	run_in "$USR" busctl --system call org.freedesktop.Accounts /org/freedesktop/Accounts \
		org.freedesktop.Accounts FindUserByName s "$USR"
	okl "legit: accountsservice's FindUserByName works inside" '$(why)' eval '[ "$RC" -eq 0 ] && has "$UOBJ" "$OUT"'
	run_in "$USR" busctl --system get-property org.freedesktop.Accounts "$UOBJ" org.freedesktop.Accounts.User UserName
	okl "legit: reading the user's properties at accountsservice works inside" '$(why)' \
		eval '[ "$RC" -eq 0 ] && has "$USR" "$OUT"'
	run_in "$USR" loginctl list-sessions --no-pager
	okl "legit: loginctl works inside" '$(why)' eval '[ "$RC" -eq 0 ]'
	run_in "$USR" busctl --system list --no-pager
	okl "legit: busctl --system list works inside" '$(why)' eval '[ "$RC" -eq 0 ] && has org.freedesktop.Accounts "$OUT"'
}

# ---------------------------------------------------------------- setup

preflight() {
	if [ "$(id -u)" -ne 0 ]; then
		fail "preflight" "must run as root"
		return 1
	fi
	command -v "$LAUNCHER" >/dev/null || { fail "preflight" "$LAUNCHER not installed"; return 1; }
	require_commands busctl timedatectl loginctl systemctl /usr/libexec/accounts-daemon
}

setup() {
	T=$(mktemp -d /tmp/asx-svcs.XXXXXX) && chmod 0755 "$T" || return 1
	OUT=$T/out ERR=$T/err
	TOK=$(head -c 8 /dev/urandom | od -An -tx1 | tr -d ' \n')
	remove_test_user "$USR" || return 1
	useradd -m -c "$GECOS" -s /bin/sh "$USR" || return 1
	UH=$(home_of "$USR")
	chmod 0755 "$UH"
	install -d -o "$USR" -g "$USR" -m 0755 "$T/u"
	[ -d "$AS_DIR" ] || { echo "$AS_DIR is missing: is accountsservice installed?" >&2; return 1; }
	restart_accounts || { echo "accounts-daemon does not answer" >&2; return 1; }
	UOBJ=$(user_object)
	[ -n "$UOBJ" ] || { echo "FindUserByName $USR: $(snip "$T/find.err")" >&2; return 1; }
	ICON=$AS_DIR/icons/$USR
	note "kernel $(uname -r); accountsservice $(dpkg-query -W -f '${Version}' accountsservice 2>&1), polkitd $(dpkg-query -W -f '${Version}' polkitd 2>&1)"
	note "the shipped base list: $(grep -v '^#' /etc/agent-sandbox-exec/denylist | grep . | tr '\n' ' ')"
}

cleanup() {
	[ "${CLEANED:-0}" = 1 ] && return 0
	CLEANED=1
	if [ -d "$AS_AWAY" ]; then
		rm -rf "$AS_DIR" && mv "$AS_AWAY" "$AS_DIR"
	fi
	[ -n "$ICON" ] && rm -f "$ICON" "$AS_DIR/users/$USR"
	rm -f "$SUID_CAT"
	remove_test_user "$USR"
	rm -rf "$SRV"
	[ -n "$T" ] && rm -rf "$T"
	return 0
}

run_suite "setup (test user, accountsservice)"
