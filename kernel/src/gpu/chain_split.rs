//! The fused kernel for small batches: each row's quads spread over twice a group's lanes, one
//! quad a lane (the `_split` entries), and the steps run without a test of their own.
//!
//! # Why split, and why a kernel of its own
//!
//! A batch too small to give each scheduler four warps with a lane group per row (4096 rows of
//! 64 on the H100's and H200's 132 SMs) leaves the step's dependent latencies (Philox's
//! multiplies, the special functions, the sum's shuffles) visible: the warps have nothing
//! else to issue. Spreading each row over `2 G` lanes gives twice the warps for the same rows
//! and halves each lane's work; [`split_sum`] keeps the sum's order, so the bits are those of
//! the single step and of the other fused kernels.
//!
//! With one quad a lane, a step is about 120 instructions, and every test the loop makes is
//! on the step's path. The general loop of [`crate::gpu::chain`] makes three a step, each
//! answering the same way for long stretches: does a round of acceptance uniforms start here,
//! does the trace take this state, is the sum tree wider than 8 lanes. This kernel takes them
//! out of the loop in two ways:
//! - *runs*: the steps run in an inner loop whose runs end at the round's end, after the
//!   trace's next save, or at the launch's end, and the first two tests are made once a run;
//! - *unswitching*: the tree's width is the same for the whole launch, so it is tested once,
//!   and each answer runs its own copy of the loop (a `const` parameter, as a template
//!   parameter would be in CUDA C++), in which the compiler drops the test.
//!
//! The split step then executes 124 instructions instead of 133, and the (4096, 64) launch
//! runs about 5 % faster on the H100 and the H200. The general kernels keep their loop: the
//! q8 kernel's larger step measured 5 % slower with the runs (`bench/NOTES.md`, issue 22,
//! twenty-eighth and thirtieth parts).

use crate::gpu::args::{ChainArgs, StepArgs, shared_target_quad, stage_target};
use crate::gpu::device::memory::store_quad;
use crate::gpu::device::sfu::count_not_finite;
use crate::gpu::device::thread::{block_dim_x, block_idx_x, grid_dim_x, lane_id, thread_idx_x};
use crate::gpu::device::warp::{ballot_decision, segment_total, shfl_idx, shfl_xor};
use crate::layout::{self, QUAD, WARP_SIZE};
use crate::mh;
use crate::rng;
use crate::target::Target;

/// The sum of [`group_sum`](crate::gpu::device::warp::group_sum) for a row whose group's quads
/// are split over `2 g` lanes: lane `j < g` holds the first quad of the group's lane `j`, lane
/// `j + g` its second. `first` is the lane's own quad's terms added to 0; `x`, `p` and
/// the target's quad.
///
/// The single step's lane `j` adds its two quads' terms in one chain, first quad then second,
/// and the split keeps that order to the bit: lane `j` passes its chain to lane `j + g`
/// (`shfl.sync.bfly` by `g`), which continues it with its own quad's terms. The upper half's
/// lanes then hold exactly the group's partial sums, summed as `group_sum`'s tree does:
/// the total ends in the upper half's first lane, which decides for the row
/// ([`ballot_decision`]). The other lanes return partial values.
///
/// # Safety
/// All 32 lanes of the warp call this together, with the same `g` (a warp collective, see
/// [`crate::gpu::device::warp`]).
#[inline(always)]
pub(crate) unsafe fn split_sum<T: Target>(
    first: f32,
    x: [f32; 4],
    p: [f32; 4],
    target: &T::Quad,
    g: usize,
) -> f32 {
    // SAFETY: the whole warp is here (the contract).
    unsafe {
        let chained = T::add_quad_terms(shfl_xor(first, g as u32), x, p, target);
        segment_total(chained, g)
    }
}

/// What a split lane knows for the whole launch: its place among the row's `2 g` lanes, its
/// quad (the same in every row) and what it computed for it once.
struct SplitLane<'a> {
    args: &'a StepArgs,
    chain: &'a ChainArgs,
    /// The group width `G` of the row; the row has `2 g` lanes.
    g: usize,
    /// The row's place among the warp's rows.
    group: usize,
    /// This lane's place among its row's lanes, and the row quad it holds.
    quad: usize,
    /// Whether that quad exists (rows shorter than `2 g` quads leave lanes without one).
    owns_quad: bool,
    /// The ballot bit of the lane that decides for the row: the first of the upper half.
    decider_bit: u32,
    /// The staged target's shared address.
    target: u32,
    /// The quad's proposal scales (the step size unless `_scaled`).
    scale: [f32; QUAD],
    /// The launch's part of the quad's Philox calls.
    quad_draws: rng::QuadDraws,
}

