//! `host run`'s numeric options as a user types them.

use std::fs;

use libtest_mimic::{Failed, Trial};

use crate::common::{
    SMALL_BENCHMARK, check_ok, expect_code, host, leftovers, load, problem, program, refused,
    scratch, snapshot,
};

/// Negative numbers are values of the numeric options (`--mu -1`), not unknown options: the
/// run takes `--mu -1`, and refuses `--sigma -1` and `--step-size -0.5` with their own
/// messages (exit 1), not clap's "unexpected argument" (exit 2).
fn negative_numbers_are_values() -> Result<(), Failed> {
    let dir = scratch("negative");
    let base = ["--cpu", "--batch", "8", "--dim", "2", "--steps", "4"];
    check_ok(&host(
        &dir,
        &[&base[..], &["--mu", "-1", "--out", "o"]].concat(),
    ))?;
    let mu = load::<f32>(&dir.join("o/mu.npy")).1;
    if mu != [-1.0, -1.0] {
        return Err(format!("--mu -1 gave mu {mu:?}").into());
    }
    for (option, value, says) in [
        ("--sigma", "-1", "must be > 0"),
        ("--step-size", "-0.5", "must be a finite number > 0"),
    ] {
        let out = host(&dir, &[&base[..], &[option, value, "--out", "p"]].concat());
        let stderr = expect_code(&out, 1, option)?;
        if !stderr.contains(option) || !stderr.contains(says) {
            return Err(format!("{option} {value}: {stderr}").into());
        }
    }
    fs::remove_dir_all(&dir).ok();
    Ok(())
}

/// Options that the rest of the command would ignore are refused, naming the option and
/// what it needs (each ran to exit 0 with the option dropped before): an option either takes
/// effect or is refused.
fn ignored_options_are_refused() -> Result<(), Failed> {
    let dir = scratch("ignored-options");
    problem(&dir, 8, 2);
    check_ok(&host(
        &dir,
        &[
            "--cpu", "--batch", "8", "--dim", "2", "--steps", "10", "--out", "earlier",
        ],
    ))?;
    let generated: &[&str] = &["--batch", "8", "--dim", "2"];
    let cases: &[(&[&str], &str)] = &[
        (
            &["--init", "x0.npy", "--uniform", "u.npy"],
            "--uniform is caller-noise",
        ),
        (
            &[generated, &["--thin", "2", "--min-draws", "5"]].concat(),
            "--min-draws",
        ),
        (
            &[generated, &["--warmup", "0", "--precondition"]].concat(),
            "--precondition",
        ),
        (
            &[generated, &["--target-accept", "0.5"]].concat(),
            "--target-accept",
        ),
        (&["--resume", "earlier", "--precondition"], "--precondition"),
        (&[generated, &["--device", "1"]].concat(), "--device"),
        (
            &[generated, &["--steps", "10", "--thin", "3"]].concat(),
            "--thin 3 does not divide",
        ),
    ];
    for (args, says) in cases {
        refused(&dir, args, 1, says)?;
    }
    fs::remove_dir_all(&dir).ok();
    Ok(())
}

/// The benchmark's options: sizes named and checked before anything runs, `--json` checked
/// before the benchmark and never left empty or written over a file it did not write.
fn benchmark_options() -> Result<(), Failed> {
    let dir = scratch("bench");
    fs::write(dir.join("notes.json"), "{\"mine\": true}")?;
    let cases: &[(&[&str], i32, &str)] = &[
        (&["--sizes", "0x64"], 2, "invalid value '0x64' for '--sizes"),
        (&["--sizes", "64"], 2, "'--sizes"),
        (
            &["--sizes", "1000000000x1000000000"],
            1,
            "--sizes 1000000000x1000000000: needs",
        ),
        (
            &["--quick", "--json", "missing/r.json"],
            1,
            "--json missing/r.json: cannot create",
        ),
        (
            &["--quick", "--json", "notes.json"],
            1,
            "--json notes.json exists and is not a report",
        ),
    ];
    for (args, code, message) in cases {
        let before = snapshot(&dir);
        let out = program(&dir, args);
        let stderr = expect_code(&out, *code, &format!("{args:?}"))?;
        if !stderr.contains(message) || snapshot(&dir) != before {
            return Err(
                format!("{args:?}: {stderr:?} (expected {message:?}, nothing written)").into(),
            );
        }
    }
    // A small real run writes its report, and may replace its own report.
    for _ in 0..2 {
        let out = program(
            &dir,
            &[&SMALL_BENCHMARK[..], &["--json", "r.json"]].concat(),
        );
        expect_code(&out, 0, "the benchmark with --json")?;
        let report: serde_json::Value =
            serde_json::from_str(&fs::read_to_string(dir.join("r.json"))?)?;
        if report["rows"][0]["batch"] != 64 {
            return Err(format!("r.json: {report}").into());
        }
    }
    if !leftovers(&dir).is_empty()
        || fs::read_to_string(dir.join("notes.json"))? != "{\"mine\": true}"
    {
        return Err("the benchmark left files or touched notes.json".into());
    }
    fs::remove_dir_all(&dir).ok();
    Ok(())
}

/// This file's tests (all on the CPU).
pub fn trials() -> Vec<Trial> {
    vec![
        Trial::test(
            "options::negative_numbers_are_values",
            negative_numbers_are_values,
        ),
        Trial::test(
            "options::ignored_options_are_refused",
            ignored_options_are_refused,
        ),
        Trial::test("options::benchmark_options", benchmark_options),
    ]
}
