"""Targets other than the Gaussian from Python: the Student-t's marginals on the CPU reference
against SciPy's t distribution, the GPU path against the CPU's, and the checks of the target's
name and parameters."""

import numpy as np
import pytest
from scipy import stats

import fused_mh

MU = np.array([0.5, -1.0, 2.0], np.float32)
SIGMA = np.array([1.0, 0.7, 1.5], np.float32)
DF = np.array([3.0, 6.0, 1.5], np.float32)


def starts(batch, seed=0):
    rng = np.random.default_rng(seed)
    return (MU + SIGMA * rng.standard_normal((batch, 3))).astype(np.float32)


def test_student_t_chains_reach_the_exact_marginals():
    # 8192 independent chains, 800 steps of 1.2: each chain's final state is one draw. KS per
    # dimension against scipy.stats.t at alpha 1e-4 (critical 0.025 for 8192 draws; a Gaussian
    # in place of the t3 is 0.05 away in CDF and fails, a t6 in place of the t3 0.03).
    out = fused_mh.run(starts(8192), MU, SIGMA, 1.2, 800, seed=3, target="student-t", df=DF)
    for d in range(3):
        t = stats.t(df=float(DF[d]), loc=float(MU[d]), scale=float(SIGMA[d]))
        result = stats.kstest(out["x"][:, d], t.cdf)
        assert result.pvalue > 1e-4, (d, result)


def test_a_scalar_df_is_every_dimension_s():
    x = starts(64)
    a = fused_mh.step(x, MU, SIGMA, 0.5, seed=1, target="student-t", df=4.0)
    b = fused_mh.step(x, MU, SIGMA, 0.5, seed=1, target="student-t", df=np.full(3, 4.0))
    assert np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1])
    # And the Student-t is not the Gaussian: some decisions differ on the same numbers.
    g = fused_mh.step(x, MU, SIGMA, 0.5, seed=1)
    assert not np.array_equal(a[1], g[1])


@pytest.mark.parametrize(
    "kwargs, error, message",
    [
        ({"target": "cauchy"}, ValueError, "unknown target \"cauchy\": the targets are gaussian"),
        ({"target": "student-t"}, TypeError, "the target student-t needs df"),
        ({"df": 3.0}, TypeError, "df: not a parameter of the target gaussian"),
        ({"target": "student-t", "df": 0.0}, ValueError, "df[0] = 0 must be > 0"),
        ({"target": "student-t", "df": [3.0, 4.0]}, ValueError, "df has 2 elements, mu 3"),
    ],
)
def test_bad_targets_are_refused_by_name(kwargs, error, message):
    with pytest.raises(error) as e:
        fused_mh.step(starts(4), MU, SIGMA, 0.5, **kwargs)
    assert message in str(e.value)


def test_the_gpu_steps_the_student_t_as_the_cpu_does():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    x = starts(4096, seed=5)
    kwargs = {"seed": 9, "step": 2, "target": "student-t", "df": DF}
    x_cpu, acc_cpu = fused_mh.step(x, MU, SIGMA, 0.8, **kwargs)
    x_gpu, acc_gpu = fused_mh.step(torch.from_numpy(x).cuda(), MU, SIGMA, 0.8, **kwargs)
    # The GPU's normals are within about 5e-6 of the CPU's (sin/cos/sqrt on the SFU), so a
    # decision within that of its threshold may differ: at most a few in 4096.
    flips = int((acc_gpu.cpu().numpy() != acc_cpu).sum())
    assert flips <= 4
    same = acc_gpu.cpu().numpy() == acc_cpu
    np.testing.assert_allclose(x_gpu.cpu().numpy()[same], x_cpu[same], rtol=1e-5, atol=1e-5)
