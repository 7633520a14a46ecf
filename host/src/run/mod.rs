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
//! - `mu.npy`, `sigma.npy` and one file for each further parameter of the target, `[dim]`
//!   f32: the target, so that `--resume DIR` needs nothing else;
//! - `trace.npy` `[steps / thin, B, dim]` f32 with `--thin`: the state after every thin-th step;
//! - with `--noise` and `--uniform` instead: `x_new.npy` and `accepted.npy` (bool) of exactly
//!   one step of the reference semantics with those random numbers;
//! - `summary.json`: the configuration, the step counters, the acceptance, the time, the
//!   device, the split diagnostics and the verdict, the list of files ([`summary::Summary`]).
//!
//! Exit status: as the program's (0, 1, 2, 128 + N), and 3 when `--until-rhat` was given and
//! the run did not converge (it reached `--steps`, or R-hat could not see from where the
//! chains started): the outputs are complete, and a script can tell.

mod args;
mod budgets;
mod chart;
mod execute;
mod inputs;
mod json_float;
mod progress_line;
mod report;
mod summary;

use std::time::Instant;

use anyhow::{Context, Result, bail, ensure};
use fused_mh::diagnostics::{self, RHAT_THRESHOLD, plan::Refusal};
use fused_mh::kernel::target::inverse_square;
use fused_mh::{Error, Gpu, RunPlan, StepConfig};

pub use self::args::{InitDist, RunArgs};
use self::budgets::{device_budget, disk_budget, host_budget};
use self::inputs::{Init, Plan};
use self::summary::{Resume, Summary};
use crate::console;
use crate::npy;
use crate::outdir::{OutputDir, SUMMARY};

