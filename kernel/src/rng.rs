//! The counter scheme: which Philox block every random number of a step comes from, and the
//! transforms from random bits to uniforms and standard normals.
//!
//! # Counter scheme
//!
//! The random numbers of one step are a pure function of four things: the **seed**, the
//! **row** (chain), the **step** (how many steps that chain has taken) and the **element**
//! (coordinate). Nothing else enters — not the block size, the grid, which warp or lane does the
//! work, how many launches a run is split into, or whether the GPU or the CPU computes them.
//!
//! | Philox input | value |
//! |---|---|
//! | key `[k0, k1]` | the 64-bit seed, low word first |
//! | counter word 0 | the *quad* index `element / 4`, or [`UNIFORM_QUAD`] for the row's uniform |
//! | counter word 1 | the row, `0 <= row < 2^32` |
//! | counter words 2, 3 | the step, low word first (64 bits) |
//!
//! One Philox call gives 128 bits: the four normals of elements `4q .. 4q+4` of a row (two
//! Box–Muller pairs), or, at quad [`UNIFORM_QUAD`], the row's acceptance uniform from word 0
//! (words 1 to 3 are unused). Elements of a last partial quad past `dim` are drawn and thrown
//! away. Quad indices reach at most `(dim - 1) / 4 < 2^30` because `dim` fits in 32 bits, so they
//! never collide with [`UNIFORM_QUAD`]; every (seed, row, step, element) therefore has a
//! counter of its own, and no two numbers of a run share bits.

use crate::math;
use crate::philox::{
    Ctr, FirstRoundHalf, Key, SecondRoundHalf, philox4x32_10_with, philox4x32_10_with_halves,
};

/// Counter word 0 of the row's acceptance uniform: a quad index no element can have.
pub const UNIFORM_QUAD: u32 = u32::MAX;

/// The bits of 1.0f32: OR-ing 23 random bits into its mantissa gives a float uniform on
/// `[1, 2)`, exactly, with no int-to-float conversion: `ONE_BITS | (bits >> 9)` is a single
/// `LEA.HI` instruction on the GPU (shift and add in one).
const ONE_BITS: u32 = 0x3f80_0000;
/// The bits of 2.0f32: the same trick gives a uniform on `[2, 4)`.
const TWO_BITS: u32 = 0x4000_0000;

/// The Philox key of a seed: the low 32 bits first.
#[inline(always)]
pub fn key(seed: u64) -> Key {
    [seed as u32, (seed >> 32) as u32]
}

/// The Philox counter of quad `quad` of row `row` at step `step` (see the module docs).
#[inline(always)]
pub fn counter(quad: u32, row: u32, step: u64) -> Ctr {
    [quad, row, step as u32, (step >> 32) as u32]
}

/// A uniform on `[0, 1)` from the top 23 bits of `bits`: one of the 2^23 values `k * 2^-23`.
#[inline(always)]
pub fn uniform(bits: u32) -> f32 {
    one_plus_uniform(bits) - 1.0
}

/// `1 +` [`uniform`]`(bits)`, exactly: one of the 2^23 values `1 + k * 2^-23` on `[1, 2)`,
/// the bits alone, before the subtraction (what the normal transform's radius takes).
#[inline(always)]
pub fn one_plus_uniform(bits: u32) -> f32 {
    f32::from_bits(ONE_BITS | (bits >> 9))
}

/// `3 pi` rounded to f32 (the tie goes to even, 2^-22 below `3 * PI`).
const THREE_PI: f32 = 3.0 * core::f32::consts::PI;

/// A uniform angle on `[-pi, pi]`: `pi v - 3 pi` for `v` uniform on `[2, 4)`, one fused
/// multiply-add instead of a subtraction and a multiplication. The rounding of `3 pi` moves
/// both ends by about 2^-22, so the ends are only approximately `-pi` and `pi`; `sin` and `cos`
/// do not care.
#[inline(always)]
pub fn uniform_angle(bits: u32) -> f32 {
    math::fma(
        f32::from_bits(TWO_BITS | (bits >> 9)),
        core::f32::consts::PI,
        -THREE_PI,
    )
}

/// Two independent standard normals from two words, by the Box–Muller transform:
/// `r = sqrt(-2 ln u1)`, `theta` uniform on `[-pi, pi]`, normals `(r cos theta, r sin theta)`.
///
/// `u1 = 1 - w` for the uniform `w` of `a`, on `(0, 1]` so that its logarithm is finite; the
/// radius squared comes from [`math::minus_two_ln_complement`], which takes `1 + w` (exact, and
/// `w` is exact near `u1 = 1`, where the GPU's fast logarithm needs it). The angle is centred on
/// `[-pi, pi]`, the range where the GPU's `sin/cos.approx` are most accurate. With 23-bit uniforms,
/// `u1 >= 2^-23`, so `|z| <= sqrt(2 * 23 ln 2) ~= 5.65`: the tails beyond 5.65 standard
/// deviations (probability 1.6e-8) are cut off, which no test of a few million draws can see
/// and no MCMC proposal cares about.
#[inline(always)]
pub fn box_muller(a: u32, b: u32) -> [f32; 2] {
    box_muller_with(a, b, math::minus_two_ln_complement)
}

