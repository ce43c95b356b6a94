#!/usr/bin/python3
"""Independent reader for the checkpoints `maskpos mkmodel` writes (and any HF/GGUF of the same
archs), written from ../shared/docs/model-formats.md with numpy only — not from maskpos' C code.

usage: load_ref.py HF_DIR GGUF_FILE [--inspect-json FILE]
  - parses every safetensors file of HF_DIR (single or sharded via model.safetensors.index.json)
    and GGUF_FILE (v2/v3, F32/F16/BF16/Q8_0/Q4_0 tensors);
  - maps GGUF names to HF names, reverses ne, undoes the llama Q/K row permutation with the
    converter's reshape/swapaxes formula, and requires every tensor to be equal (bit-identical
    for float types, within the grid step for Q8_0/Q4_0);
  - checks config.json against the GGUF metadata;
  - with --inspect-json (output of `maskpos inspect HF_DIR --json --tensors`): checks the
    parameter count, every tensor shape and the RoPE inv_freq table recomputed here from config.json.
Exit 0 when everything agrees, 1 otherwise (a line per mismatch).
"""
import json
import math
import os
import struct
import sys

import numpy as np

ST_DT = {"F32": np.float32, "F16": np.float16, "BF16": "bf16"}


def bf16_to_f32(u16):
    return (u16.astype(np.uint32) << 16).view(np.float32)


def read_safetensors(path):
    raw = np.fromfile(path, dtype=np.uint8)
    n = struct.unpack("<Q", raw[:8].tobytes())[0]
    hdr = json.loads(raw[8:8 + n].tobytes().decode("utf-8"))
    base = 8 + n
    out = {}
    for name, info in hdr.items():
        if name == "__metadata__":
            continue
        b, e = info["data_offsets"]
        buf = raw[base + b: base + e]
        dt = ST_DT[info["dtype"]]
        if dt == "bf16":
            arr = bf16_to_f32(buf.view(np.uint16))
        else:
            arr = buf.view(dt).astype(np.float32)
        out[name] = arr.reshape(info["shape"])
    assert base + max([v["data_offsets"][1] for k, v in hdr.items() if k != "__metadata__"] + [0]) == raw.size
    return out


def read_hf(d):
    idx = os.path.join(d, "model.safetensors.index.json")
    tensors = {}
    if os.path.exists(idx):
        files = sorted(set(json.load(open(idx))["weight_map"].values()))
    else:
        files = ["model.safetensors"]
    for f in files:
        tensors.update(read_safetensors(os.path.join(d, f)))
    return tensors, json.load(open(os.path.join(d, "config.json")))


class Reader:
    def __init__(self, b):
        self.b, self.p = b, 0

    def take(self, fmt):
        v = struct.unpack_from("<" + fmt, self.b, self.p)
        self.p += struct.calcsize("<" + fmt)
        return v[0]

    def string(self):
        n = self.take("Q")
        s = self.b[self.p:self.p + n].decode("utf-8")
        self.p += n
        return s


SCALAR = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}


def value(r, t):
    if t in SCALAR:
        return r.take(SCALAR[t])
    if t == 8:
        return r.string()
    if t == 9:
        et, n = r.take("I"), r.take("Q")
        return [value(r, et) for _ in range(n)]
    raise ValueError("bad type %d" % t)


def dequant(t, raw, n):
    if t == 0:
        return raw.view(np.float32)[:n].copy()
    if t == 1:
        return raw.view(np.float16)[:n].astype(np.float32)
    if t == 30:
        return bf16_to_f32(raw.view(np.uint16)[:n])
    if t == 8:  # Q8_0 {f16 d; i8 qs[32]}
        blk = raw.reshape(-1, 34)
        d = blk[:, :2].copy().view(np.float16).astype(np.float32)
        q = blk[:, 2:].view(np.int8).astype(np.float32)
        return (q * d).reshape(-1)
    if t == 2:  # Q4_0 {f16 d; u8 qs[16]}: low nibbles first half, high nibbles second half
        blk = raw.reshape(-1, 18)
        d = blk[:, :2].copy().view(np.float16).astype(np.float32)
        qs = blk[:, 2:]
        q = np.concatenate([(qs & 0xF).astype(np.int32) - 8, (qs >> 4).astype(np.int32) - 8], axis=1)
        return (q.astype(np.float32) * d).reshape(-1)
    raise ValueError("type %d not handled by the reference reader" % t)