/// One row's chain, as a split lane holds it over the launch.
struct SplitRow {
    row: usize,
    /// False for rows past the batch: they take part in the shuffles and decide nothing.
    live: bool,
    /// `row * dim`.
    offset: usize,
    /// The lane's quad of the state.
    x: [f32; QUAD],
    /// The normals of the next step's proposal, drawn during this step's sum.
    eps: [f32; QUAD],
    /// Accepted steps.
    count: u32,
    /// Steps with a non-finite `log alpha`.
    nonfinite: u32,
    /// The threshold of the acceptance uniform this lane drew for its round.
    my_threshold: f32,
    /// The step of the launch after which the trace takes its next slot (never, with
    /// `thin = 0`).
    next_save: u32,
    /// The trace's next slot.
    save_slot: usize,
}

impl SplitRow {
    /// The launch's steps in runs that end at a round's end, after the trace's next save or at
    /// the launch's end. `WIDE`: the sum tree is wider than 8 lanes (`g > 8`).
    ///
    /// # Safety
    /// All 32 lanes of the warp call this together (warp collectives), with `WIDE == (g >
    /// 8)`; the trace holds every save of the launch.
    #[inline(always)]
    unsafe fn steps<T: Target, const V4: bool, const WIDE: bool>(&mut self, lane: &SplitLane) {
        let chain = lane.chain;
        // The same `g`, written so that the compiler sees its side of 8: the tree's test folds.
        let g = if WIDE { lane.g.max(9) } else { lane.g.min(8) };
        let lanes = 2 * lane.g as u32;
        let mut j = 0u32;
        while j < chain.steps {
            let round_start = j & !(lanes - 1);
            if j == round_start {
                self.draw_thresholds(lane, round_start);
            }
            let round_end = (round_start + lanes).min(chain.steps);
            // `next_save < round_end`, so `next_save + 1` cannot overflow.
            let run_end = if self.next_save < round_end {
                self.next_save + 1
            } else {
                round_end
            };
            for step in j..run_end {
                // The draws of the next step: its normals are drawn during this step's sum.
                let next = rng::StepDraws::new(chain.key, chain.first_step + u64::from(step) + 1);
                // SAFETY: the whole warp is here (the contract); the target is the staged copy,
                // `quad < 2 g <= 32`.
                let (accept, total, p) = unsafe {
                    let from = (lane.group * 2 * lane.g) as u32 + (step - round_start);
                    let threshold = shfl_idx(self.my_threshold, from);
                    let target = shared_target_quad::<T>(lane.target, lane.quad);
                    let p = mh::propose_scaled(self.x, self.eps, lane.scale);
                    let partial = T::add_quad_terms(0.0, self.x, p, &target);
                    // Independent of this step's decision: work for the warp while the sum
                    // travels through the shuffles.
                    self.eps = next.normal_quad_of(self.row as u32, &lane.quad_draws);
                    let total = T::row_total(split_sum::<T>(partial, self.x, p, &target, g));
                    let below = mh::below_threshold(total, threshold);
                    (ballot_decision(below, lane.decider_bit), total, p)
                };
                // The count is added under the accept's predicate: one instruction.
                if accept {
                    self.x = p;
                    self.count += 1;
                }
                self.nonfinite = count_not_finite(self.nonfinite, total);
            }
            if run_end - 1 == self.next_save {
                // SAFETY: the trace holds the save (the contract).
                unsafe { self.save::<V4>(lane) };
            }
            j = run_end;
        }
    }

    /// At a round's start (step `round_start` of the launch), lane `i` of the row draws the
    /// acceptance uniform of the round's step `i`; the steps read it with a shuffle. A round
    /// costs a lane one Philox call instead of one a step.
    #[inline(always)]
    fn draw_thresholds(&mut self, lane: &SplitLane, round_start: u32) {
        let chain = lane.chain;
        let ahead = round_start as usize + lane.quad;
        self.my_threshold = if self.live && ahead < chain.steps as usize {
            mh::threshold(mh::log_uniform(
                rng::StepDraws::new(chain.key, chain.first_step + ahead as u64)
                    .row_uniform(self.row as u32),
            ))
        } else {
            // A row past the batch never accepts: no sum is below -inf, NaN neither.
            f32::NEG_INFINITY
        };
    }

