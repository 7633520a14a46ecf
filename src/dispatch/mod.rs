//! Which kernel runs a launch, and in what shape: pure functions of the problem and the GPU,
//! tested without one.
//!
//! Every launch of the library is chosen here, by entry-point *name* (as candle looks kernels
//! up at the call site), with its grid, its block and its tile of rows. [`Gpu`](crate::Gpu)
//! looks the name up in the PTX module it loaded and pushes the arguments; nothing else in the
//! library knows which kernels exist. A test checks that every name these functions can return
//! is in the module it is returned for, and that every entry point of the modules is returned
//! for some problem.

use fused_mh_kernel::layout::{self, WARP_SIZE};
use fused_mh_kernel::layout::{
    MAX_BLOCK_ROW_SEGMENTS, MAX_SPLIT_DIM, MAX_STAGED_QUADS_PER_LANE, STAGED_WARPS_PER_BLOCK,
};

use crate::problem::Draws;
use crate::Shape;

mod model;
pub use model::{MODEL_THREADS, model_steps, model_sums_reduce};

#[cfg(any(test, feature = "testing"))]
mod lessons;
#[cfg(any(test, feature = "testing"))]
pub use lessons::{
    FAST_LOG_LESSON, FUSED_LESSON, LESSONS, LONG_ROW_LESSON, Lesson, LessonLayout, lesson,
};

/// Threads per block for the caller-noise step and the small utility kernels: 8 warps. A
/// multiple of 32, as the kernels require.
pub const THREADS_PER_BLOCK: u32 = 256;
/// Threads per block for the kernels that draw their random numbers (the in-kernel-RNG step
/// and the fused K-step kernel): 4 warps. Their 70-odd registers per thread let 3 blocks of
/// 256 (24 warps) or 7 blocks of 128 (28 warps) onto an SM: the smaller blocks fit more warps.
/// Caller noise (80 registers) is faster with 256 (`bench/NOTES.md` has the measurements).
pub const RNG_THREADS_PER_BLOCK: u32 = 128;
// The staged steps' shared arrays are sized for blocks of this many warps.
const _: () = assert!(RNG_THREADS_PER_BLOCK as usize == STAGED_WARPS_PER_BLOCK * WARP_SIZE);
/// Blocks launched per SM at most; more rows than that are covered by the kernels' grid-stride
/// loop. 32 blocks of 128 or 256 threads are 2x or 4x what one SM holds at once (2048
/// threads), enough to keep every SM fed through the launch's tail.
const MAX_BLOCKS_PER_SM: u32 = 32;
/// Warps per SM a small batch should still give, when the tile size can be cut to reach it
/// (see [`tiles`]), if the step's data stream from DRAM: loads in flight are what the step
/// waits for, and more warps keep more of them in flight.
const MIN_WARPS_PER_SM: usize = 32;
/// The same when the step's data fit in L2, so that they stay there from step to step: then
/// each warp's start (the target staged, the tile's uniforms drawn) is what the launch waits
/// for, and fewer warps with longer tiles win. A little under four warps per scheduler, so
/// that 2048 warps (15.5 per SM on the H200's 132) count as enough: `bench/NOTES.md`, "small
/// batches: longer tiles when the data fit in L2", has the measurements.
const MIN_WARPS_PER_SM_IN_L2: usize = 15;
/// Elements per warp tile of the staged one-warp-per-row step (see [`staged_tiles`]).
const STAGED_TILE_ELEMENTS: usize = 2048;
/// Below this many warps per SM (four per scheduler) with one lane group per row, the fused
/// kernel spreads each row over twice the lanes (`mh_chain_split*`): the step is a chain of
/// dependent latencies (Philox rounds, shuffles), and two warps per scheduler cannot hide them
/// (ncu's figures are in `bench/NOTES.md`, "Fused K steps per launch"). The results do not depend on it.
const SPLIT_BELOW_WARPS_PER_SM: usize = 16;
/// From this many warps per SM with a row over half its group's lanes, the fused kernel pairs
/// them (`mh_chain_paired*`): each lane holds two group lanes' quads, so a step's fixed work
/// (the sum's shuffles, the threshold, the counts) is shared by twice the quads. Batches this
/// large have warps to spare: many waves of them. The results do not depend on it.
const PAIRED_FROM_WARPS_PER_SM: usize = 64;

