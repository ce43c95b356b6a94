"""_torch.py — the parts of maskpos.Accumulator that need torch (imported only when a tensor is
given): the per-layer partial sums of a batch of scores reduced on the tensor's own device (a GPU)
in float64, and the torch.distributed reduction.

The sums are those the C accumulator keeps per sequence (model/probe.h, MpProbeAcc): Σ_b Σ_h s,
Σ_b (mean_h s)², Σ_b s and Σ_b s² per head, the per-sequence diagonal-mean residue of the head-mean map
averaged over the 16×16 block grid (positions first..S-1) and its square, and with probs the
probabilities' sums, the first-token mass and the row entropies (queries 1..S-1). Only these
[S,S]-, [H,S,S]- and [16,16]-sized arrays cross to the host (maskpos_acc_add_sums); the C library
turns them into the result as for its own sums. The values equal the host path's up to the order
of float64 additions (and, for probabilities computed here, torch's float32 softmax instead of the
probe's): python/tests_torch/test_accumulator.py states the measured bound.
"""
import numpy as np
import torch


def observed(opts, layer, device):
    """[S, S] bool: the entries the probe observes in this layer (causal mask and window)."""
    S = opts["seq"]
    i = torch.arange(S, device=device).view(S, 1)
    j = torch.arange(S, device=device).view(1, S)
    obs = (j <= i) if opts["causal"] else torch.ones(S, S, dtype=torch.bool, device=device)
    W = opts["window"][layer]
    if 0 < W < S:
        obs = obs & (i - j < W)
        if not opts["causal"]:
            obs = obs & (j - i < W)
    return obs


