//! Models with data: log-densities that couple a state's dimensions through a data set (a
//! regression's likelihood), where [`crate::target`] holds the densities that separate over
//! dimensions.
//!
//! A model's state is its parameters on the unconstrained scale (a scale parameter as its
//! log, with the Jacobian in the density), and a model gives what a Metropolis–Hastings step
//! needs: `-2 log alpha = -2 (log pi(p) - log pi(x))` for a state `x` and a proposal `p`,
//! computed as a sum of per-data-row *differences* (as the Gaussian target forms its terms),
//! never as the difference of two large sums: a log-likelihood over 10^5 rows is of order
//! 10^5, and float32 would keep only a few units of the difference of two such numbers.
//!
//! The data rows are summed in the order a warp sums them: row `n` into the partial sum of
//! lane `n % 32`, the lanes' partials by a butterfly ([`crate::mh::group_sum_emulated`] on the
//! CPU), so that one formula serves the CPU reference and a warp-per-chain kernel.

pub mod dense_gaussian;
pub mod hier_normal;
pub mod linreg;
pub mod logreg;
pub mod priors;

pub use dense_gaussian::{DenseGaussian, Factor};
pub use hier_normal::HierarchicalNormal;
pub use linreg::LinearRegression;
pub use logreg::LogisticRegression;
pub use priors::{CoefficientPrior, ScalePrior};

/// A model: the unconstrained dimension of its states, `-2 log alpha` between two states, and
/// the map back to the parameters' own scale.
pub trait Model {
    /// The parameters of a state (its length).
    fn dim(&self) -> usize;

    /// `-2 (log pi(p) - log pi(x))` for states `x` and `p` of [`Model::dim`] elements
    /// (unconstrained), in float32, in a fixed order of operations. NaN or infinite where
    /// either state is (the step then rejects).
    fn minus_two_log_alpha(&self, x: &[f32], p: &[f32]) -> f32;

    /// The parameters on their own scale (a scale as `exp` of its log) from a state, into
    /// `out` ([`Model::dim`] long).
    fn constrain(&self, v: &[f32], out: &mut [f32]);
}

/// Lanes whose partial sums a model's data rows go into (a warp).
pub const DATA_LANES: usize = crate::layout::WARP_SIZE;

/// The proposal `p = x + step_size * L eps` of a dense random walk, `L` the `[dim, dim]`
/// lower-triangular factor (row-major; the entries above the diagonal are not read): element
/// `i` adds `L[i, j] eps[j]` for `j <= i` in order, by fused multiply-adds, then one more for
/// the step size. `x`, `eps` and `p` have `dim` elements.
#[inline]
pub fn propose_dense(x: &[f32], eps: &[f32], (factor, step_size): (&[f32], f32), p: &mut [f32]) {
    let dim = x.len();
    for (i, (p_i, &x_i)) in p.iter_mut().zip(x).enumerate() {
        let row = &factor[i * dim..i * dim + i + 1];
        let mut move_i = 0.0f32;
        for (&l, &e) in row.iter().zip(eps) {
            move_i = crate::math::fma(l, e, move_i);
        }
        *p_i = crate::math::fma(step_size, move_i, x_i);
    }
}
