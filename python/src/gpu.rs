//! CUDA tensors by DLPack, stepped in place on the caller's stream.
//!
//! The Python side hands over DLPack capsules (`torch.utils.dlpack.to_dlpack`) of `x` and of
//! outputs it allocated in its own framework (so they come back as that framework's tensors),
//! and the stream it works on. [`dlpark`] reads the capsules (its `SafeManagedTensor` owns each
//! capsule's tensor and calls its producer's deleter when dropped; `pyo3-dlpack` was the
//! other candidate, and dlpark is the one with both the legacy and the versioned layouts and a
//! release history behind it). [`crate::dlpack`] checks what DLPack says of each tensor
//! (device, dtype, shape, C order); this file passes the addresses to `Gpu::step_borrowed`
//! and `Gpu::run`.

use cudarc::driver::{CudaSlice, DevicePtr};
use dlpark::SafeManagedTensor;
use dlpark::ffi::DataTypeCode;
use fused_mh::borrowed::{Borrowed, BorrowedNoise, BorrowedStep};
use fused_mh::{DeviceTarget, Draws, Gpu, RunPlan, Shape, StepConfig};
use host::budget::Budget;
use numpy::ndarray::Array3;
use numpy::{IntoPyArray, PyReadonlyArray1};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::dlpack::{Expect, Exported, F32, FLAGS, OwnedBuffer, borrow};
use crate::errors::to_py;
use crate::interrupts::Interrupts;
use crate::landing::KeptLanding;
use crate::warm_up::{Before, run_before};

/// An open GPU (`fused_mh::Gpu` on the device's primary context, the one PyTorch and JAX use).
#[pyclass(frozen)]
pub struct Device {
    gpu: Gpu,
    ordinal: usize,
    /// Where `run`'s counts land, kept for the next call.
    landing: KeptLanding,
}

/// A target uploaded to a [`Device`]: `mu` and `1 / sigma^2`.
#[pyclass(frozen)]
pub struct Target {
    target: DeviceTarget,
    /// The values on the host too (for the diagnostics' starting spread).
    host: fused_mh::Target,
    dim: usize,
}

#[pymethods]
impl Device {
    /// Opens CUDA device `ordinal`, and lets its memory pool keep what is freed (as PyTorch's
    /// caching allocator keeps it): `run` allocates its chains and moments each call, and
    /// without this the driver hands the memory back at every synchronization and maps it
    /// again on the next call.
    #[new]
    fn new(ordinal: usize) -> PyResult<Self> {
        let gpu = Gpu::open(ordinal).map_err(to_py)?;
        let device = gpu.context().cu_device();
        let mut pool = std::ptr::null_mut();
        let mut keep = u64::MAX;
        // SAFETY: the device of a live context; the attribute takes a u64 by pointer.
        unsafe {
            cudarc::driver::sys::cuDeviceGetDefaultMemPool(&mut pool, device)
                .result()
                .map_err(|e| to_py(e.into()))?;
            cudarc::driver::sys::cuMemPoolSetAttribute(
                pool,
                cudarc::driver::sys::CUmemPool_attribute::CU_MEMPOOL_ATTR_RELEASE_THRESHOLD,
                (&mut keep as *mut u64).cast(),
            )
            .result()
            .map_err(|e| to_py(e.into()))?;
        }
        Ok(Self {
            gpu,
            ordinal,
            landing: KeptLanding::default(),
        })
    }

    /// The device's name.
    #[getter]
    fn name(&self) -> String {
        self.gpu.name().to_string()
    }

    /// Uploads target `name` (its parameters as float32 NumPy arrays of `dim` elements, in
    /// `target_params(name)` order; checked as the library checks them) and waits for the
    /// copy, so that any stream may use it.
    fn target(&self, name: &str, params: Vec<PyReadonlyArray1<'_, f32>>) -> PyResult<Target> {
        let target = crate::targets::build(name, &params)?;
        let uploaded = self.gpu.upload_target(&target).map_err(to_py)?;
        self.gpu.synchronize().map_err(to_py)?;
        Ok(Target {
            target: uploaded,
            dim: target.dim(),
            host: target,
        })
    }

