//! `host sample`: a model with data (`fused_mh::kernel::model`) sampled on the GPU (or the CPU
//! reference with `--cpu`), its data from `.npy` files and its priors from flags; the draws on
//! the parameters' own scale and a summary with their names into a new directory.
//!
//! - `draws.npy`: `[chains, draws, params]` float32, ArviZ's `(chain, draw, ...)` order.
//! - `summary.json`: per parameter (`beta[1]`, ..., `sigma`) its mean, sd, 5/50/95 %
//!   quantiles, nested R-hat and ESS (split superchains, `ModelSample::diagnostics`), whether
//!   every nested R-hat is below 1.01, the acceptance, the frozen step size and proposal
//!   factor, the data files read (paths and digests), the priors, the step counter where the
//!   run started and stopped, and the seconds of sampling and of the whole process.
//! - `states.npy`: `[chains, params]` float32, the final states on the unconstrained scale:
//!   where `--resume DIR` continues ([`resume`]).
//!
//! Why not `host run --target linreg`: `run`'s options (--mu, --sigma, --df, --init,
//! --resume, --until-rhat, ...) are those of the separable targets; a command of its own keeps
//! every option meaningful, and refuses those of the other models (`SampleArgs::check_options`).

mod args;
mod resume;

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Instant;

use anyhow::{Context, Result, anyhow, bail};
use fused_mh::kernel::model::Factor;
use fused_mh::model_inputs::{Matrix, ModelInputs};
use fused_mh::model_run::{Continuation, ModelRun, ModelSample};
use fused_mh::{Error, Gpu};
use serde_json::json;

use args::ModelName;
pub use args::SampleArgs;
use resume::{RecordedInput, Resumed};

use crate::npy;
use crate::outdir::OutputDir;

/// Kept steps: every 10th (`--thin`).
const DEFAULT_THIN: u32 = 10;

