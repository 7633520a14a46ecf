//! Host memory for a run's counts, made ready before the counts are: the pages of the 64-bit
//! totals written in advance ([`CountMemory`]), and the page-locked memory the device's
//! 32-bit counts are downloaded into, kept across runs ([`CountLanding`]).
//!
//! **Page-locked memory.** The GPU's copy engine reads and writes host memory by physical
//! address, so a copy to or from ordinary (pageable) memory, which the system may move, goes
//! through a page-locked buffer of the driver's own: the engine fills it, then the CPU copies
//! it out, one piece after the other, and the call returns when the CPU is done. Into memory
//! that is page-locked already (`cuMemHostAlloc`) the engine writes directly: the copy is queued
//! like a kernel, several are queued together, and the CPU reads the values where they land,
//! but only after waiting for the stream: the call returns before the copy has run, and a read
//! that does not wait sees whatever the memory held before (cudarc's own wait needs its event
//! tracking, which this library turns off; bench/NOTES.md, issue 22, thirty-fifth part).
//! Locking pages costs more than the copies of one run save (milliseconds for the 12 MB of a
//! million chains' counts; bench/NOTES.md, issue 22, thirty-first part), so a caller that runs
//! many times keeps one landing and passes it to each run's [`ChainStats::counts_landed`].

use cudarc::driver::PinnedHostSlice;

use super::Gpu;
#[cfg(doc)]
use crate::ChainStats;
use crate::error::{Error, Result};
use crate::host_memory;

/// Host memory for one batch's counts ([`ChainStats::counts`]), every page written when it is
/// made. The first write to a fresh 4 KB page is a page fault; at a million chains the three
/// counts' pages cost more than their download (milliseconds), so a run that makes this memory
/// on another thread while the GPU works takes that time off its end.
pub struct CountMemory {
    pub(super) totals: [Vec<u64>; 3],
    /// Where the device's counts land in turn on their way to the totals: empty where they
    /// land in a [`CountLanding`].
    pub(super) recent: Vec<u32>,
}

impl CountMemory {
    /// Memory for the counts of `batch` chains, its pages written (where the host has no
    /// room, the library's out-of-memory error naming it).
    pub fn touched(batch: usize) -> Result<Self> {
        Ok(Self {
            recent: host_memory::filled("counts", batch, 0u32)?,
            ..Self::touched_totals(batch)?
        })
    }

    /// [`Self::touched`] for a run whose counts land in a [`CountLanding`]: the totals alone.
    pub fn touched_totals(batch: usize) -> Result<Self> {
        let totals = || host_memory::filled("counts", batch, 0u64);
        Ok(Self {
            totals: [totals()?, totals()?, totals()?],
            recent: Vec::new(),
        })
    }
}

/// Page-locked host memory for the device's 32-bit counts of [`Self::batch`] chains, one
/// buffer a count, for [`ChainStats::counts_landed`] of runs of that batch: kept by a caller
/// across its runs (the module's doc says why). A download fills a buffer whole.
pub struct CountLanding {
    pub(super) counts: [PinnedHostSlice<u32>; 3],
}

impl CountLanding {
    /// The chains whose counts it takes.
    pub fn batch(&self) -> usize {
        self.counts[0].len()
    }

    /// Fills every buffer with `value`. A debugging aid, as `DeviceChains::poison_outputs`:
    /// a count read before its download has landed shows it.
    #[cfg(feature = "testing")]
    pub fn poison(&mut self, value: u32) -> Result<()> {
        for buffer in &mut self.counts {
            buffer.as_mut_slice()?.fill(value);
        }
        Ok(())
    }
}

impl Gpu {
    /// Page-locked memory for the counts of `batch` chains (cached memory, read by the CPU);
    /// an error where the driver refuses it (the system's limit on locked pages, or no memory
    /// left), and then [`CountMemory::touched`] serves instead.
    pub fn count_landing(&self, batch: usize) -> Result<CountLanding> {
        let bytes = batch.saturating_mul(size_of::<u32>());
        if batch == 0 || bytes > isize::MAX as usize / 3 {
            return Err(Error::HostOutOfMemory {
                what: "page-locked counts",
                bytes,
            });
        }
        // Flags 0: cached memory, for the CPU's reads (cudarc's default, write-combined, is
        // for memory the CPU only writes).
        // SAFETY: the memory is read only after a download has written the counts read
        // (`ChainStats::counts_landed`).
        let pinned = || unsafe { self.context().alloc_pinned_with_flags::<u32>(batch, 0) };
        let refused = |_| Error::HostOutOfMemory {
            what: "page-locked counts",
            bytes,
        };
        Ok(CountLanding {
            counts: [
                pinned().map_err(refused)?,
                pinned().map_err(refused)?,
                pinned().map_err(refused)?,
            ],
        })
    }
}
