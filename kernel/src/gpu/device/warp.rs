//! Warp collectives: shuffles, a vote, and the group sums built from them.
//!
//! Each is an `unsafe fn` for the same reason: the instruction names the lanes that take part
//! (all 32: the member mask `0xffffffff`), and its result is undefined unless every one of them
//! executes it together. A lane that has exited, or is on the other side of a branch, breaks
//! it for the whole warp. The kernels reach every collective with the whole warp: the loops
//! around them are uniform across the warp, and lanes with no row to work on still go round.
//!
//! # Safety (every function here)
//! All 32 lanes of the warp call it together, with the same `g`, `width` or `OFFSET`.

use core::arch::asm;

use crate::layout::WARP_SIZE;

/// The value of `v` held by lane `src_lane` (`shfl.sync.idx.b32`): a broadcast when every lane
/// names the same source, a gather otherwise.
///
/// Example: lane `l` passes `10 * l` and `src_lane = 3`: every lane gets 30.
///
/// # Safety
/// All 32 lanes of the warp execute this call together (the member mask is `0xffffffff`); if
/// some lane has exited or is on another branch, the result is undefined.
#[inline(always)]
pub(crate) unsafe fn shfl_idx(v: f32, src_lane: u32) -> f32 {
    let out: f32;
    // SAFETY: a register exchange among the warp's lanes; all 32 take part (the contract).
    unsafe {
        asm!("shfl.sync.idx.b32 {out}, {v}, {s}, 0x1f, 0xffffffff;",
             out = out(reg32) out, v = in(reg32) v, s = in(reg32) src_lane,
             options(nomem, nostack));
    }
    out
}

/// The value of `v` held by lane `lane ^ lane_mask` (`shfl.sync.bfly.b32`).
///
/// Example: `lane_mask = 1` swaps the values of lanes 0 and 1, 2 and 3, and so on.
///
/// # Safety
/// As [`shfl_idx`].
#[inline(always)]
pub(crate) unsafe fn shfl_xor(v: f32, lane_mask: u32) -> f32 {
    let out: f32;
    // SAFETY: a register exchange among the warp's lanes; all 32 take part (the contract).
    unsafe {
        asm!("shfl.sync.bfly.b32 {out}, {v}, {m}, 0x1f, 0xffffffff;",
             out = out(reg32) out, v = in(reg32) v, m = in(reg32) lane_mask,
             options(nomem, nostack));
    }
    out
}

/// The sum of `v` over each group of `g` consecutive lanes (`g` a power of two, at most 32),
/// in **every** lane of the group, with the additions in the order of a butterfly over
/// `offset = g/2, ..., 2, 1` — the order [`mh::group_sum_emulated`] reproduces on the CPU.
/// The fused kernel's sum; the single step uses [`group_sum_loop`], same bits.
///
/// Example: `g = 32`, lane `l` passes `l`: every lane gets `0 + 1 + ... + 31 = 496`; `g = 8`:
/// lanes 0..8 get 28, lanes 8..16 get 92, and so on.
///
/// # How: a segmented tree, then a broadcast
/// The shuffles treat the warp as `32 / g` *segments* of `g` lanes (the `c` operand,
/// [`segments`]). Each level (`offset = 16, 8, 4, 2, 1`) is a `shfl.sync.down`: lane `i` reads
/// lane `i + offset` and adds it only if that lane is in its own segment — the shuffle itself
/// says so in its predicate output, so a level costs two instructions (`SHFL` and a predicated
/// `FADD`), with no compare and no select. Levels with `offset >= g` add nothing anywhere.
/// The segment's first lane ends with exactly the butterfly's total (it adds the same two
/// values at every level: `i ^ offset = i + offset` for the lanes that matter), and a last
/// shuffle (`shfl.sync.idx` from the segment's first lane) hands it to the whole group.
///
/// One uniform branch skips the levels 16 and 8 for groups of at most 8 lanes (rows of at most
/// 64 elements): each level is a shuffle's latency on the step's critical path. The rest is
/// straight-line code, so the compiler can interleave the shuffles with other work (the fused
/// kernel draws the next step's normals meanwhile). For dim 64 that is 9 instructions and 4
/// shuffles in a row; a butterfly with a compare and a select per level takes 30 and 5
/// (`bench/NOTES.md`, fused F5, has the measurements).
///
/// # Safety
/// All 32 lanes of the warp call this together, with the same `g` (see [`shfl_idx`]).
#[inline(always)]
pub(crate) unsafe fn group_sum(v: f32, g: usize) -> f32 {
    // SAFETY: the whole warp is here (the contract).
    unsafe { broadcast_in_segments(segment_total(v, g), 0, g) }
}

