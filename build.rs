//! Compiles the BPF program with clang and generates its libbpf-rs skeleton.

use std::env;
use std::path::PathBuf;

use libbpf_cargo::SkeletonBuilder;

const SRC: &str = "src/bpf/agent_sandbox.bpf.c";
/// The feature probes the daemon loads before the programs (src/kernel/variant.rs).
const PROBE_SRC: &str = "src/bpf/probe.bpf.c";
/// The kernel types both include; the headers of src/bpf/ are found by `bpf_headers()`.
const KERNEL_TYPES: &str = "bpf/kernel_types.h";

/// Every `src/bpf/*.h`, sorted: agent_sandbox.h and the `*.bpf.h` that SRC includes.
fn bpf_headers() -> Vec<PathBuf> {
    let mut headers: Vec<PathBuf> = std::fs::read_dir("src/bpf")
        .expect("reading src/bpf")
        .map(|entry| entry.expect("reading src/bpf").path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "h"))
        .collect();
    headers.sort();
    headers
}

fn main() {
    let out_dir = PathBuf::from(env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let out = out_dir.join("agent_sandbox.skel.rs");
    SkeletonBuilder::new()
        .source(SRC)
        .obj(out_dir.join("agent_sandbox.bpf.o"))
        .clang_args(["-Ibpf", "-Isrc/bpf", "-Wall", "-Werror"])
        .build_and_generate(&out)
        .expect("compiling src/bpf/agent_sandbox.bpf.c (needs clang; run `make deps`)");
    SkeletonBuilder::new()
        .source(PROBE_SRC)
        .obj(out_dir.join("probe.bpf.o"))
        .clang_args(["-Ibpf", "-Isrc/bpf", "-Wall", "-Werror"])
        .build_and_generate(out_dir.join("probe.skel.rs"))
        .expect("compiling src/bpf/probe.bpf.c (needs clang; run `make deps`)");
    println!("cargo:rerun-if-changed={SRC}");
    println!("cargo:rerun-if-changed={PROBE_SRC}");
    println!("cargo:rerun-if-changed={KERNEL_TYPES}");
    for header in bpf_headers() {
        println!("cargo:rerun-if-changed={}", header.display());
    }
}
