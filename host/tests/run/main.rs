//! `host run` end to end: the program is run as a user runs it, on .npy files written here.
//!
//! The CPU tests always run; the GPU ones report *ignored* without a GPU (libtest-mimic), as in
//! the library's `tests/gpu.rs`. `hostile.rs` has the inputs and situations that must fail
//! cleanly.

mod common;
mod convergence;
mod hostile;
mod leftovers;
mod memory;
mod options;
mod resume_checks;
mod sample_resume;
mod special_files;
mod targets;
mod warmup;

use std::fs;

use common::{check_ok, expect_code, host, load, problem, same_states, scratch};
use fused_mh::{Gpu, RunPlan, StepConfig, Target, cpu};
use libtest_mimic::{Arguments, Failed, Trial};

/// `--steps 30 --thin 1` on the CPU or the GPU: outputs with the right shapes; the final state
/// and counts equal the library's own run (bit for bit: the same code path); the trace's last
/// state is the final state; the means and variances equal a two-pass computation over the
/// trace (thin = 1 keeps every state) within f64 rounding.
fn run_end_to_end(on_gpu: bool) -> Result<(), Failed> {
    let dir = scratch(if on_gpu { "e2e-gpu" } else { "e2e-cpu" });
    let p = problem(&dir, 37, 6);
    let mut args = vec![
        "--init",
        "x0.npy",
        "--mu",
        "mu.npy",
        "--sigma",
        "sigma64.npy",
        "--steps",
        "30",
        "--thin",
        "1",
        "--step-size",
        "0.4",
        "--seed",
        "9",
        "--steps-per-launch",
        "7",
        "--out",
        "out",
    ];
    if !on_gpu {
        args.push("--cpu");
    }
    let out = host(&dir, &args);
    check_ok(&out)?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    if !stderr.contains("sigma64.npy is float64; converted to float32") {
        return Err("the float64 conversion was not reported".into());
    }
    let o = dir.join("out");
    let (xs, x) = load::<f32>(&o.join("x.npy"));
    let (cs, counts) = load::<u64>(&o.join("accepted_count.npy"));
    let (ms, mean) = load::<f64>(&o.join("mean.npy"));
    let (_, var) = load::<f64>(&o.join("var.npy"));
    let (ts, trace) = load::<f32>(&o.join("trace.npy"));
    if xs != [37, 6] || cs != [37] || ms != [37, 6] || ts != [30, 37, 6] {
        return Err(format!("output shapes {xs:?} {cs:?} {ms:?} {ts:?}").into());
    }
    let summary: serde_json::Value =
        serde_json::from_str(&fs::read_to_string(o.join("summary.json"))?)?;
    if summary["steps"] != 30 || summary["batch"] != 37 {
        return Err(format!("summary.json: {summary}").into());
    }

    let target = Target::new(p.mu.clone(), p.sigma.clone())?;
    let config = StepConfig::new(0.4, 9)?;
    let (want_x, want_counts) = if on_gpu {
        let gpu = Gpu::open(0)?;
        let mut chains = gpu.upload_chains(&p.x, p.shape)?;
        let target_dev = gpu.upload_target(&target)?;
        let mut stats = gpu.new_stats(p.shape, false)?;
        gpu.run(
            &mut chains,
            &target_dev,
            &config,
            &RunPlan::new(30, 7),
            &mut stats,
            &mut |_| Ok(()),
            &mut |_| Ok(()),
        )?;
        (chains.x()?, stats.accepted_counts()?)
    } else {
        cpu::steps(&p.x, p.shape, &target, &config, 0, 30)?
    };
    if x != want_x || counts != want_counts {
        return Err("the final states or counts differ from the library's run".into());
    }
    if trace[29 * 222..] != x[..] {
        return Err("the last saved state is not the final state".into());
    }
    for e in 0..222 {
        let vals: Vec<f64> = (0..30).map(|s| f64::from(trace[s * 222 + e])).collect();
        let m = vals.iter().sum::<f64>() / 30.0;
        let v = vals.iter().map(|a| (a - m).powi(2)).sum::<f64>() / 30.0;
        // CPU: Welford in f64 against two-pass in f64, ~1e-15 apart. GPU: each launch's 7
        // steps accumulate in f32 first (relative ~1e-6 of the values' scale).
        let tol = if on_gpu { 1e-5 } else { 1e-12 };
        let scale = 1.0 + m.abs();
        if (mean[e] - m).abs() > tol * scale || (var[e] - v).abs() > tol * scale * scale {
            return Err(format!(
                "element {e}: mean {} vs {m}, var {} vs {v}",
                mean[e], var[e]
            )
            .into());
        }
    }
    fs::remove_dir_all(&dir).ok();
    Ok(())
}

