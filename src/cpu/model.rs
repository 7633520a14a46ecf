//! Sampling a model with data ([`fused_mh_kernel::model`]) on the CPU: the schedule of
//! [`crate::model_run`], each step of every chain on the thread pool.

use fused_mh_kernel::mh;
use fused_mh_kernel::model::{Model, propose_dense};
use fused_mh_kernel::philox::Key;
use fused_mh_kernel::rng::{self, StepDraws};
use rayon::prelude::*;

use crate::adapt::DenseAdaptation;
use crate::error::Result;
use crate::model_run::{Continuation, ModelRun, ModelSample, Stepped, Stepper, run_schedule};
use crate::{host_memory, threads};

/// Runs `run.chains` chains of `model`, new or continuing `from` (see [`crate::model_run`]).
pub fn sample_model<M: Model + Sync>(
    model: &M,
    run: &ModelRun,
    from: Option<&Continuation>,
) -> Result<ModelSample> {
    let dim = model.dim();
    let draws_len = run.check(dim)?;
    let stepper = CpuStepper {
        model,
        run: *run,
        dim,
        key: rng::key(run.seed),
        x: run.starts(dim, from)?,
        draws: host_memory::reserved("model draws", draws_len)?,
        out: vec![0.0; dim],
    };
    run_schedule(stepper, run, dim, from)
}

/// The chains' states on the host, and the draws kept so far.
struct CpuStepper<'m, M> {
    model: &'m M,
    run: ModelRun,
    dim: usize,
    key: Key,
    /// `[chains, dim]`.
    x: Vec<f32>,
    /// `[kept so far, chains, dim]`.
    draws: Vec<f32>,
    /// One kept state on the parameters' own scale.
    out: Vec<f32>,
}

impl<M: Model + Sync> Stepper for CpuStepper<'_, M> {
    fn steps(
        &mut self,
        (first, count): (u64, u32),
        proposal: (&[f32], &[f32]),
        observe: bool,
        keep_from: Option<u64>,
    ) -> Result<Stepped> {
        let mut window = observe.then(|| DenseAdaptation::new(self.dim));
        let mut accepted = vec![0u32; self.run.chains];
        for t in first..first + u64::from(count) {
            let (model, dim, key) = (self.model, self.dim, self.key);
            let (x, counts) = (&mut self.x, &mut accepted);
            threads::install(|| step_all(model, (x, counts), dim, proposal, key, t))?;
            if let Some(window) = &mut window {
                window.observe(&self.x);
            }
            let thin = u64::from(self.run.thin);
            let done = keep_from.map(|s| (t + 1).saturating_sub(s));
            if done.is_some_and(|d| d > 0 && d.is_multiple_of(thin)) {
                for state in self.x.chunks_exact(dim) {
                    model.constrain(state, &mut self.out);
                    self.draws.extend_from_slice(&self.out);
                }
            }
        }
        Ok(Stepped { accepted, window })
    }

    fn finish(self) -> Result<(Vec<f32>, Vec<f32>)> {
        Ok((self.draws, self.x))
    }
}

/// Step `t` of every chain in place, with chain `c`'s step size `step_sizes[c]`; adds one to
/// `accepted[c]` where chain `c` moved.
fn step_all<M: Model + Sync>(
    model: &M,
    (x, accepted): (&mut [f32], &mut [u32]),
    dim: usize,
    (factor, step_sizes): (&[f32], &[f32]),
    key: Key,
    t: u64,
) {
    let draws = StepDraws::new(key, t);
    x.par_chunks_exact_mut(dim)
        .zip(accepted.par_iter_mut())
        .enumerate()
        .for_each_init(
            || vec![0.0f32; 2 * dim],
            |scratch, (chain, (state, count))| {
                let step_size = step_sizes[chain];
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
                *count += u32::from(accept);
            },
        );
}
