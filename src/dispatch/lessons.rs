//! The lessons' launches: which of their entry points holds a row, and their grids.

use fused_mh_kernel::layout::{self, WARP_SIZE};

use super::{Device, Launch, RNG_THREADS_PER_BLOCK, THREADS_PER_BLOCK, blocks_for};
use crate::Shape;

pub use fused_mh_kernel::lessons::{FUSED_LESSON, LESSONS, Lesson, LessonLayout};

/// Quads per lane of the lessons' longer register arrays (rows of up to 1024 elements).
const LESSON_MAX_QUADS_PER_LANE: usize = 8;

/// The launch of a lesson for a batch, or `None` where the lesson cannot hold the row (the
/// register rows: at most 1024 elements, in whole quads for 16-byte loads).
pub fn lesson(lesson: Lesson, shape: Shape, device: Device) -> Option<Launch> {
    let (batch, dim) = (shape.batch(), shape.dim());
    let quads = layout::quads_per_lane(dim);
    let entry = lesson.entries[usize::from(quads > layout::MAX_RESIDENT_QUADS_PER_LANE)];
    let rows_per_warp = WARP_SIZE / layout::group_width(dim);
    let (warps, threads) = match lesson.layout {
        // One thread per row, in blocks of 256 threads.
        LessonLayout::ThreadPerRow => (batch.div_ceil(WARP_SIZE) as u64, THREADS_PER_BLOCK),
        LessonLayout::WarpPerRow => (batch as u64, RNG_THREADS_PER_BLOCK),
        LessonLayout::LaneGroups => (batch.div_ceil(rows_per_warp) as u64, RNG_THREADS_PER_BLOCK),
        LessonLayout::RegisterRows { whole_quads } => {
            if (whole_quads && !dim.is_multiple_of(layout::QUAD))
                || quads > LESSON_MAX_QUADS_PER_LANE
            {
                return None;
            }
            (batch.div_ceil(rows_per_warp) as u64, RNG_THREADS_PER_BLOCK)
        }
    };
    Some(Launch {
        entry,
        blocks: blocks_for(warps, threads, device),
        threads,
        tile_rows: 0,
    })
}