    /// One step of `x[B, dim]` (float32) into `x_new[B, dim]` (float32) and `accepted[B]`
    /// (bool or uint8), all DLPack capsules of CUDA tensors on this device, queued on `stream`
    /// (a `CUstream` address; 0 is the legacy default stream). With `noise` and `uniform`
    /// (capsules of `[B, dim]` and `[B]` float32) the caller's random numbers; else drawn in
    /// the kernel from `(seed, step)`.
    #[pyo3(signature = (stream, x, x_new, accepted, target, step_size, seed=0, step=0, noise=None, uniform=None))]
    #[allow(clippy::too_many_arguments)]
    fn step(
        &self,
        stream: usize,
        x: &Bound<'_, PyAny>,
        x_new: &Bound<'_, PyAny>,
        accepted: &Bound<'_, PyAny>,
        target: &Target,
        step_size: f32,
        seed: u64,
        step: u64,
        noise: Option<&Bound<'_, PyAny>>,
        uniform: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<()> {
        let inputs = self.inputs(x, target, (seed, step), noise, uniform)?;
        let (batch, dim) = (inputs.shape.batch(), inputs.shape.dim());
        let state_shape = [Some(batch), Some(dim)];
        let states = Expect::f32("x_new", &state_shape);
        let (_x_new, _, x_new) = borrow(x_new, &states, self.ordinal)?;
        let flags = Expect {
            what: "accepted",
            dtype: FLAGS,
            dtype_name: "bool (or uint8)",
            shape: &[Some(batch)],
        };
        let (_accepted, _, accepted) = borrow(accepted, &flags, self.ordinal)?;
        let buffers = BorrowedStep {
            x: inputs.x,
            x_new,
            accepted,
        };
        // SAFETY: `stream` is the caller's stream of this device (the Python side passes
        // `torch.cuda.current_stream(index).cuda_stream`, on the primary context); every
        // address comes from a DLPack tensor checked to be on this CUDA device with the length
        // passed, and its owner (`inputs.owners`, `_x_new`, `_accepted`) is alive until the
        // launch is queued; after that the caller's framework keeps the memory alive, and
        // frees it only in the stream's order.
        unsafe {
            self.gpu.step_borrowed(
                stream as _,
                inputs.shape,
                &target.target,
                step_size,
                inputs.draws,
                buffers,
            )
        }
        .map_err(to_py)
    }

    /// [`Device::step`] into outputs this package allocates, for a framework that cannot lend
    /// writable memory (JAX): runs on this device's own stream, waits for it (the outputs are
    /// complete when they are handed over; a stream's wait, not the device's), and returns
    /// `(x_new, accepted)` as [`Exported`] arrays (`__dlpack__`) for `jax.dlpack.from_dlpack`.
    #[pyo3(signature = (x, target, step_size, seed=0, step=0, noise=None, uniform=None))]
    #[allow(clippy::too_many_arguments)]
    fn step_to_new(
        &self,
        x: &Bound<'_, PyAny>,
        target: &Target,
        step_size: f32,
        seed: u64,
        step: u64,
        noise: Option<&Bound<'_, PyAny>>,
        uniform: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<(Exported, Exported)> {
        let inputs = self.inputs(x, target, (seed, step), noise, uniform)?;
        let shape = inputs.shape;
        let x_new = self.alloc(4 * shape.len(), vec![shape.batch(), shape.dim()], F32[0])?;
        let accepted = self.alloc(shape.batch(), vec![shape.batch()], FLAGS[0])?;
        let stream = self.gpu.stream();
        let buffers = BorrowedStep {
            x: inputs.x,
            x_new: Borrowed {
                ptr: x_new.ptr,
                len: shape.len(),
            },
            accepted: Borrowed {
                ptr: accepted.ptr,
                len: shape.batch(),
            },
        };
        // SAFETY: this device's own stream; `x` and the noise as in `step`, their owners in
        // `inputs` alive until the stream has finished (the synchronize below); the outputs
        // are this package's allocations of exactly those lengths.
        unsafe {
            self.gpu.step_borrowed(
                stream.cu_stream(),
                shape,
                &target.target,
                step_size,
                inputs.draws,
                buffers,
            )
        }
        .map_err(to_py)?;
        stream.synchronize().map_err(|e| to_py(e.into()))?;
        drop(inputs);
        Ok((Exported::new(x_new)?, Exported::new(accepted)?))
    }

    /// `steps` steps of every chain of `x` (`[B, dim]` float32, a DLPack capsule of complete
    /// data on this device) from step counter `first_step`, `steps_per_launch` at a time in
    /// the fused kernel (`Gpu::run`, as `host run` does them), on a device copy of `x` (`x`
    /// itself is not written). Returns a dict: on the device, as [`Exported`] arrays, `x` the
    /// final states and each chain's running `mean` and `m2` (float64 `[B, dim]`, the sums of
    /// squared deviations: the variances are `m2 / steps`); as NumPy arrays `accepted_count`,
    /// `nonfinite_count` and `null_move_count` (uint64) and `trace` (`[steps / thin, B, dim]`
    /// float32, with `thin > 0`); `diagnostics` (a dict, [`crate::diagnostics::to_dict`]; None
    /// without a checkpoint); `steps`; and `step_size`, `scales` (None without) and
    /// `last_acceptance`, those the steps ran with and the warm-up's last launch's. `scales`
    /// as for the CPU's `run` (`crate::cpu::run`). Before the steps, `warmup` steps adapt the
    /// step size toward `target_accept` (and the scales, with `precondition`), and `burn_in`
    /// steps are dropped ([`crate::warm_up`]); the counter runs on through them, and
    /// `progress` counts them. The counts land in page-locked memory kept for the next call
    /// of the same batch ([`crate::landing`]).
    #[pyo3(signature = (x, target, step_size, seed, first_step, steps, steps_per_launch=100, thin=0, until_rhat=None, min_draws=None, superchain_size=1, progress=None, diagnostics=true, scales=None, warmup=0, target_accept=0.234, precondition=false, burn_in=0))]
    #[allow(clippy::too_many_arguments)]
    fn run<'py>(
        &self,
        py: Python<'py>,
        x: &Bound<'py, PyAny>,
        target: &Target,
        step_size: f32,
        seed: u64,
        first_step: u64,
        steps: u64,
        steps_per_launch: u32,
        thin: u64,
        until_rhat: Option<f64>,
        min_draws: Option<u64>,
        superchain_size: usize,
        progress: Option<Py<PyAny>>,
        diagnostics: bool,
        scales: Option<PyReadonlyArray1<'py, f32>>,
        warmup: u64,
        target_accept: f64,
        precondition: bool,
        burn_in: u64,
    ) -> PyResult<Bound<'py, PyDict>> {
        let inputs = self.inputs(x, target, (seed, first_step), None, None)?;
        let shape = inputs.shape;
        let options = crate::diagnostics::Options {
            diagnose: diagnostics,
            superchain_size,
            until_rhat,
            min_draws,
            steps_per_launch,
        };
        let diagnostics = crate::diagnostics::plan(shape, steps, &options)?;
        // The starting spread is a part of the diagnostics: none without them.
        let diagnosed = diagnostics.is_some();
        let config = crate::adapt::with_scales(StepConfig::new(step_size, seed), shape, &scales)?;
        fused_mh::cpu::check_thin(steps, thin).map_err(to_py)?;
        let plan = RunPlan {
            thin,
            diagnostics,
            ..RunPlan::new(steps, steps_per_launch)
        };
        let saves = usize::try_from(plan.saves())
            .ok()
            .and_then(|n| n.checked_mul(shape.len()))
            .ok_or_else(|| PyValueError::new_err("the trace would not fit in memory"))?;
        // The whole trace stays in host memory, beside what the run itself copies back.
        let mut budget = Budget::default();
        budget.add(
            "the run's host side (counts, results)",
            plan.host_bytes(shape),
        );
        budget.add("the trace", crate::memory::floats(saves));
        crate::memory::check("run", &budget)?;
        let (gpu, x_view) = (&self.gpu, inputs.x);
        let landing = self.landing.take(shape.batch());
        let mut interrupts = Interrupts::with_progress(progress);
        let before = Before {
            warmup,
            target_accept,
            precondition,
            burn_in,
            steps_per_launch,
        };
        let total = before.total_with(steps);
        let run = py.detach(|| {
            let mut trace = crate::memory::reserved("trace", saves)?;
            // SAFETY: `x_view` is a checked DLPack tensor on this device, complete (the
            // Python side waited for its stream), its owner in `inputs` alive until after
            // the run, which synchronizes after each launch.
            let mut chains = unsafe { gpu.chains_from_borrowed(x_view, shape) }?;
            chains.set_step_counter(first_step);
            let progress = (&mut interrupts, total);
            let before = run_before(gpu, &mut chains, &target.target, config, &before, progress)?;
            let (config, last_acceptance) = before;
            let rows = fused_mh::diagnostics::start::spread_rows(shape, superchain_size);
            let starts = diagnosed.then(|| chains.snapshot_rows(rows)).transpose()?;
            let mut stats = gpu.new_stats(shape, true)?;
            // While the GPU runs, on two more threads: the starting points' download and their
            // spread, and the counts' host memory (each milliseconds at a million chains,
            // otherwise spent before the first launch or after the last).
            let (ran, spread, count_memory) = std::thread::scope(|scope| {
                let sigma = target.host.sigma();
                let spread = scope.spawn(|| match starts {
                    Some(starts) => {
                        let starts = starts.download()?;
                        crate::diagnostics::spread(&starts, shape, superchain_size, sigma)
                    }
                    None => Ok(Vec::new()),
                });
                let count_memory = scope.spawn(|| landing.prepare(gpu, shape.batch()));
                let ran = gpu.run(
                    &mut chains,
                    &target.target,
                    &config,
                    &plan,
                    &mut stats,
                    &mut |p| interrupts.check_progress(total - steps + p.done, total),
                    &mut |chunk| {
                        trace.extend_from_slice(chunk.states);
                        Ok(())
                    },
                );
                let spread = spread
                    .join()
                    .unwrap_or_else(|p| std::panic::resume_unwind(p));
                let memory = count_memory.join();
                (
                    ran,
                    spread,
                    memory.unwrap_or_else(|p| std::panic::resume_unwind(p)),
                )
            });
            let (ran, spread) = (ran?, spread?);
            let (landing, count_memory) = count_memory?;
            let counts = landing.counts(&stats, count_memory, &self.landing)?;
            let adapted = (config, last_acceptance);
            Ok::<_, fused_mh::Error>((chains, stats, trace, ran, spread, counts, adapted))
        });
        let (chains, stats, trace, ran, spread, counts, adapted) = interrupts.result(run)?;
        drop(inputs);
        let (b, d) = (shape.batch(), shape.dim());
        let result = PyDict::new(py);
        result.set_item("accepted_count", counts.accepted.into_pyarray(py))?;
        result.set_item("nonfinite_count", counts.nonfinite.into_pyarray(py))?;
        let nulls = counts.null_moves.map(|n| n.into_pyarray(py));
        result.set_item("null_move_count", nulls)?;
        if thin > 0 {
            let n = trace.len() / shape.len();
            let trace = Array3::from_shape_vec((n, b, d), trace)
                .map_err(|e| PyValueError::new_err(e.to_string()))?;
            result.set_item("trace", trace.into_pyarray(py))?;
        }
        let diagnostics = crate::diagnostics::to_dict(py, stats.diagnostics(), spread, until_rhat)?;
        result.set_item("diagnostics", diagnostics)?;
        let (config, last_acceptance) = adapted;
        result.set_item("step_size", config.step_size())?;
        let scales = config.scales().map(|s| s.to_vec().into_pyarray(py));
        result.set_item("scales", scales)?;
        result.set_item("last_acceptance", last_acceptance)?;
        let (mean, m2) = self
            .gpu
            .merged_moments(stats)
            .map_err(to_py)?
            .ok_or_else(|| PyValueError::new_err("the run kept no moments"))?;
        // A split run's halves are merged by a kernel queued just now; the consumer's
        // framework reads these arrays on its own stream, so they are complete before they
        // are handed over (`Exported::__dlpack__` asks nothing of the stream it is given).
        py.detach(|| self.gpu.synchronize()).map_err(to_py)?;
        let shape = vec![b as i64, d as i64];
        result.set_item("x", self.export(chains.into_states(), shape.clone(), 32)?)?;
        result.set_item("mean", self.export(mean, shape.clone(), 64)?)?;
        result.set_item("m2", self.export(m2, shape, 64)?)?;
        result.set_item("steps", ran)?;
        Ok(result)
    }
}

