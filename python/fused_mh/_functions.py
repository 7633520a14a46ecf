"""The functions of `fused_mh`: one step (random numbers from a seed and a step counter, or the
caller's), and a run of many steps with statistics."""

import sys

import numpy as np

from . import _native
from ._arrays import gpu_run, gpu_step, is_gpu_array, like_input, to_numpy
from ._checks import real, unsigned
from ._checks import step_size as checked_step_size
from ._result import RunResult


class _TargetCache:
    """A target, `target` by name with its parameters (`mu`, `sigma`, and the others by
    name), uploaded to a device once per (device, values): a `Model` keeps one.
    Parameters beyond `mu` and `sigma` may be scalars, one value for every dimension."""

    def __init__(self, mu, sigma, target="gaussian", **params):
        self.mu = np.ascontiguousarray(to_numpy("mu", mu, 1, convert=True))
        self.sigma = np.ascontiguousarray(to_numpy("sigma", sigma, 1, convert=True))
        if self.mu.shape != self.sigma.shape:
            raise ValueError(f"mu has {self.mu.size} elements, sigma {self.sigma.size}")
        self.name = str(target)
        names = _native.target_params(self.name)
        unknown = sorted(set(params) - set(names))
        if unknown:
            raise TypeError(
                f"{', '.join(unknown)}: not a parameter of the target {self.name} "
                f"(its parameters: {', '.join(names)})"
            )
        self.params = {"mu": self.mu, "sigma": self.sigma}
        for name in names[2:]:
            if name not in params:
                raise TypeError(f"the target {self.name} needs {name}")
            value = params[name]
            if isinstance(value, (int, float, np.number)) and not isinstance(value, bool):
                value = np.full(self.mu.shape, value, np.float32)
            else:
                value = to_numpy(name, value, 1, convert=True)
            if value.shape != self.mu.shape:
                raise ValueError(f"{name} has {value.size} elements, mu {self.mu.size}")
            self.params[name] = np.ascontiguousarray(value)
        self.arrays = [self.params[n] for n in names]
        # The library's own checks (finite values, a scale > 0), here where the values are set.
        _native.check_target(self.name, self.arrays)
        self._uploaded = {}

    def __call__(self, device):
        key = id(device)
        if key not in self._uploaded:
            self._uploaded[key] = device.target(self.name, self.arrays)
        return self._uploaded[key]


def _progress_bar(total, progress):
    """A tqdm bar of `total` steps, or None: `progress=None` gives one when tqdm is installed
    and standard error is a terminal, `True` always (tqdm needed), `False` never."""
    if progress is not None and not isinstance(progress, bool):
        raise TypeError(f"progress = {progress!r}: expected True, False or None")
    # No bar wanted, or none asked for where nobody sees it: tqdm is not even imported.
    if progress is False or (progress is None and not sys.stderr.isatty()):
        return None
    try:
        from tqdm import tqdm
    except ImportError:
        if progress:
            raise ImportError("progress=True needs tqdm: pip install tqdm") from None
        return None
    return tqdm(total=total, unit="step", desc="fused-mh run", leave=False)


def initial_states(batch, mu, sigma, spread="normal", seed=0, superchain_size=1, *,
                   target="gaussian", **params):
    """`batch` starting points `[batch, dim]` float32 (NumPy) for chains on the target, as
    `host run --batch --init-dist SPREAD --seed --superchain-size` makes them (the same seed,
    the same states): `spread="normal"` draws them from the target (`mu + sigma z`),
    `"overdispersed"` four times as wide (`mu + 4 sigma z`: superchains that start apart, for
    nested R-hat to see whether they meet), `"zeros"` all zeros. The chains of a superchain
    (`superchain_size` consecutive chains) start from its first chain's state."""
    t = _TargetCache(mu, sigma, target, **params)
    return _native.initial_states(unsigned("batch", batch), t.name, t.arrays, str(spread),
                                  unsigned("seed", seed),
                                  unsigned("superchain_size", superchain_size))


