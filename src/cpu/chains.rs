//! Many steps on the CPU with the statistics of a GPU run: the twin of `Gpu::run`.

use rayon::prelude::*;

use super::par_step;
use crate::error::Result;
use crate::host_memory;
use crate::{DiagnosticsPlan, Progress, Shape, StepConfig, Target};

/// What [`run_chains`] returns: the final states and each chain's statistics over the run.
#[derive(Clone, Debug)]
pub struct ChainsOutput {
    /// `[batch, dim]`: the states after the last step.
    pub x: Vec<f32>,
    /// `[batch]`: accepted steps of each chain.
    pub accepted: Vec<u64>,
    /// `[batch, dim]`: the mean of each chain's states over the steps.
    pub mean: Vec<f64>,
    /// `[batch, dim]`: their variance (mean squared deviation, as NumPy's `var`).
    pub var: Vec<f64>,
    /// Steps run: `steps`, or fewer if the diagnostics plan stopped the run early.
    pub steps: u64,
}

/// `steps` steps from step counter `first_step` with the statistics of [`crate::Gpu::run`]
/// (all cores): accepted counts, running moments (Welford's update in f64, one step at a
/// time), and every `thin`-th state handed to `on_trace(save_index, state)` (`thin = 0`:
/// none). `on_progress` follows each step; every `diagnostics.every` steps it carries the
/// convergence diagnostics, and the run stops there if the plan's early stop is met.
#[allow(clippy::too_many_arguments)]
pub fn run_chains(
    x: &[f32],
    shape: Shape,
    target: &Target,
    config: &StepConfig,
    first_step: u64,
    steps: u64,
    thin: u64,
    diagnostics: Option<DiagnosticsPlan>,
    on_trace: &mut dyn FnMut(u64, &[f32]) -> Result<()>,
    on_progress: &mut dyn FnMut(&Progress<'_>),
) -> Result<ChainsOutput> {
    shape.check_len("x", x)?;
    if let Some(d) = diagnostics {
        crate::diagnostics::check_superchains(shape, d.superchain_size)?;
    }
    let mut x = host_memory::copied("states", x)?;
    let mut accepted = host_memory::filled("accepted counts", shape.batch(), 0u64)?;
    let mut mean = host_memory::filled("means", shape.len(), 0f64)?;
    let mut m2 = host_memory::filled("variances", shape.len(), 0f64)?;
    for done in 1..=steps {
        let out = par_step(&x, shape, target, config, first_step + done - 1)?;
        for (c, a) in accepted.iter_mut().zip(&out.accepted) {
            *c += u64::from(*a);
        }
        x = out.x_new;
        let n = done as f64;
        (&mut mean, &mut m2, &x)
            .into_par_iter()
            .for_each(|(m, s, &v)| {
                let v = f64::from(v);
                let delta = v - *m;
                *m += delta / n;
                *s += delta * (v - *m);
            });
        if thin > 0 && done % thin == 0 {
            on_trace(done / thin - 1, &x)?;
        }
        let due =
            diagnostics.filter(|d| done >= 2 && (done % d.every.max(1) == 0 || done == steps));
        let found = match due {
            Some(d) => {
                let var: Vec<f64> = m2.par_iter().map(|s| s / n).collect();
                let diagnostics = crate::diagnostics::from_chain_moments(
                    shape,
                    d.superchain_size,
                    done,
                    &mean,
                    &var,
                )?;
                let total: u64 = accepted.iter().sum();
                Some(crate::Diagnostics {
                    acceptance_rate: Some(total as f64 / (n * shape.batch() as f64)),
                    ..diagnostics
                })
            }
            None => None,
        };
        on_progress(&Progress {
            done,
            total: steps,
            diagnostics: found.as_ref(),
        });
        if let (Some(plan), Some(d)) = (due, &found)
            && plan.converged(d)
        {
            return Ok(finish(x, accepted, mean, m2, done));
        }
    }
    Ok(finish(x, accepted, mean, m2, steps))
}

/// The output of [`run_chains`] after `steps` steps (variances from the sums of squares).
fn finish(
    x: Vec<f32>,
    accepted: Vec<u64>,
    mean: Vec<f64>,
    m2: Vec<f64>,
    steps: u64,
) -> ChainsOutput {
    let n = steps.max(1) as f64;
    let var = m2.into_iter().map(|s| s / n).collect();
    ChainsOutput {
        x,
        accepted,
        mean,
        var,
        steps,
    }
}
