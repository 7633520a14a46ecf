//! The CPU reference: the same step as the GPU kernel, computed on the host.
//!
//! It is built from the kernel crate's own functions ([`fused_mh_kernel::mh`],
//! [`fused_mh_kernel::rng`], the target's terms from [`fused_mh_kernel::target`]) and follows the GPU's order of floating-point operations: each row
//! is cut into quads, quad `q` is added to "lane" `q % G`'s partial sum (`G` =
//! [`layout::group_width`]), and the `G` partials are combined in the group's butterfly order
//! (segment by segment for rows over 1024 elements, [`layout::SEGMENT_QUADS`]). The
//! only differences from the GPU are `sin`, `cos` and `sqrt`, which the GPU computes with its
//! special function units (`ln` is the kernel crate's own, the same bits on both; see
//! [`fused_mh_kernel::math`]), so results agree to about 1e-6 rather than bit for bit.
//!
//! [`step`] and [`step_with_noise`] run on one thread; [`par_step`] and [`par_step_with_noise`]
//! spread the rows over all cores (the library's own thread pool) and give identical results.

use fused_mh_kernel::layout::{self, QUAD, SEGMENT_QUADS, WARP_SIZE};
use fused_mh_kernel::mh;
use fused_mh_kernel::rng;
use fused_mh_kernel::target::{Target as KernelTarget, VisitTarget};
use rayon::prelude::*;

use crate::error::Result;
use crate::{host_memory, threads};

mod chains;
mod model;
mod warm_up;
// The CPU-GPU comparison: for the project's tests and benchmark (`crate::testing`).
#[cfg(any(test, feature = "testing"))]
pub(crate) mod compare;
use crate::Target;
use crate::problem::{Draws, Shape, StepConfig, check_noise, check_step_size};
pub use chains::{ChainsOutput, check_stream, check_thin, run_chains, run_chains_bytes};
pub use model::sample_model;
pub use warm_up::warm_up;

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

/// A CPU step's random numbers: the counter scheme's, or the caller's `noise[batch * dim]`
/// and `uniform[batch]`.
type HostDraws<'a> = Draws<(&'a [f32], &'a [f32])>;

/// The in-kernel random numbers of step `step` under `config`'s seed.
fn philox(config: &StepConfig, step: u64) -> HostDraws<'static> {
    Draws::Philox {
        seed: config.seed(),
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
        Draws::Caller((noise, uniform)),
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
        Draws::Caller((noise, uniform)),
        true,
    )
}

/// The host memory one step's [`StepOutput`] takes, in bytes, with the decisions it is made
/// from (allocated together).
pub fn step_output_bytes(shape: Shape) -> u128 {
    let per_chain = size_of::<bool>() + 2 * size_of::<f32>();
    StepBuffers::bytes(shape) + per_chain as u128 * shape.batch() as u128
}

/// The buffers a step writes ([`step_into`]): the next states `x_new[batch * dim]` and each
/// row's decision. A run allocates them once and reuses them for every step.
struct StepBuffers {
    x_new: Vec<f32>,
    decisions: Vec<Decision>,
}

impl StepBuffers {
    fn new(shape: Shape) -> Result<Self> {
        Ok(Self {
            x_new: host_memory::filled("x_new", shape.len(), 0.0f32)?,
            decisions: host_memory::filled("decisions", shape.batch(), Decision::default())?,
        })
    }

    /// Their size, in bytes.
    fn bytes(shape: Shape) -> u128 {
        4 * shape.len() as u128 + size_of::<Decision>() as u128 * shape.batch() as u128
    }
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
    draws: HostDraws,
    parallel: bool,
) -> Result<StepOutput> {
    check_step(x, shape, target, proposal)?;
    let mut out = StepBuffers::new(shape)?;
    step_into(x, shape, target, proposal, draws, parallel, &mut out)?;
    let decisions = &out.decisions;
    Ok(StepOutput {
        accepted: host_memory::collected("decisions", decisions.iter().map(|d| d.accepted))?,
        log_alpha: host_memory::collected("log alphas", decisions.iter().map(|d| d.log_alpha))?,
        log_u: host_memory::collected("log uniforms", decisions.iter().map(|d| d.log_u))?,
        x_new: out.x_new,
    })
}

/// The checks of a step's inputs: `x` and the target fit the shape, the proposal's scale is
/// usable.
fn check_step(x: &[f32], shape: Shape, target: &Target, proposal: Proposal) -> Result<()> {
    shape.check_len("x", x)?;
    target.check_shape(shape)?;
    match proposal {
        Proposal::StepSize(h) => check_step_size(h),
        Proposal::Scales(s) => crate::problem::check_len("proposal scales", shape.dim(), s.len()),
    }
}

