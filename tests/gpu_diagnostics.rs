//! The convergence diagnostics on a real GPU: the reduction kernel against the host's formula
//! on the same moments, the split statistics of a run against the split computed from its own
//! trace, the moments a split run hands over, the early stop, and chains started far out
//! reaching the target. Reported as ignored without a GPU (libtest-mimic, as `gpu.rs`).

use std::process::ExitCode;

use fused_mh::diagnostics::SplitSchedule;
use fused_mh::{Shape, StepConfig, Target, cpu};
use libtest_mimic::Failed;
use rand::{Rng, SeedableRng};
use rand_distr::StandardNormal;
use rand_xorshift::XorShiftRng;

mod support;

use support::problems::{open, run_quietly};
use support::trials::GpuTrials;

/// A target (mu in [-2, 2], sigma in [0.5, 2]) and chains drawn 1.5 sigma wide around it.
fn random_problem(batch: usize, dim: usize, seed: u64) -> (Shape, Vec<f32>, Target, f32) {
    let mut r = XorShiftRng::seed_from_u64(seed);
    let shape = Shape::new(batch, dim).expect("valid test shape");
    let mu: Vec<f32> = (0..dim).map(|_| r.random_range(-2.0..2.0)).collect();
    let sigma: Vec<f32> = (0..dim).map(|_| r.random_range(0.5..2.0)).collect();
    let x = (0..shape.len())
        .map(|i| mu[i % dim] + 1.5 * sigma[i % dim] * r.sample::<f32, _>(StandardNormal))
        .collect();
    let target = Target::new(mu, sigma).expect("valid target");
    (shape, x, target, 1.2 / (dim as f32).sqrt())
}

/// The diagnostics the GPU reduces from its running moments (`Gpu::diagnostics`) against the
/// library's two-pass formula on the same moments copied to the host: the same numbers up to
/// f64 rounding (the GPU adds superchains in no fixed order; 1e-9 relative is thousands of
/// times the rounding of sums of 10^4 terms).
fn gpu_diagnostics_match_the_moments(batch: usize, dim: usize, m: usize) -> Result<(), Failed> {
    let gpu = open()?;
    let (shape, x, target, step_size) = random_problem(batch, dim, (batch + dim + m) as u64);
    let config = StepConfig::new(step_size, 17)?;
    let target_dev = gpu.upload_target(&target)?;
    let mut chains = gpu.upload_chains(&x, shape)?;
    let mut stats = gpu.new_stats(shape, true)?;
    let plan = fused_mh::RunPlan::new(30, 10);
    run_quietly(&gpu, &mut chains, &target_dev, &config, &plan, &mut stats)?;
    let on_gpu = gpu.diagnostics(&stats, &target_dev, m)?;
    let (mean, var) = (
        stats.means()?.unwrap_or_default(),
        stats.variances()?.unwrap_or_default(),
    );
    let want = fused_mh::diagnostics::from_chain_moments(shape, m, 30, &mean, &var)?;
    // Integer counts add exactly in f64: the same rate as the counts copied to the host.
    if on_gpu.acceptance_rate != Some(stats.acceptance_rate()?) {
        return Err(format!(
            "acceptance {:?} on the GPU, {} from the counts",
            on_gpu.acceptance_rate,
            stats.acceptance_rate()?
        )
        .into());
    }
    for (label, got, want) in [
        ("nested R-hat", &on_gpu.nested_rhat, &want.nested_rhat),
        ("ESS", &on_gpu.ess, &want.ess),
        ("pooled variance", &on_gpu.variance, &want.variance),
    ] {
        if let Some(d) = (0..dim).find(|&d| (got[d] - want[d]).abs() > 1e-9 * want[d].abs()) {
            return Err(format!(
                "({batch}, {dim}, M={m}) {label}[{d}]: GPU {}, host {}",
                got[d], want[d]
            )
            .into());
        }
    }
    Ok(())
}

