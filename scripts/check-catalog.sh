#!/bin/bash
# scripts/check-catalog.sh - `make test`'s check of docs/BYPASS_CATALOG.md.
#
# Every entry (a "### " heading) must have a "Status:" line saying `closed` or
# `open`. A closed entry must name at least one test on its "Tests:" line, as
# `FILE::NAME` in backticks, and each must exist: FILE is in the repository and
#   - a shell suite (scripts/*.sh) defines the function NAME, and if NAME is
#     check_<x>, <x> is in the suite's CHECKS list (so the check really runs);
#   - a Rust file (src/*.rs) defines `fn NAME` (a unit test).
# An open entry must have a "Reason:" and a "Mitigation:" line.
#
# Usage: scripts/check-catalog.sh [CATALOG]   (default docs/BYPASS_CATALOG.md)
# Exit status: 0 if every entry holds, 1 otherwise (one line per problem).
set -u -o pipefail
cd "$(dirname "$0")/.." || exit 1
catalog=${1:-docs/BYPASS_CATALOG.md}
[ -f "$catalog" ] || { echo "check-catalog: $catalog is missing" >&2; exit 1; }

problems=0 entries=0 closed=0
problem() { echo "check-catalog: $catalog: $1" >&2; problems=$((problems + 1)); }

# test_exists FILE NAME: 0 if FILE defines NAME (see above), else a reason on stdout
test_exists() {
	local file=$1 name=$2
	[ -f "$file" ] || { echo "$file does not exist"; return 1; }
	case $file in
	*.sh)
		grep -qE "^${name}\(\) *\{" "$file" || { echo "$file defines no function $name"; return 1; }
		if [[ $name == check_* ]] && grep -q '^CHECKS=(' "$file"; then
			# From CHECKS=( to the first line holding ")"; grep reads all of it
			# (with -q it could exit first, and pipefail would take sed's SIGPIPE
			# for a failure).
			awk '/^CHECKS=\(/ { on = 1 } on { print } on && /\)/ { exit }' "$file" |
				tr -s ' \t()' '\n' | grep -x "${name#check_}" >/dev/null ||
				{ echo "$name is not in the CHECKS list of $file, so it never runs"; return 1; }
		fi
		;;
	*.rs)
		grep -qE "fn ${name}\(" "$file" || { echo "$file defines no fn $name"; return 1; }
		;;
	*) echo "$file is neither a shell suite nor a Rust file"; return 1 ;;
	esac
}

check_entry() {
	local title=$1 status=$2 tests=$3 reason=$4 mitigation=$5 ref file name why n=0
	[ -n "$title" ] || return 0
	entries=$((entries + 1))
	case $status in
	closed)
		closed=$((closed + 1))
		# shellcheck disable=SC2016 # backquotes, not an expansion
		for ref in $(grep -oE '`[^`]+::[A-Za-z0-9_]+`' <<<"$tests" | tr -d '`'); do
			n=$((n + 1))
			file=${ref%%::*} name=${ref##*::}
			why=$(test_exists "$file" "$name") || problem "\"$title\": $why"
		done
		[ "$n" -gt 0 ] || problem "\"$title\" is closed but its Tests: line names no \`FILE::NAME\`"
		;;
	open)
		[ -n "$reason" ] || problem "\"$title\" is open but has no Reason: line"
		[ -n "$mitigation" ] || problem "\"$title\" is open but has no Mitigation: line"
		;;
	*) problem "\"$title\": Status: must be closed or open, not '${status:-<missing>}'" ;;
	esac
}

# A "Tests:" item goes on over the indented lines below it (in_tests).
title="" status="" tests="" reason="" mitigation="" in_tests=0
while IFS= read -r line || [ -n "$line" ]; do
	if [ "$in_tests" = 1 ] && [[ $line == [[:space:]]* ]]; then
		tests+=" $line"
		continue
	fi
	in_tests=0
	case $line in
	'### '*)
		check_entry "$title" "$status" "$tests" "$reason" "$mitigation"
		title=${line#'### '} status="" tests="" reason="" mitigation=""
		;;
	'- Status: '*) status=$(awk '{ print $3 }' <<<"$line" | tr -d '*`.,') ;;
	'- Tests: '*) tests=${line#'- Tests: '} in_tests=1 ;;
	'- Reason: '*) reason=${line#'- Reason: '} ;;
	'- Mitigation: '*) mitigation=${line#'- Mitigation: '} ;;
	esac
done <"$catalog"
check_entry "$title" "$status" "$tests" "$reason" "$mitigation"

[ "$entries" -gt 0 ] || problem "no entries (### headings)"
if [ "$problems" -gt 0 ]; then
	echo "check-catalog: $problems problem(s) in $catalog" >&2
	exit 1
fi
echo "check-catalog: $entries entries, $closed closed, each closed one with existing tests"
