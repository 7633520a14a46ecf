//! The benchmark's human report.

use std::fmt::Write as _;

use super::{AddedCost, Report};

/// The human report: the table of configurations, the launch-bound figure, the fused rows.
pub(super) fn table(report: &Report) -> Result<String, std::fmt::Error> {
    let mut out = String::new();
    if let Some(c) = report.copy_gbps {
        writeln!(
            out,
            "device-to-device copy: {c:.0} GB/s (read + write), the roofline below"
        )?;
    }
    writeln!(
        out,
        "{:<6} {:>8} {:>5} {:>26} {:>9} {:>7} {:>6} {:>10} {:>12} {:>10} {:>8} {:<14} target",
        "mode",
        "batch",
        "dim",
        "GPU us min/med/max",
        "MB",
        "GB/s",
        "%copy",
        "Gupd/s",
        "CPU ms",
        "CPU Mupd/s",
        "speedup",
        "check",
    )?;
    for r in &report.rows {
        let gpu = r.gpu.map_or("-".into(), |t| {
            format!("{:.2}/{:.2}/{:.2}", t.min_us, t.median_us, t.max_us)
        });
        let opt = |v: Option<f64>, scale: f64, prec: usize| {
            v.map_or("-".into(), |v| format!("{:.*}", prec, v * scale))
        };
        let cpu = match r.cpu_sampled_rows {
            Some(rows) => format!("{:.1}*", r.cpu_ms).to_string() + &format!("({rows})"),
            None => format!("{:.2}", r.cpu_ms),
        };
        let target = match (r.target_fraction, r.target_met) {
            (Some(t), Some(true)) => format!(">={:.0}% met", t * 100.0),
            (Some(t), Some(false)) => format!(">={:.0}% MISSED", t * 100.0),
            (Some(t), None) => format!(">={:.0}%", t * 100.0),
            _ => String::new(),
        };
        writeln!(
            out,
            "{:<6} {:>8} {:>5} {:>26} {:>9.1} {:>7} {:>6} {:>10} {:>12} {:>10.1} {:>8} {:<14} {}",
            format!("{:?}", r.mode).to_lowercase(),
            r.batch,
            r.dim,
            gpu,
            r.bytes as f64 / 1e6,
            opt(r.gbps, 1.0, 0),
            opt(r.copy_fraction, 100.0, 1),
            opt(r.updates_per_s, 1e-9, 1),
            cpu,
            r.cpu_updates_per_s * 1e-6,
            opt(r.speedup, 1.0, 0),
            r.check,
            target
        )?;
    }
    if report.rows.iter().any(|r| r.cpu_sampled_rows.is_some()) {
        writeln!(
            out,
            "* CPU reference ({} threads) run on the first (N) rows and scaled to the batch",
            report.cpu_threads
        )?;
    }
    if let Some(lb) = &report.launch_bound {
        writeln!(
            out,
            "back to back, {}x{}, {} steps: {:.2} us/step on a stream, {} us/step as a CUDA graph (target <= {} us: {})",
            lb.batch,
            lb.dim,
            lb.steps,
            lb.stream_us_per_step,
            lb.graph_us_per_step
                .map_or("-".into(), |g| format!("{g:.2}")),
            lb.target_us,
            if lb.target_met { "met" } else { "MISSED" }
        )?;
    }
    if !report.fused.is_empty() {
        writeln!(out, "fused: K steps per launch, the state in registers")?;
        writeln!(
            out,
            "{:>8} {:>5} {:>5} {:>28} {:>10} {:>10}  {:<36} target",
            "batch", "dim", "K", "GPU us/launch min/med/max", "us/step", "Gupd/s", "check"
        )?;
    }
    for f in &report.fused {
        let target = match (f.target_us, f.target_met) {
            (Some(t), Some(true)) => format!("<={t} us/step met"),
            (Some(t), _) => format!("<={t} us/step MISSED"),
            _ => String::new(),
        };
        writeln!(
            out,
            "{:>8} {:>5} {:>5} {:>28} {:>10.3} {:>10.1}  {:<36} {}",
            f.batch,
            f.dim,
            f.steps_per_launch,
            format!(
                "{:.1}/{:.1}/{:.1}",
                f.gpu.min_us, f.gpu.median_us, f.gpu.max_us
            ),
            f.us_per_step,
            f.updates_per_s * 1e-9,
            f.check,
            target
        )?;
    }
    if let Some(d) = &report.diagnostics_cost {
        let what = "split diagnostics over a 1000-step run";
        added_cost_line(
            &mut out,
            what,
            "run",
            "with moments",
            "with the diagnostics",
            d,
        )?;
    }
    if let Some(d) = &report.scales_cost {
        let what = "per-dimension proposal scales";
        added_cost_line(
            &mut out,
            what,
            "launch",
            "with the step size",
            "with scales",
            d,
        )?;
    }
    if let Some(m) = &report.model_kernel {
        writeln!(
            out,
            "model kernel, logistic regression ({} rows, 2 coefficients), {} chains x {} \
             steps: {:.1} ms a call (median), SFU floor {:.1} ms: {:.0} % of the floor",
            m.rows,
            m.chains,
            m.steps,
            m.call.median_us * 1e-3,
            m.floor_us * 1e-3,
            100.0 * m.fraction_of_floor
        )?;
    }
    Ok(out)
}

/// One line of what something added to a fused launch (or run: `per`) costs, and whether that
/// met its target.
fn added_cost_line(
    out: &mut String,
    what: &str,
    per: &str,
    alone: &str,
    with: &str,
    d: &AddedCost,
) -> std::fmt::Result {
    writeln!(
        out,
        "{what}, {}x{}, K = {}: {:.1} us/{per} {alone}, {:.1} {with} ({:+.1} %, target <= \
         {:.0} %: {})",
        d.batch,
        d.dim,
        d.steps_per_launch,
        d.launch.median_us,
        d.launch_with.median_us,
        100.0 * d.fraction,
        100.0 * d.target_fraction,
        if d.fraction <= d.target_fraction {
            "met"
        } else {
            "MISSED"
        }
    )
}
