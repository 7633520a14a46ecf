//! The hierarchical normal model, non-centred (eight schools): group effects
//! `theta_j = mu + tau * t_j` with `t_j ~ normal(0, 1)`, observations `y_j ~ normal(theta_j,
//! sigma_j)` with known `sigma_j`, a prior on `mu` and one on `tau > 0`. The state is
//! `[t_1, ..., t_J, mu, log tau]`; the constrained scale is `[theta_1, ..., theta_J, mu, tau]`.
//!
//! # Its terms
//!
//! Group `j`'s observation, with `r = y_j - mu_x - tau_x t_x` the state's residual and the
//! proposal's move of the fit `m = (mu_p - mu_x) + tau_p (t_p - t_x) + (tau_p - tau_x) t_x`,
//! adds `(r - m)^2 / sigma^2 - r^2 / sigma^2 = m (m - 2 r) / sigma^2`: the difference of
//! squares again, from the moves. Each `t_j` adds its standard normal prior's term (the
//! Gaussian target's), `mu` its prior's, `tau` its scale prior's and the Jacobian of `log tau`
//! ([`super::priors`]). The groups are the data rows, summed in a warp's order
//! ([`super::DATA_LANES`]).

use super::linreg::RegressionError;
use super::priors::{Packed, add_scale_terms};
use super::{Array, CoefficientPrior, Model, ModelKind, ScalePrior, lane_values};
use crate::math::{self, exp};

/// The largest number of groups (a state holds one `t_j` per group, and two more).
pub const MAX_GROUPS: usize = 254;

/// The non-centred hierarchical normal model over borrowed data: `y[J]`, `sigma[J]`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct HierarchicalNormal<'a> {
    y: Array<'a>,
    inv_var: [f32; MAX_GROUPS],
    effect_prior: Packed,
    mu_prior: Packed,
    tau_prior: Packed,
}

impl<'a> HierarchicalNormal<'a> {
    /// The model of observations `y` with standard errors `sigma` (finite, `sigma > 0`, as
    /// many as `y`, at most [`MAX_GROUPS`]), a prior on `mu` and one on `tau`. Errors as
    /// [`super::LinearRegression::new`], a bad `sigma` as `StandardError`, a bad prior with
    /// index 0 for `mu`, `None` for `tau`.
    pub fn new(
        y: &'a [f32],
        sigma: &[f32],
        mu_prior: CoefficientPrior,
        tau_prior: ScalePrior,
    ) -> Result<Self, RegressionError> {
        if y.is_empty() || y.len() > MAX_GROUPS || sigma.len() != y.len() {
            return Err(RegressionError::Shape);
        }
        if let Some(index) = y.iter().position(|v| !v.is_finite()) {
            return Err(RegressionError::NonFinite { in_x: false, index });
        }
        let mut inv_var = [0.0; MAX_GROUPS];
        for (j, &s) in sigma.iter().enumerate() {
            let v = crate::target::inverse_square(s);
            if !(s.is_finite() && s > 0.0 && v.is_finite() && v > 0.0) {
                return Err(RegressionError::StandardError { index: j });
            }
            inv_var[j] = v;
        }
        let standard = CoefficientPrior::Normal {
            loc: 0.0,
            scale: 1.0,
        };
        let prior = |index| move |invalid| RegressionError::Prior { index, invalid };
        Ok(Self {
            y: Array::new(y),
            inv_var,
            effect_prior: standard.pack().map_err(prior(Some(0)))?,
            mu_prior: mu_prior.pack().map_err(prior(Some(0)))?,
            tau_prior: tau_prior.pack().map_err(prior(None))?,
        })
    }

    /// The number of groups.
    pub fn groups(&self) -> usize {
        self.y.len()
    }
}

/// What the groups' rows need from a state pair: `mu` and `tau` of both states.
#[derive(Clone, Copy, Debug)]
pub struct LocationScaleMove {
    mu: (f32, f32),
    tau: (f32, f32),
}

