//! The four non-trivial functions the step needs: `ln`, `sin`/`cos` and `sqrt`.
//!
//! `core` has none of them (they live in `std`, which does not exist on the GPU), so each
//! target gets its own implementation behind one set of names:
//!
//! - **GPU** (`target_arch = "nvptx64"`): PTX instructions through inline assembly
//!   (see [`crate::gpu`]). `lg2.approx.f32`, `sin.approx.f32` and `cos.approx.f32` run on the
//!   special function units: one instruction each, at 16 per clock per SM on Hopper, beside the
//!   128 FP32 lanes. `sqrt.rn.f32` is IEEE-rounded, so it is bit-identical to the CPU's.
//! - **CPU**: the `libm` crate (a port of musl's correctly-rounded-or-nearly functions).
//!
//! Why not `libm` on the GPU too? It does compile for nvptx64, and it would make the GPU and CPU
//! agree to the last bit, but `logf` + `sinf` + `cosf` cost on the order of a hundred FP32
//! instructions per pair of normals, against about ten with the SFU. A memory-bound step at
//! 4.8 TB/s leaves roughly 60 instructions per element (H200: 132 SMs x 128 lanes x 1.98 GHz /
//! ~540 G elements/s), and Philox already takes about 20 of them. The price is accuracy: the
//! PTX ISA gives `lg2.approx` a maximum relative error of 2^-22 and `sin/cos.approx` a maximum
//! absolute error of about 2^-20.9 on [-pi, pi] (the range the normal transform uses). A normal
//! drawn on the GPU therefore differs from the CPU's by about 1e-6, well inside the tolerances
//! the end-to-end tests state (x_new within 1e-5 relative; acceptance decisions may differ only
//! where |log u - log alpha| < 1e-4).

#[cfg(target_arch = "nvptx64")]
pub use crate::gpu::math::{cos, ln, sin, sqrt};

/// Natural logarithm.
#[cfg(not(target_arch = "nvptx64"))]
#[inline]
pub fn ln(x: f32) -> f32 {
    libm::logf(x)
}

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
