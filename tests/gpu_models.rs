//! Models with data on a real GPU: the model kernel's chains against the CPU reference's, and
//! every posteriordb case at full size (`support::posteriordb`). A `harness = false` test like
//! `gpu.rs`: without a GPU every test reports ignored.

use std::process::ExitCode;

use fused_mh::Gpu;
use fused_mh::kernel::model::{
    CoefficientPrior, DenseGaussian, Factor, LinearRegression, LogisticRegression, Model,
    ScalePrior, whitening,
};
use fused_mh::model_run::{ModelRun, ModelSample};
use libtest_mimic::Failed;

mod support;

use rand::Rng;
use support::posteriordb::{Machine, Posterior, SETTINGS, coordinate};
use support::trials::GpuTrials;

/// The full-size run every posterior gets on the GPU: the shared settings (16384 chains).
const RUN: ModelRun = SETTINGS;

/// A short run with two adapted windows, for the CPU against the GPU.
const SHORT: ModelRun = ModelRun {
    chains: 256,
    warmup: 100,
    steps: 100,
    thin: 1,
    ..RUN
};

/// The GPU's draws against the CPU's for one run: every chain whose draws all agree within
/// `1e-3` of the parameter's spread (its sd over every draw) counts as matching, and at least
/// 97 % of the chains must. Why not all, nor to the bit: the GPU's `sin` and `cos` (the
/// normals) differ from the CPU's by an ulp or two, so the chains part by ulps from the first
/// step (far below the tolerance over 200 steps), and a chain whose `-2 log alpha` lands within
/// those ulps of its threshold decides the other way once and then follows another path
/// (measured: a few chains in 256).
fn compare(gpu: &ModelSample, cpu: &ModelSample, chains: usize) -> Result<(), Failed> {
    if gpu.draws.len() != cpu.draws.len() || gpu.factor.len() != cpu.factor.len() {
        return Err("the runs differ in shape".into());
    }
    let dim = cpu.dim;
    let sd: Vec<f64> = (0..dim).map(|d| coordinate(cpu, d).2).collect();
    let matching = (0..chains)
        .filter(|&c| {
            (0..cpu.kept).all(|t| {
                (0..dim).all(|d| {
                    let at = (t * chains + c) * dim + d;
                    let (g, w) = (f64::from(gpu.draws[at]), f64::from(cpu.draws[at]));
                    (g - w).abs() <= 1e-3 * sd[d]
                })
            })
        })
        .count();
    eprintln!(
        "{matching} of {chains} chains match; acceptance {:.4} / {:.4}, step size {} / {}",
        gpu.acceptance, cpu.acceptance, gpu.step_size, cpu.step_size
    );
    if (matching as f64) < 0.97 * chains as f64 {
        return Err(format!("only {matching} of {chains} chains match the CPU's").into());
    }
    Ok(())
}

/// A posterior's short run on both machines.
fn posterior_matches_cpu(posterior: Posterior) -> Result<(), Failed> {
    let gpu = Gpu::open(0)?;
    let (on_gpu, _) = posterior.sample(&SHORT, Machine::Gpu(&gpu));
    let (on_cpu, _) = posterior.sample(&SHORT, Machine::Cpu);
    compare(&on_gpu, &on_cpu, SHORT.chains)
}

/// The correlated Gaussian's mean, sds and whitening matrix.
type CorrelatedGaussian = ([f32; 6], [f64; 6], Vec<f32>);

/// A correlated 6-d Gaussian (sds 0.1 to 30, correlations 0.9^|i - j|; dim not a multiple
/// of 4): its mean, sds and model.
fn correlated_gaussian() -> Result<CorrelatedGaussian, Failed> {
    let dim = 6;
    let sd = [0.1f64, 0.3, 1.0, 3.0, 10.0, 30.0];
    let cov: Vec<f64> = (0..dim * dim)
        .map(|e| {
            let (i, j) = (e / dim, e % dim);
            0.9f64.powi((i as i32 - j as i32).abs()) * sd[i] * sd[j]
        })
        .collect();
    let factor: Vec<f32> = fused_mh::adapt::cholesky(&cov, dim)
        .ok_or("not positive definite")?
        .iter()
        .map(|&v| v as f32)
        .collect();
    let mut w = vec![0.0f32; dim * dim];
    whitening(&factor, Factor::Covariance, &mut w).map_err(|e| format!("{e:?}"))?;
    let mean = [1.0f32, -2.0, 0.0, 5.0, -10.0, 100.0];
    Ok((mean, sd, w))
}

/// The correlated Gaussian's short run on both machines.
fn dense_gaussian_matches_cpu() -> Result<(), Failed> {
    let (mean, _, w) = correlated_gaussian()?;
    let model = DenseGaussian::new(&mean, &w).map_err(|e| format!("{e:?}"))?;
    let gpu = Gpu::open(0)?;
    compare(
        &gpu.sample_model(&model, &SHORT, None)?,
        &fused_mh::cpu::sample_model(&model, &SHORT, None)?,
        SHORT.chains,
    )
}

