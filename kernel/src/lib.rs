//! The device crate of fused-mh: one random-walk Metropolis–Hastings step for many independent
//! chains, written once and compiled twice.
//!
//! - For `nvptx64-nvidia-cuda`, the root `build.rs` compiles this crate to PTX with rustc's own
//!   NVPTX backend; the kernels live in `gpu`, the one module that exists only on the GPU, and
//!   [`abi`] names their entry points for every target (`mh_step_q2_v4_gaussian`, ...). The
//!   host library's `dispatch` module chooses among them by name.
//! - For the host, it is an ordinary `no_std` library: the host crate's CPU reference and the
//!   unit tests call the very same Philox, normal transform and log-density code.
//!
//! Modules, in the order a reader meets them:
//! [`philox`] (the random bits) → [`rng`] (which bits belong to which (row, step, element), and
//! how they become uniforms and normals) → [`math`] (ln/sin/cos/sqrt on both machines) →
//! [`layout`] (quads, lane groups and every limit of a row) → [`target`] (the log-density: the
//! `Target` trait, one file per target) → [`mh`] (the step of one row) → [`model`] (models with
//! data, whose log-density couples the dimensions: the linear regression) → [`moments`] (running
//! means and variances) → `gpu` (the device layer in `gpu/device/`, then the kernels: the
//! single step, the fused K-step kernel, the statistics) → [`abi`] (the one declaration that
//! compiles each kernel family for each target, and the names the host reads).
#![no_std]
// `core_float_math`: `core::f32::math::mul_add`, a fused multiply-add available without std.
#![feature(core_float_math)]
#![cfg_attr(
    target_arch = "nvptx64",
    feature(abi_ptx, asm_experimental_arch, stdarch_nvptx)
)]

#[cfg(test)]
extern crate std;

pub mod abi;
pub mod layout;
pub mod lessons;
pub mod math;
pub mod mh;
pub mod model;
pub mod moments;
pub mod philox;
pub mod rng;
pub mod target;

#[cfg(target_arch = "nvptx64")]
pub mod gpu;
