//! The kernels' names: one declaration per target compiles every kernel family for it and
//! writes the table of names the host's dispatcher reads, so the two cannot disagree.
//!
//! [`for_each_entry_point!`](crate::for_each_entry_point) is the one list of the
//! target-generic entry points: a family (which kernel body) and a name per entry, with the
//! constants that specialize it. [`declare_targets!`](crate::declare_targets), invoked once in
//! [`crate::target`], hands the list to two consumers:
//!
//! - [`ENTRY_BASES`]: the names the host's dispatcher chooses among (`mh_step_q2_v4`, ...),
//!   the same for every target;
//! - for each target, `target::entry_points::<target>::ENTRY_POINTS`: the exported names, in
//!   the same order (`mh_step_q2_v4_gaussian`, ...), and, on the GPU only, the entry points
//!   themselves: each family's macro (in `gpu::entries` and `gpu::chain`) writes an
//!   `extern "ptx-kernel"` function of the target's type under that name.
//!
//! The lessons and the statistics kernels do not depend on the target; they keep plain names.

/// Calls `$callback!` with `[$($context)*]` and the list of target-generic entry points, one
/// `family name (constants);` per entry (see the module documentation).
#[macro_export]
#[doc(hidden)]
macro_rules! for_each_entry_point {
    ($callback:ident, $($context:tt)*) => {
        $crate::$callback! {
            [$($context)*]
            // The single step, random numbers drawn in the kernel: quads per lane kept in
            // registers (0: streamed) and 16-byte loads (`dim % 4 == 0`).
            mh_family_rng_step mh_step_q2_v4 (MAX_RESIDENT_QUADS_PER_LANE, true);
            mh_family_rng_step mh_step_q2 (MAX_RESIDENT_QUADS_PER_LANE, false);
            mh_family_rng_step mh_step_streaming_v4 (0, true);
            mh_family_rng_step mh_step (0, false);
            // The staged single steps (sm_80 only): quads per lane, lanes per row (0: from dim),
            // a row over half its group's lanes, the new state stored evict-first.
            mh_family_staged_step mh_step_staged_q2_v4 (MAX_RESIDENT_QUADS_PER_LANE, 0, false, false);
            mh_family_staged_step mh_step_staged_paired_v4 (PAIRED_QUADS_PER_LANE, 0, true, false);
            mh_family_staged_step mh_step_staged_paired_evict_first_v4 (PAIRED_QUADS_PER_LANE, 0, true, true);
            mh_family_staged_step mh_step_staged_q8_v4 (MAX_STAGED_QUADS_PER_LANE, WARP_SIZE, false, false);
            // The long rows' single step, a block per row (the in-kernel RNG's on sm_80 only).
            // Staged in an array for 4 warps, for 2 warps, or in the launch's dynamic shared
            // memory for up to 8.
            mh_family_block_rows_step mh_step_block_rows_v4 (MAX_STAGED_QUADS_PER_LANE, STAGED_WARPS_PER_BLOCK, new);
            mh_family_block_rows_step mh_step_block_rows_2w_v4 (MAX_STAGED_QUADS_PER_LANE, 2, new);
            mh_family_block_rows_step mh_step_block_rows_8w_v4 (MAX_STAGED_QUADS_PER_LANE, MAX_BLOCK_ROW_SEGMENTS, in_dynamic_shared);
            mh_family_noise_block_rows_step mh_step_with_noise_block_rows_v4 (MAX_RESIDENT_QUADS_CALLER_NOISE);
            // The single step with the caller's random numbers.
            mh_family_noise_step mh_step_with_noise_q2_v4 (MAX_RESIDENT_QUADS_PER_LANE, true);
            mh_family_noise_step mh_step_with_noise_q2 (MAX_RESIDENT_QUADS_PER_LANE, false);
            mh_family_noise_step mh_step_with_noise_q8_v4 (MAX_RESIDENT_QUADS_CALLER_NOISE, true);
            mh_family_noise_step mh_step_with_noise_q8 (MAX_RESIDENT_QUADS_CALLER_NOISE, false);
            mh_family_noise_step mh_step_with_noise_streaming_v4 (0, true);
            mh_family_noise_step mh_step_with_noise (0, false);
            // A run's single step for rows too long for the fused kernel: 16-byte loads,
            // per-dimension proposal scales.
            mh_family_run_step mh_run_step_v4 (true, false);
            mh_family_run_step mh_run_step (false, false);
            mh_family_run_step mh_run_step_v4_scaled (true, true);
            mh_family_run_step mh_run_step_scaled (false, true);
            // The fused K-step kernel: quads per lane, 16-byte loads, running moments, a
            // row's quads split over twice the lanes, or paired over half, per-dimension
            // proposal scales.
            mh_family_chain mh_chain_q2_v4 (MAX_RESIDENT_QUADS_PER_LANE, true, false, false, false, false);
            mh_family_chain mh_chain_q2 (MAX_RESIDENT_QUADS_PER_LANE, false, false, false, false, false);
            mh_family_chain mh_chain_q8_v4 (MAX_FUSED_QUADS_PER_LANE, true, false, false, false, false);
            mh_family_chain mh_chain_q8 (MAX_FUSED_QUADS_PER_LANE, false, false, false, false, false);
            mh_family_chain mh_chain_q2_v4_stats (MAX_RESIDENT_QUADS_PER_LANE, true, true, false, false, false);
            mh_family_chain mh_chain_q2_stats (MAX_RESIDENT_QUADS_PER_LANE, false, true, false, false, false);
            mh_family_chain mh_chain_q8_v4_stats (MAX_FUSED_QUADS_PER_LANE, true, true, false, false, false);
            mh_family_chain mh_chain_q8_stats (MAX_FUSED_QUADS_PER_LANE, false, true, false, false, false);
            mh_family_chain mh_chain_split_v4 (1, true, false, true, false, false);
            mh_family_chain mh_chain_split (1, false, false, true, false, false);
            mh_family_chain mh_chain_paired_v4 (PAIRED_QUADS_PER_LANE, true, false, false, true, false);
            mh_family_chain mh_chain_paired (PAIRED_QUADS_PER_LANE, false, false, false, true, false);
            mh_family_chain mh_chain_q2_v4_scaled (MAX_RESIDENT_QUADS_PER_LANE, true, false, false, false, true);
            mh_family_chain mh_chain_q2_scaled (MAX_RESIDENT_QUADS_PER_LANE, false, false, false, false, true);
            mh_family_chain mh_chain_q8_v4_scaled (MAX_FUSED_QUADS_PER_LANE, true, false, false, false, true);
            mh_family_chain mh_chain_q8_scaled (MAX_FUSED_QUADS_PER_LANE, false, false, false, false, true);
            mh_family_chain mh_chain_q2_v4_stats_scaled (MAX_RESIDENT_QUADS_PER_LANE, true, true, false, false, true);
            mh_family_chain mh_chain_q2_stats_scaled (MAX_RESIDENT_QUADS_PER_LANE, false, true, false, false, true);
            mh_family_chain mh_chain_q8_v4_stats_scaled (MAX_FUSED_QUADS_PER_LANE, true, true, false, false, true);
            mh_family_chain mh_chain_q8_stats_scaled (MAX_FUSED_QUADS_PER_LANE, false, true, false, false, true);
            mh_family_chain mh_chain_split_v4_scaled (1, true, false, true, false, true);
            mh_family_chain mh_chain_split_scaled (1, false, false, true, false, true);
            mh_family_chain mh_chain_paired_v4_scaled (PAIRED_QUADS_PER_LANE, true, false, false, true, true);
            mh_family_chain mh_chain_paired_scaled (PAIRED_QUADS_PER_LANE, false, false, false, true, true);
        }
    };
}

