//! The GPU side of the library: open a device, upload, step, read back.
//!
//! The path from Rust to a running kernel, in cudarc's terms:
//! 1. [`Gpu::open`] loads the driver library (libcuda, at run time), creates a context on the
//!    device and a stream (a queue of work that runs in order on the GPU), and loads the PTX that
//!    `build.rs` embedded: the driver compiles it to the GPU's machine code (SASS) right there.
//! 2. The `upload_*` methods copy host slices into device buffers (`CudaSlice`).
//! 3. [`Gpu::step`] and [`Gpu::step_with_noise`] enqueue one kernel launch on the stream and
//!    return at once: launches are asynchronous.
//! 4. Reading results back ([`DeviceChains::x`], [`DeviceChains::accepted`]) waits for the
//!    stream to finish the work before it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use cudarc::driver::sys::CUresult;
use cudarc::driver::{
    CudaContext, CudaFunction, CudaModule, CudaStream, DevicePtr, DeviceRepr, DriverError,
    LaunchConfig, PushKernelArg, ValidAsZeroBits,
};
use cudarc::nvrtc::Ptx;

use crate::dispatch::{self, Launch};
use crate::error::{Error, Result};
use crate::problem::{Draws, Shape, StepConfig, check_noise, check_step_size};
use crate::ptx;
use crate::target::{Target, TargetKind};
use fused_mh_kernel::abi::ENTRY_BASES;

mod buffers;
mod chain;
mod count_memory;
mod diagnostics;
mod external;
mod model;
mod stats;
#[cfg(feature = "testing")]
mod testing_hooks;
mod warm_up;
pub use buffers::{DeviceChains, DeviceNoise, DeviceTarget, StatesSnapshot};
pub use chain::{MAX_ELEMENT_STEPS_PER_LAUNCH, RunPlan, TRACE_BUFFER_BYTES, TraceChunk};
pub use count_memory::{CountLanding, CountMemory};
pub use external::{Borrowed, BorrowedNoise, BorrowedStep};
pub use stats::{COUNT_FOLD_STEPS, ChainStats, RunCounts};

/// An open GPU: a context, a stream, and the loaded kernels.
pub struct Gpu {
    ctx: Arc<CudaContext>,
    stream: Arc<CudaStream>,
    _module: Arc<CudaModule>,
    /// Every entry point of the loaded module, by name ([`crate::dispatch`] chooses).
    functions: HashMap<&'static str, CudaFunction>,
    /// The target-generic entry points by (target, the dispatcher's name): the table of
    /// `fused_mh_kernel::abi`.
    target_functions: HashMap<(TargetKind, &'static str), CudaFunction>,
    name: String,
    ptx_target: &'static str,
    sms: usize,
    /// Bytes of L2 cache.
    l2_bytes: usize,
    /// The driver's occupancy (blocks per SM) by (function, threads per block), for the
    /// persistent grids ([`Gpu::fit_persistent`]): asked once, not at every launch.
    resident_blocks: Mutex<HashMap<(usize, u32), u32>>,
}

impl Gpu {
    /// Number of CUDA devices, or [`Error::NoDriver`] when the driver library is absent.
    pub fn count() -> Result<usize> {
        // SAFETY: only probes whether libcuda can be loaded (dlopen); calls nothing in it.
        if !unsafe { cudarc::driver::sys::is_culib_present() } {
            return Err(Error::NoDriver);
        }
        match CudaContext::device_count() {
            Ok(n) => Ok(n.max(0) as usize),
            Err(DriverError(CUresult::CUDA_ERROR_NO_DEVICE)) => Ok(0),
            Err(e) => Err(e.into()),
        }
    }

    /// Opens device `ordinal` and loads the kernels: the newest of [`ptx::MODULES`] that the
    /// device can run (on the H200 the `sm_80` one, with the staged step).
    pub fn open(ordinal: usize) -> Result<Self> {
        Self::open_with(ordinal, None)
    }

