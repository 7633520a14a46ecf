//! Warm-up adaptation: the step size by a stochastic-approximation rule in the log step size,
//! and optionally a proposal scale per dimension from the chains' pooled variance.
//!
//! # The step size
//!
//! After each warm-up launch the run knows that launch's acceptance rate `a_t` over all chains
//! (with a million chains, an almost exact number). The rule (Robbins and Monro, on
//! `log step_size`):
//!
//! ```text
//! log s_{t+1} = log s_t + 3 (a_t - target) / (t + 1)^0.6
//! ```
//!
//! moves the step size up while too many proposals are accepted and down while too few, by a
//! gain that shrinks so that the step size settles; the exponent in `(0.5, 1]` makes the steps
//! sum to infinity and their squares to a finite number, which is what lets the iteration
//! converge to the step size whose acceptance rate is `target`. The factor 3 lets a first guess
//! 10x too large (acceptance near 0, so `a_t - target` no larger than `-target`) come down in
//! a few dozen launches; a move is capped at 1 (a factor `e`) per launch. After the warm-up the
//! step size is frozen, and the chains run with it as with a given step size.
//!
//! # Per-dimension scales (diagonal preconditioning)
//!
//! A random walk with one step size for every dimension moves at the pace of the narrowest:
//! on a target whose standard deviations span 100x, the step size that keeps the acceptance
//! at 0.234 is about the narrow dimensions' width, and the wide ones diffuse 100x too slowly
//! (their ESS per step falls by about 100^2). Adaptive Metropolis (Haario, Saksman and
//! Tamminen 2001) proposes from the chains' own covariance instead; its diagonal is a scale per
//! dimension: `proposal_d = x_d + step_size * scale_d * eps_d` ([`crate::StepConfig::with_scales`]).
//! [`ScaleAdaptation`] sets `scale_d` to the standard deviation of dimension `d` that the
//! latest warm-up launch's draws give, pooled over every chain (with many chains, a precise
//! number after a few steps: [`crate::Diagnostics::variance`]), divided by their geometric
//! mean so that the step size keeps its size. The step size adapts on top, toward the target
//! acceptance. Both are frozen after the warm-up, so the chains afterwards are a plain
//! random-walk sampler with a fixed (diagonal) proposal, valid for any scales.

/// Steps per warm-up launch: the step size adapts after each (`host run --warmup`, and
/// `fused_mh.run(..., warmup=N)` in Python).
pub const WARMUP_LAUNCH_STEPS: u64 = 10;

/// The state of the adaptation.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct StepSizeAdaptation {
    log_step_size: f64,
    target: f64,
    launches: u32,
}

/// The gain of update `t` is `GAIN * (t + 1)^-GAIN_EXPONENT`.
pub const GAIN: f64 = 3.0;
/// See [`GAIN`].
pub const GAIN_EXPONENT: f64 = 0.6;

impl StepSizeAdaptation {
    /// Starts from `step_size`, toward the acceptance rate `target` (in `(0, 1)`).
    pub fn new(step_size: f32, target: f64) -> Self {
        Self {
            log_step_size: f64::from(step_size).ln(),
            target,
            launches: 0,
        }
    }

    /// The step size for the next launch.
    pub fn step_size(&self) -> f32 {
        self.log_step_size.exp() as f32
    }

    /// Takes one launch's acceptance rate and moves the step size.
    pub fn update(&mut self, acceptance: f64) {
        let gain = GAIN * (f64::from(self.launches) + 1.0).powf(-GAIN_EXPONENT);
        self.log_step_size += (gain * (acceptance - self.target)).clamp(-1.0, 1.0);
        self.launches += 1;
    }
}

/// The per-dimension proposal scales of the warm-up (see the module doc).
#[derive(Clone, Debug, PartialEq)]
pub struct ScaleAdaptation {
    scales: Vec<f32>,
}

impl ScaleAdaptation {
    /// Starts from scale 1 in every one of `dim` dimensions (the plain step size).
    pub fn new(dim: usize) -> Self {
        Self {
            scales: vec![1.0; dim],
        }
    }

    /// The scales for the next launch (relative to the step size).
    pub fn scales(&self) -> &[f32] {
        &self.scales
    }

