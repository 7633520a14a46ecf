//! What a job needs before it starts, computed from its plan: host memory, GPU memory, disk.

use fused_mh::{RunPlan, Shape};

use crate::budget::Budget;

/// Host memory the job holds at its peak.
pub fn host_budget(shape: Shape, caller_noise: bool, cpu: bool, plan: &RunPlan) -> Budget {
    let (len, batch, dim) = sizes(shape);
    let mut b = Budget::default();
    b.add("initial states", 4 * len).add("target", 12 * dim);
    if caller_noise {
        b.add("noise and uniforms", 4 * len + 4 * batch);
        b.add("the step's output", 4 * len + 16 * batch);
    } else if cpu {
        // The reference's working state and each step's output, its moments, its counts and
        // decisions.
        // The moments: two samples with diagnostics (the split halves).
        let samples = if plan.diagnostics.is_some() { 2 } else { 1 };
        b.add("states", 8 * len)
            .add("running moments", samples * 16 * len);
        b.add("per-chain counts", 56 * batch);
    } else {
        // The moments' two samples are copied back and merged on the host.
        let samples = if plan.diagnostics.is_some() { 2 } else { 1 };
        b.add("final states", 4 * len)
            .add("means and variances", samples * 16 * len);
        b.add("accepted, non-finite and null-move counts", 24 * batch);
        b.add("trace copy", 4 * len * plan.trace_slots(shape) as u128);
    }
    b
}

/// GPU memory the job allocates.
pub fn device_budget(shape: Shape, caller_noise: bool, plan: &RunPlan) -> Budget {
    let (len, batch, dim) = sizes(shape);
    let mut b = Budget::default();
    if caller_noise {
        b.add("chains", 8 * len + batch).add("target", 8 * dim);
        b.add("noise and uniforms", 4 * len + 4 * batch);
    } else {
        b.add(
            "chains, statistics and trace buffer",
            u128::from(plan.device_bytes(shape, true)),
        );
    }
    b
}

/// Disk space the output files take.
pub fn disk_budget(shape: Shape, caller_noise: bool, plan: &RunPlan) -> Budget {
    let (len, batch, dim) = sizes(shape);
    let mut b = Budget::default();
    b.add("headers, summary and chart", 1 << 20);
    if caller_noise {
        b.add("x_new.npy", 4 * len).add("accepted.npy", batch);
    } else {
        b.add("x.npy", 4 * len).add("accepted_count.npy", 8 * batch);
        b.add("nonfinite_count.npy", 8 * batch);
        b.add("null_move_count.npy", 8 * batch);
        b.add("mean.npy and var.npy", 16 * len)
            .add("mu.npy and sigma.npy", 8 * dim);
        b.add("trace.npy", 4 * len * u128::from(plan.saves()));
    }
    b
}

fn sizes(shape: Shape) -> (u128, u128, u128) {
    (
        shape.len() as u128,
        shape.batch() as u128,
        shape.dim() as u128,
    )
}
