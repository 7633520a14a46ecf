//! One step on device memory that another library owns (a PyTorch tensor, a JAX array), queued
//! on that library's stream: what the Python package's GPU path calls, with the addresses it
//! read from DLPack.
//!
//! Nothing here is copied: the kernel reads the caller's `x` and writes the caller's `x_new`
//! and `accepted`. Because the library knows nothing of memory it did not allocate, the caller
//! vouches for every address (the functions are `unsafe`); what can be checked here, is: the
//! shapes, the alignment the kernels' 16-byte loads need, and that `x_new` does not overlap
//! `x`.

use cudarc::driver::sys::CUstream;
use cudarc::driver::{CudaSlice, DevicePtrMut, PushKernelArg, result};

use super::{DeviceChains, Gpu, ProblemArgs, grid, oom_or};
use crate::dispatch;
use crate::error::{Error, Result};
use crate::problem::Draws;
use crate::problem::check_step_size;
use crate::{DeviceTarget, Shape};

/// A device address another library owns, with the number of elements it holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Borrowed {
    /// The first element's device address.
    pub ptr: u64,
    /// Elements (of the type the buffer's role says) from `ptr` on.
    pub len: usize,
}

/// The caller's random numbers of a borrowed step (its [`Draws::Caller`]): standard normals and
/// uniforms, f32 (finite, and in `[0, 1)`: the caller checks them, the kernel reads them as
/// they are).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BorrowedNoise {
    /// `[batch, dim]` f32.
    pub noise: Borrowed,
    /// `[batch]` f32.
    pub uniform: Borrowed,
}

/// The buffers of one borrowed step: `x[batch, dim]` f32 (read), `x_new[batch, dim]` f32 and
/// `accepted[batch]` bytes (written in full).
#[derive(Clone, Copy, Debug)]
pub struct BorrowedStep {
    /// The current states.
    pub x: Borrowed,
    /// The next states; must not overlap `x`.
    pub x_new: Borrowed,
    /// 1 where the chain moved, 0 where it stayed (a PyTorch `bool` tensor holds exactly this).
    pub accepted: Borrowed,
}

impl Gpu {
    /// One Metropolis–Hastings step of `shape`'s chains on borrowed memory, queued on
    /// `stream`; returns once queued. The target is this library's ([`Gpu::upload_target`]),
    /// and the upload must be complete ([`Gpu::synchronize`] after it) or ordered before the
    /// stream's work.
    ///
    /// # Safety
    /// - `stream` is a live stream of this GPU's context (the device's primary context, which
    ///   PyTorch and JAX use too), and stays alive until the step has run;
    /// - every [`Borrowed`] address is device memory of that context holding at least its
    ///   `len` elements (f32, or bytes for `accepted`), and stays allocated until the step has
    ///   run; nothing else writes `x`, `x_new`, `accepted` or the noise meanwhile.
    pub unsafe fn step_borrowed(
        &self,
        stream: CUstream,
        shape: Shape,
        target: &DeviceTarget,
        step_size: f32,
        draws: Draws<BorrowedNoise>,
        buffers: BorrowedStep,
    ) -> Result<()> {
        target.check_shape(shape)?;
        check_step_size(step_size)?;
        let (len, batch) = (shape.len(), shape.batch());
        check_borrowed("x", buffers.x, len, 16)?;
        check_borrowed("x_new", buffers.x_new, len, 16)?;
        check_borrowed("accepted", buffers.accepted, batch, 1)?;
        let bytes = 4 * len as u64;
        let (a, b) = (buffers.x.ptr, buffers.x_new.ptr);
        if a < b + bytes && b < a + bytes {
            return Err(Error::ShapeMismatch(
                "x_new overlaps x: the step needs a separate output".into(),
            ));
        }
        if let Draws::Caller(BorrowedNoise { noise, uniform }) = draws {
            check_borrowed("noise", noise, len, 16)?;
            check_borrowed("uniform", uniform, batch, 4)?;
        }
        let chosen = dispatch::step(shape, &draws, self.device());
        let function = self.target_function(target.kind, chosen.entry)?;
        let chosen = self.fit_persistent(chosen, function, shape)?;
        // SAFETY: the caller's contract: a live stream of this context.
        let stream = unsafe { self.ctx.wrap_borrowed_stream(stream) };
        let problem = ProblemArgs::new(target, shape, step_size);
        let tile_rows = chosen.tile_rows;
        let mut launch = stream.launch_builder(function);
        launch
            .arg(&buffers.x.ptr)
            .arg(&buffers.x_new.ptr)
            .arg(&buffers.accepted.ptr);
        // The target by address (as always): pushing its buffer would order this stream after
        // the library's own at every launch (an event wait and a record, ~1.5 us).
        problem.push(&mut launch);
        let (first, second) = match draws {
            Draws::Philox { seed, step } => (seed, step),
            Draws::Caller(BorrowedNoise { noise, uniform }) => (noise.ptr, uniform.ptr),
        };
        launch.arg(&first).arg(&second).arg(&tile_rows);
        // SAFETY: the arguments match the step kernels' one signature (as in
        // `launch_step_with`, `kernel/src/gpu/entries.rs`): `(x, x_new, accepted, target,
        // batch: u64, dim: u64, step_size: f32, seed: u64, step: u64 | noise, uniform,
        // tile_rows: u32)`, the pointers as 64-bit addresses. The caller vouches that the
        // borrowed addresses hold the lengths checked above, and they are 16-byte aligned
        // (checked) as the vector loads need; x_new does not overlap x (checked); the target holds
        // its arrays for dim (checked), uploaded before (the caller's contract) and never
        // written again. `dispatch::step` picks the kernel, its tile and
        // its block, as for the library's own buffers.
        unsafe { launch.launch(grid(chosen)) }?;
        Ok(())
    }
}

