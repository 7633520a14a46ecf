//! A model with data from its inputs by name — the arrays and the priors' text
//! ([`crate::prior_syntax`]) — as `host sample` reads them from its flags and Python's model
//! objects from their arguments: one place that checks them, builds the kernel's model
//! ([`crate::kernel::model`]), names its parameters (`beta[1]`, `sigma`, `theta[1]`, `mu`,
//! `tau`, `x[1]`) and samples it on the GPU or the CPU reference.
//!
//! A refused input is [`Error::BadModelInput`], naming the input ([`Input::name`]: the Python
//! argument; the command line's flag is `--` and the name with `-` for `_`).

use crate::error::{Error, Result};
use crate::kernel::model::{
    DenseGaussian, DenseGaussianError, Factor, HierarchicalNormal, LinearRegression,
    LogisticRegression, Model, RegressionError, whitening,
};
use crate::model_run::{Continuation, ModelRun, ModelSample};
use crate::prior_syntax::{coefficient_prior, coefficient_priors, scale_prior};
use crate::{Gpu, cpu};

/// A model's input.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Input {
    /// The design matrix `[N, K]` of a regression.
    X,
    /// The outcomes `[N]` (or the groups' estimates `[J]`).
    Y,
    /// The groups' standard errors `[J]`.
    Se,
    /// The dense Gaussian's mean `[dim]`.
    Mean,
    /// The Cholesky factor of its covariance `[dim, dim]`.
    CovFactor,
    /// The Cholesky factor of its precision `[dim, dim]`.
    PrecFactor,
    /// The coefficients' priors.
    BetaPrior,
    /// The noise scale's prior.
    SigmaPrior,
    /// The hierarchical mean's prior.
    MuPrior,
    /// The hierarchical scale's prior.
    TauPrior,
}

impl Input {
    /// Its name: `x`, `y`, `se`, `mean`, `cov_factor`, `prec_factor`, `beta_prior`,
    /// `sigma_prior`, `mu_prior` or `tau_prior`.
    pub fn name(self) -> &'static str {
        match self {
            Input::X => "x",
            Input::Y => "y",
            Input::Se => "se",
            Input::Mean => "mean",
            Input::CovFactor => "cov_factor",
            Input::PrecFactor => "prec_factor",
            Input::BetaPrior => "beta_prior",
            Input::SigmaPrior => "sigma_prior",
            Input::MuPrior => "mu_prior",
            Input::TauPrior => "tau_prior",
        }
    }
}

/// The refusal of `input`, for `why`.
fn bad(input: Input, why: impl Into<String>) -> Error {
    Error::BadModelInput {
        input,
        why: why.into(),
    }
}

/// A borrowed row-major matrix.
#[derive(Clone, Copy, Debug)]
pub struct Matrix<'a> {
    /// `rows * cols` values, row after row.
    pub data: &'a [f32],
    /// Rows.
    pub rows: usize,
    /// Columns.
    pub cols: usize,
}

/// A model's inputs (see the module documentation). The priors are text.
#[derive(Clone, Copy, Debug)]
pub enum ModelInputs<'a> {
    /// `y ~ normal(X beta, sigma)`.
    LinearRegression {
        /// The design.
        x: Matrix<'a>,
        /// The outcomes, one per row.
        y: &'a [f32],
        /// One prior for every coefficient, or one per column separated by `;`.
        beta_prior: &'a str,
        /// The prior of `sigma`.
        sigma_prior: &'a str,
    },
    /// `y ~ Bernoulli(logit^-1(X beta))`.
    LogisticRegression {
        /// The design.
        x: Matrix<'a>,
        /// The outcomes, 0 or 1, one per row.
        y: &'a [f32],
        /// As the linear regression's.
        beta_prior: &'a str,
    },
    /// The non-centred hierarchical normal model (eight schools).
    HierarchicalNormal {
        /// The groups' estimates.
        y: &'a [f32],
        /// Their standard errors (> 0).
        se: &'a [f32],
        /// The prior of the mean `mu`.
        mu_prior: &'a str,
        /// The prior of the scale `tau`.
        tau_prior: &'a str,
    },
    /// `N(mean, Sigma)` by a Cholesky factor of `Sigma` or of its inverse.
    DenseGaussian {
        /// The mean.
        mean: &'a [f32],
        /// The factor, lower triangular.
        factor: Matrix<'a>,
        /// Of the covariance or of the precision.
        of: Factor,
    },
}

/// A model's draws and its parameters' names.
#[derive(Clone, Debug)]
pub struct NamedSample {
    /// The run's draws and what it adapted.
    pub sample: ModelSample,
    /// The parameters' names, in the draws' order.
    pub names: Vec<String>,
}

