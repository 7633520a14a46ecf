//! The single step's kernel families: in-kernel random numbers, the caller's, the staged ones
//! (sm_80), and a run's streamed step. Each macro writes one entry point of a family for one
//! target; [`crate::abi`] lists which entry points exist and invokes these for every target.
//! Which one runs a launch is the host's `dispatch::step`.
//!
//! Every single step takes the same first arguments, in this order: `x`, `x_new`, `accepted`,
//! `target`, `batch`, `dim`, `step_size`; the host's one argument pusher follows it.
//!
//! # The parameters every single step shares
//!
//! - `x`: `[batch, dim]` f32, row-major: the current states (read).
//! - `x_new`: `[batch, dim]` f32: the next states (written in full); must not overlap `x`.
//! - `accepted`: `[batch]` u8: 1 where the row moved, 0 where it stayed (written in full).
//! - `target`: `[T::ARRAYS, dim]` f32: the target's arrays, packed (see [`crate::target`]).
//! - `step_size`: the proposal's scale.
//! - `seed`, `step`: the Philox key and the step counter (see [`crate::rng`]).
//! - `tile_rows`: rows per warp tile, a power of two from the rows a warp holds at once
//!   (`32 / G`, `64 / G` for the paired step) to 32 (see
//!   `step_tiles`); the results do not depend on it, only the speed does.
//!
//! ## Thread mapping
//! See `step_tiles`: tiles of rows per warp, a group of `G = group_width(dim)` lanes per row,
//! lane `j` of a group owning quads `j, j + G, ...` of its row.
//!
//! ## Safety (of every single step)
//! The caller guarantees the buffer lengths above, 256-byte aligned buffers,
//! `1 <= batch <= 2^32`, `1 <= dim < 2^32`, `batch * dim` without overflow, that the variant
//! fits the row (`quads_per_lane(dim) <= Q`, or `Q = 0`; `dim % 4 == 0` if `V4`), `tile_rows`
//! as above, a block size that is a multiple of 32, and a one-dimensional grid and block.
//! Nothing is checked here.

/// A single step with random numbers drawn in the kernel: `Q` quads per lane kept in
/// registers (0: none, the row is streamed), `V4` for 16-byte loads (`dim % 4 == 0`).
#[macro_export]
#[doc(hidden)]
macro_rules! mh_family_rng_step {
    ($name:ident, $export:expr, $target:ty, $q:expr, $v4:literal) => {
        /// One Metropolis–Hastings step of every chain, random numbers drawn in the kernel
        /// (parameters: [`crate::gpu::entries`]).
        ///
        /// # Safety
        /// See [`crate::gpu::entries`].
        #[unsafe(export_name = $export)]
        pub unsafe extern "ptx-kernel" fn $name(
            x: *const f32,
            x_new: *mut f32,
            accepted: *mut u8,
            target: *const f32,
            batch: u64,
            dim: u64,
            step_size: f32,
            seed: u64,
            step: u64,
            tile_rows: u32,
        ) {
            use $crate::gpu::{feed::RegisterFeed, step};
            let (args, noise) = step::rng_step_inputs(
                x, x_new, accepted, target, batch, dim, step_size, seed, step, tile_rows,
            );
            // SAFETY: forwarded from this function's contract.
            unsafe {
                step::step_tiles::<$target, _, _, { $q }, $v4, false>(
                    &args,
                    &noise,
                    RegisterFeed::<{ $q }>::EMPTY,
                )
            }
        }
    };
}

/// A single step of a run for rows too long for the fused kernel (streamed, `Q = 0`): the
/// in-kernel-RNG step with two more buffers, `V4` as above, `SCALED` for per-dimension
/// proposal scales.
#[macro_export]
#[doc(hidden)]
macro_rules! mh_family_run_step {
    ($name:ident, $export:expr, $target:ty, $v4:literal, $scaled:literal) => {
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
        /// As the single steps, and the three buffers above with their lengths (`scale` may
        /// be null for the kernels that ignore it).
        #[unsafe(export_name = $export)]
        pub unsafe extern "ptx-kernel" fn $name(
            x: *const f32,
            x_new: *mut f32,
            accepted: *mut u8,
            nonfinite_count: *mut u32,
            null_count: *mut u32,
            target: *const f32,
            batch: u64,
            dim: u64,
            step_size: f32,
            scale: *const f32,
            seed: u64,
            step: u64,
            tile_rows: u32,
        ) {
            use $crate::gpu::{feed::RegisterFeed, step};
            let (mut args, noise) = step::rng_step_inputs(
                x, x_new, accepted, target, batch, dim, step_size, seed, step, tile_rows,
            );
            args.scale = scale;
            args.nonfinite = nonfinite_count;
            args.null_moves = null_count;
            // SAFETY: forwarded from this function's contract.
            unsafe {
                step::step_tiles::<$target, _, _, 0, $v4, $scaled>(
                    &args,
                    &noise,
                    RegisterFeed::<0>::EMPTY,
                )
            }
        }
    };
}

