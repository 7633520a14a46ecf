//! What every `host run` test needs: scratch directories, `.npy` files in and out, the
//! program itself, a small problem, and snapshots of a directory to prove nothing changed.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use fused_mh::Shape;
use libtest_mimic::Failed;
use npyz::{AutoSerialize, WriterBuilder};

/// A fresh scratch directory for one test.
pub fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("fused-mh-run-{name}-{}", std::process::id()));
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir).expect("scratch dir");
    dir
}

pub fn save<T: AutoSerialize>(path: &Path, shape: &[u64], data: &[T]) {
    let mut w = npyz::WriteOptions::new()
        .default_dtype()
        .shape(shape)
        .writer(fs::File::create(path).expect("create"))
        .begin_nd()
        .expect("header");
    w.extend(data.iter()).expect("data");
    w.finish().expect("finish");
}

pub fn load<T: npyz::Deserialize>(path: &Path) -> (Vec<u64>, Vec<T>) {
    let npy = npyz::NpyFile::new(fs::File::open(path).expect("open output")).expect("npy");
    let shape = npy.shape().to_vec();
    (shape, npy.into_vec().expect("data"))
}

/// The program under test: cargo's build of it, or, where the tests run on another machine
/// (the GPU bundle), the `host` binary beside this test binary.
pub fn host_exe() -> PathBuf {
    let built = PathBuf::from(env!("CARGO_BIN_EXE_host"));
    if built.exists() {
        return built;
    }
    let here = std::env::current_exe().expect("the test binary's path");
    here.with_file_name("host")
}

pub fn host(dir: &Path, args: &[&str]) -> Output {
    Command::new(host_exe())
        .current_dir(dir)
        .arg("run")
        .args(args)
        .output()
        .expect("the host program runs")
}

/// A small problem: mu and sigma not all equal, chains spread around mu, random numbers for one
/// step, all as files in `dir`.
pub struct Problem {
    pub shape: Shape,
    pub x: Vec<f32>,
    pub mu: Vec<f32>,
    pub sigma: Vec<f32>,
    pub noise: Vec<f32>,
    pub uniform: Vec<f32>,
}

pub fn problem(dir: &Path, batch: usize, dim: usize) -> Problem {
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

pub fn check_ok(out: &Output) -> Result<(), Failed> {
    if out.status.success() {
        Ok(())
    } else {
        Err(format!("host run failed: {}", String::from_utf8_lossy(&out.stderr)).into())
    }
}

/// The smallest real benchmark: one 64 x 4 configuration in one mode, two repetitions.
pub const SMALL_BENCHMARK: [&str; 11] = [
    "--sizes",
    "64x4",
    "--mode",
    "rng",
    "--reps",
    "2",
    "--untimed-launches",
    "1",
    "--back-to-back",
    "2",
    "--quick",
];

/// `host` with other arguments than `run` (the benchmark), in `dir`.
pub fn program(dir: &Path, args: &[&str]) -> Output {
    Command::new(host_exe())
        .current_dir(dir)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("the host program runs")
}

/// Every file under `dir` (recursively) with its bytes; a symbolic link as the path it names,
/// a FIFO or device as `<special>`.
pub fn snapshot(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut files = BTreeMap::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for entry in fs::read_dir(&d).expect("readable scratch") {
            let path = entry.expect("entry").path();
            let meta = fs::symlink_metadata(&path).expect("metadata");
            if meta.is_symlink() {
                let target = fs::read_link(&path).expect("link");
                files.insert(path, target.into_os_string().into_encoded_bytes());
            } else if meta.is_dir() {
                files.insert(path.clone(), b"<dir>".to_vec());
                todo.push(path);
            } else if meta.is_file() {
                files.insert(path.clone(), fs::read(&path).expect("readable file"));
            } else {
                // A FIFO or a device: never read (a FIFO with no writer blocks).
                files.insert(path.clone(), b"<special>".to_vec());
            }
        }
    }
    files
}

