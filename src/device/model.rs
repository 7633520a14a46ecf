//! Sampling a model with data on the GPU: the schedule of [`crate::model_run`], each half
//! window (and each stretch of sampling steps) one launch of the model kernel
//! (`kernel/src/gpu/model_steps.rs`).
//!
//! What the GPU holds for a run: a copy of the model (its struct's bytes, the arrays replaced
//! by device copies: [`fused_mh_kernel::model::Array`]), the chains' states, the proposal's
//! factor, the chains' step sizes, the chains' accepted counts of the latest launch, the warps' window sums and their
//! total, and every kept draw. The host reads back the counts after each launch, the window
//! sums after each observed half window, and the draws and the final states at the end.

use cudarc::driver::{CudaSlice, DevicePtr, PushKernelArg};
use fused_mh_kernel::model::{Model, window_sums_len};

use super::{Gpu, download, grid};
use crate::adapt::DenseAdaptation;
use crate::dispatch::{self, Launch};
use crate::error::Result;
use crate::model_run::{Continuation, ModelRun, ModelSample, Stepped, Stepper, run_schedule};

impl Gpu {
    /// Runs `run.chains` chains of `model` on the GPU (see [`crate::model_run`]): the same
    /// schedule, random numbers and arithmetic as [`crate::cpu::sample_model`], whose chains it
    /// follows until the two machines' `sin` and `cos` (the normals) first part by an ulp. New,
    /// or continuing `from`.
    pub fn sample_model<M: Model + Copy>(
        &self,
        model: &M,
        run: &ModelRun,
        from: Option<&Continuation>,
    ) -> Result<ModelSample> {
        let dim = model.dim();
        let draws_len = run.check(dim)?;
        let entry = M::KIND.entry_point();
        let resident_blocks = self
            .function(entry)?
            .occupancy_max_active_blocks_per_multiprocessor(dispatch::MODEL_THREADS, 0, None)?;
        let launch =
            dispatch::model_steps(M::KIND, run.chains, dim, self.device(), resident_blocks);
        let warps = launch.blocks as usize * launch.threads as usize / 32;
        let sums_len = window_sums_len(dim);
        let (image, arrays) = self.upload_model(model)?;
        let stepper = GpuStepper {
            gpu: self,
            run: *run,
            dim,
            launch,
            warps,
            _arrays: arrays,
            image,
            states: self.upload("model states", &run.starts(dim, from)?)?,
            factor: self.alloc("the proposal's factor", dim * dim)?,
            step_sizes: self.alloc("the chains' step sizes", run.chains)?,
            accepted: self.alloc("accepted counts", run.chains)?,
            sums: self.alloc("window sums", warps * sums_len)?,
            total: self.alloc("window sums' total", sums_len)?,
            draws: self.alloc("model draws", draws_len)?,
        };
        run_schedule(stepper, run, dim, from)
    }

    /// Uploads `model`: its arrays, then its struct with their device addresses in place of
    /// the host's. Returns the struct's copy and the arrays' (which must outlive it).
    fn upload_model<M: Model + Copy>(
        &self,
        model: &M,
    ) -> Result<(CudaSlice<u8>, Vec<CudaSlice<f32>>)> {
        let mut arrays = Vec::new();
        let mut failed = None;
        let mut image = *model;
        image.for_each_array(&mut |array| match self.upload("model data", array.get()) {
            Ok(copy) => {
                // SAFETY: `image` is only copied to the device below, never read on the host.
                unsafe { array.relocate(copy.device_ptr(&self.stream).0) };
                arrays.push(copy);
            }
            Err(e) => failed = Some(e),
        });
        if let Some(e) = failed {
            return Err(e);
        }
        let bytes = self.alloc::<u8>("the model", size_of::<M>())?;
        let address = bytes.device_ptr(&self.stream).0;
        // SAFETY: copies the `size_of::<M>()` bytes of `image` into a buffer of that size; the
        // copy from pageable memory has left `image` when the call returns, and the stream
        // orders it before the launches that read it.
        unsafe {
            cudarc::driver::result::memcpy_htod_async(
                address,
                std::slice::from_ref(&image),
                self.stream.cu_stream(),
            )
        }?;
        Ok((bytes, arrays))
    }
}

