//! Compiles the `kernel/` crate to PTX and hands it to the library (the role `cuda_builder`
//! plays in Rust-CUDA).
//!
//! The PTX is produced by a nested `cargo rustc` for `nvptx64-nvidia-cuda`:
//! - `-Zbuild-std=core`: rustup ships no prebuilt `core` for nvptx64, so it is built from the
//!   `rust-src` component;
//! - `--crate-type cdylib`: a "shared library" for nvptx64 is one PTX module, linked from LLVM
//!   bitcode by the `llvm-bitcode-linker` component;
//! - `-C target-cpu=sm_XX`: the PTX target. The crate is built twice, in parallel:
//!   - `sm_70` (Volta), the *portable* module: it runs on every GPU from Volta on (the driver
//!     compiles PTX for the GPU it finds);
//!   - `sm_80` (Ampere) by default, the module for GPUs from Ampere on: the same kernels plus
//!     those that need sm_80 instructions (`cp.async`, see `kernel/src/gpu/shared_feed.rs`). The
//!     environment variable `FUSED_MH_PTX_ARCH` overrides its target (e.g. `sm_90`).
//!
//!   The host loads the newest module the GPU can run.
//!
//! Each nested build has its own target directory under `OUT_DIR` and runs with the variables
//! that this outer cargo set for the host build removed (`RUSTFLAGS`, `CARGO_*`, wrappers such
//! as clippy's), so the kernel is built the same way whatever command started the outer build.
//! The results are written to `$OUT_DIR/fused_mh_kernel_<arch>.ptx`, with a register limit on
//! the model kernels and the block-per-row steps ([`limit_registers`]), and `src/lib.rs`
//! embeds them with `include_str!` (the file names reach it as `FUSED_MH_PTX_PORTABLE` and
//! `FUSED_MH_PTX_NEWER`).

use std::env;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, exit};

const PTX_ARCH_VAR: &str = "FUSED_MH_PTX_ARCH";
/// The portable module's target.
const PORTABLE_ARCH: &str = "sm_70";
/// The newer module's target unless `FUSED_MH_PTX_ARCH` says otherwise; its kernels need at
/// least this.
const DEFAULT_NEWER_ARCH: &str = "sm_80";
const NVPTX_TARGET: &str = "nvptx64-nvidia-cuda";