/// The list's names, as the dispatcher chooses them.
#[macro_export]
#[doc(hidden)]
macro_rules! entry_bases {
    ([] $($family:ident $name:ident ($($constant:tt),*);)*) => {
        /// The names the host's dispatcher chooses among, for every target: entry `i` of a
        /// target's exported names (`TargetKind::entry_points`) is `ENTRY_BASES[i]` followed
        /// by `_` and the target's module name.
        pub const ENTRY_BASES: &[&str] = &[$(stringify!($name)),*];
    };
}

crate::for_each_entry_point!(entry_bases,);

/// One target's exported names and, on the GPU, its entry points.
#[macro_export]
#[doc(hidden)]
macro_rules! target_entry_points {
    ([$suffix:ident, $target:ty] $($family:ident $name:ident ($($constant:tt),*);)*) => {
        /// This target's exported entry-point names, in [`crate::abi::ENTRY_BASES`]' order.
        pub const ENTRY_POINTS: &[&str] =
            &[$(concat!(stringify!($name), "_", stringify!($suffix))),*];
        $(
            #[cfg(target_arch = "nvptx64")]
            $crate::$family!(
                $name,
                concat!(stringify!($name), "_", stringify!($suffix)),
                $target,
                $($constant),*
            );
        )*
    };
}

/// Declares the targets: the run-time [`TargetKind`](crate::target::TargetKind) with one
/// variant per target type, and each target's entry points (see the module documentation).
/// Invoked once, in [`crate::target`]; each line is `module_name: Type`.
#[macro_export]
#[doc(hidden)]
macro_rules! declare_targets {
    ($($(#[$doc:meta])* $suffix:ident: $target:ident),* $(,)?) => {
        /// A target chosen at run time: one variant per [`Target`] type.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum TargetKind {
            $($(#[$doc])* $target),*
        }

        impl TargetKind {
            /// Every target, in declaration order.
            pub const ALL: &'static [TargetKind] = &[$(TargetKind::$target),*];

            /// Its [`Target::NAME`].
            pub fn name(self) -> &'static str {
                match self { $(TargetKind::$target => <$target as Target>::NAME),* }
            }

            /// Its [`Target::PARAMS`].
            pub fn params(self) -> &'static [&'static str] {
                match self { $(TargetKind::$target => <$target as Target>::PARAMS),* }
            }

            /// Its [`Target::ARRAYS`].
            pub fn arrays(self) -> usize {
                match self { $(TargetKind::$target => <$target as Target>::ARRAYS),* }
            }

            /// The target called `name`, if any.
            pub fn from_name(name: &str) -> Option<TargetKind> {
                Self::ALL.iter().copied().find(|kind| kind.name() == name)
            }

            /// Calls `visitor` with this target's type.
            pub fn visit<V: VisitTarget>(self, visitor: V) -> V::Output {
                match self { $(TargetKind::$target => visitor.visit::<$target>()),* }
            }

            /// Its exported entry-point names, in [`crate::abi::ENTRY_BASES`]' order.
            pub fn entry_points(self) -> &'static [&'static str] {
                match self { $(TargetKind::$target => entry_points::$suffix::ENTRY_POINTS),* }
            }
        }

        /// Each target's entry points, a module per target.
        pub mod entry_points {
            $(
                #[doc = concat!("The entry points of [`", stringify!($target), "`](super::", stringify!($target), ").")]
                pub mod $suffix {
                    #[allow(unused_imports)]
                    use $crate::layout::*;
                    $crate::for_each_entry_point!(target_entry_points, $suffix, super::super::$target);
                }
            )*
        }
    };
}
