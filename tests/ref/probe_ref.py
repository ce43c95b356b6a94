#!/usr/bin/python3
"""Independent reference for `maskpos probe` and `maskpos logits`, in PyTorch (float64).

Reads an HF model directory (config.json + model.safetensors or sharded model-*.safetensors with
model.safetensors.index.json; safetensors parsed with numpy from its documented byte layout:
u64 header length, JSON header, data at 8 + N + data_offsets), runs the decoder written from
shared/docs/model-formats.md §2 (HF semantics; not from maskpos' C code) on token ids, and writes
  OUT/ref_scores_heads.npy  float64 [L, H, S, S]: pre-softmax scores q.k/sqrt(head_dim) per selected
                            layer and head, mean over the N sequences; NaN where masked
  OUT/ref_logits.npy        float64 [N, S, V]: next-token logits (only with --logits)
  OUT/ref_probs_heads.npy   float64 [L, H, S, S]: post-softmax probabilities, mean over sequences;
                            0 where masked
  OUT/ref_sink.npy          float64 [L, H]: mean over sequences and queries i >= 1 of p[i, 0]
  OUT/ref_entropy.npy       float64 [L, H]: mean over sequences and queries i >= 1 of
                            -sum_j p[i, j] ln p[i, j] (nats; 0 ln 0 = 0)
Architectures: llama (with q/k/v/o biases when attention_bias is true, as LlamaAttention builds
its projections with bias=config.attention_bias), mistral, qwen2 (q/k/v biases), qwen3 (per-head q/k RMSNorm), phi3 (fused
qkv_proj / gate_up_proj, partial rotary, longrope), olmo2 (q/k RMSNorm over the whole projection,
norms of the attention and MLP outputs before the residual add, no pre-norms), gpt_neox (Pythia:
LayerNorm with bias, per-head fused query_key_value, partial rotary, parallel residual, GELU MLP),
gemma2 (x sqrt(C), (1 + w) norms around both sublayers, GeGLU, query_pre_attn_scalar, soft-capping),
gemma3_text (Gemma 2's block without caps, per-head (1 + w) q/k norms, local layers' own RoPE base),
gemma (Gemma 1: x sqrt(C), (1 + w) pre-norms, GeGLU, 1/sqrt(head_dim)), mixtral and qwen3_moe
and qwen2_moe (mixture-of-experts FFN, see moe_ffn; qwen3_moe with qwen3's per-head q/k norm,
qwen2_moe with qwen2's q/k/v biases and a shared expert).
RoPE scaling: default, linear, llama3, longrope.
Sliding windows as the HF classes set them (layer_windows below) and as transformers'
masking_utils applies them: query i sees key j only when i - j < W (and, without the causal mask,
j - i < W); entries outside are NaN in the scores like the causal mask's.

With --logits (every layer run) a tensor of the checkpoint the forward did not read is an error:
the file holds exactly the tensors these HF classes read.

usage: probe_ref.py MODEL_DIR TOKENS.npy OUT_DIR [--layers 1,2] [--bidirectional] [--no-rope]
                    [--logits]
Uses only Debian's python3-torch and python3-numpy.
"""
import argparse
import json
import math
import os
import struct
import sys

import numpy as np
import torch

DT = torch.float64

# tests/ref/var_ref.py sets this to a dict: the residual stream after each layer, keyed by the
# 1-based layer, of the sequence at hand (keep_resid); None: not kept.
RESID = None


def keep_resid(n, x):
    """x after n layers (n >= 1) into RESID, when a caller asked for it."""
    if RESID is not None and n >= 1:
        RESID[n] = x.clone()


# ---------------------------------------------------------------- safetensors (numpy)

def st_read(path):
    with open(path, "rb") as f:
        raw = f.read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n].decode("utf-8"))
    base = 8 + n
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        b, e = info["data_offsets"]
        buf = raw[base + b: base + e]
        shape = info["shape"]
        dt = info["dtype"]
        if dt == "F32":
            a = np.frombuffer(buf, dtype="<f4").astype(np.float64)
        elif dt == "F16":
            a = np.frombuffer(buf, dtype="<f2").astype(np.float64)
        elif dt == "BF16":
            u = np.frombuffer(buf, dtype="<u2").astype(np.uint32) << 16
            a = u.view(np.float32).astype(np.float64)
        elif dt == "F64":
            a = np.frombuffer(buf, dtype="<f8").copy()
        else:
            raise SystemExit(f"{path}: tensor {name}: dtype {dt} not handled by the reference")
        out[name] = torch.from_numpy(a.reshape(shape))
    return out


