//! The library's errors as Python exceptions: bad values and shapes are `ValueError`, a
//! missing GPU or a driver failure is `RuntimeError`, memory (host, GPU, or the worker threads'
//! stacks) is `MemoryError` (the message is the library's either way).

use fused_mh::Error;
use pyo3::PyErr;
use pyo3::exceptions::{PyMemoryError, PyRuntimeError, PyValueError};

/// The exception for `e`.
pub fn to_py(e: Error) -> PyErr {
    let message = e.to_string();
    exception(e, message)
}

/// The exception for `e`, its message after `about` (what the error is about, e.g. `x has
/// shape [3, 8]`, where the library's message names only the chains or the target).
pub fn to_py_about(about: &str, e: Error) -> PyErr {
    let message = format!("{about}: {e}");
    exception(e, message)
}

/// The exception class for `e`, with `message`.
fn exception(e: Error, message: String) -> PyErr {
    match e {
        Error::NoDriver
        | Error::NoDevice { .. }
        | Error::PtxTooNew { .. }
        | Error::MissingKernel(_)
        | Error::Driver(_)
        | Error::Stopped => PyRuntimeError::new_err(message),
        Error::HostOutOfMemory { .. } | Error::OutOfMemory { .. } | Error::NoThreads(_) => {
            PyMemoryError::new_err(message)
        }
        _ => PyValueError::new_err(message),
    }
}