def step(x, mu, sigma, step_size, seed=0, step=0, *, target="gaussian", **params):
    """One Metropolis-Hastings step of every chain, random numbers drawn from `(seed, step)`
    (the kernels' counter scheme: the same numbers on the CPU and the GPU, and in `host run`).

    `x[B, dim]` float32: a NumPy array, a torch tensor or a JAX array (on the CPU: the CPU
    reference; on a GPU: the GPU kernels, reading `x` where it is). Returns `(x_new[B, dim] float32, accepted[B] bool)`
    in the framework and on the device of `x`. On a GPU each call uploads `mu` and `sigma`
    again; a `Model` keeps them uploaded.

    `target` names the log-density: `"gaussian"` is the reference model's (`mu` its means,
    `sigma` its standard deviations); the README's table of targets lists the others. Their
    parameters beyond `mu` (the location) and `sigma` (the scale) come as keywords, an array
    of dim values or one number each."""
    step_size = checked_step_size(step_size)
    seed, step = unsigned("seed", seed), unsigned("step", step)
    t = _TargetCache(mu, sigma, target, **params)
    if is_gpu_array(x):
        return gpu_step(x, t, step_size, seed=seed, step=step)
    out = _native.step(to_numpy("x", x, 2), t.name, t.arrays, step_size, seed, step)
    return tuple(like_input(x, o) for o in out)


def step_with_noise(x, mu, sigma, step_size, noise, uniform, *, target="gaussian", **params):
    """One step with the caller's standard normals `noise[B, dim]` and uniforms `uniform[B]`
    in [0, 1): the reference model's semantics with those numbers. Inputs and outputs as
    `step` (the target too)."""
    step_size = checked_step_size(step_size)
    t = _TargetCache(mu, sigma, target, **params)
    if is_gpu_array(x):
        return gpu_step(x, t, step_size, noise=noise, uniform=uniform)
    out = _native.step_with_noise(
        to_numpy("x", x, 2),
        t.name,
        t.arrays,
        step_size,
        to_numpy("noise", noise, 2),
        to_numpy("uniform", uniform, 1),
    )
    return tuple(like_input(x, o) for o in out)