    /// Takes the pooled variance of each dimension over the latest launch's draws: each scale
    /// becomes its dimension's standard deviation over the geometric mean of them all.
    /// Dimensions whose variance is not a positive finite number (chains that did not move)
    /// keep their scale, and the geometric mean is taken over the others.
    pub fn update(&mut self, variance: &[f64]) {
        let usable = |v: f64| v.is_finite() && v > 0.0;
        let logs: Vec<f64> = variance
            .iter()
            .filter(|&&v| usable(v))
            .map(|v| 0.5 * v.ln())
            .collect();
        if logs.is_empty() {
            return;
        }
        let log_mean = logs.iter().sum::<f64>() / logs.len() as f64;
        for (s, &v) in self.scales.iter_mut().zip(variance) {
            if usable(v) {
                *s = (0.5 * v.ln() - log_mean).exp() as f32;
            }
        }
    }
}

/// Dense preconditioning from the pooled chains: the covariance of the states of all chains
/// over a warm-up window, and its Cholesky factor `L`, for proposals `x + s L eps`
/// (Haario, Saksman and Tamminen's adaptive Metropolis with its full covariance). With many
/// chains one window gives a precise covariance: pooled over `C` chains and `T` steps, each
/// entry's relative standard error is about `sqrt(2 / (C T_eff))`.
#[derive(Clone, Debug, PartialEq)]
pub struct DenseAdaptation {
    dim: usize,
    count: f64,
    sum: Vec<f64>,
    /// Row-major `[dim, dim]` sums of products.
    products: Vec<f64>,
    /// `[chains, dim]`: each chain's sum of its states.
    chain_sums: Vec<f64>,
    /// `[dim, dim]`: the sum over chains of the products of each chain's sums, where given
    /// whole ([`DenseAdaptation::from_window_sums`]) rather than from `chain_sums`.
    chain_products: Option<Vec<f64>>,
    /// States observed per chain.
    steps: f64,
}

impl DenseAdaptation {
    /// An empty window for states of `dim` elements.
    pub fn new(dim: usize) -> Self {
        Self {
            dim,
            count: 0.0,
            sum: vec![0.0; dim],
            products: vec![0.0; dim * dim],
            chain_sums: Vec::new(),
            chain_products: None,
            steps: 0.0,
        }
    }

    /// The window of `chains` chains observed for `steps` steps each, from its sums as the GPU
    /// adds them up (`fused_mh_kernel::model::window_sums_len`): the sum of the states
    /// `[dim]`, the sum of their products `[dim, dim]` and the sum over chains of the products
    /// of each chain's sums `[dim, dim]` (lower triangles).
    pub fn from_window_sums(dim: usize, chains: usize, steps: u32, sums: &[f64]) -> Self {
        let (sum, rest) = sums.split_at(dim);
        let (products, chain_products) = rest.split_at(dim * dim);
        Self {
            dim,
            count: chains as f64 * f64::from(steps),
            sum: sum.to_vec(),
            products: products.to_vec(),
            chain_sums: Vec::new(),
            chain_products: Some(chain_products.to_vec()),
            steps: f64::from(steps),
        }
    }

    /// `sum over chains of S_c,i S_c,j`, `S_c` chain `c`'s sum of its states.
    fn chain_product(&self, i: usize, j: usize) -> f64 {
        match &self.chain_products {
            Some(products) => products[i * self.dim + j],
            None => self
                .chain_sums
                .chunks_exact(self.dim)
                .map(|m| m[i] * m[j])
                .sum(),
        }
    }

    /// Adds the states `[chains, dim]` of one step to the window (the same chains each
    /// time).
    pub fn observe(&mut self, states: &[f32]) {
        let dim = self.dim;
        if self.chain_sums.len() != states.len() {
            self.chain_sums = vec![0.0; states.len()];
        }
        self.steps += 1.0;
        for (s, &v) in self.chain_sums.iter_mut().zip(states) {
            *s += f64::from(v);
        }
        for state in states.chunks_exact(dim) {
            self.count += 1.0;
            for i in 0..dim {
                let vi = f64::from(state[i]);
                self.sum[i] += vi;
                for j in 0..=i {
                    self.products[i * dim + j] += vi * f64::from(state[j]);
                }
            }
        }
    }

    /// The window's covariance `[dim, dim]` (row-major, lower triangle filled), or `None`
    /// with fewer than two states.
    pub fn covariance(&self) -> Option<Vec<f64>> {
        if self.count < 2.0 {
            return None;
        }
        let (dim, n) = (self.dim, self.count);
        let mut cov = vec![0.0; dim * dim];
        for i in 0..dim {
            for j in 0..=i {
                let mean_product = self.products[i * dim + j] / n;
                let c = (mean_product - self.sum[i] / n * (self.sum[j] / n)) * n / (n - 1.0);
                cov[i * dim + j] = c;
                cov[j * dim + i] = c;
            }
        }
        Some(cov)
    }

