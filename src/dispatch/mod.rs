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
use fused_mh_kernel::layout::{MAX_SPLIT_DIM, MAX_STAGED_QUADS_PER_LANE, STAGED_WARPS_PER_BLOCK};

use crate::problem::Draws;
use crate::Shape;

#[cfg(any(test, feature = "testing"))]
mod lessons;
#[cfg(any(test, feature = "testing"))]
pub use lessons::{LESSONS, Lesson, lesson};

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
/// (see [`tiles`]).
const MIN_WARPS_PER_SM: usize = 32;
/// Elements per warp tile of the staged one-warp-per-row step (see [`staged_tiles`]).
const STAGED_TILE_ELEMENTS: usize = 2048;
/// Below this many warps per SM (four per scheduler) with one lane group per row, the fused
/// kernel spreads each row over twice the lanes (`mh_chain_split*`): the step is a chain of
/// dependent latencies (Philox rounds, shuffles), and two warps per scheduler cannot hide them
/// (`bench/NOTES.md`, fused F6, has ncu's figures). The results do not depend on it.
const SPLIT_BELOW_WARPS_PER_SM: usize = 16;

/// What the choice depends on about the GPU.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Device {
    /// Streaming multiprocessors.
    pub sms: usize,
    /// The loaded PTX module has the staged steps (`cp.async`: the `sm_80` module and newer).
    pub staged: bool,
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
///   quads are *staged* instead: the next row travels into shared memory by `cp.async`.
pub fn step<N>(shape: Shape, draws: &Draws<N>, device: Device) -> Launch {
    let in_kernel = matches!(draws, Draws::Philox { .. });
    let dim = shape.dim();
    let quads = layout::quads_per_lane(dim);
    let v4 = dim.is_multiple_of(layout::QUAD);
    let resident = quads <= layout::MAX_RESIDENT_QUADS_PER_LANE;
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
    let (blocks, tile_rows) = tiles(shape, threads, device);
    Launch {
        entry,
        blocks,
        threads,
        tile_rows,
    }
}

