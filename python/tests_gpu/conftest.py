"""conftest.py — the Python tests that need a CUDA device (and torch): the Accumulator's on-device
reduction on real GPU tensors. Run only by scripts/gpu_check.sh on a GPU machine (never by
`make test`, which has none). The fixtures are python/tests/conftest.py's.
"""
import importlib.util
import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))
_spec = importlib.util.spec_from_file_location("_maskpos_tests_conftest", os.path.join(_HERE, "..", "tests", "conftest.py"))
_common = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_common)
sys.path.insert(0, _HERE)

ROOT, BIN, Cli, cli = _common.ROOT, _common.BIN, _common.Cli, _common.cli
same_bytes, meta_without_provenance, PROVENANCE = _common.same_bytes, _common.meta_without_provenance, _common.PROVENANCE
