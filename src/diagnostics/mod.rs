//! Is it converged? Split nested R-hat and an effective sample size per dimension, from each
//! chain's running means and variances — no trace needed.
//!
//! **Split chains.** R-hat compares the chains with each other; chains that all move alike
//! (every one started from the same point, and all still on their way in) agree with each
//! other and fool it. Split R-hat also compares each chain's first half with its second half:
//! a trend inside every chain then shows up as halves that disagree. Here every statistic is
//! computed on split chains: the halves of the draws of each chain are two chains, and the
//! first halves of a superchain's chains and their second halves are two superchains
//! ([`split`] keeps the halves exact as a run grows).
//!
//! **Superchains.** The chains are taken in *superchains* of `M` consecutive chains (`M = 1`:
//! every chain its own). The chains of a superchain should start from one point and the
//! superchains from independent, overdispersed points (Margossian et al., "Nested R-hat:
//! assessing the convergence of Markov chain Monte Carlo when running many short chains",
//! Bayesian Analysis 2024). With `K` superchains (after the split: `2K` of `M` half-chains each
//! over `N` draws), half-chain means `m_km` and within variances `s2_km` (unbiased) of one
//! coordinate:
//!
//! ```text
//! superchain mean   m_k  = mean_m m_km                     overall mean  m = mean_k m_k
//! between           B    = sum_k (m_k - m)^2 / (K - 1)
//! within            W    = mean_k ( sum_m (m_km - m_k)^2 / (M - 1)   [0 if M = 1]
//!                                   + mean_m s2_km )
//! nested R-hat           = sqrt(1 + B / W)
//! ESS                    = min(K (W + B) / B, chains * draws per chain)
//! pooled variance        = W + B
//! ```
//!
//! With `M = 1` this is split R-hat without its `(N - 1) / N` factor:
//! `sqrt(1 + var(half-chain means) / mean(within variances))`, which ArviZ's
//! `rhat(method="split")` gives as `sqrt((N - 1) / N + var / W)` (the tests compare the two).
//! With `M > 1` it is nested R-hat of the split superchains; ArviZ's `rhat_nested` keeps both
//! halves of a chain in one superchain instead, which a trend shared by all chains cannot
//! disturb.
//!
//! The pooled variance estimates the target's variance from all the draws; before
//! convergence it is too large, as Gelman's `var+` is. The warm-up's preconditioner
//! ([`crate::adapt::ScaleAdaptation`]) takes its square root.
//!
//! **The ESS estimator and its assumptions.** Once the chains have converged, the split
//! superchains are nearly independent, and the mean of one, over `M N` draws, has variance
//! `sigma^2 / ESS_k`, with `sigma^2` the target's variance and `ESS_k` the superchain's
//! effective sample size. `B` estimates that variance from the superchain means and the
//! pooled variance `W + B` estimates `sigma^2`, so `K (W + B) / B` (with `K` the number of
//! split superchains) estimates the total ESS of the draws, the sum over the superchains: the
//! estimator of Gelman et al., Bayesian Data Analysis (2nd ed., section 11.4),
//! `m n var+ / B`. It needs no autocorrelations, only the superchains' independence and
//! approximately normal means; its relative standard error is about `sqrt(2 / (K - 1))`
//! (precise with many chains, rough with few). Before convergence `B` dominates (chains
//! apart, or halves apart) and the ESS falls to `K`, one draw per split superchain: what
//! chains that have not mixed are worth. It never exceeds the number of draws (an estimate
//! above it, from a `B` small by chance, is capped there).
//!
//! **What R-hat cannot see.** Chains that all start from one point and all move alike show
//! nothing between them; only the split sees their common trend, and only while it lasts. A
//! target with modes that no chain has found, or a dimension that moves too slowly for any
//! chain to leave its neighbourhood, can look converged. [`start`] measures how far apart the
//! chains start, so that a run can say when the comparison is blind.

