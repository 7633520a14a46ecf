//! Everything that exists only on the GPU: thread indices, warp shuffles, PTX math
//! instructions and the kernel entry points. Compiled only for `nvptx64-nvidia-cuda`.
//!
//! # The execution model in one paragraph
//!
//! A launch runs a *grid* of *blocks*; each block is a group of threads that run on one
//! streaming multiprocessor (SM). Threads are scheduled in *warps* of 32 that issue one
//! instruction at a time together, so the natural unit of cooperation is the warp: its lanes
//! can exchange registers directly with a shuffle, with no shared memory and no barrier. Here a
//! warp owns a row (a chain): 32 lanes load the row's elements side by side, so each load
//! instruction of the warp touches consecutive addresses (*coalesced*: one 512-byte access
//! instead of 32 scattered ones), sum their parts of `log alpha`, and combine the 32 partial
//! sums with five shuffles. A block holds several warps (several rows); the grid covers the
//! batch, and a grid-stride loop lets any grid size cover any number of rows.

use core::arch::asm;
use core::arch::nvptx;

use crate::mh::{self, QUAD, WARP_SIZE};
use crate::philox::{self, Key};
use crate::rng;

/// PTX versions of [`crate::math`]'s functions (see there for the choice and its accuracy).
pub mod math {
    use core::arch::asm;

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

