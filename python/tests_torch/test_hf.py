"""test_hf.py — maskpos.hf.probe's hook where transformers is not installed: a tiny PyTorch decoder
(tiny_hf.py) that looks its attention function up by config._attn_implementation and calls it as
transformers' modules do, with weights of `maskpos mkmodel` folders (llama; mistral with a
sliding window of 8 < S):

- hf.probe equals maskpos.probe on the same folder and ids within 2e-6 (float64 torch vs the C
  float32 forward pass), causal and bidirectional, per head and with probabilities;
- the capture is exact plumbing: hf.probe equals an Accumulator fed the scores the tiny model's
  own eager attention computes, byte for byte (layers chosen, windows, batches, early stop);
- with the capture installed and no early stop, the model's logits equal its eager logits;
  afterwards the model's attention implementation is restored;
- padding, layers out of range and texts without a tokenizer raise maskpos.Error;
- import maskpos imports neither torch nor transformers.
Real transformers models: python/tests_hf (run by tests/test_pyapi.c where transformers is
installed, and by scripts/device_check.sh).
"""
import os
import subprocess
import sys

import numpy as np
import pytest
import torch

import maskpos
from conftest import ROOT

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tiny_hf  # noqa: E402

REG = tiny_hf.ATTENTION_FUNCTIONS


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    base = tmp_path_factory.mktemp("hf")
    bin_ = os.environ.get("MASKPOS_BIN", os.path.join(ROOT, "build", "maskpos"))
    out = {}
    for arch, extra in (("llama", []), ("mistral", ["--sliding-window", "8"])):
        d = str(base / arch)
        subprocess.run([bin_, "mkmodel", "--arch", arch, "--layers", "3", "--vocab", "300", *extra, d], check=True,
                       capture_output=True)
        out[arch] = d
    return out


def ids(n=5, s=20, seed=2):
    return np.random.default_rng(seed).integers(3, 290, size=(n, s))


@pytest.mark.parametrize("arch", ["llama", "mistral"])
@pytest.mark.parametrize("bidi", [False, True])
def test_hf_probe_equals_maskpos_probe(models, arch, bidi):
    d = models[arch]
    t = ids()
    r = maskpos.hf.probe(tiny_hf.TinyModel(d), t, layers=[1, 2, 3], registry=REG, per_head=True, probs=True,
                         batch_size=2, bidirectional=bidi, progress=False)
    p = maskpos.probe(d, tokens=t.astype(np.int32), layers="1-3", per_head=True, probs=True, bidirectional=bidi,
                      progress=False)
    assert sorted(r.arrays) == sorted(p.arrays)
    for k, b in p.arrays.items():
        a = r.arrays[k]
        assert (np.isfinite(a) == np.isfinite(b)).all(), k
        f = np.isfinite(b)
        assert np.abs(a[f] - b[f]).max() < 2e-6, (k, np.abs(a[f] - b[f]).max())
    assert r.meta.get("layer_windows") == p.meta.get("layer_windows")
    assert r.meta["causal"] == (not bidi) and r.meta["layers"] == [1, 2, 3] and r.meta["n"] == 5
    assert np.allclose(r.stats["nri"], p.stats["nri"], rtol=0, atol=1e-6)


def test_capture_is_exact(models):
    d = models["mistral"]
    t = ids(n=5)
    m = tiny_hf.TinyModel(d)
    r = maskpos.hf.probe(m, t, layers=[1, 3], registry=REG, per_head=True, batch_size=2, progress=False)
    assert m.config._attn_implementation == "eager" and "maskpos_capture" not in REG
    # the same scores through the model's own eager attention, fed by hand
    acc = maskpos.Accumulator(2, 4, 20, window=[8, 8], per_head=True, layer_ids=[1, 3])
    for att in m.layers:
        att.capture = []
    with torch.no_grad():
        for b0 in range(0, 5, 2):
            m(input_ids=torch.as_tensor(t[b0:b0 + 2]))
            for slot, li in enumerate((0, 2)):
                for layer, sc in m.layers[li].capture:
                    acc.add(slot, sc)
                m.layers[li].capture = []
    ra = acc.result()
    for k, v in ra.arrays.items():
        assert r.arrays[k].tobytes() == v.tobytes(), k
    assert r.meta["layers"] == [1, 3] and r.meta["layer_windows"] == [8, 8]


def test_outputs_unchanged_and_errors(models):
    d = models["llama"]
    t = torch.as_tensor(ids(n=3))
    m = tiny_hf.TinyModel(d)
    with torch.no_grad():
        want = m(input_ids=t)
    seen = {}

    class Keep(maskpos.hf.Capture):
        def __call__(self, *a, **k):
            out = super().__call__(*a, **k)
            seen[a[0].layer_idx] = out[0]
            return out

    acc = maskpos.Accumulator(3, 4, 20)
    cap = Keep(acc, {0: 0, 1: 1, 2: 2}, True, {})
    with maskpos.hf._Installed(m, cap, REG), torch.no_grad():
        got = m(input_ids=t)
    assert torch.allclose(got, want, rtol=0, atol=1e-12) and acc.n == 3 and sorted(seen) == [0, 1, 2]
    with pytest.raises(maskpos.Error, match="sequence 1 is padded"):
        maskpos.hf.probe(m, t, attention_mask=torch.tensor([[1] * 20, [1] * 19 + [0], [1] * 20]), registry=REG,
                         progress=False)
    with pytest.raises(maskpos.Error, match="layer 4 does not exist"):
        maskpos.hf.probe(m, t, layers=[4], registry=REG, progress=False)
    with pytest.raises(maskpos.Error, match="texts need tokenizer"):
        maskpos.hf.probe(m, ["some text"], registry=REG, progress=False)


def test_import_needs_neither_torch_nor_transformers():
    code = "import sys, maskpos; print('torch' in sys.modules, 'transformers' in sys.modules, maskpos.hf.NAME)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=os.path.join(ROOT, "python"))
    assert out.stdout.split() == ["False", "False", "maskpos_capture"]


def test_model_that_never_calls_the_capture(models, monkeypatch):
    """A model whose attention does not go through the looked-up function: a clear error, not an
    empty or silent result."""
    import collections
    monkeypatch.setattr(tiny_hf, "ATTENTION_FUNCTIONS", collections.defaultdict(lambda: tiny_hf.eager))
    m = tiny_hf.TinyModel(models["llama"])
    with pytest.raises(maskpos.Error, match="never called maskpos' attention function for layer 1"):
        maskpos.hf.probe(m, ids(n=2), registry={}, progress=False)
    assert m.config._attn_implementation == "eager"
