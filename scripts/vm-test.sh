#!/usr/bin/env bash
# vm-test.sh: run a test script as root inside a throwaway Debian VM with a .deb installed.
#
# The host kernel cannot load BPF LSM programs, so enforcement is tested in a QEMU (TCG) guest:
# a cached Debian image (built once with mmdebstrap, reused while its recipe is unchanged) is
# booted with a copy-on-write snapshot of its disk, the first DEB is installed in the guest, then
# GUEST_SCRIPT runs there as root. Its output is streamed here and its exit status is ours.
#
# Usage: scripts/vm-test.sh [OPTIONS] [DEB...] -- GUEST_SCRIPT [ARGS...]
#
#   --suite SUITE      Debian suite of the guest: bookworm (default) or trixie
#   --kernel-suite KSUITE
#                      install the guest's kernel (linux-image-amd64) from the apt suite KSUITE
#                      instead of SUITE, e.g. trixie-backports (the 7.x line on Debian 13) or
#                      unstable; its archive is added to the image's sources for that package only
#   --timeout SECONDS  bound on the whole VM run: boot, install, script, power-off (default 900)
#   --keep-share DIR   use DIR (new or empty) as the share and keep it afterwards: the script's
#                      results plus serial.log (the guest console) are left there
#   --add PATH         also copy PATH (file or directory) into the share root; repeatable
#   --second-boot SCRIPT
#                      after GUEST_SCRIPT exited 0, boot the guest a second time from the same disk
#                      and run SCRIPT there (as root, cwd = the share, no arguments, nothing
#                      installed; the share keeps what the first boot left). For this the disk is
#                      a writable qcow2 overlay of the cached image in the run's work directory
#                      (needs qemu-img, from qemu-utils) instead of snapshot=on. --timeout bounds
#                      both boots together; the exit status is the first failing script's
#   --cpus N           vCPUs under multi-threaded TCG (default 2); 1 runs the guest on one vCPU,
#                      where no other vCPU executes kernel text while the kernel patches it (see
#                      the Makefile's vm-test target)
#   --cpu-model MODEL  QEMU's -cpu (default max: every feature TCG emulates). qemu64 lacks AVX and
#                      the like, so the guest's glibc takes its SSE2 string functions, which TCG
#                      runs faster (the suites' model; the benchmarks keep max)
#   --append ARGS      extra kernel command line arguments (e.g. `lsm=lockdown,capability` for a
#                      guest without the bpf LSM); appended after the harness's own
#   --icount           deterministic timing: one vCPU under single-threaded TCG with a guest clock
#                      that counts executed instructions (1 instruction = 1 virtual ns; an idle
#                      guest jumps to its next timer), so timings repeat to about 0.1 %; suits
#                      per-syscall ratios, not cache or I/O figures. Without it: 2 vCPUs under
#                      multi-threaded TCG, guest clock = host wall clock
#
# In the guest: the first DEB is installed with apt-get (offline) before the script runs; every
# DEB is on the share for the script (e.g. for an upgrade test). The script runs with bash, as
# root, cwd = the share, stdin = /dev/null, and in its environment:
#   VM_SHARE   mount point of the share (host files, writable; results/ is the harness's)
#   VM_DEBS    absolute guest paths of all DEBs, space-separated, in command-line order
#
# Exit status: the guest script's, or 124 if the run timed out, 125 if the VM or the harness
# failed (one line on stderr says why, followed by the tail of the guest console), 2 on bad usage.
#
# Environment: AGENT_SANDBOX_VM_CACHE (default /var/cache/agent-sandbox-exec-vm) holds the images.
# Building an image needs root (mmdebstrap --mode=root), network access to the Debian archive and
# about 1.5 GB in the cache (while building); booting one does not need root.
set -euo pipefail

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
readonly SCRIPT_DIR
readonly GUEST_DIR=$SCRIPT_DIR/vm-guest
readonly CACHE_ROOT=${AGENT_SANDBOX_VM_CACHE:-/var/cache/agent-sandbox-exec-vm}
readonly ROOT_LABEL=vmtest-root     # file system label of the guest root (root=LABEL=...)
readonly SHARE_TAG=vmshare          # 9p mount tag; vm-guest/vm-runner mounts it
readonly BUILD_TIMEOUT=1800         # bound on building an image (not part of --timeout)
readonly EXIT_TIMEOUT=124 EXIT_FAILURE=125 EXIT_USAGE=2

