"""Where an array lives, and the ways it reaches the Rust side: NumPy arrays (and CPU tensors
or JAX CPU arrays, viewed as NumPy) go to the CPU reference; PyTorch CUDA tensors go to the GPU
kernels as DLPack capsules, with their outputs allocated by PyTorch on the same device and the
step queued on PyTorch's current stream; JAX GPU arrays go as DLPack capsules too, and their
outputs are allocated here and handed to JAX by DLPack (JAX lends no writable memory)."""

import contextlib
import functools
import os
import sys
import warnings

import numpy as np

from . import _native


def torch_module():
    """`torch` if it is imported already (never imported here for a NumPy user)."""
    return sys.modules.get("torch")


def jax_module():
    """`jax` if it is imported already."""
    return sys.modules.get("jax")


def is_jax_array(x):
    jax = jax_module()
    return jax is not None and isinstance(x, jax.Array)


def is_jax_gpu(x):
    return is_jax_array(x) and next(iter(x.devices())).platform == "gpu"


def is_gpu_array(x):
    """A CUDA tensor or a JAX GPU array: the GPU kernels' inputs."""
    return is_cuda_tensor(x) or is_jax_gpu(x)


def is_cuda_tensor(x):
    torch = sys.modules.get("torch")  # `torch_module()`, inline: on every call's path
    return torch is not None and isinstance(x, torch.Tensor) and x.is_cuda


def is_torch_tensor(x):
    torch = torch_module()
    return torch is not None and isinstance(x, torch.Tensor)


class DtypeWarning(UserWarning):
    """A float64 array converted to float32 (fused-mh computes in float32). The one dtype rule,
    the same in every function and in `host`'s `.npy` inputs: float32 is taken as it is,
    float64 converted (a copy) with this warning naming the array, any other dtype refused
    with a `TypeError`. Silence it with `warnings.simplefilter("ignore", fused_mh.DtypeWarning)`."""


def converted(name):
    """Warns that `name` was float64 and is now float32, pointing at the caller's line (the
    first frame outside this package)."""
    here, level, frame = os.path.dirname(__file__), 1, sys._getframe(0)
    while frame is not None and os.path.dirname(frame.f_code.co_filename) == here:
        frame, level = frame.f_back, level + 1
    warnings.warn(f"{name} is float64; converted to float32 (fused-mh computes in float32)",
                  DtypeWarning, stacklevel=level)


def refused(name, dtype):
    return TypeError(f"{name} has dtype {dtype}: fused-mh takes float32 (float64 is converted, "
                     "with a DtypeWarning)")


def gpu_float32(name, a):
    """The GPU array `a` (a CUDA tensor or a JAX GPU array) as float32, by the one dtype rule
    (`DtypeWarning`): as it is, or float64 converted on its device."""
    if is_cuda_tensor(a):
        torch = torch_module()
        if a.dtype == torch.float32:
            return a
        if a.dtype == torch.float64:
            converted(name)
            return a.float()
    else:
        if a.dtype == np.float32:
            return a
        if a.dtype == np.float64:
            converted(name)
            return a.astype(np.float32)
    raise refused(name, a.dtype)


def to_numpy(name, a, ndim=None, convert=False):
    """`a` as a float32 NumPy array: a NumPy array as it is (the Rust side checks its layout),
    a CPU tensor by `.numpy()`, float64 converted by the one dtype rule (`DtypeWarning`). With
    `convert` (the target's `mu`, `sigma` and parameters) `a` may also be a list of numbers, or
    on a GPU (it comes to the host once, when it is set)."""
    if isinstance(a, np.ndarray):
        out = a
    elif is_torch_tensor(a):
        if a.is_cuda and not convert:
            raise TypeError(f"{name} is a CUDA tensor; the other inputs are on the CPU")
        # A target on the GPU comes to the host once, when it is set (dim numbers).
        out = a.detach().cpu().numpy()
    elif is_jax_array(a):
        if is_jax_gpu(a) and not convert:
            raise TypeError(f"{name} is a JAX GPU array; the other inputs are on the CPU")
        out = np.asarray(a)
    elif convert and isinstance(a, (list, tuple)):
        out = np.asarray(a, dtype=np.float32)
    else:
        raise TypeError(f"{name}: expected a NumPy array or a torch tensor, got {type(a).__name__}")
    if out.dtype == np.float64:
        converted(name)
        out = out.astype(np.float32)
    elif out.dtype != np.float32:
        raise refused(name, out.dtype)
    if ndim is not None and out.ndim != ndim:
        raise ValueError(f"{name} has {out.ndim} dimensions, expected {ndim}")
    return out


