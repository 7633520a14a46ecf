//! Split statistics that stay exact as a run grows.
//!
//! Split R-hat needs each chain's first half and second half separately; but the middle of a
//! run moves as the run goes on, and running moments cannot give back the draws that cross it.
//! So the halves are closed on a doubling schedule ([`SplitSchedule`]): boundaries after
//! `h, 2h, 4h, 8h, ...` draws. Between two boundaries the statistics keep two samples per
//! chain and coordinate: `first`, every draw before the last boundary, and `current`, the
//! draws since. At a boundary `b >= 2h` (a *checkpoint*), `first` holds draws `[0, b/2)` and
//! `current` draws `[b/2, b)`: exactly the two halves. The diagnostics are computed there,
//! then `current` is merged into `first` (Chan's formula, [`fused_mh_kernel::moments`]) and
//! starts again empty. Two samples per chain whatever the length of the run; the run's own
//! moments are the two merged.
//!
//! The cost: diagnostics only at checkpoints, `log2(steps / h)` of them in a run, each one a
//! pass over the second half's moments and a merge. The price is their spacing: an early stop
//! (`--until-rhat`) is decided at a checkpoint, at most twice the draws of the first point at
//! which R-hat would have passed. A run whose length is not a checkpoint reports the
//! diagnostics of its last checkpoint, over that many draws ([`Diagnostics::draws`]).
//!
//! The superchain sums of `first` are computed when it is closed (for the next checkpoint,
//! where it is the first half), so a checkpoint reads each half's moments once.

use rayon::prelude::*;

use super::{Diagnostics, from_superchain_sums, superchain_sums};
use crate::error::{Error, Result};
use crate::{Shape, host_memory, threads};

/// The most checkpoints [`SplitSchedule::ending_at`] plans: each costs a few passes over the
/// moments, and the last is the one a run reports.
pub const MAX_CHECKPOINTS: usize = 4;

/// The boundaries where the split statistics close a half: after `half * 2^i` draws per chain,
/// `i = 0, 1, ...`; those past the first are the checkpoints, where the diagnostics are
/// computed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SplitSchedule {
    half: u64,
}

impl SplitSchedule {
    /// Boundaries after `half`, `2 half`, `4 half`, ... draws; `half` at least 2 (a half needs a
    /// variance).
    pub fn new(half: u64) -> Result<Self> {
        if half < 2 {
            return Err(Error::InvalidRun(format!(
                "split statistics need at least 2 draws per half, not {half}"
            )));
        }
        Ok(Self { half })
    }

    /// The schedule for a run of `steps` draws per chain whose last checkpoint is `steps`
    /// (`steps - 1` when odd: the last draw then counts in the moments, not the diagnostics),
    /// in launches of `launch_steps`: `half` is `steps / 2^j` for the `j <= `
    /// [`MAX_CHECKPOINTS`] (the number of checkpoints) that keeps every boundary at the end of
    /// a launch, the most such; where none does, `j = 1` (one launch cut in two). A launch cut
    /// at a boundary costs a launch's fixed work again (on the GPU with moments, a pass over
    /// them: 1.4 ms at (1M, 64)). None below 4 draws.
    pub fn ending_at(steps: u64, launch_steps: u64) -> Option<Self> {
        let even = steps & !1;
        if even < 4 {
            return None;
        }
        let mut candidates = Vec::new();
        let mut half = even / 2;
        while candidates.len() < MAX_CHECKPOINTS && half >= 2 {
            candidates.push(half);
            if !half.is_multiple_of(2) {
                break;
            }
            half /= 2;
        }
        let aligned = candidates
            .iter()
            .rev()
            .find(|&&h| h.is_multiple_of(launch_steps.max(1)));
        Some(Self {
            half: *aligned.unwrap_or(&candidates[0]),
        })
    }

    /// The schedule for an early stop after at least `min_draws` draws per chain, in launches
    /// of `launch_steps`: the first checkpoint is `min_draws` rounded up to an even number, at
    /// least 4, and up further so that the boundaries end launches where that at most doubles
    /// it: to a multiple of `launch_steps` (of `launch_steps / 2^i` below it, when that
    /// divides it).
    pub fn from_min_draws(min_draws: u64, launch_steps: u64) -> Self {
        let half = min_draws.div_ceil(2).max(2);
        let k = launch_steps.max(1);
        let mut aligned = k * half.div_ceil(k);
        while aligned.is_multiple_of(2) && aligned / 2 >= half {
            aligned /= 2;
        }
        Self {
            half: if aligned <= 2 * half { aligned } else { half },
        }
    }

    /// Draws in the first half at the first checkpoint.
    pub fn half(&self) -> u64 {
        self.half
    }

    /// The first boundary after `done` draws (`u64::MAX` past the last representable one).
    pub fn next_boundary(&self, done: u64) -> u64 {
        let mut b = self.half;
        while b <= done {
            match b.checked_mul(2) {
                Some(next) => b = next,
                None => return u64::MAX,
            }
        }
        b
    }

