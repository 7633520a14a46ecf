"""Shared helpers: random problems, the `host` program of this repository (for bit-for-bit
comparisons), `.npy` round trips, and arrays on the GPU (PyTorch CUDA tensors, JAX GPU arrays;
the case skipped without the framework and a GPU)."""

import os
import pathlib
import subprocess

import numpy as np
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]

# JAX takes GPU memory as it needs it, beside PyTorch and the package, not most of it at once.
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")


def host_program():
    """The `host` program: `$FUSED_MH_HOST`, or the one `cargo build`/`cargo test` left in
    target/ (release first)."""
    if "FUSED_MH_HOST" in os.environ:
        return pathlib.Path(os.environ["FUSED_MH_HOST"])
    for profile in ["release", "debug"]:
        p = ROOT / "target" / profile / "host"
        if p.exists():
            return p
    return None


@pytest.fixture
def host(tmp_path):
    """Runs `host run ARGS...` in `tmp_path`; returns the output directory's path."""
    program = host_program()
    if program is None:
        pytest.skip("no host program built (cargo build -p host, or set FUSED_MH_HOST)")

    def run(*args):
        out = tmp_path / "out"
        cmd = [str(program), "run", *map(str, args), "--out", str(out), "--force"]
        done = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        return out

    return run


def problem(batch, dim, seed):
    """Chains around a random diagonal Gaussian target (mu in [-2, 2], sigma in [0.5, 2]),
    1.5 sigma wide, so that both accepts and rejects happen."""
    r = np.random.default_rng(seed)
    mu = r.uniform(-2, 2, dim).astype(np.float32)
    sigma = r.uniform(0.5, 2, dim).astype(np.float32)
    x = (mu + 1.5 * sigma * r.standard_normal((batch, dim))).astype(np.float32)
    return x, mu, sigma


def same_bits(a, b):
    a, b = np.asarray(a), np.asarray(b)
    return a.shape == b.shape and a.dtype == b.dtype and np.array_equal(a.view(np.uint8), b.view(np.uint8))


def readme_example(marker):
    """The README's ```python block that contains `marker` (its first line, say), so the tests
    run what the README shows."""
    text = (ROOT / "README.md").read_text()
    blocks = [b.split("```", 1)[0] for b in text.split("```python\n")[1:]]
    found = [b for b in blocks if marker in b]
    assert len(found) == 1, f"{len(found)} README examples contain {marker!r}"
    return found[0]


def torch_device():
    """A copy of a NumPy array as a PyTorch CUDA tensor (the case skipped without one)."""
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    return lambda a: torch.from_numpy(np.ascontiguousarray(a)).cuda()


def jax_device():
    """A copy of a NumPy array as a JAX GPU array (the case skipped without one)."""
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    if not any(d.platform == "gpu" for d in jax.devices()):
        pytest.skip("no JAX GPU")
    return lambda a: jax.device_put(np.ascontiguousarray(a), jax.devices("gpu")[0])


def host_np(a):
    """A framework's array (a torch tensor, a JAX or NumPy array) as a NumPy array."""
    return a.detach().cpu().numpy() if hasattr(a, "detach") else np.asarray(a)
