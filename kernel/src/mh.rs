//! The Metropolis–Hastings step of one row, as pure functions of values.
//!
//! The GPU kernel (the `gpu` module) and the CPU reference (the host library's `cpu` module) both
//! call these; only loading and storing differ between them. The work of a row is split the way
//! the GPU splits it, so the CPU can follow the same order of floating-point operations:
//!
//! - a row of `dim` elements is cut into *quads* of 4 consecutive elements (the last one may be
//!   partial): one Philox call gives the 4 normals of a quad (see [`crate::rng`]);
//! - a row is worked on by a *group* of `G` = [`group_width`]`(dim)` consecutive lanes of a warp
//!   (`G` is a power of two, 1 to 32: about two quads per lane, so a warp holds `32 / G` rows
//!   at once and no lane idles on short rows); lane `j` of the group owns quads
//!   `j, j + G, j + 2G, ...`, so neighbouring lanes read neighbouring 16-byte quads;
//! - each lane adds the terms of its elements to its partial sum, quad by quad, in order
//!   ([`add_quad_terms`]);
//! - the group adds its `G` partial sums with a butterfly (xor) reduction:
//!   [`group_sum_emulated`] is that order on the CPU;
//! - every lane of the group then holds `log alpha` and makes the same decision ([`accept`]).
//!
//! # The log acceptance ratio
//!
//! With `log pi(v) = -1/2 sum_d ((v_d - mu_d) / sigma_d)^2`,
//!
//! ```text
//! log alpha = log pi(p) - log pi(x) = -1/2 sum_d (p_d - x_d) (p_d + x_d - 2 mu_d) / sigma_d^2
//! ```
//!
//! (a difference of squares, term by term). Summing the per-element differences avoids the
//! cancellation of subtracting two large sums: for a chain far in the tails, `log pi(x)` can be
//! -1e6 while `log alpha` is of order 1, and f32 would lose all of it. The test
//! `log_alpha_formula_beats_the_naive_difference` measures this.

use crate::math;

/// Threads in a warp: the unit that executes in lock step.
pub const WARP_SIZE: usize = 32;

/// Quads each lane of a group should own: few enough that short rows still spread over
/// several lanes (latency), enough that a warp holds several rows (no idle lanes).
pub const QUADS_PER_LANE_TARGET: usize = 2;

/// The most quads a lane keeps in registers with random numbers drawn in the kernel: with 32
/// lanes, rows up to 32 x 2 x 4 = 256 elements stay in registers between computing the
/// proposal and writing it. Longer rows are streamed (the proposal written at once, and `x`
/// written back over it if rejected).
///
/// Measured on the H200 at (65536, 1024): keeping 8 quads per lane there took 154 to 248
/// registers with Philox and Box–Muller in flight and ran at 30 to 59 % of the copy bandwidth;
/// streaming runs at 68 %.
pub const MAX_RESIDENT_QUADS_PER_LANE: usize = 2;

/// The most quads a lane keeps in registers when the random numbers come from the caller
/// (rows up to 1024 elements). Without Philox in flight the registers suffice, and streaming's
/// second write of rejected rows costs more: measured on the H200 at (65536, 1024), 96 % of the
/// copy bandwidth register-resident against 65 % streamed.
pub const MAX_RESIDENT_QUADS_CALLER_NOISE: usize = 8;

/// Quads per lane the fused K-step kernel keeps in registers at most (rows up to
/// `8 * 4 * 32 = 1024` elements); longer rows run as single steps.
pub const MAX_FUSED_QUADS_PER_LANE: usize = 8;

/// Lanes per row, `G`: the power of two (1 to 32) that gives each lane about
/// [`QUADS_PER_LANE_TARGET`] quads. Depends on `dim` alone, so the order of the sums, and hence
/// the exact bits of `log alpha`, depend on `dim` alone (not on the batch or the launch).
///
/// Examples: dim 1..=8 -> 1, dim 64 -> 8, dim 256 -> 32, dim 4096 -> 32.
#[inline(always)]
pub fn group_width(dim: usize) -> usize {
    quads_per_row(dim)
        .div_ceil(QUADS_PER_LANE_TARGET)
        .next_power_of_two()
        .min(WARP_SIZE)
}

/// The most quads any lane of a row's group owns: `ceil(quads / G)`.
#[inline(always)]
pub fn quads_per_lane(dim: usize) -> usize {
    quads_per_row(dim).div_ceil(group_width(dim))
}

/// Elements per quad: one Philox call (128 bits) gives four normals.
pub const QUAD: usize = 4;

/// The floor applied to the uniform before its logarithm: `log(max(u, 1e-10))`, as in the
/// reference model, so `u = 0` gives a finite `log u ~= -23.03`.
pub const MIN_UNIFORM: f32 = 1e-10;

/// Number of quads in a row of `dim` elements.
#[inline(always)]
pub fn quads_per_row(dim: usize) -> usize {
    dim.div_ceil(QUAD)
}

