//! Where the chains start, and whether R-hat can see anything from there.
//!
//! R-hat detects chains that have not converged by their disagreement. Chains that start from
//! one point disagree only as much as their random walks do, and all share the way in from it:
//! R-hat can then pass long before any chain has reached the target, and nested R-hat the
//! same with superchains that start together. The rule here: in each dimension, the standard
//! deviation of the superchains' starting points (each superchain's mean state, over the
//! superchains) against the target's standard deviation `sigma_d`. Below
//! [`BLIND_SPREAD`] `sigma_d` in any dimension, the between-chain comparison cannot detect
//! non-convergence there; the remedies are to start apart (`--init-dist overdispersed`, or
//! initial states drawn wider than the target), superchains started apart, or a burn-in long
//! enough to spread the chains before the statistics begin (the spread is measured where they
//! begin).

use crate::Shape;

/// The fraction of the target's standard deviation below which the superchains' starting
/// points are too close together for R-hat: half of it. Starting points drawn from the
/// target itself have a spread near 1 (below 0.5 only by chance with very few superchains).
pub const BLIND_SPREAD: f64 = 0.5;

/// Per dimension, the standard deviation over the superchains of their mean starting state,
/// over `sigma[d]`: `x[batch, dim]` the states where the statistics begin, superchains of
/// `superchain_size` consecutive chains (at least two of them).
pub fn start_spread(x: &[f32], shape: Shape, superchain_size: usize, sigma: &[f32]) -> Vec<f64> {
    let (batch, dim, m) = (shape.batch(), shape.dim(), superchain_size.max(1));
    let k = batch / m;
    (0..dim)
        .map(|d| {
            let start = |s: usize| {
                (s * m..(s + 1) * m)
                    .map(|c| f64::from(x[c * dim + d]))
                    .sum::<f64>()
                    / m as f64
            };
            let mean = (0..k).map(start).sum::<f64>() / k as f64;
            let var =
                (0..k).map(|s| (start(s) - mean).powi(2)).sum::<f64>() / (k - 1).max(1) as f64;
            var.sqrt() / f64::from(sigma[d])
        })
        .collect()
}

/// The dimensions whose spread (from [`start_spread`]) is below [`BLIND_SPREAD`], worst
/// first.
pub fn blind_dimensions(spread: &[f64]) -> Vec<usize> {
    let mut blind: Vec<usize> = (0..spread.len())
        .filter(|&d| spread[d] < BLIND_SPREAD || spread[d].is_nan())
        .collect();
    blind.sort_by(|&a, &b| spread[a].total_cmp(&spread[b]));
    blind
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Four chains of two dimensions in superchains of two: superchain starts (0, 10) and (2,
    /// 10) (each the mean of its two chains): spread sqrt(2) / sigma in dimension 0, 0 in 1.
    #[test]
    fn spreads_by_hand() {
        let shape = Shape::new(4, 2).unwrap();
        let x = [-1.0, 10.0, 1.0, 10.0, 2.0, 10.0, 2.0, 10.0];
        let spread = start_spread(&x, shape, 2, &[1.0, 4.0]);
        approx::assert_relative_eq!(spread[0], 2f64.sqrt(), epsilon = 1e-12);
        assert_eq!(spread[1], 0.0);
        assert_eq!(blind_dimensions(&spread), [1]);
        assert_eq!(blind_dimensions(&[0.6, f64::NAN, 0.1]), [2, 1]);
    }
}
