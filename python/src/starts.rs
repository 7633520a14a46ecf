//! Generated starting points (`fused_mh::starts`): `host run --init-dist`'s, for the Python
//! `initial_states`, so that one seed gives the same chains in both.

use fused_mh::Shape;
use fused_mh::starts::{Spread, initial_states as generate};
use numpy::ndarray::Array2;
use numpy::{IntoPyArray, PyArray2, PyReadonlyArray1};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

use crate::errors::to_py;

/// `batch` starting points of the target's dimension: `spread` is `"normal"` (drawn from the
/// target), `"overdispersed"` (4 times its standard deviation) or `"zeros"`; the chains of a
/// superchain start from its first chain's state. `[batch, dim]` float32.
#[pyfunction]
#[pyo3(signature = (batch, target, params, spread, seed, superchain_size))]
pub fn initial_states<'py>(
    py: Python<'py>,
    batch: usize,
    target: &str,
    params: Vec<PyReadonlyArray1<'py, f32>>,
    spread: &str,
    seed: u64,
    superchain_size: usize,
) -> PyResult<Bound<'py, PyArray2<f32>>> {
    let spread = match spread {
        "normal" => Spread::Target,
        "overdispersed" => Spread::Overdispersed,
        "zeros" => Spread::Zeros,
        other => {
            return Err(PyValueError::new_err(format!(
                "spread = {other:?}: expected \"normal\", \"overdispersed\" or \"zeros\""
            )));
        }
    };
    let target = crate::targets::build(target, &params)?;
    let shape = Shape::new(batch, target.dim()).map_err(to_py)?;
    crate::memory::check_buffer("initial_states", "the states", 4 * shape.len() as u128)?;
    let x = py
        .detach(|| generate(shape, &target, spread, seed, superchain_size))
        .map_err(to_py)?;
    let x = Array2::from_shape_vec((batch, shape.dim()), x)
        .map_err(|e| PyValueError::new_err(e.to_string()))?;
    Ok(x.into_pyarray(py))
}
