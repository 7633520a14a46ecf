//! The non-trivial functions the kernels need: `exp`, `ln`, `sin`/`cos`, `sqrt`, `exp2`, `log2`.
//!
//! `core` has none of them (they live in `std`, which does not exist on the GPU), so this module
//! provides them, chosen by measurement (see `bench/NOTES.md`):
//!
//! - [`fma`] is the fused multiply-add `a * b + c` with one rounding: one `FFMA` instruction on
//!   the GPU, and the same bits on the CPU. rustc never fuses a multiplication and an addition on
//!   its own (it emits `mul.rn` and `add.rn`, which ptxas may not contract), so every fusion in
//!   this crate is written out, and GPU and CPU round identically.
//! - [`ln`] is written here with [`fma`], additions and multiplications: a range reduction by
//!   bit manipulation and a polynomial of degree 8 in the reduced argument (`f + f^2 (-1/2 +
//!   f P(f))`, `P` of degree 5, by Horner), no division, no branch on the common path: the
//!   same bits on the GPU and the CPU. `libm::logf` would work too, but its division and
//!   special-case branches would be the largest part of the Box–Muller transform.
//! - `sin`, `cos` and `sqrt` are the GPU's special function unit instructions `sin.approx.f32`,
//!   `cos.approx.f32` and `sqrt.approx.f32` (inline PTX, `gpu/device/sfu.rs`): one instruction
//!   each, at 16 per clock per SM beside the 128 FP32 lanes. On the CPU they are `libm`'s.
//!   `exp2` and `log2` are the same kind (`ex2`, `lg2`), for the
//!   logistic regression's rows ([`crate::model::logreg`]), where the SFU's absolute errors are
//!   small against the tolerance of a sum over data rows.
//!
//! The price of the SFU is accuracy, and it is bounded: `sin/cos.approx` err by at most about
//! 2^-20.5 absolute on [-pi, pi] (the range the normal transform uses) and `sqrt.approx` by
//! 2^-23 relative, times a Box–Muller radius of at most 5.65, so a normal drawn on the GPU is
//! within about 4.5e-6 of the CPU's: inside the tolerances of `cpu::StepOutput::compare` in the
//! host library.
//!
//! # The fast logarithm of the normal transform
//!
//! The Box–Muller radius is `sqrt(-2 ln u)`, and [`ln`]'s polynomial is the largest part of a
//! normal's arithmetic (about 16 instructions of a pair's 50). The SFU's `lg2.approx.f32` is
//! one instruction, but its error is *absolute*, about 2^-22 near `u = 1`: where the radius is
//! small, the normal `r cos theta` moves by `d(r^2) / (2 r)`, so a few normals per million
//! would land 4e-5 off the CPU's. [`minus_two_ln_complement_with`] keeps the SFU for the
//! uniforms where that cannot happen and, for the others (`u` within 2^-10 of 1, one normal
//! pair in a thousand), uses two terms of the series `-2 ln(1 - w) = 2 w + w^2 + (2/3) w^3 +
//! ...`, exact in `w = 1 - u` (which the transform has exactly): both computed, one kept by a
//! select, no branch. It takes `v = 1 + w`, the uniform's bits before their subtraction, and
//! forms the rest from it: `1 - w = 2 - v` and `2 w + w^2 = v^2 - 1`, each in one
//! instruction. The GPU's normals stay within the 4.5e-6 above (the unit tests bound it
//! for an `lg2` off by 2^-22 everywhere; a GPU test checks the real one at every uniform); the
//! CPU keeps the polynomial, so the reference is unchanged, and the chain stays exact either
//! way: the proposal is symmetric whatever the normals are.

