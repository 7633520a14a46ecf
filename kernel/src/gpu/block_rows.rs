//! The single step of long rows, 1025 to 8192 elements: a block per row, a warp per segment.
//!
//! # Why a block, and what the warps share
//! A warp holds a row of up to 1024 elements in registers (8 quads per lane), computes its
//! proposal once, decides, and writes either the proposal or the state: each element read once
//! and written once. A longer row does not fit one warp's registers; streamed through one warp
//! instead (`step::row_streaming`), the proposal is written speculatively and the rejected
//! half of the rows is read and written a second time, and at 4096 elements those bytes reach
//! DRAM (`bench/NOTES.md`, "Issue 22").
//!
//! So the row is split over the warps of a block: warp `w` owns segment `w`
//! ([`layout::SEGMENT_QUADS`] quads, 1024 elements), holds its proposal in registers as the
//! one-warp-per-row step does (`resident::propose_resident`), and sums its terms with a butterfly
//! of shuffles. The row's decision needs all the segments' sums, and shuffles reach only the
//! lanes of one warp: the warps meet in *shared memory*. Lane 0 of each warp stores its
//! segment's sum in a slot of a small block-shared array, the block waits at a *barrier*
//! (`bar.sync`: no thread continues until every thread of the block has arrived, and the
//! stores before it are then visible to all), and every thread reads the sums, adding them in
//! segment order (`mh::add_segment`): every warp computes the same total, bit for bit, as the
//! CPU reference and the streamed step do.
//!
//! # The rest of the design
//! - The next row's state travels while this one computes: into shared memory by `cp.async`
//!   (`SharedFeed`, as in the staged one-warp-per-row step), or into registers
//!   (`RegisterFeed`): always with the caller's noise, and with in-kernel random numbers when
//!   the target asks for it (`Target::NEXT_LONG_ROW_IN_REGISTERS`). The registers (32 a
//!   thread) cost the SM a block of warps, which a target of short terms (the Gaussian) does
//!   not need: its step runs 5 % faster so, Student-t's 19 to 25 % slower (`bench/NOTES.md`,
//!   issue 22, thirty-ninth part). Staging takes 8 KB per warp (a segment and the next row's):
//!   up to 4 warps, an array the kernel declares; 5 to 8 warps (64 KB), more than a kernel may
//!   declare, so the launch gives it as *dynamic* shared memory.
//! - With the next row in registers, shared memory is free for something else: each lane
//!   keeps its quads of the target (8 quads of each of the target's arrays) in a *stash* of
//!   shared memory of its own, filled once per launch and read back every row (`STASH`): up
//!   to 4 warps an array the kernel declares, 5 to 8 warps the dynamic shared memory the
//!   launch gives for staging, which the rows in registers leave unused. From
//!   global memory the same loads are L1 hits queued behind the next row's loads in the
//!   L1TEX pipeline, with 64-bit addresses held in registers; from shared memory they take a
//!   32-bit address and a short, fixed latency. No other thread reads a lane's slots, so the
//!   stash needs no barrier.
//! - The grid is *persistent*: one wave, as many blocks as the SMs hold at once (the host asks
//!   the driver's occupancy for the kernel), each taking rows `b, b + grid, ...`, so that
//!   there is always a next row to load ahead. A grid of more blocks would run the rest as a
//!   second, partial wave of whole blocks, each with its share of rows to do alone.
//! - The sums' slots alternate between two sets by row: a fast warp storing the next row's sum
//!   cannot overwrite a slot a slow warp has yet to read (to store it, the fast warp passed the
//!   next row's barrier, which the slow warp reaches only after reading).
//! - Every 32 rows, lane `l` of each warp takes the acceptance uniform of the block's `l`-th
//!   next row and its threshold (one Philox call, or one load, and one `ln`, for 32 rows, as
//!   the tiles of `step::step_tiles` do); each row's comes from its lane by a shuffle. No
//!   warp waits for one lane's Philox call.

