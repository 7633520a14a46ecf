//! Where a step's random numbers come from: drawn in the kernel, or read from the caller.

use crate::gpu::device::memory::load_quad;
use crate::layout::QUAD;
use crate::rng;

/// Where a step's random numbers come from: drawn in the kernel, or read from the caller.
///
/// Getting a quad's normals is split in two, so that memory loads can be issued early and
/// computation done late: [`Noise::fetch`] does the loading (caller noise loads its quad;
/// Philox has nothing to load), [`Noise::normals`] the computing (Philox draws; caller noise
/// hands back what was fetched).
pub(crate) trait Noise {
    /// Starts getting the normals of quad `quad` of the row whose first element is element
    /// `offset` of the batch (`valid` of them are used).
    ///
    /// # Safety
    /// For caller noise: the quad lies inside the batch, and `V4` only if it is aligned.
    unsafe fn fetch<const V4: bool>(&self, offset: usize, quad: usize, valid: usize) -> [f32; 4];
    /// The normals of quad `quad` of row `row`, given what [`Noise::fetch`] returned for it.
    fn normals(&self, fetched: [f32; 4], row: u32, quad: usize) -> [f32; 4];
    /// The acceptance uniform of `row`.
    ///
    /// # Safety
    /// For caller noise: `row < batch`.
    unsafe fn uniform(&self, row: usize) -> f32;
}

/// Random numbers drawn in the kernel with Philox (the counter scheme of [`crate::rng`]).
pub(crate) struct PhiloxNoise {
    pub(crate) draws: rng::StepDraws,
}

impl Noise for PhiloxNoise {
    #[inline(always)]
    unsafe fn fetch<const V4: bool>(
        &self,
        _offset: usize,
        _quad: usize,
        _valid: usize,
    ) -> [f32; 4] {
        [0.0; 4]
    }
    #[inline(always)]
    fn normals(&self, _fetched: [f32; 4], row: u32, quad: usize) -> [f32; 4] {
        self.draws.normal_quad(row, quad as u32)
    }
    #[inline(always)]
    unsafe fn uniform(&self, row: usize) -> f32 {
        self.draws.row_uniform(row as u32)
    }
}

/// Random numbers from the caller: `noise[batch * dim]`, `uniform[batch]`.
pub(crate) struct CallerNoise {
    pub(crate) noise: *const f32,
    pub(crate) uniform: *const f32,
}

impl Noise for CallerNoise {
    #[inline(always)]
    unsafe fn fetch<const V4: bool>(&self, offset: usize, quad: usize, valid: usize) -> [f32; 4] {
        // SAFETY: the quad lies in the [batch, dim] noise buffer (the caller's guarantee).
        unsafe { load_quad::<V4>(self.noise.add(offset + QUAD * quad), valid) }
    }
    #[inline(always)]
    fn normals(&self, fetched: [f32; 4], _row: u32, _quad: usize) -> [f32; 4] {
        fetched
    }
    #[inline(always)]
    unsafe fn uniform(&self, row: usize) -> f32 {
        // SAFETY: row < batch and the buffer holds `batch` uniforms.
        unsafe { *self.uniform.add(row) }
    }
}
