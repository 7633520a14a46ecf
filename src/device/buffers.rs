//! What the GPU holds for a run: the chains' two state buffers and flags, the target, and a
//! step's caller noise; each allocated and copied back to the host fallibly ([`oom_or`],
//! [`super::download`]).

use std::sync::Arc;

use cudarc::driver::{CudaSlice, CudaStream, DeviceRepr, ValidAsZeroBits};

use super::{Gpu, download, oom_or};
use crate::TargetKind;
use crate::error::Result;
use crate::problem::{Shape, check_target_dim};

/// The device buffers' allocations, each failure the library's out-of-memory error naming the
/// buffer ([`oom_or`]).
impl Gpu {
    /// A new device buffer of `len` elements, zeroed.
    pub(super) fn alloc<T: DeviceRepr + ValidAsZeroBits>(
        &self,
        what: &'static str,
        len: usize,
    ) -> Result<CudaSlice<T>> {
        self.stream
            .alloc_zeros(len)
            .map_err(|e| oom_or(e, what, len * size_of::<T>()))
    }

    /// A new device buffer of `len` elements, not zeroed: at a million chains a memset costs
    /// a tenth of a millisecond per 256 MB, spent for nothing on a buffer that is written
    /// before it is read.
    ///
    /// # Safety
    /// Every element is written before anything reads it (the caller says by what).
    pub(super) unsafe fn alloc_unwritten<T: DeviceRepr>(
        &self,
        what: &'static str,
        len: usize,
    ) -> Result<CudaSlice<T>> {
        // SAFETY: the caller's contract.
        unsafe { self.stream.alloc(len) }.map_err(|e| oom_or(e, what, len * size_of::<T>()))
    }

    /// A new device buffer holding a copy of `host` (allocated, not zeroed, then copied).
    pub(super) fn upload<T: DeviceRepr>(
        &self,
        what: &'static str,
        host: &[T],
    ) -> Result<CudaSlice<T>> {
        self.stream
            .clone_htod(host)
            .map_err(|e| oom_or(e, what, size_of_val(host)))
    }
}

/// Some chains' states copied on the device at one moment ([`DeviceChains::snapshot_rows`]),
/// to be brought to the host later, on a stream of their own.
pub struct StatesSnapshot {
    copy: CudaSlice<f32>,
    side: Arc<CudaStream>,
}

impl StatesSnapshot {
    /// The states, `[rows, dim]`, on the host. Waits only for the snapshot's copy, not for what
    /// the chains' stream did after it, so it can run on another thread during a run.
    pub fn download(self) -> Result<Vec<f32>> {
        let states = download(&self.side, "states", &self.copy)?;
        // The copy's memory is freed on the chains' stream when `self` drops, after this wait:
        // the read on the side stream is over by then.
        self.side.synchronize()?;
        Ok(states)
    }
}

/// A batch of chains on the GPU.
///
/// Two state buffers take turns: a step reads one and writes the other, then they swap, so a
/// step never reads what it is writing. The step counter (which Philox counter the next
/// in-kernel step uses) lives here, so consecutive steps continue one random stream.
pub struct DeviceChains {
    pub(super) x: CudaSlice<f32>,
    pub(super) x_next: CudaSlice<f32>,
    pub(super) accepted: CudaSlice<u8>,
    pub(super) shape: Shape,
    pub(super) step: u64,
}

impl DeviceChains {
    pub(super) fn swap(&mut self) {
        std::mem::swap(&mut self.x, &mut self.x_next);
    }

    /// The batch's shape.
    pub fn shape(&self) -> Shape {
        self.shape
    }

    /// The counter the next in-kernel-RNG step will use (steps taken so far, unless set).
    pub fn step_counter(&self) -> u64 {
        self.step
    }

    /// Sets the step counter, e.g. to resume a stream or to replay a step.
    pub fn set_step_counter(&mut self, step: u64) {
        self.step = step;
    }

