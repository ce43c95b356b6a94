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
causal mask and sliding window (one window per layer, decided before the run from the module or
config and checked against what the model passes: the mask and the statistics always use the same
one), and each sequence's length; bidirectional=True drops the causal part (the window stays, both
ways, as maskpos' --bidirectional). The forward pass stops after the deepest selected layer.
The statistics that read activations get them here too: freq the queries and keys this function
receives (the geometry from the model: rope_geometry), variance the attention output it computes,
variance and position the residual stream from forward hooks on the decoder layers (the forward
then runs through the deepest layer's MLP, except in a batch resid_stride reads no sequence of).
Padded batches (right padding: attention_mask [N, S] of ones then zeros) are probed with each
sequence's length (Accumulator lengths=); texts are tokenized, each a sequence of up to seq tokens,
or packed (pack=True: concatenated and cut into rows of seq, BOS first when the tokenizer adds one,
as `maskpos corpus --pack`).
Attention keyword arguments are checked against the ones this capture implements or knows to
leave the computation unchanged (ATTENTION_KWARGS); any other (attention sinks' s_aux, ...) is
refused rather than dropped, since dropping it would change the forward pass.
transformers >= TRANSFORMERS_MIN is needed (AttentionInterface in its top level); an older one is
named in the error.

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

# The transformers versions this module is written for: AttentionInterface in the top-level
# namespace (4.51) and the attention call (module, query, key, value, attention_mask, scaling,
# dropout, **kwargs) of 4.51 .. 4.57. python/tests_hf checks real models where transformers is
# installed (the GPU machine: scripts/gpu_check.sh prints the version it ran).
TRANSFORMERS_MIN = (4, 51)
TRANSFORMERS_TESTED = "4.51 - 4.57 and 5.17"

# Attention keyword arguments: those the capture implements (softcap, sliding_window) and those
# that leave eager attention's result unchanged (positions, caches, flash-attention's packing
# metadata, flags), by name. Any other with a value is refused: dropping it would change the
# forward pass (e.g. s_aux, GPT-OSS's attention sinks).
ATTENTION_KWARGS = frozenset([
    "softcap", "sliding_window",                                     # implemented
    "position_ids", "cache_position", "output_attentions", "use_cache", "past_key_value", "past_key_values",
    "cu_seq_lens_q", "cu_seq_lens_k", "max_length_q", "max_length_k", "cu_seqlens_q", "cu_seqlens_k", "max_seqlen_q",
    "max_seqlen_k", "target_dtype", "is_causal", "query_length", "layer_idx", "position_embeddings", "kwargs",
    # transformers 5's TransformersKwargs, passed down to every attention call: flags of what the
    # model returns, never of how attention is computed
    "output_hidden_states", "output_router_logits", "num_items_in_batch", "return_dict",
])


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


def decoder_layers(model, mods):
    """{layer_idx: module} of the modules that hold each attention module of mods as a direct child
    (HF's *DecoderLayer: self_attn), containers (ModuleList, ModuleDict, Sequential) aside."""
    import torch
    want = {id(m): li for li, m in mods.items()}
    out = {}
    for m in model.modules():
        if isinstance(m, (torch.nn.ModuleList, torch.nn.ModuleDict, torch.nn.Sequential)):
            continue
        for c in m.children():
            if id(c) in want:
                out.setdefault(want[id(c)], m)
    return out


def transformers_version():
    """transformers' version as (major, minor, text); ImportError when it is not installed."""
    import transformers
    text = getattr(transformers, "__version__", "0.0")
    parts = []
    for x in text.split(".")[:2]:
        digits = "".join(c for c in x if c.isdigit())
        parts.append(int(digits) if digits else 0)
    while len(parts) < 2:
        parts.append(0)
    return parts[0], parts[1], text


def check_transformers():
    """Raises maskpos.Error naming the version found when transformers is missing or older than
    TRANSFORMERS_MIN, or lacks AttentionInterface."""
    try:
        major, minor, text = transformers_version()
    except ImportError:
        raise _error("maskpos.hf: transformers is not installed (needs >= %d.%d; tested %s), and no registry= was "
                     "given" % (TRANSFORMERS_MIN + (TRANSFORMERS_TESTED,)))
    if (major, minor) < TRANSFORMERS_MIN:
        raise _error("maskpos.hf: found transformers %s, needs >= %d.%d (AttentionInterface; tested %s)" % (
            (text,) + TRANSFORMERS_MIN + (TRANSFORMERS_TESTED,)))
    try:
        from transformers import AttentionInterface  # noqa: F401
    except ImportError:
        raise _error("maskpos.hf: found transformers %s without AttentionInterface, needs >= %d.%d (tested %s)" % (
            (text,) + TRANSFORMERS_MIN + (TRANSFORMERS_TESTED,)))


def layer_window(module, cfg, layer):
    """The sliding window of a layer (0: none): the module's own sliding_window, else the
    config's layer_types, else (a module without the attribute in a config without layer_types:
    mistral and mixtral, whose attention passes config.sliding_window to every layer) the
    config's sliding_window."""
    w = getattr(module, "sliding_window", None)
    if w:
        return int(w)
    types = getattr(cfg, "layer_types", None)
    if types:
        if layer < len(types) and types[layer] == "sliding_attention":
            return int(getattr(cfg, "sliding_window", 0) or 0)
        return 0
    if hasattr(module, "sliding_window"):
        return 0
    return int(getattr(cfg, "sliding_window", 0) or 0)


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
    slots: {model layer index (0-based): accumulator slot}; windows: {layer index: W (0 none)},
    the one window of each layer, shared by the mask and the accumulator; stop_after: the layer
    index after which the forward pass is stopped (None: run every layer); lengths: the current
    batch's sequence lengths (None: all T)."""

    def __init__(self, acc, slots, causal, windows, stop_after=None):
        self.acc, self.slots, self.causal, self.windows = acc, slots, causal, windows
        self.stop_after = stop_after
        self.variance = "variance" in acc.options["stats"]
        self.freq = "freq" in acc.options["stats"]
        self.stop_layer = None  # with variance or position: the deepest probed decoder layer's hook stops the forward
        self.resid_rows = 1     # the batch's sequences whose residual stream is read (resid_stride; 0: none)
        self.seconds = 0.0
        self.lengths = None

    def _check_kwargs(self, li, kwargs):
        for k, v in kwargs.items():
            if k not in ATTENTION_KWARGS and v is not None:
                raise _error("maskpos.hf: layer %d's attention was called with %s=%s, which maskpos' capture does not "
                             "implement (it implements softcap and sliding_window; %s): dropping it would change the "
                             "forward pass, so the model is not probed" % (
                                 li + 1, k, type(v).__name__, "a model with attention sinks or another variant needs "
                                 "its own eager function"))
        if kwargs.get("is_causal") is False and self.causal:
            raise _error("maskpos.hf: layer %d's attention is not causal (is_causal=False); probe it with "
                         "bidirectional=True" % (li + 1))
        w = kwargs.get("sliding_window")
        mine = self.windows.get(li, 0)
        if w and int(w) != mine and not (mine == 0 and int(w) >= 1 << 30):
            raise _error("maskpos.hf: layer %d's attention passes sliding_window=%d, but the accumulator counts %s: the "
                         "mask and the statistics would use different windows" % (
                             li + 1, int(w), "window %d" % mine if mine else "no window"))

    def __call__(self, module, query, key, value, attention_mask, scaling, dropout=0.0, **kwargs):
        import torch
        li = module.layer_idx
        self._check_kwargs(li, kwargs)
        B, H, T, D = query.shape
        if li in self.slots and self.freq:  # the queries and keys after RoPE, before GQA's repeat
            t0 = time.perf_counter()
            self.acc.add_captures(self.slots[li], query=query, key=key)
            self.seconds += time.perf_counter() - t0
        rep = H // key.shape[1]
        if rep > 1:  # grouped-query attention: query head h reads key/value head h // rep
            key = key.repeat_interleave(rep, dim=1)
            value = value.repeat_interleave(rep, dim=1)
        scores = torch.matmul(query, key.transpose(2, 3)) * scaling
        cap = kwargs.get("softcap")
        if cap:  # gemma2: soft-capping before the mask, as its eager function does
            scores = torch.tanh(scores / cap) * cap
        obs = _mask(torch, T, self.causal, int(self.windows.get(li, 0)), scores.device)
        obs = obs.view(1, 1, T, T)
        if self.lengths is not None:  # each sequence's keys stop at its length (padding never attended)
            ln = self.lengths.to(scores.device).view(B, 1, 1, 1)
            obs = obs & (torch.arange(T, device=scores.device).view(1, 1, 1, T) < ln)
        probs = torch.softmax(scores.masked_fill(~obs, float("-inf")), dim=-1, dtype=torch.float32)
        probs = torch.nan_to_num(probs, nan=0.0)  # a padded query row with no key left
        if li in self.slots:
            t0 = time.perf_counter()
            self.acc.add(self.slots[li], scores, probs if self.acc.options["probs"] else None,
                         lengths=None if self.lengths is None else self.lengths.cpu().numpy())
            self.seconds += time.perf_counter() - t0
        if self.stop_after is not None and li >= self.stop_after:
            raise _Stop()
        p = probs.to(query.dtype)
        if dropout and module.training:
            p = torch.nn.functional.dropout(p, p=dropout, training=True)
        out = torch.matmul(p, value).transpose(1, 2).contiguous()
        if li in self.slots and self.variance:  # [B, T, H, D]: the attention output before o_proj
            t0 = time.perf_counter()
            self.acc.add_captures(self.slots[li], attn_out=out)
            self.seconds += time.perf_counter() - t0
        if self.stop_layer is not None and li >= self.stop_layer and not self.resid_rows:
            # no sequence of this batch has its residual stream read (resid_stride): the deepest
            # layer's o_proj and MLP are not run, its hook's count advanced without a copy
            self.acc.add_captures(self.slots[li], hidden=np.broadcast_to(np.float32(0), (B, T, self.acc.options["hidden_size"]
                                                                                        or 1)))
            raise _Stop()
        return out, p

    def layer_hook(self, li):
        """A forward hook on decoder layer li: its output (the residual stream after the layer) to
        the accumulator; the forward stops after the deepest probed layer (stop_layer)."""
        def hook(module, inputs, output):
            h = output[0] if isinstance(output, (tuple, list)) else output
            t0 = time.perf_counter()
            self.acc.add_captures(self.slots[li], hidden=h)
            self.seconds += time.perf_counter() - t0
            if self.stop_layer is not None and li >= self.stop_layer:
                raise _Stop()
        return hook


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
            check_transformers()
            from transformers import AttentionInterface
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


def _bos_added(tokenizer):
    """The BOS id when the tokenizer puts one in front of a text, else None."""
    bos = getattr(tokenizer, "bos_token_id", None)
    if not isinstance(bos, int):
        return None
    try:
        first = tokenizer("a")["input_ids"]
    except Exception:  # noqa: BLE001 (a tokenizer that cannot encode a letter adds nothing we can see)
        return None
    return bos if first and first[0] == bos else None


def _texts(torch, docs, tokenizer, seq, pack):
    """Texts as ids [N, seq] and lengths [N] (None when every row is whole), and how many texts
    were dropped: each text its first seq tokens (shorter ones padded, at least 3 tokens), or
    packed: the texts' tokens (without special tokens) concatenated and cut into rows of seq, BOS
    first when the tokenizer adds one (as `maskpos corpus --pack`)."""
    if pack:
        bos = _bos_added(tokenizer)
        stream = []
        for r in tokenizer(docs, add_special_tokens=False)["input_ids"]:
            stream.extend(r)
        per = seq - (bos is not None)
        n = len(stream) // per
        if n < 1:
            raise _error("maskpos.hf.probe: the %d texts give %d tokens, fewer than one row of seq=%d" % (
                len(docs), len(stream), seq))
        rows = [([bos] if bos is not None else []) + stream[k * per:(k + 1) * per] for k in range(n)]
        return torch.tensor(rows, dtype=torch.long), None, 0
    enc = [r[:seq] for r in tokenizer(docs)["input_ids"]]
    keep = [r for r in enc if len(r) >= 3]
    if not keep:
        raise _error("maskpos.hf.probe: none of the %d texts has 3 tokens" % len(docs))
    pad = getattr(tokenizer, "pad_token_id", None)
    pad = pad if isinstance(pad, int) else 0
    ids = torch.tensor([r + [pad] * (seq - len(r)) for r in keep], dtype=torch.long)
    lens = torch.tensor([len(r) for r in keep], dtype=torch.long)
    return ids, (None if bool((lens == seq).all()) else lens), len(docs) - len(keep)


def _tokens(torch, input_ids_or_texts, tokenizer, seq, attention_mask, pack=False):
    """[N, S] int64 tensor of token ids, [N] lengths (None: all S) and the texts dropped: texts
    tokenized (or packed); a right-padded batch's lengths from attention_mask."""
    x = input_ids_or_texts
    if isinstance(x, str) or (isinstance(x, (list, tuple)) and x and isinstance(x[0], str)):
        if tokenizer is None:
            raise _error("maskpos.hf.probe: texts need tokenizer=")
        if not seq:
            raise _error("maskpos.hf.probe: texts need seq= (the tokens per sequence)")
        return _texts(torch, [x] if isinstance(x, str) else list(x), tokenizer, int(seq), pack)
    if pack:
        raise _error("maskpos.hf.probe: pack=True packs texts; give texts and tokenizer=")
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
    lens = None
    if attention_mask is not None:
        am = attention_mask.detach().cpu() if _is_tensor(attention_mask) else torch.as_tensor(np.asarray(attention_mask))
        am = (am.reshape(ids.shape[0], -1)[:, :ids.shape[1]] != 0).to(torch.long)
        lens = am.sum(1)
        T = ids.shape[1]
        right = (am == (torch.arange(T).view(1, T) < lens.view(-1, 1)).to(torch.long)).all(1)
        if not bool(right.all()):
            k = int((~right).nonzero()[0])
            raise _error("maskpos.hf.probe: sequence %d is not right-padded (attention_mask has a 0 before a 1): the maps "
                         "need sequences that start at position 0; pad on the right (tokenizer.padding_side = 'right')" % k)
        short = (lens < 3).nonzero()
        if len(short):
            raise _error("maskpos.hf.probe: sequence %d has %d tokens (attention_mask): at least 3 are needed" % (
                int(short[0]), int(lens[short[0]])))
        if bool((lens == T).all()):
            lens = None
    return ids, lens, 0


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


def rope_interleaved(module):
    """True when the model's modeling code rotates the dims (2p, 2p + 1) of a head (its rotate_half
    or GPT-J's rotate_every_two takes x[..., ::2]), False for HF's half-split rotate_half (dims p and
    p + R/2), read from the source of the module that defines the attention class; False when
    neither function is found there."""
    import inspect
    mod = sys.modules.get(type(module).__module__)
    for name in ("rotate_every_two", "rotate_half"):
        fn = getattr(mod, name, None)
        if not callable(fn):
            continue
        try:
            src = inspect.getsource(fn)
        except (OSError, TypeError):
            continue
        if "::2" in src:
            return True
        if name == "rotate_half":
            return False
    return False


def _rope_base(cfg, local):
    """The config's RoPE base (gemma3's local one for a sliding layer), None when it names none."""
    rp = getattr(cfg, "rope_parameters", None)
    if isinstance(rp, dict) and isinstance(rp.get("sliding_attention" if local else "full_attention"), dict):
        rp = rp["sliding_attention" if local else "full_attention"]  # transformers 5: per layer type
    if local and getattr(cfg, "rope_local_base_freq", None):
        return float(cfg.rope_local_base_freq)
    v = rp.get("rope_theta") if isinstance(rp, dict) else None
    v = getattr(cfg, "rope_theta", None) if v is None else v
    return float(v) if isinstance(v, (int, float)) else None


def rope_geometry(model, cfg, mods, layers, windows):
    """The freq statistic's geometry of an HF model: head_dim, n_kv_heads, scale (the attention
    module's scaling), rot_dim, inv_freq per probed layer (the rotary embedding modules' inv_freq
    buffers: a module whose name says "local", or a buffer named sliding_attention_inv_freq, for
    sliding-window layers; zeros for the layers config.no_rope_layers leaves without RoPE), rope_base
    per layer (None when the config names none) and rope_interleaved (rope_interleaved())."""
    import torch
    m0 = mods[layers[0] - 1]
    H = int(getattr(cfg, "num_attention_heads"))
    hd = getattr(m0, "head_dim", None) or getattr(cfg, "head_dim", None) or int(cfg.hidden_size) // H
    tables = {}
    for name, m in model.named_modules():
        for key in ("inv_freq", "full_attention_inv_freq", "sliding_attention_inv_freq"):
            t = getattr(m, key, None)
            if isinstance(t, torch.Tensor) and t.dim() == 1:
                local = "local" in name.lower() or key.startswith("sliding")
                tables.setdefault(local, t.detach().double().cpu())
    if not tables:
        raise _error("maskpos.hf.probe: stats=\"freq\" reads RoPE's frequency pairs, and the model has no rotary "
                     "embedding module with an inv_freq buffer (a model without RoPE has no pairs)")
    nope = getattr(cfg, "no_rope_layers", None)
    inv, base = [], []
    for l in layers:
        local = bool(windows.get(l - 1)) and True in tables
        t = tables.get(local, tables.get(False, tables.get(True)))
        on = not (isinstance(nope, (list, tuple)) and l - 1 < len(nope) and not nope[l - 1])
        inv.append((t if on else torch.zeros_like(t)).tolist())
        base.append((_rope_base(cfg, local) or float("nan")) if on else 0.0)
    P = len(inv[0])
    if any(len(x) != P for x in inv):
        raise _error("maskpos.hf.probe: the probed layers' RoPE tables have different numbers of pairs")
    return dict(head_dim=int(hd), n_kv_heads=int(getattr(cfg, "num_key_value_heads", H) or H),
                scale=float(getattr(m0, "scaling", 0.0) or 0.0), rot_dim=2 * P, inv_freq=inv,
                rope_base=None if any(b != b for b in base) else base, rope_interleaved=rope_interleaved(m0))


def probe(model, input_ids_or_texts, tokenizer=None, layers=None, batch_size=8, bidirectional=False, progress=True,
          seq=None, per_head=False, probs=False, recency=False, attention_mask=None, first=None, registry=None, stats=None,
          stop_early=True, accumulator=None, meta=None, pack=False, resid_stride=None, pos_dim=None, pos_stride=None,
          pos_ridge=None, rope_interleaved=None):
    """Mean pre-softmax attention-score maps of an HF model over token sequences → maskpos.Result
    (the same arrays, statistics and meta keys as maskpos.probe).

    input_ids_or_texts: ids [N, S] (tensor, array or lists), or a str / list of str with tokenizer
    and seq (each text its first seq tokens, shorter ones padded; pack=True: the texts
    concatenated and cut into rows of seq, BOS first when the tokenizer adds one). layers: 1-based
    model layers (default 1-4, all when fewer). batch_size: sequences per forward pass.
    bidirectional: the counterfactual without the causal mask. per_head, probs, recency, stats:
    as maskpos.probe (recency needs whole sequences). The statistics that read activations are
    captured: "freq" from the queries and keys the attention function receives (after q/k norms
    and RoPE; the geometry from the model: rope_geometry(), rope_interleaved=True/False overriding
    the layout read from its code), "variance" from the attention output computed here, "variance"
    and "position" from the residual stream after each probed layer (forward hooks on the decoder
    layers; the forward then runs through the deepest layer's MLP, except in batches where
    resid_stride reads no sequence). resid_stride, pos_dim, pos_stride, pos_ridge: as maskpos.probe
    (resid_stride default: 1 below 256 sequences, else 8). first: the position the statistics start from
    (default: 1 when every sequence starts with the tokenizer's / config's BOS, as the probe
    decides, else 0). attention_mask: [N, S] of a right-padded batch: each sequence is probed over
    its own length (its top-left block of the maps; padding never read). registry: the mapping the
    model looks its attention function up in, when it is not transformers' (then no transformers
    version is needed). accumulator: an Accumulator to add to (e.g. to continue a run; its
    options must fit), returned sums in .accumulator of the result.
    """
    import torch
    words = [x.strip() for x in (stats.split(",") if isinstance(stats, str) else list(stats or []))]
    if registry is None:
        check_transformers()
    cfg = _text_config(model)
    ids, lens, dropped = _tokens(torch, input_ids_or_texts, tokenizer, seq, attention_mask, pack)
    N, S = ids.shape
    if lens is not None and recency:
        raise _error("maskpos.hf.probe: recency=True needs sequences of one length (its triple counts); this batch is "
                     "padded")
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
    windows = {li: layer_window(m, cfg, li) for li, m in mods.items()}  # every layer: the mask of each
    if first is None:
        bos = getattr(tokenizer, "bos_token_id", None) if tokenizer is not None else None
        bos = getattr(cfg, "bos_token_id", None) if bos is None else bos
        first = 1 if isinstance(bos, int) and S >= 3 and bool((ids[:, 0] == bos).all()) else 0
        if first and lens is not None and bool((lens < 3).any()):
            first = 0
    if accumulator is None:
        info = {"model": str(getattr(cfg, "_name_or_path", "") or type(model).__name__),
                "arch": str(getattr(cfg, "model_type", "")), "source": "maskpos.hf.probe: scores captured from "
                "transformers' attention interface (eager attention, the model's dtype)",
                "kv_heads": int(getattr(cfg, "num_key_value_heads", H) or H), "dropped_texts": dropped,
                "packed": bool(pack)}
        info.update(meta or {})
        geo = {}
        if "freq" in words:
            geo.update(rope_geometry(model, cfg, mods, layers, windows))
            if rope_interleaved is not None:
                geo["rope_interleaved"] = bool(rope_interleaved)
        if "position" in words:
            geo["hidden_size"] = int(getattr(cfg, "hidden_size"))
        accumulator = Accumulator(len(layers), H, S, causal=not bidirectional, window=[windows[l - 1] for l in layers],
                                  per_head=per_head, probs=probs, recency=recency, stats=stats, first=first, layer_ids=layers,
                                  meta=info, pos_dim=pos_dim, pos_stride=pos_stride, pos_ridge=pos_ridge,
                                  resid_stride=(resid_stride if resid_stride is not None else 1 if N < 256 else 8), **geo)
    on = accumulator.options["stats"]
    resid = "variance" in on or "position" in on
    cap = Capture(accumulator, {l - 1: k for k, l in enumerate(layers)}, not bidirectional, windows,
                  stop_after=max(layers) - 1 if stop_early and not resid else None)
    hooks = []
    if resid:  # the residual stream after each probed layer: forward hooks on its decoder layer
        cap.stop_layer = max(layers) - 1 if stop_early else None
        owners = decoder_layers(model, mods)
        for l in layers:
            if l - 1 not in owners:
                raise _error("maskpos.hf.probe: stats %s needs the decoder layer holding attention layer %d (a module "
                             "with it as a direct child) for the residual stream; none found" % (
                                 "/".join(w for w in ("variance", "position") if w in on), l))
            hooks.append(owners[l - 1].register_forward_hook(cap.layer_hook(l - 1)))
    dev = next(model.parameters()).device
    bar = _progress(progress, N)
    t0 = time.perf_counter()
    was_training = model.training
    model.eval()
    try:
        with _Installed(model, cap, registry), torch.no_grad():
            for b0 in range(0, N, batch_size):
                x = ids[b0:b0 + batch_size].to(dev)
                cap.lengths = None if lens is None else lens[b0:b0 + batch_size]
                if resid:  # does resid_stride read a sequence of this batch? (else the forward stops after attention)
                    cap.resid_rows = len(accumulator.capture_rows(0, x.shape[0]))
                am = torch.ones_like(x) if lens is None else (
                    torch.arange(S).view(1, S) < cap.lengths.view(-1, 1)).to(x.dtype).to(dev)
                try:
                    model(input_ids=x, attention_mask=am, use_cache=False)
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
        for hk in hooks:
            hk.remove()
        model.train(was_training)
        if bar == "plain":
            sys.stderr.write("\n")
        elif bar is not None:
            bar.close()
    r = accumulator.result()
    r.accumulator = accumulator
    r.timing = {"wall_s": time.perf_counter() - t0, "accumulator_s": cap.seconds}
    return r
