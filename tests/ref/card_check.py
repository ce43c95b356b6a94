#!/usr/bin/python3
"""card_check.py — checks a `maskpos card` folder against probe runs made apart (tests/test_card.c).

    card_check.py CARD --model K --pass probe=DIR [--pass no-rope=DIR] [--pass bidirectional=DIR]
                  [--same-bytes] [--models M]

For model K of CARD/card.json and each pass given: every number of the per-layer table is the run's
own, read here from the run's meta.json by this script's own rules (stats[l].nri, nri_corrected,
residue_block_z, residue_noise.block_z, residue_resolved, recency_probability and its _se, the
mean over heads of attention_sink, variance_slope_* and their _se); every other per-layer key of
card.json equals the meta.json value it names; with --same-bytes every .npy of the run equals
CARD/<pass>/'s byte for byte. The page (card.html) is parsed with html.parser: well-formed (every
element closed in order), no script, nothing fetched from outside, the per-layer table with one
row per layer of the M models, its NRI and block z cells as this script formats them; card.md has
as many rows. Prints "ok" and exits 0, or the first difference and exits 1. Python's standard
library only.
"""
import argparse
import html.parser
import json
import math
import os
import re
import sys

VOID = {"meta", "img", "br", "hr", "link", "input"}


def fail(msg):
    print("card_check: " + msg)
    sys.exit(1)


def expected(meta):
    """The per-layer table's numbers from a probe's meta.json: key -> [L]."""
    L = len(meta["layers"])
    e = {
        "nri": [s.get("nri") for s in meta["stats"]],
        "nri_corrected": meta["nri_corrected"],
        "residue_block_z": meta["residue_block_z"],
        "residue_noise.block_z": meta["residue_noise"]["block_z"],
        "residue_resolved": meta["residue_resolved"],
    }
    for k in ("recency_probability", "recency_probability_se", "variance_slope_attn", "variance_slope_attn_se",
              "variance_slope_resid", "variance_slope_resid_se"):
        if k in meta:
            e[k] = meta[k]
    if "attention_sink" in meta:
        e["attention_sink.head_mean"] = [sum(r) / len(r) for r in meta["attention_sink"]]
    for k, v in e.items():
        if len(v) != L:
            fail("%s: %d values for %d layers" % (k, len(v), L))
    return e


def same(a, b, tol):
    if a is None or b is None or isinstance(a, bool) or isinstance(b, bool):
        return a == b
    return abs(a - b) <= tol * max(1.0, abs(b))


def lookup(meta, key):
    """A dotted card key in meta.json (.head_mean: mean over the inner lists)."""
    parts = key.split(".")
    head_mean = parts[-1] == "head_mean"
    if head_mean:
        parts = parts[:-1]
    v = meta
    for p in parts:
        v = v[p]
    return [sum(r) / len(r) for r in v] if head_mean else v


def check_pass(card_dir, model, name, run_dir, same_bytes):
    meta = json.load(open(os.path.join(run_dir, "meta.json")))
    p = model["passes"].get(name)
    if p is None:
        fail("card has no pass %s" % name)
    pl = p["per_layer"]
    for k in ("resid_stride", "resid_sequences"):  # the residual stream's sampling, as the run's meta.json says
        if p.get(k) != meta.get(k):
            fail("%s: %s = %r in the card, %r in %s/meta.json" % (name, k, p.get(k), meta.get(k), run_dir))
    if model["layers"] != meta["layers"]:
        fail("%s: layers %s, the run's %s" % (name, model["layers"], meta["layers"]))
    for k, v in expected(meta).items():
        if k not in pl:
            fail("%s: card.json has no %s" % (name, k))
        tol = 1e-13 if k.endswith("head_mean") else 0.0
        for l, (a, b) in enumerate(zip(pl[k], v)):
            if not same(a, b, tol):
                fail("%s: %s[%d] = %r in the card, %r in %s/meta.json" % (name, k, l, a, b, run_dir))
    for k, v in pl.items():  # every other key names a meta.json value
        if k in ("nri",) or k in [key for key in meta["stats"][0]]:
            continue
        ref = lookup(meta, k)
        for l, (a, b) in enumerate(zip(v, ref)):
            if not same(a, b, 1e-13 if k.endswith("head_mean") else 0.0):
                fail("%s: %s[%d] = %r in the card, %r in meta.json" % (name, k, l, a, b))
    if same_bytes:
        n = 0
        for f in sorted(os.listdir(run_dir)):
            if f.endswith(".npy"):
                if open(os.path.join(run_dir, f), "rb").read() != open(os.path.join(card_dir, name, f), "rb").read():
                    fail("%s/%s differs from %s/%s" % (name, f, run_dir, f))
                n += 1
        if n < 4:
            fail("%s: only %d .npy files compared" % (run_dir, n))
    return meta


