//! Logistic regression: `y_n ~ Bernoulli(logit^-1(X_n . beta))` for data rows `n < N`
//! (`y_n` 0 or 1), with a prior per coefficient. The state is `[beta_1, ..., beta_K]`.
//!
//! # Its terms
//!
//! With `s = 1 - 2 y` (+1 for a 0, -1 for a 1) and `eta = X_n . beta`, a row's `-log` likelihood
//! is `softplus(s eta)`, `softplus(z) = ln(1 + e^z)`. A proposal moves the row's log-odds by
//! `d = X_n . (beta_p - beta_x)` (from the coefficients' move, [`super::row_groups`]), and the
//! row adds `2 (softplus(a + s d) - softplus(a))`, `a = s eta_x`. With `t = e^-|a|` (at most 1)
//! and `E = e^(s d)`, that difference is
//!
//! ```text
//! ln(t + E) - ln(1 + t)   where a >= 0 (softplus(a) = a + ln(1 + t)),
//! ln(1 + t E) - ln(1 + t) where a < 0  (softplus(a) = ln(1 + t)),
//! ```
//!
//! one formula for every row: both logarithms' arguments are sums of positive numbers (nothing
//! cancels), neither exponential can overflow but `E` for a move beyond 88 (the term is then
//! infinite and the step rejects, as its probability `e^-88` says), and a zero move gives
//! exactly 0 (the two arguments are the same float). No branch, so the four rows of a group
//! ([`super::row_groups`]) interleave on the GPU. A term is `-inf` only where the log-odds and
//! the move both exceed 87 in size, against the outcome and towards it: a step that improves
//! the row's fit by that much accepts either way.
//!
//! # The special function unit
//!
//! A row's term needs two exponentials and two logarithms: written as polynomials they are
//! about 100 instructions a row, and the rows are the whole cost of a step. The GPU takes them
//! from its special function unit instead, one instruction each ([`math::exp2`],
//! [`math::log2`]; libm on the CPU). Their errors are absolute where it matters: `E` errs by
//! about 2^-22 relative, so `t + E` or `1 + t E` by about 2^-22 absolute for moves of order 1,
//! and `lg2` errs by about 2^-22 absolute on its arguments' range here, so a row's term is
//! within about 1e-6 of the CPU's, and the sum of `N` rows within `sqrt(N) * 1e-6` where the
//! errors' signs vary (5e-5 for the 3020 rows of posteriordb's wells) and `N * 1e-6` at worst.
//! Against `-2 log alpha` this moves an acceptance probability by a few in 10^5 at most: the
//! GPU's and the CPU's chains make the same decisions except where the uniform falls that close
//! to the threshold (`tests/gpu_models.rs` compares them), and the sampled distribution differs
//! from the exact one by far less than the Monte Carlo error of any run (the posteriordb tests).

use super::linreg::{MAX_COEFFICIENTS, RegressionError, check_design};
use super::priors::Packed;
use super::row_groups::fold_lane_rows;
use super::{Array, CoefficientPrior, Model, ModelKind};
use crate::math::{self, exp2, log2};
use core::f32::consts::{LN_2, LOG2_E};

/// A logistic regression over borrowed data: `x` row-major `[N, K]`, `y` `[N]` of 0 and 1.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct LogisticRegression<'a> {
    x: Array<'a>,
    y: Array<'a>,
    k: usize,
    beta_priors: [Packed; MAX_COEFFICIENTS],
}

/// `e^z` by the special function unit's `2^x` (see the module documentation).
#[inline(always)]
fn exp_sfu(z: f32) -> f32 {
    exp2(z * LOG2_E)
}

impl<'a> LogisticRegression<'a> {
    /// The regression of the 0/1 outcomes `y` on the `k` columns of `x` (row-major, `y.len()`
    /// rows), with a prior per coefficient. Errors as [`super::LinearRegression::new`]; an
    /// outcome other than 0 or 1 is reported as non-finite (`in_x: false`, its index).
    pub fn new(
        x: &'a [f32],
        y: &'a [f32],
        k: usize,
        beta_priors: &[CoefficientPrior],
    ) -> Result<Self, RegressionError> {
        let packed = check_design(x, y, k, beta_priors)?;
        if let Some(index) = y.iter().position(|&v| v != 0.0 && v != 1.0) {
            return Err(RegressionError::NonFinite { in_x: false, index });
        }
        Ok(Self {
            x: Array::new(x),
            y: Array::new(y),
            k,
            beta_priors: packed,
        })
    }
}

/// `sum` plus a data row's share of `-2 log alpha`, from its outcome `y`, its log-odds
/// `eta = X_n . beta_x` and their move `d = X_n . (beta_p - beta_x)`
/// ([`super::row_groups::fold_lane_rows`]; see the module documentation for the formula).
#[inline(always)]
pub fn add_row_term(sum: f32, (eta, d, y): (f32, f32, f32)) -> f32 {
    let s = math::fma(-2.0, y, 1.0);
    let (a, sd) = (s * eta, s * d);
    let t = exp_sfu(-a.abs());
    let moved = exp_sfu(sd);
    // `ln(u + v E) - ln(1 + t)`: `(u, v)` is `(t, 1)` for `a >= 0`, `(1, t)` below (a NaN `a`
    // takes the second and stays NaN).
    let (u, v) = if a >= 0.0 { (t, 1.0) } else { (1.0, t) };
    let difference = log2(math::fma(v, moved, u)) - log2(1.0 + t);
    math::fma(2.0 * LN_2, difference, sum)
}

