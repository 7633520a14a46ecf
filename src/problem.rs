//! What a step is asked to do: the shape of the batch, the target distribution and the step's
//! configuration, each validated once when it is built, so the GPU and the CPU paths can trust
//! them.

use std::sync::Arc;

use crate::error::{Error, Result};

/// The shape of a batch: `batch` independent chains of `dim` coordinates each, stored
/// row-major as `x[batch * dim]` (chain `b`, coordinate `d` at `b * dim + d`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shape {
    batch: usize,
    dim: usize,
}

impl Shape {
    /// Largest batch: the row enters the Philox counter as one 32-bit word.
    pub const MAX_BATCH: usize = 1 << 32;
    /// Largest dim: quad indices (`element / 4`) are 32-bit counter words, and `u32::MAX` is
    /// reserved for the acceptance uniform.
    pub const MAX_DIM: usize = u32::MAX as usize;

    /// Validates a shape: both sizes at least 1, within the counter scheme's limits, and
    /// `batch * dim` f32 elements addressable.
    pub fn new(batch: usize, dim: usize) -> Result<Self> {
        if batch == 0 {
            return Err(Error::EmptyBatch);
        }
        if dim == 0 {
            return Err(Error::EmptyDim);
        }
        let too_large = |why| Err(Error::TooLarge { batch, dim, why });
        if batch > Self::MAX_BATCH {
            return too_large("at most 2^32 chains (the row is a 32-bit Philox counter word)");
        }
        if dim > Self::MAX_DIM {
            return too_large("dim must be below 2^32 (quad indices are 32-bit counter words)");
        }
        match batch
            .checked_mul(dim)
            .and_then(|n| n.checked_mul(size_of::<f32>()))
        {
            Some(bytes) if bytes <= isize::MAX as usize => Ok(Self { batch, dim }),
            _ => too_large("batch * dim * 4 bytes overflows the address space"),
        }
    }

    /// Number of chains.
    pub fn batch(&self) -> usize {
        self.batch
    }

    /// Coordinates per chain.
    pub fn dim(&self) -> usize {
        self.dim
    }

    /// Elements in the batch, `batch * dim` (cannot overflow: checked in [`Shape::new`]).
    pub fn len(&self) -> usize {
        self.batch * self.dim
    }

    /// Always false: a shape has at least one element. (Present because `len` is.)
    pub fn is_empty(&self) -> bool {
        false
    }

    /// Checks that `data` holds exactly this shape's `batch * dim` elements.
    pub fn check_len<T>(&self, what: &'static str, data: &[T]) -> Result<()> {
        check_len(what, self.len(), data.len())
    }
}

pub(crate) fn check_len(what: &'static str, expected: usize, got: usize) -> Result<()> {
    if expected == got {
        Ok(())
    } else {
        Err(Error::LengthMismatch {
            what,
            expected,
            got,
        })
    }
}

fn check_finite(what: &'static str, values: &[f32]) -> Result<()> {
    match values.iter().position(|v| !v.is_finite()) {
        Some(index) => Err(Error::NonFinite {
            what,
            index,
            value: values[index],
        }),
        None => Ok(()),
    }
}

/// The target distribution: independent normals, `log pi(v) = -1/2 sum_d ((v_d - mu_d) / sigma_d)^2`.
#[derive(Clone, Debug, PartialEq)]
pub struct Target {
    mu: Vec<f32>,
    sigma: Vec<f32>,
    inv_var: Vec<f32>,
}

impl Target {
    /// The standard deviations the step computes with in float32: `[2^-57, 2^57]`, about
    /// `[6.9e-18, 1.4e17]`.
    ///
    /// The kernel forms `d^2 * (1 / sigma^2)` with `d = v - mu`. For every state within 64
    /// standard deviations of mu (all a chain ever visits once it is near the target) and at
    /// least 1/64 of one away, `d` lies in `[2^-63, 2^63]`: `d^2` is a normal float32 (no
    /// overflow to infinity, no underflow into subnormals) and so is `1 / sigma^2`
    /// (`[2^-114, 2^114]`). A `sigma` outside would make `log alpha` infinite or NaN for
    /// ordinary states, and every proposal rejected without a word.
    pub const SIGMA_RANGE: (f32, f32) = (1.0 / (1u64 << 57) as f32, (1u64 << 57) as f32);

