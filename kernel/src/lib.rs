//! The device crate of fused-mh: one random-walk Metropolis–Hastings step for many independent
//! chains, written once and compiled twice.
//!
//! - For `nvptx64-nvidia-cuda`, the root `build.rs` compiles this crate to PTX with rustc's own
//!   NVPTX backend; the entry points ([`ENTRY_POINTS`]: `mh_step_*` and
//!   `mh_step_with_noise_*`, one pair per [`Variant`]) live in `gpu`, the one module that exists
//!   only on the GPU.
//! - For the host, it is an ordinary `no_std` library: the host crate's CPU reference and the
//!   unit tests call the very same Philox, normal transform and log-density code.
//!
//! Modules, in the order a reader meets them:
//! [`philox`] (the random bits) → [`rng`] (which bits belong to which (row, step, element), and
//! how they become uniforms and normals) → [`math`] (ln/sin/cos/sqrt per target) → [`mh`] (the
//! step of one row) → `gpu` (the device layer in `gpu/device/`, then the kernels: the single
//! step, the fused K-step kernel, the statistics).
#![no_std]
// `core_float_math`: `core::f32::math::mul_add`, a fused multiply-add available without std.
#![feature(core_float_math)]
#![cfg_attr(
    target_arch = "nvptx64",
    feature(abi_ptx, asm_experimental_arch, stdarch_nvptx)
)]

#[cfg(test)]
extern crate std;

pub mod math;
pub mod mh;
pub mod philox;
pub mod rng;

#[cfg(target_arch = "nvptx64")]
pub mod gpu;

/// The compiled versions of the step: whether a lane keeps its part of a row in registers,
/// and whether quads move as 16-byte vectors.
///
/// Each is a pair of entry points (in-kernel random numbers; the caller's). They compute the
/// same function; the version only fixes, at compile time, what the hardware needs fixed there:
/// the size of the register arrays (arrays indexed by constants are registers; the compiler
/// must know their size), and whether every quad is a full, aligned 16-byte vector
/// (`dim % 4 == 0`), which removes all per-element bounds checks from the hot loop.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Variant {
    /// Quads per lane kept in registers: [`mh::MAX_RESIDENT_QUADS_PER_LANE`] (rows up to 256
    /// elements), [`mh::MAX_RESIDENT_QUADS_CALLER_NOISE`] (rows up to 1024, caller-noise mode
    /// only), or 0 (nothing kept: the row is streamed, any `dim`).
    pub resident_quads: usize,
    /// Quads are loaded and stored as 16-byte vectors: `dim % 4 == 0`.
    pub vector: bool,
}

impl Variant {
    /// Every variant, in the order of [`ENTRY_POINTS`].
    pub const ALL: [Variant; 6] = [
        Variant {
            resident_quads: mh::MAX_RESIDENT_QUADS_PER_LANE,
            vector: true,
        },
        Variant {
            resident_quads: mh::MAX_RESIDENT_QUADS_PER_LANE,
            vector: false,
        },
        Variant {
            resident_quads: mh::MAX_RESIDENT_QUADS_CALLER_NOISE,
            vector: true,
        },
        Variant {
            resident_quads: mh::MAX_RESIDENT_QUADS_CALLER_NOISE,
            vector: false,
        },
        Variant {
            resident_quads: 0,
            vector: true,
        },
        Variant {
            resident_quads: 0,
            vector: false,
        },
    ];

    /// The version for rows of `dim` elements, random numbers drawn in the kernel or read from
    /// the caller (`caller_noise`): register-resident when each lane owns at most
    /// [`mh::MAX_RESIDENT_QUADS_PER_LANE`] quads, or, for caller noise, at most
    /// [`mh::MAX_RESIDENT_QUADS_CALLER_NOISE`]; vectors when `dim % 4 == 0`.
    pub fn for_step(dim: usize, caller_noise: bool) -> Self {
        let quads = mh::quads_per_lane(dim);
        let resident_quads = if quads <= mh::MAX_RESIDENT_QUADS_PER_LANE {
            mh::MAX_RESIDENT_QUADS_PER_LANE
        } else if caller_noise && quads <= mh::MAX_RESIDENT_QUADS_CALLER_NOISE {
            mh::MAX_RESIDENT_QUADS_CALLER_NOISE
        } else {
            0
        };
        Variant {
            resident_quads,
            vector: dim.is_multiple_of(mh::QUAD),
        }
    }

    /// This variant's position in [`Variant::ALL`] and [`ENTRY_POINTS`].
    pub fn index(self) -> usize {
        let by_quads = match self.resident_quads {
            mh::MAX_RESIDENT_QUADS_PER_LANE => 0,
            mh::MAX_RESIDENT_QUADS_CALLER_NOISE => 1,
            _ => 2,
        };
        2 * by_quads + usize::from(!self.vector)
    }

