//! Running moments of a sample, shared by the GPU kernels and the CPU reference: Welford's
//! update for one more value, and Chan et al.'s formula for combining two samples (the fused
//! kernel's launches into a run's totals, and the split diagnostics' halves into one).
//!
//! A sample of `n` values is kept as `(n, mean, m2)`, `m2` the sum of squared deviations from
//! the mean (the variance is `m2 / n`, or `m2 / (n - 1)` unbiased).

/// The mean and `m2` of a sample of `n - 1` values with mean `mean` and `m2` `m2`, with `v`
/// added (Welford): `delta = v - mean; mean += delta / n; m2 += delta (v - mean_new)`.
#[inline(always)]
pub fn push(n: u64, mean: f64, m2: f64, v: f64) -> (f64, f64) {
    let delta = v - mean;
    let mean = mean + delta / n as f64;
    (mean, m2 + delta * (v - mean))
}

/// The mean and `m2` of two samples together (Chan et al.): `(n_a, mean_a, m2_a)` and
/// `(n_b, mean_b, m2_b)` give `mean = mean_a + delta n_b / n` and
/// `m2 = m2_a + m2_b + delta^2 n_a n_b / n`, with `delta = mean_b - mean_a`, `n = n_a + n_b`.
/// An empty sample leaves the other as it is (`n_a = 0` returns `(mean_b, m2_b)` whatever
/// `mean_a` and `m2_a` hold).
#[inline(always)]
pub fn merge(a: (u64, f64, f64), b: (u64, f64, f64)) -> (f64, f64) {
    let ((n_a, mean_a, m2_a), (n_b, mean_b, m2_b)) = (a, b);
    if n_a == 0 {
        return (mean_b, m2_b);
    }
    if n_b == 0 {
        return (mean_a, m2_a);
    }
    let (n_a, n_b) = (n_a as f64, n_b as f64);
    let n = n_a + n_b;
    let delta = mean_b - mean_a;
    (
        mean_a + delta * (n_b / n),
        m2_a + m2_b + delta * delta * (n_a * n_b / n),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The moments of 1..=5 (mean 3, m2 10) pushed one by one, and merged from 1..=2 and 3..=5
    /// (mean 1.5, m2 0.5 and mean 4, m2 2), equal the exact ones; empty samples change nothing.
    #[test]
    fn push_and_merge_give_the_exact_moments() {
        let (mut mean, mut m2) = (0.0, 0.0);
        for (i, v) in [1.0, 2.0, 3.0, 4.0, 5.0].into_iter().enumerate() {
            (mean, m2) = push(i as u64 + 1, mean, m2, v);
        }
        assert_eq!((mean, m2), (3.0, 10.0));
        assert_eq!(merge((2, 1.5, 0.5), (3, 4.0, 2.0)), (3.0, 10.0));
        assert_eq!(merge((0, f64::NAN, f64::NAN), (3, 4.0, 2.0)), (4.0, 2.0));
        assert_eq!(merge((2, 1.5, 0.5), (0, f64::NAN, 7.0)), (1.5, 0.5));
    }
}