fn main() {
    let root =
        PathBuf::from(env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    let out_dir = PathBuf::from(env::var("OUT_DIR").expect("cargo sets OUT_DIR"));
    let kernel_dir = root.join("kernel");

    println!("cargo::rerun-if-changed=kernel/src");
    println!("cargo::rerun-if-changed=kernel/Cargo.toml");
    println!("cargo::rerun-if-changed=rust-toolchain.toml");
    println!("cargo::rerun-if-env-changed={PTX_ARCH_VAR}");

    let arch = env::var(PTX_ARCH_VAR).unwrap_or_else(|_| DEFAULT_NEWER_ARCH.to_string());
    let number = arch
        .strip_prefix("sm_")
        .map(|n| n.trim_end_matches(['a', 'f']))
        .and_then(|n| n.parse::<u32>().ok());
    match number {
        Some(n) if n >= 80 => {}
        _ => fail(&format!(
            "{PTX_ARCH_VAR}={arch:?} is not a PTX target from sm_80 on; use e.g. sm_80 or sm_90"
        )),
    }

    let toolchain = pinned_toolchain(&root);
    check_components(&kernel_dir, &toolchain);

    // Both builds at once: they share nothing but the toolchain.
    let builds: Vec<_> = [PORTABLE_ARCH, arch.as_str()]
        .into_iter()
        .map(|arch| (arch, start_kernel_build(&kernel_dir, &out_dir, arch)))
        .collect();
    for (arch, (mut child, target_dir)) in builds {
        let status = child
            .wait()
            .unwrap_or_else(|e| fail(&format!("could not run cargo: {e}")));
        if !status.success() {
            fail(&format!(
                "building kernel/ for {NVPTX_TARGET} ({arch}) failed (see the errors above). If a \
                 toolchain component is missing, run `rustup toolchain install` in the \
                 repository root."
            ));
        }
        let ptx = target_dir
            .join(NVPTX_TARGET)
            .join("release")
            .join("fused_mh_kernel.ptx");
        let text = fs::read_to_string(&ptx)
            .unwrap_or_else(|e| fail(&format!("the kernel build wrote no {}: {e}", ptx.display())));
        let out = out_dir.join(format!("fused_mh_kernel_{arch}.ptx"));
        fs::write(&out, limit_registers(&text))
            .unwrap_or_else(|e| fail(&format!("could not write {}: {e}", out.display())));
    }
    println!("cargo::rustc-env=FUSED_MH_PTX_PORTABLE=fused_mh_kernel_{PORTABLE_ARCH}.ptx");
    println!("cargo::rustc-env=FUSED_MH_PTX_NEWER=fused_mh_kernel_{arch}.ptx");
    println!("cargo::rustc-env=FUSED_MH_PTX_PORTABLE_ARCH={PORTABLE_ARCH}");
    println!("cargo::rustc-env=FUSED_MH_PTX_NEWER_ARCH={arch}");
}

/// Registers a thread of a model kernel (`mh_model_steps_*`) may take: ptxas gives the
/// logistic regression's 133 unbounded, which fits 3 blocks of 4 warps on an SM; at 80, 6 fit
/// (as many as its shared slots allow), and the SM has twice the warps to hide the row loop's
/// latencies with (`bench/NOTES.md`, issue 21, third part).
const MODEL_MAX_REGISTERS: u32 = 80;

/// Registers a thread of the in-kernel-RNG block-per-row step of two-warp blocks
/// (`mh_step_block_rows_2w_*`, rows of 1025 to 2048) may take when the next row is staged in
/// shared memory (the default, `Target::NEXT_LONG_ROW_IN_REGISTERS`): ptxas gives 122
/// unbounded, 8 blocks on an SM; at 96, 10 fit (20 warps, as for the staged one-warp-per-row
/// step, whose row of 1024 is the same work as one of these warps' segments). The four-warp
/// blocks ran slower at 96 (5 blocks instead of 4, but the spills and the longer schedule cost
/// more: `bench/NOTES.md`, issue 22, second part).
const BLOCK_ROWS_MAX_REGISTERS: u32 = 96;

/// Registers a thread of the in-kernel-RNG block-per-row steps of four and eight warps
/// (`mh_step_block_rows_v4_*`, `mh_step_block_rows_8w_v4_*`) may take when the next row is
/// staged in shared memory: with a segment's quads computed behind one branch
/// (`block_rows::SEGMENT_QUADS_TOGETHER`) ptxas gave the Gaussian's four-warp step 134
/// unbounded, 3 blocks on an SM; at 128, 4 fit, with no spill (`bench/NOTES.md`, issue 22,
/// twentieth part). The eight-warp step takes it with the next row in registers too: 128 is
/// the most that lets 2 blocks of 8 warps onto an SM.
const WIDE_BLOCK_ROWS_MAX_REGISTERS: u32 = 128;

/// Registers a thread of the in-kernel-RNG block-per-row step of four-warp blocks may take
/// when its target holds the next row in registers (`Target::NEXT_LONG_ROW_IN_REGISTERS`, 32
/// registers a thread): the Gaussian's takes 248 unbounded (2 blocks on an SM), spills 132
/// bytes at 128 (4 blocks), none at 168 (3 blocks, the fastest of the three:
/// `bench/NOTES.md`, issue 22, thirty-ninth part).
const REGISTER_FED_BLOCK_ROWS_MAX_REGISTERS: u32 = 168;

/// The entries' register limits: a name prefix and the limit (`None`: none, ptxas's own); the
/// first prefix that an entry's name starts with decides. The two-warp blocks' step of a
/// target that holds the next row in registers takes no limit: the Gaussian's takes 248, 4
/// blocks of 2 warps on an SM, faster than 6 at 168 (the same part).
const REGISTER_LIMITS: [(&str, Option<u32>); 6] = [
    ("mh_model_steps_", Some(MODEL_MAX_REGISTERS)),
    // The block-row entries of the targets that hold the next long row in registers.
    ("mh_step_block_rows_2w_v4_gaussian", None),
    (
        "mh_step_block_rows_v4_gaussian",
        Some(REGISTER_FED_BLOCK_ROWS_MAX_REGISTERS),
    ),
    ("mh_step_block_rows_2w_", Some(BLOCK_ROWS_MAX_REGISTERS)),
    (
        "mh_step_block_rows_v4_",
        Some(WIDE_BLOCK_ROWS_MAX_REGISTERS),
    ),
    (
        "mh_step_block_rows_8w_v4_",
        Some(WIDE_BLOCK_ROWS_MAX_REGISTERS),
    ),
];

/// `ptx` with a `.maxnreg` directive ([`REGISTER_LIMITS`]) after the parameter list of every
/// entry named there, the place PTX's performance-tuning directives go. rustc has no attribute
/// for it; `nvcc`'s `__launch_bounds__` and `-maxrregcount` end up the same way.
fn limit_registers(ptx: &str) -> String {
    let mut out = String::with_capacity(ptx.len() + 1024);
    let mut limit_after_params = None;
    for line in ptx.lines() {
        out.push_str(line);
        out.push('\n');
        if let Some(name) = line.strip_prefix(".visible .entry ") {
            limit_after_params = REGISTER_LIMITS
                .iter()
                .find(|(prefix, _)| name.starts_with(prefix))
                .and_then(|&(_, limit)| limit);
        } else if line.starts_with(')')
            && let Some(limit) = limit_after_params.take()
        {
            out.push_str(&format!(".maxnreg {limit}\n"));
        }
    }
    out
}

/// Starts the nested build of the kernel crate for `-C target-cpu=arch`, in its own target
/// directory; returns the running cargo and that directory.
fn start_kernel_build(kernel_dir: &Path, out_dir: &Path, arch: &str) -> (Child, PathBuf) {
    let target_dir = out_dir.join(format!("kernel-target-{arch}"));
    let mut cargo = clean_command("cargo", kernel_dir);
    cargo.args([
        "rustc",
        "--lib",
        "--release",
        "--target",
        NVPTX_TARGET,
        "-Zbuild-std=core",
    ]);
    cargo
        .args(["--crate-type", "cdylib", "--target-dir"])
        .arg(&target_dir);
    // Through the flags variable, not `cargo rustc -- ...`: the target CPU must be the same for
    // every crate of the kernel, `core` and `libm` included, or rustc refuses to link them.
    // `-unroll-threshold`: the kernels keep a row's quads in small arrays indexed by the
    // counter of a constant-trip-count loop; only a fully unrolled loop lets LLVM put them in
    // registers. Its default size limit (the loop body holds Philox and Box-Muller, a few
    // hundred instructions) refuses the unroll and sends the arrays to local memory, which
    // `tests::ptx_uses_no_local_memory` in src/lib.rs catches.
    let flags = [
        format!("-Ctarget-cpu={arch}"),
        "-Cllvm-args=-unroll-threshold=4000".to_string(),
    ];
    cargo.env("CARGO_ENCODED_RUSTFLAGS", flags.join("\x1f"));
    let child = cargo
        .spawn()
        .unwrap_or_else(|e| fail(&format!("could not run cargo: {e}")));
    (child, target_dir)
}

/// A command with the outer build's cargo and rustc variables removed, run in `dir` so that
/// rustup picks the toolchain of `rust-toolchain.toml`.
fn clean_command(program: &str, dir: &Path) -> Command {
    let mut cmd = Command::new(program);
    cmd.current_dir(dir);
    for (key, _) in env::vars_os() {
        let Some(key) = key.to_str() else { continue };
        let keep = matches!(key, "CARGO_HOME")
            || [
                "CARGO_NET_",
                "CARGO_HTTP_",
                "CARGO_REGISTRIES_",
                "CARGO_REGISTRY_",
                "CARGO_TERM_",
            ]
            .iter()
            .any(|p| key.starts_with(p));
        let outer = key == "CARGO"
            || key.starts_with("CARGO_")
            || key.starts_with("__CARGO")
            || key.starts_with("RUSTC")
            || key.starts_with("RUSTDOC")
            || key == "RUSTFLAGS"
            || key == "RUSTUP_TOOLCHAIN"
            || matches!(
                key,
                "TARGET" | "HOST" | "PROFILE" | "OPT_LEVEL" | "DEBUG" | "NUM_JOBS" | "OUT_DIR"
            );
        if outer && !keep {
            cmd.env_remove(key);
        }
    }
    cmd
}

/// The `channel` of `rust-toolchain.toml`, for the error messages.
fn pinned_toolchain(root: &Path) -> String {
    let text = fs::read_to_string(root.join("rust-toolchain.toml")).unwrap_or_default();
    text.lines()
        .filter_map(|l| l.trim().strip_prefix("channel"))
        .filter_map(|rest| rest.trim().strip_prefix('='))
        .map(|v| v.trim().trim_matches('"').to_string())
        .next()
        .unwrap_or_else(|| "nightly".to_string())
}

/// Fails with one message naming the `rustup` command when the toolchain, `rust-src` or
/// `llvm-bitcode-linker` is missing: the nested build's own errors for these are long and
/// confusing.
fn check_components(kernel_dir: &Path, toolchain: &str) {
    let install =
        "run `rustup toolchain install` in the repository root (it reads rust-toolchain.toml)";
    let output = clean_command("rustc", kernel_dir)
        .args(["--print", "sysroot"])
        .output()
        .unwrap_or_else(|e| fail(&format!("rustc could not be run ({e}): {install}")));
    if !output.status.success() {
        fail(&format!(
            "toolchain {toolchain} is not available: {install}"
        ));
    }
    let sysroot = PathBuf::from(String::from_utf8_lossy(&output.stdout).trim());
    let rustlib = sysroot.join("lib").join("rustlib");
    if !rustlib.join("src/rust/library/core/src/lib.rs").exists() {
        fail(&format!(
            "the rust-src component is missing (needed to build `core` for {NVPTX_TARGET}): run \
             `rustup component add rust-src --toolchain {toolchain}`, or {install}"
        ));
    }
    let linker_found = fs::read_dir(&rustlib)
        .into_iter()
        .flatten()
        .flatten()
        .any(|host| {
            let bin = host.path().join("bin");
            bin.join("llvm-bitcode-linker").exists()
                || bin.join("self-contained/llvm-bitcode-linker").exists()
        });
    if !linker_found {
        fail(&format!(
            "the llvm-bitcode-linker component is missing (it links the kernel into PTX): run \
             `rustup component add llvm-bitcode-linker llvm-tools --toolchain {toolchain}`, or {install}"
        ));
    }
}

fn fail(message: &str) -> ! {
    eprintln!("error: fused-mh build: {message}");
    exit(1)
}