/// The fewest lanes a row of the paired single step has: with fewer, a warp's 16-byte copies
/// of a row's quads touch 32 rows' sectors at once, half of each, and the step at dim 16 (one
/// lane a row) ran 30 to 60 % slower on the H200 (`bench/NOTES.md`, issue 22, twelfth part).
const PAIRED_STEP_FROM_LANES: usize = 4;
/// Below this many warps per SM paired (four per scheduler), the single step keeps a lane group
/// per row: half the warps would hide less of the launch's latencies.
const PAIRED_STEP_FROM_WARPS_PER_SM: usize = 16;
/// A step that moves more bytes than L2 holds, but no more than this percentage of it, keeps
/// part of its data in L2 from step to step; there the paired single step measured 3 to 5 %
/// slower than `q2` at every tile tried ((131072, 64), (65536, 128), (32768, 256): 64 MiB on
/// the H200's 50 MiB), and 6 to 8 % faster from 70 MiB (`bench/NOTES.md`, issue 22,
/// fourteenth part): the bound lies between the two.
const UNPAIRED_STEP_UP_TO_L2_PERCENT: u64 = 130;

/// What the choice depends on about the GPU.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Device {
    /// Streaming multiprocessors.
    pub sms: usize,
    /// The loaded PTX module has the staged steps (`cp.async`: the `sm_80` module and newer).
    pub staged: bool,
    /// Bytes of L2 cache (50 MiB on the H200).
    pub l2_bytes: usize,
}

/// One launch: the entry point, the grid of `blocks` one-dimensional blocks of `threads`, and
/// the rows per warp tile of the single steps (0 for kernels that take none).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Launch {
    /// The entry point's name in the PTX.
    pub entry: &'static str,
    /// Blocks in the grid (at least 1).
    pub blocks: u32,
    /// Threads per block, a multiple of 32.
    pub threads: u32,
    /// Rows per warp tile (single steps), a power of two from `32 / G` to 32.
    pub tile_rows: u32,
}

/// The most blocks a launch takes (the kernels' grid-stride loops cover the rest).
fn max_blocks(device: Device) -> u64 {
    device.sms as u64 * u64::from(MAX_BLOCKS_PER_SM)
}

fn blocks_for(warps: u64, threads: u32, device: Device) -> u32 {
    warps
        .div_ceil(u64::from(threads) / WARP_SIZE as u64)
        .clamp(1, max_blocks(device)) as u32
}