    /// Opens device `ordinal` with the kernels of `module` (e.g. `ptx::MODULES[0]`, the portable
    /// set, to test it on a newer GPU), or the newest it can run if `None`.
    pub fn open_with(ordinal: usize, module: Option<ptx::Module>) -> Result<Self> {
        let count = Self::count()?;
        if ordinal >= count {
            return Err(Error::NoDevice { ordinal, count });
        }
        let ctx = CudaContext::new(ordinal)?;
        // A stream of our own rather than the legacy default stream: it does not synchronize
        // with other work in the process, and it can be captured into a CUDA graph.
        let stream = ctx.new_stream()?;
        // SAFETY: every buffer a `Gpu` allocates is used only on this one stream (uploads,
        // launches, read-backs and frees all go through `self.stream`), so stream order alone
        // orders every access, which is what cudarc's per-buffer events would otherwise
        // enforce. The one exception, a `StatesSnapshot`, is read on a stream forked after its
        // copy was queued (the fork waits for it) and freed here only after that read was
        // waited for; the host reads a `CountLanding`'s page-locked memory, which the stream
        // writes asynchronously, only after waiting for the stream. Without them a launch is
        // one driver call instead of several, and work can be captured into a CUDA graph.
        unsafe { ctx.disable_event_tracking() };
        let capability = compute_capability(&ctx)?;
        let ptx = match module {
            Some(m) if m.min_compute_capability() > capability => {
                return Err(Error::PtxTooNew {
                    target: m.target,
                    capability,
                });
            }
            Some(m) => m,
            None => ptx::MODULES
                .into_iter()
                .rev()
                .find(|m| m.min_compute_capability() <= capability)
                .ok_or(Error::PtxTooNew {
                    target: ptx::MODULES[0].target,
                    capability,
                })?,
        };
        let module = ctx.load_module(Ptx::from_src(ptx.text))?;
        use cudarc::driver::sys::CUdevice_attribute as Attribute;
        let sms = ctx.attribute(Attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)?;
        let l2_bytes = ctx.attribute(Attribute::CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE)?;
        // Every `.entry` of the module: the dispatch's names are looked up here.
        let functions = ptx
            .text
            .split(".entry ")
            .skip(1)
            .filter_map(|rest| rest.split('(').next())
            .map(|name| Ok((name, module.load_function(name)?)))
            .collect::<Result<HashMap<_, _>>>()?;
        let mut target_functions = HashMap::new();
        for &kind in TargetKind::ALL {
            for (base, name) in ENTRY_BASES.iter().zip(kind.entry_points()) {
                // The staged steps exist in the newer module only.
                if let Some(function) = functions.get(name) {
                    target_functions.insert((kind, *base), function.clone());
                }
            }
        }
        for ((_, base), function) in &target_functions {
            // More than the 48 KB a launch may give without asking: the driver must be told.
            let bytes = dispatch::max_dynamic_shared_bytes(base);
            if bytes > 0 {
                use cudarc::driver::sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES as MAX_DYNAMIC;
                function.set_attribute(MAX_DYNAMIC, bytes as i32)?;
            }
        }
        Ok(Self {
            functions,
            target_functions,
            _module: module,
            name: ctx.name()?,
            ptx_target: ptx.target,
            sms: sms.max(1) as usize,
            l2_bytes: l2_bytes.max(0) as usize,
            resident_blocks: Mutex::default(),
            ctx,
            stream,
        })
    }

    /// The CUDA version the installed driver supports, as (major, minor), e.g. (13, 0).
    pub fn driver_version(&self) -> Result<(i32, i32)> {
        let mut version = 0;
        // SAFETY: writes one int through a valid pointer; the driver was loaded in `open`.
        unsafe { cudarc::driver::sys::cuDriverGetVersion(&mut version) }.result()?;
        Ok((version / 1000, version % 1000 / 10))
    }

    /// The device's name, e.g. "NVIDIA H200".
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The PTX target of the loaded kernels (e.g. "sm_80").
    pub fn ptx_target(&self) -> &'static str {
        self.ptx_target
    }

    /// The context, for callers that time work with events or need device attributes.
    pub fn context(&self) -> &Arc<CudaContext> {
        &self.ctx
    }

    /// The stream all of this object's work is queued on.
    pub fn stream(&self) -> &Arc<CudaStream> {
        &self.stream
    }

    /// The device memory free now and the device's total, in bytes.
    pub fn free_memory(&self) -> Result<(usize, usize)> {
        self.ctx.bind_to_thread()?;
        Ok(cudarc::driver::result::mem_get_info()?)
    }

    /// Waits until all queued work has finished.
    pub fn synchronize(&self) -> Result<()> {
        Ok(self.stream.synchronize()?)
    }

    /// Uploads the chains' states `x[batch * dim]` (row-major), with room for the next state and
    /// the acceptance flags. The step counter starts at 0.
    pub fn upload_chains(&self, x_host: &[f32], shape: Shape) -> Result<DeviceChains> {
        shape.check_len("x", x_host)?;
        Ok(DeviceChains {
            x: self.upload("x", x_host)?,
            x_next: self.alloc("x_next", shape.len())?,
            accepted: self.alloc("accepted", shape.batch())?,
            shape,
            step: 0,
        })
    }

    /// Uploads a target: the arrays its kernels read.
    pub fn upload_target(&self, target: &Target) -> Result<DeviceTarget> {
        let arrays = self.upload("the target's arrays", target.arrays())?;
        let address = arrays.device_ptr(&self.stream).0;
        Ok(DeviceTarget {
            arrays,
            address,
            kind: target.kind(),
            dim: target.dim(),
        })
    }

