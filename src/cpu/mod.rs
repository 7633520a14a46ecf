//! The CPU reference: the same step as the GPU kernel, computed on the host.
//!
//! It is built from the kernel crate's own functions ([`fused_mh_kernel::mh`],
//! [`fused_mh_kernel::rng`]) and follows the GPU's order of floating-point operations: each row
//! is cut into quads, quad `q` is added to "lane" `q % G`'s partial sum (`G` =
//! [`mh::group_width`]), and the `G` partials are combined in the group's butterfly order. The
//! only differences from the GPU are `sin`, `cos` and `sqrt`, which the GPU computes with its
//! special function units (`ln` is the kernel crate's own, the same bits on both; see
//! [`fused_mh_kernel::math`]), so results agree to about 1e-6 rather than bit for bit.
//!
//! [`step`] and [`step_with_noise`] run on one thread; [`par_step`] and [`par_step_with_noise`]
//! spread the rows over all cores ([`crate::threads`]) and give identical results.

use fused_mh_kernel::mh::{self, QUAD, WARP_SIZE};
use fused_mh_kernel::philox::Key;
use fused_mh_kernel::rng;
use rayon::prelude::*;

use crate::error::Result;
use crate::{host_memory, threads};

mod chains;
mod compare;
use crate::problem::{Shape, StepConfig, Target, check_noise, check_step_size};
pub use chains::{ChainsOutput, check_stream, check_thin, run_chains};
pub use compare::{
    Agreement, DECISION_MARGIN, MAX_FLIPPED_FRACTION, Mismatch, X_NEW_ABS_PER_STEP_SIZE,
    X_NEW_MAX_RELATIVE,
};

/// The result of one step on the CPU, with the numbers behind each decision.
#[derive(Clone, Debug, PartialEq)]
pub struct StepOutput {
    /// `[batch, dim]`: the proposal where accepted, else the old state.
    pub x_new: Vec<f32>,
    /// `[batch]`: whether each chain moved.
    pub accepted: Vec<bool>,
    /// `[batch]`: `log alpha = log pi(proposal) - log pi(x)` of each chain.
    pub log_alpha: Vec<f32>,
    /// `[batch]`: `log(max(u, 1e-10))` of each chain; accepted exactly when `log_u < log_alpha`.
    pub log_u: Vec<f32>,
}

/// Where a step's random numbers come from.
#[derive(Clone, Copy)]
enum Draws<'a> {
    /// Philox, at this key and step (the kernel's counter scheme).
    Philox { key: Key, step: u64 },
    /// The caller's `noise[batch * dim]` and `uniform[batch]`.
    Caller {
        noise: &'a [f32],
        uniform: &'a [f32],
    },
}

/// The in-kernel random numbers of step `step` under `config`'s seed.
fn philox(config: &StepConfig, step: u64) -> Draws<'static> {
    Draws::Philox {
        key: rng::key(config.seed()),
        step,
    }
}

/// How a step scales its normals: by the step size, or per dimension.
#[derive(Clone, Copy)]
enum Proposal<'a> {
    StepSize(f32),
    /// `step_size * scales[d]` for each dimension `d` (see [`StepConfig::with_scales`]).
    Scales(&'a [f32]),
}

impl Proposal<'_> {
    /// The scales of quad `q`, zero-padded past the row (as the GPU stages them).
    fn quad(&self, q: usize) -> [f32; 4] {
        match self {
            Proposal::StepSize(h) => [*h; QUAD],
            Proposal::Scales(s) => quad_of(s, q),
        }
    }
}

/// One step with random numbers from the counter scheme at `(config.seed(), step)`: the CPU
/// twin of the GPU's `mh_step`. Takes the step size alone (a configuration with scales is
/// refused; [`run_chains`] takes them).
pub fn step(
    x: &[f32],
    shape: Shape,
    target: &Target,
    config: &StepConfig,
    step: u64,
) -> Result<StepOutput> {
    config.check_no_scales("cpu::step")?;
    let proposal = Proposal::StepSize(config.step_size());
    run(x, shape, target, proposal, philox(config, step), false)
}

/// [`step`] on all cores.
pub fn par_step(
    x: &[f32],
    shape: Shape,
    target: &Target,
    config: &StepConfig,
    step: u64,
) -> Result<StepOutput> {
    config.check_no_scales("cpu::par_step")?;
    let proposal = Proposal::StepSize(config.step_size());
    run(x, shape, target, proposal, philox(config, step), true)
}

