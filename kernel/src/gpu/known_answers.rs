//! The simplest kernels: one function of many inputs, one thread each, for the tests that
//! check the device's arithmetic against known answers: Philox4x32-10 (bit for bit against
//! Random123's vectors and the CPU) and the Box–Muller transform (within its stated error of
//! f64, at every uniform it can see).

use crate::gpu::device::thread::{block_dim_x, block_idx_x, grid_dim_x, thread_idx_x};
use crate::philox;
use crate::rng;

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

/// The Box–Muller transform ([`rng::box_muller`], the GPU's normals) of `n` pairs of words, one
/// pair per thread.
///
/// # Parameters
/// - `words`: `[n, 2]` u32, the two words of each pair; `out`: `[n, 2]` f32 (written).
///
/// # Thread mapping
/// Thread `i` of the grid (grid-stride) transforms pair `i`.
///
/// # Safety
/// The buffers hold `n` pairs each; one-dimensional grid and block.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn box_muller_many(words: *const u32, out: *mut f32, n: u64) {
    let mut i = block_idx_x() * block_dim_x() + thread_idx_x();
    while i < n as usize {
        // SAFETY: i < n, and both buffers hold n pairs.
        unsafe {
            let z = rng::box_muller(*words.add(2 * i), *words.add(2 * i + 1));
            *out.add(2 * i) = z[0];
            *out.add(2 * i + 1) = z[1];
        }
        i += grid_dim_x() * block_dim_x();
    }
}
