//! End-to-end tests on a real GPU, against the CPU reference.
//!
//! This is a `harness = false` test driven by libtest-mimic, so it can decide at run time
//! whether a GPU is there: without one (no driver, or no device), every GPU test is reported
//! as **ignored** — never as passed. Asked to run ignored tests anyway (`-- --ignored`), they
//! run and fail, because opening the GPU fails. With a GPU they all run.
//!
//! Inputs are drawn fresh from `rand_xorshift` for each test (never zeros), and the buffers a
//! step writes are poisoned (NaN, 0xAA) before every launch, so an element the kernel forgets to
//! write fails the comparison.

use std::process::ExitCode;

use fused_mh::kernel::philox::{PHILOX4X32_10_KAT, philox4x32_10};
use fused_mh::{Error, Gpu, Shape, StepConfig, Target, cpu, ptx};
use libtest_mimic::Failed;
use rand::Rng;
use rand_distr::StandardNormal;

mod support;

use support::problems::{POISON_FLAG, POISON_X, compare, open, random_problem, rng};
use support::trials::GpuTrials;

/// The shapes every comparison runs on: one element, dims below 32 and not multiples of 4 or
/// 32, typical batches (65536 x 64 fits in L2: the longest small-batch tiles), dims in the
/// thousands, a row of 333 (no multiple of 4): every kernel variant runs. Rows of 2052 to 8192
/// take a block per row (3 segments, the last of one quad; 4; 5 and 8, in dynamic shared
/// memory), at least 4 rows a block of the persistent grid at 2052, 4096, 8192 on a 132-SM GPU
/// (1320, 528, 264 blocks), so the sums' slots go round their two sets more than once. Batches
/// large enough for the paired staged step at dims 16 (one lane a row), 36 (a lane's last quad
/// only in lane 0) and 256 (16 lanes a row).
const SHAPES: [(usize, usize); 16] = [
    (300000, 16),
    (200000, 36),
    (100000, 256),
    (5500, 2052),
    (2200, 4096),
    (301, 5000),
    (1100, 8192),
    (1, 1),
    (7, 33),
    (4096, 64),
    (65536, 64),
    (1000, 100),
    (256, 1000),
    (33, 260),
    (3, 4097),
    (5, 333),
];

/// Shapes run again with the portable (`sm_70`) kernels, which the GPU tests would otherwise
/// not reach on a newer GPU: rows in registers (staged in the newer module), rows of 1000 and
/// 260 (streamed there, staged in the newer module), and a row that is not whole quads.
const PORTABLE_SHAPES: [(usize, usize); 4] = [(4096, 64), (256, 1000), (33, 260), (5, 333)];

fn random_noise(shape: Shape, seed: u64) -> (Vec<f32>, Vec<f32>) {
    let mut r = rng(seed);
    let noise = (0..shape.len()).map(|_| r.sample(StandardNormal)).collect();
    let uniform = (0..shape.batch())
        .map(|_| r.random_range(0.0..1.0))
        .collect();
    (noise, uniform)
}

/// Which of the embedded kernel sets a test runs.
#[derive(Clone, Copy, Debug)]
enum Kernels {
    /// The newest the GPU can run (what `Gpu::open` loads).
    Newest,
    /// The portable `sm_70` set.
    Portable,
}

fn open_kernels(kernels: Kernels) -> Result<Gpu, Failed> {
    let module = match kernels {
        Kernels::Newest => None,
        Kernels::Portable => Some(ptx::MODULES[0]),
    };
    Gpu::open_with(0, module).map_err(|e| format!("no GPU to run on: {e}").into())
}

#[derive(Clone, Copy, Debug)]
enum Mode {
    InKernelRng,
    CallerNoise,
}

