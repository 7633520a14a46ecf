//! Ctrl-C and `kill`: a job that is stopped leaves nothing behind.
//!
//! A run writes into a staging directory of its own ([`crate::outdir`]), the benchmark its
//! report into a temporary file ([`crate::report_file`]). When SIGINT, SIGTERM, SIGHUP or
//! SIGQUIT arrives, a watcher thread removes that directory or file and ends the process with
//! the shell's code for the signal (128 + its number: 130 for Ctrl-C, 143 for `kill`). The path is
//! registered here while it exists and unregistered by the commit that moves it into place;
//! the commit holds the same lock, so a signal is handled either before the commit starts
//! (nothing appears) or after it ends (the results are complete). What SIGKILL leaves, the
//! next job clears ([`crate::leftovers`]).

use std::path::PathBuf;
use std::sync::{Mutex, MutexGuard, PoisonError};

use anyhow::{Context, Result};
use signal_hook::consts::{SIGHUP, SIGINT, SIGQUIT, SIGTERM};
use signal_hook::iterator::Signals;

/// The staging directory or file to remove if the process is stopped.
static STAGING: Mutex<Option<PathBuf>> = Mutex::new(None);

/// Starts the watcher thread. Call once, before anything is staged.
pub fn install() -> Result<()> {
    let mut signals = Signals::new([SIGINT, SIGTERM, SIGHUP, SIGQUIT])
        .context("cannot install the signal handlers")?;
    std::thread::Builder::new()
        .name("signals".into())
        .spawn(move || {
            if let Some(signal) = signals.forever().next() {
                let staging = lock();
                if let Some(path) = staging.as_ref() {
                    // Created by this process, exclusively (tempfile): it holds nothing but
                    // this job's partial outputs.
                    if path.is_dir() {
                        let _ = std::fs::remove_dir_all(path);
                    } else {
                        let _ = std::fs::remove_file(path);
                    }
                }
                crate::note!("interrupted: nothing was written");
                std::process::exit(128 + signal);
            }
        })
        .context("cannot start the signal thread")?;
    Ok(())
}

/// The registered staging path, locked: hold the guard while moving it into place.
pub fn lock() -> MutexGuard<'static, Option<PathBuf>> {
    STAGING.lock().unwrap_or_else(PoisonError::into_inner)
}
