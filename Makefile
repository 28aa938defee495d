# agent-sandbox-exec: build, test and package. `make help` lists the targets.

SHELL := /bin/bash
.SHELLFLAGS := -o pipefail -ec
.DEFAULT_GOAL := build

PACKAGE := agent-sandbox-exec
# The version of the [package] table of Cargo.toml; scripts/build-deb.sh checks
# that debian/changelog agrees.
VERSION := $(shell awk '/^\[/ { p = ($$0 == "[package]") } p && /^version[ \t]*=/ { gsub(/^version[ \t]*=[ \t]*"|".*$$/, ""); print; exit }' Cargo.toml)
ARCH := $(shell dpkg --print-architecture 2>/dev/null || echo amd64)
TARGET_DIR := $(or $(CARGO_TARGET_DIR),target)
BIN := $(TARGET_DIR)/release/$(PACKAGE)
DEB := build/$(PACKAGE)_$(VERSION)_$(ARCH).deb

LLVM_OBJDUMP ?= llvm-objdump
LINTIAN ?= lintian
SHELLCHECK ?= shellcheck

SUDO := $(if $(filter 0,$(shell id -u)),,sudo)

# Debian packages needed to build, check (`make test`) and package. The Rust
# toolchain is handled separately.
DEPS_APT := binutils ca-certificates clang dpkg-dev gcc gzip xz-utils zstd \
	libc6-dev libelf-dev lintian llvm make man-db pkg-config shellcheck zlib1g-dev
# Debian packages the guest suites of `make vm-test` need besides (qemu,
# qemu-img, mmdebstrap, mkfs.ext4, gcc-multilib for the 32-bit guest tool).
# qemu-system-x86 and qemu-utils are installed at one version, the archive's
# candidate of qemu-system-x86: a qemu-utils installed from elsewhere (a
# backports build) breaks qemu-system-common of another version, and apt then
# refuses the whole install.
TEST_DEPS_APT := e2fsprogs gcc-multilib mmdebstrap
TEST_DEPS_QEMU := qemu-system-x86 qemu-utils
# On a Debian 12 host QEMU comes from bookworm-backports (10.0; Debian 13 has it in
# its own archive): its TCG ran test.sh and test-doors.sh in a Debian 13 guest in
# 212 s and 130 s against QEMU 7.2's 288 s and 168 s, side by side (a fork and exec
# of /bin/true: 29 ms against 71 ms; BENCHMARKS.md, session 24). test-deps adds that
# suite to apt's sources, in QEMU_BPO_SOURCES, when apt has none of it, and
# falls back to the host's own archive (saying so) when apt cannot reach it.
# QEMU_BACKPORTS=0 neither adds the source nor asks it for QEMU (a QEMU
# installed from it before stays).
QEMU_BACKPORTS ?= 1
QEMU_BPO_SOURCES := /etc/apt/sources.list.d/agent-sandbox-exec-bookworm-backports.sources

# Rust: edition 2024 needs Rust 1.85 or later.
RUST_MIN := 1.85
# Shell code printing the first cargo that is new enough: the one on PATH (for
# example rustup's), then rustup's default location, then Debian's /usr/bin/cargo
# (on Debian 12 from the package cargo-web, which installs /usr/bin/cargo and
# rustc-web's /usr/bin/rustc). `make CARGO=/path/to/cargo` overrides the search.
find_cargo = for c in "$$(command -v cargo || true)" "$${CARGO_HOME:-$${HOME:-/root}/.cargo}/bin/cargo" /usr/bin/cargo; do \
	  [ -n "$$c" ] && [ -x "$$c" ] || continue; \
	  v=$$("$$c" --version 2>/dev/null | awk '{ print $$2 }') || v=; v=$${v%%[-+]*}; \
	  if [ -n "$$v" ] && [ "$$(printf '%s\n' "$(RUST_MIN)" "$$v" | sort -V | head -n 1)" = "$(RUST_MIN)" ]; then \
	    echo "$$c"; break; \
	  fi; \
	done
