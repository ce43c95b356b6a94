"""test_accumulator_freqpos.py — RoPE frequency usage and the position probe through
maskpos.Accumulator (query=, key=, hidden=; include/maskpos.h maskpos_acc_add_capture at
MASKPOS_AT_Q, MASKPOS_AT_K, MASKPOS_AT_LAYER_OUT) against `maskpos probe --stats freq,position`:

- fed by a plain float64 torch forward (tests/ref/probe_ref.py, written from the model formats, not
  from maskpos' C code): its scores, its queries and keys after RoPE (freq_ref.py's capture of
  rope()) and its residual stream after each layer, the freq arrays and pos_probe.npy equal the C
  probe's (float32 forward) on the same checkpoint and tokens within the bounds stated at each test,
  for the embedded RoPE model (GQA, half-split pairs) and a phi3 model with partial rotary (half the
  head rotated);
- the same queries and keys with each head's pairs interleaved (GPT-J's and GGUF's layout) and
  rope_interleaved=True give the same bytes as the half-split ones;
- resid_stride=2 reads the residual stream of sequences 0, 2, 4, ... as `maskpos probe
  --resid-stride 2` does (the whole batch given, its rows chosen by the accumulator);
- the scores reduced by the CUDA path's code (maskpos._torch, run on the CPU) beside the captures
  give the host path's freq and position bytes;
- the state file and state_dict keep the geometry (inv_freq included) and give the same bytes;
- bad input (no geometry, a key without its query, a width not the geometry's, a capture no
  statistic reads) raises maskpos.Error with one line and adds nothing.
"""
import json
import os
import subprocess
import sys

import numpy as np
import pytest

import maskpos
import ref_forward
from conftest import BIN, ROOT

sys.path.insert(0, os.path.join(ROOT, "tests", "ref"))

FREQ = ("freq_q_norm", "freq_q_norm_se", "freq_k_norm", "freq_k_norm_se", "freq_contrib", "freq_contrib_se",
        "freq_rest", "freq_rest_se")


def ids(n=8, s=24, seed=5, lo=3, hi=250):
    return np.random.default_rng(seed).integers(lo, hi, size=(n, s)).astype(np.int32)


def torch_forward(model, t, L):
    """cfg, geometry, and per sequence: scores [L][H, S, S], queries [L][H, S, HS] and keys
    [L][NKV, S, HS] after RoPE, residual stream [L][S, C], of probe_ref's float64 forward."""
    import freq_ref
    import probe_ref
    cfg, _, out = ref_forward.run(model, t, L, "rope", freq_ref.rope_kept, freq_ref.ROPED.clear,
                                  lambda: [(freq_ref.ROPED[2 * l], freq_ref.ROPED[2 * l + 1]) for l in range(L)])
    C, NH, NKV, HS, _ = probe_ref.model_dims(cfg)
    inv, _, rdim = probe_ref.rope_inv_freq(cfg, HS, t.shape[1])
    geo = dict(head_dim=HS, n_kv_heads=NKV, rot_dim=rdim, scale=HS ** -0.5, inv_freq=inv.numpy(),
               rope_base=cfg.get("rope_theta", 10000.0), hidden_size=C)
    return cfg, geo, out


def interleave(x, rdim):
    """x [..., HS] with its rotary dims (p, p + R/2) moved to (2p, 2p + 1)."""
    y = x.clone()
    P = rdim // 2
    y[..., 0:rdim:2], y[..., 1:rdim:2] = x[..., :P], x[..., P:rdim]
    return y


def accumulate(cfg, geo, fw, L, interleaved=False, **kw):
    acc = maskpos.Accumulator(L, cfg["num_attention_heads"], fw[0][0][0].shape[-1], stats="freq,position",
                              rope_interleaved=interleaved, **dict(geo, **kw))
    for sc, qk, res in fw:
        for l in range(L):
            q, k = qk[l]
            if interleaved:
                q, k = interleave(q, geo["rot_dim"]), interleave(k, geo["rot_dim"])
            acc.add(l, sc[l][None], query=q[None], key=k[None], hidden=res[l][None])
    return acc


def rel(x, y):
    """The largest difference relative to y's largest value (absolute where y is all 0: freq_rest
    without unrotated dims)."""
    big = np.nanmax(np.abs(y))
    return float(np.nanmax(np.abs(x - y)) / (big if big > 0 else 1.0))


