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
use fused_mh::{Error, Gpu, PTX_MODULES, Shape, StepConfig, Target, cpu, dispatch};
use libtest_mimic::{Arguments, Failed, Trial};
use rand::{Rng, SeedableRng};
use rand_distr::StandardNormal;
use rand_xorshift::XorShiftRng;

mod support;

/// The shapes every comparison runs on: a single element, dims below 32 and not multiples of 4
/// or 32, a typical batch, dims in the thousands (several quads per lane), and a row of 333
/// (kept in registers in caller-noise mode, streamed with in-kernel random numbers, no
/// multiple of 4): every variant of the kernel runs.
const SHAPES: [(usize, usize); 8] = [
    (1, 1),
    (7, 33),
    (4096, 64),
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

/// Poison for the state buffer the step writes: NaN fails every comparison.
const POISON_X: f32 = f32::NAN;
/// Poison for the acceptance flags: neither 0 nor 1.
const POISON_FLAG: u8 = 0xAA;

fn rng(seed: u64) -> XorShiftRng {
    XorShiftRng::seed_from_u64(seed)
}

/// A random target (mu in [-2, 2], sigma in [0.5, 2]) and chains around it (1.5 sigma wide, so
/// both accepts and rejects happen), with a step size that accepts a fair share.
fn random_problem(batch: usize, dim: usize, seed: u64) -> (Shape, Vec<f32>, Target, f32) {
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

fn random_noise(shape: Shape, seed: u64) -> (Vec<f32>, Vec<f32>) {
    let mut r = rng(seed);
    let noise = (0..shape.len()).map(|_| r.sample(StandardNormal)).collect();
    let uniform = (0..shape.batch())
        .map(|_| r.random_range(0.0..1.0))
        .collect();
    (noise, uniform)
}

fn open() -> Result<Gpu, Failed> {
    Gpu::open(0).map_err(|e| format!("no GPU to run on: {e}").into())
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
        Kernels::Portable => Some(PTX_MODULES[0]),
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

/// Shapes for the lessons: short and long rows, rows in whole quads and not, small and large
/// batches. Lessons 3 and 4 take whole quads up to 1024 elements only.
const LESSON_SHAPES: [(usize, usize); 6] = [
    (1000, 64),
    (300, 1024),
    (37, 12),
    (5, 260),
    (2000, 33),
    (3, 4097),
];

/// One step of a lesson (`kernel/src/gpu/lessons/`) against the CPU reference, as
/// `gpu_matches_cpu` checks the production step. A lesson sums a row's terms in its own order,
/// which moves `log alpha` by float32 rounding only, far inside the decision margin.
fn lesson_matches_cpu(lesson: dispatch::Lesson, batch: usize, dim: usize) -> Result<(), Failed> {
    let gpu = open()?;
    let seed = (batch * 31 + dim * 7 + lesson.number as usize) as u64;
    let (shape, x, target, step_size) = random_problem(batch, dim, seed);
    let config = StepConfig::new(step_size, seed ^ 0x1e55)?;
    let target_dev = gpu.upload_target(&target)?;
    let mut chains = gpu.upload_chains(&x, shape)?;
    let step = (1 << 32) + 77;
    chains.set_step_counter(step);
    chains.poison_outputs(POISON_X, POISON_FLAG)?;
    gpu.step_lesson(lesson, &mut chains, &target_dev, &config)?;
    let cpu_out = cpu::par_step(&x, shape, &target, &config, step)?;
    compare(
        &chains.x()?,
        &chains.accepted_flags()?,
        &cpu_out,
        shape,
        step_size,
    )
    .map_err(|e| format!("lesson {} ({batch}, {dim}): {e}", lesson.number).into())
}

/// GPU outputs against the CPU reference's, within the tolerances `cpu::StepOutput::compare`
/// states and justifies.
fn compare(
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
/// in-kernel steps. Per dimension, the time-averaged mean must be within 5 standard errors of
/// mu (the standard error from the spread of the 4096 independent per-chain averages, which
/// accounts for autocorrelation), and the pooled variance within 5 % of sigma^2 (its relative
/// standard error is about sqrt(2 / ESS) < 1 % for an effective sample size above 20,000).
/// The acceptance rate must be within 1 % of the CPU reference's on the same inputs.
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
const FUSED_CASES: [(usize, usize, u32); 9] = [
    (1, 1, 1),
    (7, 33, 5),
    (4096, 64, 20),
    (1000, 100, 3),
    (5, 333, 7),
    (256, 1000, 4),
    (3, 1025, 3),
    (40000, 64, 3),
    (70000, 30, 2),
];

/// K fused steps against K single-step launches (bit-identical states, equal acceptance
/// counts) and against K steps of the CPU reference.
fn fused_equals_single_steps(batch: usize, dim: usize, k: u32) -> Result<(), Failed> {
    let gpu = open()?;
    let seed = (batch * 31 + dim * 7 + k as usize) as u64;
    let (shape, x, target, step_size) = random_problem(batch, dim, seed);
    let config = StepConfig::new(step_size, seed ^ 0xfeed)?;
    let target_dev = gpu.upload_target(&target)?;
    let first_step = (1u64 << 32) - 2; // crosses the 32-bit boundary of the step counter

    let mut fused = gpu.upload_chains(&x, shape)?;
    fused.set_step_counter(first_step);
    let mut stats = gpu.new_stats(shape, false)?;
    // Totals that start just below 2^32 pass it (64-bit totals over the kernels' counts), and
    // folding the kernels' counts into them changes nothing.
    let count_start = (1u64 << 32) - 3;
    stats.set_accepted_counts(&vec![count_start; batch])?;
    gpu.steps(&mut fused, &target_dev, &config, k, &mut stats)?;
    let (x_fused, counts) = (fused.x()?, stats.accepted_counts()?);
    stats.fold_counts()?;
    if stats.accepted_counts()? != counts {
        return Err("folding the counts changed them".into());
    }
    if fused.step_counter() != first_step + u64::from(k) || stats.steps() != u64::from(k) {
        return Err("the step counter did not advance by K".into());
    }

    let mut single = gpu.upload_chains(&x, shape)?;
    single.set_step_counter(first_step);
    let mut single_counts = vec![count_start; batch];
    for _ in 0..k {
        single.poison_outputs(POISON_X, POISON_FLAG)?;
        gpu.step(&mut single, &target_dev, &config)?;
        for (c, f) in single_counts.iter_mut().zip(single.accepted_flags()?) {
            *c += u64::from(f);
        }
    }
    let x_single = single.x()?;
    if let Some(i) = (0..x_fused.len()).find(|&i| x_fused[i].to_bits() != x_single[i].to_bits()) {
        return Err(format!(
            "({batch}, {dim}, K={k}): element {i}: fused {} vs single steps {}",
            x_fused[i], x_single[i]
        )
        .into());
    }
    if counts != single_counts {
        return Err(format!("({batch}, {dim}, K={k}): acceptance counts differ").into());
    }

    // Against the CPU: each step agrees within the single step's tolerances, so after K steps
    // a row whose accept/reject decisions all matched (same count) is within K times the
    // per-step bounds; a row with a decision flipped at a boundary (|log u - log alpha| below
    // the decision margin) has left the CPU's path, and at most K times the allowed
    // per-step fraction of rows (plus one) may do that.
    let (x_cpu, counts_cpu) = cpu::steps(&x, shape, &target, &config, first_step, u64::from(k))?;
    let kf = k as f32;
    let mut diverged = 0;
    for row in 0..batch {
        if counts[row] != count_start + counts_cpu[row] {
            diverged += 1;
            continue;
        }
        for d in 0..dim {
            let (g, c) = (x_fused[row * dim + d], x_cpu[row * dim + d]);
            let bound =
                kf * (cpu::X_NEW_MAX_RELATIVE * c.abs() + cpu::X_NEW_ABS_PER_STEP_SIZE * step_size);
            if (g - c).abs() > bound {
                return Err(format!(
                    "({batch}, {dim}, K={k}): x[{row}, {d}] GPU {g} vs CPU {c} (bound {bound})"
                )
                .into());
            }
        }
    }
    let allowed = (f64::from(k) * cpu::MAX_FLIPPED_FRACTION * batch as f64).floor() as usize + 1;
    if diverged > allowed {
        return Err(format!("{diverged} rows left the CPU's path (allowed {allowed})").into());
    }
    Ok(())
}

/// What [`gpu_run`] returns.
#[derive(PartialEq)]
struct Ran {
    /// The final states' bits (NaN compares equal to itself).
    x_bits: Vec<u32>,
    accepted: Vec<u64>,
    nonfinite: Vec<u64>,
    /// With moments only (None without).
    null_moves: Option<Vec<u64>>,
    /// The running means' bits (with moments).
    mean_bits: Option<Vec<u64>>,
}

/// Runs `steps` steps (launches of 10) of `x` with `config` on the GPU; returns the final
/// states, the accepted and non-finite counts, and the means (with `moments`).
fn gpu_run(
    gpu: &Gpu,
    (shape, x, target): (Shape, &[f32], &Target),
    config: &StepConfig,
    steps: u64,
    moments: bool,
) -> Result<Ran, Failed> {
    let target_dev = gpu.upload_target(target)?;
    let mut chains = gpu.upload_chains(x, shape)?;
    chains.poison_outputs(POISON_X, POISON_FLAG)?;
    let mut stats = gpu.new_stats(shape, moments)?;
    gpu.run(
        &mut chains,
        &target_dev,
        config,
        &fused_mh::RunPlan::new(steps, 10),
        &mut stats,
        &mut |_| Ok(()),
        &mut |_| Ok(()),
    )?;
    Ok(Ran {
        x_bits: chains.x()?.iter().map(|v| v.to_bits()).collect(),
        accepted: stats.accepted_counts()?,
        nonfinite: stats.nonfinite_counts()?,
        null_moves: stats.null_move_counts()?,
        mean_bits: stats
            .means()?
            .map(|m| m.iter().map(|v| v.to_bits()).collect()),
    })
}

/// Shapes for the per-dimension scales: the split kernel (4096 rows of 64), `q2` rows that are
/// not whole quads, `q8` rows, rows in registers with a large batch, and rows of 1025 (the
/// run's single steps).
const SCALED_SHAPES: [(usize, usize); 5] =
    [(4096, 64), (3000, 33), (600, 300), (40000, 64), (50, 1025)];

/// Scales of 1 in every dimension give the `_scaled` kernels the step size itself: 25 steps
/// with them equal 25 steps without, bit for bit (states, counts, running means), with and
/// without the moments.
fn scales_of_one_change_nothing(batch: usize, dim: usize) -> Result<(), Failed> {
    let gpu = open()?;
    let (shape, x, target, step_size) = random_problem(batch, dim, (batch ^ dim) as u64);
    let plain = StepConfig::new(step_size, 3)?;
    let scaled = plain.clone().with_scales(&vec![1.0; dim])?;
    for moments in [false, true] {
        let a = gpu_run(&gpu, (shape, &x, &target), &plain, 25, moments)?;
        let b = gpu_run(&gpu, (shape, &x, &target), &scaled, 25, moments)?;
        if a != b {
            return Err(format!(
                "({batch}, {dim}, moments {moments}): scales of 1 changed the run"
            )
            .into());
        }
    }
    Ok(())
}

/// Scales from 0.25 to 4 per dimension: 20 steps on the GPU against 20 of the CPU reference,
/// which scales each normal by `step_size * scale[d]` itself (the tolerances of
/// `fused_equals_single_steps`, with the largest scale in the absolute bound).
fn scaled_run_matches_cpu(batch: usize, dim: usize) -> Result<(), Failed> {
    let gpu = open()?;
    let (shape, x, target, step_size) = random_problem(batch, dim, (batch * 3 + dim) as u64);
    let mut r = rng(dim as u64);
    let scales: Vec<f32> = (0..dim)
        .map(|_| 2f32.powf(r.random_range(-2.0..2.0)))
        .collect();
    let config = StepConfig::new(step_size, 8)?.with_scales(&scales)?;
    let k = 20;
    let ran = gpu_run(&gpu, (shape, &x, &target), &config, k, false)?;
    let x_gpu: Vec<f32> = ran.x_bits.iter().map(|&b| f32::from_bits(b)).collect();
    let counts = &ran.accepted;
    let cpu = cpu::run_chains(
        &x,
        shape,
        &target,
        &config,
        0,
        k,
        0,
        None,
        &mut |_, _| Ok(()),
        &mut |_| Ok(()),
    )?;
    if ran.nonfinite.iter().any(|&n| n > 0) || cpu.nonfinite.iter().any(|&n| n > 0) {
        return Err("a finite run counted non-finite steps".into());
    }
    let kf = k as f32;
    let widest = step_size * scales.iter().copied().fold(0.0, f32::max);
    let mut diverged = 0;
    for row in 0..batch {
        if counts[row] != cpu.accepted[row] {
            diverged += 1;
            continue;
        }
        for d in 0..dim {
            let (g, c) = (x_gpu[row * dim + d], cpu.x[row * dim + d]);
            let bound =
                kf * (cpu::X_NEW_MAX_RELATIVE * c.abs() + cpu::X_NEW_ABS_PER_STEP_SIZE * widest);
            if (g - c).abs() > bound {
                return Err(format!(
                    "({batch}, {dim}): x[{row}, {d}] GPU {g} vs CPU {c} (bound {bound})"
                )
                .into());
            }
        }
    }
    let allowed = (kf as f64 * cpu::MAX_FLIPPED_FRACTION * batch as f64).floor() as usize + 1;
    if diverged > allowed {
        return Err(format!("{diverged} rows left the CPU's path (allowed {allowed})").into());
    }
    Ok(())
}

/// Rows planted with a NaN, +inf or -inf count every one of their steps as non-finite, the
/// others none, through launches of the fused kernels (split or not; the run's single steps for
/// rows of 1030), with and without scales and moments; the planted rows never move. A row
/// planted at 10^8 in every coordinate (where one float32 step is 8, and the proposals move
/// by about 1) counts every step as a null move, and no other row counts one (with the
/// moments: null moves are counted with them).
fn nonfinite_counts_are_exact(batch: usize, dim: usize) -> Result<(), Failed> {
    let gpu = open()?;
    let (shape, mut x, target, step_size) = random_problem(batch, dim, 41);
    let planted = [
        (1usize, f32::NAN),
        (5, f32::INFINITY),
        (6, f32::NEG_INFINITY),
    ];
    for (row, value) in planted {
        x[row * dim + dim / 2] = value;
    }
    let stuck = 3;
    x[stuck * dim..(stuck + 1) * dim].fill(1.0e8);
    let plain = StepConfig::new(step_size, 2)?;
    let scaled = plain.clone().with_scales(&vec![0.5; dim])?;
    let steps = 25;
    // Without moments small batches take the split kernels, whose count is in another lane.
    for (config, moments) in [
        (&plain, false),
        (&plain, true),
        (&scaled, false),
        (&scaled, true),
    ] {
        let ran = gpu_run(&gpu, (shape, &x, &target), config, steps, moments)?;
        for (row, &n) in ran.nonfinite.iter().enumerate() {
            let want = if planted.iter().any(|&(r, _)| r == row) {
                steps
            } else {
                0
            };
            if n != want {
                return Err(format!("({batch}, {dim}): row {row} counted {n}, not {want}").into());
            }
        }
        let null_moves = ran.null_moves.unwrap_or_default();
        if moments != (null_moves.len() == batch) {
            return Err(format!(
                "({batch}, {dim}): null moves {null_moves:?} with moments {moments}"
            )
            .into());
        }
        for (row, &n) in null_moves.iter().enumerate() {
            let want = if row == stuck { steps } else { 0 };
            if n != want {
                return Err(
                    format!("({batch}, {dim}): row {row}: {n} null moves, not {want}").into(),
                );
            }
        }
        for (row, _) in planted {
            let moved = (0..dim).any(|d| ran.x_bits[row * dim + d] != x[row * dim + d].to_bits());
            if moved {
                return Err(format!("({batch}, {dim}): planted row {row} moved").into());
            }
        }
    }
    Ok(())
}

/// Two-pass mean and variance (f64) of each chain and coordinate over saved states
/// `[n, batch * dim]`.
fn two_pass(trace: &[f32], len: usize) -> (Vec<f64>, Vec<f64>) {
    let n = (trace.len() / len) as f64;
    let mut mean = vec![0f64; len];
    for state in trace.chunks(len) {
        for (m, &v) in mean.iter_mut().zip(state) {
            *m += f64::from(v);
        }
    }
    mean.iter_mut().for_each(|m| *m /= n);
    let mut var = vec![0f64; len];
    for state in trace.chunks(len) {
        for ((s, &v), m) in var.iter_mut().zip(state).zip(&mean) {
            *s += (f64::from(v) - m).powi(2);
        }
    }
    var.iter_mut().for_each(|s| *s /= n);
    (mean, var)
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
    let plan = fused_mh::RunPlan {
        thin: 1,
        trace_buffer_bytes: 3 * 4 * shape.len(),
        ..fused_mh::RunPlan::new(40, 16)
    };
    let mut trace = Vec::new();
    let mut next_first = 0;
    let mut reports = 0;
    gpu.run(
        &mut chains,
        &target_dev,
        &config,
        &plan,
        &mut stats,
        &mut |_: &fused_mh::Progress<'_>| {
            reports += 1;
            Ok(())
        },
        &mut |chunk| {
            assert_eq!(chunk.first, next_first, "trace chunks out of order");
            next_first += (chunk.states.len() / shape.len()) as u64;
            trace.extend_from_slice(chunk.states);
            Ok(())
        },
    )?;
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
    let args = Arguments::from_args();
    let gpu_present = support::gpu_present("GPU tests");
    let gpu_test = |name: String, f: Box<dyn FnOnce() -> Result<(), Failed> + Send>| {
        Trial::test(name, f).with_ignored_flag(!gpu_present)
    };
    let mut trials = vec![Trial::test(
        "missing_gpu_is_an_error_not_a_panic",
        missing_gpu_is_an_error_not_a_panic,
    )];
    trials.push(gpu_test(
        "philox_known_answers".into(),
        Box::new(philox_known_answers),
    ));
    for lesson in dispatch::LESSONS {
        for (batch, dim) in LESSON_SHAPES {
            let whole_quads = dim % 4 == 0 && dim <= 1024;
            if lesson.number >= 3 && !whole_quads {
                continue;
            }
            trials.push(gpu_test(
                format!("lesson_matches_cpu::{}::{batch}x{dim}", lesson.number),
                Box::new(move || lesson_matches_cpu(lesson, batch, dim)),
            ));
        }
    }
    for (batch, dim) in SHAPES {
        for mode in [Mode::InKernelRng, Mode::CallerNoise] {
            let name = format!("gpu_matches_cpu::{mode:?}::{batch}x{dim}");
            trials.push(gpu_test(
                name,
                Box::new(move || gpu_matches_cpu(batch, dim, mode, Kernels::Newest)),
            ));
        }
    }
    for (batch, dim) in PORTABLE_SHAPES {
        for mode in [Mode::InKernelRng, Mode::CallerNoise] {
            let name = format!("portable_kernels_match_cpu::{mode:?}::{batch}x{dim}");
            trials.push(gpu_test(
                name,
                Box::new(move || gpu_matches_cpu(batch, dim, mode, Kernels::Portable)),
            ));
        }
    }
    trials.push(gpu_test(
        "grid_stride_covers_every_row".into(),
        Box::new(grid_stride_covers_every_row),
    ));
    trials.push(gpu_test(
        "non_finite_rows_stay_put".into(),
        Box::new(non_finite_rows_stay_put),
    ));
    trials.push(gpu_test("stationarity".into(), Box::new(stationarity)));
    trials.push(gpu_test(
        "device_errors_are_typed".into(),
        Box::new(device_errors_are_typed),
    ));
    for (batch, dim, k) in FUSED_CASES {
        trials.push(gpu_test(
            format!("fused_equals_single_steps::{batch}x{dim}::k{k}"),
            Box::new(move || fused_equals_single_steps(batch, dim, k)),
        ));
    }
    for (batch, dim) in [(300, 64), (40, 333), (6, 1030)] {
        trials.push(gpu_test(
            format!("moments_and_trace::{batch}x{dim}"),
            Box::new(move || moments_and_trace(batch, dim)),
        ));
    }
    trials.push(gpu_test("convergence".into(), Box::new(convergence)));
    for (batch, dim) in SCALED_SHAPES {
        trials.push(gpu_test(
            format!("scales_of_one_change_nothing::{batch}x{dim}"),
            Box::new(move || scales_of_one_change_nothing(batch, dim)),
        ));
        trials.push(gpu_test(
            format!("scaled_run_matches_cpu::{batch}x{dim}"),
            Box::new(move || scaled_run_matches_cpu(batch, dim)),
        ));
    }
    for (batch, dim) in [(64, 10), (4096, 64), (9, 300), (8, 1030)] {
        trials.push(gpu_test(
            format!("nonfinite_counts_are_exact::{batch}x{dim}"),
            Box::new(move || nonfinite_counts_are_exact(batch, dim)),
        ));
    }
    libtest_mimic::run(&args, trials).exit_code()
}
