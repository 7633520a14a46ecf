//! `summary.json`: what a run did, what it wrote, and where a continuation picks it up.
//!
//! It is the last file written into the staging directory, and it is what marks a directory
//! as a run's output: `--force` replaces only a directory whose summary lists every file in it
//! ([`crate::outdir`]), and `--resume DIR` reads the step counter, the seed and the step size
//! from it ([`Resume`]).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use fused_mh::diagnostics::Diagnostics;
use serde::{Deserialize, Serialize};

use super::json_float;
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
    /// The target's name (`--target`; runs written before targets had names: the Gaussian).
    #[serde(default = "gaussian")]
    pub target: String,
    pub mu: String,
    pub sigma: String,
    /// The target's parameters beyond `mu` and `sigma`, by name: the option texts.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub other_params: BTreeMap<String, String>,
    /// The run this one continues (`--resume DIR`).
    pub resumed_from: Option<String>,
    /// Accepted steps over all chains (64-bit: it passes 2^32 in ordinary runs).
    pub accepted_total: u64,
    /// Whether the run converged: every split R-hat below the threshold (`--until-rhat`, or
    /// 1.01) and R-hat able to see from where the chains started (`diagnostics`); absent
    /// without diagnostics. With `--until-rhat`, `false` is also the exit status 3.
    #[serde(default)]
    pub converged: Option<bool>,
    /// Steps whose `log alpha` was not finite (a NaN or an infinity in the state or the
    /// proposal, or terms past float32's range), and what they touched (absent for caller
    /// noise, whose `accepted.npy` says all there is).
    #[serde(default)]
    pub nonfinite: Option<Nonfinite>,
    /// Null moves after the burn-in: steps whose proposal rounded back to the state in
    /// float32 (accepted, no move; per chain in `null_move_count.npy`); absent for caller noise.
    #[serde(default)]
    pub null_moves: Option<NullMoves>,
    /// The per-dimension proposal scales relative to `step_size` that `--precondition` adapted
    /// (and a `--resume` of this run keeps); absent: the step size alone.
    #[serde(default)]
    pub scales: Option<Vec<f32>>,
    #[serde(with = "json_float")]
    pub acceptance_rate: f64,
    pub seconds: f64,
    pub converted_from_f64: Vec<String>,
    /// Nested R-hat and ESS per dimension over the run (`fused_mh::diagnostics`); absent for
    /// caller noise, a single chain or a single step.
    pub diagnostics: Option<DiagnosticsSummary>,
    /// Every file of the output directory, this one included.
    pub files: Vec<String>,
    /// The BLAKE3 digest (hex) of each `.npy` file, of the bytes as they were written: a
    /// `--resume` checks the files it reads against them ([`Resume::open`]).
    #[serde(default)]
    pub digests: BTreeMap<String, String>,
    /// The host memory the run planned for (bytes): what it checked against the free memory
    /// before it started (`budgets::host_budget`).
    #[serde(default)]
    pub host_memory_planned: u64,
    /// The peak resident memory of the process (bytes) when the summary was written (after
    /// the run and its outputs); absent where the system does not say.
    #[serde(default)]
    pub host_memory_peak: Option<u64>,
}

