//! `host lessons`: the lessons of the kernel crate (`kernel/src/gpu/lessons/`) and the
//! production step, each checked against the CPU reference and timed at two sizes against the
//! copy roofline measured in the same run: the table of the README, and its chart.
//!
//! `host lessons N` runs lesson `N` alone. The README's table is written by this program, from
//! a report it wrote (`--json`, or `--from-json` to render a committed one without a GPU):
//! `--readme README.md` replaces the lines between the table's two marker comments, and
//! nothing else, so no figure is ever copied by hand.

use std::fmt::Write as _;
use std::path::PathBuf;

use anyhow::{Context, Result, bail};
use clap::Args;
use fused_mh::testing::device_of;
use fused_mh::testing::dispatch::{self, LESSONS};
use fused_mh::{Draws, Gpu, Shape};
use serde::{Deserialize, Serialize};

use crate::bench::{Mode, Times, bytes_moved, copy_bandwidth, cpu_reference, time_each};
use crate::inputs;
use crate::report_file::ReportFile;

mod chart;
mod readme;
use chart::{chart, is_chart};
use readme::{Readme, markdown};

/// The sizes of the table: short rows (many chains), rows of 1024 (a warp's registers full),
/// and rows of 4096 (a block each). Each row of the table runs at the sizes it holds.
const SIZES: [(usize, usize); 3] = [(1048576, 64), (65536, 1024), (16384, 4096)];

/// Options of `host lessons`.
#[derive(Args, Debug, Clone)]
pub struct LessonsArgs {
    /// Run one row of the table alone, by its number: the single-step lessons, then the
    /// production step, the fused lesson and the production fused kernel, the long rows'
    /// lesson and their production step, the fast logarithm's lesson.
    lesson: Option<u32>,
    /// Render an earlier report of this program (its `--json`) instead of measuring: no GPU.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["lesson", "json", "reps", "device", "seed"])]
    from_json: Option<PathBuf>,
    /// Replace the lessons table in this Markdown file (the lines between its two marker
    /// comments, `<!-- lessons table: ... -->` and `<!-- end of the lessons table -->`).
    #[arg(long, value_name = "FILE", conflicts_with = "lesson")]
    readme: Option<PathBuf>,
    /// Timed repetitions per lesson and size (the median is reported).
    #[arg(long, default_value_t = 50)]
    reps: usize,
    /// CUDA device ordinal.
    #[arg(long, default_value_t = 0)]
    device: usize,
    /// Seed of the inputs and of the in-kernel random numbers.
    #[arg(long, default_value_t = 42)]
    seed: u64,
    /// Also write the figures as JSON to this file (a new file, or an earlier lessons report).
    #[arg(long)]
    json: Option<PathBuf>,
    /// Also draw the chart as SVG to this file (a new file, or an earlier lessons chart).
    #[arg(long, conflicts_with = "lesson")]
    svg: Option<PathBuf>,
}

/// One lesson at one size.
#[derive(Debug, Serialize, Deserialize)]
struct Measured {
    batch: usize,
    dim: usize,
    gpu: Times,
    copy_fraction: f64,
    check: String,
}

/// One row of the table.
#[derive(Debug, Serialize, Deserialize)]
struct Row {
    number: u32,
    entry: String,
    file: String,
    idea: String,
    /// The sizes of [`SIZES`] that the row holds, in that order.
    sizes: Vec<Measured>,
}

impl Row {
    /// The row's figures at each of [`SIZES`], None where it does not hold that size.
    fn at_sizes(&self) -> impl Iterator<Item = Option<&Measured>> {
        SIZES
            .iter()
            .map(|&(batch, dim)| self.sizes.iter().find(|m| (m.batch, m.dim) == (batch, dim)))
    }
}

#[derive(Debug, Serialize, Deserialize)]
struct Report {
    gpu: String,
    ptx_target: String,
    git_rev: String,
    reps: usize,
    copy_gbps: f64,
    lessons: Vec<Row>,
}