def like_input(x, out):
    """An output of the CPU path in the input's framework: a tensor for a tensor input, a JAX
    array for a JAX array."""
    if is_torch_tensor(x):
        return torch_module().from_numpy(out)
    if is_jax_array(x):
        return jax_module().numpy.asarray(out)
    return out


def like_input_on_device(x, out):
    """A host result (a NumPy array) in the framework and on the device of `x`: a tensor on
    `x`'s device for a tensor, a JAX array on `x`'s device for a JAX array."""
    if is_torch_tensor(x):
        return torch_module().from_numpy(out).to(x.device)
    if is_jax_array(x):
        jax = jax_module()
        return jax.device_put(out, next(iter(x.devices())))
    return out


def gpu_step(x, target, step_size, seed=0, step=0, noise=None, uniform=None):
    """One step of a GPU array `x` (a CUDA tensor or a JAX GPU array)."""
    if is_cuda_tensor(x):
        return cuda_step(x, target, step_size, seed, step, noise, uniform)
    return jax_step(x, target, step_size, seed, step, noise, uniform)


def jax_step(x, target, step_size, seed=0, step=0, noise=None, uniform=None):
    """One step of the JAX GPU array `x`: its memory read in place (DLPack), the outputs
    written into memory allocated here on the package's own stream, complete when returned,
    and handed to JAX without a copy (`jax.dlpack.from_dlpack`)."""
    jax = jax_module()
    if x.dtype != np.float32:
        x = gpu_float32("x", x)
    if x.ndim != 2:
        raise ValueError(f"x has {x.ndim} dimensions, expected 2 ([B, dim])")
    device = DEVICES.get(next(iter(x.devices())).local_hardware_id)
    extra = {}
    if noise is not None or uniform is not None:
        if not (is_jax_gpu(noise) and is_jax_gpu(uniform)):
            raise TypeError("noise and uniform must be JAX GPU arrays on the device of x")
        extra = {"noise": gpu_float32("noise", noise), "uniform": gpu_float32("uniform", uniform)}
    # The package's stream does not follow JAX's: the inputs must be complete first.
    for a in [x, *extra.values()]:
        a.block_until_ready()
    capsules = {k: v.__dlpack__() for k, v in extra.items()}
    x_new, accepted = device.step_to_new(
        x.__dlpack__(), target(device), float(step_size), seed=seed, step=step, **capsules
    )
    return jax.dlpack.from_dlpack(x_new), jax.dlpack.from_dlpack(accepted)


class Devices:
    """One `_native.Device` per CUDA ordinal, opened on first use and kept."""

    def __init__(self):
        self._open = {}

    def get(self, ordinal):
        if ordinal not in self._open:
            self._open[ordinal] = _native.Device(ordinal)
        return self._open[ordinal]


DEVICES = Devices()


@functools.cache
def _raw_stream_getter():
    """PyTorch's function for its current stream on a device, as a `CUstream` address. Its own
    (the one Triton's launcher calls) takes 0.4 us on the H200; the public
    `torch.cuda.current_stream(index).cuda_stream` builds a Stream object first (2.3 us), and is
    the fallback."""
    torch = torch_module()
    raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    return raw if raw is not None else (lambda index: torch.cuda.current_stream(index).cuda_stream)


@functools.cache
def _to_dlpack():
    """PyTorch's DLPack exporter, imported once (an `import` statement costs a lookup a call)."""
    import torch.utils.dlpack

    return torch.utils.dlpack.to_dlpack


class _MemoryErrors:
    """PyTorch's out-of-memory error, raised while allocating an output, as the package's
    `MemoryError` (what the Rust side raises when the device is full), chained to it."""

    def __init__(self, torch):
        self.oom = torch.cuda.OutOfMemoryError

    def __enter__(self):
        return self

    def __exit__(self, kind, error, traceback):
        if kind is not None and issubclass(kind, self.oom):
            raise _gpu_memory_error(error) from error
        return False


def _gpu_memory_error(error):
    """The package's `MemoryError` for PyTorch's out-of-memory `error`."""
    return MemoryError(f"the GPU is out of memory: {error}")


