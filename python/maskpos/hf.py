"""hf.py — maskpos.hf.probe: the probe of `maskpos probe` on any HF transformers model, on its own
device (a GPU), in one call.

    import maskpos, transformers
    model = transformers.AutoModelForCausalLM.from_pretrained(path, dtype=torch.bfloat16).cuda()
    r = maskpos.hf.probe(model, ids, layers=[1, 2, 3, 4], batch_size=8)     # ids: [N, S]
    r.save("runs/llama")

How: transformers' attention modules call the function registered under the model's
config._attn_implementation with (module, query, key, value, attention_mask, scaling, dropout,
**kwargs), query [B, H, T, D] and key/value [B, KV, T, D] already projected, normed (q/k norms)
and rotated (RoPE). probe() registers its own such function (transformers' AttentionInterface),
switches the model to it for the call and back afterwards. The function computes eager attention
(scores = q·kᵀ·scaling, soft-capped by kwargs["softcap"] when the model passes one, the mask, a
float32 softmax, the values) and hands each selected layer's pre-softmax scores to a
maskpos.Accumulator (reduced on the GPU when the tensors live there). The mask is the model's
causal mask and sliding window, rebuilt from the layer (module.sliding_window or
kwargs["sliding_window"]); bidirectional=True drops the causal part (the window stays, both ways,
as maskpos' --bidirectional). The forward pass stops after the deepest selected layer.
Sequences must all have S tokens (no padding: a padded row of attention_mask is refused, the
maps are [S, S]); texts are tokenized and those shorter than seq dropped, as `maskpos corpus`.

Neither torch nor transformers is imported with maskpos: only when probe() runs. Without
transformers, registry= takes any mapping the model looks its attention function up in (the
tests use a tiny PyTorch model built that way). Docs: docs/python.md, "HF transformers".
Tests: python/tests_torch/test_hf.py (the hook on a tiny model here; real transformers models where
transformers is installed: python/tests_hf, scripts/device_check.sh).
"""
import sys
import time

import numpy as np

from ._accumulator import Accumulator

NAME = "maskpos_capture"


class _Stop(Exception):
    """Raised inside the forward pass once the deepest selected layer is captured."""


def _error(msg):
    from . import Error
    return Error(msg)


def _text_config(model):
    cfg = model.config
    get = getattr(cfg, "get_text_config", None)
    return get() if callable(get) else cfg


def attention_modules(model):
    """{layer_idx: module} of the model's attention modules (those with an int layer_idx and a
    projection or a scaling: HF's *Attention classes)."""
    out = {}
    for m in model.modules():
        li = getattr(m, "layer_idx", None)
        if isinstance(li, int) and (hasattr(m, "q_proj") or hasattr(m, "qkv_proj") or hasattr(m, "scaling")
                                    or hasattr(m, "query_key_value")):
            out.setdefault(li, m)
    return out


def layer_window(module, cfg, layer):
    """The sliding window of a layer (0: none): the module's own sliding_window, else the
    config's layer_types."""
    w = getattr(module, "sliding_window", None)
    if w:
        return int(w)
    types = getattr(cfg, "layer_types", None)
    if types and layer < len(types) and types[layer] == "sliding_attention":
        return int(getattr(cfg, "sliding_window", 0) or 0)
    return 0


def _mask(torch, T, causal, window, device):
    i = torch.arange(T, device=device).view(T, 1)
    j = torch.arange(T, device=device).view(1, T)
    m = (j <= i) if causal else torch.ones(T, T, dtype=torch.bool, device=device)
    if window and window < T:
        m = m & (i - j < window)
        if not causal:
            m = m & (j - i < window)
    return m


class Capture:
    """The attention function probe() installs: eager attention that feeds an Accumulator.
    slots: {model layer index (0-based): accumulator slot}; stop_after: the layer index after
    which the forward pass is stopped (None: run every layer)."""

    def __init__(self, acc, slots, causal, windows, stop_after=None):
        self.acc, self.slots, self.causal, self.windows = acc, slots, causal, windows
        self.stop_after = stop_after
        self.seconds = 0.0

    def __call__(self, module, query, key, value, attention_mask, scaling, dropout=0.0, **kwargs):
        import torch
        li = module.layer_idx
        B, H, T, D = query.shape
        rep = H // key.shape[1]
        if rep > 1:  # grouped-query attention: query head h reads key/value head h // rep
            key = key.repeat_interleave(rep, dim=1)
            value = value.repeat_interleave(rep, dim=1)
        scores = torch.matmul(query, key.transpose(2, 3)) * scaling
        cap = kwargs.get("softcap")
        if cap:  # gemma2: soft-capping before the mask, as its eager function does
            scores = torch.tanh(scores / cap) * cap
        window = self.windows.get(li) or kwargs.get("sliding_window") or 0
        obs = _mask(torch, T, self.causal, int(window), scores.device)
        probs = torch.softmax(scores.masked_fill(~obs, float("-inf")), dim=-1, dtype=torch.float32)
        if li in self.slots:
            t0 = time.perf_counter()
            self.acc.add(self.slots[li], scores, probs if self.acc.options["probs"] else None)
            self.seconds += time.perf_counter() - t0
        if self.stop_after is not None and li >= self.stop_after:
            raise _Stop()
        p = probs.to(query.dtype)
        if dropout and module.training:
            p = torch.nn.functional.dropout(p, p=dropout, training=True)
        out = torch.matmul(p, value).transpose(1, 2).contiguous()
        return out, p


