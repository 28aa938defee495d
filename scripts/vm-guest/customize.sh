#!/bin/sh
# mmdebstrap --customize-hook: bakes the test runner into the guest root file system ($1).
set -eu
root=$1
here=$(dirname "$0")

install -m 0755 "$here/vm-runner" "$root/usr/local/sbin/vm-runner"
install -m 0644 "$here/vm-runner.service" "$root/etc/systemd/system/vm-runner.service"
install -m 0644 "$here/modprobe-blacklist.conf" "$root/etc/modprobe.d/vm-test-blacklist.conf"
mkdir -p "$root/mnt/vmshare"
chroot "$root" systemctl enable vm-runner.service

# Timers that would compete with the test for the dpkg lock or the CPU, a boot-time e2scrub
# check (seconds under TCG, useless on a throwaway snapshot), and the serial login prompt (no one
# logs in; it only clutters the console log).
chroot "$root" systemctl mask apt-daily.timer apt-daily-upgrade.timer e2scrub_all.timer \
    e2scrub_reap.service fstrim.timer serial-getty@ttyS0.service

echo vmtest >"$root/etc/hostname"
printf '127.0.0.1\tlocalhost\n127.0.1.1\tvmtest\n' >"$root/etc/hosts"
# The root file system comes from the kernel command line (root=LABEL=... rw); an empty fstab
# keeps systemd from looking for anything else.
: >"$root/etc/fstab"
