"""conftest.py — what every test of the Python package needs: the package (from this tree), the
`maskpos` binary that is the reference (MASKPOS_BIN, else build/maskpos of this tree), and a helper
that runs it. Run: `/usr/bin/python3 -m pytest python/tests` (tests/test_pyapi.c does, in `make test`).
"""
import os
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "python"))

BIN = os.environ.get("MASKPOS_BIN", os.path.join(ROOT, "build", "maskpos"))


class Cli:
    """Runs the command line; returns (exit status, stdout, stderr)."""

    bin = BIN
    root = ROOT

    def __call__(self, *args, check=True):
        p = subprocess.run([BIN] + [str(a) for a in args], capture_output=True, text=True)
        if check and p.returncode != 0:
            raise AssertionError("maskpos %s failed (%d): %s" % (" ".join(map(str, args)), p.returncode, p.stderr))
        return p.returncode, p.stdout, p.stderr


@pytest.fixture
def cli():
    assert os.access(BIN, os.X_OK), "no maskpos binary at %s (build it, or set MASKPOS_BIN)" % BIN
    return Cli()


def same_bytes(a, b):
    with open(a, "rb") as fa, open(b, "rb") as fb:
        return fa.read() == fb.read()


# provenance keys of meta.json: they name the run (command line, time, memory), not the result
PROVENANCE = {"command", "wall_time_s", "peak_rss_bytes", "sim_wall_time_s", "compute_time_s", "maskpos_version"}


def meta_without_provenance(meta):
    return {k: v for k, v in meta.items() if k not in PROVENANCE}
