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
use fused_mh::{Draws, Gpu};
use plotters::prelude::*;
use serde::{Deserialize, Serialize};

use crate::bench::{Mode, Times, bytes_moved, copy_bandwidth, cpu_reference, time_each};
use crate::inputs;
use crate::report_file::ReportFile;

/// The two sizes of the table: short rows (many chains), long rows.
const SIZES: [(usize, usize); 2] = [(1048576, 64), (65536, 1024)];

/// Options of `host lessons`.
#[derive(Args, Debug, Clone)]
pub struct LessonsArgs {
    /// Run this lesson alone (1, 2, ...; the number after the last is the production step).
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
    sizes: Vec<Measured>,
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

/// A chart written by this program (the only kind `--svg` replaces).
fn is_chart(text: &str) -> bool {
    text.trim_start().starts_with("<svg") && text.contains(CHART_TITLE)
}

const CHART_TITLE: &str = "fused-mh lessons";

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

/// Checks and times the lessons (or the one `args.lesson` names) on the GPU.
fn measure(args: &LessonsArgs) -> Result<Report> {
    let production = production_number();
    if let Some(n) = args.lesson
        && !(1..=production).contains(&n)
    {
        bail!(
            "lesson {n}: the lessons are 1 to {} and {production} is the production step",
            production - 1
        );
    }
    let gpu = match Gpu::open(args.device) {
        Ok(gpu) => gpu,
        Err(e) => bail!("the lessons run on a GPU: {e}"),
    };
    let copy_gbps = copy_bandwidth(&gpu, args.reps)?;
    let mut rows: Vec<Row> = LESSONS
        .iter()
        .map(|l| Row {
            number: l.number,
            entry: l.entries.join(", "),
            file: l.file.to_string(),
            idea: l.idea.to_string(),
            sizes: Vec::new(),
        })
        .collect();
    rows.push(Row {
        number: production,
        entry: String::new(),
        file: "kernel/src/gpu/step.rs, entries.rs".into(),
        idea: "production: staged rows, target in shared memory, tiles".into(),
        sizes: Vec::new(),
    });
    rows.retain(|r| args.lesson.is_none_or(|n| n == r.number));
    for (batch, dim) in SIZES {
        let inputs = inputs::generate(batch, dim, args.seed, false)?;
        let shape = inputs.shape;
        let step = 0;
        let (reference, _, _) = cpu_reference(&inputs, Mode::Rng, step)?;
        let target = gpu.upload_target(&inputs.target)?;
        for row in &mut rows {
            // Each lesson starts from the same states: the check compares one step from them.
            let mut chains = gpu.upload_chains(&inputs.x, shape)?;
            let lesson = LESSONS.iter().find(|l| l.number == row.number).copied();
            let one_step = |chains: &mut fused_mh::DeviceChains| -> Result<()> {
                match lesson {
                    Some(l) => gpu.step_lesson(l, chains, &target, &inputs.config)?,
                    None => gpu.step(chains, &target, &inputs.config)?,
                }
                Ok(())
            };
            // Correct first: poisoned outputs, one step from the inputs, the first rows
            // compared with the CPU reference.
            chains.set_step_counter(step);
            chains.poison_outputs(f32::NAN, 0xAA)?;
            one_step(&mut chains)?;
            let rows_checked = reference.accepted.len();
            let (x, flags) = (chains.x()?, chains.accepted_flags()?);
            let check = match reference.compare(
                &x[..rows_checked * dim],
                &flags[..rows_checked],
                inputs.config.step_size(),
            ) {
                Ok(a) => format!("ok ({} flips)", a.boundary_flips),
                Err(e) => format!("FAILED: {e}"),
            };
            if row.number == production {
                let production = dispatch::step(
                    shape,
                    &Draws::<()>::Philox { seed: 0, step: 0 },
                    device_of(&gpu),
                );
                if !row.entry.contains(production.entry) {
                    let sep = if row.entry.is_empty() { "" } else { ", " };
                    row.entry = format!("{}{sep}{}", row.entry, production.entry);
                }
            }
            let times = time_each(&gpu, 3, args.reps, || one_step(&mut chains))
                .with_context(|| format!("lesson {} at {batch} x {dim}", row.number))?;
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
        lessons: rows,
    })
}

/// The README's table: a row per lesson, the file, the idea, and per size the median time and
/// the share of the copy bandwidth, with where and when it was measured.
fn markdown(report: &Report) -> String {
    let mut out = format!(
        "On the {} ({}, git {}, median of {} steps, copy {:.0} GB/s), written by `host lessons \
         --readme`:\n\n| # | file | idea |",
        report.gpu, report.ptx_target, report.git_rev, report.reps, report.copy_gbps
    );
    for (b, d) in SIZES {
        out += &format!(" ({b}, {d}) µs | % copy |");
    }
    out += "\n|---|---|---|";
    out += &"---|---|".repeat(SIZES.len());
    for row in &report.lessons {
        let files: Vec<String> = row.file.split(", ").map(|f| format!("`{f}`")).collect();
        out += &format!("\n| {} | {} | {} |", row.number, files.join(", "), row.idea);
        for m in &row.sizes {
            out += &format!(" {:.1} | {:.1} |", m.gpu.median_us, 100.0 * m.copy_fraction);
        }
    }
    out + "\n"
}

/// A Markdown file with the lessons table between two marker lines.
struct Readme {
    path: PathBuf,
    before: String,
    after: String,
}

/// The marker lines (HTML comments: invisible when rendered).
const TABLE_BEGIN: &str = "<!-- lessons table: written by `host lessons --readme`, do not edit -->";
const TABLE_END: &str = "<!-- end of the lessons table -->";

impl Readme {
    /// Reads `path` and finds the markers, before anything is measured.
    fn read(path: &std::path::Path) -> Result<Self> {
        let shown = path.display();
        let text = std::fs::read_to_string(path).with_context(|| format!("--readme {shown}"))?;
        let (Some(begin), Some(end)) = (text.find(TABLE_BEGIN), text.find(TABLE_END)) else {
            bail!("--readme {shown}: no lines {TABLE_BEGIN} and {TABLE_END} to write between");
        };
        if end < begin {
            bail!("--readme {shown}: the end marker comes before the beginning");
        }
        let split = begin + TABLE_BEGIN.len();
        Ok(Self {
            path: path.to_path_buf(),
            before: text[..split].to_string(),
            after: text[end..].to_string(),
        })
    }