impl Model for HierarchicalNormal<'_> {
    type Move = LocationScaleMove;
    const KIND: ModelKind = ModelKind::HierarchicalNormal;

    fn dim(&self) -> usize {
        self.groups() + 2
    }

    fn prepare(&self, x: &[f32], p: &[f32]) -> LocationScaleMove {
        let j = self.groups();
        LocationScaleMove {
            mu: (x[j], p[j]),
            tau: (exp(x[j + 1]), exp(p[j + 1])),
        }
    }

    #[inline(always)]
    fn add_rows(&self, sum: f32, first: usize, x: &[f32], p: &[f32], m: &LocationScaleMove) -> f32 {
        let ((mu_x, mu_p), (tau_x, tau_p)) = (m.mu, m.tau);
        let j = self.groups();
        let groups = lane_values(self.y.get(), first).zip(lane_values(&self.inv_var[..j], first));
        let effects = lane_values(&x[..j], first).zip(lane_values(&p[..j], first));
        groups
            .zip(effects)
            .fold(sum, |sum, ((y, inv_var), (t_x, t_p))| {
                let r = y - math::fma(tau_x, t_x, mu_x);
                let moved = math::fma(tau_p - tau_x, t_x, math::fma(tau_p, t_p - t_x, mu_p - mu_x));
                math::fma(moved * math::fma(-2.0, r, moved), inv_var, sum)
            })
    }

    fn finish(&self, data: f32, x: &[f32], p: &[f32], m: &LocationScaleMove) -> f32 {
        let j_count = self.groups();
        let mut total = data;
        for j in 0..j_count {
            total = self.effect_prior.add_term(total, x[j], p[j]);
        }
        total = self.mu_prior.add_term(total, m.mu.0, m.mu.1);
        let s = (x[j_count + 1], p[j_count + 1]);
        add_scale_terms(total, &self.tau_prior, s, m.tau)
    }

    fn constrain(&self, v: &[f32], out: &mut [f32]) {
        let j_count = self.groups();
        let (mu, tau) = (v[j_count], exp(v[j_count + 1]));
        for j in 0..j_count {
            out[j] = math::fma(tau, v[j], mu);
        }
        out[j_count] = mu;
        out[j_count + 1] = tau;
    }

    fn for_each_array(&mut self, f: &mut dyn FnMut(&mut Array<'_>)) {
        f(&mut self.y);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `-2 log pi` in f64 from the model's definition (eight schools' data, normal(0, 5) on
    /// mu, half-Cauchy(5) on tau, the Jacobian of log tau).
    fn minus_two_log_pi(y: &[f32], sigma: &[f32], v: &[f32]) -> f64 {
        let j = y.len();
        let (mu, s) = (f64::from(v[j]), f64::from(v[j + 1]));
        let tau = s.exp();
        let mut total = 0.0;
        for i in 0..j {
            let t = f64::from(v[i]);
            let z = (f64::from(y[i]) - mu - tau * t) / f64::from(sigma[i]);
            total += t * t + z * z;
        }
        total + (mu / 5.0).powi(2) + 2.0 * (1.0 + (tau / 5.0).powi(2)).ln() - 2.0 * s
    }

    /// Against the f64 formula on eight schools: within 1e-5 relative (a handful of f32
    /// roundings on terms of order 1 to 100).
    #[test]
    fn terms_match_the_definition_in_f64() {
        let y = [28.0, 8.0, -3.0, 7.0, -1.0, 1.0, 18.0, 12.0];
        let sigma = [15.0, 10.0, 16.0, 11.0, 9.0, 11.0, 10.0, 18.0];
        let mu_prior = CoefficientPrior::Normal {
            loc: 0.0,
            scale: 5.0,
        };
        let tau_prior = ScalePrior::HalfStudentT {
            df: 1.0,
            scale: 5.0,
        };
        let model = HierarchicalNormal::new(&y, &sigma, mu_prior, tau_prior).expect("a model");
        let x = [0.3, -0.2, 1.1, 0.0, -1.5, 0.7, 0.2, -0.4, 4.0, 1.2];
        let p = [0.31, -0.25, 1.0, 0.05, -1.45, 0.72, 0.21, -0.38, 4.3, 1.15];
        let want = minus_two_log_pi(&y, &sigma, &p) - minus_two_log_pi(&y, &sigma, &x);
        let got = f64::from(model.minus_two_log_alpha(&x, &p));
        assert!(
            (got - want).abs() < 1e-5 * want.abs().max(1.0),
            "{got} against {want}"
        );
        let mut out = [0.0; 10];
        model.constrain(&x, &mut out);
        assert_eq!(out[8], 4.0);
        assert!((f64::from(out[0]) - (4.0 + 1.2f64.exp() * 0.3)).abs() < 1e-5);
        let bad = HierarchicalNormal::new(&y, &[1.0; 7], mu_prior, tau_prior);
        assert!(matches!(bad, Err(RegressionError::Shape)));
        let zero = [15.0, 10.0, 0.0, 11.0, 9.0, 11.0, 10.0, 18.0];
        let bad = HierarchicalNormal::new(&y, &zero, mu_prior, tau_prior).map(|_| ());
        assert_eq!(bad, Err(RegressionError::StandardError { index: 2 }));
    }
}
