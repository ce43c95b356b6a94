#!/usr/bin/python3
"""Independent reference for `maskpos simulate`, in PyTorch (float64), whole-batch.

Reads the inputs maskpos used (--dump-inputs, float64 [B,S,D]), runs the parameter-free decoder
with torch ops written from paper.md (not from maskpos' C code), and compares the mean maps with
maskpos' scores.npy / probs.npy, and per layer and position the variance of the attention output
o = p @ y over sequences and dimensions (var_attn.npy), the closed form for values independent of
the weights, the mean over sequences of sum_j p_ij^2 |y_j|^2 / D (var_closed.npy), and their
standard errors with the sequences as independent draws (var_attn_se, var_closed_se, var_gap_se:
the sample standard deviation over sequences of u2 - 2 m u1, of c, of their difference, / sqrt(B);
u1, u2 a sequence's mean of o and of o^2 over dimensions, m the mean of u1). Exit 0 when every
entry agrees within --tol, 1 otherwise.

usage: simulate_ref.py INPUTS.npy OUTDIR --layers L --norm l2|layernorm --scale S
                       [--rope --theta T] [--bidirectional] [--tol 1e-10]
Uses only Debian's python3-torch and python3-numpy.
"""
import argparse
import sys

import numpy as np
import torch


def rope(y, theta):
    # HF rotate-half: pairs (k, k + D/2), positions 0..S-1
    B, S, D = y.shape
    inv_freq = 1.0 / (theta ** (torch.arange(0, D, 2, dtype=torch.float64) / D))
    ang = torch.arange(S, dtype=torch.float64)[:, None] * inv_freq[None, :]
    cos = torch.cat([ang.cos(), ang.cos()], dim=-1)
    sin = torch.cat([ang.sin(), ang.sin()], dim=-1)
    rot = torch.cat([-y[..., D // 2:], y[..., : D // 2]], dim=-1)
    return y * cos + rot * sin


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("inputs")
    ap.add_argument("outdir")
    ap.add_argument("--layers", type=int, required=True)
    ap.add_argument("--norm", default="l2")
    ap.add_argument("--scale", type=float, default=1.0)
    ap.add_argument("--rope", action="store_true")
    ap.add_argument("--theta", type=float, default=10000.0)
    ap.add_argument("--bidirectional", action="store_true")
    ap.add_argument("--tol", type=float, default=1e-10)
    a = ap.parse_args()

    x = torch.from_numpy(np.load(a.inputs)).to(torch.float64)
    B, S, D = x.shape
    causal = not a.bidirectional
    mask = torch.ones(S, S, dtype=torch.bool).tril() if causal else torch.ones(S, S, dtype=torch.bool)
    scores_mean, probs_mean = [], []
    var = {k: [] for k in ("var_attn", "var_attn_se", "var_closed", "var_closed_se", "var_gap_se")}
    for _ in range(a.layers):
        if a.norm == "l2":
            y = x / x.norm(dim=-1, keepdim=True)
        else:
            y = torch.nn.functional.layer_norm(x, (D,), eps=1e-12)
        q = rope(y, a.theta) if a.rope else y
        s = q @ q.transpose(1, 2) / a.scale
        s = s.masked_fill(~mask, float("-inf"))
        p = torch.softmax(s, dim=-1)
        scores_mean.append(torch.where(mask, s, torch.zeros(())).mean(0).masked_fill(~mask, float("nan")))
        probs_mean.append(p.mean(0))
        o = p @ y                                                   # [B, S, D]
        var["var_attn"].append(o.permute(1, 0, 2).reshape(S, -1).var(dim=1, unbiased=False))
        u1, u2 = o.mean(-1), (o * o).mean(-1)                       # [B, S]
        c = (p * p * (y * y).sum(-1)[:, None, :]).sum(-1) / D      # [B, S]
        z = u2 - 2 * u1.mean(0, keepdim=True) * u1
        var["var_attn_se"].append(z.std(0) / B ** 0.5)
        var["var_closed"].append(c.mean(0))
        var["var_closed_se"].append(c.std(0) / B ** 0.5)
        var["var_gap_se"].append((z - c).std(0) / B ** 0.5)
        x = o + x
    ref_s = torch.stack(scores_mean).numpy()
    ref_p = torch.stack(probs_mean).numpy()
    got_s = np.load(f"{a.outdir}/scores.npy")
    got_p = np.load(f"{a.outdir}/probs.npy")
    ok = True
    pairs = [("scores", ref_s, got_s), ("probs", ref_p, got_p)]
    pairs += [(k, torch.stack(v).numpy(), np.load(f"{a.outdir}/{k}.npy")) for k, v in var.items()]
    for name, ref, got in pairs:
        if ref.shape != got.shape:
            print(f"{name}: shape {got.shape} != reference {ref.shape}")
            ok = False
            continue
        if not np.array_equal(np.isnan(ref), np.isnan(got)):
            print(f"{name}: NaN pattern differs from the reference")
            ok = False
            continue
        err = np.nanmax(np.abs(ref - got))
        # a standard error from sums of squares keeps half the digits where the spread is near 0
        # (position 0's closed form is 1/D in every sequence): sqrt of the tolerance there
        tol = a.tol ** 0.5 if name.endswith("_se") and name != "scores_se" else a.tol
        print(f"{name}: max |maskpos - torch| = {err:.3e} (tol {tol:g}) over {np.isfinite(ref).sum()} entries")
        if not err <= tol:
            idx = np.unravel_index(np.nanargmax(np.abs(ref - got)), ref.shape)
            print(f"  worst at {idx}: maskpos {got[idx]!r} torch {ref[idx]!r}")
            ok = False
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
