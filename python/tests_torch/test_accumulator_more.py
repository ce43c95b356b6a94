"""test_accumulator_more.py — what issue 39 added to maskpos.Accumulator, each against an independent
answer:

- lengths=: a padded batch (garbage, NaN and finfo.min in the padding) gives the sums of its
  sequences added alone to accumulators of their own S, merged (1e-12), whose top-left blocks are
  the probe's maps of those sequences byte for byte; the on-device reduction (run on CPU tensors)
  agrees within the stated bounds; accumulators of different S merge either way round;
- padding and mask values in observed entries are refused naming what they look like: padded
  positions (lengths=), left padding, a sliding window (window=W), a large finite value;
- ids=: the first batch with ids decides first=1 when every sequence starts with BOS (the probe's
  bytes for BOS rows), later batches are checked; BOS rows at first=0 and a first column far above
  the rest are warned about (MaskposWarning) and recorded in meta["warnings"];
- state: save_state writes the options: load_state(path) alone gives the accumulator back (window,
  first, meta, counts, lengths), continuing to the bits of an uninterrupted run; a failed
  load_state prints no AttributeError from __del__.
"""
import os
import subprocess
import sys
import warnings

import numpy as np
import pytest

import maskpos
from conftest import ROOT

MODEL = os.path.join(ROOT, "models", "rope")
BOS = 256  # models/rope's bos_token_id


def ids(n=6, s=24, seed=1):
    return np.random.default_rng(seed).integers(0, 256, size=(n, s)).astype(np.int32)


def scores_of(m, t, L=4):
    return [maskpos.model_scores(m, s, L) for s in t]


def test_lengths_equal_sequences_alone_and_merge():
    t = ids(n=5, s=24)
    lens = [24, 16, 24, 20, 16]
    with maskpos.Model(MODEL) as m:
        full = scores_of(m, t)
        short = {L: scores_of(m, t[:, :L]) for L in set(lens)}
    pad = maskpos.Accumulator(4, 4, 24, per_head=True)
    for l in range(4):
        batch = np.stack([full[s][l] for s in range(5)]).copy()
        for s, L in enumerate(lens):  # padding: what a padded forward pass leaves, never read
            batch[s, :, L:, :] = np.finfo(np.float32).min
            batch[s, :, :, L:] = np.nan
            batch[s, :, :L, :L] = short[L][s][l]
        pad.add(l, batch, lengths=lens)
    parts = {}
    for L in sorted(set(lens)):
        a = maskpos.Accumulator(4, 4, L, per_head=True)
        for s in [k for k in range(5) if lens[k] == L]:
            for l in range(4):
                a.add(l, short[L][s][l])
        parts[L] = a
    merged = parts[16].merge(parts[20]).merge(parts[24])  # the shorter grows to the longer S
    assert merged.options["seq"] == 24 and merged.n == 5
    rp, rm = pad.result(), merged.result()
    for k, v in rp.arrays.items():
        f = np.isfinite(v)
        assert (np.isfinite(rm.arrays[k]) == f).all(), k
        assert np.abs(rm.arrays[k][f] - v[f]).max() <= 1e-12 * max(1.0, np.abs(v[f]).max()), k
    assert rp.meta["n_by_position"] == [5] * 16 + [3] * 4 + [2] * 4
    # the top-left 16 x 16 block: every sequence; its mean is the probe's over the 16-token prefixes
    p16 = maskpos.probe(MODEL, tokens=t[:, :16], layers=[1, 2, 3, 4], progress=False)
    assert np.nanmax(np.abs(rp.scores[:, :16, :16] - p16.scores)) <= 1e-12 * np.nanmax(np.abs(p16.scores))
    se = rp.scores_se[:, 20:, :]  # entries only the two 24-token sequences reach: their standard error
    two = np.stack([full[s][:, :, 20:, :].mean(1) for s in (0, 2)])  # [2, L, 4, S] head means
    two = np.where(np.isfinite(two), two, np.nan)  # -inf above the diagonal
    want = two.std(0, ddof=1) / np.sqrt(2)
    f = np.isfinite(se)
    assert np.abs(se[f] - want[f]).max() <= 1e-6 * np.abs(want[f]).max()
    # merging the other way round: the longer into the shorter
    a, b = maskpos.Accumulator(4, 4, 16), maskpos.Accumulator(4, 4, 24)
    for l in range(4):
        a.add(l, short[16][1][l])
        b.add(l, full[0][l])
    a.merge(b)
    assert a.options["seq"] == 24 and a.result().meta["n_by_position"] == [2] * 16 + [1] * 8


