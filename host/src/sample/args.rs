//! The options of `host sample`, as clap parses them, and the priors' syntax.

use std::path::PathBuf;

use anyhow::{Result, anyhow, bail};
use clap::{Args, ValueEnum};
use fused_mh::model_run::Preconditioning;

/// The model with data to sample.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum ModelName {
    /// Linear regression `y ~ normal(X beta, sigma)`: --x, --y, --beta-prior, --sigma-prior.
    Linreg,
    /// Logistic regression `y ~ Bernoulli(logit^-1(X beta))`: --x, --y (0 or 1), --beta-prior.
    Logreg,
    /// The non-centred hierarchical normal model (eight schools): --y, --se, --mu-prior,
    /// --tau-prior.
    HierNormal,
    /// The dense Gaussian N(m, Sigma): --mean, and --cov-factor or --prec-factor.
    DenseGaussian,
}

/// The warm-up's proposal shape.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum PreconditionName {
    /// One step size for every parameter.
    None,
    /// A scale per parameter.
    Diagonal,
    /// The Cholesky factor of the pooled covariance.
    Dense,
}

impl From<PreconditionName> for Preconditioning {
    fn from(p: PreconditionName) -> Self {
        match p {
            PreconditionName::None => Preconditioning::None,
            PreconditionName::Diagonal => Preconditioning::Diagonal,
            PreconditionName::Dense => Preconditioning::Dense,
        }
    }
}

/// Options of `host sample`.
#[derive(Args, Debug, Clone)]
pub struct SampleArgs {
    /// The model (with --resume: the resumed run's).
    #[arg(long, value_enum, required_unless_present = "resume")]
    pub(crate) model: Option<ModelName>,
    /// The design matrix `[N, K]` (.npy, float32 or float64; the columns as given: add a column
    /// of ones for an intercept). linreg, logreg.
    #[arg(long)]
    pub(crate) x: Option<PathBuf>,
    /// The outcomes `[N]` (.npy): linreg, logreg (0 or 1), hier-normal (one per group).
    #[arg(long)]
    pub(crate) y: Option<PathBuf>,
    /// The groups' known standard errors `[J]` (.npy, > 0). hier-normal.
    #[arg(long)]
    pub(crate) se: Option<PathBuf>,
    /// The coefficients' prior: `flat`, `normal:LOC,SCALE` or `student-t:DF,LOC,SCALE`, one
    /// for every coefficient or K of them separated by `;`. linreg, logreg.
    #[arg(long, default_value = "flat")]
    pub(crate) beta_prior: String,
    /// sigma's prior: `flat`, `half-normal:SCALE`, `half-cauchy:SCALE` or
    /// `half-t:DF,SCALE`. linreg.
    #[arg(long, default_value = "flat")]
    pub(crate) sigma_prior: String,
    /// mu's prior (as one coefficient's). hier-normal.
    #[arg(long, default_value = "normal:0,5")]
    pub(crate) mu_prior: String,
    /// tau's prior (as sigma's). hier-normal.
    #[arg(long, default_value = "half-cauchy:5")]
    pub(crate) tau_prior: String,
    /// The mean `[dim]` (.npy). dense-gaussian.
    #[arg(long)]
    pub(crate) mean: Option<PathBuf>,
    /// The Cholesky factor `[dim, dim]` of the covariance (.npy, lower triangle read).
    /// dense-gaussian.
    #[arg(long, conflicts_with = "prec_factor")]
    pub(crate) cov_factor: Option<PathBuf>,
    /// The Cholesky factor `[dim, dim]` of the precision (.npy, lower triangle read).
    /// dense-gaussian.
    #[arg(long)]
    pub(crate) prec_factor: Option<PathBuf>,
    /// Chains.
    #[arg(long, default_value_t = 16384)]
    pub(crate) chains: usize,
    /// Warm-up steps (a multiple of 50): step sizes and the proposal's shape adapt.
    #[arg(long, default_value_t = 2000)]
    pub(crate) warmup: u32,
    /// Sampling steps after the warm-up.
    #[arg(long, default_value_t = 1000)]
    pub(crate) steps: u32,
    /// Keep every THIN-th sampling step [default: 10; with --resume: the resumed run's].
    #[arg(long)]
    pub(crate) thin: Option<u32>,
    /// Seed of the random numbers and the starts.
    #[arg(long, default_value_t = 0)]
    pub(crate) seed: u64,
    /// The acceptance rate the warm-up aims at.
    #[arg(long, default_value_t = 0.234)]
    pub(crate) target_accept: f64,
    /// The proposal's shape the warm-up adapts.
    #[arg(long, value_enum, default_value = "dense")]
    pub(crate) precondition: PreconditionName,
    /// Chains per superchain (they start from one point), for nested R-hat.
    #[arg(long, default_value_t = 16)]
    pub(crate) superchain_size: usize,
    /// Run on the CPU reference instead of the GPU.
    #[arg(long)]
    pub(crate) cpu: bool,
    /// Continue the run in DIR (an earlier `sample`'s output): its chains from their final
    /// states (`states.npy`), with its frozen step size and proposal factor, its random stream
    /// from where it stopped, no warm-up; --steps more steps. The model, its priors, the chains,
    /// the seed and the superchains are the run's (those options are refused), and so is
    /// --thin unless given; its data files are read from where it read them, or from --x,
    /// --y, ... if given, and must be the same data (their BLAKE3 digests are in its
    /// summary.json).
    #[arg(long, value_name = "DIR", conflicts_with_all = [
        "model", "beta_prior", "sigma_prior", "mu_prior", "tau_prior", "chains", "warmup",
        "seed", "target_accept", "precondition", "superchain_size",
    ])]
    pub(crate) resume: Option<PathBuf>,
    /// The output directory (new): summary.json, draws.npy `[chains, draws, params]` and
    /// states.npy `[chains, params]` (the final states, unconstrained: what --resume reads).
    #[arg(long)]
    pub(crate) out: PathBuf,
}

