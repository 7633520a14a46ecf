//! Statistics kernels: the statistics of a single step for rows too long for the fused kernel,
//! the sums behind the convergence diagnostics, and the merge of two samples' moments.

use crate::gpu::device::memory::atomic_add_f64;
use crate::gpu::device::thread::{block_dim_x, block_idx_x, grid_dim_x, lane_id, thread_idx_x};
use crate::gpu::device::warp::group_sum_f64;
use crate::layout::WARP_SIZE;

/// The statistics of one single step, for rows too long for the fused kernel: each row adds its
/// accepted flag to its count, and each element's running moments take the new state
/// (Welford's update in f64, `n = stats_n + 1`; with `stats_n = 0` the moments in memory are
/// not read, as after a split closed a half: the first state is written).
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
    let mut e = block_idx_x() * block_dim_x() + thread_idx_x();
    while e < batch * dim {
        // SAFETY: e < batch * dim; the row's count is touched by its element 0 only.
        unsafe {
            // `e % dim`, not `is_multiple_of`, which adds a test for `dim == 0` (dim >= 1 here).
            #[allow(clippy::manual_is_multiple_of)]
            if e % dim == 0 {
                *accepted_count.add(e / dim) += u32::from(*accepted.add(e / dim));
            }
            if moments != 0 {
                let v = f64::from(*x.add(e));
                let (mean_e, m2_e) = if stats_n == 0 {
                    (0.0, 0.0)
                } else {
                    (*mean.add(e), *m2.add(e))
                };
                (*mean.add(e), *m2.add(e)) = crate::moments::push(stats_n + 1, mean_e, m2_e, v);
            }
        }
        e += grid_dim_x() * block_dim_x();
    }
}

