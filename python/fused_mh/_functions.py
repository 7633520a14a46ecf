"""The functions of `fused_mh`: one step (random numbers from a seed and a step counter, or the
caller's), and a run of many steps with statistics."""

import numpy as np

from . import _native
from ._arrays import gpu_run, gpu_step, is_gpu_array, like_input, to_numpy


class _TargetCache:
    """`mu` and `sigma` uploaded to a device once per (device, values): a `Model` keeps one."""

    def __init__(self, mu, sigma):
        self.mu = np.ascontiguousarray(to_numpy("mu", mu, 1, convert=True))
        self.sigma = np.ascontiguousarray(to_numpy("sigma", sigma, 1, convert=True))
        if self.mu.shape != self.sigma.shape:
            raise ValueError(f"mu has {self.mu.size} elements, sigma {self.sigma.size}")
        self._uploaded = {}

    def __call__(self, device):
        key = id(device)
        if key not in self._uploaded:
            self._uploaded[key] = device.target(self.mu, self.sigma)
        return self._uploaded[key]


def _target_arrays(mu, sigma):
    t = _TargetCache(mu, sigma)
    return t.mu, t.sigma


def step(x, mu, sigma, step_size, seed=0, step=0):
    """One Metropolis-Hastings step of every chain, random numbers drawn from `(seed, step)`
    (the kernels' counter scheme: the same numbers on the CPU and the GPU, and in `host run`).

    `x[B, dim]` float32: a NumPy array, a torch tensor or a JAX array (on the CPU: the CPU
    reference; on a GPU: the GPU kernels, reading `x` where it is). Returns `(x_new[B, dim] float32, accepted[B] bool)`
    in the framework and on the device of `x`. On a GPU each call uploads `mu` and `sigma`
    again; a `Model` keeps them uploaded."""
    if is_gpu_array(x):
        return gpu_step(x, _TargetCache(mu, sigma), step_size, seed=seed, step=step)
    mu, sigma = _target_arrays(mu, sigma)
    out = _native.step(to_numpy("x", x, 2), mu, sigma, float(step_size), int(seed), int(step))
    return tuple(like_input(x, o) for o in out)


def step_with_noise(x, mu, sigma, step_size, noise, uniform):
    """One step with the caller's standard normals `noise[B, dim]` and uniforms `uniform[B]`
    in [0, 1): the reference model's semantics with those numbers. Inputs and outputs as
    `step`."""
    if is_gpu_array(x):
        target = _TargetCache(mu, sigma)
        return gpu_step(x, target, step_size, noise=noise, uniform=uniform)
    mu, sigma = _target_arrays(mu, sigma)
    out = _native.step_with_noise(
        to_numpy("x", x, 2),
        mu,
        sigma,
        float(step_size),
        to_numpy("noise", noise, 2),
        to_numpy("uniform", uniform, 1),
    )
    return tuple(like_input(x, o) for o in out)


def run(x, mu, sigma, step_size, steps, seed=0, first_step=0, thin=0, steps_per_launch=100):
    """`steps` steps of every chain from step counter `first_step`, as `host run` runs them: a
    dict with the final states `x`, `accepted_count`, `nonfinite_count` and `null_move_count`
    (uint64 per chain: steps with a non-finite log alpha, and proposals that rounded back to
    the state), each chain's `mean` and `var` over the steps, `trace[steps // thin, B, dim]`
    when `thin > 0`, `diagnostics` and `steps`.

    `diagnostics` holds what `host run` records in summary.json's `diagnostics`: split R-hat
    (`nested_rhat`) and the `ess` per dimension at the run's last checkpoint (`draws` per
    chain), `max_nested_rhat`, `min_ess`, `acceptance_rate`, the starting points' spread
    against sigma (`start_spread`) and the dimensions where it is too small for R-hat to see
    anything (`blind_dimensions`), and `converged` (every R-hat below `rhat_threshold`, 1.01,
    and no blind dimension). It is None for one chain or fewer than 4 steps.

    `steps_per_launch` is `host run`'s `--steps-per-launch`, on the CPU too: the diagnostics'
    checkpoints end launches, so both report the same ones.

    On NumPy arrays (or CPU tensors) this is the CPU reference, `host run --cpu`. On a CUDA
    tensor or a JAX GPU array it is the fused kernel, `steps_per_launch` steps per launch, on a
    device copy of `x` (`host run`): `x`, `mean` and `var` come back in the input's framework on
    its device, the counts and the trace as NumPy arrays."""
    if is_gpu_array(x):
        target = _TargetCache(mu, sigma)
        return gpu_run(x, target, step_size, steps, seed, first_step, thin, steps_per_launch)
    mu, sigma = _target_arrays(mu, sigma)
    out = _native.run(
        to_numpy("x", x, 2),
        mu,
        sigma,
        float(step_size),
        int(seed),
        int(first_step),
        int(steps),
        int(thin),
        int(steps_per_launch),
    )
    out["x"] = like_input(x, out["x"])
    return out
