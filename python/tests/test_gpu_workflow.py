"""`run`'s workflow on GPU arrays, PyTorch CUDA tensors and JAX GPU arrays alike (each skipped
without its framework and a GPU): warm-up, burn-in, preconditioning, early stop, superchains
from overdispersed starts, progress and the result object, against `host run` on the GPU."""

import json

import numpy as np
import pytest

import fused_mh
from conftest import host_np, jax_device, problem, same_bits, torch_device


@pytest.fixture(params=["torch", "jax"])
def to_gpu(request):
    """Copies a NumPy array to the GPU as the framework's array."""
    return torch_device() if request.param == "torch" else jax_device()


def files(tmp_path, **arrays):
    for name, a in arrays.items():
        np.save(tmp_path / f"{name}.npy", a)
    return ["--mu", "mu.npy", "--sigma", "sigma.npy"]


def test_warm_up_and_burn_in_equal_host_run(tmp_path, host, to_gpu):
    """The warm-up's launches, the burn-in and the steps on the GPU: the step size and every
    output bit for bit `host run --warmup --burn-in` on the GPU (the fused kernel equals single
    steps to the bit, so the acceptance counts and the step sizes agree too)."""
    x, mu, sigma = problem(3000, 24, 41)
    args = files(tmp_path, x0=x, mu=mu, sigma=sigma)
    out = host("--init", "x0.npy", *args, "--warmup", 60, "--burn-in", 30, "--steps", 50,
               "--step-size", 2.0, "--seed", 3, "--thin", 10)
    r = fused_mh.run(to_gpu(x), mu, sigma, 2.0, 50, seed=3, warmup=60, burn_in=30, thin=10)
    summary = json.loads((out / "summary.json").read_text())
    assert np.float32(r.step_size) == np.float32(summary["step_size"]) != np.float32(2.0)
    assert r.next_step == summary["next_step"] == 140
    assert same_bits(host_np(r.x), np.load(out / "x.npy"))
    for name in ["accepted_count", "nonfinite_count", "trace"]:
        assert same_bits(r[name], np.load(out / f"{name}.npy")), name
    assert same_bits(host_np(r.mean), np.load(out / "mean.npy"))
    assert r.draws.shape == (3000, 5, 24)


def test_preconditioning_matches_host_run(tmp_path, host, to_gpu):
    """`precondition=True` on the GPU adapts the scales as `host run --precondition` does. The
    pooled variance they come from is summed by atomics in no fixed order on the GPU, so the
    two runs' scales agree to rounding (float32: 1e-5 relative, after 5 updates of a square
    root of a float64 variance, leaves room for the first launches' states to part by an ulp
    and pull the rest a little), and the step sizes to 1e-3."""
    x, mu, sigma = problem(4096, 8, 42)
    sigma = (sigma * np.geomspace(0.05, 20, 8)).astype(np.float32)
    x = (mu + sigma * np.random.default_rng(1).standard_normal((4096, 8))).astype(np.float32)
    args = files(tmp_path, x0=x, mu=mu, sigma=sigma)
    out = host("--init", "x0.npy", *args, "--warmup", 200, "--precondition", "--steps", 20,
               "--step-size", 0.5, "--seed", 4)
    r = fused_mh.run(to_gpu(x), mu, sigma, 0.5, 20, seed=4, warmup=200, precondition=True)
    summary = json.loads((out / "summary.json").read_text())
    np.testing.assert_allclose(r.scales, summary["scales"], rtol=1e-5)
    assert r.scales.max() / r.scales.min() > 50
    assert r.step_size == pytest.approx(summary["step_size"], rel=1e-3)


def test_early_stop_and_superchains_equal_host_run(tmp_path, host, to_gpu):
    """Overdispersed superchains (`initial_states`, `host run --init-dist overdispersed`) that
    stop early at `until_rhat`: the same checkpoint, states bit for bit, nested R-hat to the
    GPU's atomics' rounding (1e-9 relative, as test_gpu's run)."""
    _, mu, sigma = problem(1, 16, 43)
    args = files(tmp_path, mu=mu, sigma=sigma)
    out = host("--batch", 2048, "--dim", 16, "--init-dist", "overdispersed", *args,
               "--superchain-size", 8, "--until-rhat", 1.05, "--min-draws", 50,
               "--steps", 20000, "--steps-per-launch", 25, "--step-size", 0.6, "--seed", 5)
    x0 = fused_mh.initial_states(2048, mu, sigma, "overdispersed", seed=5, superchain_size=8)
    r = fused_mh.run(to_gpu(x0), mu, sigma, 0.6, 20000, seed=5, until_rhat=1.05,
                     min_draws=50, superchain_size=8, steps_per_launch=25)
    summary = json.loads((out / "summary.json").read_text())
    assert r.stopped_early and summary["stopped_early"] and r.steps == summary["steps"]
    assert same_bits(host_np(r.x), np.load(out / "x.npy"))
    assert same_bits(r.accepted_count, np.load(out / "accepted_count.npy"))
    d = summary["diagnostics"]
    np.testing.assert_allclose(r.diagnostics["nested_rhat"], d["nested_rhat"], rtol=1e-9)
    assert r.diagnostics["draws"] == d["draws"] and r.converged == summary["converged"]


def test_progress_changes_nothing(to_gpu, capsys):
    """A forced tqdm bar on a GPU run: drawn on standard error, the results those of a run
    without it, bit for bit."""
    pytest.importorskip("tqdm")
    x, mu, sigma = problem(1024, 8, 44)
    quiet = fused_mh.run(to_gpu(x), mu, sigma, 0.5, 300, seed=6, warmup=50, progress=False)
    shown = fused_mh.run(to_gpu(x), mu, sigma, 0.5, 300, seed=6, warmup=50, progress=True)
    assert "fused-mh run" in capsys.readouterr().err
    assert same_bits(host_np(shown.x), host_np(quiet.x))
    assert same_bits(shown.accepted_count, quiet.accepted_count)


def test_float64_gpu_input_is_converted_with_a_warning(to_gpu):
    x, mu, sigma = problem(256, 8, 45)
    with pytest.warns(fused_mh.DtypeWarning, match="x is float64"):
        r = fused_mh.run(to_gpu(x.astype(np.float64)), mu, sigma, 0.5, 10, seed=1)
    want = fused_mh.run(to_gpu(x), mu, sigma, 0.5, 10, seed=1)
    assert same_bits(host_np(r.x), host_np(want.x))
    table = r.summary()
    assert len(table if isinstance(table, str) else table.index) >= 8