pub mod plan;
pub mod split;
pub mod start;

use crate::Shape;
use crate::error::{Error, Result};

pub use split::{SplitMoments, SplitSchedule};

/// The diagnostics of one coordinate per dimension.
#[derive(Clone, Debug, PartialEq)]
pub struct Diagnostics {
    /// Chains per superchain.
    pub superchain_size: usize,
    /// Draws per chain the statistics cover (both halves of a split).
    pub draws: u64,
    /// Nested R-hat of each dimension (R-hat when `superchain_size == 1`), on split chains
    /// where the statistics are split ([`split`]).
    pub nested_rhat: Vec<f64>,
    /// Effective sample size of each dimension, over all chains.
    pub ess: Vec<f64>,
    /// The pooled variance `W + B` of each dimension (see the module doc).
    pub variance: Vec<f64>,
    /// The fraction of all steps of all chains that were accepted, where the caller knows it
    /// (runs do; [`from_chain_moments`] alone does not).
    pub acceptance_rate: Option<f64>,
}

/// The R-hat below which a run is called converged when no other threshold is given: 1.01,
/// as Vehtari et al. (2021) recommend.
pub const RHAT_THRESHOLD: f64 = 1.01;

impl Diagnostics {
    /// Whether every dimension's R-hat is below `threshold` (a NaN never is). Whether R-hat
    /// can see anything from where the chains started is a separate question ([`start`]).
    pub fn rhat_below(&self, threshold: f64) -> bool {
        self.max_nested_rhat() < threshold
    }

    /// The largest nested R-hat over the dimensions; NaN if any is NaN (a dimension whose
    /// R-hat cannot be computed is not converged).
    pub fn max_nested_rhat(&self) -> f64 {
        self.nested_rhat
            .iter()
            .copied()
            .fold(f64::NEG_INFINITY, |worst, r| {
                if r.is_nan() || worst.is_nan() {
                    f64::NAN
                } else {
                    worst.max(r)
                }
            })
    }

    /// The smallest ESS over the dimensions; NaN if any is NaN.
    pub fn min_ess(&self) -> f64 {
        self.ess.iter().copied().fold(f64::INFINITY, |low, e| {
            if e.is_nan() || low.is_nan() {
                f64::NAN
            } else {
                low.min(e)
            }
        })
    }

    /// The dimensions from the worst R-hat to the best ([`worst_first`]).
    pub fn worst_first(&self) -> Vec<usize> {
        worst_first(&self.nested_rhat)
    }
}

/// The dimensions from the worst R-hat to the best (a NaN first: it cannot be trusted), ties
/// by index.
pub fn worst_first(nested_rhat: &[f64]) -> Vec<usize> {
    let key = |d: usize| {
        let r = nested_rhat[d];
        if r.is_nan() { f64::INFINITY } else { r }
    };
    let mut order: Vec<usize> = (0..nested_rhat.len()).collect();
    order.sort_by(|&a, &b| key(b).total_cmp(&key(a)).then(a.cmp(&b)));
    order
}

/// When a run computes the diagnostics, and whether it stops on them ([`crate::RunPlan`],
/// [`crate::cpu::run_chains`]).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct DiagnosticsPlan {
    /// Chains per superchain (consecutive chains; 1: R-hat).
    pub superchain_size: usize,
    /// Stop as soon as every dimension's nested R-hat is below this, once each chain has
    /// `min_draws` draws; `None`: never stop early.
    pub until_rhat: Option<f64>,
    /// Draws per chain before an early stop is considered.
    pub min_draws: u64,
    /// Where the split statistics close a half, and so when the diagnostics are computed
    /// (at its checkpoints).
    pub schedule: SplitSchedule,
}

impl DiagnosticsPlan {
    /// Whether `d` is the point to stop at.
    pub fn converged(&self, d: &Diagnostics) -> bool {
        self.until_rhat
            .is_some_and(|t| d.draws >= self.min_draws && d.max_nested_rhat() < t)
    }
}

