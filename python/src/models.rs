//! Models with data (`fused_mh.LinearRegression`, `LogisticRegression`, `HierarchicalNormal`,
//! `DenseGaussian`): their arrays and priors' text handed to the library's
//! [`fused_mh::model_inputs`], which checks them, builds the model and samples it on the CPU
//! reference or the GPU, as `host sample` does with the same options. A refused input is a
//! `ValueError` naming the argument (`x`, `beta_prior`, ...).

use std::collections::HashMap;

use fused_mh::Gpu;
use fused_mh::kernel::model::Factor;
use fused_mh::model_inputs::{Matrix, ModelInputs};
use fused_mh::model_run::{Continuation, ModelRun, Preconditioning};
use numpy::ndarray::{Array1, Array2, Array3};
use numpy::{IntoPyArray, PyReadonlyArrayDyn, PyUntypedArrayMethods};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::cpu::contiguous;
use crate::errors::to_py;
use crate::memory;

/// An input array's data and shape: float32 and C-contiguous (the Python wrapper converts),
/// with `dims` dimensions.
fn input<'a>(
    arrays: &'a HashMap<String, PyReadonlyArrayDyn<'_, f32>>,
    name: &str,
    dims: usize,
) -> PyResult<(&'a [f32], Vec<usize>)> {
    let a = arrays
        .get(name)
        .ok_or_else(|| PyValueError::new_err(format!("{name} is needed")))?;
    if a.ndim() != dims {
        let why = format!(
            "{name} has shape {:?}, expected {dims} dimensions",
            a.shape()
        );
        return Err(PyValueError::new_err(why));
    }
    Ok((contiguous(name, a)?, a.shape().to_vec()))
}

/// A two-dimensional input as a matrix.
fn matrix((data, shape): (&[f32], Vec<usize>)) -> Matrix<'_> {
    Matrix {
        data,
        rows: shape[0],
        cols: shape[1],
    }
}

/// The run's settings as `host sample`'s options.
fn settings(run: &Bound<'_, PyDict>) -> PyResult<ModelRun> {
    let get = |key: &str| {
        run.get_item(key)?
            .ok_or_else(|| PyValueError::new_err(format!("the run has no {key}")))
    };
    let preconditioning = match get("precondition")?.extract::<String>()?.as_str() {
        "none" => Preconditioning::None,
        "diagonal" => Preconditioning::Diagonal,
        "dense" => Preconditioning::Dense,
        other => {
            let why = format!("precondition = {other:?}: expected none, diagonal or dense");
            return Err(PyValueError::new_err(why));
        }
    };
    Ok(ModelRun {
        chains: get("chains")?.extract()?,
        warmup: get("warmup")?.extract()?,
        steps: get("steps")?.extract()?,
        thin: get("thin")?.extract()?,
        seed: get("seed")?.extract()?,
        target_acceptance: get("target_accept")?.extract()?,
        preconditioning,
        superchain_size: get("superchain_size")?.extract()?,
    })
}

/// Where a run continues an earlier one, from the dict the wrapper passes: `states[chains,
/// params]` and `factor[params, params]` (float32, C-contiguous), `step_size`, `first_step`.
fn continuation(resume: &Bound<'_, PyDict>) -> PyResult<Continuation> {
    let get = |key: &str| {
        resume
            .get_item(key)?
            .ok_or_else(|| PyValueError::new_err(format!("resume has no {key}")))
    };
    let array = |key: &'static str| -> PyResult<Vec<f32>> {
        let item = get(key)?;
        let a = item.extract::<PyReadonlyArrayDyn<'_, f32>>()?;
        memory::copied(key, contiguous(key, &a)?)
    };
    Ok(Continuation {
        states: array("states")?,
        factor: array("factor")?,
        step_size: get("step_size")?.extract()?,
        first_step: get("first_step")?.extract()?,
    })
}

