//! A lane's part of one row: its quads' inputs and the proposal of one quad.

use crate::gpu::args::StepArgs;
use crate::gpu::noise::Noise;
use crate::layout;
use crate::mh;
use crate::target::Target;

/// Pass 1 for one quad, from its loaded inputs (`x` and what [`Noise::fetch`] returned): the
/// normals, the proposal with the quad's `scale` ([`StepArgs::proposal_scale`]), and the quad's
/// terms added to the lane's `partial` sum. Returns `(p, partial)`.
#[inline(always)]
pub(crate) fn propose_quad<T: Target, N: Noise>(
    noise: &N,
    row: u32,
    q: usize,
    input: QuadInput,
    (target, scale): (T::Quad, [f32; 4]),
    partial: f32,
) -> ([f32; 4], f32) {
    let eps = noise.normals(input.fetched, row, q);
    let p = mh::propose_scaled(input.x, eps, scale);
    (p, T::add_quad_terms(partial, input.x, p, &target))
}

/// What a lane loads for one quad of a row before computing: the state, and the fetched noise.
#[derive(Clone, Copy)]
pub(crate) struct QuadInput {
    pub(crate) x: [f32; 4],
    pub(crate) fetched: [f32; 4],
}

impl QuadInput {
    pub(crate) const ZERO: QuadInput = QuadInput {
        x: [0.0; 4],
        fetched: [0.0; 4],
    };

    /// Issues the loads of quad `q` of the row that starts at element `offset`.
    ///
    /// # Safety
    /// `offset = row * dim` with `row < batch`, `q < quads_per_row(dim)`, and `V4` only if
    /// `dim % 4 == 0`.
    #[inline(always)]
    pub(crate) unsafe fn load<N: Noise, const V4: bool>(
        args: &StepArgs,
        noise: &N,
        offset: usize,
        q: usize,
    ) -> Self {
        // SAFETY: forwarded from the caller.
        unsafe {
            QuadInput {
                x: args.x_quad::<V4>(offset, q),
                fetched: noise.fetch::<V4>(offset, q, layout::valid_in_quad(args.dim, q)),
            }
        }
    }
}

/// The inputs of all of a lane's quads of one row (`Q` of them at most), loaded ahead.
#[derive(Clone, Copy)]
pub(crate) struct LaneRow<const Q: usize> {
    pub(crate) quads: [QuadInput; Q],
}

impl<const Q: usize> LaneRow<Q> {
    /// Issues the loads of this lane's quads `first_quad + k g` of the row at `offset` (nothing
    /// if `!live`). The caller uses them one row later: the loads are in flight while the
    /// current row computes.
    ///
    /// # Safety
    /// If `live`, `offset = row * dim` with `row < batch`; `V4` only if `dim % 4 == 0`.
    #[inline(always)]
    pub(crate) unsafe fn load<N: Noise, const V4: bool>(
        args: &StepArgs,
        noise: &N,
        offset: usize,
        live: bool,
        first_quad: usize,
        g: usize,
    ) -> Self {
        let n_quads = layout::quads_per_row(args.dim);
        let mut quads = [QuadInput::ZERO; Q];
        for (k, input) in quads.iter_mut().enumerate() {
            let q = first_quad + k * g;
            if live && q < n_quads {
                // SAFETY: a row inside the batch, and q < n_quads.
                *input = unsafe { QuadInput::load::<N, V4>(args, noise, offset, q) };
            }
        }
        LaneRow { quads }
    }
}
