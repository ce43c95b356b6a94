#!/usr/bin/env python3
"""accum_gpu.py — issue 26's speed check: the paper's Figure-5 job on a GPU three ways, timed on
the same model, ids and device.

  capture   HF eager attention with a bare capture of each selected layer's pre-softmax scores
            (maskpos.hf's attention function feeding a no-op sink): the cost of the forward
            pass and of materialising the scores;
  accum     the same plus maskpos.Accumulator (the GPU float64 reduction of maskpos._torch and
            the C library's sums): what maskpos.hf.probe costs;
  plain     plain PyTorch: SDPA for the outputs, one GEMM per head for the map (q·kᵀ summed into
            an [S,S] float64 map on the GPU): the floor for "just the mean map".

Default shapes: Llama-3.1-8B (hidden 4096, 32 heads, 8 key/value heads, FFN 14336, vocab 128256,
RoPE base 500000 with llama3 scaling), the first 4 layers (layers 1-4 selected; the forward pass
stops after layer 4 in all three), 1000 sequences × 1024 tokens, bfloat16, random weights built
from a config (no network, no checkpoint), batch 8. The issue's target: accum ≤ 1.5 × capture.

    python3 bench/accum_gpu.py                      # the GPU job (CUDA, transformers)
    python3 bench/accum_gpu.py --tiny               # tiny shapes on the CPU: the code paths only
    python3 bench/accum_gpu.py --out result.json

--tiny without transformers uses python/tests_torch/tiny_hf.py's small decoder (the same attention
calling convention) on a `maskpos mkmodel` llama folder. Figures: printed and, with --out, JSON;
README/docs/python.md quote them once measured (scripts/device_check.sh).
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "python"))

import numpy as np  # noqa: E402
import torch  # noqa: E402

import maskpos  # noqa: E402
from maskpos import hf  # noqa: E402


class NullSink:
    """An accumulator that keeps nothing (the bare capture): add() only makes sure the scores
    exist."""

    def __init__(self, probs=False):
        self.options = {"probs": probs}
        self.n_added = 0

    def add(self, layer, scores, probs=None, lengths=None):
        self.n_added += scores.shape[0]


class PlainMap:
    """Plain PyTorch: SDPA for the outputs; per layer one GEMM per head for q·kᵀ·scaling, summed
    over the batch and heads into a float64 [S, S] map on the device."""

    def __init__(self, slots, S, device, stop_after):
        self.slots, self.stop_after = slots, stop_after
        self.maps = {li: torch.zeros(S, S, dtype=torch.float64, device=device) for li in slots}

    def reset(self):
        for m in self.maps.values():
            m.zero_()

    def __call__(self, module, query, key, value, attention_mask, scaling, dropout=0.0, **kwargs):
        li = module.layer_idx
        B, H, T, D = query.shape
        rep = H // key.shape[1]
        if li in self.slots:
            for h in range(H):  # one GEMM per head ([B, T, D] x [B, D, T])
                s = torch.matmul(query[:, h], key[:, h // rep].transpose(1, 2)) * scaling
                self.maps[li] += s.sum(0, dtype=torch.float64)
        if li >= self.stop_after:
            raise hf._Stop()
        k = key.repeat_interleave(rep, dim=1) if rep > 1 else key
        v = value.repeat_interleave(rep, dim=1) if rep > 1 else value
        sdpa = getattr(torch.nn.functional, "scaled_dot_product_attention", None)
        if sdpa is not None:
            out = sdpa(query, k, v, is_causal=True, scale=scaling)
        else:  # torch < 2.0 (Debian's 1.13, --tiny only): the same maths unfused
            sc = torch.matmul(query, k.transpose(2, 3)) * scaling
            causal = torch.ones(T, T, dtype=torch.bool, device=query.device).tril()
            out = torch.matmul(torch.softmax(sc.masked_fill(~causal, float("-inf")), dim=-1), v)
        return out.transpose(1, 2).contiguous(), None


def llama_8b_config(n_layers, tiny):
    import transformers
    if tiny:
        return transformers.LlamaConfig(hidden_size=64, intermediate_size=128, num_attention_heads=4,
                                        num_key_value_heads=2, num_hidden_layers=n_layers, vocab_size=300,
                                        max_position_embeddings=4096)
    return transformers.LlamaConfig(
        hidden_size=4096, intermediate_size=14336, num_attention_heads=32, num_key_value_heads=8,
        num_hidden_layers=n_layers, vocab_size=128256, max_position_embeddings=131072, rope_theta=500000.0,
        rms_norm_eps=1e-5, rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                                         "high_freq_factor": 4.0, "original_max_position_embeddings": 8192})


def build_model(args, device, dtype):
    """(model, registry or None, heads): HF LlamaForCausalLM from a config (random weights), or
    without transformers (--tiny only) the tests' tiny decoder on a mkmodel folder."""
    try:
        import transformers
    except ImportError:
        if not args.tiny:
            raise SystemExit("accum_gpu.py: transformers is needed (only --tiny runs without it)")
        sys.path.insert(0, os.path.join(ROOT, "python", "tests_torch"))
        import tiny_hf
        d = os.path.join(tempfile.mkdtemp(prefix="accum-gpu-"), "llama")
        subprocess.run([os.environ.get("MASKPOS_BIN", os.path.join(ROOT, "build", "maskpos")), "mkmodel", "--arch",
                        "llama", "--layers", str(args.layers), "--vocab", "300", d], check=True, capture_output=True)
        return tiny_hf.TinyModel(d), tiny_hf.ATTENTION_FUNCTIONS, 4, 300
    cfg = llama_8b_config(args.layers, args.tiny)
    torch.manual_seed(0)
    with torch.device(device):
        model = transformers.LlamaForCausalLM(cfg).to(dtype)
    model.eval()
    return model, None, cfg.num_attention_heads, cfg.vocab_size