def _set_impl(cfg, name):
    """config._attn_implementation = name (through the internal attribute where the public one is a
    checked property, as in recent transformers)."""
    if hasattr(cfg, "_attn_implementation_internal"):
        cfg._attn_implementation_internal = name
    else:
        cfg._attn_implementation = name


class _Installed:
    """Registers the capture under NAME (transformers' AttentionInterface, or the given registry)
    and switches the model's config to it; restores everything on exit."""

    def __init__(self, model, fn, registry):
        self.model, self.fn, self.registry = model, fn, registry
        self.configs = []

    def __enter__(self):
        if self.registry is not None:
            self.registry[NAME] = self.fn
        else:
            try:
                from transformers import AttentionInterface
            except ImportError:
                raise _error("maskpos.hf: transformers is not installed (pip install transformers), and no "
                             "registry= was given")
            AttentionInterface.register(NAME, self.fn)
            try:  # the mask functions are looked up by the same name in recent versions
                from transformers.masking_utils import AttentionMaskInterface, eager_mask
                AttentionMaskInterface.register(NAME, eager_mask)
            except ImportError:
                pass
        self.prev = None
        setter = getattr(self.model, "set_attn_implementation", None)
        if self.registry is None and callable(setter):  # transformers >= 4.5x checks the name there
            prev = _text_config(self.model)._attn_implementation
            try:
                setter(NAME)
            except (ValueError, TypeError, KeyError):
                pass
            if _text_config(self.model)._attn_implementation == NAME:  # (a model that cannot switch only warns)
                self.prev = prev
                return self
        seen = set()
        for m in self.model.modules():
            cfg = getattr(m, "config", None)
            if cfg is not None and id(cfg) not in seen and hasattr(cfg, "_attn_implementation"):
                seen.add(id(cfg))
                self.configs.append((cfg, cfg._attn_implementation))
                _set_impl(cfg, NAME)
        if not self.configs:
            raise _error("maskpos.hf: the model has no config._attn_implementation to switch (not a transformers model?)")
        return self

    def __exit__(self, *exc):
        if self.prev is not None:
            self.model.set_attn_implementation(self.prev)
        for cfg, prev in self.configs:
            _set_impl(cfg, prev)
        if self.registry is not None:
            self.registry.pop(NAME, None)


def _tokens(torch, input_ids_or_texts, tokenizer, seq, attention_mask):
    """[N, S] int64 tensor of token ids; texts tokenized (shorter than seq dropped)."""
    x = input_ids_or_texts
    if isinstance(x, str) or (isinstance(x, (list, tuple)) and x and isinstance(x[0], str)):
        if tokenizer is None:
            raise _error("maskpos.hf.probe: texts need tokenizer=")
        if not seq:
            raise _error("maskpos.hf.probe: texts need seq= (every sequence has seq tokens)")
        docs = [x] if isinstance(x, str) else list(x)
        rows = [r[:seq] for r in tokenizer(docs)["input_ids"] if len(r) >= seq]
        if not rows:
            raise _error("maskpos.hf.probe: none of the %d texts has %d tokens" % (len(docs), seq))
        return torch.tensor(rows, dtype=torch.long), len(docs) - len(rows)
    if _is_tensor(x):
        ids = x.detach().to("cpu", torch.long)
    else:
        ids = torch.as_tensor(np.asarray(x, dtype=np.int64))
    if ids.dim() == 1:
        ids = ids.unsqueeze(0)
    if ids.dim() != 2 or ids.shape[1] < 2:
        raise _error("maskpos.hf.probe: token ids must be [N, S] with S >= 2, not %s" % (list(ids.shape),))
    if seq:
        if ids.shape[1] < seq:
            raise _error("maskpos.hf.probe: sequences have %d tokens, fewer than seq=%d" % (ids.shape[1], seq))
        ids = ids[:, :seq]
    if attention_mask is not None:
        am = attention_mask.detach().cpu() if _is_tensor(attention_mask) else torch.as_tensor(np.asarray(attention_mask))
        am = am.reshape(ids.shape[0], -1)[:, :ids.shape[1]]
        bad = (am == 0).any(1).nonzero()
        if len(bad):
            raise _error("maskpos.hf.probe: sequence %d is padded (attention_mask 0); the maps need sequences of "
                         "the same length S: truncate them to the shortest or drop the short ones" % int(bad[0]))
    return ids, 0


