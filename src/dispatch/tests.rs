//! The dispatcher's choices, checked without a GPU: every shape's kernel and grid, and every
//! name it can return against the PTX modules' entry points.

use std::collections::BTreeSet;

use super::*;
use crate::{TargetKind, ptx};
use fused_mh_kernel::abi::ENTRY_BASES;
use fused_mh_kernel::model::ModelKind;

const IN_KERNEL: Draws<()> = Draws::Philox { seed: 0, step: 0 };
const CALLER: Draws<()> = Draws::Caller(());

const H200: Device = Device {
    sms: 132,
    staged: true,
    l2_bytes: 50 << 20,
};
const PORTABLE: Device = Device {
    staged: false,
    ..H200
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
        [64, 257, 1024, 1025, 1028, 4096, 8192, 8196].map(noise),
        [
            "mh_step_with_noise_q2_v4",
            "mh_step_with_noise_q8",
            "mh_step_with_noise_q8_v4",
            "mh_step_with_noise",
            "mh_step_with_noise_block_rows_v4",
            "mh_step_with_noise_block_rows_v4",
            "mh_step_with_noise_block_rows_v4",
            "mh_step_with_noise_streaming_v4"
        ]
    );
    // Staged where the module has it: whole quads, up to 1024 elements.
    let staged = |dim| step(shape(1 << 20, dim), &IN_KERNEL, H200).entry;
    assert_eq!(
        [4, 256, 260, 1024, 1028, 4096, 4100, 8192, 8196, 33, 257, 1030].map(staged),
        [
            "mh_step_staged_q2_v4",
            "mh_step_staged_paired_v4",
            "mh_step_staged_q8_v4",
            "mh_step_staged_q8_v4",
            "mh_step_block_rows_2w_v4",
            "mh_step_block_rows_v4",
            "mh_step_block_rows_8w_v4",
            "mh_step_block_rows_8w_v4",
            "mh_step_streaming_v4",
            "mh_step_q2",
            "mh_step",
            "mh_step"
        ]
    );
    // The longer staged step assumes one warp per row.
    assert_eq!(layout::group_width(260), WARP_SIZE);
}

/// The block-per-row steps: a warp per segment of the row, a persistent grid of a few blocks
/// per SM (fewer for a small batch), rows not tiled.
#[test]
fn long_rows_take_a_block_each() {
    for (batch, dim, warps, blocks, entry) in [
        (1 << 20, 1028, 2, 4 * 132, "mh_step_block_rows_2w_v4"),
        (16384, 4096, 4, 4 * 132, "mh_step_block_rows_v4"),
        (5, 2052, 3, 5, "mh_step_block_rows_v4"),
        (16384, 5000, 5, 4 * 132, "mh_step_block_rows_8w_v4"),
        (300, 8192, 8, 300, "mh_step_block_rows_8w_v4"),
    ] {
        let launch = step(shape(batch, dim), &IN_KERNEL, H200);
        assert_eq!(launch.entry, entry);
        assert_eq!((launch.threads, launch.blocks, launch.tile_rows), (warps * 32, blocks, 1));
        // Only the 8-warp kernel stages in dynamic shared memory: 8 KB per warp.
        let dynamic = if entry.contains("_8w") { warps * 8192 } else { 0 };
        assert_eq!(dynamic_shared_bytes(launch), dynamic);
        let noise = step(shape(batch, dim), &CALLER, PORTABLE);
        assert_eq!((noise.threads, noise.blocks), (warps * 32, blocks));
        assert_eq!(dynamic_shared_bytes(noise), 0);
    }
}

