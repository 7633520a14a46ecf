//! The CPU reference's tests: agreement with the reference formulas, serial and parallel
//! paths, caller noise, and the comparison rules.

use super::compare::Agreement;
use super::*;

/// The reference model's formulas in f64, written independently of the kernel crate:
/// log pi(v) = -1/2 sum ((v - mu) / sigma)^2.
fn log_pi(v: &[f32], t: &Target) -> f64 {
    -0.5 * v
        .iter()
        .zip(t.mu().iter().zip(t.sigma()))
        .map(|(&v, (&m, &s))| ((f64::from(v) - f64::from(m)) / f64::from(s)).powi(2))
        .sum::<f64>()
}

fn inputs(batch: usize, dim: usize) -> (Shape, Vec<f32>, Target, Vec<f32>, Vec<f32>) {
    let shape = Shape::new(batch, dim).unwrap();
    let x = (0..batch * dim)
        .map(|i| ((i * 7919 % 1013) as f32 / 1013.0 - 0.5) * 3.0)
        .collect();
    let mu = (0..dim).map(|d| (d as f32 * 0.3).sin()).collect();
    let sigma = (0..dim).map(|d| 0.5 + (d % 3) as f32 * 0.5).collect();
    let noise = (0..batch * dim)
        .map(|i| ((i * 104_729 % 2003) as f32 / 2003.0 - 0.5) * 4.0)
        .collect();
    let uniform = (0..batch).map(|b| (b * 31 % 97) as f32 / 97.0).collect();
    (shape, x, Target::new(mu, sigma).unwrap(), noise, uniform)
}

#[test]
fn caller_noise_step_follows_the_reference_semantics_in_f64() {
    for (batch, dim) in [(1, 1), (5, 3), (9, 33), (3, 130)] {
        let (shape, x, target, noise, uniform) = inputs(batch, dim);
        let step_size = 0.3;
        let out = step_with_noise(&x, shape, &target, step_size, &noise, &uniform).unwrap();
        for b in 0..batch {
            let xb = &x[b * dim..(b + 1) * dim];
            let proposal: Vec<f32> = (0..dim)
                .map(|d| {
                    (f64::from(xb[d]) + f64::from(step_size) * f64::from(noise[b * dim + d])) as f32
                })
                .collect();
            let log_alpha = log_pi(&proposal, &target) - log_pi(xb, &target);
            let log_u = f64::from(uniform[b].max(1e-10)).ln();
            // f32 sums of a few hundred O(1) terms: 1e-4 absolute is ample; decisions
            // closer than that to the boundary are skipped.
            assert!(
                (f64::from(out.log_alpha[b]) - log_alpha).abs() < 1e-4 * (1.0 + log_alpha.abs())
            );
            assert!((f64::from(out.log_u[b]) - log_u).abs() < 1e-5);
            if (log_u - log_alpha).abs() > 1e-4 {
                assert_eq!(
                    out.accepted[b],
                    log_u < log_alpha,
                    "row {b} of ({batch}, {dim})"
                );
            }
            // The proposal, computed in f64: the kernel's fused multiply-add rounds the exact
            // x + s * eps once, so it is within one ulp of this (double rounding aside).
            let want = if out.accepted[b] { &proposal[..] } else { xb };
            for (d, (&got, &want)) in out.x_new[b * dim..(b + 1) * dim]
                .iter()
                .zip(want)
                .enumerate()
            {
                assert!(
                    approx::ulps_eq!(got, want, max_ulps = 1),
                    "x_new[{b}, {d}] of ({batch}, {dim}): {got} vs {want}"
                );
            }
        }
    }
}

#[test]
fn parallel_and_serial_agree_exactly() {
    let (shape, x, target, noise, uniform) = inputs(300, 37);
    let config = StepConfig::new(0.4, 77).unwrap();
    assert_eq!(
        step(&x, shape, &target, &config, 5).unwrap(),
        par_step(&x, shape, &target, &config, 5).unwrap()
    );
    assert_eq!(
        step_with_noise(&x, shape, &target, 0.4, &noise, &uniform).unwrap(),
        par_step_with_noise(&x, shape, &target, 0.4, &noise, &uniform).unwrap()
    );
}

