"""test_accumulator_var.py — the variance statistic through maskpos.Accumulator (attn_out=, hidden=;
include/maskpos.h maskpos_acc_add_capture) against `maskpos probe --stats variance`:

- fed by a plain float64 torch forward (tests/ref/probe_ref.py, written from the model formats, not
  from maskpos' C code): its scores, its attention output before o_proj and its residual stream
  after each layer, the six var_* arrays equal the C probe's (float32 forward) on the same
  checkpoint and tokens within the bound stated at each test (measured at most 1.07e-6 relative,
  bound 5e-6), for the embedded RoPE model (half-split pairs) and the NoPE one, the attention output given
  in the [B, S, H, hd], [B, H, S, hd] and [B, S, C] layouts;
- fed the probe's own numbers twice over (one accumulator, two halves merged, a state copy), the
  variance is the same within 1e-12 relative (merge: sums grouped differently) and byte for byte
  (state);
- bad input (no variance asked, a wrong shape, a NaN, a missing capture) raises maskpos.Error with one
  line and adds nothing; freq and position without their geometry are refused at construction.
"""
import json
import os
import sys

import numpy as np
import pytest

import maskpos
import ref_forward
from conftest import ROOT

sys.path.insert(0, os.path.join(ROOT, "tests", "ref"))

VAR = ("var_attn", "var_attn_se", "var_attn_heads", "var_attn_heads_se", "var_resid", "var_resid_se")


def ids(n=6, s=24, seed=3, lo=3, hi=250):
    return np.random.default_rng(seed).integers(lo, hi, size=(n, s)).astype(np.int32)


def torch_forward(model, t, L):
    """Per sequence: scores [L, H, S, S], attention output [L, S, H*hd], residual stream [L, S, C]
    of probe_ref's float64 forward (var_ref.py's capture of the attention output)."""
    import var_ref
    cfg = json.load(open(os.path.join(model, "config.json")))
    # smollm3's no_rope_layers: 0 = that layer has no RoPE (the embedded NoPE model: all 0)
    cfg, _, out = ref_forward.run(model, t, L, "attend", var_ref.attend_kept, var_ref.MIX.clear,
                                  lambda: [var_ref.MIX[l] for l in range(1, L + 1)],
                                  use_rope=any(cfg.get("no_rope_layers", [1])))
    return cfg, out


@pytest.mark.parametrize("model,layout", [("rope", "bshd"), ("rope", "bhsd"), ("none", "bsc")])
def test_torch_forward_equals_probe(model, layout):
    path = os.path.join(ROOT, "models", model)
    t = ids()
    cfg, fw = torch_forward(path, t, 4)
    H = cfg["num_attention_heads"]
    acc = maskpos.Accumulator(4, H, 24, stats="variance")
    for sc, mix, res in fw:
        for l in range(4):
            a = mix[l].float()[None]  # [1, S, H*hd]
            if layout == "bshd":
                a = a.reshape(1, 24, H, -1)
            elif layout == "bhsd":
                a = a.reshape(1, 24, H, -1).transpose(1, 2)  # a torch tensor, not contiguous
            acc.add(l, sc[l][None], attn_out=a, hidden=res[l].float()[None])
    r = acc.result()
    p = maskpos.probe(path, tokens=t, layers="1-4", stats="variance", progress=False)
    for k in VAR:
        x, y = r.arrays[k], p.arrays[k]
        assert x.shape == y.shape, k
        d = np.abs(x - y).max() / np.abs(y).max()
        # float32 C forward against a float64 torch one; measured (AMD EPYC Zen 4): at most 1.07e-6
        # relative to the array's largest value (var_attn_heads, NoPE), 1.7e-7..1.1e-6 over the six arrays
        assert d < 5e-6, (k, d)


def fill(acc, fw, seqs):
    for s in seqs:
        sc, mix, res = fw[s]
        for l in range(len(sc)):
            acc.add(l, sc[l], attn_out=mix[l].numpy(), hidden=res[l].numpy())
    return acc


def test_merge_and_state():
    path = os.path.join(ROOT, "models", "none")
    cfg, fw = torch_forward(path, ids(n=4), 2)
    H = cfg["num_attention_heads"]
    whole = fill(maskpos.Accumulator(2, H, 24, stats="variance"), fw, range(4))
    a = fill(maskpos.Accumulator(2, H, 24, stats="variance"), fw, range(2))
    b = fill(maskpos.Accumulator(2, H, 24, stats="variance"), fw, range(2, 4))
    a.merge(b)
    rw, rm = whole.result(), a.result()
    for k in VAR:
        assert np.allclose(rm.arrays[k], rw.arrays[k], rtol=1e-12, atol=0), k
    c = maskpos.Accumulator.from_state(whole.state_dict())
    rc = c.result()
    for k in VAR:
        assert rc.arrays[k].tobytes() == rw.arrays[k].tobytes(), k


def test_bad_input():
    path = os.path.join(ROOT, "models", "none")
    cfg, fw = torch_forward(path, ids(n=1), 1)
    H = cfg["num_attention_heads"]
    sc, mix, res = fw[0]
    plain = maskpos.Accumulator(1, H, 24)
    with pytest.raises(maskpos.Error, match="hidden given but no statistic asked reads it"):
        plain.add(0, sc[0], hidden=res[0].numpy())
    assert plain.counts == [0]
    acc = maskpos.Accumulator(1, H, 24, stats="variance")
    with pytest.raises(maskpos.Error, match=r"hidden of shape \[1, 23, "):
        acc.add(0, sc[0], attn_out=mix[0].numpy(), hidden=res[0].numpy()[:23])
    bad = res[0].numpy().copy()
    bad[5, 2] = np.nan
    with pytest.raises(maskpos.Error, match=r"hidden\[0, 5, 2\] = nan is not finite; nothing was added"):
        acc.add(0, sc[0], attn_out=mix[0].numpy(), hidden=bad)
    with pytest.raises(maskpos.Error, match="attn_out of shape"):
        acc.add(0, sc[0], attn_out=mix[0].numpy()[:, :-1], hidden=res[0].numpy())
    assert acc.counts == [0]
    acc.add(0, sc[0], hidden=res[0].numpy())  # the attention output missing
    with pytest.raises(maskpos.Error, match=r"captures"):
        acc.result()
    for s, what in (("freq", "head_dim"), ("position", "resid_width")):  # (test_accumulator_freqpos.py: with them)
        with pytest.raises(maskpos.Error, match="'%s' .*give %s" % (s, what)):
            maskpos.Accumulator(1, H, 24, stats=s)
