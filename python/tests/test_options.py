"""test_options.py — maskpos.probe's keywords are the library's probe option table (the rows
`maskpos probe` reads its flags from, less the command line's own): every setting of the table
has a keyword and every keyword but model, text and progress is a setting; the two the module
lacked before (heads_f64, device) reach the probe."""
import inspect
import os

import numpy as np
import pytest

import maskpos
from maskpos import _lib
from conftest import ROOT

MODEL = os.path.join(ROOT, "models", "rope")
PYTHON_ONLY = {"model", "text", "progress"}  # the model handle, documents as strings, the bar


def test_probe_signature_is_the_table():
    table = [name.replace("-", "_") for name, _, _ in _lib.probe_options()]
    assert len(table) == len(set(table)) and table
    params = set(inspect.signature(maskpos.probe).parameters) - PYTHON_ONLY
    assert sorted(params - set(table)) == [], "keywords that are no setting of the library"
    assert sorted(set(table) - params) == [], "settings of the library without a keyword"
    for p in inspect.signature(maskpos.probe).parameters.values():
        assert p.name == "model" or p.default is None, p.name  # None: the library's default
    kinds = {k: v[0] for k, v in maskpos.probe_options().items()}
    assert kinds["per_head"] == "bool" and kinds["seq"] == "int" and kinds["max_mem_gib"] == "number"
    assert kinds["device"] == "string"


def test_heads_f64_and_device_reach_the_probe():
    t = np.arange(2 * 12, dtype=np.int32).reshape(2, 12) % 200
    r = maskpos.probe(MODEL, tokens=t, layers=[1], per_head=True, heads_f64=True, device="cpu", progress=False)
    assert r.scores_heads.dtype == np.float64 and r.scores_heads.shape == (1, 4, 12, 12)
    r32 = maskpos.probe(MODEL, tokens=t, layers=[1], per_head=True, progress=False)
    assert r32.scores_heads.dtype == np.float32
    with pytest.raises(maskpos.Error, match="heads.f64"):
        maskpos.probe(MODEL, tokens=t, layers=[1], heads_f64=True, progress=False)
    with pytest.raises(maskpos.Error, match="no-such-device"):
        maskpos.probe(MODEL, tokens=t, layers=[1], device="no-such-device", progress=False)