/// `--noise` and `--uniform`: one step of the reference semantics with those numbers, equal to
/// the library's caller-noise step (bit for bit).
fn caller_noise_matches_library(on_gpu: bool) -> Result<(), Failed> {
    let dir = scratch(if on_gpu { "noise-gpu" } else { "noise-cpu" });
    let p = problem(&dir, 50, 33);
    let mut args = vec![
        "--init",
        "x0.npy",
        "--mu",
        "mu.npy",
        "--sigma",
        "sigma64.npy",
        "--noise",
        "noise.npy",
        "--uniform",
        "u.npy",
        "--step-size",
        "0.3",
        "--out",
        "out",
    ];
    if !on_gpu {
        args.push("--cpu");
    }
    check_ok(&host(&dir, &args))?;
    let (_, x_new) = load::<f32>(&dir.join("out/x_new.npy"));
    let (shape, accepted) = load::<bool>(&dir.join("out/accepted.npy"));
    let target = Target::new(p.mu.clone(), p.sigma.clone())?;
    let (want_x, want_acc) = if on_gpu {
        let gpu = Gpu::open(0)?;
        let mut chains = gpu.upload_chains(&p.x, p.shape)?;
        let noise = gpu.upload_noise(&p.noise, &p.uniform, p.shape)?;
        gpu.step_with_noise(&mut chains, &gpu.upload_target(&target)?, 0.3, &noise)?;
        (chains.x()?, chains.accepted()?)
    } else {
        let o = cpu::par_step_with_noise(&p.x, p.shape, &target, 0.3, &p.noise, &p.uniform)?;
        (o.x_new, o.accepted)
    };
    if shape != [50] || x_new != want_x || accepted != want_acc {
        return Err("x_new or accepted differ from the library's caller-noise step".into());
    }
    if !accepted.iter().any(|&a| a) || accepted.iter().all(|&a| a) {
        return Err("the test problem should both accept and reject".into());
    }
    fs::remove_dir_all(&dir).ok();
    Ok(())
}

/// `--resume A --steps 20` after a 30-step run A continues A's random stream: its final states
/// equal one 50-step run's bit for bit, its summary counts steps 30 to 50, and its trace is the
/// second part of the long run's. Starting from A's `x.npy` with A's seed instead is warned
/// about (it would replay A's random numbers).
fn resume_continues_the_stream(on_gpu: bool) -> Result<(), Failed> {
    let dir = scratch(if on_gpu { "resume-gpu" } else { "resume-cpu" });
    problem(&dir, 21, 5);
    let device: &[&str] = if on_gpu { &[] } else { &["--cpu"] };
    let run = |extra: &[&str]| {
        let mut args = device.to_vec();
        args.extend_from_slice(extra);
        host(&dir, &args)
    };
    let first = [
        "--init",
        "x0.npy",
        "--mu",
        "mu.npy",
        "--seed",
        "4",
        "--step-size",
        "0.6",
    ];
    let long = [
        &first[..],
        &["--steps", "50", "--thin", "10", "--out", "long"],
    ]
    .concat();
    check_ok(&run(&long))?;
    let a = [
        &first[..],
        &[
            "--steps",
            "30",
            "--thin",
            "10",
            "--steps-per-launch",
            "7",
            "--out",
            "a",
        ],
    ]
    .concat();
    check_ok(&run(&a))?;
    check_ok(&run(&[
        "--resume", "a", "--steps", "20", "--thin", "10", "--out", "b",
    ]))?;
    if !same_states(&dir, "long", "b") {
        return Err("the resumed run's states differ from the uninterrupted run's".into());
    }
    let (_, trace_long) = load::<f32>(&dir.join("long/trace.npy"));
    let (shape, trace_b) = load::<f32>(&dir.join("b/trace.npy"));
    if shape != [2, 21, 5] || trace_b[..] != trace_long[3 * 105..] {
        return Err("the resumed run's trace is not the second part of the long run's".into());
    }
    let summary: serde_json::Value =
        serde_json::from_str(&fs::read_to_string(dir.join("b/summary.json"))?)?;
    let fields = (
        &summary["first_step"],
        &summary["next_step"],
        &summary["seed"],
        &summary["resumed_from"],
    );
    if fields != (&30.into(), &50.into(), &4.into(), &"a".into()) {
        return Err(format!("summary of the resumed run: {summary}").into());
    }
    let replay = run(&[
        "--init", "a/x.npy", "--mu", "mu.npy", "--seed", "4", "--steps", "2", "--out", "c",
    ]);
    let stderr = expect_code(&replay, 0, "starting from a run's final state")?;
    if !stderr.contains("replays its random numbers") || !stderr.contains("--resume a") {
        return Err(format!("no warning about the replayed stream: {stderr:?}").into());
    }
    fs::remove_dir_all(&dir).ok();
    Ok(())
}

