//! `host run`: a sampling job with NumPy files in and out.
//!
//! Everything is read and checked first (files, shapes, values, the output directory); only
//! then does the run start, on the GPU ([`fused_mh::Gpu::run`], the fused kernel) or with
//! `--cpu` on the CPU reference ([`fused_mh::cpu::run_chains`]). Outputs go to a staged
//! directory renamed into place at the end ([`crate::npy::Staged`]), so a failed run leaves
//! nothing that looks complete.
//!
//! Outputs in `--out DIR`:
//! - `x.npy` `[B, dim]` f32: the final states;
//! - `accepted_count.npy` `[B]` u32, `mean.npy` and `var.npy` `[B, dim]` f64: per-chain
//!   statistics over the run (var as NumPy's `var`: divided by the number of steps);
//! - `trace.npy` `[steps / thin, B, dim]` f32 with `--thin`: the state after every thin-th step;
//! - with `--noise` and `--uniform` instead: `x_new.npy` and `accepted.npy` (bool) of exactly
//!   one step of the reference semantics with those random numbers;
//! - `summary.json`: the configuration, the acceptance rate, the time, the device.

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context, Result, bail, ensure};
use clap::{Args, ValueEnum};
use fused_mh::{Error, Gpu, RunPlan, Shape, StepConfig, Target, cpu};
use indicatif::{ProgressBar, ProgressStyle};
use rand::SeedableRng;
use rand_distr::{Distribution, StandardNormal};
use rand_xorshift::XorShiftRng;
use serde::Serialize;

use crate::npy::{self, NpyStream, Staged};

/// How to make the initial states when no `--init` file is given.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum InitDist {
    /// Drawn from the target, `mu + sigma * z` (seeded by `--seed`).
    Normal,
    /// All zeros.
    Zeros,
}

/// Options of `host run`.
#[derive(Args, Debug, Clone)]
pub struct RunArgs {
    /// Initial states, a `[B, dim]` .npy file (float32 or float64).
    #[arg(long, conflicts_with_all = ["batch", "init_dist"])]
    init: Option<PathBuf>,
    /// Number of chains when the initial states are generated.
    #[arg(long, requires = "dim")]
    batch: Option<usize>,
    /// Dimension when the initial states are generated (or mu and sigma are scalars).
    #[arg(long)]
    dim: Option<usize>,
    /// Distribution of generated initial states.
    #[arg(long, value_enum)]
    init_dist: Option<InitDist>,
    /// Target mean: a `[dim]` .npy file or a number for every coordinate.
    #[arg(long, default_value = "0")]
    mu: String,
    /// Target standard deviation: a `[dim]` .npy file or a number (> 0).
    #[arg(long, default_value = "1")]
    sigma: String,
    /// Steps of every chain.
    #[arg(long, default_value_t = 1000, conflicts_with = "noise")]
    steps: u64,
    /// Proposal scale (default: 2.38 / sqrt(dim) times the smallest sigma).
    #[arg(long)]
    step_size: Option<f32>,
    /// Seed of the random numbers (and of generated initial states).
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Steps per GPU launch (the fused kernel keeps each chain in registers for these).
    #[arg(long, default_value_t = 100, conflicts_with = "noise")]
    steps_per_launch: u32,
    /// Save the states after every thin-th step into trace.npy.
    #[arg(long, conflicts_with = "noise")]
    thin: Option<u64>,
    /// CUDA device ordinal.
    #[arg(long, default_value_t = 0)]
    device: usize,
    /// Run on the CPU reference instead of the GPU.
    #[arg(long)]
    cpu: bool,
    /// Output directory (must not exist, unless --force).
    #[arg(long)]
    out: PathBuf,
    /// Replace an existing output directory.
    #[arg(long)]
    force: bool,
    /// Caller-noise mode: `[B, dim]` standard normals for exactly one step (needs --uniform
    /// and --init).
    #[arg(long, requires_all = ["uniform", "init"])]
    noise: Option<PathBuf>,
    /// Caller-noise mode: `[B]` uniforms on [0, 1) for the acceptance test.
    #[arg(long, requires = "noise")]
    uniform: Option<PathBuf>,
}

