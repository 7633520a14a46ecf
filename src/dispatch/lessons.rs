//! The lessons' launches: which of their entry points holds a row, and their grids.

use fused_mh_kernel::layout::{self, WARP_SIZE};

use super::{Device, Launch, RNG_THREADS_PER_BLOCK, THREADS_PER_BLOCK, blocks_for};
use crate::Shape;

/// One of the lessons (`kernel/src/gpu/lessons/`): the step written a simpler way, each lesson
/// changing one thing from the one before; the same results as the production step.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Lesson {
    /// Its number: 1 to 6 the single steps (7 is the production step, [`super::step`]), 8 the
    /// fused K steps ([`FUSED_LESSON`]; 9 is the production fused kernel).
    pub number: u32,
    /// Its entry points: for rows of at most 2 quads per lane (256 elements), and longer rows.
    /// From lesson 4 on a lane keeps its quads in a register array whose size is fixed at
    /// compile time, so there is one entry point for each size.
    pub entries: [&'static str; 2],
    /// Its file in the kernel crate.
    pub file: &'static str,
    /// The one thing it changes.
    pub idea: &'static str,
    /// How its threads share the rows, which fixes its grid and the rows it holds.
    pub layout: LessonLayout,
}

/// How a lesson's threads share the rows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LessonLayout {
    /// One thread per row: any row.
    ThreadPerRow,
    /// One warp per row: any row.
    WarpPerRow,
    /// A group of `group_width(dim)` lanes per row, the row walked twice: any row.
    LaneGroups,
    /// Lane groups with the row in register arrays: rows of at most 8 quads per lane (1024
    /// elements), in whole quads if `whole_quads` (16-byte loads).
    RegisterRows {
        /// Rows in whole quads only.
        whole_quads: bool,
    },
}

/// The lessons, simplest first. Each runs with in-kernel random numbers only.
pub const LESSONS: [Lesson; 6] = [
    Lesson {
        number: 1,
        entries: ["lesson1_thread_per_row"; 2],
        file: "kernel/src/gpu/lessons/l1_thread_per_row.rs",
        idea: "one thread per row, grid-stride",
        layout: LessonLayout::ThreadPerRow,
    },
    Lesson {
        number: 2,
        entries: ["lesson2_warp_per_row"; 2],
        file: "kernel/src/gpu/lessons/l2_warp_per_row.rs",
        idea: "one warp per row, coalesced, shuffle sum",
        layout: LessonLayout::WarpPerRow,
    },
    Lesson {
        number: 3,
        entries: ["lesson3_lane_groups"; 2],
        file: "kernel/src/gpu/lessons/l3_lane_groups.rs",
        idea: "G lanes per row: no idle lanes on short rows",
        layout: LessonLayout::LaneGroups,
    },
    Lesson {
        number: 4,
        entries: ["lesson4_row_in_registers_q2", "lesson4_row_in_registers_q8"],
        file: "kernel/src/gpu/lessons/l4_row_in_registers.rs",
        idea: "the row in registers: read once, normals drawn once",
        layout: LessonLayout::RegisterRows { whole_quads: false },
    },
    Lesson {
        number: 5,
        entries: ["lesson5_vector_quads_q2", "lesson5_vector_quads_q8"],
        file: "kernel/src/gpu/lessons/l5_vector_quads.rs",
        idea: "each quad one 16-byte load or store",
        layout: LessonLayout::RegisterRows { whole_quads: true },
    },
    Lesson {
        number: 6,
        entries: ["lesson6_loads_in_flight_q2", "lesson6_loads_in_flight_q8"],
        file: "kernel/src/gpu/lessons/l6_loads_in_flight.rs",
        idea: "the next row's loads in flight",
        layout: LessonLayout::RegisterRows { whole_quads: true },
    },
];

/// Lesson 8: the fused K-step kernel written simply (its own signature: `Gpu::steps_lesson`).
pub const FUSED_LESSON: Lesson = Lesson {
    number: 8,
    entries: ["lesson8_fused_steps_q2", "lesson8_fused_steps_q8"],
    file: "kernel/src/gpu/lessons/l8_fused_steps.rs",
    idea: "K steps in one launch, the state in registers",
    layout: LessonLayout::RegisterRows { whole_quads: true },
};

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
