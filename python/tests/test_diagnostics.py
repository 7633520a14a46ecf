"""The convergence diagnostics against arviz-stats, on the run's own trace (`host run --cpu
--thin 1`, every draw), and the Python `run`'s diagnostics against the CLI's.

Ours are split R-hat and split nested R-hat from streamed moments (`fused_mh::diagnostics`);
arviz-stats computes from the draws. The formulas are the same up to one factor: ArviZ's
split R-hat is `sqrt((N - 1) / N + var / W)` over half-chains of `N` draws, ours
`sqrt(1 + var / W)`, so `ours^2 - 1 / N` equals ArviZ's squared. Both work in float64 from the
same float32 states (ours by Welford's update and a merge of the halves, ArviZ in two passes),
so the two agree to about 1e-12 relative: 1e-9 is the tolerance. The ESS estimators differ (ours
from the spread of the half-chain means, ArviZ's from autocorrelations): both estimate the same
quantity, and ours has a relative standard error of sqrt(2 / (2K - 1)), 4.4 % for 512 chains,
so they must agree within 20 % (4.5 standard errors) once the chains have mixed; before, both
fall toward the number of (split) chains.
"""

import json
import subprocess

import numpy as np
import pytest

from conftest import host_program

az = pytest.importorskip("arviz_stats.base", reason="arviz-stats is not installed")
stats = az.array_stats

import fused_mh  # noqa: E402


def host_run(tmp_path, name, *args):
    """`host run --cpu ARGS --thin 1 --out NAME`: (summary, trace[chain, draw, dim], stdout,
    exit code)."""
    program = host_program()
    if program is None:
        pytest.skip("no host program built (cargo build -p host, or set FUSED_MH_HOST)")
    out = tmp_path / name
    cmd = [str(program), "run", "--cpu", *map(str, args), "--thin", "1", "--out", str(out)]
    done = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True)
    assert done.returncode in (0, 3), done.stderr
    summary = json.loads((out / "summary.json").read_text())
    trace = np.load(out / "trace.npy").transpose(1, 0, 2)  # [chain, draw, dim]
    return summary, trace, done.stdout, done.returncode


def by_dimension(trace, draws):
    """The first `draws` draws as ArviZ takes them: [dim, chain, draw], float64."""
    return np.ascontiguousarray(trace[:, :draws, :].transpose(2, 0, 1), dtype=np.float64)


def check_split_rhat(summary, trace):
    d = summary["diagnostics"]
    ours = np.array(d["nested_rhat"])
    arviz = stats.rhat(by_dimension(trace, d["draws"]), method="split")
    half = d["draws"] // 2
    np.testing.assert_allclose(ours**2 - 1 / half, arviz**2, rtol=1e-9)
    return ours, arviz


def test_converged_run_agrees_with_arviz(tmp_path):
    """512 chains started from the target itself, 5000 draws each (R-hat measures the Monte
    Carlo error against the target's spread, ~ autocorrelation time / draws: 1000 draws of
    random-walk Metropolis in 4 dimensions are not enough for 1.01): R-hat below 1.01 by
    both, converged, and the ESS within 20 % of ArviZ's."""
    summary, trace, _, code = host_run(
        tmp_path, "ok", "--batch", 512, "--dim", 4, "--sigma", 1.5, "--init-dist", "normal",
        "--steps", 5000, "--seed", 2,
    )
    ours, arviz = check_split_rhat(summary, trace)
    assert code == 0 and summary["converged"] is True
    assert ours.max() < 1.01 and arviz.max() < 1.01
    ess_arviz = stats.ess(by_dimension(trace, summary["diagnostics"]["draws"]), method="mean")
    np.testing.assert_allclose(summary["diagnostics"]["ess"], ess_arviz, rtol=0.2)


