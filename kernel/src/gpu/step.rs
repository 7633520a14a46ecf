//! The single step: one row resident in registers or streamed, and the tile loop.

use crate::gpu::args::{RowSlot, StepArgs, Tile, shared_target_quad, stage_target};
use crate::gpu::device::thread::{block_dim_x, block_idx_x, grid_dim_x, lane_id, thread_idx_x};
use crate::gpu::device::warp::{group_sum_loop, shfl_idx};
use crate::gpu::feed::RowFeed;
use crate::gpu::noise::{CallerNoise, Noise, PhiloxNoise};
use crate::gpu::resident::{propose_resident, write_resident};
use crate::gpu::row::{QuadInput, propose_quad};
use crate::layout::{self, SEGMENT_QUADS, WARP_SIZE};
use crate::mh;
use crate::rng;
use crate::target::Target;

/// One row whose quads fit in registers: at most `Q` quads per lane. The lane's inputs arrive
/// preloaded in `ahead` (loaded while the previous row computed, see `step_tiles`). The target's
/// quads are loaded here, from L1: keeping them in registers for the whole launch (a lane owns
/// the same quads of every row) took 16 more registers, fewer warps fitted on an SM, and the
/// step ran 7 % slower on the H200. The proposal is computed once, kept, and written if
/// accepted.
///
/// # Safety
/// `Q >= layout::quads_per_lane(dim)`, `V4` only if `dim % 4 == 0`; see the entry points.
#[inline(always)]
pub(crate) unsafe fn row_resident<
    T: Target,
    N: Noise,
    F: RowFeed<N, Q>,
    const Q: usize,
    const V4: bool,
>(
    args: &StepArgs,
    noise: &N,
    slot: RowSlot,
    feed: &F,
    target: u32,
) -> Decision {
    // SAFETY: q < Q * 32 for every quad asked for, and `target` is the staged copy.
    let target_quad = |q| unsafe { shared_target_quad::<T>(target, q) };
    // SAFETY: forwarded from the contract: the row's quads are the lane's first Q.
    let (ps, partial) = unsafe {
        propose_resident::<T, N, F, Q>(args, noise, slot, feed, 0, F::QUADS_TOGETHER, target_quad)
    };
    // SAFETY: every lane of the warp reaches this (the caller's row loop is uniform across the
    // warp; lanes without a row take part with `live = false`).
    let decision = unsafe { decide::<T>(partial, slot) };
    // SAFETY: as above.
    unsafe { write_resident::<N, F, Q, V4>(args, slot, feed, 0, &ps, decision.accept) };
    decision
}

/// Quads a lane of a streamed row has in flight ahead of the one it computes: one 16-byte
/// load (two with caller noise) each: two hide the wait of the quad being computed, more add
/// registers and nothing else (`bench/NOTES.md`, "Variants, predictions, results", has the measurements).
pub(crate) const STREAM_DEPTH: usize = 2;

