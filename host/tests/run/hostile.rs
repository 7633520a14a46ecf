//! `host run` under hostile but realistic use: bad files, impossible sizes, dangerous output
//! directories, closed streams (signals are in `leftovers.rs`, the benchmark's options in
//! `options.rs`).
//!
//! Every refusal is checked the same way ([`crate::common::refused`]): the exact exit code (1 for an error,
//! 2 for a usage error found by the option parser), a message that names the file or option
//! at fault, every file in the scratch directory byte for byte as it was (inputs and earlier
//! outputs untouched, no output directory created), and no staging directory left behind.

use std::fs;
use std::path::Path;
use std::process::{Command, Stdio};

use libtest_mimic::{Failed, Trial};

use crate::common::{
    check_ok, expect_code, handmade, host, host_exe, load, problem, refused, save, scratch,
};

/// A float32 `.npy` of `[rows, cols]` equal to `fill`, with `value` at `[row, col]`.
fn planted(path: &Path, rows: usize, cols: usize, fill: f32, at: (usize, usize), value: f32) {
    let mut data = vec![fill; rows * cols];
    data[at.0 * cols + at.1] = value;
    save(path, &[rows as u64, cols as u64], &data);
}

/// An earlier run's output directory `name` (ten steps from generated states).
fn earlier_run(dir: &Path, name: &str) -> Result<(), Failed> {
    check_ok(&host(
        dir,
        &[
            "--cpu", "--batch", "3", "--dim", "2", "--steps", "10", "--out", name,
        ],
    ))
}

/// Unreadable, malformed and out-of-range inputs.
fn bad_inputs() -> Result<(), Failed> {
    let dir = scratch("bad-inputs");
    problem(&dir, 8, 4);
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
    planted(&dir.join("x_nan.npy"), 8, 4, 0.5, (1, 1), f32::NAN);
    planted(&dir.join("x_inf.npy"), 8, 4, 0.5, (2, 3), f32::INFINITY);
    // Row 5 is 1e20 from mu in units of sigma (~1): its squared distance, 1e40, overflows f32.
    planted(&dir.join("x_far.npy"), 8, 4, 0.5, (5, 0), 1e20);
    let mut u = vec![0.5f32; 8];
    u[3] = 1.0;
    save(&dir.join("u_one.npy"), &[8], &u);

    let cases: &[(&[&str], &str)] = &[
        (&["--init", "missing.npy"], "cannot read missing.npy"),
        (&["--init", "cut.npy"], "cut.npy is truncated"),
        (&["--init", "ints.npy"], "ints.npy has dtype <i4"),
        (
            &["--init", "fortran.npy"],
            "fortran.npy is in Fortran order",
        ),
        (
            &["--init", "x0.npy", "--mu", "mu5.npy"],
            "mu5.npy gives dim 5, but x0.npy gives dim 4",
        ),
        (&["--init", "mu.npy"], "the initial states must be [B, dim]"),
        (
            &["--init", "x0.npy", "--mu", "nan_mu.npy"],
            "--mu nan_mu.npy: mu[1] = NaN is not finite",
        ),
        (
            &["--init", "x0.npy", "--sigma", "neg_sigma.npy"],
            "--sigma neg_sigma.npy: sigma[1] = -1 must be > 0",
        ),
        (
            &["--init", "x0.npy", "--sigma", "0"],
            "--sigma 0: sigma[0] = 0 must be > 0",
        ),
        // Beyond 2^57 the float32 square of an ordinary deviation overflows; 1e38 would also
        // make 1/sigma^2 underflow to 0. Both are --sigma's fault, not --step-size's.
        (
            &["--init", "x0.npy", "--sigma", "1e20"],
            "--sigma 1e20: sigma[0] = 1e20 is outside",
        ),
        (
            &["--init", "x0.npy", "--sigma", "1e38"],
            "--sigma 1e38: sigma[0] = 1e38 is outside",
        ),
        (
            &["--init", "x_nan.npy"],
            "the initial states in x_nan.npy: x[1, 1] = NaN is not finite",
        ),
        (
            &["--init", "x_inf.npy"],
            "the initial states in x_inf.npy: x[2, 3] = inf is not finite",
        ),
        (
            &["--init", "x_far.npy"],
            "the initial states in x_far.npy: chain 5 is too far from mu",
        ),
        (
            &[
                "--batch",
                "2",
                "--dim",
                "2",
                "--init-dist",
                "zeros",
                "--mu",
                "1e19",
                "--sigma",
                "1e-3",
            ],
            "the initial states --init-dist zeros: chain 0 is too far from mu",
        ),
        (
            &["--init", "x0.npy", "--steps", "0"],
            "--steps must be at least 1",
        ),
        (
            &["--init", "x0.npy", "--superchain-size", "3"],
            "--superchain-size 3: the batch of 8 chains must be a multiple of 3",
        ),
        (
            &["--init", "x0.npy", "--superchain-size", "0"],
            "--superchain-size must be at least 1",
        ),
        (
            &["--init", "x0.npy", "--thin", "9"],
            "--thin 9 is larger than --steps 5",
        ),
        (
            &["--init", "x0.npy", "--step-size=-1"],
            "--step-size: step size -1 must be",
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
            "the uniforms must have shape [8]",
        ),
        (
            &[
                "--init",
                "x0.npy",
                "--noise",
                "noise.npy",
                "--uniform",
                "u_one.npy",
            ],
            "uniform[3] = 1 is outside [0, 1)",
        ),
    ];
    for (args, message) in cases {
        refused(&dir, args, 1, message)?;
    }
    // Usage errors, found by the option parser: exit 2.
    let usage: &[(&[&str], &str)] = &[
        (
            &[
                "--batch",
                "8",
                "--dim",
                "4",
                "--noise",
                "noise.npy",
                "--uniform",
                "u.npy",
            ],
            "'--batch <BATCH>' cannot be used with '--noise <NOISE>'",
        ),
        (
            &["--dim", "4", "--noise", "noise.npy", "--uniform", "u.npy"],
            "required arguments were not provided:\n  --init",
        ),
        (&["--resume", "a", "--seed", "3"], "cannot be used with"),
        (&["--batch", "8"], "--dim"),
    ];
    for (args, message) in usage {
        refused(&dir, args, 2, message)?;
    }
    fs::remove_dir_all(&dir).ok();
    Ok(())
}

