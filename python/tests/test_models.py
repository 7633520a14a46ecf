"""`fused_mh.sample` on models with data (the CPU reference): the same draws and diagnostics as
`host sample --cpu` with the same options (to the bit: one library function builds and runs
both), its summary against NumPy on its own draws, the exact answer of a dense Gaussian, and
every bad input refused naming it."""

import json
import subprocess

import numpy as np
import pytest

import fused_mh
from conftest import host_program, readme_example

RUN = {"chains": 64, "warmup": 200, "steps": 200, "thin": 2, "seed": 3}


def regression_data(logistic):
    """200 rows: an intercept and two covariates, outcomes from a fixed rule."""
    rng = np.random.default_rng(5)
    x = np.column_stack([np.ones(200), rng.uniform(-1, 1, (200, 2))])
    eta = x @ np.array([0.5, -1.0, 2.0])
    y = (rng.uniform(size=200) < 1 / (1 + np.exp(-eta))) if logistic else eta + rng.normal(
        0, 0.3, 200)
    return x, y.astype(np.float64)


def host_sample(tmp_path, flags, arrays):
    """`host sample --cpu FLAGS` with `arrays` written as float32 `.npy` files: (summary,
    draws)."""
    program = host_program()
    if program is None:
        pytest.skip("no host program built (cargo build -p host, or set FUSED_MH_HOST)")
    files = []
    for name, a in arrays.items():
        np.save(tmp_path / f"{name}.npy", np.asarray(a, np.float32))
        files.append(f"--{name.replace('_', '-')}={tmp_path / f'{name}.npy'}")
    run = [f"--{k}={v}" for k, v in RUN.items()]
    cmd = [str(program), "sample", "--cpu", *flags, *files, *run, f"--out={tmp_path / 'out'}"]
    done = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    return summary, np.load(tmp_path / "out" / "draws.npy")


@pytest.mark.parametrize("logistic", [False, True])
def test_sample_equals_host_sample(tmp_path, logistic):
    """The draws, acceptance, step size, factor, nested R-hat and ESS equal `host sample`'s
    exactly; the summary's statistics equal summary.json's within 1e-12 relative (NumPy sums
    in another order than the program)."""
    x, y = regression_data(logistic)
    if logistic:
        model = fused_mh.LogisticRegression(x, y, beta_prior="normal:0,5")
        flags = ["--model=logreg", "--beta-prior=normal:0,5"]
    else:
        model = fused_mh.LinearRegression(x, y, beta_prior=["flat", "normal:0,10",
                                                            "student-t:3,0,2"],
                                          sigma_prior="half-cauchy:2.5")
        flags = ["--model=linreg", "--beta-prior=flat;normal:0,10;student-t:3,0,2",
                 "--sigma-prior=half-cauchy:2.5"]
    post = fused_mh.sample(model, device="cpu", **RUN)
    summary, draws = host_sample(tmp_path, flags, {"x": x, "y": y})
    assert post.draws.shape == draws.shape == (64, 100, 3 if logistic else 4)
    np.testing.assert_array_equal(post.draws, draws)
    assert post.names == summary["names"]
    assert post.acceptance == summary["acceptance"]
    assert post.step_size == np.float32(summary["step_size"])
    np.testing.assert_array_equal(post.factor.ravel(), np.float32(summary["factor"]))
    ours = post.summary()
    for name in post.names:
        want = summary["params"][name]
        assert ours[name]["nested_rhat"] == want["nested_rhat"]
        assert ours[name]["ess"] == want["ess"]
        for key in ["mean", "sd", "q05", "q50", "q95"]:
            assert ours[name][key] == pytest.approx(want[key], rel=1e-12, abs=1e-12)


