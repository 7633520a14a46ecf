"""fused-mh from Python: the Rust kernels of fused-mh on NumPy arrays (the CPU reference) and
on PyTorch CUDA tensors and JAX GPU arrays (the GPU kernels, reading them in place; for
PyTorch on the caller's current stream).

    import fused_mh
    model = fused_mh.Model(dim=64, step_size=0.1)   # mu = 0, sigma = 1, settable
    x_new, accepted = model(x)                       # x: [B, 64] float32

`step`, `step_with_noise` and `run` are the functions under it (see their docs).
"""

from ._functions import run, step, step_with_noise
from ._model import Model

__all__ = ["Model", "run", "step", "step_with_noise"]