def test_readme_one_point_run_is_not_converged(tmp_path):
    """The README's run: every chain at mu + 10 sigma, no burn-in. Our split R-hat is above
    1.01 (and equals ArviZ's formula), ArviZ's rank-normalized R-hat agrees it is not
    converged, the blind-start warning is printed, and the run is never called converged."""
    mu = np.linspace(-1, 1, 16, dtype=np.float32)
    sigma = np.linspace(0.5, 2, 16, dtype=np.float32)
    np.save(tmp_path / "mu.npy", mu)
    np.save(tmp_path / "sigma.npy", sigma)
    np.save(tmp_path / "x0.npy", np.tile(mu + 10 * sigma, (512, 1)))
    summary, trace, stdout, _ = host_run(
        tmp_path, "readme", "--init", "x0.npy", "--mu", "mu.npy", "--sigma", "sigma.npy",
        "--steps", 5000, "--seed", 1,
    )
    ours, _ = check_split_rhat(summary, trace)
    rank = stats.rhat(by_dimension(trace, 5000), method="rank")
    assert ours.max() > 1.01 and rank.max() > 1.01
    assert summary["converged"] is False
    assert summary["diagnostics"]["blind_dimensions"]
    assert "NOT converged" in stdout and "cannot detect non-convergence" in stdout
    # The table shows the worst dimension first.
    first_row = stdout.split("R-hat        ESS\n")[1].split()[0]
    assert int(first_row) == int(np.argmax(ours))


def test_superchains_started_apart_agree_with_arviz_nested(tmp_path):
    """Superchains of 8 started 4 sigma apart: our split nested R-hat equals ArviZ's
    `rhat_nested` (method "identity": the formula alone) on the split chains, each half of
    each superchain a superchain of its own; early it is far above 1.01, later below."""
    for steps, converged in [(40, False), (4000, True)]:
        summary, trace, _, _ = host_run(
            tmp_path, f"super{steps}", "--batch", 256, "--dim", 3, "--superchain-size", 8,
            "--init-dist", "overdispersed", "--steps", steps, "--seed", 4,
        )
        d = summary["diagnostics"]
        half = d["draws"] // 2
        draws = by_dimension(trace, d["draws"])
        split = np.concatenate([draws[:, :, :half], draws[:, :, half:]], axis=1)
        superchains = np.arange(2 * 256) // 8  # halves 0..255 first, then 256..511
        arviz = stats.rhat_nested(split, superchain_ids=superchains, method="identity")
        np.testing.assert_allclose(d["nested_rhat"], arviz, rtol=1e-9)
        assert summary["converged"] is converged, summary


def test_slow_wide_dimensions_are_not_converged(tmp_path):
    """Sigmas spanning 100x without preconditioning: the step size fits the narrowest
    dimension and the widest barely moves from its overdispersed start. Both R-hats see it,
    and both ESS estimates of that dimension fall to about the number of split chains (512),
    a thousandth of the 512000 draws."""
    np.save(tmp_path / "sigma.npy", np.array([0.1, 1.0, 10.0], dtype=np.float32))
    summary, trace, stdout, _ = host_run(
        tmp_path, "wide", "--batch", 256, "--dim", 3, "--sigma", "sigma.npy",
        "--init-dist", "overdispersed", "--steps", 2000, "--seed", 5,
    )
    ours, arviz = check_split_rhat(summary, trace)
    assert ours[2] > 1.1 and arviz[2] > 1.1 and summary["converged"] is False
    ess_arviz = stats.ess(by_dimension(trace, 2000), method="mean")
    assert summary["diagnostics"]["ess"][2] < 1.1 * 512 and ess_arviz[2] < 1.1 * 512
    assert "NOT converged" in stdout


def test_python_run_diagnostics_equal_the_cli(tmp_path):
    """`fused_mh.run` returns the diagnostics `host run --cpu` records, to the bit."""
    r = np.random.default_rng(3)
    x = r.standard_normal((64, 5)).astype(np.float32) * 3
    np.save(tmp_path / "x0.npy", x)
    summary, _, _, _ = host_run(
        tmp_path, "cli", "--init", "x0.npy", "--steps", 200, "--step-size", 0.8, "--seed", 7
    )
    out = fused_mh.run(x, np.zeros(5, np.float32), np.ones(5, np.float32), 0.8, 200, seed=7)
    d, want = out["diagnostics"], summary["diagnostics"]
    assert np.array_equal(d["nested_rhat"], np.array(want["nested_rhat"]))
    assert np.array_equal(d["ess"], np.array(want["ess"]))
    assert d["draws"] == want["draws"] == 200
    assert d["converged"] == summary["converged"]
    # Summed by all cores in an order that varies: equal to rounding.
    np.testing.assert_allclose(d["start_spread"], want["start_spread"], rtol=1e-12)
