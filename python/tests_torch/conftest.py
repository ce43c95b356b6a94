"""conftest.py — the Python tests that import torch (Debian's python3-torch, CPU): the Accumulator,
maskpos.hf's hook, the on-device reduction. They run in their own pytest process
(tests/test_pyapi.c): importing torch sets the process's OpenMP thread count (torch.get_num_threads),
which becomes maskpos' default `threads` and would change the meta.json that python/tests compare
with the command's. The fixtures are python/tests/conftest.py's.
"""
import os
import runpy
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, _HERE)
# python/tests/conftest.py's fixtures and helpers (ROOT, cli, same_bytes, meta_without_provenance, ...)
globals().update({k: v for k, v in runpy.run_path(os.path.join(_HERE, "..", "tests", "conftest.py")).items()
                  if not k.startswith("__")})