    /// Copies the current states back to the host (waits for queued work).
    pub fn x(&self) -> Result<Vec<f32>> {
        download(self.x.stream(), "states", &self.x)
    }

    /// Copies the states of the first `rows` chains back to the host, `[rows, dim]` (at most
    /// the batch; waits for queued work).
    pub fn x_rows(&self, rows: usize) -> Result<Vec<f32>> {
        let len = rows.min(self.shape.batch()) * self.shape.dim();
        download(self.x.stream(), "states", &self.x.slice(..len))
    }

    /// A device copy of the first `rows` chains' states as they are now (at most the batch),
    /// downloaded later by [`StatesSnapshot::download`], which may run on another thread while
    /// the chains step on: the copy is the only wait on this stream.
    pub fn snapshot_rows(&self, rows: usize) -> Result<StatesSnapshot> {
        let len = rows.min(self.shape.batch()) * self.shape.dim();
        let stream = self.x.stream();
        // SAFETY: uninitialized device memory, every element of which the copy below writes
        // before anything reads it.
        let mut copy = unsafe { stream.alloc::<f32>(len) }
            .map_err(|e| oom_or(e, "a copy of the starting states", len * size_of::<f32>()))?;
        stream.memcpy_dtod(&self.x.slice(..len), &mut copy)?;
        // A stream of the snapshot's own, which waits for the copy (and everything queued
        // before it) and for nothing queued after it.
        let side = stream.fork()?;
        Ok(StatesSnapshot { copy, side })
    }

    /// Copies the last step's acceptance flags back to the host (waits for queued work).
    pub fn accepted(&self) -> Result<Vec<bool>> {
        let flags = self.accepted_flags()?;
        crate::host_memory::collected("acceptance flags", flags.iter().map(|&a| a != 0))
    }

    /// The acceptance flags as the kernel wrote them: one byte per chain, 1 if it moved, 0 if
    /// not (anything else means the byte was never written; see `poison_outputs`, with the `testing` feature).
    pub fn accepted_flags(&self) -> Result<Vec<u8>> {
        download(self.accepted.stream(), "acceptance flags", &self.accepted)
    }

    /// Fills the buffers the next step will write — the next state and the acceptance flags —
    /// with `x_value` and `accepted_value`. A debugging aid: poison them (e.g. NaN and 0xAA)
    /// and any element a kernel fails to write shows up in the result.
    #[cfg(feature = "testing")]
    pub fn poison_outputs(&mut self, x_value: f32, accepted_value: u8) -> Result<()> {
        let stream = self.x_next.stream().clone();
        let x = crate::host_memory::filled("poison", self.shape.len(), x_value)?;
        stream.memcpy_htod(&x, &mut self.x_next)?;
        let flags = crate::host_memory::filled("poison", self.shape.batch(), accepted_value)?;
        stream.memcpy_htod(&flags, &mut self.accepted)?;
        Ok(())
    }
}

/// A target on the GPU: its kind and its arrays, `[kind.arrays(), dim]` (see
/// [`crate::Target`]).
pub struct DeviceTarget {
    pub(super) arrays: CudaSlice<f32>,
    /// The arrays' device address, what the kernels take: the target is never written after
    /// its upload, so launches on this library's stream or on another library's
    /// ([`Gpu::step_borrowed`]) need no ordering with it beyond the upload's.
    pub(super) address: u64,
    pub(super) kind: TargetKind,
    pub(super) dim: usize,
}

impl DeviceTarget {
    pub(super) fn check_shape(&self, shape: Shape) -> Result<()> {
        check_target_dim(self.dim, shape)
    }

    /// Which target it is.
    pub fn kind(&self) -> TargetKind {
        self.kind
    }
}

/// Caller random numbers for one step, on the GPU.
pub struct DeviceNoise {
    pub(super) noise: CudaSlice<f32>,
    pub(super) uniform: CudaSlice<f32>,
    pub(super) shape: Shape,
}