class Weights(dict):
    """The checkpoint's tensors by name, remembering which ones the forward read."""

    def __init__(self, *a):
        super().__init__(*a)
        self.read = set()

    def __getitem__(self, k):
        self.read.add(k)
        return super().__getitem__(k)

    def get(self, k, default=None):
        return self[k] if k in self else default


def load_weights(d):
    idx = os.path.join(d, "model.safetensors.index.json")
    if os.path.exists(idx):
        with open(idx) as f:
            wm = json.load(f)["weight_map"]
        w = Weights()
        for shard in sorted(set(wm.values())):
            w.update(st_read(os.path.join(d, shard)))
        return w
    return Weights(st_read(os.path.join(d, "model.safetensors")))


# ---------------------------------------------------------------- RoPE tables (model-formats §2.2)

def rope_inv_freq(cfg, head_dim, seq_len):
    prf = cfg.get("partial_rotary_factor", 1.0) or 1.0
    dim = int(head_dim * prf)
    base = cfg.get("rope_theta", 10000.0)
    rs = cfg.get("rope_scaling") or None
    inv = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.int64).to(DT) / dim))
    attn = 1.0
    if rs:
        kind = rs.get("rope_type", rs.get("type"))
        if kind in ("su", "yarn"):
            kind = "longrope"
        if kind == "linear":
            inv = inv / rs["factor"]
        elif kind == "llama3":
            factor = rs["factor"]
            lo, hi = rs["low_freq_factor"], rs["high_freq_factor"]
            old = rs["original_max_position_embeddings"]
            low_wl, high_wl = old / lo, old / hi
            wl = 2 * math.pi / inv
            inv_l = torch.where(wl > low_wl, inv / factor, inv)
            smooth = (old / wl - lo) / (hi - lo)
            smoothed = (1 - smooth) * inv_l / factor + smooth * inv_l
            medium = ~(wl < high_wl) & ~(wl > low_wl)
            inv = torch.where(medium, smoothed, inv_l)
        elif kind == "longrope":
            orig = cfg.get("original_max_position_embeddings", 4096)
            factor = cfg["max_position_embeddings"] / orig
            if rs.get("attention_factor") is not None:
                attn = rs["attention_factor"]
            else:
                attn = 1.0 if factor <= 1 else math.sqrt(1 + math.log(factor) / math.log(orig))
            ext = rs["long_factor"] if seq_len > orig else rs["short_factor"]
            ext = torch.tensor(ext, dtype=DT)
            inv = 1.0 / (ext * base ** (torch.arange(0, dim, 2, dtype=torch.int64).to(DT) / dim))
        elif kind in (None, "default"):
            pass
        else:
            raise SystemExit(f"rope scaling {kind} not handled by the reference")
    return inv, attn, dim


def model_dims(cfg):
    """C, NH, NKV, HS, L of a config.json, as every forward below reads them (GPT-NeoX: one
    key/value head per query head and head size C / NH, whatever else the file says, as HF's
    GPTNeoX reads it)."""
    C, NH, L = cfg["hidden_size"], cfg["num_attention_heads"], cfg["num_hidden_layers"]
    if cfg["model_type"] == "gpt_neox":
        return C, NH, NH, C // NH, L
    return C, NH, cfg.get("num_key_value_heads", NH), cfg.get("head_dim") or C // NH, L


def rope_table(cfg, HS, S, scaled):
    """cos, sin [S, rdim] for positions 0..S-1 (rotate-half layout: the frequencies twice) and
    rdim; scaled: times the attention factor of longrope configs (Llama-style forward only)."""
    inv, attn_f, rdim = rope_inv_freq(cfg, HS, S)
    fr = torch.arange(S, dtype=DT)[:, None] * inv[None, :]
    emb = torch.cat([fr, fr], dim=-1)
    if scaled:
        return emb.cos() * attn_f, emb.sin() * attn_f, rdim
    return emb.cos(), emb.sin(), rdim


