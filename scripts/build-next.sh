#!/bin/bash
# Builds "version N+1" of the package for the upgrade test: the same source
# with the version bumped (+next1) and the BPF map-layout version bumped by
# one, so an upgrade also exercises the layout migration (pins move from
# v<n> to v<n+1> without a gap).
#
# Usage: scripts/build-next.sh [OUTDIR]   (default build/next)
# The source copy is the working tree's tracked files; cargo builds it in
# build/next-target.
set -euo pipefail
cd "$(dirname "$0")/.."

OUTDIR=${1:-build/next}
src=build/next-src
CARGO=${CARGO:-cargo}

rm -rf "$src" "$OUTDIR"
mkdir -p "$src" "$OUTDIR"
git ls-files -z | xargs -0 cp --parents -t "$src"

version=$(awk '/^\[/ { p = ($0 == "[package]") } p && /^version[ \t]*=/ { gsub(/^version[ \t]*=[ \t]*"|".*$/, ""); print; exit }' Cargo.toml)
next="$version+next1"
layout=$(awk '$1 == "#define" && $2 == "AGENT_SANDBOX_LAYOUT_VERSION" { print $3 }' src/bpf/agent_sandbox.h)
[ -n "$layout" ] || { echo "build-next.sh: no AGENT_SANDBOX_LAYOUT_VERSION in src/bpf/agent_sandbox.h" >&2; exit 1; }

# Cargo.toml and Cargo.lock name the crate's version; the lock must agree for --locked.
sed -i "0,/^version = \"$version\"/s//version = \"$next\"/" "$src/Cargo.toml"
awk -v old="$version" -v new="$next" '
	$0 == "name = \"agent-sandbox-exec\"" { hit = 1; print; next }
	hit && $0 == "version = \"" old "\"" { print "version = \"" new "\""; hit = 0; next }
	{ hit = 0; print }' Cargo.lock >"$src/Cargo.lock"
sed -i "s/^#define AGENT_SANDBOX_LAYOUT_VERSION $layout\$/#define AGENT_SANDBOX_LAYOUT_VERSION $((layout + 1))/" \
	"$src/src/bpf/agent_sandbox.h"
grep -q "^#define AGENT_SANDBOX_LAYOUT_VERSION $((layout + 1))\$" "$src/src/bpf/agent_sandbox.h" \
	|| { echo "build-next.sh: could not raise the layout version in the copy's agent_sandbox.h" >&2; exit 1; }
{
	printf 'agent-sandbox-exec (%s) unstable; urgency=medium\n\n' "$next"
	printf '  * Test build for the upgrade test: map layout %s.\n\n' "$((layout + 1))"
	printf ' -- %s  %s\n\n' "$(dpkg-parsechangelog -S Maintainer)" "$(dpkg-parsechangelog -S Date)"
	cat debian/changelog
} >"$src/debian/changelog"

# Seeded (a copy) from the main build's target directory when there is none yet: the
# dependencies' artifacts are then fresh for cargo, and only this crate is compiled again
# (minutes less on a fresh clone).
main_target=${CARGO_TARGET_DIR:-target}
if [ ! -d build/next-target ] && [ -d "$main_target/release" ]; then
	cp -a --reflink=auto "$main_target" build/next-target 2>/dev/null || rm -rf build/next-target
fi
(cd "$src" && CARGO_TARGET_DIR="$PWD/../next-target" "$CARGO" build --release --locked)
(cd "$src" && scripts/build-deb.sh ../next-target/release/agent-sandbox-exec "../../$OUTDIR")
ls "$OUTDIR"/*.deb
