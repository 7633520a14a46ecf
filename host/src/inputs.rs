//! Random inputs for the benchmark and its checks: a target, chains drawn from it, caller noise.
//! Never zeros (zeros hide unwritten outputs and can run faster than real data); generated in
//! parallel, one seeded xorshift stream per chunk, so millions of elements take milliseconds.

use anyhow::Result;
use fused_mh::testing::{host_memory, threads};
use fused_mh::{Shape, StepConfig, Target};
use rand::{Rng, SeedableRng};
use rand_distr::StandardNormal;
use rand_xorshift::XorShiftRng;
use rayon::prelude::*;

/// Everything one benchmark configuration needs.
pub struct Inputs {
    pub shape: Shape,
    pub x: Vec<f32>,
    pub target: Target,
    pub config: StepConfig,
    pub noise: Vec<f32>,
    pub uniform: Vec<f32>,
}

const CHUNK: usize = 1 << 16;

/// Fills `out` in parallel with `draw`, chunk `i` from the stream seeded `seed + i`.
fn fill(
    out: &mut [f32],
    seed: u64,
    draw: impl Fn(&mut XorShiftRng, usize) -> f32 + Sync,
) -> Result<()> {
    threads::install(|| {
        out.par_chunks_mut(CHUNK)
            .enumerate()
            .for_each(|(c, chunk)| {
                let mut rng = XorShiftRng::seed_from_u64(seed.wrapping_add(c as u64));
                for (i, v) in chunk.iter_mut().enumerate() {
                    *v = draw(&mut rng, c * CHUNK + i);
                }
            });
    })?;
    Ok(())
}

/// A target with mu in [-1, 1] and sigma in [0.5, 1.5], chains drawn from it, the step size
/// 2.38 / sqrt(dim) scaled to the smallest sigma (a reasonable acceptance rate), and caller
/// noise (standard normals, uniforms on [0, 1)).
pub fn generate(batch: usize, dim: usize, seed: u64, with_noise: bool) -> Result<Inputs> {
    let shape = Shape::new(batch, dim)?;
    let mut rng = XorShiftRng::seed_from_u64(seed);
    let mu: Vec<f32> = (0..dim).map(|_| rng.random_range(-1.0..1.0)).collect();
    let sigma: Vec<f32> = (0..dim).map(|_| rng.random_range(0.5..1.5)).collect();
    let mut x = host_memory::filled("states", shape.len(), 0.0)?;
    fill(&mut x, seed ^ 0x1, |r, i| {
        mu[i % dim] + sigma[i % dim] * r.sample::<f32, _>(StandardNormal)
    })?;
    let (mut noise, mut uniform) = (Vec::new(), Vec::new());
    if with_noise {
        noise = host_memory::filled("noise", shape.len(), 0.0)?;
        fill(&mut noise, seed ^ 0x2, |r, _| r.sample(StandardNormal))?;
        uniform = host_memory::filled("uniforms", batch, 0.0)?;
        fill(&mut uniform, seed ^ 0x3, |r, _| r.random_range(0.0..1.0))?;
    }
    let step_size = 0.5 * 2.38 / (dim as f32).sqrt();
    Ok(Inputs {
        shape,
        x,
        target: Target::new(mu, sigma)?,
        config: StepConfig::new(step_size, seed)?,
        noise,
        uniform,
    })
}
