//! The model kernel: `steps` random-walk steps of every chain of a model with data
//! ([`crate::model`]), a warp per chain.
//!
//! # Why a warp per chain
//!
//! A model's step reads every data row: a regression's `-2 log alpha` is a sum over `N` rows of
//! a term that needs the row's `K` columns. A warp takes one chain at a time and gives its
//! lanes the rows `lane, lane + 32, ...` — the order the CPU reference sums them in
//! ([`crate::model::DATA_LANES`]), so that the two agree to the bit (the logistic
//! regression's special functions aside) — and a butterfly of
//! shuffles adds the lanes' partials. Every warp reads the same data, which the SMs' caches
//! serve (the design data of the posteriordb cases is a few to a few hundred KB).
//!
//! # A chain's state in shared memory
//!
//! Each warp has its own slice of the block's shared memory: the chain's state `x`, the
//! proposal `p` and the step's normals `eps`. A step goes round the lanes in phases, with a
//! warp barrier ([`sync_warp`]) between them, so that what one lane wrote the others read:
//!
//! 1. lanes `q < ceil(dim / 4)` draw normal quad `q` of the chain ([`StepDraws`]) into `eps`;
//! 2. lane `i % 32` forms element `i` of the proposal `p = x + s_c L eps` (`s_c` the
//!    chain's step size)
//!    ([`propose_element`]);
//! 3. every lane adds its rows' terms, the warp sums them, and every lane finishes
//!    `-2 log alpha` and decides (the same bits in every lane);
//! 4. where the chain accepts, lane `i % 32` copies `p_i` into `x_i`.
//!
//! The chain's state is read from global memory once per launch and written back once, so a
//! launch of many steps (a warm-up window) costs the data reads and the arithmetic alone.
//!
//! # What a launch also records
//!
//! - `accepted[chain]`: the launch's accepted steps of the chain (written).
//! - `sums` (when not null): each warp's window sums ([`window_sums_len`]), added to: the
//!   states after every step, their products, and at the chain's end the product of its sums
//!   over the launch (the host adds the warps' regions up in a fixed order, see
//!   [`mh_model_sums_reduce`]).
//! - `trace` (when not null): after step `t` with `s = t + 1 - trace_first_step` a positive
//!   multiple of `thin`, the chain's state on the constrained scale into slot `s / thin - 1` of
//!   `[slots, chains, dim]` (by lane 0).

use crate::gpu::device::memory::shared_to_generic;
use crate::gpu::device::thread::{block_dim_x, block_idx_x, grid_dim_x, lane_id, thread_idx_x};
use crate::gpu::device::warp::{group_sum_f64, sync_warp, warp_sum_butterfly};
use crate::layout::{QUAD, WARP_SIZE};
use crate::mh;
use crate::model::{MAX_MODEL_DIM, MODEL_WARPS_PER_BLOCK, Model, propose_element, window_sums_len};
use crate::rng::{self, StepDraws};
use core::arch::asm;

/// Where one warp's state, proposal and normals live: three `[MAX_MODEL_DIM]` f32 arrays and
/// one f64 array of the chain's sums, as generic pointers.
struct WarpSlots {
    x: *mut f32,
    p: *mut f32,
    eps: *mut f32,
    chain_sums: *mut f64,
}

/// Bytes of one warp's slots.
const SLOT_BYTES: usize = 3 * 4 * MAX_MODEL_DIM + 8 * MAX_MODEL_DIM;

/// This warp's slots in the block's shared memory.
#[inline(always)]
fn warp_slots() -> WarpSlots {
    let base: u32;
    // SAFETY: declares a block-shared array and takes its address; no memory is touched.
    unsafe {
        asm!("{{ .shared .align 16 .b8 fused_mh_model_slots[{bytes}]; mov.u32 {base}, fused_mh_model_slots; }}",
             bytes = const SLOT_BYTES * MODEL_WARPS_PER_BLOCK,
             base = out(reg32) base, options(nostack));
    }
    let at = base + ((thread_idx_x() / WARP_SIZE) * SLOT_BYTES) as u32;
    let f32s = 4 * MAX_MODEL_DIM as u32;
    WarpSlots {
        x: shared_to_generic(at),
        p: shared_to_generic(at + f32s),
        eps: shared_to_generic(at + 2 * f32s),
        chain_sums: shared_to_generic(at + 3 * f32s) as *mut f64,
    }
}

/// What a model launch is given besides the model (see the module documentation).
pub struct ModelLaunch {
    /// `[chains, dim]` states, read and written.
    pub states: *mut f32,
    /// Chains.
    pub chains: usize,
    /// The proposal's factor `[dim, dim]`, lower triangular.
    pub factor: *const f32,
    /// `[chains]`: each chain's step size.
    pub step_sizes: *const f32,
    /// The Philox seed.
    pub seed: u64,
    /// The first step's counter.
    pub first_step: u64,
    /// Steps this launch.
    pub steps: u32,
    /// `[chains]` accepted counts, written.
    pub accepted: *mut u32,
    /// Null, or `[warps, window_sums_len(dim)]` window sums, added to.
    pub sums: *mut f64,
    /// Null, or `[slots, chains, dim]` kept states.
    pub trace: *mut f32,
    /// Keep every `thin`-th step.
    pub thin: u32,
    /// Steps are counted for keeping from after this one.
    pub trace_first_step: u64,
}