def rope(x, cos, sin, rdim):
    # x [..., S, hd]; HF rotate_half on the first rdim dims
    xr, xp = x[..., :rdim], x[..., rdim:]
    h = rdim // 2
    rot = torch.cat([-xr[..., h:], xr[..., :h]], dim=-1)
    return torch.cat([xr * cos + rot * sin, xp], dim=-1)


def rmsnorm(x, w, eps):
    var = (x * x).mean(-1, keepdim=True)
    y = x * torch.rsqrt(var + eps)
    return y * w if w is not None else y


# ---------------------------------------------------------------- forward (model-formats §2.1)

def layernorm(x, w, b, eps):
    mu = x.mean(-1, keepdim=True)
    var = ((x - mu) ** 2).mean(-1, keepdim=True)
    return (x - mu) * torch.rsqrt(var + eps) * w + b


def forward_neox(cfg, W, ids, layers_wanted, causal, use_rope, want_logits):
    """GPT-NeoX (GPTNeoXForCausalLM): LayerNorm with bias, query_key_value viewed per head as
    [q, k, v] blocks, rotate-half RoPE on the first rotary_pct of each head, exact GELU MLP,
    x + attn(ln1(x)) + mlp(ln2(x)) when use_parallel_residual, else the two in sequence."""
    C, NH, _, HS, L = model_dims(cfg)
    eps = cfg.get("layer_norm_eps", 1e-5)
    S = ids.shape[0]
    c2 = dict(cfg, partial_rotary_factor=cfg.get("rotary_pct", 0.25), rope_theta=cfg.get("rotary_emb_base", 10000.0))
    cos, sin, rdim = rope_table(c2, HS, S, False)
    mask = torch.ones(S, S, dtype=torch.bool).tril() if causal else torch.ones(S, S, dtype=torch.bool)
    x = W["gpt_neox.embed_in.weight"][ids]
    deepest = max(layers_wanted) if not want_logits else L
    scores_out, probs_out = {}, {}
    gelu = lambda t: 0.5 * t * (1 + torch.erf(t / math.sqrt(2)))
    for li in range(deepest):
        keep_resid(li, x)
        p = f"gpt_neox.layers.{li}."
        h = layernorm(x, W[p + "input_layernorm.weight"], W[p + "input_layernorm.bias"], eps)
        qkv = h @ W[p + "attention.query_key_value.weight"].T + W[p + "attention.query_key_value.bias"]
        qkv = qkv.view(S, NH, 3 * HS).transpose(0, 1)     # [NH, S, 3 HS]
        q, k, v = qkv[..., :HS], qkv[..., HS:2 * HS], qkv[..., 2 * HS:]
        if use_rope:
            q, k = rope(q, cos, sin, rdim), rope(k, cos, sin, rdim)
        sc = (q @ k.transpose(1, 2)) / math.sqrt(HS)
        o = attend(sc, mask, v, li, layers_wanted, scores_out, probs_out)
        a = o @ W[p + "attention.dense.weight"].T + W[p + "attention.dense.bias"]
        mlp = lambda t: gelu(t @ W[p + "mlp.dense_h_to_4h.weight"].T + W[p + "mlp.dense_h_to_4h.bias"]) @ \
            W[p + "mlp.dense_4h_to_h.weight"].T + W[p + "mlp.dense_4h_to_h.bias"]
        ln2 = lambda t: layernorm(t, W[p + "post_attention_layernorm.weight"], W[p + "post_attention_layernorm.bias"], eps)
        if cfg.get("use_parallel_residual", True):
            x = x + a + mlp(ln2(x))
        else:
            x = x + a
            x = x + mlp(ln2(x))
    keep_resid(deepest, x)
    logits = None
    if want_logits:
        xn = layernorm(x, W["gpt_neox.final_layer_norm.weight"], W["gpt_neox.final_layer_norm.bias"], eps)
        logits = xn @ W["embed_out.weight"].T
    return scores_out, probs_out, logits