/// The correlated Gaussian with dense preconditioning on the GPU at full size: within the
/// posteriordb tolerances of the exact means and sds.
fn dense_gaussian_is_exact() -> Result<(), Failed> {
    let (mean, sd, w) = correlated_gaussian()?;
    let model = DenseGaussian::new(&mean, &w).map_err(|e| format!("{e:?}"))?;
    let full = Gpu::open(0)?.sample_model(&model, &RUN, None)?;
    for d in 0..model.dim() {
        let (_, m, s) = coordinate(&full, d);
        if (m - f64::from(mean[d])).abs() >= 0.1 * sd[d] || (s / sd[d] - 1.0).abs() >= 0.1 {
            return Err(
                format!("x[{d}]: mean {m}, sd {s} against {} and {}", mean[d], sd[d]).into(),
            );
        }
    }
    Ok(())
}

/// A regression of `k` columns on 777 rows (a count that leaves the lanes different remainders
/// after their groups of rows), its data drawn from a seeded generator: covariates in
/// [-1, 1] with an intercept, coefficients in [-1, 1], outcomes from the model. Normal(0, 5)
/// priors, so the posterior is proper for any draw.
fn synthetic_data(k: usize, logistic: bool) -> (Vec<f32>, Vec<f32>) {
    let mut r = support::problems::rng(k as u64);
    let rows = 777;
    let beta: Vec<f32> = (0..k).map(|_| r.random_range(-1.0..1.0)).collect();
    let x: Vec<f32> = (0..rows * k)
        .map(|e| {
            if e % k == 0 {
                1.0
            } else {
                r.random_range(-1.0..1.0)
            }
        })
        .collect();
    let y = x
        .chunks_exact(k)
        .map(|row| {
            let eta: f32 = row.iter().zip(&beta).map(|(a, b)| a * b).sum();
            match logistic {
                true => f32::from(r.random::<f32>() < 1.0 / (1.0 + (-eta).exp())),
                false => eta + 0.5 * r.random_range(-1.0f32..1.0),
            }
        })
        .collect();
    (x, y)
}

/// A synthetic regression's short run on both machines: `k` from the loops compiled for their
/// column count (3) and the general one (12, over `FIXED_COLUMNS`).
fn regression_matches_cpu(k: usize, logistic: bool) -> Result<(), Failed> {
    let (x, y) = synthetic_data(k, logistic);
    let prior = vec![
        CoefficientPrior::Normal {
            loc: 0.0,
            scale: 5.0
        };
        k
    ];
    let gpu = Gpu::open(0)?;
    let bad = |e| format!("{e:?}");
    let (on_gpu, on_cpu) = if logistic {
        let model = LogisticRegression::new(&x, &y, k, &prior).map_err(bad)?;
        (
            gpu.sample_model(&model, &SHORT, None)?,
            fused_mh::cpu::sample_model(&model, &SHORT, None)?,
        )
    } else {
        let sigma = ScalePrior::HalfNormal { scale: 2.0 };
        let model = LinearRegression::new(&x, &y, k, &prior, sigma).map_err(bad)?;
        (
            gpu.sample_model(&model, &SHORT, None)?,
            fused_mh::cpu::sample_model(&model, &SHORT, None)?,
        )
    };
    compare(&on_gpu, &on_cpu, SHORT.chains)
}

fn main() -> ExitCode {
    let mut trials = GpuTrials::new("GPU model tests");
    trials.add("dense_gaussian_matches_cpu", dense_gaussian_matches_cpu);
    trials.add("dense_gaussian_is_exact", dense_gaussian_is_exact);
    for (k, logistic) in [(3, false), (12, false), (3, true), (12, true)] {
        let name = if logistic { "logreg" } else { "linreg" };
        trials.add(format!("regression_matches_cpu::{name}_k{k}"), move || {
            regression_matches_cpu(k, logistic)
        });
    }
    for posterior in Posterior::ALL {
        trials.add(format!("matches_cpu::{}", posterior.name()), move || {
            posterior_matches_cpu(posterior)
        });
        trials.add(format!("cpu_size::{}", posterior.name()), move || {
            let gpu = Gpu::open(0)?;
            let run = ModelRun { chains: 512, ..RUN };
            Ok(posterior.check(&run, Machine::Gpu(&gpu))?)
        });
        trials.add(format!("posteriordb::{}", posterior.name()), move || {
            let gpu = Gpu::open(0)?;
            Ok(posterior.check(&RUN, Machine::Gpu(&gpu))?)
        });
    }
    trials.run()
}