    /// Whether `draws` is a checkpoint: a boundary past the first.
    pub fn is_checkpoint(&self, draws: u64) -> bool {
        draws >= 2 * self.half
            && draws.is_multiple_of(self.half)
            && (draws / self.half).is_power_of_two()
    }

    /// Whether `draws` is a boundary.
    pub fn is_boundary(&self, draws: u64) -> bool {
        draws.is_multiple_of(self.half) && (draws / self.half).is_power_of_two()
    }
}

/// The split diagnostics from the superchain sums of the two halves of a checkpoint
/// ([`super::superchain_sums`], or the GPU's), `half_draws` draws each: every half-chain a
/// chain of its own, the first halves of a superchain one superchain and their second halves
/// another (`2 * superchains` in all). `draws` in the result is `2 * half_draws`.
pub fn from_halves(
    superchains: usize,
    superchain_size: usize,
    half_draws: u64,
    first: &[f64],
    second: &[f64],
) -> Diagnostics {
    let sums: Vec<f64> = first.iter().zip(second).map(|(a, b)| a + b).collect();
    Diagnostics {
        draws: 2 * half_draws,
        ..from_superchain_sums(2 * superchains, superchain_size, half_draws, &sums)
    }
}

/// One sample's running moments per chain and coordinate: `n` draws, means, sums of squared
/// deviations, each `[batch, dim]`.
struct Sample {
    n: u64,
    mean: Vec<f64>,
    m2: Vec<f64>,
}

impl Sample {
    fn new(len: usize) -> Result<Self> {
        Ok(Self {
            n: 0,
            mean: host_memory::filled("means", len, 0.0)?,
            m2: host_memory::filled("variances", len, 0.0)?,
        })
    }

    /// Merges `other` into this sample and empties it (zeroes: Welford's update starts from
    /// them).
    fn absorb(&mut self, other: &mut Sample) -> Result<()> {
        let (n_a, n_b) = (self.n, other.n);
        threads::install(|| {
            (&mut self.mean, &mut self.m2, &other.mean, &other.m2)
                .into_par_iter()
                .for_each(|(mean, m2, &mean_b, &m2_b)| {
                    (*mean, *m2) =
                        fused_mh_kernel::moments::merge((n_a, *mean, *m2), (n_b, mean_b, m2_b));
                });
            other.mean.par_iter_mut().for_each(|v| *v = 0.0);
            other.m2.par_iter_mut().for_each(|v| *v = 0.0);
        })?;
        self.n += n_b;
        other.n = 0;
        Ok(())
    }
}

/// The split statistics of a run on the CPU (the GPU's are in [`crate::ChainStats`]): the two
/// samples of the module doc, on the schedule of `schedule`.
pub struct SplitMoments {
    shape: Shape,
    /// Chains per superchain and the schedule; None: one sample, never split.
    split: Option<(usize, SplitSchedule)>,
    first: Sample,
    current: Sample,
    /// The superchain sums of `first`, computed when it was closed.
    first_sums: Vec<f64>,
}

impl SplitMoments {
    /// Empty statistics for chains of `shape`, split in superchains of `superchain_size` on
    /// `schedule` (None: one sample, no diagnostics).
    pub fn new(shape: Shape, split: Option<(usize, SplitSchedule)>) -> Result<Self> {
        if let Some((m, _)) = split {
            super::check_superchains(shape, m)?;
        }
        Ok(Self {
            shape,
            split,
            first: Sample::new(shape.len())?,
            current: Sample::new(shape.len())?,
            first_sums: Vec::new(),
        })
    }

    /// Draws so far.
    pub fn draws(&self) -> u64 {
        self.first.n + self.current.n
    }

    /// Adds the states `x[batch, dim]` of one more step (Welford's update in f64).
    pub fn push(&mut self, x: &[f32]) -> Result<()> {
        let n = self.current.n + 1;
        threads::install(|| {
            (&mut self.current.mean, &mut self.current.m2, x)
                .into_par_iter()
                .for_each(|(mean, m2, &v)| {
                    (*mean, *m2) = fused_mh_kernel::moments::push(n, *mean, *m2, f64::from(v));
                });
        })?;
        self.current.n = n;
        Ok(())
    }

    /// At a boundary of the schedule, closes the current half: the diagnostics at a checkpoint
    /// (means shifted by `shift[dim]`, as the GPU's by mu), nothing before; elsewhere nothing.
    pub fn close_if_due(&mut self, shift: &[f32]) -> Result<Option<Diagnostics>> {
        let draws = self.draws();
        let Some((m, schedule)) = self.split.filter(|(_, s)| s.is_boundary(draws)) else {
            return Ok(None);
        };
        let shape = self.shape;
        let sums = |s: &Sample| superchain_sums(shape, m, s.n, (&s.mean, &s.m2), Some(shift));
        let diagnostics = schedule.is_checkpoint(draws).then(|| {
            let second = sums(&self.current);
            from_halves(shape.batch() / m, m, draws / 2, &self.first_sums, &second)
        });
        self.first.absorb(&mut self.current)?;
        self.first_sums = sums(&self.first);
        Ok(diagnostics)
    }