/// One step on the GPU and on the CPU from the same inputs; the outputs must agree (see the
/// constants above and `compare`).
fn gpu_matches_cpu(batch: usize, dim: usize, mode: Mode, kernels: Kernels) -> Result<(), Failed> {
    let gpu = open_kernels(kernels)?;
    let seed = (batch * 7919 + dim) as u64;
    let (shape, x, target, step_size) = random_problem(batch, dim, seed);
    let target_dev = gpu.upload_target(&target)?;
    let mut chains = gpu.upload_chains(&x, shape)?;
    chains.poison_outputs(POISON_X, POISON_FLAG)?;
    let cpu_out = match mode {
        Mode::InKernelRng => {
            let config = StepConfig::new(step_size, seed ^ 0x5eed)?;
            // A step counter beyond 2^32 exercises both counter words.
            let step = (1 << 32) + 12_345;
            chains.set_step_counter(step);
            gpu.step(&mut chains, &target_dev, &config)?;
            cpu::par_step(&x, shape, &target, &config, step)?
        }
        Mode::CallerNoise => {
            let (noise, uniform) = random_noise(shape, seed + 1);
            let noise_dev = gpu.upload_noise(&noise, &uniform, shape)?;
            gpu.step_with_noise(&mut chains, &target_dev, step_size, &noise_dev)?;
            cpu::par_step_with_noise(&x, shape, &target, step_size, &noise, &uniform)?
        }
    };
    compare(
        &chains.x()?,
        &chains.accepted_flags()?,
        &cpu_out,
        shape,
        step_size,
    )
    .map_err(|e| {
        format!(
            "({batch}, {dim}) {mode:?} {kernels:?} ({}): {e}",
            gpu.ptx_target()
        )
        .into()
    })
}

/// The Random123 known-answer vectors, each evaluated by many GPU threads at once (interleaved
/// in one launch), plus random (counter, key) pairs against the CPU.
fn philox_known_answers() -> Result<(), Failed> {
    let gpu = open()?;
    let copies = 10_000;
    let n = PHILOX4X32_10_KAT.len() * copies;
    let ctr: Vec<_> = (0..n).map(|i| PHILOX4X32_10_KAT[i % 3].0).collect();
    let key: Vec<_> = (0..n).map(|i| PHILOX4X32_10_KAT[i % 3].1).collect();
    let out = gpu.philox4x32_10_many(&ctr, &key)?;
    for (i, got) in out.iter().enumerate() {
        let want = PHILOX4X32_10_KAT[i % 3].2;
        if *got != want {
            return Err(format!("thread {i}: {got:08x?}, want {want:08x?}").into());
        }
    }
    let mut r = rng(3);
    let ctr: Vec<[u32; 4]> = (0..100_000).map(|_| r.random()).collect();
    let key: Vec<[u32; 2]> = (0..100_000).map(|_| r.random()).collect();
    let out = gpu.philox4x32_10_many(&ctr, &key)?;
    for i in 0..ctr.len() {
        if out[i] != philox4x32_10(ctr[i], key[i]) {
            return Err(format!(
                "random pair {i}: GPU {:08x?}, CPU {:08x?}",
                out[i],
                philox4x32_10(ctr[i], key[i])
            )
            .into());
        }
    }
    Ok(())
}

/// More rows than the capped grid has warps, so the kernels' grid-stride loop does real work.
fn grid_stride_covers_every_row() -> Result<(), Failed> {
    gpu_matches_cpu(1_000_003, 3, Mode::InKernelRng, Kernels::Newest)?;
    // Whole quads: the staged step for short rows on GPUs from Ampere on.
    gpu_matches_cpu(1_000_003, 8, Mode::InKernelRng, Kernels::Newest)?;
    // The staged step's own launch shape (tiles of two rows of 1024): 40000 rows need more
    // blocks than the grid has, so its warps come back for further tiles.
    gpu_matches_cpu(40_000, 1024, Mode::InKernelRng, Kernels::Newest)
}

/// Rows whose x holds NaN or infinity never accept and are copied through unchanged.
fn non_finite_rows_stay_put() -> Result<(), Failed> {
    let gpu = open()?;
    let (shape, mut x, target, step_size) = random_problem(64, 10, 11);
    let bad_rows = [
        (3usize, f32::NAN),
        (17, f32::INFINITY),
        (40, f32::NEG_INFINITY),
    ];
    for (row, value) in bad_rows {
        x[row * 10 + 4] = value;
    }
    let target_dev = gpu.upload_target(&target)?;
    let (noise, _) = random_noise(shape, 12);
    let uniform = vec![0.0; shape.batch()]; // the most favourable draw: log u = ln 1e-10
    let noise_dev = gpu.upload_noise(&noise, &uniform, shape)?;
    let mut chains = gpu.upload_chains(&x, shape)?;
    for mode in [Mode::InKernelRng, Mode::CallerNoise] {
        chains.poison_outputs(POISON_X, POISON_FLAG)?;
        match mode {
            Mode::InKernelRng => {
                gpu.step(&mut chains, &target_dev, &StepConfig::new(step_size, 5)?)?
            }
            Mode::CallerNoise => {
                gpu.step_with_noise(&mut chains, &target_dev, step_size, &noise_dev)?
            }
        }
        let (x_new, flags) = (chains.x()?, chains.accepted_flags()?);
        for (row, _) in bad_rows {
            if flags[row] != 0 {
                return Err(
                    format!("{mode:?}: non-finite row {row} has flag {:#x}", flags[row]).into(),
                );
            }
            let same = (0..10).all(|d| {
                let (a, b) = (x_new[row * 10 + d], x[row * 10 + d]);
                a == b || (a.is_nan() && b.is_nan() && d == 4)
            });
            if !same {
                return Err(format!("{mode:?}: non-finite row {row} changed").into());
            }
        }
        // Put the original states back for the next mode.
        chains = gpu.upload_chains(&x, shape)?;
    }
    Ok(())
}

