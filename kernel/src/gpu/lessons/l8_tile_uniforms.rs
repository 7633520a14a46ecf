//! Lesson 8: one uniform per row, fetched by one lane and handed to the group by a shuffle.
//!
//! **The idea.** Up to lesson 7 every lane of a group draws its row's acceptance uniform and
//! takes its log: `G` Philox calls and `G` logarithms where one would do. At dim 64 a lane
//! draws two quads of normals (two Philox calls) and the uniform (a third): a third of its
//! random-number work is this repetition. Here a warp works through *tiles* of `tile_rows`
//! consecutive rows (a power of two from `32 / G` to 32, chosen by the host, see
//! `dispatch::tiles`). At the start of a tile, lane `l` draws the uniform of the tile's row
//! `l` and takes its log; then, for each row, the group's lanes read that value from lane
//! `l` with one shuffle (`shfl.sync.idx`). One Philox call and one `ln` per row, the same
//! numbers. Nothing else changes: lesson 7's rows, loads in flight and shared target.
//!
//! **What it costs.** A tile's uniforms are fetched before its first row, so a tile must be
//! uniform across the warp (every lane runs the same loops, as the shuffles require), and a
//! small batch in tiles of 32 rows would leave SMs idle: the host halves the tile until there
//! are enough warps.
//!
//! **Measured**: the README's lessons table (`host lessons 8`).

use crate::gpu::args::{shared_target_quad, stage_target};
use crate::gpu::device::thread::lane_id;
use crate::gpu::device::warp::shfl_idx;
use crate::layout::WARP_SIZE;
use crate::lessons::l3_lane_groups::Groups;
use crate::lessons::l4_row_in_registers::{lane_group_entry_point, load_lane_quads, step_row};
use crate::mh;
use crate::rng;
use crate::target::gaussian::Gaussian;

/// How a row decides from its uniform: what the lane that fetches the uniform computes from
/// it once per row ([`RowTest::of_uniform`]), and the decision from the group's total of
/// terms and that value ([`RowTest::accept`]).
pub(crate) trait RowTest {
    /// The value handed to the row's group, from its uniform.
    fn of_uniform(u: f32) -> f32;
    /// The decision from the group's total of terms and the value handed over.
    fn accept(total: f32, value: f32) -> bool;
}

/// Lesson 8's test: the value handed over is `log u`, and the row accepts when
/// `log u < log alpha`, as in every lesson before.
pub(crate) struct LogUniform;

impl RowTest for LogUniform {
    #[inline(always)]
    fn of_uniform(u: f32) -> f32 {
        mh::log_uniform(u)
    }
    #[inline(always)]
    fn accept(total: f32, log_u: f32) -> bool {
        mh::accept(log_u, mh::log_alpha(total))
    }
}

/// The body of the entry points below: lesson 8's test.
///
/// # Safety
/// As [`tiles_of_rows`].
#[inline(always)]
unsafe fn tile_uniforms<const Q: usize, const V4: bool>(
    buffers: (*const f32, *mut f32, *mut u8, *const f32),
    sizes: (usize, usize, f32),
    draws: &rng::StepDraws,
    tile_rows: usize,
) {
    // SAFETY: forwarded from this function's contract.
    unsafe { tiles_of_rows::<Q, LogUniform>(buffers, sizes, draws, tile_rows) }
}

/// Every tile of this warp: the tile's uniforms fetched, one lane per row, then its rows
/// `32 / G` at a time, each group taking its row's value from the lane that fetched it; the
/// next row's loads in flight and the target in shared memory, as in lesson 7.
///
/// # Safety
/// As `lesson5_vector_quads_q2`, with `quads_per_lane(dim) <= Q`, `tile_rows` a power of two
/// from `32 / G` to 32, and every thread of the block running it (the target's barrier).
#[inline(always)]
pub(crate) unsafe fn tiles_of_rows<const Q: usize, D: RowTest>(
    (x, x_new, accepted, target): (*const f32, *mut f32, *mut u8, *const f32),
    (batch, dim, step_size): (usize, usize, f32),
    draws: &rng::StepDraws,
    tile_rows: usize,
) {
    let groups = Groups::of_this_warp(dim);
    let rows_at_once = WARP_SIZE / groups.g;
    // Warp `w` of `W` starts at row `w * rows_at_once` and strides `W * rows_at_once` in
    // `Groups`; in tiles it starts at `w * tile_rows` and strides `W * tile_rows`.
    let (first_tile, tile_stride) = (
        groups.first_row / rows_at_once * tile_rows,
        groups.stride / rows_at_once * tile_rows,
    );
    // SAFETY: as lesson 7 (at most Q * 32 quads; the whole block is here).
    let staged = unsafe { stage_target::<Gaussian, Q, true>(target, dim) };
    // SAFETY (of every call): q < quads_per_row(dim) <= Q * 32, inside the copy.
    let target_quad = |q| unsafe { shared_target_quad::<Gaussian>(staged, q) };
    let lane = lane_id();
    let mut tile = first_tile;
    // SAFETY: the caller's contract (a row past the batch loads nothing).
    let mut next = unsafe { load_lane_quads::<Q, true>(x, tile + groups.group, batch, dim, groups) };
    // `tile` and `first` are the same in every lane: every lane runs every shuffle.
    while tile < batch {
        let fetched = if lane < tile_rows && tile + lane < batch {
            D::of_uniform(draws.row_uniform((tile + lane) as u32))
        } else {
            0.0
        };
        let mut first = 0;
        while first < tile_rows {
            let in_tile = first + groups.group;
            let row = tile + in_tile;
            // SAFETY: every lane of the warp is here (the loops' bounds are the same in all).
            let value = unsafe { shfl_idx(fetched, in_tile as u32) };
            let current = next;
            // The group's next row: the next in this tile, or its place in the next tile.
            let next_row = if first + rows_at_once < tile_rows {
                row + rows_at_once
            } else {
                tile + tile_stride + groups.group
            };
            // SAFETY: as above.
            next = unsafe { load_lane_quads::<Q, true>(x, next_row, batch, dim, groups) };
            // SAFETY: the caller's contract; the whole warp runs this iteration.
            unsafe {
                step_row::<Q, true>(
                    &current,
                    row,
                    groups,
                    (batch, dim, step_size),
                    draws,
                    target_quad,
                    |total| D::accept(total, value),
                    x_new,
                    accepted,
                )
            };
            first += rows_at_once;
        }
        tile += tile_stride;
    }
}

lane_group_entry_point!(
    lesson8_tile_uniforms_q2,
    tile_uniforms,
    2,
    true,
    256,
    "as lesson 7, with one uniform per row handed out by a shuffle"
);
lane_group_entry_point!(
    lesson8_tile_uniforms_q8,
    tile_uniforms,
    8,
    true,
    1024,
    "as lesson 7, with one uniform per row handed out by a shuffle"
);