/// Runs `host sample` (see the module documentation).
pub fn run(mut args: SampleArgs, started: Instant) -> Result<()> {
    let resumed = args.resume.as_deref().map(Resumed::open).transpose()?;
    if let Some(resumed) = &resumed {
        resumed.apply(&mut args)?;
    }
    let model = args.model()?;
    args.check_options()?;
    let run = ModelRun {
        chains: args.chains,
        warmup: args.warmup,
        steps: args.steps,
        thin: args.thin.unwrap_or(DEFAULT_THIN),
        seed: args.seed,
        target_acceptance: args.target_accept,
        preconditioning: args.precondition.into(),
        superchain_size: args.superchain_size,
    };
    let states_read = resumed.as_ref().map(|r| r.dir().join("states.npy"));
    let inputs: Vec<&Path> = args
        .data_files()
        .into_iter()
        .filter_map(|(_, path)| path.as_deref())
        .chain(states_read.as_deref())
        .collect();
    let recorded = record_inputs(&args)?;
    if let Some(resumed) = &resumed {
        resumed.check_inputs(&args, &recorded)?;
    }
    let out = OutputDir::prepare(&args.out, false, &inputs)?;
    let gpu = if args.cpu {
        None
    } else {
        Some(Gpu::open(0).context("--cpu runs without a GPU")?)
    };
    let sampling = Instant::now();
    let from = resumed.as_ref().map(|r| &r.from);
    let (sample, names) = sample_model(&args, model, &run, from, gpu.as_ref(), out.parent())?;
    let sampling_s = sampling.elapsed().as_secs_f64();
    let diagnostics = sample
        .diagnostics(run.superchain_size)
        .map_err(|e| anyhow!("the diagnostics: {e} (give --steps at least 4 x --thin)"))?;
    let (chains, kept, dim) = (sample.chains, sample.kept, sample.dim);
    // [kept, chains, dim] -> [chains, kept, dim].
    let mut by_chain = Vec::new();
    by_chain
        .try_reserve_exact(sample.draws.len())
        .context("no memory for the draws")?;
    for c in 0..chains {
        for t in 0..kept {
            by_chain.extend_from_slice(&sample.draws[(t * chains + c) * dim..][..dim]);
        }
    }
    let draws_digest = npy::write(&out.path("draws.npy"), &[chains, kept, dim], &by_chain)?;
    let states_digest = npy::write(&out.path("states.npy"), &[chains, dim], &sample.states)?;
    let params = summarize(&by_chain, &names, &diagnostics);
    let converged = diagnostics
        .nested_rhat
        .iter()
        .all(|&r| r < fused_mh::diagnostics::RHAT_THRESHOLD);
    let precondition = match &resumed {
        Some(r) => r.precondition().to_string(),
        None => format!("{:?}", run.preconditioning).to_lowercase(),
    };
    let priors: serde_json::Map<String, serde_json::Value> = args
        .priors(model)
        .into_iter()
        .map(|(name, text)| (name.to_string(), json!(text)))
        .collect();
    let files = ["draws.npy", "states.npy", "summary.json"];
    let summary = json!({
        "written_by": resume::WRITTEN_BY,
        "command": "sample",
        "model": args::name(model),
        "device": gpu.as_ref().map_or("cpu".to_string(), |g| g.name().to_string()),
        "chains": chains, "warmup": run.warmup, "steps": run.steps, "thin": run.thin,
        "seed": run.seed, "superchain_size": run.superchain_size,
        "precondition": precondition,
        "priors": priors,
        "inputs": recorded,
        "resumed_from": resumed.as_ref().map(|r| r.dir().display().to_string()),
        "first_step": from.map_or(0, |f| f.first_step),
        "next_step": sample.next_step,
        "names": names,
        "params": params,
        "converged": converged,
        "acceptance": sample.acceptance,
        "step_size": sample.step_size,
        "factor": sample.factor,
        "sampling_seconds": sampling_s,
        "process_seconds": started.elapsed().as_secs_f64(),
        "files": files,
        "digests": {"draws.npy": draws_digest, "states.npy": states_digest},
    });
    out.write_text("summary.json", &serde_json::to_string_pretty(&summary)?)?;
    let dest = out.commit(&files)?;
    crate::note!(
        "{} chains x {kept} draws of {dim} parameters in {sampling_s:.3} s; nested R-hat {} 1.01; \
         wrote {}",
        chains,
        if converged { "below" } else { "NOT below" },
        dest.display()
    );
    Ok(())
}

/// Each parameter's mean, sd, 5/50/95 % quantiles, nested R-hat and ESS, by name, from the
/// draws `[chains, kept, dim]`.
fn summarize(
    by_chain: &[f32],
    names: &[String],
    diagnostics: &fused_mh::Diagnostics,
) -> serde_json::Map<String, serde_json::Value> {
    let dim = names.len();
    let mut params = serde_json::Map::new();
    for (d, name) in names.iter().enumerate() {
        let mut values: Vec<f64> = by_chain[d..]
            .iter()
            .step_by(dim)
            .map(|&v| f64::from(v))
            .collect();
        let n = values.len() as f64;
        let mean = values.iter().sum::<f64>() / n;
        let sd = (values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1.0)).sqrt();
        values.sort_by(f64::total_cmp);
        let q = |p: f64| values[((p * (n - 1.0)).round() as usize).min(values.len() - 1)];
        params.insert(
            name.clone(),
            json!({"mean": mean, "sd": sd, "q05": q(0.05), "q50": q(0.5), "q95": q(0.95),
                   "nested_rhat": diagnostics.nested_rhat[d], "ess": diagnostics.ess[d]}),
        );
    }
    params
}