/// `ln(1 + f) = f + f^2 (-1/2 + f P(f))` for `f` in `[sqrt(1/2) - 1, sqrt(2) - 1]`: the
/// coefficients of `P`, lowest degree first, fitted for minimax relative error in f64 and
/// rounded to f32. Relative error of the whole `ln` at most 7 ulp (2^-21.2,
/// `ln_matches_f64_everywhere`), below the error of the GPU's `sin`/`cos` (2^-20.5 absolute)
/// that the normals carry anyway. Degree 5 is the lowest that keeps it there; each degree less
/// costs a factor of about 6 in accuracy, each degree more one `FFMA` per `ln`, two per quad.
const LN1P_P: [f32; 6] = [
    0.333_342_46,
    -0.249_832_67,
    0.199_245_05,
    -0.171_371_27,
    0.160_243_73,
    -0.101_917_25,
];
/// `ln 2` rounded to f32. One constant, not the usual split into a high and a low part: its
/// rounding error (2.7e-9 relative) adds at most 0.1 ulp to `k ln 2`, far inside the
/// polynomial's error, and saves a multiply-add.
const LN2: f32 = core::f32::consts::LN_2;

/// `a * b + c` rounded once (IEEE 754 fusedMultiplyAdd): `fma.rn.f32` on the GPU, `fmaf` on the
/// CPU.
#[inline(always)]
pub fn fma(a: f32, b: f32, c: f32) -> f32 {
    core::f32::math::mul_add(a, b, c)
}

/// Natural logarithm, the same bits on GPU and CPU.
///
/// Positive normal finite arguments take the fast path ([`ln_normal`]); anything else (0,
/// negative, subnormal, infinite, NaN) goes to `libm::logf`, a branch the kernels never take.
#[inline(always)]
pub fn ln(x: f32) -> f32 {
    if !(f32::MIN_POSITIVE..=f32::MAX).contains(&x) {
        return libm::logf(x);
    }
    ln_normal(x)
}

/// [`ln`] without the domain check, for arguments known to be positive, normal and finite
/// (the Box–Muller transform's uniforms, at least 2^-23): no branch at all. Other arguments
/// give meaningless finite results.
#[inline(always)]
pub fn ln_normal(x: f32) -> f32 {
    scaled_ln_normal(x, 1.0)
}

/// `-2 ln x`, the Box–Muller radius squared, for the arguments of [`ln_normal`]: bit for bit
/// `-2.0 * ln_normal(x)` (but +0 rather than -0 at `x = 1`), one multiplication cheaper.
///
/// Scaling by `-2` is exact in binary floating point, so it can be moved into the constants
/// (each coefficient doubled and negated) without changing a single rounding: every
/// intermediate value is exactly `-2` times the one [`ln_normal`] computes.
#[inline(always)]
pub fn minus_two_ln_normal(x: f32) -> f32 {
    scaled_ln_normal(x, -2.0)
}

/// `scale * ln x` with `scale` a power of two (1 or -2 here), folded into the constants.
#[inline(always)]
fn scaled_ln_normal(x: f32, scale: f32) -> f32 {
    // x = 2^k * m with m in [sqrt(1/2), sqrt(2)): shift the bits so that the mantissa range
    // starts at sqrt(1/2), read the exponent, and put the mantissa back above sqrt(1/2).
    let bits = x.to_bits().wrapping_add(0x3f80_0000 - 0x3f35_04f3);
    let k = (bits >> 23) as i32 - 0x7f;
    let m = f32::from_bits((bits & 0x007f_ffff) + 0x3f35_04f3);
    let f = m - 1.0;
    // Horner's rule, one fused multiply-add per coefficient, run on to the constant terms:
    // scale * ln(1 + f) = f * (scale + f * (scale * (-1/2 + f P(f)))).
    let mut p = scale * LN1P_P[5];
    for c in LN1P_P[..5].iter().rev() {
        p = fma(p, f, scale * *c);
    }
    p = fma(p, f, -0.5 * scale);
    p = fma(p, f, scale);
    fma(k as f32, scale * LN2, p * f)
}

/// Below this `w`, [`minus_two_ln_complement_with`] takes the series: 2^-10. The series' first
/// omitted term, `(2/3) w^3`, is then at most `w^2 / 3 < 3.2e-7` of the value (a normal off by
/// less than `6e-9`), and above it an `lg2` off by 2^-22 (absolute) moves a normal of radius
/// at least `sqrt(2^-9) = 0.044` by at most `2^-22 * 2 ln 2 / (2 * 0.044) < 3.8e-6`.
pub const SERIES_BELOW: f32 = 1.0 / 1024.0;

