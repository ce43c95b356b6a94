"""test_accumulator.py — maskpos.Accumulator (include/maskpos.h maskpos_acc_*) against `maskpos probe`:

- fed the C forward pass's own scores (maskpos.model_scores), every array and statistic equals the
  probe's byte for byte: causal, bidirectional, a sliding-window gemma2 (window 8 < S), BOS at
  position 0 (first=1), with per-head maps, probabilities (computed by the probe's softmax, or
  given) and recency; the saved folder equals `maskpos probe --out`'s file by file, and `maskpos
  view` / `plot` / maskpos.load read it;
- fed the float64 scores of the project's independent torch reference forward
  (tests/ref/probe_ref.py), the maps agree with the probe's within the stated bound;
- merging: one-sequence accumulators merged in order = one accumulator, byte for byte (without
  probs: the probe sums a sequence's heads into psum one by one); two halves merged = one
  accumulator within 1e-14 relative (the same double sums grouped differently);
- state: state_dict/from_state and save_state/load_state continue to the bits of an
  uninterrupted run;
- bad input (wrong shapes, layer out of range, mixed S, NaN in observed entries, wrong dtype)
  raises maskpos.Error with one line and leaves the state unchanged; NaN/garbage in masked
  entries is ignored;
- torch tensors (CPU, float32 and bfloat16) give the numpy path's bytes; the on-device reduction
  (run here on CPU tensors) agrees with the host path within the stated bound.
"""
import json
import os
import subprocess
import sys

import numpy as np
import pytest

import maskpos
from conftest import ROOT, meta_without_provenance, same_bytes

sys.path.insert(0, os.path.join(ROOT, "tests", "ref"))

MODEL = os.path.join(ROOT, "models", "rope")


def ids(n=6, s=24, seed=1, lo=0, hi=256):
    return np.random.default_rng(seed).integers(lo, hi, size=(n, s)).astype(np.int32)


@pytest.fixture(scope="module")
def gemma2(tmp_path_factory):
    d = tmp_path_factory.mktemp("gemma2") / "g2"
    bin_ = os.environ.get("MASKPOS_BIN", os.path.join(ROOT, "build", "maskpos"))
    subprocess.run([bin_, "mkmodel", "--arch", "gemma2", "--layers", "3", "--sliding-window", "8", "--vocab", "300",
                    str(d)], check=True, capture_output=True)
    return str(d)


def fill(acc, m, t, L, bidirectional=False, give_probs=False):
    for s in t:
        sc = maskpos.model_scores(m, s, L, bidirectional=bidirectional)
        for l in range(L):
            p = None
            if give_probs:  # the probe's own softmax applied here by numpy: exact only when equal
                x = np.where(np.isfinite(sc[l]), sc[l], -np.inf).astype(np.float64)
                e = np.exp(x - x.max(-1, keepdims=True))
                p = e / e.sum(-1, keepdims=True)
            acc.add(l, sc[l], probs=p)
    return acc


# keys the accumulator cannot know (model file, tokens, threads, compute mode) or that name the run
RUN_KEYS = {"model", "model_format", "arch", "max_position_embeddings", "beyond_trained_context", "model_hash",
            "model_hash_of", "tokens", "data_hash", "data_hash_of", "skipped_tokens", "kv_heads", "head_dim", "rope",
            "threads", "mpi_ranks", "compute", "compute_mode", "matmul_kernel", "matmul_bits", "matmul_choice", "device", "source", "scores_are", "weights_hash",
            "weights_hash_of", "run_key", "run_key_of",
            "attn_softcap"}


def same_result(acc_r, probe_r):
    assert sorted(acc_r.arrays) == sorted(probe_r.arrays)
    for k, v in probe_r.arrays.items():
        assert acc_r.arrays[k].tobytes() == v.tobytes(), k
    a = {k: v for k, v in meta_without_provenance(acc_r.meta).items() if k not in RUN_KEYS}
    p = {k: v for k, v in meta_without_provenance(probe_r.meta).items() if k not in RUN_KEYS}
    assert a == p