/// Sizes beyond the machine fail before anything is allocated, naming the sizes.
fn impossible_sizes() -> Result<(), Failed> {
    let dir = scratch("sizes");
    let f4 =
        |shape: &str| format!("{{'descr': '<f4', 'fortran_order': False, 'shape': {shape}, }}");
    // 64 bytes claiming [0, 2^30]; 128 bytes claiming [2^33, 2^31] (2^64 elements); a short
    // file claiming [2^30, 2^20] (4 PB of float32).
    handmade(&dir.join("wide.npy"), &f4("(0, 1073741824)"), &[]);
    handmade(
        &dir.join("huge.npy"),
        &f4("(8589934592, 2147483648)"),
        &[0u8; 64],
    );
    handmade(
        &dir.join("big.npy"),
        &f4("(1073741824, 1048576)"),
        &[0u8; 64],
    );
    let cases: &[(&[&str], &str)] = &[
        (
            &["--batch", "1000000000", "--dim", "1000000000"],
            "1000000000 chains x 1000000000 dims: needs 44.0 EB of host memory",
        ),
        (
            &["--batch", "0", "--dim", "4294967295"],
            "--batch 0 --dim 4294967295: the batch is empty",
        ),
        (
            &["--init", "wide.npy"],
            "wide.npy cannot be a batch of chains: the batch is empty",
        ),
        (
            &["--init", "huge.npy"],
            "huge.npy claims shape [8589934592, 2147483648], more elements than any file can hold",
        ),
        (&["--init", "big.npy"], "big.npy is truncated"),
        // 10^12 saved states of 4 x 4 floats: 64 TB of trace.
        (
            &[
                "--batch",
                "4",
                "--dim",
                "4",
                "--steps",
                "1000000000000",
                "--thin",
                "1",
                "--out",
                "o",
            ],
            "of disk space in .",
        ),
    ];
    for (args, message) in cases {
        let mut all = args.to_vec();
        if !all.contains(&"--out") {
            all.extend_from_slice(&["--out", "out"]);
        }
        refused(&dir, &all, 1, message)?;
    }
    fs::remove_dir_all(&dir).ok();
    Ok(())
}

