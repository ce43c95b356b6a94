#!/usr/bin/python3
"""train_torch.py — the PyTorch side of bench/train_vs_torch: the same model (tests/ref/train_ref.py's
Llama block, here in float32), the same initial weights (DIR/init) and batch (DIR/batch.npy);
1 warm-up + K timed steps of forward, backward, clip_grad_norm_ and AdamW; prints
"torch_step_ms <median> loss1 <loss of step 1>". usage: train_torch.py DIR K THREADS"""
import os
import statistics
import sys
import time

import numpy as np
import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "ref"))
import train_ref  # noqa: E402

d, K, threads = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
torch.set_num_threads(threads)
torch.set_default_dtype(torch.float32)
m = train_ref.Llama(f"{d}/init")
m.p = {k: torch.tensor(v.detach().numpy().astype(np.float32), requires_grad=True) for k, v in m.p.items()}
b = np.load(f"{d}/batch.npy")
ids, tgt = torch.tensor(b[0].astype(np.int64)), torch.tensor(b[1].astype(np.int64))
decay = [t for t in m.p.values() if t.dim() == 2]
other = [t for t in m.p.values() if t.dim() != 2]
opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": other, "weight_decay": 0.0}],
                        lr=3e-3, betas=(0.9, 0.95), eps=1e-8)
times, loss1 = [], None
for s in range(K + 1):
    t0 = time.perf_counter()
    opt.zero_grad()
    loss = m.loss(ids, tgt)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(list(m.p.values()), 1.0)
    opt.step()
    times.append(time.perf_counter() - t0)
    if s == 0:
        loss1 = loss.item()
print(f"torch_step_ms {1e3 * statistics.median(times[1:]):.2f} loss1 {loss1:.6f}")