/// What `--warmup` did: its steps and target, the step size it started from (`step_size` is
/// where it ended), and the acceptance rate of its last launch.
#[derive(Serialize, Deserialize, Debug, Clone, Copy)]
pub struct Warmup {
    pub steps: u64,
    pub target_accept: f64,
    pub initial_step_size: f32,
    #[serde(with = "json_float")]
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

/// The null moves: their total, the chains they hit, their fraction of all steps, and the
/// largest fraction of one chain's steps (over [`NULL_MOVES_WARNED`] the run warns).
#[derive(Serialize, Deserialize, Debug, Clone, Copy)]
pub struct NullMoves {
    pub total: u64,
    pub chains: u64,
    #[serde(with = "json_float")]
    pub fraction: f64,
    #[serde(with = "json_float")]
    pub worst_chain_fraction: f64,
}

/// The share of one chain's steps as null moves above which a run warns: 1 %. A chain whose
/// states float32 resolves finely enough has none, or a handful where a proposal lands on
/// the state by chance.
pub const NULL_MOVES_WARNED: f64 = 0.01;

impl NullMoves {
    /// From each chain's count over `steps` steps.
    pub fn new(counts: &[u64], steps: u64) -> Self {
        let total: u64 = counts.iter().sum();
        let steps = steps.max(1) as f64;
        Self {
            total,
            chains: counts.iter().filter(|&&n| n > 0).count() as u64,
            fraction: total as f64 / (steps * counts.len().max(1) as f64),
            worst_chain_fraction: counts.iter().copied().max().unwrap_or(0) as f64 / steps,
        }
    }
}

/// The diagnostics at one checkpoint (after `step` steps past the burn-in).
#[derive(Serialize, Deserialize, Debug, Clone, Copy)]
pub struct Checkpoint {
    pub step: u64,
    #[serde(with = "json_float")]
    pub max_nested_rhat: f64,
    #[serde(with = "json_float")]
    pub min_ess: f64,
    /// The acceptance rate of all steps after the burn-in so far.
    #[serde(default, with = "json_float::option")]
    pub acceptance_rate: Option<f64>,
}

/// The convergence diagnostics as summary.json records them: split R-hat and ESS per
/// dimension at the run's last checkpoint (`fused_mh::diagnostics::split`); non-finite values
/// as the strings "NaN", "inf", "-inf" ([`json_float`]).
#[derive(Serialize, Deserialize, Debug, Clone)]
pub struct DiagnosticsSummary {
    pub superchain_size: usize,
    /// Draws per chain the diagnostics cover (both halves): the last checkpoint's.
    #[serde(default)]
    pub draws: u64,
    #[serde(with = "json_float")]
    pub max_nested_rhat: f64,
    #[serde(with = "json_float")]
    pub min_ess: f64,
    #[serde(with = "json_float::vec")]
    pub nested_rhat: Vec<f64>,
    #[serde(with = "json_float::vec")]
    pub ess: Vec<f64>,
    /// The threshold of the verdict: `--until-rhat`, or 1.01.
    #[serde(default = "default_threshold")]
    pub rhat_threshold: f64,
    /// Per dimension, how far apart the superchains started, in the target's standard
    /// deviations (`fused_mh::diagnostics::start`).
    #[serde(default, with = "json_float::vec")]
    pub start_spread: Vec<f64>,
    /// The dimensions whose superchains started closer than half a standard deviation apart,
    /// where R-hat cannot detect non-convergence (worst first).
    #[serde(default)]
    pub blind_dimensions: Vec<usize>,
    /// The worst R-hat, lowest ESS and acceptance rate at each checkpoint.
    #[serde(default)]
    pub history: Vec<Checkpoint>,
}

fn default_threshold() -> f64 {
    fused_mh::diagnostics::RHAT_THRESHOLD
}

impl DiagnosticsSummary {
    /// The summary of `d`, with the starting points' spread and the verdict's threshold.
    pub fn new(d: &Diagnostics, start_spread: Vec<f64>, rhat_threshold: f64) -> Self {
        Self {
            superchain_size: d.superchain_size,
            draws: d.draws,
            max_nested_rhat: d.max_nested_rhat(),
            min_ess: d.min_ess(),
            nested_rhat: d.nested_rhat.clone(),
            ess: d.ess.clone(),
            rhat_threshold,
            blind_dimensions: fused_mh::diagnostics::start::blind_dimensions(&start_spread),
            start_spread,
            history: Vec::new(),
        }
    }

