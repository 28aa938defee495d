#!/bin/sh
# mmdebstrap --essential-hook: runs before linux-image-amd64 and initramfs-tools are installed,
# so the initrd they build is already the small one (no second update-initramfs run).
set -eu
root=$1
here=$(dirname "$0")
mkdir -p "$root/etc/initramfs-tools/conf.d" "$root/etc/initramfs-tools/hooks"
install -m 0644 "$here/initramfs.conf" "$root/etc/initramfs-tools/conf.d/vm-test.conf"
install -m 0755 "$here/initramfs-hook" "$root/etc/initramfs-tools/hooks/vm-test"
