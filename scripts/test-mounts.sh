#!/bin/bash
# shellcheck disable=SC2016,SC2317,SC2034,SC2088,SC2015
# (SC2016: the single-quoted sh -c programs expand their own variables; SC2317: the check_* functions
#  are called through run_check; SC2034: test-lib.sh reads the counters; SC2088: ~ is list text;
#  SC2015: A && B || fail reports a failure of any step)
#
# scripts/test-mounts.sh - filesystems mounted below a directory entry, cloned
# by the agent in a user namespace (GitHub issue 16, docs/BYPASS_CATALOG.md
# "A filesystem below a directory entry, bind-mounted again by the agent").
#
# Run as root in a throwaway guest where the package is installed and the
# daemon runs (the QEMU guest of `make vm-test`). Root mounts a tmpfs at
# ~/.ssh/keys and bind-mounts /srv/asx-keys at ~/.ssh/bound; the test user's
# list is `~/.ssh/`; inside the sandbox the agent runs `unshare -Urm` and
# bind-mounts those filesystems elsewhere (a clone whose mount point is not
# below ~/.ssh).
#
# Checks (in this order; names for ASX_MOUNTS_ONLY / ASX_MOUNTS_SKIP):
#   userns        unshare -Urm works inside the sandbox (the other checks need it)
#   clone_tmpfs   a key on the tmpfs at ~/.ssh/keys: denied by its path, and through
#                 the agent's bind mount of ~/.ssh/keys in a user namespace
#   clone_bind    a key in /srv/asx-keys, bind-mounted at ~/.ssh/bound: denied through
#                 the agent's clone of ~/.ssh/bound, and by its /srv path (the bind
#                 mount puts that directory below the entry)
#   control       an unlisted tmpfs elsewhere, cloned the same way, stays readable
#   exception     a tmpfs at ~/.ssh/pubmnt with !~/.ssh/pubmnt/ stays readable
#   unreadable    a mount point below ~/.ssh that the user cannot reach: the launch
#                 warns, naming it
#
# Output: "PASS: <what>", "FAIL: <what> (<detail>)", "SKIP: <why>", notes ("# ...");
# then a count line and "ALL PASS" (exit 0) or "<n> FAILED" (exit 1).
#
# Environment:
#   ASX_MOUNTS_ONLY="name ..."  run only these checks;  ASX_MOUNTS_SKIP="name ..."  skip these

set -u -o pipefail
umask 022
export LC_ALL=C
HERE=$(cd "$(dirname "$0")" && pwd) || exit 1
cd / || exit 1

readonly SUITE=test-mounts.sh
readonly LAUNCHER=agent-sandbox-exec
readonly USR=asx-mnts
readonly GECOS="agent-sandbox-exec mounts test user"
readonly EPERM_MSG="Operation not permitted"
readonly HOME_LIST_REL=.config/agent-sandbox-exec/denylist
readonly SRV=/srv/asx-keys
readonly OPEN=/srv/asx-open

CHECKS=(userns clone_tmpfs clone_bind control exception unreadable)

PASS_N=0 FAIL_N=0 SKIP_N=0

# shellcheck source=scripts/test-lib.sh
. "$HERE/test-lib.sh" || exit 1
FILTER=ASX_MOUNTS # run_check: ASX_MOUNTS_ONLY / ASX_MOUNTS_SKIP choose the checks
CMD_TIMEOUT=60
T="" OUT="" ERR="" RC=0 UH="" TOK="" USERNS=0
MOUNTS=()

sec() { printf 'asx-secret-%s-%s' "$1" "$TOK"; }

# put FILE MODE TEXT: FILE (and its directories) owned by the test user
put() {
	install -d -o "$USR" -g "$USR" -m 0755 "$(dirname "$1")" && printf '%s\n' "$3" >"$1" &&
		chown "$USR:$USR" "$1" && chmod "$2" "$1"
}

