//! Linear regression: `y_n ~ normal(X_n . beta, sigma)` for data rows `n < N`, with a prior per
//! coefficient and one on `sigma`. The state is `[beta_1, ..., beta_K, log sigma]`.
//!
//! # Its terms
//!
//! With `z = (y - X_n . beta) / sigma`, `-2 log pi = sum_n z_n^2 + 2 N log sigma` plus the
//! priors'. Per data row, for a state `x` and a proposal `p` (`a = 1 / sigma_p`,
//! `b = 1 / sigma_x`, `r = y_n - X_n . beta_x` the state's residual, `d = X_n . (beta_p -
//! beta_x)` the proposal's move of the fit):
//!
//! ```text
//! z_p - z_x = a (r - d) - b r = (a - b) r - a d
//! z_p^2 - z_x^2 = (z_p - z_x) (2 z_x + (z_p - z_x))
//! ```
//!
//! the Gaussian target's difference of squares: the move `d` is computed from the move of the
//! coefficients, never as the difference of two fits, so a row's term keeps its relative
//! accuracy however large `y` is against `sigma`.
//!
//! # Precision
//!
//! Float32 throughout. A row's term has a relative error of a few ulp; the errors of
//! different rows are independent in sign, so the sum of `N` rows (in 32 partial sums, as a
//! warp adds them) errs by about `sqrt(N) * 2^-24 * max |term|`: for `N = 10^5` rows whose
//! terms are of order 1 (a proposal moving each row's fit by about one `sigma`: an extreme
//! step), about `2e-5`, against the `O(1)` values of `log alpha` that decide. The sum of the
//! `N` partial values of a *single* state's `-2 log pi`, of order `N`, is never formed.

use super::priors::{Packed, add_scale_terms};
use super::row_groups::fold_lane_rows;
use super::{Array, CoefficientPrior, Model, ModelKind, ScalePrior};
use crate::math::{self, exp};
use crate::target::Invalid;

/// The largest number of coefficients: a state's coefficients and moves are held in arrays of
/// this size (registers, on the GPU).
pub const MAX_COEFFICIENTS: usize = 64;

/// A linear regression over borrowed data: `x` row-major `[N, K]`, `y` `[N]`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct LinearRegression<'a> {
    x: Array<'a>,
    y: Array<'a>,
    k: usize,
    beta_priors: [Packed; MAX_COEFFICIENTS],
    sigma_prior: Packed,
}

/// Why a regression cannot be built.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum RegressionError {
    /// `x` is not `y.len()` rows of `k` columns, or `k` is 0 or over [`MAX_COEFFICIENTS`], or
    /// there are no rows.
    Shape,
    /// A data value is NaN or infinite: the flat index into `x` (`Some`) or into `y`.
    NonFinite {
        /// Into `x` if true, `y` if false.
        in_x: bool,
        /// The element's index.
        index: usize,
    },
    /// A known standard error (the hierarchical model's `sigma_j`) is not a positive finite
    /// number whose inverse square is one: its index.
    StandardError {
        /// The group.
        index: usize,
    },
    /// Coefficient `index`'s prior (`None`: sigma's) has an unusable parameter.
    Prior {
        /// The coefficient, or `None` for sigma.
        index: Option<usize>,
        /// Which parameter and why.
        invalid: Invalid,
    },
}

impl<'a> LinearRegression<'a> {
    /// The regression of `y` on the `k` columns of `x` (row-major, `y.len()` rows), with a
    /// prior per coefficient (`beta_priors`, `k` of them) and one on sigma. Every data value
    /// must be finite.
    pub fn new(
        x: &'a [f32],
        y: &'a [f32],
        k: usize,
        beta_priors: &[CoefficientPrior],
        sigma_prior: ScalePrior,
    ) -> Result<Self, RegressionError> {
        let packed = check_design(x, y, k, beta_priors)?;
        if let Some(index) = y.iter().position(|v| !v.is_finite()) {
            return Err(RegressionError::NonFinite { in_x: false, index });
        }
        let sigma_prior = sigma_prior
            .pack()
            .map_err(|invalid| RegressionError::Prior {
                index: None,
                invalid,
            })?;
        Ok(Self {
            x: Array::new(x),
            y: Array::new(y),
            k,
            beta_priors: packed,
            sigma_prior,
        })
    }

