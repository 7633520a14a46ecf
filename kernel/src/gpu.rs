//! Everything that exists only on the GPU: thread indices, warp shuffles, PTX math
//! instructions and the kernel entry points. Compiled only for `nvptx64-nvidia-cuda`.
//!
//! # The execution model in one paragraph
//!
//! A launch runs a *grid* of *blocks*; each block is a group of threads that run on one
//! streaming multiprocessor (SM). Threads are scheduled in *warps* of 32 that issue one
//! instruction at a time together, so the natural unit of cooperation is the warp: its lanes
//! can exchange registers directly with a shuffle, with no shared memory and no barrier. Here a
//! *group* of `G` consecutive lanes owns a row (a chain; `G` from [`mh::group_width`], 8 for
//! dim 64, 32 for dim 256 and up): the lanes load the row's quads side by side, so each load
//! instruction of the warp touches consecutive addresses (*coalesced*), sum their parts of
//! `log alpha`, and combine the partial sums with `log2 G` shuffles. A warp holds `32 / G` rows
//! at once; it works through *tiles* of up to 32 consecutive rows, and a grid-stride loop over tiles
//! lets any grid cover any batch.

use core::arch::asm;
use core::arch::nvptx;

use crate::math::fma;
use crate::mh::{self, QUAD, WARP_SIZE};
use crate::philox::{self, Key};
use crate::rng;
#[cfg(target_feature = "sm_80")]
use crate::{MAX_STAGED_QUADS_PER_LANE, STAGED_WARPS_PER_BLOCK};

/// PTX versions of [`crate::math`]'s functions (see there for the choice and its accuracy).
pub mod math {
    use core::arch::asm;

    /// The full 64-bit product of two words as `(hi, lo)`: one `mul.wide.u32` (SASS
    /// `IMAD.WIDE.U32`, which writes both halves to a register pair). Written out because LLVM
    /// lowers `u64::from(a) * u64::from(b)` to a 64 x 64-bit multiply, which costs ptxas three
    /// instructions; Philox does two of these per round.
    #[inline(always)]
    pub fn mul_wide_u32(a: u32, b: u32) -> (u32, u32) {
        let (hi, lo): (u32, u32);
        // SAFETY: pure arithmetic on registers; the braces scope the temporary register.
        unsafe {
            asm!("{{ .reg .b64 t; mul.wide.u32 t, {a}, {b}; mov.b64 {{{lo}, {hi}}}, t; }}",
                 a = in(reg32) a, b = in(reg32) b, lo = out(reg32) lo, hi = out(reg32) hi,
                 options(pure, nomem, nostack));
        }
        (hi, lo)
    }

    /// Sine with the SFU's `sin.approx.f32` (most accurate on [-pi, pi]).
    #[inline(always)]
    pub fn sin(x: f32) -> f32 {
        let y: f32;
        // SAFETY: a pure arithmetic instruction on registers.
        unsafe {
            asm!("sin.approx.f32 {y}, {x};", y = out(reg32) y, x = in(reg32) x,
                 options(pure, nomem, nostack));
        }
        y
    }

    /// Cosine with the SFU's `cos.approx.f32` (most accurate on [-pi, pi]).
    #[inline(always)]
    pub fn cos(x: f32) -> f32 {
        let y: f32;
        // SAFETY: a pure arithmetic instruction on registers.
        unsafe {
            asm!("cos.approx.f32 {y}, {x};", y = out(reg32) y, x = in(reg32) x,
                 options(pure, nomem, nostack));
        }
        y
    }

    /// Square root with the SFU's `sqrt.approx.ftz.f32` (relative error at most 2^-23). `.ftz`
    /// drops the subnormal fix-up (three instructions): its arguments here, `-2 ln u`, are 0 or
    /// above 2^-23, never subnormal.
    #[inline(always)]
    pub fn sqrt(x: f32) -> f32 {
        let y: f32;
        // SAFETY: a pure arithmetic instruction on registers.
        unsafe {
            asm!("sqrt.approx.ftz.f32 {y}, {x};", y = out(reg32) y, x = in(reg32) x,
                 options(pure, nomem, nostack));
        }
        y
    }
}

/// This thread's index within its block (CUDA's `threadIdx.x`).
#[inline(always)]
fn thread_idx_x() -> usize {
    // SAFETY: reads the special register %tid.x; always defined inside a kernel.
    unsafe { nvptx::_thread_idx_x() as usize }
}

/// This block's index within the grid (`blockIdx.x`).
#[inline(always)]
fn block_idx_x() -> usize {
    // SAFETY: reads %ctaid.x.
    unsafe { nvptx::_block_idx_x() as usize }
}

/// Threads per block (`blockDim.x`).
#[inline(always)]
fn block_dim_x() -> usize {
    // SAFETY: reads %ntid.x.
    unsafe { nvptx::_block_dim_x() as usize }
}

/// Blocks in the grid (`gridDim.x`).
#[inline(always)]
fn grid_dim_x() -> usize {
    // SAFETY: reads %nctaid.x.
    unsafe { nvptx::_grid_dim_x() as usize }
}

/// This thread's lane within its warp, 0..32. Blocks are launched with a multiple of 32
/// threads, so warps never straddle blocks and `threadIdx.x % 32` is the hardware lane.
#[inline(always)]
fn lane_id() -> usize {
    thread_idx_x() % WARP_SIZE
}

/// The value of `v` held by lane `src_lane` (`shfl.sync.idx.b32`): a broadcast when every lane
/// names the same source, a gather otherwise.
///
/// All 32 lanes of the warp must execute this call together (the member mask is
/// `0xffffffff`); if some lane has exited or is on another branch, the result is undefined.
/// Callers here reach every shuffle with the whole warp: the loops around them are uniform
/// across the warp, and lanes with no row to work on still take part. The same holds for the
/// shuffles of [`group_sum`].
#[inline(always)]
fn shfl_idx(v: f32, src_lane: u32) -> f32 {
    let out: f32;
    // SAFETY: a register exchange among the warp's lanes; all 32 lanes take part.
    unsafe {
        asm!("shfl.sync.idx.b32 {out}, {v}, {s}, 0x1f, 0xffffffff;",
             out = out(reg32) out, v = in(reg32) v, s = in(reg32) src_lane,
             options(nomem, nostack));
    }
    out
}

