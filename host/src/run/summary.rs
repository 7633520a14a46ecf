//! `summary.json`: what a run did, what it wrote, and where a continuation picks it up.
//!
//! It is the last file written into the staging directory, and it is what marks a directory
//! as a run's output: `--force` replaces only a directory whose summary lists every file in it
//! ([`crate::outdir`]), and `--resume DIR` reads the step counter, the seed and the step size
//! from it ([`Resume`]).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use fused_mh::Target;
use fused_mh::diagnostics::Diagnostics;
use serde::{Deserialize, Serialize};

use crate::outdir::SUMMARY;

/// The program that writes summaries, as they record it.
pub const WRITTEN_BY: &str = "fused-mh host run";

/// What summary.json records.
#[derive(Serialize, Deserialize, Debug, Clone)]
pub struct Summary {
    /// Always [`WRITTEN_BY`].
    pub written_by: String,
    /// The program's version.
    pub version: String,
    /// `run` (K fused steps per launch) or `caller-noise` (one step with the given numbers).
    pub mode: String,
    pub device: String,
    pub batch: usize,
    pub dim: usize,
    pub steps: u64,
    pub step_size: f32,
    pub seed: u64,
    /// The step counter of the run's first step: 0, or where the resumed run had stopped.
    pub first_step: u64,
    /// The counter after the last step: where `--resume` continues the random stream (caller
    /// noise draws nothing from it: then `first_step`).
    pub next_step: u64,
    /// The warm-up that adapted `step_size` (`--warmup`), if there was one.
    #[serde(default)]
    pub warmup: Option<Warmup>,
    /// Steps run before the statistics began (`--burn-in`); `steps` counts those after it.
    #[serde(default)]
    pub burn_in: u64,
    /// The run stopped before `--steps` because `--until-rhat` was met (`steps` says when).
    #[serde(default)]
    pub stopped_early: bool,
    pub steps_per_launch: Option<u32>,
    pub thin: Option<u64>,
    pub init: String,
    pub mu: String,
    pub sigma: String,
    /// The run this one continues (`--resume DIR`).
    pub resumed_from: Option<String>,
    /// Accepted steps over all chains (64-bit: it passes 2^32 in ordinary runs).
    pub accepted_total: u64,
    /// Steps whose `log alpha` was not finite (a NaN or an infinity in the state or the
    /// proposal, or terms past float32's range), and what they touched (absent for caller
    /// noise, whose `accepted.npy` says all there is).
    #[serde(default)]
    pub nonfinite: Option<Nonfinite>,
    /// The per-dimension proposal scales relative to `step_size` that `--precondition` adapted
    /// (and a `--resume` of this run keeps); absent: the step size alone.
    #[serde(default)]
    pub scales: Option<Vec<f32>>,
    pub acceptance_rate: f64,
    pub seconds: f64,
    pub converted_from_f64: Vec<String>,
    /// Nested R-hat and ESS per dimension over the run (`fused_mh::diagnostics`); absent for
    /// caller noise, a single chain or a single step.
    pub diagnostics: Option<DiagnosticsSummary>,
    /// Every file of the output directory, this one included.
    pub files: Vec<String>,
}

/// What `--warmup` did: its steps and target, the step size it started from (`step_size` is
/// where it ended), and the acceptance rate of its last launch.
#[derive(Serialize, Deserialize, Debug, Clone, Copy)]
pub struct Warmup {
    pub steps: u64,
    pub target_accept: f64,
    pub initial_step_size: f32,
    pub last_acceptance: f64,
}

/// The steps with a non-finite `log alpha`: after the burn-in (per chain in
/// `nonfinite_count.npy`), the chains they hit, and those of the warm-up and burn-in together.
#[derive(Serialize, Deserialize, Debug, Clone, Copy)]
pub struct Nonfinite {
    pub total: u64,
    pub chains: u64,
    pub before_statistics: u64,
}

/// The diagnostics after one launch (after `step` steps past the burn-in).
#[derive(Serialize, Deserialize, Debug, Clone, Copy)]
pub struct Checkpoint {
    pub step: u64,
    pub max_nested_rhat: f64,
    pub min_ess: f64,
    /// The acceptance rate of all steps after the burn-in so far.
    #[serde(default)]
    pub acceptance_rate: Option<f64>,
}

/// The convergence diagnostics as summary.json records them.
#[derive(Serialize, Deserialize, Debug, Clone)]
pub struct DiagnosticsSummary {
    pub superchain_size: usize,
    pub max_nested_rhat: f64,
    pub min_ess: f64,
    pub nested_rhat: Vec<f64>,
    pub ess: Vec<f64>,
    /// The worst R-hat and lowest ESS after each launch, when they were computed as the run
    /// went (`--until-rhat`, `--rhat-chart`, or a progress bar on a terminal).
    #[serde(default)]
    pub history: Vec<Checkpoint>,
}

impl From<&Diagnostics> for DiagnosticsSummary {
    fn from(d: &Diagnostics) -> Self {
        Self {
            superchain_size: d.superchain_size,
            max_nested_rhat: d.max_nested_rhat(),
            min_ess: d.min_ess(),
            nested_rhat: d.nested_rhat.clone(),
            ess: d.ess.clone(),
            history: Vec::new(),
        }
    }
}