def run_forward(model, ids, batch, fn, registry, device, after_warmup=None):
    """Seconds to push every batch through the model with attention function fn installed;
    after_warmup() (when given) runs between the untimed warm-up batch and the timed ones (a
    PlainMap's reset: its map then holds every sequence once)."""
    with hf._Installed(model, fn, registry), torch.no_grad():
        def one(b0):
            x = ids[b0:b0 + batch].to(device)
            try:
                model(input_ids=x, attention_mask=torch.ones_like(x), use_cache=False)
            except hf._Stop:
                pass
        one(0)  # warm-up (kernels, allocator), not timed
        if after_warmup is not None:
            after_warmup()
        if device.type == "cuda":
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        for b0 in range(0, ids.shape[0], batch):
            one(b0)
        if device.type == "cuda":
            torch.cuda.synchronize()
        return time.perf_counter() - t0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tiny", action="store_true", help="tiny shapes on the CPU (code paths only)")
    ap.add_argument("--n", type=int, default=None, help="sequences (default 1000; --tiny 8)")
    ap.add_argument("--seq", type=int, default=None, help="tokens per sequence (default 1024; --tiny 32)")
    ap.add_argument("--batch", type=int, default=None, help="sequences per forward pass (default 8; --tiny 4)")
    ap.add_argument("--layers", type=int, default=4, help="layers built and selected (1..L)")
    ap.add_argument("--per-head", action="store_true", help="the Accumulator also keeps per-head maps")
    ap.add_argument("--out", help="write the figures as JSON here")
    a = ap.parse_args()
    n = a.n or (8 if a.tiny else 1000)
    S = a.seq or (32 if a.tiny else 1024)
    batch = a.batch or (4 if a.tiny else 8)
    device = torch.device("cpu" if a.tiny or not torch.cuda.is_available() else "cuda")
    dtype = torch.float32 if device.type == "cpu" else torch.bfloat16
    if not a.tiny and device.type != "cuda":
        raise SystemExit("accum_gpu.py: no CUDA device (use --tiny for the CPU code paths)")
    t0 = time.perf_counter()
    model, registry, H, V = build_model(a, device, dtype)
    build_s = time.perf_counter() - t0
    ids = torch.as_tensor(np.random.default_rng(0).integers(0, V, size=(n, S)), dtype=torch.long)
    layers = list(range(a.layers))
    slots = {li: k for k, li in enumerate(layers)}
    last = layers[-1]
    res = {"device": torch.cuda.get_device_name(0) if device.type == "cuda" else "cpu", "torch": torch.__version__,
           "n": n, "seq": S, "batch": batch, "layers": [l + 1 for l in layers], "heads": H, "dtype": str(dtype),
           "per_head": a.per_head, "tiny": a.tiny, "model_build_s": round(build_s, 2)}
    try:
        import transformers
        res["transformers"] = transformers.__version__
    except ImportError:
        res["transformers"] = None
    sink = NullSink()
    res["capture_s"] = run_forward(model, ids, batch, hf.Capture(sink, slots, True, {}, stop_after=last), registry, device)
    acc = maskpos.Accumulator(len(layers), H, S, per_head=a.per_head)
    cap = hf.Capture(acc, slots, True, {}, stop_after=last)
    res["accum_s"] = run_forward(model, ids, batch, cap, registry, device)
    res["accum_add_s"] = cap.seconds
    plain = PlainMap(set(layers), S, device, last)
    res["plain_s"] = run_forward(model, ids, batch, plain, registry, device)
    res["accum_over_capture"] = res["accum_s"] / res["capture_s"]
    res["plain_over_capture"] = res["plain_s"] / res["capture_s"]
    # the same scores reach both: the Accumulator's mean map of layer 1 against the plain map (both
    # summed the warm-up batch too)
    r = acc.result()
    nb = acc.n
    pm = (plain.maps[layers[0]] / (plain_count(n, batch) * H)).cpu().numpy()
    f = np.isfinite(r.scores[0])
    res["accum_vs_plain_max_abs"] = float(np.abs(r.scores[0][f] - pm[f]).max())
    res["accumulated_sequences"] = nb
    res["target_met"] = res["accum_over_capture"] <= 1.5
    for k in ("capture_s", "accum_s", "plain_s", "accum_add_s"):
        res[k] = round(res[k], 3)
    print(json.dumps(res, indent=2))
    if a.out:
        with open(a.out, "w") as fo:
            json.dump(res, fo, indent=2)
    return 0


def plain_count(n, batch):
    """Sequences the plain map summed: the warm-up batch plus every timed batch."""
    return min(batch, n) + n


if __name__ == "__main__":
    sys.exit(main())
