//! The row layout: how a row of `dim` elements is cut into quads, how many lanes of a warp work
//! on it, and every limit on how many quads a lane holds. Pure functions of `dim`, the same on
//! the GPU, in the CPU reference and in the host's dispatcher.
//!
//! - A row is cut into *quads* of 4 consecutive elements (the last one may be partial): one
//!   Philox call gives the 4 normals of a quad (see [`crate::rng`]).
//! - A row is worked on by a *group* of `G` = [`group_width`]`(dim)` consecutive lanes of a
//!   warp (`G` a power of two, 1 to 32: about two quads per lane, so a warp holds `32 / G`
//!   rows at once and no lane idles on short rows); lane `j` of the group owns quads
//!   `j, j + G, j + 2G, ...`, so neighbouring lanes read neighbouring 16-byte quads.

/// Threads in a warp: the unit that executes in lock step.
pub const WARP_SIZE: usize = 32;

/// Quads each lane of a group should own: few enough that short rows still spread over
/// several lanes (latency), enough that a warp holds several rows (no idle lanes).
pub const QUADS_PER_LANE_TARGET: usize = 2;

/// The most quads a lane keeps in registers with random numbers drawn in the kernel: with 32
/// lanes, rows up to 32 x 2 x 4 = 256 elements stay in registers between computing the
/// proposal and writing it. Longer rows are streamed (the proposal written at once, and `x`
/// written back over it if rejected).
///
/// Measured on the H200 at (65536, 1024): keeping 8 quads per lane there took 154 to 248
/// registers with Philox and Box–Muller in flight and ran at 30 to 59 % of the copy bandwidth;
/// streaming runs at 68 %.
pub const MAX_RESIDENT_QUADS_PER_LANE: usize = 2;

/// The most quads a lane keeps in registers when the random numbers come from the caller
/// (rows up to 1024 elements). Without Philox in flight the registers suffice, and streaming's
/// second write of rejected rows costs more: measured on the H200 at (65536, 1024), 96 % of the
/// copy bandwidth register-resident against 65 % streamed.
pub const MAX_RESIDENT_QUADS_CALLER_NOISE: usize = 8;

/// Quads per lane the fused K-step kernel keeps in registers at most (rows up to
/// `8 * 4 * 32 = 1024` elements); longer rows run as single steps.
pub const MAX_FUSED_QUADS_PER_LANE: usize = 8;

/// Quads per lane of the paired fused kernels (`mh_chain_paired*`): two group lanes' quads
/// (rows up to 256 elements, two lanes' [`MAX_RESIDENT_QUADS_PER_LANE`] each).
pub const PAIRED_QUADS_PER_LANE: usize = 2 * MAX_RESIDENT_QUADS_PER_LANE;

/// Lanes per row, `G`: the power of two (1 to 32) that gives each lane about
/// [`QUADS_PER_LANE_TARGET`] quads. Depends on `dim` alone, so the order of the sums, and hence
/// the exact bits of `log alpha`, depend on `dim` alone (not on the batch or the launch).
///
/// Examples: dim 1..=8 -> 1, dim 64 -> 8, dim 256 -> 32, dim 4096 -> 32.
#[inline(always)]
pub fn group_width(dim: usize) -> usize {
    quads_per_row(dim)
        .div_ceil(QUADS_PER_LANE_TARGET)
        .next_power_of_two()
        .min(WARP_SIZE)
}

/// The most quads any lane of a row's group owns: `ceil(quads / G)`.
#[inline(always)]
pub fn quads_per_lane(dim: usize) -> usize {
    quads_per_row(dim).div_ceil(group_width(dim))
}

/// Elements per quad: one Philox call (128 bits) gives four normals.
pub const QUAD: usize = 4;

/// Number of quads in a row of `dim` elements.
#[inline(always)]
pub fn quads_per_row(dim: usize) -> usize {
    dim.div_ceil(QUAD)
}

/// How many elements of quad `quad` lie inside a row of `dim` elements: 4, except for a last
/// partial quad.
#[inline(always)]
pub fn valid_in_quad(dim: usize, quad: usize) -> usize {
    let rest = dim - QUAD * quad;
    if rest < QUAD { rest } else { QUAD }
}