def test_lengths_on_device_reduction():
    import torch
    from maskpos import _torch
    rng = np.random.default_rng(5)
    opts = dict(n_layers=1, n_heads=3, seq=40, per_head=True, probs=True, first=1, window=[9])
    host, dev = maskpos.Accumulator(**opts), maskpos.Accumulator(**opts)
    for lens in ([40, 23, 31], [12, 40, 40]):
        x = rng.standard_normal((3, 3, 40, 40)).astype(np.float32)
        for s, L in enumerate(lens):
            x[s, :, L:, :] = -1e9
        host.add(0, x, lengths=lens)
        _torch.add_on_device(dev, 0, torch.from_numpy(x), None, np.array(lens, dtype=np.int32))
    rh, rd = host.result(), dev.result()
    for k, v in rh.arrays.items():
        f = np.isfinite(v)
        assert (np.isfinite(rd.arrays[k]) == f).all(), k
        tol = 1e-6 if k.startswith("probs") else 1e-12 * max(1.0, np.abs(v[f]).max())
        assert np.abs(rd.arrays[k][f] - v[f]).max() <= tol, k
    assert np.allclose(rd.meta["residue_block_z"], rh.meta["residue_block_z"], rtol=1e-12, atol=0)
    assert rd.meta["n_by_position"] == rh.meta["n_by_position"]
    assert np.allclose(rd.meta["attention_sink"], rh.meta["attention_sink"], rtol=1e-6) if "attention_sink" in rh.meta else True
    # a mask value inside a sequence goes to the library's check: the same message as the host path
    x = rng.standard_normal((2, 3, 40, 40)).astype(np.float32)
    x[1, 2, 30, 25] = -1e9  # inside the window of 9
    with pytest.raises(maskpos.Error, match=r"scores\[1, 2, 30, 25\] = -1e\+09"):
        _torch.add_on_device(dev, 0, torch.from_numpy(x), None, None)
    assert dev.n == 6


def test_padding_and_window_values_named():
    rng = np.random.default_rng(7)
    acc = maskpos.Accumulator(1, 2, 20)
    x = rng.standard_normal((2, 2, 20, 20)).astype(np.float32)
    y = x.copy()
    y[1, :, :, 14:] = np.finfo(np.float32).min  # HF's additive mask on padded keys: finite, huge
    with pytest.raises(maskpos.Error, match=r"scores\[1, 0, 14, 14\] = -3\.40282e\+38: every observed entry of that "
                                            r"sequence at position 14 or later is a padding or mask value \(padding\?\): "
                                            r"give lengths="):
        acc.add(0, y)
    y = x.copy()
    y[0, :, :, :3] = -np.inf  # left padding: keys 0..2 masked in every row
    with pytest.raises(maskpos.Error, match=r"keys 0\.\.2 of that sequence are not finite in every row \(left padding\?\)"):
        acc.add(0, y)
    i, j = np.indices((20, 20))
    y = np.where(i - j >= 6, -np.inf, x).astype(np.float32)  # a sliding window of 6, the accumulator has none
    with pytest.raises(maskpos.Error, match=r"every entry with i - j >= 6 is not finite: a sliding window of 6\? give "
                                            r"window=6 \(this layer slot's is 0; 0: none\)"):
        acc.add(0, y)
    y = x.copy()
    y[0, 1, 9, 3] = -1e9  # one large finite value
    with pytest.raises(maskpos.Error, match=r"\|score\| >= 10000 is a padding or mask value"):
        acc.add(0, y)
    assert acc.n == 0
    w = maskpos.Accumulator(1, 2, 20, window=6)
    w.add(0, np.where(i - j >= 6, -np.inf, x).astype(np.float32))  # with its window: fine
    assert w.n == 2
    # finite scores (before the mask) with the model's probabilities: exactly 0 in the window's band
    pm = np.where((i - j >= 6) | (j > i), -np.inf, x)
    pr = np.exp(pm - pm.max(-1, keepdims=True))
    pr = (pr / pr.sum(-1, keepdims=True)).astype(np.float32)
    pa = maskpos.Accumulator(1, 2, 20, probs=True)
    with pytest.raises(maskpos.Error, match=r"probs\[0, 0\] is exactly 0 at every entry with i - j >= 6: the model masks "
                                            r"a sliding window of 6 .*give window=6"):
        pa.add(0, x, probs=pr)
    pw = maskpos.Accumulator(1, 2, 20, probs=True, window=6)
    pw.add(0, x, probs=pr)
    assert pa.n == 0 and pw.n == 2


