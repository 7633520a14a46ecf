//! The simplest kernel: Philox4x32-10 of many (counter, key) pairs, one thread each.

use crate::gpu::device::thread::{block_dim_x, block_idx_x, grid_dim_x, thread_idx_x};
use crate::philox;

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
