"""test_release_files.py — the repository's top-level LICENSE and CITATION.cff (issue 39): the licence
is the one the project states (MIT, as python/pyproject.toml says), CITATION.cff is valid YAML with
the fields Citation File Format 1.2.0 requires, its version is the library's, and it cites the paper
the toolkit reproduces (docs: /work/shared/docs/paper.md's source)."""
import os

import yaml

import maskpos
from conftest import ROOT


def test_license_and_citation():
    lic = open(os.path.join(ROOT, "LICENSE"), encoding="utf-8").read()
    assert lic.startswith("MIT License\n") and "the maskpos authors" in lic
    proj = open(os.path.join(ROOT, "python", "pyproject.toml"), encoding="utf-8").read()
    assert 'license = {text = "MIT"}' in proj
    cff = yaml.safe_load(open(os.path.join(ROOT, "CITATION.cff"), encoding="utf-8"))
    for key in ("cff-version", "message", "title", "authors"):  # CFF 1.2.0's required keys
        assert cff.get(key), key
    assert cff["cff-version"] == "1.2.0" and cff["license"] == "MIT"
    assert cff["version"] == maskpos.version()
    paper = cff["references"][0]
    assert "Behind RoPE" in paper["title"] and paper["year"] == 2025
    assert any(i["value"] == "arXiv:2509.21042" for i in paper["identifiers"])
