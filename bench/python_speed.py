"""Per-call speed of `fused_mh.Model(64)(x)` on CUDA tensors, against the reference PyTorch
module and `torch.compile` of it, in one run on one GPU. Prints a Markdown table; with a path,
also writes the figures there as JSON.

Each figure is the median over 7 repetitions of (wall time of N calls / N), after warm-up, with
a synchronize around each repetition: at (4096, 64) that is the per-call cost (launch-bound),
at (1048576, 64) the kernels' throughput. The package's own figures are measured `--runs`
times (5 by default), each in a fresh interpreter, and reported as the median of the runs
with their spread (min-max): a per-call cost of a few microseconds moves between processes
(where the allocator's blocks and the driver's queues start) more than within one. The kernel's
own time comes from the Rust benchmark's single step on the same GPU (device events), passed
as --kernel-us."""

import argparse
import json
import statistics
import subprocess
import time

import torch

import fused_mh
from fresh_interpreters import runs_of
from report_file import check_new, write_new


class Reference(torch.nn.Module):
    """The reference model: the semantics as stated, in PyTorch."""

    def __init__(self, dim, step_size):
        super().__init__()
        self.register_buffer("mu", torch.zeros(dim, device="cuda"))
        self.register_buffer("sigma", torch.ones(dim, device="cuda"))
        self.step_size = step_size

    def log_pi(self, v):
        return -0.5 * (((v - self.mu) / self.sigma) ** 2).sum(dim=-1)

    def forward(self, x):
        proposal = x + self.step_size * torch.randn_like(x)
        log_alpha = self.log_pi(proposal) - self.log_pi(x)
        u = torch.rand(x.shape[0], device=x.device)
        accepted = torch.log(torch.clamp(u, min=1e-10)) < log_alpha
        return torch.where(accepted[:, None], proposal, x), accepted


def per_call_us(f, x, n):
    for _ in range(10):
        f(x)
    samples = []
    for _ in range(7):
        torch.cuda.synchronize()
        t = time.perf_counter()
        for _ in range(n):
            f(x)
        torch.cuda.synchronize()
        samples.append((time.perf_counter() - t) / n * 1e6)
    return statistics.median(samples)


SHAPES = [(4096, 2000), (1048576, 200)]


def fused_figures():
    """The package's figures in this interpreter: Model per call at each shape, run per step."""
    out = {}
    for batch, n in SHAPES:
        x = torch.randn(batch, 64, device="cuda")
        out[f"model_us_{batch}"] = per_call_us(fused_mh.Model(64, step_size=0.1), x, n)
    # `run`, per step, with the device copy of x, the counts' and the moments' hand-over: 1000
    # steps in launches of 100 with the split diagnostics (the Rust benchmark's "split
    # diagnostics over a 1000-step run" row, Gpu::run under device events), and 100 steps in
    # one launch (where the per-call costs weigh ten times as much).
    x = torch.randn(1048576, 64, device="cuda")
    mu, sigma = torch.zeros(64), torch.ones(64)
    for steps, key in [(1000, "run_us_per_step"), (100, "run_100_us_per_step")]:
        call = lambda x: fused_mh.run(x, mu, sigma, 0.1, steps)
        out[key] = per_call_us(call, x, 3) / steps
    return out


def against_host_run(host):
    """`host run` at (1048576, 64), 1000 steps in launches of 100, its summary's `seconds` (from
    the GPU opened and the inputs read, through the upload, the run, the downloads of the
    states, counts and moments, the diagnostics and the writing of its .npy files with their
    digests), against the same run in Python from the same NumPy array to the same results as
    NumPy arrays in memory (a CUDA tensor in, `.cpu()` out), median of 3 after one untimed
    call."""
    import tempfile
    import numpy as np
    x0 = np.random.default_rng(0).standard_normal((1048576, 64)).astype(np.float32)
    with tempfile.TemporaryDirectory() as d:
        np.save(f"{d}/x0.npy", x0)
        seconds = []
        for i in range(3):
            subprocess.run([host, "run", "--init", f"{d}/x0.npy", "--steps", "1000",
                            "--step-size", "0.1", "--out", f"{d}/out{i}"], check=True,
                           capture_output=True)
            seconds.append(json.load(open(f"{d}/out{i}/summary.json"))["seconds"])
    mu, sigma = np.zeros(64, np.float32), np.ones(64, np.float32)

    def python_run():
        r = fused_mh.run(torch.from_numpy(x0).cuda(), mu, sigma, 0.1, 1000)
        return r.x.cpu(), r.mean.cpu(), r.var.cpu()

    python_run()
    walls = []
    for _ in range(3):
        t = time.perf_counter()
        python_run()
        walls.append(time.perf_counter() - t)
    host_s, python_s = statistics.median(seconds), statistics.median(walls)
    return {"host_run_s": host_s, "python_s": python_s, "ratio": python_s / host_s}


