//! The options of `host run`, as clap parses them.

use std::ffi::OsString;
use std::path::PathBuf;

use clap::{Args, ValueEnum};
use serde::Serialize;

/// How to make the initial states when no `--init` file is given.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum InitDist {
    /// Drawn from the target, `mu + sigma * z` (seeded by `--seed`).
    Normal,
    /// All zeros.
    Zeros,
    /// Drawn from the target with 4 times its standard deviation, `mu + 4 sigma z`: starting
    /// points apart, for superchains (`--superchain-size`).
    Overdispersed,
}

/// Options of `host run`.
#[derive(Args, Debug, Clone)]
pub struct RunArgs {
    /// Initial states, a `[B, dim]` .npy file (float32 or float64, finite).
    #[arg(long, conflicts_with_all = ["batch", "init_dist"])]
    pub(crate) init: Option<PathBuf>,
    /// Number of chains when the initial states are generated.
    #[arg(long, requires = "dim")]
    pub(crate) batch: Option<usize>,
    /// Dimension when the initial states are generated (or mu and sigma are scalars).
    #[arg(long)]
    pub(crate) dim: Option<usize>,
    /// Distribution of generated initial states.
    #[arg(long, value_enum)]
    pub(crate) init_dist: Option<InitDist>,
    /// The target distribution, independent per coordinate: `gaussian` (--mu, --sigma), or
    /// another of the README's table of targets (--mu, --sigma and its own parameters).
    #[arg(long, default_value = "gaussian", value_parser = target_names())]
    pub(crate) target: String,
    /// Target location (the Gaussian's mean): a `[dim]` .npy file or a number for every
    /// coordinate.
    #[arg(long, default_value = "0", allow_negative_numbers = true)]
    pub(crate) mu: OsString,
    /// Target scale (the Gaussian's standard deviation): a `[dim]` .npy file or a number, in
    /// [6.9e-18, 1.4e17] (2^-57 to 2^57, where the float32 arithmetic holds).
    #[arg(long, default_value = "1", allow_negative_numbers = true)]
    pub(crate) sigma: OsString,
    /// The Student-t's degrees of freedom: a `[dim]` .npy file or a number, in [1/64, 2^60].
    #[arg(long, allow_negative_numbers = true)]
    pub(crate) df: Option<OsString>,
    /// Steps of every chain (with --resume: steps more), after the --burn-in.
    #[arg(long, default_value_t = 1000, conflicts_with = "noise")]
    pub(crate) steps: u64,
    /// Warm-up steps before everything else: the step size adapts toward --target-accept after
    /// every 10 steps (a Robbins-Monro rule in log step size, `fused_mh::adapt`), then stays.
    /// They count for nothing, as the burn-in (off by default: the step size is then exactly
    /// the given or default one).
    #[arg(long, default_value_t = 0, conflicts_with_all = ["noise", "resume"])]
    pub(crate) warmup: u64,
    /// The acceptance rate the --warmup aims at [default: 0.234, optimal for random-walk
    /// Metropolis in many dimensions].
    #[arg(long, allow_negative_numbers = true)]
    pub(crate) target_accept: Option<f64>,
    /// During the first half of the --warmup, also adapt a proposal scale per dimension to the
    /// chains' pooled standard deviation (diagonal preconditioning, `fused_mh::adapt`); frozen
    /// with the step size after the warm-up and kept by --resume.
    #[arg(long, requires = "warmup")]
    pub(crate) precondition: bool,
    /// Steps run first that count for nothing: no statistics, no trace, no diagnostics (the
    /// chains' way in from their starting points).
    #[arg(long, default_value_t = 0, conflicts_with = "noise")]
    pub(crate) burn_in: u64,
    /// Proposal scale (default: 2.38 / sqrt(dim) times the smallest sigma).
    #[arg(long, allow_negative_numbers = true)]
    pub(crate) step_size: Option<f32>,
    /// Seed of the random numbers (and of generated initial states).
    #[arg(long, default_value_t = 0)]
    pub(crate) seed: u64,
    /// Continue the run in DIR: its final states, target, seed and step size, and its random
    /// stream from where it stopped (its summary's next_step).
    #[arg(long, value_name = "DIR", conflicts_with_all = [
        "init", "batch", "dim", "init_dist", "target", "mu", "sigma", "df", "step_size", "seed",
        "noise",
    ])]
    pub(crate) resume: Option<PathBuf>,
    /// Stop as soon as every dimension's split nested R-hat (split R-hat with
    /// --superchain-size 1) is below this, once each chain has --min-draws draws; --steps is
    /// the cap. Checked at doubling checkpoints: --min-draws (rounded up to even), twice that,
    /// four times, ... A run that reaches --steps unconverged exits with status 3.
    #[arg(long, conflicts_with_all = ["noise", "thin"], allow_negative_numbers = true)]
    pub(crate) until_rhat: Option<f64>,
    /// Also write rhat.svg into --out: the worst split R-hat and the acceptance rate at each
    /// checkpoint against the steps.
    #[arg(long, conflicts_with = "noise")]
    pub(crate) rhat_chart: bool,
    /// Draws per chain before --until-rhat may stop the run [default: 100].
    #[arg(long)]
    pub(crate) min_draws: Option<u64>,
    /// Chains per superchain for the convergence diagnostics (nested R-hat; 1: R-hat):
    /// consecutive chains, which start from one point when the initial states are generated.
    #[arg(long, default_value_t = 1, conflicts_with = "noise")]
    pub(crate) superchain_size: usize,
    /// Steps per GPU launch (the fused kernel keeps each chain in registers for these).
    #[arg(long, default_value_t = 100, conflicts_with = "noise")]
    pub(crate) steps_per_launch: u32,
    /// Save the states after every thin-th step into trace.npy.
    #[arg(long, conflicts_with = "noise")]
    pub(crate) thin: Option<u64>,
    /// CUDA device ordinal [default: 0].
    #[arg(long)]
    pub(crate) device: Option<usize>,
    /// Run on the CPU reference instead of the GPU.
    #[arg(long)]
    pub(crate) cpu: bool,
    /// Output directory: a new directory in an existing parent directory.
    #[arg(long)]
    pub(crate) out: PathBuf,
    /// Replace the output directory if an earlier `host run` wrote it (only then).
    #[arg(long)]
    pub(crate) force: bool,
    /// Caller-noise mode: `[B, dim]` standard normals for exactly one step (needs --uniform
    /// and --init: the one step starts from given states).
    #[arg(long, requires_all = ["uniform", "init"], conflicts_with_all = ["batch", "init_dist"])]
    pub(crate) noise: Option<PathBuf>,
    /// Caller-noise mode: `[B]` uniforms in [0, 1) for the acceptance test.
    #[arg(long)]
    pub(crate) uniform: Option<PathBuf>,
}

