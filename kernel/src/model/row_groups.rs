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

//!
//! # Columns known when the kernel is compiled
//!
//! With `K` a run-time value every load of the design computes its own 64-bit address,
//! `(row + r DATA_LANES) K + c`, and the coefficients are read again for every group. Most
//! regressions have a handful of columns, so [`fold_lane_rows`] has a copy of the loop for each
//! `K` up to [`FIXED_COLUMNS`] (a `match` on `k` choosing a const-generic instance): there the
//! coefficient loop is unrolled, a group's loads are one address plus constant offsets, and
//! the coefficients and their moves stay in registers for the whole call. Wider designs take
//! the general loop. Both do the same arithmetic in the same order.

use super::DATA_LANES;
use crate::math::fma;

/// Rows of one lane whose fits are computed together.
pub const ROW_GROUP: usize = 4;

/// Designs of up to this many columns take a loop compiled for their column count.
pub const FIXED_COLUMNS: usize = 8;

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
    let lanes = LaneShare { rows, first };
    // With `K` fixed, the coefficients and their moves are taken into registers once.
    macro_rules! fixed {
        ($k:literal) => {{
            let beta: [f32; $k] = core::array::from_fn(|c| beta_x[c]);
            let step: [f32; $k] = core::array::from_fn(|c| beta_p[c] - beta_x[c]);
            let design = Design {
                x,
                y,
                k: Fixed::<$k>,
            };
            lanes.fold(&design, &|c| (beta[c], step[c]), sum, &term)
        }};
    }
    match k {
        1 => fixed!(1),
        2 => fixed!(2),
        3 => fixed!(3),
        4 => fixed!(4),
        5 => fixed!(5),
        6 => fixed!(6),
        7 => fixed!(7),
        8 => fixed!(8),
        _ => {
            let (beta_x, beta_p) = (&beta_x[..k], &beta_p[..k]);
            let design = Design { x, y, k: Any(k) };
            let coefficient = |c: usize| (beta_x[c], beta_p[c] - beta_x[c]);
            lanes.fold(&design, &coefficient, sum, &term)
        }
    }
}

/// A design's column count: a constant of the compiled loop, or a run-time value.
trait Columns: Copy {
    /// The count.
    fn count(self) -> usize;
}

/// `K` columns, known when the loop is compiled.
#[derive(Clone, Copy)]
struct Fixed<const K: usize>;

impl<const K: usize> Columns for Fixed<K> {
    #[inline(always)]
    fn count(self) -> usize {
        K
    }
}

/// Columns known at run time.
#[derive(Clone, Copy)]
struct Any(usize);

impl Columns for Any {
    #[inline(always)]
    fn count(self) -> usize {
        self.0
    }
}

/// One lane's share of `rows` data rows: rows `first, first + DATA_LANES, ...`.
struct LaneShare {
    rows: usize,
    first: usize,
}

impl LaneShare {
    /// `sum` plus the terms of the lane's rows of `design`, in row order: groups of
    /// [`ROW_GROUP`], then the rest one at a time. `coefficient(c)` is `(beta_x[c], beta_p[c]
    /// - beta_x[c])` for `c` below the design's column count.
    #[inline(always)]
    fn fold<C: Columns>(
        &self,
        design: &Design<'_, C>,
        coefficient: &impl Fn(usize) -> (f32, f32),
        sum: f32,
        term: &impl Fn(f32, f32, f32, f32) -> f32,
    ) -> f32 {
        let lane_rows = self.rows.saturating_sub(self.first).div_ceil(DATA_LANES);
        let groups = lane_rows / ROW_GROUP;
        let mut sum = sum;
        for group in 0..groups {
            let row = self.first + group * ROW_GROUP * DATA_LANES;
            // SAFETY: the group's rows are this lane's rows `j < lane_rows`, each below `N`.
            sum = unsafe { design.fold_rows::<ROW_GROUP>(row, coefficient, sum, term) };
        }
        for j in groups * ROW_GROUP..lane_rows {
            let row = self.first + j * DATA_LANES;
            // SAFETY: as above, `j < lane_rows`.
            sum = unsafe { design.fold_rows::<1>(row, coefficient, sum, term) };
        }
        sum
    }
}

