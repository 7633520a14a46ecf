//! The warm-up's adaptation for the Python `run(..., warmup=N, precondition=True)`: the step
//! size (`fused_mh::adapt::StepSizeAdaptation`) and the per-dimension proposal scales
//! (`ScaleAdaptation`), the same rules, and so the same values, as `host run --warmup
//! --precondition`; and a run's configuration with given scales.

use fused_mh::adapt::{ScaleAdaptation, StepSizeAdaptation};
use fused_mh::{Shape, StepConfig};
use numpy::{IntoPyArray, PyArray1, PyReadonlyArray1, PyUntypedArrayMethods};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

use crate::errors::to_py;

/// `config` with the per-dimension proposal `scales` (`[dim]` float32, each times the step
/// size finite and > 0) when given: the library's checks, the dimension's too.
pub(crate) fn with_scales(
    config: fused_mh::Result<StepConfig>,
    shape: Shape,
    scales: &Option<PyReadonlyArray1<'_, f32>>,
) -> PyResult<StepConfig> {
    let config = config.map_err(to_py)?;
    let Some(scales) = scales else {
        return Ok(config);
    };
    if scales.len() != shape.dim() {
        return Err(PyValueError::new_err(format!(
            "scales has {} elements, the chains' dim is {}",
            scales.len(),
            shape.dim()
        )));
    }
    let values = crate::cpu::contiguous("scales", scales)?;
    config.with_scales(values).map_err(to_py)
}

/// The per-dimension proposal scales adapting to the chains' pooled standard deviation, one
/// launch's pooled variance at a time (diagonal preconditioning).
#[pyclass]
pub struct Scales {
    adaptation: ScaleAdaptation,
}

#[pymethods]
impl Scales {
    /// Starts from scales of 1 in each of `dim` dimensions.
    #[new]
    fn new(dim: usize) -> Self {
        Self {
            adaptation: ScaleAdaptation::new(dim),
        }
    }

    /// The scales for the next launch (`[dim]` float32, relative to the step size).
    #[getter]
    fn scales<'py>(&self, py: Python<'py>) -> Bound<'py, PyArray1<f32>> {
        self.adaptation.scales().to_vec().into_pyarray(py)
    }

    /// Takes one launch's pooled variance per dimension and moves the scales.
    fn update(&mut self, variance: PyReadonlyArray1<'_, f64>) -> PyResult<()> {
        let variance = crate::cpu::contiguous("variance", &variance)?;
        if variance.len() != self.adaptation.scales().len() {
            return Err(PyValueError::new_err(
                "the variance's length is not the scales'",
            ));
        }
        self.adaptation.update(variance);
        Ok(())
    }
}

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
