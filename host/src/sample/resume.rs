//! `host sample --resume DIR`: what an earlier `sample` recorded in `DIR/summary.json`, checked,
//! and the run that continues it.
//!
//! A continuation takes the earlier run's model, priors, chains, seed, superchains and thinning
//! (unless --thin is given), its data
//! files (from where it read them, or from the flags if given: moved files), its final states
//! (`states.npy`) and its frozen step size and proposal factor, and draws its random numbers
//! from the step where it stopped. Every file it reads must be the one the run recorded (BLAKE3
//! digests), and the record must be consistent (the step counter follows from the steps drawn),
//! so that a continuation never samples another model or replays random numbers.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use fused_mh::model_run::Continuation;
use serde::{Deserialize, Serialize};

use super::args::{ModelName, SampleArgs};
use crate::npy;
use crate::outdir::SUMMARY;

/// Who writes sample summaries, as they record it.
pub const WRITTEN_BY: &str = "fused-mh host sample";

/// A data file as a run recorded it: where it was read, and the digest of its bytes.
#[derive(Serialize, Deserialize, Debug, Clone)]
pub struct RecordedInput {
    /// The absolute path.
    pub path: PathBuf,
    /// Its BLAKE3 digest (hex).
    pub blake3: String,
}

/// The fields of a sample summary that a continuation reads.
#[derive(Deserialize, Debug)]
struct Record {
    written_by: String,
    model: String,
    chains: usize,
    seed: u64,
    superchain_size: usize,
    precondition: String,
    first_step: u64,
    warmup: u32,
    steps: u32,
    thin: u32,
    next_step: u64,
    step_size: f32,
    factor: Vec<f32>,
    names: Vec<String>,
    priors: BTreeMap<String, String>,
    inputs: BTreeMap<String, RecordedInput>,
    digests: BTreeMap<String, String>,
}

/// An earlier run to continue, checked.
pub struct Resumed {
    dir: PathBuf,
    record: Record,
    model: ModelName,
    /// Where the continuation starts.
    pub from: Continuation,
}

impl Resumed {
    /// Reads and checks `DIR/summary.json` and `DIR/states.npy` (see the module documentation).
    pub fn open(dir: &Path) -> Result<Self> {
        let shown = dir.display();
        let text = std::fs::read_to_string(dir.join(SUMMARY))
            .with_context(|| format!("--resume {shown}: cannot read its {SUMMARY}"))?;
        let record: Record = serde_json::from_str(&text).with_context(|| {
            format!("--resume {shown}: {SUMMARY} is not the summary of a `host sample` run")
        })?;
        if record.written_by != WRITTEN_BY {
            bail!("--resume {shown}: {SUMMARY} was not written by `host sample`");
        }
        let Some(model) = ModelName::from_name(&record.model) else {
            bail!(
                "--resume {shown}: {SUMMARY} names an unknown model {:?}",
                record.model
            );
        };
        let dim = record.names.len();
        if record.factor.len() != dim * dim {
            bail!(
                "--resume {shown}: {SUMMARY} holds a factor of {} values for {dim} parameters",
                record.factor.len()
            );
        }
        let end = record
            .first_step
            .checked_add(u64::from(record.warmup) + u64::from(record.steps));
        if end != Some(record.next_step) {
            bail!(
                "--resume {shown}: {SUMMARY} says next_step {}, but the run drew its random \
                 numbers from step {} for {} warm-up and {} steps: the stream position was \
                 changed, and resuming there would replay or skip random numbers",
                record.next_step,
                record.first_step,
                record.warmup,
                record.steps
            );
        }
        let states_path = dir.join("states.npy");
        let digest = npy::digest(&states_path).with_context(|| format!("--resume {shown}"))?;
        if record.digests.get("states.npy") != Some(&digest) {
            bail!(
                "--resume {shown}: states.npy is not the one the run wrote (its BLAKE3 digest \
                 is not the one in {SUMMARY})"
            );
        }
        let states = npy::read_f32(&states_path).with_context(|| format!("--resume {shown}"))?;
        if states.shape != [record.chains, dim] {
            bail!(
                "--resume {shown}: states.npy has shape {:?}, but {SUMMARY} describes {} chains \
                 of {dim} parameters",
                states.shape,
                record.chains
            );
        }
        let from = Continuation {
            states: states.data,
            factor: record.factor.clone(),
            step_size: record.step_size,
            first_step: record.next_step,
        };
        Ok(Self {
            dir: dir.to_path_buf(),
            record,
            model,
            from,
        })
    }

    /// The directory resumed.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The resumed run's proposal shape (kept for the summary: the factor is its).
    pub fn precondition(&self) -> &str {
        &self.record.precondition
    }

    /// Fills `args` in with the run's model, priors, chains, seed and superchains, no warm-up,
    /// its thinning unless --thin is given, and its data files where no flag moved them.
    pub fn apply(&self, args: &mut SampleArgs) -> Result<()> {
        let record = &self.record;
        args.model = Some(self.model);
        args.chains = record.chains;
        args.seed = record.seed;
        args.superchain_size = record.superchain_size;
        args.warmup = 0;
        args.thin.get_or_insert(record.thin);
        for (name, prior) in [
            ("beta_prior", &mut args.beta_prior),
            ("sigma_prior", &mut args.sigma_prior),
            ("mu_prior", &mut args.mu_prior),
            ("tau_prior", &mut args.tau_prior),
        ] {
            if let Some(text) = record.priors.get(name) {
                prior.clone_from(text);
            }
        }
        for (name, file) in args.data_files_mut() {
            match (record.inputs.get(name), &file) {
                (None, Some(_)) => bail!(
                    "{}: the resumed run {} read no such file",
                    flag(name),
                    self.dir.display()
                ),
                (Some(recorded), None) => *file = Some(recorded.path.clone()),
                _ => {}
            }
        }
        Ok(())
    }

    /// Checks the data files the continuation reads (`read`, by name, with their digests; the
    /// paths of `args` for the messages) against those the run recorded: the same bytes.
    pub fn check_inputs(
        &self,
        args: &SampleArgs,
        read: &BTreeMap<&str, RecordedInput>,
    ) -> Result<()> {
        let given: BTreeMap<&str, &Option<PathBuf>> = args.data_files().into_iter().collect();
        for (name, recorded) in &self.record.inputs {
            let Some(file) = read.get(name.as_str()) else {
                bail!(
                    "--resume {}: the run read {}, which this one does not",
                    self.dir.display(),
                    flag(name)
                );
            };
            if file.blake3 != recorded.blake3 {
                bail!(
                    "{} {}: not the data the resumed run {} sampled (its BLAKE3 digest \
                     differs from the one in {SUMMARY}); a resume continues the same model",
                    flag(name),
                    given
                        .get(name.as_str())
                        .and_then(|p| p.as_deref())
                        .unwrap_or(&file.path)
                        .display(),
                    self.dir.display()
                );
            }
        }
        Ok(())
    }
}

/// The flag of a data file's name in the summary (`cov_factor` is `--cov-factor`).
pub fn flag(name: &str) -> String {
    format!("--{}", name.replace('_', "-"))
}
