//! Float32's reach: where a proposal cannot move a state at all.
//!
//! A float32 next to `v` can only change by a multiple of its *ulp* (unit in the last place,
//! the gap to the next float: `2^-23 |v|` roughly, 0.0625 next to 10^6). A proposal
//! `x + s eps` with `s` a few ulps of `x` rounds back to `x` or to its neighbours: the chain
//! barely moves, and the "accepted" steps that round back to the state are no moves at all
//! (`--mu 1e6 --sigma 0.01`: every chain stays where it started, with an acceptance rate of
//! 0.88). The rule: in dimension `d` the proposal's scale `s_d = step_size * scale_d` must be
//! at least [`REACH_ULPS`] ulps of `|mu_d| + 4 sigma_d`, the largest states the chains
//! ordinarily visit. Below that a run is refused before it starts; the states' scale is the
//! thing to change (subtract the mean, or rescale the problem).

use crate::{StepConfig, Target};

/// The fewest ulps of `|mu_d| + 4 sigma_d` a proposal's scale may have: with 4, a proposal
/// that moves by one standard normal's median (0.67) still crosses 2 or more floats.
pub const REACH_ULPS: f32 = 4.0;

/// A dimension where the proposal's scale is below [`REACH_ULPS`] ulps of the states'.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Unreachable {
    /// The dimension.
    pub dim: usize,
    /// The proposal's scale there, `step_size * scale_d`.
    pub proposal_scale: f32,
    /// The ulp of `|mu_d| + 4 sigma_d`.
    pub ulp: f32,
}

/// The gap from `v` (finite, at least 0) to the next float32 up.
pub fn ulp(v: f32) -> f32 {
    let v = v.abs();
    f32::from_bits(v.to_bits() + 1) - v
}

/// Every dimension of `target` where `config`'s proposal cannot move a state (see the module
/// doc), in order.
pub fn unreachable_dimensions(target: &Target, config: &StepConfig) -> Vec<Unreachable> {
    let (mu, sigma) = (target.mu(), target.sigma());
    (0..mu.len())
        .filter_map(|d| {
            let scale = config
                .scales()
                .and_then(|s| s.get(d).copied())
                .unwrap_or(1.0);
            let proposal_scale = config.step_size() * scale;
            let ulp = ulp(mu[d].abs() + 4.0 * sigma[d]);
            (proposal_scale < REACH_ULPS * ulp).then_some(Unreachable {
                dim: d,
                proposal_scale,
                ulp,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// ulp(1) = 2^-23 and ulp(10^6) = 2^-4 exactly; mu 10^6, sigma 0.01 with the default step
    /// 2.38 / sqrt(dim) * sigma is unreachable, mu 0 sigma 1 is not, and neither is mu 10^6
    /// with sigma 1 (step 0.6 against 4 ulps = 0.25).
    #[test]
    fn the_rule_by_hand() {
        assert_eq!(ulp(1.0), f32::EPSILON);
        assert_eq!(ulp(1.0e6), 0.0625);
        let far = Target::new(vec![1.0e6, 0.0], vec![0.01, 1.0]).unwrap();
        let config = StepConfig::new(2.38 / 2f32.sqrt() * 0.01, 0).unwrap();
        let found = unreachable_dimensions(&far, &config);
        assert_eq!(found.len(), 1);
        assert_eq!((found[0].dim, found[0].ulp), (0, 0.0625));
        let fine = Target::new(vec![1.0e6], vec![1.0]).unwrap();
        let config = StepConfig::new(2.38 * 0.25, 0).unwrap();
        assert!(unreachable_dimensions(&fine, &config).is_empty());
        // Per-dimension scales count: a scale of 1/100 on dimension 1 of the first target.
        let config = StepConfig::new(1.0, 0)
            .unwrap()
            .with_scales(&[1.0, 0.01])
            .unwrap();
        assert_eq!(unreachable_dimensions(&far, &config).len(), 0);
        let config = StepConfig::new(1e-7, 0).unwrap();
        assert_eq!(unreachable_dimensions(&far, &config).len(), 2);
    }
}
