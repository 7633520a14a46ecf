//! Many steps per launch: the fused kernel, run statistics and thinned traces.
//!
//! A chain of `N` steps as `N` single-step launches pays, every step, a launch and a full read
//! and write of the states. The fused kernel (`mh_chain_*` in the kernel crate) instead keeps
//! each row in registers for `K` steps: one read and one write per launch, and nothing but
//! arithmetic in between. It draws from the same counter scheme, so `K` fused steps are
//! bit-identical to `K` single steps (the GPU tests check it).
//!
//! [`Gpu::run`] splits a run of `N` steps into launches of at most `K` steps
//! ([`RunPlan::steps_per_launch`], further bounded by [`MAX_ELEMENT_STEPS_PER_LAUNCH`] so that
//! no launch runs for long), keeps the statistics asked for in a [`ChainStats`], copies the
//! thinned trace out in chunks, and reports progress. Rows longer than 1024 elements do not fit
//! in registers: they run as single steps, with a small kernel keeping the statistics, behind
//! the same API.

use cudarc::driver::{CudaSlice, PushKernelArg};

use super::stats::COUNT_FOLD_STEPS;
use super::{Gpu, ProblemArgs, download, grid};
use crate::dispatch::{self, Launch};
use crate::error::{Error, Result};
use crate::{ChainStats, DeviceChains, DeviceTarget, Progress, Shape, StepConfig};

/// The most chain-element updates (`batch * dim * K`) one fused launch may do: about 17
/// billion, some 40 ms on an H200. Launches stay short so that a desktop GPU's watchdog never
/// fires, progress reports keep coming, and a run can be interrupted between launches.
pub const MAX_ELEMENT_STEPS_PER_LAUNCH: u64 = 1 << 34;

/// The most bytes of thinned states held on the GPU between copies to the host.
pub const TRACE_BUFFER_BYTES: usize = 256 << 20;

/// How [`Gpu::run`] runs: how many steps, how many per launch, and which states to save.
#[derive(Clone, Copy, Debug)]
pub struct RunPlan {
    /// Steps of every chain.
    pub steps: u64,
    /// Steps per fused launch (K), at least 1; a launch may do fewer (the last one, a full
    /// trace buffer, or [`MAX_ELEMENT_STEPS_PER_LAUNCH`]).
    pub steps_per_launch: u32,
    /// Save the states after every `thin`-th step (0: save none). Saved states go to the
    /// trace callback of [`Gpu::run`].
    pub thin: u64,
    /// The most bytes of saved states held on the GPU before they are copied out (at least
    /// one state is always held); [`TRACE_BUFFER_BYTES`] unless a test wants small chunks.
    pub trace_buffer_bytes: usize,
    /// Split the moments on the plan's schedule and compute the convergence diagnostics at
    /// its checkpoints (handed to the progress callback, kept in
    /// [`ChainStats::diagnostics`]), and stop early on them if asked; `None`: none of it.
    pub diagnostics: Option<crate::DiagnosticsPlan>,
}

impl RunPlan {
    /// `steps` steps, `steps_per_launch` per launch, no trace.
    pub fn new(steps: u64, steps_per_launch: u32) -> Self {
        Self {
            steps,
            steps_per_launch,
            thin: 0,
            trace_buffer_bytes: TRACE_BUFFER_BYTES,
            diagnostics: None,
        }
    }

    /// States saved over the whole run.
    pub fn saves(&self) -> u64 {
        self.steps.checked_div(self.thin).unwrap_or(0)
    }

    /// How many saved states of `shape` the trace buffer on the GPU holds (0 without a trace).
    pub fn trace_slots(&self, shape: Shape) -> usize {
        let saves = usize::try_from(self.saves()).unwrap_or(usize::MAX);
        (self.trace_buffer_bytes / (size_of::<f32>() * shape.len())).clamp(1, saves.max(1))
            * usize::from(saves > 0)
    }

    /// The device memory a run of `shape` with this plan allocates, in bytes: the chains
    /// ([`Gpu::upload_chains`]: two states and the flags), the target and proposal scales, the
    /// statistics ([`Gpu::new_stats`]) and the trace buffer. Compare it with [`Gpu::free_memory`] before
    /// allocating anything.
    pub fn device_bytes(&self, shape: Shape, moments: bool) -> u64 {
        let (len, batch, dim) = (shape.len() as u64, shape.batch() as u64, shape.dim() as u64);
        let chains = 2 * 4 * len + batch;
        let target = 3 * 4 * dim;
        // The moments: two samples with diagnostics (the split halves), one without.
        let samples = if self.diagnostics.is_some() { 2 } else { 1 };
        let stats = 2 * 4 * batch + if moments { samples * 2 * 8 * len } else { 0 };
        let trace = 4 * len * self.trace_slots(shape) as u64;
        chains + target + stats + trace
    }
}

