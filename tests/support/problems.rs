//! What the GPU step and run tests share: random problems (never zeros), the poison for the
//! buffers a step writes, the GPU they run on, and the comparison of a GPU step with the CPU
//! reference's.

use fused_mh::{
    ChainStats, DeviceChains, DeviceTarget, Gpu, RunPlan, Shape, StepConfig, Target, cpu,
};
use libtest_mimic::Failed;
use rand::{Rng, SeedableRng};
use rand_distr::StandardNormal;
use rand_xorshift::XorShiftRng;

/// Poison for the state buffer the step writes: NaN fails every comparison.
#[allow(dead_code)] // the diagnostics test files use none of these
pub const POISON_X: f32 = f32::NAN;
/// Poison for the acceptance flags: neither 0 nor 1.
#[allow(dead_code)]
pub const POISON_FLAG: u8 = 0xAA;

/// A seeded generator for a test's inputs.
#[allow(dead_code)]
pub fn rng(seed: u64) -> XorShiftRng {
    XorShiftRng::seed_from_u64(seed)
}

/// A random target (mu in [-2, 2], sigma in [0.5, 2]) and chains around it (1.5 sigma wide, so
/// both accepts and rejects happen), with a step size that accepts a fair share.
#[allow(dead_code)]
pub fn random_problem(batch: usize, dim: usize, seed: u64) -> (Shape, Vec<f32>, Target, f32) {
    let mut r = rng(seed);
    let shape = Shape::new(batch, dim).expect("valid test shape");
    let mu: Vec<f32> = (0..dim).map(|_| r.random_range(-2.0..2.0)).collect();
    let sigma: Vec<f32> = (0..dim).map(|_| r.random_range(0.5..2.0)).collect();
    let x = (0..shape.len())
        .map(|i| {
            let z: f32 = r.sample(StandardNormal);
            mu[i % dim] + 1.5 * sigma[i % dim] * z
        })
        .collect();
    let step_size = 1.2 / (dim as f32).sqrt();
    (
        shape,
        x,
        Target::new(mu, sigma).expect("valid target"),
        step_size,
    )
}

/// The GPU, or a failure that says there is none.
#[allow(dead_code)]
pub fn open() -> Result<Gpu, Failed> {
    Gpu::open(0).map_err(|e| format!("no GPU to run on: {e}").into())
}

/// `gpu.run` with no progress report and no trace kept (`plan.thin` 0): the steps run.
#[allow(dead_code)]
pub fn run_quietly(
    gpu: &Gpu,
    chains: &mut DeviceChains,
    target: &DeviceTarget,
    config: &StepConfig,
    plan: &RunPlan,
    stats: &mut ChainStats,
) -> fused_mh::Result<u64> {
    gpu.run(
        chains,
        target,
        config,
        plan,
        stats,
        &mut |_| Ok(()),
        &mut |_| Ok(()),
    )
}

/// GPU outputs against the CPU reference's, within the tolerances `cpu::StepOutput::compare`
/// states and justifies.
#[allow(dead_code)]
pub fn compare(
    x_gpu: &[f32],
    flags: &[u8],
    cpu: &cpu::StepOutput,
    shape: Shape,
    step_size: f32,
) -> Result<(), String> {
    let agreement = cpu
        .compare(x_gpu, flags, step_size)
        .map_err(|e| e.to_string())?;
    eprintln!(
        "  {shape:?}: {} boundary decisions differ, max |x_gpu - x_cpu| = {:e}",
        agreement.boundary_flips, agreement.max_abs_diff
    );
    Ok(())
}