/// Chains started in the target stay in it: 4096 chains of dim 16 drawn from the target, 500
/// in-kernel steps. Per dimension, the time-averaged mean is within 5 standard errors of mu
/// (from the spread of the 4096 per-chain averages, which accounts for autocorrelation), the
/// pooled variance within 5 % of sigma^2 (relative standard error about sqrt(2 / ESS) < 1 %
/// for an ESS above 20,000), the acceptance rate within 1 % of the CPU reference's.
fn stationarity() -> Result<(), Failed> {
    let gpu = open()?;
    let (batch, dim, steps) = (4096usize, 16usize, 500usize);
    let mut r = rng(2024);
    let shape = Shape::new(batch, dim)?;
    let mu: Vec<f32> = (0..dim).map(|d| d as f32 * 0.5 - 4.0).collect();
    let sigma: Vec<f32> = (0..dim).map(|d| 0.5 + 0.25 * (d % 5) as f32).collect();
    let x0: Vec<f32> = (0..shape.len())
        .map(|i| mu[i % dim] + sigma[i % dim] * r.sample::<f32, _>(StandardNormal))
        .collect();
    let target = Target::new(mu.clone(), sigma.clone())?;
    // Isotropic proposals on an anisotropic target: scale to the smallest sigma.
    let config = StepConfig::new(0.5 * 2.38 / (dim as f32).sqrt(), 99)?;

    let target_dev = gpu.upload_target(&target)?;
    let mut chains = gpu.upload_chains(&x0, shape)?;
    let mut chain_sum = vec![0f64; shape.len()];
    let mut sum_sq_dev = vec![0f64; dim];
    let mut gpu_accepts = 0usize;
    for _ in 0..steps {
        gpu.step(&mut chains, &target_dev, &config)?;
        let x = chains.x()?;
        gpu_accepts += chains.accepted()?.iter().filter(|&&a| a).count();
        for (i, &v) in x.iter().enumerate() {
            chain_sum[i] += f64::from(v);
            sum_sq_dev[i % dim] += (f64::from(v) - f64::from(mu[i % dim])).powi(2);
        }
    }
    let n = (batch * steps) as f64;
    for d in 0..dim {
        let chain_means: Vec<f64> = (0..batch)
            .map(|b| chain_sum[b * dim + d] / steps as f64)
            .collect();
        let grand = chain_means.iter().sum::<f64>() / batch as f64;
        let spread =
            chain_means.iter().map(|m| (m - grand).powi(2)).sum::<f64>() / (batch - 1) as f64;
        let se = (spread / batch as f64).sqrt();
        let m = f64::from(mu[d]);
        if (grand - m).abs() > 5.0 * se {
            return Err(format!("dim {d}: mean {grand}, mu {m}, standard error {se}").into());
        }
        let var = sum_sq_dev[d] / n;
        let want = f64::from(sigma[d]).powi(2);
        if (var / want - 1.0).abs() > 0.05 {
            return Err(format!("dim {d}: variance {var}, sigma^2 {want}").into());
        }
    }

    let mut x = x0;
    let mut cpu_accepts = 0usize;
    for step in 0..steps as u64 {
        let out = cpu::par_step(&x, shape, &target, &config, step)?;
        cpu_accepts += out.accepted.iter().filter(|&&a| a).count();
        x = out.x_new;
    }
    let (rate_gpu, rate_cpu) = (gpu_accepts as f64 / n, cpu_accepts as f64 / n);
    eprintln!("  acceptance rate: GPU {rate_gpu:.5}, CPU {rate_cpu:.5}");
    if (rate_gpu / rate_cpu - 1.0).abs() > 0.01 {
        return Err(
            format!("acceptance rate GPU {rate_gpu}, CPU {rate_cpu}: more than 1 % apart").into(),
        );
    }
    Ok(())
}

