"""The package on NumPy arrays: the CPU reference, against `host run --cpu` bit for bit, and
against the reference model's formulas written here in float64; every bad input raises."""

import numpy as np
import pytest

import fused_mh
from conftest import problem, readme_example, same_bits


def save(tmp_path, **arrays):
    for name, a in arrays.items():
        np.save(tmp_path / f"{name}.npy", a)


def test_model_interface():
    x, _, _ = problem(33, 5, 1)
    model = fused_mh.Model(5, step_size=0.7, seed=4)
    assert np.array_equal(model.mu, np.zeros(5)) and np.array_equal(model.sigma, np.ones(5))
    before = x.copy()
    x_new, accepted = model(x)
    assert x_new.shape == (33, 5) and x_new.dtype == np.float32
    assert accepted.shape == (33,) and accepted.dtype == np.bool_
    assert same_bits(x, before), "the input was changed"
    # Rows that moved hold the proposal, the others their state; both kinds occur.
    moved = np.any(x_new != x, axis=1)
    assert np.array_equal(moved, accepted) and 0 < accepted.sum() < 33
    # The counter advances: the next call draws other numbers; forward is the same call.
    assert model.step == 1
    again, _ = model.forward(x)
    assert model.step == 2 and not same_bits(again, x_new)
    model.step = 0
    assert same_bits(model(x)[0], x_new)


def test_step_equals_host_run(tmp_path, host):
    """`Model` and `step` draw the kernels' counter-scheme numbers: one call equals `host run
    --steps 1` with the same seed, bit for bit; `run` equals K steps, counts and moments too."""
    x, mu, sigma = problem(40, 7, 2)
    save(tmp_path, x0=x, mu=mu, sigma=sigma)
    common = ["--cpu", "--init", "x0.npy", "--mu", "mu.npy", "--sigma", "sigma.npy"]
    out = host(*common, "--steps", 1, "--step-size", 0.6, "--seed", 11)
    model = fused_mh.Model(7, step_size=0.6, seed=11)
    model.mu, model.sigma = mu, sigma
    x_new, accepted = model(x)
    assert same_bits(x_new, np.load(out / "x.npy"))
    assert np.array_equal(accepted.astype(np.uint64), np.load(out / "accepted_count.npy"))

    out = host(*common, "--steps", 30, "--step-size", 0.6, "--seed", 11, "--thin", 10)
    r = fused_mh.run(x, mu, sigma, 0.6, 30, seed=11, thin=10)
    assert r["steps"] == 30
    for name in ["x", "accepted_count", "nonfinite_count", "mean", "var", "trace"]:
        assert same_bits(r[name], np.load(out / f"{name}.npy")), name


def test_step_with_noise_equals_host_and_the_formulas(tmp_path, host):
    x, mu, sigma = problem(64, 9, 3)
    r = np.random.default_rng(5)
    noise = r.standard_normal(x.shape).astype(np.float32)
    uniform = r.uniform(0, 1, 64).astype(np.float32)
    save(tmp_path, x0=x, mu=mu, sigma=sigma, noise=noise, uniform=uniform)
    out = host("--cpu", "--init", "x0.npy", "--mu", "mu.npy", "--sigma", "sigma.npy",
               "--noise", "noise.npy", "--uniform", "uniform.npy", "--step-size", 0.4)
    x_new, accepted = fused_mh.step_with_noise(x, mu, sigma, 0.4, noise, uniform)
    assert same_bits(x_new, np.load(out / "x_new.npy"))
    assert np.array_equal(accepted, np.load(out / "accepted.npy"))

    # The reference model in float64: proposal, log pi, the decision on log(max(u, 1e-10)).
    p = x.astype(np.float64) + 0.4 * noise
    log_pi = lambda v: -0.5 * (((v - mu) / sigma) ** 2).sum(axis=1)
    log_alpha = log_pi(p) - log_pi(x.astype(np.float64))
    log_u = np.log(np.maximum(uniform.astype(np.float64), 1e-10))
    # float32 sums differ from float64 by ~1e-6 relative: decisions closer than that to the
    # boundary may go either way (none are, for these inputs, but the test says why).
    clear = np.abs(log_alpha - log_u) > 1e-4 * (1 + np.abs(log_alpha))
    assert np.array_equal(accepted[clear], (log_u < log_alpha)[clear]) and clear.sum() >= 60
    want = np.where(accepted[:, None], p, x)
    # One float32 rounding of x + 0.4 eps: within 1 ulp of the value.
    np.testing.assert_allclose(x_new, want, rtol=2e-7, atol=1e-7)


def test_cpu_tensors_come_back_as_tensors():
    torch = pytest.importorskip("torch")
    x, mu, sigma = problem(10, 4, 6)
    x_new, accepted = fused_mh.step(torch.from_numpy(x), mu, sigma, 0.5, seed=1)
    assert isinstance(x_new, torch.Tensor) and accepted.dtype == torch.bool
    assert same_bits(x_new.numpy(), fused_mh.step(x, mu, sigma, 0.5, seed=1)[0])