@pytest.fixture(scope="module")
def phi3(tmp_path_factory):
    d = str(tmp_path_factory.mktemp("phi3") / "m")
    subprocess.run([BIN, "mkmodel", "--arch", "phi3", "--layers", "2", "--heads", "4", "--kv-heads", "4", "--vocab", "300",
                    "--seed", "5", "--partial-rotary", "0.5", d], check=True, capture_output=True)
    return d


@pytest.mark.parametrize("which", ["rope", "phi3"])
def test_torch_forward_equals_probe(which, phi3):
    path = phi3 if which == "phi3" else os.path.join(ROOT, "models", "rope")
    L, t = 2, ids()
    cfg, geo, fw = torch_forward(path, t, L)
    r = accumulate(cfg, geo, fw, L).result()
    p = maskpos.probe(path, tokens=t, layers="1-2", stats="freq,position", progress=False)
    worst = {}
    for k in FREQ:
        assert r.arrays[k].shape == p.arrays[k].shape, k
        worst[k] = rel(r.arrays[k], p.arrays[k])
    # float32 C forward against a float64 torch one; measured (AMD EPYC Zen 4): means within 7.4e-8 of
    # the array's largest value, standard errors within 4.9e-7
    assert max(v for k, v in worst.items() if not k.endswith("_se")) < 1e-6, worst
    assert max(worst.values()) < 5e-6, worst
    assert np.allclose(r.arrays["freq_angle"], p.arrays["freq_angle"], rtol=1e-6, atol=0)
    assert np.allclose(r.arrays["freq_base"], p.arrays["freq_base"], rtol=0, atol=0)
    pa, pp = r.arrays["pos_probe"], p.arrays["pos_probe"]
    assert pa.shape == pp.shape == (L, 11)
    # R², MAE, their chance levels and standard errors: the same fit on states that differ by float32
    # rounding (measured within 9.3e-8 of the largest entry); the counts exactly
    assert np.array_equal(pa[:, 6:9], pp[:, 6:9])
    print("%s: freq within %s; pos_probe within %.2g relative" % (which, worst, rel(pa, pp)))
    assert np.allclose(pa, pp, rtol=1e-4, atol=1e-5, equal_nan=True), (pa - pp)


def test_interleaved_pairs_same_bytes():
    path = os.path.join(ROOT, "models", "rope")
    cfg, geo, fw = torch_forward(path, ids(n=3), 2)
    half = accumulate(cfg, geo, fw, 2).result()
    inter = accumulate(cfg, geo, fw, 2, interleaved=True).result()
    for k in FREQ:
        assert inter.arrays[k].tobytes() == half.arrays[k].tobytes(), k


def test_device_reduction_with_captures():
    """The CUDA path (maskpos._torch's reduction of the scores, run here on the CPU) beside the
    captures: the freq and position arrays the same bytes as the host path's (the captures take
    the same route), the maps within 1e-12 (float64 sums in another order)."""
    from maskpos import _torch
    path = os.path.join(ROOT, "models", "rope")
    cfg, geo, fw = torch_forward(path, ids(n=4), 2)
    host = accumulate(cfg, geo, fw, 2)
    dev = maskpos.Accumulator(2, cfg["num_attention_heads"], 24, stats="freq,position", **geo)
    for sc, qk, res in fw:
        for l in range(2):
            _torch.add_on_device(dev, l, torch_tensor(sc[l][None]), None)
            dev.add_captures(l, query=qk[l][0][None], key=qk[l][1][None], hidden=res[l][None])
    a, b = dev.result(), host.result()
    for k in FREQ + ("pos_probe",):
        assert a.arrays[k].tobytes() == b.arrays[k].tobytes(), k
    assert np.allclose(a.arrays["scores"], b.arrays["scores"], rtol=1e-12, atol=0, equal_nan=True)


def torch_tensor(x):
    import torch
    return torch.as_tensor(x)