/// Output directories that must not be written, or replaced: each refused before the run.
fn dangerous_outputs() -> Result<(), Failed> {
    let dir = scratch("outputs");
    problem(&dir, 8, 4);
    fs::create_dir(dir.join("data"))?;
    fs::copy(dir.join("x0.npy"), dir.join("data/x0.npy"))?;
    fs::copy(dir.join("mu.npy"), dir.join("data/mu.npy"))?;
    fs::create_dir(dir.join("work"))?;
    fs::write(dir.join("work/thesis.tex"), "\\documentclass{article}")?;
    earlier_run(&dir, "earlier")?;
    earlier_run(&dir, "annotated")?;
    fs::write(dir.join("annotated/notes.txt"), "my notes on this run")?;
    earlier_run(&dir, "nested")?;
    fs::create_dir(dir.join("nested/more"))?;
    fs::write(dir.join("file.txt"), "a file")?;
    std::os::unix::fs::symlink("nowhere", dir.join("dangling"))?;
    std::os::unix::fs::symlink("earlier", dir.join("link"))?;
    fs::create_dir(dir.join("existing"))?;
    fs::write(dir.join("existing/keep.txt"), "old results")?;
    let too_long = "n".repeat(256);
    let here = dir.display().to_string();

    let generated = ["--batch", "3", "--dim", "2"];
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (
            vec![
                "--init",
                "data/x0.npy",
                "--mu",
                "data/mu.npy",
                "--out",
                "data",
                "--force",
            ],
            "--out data holds the input data/x0.npy",
        ),
        (
            vec!["--init", "earlier/x.npy", "--out", "earlier", "--force"],
            "--out earlier holds the input earlier/x.npy",
        ),
        (
            [&generated[..], &["--out", "data", "--force"]].concat(),
            "--force replaces only a directory that host run wrote, and data has no readable summary.json",
        ),
        (
            [&generated[..], &["--out", "earlier/.", "--force"]].concat(),
            "--out earlier/. ends in '.'",
        ),
        (
            [&generated[..], &["--out", &here, "--force"]].concat(),
            "has no readable summary.json",
        ),
        (
            [&generated[..], &["--out", "work", "--force"]].concat(),
            "work has no readable summary.json",
        ),
        (
            [&generated[..], &["--out", "annotated", "--force"]].concat(),
            "annotated holds notes.txt, which is not one of the files the run wrote",
        ),
        (
            [&generated[..], &["--out", "nested", "--force"]].concat(),
            "nested holds more, which is not one of the files the run wrote",
        ),
        (
            [&generated[..], &["--out", "existing"]].concat(),
            "existing already exists (pass --force",
        ),
        (
            [&generated[..], &["--out", "earlier"]].concat(),
            "earlier already exists (pass --force",
        ),
        (
            [&generated[..], &["--out", "file.txt", "--force"]].concat(),
            "--out file.txt exists and is not a directory",
        ),
        (
            [&generated[..], &["--out", "dangling"]].concat(),
            "--out dangling is a symbolic link",
        ),
        (
            [&generated[..], &["--out", "link", "--force"]].concat(),
            "--out link is a symbolic link",
        ),
        (
            [&generated[..], &["--out", "missing/out"]].concat(),
            "the parent directory missing does not exist",
        ),
        (
            [&generated[..], &["--out", &too_long]].concat(),
            "the name is 256 bytes long; this file system allows 255",
        ),
        (
            [&generated[..], &["--out", ".."]].concat(),
            "--out .. ends in '..'",
        ),
    ];
    for (args, message) in &cases {
        refused(&dir, args, 1, message)?;
    }
    fs::remove_dir_all(&dir).ok();
    Ok(())
}

