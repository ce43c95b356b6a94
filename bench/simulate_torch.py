#!/usr/bin/python3
"""Peer for bench/simulate_vs_torch: the parameter-free decoder as a whole-batch PyTorch program,
the way the paper's authors would write it (float32 tensors of shape [B,S,D], all sequences at
once, mean over the batch at the end). Prints the layer-2..4 maps' landmarks and writes the mean
scores to OUT.npy so the bench can compare maps.

usage: simulate_torch.py --batch B --seq S --dim D --layers L --alpha A --threads T --out OUT.npy
"""
import argparse
import time

import numpy as np
import torch

ap = argparse.ArgumentParser()
ap.add_argument("--batch", type=int, default=100000)
ap.add_argument("--seq", type=int, default=50)
ap.add_argument("--dim", type=int, default=64)
ap.add_argument("--layers", type=int, default=4)
ap.add_argument("--alpha", type=float, default=0.0)
ap.add_argument("--threads", type=int, default=2)
ap.add_argument("--seed", type=int, default=0)
ap.add_argument("--out", default=None)
a = ap.parse_args()
torch.set_num_threads(a.threads)
torch.manual_seed(a.seed)
t0 = time.time()
B, S, D = a.batch, a.seq, a.dim
l = (a.alpha / (1 - a.alpha)) ** 0.5
x = torch.randn(B, S, D) + l * torch.randn(B, 1, D)
x = x / x.norm(dim=-1, keepdim=True)
mask = torch.ones(S, S, dtype=torch.bool).tril()
maps = []
for _ in range(a.layers):
    y = x / x.norm(dim=-1, keepdim=True)
    s = y @ y.transpose(1, 2)
    s = s.masked_fill(~mask, float("-inf"))
    maps.append(torch.where(mask, s, torch.zeros(())).mean(0, dtype=torch.float64).masked_fill(~mask, float("nan")))
    x = torch.softmax(s, dim=-1) @ y + x
m = torch.stack(maps).numpy()
print(f"torch: {time.time() - t0:.2f} s; S(S,1) by layer {np.round(m[:, -1, 0], 4)}; S(S,S-1) {np.round(m[:, -1, -2], 4)}")
if a.out:
    np.save(a.out, m)
