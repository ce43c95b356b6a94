"""test_distributed.py — Accumulator.reduce_distributed over torch.distributed (gloo, two CPU
processes, file:// rendezvous): each rank adds its half of the sequences; rank 0's merged result
equals merging the two halves' accumulators in rank order in one process, byte for byte, and
equals one accumulator over all within 1e-14 relative (the halves' sums grouped differently);
the other rank gets None.
"""
import os
import pickle

import numpy as np
import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

import maskpos
from conftest import ROOT

MODEL = os.path.join(ROOT, "models", "rope")
OPTS = dict(n_layers=4, n_heads=4, seq=24, per_head=True, probs=True)


def ids():
    return np.random.default_rng(7).integers(0, 256, size=(6, 24)).astype(np.int32)


def fill(acc, rows):
    with maskpos.Model(MODEL) as m:
        for s in rows:
            sc = maskpos.model_scores(m, s, 4)
            for l in range(4):
                acc.add(l, sc[l])
    return acc


def worker(rank, world, init, out):
    dist.init_process_group("gloo", init_method=init, rank=rank, world_size=world)
    t = ids()
    acc = fill(maskpos.Accumulator(**OPTS), t[rank * 3:(rank + 1) * 3])
    merged = acc.reduce_distributed(dst=0)
    with open(out + ".%d" % rank, "wb") as f:
        pickle.dump(None if merged is None else merged.state_dict(), f)
    dist.destroy_process_group()


def test_reduce_distributed_gloo(tmp_path):
    if not dist.is_available():
        pytest.fail("torch.distributed is not available in this torch build")
    init = "file://" + str(tmp_path / "rendezvous")
    out = str(tmp_path / "state")
    mp.spawn(worker, args=(2, init, out), nprocs=2, join=True)
    with open(out + ".1", "rb") as f:
        assert pickle.load(f) is None
    with open(out + ".0", "rb") as f:
        got = maskpos.Accumulator.from_state(pickle.load(f))
    t = ids()
    want = fill(maskpos.Accumulator(**OPTS), t[:3]).merge(fill(maskpos.Accumulator(**OPTS), t[3:]))
    rg, rw = got.result(), want.result()
    assert got.counts == [6] * 4
    for k, v in rw.arrays.items():
        assert rg.arrays[k].tobytes() == v.tobytes(), k
    one = fill(maskpos.Accumulator(**OPTS), t).result()
    for k, v in one.arrays.items():
        f = np.isfinite(v)
        assert np.abs(rg.arrays[k][f] - v[f]).max() <= 1e-14 * max(1.0, np.abs(v[f]).max()), k