/// [`par_step`] with the configuration's per-dimension scales, if it has them
/// (`proposal_scales`: [`StepConfig::proposal_scales`] for this shape).
fn par_step_scaled(
    x: &[f32],
    shape: Shape,
    target: &Target,
    config: &StepConfig,
    proposal_scales: Option<&[f32]>,
    step: u64,
) -> Result<StepOutput> {
    let proposal = match proposal_scales {
        Some(s) => Proposal::Scales(s),
        None => Proposal::StepSize(config.step_size()),
    };
    run(x, shape, target, proposal, philox(config, step), true)
}

/// `steps` consecutive steps from step counter `first_step` (all cores): the CPU twin of
/// [`crate::Gpu::run`] without statistics. Returns the final states and each chain's accepted
/// count ([`run_chains`] with nothing saved).
pub fn steps(
    x: &[f32],
    shape: Shape,
    target: &Target,
    config: &StepConfig,
    first_step: u64,
    steps: u64,
) -> Result<(Vec<f32>, Vec<u64>)> {
    let out = run_chains(
        x,
        shape,
        target,
        config,
        first_step,
        steps,
        0,
        None,
        &mut |_, _| Ok(()),
        &mut |_| Ok(()),
    )?;
    Ok((out.x, out.accepted))
}

/// One step with the caller's standard normals `noise[batch * dim]` and uniforms
/// `uniform[batch]`: the CPU twin of the GPU's `mh_step_with_noise`.
pub fn step_with_noise(
    x: &[f32],
    shape: Shape,
    target: &Target,
    step_size: f32,
    noise: &[f32],
    uniform: &[f32],
) -> Result<StepOutput> {
    check_noise(shape, noise, uniform)?;
    run(
        x,
        shape,
        target,
        Proposal::StepSize(step_size),
        Draws::Caller { noise, uniform },
        false,
    )
}

/// [`step_with_noise`] on all cores.
pub fn par_step_with_noise(
    x: &[f32],
    shape: Shape,
    target: &Target,
    step_size: f32,
    noise: &[f32],
    uniform: &[f32],
) -> Result<StepOutput> {
    check_noise(shape, noise, uniform)?;
    run(
        x,
        shape,
        target,
        Proposal::StepSize(step_size),
        Draws::Caller { noise, uniform },
        true,
    )
}

/// A row's decision and the numbers behind it.
#[derive(Clone, Copy, Default)]
struct Decision {
    accepted: bool,
    log_alpha: f32,
    log_u: f32,
}

fn run(
    x: &[f32],
    shape: Shape,
    target: &Target,
    proposal: Proposal,
    draws: Draws,
    parallel: bool,
) -> Result<StepOutput> {
    shape.check_len("x", x)?;
    target.check_shape(shape)?;
    match proposal {
        Proposal::StepSize(h) => check_step_size(h)?,
        Proposal::Scales(s) => crate::problem::check_len("proposal scales", shape.dim(), s.len())?,
    }
    let dim = shape.dim();
    let mut x_new = host_memory::filled("x_new", shape.len(), 0.0f32)?;
    let mut decisions = host_memory::filled("decisions", shape.batch(), Decision::default())?;
    let one_row = |(row, (out, decision)): (usize, (&mut [f32], &mut Decision))| {
        *decision = row_step(
            &x[row * dim..(row + 1) * dim],
            row,
            target,
            proposal,
            draws,
            out,
        );
    };
    if parallel {
        threads::install(|| {
            x_new
                .par_chunks_mut(dim)
                .zip(decisions.par_iter_mut())
                .enumerate()
                .for_each(one_row);
        })?;
    } else {
        x_new
            .chunks_mut(dim)
            .zip(decisions.iter_mut())
            .enumerate()
            .for_each(one_row);
    }
    Ok(StepOutput {
        x_new,
        accepted: host_memory::collected("decisions", decisions.iter().map(|d| d.accepted))?,
        log_alpha: host_memory::collected("log alphas", decisions.iter().map(|d| d.log_alpha))?,
        log_u: host_memory::collected("log uniforms", decisions.iter().map(|d| d.log_u))?,
    })
}

/// Quad `q` of a row-sized slice, zero-padded past its end (as the GPU loads it).
fn quad_of(values: &[f32], q: usize) -> [f32; 4] {
    core::array::from_fn(|i| values.get(QUAD * q + i).copied().unwrap_or(0.0))
}

