//! The diagonal Gaussian of the reference model: independent normals,
//! `log pi(v) = -1/2 sum_d ((v_d - mu_d) / sigma_d)^2`.
//!
//! # Its terms
//!
//! ```text
//! -2 log alpha = -2 (log pi(p) - log pi(x)) = sum_d (p_d - x_d) (p_d + x_d - 2 mu_d) / sigma_d^2
//! ```
//!
//! (a difference of squares, term by term). Summing the per-element differences avoids the
//! cancellation of subtracting two large sums: for a chain far in the tails, `log pi(x)` can be
//! -1e6 while `log alpha` is of order 1, and f32 would lose all of it. The test
//! `log_alpha_formula_beats_the_naive_difference` measures this.

use super::{Invalid, Target, check_location_scale, inverse_square};
use crate::math;

/// The diagonal Gaussian: parameters `mu` and `sigma`; the kernels read `mu` and
/// `inv_var = 1 / sigma^2`.
#[derive(Clone, Copy, Debug)]
pub struct Gaussian;

/// A quad of the Gaussian's arrays.
#[derive(Clone, Copy)]
pub struct GaussianQuad {
    /// The means.
    pub mu: [f32; 4],
    /// `1 / sigma^2`.
    pub inv_var: [f32; 4],
}

impl Target for Gaussian {
    const NAME: &'static str = "gaussian";
    const PARAMS: &'static [&'static str] = &["mu", "sigma"];
    const ARRAYS: usize = 2;
    type Quad = GaussianQuad;
    const NEXT_LONG_ROW_IN_REGISTERS: bool = true;

    #[inline(always)]
    fn quad(array: impl Fn(usize) -> [f32; 4]) -> GaussianQuad {
        GaussianQuad {
            mu: array(0),
            inv_var: array(1),
        }
    }

    #[inline(always)]
    fn add_quad_terms(sum: f32, x: [f32; 4], p: [f32; 4], quad: &GaussianQuad) -> f32 {
        add_quad_terms(sum, x, p, quad.mu, quad.inv_var)
    }

    fn pack(values: &[f32], arrays: &mut [f32]) -> Result<(), Invalid> {
        let (mu, sigma) = (values[0], values[1]);
        check_location_scale(mu, sigma)?;
        arrays[0] = mu;
        arrays[1] = inverse_square(sigma);
        Ok(())
    }

    fn log_density(v: f64, values: &[f32]) -> f64 {
        let z = (v - f64::from(values[0])) / f64::from(values[1]);
        -0.5 * z * z
    }

    fn moments(values: &[f32]) -> (Option<f64>, Option<f64>) {
        let sigma = f64::from(values[1]);
        (Some(f64::from(values[0])), Some(sigma * sigma))
    }
}

/// `sum` plus one element's share of `-2 log alpha`, `(p - x) (p + x - 2 mu) / sigma^2`, with
/// `inv_var = 1 / sigma^2` computed once per target on the host.
///
/// Operation by operation: `d = p - x`, `t = 2 (x - mu) + d` (fused), `sum + d * t * inv_var`
/// (the last multiply-add fused). `p + x - 2 mu` is never formed directly: when `x` and `p` are
/// close to each other but far from `mu` (or `mu` is large), `x - mu` and `d` are nearly exact
/// and `t` loses nothing, where `(p + x) - 2 mu` would cancel.
#[inline(always)]
pub fn add_log_alpha_term(sum: f32, x: f32, p: f32, mu: f32, inv_var: f32) -> f32 {
    let d = p - x;
    let t = math::fma(2.0, x - mu, d);
    math::fma(d * t, inv_var, sum)
}