#[test]
fn in_kernel_draws_equal_caller_noise_from_the_counter_scheme() {
    // Generating the counter scheme's numbers on the host and passing them as caller noise
    // must give exactly the in-kernel-RNG step.
    let (shape, x, target, _, _) = inputs(17, 45);
    let config = StepConfig::new(0.7, 0xfeed).unwrap();
    let key = rng::key(config.seed());
    let noise: Vec<f32> = (0..shape.batch())
        .flat_map(|b| {
            (0..shape.dim()).map(move |d| rng::normal_quad(key, b as u32, 9, (d / 4) as u32)[d % 4])
        })
        .collect();
    let uniform: Vec<f32> = (0..shape.batch())
        .map(|b| rng::row_uniform(key, b as u32, 9))
        .collect();
    assert_eq!(
        step(&x, shape, &target, &config, 9).unwrap(),
        step_with_noise(&x, shape, &target, 0.7, &noise, &uniform).unwrap()
    );
}

#[test]
fn non_finite_rows_stay_put_and_never_accept() {
    let (shape, mut x, target, noise, _) = inputs(4, 6);
    x[6 + 2] = f32::NAN; // row 1
    x[18] = f32::INFINITY; // row 3
    let uniform = vec![0.0; 4]; // the most favourable uniform: accepts any finite log alpha > -23
    let out = step_with_noise(&x, shape, &target, 0.1, &noise, &uniform).unwrap();
    for row in [1, 3] {
        assert!(!out.accepted[row], "row {row}");
        let (got, want) = (&out.x_new[row * 6..row * 6 + 6], &x[row * 6..row * 6 + 6]);
        assert!(
            got.iter()
                .zip(want)
                .all(|(a, b)| a == b || (a.is_nan() && b.is_nan()))
        );
    }
    assert!(
        out.accepted[0] && out.accepted[2],
        "finite rows with u = 0 and small moves accept"
    );
}

#[test]
fn compare_accepts_the_reference_and_catches_each_kind_of_error() {
    let (shape, x, target, noise, uniform) = inputs(50, 9);
    let out = step_with_noise(&x, shape, &target, 0.3, &noise, &uniform).unwrap();
    let flags: Vec<u8> = out.accepted.iter().map(|&a| u8::from(a)).collect();
    let exact = out.compare(&out.x_new, &flags, 0.3).unwrap();
    assert_eq!(
        exact,
        Agreement {
            boundary_flips: 0,
            max_abs_diff: 0.0
        }
    );

    let mut unwritten = flags.clone();
    unwritten[7] = 0xAA;
    assert!(out.compare(&out.x_new, &unwritten, 0.3).is_err());
    let mut nan = out.x_new.clone();
    nan[100] = f32::NAN;
    assert!(out.compare(&nan, &flags, 0.3).is_err());
    let mut off = out.x_new.clone();
    off[5] += 1e-3;
    assert!(out.compare(&off, &flags, 0.3).is_err());
    // A difference below the absolute floor (5e-6 * 0.3) passes.
    let mut close = out.x_new.clone();
    close[5] += 1e-6;
    assert!(out.compare(&close, &flags, 0.3).is_ok());
    // A decision flipped far from the boundary fails.
    let far = (0..50)
        .find(|&r| (out.log_u[r] - out.log_alpha[r]).abs() > 0.1)
        .unwrap();
    let mut flipped = flags.clone();
    flipped[far] ^= 1;
    assert!(out.compare(&out.x_new, &flipped, 0.3).is_err());
}

#[test]
fn bad_inputs_are_errors() {
    let (shape, x, target, noise, uniform) = inputs(2, 3);
    let config = StepConfig::new(0.1, 1).unwrap();
    assert!(step(&x[..5], shape, &target, &config, 0).is_err());
    let other = Target::new(vec![0.0; 4], vec![1.0; 4]).unwrap();
    assert!(step(&x, shape, &other, &config, 0).is_err());
    assert!(step_with_noise(&x, shape, &target, 0.0, &noise, &uniform).is_err());
    assert!(step_with_noise(&x, shape, &target, 0.1, &noise[1..], &uniform).is_err());
}