impl Gpu {
    /// Chains whose states are a device-to-device copy of borrowed memory `x`
    /// (`shape.len()` float32), queued on this library's stream: for a run of many steps on
    /// another library's array ([`Gpu::run`] needs buffers it owns, two states and the flags).
    /// The step counter starts at 0.
    ///
    /// # Safety
    /// `x` addresses device memory of this GPU's context holding `x.len` floats, complete
    /// (no work that writes it pending on any stream) and unchanged until the copy has run
    /// (this library's stream's next synchronization).
    pub unsafe fn chains_from_borrowed(&self, x: Borrowed, shape: Shape) -> Result<DeviceChains> {
        check_borrowed("x", x, shape.len(), 4)?;
        // SAFETY: the copy below writes every element.
        let mut states: CudaSlice<f32> = unsafe { self.alloc_unwritten("x", shape.len()) }?;
        {
            let (dst, _record) = states.device_ptr_mut(&self.stream);
            // SAFETY: dst holds shape.len() floats (just allocated); the caller vouches for
            // the source; both are on this context, and the copy is on this stream.
            unsafe {
                result::memcpy_dtod_async(dst, x.ptr, 4 * shape.len(), self.stream.cu_stream())
            }
            .map_err(|e| oom_or(e, "x", 4 * shape.len()))?;
        }
        Ok(DeviceChains {
            x: states,
            // SAFETY: only a single step writes the next states, every element of them,
            // before they are read (they become the states).
            x_next: unsafe { self.alloc_unwritten("x_next", shape.len()) }?,
            accepted: self.alloc("accepted", shape.batch())?,
            shape,
            step: 0,
        })
    }
}

impl DeviceChains {
    /// The current states, `[batch, dim]` float32 on the device, for handing over (the
    /// chains are done with).
    pub fn into_states(self) -> CudaSlice<f32> {
        self.x
    }
}

/// A borrowed buffer's length and alignment.
fn check_borrowed(what: &str, buffer: Borrowed, len: usize, align: u64) -> Result<()> {
    if buffer.len != len {
        return Err(Error::ShapeMismatch(format!(
            "{what} holds {} elements, the step needs {len}",
            buffer.len
        )));
    }
    if buffer.ptr == 0 || !buffer.ptr.is_multiple_of(align) {
        return Err(Error::ShapeMismatch(format!(
            "{what} at {:#x} is not {align}-byte aligned (a view into another tensor? pass a \
             fresh or cloned one)",
            buffer.ptr
        )));
    }
    Ok(())
}
