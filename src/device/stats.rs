//! A run's statistics on the GPU: per-chain counts, running moments, and the split halves
//! behind the diagnostics.

use cudarc::driver::CudaSlice;
use fused_mh_kernel::moments;
use rayon::prelude::*;

use super::count_memory::{CountLanding, CountMemory};
use super::{Gpu, download};
use crate::error::Result;
use crate::{Diagnostics, Shape, host_memory, threads};

/// Per-chain statistics of a run, on the GPU: always the accepted-step count of each chain and
/// its count of non-finite steps (whose `log alpha` was a NaN or an infinity: the state or the
/// proposal held one, or the terms overflowed; such a step never moves the chain) and of null
/// moves (the proposal rounded back to the state); optionally (chosen at creation) the running
/// mean and variance of each chain and coordinate.
///
/// The moments are kept in f64: each launch accumulates its `K` steps in registers (Welford's
/// update in f32, over at most `K` values) and merges them into the f64 totals (Chan's formula
/// for combining samples), so a run of any length keeps its precision. A run with diagnostics
/// keeps them as two samples, split on its schedule ([`crate::diagnostics::split`]): the
/// draws before the last boundary, and the draws since.
///
/// The counts are 64-bit totals. The kernels add into a 32-bit count per chain (a 32-bit add
/// keeps the fused kernel's code as fast as it is); before those could pass `u32::MAX`, that
/// is after at most [`COUNT_FOLD_STEPS`] steps, they are folded into the 64-bit totals on
/// the host ([`Self::fold_counts`]: one copy, every four billion steps).
pub struct ChainStats {
    pub(super) accepted: Counts,
    pub(super) nonfinite: Counts,
    pub(super) null_moves: Counts,
    /// Steps in the device's counts since the last fold (at most [`COUNT_FOLD_STEPS`]).
    pub(super) unfolded_steps: u64,
    pub(super) moments: Option<Moments>,
    pub(super) shape: Shape,
    pub(super) steps: u64,
    /// The split diagnostics at the last checkpoint of a run.
    pub(super) diagnostics: Option<Diagnostics>,
}

/// The running moments on the device: the sample the kernels add to, and the closed halves of
/// a split run before it.
pub(super) struct Moments {
    /// `[batch, dim]` means and sums of squared deviations of the draws since the last
    /// boundary (all the draws, unsplit): what the kernels merge each launch into.
    pub(super) current: (CudaSlice<f64>, CudaSlice<f64>),
    /// Draws in `current`.
    pub(super) current_n: u64,
    /// The draws before the last boundary (allocated by the first run with diagnostics).
    pub(super) first: Option<(CudaSlice<f64>, CudaSlice<f64>)>,
    /// Draws in `first`.
    pub(super) first_n: u64,
}

/// One count per chain: the kernels' 32-bit counts since the last fold, and the 64-bit totals
/// folded before them.
pub(super) struct Counts {
    pub(super) device: CudaSlice<u32>,
    folded: Vec<u64>,
    /// The sum of `folded`.
    pub(super) folded_total: u64,
}

impl Counts {
    fn new(gpu: &Gpu, what: &'static str, batch: usize) -> Result<Self> {
        Ok(Self {
            device: gpu.alloc(what, batch)?,
            // Zero until the first fold (after 2^32 - 1 steps): pages left to the allocator.
            folded: host_memory::zeroed(what, batch)?,
            folded_total: 0,
        })
    }

    /// The totals (waits for queued work).
    fn totals(&self) -> Result<Vec<u64>> {
        let batch = self.folded.len();
        let mut totals = host_memory::zeroed::<u64>("counts", batch)?;
        let mut recent = host_memory::zeroed::<u32>("counts", batch)?;
        self.totals_into(&mut totals, &mut recent)?;
        Ok(totals)
    }

    /// The totals into `totals`, through `recent` (both `[batch]`; waits for queued work).
    fn totals_into(&self, totals: &mut [u64], recent: &mut [u32]) -> Result<()> {
        self.device.stream().memcpy_dtoh(&self.device, recent)?;
        self.add_folded(totals, recent)
    }