    /// A target of `mu.len()` dimensions. `mu` and `sigma` must have the same length (at least
    /// 1), be finite, and `sigma` lie in [`Self::SIGMA_RANGE`].
    pub fn new(mu: Vec<f32>, sigma: Vec<f32>) -> Result<Self> {
        if mu.is_empty() {
            return Err(Error::EmptyDim);
        }
        check_len("sigma", mu.len(), sigma.len())?;
        check_finite("mu", &mu)?;
        check_finite("sigma", &sigma)?;
        if let Some(index) = sigma.iter().position(|&s| s <= 0.0) {
            return Err(Error::NonPositiveSigma {
                index,
                value: sigma[index],
            });
        }
        let (low, high) = Self::SIGMA_RANGE;
        if let Some(index) = sigma.iter().position(|s| !(low..=high).contains(s)) {
            return Err(Error::SigmaOutOfRange {
                index,
                value: sigma[index],
            });
        }
        // 1 / sigma^2 in f64, rounded once to f32: the kernel multiplies by it instead of
        // dividing by sigma^2 for every element.
        let inv_var: Vec<f32> = sigma
            .iter()
            .map(|&s| (1.0 / f64::from(s).powi(2)) as f32)
            .collect();
        Ok(Self { mu, sigma, inv_var })
    }

    /// Number of dimensions.
    pub fn dim(&self) -> usize {
        self.mu.len()
    }

    /// The means.
    pub fn mu(&self) -> &[f32] {
        &self.mu
    }

    /// The standard deviations.
    pub fn sigma(&self) -> &[f32] {
        &self.sigma
    }

    /// `1 / sigma^2`, what the kernel uses.
    pub fn inv_var(&self) -> &[f32] {
        &self.inv_var
    }

    /// Checks that this target's dim is the chains' dim.
    pub fn check_shape(&self, shape: Shape) -> Result<()> {
        check_target_dim(self.dim(), shape)
    }

    /// Checks initial states `x[batch * dim]` against this target: every element finite, and
    /// each chain's squared standardized distance `sum_d ((x_d - mu_d) / sigma_d)^2` (computed
    /// in f64) at most [`MAX_SQUARED_DISTANCE`], so that `log pi(x)` and the log density of
    /// every proposal near it are finite in float32.
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
                .zip(&self.mu)
                .zip(&self.inv_var)
                .map(|((&v, &m), &w)| (f64::from(v) - f64::from(m)).powi(2) * f64::from(w))
                .sum();
            if distance > MAX_SQUARED_DISTANCE {
                return Err(Error::StateTooFar { row, distance });
            }
        }
        Ok(())
    }
}

/// The largest squared standardized distance from mu an initial state may have: `2^120`
/// (about 1.3e36). `log pi = -distance / 2` stays far below float32's largest value (about
/// 3.4e38, or `2^128`), with room for a proposal's extra distance and for float32 rounding.
pub const MAX_SQUARED_DISTANCE: f64 = (1u128 << 120) as f64;

/// How a step with in-kernel random numbers proposes: the step size, optionally a scale per
/// dimension relative to it (diagonal preconditioning), and the seed of the Philox stream.
#[derive(Clone, Debug, PartialEq)]
pub struct StepConfig {
    step_size: f32,
    seed: u64,
    scales: Option<Arc<[f32]>>,
}

impl StepConfig {
    /// A configuration; the step size must be finite and positive.
    pub fn new(step_size: f32, seed: u64) -> Result<Self> {
        check_step_size(step_size)?;
        Ok(Self {
            step_size,
            seed,
            scales: None,
        })
    }

