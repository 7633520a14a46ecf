//! The convergence diagnostics on the GPU: a run's per-chain moments reduced to a few numbers
//! per dimension by `mh_diagnostics_sums`, so that nothing per chain travels to the host (the
//! formulas: [`crate::diagnostics`]), and the split halves closed on the device
//! (`mh_moments_merge`, [`crate::diagnostics::split`]).

use cudarc::driver::{CudaSlice, PushKernelArg};

use super::stats::Moments;
use super::{Gpu, download, grid};
use crate::diagnostics::{self, Diagnostics, SplitSchedule};
use crate::dispatch;
use crate::error::{Error, Result};
use crate::{ChainStats, DeviceTarget, Shape};

/// A `[batch, dim]` sample's means and sums of squared deviations on the device.
type DeviceMoments = (CudaSlice<f64>, CudaSlice<f64>);

impl Gpu {
    /// Nested R-hat and the ESS of each dimension from the running moments in `stats` (which
    /// must keep them: [`Gpu::new_stats`] with `moments`), unsplit, in superchains of
    /// `superchain_size` consecutive chains: the diagnostics of one sample (the warm-up's
    /// launches). A run's split diagnostics are [`ChainStats::diagnostics`]. Copies
    /// `3 * dim + 1` numbers to the host.
    pub fn diagnostics(
        &self,
        stats: &ChainStats,
        target: &DeviceTarget,
        superchain_size: usize,
    ) -> Result<Diagnostics> {
        let shape = stats.shape;
        diagnostics::check_superchains(shape, superchain_size)?;
        let Some(m) = &stats.moments else {
            return Err(Error::InvalidRun(
                "the diagnostics need statistics with the running moments".into(),
            ));
        };
        if m.first_n > 0 {
            return Err(Error::InvalidRun(
                "these statistics are split by a run: its diagnostics are ChainStats::diagnostics"
                    .into(),
            ));
        }
        let counts = (shape, &stats.accepted.device);
        let sums =
            self.superchain_sums(&m.current, m.current_n, counts, target, superchain_size)?;
        Ok(Diagnostics {
            acceptance_rate: Some(acceptance(&sums, stats)),
            ..diagnostics::from_superchain_sums(
                shape.batch() / superchain_size,
                superchain_size,
                m.current_n,
                &sums,
            )
        })
    }

    /// At a boundary of `schedule`, closes the current half of `stats`' split moments
    /// ([`crate::diagnostics::split`]): the split diagnostics at a checkpoint, then the current
    /// sample merged into the first and emptied. Elsewhere nothing.
    pub(super) fn close_half(
        &self,
        stats: &mut ChainStats,
        target: &DeviceTarget,
        superchain_size: usize,
        schedule: SplitSchedule,
    ) -> Result<Option<Diagnostics>> {
        let draws = stats.steps;
        if !schedule.is_boundary(draws) {
            return Ok(None);
        }
        let moments = stats.moments.as_ref().ok_or_else(|| {
            Error::InvalidRun("the diagnostics need statistics with the running moments".into())
        })?;
        let (m, shape) = (superchain_size, stats.shape);
        let counts = (shape, &stats.accepted.device);
        let mut found = None;
        if schedule.is_checkpoint(draws) {
            // The first half is as the boundary before closed it: its sums are taken now, where
            // they are needed (after a run's last checkpoint none are).
            let first = moments.first.as_ref().filter(|_| moments.first_n > 0);
            let first = first.ok_or_else(|| {
                Error::InvalidRun(format!(
                    "a checkpoint at {draws} draws without the half before it: the statistics \
                     must be split on this schedule from their first step"
                ))
            })?;
            let dim = shape.dim();
            let first = self.superchain_sums(first, moments.first_n, counts, target, m)?;
            let second =
                self.superchain_sums(&moments.current, moments.current_n, counts, target, m)?;
            found = Some(Diagnostics {
                acceptance_rate: Some(acceptance(&second, stats)),
                ..diagnostics::split::from_halves(
                    shape.batch() / m,
                    m,
                    moments.current_n,
                    &first[..3 * dim],
                    &second[..3 * dim],
                )
            });
        }
        let moments = stats.moments.as_mut().expect("checked above");
        self.absorb_current(moments, shape)?;
        if found.is_some() {
            stats.diagnostics.clone_from(&found);
        }
        Ok(found)
    }

    /// The moments of all the steps of `stats` on the device, `[batch, dim]` means and sums of
    /// squared deviations (a split run's two samples merged; the variances are the sums over
    /// [`ChainStats::steps`]), for handing over; None if the moments were not asked for.
    pub fn merged_moments(&self, stats: ChainStats) -> Result<Option<DeviceMoments>> {
        let shape = stats.shape;
        let Some(mut moments) = stats.moments else {
            return Ok(None);
        };
        // One sample holds every draw when the other is empty (a run whose last launch
        // closed a half leaves the current one so): it is the merge, and no kernel need read
        // the other.
        if moments.first_n == 0 {
            return Ok(Some(moments.current));
        }
        if moments.current_n == 0 {
            return Ok(moments.first);
        }
        self.absorb_current(&mut moments, shape)?;
        Ok(moments.first)
    }

