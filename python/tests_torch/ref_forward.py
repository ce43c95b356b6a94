"""ref_forward.py — the project's float64 torch reference forward (tests/ref/probe_ref.py) run over
token ids with one of its functions swapped for a capturing one, for the Accumulator tests that
feed it activations (test_accumulator_var.py: var_ref's attend; test_accumulator_freqpos.py:
freq_ref's rope).
"""
import json
import os
import sys

import numpy as np

from conftest import ROOT

sys.path.insert(0, os.path.join(ROOT, "tests", "ref"))


def run(model, t, L, name, capturing, reset, take, use_rope=True):
    """cfg, weights and per sequence of t [N, S]: (scores [L][H, S, S] as numpy, take(), the
    residual stream [L][S, C]) of probe_ref's forward with layers 1..L wanted and its function
    `name` replaced by capturing; reset() runs before each sequence."""
    import probe_ref
    import torch
    cfg = json.load(open(os.path.join(model, "config.json")))
    W = probe_ref.load_weights(model)
    kept = getattr(probe_ref, name)
    setattr(probe_ref, name, capturing)
    out = []
    try:
        with torch.no_grad():
            for s in t:
                reset()
                probe_ref.RESID = {}
                sc, _, _ = probe_ref.forward(cfg, W, torch.from_numpy(s.astype(np.int64)), list(range(1, L + 1)), True,
                                             use_rope, False)
                out.append(([sc[l].numpy() for l in range(1, L + 1)], take(), [probe_ref.RESID[l] for l in range(1, L + 1)]))
    finally:
        setattr(probe_ref, name, kept)
        probe_ref.RESID = None
    return cfg, W, out
