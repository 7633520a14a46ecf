//! `rhat.svg` (`--rhat-chart`): the worst split R-hat over the dimensions at each checkpoint,
//! against the steps (after the burn-in, if there is one), with the early-stop threshold if
//! there is one; below it, the acceptance rate so far. R-hat is drawn as `R-hat - 1` on a
//! log scale, labelled with R-hat itself, so that 1.001, 1.01 and 18 all show.

use anyhow::{Result, anyhow};
use plotters::prelude::*;

use super::summary::Checkpoint;

/// The lowest `R-hat - 1` the chart shows (R-hat 1.00001); lower values sit on its floor.
const FLOOR: f64 = 1e-5;

/// The chart as SVG text; `threshold` is `--until-rhat`, `burn_in` the steps before the
/// statistics.
pub fn rhat(
    history: &[Checkpoint],
    threshold: Option<f64>,
    burn_in: u64,
    title: &str,
) -> Result<String> {
    let fail = |e: &dyn std::fmt::Display| anyhow!("drawing rhat.svg: {e}");
    let last = history.last().map_or(1, |c| c.step.max(1));
    let excess = |r: f64| (r - 1.0).max(FLOOR);
    let top = history
        .iter()
        .map(|c| c.max_nested_rhat)
        .chain(threshold)
        .filter(|v| v.is_finite())
        .map(excess)
        .fold(0.02f64, f64::max)
        * 2.0;
    let x_desc = if burn_in > 0 {
        format!("steps after the burn-in of {burn_in}")
    } else {
        "steps".to_string()
    };
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (800, 620)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| fail(&e))?;
        let (upper, lower) = root.split_vertically(420);
        let mut chart = ChartBuilder::on(&upper)
            .caption(title, ("sans-serif", 18))
            .margin(15)
            .margin_right(40)
            .x_label_area_size(45)
            .y_label_area_size(90)
            .build_cartesian_2d(0..last, (FLOOR..top).log_scale())
            .map_err(|e| fail(&e))?;
        chart
            .configure_mesh()
            .x_desc(x_desc.as_str())
            .y_desc("worst split R-hat (log scale of R-hat - 1)")
            .y_label_formatter(&|v| format!("{}", 1.0 + v))
            .draw()
            .map_err(|e| fail(&e))?;
        let points = history
            .iter()
            .map(|c| (c.step, excess(c.max_nested_rhat).min(top)));
        chart
            .draw_series(LineSeries::new(points.clone(), BLUE.stroke_width(2)))
            .map_err(|e| fail(&e))?
            .label("worst split R-hat")
            .legend(|(x, y)| PathElement::new([(x, y), (x + 15, y)], BLUE));
        chart
            .draw_series(points.map(|p| Circle::new(p, 3, BLUE.filled())))
            .map_err(|e| fail(&e))?;
        if let Some(t) = threshold {
            chart
                .draw_series(LineSeries::new([(0, excess(t)), (last, excess(t))], RED))
                .map_err(|e| fail(&e))?
                .label(format!("--until-rhat {t}"))
                .legend(|(x, y)| PathElement::new([(x, y), (x + 15, y)], RED));
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperRight)
            .border_style(BLACK)
            .background_style(WHITE)
            .draw()
            .map_err(|e| fail(&e))?;
        let mut acceptance = ChartBuilder::on(&lower)
            .margin(15)
            .margin_right(40)
            .x_label_area_size(45)
            .y_label_area_size(90)
            .build_cartesian_2d(0..last, 0.0..1.0)
            .map_err(|e| fail(&e))?;
        acceptance
            .configure_mesh()
            .x_desc(x_desc.as_str())
            .y_desc("acceptance rate so far")
            .draw()
            .map_err(|e| fail(&e))?;
        let points = history
            .iter()
            .filter_map(|c| c.acceptance_rate.map(|a| (c.step, a)));
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
        let svg = rhat(&history, Some(1.01), 0, "test").expect("drawn");
        assert!(svg.starts_with("<svg") && svg.contains("--until-rhat 1.01"));
        assert!(svg.contains("\nsteps\n") && !svg.contains("burn-in"));
        let burnt = rhat(&history, None, 500, "test").expect("drawn");
        assert!(burnt.contains("steps after the burn-in of 500"));
        assert!(
            svg.matches("<polyline").count() >= 3,
            "R-hat, threshold, acceptance"
        );
    }
}