impl Model for LogisticRegression<'_> {
    type Move = ();
    const KIND: ModelKind = ModelKind::LogisticRegression;

    fn dim(&self) -> usize {
        self.k
    }

    fn prepare(&self, _: &[f32], _: &[f32]) {}

    #[inline(always)]
    fn add_rows(&self, sum: f32, first: usize, x: &[f32], p: &[f32], _: &()) -> f32 {
        let data = (self.x.get(), self.y.get(), self.k);
        fold_lane_rows(data, first, (x, p), sum, |sum, eta, d, y| {
            add_row_term(sum, (eta, d, y))
        })
    }

    fn finish(&self, data: f32, x: &[f32], p: &[f32], _: &()) -> f32 {
        let mut total = data;
        for j in 0..self.k {
            total = self.beta_priors[j].add_term(total, x[j], p[j]);
        }
        total
    }

    fn constrain(&self, v: &[f32], out: &mut [f32]) {
        out[..self.k].copy_from_slice(&v[..self.k]);
    }

    fn for_each_array(&mut self, f: &mut dyn FnMut(&mut Array<'_>)) {
        f(&mut self.x);
        f(&mut self.y);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `-2 log pi` in f64 from the definition (flat priors), `ln(1 + e^z)` as f64's `ln_1p`.
    fn minus_two_log_pi(x: &[f32], y: &[f32], k: usize, v: &[f32]) -> f64 {
        let softplus = |z: f64| z.max(0.0) + (-z.abs()).exp().ln_1p();
        x.chunks_exact(k)
            .zip(y)
            .map(|(row, &yn)| {
                let eta: f64 = row
                    .iter()
                    .zip(v)
                    .map(|(&a, &b)| f64::from(a) * f64::from(b))
                    .sum();
                2.0 * softplus((1.0 - 2.0 * f64::from(yn)) * eta)
            })
            .sum()
    }

    /// Against the f64 formula on 2000 rows with log-odds from -40 to 40, for a small move and
    /// a large one: within 1e-4 relative (a few ulp per row, independent across rows).
    #[test]
    fn terms_match_the_definition_in_f64() {
        let (n, k) = (2000, 2);
        let x: std::vec::Vec<f32> = (0..n)
            .flat_map(|i| [1.0, (i as f32 - 1000.0) / 25.0])
            .collect();
        let y: std::vec::Vec<f32> = (0..n).map(|i| ((i * 7) % 3 == 0) as u8 as f32).collect();
        let model =
            LogisticRegression::new(&x, &y, k, &[CoefficientPrior::Flat; 2]).expect("a model");
        let state = [0.3f32, 1.0];
        for proposal in [[0.3002f32, 1.0001], [1.5, 0.2]] {
            let want = minus_two_log_pi(&x, &y, k, &proposal) - minus_two_log_pi(&x, &y, k, &state);
            let got = f64::from(model.minus_two_log_alpha(&state, &proposal));
            assert!(
                (got - want).abs() < 1e-4 * want.abs().max(1.0),
                "{got} against {want}"
            );
        }
        assert!(
            LogisticRegression::new(&x, &[0.5; 2000], k, &[CoefficientPrior::Flat; 2]).is_err()
        );
    }

    /// The row term at the edges, against f64 (`2 (softplus(a + sd) - softplus(a))`): a zero
    /// move gives exactly 0; log-odds of +-60 with small and large moves both ways within 1e-5
    /// absolute plus 1e-6 relative (a few ulp of each logarithm); a move beyond 88 against the
    /// outcome is `+inf` (the step rejects); a NaN log-odds stays NaN.
    #[test]
    fn row_terms_at_the_edges() {
        let exact = |eta: f64, d: f64, y: f64| {
            let softplus = |z: f64| z.max(0.0) + (-z.abs()).exp().ln_1p();
            let s = 1.0 - 2.0 * y;
            2.0 * (softplus(s * (eta + d)) - softplus(s * eta))
        };
        for y in [0.0f32, 1.0] {
            for eta in [-60.0f32, -17.0, -1.0, -1e-3, 0.0, 1e-3, 1.0, 17.0, 60.0] {
                assert_eq!(add_row_term(0.0, (eta, 0.0, y)), 0.0, "eta {eta}, y {y}");
                for d in [-80.0f32, -5.0, -0.3, -1e-4, 1e-4, 0.3, 5.0, 80.0] {
                    let got = f64::from(add_row_term(0.0, (eta, d, y)));
                    let want = exact(f64::from(eta), f64::from(d), f64::from(y));
                    assert!(
                        (got - want).abs() <= 1e-5 + 1e-6 * want.abs(),
                        "eta {eta}, d {d}, y {y}: {got} against {want}"
                    );
                }
            }
        }
        assert_eq!(add_row_term(0.0, (0.0, 100.0, 0.0)), f32::INFINITY);
        assert!(add_row_term(0.0, (f32::NAN, 0.1, 1.0)).is_nan());
    }
}
