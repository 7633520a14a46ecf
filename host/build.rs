//! Records the git revision the program was built from, for the benchmark's JSON: the GPU
//! machine that runs the program has no git and no checkout.
//!
//! The revision is the commit, `-dirty` when a file the program is built from differs from it
//! ([`BUILT_FROM`]). This script re-runs only when that can change: the commit moves (HEAD, or
//! the branch it names), or one of those files changes; not when git merely touches its index.

use std::path::Path;
use std::process::Command;

/// What the program is built from, relative to the repository root.
const BUILT_FROM: [&str; 7] = [
    "src",
    "kernel",
    "host",
    "build.rs",
    "Cargo.toml",
    "Cargo.lock",
    "rust-toolchain.toml",
];

/// `git args...` run in the repository root: its trimmed output, if it ran and succeeded.
fn git(root: &Path, args: &[&str]) -> Option<String> {
    Command::new("git")
        .current_dir(root)
        .args(args)
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
}

fn main() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let commit = git(&root, &["rev-parse", "--short=12", "HEAD"]);
    let changed = git(
        &root,
        &[&["status", "--porcelain", "--"][..], &BUILT_FROM].concat(),
    );
    let rev = match (commit, changed) {
        (Some(c), Some(s)) if !s.is_empty() => format!("{c}-dirty"),
        (Some(c), Some(_)) => c,
        _ => "unknown".to_string(),
    };
    println!("cargo::rustc-env=FUSED_MH_GIT_REV={rev}");
    for path in BUILT_FROM {
        println!("cargo::rerun-if-changed=../{path}");
    }
    // The commit: HEAD, the branch it names and the packed refs, wherever git keeps them (those
    // that exist: cargo counts a missing file as changed, and would re-run every build).
    let mut refs = vec!["HEAD".to_string(), "packed-refs".to_string()];
    if let Some(branch) = git(&root, &["symbolic-ref", "-q", "HEAD"]) {
        refs.push(branch);
    }
    for name in refs {
        if let Some(path) = git(&root, &["rev-parse", "--git-path", &name]) {
            let path = root.join(path);
            if path.exists() {
                println!("cargo::rerun-if-changed={}", path.display());
            }
        }
    }
}
