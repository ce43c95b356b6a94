#!/usr/bin/python3
"""bench/probe_torch.py — the PyTorch peer of `maskpos probe` for bench/probe (benchmark, not a test).

Runs the first L layers of a Llama-style HF checkpoint (config.json + safetensors, read with json
and numpy: u64 header length, JSON header, data at 8 + N + data_offsets; no safetensors package)
over N sequences of S token ids in torch bf16 on the CPU (Debian python3-torch; its bf16 matmul
goes through oneDNN), computing what the probe computes: embedding, per layer RMSNorm, q/k/v
projections, RoPE (the checkpoint's rope_theta and llama3 scaling), GQA scores q·kᵀ/√HS with the
causal mask, the per-layer head-mean score map added to a float64 sum, softmax, p·v, o_proj, MLP —
written as a user would (HF's eager attention: the full [NH, S, S] score tensor in the compute
dtype, softmax in f32 and back, no per-element Python work). --dtype f32 runs the same in f32; its
matmuls go to the BLAS torch is linked against (libblas.so.3: bench/probe points it at OpenBLAS
for this process alone when libopenblas0-pthread is installed).
Prints tokens/s and GFLOP/s (the same flop count as maskpos: 2 per multiply-add of the matmuls and
of the attention), and with --peak the measured torch matmul rates of this machine
([1024, 4096] x [4096, 14336], bf16 and f32).

usage: probe_torch.py MODEL_DIR IDS.npy [--layers 4] [--threads 2] [--dtype bf16|f32] [--attn eager|legacy]
                      [--peak [--peak-only] [--peak-dtype both|bf16|f32]]
"""
import argparse
import json
import math
import os
import struct
import sys
import time

import numpy as np
import torch


def st_tensors(d, wanted):
    """name -> torch tensor (bf16 or f32 as stored) for the names in `wanted`, from all shards."""
    idx = os.path.join(d, "model.safetensors.index.json")
    files = sorted(set(json.load(open(idx))["weight_map"].values())) if os.path.exists(idx) else ["model.safetensors"]
    out = {}
    for fn in files:
        with open(os.path.join(d, fn), "rb") as f:
            (n,) = struct.unpack("<Q", f.read(8))
            hdr = json.loads(f.read(n))
            base = 8 + n
            for name, info in hdr.items():
                if name == "__metadata__" or name not in wanted:
                    continue
                b, e = info["data_offsets"]
                f.seek(base + b)
                raw = f.read(e - b)
                if info["dtype"] == "BF16":
                    t = torch.from_numpy(np.frombuffer(raw, dtype="<i2").copy()).view(torch.bfloat16)
                elif info["dtype"] == "F32":
                    t = torch.from_numpy(np.frombuffer(raw, dtype="<f4").copy())
                else:
                    raise SystemExit(f"{fn}: {name}: dtype {info['dtype']} not handled")
                out[name] = t.reshape(info["shape"])
    return out


def inv_freq(cfg, hs):
    base = cfg.get("rope_theta", 10000.0)
    inv = 1.0 / (base ** (torch.arange(0, hs, 2, dtype=torch.float64) / hs))
    rs = cfg.get("rope_scaling") or {}
    if rs.get("rope_type", rs.get("type")) == "llama3":
        factor, lo, hi = rs["factor"], rs["low_freq_factor"], rs["high_freq_factor"]
        orig = rs["original_max_position_embeddings"]
        wl = 2 * math.pi / inv
        smooth = (orig / wl - lo) / (hi - lo)
        scaled = torch.where(wl > orig / lo, inv / factor, inv)
        mid = (1 - smooth) * inv / factor + smooth * inv
        inv = torch.where((wl >= orig / hi) & (wl <= orig / lo), mid, scaled)
    return inv.float()


def rmsnorm(x, w, eps):
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)).to(x.dtype) * w


def rot(x, cos, sin):
    h = x.shape[-1] // 2
    return x * cos + torch.cat((-x[..., h:], x[..., :h]), -1) * sin