/// An early stop on split nested R-hat (`RunPlan::diagnostics`) stops at a checkpoint, and its states
/// are the states of a run of that many steps, bit for bit.
fn early_stop_equals_the_shorter_run() -> Result<(), Failed> {
    let gpu = open()?;
    let (batch, dim, m) = (4096, 8, 16);
    let (shape, x, target, step_size) = random_problem(batch, dim, 99);
    // Superchains start from their first chain's state: far apart at first, then they meet.
    let x: Vec<f32> = (0..batch * dim)
        .map(|i| 3.0 * x[(i / dim / m * m) * dim + i % dim])
        .collect();
    let config = StepConfig::new(step_size, 5)?;
    let target_dev = gpu.upload_target(&target)?;
    let run = |steps: u64, until: Option<f64>| -> Result<(u64, Vec<f32>), Failed> {
        let mut chains = gpu.upload_chains(&x, shape)?;
        let mut stats = gpu.new_stats(shape, true)?;
        let plan = fused_mh::RunPlan {
            diagnostics: Some(fused_mh::DiagnosticsPlan {
                superchain_size: m,
                until_rhat: until,
                min_draws: 20,
                schedule: SplitSchedule::from_min_draws(20, 1),
            }),
            ..fused_mh::RunPlan::new(steps, 25)
        };
        let ran = run_quietly(&gpu, &mut chains, &target_dev, &config, &plan, &mut stats)?;
        Ok((ran, chains.x()?))
    };
    let (stopped_at, x_stopped) = run(100_000, Some(1.05))?;
    // Checkpoints at 20, 40, 80, ...
    if stopped_at >= 100_000 || !(stopped_at / 20).is_power_of_two() || stopped_at % 20 != 0 {
        return Err(format!("the run stopped at {stopped_at}").into());
    }
    let (ran, x_short) = run(stopped_at, None)?;
    let same = x_stopped
        .iter()
        .zip(&x_short)
        .all(|(a, b)| a.to_bits() == b.to_bits());
    if ran != stopped_at || !same {
        return Err(format!("stopped at {stopped_at}: not the {ran}-step run's states").into());
    }
    Ok(())
}

/// A GPU run's split diagnostics (`ChainStats::diagnostics`, at the last checkpoint) against
/// split nested R-hat computed in f64 from the run's own full trace (`support`). The kernels
/// accumulate each launch in f32 (Welford over at most K = 10 values) before merging in f64:
/// the moments then carry relative errors near 1e-7 of the states' scale, which reach B / W
/// at about 1e-5 relative with these spreads; 1e-4 on R-hat^2 - 1 is ten times that. The
/// chains start together far out (a shared trend), in superchains of `m`; rows of 1030 run
/// as single steps.
fn split_diagnostics_match_the_trace(batch: usize, dim: usize, m: usize) -> Result<(), Failed> {
    let gpu = open()?;
    let (shape, x, target, step_size) = random_problem(batch, dim, (7 * batch + dim) as u64);
    let x: Vec<f32> = (0..shape.len())
        .map(|i| x[(i / dim / m * m) * dim + i % dim] + 3.0 * target.sigma()[i % dim])
        .collect();
    let steps = 96;
    let plan = fused_mh::RunPlan {
        thin: 1,
        diagnostics: Some(fused_mh::DiagnosticsPlan {
            superchain_size: m,
            until_rhat: None,
            min_draws: 4,
            schedule: SplitSchedule::ending_at(steps, 1).ok_or("a schedule")?,
        }),
        ..fused_mh::RunPlan::new(steps, 10)
    };
    let target_dev = gpu.upload_target(&target)?;
    let mut chains = gpu.upload_chains(&x, shape)?;
    let mut stats = gpu.new_stats(shape, true)?;
    let mut trace = Vec::new();
    let mut checkpoints = Vec::new();
    gpu.run(
        &mut chains,
        &target_dev,
        &StepConfig::new(step_size, 3)?,
        &plan,
        &mut stats,
        &mut |p| {
            checkpoints.extend(p.diagnostics.map(|_| p.done));
            Ok(())
        },
        &mut |chunk| {
            trace.extend_from_slice(chunk.states);
            Ok(())
        },
    )?;
    // 96 = 3 * 2^5, at most 4 checkpoints: 12, 24, 48, 96.
    if checkpoints != [12, 24, 48, 96] {
        return Err(format!("checkpoints {checkpoints:?}").into());
    }
    let got = stats.diagnostics().ok_or("no diagnostics")?;
    let want = support::split_nested_rhat_from_trace(&trace, shape, m, steps as usize);
    for d in 0..dim {
        let (g, w) = (got.nested_rhat[d].powi(2) - 1.0, want[d].powi(2) - 1.0);
        if (g - w).abs() > 1e-4 * w.abs() {
            return Err(format!(
                "({batch}, {dim}, M={m}) dim {d}: R-hat {} on the GPU, {} from the trace",
                got.nested_rhat[d], want[d]
            )
            .into());
        }
    }
    if got.draws != steps || got.max_nested_rhat() < 1.01 {
        return Err(format!("a shared trend unseen: {got:?}").into());
    }
    Ok(())
}

