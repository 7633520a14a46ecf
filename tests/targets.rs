//! Every target on the CPU reference: after a burn-in, the chains' states are draws from the
//! exact marginals (`support::marginals`), and a target's parameters are checked by name.

mod support;

use fused_mh::{Error, StepConfig, Target, TargetKind, cpu};
use support::marginals::{check_marginals, problem};

/// For every target: 8192 independent chains of 4 dimensions, 800 steps of 1.4 scales per
/// dimension (the acceptance is then 30 to 50 %, and chains started in the bulk fill the tails
/// within a few hundred steps): the final states pass `check_marginals`.
#[test]
fn chains_reach_the_exact_marginals() {
    for &kind in TargetKind::ALL {
        let (shape, x, target) = problem(kind, 8192, 4, 7);
        let config = StepConfig::new(1.4, 11)
            .and_then(|c| c.with_scales(target.sigma()))
            .expect("valid configuration");
        let (x, accepted) = cpu::steps(&x, shape, &target, &config, 0, 800).expect("runs");
        let rate = accepted.iter().sum::<u64>() as f64 / (8192.0 * 800.0);
        assert!(
            (0.2..0.7).contains(&rate),
            "{}: acceptance {rate}",
            kind.name()
        );
        check_marginals(&x, shape, &target).unwrap_or_else(|e| panic!("{}: {e}", kind.name()));
    }
}

/// Each target takes its parameters in its order and names the one it cannot use.
#[test]
fn parameters_are_checked_by_name() {
    for &kind in TargetKind::ALL {
        let n = kind.params().len();
        let short = Target::of_kind(kind, vec![vec![0.0]; n - 1]);
        assert!(
            matches!(short, Err(Error::LengthMismatch { .. })),
            "{}",
            kind.name()
        );
        for (i, name) in kind.params().iter().enumerate() {
            let mut params = vec![vec![1.0, 1.0]; n];
            params[i][1] = f32::NAN;
            match Target::of_kind(kind, params) {
                Err(Error::InvalidParameter {
                    param, index: 1, ..
                }) => assert_eq!(param, *name),
                other => panic!("{} with a NaN {name}: {other:?}", kind.name()),
            }
        }
    }
}