/// The value of `v` held by lane `lane ^ lane_mask` (`shfl.sync.bfly.b32`). Same rules as
/// [`shfl_idx`].
#[inline(always)]
fn shfl_xor(v: f32, lane_mask: u32) -> f32 {
    let out: f32;
    // SAFETY: a register exchange among the warp's lanes; all 32 lanes take part.
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
/// kernel draws the next step's normals meanwhile). For dim 64: 9 instructions and 4 shuffles
/// in a row, against 30 instructions and 5 shuffles for the butterfly with a compare and a
/// select per level that it replaced (`bench/NOTES.md`, fused F5).
///
/// All 32 lanes of the warp must call this together (see [`shfl_idx`]).
#[inline(always)]
fn group_sum(v: f32, g: usize) -> f32 {
    broadcast_in_segments(segment_total(v, g), 0, g)
}

/// The tree of [`group_sum`]: the sum over each segment of `g` lanes, in the segment's first
/// lane (the other lanes hold partial sums).
#[inline(always)]
fn segment_total(v: f32, g: usize) -> f32 {
    let seg = segments(g);
    let mut v = v;
    if g > 8 {
        v = add_from_lane_below::<8>(add_from_lane_below::<16>(v, seg), seg);
    }
    add_from_lane_below::<1>(
        add_from_lane_below::<2>(add_from_lane_below::<4>(v, seg), seg),
        seg,
    )
}

/// Every lane gets `v` from lane `src` of its segment of `width` lanes (`shfl.sync.idx` with
/// the segment operand).
#[inline(always)]
fn broadcast_in_segments(v: f32, src: u32, width: usize) -> f32 {
    let out: f32;
    // SAFETY: a register exchange among the warp's lanes; all 32 lanes take part.
    unsafe {
        asm!("shfl.sync.idx.b32 {out}, {v}, {s}, {c}, 0xffffffff;",
             out = out(reg32) out, v = in(reg32) v, s = in(reg32) src, c = in(reg32) segments(width),
             options(nomem, nostack));
    }
    out
}

/// The sum of [`group_sum`] for a row whose group's quads are split over `2 g` lanes (the
/// `_split` fused kernels): lane `j < g` holds the first quad of the group's lane `j`, lane
/// `j + g` its second. `first` is the lane's own quad's terms added to 0; `x`, `p` and
/// `(mu, inv_var)` that quad.
///
/// The single step's lane `j` adds its two quads' terms in one chain, first quad then second,
/// and the split keeps that order to the bit: lane `j` passes its chain to lane `j + g`
/// (`shfl.sync.bfly` by `g`), which continues it with its own quad's terms. The upper half's
/// lanes then hold exactly the group's partial sums, summed as [`group_sum`]'s tree does:
/// the total ends in the upper half's first lane, which decides for the row
/// ([`ballot_decision`]). The other lanes return partial values.
#[inline(always)]
fn split_sum(first: f32, x: [f32; 4], p: [f32; 4], target: ([f32; 4], [f32; 4]), g: usize) -> f32 {
    let chained = mh::add_quad_terms(shfl_xor(first, g as u32), x, p, target.0, target.1);
    segment_total(chained, g)
}

/// The decision of each split row: the upper half's first lane decides on the total, and a
/// ballot hands its decision to the row's other lanes (`decider_bit`: that lane's bit). A vote
/// is quicker than a shuffle of the total: (4096, 64) fused went from 0.507 to 0.492 µs per
/// step on the H200 (`bench/NOTES.md`, fused F6).
///
/// All 32 lanes of the warp must call this together (see [`shfl_idx`]).
#[inline(always)]
fn ballot_decision(mine: bool, decider_bit: u32) -> bool {
    let ballot: u32;
    // SAFETY: a vote among the warp's lanes; all 32 lanes take part.
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
#[inline(always)]
fn group_sum_loop(v: f32, g: usize) -> f32 {
    let mut v = v;
    let mut offset = g as u32 / 2;
    while offset > 0 {
        v += shfl_xor(v, offset);
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
fn segments(g: usize) -> u32 {
    let lane: u32;
    // SAFETY: reads the lane's index (0..32) from a special register; touches no memory.
    unsafe {
        asm!("mov.u32 {l}, %laneid;", l = out(reg32) lane, options(pure, nomem, nostack));
    }
    ((((WARP_SIZE - g) as u32) << 8) | 0x1f) + (lane >> 5)
}

/// One level of [`group_sum`]: `v` plus lane `lane + OFFSET`'s `v` where that lane is in this
/// lane's segment (`seg`, from [`segments`]), `v` unchanged elsewhere.
#[inline(always)]
fn add_from_lane_below<const OFFSET: u32>(v: f32, seg: u32) -> f32 {
    let mut v = v;
    // SAFETY: a register exchange among the warp's lanes; all 32 lanes take part (see
    // `shfl_idx`). The predicate and the temporary are local to the braces.
    unsafe {
        asm!("{{ .reg .pred p; .reg .f32 t;",
             "shfl.sync.down.b32 t|p, {v}, {o}, {c}, 0xffffffff;",
             "@p add.f32 {v}, {v}, t; }}",
             v = inout(reg32) v, o = const OFFSET, c = in(reg32) seg,
             options(nomem, nostack));
    }
    v
}

/// Loads the 16-byte quad at `ptr` with one instruction (`ld.global.v4.f32`).
///
/// # Safety
/// `ptr` must point to 4 readable floats in global memory, 16-byte aligned.
#[inline(always)]
unsafe fn load_v4(ptr: *const f32) -> [f32; 4] {
    let (a, b, c, d): (f32, f32, f32, f32);
    // SAFETY: the caller guarantees 16 readable, aligned bytes at ptr.
    unsafe {
        asm!("ld.global.v4.f32 {{{a}, {b}, {c}, {d}}}, [{p}];",
             a = out(reg32) a, b = out(reg32) b, c = out(reg32) c, d = out(reg32) d,
             p = in(reg64) ptr, options(pure, readonly, nostack));
    }
    [a, b, c, d]
}

/// Stores a quad at `ptr` with one instruction (`st.global.v4.f32`).
///
/// # Safety
/// `ptr` must point to 4 writable floats in global memory, 16-byte aligned, that no other
/// thread accesses during the launch.
#[inline(always)]
unsafe fn store_v4(ptr: *mut f32, v: [f32; 4]) {
    // SAFETY: the caller guarantees 16 writable, aligned, unshared bytes at ptr.
    unsafe {
        asm!("st.global.v4.f32 [{p}], {{{a}, {b}, {c}, {d}}};",
             p = in(reg64) ptr, a = in(reg32) v[0], b = in(reg32) v[1], c = in(reg32) v[2],
             d = in(reg32) v[3], options(nostack));
    }
}

/// Loads the 16-byte quad at shared-memory address `addr` (`ld.shared.v4.f32`).
///
/// # Safety
/// `addr` is a 16-byte aligned address inside a shared array of this block, written before the
/// last block barrier, or by this lane's own asynchronous copies that it has waited for.
#[inline(always)]
unsafe fn load_shared_v4(addr: u32) -> [f32; 4] {
    let (a, b, c, d): (f32, f32, f32, f32);
    // SAFETY: the caller guarantees 16 readable, aligned bytes of shared memory at addr.
    unsafe {
        asm!("ld.shared.v4.f32 {{{a}, {b}, {c}, {d}}}, [{p}];",
             a = out(reg32) a, b = out(reg32) b, c = out(reg32) c, d = out(reg32) d,
             p = in(reg32) addr, options(pure, readonly, nostack));
    }
    [a, b, c, d]
}

/// Stores a quad at shared-memory address `addr` (`st.shared.v4.f32`).
///
/// # Safety
/// `addr` is a 16-byte aligned address inside a shared array of this block that no other
/// thread accesses until the next block barrier.
#[inline(always)]
unsafe fn store_shared_v4(addr: u32, v: [f32; 4]) {
    // SAFETY: the caller guarantees 16 writable, aligned, unshared bytes at addr.
    unsafe {
        asm!("st.shared.v4.f32 [{p}], {{{a}, {b}, {c}, {d}}};",
             p = in(reg32) addr, a = in(reg32) v[0], b = in(reg32) v[1], c = in(reg32) v[2],
             d = in(reg32) v[3], options(nostack));
    }
}

/// Starts an asynchronous copy of the 16 bytes at global `src` into shared memory at `dst`
/// (`cp.async.cg`, sm_80 and later): the data travels from L2 into shared memory without passing
/// through registers, and the lane carries on until it waits for it
/// ([`copy_async_wait_for_previous`]).
///
/// # Safety
/// `dst` is 16-byte aligned inside a shared array of this block that no other thread uses, and
/// `src` points to 16 readable, aligned bytes of global memory.
#[cfg(target_feature = "sm_80")]
#[inline(always)]
unsafe fn copy_async_v4(dst: u32, src: *const f32) {
    // SAFETY: the caller guarantees both addresses.
    unsafe {
        asm!("cp.async.cg.shared.global [{d}], [{s}], 16;",
             d = in(reg32) dst, s = in(reg64) src, options(nostack));
    }
}

/// Closes the lane's current group of asynchronous copies (`cp.async.commit_group`).
#[cfg(target_feature = "sm_80")]
#[inline(always)]
fn copy_async_commit() {
    // SAFETY: only marks a group boundary in this lane's queue of copies.
    unsafe { asm!("cp.async.commit_group;", options(nostack)) };
}

/// Waits until every group of copies but the most recent one has landed
/// (`cp.async.wait_group 1`): with one group per row, the row before the last one issued.
#[cfg(target_feature = "sm_80")]
#[inline(always)]
fn copy_async_wait_for_previous() {
    // SAFETY: only waits; the copies' data becomes visible to this lane.
    unsafe { asm!("cp.async.wait_group 1;", options(nostack)) };
}

/// Loads the `valid` leading elements of the quad at `ptr` (the rest are 0): one vector load
/// when `V4` (every quad full and 16-byte aligned), else element by element.
///
/// `V4` is a compile-time parameter so that the choice costs nothing in the hot loop: each
/// entry point exists in both forms and the host picks by `dim % 4`.
///
/// # Safety
/// `ptr .. ptr + valid` must be readable; if `V4`, `valid` must be 4 and `ptr` 16-byte aligned.
#[inline(always)]
unsafe fn load_quad<const V4: bool>(ptr: *const f32, valid: usize) -> [f32; 4] {
    if V4 {
        // SAFETY: forwarded from the caller.
        return unsafe { load_v4(ptr) };
    }
    let mut v = [0.0; 4];
    for (i, slot) in v.iter_mut().enumerate() {
        if i < valid {
            // SAFETY: i < valid, and the caller guarantees `valid` readable floats.
            *slot = unsafe { *ptr.add(i) };
        }
    }
    v
}

/// Stores the `valid` leading elements of `v` at `ptr` (one vector store when `V4`).
///
/// # Safety
/// `ptr .. ptr + valid` must be writable and written by no other thread; if `V4`, `valid` must
/// be 4 and `ptr` 16-byte aligned.
#[inline(always)]
unsafe fn store_quad<const V4: bool>(ptr: *mut f32, v: [f32; 4], valid: usize) {
    if V4 {
        // SAFETY: forwarded from the caller.
        return unsafe { store_v4(ptr, v) };
    }
    for (i, &value) in v.iter().enumerate() {
        if i < valid {
            // SAFETY: i < valid, and the caller guarantees `valid` writable floats.
            unsafe { *ptr.add(i) = value };
        }
    }
}

/// Where a step's random numbers come from: drawn in the kernel, or read from the caller.
///
/// Getting a quad's normals is split in two, so that memory loads can be issued early and
/// computation done late: [`Noise::fetch`] does the loading (caller noise loads its quad;
/// Philox has nothing to load), [`Noise::normals`] the computing (Philox draws; caller noise
/// hands back what was fetched).
trait Noise {
    /// Starts getting the normals of quad `quad` of the row whose first element is element
    /// `offset` of the batch (`valid` of them are used).
    ///
    /// # Safety
    /// For caller noise: the quad lies inside the batch, and `V4` only if it is aligned.
    unsafe fn fetch<const V4: bool>(&self, offset: usize, quad: usize, valid: usize) -> [f32; 4];
    /// The normals of quad `quad` of row `row`, given what [`Noise::fetch`] returned for it.
    fn normals(&self, fetched: [f32; 4], row: u32, quad: usize) -> [f32; 4];
    /// The acceptance uniform of `row`.
    ///
    /// # Safety
    /// For caller noise: `row < batch`.
    unsafe fn uniform(&self, row: usize) -> f32;
}

/// Random numbers drawn in the kernel with Philox (the counter scheme of [`crate::rng`]).
struct PhiloxNoise {
    draws: rng::StepDraws,
}

impl Noise for PhiloxNoise {
    #[inline(always)]
    unsafe fn fetch<const V4: bool>(
        &self,
        _offset: usize,
        _quad: usize,
        _valid: usize,
    ) -> [f32; 4] {
        [0.0; 4]
    }
    #[inline(always)]
    fn normals(&self, _fetched: [f32; 4], row: u32, quad: usize) -> [f32; 4] {
        self.draws.normal_quad(row, quad as u32)
    }
    #[inline(always)]
    unsafe fn uniform(&self, row: usize) -> f32 {
        self.draws.row_uniform(row as u32)
    }
}

/// Random numbers from the caller: `noise[batch * dim]`, `uniform[batch]`.
struct CallerNoise {
    noise: *const f32,
    uniform: *const f32,
}

impl Noise for CallerNoise {
    #[inline(always)]
    unsafe fn fetch<const V4: bool>(&self, offset: usize, quad: usize, valid: usize) -> [f32; 4] {
        // SAFETY: the quad lies in the [batch, dim] noise buffer (the caller's guarantee).
        unsafe { load_quad::<V4>(self.noise.add(offset + QUAD * quad), valid) }
    }
    #[inline(always)]
    fn normals(&self, fetched: [f32; 4], _row: u32, _quad: usize) -> [f32; 4] {
        fetched
    }
    #[inline(always)]
    unsafe fn uniform(&self, row: usize) -> f32 {
        // SAFETY: row < batch and the buffer holds `batch` uniforms.
        unsafe { *self.uniform.add(row) }
    }
}

/// The buffers and sizes every step shares, whatever its noise.
#[derive(Clone, Copy)]
struct StepArgs {
    x: *const f32,
    x_new: *mut f32,
    accepted: *mut u8,
    mu: *const f32,
    inv_var: *const f32,
    batch: usize,
    dim: usize,
    step_size: f32,
    tile_rows: usize,
}

/// Bytes of shared memory per target quad: its 4 `mu` and its 4 `inv_var`.
const TARGET_QUAD_BYTES: u32 = 2 * 16;

impl StepArgs {
    /// Copies the target (`mu`, `inv_var`, zero-padded to whole quads) into the block's shared
    /// memory and returns the copy's address, for the register-resident kernels (rows of at most
    /// `Q * 32` quads). Every thread of the block must call this, once, at the start.
    ///
    /// Why: every row reads the whole target. From global memory those reads are L1 hits that
    /// share the L1TEX pipeline with the stream of `x` misses and need 64-bit addresses held in
    /// registers; from shared memory they are one 32-bit address and a few dozen cycles. On the
    /// H200 this took the Q2 kernel from 64 to 55 registers at the same speed (the step is
    /// issue-bound, see `bench/NOTES.md`), headroom the loop structure below spends.
    ///
    /// The array is declared inside the inline PTX, in its own scope, so each kernel that calls
    /// this gets one (a test of the host library checks that no kernel declares two).
    ///
    /// # Safety
    /// `quads_per_row(dim) <= Q * 32`, `V4` only if `dim % 4 == 0`, and all threads of the
    /// block call it (it ends with a block barrier).
    #[inline(always)]
    unsafe fn stage_target<const Q: usize, const V4: bool>(&self) -> u32 {
        let base: u32;
        // SAFETY: declares a block-shared array and takes its address; no memory is touched.
        unsafe {
            asm!("{{ .shared .align 16 .b8 fused_mh_target[{bytes}]; mov.u32 {base}, fused_mh_target; }}",
                 bytes = const Q * WARP_SIZE * TARGET_QUAD_BYTES as usize,
                 base = out(reg32) base, options(nostack));
        }
        let n_quads = mh::quads_per_row(self.dim);
        let mut q = thread_idx_x();
        // The whole array, zeros past the row: a quad past the row then has 1/sigma^2 = 0 and
        // adds exactly nothing to `log alpha`, so lanes may compute it instead of branching.
        while q < Q * WARP_SIZE {
            // SAFETY: q < Q * 32, the array's length in quads; inside the target if q < n_quads;
            // quad q is this thread's alone until the barrier.
            unsafe {
                let (mu, inv_var) = if q < n_quads {
                    self.target_quad::<V4>(q)
                } else {
                    ([0.0; 4], [0.0; 4])
                };
                let at = base + q as u32 * TARGET_QUAD_BYTES;
                store_shared_v4(at, mu);
                store_shared_v4(at + 16, inv_var);
            }
            q += block_dim_x();
        }
        // SAFETY: every thread of the block reaches this barrier (the caller's contract).
        unsafe { nvptx::_syncthreads() };
        base
    }

    /// Quad `q` of the target from the shared copy at `base` (see [`Self::stage_target`]);
    /// zeros past the row.
    ///
    /// # Safety
    /// `base` comes from `stage_target::<Q, _>` in this launch and `q < Q * 32`.
    #[inline(always)]
    unsafe fn shared_target_quad(base: u32, q: usize) -> ([f32; 4], [f32; 4]) {
        let at = base + q as u32 * TARGET_QUAD_BYTES;
        // SAFETY: inside the staged array, written before the barrier.
        unsafe { (load_shared_v4(at), load_shared_v4(at + 16)) }
    }

    /// The target's `(mu, inv_var)` for quad `q`, zero-padded past `dim` (so the padded
    /// elements' terms vanish, see [`mh::add_quad_terms`]).
    ///
    /// # Safety
    /// `q < quads_per_row(dim)`, and `V4` only if `dim % 4 == 0`.
    #[inline(always)]
    unsafe fn target_quad<const V4: bool>(&self, q: usize) -> ([f32; 4], [f32; 4]) {
        let valid = mh::valid_in_quad(self.dim, q);
        // SAFETY: the quad lies inside mu and inv_var, both of length dim; buffers from
        // cuMemAlloc are 256-byte aligned, so quads are 16-byte aligned.
        unsafe {
            (
                load_quad::<V4>(self.mu.add(QUAD * q), valid),
                load_quad::<V4>(self.inv_var.add(QUAD * q), valid),
            )
        }
    }

    /// Quad `q` of the current state of the row that starts at element `offset`.
    ///
    /// # Safety
    /// `offset` is `row * dim` for a `row < batch`, `q < quads_per_row(dim)`, and `V4` only if
    /// `dim % 4 == 0` (rows then start 16-byte aligned).
    #[inline(always)]
    unsafe fn x_quad<const V4: bool>(&self, offset: usize, q: usize) -> [f32; 4] {
        // SAFETY: the quad lies inside the row, inside x.
        unsafe {
            load_quad::<V4>(
                self.x.add(offset + QUAD * q),
                mh::valid_in_quad(self.dim, q),
            )
        }
    }

    /// Writes quad `q` of the new state of the row that starts at element `offset`.
    ///
    /// # Safety
    /// As [`Self::x_quad`], and this lane is the quad's only writer.
    #[inline(always)]
    unsafe fn store_x_new<const V4: bool>(&self, offset: usize, q: usize, v: [f32; 4]) {
        // SAFETY: x_new has the shape of x.
        unsafe {
            store_quad::<V4>(
                self.x_new.add(offset + QUAD * q),
                v,
                mh::valid_in_quad(self.dim, q),
            )
        }
    }
}

/// A warp's tile: up to `tile_rows` consecutive rows, starting at `first_row`.
#[derive(Clone, Copy)]
struct Tile {
    first_row: usize,
    /// How many of its rows lie inside the batch (0 for a tile past the end).
    rows: u32,
    /// `first_row * dim`: where the tile starts in `x`, `x_new` and the noise.
    offset: usize,
}

impl Tile {
    /// The tile starting at `first_row` (the only 64-bit multiplication of a tile: rows inside
    /// it are reached by adding `dim`s).
    #[inline(always)]
    fn at(args: &StepArgs, first_row: usize) -> Tile {
        let rows = if first_row < args.batch {
            (args.batch - first_row).min(args.tile_rows) as u32
        } else {
            0
        };
        Tile {
            first_row,
            rows,
            offset: first_row * args.dim,
        }
    }

    /// Row `i` of the tile as a Philox counter word (rows are below 2^32, so the low word of
    /// `first_row + i` is the row itself).
    #[inline(always)]
    fn row_word(&self, i: u32) -> u32 {
        (self.first_row as u32).wrapping_add(i)
    }
}

/// What a lane needs to know about the row its group is working on.
#[derive(Clone, Copy)]
struct RowSlot {
    /// The row, as its Philox counter word.
    row: u32,
    /// `row * dim`: the row's first element.
    offset: usize,
    /// False for the groups of the last tile that fall past the batch: they still take part in
    /// the shuffles, but load, store and decide nothing.
    live: bool,
    /// This lane's index in its group, `0..g`.
    lane_in_group: usize,
    /// Lanes per group.
    g: usize,
    /// `log(max(u, 1e-10))` of the row's acceptance uniform (meaningful only if `live`).
    log_u: f32,
}

/// Pass 1 for one quad, from its loaded inputs (`x` and what [`Noise::fetch`] returned): the
/// normals, the proposal, and the quad's terms added to the lane's `partial` sum. Returns
/// `(p, partial)`.
#[inline(always)]
fn propose_quad<N: Noise>(
    args: &StepArgs,
    noise: &N,
    row: u32,
    q: usize,
    input: QuadInput,
    target: ([f32; 4], [f32; 4]),
    partial: f32,
) -> ([f32; 4], f32) {
    let eps = noise.normals(input.fetched, row, q);
    let p = mh::propose(input.x, eps, args.step_size);
    (
        p,
        mh::add_quad_terms(partial, input.x, p, target.0, target.1),
    )
}

/// What a lane loads for one quad of a row before computing: the state, and the fetched noise.
#[derive(Clone, Copy)]
struct QuadInput {
    x: [f32; 4],
    fetched: [f32; 4],
}

impl QuadInput {
    const ZERO: QuadInput = QuadInput {
        x: [0.0; 4],
        fetched: [0.0; 4],
    };

    /// Issues the loads of quad `q` of the row that starts at element `offset`.
    ///
    /// # Safety
    /// `offset = row * dim` with `row < batch`, `q < quads_per_row(dim)`, and `V4` only if
    /// `dim % 4 == 0`.
    #[inline(always)]
    unsafe fn load<N: Noise, const V4: bool>(
        args: &StepArgs,
        noise: &N,
        offset: usize,
        q: usize,
    ) -> Self {
        // SAFETY: forwarded from the caller.
        unsafe {
            QuadInput {
                x: args.x_quad::<V4>(offset, q),
                fetched: noise.fetch::<V4>(offset, q, mh::valid_in_quad(args.dim, q)),
            }
        }
    }
}

/// The inputs of all of a lane's quads of one row (`Q` of them at most), loaded ahead.
#[derive(Clone, Copy)]
struct LaneRow<const Q: usize> {
    quads: [QuadInput; Q],
}

impl<const Q: usize> LaneRow<Q> {
    /// Issues the loads of this lane's quads of the row at `offset` (nothing if `!live`). The
    /// caller uses them one row later: the loads are in flight while the current row computes.
    ///
    /// # Safety
    /// If `live`, `offset = row * dim` with `row < batch`; `V4` only if `dim % 4 == 0`.
    #[inline(always)]
    unsafe fn load<N: Noise, const V4: bool>(
        args: &StepArgs,
        noise: &N,
        offset: usize,
        live: bool,
        lane_in_group: usize,
        g: usize,
    ) -> Self {
        let n_quads = mh::quads_per_row(args.dim);
        let mut quads = [QuadInput::ZERO; Q];
        for (k, input) in quads.iter_mut().enumerate() {
            let q = lane_in_group + k * g;
            if live && q < n_quads {
                // SAFETY: a row inside the batch, and q < n_quads.
                *input = unsafe { QuadInput::load::<N, V4>(args, noise, offset, q) };
            }
        }
        LaneRow { quads }
    }
}

/// Where a lane's inputs for its rows come from: each row's loads are issued one row ahead
/// ([`RowFeed::load_next`]), so they travel from memory while the row before computes
/// (software pipelining: without it each warp waited for its loads, and the H200 ran the step
/// at 67 % of the copy bandwidth).
trait RowFeed<N: Noise, const Q: usize> {
    /// Lanes per row when the feed fixes it at compile time (0: `mh::group_width(dim)`).
    const GROUP: usize = 0;
    /// Whether the warps' rows are interleaved (see `step_tiles`; only with `GROUP == 32`).
    /// Makes the row loaded by the last [`RowFeed::load_next`] the current one, then issues the
    /// loads of this lane's quads (`lane_in_group + k g`, `k < Q`) of the row at `offset`
    /// (nothing if `!live`). On return, the current row's quads are readable.
    ///
    /// # Safety
    /// If `live`, `offset = row * dim` with `row < batch`; `V4` only if `dim % 4 == 0`.
    unsafe fn load_next<const V4: bool>(
        &mut self,
        args: &StepArgs,
        noise: &N,
        offset: usize,
        live: bool,
        lane_in_group: usize,
        g: usize,
    );
    /// The lane's `k`-th quad of the current row (zeros where the lane has no such quad).
    ///
    /// # Safety
    /// `k < Q`.
    unsafe fn quad(&self, k: usize) -> QuadInput;
}

/// Rows loaded ahead into registers: the current row and the next, `Q` quads each.
struct RegisterFeed<const Q: usize> {
    current: LaneRow<Q>,
    ahead: LaneRow<Q>,
}

impl<const Q: usize> RegisterFeed<Q> {
    const EMPTY: Self = RegisterFeed {
        current: LaneRow {
            quads: [QuadInput::ZERO; Q],
        },
        ahead: LaneRow {
            quads: [QuadInput::ZERO; Q],
        },
    };
}

impl<N: Noise, const Q: usize> RowFeed<N, Q> for RegisterFeed<Q> {
    #[inline(always)]
    unsafe fn load_next<const V4: bool>(
        &mut self,
        args: &StepArgs,
        noise: &N,
        offset: usize,
        live: bool,
        lane_in_group: usize,
        g: usize,
    ) {
        self.current = self.ahead;
        // SAFETY: forwarded from the caller.
        self.ahead = unsafe { LaneRow::load::<N, V4>(args, noise, offset, live, lane_in_group, g) };
    }
    #[inline(always)]
    unsafe fn quad(&self, k: usize) -> QuadInput {
        self.current.quads[k]
    }
}

/// Rows loaded ahead into shared memory by asynchronous copies (sm_80 and later), two buffers
/// per warp: the row being computed and the next one, in flight.
///
/// Why: a row of 1024 elements is 8 quads per lane. Held in registers, the row and the next one
/// loaded ahead took 154 registers and the step ran at 59 % of the copy bandwidth on the H200
/// (`bench/NOTES.md`); streamed instead (no row held), each row started with a wait for memory
/// and rejected rows were written twice: 72 %. An asynchronous copy lands in shared memory
/// without a register and without the lane waiting for it until `cp.async.wait_group`, so the
/// next row can be in flight for the whole of the current row at no register cost, and a
/// rejected row is written back from shared memory instead of being re-read from L2.
///
/// Each lane copies, and later reads, only its own 16-byte slots (slot `k` of a buffer is
/// the warp's `k`-th quads side by side, 512 bytes, so a warp's `ld.shared.v4` touches 512
/// consecutive bytes: no bank conflicts): no other lane touches them, so the lane's own
/// `cp.async.wait_group` is all the synchronization there is. A buffer is refilled (the copies
/// for row `r + 2`) only after the lane's last read of it (the write-back of row `r`, whose
/// stores consume the values read) in program order, so the copies cannot overtake the reads.
///
/// Only the in-kernel RNG uses it: caller noise would need its noise staged as well, and it
/// already runs at 98 % of the copy bandwidth with rows in registers.
#[cfg(target_feature = "sm_80")]
struct SharedFeed<const Q: usize, const G: usize> {
    /// This lane's slot 0 of buffer 0.
    base: u32,
    /// The buffer of the current row, 0 or 1.
    current: u32,
    /// How many quads of each row are this lane's (`lane_in_group + G k < quads_per_row`).
    lane_quads: u32,
}

#[cfg(target_feature = "sm_80")]
impl<const Q: usize, const G: usize> SharedFeed<Q, G> {
    /// Bytes of one buffer: a row of `Q` quads per lane.
    const ROW_BYTES: u32 = (Q * WARP_SIZE * 16) as u32;

    /// Declares the block's staging array (a kernel calls this once), finds this lane's slots
    /// in it, and zeroes the slots of the quads the lane never has (rows shorter than `Q * 32`
    /// quads): they are computed with the others (see `row_resident`) but never copied, and a
    /// zero quad against the zero-padded target adds exactly 0.
    ///
    /// # Safety
    /// The block has at most [`STAGED_WARPS_PER_BLOCK`] warps.
    #[inline(always)]
    unsafe fn new(args: &StepArgs) -> Self {
        let base: u32;
        // SAFETY: declares a block-shared array and takes its address; no memory is touched.
        unsafe {
            asm!("{{ .shared .align 16 .b8 fused_mh_staging[{bytes}]; mov.u32 {base}, fused_mh_staging; }}",
                 bytes = const STAGED_WARPS_PER_BLOCK * 2 * Q * WARP_SIZE * 16,
                 base = out(reg32) base, options(nostack));
        }
        let lane = lane_id();
        let g = if G > 0 { G } else { mh::group_width(args.dim) };
        let (n_quads, lane_in_group) = (mh::quads_per_row(args.dim), lane % g);
        let lane_quads = if lane_in_group < n_quads {
            ((n_quads - 1 - lane_in_group) / g + 1) as u32
        } else {
            0
        };
        let warp_in_block = (thread_idx_x() / WARP_SIZE) as u32;
        let feed = SharedFeed {
            base: base + warp_in_block * 2 * Self::ROW_BYTES + lane as u32 * 16,
            current: 1,
            lane_quads,
        };
        for buffer in 0..2 {
            for k in 0..Q {
                if k as u32 >= lane_quads {
                    // SAFETY: the lane's own slot.
                    unsafe { store_shared_v4(feed.slot(buffer, k), [0.0; 4]) };
                }
            }
        }
        feed
    }

    /// This lane's slot for its `k`-th quad in buffer `buffer`.
    #[inline(always)]
    fn slot(&self, buffer: u32, k: usize) -> u32 {
        self.base + buffer * Self::ROW_BYTES + (k * WARP_SIZE * 16) as u32
    }
}

#[cfg(target_feature = "sm_80")]
impl<const Q: usize, const G: usize> RowFeed<PhiloxNoise, Q> for SharedFeed<Q, G> {
    const GROUP: usize = G;

    #[inline(always)]
    unsafe fn load_next<const V4: bool>(
        &mut self,
        args: &StepArgs,
        _noise: &PhiloxNoise,
        offset: usize,
        live: bool,
        lane_in_group: usize,
        g: usize,
    ) {
        self.current ^= 1;
        let next = self.current ^ 1;
        // SAFETY (of the pointer arithmetic): inside the row when live; not dereferenced else.
        let lane_start = args.x.wrapping_add(offset + QUAD * lane_in_group);
        for k in 0..Q {
            if live && (k as u32) < self.lane_quads {
                // SAFETY: the slot is this lane's; quad lane_in_group + g k lies inside the row,
                // inside x, 16-byte aligned (dim % 4 == 0).
                unsafe { copy_async_v4(self.slot(next, k), lane_start.wrapping_add(QUAD * g * k)) };
            }
        }
        // One group per row, even an empty one, so that "all groups but the last" is always
        // exactly the current row.
        copy_async_commit();
        copy_async_wait_for_previous();
    }
    #[inline(always)]
    unsafe fn quad(&self, k: usize) -> QuadInput {
        QuadInput {
            // SAFETY: the lane's own slot, landed (see `load_next`).
            x: unsafe { load_shared_v4(self.slot(self.current, k)) },
            fetched: [0.0; 4],
        }
    }
}

/// One row whose quads fit in registers: at most `Q` quads per lane. The lane's inputs arrive
/// preloaded in `ahead` (loaded while the previous row computed, see `step_tiles`). The target's
/// quads are loaded here, from L1: keeping them in registers for the whole launch (a lane owns
/// the same quads of every row) took 16 more registers, fewer warps fitted on an SM, and the
/// step ran 7 % slower on the H200. The proposal is computed once, kept, and written if
/// accepted.
///
/// # Safety
/// `Q >= mh::quads_per_lane(dim)`, `V4` only if `dim % 4 == 0`; see the entry points.
#[inline(always)]
unsafe fn row_resident<N: Noise, F: RowFeed<N, Q>, const Q: usize, const V4: bool>(
    args: &StepArgs,
    noise: &N,
    slot: RowSlot,
    feed: &F,
    target: u32,
) -> bool {
    let n_quads = mh::quads_per_row(args.dim);
    let mut ps = [[0.0f32; 4]; Q];
    let mut partial = 0.0f32;
    // Loops with a constant trip count, unrolled: the arrays are indexed by constants and stay
    // in registers (a run-time index would send them to local memory).
    //
    // Quad k is computed by every lane as soon as one lane of the warp has it (`k * g <
    // n_quads`, the same in every lane: no divergence): a lane without it computes a quad of
    // zeros against a zero target, which adds exactly 0 to its sum (see `stage_target`), and
    // stores nothing. Cheaper than a branch per lane around each quad.
    //
    // (Computing the first two quads always, as the fused kernel does, removes the branches and
    // 8 % of the instructions here, but ptxas then sank the next row's loads below this
    // arithmetic and the (1M, 64) step lost 2 to 5 points on the H200: `bench/NOTES.md`,
    // session 4, tried and dropped.)
    for k in 0..Q {
        let q = slot.lane_in_group + k * slot.g;
        if k * slot.g < n_quads {
            (ps[k], partial) = propose_quad(
                args,
                noise,
                slot.row,
                q,
                // SAFETY: k < Q.
                unsafe { feed.quad(k) },
                // SAFETY: q < Q * 32, and `target` is the staged copy.
                unsafe { StepArgs::shared_target_quad(target, q) },
                partial,
            );
        }
    }
    let accept = decide(partial, slot);
    for k in 0..Q {
        let q = slot.lane_in_group + k * slot.g;
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
    accept
}

/// Quads a lane of a streamed row has in flight ahead of the one it computes: one 16-byte
/// load (two with caller noise) each. Measured on the H200 (`bench/NOTES.md`, #15): 2 beat 1
/// by 3.6 points at (65536, 1024) with in-kernel RNG; 3, 4 and 6 were no better than 2.
const STREAM_DEPTH: usize = 2;

/// A row of any length, kept nowhere: pass 1 computes each quad's proposal, adds its terms,
/// and writes it to `x_new` at once (speculatively); after the decision, pass 2 writes `x` back
/// over the proposal if the row is rejected. The re-read of `x` comes from L1 or L2 (the lane
/// read it moments before), and the second write of a rejected row meets the first in L2, so
/// memory sees each element read once and written once, as in the register-resident path, and
/// the random numbers are drawn once (for rows much longer than 1024 elements L2 no longer holds
/// them: `bench/NOTES.md`, session 4).
///
/// Pass 1 is software-pipelined: the loads of the lane's next [`STREAM_DEPTH`] quads are in
/// flight while the current quad is computed.
///
/// # Safety
/// `V4` only if `dim % 4 == 0`; see the entry points.
#[inline(always)]
unsafe fn row_streaming<N: Noise, const V4: bool>(
    args: &StepArgs,
    noise: &N,
    slot: RowSlot,
) -> bool {
    let n_quads = mh::quads_per_row(args.dim);
    let mut partial = 0.0f32;
    let mut q = slot.lane_in_group;
    // The lane's next STREAM_DEPTH quads, loaded ahead: a ring shifted by one each quad (the
    // indices stay constants, so it lives in registers).
    let mut ahead = [QuadInput::ZERO; STREAM_DEPTH];
    for (d, input) in ahead.iter_mut().enumerate() {
        let qd = q + d * slot.g;
        if slot.live && qd < n_quads {
            // SAFETY: a row inside the batch (live) and qd < n_quads.
            *input = unsafe { QuadInput::load::<N, V4>(args, noise, slot.offset, qd) };
        }
    }
    while slot.live && q < n_quads {
        let input = ahead[0];
        for d in 1..STREAM_DEPTH {
            ahead[d - 1] = ahead[d];
        }
        let q_next = q + STREAM_DEPTH * slot.g;
        ahead[STREAM_DEPTH - 1] = if q_next < n_quads {
            // SAFETY: a row inside the batch and q_next < n_quads.
            unsafe { QuadInput::load::<N, V4>(args, noise, slot.offset, q_next) }
        } else {
            QuadInput::ZERO
        };
        // SAFETY: q < n_quads.
        let target = unsafe { args.target_quad::<V4>(q) };
        let p;
        (p, partial) = propose_quad(args, noise, slot.row, q, input, target, partial);
        // SAFETY: a row inside the batch, q < n_quads, and quad q is this lane's alone.
        unsafe { args.store_x_new::<V4>(slot.offset, q, p) };
        q += slot.g;
    }
    let accept = decide(partial, slot);
    let mut q = slot.lane_in_group;
    while slot.live && !accept && q < n_quads {
        // Pass 2 in batches: all the batch's loads first, then its stores, so that the lane
        // waits for one round trip to L2 per batch rather than one per quad.
        let mut xs = [[0.0f32; 4]; REWRITE_BATCH];
        for (k, x) in xs.iter_mut().enumerate() {
            let qk = q + k * slot.g;
            if qk < n_quads {
                // SAFETY: a row inside the batch, qk < n_quads.
                *x = unsafe { args.x_quad::<V4>(slot.offset, qk) };
            }
        }
        for (k, x) in xs.iter().enumerate() {
            let qk = q + k * slot.g;
            if qk < n_quads {
                // SAFETY: a row inside the batch, qk < n_quads, and quad qk is this lane's
                // alone.
                unsafe { args.store_x_new::<V4>(slot.offset, qk, *x) };
            }
        }
        q += REWRITE_BATCH * slot.g;
    }
    accept
}

/// Quads per lane that pass 2 of a streamed row reloads before it stores any (see
/// `row_streaming`). Measured on the H200 (`bench/NOTES.md`, #17): one quad at a time, a
/// rejected row of 4096 elements waited for 32 round trips to L2 in a row; batches of 4 gave
/// +6.5 points at (16384, 4096) with in-kernel RNG and +1.6 at (65536, 1024). Batches of 8 took
/// the streaming kernel from 56 to 103 registers and were slower.
const REWRITE_BATCH: usize = 4;

/// The group's decision: sum the partials (every lane of the warp must call this), then
/// `log u < log alpha`. A row past the batch never accepts.
#[inline(always)]
fn decide(partial: f32, slot: RowSlot) -> bool {
    accept_sum(group_sum_loop(partial, slot.g), slot)
}

/// The decision from the group's summed terms. A row past the batch never accepts.
#[inline(always)]
fn accept_sum(sum: f32, slot: RowSlot) -> bool {
    slot.live && mh::accept(slot.log_u, mh::log_alpha(sum))
}

/// The body of every entry point.
///
/// # Thread mapping
/// Warps take *tiles* of `tile_rows` consecutive rows (grid-stride: warp `w` of `W` takes tiles
/// `w, w + W, ...`). At the start of a tile, lane `l < tile_rows` fetches the acceptance uniform
/// of the tile's row `l` and takes its log (one Philox call or one coalesced load, and one `ln`,
/// serve up to 32 rows). The warp then walks the tile `32 / G` rows at a time: group `i` of the
/// warp (lanes `iG .. iG + G`) takes the next row, gets its `log u` from the lane that fetched
/// it (`shfl.sync.idx`), and does the row (register-resident when `Q > 0`, streamed with
/// speculative writes when `Q == 0`). With `Q > 0`, the loads of the warp's next row are issued
/// before the current row is computed, so they travel from memory while it computes (software
/// pipelining: without it, each warp waited for its loads, and the H200 ran the step at 67 % of
/// the copy bandwidth).
///
/// The bookkeeping is kept cheap because it runs once per row and the row's arithmetic is
/// only a few hundred instructions per lane: the tile is the unit of 64-bit index arithmetic
/// ([`Tile::at`]), and rows inside it are counted in 32 bits and reached by adding `dim`.
///
/// # Safety
/// See the entry points.
#[inline(always)]
unsafe fn step_tiles<N: Noise, F: RowFeed<N, Q>, const Q: usize, const V4: bool>(
    args: &StepArgs,
    noise: &N,
    mut feed: F,
) {
    let g = if F::GROUP > 0 {
        F::GROUP
    } else {
        mh::group_width(args.dim)
    };
    let rows_at_once = (WARP_SIZE / g) as u32;
    let lane = lane_id();
    let (lane_in_group, group) = (lane % g, (lane / g) as u32);
    let warps_per_block = block_dim_x() / WARP_SIZE;
    let warp = block_idx_x() * warps_per_block + thread_idx_x() / WARP_SIZE;
    let warps = grid_dim_x() * warps_per_block;
    let tile_rows = args.tile_rows as u32;
    let tile_stride = warps * args.tile_rows;
    // Elements between the rows a group takes one after the other inside a tile, and from a
    // tile's first row to this group's first row.
    let row_step = rows_at_once as usize * args.dim;
    let group_offset = group as usize * args.dim;
    // Register-resident rows have their inputs loaded one row ahead (by `feed`), and their
    // target in shared memory.
    let target = if Q > 0 {
        // SAFETY: the host picks a resident variant only for rows of at most Q quads per lane,
        // so at most Q * 32 quads; every thread of the block is here.
        unsafe { args.stage_target::<Q, V4>() }
    } else {
        0
    };

    let mut tile = Tile::at(args, warp * args.tile_rows);
    // SAFETY: V4 only when dim % 4 == 0 (the host's choice); a row past the batch loads
    // nothing.
    unsafe {
        feed.load_next::<V4>(
            args,
            noise,
            tile.offset + group_offset,
            group < tile.rows,
            lane_in_group,
            g,
        )
    };
    // `tile.rows` is the same in every lane: the loops below are uniform across the warp, as
    // the shuffles inside them require.
    while tile.rows > 0 {
        // The log of the uniform, so that its cost too is shared by the tile.
        let tile_log_u = if (lane as u32) < tile.rows {
            // SAFETY: the row is inside the batch.
            mh::log_uniform(unsafe { noise.uniform(tile.first_row + lane) })
        } else {
            0.0
        };
        let mut first = 0u32;
        let mut offset = tile.offset + group_offset;
        loop {
            let in_tile = first + group;
            let slot = RowSlot {
                row: tile.row_word(in_tile),
                offset,
                live: in_tile < tile.rows,
                lane_in_group,
                g,
                log_u: shfl_idx(tile_log_u, in_tile),
            };
            let last_in_tile = first + rows_at_once >= tile_rows;
            // The warp's next row: the rest of this tile, then the next tile. (Streamed rows,
            // Q = 0, load nothing ahead; this is then dead code.)
            let (next_offset, next_live) = if last_in_tile {
                let next_tile = Tile::at(args, tile.first_row + tile_stride);
                (next_tile.offset + group_offset, group < next_tile.rows)
            } else {
                (offset + row_step, in_tile + rows_at_once < tile.rows)
            };
            // SAFETY: as above.
            unsafe { feed.load_next::<V4>(args, noise, next_offset, next_live, lane_in_group, g) };
            // SAFETY: forwarded from the entry point's contract; `Q` and `V4` were chosen by
            // the host from `dim` (see `Variant`).
            let accept = unsafe {
                if Q == 0 {
                    row_streaming::<N, V4>(args, noise, slot)
                } else {
                    row_resident::<N, F, Q, V4>(args, noise, slot, &feed, target)
                }
            };
            if slot.live && lane_in_group == 0 {
                // SAFETY: the row is inside the batch; lane 0 of the group is its flag's only
                // writer.
                unsafe { *args.accepted.add(tile.first_row + in_tile as usize) = u8::from(accept) };
            }
            if last_in_tile {
                break;
            }
            first += rows_at_once;
            offset += row_step;
        }
        tile = Tile::at(args, tile.first_row + tile_stride);
    }
}
/// The in-kernel-RNG entry points' arguments as the step's inputs.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn rng_step_inputs(
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
) -> (StepArgs, PhiloxNoise) {
    let args = StepArgs {
        x,
        x_new,
        accepted,
        mu,
        inv_var,
        batch: batch as usize,
        dim: dim as usize,
        step_size,
        tile_rows: tile_rows as usize,
    };
    let noise = PhiloxNoise {
        draws: rng::StepDraws::new(rng::key(seed), step),
    };
    (args, noise)
}

/// Defines the two entry points of one [`crate::Variant`]: `Q` quads per lane kept in registers
/// (0: none, the row is streamed), `V4` for 16-byte loads (`dim % 4 == 0`).
macro_rules! entry_points {
    ($q:expr, $v4:literal, $rng:ident, $noise:ident) => {
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
            unsafe { step_tiles::<_, _, { $q }, $v4>(&args, &noise, RegisterFeed::<{ $q }>::EMPTY) }
        }

        /// One Metropolis–Hastings step of every chain, with the caller's random numbers.
        ///
        /// # Parameters
        /// As the in-kernel variant, with `noise`: `[batch, dim]` f32 standard normals and
        /// `uniform`: `[batch]` f32 uniforms on `[0, 1)` in place of the seed and step, then
        /// `tile_rows`.
        ///
        /// # Safety
        /// As the in-kernel variant, and `noise`, `uniform` hold `batch * dim` and `batch` floats.
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
                tile_rows,
            };
            let noise = CallerNoise { noise, uniform };
            // SAFETY: forwarded from this function's contract.
            unsafe { step_tiles::<_, _, { $q }, $v4>(&args, &noise, RegisterFeed::<{ $q }>::EMPTY) }
        }
    };
}

// The register-resident entry points take their array size from the constant the host uses to
// choose them (`Variant::for_step`), so the two can never disagree.
entry_points!(
    mh::MAX_RESIDENT_QUADS_PER_LANE,
    true,
    mh_step_q2_v4,
    mh_step_with_noise_q2_v4
);
entry_points!(
    mh::MAX_RESIDENT_QUADS_PER_LANE,
    false,
    mh_step_q2,
    mh_step_with_noise_q2
);
entry_points!(
    0,
    true,
    mh_step_streaming_v4,
    mh_step_with_noise_streaming_v4
);
entry_points!(
    mh::MAX_RESIDENT_QUADS_CALLER_NOISE,
    true,
    mh_step_q8_v4,
    mh_step_with_noise_q8_v4
);
entry_points!(
    mh::MAX_RESIDENT_QUADS_CALLER_NOISE,
    false,
    mh_step_q8,
    mh_step_with_noise_q8
);
// The general pair: any row length, any alignment. The others are faster specializations of it.
entry_points!(0, false, mh_step, mh_step_with_noise);

/// Defines a staged in-kernel-RNG step (see [`crate::STAGED_ENTRY_POINTS`]): `$q` quads per
/// lane, rows fed by a [`SharedFeed`] with `$g` lanes per row (0: `mh::group_width(dim)`).
macro_rules! staged_entry_point {
    ($name:ident, $q:expr, $g:expr, $index:literal, $what:literal) => {
        #[doc = concat!("One Metropolis–Hastings step of every chain, random numbers drawn in the kernel, for ", $what, "; each row is loaded one row ahead into shared memory by asynchronous copies (see [`SharedFeed`]; sm_80 and later, so only in the newer PTX module).")]
        ///
        /// # Parameters
        /// As `mh_step_q2_v4`.
        ///
        /// # Safety
        #[doc = concat!("As `mh_step_q2_v4`, with [`crate::staged_entry_point`]`(dim) == Some(", $index, ")`, and blocks of exactly [`STAGED_WARPS_PER_BLOCK`] warps.")]
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
                step_tiles::<_, _, { $q }, true>(&args, &noise, feed)
            }
        }
    };
}