suite=bookworm
kernel_suite=
timeout_s=900
keep_share=
icount=
cpus=2
cpu_model=max
second_boot=
append_args=
debs=()
adds=()
guest_script=
guest_args=()

# Temporary state, removed by cleanup() (build_dir and build_pid by abort_build()).
work=
qemu_pid=
build_dir=
build_pid=

log() { printf 'vm-test: %s\n' "$*" >&2; }

# A one-line reason, then exit.
die() {
    log "$1"
    exit "${2:-$EXIT_FAILURE}"
}

usage() {
    sed -n '/^# Usage:/,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "${BASH_SOURCE[0]}"
}

# Die naming the Debian packages to install if a tool is missing; arguments are TOOL:PACKAGE.
require_tools() {
    local pair missing=()
    for pair in "$@"; do
        command -v "${pair%%:*}" >/dev/null || missing+=("${pair#*:}")
    done
    [ "${#missing[@]}" -eq 0 ] || die "missing host tools: apt-get install -y ${missing[*]}"
}

# shellcheck disable=SC2317  # called by the EXIT trap
cleanup() {
    if [ -n "$qemu_pid" ] && kill -0 "$qemu_pid" 2>/dev/null; then
        kill "$qemu_pid" 2>/dev/null || true
        wait "$qemu_pid" 2>/dev/null || true
    fi
    if [ -n "$work" ]; then
        rm -rf "$work"
    fi
}

parse_args() {
    while [ $# -gt 0 ]; do
        case $1 in
        --suite) [ $# -ge 2 ] || die "--suite needs a value" "$EXIT_USAGE"; suite=$2; shift 2 ;;
        --kernel-suite) [ $# -ge 2 ] || die "--kernel-suite needs a value" "$EXIT_USAGE"; kernel_suite=$2; shift 2 ;;
        --timeout) [ $# -ge 2 ] || die "--timeout needs a value" "$EXIT_USAGE"; timeout_s=$2; shift 2 ;;
        --keep-share) [ $# -ge 2 ] || die "--keep-share needs a value" "$EXIT_USAGE"; keep_share=$2; shift 2 ;;
        --add) [ $# -ge 2 ] || die "--add needs a value" "$EXIT_USAGE"; adds+=("$2"); shift 2 ;;
        --second-boot) [ $# -ge 2 ] || die "--second-boot needs a value" "$EXIT_USAGE"; second_boot=$2; shift 2 ;;
        --append) [ $# -ge 2 ] || die "--append needs a value" "$EXIT_USAGE"; append_args=$2; shift 2 ;;
        --icount) icount=1; shift ;;
        --cpus) [ $# -ge 2 ] || die "--cpus needs a value" "$EXIT_USAGE"; cpus=$2; shift 2 ;;
        --cpu-model) [ $# -ge 2 ] || die "--cpu-model needs a value" "$EXIT_USAGE"; cpu_model=$2; shift 2 ;;
        -h | --help) usage; exit 0 ;;
        --) shift; break ;;
        -*) die "unknown option: $1 (see --help)" "$EXIT_USAGE" ;;
        *) debs+=("$1"); shift ;;
        esac
    done
    [ $# -ge 1 ] || die "missing '-- GUEST_SCRIPT' (see --help)" "$EXIT_USAGE"
    guest_script=$1
    guest_args=("${@:2}")

    [[ $timeout_s =~ ^[1-9][0-9]*$ ]] || die "--timeout must be a positive number of seconds" "$EXIT_USAGE"
    [[ $cpus =~ ^[1-8]$ ]] || die "--cpus must be a number from 1 to 8" "$EXIT_USAGE"
    [[ $cpu_model =~ ^[A-Za-z0-9][A-Za-z0-9_.,+=-]*$ ]] \
        || die "--cpu-model: not a QEMU CPU model: $cpu_model (e.g. max, qemu64)" "$EXIT_USAGE"
    case $suite in
    bookworm | trixie) ;;
    *) die "unsupported suite: $suite (bookworm or trixie)" "$EXIT_USAGE" ;;
    esac
    [ -z "$kernel_suite" ] || [[ $kernel_suite =~ ^[a-z][a-z0-9-]*$ ]] \
        || die "--kernel-suite: not an apt suite name: $kernel_suite" "$EXIT_USAGE"
    [ "$kernel_suite" != "$suite" ] || kernel_suite=
    [ -f "$guest_script" ] || die "guest script not found: $guest_script" "$EXIT_USAGE"
    [ -z "$second_boot" ] || [ -f "$second_boot" ] \
        || die "--second-boot: script not found: $second_boot" "$EXIT_USAGE"
    local deb
    for deb in "${debs[@]}"; do
        [[ $deb == *.deb && -f $deb ]] || die "not a .deb file: $deb" "$EXIT_USAGE"
    done
    for deb in "${adds[@]}"; do
        [ -e "$deb" ] || die "--add: not found: $deb" "$EXIT_USAGE"
    done
}