/// What a step reads, checked: the shape, `x`, the draws, and the owners of the borrowed
/// tensors (alive until the launch is queued).
struct Inputs {
    shape: Shape,
    x: Borrowed,
    draws: Draws<BorrowedNoise>,
    _owners: Vec<SafeManagedTensor>,
}

impl Device {
    /// `x` (`[B, dim]` float32 with the target's `dim`) and the caller's noise if given.
    fn inputs(
        &self,
        x: &Bound<'_, PyAny>,
        target: &Target,
        (seed, step): (u64, u64),
        noise: Option<&Bound<'_, PyAny>>,
        uniform: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Inputs> {
        let any_batch = [None, Some(target.dim)];
        let (x, x_shape, x_view) = borrow(x, &Expect::f32("x", &any_batch), self.ordinal)?;
        let (batch, dim) = (x_shape[0], x_shape[1]);
        let shape = Shape::new(batch, dim).map_err(to_py)?;
        let mut owners = vec![x];
        let draws = match (noise, uniform) {
            (None, None) => Draws::Philox { seed, step },
            (Some(noise), Some(uniform)) => {
                let (states, per_row) = ([Some(batch), Some(dim)], [Some(batch)]);
                let (n, _, noise) = borrow(noise, &Expect::f32("noise", &states), self.ordinal)?;
                let uniform = borrow(uniform, &Expect::f32("uniform", &per_row), self.ordinal)?;
                let (u, _, uniform) = uniform;
                owners.extend([n, u]);
                Draws::Caller(BorrowedNoise { noise, uniform })
            }
            _ => {
                return Err(PyValueError::new_err(
                    "noise and uniform come together (or neither)",
                ));
            }
        };
        Ok(Inputs {
            shape,
            x: x_view,
            draws,
            _owners: owners,
        })
    }

    /// A float buffer of the library's, `[shape]` with `bits`-bit elements, as an [`Exported`]
    /// array.
    fn export<T: 'static>(
        &self,
        buffer: CudaSlice<T>,
        shape: Vec<i64>,
        bits: u8,
    ) -> PyResult<Exported> {
        let ptr = buffer.device_ptr(self.gpu.stream()).0;
        Exported::new(OwnedBuffer {
            ptr,
            _owner: Box::new(buffer),
            shape,
            dtype: dlpark::ffi::DataType {
                code: DataTypeCode::Float,
                bits,
                lanes: 1,
            },
            ordinal: self.ordinal,
        })
    }

    /// `bytes` of uninitialized device memory for an output of `shape` and `dtype` (the step
    /// writes every element).
    fn alloc(
        &self,
        bytes: usize,
        shape: Vec<usize>,
        (code, bits): (DataTypeCode, u8),
    ) -> PyResult<OwnedBuffer> {
        // SAFETY: the memory is written in full by the step before anyone reads it.
        let slice = unsafe { self.gpu.stream().alloc::<u8>(bytes.max(1)) }
            .map_err(|e| to_py(fused_mh::Error::from_allocation(e, "an output", bytes)))?;
        let ptr = slice.device_ptr(self.gpu.stream()).0;
        Ok(OwnedBuffer {
            ptr,
            _owner: Box::new(slice),
            shape: shape.into_iter().map(|n| n as i64).collect(),
            dtype: dlpark::ffi::DataType {
                code,
                bits,
                lanes: 1,
            },
            ordinal: self.ordinal,
        })
    }
}
