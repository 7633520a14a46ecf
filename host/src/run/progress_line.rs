//! The run's progress line: within 80 columns, rates rounded to what a reader compares, and
//! with `--until-rhat` an estimate of when the run is likely to stop rather than when it would
//! reach its `--steps` cap.

use std::time::Duration;

/// Steps per second, rounded: `14.7`, `147`, `1.5k`, `15k`, `1.5M`.
pub(super) fn rate(per_second: f64) -> String {
    match per_second {
        r if !r.is_finite() || r <= 0.0 => "-".to_string(),
        r if r < 100.0 => format!("{r:.1}"),
        r if r < 1e3 => format!("{r:.0}"),
        r if r < 1e4 => format!("{:.1}k", r / 1e3),
        r if r < 1e6 => format!("{:.0}k", r / 1e3),
        r => format!("{:.1}M", r / 1e6),
    }
}

/// A duration in its two largest units: `45s`, `3m05s`, `2h10m`.
pub(super) fn duration(d: Duration) -> String {
    let s = d.as_secs();
    match s {
        0..60 => format!("{s}s"),
        60..3600 => format!("{}m{:02}s", s / 60, s % 60),
        _ => format!("{}h{:02}m", s / 3600, s % 3600 / 60),
    }
}

/// The steps a run of `done` steps (of at most `cap`) still likely takes: to the cap, or, with
/// an R-hat target `until`, to where the worst split R-hat `rhat` would reach it if `rhat - 1`
/// keeps falling as `1 / steps` (as it does for chains that mix: the between-chain variance of
/// the means shrinks with the draws), and never past the cap.
pub(super) fn steps_left(done: u64, cap: u64, rhat: Option<f64>, until: Option<f64>) -> u64 {
    let to_cap = cap.saturating_sub(done);
    match (rhat, until) {
        (Some(r), Some(t)) if r.is_finite() && t > 1.0 && done > 0 => {
            if r < t {
                return 0;
            }
            let likely = done as f64 * (r - 1.0) / (t - 1.0);
            (likely.ceil() as u64).saturating_sub(done).min(to_cap)
        }
        _ => to_cap,
    }
}

/// The message after the bar: the rate, the time left (`~` when it is the early stop's
/// estimate), and at a checkpoint the acceptance, the worst split R-hat and the lowest ESS.
pub(super) fn message(
    per_second: f64,
    left: u64,
    estimated: bool,
    diagnostics: Option<(f64, f64, f64)>,
) -> String {
    let eta = if per_second > 0.0 && per_second.is_finite() {
        duration(Duration::from_secs_f64(left as f64 / per_second))
    } else {
        "-".to_string()
    };
    let mut out = format!(
        "{}/s eta {}{eta}",
        rate(per_second),
        if estimated { "~" } else { "" }
    );
    if let Some((acceptance, rhat, ess)) = diagnostics {
        out += &format!(
            " acc {acceptance:.2} R-hat {rhat:.3} ESS {}",
            rate_free(ess)
        );
    }
    out
}

/// A count rounded as [`rate`] rounds, without the decimal below 100.
fn rate_free(n: f64) -> String {
    if n.is_finite() && n < 100.0 {
        format!("{n:.0}")
    } else {
        rate(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_are_rounded() {
        let got: Vec<String> = [146.8341, 14.66, 1499.0, 14_990.0, 2.4e6, 0.0]
            .map(rate)
            .into();
        assert_eq!(got, ["147", "14.7", "1.5k", "15k", "2.4M", "-"]);
        assert_eq!(duration(Duration::from_secs(185)), "3m05s");
        assert_eq!(duration(Duration::from_secs(7800)), "2h10m");
    }

    #[test]
    fn the_early_stop_is_estimated_from_rhat() {
        // R-hat 1.04 after 1000 steps, target 1.01: (0.04 / 0.01) x 1000 = 4000 steps in all.
        assert_eq!(steps_left(1000, 100_000, Some(1.04), Some(1.01)), 3000);
        // Never past the cap; nothing left once below the target; the cap without a target.
        assert_eq!(steps_left(1000, 2000, Some(1.04), Some(1.01)), 1000);
        assert_eq!(steps_left(1000, 2000, Some(1.005), Some(1.01)), 0);
        assert_eq!(steps_left(1000, 2000, Some(1.04), None), 1000);
        assert_eq!(steps_left(0, 2000, None, Some(1.01)), 2000);
    }

    #[test]
    fn the_line_fits_80_columns() {
        // The bar of 16, the position of the longest run (7 + 1 + 7), and the message.
        let message = message(14_990.0, 3_000_000, true, Some((0.234, 1.0123, 45678.0)));
        let line = format!("{} {}/{} {message}", "#".repeat(16), 9_999_999, 9_999_999);
        assert!(line.len() <= 80, "{} columns: {line}", line.len());
        assert!(
            message.contains("eta ~3m20s") && message.contains("ESS 46k"),
            "{message}"
        );
    }
}
