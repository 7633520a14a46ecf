//! The four non-trivial functions the step needs: `ln`, `sin`/`cos` and `sqrt`.
//!
//! `core` has none of them (they live in `std`, which does not exist on the GPU), so they come
//! from two places:
//!
//! - `ln` and `sqrt` are correctly rounded (or nearly) on both targets, and give the same bits
//!   on both: `ln` is the `libm` crate's `logf` (a port of musl's, plain f32 arithmetic that
//!   rustc compiles for nvptx64 like any other Rust), `sqrt` is `sqrt.rn.f32` on the GPU and
//!   `libm::sqrtf` on the CPU, both IEEE-rounded.
//! - `sin` and `cos` are the GPU's special function unit instructions `sin.approx.f32` and
//!   `cos.approx.f32` (inline PTX, see [`crate::gpu`]), and `libm`'s `sinf`/`cosf` on the CPU.
//!
//! Why this split. A memory-bound step on an H200 leaves roughly 60 instructions per element
//! (132 SMs x 128 FP32 lanes x 1.98 GHz / ~540 G elements/s at 4.3 TB/s), and Philox already
//! takes about 20 of them. `sin/cos.approx` are one SFU instruction each (16 per clock per SM,
//! beside the FP32 lanes), against several dozen for `sinf` + `cosf` with their range
//! reduction. Their error, at most about 2^-20.5 absolute on [-pi, pi] (the range the normal
//! transform uses), multiplies the Box–Muller radius (at most 5.77), so a GPU normal differs
//! from the CPU's by at most about 4e-6: inside the tolerances the end-to-end tests state.
//! `lg2.approx.f32` was tried for `ln` and rejected: its error is *absolute* (about 2^-22) near
//! 1, where the Box–Muller radius `sqrt(-2 ln u)` is small, so a few normals per million came
//! out 4e-5 off (seen on the H200: the grid-stride test of 3 million normals failed). `logf` runs
//! once per pair of normals, so its cost is halved per element.

/// Natural logarithm (`libm::logf`, the same bits on GPU and CPU).
#[inline(always)]
pub fn ln(x: f32) -> f32 {
    libm::logf(x)
}

#[cfg(target_arch = "nvptx64")]
pub use crate::gpu::math::{cos, sin, sqrt};

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

/// Square root, correctly rounded (IEEE 754), as `sqrt.rn.f32` is on the GPU.
#[cfg(not(target_arch = "nvptx64"))]
#[inline]
pub fn sqrt(x: f32) -> f32 {
    libm::sqrtf(x)
}