    /// The number of coefficients.
    pub fn coefficients(&self) -> usize {
        self.k
    }

    /// The number of data rows.
    pub fn data_rows(&self) -> usize {
        self.y.len()
    }
}

/// The checks every regression makes of its design and coefficient priors: `x` is `y.len()`
/// rows of `k` columns (`1 <= k <= MAX_COEFFICIENTS`, at least one row), every value of `x`
/// finite, one usable prior per coefficient; the priors packed. The outcomes `y` are each
/// model's to check.
pub(crate) fn check_design(
    x: &[f32],
    y: &[f32],
    k: usize,
    beta_priors: &[CoefficientPrior],
) -> Result<[Packed; MAX_COEFFICIENTS], RegressionError> {
    if k == 0
        || k > MAX_COEFFICIENTS
        || y.is_empty()
        || Some(x.len()) != y.len().checked_mul(k)
        || beta_priors.len() != k
    {
        return Err(RegressionError::Shape);
    }
    if let Some(index) = x.iter().position(|v| !v.is_finite()) {
        return Err(RegressionError::NonFinite { in_x: true, index });
    }
    let mut packed = [Packed::Flat; MAX_COEFFICIENTS];
    for (j, prior) in beta_priors.iter().enumerate() {
        packed[j] = prior.pack().map_err(|invalid| RegressionError::Prior {
            index: Some(j),
            invalid,
        })?;
    }
    Ok(packed)
}

/// `sum` plus a data row's share of `-2 log alpha`, from its observation `y`, its fit
/// `X_n . beta_x` and its move `d = X_n . (beta_p - beta_x)`
/// ([`super::row_groups::fold_lane_rows`]), and `(a, b) = (1 / sigma_p, 1 / sigma_x)` (see the
/// module documentation).
#[inline(always)]
pub fn add_row_term(sum: f32, (fit, d, y): (f32, f32, f32), (a, b): (f32, f32)) -> f32 {
    let r = y - fit;
    let z_x = b * r;
    let dz = math::fma(a - b, r, -(a * d));
    math::fma(dz, math::fma(2.0, z_x, dz), sum)
}

/// What a linear regression's rows need from a state pair: `(1 / sigma_p, 1 / sigma_x)`.
#[derive(Clone, Copy, Debug)]
pub struct ScaleMove {
    inverse: (f32, f32),
}