/// A row of any length, kept nowhere: pass 1 computes each quad's proposal, adds its terms,
/// and writes it to `x_new` at once (speculatively); after the decision, pass 2 writes `x` back
/// over the proposal if the row is rejected. The re-read of `x` comes from L1 or L2 (the lane
/// read it moments before), and the second write of a rejected row meets the first in L2, so
/// memory sees each element read once and written once, as in the register-resident path, and
/// the random numbers are drawn once (for rows much longer than 1024 elements L2 no longer holds
/// them: `bench/NOTES.md`, "where the loads go").
///
/// Pass 1 is software-pipelined: the loads of the lane's next [`STREAM_DEPTH`] quads are in
/// flight while the current quad is computed. With `SCALED` the proposal takes its scales per
/// dimension from `args.scale` (read next to the target, from L1).
///
/// # Safety
/// `V4` only if `dim % 4 == 0`, `args.scale` holds `dim` floats if `SCALED`; see the entry
/// points.
#[inline(always)]
pub(crate) unsafe fn row_streaming<T: Target, N: Noise, const V4: bool, const SCALED: bool>(
    args: &StepArgs,
    noise: &N,
    slot: RowSlot,
) -> Decision {
    let n_quads = layout::quads_per_row(args.dim);
    let mut partial = 0.0f32;
    let mut q = slot.lane_in_group;
    // The lane's next STREAM_DEPTH quads, loaded ahead: a ring shifted by one each quad (the
    // indices stay constants, so it lives in registers).
    let mut ahead = [QuadInput::ZERO; STREAM_DEPTH];
    for (d, input) in ahead.iter_mut().enumerate() {
        let qd = q + d * slot.g;
        if slot.live && qd < n_quads {
            // SAFETY: a row inside the batch (live) and qd < n_quads.
            *input = unsafe { QuadInput::load::<N, V4>(args, noise, slot.offset, qd) };
        }
    }
    // The row's segments (`layout::SEGMENT_QUADS`) in turn, each summed as a row of its own,
    // the sums added in order: the bits of a row split over a block's warps
    // (`gpu::block_rows`). The segment loop is uniform across the warp, as the sums' shuffles
    // require.
    let mut sum = 0.0f32;
    for segment in 0..layout::segments(args.dim) {
        let segment_end = n_quads.min((segment + 1) * SEGMENT_QUADS);
        while slot.live && q < segment_end {
            let input = ahead[0];
            for d in 1..STREAM_DEPTH {
                ahead[d - 1] = ahead[d];
            }
            let q_next = q + STREAM_DEPTH * slot.g;
            ahead[STREAM_DEPTH - 1] = if q_next < n_quads {
                // SAFETY: a row inside the batch and q_next < n_quads.
                unsafe { QuadInput::load::<N, V4>(args, noise, slot.offset, q_next) }
            } else {
                QuadInput::ZERO
            };
            // SAFETY: q < n_quads (and `scale` holds dim floats if SCALED).
            let (target, scale) = unsafe {
                (
                    args.target_quad::<T, V4>(q),
                    args.proposal_scale::<SCALED, V4>(q),
                )
            };
            let p;
            (p, partial) =
                propose_quad::<T, N>(noise, slot.row, q, input, (target, scale), partial);
            // SAFETY: a row inside the batch, q < n_quads, and quad q is this lane's alone.
            unsafe { args.store_x_new::<V4>(slot.offset, q, p) };
            q += slot.g;
        }
        // SAFETY: every lane of the warp reaches this (the caller's row loop and this segment
        // loop are uniform across the warp; lanes without a row take part with `live = false`).
        sum = mh::add_segment(sum, segment, unsafe { group_sum_loop(partial, slot.g) });
        partial = 0.0;
    }
    let decision = decide_sum::<T>(sum, slot);
    let mut q = slot.lane_in_group;
    while slot.live && !decision.accept && q < n_quads {
        // Pass 2 in batches: all the batch's loads first, then its stores, so that the lane
        // waits for one round trip to L2 per batch rather than one per quad.
        let mut xs = [[0.0f32; 4]; REWRITE_BATCH];
        for (k, x) in xs.iter_mut().enumerate() {
            let qk = q + k * slot.g;
            if qk < n_quads {
                // SAFETY: a row inside the batch, qk < n_quads.
                *x = unsafe { args.x_quad::<V4>(slot.offset, qk) };
            }
        }
        for (k, x) in xs.iter().enumerate() {
            let qk = q + k * slot.g;
            if qk < n_quads {
                // SAFETY: a row inside the batch, qk < n_quads, and quad qk is this lane's
                // alone.
                unsafe { args.store_x_new::<V4>(slot.offset, qk, *x) };
            }
        }
        q += REWRITE_BATCH * slot.g;
    }
    decision
}

/// Quads per lane that pass 2 of a streamed row reloads before it stores any (see
/// `row_streaming`): one quad at a time, a rejected row of 4096 elements would wait for 32
/// round trips to L2 in a row; batches of 4 overlap them, batches of 8 need twice the
/// registers (`bench/NOTES.md`, "Variants, predictions, results", has the measurements).
pub(crate) const REWRITE_BATCH: usize = 4;

/// A row's decision, whether its `log alpha` was finite (it is not when the state or the
/// proposal holds a NaN or an infinity, or the terms overflow), and whether its terms totalled
/// exactly 0 (a null move: the proposal rounded back to the state).
#[derive(Clone, Copy)]
pub(crate) struct Decision {
    pub(crate) accept: bool,
    pub(crate) finite: bool,
    pub(crate) null: bool,
}

