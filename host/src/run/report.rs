//! The human summary a run prints: what ran, the verdict on convergence, the warnings, and
//! the dimensions worst first.

use std::fmt::Write as _;

use fused_mh::Target;
use fused_mh::reach::Unreachable;

use super::summary::{Stats, Summary};

/// The dimensions the table shows.
const SHOWN: usize = 16;

/// The human summary: acceptance rate, the diagnostics' verdict and warnings, and per
/// dimension (the worst split R-hat first) the pooled mean and variance over all chains and
/// steps against mu and sigma^2. `unreachable`: the dimensions where the final proposal
/// cannot move a state (after a warm-up adapted it).
pub fn describe(
    summary: &Summary,
    target: &Target,
    stats: &Stats,
    unreachable: &[Unreachable],
) -> String {
    let (b, d) = (summary.batch, summary.dim);
    let mut text = format!(
        "{} chains x {} dims, {} steps on {}: acceptance rate {:.4}\n",
        b, d, summary.steps, summary.device, summary.acceptance_rate
    );
    if let Some(w) = &summary.warmup {
        let _ = writeln!(
            text,
            "warm-up of {} steps: step size {} -> {} (last acceptance {:.3}, target {})",
            w.steps, w.initial_step_size, summary.step_size, w.last_acceptance, w.target_accept
        );
    }
    if let Some(s) = &summary.scales {
        let (lo, hi) = s.iter().fold((f32::INFINITY, 0.0f32), |(lo, hi), &v| {
            (lo.min(v), hi.max(v))
        });
        let _ = writeln!(
            text,
            "per-dimension proposal scales from {lo:.4} to {hi:.4} times the step size \
             (summary.json: scales)"
        );
    }
    if summary.burn_in > 0 {
        let _ = writeln!(
            text,
            "after a burn-in of {} steps, which the statistics leave out",
            summary.burn_in
        );
    }
    if let Some(n) = &summary.nonfinite
        && (n.total > 0 || n.before_statistics > 0)
    {
        let _ = writeln!(
            text,
            "WARNING: {} steps of {} chains had a non-finite log alpha (NaN or infinity in a \
             state or proposal; such steps are never accepted), and {} before the statistics: \
             see nonfinite_count.npy",
            n.total, n.chains, n.before_statistics
        );
    }
    if let Some(n) = &summary.null_moves
        && n.worst_chain_fraction > super::summary::NULL_MOVES_WARNED
    {
        let _ = writeln!(
            text,
            "WARNING: {} steps of {} chains ({:.2} % of all steps, up to {:.1} % of one chain's) \
             were null moves: the proposal rounded back to the state in float32, an accepted \
             step that moves nothing (states too large for the proposal's scale; see \
             null_move_count.npy)",
            n.total,
            n.chains,
            100.0 * n.fraction,
            100.0 * n.worst_chain_fraction
        );
    }
    for u in unreachable.iter().take(3) {
        let _ = writeln!(
            text,
            "WARNING: dimension {}: the adapted proposal scale {:e} is under {} ulps ({:e}) of \
             |mu| + 4 sigma there: float32 cannot move the states (rescale the problem)",
            u.dim,
            u.proposal_scale,
            fused_mh::reach::REACH_ULPS,
            u.ulp
        );
    }
    let order = match &summary.diagnostics {
        Some(diag) => {
            verdict(&mut text, summary, diag);
            let order = fused_mh::diagnostics::worst_first(&diag.nested_rhat);
            // The lowest ESS: a NaN first, as the worst R-hat.
            let ess_key = |j: usize| {
                if diag.ess[j].is_nan() {
                    f64::NEG_INFINITY
                } else {
                    diag.ess[j]
                }
            };
            let lowest = (0..d).min_by(|&a, &c| ess_key(a).total_cmp(&ess_key(c)));
            let _ = writeln!(
                text,
                "split R-hat over {} draws per chain: worst {:.4} (dim {}), lowest ESS {:.0} \
                 (dim {}), superchains of {}",
                diag.draws,
                diag.max_nested_rhat,
                order[0],
                diag.min_ess,
                lowest.unwrap_or(0),
                diag.superchain_size
            );
            order
        }
        None => (0..d).collect(),
    };
    let _ = writeln!(
        text,
        "{:>5} {:>12} {:>12} {:>12} {:>12} {:>9} {:>10}",
        "dim", "mean", "exact mean", "variance", "exact var", "R-hat", "ESS"
    );
    let exact = target.moments();
    for &j in order.iter().take(SHOWN) {
        let means = (0..b).map(|c| stats.mean[c * d + j]);
        let pooled = means.clone().sum::<f64>() / b as f64;
        // Total variance over all chains and steps: within-chain plus between-chain.
        let within = (0..b).map(|c| stats.var[c * d + j]).sum::<f64>() / b as f64;
        let between = means.map(|m| (m - pooled).powi(2)).sum::<f64>() / b as f64;
        let (exact_mean, exact_var) = exact[j];
        let shown = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.5}"));
        let (rhat, ess) = summary.diagnostics.as_ref().map_or_else(
            || ("-".to_string(), "-".to_string()),
            |d| {
                (
                    format!("{:.4}", d.nested_rhat[j]),
                    format!("{:.0}", d.ess[j]),
                )
            },
        );
        let _ = writeln!(
            text,
            "{:>5} {:>12.5} {:>12} {:>12.5} {:>12} {:>9} {:>10}",
            j,
            pooled,
            shown(exact_mean),
            within + between,
            shown(exact_var),
            rhat,
            ess
        );
    }
    if d > SHOWN {
        let rest = match &summary.diagnostics {
            Some(diag) => format!(", R-hat at most {:.4}", diag.nested_rhat[order[SHOWN]]),
            None => String::new(),
        };
        let _ = writeln!(
            text,
            "  ... and {} more dimensions{rest} (summary.json, mean.npy, var.npy)",
            d - SHOWN
        );
    }
    text
}

/// The verdict on convergence and, where R-hat cannot see, the warning.
fn verdict(text: &mut String, summary: &Summary, diag: &super::summary::DiagnosticsSummary) {
    let threshold = diag.rhat_threshold;
    if diag.max_nested_rhat < threshold {
        if summary.stopped_early {
            let _ = writeln!(
                text,
                "stopped early: every split R-hat below --until-rhat {threshold} after {} steps",
                summary.steps
            );
        } else {
            let _ = writeln!(text, "every split R-hat below {threshold}");
        }
    } else {
        let _ = writeln!(
            text,
            "NOT converged: worst R-hat {:.4} > {threshold} after {} steps",
            diag.max_nested_rhat, summary.steps
        );
    }
    if !diag.blind_dimensions.is_empty() {
        let shown: Vec<String> = diag
            .blind_dimensions
            .iter()
            .take(3)
            .map(|&j| format!("dim {j}: {:.2} sigma", diag.start_spread[j]))
            .collect();
        let _ = writeln!(
            text,
            "WARNING: in {} of {} dimensions the {} started closer than half the target's \
             standard deviation apart ({}{}): R-hat's comparison between them cannot detect \
             non-convergence, so this run is not called converged. Start them apart \
             (--init-dist overdispersed), use superchains started apart (--superchain-size M \
             --init-dist overdispersed), or run a --burn-in long enough to spread them.",
            diag.blind_dimensions.len(),
            summary.dim,
            if diag.superchain_size > 1 {
                "superchains"
            } else {
                "chains"
            },
            shown.join(", "),
            if diag.blind_dimensions.len() > 3 {
                ", ..."
            } else {
                ""
            }
        );
    }
}
