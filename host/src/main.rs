//! The fused-mh program: one Metropolis–Hastings step of a batch of chains on the GPU in each
//! mode (random numbers drawn in the kernel; the caller's random numbers), each checked
//! against the CPU reference. With no GPU it says so and runs the CPU reference alone.

use std::time::Instant;

use anyhow::{Context, Result};
use clap::Parser;
use fused_mh::{Error, Gpu, Shape, StepConfig, Target, cpu};
use rand::{Rng, SeedableRng};
use rand_distr::StandardNormal;
use rand_xorshift::XorShiftRng;

/// One fused MH step on the GPU, checked against the CPU reference.
#[derive(Parser, Debug)]
#[command(version, about)]
struct Args {
    /// Number of chains.
    #[arg(long, default_value_t = 4096)]
    batch: usize,
    /// Coordinates per chain.
    #[arg(long, default_value_t = 64)]
    dim: usize,
    /// Proposal scale (default: 2.38 / sqrt(dim)).
    #[arg(long)]
    step_size: Option<f32>,
    /// Seed of the inputs and of the in-kernel random numbers.
    #[arg(long, default_value_t = 42)]
    seed: u64,
    /// CUDA device ordinal.
    #[arg(long, default_value_t = 0)]
    device: usize,
}

/// Acceptance decisions may differ between GPU and CPU only where |log u - log alpha| is below
/// this (the GPU's sin/cos are SFU approximations; see the kernel crate's `math` module).
const DECISION_MARGIN: f32 = 1e-4;

struct Inputs {
    shape: Shape,
    x: Vec<f32>,
    target: Target,
    config: StepConfig,
    noise: Vec<f32>,
    uniform: Vec<f32>,
}

fn inputs(args: &Args) -> Result<Inputs> {
    let shape = Shape::new(args.batch, args.dim)?;
    let mut rng = XorShiftRng::seed_from_u64(args.seed);
    let mu: Vec<f32> = (0..args.dim).map(|_| rng.random_range(-1.0..1.0)).collect();
    let sigma: Vec<f32> = (0..args.dim).map(|_| rng.random_range(0.5..1.5)).collect();
    let x = (0..shape.len())
        .map(|i| mu[i % args.dim] + sigma[i % args.dim] * rng.sample::<f32, _>(StandardNormal))
        .collect();
    let noise = (0..shape.len())
        .map(|_| rng.sample(StandardNormal))
        .collect();
    let uniform = (0..shape.batch())
        .map(|_| rng.random_range(0.0..1.0))
        .collect();
    let step_size = args.step_size.unwrap_or(2.38 / (args.dim as f32).sqrt());
    Ok(Inputs {
        shape,
        x,
        target: Target::new(mu, sigma)?,
        config: StepConfig::new(step_size, args.seed)?,
        noise,
        uniform,
    })
}

/// Compares a GPU step with the CPU's; returns the number of decisions that differ (all within
/// the margin) or an error naming the first real disagreement.
fn check(
    x_gpu: &[f32],
    accepted_gpu: &[bool],
    cpu: &cpu::StepOutput,
    dim: usize,
    step_size: f32,
) -> Result<usize> {
    let mut flipped = 0;
    for (row, (&g, &c)) in accepted_gpu.iter().zip(&cpu.accepted).enumerate() {
        if g != c {
            let gap = (cpu.log_u[row] - cpu.log_alpha[row]).abs();
            anyhow::ensure!(
                gap < DECISION_MARGIN,
                "row {row}: GPU accepted {g}, CPU {c}, |log u - log alpha| = {gap}"
            );
            flipped += 1;
            continue;
        }
        for d in row * dim..(row + 1) * dim {
            let (a, b) = (x_gpu[d], cpu.x_new[d]);
            // 1e-5 relative, with an absolute floor of 5e-6 * step size for values that cancel
            // to near 0 (the GPU's normals are within ~4e-6 of the CPU's).
            let tol = (1e-5 * b.abs()).max(5e-6 * step_size);
            anyhow::ensure!((a - b).abs() <= tol, "x_new[{d}]: GPU {a}, CPU {b}");
        }
    }
    Ok(flipped)
}

fn rate(accepted: &[bool]) -> f64 {
    accepted.iter().filter(|&&a| a).count() as f64 / accepted.len() as f64
}

fn main() -> Result<()> {
    let args = Args::parse();
    let inp = inputs(&args)?;
    let (shape, step_size) = (inp.shape, inp.config.step_size());
    println!(
        "fused-mh: batch {} x dim {}, step size {step_size}, seed {}",
        shape.batch(),
        shape.dim(),
        args.seed
    );

    let t = Instant::now();
    let cpu_rng = cpu::par_step(&inp.x, shape, &inp.target, &inp.config, 0)?;
    let cpu_rng_time = t.elapsed();
    let cpu_noise = cpu::par_step_with_noise(
        &inp.x,
        shape,
        &inp.target,
        step_size,
        &inp.noise,
        &inp.uniform,
    )?;

    let gpu = match Gpu::open(args.device) {
        Ok(gpu) => gpu,
        Err(e @ (Error::NoDriver | Error::NoDevice { .. })) => {
            println!("no GPU: {e}; running the CPU reference alone");
            println!(
                "cpu reference: acceptance {:.4} (in-kernel RNG mode), {:.4} (caller noise); {:.2} ms on {} threads",
                rate(&cpu_rng.accepted),
                rate(&cpu_noise.accepted),
                cpu_rng_time.as_secs_f64() * 1e3,
                rayon::current_num_threads()
            );
            return Ok(());
        }
        Err(e) => return Err(e).context("opening the GPU"),
    };
    println!("gpu: {} (PTX {})", gpu.name(), gpu.ptx_target());

    let target_dev = gpu.upload_target(&inp.target)?;
    let mut chains = gpu.upload_chains(&inp.x, shape)?;
    gpu.step(&mut chains, &target_dev, &inp.config)?;
    let flipped = check(
        &chains.x()?,
        &chains.accepted()?,
        &cpu_rng,
        shape.dim(),
        step_size,
    )
    .context("in-kernel RNG mode")?;
    println!(
        "in-kernel RNG: acceptance {:.4}, matches the CPU reference ({flipped} boundary decisions differ)",
        rate(&chains.accepted()?)
    );

    let mut chains = gpu.upload_chains(&inp.x, shape)?;
    let noise_dev = gpu.upload_noise(&inp.noise, &inp.uniform, shape)?;
    gpu.step_with_noise(&mut chains, &target_dev, step_size, &noise_dev)?;
    let flipped = check(
        &chains.x()?,
        &chains.accepted()?,
        &cpu_noise,
        shape.dim(),
        step_size,
    )
    .context("caller-noise mode")?;
    println!(
        "caller noise:  acceptance {:.4}, matches the CPU reference ({flipped} boundary decisions differ)",
        rate(&chains.accepted()?)
    );
    Ok(())
}
