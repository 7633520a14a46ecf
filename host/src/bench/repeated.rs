//! Many steps in a row: single-step launches back to back (on a stream, and replayed as a CUDA
//! graph) at a launch-bound size, and fused launches of K steps, each checked bit for bit
//! against as many single steps.

use anyhow::Result;
use cudarc::driver::sys::{CUgraphInstantiate_flags, CUstreamCaptureMode};
use fused_mh::{DeviceChains, DeviceTarget, Gpu};
use serde::Serialize;

use super::{BenchArgs, Times, time_each};
use crate::inputs;

/// Back-to-back steps of (4096, 64): at most this many microseconds per step.
const BACK_TO_BACK_TARGET_US: f64 = 3.0;
const BACK_TO_BACK_SHAPE: (usize, usize) = (4096, 64);

/// Fused K-step launches: (batch, dim, K, target in microseconds per step, if any: issue
/// 22's, on the H200).
pub const FUSED_CASES: [(usize, usize, u32, Option<f64>); 3] = [
    (4096, 64, 1000, Some(0.40)),
    (1048576, 64, 100, Some(78.0)),
    (65536, 1024, 100, None),
];

#[derive(Debug, Serialize)]
pub struct LaunchBound {
    pub batch: usize,
    pub dim: usize,
    pub steps: usize,
    pub stream_us_per_step: f64,
    pub graph_us_per_step: Option<f64>,
    pub target_us: f64,
    pub target_met: bool,
}

/// One fused configuration: K steps per launch, state in registers.
#[derive(Debug, Serialize)]
pub struct FusedRow {
    pub batch: usize,
    pub dim: usize,
    pub steps_per_launch: u32,
    /// One launch of K steps.
    pub gpu: Times,
    pub us_per_step: f64,
    pub updates_per_s: f64,
    /// K fused steps against K single-step launches from the same state: bit-identical?
    pub check: String,
    pub target_us: Option<f64>,
    pub target_met: Option<bool>,
}

/// (4096, 64): many steps launched back to back on one stream, then the same steps captured in
/// a CUDA graph and replayed.
pub fn launch_bound(gpu: &Gpu, args: &BenchArgs) -> Result<LaunchBound> {
    let (batch, dim) = BACK_TO_BACK_SHAPE;
    let steps = args.back_to_back.max(1);
    let inputs = inputs::generate(batch, dim, args.seed, false)?;
    let target_dev: DeviceTarget = gpu.upload_target(&inputs.target)?;
    let mut chains = gpu.upload_chains(&inputs.x, inputs.shape)?;
    let run = |chains: &mut DeviceChains| -> Result<()> {
        for _ in 0..steps {
            gpu.step(chains, &target_dev, &inputs.config)?;
        }
        Ok(())
    };
    let stream_times = time_each(gpu, 1, 5, || run(&mut chains))?;
    let stream_us_per_step = stream_times.median_us / steps as f64;

    // The same launches, captured once into a graph; each replay runs all of them.
    gpu.stream()
        .begin_capture(CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL)?;
    let captured = run(&mut chains);
    let graph = gpu.stream().end_capture(CUgraphInstantiate_flags(0))?;
    captured?;
    let graph_us_per_step = match graph {
        Some(graph) => {
            let times = time_each(gpu, 1, 5, || Ok(graph.launch()?))?;
            Some(times.median_us / steps as f64)
        }
        None => None,
    };
    let best = graph_us_per_step.map_or(stream_us_per_step, |g| g.min(stream_us_per_step));
    Ok(LaunchBound {
        batch,
        dim,
        steps,
        stream_us_per_step,
        graph_us_per_step,
        target_us: BACK_TO_BACK_TARGET_US,
        target_met: best <= BACK_TO_BACK_TARGET_US,
    })
}

/// One launch of K fused steps, timed (median of a few launches; each launch is long), and
/// checked against K single-step launches from the same state and step counter.
pub fn fused(
    gpu: &Gpu,
    batch: usize,
    dim: usize,
    k: u32,
    target: Option<f64>,
    args: &BenchArgs,
) -> Result<FusedRow> {
    let inputs = inputs::generate(batch, dim, args.seed, false)?;
    let target_dev = gpu.upload_target(&inputs.target)?;
    let mut chains = gpu.upload_chains(&inputs.x, inputs.shape)?;
    let mut stats = gpu.new_stats(inputs.shape, false)?;

    // The check: a few steps fused and as single steps, from the same state and counter.
    let check_steps = k.min(5);
    let mut single = gpu.upload_chains(&inputs.x, inputs.shape)?;
    gpu.steps(
        &mut chains,
        &target_dev,
        &inputs.config,
        check_steps,
        &mut stats,
    )?;
    for _ in 0..check_steps {
        gpu.step(&mut single, &target_dev, &inputs.config)?;
    }
    let same = chains
        .x()?
        .iter()
        .zip(single.x()?)
        .all(|(a, b)| a.to_bits() == b.to_bits());
    let check = if same {
        format!("bit-identical to {check_steps} single steps")
    } else {
        format!("FAILED: differs from {check_steps} single steps")
    };

    let reps = (args.reps / 10).clamp(3, 20);
    let times = time_each(gpu, 2, reps, || {
        Ok(gpu.steps(&mut chains, &target_dev, &inputs.config, k, &mut stats)?)
    })?;
    let us_per_step = times.median_us / f64::from(k);
    Ok(FusedRow {
        batch,
        dim,
        steps_per_launch: k,
        gpu: times,
        us_per_step,
        updates_per_s: (batch * dim) as f64 / (us_per_step * 1e-6),
        check,
        target_us: target,
        target_met: target.map(|t| us_per_step <= t),
    })
}