/// The single step (`mh_step*`): the fastest entry point that holds a row of `dim` elements,
/// and its tiles.
///
/// - Rows of at most 256 elements (2 quads per lane) stay in registers (`q2`); with the
///   caller's noise, rows of up to 1024 do (`q8`: no Philox to hold); longer rows stream.
/// - `_v4` when `dim % 4 == 0`: every quad a 16-byte vector.
/// - With in-kernel random numbers and the `sm_80` module, rows of up to 1024 elements in whole
///   quads are *staged* instead: the next row travels into shared memory by `cp.async`. A
///   paired staged step whose bytes fit in L2 stores its new state evict-first
///   (`_evict_first`): 3 % faster there, 1.5 % slower from DRAM (`bench/NOTES.md`, issue 22,
///   fortieth part).
/// - Rows of 1025 to 8192 elements in whole quads take a block each, a warp per 1024-element
///   segment ([`block_rows`]; with in-kernel random numbers, the `sm_80` module only); longer
///   rows, and long rows not in whole quads, stream.
pub fn step<N>(shape: Shape, draws: &Draws<N>, device: Device) -> Launch {
    let in_kernel = matches!(draws, Draws::Philox { .. });
    let dim = shape.dim();
    let quads = layout::quads_per_lane(dim);
    let v4 = dim.is_multiple_of(layout::QUAD);
    let resident = quads <= layout::MAX_RESIDENT_QUADS_PER_LANE;
    let long = quads > layout::MAX_STAGED_QUADS_PER_LANE;
    if v4 && long && layout::segments(dim) <= MAX_BLOCK_ROW_SEGMENTS && (device.staged || !in_kernel) {
        return block_rows(shape, in_kernel, device);
    }
    let g = layout::group_width(dim);
    if in_kernel && device.staged && v4 && resident && paired_step(shape, device) {
        let threads = RNG_THREADS_PER_BLOCK;
        let bytes = step_bytes(shape, true);
        let (blocks, tile_rows) = tiles(shape, g / 2, threads, bytes, device);
        return Launch {
            entry: if bytes <= device.l2_bytes as u64 {
                "mh_step_staged_paired_evict_first_v4"
            } else {
                "mh_step_staged_paired_v4"
            },
            blocks,
            threads,
            tile_rows,
        };
    }
    let entry = match in_kernel {
        true if device.staged && v4 && resident => "mh_step_staged_q2_v4",
        true if device.staged && v4 && quads <= MAX_STAGED_QUADS_PER_LANE => {
            let (blocks, tile_rows) = staged_tiles(shape, device);
            return Launch {
                entry: "mh_step_staged_q8_v4",
                blocks,
                threads: RNG_THREADS_PER_BLOCK,
                tile_rows,
            };
        }
        true => match (resident, v4) {
            (true, true) => "mh_step_q2_v4",
            (true, false) => "mh_step_q2",
            (false, true) => "mh_step_streaming_v4",
            (false, false) => "mh_step",
        },
        false => match (quads, v4) {
            (q, true) if q <= layout::MAX_RESIDENT_QUADS_PER_LANE => "mh_step_with_noise_q2_v4",
            (q, false) if q <= layout::MAX_RESIDENT_QUADS_PER_LANE => "mh_step_with_noise_q2",
            (q, true) if q <= layout::MAX_RESIDENT_QUADS_CALLER_NOISE => "mh_step_with_noise_q8_v4",
            (q, false) if q <= layout::MAX_RESIDENT_QUADS_CALLER_NOISE => "mh_step_with_noise_q8",
            (_, true) => "mh_step_with_noise_streaming_v4",
            (_, false) => "mh_step_with_noise",
        },
    };
    let threads = if in_kernel {
        RNG_THREADS_PER_BLOCK
    } else {
        THREADS_PER_BLOCK
    };
    let (blocks, tile_rows) = tiles(shape, g, threads, step_bytes(shape, in_kernel), device);
    Launch {
        entry,
        blocks,
        threads,
        tile_rows,
    }
}

/// Whether the single step of `shape` (staged rows of at most 256 elements in whole quads)
/// pairs a row's lanes (`mh_step_staged_paired_v4`): each lane holds two group lanes' quads, so
/// a row's fixed work (the threshold's shuffle, the sum's shuffles, the flag) serves twice the
/// quads, and rows a few quads past a power of two (dim 36: 9) compute fewer quads of zeros.
/// Taken from [`PAIRED_STEP_FROM_LANES`] lanes a row and [`PAIRED_STEP_FROM_WARPS_PER_SM`]
/// warps per SM, paired, except for steps a little past L2 ([`UNPAIRED_STEP_UP_TO_L2_PERCENT`]);
/// the results do not depend on it.
fn paired_step(shape: Shape, device: Device) -> bool {
    let lanes = layout::group_width(shape.dim()) / 2;
    let warps = shape.batch().div_ceil(WARP_SIZE / lanes.max(1));
    let (bytes, l2) = (step_bytes(shape, true), device.l2_bytes as u64);
    let partly_in_l2 = bytes > l2 && 100 * bytes <= UNPAIRED_STEP_UP_TO_L2_PERCENT * l2;
    lanes >= PAIRED_STEP_FROM_LANES
        && warps >= PAIRED_STEP_FROM_WARPS_PER_SM * device.sms
        && !partly_in_l2
}

/// Bytes a single step moves: `x` read and `x_new` written, and the caller's noise read when
/// the caller brings it (the flags, uniforms and target are a few bytes a row).
pub(crate) fn step_bytes(shape: Shape, in_kernel: bool) -> u64 {
    let per_element = if in_kernel { 8 } else { 12 };
    shape.len() as u64 * per_element
}

/// Blocks per SM of the block-per-row steps' persistent grid before the launch asks the driver
/// how many fit ([`persistent`], [`one_wave`]).
const BLOCK_ROWS_PER_SM: u32 = 4;

/// Whether `entry` takes a persistent grid: its blocks loop over the rows, so the grid should
/// be the blocks that the SMs hold at once ([`one_wave`]), which only the driver knows.
pub fn persistent(entry: &str) -> bool {
    entry.contains("_block_rows")
}

