//! `host run` when memory is short: under an address-space limit every run either completes
//! or exits 1 naming the memory it could not get, and leaves nothing behind (issue 19).

use std::path::Path;
use std::process::{Command, Output};

use libtest_mimic::{Failed, Trial};

use crate::common::{host_exe, leftovers, scratch};

/// `host run ARGS` in `dir` under `ulimit -v kib` (the shell sets the limit, then becomes the
/// program).
fn host_limited(dir: &Path, kib: u64, args: &[&str]) -> Output {
    Command::new("sh")
        .current_dir(dir)
        .arg("-c")
        .arg(format!("ulimit -v {kib} && exec \"$0\" run \"$@\""))
        .arg(host_exe())
        .args(args)
        .output()
        .expect("sh runs")
}

/// Limits from 40 MB up in steps of 20 MB, until a run completes: each run below that exits 1
/// with a message about memory (never an abort, 134, or a panic, 101), and no run leaves a
/// staging directory or a partial output. At least one limit must fail and one succeed, so
/// both paths are exercised.
fn short_memory_ends_cleanly() -> Result<(), Failed> {
    let dir = scratch("memory-limit");
    let plans: [&[&str]; 2] = [
        &[
            "--batch",
            "2000000",
            "--dim",
            "1",
            "--steps",
            "1",
            "--init-dist",
            "zeros",
        ],
        &[
            "--batch",
            "500000",
            "--dim",
            "4",
            "--steps",
            "4",
            "--burn-in",
            "1",
            "--thin",
            "2",
        ],
    ];
    for plan in plans {
        let mut failed = 0;
        let mut completed = false;
        for kib in (40_000..1_500_000).step_by(20_000) {
            let args = [&["--cpu"][..], plan, &["--out", "o"]].concat();
            let out = host_limited(&dir, kib, &args);
            let stderr = String::from_utf8_lossy(&out.stderr);
            let left = leftovers(&dir);
            if !left.is_empty() {
                return Err(format!("{plan:?} under {kib} KiB left {left:?}").into());
            }
            match out.status.code() {
                Some(0) => {
                    completed = true;
                    break;
                }
                Some(1)
                    if stderr.contains("not enough host memory")
                        || stderr.contains("cannot start the CPU worker threads")
                        || stderr.contains("needs ") =>
                {
                    if dir.join("o").exists() {
                        return Err(format!("{plan:?} under {kib} KiB left an output").into());
                    }
                    failed += 1;
                }
                code => {
                    return Err(format!("{plan:?} under {kib} KiB: exit {code:?}, {stderr}").into());
                }
            }
        }
        if failed == 0 || !completed {
            return Err(format!("{plan:?}: {failed} failures, completed {completed}").into());
        }
        std::fs::remove_dir_all(dir.join("o"))?;
    }
    std::fs::remove_dir_all(&dir).ok();
    Ok(())
}

/// This file's tests (all on the CPU).
pub fn trials() -> Vec<Trial> {
    vec![Trial::test(
        "memory::short_memory_ends_cleanly",
        short_memory_ends_cleanly,
    )]
}
