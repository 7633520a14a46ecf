//! `host sample --resume DIR`: a continuation draws what the run would have drawn next, to the
//! bit, and refuses what would make it another run (changed data, a changed record, edited
//! states, the options the resumed run fixed).

use std::fs;
use std::path::Path;

use fused_mh::model_run::{ModelRun, Preconditioning};
use libtest_mimic::{Failed, Trial};

use crate::common::{expect_code, load, one_error_line, program, save, scratch, snapshot};

/// A linear regression's data in `dir`: `x.npy` `[200, 2]` (an intercept and a covariate) and
/// `y.npy` `[200]`, from a fixed arithmetic sequence (no random numbers needed).
fn regression(dir: &Path) {
    let rows = 200;
    let covariate = |n: usize| ((n * 7919 % 200) as f32 - 100.0) / 50.0;
    let x: Vec<f32> = (0..rows).flat_map(|n| [1.0, covariate(n)]).collect();
    let noise = |n: usize| ((n * 104729 % 101) as f32 - 50.0) / 100.0;
    let y: Vec<f32> = (0..rows)
        .map(|n| 1.0 + 2.0 * covariate(n) + noise(n))
        .collect();
    save(&dir.join("x.npy"), &[rows as u64, 2], &x);
    save(&dir.join("y.npy"), &[rows as u64], &y);
}

/// `host sample ARGS` in `dir`, on the CPU unless `on_gpu`.
fn sample(dir: &Path, on_gpu: bool, args: &[&str]) -> std::process::Output {
    let mut all = vec!["sample"];
    all.extend_from_slice(args);
    if !on_gpu {
        all.push("--cpu");
    }
    program(dir, &all)
}

/// The new run's options: 64 chains in superchains of 8, 100 warm-up steps, every 2nd kept.
const NEW: [&str; 16] = [
    "--model",
    "linreg",
    "--x",
    "x.npy",
    "--y",
    "y.npy",
    "--sigma-prior",
    "half-normal:2",
    "--chains",
    "64",
    "--superchain-size",
    "8",
    "--warmup",
    "100",
    "--thin",
    "2",
];

/// A run of 40 steps continued by one of 60 gives the draws and the final states of one run of
/// 100 steps, bit for bit (the proposal is frozen after the warm-up, and each step's random
/// numbers depend on its counter alone); the continuation's summary records where it started
/// and stopped, and the run it continued.
fn continuation_equals_one_run(on_gpu: bool) -> Result<(), Failed> {
    let dir = scratch(if on_gpu {
        "sample-resume-gpu"
    } else {
        "sample-resume-cpu"
    });
    regression(&dir);
    let run = |args: &[&str]| {
        let out = sample(&dir, on_gpu, args);
        expect_code(&out, 0, &format!("host sample {args:?}")).map(|_| ())
    };
    run(&[&NEW[..], &["--steps", "40", "--out", "first"]].concat())?;
    run(&[
        "--resume", "first", "--steps", "60", "--thin", "2", "--out", "next",
    ])?;
    run(&[&NEW[..], &["--steps", "100", "--out", "whole"]].concat())?;
    let (first_shape, first) = load::<f32>(&dir.join("first/draws.npy"));
    let (next_shape, next) = load::<f32>(&dir.join("next/draws.npy"));
    let (whole_shape, whole) = load::<f32>(&dir.join("whole/draws.npy"));
    if first_shape != [64, 20, 3] || next_shape != [64, 30, 3] || whole_shape != [64, 50, 3] {
        return Err(format!("shapes {first_shape:?} {next_shape:?} {whole_shape:?}").into());
    }
    let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    for chain in 0..64 {
        let joined = [
            &first[chain * 60..(chain + 1) * 60],
            &next[chain * 90..(chain + 1) * 90],
        ]
        .concat();
        if bits(&joined) != bits(&whole[chain * 150..(chain + 1) * 150]) {
            return Err(format!("chain {chain}: the continued draws differ from one run's").into());
        }
    }
    let (_, states) = load::<f32>(&dir.join("next/states.npy"));
    let (_, whole_states) = load::<f32>(&dir.join("whole/states.npy"));
    if bits(&states) != bits(&whole_states) {
        return Err("the continued final states differ from one run's".into());
    }
    let summary: serde_json::Value =
        serde_json::from_str(&fs::read_to_string(dir.join("next/summary.json"))?)?;
    let want = (140, 200, 0, "first");
    let got = (
        summary["first_step"].as_u64(),
        summary["next_step"].as_u64(),
        summary["warmup"].as_u64(),
        summary["resumed_from"].as_str(),
    );
    if got != (Some(want.0), Some(want.1), Some(want.2), Some(want.3)) {
        return Err(format!("the continuation's summary records {got:?}").into());
    }
    Ok(())
}

