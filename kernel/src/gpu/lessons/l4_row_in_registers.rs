//! Lesson 4: the row kept in registers between the two passes.
//!
//! **The idea.** Lesson 3 reads each row twice and draws its normals twice: the second pass
//! recomputes the proposal it needs to write. Here each lane keeps its quads of the state and of
//! the proposal in registers (arrays of `Q` quads, indexed by constants after unrolling), so the
//! row is read once, the normals are drawn once, and the row is written once: exactly the bytes
//! the step must move. `Q` is a compile-time constant (the size of a register array must be), so
//! there are two entry points: `_q2` for rows of up to 2 quads per lane (256 elements), `_q8`
//! for up to 8 (1024).
//!
//! **What it costs.** The `_q8` arrays hold 64 registers whatever the row needs, and the loads
//! are still one element at a time: on rows of 1024 the kernel is *slower* than lesson 3 (the
//! README's table), its registers leaving fewer warps per SM to wait on memory than lesson 3's
//! two passes do. Lesson 5's 16-byte loads win it back.
//!
//! **Measured**: the README's lessons table (`host lessons 4`). Every lane of a group also
//! draws its row's uniform (one more Philox call per lane and row); the production step draws
//! it once per row and hands it over with a shuffle.

use crate::gpu::device::memory::{load_quad, store_quad};
use crate::gpu::device::warp::group_sum_loop;
use crate::lessons::l3_lane_groups::Groups;
use crate::layout::{self, QUAD};
use crate::mh;
use crate::rng;
use crate::target::Target;
use crate::target::gaussian::{Gaussian, GaussianQuad};

/// This lane's quads of row `row` (zeros where it owns none or the row is past the batch).
///
/// # Safety
/// `x` holds `batch * dim` floats, `quads_per_lane(dim) <= Q`; with `V4` (16-byte vector
/// loads) `dim % 4 == 0` and 16-byte aligned rows.
#[inline(always)]
pub(crate) unsafe fn load_lane_quads<const Q: usize, const V4: bool>(
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
            let valid = layout::valid_in_quad(dim, q);
            // SAFETY: quad q of a row inside the batch; aligned with V4 (the contract).
            *xq = unsafe { load_quad::<V4>(x.add(row * dim + QUAD * q), valid) };
        }
    }
    xs
}

/// The Gaussian's quad `q` from its packed arrays in global memory (`mu`, then `1 / sigma^2`),
/// zeros past the row. Lessons 4 to 6 read it at every row, through L1; lesson 7 keeps a copy
/// in shared memory instead.
///
/// # Safety
/// `target` holds `2 * dim` floats, `q < quads_per_row(dim)`; with `V4` `dim % 4 == 0`.
#[inline(always)]
pub(crate) unsafe fn global_target_quad<const V4: bool>(
    target: *const f32,
    dim: usize,
    q: usize,
) -> GaussianQuad {
    let (mu, inv_var) = (target, target.wrapping_add(dim));
    let valid = layout::valid_in_quad(dim, q);
    // SAFETY: quad q of both arrays (the contract), 16-byte aligned with V4.
    unsafe {
        GaussianQuad {
            mu: load_quad::<V4>(mu.add(QUAD * q), valid),
            inv_var: load_quad::<V4>(inv_var.add(QUAD * q), valid),
        }
    }
}

/// The step of one row from this lane's quads `xs`: the proposals, the group's sum, the
/// decision, and the new state written (`x_new`, and `accepted` by the group's first lane).
///
/// Two things are the caller's, so that later lessons can change them alone: `target_quad(q)`
/// gives the target's quad `q` (from global memory in lessons 4 to 6, from shared memory from
/// lesson 7 on), and `accept(total)` decides from the group's total of terms (from lesson 8
/// on with a uniform fetched once per row).
///
/// # Safety
/// As [`load_lane_quads`], `target_quad` safe to call for every `q < quads_per_row(dim)`; all
/// 32 lanes of the warp call it together.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
pub(crate) unsafe fn step_row<const Q: usize, const V4: bool>(
    xs: &[[f32; 4]; Q],
    row: usize,
    groups: Groups,
    (batch, dim, step_size): (usize, usize, f32),
    draws: &rng::StepDraws,
    target_quad: impl Fn(usize) -> GaussianQuad,
    accept: impl FnOnce(f32) -> bool,
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
            ps[k] = mh::propose(xs[k], draws.normal_quad(row as u32, q as u32), step_size);
            terms = Gaussian::add_quad_terms(terms, xs[k], ps[k], &target_quad(q));
        }
    }
    // SAFETY: all 32 lanes are here (the contract); `g` is the same in every lane.
    let total = unsafe { group_sum_loop(terms, groups.g) };
    let accept = live && accept(total);
    for (k, (x, p)) in xs.iter().zip(&ps).enumerate() {
        let q = groups.j + k * groups.g;
        if live && q < quads {
            // SAFETY: quad q of the row is this lane's alone; x_new has x's shape.
            let (out, valid) = (if accept { *p } else { *x }, layout::valid_in_quad(dim, q));
            unsafe { store_quad::<V4>(x_new.add(row * dim + QUAD * q), out, valid) };
        }
    }
    if live && groups.j == 0 {
        // SAFETY: row < batch; the group's first lane is the row's only writer of its flag.
        unsafe { *accepted.add(row) = u8::from(accept) };
    }
}

