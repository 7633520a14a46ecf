//! Timing on the GPU: device events around each repetition after warm-up, the median of many,
//! and the copy bandwidth that every figure is set against.

use anyhow::Result;
use cudarc::driver::sys::CUevent_flags;
use cudarc::driver::{CudaEvent, CudaSlice};
use fused_mh::Gpu;
use serde::{Deserialize, Serialize};

/// Copy-bandwidth buffer: 1 GiB, far beyond the 50 MB L2.
const COPY_BYTES: usize = 1 << 30;

/// Minimum, median and maximum of a sample of times, in microseconds.
#[derive(Clone, Copy, Debug, Serialize, Deserialize)]
pub(crate) struct Times {
    pub(crate) min_us: f64,
    pub(crate) median_us: f64,
    pub(crate) max_us: f64,
}

impl Times {
    pub(crate) fn of(mut us: Vec<f64>) -> Self {
        us.sort_by(f64::total_cmp);
        Self {
            min_us: us[0],
            median_us: us[us.len() / 2],
            max_us: us[us.len() - 1],
        }
    }
}

/// A timing event (CUDA events are created without timing unless asked).
fn timing_event(gpu: &Gpu) -> Result<CudaEvent> {
    Ok(gpu
        .context()
        .new_event(Some(CUevent_flags::CU_EVENT_DEFAULT))?)
}

/// Times `work` with a pair of device events around each repetition, after `untimed` untimed
/// runs; one synchronization at the end, none inside the loop.
pub(crate) fn time_each(
    gpu: &Gpu,
    untimed: usize,
    reps: usize,
    mut work: impl FnMut() -> Result<()>,
) -> Result<Times> {
    for _ in 0..untimed {
        work()?;
    }
    let events: Vec<(CudaEvent, CudaEvent)> = (0..reps)
        .map(|_| Ok((timing_event(gpu)?, timing_event(gpu)?)))
        .collect::<Result<_>>()?;
    for (start, end) in &events {
        start.record(gpu.stream())?;
        work()?;
        end.record(gpu.stream())?;
    }
    gpu.synchronize()?;
    let us = events
        .iter()
        .map(|(s, e)| Ok(f64::from(s.elapsed_ms(e)?) * 1e3))
        .collect::<Result<Vec<_>>>()?;
    Ok(Times::of(us))
}

/// Device-to-device copy bandwidth, bytes read plus bytes written, in GB/s (median).
pub(crate) fn copy_bandwidth(gpu: &Gpu, reps: usize) -> Result<f64> {
    let n = COPY_BYTES / size_of::<f32>();
    let src: CudaSlice<f32> = gpu.stream().alloc_zeros(n)?;
    let mut dst: CudaSlice<f32> = gpu.stream().alloc_zeros(n)?;
    let times = time_each(gpu, 3, reps, || {
        Ok(gpu.stream().memcpy_dtod(&src, &mut dst)?)
    })?;
    Ok(2.0 * COPY_BYTES as f64 / (times.median_us * 1e-6) / 1e9)
}
