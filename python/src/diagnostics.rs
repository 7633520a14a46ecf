//! A run's convergence diagnostics as a Python dict, with the fields and the rules of
//! `host run`'s summary.json `diagnostics`: split R-hat and the ESS per dimension at the run's
//! last checkpoint (`fused_mh::diagnostics::split`), the starting points' spread and the
//! dimensions where R-hat cannot see (`fused_mh::diagnostics::start`), and the verdict.

use fused_mh::diagnostics::{RHAT_THRESHOLD, SplitSchedule, start};
use fused_mh::{Diagnostics, DiagnosticsPlan, Shape};
use numpy::IntoPyArray;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyDict;

/// Superchains of one chain: the Python functions take no superchain size yet.
const SUPERCHAIN_SIZE: usize = 1;

/// The diagnostics plan of a run of `steps` steps of chains of `shape` in launches of
/// `steps_per_launch`, as `host run` makes it: with `until_rhat`, doubling checkpoints from
/// `min_draws` (100 by default) and a stop once every split R-hat is below the threshold;
/// without, the one schedule that ends at `steps`. None for one chain or fewer than 4 steps.
/// `host run`'s rules and refusals, named as the Python arguments.
pub fn plan(
    shape: Shape,
    steps: u64,
    steps_per_launch: u32,
    until_rhat: Option<f64>,
    min_draws: Option<u64>,
) -> PyResult<Option<DiagnosticsPlan>> {
    let launch = u64::from(steps_per_launch);
    let Some(threshold) = until_rhat else {
        if min_draws.is_some() {
            return Err(PyValueError::new_err(
                "min_draws sets when until_rhat may stop the run: it needs until_rhat",
            ));
        }
        let schedule = SplitSchedule::ending_at(steps, launch);
        return Ok(schedule
            .filter(|_| shape.batch() >= 2)
            .map(|schedule| DiagnosticsPlan {
                superchain_size: SUPERCHAIN_SIZE,
                until_rhat: None,
                min_draws: 2,
                schedule,
            }));
    };
    if !(threshold.is_finite() && threshold > 1.0) {
        return Err(PyValueError::new_err(format!(
            "until_rhat = {threshold}: give a threshold above 1 (e.g. 1.01)"
        )));
    }
    let min_draws = min_draws.unwrap_or(DEFAULT_MIN_DRAWS);
    let schedule = SplitSchedule::from_min_draws(min_draws, launch);
    let first_checkpoint = 2 * schedule.half();
    if first_checkpoint > steps {
        return Err(PyValueError::new_err(format!(
            "until_rhat: the first checkpoint is at {first_checkpoint} draws (min_draws \
             {min_draws} rounded up to an even number, at least 4), beyond steps = {steps}"
        )));
    }
    if shape.batch() < 2 {
        return Err(PyValueError::new_err(
            "until_rhat: the diagnostics need at least two chains",
        ));
    }
    Ok(Some(DiagnosticsPlan {
        superchain_size: SUPERCHAIN_SIZE,
        until_rhat: Some(threshold),
        min_draws,
        schedule,
    }))
}

/// `host run`'s `--min-draws` default.
const DEFAULT_MIN_DRAWS: u64 = 100;

/// The starting points' spread of `x[batch, dim]` against `sigma` (see `start`).
pub fn spread(x: &[f32], shape: Shape, sigma: &[f32]) -> fused_mh::Result<Vec<f64>> {
    start::start_spread(x, shape, SUPERCHAIN_SIZE, sigma)
}

/// The dict: `superchain_size`, `draws` (per chain, both halves), `nested_rhat` and `ess`
/// (float64 `[dim]`), `max_nested_rhat`, `min_ess`, `acceptance_rate`, `start_spread`
/// (float64 `[dim]`), `blind_dimensions` (the dimensions whose starting points are closer
/// than `start::BLIND_SPREAD` sigma, worst first), `rhat_threshold` and `converged` (every
/// R-hat below the threshold and no blind dimension). None when the run reached no checkpoint.
pub fn to_dict<'py>(
    py: Python<'py>,
    d: Option<&Diagnostics>,
    start_spread: Vec<f64>,
) -> PyResult<Option<Bound<'py, PyDict>>> {
    let Some(d) = d else {
        return Ok(None);
    };
    let blind = start::blind_dimensions(&start_spread);
    let out = PyDict::new(py);
    out.set_item("superchain_size", d.superchain_size)?;
    out.set_item("draws", d.draws)?;
    out.set_item("nested_rhat", d.nested_rhat.clone().into_pyarray(py))?;
    out.set_item("ess", d.ess.clone().into_pyarray(py))?;
    out.set_item("max_nested_rhat", d.max_nested_rhat())?;
    out.set_item("min_ess", d.min_ess())?;
    out.set_item("acceptance_rate", d.acceptance_rate)?;
    out.set_item("start_spread", start_spread.into_pyarray(py))?;
    out.set_item("rhat_threshold", RHAT_THRESHOLD)?;
    out.set_item(
        "converged",
        d.rhat_below(RHAT_THRESHOLD) && blind.is_empty(),
    )?;
    out.set_item("blind_dimensions", blind)?;
    Ok(Some(out))
}
