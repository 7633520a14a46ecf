//! A model run's schedule, the same on the CPU ([`crate::cpu::sample_model`]) and the GPU
//! ([`crate::Gpu::sample_model`]): random-walk Metropolis–Hastings over many independent
//! chains, with a warm-up that adapts a dense proposal from the pooled chains.
//!
//! Each step of each chain proposes `p = x + s L eps` (`eps` the step's standard normals for
//! that chain, drawn by the counter scheme of [`fused_mh_kernel::rng`]: step `t`, row = chain),
//! and accepts when `-2 log alpha` is below the chain's threshold `-2 log u`. The warm-up runs
//! in windows of [`WINDOW`] steps; after each window each chain's own step size `s_c` moves
//! toward the target acceptance by that chain's acceptance over the window
//! ([`StepSizeAdaptation`]), and `L` becomes the Cholesky factor of a covariance of
//! the chains' states over the window's second half ([`DenseAdaptation`]). In the warm-up's
//! first half it is the within-chain covariance: while the chains travel from their starts,
//! the spread between them is far wider than the posterior, and a proposal shaped by it is
//! rejected so often that the chains stop travelling (measured on posteriordb's earnings
//! regression: acceptance 3 % and the spread shrinking by 15 % a window). In the second half,
//! the chains having met, it is the covariance of all states: with thousands of chains precise
//! after one window, where the within-chain covariance of short windows shrinks along the
//! directions a random walk is slow in, and would keep them slow. The sampling steps use one
//! proposal for every chain: `L` and the median of the chains' step sizes, frozen, so that
//! they are a plain random-walk sampler with a fixed proposal.
//!
//! Why a step size per chain in the warm-up: a chain that starts far out in a wide part of the
//! posterior (a regression's `sigma` 10x the posterior's, its coefficients as far off) needs
//! steps 10x those of the chains in the bulk. With one step size for all it creeps, and with
//! thousands of chains a few always start there (measured on posteriordb's sblri at 4096
//! chains: four chains still at `sigma` 3.5 to 9 against 0.96 after 2000 warm-up steps,
//! widening the pooled covariance until every chain's acceptance fell to 1 %). Its own step
//! size grows while it accepts nearly everything, and it arrives.
//!
//! Chains start in superchains: the chains of one superchain from one point, the superchains
//! from independent standard normals per parameter (unconstrained), so that nested R-hat can
//! see superchains that have not met.
//!
//! A run can continue an earlier one ([`Continuation`], from [`ModelSample::continuation`]):
//! from its final states, with its frozen proposal, from the step counter where it stopped, and
//! without a warm-up. Its draws are then those the earlier run would have drawn next, to the
//! bit: the steps' random numbers depend on the counter alone.
//!
//! A machine runs the schedule through a [`Stepper`]: a number of steps from a step counter,
//! with a given proposal, observing the window or keeping draws as asked. Each window is two
//! calls (its halves), so a GPU launch covers half a window.

use fused_mh_kernel::model::MAX_MODEL_DIM;
use fused_mh_kernel::rng::{self, StepDraws};

use crate::adapt::{DenseAdaptation, StepSizeAdaptation};
use crate::error::{Error, Result};
use crate::{Diagnostics, Shape};

/// Steps per warm-up window (see the module documentation).
pub const WINDOW: u32 = 50;

/// Sampling steps per [`Stepper::steps`] call at most.
const SAMPLING_STEPS_PER_CALL: u32 = 500;

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

/// Where a run continues an earlier one (see the module documentation).
#[derive(Clone, Debug, PartialEq)]
pub struct Continuation {
    /// `[chains, dim]`: the earlier run's final states, unconstrained.
    pub states: Vec<f32>,
    /// Its frozen proposal factor `[dim, dim]`, row-major, lower triangular.
    pub factor: Vec<f32>,
    /// Its frozen step size.
    pub step_size: f32,
    /// The step counter of the first step: where the earlier run stopped.
    pub first_step: u64,
}

/// A model run's results.
#[derive(Clone, Debug, PartialEq)]
pub struct ModelSample {
    /// Parameters per state.
    pub dim: usize,
    /// Chains.
    pub chains: usize,
    /// `[kept, chains, dim]`: the kept states on the parameters' own scale.
    pub draws: Vec<f32>,
    /// The kept steps.
    pub kept: usize,
    /// The fraction of sampling steps accepted, over all chains.
    pub acceptance: f64,
    /// `[chains]`: each chain's accepted sampling steps.
    pub accepted: Vec<u64>,
    /// The frozen step size.
    pub step_size: f32,
    /// The frozen proposal factor `L`, `[dim, dim]` row-major, lower triangular.
    pub factor: Vec<f32>,
    /// `[chains, dim]`: the final states, unconstrained.
    pub states: Vec<f32>,
    /// The step counter after the last step.
    pub next_step: u64,
}

