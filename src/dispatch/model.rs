//! The model kernel's launches (`kernel/src/gpu/model_steps.rs`): a warp per chain at a time,
//! in one wave, and the reduction of the warps' window sums.

use fused_mh_kernel::layout::WARP_SIZE;
use fused_mh_kernel::model::{MODEL_WARPS_PER_BLOCK, ModelKind, window_sums_len};

use super::{Device, Launch, THREADS_PER_BLOCK, blocks_for};

/// Device memory the model kernel's window sums may take (one region per warp), in bytes: long
/// states get fewer warps.
const MODEL_SUMS_BYTES: u64 = 256 << 20;

/// Threads per block of the model kernel.
pub const MODEL_THREADS: u32 = (MODEL_WARPS_PER_BLOCK * WARP_SIZE) as u32;

/// The model kernel of `kind` for `chains` chains of `dim` parameters, on a device whose SMs
/// each hold `resident_blocks` of its blocks at once (the driver's occupancy for the loaded
/// kernel): a warp per chain at a time, each warp stepping `ceil(chains / resident warps)`
/// chains one after another (grid-stride), and so no more warps than are needed for that. A
/// grid of more warps than the SMs hold would run in waves, the last one a partial wave on
/// idle SMs; this grid is one wave whose warps have equal shares to within a chain. No more
/// warps than fit their window sums in [`MODEL_SUMS_BYTES`]; at least one block.
pub fn model_steps(
    kind: ModelKind,
    chains: usize,
    dim: usize,
    device: Device,
    resident_blocks: u32,
) -> Launch {
    let region = 8 * window_sums_len(dim) as u64;
    let per_block = MODEL_WARPS_PER_BLOCK as u64;
    let resident = (device.sms as u64 * u64::from(resident_blocks) * per_block)
        .min(MODEL_SUMS_BYTES / region)
        .max(per_block);
    let chains = (chains as u64).max(1);
    let chains_per_warp = chains.div_ceil(resident);
    let warps = chains.div_ceil(chains_per_warp).max(per_block);
    Launch {
        entry: kind.entry_point(),
        blocks: warps.div_ceil(per_block) as u32,
        threads: MODEL_THREADS,
        tile_rows: 0,
    }
}

/// The warps' window sums added up (`mh_model_sums_reduce`): a warp per entry.
pub fn model_sums_reduce(dim: usize, device: Device) -> Launch {
    let warps = window_sums_len(dim) as u64;
    Launch {
        entry: "mh_model_sums_reduce",
        blocks: blocks_for(warps, THREADS_PER_BLOCK, device),
        threads: THREADS_PER_BLOCK,
        tile_rows: 0,
    }
}
