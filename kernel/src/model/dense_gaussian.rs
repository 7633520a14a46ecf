//! The dense Gaussian `N(m, Sigma)`, given by a lower-triangular Cholesky factor `L` of its
//! covariance (`Sigma = L L^T`) or of its precision (`Sigma^-1 = L L^T`). The state is the
//! vector itself.
//!
//! # Its terms
//!
//! With `z(v) = L^-1 (v - m)` (covariance factor: forward substitution) or `z(v) = L^T (v - m)`
//! (precision factor), `-2 log pi(v) = |z(v)|^2`. `z` is linear, so a proposal moves it by
//! `w = z(p) - z(x)`, the same map applied to the move `p - x` alone, and
//!
//! ```text
//! -2 log alpha = |z_x + w|^2 - |z_x|^2 = sum_i w_i (2 z_x,i + w_i)
//! ```
//!
//! the Gaussian target's difference of squares, coordinate by coordinate (coordinate `i` into
//! lane `i % 32`'s partial sum, as the models' data rows).

use super::{DATA_LANES, Model};
use crate::math;
use crate::mh::group_sum_emulated;

/// The largest dimension (a state and its `z` are held in arrays of this size).
pub const MAX_DENSE_DIM: usize = 128;

/// Which matrix the factor is of.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Factor {
    /// `Sigma = L L^T`.
    Covariance,
    /// `Sigma^-1 = L L^T`.
    Precision,
}

/// A dense Gaussian over a borrowed mean `[dim]` and factor `[dim, dim]` (row-major, lower
/// triangular: the entries above the diagonal are not read).
#[derive(Clone, Copy, Debug)]
pub struct DenseGaussian<'a> {
    mean: &'a [f32],
    factor: &'a [f32],
    of: Factor,
}

/// Why a dense Gaussian cannot be built.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum DenseGaussianError {
    /// The mean is empty or longer than [`MAX_DENSE_DIM`], or the factor is not `dim * dim`.
    Shape,
    /// A value is not finite: in the mean (`in_mean`) or the factor, at this flat index.
    NonFinite {
        /// In the mean if true, the factor if false.
        in_mean: bool,
        /// The element's index.
        index: usize,
    },
    /// The factor's diagonal entry `index` is not positive.
    NotPositiveDiagonal {
        /// The row (and column).
        index: usize,
    },
}

impl<'a> DenseGaussian<'a> {
    /// The Gaussian of mean `mean` whose covariance or precision (`of`) is `factor factor^T`.
    pub fn new(mean: &'a [f32], factor: &'a [f32], of: Factor) -> Result<Self, DenseGaussianError> {
        let dim = mean.len();
        if dim == 0 || dim > MAX_DENSE_DIM || factor.len() != dim * dim {
            return Err(DenseGaussianError::Shape);
        }
        if let Some(index) = mean.iter().position(|v| !v.is_finite()) {
            return Err(DenseGaussianError::NonFinite {
                in_mean: true,
                index,
            });
        }
        for i in 0..dim {
            for j in 0..=i {
                if !factor[i * dim + j].is_finite() {
                    let index = i * dim + j;
                    return Err(DenseGaussianError::NonFinite {
                        in_mean: false,
                        index,
                    });
                }
            }
            if factor[i * dim + i] <= 0.0 {
                return Err(DenseGaussianError::NotPositiveDiagonal { index: i });
            }
        }
        Ok(Self { mean, factor, of })
    }

    /// `z = L^-1 r` or `L^T r` (see the module documentation) of `r`, into `z`.
    fn map(&self, r: &[f32], z: &mut [f32]) {
        let dim = self.mean.len();
        let l = |i: usize, j: usize| self.factor[i * dim + j];
        match self.of {
            Factor::Covariance => {
                for i in 0..dim {
                    let mut rest = r[i];
                    for (j, &z_j) in z[..i].iter().enumerate() {
                        rest = math::fma(-l(i, j), z_j, rest);
                    }
                    z[i] = rest / l(i, i);
                }
            }
            Factor::Precision => {
                for (j, z_j) in z.iter_mut().enumerate().take(dim) {
                    let mut sum = 0.0f32;
                    for (i, &r_i) in r.iter().enumerate().take(dim).skip(j) {
                        sum = math::fma(l(i, j), r_i, sum);
                    }
                    *z_j = sum;
                }
            }
        }
    }
}

impl Model for DenseGaussian<'_> {
    fn dim(&self) -> usize {
        self.mean.len()
    }

    fn minus_two_log_alpha(&self, x: &[f32], p: &[f32]) -> f32 {
        let dim = self.dim();
        let (mut r, mut moved) = ([0.0f32; MAX_DENSE_DIM], [0.0f32; MAX_DENSE_DIM]);
        for i in 0..dim {
            r[i] = x[i] - self.mean[i];
            moved[i] = p[i] - x[i];
        }
        let (mut z, mut w) = ([0.0f32; MAX_DENSE_DIM], [0.0f32; MAX_DENSE_DIM]);
        self.map(&r[..dim], &mut z[..dim]);
        self.map(&moved[..dim], &mut w[..dim]);
        let mut partial = [0.0f32; DATA_LANES];
        for i in 0..dim {
            let lane = &mut partial[i % DATA_LANES];
            *lane = math::fma(w[i], math::fma(2.0, z[i], w[i]), *lane);
        }
        group_sum_emulated(&partial)
    }

    fn constrain(&self, v: &[f32], out: &mut [f32]) {
        out[..self.dim()].copy_from_slice(&v[..self.dim()]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Both factorisations of one Gaussian (`Sigma = [[4, 2], [2, 10]]`: `L = [[2, 0], [1, 3]]`;
    /// its precision's factor by hand) give `-2 log alpha` within 1e-5 of the f64 quadratic form,
    /// and bad factors are refused.
    #[test]
    fn both_factors_match_the_quadratic_form() {
        let mean = [1.0f32, -2.0];
        let cov_factor = [2.0f32, 0.0, 1.0, 3.0];
        // Sigma^-1 = [[10, -2], [-2, 4]] / 36 = U U^T with U lower: u11 = sqrt(10/36), ...
        let (p11, p21, p22) = (10.0f64 / 36.0, -2.0f64 / 36.0, 4.0f64 / 36.0);
        let u11 = p11.sqrt();
        let u21 = p21 / u11;
        let u22 = (p22 - u21 * u21).sqrt();
        let prec_factor = [u11 as f32, 0.0, u21 as f32, u22 as f32];
        let quad = |v: [f32; 2]| {
            let (a, b) = (f64::from(v[0] - mean[0]), f64::from(v[1] - mean[1]));
            p11 * a * a + 2.0 * p21 * a * b + p22 * b * b
        };
        let (x, p) = ([3.0f32, 1.0], [2.5f32, 1.7]);
        let want = quad(p) - quad(x);
        for (factor, of) in [
            (cov_factor, Factor::Covariance),
            (prec_factor, Factor::Precision),
        ] {
            let model = DenseGaussian::new(&mean, &factor, of).expect("a model");
            let got = f64::from(model.minus_two_log_alpha(&x, &p));
            assert!((got - want).abs() < 1e-5, "{of:?}: {got} against {want}");
        }
        let bad = [2.0f32, 0.0, 1.0, -3.0];
        let err = DenseGaussian::new(&mean, &bad, Factor::Covariance).map(|_| ());
        assert_eq!(
            err,
            Err(DenseGaussianError::NotPositiveDiagonal { index: 1 })
        );
    }
}
