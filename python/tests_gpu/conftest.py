"""conftest.py — the Python tests that need a CUDA device (and torch): the Accumulator's on-device
reduction on real GPU tensors. Run only by scripts/device_check.sh on a GPU machine (never by
`make test`, which has none). The fixtures are python/tests/conftest.py's.
"""
import os
import runpy
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, _HERE)
# python/tests/conftest.py's fixtures and helpers (ROOT, cli, same_bytes, meta_without_provenance, ...)
globals().update({k: v for k, v in runpy.run_path(os.path.join(_HERE, "..", "tests", "conftest.py")).items()
                  if not k.startswith("__")})