def layer_windows(cfg):
    """Per layer: the sliding window W, or 0 (every key). Gemma 2: even layers local (Gemma2Config
    layer_types: sliding unless (i + 1) % 2 == 0); Gemma 3: sliding unless (i + 1) %
    sliding_window_pattern == 0; Mistral, Phi-3: every layer when sliding_window is set; Qwen2/3:
    with use_sliding_window, layers i >= max_window_layers; "layer_types" overrides the rule."""
    arch, L = cfg["model_type"], cfg["num_hidden_layers"]
    W = cfg.get("sliding_window") or 0
    if arch in ("qwen2", "qwen3") and not cfg.get("use_sliding_window", False):
        W = 0
    if arch not in ("gemma2", "gemma3_text", "mistral", "phi3", "qwen2", "qwen3") or not W:
        return [0] * L
    if cfg.get("layer_types"):
        return [W if t == "sliding_attention" else 0 for t in cfg["layer_types"]]
    if arch == "gemma2":
        return [W if (i + 1) % 2 else 0 for i in range(L)]
    if arch == "gemma3_text":
        return [W if (i + 1) % cfg.get("sliding_window_pattern", 6) else 0 for i in range(L)]
    if arch in ("qwen2", "qwen3"):
        return [W if i >= cfg.get("max_window_layers", 28) else 0 for i in range(L)]
    return [W] * L


def attn_mask(S, causal, W):
    """[S, S] bool, True where query i (row) sees key j (column)."""
    i = torch.arange(S)[:, None]
    j = torch.arange(S)[None, :]
    m = j <= i if causal else torch.ones(S, S, dtype=torch.bool)
    if W:
        m = m & (i - j < W)
        if not causal:
            m = m & (j - i < W)
    return m


def attend(sc, mask, v, li, layers_wanted, scores_out, probs_out):
    """softmax of the scores sc [NH, S, S] where mask holds, times the values v [NH, S, HS]:
    [S, NH*HS]. Keeps layer li+1's pre-softmax scores (NaN where masked) and probabilities
    when that layer is wanted."""
    sc = sc.masked_fill(~mask, float("-inf"))
    if (li + 1) in layers_wanted:
        scores_out[li + 1] = torch.where(mask, sc, torch.full_like(sc, float("nan")))
    pr = torch.softmax(sc, dim=-1)
    if (li + 1) in layers_wanted:
        probs_out[li + 1] = pr
    return (pr @ v).transpose(0, 1).reshape(sc.shape[1], -1)


