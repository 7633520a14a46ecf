//! The fused kernel: K steps of every chain in one launch, each row in registers.

use crate::gpu::args::{ChainArgs, RowSlot, StepArgs, shared_target_quad, stage_target};
use crate::gpu::device::memory::store_quad;
use crate::gpu::device::sfu::{count_not_finite, count_zero};
use crate::gpu::device::thread::{block_dim_x, block_idx_x, grid_dim_x, lane_id, thread_idx_x};
use crate::gpu::device::warp::{ballot_decision, group_sum, segment_total, shfl_idx, shfl_xor};
use crate::layout::{self, QUAD, WARP_SIZE};
use crate::math::fma;
use crate::mh;
use crate::rng;
use crate::target::Target;

/// `K` steps of every chain in one launch, each row's state kept in registers throughout
/// (the fused kernel). A group of `G = group_width(dim)` lanes owns a row for all `K` steps:
/// lane `j` holds quads `j, j + G, ...` of it, as in the single step, so the sums are added in
/// the same order and the result is **bit-identical** to `K` single-step launches.
///
/// Per step and row the only memory traffic left is the target (from shared memory); the row
/// is read once at the start and written once at the end. The acceptance uniforms are shared
/// out like the single step's: every `G` steps (`G / 2` paired), lane `j` of the row's lanes draws
/// the uniform of step `j` ahead and the others read it with a shuffle, so a lane pays one
/// Philox call per `G` steps for them.
///
/// Small batches take the split kernel instead ([`crate::gpu::chain_split`]): each row over
/// `2 G` lanes, one quad a lane.
///
/// With `PAIRED` (rows of at most 256 elements, `Q = 4`), the row's lanes are `G / 2`: lane
/// `j` holds the two quads of the group's lane `j` and the two of its lane `j + G / 2`, as
/// two chains of terms, and adds the second chain to the first itself: the first level of
/// [`group_sum`]'s tree, which adds lane `j + G / 2`'s sum to lane `j`'s, the same two values in
/// the same order. The rest of the tree runs over the `G / 2` lanes, so the bits are those of
/// `G` lanes. Half the warps for the same rows, and each step's fixed work (the sum's
/// shuffles, the threshold, the counts, the loop) shared by twice the quads: for large
/// batches, which have warps to spare (`bench/NOTES.md`, issue 22, tenth part).
///
/// With `STATS`, each lane keeps Welford's running mean and sum of squared deviations of its
/// elements over the launch's `K` steps (f32, a few `K` at most, so no drift), and at the end
/// merges them into the run's f64 totals with Chan's formula for combining two samples.
///
/// With `SCALED`, the proposal takes a scale per dimension (`args.scale`) instead of
/// `step_size`: diagonal preconditioning.
///
/// Each step also counts the row's non-finite `log alpha` (a NaN or an infinity in the state or
/// the proposal, or terms past float32's range; such a step never moves a chain): two
/// instructions a step ([`count_not_finite`]), which cost 0.9 to 1.7 % of the RNG-bound
/// launches on the H200 (`bench/NOTES.md` has the alternatives measured). With `STATS` it
/// also counts the row's null moves, steps whose terms total exactly 0 because the proposal
/// rounded back to the state: two more ([`count_zero`]), a statistic of the run kept with its
/// moments (+0.45 % of such a launch at (1M, 64)), not paid by the launches that keep none.
///
/// With `STATS` and `stats_n == 0` the moments in memory are not read: the launch's own are
/// written (a run's split statistics start a sample there, `crate::moments`).
///
/// # Safety
/// As [`step_tiles`] for a variant with `Q >= quads_per_lane(dim)` (`PAIRED`: `Q / 2 >=
/// quads_per_lane(dim)` and `group_width(dim) >= 2`), `x_new == x` (updated in place: each
/// row is read and written by the lanes that own it), the buffers of [`ChainArgs`] as long as
/// it says, and every trace slot written inside the buffer.
#[inline(always)]
pub(crate) unsafe fn chain_rows<
    T: Target,
    const Q: usize,
    const V4: bool,
    const STATS: bool,
    const PAIRED: bool,
    const SCALED: bool,