/// Each way a continuation could sample another model or replay random numbers is refused
/// with a message naming the flag or file, and leaves every file as it was.
fn continuations_refused() -> Result<(), Failed> {
    let dir = scratch("sample-resume-refused");
    regression(&dir);
    let out = sample(
        &dir,
        false,
        &[&NEW[..], &["--steps", "20", "--out", "first"]].concat(),
    );
    expect_code(&out, 0, "the run to continue")?;
    let refused = |args: &[&str], code: i32, message: &str| -> Result<(), Failed> {
        let before = snapshot(&dir);
        let out = sample(&dir, false, args);
        let stderr = expect_code(&out, code, &format!("{args:?}"))?;
        if !stderr.contains(message) {
            return Err(format!("{args:?}: {stderr:?} does not say {message:?}").into());
        }
        if code == 1 && !one_error_line(&stderr) {
            return Err(format!("{args:?}: the error is not one last line: {stderr:?}").into());
        }
        if snapshot(&dir) != before {
            return Err(format!("{args:?} changed the directory").into());
        }
        Ok(())
    };
    let resume = [
        "--resume", "first", "--steps", "20", "--thin", "2", "--out", "next",
    ];
    // The options the resumed run fixed (clap's usage error, exit 2).
    for option in [["--chains", "32"], ["--seed", "3"], ["--warmup", "50"]] {
        refused(&[&resume[..], &option].concat(), 2, option[0])?;
    }
    refused(
        &[&resume[..], &["--sigma-prior", "flat"]].concat(),
        2,
        "--sigma-prior",
    )?;
    // Other data under a flag, or a flag the model has no file for.
    refused(
        &[&resume[..], &["--x", "y.npy"]].concat(),
        1,
        "--x y.npy: not the data",
    )?;
    refused(&[&resume[..], &["--se", "y.npy"]].concat(), 1, "--se")?;
    // The data changed where the run read it.
    let original = fs::read(dir.join("y.npy"))?;
    save(&dir.join("y.npy"), &[200], &[0.5f32; 200]);
    refused(&resume, 1, "y.npy: not the data")?;
    fs::write(dir.join("y.npy"), &original)?;
    // Edited states, and an edited step counter.
    let states = fs::read(dir.join("first/states.npy"))?;
    let (shape, mut values) = load::<f32>(&dir.join("first/states.npy"));
    values[0] += 1.0;
    save(&dir.join("first/states.npy"), &shape, &values);
    refused(&resume, 1, "states.npy is not the one the run wrote")?;
    fs::write(dir.join("first/states.npy"), &states)?;
    let summary_path = dir.join("first/summary.json");
    let summary = fs::read_to_string(&summary_path)?;
    let edited = summary.replace("\"next_step\": 120", "\"next_step\": 100");
    if edited == summary {
        return Err("the summary does not record next_step 120".into());
    }
    fs::write(&summary_path, edited)?;
    refused(&resume, 1, "replay or skip random numbers")?;
    fs::write(&summary_path, summary)?;
    // A directory that is not a sample run's.
    fs::create_dir(dir.join("empty"))?;
    refused(
        &["--resume", "empty", "--steps", "20", "--out", "next"],
        1,
        "summary.json",
    )?;
    // Intact again: the continuation runs.
    let out = sample(&dir, false, &resume);
    expect_code(&out, 0, "the continuation after the checks").map(|_| ())
}