/// One row, in the kernel's order of operations (see the module docs).
fn row_step(
    x: &[f32],
    row: usize,
    target: &Target,
    proposal: Proposal,
    draws: Draws,
    out: &mut [f32],
) -> Decision {
    let dim = x.len();
    let eps = |q: usize| match draws {
        Draws::Philox { key, step } => rng::normal_quad(key, row as u32, step, q as u32),
        Draws::Caller { noise, .. } => quad_of(&noise[row * dim..(row + 1) * dim], q),
    };

    // Pass 1 writes each quad's proposal straight into `out` (drawn once); pass 2 puts `x`
    // back if the row is rejected.
    let g = mh::group_width(dim);
    let mut partials = [0.0f32; WARP_SIZE];
    for (q, chunk) in out.chunks_mut(QUAD).enumerate() {
        let xq = quad_of(x, q);
        let p = mh::propose_scaled(xq, eps(q), proposal.quad(q));
        let lane = q % g;
        partials[lane] = mh::add_quad_terms(
            partials[lane],
            xq,
            p,
            quad_of(target.mu(), q),
            quad_of(target.inv_var(), q),
        );
        chunk.copy_from_slice(&p[..chunk.len()]);
    }
    let term_total = mh::group_sum_emulated(&partials[..g]);
    let u = match draws {
        Draws::Philox { key, step } => rng::row_uniform(key, row as u32, step),
        Draws::Caller { uniform, .. } => uniform[row],
    };
    let log_u = mh::log_uniform(u);
    // The kernels' form of `accept(log_u, log_alpha)` (see `mh::below_threshold`).
    let accepted = mh::below_threshold(term_total, mh::threshold(log_u));
    let log_alpha = mh::log_alpha(term_total);
    if !accepted {
        out.copy_from_slice(x);
    }
    Decision {
        accepted,
        log_alpha,
        log_u,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The reference model's formulas in f64, written independently of the kernel crate:
    /// log pi(v) = -1/2 sum ((v - mu) / sigma)^2.
    fn log_pi(v: &[f32], t: &Target) -> f64 {
        -0.5 * v
            .iter()
            .zip(t.mu().iter().zip(t.sigma()))
            .map(|(&v, (&m, &s))| ((f64::from(v) - f64::from(m)) / f64::from(s)).powi(2))
            .sum::<f64>()
    }

    fn inputs(batch: usize, dim: usize) -> (Shape, Vec<f32>, Target, Vec<f32>, Vec<f32>) {
        let shape = Shape::new(batch, dim).unwrap();
        let x = (0..batch * dim)
            .map(|i| ((i * 7919 % 1013) as f32 / 1013.0 - 0.5) * 3.0)
            .collect();
        let mu = (0..dim).map(|d| (d as f32 * 0.3).sin()).collect();
        let sigma = (0..dim).map(|d| 0.5 + (d % 3) as f32 * 0.5).collect();
        let noise = (0..batch * dim)
            .map(|i| ((i * 104_729 % 2003) as f32 / 2003.0 - 0.5) * 4.0)
            .collect();
        let uniform = (0..batch).map(|b| (b * 31 % 97) as f32 / 97.0).collect();
        (shape, x, Target::new(mu, sigma).unwrap(), noise, uniform)
    }

    #[test]
    fn caller_noise_step_follows_the_reference_semantics_in_f64() {
        for (batch, dim) in [(1, 1), (5, 3), (9, 33), (3, 130)] {
            let (shape, x, target, noise, uniform) = inputs(batch, dim);
            let step_size = 0.3;
            let out = step_with_noise(&x, shape, &target, step_size, &noise, &uniform).unwrap();
            for b in 0..batch {
                let xb = &x[b * dim..(b + 1) * dim];
                let proposal: Vec<f32> = (0..dim)
                    .map(|d| {
                        (f64::from(xb[d]) + f64::from(step_size) * f64::from(noise[b * dim + d]))
                            as f32
                    })
                    .collect();
                let log_alpha = log_pi(&proposal, &target) - log_pi(xb, &target);
                let log_u = f64::from(uniform[b].max(1e-10)).ln();
                // f32 sums of a few hundred O(1) terms: 1e-4 absolute is ample; decisions
                // closer than that to the boundary are skipped.
                assert!(
                    (f64::from(out.log_alpha[b]) - log_alpha).abs()
                        < 1e-4 * (1.0 + log_alpha.abs())
                );
                assert!((f64::from(out.log_u[b]) - log_u).abs() < 1e-5);
                if (log_u - log_alpha).abs() > 1e-4 {
                    assert_eq!(
                        out.accepted[b],
                        log_u < log_alpha,
                        "row {b} of ({batch}, {dim})"
                    );
                }
                // The proposal, computed in f64: the kernel's fused multiply-add rounds the exact
                // x + s * eps once, so it is within one ulp of this (double rounding aside).
                let want = if out.accepted[b] { &proposal[..] } else { xb };
                for (d, (&got, &want)) in out.x_new[b * dim..(b + 1) * dim]
                    .iter()
                    .zip(want)
                    .enumerate()
                {
                    assert!(
                        approx::ulps_eq!(got, want, max_ulps = 1),
                        "x_new[{b}, {d}] of ({batch}, {dim}): {got} vs {want}"
                    );
                }
            }
        }
    }

    #[test]
    fn parallel_and_serial_agree_exactly() {
        let (shape, x, target, noise, uniform) = inputs(300, 37);
        let config = StepConfig::new(0.4, 77).unwrap();
        assert_eq!(
            step(&x, shape, &target, &config, 5).unwrap(),
            par_step(&x, shape, &target, &config, 5).unwrap()
        );
        assert_eq!(
            step_with_noise(&x, shape, &target, 0.4, &noise, &uniform).unwrap(),
            par_step_with_noise(&x, shape, &target, 0.4, &noise, &uniform).unwrap()
        );
    }

    #[test]
    fn in_kernel_draws_equal_caller_noise_from_the_counter_scheme() {
        // Generating the counter scheme's numbers on the host and passing them as caller noise
        // must give exactly the in-kernel-RNG step.
        let (shape, x, target, _, _) = inputs(17, 45);
        let config = StepConfig::new(0.7, 0xfeed).unwrap();
        let key = rng::key(config.seed());
        let noise: Vec<f32> = (0..shape.batch())
            .flat_map(|b| {
                (0..shape.dim())
                    .map(move |d| rng::normal_quad(key, b as u32, 9, (d / 4) as u32)[d % 4])
            })
            .collect();
        let uniform: Vec<f32> = (0..shape.batch())
            .map(|b| rng::row_uniform(key, b as u32, 9))
            .collect();
        assert_eq!(
            step(&x, shape, &target, &config, 9).unwrap(),
            step_with_noise(&x, shape, &target, 0.7, &noise, &uniform).unwrap()
        );
    }

    #[test]
    fn non_finite_rows_stay_put_and_never_accept() {
        let (shape, mut x, target, noise, _) = inputs(4, 6);
        x[6 + 2] = f32::NAN; // row 1
        x[18] = f32::INFINITY; // row 3
        let uniform = vec![0.0; 4]; // the most favourable uniform: accepts any finite log alpha > -23
        let out = step_with_noise(&x, shape, &target, 0.1, &noise, &uniform).unwrap();
        for row in [1, 3] {
            assert!(!out.accepted[row], "row {row}");
            let (got, want) = (&out.x_new[row * 6..row * 6 + 6], &x[row * 6..row * 6 + 6]);
            assert!(
                got.iter()
                    .zip(want)
                    .all(|(a, b)| a == b || (a.is_nan() && b.is_nan()))
            );
        }
        assert!(
            out.accepted[0] && out.accepted[2],
            "finite rows with u = 0 and small moves accept"
        );
    }

    #[test]
    fn compare_accepts_the_reference_and_catches_each_kind_of_error() {
        let (shape, x, target, noise, uniform) = inputs(50, 9);
        let out = step_with_noise(&x, shape, &target, 0.3, &noise, &uniform).unwrap();
        let flags: Vec<u8> = out.accepted.iter().map(|&a| u8::from(a)).collect();
        let exact = out.compare(&out.x_new, &flags, 0.3).unwrap();
        assert_eq!(
            exact,
            Agreement {
                boundary_flips: 0,
                max_abs_diff: 0.0
            }
        );

        let mut unwritten = flags.clone();
        unwritten[7] = 0xAA;
        assert!(out.compare(&out.x_new, &unwritten, 0.3).is_err());
        let mut nan = out.x_new.clone();
        nan[100] = f32::NAN;
        assert!(out.compare(&nan, &flags, 0.3).is_err());
        let mut off = out.x_new.clone();
        off[5] += 1e-3;
        assert!(out.compare(&off, &flags, 0.3).is_err());
        // A difference below the absolute floor (5e-6 * 0.3) passes.
        let mut close = out.x_new.clone();
        close[5] += 1e-6;
        assert!(out.compare(&close, &flags, 0.3).is_ok());
        // A decision flipped far from the boundary fails.
        let far = (0..50)
            .find(|&r| (out.log_u[r] - out.log_alpha[r]).abs() > 0.1)
            .unwrap();
        let mut flipped = flags.clone();
        flipped[far] ^= 1;
        assert!(out.compare(&out.x_new, &flipped, 0.3).is_err());
    }

    #[test]
    fn bad_inputs_are_errors() {
        let (shape, x, target, noise, uniform) = inputs(2, 3);
        let config = StepConfig::new(0.1, 1).unwrap();
        assert!(step(&x[..5], shape, &target, &config, 0).is_err());
        let other = Target::new(vec![0.0; 4], vec![1.0; 4]).unwrap();
        assert!(step(&x, shape, &other, &config, 0).is_err());
        assert!(step_with_noise(&x, shape, &target, 0.0, &noise, &uniform).is_err());
        assert!(step_with_noise(&x, shape, &target, 0.1, &noise[1..], &uniform).is_err());
    }
}
