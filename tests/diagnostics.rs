//! The convergence diagnostics (`fused_mh::diagnostics`) on the CPU reference's chains: equal to
//! a two-pass computation over the full trace, and telling converged superchains from
//! superchains that have not met yet.

use fused_mh::diagnostics::{self, Diagnostics};
use fused_mh::{Shape, StepConfig, Target, cpu};

mod support;
use support::nested_rhat_from_trace;

/// `steps` steps of `batch` chains, in superchains of `m` chains that start at one point each,
/// the superchains' points `spread` standard deviations apart; the diagnostics from the run's
/// moments and every state of the trace.
fn run(batch: usize, m: usize, steps: u64, spread: f32) -> (Diagnostics, Vec<f32>, Shape) {
    let dim = 3;
    let shape = Shape::new(batch, dim).unwrap();
    let target = Target::new(vec![1.0, -2.0, 0.5], vec![1.0, 0.7, 1.4]).unwrap();
    let x: Vec<f32> = (0..batch * dim)
        .map(|i| {
            let (superchain, d) = (i / dim / m, i % dim);
            let offset = spread * ((superchain as f32 * 0.7).sin());
            target.mu()[d] + offset * target.sigma()[d]
        })
        .collect();
    let config = StepConfig::new(0.9, 5).unwrap();
    let mut trace = Vec::new();
    let out = cpu::run_chains(
        &x,
        shape,
        &target,
        &config,
        0,
        steps,
        1,
        None,
        &mut |_, state| {
            trace.extend_from_slice(state);
            Ok(())
        },
        &mut |_| Ok(()),
    )
    .unwrap();
    let d = diagnostics::from_chain_moments(shape, m, steps, &out.mean, &out.var).unwrap();
    (d, trace, shape)
}

#[test]
fn streaming_diagnostics_equal_the_two_pass_trace_computation() {
    for m in [1, 4] {
        let steps = 200;
        let (d, trace, shape) = run(32, m, steps, 3.0);
        let want = nested_rhat_from_trace(&trace, shape, m, steps as usize);
        for (got, want) in d.nested_rhat.iter().zip(&want) {
            // Welford's running moments in f64 against two passes in f64: both within a few
            // ulps of the exact value; 1e-9 relative leaves room for the sums' rounding.
            approx::assert_relative_eq!(*got, *want, max_relative = 1e-9);
        }
    }
}

#[test]
fn superchains_started_apart_converge() {
    // 16 superchains of 4 chains, started up to 20 standard deviations apart: after 10 steps
    // they have not met (nested R-hat far above 1.1); after 20000 they have (below 1.01; the
    // moments include the first steps' transient, which is most of what is left of B), and the
    // ESS is a few percent of the 64 * 20000 draws, as for RWMH in 3 dimensions.
    let (early, _, _) = run(64, 4, 10, 20.0);
    assert!(early.max_nested_rhat() > 1.1, "{early:?}");
    let (late, _, _) = run(64, 4, 20_000, 20.0);
    assert!(late.max_nested_rhat() < 1.01, "{late:?}");
    assert!(
        late.min_ess() > 5000.0 && late.min_ess() < 64.0 * 20_000.0,
        "{late:?}"
    );
}

/// A run's split diagnostics (`cpu::run_chains` with a plan) against the split computed from
/// its full trace, at its last checkpoint: equal to f64 rounding (the Welford moments and the
/// halves' merge against two passes; 1e-9 relative, as above). The run starts every chain at
/// one point 10 standard deviations out: the unsplit R-hat of the same draws stays near 1,
/// the split one sees the chains' common way in.
#[test]
fn split_diagnostics_equal_the_trace_and_see_a_shared_trend() {
    let dim = 3;
    let (batch, steps) = (64, 400);
    let shape = Shape::new(batch, dim).unwrap();
    let target = Target::new(vec![1.0, -2.0, 0.5], vec![1.0, 0.7, 1.4]).unwrap();
    let x: Vec<f32> = (0..batch * dim)
        .map(|i| target.mu()[i % dim] + 10.0 * target.sigma()[i % dim])
        .collect();
    let plan = fused_mh::DiagnosticsPlan {
        superchain_size: 1,
        until_rhat: None,
        min_draws: 4,
        schedule: diagnostics::SplitSchedule::ending_at(steps, 1).unwrap(),
    };
    let mut trace = Vec::new();
    let out = cpu::run_chains(
        &x,
        shape,
        &target,
        &StepConfig::new(0.9, 5).unwrap(),
        0,
        steps,
        1,
        Some(plan),
        &mut |_, state| {
            trace.extend_from_slice(state);
            Ok(())
        },
        &mut |_| Ok(()),
    )
    .unwrap();
    let d = out.diagnostics.expect("diagnostics at the last checkpoint");
    assert_eq!(d.draws, steps);
    let want = support::split_nested_rhat_from_trace(&trace, shape, 1, steps as usize);
    for (got, want) in d.nested_rhat.iter().zip(&want) {
        approx::assert_relative_eq!(*got, *want, max_relative = 1e-9);
    }
    let unsplit = nested_rhat_from_trace(&trace, shape, 1, steps as usize);
    assert!(d.max_nested_rhat() > 1.1, "split {d:?}");
    assert!(unsplit.iter().all(|&r| r < 1.01), "unsplit {unsplit:?}");
    // Halves apart: the ESS is a small fraction of the 64 x 400 draws.
    assert!(
        d.min_ess() < 0.05 * (batch * steps as usize) as f64,
        "{d:?}"
    );
}
