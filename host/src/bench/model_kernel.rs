//! The model kernel against its floor: a logistic regression of posteriordb's wells size (3020
//! rows, an intercept and one covariate) over 16384 chains, sampling steps only.
//!
//! The floor is the special function unit's: a logistic row's term takes four SFU operations
//! (`ex2`, `rcp`, `ex2`, `lg2`, `kernel/src/model/logreg.rs`) and an SM's SFUs do 16 a clock,
//! while the row's two coefficients and its arithmetic are about a dozen FP32 operations, of
//! which an SM does 128 a clock. So a step of `C` chains over `N` rows takes at least
//! `4 N C / (16 SMs clock)` seconds.

use std::time::Instant;

use anyhow::Result;
use cudarc::driver::sys::CUdevice_attribute::{
    CU_DEVICE_ATTRIBUTE_CLOCK_RATE, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT,
};
use fused_mh::Gpu;
use fused_mh::kernel::model::{CoefficientPrior, LogisticRegression};
use fused_mh::model_run::{ModelRun, Preconditioning};
use serde::Serialize;

use super::Times;

/// Data rows, chains and sampling steps of the case.
const ROWS: usize = 3020;
const CHAINS: usize = 16384;
const STEPS: u32 = 1000;
/// SFU operations per logistic row, and per SM and clock.
const SFU_OPS_PER_ROW: f64 = 4.0;
const SFU_OPS_PER_SM_CLOCK: f64 = 16.0;

/// The model kernel's row.
#[derive(Debug, Serialize)]
pub struct ModelKernelRow {
    pub rows: usize,
    pub chains: usize,
    pub steps: u32,
    /// One `Gpu::sample_model` call of `steps` sampling steps (its launches, the model's upload
    /// and the draws' download), wall clock.
    pub call: Times,
    /// The SFU floor of the same steps, in microseconds.
    pub floor_us: f64,
    /// `floor_us` over the median call.
    pub fraction_of_floor: f64,
}

/// Times `Gpu::sample_model` on the case (after one untimed call; median of `reps`, at least 3).
pub fn model_kernel(gpu: &Gpu, reps: usize) -> Result<ModelKernelRow> {
    // Wells' shape: distances of 0 to 3.4 (hundreds of metres), outcomes from a fitted
    // regression (0.6 - 0.6 distance), drawn by a fixed rule so that every run has the same.
    let x: Vec<f32> = (0..ROWS)
        .flat_map(|n| [1.0, (n * 7919 % ROWS) as f32 / ROWS as f32 * 3.4])
        .collect();
    let y: Vec<f32> = (0..ROWS)
        .map(|n| {
            let p = 1.0 / (1.0 + (-(0.6 - 0.6 * x[2 * n + 1])).exp());
            f32::from(((n * 2654435761) % 1000) as f32 / 1000.0 < p)
        })
        .collect();
    let model = LogisticRegression::new(&x, &y, 2, &[CoefficientPrior::Flat; 2])
        .map_err(|e| anyhow::anyhow!("the benchmark's regression: {e:?}"))?;
    let run = ModelRun {
        chains: CHAINS,
        warmup: 0,
        steps: STEPS,
        thin: STEPS,
        seed: 1,
        target_acceptance: 0.3,
        preconditioning: Preconditioning::None,
        superchain_size: 16,
    };
    gpu.sample_model(&model, &run, None)?;
    let mut us = Vec::new();
    for _ in 0..reps.max(3) {
        let start = Instant::now();
        gpu.sample_model(&model, &run, None)?;
        us.push(start.elapsed().as_secs_f64() * 1e6);
    }
    let call = Times::of(us);
    let attribute = |a| gpu.context().attribute(a).map(f64::from);
    // The clock rate attribute is in kHz.
    let clock_hz = attribute(CU_DEVICE_ATTRIBUTE_CLOCK_RATE)? * 1e3;
    let sms = attribute(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)?;
    let sfu_per_s = sms * SFU_OPS_PER_SM_CLOCK * clock_hz;
    let ops = SFU_OPS_PER_ROW * (ROWS * CHAINS) as f64 * f64::from(STEPS);
    let floor_us = ops / sfu_per_s * 1e6;
    Ok(ModelKernelRow {
        rows: ROWS,
        chains: CHAINS,
        steps: STEPS,
        fraction_of_floor: floor_us / call.median_us,
        call,
        floor_us,
    })
}