/// The model kernel's body (see the module documentation).
///
/// # Safety
/// `model` points to a copy of the model in device memory whose arrays are device copies; the
/// buffers have the lengths above and do not overlap; `1 <= chains <= 2^32`,
/// `1 <= model.dim() <= MAX_MODEL_DIM`, `thin >= 1`; blocks of `MODEL_WARPS_PER_BLOCK` warps.
#[inline(always)]
pub unsafe fn model_steps<M: Model>(model: &M, l: &ModelLaunch) {
    let dim = model.dim();
    let lane = lane_id();
    let warp = (block_idx_x() * block_dim_x() + thread_idx_x()) / WARP_SIZE;
    let warps = grid_dim_x() * block_dim_x() / WARP_SIZE;
    let slots = warp_slots();
    let key = rng::key(l.seed);
    // The elements `lane, lane + 32, ...` of a state: this lane's in the phases that write.
    let mine = (lane..dim).step_by(WARP_SIZE);
    // SAFETY: the slots are this warp's, at least `dim <= MAX_MODEL_DIM` long (the contract); a
    // slice of one is taken after the warp barrier that ends the phase writing it, and not used
    // after the next phase that writes it begins.
    let read = |ptr: *mut f32| unsafe { core::slice::from_raw_parts(ptr as *const f32, dim) };
    // SAFETY: the factor is `[dim, dim]` (the contract), and nothing writes it.
    let factor = unsafe { core::slice::from_raw_parts(l.factor, dim * dim) };
    // SAFETY: the sums have one region per warp of the grid (the contract).
    let region = (!l.sums.is_null()).then(|| unsafe { l.sums.add(warp * window_sums_len(dim)) });
    let mut chain = warp;
    // Uniform across the warp: every lane has the same chain.
    while chain < l.chains {
        // SAFETY: chain < chains, and the states are `[chains, dim]`.
        let state = unsafe { l.states.add(chain * dim) };
        // SAFETY: chain < chains, and the step sizes are `[chains]`.
        let step_size = unsafe { *l.step_sizes.add(chain) };
        for i in mine.clone() {
            // SAFETY: i < dim: the chain's element, and this lane's slots.
            unsafe {
                *slots.x.add(i) = *state.add(i);
                *slots.chain_sums.add(i) = 0.0;
            }
        }
        // SAFETY (of every `sync_warp` here): the whole warp runs this loop together.
        unsafe { sync_warp() };
        let mut accepted = 0u32;
        for t in l.first_step..l.first_step + u64::from(l.steps) {
            let draws = StepDraws::new(key, t);
            for q in (lane..dim.div_ceil(QUAD)).step_by(WARP_SIZE) {
                let quad = draws.normal_quad(chain as u32, q as u32);
                for (k, &z) in quad.iter().enumerate() {
                    // SAFETY: 4 q + k < 4 ceil(dim / 4) <= MAX_MODEL_DIM (a multiple of 4);
                    // quad q is this lane's.
                    unsafe { *slots.eps.add(q * QUAD + k) = z };
                }
            }
            unsafe { sync_warp() };
            let (x, eps) = (read(slots.x), read(slots.eps));
            for i in mine.clone() {
                let p_i = propose_element(i, x[i], eps, (factor, step_size));
                // SAFETY: element i of the proposal is this lane's.
                unsafe { *slots.p.add(i) = p_i };
            }
            unsafe { sync_warp() };
            let p = read(slots.p);
            let m = model.prepare(x, p);
            let partial = model.add_rows(0.0, lane, x, p, &m);
            // SAFETY: the whole warp is here (every lane went round the rows' loop).
            let data = unsafe { warp_sum_butterfly(partial) };
            let total = model.finish(data, x, p, &m);
            let threshold = mh::threshold(mh::log_uniform(draws.row_uniform(chain as u32)));
            let accept = mh::below_threshold(total, threshold);
            accepted += u32::from(accept);
            // Every lane has read `x` before any lane overwrites it.
            unsafe { sync_warp() };
            for i in mine.clone() {
                // SAFETY: element i is this lane's in this phase; `x`'s slice is not used
                // again (a fresh one is taken after the barrier).
                unsafe {
                    if accept {
                        *slots.x.add(i) = p[i];
                    }
                    if region.is_some() {
                        *slots.chain_sums.add(i) += f64::from(*slots.x.add(i));
                    }
                }
            }
            unsafe { sync_warp() };
            let x = read(slots.x);
            if let Some(region) = region {
                // SAFETY: the region is this warp's.
                unsafe { add_products(region, x, dim, lane) };
            }
            let kept = (t + 1).wrapping_sub(l.trace_first_step);
            let keep = t >= l.trace_first_step && kept.is_multiple_of(u64::from(l.thin));
            if !l.trace.is_null() && keep && lane == 0 {
                let at = ((kept / u64::from(l.thin) - 1) as usize * l.chains + chain) * dim;
                // SAFETY: the trace holds every slot the launch keeps (the contract); this
                // chain's state in a slot is written by this lane alone.
                let out = unsafe { core::slice::from_raw_parts_mut(l.trace.add(at), dim) };
                model.constrain(x, out);
            }
        }
        if let Some(region) = region {
            // SAFETY: the region is this warp's; the whole warp is here.
            unsafe { add_chain_products(region, slots.chain_sums, dim, lane) };
        }
        for i in mine.clone() {
            // SAFETY: as the load above; the last barrier made every lane's `x` visible.
            unsafe { *state.add(i) = *slots.x.add(i) };
        }
        if lane == 0 {
            // SAFETY: chain < chains, and `accepted` is `[chains]`.
            unsafe { *l.accepted.add(chain) = accepted };
        }
        // The slots are free for the next chain only when every lane is done with them.
        unsafe { sync_warp() };
        chain += warps;
    }
}

