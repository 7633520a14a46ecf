//! PTX versions of [`crate::math`]'s functions (see there for the choice and its accuracy).

use core::arch::asm;

/// The full 64-bit product of two words as `(hi, lo)`: one `mul.wide.u32` (SASS
/// `IMAD.WIDE.U32`, which writes both halves to a register pair). Written out because LLVM
/// lowers `u64::from(a) * u64::from(b)` to a 64 x 64-bit multiply, which costs ptxas three
/// instructions; Philox does two of these per round.
#[inline(always)]
pub fn mul_wide_u32(a: u32, b: u32) -> (u32, u32) {
    let (hi, lo): (u32, u32);
    // SAFETY: pure arithmetic on registers; the braces scope the temporary register.
    unsafe {
        asm!("{{ .reg .b64 t; mul.wide.u32 t, {a}, {b}; mov.b64 {{{lo}, {hi}}}, t; }}",
             a = in(reg32) a, b = in(reg32) b, lo = out(reg32) lo, hi = out(reg32) hi,
             options(pure, nomem, nostack));
    }
    (hi, lo)
}

/// `count + 1` if `v` is a NaN or an infinity, else `count`: PTX's `testp.finite` and an add
/// under its predicate. Written out because LLVM turns `!v.is_finite()` into a shift, an
/// integer compare and a select before the add.
#[inline(always)]
pub fn count_not_finite(count: u32, v: f32) -> u32 {
    let out: u32;
    // SAFETY: pure arithmetic on registers; the braces scope the predicate.
    unsafe {
        asm!("{{ .reg .pred f; testp.finite.f32 f, {v}; mov.b32 {out}, {c}; @!f add.u32 {out}, {out}, 1; }}",
             v = in(reg32) v, c = in(reg32) count, out = out(reg32) out,
             options(pure, nomem, nostack));
    }
    out
}

/// `count + 1` if `v` is exactly 0 (either sign), else `count`: `setp.eq` and an add under its
/// predicate. A row whose `log alpha` terms total exactly 0 proposed its own state (every
/// proposal rounded back to the float it started from): an accepted step that does not move.
#[inline(always)]
pub fn count_zero(count: u32, v: f32) -> u32 {
    let out: u32;
    // SAFETY: pure arithmetic on registers; the braces scope the predicate.
    unsafe {
        asm!("{{ .reg .pred z; setp.eq.f32 z, {v}, 0f00000000; mov.b32 {out}, {c}; @z add.u32 {out}, {out}, 1; }}",
             v = in(reg32) v, c = in(reg32) count, out = out(reg32) out,
             options(pure, nomem, nostack));
    }
    out
}

/// Declares `pub fn $name(x: f32) -> f32` as the one PTX instruction `$op` (an SFU operation
/// on a register, nothing else).
macro_rules! sfu_unary {
    ($(#[$doc:meta])* $name:ident, $op:literal) => {
        $(#[$doc])*
        #[inline(always)]
        pub fn $name(x: f32) -> f32 {
            let y: f32;
            // SAFETY: a pure arithmetic instruction on registers.
            unsafe {
                asm!(concat!($op, " {y}, {x};"), y = out(reg32) y, x = in(reg32) x,
                     options(pure, nomem, nostack));
            }
            y
        }
    };
}

sfu_unary!(
    /// Sine with the SFU's `sin.approx.f32` (most accurate on [-pi, pi]).
    sin,
    "sin.approx.f32"
);
sfu_unary!(
    /// Cosine with the SFU's `cos.approx.f32` (most accurate on [-pi, pi]).
    cos,
    "cos.approx.f32"
);
sfu_unary!(
    /// Square root with the SFU's `sqrt.approx.ftz.f32` (relative error at most 2^-23). `.ftz`
    /// drops the subnormal fix-up (three instructions): its arguments here, `-2 ln u`, are 0 or
    /// above 2^-23, never subnormal.
    sqrt,
    "sqrt.approx.ftz.f32"
);
sfu_unary!(
    /// `2^x` with the SFU's `ex2.approx.ftz.f32` (relative error about 2^-22 over the whole
    /// range; results below the normal range flush to 0).
    exp2,
    "ex2.approx.ftz.f32"
);
sfu_unary!(
    /// `log2(x)` with the SFU's `lg2.approx.ftz.f32` (absolute error about 2^-22 for `x` in
    /// `[0.5, 2]`, relative error about 2^-22 elsewhere).
    log2,
    "lg2.approx.ftz.f32"
);