    /// The same configuration with a proposal scale per dimension relative to the step size:
    /// `proposal_d = x_d + (step_size * scales[d]) * eps_d` (the product rounded to f32 once).
    /// Every `step_size * scales[d]` must be finite and positive. All scales 1 give the
    /// results of no scales, to the bit. [`crate::Gpu::run`], [`crate::Gpu::steps`] and
    /// [`crate::cpu::run_chains`] use them; the single steps ([`crate::Gpu::step`],
    /// [`crate::cpu::step`]) take the step size alone and refuse a configuration with scales.
    pub fn with_scales(self, scales: &[f32]) -> Result<Self> {
        if let Some((d, &s)) = scales.iter().enumerate().find(|&(_, &s)| {
            let product = self.step_size * s;
            !(product.is_finite() && product > 0.0)
        }) {
            return Err(Error::BadScale {
                index: d,
                scale: s,
                step_size: self.step_size,
            });
        }
        Ok(Self {
            scales: Some(crate::host_memory::copied("proposal scales", scales)?.into()),
            ..self
        })
    }

    /// The proposal's scale: `proposal = x + step_size * eps` (times the scale of each
    /// dimension, if there are scales).
    pub fn step_size(&self) -> f32 {
        self.step_size
    }

    /// The seed (the Philox key).
    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// The per-dimension scales relative to the step size, if any.
    pub fn scales(&self) -> Option<&[f32]> {
        self.scales.as_deref()
    }

    /// What the kernels multiply the normals by, per dimension: `step_size * scales[d]`
    /// (None without scales). Checks that there is one scale per dimension of `shape`.
    pub(crate) fn proposal_scales(&self, shape: Shape) -> Result<Option<Vec<f32>>> {
        let Some(scales) = &self.scales else {
            return Ok(None);
        };
        check_len("proposal scales", shape.dim(), scales.len())?;
        Ok(Some(scales.iter().map(|s| self.step_size * s).collect()))
    }

    /// Refuses scales where a step takes the step size alone.
    pub(crate) fn check_no_scales(&self, what: &str) -> Result<()> {
        match self.scales {
            None => Ok(()),
            Some(_) => Err(Error::InvalidRun(format!(
                "{what} takes the step size alone, not per-dimension scales (use a run)"
            ))),
        }
    }
}

pub(crate) fn check_target_dim(target_dim: usize, shape: Shape) -> Result<()> {
    if target_dim == shape.dim() {
        Ok(())
    } else {
        Err(Error::ShapeMismatch(format!(
            "the target has dim {target_dim}, the chains have dim {}",
            shape.dim()
        )))
    }
}

pub(crate) fn check_step_size(step_size: f32) -> Result<()> {
    if step_size.is_finite() && step_size > 0.0 {
        Ok(())
    } else {
        Err(Error::BadStepSize(step_size))
    }
}