impl RunPlan {
    /// The host memory a GPU run of `shape` with this plan holds at its peak, in bytes, with
    /// the reading of its results: the statistics' 64-bit count totals (three per chain) where
    /// the run folds its counts into them, and the larger of what the run copies back as it
    /// goes (a count fold, a trace chunk) and what reading the results takes, in `host run`'s
    /// order (the moment samples, merged; then the final states beside the moments; then the
    /// three counts). The caller's own buffers (the initial states) are not included.
    pub fn host_bytes(&self, shape: Shape) -> u128 {
        let (len, batch) = (shape.len() as u128, shape.batch() as u128);
        // The totals are allocated zeroed and first written at a fold, so their pages become
        // memory only in a run longer than `COUNT_FOLD_STEPS`.
        let folds = self.steps > COUNT_FOLD_STEPS;
        let totals = if folds { 3 * 8 * batch } else { 0 };
        // The device's 32-bit counts, copied back at a fold and when the counts are read.
        let fold = 4 * batch;
        let during = if folds { fold } else { 0 } + 4 * len * self.trace_slots(shape) as u128;
        // Both moment samples come back only when the run ends between two boundaries of the
        // split schedule; at a boundary (the end of `--steps`, an early stop) the first holds
        // every draw.
        let samples = match &self.diagnostics {
            Some(d) if !d.schedule.is_boundary(self.steps) => 2,
            _ => 1,
        };
        // The moments are read first: both samples at once, the second merged into the first
        // and dropped before the final states and the counts are read.
        let sample = 2 * 8 * len;
        let results = (samples * sample).max(sample + 4 * len + 3 * 8 * batch + fold);
        totals + during.max(results)
    }
}

/// Saved states handed to the trace callback: `states` is `[n, batch, dim]`, the `n` saves
/// numbered `first, first + 1, ...` in the run (save `i` is the state after step
/// `(i + 1) * thin`).
pub struct TraceChunk<'a> {
    /// The run-wide number of the first state in `states`.
    pub first: u64,
    /// `n` states, each `[batch, dim]`, one after the other.
    pub states: &'a [f32],
}

impl Gpu {
    /// `steps` steps of every chain in one fused launch (asynchronous, like [`Gpu::step`]),
    /// statistics into `stats`. Advances the chains' step counter by `steps`. Rows longer than
    /// 1024 elements run as `steps` single steps instead, and steps that pass a multiple of
    /// `2^32` on the step counter as two launches (the fused kernel asks it).
    pub fn steps(
        &self,
        chains: &mut DeviceChains,
        target: &DeviceTarget,
        config: &StepConfig,
        steps: u32,
        stats: &mut ChainStats,
    ) -> Result<()> {
        let mut left = steps;
        // At least one call, so that a call of 0 steps checks its arguments all the same.
        loop {
            let k = launch_steps(left, chains.step);
            self.launch_chain(chains, target, config, k, stats, None)?;
            left -= k;
            if left == 0 {
                return Ok(());
            }
        }
    }

