"""Where a `fused_mh.Model(64)(x)` call's time goes at (4096, 64) on a CUDA tensor: the whole
call and each piece of its path timed alone, in fresh interpreters, with what each interpreter
ran on (its CPU, that CPU's clock, the steal time the hypervisor took during the run).

Each figure is the median over 7 repetitions of (wall time of N calls / N) after warm-up, as
`python_speed.py` measures a call; the whole call's CPU time per call (`time.thread_time`) is
measured beside its wall time: equal, the loop is held by the CPU; smaller, by waiting (a full
launch queue, or a CPU taken away). Pieces that only exist in some builds of the package are
skipped where the build lacks them.

    python3 bench/python_call_pieces.py [--runs 5] [--taskset CPU ...] [out.json]

The JSON report is a new file: an existing one is never overwritten.
"""

import argparse
import json
import os
import statistics
import time

from fresh_interpreters import runs_of
from report_file import check_new, write_new

SHAPE = (4096, 64)
N = 2000


def median_us(f, n=N, reps=7):
    """Median over `reps` of the wall time per call of `n` calls of `f`, with a synchronize
    around each repetition; and the thread's CPU time per call in the same repetitions."""
    import torch
    for _ in range(20):
        f()
    walls, cpus = [], []
    for _ in range(reps):
        torch.cuda.synchronize()
        t, c = time.perf_counter(), time.thread_time()
        for _ in range(n):
            f()
        torch.cuda.synchronize()
        walls.append((time.perf_counter() - t) / n * 1e6)
        cpus.append((time.thread_time() - c) / n * 1e6)
    return statistics.median(walls), statistics.median(cpus)


def steal_ticks():
    """The machine's steal time so far, in clock ticks (/proc/stat's 8th column)."""
    with open("/proc/stat") as f:
        return int(f.readline().split()[8])


def this_cpu():
    """The CPU this process last ran on (/proc/self/stat, field 39) and its clock (MHz)."""
    with open("/proc/self/stat") as f:
        cpu = int(f.read().rsplit(")", 1)[1].split()[36])
    mhz = None
    with open("/proc/cpuinfo") as f:
        current = None
        for line in f:
            if line.startswith("processor"):
                current = int(line.split(":")[1])
            elif line.startswith("cpu MHz") and current == cpu:
                mhz = float(line.split(":")[1])
    return cpu, mhz


def pieces():
    """The figures of one interpreter."""
    import torch
    import torch.utils.dlpack
    import fused_mh
    from fused_mh import _arrays

    x = torch.randn(*SHAPE, device="cuda")
    model = fused_mh.Model(SHAPE[1], step_size=0.1)
    device = _arrays.DEVICES.get(0)
    target = model._target(device)
    flags = torch.empty(SHAPE[0], dtype=torch.bool, device="cuda")
    x_new = torch.empty_like(x)
    stream = torch.cuda.current_stream(0).cuda_stream
    capsule = torch.utils.dlpack.to_dlpack
    out = {}
    steal = steal_ticks()
    out["model_call"], out["model_call_cpu"] = median_us(lambda: model(x))
    out["steal_ticks_during_call"] = steal_ticks() - steal
    out["cpu"], out["cpu_mhz"] = this_cpu()
    out["torch_empty_like"] = median_us(
        lambda: torch.empty_like(x, memory_format=torch.contiguous_format))[0]
    out["torch_empty_bool"] = median_us(
        lambda: torch.empty(SHAPE[0], dtype=torch.bool, device=x.device))[0]
    out["to_dlpack"] = median_us(lambda: capsule(x))[0]
    out["data_ptr"] = median_us(lambda: x.data_ptr())[0]
    out["device_index"] = median_us(lambda: x.device.index)[0]
    out["get_device"] = median_us(lambda: x.get_device())[0]
    out["new_empty_bool"] = median_us(lambda: x.new_empty(SHAPE[0], dtype=torch.bool))[0]
    out["cuda_step"] = median_us(lambda: _arrays.cuda_step(x, model._target, 0.1, 0, 0))[0]
    raw_stream = torch._C._cuda_getCurrentRawStream
    out["current_stream"] = median_us(lambda: raw_stream(0))[0]
    # One eager PyTorch kernel on the same 4096 flags: what a framework's own op costs.
    out["torch_op_zero_"] = median_us(lambda: flags.zero_())[0]

    def native_step():
        device.step(stream, capsule(x), capsule(x_new), capsule(flags), target, 0.1,
                    seed=0, step=0)

    def native_step_positional():
        device.step(stream, capsule(x), capsule(x_new), capsule(flags), target, 0.1, 0, 0)

    three = median_us(lambda: (capsule(x), capsule(x_new), capsule(flags)))[0]
    out["native_step_with_3_capsules"] = median_us(native_step)[0]
    out["native_step_alone"] = out["native_step_with_3_capsules"] - three
    out["native_positional_alone"] = median_us(native_step_positional)[0] - three
    return out


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--runs", type=int, default=5, help="fresh interpreters")
    p.add_argument("--taskset", nargs="*", default=[],
                   help="CPUs to pin the interpreters to, one per run in turn (taskset -c)")
    p.add_argument("--one-run", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("json", nargs="?")
    args = p.parse_args()
    if args.json:
        check_new(args.json)
    if args.one_run:
        print(json.dumps(pieces()))
        return
    runs = runs_of(__file__, args.runs, args.taskset)
    keys = list(runs[0])
    print(f"{'piece':30s} " + " ".join(f"{'run ' + str(i):>8s}" for i in range(len(runs)))
          + f" {'median':>8s}")
    for key in keys:
        values = [r[key] for r in runs]
        present = [v for v in values if v is not None]
        med = round(statistics.median(present), 2) if present else None
        cells = " ".join(f"{v:8.2f}" if isinstance(v, float) else f"{v!s:>8s}" for v in values)
        print(f"{key:30s} {cells} {med!s:>8s}")
    if args.json:
        write_new(args.json, json.dumps({"runs": runs, "cpus": os.cpu_count()}, indent=1))


if __name__ == "__main__":
    main()