/// The blocks of a persistent grid: `resident_blocks` per SM (the driver's occupancy for the
/// kernel and its block), no more than there are rows, at least one.
pub fn one_wave(shape: Shape, resident_blocks: u32, device: Device) -> u32 {
    (device.sms as u64 * u64::from(resident_blocks))
        .min(shape.batch() as u64)
        .max(1) as u32
}

/// The long rows' single step: a block of one warp per segment of the row
/// ([`layout::segments`]), and a persistent grid, each block taking every `blocks`-th row.
/// With in-kernel random numbers, the entry by the staging array the block needs:
/// `mh_step_block_rows_2w_v4` for rows of two segments (an array for two warps lets more
/// blocks onto an SM), `mh_step_block_rows_v4` up to four (both with the next row in registers
/// instead, for a target that asks for it), `mh_step_block_rows_8w_v4` up to eight (in dynamic
/// shared memory, [`dynamic_shared_bytes`]); with the caller's noise,
/// `mh_step_with_noise_block_rows_v4`.
fn block_rows(shape: Shape, in_kernel: bool, device: Device) -> Launch {
    let blocks = one_wave(shape, BLOCK_ROWS_PER_SM, device);
    let segments = layout::segments(shape.dim());
    Launch {
        entry: match segments {
            _ if !in_kernel => "mh_step_with_noise_block_rows_v4",
            ..=2 => "mh_step_block_rows_2w_v4",
            s if s <= STAGED_WARPS_PER_BLOCK => "mh_step_block_rows_v4",
            _ => "mh_step_block_rows_8w_v4",
        },
        blocks,
        threads: (segments * WARP_SIZE) as u32,
        tile_rows: 1,
    }
}

/// The most dynamic shared memory a launch of the entry `base` gives a block
/// ([`dynamic_shared_bytes`] for its largest block); 0 for kernels that take none.
pub fn max_dynamic_shared_bytes(base: &str) -> u32 {
    if base == "mh_step_block_rows_8w_v4" {
        layout::block_rows_staging_bytes(MAX_BLOCK_ROW_SEGMENTS) as u32
    } else {
        0
    }
}

/// Bytes of dynamic shared memory the launch gives each block: the staging array of
/// `mh_step_block_rows_8w_v4`, for its block's warps
/// ([`layout::block_rows_staging_bytes`]); 0 for every other kernel.
pub fn dynamic_shared_bytes(launch: Launch) -> u32 {
    match max_dynamic_shared_bytes(launch.entry) {
        0 => 0,
        _ => layout::block_rows_staging_bytes((launch.threads / WARP_SIZE as u32) as usize) as u32,
    }
}

/// The grid and the rows per warp tile of a single step.
///
/// A warp works through tiles of `tile_rows` consecutive rows (see the kernel crate's `step`
/// module). 32-row tiles let one Philox call (or one load) per lane fetch the uniforms of a
/// whole tile; but a small batch in 32-row tiles would leave most SMs idle, so the tile is
/// halved (down to the rows a warp holds at once, `32 / lanes` for `lanes` lanes a row) until
/// there are [`MIN_WARPS_PER_SM`] warps per SM, or [`MIN_WARPS_PER_SM_IN_L2`] when the step's
/// `bytes` fit in L2. The results do not depend on this choice.
fn tiles(shape: Shape, lanes: usize, threads: u32, bytes: u64, device: Device) -> (u32, u32) {
    let rows_at_once = WARP_SIZE / lanes;
    let min_warps_per_sm = if bytes <= device.l2_bytes as u64 {
        MIN_WARPS_PER_SM_IN_L2
    } else {
        MIN_WARPS_PER_SM
    };
    let want_warps = device.sms * min_warps_per_sm;
    let mut tile_rows = WARP_SIZE;
    while tile_rows > rows_at_once && shape.batch().div_ceil(tile_rows) < want_warps {
        tile_rows /= 2;
    }
    let warps = shape.batch().div_ceil(tile_rows) as u64;
    (blocks_for(warps, threads, device), tile_rows as u32)
}