/// [`box_muller`] with the radius squared `-2 ln(1 - w)` from `minus_two_ln_complement` (given
/// `1 + w`, as [`math::minus_two_ln_complement`]): the lessons compare the GPU's fast
/// logarithm with the CPU's polynomial ([`math::minus_two_ln_normal`]) on the GPU itself.
#[inline(always)]
pub fn box_muller_with(a: u32, b: u32, minus_two_ln_complement: impl Fn(f32) -> f32) -> [f32; 2] {
    let r = math::sqrt(minus_two_ln_complement(one_plus_uniform(a)));
    let theta = uniform_angle(b);
    [r * math::cos(theta), r * math::sin(theta)]
}

/// The random numbers of one step under one seed: the counter scheme with the step fixed.
///
/// The step fills counter words 2 and 3, the same for every row and quad of a launch, so the
/// half of Philox's first round that depends on them is computed once here
/// ([`FirstRoundHalf`]) instead of in every call: the kernel builds one per step, outside its
/// loops over rows and quads.
#[derive(Clone, Copy, Debug)]
pub struct StepDraws {
    key: Key,
    half: FirstRoundHalf,
}

impl StepDraws {
    /// The draws of step `step` under `key`.
    #[inline(always)]
    pub fn new(key: Key, step: u64) -> Self {
        let ctr = counter(0, 0, step);
        StepDraws {
            key,
            half: FirstRoundHalf::new(ctr[2], ctr[3], key),
        }
    }

    /// The four standard normals of elements `4 * quad .. 4 * quad + 4` of `row`.
    #[inline(always)]
    pub fn normal_quad(&self, row: u32, quad: u32) -> [f32; 4] {
        self.normal_quad_with(row, quad, math::minus_two_ln_complement)
    }

    /// [`normal_quad`](Self::normal_quad) with the Box–Muller radius from
    /// `minus_two_ln_complement` ([`box_muller_with`]).
    #[inline(always)]
    pub fn normal_quad_with(
        &self,
        row: u32,
        quad: u32,
        minus_two_ln_complement: impl Fn(f32) -> f32 + Copy,
    ) -> [f32; 4] {
        let bits = philox4x32_10_with(quad, row, &self.half, self.key);
        let [z0, z1] = box_muller_with(bits[0], bits[1], minus_two_ln_complement);
        let [z2, z3] = box_muller_with(bits[2], bits[3], minus_two_ln_complement);
        [z0, z1, z2, z3]
    }

    /// [`normal_quad`](Self::normal_quad)`(row, q)` for the quad `q` of `quad`
    /// ([`QuadDraws::new`]), whose step shares this step's high word: one multiplication fewer.
    #[inline(always)]
    pub fn normal_quad_of(&self, row: u32, quad: &QuadDraws) -> [f32; 4] {
        let bits = philox4x32_10_with_halves(row, &self.half, &quad.half, self.key);
        let complement = math::minus_two_ln_complement;
        let [z0, z1] = box_muller_with(bits[0], bits[1], complement);
        let [z2, z3] = box_muller_with(bits[2], bits[3], complement);
        [z0, z1, z2, z3]
    }

    /// The acceptance uniform on `[0, 1)` of `row`.
    #[inline(always)]
    pub fn row_uniform(&self, row: u32) -> f32 {
        uniform(philox4x32_10_with(UNIFORM_QUAD, row, &self.half, self.key)[0])
    }
}

/// The part of a quad's Philox calls shared by every row and every step with the same high
/// word of the step counter ([`SecondRoundHalf`]): the quad index is counter word 0, the high
/// word counter word 3. A lane of the fused kernel owns the same quads for a whole launch, and
/// a launch's steps share their high word ([`steps_sharing_high_word`]), so the lane builds
/// one per quad before its step loop and [`StepDraws::normal_quad_of`] does the rest.
#[derive(Clone, Copy, Debug)]
pub struct QuadDraws {
    half: SecondRoundHalf,
}

impl QuadDraws {
    /// The draws of quad `quad` under `key` at the steps whose high word is `step`'s.
    #[inline(always)]
    pub fn new(key: Key, step: u64, quad: u32) -> Self {
        QuadDraws {
            half: SecondRoundHalf::new(quad, (step >> 32) as u32, key),
        }
    }
}