/// Reads `DIR/summary.json` of an earlier run, or says why it cannot be read.
pub fn read(dir: &Path) -> Result<Summary> {
    let path = dir.join(SUMMARY);
    let text = std::fs::read_to_string(&path)
        .with_context(|| format!("cannot read {}", path.display()))?;
    let summary: Summary = serde_json::from_str(&text).with_context(|| {
        format!(
            "{} is not the summary of a run of this version of host run",
            path.display()
        )
    })?;
    if summary.written_by != WRITTEN_BY {
        bail!("{} was not written by host run", path.display());
    }
    Ok(summary)
}

/// What `--resume DIR` continues: the final states, the target and the random stream of an
/// earlier run.
pub struct Resume {
    pub dir: PathBuf,
    pub summary: Summary,
}

impl Resume {
    /// Checks that `dir` holds a finished run (not a caller-noise step) that can be continued.
    pub fn open(dir: &Path) -> Result<Self> {
        let context = || format!("--resume {}", dir.display());
        let summary = read(dir).with_context(context)?;
        if summary.mode != "run" {
            bail!(
                "--resume {}: that directory holds a {} step, not a run to continue",
                dir.display(),
                summary.mode
            );
        }
        for file in ["x.npy", "mu.npy", "sigma.npy"] {
            if !summary.files.iter().any(|f| f == file) || !dir.join(file).is_file() {
                bail!("--resume {}: {file} is missing", dir.display());
            }
        }
        Ok(Self {
            dir: dir.to_path_buf(),
            summary,
        })
    }

    /// One of the earlier run's files.
    pub fn file(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }
}

/// The per-chain statistics a run writes, however it ran.
pub struct Stats {
    pub accepted: Vec<u64>,
    /// Steps of each chain whose `log alpha` was not finite.
    pub nonfinite: Vec<u64>,
    pub mean: Vec<f64>,
    pub var: Vec<f64>,
}

/// The human summary: acceptance rate, and per dimension the pooled mean and variance over all
/// chains and steps against mu and sigma^2.
pub fn describe(summary: &Summary, target: &Target, stats: &Stats) -> String {
    let (b, d) = (summary.batch, summary.dim);
    let mut text = format!(
        "{} chains x {} dims, {} steps on {}: acceptance rate {:.4}\n",
        b, d, summary.steps, summary.device, summary.acceptance_rate
    );
    if let Some(w) = &summary.warmup {
        let _ = writeln!(
            text,
            "warm-up of {} steps: step size {} -> {} (last acceptance {:.3}, target {})",
            w.steps, w.initial_step_size, summary.step_size, w.last_acceptance, w.target_accept
        );
    }
    if let Some(s) = &summary.scales {
        let (lo, hi) = s.iter().fold((f32::INFINITY, 0.0f32), |(lo, hi), &v| {
            (lo.min(v), hi.max(v))
        });
        let _ = writeln!(
            text,
            "per-dimension proposal scales from {lo:.4} to {hi:.4} times the step size \
             (summary.json: scales)"
        );
    }
    if summary.burn_in > 0 {
        let _ = writeln!(
            text,
            "after a burn-in of {} steps, which the statistics leave out",
            summary.burn_in
        );
    }
    if summary.stopped_early {
        let _ = writeln!(text, "stopped early: every nested R-hat below --until-rhat");
    }
    if let Some(n) = &summary.nonfinite
        && (n.total > 0 || n.before_statistics > 0)
    {
        let _ = writeln!(
            text,
            "WARNING: {} steps of {} chains had a non-finite log alpha (NaN or infinity in a \
             state or proposal; such steps are never accepted), and {} before the statistics: \
             see nonfinite_count.npy",
            n.total, n.chains, n.before_statistics
        );
    }
    if let Some(d) = &summary.diagnostics {
        let _ = writeln!(
            text,
            "worst nested R-hat {:.4} (superchains of {}), lowest ESS {:.0}",
            d.max_nested_rhat, d.superchain_size, d.min_ess
        );
    }
    let _ = writeln!(
        text,
        "{:>5} {:>12} {:>12} {:>12} {:>12} {:>9} {:>10}",
        "dim", "mean", "mu", "variance", "sigma^2", "R-hat", "ESS"
    );
    const SHOWN: usize = 16;
    for j in 0..d.min(SHOWN) {
        let means = (0..b).map(|c| stats.mean[c * d + j]);
        let pooled = means.clone().sum::<f64>() / b as f64;
        // Total variance over all chains and steps: within-chain plus between-chain.
        let within = (0..b).map(|c| stats.var[c * d + j]).sum::<f64>() / b as f64;
        let between = means.map(|m| (m - pooled).powi(2)).sum::<f64>() / b as f64;
        let sigma2 = 1.0 / f64::from(target.inv_var()[j]);
        let (rhat, ess) = summary.diagnostics.as_ref().map_or_else(
            || ("-".to_string(), "-".to_string()),
            |d| {
                (
                    format!("{:.4}", d.nested_rhat[j]),
                    format!("{:.0}", d.ess[j]),
                )
            },
        );
        let _ = writeln!(
            text,
            "{:>5} {:>12.5} {:>12.5} {:>12.5} {:>12.5} {:>9} {:>10}",
            j,
            pooled,
            target.mu()[j],
            within + between,
            sigma2,
            rhat,
            ess
        );
    }
    if d > SHOWN {
        let _ = writeln!(
            text,
            "  ... and {} more dimensions (see mean.npy, var.npy)",
            d - SHOWN
        );
    }
    text
}