staged_entry_point!(
    mh_step_staged_q2_v4,
    mh::MAX_RESIDENT_QUADS_PER_LANE,
    0,
    "0",
    "rows of up to 256 elements in whole quads (`mh_step_q2_v4` in 64 registers instead of 72)"
);
// One warp per row, fixed at compile time: a lane's quads are then 512 bytes apart, and ptxas
// needed 96 registers instead of 128 (20 warps per SM instead of 16).
staged_entry_point!(
    mh_step_staged_q8_v4,
    MAX_STAGED_QUADS_PER_LANE,
    WARP_SIZE,
    "1",
    "rows of 257 to 1024 elements in whole quads (one warp per row; the portable kernels stream them)"
);

/// The per-run inputs of the fused kernel beyond [`StepArgs`]: the random stream, how many
/// steps, and where the statistics go.
#[derive(Clone, Copy)]
struct ChainArgs {
    key: Key,
    /// The step counter of the first of the launch's steps.
    first_step: u64,
    /// Steps in this launch (K).
    steps: u32,
    /// `[batch]` u32: each row adds its accepted steps.
    accepted_count: *mut u32,
    /// `[batch, dim]` f64 running means and sums of squared deviations (only with `STATS`).
    mean: *mut f64,
    m2: *mut f64,
    /// Steps already folded into `mean` and `m2` by earlier launches.
    stats_n: u64,
    /// `[trace_slots, batch, dim]` f32: the thinned states (only if `thin > 0`).
    trace: *mut f32,
    /// Save every `thin`-th state (0: none) ...
    thin: u32,
    /// ... starting after this launch's step `trace_first` (0-based).
    trace_first: u32,
}

