//! The single step's entry points: in-kernel random numbers, the caller's, and the staged ones
//! (sm_80). Which one runs a launch is the host's `dispatch::step`.

#[cfg(target_feature = "sm_80")]
use crate::MAX_STAGED_QUADS_PER_LANE;
use crate::gpu::args::StepArgs;
use crate::gpu::feed::RegisterFeed;
use crate::gpu::noise::CallerNoise;
#[cfg(target_feature = "sm_80")]
use crate::gpu::shared_feed::SharedFeed;
use crate::gpu::step::{rng_step_inputs, step_tiles};
use crate::mh;
#[cfg(target_feature = "sm_80")]
use crate::mh::WARP_SIZE;

/// Defines a single step with random numbers drawn in the kernel: `Q` quads per lane kept in
/// registers (0: none, the row is streamed), `V4` for 16-byte loads (`dim % 4 == 0`).
macro_rules! rng_entry_point {
    ($q:expr, $v4:literal, $rng:ident) => {
        /// One Metropolis–Hastings step of every chain, random numbers drawn in the kernel.
        ///
        /// # Parameters
        /// - `x`: `[batch, dim]` f32, row-major: the current states (read).
        /// - `x_new`: `[batch, dim]` f32: the next states (written in full); must not overlap `x`.
        /// - `accepted`: `[batch]` u8: 1 where the row moved, 0 where it stayed (written in full).
        /// - `mu`, `inv_var`: `[dim]` f32: the target's mean and `1 / sigma^2`.
        /// - `step_size`: the proposal's scale.
        /// - `seed`, `step`: the Philox key and the step counter (see [`crate::rng`]).
        /// - `tile_rows`: rows per warp tile, a power of two from `32 / G` to 32 (see
        ///   `step_tiles`); the results do not depend on it, only the speed does.
        ///
        /// # Thread mapping
        /// See `step_tiles`: tiles of rows per warp, a group of `G = group_width(dim)` lanes
        /// per row, lane `j` of a group owning quads `j, j + G, ...` of its row.
        ///
        /// # Safety
        /// The caller guarantees the buffer lengths above, 256-byte aligned buffers,
        /// `1 <= batch <= 2^32`, `1 <= dim < 2^32`, `batch * dim` without overflow, that this
        /// variant fits the row (`quads_per_lane(dim) <= Q`, or `Q = 0`; `dim % 4 == 0` if
        /// `V4`), `tile_rows` as above, a block size that is a multiple of 32, and a
        /// one-dimensional grid and block. Nothing is checked here.
        #[unsafe(no_mangle)]
        pub unsafe extern "ptx-kernel" fn $rng(
            x: *const f32,
            x_new: *mut f32,
            accepted: *mut u8,
            mu: *const f32,
            inv_var: *const f32,
            batch: u64,
            dim: u64,
            step_size: f32,
            seed: u64,
            step: u64,
            tile_rows: u32,
        ) {
            let (args, noise) = rng_step_inputs(
                x, x_new, accepted, mu, inv_var, batch, dim, step_size, seed, step, tile_rows,
            );
            // SAFETY: forwarded from this function's contract.
            unsafe {
                step_tiles::<_, _, { $q }, $v4, false>(&args, &noise, RegisterFeed::<{ $q }>::EMPTY)
            }
        }
    };
}