    /// The state into the trace's next slot, and the next save planned.
    ///
    /// # Safety
    /// The trace holds the slot.
    #[inline(always)]
    unsafe fn save<const V4: bool>(&mut self, lane: &SplitLane) {
        let (args, chain) = (lane.args, lane.chain);
        self.next_save = self.next_save.saturating_add(chain.thin);
        let slot_offset = self.save_slot * args.batch * args.dim;
        self.save_slot += 1;
        if self.live && lane.owns_quad {
            let at = slot_offset + self.offset + QUAD * lane.quad;
            let valid = layout::valid_in_quad(args.dim, lane.quad);
            // SAFETY: the trace holds the slot (the contract); the quad is this lane's alone.
            unsafe { store_quad::<V4>(chain.trace.add(at), self.x, valid) };
        }
    }
}

/// `K` steps of every chain in one launch, rows of at most 128 elements (`layout::MAX_SPLIT_DIM`)
/// over `2 G` lanes each, one quad a lane: the split fused kernel (see the module's doc). The
/// results are bit-identical to `K` single steps, as every fused kernel's are.
///
/// # Safety
/// As `chain::chain_rows` for a row of at most 128 elements, without moments.
#[inline(always)]
pub(crate) unsafe fn split_rows<T: Target, const V4: bool, const SCALED: bool>(
    args: &StepArgs,
    chain: &ChainArgs,
) {
    let g = layout::group_width(args.dim);
    let lanes = 2 * g;
    let rows_at_once = WARP_SIZE / lanes;
    let (quad, group) = (lane_id() % lanes, lane_id() / lanes);
    let warps_per_block = block_dim_x() / WARP_SIZE;
    let warp = block_idx_x() * warps_per_block + thread_idx_x() / WARP_SIZE;
    let row_stride = grid_dim_x() * warps_per_block * rows_at_once;
    let owns_quad = quad < layout::quads_per_row(args.dim);
    let scale = if SCALED && owns_quad {
        // SAFETY: the quad is inside the row, and the `_scaled` kernels get `dim` scales.
        unsafe { args.proposal_scale::<true, V4>(quad) }
    } else {
        [args.step_size; QUAD]
    };
    let lane = SplitLane {
        args,
        chain,
        g,
        group,
        quad,
        owns_quad,
        decider_bit: 1u32 << (group * lanes + g),
        // SAFETY: a row of at most 32 quads; every thread of the block is here.
        target: unsafe { stage_target::<T, 1, V4>(args.target, args.dim) },
        scale,
        quad_draws: rng::QuadDraws::new(chain.key, chain.first_step, quad as u32),
    };
    let first_draws = rng::StepDraws::new(chain.key, chain.first_step);

    let mut first_row = warp * rows_at_once;
    // Uniform across the warp: every lane reaches every shuffle.
    while first_row < args.batch {
        let row = first_row + group;
        let live = row < args.batch;
        let offset = row * args.dim;
        let mut state = SplitRow {
            row,
            live,
            offset,
            // SAFETY: a row inside the batch, a quad inside the row.
            x: if live && owns_quad {
                unsafe { args.x_quad::<V4>(offset, quad) }
            } else {
                [0.0; QUAD]
            },
            eps: first_draws.normal_quad_of(row as u32, &lane.quad_draws),
            count: 0,
            nonfinite: 0,
            my_threshold: 0.0,
            next_save: if chain.thin > 0 {
                chain.trace_first
            } else {
                u32::MAX
            },
            save_slot: 0,
        };
        // SAFETY: the whole warp runs the steps (the row loop is uniform); the trace holds
        // every save (the contract). The tree's width, tested once for the launch.
        unsafe {
            if g > 8 {
                state.steps::<T, V4, true>(&lane);
            } else {
                state.steps::<T, V4, false>(&lane);
            }
        }
        if live && owns_quad {
            // SAFETY: as the load above; x_new is x.
            unsafe { args.store_x_new::<V4>(offset, quad, state.x) };
        }
        if live && quad == 0 {
            // SAFETY: row < batch, and lane 0 of the row is its only writer.
            unsafe { *chain.accepted_count.add(row) += state.count };
        }
        // The lane that holds the row's whole sum counts its non-finite steps.
        if live && quad == g && state.nonfinite > 0 {
            // SAFETY: row < batch, and lane g of the row is its only writer.
            unsafe { *chain.nonfinite_count.add(row) += state.nonfinite };
        }
        first_row += row_stride;
    }
}
