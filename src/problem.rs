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

/// Where a step's random numbers come from, for the GPU and the CPU alike: the counter
/// scheme's (Philox at `(seed, step)`, drawn where the step runs: `fused_mh_kernel::rng`), or
/// the caller's, held by `N` (device buffers, another library's memory, host slices).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Draws<N> {
    /// The counter scheme's numbers of this step.
    Philox {
        /// The Philox key.
        seed: u64,
        /// The step counter.
        step: u64,
    },
    /// The caller's standard normals `[batch, dim]` and uniforms `[batch]` on `[0, 1)`.
    Caller(N),
}

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
