//! Targets by name: the Python side names a target (`"gaussian"`, ...) and passes
//! its parameters in the order [`target_params`] gives, as float32 NumPy arrays.

use fused_mh::{Target, TargetKind};
use numpy::PyReadonlyArray1;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

use crate::errors::to_py;

/// The target called `name`, or a `ValueError` that lists the targets.
fn kind(name: &str) -> PyResult<TargetKind> {
    TargetKind::from_name(name).ok_or_else(|| {
        let names: Vec<&str> = TargetKind::ALL.iter().map(|k| k.name()).collect();
        PyValueError::new_err(format!(
            "unknown target {name:?}: the targets are {}",
            names.join(", ")
        ))
    })
}

/// The names of target `name`'s parameters, in the order the functions take them.
#[pyfunction]
pub fn target_params(name: &str) -> PyResult<Vec<&'static str>> {
    Ok(kind(name)?.params().to_vec())
}

/// Checks target `name`'s parameters as the library does (the same messages: `sigma[2] = -1
/// must be > 0`), so that a `Model` refuses bad values when they are set, not at its next call.
#[pyfunction]
pub fn check_target(name: &str, params: Vec<PyReadonlyArray1<'_, f32>>) -> PyResult<()> {
    build(name, &params).map(drop)
}

/// Target `name` from its parameters (contiguous float32 arrays of one length each), checked
/// as the library checks them.
pub fn build(name: &str, params: &[PyReadonlyArray1<'_, f32>]) -> PyResult<Target> {
    let kind = kind(name)?;
    let values = kind
        .params()
        .iter()
        .zip(params)
        .map(|(what, a)| {
            a.as_slice()
                .map(<[f32]>::to_vec)
                .map_err(|_| PyValueError::new_err(format!("{what} is not contiguous")))
        })
        .collect::<PyResult<Vec<_>>>()?;
    if values.len() != kind.params().len() {
        return Err(PyValueError::new_err(format!(
            "the target {name} takes {} parameters, not {}",
            kind.params().len(),
            params.len()
        )));
    }
    Target::of_kind(kind, values).map_err(to_py)
}
