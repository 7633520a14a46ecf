//! A run's convergence diagnostics as a Python dict, with the fields and the rules of
//! `host run`'s summary.json `diagnostics`: split R-hat and the ESS per dimension at the run's
//! last checkpoint (`fused_mh::diagnostics::split`), the starting points' spread and the
//! dimensions where R-hat cannot see (`fused_mh::diagnostics::start`), and the verdict.

use fused_mh::diagnostics::plan::{self, Refusal, Request};
use fused_mh::diagnostics::{RHAT_THRESHOLD, start};
use fused_mh::{Diagnostics, DiagnosticsPlan, Shape};
use numpy::IntoPyArray;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyDict;

/// What decides a run's diagnostics: `host run`'s `--superchain-size`, `--until-rhat`,
/// `--min-draws` and `--steps-per-launch`, by their Python names, and whether to diagnose at
/// all (not in the warm-up's and the burn-in's runs, whose statistics are dropped).
pub struct Options {
    pub diagnose: bool,
    pub superchain_size: usize,
    pub until_rhat: Option<f64>,
    pub min_draws: Option<u64>,
    pub steps_per_launch: u32,
}

/// The diagnostics plan of a run of `steps` steps of chains of `shape`, by the library's
/// rules (`fused_mh::diagnostics::plan`, which `host run` follows too): with `until_rhat`,
/// doubling checkpoints from `min_draws` (100 by default) and a stop once every split R-hat is
/// below the threshold; without, the one schedule that ends at `steps`; superchains of
/// `superchain_size` consecutive chains. None where the diagnostics cannot be computed (one
/// superchain, fewer than 4 steps) and none were asked for. The refusals name the Python
/// arguments.
pub fn plan(shape: Shape, steps: u64, o: &Options) -> PyResult<Option<DiagnosticsPlan>> {
    if !o.diagnose {
        return Ok(None);
    }
    let request = Request {
        superchain_size: o.superchain_size,
        until_rhat: o.until_rhat,
        min_draws: o.min_draws,
        steps_per_launch: o.steps_per_launch,
        possible: true,
    };
    plan::plan(shape, steps, request).map_err(|refusal| {
        PyValueError::new_err(match refusal {
            Refusal::EmptySuperchain => {
                "superchain_size = 0: a superchain needs at least one chain".to_string()
            }
            Refusal::MinDrawsWithoutStop => {
                "min_draws sets when until_rhat may stop the run: it needs until_rhat".into()
            }
            Refusal::SuperchainsDoNotFit {
                superchain_size: m,
                batch,
            } => format!(
                "superchain_size = {m}: the batch of {batch} chains must be a multiple of {m} \
                 with at least two superchains, and the run at least 4 steps"
            ),
            Refusal::ThresholdNotAboveOne(t) => {
                format!("until_rhat = {t}: give a threshold above 1 (e.g. 1.01)")
            }
            Refusal::FirstCheckpointBeyondSteps {
                first_checkpoint,
                min_draws,
            } => format!(
                "until_rhat: the first checkpoint is at {first_checkpoint} draws (min_draws \
                 {min_draws} rounded up to an even number, at least 4), beyond steps = {steps}"
            ),
            Refusal::TooFewChainsToStop => {
                "until_rhat: the diagnostics need at least two chains".into()
            }
        })
    })
}

/// The starting points' spread of `x[batch, dim]` against `sigma`, in superchains of
/// `superchain_size` (see `start`).
pub fn spread(
    x: &[f32],
    shape: Shape,
    superchain_size: usize,
    sigma: &[f32],
) -> fused_mh::Result<Vec<f64>> {
    start::start_spread(x, shape, superchain_size, sigma)
}

/// The dict: `superchain_size`, `draws` (per chain, both halves), `nested_rhat` and `ess`
/// (float64 `[dim]`), `max_nested_rhat`, `min_ess`, `acceptance_rate`, `start_spread`
/// (float64 `[dim]`), `blind_dimensions` (the dimensions whose starting points are closer
/// than `start::BLIND_SPREAD` sigma, worst first), `rhat_threshold` (the run's `until_rhat`,
/// or `RHAT_THRESHOLD`, as `host run`'s summary.json) and `converged` (every R-hat below the
/// threshold and no blind dimension). None when the run reached no checkpoint.
pub fn to_dict<'py>(
    py: Python<'py>,
    d: Option<&Diagnostics>,
    start_spread: Vec<f64>,
    until_rhat: Option<f64>,
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
    let threshold = until_rhat.unwrap_or(RHAT_THRESHOLD);
    out.set_item("rhat_threshold", threshold)?;
    out.set_item("converged", d.rhat_below(threshold) && blind.is_empty())?;
    out.set_item("blind_dimensions", blind)?;
    Ok(Some(out))
}
