//! The warm-up on the GPU ([`crate::warm_up`] has the loop): each launch a fused launch on the
//! chains in place, without the running moments unless the scales adapt to its pooled
//! variance.
//!
//! Each launch's acceptance rate is two sums over a million chains' counts: they are
//! downloaded into page-locked memory made once for the warm-up ([`crate::CountLanding`]) and
//! added on the host's cores, a fraction of a millisecond, where reading them as 64-bit totals
//! in fresh memory costs milliseconds a launch.

use super::{DeviceChains, DeviceTarget, Gpu};
use crate::error::Result;
use crate::warm_up::{Launch, Launched, Warmed, WarmupPlan, WarmupProgress, run_warm_up};
use crate::{ChainStats, StepConfig};

impl Gpu {
    /// `plan.steps` warm-up steps of `chains` in place from `config` ([`run_warm_up`]),
    /// `on_launch` after each launch. The chains' step counter advances by `plan.steps`.
    pub fn warm_up(
        &self,
        chains: &mut DeviceChains,
        target: &DeviceTarget,
        config: &StepConfig,
        plan: WarmupPlan,
        on_launch: &mut dyn FnMut(&WarmupProgress) -> Result<()>,
    ) -> Result<Warmed> {
        let shape = chains.shape;
        // Where the driver refuses page-locked memory, the counts are read as totals.
        let mut landing = self.count_landing(shape.batch()).ok();
        let mut launch = |l: Launch<'_>| -> Result<Launched> {
            let mut stats = self.new_stats(shape, l.pooled)?;
            // A launch is at most `WARMUP_LAUNCH_STEPS` (10) steps: the cast keeps them.
            self.steps(chains, target, l.config, l.steps as u32, &mut stats)?;
            let (accepted, nonfinite) = match landing.as_mut() {
                Some(landing) => stats.count_sums(landing)?,
                None => total_counts(&stats)?,
            };
            let pooled_variance = match l.pooled {
                true => Some(self.diagnostics(&stats, target, 1)?.variance),
                false => None,
            };
            Ok(Launched {
                accepted,
                nonfinite,
                pooled_variance,
            })
        };
        let size = (shape.batch(), shape.dim());
        run_warm_up(config, plan, size, &mut launch, on_launch)
    }
}

/// The accepted and non-finite steps of all chains in `stats`, read as totals.
fn total_counts(stats: &ChainStats) -> Result<(u64, u64)> {
    Ok((
        stats.accepted_counts()?.iter().sum(),
        stats.nonfinite_counts()?.iter().sum(),
    ))
}
