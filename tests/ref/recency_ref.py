#!/usr/bin/python3
"""Independent reference for `maskpos simulate --layer-form recency`, in PyTorch (float64).

Written from the definition in issue 18 (the later version of the paper, "LayerNorm Induces
Recency Bias in Transformer Decoders"), not from maskpos' C code. Reads the inputs maskpos used
(--dump-inputs, float64 [B,S,D]), runs L identical layers

    h = LayerNorm(x) (no affine, eps 1e-12) or h = x;   scores = h h^T / sqrt(D);
    causal mask; A = softmax(scores);   x <- A h (+ x when the residual is on)

and per layer counts the triples j < k < i with scores[i,k] > scores[i,j] (ties are not
recent), over every sequence, by comparing all triples at once. Compares the counts with
meta.json's recency_triples_recent (exactly, up to --count-tol triples that a last-bit
difference between two float64 computations may flip) and RP with recency_probability, and the
mean maps with scores.npy / probs.npy (within --tol). Exit 0 when all agree, 1 otherwise.

usage: recency_ref.py INPUTS.npy OUTDIR --layers L --norm layernorm|none --residual on|off
                      [--tol 1e-10] [--count-tol 0]
Uses only Debian's python3-torch and python3-numpy.
"""
import argparse
import json
import sys

import numpy as np
import torch


def recent_triples(scores):
    """scores [B,S,S] -> number of (b, i, j, k) with j < k < i and scores[b,i,k] > scores[b,i,j]."""
    B, S, _ = scores.shape
    i = torch.arange(S).view(S, 1, 1)
    j = torch.arange(S).view(1, S, 1)
    k = torch.arange(S).view(1, 1, S)
    valid = (j < k) & (k < i)  # [i, j, k]
    total = 0
    for b0 in range(0, B, 256):  # chunks keep [b, S, S, S] small
        s = scores[b0:b0 + 256]
        later = s.unsqueeze(2)    # [b, i, 1, k]
        earlier = s.unsqueeze(3)  # [b, i, j, 1]
        total += int(((later > earlier) & valid).sum())
    return total


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("inputs")
    ap.add_argument("outdir")
    ap.add_argument("--layers", type=int, required=True)
    ap.add_argument("--norm", default="layernorm")
    ap.add_argument("--residual", default="off")
    ap.add_argument("--tol", type=float, default=1e-10)
    ap.add_argument("--count-tol", type=int, default=0)
    a = ap.parse_args()

    x = torch.from_numpy(np.load(a.inputs)).to(torch.float64)
    B, S, D = x.shape
    mask = torch.ones(S, S, dtype=torch.bool).tril()
    counts, scores_mean, probs_mean = [], [], []
    for _ in range(a.layers):
        h = torch.nn.functional.layer_norm(x, (D,), eps=1e-12) if a.norm == "layernorm" else x
        s = h @ h.transpose(1, 2) / D ** 0.5
        counts.append(recent_triples(s))
        p = torch.softmax(s.masked_fill(~mask, float("-inf")), dim=-1)
        scores_mean.append(torch.where(mask, s, torch.zeros(())).mean(0).masked_fill(~mask, float("nan")))
        probs_mean.append(p.mean(0))
        x = p @ h + x if a.residual == "on" else p @ h
    meta = json.load(open(f"{a.outdir}/meta.json"))
    ok = True
    triples = B * S * (S - 1) * (S - 2) // 6
    got_counts = meta["recency_triples_recent"]
    if meta["recency_triples_total"] != triples:
        print(f"triples: maskpos {meta['recency_triples_total']} != {triples}")
        ok = False
    for l, (want, got, rp) in enumerate(zip(counts, got_counts, meta["recency_probability"])):
        print(f"layer {l + 1}: recent triples torch {want} maskpos {got} of {triples}; RP torch {want / triples:.6f} maskpos {rp:.6f}")
        if abs(want - got) > a.count_tol or abs(rp - want / triples) > (a.count_tol + 0.5) / triples:
            ok = False
    if len(got_counts) != a.layers:
        print(f"maskpos has {len(got_counts)} layers of counts, want {a.layers}")
        ok = False
    ref_s = torch.stack(scores_mean).numpy()
    ref_p = torch.stack(probs_mean).numpy()
    for name, ref in (("scores", ref_s), ("probs", ref_p)):
        got = np.load(f"{a.outdir}/{name}.npy")
        if ref.shape != got.shape or not np.array_equal(np.isnan(ref), np.isnan(got)):
            print(f"{name}: shape or NaN pattern differs from the reference")
            ok = False
            continue
        err = np.nanmax(np.abs(ref - got))
        print(f"{name}: max |maskpos - torch| = {err:.3e} (tol {a.tol:g})")
        if not err <= a.tol:
            ok = False
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
