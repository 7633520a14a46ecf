//! The posteriordb cases (`tests/posteriordb/`: the data and the summaries of 10,000 reference
//! draws, BSD-3) and the checks of a model run against them, for the CPU tests
//! (`posteriordb.rs`) and the GPU's (`gpu_models.rs`).
//!
//! Every parameter of a run must meet:
//!
//! - mean within 0.1 reference sd, 5/50/95 % quantiles within 0.1 reference sd;
//! - sd within 10 % of the reference's;
//! - nested R-hat (split superchains) below 1.01.
//!
//! The Monte Carlo error behind the tolerances: the check asserts an ESS of at least 10^4 per
//! parameter (the superchains' estimate), which puts the standard error of a mean at 0.01 sd,
//! of an sd at 0.7 %, and of a 5 % quantile at `sqrt(0.05 * 0.95 / 10^4) / phi(1.645) = 0.021`
//! sd; the reference's own 10,000 draws add as much again. The tolerances are 3.4 (the
//! quantiles) to 10 such errors combined.
#![allow(dead_code)] // each test file uses its part

use std::path::Path;

use fused_mh::kernel::model::{
    CoefficientPrior, HierarchicalNormal, LinearRegression, LogisticRegression, Model, ScalePrior,
};
use fused_mh::model_run::{ModelRun, ModelSample, Preconditioning};
use fused_mh::{Gpu, cpu};
use serde_json::Value;

/// The settings every posterior gets, on either machine (the chain count is each test
/// file's): the default warm-up with dense preconditioning, nothing tuned to any posterior.
pub const SETTINGS: ModelRun = ModelRun {
    chains: 16384,
    warmup: 2000,
    steps: 1000,
    thin: 10,
    seed: 2026,
    target_acceptance: 0.234,
    preconditioning: Preconditioning::Dense,
    superchain_size: 16,
};

/// Where a run runs.
#[derive(Clone, Copy)]
pub enum Machine<'g> {
    /// The CPU reference.
    Cpu,
    /// A GPU.
    Gpu(&'g Gpu),
}

impl Machine<'_> {
    /// Runs `run` of `model` here.
    pub fn sample<M: Model + Copy + Sync>(&self, model: &M, run: &ModelRun) -> ModelSample {
        match self {
            Machine::Cpu => cpu::sample_model(model, run, None).expect("a CPU run"),
            Machine::Gpu(gpu) => gpu.sample_model(model, run, None).expect("a GPU run"),
        }
    }
}

/// The posteriors with reference draws, and wells (reference from a long NumPyro run).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Posterior {
    /// sblri-blr: 100 rows, 5 coefficients with normal(0, 10) priors, sigma ~ half-normal(10).
    Sblri,
    /// kidiq-kidscore_momiq: kid_score on an intercept and mom_iq, flat coefficients,
    /// sigma ~ half-Cauchy(2.5).
    Kidiq,
    /// earnings-logearn_height: log earnings on an intercept and height, flat priors.
    Earnings,
    /// eight_schools-eight_schools_noncentered: the hierarchical normal model, normal(0, 5) on
    /// mu, half-Cauchy(5) on tau.
    EightSchools,
    /// wells_data-wells_dist: whether a household switched wells, logistic in an intercept and
    /// the distance to the nearest safe well, flat priors. posteriordb has no reference draws
    /// for it: `reference_summary.json` beside the data is a long NumPyro NUTS run
    /// (`bench/posteriordb/wells_reference.py`: 10 chains of 10,000 draws, float64, R-hat
    /// 1.0003).
    Wells,
}

impl Posterior {
    /// Every posterior.
    pub const ALL: [Posterior; 5] = [
        Posterior::Sblri,
        Posterior::Kidiq,
        Posterior::Earnings,
        Posterior::EightSchools,
        Posterior::Wells,
    ];

