//! What a job needs before it starts, computed from its plan: host memory, GPU memory, disk.

use fused_mh::{RunPlan, Shape, cpu};

use crate::budget::Budget;

/// Host memory the job holds at its peak: its inputs, and the largest of its phases, each
/// from the library's own account of what that phase allocates (`cpu::run_chains_bytes`,
/// `RunPlan::host_bytes`, `cpu::step_output_bytes`). The phases run one after another: a
/// warm-up (`warmup`) keeps its own copy of the states beside the inputs while it runs, and a
/// burn-in (`burn_in`) on the CPU hands its final states to the run, which holds them
/// throughout (on the GPU they stay on the device, and its counts go before the run).
pub fn host_budget(
    shape: Shape,
    caller_noise: bool,
    cpu: bool,
    plan: &RunPlan,
    (warmup, burn_in): (bool, bool),
) -> Budget {
    let (len, batch, dim) = sizes(shape);
    let mut b = Budget::default();
    b.add("initial states", 4 * len).add("target", 12 * dim);
    if caller_noise {
        b.add("noise and uniforms", 4 * len + 4 * batch);
        b.add("the step's output", cpu::step_output_bytes(shape));
    } else if cpu {
        b.add(
            "the CPU run (states, a step's output, moments, counts)",
            cpu::run_chains_bytes(shape),
        );
        if warmup || burn_in {
            b.add("the warm-up's or burn-in's states", 4 * len);
        }
    } else {
        b.add(
            "the GPU run's host side (counts, trace copies, results)",
            plan.host_bytes(shape),
        );
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
            .add("the target's parameters (mu.npy, ...)", 16 * dim);
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