    /// Writes the file with `table` between the markers: a new file beside it, renamed over it.
    fn write(self, table: &str) -> Result<()> {
        let dir = self.path.parent().filter(|p| !p.as_os_str().is_empty());
        let mut temp = tempfile::NamedTempFile::new_in(dir.unwrap_or(std::path::Path::new(".")))?;
        use std::io::Write as _;
        write!(temp, "{}\n{table}{}", self.before, self.after)?;
        // The file keeps its permissions (a new temporary file has 0600).
        let permissions = std::fs::metadata(&self.path)?.permissions();
        temp.as_file().set_permissions(permissions)?;
        temp.persist(&self.path)
            .with_context(|| format!("--readme {}", self.path.display()))?;
        Ok(())
    }
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
        for m in &row.sizes {
            let cell = format!("{:.1} / {:.1} %", m.gpu.median_us, 100.0 * m.copy_fraction);
            write!(out, " {cell:>18}")?;
        }
        let checks: Vec<&str> = row.sizes.iter().map(|m| m.check.as_str()).collect();
        writeln!(out, "  {}", checks.join(", "))?;
    }
    Ok(out)
}

/// The chart: per lesson, one bar per size, the share of the copy bandwidth.
fn chart(report: &Report) -> Result<String> {
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (900, 480)).into_drawing_area();
        root.fill(&WHITE).map_err(draw_error)?;
        let n = report.lessons.len() as f64;
        let mut chart = ChartBuilder::on(&root)
            .caption(
                format!("{CHART_TITLE}: % of copy bandwidth, {}", report.gpu),
                ("sans-serif", 20),
            )
            .margin(15)
            .x_label_area_size(40)
            .y_label_area_size(50)
            .build_cartesian_2d(0.5..n + 0.5, 0.0..100.0)
            .map_err(draw_error)?;
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_labels(report.lessons.len())
            .x_label_formatter(&|v| format!("lesson {}", v.round()))
            .y_desc("% of device-to-device copy bandwidth")
            .draw()
            .map_err(draw_error)?;
        let colors = [RGBColor(31, 119, 180), RGBColor(255, 127, 14)];
        for (s, (batch, dim)) in SIZES.iter().enumerate() {
            let color = colors[s];
            let bars = report.lessons.iter().map(|row| {
                let x = f64::from(row.number) - 0.35 + 0.35 * s as f64;
                let y = 100.0 * row.sizes[s].copy_fraction;
                Rectangle::new([(x, 0.0), (x + 0.33, y)], color.filled())
            });
            chart
                .draw_series(bars)
                .map_err(draw_error)?
                .label(format!("batch {batch} x dim {dim}"))
                .legend(move |(x, y)| {
                    Rectangle::new([(x, y - 5), (x + 10, y + 5)], color.filled())
                });
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperLeft)
            .border_style(BLACK)
            .background_style(WHITE)
            .draw()
            .map_err(draw_error)?;
        root.present().map_err(draw_error)?;
    }
    Ok(svg)
}

fn draw_error<E: std::fmt::Display>(e: E) -> anyhow::Error {
    anyhow::anyhow!("drawing the chart: {e}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report() -> Report {
        let measured = |f: f64| Measured {
            batch: 1,
            dim: 1,
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
                    sizes: vec![measured(0.1 * f64::from(n)), measured(0.15 * f64::from(n))],
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
        assert_eq!(table.lines().count(), 2 + 2 + 5, "{table}");
        assert!(
            table.contains("| 2 | `f.rs` | an idea | 2.0 | 20.0 | 2.0 | 30.0 |"),
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