/// The per-dimension sums behind nested R-hat and the ESS (the host library's `diagnostics`
/// module has the formulas): for superchains of `superchain` consecutive chains, each chain's
/// mean `mean[c, d]` and sum of squared deviations `m2[c, d]` over `draws` draws, shifted by
/// `mu[d]` (so that converged chains give small numbers and the sums keep their precision):
/// - `out[d]`: the sum over superchains of the superchain mean `m_k - mu_d`;
/// - `out[dim + d]`: the sum of its squares;
/// - `out[2 dim + d]`: the sum over superchains of the within variance `W_k` (the chain means'
///   variance inside the superchain, two passes, plus the mean unbiased chain variance);
/// - `out[3 dim]`: the sum of the chains' accepted counts `accepted[c]` (for the acceptance
///   rate; exact in f64 below 2^53).
///
/// `out` must hold zeros before the launch; the threads add into it atomically.
///
/// # Thread mapping
/// Lane `l` of a warp takes dimension `32 t + l` of the warp's dimension tile `t`; the warps
/// of the grid are spread over tiles and over superchains: warp `w` takes tile `w % tiles`
/// and superchains `w / tiles, w / tiles + W / tiles, ...`. A warp's loads of one chain's
/// means are 32 neighbouring f64: coalesced.
///
/// # Safety
/// `mean`, `m2` hold `batch * dim` f64, `accepted` `batch` u32, `mu` `dim` f32, `out`
/// `3 * dim + 1` zeroed f64;
/// `superchain >= 1` divides `batch`; `draws >= 2`; blocks of a multiple of 32 threads and at
/// least `ceil(dim / 32)` warps in the grid.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn mh_diagnostics_sums(
    mean: *const f64,
    m2: *const f64,
    accepted: *const u32,
    mu: *const f32,
    batch: u64,
    dim: u64,
    superchain: u64,
    draws: u64,
    out: *mut f64,
) {
    let (batch, dim, m) = (batch as usize, dim as usize, superchain as usize);
    let superchains = batch / m;
    let tiles = dim.div_ceil(WARP_SIZE);
    let warp = (block_idx_x() * block_dim_x() + thread_idx_x()) / WARP_SIZE;
    let warps = grid_dim_x() * block_dim_x() / WARP_SIZE;
    // The warps of each tile: `per_tile` of them, taking every `per_tile`-th superchain. The
    // host launches at least `tiles` warps; the ones beyond `tiles * per_tile` have nothing.
    let per_tile = warps / tiles;
    if warp >= tiles * per_tile || warp / tiles >= superchains {
        return; // the whole warp: nothing to do
    }
    // The accepted counts first, by the warps of tile 0 with all their lanes: lane `l` takes
    // every 32nd of the warp's superchains, and a butterfly of shuffles adds the lanes' sums.
    // `%`, not `is_multiple_of`, which adds a test for `tiles == 0` (tiles >= 1 here).
    #[allow(clippy::manual_is_multiple_of)]
    if warp % tiles == 0 {
        let mut count = 0.0f64;
        let mut k = warp / tiles + lane_id() * per_tile;
        while k < superchains {
            for c in k * m..(k + 1) * m {
                // SAFETY: chains k m .. k m + m lie in the batch.
                count += f64::from(unsafe { *accepted.add(c) });
            }
            k += WARP_SIZE * per_tile;
        }
        // SAFETY: all 32 lanes of the warp reach this: the conditions above are the same in
        // every lane of it, and the loop before it ends in every lane (`shfl.sync` waits for
        // the lanes that take longer).
        let total = unsafe { group_sum_f64(count) };
        if lane_id() == 0 {
            // SAFETY: out holds 3 * dim + 1 f64; nothing reads it during the launch.
            unsafe { atomic_add_f64(out.add(3 * dim), total) };
        }
    }
    let d = (warp % tiles) * WARP_SIZE + lane_id();
    if d >= dim {
        return;
    }
    // SAFETY: d < dim.
    let shift = f64::from(unsafe { *mu.add(d) });
    let unbiased = 1.0 / (draws - 1) as f64;
    // Superchain k's mean (shifted) and within variance: the chains' mean variance, plus the
    // variance of their means about the superchain's (two passes; none for one chain).
    let superchain = |k: usize| -> (f64, f64) {
        let first = k * m;
        // SAFETY: chains first .. first + m lie in the batch (m divides batch), d < dim.
        let at = |c: usize| unsafe { *mean.add(c * dim + d) } - shift;
        // SAFETY: as above.
        let var = |c: usize| unsafe { *m2.add(c * dim + d) } * unbiased;
        if m == 1 {
            return (at(first), var(first));
        }
        let mut mean_k = 0.0;
        let mut var_sum = 0.0;
        for c in first..first + m {
            mean_k += at(c);
            var_sum += var(c);
        }
        mean_k /= m as f64;
        let mut between = 0.0;
        for c in first..first + m {
            between += (at(c) - mean_k) * (at(c) - mean_k);
        }
        (mean_k, between / (m - 1) as f64 + var_sum / m as f64)
    };
    let (mut sum, mut sum_sq, mut within) = (0.0f64, 0.0f64, 0.0f64);
    let mut add = |(mean_k, within_k): (f64, f64)| {
        sum += mean_k;
        sum_sq += mean_k * mean_k;
        within += within_k;
    };
    // Four superchains a round: their loads are independent and travel together (one at a
    // time, each warp would wait for memory on every superchain).
    let mut k = warp / tiles;
    while k + 3 * per_tile < superchains {
        // Written out: `[0, 1, 2, 3].map(..)` is a call that LLVM does not always inline, and
        // then the four values go through local memory.
        let four = [
            superchain(k),
            superchain(k + per_tile),
            superchain(k + 2 * per_tile),
            superchain(k + 3 * per_tile),
        ];
        four.into_iter().for_each(&mut add);
        k += 4 * per_tile;
    }
    while k < superchains {
        add(superchain(k));
        k += per_tile;
    }
    // SAFETY: d < dim, so these lie in out's 3 * dim + 1; nothing reads out during the launch.
    unsafe {
        atomic_add_f64(out.add(d), sum);
        atomic_add_f64(out.add(dim + d), sum_sq);
        atomic_add_f64(out.add(2 * dim + d), within);
    }
}

/// Moves the samples of `from` into `into`, element by element (Chan's formula,
/// [`crate::moments::merge`]): `into` holds `into_n` draws per element, `from` `from_n`; after
/// it `into` holds both. The split diagnostics close a half with it, and a run's final moments
/// are its halves merged.
///
/// # Thread mapping
/// One thread per element, grid-stride.
///
/// # Safety
/// `into_mean`, `into_m2`, `from_mean`, `from_m2` hold `len` f64 each; `into` and `from` do not
/// overlap.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn mh_moments_merge(
    into_mean: *mut f64,
    into_m2: *mut f64,
    into_n: u64,
    from_mean: *const f64,
    from_m2: *const f64,
    from_n: u64,
    len: u64,
) {
    let len = len as usize;
    let mut e = block_idx_x() * block_dim_x() + thread_idx_x();
    while e < len {
        // SAFETY: e < len, and this thread alone touches element e.
        unsafe {
            let a = (into_n, *into_mean.add(e), *into_m2.add(e));
            let b = (from_n, *from_mean.add(e), *from_m2.add(e));
            let (mean, m2) = crate::moments::merge(a, b);
            *into_mean.add(e) = mean;
            *into_m2.add(e) = m2;
        }
        e += grid_dim_x() * block_dim_x();
    }
}