/// A run's buffers on the GPU.
struct GpuStepper<'g> {
    gpu: &'g Gpu,
    run: ModelRun,
    dim: usize,
    launch: Launch,
    warps: usize,
    _arrays: Vec<CudaSlice<f32>>,
    image: CudaSlice<u8>,
    states: CudaSlice<f32>,
    factor: CudaSlice<f32>,
    step_sizes: CudaSlice<f32>,
    accepted: CudaSlice<u32>,
    sums: CudaSlice<f64>,
    total: CudaSlice<f64>,
    draws: CudaSlice<f32>,
}

impl Stepper for GpuStepper<'_> {
    fn steps(
        &mut self,
        (first, count): (u64, u32),
        (factor, step_sizes): (&[f32], &[f32]),
        observe: bool,
        keep_from: Option<u64>,
    ) -> Result<Stepped> {
        let (gpu, stream) = (self.gpu, &self.gpu.stream);
        stream.memcpy_htod(factor, &mut self.factor)?;
        stream.memcpy_htod(step_sizes, &mut self.step_sizes)?;
        if observe {
            stream.memset_zeros(&mut self.sums)?;
        }
        let function = gpu.function(self.launch.entry)?;
        let (chains, seed, thin) = (self.run.chains as u64, self.run.seed, self.run.thin);
        let trace_first_step = keep_from.unwrap_or(0);
        let null = 0u64;
        let mut launch = stream.launch_builder(function);
        launch.arg(&self.image).arg(&mut self.states).arg(&chains);
        launch
            .arg(&self.factor)
            .arg(&self.step_sizes)
            .arg(&seed)
            .arg(&first)
            .arg(&count);
        launch.arg(&mut self.accepted);
        match observe {
            true => launch.arg(&mut self.sums),
            false => launch.arg(&null),
        };
        match keep_from {
            Some(_) => launch.arg(&mut self.draws),
            None => launch.arg(&null),
        };
        launch.arg(&thin).arg(&trace_first_step);
        // SAFETY: the arguments match `mh_model_steps_*`'s signature (`declare_models!` in
        // `kernel/src/model/mod.rs`) in order and type: `(model: *const M, states: *mut f32,
        // chains: u64, factor: *const f32, step_sizes: *const f32, seed: u64, first_step: u64,
        // steps: u32, accepted: *mut u32, sums: *mut f64, trace: *mut f32, thin: u32,
        // trace_first_step: u64)`; the model's copy is of the kernel's model type (`M::KIND`
        // names its entry point); the buffers have the lengths the kernel reads (states and
        // draws from `ModelRun::check`, the sums one region per warp of the grid); blocks of
        // `MODEL_WARPS_PER_BLOCK` warps (`dispatch::model_steps`).
        unsafe { launch.launch(grid(self.launch)) }?;
        let accepted = download(stream, "accepted counts", &self.accepted)?;
        let window = if observe {
            let reduce = dispatch::model_sums_reduce(self.dim, gpu.device());
            let (warps, len) = (self.warps as u64, window_sums_len(self.dim) as u64);
            let mut launch = stream.launch_builder(gpu.function(reduce.entry)?);
            launch
                .arg(&self.sums)
                .arg(&warps)
                .arg(&len)
                .arg(&mut self.total);
            // SAFETY: `mh_model_sums_reduce(sums: *const f64, warps: u64, len: u64,
            // out: *mut f64)`, with `sums` `[warps, len]` and `out` `[len]`.
            unsafe { launch.launch(grid(reduce)) }?;
            let total = download(stream, "window sums", &self.total)?;
            Some(DenseAdaptation::from_window_sums(
                self.dim,
                self.run.chains,
                count,
                &total,
            ))
        } else {
            None
        };
        Ok(Stepped { accepted, window })
    }

    fn finish(self) -> Result<(Vec<f32>, Vec<f32>)> {
        let stream = &self.gpu.stream;
        let draws = download(stream, "model draws", &self.draws)?;
        Ok((draws, download(stream, "model states", &self.states)?))
    }
}
