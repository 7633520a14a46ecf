//! The lessons: the same Metropolis–Hastings step written nine simpler ways, each changing one
//! thing from the one before, up to the production step; each a file in `gpu/lessons/` that
//! opens with the one thing it changes, what that costs, and where its figures are
//! (`cargo run -p host --release -- lessons` prints the table and draws the chart).
//!
//! Every lesson has the production step's signature and draws the same random numbers from the
//! same functions ([`crate::rng`], [`crate::mh`]), so every one of them computes the same step
//! and is checked against the CPU reference by the GPU tests. Only the way threads share the
//! work changes:
//!
//! 1. `l1_thread_per_row.rs`: one thread per row — threads, blocks, the grid-stride loop.
//! 2. `l2_warp_per_row.rs`: one warp per row, lanes side by side, a shuffle reduction.
//! 3. `l3_lane_groups.rs`: `G` lanes per row, so short rows leave no lane idle.
//! 4. `l4_row_in_registers.rs`: the row kept in registers, read once and written once.
//! 5. `l5_vector_quads.rs`: each quad one 16-byte load or store.
//! 6. `l6_loads_in_flight.rs`: the next row's loads issued before this row is computed.
//! 7. `l7_shared_target.rs`: the target copied once per block into shared memory.
//! 8. `l8_tile_uniforms.rs`: warps in tiles of rows, one lane drawing each row's uniform and a
//!    shuffle handing it to the row's group.
//! 9. `l9_threshold.rs`: the decision as one comparison of the sum with `-2 log u`.
//! 10. The production step (`step.rs`, `entries.rs`): on sm_80 and later the next row staged in
//!     shared memory by `cp.async` (`shared_feed.rs`) instead of registers.
//!
//! Then the fused K-step kernel, the project's headline, gets its own lesson:
//!
//! 11. `l11_fused_steps.rs`: K steps in one launch, the state in registers across them
//!     (lesson 5's layout with its body turned into a loop over steps; the normals' logarithm
//!     the CPU reference's polynomial, which lesson 15 changes).
//! 12. The production fused kernel (`chain.rs`): the next step's normals drawn during this
//!     step's sum, the uniforms drawn `G` steps at a time and shared by shuffles, the target in
//!     shared memory; on large batches a lane holds two lanes' quads (`PAIRED`), so a step's
//!     fixed work is shared by twice the quads; on small batches a row takes twice the lanes,
//!     one quad each, and its steps run without a test of their own (`chain_split.rs`: loop
//!     runs and unswitching, explained in its module doc).
//!
//! Rows longer than a warp's registers hold (1024 elements) take a block each, and a lesson of
//! their own:
//!
//! 13. `l13_block_per_row.rs`: a warp per 1024-element segment of the row, the segments' sums
//!     meeting in shared memory at a barrier (lesson 5's layout, one segment per warp).
//! 14. The production step of long rows (`block_rows.rs`): the next row loaded during this
//!     one (by `cp.async`, or into registers where the target's terms are short), one barrier
//!     per row, thresholds 32 rows at a time, a persistent grid.
//!
//! The last lesson changes one function instead of the threads' layout:
//!
//! 15. `l15_fast_log.rs`: lesson 11 with the normal transform's logarithm on the special
//!     function unit (`lg2.approx`) instead of the CPU reference's polynomial, which lesson 11
//!     keeps; every production kernel draws its normals this way.
//!
//! Their figures are in the README's lessons table, which `host lessons --readme README.md`
//! writes from the measured report (`bench/results/lessons-h200.json`).
//!
//! # Adding a lesson
//!
//! Two files: the lesson's own, in `gpu/lessons/` (its kernels, on the GPU only), and one line
//! of [`declare_lessons!`](crate::declare_lessons) below, which compiles that file as a module
//! of this one on the GPU and lists the lesson for the host: its number, entry points, idea and
//! [`LessonLayout`] (how its threads share the rows, which fixes its grid). The host's
//! dispatcher, the GPU tests (every lesson against the CPU reference on the rows it holds) and
//! `host lessons` (the table, its JSON, the chart, the README's table) read that list.

/// One of the lessons: the step written a simpler way, each lesson changing one thing from the
/// one before; the same results as the production step.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Lesson {
    /// Its number: from 1, the single steps in order (the production step is the number after
    /// the last), then the fused K steps ([`FUSED_LESSON`]; the production fused kernel is the
    /// number after it), then the long rows ([`LONG_ROW_LESSON`]; their production step is the
    /// number after it), then the fast logarithm ([`FAST_LOG_LESSON`], the fused lesson's
    /// kernel with one function changed; its production kernel is the fused one).
    pub number: u32,
    /// Its entry points: for rows of at most 2 quads per lane (256 elements), and longer rows.
    /// From lesson 4 on a lane keeps its quads in a register array whose size is fixed at
    /// compile time, so there is one entry point for each size.
    pub entries: [&'static str; 2],
    /// Its file in the repository.
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
    /// Register rows in whole quads, warps taking tiles of rows: the production step's grid
    /// and `tile_rows` (rows of at most 1024 elements, `dim % 4 == 0`).
    Tiles,
    /// A block per row, a warp per 1024-element segment: rows of 1025 to 8192 elements in
    /// whole quads.
    BlockPerRow,
}

