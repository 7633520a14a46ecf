//! What `Device.run` runs before the steps it keeps, on the chains in place as `host run` does:
//! the warm-up (`fused_mh::Gpu::warm_up`: the step size, and with preconditioning the scales,
//! adapted launch by launch) and the burn-in (steps run and dropped, without the running
//! moments). Run here, in the same call as the steps, the chains stay on the device from the
//! first warm-up launch to the last step: no copy of the states and no statistics' buffers
//! per warm-up launch.

use fused_mh::{DeviceChains, DeviceTarget, Gpu, RunPlan, StepConfig, WarmupPlan};

use crate::interrupts::Interrupts;

/// The steps before the kept ones.
pub struct Before {
    /// Warm-up steps (0: none, the given step size is kept).
    pub warmup: u64,
    /// The acceptance rate the warm-up adapts the step size toward.
    pub target_accept: f64,
    /// Whether the warm-up adapts a scale per dimension too.
    pub precondition: bool,
    /// Steps run after the warm-up and dropped.
    pub burn_in: u64,
    /// The burn-in's steps per fused launch (the kept steps').
    pub steps_per_launch: u32,
}

/// Runs `before` on `chains` from `config`, reporting progress as steps done of `total` (the
/// call's warm-up, burn-in and kept steps): the configuration for the kept steps, and the
/// acceptance rate of the warm-up's last launch (NaN without a warm-up).
pub fn run_before(
    gpu: &Gpu,
    chains: &mut DeviceChains,
    target: &DeviceTarget,
    config: StepConfig,
    before: &Before,
    (interrupts, total): (&mut Interrupts, u64),
) -> fused_mh::Result<(StepConfig, f64)> {
    let (mut config, mut last_acceptance) = (config, f64::NAN);
    if before.warmup > 0 {
        let plan = WarmupPlan {
            steps: before.warmup,
            target_accept: before.target_accept,
            precondition: before.precondition,
        };
        let progress = &mut |p: &fused_mh::WarmupProgress| interrupts.check_progress(p.done, total);
        let warmed = gpu.warm_up(chains, target, &config, plan, progress)?;
        (config, last_acceptance) = (warmed.config, warmed.last_acceptance);
    }
    if before.burn_in > 0 {
        let mut dropped = gpu.new_stats(chains.shape(), false)?;
        let burn = RunPlan::new(before.burn_in, before.steps_per_launch);
        let done_before = before.warmup;
        gpu.run(
            chains,
            target,
            &config,
            &burn,
            &mut dropped,
            &mut |p| interrupts.check_progress(done_before + p.done, total),
            &mut |_| Ok(()),
        )?;
    }
    Ok((config, last_acceptance))
}