@pytest.mark.parametrize("case", ["causal", "bidirectional", "bos"])
def test_c_scores_equal_probe_rope(case, tmp_path, cli):
    t = ids()
    kw = dict(per_head=True, probs=True, recency=True)
    first = 0
    with maskpos.Model(MODEL) as m:
        if case == "bos":
            bos = json.load(open(os.path.join(MODEL, "config.json"))).get("bos_token_id")
            assert isinstance(bos, int)
            t[:, 0] = bos
            first = 1
        bidi = case == "bidirectional"
        p = maskpos.probe(m, tokens=t, layers="1-4", bidirectional=bidi, progress=False, **kw)
        assert p.meta["stats_first_position"] == first
        acc = fill(maskpos.Accumulator(4, m.heads, 24, causal=not bidi, first=first, **kw), m, t, 4, bidi)
    assert acc.n == 6 and acc.counts == [6] * 4
    r = acc.result()
    same_result(r, p)
    # the folder: the command's files byte for byte; view, plot and load read it
    np.save(tmp_path / "ids.npy", t)
    cli("probe", MODEL, "--tokens", tmp_path / "ids.npy", "--quiet", "--per-head", "--probs", "--recency",
        *(["--bidirectional"] if bidi else []), "--out", tmp_path / "cli")
    acc.save(tmp_path / "acc")
    npys = sorted(f for f in os.listdir(tmp_path / "cli") if f.endswith(".npy"))
    assert npys and npys == sorted(f for f in os.listdir(tmp_path / "acc") if f.endswith(".npy"))
    for f in npys:
        assert same_bytes(tmp_path / "cli" / f, tmp_path / "acc" / f), f
    loaded = maskpos.load(tmp_path / "acc")
    assert loaded.scores.tobytes() == p.scores.tobytes()
    if case == "causal":  # --heads-f64: the per-head maps as float64, the command's bytes too
        cli("probe", MODEL, "--tokens", tmp_path / "ids.npy", "--quiet", "--per-head", "--heads-f64", "--out",
            tmp_path / "cli64")
        with maskpos.Model(MODEL) as m:
            fill(maskpos.Accumulator(4, 4, 24, per_head=True, heads_f64=True), m, t, 4).save(tmp_path / "acc64")
        for f in ("scores_heads.npy", "scores_heads_se.npy", "scores.npy"):
            assert same_bytes(tmp_path / "cli64" / f, tmp_path / "acc64" / f), f
        assert np.load(tmp_path / "acc64" / "scores_heads.npy").dtype == np.float64
    cli("view", tmp_path / "acc", "-o", tmp_path / "view.html")
    assert os.path.getsize(tmp_path / "view.html") > 1000
    cli("plot", tmp_path / "acc" / "scores_diagnorm.npy", "-o", tmp_path / "plot.png")
    assert os.path.getsize(tmp_path / "plot.png") > 1000


def test_c_scores_equal_probe_gemma2_window(gemma2):
    t = ids(n=5, s=24, seed=3, lo=3, hi=290)
    with maskpos.Model(gemma2) as m:
        p = maskpos.probe(m, tokens=t, layers="1-3", per_head=True, probs=True, recency=True, progress=False)
        assert p.meta["layer_windows"] == [8, None, 8]
        acc = maskpos.Accumulator(3, m.heads, 24, window=[8, None, 8], per_head=True, probs=True, recency=True)
        fill(acc, m, t, 3)
    same_result(acc.result(), p)
    assert np.isnan(p.scores[0, 20, 5]) and np.isfinite(p.scores[1, 20, 5])  # the window masks layer 1 only


def test_given_probs_equal_computed_within_bound():
    """probs given (numpy float64 softmax of the same scores) vs the probe's float32 softmax."""
    t = ids(n=4)
    with maskpos.Model(MODEL) as m:
        a = fill(maskpos.Accumulator(4, m.heads, 24, probs=True), m, t, 4)
        b = fill(maskpos.Accumulator(4, m.heads, 24, probs=True), m, t, 4, give_probs=True)
    ra, rb = a.result(), b.result()
    assert ra.scores.tobytes() == rb.scores.tobytes()
    d = np.abs(ra.probs - rb.probs).max()
    assert 0 < d < 1e-6, d  # float32 rounding of the given probabilities and of the probe's softmax


