//! The run itself, on the GPU or on the CPU reference, with the same outputs either way.

use std::cell::RefCell;
use std::path::Path;

use anyhow::{Context, Result};
use fused_mh::diagnostics::start::{spread_rows, start_spread};
use fused_mh::{
    Diagnostics, Error, Gpu, Progress, RunPlan, Shape, StepConfig, WarmupPlan, WarmupProgress, cpu,
};
use indicatif::{ProgressBar, ProgressStyle};

use super::inputs::Inputs;
use super::progress_line;
use super::summary::{Checkpoint, Stats};
use crate::npy::NpyStream;

/// What a run gives back: the final states, the statistics after the burn-in, the steps after
/// it, and the diagnostics computed along the way.
pub struct Ran {
    pub x: Vec<f32>,
    pub stats: Stats,
    pub steps: u64,
    /// The burn-in's steps with a non-finite `log alpha`, over all chains.
    pub burn_in_nonfinite: u64,
    pub history: Vec<Checkpoint>,
    /// The split diagnostics at the last checkpoint.
    pub diagnostics: Option<Diagnostics>,
    /// Per dimension, the superchains' spread where the statistics begin
    /// (`fused_mh::diagnostics::start`; empty without diagnostics).
    pub start_spread: Vec<f64>,
    /// The digest of the trace file as written (`crate::npy::digest`), if there is one.
    pub trace_digest: Option<String>,
}

/// Caller-noise mode: one step of the reference semantics with the given random numbers.
pub fn one_step(
    gpu: Option<&Gpu>,
    inputs: &Inputs,
    shape: Shape,
    step_size: f32,
    noise: &[f32],
    uniform: &[f32],
) -> Result<(Vec<f32>, Vec<bool>)> {
    let context = "the noise (--noise, --uniform)";
    Ok(match gpu {
        Some(gpu) => {
            let target = gpu.upload_target(&inputs.target)?;
            let mut chains = gpu.upload_chains(&inputs.x, shape)?;
            let noise = gpu.upload_noise(noise, uniform, shape).context(context)?;
            gpu.step_with_noise(&mut chains, &target, step_size, &noise)?;
            (chains.x()?, chains.accepted()?)
        }
        None => {
            let out = cpu::par_step_with_noise(
                &inputs.x,
                shape,
                &inputs.target,
                step_size,
                noise,
                uniform,
            )
            .context(context)?;
            (out.x_new, out.accepted)
        }
    })
}

