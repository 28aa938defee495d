#!/bin/bash
# Guest entry point of `make vm-test` (runs as root in the QEMU guest, cwd =
# the share): each suite of SUITES in turn, then the first half of
# scripts/test-reboot.sh (it installs the package again; the Makefile's
# vm-test boots the guest a second time for the other half). The suites: the
# operator harness test.sh, file systems test-fs.sh, directory entries
# test-dirs.sh, the reuse of a directory entry's scan test-dirscan.sh, mounts
# below directory entries cloned in a user namespace test-mounts.sh, the user's
# daemons and passed descriptors test-doors.sh, the
# user's other processes and terminal test-procs.sh, system services that read a
# file for the caller test-services.sh, --status/--check/the
# doctor test-status.sh, denial events test-events.sh, and last the package
# lifecycle test-lifecycle.sh,
# which ends by purging the package. A suite that is not on the share is a
# failure, not a skip. Prints `systemd-analyze security` of the unit for the
# record first.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
SUITES=(test.sh test-fs.sh test-dirs.sh test-dirscan.sh test-mounts.sh test-doors.sh test-procs.sh test-services.sh test-status.sh test-events.sh test-writes.sh test-patterns.sh test-lifecycle.sh)

echo "== systemd-analyze security agent-sandbox-execd.service"
systemd-analyze security --no-pager agent-sandbox-execd.service 2>&1 | tail -n 60 || true

# The shipped defaults (every user's list starts with them: the recommended catalogue) are
# set aside while the suites run: each suite tests the lists it writes. test-patterns.sh
# (check_defaults) puts them back for its own checks of what a fresh install protects.
defaults=/etc/agent-sandbox-exec/defaults
[ -f "$defaults" ] && mv "$defaults" /var/tmp/agent-sandbox-exec-defaults.aside

# full_loads T: "N full loads (S s)", the daemon's loads since epoch T by its
# journal lines "BPF programs loaded (verified) in MS ms" (adoptions excluded)
full_loads() {
	journalctl -u agent-sandbox-execd --since "@$1" --no-pager -o cat 2>/dev/null |
		sed -n 's/.*BPF programs loaded (verified) in \([0-9]*\) ms.*/\1/p' |
		awk '{n++; ms += $1} END {printf "%d full load%s (%d s)", n, n == 1 ? "" : "s", ms / 1000}'
}

rc=0
for suite in "${SUITES[@]}"; do
	echo "== scripts/$suite"
	if [ ! -f "$here/$suite" ]; then
		echo "FAIL: $suite is not on the share"
		rc=1
		continue
	fi
	started=$SECONDS since=$(date +%s)
	bash "$here/$suite" || rc=1
	# Read by scripts/vm-times.sh for the time table of `make vm-test`: the
	# suite's time and the daemon's full loads in it (each verifies every
	# program: the costliest thing a suite does on 6.12).
	echo "== suite-time: $suite $((SECONDS - started)) s, $(full_loads "$since")"
done
echo "== scripts/test-reboot.sh prepare (checked after a reboot)"
bash "$here/test-reboot.sh" prepare || rc=1
if [ "$rc" = 0 ]; then
	echo "GUEST SUITE: ALL PASS"
else
	echo "GUEST SUITE: FAILED"
fi
exit "$rc"
