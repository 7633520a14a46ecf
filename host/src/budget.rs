//! Sizes checked against what the machine has, before anything is allocated.
//!
//! A job lists every large buffer it will hold at once — in host memory, on the GPU, and
//! the files it will write — with the sizes that the validated shapes give, and checks each
//! list against what is free: host memory (the smaller of the system's available memory and
//! the control group's limit), GPU memory ([`fused_mh::Gpu::free_memory`]) and the space on
//! the output's file system. A run that cannot fit fails here, naming the sizes, in
//! milliseconds, rather than aborting in an allocation or filling the disk after an hour.

use std::fmt;
use std::path::Path;

use anyhow::{Result, bail};

/// A list of buffers of one kind of memory.
#[derive(Debug, Default)]
pub struct Budget {
    items: Vec<(&'static str, u128)>,
}

impl Budget {
    /// Adds a buffer of `bytes`.
    pub fn add(&mut self, what: &'static str, bytes: u128) -> &mut Self {
        self.items.push((what, bytes));
        self
    }

    /// The bytes of the buffer named `what`, if the list has it.
    pub fn bytes_of(&self, what: &str) -> Option<u128> {
        self.items.iter().find(|(w, _)| *w == what).map(|&(_, b)| b)
    }

    /// The total of all buffers.
    pub fn total(&self) -> u128 {
        self.items.iter().map(|&(_, b)| b).sum()
    }

    /// Fails unless the total fits in `free` bytes of `memory` ("host memory", ...).
    pub fn check(&self, memory: &str, free: u64) -> Result<()> {
        let total = self.total();
        if total > u128::from(free) {
            bail!(
                "needs {} of {memory} ({self}), but only {} is free",
                Bytes(total),
                Bytes(u128::from(free))
            );
        }
        Ok(())
    }

    /// [`Self::check`] against this machine's free host memory.
    pub fn check_host(&self) -> Result<()> {
        self.check("host memory", free_host_memory())
    }

    /// [`Self::check`] against the free space of the file system that holds `dir`.
    pub fn check_disk(&self, dir: &Path) -> Result<()> {
        let stat = rustix::fs::statvfs(dir)
            .map_err(|e| anyhow::anyhow!("cannot read the free space of {}: {e}", dir.display()))?;
        let free = stat.f_bavail.saturating_mul(stat.f_frsize);
        self.check(&format!("disk space in {}", dir.display()), free)
    }
}

impl fmt::Display for Budget {
    /// The items, largest first: `"states 4.0 GB, means 8.0 GB"`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut items: Vec<_> = self.items.iter().filter(|(_, b)| *b > 0).collect();
        items.sort_by_key(|&&(_, b)| std::cmp::Reverse(b));
        for (i, (what, bytes)) in items.iter().enumerate() {
            let sep = if i == 0 { "" } else { ", " };
            write!(f, "{sep}{what} {}", Bytes(*bytes))?;
        }
        Ok(())
    }
}

/// Host memory a model's sample of `dim` parameters holds ([`fused_mh::model_run`]): its
/// kept draws in the run's order (`[kept, chains, dim]`), their copy in ArviZ's order
/// (`[chains, kept, dim]`, which `host sample` writes and the Python package returns), and
/// the chains' states, the proposals and the final states.
pub fn model_sample(run: &fused_mh::model_run::ModelRun, dim: usize) -> Budget {
    let (chains, kept, dim) = (run.chains as u128, run.kept() as u128, dim as u128);
    let mut budget = Budget::default();
    budget.add("the draws", 4 * chains * kept * dim);
    budget.add("the draws by chain", 4 * chains * kept * dim);
    budget.add("the chains' states", 3 * 4 * chains * dim);
    budget
}

/// Disk space a model's sample of `dim` parameters writes (`host sample`): `draws.npy`
/// (`[chains, kept, dim]` float32), `states.npy` (`[chains, dim]`), each with its header
/// ([`NPY_HEADER_BYTES`]), and `summary.json`, whose entry per parameter (its name, seven
/// numbers) takes a few hundred bytes, beside a record of the run and its inputs.
pub fn model_sample_files(run: &fused_mh::model_run::ModelRun, dim: usize) -> Budget {
    let (chains, kept, dim) = (run.chains as u128, run.kept() as u128, dim as u128);
    let mut budget = Budget::default();
    budget.add("draws.npy", NPY_HEADER_BYTES + 4 * chains * kept * dim);
    budget.add("states.npy", NPY_HEADER_BYTES + 4 * chains * dim);
    budget.add(
        "summary.json",
        SUMMARY_FIXED_BYTES + SUMMARY_BYTES_PER_PARAM * dim,
    );
    budget
}

