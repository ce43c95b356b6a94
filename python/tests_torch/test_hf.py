"""test_hf.py — maskpos.hf.probe's hook where transformers is not installed: a tiny PyTorch decoder
(tiny_hf.py) that looks its attention function up by config._attn_implementation and calls it as
transformers' modules do, with weights of `maskpos mkmodel` folders (llama; mistral with a
sliding window of 8 < S):

- hf.probe equals maskpos.probe on the same folder and ids within 2e-6 (float64 torch vs the C
  float32 forward pass), causal and bidirectional, per head and with probabilities;
- the capture is exact plumbing: hf.probe equals an Accumulator fed the scores the tiny model's
  own eager attention computes, byte for byte (layers chosen, windows, batches, early stop);
- stats "freq,position" (queries and keys from the attention function, the residual stream from the
  decoder layers' hooks, the RoPE geometry read from the model) equal maskpos.probe's within 2.9e-7;
  resid_stride=2 reads the residual stream of every other sequence, as maskpos.probe's, and batches
  it reads none of stop after the deepest layer's attention;
- with the capture installed and no early stop, the model's logits equal its eager logits;
  afterwards the model's attention implementation is restored;
- right-padded batches (attention_mask) give each sequence's own maps: equal to an Accumulator fed
  every sequence run alone at its length (lengths=), causal and bidirectional; pack=True packs
  texts as `maskpos corpus --pack` does (BOS + seq-1 tokens of the stream);
- attention keyword arguments outside the capture's list (s_aux: attention sinks) are refused, as
  is a model passing another sliding window than the accumulator counts;
- transformers older than TRANSFORMERS_MIN, or without AttentionInterface, is named with its
  version (a stand-in module here), and a missing one as missing;
- left padding, layers out of range and texts without a tokenizer raise maskpos.Error;
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
    with pytest.raises(maskpos.Error, match="sequence 1 is not right-padded"):  # left padding: not at position 0
        maskpos.hf.probe(m, t, attention_mask=torch.tensor([[1] * 20, [0] + [1] * 19, [1] * 20]), registry=REG,
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


def _alone(m, t, lens, layers, bidi, per_head=False):
    """An Accumulator fed each sequence's eager scores from running it alone at its length (causal:
    the tiny model's own eager attention)."""
    S = t.shape[1]
    H = m.config.num_attention_heads
    acc = maskpos.Accumulator(len(layers), H, S, causal=not bidi, window=[m.layers[l - 1].sliding_window or 0 for l in layers],
                              per_head=per_head)
    for s, L in enumerate(lens):
        for att in m.layers:
            att.capture = []
        with torch.no_grad():
            m(input_ids=t[s:s + 1, :L])
        got = {li: sc for a in m.layers for li, sc in a.capture}
        for k, l in enumerate(layers):
            pad = torch.full((1, H, S, S), float("nan"), dtype=torch.float64)
            pad[:, :, :L, :L] = got[l - 1]
            acc.add(k, pad.numpy(), lengths=[L])
    for att in m.layers:
        att.capture = None
    return acc


@pytest.mark.parametrize("arch", ["llama", "mistral"])
def test_padded_batch_is_each_sequence_alone(models, arch):
    m = tiny_hf.TinyModel(models[arch])
    t = torch.as_tensor(ids(n=4, s=20))
    lens = [20, 13, 17, 9]
    am = (torch.arange(20).view(1, 20) < torch.tensor(lens).view(-1, 1)).long()
    r = maskpos.hf.probe(m, t, layers=[1, 2, 3], attention_mask=am, registry=REG, batch_size=3, progress=False,
                         per_head=True)
    want = _alone(m, t, lens, [1, 2, 3], False, per_head=True).result()
    assert sorted(r.arrays) == sorted(want.arrays)
    for k, v in want.arrays.items():
        f = np.isfinite(v)
        assert (np.isfinite(r.arrays[k]) == f).all(), k
        assert np.abs(r.arrays[k][f] - v[f]).max() <= 1e-12 * max(1.0, np.abs(v[f]).max()), k
    assert r.meta["n_by_position"] == [4] * 9 + [3] * 4 + [2] * 4 + [1] * 3
    assert np.isfinite(r.scores[0, 19, 19]) and np.isnan(r.scores_se[0, 19, 19])  # one sequence there: no standard error


