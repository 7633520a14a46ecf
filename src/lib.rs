//! fused-mh: one random-walk Metropolis–Hastings step for millions of independent chains, as
//! one fused GPU kernel written in Rust, with a CPU reference of the same semantics.
//!
//! For `x[batch, dim]`, a target `N(mu, diag(sigma^2))` and a step size, each chain proposes
//! `p = x + step_size * eps` with `eps ~ N(0, 1)`, computes
//! `log alpha = log pi(p) - log pi(x)`, draws `u ~ U[0, 1)` and moves to `p` exactly when
//! `log(max(u, 1e-10)) < log alpha`.
//!
//! - [`Gpu`] runs the step on a CUDA device (driver loaded at run time: no CUDA is needed to
//!   build this crate or to use its CPU parts).
//! - [`Gpu::run`] runs many steps per launch with the fused kernel (each chain in registers for
//!   K steps, bit-identical to K single steps), keeping accepted counts, running moments and a
//!   thinned trace ([`ChainStats`], [`RunPlan`]).
//! - [`cpu`] is the reference, built from the same kernel crate functions.
//! - [`Shape`], [`Target`] and [`StepConfig`] validate inputs once, for both; [`Draws`] says
//!   where a step's random numbers come from.
//!
//! # The map
//!
//! | role | where |
//! |---|---|
//! | kernel math, targets, kernels | the kernel crate, [`kernel`] (`kernel/src/lib.rs` has its map) |
//! | the problem: shape, target, configuration | `problem.rs`, `target.rs` |
//! | which kernel runs a launch | `dispatch/` (crate-private; the tests reach it through `testing`) |
//! | the GPU: open, upload, launch, run, borrowed memory | `device.rs`, `device/` ([`Gpu`], [`borrowed`]) |
//! | the CPU reference | [`cpu`] |
//! | diagnostics and adaptation | [`diagnostics`], [`adapt`], [`reach`] |
//! | generated starting points | [`starts`] |
//! | limits, embedded PTX | [`limits`], [`ptx`] |
//! | the project's own hooks (`testing` feature) | `testing` |
//!
//! ```no_run
//! use fused_mh::{Gpu, Shape, StepConfig, Target};
//! # fn main() -> fused_mh::Result<()> {
//! let shape = Shape::new(4096, 64)?;
//! let x_host = vec![0.5f32; shape.len()];
//! let target = Target::new(vec![0.0; 64], vec![1.0; 64])?;
//! let gpu = Gpu::open(0)?;
//! let mut chains = gpu.upload_chains(&x_host, shape)?;
//! let target_dev = gpu.upload_target(&target)?;
//! gpu.step(&mut chains, &target_dev, &StepConfig::new(0.3, 42)?)?;
//! let (x_new, accepted) = (chains.x()?, chains.accepted()?);
//! # Ok(()) }
//! ```

pub mod adapt;
pub mod cpu;
mod device;
pub mod diagnostics;
mod error;
pub mod model_inputs;
pub mod model_run;
pub mod prior_syntax;
mod problem;
pub mod reach;
pub mod starts;
mod target;
pub mod warm_up;

/// Declares a module that is public with the `testing` feature only (see [`testing`], where it
/// is meant to be reached from) and private otherwise.
macro_rules! testing_module {
    ($($name:ident),*) => {$(
        #[cfg(feature = "testing")]
        #[doc(hidden)]
        pub mod $name;
        #[cfg(not(feature = "testing"))]
        mod $name;
    )*};
}
testing_module!(dispatch, host_memory, threads);

pub use device::{
    ChainStats, CountLanding, CountMemory, DeviceChains, DeviceNoise, DeviceTarget, Gpu, RunCounts,
    RunPlan, StatesSnapshot, TraceChunk,
};
pub use diagnostics::{Diagnostics, DiagnosticsPlan, Progress};
pub use error::{Error, Result};
pub use fused_mh_kernel as kernel;
pub use problem::{Draws, Shape, StepConfig};
pub use target::{Target, TargetKind};
pub use warm_up::{Warmed, WarmupPlan, WarmupProgress};

/// Steps on device memory another library owns (a PyTorch tensor, a JAX array): what
/// [`Gpu::step_borrowed`] takes.
pub mod borrowed {
    pub use crate::device::{Borrowed, BorrowedNoise, BorrowedStep};
}

/// The limits the library works within, for callers that size their own work by them.
pub mod limits {
    pub use crate::device::{COUNT_FOLD_STEPS, MAX_ELEMENT_STEPS_PER_LAUNCH, TRACE_BUFFER_BYTES};
    pub use crate::dispatch::{RNG_THREADS_PER_BLOCK, THREADS_PER_BLOCK};
    pub use crate::target::{MAX_SQUARED_DISTANCE, SCALE_RANGE};
}