# Searched once, and only by targets that run cargo.
CARGO = $(eval CARGO := $(shell $(find_cargo)))$(CARGO)
# Runs cargo with its own directory first in PATH, so that rustc, rustfmt and
# clippy come from the same toolchain.
CARGO_RUN = PATH="$(dir $(CARGO)):$$PATH" "$(CARGO)"

# Every shell script: found by its #! line, so the maintainer scripts count.
SHELL_SCRIPTS = $(sort $(shell find scripts debian .ci -type f -exec \
	awk 'FNR == 1 && /^\#!.*[\/ ](ba|da)?sh([ \t]|$$)/ { print FILENAME }' {} + 2>/dev/null))

.PHONY: help deps test-deps build package test fmt-check clippy cargo-test shellcheck \
	catalog-check bpf-check lintian vm-test package-next guest-tools bench bench-tools clean have-cargo

help:
	@echo "make deps      install the build dependencies, for make build/package/test (Debian 12, apt-get)"
	@echo "make test-deps make deps, plus what make vm-test needs (QEMU, mmdebstrap, gcc-multilib)"
	@echo "make build     cargo build --release --locked -> $(BIN)"
	@echo "make package   build $(DEB)"
	@echo "make test      fmt-check clippy cargo-test shellcheck catalog-check bpf-check lintian"
	@echo "make vm-test   the guest suites (scripts/guest-suite.sh) in Debian 12, 13 and 13 with the backports kernel (7.x) VMs, side by side (VM_PARALLEL=0: one after the other),"
	@echo "               and a short boot of each kernel without the bpf LSM (test-status.sh no_bpf);"
	@echo "               the suites: test.sh test-fs.sh test-dirs.sh test-dirscan.sh test-mounts.sh test-doors.sh"
	@echo "               test-procs.sh test-services.sh test-status.sh test-events.sh test-writes.sh test-patterns.sh test-lifecycle.sh (every scripts/test*.sh is put on the guest's share)"
	@echo "make bench     the benchmarks (BENCHMARKS.md) in a Debian 12 VM; BENCH_MODES=icount (the default) or \"icount mttcg\""
	@echo "make clean     remove $(TARGET_DIR)/ and build/"