    /// `totals` = the folded totals plus `recent`, the device's counts downloaded.
    fn add_folded(&self, totals: &mut [u64], recent: &[u32]) -> Result<()> {
        // On all cores: at a million chains the time is the pages' first touches, where the
        // pages are new. The folded totals are zero until the first fold, and their pages
        // untouched (each first read a page fault): they are read only once they hold counts.
        threads::install(|| {
            let totals = totals.par_iter_mut().zip(recent);
            if self.folded_total == 0 {
                totals.for_each(|(total, &c)| *total = u64::from(c));
            } else {
                let totals = totals.zip(&self.folded);
                totals.for_each(|((total, &c), &folded)| *total = folded + u64::from(c));
            }
        })?;
        Ok(())
    }

    fn set(&mut self, what: &'static str, counts: &[u64]) -> Result<()> {
        crate::problem::check_len(what, self.folded.len(), counts.len())?;
        self.folded.copy_from_slice(counts);
        self.folded_total = counts.iter().sum();
        self.zero_device()
    }

    fn fold(&mut self) -> Result<()> {
        let recent = download(self.device.stream(), "counts", &self.device)?;
        for (total, c) in self.folded.iter_mut().zip(recent) {
            *total += u64::from(c);
            self.folded_total += u64::from(c);
        }
        self.zero_device()
    }

    fn zero_device(&mut self) -> Result<()> {
        let stream = self.device.stream().clone();
        Ok(stream.memset_zeros(&mut self.device)?)
    }
}

/// Waits for the downloads queued into a [`CountLanding`] on `counts`' stream. A download into
/// page-locked memory is queued like a kernel and returns at once; cudarc's slice would wait
/// on an event recorded after it, but this library turns cudarc's event tracking off
/// (`Gpu::open_with`), so no event is recorded and the stream itself is waited for.
fn wait_for_landing(counts: &Counts) -> Result<()> {
    Ok(counts.device.stream().synchronize()?)
}

/// Each chain's counts over the statistics' steps.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunCounts {
    /// Accepted steps.
    pub accepted: Vec<u64>,
    /// Steps whose `log alpha` was not finite.
    pub nonfinite: Vec<u64>,
    /// Null moves ([`ChainStats::null_move_counts`]); None for statistics without moments.
    pub null_moves: Option<Vec<u64>>,
}

/// The most steps the device's 32-bit counts take before [`ChainStats::fold_counts`]: a chain
/// counts at most one step per step, so its counts cannot pass `u32::MAX`.
pub const COUNT_FOLD_STEPS: u64 = u32::MAX as u64;

impl ChainStats {
    /// Counts `steps` more steps, in the moments' current sample too.
    pub(super) fn add_steps(&mut self, steps: u64) {
        self.steps += steps;
        if let Some(m) = &mut self.moments {
            m.current_n += steps;
        }
    }

    /// Steps these statistics cover.
    pub fn steps(&self) -> u64 {
        self.steps
    }

    /// Accepted steps of each chain (waits for queued work).
    pub fn accepted_counts(&self) -> Result<Vec<u64>> {
        self.accepted.totals()
    }

    /// Steps of each chain whose `log alpha` was not finite (waits for queued work).
    pub fn nonfinite_counts(&self) -> Result<Vec<u64>> {
        self.nonfinite.totals()
    }

    /// The three counts at once, written into `memory` (made for this batch, ideally while
    /// the GPU ran: [`CountMemory`]); waits for queued work. The same values as
    /// [`Self::accepted_counts`], [`Self::nonfinite_counts`] and [`Self::null_move_counts`].
    pub fn counts(&self, memory: CountMemory) -> Result<RunCounts> {
        let CountMemory {
            totals: [mut accepted, mut nonfinite, mut null_moves],
            mut recent,
        } = memory;
        self.check_count_memory(&[&accepted, &nonfinite, &null_moves], recent.len())?;
        self.accepted.totals_into(&mut accepted, &mut recent)?;
        self.nonfinite.totals_into(&mut nonfinite, &mut recent)?;
        let null_moves = match self.moments {
            Some(_) => {
                self.null_moves.totals_into(&mut null_moves, &mut recent)?;
                Some(null_moves)
            }
            None => None,
        };
        Ok(RunCounts {
            accepted,
            nonfinite,
            null_moves,
        })
    }