/// Checks caller-supplied random numbers against a shape: `noise[batch * dim]` finite,
/// `uniform[batch]` in `[0, 1)` (the reference's `U[0, 1)`).
pub(crate) fn check_noise(shape: Shape, noise: &[f32], uniform: &[f32]) -> Result<()> {
    shape.check_len("noise", noise)?;
    check_len("uniform", shape.batch(), uniform.len())?;
    check_finite("noise", noise)?;
    match uniform.iter().position(|u| !(0.0..1.0).contains(u)) {
        Some(index) => Err(Error::UniformOutOfRange {
            index,
            value: uniform[index],
        }),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes_are_validated() {
        assert!(matches!(Shape::new(0, 3), Err(Error::EmptyBatch)));
        assert!(matches!(Shape::new(3, 0), Err(Error::EmptyDim)));
        assert!(matches!(
            Shape::new(Shape::MAX_BATCH + 1, 1),
            Err(Error::TooLarge { .. })
        ));
        assert!(matches!(
            Shape::new(1, Shape::MAX_DIM + 1),
            Err(Error::TooLarge { .. })
        ));
        assert!(matches!(
            Shape::new(1 << 32, 1 << 31),
            Err(Error::TooLarge { .. })
        ));
        let s = Shape::new(7, 33).unwrap();
        assert_eq!((s.batch(), s.dim(), s.len()), (7, 33, 231));
    }

    #[test]
    fn targets_are_validated() {
        assert!(matches!(Target::new(vec![], vec![]), Err(Error::EmptyDim)));
        assert!(matches!(
            Target::new(vec![0.0; 2], vec![1.0]),
            Err(Error::LengthMismatch { .. })
        ));
        assert!(matches!(
            Target::new(vec![0.0, f32::NAN], vec![1.0; 2]),
            Err(Error::NonFinite {
                what: "mu",
                index: 1,
                ..
            })
        ));
        assert!(matches!(
            Target::new(vec![0.0; 2], vec![1.0, f32::INFINITY]),
            Err(Error::NonFinite {
                what: "sigma",
                index: 1,
                ..
            })
        ));
        assert!(matches!(
            Target::new(vec![0.0; 2], vec![1.0, 0.0]),
            Err(Error::NonPositiveSigma { index: 1, .. })
        ));
        assert!(matches!(
            Target::new(vec![0.0], vec![-1.0]),
            Err(Error::NonPositiveSigma { .. })
        ));
        // Outside [2^-57, 2^57]: the float32 squares overflow or underflow. At the ends: in.
        for bad in [1e-30, 1e-18, 1e18, 1e20, 1e38] {
            assert!(
                matches!(
                    Target::new(vec![0.0], vec![bad]),
                    Err(Error::SigmaOutOfRange { .. })
                ),
                "{bad}"
            );
        }
        let (low, high) = Target::SIGMA_RANGE;
        assert_eq!((low, high), (2f32.powi(-57), 2f32.powi(57)));
        assert!(Target::new(vec![0.0; 2], vec![low, high]).is_ok());
        let t = Target::new(vec![1.0, 2.0], vec![0.5, 4.0]).unwrap();
        assert_eq!(t.inv_var(), &[4.0, 0.0625]);
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
        assert!(
            t.check_states(
                shape,
                &[0.0; 4]
                    .iter()
                    .copied()
                    .chain([1e17, -1.0])
                    .collect::<Vec<_>>()
            )
            .is_ok()
        );
        assert!(matches!(
            t.check_states(shape, &[0.0, 0.0, 0.0, 0.0, 1e20, -1.0]),
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

    #[test]
    fn step_sizes_and_noise_are_validated() {
        for bad in [0.0, -1.0, f32::NAN, f32::INFINITY] {
            assert!(
                matches!(StepConfig::new(bad, 1), Err(Error::BadStepSize(_))),
                "{bad}"
            );
        }
        let shape = Shape::new(2, 2).unwrap();
        assert!(check_noise(shape, &[0.0; 4], &[0.5; 2]).is_ok());
        assert!(matches!(
            check_noise(shape, &[0.0; 3], &[0.5; 2]),
            Err(Error::LengthMismatch { .. })
        ));
        assert!(matches!(
            check_noise(shape, &[0.0; 4], &[0.5; 3]),
            Err(Error::LengthMismatch { .. })
        ));
        assert!(matches!(
            check_noise(shape, &[0.0, f32::NAN, 0.0, 0.0], &[0.5; 2]),
            Err(Error::NonFinite { .. })
        ));
        for bad in [1.5, 1.0, -0.0001, f32::NAN] {
            assert!(
                matches!(
                    check_noise(shape, &[0.0; 4], &[0.5, bad]),
                    Err(Error::UniformOutOfRange { index: 1, .. })
                ),
                "{bad}"
            );
        }
        assert!(check_noise(shape, &[0.0; 4], &[0.0, 1.0 - f32::EPSILON / 2.0]).is_ok());
    }
}