# clone SRC: inside the sandbox, in a new user + mount namespace, bind-mount
# SRC at a fresh directory of the user's and cat its file `secret`
clone() {
	local dst=$T/u/x$((${#MOUNTS[@]} + RANDOM))
	run_in "$USR" sh -c 'mkdir -p "$2" && exec unshare -Urm sh -c '\''mount --bind "$1" "$2" && cat "$2/secret"'\'' sh "$1" "$2"' \
		sh "$1" "$dst"
}

# need_userns WHAT: 0 if unshare -Urm worked in check userns, else one FAIL line saying so
need_userns() {
	[ "$USERNS" = 1 ] && return 0
	fail "$1" "cannot run: unshare -Urm fails in the sandbox (see the userns check)"
	return 1
}

# ---------------------------------------------------------------- checks

check_userns() {
	set_list "~/.ssh/"
	run_in "$USR" unshare -Urm sh -c 'id -u; mount -t tmpfs none /mnt && echo mounted'
	if [ "$RC" -eq 0 ] && has mounted "$OUT"; then
		USERNS=1
		pass "userns: unshare -Urm and a mount work inside the sandbox"
	else
		fail "userns: unshare -Urm and a mount work inside the sandbox" \
			"$(why); kernel.unprivileged_userns_clone=$(sysctl -n kernel.unprivileged_userns_clone 2>&1) user.max_user_namespaces=$(sysctl -n user.max_user_namespaces 2>&1)"
	fi
}

check_clone_tmpfs() {
	mnt "$UH/.ssh/keys" -t tmpfs -o size=4m,mode=0755 asx-mnts-keys || { fail "clone_tmpfs: setup" "mount"; return; }
	put "$UH/.ssh/keys/secret" 0600 "$(sec tmpfs)"
	set_list "~/.ssh/"
	run_in "$USR" cat "$UH/.ssh/keys/secret"
	okl "clone_tmpfs: the key on the tmpfs at ~/.ssh/keys is denied by its path" 'rc=$RC out=$(snip "$OUT") err=$(snip "$ERR")' \
		eval '[ "$RC" -ne 0 ] && has "$EPERM_MSG" "$ERR" && ! has "$(sec tmpfs)" "$OUT"'
	need_userns "clone_tmpfs: through a bind mount the agent makes in a user namespace" || return
	clone "$UH/.ssh/keys"
	okl "clone_tmpfs: denied through a bind mount the agent makes in a user namespace" 'rc=$RC out=$(snip "$OUT") err=$(snip "$ERR")' \
		eval '[ "$RC" -ne 0 ] && has "$EPERM_MSG" "$ERR" && ! has "$(sec tmpfs)" "$OUT"'
}

check_clone_bind() {
	install -d -m 0755 "$SRV" && put "$SRV/secret" 0600 "$(sec bind)" &&
		mnt "$UH/.ssh/bound" --bind "$SRV" || { fail "clone_bind: setup" "bind mount"; return; }
	set_list "~/.ssh/"
	run_in "$USR" cat "$UH/.ssh/bound/secret"
	okl "clone_bind: the key of $SRV bound at ~/.ssh/bound is denied by that path" 'rc=$RC out=$(snip "$OUT") err=$(snip "$ERR")' \
		eval '[ "$RC" -ne 0 ] && has "$EPERM_MSG" "$ERR" && ! has "$(sec bind)" "$OUT"'
	run_in "$USR" cat "$SRV/secret"
	okl "clone_bind: it is denied by its $SRV path too" 'rc=$RC out=$(snip "$OUT") err=$(snip "$ERR")' \
		eval '[ "$RC" -ne 0 ] && has "$EPERM_MSG" "$ERR" && ! has "$(sec bind)" "$OUT"'
	need_userns "clone_bind: through the agent's clone of ~/.ssh/bound" || return
	clone "$UH/.ssh/bound"
	okl "clone_bind: denied through the agent's clone of ~/.ssh/bound in a user namespace" 'rc=$RC out=$(snip "$OUT") err=$(snip "$ERR")' \
		eval '[ "$RC" -ne 0 ] && has "$EPERM_MSG" "$ERR" && ! has "$(sec bind)" "$OUT"'
}

check_control() {
	mnt "$OPEN" -t tmpfs -o size=4m,mode=0755 asx-mnts-open || { fail "control: setup" "mount"; return; }
	put "$OPEN/secret" 0600 "open-$TOK"
	set_list "~/.ssh/"
	need_userns "control: an unlisted tmpfs cloned in a user namespace" || return
	clone "$OPEN"
	okl "control: an unlisted tmpfs cloned in a user namespace stays readable" 'rc=$RC out=$(snip "$OUT") err=$(snip "$ERR")' \
		eval '[ "$RC" -eq 0 ] && has "open-$TOK" "$OUT"'
}

check_exception() {
	mnt "$UH/.ssh/pubmnt" -t tmpfs -o size=4m,mode=0755 asx-mnts-pub || { fail "exception: setup" "mount"; return; }
	put "$UH/.ssh/pubmnt/secret" 0644 "pub-$TOK"
	set_list "~/.ssh/" "!~/.ssh/pubmnt/"
	run_in "$USR" cat "$UH/.ssh/pubmnt/secret"
	okl "exception: a tmpfs at ~/.ssh/pubmnt with !~/.ssh/pubmnt/ stays readable" 'rc=$RC out=$(snip "$OUT") err=$(snip "$ERR")' \
		eval '[ "$RC" -eq 0 ] && has "pub-$TOK" "$OUT"'
	need_userns "exception: and through a clone" || return
	clone "$UH/.ssh/pubmnt"
	okl "exception: and through the agent's clone of it" 'rc=$RC out=$(snip "$OUT") err=$(snip "$ERR")' \
		eval '[ "$RC" -eq 0 ] && has "pub-$TOK" "$OUT"'
}

check_unreadable() {
	install -d -m 0700 -o root -g root "$UH/.ssh/locked" &&
		mnt "$UH/.ssh/locked/m" -t tmpfs -o size=1m asx-mnts-locked || { fail "unreadable: setup" "mount"; return; }
	set_list "~/.ssh/"
	run_in "$USR" true
	okl "unreadable: the launch warns, naming a mount point below ~/.ssh it cannot reach" 'rc=$RC err=$(snip "$ERR")' \
		eval '[ "$RC" -eq 0 ] && has "$UH/.ssh/locked/m" "$ERR"'
	umount "$UH/.ssh/locked/m" && rmdir "$UH/.ssh/locked/m" "$UH/.ssh/locked"
}

# ---------------------------------------------------------------- setup

preflight() {
	if [ "$(id -u)" -ne 0 ]; then
		fail "preflight" "must run as root"
		return 1
	fi
	command -v "$LAUNCHER" >/dev/null || { fail "preflight" "$LAUNCHER not installed"; return 1; }
	require_commands unshare mount
}

setup() {
	T=$(mktemp -d /tmp/asx-mnts.XXXXXX) && chmod 0755 "$T" || return 1
	OUT=$T/out ERR=$T/err
	TOK=$(head -c 8 /dev/urandom | od -An -tx1 | tr -d ' \n')
	remove_test_user "$USR" || return 1
	useradd -m -c "$GECOS" -s /bin/sh "$USR" || return 1
	UH=$(home_of "$USR")
	chmod 0755 "$UH"
	install -d -o "$USR" -g "$USR" -m 0755 "$UH/.ssh" "$T/u"
}

cleanup() {
	local i
	[ "${CLEANED:-0}" = 1 ] && return 0
	CLEANED=1
	for ((i = ${#MOUNTS[@]} - 1; i >= 0; i--)); do umount -l "${MOUNTS[i]}" 2>/dev/null; done
	remove_test_user "$USR"
	rm -rf "$SRV" "$OPEN"
	[ -n "$T" ] && rm -rf "$T"
	return 0
}

run_suite "setup (test user, directories)"