/// `K` steps of every chain in one launch, each row's state kept in registers throughout
/// (the fused kernel). A group of `G = group_width(dim)` lanes owns a row for all `K` steps:
/// lane `j` holds quads `j, j + G, ...` of it, as in the single step, so the sums are added in
/// the same order and the result is **bit-identical** to `K` single-step launches.
///
/// Per step and row the only memory traffic left is the target (from shared memory); the row
/// is read once at the start and written once at the end. The acceptance uniforms are shared
/// out like the single step's: every `G` steps (`2 G` split), lane `j` of the row's lanes draws
/// the uniform of step `j` ahead and the others read it with a shuffle, so a lane pays one
/// Philox call per `G` steps for them.
///
/// With `SPLIT` (rows of at most 128 elements, `Q = 1`), the row's lanes are `2 G`: lanes `j`
/// and `j + G` hold the two quads that lane `j` of the group holds otherwise, and
/// [`split_sum`] chains their terms in the same order. Twice the warps for the same rows: for
/// small batches, where one warp per scheduler or two cannot hide the step's latencies.
///
/// With `STATS`, each lane keeps Welford's running mean and sum of squared deviations of its
/// elements over the launch's `K` steps (f32, a few `K` at most, so no drift), and at the end
/// merges them into the run's f64 totals with Chan's formula for combining two samples.
///
/// # Safety
/// As [`step_tiles`] for a variant with `Q >= quads_per_lane(dim)`, `x_new == x` (updated in
/// place: each row is read and written by the lanes that own it), the buffers of
/// [`ChainArgs`] as long as it says, and every trace slot written inside the buffer.
#[inline(always)]
unsafe fn chain_rows<const Q: usize, const V4: bool, const STATS: bool, const SPLIT: bool>(
    args: &StepArgs,
    chain: &ChainArgs,
) {
    let g = mh::group_width(args.dim);
    // Lanes per row: the group's `g`, or `2 g` with its quads split (see `split_sum`).
    let lanes = if SPLIT { 2 * g } else { g };
    let rows_at_once = WARP_SIZE / lanes;
    let lane = lane_id();
    let (lane_in_row, group) = (lane % lanes, lane / lanes);
    // Quad k of this lane: quad `lane_in_row + k g` of the row. Split (Q = 1), lanes j and
    // j + g of the row hold the two quads of the group's lane j.
    let quad_of = |k: usize| lane_in_row + k * g;
    // Split, the lane that decides for the row: the first of its upper half.
    let decider_bit = if SPLIT {
        1u32 << (group * lanes + g)
    } else {
        0
    };
    let warps_per_block = block_dim_x() / WARP_SIZE;
    let warp = block_idx_x() * warps_per_block + thread_idx_x() / WARP_SIZE;
    let row_stride = grid_dim_x() * warps_per_block * rows_at_once;
    let n_quads = mh::quads_per_row(args.dim);
    // SAFETY: Q >= quads_per_lane(dim), so at most Q * 32 quads; every thread is here.
    let target = unsafe { args.stage_target::<Q, V4>() };
    let state_len = args.batch * args.dim;

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
        let computed = |k: usize| k < mh::MAX_RESIDENT_QUADS_PER_LANE || k * g < n_quads;
        let draw =
            |k: usize, draws: &rng::StepDraws| draws.normal_quad(row as u32, quad_of(k) as u32);
        // With few quads per lane, the next step's normals are drawn during this step's sum
        // (below); with many, the lane has independent work enough, and the registers are
        // needed elsewhere (the Q8 kernels with moments would spill).
        let pipelined = Q <= mh::MAX_RESIDENT_QUADS_PER_LANE;
        let mut eps = [[0.0f32; 4]; Q];
        for (k, e) in eps.iter_mut().enumerate() {
            if pipelined && computed(k) {
                *e = draw(k, &rng::StepDraws::new(chain.key, chain.first_step));
            }
        }
        let mut mean = [[0.0f32; 4]; Q];
        let mut m2 = [[0.0f32; 4]; Q];
        let mut count = 0u32;
        let mut my_log_u = 0.0f32;
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
            let in_round = j as usize & (lanes - 1);
            if in_round == 0 {
                let ahead = j as usize + lane_in_row;
                my_log_u = if live && ahead < chain.steps as usize {
                    mh::log_uniform(
                        rng::StepDraws::new(chain.key, step + lane_in_row as u64)
                            .row_uniform(row as u32),
                    )
                } else {
                    0.0
                };
            }
            let slot = RowSlot {
                row: row as u32,
                offset,
                live,
                lane_in_group: lane_in_row,
                g,
                log_u: shfl_idx(my_log_u, (group * lanes + in_round) as u32),
            };
            let mut ps = [[0.0f32; 4]; Q];
            let mut partial = 0.0f32;
            let mut first_target = ([0.0f32; 4], [0.0f32; 4]);
            for k in 0..Q {
                if computed(k) {
                    // SAFETY: q < Q * 32, and `target` is the staged copy.
                    let (mu, inv_var) = unsafe { StepArgs::shared_target_quad(target, quad_of(k)) };
                    if k == 0 {
                        first_target = (mu, inv_var);
                    }
                    if !pipelined {
                        eps[k] = draw(k, &draws);
                    }
                    ps[k] = mh::propose(xs[k], eps[k], args.step_size);
                    partial = mh::add_quad_terms(partial, xs[k], ps[k], mu, inv_var);
                }
            }
            // The next step's normals do not depend on this step's decision: drawing them here
            // gives the warp independent work while the sum travels through the shuffles.
            for (k, e) in eps.iter_mut().enumerate() {
                if pipelined && computed(k) {
                    *e = draw(k, &draws);
                }
            }
            let accept = if SPLIT {
                let total = split_sum(partial, xs[0], ps[0], first_target, g);
                ballot_decision(accept_sum(total, slot), decider_bit)
            } else {
                accept_sum(group_sum(partial, g), slot)
            };
            if accept {
                xs = ps;
            }
            count += u32::from(accept);
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
                                mh::valid_in_quad(args.dim, quad_of(k)),
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
        if STATS {
            // Chan et al.: two samples (n_a, mean_a, m2_a) and (n_b, mean_b, m2_b) combine to
            // n = n_a + n_b, mean = mean_a + delta n_b / n, m2 = m2_a + m2_b + delta^2 n_a n_b / n,
            // with delta = mean_b - mean_a.
            let n_a = chain.stats_n as f64;
            let n_b = f64::from(chain.steps);
            let n = n_a + n_b;
            for k in 0..Q {
                if owned(k) {
                    let q = quad_of(k);
                    let valid = mh::valid_in_quad(args.dim, q);
                    // A constant trip count: `mean[k][i]` stays in registers.
                    for i in 0..QUAD {
                        if i >= valid {
                            continue;
                        }
                        let at = offset + QUAD * q + i;
                        // SAFETY: element `at` is inside the [batch, dim] statistics, and only
                        // this lane touches it.
                        unsafe {
                            let mean_a = *chain.mean.add(at);
                            let delta = f64::from(mean[k][i]) - mean_a;
                            *chain.mean.add(at) = mean_a + delta * (n_b / n);
                            *chain.m2.add(at) +=
                                f64::from(m2[k][i]) + delta * delta * (n_a * n_b / n);
                        }
                    }
                }
            }
        }
        first_row += row_stride;
    }
}