/// Defines a single step of a run for rows too long for the fused kernel (streamed, `Q = 0`):
/// the in-kernel-RNG step with two more buffers, `V4` as above, `SCALED` for per-dimension
/// proposal scales.
macro_rules! run_step_entry_point {
    ($v4:literal, $scaled:literal, $name:ident) => {
        /// One Metropolis–Hastings step of every chain of a run whose rows are too long for the
        /// fused kernel, random numbers drawn in the kernel.
        ///
        /// # Parameters
        /// As the in-kernel-RNG steps, with three more:
        /// - `nonfinite_count` (after `accepted`): `[batch]` u32, each row adds 1 if its
        ///   `log alpha` was not finite;
        /// - `null_count` (after it): `[batch]` u32, each row adds 1 if its terms totalled
        ///   exactly 0 (the proposal rounded back to the state); null: not counted;
        /// - `scale` (after `step_size`): `[dim]` f32 per-dimension proposal scales, read by
        ///   the `_scaled` kernels in place of `step_size` (the others ignore it).
        ///
        /// # Safety
        /// As `mh_step` (or `mh_step_streaming_v4`), and the three buffers above with their
        /// lengths (`scale` may be null for the kernels that ignore it).
        #[unsafe(no_mangle)]
        pub unsafe extern "ptx-kernel" fn $name(
            x: *const f32,
            x_new: *mut f32,
            accepted: *mut u8,
            nonfinite_count: *mut u32,
            null_count: *mut u32,
            mu: *const f32,
            inv_var: *const f32,
            batch: u64,
            dim: u64,
            step_size: f32,
            scale: *const f32,
            seed: u64,
            step: u64,
            tile_rows: u32,
        ) {
            let (mut args, noise) = rng_step_inputs(
                x, x_new, accepted, mu, inv_var, batch, dim, step_size, seed, step, tile_rows,
            );
            args.scale = scale;
            args.nonfinite = nonfinite_count;
            args.null_moves = null_count;
            // SAFETY: forwarded from this function's contract.
            unsafe { step_tiles::<_, _, 0, $v4, $scaled>(&args, &noise, RegisterFeed::<0>::EMPTY) }
        }
    };
}

/// Defines a single step with the caller's random numbers (`Q` and `V4` as above).
macro_rules! caller_noise_entry_point {
    ($q:expr, $v4:literal, $noise:ident) => {
        /// One Metropolis–Hastings step of every chain, with the caller's random numbers.
        ///
        /// # Parameters
        /// As the in-kernel-RNG steps, with `noise`: `[batch, dim]` f32 standard normals and
        /// `uniform`: `[batch]` f32 uniforms on `[0, 1)` in place of the seed and step, then
        /// `tile_rows`.
        ///
        /// # Safety
        /// As the in-kernel-RNG steps, and `noise`, `uniform` hold `batch * dim` and `batch` floats.
        #[unsafe(no_mangle)]
        pub unsafe extern "ptx-kernel" fn $noise(
            x: *const f32,
            x_new: *mut f32,
            accepted: *mut u8,
            mu: *const f32,
            inv_var: *const f32,
            batch: u64,
            dim: u64,
            step_size: f32,
            noise: *const f32,
            uniform: *const f32,
            tile_rows: u32,
        ) {
            let (batch, dim, tile_rows) = (batch as usize, dim as usize, tile_rows as usize);
            let args = StepArgs {
                x,
                x_new,
                accepted,
                mu,
                inv_var,
                batch,
                dim,
                step_size,
                scale: core::ptr::null(),
                nonfinite: core::ptr::null_mut(),
                null_moves: core::ptr::null_mut(),
                tile_rows,
            };
            let noise = CallerNoise { noise, uniform };
            // SAFETY: forwarded from this function's contract.
            unsafe {
                step_tiles::<_, _, { $q }, $v4, false>(&args, &noise, RegisterFeed::<{ $q }>::EMPTY)
            }
        }
    };
}

// The register-resident entry points take their array size from the constants the host's
// dispatch uses to choose them (`dispatch::step` in the library), so the two cannot disagree.
rng_entry_point!(mh::MAX_RESIDENT_QUADS_PER_LANE, true, mh_step_q2_v4);
rng_entry_point!(mh::MAX_RESIDENT_QUADS_PER_LANE, false, mh_step_q2);
rng_entry_point!(0, true, mh_step_streaming_v4);
// The general step: any row length, any alignment. The others are faster specializations.
rng_entry_point!(0, false, mh_step);

