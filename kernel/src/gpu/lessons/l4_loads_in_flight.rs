//! Lesson 4: the next row's loads in flight while this row computes.
//!
//! **The idea.** In lesson 3 every row starts with a wait: its loads go out, travel to memory
//! and back (about a microsecond), and only then does the arithmetic start. Here the loads of
//! the warp's *next* row are issued before the current row is computed, into a second set of
//! registers; by the time the current row is done they have arrived (*software pipelining*).
//! Nothing else changes: the same [`step_row`], the same bytes.
//!
//! **What it costs.** Another array of 8 quads per lane: 32 more registers, fewer warps per SM.
//! The production step gets the same overlap at no register cost by staging the next row in
//! shared memory with `cp.async` (`shared_feed.rs`), and keeps only the quads a row needs.
//!
//! **Measured** (H200): see the lessons table in the README.

use crate::gpu::lessons::l3_lane_groups::{Groups, load_lane_quads, step_row};
use crate::rng;

/// One Metropolis–Hastings step of every chain, as `lesson3_lane_groups`, with the next
/// row's loads issued one row ahead.
///
/// # Parameters
/// As `lesson3_lane_groups`.
///
/// # Thread mapping
/// As `lesson3_lane_groups`.
///
/// # Safety
/// As `lesson3_lane_groups`.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn lesson4_loads_in_flight(
    x: *const f32,
    x_new: *mut f32,
    accepted: *mut u8,
    mu: *const f32,
    inv_var: *const f32,
    batch: u64,
    dim: u64,
    step_size: f32,
    seed: u64,
    step: u64,
    _tile_rows: u32,
) {
    let (batch, dim) = (batch as usize, dim as usize);
    let draws = rng::StepDraws::new(rng::key(seed), step);
    let groups = Groups::of_this_warp(dim);
    let mut base = groups.first_row;
    // SAFETY: the kernel's contract (a row past the batch loads nothing).
    let mut next = unsafe { load_lane_quads(x, base + groups.group, batch, dim, groups) };
    while base < batch {
        let row = base + groups.group;
        let current = next;
        // Issued now, used in the next round: these loads travel while `current` computes.
        // SAFETY: as above.
        next = unsafe { load_lane_quads(x, row + groups.stride, batch, dim, groups) };
        // SAFETY: the kernel's contract; the whole warp runs this iteration (`base` is the
        // same in every lane).
        unsafe {
            step_row(
                &current,
                row,
                groups,
                (batch, dim, step_size),
                &draws,
                mu,
                inv_var,
                x_new,
                accepted,
            )
        };
        base += groups.stride;
    }
}