/// Defines one fused entry point: `Q` quads per lane, `V4` for 16-byte loads, `STATS` for the
/// running moments, `SPLIT` for a row's quads spread over twice the lanes (see `chain_rows`).
macro_rules! chain_entry_point {
    ($q:expr, $v4:literal, $stats:literal, $split:literal, $name:ident) => {
        /// `steps` Metropolis–Hastings steps of every chain in one launch, random numbers drawn
        /// in the kernel, the state kept in registers (see `chain_rows`).
        ///
        /// # Parameters
        /// - `x`: `[batch, dim]` f32, the states: read at the start, written at the end.
        /// - `accepted_count`: `[batch]` u32, each row's accepted steps added.
        /// - `mu`, `inv_var`, `batch`, `dim`, `step_size`, `seed`: as the single step.
        /// - `first_step`, `steps`: the step counter of the first step, and how many.
        /// - `mean`, `m2`, `stats_n`: `[batch, dim]` f64 running moments and the steps already
        ///   in them (read only by the `_stats` kernels).
        /// - `trace`, `thin`, `trace_first`: `[slots, batch, dim]` f32; after step
        ///   `trace_first + i * thin` of the launch, the states go to slot `i` (`thin = 0`:
        ///   none).
        ///
        /// # Safety
        /// As the single step's entry points for this variant, plus the buffers above with
        /// the lengths above, and enough trace slots for every save of the launch.
        #[unsafe(no_mangle)]
        pub unsafe extern "ptx-kernel" fn $name(
            x: *mut f32,
            accepted_count: *mut u32,
            mu: *const f32,
            inv_var: *const f32,
            batch: u64,
            dim: u64,
            step_size: f32,
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
            let args = StepArgs {
                x,
                x_new: x,
                accepted: core::ptr::null_mut(),
                mu,
                inv_var,
                batch: batch as usize,
                dim: dim as usize,
                step_size,
                tile_rows: 0,
            };
            let chain = ChainArgs {
                key: rng::key(seed),
                first_step,
                steps,
                accepted_count,
                mean,
                m2,
                stats_n,
                trace,
                thin,
                trace_first,
            };
            // SAFETY: forwarded from this function's contract.
            unsafe { chain_rows::<{ $q }, $v4, $stats, $split>(&args, &chain) }
        }
    };
}

