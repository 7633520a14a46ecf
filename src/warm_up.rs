//! The warm-up (`host run --warmup`, `fused_mh.run(..., warmup=N)`): launches of
//! [`WARMUP_LAUNCH_STEPS`] steps on the chains in place, the step size adapting after each
//! toward a target acceptance rate, and with preconditioning a scale per dimension adapting in
//! the first half to the chains' pooled variance ([`crate::adapt`] has the rules). Only the
//! states, the step size and the scales are kept.
//!
//! [`run_warm_up`] is the loop, the same for both machines; a machine gives it the launch:
//! [`crate::Gpu::warm_up`] on the GPU, [`crate::cpu::warm_up`] on the CPU reference.

use crate::StepConfig;
use crate::adapt::{ScaleAdaptation, StepSizeAdaptation, WARMUP_LAUNCH_STEPS};
use crate::error::{Error, Result};

/// What a warm-up runs: its steps, the acceptance rate the step size adapts toward (in
/// `(0, 1)`), and whether a scale per dimension adapts too (in the first half).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct WarmupPlan {
    /// Warm-up steps.
    pub steps: u64,
    /// The acceptance rate the step size adapts toward.
    pub target_accept: f64,
    /// Whether the scales adapt (diagonal preconditioning).
    pub precondition: bool,
}

/// Where a warm-up is, after each launch.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct WarmupProgress {
    /// Warm-up steps done.
    pub done: u64,
    /// The warm-up's steps.
    pub total: u64,
    /// The acceptance rate of the launch just run.
    pub acceptance: f64,
    /// The step size for the next launch.
    pub step_size: f32,
}

/// What a warm-up leaves beside the chains' states.
#[derive(Clone, Debug)]
pub struct Warmed {
    /// The adapted configuration: the step size, the seed, and the scales (adapted, or the
    /// ones given).
    pub config: StepConfig,
    /// The acceptance rate of the last launch (NaN without warm-up steps).
    pub last_acceptance: f64,
    /// Warm-up steps of all chains whose `log alpha` was not finite.
    pub nonfinite: u64,
}

/// One warm-up launch, as the loop asks a machine for it.
#[derive(Clone, Copy, Debug)]
pub struct Launch<'a> {
    /// The launch's configuration.
    pub config: &'a StepConfig,
    /// Warm-up steps before it (its first step is the warm-up's first step plus these).
    pub done: u64,
    /// Its steps.
    pub steps: u64,
    /// Whether the loop wants the chains' pooled variance per dimension over its draws.
    pub pooled: bool,
}

/// What a launch gives back: the accepted and non-finite steps of all chains, and the pooled
/// variance where it was asked for.
#[derive(Clone, Debug, Default)]
pub struct Launched {
    /// Accepted steps of all chains.
    pub accepted: u64,
    /// Steps of all chains whose `log alpha` was not finite.
    pub nonfinite: u64,
    /// The pooled variance per dimension (`[dim]`), where [`Launch::pooled`].
    pub pooled_variance: Option<Vec<f64>>,
}

/// The warm-up of `plan` for `batch` chains of `dim` from `config`'s step size (and its scales,
/// held fixed; a configuration with scales and `plan.precondition` is refused, as the one
/// gives what the other adapts): `launch` runs each launch, `on_launch` follows it (an error
/// from either stops the warm-up and is returned).
pub fn run_warm_up(
    config: &StepConfig,
    plan: WarmupPlan,
    (batch, dim): (usize, usize),
    launch: &mut dyn FnMut(Launch<'_>) -> Result<Launched>,
    on_launch: &mut dyn FnMut(&WarmupProgress) -> Result<()>,
) -> Result<Warmed> {
    if !(plan.target_accept > 0.0 && plan.target_accept < 1.0) {
        return Err(Error::InvalidRun(format!(
            "the target acceptance rate must be in (0, 1), not {}",
            plan.target_accept
        )));
    }
    if plan.precondition && config.scales().is_some() {
        return Err(Error::InvalidRun(
            "preconditioning adapts the scales that the configuration gives: one or the other"
                .into(),
        ));
    }
    let mut adapt = StepSizeAdaptation::new(config.step_size(), plan.target_accept);
    let mut scaling = plan.precondition.then(|| ScaleAdaptation::new(dim));
    let fixed = config.scales();
    let launch_config = |adapt: &StepSizeAdaptation, scaling: &Option<ScaleAdaptation>| {
        let c = StepConfig::new(adapt.step_size(), config.seed())?;
        match scaling.as_ref().map(ScaleAdaptation::scales).or(fixed) {
            Some(s) => c.with_scales(s),
            None => Ok(c),
        }
    };
    let (mut done, mut nonfinite, mut last_acceptance) = (0, 0, f64::NAN);
    while done < plan.steps {
        let steps = WARMUP_LAUNCH_STEPS.min(plan.steps - done);
        // The scales adapt in the first half, from launches of 2 steps or more (a variance).
        let pooled = scaling.is_some() && done < plan.steps / 2 && steps >= 2;
        let config = launch_config(&adapt, &scaling)?;
        let launched = launch(Launch {
            config: &config,
            done,
            steps,
            pooled,
        })?;
        last_acceptance = launched.accepted as f64 / (steps as f64 * batch as f64);
        nonfinite += launched.nonfinite;
        if let (Some(s), Some(variance)) = (scaling.as_mut(), &launched.pooled_variance) {
            s.update(variance);
        }
        adapt.update(last_acceptance);
        done += steps;
        on_launch(&WarmupProgress {
            done,
            total: plan.steps,
            acceptance: last_acceptance,
            step_size: adapt.step_size(),
        })?;
    }
    Ok(Warmed {
        config: launch_config(&adapt, &scaling)?,
        last_acceptance,
        nonfinite,
    })
}