/// The group's decision: sum the partials (through the target's row-level hook), then compare
/// the total with the row's threshold `-2 log u` (`mh::below_threshold`). A row past the batch
/// never accepts.
///
/// # Safety
/// All 32 lanes of the warp call this together (a warp collective: [`group_sum_loop`]).
#[inline(always)]
pub(crate) unsafe fn decide<T: Target>(partial: f32, slot: RowSlot) -> Decision {
    // SAFETY: the whole warp is here (the contract); `slot.g` is the same in every lane.
    decide_sum::<T>(unsafe { group_sum_loop(partial, slot.g) }, slot)
}

/// The decision from the row's summed terms (through the target's row-level hook). A row past
/// the batch never accepts.
#[inline(always)]
pub(crate) fn decide_sum<T: Target>(sum: f32, slot: RowSlot) -> Decision {
    let sum = T::row_total(sum);
    Decision {
        accept: accept_sum(sum, slot),
        finite: mh::is_finite(sum),
        null: sum == 0.0,
    }
}

/// The decision from the group's summed terms. A row past the batch never accepts.
#[inline(always)]
pub(crate) fn accept_sum(sum: f32, slot: RowSlot) -> bool {
    slot.live && mh::below_threshold(sum, slot.threshold)
}

/// The body of every entry point.
///
/// # Thread mapping
/// Warps take *tiles* of `tile_rows` consecutive rows (grid-stride: warp `w` of `W` takes tiles
/// `w, w + W, ...`). At the start of a tile, lane `l < tile_rows` fetches the acceptance uniform
/// of the tile's row `l` and takes its log (one Philox call or one coalesced load, and one `ln`,
/// serve up to 32 rows). The warp then walks the tile `32 / G` rows at a time (`64 / G` with a
/// paired feed, `G / 2` lanes a row): group `i` of the warp (lanes `iG .. iG + G`) takes the
/// next row, gets its `log u` from the lane that fetched
/// it (`shfl.sync.idx`), and does the row (register-resident when `Q > 0`, streamed with
/// speculative writes when `Q == 0`). With `Q > 0`, the loads of the warp's next row are issued
/// before the current row is computed, so they travel from memory while it computes (software
/// pipelining: without it, each warp waited for its loads, and the H200 ran the step at 67 % of
/// the copy bandwidth).
///
/// The bookkeeping is kept cheap because it runs once per row and the row's arithmetic is
/// only a few hundred instructions per lane: the tile is the unit of 64-bit index arithmetic
/// ([`Tile::at`]), and rows inside it are counted in 32 bits and reached by adding `dim`.
///
/// # Safety
/// See the entry points.
#[inline(always)]
pub(crate) unsafe fn step_tiles<
    T: Target,
    N: Noise,
    F: RowFeed<N, Q>,
    const Q: usize,
    const V4: bool,
    const SCALED: bool,
