//! Is it converged? Nested R-hat and an effective sample size per dimension, from each chain's
//! running mean and variance — no trace needed.
//!
//! The chains are taken in *superchains* of `M` consecutive chains (`M = 1`: every chain its
//! own). The chains of a superchain should start from one point and the superchains from
//! independent, overdispersed points (Margossian et al., "Nested R-hat: assessing the
//! convergence of Markov chain Monte Carlo when running many short chains", Bayesian Analysis
//! 2024). With `K` superchains, chain means `m_km` and within-chain variances `s2_km`
//! (unbiased, over `N` draws each) of one coordinate:
//!
//! ```text
//! superchain mean   m_k  = mean_m m_km                     overall mean  m = mean_k m_k
//! between           B    = sum_k (m_k - m)^2 / (K - 1)
//! within            W    = mean_k ( sum_m (m_km - m_k)^2 / (M - 1)   [0 if M = 1]
//!                                   + mean_m s2_km )
//! nested R-hat           = sqrt(1 + B / W)
//! ESS                    = K * W / B
//! pooled variance        = W + B
//! ```
//!
//! The pooled variance estimates the target's variance from all the draws (with `M = 1`, the
//! variance of every draw of every chain about the overall mean, up to the `N / (N - 1)` and
//! `K / (K - 1)` factors); before convergence it is too large, as Gelman's `var+` is. The
//! warm-up's preconditioner ([`crate::adapt::ScaleAdaptation`]) takes its square root.
//!
//! With `M = 1` nested R-hat is Gelman and Rubin's R-hat without its `(N - 1) / N` factor:
//! `sqrt(1 + var(chain means) / mean(within variances))`.
//!
//! **The ESS estimator and its assumptions.** Once the chains have converged, the superchains
//! are independent, and the mean of a superchain of `M N` draws has variance `sigma^2 / ESS_k`,
//! with `sigma^2` the target's variance (estimated by `W`) and `ESS_k` the superchain's
//! effective sample size. `B` estimates that variance from the `K` superchain means, so
//! `K W / B` estimates the total ESS of the run, the sum over superchains. It needs no
//! autocorrelations, only the chains' independence and approximately normal superchain
//! means; its relative standard error is about `sqrt(2 / (K - 1))` (precise with many chains,
//! rough with few). Before convergence `B` is inflated and the ESS is small, as it should be.

use crate::Shape;
use crate::error::{Error, Result};

/// The diagnostics of one coordinate per dimension.
#[derive(Clone, Debug, PartialEq)]
pub struct Diagnostics {
    /// Chains per superchain.
    pub superchain_size: usize,
    /// Draws per chain the moments cover.
    pub draws: u64,
    /// Nested R-hat of each dimension (R-hat when `superchain_size == 1`).
    pub nested_rhat: Vec<f64>,
    /// Effective sample size of each dimension, over all chains.
    pub ess: Vec<f64>,
    /// The pooled variance `W + B` of each dimension (see the module doc).
    pub variance: Vec<f64>,
    /// The fraction of all steps of all chains that were accepted, where the caller knows it
    /// (runs do; [`from_chain_moments`] alone does not).
    pub acceptance_rate: Option<f64>,
}

impl Diagnostics {
    /// The largest nested R-hat over the dimensions.
    pub fn max_nested_rhat(&self) -> f64 {
        self.nested_rhat.iter().copied().fold(f64::NAN, f64::max)
    }

