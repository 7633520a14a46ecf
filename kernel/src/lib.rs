//! The device crate of fused-mh: one random-walk Metropolis–Hastings step for many independent
//! chains, written once and compiled twice.
//!
//! - For `nvptx64-nvidia-cuda`, the root `build.rs` compiles this crate to PTX with rustc's own
//!   NVPTX backend; the entry points (`mh_step_*`, `mh_step_with_noise_*`, `mh_chain_*`) live in
//!   `gpu`, the one module that exists only on the GPU. The host library's `dispatch` module
//!   chooses among them by name.
//! - For the host, it is an ordinary `no_std` library: the host crate's CPU reference and the
//!   unit tests call the very same Philox, normal transform and log-density code.
//!
//! Modules, in the order a reader meets them:
//! [`philox`] (the random bits) → [`rng`] (which bits belong to which (row, step, element), and
//! how they become uniforms and normals) → [`math`] (ln/sin/cos/sqrt per target) → [`mh`] (the
//! step of one row) → [`moments`] (running means and variances) → `gpu` (the device layer in
//! `gpu/device/`, then the kernels: the single step, the fused K-step kernel, the statistics).
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
pub mod moments;
pub mod philox;
pub mod rng;

#[cfg(target_arch = "nvptx64")]
pub mod gpu;

/// Quads per lane the longer staged step holds (rows of up to `8 * 32` quads: 1024 elements).
pub const MAX_STAGED_QUADS_PER_LANE: usize = 8;

/// Warps per block of the staged steps: their shared array holds two rows for each, so the
/// host must launch them with exactly `32 *` this many threads per block.
pub const STAGED_WARPS_PER_BLOCK: usize = 4;

/// The longest rows the `split` fused kernels take: groups of at most 16 lanes
/// ([`mh::group_width`]), so that twice the lanes still fit in a warp.
pub const MAX_SPLIT_DIM: usize = 128;
