"""The package on PyTorch CUDA tensors (skipped without torch and a GPU): the GPU kernels in
place, on the caller's stream, against the reference PyTorch module and `host run`."""

import json

import numpy as np
import pytest

import fused_mh
from conftest import problem, readme_example, same_bits

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device", allow_module_level=True)


class Reference(torch.nn.Module):
    """The reference model, as the semantics state it (float32 on the GPU)."""

    def __init__(self, mu, sigma, step_size):
        super().__init__()
        self.register_buffer("mu", torch.as_tensor(mu).cuda())
        self.register_buffer("sigma", torch.as_tensor(sigma).cuda())
        self.step_size = step_size

    def log_pi(self, v):
        return -0.5 * (((v - self.mu) / self.sigma) ** 2).sum(dim=-1)

    def forward(self, x, noise=None, u=None):
        noise = torch.randn_like(x) if noise is None else noise
        u = torch.rand(x.shape[0], device=x.device) if u is None else u
        proposal = x + self.step_size * noise
        log_alpha = self.log_pi(proposal) - self.log_pi(x)
        accepted = torch.log(torch.clamp(u, min=1e-10)) < log_alpha
        return torch.where(accepted[:, None], proposal, x), accepted


def cuda(a):
    return torch.from_numpy(np.ascontiguousarray(a)).cuda()


def test_caller_noise_equals_the_reference_module():
    """Fed the same noise and uniforms, element by element: the decisions agree wherever
    |log u - log alpha| exceeds float32's rounding of the two sums (1e-4 relative), and the
    states agree to float32 rounding (the kernel's fused multiply-add against torch's
    multiply then add: 1 ulp)."""
    x, mu, sigma = problem(4096, 64, 1)
    r = np.random.default_rng(2)
    noise, u = r.standard_normal(x.shape).astype(np.float32), r.uniform(0, 1, 4096).astype(np.float32)
    ref_x, ref_acc = Reference(mu, sigma, 0.15)(cuda(x), cuda(noise), cuda(u))
    x_new, acc = fused_mh.step_with_noise(cuda(x), mu, sigma, 0.15, cuda(noise), cuda(u))
    assert x_new.is_cuda and acc.dtype == torch.bool
    p = x.astype(np.float64) + 0.15 * noise
    lp = lambda v: -0.5 * (((v - mu) / sigma) ** 2).sum(axis=1)
    log_alpha = lp(p) - lp(x.astype(np.float64))
    clear = np.abs(log_alpha - np.log(np.maximum(u, 1e-10))) > 1e-4 * (1 + np.abs(log_alpha))
    acc, ref_acc = acc.cpu().numpy(), ref_acc.cpu().numpy()
    assert np.array_equal(acc[clear], ref_acc[clear]) and clear.sum() > 4000
    same = acc == ref_acc
    np.testing.assert_allclose(x_new.cpu().numpy()[same], ref_x.cpu().numpy()[same], rtol=2.5e-7, atol=1e-6)


def test_in_kernel_steps_equal_host_run(tmp_path, host):
    """Three calls of a Model on a CUDA tensor equal `host run --steps 3` on the GPU (the fused
    kernel) with the same seed, bit for bit: one counter scheme everywhere."""
    x, mu, sigma = problem(3000, 33, 3)
    for name, a in {"x0": x, "mu": mu, "sigma": sigma}.items():
        np.save(tmp_path / f"{name}.npy", a)
    out = host("--init", "x0.npy", "--mu", "mu.npy", "--sigma", "sigma.npy", "--steps", 3,
               "--step-size", 0.3, "--seed", 21)
    model = fused_mh.Model(33, step_size=0.3, seed=21)
    model.mu, model.sigma = torch.from_numpy(mu).cuda(), sigma
    state, total = cuda(x), np.zeros(3000, np.uint64)
    for _ in range(3):
        state, accepted = model(state)
        total += accepted.cpu().numpy()
    assert same_bits(state.cpu().numpy(), np.load(out / "x.npy"))
    assert np.array_equal(total, np.load(out / "accepted_count.npy"))


