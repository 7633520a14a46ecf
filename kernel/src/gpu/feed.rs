//! Where a lane's rows come from ([`RowFeed`]), and the feed that keeps the next row in
//! registers ([`RegisterFeed`]); [`super::shared_feed`] keeps it in shared memory instead.

use crate::gpu::args::StepArgs;
use crate::gpu::noise::Noise;
use crate::gpu::row::{LaneRow, QuadInput};
use crate::layout;

/// Where a lane's inputs for its rows come from: each row's loads are issued one row ahead
/// ([`RowFeed::load_next`]), so they travel from memory while the row before computes
/// (software pipelining: without it each warp waited for its loads, and the H200 ran the step
/// at 67 % of the copy bandwidth).
pub(crate) trait RowFeed<N: Noise, const Q: usize> {
    /// Lanes per row when the feed fixes it at compile time (0: `layout::group_width(dim)`).
    const GROUP: usize = 0;
    /// Whether a row's lanes are half its group's, each lane holding two group lanes' quads
    /// (`resident::propose_resident` sums them as the group would: the bits do not change).
    const PAIRED: bool = false;
    /// How many of a lane's quads `resident::propose_resident` computes behind one branch (see
    /// there): 1, a branch per quad, unless the feed says otherwise.
    const QUADS_TOGETHER: usize = 1;
    /// The lanes of a row of `dim` elements, and so the stride between a lane's quads: the
    /// group's ([`RowFeed::GROUP`], else `layout::group_width(dim)`), half of them paired.
    #[inline(always)]
    fn row_lanes(dim: usize) -> usize {
        let group = if Self::GROUP > 0 {
            Self::GROUP
        } else {
            layout::group_width(dim)
        };
        if Self::PAIRED { group / 2 } else { group }
    }
    /// Makes the row loaded by the last [`RowFeed::load_next`] the current one, then issues the
    /// loads of this lane's quads (`first_quad + k g`, `k < Q`) of the row at `offset`
    /// (nothing if `!live`). On return, the current row's quads are readable. `first_quad` is
    /// the lane's first quad of the row: its lane in the group, plus, for a warp's segment of
    /// a long row (`gpu::block_rows`), the segment's first quad.
    ///
    /// # Safety
    /// If `live`, `offset = row * dim` with `row < batch`; `V4` only if `dim % 4 == 0`.
    unsafe fn load_next<const V4: bool>(
        &mut self,
        args: &StepArgs,
        noise: &N,
        offset: usize,
        live: bool,
        first_quad: usize,
        g: usize,
    );
    /// The lane's `k`-th quad of the current row (zeros where the lane has no such quad).
    ///
    /// # Safety
    /// `k < Q`.
    unsafe fn quad(&self, k: usize) -> QuadInput;
}

/// Rows loaded ahead into registers: the current row and the next, `Q` quads each.
pub(crate) struct RegisterFeed<const Q: usize> {
    pub(crate) current: LaneRow<Q>,
    pub(crate) ahead: LaneRow<Q>,
}

impl<const Q: usize> RegisterFeed<Q> {
    pub(crate) const EMPTY: Self = RegisterFeed {
        current: LaneRow {
            quads: [QuadInput::ZERO; Q],
        },
        ahead: LaneRow {
            quads: [QuadInput::ZERO; Q],
        },
    };
}

impl<N: Noise, const Q: usize> RowFeed<N, Q> for RegisterFeed<Q> {
    #[inline(always)]
    unsafe fn load_next<const V4: bool>(
        &mut self,
        args: &StepArgs,
        noise: &N,
        offset: usize,
        live: bool,
        first_quad: usize,
        g: usize,
    ) {
        self.current = self.ahead;
        // SAFETY: forwarded from the caller.
        self.ahead = unsafe { LaneRow::load::<N, V4>(args, noise, offset, live, first_quad, g) };
    }
    #[inline(always)]
    unsafe fn quad(&self, k: usize) -> QuadInput {
        self.current.quads[k]
    }
}