// The single steps of `Gpu::run` for rows over 1024 elements (streamed), with the count of
// non-finite steps and, `_scaled`, per-dimension proposal scales.
run_step_entry_point!(true, false, mh_run_step_v4);
run_step_entry_point!(false, false, mh_run_step);
run_step_entry_point!(true, true, mh_run_step_v4_scaled);
run_step_entry_point!(false, true, mh_run_step_scaled);

caller_noise_entry_point!(
    mh::MAX_RESIDENT_QUADS_PER_LANE,
    true,
    mh_step_with_noise_q2_v4
);
caller_noise_entry_point!(
    mh::MAX_RESIDENT_QUADS_PER_LANE,
    false,
    mh_step_with_noise_q2
);
// Caller noise keeps rows of up to 1024 elements in registers: with no Philox to compute, 8
// quads per lane fit.
caller_noise_entry_point!(
    mh::MAX_RESIDENT_QUADS_CALLER_NOISE,
    true,
    mh_step_with_noise_q8_v4
);
caller_noise_entry_point!(
    mh::MAX_RESIDENT_QUADS_CALLER_NOISE,
    false,
    mh_step_with_noise_q8
);
caller_noise_entry_point!(0, true, mh_step_with_noise_streaming_v4);
caller_noise_entry_point!(0, false, mh_step_with_noise);

/// Defines a staged in-kernel-RNG step: `$q` quads per lane, rows fed by a [`SharedFeed`]
/// with `$g` lanes per row (0: `mh::group_width(dim)`), for rows of at most `$max_dim`
/// elements in whole quads.
macro_rules! staged_entry_point {
    ($name:ident, $q:expr, $g:expr, $max_dim:literal, $what:literal) => {
        #[doc = concat!("One Metropolis–Hastings step of every chain, random numbers drawn in the kernel, for ", $what, "; each row is loaded one row ahead into shared memory by asynchronous copies (see [`SharedFeed`]; sm_80 and later, so only in the newer PTX module).")]
        ///
        /// # Parameters
        /// As `mh_step_q2_v4`.
        ///
        /// # Safety
        #[doc = concat!("As `mh_step_q2_v4`, with `dim % 4 == 0`, `dim <= ", $max_dim, "`, and blocks of exactly [`crate::STAGED_WARPS_PER_BLOCK`] warps.")]
        #[cfg(target_feature = "sm_80")]
        #[unsafe(no_mangle)]
        pub unsafe extern "ptx-kernel" fn $name(
            x: *const f32,
            x_new: *mut f32,
            accepted: *mut u8,
            mu: *const f32,
            inv_var: *const f32,
            batch: u64,
            dim: u64,
            step_size: f32,
            seed: u64,
            step: u64,
            tile_rows: u32,
        ) {
            let (args, noise) = rng_step_inputs(
                x, x_new, accepted, mu, inv_var, batch, dim, step_size, seed, step, tile_rows,
            );
            // SAFETY: forwarded from this function's contract.
            unsafe {
                let feed = SharedFeed::<{ $q }, { $g }>::new(&args);
                step_tiles::<_, _, { $q }, true, false>(&args, &noise, feed)
            }
        }
    };
}

staged_entry_point!(
    mh_step_staged_q2_v4,
    mh::MAX_RESIDENT_QUADS_PER_LANE,
    0,
    "256",
    "rows of up to 256 elements in whole quads (`mh_step_q2_v4` in 64 registers instead of 72)"
);
// One warp per row, fixed at compile time: a lane's quads are then 512 bytes apart, and ptxas
// needed 96 registers instead of 128 (20 warps per SM instead of 16).
staged_entry_point!(
    mh_step_staged_q8_v4,
    MAX_STAGED_QUADS_PER_LANE,
    WARP_SIZE,
    "1024",
    "rows of 257 to 1024 elements in whole quads (one warp per row; the portable kernels stream them)"
);