/// Lessons 4 to 7's decision: every lane of the group draws its row's uniform and accepts when
/// `log u < log alpha`.
#[inline(always)]
pub(crate) fn accept_drawing_the_uniform(draws: &rng::StepDraws, row: usize, total: f32) -> bool {
    let log_u = mh::log_uniform(draws.row_uniform(row as u32));
    mh::accept(log_u, mh::log_alpha(total))
}

/// The body of the entry points below.
///
/// # Safety
/// As the entry points, with `quads_per_lane(dim) <= Q` (and `dim % 4 == 0` with `V4`).
#[inline(always)]
pub(crate) unsafe fn lane_groups<const Q: usize, const V4: bool>(
    (x, x_new, accepted, target): (*const f32, *mut f32, *mut u8, *const f32),
    (batch, dim, step_size): (usize, usize, f32),
    draws: &rng::StepDraws,
    _tile_rows: usize,
) {
    let groups = Groups::of_this_warp(dim);
    // SAFETY (of every call): q < quads_per_row(dim), the only quads `step_row` asks for.
    let target_quad = |q| unsafe { global_target_quad::<V4>(target, dim, q) };
    // `base` is the same in every lane of the warp: the loop is uniform across the warp, and
    // groups past the batch go round with it (`row >= batch`: they load, store and decide
    // nothing, but take part in the shuffles).
    let mut base = groups.first_row;
    while base < batch {
        let row = base + groups.group;
        // SAFETY: the caller's contract; the whole warp runs this iteration.
        unsafe {
            let xs = load_lane_quads::<Q, V4>(x, row, batch, dim, groups);
            step_row::<Q, V4>(
                &xs,
                row,
                groups,
                (batch, dim, step_size),
                draws,
                target_quad,
                |total| accept_drawing_the_uniform(draws, row, total),
                x_new,
                accepted,
            );
        }
        base += groups.stride;
    }
}

/// Defines an entry point of lessons 4 to 9 that runs `$body::<$q, $v4>` (register arrays of
/// `$q` quads per lane, rows of up to `$rows` elements; `$v4`: 16-byte vector loads): the step
/// kernels' signature, once for all of them.
macro_rules! lane_group_entry_point {
    ($name:ident, $body:ident, $q:literal, $v4:literal, $rows:literal, $what:literal) => {
        #[doc = concat!("One Metropolis–Hastings step of every chain, ", $what, " (", $q, " quads per lane: rows of up to ", $rows, " elements).")]
        ///
        /// # Parameters
        #[doc = concat!("As `lesson1_thread_per_row`, with `dim <= ", $rows, "` (and `dim % 4 == 0` for 16-byte loads).")]
        ///
        /// # Thread mapping
        /// Lessons 4 to 7: warp `w` of `W` takes rows `w * R, ..., w * R + R - 1` with
        /// `R = 32 / G`, then the same rows `W * R` further on; group `i` of the warp (lanes
        /// `iG .. iG + G`) takes the `i`-th of them; lane `j` of a group owns quads
        /// `j, j + G, ...` of its row. Lessons 8 and 9: the same groups, warps taking tiles of
        /// `tile_rows` rows (see lesson 8).
        ///
        /// # Safety
        /// As `lesson1_thread_per_row`, with the row limits above, blocks of a multiple of 32
        /// threads, and 16-byte aligned buffers for 16-byte loads.
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
            tile_rows: u32,
        ) {
            let draws = $crate::rng::StepDraws::new($crate::rng::key(seed), step);
            let sizes = (batch as usize, dim as usize, step_size);
            let buffers = (x, x_new, accepted, target);
            // SAFETY: forwarded from this function's contract.
            unsafe { $body::<$q, $v4>(buffers, sizes, &draws, tile_rows as usize) }
        }
    };
}
pub(crate) use lane_group_entry_point;

lane_group_entry_point!(
    lesson4_row_in_registers_q2,
    lane_groups,
    2,
    false,
    256,
    "`G` lanes per row, the row in registers"
);
lane_group_entry_point!(
    lesson4_row_in_registers_q8,
    lane_groups,
    8,
    false,
    1024,
    "`G` lanes per row, the row in registers"
);
