//! `host run` end to end: the program is run as a user runs it, on .npy files written here.
//!
//! The CPU tests always run; the GPU ones report *ignored* without a GPU (libtest-mimic), as in
//! the library's `tests/gpu.rs`.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use fused_mh::{Gpu, RunPlan, Shape, StepConfig, Target, cpu};
use libtest_mimic::{Arguments, Failed, Trial};
use npyz::{AutoSerialize, WriterBuilder};

/// A fresh scratch directory for one test.
fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("fused-mh-run-{name}-{}", std::process::id()));
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir).expect("scratch dir");
    dir
}

fn save<T: AutoSerialize>(path: &Path, shape: &[u64], data: &[T]) {
    let mut w = npyz::WriteOptions::new()
        .default_dtype()
        .shape(shape)
        .writer(fs::File::create(path).expect("create"))
        .begin_nd()
        .expect("header");
    w.extend(data.iter()).expect("data");
    w.finish().expect("finish");
}

fn load<T: npyz::Deserialize>(path: &Path) -> (Vec<u64>, Vec<T>) {
    let npy = npyz::NpyFile::new(fs::File::open(path).expect("open output")).expect("npy");
    let shape = npy.shape().to_vec();
    (shape, npy.into_vec().expect("data"))
}

/// The program under test: cargo's build of it, or, where the tests run on another machine
/// (the GPU bundle), the `host` binary beside this test binary.
fn host_exe() -> PathBuf {
    let built = PathBuf::from(env!("CARGO_BIN_EXE_host"));
    if built.exists() {
        return built;
    }
    let here = std::env::current_exe().expect("the test binary's path");
    here.with_file_name("host")
}

fn host(dir: &Path, args: &[&str]) -> Output {
    Command::new(host_exe())
        .current_dir(dir)
        .arg("run")
        .args(args)
        .output()
        .expect("the host program runs")
}

/// A small problem: mu and sigma not all equal, chains spread around mu, random numbers for one
/// step, all as files in `dir`.
struct Problem {
    shape: Shape,
    x: Vec<f32>,
    mu: Vec<f32>,
    sigma: Vec<f32>,
    noise: Vec<f32>,
    uniform: Vec<f32>,
}

fn problem(dir: &Path, batch: usize, dim: usize) -> Problem {
    // A deterministic spread (no RNG crate needed here): values in a few units around mu.
    let wave = |i: usize, k: f32| (i as f32 * k).sin() * 1.7;
    let mu: Vec<f32> = (0..dim).map(|d| d as f32 * 0.3 - 1.0).collect();
    let sigma: Vec<f32> = (0..dim).map(|d| 0.5 + 0.1 * d as f32).collect();
    let x: Vec<f32> = (0..batch * dim)
        .map(|i| mu[i % dim] + wave(i, 0.77))
        .collect();
    let noise: Vec<f32> = (0..batch * dim).map(|i| wave(i, 1.31)).collect();
    let uniform: Vec<f32> = (0..batch)
        .map(|i| (wave(i, 0.53) / 3.4 + 0.5).clamp(0.0, 0.999))
        .collect();
    save(&dir.join("x0.npy"), &[batch as u64, dim as u64], &x);
    save(&dir.join("mu.npy"), &[dim as u64], &mu);
    let sigma64: Vec<f64> = sigma.iter().map(|&s| f64::from(s)).collect();
    save(&dir.join("sigma64.npy"), &[dim as u64], &sigma64);
    save(&dir.join("noise.npy"), &[batch as u64, dim as u64], &noise);
    save(&dir.join("u.npy"), &[batch as u64], &uniform);
    Problem {
        shape: Shape::new(batch, dim).expect("shape"),
        x,
        mu,
        sigma,
        noise,
        uniform,
    }
}

fn check_ok(out: &Output) -> Result<(), Failed> {
    if out.status.success() {
        Ok(())
    } else {
        Err(format!("host run failed: {}", String::from_utf8_lossy(&out.stderr)).into())
    }
}

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
    let (cs, counts) = load::<u32>(&o.join("accepted_count.npy"));
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
            &mut |_, _| {},
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