/// Device-side errors are errors, not panics: a device that does not exist, and inputs that
/// do not fit together.
fn device_errors_are_typed() -> Result<(), Failed> {
    let gpu = open()?;
    match Gpu::open(4096) {
        Err(Error::NoDevice { ordinal: 4096, .. }) => {}
        other => {
            return Err(format!(
                "Gpu::open(4096) gave {:?}",
                other.map(|g| g.name().to_string())
            )
            .into());
        }
    }
    let (shape, x, target, step_size) = random_problem(8, 5, 1);
    let mut chains = gpu.upload_chains(&x, shape)?;
    let other_target = gpu.upload_target(&Target::new(vec![0.0; 6], vec![1.0; 6])?)?;
    let config = StepConfig::new(step_size, 1)?;
    if !matches!(
        gpu.step(&mut chains, &other_target, &config),
        Err(Error::ShapeMismatch(_))
    ) {
        return Err("a target of another dim was accepted".into());
    }
    let (noise, uniform) = random_noise(Shape::new(4, 5)?, 2);
    let noise_dev = gpu.upload_noise(&noise, &uniform, Shape::new(4, 5)?)?;
    let target_dev = gpu.upload_target(&target)?;
    if !matches!(
        gpu.step_with_noise(&mut chains, &target_dev, step_size, &noise_dev),
        Err(Error::ShapeMismatch(_))
    ) {
        return Err("noise of another shape was accepted".into());
    }
    if !matches!(
        gpu.upload_chains(&x[1..], shape),
        Err(Error::LengthMismatch { .. })
    ) {
        return Err("x of the wrong length was accepted".into());
    }
    match gpu.upload_chains(&vec![0.0; 1 << 20], Shape::new(1 << 20, 1)?) {
        Ok(_) => Ok(()),
        Err(e) => Err(format!("a 4 MiB allocation failed: {e}").into()),
    }
}

/// Runs everywhere: with no driver or no device, opening the GPU is a typed error.
fn missing_gpu_is_an_error_not_a_panic() -> Result<(), Failed> {
    match Gpu::open(0) {
        Ok(_) | Err(Error::NoDriver) | Err(Error::NoDevice { .. }) => Ok(()),
        Err(e) => Err(format!("unexpected error opening device 0: {e}").into()),
    }
}

/// (batch, dim, K) for the fused kernel: K = 1, odd dims, both register widths (q2 up to 256,
/// q8 up to 1024), and a row of 1025 that falls back to single steps. Rows of at most 128
/// elements run split over twice the lanes in small batches (the first four cases) and one
/// group per row in large ones (the last two).
fn main() -> ExitCode {
    let mut trials = GpuTrials::new("GPU tests");
    trials.add_anywhere(
        "missing_gpu_is_an_error_not_a_panic",
        missing_gpu_is_an_error_not_a_panic,
    );
    trials.add("philox_known_answers", philox_known_answers);
    for (batch, dim) in SHAPES {
        for mode in [Mode::InKernelRng, Mode::CallerNoise] {
            trials.add(
                format!("gpu_matches_cpu::{mode:?}::{batch}x{dim}"),
                move || gpu_matches_cpu(batch, dim, mode, Kernels::Newest),
            );
        }
    }
    for (batch, dim) in PORTABLE_SHAPES {
        for mode in [Mode::InKernelRng, Mode::CallerNoise] {
            let name = format!("portable_kernels_match_cpu::{mode:?}::{batch}x{dim}");
            trials.add(name, move || {
                gpu_matches_cpu(batch, dim, mode, Kernels::Portable)
            });
        }
    }
    trials.add("grid_stride_covers_every_row", grid_stride_covers_every_row);
    trials.add("non_finite_rows_stay_put", non_finite_rows_stay_put);
    trials.add("stationarity", stationarity);
    trials.add("device_errors_are_typed", device_errors_are_typed);
    trials.run()
}