/// Declares the lessons (see the module documentation): the single steps in order, then the
/// fused lesson, the long rows' lesson and the fast logarithm's, each as `number, module,
/// "file", [entry points], layout, "idea"`.
#[macro_export]
#[doc(hidden)]
macro_rules! declare_lessons {
    (
        steps: [$($number:literal $module:ident $file:literal [$q2:literal, $q8:literal] $layout:expr, $idea:literal;)*]
        fused: $f_number:literal $f_module:ident $f_file:literal [$f_q2:literal, $f_q8:literal] $f_layout:expr, $f_idea:literal;
        long_rows: $l_number:literal $l_module:ident $l_file:literal [$l_entry:literal] $l_layout:expr, $l_idea:literal;
        fast_log: $g_number:literal $g_module:ident $g_file:literal [$g_q2:literal, $g_q8:literal] $g_layout:expr, $g_idea:literal;
    ) => {
        $(
            #[cfg(target_arch = "nvptx64")]
            #[path = $file]
            pub mod $module;
        )*
        #[cfg(target_arch = "nvptx64")]
        #[path = $f_file]
        pub mod $f_module;
        #[cfg(target_arch = "nvptx64")]
        #[path = $l_file]
        pub mod $l_module;
        #[cfg(target_arch = "nvptx64")]
        #[path = $g_file]
        pub mod $g_module;

        /// The single-step lessons, simplest first. Each runs with in-kernel random numbers.
        pub const LESSONS: &[Lesson] = &[$(Lesson {
            number: $number,
            entries: [$q2, $q8],
            file: concat!("kernel/src/", $file),
            idea: $idea,
            layout: $layout,
        }),*];

        /// The fused K-step kernel written simply (its own signature).
        pub const FUSED_LESSON: Lesson = Lesson {
            number: $f_number,
            entries: [$f_q2, $f_q8],
            file: concat!("kernel/src/", $f_file),
            idea: $f_idea,
            layout: $f_layout,
        };

        /// The single step of long rows written simply (the single steps' signature, one entry
        /// point for every row it holds).
        pub const LONG_ROW_LESSON: Lesson = Lesson {
            number: $l_number,
            entries: [$l_entry, $l_entry],
            file: concat!("kernel/src/", $l_file),
            idea: $l_idea,
            layout: $l_layout,
        };

        /// The fused lesson with the normal transform's logarithm on the special function unit
        /// (the fused lesson's signature): the production fused kernel's normals.
        pub const FAST_LOG_LESSON: Lesson = Lesson {
            number: $g_number,
            entries: [$g_q2, $g_q8],
            file: concat!("kernel/src/", $g_file),
            idea: $g_idea,
            layout: $g_layout,
        };
    };
}

use LessonLayout::{BlockPerRow, LaneGroups, RegisterRows, ThreadPerRow, Tiles, WarpPerRow};

crate::declare_lessons! {
    steps: [
        1 l1_thread_per_row "gpu/lessons/l1_thread_per_row.rs"
            ["lesson1_thread_per_row", "lesson1_thread_per_row"]
            ThreadPerRow, "one thread per row, grid-stride";
        2 l2_warp_per_row "gpu/lessons/l2_warp_per_row.rs"
            ["lesson2_warp_per_row", "lesson2_warp_per_row"]
            WarpPerRow, "one warp per row, coalesced, shuffle sum";
        3 l3_lane_groups "gpu/lessons/l3_lane_groups.rs"
            ["lesson3_lane_groups", "lesson3_lane_groups"]
            LaneGroups, "G lanes per row: no idle lanes on short rows";
        4 l4_row_in_registers "gpu/lessons/l4_row_in_registers.rs"
            ["lesson4_row_in_registers_q2", "lesson4_row_in_registers_q8"]
            RegisterRows { whole_quads: false }, "the row in registers: read once, normals drawn once";
        5 l5_vector_quads "gpu/lessons/l5_vector_quads.rs"
            ["lesson5_vector_quads_q2", "lesson5_vector_quads_q8"]
            RegisterRows { whole_quads: true }, "each quad one 16-byte load or store";
        6 l6_loads_in_flight "gpu/lessons/l6_loads_in_flight.rs"
            ["lesson6_loads_in_flight_q2", "lesson6_loads_in_flight_q8"]
            RegisterRows { whole_quads: true }, "the next row's loads in flight";
        7 l7_shared_target "gpu/lessons/l7_shared_target.rs"
            ["lesson7_shared_target_q2", "lesson7_shared_target_q8"]
            RegisterRows { whole_quads: true }, "the target in shared memory";
        8 l8_tile_uniforms "gpu/lessons/l8_tile_uniforms.rs"
            ["lesson8_tile_uniforms_q2", "lesson8_tile_uniforms_q8"]
            Tiles, "tiles of rows: one uniform per row, handed out by a shuffle";
        9 l9_threshold "gpu/lessons/l9_threshold.rs"
            ["lesson9_threshold_q2", "lesson9_threshold_q8"]
            Tiles, "the threshold test: the sum against -2 log u";
    ]
    fused: 11 l11_fused_steps "gpu/lessons/l11_fused_steps.rs"
        ["lesson11_fused_steps_q2", "lesson11_fused_steps_q8"]
        RegisterRows { whole_quads: true }, "K steps in one launch, the state in registers";
    long_rows: 13 l13_block_per_row "gpu/lessons/l13_block_per_row.rs"
        ["lesson13_block_per_row"]
        BlockPerRow, "long rows: a block per row, the warps' sums meeting in shared memory";
    fast_log: 15 l15_fast_log "gpu/lessons/l15_fast_log.rs"
        ["lesson15_fast_log_q2", "lesson15_fast_log_q8"]
        RegisterRows { whole_quads: true }, "lesson 11 with the normals' log on the SFU (lg2)";
}