/// What the project's own tests, benchmark and lessons program use, and a user of the library
/// does not: the dispatcher, the fallible allocation and thread-pool helpers, and (as methods
/// that exist with this feature only) the lessons' launches, poisoned outputs, Philox on the
/// GPU and the CPU-GPU comparison with its tolerances.
#[cfg(feature = "testing")]
pub mod testing {
    pub use crate::cpu::compare::{
        Agreement, DECISION_MARGIN, MAX_FLIPPED_FRACTION, Mismatch, X_NEW_ABS_PER_STEP_SIZE,
        X_NEW_MAX_RELATIVE,
    };
    pub use crate::{dispatch, host_memory, threads};

    /// What the dispatcher knows of `gpu` (its SMs, whether it has the staged steps).
    pub fn device_of(gpu: &crate::Gpu) -> dispatch::Device {
        gpu.device()
    }
}

/// The PTX the kernels were compiled to, embedded in the library.
pub mod ptx {
    /// One compiled set of the kernels: PTX text for a target, which the driver turns into machine
    /// code for whatever GPU [`crate::Gpu::open`] finds.
    #[derive(Clone, Copy, Debug)]
    pub struct Module {
        /// The PTX target, e.g. `"sm_70"`.
        pub target: &'static str,
        /// The PTX text.
        pub text: &'static str,
    }

    impl Module {
        /// The compute capability the target needs, as `10 * major + minor` (`sm_80` → 80).
        pub fn min_compute_capability(&self) -> u32 {
            self.target
                .trim_start_matches("sm_")
                .trim_end_matches(['a', 'f'])
                .parse()
                .unwrap_or(u32::MAX)
        }
    }

    /// The kernels compiled by `build.rs` from `kernel/` and embedded here, oldest target first:
    /// - `sm_70`, the portable module: every GPU from Volta on;
    /// - `sm_80` (or `FUSED_MH_PTX_ARCH` at build time): the same kernels, plus those that use
    ///   instructions from Ampere on (the staged steps, `mh_step_staged_*`).
    ///
    /// [`crate::Gpu::open`] loads the newest module the GPU can run.
    pub const MODULES: [Module; 2] = [
        Module {
            target: env!("FUSED_MH_PTX_PORTABLE_ARCH"),
            text: include_str!(concat!(env!("OUT_DIR"), "/", env!("FUSED_MH_PTX_PORTABLE"))),
        },
        Module {
            target: env!("FUSED_MH_PTX_NEWER_ARCH"),
            text: include_str!(concat!(env!("OUT_DIR"), "/", env!("FUSED_MH_PTX_NEWER"))),
        },
    ];
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The staged kernels (`cp.async`) are in the newer module only, and each module names
    /// the compute capability it needs. (That every name the dispatch chooses is in the
    /// module it chooses it for: `dispatch::tests`.)
    #[test]
    fn staged_kernels_only_in_the_newer_module() {
        for name in [
            "mh_step_staged_q2_v4_gaussian",
            "mh_step_staged_q8_v4_gaussian",
        ] {
            let entry = format!(".entry {name}(");
            assert!(!ptx::MODULES[0].text.contains(&entry));
            assert!(ptx::MODULES[1].text.contains(&entry));
        }
        assert_eq!(ptx::MODULES[0].min_compute_capability(), 70);
        assert!(ptx::MODULES[1].min_compute_capability() >= 80);
    }

    /// Each module was compiled for the target it names.
    #[test]
    fn ptx_targets_match() {
        for module in ptx::MODULES {
            assert!(
                module.text.contains(&format!(".target {}", module.target)),
                "the {} module says otherwise",
                module.target
            );
        }
    }

    /// Register arrays that the compiler could not keep in registers end up in local memory
    /// (per-thread DRAM, slow): the PTX then declares a `.local` depot. No kernel may have one.
    #[test]
    fn ptx_uses_no_local_memory() {
        for module in ptx::MODULES {
            assert!(
                module.text.contains(".entry mh_step_q2"),
                "the embedded PTX has no kernels"
            );
            let locals: Vec<&str> = module
                .text
                .lines()
                .filter(|l| l.contains(".local"))
                .take(5)
                .collect();
            assert!(
                locals.is_empty(),
                "local memory in the {} PTX: {locals:?}",
                module.target
            );
        }
    }

    /// Whether a target holds the next long row in registers.
    struct InRegisters;
    impl kernel::target::VisitTarget for InRegisters {
        type Output = bool;
        fn visit<T: kernel::target::Target>(self) -> bool {
            T::NEXT_LONG_ROW_IN_REGISTERS
        }
    }