use crate::gpu::args::{RowSlot, StepArgs, target_array_quad};
use crate::gpu::device::memory::{load_shared_v4, store_shared_f32, store_shared_v4};
use crate::gpu::device::thread::{block_dim_x, block_idx_x, grid_dim_x, lane_id, thread_idx_x};
use crate::gpu::device::warp::{group_sum_loop, shfl_idx};
use crate::gpu::feed::RowFeed;
use crate::gpu::noise::Noise;
use crate::gpu::resident::{propose_resident, write_resident};
use crate::gpu::step::decide_sum;
use crate::layout::{
    self, MAX_BLOCK_ROW_SEGMENTS, SEGMENT_QUADS, STAGED_WARPS_PER_BLOCK, WARP_SIZE,
};
use crate::mh;
use crate::target::Target;
use core::arch::{asm, nvptx};

/// A warp's quads of its segment computed behind one branch (`resident::propose_resident`):
/// with all 8 behind one, ptxas overlaps the quads' dependent chains, which a warp of this
/// step, waiting at the row's barrier with few warps beside it, has little else to hide them
/// with (3 to 6 % faster on rows of 2048 to 8192, `bench/NOTES.md`, issue 22, twentieth and
/// twenty-first parts). The quads past a short last segment then compute zeros, at no cost to
/// the row: the barrier waits for the full segments anyway.
const SEGMENT_QUADS_TOGETHER: usize = 8;

/// Bytes of one set of the sums' slots: a float per segment, read back as two quads.
const SUM_SLOTS_BYTES: u32 = (MAX_BLOCK_ROW_SEGMENTS * 4) as u32;
const _: () = assert!(MAX_BLOCK_ROW_SEGMENTS <= 8);

/// The threads of the largest block that keeps a stash of the target in an array it declares
/// (`STAGED_WARPS_PER_BLOCK` warps; a larger one would pass the 48 KB a kernel may declare).
/// The array has a slot of each quad for each of them, `STASH_THREADS * Q * ARRAYS` quads.
const STASH_THREADS: usize = STAGED_WARPS_PER_BLOCK * WARP_SIZE;

/// The body of the block-per-row entry points: rows `block_idx, block_idx + grid, ...`, each
/// split over the block's warps, one segment each (see the module documentation).
///
/// With `STASH`, each lane reads its quads of the target from a stash of its own in shared
/// memory (see the module documentation): an array the kernel declares, for blocks of at most
/// [`STASH_THREADS`] threads, or with `DYNAMIC_STASH` the launch's dynamic shared memory.
///
/// # Safety
/// As the single steps, with blocks of exactly `layout::segments(dim)` warps (at most
/// [`MAX_BLOCK_ROW_SEGMENTS`], and at most [`STASH_THREADS`] threads with `STASH` and not
/// `DYNAMIC_STASH`), `V4` only if `dim % 4 == 0`, and `feed` made for this warp's segment; with
/// `DYNAMIC_STASH`, launched with `layout::block_rows_staging_bytes(warps)` bytes of dynamic
/// shared memory.
#[inline(always)]
pub(crate) unsafe fn step_block_rows<
    T: Target,
    N: Noise,
    F: RowFeed<N, Q>,
    const Q: usize,
    const V4: bool,
    const STASH: bool,
    const DYNAMIC_STASH: bool,
