"""test_stats.py — statistics by name (the rows of the accumulator's table, src/model/probe.h):
maskpos.probe(stats=...) and maskpos.Accumulator(stats=...) take them as the command line's
--stats does, with the bits of their switches (probs=True), and refuse an unknown name with the
library's list; the accumulator's options give every optional statistic back, so its state
rebuilds it."""
import os

import numpy as np
import pytest

import maskpos
from conftest import ROOT, Cli

MODEL = os.path.join(ROOT, "models", "rope")


def test_probe_stats_by_name_is_the_switch():
    t = np.arange(3 * 16, dtype=np.int32).reshape(3, 16) % 200
    a = maskpos.probe(MODEL, tokens=t, layers=[1, 2], probs=True, progress=False)
    b = maskpos.probe(MODEL, tokens=t, layers=[1, 2], stats=["probs"], progress=False)
    c = maskpos.probe(MODEL, tokens=t, layers=[1, 2], stats="probs", progress=False)
    assert a.probs.shape == (2, 16, 16)
    for r in (b, c):
        assert np.array_equal(r.probs, a.probs) and np.array_equal(r.scores, a.scores, equal_nan=True)
        assert r.meta["attention_sink"] == a.meta["attention_sink"]
    assert maskpos.probe_options()["stats"][0] == "string"
    with pytest.raises(maskpos.Error, match="'entropie' is not a statistic of the probe .one of: probs,recency"):
        maskpos.probe(MODEL, tokens=t, layers=[1], stats=["probs", "entropie"], progress=False)


def test_accumulator_stats_by_name():
    acc = maskpos.Accumulator(n_layers=1, n_heads=2, seq=8, stats=["probs"])
    assert acc.options["probs"] and not acc.options["recency"] and acc.options["stats"] == ["probs"]
    both = maskpos.Accumulator(n_layers=1, n_heads=2, seq=8, probs=True, stats="recency")
    assert both.options["probs"] and both.options["recency"] and both.options["stats"] == ["probs", "recency"]
    s = np.random.default_rng(1).standard_normal((2, 2, 8, 8))
    both.add(0, s)
    again = maskpos.Accumulator.from_state(both.state_dict())
    assert again.options["stats"] == ["probs", "recency"] and again.n == 2
    plain = maskpos.Accumulator(n_layers=1, n_heads=2, seq=8, probs=True)
    assert plain.options["stats"] == ["probs"]
    plain.merge(acc)  # the same statistics, by switch or by name
    with pytest.raises(maskpos.Error, match="'nope' is not a statistic"):
        maskpos.Accumulator(n_layers=1, n_heads=2, seq=8, stats="probs,nope")


def test_variance_through_the_table(tmp_path):
    """probe(stats="variance") gives the arrays and slopes `maskpos probe --stats variance` writes, to
    the byte; the accumulator fed scores alone names the activations it lacks."""
    t = (np.arange(4 * 16, dtype=np.int32).reshape(4, 16) * 7) % 200
    r = maskpos.probe(MODEL, tokens=t, layers=[1, 2], stats="variance", progress=False)
    assert r.var_attn.shape == (2, 16) and r.var_resid.shape == (2, 16)
    assert r.var_attn_heads.ndim == 3 and r.var_attn_heads.shape[::2] == (2, 16)
    assert np.all(r.var_attn > 0) and np.all(r.var_attn_se > 0) and np.all(np.isfinite(r.var_resid_se))
    np.save(tmp_path / "ids.npy", t)
    Cli()("probe", MODEL, "--tokens", tmp_path / "ids.npy", "--layers", "1,2", "--stats", "variance", "--out",
          tmp_path / "o", "--quiet")
    for name in ("var_attn", "var_attn_se", "var_attn_heads", "var_attn_heads_se", "var_resid", "var_resid_se"):
        assert np.array_equal(getattr(r, name), np.load(tmp_path / "o" / (name + ".npy"))), name
    assert len(r.meta["variance_slope_attn"]) == 2 and r.meta["variance_slope_first_position"] == 1
    # the accumulator takes it with the activations (python/tests_torch/test_accumulator_var.py compares
    # it with the probe); fed scores alone, its result names the captures missing
    acc = maskpos.Accumulator(n_layers=1, n_heads=2, seq=8, stats="variance")
    acc.add(0, np.zeros((2, 8, 8)))
    with pytest.raises(maskpos.Error, match=r"layer 0 has 1 sequences of scores but 0 of attn_out \(ATTN_MIX\) captures"):
        acc.result()