BLOCK = {0: (1, 4), 1: (1, 2), 30: (1, 2), 8: (32, 34), 2: (32, 18), 12: (256, 144)}


def read_gguf(path):
    b = open(path, "rb").read()
    r = Reader(b)
    assert b[:4] == b"GGUF"
    r.p = 4
    ver = r.take("I")
    assert ver in (2, 3)
    nt, nkv = r.take("Q"), r.take("Q")
    kv = {}
    for _ in range(nkv):
        k = r.string()
        kv[k] = value(r, r.take("I"))
    infos = []
    for _ in range(nt):
        name = r.string()
        nd = r.take("I")
        ne = [r.take("Q") for _ in range(nd)]
        t = r.take("I")
        off = r.take("Q")
        infos.append((name, ne, t, off))
    align = kv.get("general.alignment", 32)
    start = (r.p + align - 1) // align * align
    out, types = {}, {}
    for name, ne, t, off in infos:
        n = int(np.prod(ne))
        be, bb = BLOCK[t]
        nbytes = n // be * bb
        raw = np.frombuffer(b, dtype=np.uint8, count=nbytes, offset=start + off)
        out[name] = dequant(t, raw, n).reshape(list(reversed(ne)))
        types[name] = t
    return out, types, kv


HF_OF_GGUF = {"token_embd.weight": "model.embed_tokens.weight", "output_norm.weight": "model.norm.weight",
              "output.weight": "lm_head.weight"}
LAYER = {"attn_norm.weight": "input_layernorm.weight", "attn_q.weight": "self_attn.q_proj.weight",
         "attn_k.weight": "self_attn.k_proj.weight", "attn_v.weight": "self_attn.v_proj.weight",
         "attn_q.bias": "self_attn.q_proj.bias", "attn_k.bias": "self_attn.k_proj.bias",
         "attn_v.bias": "self_attn.v_proj.bias", "attn_output.weight": "self_attn.o_proj.weight",
         "attn_q_norm.weight": "self_attn.q_norm.weight", "attn_k_norm.weight": "self_attn.k_norm.weight",
         "ffn_norm.weight": "post_attention_layernorm.weight", "ffn_gate.weight": "mlp.gate_proj.weight",
         "ffn_up.weight": "mlp.up_proj.weight", "ffn_down.weight": "mlp.down_proj.weight",
         "attn_qkv.weight": "self_attn.qkv_proj.weight"}


def hf_name(g, arch):
    if g in HF_OF_GGUF:
        return HF_OF_GGUF[g]
    if g.startswith("blk."):
        _, i, rest = g.split(".", 2)
        if arch == "phi3" and rest == "ffn_up.weight":
            return "model.layers.%s.mlp.gate_up_proj.weight" % i
        return "model.layers.%s.%s" % (i, LAYER[rest])
    return None


def permute(w, n_head):
    # convert_hf_to_gguf.py LlamaModel.permute: HF rows -> GGUF rows (as documented in the spec)
    return w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def inv_freq_from_config(c):
    hd = c.get("head_dim") or c["hidden_size"] // c["num_attention_heads"]
    dim = int(hd * c.get("partial_rotary_factor", 1.0))
    base = c.get("rope_theta", 10000.0)
    inv = 1.0 / (base ** (np.arange(0, dim, 2, dtype=np.float64) / dim))
    rs = c.get("rope_scaling")
    if rs:
        t = rs.get("rope_type", rs.get("type"))
        if t == "llama3":
            f, lo, hi, old = rs["factor"], rs["low_freq_factor"], rs["high_freq_factor"], rs["original_max_position_embeddings"]
            wl = 2 * math.pi / inv
            inv_l = np.where(wl > old / lo, inv / f, inv)
            s = (old / wl - lo) / (hi - lo)
            sm = (1 - s) * inv_l / f + s * inv_l
            med = ~(wl < old / hi) & ~(wl > old / lo)
            inv = np.where(med, sm, inv_l)
        elif t in ("longrope", "su"):
            inv = 1.0 / (np.array(rs["short_factor"]) * base ** (np.arange(0, dim, 2, dtype=np.float64) / dim))
    return inv