impl ModelInputs<'_> {
    /// The parameters of the model's state (what its draws hold per chain and kept step), from
    /// the inputs' shapes alone: a caller sizes its buffers by it before [`Self::sample`]
    /// checks the inputs themselves.
    pub fn dim(&self) -> usize {
        match *self {
            ModelInputs::LinearRegression { x, .. } => x.cols + 1,
            ModelInputs::LogisticRegression { x, .. } => x.cols,
            ModelInputs::HierarchicalNormal { y, .. } => y.len() + 2,
            ModelInputs::DenseGaussian { mean, .. } => mean.len(),
        }
    }

    /// Checks the inputs, builds the model and samples it, new or continuing `from`
    /// ([`crate::model_run`]): on `gpu`, or on the CPU reference where `gpu` is `None`.
    pub fn sample(
        &self,
        run: &ModelRun,
        from: Option<&Continuation>,
        gpu: Option<&Gpu>,
    ) -> Result<NamedSample> {
        let go = |sample: Result<ModelSample>, names: Vec<String>| {
            Ok(NamedSample {
                sample: sample?,
                names,
            })
        };
        match *self {
            ModelInputs::LinearRegression {
                x,
                y,
                beta_prior,
                sigma_prior,
            } => {
                let priors = regression_priors(x, y, beta_prior)?;
                let sigma = scale_prior(sigma_prior).map_err(|why| bad(Input::SigmaPrior, why))?;
                let model = LinearRegression::new(x.data, y, x.cols, &priors, sigma)
                    .map_err(|e| regression_error(e, x.cols))?;
                let mut names = numbered("beta", x.cols);
                names.push("sigma".into());
                go(on(&model, run, from, gpu), names)
            }
            ModelInputs::LogisticRegression { x, y, beta_prior } => {
                let priors = regression_priors(x, y, beta_prior)?;
                let model = LogisticRegression::new(x.data, y, x.cols, &priors)
                    .map_err(|e| regression_error(e, x.cols))?;
                go(on(&model, run, from, gpu), numbered("beta", x.cols))
            }
            ModelInputs::HierarchicalNormal {
                y,
                se,
                mu_prior,
                tau_prior,
            } => {
                if se.len() != y.len() {
                    let why = format!("{} values for the {} groups of y", se.len(), y.len());
                    return Err(bad(Input::Se, why));
                }
                let mu = coefficient_prior(mu_prior).map_err(|why| bad(Input::MuPrior, why))?;
                let tau = scale_prior(tau_prior).map_err(|why| bad(Input::TauPrior, why))?;
                let model = HierarchicalNormal::new(y, se, mu, tau)
                    .map_err(|e| hierarchical_error(e, se))?;
                let mut names = numbered("theta", y.len());
                names.extend(["mu".into(), "tau".into()]);
                go(on(&model, run, from, gpu), names)
            }
            ModelInputs::DenseGaussian { mean, factor, of } => {
                let input = match of {
                    Factor::Covariance => Input::CovFactor,
                    Factor::Precision => Input::PrecFactor,
                };
                let dim = mean.len();
                if (factor.rows, factor.cols) != (dim, dim) || factor.data.len() != dim * dim {
                    let why = format!(
                        "shape [{}, {}], expected [{dim}, {dim}] (as the mean)",
                        factor.rows, factor.cols
                    );
                    return Err(bad(input, why));
                }
                let why = |e| dense_error(e, input, dim);
                let mut w = vec![0.0f32; dim * dim];
                whitening(factor.data, of, &mut w).map_err(why)?;
                let model = DenseGaussian::new(mean, &w).map_err(why)?;
                go(on(&model, run, from, gpu), numbered("x", dim))
            }
        }
    }
}

/// `model` sampled on `gpu`, or on the CPU reference.
fn on<M: Model + Copy + Sync>(
    model: &M,
    run: &ModelRun,
    from: Option<&Continuation>,
    gpu: Option<&Gpu>,
) -> Result<ModelSample> {
    match gpu {
        Some(gpu) => gpu.sample_model(model, run, from),
        None => cpu::sample_model(model, run, from),
    }
}

/// `name[1]`, ..., `name[count]`.
fn numbered(name: &str, count: usize) -> Vec<String> {
    (1..=count).map(|j| format!("{name}[{j}]")).collect()
}

/// A regression's shapes checked, and its coefficient priors.
fn regression_priors(
    x: Matrix<'_>,
    y: &[f32],
    text: &str,
) -> Result<Vec<crate::kernel::model::CoefficientPrior>> {
    if x.rows.checked_mul(x.cols) != Some(x.data.len()) {
        return Err(bad(Input::X, "its data is not rows x columns values"));
    }
    if y.len() != x.rows {
        let why = format!("{} values for the {} rows of x", y.len(), x.rows);
        return Err(bad(Input::Y, why));
    }
    coefficient_priors(text, x.cols).map_err(|why| bad(Input::BetaPrior, why))
}

