//! The GPU's normals against f64 at every uniform the Box–Muller transform can see: the bound
//! that the host's GPU-CPU comparison (`fused_mh::testing`) rests on, checked on the real special
//! function unit rather than assumed from its documentation. A `harness = false` test like
//! `gpu.rs`: without a GPU it reports ignored.

use std::process::ExitCode;

use fused_mh::testing::X_NEW_ABS_PER_STEP_SIZE;
use fused_mh_kernel::rng;
use libtest_mimic::Failed;

mod support;

use support::problems::open;
use support::trials::GpuTrials;

/// Every normal within this of f64's: the comparison's premise (its absolute tolerance per
/// step size, 5e-6, is this plus the rounding of `x + s eps`). `math::SERIES_BELOW` says where
/// the radius's part comes from (at most 3.8e-6 for an `lg2` off by 2^-22); the angle's `sin`
/// and `cos` add at most 2^-20.5 times the radius (5.65).
const NORMAL_BOUND: f64 = 4.5e-6;

/// The f64 Box–Muller normals of two words, from the same f32 uniform and angle as the kernels
/// (both exact functions of the bits, the same on GPU and CPU).
fn exact_normals(a: u32, b: u32) -> [f64; 2] {
    let w = f64::from(rng::uniform(a));
    let radius = (-2.0 * (1.0 - w).ln()).sqrt();
    let theta = f64::from(rng::uniform_angle(b));
    [radius * theta.cos(), radius * theta.sin()]
}

/// The GPU's and the CPU's normals at each of the 2^23 uniforms (the low 9 bits of the first
/// word are dropped by the transform), with the angle near 0 (the radius's error all in the
/// first normal) and with angles spread over the circle: every normal within
/// [`NORMAL_BOUND`] of f64's, and the GPU's within the comparison's tolerance of the CPU's.
fn normals_are_within_their_bound() -> Result<(), Failed> {
    let gpu = open()?;
    for angle in ["near 0", "spread"] {
        let words: Vec<[u32; 2]> = (0..1u32 << 23)
            .map(|k| {
                let b = if angle == "near 0" {
                    1 << 31
                } else {
                    k.wrapping_mul(0x9e37_79b9)
                };
                [k << 9, b]
            })
            .collect();
        let on_gpu = gpu.box_muller_many(&words)?;
        let (mut worst_gpu, mut worst_cpu, mut worst_apart) = (0f64, 0f64, 0f64);
        let mut worst_at = 0u32;
        for (&[a, b], got) in words.iter().zip(&on_gpu) {
            let want = exact_normals(a, b);
            let cpu = rng::box_muller(a, b);
            for i in 0..2 {
                let off = (f64::from(got[i]) - want[i]).abs();
                if off > worst_gpu {
                    (worst_gpu, worst_at) = (off, a >> 9);
                }
                worst_cpu = worst_cpu.max((f64::from(cpu[i]) - want[i]).abs());
                worst_apart = worst_apart.max(f64::from((got[i] - cpu[i]).abs()));
            }
        }
        eprintln!(
            "  angles {angle}: GPU within {worst_gpu:e} of f64 (worst at w = {worst_at} * 2^-23), \
             CPU within {worst_cpu:e}, GPU and CPU {worst_apart:e} apart"
        );
        if worst_gpu > NORMAL_BOUND || worst_cpu > NORMAL_BOUND {
            return Err(format!(
                "angles {angle}: normals off f64 by {worst_gpu:e} (GPU) / {worst_cpu:e} (CPU), \
                 bound {NORMAL_BOUND:e}"
            )
            .into());
        }
        if worst_apart > f64::from(X_NEW_ABS_PER_STEP_SIZE) {
            return Err(
                format!("angles {angle}: GPU and CPU normals {worst_apart:e} apart").into(),
            );
        }
    }
    Ok(())
}

fn main() -> ExitCode {
    let mut trials = GpuTrials::new("GPU normal tests");
    trials.add(
        "normals_are_within_their_bound",
        normals_are_within_their_bound,
    );
    trials.run()
}