/// What summary.json records.
#[derive(Serialize)]
struct Summary {
    mode: &'static str,
    device: String,
    batch: usize,
    dim: usize,
    steps: u64,
    step_size: f32,
    seed: u64,
    steps_per_launch: Option<u32>,
    thin: Option<u64>,
    init: String,
    mu: String,
    sigma: String,
    acceptance_rate: f64,
    seconds: f64,
    converted_from_f64: Vec<String>,
    files: Vec<&'static str>,
}

/// A checked input: the values and where they came from.
struct Inputs {
    shape: Shape,
    x: Vec<f32>,
    target: Target,
    init: String,
    converted: Vec<String>,
}

/// `--mu` / `--sigma`: a file name, or a number repeated `dim` times.
enum Param {
    File(PathBuf),
    Scalar(f32),
}

fn param(text: &str) -> Param {
    match text.trim().parse::<f32>() {
        Ok(v) => Param::Scalar(v),
        Err(_) => Param::File(PathBuf::from(text)),
    }
}

/// Reads a `.npy` file and notes a float64 conversion.
fn read(path: &Path, converted: &mut Vec<String>) -> Result<npy::Array> {
    let array = npy::read_f32(path)?;
    if array.converted_from_f64 {
        eprintln!(
            "note: {} is float64; converted to float32 (fused-mh computes in float32)",
            path.display()
        );
        converted.push(path.display().to_string());
    }
    Ok(array)
}

fn check_shape(path: &Path, array: &npy::Array, expected: &[usize], what: &str) -> Result<()> {
    ensure!(
        array.shape == expected,
        "{} has shape {:?}; {what} must have shape {:?}",
        path.display(),
        array.shape,
        expected
    );
    Ok(())
}

/// Reads and checks every input; nothing is written before this succeeds.
fn inputs(args: &RunArgs) -> Result<Inputs> {
    let mut converted = Vec::new();
    let (mu_param, sigma_param) = (param(&args.mu), param(&args.sigma));
    let mut files = Vec::new();
    for p in [&mu_param, &sigma_param] {
        if let Param::File(path) = p {
            files.push((path.clone(), read(path, &mut converted)?));
        }
    }
    let init = match &args.init {
        Some(path) => {
            let a = read(path, &mut converted)?;
            ensure!(
                a.shape.len() == 2,
                "{} has shape {:?}; the initial states must be [B, dim]",
                path.display(),
                a.shape
            );
            Some((path.clone(), a))
        }
        None => None,
    };
    // The dimension: every source that gives one must agree.
    let mut sources: Vec<(String, usize)> = Vec::new();
    if let Some((path, a)) = &init {
        sources.push((path.display().to_string(), a.shape[1]));
    }
    for (path, a) in &files {
        ensure!(
            a.shape.len() == 1,
            "{} has shape {:?}; mu and sigma must have shape [dim]",
            path.display(),
            a.shape
        );
        sources.push((path.display().to_string(), a.shape[0]));
    }
    if let Some(d) = args.dim {
        sources.push((format!("--dim {d}"), d));
    }
    let Some((_, dim)) = sources.first().cloned() else {
        bail!("give the initial states (--init FILE.npy) or their shape (--batch and --dim)");
    };
    if let Some((what, d)) = sources.iter().find(|(_, d)| *d != dim) {
        bail!("{what} gives dim {d}, but {} gives dim {dim}", sources[0].0);
    }
    let vector = |p: &Param, what: &str| -> Result<Vec<f32>> {
        match p {
            Param::Scalar(v) => Ok(vec![*v; dim]),
            Param::File(path) => {
                let (_, a) = files.iter().find(|(f, _)| f == path).expect("read above");
                check_shape(path, a, &[dim], what)?;
                Ok(a.data.clone())
            }
        }
    };
    let mu = vector(&mu_param, "mu")?;
    let sigma = vector(&sigma_param, "sigma")?;
    let target = Target::new(mu, sigma).with_context(|| {
        format!(
            "the target (--mu {}, --sigma {}) is invalid",
            args.mu, args.sigma
        )
    })?;
    let (shape, x, init_desc) = match init {
        Some((path, a)) => {
            let shape = Shape::new(a.shape[0], dim)
                .with_context(|| format!("{} cannot be a batch", path.display()))?;
            (shape, a.data, path.display().to_string())
        }
        None => {
            let batch = args
                .batch
                .context("give the number of chains (--batch) or an --init file")?;
            let shape = Shape::new(batch, dim)?;
            let dist = args.init_dist.unwrap_or(InitDist::Normal);
            let x = match dist {
                InitDist::Zeros => vec![0.0; shape.len()],
                InitDist::Normal => {
                    let mut rng = XorShiftRng::seed_from_u64(args.seed ^ 0x1217);
                    (0..shape.len())
                        .map(|i| {
                            let z: f32 = StandardNormal.sample(&mut rng);
                            target.mu()[i % dim] + z / target.inv_var()[i % dim].sqrt()
                        })
                        .collect()
                }
            };
            (
                shape,
                x,
                format!("{dist:?} (seed {})", args.seed).to_lowercase(),
            )
        }
    };
    Ok(Inputs {
        shape,
        x,
        target,
        init: init_desc,
        converted,
    })
}

