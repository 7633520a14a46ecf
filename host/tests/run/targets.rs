//! `host run --target`: a target other than the Gaussian end to end (its parameter files, its
//! summary, a resume that continues its stream), and its options checked by name.

use std::fs;

use libtest_mimic::{Failed, Trial};

use crate::common::{check_ok, host, load, refused, same_states, save, scratch};

/// A Student-t run writes `df.npy` beside `mu.npy` and `sigma.npy` and names its target in
/// summary.json; `--resume` takes the target from there, and 20 steps then 10 more are the 30
/// steps of one run, bit for bit.
fn student_t_runs_and_resumes() -> Result<(), Failed> {
    let dir = scratch("student-t");
    let base = [
        "--cpu",
        "--target",
        "student-t",
        "--df",
        "5",
        "--batch",
        "64",
        "--dim",
        "3",
    ];
    check_ok(&host(
        &dir,
        &[&base[..], &["--steps", "20", "--out", "a"]].concat(),
    ))?;
    let df = load::<f32>(&dir.join("a/df.npy")).1;
    if df != [5.0; 3] {
        return Err(format!("df.npy holds {df:?}").into());
    }
    let summary: serde_json::Value =
        serde_json::from_slice(&fs::read(dir.join("a/summary.json"))?)?;
    if summary["target"] != "student-t" || summary["other_params"]["df"] != "5" {
        return Err(format!(
            "summary: target {} {}",
            summary["target"], summary["other_params"]
        )
        .into());
    }
    check_ok(&host(
        &dir,
        &["--cpu", "--resume", "a", "--steps", "10", "--out", "b"],
    ))?;
    check_ok(&host(
        &dir,
        &[&base[..], &["--steps", "30", "--out", "c"]].concat(),
    ))?;
    if !same_states(&dir, "b", "c") {
        return Err("20 steps and a resume of 10 are not the 30 steps of one run".into());
    }
    fs::remove_dir_all(&dir).ok();
    Ok(())
}

/// A target's options are refused by name: a missing parameter, one the target does not take,
/// a value it cannot use, a file of the wrong dimension, an unknown target.
fn target_options_are_checked() -> Result<(), Failed> {
    let dir = scratch("target-options");
    save(&dir.join("df4.npy"), &[4], &[3.0f32; 4]);
    let shape = ["--batch", "4", "--dim", "2"];
    let with = |extra: &[&'static str]| [&shape[..], extra].concat();
    refused(
        &dir,
        &with(&["--target", "student-t"]),
        1,
        "--target student-t needs --df",
    )?;
    refused(
        &dir,
        &with(&["--df", "3"]),
        1,
        "--df is not a parameter of --target gaussian",
    )?;
    let zero = with(&["--target", "student-t", "--df", "0"]);
    refused(&dir, &zero, 1, "--df 0: df[0] = 0 must be > 0")?;
    let file = with(&["--target", "student-t", "--df", "df4.npy"]);
    refused(&dir, &file, 1, "df4.npy gives dim 4")?;
    refused(&dir, &with(&["--target", "cauchy"]), 2, "cauchy")?;
    fs::remove_dir_all(&dir).ok();
    Ok(())
}

pub fn trials() -> Vec<Trial> {
    vec![
        Trial::test("student_t_runs_and_resumes", student_t_runs_and_resumes),
        Trial::test("target_options_are_checked", target_options_are_checked),
    ]
}
