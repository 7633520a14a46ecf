//! The device crate of fused-mh: one random-walk Metropolis–Hastings step for many independent
//! chains, written once and compiled twice.
//!
//! - For `nvptx64-nvidia-cuda`, the root `build.rs` compiles this crate to PTX with rustc's own
//!   NVPTX backend; the entry points (`mh_step_*` and `mh_step_with_noise_*`, one pair per
//!   [`Variant`]) live in `gpu`, the one module that exists only on the GPU.
//! - For the host, it is an ordinary `no_std` library: the host crate's CPU reference and the
//!   unit tests call the very same Philox, normal transform and log-density code.
//!
//! Modules, in the order a reader meets them:
//! [`philox`] (the random bits) → [`rng`] (which bits belong to which (row, step, element), and
//! how they become uniforms and normals) → [`math`] (ln/sin/cos/sqrt per target) → [`mh`] (the
//! step of one row) → `gpu` (threads, warps, entry points).
#![no_std]
// `core_float_math`: `core::f32::math::mul_add`, a fused multiply-add available without std.
#![feature(core_float_math)]
#![cfg_attr(
    target_arch = "nvptx64",
    feature(abi_ptx, asm_experimental_arch, stdarch_nvptx)
)]

#[cfg(test)]
extern crate std;

pub mod math;
pub mod mh;
pub mod philox;
pub mod rng;

#[cfg(target_arch = "nvptx64")]
pub mod gpu;

/// The compiled versions of the step, by how much of a row a lane keeps in registers.
///
/// Each is a pair of entry points (in-kernel random numbers; the caller's). They compute the
/// same function: the version only sizes the register arrays, which the compiler must fix at
/// build time. A kernel's register count is that of its largest array, and registers per thread
/// decide how many warps an SM can hold, so short rows get a version with small arrays.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Variant {
    /// Up to 2 quads per lane in registers: `dim <= 256`.
    Q2,
    /// Up to 8 quads per lane in registers: `dim <= 1024`.
    Q8,
    /// Nothing kept: two passes over the row, any `dim`.
    Streaming,
}

impl Variant {
    /// Every variant.
    pub const ALL: [Variant; 3] = [Variant::Q2, Variant::Q8, Variant::Streaming];

    /// The version for rows of `dim` elements: the smallest whose arrays hold
    /// [`mh::quads_per_lane`]`(dim)` quads.
    pub fn for_dim(dim: usize) -> Self {
        match mh::quads_per_lane(dim) {
            0..=2 => Variant::Q2,
            3..=mh::MAX_RESIDENT_QUADS_PER_LANE => Variant::Q8,
            _ => Variant::Streaming,
        }
    }

    /// The entry point's name: random numbers drawn in the kernel, or (`caller_noise`) read
    /// from the caller's buffers.
    pub fn entry_point(self, caller_noise: bool) -> &'static str {
        match (self, caller_noise) {
            (Variant::Q2, false) => MH_STEP_Q2,
            (Variant::Q2, true) => MH_STEP_WITH_NOISE_Q2,
            (Variant::Q8, false) => MH_STEP_Q8,
            (Variant::Q8, true) => MH_STEP_WITH_NOISE_Q8,
            (Variant::Streaming, false) => MH_STEP_STREAMING,
            (Variant::Streaming, true) => MH_STEP_WITH_NOISE_STREAMING,
        }
    }
}

/// `mh_step` for rows of up to 256 elements (random numbers drawn in the kernel).
pub const MH_STEP_Q2: &str = "mh_step_q2";
/// `mh_step` for rows of up to 1024 elements.
pub const MH_STEP_Q8: &str = "mh_step_q8";
/// `mh_step` for rows of any length.
pub const MH_STEP_STREAMING: &str = "mh_step_streaming";
/// `mh_step_with_noise` (the caller's random numbers) for rows of up to 256 elements.
pub const MH_STEP_WITH_NOISE_Q2: &str = "mh_step_with_noise_q2";
/// `mh_step_with_noise` for rows of up to 1024 elements.
pub const MH_STEP_WITH_NOISE_Q8: &str = "mh_step_with_noise_q8";
/// `mh_step_with_noise` for rows of any length.
pub const MH_STEP_WITH_NOISE_STREAMING: &str = "mh_step_with_noise_streaming";
/// Name of the entry point that evaluates Philox for many (counter, key) pairs (known-answer
/// tests on the GPU).
pub const PHILOX4X32_10_MANY: &str = "philox4x32_10_many";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn variants_hold_their_rows() {
        assert_eq!(Variant::for_dim(1), Variant::Q2);
        assert_eq!(Variant::for_dim(256), Variant::Q2);
        assert_eq!(Variant::for_dim(257), Variant::Q8);
        assert_eq!(Variant::for_dim(1024), Variant::Q8);
        assert_eq!(Variant::for_dim(1025), Variant::Streaming);
    }
}
