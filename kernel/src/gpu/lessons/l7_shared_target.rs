//! Lesson 7: the target in shared memory.
//!
//! **The idea.** Every row reads the whole target: in lesson 6 each lane loads its quads of
//! `mu` and `1 / sigma^2` from global memory at every row. They come from L1 (the block read
//! them moments before), but those loads share L1's pipeline with the stream of `x`, and each
//! needs a 64-bit address held in registers. *Shared memory* is the SM's own scratchpad, a few
//! hundred kilobytes that the threads of one block share and address with 32-bit offsets. Here
//! every block first copies the target into it, each thread a few quads
//! ([`stage_target`](crate::gpu::args::stage_target), the production step's own function),
//! and waits at a *barrier* (`bar.sync`: no thread of the block passes it until all have
//! arrived, so the copy is complete when anyone reads it). Every row then reads the target
//! from shared memory. Nothing else changes: lesson 6's loop with another `target_quad`.
//!
//! **What it costs.** Shared memory per block (the target's quads, zero-padded to `32 Q`) and
//! one barrier per launch. The copy is zero-padded past the row, so a lane may compute a quad
//! it does not own against zeros and add exactly nothing; the production step uses that to
//! drop a branch per quad.
//!
//! **Measured**: the README's lessons table (`host lessons 7`).

use crate::gpu::args::{shared_target_quad, stage_target};
use crate::lessons::l4_row_in_registers::lane_group_entry_point;
use crate::lessons::l6_loads_in_flight::rows_with_loads_in_flight;
use crate::rng;
use crate::target::gaussian::Gaussian;

/// The body of the entry points below.
///
/// # Safety
/// As `lesson5_vector_quads_q2`, with `quads_per_lane(dim) <= Q`; every thread of the block
/// runs it (the barrier).
#[inline(always)]
unsafe fn shared_target<const Q: usize, const V4: bool>(
    buffers: (*const f32, *mut f32, *mut u8, *const f32),
    sizes: (usize, usize, f32),
    draws: &rng::StepDraws,
    _tile_rows: usize,
) {
    let (target, dim) = (buffers.3, sizes.1);
    // SAFETY: a row of at most Q quads per lane is at most Q * 32 quads; every thread of the
    // block is here, before any returns.
    let staged = unsafe { stage_target::<Gaussian, Q, true>(target, dim) };
    // SAFETY (of every call): q < quads_per_row(dim) <= Q * 32, inside the copy.
    let target_quad = |q| unsafe { shared_target_quad::<Gaussian>(staged, q) };
    // SAFETY: forwarded from this function's contract.
    unsafe { rows_with_loads_in_flight::<Q>(buffers, sizes, draws, target_quad) }
}

lane_group_entry_point!(
    lesson7_shared_target_q2,
    shared_target,
    2,
    true,
    256,
    "as lesson 6, with the target in shared memory"
);
lane_group_entry_point!(
    lesson7_shared_target_q8,
    shared_target,
    8,
    true,
    1024,
    "as lesson 6, with the target in shared memory"
);
