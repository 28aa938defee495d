#!/bin/bash
# Builds the binary package agent-sandbox-exec_<version>_<arch>.deb from the
# release binary, by staging the installed tree and running dpkg-deb.
#
# Usage: scripts/build-deb.sh [BINARY] [OUTDIR]
#   BINARY  the built binary (default: target/release/agent-sandbox-exec)
#   OUTDIR  where the .deb goes (default: build); the staged tree is left in
#           OUTDIR/stage/ for inspection
#
# The version comes from debian/changelog and must equal the one in
# Cargo.toml. Control fields come from debian/control through dpkg-gencontrol
# (Depends via dpkg-shlibdeps, Installed-Size computed). The output is
# reproducible: SOURCE_DATE_EPOCH (default: the date of the latest
# debian/changelog entry) sets every timestamp, gzip runs with -n, dpkg-deb
# sorts the entries and owns them by root, and compresses with one thread.
set -euo pipefail

die() {
	echo "build-deb.sh: $*" >&2
	exit 1
}

cd "$(dirname "$0")/.."

PACKAGE=agent-sandbox-exec
BINARY=${1:-target/release/agent-sandbox-exec}
OUTDIR=${2:-build}

for tool in dpkg-parsechangelog dpkg-shlibdeps dpkg-gencontrol dpkg-deb strip gzip; do
	command -v "$tool" >/dev/null || die "$tool not found; run 'make deps'"
done
[ -f "$BINARY" ] || die "$BINARY not found; run 'make build' first"

# The version: debian/changelog and Cargo.toml must agree.
deb_version=$(dpkg-parsechangelog -S Version)
cargo_version=$(awk '
	/^\[/ { in_package = ($0 == "[package]") }
	in_package && /^version[[:space:]]*=/ {
		sub(/^version[[:space:]]*=[[:space:]]*"/, ""); sub(/".*$/, ""); print; exit
	}' Cargo.toml)
[ -n "$cargo_version" ] || die "no version in the [package] table of Cargo.toml"
[ "$deb_version" = "$cargo_version" ] ||
	die "debian/changelog has version $deb_version but Cargo.toml has $cargo_version; add a debian/changelog entry (dch -v $cargo_version) or fix Cargo.toml"

SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$(dpkg-parsechangelog -S Timestamp)}
export SOURCE_DATE_EPOCH
# Same bytes whatever the caller's locale, time zone and umask.
export LC_ALL=C TZ=UTC
umask 022

stage="$OUTDIR/stage/$PACKAGE"
work="$OUTDIR/stage/work"
rm -rf "$OUTDIR/stage"
mkdir -p "$stage" "$work"
chmod 0755 "$stage"

# The binary, stripped as dh_strip does, and the daemon's name for it.
install -D -m 0755 "$BINARY" "$stage/usr/bin/$PACKAGE"
strip --remove-section=.comment --remove-section=.note "$stage/usr/bin/$PACKAGE"
install -d -m 0755 "$stage/usr/sbin"
ln -s "../bin/$PACKAGE" "$stage/usr/sbin/${PACKAGE}d"

install -D -m 0644 packaging/agent-sandbox-execd.service \
	"$stage/lib/systemd/system/agent-sandbox-execd.service"
install -D -m 0644 packaging/denylist "$stage/etc/$PACKAGE/denylist"
# The shipped defaults every user's list starts with (a conffile, like the base list).
install -D -m 0644 packaging/defaults "$stage/etc/$PACKAGE/defaults"
# The catalogue of secret locations, one list per group, for `include`
# lines: updated with the package (not conffiles; a user copies a line to
# change it).
install -d -m 0755 "$stage/usr/share/$PACKAGE/catalog"
for group in packaging/catalog/*; do
	install -m 0644 "$group" "$stage/usr/share/$PACKAGE/catalog/"
done

# Documentation. A native package (no Debian revision) names its changelog
# changelog.gz (Policy 12.7; lintian: wrong-name-for-changelog-of-native-package).
doc="$stage/usr/share/doc/$PACKAGE"
install -D -m 0644 debian/copyright "$doc/copyright"
case "$deb_version" in
*-*) changelog=changelog.Debian.gz ;;
*) changelog=changelog.gz ;;
esac
gzip -9n <debian/changelog >"$doc/$changelog"
chmod 0644 "$doc/$changelog"
install -D -m 0644 scripts/denylist.example "$doc/examples/denylist.example"
# The README and docs/: how it works, administration, the threat model, the
# bypass catalogue and the coding agents' hooks.
gzip -9n <README.md >"$doc/README.md.gz"
chmod 0644 "$doc/README.md.gz"
for f in DESIGN ADMINISTRATION THREAT_MODEL BYPASS_CATALOG AGENT_HOOKS; do
	gzip -9n <"docs/$f.md" >"$doc/$f.md.gz"
	chmod 0644 "$doc/$f.md.gz"
done

for page in packaging/man/*.[1-8]; do
	name=$(basename "$page")
	section=${name##*.}
	install -d -m 0755 "$stage/usr/share/man/man$section"
	gzip -9n <"$page" >"$stage/usr/share/man/man$section/$name.gz"
	chmod 0644 "$stage/usr/share/man/man$section/$name.gz"
done

# Control area: maintainer scripts, conffiles, md5sums (conffiles excluded, as
# dh_md5sums does) and the control file.
install -d -m 0755 "$stage/DEBIAN"
for script in postinst prerm postrm; do
	install -m 0755 "debian/$script" "$stage/DEBIAN/$script"
done
(cd "$stage" && find etc -type f | sed 's|^|/|' | sort) >"$stage/DEBIAN/conffiles"
chmod 0644 "$stage/DEBIAN/conffiles"
(cd "$stage" && find . -path ./DEBIAN -prune -o -path ./etc -prune -o -type f -print |
	sed 's|^\./||' | sort | xargs -r md5sum) >"$stage/DEBIAN/md5sums"
chmod 0644 "$stage/DEBIAN/md5sums"

# dpkg-shlibdeps finds the shared libraries the binary needs and the packages
# that provide them; dpkg-gencontrol fills debian/control's binary stanza with
# those, the version and the architecture, and computes Installed-Size.
substvars="$work/substvars"
echo "misc:Depends=" >"$substvars"
dpkg-shlibdeps -T"$substvars" -e"$stage/usr/bin/$PACKAGE"
dpkg-gencontrol -p"$PACKAGE" -T"$substvars" -f"$work/files" -P"$stage"
chmod 0644 "$stage/DEBIAN/control"
arch=$(sed -n "s/^Architecture: //p" "$stage/DEBIAN/control")

# Every timestamp in the tree is the source date (dpkg-deb also clamps to it).
find "$stage" -exec touch --no-dereference --date="@$SOURCE_DATE_EPOCH" {} +

deb="$OUTDIR/${PACKAGE}_${deb_version}_${arch}.deb"
rm -f "$deb"
dpkg-deb --root-owner-group -Zxz --threads-max=1 --build "$stage" "$deb" >/dev/null
echo "$deb"
