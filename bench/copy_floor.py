"""The floor of a single step's launch at (65536, 64), timed as the benchmark times a step:
an empty launch, a device copy of the step's bytes (`x` into `x_new`, 33.6 MB) and the
elementwise `x + noise` into `x_new` (caller noise's 50.3 MB), each by device events around
each launch, the launches queued behind `torch.cuda._sleep` so that the host's pace stays out
of the times. Prints the minimum and the median of each.

    python3 bench/copy_floor.py [--reps 200] [--batch 65536] [--dim 64]

`bench/NOTES.md` (issue 22, "the (65536, 64) floor on an H100") has what it measured. The
sleep must outlast the queueing of every launch: if it ends first, the queue drains and the
times take in the host's pace. The script checks that (an event recorded behind the sleep must
still be pending once the last launch is queued) and then withholds the median, which the
host's pace would have raised; the minimum stays right. On an H100 the check fired with 500
launches (three commands each with their events, likely more than the driver queues) and
passed with 100 to 300.
"""

import argparse

import torch

# GPU clock cycles the queue waits behind: about 0.75 s at 2 GHz, many times what Python takes
# to queue a few hundred launches with their events (the driver's queue, not the sleep, limits
# `--reps`: the module's doc).
SLEEP_CYCLES = 1_500_000_000
WARM_UP = 50


def timed_us(fn, reps):
    """Minimum and median, in µs, of `reps` launches of `fn`, each between two device events;
    the median is None if the sleep ended before the last launch was queued."""
    for _ in range(WARM_UP):
        fn()
    torch.cuda.synchronize()
    events = [
        (torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
        for _ in range(reps)
    ]
    torch.cuda._sleep(SLEEP_CYCLES)
    sleep_over = torch.cuda.Event()
    sleep_over.record()
    for start, end in events:
        start.record()
        fn()
        end.record()
    queued_behind_sleep = not sleep_over.query()
    torch.cuda.synchronize()
    times = sorted(start.elapsed_time(end) * 1e3 for start, end in events)
    return times[0], times[len(times) // 2] if queued_behind_sleep else None


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reps", type=int, default=200, help="launches timed (default 200)")
    parser.add_argument("--batch", type=int, default=65536, help="rows (default 65536)")
    parser.add_argument("--dim", type=int, default=64, help="elements a row (default 64)")
    args = parser.parse_args()
    if args.reps < 1 or args.batch < 1 or args.dim < 1:
        parser.error("--reps, --batch and --dim must be at least 1")
    if not torch.cuda.is_available():
        parser.error("no CUDA device: the floor is a GPU's")

    n = args.batch * args.dim
    one = torch.zeros(1, device="cuda")
    x = torch.randn(n, device="cuda")
    noise = torch.randn(n, device="cuda")
    x_new = torch.empty_like(x)
    mb = 4 * n / 1e6
    cases = [
        ("one-element kernel", lambda: one.add_(1.0)),
        (f"copy of {2 * mb:.1f} MB (x into x_new)", lambda: x_new.copy_(x)),
        (f"x + noise into x_new ({3 * mb:.1f} MB)", lambda: torch.add(x, noise, out=x_new)),
    ]
    print(f"{torch.cuda.get_device_name()}, ({args.batch}, {args.dim}), {args.reps} launches")
    for name, fn in cases:
        low, median = timed_us(fn, args.reps)
        if median is None:
            print(f"{name}: min {low:.2f} us, median withheld: the queue drained before the "
                  f"last launch was queued (try a smaller --reps)")
        else:
            print(f"{name}: min {low:.2f} us, median {median:.2f} us")


if __name__ == "__main__":
    main()
