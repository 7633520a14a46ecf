//! The warm-up's step-size adaptation (`fused_mh::adapt::StepSizeAdaptation`), for the Python
//! `run(..., warmup=N)`: the same rule, and so the same step sizes, as `host run --warmup`.

use fused_mh::adapt::StepSizeAdaptation;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

/// The step size adapting toward a target acceptance rate, one launch's rate at a time.
#[pyclass]
pub struct StepSize {
    adaptation: StepSizeAdaptation,
}

#[pymethods]
impl StepSize {
    /// Starts from `step_size` (finite, > 0) toward `target` (in (0, 1)).
    #[new]
    fn new(step_size: f32, target: f64) -> PyResult<Self> {
        if !(step_size.is_finite() && step_size > 0.0) {
            return Err(PyValueError::new_err(format!(
                "step_size = {step_size}: must be a finite number > 0"
            )));
        }
        if !(target > 0.0 && target < 1.0) {
            return Err(PyValueError::new_err(format!(
                "target_accept = {target}: must be in (0, 1)"
            )));
        }
        Ok(Self {
            adaptation: StepSizeAdaptation::new(step_size, target),
        })
    }

    /// The step size for the next launch.
    #[getter]
    fn step_size(&self) -> f32 {
        self.adaptation.step_size()
    }

    /// Takes one launch's acceptance rate and moves the step size.
    fn update(&mut self, acceptance: f64) {
        self.adaptation.update(acceptance);
    }
}
