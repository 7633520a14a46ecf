"""The Python benchmarks' figures from fresh interpreters: a per-call cost of a few microseconds
moves between processes more than within one, so each script measures itself in several."""

import json
import subprocess
import sys


def runs_of(script, runs, pins=()):
    """The figures of `runs` fresh interpreters running `script --one-run`, each printing one
    JSON object as its last line; with `pins`, interpreter `i` runs on CPU `pins[i % len]`
    (`taskset -c`)."""
    out = []
    for i in range(runs):
        pin = ["taskset", "-c", str(pins[i % len(pins)])] if pins else []
        done = subprocess.run([*pin, sys.executable, script, "--one-run"], check=True,
                              capture_output=True, text=True)
        out.append(json.loads(done.stdout.splitlines()[-1]))
    return out