def spread(runs, key):
    values = [r[key] for r in runs]
    return {"median": statistics.median(values), "min": min(values), "max": max(values),
            "runs": values}


def write_report(args, figures):
    """The report at `args.json`: the GPU, torch's version and the runs, then `figures`."""
    write_new(args.json, json.dumps({
        "gpu": torch.cuda.get_device_name(), "torch": torch.__version__,
        "runs": args.runs, **figures}, indent=1))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--kernel-us", type=float, nargs=2, default=[None, None],
                   help="the Rust benchmark's step at (4096, 64) and (1048576, 64)")
    p.add_argument("--runs", type=int, default=5,
                   help="fresh interpreters measuring the package's figures (median, spread)")
    p.add_argument("--fused-only", action="store_true",
                   help="the package's figures alone (no reference module, no torch.compile)")
    p.add_argument("--one-run", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--host", help="the host program: also time `host run` against `run`")
    p.add_argument("json", nargs="?")
    args = p.parse_args()
    if args.fused_only and (args.host or args.kernel_us != [None, None]):
        p.error("--fused-only measures the package alone: it takes neither --host nor --kernel-us")
    if args.json:
        check_new(args.json)
    if args.one_run:
        print(json.dumps(fused_figures()))
        return
    runs = runs_of(__file__, args.runs)
    if args.fused_only:
        figures = {key: spread(runs, key) for key in runs[0]}
        for key, r in figures.items():
            print(f"{key}: {r['median']:.2f} ({r['min']:.2f}-{r['max']:.2f}) over {args.runs} runs")
        if args.json:
            write_report(args, {"fused_only": figures})
        return
    rows = []
    for (batch, n), kernel in zip(SHAPES, args.kernel_us):
        x = torch.randn(batch, 64, device="cuda")
        ref = Reference(64, 0.1).cuda()
        compiled = torch.compile(ref)
        rows.append({
            "batch": batch,
            "dim": 64,
            "fused_mh_us": spread(runs, f"model_us_{batch}"),
            "reference_us": per_call_us(ref, x, n),
            "compiled_us": per_call_us(compiled, x, n),
            "kernel_us": kernel,
        })
    run_us = spread(runs, "run_us_per_step")
    run_100 = spread(runs, "run_100_us_per_step")
    print(f"GPU: {torch.cuda.get_device_name()}, torch {torch.__version__}, "
          f"fused_mh: median of {args.runs} runs (min-max)")
    print(f"fused_mh.run at (1048576, 64), 1000 steps in launches of 100: {run_us['median']:.2f} "
          f"us per step ({run_us['min']:.2f}-{run_us['max']:.2f}); 100 steps in one launch: "
          f"{run_100['median']:.2f} ({run_100['min']:.2f}-{run_100['max']:.2f})")
    versus = against_host_run(args.host) if args.host else None
    if versus:
        print(f"the same 1000-step run from NumPy to NumPy: host run {versus['host_run_s']:.3f} s, "
              f"fused_mh.run {versus['python_s']:.3f} s ({versus['ratio']:.3f}x)")
    print("| (B, dim) | fused_mh.Model µs/call | Rust single step µs | reference module | torch.compile |")
    print("|---|---|---|---|---|")
    for r in rows:
        k = f"{r['kernel_us']:.2f}" if r["kernel_us"] else "-"
        f = r["fused_mh_us"]
        print(f"| ({r['batch']}, 64) | {f['median']:.2f} ({f['min']:.2f}-{f['max']:.2f}) | {k} "
              f"| {r['reference_us']:.2f} | {r['compiled_us']:.2f} |")
    if args.json:
        write_report(args, {
            "rows": rows,
            "run_us_per_step_1048576x64_1000_steps_k100": run_us,
            "run_us_per_step_1048576x64_100_steps": run_100,
            "against_host_run": versus})


if __name__ == "__main__":
    main()
