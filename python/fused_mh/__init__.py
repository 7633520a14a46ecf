"""fused-mh from Python: the Rust kernels of fused-mh on NumPy arrays (the CPU reference) and
on PyTorch CUDA tensors and JAX GPU arrays (the GPU kernels, reading them in place; for
PyTorch on the caller's current stream).

    import fused_mh
    model = fused_mh.Model(dim=64, step_size=0.1)   # mu = 0, sigma = 1, settable
    x_new, accepted = model(x)                       # x: [B, 64] float32

`step`, `step_with_noise` and `run` are the functions under it (see their docs); `run` does
what `host run` does (warm-up, preconditioning, burn-in, early stop, superchains) and returns
a `RunResult` with `summary()` and `to_arviz()`; `initial_states` makes `host run`'s generated
(and overdispersed) starting points.

Arrays are float32; float64 ones are converted, with a `DtypeWarning` naming the array (as
`host` converts float64 `.npy` files, with a note), and any other dtype is a `TypeError`.

Models with data (regressions, the hierarchical normal, the dense Gaussian) are sampled by
`sample`, as `host sample` samples them:

    post = fused_mh.sample(fused_mh.LogisticRegression(X, y), device="cuda")
    post.summary()["beta[1]"]

and the same model objects take the Gaussian target's place in `run(x, model, step_size=...,
steps=...)` and `Model(model)`: random-walk steps of the chains `x[B, params]`.
"""

from ._native import __version__
from ._arrays import DtypeWarning
from ._arviz import to_arviz
from ._summary import summary
from ._functions import initial_states, run, step, step_with_noise
from ._result import RunResult
from ._model import Model
from ._models import (DenseGaussian, HierarchicalNormal, LinearRegression, LogisticRegression,
                      Posterior, sample)

__all__ = ["DenseGaussian", "DtypeWarning", "HierarchicalNormal", "LinearRegression",
           "LogisticRegression", "Model", "Posterior", "RunResult", "initial_states", "run",
           "sample", "step", "step_with_noise", "summary", "to_arviz"]