def forward_gemma(cfg, W, ids, layers_wanted, causal, use_rope, want_logits):
    """Gemma 2 (Gemma2ForCausalLM): embeddings x sqrt(C) (the factor rounded to the checkpoint's
    dtype), RMSNorm with (1 + w) before and after attention and MLP, scores scaled by
    query_pre_attn_scalar^-1/2 then soft-capped c tanh(s / c) (the map holds these, what the
    softmax receives), GeGLU with the tanh GELU, tied head, final logits soft-capped. Local layers
    mask the keys outside their sliding window after the cap (layer_windows, attn_mask)."""
    C, NH, NKV, HS, L = model_dims(cfg)
    eps = cfg["rms_norm_eps"]
    S = ids.shape[0]
    rep = NH // NKV
    wins = layer_windows(cfg)
    g3 = cfg["model_type"] == "gemma3_text"
    g1 = cfg["model_type"] == "gemma"   # Gemma 1: pre-norms only (Llama's names), 1/sqrt(head_dim)
    cos, sin, rdim = rope_table(cfg, HS, S, False)
    # Gemma 3: sliding-window layers rotate with rope_local_base_freq, unscaled
    cos_l, sin_l, _ = rope_table(dict(cfg, rope_theta=cfg.get("rope_local_base_freq", 10000.0), rope_scaling=None), HS, S, False)
    pattern = cfg.get("sliding_window_pattern", 6)
    local = [t == "sliding_attention" for t in cfg["layer_types"]] if cfg.get("layer_types") else \
        [bool((i + 1) % pattern) for i in range(L)]
    dt = {"bfloat16": torch.bfloat16, "float16": torch.float16}.get(cfg.get("torch_dtype"), torch.float32)
    norm_c = torch.tensor(C ** 0.5, dtype=dt).to(DT)
    x = W["model.embed_tokens.weight"][ids] * norm_c
    gnorm = lambda t, w: rmsnorm(t, 1.0 + w, eps)
    gelu_tanh = lambda t: 0.5 * t * (1 + torch.tanh(math.sqrt(2 / math.pi) * (t + 0.044715 * t ** 3)))
    a_cap, f_cap = cfg.get("attn_logit_softcapping"), cfg.get("final_logit_softcapping")
    scale = HS ** -0.5 if g1 else cfg.get("query_pre_attn_scalar", 256) ** -0.5
    deepest = max(layers_wanted) if not want_logits else L
    scores_out, probs_out = {}, {}
    for li in range(deepest):
        keep_resid(li, x)
        p = f"model.layers.{li}."
        h = gnorm(x, W[p + "input_layernorm.weight"])
        q = (h @ W[p + "self_attn.q_proj.weight"].T).view(S, NH, HS).transpose(0, 1)
        k = (h @ W[p + "self_attn.k_proj.weight"].T).view(S, NKV, HS).transpose(0, 1)
        v = (h @ W[p + "self_attn.v_proj.weight"].T).view(S, NKV, HS).transpose(0, 1)
        if g3:   # per-head (1 + w) RMSNorm of q and k before RoPE
            q = gnorm(q, W[p + "self_attn.q_norm.weight"])
            k = gnorm(k, W[p + "self_attn.k_norm.weight"])
        if use_rope:
            c, s_ = (cos_l, sin_l) if (g3 and local[li]) else (cos, sin)
            q, k = rope(q, c, s_, rdim), rope(k, c, s_, rdim)
        k = k[:, None].expand(NKV, rep, S, HS).reshape(NH, S, HS)
        v = v[:, None].expand(NKV, rep, S, HS).reshape(NH, S, HS)
        sc = (q @ k.transpose(1, 2)) * scale
        if a_cap:
            sc = torch.tanh(sc / a_cap) * a_cap
        mask = attn_mask(S, causal, wins[li])
        o = attend(sc, mask, v, li, layers_wanted, scores_out, probs_out) @ W[p + "self_attn.o_proj.weight"].T
        x = x + (o if g1 else gnorm(o, W[p + "post_attention_layernorm.weight"]))
        h = gnorm(x, W[p + ("post_attention_layernorm.weight" if g1 else "pre_feedforward_layernorm.weight")])
        y = (gelu_tanh(h @ W[p + "mlp.gate_proj.weight"].T) * (h @ W[p + "mlp.up_proj.weight"].T)) @ W[p + "mlp.down_proj.weight"].T
        x = x + (y if g1 else gnorm(y, W[p + "post_feedforward_layernorm.weight"]))
    keep_resid(deepest, x)
    logits = None
    if want_logits:
        logits = gnorm(x, W["model.norm.weight"]) @ W["model.embed_tokens.weight"].T
        if f_cap:
            logits = torch.tanh(logits / f_cap) * f_cap
    return scores_out, probs_out, logits


def moe_ffn(cfg, W, p, h):
    """Mixture of experts as MixtralSparseMoeBlock / Qwen3MoeSparseMoeBlock / Qwen2MoeSparseMoeBlock
    compute it: router
    logits, softmax over all experts, the top num_experts_per_tok probabilities (ties: the lower
    expert index, a stable descending sort), renormalised to sum 1 (Mixtral always, Qwen3-MoE when
    norm_topk_prob), then each expert's SwiGLU of its tokens times the token's weight, added into
    zeros expert by expert in index order; Qwen2-MoE then adds its shared expert's SwiGLU times
    sigmoid(shared_expert_gate(x))."""
    mix = cfg["model_type"] == "mixtral"
    pre = p + ("block_sparse_moe." if mix else "mlp.")
    q2 = cfg["model_type"] == "qwen2_moe"
    E = cfg.get("num_local_experts", 8) if mix else cfg.get("num_experts", 60 if q2 else 128)
    K = cfg.get("num_experts_per_tok", 2 if mix else 4 if q2 else 8)
    names = ("w1", "w3", "w2") if mix else ("gate_proj", "up_proj", "down_proj")
    norm = True if mix else bool(cfg.get("norm_topk_prob", False))
    probs = torch.softmax(h @ W[pre + "gate.weight"].T, dim=-1)           # [S, E]
    chosen = torch.sort(probs, dim=-1, descending=True, stable=True).indices[:, :K]
    wts = torch.gather(probs, 1, chosen)
    if norm:
        wts = wts / wts.sum(-1, keepdim=True)
    y = torch.zeros_like(h)
    for e in range(E):
        ew = [W[f"{pre}experts.{e}.{n}.weight"] for n in names]
        rows, slot = torch.where(chosen == e)
        if rows.numel() == 0:
            continue
        xe = h[rows]
        oe = (torch.nn.functional.silu(xe @ ew[0].T) * (xe @ ew[1].T)) @ ew[2].T
        y.index_add_(0, rows, oe * wts[rows, slot, None])
    if q2:
        sw = [W[f"{pre}shared_expert.{n}.weight"] for n in names]
        sh = (torch.nn.functional.silu(h @ sw[0].T) * (h @ sw[1].T)) @ sw[2].T
        y = y + torch.sigmoid(h @ W[pre + "shared_expert_gate.weight"].T) * sh
    return y