    /// Runs `plan.steps` steps of every chain: fused launches of up to
    /// `plan.steps_per_launch` steps, statistics into `stats`, every `plan.thin`-th state to
    /// `on_trace` (in chunks, in order), and `on_progress` after each launch (with the split
    /// convergence diagnostics at the checkpoints of `plan.diagnostics`, where it asks for
    /// them: launches end at its boundaries). Returns the steps run: `plan.steps`, or fewer
    /// when the plan's early stop fires (after the checkpoint whose diagnostics met it). The
    /// chains' step counter advances, so a second call continues the same random stream.
    /// Waits for each launch to finish before reporting it, so progress is real. An error from
    /// either callback stops the run after that launch and is returned.
    // The run's inputs, its statistics and two callbacks: a parameter struct would only rename them.
    #[allow(clippy::too_many_arguments)]
    pub fn run(
        &self,
        chains: &mut DeviceChains,
        target: &DeviceTarget,
        config: &StepConfig,
        plan: &RunPlan,
        stats: &mut ChainStats,
        on_progress: &mut dyn FnMut(&Progress<'_>) -> Result<()>,
        on_trace: &mut dyn FnMut(TraceChunk<'_>) -> Result<()>,
    ) -> Result<u64> {
        if plan.steps_per_launch == 0 {
            return Err(Error::InvalidRun(
                "steps_per_launch must be at least 1".into(),
            ));
        }
        if plan.thin > plan.steps {
            return Err(Error::InvalidRun(format!(
                "thin = {} is larger than steps = {}: nothing would be saved",
                plan.thin, plan.steps
            )));
        }
        crate::cpu::check_stream(chains.step, plan.steps)?;
        let shape = chains.shape;
        if let Some(d) = plan.diagnostics {
            crate::diagnostics::check_superchains(shape, d.superchain_size)?;
            if stats.moments.is_none() {
                return Err(Error::InvalidRun(
                    "the diagnostics need statistics with the running moments".into(),
                ));
            }
        }
        let len = shape.len();
        let slots = plan.trace_slots(shape);
        let mut trace = if slots > 0 {
            Some(self.alloc::<f32>("trace", slots * len)?)
        } else {
            None
        };
        let (mut done, mut used, mut flushed) = (0u64, 0usize, 0u64);
        let budget = (MAX_ELEMENT_STEPS_PER_LAUNCH / len as u64).max(1);
        while done < plan.steps {
            let mut k = (plan.steps - done)
                .min(u64::from(plan.steps_per_launch))
                .min(budget)
                .min(u64::from(launch_steps(u32::MAX, chains.step)));
            if let Some(d) = plan.diagnostics {
                k = k.min(d.schedule.next_boundary(stats.steps) - stats.steps);
            }
            let mut first_save = 0;
            if plan.thin > 0 {
                // The first save of this launch is after its step `first_save` (0-based).
                first_save = plan.thin - 1 - done % plan.thin;
                k = k.min(first_save + (slots - used) as u64 * plan.thin);
            }
            let k = k as u32;
            let saves = if plan.thin > 0 && first_save < u64::from(k) {
                (u64::from(k) - 1 - first_save) / plan.thin + 1
            } else {
                0
            };
            // Only launches that save get the trace (so `first_save < k` fits in 32 bits); a
            // `thin` beyond 32 bits saves at most once per launch, as its clamp does.
            let trace_args = trace.as_mut().filter(|_| saves > 0).map(|t| TraceArgs {
                buffer: t,
                slot: used,
                thin: plan.thin.min(u64::from(u32::MAX)) as u32,
                first: first_save as u32,
            });
            self.launch_chain(chains, target, config, k, stats, trace_args)?;
            done += u64::from(k);
            used += saves as usize;
            let diagnostics = match plan.diagnostics {
                Some(d) => self.close_half(stats, target, d.superchain_size, d.schedule)?,
                None => None,
            };
            let stop = plan
                .diagnostics
                .zip(diagnostics.as_ref())
                .is_some_and(|(p, d)| p.converged(d));
            if let Some(t) = &trace
                && (used == slots || done == plan.steps || stop)
                && used > 0
            {
                let states = download(&self.stream, "trace", &t.slice(..used * len))?;
                on_trace(TraceChunk {
                    first: flushed,
                    states: &states,
                })?;
                flushed += used as u64;
                used = 0;
            }
            self.stream.synchronize()?;
            on_progress(&Progress {
                done,
                total: plan.steps,
                diagnostics: diagnostics.as_ref(),
            })?;
            if stop {
                break;
            }
        }
        Ok(done)
    }

    fn launch_chain(
        &self,
        chains: &mut DeviceChains,
        target: &DeviceTarget,
        config: &StepConfig,
        steps: u32,
        stats: &mut ChainStats,
        trace: Option<TraceArgs<'_>>,
    ) -> Result<()> {
        target.check_shape(chains.shape)?;
        if stats.shape != chains.shape {
            return Err(Error::ShapeMismatch(format!(
                "the statistics are for {:?}, the chains are {:?}",
                stats.shape, chains.shape
            )));
        }
        if steps == 0 {
            return Ok(());
        }
        if stats.unfolded_steps + u64::from(steps) > COUNT_FOLD_STEPS {
            stats.fold_counts()?;
        }
        stats.unfolded_steps += u64::from(steps);
        // The per-dimension scales travel with each launch: `dim` floats.
        let scales = match config.proposal_scales(chains.shape)? {
            Some(s) => Some(self.upload("proposal scales", &s)?),
            None => None,
        };
        let scales = scales.as_ref();
        let (moments, scaled) = (stats.moments.is_some(), scales.is_some());
        match dispatch::fused(chains.shape, moments, scaled, self.device()) {
            Some(chosen) => {
                self.launch_fused(chosen, chains, target, config, scales, steps, stats, trace)
            }
            None => self.single_steps(chains, target, config, scales, steps, stats, trace),
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn launch_fused(
        &self,
        chosen: Launch,
        chains: &mut DeviceChains,
        target: &DeviceTarget,
        config: &StepConfig,
        scales: Option<&CudaSlice<f32>>,
        steps: u32,
        stats: &mut ChainStats,
        trace: Option<TraceArgs<'_>>,
    ) -> Result<()> {
        let shape = chains.shape;
        if launch_steps(steps, chains.step) != steps {
            return Err(Error::InvalidRun(format!(
                "a fused launch of {steps} steps from step {} would pass a multiple of 2^32 \
                 (its callers split such launches)",
                chains.step
            )));
        }
        let problem = ProblemArgs::new(target, shape, config.step_size());
        let null = 0u64;
        let (seed, first_step) = (config.seed(), chains.step);
        let function = self.target_function(target.kind, chosen.entry)?;
        let mut launch = self.stream.launch_builder(function);
        launch.arg(&mut chains.x).arg(&mut stats.accepted.device);
        launch.arg(&mut stats.nonfinite.device);
        launch.arg(&mut stats.null_moves.device);
        problem.push(&mut launch);
        match scales {
            Some(s) => launch.arg(s),
            None => launch.arg(&null),
        };
        launch.arg(&seed).arg(&first_step).arg(&steps);
        let moment_steps = stats.moments.as_ref().map_or(0, |m| m.current_n);
        match &mut stats.moments {
            Some(m) => launch.arg(&mut m.current.0).arg(&mut m.current.1),
            None => launch.arg(&null).arg(&null),
        };
        launch.arg(&moment_steps);
        let len = shape.len();
        let mut view;
        let (thin, first) = match trace {
            Some(t) => {
                view = t.buffer.slice_mut(t.slot * len..);
                launch.arg(&mut view);
                (t.thin, t.first)
            }
            None => {
                launch.arg(&null);
                (0u32, 0u32)
            }
        };
        launch.arg(&thin).arg(&first);
        // SAFETY: the arguments match `mh_chain_*`'s one signature (`mh_family_chain!` in
        // `kernel/src/gpu/chain.rs`) in order and type:
        // `(x: *mut f32, accepted_count: *mut u32, nonfinite_count: *mut u32,
        //   null_count: *mut u32, target: *const f32,
        //   batch: u64, dim: u64, step_size: f32, scale: *const f32, seed: u64,
        //   first_step: u64, steps: u32, mean: *mut f64, m2: *mut f64, stats_n: u64,
        //   trace: *mut f32, thin: u32, trace_first: u32)`.
        // x holds batch*dim floats and is updated in place (each row by the lanes that own
        // it); accepted_count, nonfinite_count and null_count hold batch u32 each (the last
        // touched by the `_stats` kernels only); the target its arrays for dim
        // (checked); scale dim floats (checked by `proposal_scales`) exactly when the
        // `_scaled` kernel is chosen, null otherwise and then never read; mean and
        // m2 batch*dim f64 when the `_stats` kernel is chosen (it is chosen exactly when they
        // exist), null otherwise and then never read; the trace view starts at the first free
        // slot and `run` sized the launch so that its saves fit the free slots (thin = 0:
        // null, never written). `dispatch::fused` chose a kernel whose registers hold the
        // row; blocks of 128 threads, a multiple of 32.
        unsafe { launch.launch(grid(chosen)) }?;
        chains.step += u64::from(steps);
        stats.add_steps(u64::from(steps));
        Ok(())
    }

    /// Rows too long for the fused kernel: single steps, each followed by the statistics
    /// update and, when due, a copy of the state into the trace.
    #[allow(clippy::too_many_arguments)]
    fn single_steps(
        &self,
        chains: &mut DeviceChains,
        target: &DeviceTarget,
        config: &StepConfig,
        scales: Option<&CudaSlice<f32>>,
        steps: u32,
        stats: &mut ChainStats,
        mut trace: Option<TraceArgs<'_>>,
    ) -> Result<()> {
        let shape = chains.shape;
        let len = shape.len();
        let (batch, dim) = (shape.batch() as u64, shape.dim() as u64);
        let problem = ProblemArgs::new(target, shape, config.step_size());
        let step = dispatch::run_step(shape, scales.is_some(), self.device());
        let step_function = self.target_function(target.kind, step.entry)?;
        let update = dispatch::stats_update(shape, self.device());
        let null = 0u64;
        let seed = config.seed();
        for j in 0..steps {
            let mut launch = self.stream.launch_builder(step_function);
            launch
                .arg(&chains.x)
                .arg(&mut chains.x_next)
                .arg(&mut chains.accepted)
                .arg(&mut stats.nonfinite.device);
            // Null moves are counted with the moments, as the fused kernels count them.
            match stats.moments.is_some() {
                true => launch.arg(&mut stats.null_moves.device),
                false => launch.arg(&null),
            };
            problem.push(&mut launch);
            match scales {
                Some(s) => launch.arg(s),
                None => launch.arg(&null),
            };
            launch.arg(&seed).arg(&chains.step).arg(&step.tile_rows);
            // SAFETY: `mh_run_step*(x, x_new, accepted: *mut u8, nonfinite_count: *mut u32,
            // null_count: *mut u32,
            // target, batch: u64, dim: u64, step_size: f32, scale: *const f32, seed: u64,
            // step: u64, tile_rows: u32)` (`mh_family_run_step!` in
            // `kernel/src/gpu/entries.rs`): x and x_next hold batch*dim floats and are distinct
            // allocations, accepted batch bytes, nonfinite_count batch u32, null_count batch
            // u32 or null (never touched then), the target its arrays for dim
            // (checked by `launch_chain`), scale dim floats exactly for the `_scaled`
            // kernels (null and never read otherwise); `dispatch::run_step` gives a power-of-two
            // tile between 32 / G and 32 rows and blocks of 128 threads.
            unsafe { launch.launch(grid(step)) }?;
            chains.swap();
            chains.step += 1;
            let moments = u32::from(stats.moments.is_some());
            let mut launch = self.stream.launch_builder(self.function(update.entry)?);
            launch
                .arg(&chains.x)
                .arg(&chains.accepted)
                .arg(&mut stats.accepted.device);
            let moment_steps = stats.moments.as_ref().map_or(0, |m| m.current_n);
            match &mut stats.moments {
                Some(m) => launch.arg(&mut m.current.0).arg(&mut m.current.1),
                None => launch.arg(&null).arg(&null),
            };
            launch
                .arg(&batch)
                .arg(&dim)
                .arg(&moment_steps)
                .arg(&moments);
            // SAFETY: `mh_chain_stats_update(x: *const f32, accepted: *const u8,
            // accepted_count: *mut u32, mean: *mut f64, m2: *mut f64, batch: u64, dim: u64,
            // stats_n: u64, moments: u32)`: x holds batch*dim floats, accepted batch bytes,
            // accepted_count batch u32, mean and m2 batch*dim f64 when moments = 1 (null and
            // never touched when 0).
            unsafe { launch.launch(grid(update)) }?;
            stats.add_steps(1);
            if let Some(t) = &mut trace
                && j >= t.first
                && (j - t.first) % t.thin == 0
            {
                let slot = t.slot + ((j - t.first) / t.thin) as usize;
                let mut dst = t.buffer.slice_mut(slot * len..(slot + 1) * len);
                self.stream.memcpy_dtod(&chains.x, &mut dst)?;
            }
        }
        Ok(())
    }
}

/// Where a launch writes its saved states.
struct TraceArgs<'a> {
    buffer: &'a mut CudaSlice<f32>,
    /// The first free slot.
    slot: usize,
    thin: u32,
    /// The launch's first save is after its step `first` (0-based).
    first: u32,
}

/// The steps of one launch from step counter `step`, at most `steps`: no more than reach the
/// next multiple of `2^32`, as the fused kernel asks (its lanes compute part of their Philox
/// calls once per launch from the high word of the step counter, which such a launch keeps:
/// `fused_mh_kernel::rng::QuadDraws`).
fn launch_steps(steps: u32, step: u64) -> u32 {
    let left = fused_mh_kernel::rng::steps_sharing_high_word(step);
    u64::from(steps).min(left) as u32
}
