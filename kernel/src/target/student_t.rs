//! Student's t per dimension: location `mu`, scale `sigma`, degrees of freedom `df` (`nu`),
//! `log pi(v) = sum_d -(nu_d + 1) / 2 ln(1 + z_d^2 / nu_d)` with `z = (v - mu) / sigma`.
//!
//! # Its terms
//!
//! ```text
//! -2 log alpha = sum_d (nu + 1) ln((nu + z_p^2) / (nu + z_x^2))
//!              = sum_d (nu + 1) ln_1p((z_p^2 - z_x^2) / nu / (1 + z_x^2 / nu))
//! ```
//!
//! `z_p^2 - z_x^2` is the Gaussian's term (`(p - x)(p + x - 2 mu) / sigma^2`, formed the same
//! cancellation-free way), and `ln_1p` keeps the small ratios of nearby states exact where
//! `ln` of a ratio near 1 would not. The kernels read `mu`, `1 / sigma^2`, `1 / nu` and
//! `nu + 1`: with all four zero (the padding) the term is `0 * ln_1p(0 / 1) = 0`.
//!
//! One `ln` and two divisions per element: the Student-t step costs more arithmetic than the
//! Gaussian's, on the same memory traffic.

use super::{Invalid, Target, check_location_scale, inverse_square, ln_1p};
use crate::math;

/// Student's t per dimension: parameters `mu`, `sigma` and `df`.
#[derive(Clone, Copy, Debug)]
pub struct StudentT;

/// A quad of the Student-t's arrays.
#[derive(Clone, Copy)]
pub struct StudentTQuad {
    mu: [f32; 4],
    inv_var: [f32; 4],
    inv_df: [f32; 4],
    df_plus_one: [f32; 4],
}

/// The degrees of freedom the step computes with: `[2^-6, 2^60]`. With `1 / nu <= 2^6` and a
/// state's `z^2` at most `2^120` (the host's check of initial states), `z^2 / nu` stays below
/// float32's largest value.
pub const DF_RANGE: (f32, f32) = (1.0 / 64.0, (1u64 << 60) as f32);

