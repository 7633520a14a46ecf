//! The GPU's hooks for the project's tests and lessons program (the `testing` feature): a
//! step as a lesson computes it, and Philox and the normal transform on many GPU threads.

use cudarc::driver::PushKernelArg;
use fused_mh_kernel::philox::{Ctr, Key};

use super::{DeviceChains, DeviceTarget, Gpu, download, grid};
use crate::dispatch;
use crate::error::{Error, Result};
use crate::problem::{Draws, StepConfig, check_len};
use crate::target::TargetKind;

impl Gpu {
    /// One step as a lesson of the kernel crate computes it (`kernel/src/gpu/lessons/`):
    /// the same results as [`Gpu::step`] (within the GPU-CPU tolerances: a lesson sums a row's
    /// terms in its own order), by a simpler kernel. For the lessons table of the benchmark and
    /// the tests that check every lesson against the CPU reference.
    pub fn step_lesson(
        &self,
        lesson: dispatch::Lesson,
        chains: &mut DeviceChains,
        target: &DeviceTarget,
        config: &StepConfig,
    ) -> Result<()> {
        let chosen = dispatch::lesson(lesson, chains.shape, self.device()).ok_or_else(|| {
            Error::ShapeMismatch(format!(
                "lesson {} takes rows of at most 1024 elements in whole quads, not {}",
                lesson.number,
                chains.shape.dim()
            ))
        })?;
        config.check_no_scales("Gpu::step_lesson")?;
        if target.kind != TargetKind::Gaussian {
            return Err(Error::InvalidRun(format!(
                "the lessons step the Gaussian only, not the {}",
                target.kind.name()
            )));
        }
        let function = self.function(chosen.entry)?;
        let draws = Draws::Philox {
            seed: config.seed(),
            step: chains.step,
        };
        self.launch_step_with(chosen, function, chains, target, config.step_size(), draws)?;
        chains.step += 1;
        Ok(())
    }

    /// Philox4x32-10 of each (counter, key) pair, computed on the GPU by one thread per pair
    /// (for known-answer tests of the device code).
    pub fn philox4x32_10_many(&self, ctr: &[Ctr], key: &[Key]) -> Result<Vec<Ctr>> {
        check_len("key", ctr.len(), key.len())?;
        if ctr.is_empty() {
            return Ok(Vec::new());
        }
        let ctr_dev = self.upload("ctr", ctr.as_flattened())?;
        let key_dev = self.upload("key", key.as_flattened())?;
        let mut out_dev = self.alloc::<u32>("philox output", 4 * ctr.len())?;
        let n = ctr.len() as u64;
        let chosen = dispatch::philox_many(n, self.device());
        let mut launch = self.stream.launch_builder(self.function(chosen.entry)?);
        launch.arg(&ctr_dev).arg(&key_dev).arg(&mut out_dev).arg(&n);
        // SAFETY: `philox4x32_10_many(ctr: *const u32, key: *const u32, out: *mut u32, n: u64)`;
        // ctr and out hold 4n words, key 2n; only out is written.
        unsafe { launch.launch(grid(chosen)) }?;
        let out = download(&self.stream, "philox output", &out_dev)?;
        Ok(out.as_chunks::<4>().0.to_vec())
    }

    /// The GPU's normals ([`fused_mh_kernel::rng::box_muller`]) of each pair of words, one
    /// thread per pair (for the test of their accuracy against f64).
    pub fn box_muller_many(&self, words: &[[u32; 2]]) -> Result<Vec<[f32; 2]>> {
        if words.is_empty() {
            return Ok(Vec::new());
        }
        let words_dev = self.upload("words", words.as_flattened())?;
        let mut out_dev = self.alloc::<f32>("normals", 2 * words.len())?;
        let n = words.len() as u64;
        let chosen = dispatch::box_muller_many(n, self.device());
        let mut launch = self.stream.launch_builder(self.function(chosen.entry)?);
        launch.arg(&words_dev).arg(&mut out_dev).arg(&n);
        // SAFETY: `box_muller_many(words: *const u32, out: *mut f32, n: u64)`; words and out
        // hold 2n items; only out is written.
        unsafe { launch.launch(grid(chosen)) }?;
        let out = download(&self.stream, "normals", &out_dev)?;
        Ok(out.as_chunks::<2>().0.to_vec())
    }

    /// `steps` steps of every chain in one launch as a fused lesson computes them: lesson 11
    /// (`dispatch::FUSED_LESSON`, `kernel/src/gpu/lessons/l11_fused_steps.rs`, the normals'
    /// logarithm the CPU reference's polynomial) or lesson 15 (`dispatch::FAST_LOG_LESSON`, the
    /// same results as [`Gpu::steps`], bit for bit, by a simpler kernel); the accepted steps
    /// added to `stats`' counts. For the lessons table and the tests of the fused lessons.
    pub fn steps_lesson(
        &self,
        lesson: dispatch::Lesson,
        chains: &mut DeviceChains,
        target: &DeviceTarget,
        config: &StepConfig,
        steps: u32,
        stats: &mut crate::ChainStats,
    ) -> Result<()> {
        let shape = chains.shape;
        target.check_shape(shape)?;
        config.check_no_scales("Gpu::steps_lesson")?;
        if target.kind != TargetKind::Gaussian || stats.shape != shape {
            return Err(Error::InvalidRun(
                "the fused lesson steps the Gaussian, with statistics of the chains' shape".into(),
            ));
        }
        if ![dispatch::FUSED_LESSON, dispatch::FAST_LOG_LESSON].contains(&lesson) {
            return Err(Error::InvalidRun(format!(
                "lesson {} is not a fused lesson (11 or 15)",
                lesson.number
            )));
        }
        let chosen = dispatch::lesson(lesson, shape, self.device()).ok_or_else(|| {
            Error::ShapeMismatch(format!(
                "the fused lessons take rows of at most 1024 elements in whole quads, not {}",
                shape.dim()
            ))
        })?;
        if stats.unfolded_steps + u64::from(steps) > super::COUNT_FOLD_STEPS {
            stats.fold_counts()?;
        }
        stats.unfolded_steps += u64::from(steps);
        let (batch, dim) = (shape.batch() as u64, shape.dim() as u64);
        let (step_size, seed, first_step) = (config.step_size(), config.seed(), chains.step);
        let mut launch = self.stream.launch_builder(self.function(chosen.entry)?);
        launch.arg(&mut chains.x).arg(&mut stats.accepted.device);
        launch
            .arg(&target.address)
            .arg(&batch)
            .arg(&dim)
            .arg(&step_size);
        launch.arg(&seed).arg(&first_step).arg(&steps);
        // SAFETY: `lesson11_fused_steps_*` and `lesson15_fast_log_*(x: *mut f32,
        // accepted_count: *mut u32, target, batch: u64, dim: u64, step_size: f32, seed: u64,
        // first_step: u64, steps: u32)`: x
        // holds batch*dim floats (updated in place, each row by the lanes that own it),
        // accepted_count batch u32, the target the Gaussian's 2 * dim floats (checked);
        // `dispatch::lesson` chose the variant that holds the row (whole quads, at most 1024
        // elements) and blocks of 128 threads.
        unsafe { launch.launch(grid(chosen)) }?;
        chains.step += u64::from(steps);
        stats.add_steps(u64::from(steps));
        Ok(())
    }
}