>(
    args: &StepArgs,
    noise: &N,
    mut feed: F,
) {
    // Per-dimension scales are read by the streamed rows only (the run's single steps).
    const { assert!(Q == 0 || !SCALED) };
    // The lanes of a row: the group's, or half of them paired (see `propose_resident`).
    let g = F::row_lanes(args.dim);
    let rows_at_once = (WARP_SIZE / g) as u32;
    let lane = lane_id();
    let (lane_in_group, group) = (lane % g, (lane / g) as u32);
    let warps_per_block = block_dim_x() / WARP_SIZE;
    let warp = block_idx_x() * warps_per_block + thread_idx_x() / WARP_SIZE;
    let warps = grid_dim_x() * warps_per_block;
    let tile_rows = args.tile_rows as u32;
    let tile_stride = warps * args.tile_rows;
    // Elements between the rows a group takes one after the other inside a tile, and from a
    // tile's first row to this group's first row.
    let row_step = rows_at_once as usize * args.dim;
    let group_offset = group as usize * args.dim;
    // Register-resident rows have their inputs loaded one row ahead (by `feed`), and their
    // target in shared memory.
    let target = if Q > 0 {
        // SAFETY: the host picks a resident variant only for rows of at most Q quads per lane,
        // so at most Q * 32 quads; every thread of the block is here.
        unsafe { stage_target::<T, Q, V4>(args.target, args.dim) }
    } else {
        0
    };

    let mut tile = Tile::at(args, warp * args.tile_rows);
    // SAFETY: V4 only when dim % 4 == 0 (the host's choice); a row past the batch loads
    // nothing.
    unsafe {
        feed.load_next::<V4>(
            args,
            noise,
            tile.offset + group_offset,
            group < tile.rows,
            lane_in_group,
            g,
        )
    };
    // `tile.rows` is the same in every lane: the loops below are uniform across the warp, as
    // the shuffles inside them require.
    while tile.rows > 0 {
        // The log of the uniform, so that its cost too is shared by the tile.
        let tile_threshold = if (lane as u32) < tile.rows {
            // SAFETY: the row is inside the batch.
            mh::threshold(mh::log_uniform(unsafe {
                noise.uniform(tile.first_row + lane)
            }))
        } else {
            0.0
        };
        let mut first = 0u32;
        let mut offset = tile.offset + group_offset;
        loop {
            let in_tile = first + group;
            let slot = RowSlot {
                row: tile.row_word(in_tile),
                offset,
                live: in_tile < tile.rows,
                lane_in_group,
                g,
                // SAFETY: every lane of the warp runs this loop: its bounds (`tile_rows`,
                // `rows_at_once`) are the same in every lane.
                threshold: unsafe { shfl_idx(tile_threshold, in_tile) },
            };
            let last_in_tile = first + rows_at_once >= tile_rows;
            // The warp's next row: the rest of this tile, then the next tile. (Streamed rows,
            // Q = 0, load nothing ahead; this is then dead code.)
            let (next_offset, next_live) = if last_in_tile {
                let next_tile = Tile::at(args, tile.first_row + tile_stride);
                (next_tile.offset + group_offset, group < next_tile.rows)
            } else {
                (offset + row_step, in_tile + rows_at_once < tile.rows)
            };
            // SAFETY: as above.
            unsafe { feed.load_next::<V4>(args, noise, next_offset, next_live, lane_in_group, g) };
            // SAFETY: forwarded from the entry point's contract; the host's dispatch chose the
            // entry point, and with it `Q` and `V4`, from `dim`.
            let decision = unsafe {
                if Q == 0 {
                    row_streaming::<T, N, V4, SCALED>(args, noise, slot)
                } else {
                    row_resident::<T, N, F, Q, V4>(args, noise, slot, &feed, target)
                }
            };
            if slot.live && lane_in_group == 0 {
                // SAFETY: the row is inside the batch; lane 0 of the group is its flag's only
                // writer.
                unsafe {
                    *args.accepted.add(tile.first_row + in_tile as usize) =
                        u8::from(decision.accept)
                };
            }
            // Null for every step but the run's (a constant there: this compiles to nothing).
            if !args.nonfinite.is_null() && slot.live && lane_in_group == 0 && !decision.finite {
                // SAFETY: as the flag above; lane 0 of the group is the row's count's only
                // writer.
                unsafe { *args.nonfinite.add(tile.first_row + in_tile as usize) += 1 };
            }
            if !args.null_moves.is_null() && slot.live && lane_in_group == 0 && decision.null {
                // SAFETY: as the count above.
                unsafe { *args.null_moves.add(tile.first_row + in_tile as usize) += 1 };
            }
            if last_in_tile {
                break;
            }
            first += rows_at_once;
            offset += row_step;
        }
        tile = Tile::at(args, tile.first_row + tile_stride);
    }
}
/// The caller-noise entry points' arguments as the step's inputs.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
pub(crate) fn noise_step_inputs(
    x: *const f32,
    x_new: *mut f32,
    accepted: *mut u8,
    target: *const f32,
    batch: u64,
    dim: u64,
    step_size: f32,
    noise: *const f32,
    uniform: *const f32,
    tile_rows: u32,
) -> (StepArgs, CallerNoise) {
    let (args, _) = rng_step_inputs(
        x, x_new, accepted, target, batch, dim, step_size, 0, 0, tile_rows,
    );
    (args, CallerNoise { noise, uniform })
}

/// The in-kernel-RNG entry points' arguments as the step's inputs.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
pub(crate) fn rng_step_inputs(
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
) -> (StepArgs, PhiloxNoise) {
    let args = StepArgs {
        x,
        x_new,
        accepted,
        target,
        batch: batch as usize,
        dim: dim as usize,
        step_size,
        scale: core::ptr::null(),
        nonfinite: core::ptr::null_mut(),
        null_moves: core::ptr::null_mut(),
        tile_rows: tile_rows as usize,
        evict_first: false,
    };
    let noise = PhiloxNoise {
        draws: rng::StepDraws::new(rng::key(seed), step),
    };
    (args, noise)
}