impl ModelSample {
    /// Where a run that continues this one starts (see the module documentation).
    pub fn continuation(&self) -> Continuation {
        Continuation {
            states: self.states.clone(),
            factor: self.factor.clone(),
            step_size: self.step_size,
            first_step: self.next_step,
        }
    }

    /// Nested R-hat and ESS of the kept draws per parameter, from split superchains: the
    /// first halves of a superchain's `superchain_size` chains, then their second halves, each
    /// a superchain of half-chains (so that a trend within the chains shows as a difference
    /// between superchains). Needs at least 4 kept draws.
    pub fn diagnostics(&self, superchain_size: usize) -> Result<Diagnostics> {
        let (dim, chains, half) = (self.dim, self.chains, self.kept / 2);
        let shape = Shape::new(2 * chains, dim)?;
        let mut mean = crate::host_memory::filled("chain means", shape.len(), 0.0)?;
        let mut var = crate::host_memory::filled("chain variances", shape.len(), 0.0)?;
        for c in 0..chains {
            for h in 0..2 {
                let (k, member) = (c / superchain_size, c % superchain_size);
                for d in 0..dim {
                    let value = |t: usize| f64::from(self.draws[(t * chains + c) * dim + d]);
                    let steps = h * half..(h + 1) * half;
                    let m = steps.clone().map(value).sum::<f64>() / half as f64;
                    let v = steps.map(|t| (value(t) - m).powi(2)).sum::<f64>() / half as f64;
                    let at = ((2 * k + h) * superchain_size + member) * dim + d;
                    (mean[at], var[at]) = (m, v);
                }
            }
        }
        crate::diagnostics::from_chain_moments(shape, superchain_size, half as u64, &mean, &var)
    }
}

impl ModelRun {
    /// Checks the run for states of `dim` parameters; the kept draws' length.
    pub(crate) fn check(&self, dim: usize) -> Result<usize> {
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
        self.chains
            .checked_mul(dim)
            .and_then(|n| n.checked_mul(self.kept()))
            .ok_or_else(|| Error::InvalidRun("the kept draws overflow memory".into()))
    }

    /// The kept steps.
    pub fn kept(&self) -> usize {
        (self.steps / self.thin) as usize
    }

    /// The chains' first states `[chains, dim]`: those of `from` (checked against the run), or
    /// standard normals per superchain, drawn at a step the run never reaches.
    pub(crate) fn starts(&self, dim: usize, from: Option<&Continuation>) -> Result<Vec<f32>> {
        if let Some(from) = from {
            self.check_continuation(dim, from)?;
            return crate::host_memory::collected("model states", from.states.iter().copied());
        }
        let start = StepDraws::new(rng::key(self.seed), u64::MAX);
        crate::host_memory::collected(
            "model states",
            (0..self.chains * dim).map(|e| {
                let (superchain, d) = (e / dim / self.superchain_size, e % dim);
                start.normal_quad(superchain as u32, (d / 4) as u32)[d % 4]
            }),
        )
    }

    /// Refuses a continuation that does not fit this run of states of `dim` parameters.
    fn check_continuation(&self, dim: usize, from: &Continuation) -> Result<()> {
        let refuse = |why: String| Err(Error::InvalidRun(why));
        if self.warmup != 0 {
            return refuse(format!(
                "a continued run keeps the earlier run's proposal: its warm-up must be 0, not {}",
                self.warmup
            ));
        }
        if from.states.len() != self.chains * dim {
            return refuse(format!(
                "the continued states hold {} values, not {} chains x {dim} parameters",
                from.states.len(),
                self.chains
            ));
        }
        if from.factor.len() != dim * dim {
            return refuse(format!(
                "the continued proposal factor holds {} values, not {dim} x {dim}",
                from.factor.len()
            ));
        }
        if let Some(i) = from.factor.iter().position(|v| !v.is_finite()) {
            return refuse(format!(
                "the continued proposal factor's value {i} is not finite"
            ));
        }
        if !(from.step_size.is_finite() && from.step_size > 0.0) {
            return refuse(format!(
                "the continued step size {} is not a positive number",
                from.step_size
            ));
        }
        if from.first_step.checked_add(u64::from(self.steps)).is_none() {
            return refuse(format!(
                "the step counter {} has no room for {} more steps",
                from.first_step, self.steps
            ));
        }
        Ok(())
    }
}

/// What a [`Stepper::steps`] call did.
pub(crate) struct Stepped {
    /// Steps accepted by each chain.
    pub accepted: Vec<u32>,
    /// The states after each step, when observed.
    pub window: Option<DenseAdaptation>,
}