/// `burn_in` steps from step counter `first_step` that count for nothing, then `plan.steps`
/// steps (fewer if `plan.diagnostics` stops the run early), with the thinned states streamed
/// into `trace` (a new file) as they arrive. Returns the final states, the statistics of the
/// steps after the burn-in, their number, the split diagnostics at the plan's checkpoints
/// (the same on the GPU and the CPU reference) and the chains' spread where the statistics
/// begin.
// What runs (device, inputs, shape, configuration), where the stream starts and how long it
// burns in, the plan and the trace file: a parameter struct would only rename them.
#[allow(clippy::too_many_arguments)]
pub fn chains(
    gpu: Option<&Gpu>,
    inputs: &Inputs,
    shape: Shape,
    config: &StepConfig,
    first_step: u64,
    burn_in: u64,
    plan: &RunPlan,
    trace: Option<&Path>,
) -> Result<Ran> {
    let mut trace = match trace {
        Some(path) => {
            let saves = usize::try_from(plan.saves()).context("--thin: too many saved states")?;
            Some(NpyStream::<f32>::create(
                path,
                &[saves, shape.batch(), shape.dim()],
            )?)
        }
        None => None,
    };
    // A trace write that fails stops the run (the library sees `Error::Stopped`); the real
    // error is kept here and reported.
    let mut write_error = None;
    let mut save = |states: &[f32]| -> fused_mh::Result<()> {
        match trace.as_mut().map(|t| t.extend(states)) {
            Some(Err(e)) => {
                write_error = Some(e);
                Err(Error::Stopped)
            }
            _ => Ok(()),
        }
    };
    let progress = ProgressBar::new(burn_in + plan.steps);
    // Within 80 columns (`progress_line`): the bar, the position, the rate, the time left.
    progress.set_style(
        ProgressStyle::with_template("{bar:16} {pos}/{len} {msg}").expect("valid template"),
    );
    // Positions count the burn-in first (`offset` is 0 during it); the diagnostics after the
    // burn-in are kept for summary.json and the chart.
    let history = RefCell::new(Vec::new());
    let until = plan.diagnostics.and_then(|d| d.until_rhat);
    let last = std::cell::Cell::new(None);
    let report = |offset: u64, p: &Progress<'_>| {
        progress.set_position(offset + p.done);
        if let Some(d) = p.diagnostics {
            let (acceptance, rhat) = (d.acceptance_rate.unwrap_or(f64::NAN), d.max_nested_rhat());
            last.set(Some((acceptance, rhat, d.min_ess())));
            history.borrow_mut().push(Checkpoint {
                step: p.done,
                max_nested_rhat: rhat,
                min_ess: d.min_ess(),
                acceptance_rate: d.acceptance_rate,
            });
        }
        let in_burn_in = burn_in > 0 && offset == 0;
        let left = if in_burn_in {
            burn_in.saturating_sub(p.done) + plan.steps
        } else {
            let rhat = last.get().map(|(_, r, _)| r);
            progress_line::steps_left(p.done, plan.steps, rhat, until)
        };
        let estimated = !in_burn_in && until.is_some() && last.get().is_some();
        progress.set_message(progress_line::message(
            progress.per_sec(),
            left,
            estimated,
            last.get(),
        ));
    };
    let spread = |x: &[f32]| match plan.diagnostics {
        Some(d) => start_spread(x, shape, d.superchain_size, inputs.target.sigma()),
        None => Ok(Vec::new()),
    };
    let result = match gpu {
        Some(gpu) => (|| {
            let target = gpu.upload_target(&inputs.target)?;
            let mut chains = gpu.upload_chains(&inputs.x, shape)?;
            chains.set_step_counter(first_step);
            let mut burn_in_nonfinite = 0;
            if burn_in > 0 {
                let mut discarded = gpu.new_stats(shape, false)?;
                let burn = RunPlan::new(burn_in, plan.steps_per_launch);
                gpu.run(
                    &mut chains,
                    &target,
                    config,
                    &burn,
                    &mut discarded,
                    &mut |p| {
                        report(0, p);
                        Ok(())
                    },
                    &mut |_| Ok(()),
                )?;
                burn_in_nonfinite = discarded.nonfinite_counts()?.iter().sum();
            }
            // Where the statistics begin: after the burn-in, the first chains' states back from
            // the GPU (all the superchains the spread reads).
            let start = match plan.diagnostics {
                Some(d) if burn_in > 0 => {
                    spread(&chains.x_rows(spread_rows(shape, d.superchain_size))?)?
                }
                _ => spread(&inputs.x)?,
            };
            let mut stats = gpu.new_stats(shape, true)?;
            let ran = gpu.run(
                &mut chains,
                &target,
                config,
                plan,
                &mut stats,
                &mut |p| {
                    report(burn_in, p);
                    Ok(())
                },
                &mut |chunk| save(chunk.states),
            )?;
            let n = stats.steps();
            let missing = || Error::InvalidRun(format!("no moments after {n} steps"));
            let (mean, var) = stats.mean_var()?.ok_or_else(missing)?;
            Ok((
                chains.x()?,
                Stats {
                    accepted: stats.accepted_counts()?,
                    nonfinite: stats.nonfinite_counts()?,
                    null_moves: stats.null_move_counts()?.ok_or_else(missing)?,
                    mean,
                    var,
                },
                ran,
                burn_in_nonfinite,
                (stats.diagnostics().cloned(), start),
            ))
        })(),
        None => (|| {
            let burnt_x;
            let mut burn_in_nonfinite = 0;
            let start = if burn_in > 0 {
                // Only its final states are kept: its moments and counts go at once.
                let burnt = cpu::run_chains(
                    &inputs.x,
                    shape,
                    &inputs.target,
                    config,
                    first_step,
                    burn_in,
                    0,
                    None,
                    &mut |_, _| Ok(()),
                    &mut |p| {
                        report(0, p);
                        Ok(())
                    },
                )?;
                burn_in_nonfinite = burnt.nonfinite.iter().sum();
                burnt_x = burnt.x;
                &burnt_x
            } else {
                &inputs.x
            };
            let spread = spread(start)?;
            cpu::run_chains(
                start,
                shape,
                &inputs.target,
                config,
                first_step + burn_in,
                plan.steps,
                plan.thin,
                plan.diagnostics,
                &mut |_, state| save(state),
                &mut |p| {
                    report(burn_in, p);
                    Ok(())
                },
            )
            .map(|out| (out, burn_in_nonfinite, spread))
        })()
        .map(|(out, burn_in_nonfinite, spread)| {
            (
                out.x,
                Stats {
                    accepted: out.accepted,
                    nonfinite: out.nonfinite,
                    null_moves: out.null_moves,
                    mean: out.mean,
                    var: out.var,
                },
                out.steps,
                burn_in_nonfinite,
                (out.diagnostics, spread),
            )
        }),
    };
    progress.finish_and_clear();
    let (x, stats, steps, burn_in_nonfinite, (diagnostics, start_spread)) =
        match (result, write_error) {
            (_, Some(e)) => return Err(e),
            (r, None) => r?,
        };
    let trace_digest = trace.map(NpyStream::finish).transpose()?;
    Ok(Ran {
        trace_digest,
        x,
        stats,
        steps,
        burn_in_nonfinite,
        history: history.into_inner(),
        diagnostics,
        start_spread,
    })
}

