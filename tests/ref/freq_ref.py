#!/usr/bin/python3
"""Independent reference for `maskpos probe --stats freq`, in PyTorch (float64).

Runs probe_ref.py's decoder (written from shared/docs/model-formats.md, not from maskpos' C code)
on token ids, keeps per selected layer the queries and keys after RoPE (each call of its rope(),
queries then keys, [NH, S, HS] and [NKV, S, HS]), and computes from these tensors directly, per
layer, query head h and frequency pair p (dims p and p + R/2 of the head, rotate-half):
  OUT/ref_freq_q_norm.npy    float64 [L, H, P]: mean over sequences of the mean over positions of
                             ||(q[p], q[p + R/2])||
  OUT/ref_freq_k_norm.npy    the same of the keys of the key head h reads (h // (NH / NKV))
  OUT/ref_freq_contrib.npy   mean over sequences of the mean over the observed (i, j) of the
                             sampled query rows of |scale * (q_i[p] k_j[p] + q_i[p+R/2] k_j[p+R/2])|
                             (rows: all when S <= 64, else floor((2r + 1) S / 128), r < 64; observed:
                             the model's mask, causal and sliding window; scale the model's)
  OUT/ref_freq_rest.npy      [L, H, 3] the dims R..HS-1 together: q norm, k norm, |contribution|
  OUT/ref_freq_*_se.npy      standard errors: the sample standard deviation over sequences of the
                             sequence's value / sqrt(N)
usage: freq_ref.py MODEL_DIR TOKENS.npy OUT_DIR [--layers 1,2] [--bidirectional] [--keep-high P]
--keep-high P: p-RoPE, the RoPE frequencies of pairs floor(P * R/2) .. R/2 - 1 set to 0 (not rotated).
Uses only Debian's python3-torch and python3-numpy.
"""
import argparse
import json
import math
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import probe_ref  # noqa: E402  (the decoder)

ROPED = []          # the outputs of rope(), in call order: q then k of each layer
_rope = probe_ref.rope
_inv_freq = probe_ref.rope_inv_freq
KEEP = [1.0]


def rope_kept(x, cos, sin, rdim):
    y = _rope(x, cos, sin, rdim)
    ROPED.append(y.clone())
    return y


def inv_freq_kept(cfg, head_dim, seq_len):
    inv, attn, dim = _inv_freq(cfg, head_dim, seq_len)
    n = inv.shape[0]
    keep = min(n, int(math.floor(KEEP[0] * n + 1e-9)))
    inv = inv.clone()
    inv[keep:] = 0.0
    return inv, attn, dim


def sampled_rows(S):
    if S <= 64:
        return list(range(S))
    return [((2 * r + 1) * S) // 128 for r in range(64)]


def one_sequence(q, k, rdim, scale, mask):
    """q [NH, S, HS], k [NKV, S, HS] -> [NH, 3, P + 1] (q norm, k norm, |contribution|; column P the
    unrotated dims)."""
    NH, S, HS = q.shape
    rep = NH // k.shape[0]
    k = k.repeat_interleave(rep, dim=0)
    P = rdim // 2

    def comps(x):  # [NH, S, HS] -> [NH, S, P + 1, 2 or more dims] as a list of per-column tensors
        cols = [torch.stack([x[..., p], x[..., p + P]], dim=-1) for p in range(P)]
        return cols + [x[..., rdim:]]

    out = torch.zeros(NH, 3, P + 1, dtype=torch.float64)
    qc, kc = comps(q), comps(k)
    rows = sampled_rows(S)
    obs = mask[rows]                                    # [R, S]
    for c in range(P + 1):
        out[:, 0, c] = qc[c].norm(dim=-1).mean(dim=1) if qc[c].shape[-1] else 0.0
        out[:, 1, c] = kc[c].norm(dim=-1).mean(dim=1) if kc[c].shape[-1] else 0.0
        if qc[c].shape[-1]:
            dots = (qc[c][:, rows] @ kc[c].transpose(1, 2)).abs() * scale   # [NH, R, S]
            out[:, 2, c] = (dots * obs).sum(dim=(1, 2)) / obs.sum()
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("tokens")
    ap.add_argument("out")
    ap.add_argument("--layers", default="")
    ap.add_argument("--bidirectional", action="store_true")
    ap.add_argument("--keep-high", type=float, default=1.0)
    a = ap.parse_args()
    with open(os.path.join(a.model, "config.json")) as f:
        cfg = json.load(f)
    W = probe_ref.load_weights(a.model)
    ids = np.load(a.tokens).astype(np.int64)
    C, NH, NKV, HS, L = probe_ref.model_dims(cfg)
    wanted = [int(t) for t in a.layers.split(",")] if a.layers else list(range(1, min(L, 4) + 1))
    KEEP[0] = a.keep_high
    probe_ref.rope = rope_kept
    probe_ref.rope_inv_freq = inv_freq_kept
    arch = cfg["model_type"]
    if arch in ("gemma2", "gemma3_text"):
        scale = cfg.get("query_pre_attn_scalar", 256) ** -0.5
    else:
        scale = HS ** -0.5
    wins = probe_ref.layer_windows(cfg)
    per_seq = []
    with torch.no_grad():
        for s in range(ids.shape[0]):
            ROPED.clear()
            probe_ref.RESID = {}
            probe_ref.forward(cfg, W, torch.from_numpy(ids[s]), wanted, not a.bidirectional, True, False)
            S = ids.shape[1]
            rows = []
            for l in wanted:
                q, k = ROPED[2 * (l - 1)], ROPED[2 * (l - 1) + 1]
                rdim = cfg_rdim(cfg, HS)
                mask = probe_ref.attn_mask(S, not a.bidirectional, wins[l - 1]).to(torch.float64)
                rows.append(one_sequence(q, k, rdim, scale, mask))
            per_seq.append(torch.stack(rows))              # [L, NH, 3, Q]
    x = torch.stack(per_seq)                               # [N, L, NH, 3, Q]
    N = x.shape[0]
    mean = x.mean(dim=0)
    se = x.std(dim=0, unbiased=True) / math.sqrt(N) if N > 1 else torch.full_like(mean, float("nan"))
    P = mean.shape[-1] - 1
    for w, name in enumerate(("q_norm", "k_norm", "contrib")):
        np.save(os.path.join(a.out, f"ref_freq_{name}.npy"), mean[:, :, w, :P].numpy())
        np.save(os.path.join(a.out, f"ref_freq_{name}_se.npy"), se[:, :, w, :P].numpy())
    np.save(os.path.join(a.out, "ref_freq_rest.npy"), mean[:, :, :, P].numpy())
    np.save(os.path.join(a.out, "ref_freq_rest_se.npy"), se[:, :, :, P].numpy())
    print(f"freq_ref: {arch} N={N} S={ids.shape[1]} layers={wanted} pairs={P} causal={not a.bidirectional} "
          f"keep_high={a.keep_high} torch {torch.__version__}")
    return 0


def cfg_rdim(cfg, HS):
    """The rotary dims as probe_ref's forwards take them (GPT-NeoX: rotary_pct, else
    partial_rotary_factor)."""
    if cfg["model_type"] == "gpt_neox":
        return int(HS * cfg.get("rotary_pct", 0.25))
    return int(HS * (cfg.get("partial_rotary_factor", 1.0) or 1.0))


if __name__ == "__main__":
    sys.exit(main())
