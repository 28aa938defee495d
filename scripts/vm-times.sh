#!/bin/bash
# vm-times.sh: the time table of `make vm-test`, from the guests' logs.
#
# Usage: scripts/vm-times.sh STARTED GUEST...
#   STARTED  the run's start (seconds since the epoch)
#   GUEST    a guest name of VM_SUITES (DIST or DIST+KSUITE); its logs are
#            build/vm-GUEST.log and build/vm-GUEST-no-bpf.log, and
#            build/vm-GUEST.times holds "NO_BPF_START START END" (epoch seconds) of its
#            lane (the first guest's lane also boots every kernel without bpf)
#
# For each guest: the image build (when this run built it), the whole VM run
# of the suites, each suite (scripts/guest-suite.sh's "== suite-time:" lines),
# the boot without the bpf LSM; then the wall-clock time of all guests.
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 1 ] || { echo "usage: $0 STARTED GUEST..." >&2; exit 2; }
started=$1
shift
row() { printf '  %-44s %6s s\n' "$1" "$2"; }
echo "== vm-test time table (seconds, wall clock on this host)"
for guest in "$@"; do
	log=build/vm-$guest.log
	echo "$guest:"
	if [ ! -f "$log" ]; then
		echo "  (no log: not run)"
		continue
	fi
	# Each read tolerates a missing file or line (a guest that failed early): a table, not a test.
	built=$(sed -n 's/^vm-test: guest image ready after \([0-9]*\) s.*/\1/p' "$log" | head -n 1) || built=
	[ -z "$built" ] || row "image build" "$built"
	while read -r _ _ suite secs _ loads; do
		row "  $suite" "$secs"
		[ -z "$loads" ] || [[ $loads == "0 full loads"* ]] || printf '      %s\n' "$loads"
	done < <(grep -a '^== suite-time: ' "$log" || true)
	ran=$(sed -n 's/^vm-test: the second boot ran for \([0-9]*\) s in all.*/\1/p' "$log" | tail -n 1) || ran=
	[ -n "$ran" ] || ran=$(sed -n 's/^vm-test: the VM ran for \([0-9]*\) s.*/\1/p' "$log" | tail -n 1) || ran=
	[ -z "$ran" ] || row "VM run (both boots, install, suites)" "$ran"
	nobpf=$(sed -n 's/^vm-test: the VM ran for \([0-9]*\) s.*/\1/p' "build/vm-$guest-no-bpf.log" 2>/dev/null | tail -n 1) || nobpf=
	[ -z "$nobpf" ] || row "boot without the bpf LSM" "$nobpf"
	if [ -f "build/vm-$guest.times" ]; then
		t0='' t2=''
		read -r _ t0 t2 <"build/vm-$guest.times" || true
		[ -z "${t0:-}" ] || [ -z "${t2:-}" ] || row "guest total" "$((t2 - t0))"
	fi
done
row "all guests (wall clock)" "$(($(date +%s) - started))"
