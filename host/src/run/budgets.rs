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

#[cfg(test)]
mod tests {
    use fused_mh::DiagnosticsPlan;
    use fused_mh::diagnostics::SplitSchedule;
    use fused_mh::limits::COUNT_FOLD_STEPS;

    use super::*;

    /// A GPU run's host budget at (100000, 10), 1e6 elements, against sizes counted by hand
    /// from what `host run` holds: the initial states (4 MB) and the target (120 B) always.
    #[test]
    fn gpu_host_budget_is_the_results_peak() {
        let shape = Shape::new(100_000, 10).unwrap();
        let budget = |plan: &RunPlan| host_budget(shape, false, false, plan, (false, false));
        let inputs = 4_000_000 + 120;
        // Plain: the merged moments (16 MB) beside the final states (4 MB), then the three
        // 64-bit counts (2.4 MB), each read through a 32-bit copy (0.4 MB).
        let plain = RunPlan::new(2, 2);
        assert_eq!(
            budget(&plain).total(),
            inputs + 16_000_000 + 4_000_000 + 2_800_000
        );
        // Ending between two boundaries of the split schedule (after 4, 8, 16, 32): both
        // moment samples at once (32 MB), the larger.
        let schedule = SplitSchedule::new(4).unwrap();
        let split = RunPlan {
            diagnostics: Some(DiagnosticsPlan {
                superchain_size: 1,
                until_rhat: Some(1.01),
                min_draws: 4,
                schedule,
            }),
            ..RunPlan::new(40, 4)
        };
        assert_eq!(budget(&split).total(), inputs + 32_000_000);
        // Past the 32-bit counts' range the totals (2.4 MB) are written, and held throughout.
        let long = RunPlan::new(COUNT_FOLD_STEPS + 1, 2);
        assert_eq!(budget(&long).total(), budget(&plain).total() + 2_400_000);
    }
}
