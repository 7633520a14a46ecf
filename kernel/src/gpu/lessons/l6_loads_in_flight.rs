//! Lesson 6: the next row's loads in flight while this row computes.
//!
//! **The idea.** In lesson 5 every row starts with a wait: its loads go out, travel to memory
//! and back (about a microsecond), and only then does the arithmetic start. Here the loads of
//! the warp's *next* row are issued before the current row is computed, into a second set of
//! registers; by the time the current row is done they have arrived (*software pipelining*).
//! Nothing else changes: the same [`step_row`], the same bytes.
//!
//! **What it costs.** Another array of `Q` quads per lane: `4 Q` more registers, fewer warps
//! per SM. The production step gets the same overlap at no register cost by staging the next
//! row in shared memory with `cp.async` (`shared_feed.rs`).
//!
//! **Measured**: the README's lessons table (`host lessons 6`) — *slower* than lesson 5: the
//! registers that hold the next row cost more resident warps than the overlap wins. That is
//! why the production step stages the next row in shared memory instead.

use crate::lessons::l3_lane_groups::Groups;
use crate::lessons::l4_row_in_registers::{lane_group_entry_point, load_lane_quads, step_row};
use crate::rng;

/// The body of the entry points below.
///
/// # Safety
/// As `lesson5_vector_quads_q2`, with `quads_per_lane(dim) <= Q`.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
unsafe fn loads_in_flight<const Q: usize, const V4: bool>(
    x: *const f32,
    x_new: *mut f32,
    accepted: *mut u8,
    mu: *const f32,
    inv_var: *const f32,
    (batch, dim, step_size): (usize, usize, f32),
    draws: &rng::StepDraws,
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
                mu,
                inv_var,
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
