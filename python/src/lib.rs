//! `fused_mh._native`: the Rust side of the Python package. The `fused_mh` package (Python,
//! `fused_mh/`) is what users import; it chooses between the two halves here by where the
//! arrays live:
//! - [`cpu`]: NumPy arrays, on the library's CPU reference (the same functions as the GPU
//!   kernels, `fused_mh::cpu`);
//! - [`gpu`]: CUDA tensors handed over by DLPack, stepped in place by the library's kernels on
//!   the caller's stream ([`dlpack`]: the checks on what is lent, and the arrays lent out).
//!
//! [`models`]: the models with data (regressions, the hierarchical normal, the dense Gaussian),
//! sampled on either machine from NumPy arrays.
//!
//! [`diagnostics`] gives both the diagnostics of a run as `host run` reports them.
//!
//! Every error of the library becomes a Python exception carrying its message ([`errors`]).

use pyo3::prelude::*;

mod adapt;
mod cpu;
mod diagnostics;
mod dlpack;
mod errors;
mod gpu;
mod interrupts;
mod landing;
mod memory;
mod models;
mod starts;
mod targets;
mod warm_up;

/// The `fused-mh` command (`host`'s program) on `args`, the program's name first: its exit
/// status. The GIL is released while it runs; a usage error, `--help` and a signal end the
/// process as they end `host`.
#[pyfunction]
fn cli(py: Python<'_>, args: Vec<String>) -> u8 {
    py.detach(|| host::main(args.into_iter().map(std::ffi::OsString::from)))
}

/// The module: its functions and classes.
#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(cpu::step, m)?)?;
    m.add_function(wrap_pyfunction!(cpu::step_with_noise, m)?)?;
    m.add_function(wrap_pyfunction!(cpu::run, m)?)?;
    m.add_function(wrap_pyfunction!(targets::target_params, m)?)?;
    m.add_function(wrap_pyfunction!(targets::check_target, m)?)?;
    m.add_function(wrap_pyfunction!(memory::check_target_memory, m)?)?;
    m.add_function(wrap_pyfunction!(models::sample_model, m)?)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add_function(wrap_pyfunction!(cli, m)?)?;
    m.add_function(wrap_pyfunction!(starts::initial_states, m)?)?;
    m.add("WARMUP_LAUNCH_STEPS", fused_mh::adapt::WARMUP_LAUNCH_STEPS)?;
    m.add_class::<gpu::Device>()?;
    m.add_class::<gpu::Target>()?;
    m.add_class::<dlpack::Exported>()?;
    Ok(())
}
