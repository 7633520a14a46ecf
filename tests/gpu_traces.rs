//! The fused run's thinned trace and running moments on a real GPU: every saved state against
//! single steps, the moments against two passes over the trace. A `harness = false` test like
//! `gpu.rs`: without a GPU every test reports ignored.

use std::process::ExitCode;

use fused_mh::{ChainStats, DeviceChains, DeviceTarget, Gpu, RunPlan, StepConfig};
use libtest_mimic::Failed;

mod support;

use support::problems::{open, random_problem};
use support::trials::GpuTrials;
use support::two_pass;

/// `Gpu::run` of `plan`, the trace collected: its states in order (a chunk out of order fails
/// the test), and how many progress reports came.
fn run_with_trace(
    gpu: &Gpu,
    chains: &mut DeviceChains,
    target: &DeviceTarget,
    config: &StepConfig,
    plan: &RunPlan,
    stats: &mut ChainStats,
) -> Result<(Vec<f32>, usize), Failed> {
    let len = chains.shape().len();
    let (mut trace, mut reports, mut next_first) = (Vec::new(), 0, 0);
    gpu.run(
        chains,
        target,
        config,
        plan,
        stats,
        &mut |_| {
            reports += 1;
            Ok(())
        },
        &mut |chunk| {
            assert_eq!(chunk.first, next_first, "trace chunks out of order");
            next_first += (chunk.states.len() / len) as u64;
            trace.extend_from_slice(chunk.states);
            Ok(())
        },
    )?;
    Ok((trace, reports))
}

/// `Gpu::run` with the moments and a trace of every state (thin = 1, in small chunks): the
/// running moments equal a two-pass computation over the trace, the trace equals single steps,
/// and its last state is the final state. Several launches (K < steps) and chunks (3 states
/// per chunk) per run; dims for q2, q8 and the single-step fallback.
fn moments_and_trace(batch: usize, dim: usize) -> Result<(), Failed> {
    let gpu = open()?;
    let seed = (batch + dim) as u64;
    let (shape, x, target, step_size) = random_problem(batch, dim, seed);
    let config = StepConfig::new(step_size, seed)?;
    let target_dev = gpu.upload_target(&target)?;
    let mut chains = gpu.upload_chains(&x, shape)?;
    let mut stats = gpu.new_stats(shape, true)?;
    let plan = RunPlan {
        thin: 1,
        trace_buffer_bytes: 3 * 4 * shape.len(),
        ..RunPlan::new(40, 16)
    };
    let (trace, reports) =
        run_with_trace(&gpu, &mut chains, &target_dev, &config, &plan, &mut stats)?;
    let len = shape.len();
    if trace.len() != 40 * len || reports == 0 {
        return Err(format!("trace holds {} states, not 40", trace.len() / len).into());
    }
    if trace[39 * len..] != chains.x()?[..] {
        return Err("the last saved state is not the final state".into());
    }
    // The same run as single steps: every saved state, bit for bit.
    let mut single = gpu.upload_chains(&x, shape)?;
    for s in 0..40 {
        gpu.step(&mut single, &target_dev, &config)?;
        if single.x()?[..] != trace[s * len..(s + 1) * len] {
            return Err(format!("saved state {s} differs from single step {s}").into());
        }
    }
    let (mean, var) = two_pass(&trace, len);
    let (got_mean, got_var) = (
        stats.means()?.ok_or("no means")?,
        stats.variances()?.ok_or("no variances")?,
    );
    // The running moments accumulate each launch's 16 steps in f32 (relative rounding
    // ~16 * 2^-24 ~ 1e-6) and merge in f64: allow 1e-5 relative to the values' scale, and for
    // the variance 1e-4 of itself plus 1e-5 of the squared scale (the f32 states themselves
    // carry 2^-24 relative error).
    for i in 0..len {
        let scale = 1.0 + mean[i].abs();
        if (got_mean[i] - mean[i]).abs() > 1e-5 * scale
            || (got_var[i] - var[i]).abs() > 1e-4 * var[i] + 1e-5 * scale * scale
        {
            return Err(format!(
                "element {i}: mean {} vs two-pass {}, variance {} vs {}",
                got_mean[i], mean[i], got_var[i], var[i]
            )
            .into());
        }
    }
    let counts = stats.accepted_counts()?;
    if counts.iter().any(|&c| c > 40) || stats.steps() != 40 {
        return Err("accepted counts beyond the number of steps".into());
    }
    Ok(())
}

