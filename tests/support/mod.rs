//! What the test files share: nested R-hat and the moments straight from the draws of a
//! trace, two passes in f64, written from the definitions (nested R-hat: Margossian et al.
//! 2024) independently of `fused_mh::diagnostics` and the kernels' running moments (what
//! the streamed figures are checked against), and whether a GPU is there to run the GPU
//! tests on.

use fused_mh::{Gpu, Shape};

pub mod marginals;
pub mod posteriordb;
pub mod problems;
#[allow(dead_code)] // the CPU test files have no GPU trials
pub mod trials;

/// Whether device 0 opens, said on standard error as `LABEL on NAME (PTX TARGET)` or `LABEL
/// ignored: WHY`: without a GPU the GPU tests are reported as ignored.
#[allow(dead_code)] // the CPU test files do not use it
pub fn gpu_present(label: &str) -> bool {
    match Gpu::open(0) {
        Ok(gpu) => {
            eprintln!("{label} on {} (PTX {})", gpu.name(), gpu.ptx_target());
            true
        }
        Err(e) => {
            eprintln!("{label} ignored: {e}");
            false
        }
    }
}

/// Nested R-hat of `chains` chains of `steps` draws each (`draw(step, chain)`), in superchains
/// of `m` consecutive chains.
#[allow(dead_code)] // the GPU step tests use none of these
fn nested_rhat_of(
    draw: impl Fn(usize, usize) -> f64,
    chains: usize,
    m: usize,
    steps: usize,
) -> f64 {
    let k = chains / m;
    let chain_mean = |c: usize| (0..steps).map(|s| draw(s, c)).sum::<f64>() / steps as f64;
    let means: Vec<f64> = (0..chains).map(chain_mean).collect();
    let chain_var = |c: usize| {
        (0..steps)
            .map(|s| (draw(s, c) - means[c]).powi(2))
            .sum::<f64>()
            / (steps - 1) as f64
    };
    let super_means: Vec<f64> = (0..k)
        .map(|s| means[s * m..(s + 1) * m].iter().sum::<f64>() / m as f64)
        .collect();
    let overall = super_means.iter().sum::<f64>() / k as f64;
    let b = super_means
        .iter()
        .map(|x| (x - overall).powi(2))
        .sum::<f64>()
        / (k - 1) as f64;
    let w = (0..k)
        .map(|s| {
            let between = if m > 1 {
                means[s * m..(s + 1) * m]
                    .iter()
                    .map(|x| (x - super_means[s]).powi(2))
                    .sum::<f64>()
                    / (m - 1) as f64
            } else {
                0.0
            };
            between + (s * m..(s + 1) * m).map(chain_var).sum::<f64>() / m as f64
        })
        .sum::<f64>()
        / k as f64;
    (1.0 + b / w).sqrt()
}

/// Per dimension, nested R-hat of the first `steps` states of `trace[steps.., batch, dim]`.
#[allow(dead_code)] // each test file uses one of the two
pub fn nested_rhat_from_trace(trace: &[f32], shape: Shape, m: usize, steps: usize) -> Vec<f64> {
    let (batch, dim) = (shape.batch(), shape.dim());
    (0..dim)
        .map(|d| {
            let draw = |s: usize, c: usize| f64::from(trace[(s * batch + c) * dim + d]);
            nested_rhat_of(draw, batch, m, steps)
        })
        .collect()
}

/// Per dimension, nested R-hat of split chains over the first `draws` (even) states of
/// `trace`: each chain's halves two chains, the first halves of a superchain one superchain
/// and their second halves another.
#[allow(dead_code)] // each test file uses one of the two
pub fn split_nested_rhat_from_trace(
    trace: &[f32],
    shape: Shape,
    m: usize,
    draws: usize,
) -> Vec<f64> {
    let (batch, dim, half) = (shape.batch(), shape.dim(), draws / 2);
    (0..dim)
        .map(|d| {
            // Half-chain `h * batch + c`: half h of chain c.
            let draw = |s: usize, hc: usize| {
                let (h, c) = (hc / batch, hc % batch);
                f64::from(trace[((h * half + s) * batch + c) * dim + d])
            };
            nested_rhat_of(draw, 2 * batch, m, half)
        })
        .collect()
}

/// Two-pass mean and variance (f64) of each chain and coordinate over saved states
/// `[n, batch * dim]`.
#[allow(dead_code)] // the run and diagnostics tests' alone
pub fn two_pass(trace: &[f32], len: usize) -> (Vec<f64>, Vec<f64>) {
    let n = (trace.len() / len) as f64;
    let mut mean = vec![0f64; len];
    for state in trace.chunks(len) {
        for (m, &v) in mean.iter_mut().zip(state) {
            *m += f64::from(v);
        }
    }
    mean.iter_mut().for_each(|m| *m /= n);
    let mut var = vec![0f64; len];
    for state in trace.chunks(len) {
        for ((s, &v), m) in var.iter_mut().zip(state).zip(&mean) {
            *s += (f64::from(v) - m).powi(2);
        }
    }
    var.iter_mut().for_each(|s| *s /= n);
    (mean, var)
}
