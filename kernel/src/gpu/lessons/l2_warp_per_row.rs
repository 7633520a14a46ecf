//! Lesson 2: one warp per row, and a shuffle to add up its lanes' parts.
//!
//! **The idea.** Lane `l` of a warp takes quads `l, l + 32, ...` of the warp's row, so the 32
//! lanes read 32 neighbouring quads at once: one warp load uses every byte it fetches
//! (*coalesced*). Each lane sums its own quads' terms; five `shfl.sync.bfly` steps then add the
//! 32 partial sums across the warp without touching memory ([`group_sum_loop`]). This was the
//! original design's shape.
//!
//! **What it costs.** A row of 64 elements is 16 quads: half the warp has nothing to do. The
//! loop over rows must be the same in all 32 lanes (the shuffle needs the whole warp), so rows
//! are handed out per warp. The second pass still draws the normals again.
//!
//! **Measured**: the README's lessons table (`host lessons 2`): on short rows half the lanes
//! idle and each row's normals are drawn twice, so it stays far from the copy bandwidth; long
//! rows come much closer.

use crate::gpu::device::memory::{load_quad, store_quad};
use crate::gpu::device::thread::{block_dim_x, block_idx_x, grid_dim_x, lane_id, thread_idx_x};
use crate::gpu::device::warp::group_sum_loop;
use crate::layout::{self, WARP_SIZE};
use crate::mh;
use crate::rng;
use crate::target::gaussian;

/// One Metropolis–Hastings step of every chain, one warp per row.
///
/// # Parameters
/// As `lesson1_thread_per_row`.
///
/// # Thread mapping
/// Warp `w` of `W` in the grid takes rows `w, w + W, ...`; lane `l` owns quads `l, l + 32, ...`
/// of the row.
///
/// # Safety
/// As `lesson1_thread_per_row`, and blocks of a multiple of 32 threads.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn lesson2_warp_per_row(
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
    // The Gaussian's two arrays, packed one after the other: mu, then 1 / sigma^2.
    let (mu, inv_var) = (target, target.wrapping_add(dim));
    let draws = rng::StepDraws::new(rng::key(seed), step);
    let quads = layout::quads_per_row(dim);
    let lane = lane_id();
    let warps = grid_dim_x() * block_dim_x() / WARP_SIZE;
    // The same in every lane of the warp, so the loop below is uniform across the warp.
    let mut row = (block_idx_x() * block_dim_x() + thread_idx_x()) / WARP_SIZE;
    while row < batch {
        let start = row * dim;
        let mut terms = 0.0f32;
        let mut q = lane;
        while q < quads {
            let valid = layout::valid_in_quad(dim, q);
            // SAFETY: quad q < quads of a row inside the batch, and of the target.
            let (xq, mu_q, inv_var_q) = unsafe {
                (
                    load_quad::<false>(x.add(start + layout::QUAD * q), valid),
                    load_quad::<false>(mu.add(layout::QUAD * q), valid),
                    load_quad::<false>(inv_var.add(layout::QUAD * q), valid),
                )
            };
            let p = mh::propose(xq, draws.normal_quad(row as u32, q as u32), step_size);
            terms = gaussian::add_quad_terms(terms, xq, p, mu_q, inv_var_q);
            q += WARP_SIZE;
        }
        // SAFETY: all 32 lanes are here: `row` is the same in every lane, so every lane runs
        // this iteration of the row loop.
        let total = unsafe { group_sum_loop(terms, WARP_SIZE) };
        // Every lane holds the total and draws the row's uniform itself (the same number).
        let log_u = mh::log_uniform(draws.row_uniform(row as u32));
        let accept = mh::accept(log_u, mh::log_alpha(total));
        let mut q = lane;
        while q < quads {
            let valid = layout::valid_in_quad(dim, q);
            // SAFETY: as above; quad q of the row is this lane's alone.
            unsafe {
                let xq = load_quad::<false>(x.add(start + layout::QUAD * q), valid);
                let out = if accept {
                    mh::propose(xq, draws.normal_quad(row as u32, q as u32), step_size)
                } else {
                    xq
                };
                store_quad::<false>(x_new.add(start + layout::QUAD * q), out, valid);
            }
            q += WARP_SIZE;
        }
        if lane == 0 {
            // SAFETY: row < batch; lane 0 is the row's only writer of its flag.
            unsafe { *accepted.add(row) = u8::from(accept) };
        }
        row += warps;
    }
}
