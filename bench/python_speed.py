"""Per-call speed of `fused_mh.Model(64)(x)` on CUDA tensors, against the reference PyTorch
module and `torch.compile` of it, in one run on one GPU. Prints a Markdown table; with a path,
also writes the figures there as JSON.

Each figure is the median over 7 repetitions of (wall time of N calls / N), after warm-up, with
a synchronize around each repetition: at (4096, 64) that is the per-call cost (launch-bound),
at (1048576, 64) the kernels' throughput. The kernel's own time comes from the Rust
benchmark's single step on the same GPU (device events), passed as --kernel-us."""

import argparse
import json
import statistics
import time

import torch

import fused_mh


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


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--kernel-us", type=float, nargs=2, default=[None, None],
                   help="the Rust benchmark's step at (4096, 64) and (1048576, 64)")
    p.add_argument("json", nargs="?")
    args = p.parse_args()
    rows = []
    for (batch, n), kernel in zip([(4096, 2000), (1048576, 200)], args.kernel_us):
        x = torch.randn(batch, 64, device="cuda")
        model = fused_mh.Model(64, step_size=0.1)
        ref = Reference(64, 0.1).cuda()
        compiled = torch.compile(ref)
        rows.append({
            "batch": batch,
            "dim": 64,
            "fused_mh_us": per_call_us(model, x, n),
            "reference_us": per_call_us(ref, x, n),
            "compiled_us": per_call_us(compiled, x, n),
            "kernel_us": kernel,
        })
    # `run`: 100 fused steps in one launch, per step (with the device copy of x, the counts'
    # and the moments' hand-over).
    x = torch.randn(1048576, 64, device="cuda")
    mu, sigma = torch.zeros(64), torch.ones(64)
    fused_mh.run(x, mu, sigma, 0.1, 100)
    run_us = per_call_us(lambda x: fused_mh.run(x, mu, sigma, 0.1, 100), x, 5) / 100
    print(f"GPU: {torch.cuda.get_device_name()}, torch {torch.__version__}")
    print(f"fused_mh.run at (1048576, 64), 100 steps a launch: {run_us:.2f} us per step")
    print("| (B, dim) | fused_mh.Model µs/call | Rust single step µs | reference module | torch.compile |")
    print("|---|---|---|---|---|")
    for r in rows:
        k = f"{r['kernel_us']:.2f}" if r["kernel_us"] else "-"
        print(f"| ({r['batch']}, 64) | {r['fused_mh_us']:.2f} | {k} | {r['reference_us']:.2f} "
              f"| {r['compiled_us']:.2f} |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"gpu": torch.cuda.get_device_name(), "torch": torch.__version__,
                       "rows": rows, "run_us_per_step_1048576x64_k100": run_us}, f, indent=1)


if __name__ == "__main__":
    main()
