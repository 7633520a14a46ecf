//! The marginals of draws against a target's exact distribution, by formulas this project did
//! not write (`statrs`'s CDFs): a Kolmogorov–Smirnov test per dimension, and the variance where
//! it is estimable. Every target of [`TargetKind::ALL`] has its exact marginal here.

// Only the target test files (targets.rs, gpu_targets.rs) use these.
#![allow(dead_code)]

use fused_mh::{Shape, Target, TargetKind};
use rand::{Rng, SeedableRng};
use statrs::distribution::{ContinuousCDF, Normal, StudentsT};

/// Dimension `d`'s exact marginal CDF, and the excess kurtosis where the sample variance has
/// a finite variance (what its standard error needs).
fn marginal(target: &Target, d: usize) -> (Box<dyn Fn(f64) -> f64>, Option<f64>) {
    let (mu, sigma) = (f64::from(target.mu()[d]), f64::from(target.sigma()[d]));
    match target.kind() {
        TargetKind::Gaussian => {
            let n = Normal::new(mu, sigma).expect("a valid normal");
            (Box::new(move |v| n.cdf(v)), Some(0.0))
        }
        TargetKind::StudentT => {
            let df = f64::from(target.param("df").expect("a Student-t")[d]);
            let t = StudentsT::new(mu, sigma, df).expect("a valid t");
            (
                Box::new(move |v| t.cdf(v)),
                (df > 4.0).then(|| 6.0 / (df - 4.0)),
            )
        }
    }
}

/// A target of `kind` in `dim` dimensions, its parameters varying over the dimensions
/// (locations from -1 to 2, scales from 0.5 to 2, the Student-t's df cycling through 3, 6, 30
/// and 2.5), and chains started at `mu + sigma z` (z standard normal).
pub fn problem(kind: TargetKind, batch: usize, dim: usize, seed: u64) -> (Shape, Vec<f32>, Target) {
    let mut r = rand_xorshift::XorShiftRng::seed_from_u64(seed);
    let shape = Shape::new(batch, dim).expect("valid test shape");
    let cycle = |values: [f32; 4]| (0..dim).map(|d| values[d % 4]).collect::<Vec<f32>>();
    let params = kind
        .params()
        .iter()
        .map(|&name| match name {
            "mu" => cycle([0.5, -1.0, 2.0, 0.0]),
            "sigma" => cycle([1.0, 0.5, 2.0, 1.5]),
            "df" => cycle([3.0, 6.0, 30.0, 2.5]),
            other => panic!("no test values for parameter {other}"),
        })
        .collect::<Vec<_>>();
    let (mu, sigma) = (params[0].clone(), params[1].clone());
    let x = (0..shape.len())
        .map(|i| {
            let z: f32 = r.sample(rand_distr::StandardNormal);
            mu[i % dim] + sigma[i % dim] * z
        })
        .collect();
    (
        shape,
        x,
        Target::of_kind(kind, params).expect("valid target"),
    )
}

/// KS critical value at alpha = 1e-4 for `n` independent draws: `sqrt(-ln(alpha / 2) / 2) /
/// sqrt(n)` (the asymptotic Kolmogorov distribution), 2.22 / sqrt(n).
fn ks_critical(n: usize) -> f64 {
    (-(1e-4f64 / 2.0).ln() / 2.0).sqrt() / (n as f64).sqrt()
}

/// Checks the final states `x[batch, dim]` of independent chains, one draw each per dimension,
/// against the target's exact marginals:
///
/// - **KS**: the largest distance between the draws' empirical CDF and the exact CDF is below
///   the critical value at alpha = 1e-4 (a false alarm once in 10000 runs per dimension). Its
///   power at 8192 draws (critical 0.025): a Gaussian of the same scale in place of a t3 is
///   0.05 away in CDF (at 1.2 scales), a location off by a tenth of a scale 0.04: both fail.
///   With more draws the critical value falls as `1 / sqrt(n)`.
/// - **variance**, where the sample variance has a finite variance itself (the Gaussian; the
///   Student-t for `df > 4`): within 6 standard errors of the exact variance, the standard
///   error `var * sqrt((2 + excess kurtosis) / n)`.
pub fn check_marginals(x: &[f32], shape: Shape, target: &Target) -> Result<(), String> {
    let (batch, dim) = (shape.batch(), shape.dim());
    let moments = target.moments();
    let critical = ks_critical(batch);
    for d in 0..dim {
        let (cdf, excess_kurtosis) = marginal(target, d);
        let mut draws: Vec<f64> = (0..batch).map(|c| f64::from(x[c * dim + d])).collect();
        draws.sort_by(f64::total_cmp);
        let n = draws.len() as f64;
        let ks = draws
            .iter()
            .enumerate()
            .map(|(i, &v)| {
                let p = cdf(v);
                (p - i as f64 / n).abs().max((p - (i + 1) as f64 / n).abs())
            })
            .fold(0.0, f64::max);
        eprintln!(
            "  {} dim {d}: KS {ks:.4} (critical {critical:.4})",
            target.kind().name()
        );
        if ks > critical {
            return Err(format!(
                "dim {d}: KS distance {ks:.4} over the critical {critical:.4}"
            ));
        }
        if let ((Some(mean), Some(var)), Some(kurtosis)) = (moments[d], excess_kurtosis) {
            let got = draws.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / n;
            let se = var * ((2.0 + kurtosis) / n).sqrt();
            eprintln!("  dim {d}: variance {got:.4} (exact {var:.4}, se {se:.4})");
            if (got - var).abs() > 6.0 * se {
                return Err(format!(
                    "dim {d}: variance {got} against the exact {var} (se {se})"
                ));
            }
        }
    }
    Ok(())
}