    /// Merges the current sample of `moments` into the first (allocating it, the first time)
    /// and empties the current one (its count 0: the next launch writes it afresh).
    fn absorb_current(&self, moments: &mut Moments, shape: Shape) -> Result<()> {
        if moments.first_n == 0 {
            // Nothing before: the current sample becomes the first, and a new one the current.
            let fresh = match moments.first.take() {
                Some(f) => f,
                // SAFETY: the kernels write, not read, moments whose count is 0 (the current
                // one's is, below), and nothing else reads a current sample of no draws.
                None => unsafe {
                    (
                        self.alloc_unwritten("split means", shape.len())?,
                        self.alloc_unwritten("split variances", shape.len())?,
                    )
                },
            };
            moments.first = Some(std::mem::replace(&mut moments.current, fresh));
        } else {
            let first = moments
                .first
                .as_mut()
                .expect("a first sample with draws exists");
            let chosen = dispatch::moments_merge(shape, self.device());
            let (n_into, n_from, len) = (moments.first_n, moments.current_n, shape.len() as u64);
            let mut launch = self.stream.launch_builder(self.function(chosen.entry)?);
            launch.arg(&mut first.0).arg(&mut first.1).arg(&n_into);
            launch
                .arg(&moments.current.0)
                .arg(&moments.current.1)
                .arg(&n_from);
            launch.arg(&len);
            // SAFETY: `mh_moments_merge(into_mean: *mut f64, into_m2: *mut f64, into_n: u64,
            // from_mean: *const f64, from_m2: *const f64, from_n: u64, len: u64)` in
            // `kernel/src/gpu/stats.rs`: all four buffers hold `len = batch * dim` f64 (both
            // allocated for this shape) and are distinct allocations; only `into` is written.
            unsafe { launch.launch(grid(chosen)) }?;
        }
        moments.first_n += moments.current_n;
        // The kernels write, not read, moments whose count is 0: nothing to clear.
        moments.current_n = 0;
        Ok(())
    }

    /// The per-dimension superchain sums of one sample (`3 * dim`) and, last, the chains'
    /// accepted counts since the last fold: `mh_diagnostics_sums`.
    fn superchain_sums(
        &self,
        (mean, m2): &DeviceMoments,
        draws: u64,
        (shape, accepted): (Shape, &CudaSlice<u32>),
        target: &DeviceTarget,
        superchain_size: usize,
    ) -> Result<Vec<f64>> {
        target.check_shape(shape)?;
        if draws < 2 {
            return Err(Error::InvalidRun(format!(
                "R-hat needs at least 2 draws per chain, not {draws}"
            )));
        }
        let mut sums = self.alloc::<f64>("diagnostics sums", 3 * shape.dim() + 1)?;
        let chosen = dispatch::diagnostics_sums(shape, superchain_size, self.device());
        let (batch, dim) = (shape.batch() as u64, shape.dim() as u64);
        let m = superchain_size as u64;
        let mut launch = self.stream.launch_builder(self.function(chosen.entry)?);
        // The target's array 0 is its location, `mu`, for every target.
        launch.arg(mean).arg(m2).arg(accepted).arg(&target.arrays);
        launch
            .arg(&batch)
            .arg(&dim)
            .arg(&m)
            .arg(&draws)
            .arg(&mut sums);
        // SAFETY: `mh_diagnostics_sums(mean: *const f64, m2: *const f64, accepted: *const u32,
        // mu: *const f32, batch: u64, dim: u64, superchain: u64, draws: u64, out: *mut f64)` in
        // `kernel/src/gpu/stats.rs`: mean and m2 hold batch*dim f64 (the stats' shape),
        // accepted batch u32, mu dim floats (checked), out 3*dim+1 zeroed f64 and is the only
        // buffer written; the superchain size divides the batch (checked by the callers) and
        // draws >= 2 (checked); `dispatch` gives blocks of 256 threads and at least one warp
        // per tile of 32 dimensions.
        unsafe { launch.launch(grid(chosen)) }?;
        download(&self.stream, "diagnostics", &sums)
    }
}

/// The acceptance rate of all the steps of `stats`: the kernel's sum of the counts since the
/// last fold (the last of `sums`) plus the folded totals.
fn acceptance(sums: &[f64], stats: &ChainStats) -> f64 {
    let accepted = sums[sums.len() - 1] + stats.accepted.folded_total as f64;
    accepted / (stats.steps as f64 * stats.shape.batch() as f64)
}
