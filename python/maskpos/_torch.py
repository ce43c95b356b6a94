"""_torch.py — the parts of maskpos.Accumulator that need torch (imported only when a tensor is
given): the per-layer partial sums of a batch of scores reduced on the tensor's own device (a GPU)
in float64, and the torch.distributed reduction.

The sums are those the C accumulator keeps per sequence (model/probe.h, MpProbeAcc): Σ_b Σ_h s,
Σ_b (mean_h s)², Σ_b s and Σ_b s² per head, each sequence's diagonal-mean residue of the head-mean
map averaged over its 16×16 block grid (positions first..len-1; the library adds these block means
to its block sums, sign-flipped sums and counts), the squared norms of full-length sequences'
residues and centred maps (the corrected NRI), per-position counts of sequences shorter than S,
and with probs the probabilities' sums, the first-token mass and the row entropies (queries
1..len-1). Only these [S,S]-, [H,S,S]- and [B,16,16]-sized arrays cross to the host
(maskpos_acc_add_sums); the C library turns them into the result as for its own sums. The values equal the host path's up to the order
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


def _seq_residue(m, ob):
    """Each sequence's diagonal-mean residue over its observed entries: m [B,P,P] float64, ob [P,P]
    bool. Returns res [B,K] (the observed entries in row-major order), d [K] their diagonals."""
    P = m.shape[-1]
    dev = m.device
    i = torch.arange(P, device=dev).view(P, 1)
    j = torch.arange(P, device=dev).view(1, P)
    d = (i - j + P - 1).expand(P, P)[ob]                           # [K] diagonal of each observed entry
    vals = m[:, ob]                                                # [B, K]
    B = m.shape[0]
    dsum = torch.zeros(B, 2 * P - 1, dtype=torch.float64, device=dev).index_add_(1, d, vals)
    dcnt = torch.bincount(d, minlength=2 * P - 1).to(torch.float64)
    return vals - (dsum / dcnt.clamp(min=1))[:, d], vals


def _block_means(m, ob, nb):
    """Each sequence's block means of its residue on its own nb x nb grid: m [B,P,P] head means,
    ob [P,P] observed. Returns [B, nb, nb] (NaN for a block without an observed entry), and the
    per-sequence squared norms of the residue and of the centred map (the corrected NRI's sums)."""
    P = m.shape[-1]
    dev = m.device
    res, vals = _seq_residue(m, ob)
    blk = _blocks(P, nb, dev)
    bi = blk.view(P, 1).expand(P, P)[ob]
    bj = blk.view(1, P).expand(P, P)[ob]
    cell = bi * nb + bj
    B = m.shape[0]
    bs = torch.zeros(B, nb * nb, dtype=torch.float64, device=dev).index_add_(1, cell, res)
    bc = torch.bincount(cell, minlength=nb * nb).to(torch.float64)
    mean = torch.where(bc > 0, bs / bc.clamp(min=1), torch.full_like(bs, float("nan")))
    rsq = (res * res).sum(1)
    csq = ((vals - vals.mean(1, keepdim=True)) ** 2).sum(1)
    return mean.view(B, nb, nb), rsq, csq


def layer_sums(opts, layer, scores, probs=None, lengths=None, ragged=False, chunk_bytes=1 << 29):
    """The partial sums of one layer for scores [B,H,S,S] on any device: dict name -> float64
    tensor (on that device), and the count B. lengths: int [B] (None: every sequence S); ragged:
    the accumulator counts lengths (then "npos" is given). Each sequence's block means go as
    "block_means" [B, nb, nb]: the library adds them with its own block sums."""
    from . import Error
    H, S, first = opts["n_heads"], opts["seq"], opts["first"]
    if scores.dim() == 3:
        scores = scores.unsqueeze(0)
        probs = probs.unsqueeze(0) if probs is not None else None
    if scores.dim() != 4 or tuple(scores.shape[1:]) != (H, S, S):
        raise Error("accumulator: scores of shape %s; expected [B, %d, %d, %d] or [%d, %d, %d]" % (
            list(scores.shape), H, S, S, H, S, S))
    if probs is not None and tuple(probs.shape) != tuple(scores.shape):
        raise Error("accumulator: probs of shape %s do not match scores %s" % (list(probs.shape), list(scores.shape)))
    dev, f64 = scores.device, torch.float64
    B = scores.shape[0]
    lens = torch.full((B,), S, dtype=torch.long) if lengths is None else torch.as_tensor(np.asarray(lengths), dtype=torch.long)
    ragged = ragged or bool((lens < S).any())
    obs = observed(opts, layer, dev)
    nb = min(S - first, 16)
    out = {"sum": torch.zeros(S, S, dtype=f64, device=dev), "sumsq": torch.zeros(S, S, dtype=f64, device=dev),
           "rsq": torch.zeros(1, dtype=f64, device=dev), "csq": torch.zeros(1, dtype=f64, device=dev)}
    if ragged:
        out["npos"] = torch.zeros(S, dtype=f64, device=dev)
    if opts["per_head"]:
        out["sum_heads"] = torch.zeros(H, S, S, dtype=f64, device=dev)
        out["sumsq_heads"] = torch.zeros(H, S, S, dtype=f64, device=dev)
    if opts["probs"]:
        out["psum"] = torch.zeros(S, S, dtype=f64, device=dev)
        if opts["per_head"]:
            out["psum_heads"] = torch.zeros(H, S, S, dtype=f64, device=dev)
        out["sink"] = torch.zeros(H, dtype=f64, device=dev)
        out["entropy"] = torch.zeros(H, dtype=f64, device=dev)
    bmeans = torch.full((B, nb, nb), float("nan"), dtype=f64, device=dev)
    pos = torch.arange(S, device=dev)
    step = max(1, int(chunk_bytes // (H * S * S * 8)))
    for b0 in range(0, B, step):
        x = scores[b0:b0 + step].detach()
        ln = lens[b0:b0 + step].to(dev)
        inside = pos.view(1, S) < ln.view(-1, 1)                     # [b, S] positions within each sequence
        M = obs.view(1, S, S) & inside.view(-1, S, 1) & inside.view(-1, 1, S)  # [b, S, S] observed
        hs = x.sum(1, dtype=f64)                                     # [b, S, S] Σ_h, in float64
        # an observed score not finite, or of a mask value's magnitude (api_acc_check.h: 1e4)
        if bool((M.unsqueeze(1) & ~(torch.isfinite(x) & (x.abs() < 1e4))).any()):
            return None, b0                                          # the caller names the entry (the library's check)
        zero = torch.zeros((), dtype=f64, device=dev)
        hs = torch.where(M, hs, zero)
        out["sum"] += hs.sum(0)
        m = hs / H
        out["sumsq"] += (m * m).sum(0)
        if ragged:
            out["npos"] += inside.to(f64).sum(0)
        if opts["per_head"]:
            xd = torch.where(M.unsqueeze(1), x.to(f64), zero)
            out["sum_heads"] += xd.sum(0)
            out["sumsq_heads"] += (xd * xd).sum(0)
            del xd
        for L_ in torch.unique(ln).tolist():                         # each length: its own block grid
            P = int(L_) - first
            sel = (ln == L_).nonzero().view(-1)
            sub = m[sel][:, first:int(L_), first:int(L_)]
            ob = obs[first:int(L_), first:int(L_)]
            if P >= nb:
                bm, rs, cs = _block_means(sub, ob, nb)
                bmeans[b0 + sel] = bm
                if int(L_) == S:
                    out["rsq"] += rs.sum()
                    out["csq"] += cs.sum()
        if opts["probs"]:
            if probs is None:
                p = torch.softmax(x.float().masked_fill(~M.unsqueeze(1), float("-inf")), dim=-1)
                p = torch.nan_to_num(p, nan=0.0)                     # rows past a sequence's length
            else:
                p = probs[b0:b0 + step].detach().float()
                if bool((~torch.isfinite(p) & M.unsqueeze(1)).any()):
                    raise Error("accumulator: layer %d: probs not finite in an observed entry; nothing was added" % layer)
            pd = torch.where(M.unsqueeze(1), p.to(f64), zero)
            out["psum"] += pd.sum((0, 1))
            if opts["per_head"]:
                out["psum_heads"] += pd.sum(0)
            q = (inside & (pos.view(1, S) >= 1)).to(f64).unsqueeze(1)  # [b, 1, S] query rows 1..len-1
            out["sink"] += (pd[:, :, :, 0] * q).sum((0, 2))
            ent = -(pd * torch.log(torch.where(pd > 0, pd, torch.ones_like(pd)))).sum(-1)  # [b, H, S]
            out["entropy"] += (ent * q).sum((0, 2))
    out["block_means"] = bmeans
    return out, B


def add_on_device(acc, layer, scores, probs, lengths=None):
    """Accumulator.add for a tensor on a GPU: reduce there, hand the sums to the library. A bad
    batch goes to the host for the library's own check and message (nothing added)."""
    ragged = "npos" in acc._arrays(copy=False)
    sums, count = layer_sums(acc.options, layer, scores, probs, lengths, ragged)
    if sums is None:
        s = scores if scores.dim() == 4 else scores.unsqueeze(0)
        acc.check(layer, s.detach().cpu(), None, lengths)
        from . import Error
        raise Error("accumulator: layer %d: a bad score in an observed entry; nothing was added" % layer)
    acc.add_sums(layer, count, {k: v.cpu().numpy() for k, v in sums.items()})


def reduce_distributed(acc, dst=0, group=None):
    """See Accumulator.reduce_distributed. The parts are rebuilt through acc's own class (its
    from_state), so this module imports nothing of _accumulator.py, which imports it."""
    import torch.distributed as dist
    cls = type(acc)
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
    merged = cls.from_state(state) if dst == 0 else None
    for r in range(world):
        if r == dst and merged is not None:
            continue
        st = {"options": state["options"], "meta": state["meta"],
              "counts": gathered[-1][r].cpu().tolist(),
              "arrays": {k: gathered[i][r].cpu().numpy() for i, k in enumerate(names)}}
        other = cls.from_state(st)
        if merged is None:
            merged = other
        else:
            merged.merge(other)
            other.close()
    return merged