    /// Uploads caller random numbers for one step: standard normals `noise[batch * dim]` (finite)
    /// and uniforms `uniform[batch]` (in `[0, 1)`).
    pub fn upload_noise(
        &self,
        noise: &[f32],
        uniform: &[f32],
        shape: Shape,
    ) -> Result<DeviceNoise> {
        check_noise(shape, noise, uniform)?;
        Ok(DeviceNoise {
            noise: self.upload("noise", noise)?,
            uniform: self.upload("uniform", uniform)?,
            shape,
        })
    }

    /// Streaming multiprocessors of the device.
    pub fn sm_count(&self) -> usize {
        self.sms
    }

    /// What [`crate::dispatch`] needs to know of this GPU.
    pub(crate) fn device(&self) -> dispatch::Device {
        dispatch::Device {
            sms: self.sms,
            l2_bytes: self.l2_bytes,
            staged: self
                .target_functions
                .contains_key(&(TargetKind::Gaussian, "mh_step_staged_q2_v4")),
        }
    }

    /// The loaded entry point `name` (a kernel that does not depend on the target).
    fn function(&self, name: &'static str) -> Result<&CudaFunction> {
        self.functions.get(name).ok_or(Error::MissingKernel(name))
    }

    /// The loaded entry point the dispatcher calls `name`, compiled for `kind`.
    fn target_function(&self, kind: TargetKind, name: &'static str) -> Result<&CudaFunction> {
        self.target_functions
            .get(&(kind, name))
            .ok_or(Error::MissingKernel(name))
    }

    /// One Metropolis–Hastings step of every chain, random numbers drawn in the kernel from
    /// `(config.seed(), chains.step_counter())`. Afterwards the chains hold the new states and
    /// flags, and the step counter has advanced by one. Asynchronous: returns once queued.
    pub fn step(
        &self,
        chains: &mut DeviceChains,
        target: &DeviceTarget,
        config: &StepConfig,
    ) -> Result<()> {
        config.check_no_scales("Gpu::step")?;
        let draws = Draws::Philox {
            seed: config.seed(),
            step: chains.step,
        };
        self.launch_step(chains, target, config.step_size(), draws)?;
        chains.step += 1;
        Ok(())
    }

    /// One step with the caller's random numbers (see [`Gpu::upload_noise`]); the step counter
    /// does not move. Asynchronous: returns once queued.
    pub fn step_with_noise(
        &self,
        chains: &mut DeviceChains,
        target: &DeviceTarget,
        step_size: f32,
        noise: &DeviceNoise,
    ) -> Result<()> {
        check_step_size(step_size)?;
        if noise.shape != chains.shape {
            return Err(Error::ShapeMismatch(format!(
                "noise is for {:?}, the chains are {:?}",
                noise.shape, chains.shape
            )));
        }
        self.launch_step(chains, target, step_size, Draws::Caller(noise))
    }

    /// Queues one step with the kernel [`dispatch::step`] chooses for the row and the
    /// randomness.
    fn launch_step(
        &self,
        chains: &mut DeviceChains,
        target: &DeviceTarget,
        step_size: f32,
        draws: Draws<&DeviceNoise>,
    ) -> Result<()> {
        let chosen = dispatch::step(chains.shape, &draws, self.device());
        let function = self.target_function(target.kind, chosen.entry)?;
        let chosen = self.fit_persistent(chosen, function, chains.shape)?;
        self.launch_step_with(chosen, function, chains, target, step_size, draws)
    }