def test_run_equals_host_run(tmp_path, host):
    """`run` on a CUDA tensor is `host run` (the fused kernel, 7 steps a launch): every
    output equal bit for bit; `x` comes back a CUDA tensor, the input untouched."""
    x, mu, sigma = problem(2000, 40, 7)
    for name, a in {"x0": x, "mu": mu, "sigma": sigma}.items():
        np.save(tmp_path / f"{name}.npy", a)
    out = host("--init", "x0.npy", "--mu", "mu.npy", "--sigma", "sigma.npy", "--steps", 30,
               "--step-size", 0.25, "--seed", 5, "--steps-per-launch", 7, "--thin", 10)
    xt = cuda(x)
    r = fused_mh.run(xt, mu, sigma, 0.25, 30, seed=5, thin=10, steps_per_launch=7)
    assert r["x"].is_cuda and r["steps"] == 30 and same_bits(xt.cpu().numpy(), x)
    assert same_bits(r["x"].cpu().numpy(), np.load(out / "x.npy"))
    assert r["mean"].is_cuda and r["var"].dtype == torch.float64
    for name in ["accepted_count", "nonfinite_count", "null_move_count", "trace"]:
        assert same_bits(r[name], np.load(out / f"{name}.npy")), name
    assert same_bits(r["mean"].cpu().numpy(), np.load(out / "mean.npy"))
    # The split diagnostics (30 steps: the last checkpoint at 30), as summary.json has them:
    # the GPU adds its superchain sums with atomics in no fixed order, so equal to rounding,
    # which B = (sum m^2 - (sum m)^2 / K) / (K - 1) can magnify where the means share an
    # offset: 1e-9 relative.
    want = json.loads((out / "summary.json").read_text())["diagnostics"]
    assert r["diagnostics"]["draws"] == want["draws"] == 30
    np.testing.assert_allclose(r["diagnostics"]["nested_rhat"], want["nested_rhat"], rtol=1e-9)
    np.testing.assert_allclose(r["diagnostics"]["ess"], want["ess"], rtol=1e-9)
    # The variances are m2 / steps, divided by PyTorch on the device, which multiplies by the
    # reciprocal: one more rounding than host run's division, so within 2 ulp (f64: 4.5e-16).
    np.testing.assert_allclose(r["var"].cpu().numpy(), np.load(out / "var.npy"), rtol=4.5e-16)


def test_the_output_is_the_memory_the_kernel_wrote(monkeypatch):
    """x_new is the CUDA tensor allocated for it (poisoned with NaN first), written in full by
    the kernel: no copy through the host or anywhere else."""
    allocated = []
    empty_like = torch.empty_like

    def poisoned(t, **kw):
        out = empty_like(t, **kw).fill_(float("nan"))
        allocated.append(out.data_ptr())
        return out

    monkeypatch.setattr(torch, "empty_like", poisoned)
    x, mu, sigma = problem(1000, 100, 4)
    x_new, _ = fused_mh.Model(100, step_size=0.1)(cuda(x))
    assert allocated == [x_new.data_ptr()] and x_new.is_cuda
    assert not torch.isnan(x_new).any()


def test_a_non_default_stream_is_respected():
    """On a side stream, a step queued after a slow kernel that writes its input sees the
    written input: the step runs on that stream, in its order (on another stream it would
    read the input before the write)."""
    x, mu, sigma = problem(65536, 64, 5)
    model = fused_mh.Model(64, step_size=0.2, seed=9)
    want, _ = fused_mh.Model(64, step_size=0.2, seed=9)(cuda(x))
    side = torch.cuda.Stream()
    target = torch.zeros(x.shape, device="cuda")
    source = cuda(x)
    torch.cuda.synchronize()
    with torch.cuda.stream(side):
        torch.cuda._sleep(50_000_000)  # ~25 ms of spinning on the side stream
        target.copy_(source)
        got, _ = model(target)
    side.synchronize()
    assert same_bits(got.cpu().numpy(), want.cpu().numpy())


