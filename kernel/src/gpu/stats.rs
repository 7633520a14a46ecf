//! The statistics of a single step for rows too long for the fused kernel.

use crate::gpu::device::thread::{block_dim_x, block_idx_x, grid_dim_x, thread_idx_x};

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
