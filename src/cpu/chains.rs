//! Many steps on the CPU with the statistics of a GPU run: the twin of `Gpu::run`.

use super::{Proposal, StepBuffers, check_step, philox, step_into};
use crate::diagnostics::SplitMoments;
use crate::error::Result;
use crate::host_memory;
use crate::{Diagnostics, DiagnosticsPlan, Progress, Shape, StepConfig, Target};

/// What [`run_chains`] returns: the final states and each chain's statistics over the run.
#[derive(Clone, Debug)]
pub struct ChainsOutput {
    /// `[batch, dim]`: the states after the last step.
    pub x: Vec<f32>,
    /// `[batch]`: accepted steps of each chain.
    pub accepted: Vec<u64>,
    /// `[batch]`: steps of each chain whose `log alpha` was not finite (never accepted).
    pub nonfinite: Vec<u64>,
    /// `[batch]`: null moves of each chain: steps whose `log alpha` was exactly 0 because the
    /// proposal rounded back to the state (accepted, and no move).
    pub null_moves: Vec<u64>,
    /// `[batch, dim]`: the mean of each chain's states over the steps.
    pub mean: Vec<f64>,
    /// `[batch, dim]`: their variance (mean squared deviation, as NumPy's `var`).
    pub var: Vec<f64>,
    /// Steps run: `steps`, or fewer if the diagnostics plan stopped the run early.
    pub steps: u64,
    /// The split diagnostics at the run's last checkpoint (None without a plan, or before
    /// the first checkpoint).
    pub diagnostics: Option<Diagnostics>,
}

/// `steps` steps from step counter `first_step` with the statistics of [`crate::Gpu::run`]
/// (all cores), with the configuration's per-dimension scales if it has them: accepted,
/// non-finite and null-move counts, running moments (Welford's update in f64, one step at a
/// time; split on the diagnostics plan's schedule, [`crate::diagnostics::split`]), and every
/// `thin`-th state handed to `on_trace(save_index, state)` (`thin = 0`: none). `on_progress`
/// follows each step; at each checkpoint of the plan it carries the convergence diagnostics,
/// and the run stops there if the plan's early stop is met. An error from either callback
/// stops the run and is returned (a caller stops a run this way: Ctrl-C in Python).
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
    on_progress: &mut dyn FnMut(&Progress<'_>) -> Result<()>,
) -> Result<ChainsOutput> {
    shape.check_len("x", x)?;
    check_stream(first_step, steps)?;
    let mut moments =
        SplitMoments::new(shape, diagnostics.map(|d| (d.superchain_size, d.schedule)))?;
    let mut x = host_memory::copied("states", x)?;
    let proposal_scales = config.proposal_scales(shape)?;
    let proposal = match proposal_scales.as_deref() {
        Some(s) => Proposal::Scales(s),
        None => Proposal::StepSize(config.step_size()),
    };
    check_step(&x, shape, target, proposal)?;
    // The step's buffers, written by each step in turn (the next states swap with `x`).
    let mut out = StepBuffers::new(shape)?;
    let mut accepted = host_memory::filled("accepted counts", shape.batch(), 0u64)?;
    let mut nonfinite = host_memory::filled("non-finite counts", shape.batch(), 0u64)?;
    let mut null_moves = host_memory::filled("null-move counts", shape.batch(), 0u64)?;
    let mut last = None;
    let mut done = 0;
    while done < steps {
        let step = first_step + done;
        let draws = philox(config, step);
        step_into(&x, shape, target, proposal, draws, true, &mut out)?;
        for (((a, c), n), d) in accepted
            .iter_mut()
            .zip(&mut nonfinite)
            .zip(&mut null_moves)
            .zip(&out.decisions)
        {
            *a += u64::from(d.accepted);
            *c += u64::from(!fused_mh_kernel::mh::is_finite(d.log_alpha));
            *n += u64::from(d.log_alpha == 0.0);
        }
        std::mem::swap(&mut x, &mut out.x_new);
        moments.push(&x)?;
        done += 1;
        if thin > 0 && done % thin == 0 {
            on_trace(done / thin - 1, &x)?;
        }
        let found = moments.close_if_due(target.mu())?.map(|d| {
            let total: u64 = accepted.iter().sum();
            Diagnostics {
                acceptance_rate: Some(total as f64 / (done as f64 * shape.batch() as f64)),
                ..d
            }
        });
        on_progress(&Progress {
            done,
            total: steps,
            diagnostics: found.as_ref(),
        })?;
        if let Some(d) = found {
            let stop = diagnostics.is_some_and(|plan| plan.converged(&d));
            last = Some(d);
            if stop {
                break;
            }
        }
    }
    let (mean, var) = moments.into_mean_var()?;
    Ok(ChainsOutput {
        x,
        accepted,
        nonfinite,
        null_moves,
        mean,
        var,
        steps: done,
        diagnostics: last,
    })
}