    /// Its posteriordb name (its folder).
    pub fn name(self) -> &'static str {
        match self {
            Posterior::Sblri => "sblri-blr",
            Posterior::Kidiq => "kidiq-kidscore_momiq",
            Posterior::Earnings => "earnings-logearn_height",
            Posterior::EightSchools => "eight_schools-eight_schools_noncentered",
            Posterior::Wells => "wells_data-wells_dist",
        }
    }

    /// Runs `run` on `machine`: the draws and the parameters' names.
    pub fn sample(self, run: &ModelRun, machine: Machine<'_>) -> (ModelSample, Vec<String>) {
        let data = json(self.name(), "data.json");
        let as_f32 = |v: &Value| -> Vec<f32> { floats(v).iter().map(|&x| x as f32).collect() };
        let betas = |k: usize| (1..=k).map(|j| format!("beta[{j}]"));
        match self {
            Posterior::Sblri | Posterior::Kidiq | Posterior::Earnings => {
                let (x, y, priors, sigma) = match self {
                    Posterior::Sblri => {
                        let x = data["X"].as_array().unwrap().iter().flat_map(floats);
                        let prior = CoefficientPrior::Normal {
                            loc: 0.0,
                            scale: 10.0,
                        };
                        let x = x.map(|v| v as f32).collect();
                        (
                            x,
                            as_f32(&data["y"]),
                            vec![prior; 5],
                            ScalePrior::HalfNormal { scale: 10.0 },
                        )
                    }
                    Posterior::Kidiq => {
                        let cauchy = ScalePrior::HalfStudentT {
                            df: 1.0,
                            scale: 2.5,
                        };
                        let flat = vec![CoefficientPrior::Flat; 2];
                        (
                            with_intercept(&data["mom_iq"]),
                            as_f32(&data["kid_score"]),
                            flat,
                            cauchy,
                        )
                    }
                    _ => {
                        let y = floats(&data["earn"])
                            .iter()
                            .map(|&v| v.ln() as f32)
                            .collect();
                        let flat = vec![CoefficientPrior::Flat; 2];
                        (with_intercept(&data["height"]), y, flat, ScalePrior::Flat)
                    }
                };
                let k = priors.len();
                let model = LinearRegression::new(&x, &y, k, &priors, sigma).expect("a model");
                let names = betas(k).chain(["sigma".into()]).collect();
                (machine.sample(&model, run), names)
            }
            Posterior::EightSchools => {
                let (y, sigma) = (as_f32(&data["y"]), as_f32(&data["sigma"]));
                let mu_prior = CoefficientPrior::Normal {
                    loc: 0.0,
                    scale: 5.0,
                };
                let tau_prior = ScalePrior::HalfStudentT {
                    df: 1.0,
                    scale: 5.0,
                };
                let model =
                    HierarchicalNormal::new(&y, &sigma, mu_prior, tau_prior).expect("a model");
                let names = (1..=8)
                    .map(|j| format!("theta[{j}]"))
                    .chain(["mu".into(), "tau".into()])
                    .collect();
                (machine.sample(&model, run), names)
            }
            Posterior::Wells => {
                let y = as_f32(&data["switched"]);
                let x = with_intercept(&data["dist"]);
                let flat = [CoefficientPrior::Flat; 2];
                let model = LogisticRegression::new(&x, &y, 2, &flat).expect("a model");
                (machine.sample(&model, run), betas(2).collect())
            }
        }
    }

    /// Runs `run` on `machine` and checks every parameter (see the module documentation).
    pub fn check(self, run: &ModelRun, machine: Machine<'_>) -> Result<(), String> {
        let (sample, names) = self.sample(run, machine);
        let names: Vec<&str> = names.iter().map(String::as_str).collect();
        check(self.name(), &names, &sample, run)
    }
}

/// The design `[1, v_n]` of a regression on an intercept and one column `v`.
fn with_intercept(column: &Value) -> Vec<f32> {
    floats(column)
        .into_iter()
        .flat_map(|v| [1.0, v as f32])
        .collect()
}

