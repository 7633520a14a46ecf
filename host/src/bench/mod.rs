//! The benchmark: every configuration of the suite in both modes, timed with device events,
//! compared with the device-to-device copy bandwidth measured in the same run, checked against
//! the CPU reference, and set against the speed targets.

use std::path::PathBuf;
use std::time::Instant;

use anyhow::{Context, Result};
use clap::{Args, ValueEnum};
use fused_mh::{DeviceChains, Error, Gpu, Shape, cpu};
use indicatif::{ProgressBar, ProgressStyle};
use serde::Serialize;

mod added_cost;
mod model_kernel;
mod repeated;
mod table;
mod timing;

use added_cost::{AddedCost, diagnostics_cost, scales_cost};
use model_kernel::{ModelKernelRow, model_kernel};
use repeated::{FUSED_CASES, FusedRow, LaunchBound, fused, launch_bound};
pub(crate) use timing::{Times, copy_bandwidth, time_each};

use crate::budget::Budget;
use crate::console;
use crate::inputs::{self, Inputs};
use crate::report_file::ReportFile;

/// The default suite: a launch-bound batch, memory-bound batches with short and long rows (the
/// longest four of 2^26 elements each: one warp per row, a block of two and of four warps per
/// row, and streamed rows).
const DEFAULT_SIZES: [(usize, usize); 7] = [
    (4096, 64),
    (65536, 64),
    (1048576, 64),
    (65536, 1024),
    (32768, 2048),
    (16384, 4096),
    (8192, 8192),
];
const QUICK_SIZES: [(usize, usize); 2] = [(4096, 64), (65536, 64)];

/// Speed targets on the H200, as fractions of the measured copy bandwidth (the long rows' from
/// issue 22).
const BANDWIDTH_TARGETS: [(Mode, usize, usize, f64); 6] = [
    (Mode::Rng, 1048576, 64, 0.90),
    (Mode::Rng, 65536, 1024, 0.90),
    (Mode::Rng, 16384, 4096, 0.92),
    (Mode::Noise, 1048576, 64, 0.85),
    (Mode::Noise, 65536, 1024, 0.85),
    (Mode::Noise, 16384, 4096, 0.92),
];
/// The CPU reference runs on at most this many elements per configuration; beyond, it runs on
/// the first rows and its time is scaled to the whole batch (marked "sampled").
const CPU_SAMPLE_ELEMENTS: usize = 1 << 22;

/// Which entry point to measure.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    /// Random numbers drawn in the kernel (Philox).
    Rng,
    /// The caller's noise and uniforms, read from memory.
    Noise,
}

/// Modes to run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Modes {
    Rng,
    Noise,
    Both,
}

/// Benchmark options.
#[derive(Args, Debug, Clone)]
pub struct BenchArgs {
    /// Configurations as BATCHxDIM, comma-separated (default: the full suite).
    #[arg(long, value_delimiter = ',', value_parser = parse_size)]
    sizes: Vec<(usize, usize)>,
    /// Which modes to run.
    #[arg(long, value_enum, default_value_t = Modes::Both)]
    mode: Modes,
    /// Timed repetitions per configuration (median reported; at least 50 for the record).
    #[arg(long, default_value_t = 100)]
    reps: usize,
    /// Untimed launches before timing each configuration (not `run`'s `--warmup`, which adapts
    /// the step size).
    #[arg(long, default_value_t = 10)]
    untimed_launches: usize,
    /// Steps launched back to back for the launch-bound measurement.
    #[arg(long, default_value_t = 1000)]
    back_to_back: usize,
    /// CUDA device ordinal.
    #[arg(long, default_value_t = 0)]
    device: usize,
    /// Seed of the inputs and of the in-kernel random numbers.
    #[arg(long, default_value_t = 42)]
    seed: u64,
    /// A quick run: two small configurations, 20 repetitions, 200 back-to-back steps.
    #[arg(long)]
    quick: bool,
    /// Also write every figure as JSON to this file (a new file, or an earlier report).
    #[arg(long)]
    json: Option<PathBuf>,
}

/// `BATCHxDIM`, a valid [`Shape`] (clap names `--sizes` in the error).
fn parse_size(s: &str) -> Result<(usize, usize), String> {
    let (b, d) = s
        .split_once(['x', 'X'])
        .ok_or_else(|| format!("{s:?} is not BATCHxDIM"))?;
    let parse = |v: &str| v.trim().parse::<usize>().map_err(|e| format!("{s:?}: {e}"));
    let (batch, dim) = (parse(b)?, parse(d)?);
    Shape::new(batch, dim).map_err(|e| e.to_string())?;
    Ok((batch, dim))
}

