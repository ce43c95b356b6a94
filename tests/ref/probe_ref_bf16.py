#!/usr/bin/python3
"""Reference for `maskpos probe --compute bf16` / `maskpos logits --compute bf16`, in PyTorch.

Runs tests/ref/probe_ref.py (the float64 HF-semantics decoder, same arguments, same outputs
ref_scores_heads.npy / ref_logits.npy) with the one change that defines bf16 compute
(docs/speed.md): every Linear layer multiplies bf16 values. Each Linear weight (and the output
head, a rounded copy of the embedding when tied; the embedding lookup itself stays exact) is
rounded to bf16 once, and the left operand of a matmul with such a weight is rounded to bf16 (torch's round-to-nearest-even) before the product.
Products of two bf16 numbers are exact in float64 and the sums run in float64, so this is the
bf16 forward with exact accumulation; maskpos accumulates in f32. Everything else (norms, biases,
RoPE, q·k, softmax, p·v, residual) stays float64 as in probe_ref.py.
How the hook works: torch.Tensor.__matmul__ is wrapped; a right operand whose storage is one of
the rounded weights (W.T shares it) marks a Linear product. Attention products (q @ kᵀ, p @ v)
use activations, never a weight's storage, so they are untouched.

usage: probe_ref_bf16.py MODEL_DIR TOKENS.npy OUT_DIR [probe_ref.py options]
Uses only Debian's python3-torch and python3-numpy.
"""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import probe_ref  # noqa: E402  (the float64 reference this script modifies)

WEIGHT_PTRS = set()


def bf16(t):
    return t.to(torch.bfloat16).to(t.dtype)


_load_weights = probe_ref.load_weights


def load_weights_bf16(d):
    w = _load_weights(d)
    emb = "model.embed_tokens.weight"
    if "lm_head.weight" not in w:  # tied: the head is a bf16 copy, the lookup table is not rounded
        w["lm_head.weight"] = w[emb].clone()
    for name, t in w.items():
        if t.dim() == 2 and name != emb:
            t.copy_(bf16(t))  # in place: the storage (and so W.T's) stays the one registered
            WEIGHT_PTRS.add(t.data_ptr())
    return w


_matmul = torch.Tensor.__matmul__


def matmul_bf16(a, b):
    if b.dim() == 2 and b.data_ptr() in WEIGHT_PTRS:
        a = bf16(a)
    return _matmul(a, b)


probe_ref.load_weights = load_weights_bf16
torch.Tensor.__matmul__ = matmul_bf16

if __name__ == "__main__":
    sys.exit(probe_ref.main())
