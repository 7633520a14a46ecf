//! The target distribution on the host: which [`TargetKind`] and its parameters, validated once
//! and packed into the arrays the kernels read (see `fused_mh_kernel::target`).

pub use fused_mh_kernel::target::{SCALE_RANGE, TargetKind};
use fused_mh_kernel::target::{Target as KernelTarget, VisitTarget};

use crate::error::{Error, Result};
use crate::problem::{Shape, check_len, check_target_dim};

/// A target distribution of `dim` dimensions: a [`TargetKind`] and one value per dimension for
/// each of its parameters ([`TargetKind::params`]; the first two are always the location `mu`
/// and the scale `sigma`).
#[derive(Clone, Debug, PartialEq)]
pub struct Target {
    kind: TargetKind,
    /// `params[i][d]`: parameter `i` of dimension `d`, as the user gave it.
    params: Vec<Vec<f32>>,
    /// `[kind.arrays(), dim]`: what the kernels read.
    arrays: Vec<f32>,
}

impl Target {
    /// The scales the step computes with in float32 (see [`SCALE_RANGE`]).
    pub const SIGMA_RANGE: (f32, f32) = SCALE_RANGE;

    /// The diagonal Gaussian of `mu.len()` dimensions: `log pi(v) = -1/2 sum_d ((v_d - mu_d) /
    /// sigma_d)^2`. `mu` and `sigma` must have the same length (at least 1), be finite, and
    /// `sigma` lie in [`Self::SIGMA_RANGE`].
    pub fn new(mu: Vec<f32>, sigma: Vec<f32>) -> Result<Self> {
        Self::of_kind(TargetKind::Gaussian, vec![mu, sigma])
    }

    /// A target of kind `kind`, its parameters in [`TargetKind::params`] order, one value per
    /// dimension each (all the same length, at least 1). Each target checks its own values
    /// (finite locations, scales in [`Self::SIGMA_RANGE`], ...); the error names the parameter
    /// and the dimension.
    pub fn of_kind(kind: TargetKind, params: Vec<Vec<f32>>) -> Result<Self> {
        let names = kind.params();
        check_len("target parameters", names.len(), params.len())?;
        let dim = params[0].len();
        if dim == 0 {
            return Err(Error::EmptyDim);
        }
        for (name, values) in names.iter().zip(&params).skip(1) {
            check_len(name, dim, values.len())?;
        }
        let mut arrays =
            crate::host_memory::filled("the target's arrays", kind.arrays() * dim, 0.0f32)?;
        let mut values = vec![0.0; names.len()];
        let mut packed = vec![0.0; kind.arrays()];
        for d in 0..dim {
            for (v, param) in values.iter_mut().zip(&params) {
                *v = param[d];
            }
            kind.visit(Pack {
                values: &values,
                arrays: &mut packed,
            })
            .map_err(|invalid| Error::InvalidParameter {
                param: names[invalid.param],
                index: d,
                value: values[invalid.param],
                why: invalid.why,
            })?;
            for (k, a) in packed.iter().enumerate() {
                arrays[k * dim + d] = *a;
            }
        }
        Ok(Self {
            kind,
            params,
            arrays,
        })
    }

    /// Which target.
    pub fn kind(&self) -> TargetKind {
        self.kind
    }

    /// Number of dimensions.
    pub fn dim(&self) -> usize {
        self.params[0].len()
    }

    /// The locations (parameter `mu`).
    pub fn mu(&self) -> &[f32] {
        &self.params[0]
    }

    /// The scales (parameter `sigma`: the Gaussian's standard deviations).
    pub fn sigma(&self) -> &[f32] {
        &self.params[1]
    }

    /// Parameter `name` ([`TargetKind::params`]), one value per dimension.
    pub fn param(&self, name: &str) -> Option<&[f32]> {
        let i = self.kind.params().iter().position(|p| *p == name)?;
        Some(&self.params[i])
    }

    /// The arrays the kernels read, `[kind.arrays(), dim]`.
    pub(crate) fn arrays(&self) -> &[f32] {
        &self.arrays
    }

    /// Each dimension's exact marginal mean and variance, where they exist (a heavy-tailed
    /// target may have neither): what a run's estimates are checked against.
    pub fn moments(&self) -> Vec<(Option<f64>, Option<f64>)> {
        (0..self.dim())
            .map(|d| {
                let values: Vec<f32> = self.params.iter().map(|p| p[d]).collect();
                self.kind.visit(Moments(&values))
            })
            .collect()
    }

    /// `log pi(x)` of one state, up to a constant, in f64 (for tests and checks).
    pub fn log_density(&self, x: &[f32]) -> f64 {
        let mut values = vec![0.0; self.params.len()];
        x.iter()
            .enumerate()
            .map(|(d, &v)| {
                for (value, p) in values.iter_mut().zip(&self.params) {
                    *value = p[d];
                }
                self.kind.visit(LogDensity(f64::from(v), &values))
            })
            .sum()
    }

    /// Checks that this target's dim is the chains' dim.
    pub fn check_shape(&self, shape: Shape) -> Result<()> {
        check_target_dim(self.dim(), shape)
    }