impl Model for LinearRegression<'_> {
    type Move = ScaleMove;
    const KIND: ModelKind = ModelKind::LinearRegression;

    fn dim(&self) -> usize {
        self.k + 1
    }

    fn prepare(&self, x: &[f32], p: &[f32]) -> ScaleMove {
        let k = self.k;
        ScaleMove {
            inverse: (exp(-p[k]), exp(-x[k])),
        }
    }

    #[inline(always)]
    fn add_rows(&self, sum: f32, first: usize, x: &[f32], p: &[f32], m: &ScaleMove) -> f32 {
        let data = (self.x.get(), self.y.get(), self.k);
        fold_lane_rows(data, first, (x, p), sum, |sum, fit, d, y| {
            add_row_term(sum, (fit, d, y), m.inverse)
        })
    }

    fn finish(&self, data: f32, x: &[f32], p: &[f32], _: &ScaleMove) -> f32 {
        let k = self.k;
        let (s_x, s_p) = (x[k], p[k]);
        // + 2 N (s_p - s_x): the likelihood's normalisation.
        let mut total = math::fma(2.0 * self.data_rows() as f32, s_p - s_x, data);
        for j in 0..k {
            total = self.beta_priors[j].add_term(total, x[j], p[j]);
        }
        add_scale_terms(total, &self.sigma_prior, (s_x, s_p), (exp(s_x), exp(s_p)))
    }

    fn constrain(&self, v: &[f32], out: &mut [f32]) {
        out[..self.k].copy_from_slice(&v[..self.k]);
        out[self.k] = exp(v[self.k]);
    }

    fn for_each_array(&mut self, f: &mut dyn FnMut(&mut Array<'_>)) {
        f(&mut self.x);
        f(&mut self.y);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `-2 log pi` of a state in f64, straight from the model's definition (normal likelihood,
    /// normal(0, 10) coefficient priors, half-Cauchy(2.5) on sigma, the Jacobian of log sigma).
    fn minus_two_log_pi(x: &[f32], y: &[f32], k: usize, v: &[f32]) -> f64 {
        let sigma = f64::from(v[k]).exp();
        let mut total = 0.0;
        for (row, &yn) in x.chunks_exact(k).zip(y) {
            let fit: f64 = row
                .iter()
                .zip(v)
                .map(|(&a, &b)| f64::from(a) * f64::from(b))
                .sum();
            let z = (f64::from(yn) - fit) / sigma;
            total += z * z + 2.0 * sigma.ln();
        }
        for &b in &v[..k] {
            total += (f64::from(b) / 10.0).powi(2);
        }
        total += 2.0 * (1.0 + (sigma / 2.5).powi(2)).ln();
        total - 2.0 * f64::from(v[k])
    }

    /// Against the f64 formula on 1000 rows whose observations are 1000 sigma from zero (the
    /// case where a difference of two fits would lose everything): within 1e-4 of the exact
    /// `-2 log alpha` (the Precision section: about `sqrt(N) * 2^-24 * max |term|`, plus the
    /// f64 reference's own cancellation).
    #[test]
    fn terms_match_the_definition_in_f64() {
        let (n, k) = (1000, 3);
        let x: std::vec::Vec<f32> = (0..n * k)
            .map(|i| ((i * 7919) % 1000) as f32 / 250.0 - 2.0)
            .collect();
        let y: std::vec::Vec<f32> = (0..n)
            .map(|i| 1000.0 + ((i * 31) % 17) as f32 / 8.0)
            .collect();
        let priors = [CoefficientPrior::Normal {
            loc: 0.0,
            scale: 10.0,
        }; 3];
        let cauchy = ScalePrior::HalfStudentT {
            df: 1.0,
            scale: 2.5,
        };
        let model = LinearRegression::new(&x, &y, k, &priors, cauchy).expect("a model");
        let state = [300.0f32, -0.5, 2.0, 0.1];
        let proposal = [300.001f32, -0.5003, 2.0002, 0.098];
        let want = minus_two_log_pi(&x, &y, k, &proposal) - minus_two_log_pi(&x, &y, k, &state);
        let got = f64::from(model.minus_two_log_alpha(&state, &proposal));
        assert!(
            (got - want).abs() < 1e-4 * want.abs().max(1.0),
            "{got} against {want}"
        );
        assert_eq!(model.minus_two_log_alpha(&state, &state), 0.0);
    }

    /// Bad shapes, data and priors are refused with what is wrong.
    #[test]
    fn bad_inputs_are_refused() {
        let (x, y) = ([1.0f32, 2.0, 3.0, 4.0], [1.0f32, 2.0]);
        let flat = [CoefficientPrior::Flat; 2];
        let new = |x: &[f32], y: &[f32], priors: &[CoefficientPrior], s| {
            LinearRegression::new(x, y, 2, priors, s).map(|_| ())
        };
        assert_eq!(
            new(&x[..3], &y, &flat, ScalePrior::Flat),
            Err(RegressionError::Shape)
        );
        assert_eq!(
            new(&x, &y, &flat[..1], ScalePrior::Flat),
            Err(RegressionError::Shape)
        );
        let nan = [1.0, f32::NAN, 3.0, 4.0];
        let err = new(&nan, &y, &flat, ScalePrior::Flat);
        assert_eq!(
            err,
            Err(RegressionError::NonFinite {
                in_x: true,
                index: 1
            })
        );
        let bad = [
            CoefficientPrior::Flat,
            CoefficientPrior::Normal {
                loc: 0.0,
                scale: -1.0,
            },
        ];
        let err = new(&x, &y, &bad, ScalePrior::Flat);
        assert!(
            matches!(err, Err(RegressionError::Prior { index: Some(1), invalid }) if invalid.param == 1)
        );
        let err = new(
            &x,
            &y,
            &flat,
            ScalePrior::HalfStudentT {
                df: 0.0,
                scale: 1.0,
            },
        );
        assert!(
            matches!(err, Err(RegressionError::Prior { index: None, invalid }) if invalid.param == 2)
        );
    }
}
