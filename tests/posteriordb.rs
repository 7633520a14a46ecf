//! Models against posteriordb's reference posteriors on the CPU, at a reduced size
//! (`support::posteriordb` has the cases and the checks).
//!
//! Every posterior runs with the same settings (the same chains, warm-up and steps; nothing
//! tuned to any of them). The logistic regression (wells, 3020 rows) takes 12 minutes of this
//! machine's 16 cores (float32 fused multiply-adds in software: the host build targets x86-64
//! without FMA), so it is ignored by `cargo test` and run by name:
//! `cargo test --test posteriordb -- --ignored`; the GPU tests (`gpu_models.rs`) run it.

use fused_mh::cpu::sample_model;
use fused_mh::kernel::model::{DenseGaussian, Factor, whitening};
use fused_mh::model_run::{ModelRun, Preconditioning};

mod support;

use support::posteriordb::{Machine, Posterior, SETTINGS, coordinate, json};

/// The run every posterior gets: the shared settings with 1/32 of the GPU tests' chains (the
/// CPU build's software fused multiply-adds make a chain-step cost ~1 µs per data row here).
const RUN: ModelRun = ModelRun {
    chains: 512,
    ..SETTINGS
};

fn check(posterior: Posterior) {
    if let Err(e) = posterior.check(&RUN, Machine::Cpu) {
        panic!("{e}");
    }
}

#[test]
fn sblri_blr() {
    check(Posterior::Sblri);
}

#[test]
fn kidiq_kidscore_momiq() {
    check(Posterior::Kidiq);
}

#[test]
fn earnings_logearn_height() {
    check(Posterior::Earnings);
}

#[test]
fn eight_schools_noncentered() {
    check(Posterior::EightSchools);
}

#[test]
#[ignore = "12 minutes on 16 cores: run with --ignored"]
fn wells_dist() {
    check(Posterior::Wells);
}

/// A dense Gaussian whose answer is exact: five coordinates with standard deviations from 0.01
/// to 100 and correlations 0.95^|i - j|. With the dense warm-up every mean is within 0.1 sd
/// and every sd within 10 % of the exact values (the tolerances of the posteriors above, the
/// same settings); the ESS per step of the worst coordinate with no preconditioning, a
/// diagonal one and the dense one (printed with `--nocapture`, in `bench/NOTES.md`) must grow
/// in that order, the dense at least 3x the diagonal (the correlations are what it removes).
#[test]
fn dense_gaussian_and_the_three_preconditionings() {
    let dim = 5;
    let sd = [0.01f64, 0.1, 1.0, 10.0, 100.0];
    let mut cov = vec![0.0f64; dim * dim];
    for i in 0..dim {
        for j in 0..dim {
            cov[i * dim + j] = 0.95f64.powi((i as i32 - j as i32).abs()) * sd[i] * sd[j];
        }
    }
    let factor: Vec<f32> = fused_mh::adapt::cholesky(&cov, dim)
        .expect("positive definite")
        .iter()
        .map(|&v| v as f32)
        .collect();
    let mean = [1.0f32, -1.0, 0.5, 20.0, -300.0];
    let mut w = vec![0.0f32; dim * dim];
    whitening(&factor, Factor::Covariance, &mut w).expect("a factor");
    let model = DenseGaussian::new(&mean, &w).expect("a model");
    let mut ess_per_step = Vec::new();
    for preconditioning in [
        Preconditioning::None,
        Preconditioning::Diagonal,
        Preconditioning::Dense,
    ] {
        let run = ModelRun {
            preconditioning,
            ..RUN
        };
        let sample = sample_model(&model, &run, None).expect("a run");
        let diagnostics = sample
            .diagnostics(run.superchain_size)
            .expect("diagnostics");
        let worst = diagnostics
            .ess
            .iter()
            .cloned()
            .fold(f64::INFINITY, f64::min);
        let per_step = worst / (run.chains as f64 * f64::from(run.steps));
        println!(
            "{preconditioning:?}: worst ESS {worst:.0}, {per_step:.5} per chain and step, acceptance {:.3}",
            sample.acceptance
        );
        ess_per_step.push(per_step);
        if preconditioning == Preconditioning::Dense {
            for d in 0..dim {
                let (_, m, s) = coordinate(&sample, d);
                assert!(
                    (m - f64::from(mean[d])).abs() < 0.1 * sd[d],
                    "x[{d}]: mean {m}"
                );
                assert!(
                    (s / sd[d] - 1.0).abs() < 0.1,
                    "x[{d}]: sd {s} against {}",
                    sd[d]
                );
            }
        }
    }
    assert!(
        ess_per_step[0] < ess_per_step[1] && 3.0 * ess_per_step[1] < ess_per_step[2],
        "{ess_per_step:?}"
    );
}

/// A run that has not converged says so: earnings with no warm-up and 200 steps from the
/// chains' starts (standard normals, far from beta[1] = 5.8 with sd 0.45). Its draws are wrong
/// (beta[1]'s mean more than 1 reference sd off) and its nested R-hat, on the same draws, is
/// above the 1.01 that runs call converged. (Measured: 13 sd off, R-hat 1.048. The chains all
/// travel alike from the starts, so only the split halves see the trend, and the margin is
/// smaller than the error.)
#[test]
fn an_unconverged_run_is_flagged() {
    let run = ModelRun {
        warmup: 0,
        steps: 200,
        ..RUN
    };
    let (sample, _) = Posterior::Earnings.sample(&run, Machine::Cpu);
    let reference = json(Posterior::Earnings.name(), "reference_summary.json");
    let r = &reference["params"]["beta[1]"];
    let (_, mean, _) = coordinate(&sample, 0);
    let off = (mean - r["mean"].as_f64().unwrap()).abs() / r["sd"].as_f64().unwrap();
    let rhat = sample
        .diagnostics(run.superchain_size)
        .expect("diagnostics")
        .nested_rhat[0];
    assert!(off > 1.0, "the premise: beta[1]'s mean is {off:.2} sd off");
    let threshold = fused_mh::diagnostics::RHAT_THRESHOLD;
    assert!(
        rhat > threshold,
        "nested R-hat {rhat:.4} on draws {off:.1} sd off"
    );
}