/// A trace of every `thin`-th state in launches of `k` steps, `k` not a multiple of `thin`, so
/// each launch's first save falls on another of its steps (and, with `thin` odd, inside a round
/// of the kernel's shared uniforms): every saved state equals the single steps' state after
/// that step, bit for bit, and the run's final states the single steps' last. From step
/// counter `first_step`: one just below `2^32` makes the run cut a launch there (a fused
/// launch keeps the counter's high word).
fn thinned_trace_equals_single_steps(
    batch: usize,
    dim: usize,
    thin: u64,
    k: u32,
    first_step: u64,
) -> Result<(), Failed> {
    let gpu = open()?;
    let seed = (3 * batch + dim) as u64;
    let (shape, x, target, step_size) = random_problem(batch, dim, seed);
    let config = StepConfig::new(step_size, seed)?;
    let target_dev = gpu.upload_target(&target)?;
    let mut chains = gpu.upload_chains(&x, shape)?;
    chains.set_step_counter(first_step);
    let mut stats = gpu.new_stats(shape, false)?;
    let (len, saves) = (shape.len(), 8);
    let plan = RunPlan {
        thin,
        trace_buffer_bytes: 2 * 4 * len,
        ..RunPlan::new(saves * thin, k)
    };
    let (trace, _) = run_with_trace(&gpu, &mut chains, &target_dev, &config, &plan, &mut stats)?;
    if trace.len() != saves as usize * len {
        return Err(format!("trace holds {} states, not {saves}", trace.len() / len).into());
    }
    if chains.step_counter() != first_step + saves * thin {
        return Err("the run did not advance the step counter by its steps".into());
    }
    let mut single = gpu.upload_chains(&x, shape)?;
    single.set_step_counter(first_step);
    for step in 1..=saves * thin {
        gpu.step(&mut single, &target_dev, &config)?;
        if step % thin == 0 {
            let slot = (step / thin - 1) as usize;
            if single.x()?[..] != trace[slot * len..(slot + 1) * len] {
                return Err(format!("saved state {slot} differs from single step {step}").into());
            }
        }
    }
    if single.x()? != chains.x()? {
        return Err("the run's final states differ from the single steps'".into());
    }
    Ok(())
}

fn main() -> ExitCode {
    let mut trials = GpuTrials::new("GPU trace tests");
    for (batch, dim) in [(300, 64), (40, 333), (6, 1030)] {
        let name = format!("moments_and_trace::{batch}x{dim}");
        trials.add(name, move || moments_and_trace(batch, dim));
    }
    // The split kernel with a sum tree of 8 lanes (300 x 64) and of 16 (300 x 100), the
    // one-group (40000 x 64), paired (70000 x 64), Q8 (40 x 333) kernels and the single-step
    // fallback (6 x 1030); thin 3 in launches of 7, thin 5 in launches of 2 and of 40 (one
    // launch whose saves fall in several rounds of uniforms); and thin 3 in launches of 7 from
    // 4 steps below 2^32, where the run cuts its first launch.
    let shapes = [
        (300, 64),
        (300, 100),
        (40000, 64),
        (70000, 64),
        (40, 333),
        (6, 1030),
    ];
    for (batch, dim) in shapes {
        for (thin, k, first) in [(3, 7, 0), (5, 2, 0), (5, 40, 0), (3, 7, (1u64 << 32) - 4)] {
            let from = if first > 0 { "::below2^32" } else { "" };
            let name =
                format!("thinned_trace_equals_single_steps::{batch}x{dim}::thin{thin}k{k}{from}");
            trials.add(name, move || {
                thinned_trace_equals_single_steps(batch, dim, thin, k, first)
            });
        }
    }
    trials.run()
}