/// `host run`.
pub fn run(args: RunArgs) -> Result<()> {
    if args.noise.is_none() {
        ensure!(args.steps >= 1, "--steps must be at least 1");
        ensure!(
            args.steps_per_launch >= 1,
            "--steps-per-launch must be at least 1"
        );
        if let Some(t) = args.thin {
            ensure!(t >= 1, "--thin must be at least 1");
            ensure!(
                t <= args.steps,
                "--thin {t} is larger than --steps {}: nothing would be saved",
                args.steps
            );
        }
    }
    let inputs = inputs(&args)?;
    let (shape, dim) = (inputs.shape, inputs.shape.dim());
    let step_size = match args.step_size {
        Some(s) => s,
        None => {
            let max_inv_var = inputs.target.inv_var().iter().copied().fold(0.0, f32::max);
            2.38 / (dim as f32).sqrt() / max_inv_var.sqrt()
        }
    };
    let config = StepConfig::new(step_size, args.seed).context("--step-size")?;
    let noise = match (&args.noise, &args.uniform) {
        (Some(n), Some(u)) => {
            let mut converted = Vec::new();
            let (noise, uniform) = (read(n, &mut converted)?, read(u, &mut converted)?);
            check_shape(n, &noise, &[shape.batch(), dim], "the noise")?;
            check_shape(u, &uniform, &[shape.batch()], "the uniforms")?;
            Some((noise.data, uniform.data, converted))
        }
        _ => None,
    };
    let gpu = if args.cpu {
        None
    } else {
        match Gpu::open(args.device) {
            Ok(gpu) => Some(gpu),
            Err(e @ (Error::NoDriver | Error::NoDevice { .. })) => {
                bail!("{e}; pass --cpu to run on the CPU reference")
            }
            Err(e) => return Err(e).context("opening the GPU"),
        }
    };
    let device = gpu
        .as_ref()
        .map_or_else(|| "CPU reference".to_string(), |g| g.name().to_string());
    let out = Staged::new(&args.out, args.force)?;
    let started = Instant::now();

    let mut summary = Summary {
        mode: "",
        device,
        batch: shape.batch(),
        dim,
        steps: 1,
        step_size,
        seed: args.seed,
        steps_per_launch: None,
        thin: None,
        init: inputs.init.clone(),
        mu: args.mu.clone(),
        sigma: args.sigma.clone(),
        acceptance_rate: 0.0,
        seconds: 0.0,
        converted_from_f64: inputs.converted.clone(),
        files: Vec::new(),
    };
    if let Some((noise, uniform, converted)) = noise {
        let (x_new, accepted) = one_step(&gpu, &inputs, step_size, &noise, &uniform)?;
        npy::write(&out.path("x_new.npy"), &[shape.batch(), dim], &x_new)?;
        npy::write(&out.path("accepted.npy"), &[shape.batch()], &accepted)?;
        summary.mode = "caller-noise";
        summary.files = vec!["x_new.npy", "accepted.npy", "summary.json"];
        summary.acceptance_rate =
            accepted.iter().filter(|&&a| a).count() as f64 / shape.batch() as f64;
        summary.converted_from_f64.extend(converted);
        println!(
            "one step with the given noise on {}: {} of {} chains accepted ({:.4})",
            summary.device,
            accepted.iter().filter(|&&a| a).count(),
            shape.batch(),
            summary.acceptance_rate
        );
    } else {
        summary.mode = "run";
        summary.steps = args.steps;
        summary.thin = args.thin;
        let stats = chains(&gpu, &args, &inputs, &config, &out)?;
        summary.steps_per_launch = gpu.as_ref().map(|_| args.steps_per_launch);
        summary.acceptance_rate = stats.accepted.iter().map(|&c| f64::from(c)).sum::<f64>()
            / (args.steps as f64 * shape.batch() as f64);
        summary.files = vec!["x.npy", "accepted_count.npy", "mean.npy", "var.npy"];
        if args.thin.is_some() {
            summary.files.push("trace.npy");
        }
        summary.files.push("summary.json");
        print_summary(&summary, &inputs.target, &stats);
    }
    summary.seconds = started.elapsed().as_secs_f64();
    out.write_text("summary.json", &serde_json::to_string_pretty(&summary)?)?;
    let dest = out.commit()?;
    println!("wrote {} ({:.2} s)", dest.display(), summary.seconds);
    Ok(())
}