/// Samples the model `kind` (`linreg`, `logreg`, `hier-normal`, `dense-gaussian`) from its
/// `arrays` and `priors` (by argument name) with the `run` settings, new or continuing
/// `resume` ([`continuation`]), on the GPU when `gpu`: a dict of `draws[draws, chains,
/// params]` (float32, in the order kept), `names`, `acceptance`, `accepted[chains]` (each chain's
/// accepted steps), `step_size`, `factor[params, params]`, `nested_rhat` and `ess` per
/// parameter (None without `diagnostics`), the final `states[chains, params]`
/// (unconstrained) and the `next_step` counter.
#[pyfunction]
#[pyo3(signature = (kind, arrays, priors, run, gpu, resume=None, diagnostics=true))]
#[allow(clippy::too_many_arguments)]
pub fn sample_model<'py>(
    py: Python<'py>,
    kind: &str,
    arrays: HashMap<String, PyReadonlyArrayDyn<'py, f32>>,
    priors: HashMap<String, String>,
    run: &Bound<'py, PyDict>,
    gpu: bool,
    resume: Option<&Bound<'py, PyDict>>,
    diagnostics: bool,
) -> PyResult<Bound<'py, PyDict>> {
    let run = settings(run)?;
    let from = resume.map(continuation).transpose()?;
    let prior = |name: &str| {
        priors
            .get(name)
            .map(String::as_str)
            .ok_or_else(|| PyValueError::new_err(format!("{name} is needed")))
    };
    let inputs = match kind {
        "linreg" => ModelInputs::LinearRegression {
            x: matrix(input(&arrays, "x", 2)?),
            y: input(&arrays, "y", 1)?.0,
            beta_prior: prior("beta_prior")?,
            sigma_prior: prior("sigma_prior")?,
        },
        "logreg" => ModelInputs::LogisticRegression {
            x: matrix(input(&arrays, "x", 2)?),
            y: input(&arrays, "y", 1)?.0,
            beta_prior: prior("beta_prior")?,
        },
        "hier-normal" => ModelInputs::HierarchicalNormal {
            y: input(&arrays, "y", 1)?.0,
            se: input(&arrays, "se", 1)?.0,
            mu_prior: prior("mu_prior")?,
            tau_prior: prior("tau_prior")?,
        },
        "dense-gaussian" => {
            let (name, of) = match arrays.contains_key("cov_factor") {
                true => ("cov_factor", Factor::Covariance),
                false => ("prec_factor", Factor::Precision),
            };
            ModelInputs::DenseGaussian {
                mean: input(&arrays, "mean", 1)?.0,
                factor: matrix(input(&arrays, name, 2)?),
                of,
            }
        }
        other => return Err(PyValueError::new_err(format!("no model {other:?}"))),
    };
    memory::check("sample", &host::budget::model_sample(&run, inputs.dim()))?;
    let named = py
        .detach(|| {
            let device = gpu.then(|| Gpu::open(0)).transpose()?;
            let named = inputs.sample(&run, from.as_ref(), device.as_ref())?;
            let diagnostics = diagnostics
                .then(|| named.sample.diagnostics(run.superchain_size))
                .transpose()?;
            Ok::<_, fused_mh::Error>((named, diagnostics))
        })
        .map_err(to_py);
    let (named, diagnostics) = named?;
    let sample = named.sample;
    let (chains, kept, dim) = (sample.chains, sample.kept, sample.dim);
    let bad = |e: numpy::ndarray::ShapeError| PyValueError::new_err(e.to_string());
    // [kept, chains, dim], as the run keeps them (the Python side puts them in ArviZ's order).
    let draws = Array3::from_shape_vec((kept, chains, dim), sample.draws).map_err(bad)?;
    let result = PyDict::new(py);
    result.set_item("draws", draws.into_pyarray(py))?;
    result.set_item("names", named.names)?;
    result.set_item("acceptance", sample.acceptance)?;
    result.set_item("step_size", sample.step_size)?;
    let factor = Array2::from_shape_vec((dim, dim), sample.factor).map_err(bad)?;
    result.set_item("factor", factor.into_pyarray(py))?;
    result.set_item("accepted", Array1::from(sample.accepted).into_pyarray(py))?;
    let (nested_rhat, ess) = match diagnostics {
        Some(d) => (
            Some(Array1::from(d.nested_rhat).into_pyarray(py)),
            Some(Array1::from(d.ess).into_pyarray(py)),
        ),
        None => (None, None),
    };
    result.set_item("nested_rhat", nested_rhat)?;
    result.set_item("ess", ess)?;
    let states = Array2::from_shape_vec((chains, dim), sample.states).map_err(bad)?;
    result.set_item("states", states.into_pyarray(py))?;
    result.set_item("next_step", sample.next_step)?;
    Ok(result)
}