/// How many elements of quad `quad` lie inside a row of `dim` elements: 4, except for a last
/// partial quad.
#[inline(always)]
pub fn valid_in_quad(dim: usize, quad: usize) -> usize {
    let rest = dim - QUAD * quad;
    if rest < QUAD { rest } else { QUAD }
}

/// The proposal of a quad: `p = x + step_size * eps`, element by element, as one fused
/// multiply-add (one rounding).
#[inline(always)]
pub fn propose(x: [f32; 4], eps: [f32; 4], step_size: f32) -> [f32; 4] {
    propose_scaled(x, eps, [step_size; QUAD])
}

/// The proposal of a quad with a scale per element (diagonal preconditioning):
/// `p = x + scale * eps`, element by element, as one fused multiply-add. With every scale equal
/// to the step size this is [`propose`], to the bit.
#[inline(always)]
pub fn propose_scaled(x: [f32; 4], eps: [f32; 4], scale: [f32; 4]) -> [f32; 4] {
    let mut p = [0.0; 4];
    for i in 0..QUAD {
        p[i] = math::fma(scale[i], eps[i], x[i]);
    }
    p
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
    for i in 0..QUAD {
        sum = add_log_alpha_term(sum, x[i], p[i], mu[i], inv_var[i]);
    }
    sum
}

/// `log alpha` from the row's total of [`add_log_alpha_term`]'s terms.
#[inline(always)]
pub fn log_alpha(term_total: f32) -> f32 {
    -0.5 * term_total
}

/// `log(max(u, 1e-10))`. A NaN `u` stays NaN (never accepts), as `torch.clamp` keeps NaN.
///
/// For `u` in `[0, 1]` (all the API lets through) the clamped value is a positive normal float,
/// so the branch-free [`math::ln_normal`] applies; the NaN case is a select, not a branch.
#[inline(always)]
pub fn log_uniform(u: f32) -> f32 {
    let clamped = if u < MIN_UNIFORM { MIN_UNIFORM } else { u };
    if u.is_nan() {
        u
    } else {
        math::ln_normal(clamped)
    }
}

/// A row's decision threshold, `-2 log u`: `accept(log_u, log_alpha(t))` is
/// `below_threshold(t, threshold(log_u))`, with the multiplication by `-1/2` out of the step.
/// The production kernels compute the threshold once per row (the fused kernel once per row
/// and step, in the block that draws the uniforms `G` steps at a time) and compare each step's
/// sum of terms with it: one instruction a step fewer than `accept`.
#[inline(always)]
pub fn threshold(log_u: f32) -> f32 {
    -2.0 * log_u
}

/// The Metropolis decision from a row's sum of terms and its [`threshold`]: accept when
/// `term_total < threshold`. The same decisions as [`accept`]`(log_u, log_alpha(term_total))`:
/// multiplying by -2 or -1/2 is exact (and reverses the order) for every float32 here, except
/// that `-1/2` times the smallest subnormal rounds to 0, so the two differ only for
/// `term_total = -2^-149` with `log u = 0`. NaN anywhere never accepts.
#[inline(always)]
pub fn below_threshold(term_total: f32, threshold: f32) -> bool {
    term_total < threshold
}

/// Whether `log alpha` is finite (not a NaN, not an infinity): one compare of its magnitude,
/// false for a NaN.
#[inline(always)]
pub fn is_finite(log_alpha: f32) -> bool {
    log_alpha.abs() < f32::INFINITY
}

/// The Metropolis decision: accept when `log u < log alpha`.
///
/// Any NaN makes the comparison false, so a row whose `x` is not finite (NaN, or infinite,
/// which makes `p - x` NaN) never accepts and keeps its `x` unchanged: a broken chain stays
/// visibly broken instead of jumping to a finite proposal.
#[inline(always)]
pub fn accept(log_u: f32, log_alpha: f32) -> bool {
    log_u < log_alpha
}