/// One step of every row into buffers the caller owns ([`StepBuffers`], made for `shape`).
/// The inputs' shapes are checked by the callers ([`check_step`]).
fn step_into(
    x: &[f32],
    shape: Shape,
    target: &Target,
    proposal: Proposal,
    draws: HostDraws,
    parallel: bool,
    out: &mut StepBuffers,
) -> Result<()> {
    target.kind().visit(StepInto {
        x,
        shape,
        arrays: target.arrays(),
        proposal,
        draws,
        parallel,
        out,
    })
}

/// [`step_into`] for the target's type: chosen once per step, so that the rows' loop calls
/// the target's terms directly.
struct StepInto<'a> {
    x: &'a [f32],
    shape: Shape,
    /// The target's arrays, `[T::ARRAYS, dim]`.
    arrays: &'a [f32],
    proposal: Proposal<'a>,
    draws: HostDraws<'a>,
    parallel: bool,
    out: &'a mut StepBuffers,
}

impl VisitTarget for StepInto<'_> {
    type Output = Result<()>;

    fn visit<T: KernelTarget>(self) -> Result<()> {
        let Self {
            x,
            shape,
            arrays,
            proposal,
            draws,
            parallel,
            out,
        } = self;
        let dim = shape.dim();
        let StepBuffers { x_new, decisions } = out;
        let one_row = |(row, (out, decision)): (usize, (&mut [f32], &mut Decision))| {
            let x = &x[row * dim..(row + 1) * dim];
            *decision = row_step::<T>(x, row, arrays, proposal, draws, out);
        };
        run_rows(x_new, decisions, dim, parallel, one_row)
    }
}

/// Runs `one_row` on every row of the step's buffers, on all cores if `parallel`.
fn run_rows(
    x_new: &mut [f32],
    decisions: &mut [Decision],
    dim: usize,
    parallel: bool,
    one_row: impl Fn((usize, (&mut [f32], &mut Decision))) + Sync + Send,
) -> Result<()> {
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
    Ok(())
}

/// Quad `q` of a row-sized slice, zero-padded past its end (as the GPU loads it).
fn quad_of(values: &[f32], q: usize) -> [f32; 4] {
    core::array::from_fn(|i| values.get(QUAD * q + i).copied().unwrap_or(0.0))
}

/// One row, in the kernel's order of operations (see the module docs), for target `T` with
/// arrays `arrays` (`[T::ARRAYS, dim]`, each zero-padded past `dim` as the GPU loads it).
fn row_step<T: KernelTarget>(
    x: &[f32],
    row: usize,
    arrays: &[f32],
    proposal: Proposal,
    draws: HostDraws,
    out: &mut [f32],
) -> Decision {
    let dim = x.len();
    let eps = |q: usize| match draws {
        Draws::Philox { seed, step } => {
            rng::normal_quad(rng::key(seed), row as u32, step, q as u32)
        }
        Draws::Caller((noise, _)) => quad_of(&noise[row * dim..(row + 1) * dim], q),
    };

    // Pass 1 writes each quad's proposal straight into `out` (drawn once); pass 2 puts `x`
    // back if the row is rejected.
    let (g, n_quads) = (layout::group_width(dim), layout::quads_per_row(dim));
    let mut partials = [0.0f32; WARP_SIZE];
    let mut term_sum = 0.0f32;
    for (q, chunk) in out.chunks_mut(QUAD).enumerate() {
        let xq = quad_of(x, q);
        let p = mh::propose_scaled(xq, eps(q), proposal.quad(q));
        let lane = q % g;
        let target = T::quad(|k| quad_of(&arrays[k * dim..(k + 1) * dim], q));
        partials[lane] = T::add_quad_terms(partials[lane], xq, p, &target);
        chunk.copy_from_slice(&p[..chunk.len()]);
        // A segment's end (`layout::SEGMENT_QUADS`; rows of at most 1024 elements are one).
        if (q + 1) % SEGMENT_QUADS == 0 || q + 1 == n_quads {
            let segment_sum = mh::group_sum_emulated(&partials[..g]);
            term_sum = mh::add_segment(term_sum, q / SEGMENT_QUADS, segment_sum);
            partials = [0.0; WARP_SIZE];
        }
    }
    let term_total = T::row_total(term_sum);
    let u = match draws {
        Draws::Philox { seed, step } => rng::row_uniform(rng::key(seed), row as u32, step),
        Draws::Caller((_, uniform)) => uniform[row],
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
mod tests;
