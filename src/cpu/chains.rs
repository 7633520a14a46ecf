//! Many steps on the CPU with the statistics of a GPU run: the twin of `Gpu::run`.

use rayon::prelude::*;

use super::par_step_scaled;
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
    /// `[batch]`: steps of each chain whose `log alpha` was not finite (never accepted).
    pub nonfinite: Vec<u64>,
    /// `[batch, dim]`: the mean of each chain's states over the steps.
    pub mean: Vec<f64>,
    /// `[batch, dim]`: their variance (mean squared deviation, as NumPy's `var`).
    pub var: Vec<f64>,
    /// Steps run: `steps`, or fewer if the diagnostics plan stopped the run early.
    pub steps: u64,
}

/// `steps` steps from step counter `first_step` with the statistics of [`crate::Gpu::run`]
/// (all cores), with the configuration's per-dimension scales if it has them: accepted and
/// non-finite counts, running moments (Welford's update in f64, one step at a
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
    let proposal_scales = config.proposal_scales(shape)?;
    let mut accepted = host_memory::filled("accepted counts", shape.batch(), 0u64)?;
    let mut nonfinite = host_memory::filled("non-finite counts", shape.batch(), 0u64)?;
    let mut mean = host_memory::filled("means", shape.len(), 0f64)?;
    let mut m2 = host_memory::filled("variances", shape.len(), 0f64)?;
    for done in 1..=steps {
        let step = first_step + done - 1;
        let out = par_step_scaled(&x, shape, target, config, proposal_scales.as_deref(), step)?;
        for (c, a) in accepted.iter_mut().zip(&out.accepted) {
            *c += u64::from(*a);
        }
        for (c, a) in nonfinite.iter_mut().zip(&out.log_alpha) {
            *c += u64::from(!fused_mh_kernel::mh::is_finite(*a));
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
            return Ok(finish(x, (accepted, nonfinite), mean, m2, done));
        }
    }
    Ok(finish(x, (accepted, nonfinite), mean, m2, steps))
}

/// The output of [`run_chains`] after `steps` steps (variances from the sums of squares).
fn finish(
    x: Vec<f32>,
    (accepted, nonfinite): (Vec<u64>, Vec<u64>),
    mean: Vec<f64>,
    m2: Vec<f64>,
    steps: u64,
) -> ChainsOutput {
    let n = steps.max(1) as f64;
    let var = m2.into_iter().map(|s| s / n).collect();
    ChainsOutput {
        x,
        accepted,
        nonfinite,
        mean,
        var,
        steps,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(x: &[f32], shape: Shape, target: &Target, config: &StepConfig) -> ChainsOutput {
        run_chains(
            x,
            shape,
            target,
            config,
            5,
            12,
            0,
            None,
            &mut |_, _| Ok(()),
            &mut |_| {},
        )
        .expect("a valid run")
    }

    fn problem() -> (Shape, Vec<f32>, Target) {
        let shape = Shape::new(9, 7).unwrap();
        let x = (0..63)
            .map(|i| ((i * 37 % 11) as f32 - 5.0) * 0.4)
            .collect();
        let target = Target::new(vec![0.5; 7], (1..=7).map(|d| d as f32).collect()).unwrap();
        (shape, x, target)
    }

    /// Scales of 1 give the step size itself: the same run, bit for bit.
    #[test]
    fn scales_of_one_change_nothing() {
        let (shape, x, target) = problem();
        let plain = StepConfig::new(0.7, 4).unwrap();
        let scaled = plain.clone().with_scales(&[1.0; 7]).unwrap();
        let (a, b) = (
            run(&x, shape, &target, &plain),
            run(&x, shape, &target, &scaled),
        );
        let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&a.x), bits(&b.x));
        assert_eq!((a.accepted, a.mean), (b.accepted, b.mean));
        // Other scales change the proposal, and a single step refuses them.
        let other = plain.clone().with_scales(&[2.0; 7]).unwrap();
        assert_ne!(bits(&run(&x, shape, &target, &other).x), bits(&a.x));
        assert!(crate::cpu::step(&x, shape, &target, &other, 0).is_err());
        // Scales whose product with the step size is not a positive finite number.
        for bad in [0.0, -1.0, f32::NAN, f32::INFINITY] {
            let mut s = [1.0; 7];
            s[3] = bad;
            assert!(plain.clone().with_scales(&s).is_err(), "scale {bad}");
        }
        // One scale per dimension.
        let short = plain.with_scales(&[1.0; 6]).unwrap();
        let err = run_chains(
            &x,
            shape,
            &target,
            &short,
            0,
            1,
            0,
            None,
            &mut |_, _| Ok(()),
            &mut |_| {},
        );
        assert!(err.is_err());
    }

    /// Rows planted with a NaN or an infinity count every step as non-finite and never move;
    /// the others count none.
    #[test]
    fn nonfinite_counts_are_exact() {
        let (shape, mut x, target) = problem();
        x[2 * 7 + 3] = f32::NAN;
        x[4 * 7] = f32::INFINITY;
        x[8 * 7 + 6] = f32::NEG_INFINITY;
        let out = run(&x, shape, &target, &StepConfig::new(0.7, 4).unwrap());
        let want: Vec<u64> = (0..9)
            .map(|r| if [2, 4, 8].contains(&r) { 12 } else { 0 })
            .collect();
        assert_eq!(out.nonfinite, want);
        for r in [2, 4, 8] {
            assert_eq!(out.accepted[r], 0);
        }
        // Proposals past float32's range: a step size of 1e30 makes every term overflow.
        let (_, x, _) = problem();
        let out = run(&x, shape, &target, &StepConfig::new(1e30, 4).unwrap());
        assert_eq!(out.nonfinite, vec![12; 9]);
        assert_eq!(out.x, x);
    }
}