/// The tree of [`group_sum`]: the sum over each segment of `g` lanes, in the segment's first
/// lane (the other lanes hold partial sums).
///
/// # Safety
/// As [`group_sum`].
#[inline(always)]
pub(crate) unsafe fn segment_total(v: f32, g: usize) -> f32 {
    let seg = segments(g);
    let mut v = v;
    // SAFETY: the whole warp is here (the contract); `g` is the same in every lane, so the
    // branch is uniform.
    unsafe {
        if g > 8 {
            v = add_from_lane_below::<8>(add_from_lane_below::<16>(v, seg), seg);
        }
        add_from_lane_below::<1>(
            add_from_lane_below::<2>(add_from_lane_below::<4>(v, seg), seg),
            seg,
        )
    }
}

/// Every lane gets `v` from lane `src` of its segment of `width` lanes (`shfl.sync.idx` with
/// the segment operand).
///
/// Example: `width = 8`, `src = 0`: lanes 0..8 get lane 0's value, lanes 8..16 lane 8's.
///
/// # Safety
/// As [`shfl_idx`], with the same `width` in every lane.
#[inline(always)]
pub(crate) unsafe fn broadcast_in_segments(v: f32, src: u32, width: usize) -> f32 {
    let out: f32;
    // SAFETY: a register exchange among the warp's lanes; all 32 take part (the contract).
    unsafe {
        asm!("shfl.sync.idx.b32 {out}, {v}, {s}, {c}, 0xffffffff;",
             out = out(reg32) out, v = in(reg32) v, s = in(reg32) src, c = in(reg32) segments(width),
             options(nomem, nostack));
    }
    out
}

/// The decision of each split row: the upper half's first lane decides on the total, and a
/// ballot hands its decision to the row's other lanes (`decider_bit`: that lane's bit). A vote
/// takes a shuffle off the step's critical path: the lanes need one bit, not the total
/// (`bench/NOTES.md`, "Fused K steps per launch", has the measurements).
///
/// # Safety
/// As [`shfl_idx`].
#[inline(always)]
pub(crate) unsafe fn ballot_decision(mine: bool, decider_bit: u32) -> bool {
    let ballot: u32;
    // SAFETY: a vote among the warp's lanes; all 32 take part (the contract).
    unsafe {
        asm!("{{ .reg .pred p; setp.ne.u32 p, {m}, 0; vote.sync.ballot.b32 {b}, p, 0xffffffff; }}",
             m = in(reg32) u32::from(mine), b = out(reg32) ballot, options(nomem, nostack));
    }
    ballot & decider_bit != 0
}

/// [`group_sum`] as a loop over the `log2 g` levels of a butterfly (`shfl.sync.bfly`, every lane
/// adding its partner `lane ^ offset`), for the single step: the same bits, and 72 registers for
/// the in-kernel-RNG step where the straight-line [`group_sum`] took 79 — seven blocks of 128
/// threads per SM instead of six, which the memory-bound step needs more than the few
/// instructions saved.
///
/// # Safety
/// As [`group_sum`].
#[inline(always)]
pub(crate) unsafe fn group_sum_loop(v: f32, g: usize) -> f32 {
    let mut v = v;
    let mut offset = g as u32 / 2;
    while offset > 0 {
        // SAFETY: the whole warp is here (the contract), and the loop is uniform: `g` is the
        // same in every lane.
        v += unsafe { shfl_xor(v, offset) };
        offset /= 2;
    }
    v
}