impl SampleArgs {
    /// Refuses the options that do not belong to the chosen model (given with a value other
    /// than their default, or a file).
    pub fn check_options(&self) -> Result<()> {
        use ModelName::*;
        let model = self.model()?;
        let uses = |models: &[ModelName]| models.contains(&model);
        let files = [
            ("--x", self.x.is_some(), uses(&[Linreg, Logreg])),
            ("--y", self.y.is_some(), uses(&[Linreg, Logreg, HierNormal])),
            ("--se", self.se.is_some(), uses(&[HierNormal])),
            ("--mean", self.mean.is_some(), uses(&[DenseGaussian])),
            (
                "--cov-factor",
                self.cov_factor.is_some(),
                uses(&[DenseGaussian]),
            ),
            (
                "--prec-factor",
                self.prec_factor.is_some(),
                uses(&[DenseGaussian]),
            ),
            (
                "--beta-prior",
                self.beta_prior != "flat",
                uses(&[Linreg, Logreg]),
            ),
            ("--sigma-prior", self.sigma_prior != "flat", uses(&[Linreg])),
            (
                "--mu-prior",
                self.mu_prior != "normal:0,5",
                uses(&[HierNormal]),
            ),
            (
                "--tau-prior",
                self.tau_prior != "half-cauchy:5",
                uses(&[HierNormal]),
            ),
        ];
        for (option, given, used) in files {
            if given && !used {
                bail!("{option} is not an option of --model {}", name(model));
            }
        }
        Ok(())
    }

    /// The data files' options by their names in the summary (`x`, `cov_factor`, ...).
    pub fn data_files(&self) -> [(&'static str, &Option<PathBuf>); 6] {
        [
            ("x", &self.x),
            ("y", &self.y),
            ("se", &self.se),
            ("mean", &self.mean),
            ("cov_factor", &self.cov_factor),
            ("prec_factor", &self.prec_factor),
        ]
    }

    /// As [`SampleArgs::data_files`], to fill in.
    pub fn data_files_mut(&mut self) -> [(&'static str, &mut Option<PathBuf>); 6] {
        [
            ("x", &mut self.x),
            ("y", &mut self.y),
            ("se", &mut self.se),
            ("mean", &mut self.mean),
            ("cov_factor", &mut self.cov_factor),
            ("prec_factor", &mut self.prec_factor),
        ]
    }

    /// The priors' options of `model` by name, with their text.
    pub fn priors(&self, model: ModelName) -> Vec<(&'static str, &str)> {
        match model {
            ModelName::Linreg => vec![
                ("beta_prior", self.beta_prior.as_str()),
                ("sigma_prior", self.sigma_prior.as_str()),
            ],
            ModelName::Logreg => vec![("beta_prior", self.beta_prior.as_str())],
            ModelName::HierNormal => vec![
                ("mu_prior", self.mu_prior.as_str()),
                ("tau_prior", self.tau_prior.as_str()),
            ],
            ModelName::DenseGaussian => vec![],
        }
    }

    /// The model: `--model`, or the resumed run's (filled in by `Resumed::apply`).
    pub fn model(&self) -> Result<ModelName> {
        self.model
            .ok_or_else(|| anyhow!("--model is needed (or --resume DIR)"))
    }
}

/// A model's name as the command line spells it.
pub fn name(model: ModelName) -> String {
    model
        .to_possible_value()
        .map_or_else(String::new, |v| v.get_name().to_string())
}

impl ModelName {
    /// The model called `text` on the command line.
    pub fn from_name(text: &str) -> Option<ModelName> {
        ModelName::value_variants()
            .iter()
            .copied()
            .find(|&m| name(m) == text)
    }
}