/// The grid and the rows per warp tile of a single step.
///
/// A warp works through tiles of `tile_rows` consecutive rows (see the kernel crate's `step`
/// module). 32-row tiles let one Philox call (or one load) per lane fetch the uniforms of a
/// whole tile; but a small batch in 32-row tiles would leave most SMs idle, so the tile is
/// halved (down to the rows a warp holds at once, `32 / G`) until there are
/// [`MIN_WARPS_PER_SM`] warps per SM. The results do not depend on this choice.
fn tiles(shape: Shape, threads: u32, device: Device) -> (u32, u32) {
    let rows_at_once = WARP_SIZE / layout::group_width(shape.dim());
    let want_warps = device.sms * MIN_WARPS_PER_SM;
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
/// blocks spread the launch's last rows evenly over the SMs (`bench/NOTES.md`, session 5, S6,
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
/// each row over twice the lanes, bit-identical to the others.
///
/// With `scaled` (per-dimension proposal scales), the `_scaled` twin of the same kernel.
pub fn fused(shape: Shape, moments: bool, scaled: bool, device: Device) -> Option<Launch> {
    let (batch, dim) = (shape.batch(), shape.dim());
    let g = layout::group_width(dim);
    let v4 = dim.is_multiple_of(layout::QUAD);
    let group_warps = batch.div_ceil(WARP_SIZE / g);
    let split = group_warps < SPLIT_BELOW_WARPS_PER_SM * device.sms;
    let quads = layout::quads_per_lane(dim);
    let (entry, lanes) = if split && !moments && dim <= MAX_SPLIT_DIM {
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
    let (blocks, tile_rows) = tiles(shape, RNG_THREADS_PER_BLOCK, device);
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
mod tests {
    use std::collections::BTreeSet;

    use super::*;
    use crate::{TargetKind, ptx};
    use fused_mh_kernel::abi::ENTRY_BASES;

    const IN_KERNEL: Draws<()> = Draws::Philox { seed: 0, step: 0 };
    const CALLER: Draws<()> = Draws::Caller(());

    const H200: Device = Device {
        sms: 132,
        staged: true,
    };
    const PORTABLE: Device = Device {
        sms: 132,
        staged: false,
    };

    fn shape(batch: usize, dim: usize) -> Shape {
        Shape::new(batch, dim).expect("valid shape")
    }

    #[test]
    fn single_steps_take_the_kernel_that_holds_the_row() {
        let rng = |dim| step(shape(1 << 20, dim), &IN_KERNEL, PORTABLE).entry;
        let names = [1, 64, 256, 257, 1024, 4096].map(rng);
        assert_eq!(
            names,
            [
                "mh_step_q2",
                "mh_step_q2_v4",
                "mh_step_q2_v4",
                "mh_step",
                "mh_step_streaming_v4",
                "mh_step_streaming_v4"
            ]
        );
        let noise = |dim| step(shape(1 << 20, dim), &CALLER, PORTABLE).entry;
        assert_eq!(
            [64, 257, 1024, 1025].map(noise),
            [
                "mh_step_with_noise_q2_v4",
                "mh_step_with_noise_q8",
                "mh_step_with_noise_q8_v4",
                "mh_step_with_noise"
            ]
        );
        // Staged where the module has it: whole quads, up to 1024 elements.
        let staged = |dim| step(shape(1 << 20, dim), &IN_KERNEL, H200).entry;
        assert_eq!(
            [4, 256, 260, 1024, 1028, 33, 257].map(staged),
            [
                "mh_step_staged_q2_v4",
                "mh_step_staged_q2_v4",
                "mh_step_staged_q8_v4",
                "mh_step_staged_q8_v4",
                "mh_step_streaming_v4",
                "mh_step_q2",
                "mh_step"
            ]
        );
        // The longer staged step assumes one warp per row.
        assert_eq!(layout::group_width(260), WARP_SIZE);
    }

    #[test]
    fn tiles_shrink_for_small_batches() {
        // (1M, 64) fills the GPU with 32-row tiles: 32768 warps, 8192 blocks of 4, capped.
        let big = step(shape(1 << 20, 64), &IN_KERNEL, PORTABLE);
        assert_eq!((big.tile_rows, big.blocks, big.threads), (32, 4224, 128));
        // 4096 rows of 64: halved down to the 4 rows a warp holds at once.
        let small = step(shape(4096, 64), &CALLER, PORTABLE);
        assert_eq!(
            (small.tile_rows, small.blocks, small.threads),
            (4, 128, 256)
        );
        // The staged one-warp-per-row step: tiles of 2048 elements, 2 rows at dim 1024.
        let staged = step(shape(65536, 1024), &IN_KERNEL, H200);
        assert_eq!((staged.tile_rows, staged.blocks), (2, 4224));
        assert_eq!(step(shape(1, 1), &IN_KERNEL, H200).blocks, 1);
    }

    #[test]
    fn lessons_hold_their_rows() {
        let at = |n: usize, dim| lesson(LESSONS[n], shape(1 << 20, dim), H200);
        assert!(at(0, 33).is_some() && at(1, 4097).is_some());
        assert!(at(2, 1024).is_some() && at(3, 64).is_some());
        assert!(at(2, 1028).is_none() && at(3, 33).is_none());
        // One warp per row: 2^20 warps in blocks of 4, capped at 32 blocks per SM.
        assert_eq!(at(1, 64).map(|l| (l.blocks, l.threads)), Some((4224, 128)));
        assert_eq!(at(2, 64).map(|l| l.entry), Some("lesson3_lane_groups_q2"));
        assert_eq!(at(3, 257 * 4).map(|l| l.entry), None);
        assert_eq!(
            at(3, 260).map(|l| l.entry),
            Some("lesson4_loads_in_flight_q8")
        );
        for (i, l) in LESSONS.iter().enumerate() {
            assert_eq!(l.number as usize, i + 1);
            let prefix = format!("lesson{}", i + 1);
            assert!(l.file.ends_with(".rs") && l.entries.iter().all(|e| e.starts_with(&prefix)));
        }
    }

    #[test]
    fn fused_kernels_hold_rows_up_to_1024() {
        let big = |dim, moments| fused(shape(1 << 20, dim), moments, false, H200).map(|l| l.entry);
        assert_eq!(big(64, false), Some("mh_chain_q2_v4"));
        assert_eq!(big(33, false), Some("mh_chain_q2"));
        assert_eq!(big(256, true), Some("mh_chain_q2_v4_stats"));
        assert_eq!(big(257, false), Some("mh_chain_q8"));
        assert_eq!(big(1024, true), Some("mh_chain_q8_v4_stats"));
        assert_eq!(big(1025, false), None);
        // Small batches split rows of up to 128 elements over twice the lanes, without moments.
        let small = |dim, moments| fused(shape(4096, dim), moments, false, H200).map(|l| l.entry);
        assert_eq!(small(64, false), Some("mh_chain_split_v4"));
        assert_eq!(small(1, false), Some("mh_chain_split"));
        assert_eq!(small(128, false), Some("mh_chain_split_v4"));
        assert_eq!(small(129, false), Some("mh_chain_q2"));
        assert_eq!(small(64, true), Some("mh_chain_q2_v4_stats"));
        assert!(2 * layout::group_width(MAX_SPLIT_DIM) <= WARP_SIZE);
        // 4096 rows of 64 split: 16 lanes per row, 2048 warps, 512 blocks of 4 warps.
        let split = fused(shape(4096, 64), false, false, H200).expect("fits");
        assert_eq!((split.blocks, split.threads), (512, 128));
        // Scales take the same kernel's `_scaled` twin, in the same grid.
        let scaled = fused(shape(4096, 64), false, true, H200).expect("fits");
        assert_eq!(scaled.entry, "mh_chain_split_v4_scaled");
        assert_eq!((scaled.blocks, scaled.threads), (512, 128));
        let scaled = |dim| fused(shape(1 << 20, dim), true, true, H200).map(|l| l.entry);
        assert_eq!(scaled(33), Some("mh_chain_q2_stats_scaled"));
        assert_eq!(scaled(1024), Some("mh_chain_q8_v4_stats_scaled"));
        // Longer rows: the run's streamed single step.
        let long = |dim, scaled| run_step(shape(4096, dim), scaled, H200).entry;
        assert_eq!(long(1028, false), "mh_run_step_v4");
        assert_eq!(long(1025, true), "mh_run_step_scaled");
    }

    /// Every exported name the dispatch can lead to, for a device with or without the staged
    /// steps: a target kernel's name for every target (through the kernel crate's table).
    fn every_name(staged: bool) -> BTreeSet<&'static str> {
        let mut exported = BTreeSet::new();
        for name in every_dispatched_name(staged) {
            match ENTRY_BASES.iter().position(|base| *base == name) {
                Some(i) => exported.extend(TargetKind::ALL.iter().map(|k| k.entry_points()[i])),
                None => {
                    exported.insert(name);
                }
            }
        }
        exported
    }

    /// Every name the dispatch can return.
    fn every_dispatched_name(staged: bool) -> BTreeSet<&'static str> {
        let device = Device { sms: 132, staged };
        let dims = (1..=1100).chain([4096, 4097]);
        let mut names = BTreeSet::new();
        for dim in dims {
            for batch in [1, 4096, 1 << 20] {
                let s = shape(batch, dim);
                for r in [IN_KERNEL, CALLER] {
                    names.insert(step(s, &r, device).entry);
                }
                for (moments, scaled) in
                    [(false, false), (true, false), (false, true), (true, true)]
                {
                    names.extend(fused(s, moments, scaled, device).map(|l| l.entry));
                    if dim > 1024 {
                        names.insert(run_step(s, scaled, device).entry);
                    }
                }
                names.insert(stats_update(s, device).entry);
                names.insert(diagnostics_sums(s, 1, device).entry);
                names.insert(moments_merge(s, device).entry);
            }
        }
        names.insert(philox_many(1, device).entry);
        names.extend(LESSONS.iter().flat_map(|l| l.entries));
        names
    }

    fn entries(ptx: &str) -> BTreeSet<&str> {
        ptx.split(".entry ")
            .skip(1)
            .map(|rest| rest.split('(').next().unwrap_or_default())
            .collect()
    }

    /// Every name the dispatch returns for a module is one of its entry points, and every entry
    /// point of either module is returned for some problem: none is compiled for nothing.
    #[test]
    fn names_are_the_modules_entry_points() {
        let [portable, newer] = ptx::MODULES.map(|m| entries(m.text));
        let (for_portable, for_newer) = (every_name(false), every_name(true));
        assert!(!portable.is_empty());
        for name in &for_portable {
            assert!(
                portable.contains(name),
                "{name} is not in the portable module"
            );
        }
        for name in &for_newer {
            assert!(newer.contains(name), "{name} is not in the newer module");
        }
        let launched: BTreeSet<&str> = for_portable.union(&for_newer).copied().collect();
        let compiled: BTreeSet<&str> = portable.union(&newer).copied().collect();
        assert_eq!(
            compiled, launched,
            "entry points that nothing launches, or missing ones"
        );
        // The staged steps only where cp.async exists.
        assert!(!portable.iter().any(|n| n.contains("staged")));
        assert!(newer.contains("mh_step_staged_q8_v4_gaussian"));
        // Every target has every target kernel, in the table's order.
        for kind in TargetKind::ALL {
            assert_eq!(kind.entry_points().len(), ENTRY_BASES.len());
            for (base, name) in ENTRY_BASES.iter().zip(kind.entry_points()) {
                assert!(name.starts_with(base) && newer.contains(name), "{name}");
            }
        }
    }
}
