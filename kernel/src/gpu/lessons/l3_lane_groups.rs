//! Lesson 3: a group of `G` lanes per row, 16-byte quads, the row kept in registers.
//!
//! **The idea.** A row of 64 elements is 16 quads; a whole warp for it leaves lanes idle. So a
//! *group* of `G = group_width(dim)` lanes owns a row (8 for dim 64, 32 from dim 256 on) and a
//! warp works on `32 / G` rows at once; lane `j` of a group owns quads `j, j + G, ...`. Each
//! quad moves as one 16-byte vector (`ld.global.v4.f32`), and the group's sum takes `log2 G`
//! shuffles within the group ([`group_sum`]). The lane keeps its quads of the state and of the
//! proposal in registers (arrays of `Q` quads, indexed by constants after unrolling), so the
//! row is read once, the normals are drawn once, and the row is written once: exactly the
//! bytes the step must move. `Q` is a compile-time constant (the size of a register array must
//! be), so there are two entry points: `_q2` for rows of up to 2 quads per lane (256
//! elements), `_q8` for up to 8 (1024).
//!
//! **What it costs.** Each row still waits for its own loads before computing: nothing else
//! is in flight while it does. The `_q8` arrays hold 64 registers whatever the row needs.
//!
//! **Measured**: the README's lessons table (`host lessons 3`). Every lane of a group
//! also draws its row's uniform (one more Philox call per lane and row); the production step
//! draws it once per row and hands it over with a shuffle.

use crate::gpu::device::memory::{load_v4, store_v4};
use crate::gpu::device::thread::{block_dim_x, block_idx_x, grid_dim_x, lane_id, thread_idx_x};
use crate::gpu::device::warp::group_sum;
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

/// This lane's quads of row `row` (zeros where it owns none or the row is past the batch).
///
/// # Safety
/// `x` holds `batch * dim` floats, `dim % 4 == 0`, `quads_per_lane(dim) <= Q`, 16-byte aligned
/// rows.
#[inline(always)]
pub(crate) unsafe fn load_lane_quads<const Q: usize>(
    x: *const f32,
    row: usize,
    batch: usize,
    dim: usize,
    groups: Groups,
) -> [[f32; 4]; Q] {
    let mut xs = [[0.0f32; 4]; Q];
    for (k, xq) in xs.iter_mut().enumerate() {
        let q = groups.j + k * groups.g;
        if row < batch && q < layout::quads_per_row(dim) {
            // SAFETY: quad q of a row inside the batch; aligned (the caller's contract).
            *xq = unsafe { load_v4(x.add(row * dim + QUAD * q)) };
        }
    }
    xs
}

/// The step of one row from this lane's quads `xs`: the proposals, the group's sum, the
/// decision, and the new state written. Returns nothing; writes `x_new` and `accepted`.
///
/// # Safety
/// As [`lesson3_lane_groups`]; all 32 lanes of the warp call it together.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
pub(crate) unsafe fn step_row<const Q: usize>(
    xs: &[[f32; 4]; Q],
    row: usize,
    groups: Groups,
    (batch, dim, step_size): (usize, usize, f32),
    draws: &rng::StepDraws,
    mu: *const f32,
    inv_var: *const f32,
    x_new: *mut f32,
    accepted: *mut u8,
) {
    let live = row < batch;
    let quads = layout::quads_per_row(dim);
    let mut ps = [[0.0f32; 4]; Q];
    let mut terms = 0.0f32;
    for k in 0..Q {
        let q = groups.j + k * groups.g;
        if live && q < quads {
            // SAFETY: quad q of the target, inside mu and inv_var.
            let (mu_q, inv_var_q) =
                unsafe { (load_v4(mu.add(QUAD * q)), load_v4(inv_var.add(QUAD * q))) };
            ps[k] = mh::propose(xs[k], draws.normal_quad(row as u32, q as u32), step_size);
            terms = gaussian::add_quad_terms(terms, xs[k], ps[k], mu_q, inv_var_q);
        }
    }
    // SAFETY: all 32 lanes are here (the contract); `g` is the same in every lane.
    let total = unsafe { group_sum(terms, groups.g) };
    let accept = live && {
        let log_u = mh::log_uniform(draws.row_uniform(row as u32));
        mh::accept(log_u, mh::log_alpha(total))
    };
    for (k, (x, p)) in xs.iter().zip(&ps).enumerate() {
        let q = groups.j + k * groups.g;
        if live && q < quads {
            // SAFETY: quad q of the row is this lane's alone; x_new has x's shape.
            unsafe {
                store_v4(
                    x_new.add(row * dim + QUAD * q),
                    if accept { *p } else { *x },
                )
            };
        }
    }
    if live && groups.j == 0 {
        // SAFETY: row < batch; the group's first lane is the row's only writer of its flag.
        unsafe { *accepted.add(row) = u8::from(accept) };
    }
}

