//! The worker threads of every parallel loop on the host: one rayon pool of the library's own,
//! built on first use, and built fallibly.
//!
//! Rayon's global pool starts its threads on first use and panics if it cannot (a process near
//! its address-space limit cannot map the threads' stacks); after that failure every later
//! use panics too. The pool here is built with [`rayon::ThreadPoolBuilder::build`], which
//! returns the failure: it becomes [`Error::NoThreads`] and nothing is kept, so a later call
//! (with memory freed) builds the pool again. Its size is rayon's default: `RAYON_NUM_THREADS`,
//! or one thread per core.

use std::sync::Mutex;

use rayon::ThreadPool;

use crate::error::{Error, Result};

/// The pool, once built (leaked: it lives as long as the process, like rayon's global pool).
static POOL: Mutex<Option<&'static ThreadPool>> = Mutex::new(None);

/// The pool, built now if it is not yet.
pub fn pool() -> Result<&'static ThreadPool> {
    let mut pool = POOL.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    if let Some(pool) = *pool {
        return Ok(pool);
    }
    let built = rayon::ThreadPoolBuilder::new()
        .thread_name(|i| format!("fused-mh-{i}"))
        .build()
        .map_err(|e| Error::NoThreads(e.to_string()))?;
    let built: &'static ThreadPool = Box::leak(Box::new(built));
    *pool = Some(built);
    Ok(built)
}

/// Runs `work` on the pool: the parallel iterators inside it use the pool's threads.
pub fn install<R: Send>(work: impl FnOnce() -> R + Send) -> Result<R> {
    Ok(pool()?.install(work))
}

/// How many threads the pool has (0 where it cannot be built): for the benchmark's report.
#[cfg(feature = "testing")]
pub fn count() -> usize {
    pool().map_or(0, ThreadPool::current_num_threads)
}