def test_reference_forward_within_bound(gemma2):
    """float64 scores of the independent torch forward (probe_ref.py) vs the C probe (float32)."""
    import probe_ref
    import torch
    cfg = json.load(open(os.path.join(gemma2, "config.json")))
    W = probe_ref.load_weights(gemma2)
    t = ids(n=4, s=24, seed=5, lo=3, hi=290)
    acc = maskpos.Accumulator(3, cfg["num_attention_heads"], 24, window=[8, 0, 8], per_head=True, probs=True)
    with torch.no_grad():
        for s in t:
            sc, pr, _ = probe_ref.forward(cfg, W, torch.from_numpy(s.astype(np.int64)), [1, 2, 3], True, True, False)
            for l in range(3):
                acc.add(l, sc[l + 1].numpy(), probs=pr[l + 1].numpy())
    r = acc.result()
    p = maskpos.probe(gemma2, tokens=t, layers="1-3", per_head=True, probs=True, progress=False)
    for k in ("scores", "scores_heads", "scores_se", "scores_diagnorm", "probs", "probs_heads"):
        a, b = r.arrays[k], p.arrays[k]
        assert (np.isfinite(a) == np.isfinite(b)).all(), k
        f = np.isfinite(b)
        assert np.abs(a[f] - b[f]).max() < 2e-5 * max(1.0, np.abs(b[f]).max()), k
    assert np.allclose(r.stats["nri"], p.stats["nri"], rtol=0, atol=1e-5)


@pytest.mark.parametrize("probs", [False, True])
def test_merge(probs):
    t = ids(n=6)
    opts = dict(n_layers=4, n_heads=4, seq=24, per_head=True, probs=probs, recency=True)
    with maskpos.Model(MODEL) as m:
        whole = fill(maskpos.Accumulator(**opts), m, t, 4)
        one = maskpos.Accumulator(**opts)
        for s in t:  # one-sequence accumulators merged in sequence order: 0 + x = x, the same additions
            one.merge(fill(maskpos.Accumulator(**opts), m, s[None], 4))
        halves = fill(maskpos.Accumulator(**opts), m, t[:3], 4)
        halves.merge(fill(maskpos.Accumulator(**opts), m, t[3:], 4))
        other = maskpos.Accumulator(4, m.heads, 24)
    rw, ro, rh = whole.result(), one.result(), halves.result()
    assert one.n == halves.n == 6
    same_result(ro, rw)  # probs too: a sequence's heads meet the running sum as one sum either way
    # the same sums added in another grouping: rounding only
    for r in (ro, rh):
        for k, v in rw.arrays.items():
            f = np.isfinite(v)
            d = np.abs(r.arrays[k][f] - v[f]).max()
            assert d <= 1e-14 * max(1.0, np.abs(v[f]).max()), (k, d)
    with pytest.raises(maskpos.Error, match="different options"):
        whole.merge(other)


def test_state_roundtrip(tmp_path):
    t = ids(n=6)
    opts = dict(n_layers=4, n_heads=4, seq=24, per_head=True, probs=True, recency=True)
    with maskpos.Model(MODEL) as m:
        whole = fill(maskpos.Accumulator(**opts), m, t, 4)
        part = fill(maskpos.Accumulator(**opts), m, t[:4], 4)
        cont = fill(maskpos.Accumulator.from_state(part.state_dict()), m, t[4:], 4)
        part.save_state(tmp_path / "state.bin")
        cont2 = fill(maskpos.Accumulator.load_state(tmp_path / "state.bin", **opts), m, t[4:], 4)
    same_result(cont.result(), whole.result())
    same_result(cont2.result(), whole.result())
    with pytest.raises(maskpos.Error, match=r"saved with other options \(probs=True, not False\)"):
        maskpos.Accumulator.load_state(tmp_path / "state.bin", **dict(opts, probs=False))


def state_bytes(acc):
    st = acc.state_dict()
    return st["counts"], {k: v.tobytes() for k, v in st["arrays"].items()}