    /// The pooled within-chain covariance `[dim, dim]`: each chain's states about its own
    /// mean over the window, pooled over the chains (unbiased), or `None` with fewer than two
    /// steps. Before the chains have met it is the local shape of the posterior where each
    /// chain is, where the covariance of all states is the spread between the chains; after,
    /// the two agree.
    pub fn within_covariance(&self) -> Option<Vec<f64>> {
        if self.steps < 2.0 {
            return None;
        }
        let (dim, t, n) = (self.dim, self.steps, self.count);
        let mut cov = vec![0.0; dim * dim];
        for i in 0..dim {
            for j in 0..=i {
                let between = self.chain_product(i, j) / t;
                let c = (self.products[i * dim + j] - between) / (n - n / t);
                cov[i * dim + j] = c;
                cov[j * dim + i] = c;
            }
        }
        Some(cov)
    }

    /// The covariance of all states (`pooled`) or the within-chain covariance.
    fn chosen_covariance(&self, pooled: bool) -> Option<Vec<f64>> {
        if pooled {
            self.covariance()
        } else {
            self.within_covariance()
        }
    }

    /// The lower Cholesky factor `[dim, dim]` (row-major, zeros above the diagonal) of the
    /// window's covariance of all states (`pooled`) or its within-chain covariance
    /// ([`Self::within_covariance`]), or `None` where it is not positive definite (chains that
    /// did not move, or fewer states than dimensions): the caller keeps its previous factor.
    pub fn cholesky(&self, pooled: bool) -> Option<Vec<f32>> {
        let cov = self.chosen_covariance(pooled)?;
        cholesky(&cov, self.dim).map(|l| l.into_iter().map(|v| v as f32).collect())
    }
}

impl DenseAdaptation {
    /// The diagonal factor `diag(sqrt(Sigma_ii))` of the window's covariance (as
    /// [`Self::cholesky`] chooses it), for diagonal preconditioning, or `None` where a variance
    /// is not a positive finite number.
    pub fn diagonal_factor(&self, pooled: bool) -> Option<Vec<f32>> {
        let cov = self.chosen_covariance(pooled)?;
        let dim = self.dim;
        let mut factor = vec![0.0f32; dim * dim];
        for i in 0..dim {
            let v = cov[i * dim + i];
            if !(v.is_finite() && v > 0.0) {
                return None;
            }
            factor[i * dim + i] = v.sqrt() as f32;
        }
        Some(factor)
    }
}

