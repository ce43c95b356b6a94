"""test_model_calls.py — tokenize, detokenize, logits, generate and plot from Python (issue #30
item 3) equal the commands that do the same (`maskpos tokenize`, `tokenize --decode`, `logits
--out`, `generate --out`, `plot`) byte for byte, on the embedded byte-level model (models/rope)
and on a GGUF with a BPE vocabulary written by `maskpos mkmodel`."""
import os
import shutil

import numpy as np
import pytest

import maskpos
from conftest import ROOT, same_bytes

ROPE = os.path.join(ROOT, "models", "rope")
TEXT = "In the beginning God created the heaven and the earth."


@pytest.fixture(scope="module")
def gguf(tmp_path_factory):
    from conftest import Cli
    path = tmp_path_factory.mktemp("m") / "llama.gguf"
    Cli()("mkmodel", "--arch", "llama", "--layers", "2", "--vocab", "300", "--format", "gguf", path)
    return str(path)


@pytest.mark.parametrize("which", ["rope", "gguf"])
def test_tokenize_and_detokenize_equal_the_command(cli, tmp_path, gguf, which):
    model = ROPE if which == "rope" else gguf
    (tmp_path / "t.txt").write_text(TEXT)
    for special, flags in ((True, []), (False, ["--no-special"])):
        _, out, _ = cli("tokenize", "--model", model, *flags, tmp_path / "t.txt")
        ids = maskpos.tokenize(model, TEXT, special=special)
        assert ids.dtype == np.int32 and ids.tolist() == [int(x) for x in out.split()]
    ids = maskpos.tokenize(maskpos.Model(model), TEXT)
    (tmp_path / "ids.txt").write_text(" ".join(map(str, ids)))
    for skip, flags in ((False, []), (True, ["--skip-special"])):
        _, out, _ = cli("tokenize", "--model", model, "--decode", *flags, tmp_path / "ids.txt")
        assert maskpos.detokenize(model, ids, skip_special=skip) == out
    assert maskpos.detokenize(model, ids, skip_special=True) == TEXT
    assert maskpos.tokenize(model, "").size <= 2


def test_logits_equal_the_command(cli, tmp_path, gguf):
    for model, ids in ((ROPE, [256, 73, 110, 32, 116]), (gguf, [298, 5, 77, 140, 3, 9])):
        cli("logits", model, "--tokens", ",".join(map(str, ids)), "--out", tmp_path / "lp.npy", "--force")
        lp = maskpos.logits(model, ids)
        np.save(tmp_path / "py.npy", lp)
        assert same_bytes(tmp_path / "py.npy", tmp_path / "lp.npy")
        raw = maskpos.logits(model, ids, log_probs=False)
        # log_softmax of the raw logits, computed here in double from the same f32 values
        ref = raw - (raw.max(1, keepdims=True) + np.log(np.exp(raw - raw.max(1, keepdims=True)).sum(1, keepdims=True)))
        assert np.abs(ref - lp).max() < 1e-12
    with pytest.raises(maskpos.Error, match=r"^tokens: id 300 \(position 1\) is outside the vocabulary \[0, 300\)$"):
        maskpos.logits(gguf, [1, 300])


def test_generate_equals_the_command(cli, tmp_path, gguf):
    cli("generate", gguf, "--n", "3", "--len", "10", "--seed", "5", "--top-k", "20", "--out", tmp_path / "g.npy",
        "--quiet")
    g = maskpos.generate(gguf, n=3, length=10, seed=5, top_k=20)
    np.save(tmp_path / "py.npy", g)
    assert g.shape == (3, 10) and same_bytes(tmp_path / "py.npy", tmp_path / "g.npy")
    cli("generate", ROPE, "--greedy", "--len", "24", "--prompt", "In the", "--out", tmp_path / "r.npy", "--quiet")
    r = maskpos.generate(ROPE, greedy=True, length=24, prompt="In the", threads=1)
    assert np.array_equal(r, np.load(tmp_path / "r.npy"))
    assert maskpos.detokenize(ROPE, r[0], skip_special=True).startswith("In the")
    with pytest.raises(maskpos.Error, match="exceed the model's context"):
        maskpos.generate(ROPE, length=129)


def test_plot_draws_what_the_command_draws(cli, tmp_path):
    cli("simulate", "--batch", "50", "--seq", "8", "--dim", "8", "--layers", "3", "--quiet", "--out", tmp_path / "s")
    # the residue as the command draws it for a run (issue 39): vlag centred on 0, percentile limits, a
    # title, and each layer's significance from the meta.json beside the maps
    cli("plot", tmp_path / "s" / "scores.npy", "-o", tmp_path / "c.png", "--preset", "fig5", "--layers", "1-3",
        "--title", "simulate, N = 50, S = 8")
    os.makedirs(tmp_path / "bare")  # maps without their run's meta.json: no significance to show
    shutil.copy(tmp_path / "s" / "scores.npy", tmp_path / "bare" / "scores.npy")
    cli("plot", tmp_path / "bare" / "scores.npy", "-o", tmp_path / "c5.png", "--preset", "fig5", "--layers", "1,3")
    r = maskpos.load(tmp_path / "s")
    assert r.plot(tmp_path / "p.png") == tmp_path / "p.png"
    assert same_bytes(tmp_path / "p.png", tmp_path / "c.png")
    maskpos.plot(r.scores, tmp_path / "p5.png", preset="fig5", layers=[1, 3])
    assert same_bytes(tmp_path / "p5.png", tmp_path / "c5.png")
    with pytest.raises(maskpos.Error, match="exists"):
        r.plot(tmp_path / "p.png")
    r.plot(tmp_path / "p.png", force=True)
    with pytest.raises(maskpos.Error, match=r"^layers=\[4\]: layer 4 does not exist \(the maps have 3\)$"):
        maskpos.plot(r.scores, tmp_path / "x.png", layers=[4])
    assert not os.path.exists(tmp_path / "x.png")