/// `--force` over an earlier run's directory swaps the new results in whole and removes the
/// old files; a long (valid) name works; stale directories beside it are never adopted.
fn outputs_replaced_safely() -> Result<(), Failed> {
    let dir = scratch("replace");
    earlier_run(&dir, "earlier")?;
    // Leftovers of other processes, which a run must neither adopt nor remove.
    for stale in [".fused-mh-staging-old", "fresh.partial-1"] {
        fs::create_dir(dir.join(stale))?;
        fs::write(dir.join(stale).join("stale.npy"), "stale")?;
    }
    let args = [
        "--cpu", "--batch", "3", "--dim", "2", "--steps", "4", "--seed", "7",
    ];
    check_ok(&host(
        &dir,
        &[&args[..], &["--out", "earlier", "--force"]].concat(),
    ))?;
    check_ok(&host(&dir, &[&args[..], &["--out", "fresh"]].concat()))?;
    let long = "l".repeat(245);
    check_ok(&host(&dir, &[&args[..], &["--out", &long]].concat()))?;
    for out in ["earlier", "fresh", &long] {
        let summary: serde_json::Value =
            serde_json::from_str(&fs::read_to_string(dir.join(out).join("summary.json"))?)?;
        let mut listed: Vec<String> = summary["files"]
            .as_array()
            .ok_or("summary.json has no file list")?
            .iter()
            .map(|f| f.as_str().unwrap_or_default().to_string())
            .collect();
        let mut held: Vec<String> = fs::read_dir(dir.join(out))?
            .map(|e| Ok(e?.file_name().to_string_lossy().into_owned()))
            .collect::<std::io::Result<_>>()?;
        listed.sort();
        held.sort();
        if summary["seed"] != 7 || listed != held {
            return Err(format!("{out}: holds {held:?}, summary lists {listed:?}").into());
        }
    }
    for stale in [".fused-mh-staging-old", "fresh.partial-1"] {
        if fs::read_to_string(dir.join(stale).join("stale.npy"))? != "stale" {
            return Err(format!("{stale} was touched").into());
        }
    }
    let staging = fs::read_dir(&dir)?
        .filter_map(|e| e.ok())
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .starts_with(".fused-mh-staging-")
        })
        .count();
    if staging != 1 {
        return Err(format!("{staging} staging directories in the scratch (1 planted)").into());
    }
    fs::remove_dir_all(&dir).ok();
    Ok(())
}

/// Standard output closed early or full, standard error full: never a panic (exit 101), and
/// a finished run's results are complete on disk either way.
fn closed_and_full_streams() -> Result<(), Failed> {
    let dir = scratch("streams");
    let args = |out: &str| {
        [
            "run", "--cpu", "--batch", "5", "--dim", "3", "--steps", "20", "--out",
        ]
        .into_iter()
        .map(String::from)
        .chain([out.to_string()])
        .collect::<Vec<_>>()
    };
    let complete = |out: &str| -> Result<(), Failed> {
        let (shape, x) = load::<f32>(&dir.join(out).join("x.npy"));
        if shape != [5, 3] || x.len() != 15 || !dir.join(out).join("summary.json").exists() {
            return Err(format!("{out}: the results are not complete").into());
        }
        Ok(())
    };
    // `| head -c0`: the reader is gone before the program writes.
    let mut child = Command::new(host_exe())
        .current_dir(&dir)
        .args(args("closed"))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()?;
    drop(child.stdout.take());
    let out = child.wait_with_output()?;
    expect_code(&out, 0, "standard output closed")?;
    complete("closed")?;
    // `> /dev/full`: an error, said on standard error; the results stay.
    let out = Command::new(host_exe())
        .current_dir(&dir)
        .args(args("full"))
        .stdout(fs::File::create("/dev/full")?)
        .output()?;
    let stderr = expect_code(&out, 1, "standard output full")?;
    if !stderr.contains("the results are complete in full: cannot write to standard output") {
        return Err(format!("standard output full: {stderr:?}").into());
    }
    complete("full")?;
    // `2> /dev/full` with a bad option: the error cannot be shown, the exit code still says it.
    let out = Command::new(host_exe())
        .current_dir(&dir)
        .args([
            "run", "--cpu", "--batch", "5", "--dim", "3", "--steps", "0", "--out", "x",
        ])
        .stderr(fs::File::create("/dev/full")?)
        .output()?;
    expect_code(&out, 1, "standard error full")?;
    fs::remove_dir_all(&dir).ok();
    Ok(())
}

/// This file's tests (all on the CPU).
pub fn trials() -> Vec<Trial> {
    vec![
        Trial::test("hostile::bad_inputs", bad_inputs),
        Trial::test("hostile::impossible_sizes", impossible_sizes),
        Trial::test("hostile::dangerous_outputs", dangerous_outputs),
        Trial::test("hostile::outputs_replaced_safely", outputs_replaced_safely),
        Trial::test("hostile::closed_and_full_streams", closed_and_full_streams),
    ]
}