/// The lower Cholesky factor of the symmetric `[n, n]` matrix `a` (row-major), by the
/// Cholesky–Banachiewicz order (row by row), or `None` if a pivot is not a positive finite
/// number.
pub fn cholesky(a: &[f64], n: usize) -> Option<Vec<f64>> {
    let mut l = vec![0.0; n * n];
    for i in 0..n {
        for j in 0..=i {
            let dot: f64 = (0..j).map(|k| l[i * n + k] * l[j * n + k]).sum();
            if i == j {
                let pivot = a[i * n + i] - dot;
                if !(pivot.is_finite() && pivot > 0.0) {
                    return None;
                }
                l[i * n + i] = pivot.sqrt();
            } else {
                l[i * n + j] = (a[i * n + j] - dot) / l[j * n + j];
            }
        }
    }
    Some(l)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The factor of a worked 3 x 3 matrix reproduces it (`L L^T = A`, exact to 1e-12), a
    /// matrix that is not positive definite has none, and a window of states drawn as
    /// `L z` from a known `L` gives back its covariance within 3 %.
    /// The within-chain covariance of a worked window against the textbook two-pass formula
    /// (each chain's deviations from its own mean, pooled, divided by chains * (steps - 1)):
    /// two chains of one coordinate pair, three steps, chain 1 far from chain 0 so that the
    /// covariance of all states is dominated by the spread between them.
    #[test]
    fn within_chain_covariance_is_the_two_pass_formula() {
        let steps: [[f32; 4]; 3] = [
            [1.0, 2.0, 100.0, -50.0],
            [2.0, 2.5, 101.0, -49.0],
            [4.0, 1.0, 99.5, -52.0],
        ];
        let mut window = DenseAdaptation::new(2);
        for s in &steps {
            window.observe(s);
        }
        let mut want = [0.0f64; 4];
        for chain in 0..2 {
            let value = |t: usize, d: usize| f64::from(steps[t][2 * chain + d]);
            let mean = |d: usize| (0..3).map(|t| value(t, d)).sum::<f64>() / 3.0;
            for (i, j) in [(0, 0), (0, 1), (1, 0), (1, 1)] {
                let products: f64 = (0..3)
                    .map(|t| (value(t, i) - mean(i)) * (value(t, j) - mean(j)))
                    .sum();
                want[2 * i + j] += products / (2.0 * 2.0);
            }
        }
        let got = window.within_covariance().expect("a covariance");
        for (g, w) in got.iter().zip(want) {
            assert!(
                (g - w).abs() < 1e-9 * w.abs().max(1.0),
                "{got:?} against {want:?}"
            );
        }
        // The covariance of all states sees the chains' spread (about 2500 in the first).
        assert!(window.covariance().expect("a covariance")[0] > 1000.0);
    }

    #[test]
    fn cholesky_and_the_pooled_covariance() {
        let a = [4.0, 2.0, -2.0, 2.0, 10.0, 2.0, -2.0, 2.0, 6.0];
        let l = cholesky(&a, 3).expect("positive definite");
        for i in 0..3 {
            for j in 0..3 {
                let llt: f64 = (0..3).map(|k| l[i * 3 + k] * l[j * 3 + k]).sum();
                assert!((llt - a[i * 3 + j]).abs() < 1e-12, "({i}, {j}): {llt}");
            }
        }
        assert!(cholesky(&[1.0, 2.0, 2.0, 1.0], 2).is_none());
        let mut window = DenseAdaptation::new(2);
        let mut states = Vec::new();
        // z on a grid of normal quantiles, paired so that the two are uncorrelated.
        let normal = statrs::distribution::Normal::standard();
        let q = |i: usize| {
            statrs::distribution::ContinuousCDF::inverse_cdf(&normal, (i as f64 + 0.5) / 200.0)
        };
        for i in 0..200 {
            for j in 0..200 {
                let (z0, z1) = (q(i), q((j * 7 + i) % 200));
                states.extend([(2.0 * z0) as f32, (z0 + 0.5 * z1) as f32]);
            }
        }
        window.observe(&states);
        let cov = window.covariance().expect("a covariance");
        for (got, want) in cov.iter().zip([4.0, 2.0, 2.0, 1.25]) {
            assert!((got - want).abs() < 0.03 * want, "{got} against {want}");
        }
    }

    /// Against a made-up acceptance curve `a(s) = 1 / (1 + s^2)` (decreasing in the step size,
    /// `a = 0.234` at `s` about 1.81), from 10x too small and 10x too large: after 200 updates
    /// the acceptance is within 0.005 of the target (the issue asks for 0.02 on real chains).
    #[test]
    fn settles_on_the_target_acceptance() {
        let acceptance = |s: f64| 1.0 / (1.0 + s * s);
        for start in [0.181f32, 18.1] {
            let mut a = StepSizeAdaptation::new(start, 0.234);
            for _ in 0..200 {
                a.update(acceptance(f64::from(a.step_size())));
            }
            let got = acceptance(f64::from(a.step_size()));
            assert!(
                (got - 0.234).abs() < 0.005,
                "from {start}: acceptance {got}"
            );
        }
    }

    /// Variances 1, 100, 10^4 (standard deviations 1, 10, 100; geometric mean 10) give scales
    /// 0.1, 1, 10; a dimension with variance 0 or NaN keeps its scale and is left out of the
    /// mean. Tolerance: f32 rounding of exp and ln, a few ulps.
    #[test]
    fn scales_are_standard_deviations_over_their_geometric_mean() {
        let mut a = ScaleAdaptation::new(5);
        a.update(&[1.0, 100.0, 1e4, 0.0, f64::NAN]);
        let want = [0.1, 1.0, 10.0, 1.0, 1.0];
        for (got, want) in a.scales().iter().zip(want) {
            approx::assert_relative_eq!(*got, want, max_relative = 1e-6);
        }
        a.update(&[0.0; 5]);
        approx::assert_relative_eq!(a.scales()[2], 10.0, max_relative = 1e-6);
    }
}