    /// [`Self::counts`], the device's counts downloaded into `landing` (page-locked: the three
    /// downloads queued together, each added into its totals when it has landed) and the
    /// totals into `memory` (its `recent` unused: [`CountMemory::touched_totals`]).
    pub fn counts_landed(
        &self,
        memory: CountMemory,
        landing: &mut CountLanding,
    ) -> Result<RunCounts> {
        let CountMemory {
            totals: [mut accepted, mut nonfinite, mut null_moves],
            ..
        } = memory;
        self.check_count_memory(&[&accepted, &nonfinite, &null_moves], landing.batch())?;
        let with_nulls = self.moments.is_some();
        let counts = [&self.accepted, &self.nonfinite, &self.null_moves];
        let landed = counts.iter().zip(&mut landing.counts);
        for (count, landing) in landed.take(if with_nulls { 3 } else { 2 }) {
            count.device.stream().memcpy_dtoh(&count.device, landing)?;
        }
        wait_for_landing(&self.accepted)?;
        let [a, n, z] = &landing.counts;
        self.accepted.add_folded(&mut accepted, a.as_slice()?)?;
        self.nonfinite.add_folded(&mut nonfinite, n.as_slice()?)?;
        let null_moves = if with_nulls {
            self.null_moves.add_folded(&mut null_moves, z.as_slice()?)?;
            Some(null_moves)
        } else {
            None
        };
        Ok(RunCounts {
            accepted,
            nonfinite,
            null_moves,
        })
    }

    /// The accepted and the non-finite steps of all chains, two numbers, their counts
    /// downloaded into `landing` (made for this batch) and added on the host's cores: what a
    /// warm-up launch asks, without the 64-bit totals' fresh pages of
    /// [`Self::accepted_counts`] (waits for queued work).
    pub fn count_sums(&self, landing: &mut CountLanding) -> Result<(u64, u64)> {
        self.check_count_memory(&[], landing.batch())?;
        let [a, n, _] = &mut landing.counts;
        for (count, landing) in [(&self.accepted, &mut *a), (&self.nonfinite, &mut *n)] {
            count.device.stream().memcpy_dtoh(&count.device, landing)?;
        }
        wait_for_landing(&self.accepted)?;
        let sum = |c: &[u32]| -> Result<u64> {
            threads::install(|| c.par_iter().map(|&c| u64::from(c)).sum::<u64>())
        };
        Ok((
            self.accepted.folded_total + sum(a.as_slice()?)?,
            self.nonfinite.folded_total + sum(n.as_slice()?)?,
        ))
    }

    /// Fails unless each of `totals` and `recent`, the memory the device's counts land in
    /// (a download fills it whole), holds this batch.
    fn check_count_memory(&self, totals: &[&Vec<u64>], recent: usize) -> Result<()> {
        let batch = self.shape.batch();
        for len in totals.iter().map(|v| v.len()).chain([recent]) {
            crate::problem::check_len("count memory", batch, len)?;
        }
        Ok(())
    }

    /// Starts each chain's accepted count from `counts[batch]`, e.g. the totals of an earlier
    /// run that this one continues (the device's counts start again from zero).
    pub fn set_accepted_counts(&mut self, counts: &[u64]) -> Result<()> {
        self.accepted.set("accepted counts", counts)
    }

    /// Steps of each chain that were null moves: their `log alpha` terms totalled exactly 0,
    /// because the proposal rounded back to the state in float32 (such a step is accepted and
    /// moves nothing; `fused_mh::reach`). Counted with the moments: None for statistics
    /// without them. Waits for queued work.
    pub fn null_move_counts(&self) -> Result<Option<Vec<u64>>> {
        self.moments
            .as_ref()
            .map(|_| self.null_moves.totals())
            .transpose()
    }

    /// Starts each chain's non-finite count from `counts[batch]`, as
    /// [`Self::set_accepted_counts`].
    pub fn set_nonfinite_counts(&mut self, counts: &[u64]) -> Result<()> {
        self.nonfinite.set("non-finite counts", counts)
    }

    /// Adds the device's 32-bit counts into the 64-bit totals and zeroes them (waits for
    /// queued work). [`Gpu::steps`] and [`Gpu::run`] call it when needed; the results of
    /// [`Self::accepted_counts`] and [`Self::nonfinite_counts`] do not change.
    pub fn fold_counts(&mut self) -> Result<()> {
        self.accepted.fold()?;
        self.nonfinite.fold()?;
        self.null_moves.fold()?;
        self.unfolded_steps = 0;
        Ok(())
    }