/// `--superchain-size 4 --init-dist overdispersed`: superchains started apart have not met
/// after 10 steps (nested R-hat above 1.1 in summary.json) and have after 20000 (below 1.01);
/// the summary's figures are the library's diagnostics of the run's own mean.npy and var.npy.
fn diagnostics_in_the_summary() -> Result<(), Failed> {
    let dir = scratch("diagnostics");
    let run = |steps: &str, out: &str| {
        host(
            &dir,
            &[
                "--cpu",
                "--batch",
                "64",
                "--dim",
                "3",
                "--sigma",
                "1.5",
                "--superchain-size",
                "4",
                "--init-dist",
                "overdispersed",
                "--steps",
                steps,
                "--thin",
                steps,
                "--out",
                out,
            ],
        )
    };
    let summary = |out: &str| -> Result<serde_json::Value, Failed> {
        Ok(serde_json::from_str(&fs::read_to_string(
            dir.join(out).join("summary.json"),
        )?)?)
    };
    check_ok(&run("10", "early"))?;
    check_ok(&run("20000", "late"))?;
    let (early, late) = (summary("early")?, summary("late")?);
    let worst = |s: &serde_json::Value| s["diagnostics"]["max_nested_rhat"].as_f64();
    if !(worst(&early) > Some(1.1) && worst(&late) < Some(1.01)) {
        return Err(format!(
            "nested R-hat early {:?}, late {:?}",
            worst(&early),
            worst(&late)
        )
        .into());
    }
    // The split diagnostics of the last checkpoint, 20000 = 625 * 2^5 draws, over every
    // draw; superchains started 4 sigma apart: not blind, and converged by the 1.01 rule.
    let d = &late["diagnostics"];
    let recorded: Vec<f64> = serde_json::from_value(d["nested_rhat"].clone())?;
    let spread: Vec<f64> = serde_json::from_value(d["start_spread"].clone())?;
    if recorded.len() != 3
        || d["draws"] != 20_000
        || late["converged"] != true
        || early["converged"] != false
        || spread.iter().any(|&s| s < 1.0)
    {
        return Err(format!("summaries: early {early}, late {late}").into());
    }
    fs::remove_dir_all(&dir).ok();
    Ok(())
}

