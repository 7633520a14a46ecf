"""`Model`: the reference PyTorch module's interface over the fused kernels."""

import numpy as np

from . import _native
from ._arrays import (DEVICES, cuda_step, is_cuda_tensor, is_jax_gpu, jax_step,
                      like_input_on_device)
from ._checks import step_size as _step_size
from ._checks import unsigned as _unsigned
from ._functions import _TargetCache, step


def _read_only(a):
    """A read-only view of `a`: item assignment raises instead of being silently lost."""
    view = a.view()
    view.flags.writeable = False
    return view


class Model:
    """A random-walk Metropolis-Hastings step for `B` independent chains of a diagonal Gaussian
    target, as the reference module: `mu[dim]` (zeros) and `sigma[dim]` (ones) are settable,
    `model(x)` (or `model.forward(x)`) returns `(x_new[B, dim] float32, accepted[B] bool)` on
    the device and in the framework of `x` (NumPy, PyTorch or JAX). The random numbers are
    drawn in the kernel from `seed` and a step counter that advances by one per call
    (`model.step`, settable), so a model's calls are one reproducible stream: the same as
    `host run` with the same seed.

    `step_size` defaults to 0.1, the reference module's (`host run`'s default is
    `2.38 / sqrt(dim) * min(sigma)` instead). Every value is checked when it is set: `dim >= 1`,
    `step_size` finite and > 0, `seed` and `step` integers in [0, 2^64), `mu` finite and
    `sigma` finite and > 0 with `dim` elements each.

    As a module: `mu` and `sigma` read back as read-only arrays (assign the whole array to
    change them), `state_dict()` and `load_state_dict()` save and restore every setting and
    the step counter, `buffers()`/`named_buffers()` list `mu` and `sigma`, and `to(device)`
    uploads the target to a GPU ahead of the first call (the kernels run where `x` lives).

    `Model(model)` with a model with data (`LinearRegression`, `LogisticRegression`,
    `HierarchicalNormal`, `DenseGaussian`) steps that model's chains instead: `x[B, params]`
    unconstrained (a scale as its log), the proposal `x + step_size eps`, the random numbers of
    `sample`'s scheme (`fused_mh.run(x, model, ...)` with `steps=1`); it has no `mu` and
    `sigma`."""

    def __init__(self, dim, step_size=0.1, seed=0):
        from ._models import MODELS
        self._data_model = dim if isinstance(dim, MODELS) else None
        self.step_size = step_size
        self.seed = seed
        self.step = 0
        if self._data_model is not None:
            self.dim = dim.dim
            return
        # The library's widest chain: `fused_mh::Shape::MAX_DIM`, 2^32 - 1.
        dim = _unsigned("dim", dim, bits=32)
        if dim < 1:
            raise ValueError(f"dim = {dim}: a chain needs at least one coordinate")
        try:
            # Against the free memory first: where the system overcommits, an allocation the
            # machine cannot hold is granted, and the process killed when it touches it.
            _native.check_target_memory("gaussian", dim)
            mu, sigma = np.zeros(dim, np.float32), np.ones(dim, np.float32)
        except MemoryError as e:
            raise MemoryError(f"dim = {dim}: {e}") from None
        self.dim = dim
        self._target = _TargetCache(mu, sigma)

    @property
    def step_size(self):
        """The proposal's scale: `proposal = x + step_size * eps`, `eps ~ N(0, 1)`."""
        return self._step_size

    @step_size.setter
    def step_size(self, value):
        self._step_size = _step_size(value)

    @property
    def seed(self):
        """The seed of the kernels' random numbers, an integer in [0, 2^64)."""
        return self._seed

    @seed.setter
    def seed(self, value):
        self._seed = _unsigned("seed", value)

    @property
    def step(self):
        """The step counter of the next call's random numbers (+1 per call), in [0, 2^64)."""
        return self._step

    @step.setter
    def step(self, value):
        self._step = _unsigned("step", value)

    @property
    def mu(self):
        """The target's means, float32 `[dim]`, read-only: assign a whole array to change it."""
        self._gaussian("mu")
        return _read_only(self._target.mu)

    @mu.setter
    def mu(self, value):
        self._gaussian("mu")
        self._target = self._checked(_TargetCache(value, self._target.sigma))

    @property
    def sigma(self):
        """The target's standard deviations, float32 `[dim]`, read-only (as `mu`)."""
        self._gaussian("sigma")
        return _read_only(self._target.sigma)

    @sigma.setter
    def sigma(self, value):
        self._gaussian("sigma")
        self._target = self._checked(_TargetCache(self._target.mu, value))

    def _gaussian(self, name):
        if self._data_model is not None:
            raise AttributeError(f"{name}: {self._data_model!r} is a model with data, "
                                 "which has no mu and sigma")

    def _checked(self, target):
        if target.mu.size != self.dim:
            raise ValueError(f"the model has dim {self.dim}, the new target {target.mu.size}")
        return target

    def named_buffers(self):
        """`("mu", mu)` and `("sigma", sigma)`, read-only (none for a model with data)."""
        if self._data_model is None:
            yield "mu", self.mu
            yield "sigma", self.sigma

    def buffers(self):
        """`mu` and `sigma`, read-only (none for a model with data)."""
        for _, b in self.named_buffers():
            yield b

    def state_dict(self):
        """Every setting and the step counter, as a dict of copies: `mu`, `sigma` (float32
        arrays; not for a model with data), `step_size`, `seed`, `step`."""
        state = {"step_size": self.step_size, "seed": self.seed, "step": self.step}
        for name, b in self.named_buffers():
            state[name] = b.copy()
        return state

    def load_state_dict(self, state):
        """Restores what `state_dict` saved. Every key must be there and no other (a
        `KeyError` names them), and every value passes the checks of its setter."""
        want = set(self.state_dict())
        missing, unknown = sorted(want - set(state)), sorted(set(state) - want)
        if missing or unknown:
            raise KeyError(f"state_dict: missing {missing}, unexpected {unknown}")
        # Checked all together before anything changes: a bad value leaves the model as it was.
        step_size = _step_size(state["step_size"])
        seed, counter = _unsigned("seed", state["seed"]), _unsigned("step", state["step"])
        target = None
        if self._data_model is None:
            target = self._checked(_TargetCache(state["mu"], state["sigma"]))
        self._step_size, self._seed, self._step = step_size, seed, counter
        if target is not None:
            self._target = target

    def to(self, device):
        """Uploads the target to `device` now (`"cuda"`, `"cuda:1"`, a `torch.device` or an
        ordinal) instead of at the first call there; `"cpu"` needs nothing. Returns the model.
        The kernels run where `x` lives, on any device, whatever was uploaded."""
        kind, index = _device(device)
        if self._data_model is not None:
            raise TypeError(f"to({device!r}): a model with data uploads its data at every call; "
                            "there is nothing to move")
        if kind == "cuda":
            self._target(DEVICES.get(index))
        return self

    def __repr__(self):
        what = repr(self._data_model) if self._data_model is not None else f"dim={self.dim}"
        return f"Model({what}, step_size={self.step_size}, seed={self.seed}, step={self.step})"

    def forward(self, x):
        """One step of every chain of `x[B, dim]` (float32): `(x_new, accepted)` in the
        framework and on the device of `x`; advances `step` by one."""
        # The checked values themselves (not the properties): this is the per-call path.
        size, seed, counter = self._step_size, self._seed, self._step
        if self._data_model is not None:
            from ._models import step_chains
            out = step_chains(self._data_model, x, size, 1, seed, counter)
            self._step = counter + 1
            return out["x"], like_input_on_device(x, out["accepted_count"] > 0)
        if is_cuda_tensor(x):  # the per-call path of small batches: no layers between
            out = cuda_step(x, self._target, size, seed, counter)
        elif is_jax_gpu(x):
            out = jax_step(x, self._target, size, seed, counter)
        else:
            t = self._target
            out = step(x, t.mu, t.sigma, size, seed=seed, step=counter)
        self._step = counter + 1
        return out

    __call__ = forward


def _device(device):
    """`("cpu", None)` or `("cuda", ordinal)` from a device string, a `torch.device` or an
    ordinal; anything else is a `ValueError` naming it."""
    if isinstance(device, int) and not isinstance(device, bool) and device >= 0:
        return "cuda", device
    kind, index = getattr(device, "type", None), getattr(device, "index", None)
    if kind is None and isinstance(device, str):
        kind, _, number = device.partition(":")
        index = int(number) if number.isdigit() else (None if not number else -1)
    if kind == "cpu" and not index:
        return "cpu", None
    if kind == "cuda" and (index is None or index >= 0):
        return "cuda", index or 0
    raise ValueError(f"device = {device!r}: expected 'cpu', 'cuda', 'cuda:N' or an ordinal")