    /// Correctly rounded square root (`sqrt.rn.f32`): the same bits as the CPU's.
    #[inline(always)]
    pub fn sqrt(x: f32) -> f32 {
        let y: f32;
        // SAFETY: a pure arithmetic instruction on registers.
        unsafe {
            asm!("sqrt.rn.f32 {y}, {x};", y = out(reg32) y, x = in(reg32) x,
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

/// The value of `v` held by lane `lane ^ lane_mask` (`shfl.sync.bfly.b32`).
///
/// All 32 lanes of the warp must execute this call together (the member mask is
/// `0xffffffff`); if some lane has exited or is on another branch, the result is undefined.
/// Callers here call it only after loops whose exit is uniform across the warp.
#[inline(always)]
fn shfl_xor(v: f32, lane_mask: u32) -> f32 {
    let out: f32;
    // SAFETY: a register exchange among the warp's lanes; all 32 lanes take part (see above).
    unsafe {
        asm!("shfl.sync.bfly.b32 {out}, {v}, {m}, 0x1f, 0xffffffff;",
             out = out(reg32) out, v = in(reg32) v, m = in(reg32) lane_mask,
             options(nomem, nostack));
    }
    out
}

/// The sum of `v` over the warp, in **every** lane (a butterfly reduction: 5 shuffles).
///
/// Example: lane `l` passes `l`; every lane gets `0 + 1 + ... + 31 = 496`. The order of the
/// additions is the one [`mh::warp_sum_emulated`] reproduces on the CPU.
#[inline(always)]
fn warp_sum(v: f32) -> f32 {
    let mut v = v;
    let mut offset = WARP_SIZE as u32 / 2;
    while offset > 0 {
        v += shfl_xor(v, offset);
        offset /= 2;
    }
    v
}

/// Four consecutive floats, aligned to 16 bytes, so that one load or store instruction
/// (`ld.global.v4.f32`) moves a whole quad.
#[derive(Clone, Copy)]
#[repr(C, align(16))]
struct F32x4([f32; 4]);

/// Loads the `valid` leading elements of the quad starting at `ptr` (the rest are 0).
///
/// # Safety
/// `ptr .. ptr + valid` must be readable; if `vector` is true, `valid` must be 4 and `ptr`
/// 16-byte aligned.
#[inline(always)]
unsafe fn load_quad(ptr: *const f32, valid: usize, vector: bool) -> [f32; 4] {
    if vector {
        // SAFETY: the caller guarantees 4 readable, 16-byte aligned floats.
        unsafe { (*(ptr as *const F32x4)).0 }
    } else {
        let mut v = [0.0; 4];
        for (i, slot) in v.iter_mut().enumerate() {
            if i < valid {
                // SAFETY: i < valid, and the caller guarantees `valid` readable floats.
                *slot = unsafe { *ptr.add(i) };
            }
        }
        v
    }
}

/// Stores the `valid` leading elements of `v` at `ptr`.
///
/// # Safety
/// `ptr .. ptr + valid` must be writable and written by no other thread; if `vector` is true,
/// `valid` must be 4 and `ptr` 16-byte aligned.
#[inline(always)]
unsafe fn store_quad(ptr: *mut f32, v: [f32; 4], valid: usize, vector: bool) {
    if vector {
        // SAFETY: the caller guarantees 4 writable, 16-byte aligned floats.
        unsafe { *(ptr as *mut F32x4) = F32x4(v) }
    } else {
        for (i, &value) in v.iter().enumerate() {
            if i < valid {
                // SAFETY: i < valid, and the caller guarantees `valid` writable floats.
                unsafe { *ptr.add(i) = value };
            }
        }
    }
}

/// Where a step's random numbers come from: drawn in the kernel, or read from the caller.
trait Noise {
    /// The standard normals of quad `quad` of `row` (`valid` of them are used).
    ///
    /// # Safety
    /// For caller noise: the buffer covers the whole batch (see the entry points).
    unsafe fn quad(&self, row: usize, quad: usize, valid: usize, vector: bool) -> [f32; 4];
    /// The acceptance uniform of `row`.
    ///
    /// # Safety
    /// As for [`Noise::quad`].
    unsafe fn uniform(&self, row: usize) -> f32;
}

/// Random numbers drawn in the kernel with Philox (the counter scheme of [`crate::rng`]).
struct PhiloxNoise {
    key: Key,
    step: u64,
}

impl Noise for PhiloxNoise {
    #[inline(always)]
    unsafe fn quad(&self, row: usize, quad: usize, _valid: usize, _vector: bool) -> [f32; 4] {
        rng::normal_quad(self.key, row as u32, self.step, quad as u32)
    }
    #[inline(always)]
    unsafe fn uniform(&self, row: usize) -> f32 {
        rng::row_uniform(self.key, row as u32, self.step)
    }
}

/// Random numbers from the caller: `noise[batch * dim]`, `uniform[batch]`.
struct CallerNoise {
    noise: *const f32,
    uniform: *const f32,
    dim: usize,
}

impl Noise for CallerNoise {
    #[inline(always)]
    unsafe fn quad(&self, row: usize, quad: usize, valid: usize, vector: bool) -> [f32; 4] {
        // SAFETY: the quad lies in row `row` of the [batch, dim] noise buffer.
        unsafe { load_quad(self.noise.add(row * self.dim + QUAD * quad), valid, vector) }
    }
    #[inline(always)]
    unsafe fn uniform(&self, row: usize) -> f32 {
        // SAFETY: row < batch and the buffer holds `batch` uniforms.
        unsafe { *self.uniform.add(row) }
    }
}

/// The buffers and sizes every step shares, whatever its noise.
struct StepArgs {
    x: *const f32,
    x_new: *mut f32,
    accepted: *mut u8,
    mu: *const f32,
    inv_var: *const f32,
    batch: usize,
    dim: usize,
    step_size: f32,
}

/// The body of both entry points: one warp per row, a grid-stride loop over rows.
///
/// Two passes over the row. Pass 1 draws the proposal and sums the lane's share of
/// `log alpha`; the warp reduces it and every lane decides. Pass 2 writes the row: the proposal
/// (recomputed bit for bit from the same counters) if accepted, else `x`. Nothing is kept in
/// registers across the passes, so any `dim` works; the re-read of `x` in pass 2 comes mostly
/// from cache, since the warp read it moments before.
///
/// # Safety
/// See the entry points.
#[inline(always)]
unsafe fn step_rows<N: Noise>(args: &StepArgs, noise: &N) {
    let StepArgs {
        x,
        x_new,
        accepted,
        mu,
        inv_var,
        batch,
        dim,
        step_size,
    } = *args;
    let warps_per_block = block_dim_x() / WARP_SIZE;
    let lane = lane_id();
    let n_quads = mh::quads_per_row(dim);
    // Rows start 16-byte aligned exactly when dim is a multiple of 4 (buffers from cuMemAlloc
    // are 256-byte aligned): then every quad is one vector load.
    let vector = dim % QUAD == 0;

    let mut row = block_idx_x() * warps_per_block + thread_idx_x() / WARP_SIZE;
    while row < batch {
        let row_start = row * dim;

        // Pass 1: this lane's share of the sum of log-alpha terms.
        let mut partial = 0.0f32;
        let mut q = lane;
        while q < n_quads {
            let valid = mh::valid_in_quad(dim, q);
            let first = QUAD * q;
            // SAFETY: quad q of this row lies inside x (row < batch, first + valid <= dim),
            // and inside mu and inv_var (first + valid <= dim); rows and quads are aligned
            // when `vector` (see above).
            let (xq, eps, mq, ivq) = unsafe {
                (
                    load_quad(x.add(row_start + first), valid, vector),
                    noise.quad(row, q, valid, vector),
                    load_quad(mu.add(first), valid, vector),
                    load_quad(inv_var.add(first), valid, vector),
                )
            };
            let p = mh::propose(xq, eps, step_size);
            partial += mh::quad_term_sum(xq, p, mq, ivq, valid);
            q += WARP_SIZE;
        }

        // The warp's total, in every lane; `row` is the same for the whole warp, so all 32
        // lanes reach this shuffle together.
        let log_alpha = mh::log_alpha(warp_sum(partial));
        // SAFETY: row < batch.
        let log_u = mh::log_uniform(unsafe { noise.uniform(row) });
        let accept = mh::accept(log_u, log_alpha);

        // Pass 2: write the row.
        let mut q = lane;
        while q < n_quads {
            let valid = mh::valid_in_quad(dim, q);
            let at = row_start + QUAD * q;
            // SAFETY: as in pass 1; x_new has the shape of x, and this lane is the only
            // writer of this quad.
            unsafe {
                let xq = load_quad(x.add(at), valid, vector);
                let out = if accept {
                    mh::propose(xq, noise.quad(row, q, valid, vector), step_size)
                } else {
                    xq
                };
                store_quad(x_new.add(at), out, valid, vector);
            }
            q += WARP_SIZE;
        }
        if lane == 0 {
            // SAFETY: row < batch; lane 0 is this row's only writer of accepted[row].
            unsafe { *accepted.add(row) = u8::from(accept) };
        }

        row += grid_dim_x() * warps_per_block;
    }
}

/// One Metropolis–Hastings step of every chain, with random numbers drawn in the kernel.
///
/// # Parameters
/// - `x`: `[batch, dim]` f32, row-major: the current states (read).
/// - `x_new`: `[batch, dim]` f32: the next states (written in full); must not overlap `x`.
/// - `accepted`: `[batch]` u8: 1 where the row moved, 0 where it stayed (written in full).
/// - `mu`, `inv_var`: `[dim]` f32: the target's mean and `1 / sigma^2`.
/// - `step_size`: the proposal's standard deviation multiplier.
/// - `seed`, `step`: the Philox key and the step counter (see [`crate::rng`]).
///
/// # Thread mapping
/// One warp per row: warp `w` of the grid takes rows `w, w + W, ...` (W warps in the grid);
/// lane `l` owns quads `l, l + 32, ...` of its row (elements `4q .. 4q + 4`).
///
/// # Safety
/// The caller guarantees the buffer lengths above, `1 <= batch <= 2^32`,
/// `1 <= dim < 2^32`, `batch * dim` without overflow, a block size that is a multiple of 32,
/// and a one-dimensional grid and block. Nothing is checked here.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn mh_step(
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
) {
    let args = StepArgs {
        x,
        x_new,
        accepted,
        mu,
        inv_var,
        batch: batch as usize,
        dim: dim as usize,
        step_size,
    };
    let noise = PhiloxNoise {
        key: rng::key(seed),
        step,
    };
    // SAFETY: forwarded from this function's contract.
    unsafe { step_rows(&args, &noise) }
}

/// One Metropolis–Hastings step of every chain, with the caller's random numbers.
///
/// # Parameters
/// As [`mh_step`], with `noise`: `[batch, dim]` f32 standard normals and `uniform`: `[batch]`
/// f32 uniforms on `[0, 1)` in place of the seed and step.
///
/// # Thread mapping
/// As [`mh_step`].
///
/// # Safety
/// As [`mh_step`], and `noise`, `uniform` hold `batch * dim` and `batch` floats.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn mh_step_with_noise(
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
) {
    let args = StepArgs {
        x,
        x_new,
        accepted,
        mu,
        inv_var,
        batch: batch as usize,
        dim: dim as usize,
        step_size,
    };
    let noise = CallerNoise {
        noise,
        uniform,
        dim: dim as usize,
    };
    // SAFETY: forwarded from this function's contract.
    unsafe { step_rows(&args, &noise) }
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
