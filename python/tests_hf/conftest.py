"""conftest.py — the Python tests that need HF transformers (and torch): maskpos.hf.probe on real
transformers models, in their own pytest process (tests/test_pyapi.c where transformers is
installed; scripts/device_check.sh on the GPU machine). The fixtures are python/tests/conftest.py's.
"""
import os
import runpy
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, _HERE)
# python/tests/conftest.py's fixtures and helpers (ROOT, cli, same_bytes, meta_without_provenance, ...)
globals().update({k: v for k, v in runpy.run_path(os.path.join(_HERE, "..", "tests", "conftest.py")).items()
                  if not k.startswith("__")})
