//! The lessons (`kernel/src/gpu/lessons/`) on a real GPU: every single-step lesson against the
//! CPU reference on the rows it holds, lesson 11's fused steps (the CPU's logarithm in its
//! normals) against the CPU reference, and lesson 15's (the SFU's logarithm, as the production
//! kernels draw them) against the production fused kernel, bit for bit.
//!
//! A `harness = false` test driven by libtest-mimic, as `tests/gpu.rs`: without a GPU every
//! test is reported as ignored, never as passed.

use std::process::ExitCode;

use fused_mh::testing::dispatch;
use fused_mh::{Shape, StepConfig, cpu};
use libtest_mimic::Failed;

mod support;

use support::problems::{POISON_FLAG, POISON_X, compare, open, random_problem};
use support::trials::GpuTrials;

/// Shapes for the lessons: short and long rows, rows in whole quads and not, small and large
/// batches. Each lesson runs on those it holds (from lesson 4 on: up to 1024 elements; from
/// lesson 5 on: in whole quads; the long rows' lesson: 1025 to 8192 in whole quads). 600000
/// rows of 8 give lessons 8 and 9 full tiles of 32 rows, a partial last tile and more tiles
/// than warps (the grid-stride loop); 5000 rows of 1028, more blocks than the grid has.
const LESSON_SHAPES: [(usize, usize); 10] = [
    (1000, 64),
    (600000, 8),
    (300, 1024),
    (37, 12),
    (5, 260),
    (2000, 33),
    (3, 4097),
    (5000, 1028),
    (700, 4096),
    (9, 8192),
];

/// (batch, dim, K) for the fused lessons: both register widths (q2 up to 256, q8 up to 1024),
/// a row not a multiple of 8, a batch of many rows.
const FUSED_CASES: [(usize, usize, u32); 4] =
    [(4096, 64, 20), (1000, 1024, 5), (5, 260, 9), (70000, 12, 3)];

/// One step of a lesson against the CPU reference, as `tests/gpu.rs` checks the production
/// step. A lesson sums a row's terms in its own order, which moves `log alpha` by float32
/// rounding only, far inside the decision margin.
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

/// Lesson 11, one step in one launch, against one step of the CPU reference: its normals take
/// the CPU's polynomial logarithm, so they differ from the CPU's only by the SFU's `sqrt`,
/// `sin` and `cos`, inside the tolerances of `compare`. (Over K steps its chains leave the
/// production kernels' wherever a decision at the margin goes the other way; the K-step loop
/// itself is lesson 15's, checked bit for bit below.)
fn fused_lesson_matches_cpu(batch: usize, dim: usize) -> Result<(), Failed> {
    let gpu = open()?;
    let lesson = dispatch::FUSED_LESSON;
    let (shape, x, target, step_size) = random_problem(batch, dim, (batch * 3 + dim) as u64);
    let config = StepConfig::new(step_size, 77)?;
    let target_dev = gpu.upload_target(&target)?;
    let mut chains = gpu.upload_chains(&x, shape)?;
    let step = (1 << 32) - 1;
    chains.set_step_counter(step);
    let mut stats = gpu.new_stats(shape, false)?;
    gpu.steps_lesson(lesson, &mut chains, &target_dev, &config, 1, &mut stats)?;
    // One step: a row's accepted count is its acceptance flag.
    let flags: Vec<u8> = stats.accepted_counts()?.iter().map(|&c| c as u8).collect();
    let cpu_out = cpu::par_step(&x, shape, &target, &config, step)?;
    compare(&chains.x()?, &flags, &cpu_out, shape, step_size)
        .map_err(|e| format!("lesson 11 ({batch}, {dim}): {e}").into())
}

/// Lesson 15's K steps in one launch (`Gpu::steps_lesson`) against the fused kernel's
/// (`Gpu::steps`): the same states bit for bit and the same acceptance counts (the same
/// normals, sums in the same order; the production kernel's threshold test decides as the
/// lesson's `accept` on every sum a step can give). The step counter crosses 2^32 on the way.
fn fast_log_lesson_equals_the_fused_kernel(batch: usize, dim: usize, k: u32) -> Result<(), Failed> {
    let gpu = open()?;
    let (shape, x, target, step_size) = random_problem(batch, dim, (batch + dim) as u64);
    let config = StepConfig::new(step_size, 31)?;
    let target_dev = gpu.upload_target(&target)?;
    let mut runs = Vec::new();
    for lesson in [true, false] {
        let mut chains = gpu.upload_chains(&x, shape)?;
        chains.set_step_counter((1 << 32) - 3);
        let mut stats = gpu.new_stats(shape, false)?;
        match lesson {
            true => gpu.steps_lesson(
                dispatch::FAST_LOG_LESSON,
                &mut chains,
                &target_dev,
                &config,
                k,
                &mut stats,
            )?,
            false => gpu.steps(&mut chains, &target_dev, &config, k, &mut stats)?,
        }
        let bits: Vec<u32> = chains.x()?.iter().map(|v| v.to_bits()).collect();
        runs.push((bits, stats.accepted_counts()?, chains.step_counter()));
    }
    if runs[0] != runs[1] {
        return Err(
            format!("({batch}, {dim}, K = {k}): lesson 15 differs from the fused kernel").into(),
        );
    }
    if runs[0].1.iter().all(|&c| c == 0) {
        return Err("no step was accepted: the comparison shows nothing".into());
    }
    Ok(())
}

fn main() -> ExitCode {
    let mut trials = GpuTrials::new("GPU lesson tests");
    // The dispatcher says which rows a lesson holds (its grid does not matter here).
    let device = dispatch::Device {
        sms: 132,
        staged: true,
        l2_bytes: 50 << 20,
    };
    for &lesson in dispatch::LESSONS.iter().chain([&dispatch::LONG_ROW_LESSON]) {
        for (batch, dim) in LESSON_SHAPES.into_iter().filter(|&(b, d)| {
            dispatch::lesson(lesson, Shape::new(b, d).expect("a shape"), device).is_some()
        }) {
            let name = format!("lesson_matches_cpu::{}::{batch}x{dim}", lesson.number);
            trials.add(name, move || lesson_matches_cpu(lesson, batch, dim));
        }
    }
    for (batch, dim, k) in FUSED_CASES {
        let name = format!("fused_lesson_matches_cpu::11::{batch}x{dim}");
        trials.add(name, move || fused_lesson_matches_cpu(batch, dim));
        let name = format!("fast_log_lesson_equals_the_fused_kernel::15::{batch}x{dim}::k{k}");
        trials.add(name, move || {
            fast_log_lesson_equals_the_fused_kernel(batch, dim, k)
        });
    }
    trials.run()
}
