"""`run`'s warm-up and burn-in (`host run --warmup --target-accept --burn-in`) on NumPy
arrays, against the program bit for bit, and the options it refuses."""

import json

import numpy as np
import pytest

import fused_mh
from conftest import problem, same_bits


def test_run_warms_up_and_burns_in_as_host_run(tmp_path, host):
    """`run(..., warmup=, target_accept=, burn_in=)` is `host run --warmup --target-accept
    --burn-in` on the CPU, bit for bit: the adapted step size, the states, the trace, the
    counts and moments of the kept steps, and the warm-up's record in summary.json."""
    x, mu, sigma = problem(48, 5, 8)
    for name, a in {"x0": x, "mu": mu, "sigma": sigma}.items():
        np.save(tmp_path / f"{name}.npy", a)
    out = host("--cpu", "--init", "x0.npy", "--mu", "mu.npy", "--sigma", "sigma.npy",
               "--warmup", 35, "--target-accept", 0.3, "--burn-in", 20, "--steps", 40,
               "--thin", 10, "--step-size", 2.5, "--seed", 13)
    r = fused_mh.run(x, mu, sigma, 2.5, 40, seed=13, thin=10, warmup=35, target_accept=0.3,
                     burn_in=20)
    summary = json.loads((out / "summary.json").read_text())
    # Step sizes are float32 (summary.json writes the shortest decimal that reads back).
    as_f32 = np.float32
    assert as_f32(r["step_size"]) == as_f32(summary["step_size"]) != as_f32(2.5)
    warmup = summary["warmup"]
    assert as_f32(r["warmup"].pop("initial_step_size")) == as_f32(warmup["initial_step_size"])
    assert r["warmup"] == {k: warmup[k] for k in ["steps", "target_accept", "last_acceptance"]}
    assert r["next_step"] == summary["next_step"] == 95
    for name in ["x", "accepted_count", "nonfinite_count", "mean", "var", "trace"]:
        assert same_bits(r[name], np.load(out / f"{name}.npy")), name


def test_run_refuses_warmup_options_it_would_ignore():
    x, mu, sigma = problem(8, 3, 1)
    with pytest.raises(TypeError, match="target_accept is the warm-up's"):
        fused_mh.run(x, mu, sigma, 0.5, 10, target_accept=0.3)
    with pytest.raises(ValueError, match="warmup = -1"):
        fused_mh.run(x, mu, sigma, 0.5, 10, warmup=-1)
    with pytest.raises(ValueError, match="target_accept = 1.5"):
        fused_mh.run(x, mu, sigma, 0.5, 10, warmup=10, target_accept=1.5)
    model = fused_mh.LinearRegression(np.ones((5, 2), np.float32), np.zeros(5, np.float32))
    with pytest.raises(TypeError, match="takes no burn_in"):
        fused_mh.run(np.zeros((4, model.dim), np.float32), model, step_size=0.1, steps=5,
                     burn_in=3)


def test_run_stops_early_as_host_run(tmp_path, host):
    """`run(..., until_rhat=, min_draws=)` stops where `host run --until-rhat --min-draws`
    stops, with the same states, counts, moments and diagnostics, bit for bit on the CPU."""
    x, mu, sigma = problem(64, 4, 21)
    for name, a in {"x0": x, "mu": mu, "sigma": sigma}.items():
        np.save(tmp_path / f"{name}.npy", a)
    out = host("--cpu", "--init", "x0.npy", "--mu", "mu.npy", "--sigma", "sigma.npy",
               "--steps", 20000, "--step-size", 1.2, "--seed", 5,
               "--until-rhat", 1.05, "--min-draws", 40, "--steps-per-launch", 20)
    r = fused_mh.run(x, mu, sigma, 1.2, 20000, seed=5, until_rhat=1.05, min_draws=40,
                     steps_per_launch=20)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["stopped_early"] and r["stopped_early"]
    assert r["steps"] == summary["steps"] < 20000 and r["next_step"] == summary["next_step"]
    for name in ["x", "accepted_count", "nonfinite_count", "mean", "var"]:
        assert same_bits(r[name], np.load(out / f"{name}.npy")), name
    d = summary["diagnostics"]
    assert r["diagnostics"]["max_nested_rhat"] == d["max_nested_rhat"] < 1.05
    assert r["diagnostics"]["draws"] == d["draws"]
    # Converged against until_rhat, as host run's verdict (not the default 1.01).
    assert r["diagnostics"]["rhat_threshold"] == d["rhat_threshold"] == 1.05
    assert r.converged == r["diagnostics"]["converged"] == summary["converged"]


