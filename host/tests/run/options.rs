//! `host run`'s numeric options as a user types them (issue 19's round of hostile input).

use std::fs;

use libtest_mimic::{Failed, Trial};

use super::common::{check_ok, expect_code, host, load, scratch};

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

/// This file's tests (all on the CPU).
pub fn trials() -> Vec<Trial> {
    vec![Trial::test(
        "options::negative_numbers_are_values",
        negative_numbers_are_values,
    )]
}