/// The body of the entry points below.
///
/// # Safety
/// As [`lesson3_lane_groups_q2`], with `quads_per_lane(dim) <= Q`.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
unsafe fn lane_groups<const Q: usize>(
    x: *const f32,
    x_new: *mut f32,
    accepted: *mut u8,
    mu: *const f32,
    inv_var: *const f32,
    (batch, dim, step_size): (usize, usize, f32),
    draws: &rng::StepDraws,
) {
    let groups = Groups::of_this_warp(dim);
    // `base` is the same in every lane of the warp: the loop is uniform across the warp, and
    // groups past the batch go round with it (`row >= batch`: they load, store and decide
    // nothing, but take part in the shuffles).
    let mut base = groups.first_row;
    while base < batch {
        let row = base + groups.group;
        // SAFETY: the caller's contract; the whole warp runs this iteration.
        unsafe {
            let xs = load_lane_quads::<Q>(x, row, batch, dim, groups);
            step_row(
                &xs,
                row,
                groups,
                (batch, dim, step_size),
                draws,
                mu,
                inv_var,
                x_new,
                accepted,
            );
        }
        base += groups.stride;
    }
}

/// Defines an entry point of lessons 3 and 4 that runs `$body::<$q>` (register arrays of `$q`
/// quads per lane, rows of up to `$rows` elements): the step kernels' signature, once for both.
macro_rules! lane_group_entry_point {
    ($name:ident, $body:ident, $q:literal, $rows:literal, $what:literal) => {
        #[doc = concat!("One Metropolis–Hastings step of every chain, ", $what, " (", $q, " quads per lane: rows of up to ", $rows, " elements).")]
        ///
        /// # Parameters
        #[doc = concat!("As `lesson1_thread_per_row`, with `dim % 4 == 0` and `dim <= ", $rows, "`.")]
        ///
        /// # Thread mapping
        /// Warp `w` of `W` takes rows `w * R, ..., w * R + R - 1` with `R = 32 / G`, then the
        /// same rows `W * R` further on; group `i` of the warp (lanes `iG .. iG + G`) takes the
        /// `i`-th of them; lane `j` of a group owns quads `j, j + G, ...` of its row.
        ///
        /// # Safety
        /// As `lesson1_thread_per_row`, with the row limits above, 16-byte aligned buffers and
        /// blocks of a multiple of 32 threads.
        #[unsafe(no_mangle)]
        pub unsafe extern "ptx-kernel" fn $name(
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
            let draws = $crate::rng::StepDraws::new($crate::rng::key(seed), step);
            let sizes = (batch as usize, dim as usize, step_size);
            // The Gaussian's two arrays, packed: mu, then 1 / sigma^2.
            let (mu, inv_var) = (target, target.wrapping_add(dim as usize));
            // SAFETY: forwarded from this function's contract.
            unsafe { $body::<$q>(x, x_new, accepted, mu, inv_var, sizes, &draws) }
        }
    };
}
pub(crate) use lane_group_entry_point;

lane_group_entry_point!(
    lesson3_lane_groups_q2,
    lane_groups,
    2,
    256,
    "`G` lanes per row, the row in registers"
);
lane_group_entry_point!(
    lesson3_lane_groups_q8,
    lane_groups,
    8,
    1024,
    "`G` lanes per row, the row in registers"
);
