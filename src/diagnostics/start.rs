//! Where the chains start, and whether R-hat can see anything from there.
//!
//! R-hat detects chains that have not converged by their disagreement. Chains that start from
//! one point disagree only as much as their random walks do, and all share the way in from it:
//! R-hat can then pass long before any chain has reached the target, and nested R-hat the
//! same with superchains that start together. The rule here, per dimension `d`: the standard
//! deviation over the superchains of their mean starting state, times `sqrt(M)` (superchains
//! of `M` chains), over the target's standard deviation `sigma_d`. Independent draws from the
//! target give about 1 (the mean of `M` of them varies by `sigma / sqrt(M)`); superchains
//! started at overdispersed points give more; one starting point for all gives 0. Below
//! [`BLIND_SPREAD`] in any dimension, the between-chain comparison cannot detect
//! non-convergence there; the remedies are to start apart (`--init-dist overdispersed`, or
//! initial states drawn wider than the target), superchains started apart, or a burn-in long
//! enough to spread the chains before the statistics begin (the spread is measured where they
//! begin).
//!
//! The spread is estimated from the first [`SPREAD_SUPERCHAINS`] superchains (all of them when
//! there are fewer): the sample standard deviation of that many has a relative error of about
//! `1 / sqrt(2 * 65536)`, 0.3 %, and a run on the GPU then copies a few megabytes back rather
//! than every state.

use fused_mh_kernel::moments;
use rayon::prelude::*;

use crate::error::Result;
use crate::{Shape, threads};

/// The spread (see the module doc) below which the superchains' starting points are too close
/// together for R-hat: half of what draws from the target give. Starting points drawn from
/// the target itself fall below it only by chance with very few superchains.
pub const BLIND_SPREAD: f64 = 0.5;

/// The most superchains the spread is estimated from (the first ones).
pub const SPREAD_SUPERCHAINS: usize = 65536;

/// How many of the first chains [`start_spread`] reads: [`SPREAD_SUPERCHAINS`] superchains of
/// `superchain_size`, or the whole batch.
pub fn spread_rows(shape: Shape, superchain_size: usize) -> usize {
    let m = superchain_size.max(1);
    (shape.batch() / m).min(SPREAD_SUPERCHAINS) * m
}

/// Superchains in one part of [`start_spread`]'s pass: a fixed partition, folded part by part
/// on all cores and merged in order, so that the spread's bits do not depend on how the cores
/// shared the parts (rayon's own split of a fold does, run to run).
const SUPERCHAINS_PER_PART: usize = 1024;

/// Per dimension, the superchains' starting spread of the module doc: `x` the states where the
/// statistics begin, at least the first [`spread_rows`] chains of `shape` (`[rows, dim]`),
/// superchains of `superchain_size` consecutive chains (at least two of them). One pass over
/// the states in memory order on all cores: Welford's update per superchain within each part
/// of [`SUPERCHAINS_PER_PART`], the parts merged in order by Chan's formula. The same states
/// give the same bits.
pub fn start_spread(
    x: &[f32],
    shape: Shape,
    superchain_size: usize,
    sigma: &[f32],
) -> Result<Vec<f64>> {
    let (dim, m) = (shape.dim(), superchain_size.max(1));
    let k = spread_rows(shape, m) / m;
    // Each part's (superchains, mean, m2) per dimension, in the parts' order.
    let parts: Vec<(u64, Vec<f64>, Vec<f64>)> = threads::install(|| {
        x[..k * m * dim]
            .par_chunks(SUPERCHAINS_PER_PART * m * dim)
            .map(|part| {
                let (mut mean, mut m2, mut start) =
                    (vec![0.0f64; dim], vec![0.0f64; dim], vec![0.0f64; dim]);
                let mut n = 0u64;
                for superchain in part.chunks_exact(m * dim) {
                    start.fill(0.0);
                    for row in superchain.chunks_exact(dim) {
                        start
                            .iter_mut()
                            .zip(row)
                            .for_each(|(a, &v)| *a += f64::from(v));
                    }
                    n += 1;
                    for d in 0..dim {
                        (mean[d], m2[d]) = moments::push(n, mean[d], m2[d], start[d] / m as f64);
                    }
                }
                (n, mean, m2)
            })
            .collect()
    })?;
    let (mut n, mut mean, mut m2) = (0u64, vec![0.0f64; dim], vec![0.0f64; dim]);
    for (n_b, mean_b, m2_b) in parts {
        for d in 0..dim {
            (mean[d], m2[d]) = moments::merge((n, mean[d], m2[d]), (n_b, mean_b[d], m2_b[d]));
        }
        n += n_b;
    }
    let scale = (m as f64).sqrt();
    Ok((0..dim)
        .map(|d| (m2[d] / (k - 1).max(1) as f64).sqrt() * scale / f64::from(sigma[d]))
        .collect())
}

