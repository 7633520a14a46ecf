"""`host sample`'s summary.json against estimators this project did not write, on the run's own
draws.npy: NumPy for the mean, sd and quantiles, arviz-stats for R-hat and ESS.

The run is the dense Gaussian model (a correlated 3-dimensional normal whose answer is known)
on the CPU, superchains of one chain, so that the summary's nested R-hat is plain split R-hat:
ours is `sqrt(1 + var / W)` over half-chains of `N` draws, ArviZ's `sqrt((N - 1) / N + var /
W)`, so `ours^2 - 1 / N` equals ArviZ's squared, to about 1e-12 relative (both float64 from the
same float32 draws; the tolerance is 1e-9, as in test_diagnostics.py). The ESS estimators differ
(ours from the spread of the half-chain means, ArviZ's from autocorrelations); ours has a
relative standard error of sqrt(2 / (2K - 1)), 4.4 % for K = 512 half-chains, so the two must
agree within 20 % (4.5 standard errors).
"""

import json
import subprocess

import numpy as np
import pytest

from conftest import host_program

az = pytest.importorskip("arviz_stats.base", reason="arviz-stats is not installed")
stats = az.array_stats

MEAN = np.array([1.0, -2.0, 0.5], np.float32)
# Sigma = L L^T: correlations of 0.8 and -0.7 between the coordinates.
COV_FACTOR = np.array([[1.0, 0.0, 0.0], [0.8, 0.6, 0.0], [-0.5, 0.3, 0.5]], np.float32)


def sample(tmp_path, *args):
    """`host sample --cpu --model dense-gaussian ARGS --out out`: (summary, draws[chain, draw,
    param])."""
    program = host_program()
    if program is None:
        pytest.skip("no host program built (cargo build -p host, or set FUSED_MH_HOST)")
    np.save(tmp_path / "mean.npy", MEAN)
    np.save(tmp_path / "factor.npy", COV_FACTOR)
    cmd = [str(program), "sample", "--cpu", "--model", "dense-gaussian",
           "--mean", str(tmp_path / "mean.npy"), "--cov-factor", str(tmp_path / "factor.npy"),
           *map(str, args), "--out", str(tmp_path / "out")]
    done = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    return summary, np.load(tmp_path / "out" / "draws.npy")


def test_summary_agrees_with_numpy_and_arviz(tmp_path):
    """256 chains, 500 warm-up steps and 1000 kept draws each: every statistic of every
    parameter against NumPy and arviz-stats on draws.npy, and the answer against the exact
    mean and sd (within 0.1 sd: the Monte Carlo error of the mean is sd / sqrt(ESS), under
    0.01 sd at the ESS of these runs, over 10^4)."""
    summary, draws = sample(tmp_path, "--chains", 256, "--warmup", 500, "--steps", 1000,
                            "--thin", 1, "--superchain-size", 1, "--seed", 7)
    chains, kept, dim = draws.shape
    assert (chains, kept, dim) == (256, 1000, 3)
    assert summary["names"] == ["x[1]", "x[2]", "x[3]"]
    exact_sd = np.sqrt(np.diag(COV_FACTOR.astype(np.float64) @ COV_FACTOR.T))
    by_dim = np.ascontiguousarray(draws.transpose(2, 0, 1), dtype=np.float64)
    rhat_arviz = stats.rhat(by_dim, method="split")
    ess_arviz = stats.ess(by_dim, method="mean")
    half = kept // 2
    for d, name in enumerate(summary["names"]):
        ours = summary["params"][name]
        v = by_dim[d].ravel()
        np.testing.assert_allclose(ours["mean"], v.mean(), rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(ours["sd"], v.std(ddof=1), rtol=1e-12)
        for p, key in [(0.05, "q05"), (0.5, "q50"), (0.95, "q95")]:
            assert ours[key] == np.quantile(v, p, method="nearest"), key
        np.testing.assert_allclose(ours["nested_rhat"] ** 2 - 1 / half, rhat_arviz[d] ** 2,
                                   rtol=1e-9)
        np.testing.assert_allclose(ours["ess"], ess_arviz[d], rtol=0.2)
        assert abs(ours["mean"] - MEAN[d]) < 0.1 * exact_sd[d]
        assert abs(ours["sd"] / exact_sd[d] - 1) < 0.1
    assert summary["converged"] is (max(s["nested_rhat"] for s in summary["params"].values())
                                    < 1.01)

