//! The trials of a GPU test binary (`harness = false`, run by libtest-mimic): every test that
//! needs the GPU is reported as *ignored* where device 0 does not open, so `cargo test` on a
//! machine without one lists them instead of failing or passing them silently.

use std::process::ExitCode;

use libtest_mimic::{Arguments, Failed, Trial};

/// A binary's trials, and whether the GPU they need is there.
pub struct GpuTrials {
    gpu: bool,
    trials: Vec<Trial>,
}

impl GpuTrials {
    /// No trials yet; `label` names the binary's tests in the line [`super::gpu_present`]
    /// prints ("GPU run tests on NVIDIA H200 (PTX sm_80)", or why they are ignored).
    pub fn new(label: &str) -> Self {
        Self {
            gpu: super::gpu_present(label),
            trials: Vec::new(),
        }
    }

    /// Adds `test`, which needs the GPU: ignored without one.
    pub fn add(
        &mut self,
        name: impl Into<String>,
        test: impl FnOnce() -> Result<(), Failed> + Send + 'static,
    ) {
        let trial = Trial::test(name, test).with_ignored_flag(!self.gpu);
        self.trials.push(trial);
    }

    /// Adds `test`, which runs with or without a GPU.
    pub fn add_anywhere(
        &mut self,
        name: impl Into<String>,
        test: impl FnOnce() -> Result<(), Failed> + Send + 'static,
    ) {
        self.trials.push(Trial::test(name, test));
    }

    /// Runs the trials that the command line selects: the process's exit code.
    pub fn run(self) -> ExitCode {
        libtest_mimic::run(&Arguments::from_args(), self.trials).exit_code()
    }
}