/// A lessons report written by this program (the only kind `--json` replaces).
fn is_report(text: &str) -> bool {
    serde_json::from_str::<serde_json::Value>(text)
        .is_ok_and(|v| v["git_rev"].is_string() && v["lessons"].is_array())
}

/// `host lessons`.
pub fn run(args: LessonsArgs) -> Result<()> {
    anyhow::ensure!(args.reps >= 1, "--reps must be at least 1");
    crate::signals::install()?;
    let json = args
        .json
        .as_deref()
        .map(|p| ReportFile::prepare(p, "--json", is_report))
        .transpose()?;
    let svg = args
        .svg
        .as_deref()
        .map(|p| ReportFile::prepare(p, "--svg", is_chart))
        .transpose()?;
    let readme = args.readme.as_deref().map(Readme::read).transpose()?;
    let report = match &args.from_json {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("--from-json {}", path.display()))?;
            if !is_report(&text) {
                bail!(
                    "--from-json {}: not a report of host lessons",
                    path.display()
                );
            }
            serde_json::from_str(&text)
                .with_context(|| format!("--from-json {}", path.display()))?
        }
        None => measure(&args)?,
    };
    if let Some(file) = json {
        file.write(&serde_json::to_string_pretty(&report)?)?;
    }
    if let Some(file) = svg {
        file.write(&chart(&report)?)?;
    }
    if let Some(readme) = readme {
        readme.write(&markdown(&report))?;
    }
    crate::console::print(&table(&report)?)
}

/// The number `host lessons N` gives the production step: the one after the last lesson.
fn production_number() -> u32 {
    LESSONS.len() as u32 + 1
}

/// Steps per launch of the fused rows (the fused lesson and the production fused kernel),
/// whose times are given per step.
const FUSED_STEPS: u32 = 100;

/// What a row of the table runs.
#[derive(Clone, Copy)]
enum Kind {
    /// A single-step lesson.
    Lesson(dispatch::Lesson),
    /// The production single step.
    Step,
    /// A fused lesson (11 or 15), `FUSED_STEPS` steps a launch.
    FusedLesson(dispatch::Lesson),
    /// The production fused kernel, `FUSED_STEPS` steps a launch.
    Fused,
    /// The production single step of rows longer than 1024 elements (a block per row).
    BlockRows,
}

impl Kind {
    /// Whether this row runs at `shape`, as the dispatcher says: a lesson where it holds the
    /// row, the production step where it is not a block per row (that is row `BlockRows`),
    /// the fused kernel where the row fits its registers.
    fn holds(self, shape: Shape, device: dispatch::Device) -> bool {
        let draws = Draws::<()>::Philox { seed: 0, step: 0 };
        let block_rows = dispatch::step(shape, &draws, device)
            .entry
            .contains("block_rows");
        match self {
            Kind::Lesson(l) | Kind::FusedLesson(l) => dispatch::lesson(l, shape, device).is_some(),
            Kind::Step => !block_rows,
            Kind::BlockRows => block_rows,
            Kind::Fused => dispatch::fused(shape, false, false, device).is_some(),
        }
    }
}

