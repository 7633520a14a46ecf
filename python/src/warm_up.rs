//! What `run` runs before the steps it keeps, on the chains in place as `host run` does: the
//! warm-up (`fused_mh::warm_up`: the step size, and with preconditioning the scales, adapted
//! launch by launch) and the burn-in (steps run and dropped). On the GPU ([`run_before`],
//! for `Device.run`) the chains stay on the device from the first warm-up launch to the last
//! step, in the same call as the steps: no copy of the states and no statistics' buffers per
//! warm-up launch; on the CPU ([`run_before_cpu`], for `_native.run`) the same steps on the
//! CPU reference.

use fused_mh::{DeviceChains, DeviceTarget, Gpu, RunPlan, StepConfig, Target, WarmupPlan, cpu};

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
    /// The burn-in's steps per fused launch on the GPU (the kept steps').
    pub steps_per_launch: u32,
}

impl Before {
    /// Every step of a call that keeps `steps`: the warm-up's, the burn-in's and the kept
    /// ones (the progress bar's total).
    pub fn total_with(&self, steps: u64) -> u64 {
        self.warmup
            .saturating_add(self.burn_in)
            .saturating_add(steps)
    }

    /// The warm-up's plan.
    fn plan(&self) -> WarmupPlan {
        WarmupPlan {
            steps: self.warmup,
            target_accept: self.target_accept,
            precondition: self.precondition,
        }
    }
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
        let plan = before.plan();
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

/// [`run_before`] on the CPU reference, for chains `x` from step counter `first_step`: the
/// states the steps start from (None: `x` itself, with neither a warm-up nor a burn-in), the
/// configuration for them, and the warm-up's last acceptance rate.
pub fn run_before_cpu(
    x: &[f32],
    (shape, target): (fused_mh::Shape, &Target),
    (config, first_step): (StepConfig, u64),
    before: &Before,
    (interrupts, total): (&mut Interrupts, u64),
) -> fused_mh::Result<(Option<Vec<f32>>, StepConfig, f64)> {
    let (mut config, mut last_acceptance, mut start) = (config, f64::NAN, None);
    if before.warmup > 0 {
        let mut states = crate::memory::reserved("the warm-up's states", x.len())?;
        states.extend_from_slice(x);
        let on_step = &mut |done| interrupts.check_progress(done, total);
        let plan = before.plan();
        let warmed = cpu::warm_up(
            &mut states,
            shape,
            target,
            &config,
            first_step,
            plan,
            on_step,
        )?;
        (config, last_acceptance) = (warmed.config, warmed.last_acceptance);
        start = Some(states);
    }
    if before.burn_in > 0 {
        let burnt = cpu::run_chains(
            start.as_deref().unwrap_or(x),
            shape,
            target,
            &config,
            first_step + before.warmup,
            before.burn_in,
            0,
            None,
            &mut |_, _| Ok(()),
            &mut |p| interrupts.check_progress(before.warmup + p.done, total),
        )?;
        start = Some(burnt.x);
    }
    Ok((start, config, last_acceptance))
}
