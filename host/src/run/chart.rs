//! `rhat.svg` (`--rhat-chart`): the worst nested R-hat over the dimensions after each launch,
//! against the steps after the burn-in, with the early-stop threshold if there is one; below
//! it, the acceptance rate so far.

use anyhow::{Result, anyhow};
use plotters::prelude::*;

use super::summary::Checkpoint;

/// The chart as SVG text; `threshold` is `--until-rhat`.
pub fn rhat(history: &[Checkpoint], threshold: Option<f64>, title: &str) -> Result<String> {
    let fail = |e: &dyn std::fmt::Display| anyhow!("drawing rhat.svg: {e}");
    let last = history.last().map_or(1, |c| c.step.max(1)) as f64;
    let top = history
        .iter()
        .map(|c| c.max_nested_rhat)
        .chain(threshold)
        .filter(|v| v.is_finite())
        .fold(1.02f64, f64::max);
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (800, 620)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| fail(&e))?;
        let (upper, lower) = root.split_vertically(420);
        let mut chart = ChartBuilder::on(&upper)
            .caption(title, ("sans-serif", 18))
            .margin(15)
            .x_label_area_size(40)
            .y_label_area_size(60)
            .build_cartesian_2d(0.0..last, 1.0..top)
            .map_err(|e| fail(&e))?;
        chart
            .configure_mesh()
            .x_desc("steps after the burn-in")
            .y_desc("worst nested R-hat over the dimensions")
            .draw()
            .map_err(|e| fail(&e))?;
        let points = history
            .iter()
            .map(|c| (c.step as f64, c.max_nested_rhat.min(top)));
        chart
            .draw_series(LineSeries::new(points, BLUE.stroke_width(2)))
            .map_err(|e| fail(&e))?
            .label("worst nested R-hat")
            .legend(|(x, y)| PathElement::new([(x, y), (x + 15, y)], BLUE));
        if let Some(t) = threshold {
            chart
                .draw_series(LineSeries::new([(0.0, t), (last, t)], RED))
                .map_err(|e| fail(&e))?
                .label(format!("--until-rhat {t}"))
                .legend(|(x, y)| PathElement::new([(x, y), (x + 15, y)], RED));
        }
        chart
            .configure_series_labels()
            .border_style(BLACK)
            .background_style(WHITE)
            .draw()
            .map_err(|e| fail(&e))?;
        let mut acceptance = ChartBuilder::on(&lower)
            .margin(15)
            .x_label_area_size(40)
            .y_label_area_size(60)
            .build_cartesian_2d(0.0..last, 0.0..1.0)
            .map_err(|e| fail(&e))?;
        acceptance
            .configure_mesh()
            .x_desc("steps after the burn-in")
            .y_desc("acceptance rate so far")
            .draw()
            .map_err(|e| fail(&e))?;
        let points = history
            .iter()
            .filter_map(|c| c.acceptance_rate.map(|a| (c.step as f64, a)));
        acceptance
            .draw_series(LineSeries::new(points, GREEN.stroke_width(2)))
            .map_err(|e| fail(&e))?;
        root.present().map_err(|e| fail(&e))?;
    }
    Ok(svg)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn draws_the_line_and_the_threshold() {
        let history: Vec<Checkpoint> = (1..=5)
            .map(|i| Checkpoint {
                step: 100 * i,
                max_nested_rhat: 1.0 + 0.5 / i as f64,
                min_ess: 10.0 * i as f64,
                acceptance_rate: Some(0.3),
            })
            .collect();
        let svg = rhat(&history, Some(1.01), "test").expect("drawn");
        assert!(svg.starts_with("<svg") && svg.contains("--until-rhat 1.01"));
        assert!(
            svg.matches("<polyline").count() >= 3,
            "R-hat, threshold, acceptance"
        );
    }
}