# ---------------------------------------------------------------------------------------------
# The image recipe. Everything that decides the image's contents is in the functions below and
# in vm-guest/; recipe_text() feeds them to the cache key, so editing any of them rebuilds.

guest_packages() {
    local libelf=libelf1 kernel=linux-image-amd64
    [ "$suite" = bookworm ] || libelf=libelf1t64    # renamed in the 64-bit time_t transition
    [ -z "$kernel_suite" ] || kernel=linux-image-amd64/$kernel_suite
    echo systemd systemd-sysv udev dbus sudo kmod "$kernel" initramfs-tools \
        util-linux procps coreutils openssh-client curl python3-minimal strace bubblewrap \
        btrfs-progs xfsprogs e2fsprogs passwd iproute2 less file bpftool fuse3 \
        tmux socat git cron at dbus-user-session libpam-systemd \
        accountsservice polkitd openssh-server python3-venv \
        "$libelf" zlib1g libc6 libgcc-s1
}

# Decompress the kernel inside a bzImage into an ELF vmlinux, which QEMU boots directly (faster
# than going through the bzImage decompressor under TCG). The x86 boot header (protocol >= 2.08)
# says where the compressed payload is, so no scanning for magic numbers is needed.
extract_vmlinux() {
    local in=$1 out=$2 setup_sects offset length start magic
    local -a decompress
    u32_at() { od -An -tu4 -j "$1" -N4 "$in" | tr -d ' '; }    # the host is little-endian too

    [ "$(od -An -c -j $((0x202)) -N4 "$in" | tr -d ' ')" = HdrS ] || {
        log "$in is not an x86 bzImage"
        return 1
    }
    setup_sects=$(od -An -tu1 -j $((0x1f1)) -N1 "$in" | tr -d ' ')
    [ "$setup_sects" -ne 0 ] || setup_sects=4
    offset=$(u32_at $((0x248)))
    length=$(u32_at $((0x24c)))
    # payload_offset counts from the protected-mode code, which follows the setup sectors.
    start=$(((setup_sects + 1) * 512 + offset))
    magic=$(od -An -tx1 -j "$start" -N6 "$in" | tr -d ' \n')
    case $magic in
    fd377a585a00) decompress=(xz -dc --single-stream) ;;
    28b52ffd*) decompress=(zstd -dcq) ;;
    1f8b*) decompress=(gzip -dc) ;;
    *) log "unknown kernel compression (magic $magic)"; return 1 ;;
    esac
    # xz and zstd payloads end with the uncompressed size (4 bytes), which the decompressors
    # would take for garbage; gzip carries its own.
    [ "${decompress[0]}" = gzip ] || length=$((length - 4))
    tail -c +$((start + 1)) "$in" | head -c "$length" | "${decompress[@]}" >"$out"
    [ "$(od -An -c -N4 "$out" | tr -d ' ')" = '177ELF' ] || {
        log "decompressed kernel is not an ELF file"
        return 1
    }
    if [ "${decompress[0]}" != gzip ] && [ "$(stat -c %s "$out")" -ne "$(u32_at $((start + length)))" ]; then
        log "decompressed kernel has the wrong size"
        return 1
    fi
}

