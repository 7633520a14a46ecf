//! Lesson 15: the normal transform's logarithm on the special function unit.
//!
//! **The idea.** Lessons 1 to 14 change how threads share the work; this one changes one
//! function. Every normal pair of the Box–Muller transform needs `-2 ln u` for its radius,
//! and lesson 11 computes it with the polynomial the CPU reference uses
//! ([`math::minus_two_ln_normal`]): a range reduction by bit manipulation and nine
//! multiply-adds, 18 instructions in all, the largest part of a pair's arithmetic. The GPU has
//! a logarithm in hardware: the special function unit's `lg2.approx.f32`, one instruction at
//! 16 per clock per SM, beside the 128 FP32 lanes. This lesson is lesson 11 with the radius
//! from [`math::minus_two_ln_complement`] instead: `-2 ln 2 * lg2(1 - w)` for the uniform `w`,
//! 7 instructions with the guard below. Nothing else changes.
//!
//! **What it costs: accuracy, and how it is kept.** `lg2.approx` errs by about 2^-22
//! *absolutely*. Where `u = 1 - w` is near 1 the radius is small and that error, divided by
//! the radius, would move a normal by up to 4e-5, ten times the SFU's `sin`/`cos` error that
//! every normal carries anyway. So for `w` below 2^-10 (one pair in a thousand) the radius
//! squared comes from two terms of the series `-2 ln(1 - w) = 2 w + w^2 + ...` instead, which
//! is exact enough there because `w` itself is exact; both values are computed and one is
//! kept by a select, not a branch, so the warp never splits. Every normal then stays within
//! 3.8e-6 of the polynomial's (a unit test bounds it for an `lg2` off by 2^-22 at every
//! uniform; `tests/gpu_normals.rs` measures the real SFU at all 2^23 of them).
//!
//! **Why the sampler stays exact.** Metropolis–Hastings needs the proposal's increments
//! symmetric in distribution, not exactly Gaussian. The logarithm only sets the radius `r`;
//! each normal's sign comes from the angle (`r cos theta`, `r sin theta`), so no choice of
//! logarithm can make the proposal lean one way. The chains are still the target's; they are
//! no longer the CPU reference's bit for bit, so the GPU tests compare them with the
//! tolerances `cpu::StepOutput::compare` states (as for `sin` and `cos`), while this lesson
//! matches the production fused kernel, which draws its normals the same way, bit for bit.
//!
//! **Measured**: the README's lessons table, row 15 against row 11 (`host lessons 15`); every
//! production kernel takes its logarithm this way (`bench/NOTES.md`, issue 22, "the fast
//! logarithm of the normal transform", has the instruction counts).

use crate::lessons::l11_fused_steps::fused_steps_entry_point;
use crate::math;

fused_steps_entry_point!(lesson15_fast_log_q2, 2, 256, math::minus_two_ln_complement);
fused_steps_entry_point!(lesson15_fast_log_q8, 8, 1024, math::minus_two_ln_complement);
