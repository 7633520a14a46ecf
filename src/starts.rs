//! Generated starting points for the chains: drawn from the target, drawn from it with four
//! times its standard deviation (overdispersed: superchains that start apart show, through
//! nested R-hat, whether they meet), or zeros. `host run --init-dist` and the Python
//! package's `initial_states` both call [`initial_states`], so the same seed gives the same
//! states in both.

use rand::SeedableRng;
use rand_distr::{Distribution, StandardNormal};
use rand_xorshift::XorShiftRng;

use crate::kernel::target::inverse_square;
use crate::{Error, Result, Shape, Target, host_memory};

/// How the starting points spread.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Spread {
    /// `mu + sigma * z`: drawn from the (Gaussian) target.
    Target,
    /// `mu + 4 sigma z`: [`OVERDISPERSION`] times wider than the target.
    Overdispersed,
    /// All zeros.
    Zeros,
}

/// How many of the target's standard deviations [`Spread::Overdispersed`] spreads the
/// starting points.
pub const OVERDISPERSION: f32 = 4.0;

/// `shape.batch()` starting points of `shape.dim()` coordinates, seeded by `seed` (an
/// xorshift generator: a stream of its own, not the kernels' counter scheme). The chains of a
/// superchain (`superchain_size` consecutive chains, a divisor of the batch) start from its
/// first chain's state. The memory is reserved fallibly: too large a shape is an error, not
/// an abort.
pub fn initial_states(
    shape: Shape,
    target: &Target,
    spread: Spread,
    seed: u64,
    superchain_size: usize,
) -> Result<Vec<f32>> {
    let batch = shape.batch();
    if superchain_size == 0 || !batch.is_multiple_of(superchain_size) {
        return Err(Error::InvalidRun(format!(
            "superchain_size = {superchain_size}: must divide the batch of {batch} chains"
        )));
    }
    let dim = shape.dim();
    let width = match spread {
        Spread::Target => 1.0,
        Spread::Overdispersed => OVERDISPERSION,
        Spread::Zeros => return host_memory::filled("initial states", shape.len(), 0.0),
    };
    let mut x = host_memory::reserved("initial states", shape.len())?;
    let mut rng = XorShiftRng::seed_from_u64(seed ^ 0x1217);
    x.extend((0..shape.len()).map(|i| {
        let z: f32 = StandardNormal.sample(&mut rng);
        let d = i % dim;
        target.mu()[d] + width * z / inverse_square(target.sigma()[d]).sqrt()
    }));
    if superchain_size > 1 {
        for chain in 0..shape.batch() {
            let first = chain / superchain_size * superchain_size;
            if first != chain {
                x.copy_within(first * dim..(first + 1) * dim, chain * dim);
            }
        }
    }
    Ok(x)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The chains of a superchain start from its first chain's state; superchains differ.
    #[test]
    fn superchains_share_their_start() {
        let shape = Shape::new(8, 2).unwrap();
        let target = Target::new(vec![0.0, 1.0], vec![1.0, 2.0]).unwrap();
        for spread in [Spread::Target, Spread::Overdispersed] {
            let x = initial_states(shape, &target, spread, 3, 4).unwrap();
            let row = |c: usize| &x[2 * c..2 * c + 2];
            assert!((1..4).all(|c| row(c) == row(0)) && (5..8).all(|c| row(c) == row(4)));
            assert_ne!(row(0), row(4));
        }
        let plain = initial_states(shape, &target, Spread::Target, 3, 1).unwrap();
        assert_ne!(plain[..2], plain[2..4]);
        for m in [0, 3] {
            assert!(initial_states(shape, &target, Spread::Target, 3, m).is_err());
        }
    }

    /// The overdispersed states are the target's, four times as far from mu (same seed, same
    /// normals): exactly, up to float32 rounding of the two products (1 ulp of mu's scale).
    #[test]
    fn overdispersed_is_four_times_as_wide() {
        let shape = Shape::new(500, 3).unwrap();
        let target = Target::new(vec![1.0, -2.0, 0.5], vec![0.5, 2.0, 1.0]).unwrap();
        let plain = initial_states(shape, &target, Spread::Target, 9, 1).unwrap();
        let wide = initial_states(shape, &target, Spread::Overdispersed, 9, 1).unwrap();
        for (i, (p, w)) in plain.iter().zip(&wide).enumerate() {
            let mu = target.mu()[i % 3];
            approx::assert_relative_eq!(
                w - mu,
                4.0 * (p - mu),
                epsilon = 1e-5,
                max_relative = 1e-5
            );
        }
        let zeros = initial_states(shape, &target, Spread::Zeros, 9, 1).unwrap();
        assert!(zeros.len() == 1500 && zeros.iter().all(|&v| v == 0.0));
    }
}