# Build the image into the empty directory $1: disk.img (ext4, labelled), vmlinux, initrd.img.
build_image() {
    local dir=$1 mirror=http://deb.debian.org/debian
    local security=http://deb.debian.org/debian-security
    local packages kernel initrd rc
    local -a kernel_source=()
    packages=$(guest_packages | tr ' ' ',')
    # Backports and unstable have no -updates or -security suites of their own. The kernel's
    # suite is pinned below the guest's (as backports is by its NotAutomatic flag; unstable has
    # none), so that only the kernel packages come from it.
    if [ -n "$kernel_suite" ]; then
        kernel_source=("--setup-hook=mkdir -p \"\$1/etc/apt/preferences.d\" && printf '%s\\n' \
'Package: *' 'Pin: release a=$kernel_suite' 'Pin-Priority: 100' '' \
'Package: *' 'Pin: release n=$kernel_suite' 'Pin-Priority: 100' \
>\"\$1/etc/apt/preferences.d/kernel-suite\"" "deb $mirror $kernel_suite main")
    fi

    log "building the $suite guest image in $dir (about 1-2 minutes; log: $dir/build.log)"
    # In the background so that abort_build() can stop it (see ensure_image).
    timeout "$BUILD_TIMEOUT" mmdebstrap --variant=minbase --mode=root \
        --include="$packages" \
        --essential-hook="$(printf '%q' "$GUEST_DIR/essential.sh") \"\$1\"" \
        --customize-hook="$(printf '%q' "$GUEST_DIR/customize.sh") \"\$1\"" \
        "${kernel_source[@]:0:1}" \
        "$suite" "$dir/rootfs" \
        "deb $mirror $suite main" \
        "deb $mirror $suite-updates main" \
        "deb $security $suite-security main" \
        "${kernel_source[@]:1}" \
        </dev/null >"$dir/build.log" 2>&1 &
    build_pid=$!
    rc=0
    wait "$build_pid" || rc=$?
    build_pid=
    if [ "$rc" -ne 0 ]; then
        tail -n 20 "$dir/build.log" >&2
        die "mmdebstrap failed with exit status $rc (see the log above)"
    fi

    # Exactly one kernel is installed: linux-image-amd64 depends on one version.
    kernel=$(find "$dir/rootfs/boot" -maxdepth 1 -name 'vmlinuz-*' -print -quit)
    initrd=$(find "$dir/rootfs/boot" -maxdepth 1 -name 'initrd.img-*' -print -quit)
    if [ -z "$kernel" ] || [ -z "$initrd" ]; then
        die "no kernel or initrd in the built root file system"
    fi
    cp "$initrd" "$dir/initrd.img"
    extract_vmlinux "$kernel" "$dir/vmlinux" || die "cannot extract vmlinux from $kernel"

    # mke2fs -d fills the file system from a directory: no loop device, no mount.
    mke2fs -q -t ext4 -L "$ROOT_LABEL" -d "$dir/rootfs" "$dir/disk.img" 3G >>"$dir/build.log" 2>&1 \
        || die "mke2fs of the guest disk failed (see $dir/build.log)"
    rm -rf --one-file-system "$dir/rootfs"
}

# Everything the image depends on, as text; its sha256 is the cache key.
recipe_text() {
    printf 'suite=%s\nkernel_suite=%s\nlabel=%s\npackages=%s\n' "$suite" "$kernel_suite" "$ROOT_LABEL" \
        "$(guest_packages)"
    declare -f guest_packages extract_vmlinux build_image
    (cd "$GUEST_DIR" && find . -type f -print0 | sort -z | xargs -0 sha256sum)
}

