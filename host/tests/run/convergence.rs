//! `host run`'s verdict on convergence, end to end: a run that never says "converged" when
//! the chains are not, the exit status of `--until-rhat` at its cap, the float32 reach, and
//! summaries with non-finite diagnostics that `--resume` reads back.

use std::fs;

use libtest_mimic::{Failed, Trial};

use crate::common::{check_ok, expect_code, host, load, problem, save, scratch};

fn summary(dir: &std::path::Path, out: &str) -> Result<serde_json::Value, Failed> {
    Ok(serde_json::from_str(&fs::read_to_string(
        dir.join(out).join("summary.json"),
    )?)?)
}

/// The README's case: every chain at one point 10 standard deviations out, no burn-in. The
/// split R-hat is above 1.01 or the blind-start warning is printed, and the run is never
/// called converged; the table lists the worst R-hat first.
fn one_starting_point_is_never_converged() -> Result<(), Failed> {
    let dir = scratch("one-point");
    let out = host(
        &dir,
        &[
            "--cpu",
            "--batch",
            "512",
            "--dim",
            "4",
            "--mu",
            "1",
            "--sigma",
            "2",
            "--init-dist",
            "zeros",
            "--steps",
            "2000",
            "--seed",
            "1",
            "--out",
            "zeros",
        ],
    );
    check_ok(&out)?;
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    let s = summary(&dir, "zeros")?;
    let d = &s["diagnostics"];
    let blind: Vec<usize> = serde_json::from_value(d["blind_dimensions"].clone())?;
    if s["converged"] != false || blind != [0, 1, 2, 3] || !stdout.contains("WARNING: in 4 of 4") {
        return Err(format!("summary {s}\nstdout {stdout}").into());
    }
    // The table: rows in order of falling R-hat.
    let rhat: Vec<f64> = serde_json::from_value(d["nested_rhat"].clone())?;
    let rows: Vec<usize> = stdout
        .lines()
        .skip_while(|l| !l.trim_start().starts_with("dim"))
        .skip(1)
        .filter_map(|l| l.split_whitespace().next()?.parse().ok())
        .collect();
    let falling = rows.windows(2).all(|w| rhat[w[0]] >= rhat[w[1]]);
    if rows.len() != 4 || !falling {
        return Err(format!("table rows {rows:?} for R-hat {rhat:?}").into());
    }
    fs::remove_dir_all(&dir).ok();
    Ok(())
}

/// `--until-rhat` that the chains cannot meet by `--steps`: exit 3, `NOT converged: worst
/// R-hat ... > ... after ... steps` on the terminal, `"converged": false`, complete outputs.
fn until_rhat_at_the_cap_exits_3() -> Result<(), Failed> {
    let dir = scratch("cap");
    let out = host(
        &dir,
        &[
            "--cpu",
            "--batch",
            "64",
            "--dim",
            "3",
            "--superchain-size",
            "4",
            "--init-dist",
            "overdispersed",
            "--sigma",
            "1.5",
            "--steps",
            "40",
            "--until-rhat",
            "1.001",
            "--min-draws",
            "10",
            "--out",
            "capped",
        ],
    );
    expect_code(&out, 3, "--until-rhat at the cap")?;
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    let s = summary(&dir, "capped")?;
    let line = stdout
        .lines()
        .find(|l| l.starts_with("NOT converged: worst R-hat"));
    let ok = line.is_some_and(|l| l.contains("> 1.001 after 40 steps"));
    if !ok
        || s["converged"] != false
        || s["stopped_early"] != false
        || !dir.join("capped/x.npy").is_file()
    {
        return Err(format!("stdout {stdout}\nsummary {s}").into());
    }
    fs::remove_dir_all(&dir).ok();
    Ok(())
}

/// States float32 cannot move: mu 1e6 with sigma 0.01, and mu 1e8, refused before the run
/// (exit 1), naming the options and the dimension, nothing written.
fn float32_reach_is_refused() -> Result<(), Failed> {
    let dir = scratch("reach");
    for (mu, sigma) in [("1000000", "0.01"), ("100000000", "1")] {
        let out = host(
            &dir,
            &[
                "--cpu", "--batch", "8", "--dim", "2", "--mu", mu, "--sigma", sigma, "--out", "o",
            ],
        );
        let stderr = expect_code(&out, 1, "an unreachable target")?;
        if !stderr.contains("--mu, --sigma, --step-size: in dimension 0") || dir.join("o").exists()
        {
            return Err(format!("--mu {mu} --sigma {sigma}: {stderr}").into());
        }
    }
    fs::remove_dir_all(&dir).ok();
    Ok(())
}

/// A run whose chains never move (a step size past float32's range: every step non-finite)
/// has NaN diagnostics; summary.json writes them as "NaN", and `--resume` of it runs.
fn nonfinite_diagnostics_resume() -> Result<(), Failed> {
    let dir = scratch("nan-resume");
    let base = [
        "--cpu",
        "--batch",
        "8",
        "--dim",
        "2",
        "--init-dist",
        "zeros",
        "--steps",
        "8",
    ];
    check_ok(&host(
        &dir,
        &[&base[..], &["--step-size", "1e30", "--out", "first"]].concat(),
    ))?;
    let s = summary(&dir, "first")?;
    if s["diagnostics"]["max_nested_rhat"] != "NaN" || s["converged"] != false {
        return Err(format!("summary {s}").into());
    }
    check_ok(&host(
        &dir,
        &[
            "--cpu", "--steps", "8", "--resume", "first", "--out", "second",
        ],
    ))?;
    if summary(&dir, "second")?["resumed_from"].is_null() {
        return Err("the resumed run's summary names no run".into());
    }
    fs::remove_dir_all(&dir).ok();
    Ok(())
}

