"""test_probe.py — maskpos.probe equals `maskpos probe` byte for byte on the embedded RoPE model
(models/rope: 4 layers, byte tokenizer): tokens from a numpy array, from a token file and from
text; the counterfactuals and per-head maps; errors carry the command's message; Ctrl-C stops a
long run cleanly."""
import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

import maskpos
from conftest import ROOT, meta_without_provenance, same_bytes

MODEL = os.path.join(ROOT, "models", "rope")


def ids(n=6, s=24, seed=1):
    rng = np.random.default_rng(seed)
    return rng.integers(0, 256, size=(n, s)).astype(np.int32)


def compare(py, cli_dir, tmp_path, meta_skip=()):
    os.makedirs(tmp_path, exist_ok=True)
    names = sorted(f[:-4] for f in os.listdir(cli_dir) if f.endswith(".npy"))
    assert names and names == sorted(py.arrays), (names, sorted(py.arrays))
    for n in names:
        np.save(tmp_path / ("np_" + n + ".npy"), py.arrays[n])
        assert same_bytes(tmp_path / ("np_" + n + ".npy"), os.path.join(cli_dir, n + ".npy")), n
    py.save(tmp_path / "saved")
    for n in names:
        assert same_bytes(tmp_path / "saved" / (n + ".npy"), os.path.join(cli_dir, n + ".npy")), n
    with open(os.path.join(cli_dir, "meta.json")) as f:
        cm = meta_without_provenance(json.load(f))
    pm = meta_without_provenance(py.meta)
    for k in meta_skip:
        cm.pop(k, None)
        pm.pop(k, None)
    assert cm == pm


@pytest.mark.parametrize("flags,kwargs", [
    (["--layers", "1,2"], dict(layers=[1, 2])),
    (["--layers", "1-4", "--bidirectional", "--per-head"], dict(layers="1-4", bidirectional=True, per_head=True)),
    (["--layers", "3", "--no-rope", "--probs"], dict(layers=[3], no_rope=True, probs=True)),
])
def test_probe_tokens_array_equals_cli(cli, tmp_path, flags, kwargs):
    t = ids()
    np.save(tmp_path / "ids.npy", t)
    cli("probe", MODEL, "--tokens", tmp_path / "ids.npy", "--quiet", *flags, "--out", tmp_path / "cli")
    with maskpos.Model(MODEL) as m:
        assert (m.layers, m.heads, m.context, m.vocab) == (4, 4, 128, 257)
        r = maskpos.probe(m, tokens=t, progress=False, **kwargs)
    assert r.kind == "probe"
    L = len(kwargs["layers"]) if isinstance(kwargs["layers"], list) else 4
    assert r.scores.shape == (L, 24, 24) and r.scores_se.shape == r.diagnorm.shape == r.scores.shape
    assert len(r.stats["nri"]) == L
    # the token source is recorded differently (a file's path and hash vs an array's)
    compare(r, tmp_path / "cli", tmp_path, meta_skip=("tokens", "tokens_path", "data", "tokens_file"))


def test_probe_token_file_and_text_equal_cli(cli, tmp_path):
    np.save(tmp_path / "ids.npy", ids(n=4, s=16))
    cli("probe", MODEL, "--tokens", tmp_path / "ids.npy", "--layers", "2", "--quiet", "--out", tmp_path / "cli")
    r = maskpos.probe(MODEL, tokens=str(tmp_path / "ids.npy"), layers=[2], progress=False)
    compare(r, tmp_path / "cli", tmp_path)
    docs = ["In the beginning God created the heaven and the earth. " * 2,
            "And the earth was without form, and void; and darkness was upon the face of the deep."]
    with open(tmp_path / "docs.jsonl", "w") as f:
        for d in docs:
            f.write(json.dumps({"text": d}) + "\n")
    cli("probe", MODEL, "--data", tmp_path / "docs.jsonl", "--n", "2", "--seq", "40", "--layers", "1,2", "--quiet",
        "--out", tmp_path / "cli_text")
    r = maskpos.probe(MODEL, text=docs, seq=40, layers=[1, 2], progress=False)
    compare(r, tmp_path / "cli_text", tmp_path / "t", meta_skip=("data", "corpus", "data_path"))


def test_probe_errors_carry_the_commands_message(cli, tmp_path):
    bad = ids(n=2, s=8)
    bad[1, 3] = 300  # >= vocab 257
    np.save(tmp_path / "bad.npy", bad)
    rc, out, err = cli("probe", MODEL, "--tokens", tmp_path / "bad.npy", "--out", tmp_path / "o", check=False)
    assert rc == 2
    line = err.strip().splitlines()[-1]
    assert line.startswith("maskpos probe: error: ")
    with pytest.raises(maskpos.Error) as e:
        maskpos.probe(MODEL, tokens=str(tmp_path / "bad.npy"), progress=False)
    assert str(e.value) == line[len("maskpos probe: error: "):]
    rc, out, err = cli("probe", tmp_path / "no-such-model", "--tokens", tmp_path / "bad.npy", "--out", tmp_path / "p",
                       check=False)
    line = err.strip().splitlines()[-1]
    with pytest.raises(maskpos.Error) as e:
        maskpos.Model(tmp_path / "no-such-model")
    assert str(e.value) == line[len("maskpos probe: error: "):]
    with pytest.raises(maskpos.Error, match=r"^layers=\[9\]: layer 9 does not exist \(the model has 4\)$"):
        maskpos.probe(MODEL, tokens=ids(), layers=[9], progress=False)
    with pytest.raises(maskpos.Error, match="exactly one of"):
        maskpos.probe(MODEL, progress=False)


CTRL_C = r"""
import sys, numpy as np
sys.path.insert(0, sys.argv[1])
import maskpos
t = np.random.default_rng(0).integers(0, 256, size=(100000, 128)).astype(np.int32)
try:
    if sys.argv[3] == "probe":
        maskpos.probe(sys.argv[2], tokens=t, layers=[1], threads=1, progress=True)
    else:
        maskpos.simulate(batch=3 * 10**5, seq=32, dim=32, layers=2, progress=True)
except KeyboardInterrupt as e:
    print("interrupted:", e, flush=True)
    sys.exit(3)
print("finished", flush=True)
"""


@pytest.mark.parametrize("job", ["probe", "simulate"])
def test_ctrl_c_stops_cleanly(tmp_path, job):
    p = subprocess.Popen([sys.executable, "-c", CTRL_C, os.path.join(ROOT, "python"), MODEL, job],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    # wait for the first progress line (a plain line: tqdm is not a dependency), then Ctrl-C
    seen = ""
    t0 = time.monotonic()
    while job + ":" not in seen and time.monotonic() - t0 < 60:
        seen += p.stderr.read(1)
    assert job + ":" in seen, seen
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=60)
    assert p.returncode == 3, (out, err)
    assert "interrupted: maskpos: %s stopped by Ctrl-C" % job in out