def test_summary_is_numpy_on_the_draws_and_the_answer_is_exact():
    """A dense Gaussian N(m, L L^T): the summary is NumPy's mean, sd and quantiles of
    `post[name]`, and the means are within 0.1 sd of m (the Monte Carlo error of a mean is
    sd / sqrt(ESS), under 0.02 sd at the ESS of this run, over 2500)."""
    mean = np.array([1.0, -2.0, 0.5])
    factor = np.array([[1.0, 0.0, 0.0], [0.8, 0.6, 0.0], [-0.5, 0.3, 0.5]])
    post = fused_mh.sample(fused_mh.DenseGaussian(mean, cov_factor=factor), device="cpu",
                           chains=256, warmup=500, steps=500, thin=5, seed=1)
    assert post.names == ["x[1]", "x[2]", "x[3]"]
    exact_sd = np.sqrt(np.diag(factor @ factor.T))
    for d, name in enumerate(post.names):
        v = post[name].astype(np.float64).ravel()
        s = post.summary()[name]
        assert s["mean"] == pytest.approx(v.mean(), rel=1e-12)
        assert s["sd"] == pytest.approx(v.std(ddof=1), rel=1e-12)
        assert s["q50"] == np.sort(v)[round(0.5 * (len(v) - 1))]
        assert s["ess"] > 2500
        assert abs(s["mean"] - mean[d]) < 0.1 * exact_sd[d]
    assert post.converged


@pytest.mark.parametrize("make, name", [
    (lambda x, y: fused_mh.LinearRegression(x, y, beta_prior="normal:0"), "beta_prior"),
    (lambda x, y: fused_mh.LinearRegression(x, y, beta_prior=["flat"] * 2), "beta_prior"),
    (lambda x, y: fused_mh.LinearRegression(x, y, sigma_prior="half-normal:-1"), "sigma_prior"),
    (lambda x, y: fused_mh.LinearRegression(x, y[:-1]), "y"),
    (lambda x, y: fused_mh.LogisticRegression(x, y + 0.5), "y"),
    (lambda x, y: fused_mh.LinearRegression(np.where(x > 0.9, np.nan, x), y), "x"),
    (lambda x, y: fused_mh.HierarchicalNormal(y[:8], -np.ones(8)), "se"),
    (lambda x, y: fused_mh.HierarchicalNormal(y[:8], np.ones(8), tau_prior="cauchy"),
     "tau_prior"),
    (lambda x, y: fused_mh.DenseGaussian(np.zeros(3), prec_factor=np.zeros((3, 3))),
     "prec_factor"),
])
def test_bad_inputs_are_refused_naming_them(make, name):
    x, y = regression_data(False)
    with pytest.raises(ValueError, match=name):
        fused_mh.sample(make(x, y), device="cpu", **RUN)


def test_bad_settings_are_refused():
    x, y = regression_data(True)
    model = fused_mh.LogisticRegression(x, y)
    with pytest.raises(ValueError, match="precondition"):
        fused_mh.sample(model, device="cpu", precondition="full", **RUN)
    with pytest.raises(ValueError, match="device"):
        fused_mh.sample(model, device="tpu", **RUN)
    with pytest.raises(ValueError):
        fused_mh.sample(model, device="cpu", **{**RUN, "chains": 0})
    with pytest.raises(TypeError, match="x"):
        fused_mh.LogisticRegression(np.array([["a"]]), y)


def test_the_readme_model_example_runs(capsys):
    """The README's regression example on the CPU reference at 512 chains (the README's 8192 on
    the GPU is tests/test_gpu.py's): the names and shape it prints, converged, and sigma's mean
    within 0.05 of the 0.5 the data were drawn with (its posterior sd is about 0.016)."""
    example = readme_example("fused_mh.LinearRegression(X, y")
    assert "chains=8192)" in example
    exec(example.replace("chains=8192)", "chains=512, device=\"cpu\")"), {})
    printed = capsys.readouterr().out.splitlines()
    assert printed[0] == "['beta[1]', 'beta[2]', 'sigma'] (512, 100, 3) True"
    assert abs(eval(printed[1])["mean"] - 0.5) < 0.05


