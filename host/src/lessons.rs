//! `host lessons`: the lessons of the kernel crate (`kernel/src/gpu/lessons/`) and the
//! production step, each checked against the CPU reference and timed at two sizes against the
//! copy roofline measured in the same run: the table of the README, and its chart.

use std::fmt::Write as _;
use std::path::PathBuf;

use anyhow::{Context, Result, bail};
use clap::Args;
use fused_mh::testing::device_of;
use fused_mh::testing::dispatch::{self, LESSONS};
use fused_mh::{Draws, Gpu};
use plotters::prelude::*;
use serde::Serialize;

use crate::bench::{Mode, Times, bytes_moved, copy_bandwidth, cpu_reference, time_each};
use crate::inputs;
use crate::report_file::ReportFile;

/// The two sizes of the table: short rows (many chains), long rows.
const SIZES: [(usize, usize); 2] = [(1048576, 64), (65536, 1024)];

/// Options of `host lessons`.
#[derive(Args, Debug, Clone)]
pub struct LessonsArgs {
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
    #[arg(long)]
    svg: Option<PathBuf>,
}

/// One lesson at one size.
#[derive(Debug, Serialize)]
struct Measured {
    batch: usize,
    dim: usize,
    gpu: Times,
    copy_fraction: f64,
    check: String,
}

/// One row of the table.
#[derive(Debug, Serialize)]
struct Row {
    number: u32,
    entry: String,
    file: &'static str,
    idea: &'static str,
    sizes: Vec<Measured>,
}

#[derive(Debug, Serialize)]
struct Report {
    gpu: String,
    ptx_target: &'static str,
    git_rev: &'static str,
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
            file: l.file,
            idea: l.idea,
            sizes: Vec::new(),
        })
        .collect();
    rows.push(Row {
        number: 5,
        entry: String::new(),
        file: "kernel/src/gpu/step.rs, entries.rs",
        idea: "production: staged rows, target in shared memory, tiles",
        sizes: Vec::new(),
    });
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
            if row.number == 5 {
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
    let report = Report {
        gpu: gpu.name().to_string(),
        ptx_target: gpu.ptx_target(),
        git_rev: env!("FUSED_MH_GIT_REV"),
        reps: args.reps,
        copy_gbps,
        lessons: rows,
    };
    if let Some(file) = json {
        file.write(&serde_json::to_string_pretty(&report)?)?;
    }
    if let Some(file) = svg {
        file.write(&chart(&report)?)?;
    }
    crate::console::print(&table(&report)?)
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
            ptx_target: "sm_80",
            git_rev: "abc",
            reps: 3,
            copy_gbps: 4000.0,
            lessons: (1..=5)
                .map(|n| Row {
                    number: n,
                    entry: format!("lesson{n}"),
                    file: "f.rs",
                    idea: "an idea",
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
}