class Page(html.parser.HTMLParser):
    """The page's element stack (every element closed in order) and its per-layer table's cells."""

    def __init__(self):
        super().__init__()
        self.stack, self.rows, self.heads = [], [], []
        self.in_table = self.in_body = False
        self.cell = None
        self.bad = []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "script":
            self.bad.append("a <script>")
        for k in ("src", "href"):
            if k in a and not (a[k] or "").startswith(("data:", "#")):
                self.bad.append("%s=%r fetched from outside" % (k, a[k][:60]))
        if tag not in VOID:
            self.stack.append(tag)
        if tag == "table" and a.get("id") == "per-layer":
            self.in_table = True
        if self.in_table and tag == "tbody":
            self.in_body = True
        if self.in_table and self.in_body and tag == "tr":
            self.rows.append([])
        if self.in_table and tag in ("td", "th"):
            self.cell = ""

    def handle_endtag(self, tag):
        if tag in VOID:
            return
        if not self.stack or self.stack[-1] != tag:
            self.bad.append("</%s> closes <%s>" % (tag, self.stack[-1] if self.stack else "nothing"))
            return
        self.stack.pop()
        if self.in_table and tag in ("td", "th"):
            (self.rows[-1] if self.in_body else self.heads).append(self.cell)
            self.cell = None
        if tag == "table" and self.in_table:
            self.in_table = self.in_body = False

    def handle_data(self, data):
        if self.cell is not None:
            self.cell += data


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("card")
    ap.add_argument("--model", type=int, default=0)
    ap.add_argument("--models", type=int, default=1)
    ap.add_argument("--pass", dest="passes", action="append", default=[])
    ap.add_argument("--same-bytes", action="store_true")
    a = ap.parse_args()
    card = json.load(open(os.path.join(a.card, "card.json")))
    if card.get("kind") != "card" or len(card["models"]) != a.models:
        fail("card.json: kind %r, %d models (expected %d)" % (card.get("kind"), len(card["models"]), a.models))
    model = card["models"][a.model]
    metas = {}
    for spec in a.passes:
        name, run = spec.split("=", 1)
        metas[name] = check_pass(a.card, model, name, run, a.same_bytes)
    for name in ("probe", "no-rope", "bidirectional"):
        if name not in metas and name in model["passes"]:
            fail("the card has a %s pass that was not checked" % name)
    page = Page()
    page.feed(open(os.path.join(a.card, "card.html"), encoding="utf-8").read())
    page.close()
    if page.bad or page.stack != []:
        fail("card.html: %s" % (page.bad[:3] or "unclosed %s" % page.stack))
    if "probe" in metas:  # the runs table names the sequences whose residual stream was read
        k, n = metas["probe"].get("resid_stride"), metas["probe"].get("resid_sequences")
        want = "\u2013" if k is None else "every sequence" if k == 1 else "1 in %d (%d sequences)" % (k, n)
        html_text = open(os.path.join(a.card, "card.html"), encoding="utf-8").read()
        runs = html_text.split('id="runs"', 1)[1].split("</table>", 1)[0].split("<tr>")[2:]
        if len(runs) != a.models or "<td class=\"t\">%s</td>" % want not in runs[a.model]:
            fail("card.html: the runs table's row %d does not say %r (residual stream read)" % (a.model, want))
    L_all = sum(len(m["layers"]) for m in card["models"])
    if len(page.rows) != L_all:
        fail("card.html: %d rows in the per-layer table, %d layers" % (len(page.rows), L_all))
    off = 1 if a.models > 1 else 0
    first = sum(len(m["layers"]) for m in card["models"][: a.model])
    heads = page.heads
    for col, (name, key, fmt) in {"NRI": ("probe", "nri", "%.4f"), "block z": ("probe", "residue_block_z", "%.2f"),
                                  "NRI no RoPE": ("no-rope", "nri", "%.4f"),
                                  "block z bidir.": ("bidirectional", "residue_block_z", "%.2f")}.items():
        if name not in metas:
            continue
        c = heads.index(col)
        for l in range(len(model["layers"])):
            v = expected(metas[name])[key][l]
            want = fmt % v if v is not None and not (isinstance(v, float) and math.isnan(v)) else "\u2013"
            got = page.rows[first + l][c]
            if got != want:
                fail("card.html: %s of layer %d is %r, meta.json gives %r" % (col, l + 1, got, want))
        if int(page.rows[first][off]) != model["layers"][0]:
            fail("card.html: the first row is layer %s" % page.rows[first][off])
    md = [ln for ln in open(os.path.join(a.card, "card.md")) if ln.startswith("|")]
    if len(md) != L_all + 2:
        fail("card.md: %d table lines for %d layers" % (len(md), L_all))

    def cells(line):  # the cell separators of a Markdown table line: '|' not escaped
        return len(re.findall(r"(?<!\\)\|", line))
    for ln in md[1:]:
        if cells(ln) != cells(md[0]):
            fail("card.md: %d cells in %r, %d in the header (an unescaped '|' in a name?)" % (cells(ln), ln, cells(md[0])))
    tex = open(os.path.join(a.card, "card.tex")).read()
    if tex.count("\\\\") != L_all + 1 or "\\begin{tabular}" not in tex:
        fail("card.tex: %d rows for %d layers" % (tex.count("\\\\") - 1, L_all))
    print("ok: %d passes, %d layers, %d rows" % (len(metas), len(model["layers"]), len(page.rows)))


main()
