#!/usr/bin/python3
"""The numbers of reproduce's stage "beyond" recomputed from its own output files, with numpy
(tests/test_reproduce.c, test_beyond_stage): not through maskpos' code.

  - the simulation row: max over positions 1..S-1 of |var_attn - var_closed| / var_gap_se and of
    |var_attn - (e^2 + i - 1)/(e + i - 1)^2 / D| / var_attn_se (i = the keys position p sees, p + 1);
  - the trained NoPE model's early slopes: the least-squares slope of log var_attn against
    log(p + 1) over positions 1..15, layers 3 and 4;
  - the slopes of every run as meta.json holds them (what the rows print);
  - the position rows as pos_probe.npy holds them (held-out R2, MAE, its se, chance MAE; the fit
    itself is checked against numpy by tests/test_probe_pos.c);
  - the RoPE runs' frequency rows from freq_q_norm.npy and freq_contrib.npy [L, H, P]: per layer the
    share of the query norm (summed over heads) in pairs P/2..P-1, and the pair whose |contribution|
    summed over heads is largest.
Prints one "name value" line each; the test finds the same text in report.md.

usage: variance_stage_ref.py OUT_DIR
"""
import json
import math
import sys

import numpy as np


def main():
    d = sys.argv[1] + "/beyond"
    freq_rows(d)
    position_rows(d)
    s = d + "/sim_layer1_D32768"
    v, se = np.load(s + "/var_attn.npy")[0], np.load(s + "/var_attn_se.npy")[0]
    cl, gap = np.load(s + "/var_closed.npy")[0], np.load(s + "/var_gap_se.npy")[0]
    D = json.load(open(s + "/meta.json"))["dim"]
    keys = np.arange(1, v.size + 1, dtype=np.float64)
    formula = (math.e ** 2 + keys - 1) / (math.e + keys - 1) ** 2 / D
    print("sim_gap_z %.2f" % np.max(np.abs(v - cl)[1:] / gap[1:]))
    print("sim_formula_z %.2f" % np.max(np.abs(v - formula)[1:] / se[1:]))
    va = np.load(d + "/none/var_attn.npy")
    p = np.arange(1, 16)
    for layer in (3, 4):
        b = np.polyfit(np.log(p + 1.0), np.log(va[layer - 1, 1:16]), 1)[0]
        print("none_early_%d %+.3f" % (layer, b))
    for run, l0, l1 in (("random_nope", 0, 4), ("random_nope_bidirectional", 0, 4), ("none", 0, 2), ("none", 2, 4),
                        ("rope", 0, 4), ("stories260K", 0, 5)):
        m = json.load(open("%s/%s/meta.json" % (d, run)))
        a, b = m["variance_slope_attn"], m["variance_slope_attn_se"]
        print("%s_slopes_%d%d %s" % (run, l0 + 1, l1, ", ".join("%d: %+.3f ± %.3f" % (k + 1, a[k], b[k]) for k in range(l0, l1))))


def position_rows(d):
    for run in ("none", "none_bidirectional"):
        p = np.load("%s/%s/pos_probe.npy" % (d, run))
        print("%s_position %s" % (run, ", ".join("%d: %.3f (MAE %.1f ± %.1f of chance %.1f)" % (k + 1, r[0], r[1], r[2], r[4])
                                                   for k, r in enumerate(p))))
    a = np.load(d + "/random_nope/pos_probe.npy")[:, 0]
    b = np.load(d + "/random_nope_bidirectional/pos_probe.npy")[:, 0]
    print("random_position %s" % ", ".join("%d: %.3f against %.3f" % (k + 1, x, y) for k, (x, y) in enumerate(zip(a, b))))


def freq_rows(d):
    for run in ("rope", "stories260K"):
        q = np.load("%s/%s/freq_q_norm.npy" % (d, run))
        c = np.load("%s/%s/freq_contrib.npy" % (d, run))
        P = q.shape[2]
        share = q[:, :, P // 2:].sum((1, 2)) / q.sum((1, 2))
        top = c.sum(1).argmax(1)
        print("%s_freq %s" % (run, ", ".join("%d: %.2f (top pair %d)" % (k + 1, a, t) for k, (a, t) in enumerate(zip(share, top)))))


if __name__ == "__main__":
    main()