/// The data folder: `tests/posteriordb` under the working directory where there is one (the
/// bundled test binaries run from a copy of the repository elsewhere), else under the crate.
fn data_folder() -> std::path::PathBuf {
    let here = Path::new("tests/posteriordb");
    if here.is_dir() {
        return here.to_path_buf();
    }
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/posteriordb")
}

/// `file` of `posterior`'s folder, parsed.
pub fn json(posterior: &str, file: &str) -> Value {
    let path = data_folder().join(posterior).join(file);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

pub fn floats(v: &Value) -> Vec<f64> {
    v.as_array()
        .expect("an array")
        .iter()
        .map(|x| x.as_f64().expect("a number"))
        .collect()
}

/// Quantile `p` of sorted values (linear interpolation, NumPy's default).
fn quantile(sorted: &[f64], p: f64) -> f64 {
    let at = p * (sorted.len() - 1) as f64;
    let (i, f) = (at.floor() as usize, at.fract());
    sorted[i] + f * (sorted[(i + 1).min(sorted.len() - 1)] - sorted[i])
}

/// Coordinate `d` of every kept draw, and their mean and sd (`n - 1`).
pub fn coordinate(sample: &ModelSample, d: usize) -> (Vec<f64>, f64, f64) {
    let values: Vec<f64> = sample.draws[d..]
        .iter()
        .step_by(sample.dim)
        .map(|&v| f64::from(v))
        .collect();
    let (mean, sd) = mean_sd(&values);
    (values, mean, sd)
}

/// The mean and sd (`n - 1`) of `values`.
pub fn mean_sd(values: &[f64]) -> (f64, f64) {
    let n = values.len() as f64;
    let mean = values.iter().sum::<f64>() / n;
    let sd = (values.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0)).sqrt();
    (mean, sd)
}

/// Checks a run's draws of parameters `names` against `posterior`'s reference summary.
pub fn check(
    posterior: &str,
    names: &[&str],
    sample: &ModelSample,
    run: &ModelRun,
) -> Result<(), String> {
    let reference = json(posterior, "reference_summary.json");
    let diagnostics = sample
        .diagnostics(run.superchain_size)
        .map_err(|e| e.to_string())?;
    let worst = |v: &[f64], f: fn(f64, f64) -> f64, start| v.iter().copied().fold(start, f);
    eprintln!(
        "{posterior}: {} chains, acceptance {:.3}, step size {:.3}, nested R-hat at most {:.4}, \
         ESS at least {:.0}",
        run.chains,
        sample.acceptance,
        sample.step_size,
        worst(&diagnostics.nested_rhat, f64::max, 0.0),
        worst(&diagnostics.ess, f64::min, f64::INFINITY),
    );
    for (d, name) in names.iter().enumerate() {
        let r = &reference["params"][*name];
        let (ref_mean, ref_sd) = (r["mean"].as_f64().unwrap(), r["sd"].as_f64().unwrap());
        let (mut values, m, sd) = coordinate(sample, d);
        values.sort_by(f64::total_cmp);
        let what = format!("{posterior} {name}");
        let (rhat, ess) = (diagnostics.nested_rhat[d], diagnostics.ess[d]);
        if ess < 1e4 {
            return Err(format!(
                "{what}: ESS {ess:.0} below the 10^4 the tolerances assume"
            ));
        }
        if rhat >= 1.01 {
            return Err(format!("{what}: nested R-hat {rhat:.4}"));
        }
        if (m - ref_mean).abs() >= 0.1 * ref_sd {
            return Err(format!("{what}: mean {m} against {ref_mean} (sd {ref_sd})"));
        }
        if (sd / ref_sd - 1.0).abs() >= 0.1 {
            return Err(format!("{what}: sd {sd} against {ref_sd}"));
        }
        for (p, key) in [(0.05, "q05"), (0.5, "q50"), (0.95, "q95")] {
            let (got, want) = (quantile(&values, p), r[key].as_f64().unwrap());
            if (got - want).abs() >= 0.1 * ref_sd {
                return Err(format!("{what}: {key} {got} against {want}"));
            }
        }
    }
    Ok(())
}