def run(
    x,
    mu,
    sigma=None,
    step_size=None,
    steps=None,
    seed=0,
    first_step=0,
    thin=0,
    steps_per_launch=100,
    *,
    warmup=0,
    target_accept=None,
    precondition=False,
    scales=None,
    burn_in=0,
    until_rhat=None,
    min_draws=None,
    superchain_size=1,
    progress=None,
    target="gaussian",
    **params,
):
    """`steps` steps of every chain from step counter `first_step`, as `host run` runs them: a
    `RunResult` (a dict whose keys are attributes too, with `summary()`, `to_arviz()`,
    `draws`, `acceptance_rate` and `converged`) with the final states `x`, `accepted_count`,
    `nonfinite_count` and `null_move_count` (uint64 per chain: steps with a non-finite log alpha, and proposals that rounded back to
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
    its device, the counts and the trace as NumPy arrays.

    `warmup` steps first adapt the step size (`host run --warmup`): launches of
    `_native.WARMUP_LAUNCH_STEPS` steps from `step_size`, each launch's acceptance rate moving it
    toward `target_accept` (0.234 by default); then `burn_in` steps are run and dropped
    (`--burn-in`); then the `steps`, at the adapted step size, from step counter
    `first_step + warmup + burn_in`. The result adds `step_size` (the one the steps ran at),
    `next_step` (the counter after them: a later run continues there) and, after a warm-up,
    `warmup` (`steps`, `target_accept`, `initial_step_size`, `last_acceptance`: summary.json's).
    The counts, moments, trace and diagnostics are those of the `steps` alone.

    `precondition=True` also adapts a proposal scale per dimension during the first half of
    the warm-up, to the chains' pooled standard deviation (diagonal preconditioning, `host
    run --precondition`); the steps run with them, and the result's `scales` holds them.
    `scales` (`[dim]`, relative to `step_size`) gives them instead, for the warm-up, burn-in
    and steps alike: a run that continues a preconditioned one passes its result's
    `step_size`, `scales` and `next_step`.

    `until_rhat=1.01` stops the steps early, at the first checkpoint (doubling from
    `min_draws` draws per chain, 100 by default) where every split R-hat is below it, as
    `host run --until-rhat --min-draws`; `steps` is then the cap, the result's `steps` what
    ran, and `stopped_early` says which. `superchain_size` groups consecutive chains into
    superchains for nested R-hat (`--superchain-size`; 1, plain split R-hat, by default).

    `progress`: a tqdm bar of the steps (warm-up and burn-in included), updated between
    launches (at most every 0.1 s); `None` (the default) shows it when tqdm is installed and
    standard error is a terminal, `True` always (tqdm needed), `False` never. Ctrl-C stops
    the run between launches (within a step on the CPU) with `KeyboardInterrupt`.

    `target` and its parameters as for `step`.

    `run(x, model, step_size=..., steps=..., seed=0, first_step=0, thin=0)` with a model with
    data (`LinearRegression`, ...) in `mu`'s place steps its chains `x[B, params]`
    (unconstrained) instead: see `fused_mh._models.step_chains` (final `x`, `accepted_count`,
    `trace` on the parameters' own scale)."""
    from . import _models
    warmup, burn_in = unsigned("warmup", warmup), unsigned("burn_in", burn_in)
    if isinstance(mu, _models.MODELS):
        if sigma is not None or step_size is None or steps is None or params:
            raise TypeError("run(x, model, ...) takes step_size= and steps= (and seed=, "
                            "first_step=, thin=) as keywords, and no target parameters")
        ignored = {"warmup": warmup, "target_accept": target_accept, "burn_in": burn_in,
                   "precondition": precondition, "scales": scales is not None,
                   "until_rhat": until_rhat, "min_draws": min_draws,
                   "superchain_size": superchain_size != 1, "progress": progress}
        given = [name for name, v in ignored.items() if v]
        if given:
            raise TypeError(f"run(x, model, ...) takes no {', '.join(given)}: `sample` "
                            "adapts, burns in and diagnoses a model with data")
        return _models.step_chains(mu, x, step_size, steps, seed, first_step, thin)
    if sigma is None or step_size is None or steps is None:
        raise TypeError("run(x, mu, sigma, step_size, steps, ...) needs all five")
    step_size = checked_step_size(step_size)
    steps, thin = unsigned("steps", steps), unsigned("thin", thin)
    steps_per_launch = unsigned("steps_per_launch", steps_per_launch, bits=32)
    if target_accept is not None:
        target_accept = real("target_accept", target_accept)
    if until_rhat is not None:
        until_rhat = real("until_rhat", until_rhat)
    if target_accept is not None and not warmup:
        raise TypeError("target_accept is the warm-up's: it takes warmup > 0 "
                        "(host run refuses --target-accept without --warmup too)")
    if precondition and not warmup:
        raise TypeError("precondition adapts during the warm-up: it takes warmup > 0 "
                        "(host run refuses --precondition without --warmup too)")
    if precondition and scales is not None:
        raise TypeError("precondition adapts the scales; scales gives them: one or the other")
    t = _TargetCache(mu, sigma, target, **params)
    if scales is not None:
        scales = np.ascontiguousarray(to_numpy("scales", scales, 1, convert=True))
    seed, first_step = unsigned("seed", seed), unsigned("first_step", first_step)
    if until_rhat is not None and thin:
        raise ValueError("thin with until_rhat: a trace of a run that stops early would not "
                         "cover the steps thin promises (host run refuses --thin with "
                         "--until-rhat too)")

    bar = _progress_bar(warmup + burn_in + steps, progress)
    accept = 0.234 if target_accept is None else target_accept
    if warmup and not 0 < accept < 1:
        raise ValueError(f"target_accept = {accept}: must be in (0, 1)")
    stop = {"until_rhat": until_rhat,
            "min_draws": None if min_draws is None else unsigned("min_draws", min_draws),
            "superchain_size": unsigned("superchain_size", superchain_size)}
    # One native call runs the warm-up, the burn-in and the steps on the chains in place, as
    # host run does (the bar counts all three).
    cb = None if bar is None else (lambda done: bar.update(done - bar.n))
    before = {"warmup": warmup, "target_accept": accept, "precondition": precondition,
              "burn_in": burn_in, "scales": scales}
    try:
        if is_gpu_array(x):
            out = gpu_run(x, t, step_size, steps, seed, first_step, thin, steps_per_launch,
                          progress=cb, **before, **stop)
        else:
            out = _native.run(to_numpy("x", x, 2), t.name, t.arrays, step_size, seed, first_step,
                              steps, thin, steps_per_launch, progress=cb, **before, **stop)
    finally:
        if bar is not None:
            bar.close()
    size, last = out.pop("step_size"), out.pop("last_acceptance")
    adapted = out.pop("scales")
    if precondition:
        scales = adapted
    warmed = None
    if warmup:
        warmed = {"steps": warmup, "target_accept": accept,
                  "initial_step_size": float(np.float32(step_size)), "last_acceptance": last}
    if not is_gpu_array(x):
        out["x"] = like_input(x, out["x"])
    out["step_size"] = float(np.float32(size))
    out["next_step"] = first_step + warmup + burn_in + out["steps"]
    out["stopped_early"] = out["steps"] < steps
    if scales is not None:
        out["scales"] = scales
    if warmed is not None:
        out["warmup"] = warmed
    return RunResult(out)