chain_entry_point!(
    mh::MAX_RESIDENT_QUADS_PER_LANE,
    true,
    false,
    false,
    mh_chain_q2_v4
);
chain_entry_point!(
    mh::MAX_RESIDENT_QUADS_PER_LANE,
    false,
    false,
    false,
    mh_chain_q2
);
chain_entry_point!(
    mh::MAX_FUSED_QUADS_PER_LANE,
    true,
    false,
    false,
    mh_chain_q8_v4
);
chain_entry_point!(
    mh::MAX_FUSED_QUADS_PER_LANE,
    false,
    false,
    false,
    mh_chain_q8
);
chain_entry_point!(
    mh::MAX_RESIDENT_QUADS_PER_LANE,
    true,
    true,
    false,
    mh_chain_q2_v4_stats
);
chain_entry_point!(
    mh::MAX_RESIDENT_QUADS_PER_LANE,
    false,
    true,
    false,
    mh_chain_q2_stats
);
chain_entry_point!(
    mh::MAX_FUSED_QUADS_PER_LANE,
    true,
    true,
    false,
    mh_chain_q8_v4_stats
);
chain_entry_point!(
    mh::MAX_FUSED_QUADS_PER_LANE,
    false,
    true,
    false,
    mh_chain_q8_stats
);
// Rows of at most 128 elements with each group's two quads per lane spread over twice the
// lanes: twice the warps for small batches (see `split_sum`), chosen by the host.
chain_entry_point!(1, true, false, true, mh_chain_split_v4);
chain_entry_point!(1, false, false, true, mh_chain_split);