/// The `c` operand of a shuffle that splits the warp into segments of `g` lanes (`g` a power of
/// two): the segment mask `32 - g` in bits 8..13, and 31, "clamp at the segment's last lane",
/// in bits 0..5 (PTX ISA, `shfl.sync`).
///
/// The value is the same in every lane, so ptxas would keep it in a *uniform* register, which
/// `SHFL` cannot read: it then copied it to an ordinary register before each of the six
/// shuffles of a sum. Adding `laneid >> 5`, zero but not known to be, makes it a per-lane value
/// that stays in one ordinary register for the whole kernel.
#[inline(always)]
pub(crate) fn segments(g: usize) -> u32 {
    let lane: u32;
    // SAFETY: reads the lane's index (0..32) from a special register; touches no memory.
    unsafe {
        asm!("mov.u32 {l}, %laneid;", l = out(reg32) lane, options(pure, nomem, nostack));
    }
    ((((WARP_SIZE - g) as u32) << 8) | 0x1f) + (lane >> 5)
}

/// One level of [`group_sum`]: `v` plus lane `lane + OFFSET`'s `v` where that lane is in this
/// lane's segment (`seg`, from [`segments`]), `v` unchanged elsewhere.
///
/// # Safety
/// As [`shfl_idx`], with the same `seg` in every lane.
#[inline(always)]
pub(crate) unsafe fn add_from_lane_below<const OFFSET: u32>(v: f32, seg: u32) -> f32 {
    let mut v = v;
    // SAFETY: a register exchange among the warp's lanes; all 32 take part (the contract).
    // The predicate and the temporary are local to the braces.
    unsafe {
        asm!("{{ .reg .pred p; .reg .f32 t;",
             "shfl.sync.down.b32 t|p, {v}, {o}, {c}, 0xffffffff;",
             "@p add.f32 {v}, {v}, t; }}",
             v = inout(reg32) v, o = const OFFSET, c = in(reg32) seg,
             options(nomem, nostack));
    }
    v
}

/// The sum of an f64 over all 32 lanes, in every lane: a butterfly of `shfl.sync.bfly` over the
/// two 32-bit halves of the value (a shuffle moves 32 bits).
///
/// Example: lane `l` passes `l as f64`: every lane gets 496.
///
/// # Safety
/// As [`shfl_idx`].
#[inline(always)]
pub(crate) unsafe fn group_sum_f64(v: f64) -> f64 {
    let mut v = v;
    let mut offset = WARP_SIZE as u32 / 2;
    while offset > 0 {
        let bits = v.to_bits();
        let (low, high) = (bits as u32, (bits >> 32) as u32);
        let (other_low, other_high): (u32, u32);
        // SAFETY: register exchanges among the warp's lanes; all 32 take part (the contract).
        unsafe {
            asm!("shfl.sync.bfly.b32 {ol}, {l}, {o}, 0x1f, 0xffffffff;",
                 "shfl.sync.bfly.b32 {oh}, {h}, {o}, 0x1f, 0xffffffff;",
                 ol = out(reg32) other_low, oh = out(reg32) other_high,
                 l = in(reg32) low, h = in(reg32) high, o = in(reg32) offset,
                 options(nomem, nostack));
        }
        v += f64::from_bits(u64::from(other_low) | (u64::from(other_high) << 32));
        offset /= 2;
    }
    v
}

/// Waits until every lane of the warp arrives (`bar.warp.sync`), and orders memory: what a lane
/// wrote to shared or global memory before it is visible to the warp's lanes after it. The
/// model kernel's lanes take turns through a state held in shared memory with it.
///
/// # Safety
/// As [`shfl_idx`].
#[inline(always)]
pub(crate) unsafe fn sync_warp() {
    // SAFETY: a warp barrier; all 32 lanes take part (the contract).
    unsafe { asm!("bar.warp.sync 0xffffffff;", options(nostack)) };
}

/// The sum of `v` over the whole warp, in every lane, in the butterfly order of
/// [`mh::group_sum_emulated`] over 32 lanes (`shfl.sync.bfly` at offsets 16, 8, 4, 2, 1): each
/// lane adds its own value and its partner's, and `a + b = b + a` exactly, so every lane ends
/// with the same bits.
///
/// # Safety
/// As [`shfl_idx`].
#[inline(always)]
pub(crate) unsafe fn warp_sum_butterfly(v: f32) -> f32 {
    let mut v = v;
    let mut offset = WARP_SIZE as u32 / 2;
    while offset > 0 {
        // SAFETY: the whole warp is here (the contract); the loop is the same in every lane.
        v += unsafe { shfl_xor(v, offset) };
        offset /= 2;
    }
    v
}
