//! `host run`: a sampling job with NumPy files in and out.
//!
//! The order of a job is the order of its checks, cheapest first, so that a run that cannot
//! finish fails before it starts:
//! 1. the options; the headers of the input files ([`inputs::Plan::new`]), which fix the shape;
//! 2. the memory the job needs against the free host memory, then the GPU's ([`crate::budget`]);
//! 3. the output directory and the disk space its files need ([`crate::outdir`]);
//! 4. the data and its values ([`inputs::Plan::read`]);
//! 5. the run, on the GPU ([`fused_mh::Gpu::run`], the fused kernel) or with `--cpu` on the CPU
//!    reference ([`fused_mh::cpu::run_chains`]) ([`execute`]);
//! 6. the outputs, into the staging directory, moved into place whole; then the report.
//!
//! Outputs in `--out DIR`:
//! - `x.npy` `[B, dim]` f32: the final states;
//! - `accepted_count.npy` `[B]` u64, `mean.npy` and `var.npy` `[B, dim]` f64: per-chain
//!   statistics over the run (var as NumPy's `var`: divided by the number of steps);
//! - `nonfinite_count.npy` `[B]` u64: per chain, the steps whose `log alpha` was not finite (a
//!   NaN or an infinity in the state or the proposal; never accepted), with their total and
//!   the number of chains hit in the summary and, when not zero, a warning in the report;
//! - `null_move_count.npy` `[B]` u64: per chain, the null moves: steps whose proposal
//!   rounded back to the state in float32 (accepted, no move), with their total and share in
//!   the summary and a warning when a chain has more than 1 % of them;
//! - `mu.npy`, `sigma.npy` `[dim]` f32: the target, so that `--resume DIR` needs nothing else;
//! - `trace.npy` `[steps / thin, B, dim]` f32 with `--thin`: the state after every thin-th step;
//! - with `--noise` and `--uniform` instead: `x_new.npy` and `accepted.npy` (bool) of exactly
//!   one step of the reference semantics with those random numbers;
//! - `summary.json`: the configuration, the step counters, the acceptance, the time, the
//!   device, the split diagnostics and the verdict, the list of files ([`summary::Summary`]).
//!
//! Exit status: as the program's (0, 1, 2, 128 + N), and 3 when `--until-rhat` was given and
//! the run did not converge (it reached `--steps`, or R-hat could not see from where the
//! chains started): the outputs are complete, and a script can tell.

mod chart;
mod execute;
mod inputs;
mod json_float;
mod report;
mod summary;

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use anyhow::{Context, Result, bail, ensure};
use clap::{Args, ValueEnum};
use fused_mh::diagnostics::{RHAT_THRESHOLD, SplitSchedule};
use fused_mh::{DiagnosticsPlan, Error, Gpu, RunPlan, Shape, StepConfig};
use serde::Serialize;

use self::inputs::{Init, Plan};
use self::summary::{Resume, Summary};
use crate::budget::Budget;
use crate::console;
use crate::npy;
use crate::outdir::{OutputDir, SUMMARY};

/// How to make the initial states when no `--init` file is given.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum InitDist {
    /// Drawn from the target, `mu + sigma * z` (seeded by `--seed`).
    Normal,
    /// All zeros.
    Zeros,
    /// Drawn from the target with 4 times its standard deviation, `mu + 4 sigma z`: starting
    /// points apart, for superchains (`--superchain-size`).
    Overdispersed,
}