def test_ids_decide_bos_and_warn(tmp_path):
    t = ids(n=5, s=24)
    t[:, 0] = BOS
    with maskpos.Model(MODEL) as m:
        sc = scores_of(m, t)
    auto = maskpos.Accumulator(4, 4, 24)  # first=None: the ids decide
    for l in range(4):
        auto.add(l, np.stack([s[l] for s in sc]), ids=t)
    assert auto.options["first"] == 1 and auto.bos_id == BOS
    p = maskpos.probe(MODEL, tokens=t, layers=[1, 2, 3, 4], progress=False)  # the probe sees BOS too
    r = auto.result()
    for k, v in p.arrays.items():
        assert r.arrays[k].tobytes() == v.tobytes(), k
    assert r.meta["stats_first_position"] == 1 and r.meta["residue_block_z"] == p.meta["residue_block_z"]
    bad = t.copy()
    bad[2, 0] = 7
    with pytest.raises(maskpos.Error, match=r"ids\[2\] starts with id 7, not BOS 256"):
        auto.add(0, np.stack([s[0] for s in sc]), ids=bad)
    # BOS rows at first=0 and no ids: the BOS column stands out; warned, and recorded
    zero = maskpos.Accumulator(4, 4, 24, first=0)
    for l in range(4):
        zero.add(l, np.stack([s[l] for s in sc]))
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        rz = zero.result()
    msg = [str(w.message) for w in got if issubclass(w.category, maskpos.MaskposWarning)]
    assert msg and "the first key's column stands" in msg[0] and "first=0" in msg[0]
    assert rz.meta["warnings"] == msg
    assert rz.meta["residue_block_z"][0] > 2 * r.meta["residue_block_z"][0]  # the false "non-relative layer 1"
    # explicit first=0 with ids that start with BOS (given): warned at add
    z2 = maskpos.Accumulator(4, 4, 24, first=0, bos_id=BOS)
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        z2.add(0, np.stack([s[0] for s in sc]), ids=t)
    assert any("every sequence starts with BOS id 256 but first=0" in str(w.message) for w in got)
    # ids without a common first token: first stays 0, no warning
    plain = maskpos.Accumulator(4, 4, 24)
    with maskpos.Model(MODEL) as m:
        s2 = scores_of(m, ids(n=3, seed=9))
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        for l in range(4):
            plain.add(l, np.stack([s[l] for s in s2]), ids=ids(n=3, seed=9))
        plain.result()
    assert plain.options["first"] == 0 and not [w for w in got if issubclass(w.category, maskpos.MaskposWarning)]