/// The data files the run reads, by name: each one's absolute path and BLAKE3 digest (what a
/// `--resume` of this run checks).
fn record_inputs(args: &SampleArgs) -> Result<BTreeMap<&'static str, RecordedInput>> {
    let mut recorded = BTreeMap::new();
    for (name, path) in args.data_files() {
        let Some(path) = path else { continue };
        let shown = format!("{} {}", resume::flag(name), path.display());
        let absolute = std::path::absolute(path).with_context(|| shown.clone())?;
        if absolute.to_str().is_none() {
            bail!("{shown}: the path is not UTF-8, which summary.json cannot record");
        }
        let blake3 = npy::digest(path).with_context(|| shown.clone())?;
        recorded.insert(
            name,
            RecordedInput {
                path: absolute,
                blake3,
            },
        );
    }
    Ok(recorded)
}

/// A `.npy` file's data, checked to have `dims` dimensions (`option` names the flag).
fn read(option: &str, path: &Option<std::path::PathBuf>, dims: usize) -> Result<npy::Array> {
    let path = path
        .as_ref()
        .ok_or_else(|| anyhow!("{option} FILE is needed"))?;
    let array = npy::read_f32(path).with_context(|| format!("{option} {}", path.display()))?;
    if array.shape.len() != dims {
        bail!(
            "{option} {}: shape {:?}, expected {dims} dimensions",
            path.display(),
            array.shape
        );
    }
    Ok(array)
}

/// Builds the model from the options, checks that its draws fit in host memory and its files
/// in the disk space under `out_parent` (the `--out` directory's parent), and runs it
/// (`fused_mh::model_inputs`): the draws and the parameters' names. A refused input is
/// reported by its flag.
fn sample_model(
    args: &SampleArgs,
    model: ModelName,
    run: &ModelRun,
    from: Option<&Continuation>,
    gpu: Option<&Gpu>,
    out_parent: &Path,
) -> Result<(ModelSample, Vec<String>)> {
    let (x, y, se, mean);
    let inputs = match model {
        ModelName::Linreg | ModelName::Logreg => {
            (x, y) = (read("--x", &args.x, 2)?, read("--y", &args.y, 1)?);
            if model == ModelName::Linreg {
                ModelInputs::LinearRegression {
                    x: matrix(&x),
                    y: &y.data,
                    beta_prior: &args.beta_prior,
                    sigma_prior: &args.sigma_prior,
                }
            } else {
                ModelInputs::LogisticRegression {
                    x: matrix(&x),
                    y: &y.data,
                    beta_prior: &args.beta_prior,
                }
            }
        }
        ModelName::HierNormal => {
            (y, se) = (read("--y", &args.y, 1)?, read("--se", &args.se, 1)?);
            ModelInputs::HierarchicalNormal {
                y: &y.data,
                se: &se.data,
                mu_prior: &args.mu_prior,
                tau_prior: &args.tau_prior,
            }
        }
        ModelName::DenseGaussian => {
            let (option, path, of) = match (&args.cov_factor, &args.prec_factor) {
                (Some(_), _) => ("--cov-factor", &args.cov_factor, Factor::Covariance),
                (None, Some(_)) => ("--prec-factor", &args.prec_factor, Factor::Precision),
                (None, None) => bail!("--model dense-gaussian needs --cov-factor or --prec-factor"),
            };
            (mean, x) = (read("--mean", &args.mean, 1)?, read(option, path, 2)?);
            ModelInputs::DenseGaussian {
                mean: &mean.data,
                factor: matrix(&x),
                of,
            }
        }
    };
    crate::budget::model_sample(run, inputs.dim()).check_host()?;
    crate::budget::model_sample_files(run, inputs.dim())
        .check_disk(out_parent)
        .with_context(|| format!("--out {}", args.out.display()))?;
    match inputs.sample(run, from, gpu) {
        Ok(named) => Ok((named.sample, named.names)),
        Err(Error::BadModelInput { input, why }) => {
            bail!("--{}: {why}", input.name().replace('_', "-"))
        }
        Err(e) => Err(e.into()),
    }
}

/// A two-dimensional `.npy` array as a matrix.
fn matrix(a: &npy::Array) -> Matrix<'_> {
    Matrix {
        data: &a.data,
        rows: a.shape[0],
        cols: a.shape[1],
    }
}
