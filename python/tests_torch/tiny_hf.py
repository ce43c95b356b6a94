"""tiny_hf.py — a small PyTorch decoder shaped the way transformers' Llama/Mistral classes are, so
that maskpos.hf's hook can be tested where transformers is not installed: attention modules with
layer_idx, scaling and sliding_window, a config whose _attn_implementation names the attention
function, looked up in ATTENTION_FUNCTIONS and called as (module, query, key, value,
attention_mask, scaling, dropout, **kwargs) with query [B, H, T, D], key/value [B, KV, T, D] and an
additive float mask [B, 1, T, T] (causal, window, and padded keys from the model's attention_mask,
as transformers builds it: finfo.min where masked), returning (output [B, T, H, D], probabilities).

Weights: an HF folder written by `maskpos mkmodel` (llama or mistral), read with
tests/ref/probe_ref.py's safetensors reader and RoPE tables (the project's independent torch
reference), in float64. eager() below is this file's own eager attention (the default).
"""
import json
import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tests", "ref"))
import probe_ref  # noqa: E402

DT = torch.float64


def eager(module, query, key, value, attention_mask, scaling, dropout=0.0, **kwargs):
    rep = query.shape[1] // key.shape[1]
    k = key.repeat_interleave(rep, dim=1)
    v = value.repeat_interleave(rep, dim=1)
    sc = torch.matmul(query, k.transpose(2, 3)) * scaling
    if module.capture is not None:
        module.capture.append((module.layer_idx, sc.clone()))
    if attention_mask is not None:
        sc = sc + attention_mask
    p = torch.softmax(sc, dim=-1, dtype=torch.float32).to(query.dtype)
    return torch.matmul(p, v).transpose(1, 2).contiguous(), p


ATTENTION_FUNCTIONS = {"eager": eager}


class Config:
    def __init__(self, cfg):
        self.raw = cfg
        self.model_type = cfg["model_type"]
        self.hidden_size = cfg["hidden_size"]
        self.rope_theta = cfg.get("rope_theta", 10000.0)
        self.num_hidden_layers = cfg["num_hidden_layers"]
        self.num_attention_heads = cfg["num_attention_heads"]
        self.num_key_value_heads = cfg.get("num_key_value_heads", self.num_attention_heads)
        self.bos_token_id = cfg.get("bos_token_id")
        self._attn_implementation = "eager"
        self._name_or_path = "tiny"


class Attention(torch.nn.Module):
    def __init__(self, config, W, li, window):
        super().__init__()
        self.config, self.layer_idx, self.W = config, li, W
        C, NH, NKV, HS, L = probe_ref.model_dims(config.raw)
        self.NH, self.NKV, self.HS = NH, NKV, HS
        self.head_dim = HS
        self.scaling = HS ** -0.5
        self.sliding_window = window or None
        self.capture = None
        self.extra = {}  # more keyword arguments to the attention function (tests: s_aux, ...)

    def forward(self, h, cos, sin, rdim, mask):
        p = "model.layers.%d.self_attn." % self.layer_idx
        B, T, _ = h.shape
        q = (h @ self.W[p + "q_proj.weight"].T).view(B, T, self.NH, self.HS).transpose(1, 2)
        k = (h @ self.W[p + "k_proj.weight"].T).view(B, T, self.NKV, self.HS).transpose(1, 2)
        v = (h @ self.W[p + "v_proj.weight"].T).view(B, T, self.NKV, self.HS).transpose(1, 2)
        q, k = probe_ref.rope(q, cos, sin, rdim), probe_ref.rope(k, cos, sin, rdim)
        fn = ATTENTION_FUNCTIONS[self.config._attn_implementation]
        kw = dict(sliding_window=self.sliding_window)
        kw.update(self.extra)
        out, _ = fn(self, q, k, v, mask, self.scaling, 0.0, **kw)
        return out.reshape(B, T, -1) @ self.W[p + "o_proj.weight"].T


class DecoderLayer(torch.nn.Module):
    """One layer as transformers' *DecoderLayer: self_attn (the Attention above) and the MLP, each
    with its residual; returns the residual stream after the layer (what a forward hook sees)."""

    def __init__(self, config, W, att):
        super().__init__()
        self.config, self.W, self.self_attn = config, W, att

    def forward(self, x, cos, sin, rdim, mask):
        p = "model.layers.%d." % self.self_attn.layer_idx
        eps = self.config.raw["rms_norm_eps"]
        x = x + self.self_attn(probe_ref.rmsnorm(x, self.W[p + "input_layernorm.weight"], eps), cos, sin, rdim, mask)
        h2 = probe_ref.rmsnorm(x, self.W[p + "post_attention_layernorm.weight"], eps)
        g = h2 @ self.W[p + "mlp.gate_proj.weight"].T
        u = h2 @ self.W[p + "mlp.up_proj.weight"].T
        return x + (torch.nn.functional.silu(g) * u) @ self.W[p + "mlp.down_proj.weight"].T


class RotaryEmbedding(torch.nn.Module):
    """transformers' *RotaryEmbedding as far as maskpos.hf reads it: the inv_freq buffer."""

    def __init__(self, inv_freq):
        super().__init__()
        self.register_buffer("inv_freq", inv_freq, persistent=False)


class TinyModel(torch.nn.Module):
    """model(input_ids=[B, T], attention_mask=[B, T]) -> logits [B, T, V] (float64)."""

    def __init__(self, folder):
        super().__init__()
        with open(os.path.join(folder, "config.json")) as f:
            cfg = json.load(f)
        self.config = Config(cfg)
        self.W = probe_ref.load_weights(folder)
        self.dummy = torch.nn.Parameter(torch.zeros(1, dtype=DT))  # next(parameters()) names the device
        wins = probe_ref.layer_windows(cfg)
        self.layers = torch.nn.ModuleList(Attention(self.config, self.W, i, wins[i]) for i in range(cfg["num_hidden_layers"]))
        self.decoder = torch.nn.ModuleList(DecoderLayer(self.config, self.W, a) for a in self.layers)
        C, NH, NKV, HS, L = probe_ref.model_dims(cfg)
        self.rotary_emb = RotaryEmbedding(probe_ref.rope_inv_freq(cfg, HS, cfg.get("max_position_embeddings", 128))[0])

    def forward(self, input_ids, attention_mask=None, use_cache=False):
        cfg = self.config.raw
        C, NH, NKV, HS, L = probe_ref.model_dims(cfg)
        eps = cfg["rms_norm_eps"]
        B, T = input_ids.shape
        cos, sin, rdim = probe_ref.rope_table(cfg, HS, T, True)
        x = self.W["model.embed_tokens.weight"][input_ids]
        for li, att in enumerate(self.layers):
            m = probe_ref.attn_mask(T, True, att.sliding_window or 0)[None, None].expand(B, 1, T, T)
            if attention_mask is not None:  # padded keys masked for every query, as transformers' masks do
                m = m & (attention_mask != 0).view(B, 1, 1, T)
            mask = torch.zeros(B, 1, T, T, dtype=DT).masked_fill(~m, torch.finfo(DT).min)
            x = self.decoder[li](x, cos, sin, rdim, mask)
        xn = probe_ref.rmsnorm(x, self.W["model.norm.weight"], eps)
        head = self.W.get("lm_head.weight", self.W["model.embed_tokens.weight"])
        return xn @ head.T