def test_padded_bidirectional_masks_the_padding(models):
    """Without the causal mask a padded key would be attended: the capture masks each sequence's keys
    at its length, so every entry is the mean over the sequences that reach it of each one run alone
    (bidirectionally) at its own length."""
    m = tiny_hf.TinyModel(models["llama"])
    t = ids(n=3, s=20)
    lens = [20, 12, 16]
    am = (np.arange(20)[None, :] < np.array(lens)[:, None]).astype(np.int64)
    r = maskpos.hf.probe(m, t, layers=[1, 2], attention_mask=am, registry=REG, bidirectional=True, batch_size=3,
                         progress=False)
    alone = [maskpos.hf.probe(m, t[s:s + 1, :L], layers=[1, 2], registry=REG, bidirectional=True, progress=False).scores
             for s, L in enumerate(lens)]
    want = np.zeros((2, 20, 20))
    cnt = np.zeros((20, 20))
    for a, L in zip(alone, lens):
        want[:, :L, :L] += a
        cnt[:L, :L] += 1
    want /= cnt
    assert np.abs(r.scores - want).max() <= 1e-12 * np.abs(want).max()


class _Tok:
    """A stand-in tokenizer: ids of the letters, BOS 1 in front when asked (as HF's add_special_tokens)."""
    bos_token_id, pad_token_id = 1, 0

    def __call__(self, docs, add_special_tokens=True):
        one = isinstance(docs, str)
        rows = [([1] if add_special_tokens else []) + [3 + (ord(c) % 200) for c in d] for d in ([docs] if one else docs)]
        return {"input_ids": rows[0] if one else rows}