/// What a run reports as it goes: after each launch on the GPU, each step on the CPU.
#[derive(Clone, Copy, Debug)]
pub struct Progress<'a> {
    /// Steps done so far.
    pub done: u64,
    /// Steps planned.
    pub total: u64,
    /// The diagnostics after these steps, at the plan's checkpoints.
    pub diagnostics: Option<&'a Diagnostics>,
}

/// Checks that `batch` chains form at least two superchains of `superchain_size`.
pub fn check_superchains(shape: Shape, superchain_size: usize) -> Result<()> {
    let (batch, m) = (shape.batch(), superchain_size);
    if m == 0 || !batch.is_multiple_of(m) || batch / m < 2 {
        return Err(Error::InvalidRun(format!(
            "superchains of {m} chains need a batch of at least two of them, a multiple of {m}: \
             the batch has {batch} chains"
        )));
    }
    Ok(())
}

/// The diagnostics from the per-dimension sums over `superchains` superchains of
/// `superchain_size` chains, `sums[3 * dim]` (the GPU's `mh_diagnostics_sums` adds them up,
/// [`superchain_sums`] on the CPU): the superchain means (shifted by mu), their squares, and
/// the within variances `W_k` (see the module doc). `draws` is per chain; the ESS is capped at
/// `superchains * superchain_size * draws`.
pub fn from_superchain_sums(
    superchains: usize,
    superchain_size: usize,
    draws: u64,
    sums: &[f64],
) -> Diagnostics {
    let dim = sums.len() / 3;
    let sums = &sums[..3 * dim];
    let k = superchains as f64;
    let all_draws = k * superchain_size as f64 * draws as f64;
    let (mut nested_rhat, mut ess) = (Vec::with_capacity(dim), Vec::with_capacity(dim));
    let mut variance = Vec::with_capacity(dim);
    for d in 0..dim {
        let (sum, sum_sq, within) = (sums[d], sums[dim + d], sums[2 * dim + d]);
        // Rounding can make a tiny between variance negative: it is 0.
        let between = ((sum_sq - sum * sum / k) / (k - 1.0)).max(0.0);
        let within = within / k;
        nested_rhat.push((1.0 + between / within).sqrt());
        ess.push((k * (within + between) / between).min(all_draws));
        variance.push(within + between);
    }
    Diagnostics {
        superchain_size,
        draws,
        nested_rhat,
        ess,
        variance,
        acceptance_rate: None,
    }
}

/// The sums behind [`from_superchain_sums`] from each chain's mean `mean[batch, dim]` and sum
/// of squared deviations `m2[batch, dim]` over `draws` draws, in superchains of
/// `superchain_size` consecutive chains, the means shifted by `shift[dim]` where given (as the
/// GPU shifts them by mu): the CPU twin of the GPU's `mh_diagnostics_sums`.
pub fn superchain_sums(
    shape: Shape,
    superchain_size: usize,
    draws: u64,
    (mean, m2): (&[f64], &[f64]),
    shift: Option<&[f32]>,
) -> Vec<f64> {
    let (batch, dim, m) = (shape.batch(), shape.dim(), superchain_size);
    let unbiased = 1.0 / (draws as f64 - 1.0);
    let mut sums = vec![0.0; 3 * dim];
    for d in 0..dim {
        let shift = shift.map_or(0.0, |s| f64::from(s[d]));
        let at = |c: usize| mean[c * dim + d] - shift;
        for first in (0..batch).step_by(m) {
            let chains = first..first + m;
            let mean_k = chains.clone().map(at).sum::<f64>() / m as f64;
            let var_sum = chains
                .clone()
                .map(|c| m2[c * dim + d] * unbiased)
                .sum::<f64>();
            let between = if m > 1 {
                chains.map(|c| (at(c) - mean_k).powi(2)).sum::<f64>() / (m - 1) as f64
            } else {
                0.0
            };
            sums[d] += mean_k;
            sums[dim + d] += mean_k * mean_k;
            sums[2 * dim + d] += between + var_sum / m as f64;
        }
    }
    sums
}