# Print the cache directory of the image for the current recipe, building it first if needed.
ensure_image() {
    local key dir lock_fd stale started=$SECONDS
    key=$suite${kernel_suite:++$kernel_suite}-$(recipe_text | sha256sum | cut -c1-16)
    dir=$CACHE_ROOT/$key
    if [ ! -f "$dir/disk.img" ]; then
        [ "$(id -u)" -eq 0 ] || die "no cached guest image $dir, and building one needs root"
        require_tools mmdebstrap:mmdebstrap mke2fs:e2fsprogs xz:xz-utils
        [ "$suite" = bookworm ] || require_tools zstd:zstd    # newer kernels are zstd-compressed
        mkdir -p "$CACHE_ROOT"
        # One build at a time; a concurrent run of the same recipe waits and then reuses it.
        exec {lock_fd}>"$CACHE_ROOT/.build.lock"
        flock "$lock_fd"
        if [ ! -f "$dir/disk.img" ]; then
            # Holding the lock, any build directory left over is from an interrupted build.
            for stale in "$CACHE_ROOT"/.build-*; do
                [ ! -e "$stale" ] || remove_build_dir "$stale"
            done
            build_dir=$(mktemp -d "$CACHE_ROOT/.build-$key.XXXXXX")
            # This runs in $(...), so these traps are this subshell's own. On Ctrl-C only this
            # subshell gets the signal: mmdebstrap runs under timeout, in its own process group.
            trap abort_build EXIT
            trap 'exit 130' INT
            trap 'exit 143' TERM
            build_image "$build_dir" >&2
            recipe_text >"$build_dir/recipe.txt"
            rm -f "$build_dir/build.log"
            chmod 0755 "$build_dir"
            # The rename makes the image appear whole or not at all.
            mv -T "$build_dir" "$dir"
            build_dir=
            prune_images "$key"
            log "guest image ready after $((SECONDS - started)) s: $dir"
        fi
        exec {lock_fd}>&-
    fi
    touch "$dir/last-used" 2>/dev/null || true    # not writable when booting as a normal user
    echo "$dir"
}

# Stop an unfinished build (mmdebstrap cleans up its mounts on SIGTERM) and remove its directory.
# shellcheck disable=SC2317  # called by the EXIT trap
abort_build() {
    if [ -n "$build_pid" ]; then
        kill "$build_pid" 2>/dev/null || true
        wait "$build_pid" 2>/dev/null || true
    fi
    if [ -n "$build_dir" ]; then
        remove_build_dir "$build_dir"
    fi
}

remove_build_dir() {
    local dir=$1 mnt
    # A mmdebstrap killed with SIGKILL leaves /proc, /sys, /dev... mounted in its root; never
    # let rm walk into those (--one-file-system), unmount them first.
    while IFS= read -r mnt; do
        umount -l "$mnt" 2>/dev/null || true
    done < <(awk -v prefix="$dir/" 'index($2, prefix) == 1 { print $2 }' /proc/mounts | sort -r)
    rm -rf --one-file-system "$dir" || log "warning: could not remove $dir"
}

# Remove images of other recipes that no run has used for a day (a run touches last-used before
# booting, so an image in use is never that old).
prune_images() {
    local keep=$1 old
    for old in "$CACHE_ROOT"/*-*/; do
        old=${old%/}
        if [ ! -d "$old" ] || [ "$old" = "$CACHE_ROOT/$keep" ]; then
            continue
        fi
        if [ -z "$(find "$old" -maxdepth 1 \( -name last-used -o -name disk.img \) \
            -newermt '1 day ago' -print -quit)" ]; then
            log "removing unused guest image $old"
            rm -rf --one-file-system "$old"
        fi
    done
}

# ---------------------------------------------------------------------------------------------
# One VM run.

# Fill the share: the script, the debs, the job description vm-runner reads, results/.
prepare_share() {
    local share=$1 deb name path
    local -a names=()
    mkdir -p "$share/debs" "$share/.vm" "$share/results"
    for deb in "${debs[@]}"; do
        name=$(basename "$deb")
        [ ! -e "$share/debs/$name" ] || die "two DEBs named $name" "$EXIT_USAGE"
        cp "$deb" "$share/debs/$name"
        names+=("$name")
    done
    for path in "${adds[@]}"; do
        cp -R "$path" "$share/"
    done
    name=$(basename "$guest_script")
    [ ! -e "$share/$name" ] || die "--add would overwrite the guest script $name" "$EXIT_USAGE"
    cp "$guest_script" "$share/$name"
    printf '%s\n' "$name" >"$share/.vm/script"
    if [ -n "$second_boot" ]; then
        # The same file may be both an --add and the second script.
        name=$(basename "$second_boot")
        if [ -e "$share/$name" ] && ! cmp -s "$second_boot" "$share/$name"; then
            die "--second-boot: another file named $name is already on the share" "$EXIT_USAGE"
        fi
        cp "$second_boot" "$share/$name"
    fi
    # NUL-separated lists; printf with no arguments would still write one empty item.
    : >"$share/.vm/args"
    : >"$share/.vm/debs"
    [ "${#guest_args[@]}" -eq 0 ] || printf '%s\0' "${guest_args[@]}" >"$share/.vm/args"
    [ "${#names[@]}" -eq 0 ] || printf '%s\0' "${names[@]}" >"$share/.vm/debs"
    printf 'boot\n' >"$share/results/stage"
    : >"$share/results/output.log"
    # The guest sees the host's modes (security_model=none), and apt reads the .deb as _apt.
    chmod -R a+rX "$share"
}