def test_freq_and_rope_keep_high(tmp_path):
    """probe(stats="freq", rope_keep_high=0.5) gives the arrays `maskpos probe --stats freq
    --rope-keep-high 0.5` writes, to the byte, the lower half of the pairs at angle 0; a value outside
    [0, 1] is refused naming the argument; the accumulator, fed scores, refuses freq (it reads q, k)."""
    t = (np.arange(3 * 20, dtype=np.int32).reshape(3, 20) * 5) % 200
    r = maskpos.probe(MODEL, tokens=t, layers=[1, 2], stats="freq", rope_keep_high=0.5, progress=False)
    L, H, P = r.freq_q_norm.shape
    assert (L, r.freq_rest.shape[2], r.freq_angle.shape) == (2, 3, (2, P))
    assert np.all(r.freq_angle[:, : P // 2] > 0) and np.all(r.freq_angle[:, P // 2:] == 0)
    assert np.all(r.freq_contrib > 0) and np.all(np.isfinite(r.freq_contrib_se))
    np.save(tmp_path / "ids.npy", t)
    Cli()("probe", MODEL, "--tokens", tmp_path / "ids.npy", "--layers", "1,2", "--stats", "freq", "--rope-keep-high", "0.5",
          "--out", tmp_path / "o", "--quiet")
    for name in ("freq_q_norm", "freq_q_norm_se", "freq_k_norm", "freq_contrib", "freq_contrib_se", "freq_rest", "freq_angle",
                 "freq_base"):
        assert np.array_equal(getattr(r, name), np.load(tmp_path / "o" / (name + ".npy"))), name
    assert r.meta["rope_unrotated_pairs"] == P - P // 2
    with pytest.raises(maskpos.Error, match="rope_keep_high"):
        maskpos.probe(MODEL, tokens=t, layers=[1], rope_keep_high=1.5, progress=False)
    with pytest.raises(maskpos.Error, match="'freq' reads the queries and keys per RoPE pair: give head_dim"):
        maskpos.Accumulator(n_layers=1, n_heads=2, seq=8, stats="freq")


def test_position_through_the_table(tmp_path):
    """probe(stats="position", pos_dim=, pos_stride=, pos_ridge=) gives the pos_probe.npy that
    `maskpos probe --stats position` with the same flags writes, to the byte, and its settings in
    meta.json; the accumulator, made without the residual stream's width, refuses it and names it."""
    t = (np.arange(8 * 16, dtype=np.int32).reshape(8, 16) * 7) % 200
    r = maskpos.probe(MODEL, tokens=t, layers=[1, 2], stats="position", pos_dim=8, pos_stride=2, pos_ridge=0.01,
                      progress=False)
    assert r.pos_probe.shape == (2, 11) and np.all(np.isfinite(r.pos_probe))
    assert r.meta["position_probe"]["features"] == 8 and r.meta["position_probe"]["stride"] == 2
    np.save(tmp_path / "ids.npy", t)
    Cli()("probe", MODEL, "--tokens", tmp_path / "ids.npy", "--layers", "1,2", "--stats", "position", "--pos-dim", "8",
          "--pos-stride", "2", "--pos-ridge", "0.01", "--out", tmp_path / "o", "--quiet")
    assert np.array_equal(r.pos_probe, np.load(tmp_path / "o" / "pos_probe.npy"))
    with pytest.raises(maskpos.Error, match="'position' reads the residual stream: give resid_width"):
        maskpos.Accumulator(n_layers=1, n_heads=2, seq=8, stats="position")
