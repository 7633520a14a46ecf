//! Lesson 13: a row too long for one warp, split over the warps of a block that meet in shared
//! memory at a barrier.
//!
//! **The idea.** From lesson 4 on, the lanes that own a row keep it in registers: read once,
//! written once. A warp holds at most 8 quads per lane, rows of 1024 elements; a row of 4096
//! would need 32 quads (128 registers) per lane for the state and as many for the proposal. So
//! a longer row is cut into *segments* of 1024 elements and a block takes it, one warp per
//! segment: warp `w` holds segment `w` as lesson 5 holds a row of 1024 (lane `j` owns quads
//! `j, j + 32, ...` of it, 16-byte loads), draws its normals, and sums its terms with the same
//! butterfly of shuffles.
//!
//! The decision needs the whole row's sum, and a shuffle moves values only between the lanes
//! of one warp. The warps of a block meet in *shared memory*: an array every thread of the
//! block can read and write, on the SM itself (a few cycles away, where global memory is
//! hundreds). Lane 0 of each warp stores its segment's sum in slot `w` of a small array, and
//! then the block waits at a *barrier* (`bar.sync 0`, CUDA C++'s `__syncthreads()`): no thread
//! goes on until every thread of the block has arrived, and the stores made before it are then
//! visible to all. Every thread reads the slots and adds them in segment order
//! (`mh::add_segment`), so every warp holds the same total, the bits the CPU reference adds.
//! A second barrier follows the reads: without it a fast warp could store its next row's sum
//! into a slot that a slow warp has yet to read for this row.
//!
//! The shared array is declared in PTX (`.shared`), with inline assembly, as the production
//! kernels do: Rust has no way yet to place a `static` in the GPU's shared memory.
//!
//! **What it costs.** Two barriers per row, and at each one every warp waits for the slowest
//! warp of its block; meanwhile nothing of the next row is in flight, so the SM's loads come in
//! bursts. On rows of 4096 this lesson is *slower* than lessons 2 and 3, which read every row
//! twice (the README's table: 262 µs against 232 on the H200): reading each byte once buys
//! nothing while the memory system sits idle at the barriers. The production step of long rows (`gpu/block_rows.rs`, the next row of the table)
//! keeps loads in flight across the barrier (the next row arrives by `cp.async` into shared
//! memory while this one computes, as lesson 10's production step does for short rows),
//! alternates two sets of slots so that one barrier per row suffices, draws the thresholds 32
//! rows at a time (lesson 8), and runs a persistent grid of one wave.
//!
//! **Measured**: the README's lessons table (`host lessons 13`), at rows of 4096 elements.

use core::arch::{asm, nvptx};

use crate::gpu::device::memory::{load_quad, load_shared_v4, store_quad, store_shared_f32};
use crate::gpu::device::thread::{block_dim_x, block_idx_x, grid_dim_x, lane_id, thread_idx_x};
use crate::gpu::device::warp::group_sum_loop;
use crate::lessons::l4_row_in_registers::{accept_drawing_the_uniform, global_target_quad};
use crate::layout::{self, MAX_BLOCK_ROW_SEGMENTS, QUAD, SEGMENT_QUADS, WARP_SIZE};
use crate::mh;
use crate::rng;
use crate::target::Target;
use crate::target::gaussian::Gaussian;

/// Quads per lane of a segment: 8 (1024 elements over 32 lanes).
const Q: usize = SEGMENT_QUADS / WARP_SIZE;
const _: () = assert!(MAX_BLOCK_ROW_SEGMENTS == 8);