/// A design whose `x` holds at least `y.len()` rows of `k` values (checked by
/// [`fold_lane_rows`]).
struct Design<'a, C: Columns> {
    x: &'a [f32],
    y: &'a [f32],
    k: C,
}

impl<C: Columns> Design<'_, C> {
    /// `sum` plus the terms of the `R` rows `row, row + DATA_LANES, ...`, computed together,
    /// added in row order.
    ///
    /// # Safety
    /// `row + (R - 1) DATA_LANES < y.len()`.
    #[inline(always)]
    unsafe fn fold_rows<const R: usize>(
        &self,
        row: usize,
        coefficient: &impl Fn(usize) -> (f32, f32),
        sum: f32,
        term: &impl Fn(f32, f32, f32, f32) -> f32,
    ) -> f32 {
        let k = self.k.count();
        let (mut fit, mut moved) = ([0.0f32; R], [0.0f32; R]);
        for c in 0..k {
            let (b_x, step) = coefficient(c);
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::vec::Vec;

    /// One row at a time, straight from the definition: the sum `fold_lane_rows` must give to
    /// the bit, whatever path (fixed or general columns, groups or the rest) it takes.
    fn one_row_at_a_time(x: &[f32], y: &[f32], k: usize, first: usize, b: (&[f32], &[f32])) -> f32 {
        let term = |sum: f32, fit: f32, d: f32, y: f32| fma(fit - y, d, sum);
        let mut sum = 0.5;
        for n in (first..y.len()).step_by(DATA_LANES) {
            let (mut fit, mut d) = (0.0f32, 0.0f32);
            for c in 0..k {
                fit = fma(x[n * k + c], b.0[c], fit);
                d = fma(x[n * k + c], b.1[c] - b.0[c], d);
            }
            sum = term(sum, fit, d, y[n]);
        }
        sum
    }

    /// Every column count from 1 to 11 (the fixed loops and the general one), row counts that
    /// leave every lane a different remainder after its groups, and every lane: equal to the
    /// bit. Short data or states give NaN.
    #[test]
    fn groups_sum_as_one_row_at_a_time() {
        let value = |i: usize| ((i * 7919 % 1013) as f32 - 506.0) / 97.0;
        for k in 1..=FIXED_COLUMNS + 3 {
            let beta_x: Vec<f32> = (0..k).map(|c| value(c + 3) * 0.1).collect();
            let beta_p: Vec<f32> = (0..k).map(|c| value(c + 11) * 0.1).collect();
            for rows in [1, 31, 33, 127, 128, 300] {
                let x: Vec<f32> = (0..rows * k).map(value).collect();
                let y: Vec<f32> = (0..rows).map(|n| value(n + 5)).collect();
                for first in 0..DATA_LANES {
                    let term = |sum: f32, fit: f32, d: f32, y: f32| fma(fit - y, d, sum);
                    let got = fold_lane_rows((&x, &y, k), first, (&beta_x, &beta_p), 0.5, term);
                    let want = one_row_at_a_time(&x, &y, k, first, (&beta_x, &beta_p));
                    assert_eq!(
                        got.to_bits(),
                        want.to_bits(),
                        "k {k}, rows {rows}, lane {first}"
                    );
                }
            }
        }
        let term = |sum: f32, _: f32, _: f32, _: f32| sum;
        let (x, y) = ([1.0f32; 5], [0.0f32; 3]);
        assert!(fold_lane_rows((&x, &y, 2), 0, (&[0.0; 2], &[0.0; 2]), 0.0, term).is_nan());
        let x = [1.0f32; 6];
        assert!(fold_lane_rows((&x, &y, 2), 0, (&[0.0; 1], &[0.0; 2]), 0.0, term).is_nan());
        assert!(!fold_lane_rows((&x, &y, 2), 0, (&[0.0; 2], &[0.0; 2]), 0.0, term).is_nan());
    }
}