>(
    args: &StepArgs,
    chain: &ChainArgs,
) {
    const { assert!(!PAIRED || Q.is_multiple_of(2)) };
    let g = layout::group_width(args.dim);
    // Lanes per row: the group's `g`, or `g / 2` paired.
    let lanes = if PAIRED { g / 2 } else { g };
    let rows_at_once = WARP_SIZE / lanes;
    let lane = lane_id();
    let (lane_in_row, group) = (lane % lanes, lane / lanes);
    // The lane's quads as chains of terms: one of `Q`, or paired two of `Q / 2`.
    let chain_len = if PAIRED { Q / 2 } else { Q };
    // Quad k of this lane: quad `lane_in_row + k g` of the row; paired, quads `Q / 2` on are
    // those of the group's lane `lane_in_row + g / 2`.
    let quad_of = |k: usize| lane_in_row + (k % chain_len) * g + (k / chain_len) * (g / 2);
    let warps_per_block = block_dim_x() / WARP_SIZE;
    let warp = block_idx_x() * warps_per_block + thread_idx_x() / WARP_SIZE;
    let row_stride = grid_dim_x() * warps_per_block * rows_at_once;
    let n_quads = layout::quads_per_row(args.dim);
    // SAFETY: Q >= quads_per_lane(dim), so at most Q * 32 quads; every thread is here.
    let target = unsafe { stage_target::<T, Q, V4>(args.target, args.dim) };
    // A lane owns the same quads of every row, so its proposal scales are the same for the
    // whole launch: in registers when it owns few quads, else staged in shared memory (paired
    // too: 16 more registers cost its schedule more than a shared load a quad, bench/NOTES.md).
    let scales_in_registers = Q <= layout::MAX_RESIDENT_QUADS_PER_LANE;
    let scales = if SCALED && !scales_in_registers {
        // SAFETY: as above; the `_scaled` kernels get `dim` scales.
        unsafe { args.stage_scales::<Q, V4>() }
    } else {
        0
    };
    let mut lane_scales = [[args.step_size; QUAD]; Q];
    if SCALED && scales_in_registers {
        for (k, s) in lane_scales.iter_mut().enumerate() {
            if quad_of(k) < n_quads {
                // SAFETY: the quad is inside the row, and `scale` holds `dim` floats.
                *s = unsafe { args.proposal_scale::<true, V4>(quad_of(k)) };
            }
        }
    }
    let state_len = args.batch * args.dim;
    // A lane owns the same quads in every row and step, and the launch's steps share the high
    // word of their counter (the contract): with few quads a lane, the part of their Philox
    // calls that depends on nothing else is computed once, here (one multiplication fewer a
    // quad and step; with many, it would take 3 registers a quad).
    let launch_quads = chain_len <= layout::MAX_RESIDENT_QUADS_PER_LANE;
    let quad_draws: [rng::QuadDraws; Q] = core::array::from_fn(|k| {
        rng::QuadDraws::new(chain.key, chain.first_step, quad_of(k) as u32)
    });

    let mut first_row = warp * rows_at_once;
    // Uniform across the warp: every lane reaches every shuffle.
    while first_row < args.batch {
        let row = first_row + group;
        let live = row < args.batch;
        let offset = row * args.dim;
        // `owned(k)`: quad k of this lane exists (and the row does).
        let owned = |k: usize| live && quad_of(k) < n_quads;
        let mut xs = [[0.0f32; 4]; Q];
        for (k, x) in xs.iter_mut().enumerate() {
            if owned(k) {
                // SAFETY: a row inside the batch, a quad inside the row.
                *x = unsafe { args.x_quad::<V4>(offset, quad_of(k)) };
            }
        }
        // Quad k is computed by every lane once any lane of the warp has it (as in
        // `row_resident`); the first `MAX_RESIDENT_QUADS_PER_LANE` always (for the Q2 kernels
        // that wastes work only on rows of at most 4 elements), which keeps the hot loop free
        // of branches.
        let computed = |k: usize| {
            k % chain_len < layout::MAX_RESIDENT_QUADS_PER_LANE || (k % chain_len) * g < n_quads
        };
        let draw = |k: usize, draws: &rng::StepDraws| {
            if launch_quads {
                draws.normal_quad_of(row as u32, &quad_draws[k])
            } else {
                draws.normal_quad(row as u32, quad_of(k) as u32)
            }
        };
        // With few quads per lane, the next step's normals are drawn during this step's sum
        // (below); with many, the lane has independent work enough, and the registers are
        // needed elsewhere (the Q8 kernels with moments would spill).
        let pipelined = chain_len <= layout::MAX_RESIDENT_QUADS_PER_LANE;
        let mut eps = [[0.0f32; 4]; Q];
        for (k, e) in eps.iter_mut().enumerate() {
            if pipelined && computed(k) {
                *e = draw(k, &rng::StepDraws::new(chain.key, chain.first_step));
            }
        }
        let mut mean = [[0.0f32; 4]; Q];
        let mut m2 = [[0.0f32; 4]; Q];
        let mut count = 0u32;
        let mut nonfinite = 0u32;
        let mut nulls = 0u32;
        let mut my_threshold = 0.0f32;
        // The step of the launch after which the trace takes its next slot (never, with
        // `thin = 0`), and that slot: a compare per step instead of a division.
        let mut next_save = if chain.thin > 0 {
            chain.trace_first
        } else {
            u32::MAX
        };
        let mut save_slot = 0usize;
        for j in 0..chain.steps {
            let step = chain.first_step + u64::from(j);
            // The draws of the step whose normals this iteration makes: this one, or with
            // pipelining the next.
            let draws = rng::StepDraws::new(chain.key, step + u64::from(pipelined));
            // The step's position in the uniforms' round, in 32 bits like `j`.
            let in_round = j & (lanes as u32 - 1);
            if in_round == 0 {
                let ahead = j as usize + lane_in_row;
                my_threshold = if live && ahead < chain.steps as usize {
                    mh::threshold(mh::log_uniform(
                        rng::StepDraws::new(chain.key, step + lane_in_row as u64)
                            .row_uniform(row as u32),
                    ))
                } else {
                    // A row past the batch never accepts: no sum is below -inf, NaN neither.
                    f32::NEG_INFINITY
                };
            }
            let slot = RowSlot {
                row: row as u32,
                offset,
                live,
                lane_in_group: lane_in_row,
                g,
                // SAFETY: every lane of the warp runs this loop (the row loop is uniform:
                // lanes past the batch take part with `live = false`).
                threshold: unsafe { shfl_idx(my_threshold, (group * lanes) as u32 + in_round) },
            };
            let mut ps = [[0.0f32; 4]; Q];
            let mut partial = 0.0f32;
            // Paired, the second chain's sum: group lane `lane_in_row + g / 2`'s.
            let mut partner = 0.0f32;
            for k in 0..Q {
                if computed(k) {
                    // SAFETY: q < Q * 32, and `target` is the staged copy.
                    let quad = unsafe { shared_target_quad::<T>(target, quad_of(k)) };
                    if !pipelined {
                        eps[k] = draw(k, &draws);
                    }
                    let scale = if SCALED && !scales_in_registers {
                        // SAFETY: q < Q * 32, and `scales` is the staged copy.
                        unsafe { StepArgs::shared_scale_quad(scales, quad_of(k)) }
                    } else {
                        lane_scales[k]
                    };
                    ps[k] = mh::propose_scaled(xs[k], eps[k], scale);
                    if k < chain_len {
                        partial = T::add_quad_terms(partial, xs[k], ps[k], &quad);
                    } else {
                        partner = T::add_quad_terms(partner, xs[k], ps[k], &quad);
                    }
                }
            }
            // The next step's normals do not depend on this step's decision: drawing them here
            // gives the warp independent work while the sum travels through the shuffles.
            for (k, e) in eps.iter_mut().enumerate() {
                if pipelined && computed(k) {
                    *e = draw(k, &draws);
                }
            }
            // SAFETY: the whole warp is here, as at the shuffle above; `g` is the same in every
            // lane (from `dim`).
            let total = unsafe {
                // Paired: the tree's first level, lane j's sum plus lane j + g / 2's.
                if PAIRED {
                    partial += partner;
                }
                T::row_total(group_sum(partial, lanes))
            };
            let accept = mh::below_threshold(total, slot.threshold);
            // The count is added under the accept's predicate: one instruction.
            if accept {
                xs = ps;
                count += 1;
            }
            nonfinite = count_not_finite(nonfinite, total);
            if STATS {
                nulls = count_zero(nulls, total);
            }
            if STATS {
                let inv_n = 1.0 / (j + 1) as f32;
                for k in 0..Q {
                    for i in 0..QUAD {
                        let delta = xs[k][i] - mean[k][i];
                        mean[k][i] = fma(delta, inv_n, mean[k][i]);
                        m2[k][i] = fma(delta, xs[k][i] - mean[k][i], m2[k][i]);
                    }
                }
            }
            // `j < steps <= u32::MAX`, so `next_save = u32::MAX` is never reached.
            if j == next_save {
                next_save = next_save.saturating_add(chain.thin);
                let slot_offset = save_slot * state_len;
                save_slot += 1;
                for (k, x) in xs.iter().enumerate() {
                    if owned(k) {
                        let at = slot_offset + offset + QUAD * quad_of(k);
                        // SAFETY: the trace holds the slot (the host sized it), the quad is
                        // this lane's alone.
                        unsafe {
                            store_quad::<V4>(
                                chain.trace.add(at),
                                *x,
                                layout::valid_in_quad(args.dim, quad_of(k)),
                            )
                        };
                    }
                }
            }
        }
        for (k, x) in xs.iter().enumerate() {
            if owned(k) {
                // SAFETY: as the loads above; x_new is x.
                unsafe { args.store_x_new::<V4>(offset, quad_of(k), *x) };
            }
        }
        if live && lane_in_row == 0 {
            // SAFETY: row < batch, and lane 0 of the group is the row's only writer.
            unsafe { *chain.accepted_count.add(row) += count };
        }
        if live && lane_in_row == 0 && nonfinite > 0 {
            // SAFETY: row < batch, and lane 0 of the group is the row's only writer.
            unsafe { *chain.nonfinite_count.add(row) += nonfinite };
        }
        if STATS && live && lane_in_row == 0 && nulls > 0 {
            // SAFETY: as above.
            unsafe { *chain.null_count.add(row) += nulls };
        }
        if STATS {
            // The launch's K steps join the run's totals ([`crate::moments::merge`], Chan's
            // formula); totals of 0 steps are not read, the launch's own are written.
            let (n_a, n_b) = (chain.stats_n, u64::from(chain.steps));
            for k in 0..Q {
                if owned(k) {
                    let q = quad_of(k);
                    let valid = layout::valid_in_quad(args.dim, q);
                    // A constant trip count: `mean[k][i]` stays in registers.
                    for i in 0..QUAD {
                        if i >= valid {
                            continue;
                        }
                        let at = offset + QUAD * q + i;
                        // SAFETY: element `at` is inside the [batch, dim] statistics, and only
                        // this lane touches it.
                        unsafe {
                            let a = if n_a == 0 {
                                (0, 0.0, 0.0)
                            } else {
                                (n_a, *chain.mean.add(at), *chain.m2.add(at))
                            };
                            let b = (n_b, f64::from(mean[k][i]), f64::from(m2[k][i]));
                            (*chain.mean.add(at), *chain.m2.add(at)) = crate::moments::merge(a, b);
                        }
                    }
                }
            }
        }
        first_row += row_stride;
    }
}