/// Host memory one configuration holds: inputs, caller noise, the GPU's output copied back,
/// and the CPU reference on at most [`CPU_SAMPLE_ELEMENTS`] (input slices, output, decisions).
fn host_budget(batch: usize, dim: usize, noise: bool) -> Budget {
    let len = (batch * dim) as u128;
    let sample = CPU_SAMPLE_ELEMENTS.min(batch * dim) as u128;
    let rows = batch as u128;
    let mut b = Budget::default();
    b.add("states", 4 * len)
        .add("GPU output copy", 4 * len + rows);
    if noise {
        b.add("caller noise", 4 * len + 4 * rows);
    }
    b.add("CPU reference", 8 * sample + 16 * rows.min(sample));
    b
}

/// GPU memory one configuration holds (the copy-bandwidth buffers are freed before).
fn device_budget(batch: usize, dim: usize, noise: bool) -> Budget {
    let (len, rows) = ((batch * dim) as u128, batch as u128);
    let mut b = Budget::default();
    b.add("chains", 8 * len + rows)
        .add("target", 8 * dim as u128);
    if noise {
        b.add("caller noise", 4 * len + 4 * rows);
    }
    b
}

/// A file this benchmark wrote as its `--json` report (the only kind it replaces).
fn is_report(text: &str) -> bool {
    serde_json::from_str::<serde_json::Value>(text)
        .is_ok_and(|v| v["git_rev"].is_string() && v["rows"].is_array())
}

/// One configuration's figures.
#[derive(Debug, Serialize)]
struct Row {
    mode: Mode,
    batch: usize,
    dim: usize,
    gpu: Option<Times>,
    bytes: usize,
    gbps: Option<f64>,
    copy_fraction: Option<f64>,
    updates_per_s: Option<f64>,
    cpu_ms: f64,
    /// The CPU reference's element updates per second (from `cpu_ms`, scaled as it is).
    cpu_updates_per_s: f64,
    cpu_sampled_rows: Option<usize>,
    speedup: Option<f64>,
    check: String,
    target_fraction: Option<f64>,
    target_met: Option<bool>,
}

#[derive(Debug, Serialize)]
struct Report {
    gpu: Option<String>,
    driver: Option<String>,
    ptx_target: Option<&'static str>,
    git_rev: &'static str,
    cpu_threads: usize,
    reps: usize,
    copy_gbps: Option<f64>,
    rows: Vec<Row>,
    launch_bound: Option<LaunchBound>,
    fused: Vec<FusedRow>,
    diagnostics_cost: Option<AddedCost>,
    scales_cost: Option<AddedCost>,
    model_kernel: Option<ModelKernelRow>,
}

/// Bytes a step must move at the least: x read, x_new written, a flag written per row, plus
/// the caller's noise and uniforms read in caller-noise mode (mu and 1/sigma^2 are negligible).
pub(crate) fn bytes_moved(mode: Mode, shape: Shape) -> usize {
    let f = size_of::<f32>();
    let base = 2 * shape.len() * f + shape.batch();
    match mode {
        Mode::Rng => base,
        Mode::Noise => base + shape.len() * f + shape.batch() * f,
    }
}

