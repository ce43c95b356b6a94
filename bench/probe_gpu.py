#!/usr/bin/env python3
"""probe_gpu.py — issue #36's speed bench (not a test): the paper's Figure-5 job on one GPU, three
ways side by side in one run, on the same weights, ids and device.

  maskpos   `maskpos probe MODEL --layers 1-4 --compute bf16 --device cuda` (the CUDA plugin): the
            probe's own time (its "ran ... in X s" line) and, apart, the process's rest (model
            read, weights uploaded, outputs written);
  hf        HF transformers with eager attention and a capture of each selected layer's
            pre-softmax scores (maskpos.hf's attention function feeding a sink that keeps
            nothing: the cost of materialising the scores a user hooks), batch 8;
  hf.probe  the same with maskpos.Accumulator summing the scores on the GPU (maskpos.hf.probe's
            cost; issue 26's bench/accum_gpu.py measures it the same way);
  lean      lean PyTorch as its user writes it: SDPA for the outputs, one GEMM per head for q·kᵀ
            summed into a float64 [S, S] map on the GPU (bench/accum_gpu.py's PlainMap), batch 8.

The model: `maskpos mkmodel` with Llama-3.1-8B's shapes (hidden 4096, 32 heads, 8 key/value heads,
FFN 14336, vocab 128256, llama3 RoPE scaling, bf16, tied embedding), 4 layers, random weights,
written once into --work; transformers loads the same folder (its load timed apart). Ids: 1000 x
1024 random tokens (--n, --seq). Flops: 2 per multiply-add of the Linear layers and of the causal
half of the attention (as `maskpos probe` counts them: 1.82 PFLOP for the whole job). The bf16
peak: an 8192³ bf16 torch.matmul measured in the same run (about 790 TFLOP/s on an H100); each
method's share of it is printed. The maps cross-checked: maskpos' layer-1 mean map against the
lean peer's (max |difference| over max |map|).

    python3 bench/probe_gpu.py [--bin build/maskpos] [--n 1000] [--seq 1024] [--work DIR] [--out result.json]

scripts/device_check.sh runs it on the lent GPU machine (docs/cuda.md).
"""
import argparse
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "python"))
sys.path.insert(0, HERE)

import numpy as np  # noqa: E402
import torch  # noqa: E402

C, NH, NKV, HS, FF, V, LAYERS = 4096, 32, 8, 128, 14336, 128256, 4


def job_flops(n, S):
    """2 per multiply-add: the Linear layers of every token, the causal half of q·kᵀ and p·v."""
    lin = S * 2.0 * (C * NH * HS + 2 * C * NKV * HS + NH * HS * C + 3 * C * FF)
    att = 2.0 * 2.0 * S * (S + 1) / 2 * HS * NH
    return n * LAYERS * (lin + att)


def bf16_peak():
    """TFLOP/s of an 8192³ bf16 matmul: the mean of 10 after 3 warm-ups."""
    a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    for _ in range(3):
        a @ b
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(10):
        a @ b
    torch.cuda.synchronize()
    return 10 * 2.0 * 8192 ** 3 / (time.perf_counter() - t0) / 1e12


def make_model(bin_, work):
    d = os.path.join(work, "llama31-8b-shape-4l")
    if not os.path.exists(os.path.join(d, "config.json")):
        t0 = time.perf_counter()
        subprocess.run([bin_, "mkmodel", "--arch", "llama", "--layers", str(LAYERS), "--dim", str(C), "--heads", str(NH),
                        "--kv-heads", str(NKV), "--head-dim", str(HS), "--ffn", str(FF), "--vocab", str(V), "--dtype", "bf16",
                        "--rope-scaling", "llama3", "--rope-theta", "500000", "--tie", "--seed", "1", d], check=True,
                       capture_output=True)
        print("wrote the model (%s) in %.1f s" % (d, time.perf_counter() - t0), flush=True)
    return d