    /// The entry points' names: `(in-kernel random numbers, caller's random numbers)`.
    pub fn entry_points(self) -> (&'static str, &'static str) {
        ENTRY_POINTS[self.index()]
    }
}

/// The step's entry points, `(mh_step..., mh_step_with_noise...)`, one pair per
/// [`Variant::ALL`] entry: the first draws its random numbers in the kernel, the second reads
/// the caller's. `mh_step` and `mh_step_with_noise` are the general pair (any row, any
/// alignment); the others specialize them: `q2`, `q8` keep rows in registers (2 or 8 quads per
/// lane), `streaming` streams long rows with 16-byte vectors, `v4` marks 16-byte vectors.
/// (`mh_step_q8*` exist but are not chosen: see [`mh::MAX_RESIDENT_QUADS_CALLER_NOISE`].)
pub const ENTRY_POINTS: [(&str, &str); 6] = [
    ("mh_step_q2_v4", "mh_step_with_noise_q2_v4"),
    ("mh_step_q2", "mh_step_with_noise_q2"),
    ("mh_step_q8_v4", "mh_step_with_noise_q8_v4"),
    ("mh_step_q8", "mh_step_with_noise_q8"),
    ("mh_step_streaming_v4", "mh_step_with_noise_streaming_v4"),
    ("mh_step", "mh_step_with_noise"),
];

/// The *staged* in-kernel-RNG steps, for GPUs from Ampere (sm_80) on: each row is loaded one
/// row ahead into shared memory by asynchronous copies (`cp.async`) rather than into registers
/// (see `gpu::shared_feed::SharedFeed`), so the loads travel while the row before computes at no register
/// cost. Indexed by [`staged_entry_point`]:
/// - `mh_step_staged_q2_v4`: rows of up to 256 elements (as `mh_step_q2_v4`, 64 registers
///   instead of 72);
/// - `mh_step_staged_q8_v4`: rows of 257 to 1024 elements, one warp per row (the portable
///   kernels stream these).
///
/// Both need `dim % 4 == 0` (the copies move whole 16-byte quads). Only the newer PTX module
/// has them; same arguments as the other in-kernel-RNG entry points.
pub const STAGED_ENTRY_POINTS: [&str; 2] = ["mh_step_staged_q2_v4", "mh_step_staged_q8_v4"];

/// Quads per lane the longer staged step holds (rows of up to `8 * 32` quads: 1024 elements).
pub const MAX_STAGED_QUADS_PER_LANE: usize = 8;

/// Warps per block of the staged steps: their shared array holds two rows for each, so the
/// host must launch them with exactly `32 *` this many threads per block.
pub const STAGED_WARPS_PER_BLOCK: usize = 4;

/// Which of [`STAGED_ENTRY_POINTS`] takes rows of `dim` elements, if any: whole quads, and at
/// most [`MAX_STAGED_QUADS_PER_LANE`] quads per lane.
pub fn staged_entry_point(dim: usize) -> Option<usize> {
    let quads = mh::quads_per_lane(dim);
    if !dim.is_multiple_of(mh::QUAD) || quads > MAX_STAGED_QUADS_PER_LANE {
        None
    } else if quads <= mh::MAX_RESIDENT_QUADS_PER_LANE {
        Some(0)
    } else {
        Some(1)
    }
}

/// The fused K-step kernels (`mh_chain_*`, see `gpu::chain::chain_rows`), indexed by
/// [`fused_entry_point`]: `q2` / `q8` quads per lane in registers, `v4` for 16-byte vectors,
/// `stats` for the running moments, `split` for rows of at most [`MAX_SPLIT_DIM`] elements
/// spread over twice the lanes (one quad per lane: twice the warps, for batches too small to
/// fill the GPU otherwise; bit-identical to the others).
pub const FUSED_ENTRY_POINTS: [&str; 10] = [
    "mh_chain_q2_v4",
    "mh_chain_q2",
    "mh_chain_q8_v4",
    "mh_chain_q8",
    "mh_chain_q2_v4_stats",
    "mh_chain_q2_stats",
    "mh_chain_q8_v4_stats",
    "mh_chain_q8_stats",
    "mh_chain_split_v4",
    "mh_chain_split",
];

/// The longest rows the `split` fused kernels take: groups of at most 16 lanes
/// ([`mh::group_width`]), so that twice the lanes still fit in a warp.
pub const MAX_SPLIT_DIM: usize = 128;