/// Caller-noise mode: one step of the reference semantics with the given random numbers.
fn one_step(
    gpu: &Option<Gpu>,
    inputs: &Inputs,
    step_size: f32,
    noise: &[f32],
    uniform: &[f32],
) -> Result<(Vec<f32>, Vec<bool>)> {
    let shape = inputs.shape;
    Ok(match gpu {
        Some(gpu) => {
            let target = gpu.upload_target(&inputs.target)?;
            let mut chains = gpu.upload_chains(&inputs.x, shape)?;
            let noise = gpu.upload_noise(noise, uniform, shape)?;
            gpu.step_with_noise(&mut chains, &target, step_size, &noise)?;
            (chains.x()?, chains.accepted()?)
        }
        None => {
            let out = cpu::par_step_with_noise(
                &inputs.x,
                shape,
                &inputs.target,
                step_size,
                noise,
                uniform,
            )?;
            (out.x_new, out.accepted)
        }
    })
}

/// The statistics a run writes, however it ran.
struct Stats {
    accepted: Vec<u32>,
    mean: Vec<f64>,
    var: Vec<f64>,
}

/// `--steps` steps, with the trace streamed into trace.npy as it arrives.
fn chains(
    gpu: &Option<Gpu>,
    args: &RunArgs,
    inputs: &Inputs,
    config: &StepConfig,
    out: &Staged,
) -> Result<Stats> {
    let shape = inputs.shape;
    let thin = args.thin.unwrap_or(0);
    let mut trace = match args.thin {
        Some(t) => Some(NpyStream::<f32>::create(
            &out.path("trace.npy"),
            &[(args.steps / t) as usize, shape.batch(), shape.dim()],
        )?),
        None => None,
    };
    let progress = ProgressBar::new(args.steps);
    progress.set_style(
        ProgressStyle::with_template("{bar:30} {pos}/{len} steps  {per_sec}  eta {eta}")
            .expect("valid template"),
    );
    let (x, stats) = match gpu {
        Some(gpu) => {
            let target = gpu.upload_target(&inputs.target)?;
            let mut chains = gpu.upload_chains(&inputs.x, shape)?;
            let mut stats = gpu.new_stats(shape, true)?;
            let plan = RunPlan {
                thin,
                ..RunPlan::new(args.steps, args.steps_per_launch)
            };
            let mut write_error = None;
            let result = gpu.run(
                &mut chains,
                &target,
                config,
                &plan,
                &mut stats,
                &mut |done, _| progress.set_position(done),
                &mut |chunk| {
                    if let Some(t) = trace.as_mut()
                        && let Err(e) = t.extend(chunk.states)
                    {
                        write_error = Some(e);
                        return Err(Error::InvalidRun("writing trace.npy failed".into()));
                    }
                    Ok(())
                },
            );
            if let Err(e) = result {
                return Err(write_error.take().unwrap_or_else(|| e.into()));
            }
            let stats_out = Stats {
                accepted: stats.accepted_counts()?,
                mean: stats.means()?.context("the run kept no means")?,
                var: stats.variances()?.context("the run kept no variances")?,
            };
            (chains.x()?, stats_out)
        }
        None => {
            let out = cpu::run_chains(
                &inputs.x,
                shape,
                &inputs.target,
                config,
                0,
                args.steps,
                thin,
                &mut |_, state| {
                    if let Some(t) = trace.as_mut() {
                        t.extend(state)
                            .map_err(|e| Error::InvalidRun(format!("{e:#}")))?;
                    }
                    Ok(())
                },
                &mut |done| progress.set_position(done),
            )?;
            let stats = Stats {
                accepted: out.accepted,
                mean: out.mean,
                var: out.var,
            };
            (out.x, stats)
        }
    };
    progress.finish_and_clear();
    if let Some(t) = trace {
        t.finish()?;
    }
    let (b, d) = (shape.batch(), shape.dim());
    npy::write(&out.path("x.npy"), &[b, d], &x)?;
    npy::write(&out.path("accepted_count.npy"), &[b], &stats.accepted)?;
    npy::write(&out.path("mean.npy"), &[b, d], &stats.mean)?;
    npy::write(&out.path("var.npy"), &[b, d], &stats.var)?;
    Ok(stats)
}

