//! The target distribution: the one thing a user of a sampler changes, as one trait.
//!
//! Every kernel and the CPU reference are generic over [`Target`]; the Metropolis–Hastings
//! machinery (proposals, the threshold, the lane groups) never looks inside one. A target is
//! one file here, and one line of [`declare_targets!`](crate::declare_targets) below, which
//! compiles every kernel family for it, names its entry points and lists it for the host.
//!
//! # What a target provides
//!
//! A log-density `log pi(v) = sum_d f(v_d; theta_d)` that separates over dimensions, written
//! the way the kernels use it:
//!
//! - its *arrays*: [`Target::ARRAYS`] per-dimension float arrays the kernels read, packed one
//!   after the other into one `[ARRAYS, dim]` buffer (the device-side parameters, one pointer
//!   in every entry point). [`Target::pack`] computes them on the host from the user's
//!   [`Target::PARAMS`] (the Gaussian turns `sigma` into `1 / sigma^2` there, once);
//! - its *per-quad terms*: [`Target::add_quad_terms`] adds a quad's share of `-2 log alpha =
//!   -2 (log pi(p) - log pi(x))`. A lane sums its quads, the group sums its lanes, and the row
//!   accepts when the total is below `-2 log u` (`mh::below_threshold`). A quad whose arrays
//!   are all zero (the padding past `dim`, where the state is loaded as 0) must add exactly 0
//!   for `x = 0` and any proposal `p` with `|p| < 2^63` (a step: the step size times a normal):
//!   the kernels compute padded quads rather than branch around them;
//! - a *row-level hook*, [`Target::row_total`]: what the group's summed terms become before the
//!   decision. The identity for a separable target; a density that couples dimensions (a
//!   regression's likelihood) finishes its row there;
//! - for the host: a location and a scale per dimension (where chains start, how far a step
//!   goes, which states are sane), its exact marginal moments where they exist (what a run is
//!   checked against), and `log pi` per element in f64 (the tests' independent formula).
//!
//! The arithmetic must round the same way on both targets: [`math::fma`],
//! `+ - * /` (IEEE on the GPU too) and [`math::ln`] do; `sin`, `cos` and
//! `sqrt` do not (the GPU's are approximate).

pub mod gaussian;
pub mod student_t;

pub use gaussian::Gaussian;
pub use student_t::StudentT;

use crate::math;

/// A target distribution: its per-dimension arrays and the terms of `-2 log alpha` they give.
/// See the module documentation.
pub trait Target: Copy + 'static {
    /// Its name, as the command line and Python spell it (`--target NAME`).
    const NAME: &'static str;
    /// The user's per-dimension parameters, in order: the first is the location, the second
    /// the scale (for every target so far).
    const PARAMS: &'static [&'static str];
    /// How many per-dimension arrays the kernels read, packed `[ARRAYS, dim]`.
    const ARRAYS: usize;
    /// One quad's parameters in registers: `ARRAYS` quads of 4 floats.
    type Quad: Copy;
    /// Whether the block-per-row single step of rows of 1025 to 4096 elements holds the next
    /// row in registers (32 a thread) instead of staging it in shared memory by `cp.async`.
    /// Registers leave fewer warps on an SM: a target whose terms are a few instructions a
    /// quad (the Gaussian's) runs its long rows 5 % faster so; one whose terms are long
    /// (Student-t's logarithm) needs the warps to hide them, and ran 19 to 25 % slower
    /// (`bench/NOTES.md`, issue 22, thirty-ninth part). A target that sets it also gives its
    /// two entries of that step their register limits in `build.rs` (`REGISTER_LIMITS`).
    const NEXT_LONG_ROW_IN_REGISTERS: bool = false;

    /// A quad's parameters from array `k`'s quad, `array(k)` for `k < ARRAYS`.
    fn quad(array: impl Fn(usize) -> [f32; 4]) -> Self::Quad;

    /// `sum` plus the quad's share of `-2 log alpha`, elements in order: state `x`, proposal
    /// `p`. Exactly `sum` when the quad's arrays are all zero and `x` is 0 (the padding).
    fn add_quad_terms(sum: f32, x: [f32; 4], p: [f32; 4], quad: &Self::Quad) -> f32;

    /// The row's total of terms as the decision compares it with `-2 log u`: the row-level
    /// hook (the identity for a separable target).
    #[inline(always)]
    fn row_total(summed_terms: f32) -> f32 {
        summed_terms
    }

    /// One dimension's kernel arrays (`arrays`, `ARRAYS` long) from its user parameters
    /// (`values`, one per [`Self::PARAMS`] entry), or which parameter is unusable and why.
    /// Array 0 is the location, as given: the diagnostics' kernel reads it as the shift of its
    /// sums.
    fn pack(values: &[f32], arrays: &mut [f32]) -> Result<(), Invalid>;

    /// `log pi` of one element `v` up to a constant, in f64, from the user parameters.
    fn log_density(v: f64, values: &[f32]) -> f64;

    /// The exact marginal mean and variance of one dimension, where they exist.
    fn moments(values: &[f32]) -> (Option<f64>, Option<f64>);

    /// Where a dimension's mass is: its location (the first parameter).
    #[inline]
    fn location(values: &[f32]) -> f32 {
        values[0]
    }

    /// How wide it is: its scale (the second parameter).
    #[inline]
    fn scale(values: &[f32]) -> f32 {
        values[1]
    }
}

/// A user parameter a target cannot use: which one ([`Target::PARAMS`] index) and why.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Invalid {
    /// Index into [`Target::PARAMS`].
    pub param: usize,
    /// Why, completing "`name[i] = value` ...".
    pub why: &'static str,
}

