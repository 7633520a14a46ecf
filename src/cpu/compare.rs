//! How a GPU step is compared with the reference: the tolerances, each with its reason, and
//! [`StepOutput::compare`].

use super::StepOutput;

/// Acceptance decisions of the GPU may differ from the reference's only where
/// `|log u - log alpha|` is below this: the GPU's normals use the SFU and land within
/// ~4.5e-6 of the CPU's, which moves `log alpha` by far less than 1e-4 at the dims we run.
pub const DECISION_MARGIN: f32 = 1e-4;

/// At most this fraction of rows (rounded down) may have such a boundary decision differ.
pub const MAX_FLIPPED_FRACTION: f64 = 1e-3;

/// `x_new` must agree to this relative tolerance ...
pub const X_NEW_MAX_RELATIVE: f32 = 1e-5;

/// ... or to this many step sizes in absolute terms, for elements that cancel to near zero.
/// The GPU's normals use `sin/cos.approx` (at most ~2^-20.5 absolute) and `sqrt.approx` (2^-23
/// relative) where the CPU uses libm, times a Box–Muller radius of at most 5.65: at most about
/// 4.5e-6 per normal, so `x + s * eps` differs by at most `4.5e-6 * s`, plus rounding.
pub const X_NEW_ABS_PER_STEP_SIZE: f32 = 5e-6;

/// How a GPU step compared with the reference.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Agreement {
    /// Rows whose decision differs, all within [`DECISION_MARGIN`] of the boundary.
    pub boundary_flips: usize,
    /// Largest `|x_gpu - x_cpu|` over the rows whose decisions agree.
    pub max_abs_diff: f32,
}

/// A GPU result that does not match the reference, with the first offending element.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[error("GPU and CPU reference disagree: {0}")]
pub struct Mismatch(pub String);

impl StepOutput {
    /// Compares a GPU step's outputs (`x_gpu[rows * dim]` and the raw flags `flags[rows]`, for
    /// the same rows as this reference) with this reference, within the tolerances above.
    /// A flag other than 0 or 1 (a poisoned, unwritten byte) or a NaN where the reference is
    /// finite fails.
    pub fn compare(
        &self,
        x_gpu: &[f32],
        flags: &[u8],
        step_size: f32,
    ) -> Result<Agreement, Mismatch> {
        let rows = self.accepted.len();
        if flags.len() != rows || x_gpu.len() != self.x_new.len() {
            return Err(Mismatch(format!(
                "GPU output has {} rows / {} elements, reference {rows} / {}",
                flags.len(),
                x_gpu.len(),
                self.x_new.len()
            )));
        }
        let dim = self.x_new.len() / rows.max(1);
        let abs_floor = X_NEW_ABS_PER_STEP_SIZE * step_size;
        let mut agreement = Agreement {
            boundary_flips: 0,
            max_abs_diff: 0.0,
        };
        for row in 0..rows {
            let accepted_gpu = match flags[row] {
                0 => false,
                1 => true,
                other => {
                    return Err(Mismatch(format!(
                        "accepted[{row}] = {other:#x}: never written"
                    )));
                }
            };
            if accepted_gpu != self.accepted[row] {
                let gap = (self.log_u[row] - self.log_alpha[row]).abs();
                if gap.is_nan() || gap >= DECISION_MARGIN {
                    return Err(Mismatch(format!(
                        "row {row}: GPU accepted = {accepted_gpu}, CPU = {}, |log u - log alpha| = {gap}",
                        self.accepted[row]
                    )));
                }
                agreement.boundary_flips += 1;
                continue;
            }
            for i in row * dim..(row + 1) * dim {
                let (g, c) = (x_gpu[i], self.x_new[i]);
                let diff = (g - c).abs();
                let same_nan = g.is_nan() && c.is_nan();
                let within = diff <= abs_floor || diff <= X_NEW_MAX_RELATIVE * c.abs();
                if !same_nan && !within {
                    return Err(Mismatch(format!(
                        "x_new[{row}, {}]: GPU {g}, CPU {c}",
                        i - row * dim
                    )));
                }
                if !same_nan {
                    agreement.max_abs_diff = agreement.max_abs_diff.max(diff);
                }
            }
        }
        let allowed = (MAX_FLIPPED_FRACTION * rows as f64).floor() as usize;
        if agreement.boundary_flips > allowed {
            return Err(Mismatch(format!(
                "{} decisions differ near the boundary; at most {allowed} allowed",
                agreement.boundary_flips
            )));
        }
        Ok(agreement)
    }
}
