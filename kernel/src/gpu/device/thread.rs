//! Where a thread is: CUDA's `threadIdx`, `blockIdx`, `blockDim`, `gridDim`, and the lane.

use crate::layout::WARP_SIZE;
use core::arch::nvptx;

/// This thread's index within its block (CUDA's `threadIdx.x`).
#[inline(always)]
pub(crate) fn thread_idx_x() -> usize {
    // SAFETY: reads the special register %tid.x; always defined inside a kernel.
    unsafe { nvptx::_thread_idx_x() as usize }
}

/// This block's index within the grid (`blockIdx.x`).
#[inline(always)]
pub(crate) fn block_idx_x() -> usize {
    // SAFETY: reads %ctaid.x.
    unsafe { nvptx::_block_idx_x() as usize }
}

/// Threads per block (`blockDim.x`).
#[inline(always)]
pub(crate) fn block_dim_x() -> usize {
    // SAFETY: reads %ntid.x.
    unsafe { nvptx::_block_dim_x() as usize }
}

/// Blocks in the grid (`gridDim.x`).
#[inline(always)]
pub(crate) fn grid_dim_x() -> usize {
    // SAFETY: reads %nctaid.x.
    unsafe { nvptx::_grid_dim_x() as usize }
}

/// This thread's lane within its warp, 0..32. Blocks are launched with a multiple of 32
/// threads, so warps never straddle blocks and `threadIdx.x % 32` is the hardware lane.
#[inline(always)]
pub(crate) fn lane_id() -> usize {
    thread_idx_x() % WARP_SIZE
}
