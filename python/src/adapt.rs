//! A run's configuration with the per-dimension proposal scales a caller gives (the warm-up
//! that adapts them is the library's: `fused_mh::warm_up`).

use fused_mh::{Shape, StepConfig};
use numpy::{PyReadonlyArray1, PyUntypedArrayMethods};
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
