//! The inputs of `host run`, in two passes: [`Plan::new`] reads only the files' headers and
//! the options, and fixes the shape, so the sizes can be checked against the machine before
//! anything large exists; [`Plan::read`] then reads the data and checks the values.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail, ensure};
use fused_mh::starts::{Spread, initial_states};
use fused_mh::testing::host_memory;
use fused_mh::{Error, Shape, Target, TargetKind};

use super::summary::{self, Resume};
use super::{InitDist, RunArgs};
use crate::npy::{self, Header};

/// A target parameter (`--mu`, `--sigma`, `--df`, ...): a `.npy` file, or one number for
/// every coordinate.
pub enum Param {
    File(PathBuf, Header),
    Scalar(f32),
}

impl Param {
    /// A number, or else the path of a `.npy` file (any bytes: a path need not be UTF-8).
    fn parse(option: &str, text: &OsStr) -> Result<Self> {
        match text.to_str().and_then(|t| t.trim().parse::<f32>().ok()) {
            Some(v) => Ok(Self::Scalar(v)),
            None => {
                let path = PathBuf::from(text);
                let shown = path.display();
                let header = npy::probe(&path).with_context(|| format!("{option} {shown}"))?;
                ensure!(
                    header.shape.len() == 1,
                    "{} has shape {:?}; {option} must have shape [dim]",
                    path.display(),
                    header.shape
                );
                Ok(Self::File(path, header))
            }
        }
    }

    fn dim(&self) -> Option<usize> {
        match self {
            Self::File(_, h) => Some(h.shape[0]),
            Self::Scalar(_) => None,
        }
    }
}

/// Where the initial states come from.
pub enum Init {
    File(PathBuf, Header),
    Generated(InitDist),
}

/// What a run will read, with every size known and nothing large read yet.
pub struct Plan {
    pub shape: Shape,
    pub init: Init,
    /// The target (`--target`, or the earlier run's on resume).
    pub target: TargetKind,
    /// Its parameters in `TargetKind::params` order.
    pub params: Vec<TargetParam>,
    /// Caller-noise mode: the noise and the uniforms.
    pub noise: Option<[(PathBuf, Header); 2]>,
}

/// One of the target's parameters, as the options give it.
pub struct TargetParam {
    pub name: &'static str,
    pub value: Param,
    /// The option's text for the summary and messages (the earlier run's file on resume).
    pub text: String,
}

impl Plan {
    /// The text of parameter `name` (empty if the target has none).
    pub fn param_text(&self, name: &str) -> String {
        let param = self.params.iter().find(|p| p.name == name);
        param.map(|p| p.text.clone()).unwrap_or_default()
    }
}

/// The checked inputs.
pub struct Inputs {
    pub x: Vec<f32>,
    pub target: Target,
    /// Caller-noise mode: `noise[batch * dim]`, `uniform[batch]`.
    pub noise: Option<(Vec<f32>, Vec<f32>)>,
    /// How the initial states were made, for the summary.
    pub init: String,
    /// The float64 files that were converted.
    pub converted: Vec<String>,
}