/// The table's rows: the single-step lessons, the production step, the fused lesson, the
/// production fused kernel, the long rows' lesson, the production step of long rows, the
/// fast logarithm's lesson.
fn rows() -> Vec<(Kind, Row)> {
    let row = |number, entry: String, file: &str, idea: &str| Row {
        number,
        entry,
        file: file.into(),
        idea: idea.into(),
        sizes: Vec::new(),
    };
    let lesson = |l: &dispatch::Lesson| row(l.number, l.entries.join(", "), l.file, l.idea);
    let mut rows: Vec<(Kind, Row)> = LESSONS
        .iter()
        .map(|l| (Kind::Lesson(*l), lesson(l)))
        .collect();
    let (step, fused) = (production_number(), dispatch::FUSED_LESSON.number + 1);
    let files = "kernel/src/gpu/step.rs, entries.rs";
    let idea = "production: the next row staged in shared memory by cp.async";
    rows.push((Kind::Step, row(step, String::new(), files, idea)));
    let fused_lesson = dispatch::FUSED_LESSON;
    rows.push((Kind::FusedLesson(fused_lesson), lesson(&fused_lesson)));
    let idea =
        "production fused: next normals during the sum, shared uniforms, target in shared memory";
    rows.push((
        Kind::Fused,
        row(fused, String::new(), "kernel/src/gpu/chain.rs", idea),
    ));
    let long = dispatch::LONG_ROW_LESSON;
    rows.push((Kind::Lesson(long), lesson(&long)));
    let idea = "production long rows: the next row loaded ahead, one barrier a row, one wave";
    let file = "kernel/src/gpu/block_rows.rs";
    rows.push((
        Kind::BlockRows,
        row(long.number + 1, String::new(), file, idea),
    ));
    let fast_log = dispatch::FAST_LOG_LESSON;
    rows.push((Kind::FusedLesson(fast_log), lesson(&fast_log)));
    rows
}

