"""test_hf_transformers.py — maskpos.hf.probe on real HF transformers models (needs transformers;
skipped, and listed in tests/expected_skips.txt, where it is missing): for every family maskpos
implements, the HF folder `maskpos mkmodel` writes, loaded with AutoModelForCausalLM in float32 on
the GPU when there is one (else the CPU), probed through transformers' attention interface, equals
`maskpos probe` on the same folder and ids within the bounds below (two float32 forward passes:
different summation orders and kernels), causal with per-head maps and probabilities; one
bidirectional run; a bfloat16 model gives the same maps within bf16's precision.

Bounds: scores, heads, standard errors and diagonal-normalised maps: 1e-4 × max(1, max |map|);
probabilities 1e-5. First measured on the GPU machine by scripts/device_check.sh (not yet run).
"""
import os
import subprocess

import numpy as np
import pytest
import torch
import transformers

import maskpos
from conftest import ROOT

FAMILIES = ["llama", "mistral", "qwen2", "qwen3", "phi3", "olmo2", "gptneox", "gemma", "gemma2", "gemma3", "mixtral",
            "qwen3moe", "qwen2moe", "llamabias"]
DEV = "cuda" if torch.cuda.is_available() else "cpu"


def mkmodel(tmp, arch, *extra):
    d = str(tmp / arch)
    bin_ = os.environ.get("MASKPOS_BIN", os.path.join(ROOT, "build", "maskpos"))
    subprocess.run([bin_, "mkmodel", "--arch", arch, "--layers", "3", "--vocab", "300", *extra, d], check=True,
                   capture_output=True)
    return d


def load(d, dtype=torch.float32):
    try:  # transformers >= 4.56 names it dtype (torch_dtype before)
        m = transformers.AutoModelForCausalLM.from_pretrained(d, dtype=dtype)
    except TypeError:
        m = transformers.AutoModelForCausalLM.from_pretrained(d, torch_dtype=dtype)
    return m.to(DEV).eval()


def compare(r, p, tol_maps=1e-4, tol_probs=1e-5):
    assert sorted(r.arrays) == sorted(p.arrays)
    worst = {}
    for k, b in p.arrays.items():
        a = r.arrays[k].astype(np.float64)
        b = b.astype(np.float64)
        assert (np.isfinite(a) == np.isfinite(b)).all(), k
        f = np.isfinite(b)
        d = float(np.abs(a[f] - b[f]).max())
        worst[k] = d
        tol = tol_probs if k.startswith("probs") else tol_maps * max(1.0, float(np.abs(b[f]).max()))
        assert d <= tol, (k, d, tol)
    print("max |hf - probe|:", {k: "%.2e" % v for k, v in worst.items()})


@pytest.mark.parametrize("arch", FAMILIES)
def test_family_equals_probe(tmp_path, arch):
    extra = ["--sliding-window", "8"] if arch in ("gemma2", "gemma3", "mistral") else []
    d = mkmodel(tmp_path, arch, *extra)
    ids = np.random.default_rng(4).integers(3, 290, size=(4, 24))
    r = maskpos.hf.probe(load(d), ids, layers=[1, 2, 3], per_head=True, probs=True, batch_size=2, progress=False)
    p = maskpos.probe(d, tokens=ids.astype(np.int32), layers="1-3", per_head=True, probs=True, progress=False)
    compare(r, p)
    assert r.meta.get("layer_windows") == p.meta.get("layer_windows")


def test_bidirectional_and_bf16(tmp_path):
    d = mkmodel(tmp_path, "llama")
    ids = np.random.default_rng(5).integers(3, 290, size=(4, 24))
    r = maskpos.hf.probe(load(d), ids, layers=[1, 2], bidirectional=True, progress=False)
    p = maskpos.probe(d, tokens=ids.astype(np.int32), layers="1-2", bidirectional=True, progress=False)
    compare(r, p)
    rb = maskpos.hf.probe(load(d, torch.bfloat16), ids, layers=[1, 2], progress=False)
    pc = maskpos.probe(d, tokens=ids.astype(np.int32), layers="1-2", progress=False)
    f = np.isfinite(pc.scores)
    assert np.abs(rb.scores[f] - pc.scores[f]).max() < 0.05 * max(1.0, np.abs(pc.scores[f]).max())


def test_version_in_range_and_padded_batch(tmp_path):
    """The installed transformers is one maskpos.hf accepts (printed: the version this run checked),
    and a right-padded batch of a real model gives each sequence's maps: the padded run equals the
    sequences probed alone at their lengths (merged accumulators) within the bound above."""
    major, minor, text = maskpos.hf.transformers_version()
    print("transformers", text, "(maskpos.hf needs >= %d.%d, tested %s)" % (maskpos.hf.TRANSFORMERS_MIN +
                                                                           (maskpos.hf.TRANSFORMERS_TESTED,)))
    assert (major, minor) >= maskpos.hf.TRANSFORMERS_MIN
    d = mkmodel(tmp_path, "llama")
    m = load(d)
    ids = np.random.default_rng(6).integers(3, 290, size=(3, 24))
    lens = [24, 16, 19]  # each >= 16: merged accumulators need the same 16 x 16 block grid
    am = (np.arange(24)[None, :] < np.array(lens)[:, None]).astype(np.int64)
    r = maskpos.hf.probe(m, ids, layers=[1, 2], attention_mask=am, batch_size=3, progress=False)
    acc = None
    for s, L in enumerate(lens):
        one = maskpos.hf.probe(m, ids[s:s + 1, :L], layers=[1, 2], progress=False)
        acc = one.accumulator if acc is None else acc.merge(one.accumulator)
    compare(r, acc.result(), tol_probs=1e-5)
