//! Lesson 6: the next row's loads in flight while this row computes.
//!
//! **The idea.** In lesson 5 every row starts with a wait: its loads go out, travel to memory
//! and back (about a microsecond), and only then does the arithmetic start. Here the loads of
//! the warp's *next* row are issued before the current row is computed, into a second set of
//! registers; by the time the current row is done they have arrived (*software pipelining*).
//! Nothing else changes: the same [`step_row`], the same bytes.
//!
//! **What it costs.** Another array of `Q` quads per lane: `4 Q` more registers, fewer warps
//! per SM. Lessons 7 to 9 keep this structure and change other things; lesson 10, the
//! production step, gets the same overlap at no register cost by staging the next row in
//! shared memory with `cp.async` (`shared_feed.rs`).
//!
//! **Measured**: the README's lessons table (`host lessons 6`) — *slower* than lesson 5 on
//! long rows: the registers that hold the next row cost more resident warps than the overlap
//! wins.

use crate::lessons::l3_lane_groups::Groups;
use crate::lessons::l4_row_in_registers::{
    accept_drawing_the_uniform, global_target_quad, lane_group_entry_point, load_lane_quads,
    step_row,
};
use crate::rng;
use crate::target::gaussian::GaussianQuad;

/// The body of the entry points below: the target from global memory, as in lesson 5.
///
/// # Safety
/// As `lesson5_vector_quads_q2`, with `quads_per_lane(dim) <= Q`.
#[inline(always)]
unsafe fn loads_in_flight<const Q: usize, const V4: bool>(
    buffers: (*const f32, *mut f32, *mut u8, *const f32),
    sizes: (usize, usize, f32),
    draws: &rng::StepDraws,
    _tile_rows: usize,
) {
    let (target, dim) = (buffers.3, sizes.1);
    // SAFETY (of every call): q < quads_per_row(dim), the only quads `step_row` asks for.
    let target_quad = |q| unsafe { global_target_quad::<true>(target, dim, q) };
    // SAFETY: forwarded from this function's contract.
    unsafe { rows_with_loads_in_flight::<Q>(buffers, sizes, draws, target_quad) }
}

/// Every row of this warp, the next row's loads issued before the current row is computed;
/// the target's quads from `target_quad`.
///
/// # Safety
/// As [`loads_in_flight`], and `target_quad` safe to call for every `q < quads_per_row(dim)`.
#[inline(always)]
pub(crate) unsafe fn rows_with_loads_in_flight<const Q: usize>(
    (x, x_new, accepted, _): (*const f32, *mut f32, *mut u8, *const f32),
    (batch, dim, step_size): (usize, usize, f32),
    draws: &rng::StepDraws,
    target_quad: impl Fn(usize) -> GaussianQuad + Copy,
) {
    let groups = Groups::of_this_warp(dim);
    let mut base = groups.first_row;
    // SAFETY: the caller's contract (a row past the batch loads nothing).
    let mut next =
        unsafe { load_lane_quads::<Q, true>(x, base + groups.group, batch, dim, groups) };
    while base < batch {
        let row = base + groups.group;
        let current = next;
        // Issued now, used in the next round: these loads travel while `current` computes.
        // SAFETY: as above.
        next = unsafe { load_lane_quads::<Q, true>(x, row + groups.stride, batch, dim, groups) };
        // SAFETY: the caller's contract; the whole warp runs this iteration (`base` is the
        // same in every lane).
        unsafe {
            step_row::<Q, true>(
                &current,
                row,
                groups,
                (batch, dim, step_size),
                draws,
                target_quad,
                |total| accept_drawing_the_uniform(draws, row, total),
                x_new,
                accepted,
            )
        };
        base += groups.stride;
    }
}

lane_group_entry_point!(
    lesson6_loads_in_flight_q2,
    loads_in_flight,
    2,
    true,
    256,
    "as lesson 5, with the next row's loads issued one row ahead"
);
lane_group_entry_point!(
    lesson6_loads_in_flight_q8,
    loads_in_flight,
    8,
    true,
    1024,
    "as lesson 5, with the next row's loads issued one row ahead"
);