def main():
    hf_dir, gguf_path = sys.argv[1], sys.argv[2]
    ij = sys.argv[sys.argv.index("--inspect-json") + 1] if "--inspect-json" in sys.argv else None
    bad = []
    hf, cfg = read_hf(hf_dir)
    gg, types, kv = read_gguf(gguf_path)
    arch = kv["general.architecture"]
    nh, nkv = cfg["num_attention_heads"], cfg["num_key_value_heads"]
    seen = set()
    for g, w in gg.items():
        h = hf_name(g, arch)
        if h is None:
            continue  # rope_freqs / rope_factors: checked through the metadata below
        seen.add(h)
        if h not in hf:
            bad.append("GGUF %s has no HF %s" % (g, h))
            continue
        x = hf[h]
        if arch == "llama" and (".attn_q." in g or ".attn_k." in g):
            x = permute(x, nh if ".attn_q." in g else nkv)
        if x.shape != w.shape:
            bad.append("%s: shape %s vs %s" % (g, x.shape, w.shape))
            continue
        if types[g] in (0, 1, 30):
            if not np.array_equal(x, w):
                bad.append("%s: values differ (max %g)" % (g, np.abs(x - w).max()))
        else:
            blk = x.reshape(-1, 32)
            step = np.abs(blk).max(axis=1, keepdims=True) / (127 if types[g] == 8 else 8)
            if np.any(np.abs(x.reshape(-1, 32) - w.reshape(-1, 32)) > step * 1.01 + 1e-6):
                bad.append("%s: quantised values off the grid" % g)
    for h in hf:
        if h not in seen:
            bad.append("HF tensor %s missing from the GGUF" % h)
    a = arch
    checks = [("%s.block_count" % a, cfg["num_hidden_layers"]), ("%s.embedding_length" % a, cfg["hidden_size"]),
              ("%s.feed_forward_length" % a, cfg["intermediate_size"]), ("%s.attention.head_count" % a, nh),
              ("%s.attention.head_count_kv" % a, nkv)]
    for k, want in checks:
        if kv.get(k) != want:
            bad.append("metadata %s = %s, config says %s" % (k, kv.get(k), want))
    if abs(kv["%s.rope.freq_base" % a] - cfg["rope_theta"]) > 1e-6 * cfg["rope_theta"]:
        bad.append("rope.freq_base differs")
    if len(kv["tokenizer.ggml.tokens"]) != cfg["vocab_size"]:
        bad.append("token count %d != vocab_size" % len(kv["tokenizer.ggml.tokens"]))
    inv = inv_freq_from_config(cfg)
    if "rope_freqs.weight" in gg:  # llama3 in GGUF: theta^(-2i/d) / rope_freqs
        d = len(inv) * 2
        g_inv = 1.0 / (cfg["rope_theta"] ** (np.arange(0, d, 2) / d)) / gg["rope_freqs.weight"].astype(np.float64)
        if np.max(np.abs(g_inv / inv - 1)) > 1e-6:
            bad.append("rope_freqs.weight disagrees with config rope_scaling")
    if ij:
        j = json.load(open(ij))
        params = sum(int(np.prod(v.shape)) for v in hf.values())
        if j["parameters"] != params:
            bad.append("inspect parameters %d, counted %d" % (j["parameters"], params))
        for t in j.get("tensors", []):
            if list(hf[t["name"]].shape) != t["shape"]:
                bad.append("inspect shape of %s" % t["name"])
        mi = np.array(j["rope"]["inv_freq"])
        if mi.shape != inv.shape or np.max(np.abs(mi / inv - 1)) > 2e-7:
            bad.append("inspect inv_freq differs from the table recomputed from config.json")
    for m in bad:
        print("MISMATCH", m)
    print("load_ref: %d tensors compared, %d mismatches" % (len(seen), len(bad)))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
