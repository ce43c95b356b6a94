#!/usr/bin/python3
"""Independent reference for `maskpos probe --stats position`, in PyTorch and numpy (float64).

Runs probe_ref.py's decoder (written from shared/docs/model-formats.md, not from maskpos' C code)
on token ids, keeps per selected layer the residual stream after the layer ([S, C]), and fits the
position probe as docs/metrics.md ("Position probe") specifies it, directly on the design matrix:
  - features z = R x, R [K, C] with one nonzero per column d: in row (the low 31 bits of
    splitmix64(d)) mod K, -1 where the top bit of splitmix64(d) is set, else +1 (feature hashing;
    z = x when K >= C or K == 0);
  - sequence s samples positions off(s), off(s) + stride, ... (off(s) = splitmix64(s) mod stride)
    and is held out when s % 4 == 3;
  - ridge on the fitted rows: the design and the positions centred on their means, lambda =
    ridge * trace(Zc^T Zc) / K, w = solve(Zc^T Zc + lambda I, Zc^T yc) (numpy.linalg.solve), the
    intercept from the means;
  - held out: R2 = 1 - SSE / sum (y - mean y)^2, chance R2 with the fitted mean as the prediction;
    MAE (and its standard error: sample std / sqrt(m)) over the held-out rows whose slot
    (s // 4) * ceil(S / stride) + p is below 1024, and the chance MAE |y - fitted mean| on them;
    R2's standard error: held-out sequence s in group (s // 4) % 16; for each non-empty group, R2
    (about its own mean) of the held-out rows outside it, w and b unchanged;
    sqrt((n - 1) / n * sum (R2_g - mean)^2) over the n groups.
  OUT/ref_pos_probe.npy float64 [L, 11]: the columns of pos_probe.npy (docs/outputs.md).
  --resid-stride K: only sequences s = 0, K, 2K, ... take part, each as sequence s // K of the rules
  above (its offset, its split, its MAE rows, its group).
usage: pos_ref.py MODEL_DIR TOKENS.npy OUT_DIR [--layers 1,2] [--dim K] [--stride K] [--ridge A]
                  [--bidirectional] [--no-rope] [--resid-stride K]
Uses only Debian's python3-torch and python3-numpy.
"""
import argparse
import json
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import probe_ref  # noqa: E402  (the decoder)

M64 = (1 << 64) - 1
MAE_ROWS = 1024


def splitmix64(x):
    """splitmix64's finaliser on a numpy uint64 array (wrapping arithmetic)."""
    with np.errstate(over="ignore"):
        z = x + np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return z ^ (z >> np.uint64(31))


def projection(K, C):
    """R [K, C]: column d holds its sign in row (low 31 bits of splitmix64(d)) mod K, zeros elsewhere."""
    h = splitmix64(np.arange(C, dtype=np.uint64))
    R = np.zeros((K, C))
    R[(h & np.uint64(0x7FFFFFFF)) % np.uint64(K), np.arange(C)] = np.where(h >> np.uint64(63), -1.0, 1.0)
    return R


def probe_layer(resid, K, stride, ridge, every=1):
    """resid [N, S, C] float64 -> the 11 columns."""
    N, S, C = resid.shape
    R = projection(K, C) if K < C else None
    per = -(-S // stride)
    fit_z, fit_y, te_z, te_y, te_g, mae_rows = [], [], [], [], [], []
    for s in range(N // every + (N % every > 0)):
        x_all = resid[s * every]
        off = int(splitmix64(np.array([s], dtype=np.uint64))[0] % np.uint64(stride))
        pos = np.arange(off, S, stride)
        x = x_all[pos]
        z = x @ R.T if R is not None else x
        if s % 4 == 3:
            te_z.append(z), te_y.append(pos.astype(np.float64)), te_g.append(np.full(len(pos), (s // 4) % 16))
            for p in range(len(pos)):
                if (s // 4) * per + p < MAE_ROWS:
                    mae_rows.append((z[p], float(pos[p])))
        else:
            fit_z.append(z), fit_y.append(pos.astype(np.float64))
    Z, y = np.concatenate(fit_z), np.concatenate(fit_y)
    mz, my = Z.mean(axis=0), y.mean()
    Zc, yc = Z - mz, y - my
    G = Zc.T @ Zc
    lam = ridge * np.trace(G) / Z.shape[1]
    w = np.linalg.solve(G + lam * np.eye(G.shape[0]), Zc.T @ yc)
    b = my - w @ mz
    r2_fit = 1 - np.sum((y - Z @ w - b) ** 2) / np.sum(yc ** 2)
    Zt, yt = np.concatenate(te_z), np.concatenate(te_y)
    sst = np.sum((yt - yt.mean()) ** 2)
    r2 = 1 - np.sum((yt - Zt @ w - b) ** 2) / sst
    r2_chance = 1 - np.sum((yt - my) ** 2) / sst
    e = np.array([abs(yy - zz @ w - b) for zz, yy in mae_rows])
    ec = np.array([abs(yy - my) for _, yy in mae_rows])
    gt = np.concatenate(te_g)
    r2g = []
    for g in np.unique(gt):
        k = gt != g
        r2g.append(1 - np.sum((yt[k] - Zt[k] @ w - b) ** 2) / np.sum((yt[k] - yt[k].mean()) ** 2))
    r2g = np.array(r2g)
    r2_se = np.sqrt((len(r2g) - 1) / len(r2g) * np.sum((r2g - r2g.mean()) ** 2)) if len(r2g) >= 2 else np.nan
    return [r2, e.mean(), e.std(ddof=1) / np.sqrt(len(e)), r2_chance, ec.mean(), r2_fit, len(y), len(yt), len(e), lam,
            r2_se]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("tokens")
    ap.add_argument("out")
    ap.add_argument("--layers", default="")
    ap.add_argument("--dim", type=int, default=256)
    ap.add_argument("--stride", type=int, default=1)
    ap.add_argument("--ridge", type=float, default=1e-3)
    ap.add_argument("--bidirectional", action="store_true")
    ap.add_argument("--no-rope", action="store_true")
    ap.add_argument("--resid-stride", type=int, default=1)
    a = ap.parse_args()
    with open(os.path.join(a.model, "config.json")) as f:
        cfg = json.load(f)
    W = probe_ref.load_weights(a.model)
    ids = np.load(a.tokens).astype(np.int64)
    L = cfg["num_hidden_layers"]
    wanted = [int(t) for t in a.layers.split(",")] if a.layers else list(range(1, min(L, 4) + 1))
    resid = []
    with torch.no_grad():
        for s in range(ids.shape[0]):
            probe_ref.RESID = {}
            probe_ref.forward(cfg, W, torch.from_numpy(ids[s]), wanted, not a.bidirectional, not a.no_rope, False)
            resid.append(torch.stack([probe_ref.RESID[l] for l in wanted]))  # [L, S, C]
    resid = torch.stack(resid, dim=1).double().numpy()                     # [L, N, S, C]
    C = resid.shape[3]
    K = C if a.dim == 0 or a.dim >= C else a.dim
    out = np.array([probe_layer(resid[li], K, a.stride, a.ridge, a.resid_stride) for li in range(len(wanted))])
    np.save(os.path.join(a.out, "ref_pos_probe.npy"), out)
    print(f"pos_ref: {cfg['model_type']} N={ids.shape[0]} S={ids.shape[1]} layers={wanted} K={K} stride={a.stride} "
          f"causal={not a.bidirectional} rope={not a.no_rope} R2={out[:, 0].round(4).tolist()} torch {torch.__version__}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
