//! Which diagnostics a run computes, and the requests it refuses: one set of rules for every
//! caller (`host run` and Python's `run`), each of which words a refusal with the names of its
//! own options.

use super::{DiagnosticsPlan, SplitSchedule};
use crate::Shape;

/// Draws per chain before an early stop is considered, unless the run says otherwise.
pub const DEFAULT_MIN_DRAWS: u64 = 100;

/// What a run asks of its diagnostics.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Request {
    /// Chains per superchain (consecutive chains; 1: plain split R-hat).
    pub superchain_size: usize,
    /// Stop at the first checkpoint where every R-hat is below this.
    pub until_rhat: Option<f64>,
    /// Draws per chain before the early stop is considered ([`DEFAULT_MIN_DRAWS`] if None);
    /// only with `until_rhat`.
    pub min_draws: Option<u64>,
    /// The run's steps per launch: the split statistics' boundaries end launches.
    pub steps_per_launch: u32,
    /// Whether the run can compute the diagnostics at all (a run of the caller's noise keeps
    /// no moments: it cannot).
    pub possible: bool,
}

/// Why a [`Request`] is refused.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Refusal {
    /// A superchain of no chains.
    EmptySuperchain,
    /// A number of draws before an early stop, and no early stop.
    MinDrawsWithoutStop,
    /// Superchains of more than one chain that the run cannot diagnose: they do not divide the
    /// batch of `batch` chains into two or more, or the run has fewer than 4 steps (or no
    /// diagnostics at all).
    SuperchainsDoNotFit {
        /// The superchains' size asked for.
        superchain_size: usize,
        /// The run's chains.
        batch: usize,
    },
    /// An early stop's threshold that is not a number above 1.
    ThresholdNotAboveOne(f64),
    /// An early stop whose first checkpoint (`min_draws` rounded up to an even number, at
    /// least 4) comes after the run's last step.
    FirstCheckpointBeyondSteps {
        /// Draws per chain at the first checkpoint.
        first_checkpoint: u64,
        /// The draws asked for before the stop.
        min_draws: u64,
    },
    /// An early stop with fewer than two chains (superchains) to compare.
    TooFewChainsToStop,
}

/// The diagnostics of a run of `steps` steps of `shape`: None where there are none to compute
/// (one chain, fewer than 4 steps, a run that cannot) and none was asked for that needs them;
/// otherwise the plan, or the refusal of a request the run could not honour.
///
/// The split statistics' schedule: doubling checkpoints from `min_draws` for an early stop,
/// else the one that ends at `steps`; boundaries at the ends of launches, so that the CPU
/// reference and the GPU give the same diagnostics.
pub fn plan(shape: Shape, steps: u64, r: Request) -> Result<Option<DiagnosticsPlan>, Refusal> {
    let m = r.superchain_size;
    if m == 0 {
        return Err(Refusal::EmptySuperchain);
    }
    if r.min_draws.is_some() && r.until_rhat.is_none() {
        return Err(Refusal::MinDrawsWithoutStop);
    }
    let launch = u64::from(r.steps_per_launch);
    let min_draws = r.min_draws.unwrap_or(DEFAULT_MIN_DRAWS);
    let schedule = match r.until_rhat {
        Some(_) => Some(SplitSchedule::from_min_draws(min_draws, launch)),
        None => SplitSchedule::ending_at(steps, launch),
    };
    let first_checkpoint = schedule.map_or(u64::MAX, |s| 2 * s.half());
    let batch = shape.batch();
    let diagnosable =
        r.possible && batch.is_multiple_of(m) && batch / m >= 2 && first_checkpoint <= steps;
    if m > 1 && !diagnosable {
        return Err(Refusal::SuperchainsDoNotFit {
            superchain_size: m,
            batch,
        });
    }
    if let Some(t) = r.until_rhat {
        if !(t.is_finite() && t > 1.0) {
            return Err(Refusal::ThresholdNotAboveOne(t));
        }
        if first_checkpoint > steps {
            return Err(Refusal::FirstCheckpointBeyondSteps {
                first_checkpoint,
                min_draws,
            });
        }
        if !diagnosable {
            return Err(Refusal::TooFewChainsToStop);
        }
    }
    Ok(schedule
        .filter(|_| diagnosable)
        .map(|schedule| DiagnosticsPlan {
            superchain_size: m,
            until_rhat: r.until_rhat,
            min_draws,
            schedule,
        }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(superchain_size: usize, until_rhat: Option<f64>, min_draws: Option<u64>) -> Request {
        Request {
            superchain_size,
            until_rhat,
            min_draws,
            steps_per_launch: 100,
            possible: true,
        }
    }

    fn shape(batch: usize) -> Shape {
        Shape::new(batch, 3).expect("a shape")
    }

    /// Each rule, in the order the callers document: the refusal, or the plan.
    #[test]
    fn requests_are_planned_or_refused_by_rule() {
        let plan = |batch, steps, r| plan(shape(batch), steps, r);
        // Plain split R-hat over 1000 steps: a schedule ending at 1000, no stop.
        let p = plan(8, 1000, request(1, None, None)).unwrap().unwrap();
        assert_eq!(
            (p.until_rhat, p.min_draws, p.superchain_size),
            (None, 100, 1)
        );
        assert_eq!(Some(p.schedule), SplitSchedule::ending_at(1000, 100));
        // Nothing to diagnose, nothing asked: no plan, no refusal.
        assert_eq!(plan(1, 1000, request(1, None, None)), Ok(None));
        assert_eq!(plan(8, 3, request(1, None, None)), Ok(None));
        let impossible = Request {
            possible: false,
            ..request(1, None, None)
        };
        assert_eq!(plan(8, 1000, impossible), Ok(None));
        // The refusals.
        assert_eq!(
            plan(8, 1000, request(0, None, None)),
            Err(Refusal::EmptySuperchain)
        );
        assert_eq!(
            plan(8, 1000, request(1, None, Some(50))),
            Err(Refusal::MinDrawsWithoutStop)
        );
        let unfit = Err(Refusal::SuperchainsDoNotFit {
            superchain_size: 3,
            batch: 8,
        });
        assert_eq!(plan(8, 1000, request(3, None, None)), unfit);
        let alone = Err(Refusal::SuperchainsDoNotFit {
            superchain_size: 4,
            batch: 4,
        });
        assert_eq!(plan(4, 1000, request(4, None, None)), alone);
        for t in [1.0, 0.5, f64::NAN, f64::INFINITY] {
            let refused = plan(8, 1000, request(1, Some(t), None));
            assert!(
                matches!(refused, Err(Refusal::ThresholdNotAboveOne(_))),
                "{t}"
            );
        }
        // min_draws 301 rounds up to 302 draws: 2 halves of 151, aligned to launches of 100
        // only where that at most doubles it (200 > 151, so to 200: 400 draws).
        let late = plan(8, 399, request(1, Some(1.01), Some(301)));
        assert_eq!(
            late,
            Err(Refusal::FirstCheckpointBeyondSteps {
                first_checkpoint: 400,
                min_draws: 301
            })
        );
        assert_eq!(
            plan(1, 1000, request(1, Some(1.01), None)),
            Err(Refusal::TooFewChainsToStop)
        );
        // An early stop: doubling checkpoints from min_draws.
        let p = plan(8, 1000, request(2, Some(1.01), Some(40)))
            .unwrap()
            .unwrap();
        assert_eq!(
            (p.until_rhat, p.min_draws, p.superchain_size),
            (Some(1.01), 40, 2)
        );
        assert_eq!(p.schedule, SplitSchedule::from_min_draws(40, 100));
    }
}
