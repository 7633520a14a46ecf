//! The lessons: the same Metropolis–Hastings step written six simpler ways, each changing one
//! thing, then the production step, each a
//! file that opens with the one thing it changes, what that costs, and what it measured on the
//! H200 (`cargo run -p host --release -- lessons` prints the table and draws the chart).
//!
//! Every lesson has the production step's signature and draws the same random numbers from the
//! same functions ([`crate::rng`], [`crate::mh`]), so every one of them computes the same step
//! and is checked against the CPU reference by the GPU tests. Only the way threads share the
//! work changes:
//!
//! 1. [`l1_thread_per_row`]: one thread per row — threads, blocks, the grid-stride loop.
//! 2. [`l2_warp_per_row`]: one warp per row, lanes side by side, a shuffle reduction.
//! 3. [`l3_lane_groups`]: `G` lanes per row, so short rows leave no lane idle.
//! 4. [`l4_row_in_registers`]: the row kept in registers, read once and written once.
//! 5. [`l5_vector_quads`]: each quad one 16-byte load or store.
//! 6. [`l6_loads_in_flight`]: the next row's loads issued before this row is computed.
//! 7. The production step (`step.rs`, `entries.rs`): the target in shared memory, tiles of
//!    rows sharing one uniform per lane, and on sm_80 the next row staged in shared memory by
//!    `cp.async` (`shared_feed.rs`).
//!
//! Then the fused K-step kernel, the project's headline, gets its own lesson:
//!
//! 8. [`l8_fused_steps`]: K steps in one launch, the state in registers across them (lesson 5's
//!    layout with its body turned into a loop over steps).
//! 9. The production fused kernel (`chain.rs`): the next step's normals drawn during this
//!    step's sum, the uniforms drawn `G` steps at a time and shared by shuffles, the target in
//!    shared memory.
//!
//! Their figures are in the README's lessons table, which `host lessons --readme README.md`
//! writes from the measured report (`bench/results/lessons-h200.json`).

pub mod l1_thread_per_row;
pub mod l2_warp_per_row;
pub mod l3_lane_groups;
pub mod l4_row_in_registers;
pub mod l5_vector_quads;
pub mod l6_loads_in_flight;
pub mod l8_fused_steps;