/// The statistics of one single step, for rows too long for the fused kernel: each row adds its
/// accepted flag to its count, and each element's running moments take the new state
/// (Welford's update in f64, `n = stats_n + 1`).
///
/// # Thread mapping
/// One thread per element, grid-stride.
///
/// # Safety
/// `x`, `mean`, `m2` hold `batch * dim` items, `accepted` and `accepted_count` `batch`;
/// `mean`/`m2` may be null when `moments == 0`.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn mh_chain_stats_update(
    x: *const f32,
    accepted: *const u8,
    accepted_count: *mut u32,
    mean: *mut f64,
    m2: *mut f64,
    batch: u64,
    dim: u64,
    stats_n: u64,
    moments: u32,
) {
    let (batch, dim) = (batch as usize, dim as usize);
    let n = (stats_n + 1) as f64;
    let mut e = block_idx_x() * block_dim_x() + thread_idx_x();
    while e < batch * dim {
        // SAFETY: e < batch * dim; the row's count is touched by its element 0 only.
        unsafe {
            if e % dim == 0 {
                *accepted_count.add(e / dim) += u32::from(*accepted.add(e / dim));
            }
            if moments != 0 {
                let v = f64::from(*x.add(e));
                let delta = v - *mean.add(e);
                *mean.add(e) += delta / n;
                *m2.add(e) += delta * (v - *mean.add(e));
            }
        }
        e += grid_dim_x() * block_dim_x();
    }
}

