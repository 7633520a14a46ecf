"""The benchmark scripts' JSON reports: each one a new file, written whole or not at all, and
never over a file that is there already (a report is asked for by name before the run, so a
name that is taken is refused before hours of measuring, not after)."""

import os
import tempfile


def check_new(path):
    """Stops the script, naming `path`, if a file is there already."""
    if os.path.lexists(path):
        raise SystemExit(f"{path} exists: the report goes to a new file")


def write_new(path, text):
    """`text` as the new file `path`, whole or not at all: written beside it, then linked to
    its name, which fails if a file has appeared there since (nothing is overwritten)."""
    folder = os.path.dirname(os.path.abspath(path))
    with tempfile.NamedTemporaryFile("w", dir=folder, delete=False) as f:
        f.write(text)
    try:
        os.link(f.name, path)
    finally:
        os.unlink(f.name)