/// Adds state `x` to the warp's window sums: `x` itself, and `x_i x_j` for `j <= i` (lane
/// `e % 32` owns entry `e`).
///
/// # Safety
/// `region` is this warp's `[window_sums_len(dim)]`, written by no other warp.
#[inline(always)]
unsafe fn add_products(region: *mut f64, x: &[f32], dim: usize, lane: usize) {
    for i in (lane..dim).step_by(WARP_SIZE) {
        // SAFETY: i < dim, inside the region (the contract); entry i is this lane's.
        unsafe { *region.add(i) += f64::from(x[i]) };
    }
    for e in (lane..dim * dim).step_by(WARP_SIZE) {
        let (i, j) = (e / dim, e % dim);
        if j <= i {
            // SAFETY: dim + e < window_sums_len(dim); entry e is this lane's.
            unsafe { *region.add(dim + e) += f64::from(x[i]) * f64::from(x[j]) };
        }
    }
}

/// Adds the product of the chain's sums over the launch, `S_i S_j` for `j <= i`, to the warp's
/// window sums, after a warp barrier (the sums were written by other lanes).
///
/// # Safety
/// As [`add_products`]; `chain_sums` is this warp's `[dim]` slot; the whole warp calls it.
#[inline(always)]
unsafe fn add_chain_products(region: *mut f64, chain_sums: *mut f64, dim: usize, lane: usize) {
    // SAFETY: the whole warp is here (the contract).
    unsafe { sync_warp() };
    for e in (lane..dim * dim).step_by(WARP_SIZE) {
        let (i, j) = (e / dim, e % dim);
        if j <= i {
            // SAFETY: dim + dim^2 + e < window_sums_len(dim); entry e is this lane's; the
            // chain's sums (i, j < dim) were written before the barrier.
            unsafe {
                *region.add(dim + dim * dim + e) += *chain_sums.add(i) * *chain_sums.add(j);
            }
        }
    }
}

/// `out[e] = sum over w < warps of sums[w * len + e]`, a warp per entry (grid-stride): lane
/// `l` adds the regions `w = l, l + 32, ...` in order of `w`, and a butterfly adds the lanes'
/// partials. The order is fixed by `warps` alone, so a run repeats to the bit; the lanes'
/// loads are independent, so they are in flight together (one thread per entry, adding 4224
/// regions one after another, waited 4224 times on a load: 0.5 ms a window).
///
/// # Safety
/// `sums` is `[warps, len]`, `out` is `[len]`; whole warps (a block a multiple of 32 threads).
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn mh_model_sums_reduce(
    sums: *const f64,
    warps: u64,
    len: u64,
    out: *mut f64,
) {
    let lane = lane_id();
    let mut e = (block_idx_x() * block_dim_x() + thread_idx_x()) / WARP_SIZE;
    let grid_warps = grid_dim_x() * block_dim_x() / WARP_SIZE;
    // Uniform across the warp: every lane has the same entry.
    while e < len as usize {
        let mut partial = 0.0f64;
        for w in (lane..warps as usize).step_by(WARP_SIZE) {
            // SAFETY: w < warps and e < len: inside `[warps, len]`.
            partial += unsafe { *sums.add(w * len as usize + e) };
        }
        // SAFETY: the whole warp is here (the loop bound is the same in every lane).
        let total = unsafe { group_sum_f64(partial) };
        if lane == 0 {
            // SAFETY: e < len; entry e is this warp's.
            unsafe { *out.add(e) = total };
        }
        e += grid_warps;
    }
}