impl RunArgs {
    /// `--target-accept`, or its default.
    pub fn target_accept(&self) -> f64 {
        self.target_accept.unwrap_or(0.234)
    }

    /// `--device`, or its default.
    pub fn device(&self) -> usize {
        self.device.unwrap_or(0)
    }

    /// Refuses an option that this combination would ignore: an option either takes effect
    /// or is refused. (Options that exclude each other outright are clap's `conflicts_with`.)
    pub fn check_every_option_acts(&self) -> anyhow::Result<()> {
        use anyhow::bail;
        if self.uniform.is_some() && self.noise.is_none() {
            bail!("--uniform is caller-noise mode's uniforms: it needs --noise (and --init)");
        }
        if self.min_draws.is_some() && self.until_rhat.is_none() {
            bail!("--min-draws sets when --until-rhat may stop the run: it needs --until-rhat");
        }
        if self.warmup == 0 {
            if self.precondition {
                bail!("--precondition adapts the scales during the warm-up: give --warmup N");
            }
            if self.target_accept.is_some() {
                bail!("--target-accept is the warm-up's aim: give --warmup N");
            }
        }
        if self.cpu && self.device.is_some() {
            bail!("--device chooses a GPU, and --cpu runs on none: give one or the other");
        }
        if let Some(t) = self.thin
            && self.noise.is_none()
            && (1..=self.steps).contains(&t)
            && !self.steps.is_multiple_of(t)
        {
            bail!(
                "--thin {t} does not divide --steps {}: the last {} steps would be run but \
                 never saved (give a --thin that divides --steps)",
                self.steps,
                self.steps % t
            );
        }
        Ok(())
    }
}

impl RunArgs {
    /// Every target parameter's option, by the parameter's name (`TargetKind::params`):
    /// `mu` and `sigma` always have a value (their defaults), the others only when given.
    pub(crate) fn target_params(&self) -> [(&'static str, Option<&OsString>); 3] {
        [
            ("mu", Some(&self.mu)),
            ("sigma", Some(&self.sigma)),
            ("df", self.df.as_ref()),
        ]
    }
}

/// `--target`'s values: every target's name.
fn target_names() -> clap::builder::PossibleValuesParser {
    fused_mh::TargetKind::ALL
        .iter()
        .map(|k| k.name())
        .collect::<Vec<_>>()
        .into()
}