def test_resid_stride_equals_probe():
    path = os.path.join(ROOT, "models", "none")
    t = ids(n=9, seed=7)
    cfg = json.load(open(os.path.join(path, "config.json")))
    import probe_ref
    import torch
    W = probe_ref.load_weights(path)
    C = probe_ref.model_dims(cfg)[0]
    acc = maskpos.Accumulator(2, cfg["num_attention_heads"], t.shape[1], stats="position", hidden_size=C, resid_stride=2,
                              pos_dim=16)
    batches = [t[:4], t[4:5], t[5:]]  # batches that straddle the stride
    probe_ref.RESID = {}
    try:
        with torch.no_grad():
            for b in batches:
                res, scs = [], []
                for s in b:
                    probe_ref.RESID = {}
                    sc, _, _ = probe_ref.forward(cfg, W, torch.from_numpy(s.astype(np.int64)), [1, 2], True, False, False)
                    res.append([probe_ref.RESID[l] for l in (1, 2)])
                    scs.append([sc[l] for l in (1, 2)])
                for l in range(2):
                    acc.add(l, torch.stack([x[l] for x in scs]), hidden=torch.stack([x[l] for x in res]))
    finally:
        probe_ref.RESID = None
    r = acc.result()
    p = maskpos.probe(path, tokens=t, layers="1-2", stats="position", resid_stride=2, pos_dim=16, progress=False)
    pa, pp = r.arrays["pos_probe"], p.arrays["pos_probe"]
    assert np.array_equal(pa[:, 6:9], pp[:, 6:9])  # the positions fitted and held out: the same sequences
    print("resid_stride 2: pos_probe within %.2g relative of the probe's" % rel(pa, pp))
    assert np.allclose(pa, pp, rtol=1e-5, atol=1e-6, equal_nan=True), (pa - pp)
    every = maskpos.probe(path, tokens=t, layers="1-2", stats="position", resid_stride=1, pos_dim=16, progress=False)
    assert not np.array_equal(every.arrays["pos_probe"][:, 6], pp[:, 6])  # (the stride changed what was read)


def test_state_keeps_geometry(tmp_path):
    path = os.path.join(ROOT, "models", "rope")
    cfg, geo, fw = torch_forward(path, ids(n=3), 2)
    acc = accumulate(cfg, geo, fw, 2, pos_dim=16, resid_stride=1)
    f = str(tmp_path / "st")
    acc.save_state(f)
    back = maskpos.Accumulator.load_state(f)
    for k in ("head_dim", "n_kv_heads", "rot_dim", "scale", "inv_freq", "rope_base", "hidden_size", "pos_dim"):
        assert back.options[k] == acc.options[k], k
    copy = maskpos.Accumulator.from_state(acc.state_dict())
    ra, rb, rc = acc.result(), back.result(), copy.result()
    for k in FREQ + ("pos_probe", "freq_angle"):
        assert rb.arrays[k].tobytes() == ra.arrays[k].tobytes() == rc.arrays[k].tobytes(), k
    with pytest.raises(maskpos.Error, match="geometry"):
        maskpos.Accumulator.load_state(f, **dict(acc.options, pos_dim=32))


def test_bad_input():
    path = os.path.join(ROOT, "models", "rope")
    cfg, geo, fw = torch_forward(path, ids(n=1), 1)
    H = cfg["num_attention_heads"]
    sc, qk, res = fw[0]
    q, k = qk[0]
    with pytest.raises(maskpos.Error, match="give head_dim"):
        maskpos.Accumulator(1, H, 24, stats="freq")
    with pytest.raises(maskpos.Error, match="give resid_width"):
        maskpos.Accumulator(1, H, 24, stats="position")
    with pytest.raises(maskpos.Error, match=r"inv_freq of shape \[3\]"):
        maskpos.Accumulator(1, H, 24, stats="freq", head_dim=32, inv_freq=[1.0, 2.0, 3.0])
    acc = maskpos.Accumulator(1, H, 24, stats="freq", **geo)
    with pytest.raises(maskpos.Error, match="query and key come together"):
        acc.add(0, sc[0], query=q[None])
    with pytest.raises(maskpos.Error, match="hidden given but no statistic asked reads it"):
        acc.add(0, sc[0], query=q[None], key=k[None], hidden=res[0][None])
    with pytest.raises(maskpos.Error, match="key of width 96; expected 2 heads x head_dim 32"):
        acc.add(0, sc[0], query=q[None], key=np.ones((1, 24, 96), np.float32))
    assert acc.counts == [0]
    acc.add(0, sc[0])  # the captures missing
    with pytest.raises(maskpos.Error, match=r"query and key \(Q, K\) captures"):
        acc.result()