impl Target for StudentT {
    const NAME: &'static str = "student-t";
    const PARAMS: &'static [&'static str] = &["mu", "sigma", "df"];
    const ARRAYS: usize = 4;
    type Quad = StudentTQuad;

    #[inline(always)]
    fn quad(array: impl Fn(usize) -> [f32; 4]) -> StudentTQuad {
        StudentTQuad {
            mu: array(0),
            inv_var: array(1),
            inv_df: array(2),
            df_plus_one: array(3),
        }
    }

    #[inline(always)]
    fn add_quad_terms(sum: f32, x: [f32; 4], p: [f32; 4], q: &StudentTQuad) -> f32 {
        let mut sum = sum;
        for i in 0..4 {
            let d = p[i] - x[i];
            let from_mu = x[i] - q.mu[i];
            // z_p^2 - z_x^2 and z_x^2, as the Gaussian forms them.
            let difference = d * math::fma(2.0, from_mu, d) * q.inv_var[i];
            let z2 = from_mu * from_mu * q.inv_var[i];
            let ratio = q.inv_df[i] * difference / math::fma(q.inv_df[i], z2, 1.0);
            sum = math::fma(q.df_plus_one[i], ln_1p(ratio), sum);
        }
        sum
    }

    fn pack(values: &[f32], arrays: &mut [f32]) -> Result<(), Invalid> {
        let (mu, sigma, df) = (values[0], values[1], values[2]);
        check_location_scale(mu, sigma)?;
        if df.is_nan() || df <= 0.0 {
            return Err(Invalid {
                param: 2,
                why: "must be > 0",
            });
        }
        if !(DF_RANGE.0..=DF_RANGE.1).contains(&df) {
            return Err(Invalid {
                param: 2,
                why: "is outside [1/64, 2^60]: beyond it z^2 / df overflows float32",
            });
        }
        arrays[0] = mu;
        arrays[1] = inverse_square(sigma);
        arrays[2] = (1.0 / f64::from(df)) as f32;
        arrays[3] = (f64::from(df) + 1.0) as f32;
        Ok(())
    }

    fn log_density(v: f64, values: &[f32]) -> f64 {
        let [mu, sigma, df] = [0, 1, 2].map(|i| f64::from(values[i]));
        let z = (v - mu) / sigma;
        -0.5 * (df + 1.0) * libm::log1p(z * z / df)
    }

    /// The mean `mu` for `df > 1`, the variance `df / (df - 2) sigma^2` for `df > 2`.
    fn moments(values: &[f32]) -> (Option<f64>, Option<f64>) {
        let [mu, sigma, df] = [0, 1, 2].map(|i| f64::from(values[i]));
        let mean = (df > 1.0).then_some(mu);
        let variance = (df > 2.0).then(|| df / (df - 2.0) * sigma * sigma);
        (mean, variance)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn arrays(values: [f32; 3]) -> [f32; 4] {
        let mut a = [0.0; 4];
        StudentT::pack(&values, &mut a).expect("valid");
        a
    }

    /// The terms of a quad against `-2 (log pi(p) - log pi(x))` from `log_density` in f64, for
    /// moves near the centre, in the tails and across: within 1e-5 relative to the largest
    /// term's size (a few float32 roundings, 2^-24 each, and `ln`'s 7 ulp).
    #[test]
    fn terms_match_the_log_density_difference() {
        let params = [
            [0.5, 2.0, 3.0],
            [-1.0, 0.1, 1.0],
            [3.0, 1.0, 30.0],
            [0.0, 5.0, 0.5],
        ];
        let a: [[f32; 4]; 4] =
            core::array::from_fn(|k| core::array::from_fn(|i| arrays(params[i])[k]));
        let quad = StudentT::quad(|k| a[k]);
        for (x, p) in [
            ([0.4, -1.05, 3.1, 0.3], [0.6, -0.98, 2.7, -0.2]),
            ([40.0, 3.0, -20.0, 1e4], [41.0, 2.5, -19.0, 1.2e4]),
            ([-5.0, 0.0, 0.0, 0.0], [5.0, 0.0, 10.0, -300.0]),
        ] {
            let got = StudentT::add_quad_terms(0.0, x, p, &quad);
            let mut want = 0.0;
            let mut size = 0.0f64;
            for i in 0..4 {
                let lp = |v: f32| StudentT::log_density(v.into(), &params[i]);
                let term = -2.0 * (lp(p[i]) - lp(x[i]));
                want += term;
                size = size.max(term.abs());
            }
            let err = (f64::from(got) - want).abs();
            assert!(
                err <= 1e-5 * size.max(1e-3),
                "x {x:?} p {p:?}: {got} vs {want}"
            );
        }
    }

    #[test]
    fn parameters_are_checked_and_moments_exist_where_they_do() {
        let bad = |values: [f32; 3]| StudentT::pack(&values, &mut [0.0; 4]).map_err(|e| e.param);
        assert_eq!(bad([0.0, 1.0, 0.0]), Err(2));
        assert_eq!(bad([0.0, 1.0, f32::NAN]), Err(2));
        assert_eq!(bad([0.0, 1.0, 1e-3]), Err(2));
        assert_eq!(bad([0.0, -1.0, 3.0]), Err(1));
        assert_eq!(bad([f32::INFINITY, 1.0, 3.0]), Err(0));
        assert_eq!(StudentT::moments(&[1.0, 2.0, 4.0]), (Some(1.0), Some(8.0)));
        assert_eq!(StudentT::moments(&[1.0, 2.0, 2.0]), (Some(1.0), None));
        assert_eq!(StudentT::moments(&[1.0, 2.0, 1.0]), (None, None));
    }
}
