"""test_notebook_api.py — a Result in a notebook (issue 39): plot() to a path, a file object or bytes
with the command's look for a run (the residue in vlag centred on 0 with symmetric percentile
limits, a title, each layer's significance under its panel: read back from the PNG's
"maskpos:panels" text), _repr_png_ and _repr_html_, table() as a tidy pandas DataFrame,
to_xarray() with named dimensions, view() / maskpos.view writing the viewer's page; and the loose
ends: recency_probability is [L], __all__ lists each name once.
"""
import io
import os
import struct
import zlib

import numpy as np
import pytest

import maskpos
from conftest import ROOT

ROPE = os.path.join(ROOT, "models", "rope")


def png_panels(data):
    """The PNG's tEXt chunk maskpos:panels as lines of tab-separated fields."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    at = 8
    while at < len(data):
        n, kind = struct.unpack(">I4s", data[at:at + 8])
        body = data[at + 8:at + 8 + n]
        if kind == b"tEXt" and body.startswith(b"maskpos:panels\x00"):
            return [ln.split("\t") for ln in body.split(b"\x00", 1)[1].decode("latin-1").splitlines()]
        at += 12 + n
    return None


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    d = tmp_path_factory.mktemp("nb") / "p"
    r = maskpos.probe(ROPE, data=os.path.join(ROOT, "models", "kjv.txt"), pack=True, n=60, seq=64, layers=[1, 2, 3, 4],
                      recency=True, progress=False)
    r.save(d)
    return maskpos.load(d)


def test_plot_targets_and_look(run, tmp_path):
    buf = io.BytesIO()
    assert run.plot(buf) is buf  # a file object (raised TypeError before issue 39)
    png = buf.getvalue()
    assert png == run.plot() == run._repr_png_()  # bytes when no path
    rows = png_panels(png)
    assert [r[0] for r in rows] == ["Layer 1", "Layer 2", "Layer 3", "Layer 4"]
    for r, z in zip(rows, run.meta["residue_block_z"]):
        assert r[1] == "vlag" and float(r[2]) == -float(r[3])  # the signed residue, centred on 0
        assert r[4].startswith("block z %.2f" % z) and "N = 60" in r[4]  # its significance
    assert not any(run.resolved)  # 60 sequences resolve none of these: every note says so
    assert all("not resolved at N = 60" in r[4] for r in rows)
    pdf = io.BytesIO()
    pdf.name = "figure.pdf"  # the format from the file object's name
    run.plot(pdf)
    assert pdf.getvalue().startswith(b"%PDF")
    svg = run.plot(io.BytesIO(), format="svg").getvalue()
    assert b"<svg" in svg[:400]
    assert run.plot(tmp_path / "f.png") == tmp_path / "f.png" and os.path.getsize(tmp_path / "f.png") == len(png)
    raw = png_panels(run.plot(array="scores", cmap="rocket"))  # another array, another look when asked
    assert raw[0][1] == "rocket" and len(raw[0]) == 5


def test_html_table_xarray(run):
    html = run._repr_html_()
    assert "<table>" in html and "resolved" in html and "data:image/png;base64," in html and ">NO<" in html
    t = run.table()
    assert list(t["layer"]) == [1, 2, 3, 4] and list(t["resolved"]) == list(run.resolved)
    for col in ("nri", "nri_corrected", "block_z", "z_needed", "n_needed", "residue_z_rms"):
        assert col in t.columns, col
    assert np.allclose(t["block_z"], run.meta["residue_block_z"])
    ds = run.to_xarray()
    assert ds["scores"].dims == ("layer", "query", "key") and list(ds["layer"].values) == [1, 2, 3, 4]
    assert np.array_equal(ds["scores"].sel(layer=2).values, run.scores[1], equal_nan=True)
    assert list(ds["key"].values) == list(range(64)) and ds["block_z"].dims == ("layer",)
    assert run.recency_probability.shape == (4,) and run.recency_probability_se.shape == (4,)


def test_xarray_heads(tmp_path):
    acc = maskpos.Accumulator(2, 3, 16, per_head=True)
    rng = np.random.default_rng(1)
    for _ in range(4):
        x = rng.standard_normal((3, 3, 16, 16))
        acc.add(0, x)
        acc.add(1, x)
    ds = acc.result().to_xarray()
    assert ds["scores_heads"].dims == ("layer", "head", "query", "key") and list(ds["head"].values) == [1, 2, 3]


def test_view_pages(run, tmp_path):
    assert run.view(tmp_path / "v.html") == tmp_path / "v.html"
    page = (tmp_path / "v.html").read_text(encoding="utf-8")
    assert page.startswith("<!DOCTYPE html>") and '"signif":' in page
    acc = maskpos.Accumulator(1, 2, 16)
    acc.add(0, np.random.default_rng(2).standard_normal((5, 2, 16, 16)))
    maskpos.view([run, acc.result()], tmp_path / "two.html", labels=["rope", "noise"])  # a Result without a folder
    assert '"label": "noise"' in (tmp_path / "two.html").read_text(encoding="utf-8").replace('":"', '": "')
    with pytest.raises(maskpos.Error, match="exists"):
        maskpos.view(run, tmp_path / "v.html")


def test_all_lists_each_name_once():
    assert len(maskpos.__all__) == len(set(maskpos.__all__))
    for name in maskpos.__all__:
        assert hasattr(maskpos, name), name
    assert "view" in maskpos.__all__ and "MaskposWarning" in maskpos.__all__
