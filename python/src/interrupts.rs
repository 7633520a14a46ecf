//! Ctrl-C during a run: the interpreter's signal handlers run between launches (the GPU) and
//! between steps (the CPU), so a run stops within one of them.
//!
//! A run releases the GIL (`Python::detach`) and Python's handlers run only on the main
//! thread holding it: a SIGINT is noted by the interpreter and acted on when the GIL comes
//! back. So the run's progress callback takes the GIL for a moment and calls
//! `check_signals`; a handler's exception (`KeyboardInterrupt`) stops the run
//! (`Error::Stopped`) and is raised in its place.

use std::time::{Duration, Instant};

use fused_mh::Error;
use pyo3::prelude::*;
use pyo3::{PyErr, PyResult, Python};

use crate::errors::to_py;

/// How often a run's progress callback is called at most (and at the end).
const PROGRESS_EVERY: Duration = Duration::from_millis(100);

/// The signal check of one run, its progress callback, and the exception it caught, if any.
#[derive(Default)]
pub struct Interrupts {
    caught: Option<PyErr>,
    /// Called with the steps done, at most every [`PROGRESS_EVERY`] and when all are done.
    progress: Option<Py<PyAny>>,
    last: Option<Instant>,
}

impl Interrupts {
    /// With a progress callback `progress(done)` (a Python callable), or none.
    pub fn with_progress(progress: Option<Py<PyAny>>) -> Self {
        Self {
            progress,
            ..Self::default()
        }
    }

    /// Runs the interpreter's pending signal handlers; an exception from one stops the run.
    pub fn check(&mut self) -> fused_mh::Result<()> {
        Python::attach(|py| py.check_signals()).map_err(|e| {
            self.caught = Some(e);
            Error::Stopped
        })
    }

    /// [`Self::check`], then the progress callback with `done` of `total` steps when it is
    /// due; an exception from it stops the run as a signal handler's does.
    pub fn check_progress(&mut self, done: u64, total: u64) -> fused_mh::Result<()> {
        self.check()?;
        let due = self.last.is_none_or(|t| t.elapsed() >= PROGRESS_EVERY) || done >= total;
        let Some(callback) = self.progress.as_ref().filter(|_| due) else {
            return Ok(());
        };
        self.last = Some(Instant::now());
        Python::attach(|py| callback.call1(py, (done,)).map(drop)).map_err(|e| {
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