/// The grid and tiles of the one-warp-per-row staged step (`mh_step_staged_q8_v4`): blocks of
/// [`STAGED_WARPS_PER_BLOCK`] warps (its shared array is sized for them), and tiles of about
/// [`STAGED_TILE_ELEMENTS`] elements, so that a block lives for a few rows only: short-lived
/// blocks spread the launch's last rows evenly over the SMs (`bench/NOTES.md`, "rows staged in shared memory",
/// has the tile sizes measured).
fn staged_tiles(shape: Shape, device: Device) -> (u32, u32) {
    let tile = (STAGED_TILE_ELEMENTS / shape.dim()).clamp(1, WARP_SIZE);
    // A power of two, as the kernel's tile loop requires.
    let tile_rows = 1 << tile.ilog2();
    let warps = shape.batch().div_ceil(tile_rows) as u64;
    (
        blocks_for(warps, RNG_THREADS_PER_BLOCK, device),
        tile_rows as u32,
    )
}

/// The fused K-step kernel (`mh_chain_*`) for rows of `dim` elements, with the running
/// moments if `moments`; `None` when a row does not fit in registers (more than
/// [`layout::MAX_FUSED_QUADS_PER_LANE`] quads per lane, rows over 1024 elements): such rows run
/// as single steps followed by [`stats_update`].
///
/// Batches too small to give `SPLIT_BELOW_WARPS_PER_SM` (16) warps per SM with one lane group
/// per row take the `split` kernels (rows of at most [`MAX_SPLIT_DIM`] elements, without moments):
/// each row over twice the lanes, bit-identical to the others. Batches large enough to give
/// `PAIRED_FROM_WARPS_PER_SM` (64) warps per SM with a row over half its group's lanes take
/// the `paired` kernels (rows of 9 to 256 elements, without moments), bit-identical too.
///
/// With `scaled` (per-dimension proposal scales), the `_scaled` twin of the same kernel.
pub fn fused(shape: Shape, moments: bool, scaled: bool, device: Device) -> Option<Launch> {
    let (batch, dim) = (shape.batch(), shape.dim());
    let g = layout::group_width(dim);
    let v4 = dim.is_multiple_of(layout::QUAD);
    let group_warps = batch.div_ceil(WARP_SIZE / g);
    let split = group_warps < SPLIT_BELOW_WARPS_PER_SM * device.sms;
    let quads = layout::quads_per_lane(dim);
    let paired = g >= 2
        && quads <= layout::MAX_RESIDENT_QUADS_PER_LANE
        && group_warps / 2 >= PAIRED_FROM_WARPS_PER_SM * device.sms;
    let (entry, lanes) = if paired && !moments {
        (if v4 { "mh_chain_paired_v4" } else { "mh_chain_paired" }, g / 2)
    } else if split && !moments && dim <= MAX_SPLIT_DIM {
        let entry = if v4 {
            "mh_chain_split_v4"
        } else {
            "mh_chain_split"
        };
        (entry, 2 * g)
    } else {
        let entry = match (quads, v4, moments) {
            (q, true, false) if q <= layout::MAX_RESIDENT_QUADS_PER_LANE => "mh_chain_q2_v4",
            (q, false, false) if q <= layout::MAX_RESIDENT_QUADS_PER_LANE => "mh_chain_q2",
            (q, true, true) if q <= layout::MAX_RESIDENT_QUADS_PER_LANE => "mh_chain_q2_v4_stats",
            (q, false, true) if q <= layout::MAX_RESIDENT_QUADS_PER_LANE => "mh_chain_q2_stats",
            (q, true, false) if q <= layout::MAX_FUSED_QUADS_PER_LANE => "mh_chain_q8_v4",
            (q, false, false) if q <= layout::MAX_FUSED_QUADS_PER_LANE => "mh_chain_q8",
            (q, true, true) if q <= layout::MAX_FUSED_QUADS_PER_LANE => "mh_chain_q8_v4_stats",
            (q, false, true) if q <= layout::MAX_FUSED_QUADS_PER_LANE => "mh_chain_q8_stats",
            _ => return None,
        };
        (entry, g)
    };
    let warps = batch.div_ceil(WARP_SIZE / lanes) as u64;
    Some(Launch {
        entry: if scaled { with_scales(entry) } else { entry },
        blocks: blocks_for(warps, RNG_THREADS_PER_BLOCK, device),
        threads: RNG_THREADS_PER_BLOCK,
        tile_rows: 0,
    })
}