/// A prior parameter's name by its index (0 loc, 1 scale, 2 df).
fn param_name(param: usize) -> &'static str {
    ["loc", "scale", "df"]
        .get(param)
        .copied()
        .unwrap_or("a parameter")
}

/// A regression's refusal, naming the input.
fn regression_error(e: RegressionError, k: usize) -> Error {
    match e {
        RegressionError::Shape => bad(Input::X, "between 1 and 64 columns and at least one row"),
        RegressionError::NonFinite { in_x: true, index } => bad(
            Input::X,
            format!("element [{}, {}] is not finite", index / k, index % k),
        ),
        RegressionError::NonFinite { index, .. } => bad(
            Input::Y,
            format!("element {index} is not finite (or, for a logistic regression, not 0 or 1)"),
        ),
        RegressionError::StandardError { index } => bad(Input::Se, format!("element {index}")),
        RegressionError::Prior {
            index: Some(j),
            invalid,
        } => bad(
            Input::BetaPrior,
            format!(
                "coefficient {}: {} {}",
                j + 1,
                param_name(invalid.param),
                invalid.why
            ),
        ),
        RegressionError::Prior {
            index: None,
            invalid,
        } => bad(
            Input::SigmaPrior,
            format!("{} {}", param_name(invalid.param), invalid.why),
        ),
    }
}

/// The hierarchical model's refusal, naming the input.
fn hierarchical_error(e: RegressionError, se: &[f32]) -> Error {
    match e {
        RegressionError::Prior {
            index: Some(_),
            invalid,
        } => bad(
            Input::MuPrior,
            format!("{} {}", param_name(invalid.param), invalid.why),
        ),
        RegressionError::Prior {
            index: None,
            invalid,
        } => bad(
            Input::TauPrior,
            format!("{} {}", param_name(invalid.param), invalid.why),
        ),
        RegressionError::StandardError { index } => bad(
            Input::Se,
            format!("se[{index}] = {} must be a finite number > 0", se[index]),
        ),
        RegressionError::NonFinite { index, .. } => {
            bad(Input::Y, format!("y[{index}] is not finite"))
        }
        RegressionError::Shape => bad(Input::Y, "between 1 and 254 groups"),
    }
}

/// The dense Gaussian's refusal, naming the input (`factor` the factor's).
fn dense_error(e: DenseGaussianError, factor: Input, dim: usize) -> Error {
    match e {
        DenseGaussianError::Shape => bad(Input::Mean, "between 1 and 128 values"),
        DenseGaussianError::NonFinite {
            in_mean: true,
            index,
        } => bad(Input::Mean, format!("element {index} is not finite")),
        DenseGaussianError::NonFinite { index, .. } => bad(
            factor,
            format!("element [{}, {}] is not finite", index / dim, index % dim),
        ),
        DenseGaussianError::NotPositiveDiagonal { index } => bad(
            factor,
            format!("diagonal element [{index}, {index}] must be > 0"),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model_run::Preconditioning;

    #[test]
    fn dim_is_the_sampled_states_width() {
        // Three rows of two covariates, three groups, a mean of three.
        let (x, y01, y) = (
            [1.0, 0.5, 1.0, -0.5, 1.0, 2.0],
            [0.0, 1.0, 1.0],
            [1.0, 2.0, 0.5],
        );
        let design = Matrix {
            data: &x,
            rows: 3,
            cols: 2,
        };
        let identity = [1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0];
        let all = [
            ModelInputs::LinearRegression {
                x: design,
                y: &y,
                beta_prior: "normal:0,5",
                sigma_prior: "half-cauchy:2.5",
            },
            ModelInputs::LogisticRegression {
                x: design,
                y: &y01,
                beta_prior: "normal:0,5",
            },
            ModelInputs::HierarchicalNormal {
                y: &y,
                se: &[1.0, 2.0, 1.5],
                mu_prior: "normal:0,5",
                tau_prior: "half-cauchy:5",
            },
            ModelInputs::DenseGaussian {
                mean: &y,
                factor: Matrix {
                    data: &identity,
                    rows: 3,
                    cols: 3,
                },
                of: Factor::Covariance,
            },
        ];
        let run = ModelRun {
            chains: 2,
            warmup: 0,
            steps: 1,
            thin: 1,
            seed: 1,
            target_acceptance: 0.234,
            preconditioning: Preconditioning::None,
            superchain_size: 1,
        };
        for (inputs, want) in all.iter().zip([3, 2, 5, 3]) {
            let named = inputs.sample(&run, None, None).unwrap();
            // The model's own width (`Model::dim`), against the count by hand and the names.
            assert_eq!((inputs.dim(), named.sample.dim), (want, want), "{inputs:?}");
            assert_eq!(named.names.len(), want);
        }
    }
}