/// Bytes a `.npy` header of up to three dimensions takes at most: the magic string, the
/// header's length and its dictionary (dtype, order, shape: under 150 characters with three
/// 20-digit sizes), padded to a multiple of 64 bytes.
pub const NPY_HEADER_BYTES: u128 = 256;
/// `summary.json` without its parameters: the run's options, priors and input records.
const SUMMARY_FIXED_BYTES: u128 = 1 << 20;
/// `summary.json` per parameter: a name and seven numbers, pretty-printed (about 300 bytes).
const SUMMARY_BYTES_PER_PARAM: u128 = 1024;

/// A byte count for people: `512 B`, `3.2 MB`, `16.0 GB`, `4.0 EB` (powers of 1000).
pub struct Bytes(pub u128);

impl fmt::Display for Bytes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const UNITS: [&str; 7] = ["kB", "MB", "GB", "TB", "PB", "EB", "ZB"];
        if self.0 < 1000 {
            return write!(f, "{} B", self.0);
        }
        let mut value = self.0 as f64 / 1000.0;
        let mut unit = 0;
        while value >= 1000.0 && unit + 1 < UNITS.len() {
            value /= 1000.0;
            unit += 1;
        }
        write!(f, "{value:.1} {}", UNITS[unit])
    }
}

/// Host memory free for this process: the system's available memory, or what the control
/// group still allows if that is less (a container's limit). Where the system cannot say,
/// no limit (the allocations themselves still fail cleanly: [`fused_mh::testing::host_memory`]).
pub fn free_host_memory() -> u64 {
    let Ok(mut system) = sysinfo::System::new() else {
        return u64::MAX;
    };
    system.refresh_memory();
    let available = system.available_memory();
    match system.cgroup_limits() {
        Some(limits) => available.min(limits.free_memory),
        None => available,
    }
}

/// Makes every allocation of 128 KiB or more a mapping of its own, returned to the system
/// when it is freed, so that the memory a job holds is the memory its lists count. By
/// default glibc's allocator raises that threshold each time such a buffer is freed, and the
/// buffers of later phases then come from its heap, which keeps what one phase freed and
/// cannot hand it to a larger buffer of the next: measured on the H200, a GPU run with a
/// burn-in or a warm-up peaked 6-9 % above its plan, and 1.4-5 % below it with the threshold
/// fixed here (bench/NOTES.md, issue 22, fifteenth part). Elsewhere nothing: other allocators
/// keep their own.
pub fn return_freed_buffers_to_the_system() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: `mallopt` sets one parameter of the allocator, which takes its lock to do so;
    // it touches no memory of the caller's.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 128 << 10);
    }
}

/// The peak resident memory of this process so far, in bytes (`VmHWM` in
/// `/proc/self/status`; None where the system does not say).
pub fn peak_resident_memory() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: u64 = line
        .trim_start_matches("VmHWM:")
        .trim()
        .strip_suffix("kB")?
        .trim()
        .parse()
        .ok()?;
    kib.checked_mul(1024)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn totals_and_messages() {
        let mut b = Budget::default();
        b.add("states", 4_000_000_000)
            .add("flags", 0)
            .add("means", 8_000_000_000);
        assert_eq!(b.total(), 12_000_000_000);
        assert!(b.check("host memory", 12_000_000_000).is_ok());
        let e = format!("{:#}", b.check("host memory", 1_500_000).unwrap_err());
        assert_eq!(
            e,
            "needs 12.0 GB of host memory (means 8.0 GB, states 4.0 GB), but only 1.5 MB is free"
        );
        assert_eq!(Bytes(999).to_string(), "999 B");
        assert_eq!(Bytes(4 * 10u128.pow(18)).to_string(), "4.0 EB");
    }

    #[test]
    fn this_machine_has_some_memory_free() {
        assert!(free_host_memory() > 1 << 20);
        // A process holds at least its own code and stack.
        assert!(peak_resident_memory().is_some_and(|b| b > 1 << 20));
    }
}
