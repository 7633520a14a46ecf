"""`run`'s result object, its diagonal preconditioning and `initial_states`, on NumPy arrays
against `host run --cpu` bit for bit, and their refusals."""

import json
import subprocess

import numpy as np
import pytest

import fused_mh
from conftest import host_program, problem, same_bits


def save(folder, **arrays):
    for name, a in arrays.items():
        np.save(folder / f"{name}.npy", a)


def test_the_result_is_a_dict_with_attributes_a_table_and_arviz_draws():
    x, mu, sigma = problem(40, 3, 4)
    r = fused_mh.run(x, mu, sigma, 1.0, 60, seed=2, thin=3)
    assert isinstance(r, fused_mh.RunResult) and isinstance(r, dict)
    assert r.x is r["x"] and r.steps == 60 and "accepted_count" in dir(r)
    with pytest.raises(AttributeError, match="no 'nope'"):
        r.nope
    # The acceptance rate over the kept steps: the counts' sum over chains times steps, and the
    # diagnostics' own figure (host run's summary.json) the same number.
    want = r.accepted_count.sum() / (40 * 60)
    assert r.acceptance_rate == pytest.approx(want, rel=1e-15)
    assert r.acceptance_rate == pytest.approx(r.diagnostics["acceptance_rate"], rel=1e-12)
    assert r.converged == r.diagnostics["converged"]
    assert r.draws.shape == (40, 20, 3) and np.array_equal(r.draws[7, 5], r.trace[5, 7])
    assert "40 chains of dim 3, 60 steps" in repr(r)
    table = r.summary()
    text = table if isinstance(table, str) else table.to_string()
    assert "nested_rhat" in text
    no_trace = fused_mh.run(x, mu, sigma, 1.0, 10, seed=2)
    with pytest.raises(ValueError, match="thin > 0"):
        no_trace.draws


def test_one_chain_has_no_verdict():
    x, mu, sigma = problem(1, 3, 4)
    r = fused_mh.run(x, mu, sigma, 1.0, 20)
    assert r.diagnostics is None and r.converged is False