/// A sample whose draws cannot fit in the machine's memory is refused before it samples,
/// naming the buffers, and leaves every file as it was.
fn oversized_sample_refused() -> Result<(), Failed> {
    let dir = scratch("sample-oversized");
    regression(&dir);
    let before = snapshot(&dir);
    // 64 chains of 3 parameters for 2^32 - 1 kept steps: 3.3 TB of draws, and as much again
    // for their copy by chain.
    let steps = [
        "--steps",
        "4294967295",
        "--warmup",
        "0",
        "--thin",
        "1",
        "--out",
        "big",
    ];
    let out = sample(&dir, false, &[&NEW[..10], &steps[..]].concat());
    let stderr = expect_code(&out, 1, "the oversized sample")?;
    let says = "of host memory (the draws 3.3 TB, the draws by chain 3.3 TB";
    if !stderr.contains(says) || !one_error_line(&stderr) {
        return Err(format!("{stderr:?} does not say {says:?} in one line").into());
    }
    if snapshot(&dir) != before {
        return Err("the refused sample changed the directory".into());
    }
    Ok(())
}

/// The files of a sample take no more disk space than `host sample` checks for before it
/// samples (`host::budget::model_sample_files`): each file's size, as the file system reports
/// it, within its item, and the draws and states at least their arrays' bytes and at most a
/// header more.
fn files_within_their_disk_account() -> Result<(), Failed> {
    let dir = scratch("sample-disk-account");
    regression(&dir);
    let out = sample(
        &dir,
        false,
        &[&NEW[..], &["--steps", "40", "--out", "acct"]].concat(),
    );
    expect_code(&out, 0, "the sample")?;
    // NEW's run: 64 chains, 40 steps of which every 2nd is kept, 3 parameters (two
    // coefficients and sigma). The account reads only these; the seed, the acceptance aimed
    // at and the preconditioning could be anything.
    let run = ModelRun {
        chains: 64,
        warmup: 100,
        steps: 40,
        thin: 2,
        seed: 0,
        target_acceptance: 0.3,
        preconditioning: Preconditioning::Diagonal,
        superchain_size: 8,
    };
    let account = host::budget::model_sample_files(&run, 3);
    for (file, data_bytes) in [
        ("draws.npy", 4 * 64 * 20 * 3),
        ("states.npy", 4 * 64 * 3),
        ("summary.json", 0),
    ] {
        let size = u128::from(fs::metadata(dir.join("acct").join(file))?.len());
        let item = account
            .bytes_of(file)
            .ok_or(format!("the account has no {file}"))?;
        let header = size.checked_sub(data_bytes);
        let npy_ok = data_bytes == 0 || header.is_some_and(|h| h <= host::budget::NPY_HEADER_BYTES);
        if size > item || !npy_ok {
            return Err(
                format!("{file}: {size} bytes, its account {item}, its data {data_bytes}").into(),
            );
        }
    }
    fs::remove_dir_all(&dir).ok();
    Ok(())
}

/// The tests of `host sample --resume`, and of a sample too large to run or to write.
pub fn trials(gpu: bool) -> Vec<Trial> {
    vec![
        Trial::test("sample_continuation_equals_one_run_cpu", || {
            continuation_equals_one_run(false)
        }),
        Trial::test("sample_continuation_equals_one_run_gpu", || {
            continuation_equals_one_run(true)
        })
        .with_ignored_flag(!gpu),
        Trial::test("sample_continuations_refused", continuations_refused),
        Trial::test("sample_oversized_refused", oversized_sample_refused),
        Trial::test(
            "sample_files_within_their_disk_account",
            files_within_their_disk_account,
        ),
    ]
}