/// The `_scaled` twin of a fused kernel: the same kernel with per-dimension proposal scales.
fn with_scales(entry: &'static str) -> &'static str {
    match entry {
        "mh_chain_q2_v4" => "mh_chain_q2_v4_scaled",
        "mh_chain_q2" => "mh_chain_q2_scaled",
        "mh_chain_q8_v4" => "mh_chain_q8_v4_scaled",
        "mh_chain_q8" => "mh_chain_q8_scaled",
        "mh_chain_q2_v4_stats" => "mh_chain_q2_v4_stats_scaled",
        "mh_chain_q2_stats" => "mh_chain_q2_stats_scaled",
        "mh_chain_q8_v4_stats" => "mh_chain_q8_v4_stats_scaled",
        "mh_chain_q8_stats" => "mh_chain_q8_stats_scaled",
        "mh_chain_split_v4" => "mh_chain_split_v4_scaled",
        "mh_chain_split" => "mh_chain_split_scaled",
        "mh_chain_paired_v4" => "mh_chain_paired_v4_scaled",
        "mh_chain_paired" => "mh_chain_paired_scaled",
        other => unreachable!("{other} is not a fused kernel"),
    }
}

/// The single step of a run whose rows are too long for [`fused`] (`mh_run_step*`): the
/// streamed in-kernel-RNG step with the non-finite counts, `_scaled` with per-dimension
/// proposal scales; tiles as [`step`]'s.
pub fn run_step(shape: Shape, scaled: bool, device: Device) -> Launch {
    let v4 = shape.dim().is_multiple_of(layout::QUAD);
    let entry = match (v4, scaled) {
        (true, false) => "mh_run_step_v4",
        (false, false) => "mh_run_step",
        (true, true) => "mh_run_step_v4_scaled",
        (false, true) => "mh_run_step_scaled",
    };
    let (blocks, tile_rows) = tiles(
        shape,
        layout::group_width(shape.dim()),
        RNG_THREADS_PER_BLOCK,
        step_bytes(shape, true),
        device,
    );
    Launch {
        entry,
        blocks,
        threads: RNG_THREADS_PER_BLOCK,
        tile_rows,
    }
}

/// The statistics kernel that follows each single step of rows too long for [`fused`]: one
/// thread per element, grid-stride.
pub fn stats_update(shape: Shape, device: Device) -> Launch {
    elementwise("mh_chain_stats_update", shape.len() as u64, device)
}

/// The per-dimension sums of the convergence diagnostics (`mh_diagnostics_sums`): warps over
/// tiles of 32 dimensions and over superchains, 64 warps per SM in all (every SM full), at
/// least one per tile (the grid is not capped: every tile needs its warps).
pub fn diagnostics_sums(shape: Shape, superchain_size: usize, device: Device) -> Launch {
    let tiles = shape.dim().div_ceil(WARP_SIZE) as u64;
    let superchains = (shape.batch() / superchain_size.max(1)).max(1) as u64;
    let per_tile = (device.sms as u64 * 64 / tiles).clamp(1, superchains);
    let warps = tiles * per_tile;
    Launch {
        entry: "mh_diagnostics_sums",
        blocks: warps.div_ceil(u64::from(THREADS_PER_BLOCK) / WARP_SIZE as u64) as u32,
        threads: THREADS_PER_BLOCK,
        tile_rows: 0,
    }
}

/// The merge of one set of running moments into another (`mh_moments_merge`): one thread per
/// element of the `[batch, dim]` moments, grid-stride.
pub fn moments_merge(shape: Shape, device: Device) -> Launch {
    elementwise("mh_moments_merge", shape.len() as u64, device)
}

/// Philox of `n` (counter, key) pairs, one thread each (known-answer tests on the GPU).
#[cfg(any(test, feature = "testing"))]
pub fn philox_many(n: u64, device: Device) -> Launch {
    elementwise("philox4x32_10_many", n, device)
}

/// The Box–Muller transform of `n` word pairs, one thread each (the normals' accuracy test on
/// the GPU).
#[cfg(any(test, feature = "testing"))]
pub fn box_muller_many(n: u64, device: Device) -> Launch {
    elementwise("box_muller_many", n, device)
}

fn elementwise(entry: &'static str, n: u64, device: Device) -> Launch {
    Launch {
        entry,
        blocks: n
            .div_ceil(u64::from(THREADS_PER_BLOCK))
            .clamp(1, max_blocks(device)) as u32,
        threads: THREADS_PER_BLOCK,
        tile_rows: 0,
    }
}

#[cfg(test)]
mod tests;