def matmul_peak(dtype, threads):
    torch.set_num_threads(threads)
    a = torch.randn(1024, 4096).to(dtype)
    b = torch.randn(4096, 14336).to(dtype)
    a @ b
    best = 0.0
    for _ in range(3):
        t0 = time.perf_counter()
        a @ b
        best = max(best, 2 * 1024 * 4096 * 14336 / (time.perf_counter() - t0) / 1e9)
    return best


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("ids")
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--dtype", default="bf16", choices=["bf16", "f32"])
    ap.add_argument("--attn", default="eager", choices=["eager", "legacy"],
                    help="eager: HF's eager attention (default); legacy: the peer of issue #8 (f32 score copies)")
    ap.add_argument("--peak", action="store_true")
    ap.add_argument("--peak-only", action="store_true", help="measure the matmul rates and stop")
    ap.add_argument("--peak-dtype", default="both", choices=["both", "bf16", "f32"])
    ap.add_argument("--save-map", help="write layer 1's mean map (head and sequence mean, float64 [S, S]) to this .npy")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    if a.peak:
        if a.peak_dtype in ("both", "bf16"):
            print(f"torch_matmul_gflops_bf16 {matmul_peak(torch.bfloat16, a.threads):.1f}")
        if a.peak_dtype in ("both", "f32"):
            print(f"torch_matmul_gflops_f32 {matmul_peak(torch.float32, a.threads):.1f}")
        sys.stdout.flush()
        if a.peak_only:
            return 0
    dt = torch.bfloat16 if a.dtype == "bf16" else torch.float32
    cfg = json.load(open(os.path.join(a.model, "config.json")))
    C, NH, NKV = cfg["hidden_size"], cfg["num_attention_heads"], cfg["num_key_value_heads"]
    HS = cfg.get("head_dim") or C // NH
    FF, eps, L = cfg["intermediate_size"], cfg["rms_norm_eps"], a.layers
    names = ["model.embed_tokens.weight"]
    for l in range(L):
        p = f"model.layers.{l}."
        names += [p + s for s in ("input_layernorm.weight", "post_attention_layernorm.weight", "self_attn.q_proj.weight",
                                  "self_attn.k_proj.weight", "self_attn.v_proj.weight", "self_attn.o_proj.weight",
                                  "mlp.gate_proj.weight", "mlp.up_proj.weight", "mlp.down_proj.weight")]
    W = st_tensors(a.model, set(names))
    emb = W.pop("model.embed_tokens.weight")  # kept as stored; the rows of a sequence are converted
    W = {k: v.to(dt) for k, v in W.items()}
    ids = np.load(a.ids).astype(np.int64)
    N, S = ids.shape
    inv = inv_freq(cfg, HS)
    ang = torch.arange(S, dtype=torch.float32)[:, None] * inv[None, :]
    cos = torch.cat((ang.cos(), ang.cos()), -1).to(dt)
    sin = torch.cat((ang.sin(), ang.sin()), -1).to(dt)
    mask = torch.full((S, S), float("-inf")).triu(1).to(dt)
    acc = torch.zeros(L, S, S, dtype=torch.float64)
    rep = NH // NKV
    t0, c0 = time.perf_counter(), time.process_time()
    with torch.inference_mode():
        for s in range(N):
            x = emb[torch.from_numpy(ids[s])].to(dt)
            for l in range(L):
                p = f"model.layers.{l}."
                h = rmsnorm(x, W[p + "input_layernorm.weight"], eps)
                q = (h @ W[p + "self_attn.q_proj.weight"].T).view(S, NH, HS).transpose(0, 1)
                k = (h @ W[p + "self_attn.k_proj.weight"].T).view(S, NKV, HS).transpose(0, 1)
                v = (h @ W[p + "self_attn.v_proj.weight"].T).view(S, NKV, HS).transpose(0, 1)
                q, k = rot(q, cos, sin), rot(k, cos, sin)
                k, v = k.repeat_interleave(rep, 0), v.repeat_interleave(rep, 0)
                # eager attention as HF writes it: the full [NH, S, S] scores in the compute dtype,
                # scale + mask, softmax in f32 and back; the probe's map: the head mean, in double
                sc = torch.matmul(q, k.transpose(1, 2)) * HS ** -0.5 + mask
                if a.attn == "eager":
                    acc[l] += torch.mean(sc, 0, dtype=torch.float32)
                    pr = torch.softmax(sc, -1, dtype=torch.float32).to(dt)
                else:  # the peer of issue #8: f32 copies of the scores for the map and the softmax
                    acc[l] += sc.float().mean(0).double()
                    pr = torch.softmax(sc.float(), -1).to(dt)
                o = torch.matmul(pr, v).transpose(0, 1).reshape(S, NH * HS)
                x = x + o @ W[p + "self_attn.o_proj.weight"].T
                h2 = rmsnorm(x, W[p + "post_attention_layernorm.weight"], eps)
                g = h2 @ W[p + "mlp.gate_proj.weight"].T
                u = h2 @ W[p + "mlp.up_proj.weight"].T
                x = x + (torch.nn.functional.silu(g) * u) @ W[p + "mlp.down_proj.weight"].T
    secs, cpu = time.perf_counter() - t0, time.process_time() - c0
    per_tok = 2.0 * (C * NH * HS + 2 * C * NKV * HS + NH * HS * C + 3 * C * FF)
    flops = N * L * (S * per_tok + 2.0 * 2.0 * S * (S + 1) / 2 * HS * NH)
    print(f"torch_dtype {a.dtype}")
    print(f"torch_threads {torch.get_num_threads()}")
    print(f"torch_tokens_per_s {N * S / secs:.1f}")
    print(f"torch_gflops {flops / secs / 1e9:.1f}")
    print(f"torch_seconds {secs:.2f}")
    print(f"torch_cpu_seconds {cpu:.2f}")  # all threads: flops per CPU second is robust to other jobs
    print(f"torch_gflops_per_cpu_s {flops / cpu / 1e9:.1f}")
    print(f"torch_map_checksum {float(acc.nan_to_num(0, 0, 0).sum()):.6g}")
    if a.save_map:
        m = (acc[0] / N).numpy()
        m[np.triu_indices(S, 1)] = np.nan  # above the diagonal: masked, as the probe writes it
        np.save(a.save_map, m)
    return 0


if __name__ == "__main__":
    sys.exit(main())