    /// Every R-hat below the threshold, and R-hat able to see in every dimension.
    pub fn converged(&self) -> bool {
        self.max_nested_rhat < self.rhat_threshold && self.blind_dimensions.is_empty()
    }
}

/// Reads `DIR/summary.json` of an earlier run, or says why it cannot be read.
pub fn read(dir: &Path) -> Result<Summary> {
    let path = dir.join(SUMMARY);
    let text = crate::regular_file::read_to_string(&path)
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
    /// Checks that `dir` holds a finished run (not a caller-noise step) that can be continued,
    /// and that it is the run its summary describes: every `.npy` file it lists has the shape
    /// the summary implies; the files a resume reads (`x.npy` and the target's, `mu.npy`, `sigma.npy`, ...) have the
    /// digests recorded when they were written; the step size and scales are usable; and the
    /// stream position follows from the steps the run drew (an edited `next_step` would replay
    /// or skip random numbers).
    pub fn open(dir: &Path) -> Result<Self> {
        let shown = dir.display();
        let summary = read(dir).with_context(|| format!("--resume {shown}"))?;
        if summary.mode != "run" {
            bail!(
                "--resume {shown}: that directory holds a {} step, not a run to continue",
                summary.mode
            );
        }
        let (b, d) = (summary.batch, summary.dim);
        let Some(target) = fused_mh::TargetKind::from_name(&summary.target) else {
            bail!(
                "--resume {shown}: {SUMMARY} names an unknown target {:?}",
                summary.target
            );
        };
        let param_files: Vec<String> = target.params().iter().map(|p| format!("{p}.npy")).collect();
        let saves = summary.thin.filter(|&t| t > 0).map(|t| summary.steps / t);
        for file in summary.files.iter().filter(|f| f.ends_with(".npy")) {
            let want: Vec<usize> = match file.as_str() {
                "x.npy" | "mean.npy" | "var.npy" => vec![b, d],
                f if param_files.iter().any(|p| p == f) => vec![d],
                "trace.npy" => vec![saves.unwrap_or(0) as usize, b, d],
                _ => vec![b],
            };
            let path = dir.join(file);
            let shape = crate::npy::shape(&path).with_context(|| format!("--resume {shown}"))?;
            if shape != want {
                bail!(
                    "--resume {shown}: {file} has shape {:?}, but {SUMMARY} describes {b} chains \
                     x {d} dims ({want:?}): the file is not the one this run wrote",
                    shape
                );
            }
        }
        for file in std::iter::once("x.npy").chain(param_files.iter().map(String::as_str)) {
            if !summary.files.iter().any(|f| f == file) {
                bail!("--resume {shown}: {SUMMARY} lists no {file}");
            }
            let Some(recorded) = summary.digests.get(file) else {
                bail!(
                    "--resume {shown}: {SUMMARY} records no digest of {file} (a run of an \
                     older host run), so the file cannot be checked; start a new run from it \
                     with --init {shown}/x.npy and another --seed instead"
                );
            };
            let path = dir.join(file);
            if crate::npy::digest(&path).with_context(|| format!("--resume {shown}"))? != *recorded
            {
                bail!(
                    "--resume {shown}: {file} has changed since the run wrote it (its BLAKE3 \
                     digest is not the one in {SUMMARY}); a resume continues the run's own \
                     final states and target only"
                );
            }
        }
        let drawn = summary
            .warmup
            .map_or(0, |w| w.steps)
            .checked_add(summary.burn_in);
        let end = drawn
            .and_then(|n| n.checked_add(summary.steps))
            .and_then(|n| n.checked_add(summary.first_step));
        if end != Some(summary.next_step) {
            bail!(
                "--resume {shown}: {SUMMARY} says next_step {}, but the run drew its random \
                 numbers from step {} for {} warm-up, {} burn-in and {} steps: the stream \
                 position was changed, and resuming there would replay or skip random numbers",
                summary.next_step,
                summary.first_step,
                summary.warmup.map_or(0, |w| w.steps),
                summary.burn_in,
                summary.steps
            );
        }
        let config = fused_mh::StepConfig::new(summary.step_size, summary.seed)
            .with_context(|| format!("--resume {shown}: the step size in its {SUMMARY}"))?;
        if let Some(scales) = &summary.scales {
            if scales.len() != d {
                bail!(
                    "--resume {shown}: its {SUMMARY} has {} scales for {d} dimensions",
                    scales.len()
                );
            }
            config
                .with_scales(scales)
                .with_context(|| format!("--resume {shown}: the scales in its {SUMMARY}"))?;
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
    /// Null moves of each chain: proposals that rounded back to the state.
    pub null_moves: Vec<u64>,
    pub mean: Vec<f64>,
    pub var: Vec<f64>,
}

/// The target of a summary that names none: the Gaussian (the only one before targets had
/// names).
fn gaussian() -> String {
    fused_mh::TargetKind::Gaussian.name().into()
}
