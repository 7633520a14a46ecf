//! `--resume DIR` checks the run it continues against its summary.json: the files'
//! shapes, the digests of the files it reads, the stream position, the step size and scales;
//! each refusal names `--resume`, the directory and the file. A directory whose name is not
//! UTF-8 resumes like any other.

use std::ffi::OsStr;
use std::fs;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use libtest_mimic::{Failed, Trial};

use crate::common::{check_ok, host, refused, save, scratch};

/// An 8-chain run of 10 steps in `dir/name` (warm-up 20 steps, preconditioned: scales).
fn earlier(dir: &Path, name: &str) -> Result<(), Failed> {
    check_ok(&host(
        dir,
        &[
            "--cpu",
            "--batch",
            "8",
            "--dim",
            "2",
            "--steps",
            "10",
            "--warmup",
            "20",
            "--precondition",
            "--out",
            name,
        ],
    ))
}

/// Rewrites `dir/summary.json` through `edit`.
fn edit_summary(dir: &Path, edit: impl Fn(&mut serde_json::Value)) -> Result<(), Failed> {
    let path = dir.join("summary.json");
    let mut summary: serde_json::Value = serde_json::from_str(&fs::read_to_string(&path)?)?;
    edit(&mut summary);
    fs::write(&path, serde_json::to_string_pretty(&summary)?)?;
    Ok(())
}

fn resume_checks_the_run() -> Result<(), Failed> {
    let dir = scratch("resume-checks");
    let resume = |name: &'static str| ["--resume", name, "--steps", "4"];
    // Another run's 16 chains in place of the 8 the summary describes.
    earlier(&dir, "wider")?;
    save(&dir.join("wider/x.npy"), &[16, 2], &[0.5f32; 32]);
    refused(
        &dir,
        &resume("wider"),
        1,
        "x.npy has shape [16, 2], but summary.json",
    )?;
    // The same shape, other values.
    earlier(&dir, "edited")?;
    save(&dir.join("edited/x.npy"), &[8, 2], &[0.5f32; 16]);
    refused(
        &dir,
        &resume("edited"),
        1,
        "edited: x.npy has changed since the run wrote it",
    )?;
    // The stream position moved back to 0 after 30 steps drawn.
    earlier(&dir, "rewound")?;
    edit_summary(&dir.join("rewound"), |s| s["next_step"] = 0.into())?;
    refused(
        &dir,
        &resume("rewound"),
        1,
        "says next_step 0, but the run drew",
    )?;
    // A step size of 0, and scales of the wrong length: the summary is named, not options.
    earlier(&dir, "stepless")?;
    edit_summary(&dir.join("stepless"), |s| s["step_size"] = 0.into())?;
    refused(
        &dir,
        &resume("stepless"),
        1,
        "stepless: the step size in its summary.json",
    )?;
    earlier(&dir, "scales")?;
    edit_summary(&dir.join("scales"), |s| {
        s["scales"] = vec![1.0, 1.0, 1.0].into()
    })?;
    refused(
        &dir,
        &resume("scales"),
        1,
        "summary.json has 3 scales for 2 dimensions",
    )?;
    // A summary without digests (an older version's): refused, with the way forward.
    earlier(&dir, "older")?;
    edit_summary(&dir.join("older"), |s| {
        s.as_object_mut().map(|o| o.remove("digests"));
    })?;
    refused(&dir, &resume("older"), 1, "records no digest of x.npy")?;
    fs::remove_dir_all(&dir).ok();
    Ok(())
}

/// A run written to, and resumed from, a directory named by bytes that are not UTF-8.
fn non_utf8_directories_resume() -> Result<(), Failed> {
    let dir = scratch("non-utf8");
    let name = OsStr::from_bytes(b"run\xff");
    let run = |args: &[&OsStr]| {
        std::process::Command::new(crate::common::host_exe())
            .current_dir(&dir)
            .arg("run")
            .args(args)
            .output()
    };
    let first: Vec<&OsStr> = [
        "--cpu", "--batch", "4", "--dim", "2", "--steps", "4", "--out",
    ]
    .iter()
    .map(OsStr::new)
    .chain([name])
    .collect();
    check_ok(&run(&first)?)?;
    let again: Vec<&OsStr> = ["--cpu", "--steps", "4", "--out", "next", "--resume"]
        .iter()
        .map(OsStr::new)
        .chain([name])
        .collect();
    check_ok(&run(&again)?)?;
    fs::remove_dir_all(&dir).ok();
    Ok(())
}

/// This file's tests (all on the CPU).
pub fn trials() -> Vec<Trial> {
    vec![
        Trial::test(
            "resume_checks::resume_checks_the_run",
            resume_checks_the_run,
        ),
        Trial::test(
            "resume_checks::non_utf8_directories_resume",
            non_utf8_directories_resume,
        ),
    ]
}