def test_bad_input_leaves_state_unchanged():
    t = ids(n=2)
    with maskpos.Model(MODEL) as m:
        acc = fill(maskpos.Accumulator(4, m.heads, 24, probs=True, recency=True), m, t[:1], 4)
        sc = maskpos.model_scores(m, t[1], 4)
    before = state_bytes(acc)
    nan_obs = sc[0].copy()
    nan_obs[2, 10, 3] = np.nan
    cases = [
        (lambda: acc.add(0, sc[0][:, :20, :20]), "shape"),                        # mixed S
        (lambda: acc.add(0, sc[0][:3]), "shape"),                                 # wrong heads
        (lambda: acc.add(0, sc[:2, None].reshape(2, 1, 4, 24, 24)), "shape"),     # 5-D
        (lambda: acc.add(4, sc[0]), "out of range"),
        (lambda: acc.add(-1, sc[0]), "out of range"),
        (lambda: acc.add(0, nan_obs), r"scores\[0, 2, 10, 3\] = nan"),
        (lambda: acc.add(0, np.stack([sc[0], nan_obs])), r"scores\[1, 2, 10, 3\]"),  # nothing of sequence 0 added
        (lambda: acc.add(0, np.zeros((4, 24, 24), dtype=np.int32)), "floating point"),
        (lambda: acc.add(0, sc[0], probs=np.full_like(sc[0], 2.0)), "not a probability"),
    ]
    for call, msg in cases:
        with pytest.raises(maskpos.Error, match=msg) as e:
            call()
        assert "\n" not in str(e.value) and str(e.value)
        assert state_bytes(acc) == before
    # whatever masked entries hold is never read
    junk = sc[0].copy()
    junk[:, np.triu_indices(24, 1)[0], np.triu_indices(24, 1)[1]] = np.nan
    a2 = fill(maskpos.Accumulator(4, 4, 24, probs=True, recency=True), maskpos.Model(MODEL), t[:1], 4)
    acc.add(0, junk)
    a2.add(0, sc[0])
    assert state_bytes(acc) == state_bytes(a2)
    with pytest.raises(maskpos.Error, match="layer 1 has seen 1 sequences, layer 0 2"):
        acc.result()


def test_torch_tensors_and_device_reduction():
    import torch
    from maskpos import _torch
    t = ids(n=4)
    opts = dict(n_layers=4, n_heads=4, seq=24, per_head=True, probs=True)
    with maskpos.Model(MODEL) as m:
        host = fill(maskpos.Accumulator(**opts), m, t, 4)
        tens = maskpos.Accumulator(**opts)
        dev = maskpos.Accumulator(**opts)
        for s in t:
            sc = torch.from_numpy(maskpos.model_scores(m, s, 4))
            for l in range(4):
                tens.add(l, sc[l])
                _torch.add_on_device(dev, l, sc[l], None)  # the CUDA path's reduction, run on the CPU
    rh, rt, rd = host.result(), tens.result(), dev.result()
    same_result(rt, rh)
    for k, v in rh.arrays.items():
        f = np.isfinite(v)
        assert (np.isfinite(rd.arrays[k]) == f).all(), k
        assert np.abs(rd.arrays[k][f] - v[f]).max() <= 1e-6 * max(1.0, np.abs(v[f]).max()), k
    assert np.allclose(rd.stats["residue_block_z"] if "residue_block_z" in rd.stats else rd.meta["residue_block_z"],
                       rh.meta["residue_block_z"], rtol=1e-9)
    # bfloat16 scores are widened exactly: the float32 path's bytes
    x = torch.randn(2, 4, 24, 24).to(torch.bfloat16)
    a, b = maskpos.Accumulator(1, 4, 24), maskpos.Accumulator(1, 4, 24)
    a.add(0, x)
    b.add(0, x.float().numpy())
    same_result(a.result(), b.result())


@pytest.mark.parametrize("causal", [True, False])
def test_device_reduction_window_first_batches(causal):
    """The on-device sums (run on CPU tensors) with a window, first=1, batches of 2 and both masks
    agree with the host path: maps and block z within 1e-12 relative, probabilities 1e-6."""
    import torch
    from maskpos import _torch
    rng = np.random.default_rng(3)
    opts = dict(n_layers=2, n_heads=3, seq=40, per_head=True, probs=True, first=1, window=[7, 0], causal=causal)
    host, dev = maskpos.Accumulator(**opts), maskpos.Accumulator(**opts)
    for _ in range(5):
        x = rng.standard_normal((2, 3, 40, 40)).astype(np.float32)
        for l in range(2):
            host.add(l, x)
            _torch.add_on_device(dev, l, torch.from_numpy(x), None)
    rh, rd = host.result(), dev.result()
    for k, v in rh.arrays.items():
        f = np.isfinite(v)
        assert (np.isfinite(rd.arrays[k]) == f).all(), k
        tol = 1e-6 if k.startswith("probs") else 1e-12 * max(1.0, np.abs(v[f]).max())
        assert np.abs(rd.arrays[k][f] - v[f]).max() <= tol, k
    assert np.allclose(rd.meta["residue_block_z"], rh.meta["residue_block_z"], rtol=1e-12, atol=0)