/// Checks and times the lessons (or the one `args.lesson` names) on the GPU.
fn measure(args: &LessonsArgs) -> Result<Report> {
    let mut rows = rows();
    let last = rows.len() as u32;
    if let Some(n) = args.lesson
        && !(1..=last).contains(&n)
    {
        let (fused, long) = (
            dispatch::FUSED_LESSON.number,
            dispatch::LONG_ROW_LESSON.number,
        );
        bail!(
            "lesson {n}: the rows are 1 to {last} (lessons 1 to {}, {} the production step, \
             {fused} the fused lesson, {} the production fused kernel, {long} the long rows' \
             lesson, {} their production step, {last} the fast logarithm's lesson)",
            LESSONS.len(),
            production_number(),
            fused + 1,
            long + 1,
        );
    }
    rows.retain(|(_, r)| args.lesson.is_none_or(|n| n == r.number));
    let gpu = match Gpu::open(args.device) {
        Ok(gpu) => gpu,
        Err(e) => bail!("the lessons run on a GPU: {e}"),
    };
    let copy_gbps = copy_bandwidth(&gpu, args.reps)?;
    for (batch, dim) in SIZES {
        let inputs = inputs::generate(batch, dim, args.seed, false)?;
        let shape = inputs.shape;
        let (reference, _, _) = cpu_reference(&inputs, Mode::Rng, 0)?;
        let target = gpu.upload_target(&inputs.target)?;
        // The fused rows' check: FUSED_STEPS production single steps from the inputs.
        let mut fused_reference: Option<Vec<u32>> = None;
        for (kind, row) in &mut rows {
            let kind = *kind;
            if !kind.holds(shape, device_of(&gpu)) {
                continue;
            }
            // Each row starts from the same states: the check compares its first launch.
            let mut chains = gpu.upload_chains(&inputs.x, shape)?;
            let mut stats = gpu.new_stats(shape, false)?;
            let config = &inputs.config;
            let mut launch = |chains: &mut fused_mh::DeviceChains| -> Result<()> {
                match kind {
                    Kind::Lesson(l) => gpu.step_lesson(l, chains, &target, config)?,
                    Kind::Step | Kind::BlockRows => gpu.step(chains, &target, config)?,
                    Kind::FusedLesson(l) => {
                        gpu.steps_lesson(l, chains, &target, config, FUSED_STEPS, &mut stats)?
                    }
                    Kind::Fused => gpu.steps(chains, &target, config, FUSED_STEPS, &mut stats)?,
                }
                Ok(())
            };
            chains.set_step_counter(0);
            chains.poison_outputs(f32::NAN, 0xAA)?;
            // Lesson 11's normals take the CPU's logarithm, not the production kernels': its
            // check is one step of it against the CPU reference, as the single steps' is.
            let against_cpu = matches!(kind, Kind::FusedLesson(l) if l == dispatch::FUSED_LESSON);
            let mut one_step = gpu.new_stats(shape, false)?;
            match against_cpu {
                true => {
                    let lesson = dispatch::FUSED_LESSON;
                    gpu.steps_lesson(lesson, &mut chains, &target, config, 1, &mut one_step)?
                }
                false => launch(&mut chains)?,
            }
            let x = chains.x()?;
            let one_step_check =
                against_cpu || matches!(kind, Kind::Lesson(_) | Kind::Step | Kind::BlockRows);
            let check = match one_step_check {
                true => {
                    // Poisoned outputs, one step, the first rows against the CPU reference.
                    let rows_checked = reference.accepted.len();
                    let flags = match against_cpu {
                        // One step: each row's accepted count is its flag.
                        true => one_step
                            .accepted_counts()?
                            .iter()
                            .map(|&c| c as u8)
                            .collect(),
                        false => chains.accepted_flags()?,
                    };
                    match reference.compare(
                        &x[..rows_checked * dim],
                        &flags[..rows_checked],
                        config.step_size(),
                    ) {
                        Ok(a) => format!("ok ({} flips)", a.boundary_flips),
                        Err(e) => format!("FAILED: {e}"),
                    }
                }
                false => {
                    if fused_reference.is_none() {
                        let mut single = gpu.upload_chains(&inputs.x, shape)?;
                        for _ in 0..FUSED_STEPS {
                            gpu.step(&mut single, &target, config)?;
                        }
                        fused_reference = Some(single.x()?.iter().map(|v| v.to_bits()).collect());
                    }
                    let bits: Vec<u32> = x.iter().map(|v| v.to_bits()).collect();
                    match Some(bits) == fused_reference {
                        true => format!("ok (= {FUSED_STEPS} single steps)"),
                        false => format!("FAILED: not {FUSED_STEPS} single steps' states"),
                    }
                }
            };
            if matches!(kind, Kind::Step | Kind::BlockRows) {
                let draws = Draws::<()>::Philox { seed: 0, step: 0 };
                let production = dispatch::step(shape, &draws, device_of(&gpu));
                if !row.entry.contains(production.entry) {
                    let sep = if row.entry.is_empty() { "" } else { ", " };
                    row.entry = format!("{}{sep}{}", row.entry, production.entry);
                }
            }
            let times = time_each(&gpu, 3, args.reps, || launch(&mut chains))
                .with_context(|| format!("lesson {} at {batch} x {dim}", row.number))?;
            // The fused rows' times per step, as the single steps'.
            let per_step = match kind {
                Kind::FusedLesson(_) | Kind::Fused => f64::from(FUSED_STEPS),
                _ => 1.0,
            };
            let times = Times {
                min_us: times.min_us / per_step,
                median_us: times.median_us / per_step,
                max_us: times.max_us / per_step,
            };
            let gbps = bytes_moved(Mode::Rng, shape) as f64 / (times.median_us * 1e-6) / 1e9;
            row.sizes.push(Measured {
                batch,
                dim,
                gpu: times,
                copy_fraction: gbps / copy_gbps,
                check,
            });
        }
    }
    Ok(Report {
        gpu: gpu.name().to_string(),
        ptx_target: gpu.ptx_target().to_string(),
        git_rev: env!("FUSED_MH_GIT_REV").to_string(),
        reps: args.reps,
        copy_gbps,
        lessons: rows.into_iter().map(|(_, r)| r).collect(),
    })
}

