//! `host run --warmup`: the adapted step size reaches its target acceptance and leaves a valid
//! sampler, with and without `--precondition`.

use std::fs;

use libtest_mimic::{Failed, Trial};

use crate::common::{check_ok, host, load, save, scratch};

/// `--warmup 1500` from a step size 10x too small and 10x too large, on an isotropic target and
/// on one whose sigmas span 100x: the acceptance after the warm-up (frozen step size) is within
/// 0.02 of the 0.234 target, and the chains after it are a valid sampler: pooled means within 5
/// standard errors of mu and pooled variances within 5 % of sigma^2 or 5 standard errors,
/// whichever is larger (errors from the run's own ESS: the variance of a normal's variance
/// estimate is `2 sigma^4 / ESS`). Without preconditioning the widest dimensions of the
/// anisotropic target mix slowly, and their ESS is then not much more than the 512 chains
/// (whose starting points are exact draws from the target): 5 % would be 1.3 standard errors.
///
/// All of it again with `--precondition`: then, on the anisotropic target, the scales adapted
/// span the sigmas' 100x (within 50x to 200x: each is a standard deviation pooled over 5120
/// draws, a few % off), and the lowest ESS of the 2000 steps is at least 3x the lowest without
/// (the widest dimension no longer crawls: about 100x expected, from ESS ~ 500 to tens of
/// thousands; 3x leaves room for the ESS estimate's own error of sqrt(2 / 127) ~ 13 %).
pub fn warmup_reaches_the_target_acceptance(on_gpu: bool) -> Result<(), Failed> {
    let dir = scratch(if on_gpu { "warmup-gpu" } else { "warmup-cpu" });
    let sigmas: Vec<f32> = (0..8).map(|d| 0.1 * 100f32.powf(d as f32 / 7.0)).collect();
    save(&dir.join("wide.npy"), &[8], &sigmas);
    // The lowest ESS on the anisotropic target for each start, without and with scales.
    let mut lowest_ess = std::collections::BTreeMap::new();
    for precondition in [false, true] {
        for (sigma, good) in [("1", 0.84f32), ("wide.npy", 0.084)] {
            for factor in [0.1f32, 10.0] {
                let step = (good * factor).to_string();
                let mut args = vec![
                    "--batch",
                    "512",
                    "--dim",
                    "8",
                    "--sigma",
                    sigma,
                    "--step-size",
                    &step,
                    "--warmup",
                    "1500",
                    "--steps",
                    "2000",
                    "--superchain-size",
                    "4",
                    "--out",
                    "w",
                    "--seed",
                    "6",
                ];
                if !on_gpu {
                    args.push("--cpu");
                }
                if dir.join("w").exists() {
                    args.push("--force");
                }
                if precondition {
                    args.push("--precondition");
                }
                check_ok(&host(&dir, &args))?;
                let summary: serde_json::Value =
                    serde_json::from_str(&fs::read_to_string(dir.join("w/summary.json"))?)?;
                let rate = summary["acceptance_rate"].as_f64().unwrap_or(f64::NAN);
                let case =
                    format!("--sigma {sigma} --step-size {step} (precondition {precondition})");
                let scales: Option<Vec<f32>> = serde_json::from_value(summary["scales"].clone())?;
                if scales.is_some() != precondition {
                    return Err(format!("{case}: scales {scales:?} in the summary").into());
                }
                if let Some(s) = scales.filter(|_| sigma != "1") {
                    let span = s[7] / s[0];
                    if !(50.0..=200.0).contains(&span) {
                        return Err(format!("{case}: the scales span {span}x: {s:?}").into());
                    }
                }
                if sigma != "1" {
                    let min_ess = summary["diagnostics"]["min_ess"]
                        .as_f64()
                        .unwrap_or(f64::NAN);
                    lowest_ess.insert((factor.to_bits(), precondition), min_ess);
                }
                if (rate - 0.234).abs() > 0.02 {
                    return Err(format!("{case}: acceptance {rate} after the warm-up").into());
                }
                let (_, mean) = load::<f64>(&dir.join("w/mean.npy"));
                let (_, var) = load::<f64>(&dir.join("w/var.npy"));
                let ess: Vec<f64> = serde_json::from_value(summary["diagnostics"]["ess"].clone())?;
                for d in 0..8 {
                    let s2 = if sigma == "1" {
                        1.0
                    } else {
                        f64::from(sigmas[d]).powi(2)
                    };
                    let pooled = (0..512).map(|c| mean[c * 8 + d]).sum::<f64>() / 512.0;
                    let between = (0..512)
                        .map(|c| (mean[c * 8 + d] - pooled).powi(2))
                        .sum::<f64>()
                        / 512.0;
                    let total = (0..512).map(|c| var[c * 8 + d]).sum::<f64>() / 512.0 + between;
                    let se = (s2 / ess[d]).sqrt();
                    let var_tolerance = (5.0 * (2.0 / ess[d]).sqrt()).max(0.05);
                    if pooled.abs() > 5.0 * se || (total / s2 - 1.0).abs() > var_tolerance {
                        return Err(format!(
                            "{case}, dim {d}: mean {pooled} (5 se = {}), variance {total} vs {s2}",
                            5.0 * se
                        )
                        .into());
                    }
                }
            }
        }
    }
    for factor in [0.1f32, 10.0] {
        let (without, with) = (
            lowest_ess[&(factor.to_bits(), false)],
            lowest_ess[&(factor.to_bits(), true)],
        );
        if with.is_nan() || with < 3.0 * without {
            return Err(format!(
                "step size x{factor}: lowest ESS {with} with scales, {without} without"
            )
            .into());
        }
    }
    fs::remove_dir_all(&dir).ok();
    Ok(())
}

/// This file's tests (the GPU one reports ignored without a GPU).
pub fn trials(gpu: bool) -> Vec<Trial> {
    vec![
        Trial::test("warmup_reaches_the_target_acceptance_cpu", || {
            warmup_reaches_the_target_acceptance(false)
        }),
        Trial::test("warmup_reaches_the_target_acceptance_gpu", || {
            warmup_reaches_the_target_acceptance(true)
        })
        .with_ignored_flag(!gpu),
    ]
}