    /// Checks initial states `x[batch * dim]` against this target: every element finite, and
    /// each chain's squared standardized distance `sum_d ((x_d - mu_d) / sigma_d)^2` (computed
    /// in f64) at most [`MAX_SQUARED_DISTANCE`], so that the terms of every proposal near it
    /// are finite in float32.
    ///
    /// The step itself accepts any states (a non-finite row is never accepted and never
    /// moves); this is the check for states a user hands over, where a NaN or an overflow is a
    /// mistake to report rather than a chain to run.
    pub fn check_states(&self, shape: Shape, x: &[f32]) -> Result<()> {
        self.check_shape(shape)?;
        shape.check_len("x", x)?;
        let dim = shape.dim();
        for (row, state) in x.chunks_exact(dim).enumerate() {
            if let Some(coordinate) = state.iter().position(|v| !v.is_finite()) {
                return Err(Error::NonFiniteState {
                    row,
                    coordinate,
                    value: state[coordinate],
                });
            }
            let distance: f64 = state
                .iter()
                .zip(self.mu())
                .zip(self.sigma())
                .map(|((&v, &m), &s)| ((f64::from(v) - f64::from(m)) / f64::from(s)).powi(2))
                .sum();
            if distance > MAX_SQUARED_DISTANCE {
                return Err(Error::StateTooFar { row, distance });
            }
        }
        Ok(())
    }
}

/// The largest squared standardized distance from mu an initial state may have: `2^120`
/// (about 1.3e36). The Gaussian's `log pi = -distance / 2` stays far below float32's largest
/// value (about 3.4e38, or `2^128`), with room for a proposal's extra distance and for float32
/// rounding (a target with other terms bounds its own parameters to fit this).
pub const MAX_SQUARED_DISTANCE: f64 = (1u128 << 120) as f64;

/// One dimension's arrays from its values.
struct Pack<'a> {
    values: &'a [f32],
    arrays: &'a mut [f32],
}

impl VisitTarget for Pack<'_> {
    type Output = std::result::Result<(), fused_mh_kernel::target::Invalid>;
    fn visit<T: KernelTarget>(self) -> Self::Output {
        T::pack(self.values, self.arrays)
    }
}

struct Moments<'a>(&'a [f32]);

impl VisitTarget for Moments<'_> {
    type Output = (Option<f64>, Option<f64>);
    fn visit<T: KernelTarget>(self) -> Self::Output {
        T::moments(self.0)
    }
}

struct LogDensity<'a>(f64, &'a [f32]);

impl VisitTarget for LogDensity<'_> {
    type Output = f64;
    fn visit<T: KernelTarget>(self) -> f64 {
        T::log_density(self.0, self.1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_are_validated() {
        assert!(matches!(Target::new(vec![], vec![]), Err(Error::EmptyDim)));
        assert!(matches!(
            Target::new(vec![0.0; 2], vec![1.0]),
            Err(Error::LengthMismatch { .. })
        ));
        let invalid = |mu: Vec<f32>, sigma: Vec<f32>| match Target::new(mu, sigma) {
            Err(Error::InvalidParameter { param, index, .. }) => Some((param, index)),
            _ => None,
        };
        assert_eq!(invalid(vec![0.0, f32::NAN], vec![1.0; 2]), Some(("mu", 1)));
        assert_eq!(
            invalid(vec![0.0; 2], vec![1.0, f32::INFINITY]),
            Some(("sigma", 1))
        );
        assert_eq!(invalid(vec![0.0; 2], vec![1.0, 0.0]), Some(("sigma", 1)));
        assert_eq!(invalid(vec![0.0], vec![-1.0]), Some(("sigma", 0)));
        // Outside [2^-57, 2^57]: the float32 squares overflow or underflow. At the ends: in.
        for bad in [1e-30, 1e-18, 1e18, 1e20, 1e38] {
            assert_eq!(invalid(vec![0.0], vec![bad]), Some(("sigma", 0)), "{bad}");
        }
        let (low, high) = Target::SIGMA_RANGE;
        assert_eq!((low, high), (2f32.powi(-57), 2f32.powi(57)));
        assert!(Target::new(vec![0.0; 2], vec![low, high]).is_ok());
        let t = Target::new(vec![1.0, 2.0], vec![0.5, 4.0]).unwrap();
        assert_eq!(t.arrays(), &[1.0, 2.0, 4.0, 0.0625]);
        let message = Target::new(vec![0.0], vec![-1.0]).unwrap_err().to_string();
        assert_eq!(message, "sigma[0] = -1 must be > 0");
    }

    #[test]
    fn initial_states_are_checked() {
        let t = Target::new(vec![1.0, -1.0], vec![1.0, 1e-3]).unwrap();
        let shape = Shape::new(3, 2).unwrap();
        assert!(
            t.check_states(shape, &[1.0, -1.0, 5.0, -1.001, 1e6, 0.0])
                .is_ok()
        );
        assert!(matches!(
            t.check_states(shape, &[1.0, -1.0, 1.0, f32::INFINITY, 0.0, 0.0]),
            Err(Error::NonFiniteState {
                row: 1,
                coordinate: 1,
                ..
            })
        ));
        // Row 2: (1e20 - 1)^2 / 1 = 1e40 > 2^120 (~1.3e36); 1e17 gives 1e34, which passes.
        let far = |v: f32| [0.0, 0.0, 0.0, 0.0, v, -1.0];
        assert!(t.check_states(shape, &far(1e17)).is_ok());
        assert!(matches!(
            t.check_states(shape, &far(1e20)),
            Err(Error::StateTooFar { row: 2, .. })
        ));
        // The sigma of coordinate 1 is 1e-3: 1e17 away there is 1e40 too.
        assert!(matches!(
            t.check_states(shape, &[0.0, 1e17, 0.0, 0.0, 0.0, 0.0]),
            Err(Error::StateTooFar { row: 0, .. })
        ));
        assert!(matches!(
            t.check_states(shape, &[0.0; 5]),
            Err(Error::LengthMismatch { .. })
        ));
    }
}