def test_resume_continues_the_run():
    """A run of 40 steps resumed for 60 gives the draws and final states of one run of 100 (to
    the bit: the proposal is frozen after the warm-up, and each step's random numbers depend on
    its counter alone); a resume of a resume goes on; what would make it another run raises."""
    x, y = regression_data(True)
    model = fused_mh.LogisticRegression(x, y, beta_prior="normal:0,5")
    run = dict(chains=64, warmup=100, thin=2, seed=3, superchain_size=8, device="cpu")
    first = fused_mh.sample(model, steps=40, **run)
    more = fused_mh.sample(model, steps=60, thin=2, device="cpu", resume=first)
    whole = fused_mh.sample(model, steps=100, **run)
    assert more.draws.shape == (64, 30, 3) and more.next_step == 200
    assert np.array_equal(np.concatenate([first.draws, more.draws], axis=1), whole.draws)
    assert np.array_equal(more.states, whole.states)
    assert more.step_size == whole.step_size and np.array_equal(more.factor, whole.factor)
    again = fused_mh.sample(model, steps=20, thin=2, device="cpu", resume=more)
    assert again.next_step == 220 and again.draws.shape == (64, 10, 3)
    with pytest.raises(ValueError, match="chains"):
        fused_mh.sample(model, chains=32, device="cpu", resume=first)
    with pytest.raises(ValueError, match="warmup"):
        fused_mh.sample(model, warmup=100, device="cpu", resume=first)
    other = fused_mh.LogisticRegression(x, y, beta_prior="normal:0,2")
    with pytest.raises(ValueError, match="not the one the resumed run sampled"):
        fused_mh.sample(other, device="cpu", resume=first)
    with pytest.raises(TypeError, match="Posterior"):
        fused_mh.sample(model, device="cpu", resume={"states": first.states})


def test_model_objects_in_run_and_model():
    """`run(x, model, ...)` and `Model(model)` step a model's chains as a resumed `sample` does
    (a run without preconditioning has the identity factor, so its continuation is the plain
    random walk they take): the same trace, final states and accepted counts, to the bit, in
    one call of 60 steps or in 60 calls of one."""
    x, y = regression_data(True)
    model = fused_mh.LogisticRegression(x, y, beta_prior="normal:0,5")
    first = fused_mh.sample(model, chains=64, warmup=100, steps=40, thin=2, seed=3,
                            superchain_size=8, precondition="none", device="cpu")
    assert np.array_equal(first.factor, np.eye(3))
    more = fused_mh.sample(model, steps=60, thin=2, device="cpu", resume=first)
    out = fused_mh.run(first.states, model, step_size=first.step_size, steps=60, seed=3,
                       first_step=first.next_step, thin=2)
    assert np.array_equal(out["trace"], more.draws.transpose(1, 0, 2))
    assert np.array_equal(out["x"], more.states)
    assert out["accepted_count"].dtype == np.uint64
    assert out["accepted_count"].sum() == round(more.acceptance * 60 * 64)
    stepper = fused_mh.Model(model, step_size=first.step_size, seed=3)
    stepper.step = first.next_step
    states, accepted = first.states, np.zeros(64, np.uint64)
    for _ in range(60):
        states, moved = stepper(states)
        accepted += moved
    assert np.array_equal(states, more.states)
    assert np.array_equal(accepted, out["accepted_count"])
    with pytest.raises(ValueError, match="3 parameters per chain"):
        fused_mh.run(np.zeros((64, 2), np.float32), model, step_size=0.1, steps=5)
    with pytest.raises(TypeError, match="keywords"):
        fused_mh.run(first.states, model, 0.1, 5)
    with pytest.raises(AttributeError, match="no mu and sigma"):
        stepper.mu


def test_model_steps_keep_the_target():
    """Started from exact draws of a dense Gaussian (correlation 0.9, scales 1 and 3), 50 steps
    of 4096 chains leave them distributed as the target (a Metropolis-Hastings step keeps its
    target): the chains' final means within 5 standard errors of the target's (sd / 64 here),
    their variances and covariance within 12 % of sd_i sd_j (5 standard errors of a variance from 4096
    draws, sqrt(2 / 4096) = 2.2 % each), and some but not all proposals accepted."""
    mean = np.array([1.0, -2.0])
    cov = np.array([[1.0, 2.7], [2.7, 9.0]])
    factor = np.linalg.cholesky(cov)
    model = fused_mh.DenseGaussian(mean, cov_factor=factor)
    rng = np.random.default_rng(11)
    x0 = (mean + rng.standard_normal((4096, 2)) @ factor.T).astype(np.float32)
    out = fused_mh.run(x0, model, step_size=0.8, steps=50, seed=1)
    final = out["x"].astype(np.float64)
    assert np.all(np.abs(final.mean(0) - mean) < 5 * np.sqrt(np.diag(cov)) / 64)
    scale = np.sqrt(np.outer(np.diag(cov), np.diag(cov)))
    assert np.all(np.abs(np.cov(final.T) - cov) < 0.12 * scale)
    rate = out["accepted_count"].sum() / (4096 * 50)
    assert 0.05 < rate < 0.95