def _is_tensor(x):
    return type(x).__module__.split(".")[0] == "torch"


def _progress(show, total):
    if not show:
        return None
    try:
        from tqdm import tqdm
        return tqdm(total=total, desc="maskpos.hf.probe", unit="seq")
    except ImportError:
        return "plain"


def probe(model, input_ids_or_texts, tokenizer=None, layers=None, batch_size=8, bidirectional=False, progress=True,
          seq=None, per_head=False, probs=False, recency=False, attention_mask=None, first=None, registry=None, stats=None,
          stop_early=True, accumulator=None, meta=None):
    """Mean pre-softmax attention-score maps of an HF model over token sequences → maskpos.Result
    (the same arrays, statistics and meta keys as maskpos.probe).

    input_ids_or_texts: ids [N, S] (tensor, array or lists), or a str / list of str with tokenizer
    and seq. layers: 1-based model layers (default 1-4, all when fewer). batch_size: sequences per
    forward pass. bidirectional: the counterfactual without the causal mask. per_head, probs,
    recency, stats: as maskpos.probe. first: the position the statistics start from (default: 1 when
    every sequence starts with the tokenizer's / config's BOS, as the probe decides, else 0).
    attention_mask: checked only (padding is refused). registry: the mapping the model looks its
    attention function up in, when it is not transformers'. accumulator: an Accumulator to add to
    (e.g. to continue a run; its options must fit), returned sums in .accumulator of the result.
    """
    import torch
    cfg = _text_config(model)
    ids, dropped = _tokens(torch, input_ids_or_texts, tokenizer, seq, attention_mask)
    N, S = ids.shape
    L_model = int(getattr(cfg, "num_hidden_layers"))
    H = int(getattr(cfg, "num_attention_heads"))
    if layers is None:
        layers = list(range(1, min(L_model, 4) + 1))
    elif isinstance(layers, int):
        layers = [layers]
    layers = sorted(set(int(l) for l in layers))
    for l in layers:
        if not 1 <= l <= L_model:
            raise _error("maskpos.hf.probe: layer %d does not exist (the model has %d)" % (l, L_model))
    mods = attention_modules(model)
    missing = [l for l in layers if l - 1 not in mods]
    if missing:
        raise _error("maskpos.hf.probe: no attention module with layer_idx %d found" % (missing[0] - 1))
    windows = {l - 1: layer_window(mods[l - 1], cfg, l - 1) for l in layers}
    if first is None:
        bos = getattr(tokenizer, "bos_token_id", None) if tokenizer is not None else None
        bos = getattr(cfg, "bos_token_id", None) if bos is None else bos
        first = 1 if isinstance(bos, int) and S >= 3 and bool((ids[:, 0] == bos).all()) else 0
    if accumulator is None:
        info = {"model": str(getattr(cfg, "_name_or_path", "") or type(model).__name__),
                "arch": str(getattr(cfg, "model_type", "")), "source": "maskpos.hf.probe: scores captured from "
                "transformers' attention interface (eager attention, the model's dtype)",
                "kv_heads": int(getattr(cfg, "num_key_value_heads", H) or H), "dropped_texts": dropped}
        info.update(meta or {})
        accumulator = Accumulator(len(layers), H, S, causal=not bidirectional, window=[windows[l - 1] for l in layers],
                                  per_head=per_head, probs=probs, recency=recency, stats=stats, first=first, layer_ids=layers,
                                  meta=info)
    cap = Capture(accumulator, {l - 1: k for k, l in enumerate(layers)}, not bidirectional, windows,
                  stop_after=max(layers) - 1 if stop_early else None)
    dev = next(model.parameters()).device
    bar = _progress(progress, N)
    t0 = time.perf_counter()
    was_training = model.training
    model.eval()
    try:
        with _Installed(model, cap, registry), torch.no_grad():
            for b0 in range(0, N, batch_size):
                x = ids[b0:b0 + batch_size].to(dev)
                try:
                    model(input_ids=x, attention_mask=torch.ones_like(x), use_cache=False)
                except _Stop:
                    pass
                if b0 == 0 and min(accumulator.counts) == 0:
                    raise _error("maskpos.hf.probe: the model never called maskpos' attention function for layer %d (its "
                                 "attention does not go through transformers' attention interface)"
                                 % layers[accumulator.counts.index(0)])
                done = min(N, b0 + batch_size)
                if bar == "plain":
                    sys.stderr.write("\rmaskpos.hf.probe: %d/%d" % (done, N))
                elif bar is not None:
                    bar.update(done - bar.n)
    finally:
        model.train(was_training)
        if bar == "plain":
            sys.stderr.write("\n")
        elif bar is not None:
            bar.close()
    r = accumulator.result()
    r.accumulator = accumulator
    r.timing = {"wall_s": time.perf_counter() - t0, "accumulator_s": cap.seconds}
    return r
