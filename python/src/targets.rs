//! Targets by name: the Python side names a target (`"gaussian"`, ...) and passes
//! its parameters in the order [`target_params`] gives, as float32 NumPy arrays.

use fused_mh::{Target, TargetKind};
use host::budget::Budget;
use numpy::{PyReadonlyArray1, PyUntypedArrayMethods};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

use crate::errors::to_py;
use crate::memory::floats;

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
/// as the library checks them. The copies it makes are checked against the free memory first
/// ([`build_budget`]) and allocated fallibly: a `MemoryError`, never an abort.
pub fn build(name: &str, params: &[PyReadonlyArray1<'_, f32>]) -> PyResult<Target> {
    let kind = kind(name)?;
    if params.len() != kind.params().len() {
        return Err(PyValueError::new_err(format!(
            "the target {name} takes {} parameters, not {}",
            kind.params().len(),
            params.len()
        )));
    }
    let dim = params.first().map_or(0, |a| a.len());
    crate::memory::check("the target", &build_budget(name, dim)?)?;
    let values = kind
        .params()
        .iter()
        .zip(params)
        .map(|(&what, a)| {
            let values = a
                .as_slice()
                .map_err(|_| PyValueError::new_err(format!("{what} is not contiguous")))?;
            crate::memory::copied(what, values)
        })
        .collect::<PyResult<Vec<_>>>()?;
    Target::of_kind(kind, values).map_err(to_py)
}

/// The host memory [`build`] takes for target `name` of `dim` elements: its copy of the
/// parameters and the arrays the kernels read ([`TargetKind::arrays`] of `dim` floats).
pub fn build_budget(name: &str, dim: usize) -> PyResult<Budget> {
    let kind = kind(name)?;
    let mut budget = Budget::default();
    budget.add(
        "the target's checked copy",
        floats(dim) * (kind.params().len() + kind.arrays()) as u128,
    );
    Ok(budget)
}
