//! The fused K-step run on a real GPU: K fused steps against K single steps and the CPU
//! reference, the per-dimension scales, the non-finite counts, the hand-over to the host (the
//! trace and the moments: `gpu_traces.rs`), the warm-up's launches. A `harness = false` test like `gpu.rs`: without a
//! GPU every test reports ignored.

use std::process::ExitCode;

use fused_mh::adapt::StepSizeAdaptation;
use fused_mh::{CountMemory, Gpu, RunCounts, Shape, StepConfig, Target, WarmupPlan, cpu};
use libtest_mimic::Failed;
use rand::Rng;

mod support;

use support::problems::{POISON_FLAG, POISON_X, open, random_problem, rng, run_quietly};
use support::trials::GpuTrials;

/// Small batches (the split kernels; 2000 x 128 with a sum tree of 16 lanes over launches of
/// more than one round of uniforms), batches of one lane group per row, and large batches
/// (the paired kernels: 70000 x 64 and up), with rows of 12 (one lane per row paired), 30 and
/// 36 (quads a lane does not own), 64 and 256.
const FUSED_CASES: [(usize, usize, u32); 15] = [
    (1, 1, 1),
    (7, 33, 5),
    (4096, 64, 20),
    (1000, 100, 3),
    (2000, 128, 40),
    (5, 333, 7),
    (256, 1000, 4),
    (3, 1025, 3),
    (40000, 64, 3),
    (70000, 30, 2),
    (70000, 64, 3),
    (300000, 30, 2),
    (600000, 12, 2),
    (150000, 36, 2),
    (140000, 256, 2),
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
            let bound = kf
                * (fused_mh::testing::X_NEW_MAX_RELATIVE * c.abs()
                    + fused_mh::testing::X_NEW_ABS_PER_STEP_SIZE * step_size);
            if (g - c).abs() > bound {
                return Err(format!(
                    "({batch}, {dim}, K={k}): x[{row}, {d}] GPU {g} vs CPU {c} (bound {bound})"
                )
                .into());
            }
        }
    }
    let allowed = (f64::from(k) * fused_mh::testing::MAX_FLIPPED_FRACTION * batch as f64).floor()
        as usize
        + 1;
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
    run_quietly(
        gpu,
        &mut chains,
        &target_dev,
        config,
        &fused_mh::RunPlan::new(steps, 10),
        &mut stats,
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
/// not whole quads, `q8` rows, rows in registers with a large batch, the paired kernel
/// (70000 x 64), and rows of 1025 (the run's single steps).
const SCALED_SHAPES: [(usize, usize); 6] = [
    (4096, 64),
    (3000, 33),
    (600, 300),
    (40000, 64),
    (70000, 64),
    (50, 1025),
];

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
            let bound = kf
                * (fused_mh::testing::X_NEW_MAX_RELATIVE * c.abs()
                    + fused_mh::testing::X_NEW_ABS_PER_STEP_SIZE * widest);
            if (g - c).abs() > bound {
                return Err(format!(
                    "({batch}, {dim}): x[{row}, {d}] GPU {g} vs CPU {c} (bound {bound})"
                )
                .into());
            }
        }
    }
    let allowed =
        (kf as f64 * fused_mh::testing::MAX_FLIPPED_FRACTION * batch as f64).floor() as usize + 1;
    if diverged > allowed {
        return Err(format!("{diverged} rows left the CPU's path (allowed {allowed})").into());
    }
    Ok(())
}

/// Rows planted with a NaN, +inf or -inf count every one of their steps as non-finite, the
/// others none, through launches of the fused kernels (split, paired or neither; the run's
/// single steps for rows of 1030), with and without scales and moments; the planted rows never move. A row
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

/// A run's hand-over to the host, as Python's `run` does it: a snapshot of the first rows taken
/// before the run and downloaded on another thread during it holds the starting states bit for
/// bit, and the three counts written into touched memory, or landed in page-locked memory,
/// equal the counts read one by one; a landing kept for a second run (after the accepted
/// counts were set: totals folded before) lands that run's counts, not the first's.
fn hand_over_during_a_run(batch: usize, dim: usize) -> Result<(), Failed> {
    let gpu = open()?;
    let (shape, mut x, target, step_size) = random_problem(batch, dim, 77);
    x[dim] = f32::NAN; // row 1: it never moves, and each of its steps counts as non-finite
    let (config, steps) = (StepConfig::new(step_size, 5)?, 200);
    let target_dev = gpu.upload_target(&target)?;
    let mut chains = gpu.upload_chains(&x, shape)?;
    let snapshot = chains.snapshot_rows(batch.min(1000))?;
    let mut stats = gpu.new_stats(shape, true)?;
    let (ran, starts) = std::thread::scope(|scope| {
        let starts = scope.spawn(|| snapshot.download());
        let plan = fused_mh::RunPlan::new(steps, 10);
        let ran = run_quietly(&gpu, &mut chains, &target_dev, &config, &plan, &mut stats);
        (ran, starts.join())
    });
    ran?;
    let starts = starts.map_err(|_| "the snapshot's download panicked")??;
    let bits = |v: &[f32]| v.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
    if bits(&starts) != bits(&x[..batch.min(1000) * dim]) {
        return Err("the snapshot does not hold the starting states".into());
    }
    let counts = stats.counts(CountMemory::touched(batch)?)?;
    let one_by_one = RunCounts {
        accepted: stats.accepted_counts()?,
        nonfinite: stats.nonfinite_counts()?,
        null_moves: stats.null_move_counts()?,
    };
    if counts != one_by_one {
        return Err("the counts in touched memory differ from the counts read one by one".into());
    }
    if counts.nonfinite[1] != steps || counts.accepted.iter().all(|&c| c == 0) {
        return Err("the counts are not those of the run".into());
    }
    // Poisoned before each read: a read that does not wait for the downloads sees it.
    let mut landing = gpu.count_landing(batch)?;
    landing.poison(u32::MAX)?;
    if stats.counts_landed(CountMemory::touched_totals(batch)?, &mut landing)? != counts {
        return Err("the counts landed in page-locked memory differ".into());
    }
    stats.set_accepted_counts(&counts.nonfinite)?;
    let plan = fused_mh::RunPlan::new(10, 10);
    run_quietly(&gpu, &mut chains, &target_dev, &config, &plan, &mut stats)?;
    landing.poison(u32::MAX)?;
    let landed = stats.counts_landed(CountMemory::touched_totals(batch)?, &mut landing)?;
    let sums = stats.count_sums(&mut landing)?;
    if sums != (landed.accepted.iter().sum(), landed.nonfinite.iter().sum()) {
        return Err(format!("count sums {sums:?} are not the counts' sums").into());
    }
    let one_by_one = (stats.accepted_counts()?, stats.nonfinite_counts()?);
    if (&landed.accepted, &landed.nonfinite) != (&one_by_one.0, &one_by_one.1)
        || landed.nonfinite[1] != steps + 10
        || landed.accepted[1] != steps
    {
        return Err("a kept landing does not hold the second run's counts".into());
    }
    // Memory made for another batch is refused, not written past its end.
    if stats.counts(CountMemory::touched(batch - 1)?).is_ok() {
        return Err("count memory for another batch was taken".into());
    }
    let mut other = gpu.count_landing(batch + 1)?;
    if stats
        .counts_landed(CountMemory::touched_totals(batch)?, &mut other)
        .is_ok()
    {
        return Err("a landing for another batch was taken".into());
    }
    Ok(())
}