/// The scales the step computes with in float32: `[2^-57, 2^57]`, about `[6.9e-18, 1.4e17]`.
///
/// The kernels form `d^2 * (1 / scale^2)` with `d = v - location`. For every state within 64
/// scales of the location and at least 1/64 of one away, `d` lies in `[2^-63, 2^63]`: `d^2` is
/// a normal float32 (no overflow to infinity, no underflow into subnormals) and so is
/// `1 / scale^2` (`[2^-114, 2^114]`). A scale outside would make `log alpha` infinite or NaN
/// for ordinary states, and every proposal rejected without a word.
pub const SCALE_RANGE: (f32, f32) = (1.0 / (1u64 << 57) as f32, (1u64 << 57) as f32);

/// Why a scale outside [`SCALE_RANGE`] is refused (the message of [`Invalid`]).
pub const SCALE_OUT_OF_RANGE: &str = "is outside [6.9e-18, 1.4e17]: beyond it the float32 \
     terms ((x - location) / scale)^2 overflow or underflow (rescale the problem)";

/// Checks a location (finite) and a scale (finite, positive, inside [`SCALE_RANGE`]), the
/// parameters 0 and 1 of every target so far.
pub fn check_location_scale(location: f32, scale: f32) -> Result<(), Invalid> {
    let invalid = |param, why| Err(Invalid { param, why });
    if !location.is_finite() {
        return invalid(0, "is not finite");
    }
    if !scale.is_finite() {
        return invalid(1, "is not finite");
    }
    if scale <= 0.0 {
        return invalid(1, "must be > 0");
    }
    if !(SCALE_RANGE.0..=SCALE_RANGE.1).contains(&scale) {
        return invalid(1, SCALE_OUT_OF_RANGE);
    }
    Ok(())
}

/// `1 / scale^2` in f64, rounded once to f32: the kernels multiply by it instead of dividing.
pub fn inverse_square(scale: f32) -> f32 {
    let scale = f64::from(scale);
    (1.0 / (scale * scale)) as f32
}

/// `ln(1 + y)` for `y > -1`, accurate for small `y` too: `ln(u) * (y / (u - 1))` with
/// `u = 1 + y` rounded (Goldberg's correction for the rounding of `u`), and `y` itself where
/// `u` rounds to 1. [`math::ln_normal`], one division and selects, no branch: the same bits on
/// GPU and CPU. Outside `ln_normal`'s domain, `u` infinite or NaN gives NaN or `+inf` (a
/// proposal that overflows never accepts), and `u` below the smallest normal gives `-inf`.
#[inline(always)]
pub fn ln_1p(y: f32) -> f32 {
    let u = 1.0 + y;
    let d = u - 1.0;
    let ln_u = if u.is_nan() || u > f32::MAX {
        u
    } else if u < f32::MIN_POSITIVE {
        f32::NEG_INFINITY
    } else {
        math::ln_normal(u)
    };
    // `d == 0` makes the division 0/0, which the select discards.
    let corrected = ln_u * (y / d);
    if d == 0.0 { y } else { corrected }
}

/// Something to do with a target chosen at run time: [`TargetKind::visit`] calls
/// [`Self::visit`] with its type (a generic function cannot be a value, a trait method can).
pub trait VisitTarget {
    /// What the visit returns.
    type Output;
    /// Does it for target `T`.
    fn visit<T: Target>(self) -> Self::Output;
}

crate::declare_targets! {
    /// The diagonal Gaussian of the reference model.
    gaussian: Gaussian,
    /// Student's t per dimension.
    student_t: StudentT,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `ln_1p` against f64's `ln_1p` from 1e-30 to 1e30 in both directions, where `u` rounds
    /// to 1 and where it does not: within 8 ulp of the f32 result (the 7 ulp of `math::ln`,
    /// and one rounding of the correction).
    #[test]
    fn ln_1p_is_accurate_near_zero_and_far_from_it() {
        let mut y = 1e-30f32;
        while y < 1e30 {
            for v in [y, -y.min(0.999)] {
                let want = f64::from(v).ln_1p();
                let got = f64::from(ln_1p(v));
                let ulp = f64::from(f32::EPSILON) * want.abs();
                assert!(
                    (got - want).abs() <= 8.0 * ulp,
                    "ln_1p({v:e}) = {got:e}, want {want:e}"
                );
            }
            y *= 1.7;
        }
        assert_eq!(ln_1p(0.0), 0.0);
        // NaN or +inf: a sum of terms with it never falls below a threshold.
        let overflow = ln_1p(f32::INFINITY);
        assert!(overflow.is_nan() || overflow == f32::INFINITY, "{overflow}");
        assert!(ln_1p(f32::NAN).is_nan());
        assert_eq!(ln_1p(-1.0), f32::NEG_INFINITY);
    }

    /// Every target's padding (all arrays zero, the state 0) adds exactly nothing for steps of
    /// every size up to 2^62, and the names are distinct.
    #[test]
    fn padding_adds_nothing_and_names_are_distinct() {
        struct Padding;
        impl VisitTarget for Padding {
            type Output = ();
            fn visit<T: Target>(self) {
                let zero = T::quad(|_| [0.0; 4]);
                for p in [0.0, -3.0, 7.0, 1e-30, -4.6e18] {
                    let sum = T::add_quad_terms(0.25, [0.0; 4], [p; 4], &zero);
                    assert_eq!(sum, 0.25, "{} pads 0 -> {p}", T::NAME);
                }
            }
        }
        for kind in TargetKind::ALL {
            kind.visit(Padding);
            assert_eq!(TargetKind::from_name(kind.name()), Some(*kind));
        }
        assert_eq!(
            TargetKind::from_name("gaussian"),
            Some(TargetKind::Gaussian)
        );
        assert_eq!(TargetKind::from_name("cauchy"), None);
    }
}
