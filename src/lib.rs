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
//! - [`Shape`], [`Target`] and [`StepConfig`] validate inputs once, for both.
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
pub mod dispatch;
mod error;
pub mod host_memory;
mod problem;
pub mod reach;
mod target;
pub mod threads;

pub use device::{
    Borrowed, BorrowedDraws, BorrowedStep, COUNT_FOLD_STEPS, ChainStats, DeviceChains, DeviceNoise,
    DeviceTarget, Gpu, MAX_ELEMENT_STEPS_PER_LAUNCH, RunPlan, TRACE_BUFFER_BYTES, TraceChunk,
};
pub use diagnostics::{Diagnostics, DiagnosticsPlan, Progress};
pub use dispatch::{RNG_THREADS_PER_BLOCK, THREADS_PER_BLOCK};
pub use error::{Error, Result};
pub use fused_mh_kernel as kernel;
pub use problem::{Shape, StepConfig};
pub use target::{MAX_SQUARED_DISTANCE, Target, TargetKind};

/// One compiled set of the kernels: PTX text for a target, which the driver turns into machine
/// code for whatever GPU [`Gpu::open`] finds.
#[derive(Clone, Copy, Debug)]
pub struct PtxModule {
    /// The PTX target, e.g. `"sm_70"`.
    pub target: &'static str,
    /// The PTX text.
    pub text: &'static str,
}

impl PtxModule {
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
/// [`Gpu::open`] loads the newest module the GPU can run.
pub const PTX_MODULES: [PtxModule; 2] = [
    PtxModule {
        target: env!("FUSED_MH_PTX_PORTABLE_ARCH"),
        text: include_str!(concat!(env!("OUT_DIR"), "/", env!("FUSED_MH_PTX_PORTABLE"))),
    },
    PtxModule {
        target: env!("FUSED_MH_PTX_NEWER_ARCH"),
        text: include_str!(concat!(env!("OUT_DIR"), "/", env!("FUSED_MH_PTX_NEWER"))),
    },
];

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
            assert!(!PTX_MODULES[0].text.contains(&entry));
            assert!(PTX_MODULES[1].text.contains(&entry));
        }
        assert_eq!(PTX_MODULES[0].min_compute_capability(), 70);
        assert!(PTX_MODULES[1].min_compute_capability() >= 80);
    }

    /// Each module was compiled for the target it names.
    #[test]
    fn ptx_targets_match() {
        for module in PTX_MODULES {
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
        for module in PTX_MODULES {
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

    /// The register-resident kernels stage the target in a shared array declared inside inline
    /// PTX (`stage_target` in the kernel crate), and the staged kernel its rows in another
    /// (`SharedFeed`). Were the compiler to duplicate such an asm block, a kernel would declare
    /// two arrays, write one and read the other. Each kernel must declare at most one of each,
    /// and the resident kernels exactly one target array.
    #[test]
    fn each_kernel_declares_at_most_one_shared_array() {
        for module in PTX_MODULES {
            let mut kernels = module.text.split(".entry ").skip(1).peekable();
            assert!(kernels.peek().is_some(), "the embedded PTX has no kernels");
            for body in kernels {
                let name = body.split('(').next().unwrap_or_default();
                let arrays = body
                    .matches(".shared .align 16 .b8 fused_mh_target[")
                    .count();
                // The production kernels that keep rows in registers (the lessons stage nothing).
                let resident = name.starts_with("mh_")
                    && (name.contains("_q2") || name.contains("_q8") || name.contains("_split"));
                assert!(
                    arrays == usize::from(resident),
                    "{name} declares {arrays} staged target arrays"
                );
                let staging = body
                    .matches(".shared .align 16 .b8 fused_mh_staging[")
                    .count();
                assert!(
                    staging == usize::from(name.starts_with("mh_step_staged_")),
                    "{name} declares {staging} row staging arrays"
                );
            }
        }
    }
}