/// `-2 ln(1 - w)`, the Box–Muller radius squared, for `w = k 2^-23`, `0 <= k < 2^23` (a
/// [`crate::rng::uniform`]), given as `v = 1 + w` ([`crate::rng::one_plus_uniform`]), with the
/// logarithm from `log2` (the GPU's SFU): `-2 ln 2 * log2(2 - v)`, or for `w` below
/// [`SERIES_BELOW`] the series `w (2 + w)` (see the module docs).
///
/// Both are formed from `v` with no rounding that `w` would not have: `2 - v = 1 - w`
/// exactly (a multiple of 2^-23 in `(0, 1]`), and `fma(v, v, -1)` rounds the real `v^2 - 1 =
/// w^2 + 2 w` once, the bits of `fma(w, w, w + w)`; `v < 1 + 2^-10` is `w < 2^-10`. From `w`
/// the same values took three more instructions: `v - 1`, `1 - w` and `w + w`.
#[inline(always)]
pub fn minus_two_ln_complement_with(v: f32, log2: impl Fn(f32) -> f32) -> f32 {
    let far = log2(2.0 - v) * (-2.0 * LN2);
    let near = fma(v, v, -1.0);
    // A select, not a branch (LLVM would otherwise branch around the SFU's path): both values
    // are a few instructions, and a branch that one lane in a thousand takes the other way
    // costs the warp more.
    core::hint::select_unpredictable(v < 1.0 + SERIES_BELOW, near, far)
}

/// `-2 ln(1 - w)` for the `v = 1 + w` of [`minus_two_ln_complement_with`]: on the CPU the
/// polynomial, [`minus_two_ln_normal`]`(1 - w)` (`2 - v`, the same value), the reference's bits.
#[cfg(not(target_arch = "nvptx64"))]
#[inline(always)]
pub fn minus_two_ln_complement(v: f32) -> f32 {
    minus_two_ln_normal(2.0 - v)
}

/// `-2 ln(1 - w)` for the `v = 1 + w` of [`minus_two_ln_complement_with`]: on the GPU the SFU's
/// `lg2` with the series near `w = 0`, within `3.8e-6 / r` of the CPU's in a normal of radius
/// `r`.
#[cfg(target_arch = "nvptx64")]
#[inline(always)]
pub fn minus_two_ln_complement(v: f32) -> f32 {
    minus_two_ln_complement_with(v, log2)
}

/// `e^x`, the same bits on GPU and CPU, within 2 ulp (a test checks it against f64 over the
/// whole range).
///
/// `x = n ln 2 + r` with `n` the nearest integer to `x / ln 2` and `|r| <= ln 2 / 2`, `r` from
/// two multiply-adds with `ln 2` split into a high part of 16 significant bits (so that
/// `n * LN2_HI` is exact) and the rest; `e^r` by its Taylor polynomial to degree 7 (the next
/// term is below 5e-9); `2^n` put into the exponent bits. Below `-87.33` (where `e^x` leaves the
/// normal floats) it returns 0, above `88.72` infinity, and NaN stays NaN: selects, no branch
/// in the normal range.
#[inline(always)]
pub fn exp(x: f32) -> f32 {
    const LOG2E: f32 = core::f32::consts::LOG2_E;
    const LN2_HI: f32 = 0.693_145_75;
    const LN2_LO: f32 = 1.428_606_8e-6;
    // Adding and subtracting 1.5 * 2^23 rounds to the nearest integer (|x / ln 2| < 2^22).
    const ROUND: f32 = 12_582_912.0;
    let clamped = x.clamp(-87.5, 88.75);
    let n = fma(clamped, LOG2E, ROUND) - ROUND;
    let r = fma(-n, LN2_LO, fma(-n, LN2_HI, clamped));
    // Horner's rule, written out: a loop over the coefficients is not always unrolled inside a
    // large kernel, and then the table goes to local memory.
    let p = fma(1.0 / 5040.0, r, 1.0 / 720.0);
    let p = fma(p, r, 1.0 / 120.0);
    let p = fma(p, r, 1.0 / 24.0);
    let p = fma(p, r, 1.0 / 6.0);
    let p = fma(p, r, 0.5);
    let p = fma(p, r, 1.0);
    let p = fma(p, r, 1.0);
    // 2^n in two halves, so that n = 128 (x just below the overflow point) stays finite.
    let half = (n as i32) >> 1;
    let scale = |k: i32| f32::from_bits(((k + 127) as u32) << 23);
    let e = p * scale(half) * scale(n as i32 - half);
    if x.is_nan() {
        x
    } else if x < -87.336_55 {
        0.0
    } else if x > 88.722_84 {
        f32::INFINITY
    } else {
        e
    }
}