/// One Metropolis–Hastings step of every chain, a block per row and a warp per 1024-element
/// segment of it.
///
/// # Parameters
/// As `lesson1_thread_per_row`, with `1024 < dim <= 8192` and `dim % 4 == 0`; `_tile_rows` is
/// unused.
///
/// # Thread mapping
/// Block `b` of `B` takes rows `b, b + B, ...`; its warp `w` owns segment `w` of the row
/// (quads `256 w .. 256 (w + 1)`), lane `j` of it quads `256 w + j + 32 k`.
///
/// # Safety
/// As `lesson1_thread_per_row`, with the row limits above, blocks of exactly
/// `layout::segments(dim)` warps, and 16-byte aligned buffers.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn lesson13_block_per_row(
    x: *const f32,
    x_new: *mut f32,
    accepted: *mut u8,
    target: *const f32,
    batch: u64,
    dim: u64,
    step_size: f32,
    seed: u64,
    step: u64,
    _tile_rows: u32,
) {
    let (batch, dim) = (batch as usize, dim as usize);
    let draws = rng::StepDraws::new(rng::key(seed), step);
    // The segments' sums: a float per warp, in this block's shared memory.
    let sums: u32;
    // SAFETY: declares a block-shared array of 8 floats and takes its address; no memory is
    // touched.
    unsafe {
        asm!("{{ .shared .align 16 .b8 lesson13_segment_sums[32]; mov.u32 {base}, lesson13_segment_sums; }}",
             base = out(reg32) sums, options(nostack));
    }
    let (lane, warp) = (lane_id(), thread_idx_x() / WARP_SIZE);
    let segments = block_dim_x() / WARP_SIZE;
    let quads = layout::quads_per_row(dim);
    // This lane's quad `k` of every row.
    let quad_of = |k: usize| warp * SEGMENT_QUADS + lane + k * WARP_SIZE;
    // `row` is the same in every thread of the block: every thread reaches both barriers.
    let mut row = block_idx_x();
    while row < batch {
        let mut xs = [[0.0f32; 4]; Q];
        let mut ps = [[0.0f32; 4]; Q];
        let mut terms = 0.0f32;
        for k in 0..Q {
            let q = quad_of(k);
            if q < quads {
                // SAFETY: quad q of a row inside the batch (dim % 4 == 0: whole, aligned).
                let target_quad = unsafe { global_target_quad::<true>(target, dim, q) };
                xs[k] = unsafe { load_quad::<true>(x.add(row * dim + QUAD * q), QUAD) };
                ps[k] = mh::propose(xs[k], draws.normal_quad(row as u32, q as u32), step_size);
                terms = Gaussian::add_quad_terms(terms, xs[k], ps[k], &target_quad);
            }
        }
        // SAFETY: all 32 lanes of the warp are here (the row loop is uniform).
        let segment_sum = unsafe { group_sum_loop(terms, WARP_SIZE) };
        if lane == 0 {
            // SAFETY: slot `warp` of the array: this lane alone writes it, and nobody reads it
            // before the barrier below.
            unsafe { store_shared_f32(sums + 4 * warp as u32, segment_sum) };
        }
        // SAFETY: every thread of the block reaches this barrier (the loop is uniform).
        unsafe { nvptx::_syncthreads() };
        // SAFETY: the 8 slots (two quads), the first `segments` of them written before the
        // barrier; the others are read but not used.
        let slots = unsafe { [load_shared_v4(sums), load_shared_v4(sums + 16)] };
        let mut total = 0.0f32;
        for segment in 0..segments {
            total = mh::add_segment(total, segment, slots[segment / 4][segment % 4]);
        }
        // SAFETY: as the barrier above. After it, every thread has read this row's sums, so
        // the next row's stores cannot overwrite one that is still to be read.
        unsafe { nvptx::_syncthreads() };
        let accept = accept_drawing_the_uniform(&draws, row, total);
        for (k, (x, p)) in xs.iter().zip(&ps).enumerate() {
            let q = quad_of(k);
            if q < quads {
                // SAFETY: quad q of the row is this lane's alone; x_new has x's shape.
                let out = if accept { *p } else { *x };
                unsafe { store_quad::<true>(x_new.add(row * dim + QUAD * q), out, QUAD) };
            }
        }
        if thread_idx_x() == 0 {
            // SAFETY: row < batch; this thread is the row's only writer of its flag.
            unsafe { *accepted.add(row) = u8::from(accept) };
        }
        row += grid_dim_x();
    }
}
