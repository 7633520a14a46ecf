//! The lessons' launches: which of their entry points holds a row, and their grids.

use fused_mh_kernel::layout::{self, WARP_SIZE};

use super::{
    Device, Launch, RNG_THREADS_PER_BLOCK, THREADS_PER_BLOCK, blocks_for, step_bytes, tiles,
};
use crate::Shape;

pub use fused_mh_kernel::lessons::{
    FAST_LOG_LESSON, FUSED_LESSON, LESSONS, LONG_ROW_LESSON, Lesson, LessonLayout,
};

/// Quads per lane of the lessons' longer register arrays (rows of up to 1024 elements).
const LESSON_MAX_QUADS_PER_LANE: usize = 8;

/// The launch of a lesson for a batch, or `None` where the lesson cannot hold the row (the
/// register rows: at most 1024 elements, in whole quads for 16-byte loads; a block per row:
/// 1025 to 8192 elements in whole quads).
pub fn lesson(lesson: Lesson, shape: Shape, device: Device) -> Option<Launch> {
    let (batch, dim) = (shape.batch(), shape.dim());
    let quads = layout::quads_per_lane(dim);
    let entry = lesson.entries[usize::from(quads > layout::MAX_RESIDENT_QUADS_PER_LANE)];
    let rows_per_warp = WARP_SIZE / layout::group_width(dim);
    let register_rows_fit = |whole_quads: bool| {
        (!whole_quads || dim.is_multiple_of(layout::QUAD)) && quads <= LESSON_MAX_QUADS_PER_LANE
    };
    let (warps, threads) = match lesson.layout {
        // One thread per row, in blocks of 256 threads.
        LessonLayout::ThreadPerRow => (batch.div_ceil(WARP_SIZE) as u64, THREADS_PER_BLOCK),
        LessonLayout::WarpPerRow => (batch as u64, RNG_THREADS_PER_BLOCK),
        LessonLayout::LaneGroups => (batch.div_ceil(rows_per_warp) as u64, RNG_THREADS_PER_BLOCK),
        LessonLayout::RegisterRows { whole_quads } => {
            if !register_rows_fit(whole_quads) {
                return None;
            }
            (batch.div_ceil(rows_per_warp) as u64, RNG_THREADS_PER_BLOCK)
        }
        // A block of a warp per segment for each row.
        LessonLayout::BlockPerRow => {
            let segments = layout::segments(dim);
            let holds = dim > LESSON_MAX_QUADS_PER_LANE * WARP_SIZE * layout::QUAD
                && dim.is_multiple_of(layout::QUAD)
                && segments <= layout::MAX_BLOCK_ROW_SEGMENTS;
            if !holds {
                return None;
            }
            let threads = (segments * WARP_SIZE) as u32;
            (batch as u64 * segments as u64, threads)
        }
        // The production step's tiles (the rows per tile are the kernel's argument).
        LessonLayout::Tiles => {
            if !register_rows_fit(true) {
                return None;
            }
            let bytes = step_bytes(shape, true);
            let lanes = layout::group_width(shape.dim());
            let (blocks, tile_rows) = tiles(shape, lanes, RNG_THREADS_PER_BLOCK, bytes, device);
            return Some(Launch {
                entry,
                blocks,
                threads: RNG_THREADS_PER_BLOCK,
                tile_rows,
            });
        }
    };
    Some(Launch {
        entry,
        blocks: blocks_for(warps, threads, device),
        threads,
        tile_rows: 0,
    })
}
