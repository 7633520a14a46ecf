//! The row feed of the staged step (sm_80 and later): the next row travels into shared memory
//! by `cp.async` while the lane computes the current one, so it costs no registers.

use core::arch::asm;

use crate::gpu::args::StepArgs;
use crate::gpu::device::memory::{
    copy_async_commit, copy_async_v4, copy_async_wait_for_previous, load_shared_v4, store_shared_v4,
};
use crate::gpu::device::thread::{lane_id, thread_idx_x};
use crate::gpu::feed::RowFeed;
use crate::gpu::noise::PhiloxNoise;
use crate::gpu::row::QuadInput;
use crate::layout::{self, QUAD, WARP_SIZE};

/// A staged row's quads computed behind one branch (`RowFeed::QUADS_TOGETHER`): in pairs, a
/// lane's two quads of a row of 64 (the paired step) are one block, whose Philox and
/// Box-Muller chains ptxas can overlap (`bench/NOTES.md`, issue 22, twentieth part).
const STAGED_QUADS_TOGETHER: usize = 2;

/// The most shared memory a kernel may declare for itself; beyond it, a launch gives the
/// block *dynamic* shared memory, up to the device's opt-in limit (227 KB on the H200).
const MAX_STATIC_SHARED_BYTES: usize = 48 * 1024;

// The module's dynamic shared array: an array of no declared size, at the start of each
// block's dynamic shared memory, as long as the launch makes it. PTX takes `.extern` arrays
// only at module scope, hence the file-scope assembly rather than a declaration in a kernel.
core::arch::global_asm!(".extern .shared .align 16 .b8 fused_mh_dynamic_staging[];");

/// Rows loaded ahead into shared memory by asynchronous copies (sm_80 and later), two buffers
/// per warp (for blocks of up to `W` warps): the row being computed and the next one, in
/// flight.
///
/// Why: a row of 1024 elements is 8 quads per lane. Held in registers, the row and the next one
/// loaded ahead need about 150 registers, too few warps fit on an SM; streamed instead (no row
/// held), each row starts with a wait for memory and a rejected row is written twice
/// (`bench/NOTES.md`, "rows staged in shared memory", has the measurements). An asynchronous copy lands in shared memory
/// without a register and without the lane waiting for it until `cp.async.wait_group`, so the
/// next row can be in flight for the whole of the current row at no register cost, and a
/// rejected row is written back from shared memory instead of being re-read from L2.
///
/// Each lane copies, and later reads, only its own 16-byte slots (slot `k` of a buffer is
/// the warp's `k`-th quads side by side, 512 bytes, so a warp's `ld.shared.v4` touches 512
/// consecutive bytes: no bank conflicts): no other lane touches them, so the lane's own
/// `cp.async.wait_group` is all the synchronization there is. A buffer is refilled (the copies
/// for row `r + 2`) only after the lane's last read of it (the write-back of row `r`, whose
/// stores consume the values read) in program order, so the copies cannot overtake the reads.
///
/// Only the in-kernel RNG uses it: caller noise would need its noise staged as well, and it
/// already runs at 98 % of the copy bandwidth with rows in registers.
///
/// With `PAIRED` a row's lanes are half its group's (see [`RowFeed::PAIRED`]): the lane's
/// quads are `lane_in_row + k g / 2`.
pub(crate) struct SharedFeed<
    const Q: usize,
    const G: usize,
    const W: usize,
    const PAIRED: bool = false,
> {
    /// This lane's slot 0 of buffer 0.
    pub(crate) base: u32,
    /// The buffer of the current row, 0 or 1.
    pub(crate) current: u32,
    /// How many quads of each row are this lane's (`lane_in_group + G k < quads_per_row`).
    pub(crate) lane_quads: u32,
}

