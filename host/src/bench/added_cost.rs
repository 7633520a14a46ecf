//! What something adds to a fused launch, timed: the split diagnostics over a run, the
//! per-dimension proposal scales.

use anyhow::Result;
use fused_mh::diagnostics::SplitSchedule;
use fused_mh::{ChainStats, DeviceChains, DeviceTarget, DiagnosticsPlan, Gpu, RunPlan};
use serde::Serialize;

use super::{BenchArgs, Times, time_each};
use crate::inputs::{self, Inputs};

/// What something added to a fused launch costs: the shape, K, and the launch's time without
/// and with it.
#[derive(Debug, Serialize)]
pub(super) struct AddedCost {
    pub(super) batch: usize,
    pub(super) dim: usize,
    pub(super) steps_per_launch: u32,
    pub(super) launch: Times,
    pub(super) launch_with: Times,
    pub(super) fraction: f64,
    pub(super) target_fraction: f64,
}

/// The shape the diagnostics' cost is measured at, and its target: at most 5 % of the run's
/// fused launches.
const DIAGNOSTICS_CASE: (usize, usize, u32, f64) = (1048576, 64, 100, 0.05);

/// The run whose diagnostics are timed: 10 launches of [`DIAGNOSTICS_CASE`]'s K, as `host
/// run --steps 1000` makes them (its split statistics close halves after 500 and 1000 steps,
/// the ends of launches; the diagnostics at 1000).
const DIAGNOSTICS_RUN_STEPS: u64 = 1000;

/// Times runs of [`DIAGNOSTICS_RUN_STEPS`] steps with moments at [`DIAGNOSTICS_CASE`] (fresh
/// statistics each), without and with the split diagnostics as `host run` plans them; the
/// times are of the whole run, so `fraction` is what the diagnostics add to it (the launches
/// cut at the boundaries, the merges and the reductions).
pub(super) fn diagnostics_cost(gpu: &Gpu, args: &BenchArgs) -> Result<AddedCost> {
    let (_, dim, k, _) = DIAGNOSTICS_CASE;
    let inputs = inputs::generate(DIAGNOSTICS_CASE.0, dim, args.seed, false)?;
    let schedule =
        SplitSchedule::ending_at(DIAGNOSTICS_RUN_STEPS, u64::from(k)).expect("a long enough run");
    added_cost(
        gpu,
        args,
        DIAGNOSTICS_CASE,
        &inputs,
        true,
        |gpu, run, with| {
            let mut stats = gpu.new_stats(inputs.shape, true)?;
            let plan = RunPlan {
                diagnostics: with.then_some(DiagnosticsPlan {
                    superchain_size: 1,
                    until_rhat: None,
                    min_draws: 4,
                    schedule,
                }),
                ..RunPlan::new(DIAGNOSTICS_RUN_STEPS, k)
            };
            let config = &inputs.config;
            gpu.run(
                run.chains,
                run.target,
                config,
                &plan,
                &mut stats,
                &mut |_| Ok(()),
                &mut |_| Ok(()),
            )?;
            Ok(())
        },
    )
}

/// The shape the per-dimension scales' cost is measured at, and its target: after a
/// preconditioned warm-up the run launches the `_scaled` kernels, which should cost no more
/// than the noise between repetitions (1 %).
const SCALES_CASE: (usize, usize, u32, f64) = (1048576, 64, 100, 0.01);

/// Times fused launches at [`SCALES_CASE`] with the step size alone and with scales (all 1:
/// the same results, the `_scaled` kernel).
pub(super) fn scales_cost(gpu: &Gpu, args: &BenchArgs) -> Result<AddedCost> {
    let (_, dim, k, _) = SCALES_CASE;
    let inputs = inputs::generate(SCALES_CASE.0, dim, args.seed, false)?;
    let scaled = inputs.config.clone().with_scales(&vec![1.0; dim])?;
    added_cost(gpu, args, SCALES_CASE, &inputs, false, |gpu, run, with| {
        let config = if with { &scaled } else { &inputs.config };
        Ok(gpu.steps(run.chains, run.target, config, k, run.stats)?)
    })
}

/// What [`added_cost`]'s launches work on.
struct CostRun<'a> {
    chains: &'a mut DeviceChains,
    target: &'a DeviceTarget,
    stats: &'a mut ChainStats,
}

/// Times `launch(.., with = false)` and `launch(.., with = true)` on the chains of `inputs`
/// (with the running moments if `moments`), each a few times after warm-up, and compares them.
fn added_cost(
    gpu: &Gpu,
    args: &BenchArgs,
    (batch, dim, k, target_fraction): (usize, usize, u32, f64),
    inputs: &Inputs,
    moments: bool,
    mut launch: impl FnMut(&Gpu, &mut CostRun<'_>, bool) -> Result<()>,
) -> Result<AddedCost> {
    let target = gpu.upload_target(&inputs.target)?;
    let mut chains = gpu.upload_chains(&inputs.x, inputs.shape)?;
    let mut stats = gpu.new_stats(inputs.shape, moments)?;
    let mut run = CostRun {
        chains: &mut chains,
        target: &target,
        stats: &mut stats,
    };
    let reps = (args.reps / 10).clamp(3, 20);
    let alone = time_each(gpu, 2, reps, || launch(gpu, &mut run, false))?;
    let with = time_each(gpu, 2, reps, || launch(gpu, &mut run, true))?;
    Ok(AddedCost {
        batch,
        dim,
        steps_per_launch: k,
        launch: alone,
        launch_with: with,
        fraction: with.median_us / alone.median_us - 1.0,
        target_fraction,
    })
}
