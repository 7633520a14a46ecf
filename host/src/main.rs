//! The fused-mh program. With no subcommand it is the benchmark: every configuration of the
//! suite on the GPU in both modes, against the copy-bandwidth roofline and the CPU reference.
//! With no GPU it says so and runs the CPU reference alone.

mod bench;
mod inputs;

use anyhow::Result;
use clap::Parser;

/// Fused random-walk Metropolis-Hastings on the GPU, written in Rust.
#[derive(Parser, Debug)]
#[command(version, about)]
struct Cli {
    #[command(flatten)]
    bench: bench::BenchArgs,
}

fn main() -> Result<()> {
    let cli = Cli::parse();
    bench::run(cli.bench)
}