/// `Gpu::warm_up` is its launches: the states equal `Gpu::steps` launches of 10 steps (the
/// last of 5) at the step sizes that the adaptation's rule gives from each launch's acceptance
/// rate read as totals (`ChainStats::acceptance_rate`, not the warm-up's sums), bit for bit;
/// each report says the launch's steps, rate and next step size; the step size leaves its
/// too-large start.
fn warm_up_is_its_launches(batch: usize, dim: usize) -> Result<(), Failed> {
    let gpu = open()?;
    let (shape, x, target, _) = random_problem(batch, dim, 91);
    let target_dev = gpu.upload_target(&target)?;
    let (start, seed, steps) = (4.0, 9, 45);
    let plan = WarmupPlan {
        steps,
        target_accept: 0.234,
        precondition: false,
    };
    let mut chains = gpu.upload_chains(&x, shape)?;
    let mut reports = Vec::new();
    let config = StepConfig::new(start, seed)?;
    let warmed = gpu.warm_up(&mut chains, &target_dev, &config, plan, &mut |p| {
        reports.push(*p);
        Ok(())
    })?;
    let mut by_hand = gpu.upload_chains(&x, shape)?;
    let (mut adapt, mut done, mut rate) = (StepSizeAdaptation::new(start, 0.234), 0, f64::NAN);
    for p in &reports {
        let k = (steps - done).min(10);
        let mut stats = gpu.new_stats(shape, false)?;
        let c = StepConfig::new(adapt.step_size(), seed)?;
        gpu.steps(&mut by_hand, &target_dev, &c, k as u32, &mut stats)?;
        rate = stats.acceptance_rate()?;
        adapt.update(rate);
        done += k;
        if (p.done, p.total, p.acceptance, p.step_size) != (done, steps, rate, adapt.step_size()) {
            return Err(format!("report {p:?}: by hand {done} steps, rate {rate}").into());
        }
    }
    let bits = |v: Vec<f32>| v.into_iter().map(f32::to_bits).collect::<Vec<_>>();
    if reports.len() != 5
        || chains.step_counter() != steps
        || bits(chains.x()?) != bits(by_hand.x()?)
    {
        return Err(format!("{} reports, or the states differ", reports.len()).into());
    }
    let got = (warmed.config.step_size(), warmed.last_acceptance);
    if got != (adapt.step_size(), rate) || warmed.config.scales().is_some() || got.0 >= start {
        return Err(format!(
            "warmed {warmed:?}, by hand {} and {rate}",
            adapt.step_size()
        )
        .into());
    }
    Ok(())
}

fn main() -> ExitCode {
    let mut trials = GpuTrials::new("GPU run tests");
    for (batch, dim, k) in FUSED_CASES {
        let name = format!("fused_equals_single_steps::{batch}x{dim}::k{k}");
        trials.add(name, move || fused_equals_single_steps(batch, dim, k));
    }
    for (batch, dim) in SCALED_SHAPES {
        let name = format!("scales_of_one_change_nothing::{batch}x{dim}");
        trials.add(name, move || scales_of_one_change_nothing(batch, dim));
        let name = format!("scaled_run_matches_cpu::{batch}x{dim}");
        trials.add(name, move || scaled_run_matches_cpu(batch, dim));
    }
    for (batch, dim) in [(64, 10), (4096, 64), (70000, 64), (9, 300), (8, 1030)] {
        let name = format!("nonfinite_counts_are_exact::{batch}x{dim}");
        trials.add(name, move || nonfinite_counts_are_exact(batch, dim));
    }
    for (batch, dim) in [(4096, 64), (3000, 33), (5, 1030)] {
        let name = format!("hand_over_during_a_run::{batch}x{dim}");
        trials.add(name, move || hand_over_during_a_run(batch, dim));
    }
    for (batch, dim) in [(4096, 64), (300, 1030)] {
        let name = format!("warm_up_is_its_launches::{batch}x{dim}");
        trials.add(name, move || warm_up_is_its_launches(batch, dim));
    }
    trials.run()
}
