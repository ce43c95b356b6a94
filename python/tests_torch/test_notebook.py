"""test_notebook.py — the example notebook (examples/notebook.ipynb: a plain-torch model → an
Accumulator → figures → the viewer) runs as a user would run it: Debian's jupyter-nbconvert
executes it in a scratch folder with Debian's python3 kernel (ipykernel), and every cell must
finish. Its outputs are checked: the Result's notebook display (a PNG and the HTML table with a
resolved column), the table's rows, the figure and the viewer page it writes. scripts/setup.sh
--test installs jupyter-nbconvert and python3-ipykernel.
"""
import json
import os
import shutil
import subprocess

from conftest import ROOT


def test_example_notebook_runs(tmp_path):
    nbconvert = shutil.which("jupyter-nbconvert") or "/usr/bin/jupyter-nbconvert"
    assert os.path.exists(nbconvert), "jupyter-nbconvert is missing: scripts/setup.sh --test installs it"
    nb = tmp_path / "notebook.ipynb"
    shutil.copy(os.path.join(ROOT, "examples", "notebook.ipynb"), nb)
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"), PYDEVD_DISABLE_FILE_VALIDATION="1")
    p = subprocess.run([nbconvert, "--to", "notebook", "--execute", "--ExecutePreprocessor.timeout=300", str(nb),
                        "--output", str(tmp_path / "out.ipynb")], capture_output=True, text=True, env=env,
                       cwd=str(tmp_path))
    assert p.returncode == 0, p.stderr[-3000:]
    out = json.load(open(tmp_path / "out.ipynb"))
    outputs = [o for c in out["cells"] if c["cell_type"] == "code" for o in c.get("outputs", [])]
    assert not [o for o in outputs if o.get("output_type") == "error"]
    shown = [o["data"] for o in outputs if "text/html" in o.get("data", {}) and "image/png" in o["data"]]
    assert shown, "the Result's display (_repr_html_ and _repr_png_)"
    html = "".join(shown[0]["text/html"])
    assert "resolved" in html and "<img src=\"data:image/png;base64," in html and "NO" in html  # layer 1: not resolved
    table = "".join(next(o["data"]["text/plain"] for o in outputs if "nri_corrected" in "".join(o.get("data", {}).get(
        "text/plain", ""))))
    assert "z_needed" in table and "True" in table and "False" in table
    assert os.path.getsize(tmp_path / "decoder_residue.png") > 1000
    page = open(tmp_path / "decoder_view.html", encoding="utf-8").read()
    assert page.startswith("<!DOCTYPE html>") and '"signif":' in page  # each layer's significance in the page
