//! Global and shared memory: 16-byte vector loads and stores, and asynchronous copies.

use core::arch::asm;

/// Loads the 16-byte quad at `ptr` with one instruction (`ld.global.v4.f32`).
///
/// # Safety
/// `ptr` must point to 4 readable floats in global memory, 16-byte aligned.
#[inline(always)]
pub(crate) unsafe fn load_v4(ptr: *const f32) -> [f32; 4] {
    let (a, b, c, d): (f32, f32, f32, f32);
    // SAFETY: the caller guarantees 16 readable, aligned bytes at ptr.
    unsafe {
        asm!("ld.global.v4.f32 {{{a}, {b}, {c}, {d}}}, [{p}];",
             a = out(reg32) a, b = out(reg32) b, c = out(reg32) c, d = out(reg32) d,
             p = in(reg64) ptr, options(pure, readonly, nostack));
    }
    [a, b, c, d]
}

/// Adds `v` to the f64 at `ptr` atomically (`red.global.add.f64`, sm_60 and later): many
/// threads may add to one address in one launch, and every addition counts. The order of the
/// additions is not fixed, so the last bits of the total may differ from run to run.
///
/// # Safety
/// `ptr` points to an 8-byte aligned f64 in global memory that nothing reads during the launch.
#[inline(always)]
pub(crate) unsafe fn atomic_add_f64(ptr: *mut f64, v: f64) {
    // SAFETY: the caller guarantees an aligned global f64; the reduction is atomic.
    unsafe {
        asm!("red.global.add.f64 [{p}], {v};", p = in(reg64) ptr, v = in(reg64) v,
             options(nostack));
    }
}

/// Stores a quad at `ptr` with one instruction (`st.global.v4.f32`).
///
/// # Safety
/// `ptr` must point to 4 writable floats in global memory, 16-byte aligned, that no other
/// thread accesses during the launch.
#[inline(always)]
pub(crate) unsafe fn store_v4(ptr: *mut f32, v: [f32; 4]) {
    // SAFETY: the caller guarantees 16 writable, aligned, unshared bytes at ptr.
    unsafe {
        asm!("st.global.v4.f32 [{p}], {{{a}, {b}, {c}, {d}}};",
             p = in(reg64) ptr, a = in(reg32) v[0], b = in(reg32) v[1], c = in(reg32) v[2],
             d = in(reg32) v[3], options(nostack));
    }
}

/// Stores a quad at `ptr` as [`store_v4`] does, its lines marked *evict-first* in the caches
/// (`st.global.cs`, PTX's "cache streaming" operator): when L2 must make room, these lines go
/// before the lines the launch reads. With these stores, a single step whose state fits in L2
/// ran 3 % faster on an H100 and one that streams from DRAM 1.5 % slower (`bench/NOTES.md`,
/// issue 22, fortieth part), so the host chooses the entry by the step's bytes.
///
/// # Safety
/// As [`store_v4`].
#[inline(always)]
pub(crate) unsafe fn store_v4_evict_first(ptr: *mut f32, v: [f32; 4]) {
    // SAFETY: the caller guarantees 16 writable, aligned, unshared bytes at ptr.
    unsafe {
        asm!("st.global.cs.v4.f32 [{p}], {{{a}, {b}, {c}, {d}}};",
             p = in(reg64) ptr, a = in(reg32) v[0], b = in(reg32) v[1], c = in(reg32) v[2],
             d = in(reg32) v[3], options(nostack));
    }
}

/// Loads the 16-byte quad at shared-memory address `addr` (`ld.shared.v4.f32`).
///
/// # Safety
/// `addr` is a 16-byte aligned address inside a shared array of this block, written before the
/// last block barrier, by this thread itself, or by this lane's own asynchronous copies that
/// it has waited for.
#[inline(always)]
pub(crate) unsafe fn load_shared_v4(addr: u32) -> [f32; 4] {
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
pub(crate) unsafe fn store_shared_v4(addr: u32, v: [f32; 4]) {
    // SAFETY: the caller guarantees 16 writable, aligned, unshared bytes at addr.
    unsafe {
        asm!("st.shared.v4.f32 [{p}], {{{a}, {b}, {c}, {d}}};",
             p = in(reg32) addr, a = in(reg32) v[0], b = in(reg32) v[1], c = in(reg32) v[2],
             d = in(reg32) v[3], options(nostack));
    }
}

/// Stores one float at shared-memory address `addr` (`st.shared.f32`).
///
/// # Safety
/// `addr` is a 4-byte aligned address inside a shared array of this block that no other
/// thread accesses until the next block barrier.
#[inline(always)]
pub(crate) unsafe fn store_shared_f32(addr: u32, v: f32) {
    // SAFETY: the caller guarantees 4 writable, aligned, unshared bytes at addr.
    unsafe {
        asm!("st.shared.f32 [{p}], {v};", p = in(reg32) addr, v = in(reg32) v, options(nostack));
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
pub(crate) unsafe fn copy_async_v4(dst: u32, src: *const f32) {
    // SAFETY: the caller guarantees both addresses.
    unsafe {
        asm!("cp.async.cg.shared.global [{d}], [{s}], 16;",
             d = in(reg32) dst, s = in(reg64) src, options(nostack));
    }
}

/// Closes the lane's current group of asynchronous copies (`cp.async.commit_group`).
#[cfg(target_feature = "sm_80")]
#[inline(always)]
pub(crate) fn copy_async_commit() {
    // SAFETY: only marks a group boundary in this lane's queue of copies.
    unsafe { asm!("cp.async.commit_group;", options(nostack)) };
}

/// Waits until every group of copies but the most recent one has landed
/// (`cp.async.wait_group 1`): with one group per row, the row before the last one issued.
#[cfg(target_feature = "sm_80")]
#[inline(always)]
pub(crate) fn copy_async_wait_for_previous() {
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
pub(crate) unsafe fn load_quad<const V4: bool>(ptr: *const f32, valid: usize) -> [f32; 4] {
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
pub(crate) unsafe fn store_quad<const V4: bool>(ptr: *mut f32, v: [f32; 4], valid: usize) {
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

/// The generic address of shared-memory address `addr` (`cvta.shared.u64`): a pointer that
/// ordinary loads, stores and slices can use.
#[inline(always)]
pub(crate) fn shared_to_generic(addr: u32) -> *mut f32 {
    let generic: u64;
    // SAFETY: an address conversion; no memory is touched.
    unsafe {
        asm!("cvt.u64.u32 {g}, {a}; cvta.shared.u64 {g}, {g};",
             g = out(reg64) generic, a = in(reg32) addr, options(pure, nomem, nostack));
    }
    generic as *mut f32
}
