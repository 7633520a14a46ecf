//! Lesson 11: K steps in one launch, the state in registers across them.
//!
//! **The idea.** A run of K steps as K launches of a single step reads every chain's state
//! from memory and writes it back K times. But a chain's next step needs nothing from any other
//! chain: the lanes that own a row can keep its quads in registers and do all K steps before
//! they write it once. The launch moves `2 * dim` floats per chain instead of `2 K * dim`, and
//! the step, no longer waiting for memory, becomes a matter of arithmetic: the Philox rounds
//! and the Box–Muller transform of the normals, the shuffles of the group's sum. This is
//! lesson 5's row layout (`G` lanes per row, lane `j` owning quads `j, j + G, ...`) with its
//! per-row body turned into a loop over steps; the same normals and the same sums in the same
//! order.
//!
//! Its normals take their logarithm from the polynomial the CPU reference uses
//! ([`math::minus_two_ln_normal`]), which every kernel used before the SFU's took its place:
//! lesson 15 (`l15_fast_log.rs`) is this lesson with that one function changed, and so ends
//! where K single steps and the production fused kernel take the chains, bit for bit. This
//! one ends within the normals' tolerance of them.
//!
//! **What it costs.** Each step waits for its own normals and its own sum: the Philox rounds of
//! step `k + 1` could run while step `k`'s sum travels through the shuffles, and they do not.
//! Every lane draws its row's uniform at every step (one Philox call per lane, where one per
//! row would do), and the target comes from global memory (L1) at every step. The production
//! fused kernel (`gpu/chain.rs`) removes all three: the next step's normals drawn during this
//! step's sum, the uniforms drawn `G` steps at a time by the group's lanes and handed round by
//! shuffles, the target staged once in shared memory.
//!
//! **Measured**: the README's lessons table (`host lessons 11`), in µs per step as the single
//! steps are, against K launches of the production single step and the production fused
//! kernel.

use crate::gpu::device::memory::{load_v4, store_v4};
use crate::gpu::device::warp::group_sum;
use crate::lessons::l3_lane_groups::Groups;
use crate::lessons::l4_row_in_registers::load_lane_quads;
use crate::layout::{self, QUAD};
use crate::math;
use crate::mh;
use crate::rng::StepDraws;
use crate::target::gaussian;

/// `steps` steps of every row, each row's quads in registers throughout, the normals' radius
/// squared `-2 ln(1 - w)` from `minus_two_ln_complement`.
///
/// # Safety
/// As the entry points below, with `quads_per_lane(dim) <= Q`.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
pub(crate) unsafe fn fused_steps<const Q: usize>(
    x: *mut f32,
    accepted_count: *mut u32,
    (mu, inv_var): (*const f32, *const f32),
    (batch, dim, step_size): (usize, usize, f32),
    key: crate::philox::Key,
    (first_step, steps): (u64, u32),
    minus_two_ln_complement: impl Fn(f32) -> f32 + Copy,
) {
    let groups = Groups::of_this_warp(dim);
    let quads = layout::quads_per_row(dim);
    // As in lesson 3: `base` is the same in every lane, so every lane reaches every shuffle.
    let mut base = groups.first_row;
    while base < batch {
        let row = base + groups.group;
        let live = row < batch;
        // SAFETY: the caller's contract (a row past the batch loads nothing).
        let mut xs = unsafe { load_lane_quads::<Q, true>(x, row, batch, dim, groups) };
        let mut count = 0u32;
        for j in 0..steps {
            let draws = StepDraws::new(key, first_step + u64::from(j));
            let mut ps = [[0.0f32; 4]; Q];
            let mut terms = 0.0f32;
            for k in 0..Q {
                let q = groups.j + k * groups.g;
                if live && q < quads {
                    // SAFETY: quad q of the target, inside mu and inv_var.
                    let (mu_q, inv_var_q) =
                        unsafe { (load_v4(mu.add(QUAD * q)), load_v4(inv_var.add(QUAD * q))) };
                    let eps = draws.normal_quad_with(row as u32, q as u32, minus_two_ln_complement);
                    ps[k] = mh::propose(xs[k], eps, step_size);
                    terms = gaussian::add_quad_terms(terms, xs[k], ps[k], mu_q, inv_var_q);
                }
            }
            // SAFETY: all 32 lanes are here (the row loop and the step loop are uniform).
            let total = unsafe { group_sum(terms, groups.g) };
            let accept = live && {
                let log_u = mh::log_uniform(draws.row_uniform(row as u32));
                mh::accept(log_u, mh::log_alpha(total))
            };
            // The state stays in registers: the decision only chooses which quads are kept.
            if accept {
                xs = ps;
            }
            count += u32::from(accept);
        }
        for (k, xq) in xs.iter().enumerate() {
            let q = groups.j + k * groups.g;
            if live && q < quads {
                // SAFETY: quad q of the row is this lane's alone; the row is updated in place.
                unsafe { store_v4(x.add(row * dim + QUAD * q), *xq) };
            }
        }
        if live && groups.j == 0 {
            // SAFETY: row < batch; the group's first lane is the row's only writer.
            unsafe { *accepted_count.add(row) += count };
        }
        base += groups.stride;
    }
}