/// The moments a split run hands over (`Gpu::merged_moments`: its two samples merged on the
/// device) against a two-pass computation over its full trace, for a run whose last launch
/// closes a half (96 steps: the current sample is empty, the first one is handed over as it
/// is) and for one that runs on past it (100: a merge). The tolerances are
/// `moments_and_trace`'s (`gpu_traces.rs`): each launch of 10 steps accumulates in f32
/// (relative rounding ~10 * 2^-24 ~ 1e-6), merged in f64; 1e-5 relative to the values' scale
/// for the mean, and 1e-4 of the variance plus 1e-5 of the squared scale.
fn merged_moments_match_the_trace(steps: u64) -> Result<(), Failed> {
    let gpu = open()?;
    let (shape, x, target, step_size) = random_problem(1000, 33, 11);
    let plan = fused_mh::RunPlan {
        thin: 1,
        diagnostics: Some(fused_mh::DiagnosticsPlan {
            superchain_size: 1,
            until_rhat: None,
            min_draws: 4,
            schedule: SplitSchedule::ending_at(96, 1).ok_or("a schedule")?,
        }),
        ..fused_mh::RunPlan::new(steps, 10)
    };
    let target_dev = gpu.upload_target(&target)?;
    let mut chains = gpu.upload_chains(&x, shape)?;
    let mut stats = gpu.new_stats(shape, true)?;
    let mut trace = Vec::new();
    gpu.run(
        &mut chains,
        &target_dev,
        &StepConfig::new(step_size, 5)?,
        &plan,
        &mut stats,
        &mut |_| Ok(()),
        &mut |chunk| {
            trace.extend_from_slice(chunk.states);
            Ok(())
        },
    )?;
    if stats.diagnostics().map(|d| d.draws) != Some(96) {
        return Err(format!("{steps} steps: no checkpoint at 96").into());
    }
    let (mean, var) = support::two_pass(&trace, shape.len());
    let (got_mean, got_m2) = gpu.merged_moments(stats)?.ok_or("no moments")?;
    let (got_mean, got_m2) = (
        gpu.stream().clone_dtoh(&got_mean)?,
        gpu.stream().clone_dtoh(&got_m2)?,
    );
    for i in 0..shape.len() {
        let (scale, got_var) = (1.0 + mean[i].abs(), got_m2[i] / steps as f64);
        if (got_mean[i] - mean[i]).abs() > 1e-5 * scale
            || (got_var - var[i]).abs() > 1e-4 * var[i] + 1e-5 * scale * scale
        {
            return Err(format!(
                "{steps} steps, element {i}: mean {} vs two-pass {}, variance {got_var} vs {}",
                got_mean[i], mean[i], var[i]
            )
            .into());
        }
    }
    Ok(())
}

