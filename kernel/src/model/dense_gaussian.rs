//! The dense Gaussian `N(m, Sigma)`, given by a lower-triangular Cholesky factor `L` of its
//! covariance (`Sigma = L L^T`) or of its precision (`Sigma^-1 = L L^T`). The state is the
//! vector itself.
//!
//! # Its terms
//!
//! The model holds a *whitening* matrix `W` with `Sigma^-1 = W^T W` ([`whitening`] makes it
//! from either factor: `W = L^-1` or `W = L^T`), so that with `z(v) = W (v - m)`,
//! `-2 log pi(v) = |z(v)|^2`. `z` is linear, so a proposal moves it by `w = W (p - x)`, the
//! same map applied to the move alone, and
//!
//! ```text
//! -2 log alpha = |z_x + w|^2 - |z_x|^2 = sum_i w_i (2 z_x,i + w_i)
//! ```
//!
//! the Gaussian target's difference of squares, coordinate by coordinate. Coordinate `i`
//! needs only row `i` of `W`, so the coordinates are the model's data rows (coordinate `i`
//! into lane `i % 32`'s partial sum), as a regression's observations are.

use super::{Array, LaneRows, Model, ModelKind};
use crate::math;

/// The largest dimension.
pub const MAX_DENSE_DIM: usize = 128;

/// Which matrix the factor is of.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Factor {
    /// `Sigma = L L^T`.
    Covariance,
    /// `Sigma^-1 = L L^T`.
    Precision,
}

/// A dense Gaussian over a borrowed mean `[dim]` and whitening matrix `[dim, dim]` (row-major).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct DenseGaussian<'a> {
    mean: Array<'a>,
    whitening: Array<'a>,
}

/// Why a dense Gaussian cannot be built.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum DenseGaussianError {
    /// The mean is empty or longer than [`MAX_DENSE_DIM`], or a matrix is not `dim * dim`.
    Shape,
    /// A value is not finite: in the mean (`in_mean`) or the matrix, at this flat index.
    NonFinite {
        /// In the mean if true, the matrix if false.
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

/// The whitening matrix `W` (`Sigma^-1 = W^T W`, row-major `[dim, dim]`, into `out`) of the
/// Gaussian whose covariance or precision (`of`) is `L L^T`, `L` = `factor` (row-major, lower
/// triangular: the entries above the diagonal are not read): `W = L^-1` by substitution in
/// f64, or `W = L^T`. Refuses a non-finite entry or a diagonal entry that is not positive.
pub fn whitening(factor: &[f32], of: Factor, out: &mut [f32]) -> Result<(), DenseGaussianError> {
    let dim = (1..=MAX_DENSE_DIM)
        .find(|d| d * d == factor.len())
        .ok_or(DenseGaussianError::Shape)?;
    if out.len() != factor.len() {
        return Err(DenseGaussianError::Shape);
    }
    let l = |i: usize, j: usize| f64::from(factor[i * dim + j]);
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
    out.fill(0.0);
    match of {
        Factor::Precision => {
            for i in 0..dim {
                for j in 0..=i {
                    out[j * dim + i] = factor[i * dim + j];
                }
            }
        }
        Factor::Covariance => {
            // Column j of L^-1: solve L c = e_j by forward substitution (f64, one rounding
            // to f32 at the end; rows above j are 0).
            let mut column = [0.0f64; MAX_DENSE_DIM];
            for j in 0..dim {
                for i in j..dim {
                    let mut rest = if i == j { 1.0 } else { 0.0 };
                    for (k, &c_k) in column.iter().enumerate().take(i).skip(j) {
                        rest -= l(i, k) * c_k;
                    }
                    column[i] = rest / l(i, i);
                    out[i * dim + j] = column[i] as f32;
                }
            }
        }
    }
    Ok(())
}

impl<'a> DenseGaussian<'a> {
    /// The Gaussian of mean `mean` with whitening matrix `w` (`Sigma^-1 = W^T W`; see
    /// [`whitening`]), both finite.
    pub fn new(mean: &'a [f32], w: &'a [f32]) -> Result<Self, DenseGaussianError> {
        let dim = mean.len();
        if dim == 0 || dim > MAX_DENSE_DIM || w.len() != dim * dim {
            return Err(DenseGaussianError::Shape);
        }
        if let Some(index) = mean.iter().position(|v| !v.is_finite()) {
            return Err(DenseGaussianError::NonFinite {
                in_mean: true,
                index,
            });
        }
        if let Some(index) = w.iter().position(|v| !v.is_finite()) {
            return Err(DenseGaussianError::NonFinite {
                in_mean: false,
                index,
            });
        }
        Ok(Self {
            mean: Array::new(mean),
            whitening: Array::new(w),
        })
    }
}

impl Model for DenseGaussian<'_> {
    type Move = ();
    const KIND: ModelKind = ModelKind::DenseGaussian;

    fn dim(&self) -> usize {
        self.mean.len()
    }

    fn prepare(&self, _: &[f32], _: &[f32]) {}

    #[inline(always)]
    fn add_rows(&self, sum: f32, first: usize, x: &[f32], p: &[f32], _: &()) -> f32 {
        let (mean, dim) = (self.mean.get(), self.dim());
        LaneRows::new(self.whitening.get(), dim, first).fold(sum, |sum, row| {
            let (mut z, mut w) = (0.0f32, 0.0f32);
            // An index loop bounded by the shortest: no bounds check is left in it.
            let n = row.len().min(x.len()).min(p.len()).min(mean.len());
            for j in 0..n {
                z = math::fma(row[j], x[j] - mean[j], z);
                w = math::fma(row[j], p[j] - x[j], w);
            }
            math::fma(w, math::fma(2.0, z, w), sum)
        })
    }

    fn finish(&self, data: f32, _: &[f32], _: &[f32], _: &()) -> f32 {
        data
    }

    fn constrain(&self, v: &[f32], out: &mut [f32]) {
        out[..self.dim()].copy_from_slice(&v[..self.dim()]);
    }

    fn for_each_array(&mut self, f: &mut dyn FnMut(&mut Array<'_>)) {
        f(&mut self.mean);
        f(&mut self.whitening);
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
            let mut w = [0.0f32; 4];
            whitening(&factor, of, &mut w).expect("a factor");
            let model = DenseGaussian::new(&mean, &w).expect("a model");
            let got = f64::from(model.minus_two_log_alpha(&x, &p));
            assert!((got - want).abs() < 1e-5, "{of:?}: {got} against {want}");
        }
        let bad = [2.0f32, 0.0, 1.0, -3.0];
        let err = whitening(&bad, Factor::Covariance, &mut [0.0; 4]);
        assert_eq!(
            err,
            Err(DenseGaussianError::NotPositiveDiagonal { index: 1 })
        );
    }
}
