//! The options of `host sample`, as clap parses them, and the priors' syntax.

use std::path::PathBuf;

use anyhow::{Result, bail};
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
    /// The model.
    #[arg(long, value_enum)]
    pub(crate) model: ModelName,
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
    /// Keep every THIN-th sampling step.
    #[arg(long, default_value_t = 10)]
    pub(crate) thin: u32,
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
    /// The output directory (new): summary.json and draws.npy `[chains, draws, params]`.
    #[arg(long)]
    pub(crate) out: PathBuf,
}

impl SampleArgs {
    /// Refuses the options that do not belong to the chosen model (given with a value other
    /// than their default, or a file).
    pub fn check_options(&self) -> Result<()> {
        use ModelName::*;
        let uses = |models: &[ModelName]| models.contains(&self.model);
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
                bail!("{option} is not an option of --model {}", self.model_name());
            }
        }
        Ok(())
    }

    /// The model's name as the command line spells it.
    pub fn model_name(&self) -> String {
        self.model
            .to_possible_value()
            .map_or_else(String::new, |v| v.get_name().to_string())
    }
}