def test_run_preconditions_as_host_run(tmp_path, host):
    """`run(..., warmup=, precondition=True)` is `host run --warmup --precondition` on the CPU,
    bit for bit: the scales, the step size, the states, counts and moments; and a run that
    continues it with its `step_size`, `scales` and `next_step` is `host run --resume`."""
    x, mu, sigma = problem(64, 4, 31)
    # Dimensions of very different widths: the scales must move apart to fit them.
    sigma = (sigma * np.array([0.1, 1, 5, 20], np.float32)).astype(np.float32)
    x = (mu + 1.5 * sigma * np.random.default_rng(3).standard_normal((64, 4))).astype(np.float32)
    save(tmp_path, x0=x, mu=mu, sigma=sigma)
    out = host("--cpu", "--init", "x0.npy", "--mu", "mu.npy", "--sigma", "sigma.npy",
               "--warmup", 200, "--precondition", "--steps", 50, "--step-size", 0.5,
               "--seed", 8)
    r = fused_mh.run(x, mu, sigma, 0.5, 50, seed=8, warmup=200, precondition=True)
    summary = json.loads((out / "summary.json").read_text())
    assert same_bits(r.scales, np.array(summary["scales"], np.float32))
    assert r.scales.max() / r.scales.min() > 10, r.scales
    assert np.float32(r.step_size) == np.float32(summary["step_size"])
    for name in ["x", "accepted_count", "nonfinite_count", "mean", "var"]:
        assert same_bits(r[name], np.load(out / f"{name}.npy")), name
    resumed = tmp_path / "resumed"
    done = subprocess.run([str(host_program()), "run", "--cpu", "--resume", str(out),
                           "--steps", "30", "--out", str(resumed)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    more = fused_mh.run(r.x, mu, sigma, r.step_size, 30, seed=8, first_step=r.next_step,
                        scales=r.scales)
    assert same_bits(more.scales, r.scales)
    for name in ["x", "accepted_count", "mean", "var"]:
        assert same_bits(more[name], np.load(resumed / f"{name}.npy")), name


def test_a_warm_up_adapts_the_step_size_to_given_scales():
    """Given scales (no preconditioning), the warm-up runs with them too: proposals 10 times
    wider per unit step size leave an adapted step size near a tenth of the one without (the
    same acceptance rate; within 30 %, the adaptation's noise over 300 steps of 256 chains),
    and the result keeps the scales."""
    x, mu, sigma = problem(256, 4, 10)
    plain = fused_mh.run(x, mu, sigma, 0.5, 20, seed=3, warmup=300)
    wide = fused_mh.run(x, mu, sigma, 0.5, 20, seed=3, warmup=300,
                        scales=np.full(4, 10, np.float32))
    assert wide.step_size * 10 == pytest.approx(plain.step_size, rel=0.3)
    assert same_bits(wide.scales, np.full(4, 10, np.float32))


@pytest.mark.parametrize("apart", [0.0, 20.0])
def test_the_pooled_variance_the_scales_adapt_to_is_numpys(apart):
    """The pooled variance a preconditioning warm-up adapts to, per dimension, is
    mean(within-chain variances, ddof 1) + var(chain means, ddof 1) of the draws (the module
    doc of `fused_mh::diagnostics`), computed here by NumPy from the full trace: for chains
    mixed on the target, and for chains that start 20 sigma apart and have not met after 30
    steps (the between-chain term then dominates). Both in float64 from float32 states: to
    1e-10 relative (the library's running moments against NumPy's two passes)."""
    x, mu, sigma = problem(64, 3, 9)
    x = x + apart * sigma * np.arange(64, dtype=np.float32)[:, None] / 64
    out = fused_mh._native.run(np.ascontiguousarray(x, np.float32), "gaussian", [mu, sigma],
                               0.8, 4, 0, 30, thin=1, diagnostics=False, pooled_variance=True)
    draws = out["trace"].astype(np.float64)  # [steps, chains, dim]
    within = draws.var(axis=0, ddof=1).mean(axis=0)
    between = draws.mean(axis=0).var(axis=0, ddof=1)
    np.testing.assert_allclose(out["pooled_variance"], within + between, rtol=1e-10)
    if apart:
        assert (between > 10 * within).all()


@pytest.mark.parametrize("spread", ["normal", "overdispersed", "zeros"])
def test_initial_states_are_host_runs(tmp_path, host, spread):
    """`initial_states(B, mu, sigma, spread, seed, superchain_size)` and a run from them are
    `host run --batch --dim --init-dist --seed --superchain-size`, bit for bit."""
    _, mu, sigma = problem(1, 5, 12)
    save(tmp_path, mu=mu, sigma=sigma)
    out = host("--cpu", "--batch", 24, "--dim", 5, "--init-dist", spread, "--mu", "mu.npy",
               "--sigma", "sigma.npy", "--superchain-size", 4, "--steps", 20,
               "--step-size", 0.7, "--seed", 19)
    x0 = fused_mh.initial_states(24, mu, sigma, spread, seed=19, superchain_size=4)
    assert x0.shape == (24, 5) and x0.dtype == np.float32
    assert np.array_equal(x0[1], x0[0]) and np.array_equal(x0[7], x0[4])
    r = fused_mh.run(x0, mu, sigma, 0.7, 20, seed=19, superchain_size=4)
    for name in ["x", "accepted_count", "mean", "var"]:
        assert same_bits(r[name], np.load(out / f"{name}.npy")), name
    summary = json.loads((out / "summary.json").read_text())["diagnostics"]
    assert r.diagnostics["max_nested_rhat"] == summary["max_nested_rhat"]


def test_overdispersed_starts_are_four_times_as_wide():
    mu, sigma = np.array([1.0, -3.0], np.float32), np.array([0.5, 2.0], np.float32)
    x = fused_mh.initial_states(20000, mu, sigma, "overdispersed", seed=1)
    # 20000 draws: the sample sd within 4 % of 4 sigma (its standard error is 0.5 %).
    np.testing.assert_allclose(x.std(axis=0), 4 * sigma, rtol=0.04)
    np.testing.assert_allclose(x.mean(axis=0), mu, atol=0.2)


def test_bad_preconditioning_and_starts_raise():
    x, mu, sigma = problem(8, 3, 1)
    with pytest.raises(TypeError, match="precondition adapts during the warm-up"):
        fused_mh.run(x, mu, sigma, 0.5, 10, precondition=True)
    with pytest.raises(TypeError, match="one or the other"):
        fused_mh.run(x, mu, sigma, 0.5, 10, warmup=20, precondition=True, scales=np.ones(3))
    with pytest.raises(ValueError, match="scales has 2 elements, the chains' dim is 3"):
        fused_mh.run(x, mu, sigma, 0.5, 10, scales=np.ones(2, np.float32))
    with pytest.raises(ValueError, match="scale"):
        fused_mh.run(x, mu, sigma, 0.5, 10, scales=np.array([1, 0, 1], np.float32))
    with pytest.raises(ValueError, match='spread = "wide"'):
        fused_mh.initial_states(8, mu, sigma, "wide")
    with pytest.raises(ValueError, match="superchain_size = 3: must divide the batch of 8 chains"):
        fused_mh.initial_states(8, mu, sigma, superchain_size=3)
    with pytest.raises(ValueError, match="batch = -1"):
        fused_mh.initial_states(-1, mu, sigma)