@pytest.mark.parametrize(
    "change, error, message",
    [
        (lambda a: a.update(x=a["x"].astype(np.float16)), TypeError, "dtype float16"),
        (lambda a: a.update(x=a["x"].astype(np.int32)), TypeError, "x has dtype int32"),
        (lambda a: a.update(mu=a["mu"].astype(np.int64)), TypeError, "mu has dtype int64"),
        (lambda a: a.update(x=a["x"][:, ::2].copy()[:, :3]), ValueError, "dim"),
        (lambda a: a.update(x=np.asfortranarray(a["x"])), ValueError, "C-contiguous"),
        (lambda a: a.update(x=a["x"][0]), ValueError, "1 dimensions, expected 2"),
        (lambda a: a.update(x=np.zeros((0, 6), np.float32)), ValueError, "empty"),
        (lambda a: a.update(mu=a["mu"][:5]), ValueError, "mu has 5 elements"),
        (lambda a: a.update(sigma=-a["sigma"]), ValueError, "sigma[0]"),
        (lambda a: a.update(step_size=0.0), ValueError, "step_size = 0.0: must be"),
        (lambda a: a.update(step_size=float("nan")), ValueError, "step_size = nan: must be"),
        (lambda a: a.update(x="not an array"), TypeError, "expected a NumPy array"),
    ],
)
def test_bad_inputs_raise(change, error, message):
    x, mu, sigma = problem(8, 6, 7)
    args = {"x": x, "mu": mu, "sigma": sigma, "step_size": 0.5}
    change(args)
    with pytest.raises(error, match=message.replace("[", r"\[")):
        fused_mh.step(args["x"], args["mu"], args["sigma"], args["step_size"])


def test_bad_noise_raises():
    x, mu, sigma = problem(8, 6, 8)
    noise = np.zeros_like(x)
    with pytest.raises(ValueError, match="uniform"):
        fused_mh.step_with_noise(x, mu, sigma, 0.5, noise, np.full(8, 1.0, np.float32))
    with pytest.raises(ValueError, match="noise"):
        fused_mh.step_with_noise(x, mu, sigma, 0.5, noise[:4], np.zeros(8, np.float32))
    bad = noise.copy()
    bad[3, 2] = np.nan
    with pytest.raises(ValueError, match="noise"):
        fused_mh.step_with_noise(x, mu, sigma, 0.5, bad, np.zeros(8, np.float32))


def test_bad_models_and_runs_raise():
    with pytest.raises(ValueError, match="dim"):
        fused_mh.Model(0)
    model = fused_mh.Model(4)
    with pytest.raises(ValueError, match="3 elements"):
        model.mu = np.zeros(3)
    x, mu, sigma = problem(5, 4, 9)
    with pytest.raises(ValueError, match="thin"):
        fused_mh.run(x, mu, sigma, 0.5, 3, thin=4)
    # host run's --thin rule: a thin that does not divide steps would leave the last steps
    # out of the trace.
    with pytest.raises(ValueError, match="does not divide"):
        fused_mh.run(x, mu, sigma, 0.5, 10, thin=3)
    # host run's rules: no empty run, and a step counter that never wraps (past 2^64 - 1 it
    # would replay step 0's random numbers).
    with pytest.raises(ValueError, match="nothing to run"):
        fused_mh.run(x, mu, sigma, 0.5, 0)
    with pytest.raises(ValueError, match="2\\^64 - 1"):
        fused_mh.run(x, mu, sigma, 0.5, 3, first_step=2**64 - 1)
    assert fused_mh.run(x, mu, sigma, 0.5, 3, first_step=2**64 - 4)["steps"] == 3


def test_no_gpu_is_a_runtime_error():
    """Without a driver (CI), opening a device is a RuntimeError with the library's message."""
    try:
        fused_mh._native.Device(0)
    except RuntimeError as e:
        assert "CUDA" in str(e) or "device" in str(e)
    else:
        pytest.skip("a GPU is present: tests/test_gpu.py covers it")


def test_the_readme_numpy_example_runs(capsys):
    exec(readme_example("model = fused_mh.Model(dim=8"), {})
    rate, shapes = capsys.readouterr().out.split(" ", 1)
    # The trace as run keeps it, [draws, chains, dim], and as ArviZ wants it.
    assert 0.3 < float(rate) < 0.7 and shapes.strip() == "(10, 4096, 8) (4096, 10, 8)"


def test_the_readme_host_run_example_runs_outside_the_clone(monkeypatch, tmp_path, capsys):
    """The README's `host run` example, from a directory outside the clone: it writes only into
    a temporary directory of its own (nothing into the clone or the caller's directory) and
    prints what the README says it prints (here with 256 chains, to keep CI short)."""
    from conftest import ROOT, host_program
    program = host_program()
    if program is None:
        pytest.skip("no host program built (cargo build -p host, or set FUSED_MH_HOST)")
    monkeypatch.setenv("FUSED_MH_HOST", str(program))
    caller = tmp_path / "caller"
    caller.mkdir()
    monkeypatch.chdir(caller)
    before = sorted(p.name for p in ROOT.iterdir())
    example = readme_example("x0 = np.tile(mu + 10 * sigma")
    assert "B, D = 4096, 16" in example
    exec(example.replace("B, D = 4096, 16", "B, D = 256, 16"), {})
    out = capsys.readouterr().out
    assert "acceptance" in out and "same decisions: 1.0" in out, out
    assert list(caller.iterdir()) == [], "the example wrote into the caller's directory"
    assert sorted(p.name for p in ROOT.iterdir()) == before, "the example wrote into the clone"
    import os
    assert os.path.basename(os.getcwd()).startswith("fused-mh-example-")
