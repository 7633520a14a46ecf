//! A row held in registers (at most `Q` quads a lane): pass 1 computes the lane's proposals
//! and its partial sum of their terms, pass 2 writes the new state (the proposal if the row
//! is accepted, else the state). The single step's rows of up to 1024 elements
//! (`step::row_resident`) and the long rows' segments (`gpu::block_rows`) both take them.

use crate::gpu::args::{RowSlot, StepArgs};
use crate::gpu::feed::RowFeed;
use crate::gpu::noise::Noise;
use crate::gpu::row::propose_quad;
use crate::layout;
use crate::target::Target;

/// Pass 1 of a row held in registers: the proposals of the lane's quads `first_quad +
/// lane_in_group + k g` (`k < Q`, read from `feed`) and the lane's partial sum of their terms,
/// with the target's quads from `target_quad`. Returns `(proposals, partial)`.
///
/// With a paired feed ([`RowFeed::PAIRED`]) a row has half its group's lanes (`g` is half
/// the group's): the lane's even quads are those of the group's lane `lane_in_group` and
/// its odd quads those of lane `lane_in_group + g`, each summed as that lane sums them, and
/// the two sums added as the first level of
/// [`group_sum_loop`](crate::gpu::device::warp::group_sum_loop)'s tree adds them. The rest
/// of the tree runs over the row's `g` lanes, so the total has the group's bits. Half the
/// warps for the same rows, and each row's fixed work (the threshold's shuffle, the sum's
/// other shuffles, the flag) shared by twice the quads.
///
/// Quad k is computed by every lane as soon as one lane of the warp has it (`first_quad + k g
/// < n_quads`, the same in every lane: no divergence): a lane without it computes a quad of
/// zeros (the feed's) against the zero target that `target_quad` gives past the row, which adds
/// exactly 0 to its sum (the `Target` contract), and stores nothing. Cheaper than a branch per
/// lane around each quad.
/// (The fused kernel computes its first quads unconditionally instead; here that lets ptxas
/// sink the next row's loads below this arithmetic, which costs more than the branches:
/// `bench/NOTES.md`, "where the loads go".)
///
/// `together` quads share one such branch, the test of their group's first quad (the feed's
/// [`RowFeed::QUADS_TOGETHER`], or the caller's choice): the quads of a group are then one
/// block of straight-line code, so ptxas can overlap their dependent chains (Philox's rounds,
/// the logarithm, the square root), where a branch per quad has it finish one quad's chain
/// before it starts the next. A group past the lane's last quad computes zeros, as above.
/// Groups of one keep a loop of their own, written out twice on purpose: the grouped loop's
/// shape, even with groups of one, or the two loops sharing a closure, changed LLVM's
/// instruction order in every single step (more registers for the `q8` and block-row steps,
/// `bench/NOTES.md`, twentieth part), and the kernels' speed rests on that order.
///
/// # Safety
/// The lane's quads past `first_quad + Q g` are none of the row's.
// The loops index an array and a feed by `k`: written with indices, they read as the quads
// they are.
#[allow(clippy::needless_range_loop)]
#[inline(always)]
pub(crate) unsafe fn propose_resident<T: Target, N: Noise, F: RowFeed<N, Q>, const Q: usize>(
    args: &StepArgs,
    noise: &N,
    slot: RowSlot,
    feed: &F,
    first_quad: usize,
    together: usize,
    target_quad: impl Fn(usize) -> T::Quad,
) -> ([[f32; 4]; Q], f32) {
    let n_quads = layout::quads_per_row(args.dim);
    let mut ps = [[0.0f32; 4]; Q];
    // Paired, the even quads are the group's lane `lane_in_group`'s and the odd ones its lane
    // `lane_in_group + g`'s (`slot.g` is then half the group): two chains of terms.
    let mut partials = [0.0f32; 2];
    // Loops with a constant trip count, unrolled: the arrays are indexed by constants and stay
    // in registers (a run-time index would send them to local memory).
    if together == 1 {
        for k in 0..Q {
            let q = first_quad + slot.lane_in_group + k * slot.g;
            let chain = if F::PAIRED { k % 2 } else { 0 };
            if first_quad + k * slot.g < n_quads {
                (ps[k], partials[chain]) = propose_quad::<T, N>(
                    noise,
                    slot.row,
                    q,
                    // SAFETY: k < Q.
                    unsafe { feed.quad(k) },
                    (target_quad(q), [args.step_size; 4]),
                    partials[chain],
                );
            }
        }
    } else {
        for group in 0..Q.div_ceil(together) {
            if first_quad + group * together * slot.g < n_quads {
                for j in 0..together {
                    let k = group * together + j;
                    if k < Q {
                        let q = first_quad + slot.lane_in_group + k * slot.g;
                        let chain = if F::PAIRED { k % 2 } else { 0 };
                        (ps[k], partials[chain]) = propose_quad::<T, N>(
                            noise,
                            slot.row,
                            q,
                            // SAFETY: k < Q.
                            unsafe { feed.quad(k) },
                            (target_quad(q), [args.step_size; 4]),
                            partials[chain],
                        );
                    }
                }
            }
        }
    }
    // The first level of `group_sum_loop`'s tree over the group, the same two values added.
    let partial = if F::PAIRED {
        partials[0] + partials[1]
    } else {
        partials[0]
    };
    (ps, partial)
}

/// Pass 2 of a row held in registers: the lane's quads of the new state (see
/// [`propose_resident`]), the proposal if `accept`, else the state from `feed`.
///
/// # Safety
/// A live row inside the batch (`slot.offset`), `V4` only if `dim % 4 == 0`.
#[allow(clippy::needless_range_loop)]
#[inline(always)]
pub(crate) unsafe fn write_resident<N: Noise, F: RowFeed<N, Q>, const Q: usize, const V4: bool>(
    args: &StepArgs,
    slot: RowSlot,
    feed: &F,
    first_quad: usize,
    ps: &[[f32; 4]; Q],
    accept: bool,
) {
    let n_quads = layout::quads_per_row(args.dim);
    for k in 0..Q {
        let q = first_quad + slot.lane_in_group + k * slot.g;
        if slot.live && q < n_quads {
            // SAFETY: k < Q.
            let out = if accept {
                ps[k]
            } else {
                unsafe { feed.quad(k) }.x
            };
            // SAFETY: a row inside the batch, q < n_quads, and quad q is this lane's alone.
            unsafe { args.store_x_new::<V4>(slot.offset, q, out) };
        }
    }
}