/// Options of `host run`.
#[derive(Args, Debug, Clone)]
pub struct RunArgs {
    /// Initial states, a `[B, dim]` .npy file (float32 or float64, finite).
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
    /// Target standard deviation: a `[dim]` .npy file or a number, in [6.9e-18, 1.4e17]
    /// (2^-57 to 2^57, where the float32 arithmetic holds).
    #[arg(long, default_value = "1")]
    sigma: String,
    /// Steps of every chain (with --resume: steps more), after the --burn-in.
    #[arg(long, default_value_t = 1000, conflicts_with = "noise")]
    steps: u64,
    /// Warm-up steps before everything else: the step size adapts toward --target-accept after
    /// every 10 steps (a Robbins-Monro rule in log step size, `fused_mh::adapt`), then stays.
    /// They count for nothing, as the burn-in (off by default: the step size is then exactly
    /// the given or default one).
    #[arg(long, default_value_t = 0, conflicts_with_all = ["noise", "resume"])]
    warmup: u64,
    /// The acceptance rate the warm-up aims at (0.234: optimal for random-walk Metropolis in
    /// many dimensions).
    #[arg(long, default_value_t = 0.234)]
    target_accept: f64,
    /// During the first half of the --warmup, also adapt a proposal scale per dimension to the
    /// chains' pooled standard deviation (diagonal preconditioning, `fused_mh::adapt`); frozen
    /// with the step size after the warm-up and kept by --resume.
    #[arg(long, requires = "warmup")]
    precondition: bool,
    /// Steps run first that count for nothing: no statistics, no trace, no diagnostics (the
    /// chains' way in from their starting points).
    #[arg(long, default_value_t = 0, conflicts_with = "noise")]
    burn_in: u64,
    /// Proposal scale (default: 2.38 / sqrt(dim) times the smallest sigma).
    #[arg(long)]
    step_size: Option<f32>,
    /// Seed of the random numbers (and of generated initial states).
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Continue the run in DIR: its final states, target, seed and step size, and its random
    /// stream from where it stopped (its summary's next_step).
    #[arg(long, value_name = "DIR", conflicts_with_all = [
        "init", "batch", "dim", "init_dist", "mu", "sigma", "step_size", "seed", "noise",
    ])]
    resume: Option<PathBuf>,
    /// Stop as soon as every dimension's split nested R-hat (split R-hat with
    /// --superchain-size 1) is below this, once each chain has --min-draws draws; --steps is
    /// the cap. Checked at doubling checkpoints: --min-draws (rounded up to even), twice that,
    /// four times, ... A run that reaches --steps unconverged exits with status 3.
    #[arg(long, conflicts_with_all = ["noise", "thin"])]
    until_rhat: Option<f64>,
    /// Also write rhat.svg into --out: the worst split R-hat and the acceptance rate at each
    /// checkpoint against the steps.
    #[arg(long, conflicts_with = "noise")]
    rhat_chart: bool,
    /// Draws per chain before --until-rhat may stop the run.
    #[arg(long, default_value_t = 100, requires = "until_rhat")]
    min_draws: u64,
    /// Chains per superchain for the convergence diagnostics (nested R-hat; 1: R-hat):
    /// consecutive chains, which start from one point when the initial states are generated.
    #[arg(long, default_value_t = 1, conflicts_with = "noise")]
    superchain_size: usize,
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
    /// Output directory: a new directory in an existing parent directory.
    #[arg(long)]
    out: PathBuf,
    /// Replace the output directory if an earlier `host run` wrote it (only then).
    #[arg(long)]
    force: bool,
    /// Caller-noise mode: `[B, dim]` standard normals for exactly one step (needs --uniform
    /// and --init: the one step starts from given states).
    #[arg(long, requires_all = ["uniform", "init"], conflicts_with_all = ["batch", "init_dist"])]
    noise: Option<PathBuf>,
    /// Caller-noise mode: `[B]` uniforms in [0, 1) for the acceptance test.
    #[arg(long, requires = "noise")]
    uniform: Option<PathBuf>,
}