    /// `chosen` with a persistent grid ([`dispatch::persistent`]) cut to one wave of the blocks
    /// that the SMs hold at once, by the driver's occupancy for `function` (asked once per
    /// function and block size); other launches as they are.
    pub(crate) fn fit_persistent(
        &self,
        chosen: Launch,
        function: &CudaFunction,
        shape: Shape,
    ) -> Result<Launch> {
        if !dispatch::persistent(chosen.entry) {
            return Ok(chosen);
        }
        let key = (function.cu_function() as usize, chosen.threads);
        // A poisoned lock holds a complete map still: every insert is one call.
        let known = self
            .resident_blocks
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&key)
            .copied();
        let resident = match known {
            Some(blocks) => blocks,
            None => {
                let dynamic = dispatch::dynamic_shared_bytes(chosen) as usize;
                let blocks = function
                    .occupancy_max_active_blocks_per_multiprocessor(chosen.threads, dynamic, None)?
                    .max(1);
                self.resident_blocks
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .insert(key, blocks);
                blocks
            }
        };
        Ok(Launch {
            blocks: dispatch::one_wave(shape, resident, self.device()),
            ..chosen
        })
    }

    /// Queues the step `chosen`: pushes the arguments in the step kernels' one order, and swaps
    /// the state buffers.
    fn launch_step_with(
        &self,
        chosen: Launch,
        function: &CudaFunction,
        chains: &mut DeviceChains,
        target: &DeviceTarget,
        step_size: f32,
        draws: Draws<&DeviceNoise>,
    ) -> Result<()> {
        target.check_shape(chains.shape)?;
        let problem = ProblemArgs::new(target, chains.shape, step_size);
        let tile_rows = chosen.tile_rows;
        let mut launch = self.stream.launch_builder(function);
        launch
            .arg(&chains.x)
            .arg(&mut chains.x_next)
            .arg(&mut chains.accepted);
        problem.push(&mut launch);
        match &draws {
            Draws::Philox { seed, step } => launch.arg(seed).arg(step),
            Draws::Caller(noise) => launch.arg(&noise.noise).arg(&noise.uniform),
        };
        launch.arg(&tile_rows);
        // SAFETY: the arguments match the step kernels' one signature, written once in
        // `kernel/src/gpu/entries.rs` (`mh_family_rng_step!`, `mh_family_noise_step!`; the
        // lessons, whose target is the Gaussian, and the staged steps share it), in order and
        // type:
        // `(x, x_new, accepted, target, batch: u64, dim: u64, step_size: f32,
        //   seed: u64, step: u64 | noise: *const f32, uniform: *const f32, tile_rows: u32)`.
        // x and x_next hold batch*dim floats (the shape they were allocated for), accepted
        // holds batch bytes, the target holds its arrays for dim (checked above), caller noise was
        // uploaded for this very shape (checked by the caller); x_next and accepted are the
        // only buffers written, and they are allocations distinct from every input. Shape
        // guarantees 1 <= batch <= 2^32 and 1 <= dim < 2^32; `dispatch::step` (or
        // `dispatch::lesson`) picks a kernel whose registers hold the row, a power-of-two tile
        // between 32 / G and 32 rows (unused by the lessons), and a block of 128 or 256 threads
        // (a multiple of 32; 128 for the staged steps, whose shared arrays are sized for 4
        // warps).
        unsafe { launch.launch(grid(chosen)) }?;
        chains.swap();
        Ok(())
    }
}

/// The device's compute capability as `10 * major + minor` (the H200: 90).
/// What every target kernel takes after its buffers, in this order: the target's arrays, the
/// batch, the dimension and the step size (`kernel/src/gpu/entries.rs`). Every launch of a
/// target kernel pushes them here, so the order is written once on the host.
struct ProblemArgs {
    target: u64,
    batch: u64,
    dim: u64,
    step_size: f32,
}

impl ProblemArgs {
    fn new(target: &DeviceTarget, shape: Shape, step_size: f32) -> Self {
        Self {
            target: target.address,
            batch: shape.batch() as u64,
            dim: shape.dim() as u64,
            step_size,
        }
    }

    /// Pushes `target, batch, dim, step_size`.
    fn push<'a>(&'a self, launch: &mut cudarc::driver::LaunchArgs<'a>) {
        launch
            .arg(&self.target)
            .arg(&self.batch)
            .arg(&self.dim)
            .arg(&self.step_size);
    }
}

fn compute_capability(ctx: &CudaContext) -> Result<u32> {
    use cudarc::driver::sys::CUdevice_attribute::{
        CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR as MAJOR,
        CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR as MINOR,
    };
    let (major, minor) = (ctx.attribute(MAJOR)?, ctx.attribute(MINOR)?);
    Ok((10 * major + minor).max(0) as u32)
}

/// The one-dimensional grid of a [`Launch`].
fn grid(launch: Launch) -> LaunchConfig {
    LaunchConfig {
        grid_dim: (launch.blocks.max(1), 1, 1),
        block_dim: (launch.threads, 1, 1),
        shared_mem_bytes: dispatch::dynamic_shared_bytes(launch),
    }
}

/// A host copy of the device buffer `src`, into memory allocated fallibly
/// ([`crate::host_memory`]): cudarc's `clone_dtoh` aborts the process when the host has no room.
/// The buffer is zeroed by the allocator, so the copy is the first write of its pages.
fn download<T: DeviceRepr + ValidAsZeroBits>(
    stream: &Arc<CudaStream>,
    what: &'static str,
    src: &impl DevicePtr<T>,
) -> Result<Vec<T>> {
    let mut host = crate::host_memory::zeroed(what, src.len())?;
    stream.memcpy_dtoh(src, &mut host)?;
    Ok(host)
}

fn oom_or(e: DriverError, what: &'static str, bytes: usize) -> Error {
    Error::from_allocation(e, what, bytes)
}