/// The table: lesson, file, idea, and per size the median time and the share of the copy
/// bandwidth.
fn table(report: &Report) -> Result<String, std::fmt::Error> {
    let mut out = String::new();
    writeln!(
        out,
        "{} ({}), git {}: copy {:.0} GB/s; median of {} steps",
        report.gpu, report.ptx_target, report.git_rev, report.copy_gbps, report.reps
    )?;
    write!(out, "{:<3} {:<46} {:<52}", "#", "file", "idea")?;
    for (b, d) in SIZES {
        write!(out, " {:>18}", format!("us/%copy {b}x{d}"))?;
    }
    writeln!(out, "  check")?;
    for row in &report.lessons {
        write!(out, "{:<3} {:<46} {:<52}", row.number, row.file, row.idea)?;
        for m in row.at_sizes() {
            let cell = m.map_or("-".into(), |m| {
                format!("{:.1} / {:.1} %", m.gpu.median_us, 100.0 * m.copy_fraction)
            });
            write!(out, " {cell:>18}")?;
        }
        let checks: Vec<&str> = row.sizes.iter().map(|m| m.check.as_str()).collect();
        writeln!(out, "  {}", checks.join(", "))?;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::readme::{TABLE_BEGIN, TABLE_END};
    use super::*;

    fn report() -> Report {
        // The first two sizes, and not the third.
        let measured = |f: f64, (batch, dim)| Measured {
            batch,
            dim,
            gpu: Times::of(vec![1.0, 2.0, 3.0]),
            copy_fraction: f,
            check: "ok (0 flips)".into(),
        };
        Report {
            gpu: "a GPU".into(),
            ptx_target: "sm_80".into(),
            git_rev: "abc".into(),
            reps: 3,
            copy_gbps: 4000.0,
            lessons: (1..=5)
                .map(|n| Row {
                    number: n,
                    entry: format!("lesson{n}"),
                    file: "f.rs".into(),
                    idea: "an idea".into(),
                    sizes: vec![
                        measured(0.1 * f64::from(n), SIZES[0]),
                        measured(0.15 * f64::from(n), SIZES[1]),
                    ],
                })
                .collect(),
        }
    }

    /// The chart is an SVG with one bar per lesson and size, and is recognized as ours; the
    /// table has a line per lesson with its times.
    #[test]
    fn chart_and_table() {
        let r = report();
        let svg = chart(&r).expect("drawn");
        assert!(is_chart(&svg), "{}", &svg[..200.min(svg.len())]);
        assert!(svg.matches("<rect").count() >= 10, "bars missing");
        let text = table(&r).expect("table");
        assert_eq!(text.lines().count(), 2 + 5);
        assert!(
            text.contains("2.0 / 50.0 %") && text.contains("2.0 / 75.0 %"),
            "{text}"
        );
        // The size a row does not hold is a dash.
        assert!(
            text.lines().nth(3).is_some_and(|l| l.contains(" -  ok")),
            "{text}"
        );
        assert!(is_report(&serde_json::to_string(&r).expect("json")));
        assert!(!is_report("{\"rows\": []}") && !is_chart("<svg></svg>"));
    }

    /// The README's table comes from the report, and `--readme` replaces exactly the lines
    /// between the markers: the text around them is kept byte for byte, a file without them is
    /// refused, and the report's JSON renders the same table again.
    #[test]
    fn readme_table_between_the_markers() {
        let r = report();
        let table = markdown(&r);
        assert_eq!(table.lines().count(), 2 + 2 + 5 + 2, "{table}");
        assert!(
            table.contains("| 2 | `f.rs` | an idea | 2.0 | 20.0 | 2.0 | 30.0 | – | – |"),
            "{table}"
        );
        let back: Report = serde_json::from_str(&serde_json::to_string(&r).unwrap()).unwrap();
        assert_eq!(markdown(&back), table);

        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("README.md");
        let (head, tail) = ("# Title\nsome text\n", "\nmore text\n");
        let old = format!("{head}{TABLE_BEGIN}\nold table\n{TABLE_END}{tail}");
        std::fs::write(&path, &old).unwrap();
        Readme::read(&path).unwrap().write(&table).unwrap();
        let new = std::fs::read_to_string(&path).unwrap();
        assert_eq!(
            new,
            format!("{head}{TABLE_BEGIN}\n{table}{TABLE_END}{tail}")
        );
        std::fs::write(&path, "no markers\n").unwrap();
        assert!(Readme::read(&path).is_err());
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "no markers\n");
    }
}