# Print what the guest appended to $1 since the last call (offset kept in stream_offset).
stream_offset=0
stream_output() {
    local file=$1 size
    size=$(stat -c %s "$file")
    if [ "$size" -gt "$stream_offset" ]; then
        tail -c +$((stream_offset + 1)) "$file" | head -c $((size - stream_offset))
        stream_offset=$size
    fi
}

# Boot the image from DRIVE (a -drive spec) for at most LIMIT seconds; return QEMU's (or
# timeout's) exit status.
run_vm() {
    local image=$1 share=$2 serial=$3 qemu_log=$4 drive=$5 limit=$6 rc=0
    local -a cpu=(-accel 'tcg,thread=multi' -smp "$cpus")
    # --icount: guest time = executed instructions, so timings repeat to about 0.1 %.
    [ -z "$icount" ] || cpu=(-accel 'tcg,thread=single' -icount 'shift=0,sleep=off' -smp 1)
    # -accel tcg: /dev/kvm here is a nested paravirtual hypervisor that stock kernels choke on.
    # panic=-1 reboots at once on a kernel panic, and -no-reboot turns that into QEMU exiting.
    # The cached disk stays untouched: snapshot=on sends writes to a temporary overlay, and
    # --second-boot's qcow2 overlay is the run's own.
    timeout --kill-after=15 "$limit" qemu-system-x86_64 \
        "${cpu[@]}" -cpu "$cpu_model" -m 2G -machine q35 \
        -nodefaults -display none -no-reboot -nic none \
        -kernel "$image/vmlinux" -initrd "$image/initrd.img" \
        -append "console=ttyS0 root=LABEL=$ROOT_LABEL rw panic=-1${append_args:+ $append_args}" \
        -drive "$drive" \
        -virtfs "local,path=$share,mount_tag=$SHARE_TAG,security_model=none" \
        -serial "file:$serial" \
        </dev/null >"$qemu_log" 2>&1 &
    qemu_pid=$!
    while kill -0 "$qemu_pid" 2>/dev/null; do
        stream_output "$share/results/output.log"
        sleep 1
    done
    wait "$qemu_pid" || rc=$?
    qemu_pid=
    stream_output "$share/results/output.log"
    return "$rc"
}

# After the VM is gone: exit with the guest script's status, or explain why there is none.
report() {
    local share=$1 serial=$2 qemu_log=$3 rc=$4 status stage reason panic
    if [ -f "$share/results/status" ]; then
        status=$(cat "$share/results/status")
        [[ $status =~ ^[0-9]+$ ]] || die "unreadable exit status from the guest: $status"
        if [ "$status" -ne 0 ]; then
            log "guest script exited with status $status"
            journal_hint "$share"
        fi
        exit "$status"
    fi

    stage=$(cat "$share/results/stage" 2>/dev/null || echo unknown)
    panic=$(grep -a -m1 'Kernel panic' "$serial" 2>/dev/null | tr -d '\r' || true)
    if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
        case $stage in
        boot) reason="timed out after $timeout_s s while booting (the runner never reported)" ;;
        waiting-for-boot) reason="timed out after $timeout_s s waiting for the guest boot to finish" ;;
        installing) reason="timed out after $timeout_s s installing ${debs[0]} in the guest" ;;
        running) reason="timed out after $timeout_s s: the guest script did not finish" ;;
        *) reason="timed out after $timeout_s s (stage: $stage)" ;;
        esac
        print_tails "$serial" "$qemu_log"
        die "$reason" "$EXIT_TIMEOUT"
    fi
    if [ -n "$panic" ]; then
        reason="guest kernel panic: ${panic#*Kernel panic - }"
    elif [ -s "$share/results/error" ]; then
        reason=$(head -n1 "$share/results/error")
    elif [ "$rc" -ne 0 ]; then
        reason="qemu failed with exit status $rc: $(tail -n1 "$qemu_log")"
    else
        reason="the guest powered off without an exit status (stage: $stage)"
    fi
    print_tails "$serial" "$qemu_log"
    journal_hint "$share"
    die "$reason"
}

