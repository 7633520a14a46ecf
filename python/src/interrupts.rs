//! Ctrl-C during a run: the interpreter's signal handlers run between launches (the GPU) and
//! between steps (the CPU), so a run stops within one of them.
//!
//! A run releases the GIL (`Python::detach`) and Python's handlers run only on the main
//! thread holding it: a SIGINT is noted by the interpreter and acted on when the GIL comes
//! back. So the run's progress callback takes the GIL for a moment and calls
//! `check_signals`; a handler's exception (`KeyboardInterrupt`) stops the run
//! (`Error::Stopped`) and is raised in its place.

use fused_mh::Error;
use pyo3::{PyErr, PyResult, Python};

use crate::errors::to_py;

/// The signal check of one run, and the exception it caught, if any.
#[derive(Default)]
pub struct Interrupts {
    caught: Option<PyErr>,
}

impl Interrupts {
    /// Runs the interpreter's pending signal handlers; an exception from one stops the run.
    pub fn check(&mut self) -> fused_mh::Result<()> {
        Python::attach(|py| py.check_signals()).map_err(|e| {
            self.caught = Some(e);
            Error::Stopped
        })
    }

    /// The run's result: the caught exception if a handler raised one, else the run's own
    /// error as a Python exception.
    pub fn result<T>(self, ran: fused_mh::Result<T>) -> PyResult<T> {
        match self.caught {
            Some(e) => Err(e),
            None => ran.map_err(to_py),
        }
    }
}