def run_maskpos(bin_, model, ids_path, out):
    """(probe seconds, the rest of the process, its output)."""
    t0 = time.perf_counter()
    p = subprocess.run([bin_, "probe", model, "--tokens", ids_path, "--layers", "1-4", "--compute", "bf16", "--device", "cuda",
                        "--out", out, "--force", "--quiet"], capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if p.returncode != 0:
        raise RuntimeError("maskpos probe --device cuda: exit %d: %s" % (p.returncode, (p.stderr or p.stdout).strip()))
    with open(os.path.join(out, "meta.json")) as f:  # --quiet prints no "ran ..." line: the forward's seconds
        meta = json.load(f)
    ran = float(meta["compute_time_s"])
    if not isinstance(meta.get("device"), dict):  # "cpu", or the GPU's name, capability, versions
        raise RuntimeError("maskpos probe --device cuda: meta.json says it ran on %s" % meta.get("device"))
    return ran, wall - ran, p.stdout


def run_peers(model_dir, ids, batch, res):
    import accum_gpu  # the peers of issue 26's bench: the capture sink, the lean map, the timed loop
    import transformers
    import maskpos
    from maskpos import hf
    t0 = time.perf_counter()
    model = transformers.AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.bfloat16).cuda().eval()
    torch.cuda.synchronize()
    res["hf_load_s"] = round(time.perf_counter() - t0, 2)
    device = torch.device("cuda")
    layers = list(range(LAYERS))
    slots = {li: k for k, li in enumerate(layers)}
    tid = torch.as_tensor(ids, dtype=torch.long)
    res["hf_s"] = accum_gpu.run_forward(model, tid, batch, hf.Capture(accum_gpu.NullSink(), slots, True, {}, stop_after=layers[-1]),
                                        None, device)
    acc = maskpos.Accumulator(LAYERS, NH, ids.shape[1])
    res["hf_acc_s"] = accum_gpu.run_forward(model, tid, batch, hf.Capture(acc, slots, True, {}, stop_after=layers[-1]), None, device)
    plain = accum_gpu.PlainMap(set(layers), ids.shape[1], device, layers[-1])
    # the map check: every sequence once, as maskpos sums them (the warm-up batch's sums dropped)
    res["lean_s"] = accum_gpu.run_forward(model, tid, batch, plain, None, device, after_warmup=plain.reset)
    return (plain.maps[0] / (ids.shape[0] * NH)).cpu().numpy()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default=os.environ.get("MASKPOS_BIN", os.path.join(ROOT, "build", "maskpos")))
    ap.add_argument("--n", type=int, default=1000)
    ap.add_argument("--seq", type=int, default=1024)
    ap.add_argument("--batch", type=int, default=8, help="sequences per forward pass of the peers")
    ap.add_argument("--work", default="/tmp/maskpos-bench-gpu")
    ap.add_argument("--out")
    a = ap.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("probe_gpu.py: no CUDA device")
    os.makedirs(a.work, exist_ok=True)
    res = {"device": torch.cuda.get_device_name(0), "torch": torch.__version__, "n": a.n, "seq": a.seq, "layers": "1-4",
           "batch": a.batch, "flops": job_flops(a.n, a.seq)}
    model = make_model(a.bin, a.work)
    ids = np.random.default_rng(0).integers(0, V, size=(a.n, a.seq)).astype(np.int32)
    ids_path = os.path.join(a.work, "ids_%dx%d.npy" % (a.n, a.seq))
    np.save(ids_path, ids)
    res["peak_tflops"] = round(bf16_peak(), 1)
    out = os.path.join(a.work, "maskpos-out")
    try:
        res["maskpos_s"], res["maskpos_rest_s"], _ = run_maskpos(a.bin, model, ids_path, out)
    except RuntimeError as e:
        res["maskpos_error"] = str(e)
    lean_map = run_peers(model, ids, a.batch, res)
    if "maskpos_s" in res:
        mm = np.load(os.path.join(out, "scores.npy"))[0]
        f = np.isfinite(mm)
        res["map_vs_lean"] = float(np.abs(mm[f] - lean_map[f]).max() / np.abs(lean_map[f]).max())
    print("Figure 5's job: %d x %d tokens, Llama-3.1-8B shapes, layers 1-4, bf16, %s; %.2f PFLOP; bf16 matmul peak "
          "measured %.0f TFLOP/s" % (a.n, a.seq, res["device"], res["flops"] / 1e15, res["peak_tflops"]))
    print("  %-8s %9s %9s %8s %12s" % ("method", "seconds", "TFLOP/s", "% peak", "x maskpos"))
    for k, name in (("maskpos_s", "maskpos"), ("hf_s", "hf eager"), ("hf_acc_s", "hf.probe"), ("lean_s", "lean")):
        if k not in res:
            continue
        t = res[k]
        tf = res["flops"] / t / 1e12
        rel = "%.2f" % (t / res["maskpos_s"]) if "maskpos_s" in res else "-"
        print("  %-8s %9.2f %9.0f %7.0f%% %12s" % (name, t, tf, 100 * tf / res["peak_tflops"], rel))
    print("  apart: maskpos' model read, upload and writing %s s; transformers' from_pretrained + .cuda() %s s"
          % (round(res.get("maskpos_rest_s", float("nan")), 2), res["hf_load_s"]))
    if "maskpos_error" in res:
        print("  maskpos: " + res["maskpos_error"])
    if "map_vs_lean" in res:
        print("  layer-1 mean map, maskpos against lean: max |difference| / max |map| = %.2e" % res["map_vs_lean"])
    if a.out:
        with open(a.out, "w") as fo:
            json.dump(res, fo, indent=2)
    return 0 if "maskpos_s" in res else 1


if __name__ == "__main__":
    sys.exit(main())