>(
    args: &StepArgs,
    noise: &N,
    mut feed: F,
) {
    let sums: u32;
    // SAFETY: declares a block-shared array and takes its address; no memory is touched.
    unsafe {
        asm!("{{ .shared .align 16 .b8 fused_mh_segment_sums[{bytes}]; mov.u32 {base}, fused_mh_segment_sums; }}",
             bytes = const 2 * SUM_SLOTS_BYTES,
             base = out(reg32) sums, options(nostack));
    }
    let (lane, warp) = (lane_id(), thread_idx_x() / WARP_SIZE);
    let segments = block_dim_x() / WARP_SIZE;
    // This lane's first quad of every row, and the quads 32 apart that follow it.
    let first_quad = warp * SEGMENT_QUADS;
    let n_quads = layout::quads_per_row(args.dim);
    // Past the row, a zero quad: it adds exactly 0 (the `Target` contract).
    let global_target_quad = |q: usize| {
        if q < n_quads {
            // SAFETY: q < n_quads; V4 only if dim % 4 == 0 (the contract).
            unsafe { args.target_quad::<T, V4>(q) }
        } else {
            T::quad(|_| [0.0; 4])
        }
    };
    // With STASH, each lane keeps its quads of the target in a stash of shared memory, quad k
    // of array a in slot `(k * ARRAYS + a) * stash_threads + thread` (a warp's 16-byte loads
    // of one slot row touch consecutive addresses: no bank conflicts), filled once: no other
    // thread reads a lane's slots. The stash is an array of `STASH_THREADS` slots a quad the
    // kernel declares, or with DYNAMIC_STASH the launch's dynamic shared memory, a slot a
    // quad for each of the block's threads.
    // The launch's dynamic shared memory holds a warp's staging for each warp of the block
    // (`layout::block_rows_staging_bytes`): a warp's stash must fit in one.
    const {
        assert!(
            !DYNAMIC_STASH || WARP_SIZE * Q * T::ARRAYS * 16 <= layout::block_rows_staging_bytes(1)
        )
    };
    let stash_threads = if DYNAMIC_STASH {
        block_dim_x() as usize
    } else {
        STASH_THREADS
    };
    // Bytes from a thread's slot of quad 0, array 0 to its slot of quad k, array a.
    let slot_offset = |k: usize, a: usize| ((k * T::ARRAYS + a) * stash_threads * 16) as u32;
    let stash: u32 = if STASH {
        let base: u32;
        // SAFETY: declares a block-shared array and takes its address; no memory is touched.
        unsafe {
            if DYNAMIC_STASH {
                asm!("mov.u32 {base}, fused_mh_dynamic_staging;",
                     base = out(reg32) base, options(nomem, nostack));
            } else {
                asm!("{{ .shared .align 16 .b8 fused_mh_target_stash[{bytes}]; mov.u32 {base}, fused_mh_target_stash; }}",
                     bytes = const STASH_THREADS * Q * T::ARRAYS * 16,
                     base = out(reg32) base, options(nostack));
            }
        }
        // This thread's slot of quad 0, array 0.
        let own = base + (thread_idx_x() * 16) as u32;
        for k in 0..Q {
            let q = first_quad + lane + k * WARP_SIZE;
            for a in 0..T::ARRAYS {
                let v = if q < n_quads {
                    // SAFETY: q < n_quads, a < ARRAYS; V4 as above.
                    unsafe { target_array_quad::<V4>(args.target, args.dim, a, q) }
                } else {
                    [0.0; 4]
                };
                // SAFETY: this thread's own slot of the stash, inside it (the block has at most
                // `stash_threads` threads, the contract).
                unsafe { store_shared_v4(own + slot_offset(k, a), v) };
            }
        }
        own
    } else {
        0
    };
    let target_quad = |q: usize| {
        if STASH {
            let k = (q - first_quad - lane) / WARP_SIZE;
            // SAFETY: this thread's own slots, written above by this thread; `k < Q`, since
            // the rows' loops ask for the lane's quads `first_quad + lane + 32 k` only.
            T::quad(|a| unsafe { load_shared_v4(stash + slot_offset(k, a)) })
        } else {
            global_target_quad(q)
        }
    };
    let mut row = block_idx_x();
    // SAFETY: the feed is this segment's (the contract).
    unsafe { load_row::<N, F, Q, V4>(&mut feed, args, noise, row, first_quad + lane) };
    let mut set = 0u32;
    // The block's rows so far, and the thresholds of its 32 rows from the last multiple of 32.
    let (mut rows_done, mut tile_threshold) = (0u32, 0.0f32);
    // `row` is the same in every thread of the block: the loop, and the barrier in it, are
    // uniform across the block.
    while row < args.batch {
        let next = row + grid_dim_x();
        if rows_done % WARP_SIZE as u32 == 0 {
            let lane_row = row + lane * grid_dim_x();
            tile_threshold = if lane_row < args.batch {
                // SAFETY: lane_row < batch.
                mh::threshold(mh::log_uniform(unsafe { noise.uniform(lane_row) }))
            } else {
                0.0
            };
        }
        // SAFETY: the whole warp is here (the loop is uniform across the block).
        let threshold = unsafe { shfl_idx(tile_threshold, rows_done % WARP_SIZE as u32) };
        // SAFETY: as above.
        unsafe { load_row::<N, F, Q, V4>(&mut feed, args, noise, next, first_quad + lane) };
        let slot = RowSlot {
            row: row as u32,
            offset: row * args.dim,
            live: true,
            lane_in_group: lane,
            g: WARP_SIZE,
            threshold,
        };
        // SAFETY: the warp's quads of the row are its first Q from `first_quad` (a segment).
        let (ps, partial) = unsafe {
            propose_resident::<T, N, F, Q>(
                args,
                noise,
                slot,
                &feed,
                first_quad,
                SEGMENT_QUADS_TOGETHER,
                target_quad,
            )
        };
        // SAFETY: the whole warp is here (the loop is uniform across the block).
        let segment_sum = unsafe { group_sum_loop(partial, WARP_SIZE) };
        let set_base = sums + set * SUM_SLOTS_BYTES;
        if lane == 0 {
            // SAFETY: this warp's slot of this row's set: no other thread writes it, and no
            // thread reads it before the barrier below.
            unsafe { store_shared_f32(set_base + warp as u32 * 4, segment_sum) };
        }
        // SAFETY: every thread of the block reaches this barrier (the loop is uniform).
        unsafe { nvptx::_syncthreads() };
        // SAFETY: the set's slots, written before the barrier (the module documentation says
        // why the next row's stores cannot overwrite them before this read); the slots past
        // `segments` are read but not used, and the second quad only when there are more than
        // four segments (the same in every thread).
        let segment_sums = unsafe {
            let low = load_shared_v4(set_base);
            let high = if segments > 4 {
                load_shared_v4(set_base + 16)
            } else {
                [0.0; 4]
            };
            [
                low[0], low[1], low[2], low[3], high[0], high[1], high[2], high[3],
            ]
        };
        let mut sum = segment_sums[0];
        // A loop of constant bounds, unrolled: the sums stay in registers.
        for (segment, &segment_sum) in segment_sums.iter().enumerate().skip(1) {
            if segment < segments {
                sum = mh::add_segment(sum, segment, segment_sum);
            }
        }
        let decision = decide_sum::<T>(sum, slot);
        // SAFETY: a row inside the batch; V4 as above.
        unsafe {
            write_resident::<N, F, Q, V4>(args, slot, &feed, first_quad, &ps, decision.accept)
        };
        if warp == 0 && lane == 0 {
            // SAFETY: row < batch; this thread is the flag's only writer.
            unsafe { *args.accepted.add(row) = u8::from(decision.accept) };
        }
        set ^= 1;
        rows_done += 1;
        row = next;
    }
}

/// Makes the feed's last row the current one and issues the loads of this lane's quads
/// (`first_quad + 32 k`) of `row`, or nothing past the batch.
///
/// # Safety
/// `feed` is this lane's segment's, `V4` only if `dim % 4 == 0`.
#[inline(always)]
unsafe fn load_row<N: Noise, F: RowFeed<N, Q>, const Q: usize, const V4: bool>(
    feed: &mut F,
    args: &StepArgs,
    noise: &N,
    row: usize,
    first_quad: usize,
) {
    let live = row < args.batch;
    // SAFETY: a row inside the batch when live (the offset is not used otherwise).
    unsafe { feed.load_next::<V4>(args, noise, row * args.dim, live, first_quad, WARP_SIZE) };
}