#[cfg(target_arch = "nvptx64")]
pub use crate::gpu::device::sfu::{cos, exp2, log2, sin, sqrt};

/// Sine of an angle in radians.
#[cfg(not(target_arch = "nvptx64"))]
#[inline]
pub fn sin(x: f32) -> f32 {
    libm::sinf(x)
}

/// Cosine of an angle in radians.
#[cfg(not(target_arch = "nvptx64"))]
#[inline]
pub fn cos(x: f32) -> f32 {
    libm::cosf(x)
}

/// Square root (correctly rounded here; within 2^-23 relative on the GPU).
#[cfg(not(target_arch = "nvptx64"))]
#[inline]
pub fn sqrt(x: f32) -> f32 {
    libm::sqrtf(x)
}

/// `2^x` (libm here; the SFU's `ex2.approx`, within about 2^-22 relative, on the GPU).
#[cfg(not(target_arch = "nvptx64"))]
#[inline]
pub fn exp2(x: f32) -> f32 {
    libm::exp2f(x)
}

/// `log2(x)` (libm here; the SFU's `lg2.approx`, within about 2^-22 absolute on `[0.5, 2]`,
/// on the GPU).
#[cfg(not(target_arch = "nvptx64"))]
#[inline]
pub fn log2(x: f32) -> f32 {
    libm::log2f(x)
}

#[cfg(test)]
mod tests {

    /// `exp` against f64 from -87.3 to 88.7 (every 1/1000 and the ends): within 2 ulp of the
    /// correctly rounded value; 0 below the normal range, infinity above it, NaN kept.
    #[test]
    fn exp_is_within_two_ulp() {
        let mut worst = 0.0f64;
        let mut x = -87.3f32;
        while x < 88.72 {
            let want = f64::from(x).exp();
            let ulp = f64::from(f32::EPSILON) * want;
            worst = worst.max((f64::from(exp(x)) - want).abs() / ulp);
            x += 0.001;
        }
        assert!(worst <= 2.0, "{worst} ulp");
        assert_eq!(
            (exp(0.0), exp(-100.0), exp(100.0)),
            (1.0, 0.0, f32::INFINITY)
        );
        assert!(exp(88.72283).is_finite() && exp(f32::NAN).is_nan());
    }
    use super::*;

    /// Relative error of `ln` against f64, in units of 2^-24.
    fn ulps(x: f32) -> f64 {
        let exact = f64::from(x).ln();
        let got = f64::from(ln(x));
        if exact == 0.0 {
            got.abs() / 2f64.powi(-24)
        } else {
            ((got - exact) / exact).abs() / 2f64.powi(-24)
        }
    }

    #[test]
    fn ln_matches_f64_everywhere_the_kernels_use_it() {
        // Every uniform the normal transform feeds it: k * 2^-23 for k = 1 ..= 2^23.
        let worst = (1..=1u32 << 23)
            .map(|k| ulps(k as f32 / 8_388_608.0))
            .fold(0.0, f64::max);
        // The polynomial alone is within 4.4 ulp (its fit, 2^-21.9); rounding its evaluation
        // and the sum with k ln 2 add up to about 2.5 more.
        assert!(
            worst <= 7.0,
            "worst relative error {worst} ulp on the uniforms"
        );
        // And across the rest of the positive normals, sampled at every 97th bit pattern.
        let mut bits = f32::MIN_POSITIVE.to_bits();
        let mut worst_all = 0f64;
        while bits < f32::MAX.to_bits() {
            worst_all = worst_all.max(ulps(f32::from_bits(bits)));
            bits += 97;
        }
        assert!(worst_all <= 7.0, "worst relative error {worst_all} ulp");
    }