def test_bad_cuda_inputs_raise():
    x, mu, sigma = problem(64, 8, 6)
    model = fused_mh.Model(8)
    with pytest.raises(TypeError, match="float32"):
        model(cuda(x).half())
    # float64 is converted (the one dtype rule), with a warning naming it: the same step.
    with pytest.warns(fused_mh.DtypeWarning, match="x is float64"):
        got, _ = fused_mh.Model(8)(cuda(x).double())
    assert got.dtype == torch.float32
    assert same_bits(got.cpu().numpy(), fused_mh.Model(8)(cuda(x))[0].cpu().numpy())
    with pytest.raises(ValueError, match="contiguous"):
        model(cuda(x.T.copy()).t())
    with pytest.raises(ValueError, match="shape"):
        fused_mh.Model(9)(cuda(x))
    with pytest.raises(TypeError, match="CUDA tensors"):
        fused_mh.step_with_noise(cuda(x), mu, sigma, 0.1, x, np.zeros(64, np.float32))
    with pytest.raises(ValueError, match="sigma"):
        fused_mh.step(cuda(x), mu, -sigma, 0.1)
    # The CPU's rules for a run (test_cpu.py): no empty run, no wrapped step counter, a
    # thin that divides the steps.
    with pytest.raises(ValueError, match="nothing to run"):
        fused_mh.run(cuda(x), mu, sigma, 0.5, 0)
    with pytest.raises(ValueError, match="does not divide"):
        fused_mh.run(cuda(x), mu, sigma, 0.5, 10, thin=3)
    with pytest.raises(ValueError, match="2\\^64 - 1"):
        fused_mh.run(cuda(x), mu, sigma, 0.5, 3, first_step=2**64 - 1)


def test_the_readme_pytorch_example_runs(capsys):
    """1000 steps of a million chains, as the README shows: the acceptance rate it prints is
    a rate (sigma 2, step 0.1 in 64 dimensions: most proposals are accepted)."""
    exec(readme_example("import torch, fused_mh"), {})
    assert 0.5 < float(capsys.readouterr().out) <= 1.0


def test_a_full_gpu_raises_memory_error_and_recovers():
    """With the device's memory nearly all taken (a PyTorch tensor holding all but 64 MiB),
    `step` and `run` on 1M x 64 chains (256 MB of states) raise MemoryError, not a driver
    error or a crash; with the memory given back, the same calls work."""
    x, mu, sigma = problem(1 << 20, 64, 5)
    xt = cuda(x)
    torch.cuda.synchronize()
    # PyTorch's cache first: blocks it keeps would serve the outputs without the driver.
    torch.cuda.empty_cache()
    free, _ = torch.cuda.mem_get_info()
    hog = torch.empty(free - (64 << 20), dtype=torch.uint8, device="cuda")
    try:
        with pytest.raises(MemoryError):
            fused_mh.step(xt, mu, sigma, 0.3, seed=1)
        with pytest.raises(MemoryError):
            fused_mh.run(xt, mu, sigma, 0.3, 10, seed=1)
    finally:
        del hog
        torch.cuda.empty_cache()
    x_new, _ = fused_mh.step(xt, mu, sigma, 0.3, seed=1)
    r = fused_mh.run(xt, mu, sigma, 0.3, 10, seed=1)
    assert x_new.shape == xt.shape and r["steps"] == 10


def test_the_readme_model_example_runs_on_the_gpu(capsys):
    """The README's regression example as it is (8192 chains on the GPU): the names and shape
    it prints, converged, sigma's mean within 0.05 of the 0.5 the data were drawn with."""
    exec(readme_example("fused_mh.LinearRegression(X, y"), {})
    printed = capsys.readouterr().out.splitlines()
    assert printed[0] == "['beta[1]', 'beta[2]', 'sigma'] (8192, 100, 3) True"
    assert abs(eval(printed[1])["mean"] - 0.5) < 0.05