/// A machine that steps a run's chains (see the module documentation).
pub(crate) trait Stepper {
    /// Steps `first .. first + count` of every chain with the proposal `(factor, step sizes)`
    /// (one step size per chain);
    /// with `observe`, the states after each step go into a window; with `keep_from` `Some(s)`,
    /// the states after the steps `s + thin k - 1` (`k >= 1`) are kept.
    fn steps(
        &mut self,
        range: (u64, u32),
        proposal: (&[f32], &[f32]),
        observe: bool,
        keep_from: Option<u64>,
    ) -> Result<Stepped>;

    /// The kept draws, `[kept, chains, dim]`, constrained, and the final states `[chains,
    /// dim]`, unconstrained.
    fn finish(self) -> Result<(Vec<f32>, Vec<f32>)>;
}

/// Runs the schedule of `run` on `stepper` for states of `dim` parameters: a new run, or the
/// continuation `from` (whose states the stepper starts from, [`ModelRun::starts`]).
pub(crate) fn run_schedule<S: Stepper>(
    mut stepper: S,
    run: &ModelRun,
    dim: usize,
    from: Option<&Continuation>,
) -> Result<ModelSample> {
    let (factor, s, sampling_from) = match from {
        Some(from) => (from.factor.clone(), from.step_size, from.first_step),
        None => {
            let (factor, s) = warm_up(&mut stepper, run, dim)?;
            (factor, s, u64::from(run.warmup))
        }
    };
    let step_sizes = vec![s; run.chains];
    let mut accepted = vec![0u64; run.chains];
    let mut done = 0u32;
    while done < run.steps {
        let count = (run.steps - done).min(SAMPLING_STEPS_PER_CALL);
        let first = sampling_from + u64::from(done);
        let proposal = (factor.as_slice(), step_sizes.as_slice());
        let stepped = stepper.steps((first, count), proposal, false, Some(sampling_from))?;
        for (total, &a) in accepted.iter_mut().zip(&stepped.accepted) {
            *total += u64::from(a);
        }
        done += count;
    }
    let accepted_total: u64 = accepted.iter().sum();
    let (draws, states) = stepper.finish()?;
    Ok(ModelSample {
        dim,
        chains: run.chains,
        draws,
        kept: run.kept(),
        acceptance: accepted_total as f64 / (f64::from(run.steps) * run.chains as f64),
        accepted,
        step_size: s,
        factor,
        states,
        next_step: sampling_from + u64::from(run.steps),
    })
}

/// The warm-up of `run` on `stepper`: the frozen factor and step size (see the module
/// documentation).
fn warm_up<S: Stepper>(stepper: &mut S, run: &ModelRun, dim: usize) -> Result<(Vec<f32>, f32)> {
    let mut factor = identity(dim);
    let first_size = 2.38 / (dim as f32).sqrt();
    let mut sizes = vec![StepSizeAdaptation::new(first_size, run.target_acceptance); run.chains];
    let mut step_sizes = vec![first_size; run.chains];
    let half = WINDOW / 2;
    for window_start in (0..run.warmup).step_by(WINDOW as usize) {
        let t = u64::from(window_start);
        let first = stepper.steps((t, half), (&factor, &step_sizes), false, None)?;
        let second_half = (t + u64::from(half), WINDOW - half);
        let second = stepper.steps(second_half, (&factor, &step_sizes), true, None)?;
        for (c, size) in sizes.iter_mut().enumerate() {
            let accepted = first.accepted[c] + second.accepted[c];
            size.update(f64::from(accepted) / f64::from(WINDOW));
            step_sizes[c] = size.step_size();
        }
        // The first half of the warm-up takes the local shape (within chains), the second the
        // shape of all states, once the chains have met.
        let pooled = 2 * (window_start + WINDOW) > run.warmup;
        let window = second
            .window
            .ok_or_else(|| Error::InvalidRun("a warm-up window was not observed".into()))?;
        let adapted = match run.preconditioning {
            Preconditioning::None => None,
            Preconditioning::Diagonal => window.diagonal_factor(pooled),
            Preconditioning::Dense => window.cholesky(pooled),
        };
        if let Some(l) = adapted {
            factor = l;
        }
    }
    Ok((factor, median(&step_sizes)))
}

/// The median of the chains' step sizes (the upper middle one of an even count).
fn median(sizes: &[f32]) -> f32 {
    let mut sorted = sizes.to_vec();
    sorted.sort_by(f32::total_cmp);
    sorted[sorted.len() / 2]
}

/// The `[dim, dim]` identity: the proposal's factor before the first window.
fn identity(dim: usize) -> Vec<f32> {
    (0..dim * dim)
        .map(|e| if e / dim == e % dim { 1.0 } else { 0.0 })
        .collect()
}
