//! Everything that exists only on the GPU: the device layer and the kernels' entry points.
//! Compiled only for `nvptx64-nvidia-cuda`.
//!
//! # The execution model in one paragraph
//!
//! A launch runs a *grid* of *blocks*; each block is a group of threads that run on one
//! streaming multiprocessor (SM). Threads are scheduled in *warps* of 32 that issue one
//! instruction at a time together, so the natural unit of cooperation is the warp: its lanes
//! can exchange registers directly with a shuffle, with no shared memory and no barrier. Here a
//! *group* of `G` consecutive lanes owns a row (a chain; `G` from [`layout::group_width`], 8 for
//! dim 64, 32 for dim 256 and up): the lanes load the row's quads side by side, so each load
//! instruction of the warp touches consecutive addresses (*coalesced*), sum their parts of
//! `log alpha`, and combine the partial sums with `log2 G` shuffles. A warp holds `32 / G` rows
//! at once; it works through *tiles* of up to 32 consecutive rows, and a grid-stride loop over
//! tiles lets any grid cover any batch. [`device`] explains the hardware behind these words.
//!
//! # The files, in reading order
//! - [`device`]: threads, warps, memory and the special function units.
//! - [`known_answers`]: the simplest kernels — one thread per Philox block or normal pair,
//!   grid-stride.
//! - the lessons (`lessons/`, listed by [`crate::lessons`]): the step written nine simpler ways,
//!   from one thread per row toward the production step, and the fused kernel's lesson.
//! - [`noise`], [`args`], [`row`], [`feed`] (and `shared_feed` on sm_80): what one step reads
//!   (random numbers, the buffers), a lane's part of a row, and where a lane's rows come from.
//! - [`resident`]: a row held in registers, its proposals and its new state; [`step`]: the
//!   single step (register-resident and streamed rows) and [`entries`], its entry points;
//!   [`block_rows`]: the single step of long rows, a block per row.
//! - [`chain`]: the fused K-step kernel, rows in registers for K steps; [`chain_split`], its
//!   form for small batches.
//! - [`stats`]: the statistics kernel for rows too long for the fused kernel, the diagnostics'
//!   sums, and the merge of two samples' moments.
//!
//! [`layout::group_width`]: crate::layout::group_width

pub mod args;
pub mod block_rows;
pub mod chain;
pub mod chain_split;
pub mod device;
pub mod entries;
pub mod feed;
pub mod known_answers;
pub mod model_steps;
pub mod noise;
pub mod resident;
pub mod row;
#[cfg(target_feature = "sm_80")]
pub mod shared_feed;
pub mod stats;
pub mod step;

use core::arch::nvptx;

/// A panic on the GPU cannot unwind or print; `trap` aborts the kernel, and the host sees the
/// launch fail (`CUDA_ERROR_ILLEGAL_INSTRUCTION`). The kernels are written so that nothing in
/// them can panic (raw pointers, no slice indexing).
#[panic_handler]
fn panic(_: &core::panic::PanicInfo) -> ! {
    // SAFETY: `trap` has no preconditions.
    unsafe { nvptx::trap() }
}