/// `sum` plus the terms ([`add_log_alpha_term`]) of a quad's four elements, in order.
///
/// All four are added. The elements of a last partial quad past `dim` are loaded as zeros,
/// `inv_var` included, so their terms are exactly zero: no per-element bounds check in the hot
/// loop.
#[inline(always)]
pub fn add_quad_terms(sum: f32, x: [f32; 4], p: [f32; 4], mu: [f32; 4], inv_var: [f32; 4]) -> f32 {
    let mut sum = sum;
    for i in 0..4 {
        sum = add_log_alpha_term(sum, x[i], p[i], mu[i], inv_var[i]);
    }
    sum
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{layout, mh};

    /// log pi(v) in f64, the reference model's formula verbatim.
    fn log_pi_f64(v: &[f64], mu: &[f64], sigma: &[f64]) -> f64 {
        -0.5 * v
            .iter()
            .zip(mu.iter().zip(sigma))
            .map(|(v, (m, s))| ((v - m) / s).powi(2))
            .sum::<f64>()
    }

    /// The formula's f32 log alpha over a whole row, quad by quad.
    fn log_alpha_f32(x: &[f32], p: &[f32], mu: &[f32], inv_var: &[f32]) -> f32 {
        let mut total = 0.0;
        for q in 0..layout::quads_per_row(x.len()) {
            let valid = layout::valid_in_quad(x.len(), q);
            let quad =
                |a: &[f32]| core::array::from_fn(|i| if i < valid { a[4 * q + i] } else { 0.0 });
            total = add_quad_terms(total, quad(x), quad(p), quad(mu), quad(inv_var));
        }
        mh::log_alpha(total)
    }

    #[test]
    fn log_alpha_formula_matches_the_naive_difference_in_f64() {
        // Ordinary chains: x and p within a few sigma of mu.
        let dim = 37;
        let mu: std::vec::Vec<f32> = (0..dim).map(|d| (d as f32 * 0.37).sin()).collect();
        let sigma: std::vec::Vec<f32> = (0..dim).map(|d| 0.5 + (d % 5) as f32 * 0.3).collect();
        let x: std::vec::Vec<f32> = (0..dim)
            .map(|d| mu[d] + sigma[d] * (d as f32 * 1.3).cos())
            .collect();
        let p: std::vec::Vec<f32> = (0..dim)
            .map(|d| x[d] + 0.1 * (d as f32 * 2.1).sin())
            .collect();
        let inv_var: std::vec::Vec<f32> = sigma
            .iter()
            .map(|s| (1.0 / (f64::from(*s).powi(2))) as f32)
            .collect();
        let to64 = |a: &[f32]| {
            a.iter()
                .map(|&v| f64::from(v))
                .collect::<std::vec::Vec<f64>>()
        };
        let (x64, p64, mu64, s64) = (to64(&x), to64(&p), to64(&mu), to64(&sigma));
        let naive = log_pi_f64(&p64, &mu64, &s64) - log_pi_f64(&x64, &mu64, &s64);
        let ours = f64::from(log_alpha_f32(&x, &p, &mu, &inv_var));
        // 37 terms of magnitude <~ 1, each with a few f32 roundings (2^-24 ~= 6e-8 relative):
        // the error is far below 1e-5 absolute.
        assert!(
            (ours - naive).abs() < 1e-5,
            "ours {ours}, naive f64 {naive}"
        );
    }

    #[test]
    fn log_alpha_formula_beats_the_naive_difference() {
        // A chain 300 sigma from mu in 256 dims: log pi(x) ~= -1.2e7, while a small move
        // changes it by O(10). The naive f32 difference of sums loses most digits; the
        // per-element formula keeps them.
        let dim = 256;
        let mu = std::vec![0.0f32; dim];
        let sigma = std::vec![1.0f32; dim];
        let inv_var = std::vec![1.0f32; dim];
        let x: std::vec::Vec<f32> = (0..dim).map(|d| 300.0 + (d as f32 * 0.1).sin()).collect();
        let p: std::vec::Vec<f32> = (0..dim)
            .map(|d| x[d] + 1e-3 * (d as f32 * 0.7).cos())
            .collect();
        let to64 = |a: &[f32]| {
            a.iter()
                .map(|&v| f64::from(v))
                .collect::<std::vec::Vec<f64>>()
        };
        let exact = log_pi_f64(&to64(&p), &to64(&mu), &to64(&sigma))
            - log_pi_f64(&to64(&x), &to64(&mu), &to64(&sigma));
        let naive_f32 = {
            let log_pi = |v: &[f32]| -0.5 * v.iter().map(|v| v * v).sum::<f32>();
            f64::from(log_pi(&p) - log_pi(&x))
        };
        let ours = f64::from(log_alpha_f32(&x, &p, &mu, &inv_var));
        let (err_ours, err_naive) = ((ours - exact).abs(), (naive_f32 - exact).abs());
        // The formula's error is bounded by a few roundings of terms of size |p-x|*600 ~ 0.6:
        // 256 * 0.6 * 2^-23 ~= 2e-5; allow 1e-4. The naive difference is off by about
        // ulp(1.2e7) = 1, so it must be at least 100 times worse.
        assert!(err_ours < 1e-4, "formula error {err_ours} (exact {exact})");
        assert!(
            err_naive > 100.0 * err_ours,
            "naive error {err_naive} vs formula {err_ours}"
        );
    }

    #[test]
    fn non_finite_x_never_accepts() {
        for bad in [f32::NAN, f32::INFINITY, f32::NEG_INFINITY] {
            let x = [bad, 0.0, 0.0, 0.0];
            let p = mh::propose(x, [0.5; 4], 0.1);
            let la = mh::log_alpha(add_quad_terms(0.0, x, p, [0.0; 4], [1.0; 4]));
            // Even the most favourable uniform (u = 0 -> log u = -23) must reject.
            assert!(
                !mh::accept(mh::log_uniform(0.0), la),
                "x = {bad} accepted (log alpha {la})"
            );
        }
    }
}