/// Defines an entry point of this lesson (or of lesson 15, which changes `$log`) with register
/// arrays of `$q` quads per lane, the normals' radius squared from `$log`.
macro_rules! fused_steps_entry_point {
    ($name:ident, $q:literal, $rows:literal, $log:expr) => {
        #[doc = concat!("`steps` Metropolis–Hastings steps of every chain in one launch, the state in registers (", $q, " quads per lane: rows of up to ", $rows, " elements).")]
        ///
        /// # Parameters
        /// - `x`: `[batch, dim]` f32, the states: read at the start, written at the end.
        /// - `accepted_count`: `[batch]` u32, each row's accepted steps added.
        /// - `target`: `[2, dim]` f32, the Gaussian's `mu` and `1 / sigma^2`.
        /// - `batch`, `dim`, `step_size`, `seed`: as the single step.
        /// - `first_step`, `steps`: the step counter of the first step, and how many.
        ///
        /// # Thread mapping
        /// As lesson 3.
        ///
        /// # Safety
        #[doc = concat!("The buffers hold the lengths above, 16-byte aligned; `dim % 4 == 0`, `dim <= ", $rows, "`; blocks of a multiple of 32 threads.")]
        #[unsafe(no_mangle)]
        pub unsafe extern "ptx-kernel" fn $name(
            x: *mut f32,
            accepted_count: *mut u32,
            target: *const f32,
            batch: u64,
            dim: u64,
            step_size: f32,
            seed: u64,
            first_step: u64,
            steps: u32,
        ) {
            let (batch, dim) = (batch as usize, dim as usize);
            // The Gaussian's two arrays, packed: mu, then 1 / sigma^2.
            let target = (target, target.wrapping_add(dim));
            let run = (first_step, steps);
            // SAFETY: forwarded from this function's contract.
            unsafe {
                $crate::lessons::l11_fused_steps::fused_steps::<$q>(
                    x,
                    accepted_count,
                    target,
                    (batch, dim, step_size),
                    $crate::rng::key(seed),
                    run,
                    $log,
                )
            }
        }
    };
}
pub(crate) use fused_steps_entry_point;

/// The CPU reference's `-2 ln(1 - w)` from `v = 1 + w` (as [`math::minus_two_ln_complement`]
/// takes it): the polynomial logarithm of `2 - v = 1 - w`, exact for every uniform `w`.
#[inline(always)]
fn polynomial(v: f32) -> f32 {
    math::minus_two_ln_normal(2.0 - v)
}

fused_steps_entry_point!(lesson11_fused_steps_q2, 2, 256, polynomial);
fused_steps_entry_point!(lesson11_fused_steps_q8, 8, 1024, polynomial);