/// A group's butterfly sum, computed on the CPU in the GPU's order.
///
/// `partials` holds the `G` lanes' values (`G` a power of two, at most 32). On the GPU, each
/// round (`offset` = G/2, ..., 2, 1) replaces lane `l`'s value `v[l]` with `v[l] + v[l ^ offset]`
/// (`shfl.sync.bfly`); afterwards every lane of the group holds the same total.
/// Example: partials `{0, 1, ..., 31}` give 496 in every lane.
pub fn group_sum_emulated(partials: &[f32]) -> f32 {
    let g = partials.len();
    assert!(g.is_power_of_two() && g <= WARP_SIZE, "group of {g} lanes");
    let mut v = [0.0f32; WARP_SIZE];
    v[..g].copy_from_slice(partials);
    let mut offset = g / 2;
    while offset > 0 {
        let before = v;
        for lane in 0..g {
            v[lane] = before[lane] + before[lane ^ offset];
        }
        offset /= 2;
    }
    v[0]
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Scales equal to the step size are the plain proposal, to the bit; other scales scale
    /// each element's normal. `is_finite` is false exactly for NaN and the infinities.
    #[test]
    fn scaled_proposals_and_finiteness() {
        let (x, eps) = ([0.1, -2.0, 3.5, 1e-3], [0.7, -1.3, 0.0, 2.2]);
        let plain = propose(x, eps, 0.37);
        assert_eq!(propose_scaled(x, eps, [0.37; 4]), plain);
        let scaled = propose_scaled(x, eps, [1.0, 2.0, 0.5, 4.0]);
        assert_eq!(scaled, [0.1 + 0.7, -2.0 - 2.6, 3.5, 1e-3 + 8.8]);
        for v in [0.0, -1.0, f32::MAX, f32::MIN_POSITIVE, 1e-45] {
            assert!(is_finite(v), "{v}");
        }
        for v in [f32::NAN, f32::INFINITY, f32::NEG_INFINITY] {
            assert!(!is_finite(v), "{v}");
        }
    }

    /// `below_threshold` decides as `accept` on the values where decisions are made: sums of
    /// every magnitude and sign against log uniforms from 0 to ln 1e-10, the infinities, NaN,
    /// and the one pair where they differ.
    #[test]
    fn the_threshold_decides_as_accept() {
        let specials = [0.0, -0.0, f32::INFINITY, f32::NEG_INFINITY, f32::NAN];
        // Powers of two from the smallest subnormal to 2^127, times 1 and 1.37, both signs.
        let scaled = (0..277u32).flat_map(|i| {
            let p = f32::from_bits(1) * 2f32.powi(i as i32);
            [p, -p, 1.37 * p, -1.37 * p]
        });
        let log_us = [0.0, -5.96e-8, -1e-3, -0.5, -1.0, -7.25, -23.02585, f32::NAN];
        for t in specials.into_iter().chain(scaled) {
            for &l in &log_us {
                let (want, got) = (accept(l, log_alpha(t)), below_threshold(t, threshold(l)));
                let the_exception = l == 0.0 && t == -f32::from_bits(1);
                assert_eq!(want != got, the_exception, "sum {t:e}, log u {l}");
            }
        }
    }

    #[test]
    fn group_sum_matches_the_worked_example() {
        let partials: [f32; 32] = core::array::from_fn(|l| l as f32);
        assert_eq!(group_sum_emulated(&partials), 496.0);
        assert_eq!(group_sum_emulated(&partials[..8]), 28.0);
        assert_eq!(group_sum_emulated(&[5.0]), 5.0);
    }

    #[test]
    fn groups_give_each_lane_about_two_quads() {
        for (dim, g) in [
            (1, 1),
            (8, 1),
            (9, 2),
            (33, 8),
            (64, 8),
            (100, 16),
            (256, 32),
            (1024, 32),
            (4097, 32),
        ] {
            assert_eq!(group_width(dim), g, "dim {dim}");
        }
        // Rows up to 256 elements fit the register-resident path; 257 does not.
        assert!(quads_per_lane(256) <= MAX_RESIDENT_QUADS_PER_LANE);
        assert!(quads_per_lane(257) > MAX_RESIDENT_QUADS_PER_LANE);
        for dim in 1..=256 {
            assert!(
                quads_per_lane(dim) <= MAX_RESIDENT_QUADS_PER_LANE,
                "dim {dim}"
            );
        }
    }

    #[test]
    fn quads_cover_a_row_exactly() {
        for dim in [1usize, 3, 4, 5, 33, 64, 4097] {
            let n = quads_per_row(dim);
            let covered: usize = (0..n).map(|q| valid_in_quad(dim, q)).sum();
            assert_eq!(covered, dim, "dim {dim}");
            assert!((0..n).all(|q| valid_in_quad(dim, q) >= 1));
        }
    }

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
        for q in 0..quads_per_row(x.len()) {
            let valid = valid_in_quad(x.len(), q);
            let quad =
                |a: &[f32]| core::array::from_fn(|i| if i < valid { a[4 * q + i] } else { 0.0 });
            total = add_quad_terms(total, quad(x), quad(p), quad(mu), quad(inv_var));
        }
        log_alpha(total)
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
            let p = propose(x, [0.5; 4], 0.1);
            let la = log_alpha(add_quad_terms(0.0, x, p, [0.0; 4], [1.0; 4]));
            // Even the most favourable uniform (u = 0 -> log u = -23) must reject.
            assert!(
                !accept(log_uniform(0.0), la),
                "x = {bad} accepted (log alpha {la})"
            );
        }
    }

    #[test]
    fn uniform_floor_is_applied_before_the_log() {
        let floor = log_uniform(0.0);
        assert!((f64::from(floor) - (1e-10f64).ln()).abs() < 1e-5, "{floor}");
        assert_eq!(log_uniform(0.0), log_uniform(1e-20));
        assert!(log_uniform(f32::NAN).is_nan());
        assert!(!accept(log_uniform(0.5), f32::NAN));
    }
}