/// A single step with the caller's random numbers (`Q` and `V4` as above).
#[macro_export]
#[doc(hidden)]
macro_rules! mh_family_noise_step {
    ($name:ident, $export:expr, $target:ty, $q:expr, $v4:literal) => {
        /// One Metropolis–Hastings step of every chain, with the caller's random numbers.
        ///
        /// # Parameters
        /// As the in-kernel-RNG steps, with `noise`: `[batch, dim]` f32 standard normals and
        /// `uniform`: `[batch]` f32 uniforms on `[0, 1)` in place of the seed and step, then
        /// `tile_rows`.
        ///
        /// # Safety
        /// As the single steps, and `noise`, `uniform` hold `batch * dim` and `batch` floats.
        #[unsafe(export_name = $export)]
        pub unsafe extern "ptx-kernel" fn $name(
            x: *const f32,
            x_new: *mut f32,
            accepted: *mut u8,
            target: *const f32,
            batch: u64,
            dim: u64,
            step_size: f32,
            noise: *const f32,
            uniform: *const f32,
            tile_rows: u32,
        ) {
            use $crate::gpu::{feed::RegisterFeed, step};
            let (args, noise) = step::noise_step_inputs(
                x, x_new, accepted, target, batch, dim, step_size, noise, uniform, tile_rows,
            );
            // SAFETY: forwarded from this function's contract.
            unsafe {
                step::step_tiles::<$target, _, _, { $q }, $v4, false>(
                    &args,
                    &noise,
                    RegisterFeed::<{ $q }>::EMPTY,
                )
            }
        }
    };
}

/// A staged in-kernel-RNG step (sm_80 and later, so only in the newer PTX module): `$q` quads
/// per lane, rows fed by a `SharedFeed` with `$g` lanes per row (0: `group_width(dim)`),
/// half of them if `$paired`, for rows in whole quads. `mh_step_staged_q2_v4` takes rows of up
/// to 256 elements (in 64 registers instead of `mh_step_q2_v4`'s 72);
/// `mh_step_staged_paired_v4` rows of 9 to 256, a lane holding two group lanes' quads (see
/// `resident::propose_resident`); `mh_step_staged_q8_v4` rows of 257 to 1024 with one warp per
/// row, fixed at compile time: a lane's quads are then 512 bytes apart, and ptxas needed 96
/// registers instead of 128 (20 warps per SM instead of 16). `$evict_first`: the new state
/// stored evict-first (`StepArgs::evict_first`), for steps whose state fits in L2.
#[macro_export]
#[doc(hidden)]
macro_rules! mh_family_staged_step {
    ($name:ident, $export:expr, $target:ty, $q:expr, $g:expr, $paired:literal, $evict_first:literal) => {
        /// One Metropolis–Hastings step of every chain, random numbers drawn in the kernel;
        /// each row is loaded one row ahead into shared memory by asynchronous copies (see
        /// `SharedFeed`).
        ///
        /// # Safety
        /// As the single steps, with `dim % 4 == 0`, `dim <= 32 * 4 * Q`, and blocks of
        /// exactly `STAGED_WARPS_PER_BLOCK` warps.
        #[cfg(target_feature = "sm_80")]
        #[unsafe(export_name = $export)]
        pub unsafe extern "ptx-kernel" fn $name(
            x: *const f32,
            x_new: *mut f32,
            accepted: *mut u8,
            target: *const f32,
            batch: u64,
            dim: u64,
            step_size: f32,
            seed: u64,
            step: u64,
            tile_rows: u32,
        ) {
            use $crate::gpu::{shared_feed::SharedFeed, step};
            use $crate::layout::STAGED_WARPS_PER_BLOCK;
            let (mut args, noise) = step::rng_step_inputs(
                x, x_new, accepted, target, batch, dim, step_size, seed, step, tile_rows,
            );
            args.evict_first = $evict_first;
            // SAFETY: forwarded from this function's contract.
            unsafe {
                let feed =
                    SharedFeed::<{ $q }, { $g }, STAGED_WARPS_PER_BLOCK, $paired>::new(&args, 0);
                step::step_tiles::<$target, _, _, { $q }, true, false>(&args, &noise, feed)
            }
        }
    };
}

