#!/usr/bin/python3
"""Independent reference for `maskpos probe --stats variance`, in PyTorch (float64).

Runs probe_ref.py's decoder (written from shared/docs/model-formats.md, not from maskpos' C code)
on token ids, keeps per selected layer the attention output before the output projection
(softmax(scores) v, heads side by side: [S, NH*HS]) and the residual stream after the layer
([S, C]), and computes from these tensors directly, per position i over the N sequences:
  OUT/ref_var_attn.npy        float64 [L, S]: variance of all N*NH*HS values of the attention output
                              at position i (population variance about their common mean)
  OUT/ref_var_attn_heads.npy  float64 [L, H, S]: the same over one head's N*HS values
  OUT/ref_var_resid.npy       float64 [L, S]: the same over the N*C values of the residual stream
  OUT/ref_var_*_se.npy        their standard errors with the sequences as independent draws: the
                              sample standard deviation over sequences of u2 - 2 m u1 (u1, u2 the
                              sequence's mean value and mean square there, m the mean of u1) / sqrt(N)
  OUT/ref_var_slopes.npy      float64 [L, 2]: the least-squares slope (numpy.polyfit) of log variance
                              against log(i + 1) over positions i >= 1, attention output then residual
  --resid-stride K: the residual stream's variances (and slope) from sequences 0, K, 2K, ... only
usage: var_ref.py MODEL_DIR TOKENS.npy OUT_DIR [--layers 1,2] [--bidirectional] [--no-rope] [--resid-stride K]
Uses only Debian's python3-torch and python3-numpy.
"""
import argparse
import json
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import probe_ref  # noqa: E402  (the decoder)

MIX = {}
_attend = probe_ref.attend


def attend_kept(sc, mask, v, li, layers_wanted, scores_out, probs_out):
    o = _attend(sc, mask, v, li, layers_wanted, scores_out, probs_out)
    MIX[li + 1] = o.clone()
    return o


def variance(x):
    """x [N, S, D] -> variance [S] over N*D values, its standard error [S]."""
    N = x.shape[0]
    flat = x.permute(1, 0, 2).reshape(x.shape[1], -1)        # [S, N*D]
    var = flat.var(dim=1, unbiased=False)
    u1, u2 = x.mean(dim=2), (x * x).mean(dim=2)             # [N, S]
    z = u2 - 2 * u1.mean(dim=0, keepdim=True) * u1
    se = z.std(dim=0, unbiased=True) / N ** 0.5 if N > 1 else torch.full_like(var, float("nan"))
    return var.numpy(), se.numpy()


def slope(v):
    i = np.arange(1, v.shape[0])
    return np.polyfit(np.log(i + 1.0), np.log(v[1:]), 1)[0]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("tokens")
    ap.add_argument("out")
    ap.add_argument("--layers", default="")
    ap.add_argument("--bidirectional", action="store_true")
    ap.add_argument("--no-rope", action="store_true")
    ap.add_argument("--resid-stride", type=int, default=1)
    a = ap.parse_args()
    with open(os.path.join(a.model, "config.json")) as f:
        cfg = json.load(f)
    W = probe_ref.load_weights(a.model)
    ids = np.load(a.tokens).astype(np.int64)
    L = cfg["num_hidden_layers"]
    wanted = [int(t) for t in a.layers.split(",")] if a.layers else list(range(1, min(L, 4) + 1))
    NH = cfg["num_attention_heads"]
    probe_ref.attend = attend_kept
    mix, resid = [], []
    with torch.no_grad():
        for s in range(ids.shape[0]):
            MIX.clear()
            probe_ref.RESID = {}
            probe_ref.forward(cfg, W, torch.from_numpy(ids[s]), wanted, not a.bidirectional, not a.no_rope, False)
            mix.append(torch.stack([MIX[l] for l in wanted]))              # [L, S, NH*HS]
            resid.append(torch.stack([probe_ref.RESID[l] for l in wanted]))  # [L, S, C]
    mix, resid = torch.stack(mix, dim=1), torch.stack(resid, dim=1)         # [L, N, S, D]
    Lw, N, S, D = mix.shape
    out = {k: [] for k in ("attn", "attn_se", "heads", "heads_se", "resid", "resid_se")}
    slopes = []
    for li in range(Lw):
        va, sa = variance(mix[li])
        vr, sr = variance(resid[li][::a.resid_stride])
        hv = [variance(mix[li].reshape(N, S, NH, D // NH)[:, :, h, :]) for h in range(NH)]
        out["attn"].append(va), out["attn_se"].append(sa), out["resid"].append(vr), out["resid_se"].append(sr)
        out["heads"].append(np.stack([v for v, _ in hv])), out["heads_se"].append(np.stack([e for _, e in hv]))
        slopes.append([slope(va), slope(vr)])
    names = {"attn": "var_attn", "attn_se": "var_attn_se", "heads": "var_attn_heads", "heads_se": "var_attn_heads_se",
             "resid": "var_resid", "resid_se": "var_resid_se"}
    for k, n in names.items():
        np.save(os.path.join(a.out, f"ref_{n}.npy"), np.stack(out[k]))
    np.save(os.path.join(a.out, "ref_var_slopes.npy"), np.array(slopes))
    print(f"var_ref: {cfg['model_type']} N={N} S={S} layers={wanted} causal={not a.bidirectional} "
          f"rope={not a.no_rope} torch {torch.__version__}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