def test_models_take_cuda_tensors_and_match_the_cpu():
    """A logistic regression from CUDA tensors on the GPU and from NumPy on the CPU, 256
    chains: the same draws within 1e-3 of each parameter's sd in at least 97 % of the chains
    (tests/gpu_models.rs's criterion: the GPU's special functions move a decision now and
    then)."""
    rng = np.random.default_rng(2)
    x = np.column_stack([np.ones(300), rng.uniform(-1, 1, 300)]).astype(np.float32)
    y = (rng.uniform(size=300) < 1 / (1 + np.exp(-(x @ [0.3, 1.5])))).astype(np.float32)
    run = {"chains": 256, "warmup": 100, "steps": 100, "thin": 1, "seed": 4}
    on_gpu = fused_mh.sample(fused_mh.LogisticRegression(cuda(x), cuda(y)), device="cuda", **run)
    on_cpu = fused_mh.sample(fused_mh.LogisticRegression(x, y), device="cpu", **run)
    sd = on_cpu.draws.std(axis=(0, 1))
    close = np.abs(on_gpu.draws - on_cpu.draws) <= 1e-3 * sd
    assert close.all(axis=(1, 2)).mean() >= 0.97


def test_model_chains_step_on_cuda_tensors():
    """`run(x, model)` and `Model(model)` on a CUDA tensor: the GPU's model kernel, the states
    back as a CUDA tensor; 256 chains of a logistic regression over 100 steps end within 1e-3
    of the CPU reference's in at least 97 % of the chains (the criterion above), and 20 calls
    of `Model` equal one `run` of 20 steps on the GPU, to the bit."""
    rng = np.random.default_rng(3)
    x = np.column_stack([np.ones(300), rng.uniform(-1, 1, 300)]).astype(np.float32)
    y = (rng.uniform(size=300) < 1 / (1 + np.exp(-(x @ [0.3, 1.5])))).astype(np.float32)
    model = fused_mh.LogisticRegression(x, y)
    x0 = rng.normal(0.0, 0.3, (256, 2)).astype(np.float32)
    on_gpu = fused_mh.run(cuda(x0), model, step_size=0.2, steps=100, seed=5, thin=10)
    on_cpu = fused_mh.run(x0, model, step_size=0.2, steps=100, seed=5, thin=10)
    assert on_gpu["x"].is_cuda and on_gpu["trace"].shape == (10, 256, 2)
    close = np.abs(on_gpu["x"].cpu().numpy() - on_cpu["x"]) <= 1e-3 * on_cpu["x"].std(0)
    assert close.all(axis=1).mean() >= 0.97
    stepper, state = fused_mh.Model(model, step_size=0.2, seed=5), cuda(x0)
    for _ in range(20):
        state, accepted = stepper(state)
    assert state.is_cuda and accepted.is_cuda and accepted.dtype == torch.bool
    twenty = fused_mh.run(cuda(x0), model, step_size=0.2, steps=20, seed=5)
    assert same_bits(state.cpu().numpy(), twenty["x"].cpu().numpy())


def test_runs_of_other_batches_land_their_own_counts():
    """`run` keeps the page-locked memory its counts land in for the next call of the same
    batch: runs of 300, 200 and 300 chains (the third reusing the first's memory, the second
    making its own) each return their own counts, equal to the same steps taken one at a time
    by a Model (the fused kernel equals single steps bit for bit)."""
    for batch, seed in [(300, 1), (200, 2), (300, 3)]:
        x, mu, sigma = problem(batch, 24, seed)
        r = fused_mh.run(cuda(x), mu, sigma, 0.4, 6, seed=seed)
        model = fused_mh.Model(24, step_size=0.4, seed=seed)
        model.mu, model.sigma = torch.from_numpy(mu).cuda(), sigma
        state, total = cuda(x), np.zeros(batch, np.uint64)
        for _ in range(6):
            state, accepted = model(state)
            total += accepted.cpu().numpy()
        assert np.array_equal(r["accepted_count"], total), batch
        assert same_bits(r["x"].cpu().numpy(), state.cpu().numpy()), batch
        assert not r["nonfinite_count"].any()
