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
//! step of one row) → `gpu` (threads, warps, entry points).
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
    /// Quads per lane kept in registers: [`mh::MAX_RESIDENT_QUADS_PER_LANE`] for rows up to
    /// 256 elements, or 0 (nothing kept: the row is streamed, any `dim`).
    pub resident_quads: usize,
    /// Quads are loaded and stored as 16-byte vectors: `dim % 4 == 0`.
    pub vector: bool,
}

impl Variant {
    /// Every variant, in the order of [`ENTRY_POINTS`].
    pub const ALL: [Variant; 4] = [
        Variant {
            resident_quads: mh::MAX_RESIDENT_QUADS_PER_LANE,
            vector: true,
        },
        Variant {
            resident_quads: mh::MAX_RESIDENT_QUADS_PER_LANE,
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

    /// The version for rows of `dim` elements: register-resident when each lane owns at most
    /// [`mh::MAX_RESIDENT_QUADS_PER_LANE`] quads, vectors when `dim % 4 == 0`.
    pub fn for_dim(dim: usize) -> Self {
        let fits = mh::quads_per_lane(dim) <= mh::MAX_RESIDENT_QUADS_PER_LANE;
        Variant {
            resident_quads: if fits {
                mh::MAX_RESIDENT_QUADS_PER_LANE
            } else {
                0
            },
            vector: dim.is_multiple_of(mh::QUAD),
        }
    }

    /// This variant's position in [`Variant::ALL`] and [`ENTRY_POINTS`].
    pub fn index(self) -> usize {
        2 * usize::from(self.resident_quads == 0) + usize::from(!self.vector)
    }

    /// The entry points' names: `(in-kernel random numbers, caller's random numbers)`.
    pub fn entry_points(self) -> (&'static str, &'static str) {
        ENTRY_POINTS[self.index()]
    }
}

/// The step's entry points, `(mh_step..., mh_step_with_noise...)`, one pair per
/// [`Variant::ALL`] entry: the first draws its random numbers in the kernel, the second reads
/// the caller's. `q2`: rows kept in registers (2 quads per lane); `streaming`: any row;
/// `v4`: 16-byte vectors.
pub const ENTRY_POINTS: [(&str, &str); 4] = [
    ("mh_step_q2_v4", "mh_step_with_noise_q2_v4"),
    ("mh_step_q2", "mh_step_with_noise_q2"),
    ("mh_step_streaming_v4", "mh_step_with_noise_streaming_v4"),
    ("mh_step_streaming", "mh_step_with_noise_streaming"),
];

/// Name of the entry point that evaluates Philox for many (counter, key) pairs (known-answer
/// tests on the GPU).
pub const PHILOX4X32_10_MANY: &str = "philox4x32_10_many";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn variants_hold_their_rows() {
        let v = |dim| {
            let v = Variant::for_dim(dim);
            (v.resident_quads, v.vector)
        };
        let got = [v(1), v(64), v(256), v(257), v(1024), v(4096)];
        assert_eq!(
            got,
            [
                (2, false),
                (2, true),
                (2, true),
                (0, false),
                (0, true),
                (0, true)
            ]
        );
        assert_eq!(
            Variant::for_dim(33).entry_points(),
            ("mh_step_q2", "mh_step_with_noise_q2")
        );
        for (i, v) in Variant::ALL.iter().enumerate() {
            assert_eq!(v.index(), i);
        }
    }
}
