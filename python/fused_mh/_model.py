"""`Model`: the reference PyTorch module's interface over the fused kernels."""

import numpy as np

from ._arrays import gpu_step, is_gpu_array
from ._functions import _TargetCache, step


class Model:
    """A random-walk Metropolis-Hastings step for `B` independent chains of a diagonal Gaussian
    target, as the reference module: `mu[dim]` (zeros) and `sigma[dim]` (ones) are settable,
    `model(x)` (or `model.forward(x)`) returns `(x_new[B, dim] float32, accepted[B] bool)` on
    the device and in the framework of `x` (NumPy, PyTorch or JAX). The random numbers are drawn in the kernel from
    `seed` and a step counter that advances by one per call (`model.step`, settable), so a
    model's calls are one reproducible stream: the same as `host run` with the same seed."""

    def __init__(self, dim, step_size=0.1, seed=0):
        if int(dim) < 1:
            raise ValueError(f"dim = {dim}: a chain needs at least one coordinate")
        self.dim = int(dim)
        self.step_size = float(step_size)
        self.seed = int(seed)
        self.step = 0
        self._target = _TargetCache(np.zeros(self.dim, np.float32), np.ones(self.dim, np.float32))

    @property
    def mu(self):
        return self._target.mu.copy()

    @mu.setter
    def mu(self, value):
        self._target = self._checked(_TargetCache(value, self._target.sigma))

    @property
    def sigma(self):
        return self._target.sigma.copy()

    @sigma.setter
    def sigma(self, value):
        self._target = self._checked(_TargetCache(self._target.mu, value))

    def _checked(self, target):
        if target.mu.size != self.dim:
            raise ValueError(f"the model has dim {self.dim}, the new target {target.mu.size}")
        return target

    def forward(self, x):
        if is_gpu_array(x):
            out = gpu_step(x, self._target, self.step_size, seed=self.seed, step=self.step)
        else:
            t = self._target
            out = step(x, t.mu, t.sigma, self.step_size, seed=self.seed, step=self.step)
        self.step += 1
        return out

    __call__ = forward