    /// build.rs gives the register-fed long-row entries their register limits by name, target
    /// by target (a build script cannot read the trait's constant), and the limits meant for
    /// staged rows spill a register-fed step (132 bytes at 128: `bench/NOTES.md`, issue 22,
    /// thirty-ninth part). So no target that holds its next row in registers may share a
    /// staged target's limit: a new such target needs its own lines in `REGISTER_LIMITS`.
    #[test]
    fn register_fed_long_rows_have_register_limits_of_their_own() {
        let [_, newer] = ptx::MODULES.map(|m| m.text);
        // The `.maxnreg` between an entry's name and its body, if any.
        let limit = |name: &str| {
            let start = format!(".entry {name}(");
            let header = newer
                .split(start.as_str())
                .nth(1)
                .unwrap_or_else(|| panic!("{name} is not in the newer module"));
            let header = header.split('{').next().unwrap_or_default();
            header
                .lines()
                .find_map(|l| l.trim().strip_prefix(".maxnreg "))
        };
        let (fed, staged): (Vec<&TargetKind>, Vec<&TargetKind>) = TargetKind::ALL
            .iter()
            .partition(|kind| kind.visit(InRegisters));
        assert!(!fed.is_empty(), "no target holds its rows in registers");
        for base in ["mh_step_block_rows_v4", "mh_step_block_rows_2w_v4"] {
            let i = kernel::abi::ENTRY_BASES
                .iter()
                .position(|b| *b == base)
                .unwrap_or_else(|| panic!("{base} is not an entry point"));
            for (f, s) in fed.iter().flat_map(|f| staged.iter().map(move |s| (f, s))) {
                let (fed_name, staged_name) = (f.entry_points()[i], s.entry_points()[i]);
                assert_ne!(
                    limit(fed_name),
                    limit(staged_name),
                    "{fed_name} takes the register limit of {staged_name}"
                );
            }
        }
    }

    /// The register-resident kernels stage the target in a shared array declared inside inline
    /// PTX (`stage_target` in the kernel crate), and the staged kernel its rows in another
    /// (`SharedFeed`), the block-per-row kernels their segments' sums in a third, and those of
    /// them that hold the next row in registers their lanes' target quads in a fourth. Were the
    /// compiler to duplicate such an asm block, a kernel would declare two arrays, write one
    /// and read the other. Each kernel must declare at most one of each, and the resident
    /// kernels exactly one target array.
    #[test]
    fn each_kernel_declares_at_most_one_shared_array() {
        let register_fed: Vec<&str> = TargetKind::ALL
            .iter()
            .filter(|kind| kind.visit(InRegisters))
            .flat_map(|kind| kind.entry_points().iter().copied())
            .filter(|name| {
                [
                    "mh_step_block_rows_v4_",
                    "mh_step_block_rows_2w_v4_",
                    "mh_step_block_rows_8w_v4_",
                ]
                .iter()
                .any(|base| name.starts_with(base))
            })
            .collect();
        assert!(
            !register_fed.is_empty(),
            "no target holds its rows in registers"
        );
        for module in ptx::MODULES {
            let mut kernels = module.text.split(".entry ").skip(1).peekable();
            assert!(kernels.peek().is_some(), "the embedded PTX has no kernels");
            for body in kernels {
                let name = body.split('(').next().unwrap_or_default();
                let arrays = body
                    .matches(".shared .align 16 .b8 fused_mh_target[")
                    .count();
                // The production kernels that keep rows in registers stage exactly one target
                // array; the lessons from lesson 7 on one, the earlier ones none.
                let resident = name.starts_with("mh_")
                    && ["_q2", "_q8", "_split", "_paired"]
                        .iter()
                        .any(|variant| name.contains(variant));
                let allowed = if name.starts_with("lesson") {
                    arrays <= 1
                } else {
                    arrays == usize::from(resident)
                };
                assert!(allowed, "{name} declares {arrays} staged target arrays");
                let staging = body
                    .matches(".shared .align 16 .b8 fused_mh_staging[")
                    .count();
                let block_rows = name.starts_with("mh_step_block_rows_");
                // The 8-warp block step stages (or stashes the target) in the launch's dynamic
                // shared memory instead: one module-wide array, no declaration of its own; the
                // 2- and 4-warp ones of a target that holds the next row in registers stage
                // nothing.
                let dynamic = block_rows && name.contains("_8w_");
                let unstaged = dynamic || register_fed.contains(&name);
                assert!(
                    staging
                        == usize::from(name.starts_with("mh_step_staged_") || block_rows)
                            - usize::from(unstaged),
                    "{name} declares {staging} row staging arrays"
                );
                assert_eq!(
                    body.contains("fused_mh_dynamic_staging"),
                    dynamic,
                    "{name}: the dynamic staging array"
                );
                // The same register-fed ones keep their lanes' target quads in a stash: an
                // array of their own up to 4 warps, the dynamic shared memory for 8.
                let stashes = body
                    .matches(".shared .align 16 .b8 fused_mh_target_stash[")
                    .count();
                assert_eq!(
                    stashes,
                    usize::from(register_fed.contains(&name) && !dynamic),
                    "{name} declares {stashes} target stashes"
                );
                let sums = body
                    .matches(".shared .align 16 .b8 fused_mh_segment_sums[")
                    .count();
                let with_sums = block_rows || name.starts_with("mh_step_with_noise_block_rows_");
                assert!(
                    sums == usize::from(with_sums),
                    "{name} declares {sums} segment sums arrays"
                );
            }
        }
    }
}