def cuda_step(x, target, step_size, seed=0, step=0, noise=None, uniform=None):
    """One step of the CUDA tensor `x` on the GPU kernels, queued on PyTorch's current stream
    of `x`'s device; `x_new` and `accepted` are new PyTorch tensors on that device.

    At a small batch a call is held by the host, not the GPU (`bench/python_call_pieces.py`;
    on an H100's host: PyTorch's two allocations 4.8 us, the native call with the kernel's
    launch 4.6, against a 4.6 us kernel), so this path is a straight line: no layers of
    calls, no context manager, no keywords, every lookup that never changes made once."""
    torch = sys.modules["torch"]  # `x` is a tensor: imported
    if x.dtype != torch.float32:  # one comparison when it is float32
        x = gpu_float32("x", x)
    if x.dim() != 2:
        raise ValueError(f"x has {x.dim()} dimensions, expected 2 ([B, dim])")
    if noise is not None or uniform is not None:
        if not (is_cuda_tensor(noise) and is_cuda_tensor(uniform)):
            raise TypeError("noise and uniform must be CUDA tensors on the device of x")
        noise, uniform = gpu_float32("noise", noise), gpu_float32("uniform", uniform)
    index = x.get_device()
    device = DEVICES.get(index)
    stream = _raw_stream_getter()(index)
    try:
        x_new = torch.empty_like(x, memory_format=torch.contiguous_format)
        accepted = x.new_empty(x.size(0), dtype=torch.bool)  # on x's device
    except torch.cuda.OutOfMemoryError as e:
        raise _gpu_memory_error(e) from e
    # `to_dlpack` hands the tensor over as it is; `t.__dlpack__(stream=...)` would also order
    # the stream it is given after the tensor's (an event, ~3 us a tensor on the H200), which
    # is already so: the step is queued on the current stream, where PyTorch queued the work
    # that wrote `x` and will queue the work that reads `x_new`.
    capsule = _to_dlpack()
    # Positional, the native method's order: (stream, x, x_new, accepted, target, step_size,
    # seed, step[, noise, uniform]).
    if noise is None:
        device.step(stream, capsule(x), capsule(x_new), capsule(accepted), target(device),
                    step_size, seed, step)
    else:
        device.step(stream, capsule(x), capsule(x_new), capsule(accepted), target(device),
                    step_size, seed, step, capsule(noise), capsule(uniform))
    return x_new, accepted


def gpu_run(x, target, step_size, steps, seed, first_step, thin, steps_per_launch,
            until_rhat=None, min_draws=None, superchain_size=1, progress=None,
            diagnostics=True, scales=None, warmup=0, target_accept=0.234, precondition=False,
            burn_in=0):
    """`steps` steps of the GPU array `x` in the fused kernel (`Gpu::run`), after `warmup`
    steps that adapt the step size (and the scales, with `precondition`) and `burn_in` steps
    dropped, all in one native call on a device copy of `x`: the final states and the
    per-chain means and variances come back in `x`'s framework on its device (float64 moments,
    as the CPU's), the counts and the trace as NumPy arrays, with the `step_size` and `scales`
    the steps ran with and the warm-up's `last_acceptance`."""
    if is_cuda_tensor(x):
        torch = torch_module()
        import torch.utils.dlpack  # noqa: F401

        x = gpu_float32("x", x)
        index = x.device.index
        # The run copies x on the package's stream: what writes x must be done first.
        torch.cuda.current_stream(index).synchronize()
        capsule, back = torch.utils.dlpack.to_dlpack(x), torch.from_dlpack
        memory_errors = _MemoryErrors(torch)
    else:
        jax = jax_module()
        x = gpu_float32("x", x)
        index = next(iter(x.devices())).local_hardware_id
        x.block_until_ready()
        capsule, back = x.__dlpack__(), jax.dlpack.from_dlpack
        memory_errors = contextlib.nullcontext()
    device = DEVICES.get(index)
    out = device.run(
        capsule,
        target(device),
        float(step_size),
        int(seed),
        int(first_step),
        int(steps),
        steps_per_launch=int(steps_per_launch),
        thin=int(thin),
        until_rhat=until_rhat,
        min_draws=min_draws,
        superchain_size=superchain_size,
        progress=progress,
        diagnostics=diagnostics,
        scales=scales,
        warmup=int(warmup),
        target_accept=float(target_accept),
        precondition=bool(precondition),
        burn_in=int(burn_in),
    )
    for name in ["x", "mean", "m2"]:
        out[name] = back(out[name])
    m2 = out.pop("m2")
    with memory_errors:
        # A PyTorch tensor of the run's own memory is divided in place (no second 8-byte
        # [B, dim] array); a JAX array is immutable.
        out["var"] = m2.div_(out["steps"]) if is_cuda_tensor(m2) else m2 / out["steps"]
    return out