/// Every bad input: a non-zero exit, an error naming the file or option and the problem, and
/// the output directory exactly as it was (absent; or, for the existing-directory case, with
/// its old contents), with no partial directory left beside it.
fn bad_inputs_fail_cleanly() -> Result<(), Failed> {
    let dir = scratch("bad");
    problem(&dir, 8, 4);
    // Files with the problems the issue lists.
    save(&dir.join("ints.npy"), &[8, 4], &[1i32; 32]);
    save(&dir.join("nan_mu.npy"), &[4], &[0.0f32, f32::NAN, 0.0, 0.0]);
    save(&dir.join("neg_sigma.npy"), &[4], &[1.0f32, -1.0, 1.0, 1.0]);
    save(&dir.join("mu5.npy"), &[5], &[0.0f32; 5]);
    let full = fs::read(dir.join("x0.npy"))?;
    fs::write(dir.join("cut.npy"), &full[..full.len() - 9])?;
    // The same file with its header claiming Fortran order (same length: "False" -> "True ").
    let mut fortran = full.clone();
    let flag = b"'fortran_order': False";
    let at = fortran
        .windows(flag.len())
        .position(|w| w == flag)
        .expect("the header has a fortran_order flag");
    fortran[at..at + flag.len()].copy_from_slice(b"'fortran_order': True ");
    fs::write(dir.join("fortran.npy"), fortran)?;
    fs::create_dir_all(dir.join("existing"))?;
    fs::write(dir.join("existing/keep.txt"), "old results")?;

    let cases: &[(&[&str], &str, &str)] = &[
        (&["--init", "missing.npy"], "out", "cannot read missing.npy"),
        (&["--init", "cut.npy"], "out", "cut.npy is truncated"),
        (&["--init", "ints.npy"], "out", "ints.npy has dtype <i4"),
        (
            &["--init", "fortran.npy"],
            "out",
            "fortran.npy is in Fortran order",
        ),
        (
            &["--init", "x0.npy", "--mu", "mu5.npy"],
            "out",
            "mu5.npy gives dim 5, but x0.npy gives dim 4",
        ),
        (
            &["--init", "mu.npy"],
            "out",
            "the initial states must be [B, dim]",
        ),
        (
            &["--init", "x0.npy", "--mu", "nan_mu.npy"],
            "out",
            "mu[1] = NaN is not finite",
        ),
        (
            &["--init", "x0.npy", "--sigma", "neg_sigma.npy"],
            "out",
            "sigma[1] = -1 must be > 0",
        ),
        (
            &["--init", "x0.npy", "--sigma", "0"],
            "out",
            "sigma[0] = 0 must be > 0",
        ),
        (
            &["--init", "x0.npy", "--steps", "0"],
            "out",
            "--steps must be at least 1",
        ),
        (
            &["--init", "x0.npy", "--thin", "9"],
            "out",
            "--thin 9 is larger than --steps 5",
        ),
        (
            &["--init", "x0.npy"],
            "existing",
            "existing already exists (pass --force",
        ),
        (
            &[
                "--init",
                "x0.npy",
                "--noise",
                "noise.npy",
                "--uniform",
                "mu.npy",
            ],
            "out",
            "the uniforms must have shape [8]",
        ),
    ];
    for (extra, out_dir, message) in cases {
        let mut args: Vec<&str> = vec!["--cpu"];
        // Five steps unless the case sets its own, or is the one-step caller-noise mode.
        if !extra.contains(&"--steps") && !extra.contains(&"--noise") {
            args.extend_from_slice(&["--steps", "5"]);
        }
        args.extend_from_slice(extra);
        args.extend_from_slice(&["--out", out_dir]);
        let out = host(&dir, &args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        if out.status.success() || !stderr.contains(message) {
            return Err(format!(
                "{args:?}: exit {:?}, stderr {stderr:?}, expected {message:?}",
                out.status.code()
            )
            .into());
        }
        let untouched = if *out_dir == "existing" {
            fs::read_dir(dir.join("existing"))?.count() == 1
                && fs::read_to_string(dir.join("existing/keep.txt"))? == "old results"
        } else {
            !dir.join(out_dir).exists()
        };
        let partial = fs::read_dir(&dir)?
            .filter_map(|e| e.ok())
            .any(|e| e.file_name().to_string_lossy().contains(".partial-"));
        if !untouched || partial {
            return Err(format!("{args:?} touched the output directory").into());
        }
    }
    // And --force does replace it.
    check_ok(&host(
        &dir,
        &[
            "--cpu", "--init", "x0.npy", "--steps", "3", "--out", "existing", "--force",
        ],
    ))?;
    if dir.join("existing/keep.txt").exists() || !dir.join("existing/x.npy").exists() {
        return Err("--force did not replace the directory".into());
    }
    fs::remove_dir_all(&dir).ok();
    Ok(())
}

fn main() -> std::process::ExitCode {
    let args = Arguments::from_args();
    let gpu = matches!(Gpu::count(), Ok(n) if n > 0);
    let gpu_test =
        |name: &str, f: fn() -> Result<(), Failed>| Trial::test(name, f).with_ignored_flag(!gpu);
    let trials = vec![
        Trial::test("run_end_to_end_cpu", || run_end_to_end(false)),
        Trial::test("caller_noise_matches_library_cpu", || {
            caller_noise_matches_library(false)
        }),
        Trial::test("bad_inputs_fail_cleanly", bad_inputs_fail_cleanly),
        gpu_test("run_end_to_end_gpu", || run_end_to_end(true)),
        gpu_test("caller_noise_matches_library_gpu", || {
            caller_noise_matches_library(true)
        }),
    ];
    libtest_mimic::run(&args, trials).exit_code()
}