    #[test]
    fn minus_two_ln_is_minus_two_times_ln_bit_for_bit() {
        // Every uniform the normal transform feeds it, as in the accuracy test above. The one
        // difference is the sign of zero at u = 1 (+0 here, -0 from -2.0 * 0.0): equal values,
        // and a radius of 0 either way.
        for k in 1..1u32 << 23 {
            let u = k as f32 / 8_388_608.0;
            assert_eq!(
                minus_two_ln_normal(u).to_bits(),
                (-2.0 * ln_normal(u)).to_bits(),
                "u = {u}"
            );
        }
        assert!(minus_two_ln_normal(1.0) == 0.0 && ln_normal(1.0) == 0.0);
    }

    /// The radius from `v = 1 + w` is bit for bit the radius from `w` (the series `fma(w, w,
    /// w + w)`, the logarithm's argument `1 - w`, the choice `w < 2^-10`), at every uniform
    /// the transform uses, for an `lg2` that is libm's.
    #[test]
    fn the_radius_from_one_plus_w_is_the_radius_from_w() {
        for k in 0..1u32 << 23 {
            let w = k as f32 / 8_388_608.0;
            let from_w = if w < SERIES_BELOW {
                fma(w, w, w + w)
            } else {
                libm::log2f(1.0 - w) * (-2.0 * LN2)
            };
            let got = minus_two_ln_complement_with(1.0 + w, libm::log2f);
            assert_eq!(got.to_bits(), from_w.to_bits(), "w = {w}");
        }
    }

    /// The GPU's radius with its `lg2` replaced by libm's off by 2^-22 (the SFU's absolute
    /// error) either way, at every uniform the transform uses: within 3.8e-6 of f64's radius
    /// (the bound of [`SERIES_BELOW`]), so with the angle's error a normal stays within the
    /// 4.5e-6 the host's comparison allows.
    #[test]
    fn the_fast_radius_is_within_its_bound_for_an_lg2_off_by_its_error() {
        let lg2_error = 2f32.powi(-22);
        for sign in [-1.0f32, 1.0] {
            let off = |x: f32| libm::log2f(x) + sign * lg2_error;
            let mut worst = (0f64, 0f32);
            for k in 0..1u32 << 23 {
                let w = k as f32 / 8_388_608.0;
                let exact = (-2.0 * (1.0 - f64::from(w)).ln()).sqrt();
                let got = f64::from(minus_two_ln_complement_with(1.0 + w, off)).sqrt();
                if (got - exact).abs() > worst.0 {
                    worst = ((got - exact).abs(), w);
                }
            }
            assert!(
                worst.0 < 3.8e-6,
                "radius off by {:e} at w = {}",
                worst.0,
                worst.1
            );
        }
        // Without the series the same `lg2` would put small radii far off: at w = 2^-20,
        // sqrt(-2 ln 2 (log2(1 - w) + 2^-22)) is 0.00126 against 0.00138.
        let w = 2f32.powi(-20);
        let sfu_only = (-2.0 * LN2 * (libm::log2f(1.0 - w) + lg2_error)).sqrt();
        assert!((f64::from(sfu_only) - (2.0 * f64::from(w)).sqrt()).abs() > 1e-4);
    }

    #[test]
    fn ln_handles_the_edges() {
        assert_eq!(ln(1.0), 0.0);
        assert!((ln(core::f32::consts::E) - 1.0).abs() < 2e-7);
        assert!((f64::from(ln(1e-10)) - (1e-10f64).ln()).abs() < 1e-5);
        assert_eq!(ln(0.0), f32::NEG_INFINITY);
        assert!(ln(-1.0).is_nan() && ln(f32::NAN).is_nan());
        assert_eq!(ln(f32::INFINITY), f32::INFINITY);
        assert!(
            (f64::from(ln(1e-40)) - (1e-40f64).ln()).abs() < 1e-4,
            "subnormal"
        );
    }
}
