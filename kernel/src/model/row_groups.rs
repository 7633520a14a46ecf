//! The regressions' row loop: one lane's data rows taken [`ROW_GROUP`] at a time.
//!
//! # Why groups of rows
//!
//! A regression row's share of `-2 log alpha` needs two dot products with the row's `K`
//! columns — its fit `X_n . beta_x` and its move `X_n . (beta_p - beta_x)` — and then a dozen
//! arithmetic instructions. Taken one row at a time, the loop costs far more than that
//! arithmetic: the GPU's compiled loop for posteriordb's wells (`K = 2`) issued about 167
//! instructions a row, of which about 20 were the row's arithmetic; the rest were the slice
//! bookkeeping of the row, the coefficient loop's 64-bit counters, and the coefficients read
//! again from shared memory for every row. The kernel issued 3 instructions a cycle per SM, so
//! those instructions were its time.
//!
//! A group of rows shares that bookkeeping: each coefficient is read once per group and
//! multiplied into all the group's rows, whose fits are independent chains of fused
//! multiply-adds (the warp scheduler issues one row's while another's wait: instruction-level
//! parallelism, on top of the warps'). The group's terms are then added to the lane's sum one
//! row after another in row order, so the sum is the one that one row at a time gives, to the
//! bit, on the GPU and in the CPU reference (which runs this same code).

use super::DATA_LANES;
use crate::math::fma;

/// Rows of one lane whose fits are computed together.
pub const ROW_GROUP: usize = 4;

/// `sum` plus `term(sum, fit, move, y_n)` of each of lane `first`'s rows `n = first,
/// first + DATA_LANES, ...` of the row-major `[N, k]` design `x` and outcomes `y` (`N =
/// y.len()`), in order of `n`: `fit = X_n . beta_x` and `move = X_n . (beta_p - beta_x)` by
/// fused multiply-adds in column order. NaN where the lengths do not fit together (`x` shorter
/// than `N k`, or a state shorter than `k`), which a step rejects.
#[inline(always)]
pub fn fold_lane_rows(
    (x, y, k): (&[f32], &[f32], usize),
    first: usize,
    (beta_x, beta_p): (&[f32], &[f32]),
    sum: f32,
    term: impl Fn(f32, f32, f32, f32) -> f32,
) -> f32 {
    let rows = y.len();
    let short = rows.checked_mul(k).is_none_or(|need| x.len() < need);
    if short || beta_x.len() < k || beta_p.len() < k {
        return f32::NAN;
    }
    let lane_rows = rows.saturating_sub(first).div_ceil(DATA_LANES);
    let groups = lane_rows / ROW_GROUP;
    let data = Design { x, y, k };
    let beta = (beta_x, beta_p);
    let mut sum = sum;
    for group in 0..groups {
        let row = first + group * ROW_GROUP * DATA_LANES;
        // SAFETY: the group's rows are this lane's rows `j < lane_rows`, so each is below `N`.
        sum = unsafe { data.fold_rows::<ROW_GROUP>(row, beta, sum, &term) };
    }
    for j in groups * ROW_GROUP..lane_rows {
        // SAFETY: as above, `j < lane_rows`.
        sum = unsafe { data.fold_rows::<1>(first + j * DATA_LANES, beta, sum, &term) };
    }
    sum
}

/// A design whose `x` holds at least `y.len()` rows of `k` values (checked by
/// [`fold_lane_rows`]).
struct Design<'a> {
    x: &'a [f32],
    y: &'a [f32],
    k: usize,
}

impl Design<'_> {
    /// `sum` plus the terms of the `R` rows `row, row + DATA_LANES, ...`, computed together,
    /// added in row order.
    ///
    /// # Safety
    /// `row + (R - 1) DATA_LANES < y.len()`.
    #[inline(always)]
    unsafe fn fold_rows<const R: usize>(
        &self,
        row: usize,
        (beta_x, beta_p): (&[f32], &[f32]),
        sum: f32,
        term: &impl Fn(f32, f32, f32, f32) -> f32,
    ) -> f32 {
        let k = self.k;
        let (beta_x, beta_p) = (&beta_x[..k], &beta_p[..k]);
        let (mut fit, mut moved) = ([0.0f32; R], [0.0f32; R]);
        // An index loop over slices `k` long: no bounds check is left in it.
        for c in 0..k {
            let (b_x, step) = (beta_x[c], beta_p[c] - beta_x[c]);
            for r in 0..R {
                // SAFETY: row `row + r DATA_LANES` is below `y.len()` (the contract) and `c < k`,
                // so the index is below `y.len() k <= x.len()`.
                let v = unsafe { *self.x.get_unchecked((row + r * DATA_LANES) * k + c) };
                fit[r] = fma(v, b_x, fit[r]);
                moved[r] = fma(v, step, moved[r]);
            }
        }
        let mut sum = sum;
        for r in 0..R {
            // SAFETY: as above.
            let y = unsafe { *self.y.get_unchecked(row + r * DATA_LANES) };
            sum = term(sum, fit[r], moved[r], y);
        }
        sum
    }
}