/// `--until-rhat 1.02`: the run stops at a checkpoint (--min-draws 100 times a power of two),
/// says so in summary.json, and its states are those of the same seed's run with that many
/// steps.
fn early_stop(on_gpu: bool) -> Result<(), Failed> {
    let dir = scratch(if on_gpu { "stop-gpu" } else { "stop-cpu" });
    let mut base = vec![
        "--batch",
        "64",
        "--dim",
        "3",
        "--superchain-size",
        "4",
        "--init-dist",
        "overdispersed",
        "--steps-per-launch",
        "50",
        "--seed",
        "3",
    ];
    if !on_gpu {
        base.push("--cpu");
    }
    let run = |extra: &[&str]| host(&dir, &[&base[..], extra].concat());
    check_ok(&run(&[
        "--steps",
        "100000",
        "--until-rhat",
        "1.02",
        "--rhat-chart",
        "--out",
        "stopped",
    ]))?;
    let summary: serde_json::Value =
        serde_json::from_str(&fs::read_to_string(dir.join("stopped/summary.json"))?)?;
    let steps = summary["steps"].as_u64().unwrap_or(0);
    let rhat = summary["diagnostics"]["max_nested_rhat"]
        .as_f64()
        .unwrap_or(f64::NAN);
    if summary["stopped_early"] != true
        || steps == 0
        || steps >= 100_000
        || !steps.is_multiple_of(100)
        || !(steps / 100).is_power_of_two()
        || rhat >= 1.02
        || summary["converged"] != true
    {
        return Err(format!("summary of the stopped run: {summary}").into());
    }
    // The history has every checkpoint (100, 200, 400, ...), the last one the stop; the chart
    // is in the output.
    let history = summary["diagnostics"]["history"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let last = history.last().map(|c| c["step"].clone());
    if history.len() as u32 != (steps / 100).ilog2() + 1 || last != Some(steps.into()) {
        return Err(format!("history: {history:?}").into());
    }
    let chart = fs::read_to_string(dir.join("stopped/rhat.svg"))?;
    if !chart.contains("--until-rhat 1.02") {
        return Err("rhat.svg has no threshold line".into());
    }
    check_ok(&run(&["--steps", &steps.to_string(), "--out", "short"]))?;
    if !same_states(&dir, "stopped", "short") {
        return Err(format!("stopped at {steps}: not the {steps}-step run's states").into());
    }
    fs::remove_dir_all(&dir).ok();
    Ok(())
}

/// `--burn-in 10 --steps 20` ends where `--steps 30` ends (bit for bit), and its statistics are
/// those of the last 20 states only: equal to a two-pass computation over that part of the
/// long run's trace.
fn burn_in_counts_for_nothing(on_gpu: bool) -> Result<(), Failed> {
    let dir = scratch(if on_gpu { "burn-in-gpu" } else { "burn-in-cpu" });
    problem(&dir, 9, 5);
    let device = if on_gpu {
        "--steps-per-launch=7"
    } else {
        "--cpu"
    };
    let base = [device, "--init", "x0.npy", "--mu", "mu.npy", "--seed", "8"];
    let long = [
        &base[..],
        &["--steps", "30", "--thin", "1", "--out", "long"],
    ]
    .concat();
    check_ok(&host(&dir, &long))?;
    let burnt = [
        &base[..],
        &["--burn-in", "10", "--steps", "20", "--out", "burnt"],
    ]
    .concat();
    check_ok(&host(&dir, &burnt))?;
    if !same_states(&dir, "long", "burnt") {
        return Err("the burnt-in run does not end where the long run ends".into());
    }
    let (_, trace) = load::<f32>(&dir.join("long/trace.npy"));
    let (_, mean) = load::<f64>(&dir.join("burnt/mean.npy"));
    for e in 0..45 {
        let m = (10..30).map(|s| f64::from(trace[s * 45 + e])).sum::<f64>() / 20.0;
        // CPU: Welford in f64 against two passes in f64, ~1e-15 apart. GPU: each launch's
        // steps accumulate in f32 first (relative ~1e-6 of the values' scale).
        let tol = if on_gpu { 1e-5 } else { 1e-12 };
        if (mean[e] - m).abs() > tol * (1.0 + m.abs()) {
            return Err(format!("element {e}: mean {} vs {m} over steps 10..30", mean[e]).into());
        }
    }
    let summary: serde_json::Value =
        serde_json::from_str(&fs::read_to_string(dir.join("burnt/summary.json"))?)?;
    if (
        &summary["burn_in"],
        &summary["steps"],
        &summary["next_step"],
    ) != (&10.into(), &20.into(), &30.into())
    {
        return Err(format!("summary: {summary}").into());
    }
    fs::remove_dir_all(&dir).ok();
    Ok(())
}

fn main() -> std::process::ExitCode {
    let args = Arguments::from_args();
    let gpu = matches!(Gpu::count(), Ok(n) if n > 0);
    let gpu_test =
        |name: &str, f: fn() -> Result<(), Failed>| Trial::test(name, f).with_ignored_flag(!gpu);
    let mut trials = vec![
        Trial::test("run_end_to_end_cpu", || run_end_to_end(false)),
        Trial::test("caller_noise_matches_library_cpu", || {
            caller_noise_matches_library(false)
        }),
        Trial::test("resume_continues_the_stream_cpu", || {
            resume_continues_the_stream(false)
        }),
        Trial::test("diagnostics_in_the_summary", diagnostics_in_the_summary),
        Trial::test("early_stop_cpu", || early_stop(false)),
        Trial::test("burn_in_counts_for_nothing_cpu", || {
            burn_in_counts_for_nothing(false)
        }),
        gpu_test("burn_in_counts_for_nothing_gpu", || {
            burn_in_counts_for_nothing(true)
        }),
        gpu_test("early_stop_gpu", || early_stop(true)),
        gpu_test("run_end_to_end_gpu", || run_end_to_end(true)),
        gpu_test("caller_noise_matches_library_gpu", || {
            caller_noise_matches_library(true)
        }),
        gpu_test("resume_continues_the_stream_gpu", || {
            resume_continues_the_stream(true)
        }),
    ];
    trials.extend(hostile::trials());
    trials.extend(convergence::trials(gpu));
    trials.extend(options::trials());
    trials.extend(memory::trials(gpu));
    trials.extend(leftovers::trials());
    trials.extend(resume_checks::trials());
    trials.extend(sample_resume::trials(gpu));
    trials.extend(special_files::trials());
    trials.extend(targets::trials());
    trials.extend(warmup::trials(gpu));
    libtest_mimic::run(&args, trials).exit_code()
}