/// `host run`.
pub fn run(args: RunArgs) -> Result<ExitCode> {
    crate::signals::install()?;
    let caller_noise = args.noise.is_some();
    if !caller_noise {
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
    let resume = args.resume.as_deref().map(Resume::open).transpose()?;
    let seed = resume.as_ref().map_or(args.seed, |r| r.summary.seed);
    let first_step = resume.as_ref().map_or(0, |r| r.summary.next_step);
    // Caller noise draws nothing from the stream: its one step leaves the counter where it is.
    let steps = if caller_noise { 1 } else { args.steps };
    ensure!(
        args.target_accept > 0.0 && args.target_accept < 1.0,
        "--target-accept {}: give an acceptance rate between 0 and 1",
        args.target_accept
    );
    let drawn = if caller_noise {
        Some(0)
    } else {
        steps
            .checked_add(args.burn_in)
            .and_then(|s| s.checked_add(args.warmup))
    };
    let Some(drawn) = drawn.filter(|d| first_step.checked_add(*d).is_some()) else {
        bail!(
            "--steps {steps} --burn-in {}: the step counter would pass 2^64 - 1 (it is at \
             {first_step})",
            args.burn_in
        );
    };
    let plan = Plan::new(&args, resume.as_ref())?;
    let shape = plan.shape;
    let m = args.superchain_size;
    ensure!(m >= 1, "--superchain-size must be at least 1");
    ensure!(
        !args.precondition || shape.batch() >= 2,
        "--precondition: the pooled variance needs at least 2 chains"
    );
    // The split statistics' schedule: doubling checkpoints from --min-draws for an early
    // stop, else the one that ends at --steps; boundaries at the ends of launches (the CPU
    // reference keeps the same schedule, so that both give the same diagnostics).
    let launch = u64::from(args.steps_per_launch);
    let schedule = match args.until_rhat {
        Some(_) => Some(SplitSchedule::from_min_draws(args.min_draws, launch)),
        None => SplitSchedule::ending_at(steps, launch),
    };
    let first_checkpoint = schedule.map_or(u64::MAX, |s| 2 * s.half());
    let diagnosable = shape.batch().is_multiple_of(m)
        && shape.batch() / m >= 2
        && first_checkpoint <= steps
        && !caller_noise;
    if m > 1 && !diagnosable {
        bail!(
            "--superchain-size {m}: the batch of {} chains must be a multiple of {m} with at \
             least two superchains, and the run at least 4 steps",
            shape.batch()
        );
    }
    let run_plan = RunPlan {
        thin: args.thin.unwrap_or(0),
        ..RunPlan::new(args.steps, args.steps_per_launch)
    };
    if let Some(t) = args.until_rhat {
        ensure!(
            t.is_finite() && t > 1.0,
            "--until-rhat {t}: give a threshold above 1 (e.g. 1.01)"
        );
        ensure!(
            first_checkpoint <= steps,
            "--until-rhat: the first checkpoint is at {first_checkpoint} draws (--min-draws {} \
             rounded up to an even number, at least 4), beyond --steps {steps}",
            args.min_draws
        );
        ensure!(
            diagnosable,
            "--until-rhat: the diagnostics need at least two chains (superchains)"
        );
    }
    ensure!(
        !args.rhat_chart || diagnosable,
        "--rhat-chart: the diagnostics need at least two chains (superchains) and 4 steps"
    );
    // The split statistics and the diagnostics at their checkpoints, whenever they can be
    // computed (a few passes over the moments at each of log2(steps) checkpoints).
    let run_plan = RunPlan {
        diagnostics: schedule
            .filter(|_| diagnosable)
            .map(|schedule| DiagnosticsPlan {
                superchain_size: m,
                until_rhat: args.until_rhat,
                min_draws: args.min_draws,
                schedule,
            }),
        ..run_plan
    };
    let sizes = || format!("{} chains x {} dims", shape.batch(), shape.dim());
    host_budget(shape, caller_noise, args.cpu, &run_plan)
        .check_host()
        .with_context(sizes)?;

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
    if let Some(gpu) = &gpu {
        let (free, _) = gpu.free_memory()?;
        device_budget(shape, caller_noise, &run_plan)
            .check(&format!("memory on the GPU ({})", gpu.name()), free as u64)
            .with_context(sizes)?;
    }

    let out = OutputDir::prepare(&args.out, args.force, &plan.files())?;
    disk_budget(shape, caller_noise, &run_plan)
        .check_disk(out.parent())
        .with_context(|| format!("--out {} for {}", args.out.display(), sizes()))?;
    if let (Init::File(path, _), None, false) = (&plan.init, &resume, caller_noise) {
        inputs::warn_if_replaying(path, seed);
    }
    let mut inputs = plan.read(seed, m)?;
    let mut step_size = match (&resume, args.step_size) {
        (Some(r), _) => r.summary.step_size,
        (None, Some(s)) => s,
        (None, None) => {
            let max_inv_var = inputs.target.inv_var().iter().copied().fold(0.0, f32::max);
            2.38 / (shape.dim() as f32).sqrt() / max_inv_var.sqrt()
        }
    };
    let mut scales = resume.as_ref().and_then(|r| r.summary.scales.clone());
    let mut config = StepConfig::new(step_size, seed).context("--step-size")?;
    if let Some(s) = &scales {
        config = config
            .with_scales(s)
            .context("the scales of the run to --resume")?;
    }
    if !caller_noise
        && let Some(u) = fused_mh::reach::unreachable_dimensions(&inputs.target, &config).first()
    {
        let states = inputs.target.mu()[u.dim].abs() + 4.0 * inputs.target.sigma()[u.dim];
        bail!(
            "--mu, --sigma, --step-size: in dimension {}, the proposal scale {:e} is under {} \
             ulps of |mu| + 4 sigma = {states:e} (one ulp there is {:e}): float32 cannot move \
             the states, every proposal rounds back to the state or next to it. Subtract the \
             mean or rescale the problem (or give a larger --step-size)",
            u.dim,
            u.proposal_scale,
            fused_mh::reach::REACH_ULPS,
            u.ulp
        );
    }
    let device = gpu
        .as_ref()
        .map_or_else(|| "CPU reference".to_string(), |g| g.name().to_string());
    let started = Instant::now();
    let initial_step_size = step_size;
    let mut warmup_acceptance = None;
    let mut warmup_nonfinite = 0;
    if args.warmup > 0 && !caller_noise {
        let warmed = execute::warm_up(
            gpu.as_ref(),
            &inputs,
            shape,
            (seed, first_step),
            (args.warmup, args.target_accept, args.precondition),
            step_size,
        )?;
        step_size = warmed.step_size;
        config = StepConfig::new(step_size, seed).context("the adapted step size")?;
        if let Some(s) = &warmed.scales {
            config = config.with_scales(s).context("the adapted scales")?;
        }
        scales = warmed.scales;
        inputs.x = warmed.x;
        warmup_acceptance = Some(warmed.last_acceptance);
        warmup_nonfinite = warmed.nonfinite;
    }

    let mut summary = Summary {
        written_by: summary::WRITTEN_BY.into(),
        version: env!("CARGO_PKG_VERSION").into(),
        mode: String::new(),
        device,
        batch: shape.batch(),
        dim: shape.dim(),
        steps,
        step_size,
        seed,
        first_step,
        next_step: first_step + drawn,
        burn_in: 0,
        warmup: None,
        stopped_early: false,
        steps_per_launch: None,
        thin: None,
        init: inputs.init.clone(),
        mu: plan.mu_text.clone(),
        sigma: plan.sigma_text.clone(),
        resumed_from: resume.as_ref().map(|r| r.dir.display().to_string()),
        accepted_total: 0,
        converged: None,
        nonfinite: None,
        null_moves: None,
        scales: scales.clone(),
        acceptance_rate: 0.0,
        seconds: 0.0,
        converted_from_f64: inputs.converted.clone(),
        diagnostics: None,
        files: Vec::new(),
    };
    let (b, d) = (shape.batch(), shape.dim());
    // The final proposal (after a warm-up adapted it) against float32's reach: a warning.
    let unreachable = if caller_noise {
        Vec::new()
    } else {
        fused_mh::reach::unreachable_dimensions(&inputs.target, &config)
    };
    let report = if let Some((noise, uniform)) = &inputs.noise {
        let (x_new, accepted) =
            execute::one_step(gpu.as_ref(), &inputs, shape, step_size, noise, uniform)?;
        npy::write(&out.path("x_new.npy"), &[b, d], &x_new)?;
        npy::write(&out.path("accepted.npy"), &[b], &accepted)?;
        summary.mode = "caller-noise".into();
        summary.files = vec!["x_new.npy".into(), "accepted.npy".into()];
        summary.accepted_total = accepted.iter().filter(|&&a| a).count() as u64;
        summary.acceptance_rate = summary.accepted_total as f64 / b as f64;
        format!(
            "one step with the given noise on {}: {} of {b} chains accepted ({:.4})\n",
            summary.device, summary.accepted_total, summary.acceptance_rate
        )
    } else {
        summary.mode = "run".into();
        summary.thin = args.thin;
        summary.steps_per_launch = gpu.as_ref().map(|_| args.steps_per_launch);
        let trace = args.thin.map(|_| out.path("trace.npy"));
        let execute::Ran {
            x,
            stats,
            steps: ran,
            burn_in_nonfinite,
            history,
            diagnostics,
            start_spread,
        } = execute::chains(
            gpu.as_ref(),
            &inputs,
            shape,
            &config,
            first_step + args.warmup,
            args.burn_in,
            &run_plan,
            trace.as_deref(),
        )?;
        npy::write(&out.path("x.npy"), &[b, d], &x)?;
        npy::write(&out.path("accepted_count.npy"), &[b], &stats.accepted)?;
        npy::write(&out.path("nonfinite_count.npy"), &[b], &stats.nonfinite)?;
        npy::write(&out.path("null_move_count.npy"), &[b], &stats.null_moves)?;
        npy::write(&out.path("mean.npy"), &[b, d], &stats.mean)?;
        npy::write(&out.path("var.npy"), &[b, d], &stats.var)?;
        npy::write(&out.path("mu.npy"), &[d], inputs.target.mu())?;
        npy::write(&out.path("sigma.npy"), &[d], inputs.target.sigma())?;
        summary.files = ["x.npy", "accepted_count.npy", "nonfinite_count.npy"]
            .into_iter()
            .chain(["null_move_count.npy"])
            .chain(["mean.npy", "var.npy"])
            .chain(["mu.npy", "sigma.npy"])
            .chain(args.thin.map(|_| "trace.npy"))
            .map(String::from)
            .collect();
        summary.steps = ran;
        summary.burn_in = args.burn_in;
        summary.next_step = first_step + args.warmup + args.burn_in + ran;
        if args.warmup > 0 {
            summary.warmup = Some(summary::Warmup {
                steps: args.warmup,
                target_accept: args.target_accept,
                initial_step_size,
                last_acceptance: warmup_acceptance.unwrap_or(f64::NAN),
            });
        }
        summary.stopped_early = ran < args.steps;
        if let Some(d) = &diagnostics {
            let threshold = args.until_rhat.unwrap_or(RHAT_THRESHOLD);
            let d = summary::DiagnosticsSummary {
                history,
                ..summary::DiagnosticsSummary::new(d, start_spread, threshold)
            };
            summary.converged = Some(d.converged());
            summary.diagnostics = Some(d);
        } else if args.until_rhat.is_some() {
            summary.converged = Some(false);
        }
        if args.rhat_chart {
            let history = summary
                .diagnostics
                .as_ref()
                .map_or(&[][..], |d| &d.history[..]);
            let title = format!(
                "{b} chains x {d} dims, superchains of {m}, {}",
                summary.device
            );
            out.write_text(
                "rhat.svg",
                &chart::rhat(history, args.until_rhat, args.burn_in, &title)?,
            )?;
            summary.files.push("rhat.svg".into());
        }
        summary.accepted_total = stats.accepted.iter().sum();
        summary.nonfinite = Some(summary::Nonfinite {
            total: stats.nonfinite.iter().sum(),
            chains: stats.nonfinite.iter().filter(|&&n| n > 0).count() as u64,
            before_statistics: warmup_nonfinite + burn_in_nonfinite,
        });
        summary.null_moves = Some(summary::NullMoves::new(&stats.null_moves, ran));
        summary.acceptance_rate = summary.accepted_total as f64 / (ran as f64 * b as f64);
        report::describe(&summary, &inputs.target, &stats, &unreachable)
    };
    summary.files.push(SUMMARY.into());
    summary.seconds = started.elapsed().as_secs_f64();
    out.write_text(SUMMARY, &serde_json::to_string_pretty(&summary)?)?;
    let files: Vec<&str> = summary.files.iter().map(String::as_str).collect();
    let dest = out.commit(&files)?;
    // With --until-rhat, a run that did not converge says so in its exit status too.
    let status = if args.until_rhat.is_some() && summary.converged != Some(true) {
        ExitCode::from(NOT_CONVERGED)
    } else {
        ExitCode::SUCCESS
    };
    let printed = console::print(&format!(
        "{report}wrote {} ({:.2} s)\n",
        dest.display(),
        summary.seconds
    ));
    match printed {
        // The reader of standard output went away (`| head`): the results are complete.
        Err(e) if e.chain().any(|c| c.is::<console::StdoutClosed>()) => Ok(status),
        Err(e) => Err(e).with_context(|| format!("the results are complete in {}", dest.display())),
        Ok(()) => Ok(status),
    }
}

/// The exit status of a run with `--until-rhat` that did not converge (its outputs complete).
pub const NOT_CONVERGED: u8 = 3;

/// Host memory the job holds at its peak.
fn host_budget(shape: Shape, caller_noise: bool, cpu: bool, plan: &RunPlan) -> Budget {
    let (len, batch, dim) = sizes(shape);
    let mut b = Budget::default();
    b.add("initial states", 4 * len).add("target", 12 * dim);
    if caller_noise {
        b.add("noise and uniforms", 4 * len + 4 * batch);
        b.add("the step's output", 4 * len + 16 * batch);
    } else if cpu {
        // The reference's working state and each step's output, its moments, its counts and
        // decisions.
        // The moments: two samples with diagnostics (the split halves).
        let samples = if plan.diagnostics.is_some() { 2 } else { 1 };
        b.add("states", 8 * len)
            .add("running moments", samples * 16 * len);
        b.add("per-chain counts", 56 * batch);
    } else {
        // The moments' two samples are copied back and merged on the host.
        let samples = if plan.diagnostics.is_some() { 2 } else { 1 };
        b.add("final states", 4 * len)
            .add("means and variances", samples * 16 * len);
        b.add("accepted, non-finite and null-move counts", 24 * batch);
        b.add("trace copy", 4 * len * plan.trace_slots(shape) as u128);
    }
    b
}

/// GPU memory the job allocates.
fn device_budget(shape: Shape, caller_noise: bool, plan: &RunPlan) -> Budget {
    let (len, batch, dim) = sizes(shape);
    let mut b = Budget::default();
    if caller_noise {
        b.add("chains", 8 * len + batch).add("target", 8 * dim);
        b.add("noise and uniforms", 4 * len + 4 * batch);
    } else {
        b.add(
            "chains, statistics and trace buffer",
            u128::from(plan.device_bytes(shape, true)),
        );
    }
    b
}

/// Disk space the output files take.
fn disk_budget(shape: Shape, caller_noise: bool, plan: &RunPlan) -> Budget {
    let (len, batch, dim) = sizes(shape);
    let mut b = Budget::default();
    b.add("headers, summary and chart", 1 << 20);
    if caller_noise {
        b.add("x_new.npy", 4 * len).add("accepted.npy", batch);
    } else {
        b.add("x.npy", 4 * len).add("accepted_count.npy", 8 * batch);
        b.add("nonfinite_count.npy", 8 * batch);
        b.add("null_move_count.npy", 8 * batch);
        b.add("mean.npy and var.npy", 16 * len)
            .add("mu.npy and sigma.npy", 8 * dim);
        b.add("trace.npy", 4 * len * u128::from(plan.saves()));
    }
    b
}

fn sizes(shape: Shape) -> (u128, u128, u128) {
    (
        shape.len() as u128,
        shape.batch() as u128,
        shape.dim() as u128,
    )
}
