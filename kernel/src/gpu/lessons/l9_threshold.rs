//! Lesson 9: the threshold test.
//!
//! **The idea.** Lesson 8 decides with `log u < log alpha`, where `log alpha = -1/2 * total`:
//! one multiplication per row and step after the group's sum, on the path from the sum to the
//! decision. Multiplying both sides by `-2` reverses the comparison and is exact in floating
//! point: `total < -2 log u` makes the same decisions (`mh::below_threshold` says where, and
//! a test checks every magnitude). The lane that fetches the uniform computes the *threshold*
//! `-2 log u` once per row, in the tile's preamble, and the decision is one comparison of the
//! sum with it. Nothing else changes: lesson 8's tiles with [`Threshold`] for [`LogUniform`].
//!
//! **What it costs.** Nothing: one instruction per row fewer on the decision's path. The
//! fused kernel, which decides K times per row, computes the thresholds of `G` steps at once.
//!
//! **Measured**: the README's lessons table (`host lessons 9`).
//!
//! [`LogUniform`]: crate::lessons::l8_tile_uniforms::LogUniform

use crate::lessons::l4_row_in_registers::lane_group_entry_point;
use crate::lessons::l8_tile_uniforms::{RowTest, tiles_of_rows};
use crate::mh;
use crate::rng;

/// Lesson 9's test: the value handed over is `-2 log u`, and the row accepts when its total of
/// terms is below it.
pub(crate) struct Threshold;

impl RowTest for Threshold {
    #[inline(always)]
    fn of_uniform(u: f32) -> f32 {
        mh::threshold(mh::log_uniform(u))
    }
    #[inline(always)]
    fn accept(total: f32, threshold: f32) -> bool {
        mh::below_threshold(total, threshold)
    }
}

/// The body of the entry points below.
///
/// # Safety
/// As `tiles_of_rows` (lesson 8).
#[inline(always)]
unsafe fn threshold<const Q: usize, const V4: bool>(
    buffers: (*const f32, *mut f32, *mut u8, *const f32),
    sizes: (usize, usize, f32),
    draws: &rng::StepDraws,
    tile_rows: usize,
) {
    // SAFETY: forwarded from this function's contract.
    unsafe { tiles_of_rows::<Q, Threshold>(buffers, sizes, draws, tile_rows) }
}

lane_group_entry_point!(
    lesson9_threshold_q2,
    threshold,
    2,
    true,
    256,
    "as lesson 8, with the threshold test"
);
lane_group_entry_point!(
    lesson9_threshold_q8,
    threshold,
    8,
    true,
    1024,
    "as lesson 8, with the threshold test"
);