pub fn run(args: BenchArgs) -> Result<()> {
    let mut args = args;
    if args.quick {
        args.reps = args.reps.min(20);
        args.back_to_back = args.back_to_back.min(200);
        if args.sizes.is_empty() {
            args.sizes = QUICK_SIZES.to_vec();
        }
    }
    if args.sizes.is_empty() {
        args.sizes = DEFAULT_SIZES.to_vec();
    }
    anyhow::ensure!(args.reps >= 1, "--reps must be at least 1");
    let modes: &[Mode] = match args.mode {
        Modes::Rng => &[Mode::Rng],
        Modes::Noise => &[Mode::Noise],
        Modes::Both => &[Mode::Rng, Mode::Noise],
    };

    let with_noise = modes.contains(&Mode::Noise);
    for &(batch, dim) in &args.sizes {
        host_budget(batch, dim, with_noise)
            .check_host()
            .with_context(|| format!("--sizes {batch}x{dim}"))?;
    }
    crate::signals::install()?;
    let json = args
        .json
        .as_deref()
        .map(|p| ReportFile::prepare(p, "--json", is_report))
        .transpose()?;
    let gpu = match Gpu::open(args.device) {
        Ok(gpu) => Some(gpu),
        Err(e @ (Error::NoDriver | Error::NoDevice { .. })) => {
            console::print(&format!("no GPU ({e}): the CPU reference alone\n"))?;
            None
        }
        Err(e) => return Err(e).context("opening the GPU"),
    };
    if let Some(gpu) = &gpu {
        let (free, _) = gpu.free_memory()?;
        let memory = format!("memory on the GPU ({})", gpu.name());
        for &(batch, dim) in &args.sizes {
            device_budget(batch, dim, with_noise)
                .check(&memory, free as u64)
                .with_context(|| format!("--sizes {batch}x{dim}"))?;
        }
    }
    let mut report = Report {
        gpu: gpu.as_ref().map(|g| g.name().to_string()),
        driver: gpu
            .as_ref()
            .and_then(|g| g.driver_version().ok())
            .map(|(a, b)| format!("CUDA {a}.{b}")),
        ptx_target: gpu.as_ref().map(|g| g.ptx_target()),
        git_rev: env!("FUSED_MH_GIT_REV"),
        cpu_threads: fused_mh::testing::threads::count(),
        reps: args.reps,
        copy_gbps: None,
        rows: Vec::new(),
        launch_bound: None,
        fused: Vec::new(),
        diagnostics_cost: None,
        scales_cost: None,
        model_kernel: None,
    };
    if let Some(gpu) = &gpu {
        console::print(&format!(
            "{} ({}), PTX {}, git {}\n",
            gpu.name(),
            report.driver.as_deref().unwrap_or("driver ?"),
            gpu.ptx_target(),
            report.git_rev
        ))?;
    }

    let fused_cases: &[_] = if args.quick {
        &FUSED_CASES[..1]
    } else {
        &FUSED_CASES
    };
    let progress =
        ProgressBar::new((args.sizes.len() * modes.len() + 2 + fused_cases.len()) as u64);
    progress.set_style(
        ProgressStyle::with_template("{bar:30} {pos}/{len} {msg}").expect("valid template"),
    );

    if let Some(gpu) = &gpu {
        progress.set_message("copy bandwidth");
        report.copy_gbps = Some(copy_bandwidth(gpu, args.reps.min(50))?);
    }
    progress.inc(1);

    for &(batch, dim) in &args.sizes {
        progress.set_message(format!("inputs {batch}x{dim}"));
        let inputs = inputs::generate(batch, dim, args.seed, with_noise)?;
        for &mode in modes {
            progress.set_message(format!("{mode:?} {batch}x{dim}"));
            let row = measure(gpu.as_ref(), &inputs, mode, &args, report.copy_gbps)
                .with_context(|| format!("{mode:?} mode, batch {batch} x dim {dim}"))?;
            report.rows.push(row);
            progress.inc(1);
        }
    }

    if let Some(gpu) = &gpu {
        progress.set_message("back to back");
        report.launch_bound = Some(launch_bound(gpu, &args)?);
        for &(batch, dim, k, target) in fused_cases {
            progress.inc(1);
            progress.set_message(format!("fused {batch}x{dim}, K = {k}"));
            let row = fused(gpu, batch, dim, k, target, &args)
                .with_context(|| format!("fused steps, batch {batch} x dim {dim}, K = {k}"))?;
            report.fused.push(row);
        }
        if !args.quick {
            progress.set_message("diagnostics per launch");
            report.diagnostics_cost = Some(diagnostics_cost(gpu, &args)?);
            progress.set_message("per-dimension proposal scales");
            report.scales_cost = Some(scales_cost(gpu, &args)?);
            progress.set_message("model kernel (logistic regression)");
            report.model_kernel = Some(model_kernel(gpu, args.reps.min(10))?);
        }
    }
    progress.finish_and_clear();

    if let Some(json) = json {
        let path = json.path().display().to_string();
        json.write(&serde_json::to_string_pretty(&report)?)?;
        console::note(format_args!("wrote {path}"));
    }
    console::print(&table::table(&report)?)
}