impl Plan {
    /// Reads the headers and fixes the shape: every source of the dimension must agree.
    pub fn new(args: &RunArgs, resume: Option<&Resume>) -> Result<Self> {
        let target = match resume {
            Some(r) => TargetKind::from_name(&r.summary.target).with_context(|| {
                format!(
                    "--resume: the run's target {:?} is unknown",
                    r.summary.target
                )
            })?,
            None => TargetKind::from_name(&args.target).context("--target")?,
        };
        let options = args.target_params();
        if resume.is_none()
            && let Some((name, _)) = options
                .iter()
                .find(|(name, given)| given.is_some() && !target.params().contains(name))
        {
            bail!(
                "--{name} is not a parameter of --target {}: its parameters are {}",
                target.name(),
                target
                    .params()
                    .iter()
                    .map(|p| format!("--{p}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            );
        }
        let mut params = Vec::new();
        for &name in target.params() {
            let source = match resume {
                Some(r) => r.file(&format!("{name}.npy")).into_os_string(),
                None => match options.iter().find(|(option, _)| *option == name) {
                    Some((_, Some(given))) => (*given).clone(),
                    _ => bail!("--target {} needs --{name}", target.name()),
                },
            };
            params.push(TargetParam {
                name,
                value: Param::parse(&format!("--{name}"), &source)?,
                text: Path::new(&source).display().to_string(),
            });
        }
        let init_path = match resume {
            Some(r) => Some(r.file("x.npy")),
            None => args.init.clone(),
        };
        let init = match init_path {
            Some(path) => {
                let header = npy::probe(&path)?;
                ensure!(
                    header.shape.len() == 2,
                    "{} has shape {:?}; the initial states must be [B, dim]",
                    path.display(),
                    header.shape
                );
                Init::File(path, header)
            }
            None => Init::Generated(args.init_dist.unwrap_or(InitDist::Normal)),
        };
        let mut sources: Vec<(String, usize)> = Vec::new();
        if let Init::File(path, h) = &init {
            sources.push((path.display().to_string(), h.shape[1]));
        }
        for p in &params {
            if let Some(d) = p.value.dim() {
                sources.push((p.text.clone(), d));
            }
        }
        if let Some(d) = args.dim {
            sources.push((format!("--dim {d}"), d));
        }
        let Some((_, dim)) = sources.first().cloned() else {
            bail!("give the initial states (--init FILE.npy) or their shape (--batch and --dim)");
        };
        if let Some((what, d)) = sources.iter().find(|(_, d)| *d != dim) {
            bail!("{what} gives dim {d}, but {} gives dim {dim}", sources[0].0);
        }
        let shape = match &init {
            Init::File(path, h) => Shape::new(h.shape[0], dim)
                .with_context(|| format!("{} cannot be a batch of chains", path.display()))?,
            Init::Generated(_) => {
                let batch = args
                    .batch
                    .context("give the number of chains (--batch) or an --init file")?;
                Shape::new(batch, dim).with_context(|| format!("--batch {batch} --dim {dim}"))?
            }
        };
        let noise = match (&args.noise, &args.uniform) {
            (Some(n), Some(u)) => {
                let (nh, uh) = (npy::probe(n)?, npy::probe(u)?);
                check_shape(n, &nh.shape, &[shape.batch(), dim], "the noise")?;
                check_shape(u, &uh.shape, &[shape.batch()], "the uniforms")?;
                Some([(n.clone(), nh), (u.clone(), uh)])
            }
            _ => None,
        };
        Ok(Self {
            shape,
            init,
            target,
            params,
            noise,
        })
    }

    /// The input files (a directory that holds one is never replaced by `--force`).
    pub fn files(&self) -> Vec<&Path> {
        let mut files = Vec::new();
        if let Init::File(p, _) = &self.init {
            files.push(p.as_path());
        }
        for p in &self.params {
            if let Param::File(path, _) = &p.value {
                files.push(path.as_path());
            }
        }
        for (path, _) in self.noise.iter().flatten() {
            files.push(path.as_path());
        }
        files
    }

    /// Reads the data and checks the values: the target's range, finite initial states whose
    /// log density float32 can hold, the noise.
    pub fn read(&self, seed: u64, superchain_size: usize) -> Result<Inputs> {
        let dim = self.shape.dim();
        let mut converted = Vec::new();
        let mut read = |path: &Path| -> Result<Vec<f32>> {
            let array = npy::read_f32(path)?;
            if array.converted_from_f64 {
                crate::note!(
                    "note: {} is float64; converted to float32 (fused-mh computes in float32)",
                    path.display()
                );
                converted.push(path.display().to_string());
            }
            Ok(array.data)
        };
        let mut vector = |p: &Param, what| match p {
            Param::Scalar(v) => Ok(host_memory::filled(what, dim, *v)?),
            Param::File(path, _) => read(path),
        };
        let mut values = Vec::new();
        for p in &self.params {
            values.push(vector(&p.value, p.name)?);
        }
        let target = Target::of_kind(self.target, values).map_err(|e| {
            let name = match &e {
                Error::InvalidParameter { param, .. } => *param,
                Error::LengthMismatch { what, .. } => what,
                _ => self.params[0].name,
            };
            anyhow::Error::new(e).context(format!("--{name} {}", self.param_text(name)))
        })?;
        let (x, init) = match &self.init {
            Init::File(path, _) => {
                let x = read(path)?;
                target
                    .check_states(self.shape, &x)
                    .with_context(|| format!("the initial states in {}", path.display()))?;
                (x, path.display().to_string())
            }
            Init::Generated(dist) => {
                let spread = match dist {
                    InitDist::Normal => Spread::Target,
                    InitDist::Overdispersed => Spread::Overdispersed,
                    InitDist::Zeros => Spread::Zeros,
                };
                let x = initial_states(self.shape, &target, spread, seed, superchain_size)?;
                let what = format!("{dist:?} (seed {seed})").to_lowercase();
                target.check_states(self.shape, &x).with_context(|| {
                    format!(
                        "the initial states --init-dist {}",
                        format!("{dist:?}").to_lowercase()
                    )
                })?;
                (x, what)
            }
        };
        let noise = match &self.noise {
            Some([(n, _), (u, _)]) => Some((read(n)?, read(u)?)),
            None => None,
        };
        Ok(Inputs {
            x,
            target,
            noise,
            init,
            converted,
        })
    }
}

fn check_shape(path: &Path, shape: &[usize], expected: &[usize], what: &str) -> Result<()> {
    ensure!(
        shape == expected,
        "{} has shape {:?}; {what} must have shape {:?}",
        path.display(),
        shape,
        expected
    );
    Ok(())
}

/// A note when `--init` is the final state of an earlier run with the same seed and the run
/// is not resumed: the new run would replay the earlier one's random numbers.
pub fn warn_if_replaying(init: &Path, seed: u64) {
    let Some(dir) = init.parent() else { return };
    if init.file_name() != Some("x.npy".as_ref()) {
        return;
    }
    if let Ok(earlier) = summary::read(if dir.as_os_str().is_empty() {
        Path::new(".")
    } else {
        dir
    }) && earlier.mode == "run"
        && earlier.seed == seed
    {
        crate::note!(
            "warning: {} is the final state of a run with the same seed {seed}: this run \
             replays its random numbers (its chains repeat the earlier proposals). To continue \
             that run, use --resume {}; for new draws, pass another --seed.",
            init.display(),
            dir.display()
        );
    }
}