/// Philox4x32-10 of `n` (counter, key) pairs, one per thread: the GPU side of the known-answer
/// test.
///
/// # Parameters
/// - `ctr`: `[n, 4]` u32 counters; `key`: `[n, 2]` u32 keys; `out`: `[n, 4]` u32 (written).
///
/// # Thread mapping
/// Thread `i` of the grid (grid-stride) computes item `i`.
///
/// # Safety
/// The buffers hold `n` items each; one-dimensional grid and block.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn philox4x32_10_many(
    ctr: *const u32,
    key: *const u32,
    out: *mut u32,
    n: u64,
) {
    let mut i = block_idx_x() * block_dim_x() + thread_idx_x();
    while i < n as usize {
        // SAFETY: i < n, and the buffers hold n items of 4, 2 and 4 words.
        unsafe {
            let c = [
                *ctr.add(4 * i),
                *ctr.add(4 * i + 1),
                *ctr.add(4 * i + 2),
                *ctr.add(4 * i + 3),
            ];
            let k = [*key.add(2 * i), *key.add(2 * i + 1)];
            let r = philox::philox4x32_10(c, k);
            for (w, word) in r.iter().enumerate() {
                *out.add(4 * i + w) = *word;
            }
        }
        i += grid_dim_x() * block_dim_x();
    }
}

/// A panic on the GPU cannot unwind or print; `trap` aborts the kernel, and the host sees the
/// launch fail (`CUDA_ERROR_ILLEGAL_INSTRUCTION`). The kernels are written so that nothing in
/// them can panic (raw pointers, no slice indexing).
#[panic_handler]
fn panic(_: &core::panic::PanicInfo) -> ! {
    // SAFETY: `trap` has no preconditions.
    unsafe { nvptx::trap() }
}
