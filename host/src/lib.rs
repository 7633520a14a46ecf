//! The fused-mh program, as a library: [`main`] is the whole program, called by the `host`
//! binary (`main.rs`) and by the Python package's `fused-mh` command (`fused_mh._native.cli`).
//!
//! - With no subcommand it is the benchmark: every configuration of the suite on the GPU in
//!   both modes, against the copy-bandwidth roofline and the CPU reference, and the fused
//!   K-step rows. With no GPU it says so and runs the CPU reference alone.
//! - `host run` is a sampling job with NumPy files in and out (see `run/mod.rs`).
//! - `host sample` samples a model with data (`sample/mod.rs`).
//! - `host lessons` times the kernel crate's lessons and the production step (`lessons.rs`).
//!
//! Exit codes: 0 success (also when standard output is closed early by its reader: the
//! results are complete); 1 an error, with one line on standard error naming the option or
//! file and the problem; 2 a usage error found by the option parser (clap's convention);
//! 128 + N when stopped by signal N (130 for Ctrl-C, 143 for `kill`), with nothing written;
//! 3 when `host run --until-rhat` did not converge (the outputs are complete).

mod bench;
pub mod budget;
mod console;
mod inputs;
mod leftovers;
mod lessons;
mod npy;
mod outdir;
mod regular_file;
mod report_file;
mod run;
mod sample;
mod signals;

use anyhow::Result;
use clap::{Parser, Subcommand};

/// Fused random-walk Metropolis-Hastings on the GPU, written in Rust.
#[derive(Parser, Debug)]
#[command(
    name = "fused-mh",
    version,
    about,
    args_conflicts_with_subcommands = true
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    #[command(flatten)]
    bench: bench::BenchArgs,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Run chains: initial states, target and noise from .npy files or generated; final
    /// states, statistics and a thinned trace to .npy files.
    Run(Box<run::RunArgs>),
    /// Sample a model with data (linear or logistic regression, the hierarchical normal model,
    /// a dense Gaussian) from .npy files and prior flags: draws with parameter names and a
    /// summary with their diagnostics.
    Sample(Box<sample::SampleArgs>),
    /// The benchmark (also what runs with no subcommand).
    Bench(bench::BenchArgs),
    /// The lessons of the kernel crate and the production step, checked and timed at two sizes
    /// against the copy roofline (the README's table and chart).
    Lessons(lessons::LessonsArgs),
}

/// The program on the command line `args` (the program's name first, as `std::env::args`
/// gives it): its exit code. A usage error, `--help` and `--version` print and exit the process
/// as clap does; a signal exits it with 128 + N (`signals`).
pub fn main(args: impl IntoIterator<Item = std::ffi::OsString>) -> u8 {
    let started = std::time::Instant::now();
    budget::return_freed_buffers_to_the_system();
    let cli = Cli::parse_from(args);
    let success = |r: Result<()>| r.map(|()| 0);
    let result: Result<u8> = match cli.command {
        Some(Command::Run(args)) => run::run(*args),
        Some(Command::Sample(args)) => success(sample::run(*args, started)),
        Some(Command::Bench(args)) => success(bench::run(args)),
        Some(Command::Lessons(args)) => success(lessons::run(args)),
        None => success(bench::run(cli.bench)),
    };
    match result {
        Ok(code) => code,
        // The reader of standard output went away (`| head`): nothing is wrong.
        Err(e) if e.chain().any(|c| c.is::<console::StdoutClosed>()) => 0,
        Err(e) => {
            // The chain of causes on one line, without a backtrace: the messages name the file
            // or option and the problem.
            note!("error: {}", console::one_line(&format!("{e:#}")));
            1
        }
    }
}
