//! Sampling a model with data ([`fused_mh_kernel::model`]) on the CPU: random-walk
//! Metropolis–Hastings over many independent chains, with a warm-up that adapts a dense
//! proposal from the pooled chains.
//!
//! Each step of each chain proposes `p = x + s L eps` (`eps` the step's standard normals for
//! that chain, drawn by the counter scheme of [`fused_mh_kernel::rng`]: step `t`, row = chain),
//! and accepts when `-2 log alpha` is below the chain's threshold `-2 log u`, as the GPU's
//! steps do. The warm-up runs in windows of [`WINDOW`] steps; after each window the step size
//! `s` moves toward the target acceptance ([`StepSizeAdaptation`]) and `L` becomes the
//! Cholesky factor of a covariance of the chains' states over the window's second half
//! ([`DenseAdaptation`]). In the warm-up's first half it is the within-chain covariance: while
//! the chains travel from their starts, the spread between them is far wider than the
//! posterior, and a proposal shaped by it is rejected so often that the chains stop
//! travelling (measured on posteriordb's earnings regression: acceptance 3 % and the spread
//! shrinking by 15 % a window). In the second half, the chains having met, it is the
//! covariance of all states: with thousands of chains precise after one window, where the
//! within-chain covariance of short windows shrinks along the directions a random walk is slow
//! in, and would keep them slow. Both are frozen for the sampling steps, which are then a plain random-walk sampler with
//! a fixed proposal.
//!
//! Chains start in superchains: the chains of one superchain from one point, the superchains
//! from independent standard normals per parameter (unconstrained), so that nested R-hat can
//! see superchains that have not met.

use fused_mh_kernel::mh;
use fused_mh_kernel::model::{Model, propose_dense};
use fused_mh_kernel::philox::Key;
use fused_mh_kernel::rng::{self, StepDraws};
use rayon::prelude::*;

use crate::adapt::{DenseAdaptation, StepSizeAdaptation};
use crate::error::{Error, Result};
use crate::{host_memory, threads};

/// Steps per warm-up window (see the module documentation).
pub const WINDOW: u32 = 50;

/// The largest state a model run takes: the proposal's factor is `[dim, dim]`.
pub const MAX_MODEL_DIM: usize = 256;

/// What a model run does.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ModelRun {
    /// Independent chains.
    pub chains: usize,
    /// Warm-up steps (adapting, not kept), a multiple of [`WINDOW`].
    pub warmup: u32,
    /// Sampling steps after the warm-up.
    pub steps: u32,
    /// Keep every `thin`-th sampling step's states (at least 1).
    pub thin: u32,
    /// The Philox seed.
    pub seed: u64,
    /// The acceptance rate the warm-up aims at.
    pub target_acceptance: f64,
    /// The proposal's shape the warm-up adapts.
    pub preconditioning: Preconditioning,
    /// Chains per superchain: the chains `k M .. (k + 1) M` start from one point, the
    /// superchains from independent ones, for nested R-hat (`crate::diagnostics`), which
    /// judges many short chains by their superchains' means.
    pub superchain_size: usize,
}

/// The shape of the proposal `x + s L eps` the warm-up adapts `L` to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Preconditioning {
    /// `L = I`: one step size for every parameter.
    None,
    /// `L` diagonal: each parameter's standard deviation.
    Diagonal,
    /// `L` the Cholesky factor of the covariance.
    Dense,
}

/// A model run's results.
#[derive(Clone, Debug, PartialEq)]
pub struct ModelSample {
    /// Parameters per state.
    pub dim: usize,
    /// `[kept, chains, dim]`: the kept states on the parameters' own scale.
    pub draws: Vec<f32>,
    /// The kept steps.
    pub kept: usize,
    /// The fraction of sampling steps accepted, over all chains.
    pub acceptance: f64,
    /// The frozen step size.
    pub step_size: f32,
    /// The frozen proposal factor `L`, `[dim, dim]` row-major, lower triangular.
    pub factor: Vec<f32>,
}

impl ModelRun {
    fn check(&self, dim: usize) -> Result<()> {
        let refuse = |why: String| Err(Error::InvalidRun(why));
        if self.chains < 2 || self.chains > u32::MAX as usize {
            return refuse(format!("chains {} is outside [2, 2^32)", self.chains));
        }
        if !self.warmup.is_multiple_of(WINDOW) {
            return refuse(format!(
                "warm-up {} is not a multiple of {WINDOW}",
                self.warmup
            ));
        }
        if self.thin == 0 || self.steps < self.thin {
            return refuse(format!(
                "thin {} keeps nothing of {} steps",
                self.thin, self.steps
            ));
        }
        if !(self.target_acceptance > 0.0 && self.target_acceptance < 1.0) {
            return refuse(format!(
                "target acceptance {} is outside (0, 1)",
                self.target_acceptance
            ));
        }
        if self.superchain_size == 0 || !self.chains.is_multiple_of(self.superchain_size) {
            return refuse(format!(
                "superchains of {} do not divide {} chains",
                self.superchain_size, self.chains
            ));
        }
        if dim == 0 || dim > MAX_MODEL_DIM {
            return refuse(format!(
                "a state of {dim} parameters is outside [1, {MAX_MODEL_DIM}]"
            ));
        }
        Ok(())
    }
}