def _blocks(P, nb, device):
    """[P] block index of each position: block b holds [ceil(bP/nb), ceil((b+1)P/nb))."""
    starts = torch.tensor([(b * P + nb - 1) // nb for b in range(nb + 1)], device=device)
    p = torch.arange(P, device=device)
    return torch.searchsorted(starts, p, right=True) - 1


def _block_sums(m, obs, opts):
    """Σ over sequences of the block means of each sequence's diagonal-normalised residue, and of
    their squares: m [B,S,S] head means (float64), obs [S,S]. Returns bsum, bsumsq [nb, nb]."""
    first, S = opts["first"], opts["seq"]
    P = S - first
    nb = min(P, 16)
    dev = m.device
    sub = m[:, first:, first:]
    ob = obs[first:, first:]
    i = torch.arange(P, device=dev).view(P, 1)
    j = torch.arange(P, device=dev).view(1, P)
    d = (i - j + P - 1).expand(P, P)[ob]                           # [K] diagonal of each observed entry
    vals = sub[:, ob]                                                # [B, K]
    B = m.shape[0]
    dsum = torch.zeros(B, 2 * P - 1, dtype=torch.float64, device=dev).index_add_(1, d, vals)
    dcnt = torch.bincount(d, minlength=2 * P - 1).to(torch.float64)
    res = vals - (dsum / dcnt.clamp(min=1))[:, d]                  # [B, K] residue
    blk = _blocks(P, nb, dev)
    bi = blk.view(P, 1).expand(P, P)[ob]
    bj = blk.view(1, P).expand(P, P)[ob]
    cell = bi * nb + bj
    bs = torch.zeros(B, nb * nb, dtype=torch.float64, device=dev).index_add_(1, cell, res)
    bc = torch.bincount(cell, minlength=nb * nb).to(torch.float64)
    mean = torch.where(bc > 0, bs / bc.clamp(min=1), torch.zeros_like(bs))
    return mean.sum(0).view(nb, nb), (mean * mean).sum(0).view(nb, nb)


def layer_sums(opts, layer, scores, probs=None, chunk_bytes=1 << 29):
    """The partial sums of one layer for scores [B,H,S,S] on any device: dict name -> float64
    tensor (on that device), and the count B."""
    from . import Error
    H, S = opts["n_heads"], opts["seq"]
    if scores.dim() == 3:
        scores = scores.unsqueeze(0)
        probs = probs.unsqueeze(0) if probs is not None else None
    if scores.dim() != 4 or tuple(scores.shape[1:]) != (H, S, S):
        raise Error("accumulator: scores of shape %s; expected [B, %d, %d, %d] or [%d, %d, %d]" % (
            list(scores.shape), H, S, S, H, S, S))
    if probs is not None and tuple(probs.shape) != tuple(scores.shape):
        raise Error("accumulator: probs of shape %s do not match scores %s" % (list(probs.shape), list(scores.shape)))
    dev, f64 = scores.device, torch.float64
    obs = observed(opts, layer, dev)
    out = {"sum": torch.zeros(S, S, dtype=f64, device=dev), "sumsq": torch.zeros(S, S, dtype=f64, device=dev)}
    nb = min(S - opts["first"], 16)
    out["bsum"] = torch.zeros(nb, nb, dtype=f64, device=dev)
    out["bsumsq"] = torch.zeros(nb, nb, dtype=f64, device=dev)
    if opts["per_head"]:
        out["sum_heads"] = torch.zeros(H, S, S, dtype=f64, device=dev)
        out["sumsq_heads"] = torch.zeros(H, S, S, dtype=f64, device=dev)
    if opts["probs"]:
        out["psum"] = torch.zeros(S, S, dtype=f64, device=dev)
        if opts["per_head"]:
            out["psum_heads"] = torch.zeros(H, S, S, dtype=f64, device=dev)
        out["sink"] = torch.zeros(H, dtype=f64, device=dev)
        out["entropy"] = torch.zeros(H, dtype=f64, device=dev)
    B = scores.shape[0]
    step = max(1, int(chunk_bytes // (H * S * S * 8)))
    for b0 in range(0, B, step):
        x = scores[b0:b0 + step].detach()
        hs = x.sum(1, dtype=f64)                                     # [b, S, S] Σ_h, in float64
        # a non-finite observed score makes its head sum non-finite: check [b, S, S], not [b, H, S, S]
        if not bool((torch.isfinite(hs) | ~obs).all()):
            k = (~torch.isfinite(x) & obs).nonzero()[0].tolist()
            raise Error("accumulator: layer %d: scores[%d, %d, %d, %d] is not finite in an observed entry; nothing "
                        "was added" % (layer, b0 + k[0], k[1], k[2], k[3]))
        zero = torch.zeros((), dtype=f64, device=dev)
        hs = torch.where(obs, hs, zero)
        out["sum"] += hs.sum(0)
        m = hs / H
        out["sumsq"] += (m * m).sum(0)
        if opts["per_head"]:
            xd = torch.where(obs, x.to(f64), zero)
            out["sum_heads"] += xd.sum(0)
            out["sumsq_heads"] += (xd * xd).sum(0)
            del xd
        bs, bq = _block_sums(torch.where(obs, m, torch.full_like(m, float("nan"))), obs, opts)
        out["bsum"] += bs
        out["bsumsq"] += bq
        if opts["probs"]:
            if probs is None:
                p = torch.softmax(x.float().masked_fill(~obs, float("-inf")), dim=-1)
            else:
                p = probs[b0:b0 + step].detach().float()
                if bool((~torch.isfinite(p) & obs).any()):
                    raise Error("accumulator: layer %d: probs not finite in an observed entry; nothing was added" % layer)
            pd = torch.where(obs, p.to(f64), zero)
            out["psum"] += pd.sum((0, 1))
            if opts["per_head"]:
                out["psum_heads"] += pd.sum(0)
            out["sink"] += pd[:, :, 1:, 0].sum((0, 2))
            ent = -(pd * torch.log(torch.where(pd > 0, pd, torch.ones_like(pd)))).sum(-1)  # [b, H, S]
            out["entropy"] += ent[:, :, 1:].sum((0, 2))
    return out, B


def add_on_device(acc, layer, scores, probs):
    """Accumulator.add for a tensor on a GPU: reduce there, hand the sums to the library."""
    sums, count = layer_sums(acc.options, layer, scores, probs)
    acc.add_sums(layer, count, {k: v.cpu().numpy() for k, v in sums.items()})


def reduce_distributed(acc, dst=0, group=None):
    """See Accumulator.reduce_distributed."""
    import torch.distributed as dist
    from ._accumulator import Accumulator
    world = dist.get_world_size(group)
    rank = dist.get_rank(group)
    dev = torch.device("cuda", torch.cuda.current_device()) if dist.get_backend(group) == "nccl" else torch.device("cpu")
    state = acc.state_dict()
    names = sorted(state["arrays"])
    counts = torch.tensor(state["counts"], dtype=torch.int64, device=dev)
    parts = [torch.from_numpy(state["arrays"][k]).to(dev) for k in names] + [counts]
    gathered = [[torch.empty_like(t) for _ in range(world)] if rank == dst else None for t in parts]
    for t, g in zip(parts, gathered):
        dist.gather(t, gather_list=g, dst=dst, group=group)
    if rank != dst:
        return None
    merged = Accumulator.from_state(state) if dst == 0 else None
    for r in range(world):
        if r == dst and merged is not None:
            continue
        st = {"options": state["options"], "meta": state["meta"],
              "counts": gathered[-1][r].cpu().tolist(),
              "arrays": {k: gathered[i][r].cpu().numpy() for i, k in enumerate(names)}}
        other = Accumulator.from_state(st)
        if merged is None:
            merged = other
        else:
            merged.merge(other)
            other.close()
    return merged
