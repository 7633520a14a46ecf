//! Every target on a real GPU: every single-step kernel against the CPU reference, a run (the
//! fused kernels, and the single steps of long rows) against single steps bit for bit, and the
//! chains' final states against the exact marginals (`support::marginals`). A `harness = false` test like `gpu.rs`: without a GPU every test reports ignored.

use std::process::ExitCode;

use fused_mh::{RunPlan, StepConfig, TargetKind, cpu, ptx};
use libtest_mimic::Failed;
use rand::Rng;

mod support;

use support::marginals::{check_marginals, problem};
use support::problems::{POISON_FLAG, POISON_X, open, rng, run_quietly};
use support::trials::GpuTrials;

/// Shapes that reach every single-step kernel: rows in registers in whole quads and not
/// (staged in the newer module), the staged one-warp-per-row step, streamed rows in whole
/// quads and not, caller noise's 8-quad rows, the block per row (two segments, four, and
/// eight; at four, at least 3 rows a block of a 132-SM GPU's grid of 3 or 4 blocks an SM, so
/// that the sums' slots go round their two sets), and the paired
/// staged step (a batch large enough for it, see `dispatch::step`).
const STEP_SHAPES: [(usize, usize); 10] = [
    (20000, 64),
    (1100, 2048),
    (1600, 4096),
    (260, 8192),
    (4096, 64),
    (1000, 33),
    (300, 1024),
    (50, 257),
    (20, 1030),
    (7, 4097),
];

/// One step of the target on the GPU and on the CPU (in-kernel random numbers, then the
/// caller's), with the newest kernels or the portable ones: within `cpu::StepOutput::compare`'s
/// tolerances (they bound the GPU's normals, not the target's terms, which are the same
/// operations on both).
fn step_matches_cpu(
    kind: TargetKind,
    batch: usize,
    dim: usize,
    portable: bool,
) -> Result<(), Failed> {
    let module = portable.then_some(ptx::MODULES[0]);
    let gpu = fused_mh::Gpu::open_with(0, module)?;
    let (shape, x, target) = problem(kind, batch, dim, (batch + dim) as u64);
    let step_size = 1.4 / (dim as f32).sqrt();
    let target_dev = gpu.upload_target(&target)?;
    let config = StepConfig::new(step_size, 99)?;
    let mut chains = gpu.upload_chains(&x, shape)?;
    chains.poison_outputs(POISON_X, POISON_FLAG)?;
    chains.set_step_counter(5);
    gpu.step(&mut chains, &target_dev, &config)?;
    let want = cpu::par_step(&x, shape, &target, &config, 5)?;
    want.compare(&chains.x()?, &chains.accepted_flags()?, step_size)
        .map_err(|e| format!("({batch}, {dim}) in-kernel: {e}"))?;

    let mut r = rng(dim as u64);
    let noise: Vec<f32> = (0..shape.len())
        .map(|_| r.sample(rand_distr::StandardNormal))
        .collect();
    let uniform: Vec<f32> = (0..batch).map(|_| r.random_range(0.0..1.0)).collect();
    let noise_dev = gpu.upload_noise(&noise, &uniform, shape)?;
    let mut chains = gpu.upload_chains(&x, shape)?;
    chains.poison_outputs(POISON_X, POISON_FLAG)?;
    gpu.step_with_noise(&mut chains, &target_dev, step_size, &noise_dev)?;
    let want = cpu::par_step_with_noise(&x, shape, &target, step_size, &noise, &uniform)?;
    want.compare(&chains.x()?, &chains.accepted_flags()?, step_size)
        .map_err(|e| format!("({batch}, {dim}) caller noise: {e}"))?;
    Ok(())
}

/// `k` steps of a run (`Gpu::run`: the fused kernel, split for a small batch, paired for a
/// large one (70000 rows of 64), with the moments for rows over 100; or, for rows over 1024,
/// the run's streamed single steps) equal `k` single steps bit for bit (for rows of 4096 in
/// whole quads, the block-per-row step: the same segment order of the sums), and count the
/// same acceptances.
fn run_equals_single_steps(kind: TargetKind, batch: usize, dim: usize) -> Result<(), Failed> {
    let gpu = open()?;
    let (shape, x, target) = problem(kind, batch, dim, 3);
    let config = StepConfig::new(1.4 / (dim as f32).sqrt(), 21)?;
    let target_dev = gpu.upload_target(&target)?;
    let k = 12;
    let mut run = gpu.upload_chains(&x, shape)?;
    // Moments for the longer rows only: the small batch of 64s then takes the split kernel.
    let mut stats = gpu.new_stats(shape, dim > 100)?;
    let plan = RunPlan::new(k, 5);
    run_quietly(&gpu, &mut run, &target_dev, &config, &plan, &mut stats)?;
    let mut single = gpu.upload_chains(&x, shape)?;
    let mut counts = vec![0u64; batch];
    for _ in 0..k {
        single.poison_outputs(POISON_X, POISON_FLAG)?;
        gpu.step(&mut single, &target_dev, &config)?;
        for (c, f) in counts.iter_mut().zip(single.accepted_flags()?) {
            *c += u64::from(f);
        }
    }
    let bits = |v: Vec<f32>| v.into_iter().map(f32::to_bits).collect::<Vec<_>>();
    if bits(run.x()?) != bits(single.x()?) {
        return Err(format!("({batch}, {dim}): the run's states differ from single steps'").into());
    }
    if stats.accepted_counts()? != counts || counts.iter().all(|&c| c == 0) {
        return Err(format!("({batch}, {dim}): acceptance counts differ (or none)").into());
    }
    Ok(())
}

/// 65536 independent chains of 8 dimensions run 1000 steps on the GPU (the fused kernel with
/// per-dimension scales): their final states pass `check_marginals` (KS per dimension at
/// alpha = 1e-4, with 65536 draws critical at 0.0087; the variances where estimable).
fn run_reaches_the_marginals(kind: TargetKind) -> Result<(), Failed> {
    let gpu = open()?;
    let (shape, x, target) = problem(kind, 65536, 8, 5);
    let config = StepConfig::new(1.4 / 2f32.sqrt(), 17)?.with_scales(target.sigma())?;
    let target_dev = gpu.upload_target(&target)?;
    let mut chains = gpu.upload_chains(&x, shape)?;
    let mut stats = gpu.new_stats(shape, false)?;
    let plan = RunPlan::new(1000, 100);
    run_quietly(&gpu, &mut chains, &target_dev, &config, &plan, &mut stats)?;
    check_marginals(&chains.x()?, shape, &target)?;
    Ok(())
}

fn main() -> ExitCode {
    let mut trials = GpuTrials::new("GPU target tests");
    for &kind in TargetKind::ALL {
        let name = kind.name();
        for (batch, dim) in STEP_SHAPES {
            for portable in [false, true] {
                trials.add(
                    format!("step_matches_cpu::{name}::{batch}x{dim}::portable_{portable}"),
                    move || step_matches_cpu(kind, batch, dim, portable),
                );
            }
        }
        for (batch, dim) in [
            (4096, 64),
            (65536, 64),
            (70000, 64),
            (300, 300),
            (64, 1030),
            (700, 4096),
            (150, 6144),
        ] {
            trials.add(
                format!("run_equals_single_steps::{name}::{batch}x{dim}"),
                move || run_equals_single_steps(kind, batch, dim),
            );
        }
        trials.add(format!("run_reaches_the_marginals::{name}"), move || {
            run_reaches_the_marginals(kind)
        });
    }
    trials.run()
}