    /// The fraction of all steps of all chains that were accepted (0 before any step).
    pub fn acceptance_rate(&self) -> Result<f64> {
        let total: u64 = self.accepted_counts()?.iter().sum();
        let steps = self.steps as f64 * self.shape.batch() as f64;
        Ok(if steps > 0.0 {
            total as f64 / steps
        } else {
            0.0
        })
    }

    /// The split diagnostics at the last checkpoint of the runs these statistics kept (None
    /// before the first, or without a diagnostics plan).
    pub fn diagnostics(&self) -> Option<&Diagnostics> {
        self.diagnostics.as_ref()
    }

    /// Each chain's mean and sum of squared deviations over all the steps, `[batch, dim]`,
    /// copied to the host (the two samples of a split run merged there, on all cores); None if
    /// the moments were not asked for (waits for queued work).
    fn host_moments(&self) -> Result<Option<(Vec<f64>, Vec<f64>)>> {
        let Some(m) = &self.moments else {
            return Ok(None);
        };
        let stream = m.current.0.stream();
        let copy = |(mean, m2): &(CudaSlice<f64>, CudaSlice<f64>)| -> Result<(Vec<f64>, Vec<f64>)> {
            Ok((
                download(stream, "means", mean)?,
                download(stream, "variances", m2)?,
            ))
        };
        let first = m.first.as_ref().filter(|_| m.first_n > 0);
        Ok(Some(match first {
            None => copy(&m.current)?,
            Some(first) if m.current_n == 0 => copy(first)?,
            Some(first) => {
                let (mut mean, mut m2) = copy(first)?;
                let (mean_b, m2_b) = copy(&m.current)?;
                let (n_a, n_b) = (m.first_n, m.current_n);
                threads::install(|| {
                    (&mut mean, &mut m2, &mean_b, &m2_b)
                        .into_par_iter()
                        .for_each(|(mean, m2, &mean_b, &m2_b)| {
                            (*mean, *m2) = moments::merge((n_a, *mean, *m2), (n_b, mean_b, m2_b));
                        });
                })?;
                (mean, m2)
            }
        }))
    }

    /// Each chain's mean and variance over the steps, `[batch, dim]` (the variance the mean
    /// squared deviation, divided by the number of steps, as NumPy's `var`), in one copy
    /// from the device; None if the moments were not asked for.
    pub fn mean_var(&self) -> Result<Option<(Vec<f64>, Vec<f64>)>> {
        let n = self.steps.max(1) as f64;
        let Some((mean, mut m2)) = self.host_moments()? else {
            return Ok(None);
        };
        threads::install(|| m2.par_iter_mut().for_each(|v| *v /= n))?;
        Ok(Some((mean, m2)))
    }

    /// The mean of each chain's states over the steps, `[batch, dim]` (None if the moments
    /// were not asked for).
    pub fn means(&self) -> Result<Option<Vec<f64>>> {
        Ok(self.host_moments()?.map(|(mean, _)| mean))
    }

    /// The variance of each chain's states over the steps, `[batch, dim]`: the mean squared
    /// deviation from [`Self::means`] (divided by the number of steps, as NumPy's `var`).
    /// [`Self::mean_var`] gives both from one copy.
    pub fn variances(&self) -> Result<Option<Vec<f64>>> {
        Ok(self.mean_var()?.map(|(_, var)| var))
    }
}

impl Gpu {
    /// Zeroed statistics for chains of `shape`, with the running moments if `moments`.
    pub fn new_stats(&self, shape: Shape, moments: bool) -> Result<ChainStats> {
        let moments = if moments {
            Some(Moments {
                current: (
                    self.alloc("means", shape.len())?,
                    self.alloc("variances", shape.len())?,
                ),
                current_n: 0,
                first: None,
                first_n: 0,
            })
        } else {
            None
        };
        Ok(ChainStats {
            accepted: Counts::new(self, "accepted counts", shape.batch())?,
            nonfinite: Counts::new(self, "non-finite counts", shape.batch())?,
            null_moves: Counts::new(self, "null-move counts", shape.batch())?,
            unfolded_steps: 0,
            moments,
            shape,
            steps: 0,
            diagnostics: None,
        })
    }
}