/// The host memory [`run_chains`] holds at its peak, in bytes, beyond its input `x`: its
/// working states and the buffers each step writes (the next states, the decisions), two
/// moment samples (the split halves: their means and sums of squares in f64), and three
/// per-chain counts.
/// The final states, counts and moments it returns are among these. A caller adds what it
/// holds itself and compares the total with the free memory before the run.
pub fn run_chains_bytes(shape: Shape) -> u128 {
    let (len, batch) = (shape.len() as u128, shape.batch() as u128);
    let states = 4 * len;
    let moments = 2 * 2 * 8 * len;
    let counts = 3 * 8 * batch;
    states + StepBuffers::bytes(shape) + moments + counts
}

/// Checks that a run of `steps` steps from step counter `first_step` has a step to run and
/// never wraps the counter: its last step is `first_step + steps - 1`, and where it ends,
/// `first_step + steps`, must be a counter too (past `2^64 - 1` the stream would start again
/// at step 0's random numbers). The same rule as `host run`'s, for [`crate::Gpu::run`] too.
pub fn check_stream(first_step: u64, steps: u64) -> Result<()> {
    if steps == 0 {
        return Err(crate::Error::InvalidRun("steps = 0: nothing to run".into()));
    }
    if first_step.checked_add(steps).is_none() {
        return Err(crate::Error::InvalidRun(format!(
            "first_step = {first_step} with steps = {steps}: the step counter would pass \
             2^64 - 1 and replay the random numbers of step 0 on"
        )));
    }
    Ok(())
}

/// Checks that saving every `thin`-th state of a `steps`-step run saves something, and the
/// run's last state: `thin` (0: no trace) divides `steps`. Otherwise the steps after the last
/// saved state would run but be missing from the trace. The same rule as `host run --thin`'s.
pub fn check_thin(steps: u64, thin: u64) -> Result<()> {
    if thin > steps {
        return Err(crate::Error::InvalidRun(format!(
            "thin = {thin} is larger than steps = {steps}: nothing would be saved"
        )));
    }
    if thin > 0 && !steps.is_multiple_of(thin) {
        return Err(crate::Error::InvalidRun(format!(
            "thin = {thin} does not divide steps = {steps}: the last {} steps would run but \
             never be saved (give a thin that divides steps)",
            steps % thin
        )));
    }
    Ok(())
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
            &mut |_| Ok(()),
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
            &mut |_| Ok(()),
        );
        assert!(err.is_err());
    }

    /// States next to 10^8, where one float32 step is 8: a proposal scale of 0.5 rounds back to
    /// the state in every coordinate, so every step is a null move (accepted, no move); the
    /// ordinary problem has none.
    #[test]
    fn null_moves_are_counted() {
        let (shape, x, target) = problem();
        let out = run(&x, shape, &target, &StepConfig::new(0.7, 4).unwrap());
        assert_eq!(out.null_moves, vec![0; 9]);
        let far = vec![1.0e8f32; 63];
        let out = run(&far, shape, &target, &StepConfig::new(0.5, 4).unwrap());
        assert_eq!((out.null_moves, out.accepted), (vec![12; 9], vec![12; 9]));
        assert_eq!(out.x, far);
    }

    /// No steps, and a counter that would wrap (the issue's `first_step = 2^64 - 1` with 3
    /// steps), are refused; the last counter that fits runs.
    #[test]
    fn the_stream_never_wraps() {
        let (shape, x, target) = problem();
        let config = StepConfig::new(0.7, 4).unwrap();
        let go = |first: u64, steps: u64| {
            run_chains(
                &x,
                shape,
                &target,
                &config,
                first,
                steps,
                0,
                None,
                &mut |_, _| Ok(()),
                &mut |_| Ok(()),
            )
        };
        assert!(go(0, 0).is_err());
        assert!(go(u64::MAX, 3).is_err());
        assert!(go(u64::MAX - 1, 2).is_err());
        assert!(go(u64::MAX - 2, 2).is_ok());
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