/// The CPU reference on the first rows (all of them when small enough): its output and its
/// time scaled to the whole batch.
pub(crate) fn cpu_reference(
    inputs: &Inputs,
    mode: Mode,
    step: u64,
) -> Result<(cpu::StepOutput, f64, Option<usize>)> {
    let Inputs {
        shape,
        x,
        target,
        config,
        noise,
        uniform,
    } = inputs;
    let rows = (CPU_SAMPLE_ELEMENTS / shape.dim()).clamp(1, shape.batch());
    let sample = Shape::new(rows, shape.dim())?;
    let n = sample.len();
    let run = || match mode {
        Mode::Rng => cpu::par_step(&x[..n], sample, target, config, step),
        Mode::Noise => cpu::par_step_with_noise(
            &x[..n],
            sample,
            target,
            config.step_size(),
            &noise[..n],
            &uniform[..rows],
        ),
    };
    run()?; // warm-up: thread pool, page faults
    let mut ms = Vec::new();
    let mut out = None;
    for _ in 0..3 {
        let t = Instant::now();
        out = Some(run()?);
        ms.push(t.elapsed().as_secs_f64() * 1e3);
    }
    ms.sort_by(f64::total_cmp);
    let scaled = ms[1] * shape.batch() as f64 / rows as f64;
    let sampled = (rows < shape.batch()).then_some(rows);
    Ok((out.expect("ran three times"), scaled, sampled))
}

/// Uploads a configuration, checks one step against the CPU reference, then times steps.
fn measure(
    gpu: Option<&Gpu>,
    inputs: &Inputs,
    mode: Mode,
    args: &BenchArgs,
    copy_gbps: Option<f64>,
) -> Result<Row> {
    let shape = inputs.shape;
    let step = 0;
    let (reference, cpu_ms, cpu_sampled_rows) = cpu_reference(inputs, mode, step)?;
    let target = BANDWIDTH_TARGETS
        .iter()
        .find(|t| t.0 == mode && t.1 == shape.batch() && t.2 == shape.dim())
        .map(|t| t.3);
    let mut row = Row {
        mode,
        batch: shape.batch(),
        dim: shape.dim(),
        gpu: None,
        bytes: bytes_moved(mode, shape),
        gbps: None,
        copy_fraction: None,
        updates_per_s: None,
        cpu_ms,
        cpu_updates_per_s: shape.len() as f64 / (cpu_ms * 1e-3),
        cpu_sampled_rows,
        speedup: None,
        check: "cpu only".into(),
        // The targets are the GPU's: a row the CPU alone ran has none.
        target_fraction: target.filter(|_| gpu.is_some()),
        target_met: None,
    };
    let Some(gpu) = gpu else { return Ok(row) };

    let target_dev = gpu.upload_target(&inputs.target)?;
    let mut chains = gpu.upload_chains(&inputs.x, shape)?;
    let noise_dev = match mode {
        Mode::Rng => None,
        Mode::Noise => Some(gpu.upload_noise(&inputs.noise, &inputs.uniform, shape)?),
    };
    let step_size = inputs.config.step_size();
    let one_step = |chains: &mut DeviceChains| -> Result<()> {
        match &noise_dev {
            None => gpu.step(chains, &target_dev, &inputs.config)?,
            Some(noise) => gpu.step_with_noise(chains, &target_dev, step_size, noise)?,
        }
        Ok(())
    };

    // Correctness first: poisoned outputs, one step from the inputs, the first rows compared.
    chains.set_step_counter(step);
    chains.poison_outputs(f32::NAN, 0xAA)?;
    one_step(&mut chains)?;
    let rows = reference.accepted.len();
    let (x_gpu, flags) = (chains.x()?, chains.accepted_flags()?);
    row.check = match reference.compare(&x_gpu[..rows * shape.dim()], &flags[..rows], step_size) {
        Ok(a) => format!("ok ({} flips)", a.boundary_flips),
        Err(e) => format!("FAILED: {e}"),
    };

    let times = time_each(gpu, args.untimed_launches, args.reps, || {
        one_step(&mut chains)
    })?;
    let seconds = times.median_us * 1e-6;
    let gbps = row.bytes as f64 / seconds / 1e9;
    row.gpu = Some(times);
    row.gbps = Some(gbps);
    row.copy_fraction = copy_gbps.map(|c| gbps / c);
    row.updates_per_s = Some(shape.len() as f64 / seconds);
    row.speedup = Some(cpu_ms / (times.median_us * 1e-3));
    row.target_met = target.zip(row.copy_fraction).map(|(t, f)| f >= t);
    Ok(row)
}
