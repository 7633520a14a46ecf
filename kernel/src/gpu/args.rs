//! The buffers and sizes a step shares, the target staged in shared memory, tiles and rows.

use crate::gpu::device::memory::{
    load_quad, load_shared_v4, store_quad, store_shared_v4, store_v4_evict_first,
};
use crate::gpu::device::thread::{block_dim_x, thread_idx_x};
use crate::layout::{self, QUAD, WARP_SIZE};
use crate::philox::Key;
use crate::target::Target;
use core::arch::asm;
use core::arch::nvptx;

/// The buffers and sizes every step shares, whatever its noise.
#[derive(Clone, Copy)]
pub(crate) struct StepArgs {
    pub(crate) x: *const f32,
    pub(crate) x_new: *mut f32,
    pub(crate) accepted: *mut u8,
    /// `[T::ARRAYS, dim]` f32: the target's arrays, packed (see [`crate::target`]).
    pub(crate) target: *const f32,
    pub(crate) batch: usize,
    pub(crate) dim: usize,
    pub(crate) step_size: f32,
    /// `[dim]` f32: the per-dimension proposal scales of the `_scaled` kernels (diagonal
    /// preconditioning, `p = x + scale * eps`); null for the others, which use `step_size`.
    pub(crate) scale: *const f32,
    /// `[batch]` u32: each row adds the steps whose `log alpha` was not finite (the run's
    /// single steps); null: not counted.
    pub(crate) nonfinite: *mut u32,
    /// `[batch]` u32: each row adds its null moves (terms totalling exactly 0: the proposal
    /// rounded back to the state; the run's single steps); null: not counted.
    pub(crate) null_moves: *mut u32,
    pub(crate) tile_rows: usize,
    /// Whether the new state's quads are stored evict-first
    /// ([`store_v4_evict_first`](crate::gpu::device::memory::store_v4_evict_first)): a
    /// constant of each entry point (true only in the paired staged step's `_evict_first`
    /// entries), so each entry compiles to one kind of store.
    pub(crate) evict_first: bool,
}

/// The per-run inputs of the fused kernel (`gpu::chain`) beyond [`StepArgs`]: the random
/// stream, how many steps, and where the statistics go.
#[derive(Clone, Copy)]
pub(crate) struct ChainArgs {
    pub(crate) key: Key,
    /// The step counter of the first of the launch's steps. The launch's steps share its high
    /// word (`steps <= rng::steps_sharing_high_word(first_step)`: the host splits a launch
    /// that would pass a multiple of `2^32`), or the lanes' `rng::QuadDraws` would be wrong.
    pub(crate) first_step: u64,
    /// Steps in this launch (K).
    pub(crate) steps: u32,
    /// `[batch]` u32: each row adds its accepted steps.
    pub(crate) accepted_count: *mut u32,
    /// `[batch]` u32: each row adds its steps whose `log alpha` was not finite.
    pub(crate) nonfinite_count: *mut u32,
    /// `[batch]` u32: each row adds its *null moves*, steps whose terms totalled exactly 0:
    /// the proposal rounded back to the state (accepted, and no move); only with `STATS`.
    pub(crate) null_count: *mut u32,
    /// `[batch, dim]` f64 running means and sums of squared deviations (only with `STATS`).
    pub(crate) mean: *mut f64,
    pub(crate) m2: *mut f64,
    /// Steps already folded into `mean` and `m2` by earlier launches.
    pub(crate) stats_n: u64,
    /// `[trace_slots, batch, dim]` f32: the thinned states (only if `thin > 0`).
    pub(crate) trace: *mut f32,
    /// Save every `thin`-th state (0: none) ...
    pub(crate) thin: u32,
    /// ... starting after this launch's step `trace_first` (0-based).
    pub(crate) trace_first: u32,
}

/// Bytes of shared memory per target quad: one 16-byte quad of each of its arrays.
const fn target_quad_bytes<T: Target>() -> u32 {
    16 * T::ARRAYS as u32
}