/// The diagnostics of one unsplit sample from each chain's mean `mean[batch, dim]` and variance
/// `var[batch, dim]` over `draws` draws (the variance as NumPy's `var`, divided by `draws`, as
/// [`crate::ChainStats::variances`] and [`crate::cpu::run_chains`] give it), in superchains of
/// `superchain_size` consecutive chains. Needs at least two superchains and two draws. This is
/// R-hat without the split: blind to a trend that all chains share; runs report the split
/// diagnostics ([`split`]), the warm-up takes the pooled variance of its launches from this.
pub fn from_chain_moments(
    shape: Shape,
    superchain_size: usize,
    draws: u64,
    mean: &[f64],
    var: &[f64],
) -> Result<Diagnostics> {
    check_superchains(shape, superchain_size)?;
    if draws < 2 {
        return Err(Error::InvalidRun(format!(
            "R-hat needs at least 2 draws per chain, not {draws}"
        )));
    }
    crate::problem::check_len("chain means", shape.len(), mean.len())?;
    crate::problem::check_len("chain variances", shape.len(), var.len())?;
    let m2: Vec<f64> = var.iter().map(|v| v * draws as f64).collect();
    let sums = superchain_sums(shape, superchain_size, draws, (mean, &m2), None);
    let superchains = shape.batch() / superchain_size;
    Ok(from_superchain_sums(
        superchains,
        superchain_size,
        draws,
        &sums,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two superchains of two chains, one coordinate, worked by hand: chain means 0, 2 | 4, 6,
    /// within variances (ddof 0, 4 draws) 3, 3 | 3, 3 -> unbiased 4.
    /// m_k = 1, 5; m = 3; B = (4 + 4) / 1 = 8; B~_k = 2; W = 2 + 4 = 6;
    /// nested R-hat = sqrt(1 + 8/6); ESS = 2 * (6 + 8) / 8 = 3.5.
    #[test]
    fn worked_example() {
        let shape = Shape::new(4, 1).unwrap();
        let d = from_chain_moments(shape, 2, 4, &[0.0, 2.0, 4.0, 6.0], &[3.0; 4]).unwrap();
        approx::assert_relative_eq!(d.nested_rhat[0], (1.0f64 + 8.0 / 6.0).sqrt());
        approx::assert_relative_eq!(d.ess[0], 3.5);
        approx::assert_relative_eq!(d.variance[0], 6.0 + 8.0);
        assert!(from_chain_moments(shape, 3, 4, &[0.0; 4], &[1.0; 4]).is_err());
        assert!(from_chain_moments(shape, 4, 4, &[0.0; 4], &[1.0; 4]).is_err());
        assert!(from_chain_moments(shape, 1, 1, &[0.0; 4], &[1.0; 4]).is_err());
    }

    /// Chain means that agree exactly give B = 0: the ESS is capped at the draws (4 chains x 4),
    /// not infinite; the worst R-hat of [1.0, NaN, 1.2] is NaN, and the order puts NaN first.
    #[test]
    fn caps_and_nans() {
        let shape = Shape::new(4, 1).unwrap();
        let d = from_chain_moments(shape, 1, 4, &[1.0; 4], &[3.0; 4]).unwrap();
        assert_eq!(d.ess[0], 16.0);
        assert_eq!(d.nested_rhat[0], 1.0);
        let d = Diagnostics {
            nested_rhat: vec![1.0, f64::NAN, 1.2],
            ess: vec![5.0, 3.0, f64::NAN],
            ..d
        };
        assert!(d.max_nested_rhat().is_nan() && d.min_ess().is_nan());
        assert_eq!(d.worst_first(), vec![1, 2, 0]);
    }
}
