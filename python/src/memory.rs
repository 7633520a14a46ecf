//! The host memory a call will hold, checked against what the machine has free before the
//! call allocates any of it.
//!
//! The library's allocations are fallible (`MemoryError` when the allocator says no), but
//! under Linux's default overcommit the allocator says yes to any size below the machine's
//! memory and swap, free or not, and the process is killed, not refused, when it touches
//! pages the machine cannot give. So every call whose buffers grow with its arguments lists
//! them first, as `host run` does ([`host::budget`]), with the sizes the library's own
//! accounts give (`cpu::run_chains_bytes`, `RunPlan::host_bytes`, ...), and a list that does
//! not fit in the free memory is a `MemoryError` naming the sizes, before anything is
//! allocated:
//! `run: needs 21.3 GB of host memory (the trace 21.3 GB, ...), but only 20.1 GB is free`.

use host::budget::Budget;
use pyo3::exceptions::PyMemoryError;
use pyo3::prelude::*;

use crate::errors::to_py;

/// A list smaller than this is not checked: reading the free memory (`/proc/meminfo` and the
/// control group's files, tens of microseconds) would cost more than such a call, and a call
/// this small is not what a machine's memory turns on.
const CHECKED_FROM_BYTES: u128 = 64 << 20;

/// Fails with a `MemoryError` naming `call` and the sizes unless `budget` fits in the free
/// host memory.
pub fn check(call: &str, budget: &Budget) -> PyResult<()> {
    if budget.total() < CHECKED_FROM_BYTES {
        return Ok(());
    }
    budget
        .check_host()
        .map_err(|e| PyMemoryError::new_err(format!("{call}: {e:#}")))
}

/// `f32` values in bytes, for the lists.
pub fn floats(count: usize) -> u128 {
    4 * count as u128
}

/// [`check`] of a list of one buffer: `what`, of `bytes`.
pub fn check_buffer(call: &str, what: &'static str, bytes: u128) -> PyResult<()> {
    let mut budget = Budget::default();
    budget.add(what, bytes);
    check(call, &budget)
}

/// An empty vector with room for `len` floats (`what`: the buffer), allocated fallibly: the
/// library's out-of-memory error naming it (a `MemoryError` in Python) where the host has no
/// room, never an abort.
pub fn reserved(what: &'static str, len: usize) -> fused_mh::Result<Vec<f32>> {
    let mut buffer = Vec::new();
    buffer
        .try_reserve_exact(len)
        .map_err(|_| fused_mh::Error::HostOutOfMemory {
            what,
            bytes: len.saturating_mul(4),
        })?;
    Ok(buffer)
}

/// A copy of `values` (`what`: the argument), allocated fallibly ([`reserved`]).
pub fn copied(what: &'static str, values: &[f32]) -> PyResult<Vec<f32>> {
    let mut copy = reserved(what, values.len()).map_err(to_py)?;
    copy.extend_from_slice(values);
    Ok(copy)
}

/// Checks the memory of a `Model`'s target of `dim` elements before the Python side allocates
/// it: its parameters as NumPy arrays, and the checked copy the library builds of them
/// ([`crate::targets::build_budget`]).
#[pyfunction]
pub fn check_target_memory(name: &str, dim: usize) -> PyResult<()> {
    let mut budget = crate::targets::build_budget(name, dim)?;
    let params = crate::targets::target_params(name)?.len();
    budget.add("the parameters' arrays", floats(dim) * params as u128);
    check("the target", &budget)
}
