//! NumPy arrays on the CPU reference: float32, C-contiguous, the shapes of the reference model
//! (`x[B, dim]`, the target's parameters `[dim]` each: `mu`, `sigma`, ...). Anything else is refused with a `TypeError` (dtype,
//! from the argument conversion) or a `ValueError` (layout, shape, values).

use fused_mh::{Shape, StepConfig, Target, cpu};
use host::budget::Budget;
use numpy::ndarray::Array2;
use numpy::{
    IntoPyArray, PyArray1, PyArray2, PyReadonlyArray1, PyReadonlyArray2, PyUntypedArrayMethods,
};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::errors::{to_py, to_py_about};
use crate::interrupts::Interrupts;
use crate::memory;
use crate::targets;
use crate::warm_up::{Before, run_before_cpu};

/// A C-contiguous array's data, or a `ValueError` naming it.
pub(crate) fn contiguous<'a, T: numpy::Element, D: numpy::ndarray::Dimension>(
    what: &str,
    a: &'a numpy::PyReadonlyArray<'_, T, D>,
) -> PyResult<&'a [T]> {
    let refuse = || {
        PyValueError::new_err(format!(
            "{what} is not C-contiguous: pass numpy.ascontiguousarray({what})"
        ))
    };
    // `as_slice` takes Fortran order too: the rows would be read as columns.
    if !a.is_c_contiguous() {
        return Err(refuse());
    }
    a.as_slice().map_err(|_| refuse())
}

/// The chains' shape and the target, checked.
fn problem(
    x: &PyReadonlyArray2<'_, f32>,
    target: &str,
    params: &[PyReadonlyArray1<'_, f32>],
) -> PyResult<(Shape, Target)> {
    let [batch, dim] = x.shape() else {
        unreachable!("a 2-d array")
    };
    let about = |e| to_py_about(&format!("x has shape [{batch}, {dim}]"), e);
    let shape = Shape::new(*batch, *dim).map_err(about)?;
    let target = targets::build(target, params)?;
    target.check_shape(shape).map_err(about)?;
    Ok((shape, target))
}

/// Checks the memory of one step's output ([`cpu::step_output_bytes`]) before the step.
fn check_step_output(shape: Shape) -> PyResult<()> {
    memory::check_buffer("step", "the step's output", cpu::step_output_bytes(shape))
}

type StepResult<'py> = (Bound<'py, PyArray2<f32>>, Bound<'py, PyArray1<bool>>);

/// The outputs as NumPy arrays: `x_new[B, dim]` float32 and `accepted[B]` bool.
fn outputs<'py>(py: Python<'py>, shape: Shape, out: cpu::StepOutput) -> PyResult<StepResult<'py>> {
    let x_new = Array2::from_shape_vec((shape.batch(), shape.dim()), out.x_new)
        .map_err(|e| PyValueError::new_err(e.to_string()))?;
    Ok((x_new.into_pyarray(py), out.accepted.into_pyarray(py)))
}

/// One step with random numbers drawn from `(seed, step)` (the kernels' counter scheme):
/// `(x_new, accepted)`.
#[pyfunction]
#[pyo3(signature = (x, target, params, step_size, seed, step))]
pub fn step<'py>(
    py: Python<'py>,
    x: PyReadonlyArray2<'py, f32>,
    target: &str,
    params: Vec<PyReadonlyArray1<'py, f32>>,
    step_size: f32,
    seed: u64,
    step: u64,
) -> PyResult<StepResult<'py>> {
    let (shape, target) = problem(&x, target, &params)?;
    check_step_output(shape)?;
    let config = StepConfig::new(step_size, seed).map_err(to_py)?;
    let x = contiguous("x", &x)?;
    let out = py
        .detach(|| cpu::par_step(x, shape, &target, &config, step))
        .map_err(to_py)?;
    outputs(py, shape, out)
}