def forward(cfg, W, ids, layers_wanted, causal, use_rope, want_logits):
    arch = cfg["model_type"]
    if arch in ("gemma", "gemma2", "gemma3_text"):
        return forward_gemma(cfg, W, ids, layers_wanted, causal, use_rope, want_logits)
    if arch == "gpt_neox":
        return forward_neox(cfg, W, ids, layers_wanted, causal, use_rope, want_logits)
    C, NH, NKV, HS, L = model_dims(cfg)
    eps = cfg["rms_norm_eps"]
    S = ids.shape[0]
    rep = NH // NKV
    cos, sin, rdim = rope_table(cfg, HS, S, True)
    wins = layer_windows(cfg)
    x = W["model.embed_tokens.weight"][ids]
    deepest = max(layers_wanted) if not want_logits else L
    scores_out, probs_out = {}, {}
    llama_bias = arch == "llama" and cfg.get("attention_bias", False)   # LlamaAttention: bias=config.attention_bias
    for li in range(deepest):
        keep_resid(li, x)
        p = f"model.layers.{li}."
        # olmo2 has no pre-norm: the block reads the residual stream itself
        h = x if arch == "olmo2" else rmsnorm(x, W[p + "input_layernorm.weight"], eps)
        if arch == "phi3":
            qkv = h @ W[p + "self_attn.qkv_proj.weight"].T
            q, k, v = qkv[:, :NH * HS], qkv[:, NH * HS:NH * HS + NKV * HS], qkv[:, NH * HS + NKV * HS:]
        else:
            q = h @ W[p + "self_attn.q_proj.weight"].T
            k = h @ W[p + "self_attn.k_proj.weight"].T
            v = h @ W[p + "self_attn.v_proj.weight"].T
            if llama_bias or p + "self_attn.q_proj.bias" in W:
                q = q + W[p + "self_attn.q_proj.bias"]
                k = k + W[p + "self_attn.k_proj.bias"]
                v = v + W[p + "self_attn.v_proj.bias"]
        if arch == "olmo2":   # RMSNorm over the whole projection, before the split into heads
            q = rmsnorm(q, W[p + "self_attn.q_norm.weight"], eps)
            k = rmsnorm(k, W[p + "self_attn.k_norm.weight"], eps)
        q = q.view(S, NH, HS).transpose(0, 1)   # [NH, S, HS]
        k = k.view(S, NKV, HS).transpose(0, 1)
        v = v.view(S, NKV, HS).transpose(0, 1)
        if arch in ("qwen3", "qwen3_moe"):
            q = rmsnorm(q, W[p + "self_attn.q_norm.weight"], eps)
            k = rmsnorm(k, W[p + "self_attn.k_norm.weight"], eps)
        if use_rope:
            q, k = rope(q, cos, sin, rdim), rope(k, cos, sin, rdim)
        k = k[:, None].expand(NKV, rep, S, HS).reshape(NH, S, HS)   # repeat_kv: head h -> kv h // rep
        v = v[:, None].expand(NKV, rep, S, HS).reshape(NH, S, HS)
        sc = (q @ k.transpose(1, 2)) * HS ** -0.5
        mask = attn_mask(S, causal, wins[li])
        o = attend(sc, mask, v, li, layers_wanted, scores_out, probs_out)
        if arch == "olmo2":   # post-norm placement: norm of the block output, then the residual add
            x = x + rmsnorm(o @ W[p + "self_attn.o_proj.weight"].T, W[p + "post_attention_layernorm.weight"], eps)
            g = x @ W[p + "mlp.gate_proj.weight"].T
            u = x @ W[p + "mlp.up_proj.weight"].T
            y = (torch.nn.functional.silu(g) * u) @ W[p + "mlp.down_proj.weight"].T
            x = x + rmsnorm(y, W[p + "post_feedforward_layernorm.weight"], eps)
            continue
        x = x + o @ W[p + "self_attn.o_proj.weight"].T
        if llama_bias:
            x = x + W[p + "self_attn.o_proj.bias"]
        h2 = rmsnorm(x, W[p + "post_attention_layernorm.weight"], eps)
        if arch in ("mixtral", "qwen3_moe", "qwen2_moe"):
            x = x + moe_ffn(cfg, W, p, h2)
            continue
        if arch == "phi3":
            gu = h2 @ W[p + "mlp.gate_up_proj.weight"].T
            FF = gu.shape[-1] // 2
            g, u = gu[:, :FF], gu[:, FF:]
        else:
            g = h2 @ W[p + "mlp.gate_proj.weight"].T
            u = h2 @ W[p + "mlp.up_proj.weight"].T
        x = x + (torch.nn.functional.silu(g) * u) @ W[p + "mlp.down_proj.weight"].T
    keep_resid(deepest, x)
    logits = None
    if want_logits:
        xn = rmsnorm(x, W["model.norm.weight"], eps)
        head = W.get("lm_head.weight", W["model.embed_tokens.weight"])
        logits = xn @ head.T
    return scores_out, probs_out, logits


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("tokens")
    ap.add_argument("out")
    ap.add_argument("--layers", default="")
    ap.add_argument("--bidirectional", action="store_true")
    ap.add_argument("--no-rope", action="store_true")
    ap.add_argument("--logits", action="store_true")
    a = ap.parse_args()
    with open(os.path.join(a.model, "config.json")) as f:
        cfg = json.load(f)
    W = load_weights(a.model)
    ids = np.load(a.tokens).astype(np.int64)
    if ids.ndim == 1:
        ids = ids[None]
    L = cfg["num_hidden_layers"]
    wanted = [int(t) for t in a.layers.split(",")] if a.layers else list(range(1, min(L, 4) + 1))
    acc = None
    pacc, sink, ent = None, None, None
    logits = []
    with torch.no_grad():
        for s in range(ids.shape[0]):
            sc, pr, lg = forward(cfg, W, torch.from_numpy(ids[s]), wanted, not a.bidirectional, not a.no_rope, a.logits)
            st = torch.stack([sc[l] for l in wanted])
            acc = st if acc is None else acc + st
            pt = torch.stack([pr[l] for l in wanted])  # [L, H, S, S]
            pacc = pt if pacc is None else pacc + pt
            q = pt[:, :, 1:, :]  # queries i >= 1
            sk = q[..., 0].mean(-1)
            en = -(torch.where(q > 0, q * torch.log(q), torch.zeros_like(q))).sum(-1).mean(-1)
            sink = sk if sink is None else sink + sk
            ent = en if ent is None else ent + en
            if lg is not None:
                logits.append(lg.numpy())
    unread = sorted(set(W) - W.read)
    if a.logits and unread:
        raise SystemExit(f"probe_ref: {a.model}: {len(unread)} tensors the {cfg['model_type']} forward does not read: "
                         + ", ".join(unread[:4]))
    np.save(os.path.join(a.out, "ref_scores_heads.npy"), (acc / ids.shape[0]).numpy())
    np.save(os.path.join(a.out, "ref_probs_heads.npy"), (pacc / ids.shape[0]).numpy())
    np.save(os.path.join(a.out, "ref_sink.npy"), (sink / ids.shape[0]).numpy())
    np.save(os.path.join(a.out, "ref_entropy.npy"), (ent / ids.shape[0]).numpy())
    if a.logits:
        np.save(os.path.join(a.out, "ref_logits.npy"), np.stack(logits))
    print(f"probe_ref: {cfg['model_type']} N={ids.shape[0]} S={ids.shape[1]} layers={wanted} "
          f"causal={not a.bidirectional} rope={not a.no_rope} torch {torch.__version__}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
