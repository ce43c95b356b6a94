#!/usr/bin/python3
"""train_ref.py — independent PyTorch reference for `maskpos train` (tests/test_train.c).

Written from the specification (../shared/docs/model-formats.md §2.1 Llama block, HF config.json
conventions; torch.optim.AdamW; torch.nn.utils.clip_grad_norm_), not from the C code. Everything
runs in float64 from the f32 weights the C side wrote, so differences measure the C f32 error.
Uses only Debian's python3-torch and python3-numpy (no transformers).

Modes
  step    recompute loss, every gradient, the clipped norm and N AdamW steps on one batch from a
          checkpoint directory; compare with the C run's files; exit 1 on disagreement.
  golden  train N steps from a checkpoint on the batches dumped by `maskpos train --dump-batches`
          and write the loss curve as JSON (data/fixtures/train/golden_loss.json).

Checkpoint conventions read here: config.json keys hidden_size, num_hidden_layers,
num_attention_heads, num_key_value_heads, head_dim, intermediate_size, vocab_size, rms_norm_eps,
rope_theta, tie_word_embeddings, and "no_rope_layers" (per layer: 1 = RoPE, 0 = none, as in HF's
SmolLM3 config; absent = RoPE everywhere).
"""
import argparse
import json
import math
import struct
import sys

import numpy as np
import torch

torch.set_default_dtype(torch.float64)


# ---------------------------------------------------------------- safetensors (numpy reader)
def read_safetensors(path):
    with open(path, "rb") as f:
        buf = f.read()
    (n,) = struct.unpack("<Q", buf[:8])
    header = json.loads(buf[8:8 + n].decode("utf-8"))
    base = 8 + n
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        b, e = info["data_offsets"]
        raw = buf[base + b:base + e]
        if info["dtype"] == "F32":
            a = np.frombuffer(raw, dtype="<f4").astype(np.float64)
        elif info["dtype"] == "BF16":
            a = (np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16).view(np.float32).astype(np.float64)
        else:
            raise SystemExit(f"{path}: dtype {info['dtype']} not handled")
        out[name] = a.reshape(info["shape"])
    return out


