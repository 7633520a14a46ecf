"""The package when memory is short: every call either succeeds or raises
MemoryError, never aborts the interpreter or leaves the package broken. Each case runs a child
interpreter under an address-space limit (`RLIMIT_AS`), from too little to enough."""

import os
import subprocess
import sys

import pytest

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
