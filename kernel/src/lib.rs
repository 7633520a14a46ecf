//! The device crate of fused-mh: one random-walk Metropolis–Hastings step for many independent
//! chains, written once and compiled twice.
//!
//! - For `nvptx64-nvidia-cuda`, the root `build.rs` compiles this crate to PTX with rustc's own
//!   NVPTX backend; the entry points `mh_step` and `mh_step_with_noise` live in [`gpu`], the one
//!   module that exists only on the GPU.
//! - For the host, it is an ordinary `no_std` library: the host crate's CPU reference and the
//!   unit tests call the very same Philox, normal transform and log-density code.
//!
//! Modules, in the order a reader meets them:
//! [`philox`] (the random bits) → [`rng`] (which bits belong to which (row, step, element), and
//! how they become uniforms and normals) → [`math`] (ln/sin/cos/sqrt per target) → [`mh`] (the
//! step of one row) → `gpu` (threads, warps, entry points).
#![no_std]
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

/// Name of the entry point that draws its random numbers in the kernel.
pub const MH_STEP: &str = "mh_step";
/// Name of the entry point that takes the caller's normals and uniforms.
pub const MH_STEP_WITH_NOISE: &str = "mh_step_with_noise";
/// Name of the entry point that evaluates Philox for many (counter, key) pairs (known-answer
/// tests on the GPU).
pub const PHILOX4X32_10_MANY: &str = "philox4x32_10_many";
