"""test_hfcache.py — maskpos.Model, probe and tokenize take a hub id ("org/name") and find it in the
local HF hub cache (HF_HUB_CACHE / HF_HOME, refs/main -> snapshots/<commit>), offline; a missing one
raises maskpos.Error naming the cache folder (tests/test_hfcache.c covers the command line)."""
import os
import shutil

import numpy as np
import pytest

import maskpos
from conftest import ROOT

COMMIT = "89abcdef" * 5


@pytest.fixture
def cache(tmp_path, cli, monkeypatch):
    cli("mkmodel", "--arch", "llama", "--layers", "2", "--vocab", "300", tmp_path / "src")
    repo = tmp_path / "hub" / "models--acme--tiny"
    snap = repo / "snapshots" / COMMIT
    os.makedirs(repo / "blobs")
    os.makedirs(repo / "refs")
    os.makedirs(snap)
    for k, f in enumerate(sorted(os.listdir(tmp_path / "src"))):
        shutil.move(str(tmp_path / "src" / f), str(repo / "blobs" / ("blob%d" % k)))
        os.symlink(os.path.join("..", "..", "blobs", "blob%d" % k), snap / f)
    (repo / "refs" / "main").write_text(COMMIT)
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    monkeypatch.setenv("HF_HOME", str(tmp_path))  # HF_HOME/hub
    monkeypatch.chdir("/")
    return snap


def test_hub_id_from_cache(cache):
    with maskpos.Model("acme/tiny") as m:
        assert m.path == "acme/tiny" and m.layers == 2
    ids = np.random.default_rng(0).integers(3, 290, size=(3, 16)).astype(np.int32)
    a = maskpos.probe("acme/tiny", tokens=ids, progress=False)
    b = maskpos.probe(str(cache), tokens=ids, progress=False)
    assert a.scores.tobytes() == b.scores.tobytes() and a.meta["model"].endswith(COMMIT)


def test_missing_id_named(cache, monkeypatch, tmp_path):
    with pytest.raises(maskpos.Error, match=r"^acme/other: no such file or folder, and not in the local HF cache \(%s/hub, "
                                            r"from HF_HOME: no models--acme--other\)" % str(tmp_path).replace(".", r"\.")):
        maskpos.Model("acme/other")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "elsewhere"))  # HF_HUB_CACHE comes first
    with pytest.raises(maskpos.Error, match="from HF_HUB_CACHE"):
        maskpos.Model("acme/tiny")
