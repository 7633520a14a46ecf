"""The package when memory is short: every call either succeeds or raises
MemoryError, never aborts the interpreter or leaves the package broken. The first cases run a
child interpreter under an address-space limit (`RLIMIT_AS`), from too little to enough; the
others ask for more than the machine has free, which a call refuses before it allocates
(`python/src/memory.rs`)."""

import os
import subprocess
import sys

import numpy as np
import pytest

import fused_mh

CHILD = r"""
import resource, sys
import numpy as np
import fused_mh
x = np.zeros((2_000_000, 1), np.float32)
mu, sigma = np.zeros(1, np.float32), np.ones(1, np.float32)
calls = {
    "step": lambda: fused_mh.step(x, mu, sigma, 0.5, seed=1),
    "run": lambda: fused_mh.run(x, mu, sigma, 0.5, 4, seed=1, thin=2),
}
call = calls[sys.argv[2]]
soft, hard = resource.getrlimit(resource.RLIMIT_AS)
resource.setrlimit(resource.RLIMIT_AS, (int(sys.argv[1]) * 2**20, hard))
results = []
for attempt in range(2):
    try:
        call()
        results.append("ok")
    except MemoryError:
        results.append("MemoryError")
    # The second attempt runs with the limit lifted: whatever the first did, it must work.
    resource.setrlimit(resource.RLIMIT_AS, (soft, hard))
print(" ".join(results))
"""


@pytest.mark.parametrize("call", ["step", "run"])
def test_short_memory_raises_memory_error_and_recovers(call):
    # The interpreter with NumPy and the package maps a few hundred MB of address space; the
    # limits step from below that to enough for the call (2M chains: tens of MB of buffers).
    outcomes = []
    for mib in range(100, 2000, 25):
        # Two worker threads: their stacks take address space, so which limits fail would
        # otherwise depend on the machine's core count.
        env = {**os.environ, "RAYON_NUM_THREADS": "2"}
        done = subprocess.run(
            [sys.executable, "-c", CHILD, str(mib), call], capture_output=True, text=True, env=env
        )
        if done.returncode != 0 and "MemoryError" in done.stderr and not done.stdout:
            # Too little even to import NumPy or make the input: not the package's call.
            continue
        assert done.returncode == 0, f"{mib} MiB: exit {done.returncode}, {done.stderr[-500:]}"
        first, second = done.stdout.split()
        assert second == "ok", f"{mib} MiB: the call after a MemoryError failed"
        outcomes.append(first)
        if first == "ok":
            break
    assert "MemoryError" in outcomes and outcomes[-1] == "ok", outcomes


def meminfo(field):
    """`field` of /proc/meminfo in bytes (the kernel's own count), or a skip elsewhere."""
    try:
        lines = open("/proc/meminfo").read().splitlines()
    except OSError:
        pytest.skip("no /proc/meminfo: the sizes below are picked from it")
    kib = next(int(line.split()[1]) for line in lines if line.startswith(field + ":"))
    return kib * 1024


# Calls whose buffers grow with their arguments, each asked for twice the machine's memory:
# the check against the free memory refuses them before anything is allocated, with its own
# message ("but only ... is free", the buffers named), not the allocator's.
SAMPLE_RUN = {"chains": 1000, "warmup": 0, "thin": 1, "device": "cpu"}


def sample_steps(total):
    """`sample`'s steps for twice `total` bytes: 10 parameters of 1000 chains a kept step, the
    draws and their copy in ArviZ's order."""
    return 2 * total // (2 * 4 * 10 * SAMPLE_RUN["chains"])


def oversized_calls(total):
    x = np.zeros((1024, 256), np.float32)
    mu, sigma = np.zeros(256, np.float32), np.ones(256, np.float32)
    # `run`'s trace: 1 MiB a kept state.
    steps = 2 * total // x.nbytes
    model = fused_mh.HierarchicalNormal([28.0, 8, -3, 7, -1, 1, 18, 12],
                                        [15.0, 10, 16, 11, 9, 11, 10, 18])
    return {
        "run": (lambda: fused_mh.run(x, mu, sigma, 0.5, steps, thin=1), "the trace"),
        "initial_states": (lambda: fused_mh.initial_states(2 * total // 1024, mu, sigma),
                           "the states"),
        "sample": (lambda: fused_mh.sample(model, **SAMPLE_RUN, steps=sample_steps(total)),
                   "the draws by chain"),
    }


@pytest.mark.parametrize("call", ["run", "initial_states", "sample"])
def test_sizes_past_the_machine_are_refused_before_allocating(call):
    total = meminfo("MemTotal")
    make, buffer = oversized_calls(total)[call]
    if call == "sample" and sample_steps(total) >= 2 ** 32:
        pytest.skip("a machine this large needs more steps than a run takes")
    with pytest.raises(MemoryError, match=rf"needs .* of host memory \(.*{buffer} .*\), but "
                                          r"only .* is free"):
        make()


def test_a_model_wider_than_the_memory_is_refused_before_allocating():
    # Two float32 parameters as NumPy arrays, and the library's checked copy of them with the
    # kernels' arrays: at least 16 bytes a dimension, so this dim asks for twice the memory.
    dim = 2 * meminfo("MemTotal") // 16
    if dim >= 2 ** 32:
        pytest.skip("the widest Model fits in this machine's memory")
    with pytest.raises(MemoryError, match=rf"dim = {dim}: the target: needs .* but only"):
        fused_mh.Model(dim)


CHILD_OVERCOMMIT = r"""
import numpy as np
import fused_mh

def meminfo(field):
    line = next(l for l in open("/proc/meminfo") if l.startswith(field + ":"))
    return int(line.split()[1]) * 1024

# 2 GiB held and touched, so that the free memory is at least that far below the machine's.
ballast = np.ones(1 << 29, np.float32)
total, available = meminfo("MemTotal"), meminfo("MemAvailable")
x = np.zeros((1024, 256), np.float32)
steps = (total + available) // 2 // x.nbytes
try:
    fused_mh.run(x, np.zeros(256, np.float32), np.ones(256, np.float32), 0.5, steps, thin=1)
    print("ran")
except MemoryError as e:
    print("MemoryError:", e)
"""


def test_a_trace_past_the_free_memory_but_within_the_machine_is_refused():
    """The case the check exists for: a trace larger than the free memory by 1 GiB or more,
    but smaller than the machine's, which the kernel's overcommit grants. Unchecked, the run
    would fill it and be killed by the out-of-memory killer (in a child interpreter here, so
    that the test itself survives)."""
    meminfo("MemTotal")
    done = subprocess.run([sys.executable, "-c", CHILD_OVERCOMMIT], capture_output=True,
                          text=True)
    assert done.returncode == 0, f"exit {done.returncode}: {done.stderr[-500:]}"
    assert done.stdout.startswith("MemoryError: run: needs"), done.stdout