test-deps: deps
	$(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends $(TEST_DEPS_APT)
	@set -e; rel=; codename=$$(. /etc/os-release && echo "$${VERSION_CODENAME:-}"); \
	if [ "$(QEMU_BACKPORTS)" = 1 ] && [ "$$codename" = bookworm ]; then \
	  if ! apt-cache policy | grep -qE 'n=bookworm-backports(,|$$)'; then \
	    echo "adding bookworm-backports to apt's sources ($(QEMU_BPO_SOURCES)) for QEMU 10"; \
	    printf '%s\n' 'Types: deb' 'URIs: http://deb.debian.org/debian' 'Suites: bookworm-backports' \
	      'Components: main' 'Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg' \
	      | $(SUDO) tee $(QEMU_BPO_SOURCES) >/dev/null; \
	    $(SUDO) apt-get update || true; \
	  fi; \
	  if apt-cache policy -t bookworm-backports qemu-system-x86 >/dev/null 2>&1; then \
	    rel=bookworm-backports; \
	  else \
	    echo "note: apt cannot reach bookworm-backports: QEMU from the host's own archive (its TCG runs the suites slower; QEMU_BACKPORTS=0 skips this step)" >&2; \
	  fi; \
	fi; \
	v=$$(apt-cache policy $${rel:+-t $$rel} qemu-system-x86 | awk '/Candidate:/ { print $$2 }'); \
	if [ -z "$$v" ] || [ "$$v" = "(none)" ]; then echo "apt offers no qemu-system-x86" >&2; exit 1; fi; \
	echo "apt-get install $${rel:+-t $$rel }$(addsuffix =$$v,$(TEST_DEPS_QEMU))"; \
	$(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends --allow-downgrades \
	  $${rel:+-t $$rel} $(addsuffix =$$v,$(TEST_DEPS_QEMU))

deps:
	$(SUDO) apt-get update
	$(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends $(DEPS_APT)
	@cargo=$$($(find_cargo)); \
	if [ -z "$$cargo" ]; then \
	  cand() { apt-cache policy "$$1" 2>/dev/null | awk '/Candidate:/ { print $$2 }'; }; \
	  if v=$$(cand cargo-web) && [ -n "$$v" ] && [ "$$v" != "(none)" ] && dpkg --compare-versions "$$v" ge "$(RUST_MIN)"; then \
	    echo "No Rust >= $(RUST_MIN) found; installing Debian's rustc-web and cargo-web $$v."; \
	    $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
	      rustc-web cargo-web rustfmt-web rust-web-clippy; \
	  elif v=$$(cand cargo) && [ -n "$$v" ] && [ "$$v" != "(none)" ] && dpkg --compare-versions "$$v" ge "$(RUST_MIN)"; then \
	    echo "No Rust >= $(RUST_MIN) found; installing Debian's rustc and cargo $$v."; \
	    $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
	      rustc cargo rustfmt rust-clippy; \
	  fi; \
	  cargo=$$($(find_cargo)); \
	fi; \
	if [ -z "$$cargo" ]; then \
	  echo "No Rust toolchain >= $(RUST_MIN) found, and apt offers none." >&2; \
	  echo "Install one with rustup (with the rustfmt and clippy components) and put its cargo on PATH," >&2; \
	  echo "or run make with CARGO=/path/to/cargo." >&2; \
	  exit 1; \
	fi; \
	echo "Using $$cargo: $$("$$cargo" --version)"; \
	if ! PATH="$$(dirname "$$cargo"):$$PATH" "$$cargo" fmt --version >/dev/null 2>&1 || \
	   ! PATH="$$(dirname "$$cargo"):$$PATH" "$$cargo" clippy --version >/dev/null 2>&1; then \
	  if command -v rustup >/dev/null; then \
	    rustup component add rustfmt clippy; \
	  else \
	    echo "cargo fmt or cargo clippy is missing for $$cargo: install rustfmt and clippy for it." >&2; \
	    exit 1; \
	  fi; \
	fi

have-cargo:
	@if [ -z "$(CARGO)" ]; then \
	  echo "No Rust toolchain >= $(RUST_MIN) found (looked at cargo on PATH, ~/.cargo/bin, /usr/bin)." >&2; \
	  echo "Run 'make deps' (on Debian 12 it installs rustc-web and cargo-web), or pass CARGO=/path/to/cargo." >&2; \
	  exit 1; \
	fi

build: have-cargo
	$(CARGO_RUN) build --release --locked

package: build
	scripts/build-deb.sh $(BIN) build

test: fmt-check clippy cargo-test shellcheck catalog-check bpf-check lintian

fmt-check: have-cargo
	$(CARGO_RUN) fmt --check

clippy: have-cargo
	$(CARGO_RUN) clippy --release --locked --all-targets -- -D warnings

cargo-test: have-cargo
	$(CARGO_RUN) test --release --locked

shellcheck:
	$(SHELLCHECK) $(SHELL_SCRIPTS)

# docs/BYPASS_CATALOG.md: every closed entry names guest or unit tests that exist.
catalog-check:
	scripts/check-catalog.sh

# The BPF object that build.rs compiles into OUT_DIR must hold the map deny_map
# and a program in the section lsm/file_open.
bpf-check: build
	@obj=$$(ls -t $(TARGET_DIR)/release/build/$(PACKAGE)-*/out/agent_sandbox.bpf.o 2>/dev/null | head -n 1); \
	if [ -z "$$obj" ]; then \
	  echo "bpf-check: no BPF object in $(TARGET_DIR)/release/build/$(PACKAGE)-*/out/" >&2; exit 1; \
	fi; \
	echo "bpf-check: $$obj"; \
	if ! $(LLVM_OBJDUMP) --section-headers "$$obj" | awk '$$2 == "lsm/file_open" { found = 1 } END { exit !found }'; then \
	  echo "bpf-check: $$obj has no section lsm/file_open" >&2; exit 1; \
	fi; \
	if ! $(LLVM_OBJDUMP) --syms "$$obj" | awk '$$NF == "deny_map" && / \.maps[ \t]/ { found = 1 } END { exit !found }'; then \
	  echo "bpf-check: $$obj has no map deny_map (a symbol in .maps)" >&2; exit 1; \
	fi; \
	echo "bpf-check: map deny_map and program section lsm/file_open present"

lintian: package
	$(LINTIAN) --fail-on error,warning $(DEB)

# Version N+1 of the package (version +next1, map layout +1) for the upgrade test.
NEXT_DEB = build/next/$(PACKAGE)_$(VERSION)+next1_$(ARCH).deb

package-next: have-cargo
	CARGO="$(CARGO)" PATH="$(dir $(CARGO)):$$PATH" scripts/build-next.sh build/next

# Programs the guest suites run that the guest cannot build: a static 32-bit
# binary issuing ioctls through the compat entry point (scripts/test-fs.sh,
# scripts/test-procs.sh).
GUEST_TOOLS := build/asx-ioctl32
guest-tools: $(GUEST_TOOLS)
build/asx-ioctl32: scripts/guest-tools/ioctl32.c
	@mkdir -p build
	$(CC) -m32 -static -O2 -Wall -Wextra -Werror -o $@ $< || { \
	  echo "building a 32-bit static binary needs gcc-multilib (make test-deps)" >&2; exit 1; }

# The guest suite (scripts/guest-suite.sh: every suite, then the package
# lifecycle) on three kernel lines: Debian 12 (6.1), Debian 13 (6.12) and
# Debian 13 with the trixie-backports kernel (7.x), one boot each (and a second
# boot for scripts/test-reboot.sh), then a short boot of each without the bpf
# LSM. A guest is named DIST or DIST+KSUITE: Debian DIST's image with the
# kernel from the apt suite KSUITE (scripts/vm-test.sh --kernel-suite), so
# `make vm-test VM_SUITES=trixie+unstable` runs everything on unstable's
# kernel.
# VM_PARALLEL=1 (the default) boots the guests at the same time, one vCPU
# each: the host's two cores serve them in turn, and the whole run takes
# about as long as the sum of the guests' CPU time over two. Each line a guest
# prints is prefixed with its name ([bookworm] ...) and kept in
# build/vm-<name>.log; the run fails if any guest fails. VM_PARALLEL=0 runs
# them one after the other, in VM_SUITES order.
# VM_CPUS_<name>: vCPUs of that guest (default 1). Debian 13's 6.12 kernel
# must stay on one: with two it panicked now and then (RIP
# bpf_lsm_file_open+0x5, "Fatal exception in interrupt") while the daemon
# attached its programs during a restart: the call site that attaching
# patches (text_poke_bp: int3 first) was executed half-written by the other
# vCPU, which points at QEMU's multi-threaded TCG (not seen on bookworm, nor
# outside QEMU here). One vCPU has no other CPU to race.
VM_SUITES ?= bookworm trixie trixie+trixie-backports
# QEMU's CPU model for the suites' guests (scripts/vm-test.sh --cpu-model):
# qemu64 has no AVX, so the guests' glibc takes its SSE2 string functions,
# which TCG runs faster than its AVX2 ones: the suites took 9-12 % less time
# than under `max` (the benchmarks keep `max`, the model of their figures).
VM_CPU_MODEL ?= qemu64
VM_PARALLEL ?= 1
# A guest's bound: hangs end here. The suites take 28-36 min a guest when
# three run on CI's two cores under QEMU 10 (each daemon start verifies the
# programs: 10-45 s under that load on 6.12 and 7.x); 4200 s plus the first lane's three
# no-bpf boots (300 s each at most, about 60 s each) and make test stays under
# CI's 90-minute limit.
VM_TIMEOUT ?= 4200
# vm_dist NAME, vm_ksuite NAME: the parts of a guest name DIST[+KSUITE].
vm_dist = $(word 1,$(subst +, ,$(1)))
vm_ksuite = $(word 2,$(subst +, ,$(1)))
vm_args = --suite $(call vm_dist,$(1)) $(if $(call vm_ksuite,$(1)),--kernel-suite $(call vm_ksuite,$(1)))
# vm_suite NAME: one guest run of the whole suite, its output prefixed and kept
# The guest's share gets every scripts/test*.sh (the suites scripts/guest-suite.sh runs and their
# shared scripts/test-lib.sh) and the guest tools.
GUEST_SCRIPTS = $(sort $(wildcard scripts/test*.sh))
vm_suite = scripts/vm-test.sh $(call vm_args,$(1)) --cpus $(or $(VM_CPUS_$(1)),1) --cpu-model $(VM_CPU_MODEL) --timeout $(VM_TIMEOUT) \
	    $(addprefix --add ,$(GUEST_SCRIPTS) $(GUEST_TOOLS)) \
	    --second-boot scripts/test-reboot.sh \
	    $(DEB) $(NEXT_DEB) -- scripts/guest-suite.sh 2>&1 | tee build/vm-$(1).log | sed -u 's/^/[$(1)] /'
# vm_no_bpf NAME: the short extra boot of that guest's kernel with an LSM list
# that lacks bpf (boot, install, the doctor, the launcher's refusal;
# scripts/test-status.sh no_bpf).
vm_no_bpf = scripts/vm-test.sh $(call vm_args,$(1)) --cpus 1 --cpu-model $(VM_CPU_MODEL) --timeout 300 --append "$(VM_NO_BPF_LSM)" \
	    $(addprefix --add ,$(filter-out scripts/test-status.sh,$(GUEST_SCRIPTS))) $(DEB) -- scripts/test-status.sh 2>&1 \
	    | tee build/vm-$(1)-no-bpf.log | sed -u 's/^/[$(1), no bpf] /'
# vm_lane NAME: one guest's suite; the first guest's lane (bookworm: its suite is
# the shortest) then boots every guest's kernel without bpf, one after the
# other, so that those boots end before the longest lane does instead of
# lengthening it (CI's time is the longest lane's). Sets rc and t1 (when the
# no-bpf boots began).
vm_lane = { $(call vm_suite,$(1)) || rc=1; \
	    $(if $(filter $(1),$(firstword $(VM_SUITES))),t1=$$(date +%s); \
	      $(foreach g,$(VM_SUITES),{ $(call vm_no_bpf,$(g)) || rc=1; };)) }
vm-test: package package-next guest-tools
	@rc=0; pids=; started=$$(date +%s); rm -f $(foreach s,$(VM_SUITES),build/vm-$(s).log build/vm-$(s)-no-bpf.log build/vm-$(s).times); \
	$(foreach s,$(VM_SUITES),echo "== vm-test: $(s) ($(or $(VM_CPUS_$(s)),1) vCPU)"; \
	  if [ "$(VM_PARALLEL)" = 1 ]; then { t0=$$(date +%s); t1=; rc=0; $(call vm_lane,$(s)); \
	    printf '%s %s %s\n' "$${t1:-}" "$$t0" "$$(date +%s)" >build/vm-$(s).times; exit $$rc; } & pids="$$pids $$!"; \
	  else t0=$$(date +%s); t1=; $(call vm_lane,$(s)); \
	    printf '%s %s %s\n' "$$t1" "$$t0" "$$(date +%s)" >build/vm-$(s).times; fi; ) \
	for p in $$pids; do wait "$$p" || rc=1; done; \
	scripts/vm-times.sh "$$started" $(VM_SUITES); \
	for log in $(foreach s,$(VM_SUITES),build/vm-$(s).log build/vm-$(s)-no-bpf.log); do \
	  [ -e "$$log" ] || { echo "== vm-test: $$log: not run"; continue; }; \
	  printf '== vm-test: %s: %s\n' "$$log" "$$({ grep -aE 'passed, [0-9]+ failed|^GUEST SUITE:|^vm-test: ' "$$log" || true; } | tail -n 4 | tr '\n' ' ')"; \
	  { grep -aE '^ *FAIL|^not ok|TIMEOUT|timed out|Kernel panic' "$$log" || true; } \
	    | { grep -v 'the bpf LSM is not active' || true; } | head -n 8 | sed 's/^/    /' || true; \
	done; \
	exit "$$rc"

# The short extra boot of vm-test: a kernel whose LSM list lacks bpf (boot,
# install, the doctor, the launcher's refusal; scripts/test-status.sh no_bpf).
VM_NO_BPF_LSM ?= lsm=lockdown,capability,yama

# Benchmarks (BENCHMARKS.md): scripts/bench-guest.sh in a Debian 12 guest, one
# boot per mode in BENCH_MODES: icount (deterministic: guest time = executed
# instructions; the mode of record) and mttcg (2 vCPUs, wall clock). Each boot
# runs every suite and prints its table; the full guest output is kept in
# build/bench-<mode>.log. BENCH_ARGS=--quick for a trial with small counts.
BENCH_MODES ?= icount
BENCH_ARGS ?=
BENCH_TIMEOUT ?= 5400
BENCH_DIR := build/bench
CLANG ?= clang

bench-tools: have-cargo
	$(CARGO_RUN) build --release --locked --example asx-bench
	mkdir -p $(BENCH_DIR)
	cp $(TARGET_DIR)/release/examples/asx-bench $(BENCH_DIR)/asx-bench
	$(CLANG) -O2 -g -target bpf -c bench/empty.bpf.c -o $(BENCH_DIR)/empty.bpf.o

bench: package bench-tools
	@rev=$$(git describe --always --dirty 2>/dev/null || echo unknown); \
	for mode in $(BENCH_MODES); do \
	  case $$mode in icount) flag=--icount ;; mttcg) flag= ;; \
	    *) echo "bench: unknown mode $$mode (icount or mttcg)" >&2; exit 2 ;; esac; \
	  log=build/bench-$$mode.log; \
	  echo "== bench: $$mode boot (progress below; guest output in $$log)"; \
	  rc=0; \
	  scripts/vm-test.sh $$flag --timeout $(BENCH_TIMEOUT) --add $(BENCH_DIR) $(DEB) \
	    -- scripts/bench-guest.sh --mode $$mode --rev "$$rev" $(BENCH_ARGS) 2>&1 \
	    | tee $$log | grep --line-buffered -E '^(\.\. |vm-test: |bench-guest.sh: |asx-bench: )' \
	    || rc=$$?; \
	  if [ "$$rc" -ne 0 ] || ! grep -q '^== agent-sandbox-exec benchmarks' $$log; then \
	    echo "bench: the $$mode run failed; last lines of $$log:" >&2; tail -n 30 $$log >&2; exit 1; \
	  fi; \
	done; \
	for mode in $(BENCH_MODES); do \
	  sed -n '/^== agent-sandbox-exec benchmarks/,$$p' build/bench-$$mode.log \
	    | grep -v -E '^vm-runner: '; \
	done

clean:
	rm -rf $(TARGET_DIR) build