/// The fused kernel family: one entry point for one target, `Q` quads per lane, `V4` for
/// 16-byte loads, `STATS` for the running moments, `SPLIT` for a row's quads spread over twice
/// the lanes (`chain_split::split_rows`, `Q = 1` and no moments), `PAIRED` over half,
/// `SCALED` for per-dimension proposal scales (see `chain_rows`). Only runs with a
/// preconditioner launch the `SCALED` ones, so the others keep the step size in a register.
#[macro_export]
#[doc(hidden)]
macro_rules! mh_family_chain {
    ($name:ident, $export:expr, $target:ty, $q:expr, $v4:literal, $stats:literal, $split:literal, $paired:literal, $scaled:literal) => {
        /// `steps` Metropolis–Hastings steps of every chain in one launch, random numbers drawn
        /// in the kernel, the state kept in registers (see `chain_rows`).
        ///
        /// # Parameters
        /// - `x`: `[batch, dim]` f32, the states: read at the start, written at the end.
        /// - `accepted_count`: `[batch]` u32, each row's accepted steps added.
        /// - `nonfinite_count`: `[batch]` u32, each row's steps with a non-finite `log alpha`
        ///   added.
        /// - `null_count`: `[batch]` u32, each row's null moves (the proposal rounded back to
        ///   the state) added by the `_stats` kernels (the others never touch it).
        /// - `target`, `batch`, `dim`, `step_size`, `seed`: as the single step.
        /// - `scale`: `[dim]` f32 per-dimension proposal scales, read by the `_scaled` kernels
        ///   in place of `step_size` (null for the others).
        /// - `first_step`, `steps`: the step counter of the first step, and how many.
        /// - `mean`, `m2`, `stats_n`: `[batch, dim]` f64 running moments and the steps already
        ///   in them (used only by the `_stats` kernels; with `stats_n = 0` only written).
        /// - `trace`, `thin`, `trace_first`: `[slots, batch, dim]` f32; after step
        ///   `trace_first + i * thin` of the launch, the states go to slot `i` (`thin = 0`:
        ///   none).
        ///
        /// # Safety
        /// As the single step's entry points for this variant, plus the buffers above with
        /// the lengths above, and enough trace slots for every save of the launch.
        #[unsafe(export_name = $export)]
        pub unsafe extern "ptx-kernel" fn $name(
            x: *mut f32,
            accepted_count: *mut u32,
            nonfinite_count: *mut u32,
            null_count: *mut u32,
            target: *const f32,
            batch: u64,
            dim: u64,
            step_size: f32,
            scale: *const f32,
            seed: u64,
            first_step: u64,
            steps: u32,
            mean: *mut f64,
            m2: *mut f64,
            stats_n: u64,
            trace: *mut f32,
            thin: u32,
            trace_first: u32,
        ) {
            use $crate::gpu::args::{ChainArgs, StepArgs};
            use $crate::gpu::chain;
            let args = StepArgs {
                x,
                x_new: x,
                accepted: core::ptr::null_mut(),
                target,
                batch: batch as usize,
                dim: dim as usize,
                step_size,
                scale,
                nonfinite: core::ptr::null_mut(),
                null_moves: core::ptr::null_mut(),
                tile_rows: 0,
                evict_first: false,
            };
            let chain_args = ChainArgs {
                key: $crate::rng::key(seed),
                first_step,
                steps,
                accepted_count,
                nonfinite_count,
                null_count,
                mean,
                m2,
                stats_n,
                trace,
                thin,
                trace_first,
            };
            const { assert!(!$split || ($q == 1 && !$stats && !$paired)) };
            // SAFETY: forwarded from this function's contract.
            unsafe {
                if $split {
                    $crate::gpu::chain_split::split_rows::<$target, $v4, $scaled>(
                        &args,
                        &chain_args,
                    )
                } else {
                    chain::chain_rows::<$target, { $q }, $v4, $stats, $paired, $scaled>(
                        &args,
                        &chain_args,
                    )
                }
            }
        }
    };
}