/// Copies the target's arrays (`[T::ARRAYS, dim]` at `target`, zero-padded to whole quads) into
/// the block's shared memory, quad by quad (quad `q`'s arrays side by side), and returns the
/// copy's address, for the register-resident kernels (rows of at most `Q * 32` quads). Every
/// thread of the block must call this, once, at the start.
///
/// Why: every row reads the whole target. From global memory those reads are L1 hits that
/// share the L1TEX pipeline with the stream of `x` misses and need 64-bit addresses held in
/// registers; from shared memory they are one 32-bit address and a few dozen cycles. On the
/// H200 this took the Q2 kernel from 64 to 55 registers at the same speed (the step is
/// issue-bound, see `bench/NOTES.md`); lesson 7 (`gpu/lessons/l7_shared_target.rs`) measures
/// it alone.
///
/// The array is declared inside the inline PTX, in its own scope, so each kernel that calls
/// this gets one (a test of the host library checks that no kernel declares two).
///
/// # Safety
/// `quads_per_row(dim) <= Q * 32`, `V4` only if `dim % 4 == 0`, and all threads of the
/// block call it (it ends with a block barrier).
#[inline(always)]
pub(crate) unsafe fn stage_target<T: Target, const Q: usize, const V4: bool>(
    target: *const f32,
    dim: usize,
) -> u32 {
    let base: u32;
    // SAFETY: declares a block-shared array and takes its address; no memory is touched.
    unsafe {
        asm!("{{ .shared .align 16 .b8 fused_mh_target[{bytes}]; mov.u32 {base}, fused_mh_target; }}",
             bytes = const Q * WARP_SIZE * target_quad_bytes::<T>() as usize,
             base = out(reg32) base, options(nostack));
    }
    let n_quads = layout::quads_per_row(dim);
    let mut q = thread_idx_x();
    // The whole array, zeros past the row: a quad of zeros adds exactly nothing to the
    // terms (the `Target` contract), so lanes may compute it instead of branching.
    while q < Q * WARP_SIZE {
        let at = base + q as u32 * target_quad_bytes::<T>();
        for k in 0..T::ARRAYS {
            // SAFETY: q < Q * 32, the array's length in quads; inside the target if
            // q < n_quads; quad q is this thread's alone until the barrier.
            unsafe {
                let array = if q < n_quads {
                    target_array_quad::<V4>(target, dim, k, q)
                } else {
                    [0.0; 4]
                };
                store_shared_v4(at + 16 * k as u32, array);
            }
        }
        q += block_dim_x();
    }
    // SAFETY: every thread of the block reaches this barrier (the caller's contract).
    unsafe { nvptx::_syncthreads() };
    base
}

/// Quad `q` of the target from the shared copy at `base` (see [`stage_target`]);
/// zeros past the row.
///
/// # Safety
/// `base` comes from `stage_target::<T, Q, _>` in this launch and `q < Q * 32`.
#[inline(always)]
pub(crate) unsafe fn shared_target_quad<T: Target>(base: u32, q: usize) -> T::Quad {
    let at = base + q as u32 * target_quad_bytes::<T>();
    // SAFETY: inside the staged array, written before the barrier.
    T::quad(|k| unsafe { load_shared_v4(at + 16 * k as u32) })
}

/// Quad `q` of the target's array `k`, zero-padded past `dim`.
///
/// # Safety
/// As [`StepArgs::target_quad`], and `k < T::ARRAYS`.
#[inline(always)]
pub(crate) unsafe fn target_array_quad<const V4: bool>(
    target: *const f32,
    dim: usize,
    k: usize,
    q: usize,
) -> [f32; 4] {
    let valid = layout::valid_in_quad(dim, q);
    // SAFETY: the quad lies inside array k (`dim` floats from `k * dim`); buffers from
    // cuMemAlloc are 256-byte aligned and, with V4, `dim % 4 == 0`, so quads are 16-byte
    // aligned.
    unsafe { load_quad::<V4>(target.add(k * dim + QUAD * q), valid) }
}

impl StepArgs {
    /// Copies the per-dimension proposal scales (zero-padded to whole quads) into the block's
    /// shared memory and returns the copy's address, as [`stage_target`] does for the
    /// target, for the `_scaled` fused kernels. Every thread of the block must call this, once.
    ///
    /// # Safety
    /// As [`stage_target`], and `scale` holds `dim` floats.
    #[inline(always)]
    pub(crate) unsafe fn stage_scales<const Q: usize, const V4: bool>(&self) -> u32 {
        let base: u32;
        // SAFETY: declares a block-shared array and takes its address; no memory is touched.
        unsafe {
            asm!("{{ .shared .align 16 .b8 fused_mh_scales[{bytes}]; mov.u32 {base}, fused_mh_scales; }}",
                 bytes = const Q * WARP_SIZE * 16,
                 base = out(reg32) base, options(nostack));
        }
        let n_quads = layout::quads_per_row(self.dim);
        let mut q = thread_idx_x();
        while q < Q * WARP_SIZE {
            // SAFETY: q < Q * 32, the array's length in quads; inside `scale` if q < n_quads;
            // quad q is this thread's alone until the barrier.
            unsafe {
                let scale = if q < n_quads {
                    self.scale_quad::<V4>(q)
                } else {
                    [0.0; 4]
                };
                store_shared_v4(base + q as u32 * 16, scale);
            }
            q += block_dim_x();
        }
        // SAFETY: every thread of the block reaches this barrier (the caller's contract).
        unsafe { nvptx::_syncthreads() };
        base
    }

    /// Quad `q` of the proposal scales from the shared copy at `base` (see
    /// [`Self::stage_scales`]).
    ///
    /// # Safety
    /// `base` comes from `stage_scales::<Q, _>` in this launch and `q < Q * 32`.
    #[inline(always)]
    pub(crate) unsafe fn shared_scale_quad(base: u32, q: usize) -> [f32; 4] {
        // SAFETY: inside the staged array, written before the barrier.
        unsafe { load_shared_v4(base + q as u32 * 16) }
    }