    /// The run's moments: each chain's mean and variance (as NumPy's `var`) over every draw.
    pub fn into_mean_var(mut self) -> Result<(Vec<f64>, Vec<f64>)> {
        self.first.absorb(&mut self.current)?;
        let n = self.first.n.max(1) as f64;
        let mut var = self.first.m2;
        threads::install(|| var.par_iter_mut().for_each(|v| *v /= n))?;
        Ok((self.first.mean, var))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schedules() {
        // 5000 = 625 * 2^3: boundaries 625, 1250, 2500, 5000; checkpoints from 1250.
        let s = SplitSchedule::ending_at(5000, 1).unwrap();
        assert_eq!(s.half(), 625);
        assert_eq!(SplitSchedule::ending_at(5001, 1), Some(s));
        let boundaries: Vec<u64> = std::iter::successors(Some(0), |&d| {
            Some(s.next_boundary(d)).filter(|&b| b <= 5000)
        })
        .skip(1)
        .collect();
        assert_eq!(boundaries, [625, 1250, 2500, 5000]);
        assert!(!s.is_checkpoint(625) && s.is_checkpoint(1250) && s.is_checkpoint(5000));
        assert!(!s.is_boundary(1875) && !s.is_checkpoint(3750));
        // At most 4 checkpoints: 1024 -> halves 512, 256, 128, 64.
        assert_eq!(SplitSchedule::ending_at(1024, 1).unwrap().half(), 64);
        assert_eq!(SplitSchedule::ending_at(6, 1).unwrap().half(), 3);
        assert_eq!(SplitSchedule::ending_at(3, 1), None);
        // Launches of 100: 1000 -> 500 (250 and 125 would cut launches); 100000 -> 12500.
        assert_eq!(SplitSchedule::ending_at(1000, 100).unwrap().half(), 500);
        assert_eq!(
            SplitSchedule::ending_at(100_000, 100).unwrap().half(),
            12_500
        );
        // No aligned half (1000 in launches of 300): one checkpoint, one launch cut.
        assert_eq!(SplitSchedule::ending_at(1000, 300).unwrap().half(), 500);
        assert_eq!(SplitSchedule::from_min_draws(101, 1).half(), 51);
        assert_eq!(SplitSchedule::from_min_draws(1, 1).half(), 2);
        // Launches of 100: min 100 -> half 50 (cuts the first launch only); launches of 70:
        // min 100 -> 70; launches of 20: min 100 -> 60.
        assert_eq!(SplitSchedule::from_min_draws(100, 100).half(), 50);
        assert_eq!(SplitSchedule::from_min_draws(100, 70).half(), 70);
        assert_eq!(SplitSchedule::from_min_draws(100, 20).half(), 60);
        // Short of a launch (min 10, launches of 100): aligning would take the first
        // checkpoint to 50; it stays at 10.
        assert_eq!(SplitSchedule::from_min_draws(10, 100).half(), 5);
        assert!(SplitSchedule::new(1).is_err());
        assert_eq!(
            SplitSchedule::new(2).unwrap().next_boundary(u64::MAX - 1),
            u64::MAX
        );
    }

    /// Two chains of one coordinate whose draws climb 0, 1, 2, ...: at the checkpoint after 8
    /// draws the halves are 0..4 and 4..8, worked by hand: half-chain means 1.5, 1.5, 5.5, 5.5,
    /// within variances 5/3 each. Split: B = var(1.5, 1.5, 5.5, 5.5) = 16/3, W = 5/3, so R-hat
    /// = sqrt(1 + 16/5); unsplit the chains agree exactly (R-hat 1).
    #[test]
    fn a_trend_shows_in_the_split() {
        let shape = Shape::new(2, 1).unwrap();
        let mut split =
            SplitMoments::new(shape, Some((1, SplitSchedule::new(2).unwrap()))).unwrap();
        let mut found = Vec::new();
        for v in 0..8 {
            split.push(&[v as f32, v as f32]).unwrap();
            found.extend(
                split
                    .close_if_due(&[0.0])
                    .unwrap()
                    .map(|d| (split.draws(), d)),
            );
        }
        let (draws, d) = found.last().unwrap();
        assert_eq!((*draws, d.draws), (8, 8));
        assert_eq!(found.iter().map(|f| f.0).collect::<Vec<_>>(), [4, 8]);
        approx::assert_relative_eq!(
            d.nested_rhat[0],
            (1.0f64 + 16.0 / 5.0).sqrt(),
            epsilon = 1e-12
        );
        let (mean, var) = split.into_mean_var().unwrap();
        let unsplit = super::super::from_chain_moments(shape, 1, 8, &mean, &var).unwrap();
        assert_eq!(unsplit.nested_rhat[0], 1.0);
        assert_eq!(mean, [3.5, 3.5]);
        approx::assert_relative_eq!(var[0], 5.25, epsilon = 1e-12);
    }
}