impl<const Q: usize, const G: usize, const W: usize, const PAIRED: bool>
    SharedFeed<Q, G, W, PAIRED>
{
    /// Bytes of one buffer: a row of `Q` quads per lane.
    pub(crate) const ROW_BYTES: u32 = (Q * WARP_SIZE * 16) as u32;

    /// Bytes of the staging array: two buffers for each of `W` warps.
    pub(crate) const STAGING_BYTES: usize = W * 2 * Q * WARP_SIZE * 16;

    /// Declares the block's staging array (a kernel calls this or
    /// [`in_dynamic_shared`](Self::in_dynamic_shared) once) and makes this lane's feed in it
    /// ([`at`](Self::at)).
    ///
    /// # Safety
    /// The block has at most `W` warps.
    #[inline(always)]
    pub(crate) unsafe fn new(args: &StepArgs, first_quad: usize) -> Self {
        const { assert!(Self::STAGING_BYTES <= MAX_STATIC_SHARED_BYTES) };
        let base: u32;
        // SAFETY: declares a block-shared array and takes its address; no memory is touched.
        unsafe {
            asm!("{{ .shared .align 16 .b8 fused_mh_staging[{bytes}]; mov.u32 {base}, fused_mh_staging; }}",
                 bytes = const Self::STAGING_BYTES,
                 base = out(reg32) base, options(nostack));
        }
        // SAFETY: the array holds `W` warps' buffers; the block has at most `W` warps.
        unsafe { Self::at(base, args, first_quad) }
    }

    /// This lane's feed in the launch's *dynamic* shared memory: for staging arrays larger
    /// than a kernel may declare (48 KB), sized by the launch instead
    /// (`dispatch::dynamic_shared_bytes` on the host) after the driver has been told the
    /// kernel takes that much (`CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES`).
    ///
    /// # Safety
    /// The launch gives the block at least two buffers of [`ROW_BYTES`](Self::ROW_BYTES) per
    /// warp of dynamic shared memory, and the block has at most `W` warps.
    #[inline(always)]
    pub(crate) unsafe fn in_dynamic_shared(args: &StepArgs, first_quad: usize) -> Self {
        let base: u32;
        // SAFETY: takes the address of the module's dynamic shared array; touches no memory.
        unsafe {
            asm!("mov.u32 {base}, fused_mh_dynamic_staging;",
                 base = out(reg32) base, options(nostack, nomem));
        }
        // SAFETY: the launch gives the block's buffers (the contract).
        unsafe { Self::at(base, args, first_quad) }
    }

    /// This lane's feed in the staging array at `base`: finds the lane's slots, and zeroes
    /// the slots of the quads the lane never has (rows shorter than `Q * 32` quads from
    /// `first_quad`, the warp's first quad of each row: 0, or its segment's for the long
    /// rows of `gpu::block_rows`): they are computed with the others (see
    /// `propose_resident`) but never copied, and a zero quad against the zero-padded target
    /// adds exactly 0.
    ///
    /// # Safety
    /// `base` is a shared array of two buffers of [`ROW_BYTES`](Self::ROW_BYTES) for every
    /// warp of the block.
    #[inline(always)]
    unsafe fn at(base: u32, args: &StepArgs, first_quad: usize) -> Self {
        let lane = lane_id();
        let g = <Self as RowFeed<PhiloxNoise, Q>>::row_lanes(args.dim);
        // The warp's quads of each row, from its first.
        let n_quads = layout::quads_per_row(args.dim).saturating_sub(first_quad);
        let lane_in_group = lane % g;
        let lane_quads = if lane_in_group < n_quads {
            ((n_quads - 1 - lane_in_group) / g + 1).min(Q) as u32
        } else {
            0
        };
        let warp_in_block = (thread_idx_x() / WARP_SIZE) as u32;
        let feed = SharedFeed {
            base: base + warp_in_block * 2 * Self::ROW_BYTES + lane as u32 * 16,
            current: 1,
            lane_quads,
        };
        for buffer in 0..2 {
            for k in 0..Q {
                if k as u32 >= lane_quads {
                    // SAFETY: the lane's own slot.
                    unsafe { store_shared_v4(feed.slot(buffer, k), [0.0; 4]) };
                }
            }
        }
        feed
    }

    /// This lane's slot for its `k`-th quad in buffer `buffer`.
    #[inline(always)]
    pub(crate) fn slot(&self, buffer: u32, k: usize) -> u32 {
        self.base + buffer * Self::ROW_BYTES + (k * WARP_SIZE * 16) as u32
    }
}

impl<const Q: usize, const G: usize, const W: usize, const PAIRED: bool> RowFeed<PhiloxNoise, Q>
    for SharedFeed<Q, G, W, PAIRED>
{
    const GROUP: usize = G;
    const PAIRED: bool = PAIRED;
    const QUADS_TOGETHER: usize = STAGED_QUADS_TOGETHER;

    #[inline(always)]
    unsafe fn load_next<const V4: bool>(
        &mut self,
        args: &StepArgs,
        _noise: &PhiloxNoise,
        offset: usize,
        live: bool,
        first_quad: usize,
        g: usize,
    ) {
        self.current ^= 1;
        let next = self.current ^ 1;
        // SAFETY (of the pointer arithmetic): inside the row when live; not dereferenced else.
        let lane_start = args.x.wrapping_add(offset + QUAD * first_quad);
        for k in 0..Q {
            if live && (k as u32) < self.lane_quads {
                // SAFETY: the slot is this lane's; quad first_quad + g k lies inside the row,
                // inside x, 16-byte aligned (dim % 4 == 0).
                unsafe { copy_async_v4(self.slot(next, k), lane_start.wrapping_add(QUAD * g * k)) };
            }
        }
        // One group per row, even an empty one, so that "all groups but the last" is always
        // exactly the current row.
        copy_async_commit();
        copy_async_wait_for_previous();
    }
    #[inline(always)]
    unsafe fn quad(&self, k: usize) -> QuadInput {
        QuadInput {
            // SAFETY: the lane's own slot, landed (see `load_next`).
            x: unsafe { load_shared_v4(self.slot(self.current, k)) },
            fetched: [0.0; 4],
        }
    }
}