/// How many steps from `step` on share its high counter word: those before the next multiple
/// of `2^32`. A launch of the fused kernel runs at most this many (the host splits longer
/// ones), so that its [`QuadDraws`] hold for all of its steps.
#[inline(always)]
pub fn steps_sharing_high_word(step: u64) -> u64 {
    (1 << 32) - (step & u64::from(u32::MAX))
}

/// The four standard normals of elements `4 * quad .. 4 * quad + 4` of `row` at `step`.
#[inline(always)]
pub fn normal_quad(key: Key, row: u32, step: u64, quad: u32) -> [f32; 4] {
    StepDraws::new(key, step).normal_quad(row, quad)
}

/// The acceptance uniform on `[0, 1)` of `row` at `step`.
#[inline(always)]
pub fn row_uniform(key: Key, row: u32, step: u64) -> f32 {
    StepDraws::new(key, step).row_uniform(row)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;
    use std::vec::Vec;

    /// Mean and (population) variance of a sample, accumulated in f64.
    fn moments(xs: impl Iterator<Item = f32>) -> (f64, f64, usize) {
        let (mut n, mut sum, mut sum2) = (0usize, 0f64, 0f64);
        for x in xs {
            let x = f64::from(x);
            n += 1;
            sum += x;
            sum2 += x * x;
        }
        let mean = sum / n as f64;
        (mean, sum2 / n as f64 - mean * mean, n)
    }

    const DRAWS: u32 = 1 << 20; // >= 10^6 draws, as the issue asks

    #[test]
    fn uniforms_have_the_moments_and_range_of_u01() {
        let key = key(0x1234_5678_9abc_def0);
        let draws = (0..DRAWS).map(|row| row_uniform(key, row, 7));
        let all: Vec<f32> = draws.collect();
        assert!(
            all.iter().all(|&u| (0.0..1.0).contains(&u)),
            "a uniform left [0, 1)"
        );
        let (mean, var, n) = moments(all.iter().copied());
        // U[0,1): mean 1/2, variance 1/12. The sample mean's standard error is
        // sqrt(1/12 / n) ~= 2.8e-4 for n = 2^20; allow 5 standard errors. The sample variance's
        // standard error is sqrt((1/80 - 1/144) / n) ~= 7.3e-5; allow 5 of those too.
        let se_mean = (1.0 / 12.0 / n as f64).sqrt();
        let se_var = ((1.0 / 80.0 - 1.0 / 144.0) / n as f64).sqrt();
        assert!((mean - 0.5).abs() < 5.0 * se_mean, "mean {mean}");
        assert!((var - 1.0 / 12.0).abs() < 5.0 * se_var, "variance {var}");
        // Both ends of the range are reached at this sample size (P(miss) ~ e^-64 each
        // for the bottom and top 1/16384 of the interval).
        assert!(uniform(0) == 0.0 && uniform(u32::MAX) == 1.0 - 2f32.powi(-23));
        // The Box–Muller radius's argument `1 - w` is then on (0, 1]: 2^-23 at the top, 1 at 0.
        assert!(1.0 - uniform(u32::MAX) == 2f32.powi(-23) && 1.0 - uniform(0) == 1.0);
        // The angle's ends are -pi and pi to within one step of its grid (pi 2^-22 ~= 7.5e-7)
        // plus the rounding of 3 pi (see `uniform_angle`).
        let (a0, a1) = (uniform_angle(0), uniform_angle(u32::MAX));
        let pi = core::f32::consts::PI;
        assert!(
            (a0 + pi).abs() <= 1e-6 && (a1 - pi).abs() <= 1e-6,
            "{a0} {a1}"
        );
        let (lo, hi) = all
            .iter()
            .fold((1f32, 0f32), |(lo, hi), &u| (lo.min(u), hi.max(u)));
        assert!(lo < 1e-4 && hi > 1.0 - 1e-4, "range [{lo}, {hi}]");
    }

    #[test]
    fn a_quads_draws_are_its_normals_while_the_high_word_holds() {
        // Steps from a multiple of 2^32 to the one before the next, with the draws built at
        // the first step of each stretch, as a fused launch builds them.
        let key = key(0x0123_4567_89ab_cdef);
        for first in [0u64, (1 << 32) - 3, 7 << 32, u64::MAX - 2] {
            let left = steps_sharing_high_word(first);
            assert_eq!((first + (left - 1)) >> 32, first >> 32, "first {first}");
            assert!(
                first
                    .checked_add(left)
                    .is_none_or(|end| end >> 32 != first >> 32)
            );
            for quad in [0u32, 1, 255, (1 << 30) - 1] {
                let draws = QuadDraws::new(key, first, quad);
                for step in [first, first + (left - 1) / 2, first + (left - 1)] {
                    for row in [0u32, 5, u32::MAX] {
                        let of = StepDraws::new(key, step).normal_quad_of(row, &draws);
                        let plain = normal_quad(key, row, step, quad);
                        assert_eq!(
                            of.map(f32::to_bits),
                            plain.map(f32::to_bits),
                            "quad {quad} row {row} step {step}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn normals_have_the_moments_of_n01() {
        let key = key(42);
        let draws = (0..DRAWS / 4).flat_map(|q| normal_quad(key, 3, 11, q));
        let all: Vec<f32> = draws.collect();
        assert!(all.iter().all(|z| z.is_finite()), "a normal is not finite");
        let (mean, var, n) = moments(all.iter().copied());
        // N(0,1): the sample mean's standard error is 1/sqrt(n) ~= 9.8e-4; the sample
        // variance's is sqrt(2/n) ~= 1.4e-3. Five standard errors each.
        assert!(mean.abs() < 5.0 / (n as f64).sqrt(), "mean {mean}");
        assert!(
            (var - 1.0).abs() < 5.0 * (2.0 / n as f64).sqrt(),
            "variance {var}"
        );
        // Fourth moment: E z^4 = 3, standard error sqrt((105 - 9) / n) ~= 9.6e-3. Checks the
        // shape, which mean and variance alone do not.
        let m4 = all.iter().map(|&z| f64::from(z).powi(4)).sum::<f64>() / n as f64;
        assert!(
            (m4 - 3.0).abs() < 5.0 * (96.0 / n as f64).sqrt(),
            "fourth moment {m4}"
        );
        // The Box-Muller bound: |z| <= sqrt(-2 ln 2^-23) (see `box_muller`).
        let bound = (46.0f32 * core::f32::consts::LN_2).sqrt();
        assert!(all.iter().all(|z| z.abs() <= bound * (1.0 + 1e-6)));
        // About 0.27 % of N(0,1) lies beyond 3: with 2^20 draws, expect ~2831 (sd ~53).
        let beyond3 = all.iter().filter(|z| z.abs() > 3.0).count() as f64;
        let expected = 0.002_699_796 * n as f64;
        assert!(
            (beyond3 - expected).abs() < 5.0 * expected.sqrt(),
            "{beyond3} beyond 3 sd"
        );
    }

    #[test]
    fn every_coordinate_gets_its_own_counter() {
        // The map (quad, row, step) -> counter is injective, and the uniform's counter is
        // never an element's: enumerate a grid of coordinates, including the 32-bit edges of
        // the row and of both step words, and require distinct counters.
        let rows = [0u32, 1, 2, u32::MAX - 1, u32::MAX];
        let steps = [0u64, 1, u64::from(u32::MAX), 1 << 32, u64::MAX];
        let quads = [0u32, 1, 2, (u32::MAX - 1) / 4, UNIFORM_QUAD];
        let mut seen = HashSet::new();
        for &r in &rows {
            for &s in &steps {
                for &q in &quads {
                    assert!(
                        seen.insert(counter(q, r, s)),
                        "counter of ({q}, {r}, {s}) repeats"
                    );
                }
            }
        }
        // The largest quad of the largest dim is still below the uniform's marker.
        let max_dim = u64::from(u32::MAX);
        assert!((max_dim - 1) / 4 < u64::from(UNIFORM_QUAD));
    }

    #[test]
    fn step_draws_are_philox_of_the_documented_counters() {
        // The counter table in the module docs, checked against plain Philox: the split first
        // round (`StepDraws`) must not change which counter a number comes from.
        use crate::philox::philox4x32_10;
        let k = key(0xdead_beef_0123_4567);
        for (row, step, quad) in [(0u32, 0u64, 0u32), (7, 1 << 33, 5), (u32::MAX, u64::MAX, 9)] {
            let bits = philox4x32_10(counter(quad, row, step), k);
            let [z0, z1] = box_muller(bits[0], bits[1]);
            let [z2, z3] = box_muller(bits[2], bits[3]);
            assert_eq!(normal_quad(k, row, step, quad), [z0, z1, z2, z3]);
            let u = uniform(philox4x32_10(counter(UNIFORM_QUAD, row, step), k)[0]);
            assert_eq!(row_uniform(k, row, step), u);
        }
    }

    #[test]
    fn nearby_coordinates_give_unrelated_numbers() {
        // Neighbouring rows, steps and quads must not give equal (or shifted) blocks.
        let k = key(9);
        let base = normal_quad(k, 10, 20, 30);
        for other in [
            normal_quad(k, 11, 20, 30),
            normal_quad(k, 10, 21, 30),
            normal_quad(k, 10, 20, 31),
            normal_quad(key(10), 10, 20, 30),
        ] {
            assert!(
                base.iter().all(|z| !other.contains(z)),
                "{base:?} vs {other:?}"
            );
        }
    }
}
