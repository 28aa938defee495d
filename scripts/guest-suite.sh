#!/bin/bash
# Guest entry point of `make vm-test` (runs as root in the QEMU guest, cwd =
# the share): the operator harness scripts/test.sh, the file system suite
# scripts/test-fs.sh, the directory-entry suite scripts/test-dirs.sh, then the
# package lifecycle suite
# scripts/test-lifecycle.sh, which ends by purging the package, and last the
# first half of scripts/test-reboot.sh (it installs the package again; the
# Makefile's vm-test boots the guest a second time for the other half).
# Prints `systemd-analyze security` of the unit for the record first.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)

echo "== systemd-analyze security agent-sandbox-execd.service"
systemd-analyze security --no-pager agent-sandbox-execd.service 2>&1 | tail -n 60 || true

rc=0
echo "== scripts/test.sh"
bash "$here/test.sh" || rc=1
echo "== scripts/test-fs.sh"
bash "$here/test-fs.sh" || rc=1
echo "== scripts/test-dirs.sh"
bash "$here/test-dirs.sh" || rc=1
echo "== scripts/test-lifecycle.sh"
bash "$here/test-lifecycle.sh" || rc=1
echo "== scripts/test-reboot.sh prepare (checked after a reboot)"
bash "$here/test-reboot.sh" prepare || rc=1
if [ "$rc" = 0 ]; then
	echo "GUEST SUITE: ALL PASS"
else
	echo "GUEST SUITE: FAILED"
fi
exit "$rc"