/// Staging directories or files a run may have left anywhere under `dir`.
pub fn leftovers(dir: &Path) -> Vec<PathBuf> {
    snapshot(dir)
        .into_keys()
        .filter(|p| {
            let name = p.file_name().unwrap_or_default().to_string_lossy();
            name.starts_with(".fused-mh-")
        })
        .collect()
}

/// A `.npy` file with the given header dictionary and `data` bytes, written as NumPy would.
pub fn handmade(path: &Path, dict: &str, data: &[u8]) {
    let mut f = b"\x93NUMPY\x01\x00".to_vec();
    let pad = 64 - (10 + dict.len() + 1) % 64;
    let len = (dict.len() + pad + 1) as u16;
    f.extend_from_slice(&len.to_le_bytes());
    f.extend_from_slice(dict.as_bytes());
    f.extend(std::iter::repeat_n(b' ', pad));
    f.push(b'\n');
    f.extend_from_slice(data);
    fs::write(path, f).expect("write handmade .npy");
}

/// The exit code, the standard error, and a failure that shows both.
pub fn expect_code(out: &Output, code: i32, what: &str) -> Result<String, Failed> {
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    if out.status.code() != Some(code) {
        return Err(format!(
            "{what}: exit {:?} (expected {code}), stderr {stderr:?}",
            out.status.code()
        )
        .into());
    }
    Ok(stderr)
}

/// Whether `stderr` ends in the program's one line of error (`error: ...`), the only one,
/// after any notes: the program's promise for exit code 1 (`host/src/lib.rs`).
pub fn one_error_line(stderr: &str) -> bool {
    let errors = stderr.lines().filter(|l| l.starts_with("error:")).count();
    errors == 1
        && stderr
            .lines()
            .last()
            .is_some_and(|l| l.starts_with("error:"))
}

/// Whether `DIR_A/x.npy` and `DIR_B/x.npy` (under `dir`) hold the same states, bit for bit.
pub fn same_states(dir: &Path, a: &str, b: &str) -> bool {
    let (_, xa) = load::<f32>(&dir.join(a).join("x.npy"));
    let (_, xb) = load::<f32>(&dir.join(b).join("x.npy"));
    xa.len() == xb.len() && xa.iter().zip(&xb).all(|(u, v)| u.to_bits() == v.to_bits())
}

/// Runs `host run --cpu ARGS` (with `--steps 5` unless ARGS set steps or ask for caller noise,
/// and `--out out` unless they name an output)
/// and checks that it is refused cleanly: the exact exit code (1 for an error, 2 for a usage
/// error found by the option parser), a message that names the file or option at fault (for
/// code 1 on one line, the last: `error: ...`, after any notes), every file in `dir` byte for
/// byte as it was, and no staging directory left behind.
pub fn refused(dir: &Path, args: &[&str], code: i32, message: &str) -> Result<(), Failed> {
    let mut all = vec!["--cpu"];
    if !args.contains(&"--steps") && !args.contains(&"--noise") {
        all.extend_from_slice(&["--steps", "5"]);
    }
    all.extend_from_slice(args);
    if !args.contains(&"--out") {
        all.extend_from_slice(&["--out", "out"]);
    }
    let before = snapshot(dir);
    let out = host(dir, &all);
    let stderr = expect_code(&out, code, &format!("{all:?}"))?;
    if !stderr.contains(message) {
        return Err(format!("{all:?}: stderr {stderr:?} does not say {message:?}").into());
    }
    let error_lines = stderr.lines().filter(|l| l.starts_with("error:")).count();
    let last_is_error = stderr
        .lines()
        .last()
        .is_some_and(|l| l.starts_with("error:"));
    if code == 1 && (error_lines != 1 || !last_is_error) {
        return Err(format!("{all:?}: the error is not one last line: {stderr:?}").into());
    }
    let after = snapshot(dir);
    if after != before {
        let changed: Vec<_> = before
            .keys()
            .chain(after.keys())
            .filter(|k| before.get(*k) != after.get(*k))
            .collect();
        return Err(format!("{all:?} changed files: {changed:?}").into());
    }
    let left = leftovers(dir);
    if !left.is_empty() {
        return Err(format!("{all:?} left {left:?}").into());
    }
    Ok(())
}
