//! The Metropolis–Hastings step of one row, as pure functions of values.
//!
//! The GPU kernel (the `gpu` module) and the CPU reference (the host library's `cpu` module) both
//! call these; only loading and storing differ between them. The work of a row is split the way
//! the GPU splits it, so the CPU can follow the same order of floating-point operations:
//!
//! - a row is cut into quads, and worked on by a group of lanes ([`crate::layout`]);
//! - each lane adds the terms of its elements to its partial sum, quad by quad, in order
//!   ([`Target::add_quad_terms`](crate::target::Target::add_quad_terms));
//! - the group adds its `G` partial sums with a butterfly (xor) reduction:
//!   [`group_sum_emulated`] is that order on the CPU;
//! - rows longer than 1024 elements do this segment by segment (each segment restarts the
//!   lanes' partial sums) and add the segments' sums in order ([`add_segment`]; the segments
//!   are [`crate::layout::SEGMENT_QUADS`] quads), so that a warp per segment can share a row;
//! - every lane of the group then holds `log alpha` and makes the same decision ([`accept`]).
//!
//! What the terms are is the target's business ([`crate::target`]); this module only sums
//! and decides.

use crate::layout::{QUAD, WARP_SIZE};
use crate::math;

/// The floor applied to the uniform before its logarithm: `log(max(u, 1e-10))`, as in the
/// reference model, so `u = 0` gives a finite `log u ~= -23.03`.
pub const MIN_UNIFORM: f32 = 1e-10;

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

/// `log alpha` from the row's total of terms ([`crate::target::Target::add_quad_terms`]).
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

/// The row's total of terms after segment `segment`'s sum `sum` (see
/// [`crate::layout::SEGMENT_QUADS`]): the first segment's sum is the total, each later one is
/// added to the total of those before it. Every kernel and the CPU reference add them so.
#[inline(always)]
pub fn add_segment(total: f32, segment: usize, sum: f32) -> f32 {
    if segment == 0 { sum } else { total + sum }
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
    fn uniform_floor_is_applied_before_the_log() {
        let floor = log_uniform(0.0);
        assert!((f64::from(floor) - (1e-10f64).ln()).abs() < 1e-5, "{floor}");
        assert_eq!(log_uniform(0.0), log_uniform(1e-20));
        assert!(log_uniform(f32::NAN).is_nan());
        assert!(!accept(log_uniform(0.5), f32::NAN));
    }
}
