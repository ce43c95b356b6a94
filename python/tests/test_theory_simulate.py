"""test_theory_simulate.py — maskpos.theory and maskpos.simulate equal `maskpos theory` and
`maskpos simulate` byte for byte (np.save of the arrays, and the library's writer), with the same
meta.json apart from provenance, and raise maskpos.Error with the command's one-line message."""
import json
import os

import numpy as np
import pytest

import maskpos
from conftest import meta_without_provenance, same_bytes


def check_folder(py_result, cli_dir, tmp_path):
    """Every .npy of the command's folder: np.save of the Python array and the library's writer
    give the same bytes; meta.json holds the same result."""
    names = sorted(f[:-4] for f in os.listdir(cli_dir) if f.endswith(".npy"))
    assert names == sorted(py_result.arrays), (names, sorted(py_result.arrays))
    saved = tmp_path / "saved"
    py_result.save(saved)
    for n in names:
        np.save(tmp_path / ("np_" + n + ".npy"), py_result.arrays[n])
        assert same_bytes(tmp_path / ("np_" + n + ".npy"), os.path.join(cli_dir, n + ".npy")), n
        assert same_bytes(saved / (n + ".npy"), os.path.join(cli_dir, n + ".npy")), n
        assert np.array_equal(np.load(os.path.join(cli_dir, n + ".npy")), py_result.arrays[n], equal_nan=True)
    with open(os.path.join(cli_dir, "meta.json")) as f:
        cli_meta = json.load(f)
    with open(saved / "meta.json") as f:
        saved_meta = json.load(f)
    assert meta_without_provenance(cli_meta) == meta_without_provenance(py_result.meta)
    assert meta_without_provenance(saved_meta) == meta_without_provenance(py_result.meta)


def test_theory_equals_cli(cli, tmp_path):
    cli("theory", "--alpha", "0.2", "--n", "7", "--layers", "3", "--out", tmp_path / "cli")
    r = maskpos.theory(alpha=0.2, n=7, layers=3)
    assert r.kind == "theory"
    assert r.scores.shape == (7, 7) and r.arrays["layer_scores"].shape == (3, 7, 7)
    assert r.variance.shape == (3, 7) and r.variance_iid.shape == (3, 7)  # the attention output's variance
    check_folder(r, tmp_path / "cli", tmp_path)


def test_theory_closed_form_value():
    # README: S32 at alpha = 0 is 0.150818 (the paper prints 0.150)
    assert abs(maskpos.theory(alpha=0, n=3).scores[2, 1] - 0.150818) < 1e-6


@pytest.mark.parametrize("flags,kwargs", [
    (["--alpha", "0.3", "--rope"], dict(alpha=0.3, rope=True)),
    (["--norm", "layernorm", "--scale", "d", "--bidirectional"], dict(norm="layernorm", scale="d", bidirectional=True)),
    (["--layer-form", "recency", "--dim", "16", "--alpha", "0.5"], dict(layer_form="recency", dim=16, alpha=0.5)),
    (["--variance", "--alpha", "0.2"], dict(variance=True, alpha=0.2)),  # the five var_*.npy maps too
])
def test_simulate_equals_cli(cli, tmp_path, flags, kwargs):
    base = dict(batch=300, seq=12, layers=3, seed=7)
    cli("simulate", "--batch", "300", "--seq", "12", "--layers", "3", "--seed", "7", "--quiet", *flags,
        "--out", tmp_path / "cli")
    r = maskpos.simulate(**base, **kwargs, progress=False)
    assert r.scores.shape == (3, 12, 12)
    check_folder(r, tmp_path / "cli", tmp_path)
    assert ("var_attn" in r.arrays) == bool(kwargs.get("variance"))
    assert list(r.stats["layer"]) == [1, 2, 3]
    assert np.array_equal(r.stats["nri"], np.array([s["nri"] for s in r.meta["stats"]]))


def test_simulate_threads_do_not_change_bits(tmp_path):
    a = maskpos.simulate(batch=200, seq=8, dim=16, layers=2, rope=True, threads=1, progress=False)
    b = maskpos.simulate(batch=200, seq=8, dim=16, layers=2, rope=True, threads=2, progress=False)
    for n in a.arrays:
        assert a.arrays[n].tobytes() == b.arrays[n].tobytes(), n


@pytest.mark.parametrize("flags,call,cli_head,py_head", [
    (["simulate", "--alpha", "1.5"], lambda: maskpos.simulate(alpha=1.5), "--alpha: ", "alpha=1.5: "),
    (["simulate", "--batch", "0"], lambda: maskpos.simulate(batch=0), "--batch: ", "batch=0: "),
    (["simulate", "--norm", "l3"], lambda: maskpos.simulate(norm="l3"), "--norm: ", "norm='l3': "),
    (["simulate", "--rope", "--dim", "7"], lambda: maskpos.simulate(rope=True, dim=7, batch=10),
     "--rope needs an even --dim", "rope needs an even dim"),
    (["theory", "--alpha", "1.5"], lambda: maskpos.theory(alpha=1.5), "--alpha: ", "alpha=1.5: "),
    (["theory", "--n", "0"], lambda: maskpos.theory(n=0), "--n: ", "n=0: "),
])
def test_errors_carry_the_commands_message_in_python_terms(cli, flags, call, cli_head, py_head):
    """The same problem as the command reports, worded for Python: the argument as it was given
    (`alpha=1.5`), never a flag (`--alpha`)."""
    rc, out, err = cli(*flags, check=False)
    assert rc == 2
    prefix = "maskpos %s: error: " % flags[0]
    line = err.strip().splitlines()[-1]
    assert line.startswith(prefix + cli_head), err
    with pytest.raises(maskpos.Error) as e:
        call()
    assert str(e.value) == py_head + line[len(prefix + cli_head):]
    assert "--" not in str(e.value)


def test_load_saved_run_and_save_again(cli, tmp_path):
    cli("simulate", "--batch", "100", "--seq", "6", "--dim", "8", "--layers", "2", "--quiet", "--out", tmp_path / "cli")
    r = maskpos.load(tmp_path / "cli")
    assert r.kind == "simulate"
    for n in ("scores", "scores_se", "probs", "scores_diagnorm"):
        assert np.array_equal(r.arrays[n], np.load(tmp_path / "cli" / (n + ".npy")), equal_nan=True)
    assert r.diagnorm is r.arrays["scores_diagnorm"]
    # a loaded run saved again is the same folder, meta.json included, byte for byte
    r.save(tmp_path / "again")
    for f in os.listdir(tmp_path / "cli"):
        if not f.startswith("."):
            assert same_bytes(tmp_path / "cli" / f, tmp_path / "again" / f), f
    with pytest.raises(maskpos.Error, match="already holds"):
        r.save(tmp_path / "again")
    r.save(tmp_path / "again", force=True)


def test_load_errors(tmp_path):
    with pytest.raises(maskpos.Error, match="no meta.json"):
        maskpos.load(tmp_path)
    (tmp_path / "meta.json").write_text('{"kind": "simulate", "files": {"scores.npy": "x"}}')
    (tmp_path / "scores.npy").write_bytes(b"\x93NUMPY\x01\x00garbage")
    with pytest.raises(maskpos.Error, match="scores.npy"):
        maskpos.load(tmp_path)
