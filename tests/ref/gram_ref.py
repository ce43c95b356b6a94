#!/usr/bin/python3
"""gram_ref.py — independent PyTorch reference for `maskpos gram` (tests/test_gram.c).

Recomputes the nine Gram matrices of paper.md §2.2 (Figure 3) for layer l -> l+1 from a
checkpoint directory (config.json + model.safetensors, read with numpy by train_ref.py's reader)
and the token ids the C run used (DIR/tokens.npy), in float64, and compares with DIR/gram.npy.
Definitions (the paper's, with the HF Llama block of model-formats.md §2.1):
  X input of layer l; Y = RMSNorm_l(X); Q, K per head (RoPE unless disabled); A = softmax(causal(QKᵀ/√d))
  (a) YYᵀ  (b) QKᵀ/√d (mean over heads, lower triangle)  (c) mean over heads of (A_h V_h)(A_h V_h)ᵀ
  (d) (AV W_O)(AV W_O)ᵀ  (e) OOᵀ, O = AV W_O + X  (f) RMSNorm(O)RMSNorm(O)ᵀ
  (g) X'X'ᵀ, X' = FFN(RMSNorm(O)) + O  (h) YYᵀ of layer l+1  (i) QKᵀ/√d of layer l+1
each averaged over sequences.
Usage: gram_ref.py CKPT_DIR OUT_DIR --layer L [--no-rope]; exit 1 on disagreement.
"""
import argparse
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from train_ref import Llama  # noqa: E402  (the torch Llama block written from the spec)


def layer_parts(mdl, h, l, rope):
    p = mdl.p
    B, T, _ = h.shape
    pre = f"model.layers.{l}."
    y = mdl.rmsnorm(h, p[pre + "input_layernorm.weight"], mdl.eps)
    q = (y @ p[pre + "self_attn.q_proj.weight"].T).view(B, T, mdl.NH, mdl.HS).transpose(1, 2)
    k = (y @ p[pre + "self_attn.k_proj.weight"].T).view(B, T, mdl.NKV, mdl.HS).transpose(1, 2)
    v = (y @ p[pre + "self_attn.v_proj.weight"].T).view(B, T, mdl.NKV, mdl.HS).transpose(1, 2)
    if rope:
        q, k = mdl.rope(q, T), mdl.rope(k, T)
    rep = mdl.NH // mdl.NKV
    k = k.repeat_interleave(rep, dim=1)
    v = v.repeat_interleave(rep, dim=1)
    s = q @ k.transpose(2, 3) / mdl.HS ** 0.5
    mask = torch.ones(T, T, dtype=torch.bool).triu(1)
    a = torch.softmax(s.masked_fill(mask, float("-inf")), dim=-1)
    av = a @ v                                           # [B, NH, T, HS]
    d = av.transpose(1, 2).reshape(B, T, -1) @ p[pre + "self_attn.o_proj.weight"].T
    o = d + h
    f = mdl.rmsnorm(o, p[pre + "post_attention_layernorm.weight"], mdl.eps)
    g = f @ p[pre + "mlp.gate_proj.weight"].T
    u = f @ p[pre + "mlp.up_proj.weight"].T
    x2 = (torch.nn.functional.silu(g) * u) @ p[pre + "mlp.down_proj.weight"].T + o
    return dict(y=y, s=s, av=av, d=d, o=o, f=f, x2=x2)


def gram(m):  # mean over sequences of M Mᵀ, M [B, T, W]
    return (m @ m.transpose(-1, -2)).mean(0)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("ckpt")
    ap.add_argument("out")
    ap.add_argument("--layer", type=int, default=1)
    ap.add_argument("--no-rope", action="store_true")
    a = ap.parse_args()
    torch.set_num_threads(1)
    mdl = Llama(a.ckpt)
    ids = torch.tensor(np.load(os.path.join(a.out, "tokens.npy")).astype(np.int64))
    got = np.load(os.path.join(a.out, "gram.npy"))
    l = a.layer - 1
    with torch.no_grad():
        h = mdl.p["model.embed_tokens.weight"][ids]
        for j in range(l):
            h = layer_parts(mdl, h, j, mdl.rope_layers[j] and not a.no_rope)["x2"]
        P = layer_parts(mdl, h, l, mdl.rope_layers[l] and not a.no_rope)
        N = layer_parts(mdl, P["x2"], l + 1, mdl.rope_layers[l + 1] and not a.no_rope)
        T = ids.shape[1]
        tri = torch.ones(T, T, dtype=torch.bool).triu(1)
        ref = [gram(P["y"]), P["s"].mean((0, 1)).masked_fill(tri, float("nan")), gram(P["av"]).mean(0),
               gram(P["d"]), gram(P["o"]), gram(P["f"]), gram(P["x2"]), gram(N["y"]),
               N["s"].mean((0, 1)).masked_fill(tri, float("nan"))]
    ok = True
    names = "abcdefghi"
    for k in range(9):
        r = ref[k].numpy()
        gk = got[k]
        if not np.array_equal(np.isnan(r), np.isnan(gk)):
            print(f"({names[k]}): NaN pattern differs")
            ok = False
            continue
        fin = ~np.isnan(r)
        err = np.abs(gk[fin] - r[fin]).max()
        scale = np.abs(r[fin]).max()
        # C runs f32 with double accumulation of the Grams; 1e-4 of the map's largest entry
        # (about 100x the f32 rounding of the activations)
        tol = 1e-4 * scale + 1e-9
        print(f"({names[k]}) max |C - torch| = {err:.2e}  (max |entry| {scale:.3g})")
        if err > tol:
            ok = False
    print("gram reference:", "AGREES" if ok else "DISAGREES")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
