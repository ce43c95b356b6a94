"""test_adversarial.py — the Python inputs of the adversarial tours (issue 40; the command-line ones
are tests/test_adversarial.c and tests/test_badinput.c): what crosses from Python into C is checked
first — a string with a NUL byte is refused at every crossing (ctypes cut it: save('a\\0b') wrote
folder 'a', tokens='tok.npy\\0x' read tok.npy, layers='1\\0 2' probed layer 1, compute='bf16\\0x'
ran bf16), an integer outside its C type is refused before anything is allocated
(Accumulator(window=2**32+3) masked like 3, Accumulator(2**31, 2, 8) met the OOM killer), and
Accumulator.add() from several threads adds every batch once (it lost updates 1 try in 6).
Also the tour's weak spots: from_state with NaN sums or counts of 2^62, layers=[1.5], bare
AttributeError/KeyError, pickling and copying an Accumulator, a failing progress display, load()
through a symbolic link out of the run folder, save() into a folder of temporaries' names.
Each case failed with the package and library of main at adce9dc."""
import copy
import os
import pickle
import subprocess
import sys
import threading
import warnings

import numpy as np
import pytest

import maskpos
from conftest import ROOT

MODEL = os.path.join(ROOT, "models", "rope")


def ids(n=2, s=8, seed=5):
    return np.random.default_rng(seed).integers(1, 256, size=(n, s)).astype(np.int32)


def refused(match, f, *args, **kwargs):
    with pytest.raises(maskpos.Error, match=match):
        f(*args, **kwargs)


# ---------------------------------------------------------------- NUL bytes, every crossing

NUL = "holds a NUL byte"


def test_nul_in_paths_refused(tmp_path):
    r = maskpos.theory(n=4)
    refused(NUL, r.save, str(tmp_path / "a\0b"))
    assert not (tmp_path / "a").exists()  # (was: folder 'a' written)
    refused(NUL, maskpos.load, str(tmp_path / "a\0b"))
    refused(NUL, maskpos.Model, MODEL + "\0x")
    refused(NUL, maskpos.tokenize, MODEL + "\0x", "text")
    refused(NUL, maskpos.detokenize, MODEL + "\0x", [1, 2])
    refused(NUL, maskpos.plot, np.zeros((1, 4, 4)), str(tmp_path / "p.png\0.svg"))
    assert not (tmp_path / "p.png").exists()
    acc = maskpos.Accumulator(1, 1, 4)
    acc.add(0, np.zeros((1, 1, 4, 4)))
    refused(NUL, acc.save_state, str(tmp_path / "s.bin\0x"))
    refused(NUL, maskpos.Accumulator.load_state, str(tmp_path / "s.bin\0x"), n_layers=1, n_heads=1, seq=4)
    refused(NUL, acc.save, str(tmp_path / "acc\0b"))


def test_nul_in_settings_refused(tmp_path):
    np.save(tmp_path / "tok.npy", ids())
    tok = str(tmp_path / "tok.npy")
    refused(NUL, maskpos.probe, MODEL, tokens=tok + "\0x", progress=False)  # (was: read tok.npy)
    refused(NUL, maskpos.probe, MODEL, tokens=ids(), layers="1\0 2", progress=False)  # (was: layer 1 only)
    refused(NUL, maskpos.probe, MODEL, tokens=ids(), compute="bf16\0x", progress=False)  # (was: ran bf16)
    refused(NUL, maskpos.probe, MODEL, data=tok + "\0x", n=1, seq=8, progress=False)
    refused(NUL, maskpos.theory, n="3\0 4")
    refused(NUL, maskpos.simulate, batch=20, seq=5, dim=4, layers=2, layer_form="paper\0x", progress=False)
    refused(NUL, maskpos.logits, MODEL, [1, 2, 3], compute="bf16\0x")
    refused(NUL, maskpos.generate, MODEL, n=1, length=4, compute="f32\0x")
    refused(NUL, maskpos.plot, np.zeros((1, 4, 4)), str(tmp_path / "p.png"), title="a\0b")
    refused(NUL, maskpos.plot, np.zeros((1, 4, 4)), str(tmp_path / "p.png"), cmap="vlag\0x")
    refused(NUL, maskpos.plot, np.zeros((1, 4, 4)), str(tmp_path / "p.png"), preset="fig1\0x")
    acc = maskpos.Accumulator(1, 1, 4)
    refused(NUL, acc.add_sums, 0, 1, {"sum\0x": np.zeros(16)})
    # a NUL inside text to tokenize is text (a buffer with its length), not a C string
    assert list(maskpos.tokenize(MODEL, "a\0b", special=False)) == [97, 0, 98]


