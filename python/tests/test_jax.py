"""The package on JAX GPU arrays (skipped without JAX and a GPU): the inputs read in place,
the outputs JAX arrays over memory the kernel wrote, against `host run` and a reference in JAX."""

import os

import numpy as np
import pytest

import fused_mh
from conftest import problem, same_bits

# JAX would take 75 % of the GPU's memory at import, which the other tests' PyTorch may need.
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
jax = pytest.importorskip("jax")
# The run's per-chain moments are float64, as everywhere in the package.
jax.config.update("jax_enable_x64", True)
jnp = jax.numpy
if not any(d.platform == "gpu" for d in jax.devices()):
    pytest.skip("no JAX GPU", allow_module_level=True)


def gpu(a):
    return jax.device_put(np.ascontiguousarray(a), jax.devices("gpu")[0])


def test_in_kernel_steps_equal_host_run(tmp_path, host):
    x, mu, sigma = problem(3000, 33, 13)
    for name, a in {"x0": x, "mu": mu, "sigma": sigma}.items():
        np.save(tmp_path / f"{name}.npy", a)
    out = host("--init", "x0.npy", "--mu", "mu.npy", "--sigma", "sigma.npy", "--steps", 3,
               "--step-size", 0.3, "--seed", 22)
    model = fused_mh.Model(33, step_size=0.3, seed=22)
    model.mu, model.sigma = mu, sigma
    state, total = gpu(x), np.zeros(3000, np.uint64)
    for _ in range(3):
        state, accepted = model(state)
        assert isinstance(state, jax.Array) and state.dtype == jnp.float32
        assert accepted.dtype == jnp.bool_ and next(iter(state.devices())).platform == "gpu"
        total += np.asarray(accepted)
    assert same_bits(np.asarray(state), np.load(out / "x.npy"))
    assert np.array_equal(total, np.load(out / "accepted_count.npy"))


def test_run_equals_host_run(tmp_path, host):
    x, mu, sigma = problem(2000, 40, 18)
    for name, a in {"x0": x, "mu": mu, "sigma": sigma}.items():
        np.save(tmp_path / f"{name}.npy", a)
    out = host("--init", "x0.npy", "--mu", "mu.npy", "--sigma", "sigma.npy", "--steps", 30,
               "--step-size", 0.25, "--seed", 6, "--steps-per-launch", 7)
    r = fused_mh.run(gpu(x), mu, sigma, 0.25, 30, seed=6, steps_per_launch=7)
    assert isinstance(r["x"], jax.Array) and next(iter(r["x"].devices())).platform == "gpu"
    assert same_bits(np.asarray(r["x"]), np.load(out / "x.npy"))
    for name in ["accepted_count", "nonfinite_count"]:
        assert same_bits(r[name], np.load(out / f"{name}.npy")), name
    for name in ["mean", "var"]:
        assert same_bits(np.asarray(r[name]), np.load(out / f"{name}.npy")), name


def test_caller_noise_equals_a_reference_in_jax():
    """As the PyTorch test: decisions agree away from the boundary, states to 1 ulp."""
    x, mu, sigma = problem(4096, 64, 14)
    r = np.random.default_rng(15)
    noise, u = r.standard_normal(x.shape).astype(np.float32), r.uniform(0, 1, 4096).astype(np.float32)
    p = gpu(x) + 0.15 * gpu(noise)
    lp = lambda v: -0.5 * jnp.sum(((v - mu) / sigma) ** 2, axis=-1)
    ref_acc = jnp.log(jnp.maximum(gpu(u), 1e-10)) < lp(p) - lp(gpu(x))
    ref_x = jnp.where(ref_acc[:, None], p, gpu(x))
    x_new, acc = fused_mh.step_with_noise(gpu(x), mu, sigma, 0.15, gpu(noise), gpu(u))
    acc, ref_acc = np.asarray(acc), np.asarray(ref_acc)
    pd = x.astype(np.float64) + 0.15 * noise
    lpd = lambda v: -0.5 * (((v - mu) / sigma) ** 2).sum(axis=1)
    log_alpha = lpd(pd) - lpd(x.astype(np.float64))
    clear = np.abs(log_alpha - np.log(np.maximum(u, 1e-10))) > 1e-4 * (1 + np.abs(log_alpha))
    assert np.array_equal(acc[clear], ref_acc[clear]) and clear.sum() > 4000
    same = acc == ref_acc
    np.testing.assert_allclose(np.asarray(x_new)[same], np.asarray(ref_x)[same], rtol=2.5e-7, atol=1e-6)


def test_outputs_are_the_memory_the_kernel_wrote():
    """`jax.dlpack.from_dlpack` takes the package's allocation as it is: the JAX array's
    buffer is the address the kernel wrote."""
    x, mu, sigma = problem(1000, 100, 16)
    device = fused_mh._arrays.DEVICES.get(0)
    target = device.target("gaussian", [mu, sigma])
    x_new, accepted = device.step_to_new(gpu(x).__dlpack__(), target, 0.1, seed=1)
    ptr = x_new.ptr
    as_jax = jax.dlpack.from_dlpack(x_new)
    assert as_jax.unsafe_buffer_pointer() == ptr
    with pytest.raises(BufferError):
        x_new.__dlpack__()  # handed over once
    want, _ = fused_mh.step(x, mu, sigma, 0.1, seed=1)
    np.testing.assert_allclose(np.asarray(as_jax), want, rtol=1e-5, atol=1e-5)


def test_bad_jax_inputs_raise():
    x, mu, sigma = problem(64, 8, 17)
    with pytest.raises(TypeError, match="float32"):
        fused_mh.Model(8)(gpu(x.astype(np.float16)))
    with pytest.raises(ValueError, match="shape"):
        fused_mh.Model(9)(gpu(x))
    with pytest.raises(TypeError, match="JAX GPU arrays"):
        fused_mh.step_with_noise(gpu(x), mu, sigma, 0.1, x, np.zeros(64, np.float32))