def test_run_refuses_stop_options_it_cannot_keep():
    x, mu, sigma = problem(8, 3, 1)
    with pytest.raises(ValueError, match="min_draws sets when until_rhat"):
        fused_mh.run(x, mu, sigma, 0.5, 100, min_draws=10)
    with pytest.raises(ValueError, match="until_rhat = 0.9"):
        fused_mh.run(x, mu, sigma, 0.5, 100, until_rhat=0.9)
    with pytest.raises(ValueError, match="beyond steps = 100"):
        fused_mh.run(x, mu, sigma, 0.5, 100, until_rhat=1.01, min_draws=500)
    with pytest.raises(ValueError, match="thin with until_rhat"):
        fused_mh.run(x, mu, sigma, 0.5, 100, until_rhat=1.01, thin=10)
    with pytest.raises(ValueError, match="two chains"):
        fused_mh.run(x[:1], mu, sigma, 0.5, 100, until_rhat=1.01, min_draws=10)


def test_to_arviz_puts_chains_first_and_keeps_the_names():
    """ArviZ's layout is (chain, draw, ...): `run`'s trace `[draws, chains, dim]` must not come
    out as `draws` chains (the mistake `from_dict(posterior={"x": trace})` makes)."""
    pytest.importorskip("arviz_base", reason="arviz-base is not installed")
    x, mu, sigma = problem(6, 3, 4)
    r = fused_mh.run(x, mu, sigma, 0.5, 20, seed=2, thin=2)
    tree = fused_mh.to_arviz(r)
    post = tree["posterior"]
    assert post["x"].dims == ("chain", "draw", "dim") and post["x"].shape == (6, 10, 3)
    got, want = post["x"].values, r["trace"].transpose(1, 0, 2)
    assert same_bits(np.ascontiguousarray(got), np.ascontiguousarray(want))
    assert post.attrs["step_size"] == r["step_size"]
    with pytest.raises(TypeError, match="with a trace"):
        fused_mh.to_arviz(fused_mh.run(x, mu, sigma, 0.5, 20, seed=2))
    # A Posterior: one variable per parameter, its draws as they are.
    post = fused_mh.Posterior({"draws": np.arange(24, dtype=np.float32).reshape(2, 4, 3),
                               "names": ["beta[1]", "beta[2]", "sigma"], "acceptance": 0.3,
                               "step_size": 0.1, "factor": None, "nested_rhat": np.ones(3),
                               "ess": np.ones(3), "states": None, "next_step": 0},
                              1, {}, fused_mh.LinearRegression(np.ones((3, 2)), np.zeros(3)))
    tree = post.to_arviz()
    assert list(tree["posterior"].data_vars) == ["beta[1]", "beta[2]", "sigma"]
    got, want = tree["posterior"]["sigma"].values, post.draws[:, :, 2]
    assert same_bits(np.ascontiguousarray(got), np.ascontiguousarray(want))
    assert tree["posterior"]["sigma"].dims == ("chain", "draw")


@pytest.mark.parametrize("steps, converged", [(8, False), (2000, True)])
def test_superchains_are_host_runs(tmp_path, host, steps, converged):
    """`superchain_size=4` gives the nested R-hat of `host run --superchain-size 4`, to the bit
    (the diagnostics of 16 superchains of 4 chains each), for a run far from converged (8
    steps from starts 10 sigma apart) and a converged one; refused where host refuses."""
    x, mu, sigma = problem(64, 3, 6)
    x[::2] += 10 * sigma
    for name, a in {"x0": x, "mu": mu, "sigma": sigma}.items():
        np.save(tmp_path / f"{name}.npy", a)
    out = host("--cpu", "--init", "x0.npy", "--mu", "mu.npy", "--sigma", "sigma.npy",
               "--steps", steps, "--step-size", 1.1, "--seed", 9, "--superchain-size", 4)
    r = fused_mh.run(x, mu, sigma, 1.1, steps, seed=9, superchain_size=4)
    summary = json.loads((out / "summary.json").read_text())
    d, want = r["diagnostics"], summary["diagnostics"]
    assert d["converged"] is summary["converged"] is converged
    assert (d["max_nested_rhat"] > 1.01) is not converged
    assert d["superchain_size"] == want["superchain_size"] == 4
    assert d["nested_rhat"].tolist() == want["nested_rhat"] and d["ess"].tolist() == want["ess"]
    assert d["start_spread"].tolist() == want["start_spread"]
    with pytest.raises(ValueError, match="superchain_size = 5: the batch of 64"):
        fused_mh.run(x, mu, sigma, 1.1, steps, superchain_size=5)
    with pytest.raises(ValueError, match="superchain_size = 0"):
        fused_mh.run(x, mu, sigma, 1.1, steps, superchain_size=0)