/// The dimensions whose spread (from [`start_spread`]) is below [`BLIND_SPREAD`] (or NaN),
/// worst first.
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
    /// 10) (each the mean of its two chains): standard deviation sqrt(2), times sqrt(2) for
    /// the superchains' size: 2 / sigma in dimension 0, 0 in 1.
    #[test]
    fn spreads_by_hand() {
        let shape = Shape::new(4, 2).unwrap();
        let x = [-1.0, 10.0, 1.0, 10.0, 2.0, 10.0, 2.0, 10.0];
        let spread = start_spread(&x, shape, 2, &[1.0, 4.0]).unwrap();
        approx::assert_relative_eq!(spread[0], 2.0, epsilon = 1e-12);
        assert_eq!(spread[1], 0.0);
        assert_eq!(blind_dimensions(&spread), [1]);
        assert_eq!(blind_dimensions(&[0.6, f64::NAN, 0.1]), [2, 1]);
    }

    /// States drawn from the target give a spread near 1 in superchains of any size (within
    /// 5 %: 8192 superchains' sample standard deviation errs by ~0.8 %); only the first
    /// 65536 superchains are read (a NaN after them changes nothing).
    #[test]
    fn draws_from_the_target_spread_about_one() {
        use rand::{Rng, SeedableRng};
        let mut r = rand_xorshift::XorShiftRng::seed_from_u64(3);
        for m in [1, 4] {
            let shape = Shape::new(8192 * m, 1).unwrap();
            let x: Vec<f32> = (0..shape.len())
                .map(|_| 2.0 * r.sample::<f32, _>(rand_distr::StandardNormal))
                .collect();
            let spread = start_spread(&x, shape, m, &[2.0]).unwrap();
            assert!((spread[0] - 1.0).abs() < 0.05, "M = {m}: {spread:?}");
        }
        let shape = Shape::new(SPREAD_SUPERCHAINS + 2, 1).unwrap();
        let mut x: Vec<f32> = (0..shape.len()).map(|i| (i % 2) as f32).collect();
        x[SPREAD_SUPERCHAINS + 1] = f32::NAN;
        assert!(start_spread(&x, shape, 1, &[1.0]).unwrap()[0].is_finite());
        assert_eq!(spread_rows(shape, 1), SPREAD_SUPERCHAINS);
    }

    /// The same states give the same spread to the bit, run after run, however the cores
    /// share the superchains: a run's report and its repetition (the host's and Python's)
    /// must agree exactly. 40 runs over 65536 superchains of 2 chains in 3 dimensions.
    #[test]
    fn the_spread_is_the_same_every_run() {
        use rand::{Rng, SeedableRng};
        let mut r = rand_xorshift::XorShiftRng::seed_from_u64(5);
        let shape = Shape::new(2 * SPREAD_SUPERCHAINS, 3).unwrap();
        let x: Vec<f32> = (0..shape.len())
            .map(|_| r.sample::<f32, _>(rand_distr::StandardNormal))
            .collect();
        let sigma = [1.0, 2.0, 0.5];
        let first = start_spread(&x, shape, 2, &sigma).unwrap();
        for run in 1..40 {
            let again = start_spread(&x, shape, 2, &sigma).unwrap();
            let bits = |v: &[f64]| v.iter().map(|s| s.to_bits()).collect::<Vec<_>>();
            assert_eq!(
                bits(&again),
                bits(&first),
                "run {run}: {again:?} against {first:?}"
            );
        }
    }
}
