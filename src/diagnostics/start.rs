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

use fused_mh_kernel::moments;
use rayon::prelude::*;

use crate::Shape;

/// The fraction of the target's standard deviation below which the superchains' starting
/// points are too close together for R-hat: half of it. Starting points drawn from the
/// target itself have a spread near 1 (below 0.5 only by chance with very few superchains).
pub const BLIND_SPREAD: f64 = 0.5;

/// Per dimension, the standard deviation over the superchains of their mean starting state,
/// over `sigma[d]`: `x[batch, dim]` the states where the statistics begin, superchains of
/// `superchain_size` consecutive chains (at least two of them). One pass over the states in
/// memory order on all cores (Welford's update per superchain, the cores' parts merged by
/// Chan's formula): a few milliseconds for a million chains of 64.
pub fn start_spread(x: &[f32], shape: Shape, superchain_size: usize, sigma: &[f32]) -> Vec<f64> {
    let (dim, m) = (shape.dim(), superchain_size.max(1));
    let k = shape.batch() / m;
    // (superchains seen, mean, m2) per dimension.
    let empty = || (0u64, vec![0.0f64; dim], vec![0.0f64; dim]);
    let (_, _, m2) = x[..k * m * dim]
        .par_chunks(m * dim)
        .fold(empty, |(n, mut mean, mut m2), superchain| {
            let mut start = vec![0.0f64; dim];
            for row in superchain.chunks_exact(dim) {
                start
                    .iter_mut()
                    .zip(row)
                    .for_each(|(a, &v)| *a += f64::from(v));
            }
            for d in 0..dim {
                (mean[d], m2[d]) = moments::push(n + 1, mean[d], m2[d], start[d] / m as f64);
            }
            (n + 1, mean, m2)
        })
        .reduce(empty, |(n_a, mut mean, mut m2), (n_b, mean_b, m2_b)| {
            for d in 0..dim {
                (mean[d], m2[d]) = moments::merge((n_a, mean[d], m2[d]), (n_b, mean_b[d], m2_b[d]));
            }
            (n_a + n_b, mean, m2)
        });
    (0..dim)
        .map(|d| (m2[d] / (k - 1).max(1) as f64).sqrt() / f64::from(sigma[d]))
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
