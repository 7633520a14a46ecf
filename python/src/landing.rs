//! The page-locked memory that `Device.run`'s counts land in, kept by the `Device` from one call
//! to the next: page-locking costs more than the downloads of one call save, so it pays only
//! where it is kept (`fused_mh::CountLanding`'s module says why).

use std::sync::Mutex;

use fused_mh::{ChainStats, CountLanding, CountMemory, Gpu, RunCounts};

/// Batches above this many chains (12 bytes a chain, 192 MiB) take ordinary memory: a landing
/// that size is not held for the process's life.
const KEPT_BATCH_MAX: usize = 1 << 24;

/// The landing kept between calls (None before the first call, and while a call holds it).
#[derive(Default)]
pub struct KeptLanding(Mutex<Option<CountLanding>>);

/// Where one call's counts land: the kept landing or a new one, or none (ordinary memory).
pub struct CallLanding(Option<CountLanding>);

impl KeptLanding {
    /// The kept landing for a call of `batch` chains, if it was made for as many (taken: a
    /// call running at the same time makes its own). A download fills its landing whole, so
    /// one made for another batch does not serve.
    pub fn take(&self, batch: usize) -> CallLanding {
        let mut kept = self.0.lock().unwrap_or_else(|p| p.into_inner());
        CallLanding(kept.take_if(|l| l.batch() == batch))
    }

    /// Keeps the call's landing for the next call, in place of any kept meanwhile: the batch
    /// run last is the one likely to run next.
    fn keep(&self, landing: CountLanding) {
        *self.0.lock().unwrap_or_else(|p| p.into_inner()) = Some(landing);
    }
}

impl CallLanding {
    /// The host memory for the counts of `batch` chains, made while the GPU runs (on another
    /// thread): the totals' pages, and a new landing where none was kept and the batch is one
    /// to keep (where the driver refuses page-locked memory, the counts take ordinary memory).
    pub fn prepare(mut self, gpu: &Gpu, batch: usize) -> fused_mh::Result<(Self, CountMemory)> {
        if self.0.is_none() && batch <= KEPT_BATCH_MAX {
            self.0 = gpu.count_landing(batch).ok();
        }
        let memory = match self.0 {
            Some(_) => CountMemory::touched_totals(batch)?,
            None => CountMemory::touched(batch)?,
        };
        Ok((self, memory))
    }

    /// The run's counts into `memory`, through the landing if there is one, which `kept` then
    /// keeps for the next call.
    pub fn counts(
        self,
        stats: &ChainStats,
        memory: CountMemory,
        kept: &KeptLanding,
    ) -> fused_mh::Result<RunCounts> {
        let Some(mut landing) = self.0 else {
            return stats.counts(memory);
        };
        let counts = stats.counts_landed(memory, &mut landing);
        kept.keep(landing);
        counts
    }
}
