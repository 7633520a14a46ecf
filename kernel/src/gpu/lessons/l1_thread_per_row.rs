//! Lesson 1: one thread per row.
//!
//! **The idea.** The simplest kernel that computes the step: thread `t` of the grid takes row
//! `t`, then row `t + (threads in the grid)`, and so on (a *grid-stride loop*: any grid covers
//! any batch). It walks its row twice: once to sum `log alpha`, once to write the proposal or
//! the old state. Everything a GPU kernel needs is here — the thread's index from its block's
//! index, the block size and its place in the block; raw pointers; a loop — and nothing else.
//!
//! **What it costs.** Neighbouring threads read rows `dim * 4` bytes apart: a warp's load
//! touches 32 different 32-byte sectors to use 4 bytes of each, so most of every sector the
//! memory system fetches is wasted (the loads are *uncoalesced*). And the second pass draws the
//! row's normals again.
//!
//! **Measured**: the README's lessons table (`host lessons 1` runs this one; every figure
//! there is written by the program): about a tenth of the copy bandwidth.

use crate::gpu::device::memory::{load_quad, store_quad};
use crate::gpu::device::thread::{block_dim_x, block_idx_x, grid_dim_x, thread_idx_x};
use crate::target::gaussian;
use crate::{layout, mh, rng};

/// One Metropolis–Hastings step of every chain, one thread per row.
///
/// # Parameters
/// As `mh_step` (`x`, `x_new`, `accepted`: `[batch, dim]`, `[batch, dim]`, `[batch]`; `target`:
/// `[2, dim]`, the Gaussian's `mu` and `1 / sigma^2`; the seed and step counter of the Philox stream); `_tile_rows` is unused.
///
/// # Thread mapping
/// Thread `t` of `T` in the grid takes rows `t, t + T, ...`.
///
/// # Safety
/// As `mh_step`: the buffers hold the lengths above and do not overlap where written.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn lesson1_thread_per_row(
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
    let mut row = block_idx_x() * block_dim_x() + thread_idx_x();
    while row < batch {
        let start = row * dim;
        // Pass 1: the row's log alpha, a quad (4 elements, 4 normals of one Philox call) at a
        // time; the last quad is zero-padded past `dim` and adds nothing.
        let mut terms = 0.0f32;
        for q in 0..quads {
            let valid = layout::valid_in_quad(dim, q);
            // SAFETY: quad q of row `row < batch` lies inside x, and of the target inside mu
            // and inv_var (`valid` elements of each).
            let (xq, mu_q, inv_var_q) = unsafe {
                (
                    load_quad::<false>(x.add(start + layout::QUAD * q), valid),
                    load_quad::<false>(mu.add(layout::QUAD * q), valid),
                    load_quad::<false>(inv_var.add(layout::QUAD * q), valid),
                )
            };
            let p = mh::propose(xq, draws.normal_quad(row as u32, q as u32), step_size);
            terms = gaussian::add_quad_terms(terms, xq, p, mu_q, inv_var_q);
        }
        let log_u = mh::log_uniform(draws.row_uniform(row as u32));
        let accept = mh::accept(log_u, mh::log_alpha(terms));
        // Pass 2: the new state, the proposal drawn again where the row moves.
        for q in 0..quads {
            let valid = layout::valid_in_quad(dim, q);
            // SAFETY: as above; x_new has x's shape and this thread is the row's only writer.
            unsafe {
                let xq = load_quad::<false>(x.add(start + layout::QUAD * q), valid);
                let out = if accept {
                    mh::propose(xq, draws.normal_quad(row as u32, q as u32), step_size)
                } else {
                    xq
                };
                store_quad::<false>(x_new.add(start + layout::QUAD * q), out, valid);
            }
        }
        // SAFETY: row < batch; this thread is the row's only writer.
        unsafe { *accepted.add(row) = u8::from(accept) };
        row += grid_dim_x() * block_dim_x();
    }
}
