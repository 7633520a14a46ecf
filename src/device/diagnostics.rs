//! The convergence diagnostics on the GPU: each launch's per-chain moments reduced to a few
//! numbers per dimension by `mh_diagnostics_sums`, so that nothing per chain travels to the
//! host (the formulas: [`crate::diagnostics`]).

use cudarc::driver::PushKernelArg;

use super::{Gpu, grid};
use crate::diagnostics::{self, Diagnostics};
use crate::dispatch;
use crate::error::{Error, Result};
use crate::{ChainStats, DeviceTarget};

impl Gpu {
    /// Nested R-hat and the ESS of each dimension from the running moments in `stats` (which
    /// must keep them: [`Gpu::new_stats`] with `moments`), in superchains of
    /// `superchain_size` consecutive chains. Copies `3 * dim` numbers to the host.
    pub fn diagnostics(
        &self,
        stats: &ChainStats,
        target: &DeviceTarget,
        superchain_size: usize,
    ) -> Result<Diagnostics> {
        let shape = stats.shape;
        target.check_shape(shape)?;
        diagnostics::check_superchains(shape, superchain_size)?;
        let Some((mean, m2)) = &stats.moments else {
            return Err(Error::InvalidRun(
                "the diagnostics need statistics with the running moments".into(),
            ));
        };
        if stats.steps < 2 {
            return Err(Error::InvalidRun(format!(
                "R-hat needs at least 2 draws per chain, not {}",
                stats.steps
            )));
        }
        let mut sums = self.alloc::<f64>("diagnostics sums", 3 * shape.dim() + 1)?;
        let chosen = dispatch::diagnostics_sums(shape, superchain_size, self.device());
        let (batch, dim) = (shape.batch() as u64, shape.dim() as u64);
        let (m, draws) = (superchain_size as u64, stats.steps);
        let mut launch = self.stream.launch_builder(self.function(chosen.entry)?);
        launch
            .arg(mean)
            .arg(m2)
            .arg(&stats.accepted.device)
            .arg(&target.mu);
        launch
            .arg(&batch)
            .arg(&dim)
            .arg(&m)
            .arg(&draws)
            .arg(&mut sums);
        // SAFETY: `mh_diagnostics_sums(mean: *const f64, m2: *const f64, accepted: *const u32,
        // mu: *const f32, batch: u64, dim: u64, superchain: u64, draws: u64, out: *mut f64)` in
        // `kernel/src/gpu/stats.rs`: mean and m2 hold batch*dim f64 (the stats' shape),
        // accepted batch u32, mu dim floats (checked), out 3*dim+1 zeroed f64 and is the only
        // buffer written; the
        // superchain size divides the batch and draws >= 2 (checked); `dispatch` gives blocks
        // of 256 threads and at least one warp per tile of 32 dimensions.
        unsafe { launch.launch(grid(chosen)) }?;
        let sums = self.stream.clone_dtoh(&sums)?;
        // The kernels' counts since the last fold, plus the folded totals.
        let accepted = sums[3 * shape.dim()] + stats.accepted.folded_total as f64;
        Ok(Diagnostics {
            acceptance_rate: Some(accepted / (draws as f64 * shape.batch() as f64)),
            ..diagnostics::from_superchain_sums(
                shape.batch() / superchain_size,
                superchain_size,
                draws,
                &sums,
            )
        })
    }
}
