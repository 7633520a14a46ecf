"""The `fused-mh` command that installing the package puts next to the interpreter: the same
program as `host`, run from a directory outside the clone, writing only where it is told."""

import json
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import numpy as np
import pytest

from conftest import ROOT


def command():
    """The installed `fused-mh` script: next to the interpreter's other scripts, or (an install
    with `pip --target`, whose scripts folder the caller puts on the PATH) on the PATH."""
    name = "fused-mh.exe" if os.name == "nt" else "fused-mh"
    for folder in [sysconfig.get_path("scripts"), os.path.dirname(sys.executable)]:
        path = Path(folder) / name
        if path.exists():
            return path
    if shutil.which(name):
        return Path(shutil.which(name))
    pytest.fail("installing the package put no fused-mh command on the PATH")


def test_the_command_runs_outside_the_clone(tmp_path):
    work = tmp_path / "elsewhere"
    work.mkdir()
    before = sorted(p.name for p in ROOT.iterdir())
    version = subprocess.run([command(), "--version"], capture_output=True, text=True, cwd=work)
    assert version.returncode == 0 and version.stdout.startswith("fused-mh ")
    done = subprocess.run([command(), "run", "--cpu", "--batch", "32", "--dim", "3", "--steps",
                           "20", "--seed", "2", "--out", "chains"],
                          capture_output=True, text=True, cwd=work)
    assert done.returncode == 0, done.stderr
    summary = json.loads((work / "chains" / "summary.json").read_text())
    assert summary["steps"] == 20 and np.load(work / "chains" / "x.npy").shape == (32, 3)
    assert sorted(p.name for p in work.iterdir()) == ["chains"]
    assert sorted(p.name for p in ROOT.iterdir()) == before, "the command wrote into the clone"
    # A usage error is the program's, with its status (2) and message.
    bad = subprocess.run([command(), "run", "--steps", "5"], capture_output=True, text=True,
                         cwd=work)
    assert bad.returncode == 2 and "--out" in bad.stderr
