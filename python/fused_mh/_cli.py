"""The `fused-mh` command that `pip install` puts on the PATH: the same program as `host`
(`cargo run -p host --release -- ...` in a clone), compiled into the extension, so that the
README's `host run` and `host sample` examples work from any directory without a clone."""

import sys

from . import _native


def main():
    """Runs the program on this process's command line and exits with its status."""
    sys.exit(_native.cli(["fused-mh", *sys.argv[1:]]))