/// One step with the caller's standard normals `noise[B, dim]` and uniforms `uniform[B]`:
/// `(x_new, accepted)`, the reference model's semantics with those numbers.
#[pyfunction]
#[pyo3(signature = (x, target, params, step_size, noise, uniform))]
pub fn step_with_noise<'py>(
    py: Python<'py>,
    x: PyReadonlyArray2<'py, f32>,
    target: &str,
    params: Vec<PyReadonlyArray1<'py, f32>>,
    step_size: f32,
    noise: PyReadonlyArray2<'py, f32>,
    uniform: PyReadonlyArray1<'py, f32>,
) -> PyResult<StepResult<'py>> {
    let (shape, target) = problem(&x, target, &params)?;
    check_step_output(shape)?;
    let (x, noise, uniform) = (
        contiguous("x", &x)?,
        contiguous("noise", &noise)?,
        contiguous("uniform", &uniform)?,
    );
    let out = py
        .detach(|| cpu::par_step_with_noise(x, shape, &target, step_size, noise, uniform))
        .map_err(to_py)?;
    outputs(py, shape, out)
}

/// `steps` steps from step counter `first_step`, as `host run` does them: a dict with the
/// final states `x`, `accepted_count`, `nonfinite_count` and `null_move_count` (uint64), the
/// per-chain `mean` and `var` over the steps, `trace[steps / thin, B, dim]` with `thin > 0`,
/// `diagnostics` (a dict, [`crate::diagnostics::to_dict`]; None without a checkpoint), and
/// `steps`. `steps_per_launch` is `host run`'s: the diagnostics' schedule follows it, so that
/// the CPU and the GPU report the same checkpoints. `scales` are per-dimension proposal
/// scales relative to `step_size`. Before the steps, `warmup` steps adapt the step size toward
/// `target_accept` (and the scales, with `precondition`: `fused_mh::cpu::warm_up`) and
/// `burn_in` steps are dropped, as `host run --cpu` runs them; the result adds the
/// `step_size` and `scales` the steps ran with and the warm-up's `last_acceptance`, and
/// `progress` counts every step. `pooled_variance` adds the steps' pooled variance per
/// dimension (float64 `[dim]`), what a preconditioning warm-up adapts the scales to (for the
/// tests that check it against NumPy).
#[pyfunction]
#[pyo3(signature = (x, target, params, step_size, seed, first_step, steps, thin=0, steps_per_launch=100, until_rhat=None, min_draws=None, superchain_size=1, progress=None, diagnostics=true, scales=None, warmup=0, target_accept=0.234, precondition=false, burn_in=0, pooled_variance=false))]
// The reference model's inputs, the stream and the plan: the Python wrapper names them.
#[allow(clippy::too_many_arguments)]
pub fn run<'py>(
    py: Python<'py>,
    x: PyReadonlyArray2<'py, f32>,
    target: &str,
    params: Vec<PyReadonlyArray1<'py, f32>>,
    step_size: f32,
    seed: u64,
    first_step: u64,
    steps: u64,
    thin: u64,
    steps_per_launch: u32,
    until_rhat: Option<f64>,
    min_draws: Option<u64>,
    superchain_size: usize,
    progress: Option<Py<PyAny>>,
    diagnostics: bool,
    scales: Option<PyReadonlyArray1<'py, f32>>,
    warmup: u64,
    target_accept: f64,
    precondition: bool,
    burn_in: u64,
    pooled_variance: bool,
) -> PyResult<Bound<'py, PyDict>> {
    let (shape, target) = problem(&x, target, &params)?;
    let options = crate::diagnostics::Options {
        diagnose: diagnostics,
        superchain_size,
        until_rhat,
        min_draws,
        steps_per_launch,
    };
    let plan = crate::diagnostics::plan(shape, steps, &options)?;
    let config = crate::adapt::with_scales(StepConfig::new(step_size, seed), shape, &scales)?;
    cpu::check_thin(steps, thin).map_err(to_py)?;
    let saves = steps.checked_div(thin).unwrap_or(0);
    let trace_len = usize::try_from(saves)
        .ok()
        .and_then(|s| s.checked_mul(shape.len()))
        .ok_or_else(|| PyValueError::new_err("the trace would not fit in memory"))?;
    let mut budget = Budget::default();
    budget.add(
        "the run (states, a step's output, moments, counts)",
        cpu::run_chains_bytes(shape),
    );
    budget.add("the trace", memory::floats(trace_len));
    if warmup > 0 || burn_in > 0 {
        budget.add("the states after the warm-up", memory::floats(shape.len()));
    }
    memory::check("run", &budget)?;
    let x = contiguous("x", &x)?;
    let mut interrupts = Interrupts::with_progress(progress);
    let before = Before {
        warmup,
        target_accept,
        precondition,
        burn_in,
        steps_per_launch,
    };
    let total = before.total_with(steps);
    let ran = py.detach(|| {
        let mut trace = memory::reserved("trace", trace_len)?;
        let progress = (&mut interrupts, total);
        let (start, config, last_acceptance) =
            run_before_cpu(x, (shape, &target), (config, first_step), &before, progress)?;
        let out = cpu::run_chains(
            start.as_deref().unwrap_or(x),
            shape,
            &target,
            &config,
            first_step + warmup + burn_in,
            steps,
            thin,
            plan,
            &mut |_, state| {
                trace.extend_from_slice(state);
                Ok(())
            },
            &mut |p| interrupts.check_progress(total - steps + p.done, total),
        )?;
        Ok::<_, fused_mh::Error>((out, trace, start, (config, last_acceptance)))
    });
    let (out, trace, start, (config, last_acceptance)) = interrupts.result(ran)?;
    let (b, d) = (shape.batch(), shape.dim());
    let result = PyDict::new(py);
    result.set_item("step_size", config.step_size())?;
    let scales = config.scales().map(|s| s.to_vec().into_pyarray(py));
    result.set_item("scales", scales)?;
    result.set_item("last_acceptance", last_acceptance)?;
    if pooled_variance {
        let pooled =
            fused_mh::diagnostics::from_chain_moments(shape, 1, out.steps, &out.mean, &out.var)
                .map_err(to_py)?;
        result.set_item("pooled_variance", pooled.variance.into_pyarray(py))?;
    }
    let array = |v: Vec<f32>| Array2::from_shape_vec((b, d), v);
    let bad = |e: numpy::ndarray::ShapeError| PyValueError::new_err(e.to_string());
    result.set_item("x", array(out.x).map_err(bad)?.into_pyarray(py))?;
    result.set_item("accepted_count", out.accepted.into_pyarray(py))?;
    result.set_item("nonfinite_count", out.nonfinite.into_pyarray(py))?;
    result.set_item("null_move_count", out.null_moves.into_pyarray(py))?;
    let moments = |v: Vec<f64>| Array2::from_shape_vec((b, d), v);
    result.set_item("mean", moments(out.mean).map_err(bad)?.into_pyarray(py))?;
    result.set_item("var", moments(out.var).map_err(bad)?.into_pyarray(py))?;
    if thin > 0 {
        let trace =
            numpy::ndarray::Array3::from_shape_vec((saves as usize, b, d), trace).map_err(bad)?;
        result.set_item("trace", trace.into_pyarray(py))?;
    }
    // The starting spread is a part of the diagnostics (none without them), of the states the
    // steps started from.
    let spread = match out.diagnostics {
        Some(_) => {
            let start = start.as_deref().unwrap_or(x);
            crate::diagnostics::spread(start, shape, superchain_size, target.sigma())
                .map_err(to_py)?
        }
        None => Vec::new(),
    };
    let diagnostics =
        crate::diagnostics::to_dict(py, out.diagnostics.as_ref(), spread, until_rhat)?;
    result.set_item("diagnostics", diagnostics)?;
    result.set_item("steps", out.steps)?;
    Ok(result)
}