def test_state_file_holds_the_options(tmp_path):
    t = ids(n=6)
    opts = dict(n_layers=4, n_heads=4, seq=24, per_head=True, probs=True, window=[0, 7, 0, 0], first=1,
                layer_ids=[2, 3, 4, 5])
    with maskpos.Model(MODEL) as m:
        sc = scores_of(m, t, 4)
    def fill(acc, rows, lengths=None):
        for l in range(4):
            acc.add(l, np.stack([sc[s][l] for s in rows]), lengths=lengths)
        return acc
    whole = fill(fill(maskpos.Accumulator(**opts, meta={"model": "mine"}), [0, 1, 2, 3], [24, 20, 24, 18]), [4, 5])
    part = fill(maskpos.Accumulator(**opts, meta={"model": "mine"}), [0, 1, 2, 3], [24, 20, 24, 18])
    part.save_state(tmp_path / "s.bin")
    back = maskpos.Accumulator.load_state(tmp_path / "s.bin")  # alone: the options come from the file
    assert back.options == part.options and back.meta == {"model": "mine"} and back.counts == [4] * 4
    cont = fill(back, [4, 5])
    a, b = cont.result(), whole.result()
    for k, v in b.arrays.items():
        assert a.arrays[k].tobytes() == v.tobytes(), k
    assert a.meta["model"] == "mine" and a.meta["layers"] == [2, 3, 4, 5]
    with pytest.raises(maskpos.Error, match=r"saved with other options \(first=1, not 0\)"):
        maskpos.Accumulator.load_state(tmp_path / "s.bin", **dict(opts, first=0))
    with open(tmp_path / "s.bin", "r+b") as f:  # one sum's byte changed: the checksum
        f.seek(-100, 2)
        c = f.read(1)
        f.seek(-100, 2)
        f.write(bytes([c[0] ^ 1]))
    with pytest.raises(maskpos.Error, match="checksum mismatch"):
        maskpos.Accumulator.load_state(tmp_path / "s.bin")
    # a failed load_state with options missing: one error, no AttributeError from __del__
    code = ("import maskpos\ntry:\n    maskpos.Accumulator.load_state('x.bin', per_head=True)\nexcept maskpos.Error as e:\n"
            "    print('Error:', e)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=str(tmp_path),
                         env=dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python")))
    assert "Error: load_state('x.bin', ...)" in out.stdout and "missing" in out.stdout, out.stdout + out.stderr
    assert "AttributeError" not in out.stderr and "Exception ignored" not in out.stderr, out.stderr


def test_state_file_damaged_is_refused(tmp_path):
    """Every truncation, a few byte flips in each part, and forged header lengths: one maskpos.Error
    each, never a crash or a half-read accumulator (tests/fuzz/fuzz_acc_state.c fuzzes the same
    reader)."""
    acc = maskpos.Accumulator(2, 2, 12, per_head=True, probs=True, meta={"model": "m"})
    rng = np.random.default_rng(4)
    for _ in range(3):
        x = rng.standard_normal((2, 2, 12, 12)).astype(np.float32)
        acc.add(0, x, lengths=[12, 9])
        acc.add(1, x, lengths=[12, 9])
    good = tmp_path / "good.bin"
    acc.save_state(good)
    raw = good.read_bytes()
    assert maskpos.Accumulator.load_state(good).counts == [6, 6]
    hlen = int.from_bytes(raw[8:16], "little")
    cases = {"cut%d" % n: raw[:n] for n in (0, 7, 8, 15, 16, 16 + hlen // 2, 16 + hlen, len(raw) - 9, len(raw) - 1)}
    cases["long"] = raw + b"\0"
    cases["hlen-huge"] = raw[:8] + (1 << 40).to_bytes(8, "little") + raw[16:]
    cases["hlen-short"] = raw[:8] + (hlen - 5).to_bytes(8, "little") + raw[16:]
    for at in (0, 20, 16 + hlen // 3, 16 + hlen + 3, len(raw) - 3):
        b = bytearray(raw)
        b[at] ^= 0x40
        cases["flip%d" % at] = bytes(b)
    for name, data in cases.items():
        p = tmp_path / (name + ".bin")
        p.write_bytes(data)
        with pytest.raises(maskpos.Error):
            maskpos.Accumulator.load_state(p)