    /// The proposal's scales for quad `q`: `step_size` for every element, or with `SCALED`
    /// the quad of the per-dimension `scale` (zero-padded past `dim`).
    ///
    /// # Safety
    /// `q < quads_per_row(dim)`, `V4` only if `dim % 4 == 0`, and with `SCALED` `scale` holds
    /// `dim` floats.
    #[inline(always)]
    pub(crate) unsafe fn proposal_scale<const SCALED: bool, const V4: bool>(
        &self,
        q: usize,
    ) -> [f32; 4] {
        if SCALED {
            // SAFETY: forwarded from the caller.
            unsafe { self.scale_quad::<V4>(q) }
        } else {
            [self.step_size; QUAD]
        }
    }

    /// Quad `q` of `scale`, zero-padded past `dim`.
    ///
    /// # Safety
    /// As [`Self::proposal_scale`] with `SCALED`.
    #[inline(always)]
    unsafe fn scale_quad<const V4: bool>(&self, q: usize) -> [f32; 4] {
        // SAFETY: the quad lies inside scale (length dim), 16-byte aligned as the target's.
        unsafe { load_quad::<V4>(self.scale.add(QUAD * q), layout::valid_in_quad(self.dim, q)) }
    }

    /// The target's quad `q`, zero-padded past `dim` (so the padded elements' terms vanish).
    ///
    /// # Safety
    /// `q < quads_per_row(dim)`, and `V4` only if `dim % 4 == 0`.
    #[inline(always)]
    pub(crate) unsafe fn target_quad<T: Target, const V4: bool>(&self, q: usize) -> T::Quad {
        // SAFETY: forwarded.
        T::quad(|k| unsafe { target_array_quad::<V4>(self.target, self.dim, k, q) })
    }

    /// Quad `q` of the current state of the row that starts at element `offset`.
    ///
    /// # Safety
    /// `offset` is `row * dim` for a `row < batch`, `q < quads_per_row(dim)`, and `V4` only if
    /// `dim % 4 == 0` (rows then start 16-byte aligned).
    #[inline(always)]
    pub(crate) unsafe fn x_quad<const V4: bool>(&self, offset: usize, q: usize) -> [f32; 4] {
        // SAFETY: the quad lies inside the row, inside x.
        unsafe {
            load_quad::<V4>(
                self.x.add(offset + QUAD * q),
                layout::valid_in_quad(self.dim, q),
            )
        }
    }

    /// Writes quad `q` of the new state of the row that starts at element `offset`.
    ///
    /// # Safety
    /// As [`Self::x_quad`], and this lane is the quad's only writer.
    #[inline(always)]
    pub(crate) unsafe fn store_x_new<const V4: bool>(&self, offset: usize, q: usize, v: [f32; 4]) {
        if V4 && self.evict_first {
            // SAFETY: x_new has the shape of x; V4: the quad is whole and 16-byte aligned.
            return unsafe { store_v4_evict_first(self.x_new.add(offset + QUAD * q), v) };
        }
        // SAFETY: x_new has the shape of x.
        unsafe {
            store_quad::<V4>(
                self.x_new.add(offset + QUAD * q),
                v,
                layout::valid_in_quad(self.dim, q),
            )
        }
    }
}

/// A warp's tile: up to `tile_rows` consecutive rows, starting at `first_row`.
#[derive(Clone, Copy)]
pub(crate) struct Tile {
    pub(crate) first_row: usize,
    /// How many of its rows lie inside the batch (0 for a tile past the end).
    pub(crate) rows: u32,
    /// `first_row * dim`: where the tile starts in `x`, `x_new` and the noise.
    pub(crate) offset: usize,
}

impl Tile {
    /// The tile starting at `first_row` (the only 64-bit multiplication of a tile: rows inside
    /// it are reached by adding `dim`s).
    #[inline(always)]
    pub(crate) fn at(args: &StepArgs, first_row: usize) -> Tile {
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
    pub(crate) fn row_word(&self, i: u32) -> u32 {
        (self.first_row as u32).wrapping_add(i)
    }
}

/// What a lane needs to know about the row its group is working on.
#[derive(Clone, Copy)]
pub(crate) struct RowSlot {
    /// The row, as its Philox counter word.
    pub(crate) row: u32,
    /// `row * dim`: the row's first element.
    pub(crate) offset: usize,
    /// False for the groups of the last tile that fall past the batch: they still take part in
    /// the shuffles, but load, store and decide nothing.
    pub(crate) live: bool,
    /// This lane's index in its group, `0..g`.
    pub(crate) lane_in_group: usize,
    /// Lanes per row: the group's, or half of them paired (`RowFeed::PAIRED`).
    pub(crate) g: usize,
    /// `mh::threshold` of `log(max(u, 1e-10))` of the row's acceptance uniform (meaningful only
    /// if `live`).
    pub(crate) threshold: f32,
}