# ---------------------------------------------------------------- integers into C

def test_integers_checked_before_allocation():
    refused(r"window=4294967299: outside", maskpos.Accumulator, 2, 2, 8, window=2 ** 32 + 3)  # (was: window 3)
    refused(r"window\[1\]=-1", maskpos.Accumulator, 2, 2, 8, window=[4, -1])
    refused(r"layer_ids\[0\]=4294967297", maskpos.Accumulator, 1, 2, 8, layer_ids=[2 ** 32 + 1])
    refused(r"n_layers=2.5: not a whole number", maskpos.Accumulator, 2.5, 2, 8)
    for args in ((2 ** 31, 2, 8), (2 ** 30, 2, 8), (4, 2 ** 40, 8), (4, 2, 2 ** 62)):
        with pytest.raises(maskpos.Error):
            maskpos.Accumulator(*args, window=3)
    # sizes the library refuses are refused before a per-layer list is built: in a process whose
    # address space is capped at 2 GiB a list of 2^30 windows (8 GiB) cannot be made, so the
    # Error must come first (main: MemoryError there; uncapped, killed at 24 GB). Not under
    # AddressSanitizer, which reserves terabytes of address space.
    if "libasan" not in os.environ.get("LD_PRELOAD", ""):
        code = ("import resource, maskpos; resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))\n"
                "try:\n    maskpos.Accumulator(2 ** 30, 2, 8, window=3)\nexcept maskpos.Error as e:\n    print(e)")
        env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"))
        p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
        assert p.returncode == 0 and "n_layers 1073741824 is outside" in p.stdout, (p.returncode, p.stdout, p.stderr)
    acc = maskpos.Accumulator(1, 1, 4)
    refused(r"count=4611686018427387904: outside", acc.add_sums, 0, 2 ** 62, {})
    with maskpos.Model(MODEL) as m:
        refused(r"length=4294967300: outside", maskpos.generate, m, n=1, length=2 ** 32 + 4)
        refused(r"n_layers=5: outside", maskpos.model_scores, m, [1, 2, 3], 5)
    refused(r"layers=4294967297: outside", maskpos.plot, np.zeros((2, 4, 4)), "/nonexistent/p.png",
            layers=[2 ** 32 + 1])


def test_layer_numbers_are_whole():
    refused(r"layers=\[1.5\]: 1.5 is not a layer number", maskpos.probe, MODEL, tokens=ids(), layers=[1.5],
            progress=False)  # (was: layer 1 probed)
    p = maskpos.probe(MODEL, tokens=ids(), layers=[np.int64(2), 3.0], progress=False)
    assert p.meta["layers"] == [2, 3]


# ---------------------------------------------------------------- threads