    /// The smallest ESS over the dimensions.
    pub fn min_ess(&self) -> f64 {
        self.ess.iter().copied().fold(f64::NAN, f64::min)
    }
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
    /// The CPU reference computes the diagnostics every this many steps (the GPU after each
    /// launch).
    pub every: u64,
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
    /// The diagnostics after these steps, where the plan asks for them.
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

/// The diagnostics from the per-dimension sums over `superchains` superchains that the GPU's
/// `mh_diagnostics_sums` kernel adds up, `sums[3 * dim]`: the superchain means (shifted by mu),
/// their squares, and the within variances `W_k` (see the module doc).
pub fn from_superchain_sums(
    superchains: usize,
    superchain_size: usize,
    draws: u64,
    sums: &[f64],
) -> Diagnostics {
    let dim = sums.len() / 3;
    let sums = &sums[..3 * dim];
    let k = superchains as f64;
    let (mut nested_rhat, mut ess) = (Vec::with_capacity(dim), Vec::with_capacity(dim));
    let mut variance = Vec::with_capacity(dim);
    for d in 0..dim {
        let (sum, sum_sq, within) = (sums[d], sums[dim + d], sums[2 * dim + d]);
        let between = (sum_sq - sum * sum / k) / (k - 1.0);
        let within = within / k;
        nested_rhat.push((1.0 + between / within).sqrt());
        ess.push(k * within / between);
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

/// The diagnostics from each chain's mean `mean[batch, dim]` and variance `var[batch, dim]`
/// over `draws` draws (the variance as NumPy's `var`, divided by `draws`, as
/// [`crate::ChainStats::variances`] and [`crate::cpu::run_chains`] give it), in superchains of
/// `superchain_size` consecutive chains. Needs at least two superchains and two draws.
pub fn from_chain_moments(
    shape: Shape,
    superchain_size: usize,
    draws: u64,
    mean: &[f64],
    var: &[f64],
) -> Result<Diagnostics> {
    let (batch, dim) = (shape.batch(), shape.dim());
    let m = superchain_size;
    check_superchains(shape, m)?;
    if draws < 2 {
        return Err(Error::InvalidRun(format!(
            "R-hat needs at least 2 draws per chain, not {draws}"
        )));
    }
    crate::problem::check_len("chain means", shape.len(), mean.len())?;
    crate::problem::check_len("chain variances", shape.len(), var.len())?;
    let k = batch / m;
    let n = draws as f64;
    let unbiased = n / (n - 1.0);
    let mut nested_rhat = Vec::with_capacity(dim);
    let mut ess = Vec::with_capacity(dim);
    let mut variance = Vec::with_capacity(dim);
    for d in 0..dim {
        let at = |chain: usize| chain * dim + d;
        // Superchain means and within-superchain variances, in two passes each.
        let (mut sum_means, mut within) = (0.0, 0.0);
        let mut superchain_means = Vec::with_capacity(k);
        for s in 0..k {
            let chains = s * m..(s + 1) * m;
            let mean_k = chains.clone().map(|c| mean[at(c)]).sum::<f64>() / m as f64;
            let between_chains = if m > 1 {
                chains
                    .clone()
                    .map(|c| (mean[at(c)] - mean_k).powi(2))
                    .sum::<f64>()
                    / (m - 1) as f64
            } else {
                0.0
            };
            let within_chains = chains.map(|c| var[at(c)] * unbiased).sum::<f64>() / m as f64;
            within += between_chains + within_chains;
            sum_means += mean_k;
            superchain_means.push(mean_k);
        }
        let overall = sum_means / k as f64;
        let between = superchain_means
            .iter()
            .map(|mk| (mk - overall).powi(2))
            .sum::<f64>()
            / (k - 1) as f64;
        let within = within / k as f64;
        nested_rhat.push((1.0 + between / within).sqrt());
        ess.push(k as f64 * within / between);
        variance.push(within + between);
    }
    Ok(Diagnostics {
        superchain_size,
        draws,
        nested_rhat,
        ess,
        variance,
        acceptance_rate: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two superchains of two chains, one coordinate, worked by hand: chain means 0, 2 | 4, 6,
    /// within variances (ddof 0, 4 draws) 3, 3 | 3, 3 -> unbiased 4.
    /// m_k = 1, 5; m = 3; B = (4 + 4) / 1 = 8; B~_k = 2; W = 2 + 4 = 6;
    /// nested R-hat = sqrt(1 + 8/6); ESS = 2 * 6 / 8 = 1.5.
    #[test]
    fn worked_example() {
        let shape = Shape::new(4, 1).unwrap();
        let d = from_chain_moments(shape, 2, 4, &[0.0, 2.0, 4.0, 6.0], &[3.0; 4]).unwrap();
        approx::assert_relative_eq!(d.nested_rhat[0], (1.0f64 + 8.0 / 6.0).sqrt());
        approx::assert_relative_eq!(d.ess[0], 1.5);
        approx::assert_relative_eq!(d.variance[0], 6.0 + 8.0);
        assert!(from_chain_moments(shape, 3, 4, &[0.0; 4], &[1.0; 4]).is_err());
        assert!(from_chain_moments(shape, 4, 4, &[0.0; 4], &[1.0; 4]).is_err());
        assert!(from_chain_moments(shape, 1, 1, &[0.0; 4], &[1.0; 4]).is_err());
    }
}
