"""test_hf_transformers.py — maskpos.hf.probe on real HF transformers models (needs transformers;
skipped, and listed in tests/expected_skips.txt, where it is missing): for every family maskpos
implements, the HF folder `maskpos mkmodel` writes, loaded with AutoModelForCausalLM in float32 on
the GPU when there is one (else the CPU), probed through transformers' attention interface, equals
`maskpos probe` on the same folder and ids within the bounds below (two float32 forward passes:
different summation orders and kernels), causal with per-head maps and probabilities; one
bidirectional run; a bfloat16 model gives the same maps within bf16's precision.

Bounds: scores, heads, standard errors and diagonal-normalised maps: 1e-4 × max(1, max |map|);
probabilities 1e-5. First measured on the GPU machine by scripts/device_check.sh (not yet run).
The statistics beyond the maps (variance, freq, position) for five families: the bounds at that test.
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


BEYOND = ("var_attn", "var_attn_se", "var_attn_heads", "var_resid", "var_resid_se", "freq_q_norm", "freq_q_norm_se",
          "freq_k_norm", "freq_contrib", "freq_contrib_se", "freq_rest")


@pytest.mark.parametrize("arch", ["llama", "phi3", "gptneox", "qwen3", "gemma3"])
def test_variance_freq_position_equal_probe(tmp_path, arch):
    """stats "variance,freq,position" through transformers' attention interface (queries and keys as
    the model passes them, the geometry read from the model: maskpos.hf.rope_geometry; the residual
    stream from decoder-layer hooks) against `maskpos probe` on the same folder and ids: the arrays
    within 1e-4 of their largest value, the RoPE table (freq_angle) within 1e-6, pos_probe's counts
    the same and its R² within 1e-3. phi3 and gptneox rotate part of each head, qwen3 has q/k
    norms, gemma3 local and global RoPE bases."""
    extra = ["--sliding-window", "8"] if arch == "gemma3" else []
    d = mkmodel(tmp_path, arch, *extra)
    ids = np.random.default_rng(7).integers(3, 290, size=(8, 24))
    st = "variance,freq,position"
    r = maskpos.hf.probe(load(d), ids, layers=[1, 2, 3], stats=st, pos_dim=16, batch_size=3, progress=False)
    p = maskpos.probe(d, tokens=ids.astype(np.int32), layers="1-3", stats=st, pos_dim=16, progress=False)
    worst = {}
    for k in BEYOND:
        a, b = r.arrays[k], p.arrays[k]
        assert a.shape == b.shape, (k, a.shape, b.shape)
        worst[k] = float(np.abs(a - b).max() / max(np.abs(b).max(), 1e-30))
    print(arch, "relative |hf - probe|:", {k: "%.1e" % v for k, v in worst.items()})
    assert max(worst.values()) < 1e-4, worst
    assert np.allclose(r.arrays["freq_angle"], p.arrays["freq_angle"], rtol=1e-6, atol=0), (
        r.arrays["freq_angle"], p.arrays["freq_angle"])
    rb, pb = r.arrays["freq_base"], p.arrays["freq_base"]
    print(arch, "freq_base hf", rb, "probe", pb)
    assert np.all(np.isnan(rb) | (rb == pb)), (rb, pb)  # (NaN: a config that names no base)
    pa, pp = r.arrays["pos_probe"], p.arrays["pos_probe"]
    assert np.array_equal(pa[:, 6:9], pp[:, 6:9])
    assert np.allclose(pa[:, 0], pp[:, 0], rtol=0, atol=1e-3), (pa[:, 0], pp[:, 0])
