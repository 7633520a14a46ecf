//! The warm-up on the GPU (`host run --warmup`, `fused_mh.run(..., warmup=N)`): launches of
//! [`WARMUP_LAUNCH_STEPS`] steps on the chains in place, the step size adapting after each
//! toward a target acceptance rate, and with preconditioning a scale per dimension adapting in
//! the first half to the chains' pooled variance ([`crate::adapt`] has the rules). Only the
//! states, the step size and the scales are kept.
//!
//! Each launch's acceptance rate is two sums over a million chains' counts: they are
//! downloaded into page-locked memory made once for the warm-up ([`crate::CountLanding`]) and
//! added on the host's cores, a fraction of a millisecond, where reading them as 64-bit totals
//! in fresh memory costs milliseconds a launch.

use super::count_memory::CountLanding;
use super::{DeviceChains, DeviceTarget, Gpu};
use crate::adapt::{ScaleAdaptation, StepSizeAdaptation, WARMUP_LAUNCH_STEPS};
use crate::error::{Error, Result};
use crate::{ChainStats, StepConfig};

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

impl Gpu {
    /// `plan.steps` warm-up steps of `chains` in place, from `config`'s step size (and its
    /// scales, held fixed; a configuration with scales and `plan.precondition` is refused, as
    /// the one gives what the other adapts), `on_launch` after each launch (an error from it
    /// stops the warm-up and is returned). The chains' step counter advances by `plan.steps`.
    pub fn warm_up(
        &self,
        chains: &mut DeviceChains,
        target: &DeviceTarget,
        config: &StepConfig,
        plan: WarmupPlan,
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
        let shape = chains.shape;
        let mut adapt = StepSizeAdaptation::new(config.step_size(), plan.target_accept);
        let mut scaling = plan.precondition.then(|| ScaleAdaptation::new(shape.dim()));
        let fixed = config.scales();
        let launch_config = |adapt: &StepSizeAdaptation, scaling: &Option<ScaleAdaptation>| {
            let c = StepConfig::new(adapt.step_size(), config.seed())?;
            match scaling.as_ref().map(ScaleAdaptation::scales).or(fixed) {
                Some(s) => c.with_scales(s),
                None => Ok(c),
            }
        };
        // Where the driver refuses page-locked memory, the counts are read as totals.
        let mut landing = self.count_landing(shape.batch()).ok();
        let (mut done, mut nonfinite, mut last_acceptance) = (0, 0, f64::NAN);
        while done < plan.steps {
            let k = WARMUP_LAUNCH_STEPS.min(plan.steps - done);
            // The scales adapt in the first half, from launches of 2 steps or more (a variance).
            let with_scales = scaling.is_some() && done < plan.steps / 2 && k >= 2;
            let mut stats = self.new_stats(shape, with_scales)?;
            let c = launch_config(&adapt, &scaling)?;
            self.steps(chains, target, &c, k as u32, &mut stats)?;
            let (accepted, bad) = count_sums(&stats, landing.as_mut())?;
            last_acceptance = accepted as f64 / (k as f64 * shape.batch() as f64);
            nonfinite += bad;
            if let Some(s) = scaling.as_mut().filter(|_| with_scales) {
                s.update(&self.diagnostics(&stats, target, 1)?.variance);
            }
            adapt.update(last_acceptance);
            done += k;
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
}

/// The accepted and non-finite steps of all chains in `stats`: through `landing`, or read as
/// totals where there is none.
fn count_sums(stats: &ChainStats, landing: Option<&mut CountLanding>) -> Result<(u64, u64)> {
    match landing {
        Some(landing) => stats.count_sums(landing),
        None => Ok((
            stats.accepted_counts()?.iter().sum(),
            stats.nonfinite_counts()?.iter().sum(),
        )),
    }
}