/// Runs `run.chains` chains of `model` (see the module documentation).
pub fn sample_model<M: Model + Sync>(model: &M, run: &ModelRun) -> Result<ModelSample> {
    let dim = model.dim();
    run.check(dim)?;
    let kept = (run.steps / run.thin) as usize;
    let states_len = run
        .chains
        .checked_mul(dim)
        .and_then(|n| n.checked_mul(kept.max(1)))
        .ok_or_else(|| Error::InvalidRun("the kept draws overflow memory".into()))?;
    let mut draws = host_memory::reserved("model draws", states_len)?;
    let key = rng::key(run.seed);
    // Starts: standard normals at a step the run never reaches.
    let start = StepDraws::new(key, u64::MAX);
    let mut x = host_memory::collected(
        "model states",
        (0..run.chains * dim).map(|e| {
            let (superchain, d) = (e / dim / run.superchain_size, e % dim);
            start.normal_quad(superchain as u32, (d / 4) as u32)[d % 4]
        }),
    )?;
    let mut factor = identity(dim);
    let mut step_size = StepSizeAdaptation::new(2.38 / (dim as f32).sqrt(), run.target_acceptance);
    let mut window = DenseAdaptation::new(dim);
    let mut accepted_in_window = 0u64;
    let mut accepted_sampling = 0u64;
    // One kept state on the parameters' own scale.
    let mut out = vec![0.0; dim];
    let total = u64::from(run.warmup) + u64::from(run.steps);
    for t in 0..total {
        let s = step_size.step_size();
        let accepted = threads::install(|| step_all(model, &mut x, dim, (&factor, s), key, t))?;
        if t < u64::from(run.warmup) {
            accepted_in_window += accepted;
            let in_window = (t % u64::from(WINDOW)) + 1;
            if in_window > u64::from(WINDOW / 2) {
                window.observe(&x);
            }
            if in_window == u64::from(WINDOW) {
                let rate = accepted_in_window as f64 / (f64::from(WINDOW) * run.chains as f64);
                step_size.update(rate);
                // The first half of the warm-up takes the local shape (within chains), the
                // second the shape of all states, once the chains have met.
                let pooled = 2 * (t + 1) > u64::from(run.warmup);
                let adapted = match run.preconditioning {
                    Preconditioning::None => None,
                    Preconditioning::Diagonal => window.diagonal_factor(pooled),
                    Preconditioning::Dense => window.cholesky(pooled),
                };
                if let Some(l) = adapted {
                    factor = l;
                }
                window = DenseAdaptation::new(dim);
                accepted_in_window = 0;
            }
        } else {
            accepted_sampling += accepted;
            let done = t + 1 - u64::from(run.warmup);
            if done % u64::from(run.thin) == 0 {
                for state in x.chunks_exact(dim) {
                    model.constrain(state, &mut out);
                    draws.extend_from_slice(&out);
                }
            }
        }
    }
    Ok(ModelSample {
        dim,
        draws,
        kept,
        acceptance: accepted_sampling as f64 / (f64::from(run.steps) * run.chains as f64),
        step_size: step_size.step_size(),
        factor,
    })
}

/// The `[dim, dim]` identity: the proposal's factor before the first window.
fn identity(dim: usize) -> Vec<f32> {
    (0..dim * dim)
        .map(|e| if e / dim == e % dim { 1.0 } else { 0.0 })
        .collect()
}

/// Step `t` of every chain in place; the number accepted.
fn step_all<M: Model + Sync>(
    model: &M,
    x: &mut [f32],
    dim: usize,
    (factor, step_size): (&[f32], f32),
    key: Key,
    t: u64,
) -> u64 {
    let draws = StepDraws::new(key, t);
    x.par_chunks_exact_mut(dim)
        .enumerate()
        .map_init(
            || vec![0.0f32; 2 * dim],
            |scratch, (chain, state)| {
                let (eps, proposal) = scratch.split_at_mut(dim);
                for (q, quad) in eps.chunks_mut(4).enumerate() {
                    let normals = draws.normal_quad(chain as u32, q as u32);
                    quad.copy_from_slice(&normals[..quad.len()]);
                }
                propose_dense(state, eps, (factor, step_size), proposal);
                let total = model.minus_two_log_alpha(state, proposal);
                let threshold = mh::threshold(mh::log_uniform(draws.row_uniform(chain as u32)));
                let accept = mh::below_threshold(total, threshold);
                if accept {
                    state.copy_from_slice(proposal);
                }
                u64::from(accept)
            },
        )
        .sum()
}
