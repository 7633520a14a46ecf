//! The device layer: what `cuda_std` gives a Rust-CUDA kernel, written here over
//! `core::arch::nvptx` and inline PTX, so that the kernels above it read as plain Rust.
//!
//! - [`thread`]: where a thread is (its lane, its block, the grid) — the indices every kernel
//!   starts from.
//! - [`warp`]: shuffles, votes and the group sums built from them. Each is an `unsafe fn`:
//!   its result is undefined unless every lane of the warp calls it together.
//! - [`memory`]: 16-byte vector loads and stores, shared memory, and `cp.async`.
//! - [`sfu`]: the special function units' `sin`, `cos`, `sqrt`, the widening multiply, and
//!   the count of non-finite values (`testp.finite`).
//!
//! # The GPU, as far as these kernels need it
//!
//! **Threads, warps, blocks, grid.** A launch runs a *grid* of *blocks*; a block is up to 1024
//! threads that run on one streaming multiprocessor (SM, 132 of them on an H200) and can share
//! memory and wait for each other at a barrier. The SM issues instructions per *warp* of 32
//! threads (its *lanes*): one instruction, 32 lanes at once. Lanes of a warp may take different
//! branches (they then run one branch after the other, *divergence*), and they can exchange
//! registers directly with a shuffle, which is why the warp, not the block, is the unit these
//! kernels cooperate in.
//!
//! **Registers and occupancy.** Each lane's variables live in registers, 65536 per SM. A
//! kernel that needs 64 registers per thread fits 1024 threads (32 warps) on an SM, one that
//! needs 128 fits half as many. Those resident warps are what hides latency: while one warp
//! waits for memory, another issues. An array indexed by loop counters stays in registers only
//! if the compiler can unroll the loop fully and knows its size; otherwise it goes to *local
//! memory* — per-thread memory in DRAM, slow. (A host test checks that the PTX has none.)
//!
//! **Global memory and coalescing.** `x`, `mu` and the outputs live in global memory (HBM,
//! about 4.2 TB/s measured on the H200 for a device-to-device copy). A warp's load is served in
//! 32-byte sectors: when its 32 lanes read 32 consecutive 16-byte quads, the warp's load is
//! 512 consecutive bytes, every byte used (*coalesced*). The kernels arrange lanes so that
//! every load and store of a warp is like that.
//!
//! **Shared memory.** Each SM has fast on-chip memory that the threads of a block share (up to
//! 227 KB per block on the H200). Writes by one thread become visible to the others after a
//! block barrier (`bar.sync`). The kernels stage the target there (every row reads it), and the
//! staged step stages the next row there with `cp.async`, which copies from global memory
//! without passing through registers.
//!
//! **Convergence.** A shuffle or vote names the lanes that take part (the member mask; here
//! always all 32). Every named lane must execute the same shuffle; if one has exited or is on
//! another branch, the result is undefined. The kernels keep every loop around a collective
//! uniform across the warp: lanes without a row still go round and take part.

pub mod memory;
pub mod sfu;
pub mod thread;
pub mod warp;