journal_hint() {
    if [ -n "$keep_share" ] && [ -f "$1/results/journal.log" ]; then
        log "guest journal: $1/results/journal.log"
    fi
}

print_tails() {
    local serial=$1 qemu_log=$2
    if [ -s "$qemu_log" ]; then
        log "--- qemu stderr ---"
        tail -n 10 "$qemu_log" >&2
    fi
    log "--- last lines of the guest console ($serial) ---"
    # Without carriage returns and systemd's colour escapes.
    tail -n 40 "$serial" 2>/dev/null | sed 's/\r//g; s/\x1b\[[0-9;]*m//g' >&2 || true
    log "---"
}

# The first boot of --second-boot passed: point the share's job at the second script (no DEB,
# no arguments) and forget the first boot's status.
prepare_second_boot() {
    local share=$1
    printf '%s\n' "$(basename "$second_boot")" >"$share/.vm/script"
    : >"$share/.vm/args"
    : >"$share/.vm/debs"
    rm -f "$share/results/status"
    printf 'boot\n' >"$share/results/stage"
}

main() {
    local image share serial qemu_log booted drive left status rc=0
    parse_args "$@"
    require_tools qemu-system-x86_64:qemu-system-x86 timeout:coreutils flock:util-linux
    [ -z "$second_boot" ] || require_tools qemu-img:qemu-utils
    trap cleanup EXIT
    trap 'exit 130' INT
    trap 'exit 143' TERM

    image=$(ensure_image)

    if [ -n "$keep_share" ]; then
        mkdir -p "$keep_share"
        [ -z "$(ls -A "$keep_share")" ] || die "--keep-share: $keep_share is not empty" "$EXIT_USAGE"
        share=$(cd "$keep_share" && pwd)
        serial=$share/serial.log
        qemu_log=$share/qemu.log
    else
        work=$(mktemp -d "${TMPDIR:-/tmp}/vm-test.XXXXXX")
        share=$work/share
        mkdir "$share"
        serial=$work/serial.log
        qemu_log=$work/qemu.log
    fi
    prepare_share "$share"

    drive="file=$image/disk.img,format=raw,if=virtio,snapshot=on"
    if [ -n "$second_boot" ]; then
        [ -n "$work" ] || work=$(mktemp -d "${TMPDIR:-/tmp}/vm-test.XXXXXX")
        qemu-img create -q -f qcow2 -b "$image/disk.img" -F raw "$work/disk.qcow2" \
            || die "qemu-img cannot create an overlay of $image/disk.img in $work"
        drive="file=$work/disk.qcow2,format=qcow2,if=virtio"
    fi

    log "booting $(basename "$image")${icount:+ in icount mode} (timeout ${timeout_s} s)"
    booted=$SECONDS
    run_vm "$image" "$share" "$serial" "$qemu_log" "$drive" "$timeout_s" || rc=$?
    log "the VM ran for $((SECONDS - booted)) s"
    if [ -n "$second_boot" ]; then
        status=$(cat "$share/results/status" 2>/dev/null || true)
        left=$((timeout_s - (SECONDS - booted)))
        if [ "$status" = 0 ] && [ "$rc" -eq 0 ] && [ "$left" -gt 0 ]; then
            prepare_second_boot "$share"
            mv "$serial" "$serial.first-boot"
            log "booting the same disk again for $(basename "$second_boot") (${left} s left)"
            run_vm "$image" "$share" "$serial" "$qemu_log" "$drive" "$left" || rc=$?
            log "the second boot ran for $((SECONDS - booted)) s in all"
        fi
    fi
    report "$share" "$serial" "$qemu_log" "$rc"
}

main "$@"