/// The human summary: acceptance rate, and per dimension the pooled mean and variance over all
/// chains and steps against mu and sigma^2.
fn print_summary(summary: &Summary, target: &Target, stats: &Stats) {
    let (b, d) = (summary.batch, summary.dim);
    println!(
        "{} chains x {} dims, {} steps on {}: acceptance rate {:.4}",
        b, d, summary.steps, summary.device, summary.acceptance_rate
    );
    println!(
        "{:>5} {:>12} {:>12} {:>12} {:>12}",
        "dim", "mean", "mu", "variance", "sigma^2"
    );
    const SHOWN: usize = 16;
    for j in 0..d.min(SHOWN) {
        let means = (0..b).map(|c| stats.mean[c * d + j]);
        let pooled = means.clone().sum::<f64>() / b as f64;
        // Total variance over all chains and steps: within-chain plus between-chain.
        let within = (0..b).map(|c| stats.var[c * d + j]).sum::<f64>() / b as f64;
        let between = means.map(|m| (m - pooled).powi(2)).sum::<f64>() / b as f64;
        let sigma2 = 1.0 / f64::from(target.inv_var()[j]);
        println!(
            "{:>5} {:>12.5} {:>12.5} {:>12.5} {:>12.5}",
            j,
            pooled,
            target.mu()[j],
            within + between,
            sigma2
        );
    }
    if d > SHOWN {
        println!(
            "  ... and {} more dimensions (see mean.npy, var.npy)",
            d - SHOWN
        );
    }
}
