"""test_cuda.py — maskpos.Accumulator with CUDA tensors (run by scripts/device_check.sh only): the
scores the C forward pass computes, moved to the GPU in float32 and in bfloat16, reduced there
(maskpos._torch, float64) give the host path's maps within 1e-12 relative (float64 sums in another
order) and probabilities within 1e-6 (torch's float32 softmax against the probe's); recency=True
takes the host path (the same bytes as numpy); bad input on the GPU (NaN in an observed entry,
wrong shape) raises maskpos.Error and adds nothing; a batch of 8 × 32 heads × 1024² scores is
reduced without leaving more than [H, S, S] on the host (timed, printed).
"""
import os
import time

import numpy as np
import pytest
import torch

import maskpos
from conftest import ROOT

MODEL = os.path.join(ROOT, "models", "rope")
pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")


def scores(n=6, s=24):
    t = np.random.default_rng(1).integers(0, 256, size=(n, s)).astype(np.int32)
    with maskpos.Model(MODEL) as m:
        return [maskpos.model_scores(m, x, 4) for x in t]


def close(r, h, tol_maps=1e-12, tol_probs=1e-6):
    for k, v in h.arrays.items():
        a = r.arrays[k]
        f = np.isfinite(v)
        assert (np.isfinite(a) == f).all(), k
        tol = tol_probs if k.startswith("probs") else tol_maps * max(1.0, np.abs(v[f]).max())
        assert np.abs(a[f] - v[f]).max() <= tol, (k, np.abs(a[f] - v[f]).max())


def test_cuda_equals_host_within_bound():
    opts = dict(n_layers=4, n_heads=4, seq=24, per_head=True, probs=True)
    host, gpu = maskpos.Accumulator(**opts), maskpos.Accumulator(**opts)
    for sc in scores():
        for l in range(4):
            host.add(l, sc[l])
            gpu.add(l, torch.from_numpy(sc[l]).cuda())
    close(gpu.result(), host.result())


def test_cuda_recency_takes_the_host_path():
    opts = dict(n_layers=4, n_heads=4, seq=24, recency=True)
    host, gpu = maskpos.Accumulator(**opts), maskpos.Accumulator(**opts)
    for sc in scores():
        for l in range(4):
            host.add(l, sc[l])
            gpu.add(l, torch.from_numpy(sc[l]).cuda())
    r, h = gpu.result(), host.result()
    for k, v in h.arrays.items():
        assert r.arrays[k].tobytes() == v.tobytes(), k


def test_cuda_bad_input_adds_nothing():
    acc = maskpos.Accumulator(1, 4, 24)
    x = torch.from_numpy(scores(n=1)[0][0]).cuda()
    acc.add(0, x)
    before = {k: v.tobytes() for k, v in acc.state_dict()["arrays"].items()}
    y = x.clone()
    y[1, 7, 2] = float("nan")
    with pytest.raises(maskpos.Error, match="not finite"):
        acc.add(0, y)
    with pytest.raises(maskpos.Error, match="shape"):
        acc.add(0, x[:, :20, :20])
    assert {k: v.tobytes() for k, v in acc.state_dict()["arrays"].items()} == before and acc.n == 1


def test_cuda_llama_sized_batch():
    B, H, S = 8, 32, 1024
    x = torch.randn(B, H, S, S, device="cuda", dtype=torch.bfloat16)
    acc = maskpos.Accumulator(1, H, S)
    acc.add(0, x)  # warm-up
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    acc.add(0, x)
    torch.cuda.synchronize()
    dt = time.perf_counter() - t0
    print("Accumulator.add of [8, 32, 1024, 1024] bf16 on %s: %.3f s" % (torch.cuda.get_device_name(0), dt))
    assert acc.n == 2 * B  # n counts sequences: two adds of B each