/// Quads per lane the longer staged step holds (rows of up to `8 * 32` quads: 1024 elements).
pub const MAX_STAGED_QUADS_PER_LANE: usize = 8;

/// Warps per block of the staged steps: their shared array holds two rows for each, so the
/// host must launch them with exactly `32 *` this many threads per block.
pub const STAGED_WARPS_PER_BLOCK: usize = 4;

/// Quads per *segment* of a long row: a warp's worth at 8 quads per lane (1024 elements). A
/// row's terms are summed segment by segment: within a segment, lane by lane and then the
/// group's butterfly (as every row of at most 1024 elements is, in one segment); then the
/// segments' sums in order, the first plus the second, plus the third, and so on. Long rows
/// can then be split over a block, a warp per segment (`gpu::block_rows`), and still give the
/// bits that one warp streaming the row and the CPU reference give.
pub const SEGMENT_QUADS: usize = MAX_STAGED_QUADS_PER_LANE * WARP_SIZE;

/// The segments of a row of `dim` elements (at least 1).
#[inline(always)]
pub fn segments(dim: usize) -> usize {
    quads_per_row(dim).div_ceil(SEGMENT_QUADS).max(1)
}

/// The most segments a row has for the block-per-row step: rows of up to 8192 elements, a
/// block of one warp per segment (at most 8 warps, so that the segments' sums fit two quads
/// of shared memory). Rows of up to [`STAGED_WARPS_PER_BLOCK`] segments with in-kernel random
/// numbers stage the next row in a shared array the kernel declares (or hold it in registers,
/// for a target that asks for it); longer ones need more than a kernel may declare, and stage
/// in the launch's dynamic shared memory ([`block_rows_staging_bytes`]).
pub const MAX_BLOCK_ROW_SEGMENTS: usize = 2 * STAGED_WARPS_PER_BLOCK;

/// Bytes of the shared staging array of a block-per-row step with in-kernel random numbers and
/// `warps` warps: each warp's current segment and the next row's, 16 bytes per quad.
pub const fn block_rows_staging_bytes(warps: usize) -> usize {
    warps * 2 * SEGMENT_QUADS * 16
}

/// The longest rows the `split` fused kernels take: groups of at most 16 lanes
/// ([`group_width`]), so that twice the lanes still fit in a warp.
pub const MAX_SPLIT_DIM: usize = 128;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_give_each_lane_about_two_quads() {
        for (dim, g) in [
            (1, 1),
            (8, 1),
            (9, 2),
            (33, 8),
            (64, 8),
            (100, 16),
            (256, 32),
            (1024, 32),
            (4097, 32),
        ] {
            assert_eq!(group_width(dim), g, "dim {dim}");
        }
        // Rows up to 256 elements fit the register-resident path; 257 does not.
        assert!(quads_per_lane(256) <= MAX_RESIDENT_QUADS_PER_LANE);
        assert!(quads_per_lane(257) > MAX_RESIDENT_QUADS_PER_LANE);
        for dim in 1..=256 {
            assert!(
                quads_per_lane(dim) <= MAX_RESIDENT_QUADS_PER_LANE,
                "dim {dim}"
            );
        }
    }

    #[test]
    fn segments_are_a_warp_at_eight_quads_per_lane() {
        for (dim, n) in [
            (1, 1),
            (1024, 1),
            (1025, 2),
            (2048, 2),
            (2052, 3),
            (4096, 4),
            (4097, 5),
            (8192, 8),
            (8196, 9),
        ] {
            assert_eq!(segments(dim), n, "dim {dim}");
        }
        // A block-per-row warp stages two segments of 4 KB.
        assert_eq!(block_rows_staging_bytes(1), 2 * 1024 * 4);
        assert!(segments(8192) <= MAX_BLOCK_ROW_SEGMENTS);
    }

    #[test]
    fn quads_cover_a_row_exactly() {
        for dim in [1usize, 3, 4, 5, 33, 64, 4097] {
            let n = quads_per_row(dim);
            let covered: usize = (0..n).map(|q| valid_in_quad(dim, q)).sum();
            assert_eq!(covered, dim, "dim {dim}");
            assert!((0..n).all(|q| valid_in_quad(dim, q) >= 1));
        }
    }
}
