//! Lesson 3: a group of `G` lanes per row.
//!
//! **The idea.** Lesson 2 gives a row of 64 elements (16 quads) a whole warp: half its lanes
//! have nothing to do. So a *group* of `G = group_width(dim)` lanes owns a row (about two quads
//! per lane: 8 lanes for dim 64, 32 from dim 256 on) and a warp works on `32 / G` rows at once;
//! lane `j` of a group owns quads `j, j + G, ...`. The group's sum takes `log2 G` shuffles
//! within the group (`group_sum_loop` with `G` in place of 32). Nothing else changes: the two
//! passes, the loads of one element at a time, every lane drawing its row's uniform.
//!
//! **What it costs.** The second pass still reads the row again and draws its normals again.
//!
//! **Measured**: the README's lessons table (`host lessons 3`).

use crate::gpu::device::memory::{load_quad, store_quad};
use crate::gpu::device::thread::{block_dim_x, block_idx_x, grid_dim_x, lane_id, thread_idx_x};
use crate::gpu::device::warp::group_sum_loop;
use crate::layout::{self, QUAD, WARP_SIZE};
use crate::mh;
use crate::rng;
use crate::target::gaussian;

/// The rows a warp works on together, and this lane's place in them.
#[derive(Clone, Copy)]
pub(crate) struct Groups {
    /// Lanes per row.
    pub(crate) g: usize,
    /// This lane's group in the warp (which of the warp's `32 / g` rows).
    pub(crate) group: usize,
    /// This lane's index in its group.
    pub(crate) j: usize,
    /// The first of the warp's rows in the first round, and the stride between rounds.
    pub(crate) first_row: usize,
    pub(crate) stride: usize,
}

impl Groups {
    /// The lane groups of this thread's warp for rows of `dim` elements.
    pub(crate) fn of_this_warp(dim: usize) -> Self {
        let g = layout::group_width(dim);
        let lane = lane_id();
        let warp = (block_idx_x() * block_dim_x() + thread_idx_x()) / WARP_SIZE;
        let warps = grid_dim_x() * block_dim_x() / WARP_SIZE;
        Groups {
            g,
            group: lane / g,
            j: lane % g,
            first_row: warp * (WARP_SIZE / g),
            stride: warps * (WARP_SIZE / g),
        }
    }
}

/// One Metropolis–Hastings step of every chain, a group of `G` lanes per row.
///
/// # Parameters
/// As `lesson1_thread_per_row`.
///
/// # Thread mapping
/// Warp `w` of `W` takes rows `w * R, ..., w * R + R - 1` with `R = 32 / G`, then the same rows
/// `W * R` further on; group `i` of the warp (lanes `iG .. iG + G`) takes the `i`-th of them;
/// lane `j` of a group owns quads `j, j + G, ...` of its row.
///
/// # Safety
/// As `lesson1_thread_per_row`, and blocks of a multiple of 32 threads.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn lesson3_lane_groups(
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
    let groups = Groups::of_this_warp(dim);
    // `base` is the same in every lane of the warp: the loop is uniform across the warp, and
    // groups past the batch go round with it (they load, store and decide nothing, but take
    // part in the shuffles).
    let mut base = groups.first_row;
    while base < batch {
        let row = base + groups.group;
        let live = row < batch;
        let start = row * dim;
        let mut terms = 0.0f32;
        let mut q = groups.j;
        while live && q < quads {
            let valid = layout::valid_in_quad(dim, q);
            // SAFETY: quad q < quads of a row inside the batch, and of the target.
            let (xq, mu_q, inv_var_q) = unsafe {
                (
                    load_quad::<false>(x.add(start + QUAD * q), valid),
                    load_quad::<false>(mu.add(QUAD * q), valid),
                    load_quad::<false>(inv_var.add(QUAD * q), valid),
                )
            };
            let p = mh::propose(xq, draws.normal_quad(row as u32, q as u32), step_size);
            terms = gaussian::add_quad_terms(terms, xq, p, mu_q, inv_var_q);
            q += groups.g;
        }
        // SAFETY: all 32 lanes are here (`base` is the same in every lane); `g` too.
        let total = unsafe { group_sum_loop(terms, groups.g) };
        let accept = live && {
            let log_u = mh::log_uniform(draws.row_uniform(row as u32));
            mh::accept(log_u, mh::log_alpha(total))
        };
        let mut q = groups.j;
        while live && q < quads {
            let valid = layout::valid_in_quad(dim, q);
            // SAFETY: as above; quad q of the row is this lane's alone.
            unsafe {
                let xq = load_quad::<false>(x.add(start + QUAD * q), valid);
                let out = if accept {
                    mh::propose(xq, draws.normal_quad(row as u32, q as u32), step_size)
                } else {
                    xq
                };
                store_quad::<false>(x_new.add(start + QUAD * q), out, valid);
            }
            q += groups.g;
        }
        if live && groups.j == 0 {
            // SAFETY: row < batch; the group's first lane is the row's only writer.
            unsafe { *accepted.add(row) = u8::from(accept) };
        }
        base += groups.stride;
    }
}