def test_pack_and_padded_texts(models):
    m = tiny_hf.TinyModel(models["llama"])
    docs = ["abcdefghij", "klmnopq", "rstuvwxyzabcdefghijklm"]
    r = maskpos.hf.probe(m, docs, tokenizer=_Tok(), seq=8, pack=True, layers=[1], registry=REG, progress=False)
    stream = [3 + (ord(c) % 200) for c in "".join(docs)]
    rows = [[1] + stream[k * 7:(k + 1) * 7] for k in range(len(stream) // 7)]
    want = maskpos.hf.probe(m, np.array(rows), layers=[1], registry=REG, progress=False)
    assert r.meta["n"] == len(rows) == 5 and r.meta["packed"] is True
    assert r.meta["stats_first_position"] == 1  # every packed row starts with BOS
    assert r.scores.tobytes() == want.scores.tobytes()
    # unpacked: each text its first 8 tokens, shorter ones padded (and probed at their length)
    r2 = maskpos.hf.probe(m, docs, tokenizer=_Tok(), seq=12, layers=[1], registry=REG, progress=False)
    assert r2.meta["n_by_position"][-1] == 1 and r2.meta["n_by_position"][0] == 3


def test_attention_kwargs_and_windows_checked(models):
    m = tiny_hf.TinyModel(models["llama"])
    m.layers[1].extra = {"s_aux": torch.zeros(4)}  # attention sinks: not implemented by the capture
    with pytest.raises(maskpos.Error, match=r"layer 2's attention was called with s_aux=Tensor, which maskpos' capture"):
        maskpos.hf.probe(m, ids(n=2), layers=[1, 2], registry=REG, progress=False)
    m.layers[1].extra = {"position_ids": torch.arange(20)}  # positions: known not to change eager attention
    maskpos.hf.probe(m, ids(n=2), layers=[1, 2], registry=REG, progress=False)
    w = tiny_hf.TinyModel(models["mistral"])
    w.layers[0].extra = {"sliding_window": 6}  # the model passes another window than its module says
    with pytest.raises(maskpos.Error, match="passes sliding_window=6, but the accumulator counts window 8"):
        maskpos.hf.probe(w, ids(n=2), layers=[1], registry=REG, progress=False)


def test_transformers_version_named(models, monkeypatch):
    import types
    m = tiny_hf.TinyModel(models["llama"])
    old = types.ModuleType("transformers")
    old.__version__ = "4.46.3"
    monkeypatch.setitem(sys.modules, "transformers", old)
    with pytest.raises(maskpos.Error, match=r"found transformers 4\.46\.3, needs >= 4\.51"):
        maskpos.hf.probe(m, ids(n=2), progress=False)
    new = types.ModuleType("transformers")
    new.__version__ = "4.55.0"  # a version number new enough, but no AttentionInterface in it
    monkeypatch.setitem(sys.modules, "transformers", new)
    with pytest.raises(maskpos.Error, match=r"found transformers 4\.55\.0 without AttentionInterface"):
        maskpos.hf.probe(m, ids(n=2), progress=False)
    monkeypatch.setitem(sys.modules, "transformers", None)  # not installed
    with pytest.raises(maskpos.Error, match=r"transformers is not installed \(needs >= 4\.51"):
        maskpos.hf.probe(m, ids(n=2), progress=False)


VAR = ("var_attn", "var_attn_se", "var_attn_heads", "var_attn_heads_se", "var_resid", "var_resid_se")


@pytest.mark.parametrize("arch", ["llama", "mistral"])
def test_hf_probe_variance_equals_maskpos_probe(models, arch):
    """stats="variance": the attention output from the capture, the residual stream from forward hooks
    on the decoder layers (the float64 tiny model against the C probe's float32 forward; measured at
    most 2.8e-7 of each array's largest value, the standard errors; 1.3e-7 the variances). Layers 1-2 of 3: the forward runs through layer 2's
    MLP and stops there (layer 3 never runs)."""
    d = models[arch]
    t = ids()
    m = tiny_hf.TinyModel(d)
    ran = []
    hk = m.decoder[2].register_forward_hook(lambda mod, i, o: ran.append(3))
    r = maskpos.hf.probe(m, t, layers=[1, 2], registry=REG, stats="variance", batch_size=2, progress=False)
    hk.remove()
    assert ran == [] and all(not h for h in (dm._forward_hooks for dm in m.decoder))
    p = maskpos.probe(d, tokens=t.astype(np.int32), layers="1-2", stats="variance", progress=False)
    for k in VAR:
        a, b = r.arrays[k], p.arrays[k]
        assert a.shape == b.shape, k
        dd = np.abs(a - b).max() / np.abs(b).max()
        assert dd < 5e-6, (k, dd)


FREQ = ("freq_q_norm", "freq_q_norm_se", "freq_k_norm", "freq_k_norm_se", "freq_contrib", "freq_contrib_se", "freq_angle",
        "freq_base")


@pytest.mark.parametrize("arch", ["llama", "mistral"])
def test_hf_probe_freq_position_equals_maskpos_probe(models, arch):
    """stats="freq,position": the queries and keys the attention function receives, the residual
    stream from the decoder layers' hooks, the geometry read from the model (head_dim, GQA, scaling,
    the rotary module's inv_freq, half-split pairs); against the C probe's float32 forward (measured
    at most 2.9e-7 of each freq array's largest value, pos_probe within 1.7e-9 relative)."""
    d = models[arch]
    t = ids(n=8)
    m = tiny_hf.TinyModel(d)
    r = maskpos.hf.probe(m, t, layers=[1, 2], registry=REG, stats="freq,position", pos_dim=16, batch_size=3,
                         progress=False)
    p = maskpos.probe(d, tokens=t.astype(np.int32), layers="1-2", stats="freq,position", pos_dim=16, progress=False)
    assert r.accumulator.options["rope_interleaved"] is False and r.accumulator.options["rot_dim"] == m.layers[0].HS
    worst = {}
    for k in FREQ:
        a, b = r.arrays[k], p.arrays[k]
        assert a.shape == b.shape, k
        worst[k] = float(np.abs(a - b).max() / np.abs(b).max())
    pa, pp = r.arrays["pos_probe"], p.arrays["pos_probe"]
    print("%s: freq within %.2g, pos_probe within %.2g" % (arch, max(worst.values()),
                                                           np.nanmax(np.abs(pa - pp)) / np.nanmax(np.abs(pp))))
    assert max(worst.values()) < 5e-6, worst
    assert np.array_equal(pa[:, 6:9], pp[:, 6:9])
    assert np.allclose(pa, pp, rtol=1e-5, atol=1e-6, equal_nan=True), pa - pp


def test_hf_probe_resid_stride(models):
    """resid_stride=2 with one sequence per batch: the residual stream of sequences 0, 2, 4 only, as
    maskpos.probe --resid-stride 2; in the other batches the forward stops after the deepest probed
    layer's attention (its decoder layer's output never computed)."""
    d = models["llama"]
    t = ids(n=5)
    m = tiny_hf.TinyModel(d)
    ran = []
    hk = m.decoder[1].register_forward_hook(lambda mod, i, o: ran.append(1))
    r = maskpos.hf.probe(m, t, layers=[1, 2], registry=REG, stats="variance,position", pos_dim=16, resid_stride=2,
                         batch_size=1, progress=False)
    hk.remove()
    assert len(ran) == 3
    p = maskpos.probe(d, tokens=t.astype(np.int32), layers="1-2", stats="variance,position", pos_dim=16, resid_stride=2,
                      progress=False)
    for k in ("var_resid", "var_resid_se", "var_attn", "pos_probe"):
        a, b = r.arrays[k], p.arrays[k]
        assert np.array_equal(np.isnan(a), np.isnan(b)), k
        f = ~np.isnan(b)
        assert np.abs(a[f] - b[f]).max() <= 5e-6 * np.abs(b[f]).max(), k
    assert r.meta["resid_stride"] == 2 and r.meta["resid_sequences"] == 3


def test_hf_probe_variance_refuses_padding(models):
    m = tiny_hf.TinyModel(models["llama"])
    am = np.ones((5, 20), dtype=np.int64)
    am[1, 15:] = 0
    with pytest.raises(maskpos.Error, match="lengths shorter than S cannot be counted with the variance statistic"):
        maskpos.hf.probe(m, ids(), registry=REG, stats="variance", attention_mask=am, progress=False)
