"""test_pythonic.py — the package as a Python user meets it (issue #30 item 3, #31's Python weak
spots): every array is an attribute, recency results are arrays, the namespace holds only the
API, help() says what calls return, errors name Python arguments (never a flag or a temporary
file), and nothing is silently clamped or read from outside a run folder."""
import json
import os
import types

import numpy as np
import pytest

import maskpos
from conftest import ROOT, meta_without_provenance, same_bytes

MODEL = os.path.join(ROOT, "models", "rope")


def ids(n=4, s=16, seed=3):
    return np.random.default_rng(seed).integers(0, 256, size=(n, s)).astype(np.int32)


def test_every_array_is_an_attribute_and_in_dir():
    p = maskpos.probe(MODEL, tokens=ids(), layers=[1, 2], per_head=True, probs=True, recency=True, progress=False)
    for name in ("scores", "scores_se", "scores_diagnorm", "scores_heads", "probs"):
        assert name in p.arrays, name
        assert getattr(p, name) is p.arrays[name], name
        assert name in dir(p), name
    assert p.scores_heads.shape == (2, 4, 16, 16)
    # recency results: arrays, not nested lists; meta.json keeps its JSON
    for name in ("recency_probability", "recency_probability_se", "recency_probability_heads",
                 "recency_probability_heads_se", "recency_probability_mean_map"):
        a = getattr(p, name)
        assert isinstance(a, np.ndarray) and a.dtype == np.float64, name
        assert isinstance(p.meta[name], list), name
        assert np.array_equal(a, np.array(p.meta[name], dtype=np.float64)), name
        assert name in dir(p), name
    assert p.recency_probability_heads.shape == (2, 4)
    with pytest.raises(AttributeError, match="no 'scores_headz'"):
        p.scores_headz
    assert not hasattr(p, "__array_interface__")  # dunders are never looked up in the arrays


def test_loaded_run_has_the_same_attributes(tmp_path):
    p = maskpos.probe(MODEL, tokens=ids(), layers=[1], recency=True, progress=False)
    p.save(tmp_path / "r")
    q = maskpos.load(tmp_path / "r")
    assert np.array_equal(q.scores, p.scores, equal_nan=True)
    assert np.array_equal(q.recency_probability, p.recency_probability)


def test_namespace_all_and_version():
    public = [n for n in dir(maskpos) if not n.startswith("_")]
    for n in public:
        obj = getattr(maskpos, n)
        if isinstance(obj, types.ModuleType):  # only the package's own submodules
            assert obj.__name__.startswith("maskpos."), n
        else:
            assert n in maskpos.__all__, n
    for n in ("ctypes", "json", "np", "os", "sys", "signal", "tempfile", "threading", "time", "re"):
        assert n not in dir(maskpos), n
    for n in maskpos.__all__:
        assert hasattr(maskpos, n), n
    assert maskpos.__version__ == maskpos.version() and maskpos.__version__.count(".") == 2
    assert "__version__" in maskpos.__all__


def test_docstrings_say_what_comes_back():
    for f in (maskpos.theory, maskpos.simulate, maskpos.probe, maskpos.load, maskpos.Model, maskpos.Result):
        assert f.__doc__ and len(f.__doc__) > 80, f
    doc = maskpos.probe.__doc__
    assert "Returns" in doc
    for word in (".scores", ".scores_se", ".diagnorm", "probs=True adds .probs", "recency=True adds",
                 ".recency_probability", "per_head=True adds .scores_heads"):
        assert word in doc, word
    assert "Returns" in maskpos.simulate.__doc__ and "Returns" in maskpos.theory.__doc__


def test_errors_name_python_arguments(tmp_path):
    with pytest.raises(maskpos.Error) as e:
        maskpos.probe(MODEL, tokens=ids(), layers=[7], progress=False)
    assert str(e.value) == "layers=[7]: layer 7 does not exist (the model has 4)"
    with pytest.raises(maskpos.Error) as e:
        maskpos.probe(MODEL, text=["a short document"] * 3, seq=64, progress=False)
    assert str(e.value).startswith("texts: no document has 64 tokens"), str(e.value)
    assert "/tmp" not in str(e.value) and "--" not in str(e.value)
    with pytest.raises(maskpos.Error) as e:
        maskpos.probe(MODEL, tokens=ids(), max_mem_gib=1e-6, progress=False)
    assert "max_mem_gib" in str(e.value) and "--" not in str(e.value)
    with pytest.raises(maskpos.Error, match="^text: give seq="):
        maskpos.probe(MODEL, text="no length given", progress=False)


@pytest.mark.parametrize("kwargs,message", [
    (dict(n=5), "tokens: n=5 but the array holds 4 sequences"),
    (dict(seq=17), "tokens: seq=17 but the array's sequences have 16 tokens"),
])
def test_probe_refuses_more_rows_or_tokens_than_given(kwargs, message):
    """n=5 on 4 rows ran N=4 and seq=17 on 16 tokens ran S=16 while meta["command"] said
    `--n 5` / `--seq 17` (#31); the command refuses both, so does Python."""
    with pytest.raises(maskpos.Error) as e:
        maskpos.probe(MODEL, tokens=ids(), progress=False, **kwargs)
    assert str(e.value) == message


def test_probe_n_and_seq_select_a_prefix_as_the_command_does(cli, tmp_path):
    t = ids()
    np.save(tmp_path / "ids.npy", t)
    cli("probe", MODEL, "--tokens", tmp_path / "ids.npy", "--n", "3", "--seq", "12", "--layers", "1,2", "--quiet",
        "--out", tmp_path / "cli")
    r = maskpos.probe(MODEL, tokens=t, n=3, seq=12, layers=[1, 2], progress=False)
    assert r.meta["n"] == 3 and r.meta["seq"] == 12 and r.scores.shape == (2, 12, 12)
    for name in r.arrays:
        np.save(tmp_path / ("py_" + name + ".npy"), r.arrays[name])
        assert same_bytes(tmp_path / ("py_" + name + ".npy"), tmp_path / "cli" / (name + ".npy")), name
    with open(tmp_path / "cli" / "meta.json") as f:
        cm = meta_without_provenance(json.load(f))
    pm = meta_without_provenance(r.meta)
    for k in ("tokens", "tokens_path", "data", "tokens_file"):
        cm.pop(k, None)
        pm.pop(k, None)
    assert cm == pm


def test_load_refuses_files_outside_the_folder(tmp_path):
    maskpos.simulate(batch=20, seq=4, dim=8, layers=1, progress=False).save(tmp_path / "run")
    np.save(tmp_path / "outside.npy", np.zeros(3))
    meta = json.loads((tmp_path / "run" / "meta.json").read_text())
    for key in ("../outside.npy", str(tmp_path / "outside.npy")):
        meta["files"] = {key: "a file outside the run"}
        (tmp_path / "run" / "meta.json").write_text(json.dumps(meta))
        with pytest.raises(maskpos.Error, match="not a file of this folder"):
            maskpos.load(tmp_path / "run")