/// Which of [`FUSED_ENTRY_POINTS`] runs K steps of rows of `dim` elements (with the running
/// moments if `moments`; split over twice the lanes if `split` and the row allows it), or
/// `None` when a row does not fit in registers (more than [`mh::MAX_FUSED_QUADS_PER_LANE`]
/// quads per lane): such rows run as single steps.
pub fn fused_entry_point(dim: usize, moments: bool, split: bool) -> Option<usize> {
    let scalar = usize::from(!dim.is_multiple_of(mh::QUAD));
    if split && !moments && dim <= MAX_SPLIT_DIM {
        return Some(FIRST_SPLIT_ENTRY_POINT + scalar);
    }
    let quads = mh::quads_per_lane(dim);
    let by_quads = if quads <= mh::MAX_RESIDENT_QUADS_PER_LANE {
        0
    } else if quads <= mh::MAX_FUSED_QUADS_PER_LANE {
        1
    } else {
        return None;
    };
    Some(4 * usize::from(moments) + 2 * by_quads + scalar)
}

/// Lanes per row of the fused kernel [`FUSED_ENTRY_POINTS`]`[index]` for rows of `dim`
/// elements: the group width, doubled by the `split` kernels.
pub fn fused_lanes_per_row(index: usize, dim: usize) -> usize {
    mh::group_width(dim)
        * if index >= FIRST_SPLIT_ENTRY_POINT {
            2
        } else {
            1
        }
}

/// Where the `split` kernels start in [`FUSED_ENTRY_POINTS`].
const FIRST_SPLIT_ENTRY_POINT: usize = 8;

/// The single-step statistics update for rows too long for the fused kernel.
pub const CHAIN_STATS_UPDATE: &str = "mh_chain_stats_update";

/// Name of the entry point that evaluates Philox for many (counter, key) pairs (known-answer
/// tests on the GPU).
pub const PHILOX4X32_10_MANY: &str = "philox4x32_10_many";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn variants_hold_their_rows() {
        let v = |dim, caller_noise| {
            let v = Variant::for_step(dim, caller_noise);
            (v.resident_quads, v.vector)
        };
        let rng = [
            v(1, false),
            v(64, false),
            v(256, false),
            v(257, false),
            v(1024, false),
            v(4096, false),
        ];
        assert_eq!(
            rng,
            [
                (2, false),
                (2, true),
                (2, true),
                (0, false),
                (0, true),
                (0, true)
            ]
        );
        let noise = [v(64, true), v(257, true), v(1024, true), v(1025, true)];
        assert_eq!(noise, [(2, true), (8, false), (8, true), (0, false)]);
        assert_eq!(
            Variant::for_step(33, false).entry_points(),
            ("mh_step_q2", "mh_step_with_noise_q2")
        );
        for (i, v) in Variant::ALL.iter().enumerate() {
            assert_eq!(v.index(), i);
        }
    }

    #[test]
    fn staged_steps_take_whole_quads_up_to_1024() {
        let index = [4, 64, 256, 260, 300, 1000, 1024, 1028, 33, 257].map(staged_entry_point);
        assert_eq!(
            index,
            [
                Some(0),
                Some(0),
                Some(0),
                Some(1),
                Some(1),
                Some(1),
                Some(1),
                None,
                None,
                None
            ]
        );
        // The longer one assumes one warp per row.
        assert_eq!(mh::group_width(260), mh::WARP_SIZE);
    }

    #[test]
    fn fused_kernels_hold_rows_up_to_1024() {
        let name = |dim, moments, split| {
            fused_entry_point(dim, moments, split).map(|i| FUSED_ENTRY_POINTS[i])
        };
        assert_eq!(name(64, false, false), Some("mh_chain_q2_v4"));
        assert_eq!(name(33, false, false), Some("mh_chain_q2"));
        assert_eq!(name(256, true, false), Some("mh_chain_q2_v4_stats"));
        assert_eq!(name(257, false, false), Some("mh_chain_q8"));
        assert_eq!(name(1024, true, false), Some("mh_chain_q8_v4_stats"));
        assert_eq!(name(1025, false, false), None);
        // Split kernels: rows up to 128 elements, without moments.
        assert_eq!(name(64, false, true), Some("mh_chain_split_v4"));
        assert_eq!(name(1, false, true), Some("mh_chain_split"));
        assert_eq!(name(128, false, true), Some("mh_chain_split_v4"));
        assert_eq!(name(129, false, true), Some("mh_chain_q2"));
        assert_eq!(name(64, true, true), Some("mh_chain_q2_v4_stats"));
        assert!(2 * mh::group_width(MAX_SPLIT_DIM) <= mh::WARP_SIZE);
        assert!(
            FUSED_ENTRY_POINTS[FIRST_SPLIT_ENTRY_POINT..]
                .iter()
                .all(|name| name.contains("_split"))
        );
        assert_eq!(fused_lanes_per_row(FIRST_SPLIT_ENTRY_POINT, 64), 16);
        assert_eq!(fused_lanes_per_row(0, 64), 8);
    }
}