/// The long rows' single step with random numbers drawn in the kernel (sm_80 and later): a
/// block per row, a warp per segment (see [`crate::gpu::block_rows`]), each row's state loaded
/// one row ahead: into registers if the target asks for it
/// ([`Target::NEXT_LONG_ROW_IN_REGISTERS`](crate::target::Target::NEXT_LONG_ROW_IN_REGISTERS)),
/// the target's quads then stashed in shared memory (in the launch's dynamic shared memory
/// for more than 4 warps); otherwise staged by `cp.async` in a shared array for blocks of up
/// to `$warps` warps that the kernel declares (`$staging` = `new`: a smaller array for the
/// blocks of two warps lets more of them onto an SM) or that the launch gives
/// (`in_dynamic_shared`, for more than 4 warps). Rows of 1025 to 8192 elements in whole quads.
#[macro_export]
#[doc(hidden)]
macro_rules! mh_family_block_rows_step {
    ($name:ident, $export:expr, $target:ty, $q:expr, $warps:expr, $staging:ident) => {
        /// One Metropolis–Hastings step of every chain, a block per row, random numbers drawn
        /// in the kernel.
        ///
        /// # Safety
        /// As the single steps (`tile_rows` is ignored), with `dim % 4 == 0` and blocks of
        /// exactly `layout::segments(dim)` warps, at most `$warps`; with `in_dynamic_shared`,
        /// launched with `layout::block_rows_staging_bytes(warps)` bytes of dynamic shared
        /// memory.
        #[cfg(target_feature = "sm_80")]
        #[unsafe(export_name = $export)]
        pub unsafe extern "ptx-kernel" fn $name(
            x: *const f32,
            x_new: *mut f32,
            accepted: *mut u8,
            target: *const f32,
            batch: u64,
            dim: u64,
            step_size: f32,
            seed: u64,
            step: u64,
            tile_rows: u32,
        ) {
            use $crate::gpu::device::thread::thread_idx_x;
            use $crate::gpu::{block_rows, feed::RegisterFeed, shared_feed::SharedFeed, step};
            use $crate::layout::{SEGMENT_QUADS, STAGED_WARPS_PER_BLOCK, WARP_SIZE};
            use $crate::target::Target;
            let (args, noise) = step::rng_step_inputs(
                x, x_new, accepted, target, batch, dim, step_size, seed, step, tile_rows,
            );
            // Constant for each entry: the compiler keeps one branch.
            let in_registers = <$target>::NEXT_LONG_ROW_IN_REGISTERS;
            if in_registers {
                let feed = RegisterFeed::<{ $q }>::EMPTY;
                // The stash in dynamic shared memory past 4 warps. The target's choice is
                // repeated in the argument: this branch is compiled for every target, and
                // `step_block_rows` checks at compile time that a dynamic stash fits.
                // SAFETY: forwarded from this function's contract.
                unsafe {
                    block_rows::step_block_rows::<
                        $target,
                        _,
                        _,
                        { $q },
                        true,
                        true,
                        {
                            <$target>::NEXT_LONG_ROW_IN_REGISTERS && $warps > STAGED_WARPS_PER_BLOCK
                        },
                    >(&args, &noise, feed)
                }
            } else {
                let first_quad = thread_idx_x() / WARP_SIZE * SEGMENT_QUADS;
                // SAFETY: forwarded from this function's contract.
                unsafe {
                    let feed =
                        SharedFeed::<{ $q }, WARP_SIZE, { $warps }>::$staging(&args, first_quad);
                    block_rows::step_block_rows::<$target, _, _, { $q }, true, false, false>(
                        &args, &noise, feed,
                    )
                }
            }
        }
    };
}

/// The long rows' single step with the caller's random numbers: a block per row, a warp per
/// segment, each row's state and noise loaded one row ahead into registers. Rows of 1025 to
/// 8192 elements in whole quads.
#[macro_export]
#[doc(hidden)]
macro_rules! mh_family_noise_block_rows_step {
    ($name:ident, $export:expr, $target:ty, $q:expr) => {
        /// One Metropolis–Hastings step of every chain, a block per row, with the caller's
        /// random numbers.
        ///
        /// # Parameters
        /// As the caller-noise steps.
        ///
        /// # Safety
        /// As the caller-noise steps (`tile_rows` is ignored), with `dim % 4 == 0` and blocks
        /// of exactly `layout::segments(dim)` warps, at most `MAX_BLOCK_ROW_SEGMENTS`.
        #[unsafe(export_name = $export)]
        pub unsafe extern "ptx-kernel" fn $name(
            x: *const f32,
            x_new: *mut f32,
            accepted: *mut u8,
            target: *const f32,
            batch: u64,
            dim: u64,
            step_size: f32,
            noise: *const f32,
            uniform: *const f32,
            tile_rows: u32,
        ) {
            use $crate::gpu::{block_rows, feed::RegisterFeed, step};
            let (args, noise) = step::noise_step_inputs(
                x, x_new, accepted, target, batch, dim, step_size, noise, uniform, tile_rows,
            );
            // SAFETY: forwarded from this function's contract.
            unsafe {
                block_rows::step_block_rows::<$target, _, _, { $q }, true, false, false>(
                    &args,
                    &noise,
                    RegisterFeed::<{ $q }>::EMPTY,
                )
            }
        }
    };
}
