//! The convergence diagnostics (`fused_mh::diagnostics`) on the CPU reference's chains: equal to
//! a two-pass computation over the full trace, and telling converged superchains from
//! superchains that have not met yet.

use fused_mh::diagnostics::{self, Diagnostics};
use fused_mh::{Shape, StepConfig, Target, cpu};

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
        &mut |_| {},
    )
    .unwrap();
    let d = diagnostics::from_chain_moments(shape, m, steps, &out.mean, &out.var).unwrap();
    (d, trace, shape)
}

/// Nested R-hat straight from the draws, two passes in f64, written from the paper's
/// definitions (independently of `diagnostics`).
fn nested_rhat_from_trace(trace: &[f32], shape: Shape, m: usize, steps: usize) -> Vec<f64> {
    let (batch, dim) = (shape.batch(), shape.dim());
    let k = batch / m;
    let draw = |s: usize, c: usize, d: usize| f64::from(trace[(s * batch + c) * dim + d]);
    (0..dim)
        .map(|d| {
            let chain_mean =
                |c: usize| (0..steps).map(|s| draw(s, c, d)).sum::<f64>() / steps as f64;
            let chain_var = |c: usize| {
                let mc = chain_mean(c);
                (0..steps)
                    .map(|s| (draw(s, c, d) - mc).powi(2))
                    .sum::<f64>()
                    / (steps - 1) as f64
            };
            let means: Vec<f64> = (0..batch).map(chain_mean).collect();
            let super_means: Vec<f64> = (0..k)
                .map(|s| means[s * m..(s + 1) * m].iter().sum::<f64>() / m as f64)
                .collect();
            let overall = super_means.iter().sum::<f64>() / k as f64;
            let b = super_means
                .iter()
                .map(|x| (x - overall).powi(2))
                .sum::<f64>()
                / (k - 1) as f64;
            let w = (0..k)
                .map(|s| {
                    let bt = if m > 1 {
                        means[s * m..(s + 1) * m]
                            .iter()
                            .map(|x| (x - super_means[s]).powi(2))
                            .sum::<f64>()
                            / (m - 1) as f64
                    } else {
                        0.0
                    };
                    bt + (s * m..(s + 1) * m).map(chain_var).sum::<f64>() / m as f64
                })
                .sum::<f64>()
                / k as f64;
            (1.0 + b / w).sqrt()
        })
        .collect()
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
