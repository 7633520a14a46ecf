//! The priors' text, as `host sample`'s flags and Python's model objects take it:
//!
//! - a coefficient (or the hierarchical mean): `flat`, `normal:LOC,SCALE` or
//!   `student-t:DF,LOC,SCALE`; several coefficients take one prior for all, or one per column
//!   separated by `;`;
//! - a scale (`sigma`, `tau`): `flat`, `half-normal:SCALE`, `half-cauchy:SCALE` or
//!   `half-t:DF,SCALE`.
//!
//! The errors say what was expected; the caller names the flag or argument. Whether the
//! numbers are usable (a scale > 0, ...) is the model's check
//! ([`crate::kernel::model::CoefficientPrior::pack`]'s).

use crate::kernel::model::{CoefficientPrior, ScalePrior};

/// The numbers after `NAME:`: `count` of them, the parameters `params` (for the message).
fn numbers(text: &str, params: &str, count: usize) -> Result<Vec<f32>, String> {
    let values: Vec<f32> = text
        .split(',')
        .map(|v| v.trim().parse::<f32>())
        .collect::<Result<_, _>>()
        .map_err(|_| format!("expected {params}, numbers"))?;
    if values.len() != count {
        return Err(format!("expected {count} numbers ({params})"));
    }
    Ok(values)
}

/// One coefficient prior (see the module documentation).
pub fn coefficient_prior(text: &str) -> Result<CoefficientPrior, String> {
    let (name, rest) = text.split_once(':').unwrap_or((text, ""));
    let with = |why: String| format!("{text:?}: {why}");
    Ok(match name.trim() {
        "flat" if rest.is_empty() => CoefficientPrior::Flat,
        "normal" => {
            let v = numbers(rest, "LOC,SCALE", 2).map_err(with)?;
            CoefficientPrior::Normal {
                loc: v[0],
                scale: v[1],
            }
        }
        "student-t" => {
            let v = numbers(rest, "DF,LOC,SCALE", 3).map_err(with)?;
            CoefficientPrior::StudentT {
                df: v[0],
                loc: v[1],
                scale: v[2],
            }
        }
        _ => {
            return Err(with(
                "expected flat, normal:LOC,SCALE or student-t:DF,LOC,SCALE".into(),
            ));
        }
    })
}

/// `k` coefficient priors: one for all, or `k` separated by `;`.
pub fn coefficient_priors(text: &str, k: usize) -> Result<Vec<CoefficientPrior>, String> {
    let parts: Vec<&str> = text.split(';').collect();
    match parts.len() {
        1 => Ok(vec![coefficient_prior(text)?; k]),
        n if n == k => parts.iter().map(|p| coefficient_prior(p)).collect(),
        n => Err(format!(
            "{n} priors for {k} coefficients (give one, or one per column)"
        )),
    }
}

/// A scale prior (see the module documentation).
pub fn scale_prior(text: &str) -> Result<ScalePrior, String> {
    let (name, rest) = text.split_once(':').unwrap_or((text, ""));
    let with = |why: String| format!("{text:?}: {why}");
    Ok(match name.trim() {
        "flat" if rest.is_empty() => ScalePrior::Flat,
        "half-normal" => ScalePrior::HalfNormal {
            scale: numbers(rest, "SCALE", 1).map_err(with)?[0],
        },
        "half-cauchy" => ScalePrior::HalfStudentT {
            df: 1.0,
            scale: numbers(rest, "SCALE", 1).map_err(with)?[0],
        },
        "half-t" => {
            let v = numbers(rest, "DF,SCALE", 2).map_err(with)?;
            ScalePrior::HalfStudentT {
                df: v[0],
                scale: v[1],
            }
        }
        _ => {
            return Err(with(
                "expected flat, half-normal:SCALE, half-cauchy:SCALE or half-t:DF,SCALE".into(),
            ));
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn priors_parse_and_bad_text_says_what_was_expected() {
        assert_eq!(
            coefficient_prior("normal:0,10"),
            Ok(CoefficientPrior::Normal {
                loc: 0.0,
                scale: 10.0
            })
        );
        assert_eq!(
            scale_prior("half-cauchy:2.5"),
            Ok(ScalePrior::HalfStudentT {
                df: 1.0,
                scale: 2.5
            })
        );
        let two = coefficient_priors("flat;student-t:3,0,1", 2).expect("two priors");
        assert_eq!(two[0], CoefficientPrior::Flat);
        assert!(coefficient_priors("flat;flat;flat", 2).is_err_and(|e| e.contains("3 priors")));
        assert!(coefficient_prior("normal:0").is_err_and(|e| e.contains("2 numbers")));
        assert!(coefficient_prior("gauss").is_err_and(|e| e.contains("expected flat")));
        assert!(scale_prior("half-t:a,1").is_err_and(|e| e.contains("DF,SCALE")));
        assert!(scale_prior("flat:1").is_err());
    }
}