def test_accumulator_add_from_threads():
    """4 threads add the same batch 16 times each: added one at a time, in any order, the sums
    are those of one thread adding it 64 times, bit for bit (main lost updates: sums off while the
    counts read 64)."""
    x = np.random.default_rng(7).standard_normal((1, 4, 64, 64))  # (big enough for the adds to overlap:
    batches = [x] * 64                                              # main lost some in 4-11 of 20 trials)
    one = maskpos.Accumulator(1, 4, 64, per_head=True)
    for b in batches:
        one.add(0, b)
    want = one.state_dict()["arrays"]
    for trial in range(20):
        acc = maskpos.Accumulator(1, 4, 64, per_head=True)
        start = threading.Barrier(4)

        def work(k):
            start.wait()
            for b in batches[k::4]:
                acc.add(0, b)

        ts = [threading.Thread(target=work, args=(k,)) for k in range(4)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        assert acc.n == 64
        got = acc.state_dict()["arrays"]
        for name in want:
            assert np.array_equal(got[name], want[name]), "trial %d: sum %s differs" % (trial, name)


def test_save_from_threads_into_one_folder(tmp_path):
    """Two threads save() into one folder at once: one wins, the other is refused (never both)."""
    r = maskpos.theory(n=50)
    for trial in range(4):
        out, errors = tmp_path / ("t%d" % trial), []
        start = threading.Barrier(2)

        def work():
            start.wait()
            try:
                r.save(out)
            except maskpos.Error as e:
                errors.append(str(e))

        ts = [threading.Thread(target=work) for _ in range(2)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        assert len(errors) == 1, errors
        assert "another maskpos run" in errors[0] or "already holds" in errors[0]
        assert maskpos.load(out).scores.shape == (50, 50)


# ---------------------------------------------------------------- weak spots

def test_from_state_and_bad_arguments():
    """Sums no run gives, and arguments that raised a bare AttributeError/IndexError/TypeError or
    were taken silently: each a maskpos.Error."""
    acc = maskpos.Accumulator(1, 1, 4)
    acc.add(0, np.ones((2, 1, 4, 4)))
    d = acc.state_dict()
    d["arrays"]["sum"] = d["arrays"]["sum"].copy()
    d["arrays"]["sum"][3] = np.nan
    refused("holds NaN", maskpos.Accumulator.from_state, d)
    d = acc.state_dict()
    d["counts"] = [2 ** 62]
    refused(r"counts\[0\]=4611686018427387904: outside", maskpos.Accumulator.from_state, d)
    refused("accumulator state: no 'options'", maskpos.Accumulator.from_state, {})
    refused("options lack n_heads, n_layers, seq", maskpos.Accumulator.from_state,
            {"options": {}, "counts": [], "arrays": {}})  # (main: TypeError, missing arguments)
    refused("merge: another Accumulator is needed", acc.merge, 5)  # (main: AttributeError)
    refused("sums must be a dict", acc.add_sums, 0, 1, [1, 2])  # (main: IndexError)
    refused("meta must be a dict", maskpos.Accumulator, 1, 1, 4, meta=[1])
    refused("text: a str", maskpos.tokenize, MODEL, 5)  # (main: five NUL bytes tokenized)
    refused("prompt=\\[\\]: no token ids", maskpos.generate, MODEL, n=1, length=4, prompt=[])
    with maskpos.Model(MODEL) as m:
        refused("one sequence of token ids", maskpos.model_scores, m, [[1, 2], [3, 4]], 2)  # (main: flattened)


def test_accumulator_pickle_and_copy():
    acc = maskpos.Accumulator(2, 2, 8, per_head=True, meta={"model": "x"})
    x = np.random.default_rng(2).standard_normal((3, 2, 8, 8))
    acc.add(0, x)
    acc.add(1, x)
    for other in (pickle.loads(pickle.dumps(acc)), copy.deepcopy(acc), copy.copy(acc)):
        assert other is not acc and other.n == 3 and other.meta == {"model": "x"}
        a, b = acc.result(), other.result()
        for k in a.arrays:
            assert np.array_equal(a.arrays[k], b.arrays[k], equal_nan=True), k
        other.add(0, x)  # independent sums
        assert acc.counts == [3, 3]


def test_progress_display_failure_is_said(monkeypatch):
    import sys

    class Broken:
        def write(self, s):
            raise OSError("display gone")

        def flush(self):
            pass

        def isatty(self):
            return True

    monkeypatch.setitem(sys.modules, "tqdm", None)  # the plain line, written to the broken stderr
    monkeypatch.setattr(sys, "stderr", Broken())
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        r = maskpos.simulate(batch=200, seq=5, dim=4, layers=2, progress=True)
    assert r.scores.shape == (2, 5, 5)
    assert any("progress display failed" in str(x.message) for x in w), [str(x.message) for x in w]


def test_load_stays_inside_the_run_folder(tmp_path):
    maskpos.theory(n=4).save(tmp_path / "run")
    outside = tmp_path / "outside.npy"
    np.save(outside, np.zeros((4, 4)))
    os.replace(tmp_path / "run" / "layer2_scores.npy", tmp_path / "moved.npy")
    os.symlink(outside, tmp_path / "run" / "layer2_scores.npy")
    refused("outside the run folder", maskpos.load, tmp_path / "run")
    os.remove(tmp_path / "run" / "layer2_scores.npy")
    os.symlink("../moved.npy", tmp_path / "run" / "layer2_scores.npy")
    refused("outside the run folder", maskpos.load, tmp_path / "run")


def test_save_never_clears_a_folder_of_temporaries_names(tmp_path):
    """A folder whose entries all look like maskpos temporaries is not empty (was: deleted)."""
    d = tmp_path / "photos"
    (d / "photos.old.2023").mkdir(parents=True)
    (d / "photos.old.2023" / "a.jpg").write_bytes(b"jpg")
    (d / "draft.tmp.1").write_text("draft")
    for force in (False, True):
        refused("not empty and holds no maskpos run", maskpos.theory(n=4).save, d, force=force)
    assert (d / "photos.old.2023" / "a.jpg").read_bytes() == b"jpg" and (d / "draft.tmp.1").exists()