/// `--step-size 1e30`: every proposal's terms pass float32's range, so every step of every
/// chain has a non-finite log alpha: nonfinite_count.npy holds the steps for each chain, the
/// summary the total and the chains, the report a warning; the chains never move. A run with a
/// sane step size counts zero and warns of nothing.
fn nonfinite_steps_are_reported(on_gpu: bool) -> Result<(), Failed> {
    let dir = scratch(if on_gpu {
        "nonfinite-gpu"
    } else {
        "nonfinite-cpu"
    });
    problem(&dir, 40, 6);
    for (step, want) in [("1e30", 30u64), ("0.3", 0)] {
        let mut args = vec![
            "--init",
            "x0.npy",
            "--steps",
            "30",
            "--steps-per-launch",
            "7",
            "--burn-in",
            "5",
            "--step-size",
            step,
            "--out",
            "o",
            "--force",
        ];
        if !on_gpu {
            args.push("--cpu");
        }
        let out = host(&dir, &args);
        check_ok(&out)?;
        let (shape, counts) = load::<u64>(&dir.join("o/nonfinite_count.npy"));
        if shape != [40] || counts.iter().any(|&c| c != want) {
            return Err(format!("--step-size {step}: counts {counts:?}, not {want} each").into());
        }
        let summary: serde_json::Value =
            serde_json::from_str(&fs::read_to_string(dir.join("o/summary.json"))?)?;
        let n = &summary["nonfinite"];
        let chains = if want > 0 { 40 } else { 0 };
        if n["total"] != 40 * want
            || n["chains"] != chains
            || n["before_statistics"] != 40 * want / 6
        {
            return Err(format!("--step-size {step}: summary {n}").into());
        }
        let warned = String::from_utf8_lossy(&out.stdout).contains("non-finite log alpha");
        if warned != (want > 0) {
            return Err(format!("--step-size {step}: warning printed: {warned}").into());
        }
        let (_, x0) = load::<f32>(&dir.join("x0.npy"));
        let (_, x) = load::<f32>(&dir.join("o/x.npy"));
        if want > 0 && x0.iter().zip(&x).any(|(a, b)| a.to_bits() != b.to_bits()) {
            return Err("chains moved with non-finite proposals".into());
        }
    }
    fs::remove_dir_all(&dir).ok();
    Ok(())
}

/// Chains started at 10^8 for a target at 0 (the target's own floats are fine, so the run is
/// not refused; its states are not): with a step size of 0.5 against a float spacing of 8 every
/// proposal rounds back to the state (it would take a normal beyond 8), every step is a
/// null move, counted per chain in null_move_count.npy and the summary, with a warning.
fn null_moves_are_counted_and_warned(on_gpu: bool) -> Result<(), Failed> {
    let dir = scratch(if on_gpu { "null-gpu" } else { "null-cpu" });
    save(&dir.join("x0.npy"), &[16, 3], &[1.0e8f32; 48]);
    let mut args = vec![
        "--init",
        "x0.npy",
        "--steps",
        "20",
        "--step-size",
        "0.5",
        "--out",
        "o",
    ];
    if !on_gpu {
        args.push("--cpu");
    }
    let out = host(&dir, &args);
    check_ok(&out)?;
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    let (_, counts) = load::<u64>(&dir.join("o/null_move_count.npy"));
    let n = &summary(&dir, "o")?["null_moves"];
    if counts != [20; 16]
        || n["total"] != 320
        || n["fraction"] != 1.0
        || !stdout.contains("null moves")
    {
        return Err(format!("counts {counts:?}, summary {n}, stdout {stdout}").into());
    }
    fs::remove_dir_all(&dir).ok();
    Ok(())
}

/// This file's tests (the GPU ones reported as ignored without a GPU).
pub fn trials(gpu: bool) -> Vec<Trial> {
    vec![
        Trial::test("nonfinite_steps_are_reported_cpu", || {
            nonfinite_steps_are_reported(false)
        }),
        Trial::test("nonfinite_steps_are_reported_gpu", || {
            nonfinite_steps_are_reported(true)
        })
        .with_ignored_flag(!gpu),
        Trial::test("convergence::null_moves_are_counted_and_warned_cpu", || {
            null_moves_are_counted_and_warned(false)
        }),
        Trial::test("convergence::null_moves_are_counted_and_warned_gpu", || {
            null_moves_are_counted_and_warned(true)
        })
        .with_ignored_flag(!gpu),
        Trial::test(
            "convergence::one_starting_point_is_never_converged",
            one_starting_point_is_never_converged,
        ),
        Trial::test(
            "convergence::until_rhat_at_the_cap_exits_3",
            until_rhat_at_the_cap_exits_3,
        ),
        Trial::test(
            "convergence::float32_reach_is_refused",
            float32_reach_is_refused,
        ),
        Trial::test(
            "convergence::nonfinite_diagnostics_resume",
            nonfinite_diagnostics_resume,
        ),
    ]
}