/// The paired staged step: rows of 33 to 256 elements in whole quads (4 lanes a row or more,
/// paired), batches of 16 warps per SM paired or more, except steps a little past L2; the tiles
/// hold the rows a paired warp holds at once.
#[test]
fn large_batches_pair_the_staged_rows() {
    let entry = |batch, dim| step(shape(batch, dim), &IN_KERNEL, H200).entry;
    assert_eq!(entry(1 << 20, 16), "mh_step_staged_q2_v4");
    assert_eq!(entry(1 << 20, 32), "mh_step_staged_q2_v4");
    assert_eq!(entry(1 << 20, 36), "mh_step_staged_paired_v4");
    assert_eq!(entry(1 << 20, 34), "mh_step_q2");
    // 16 warps per SM on 132 SMs are 2112 warps: 8 rows a warp at dim 64, so 16889 rows. A step
    // whose bytes fit in L2 (50 MiB on the H200: 102400 rows of 64) stores evict-first.
    assert_eq!(entry(16889, 64), "mh_step_staged_paired_evict_first_v4");
    assert_eq!(entry(65536, 64), "mh_step_staged_paired_evict_first_v4");
    assert_eq!(entry(102400, 64), "mh_step_staged_paired_evict_first_v4");
    assert_eq!(entry(102401, 64), "mh_step_staged_q2_v4");
    assert_eq!(entry(16888, 64), "mh_step_staged_q2_v4");
    // A little past L2 (50 MiB on the H200): 64 MiB keep `q2`, 70 MiB (143360 x 64), 75 MiB
    // (153600 x 64) and 80 MiB (81920 x 128) pair; the band ends at 65 MiB, 133120 x 64.
    assert_eq!(entry(131072, 64), "mh_step_staged_q2_v4");
    assert_eq!(entry(65536, 128), "mh_step_staged_q2_v4");
    assert_eq!(entry(32768, 256), "mh_step_staged_q2_v4");
    assert_eq!(entry(81920, 128), "mh_step_staged_paired_v4");
    assert_eq!(entry(133120, 64), "mh_step_staged_q2_v4");
    assert_eq!(entry(133128, 64), "mh_step_staged_paired_v4");
    assert_eq!(entry(143360, 64), "mh_step_staged_paired_v4");
    assert_eq!(entry(153600, 64), "mh_step_staged_paired_v4");
    assert_eq!(step(shape(1 << 20, 64), &IN_KERNEL, PORTABLE).entry, "mh_step_q2_v4");
    assert_eq!(step(shape(1 << 20, 64), &CALLER, H200).entry, "mh_step_with_noise_q2_v4");
    // (1M, 256): 16 lanes a row, 2 rows a warp at once, 32-row tiles.
    let launch = step(shape(1 << 20, 256), &IN_KERNEL, H200);
    assert_eq!((launch.tile_rows, launch.blocks), (32, 4224));
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
fn small_batches_in_l2_take_longer_tiles() {
    let at = |batch, dim, draws: &Draws<()>, device| {
        let launch = step(shape(batch, dim), draws, device);
        (launch.tile_rows, launch.blocks)
    };
    // (65536, 64) moves 33.6 MB (50.3 MB with the caller's noise), within the H200's 50 MiB of
    // L2: 32-row tiles, 2048 warps (15.5 per SM), in blocks of 4 (or 8 with caller noise).
    assert_eq!(at(65536, 64, &IN_KERNEL, H200), (32, 512));
    assert_eq!(at(65536, 64, &CALLER, H200), (32, 256));
    // With 16 MiB of L2 the same batch streams from DRAM: tiles of 8 rows, 8192 warps, so
    // that 32 warps per SM keep their loads in flight.
    let small_l2 = Device {
        l2_bytes: 16 << 20,
        ..H200
    };
    assert_eq!(at(65536, 64, &IN_KERNEL, small_l2), (8, 2048));
    // Past L2 on the H200 too: (65536, 256) moves 134 MB, (131072, 64) with noise 101 MB.
    assert_eq!(at(65536, 256, &IN_KERNEL, H200), (8, 2048));
    assert_eq!(at(131072, 64, &CALLER, H200), (16, 1024));
    // (32768, 64), paired (8 rows a warp at once): 16-row tiles give 2048 warps.
    assert_eq!(at(32768, 64, &IN_KERNEL, H200), (16, 512));
}

#[test]
fn lessons_hold_their_rows() {
    let at = |n: usize, dim| lesson(LESSONS[n], shape(1 << 20, dim), H200);
    // Lessons 1 to 3 take any row; 4 rows of up to 1024 elements; 5 to 9 in whole quads too.
    assert!(at(0, 33).is_some() && at(1, 4097).is_some() && at(2, 4097).is_some());
    assert!(at(3, 1023).is_some() && at(3, 1025).is_none());
    assert!(at(4, 1024).is_some() && at(4, 1023).is_none() && at(5, 33).is_none());
    // One warp per row: 2^20 warps in blocks of 4, capped at 32 blocks per SM.
    assert_eq!(at(1, 64).map(|l| (l.blocks, l.threads)), Some((4224, 128)));
    assert_eq!(at(2, 64).map(|l| l.entry), Some("lesson3_lane_groups"));
    assert_eq!(at(3, 33).map(|l| l.entry), Some("lesson4_row_in_registers_q2"));
    assert_eq!(at(5, 257 * 4).map(|l| l.entry), None);
    assert_eq!(at(5, 260).map(|l| l.entry), Some("lesson6_loads_in_flight_q8"));
    // Lessons 8 and 9 take the production step's tiles: 32 rows for 2^20 chains, fewer for a
    // small batch, so that every SM still has 32 warps (8192 x 1024 moves 67 MB, past L2).
    let tiles = |n: usize, batch, dim| lesson(LESSONS[n], shape(batch, dim), H200);
    let (big, small) = (tiles(7, 1 << 20, 64), tiles(8, 8192, 1024));
    assert_eq!(big.map(|l| (l.entry, l.tile_rows)), Some(("lesson8_tile_uniforms_q2", 32)));
    assert_eq!(small.map(|l| (l.entry, l.tile_rows)), Some(("lesson9_threshold_q8", 1)));
    assert!(tiles(7, 100, 1023).is_none() && tiles(8, 100, 1028).is_none());
    // The long rows' lesson: 1025 to 8192 elements in whole quads, a block of a warp per
    // segment for each row (2^20 rows: capped at 32 blocks per SM).
    let long = |dim| lesson(LONG_ROW_LESSON, shape(1 << 20, dim), H200);
    assert!(long(1024).is_none() && long(4098).is_none() && long(8196).is_none());
    assert_eq!(long(4096).map(|l| (l.blocks, l.threads)), Some((4224, 128)));
    assert_eq!(long(8192).map(|l| l.threads), Some(256));
    let small = lesson(LONG_ROW_LESSON, shape(100, 1028), H200);
    assert_eq!(small.map(|l| (l.blocks, l.threads)), Some((100, 64)));
    let numbered = LESSONS.iter().chain([&FUSED_LESSON, &LONG_ROW_LESSON, &FAST_LOG_LESSON]);
    for (i, l) in numbered.enumerate() {
        // 1 to 9, then 11 and 13 (each followed by its production row), then 15.
        let n = match i.checked_sub(LESSONS.len()) {
            None => i + 1,
            Some(k) => LESSONS.len() + 2 + 2 * k,
        };
        assert_eq!(l.number as usize, n);
        let prefix = format!("lesson{n}_");
        assert!(l.file.ends_with(".rs") && l.entries.iter().all(|e| e.starts_with(&prefix)));
    }
}

#[test]
fn fused_kernels_hold_rows_up_to_1024() {
    let big = |dim, moments| fused(shape(1 << 20, dim), moments, false, H200).map(|l| l.entry);
    // Large batches pair a row's lanes (rows of 9 to 256 elements, without moments).
    assert_eq!(big(64, false), Some("mh_chain_paired_v4"));
    assert_eq!(big(33, false), Some("mh_chain_paired"));
    assert_eq!(big(256, false), Some("mh_chain_paired_v4"));
    assert_eq!(big(8, false), Some("mh_chain_q2_v4"));
    assert_eq!(big(64, true), Some("mh_chain_q2_v4_stats"));
    // From 64 warps per SM paired: rows of 64 over 4 lanes, 8 a warp, 132 x 64 x 8 rows.
    let at = |batch| fused(shape(batch, 64), false, false, H200).expect("fits");
    assert_eq!(at(132 * 64 * 8).entry, "mh_chain_paired_v4");
    assert_eq!(at(132 * 64 * 8).blocks, 132 * 64 / 4);
    assert_eq!(at(132 * 64 * 8 - 8).entry, "mh_chain_q2_v4");
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
    let paired = fused(shape(1 << 20, 64), false, true, H200).expect("fits");
    assert_eq!(paired.entry, "mh_chain_paired_v4_scaled");
    let scaled = |dim| fused(shape(1 << 20, dim), true, true, H200).map(|l| l.entry);
    assert_eq!(scaled(33), Some("mh_chain_q2_stats_scaled"));
    assert_eq!(scaled(1024), Some("mh_chain_q8_v4_stats_scaled"));
    // Longer rows: the run's streamed single step.
    let long = |dim, scaled| run_step(shape(4096, dim), scaled, H200).entry;
    assert_eq!(long(1028, false), "mh_run_step_v4");
    assert_eq!(long(1025, true), "mh_run_step_scaled");
}

/// The model kernel's grid is one wave of warps with equal shares of the chains: 16384 chains
/// on 132 SMs of 6 resident blocks (3168 warps) take 6 chains a warp, so 2731 warps (683
/// blocks, not the 792 that would leave some warps 5 chains and others 6 with more blocks
/// than the SMs hold); few chains take a warp each; the window sums cap long states.
#[test]
fn model_grids_are_one_balanced_wave() {
    let kind = ModelKind::LogisticRegression;
    let blocks = |chains, dim, resident| model_steps(kind, chains, dim, H200, resident).blocks;
    assert_eq!(blocks(16384, 2, 6), 2731u32.div_ceil(4));
    assert!(blocks(16384, 2, 6) <= 132 * 6);
    assert_eq!(blocks(3168, 2, 6), 792);
    assert_eq!(blocks(100, 2, 6), 25);
    assert_eq!(blocks(1, 2, 6), 1);
    // dim 256: 8 * (256 + 2 * 256^2) bytes a region, 255 regions in 256 MiB: 64 blocks.
    assert_eq!(blocks(16384, 256, 6), 64);
    assert_eq!(model_steps(kind, 16384, 2, H200, 6).threads, 128);
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
    let device = Device { staged, ..H200 };
    let dims = (1..=1100).chain([4096, 4097, 8192, 8196]);
    let mut names = BTreeSet::new();
    for dim in dims {
        // 65536 rows: a batch that pairs and fits in L2 (the evict-first paired step).
        for batch in [1, 4096, 65536, 1 << 20] {
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
    names.insert(box_muller_many(1, device).entry);
    for &kind in ModelKind::ALL {
        names.insert(model_steps(kind, 1024, 8, device, 6).entry);
    }
    names.insert(model_sums_reduce(8, device).entry);
    let lessons = LESSONS
        .iter()
        .chain([&FUSED_LESSON, &LONG_ROW_LESSON, &FAST_LOG_LESSON]);
    names.extend(lessons.flat_map(|l| l.entries));
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
