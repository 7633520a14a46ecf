//! What a stopped or killed job leaves, and the modes of what a job writes: SIGINT, SIGTERM
//! and SIGQUIT leave nothing; SIGKILL cannot be caught, so the next job clears a dead job's
//! staging directory (its lock is free), reports complete results it must not remove, and
//! leaves a live job's alone; outputs get the modes of the user's umask, not a temporary
//! file's private ones.

use std::fs::{self, File};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::thread::sleep;
use std::time::{Duration, Instant, SystemTime};

use libtest_mimic::{Failed, Trial};

use crate::common::{
    SMALL_BENCHMARK, check_ok, expect_code, host, host_exe, leftovers, scratch, snapshot,
};

/// A long run (10^8 steps, a trace) started in `dir`, once it has staged its output directory
/// and so is sampling; its standard error is piped.
fn sampling(dir: &Path) -> Result<Child, Failed> {
    let mut child = Command::new(host_exe())
        .current_dir(dir)
        .args([
            "run",
            "--cpu",
            "--batch",
            "64",
            "--dim",
            "64",
            "--steps",
            "100000000",
        ])
        .args(["--thin", "1000", "--out", "out"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()?;
    let start = Instant::now();
    while leftovers(dir).is_empty() {
        if start.elapsed() > Duration::from_secs(30) {
            child.kill().ok();
            return Err("the run never created its staging directory".into());
        }
        sleep(Duration::from_millis(20));
    }
    sleep(Duration::from_millis(200));
    Ok(child)
}

/// Sets the modification time of the directory `path` an hour back (older than the grace a
/// new job has to take its lock).
fn age(path: &Path) -> Result<(), Failed> {
    let hour_ago = SystemTime::now() - Duration::from_secs(3600);
    File::open(path)?.set_modified(hour_ago)?;
    Ok(())
}

/// A run killed by SIGKILL leaves its staging directory; the next run in the same parent
/// removes it and says so. A dead job's directory with a summary.json (complete results whose
/// rename failed) is reported and kept; a directory whose lock is held is left alone, however
/// old.
fn killed_runs_are_cleared() -> Result<(), Failed> {
    let dir = scratch("sigkill");
    let mut child = sampling(&dir)?;
    child.kill()?; // SIGKILL
    child.wait()?;
    let dead = leftovers(&dir);
    if dead.len() != 1 {
        return Err(format!("after SIGKILL: {dead:?}").into());
    }
    let kept = dir.join(".fused-mh-staging-kept");
    fs::create_dir(&kept)?;
    fs::write(kept.join("summary.json"), "{}")?;
    let live = dir.join(".fused-mh-staging-live");
    fs::create_dir(&live)?;
    let lock = File::open(&live)?;
    lock.try_lock()?;
    for d in [&dead[0], &kept, &live] {
        age(d)?;
    }
    let out = host(
        &dir,
        &[
            "--cpu", "--batch", "2", "--dim", "2", "--steps", "2", "--out", "next",
        ],
    );
    check_ok(&out)?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    let dead_name = dead[0].file_name().unwrap_or_default().to_string_lossy();
    if !stderr.contains(&format!("removed {}", dead[0].display())) && !stderr.contains(&*dead_name)
    {
        return Err(format!("the dead run's directory was not reported: {stderr}").into());
    }
    if dead[0].exists() || !kept.join("summary.json").exists() || !live.exists() {
        return Err(format!("after the sweep: {:?}", leftovers(&dir)).into());
    }
    if !stderr.contains("complete results") || stderr.contains("staging-live") {
        return Err(format!("the kept and live directories: {stderr}").into());
    }
    drop(lock);
    fs::remove_dir_all(&dir).ok();
    Ok(())
}

/// Under umask 022 a run's directory is 0755 and its files 0644, and the benchmark's report
/// 0644: what `mkdir` and the shell's `>` make, not 0700 and 0600.
fn outputs_follow_the_umask() -> Result<(), Failed> {
    let dir = scratch("umask");
    let under_umask = |args: &[&str]| {
        Command::new("sh")
            .current_dir(&dir)
            .arg("-c")
            .arg("umask 022 && exec \"$0\" \"$@\"")
            .arg(host_exe())
            .args(args)
            .output()
    };
    let out = under_umask(&[
        "run", "--cpu", "--batch", "2", "--dim", "2", "--steps", "2", "--out", "o",
    ])?;
    expect_code(&out, 0, "host run under umask 022")?;
    let report = [&SMALL_BENCHMARK[..], &["--json", "r.json"]].concat();
    expect_code(&under_umask(&report)?, 0, "the benchmark under umask 022")?;
    let mode = |p: &Path| fs::metadata(p).map(|m| m.permissions().mode() & 0o777);
    let mut wrong = Vec::new();
    for (path, want) in [
        (dir.join("o"), 0o755),
        (dir.join("o/x.npy"), 0o644),
        (dir.join("o/summary.json"), 0o644),
        (dir.join("r.json"), 0o644),
    ] {
        let got = mode(&path)?;
        if got != want {
            wrong.push(format!("{}: {got:o}, expected {want:o}", path.display()));
        }
    }
    if !wrong.is_empty() {
        return Err(wrong.join("; ").into());
    }
    fs::remove_dir_all(&dir).ok();
    Ok(())
}

/// SIGTERM and SIGINT during a run: the shell's exit code for the signal, and nothing left.
fn signals_leave_nothing() -> Result<(), Failed> {
    for (signal, code) in [("TERM", 143), ("INT", 130), ("QUIT", 131)] {
        let dir = scratch(&format!("signal-{signal}"));
        let child = sampling(&dir)?;
        let pid = child.id().to_string();
        check_ok(&Command::new("kill").args(["-s", signal, &pid]).output()?)?;
        let out = child.wait_with_output()?;
        expect_code(&out, code, &format!("SIG{signal}"))?;
        let left = snapshot(&dir);
        if !left.is_empty() {
            return Err(format!("SIG{signal} left {:?}", left.keys().collect::<Vec<_>>()).into());
        }
        fs::remove_dir_all(&dir).ok();
    }
    Ok(())
}

/// This file's tests (all on the CPU).
pub fn trials() -> Vec<Trial> {
    vec![
        Trial::test("leftovers::signals_leave_nothing", signals_leave_nothing),
        Trial::test(
            "leftovers::killed_runs_are_cleared",
            killed_runs_are_cleared,
        ),
        Trial::test(
            "leftovers::outputs_follow_the_umask",
            outputs_follow_the_umask,
        ),
    ]
}
