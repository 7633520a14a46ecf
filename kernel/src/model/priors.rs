//! The priors of a regression: one per coefficient, one on the noise scale `sigma`.
//!
//! Each prior's share of `-2 log alpha` is one of the separable targets' terms
//! ([`crate::target`]) on one element, so the priors reuse their cancellation-free forms: a
//! normal prior is the Gaussian's term, a Student-t prior the Student-t's, and the half-normal
//! and half-Student-t priors on `sigma > 0` are those terms at location 0, taken on `sigma`
//! itself. The state holds `s = log sigma`; the density of `s` is the density of `sigma`
//! times the Jacobian `d sigma / d s = sigma`, which adds `-2 (s_p - s_x)` to `-2 log alpha`.

use crate::target::{Gaussian, Invalid, StudentT, Target};

/// The prior of one regression coefficient.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum CoefficientPrior {
    /// Flat (improper): no term.
    Flat,
    /// Normal: location, scale.
    Normal {
        /// The prior mean.
        loc: f32,
        /// Its standard deviation.
        scale: f32,
    },
    /// Student's t: degrees of freedom, location, scale.
    StudentT {
        /// Degrees of freedom, > 0.
        df: f32,
        /// The location.
        loc: f32,
        /// The scale.
        scale: f32,
    },
}

/// The prior of the noise scale `sigma > 0` (sampled as `log sigma`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum ScalePrior {
    /// Flat on `sigma` (improper).
    Flat,
    /// Half-normal: the normal(0, scale) restricted to `sigma > 0`.
    HalfNormal {
        /// Its scale.
        scale: f32,
    },
    /// Half-Student-t: Student's t(df, 0, scale) restricted to `sigma > 0`; `df = 1` is the
    /// half-Cauchy.
    HalfStudentT {
        /// Degrees of freedom, > 0.
        df: f32,
        /// Its scale.
        scale: f32,
    },
}

/// A prior's packed arrays for one element: a separable target's kernel arrays (at most four).
/// `repr(C, u32)`: a model holding it is copied to the device as bytes ([`super::Array`]).
#[repr(C, u32)]
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Packed {
    Flat,
    Normal([f32; 2]),
    StudentT([f32; 4]),
}

impl Packed {
    /// The prior's target arrays from its parameters (`values` in the target's `PARAMS` order),
    /// checked by the target: which parameter is unusable and why.
    fn of<T: Target, const A: usize>(values: &[f32]) -> Result<[f32; A], Invalid> {
        let mut arrays = [0.0; A];
        T::pack(values, &mut arrays)?;
        Ok(arrays)
    }

    /// `sum` plus this prior's share of `-2 log alpha` for one element moving from `x` to `p`.
    #[inline(always)]
    pub(crate) fn add_term(&self, sum: f32, x: f32, p: f32) -> f32 {
        // One element in a quad: the three others are zeros against zero arrays, which add
        // exactly 0 (the `Target` contract).
        let one = |a: &[f32], k: usize| [a[k], 0.0, 0.0, 0.0];
        let (x, p) = ([x, 0.0, 0.0, 0.0], [p, 0.0, 0.0, 0.0]);
        match self {
            Packed::Flat => sum,
            Packed::Normal(a) => {
                Gaussian::add_quad_terms(sum, x, p, &Gaussian::quad(|k| one(a, k)))
            }
            Packed::StudentT(a) => {
                StudentT::add_quad_terms(sum, x, p, &StudentT::quad(|k| one(a, k)))
            }
        }
    }
}

impl CoefficientPrior {
    /// The prior in the form the step computes with, or which parameter (0 loc, 1 scale, 2
    /// df) is unusable and why.
    pub(crate) fn pack(&self) -> Result<Packed, Invalid> {
        Ok(match *self {
            CoefficientPrior::Flat => Packed::Flat,
            CoefficientPrior::Normal { loc, scale } => {
                Packed::Normal(Packed::of::<Gaussian, 2>(&[loc, scale])?)
            }
            CoefficientPrior::StudentT { df, loc, scale } => {
                Packed::StudentT(Packed::of::<StudentT, 4>(&[loc, scale, df])?)
            }
        })
    }
}

impl ScalePrior {
    /// As [`CoefficientPrior::pack`], at location 0 (parameter 1 scale, 2 df).
    pub(crate) fn pack(&self) -> Result<Packed, Invalid> {
        Ok(match *self {
            ScalePrior::Flat => Packed::Flat,
            ScalePrior::HalfNormal { scale } => {
                Packed::Normal(Packed::of::<Gaussian, 2>(&[0.0, scale])?)
            }
            ScalePrior::HalfStudentT { df, scale } => {
                Packed::StudentT(Packed::of::<StudentT, 4>(&[0.0, scale, df])?)
            }
        })
    }
}

/// `sum` plus the scale prior's share and the Jacobian's for `log sigma` moving from `s_x` to
/// `s_p` (`sigma_x = e^s_x`, `sigma_p = e^s_p` given).
#[inline(always)]
pub(crate) fn add_scale_terms(
    sum: f32,
    prior: &Packed,
    (s_x, s_p): (f32, f32),
    (sigma_x, sigma_p): (f32, f32),
) -> f32 {
    prior.add_term(sum, sigma_x, sigma_p) - 2.0 * (s_p - s_x)
}
