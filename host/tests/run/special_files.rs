//! `host run` on paths that are not what they seem: named pipes and devices given as inputs,
//! `.npy` headers built to make a parser take forever, output names with a trailing slash or
//! `.` components. Each is refused at once, naming the path, with nothing changed.

use std::fs;
use std::os::unix::fs::symlink;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use libtest_mimic::{Failed, Trial};

use crate::common::{check_ok, expect_code, handmade, host, host_exe, problem, refused, scratch};

/// `host run --cpu ARGS` in `dir` with standard input from `stdin`, killed if it has not
/// ended within 20 s (a blocked `open` must fail the test, not hang it).
fn run_bounded(dir: &Path, args: &[&str], stdin: Stdio) -> Result<std::process::Output, Failed> {
    let mut child = Command::new(host_exe())
        .current_dir(dir)
        .args(["run", "--cpu"])
        .args(args)
        .stdin(stdin)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()?;
    let start = Instant::now();
    while child.try_wait()?.is_none() {
        if start.elapsed() > Duration::from_secs(20) {
            child.kill().ok();
            return Err(format!("{args:?} still running after 20 s").into());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok(child.wait_with_output()?)
}

/// A FIFO with no writer, and a pipe as `/dev/stdin`, are refused before they are opened for
/// reading (no block, no "Illegal seek"); so are a directory and a device.
fn special_inputs_are_refused() -> Result<(), Failed> {
    let dir = scratch("special-inputs");
    problem(&dir, 4, 2);
    let fifo = dir.join("fifo.npy");
    check_ok(&Command::new("mkfifo").arg(&fifo).output()?)?;
    let out = run_bounded(
        &dir,
        &["--init", "fifo.npy", "--steps", "1", "--out", "o"],
        Stdio::null(),
    )?;
    let stderr = expect_code(&out, 1, "--init fifo.npy")?;
    if !stderr.contains("fifo.npy") || !stderr.contains("named pipe") {
        return Err(format!("--init fifo.npy: {stderr}").into());
    }
    let out = run_bounded(
        &dir,
        &["--init", "/dev/stdin", "--steps", "1", "--out", "o"],
        Stdio::piped(),
    )?;
    let stderr = expect_code(&out, 1, "--init /dev/stdin (a pipe)")?;
    if !stderr.contains("/dev/stdin") || !stderr.contains("named pipe") {
        return Err(format!("--init /dev/stdin: {stderr}").into());
    }
    fs::create_dir(dir.join("d.npy"))?;
    refused(&dir, &["--init", "d.npy"], 1, "d.npy: it is a directory")?;
    refused(
        &dir,
        &["--mu", "/dev/zero", "--init", "x0.npy"],
        1,
        "character device",
    )?;
    fs::remove_dir_all(&dir).ok();
    Ok(())
}

/// A structured dtype nested 12 levels deep (over 60 s of parsing before) and a header of 20
/// bare `[` are refused in well under a second; a header longer than NumPy's limit too.
fn hostile_headers_are_refused_at_once() -> Result<(), Failed> {
    let dir = scratch("deep-headers");
    let mut descr = "'<f4'".to_string();
    for level in 0..12 {
        descr = format!("[('f{level}', {descr})]");
    }
    handmade(
        &dir.join("nested.npy"),
        &format!("{{'descr': {descr}, 'fortran_order': False, 'shape': (1, 1), }}"),
        &[0u8; 4],
    );
    handmade(
        &dir.join("brackets.npy"),
        &format!("{{'shape': {}", "[".repeat(20)),
        &[],
    );
    handmade(
        &dir.join("long.npy"),
        &format!(
            "{{'descr': '<f4', 'pad': '{}', 'shape': (1, 1), }}",
            "x".repeat(20_000)
        ),
        &[0u8; 4],
    );
    // A tuple left open: the header parser's message, which draws the header and a caret over
    // several lines, reaches standard error as one line (`refused` checks it).
    handmade(
        &dir.join("open.npy"),
        "{'descr': '<f4', 'fortran_order': False, 'shape': (1,1, }",
        &[0u8; 4],
    );
    for (file, says) in [
        (
            "open.npy",
            "syntax error at column 57 of the header: expected",
        ),
        ("nested.npy", "brackets deep"),
        ("brackets.npy", "brackets deep"),
        ("long.npy", "NumPy's own limit"),
    ] {
        let start = Instant::now();
        refused(&dir, &["--init", file], 1, says)?;
        // The whole program, in a debug build on a loaded machine: seconds at most; the
        // nested header alone took over a minute to parse before it was refused.
        if start.elapsed() > Duration::from_secs(10) {
            return Err(format!("{file}: refused after {:?}", start.elapsed()).into());
        }
    }
    fs::remove_dir_all(&dir).ok();
    Ok(())
}

/// `--out link/` and `--out dangling/` are the links themselves (refused before the run, not
/// after it with the results stranded); `--out a/./b` is shown as `a/b`.
fn output_names_are_normalized() -> Result<(), Failed> {
    let dir = scratch("out-names");
    check_ok(&host(
        &dir,
        &[
            "--cpu", "--batch", "2", "--dim", "2", "--steps", "2", "--out", "real",
        ],
    ))?;
    symlink("real", dir.join("link"))?;
    symlink("nowhere", dir.join("dangling"))?;
    for out in ["link/", "link//", "dangling/", "./dangling/."] {
        let says = if out.ends_with('.') {
            "ends in '.'"
        } else {
            "is a symbolic link"
        };
        refused(
            &dir,
            &["--batch", "2", "--dim", "2", "--out", out, "--force"],
            1,
            says,
        )?;
    }
    let out = host(
        &dir,
        &[
            "--cpu",
            "--batch",
            "2",
            "--dim",
            "2",
            "--steps",
            "2",
            "--out",
            "missing/./o",
        ],
    );
    let stderr = expect_code(&out, 1, "--out missing/./o")?;
    if stderr.contains("/./") || !stderr.contains("--out missing/o") {
        return Err(format!("--out missing/./o: {stderr}").into());
    }
    check_ok(&host(
        &dir,
        &[
            "--cpu", "--batch", "2", "--dim", "2", "--steps", "2", "--out", "./real//", "--force",
        ],
    ))?;
    fs::remove_dir_all(&dir).ok();
    Ok(())
}

/// This file's tests (all on the CPU).
pub fn trials() -> Vec<Trial> {
    vec![
        Trial::test(
            "special_files::special_inputs_are_refused",
            special_inputs_are_refused,
        ),
        Trial::test(
            "special_files::hostile_headers_are_refused_at_once",
            hostile_headers_are_refused_at_once,
        ),
        Trial::test(
            "special_files::output_names_are_normalized",
            output_names_are_normalized,
        ),
    ]
}