# ---------------------------------------------------------------- the Llama block (spec §2.1)
class Llama:
    def __init__(self, ckpt):
        with open(f"{ckpt}/config.json") as f:
            cfg = json.load(f)
        self.cfg = cfg
        self.L = cfg["num_hidden_layers"]
        self.C = cfg["hidden_size"]
        self.NH = cfg["num_attention_heads"]
        self.NKV = cfg.get("num_key_value_heads", self.NH)
        self.HS = cfg.get("head_dim") or self.C // self.NH
        self.eps = cfg.get("rms_norm_eps", 1e-6)
        self.theta = cfg.get("rope_theta", 10000.0)
        self.tie = cfg.get("tie_word_embeddings", False)
        self.rope_layers = cfg.get("no_rope_layers", [1] * self.L)
        w = read_safetensors(f"{ckpt}/model.safetensors")
        self.p = {k: torch.tensor(v, requires_grad=True) for k, v in w.items()}
        if self.tie:
            assert "lm_head.weight" not in self.p

    def params(self):
        return self.p

    @staticmethod
    def rmsnorm(x, w, eps):
        var = x.pow(2).mean(-1, keepdim=True)
        return w * (x * torch.rsqrt(var + eps))

    def rope(self, x, T):
        # HF default RoPE, rotate_half pairs (i, i + HS/2)
        inv = 1.0 / (self.theta ** (torch.arange(0, self.HS, 2, dtype=torch.float64) / self.HS))
        freqs = torch.arange(T, dtype=torch.float64)[:, None] * inv[None, :]
        emb = torch.cat([freqs, freqs], dim=-1)
        cos, sin = emb.cos().to(x.dtype), emb.sin().to(x.dtype)
        x1, x2 = x[..., : self.HS // 2], x[..., self.HS // 2:]
        rot = torch.cat([-x2, x1], dim=-1)
        return x * cos + rot * sin

    def loss(self, ids, tgt):
        p = self.p
        B, T = ids.shape
        h = p["model.embed_tokens.weight"][ids]
        mask = torch.full((T, T), float("-inf"), dtype=h.dtype).triu(1)
        rep = self.NH // self.NKV
        for l in range(self.L):
            pre = f"model.layers.{l}."
            x = self.rmsnorm(h, p[pre + "input_layernorm.weight"], self.eps)
            q = (x @ p[pre + "self_attn.q_proj.weight"].T).view(B, T, self.NH, self.HS).transpose(1, 2)
            k = (x @ p[pre + "self_attn.k_proj.weight"].T).view(B, T, self.NKV, self.HS).transpose(1, 2)
            v = (x @ p[pre + "self_attn.v_proj.weight"].T).view(B, T, self.NKV, self.HS).transpose(1, 2)
            if self.rope_layers[l]:
                q, k = self.rope(q, T), self.rope(k, T)
            k = k[:, :, None].expand(B, self.NKV, rep, T, self.HS).reshape(B, self.NH, T, self.HS)
            v = v[:, :, None].expand(B, self.NKV, rep, T, self.HS).reshape(B, self.NH, T, self.HS)
            s = q @ k.transpose(2, 3) * self.HS ** -0.5 + mask
            a = torch.softmax(s, dim=-1)
            o = (a @ v).transpose(1, 2).reshape(B, T, self.NH * self.HS)
            h = h + o @ p[pre + "self_attn.o_proj.weight"].T
            x2 = self.rmsnorm(h, p[pre + "post_attention_layernorm.weight"], self.eps)
            g = x2 @ p[pre + "mlp.gate_proj.weight"].T
            u = x2 @ p[pre + "mlp.up_proj.weight"].T
            h = h + (torch.nn.functional.silu(g) * u) @ p[pre + "mlp.down_proj.weight"].T
        hf = self.rmsnorm(h, p["model.norm.weight"], self.eps)
        head = p["model.embed_tokens.weight"] if self.tie else p["lm_head.weight"]
        logits = hf @ head.T
        return torch.nn.functional.cross_entropy(logits.reshape(B * T, -1), tgt.reshape(-1))


def lr_at(step, lr, warmup, total, min_frac):
    """Linear warm-up (step+1)/warmup, then cosine from lr to lr*min_frac (docs/train.md)."""
    if step < warmup:
        return lr * (step + 1) / warmup
    span = total - warmup
    frac = min(1.0, (step - warmup) / span) if span > 0 else 1.0
    lo = lr * min_frac
    return lo + 0.5 * (lr - lo) * (1 + math.cos(math.pi * frac))


def make_opt(model, a):
    decay = [t for t in model.params().values() if t.dim() == 2]
    other = [t for t in model.params().values() if t.dim() != 2]
    return torch.optim.AdamW([{"params": decay, "weight_decay": a.wd}, {"params": other, "weight_decay": 0.0}],
                             lr=a.lr, betas=(a.beta1, a.beta2), eps=a.eps)


def close(name, got, ref, atol, rtol_max, report):
    err = np.abs(got - ref).max() if got.size else 0.0
    scale = np.abs(ref).max() if ref.size else 0.0
    tol = atol + rtol_max * scale
    report.append((name, err, scale))
    return err <= tol


# ---------------------------------------------------------------- modes
def mode_step(a):
    model = Llama(a.ckpt)
    batch = np.load(a.batch)
    ids = torch.tensor(batch[0].astype(np.int64))
    tgt = torch.tensor(batch[1].astype(np.int64))
    opt = make_opt(model, a)
    c_losses = [float(x) for x in a.loss.split(",")]
    ok = True
    for s in range(a.steps):
        for g in opt.param_groups:
            g["lr"] = lr_at(s, a.lr, a.warmup, a.total, a.min_lr_frac)
        opt.zero_grad()
        loss = model.loss(ids, tgt)
        loss.backward()
        dl = abs(loss.item() - c_losses[s])
        print(f"step {s + 1}: loss torch {loss.item():.9f} C {c_losses[s]:.9f} |diff| {dl:.2e}")
        # loss: f32 forward through ~10 ops of O(1) values; 1e-5 relative is ~100 ulp
        if dl > 1e-5 * abs(loss.item()):
            ok = False
        if s == 0:
            cg = read_safetensors(a.grads)
            rep = []
            for name, t in model.params().items():
                # gradients: C in f32; tolerance 2e-5 of the tensor's largest entry (measured ~1e-6)
                if not close(name, cg[name], t.grad.numpy(), 1e-9, 2e-5, rep):
                    ok = False
                    print(f"  GRADIENT MISMATCH {name}")
            worst = max(e / (sc if sc > 0 else 1) for _, e, sc in rep)
            print(f"  gradients: {len(rep)} tensors, max |C - torch| / max|g| = {worst:.2e}")
            norm = torch.nn.utils.clip_grad_norm_(list(model.params().values()), a.clip)
            print(f"  grad norm torch {norm.item():.9f} C {a.norm:.9f}")
            if abs(norm.item() - a.norm) > 1e-5 * norm.item():
                ok = False
        else:
            torch.nn.utils.clip_grad_norm_(list(model.params().values()), a.clip)
        opt.step()
        after = read_safetensors(f"{a.after}{s + 1}.safetensors")
        rep = []
        for name, t in model.params().items():
            # weights after AdamW: updates are ~lr per entry; atol lr*1e-3 covers f32 rounding and
            # the f32-vs-f64 gradient difference passed through m/sqrt(v)
            if not close(name, after[name], t.detach().numpy(), a.lr * 1e-3, 0.0, rep):
                ok = False
                print(f"  WEIGHT MISMATCH after step {s + 1}: {name}")
        worst = max(e for _, e, _ in rep)
        print(f"  weights after AdamW step {s + 1}: max |C - torch| = {worst:.2e} (lr {opt.param_groups[0]['lr']:.3g})")
    print("torch reference:", "AGREES" if ok else "DISAGREES")
    return 0 if ok else 1


def mode_golden(a):
    model = Llama(a.ckpt)
    batches = np.load(a.batches)
    opt = make_opt(model, a)
    losses = []
    for s in range(batches.shape[0]):
        for g in opt.param_groups:
            g["lr"] = lr_at(s, a.lr, a.warmup, a.total, a.min_lr_frac)
        opt.zero_grad()
        loss = model.loss(torch.tensor(batches[s, 0].astype(np.int64)), torch.tensor(batches[s, 1].astype(np.int64)))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(list(model.params().values()), a.clip)
        opt.step()
        losses.append(loss.item())
    out = {"what": "loss per step of the torch float64 reference (tests/ref/train_ref.py golden) from the "
                   "initial weights and batches of `maskpos train FLAGS --save-init --dump-batches`",
           "flags": a.flags, "torch": torch.__version__, "loss": losses}
    with open(a.out, "w") as f:
        json.dump(out, f, indent=1)
    print(f"wrote {a.out}: {len(losses)} steps, {losses[0]:.4f} -> {losses[-1]:.4f}")
    return 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=["step", "golden"])
    ap.add_argument("--ckpt", required=True)
    ap.add_argument("--batch")
    ap.add_argument("--batches")
    ap.add_argument("--grads")
    ap.add_argument("--after")
    ap.add_argument("--steps", type=int, default=1)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--warmup", type=int, default=100)
    ap.add_argument("--total", type=int, default=1000)
    ap.add_argument("--min-lr-frac", type=float, default=0.1)
    ap.add_argument("--beta1", type=float, default=0.9)
    ap.add_argument("--beta2", type=float, default=0.95)
    ap.add_argument("--eps", type=float, default=1e-8)
    ap.add_argument("--wd", type=float, default=0.1)
    ap.add_argument("--clip", type=float, default=1.0)
    ap.add_argument("--loss", default="")
    ap.add_argument("--norm", type=float, default=0.0)
    ap.add_argument("--flags", default="")
    ap.add_argument("--out")
    a = ap.parse_args()
    torch.set_num_threads(1)
    sys.exit(mode_step(a) if a.mode == "step" else mode_golden(a))


if __name__ == "__main__":
    main()