/// What the warm-up leaves: the states after it, the adapted step size and per-dimension
/// scales (with `--precondition`), the acceptance rate of its last launch, and its steps with a
/// non-finite `log alpha`.
pub struct Warmed {
    pub x: Vec<f32>,
    pub step_size: f32,
    pub scales: Option<Vec<f32>>,
    pub last_acceptance: f64,
    pub nonfinite: u64,
}

/// `steps` warm-up steps from step counter `first_step`, in launches of
/// [`fused_mh::adapt::WARMUP_LAUNCH_STEPS`], the step size adapting toward the acceptance
/// rate `target` after each launch from `step_size` (`fused_mh::adapt`). With `precondition`,
/// each launch of the first half also sets the per-dimension scales from the pooled variance
/// of its draws (`fused_mh::adapt::ScaleAdaptation`); the second half adapts the step size
/// alone, to the final scales. Nothing of it is kept but the states, the step size and the
/// scales. The loop is the library's ([`fused_mh::warm_up`]), on either machine.
pub fn warm_up(
    gpu: Option<&Gpu>,
    inputs: &Inputs,
    shape: Shape,
    (seed, first_step): (u64, u64),
    (steps, target, precondition): (u64, f64, bool),
    step_size: f32,
) -> Result<Warmed> {
    let progress = ProgressBar::new(steps);
    progress.set_style(
        ProgressStyle::with_template("warm-up {bar:16} {pos}/{len} {msg}").expect("valid template"),
    );
    let plan = WarmupPlan {
        steps,
        target_accept: target,
        precondition,
    };
    let config = StepConfig::new(step_size, seed)?;
    let (x, warmed) = match gpu {
        Some(gpu) => {
            let target_dev = gpu.upload_target(&inputs.target)?;
            let mut chains = gpu.upload_chains(&inputs.x, shape)?;
            chains.set_step_counter(first_step);
            let report = &mut |p: &WarmupProgress| {
                progress.set_position(p.done);
                let (acc, size) = (p.acceptance, p.step_size);
                progress.set_message(format!("acc {acc:.3} step size {size:.4}"));
                Ok(())
            };
            let warmed = gpu.warm_up(&mut chains, &target_dev, &config, plan, report)?;
            (chains.x()?, warmed)
        }
        None => {
            let mut x = fused_mh::testing::host_memory::copied("the warm-up's states", &inputs.x)?;
            let report = &mut |done| {
                progress.set_position(done);
                Ok(())
            };
            let warmed = cpu::warm_up(
                &mut x,
                shape,
                &inputs.target,
                &config,
                first_step,
                plan,
                report,
            )?;
            (x, warmed)
        }
    };
    progress.finish_and_clear();
    Ok(Warmed {
        x,
        step_size: warmed.config.step_size(),
        scales: warmed.config.scales().map(<[f32]>::to_vec),
        last_acceptance: warmed.last_acceptance,
        nonfinite: warmed.nonfinite,
    })
}