class _FakeBar:
    """A stand-in for tqdm's bar: records its total, its updates and whether it was closed."""
    made = []

    def __init__(self, total, **kwargs):
        self.total, self.n, self.updates, self.closed = total, 0, [], False
        _FakeBar.made.append(self)

    def update(self, k):
        self.n += k
        self.updates.append(k)

    def close(self):
        self.closed = True


def test_progress_is_a_tqdm_bar_of_every_step(monkeypatch):
    """`progress=True` draws a tqdm bar of warm-up, burn-in and steps, moved between launches
    and closed at the end; the results are those of a run without one. Without tqdm
    `progress=True` is an ImportError naming it, and the default shows nothing."""
    import sys
    import types
    x, mu, sigma = problem(16, 3, 3)
    plain = fused_mh.run(x, mu, sigma, 0.8, 60, seed=4, warmup=25, burn_in=10)
    monkeypatch.setitem(sys.modules, "tqdm", types.SimpleNamespace(tqdm=_FakeBar))
    _FakeBar.made.clear()
    shown = fused_mh.run(x, mu, sigma, 0.8, 60, seed=4, warmup=25, burn_in=10, progress=True)
    (bar,) = _FakeBar.made
    assert bar.total == 95 and bar.n == 95 and bar.closed and all(k > 0 for k in bar.updates)
    assert same_bits(shown["x"], plain["x"]) and shown["step_size"] == plain["step_size"]
    # Not a terminal (pytest captures standard error): the default draws no bar.
    fused_mh.run(x, mu, sigma, 0.8, 60, seed=4)
    assert len(_FakeBar.made) == 1
    monkeypatch.setitem(sys.modules, "tqdm", None)
    with pytest.raises(ImportError, match="needs tqdm"):
        fused_mh.run(x, mu, sigma, 0.8, 60, progress=True)
    with pytest.raises(TypeError, match="progress = 'yes'"):
        fused_mh.run(x, mu, sigma, 0.8, 60, progress="yes")


def test_a_run_resumes_from_its_result():
    """A run continued from a result's `x` and `next_step` is the longer run, bit for bit (the
    counter scheme): the returned state is all a resume needs."""
    x, mu, sigma = problem(24, 4, 11)
    first = fused_mh.run(x, mu, sigma, 0.9, 30, seed=6, warmup=20, burn_in=5)
    more = fused_mh.run(first["x"], mu, sigma, first["step_size"], 30, seed=6,
                        first_step=first["next_step"])
    whole = fused_mh.run(x, mu, sigma, 0.9, 60, seed=6, warmup=20, burn_in=5)
    assert same_bits(more["x"], whole["x"]) and more["next_step"] == whole["next_step"] == 85
    total = first["accepted_count"] + more["accepted_count"]
    assert np.array_equal(total, whole["accepted_count"])


def test_summary_agrees_with_numpy_on_the_trace(monkeypatch):
    """`summary`'s mean and sd per dimension equal NumPy's over every state of the trace
    (thin = 1: all of them; float64 sums of the same float32 states in another order, so
    1e-9 relative), and its R-hat and ESS are the run's diagnostics; text without pandas."""
    import sys
    x, mu, sigma = problem(32, 3, 12)
    r = fused_mh.run(x, mu, sigma, 1.0, 40, seed=3, thin=1)
    states = r["trace"].astype(np.float64).reshape(-1, 3)
    table = fused_mh.summary(r)
    rows = table if isinstance(table, str) else table.to_numpy()
    if not isinstance(table, str):
        np.testing.assert_allclose(rows[:, 0], states.mean(axis=0), rtol=1e-9)
        np.testing.assert_allclose(rows[:, 1], states.std(axis=0), rtol=1e-9)
        assert np.array_equal(rows[:, 2], r["diagnostics"]["nested_rhat"])
    monkeypatch.setitem(sys.modules, "pandas", None)
    text = fused_mh.summary(r)
    lines = text.splitlines()
    assert lines[0].split() == ["dim", "mean", "sd", "nested_rhat", "ess"] and len(lines) == 4
    got = np.array([[float(v) for v in line.split()[1:3]] for line in lines[1:]])
    np.testing.assert_allclose(got[:, 0], states.mean(axis=0), rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(got[:, 1], states.std(axis=0), rtol=1e-4)
    with pytest.raises(TypeError, match="run result"):
        fused_mh.summary({"x": x})
