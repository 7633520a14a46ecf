//! The lessons' launches: which of their entry points holds a row, and their grids.

use fused_mh_kernel::layout::{self, WARP_SIZE};

use super::{Device, Launch, RNG_THREADS_PER_BLOCK, THREADS_PER_BLOCK, blocks_for};
use crate::Shape;

/// One of the lessons (`kernel/src/gpu/lessons/`): the step written a simpler way, same
/// signature and same results as the production step.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Lesson {
    /// Its number: 1 to 4 the single steps (5 is the production step, [`super::step`]), 6 the
    /// fused K steps ([`FUSED_LESSON`]; 7 is the production fused kernel).
    pub number: u32,
    /// Its entry points: for rows of at most 2 quads per lane (256 elements), and longer rows.
    /// Lessons 3 and 4 keep a lane's quads in a register array whose size is fixed at compile
    /// time, so they have one entry point for each size.
    pub entries: [&'static str; 2],
    /// Its file in the kernel crate.
    pub file: &'static str,
    /// The one thing it changes.
    pub idea: &'static str,
}

/// The lessons, simplest first. Each runs with in-kernel random numbers only.
pub const LESSONS: [Lesson; 4] = [
    Lesson {
        number: 1,
        entries: ["lesson1_thread_per_row"; 2],
        file: "kernel/src/gpu/lessons/l1_thread_per_row.rs",
        idea: "one thread per row, grid-stride",
    },
    Lesson {
        number: 2,
        entries: ["lesson2_warp_per_row"; 2],
        file: "kernel/src/gpu/lessons/l2_warp_per_row.rs",
        idea: "one warp per row, coalesced, shuffle sum",
    },
    Lesson {
        number: 3,
        entries: ["lesson3_lane_groups_q2", "lesson3_lane_groups_q8"],
        file: "kernel/src/gpu/lessons/l3_lane_groups.rs",
        idea: "G lanes per row, 16-byte quads, row in registers",
    },
    Lesson {
        number: 4,
        entries: ["lesson4_loads_in_flight_q2", "lesson4_loads_in_flight_q8"],
        file: "kernel/src/gpu/lessons/l4_loads_in_flight.rs",
        idea: "the next row's loads in flight",
    },
];

/// Lesson 6: the fused K-step kernel written simply (its own signature: `Gpu::steps_lesson`).
pub const FUSED_LESSON: Lesson = Lesson {
    number: 6,
    entries: ["lesson6_fused_steps_q2", "lesson6_fused_steps_q8"],
    file: "kernel/src/gpu/lessons/l6_fused_steps.rs",
    idea: "K steps in one launch, the state in registers",
};

/// Quads per lane of the lessons' longer register arrays (lessons 3 and 4: rows of up to 1024
/// elements).
const LESSON_MAX_QUADS_PER_LANE: usize = 8;

/// The launch of a lesson for a batch, or `None` where the lesson cannot hold the row
/// (lessons 3 and 4: whole quads, at most 1024 elements).
pub fn lesson(lesson: Lesson, shape: Shape, device: Device) -> Option<Launch> {
    let (batch, dim) = (shape.batch(), shape.dim());
    let quads = layout::quads_per_lane(dim);
    let entry = lesson.entries[usize::from(quads > layout::MAX_RESIDENT_QUADS_PER_LANE)];
    let (warps, threads) = match lesson.number {
        // One thread per row, in blocks of 256 threads.
        1 => (batch.div_ceil(WARP_SIZE) as u64, THREADS_PER_BLOCK),
        2 => (batch as u64, RNG_THREADS_PER_BLOCK),
        _ => {
            if !dim.is_multiple_of(layout::QUAD) || quads > LESSON_MAX_QUADS_PER_LANE {
                return None;
            }
            let rows_per_warp = WARP_SIZE / layout::group_width(dim);
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
