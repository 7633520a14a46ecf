"""`Model`: the reference PyTorch module's interface over the fused kernels."""

import numpy as np

from ._arrays import gpu_step, is_gpu_array, like_input_on_device
from ._functions import _TargetCache, step


class Model:
    """A random-walk Metropolis-Hastings step for `B` independent chains of a diagonal Gaussian
    target, as the reference module: `mu[dim]` (zeros) and `sigma[dim]` (ones) are settable,
    `model(x)` (or `model.forward(x)`) returns `(x_new[B, dim] float32, accepted[B] bool)` on
    the device and in the framework of `x` (NumPy, PyTorch or JAX). The random numbers are drawn in the kernel from
    `seed` and a step counter that advances by one per call (`model.step`, settable), so a
    model's calls are one reproducible stream: the same as `host run` with the same seed.

    `Model(model)` with a model with data (`LinearRegression`, `LogisticRegression`,
    `HierarchicalNormal`, `DenseGaussian`) steps that model's chains instead: `x[B, params]`
    unconstrained (a scale as its log), the proposal `x + step_size eps`, the random numbers of
    `sample`'s scheme (`fused_mh.run(x, model, ...)` with `steps=1`); it has no `mu` and
    `sigma`."""

    def __init__(self, dim, step_size=0.1, seed=0):
        from ._models import MODELS
        self._data_model = dim if isinstance(dim, MODELS) else None
        if self._data_model is not None:
            self.dim = dim.dim
            self.step_size = float(step_size)
            self.seed = int(seed)
            self.step = 0
            return
        if int(dim) < 1:
            raise ValueError(f"dim = {dim}: a chain needs at least one coordinate")
        self.dim = int(dim)
        self.step_size = float(step_size)
        self.seed = int(seed)
        self.step = 0
        self._target = _TargetCache(np.zeros(self.dim, np.float32), np.ones(self.dim, np.float32))

    @property
    def mu(self):
        self._gaussian("mu")
        return self._target.mu.copy()

    @mu.setter
    def mu(self, value):
        self._gaussian("mu")
        self._target = self._checked(_TargetCache(value, self._target.sigma))

    @property
    def sigma(self):
        self._gaussian("sigma")
        return self._target.sigma.copy()

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

    def forward(self, x):
        if self._data_model is not None:
            from ._models import step_chains
            out = step_chains(self._data_model, x, self.step_size, 1, self.seed, self.step)
            self.step += 1
            return out["x"], like_input_on_device(x, out["accepted_count"] > 0)
        if is_gpu_array(x):
            out = gpu_step(x, self._target, self.step_size, seed=self.seed, step=self.step)
        else:
            t = self._target
            out = step(x, t.mu, t.sigma, self.step_size, seed=self.seed, step=self.step)
        self.step += 1
        return out

    __call__ = forward