/// Chains started far out (mu + 10 sigma) converge to the target: after burn-in, each
/// dimension's mean over all chains and steps is within 5 standard errors of mu, the standard
/// error from the spread of the chains' own means (the chains are independent, so each chain's
/// mean is one batch mean: this accounts for autocorrelation), and the pooled variance is
/// within 10 % of sigma^2. The acceptance rate over the run matches the CPU reference's
/// (same random numbers) within 1 %.
fn convergence() -> Result<(), Failed> {
    let gpu = open()?;
    let (batch, dim) = (4096, 8);
    let shape = Shape::new(batch, dim)?;
    let mu: Vec<f32> = (0..dim).map(|d| d as f32 * 0.75 - 2.0).collect();
    let sigma: Vec<f32> = (0..dim).map(|d| 0.5 + 0.25 * d as f32).collect();
    let target = Target::new(mu.clone(), sigma.clone())?;
    let x: Vec<f32> = (0..shape.len())
        .map(|i| mu[i % dim] + 10.0 * sigma[i % dim])
        .collect();
    // sigma spans 0.5 to 2.25: a step of about the smallest sigma accepts a fair share.
    let config = StepConfig::new(0.6, 2024)?;
    let target_dev = gpu.upload_target(&target)?;
    let mut chains = gpu.upload_chains(&x, shape)?;
    let (burn_in, steps) = (2_000u64, 8_000u64);
    let mut burn = gpu.new_stats(shape, false)?;
    let mut none = |_: &fused_mh::Progress<'_>| Ok(());
    let mut no_trace = |_: fused_mh::TraceChunk<'_>| Ok(());
    let plan = fused_mh::RunPlan::new(burn_in, 500);
    gpu.run(
        &mut chains,
        &target_dev,
        &config,
        &plan,
        &mut burn,
        &mut none,
        &mut no_trace,
    )?;
    let mut stats = gpu.new_stats(shape, true)?;
    let plan = fused_mh::RunPlan::new(steps, 1000);
    gpu.run(
        &mut chains,
        &target_dev,
        &config,
        &plan,
        &mut stats,
        &mut none,
        &mut no_trace,
    )?;
    let (means, vars) = (
        stats.means()?.ok_or("no means")?,
        stats.variances()?.ok_or("no variances")?,
    );
    for d in 0..dim {
        let chain_means: Vec<f64> = (0..batch).map(|c| means[c * dim + d]).collect();
        let pooled = chain_means.iter().sum::<f64>() / batch as f64;
        let spread = chain_means
            .iter()
            .map(|m| (m - pooled).powi(2))
            .sum::<f64>()
            / (batch - 1) as f64;
        let se = (spread / batch as f64).sqrt();
        let within = (0..batch).map(|c| vars[c * dim + d]).sum::<f64>() / batch as f64;
        let total_var = within + spread * (batch - 1) as f64 / batch as f64;
        let want_var = f64::from(sigma[d]).powi(2);
        if (pooled - f64::from(mu[d])).abs() > 5.0 * se {
            return Err(format!("dim {d}: mean {pooled} vs mu {} (se {se})", mu[d]).into());
        }
        if (total_var / want_var - 1.0).abs() > 0.10 {
            return Err(format!("dim {d}: variance {total_var} vs sigma^2 {want_var}").into());
        }
    }
    let gpu_rate = stats.acceptance_rate()?;
    let (_, counts) = cpu::steps(&x, shape, &target, &config, 0, burn_in + steps)?;
    let (_, burn_counts) = cpu::steps(&x, shape, &target, &config, 0, burn_in)?;
    let accepted: u64 = counts.iter().zip(&burn_counts).map(|(&a, &b)| a - b).sum();
    let cpu_rate = accepted as f64 / (steps as f64 * batch as f64);
    if (gpu_rate / cpu_rate - 1.0).abs() > 0.01 {
        return Err(format!("acceptance rate {gpu_rate} on the GPU, {cpu_rate} on the CPU").into());
    }
    eprintln!("convergence: acceptance rate GPU {gpu_rate:.5}, CPU {cpu_rate:.5}");
    Ok(())
}

fn main() -> ExitCode {
    let mut trials = GpuTrials::new("GPU diagnostics tests");
    for (batch, dim, m) in [(4096, 40, 4), (1000, 33, 1), (512, 70, 8), (64, 1030, 2)] {
        trials.add(
            format!("gpu_diagnostics_match_the_moments::{batch}x{dim}::m{m}"),
            move || gpu_diagnostics_match_the_moments(batch, dim, m),
        );
        trials.add(
            format!("split_diagnostics_match_the_trace::{batch}x{dim}::m{m}"),
            move || split_diagnostics_match_the_trace(batch, dim, m),
        );
    }
    for steps in [96, 100] {
        let name = format!("merged_moments_match_the_trace::{steps}_steps");
        trials.add(name, move || merged_moments_match_the_trace(steps));
    }
    trials.add("convergence", convergence);
    trials.add(
        "early_stop_equals_the_shorter_run",
        early_stop_equals_the_shorter_run,
    );
    trials.run()
}
