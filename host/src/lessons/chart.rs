//! The lessons chart: per row, one bar per size, the share of the copy bandwidth (SVG).

use anyhow::Result;
use plotters::prelude::*;

use super::{Report, SIZES};

/// A chart written by this program (the only kind `--svg` replaces).
pub(super) fn is_chart(text: &str) -> bool {
    text.trim_start().starts_with("<svg") && text.contains(CHART_TITLE)
}

pub(super) const CHART_TITLE: &str = "fused-mh lessons";

/// The chart: per lesson, one bar per size, the share of the copy bandwidth.
pub(super) fn chart(report: &Report) -> Result<String> {
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
        let colors = [
            RGBColor(31, 119, 180),
            RGBColor(255, 127, 14),
            RGBColor(44, 160, 44),
        ];
        let width = 0.9 / SIZES.len() as f64;
        for (s, (batch, dim)) in SIZES.iter().enumerate() {
            let color = colors[s % colors.len()];
            // A bar where the row holds the size.
            let bars = report.lessons.iter().filter_map(|row| {
                let x = f64::from(row.number) - 0.45 + width * s as f64;
                let y = 100.0 * row.at_sizes().nth(s)??.copy_fraction;
                Some(Rectangle::new([(x, 0.0), (x + width, y)], color.filled()))
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