/// `host run`.
pub fn run(args: RunArgs) -> Result<u8> {
    crate::signals::install()?;
    args.check_every_option_acts()?;
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
        args.target_accept() > 0.0 && args.target_accept() < 1.0,
        "--target-accept {}: give an acceptance rate between 0 and 1",
        args.target_accept()
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
    ensure!(
        !args.precondition || shape.batch() >= 2,
        "--precondition: the pooled variance needs at least 2 chains"
    );
    // The split statistics and the diagnostics at their checkpoints, whenever they can be
    // computed (a few passes over the moments at each of log2(steps) checkpoints), by the
    // library's rules; a run of the caller's noise keeps no moments.
    let request = diagnostics::plan::Request {
        superchain_size: m,
        until_rhat: args.until_rhat,
        min_draws: args.min_draws,
        steps_per_launch: args.steps_per_launch,
        possible: !caller_noise,
    };
    let diagnostics = diagnostics::plan::plan(shape, steps, request)
        .map_err(|refusal| anyhow::anyhow!(diagnostics_refusal(refusal, steps)))?;
    ensure!(
        !args.rhat_chart || diagnostics.is_some(),
        "--rhat-chart: the diagnostics need at least two chains (superchains) and 4 steps"
    );
    let run_plan = RunPlan {
        thin: args.thin.unwrap_or(0),
        diagnostics,
        ..RunPlan::new(args.steps, args.steps_per_launch)
    };
    let sizes = || format!("{} chains x {} dims", shape.batch(), shape.dim());
    let phases = (args.warmup > 0, args.burn_in > 0);
    let host_memory = host_budget(shape, caller_noise, args.cpu, &run_plan, phases);
    host_memory.check_host().with_context(sizes)?;

    let gpu = if args.cpu {
        None
    } else {
        match Gpu::open(args.device()) {
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
            let sigma = inputs.target.sigma().iter().copied();
            let max_inv_var = sigma.map(inverse_square).fold(0.0, f32::max);
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
            (args.warmup, args.target_accept(), args.precondition),
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
        target: plan.target.name().into(),
        mu: plan.param_text("mu"),
        sigma: plan.param_text("sigma"),
        other_params: plan
            .params
            .iter()
            .skip(2)
            .map(|p| (p.name.to_string(), p.text.clone()))
            .collect(),
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
        digests: Default::default(),
        host_memory_planned: u64::try_from(host_memory.total()).unwrap_or(u64::MAX),
        host_memory_peak: None,
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
        let digests = &mut summary.digests;
        digests.insert(
            "x_new.npy".into(),
            npy::write(&out.path("x_new.npy"), &[b, d], &x_new)?,
        );
        let written = npy::write(&out.path("accepted.npy"), &[b], &accepted)?;
        digests.insert("accepted.npy".into(), written);
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
            trace_digest,
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
        // Each file with the digest of what was written: a resume checks its inputs by them.
        let mut digests = std::collections::BTreeMap::new();
        let mut write = |name: &str, digest: String| digests.insert(name.to_string(), digest);
        write("x.npy", npy::write(&out.path("x.npy"), &[b, d], &x)?);
        let (accepted, nonfinite) = (&stats.accepted, &stats.nonfinite);
        write(
            "accepted_count.npy",
            npy::write(&out.path("accepted_count.npy"), &[b], accepted)?,
        );
        write(
            "nonfinite_count.npy",
            npy::write(&out.path("nonfinite_count.npy"), &[b], nonfinite)?,
        );
        let null_moves = &stats.null_moves;
        write(
            "null_move_count.npy",
            npy::write(&out.path("null_move_count.npy"), &[b], null_moves)?,
        );
        write(
            "mean.npy",
            npy::write(&out.path("mean.npy"), &[b, d], &stats.mean)?,
        );
        write(
            "var.npy",
            npy::write(&out.path("var.npy"), &[b, d], &stats.var)?,
        );
        let param_files: Vec<String> = (plan.target.params().iter())
            .map(|p| format!("{p}.npy"))
            .collect();
        for (file, &name) in param_files.iter().zip(plan.target.params()) {
            let values = inputs
                .target
                .param(name)
                .context("the target's parameters")?;
            write(file, npy::write(&out.path(file), &[d], values)?);
        }
        if let Some(digest) = trace_digest {
            write("trace.npy", digest);
        }
        summary.digests = digests;
        summary.files = ["x.npy", "accepted_count.npy", "nonfinite_count.npy"]
            .into_iter()
            .chain(["null_move_count.npy"])
            .chain(["mean.npy", "var.npy"])
            .chain(param_files.iter().map(String::as_str))
            .chain(args.thin.map(|_| "trace.npy"))
            .map(String::from)
            .collect();
        summary.steps = ran;
        summary.burn_in = args.burn_in;
        summary.next_step = first_step + args.warmup + args.burn_in + ran;
        if args.warmup > 0 {
            summary.warmup = Some(summary::Warmup {
                steps: args.warmup,
                target_accept: args.target_accept(),
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
    summary.host_memory_peak = crate::budget::peak_resident_memory();
    out.write_text(SUMMARY, &serde_json::to_string_pretty(&summary)?)?;
    let files: Vec<&str> = summary.files.iter().map(String::as_str).collect();
    let dest = out.commit(&files)?;
    // With --until-rhat, a run that did not converge says so in its exit status too.
    let status = if args.until_rhat.is_some() && summary.converged != Some(true) {
        NOT_CONVERGED
    } else {
        0
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

/// A refused diagnostics request in `host run`'s words (its options' names).
fn diagnostics_refusal(refusal: Refusal, steps: u64) -> String {
    match refusal {
        Refusal::EmptySuperchain => "--superchain-size must be at least 1".into(),
        Refusal::MinDrawsWithoutStop => {
            "--min-draws sets when --until-rhat may stop the run: it needs --until-rhat".into()
        }
        Refusal::SuperchainsDoNotFit {
            superchain_size: m,
            batch,
        } => format!(
            "--superchain-size {m}: the batch of {batch} chains must be a multiple of {m} with \
             at least two superchains, and the run at least 4 steps"
        ),
        Refusal::ThresholdNotAboveOne(t) => {
            format!("--until-rhat {t}: give a threshold above 1 (e.g. 1.01)")
        }
        Refusal::FirstCheckpointBeyondSteps {
            first_checkpoint,
            min_draws,
        } => format!(
            "--until-rhat: the first checkpoint is at {first_checkpoint} draws (--min-draws \
             {min_draws} rounded up to an even number, at least 4), beyond --steps {steps}"
        ),
        Refusal::TooFewChainsToStop => {
            "--until-rhat: the diagnostics need at least two chains (superchains)".into()
        }
    }
}
