"""_accumulator.py — maskpos.Accumulator: the probe's streaming statistics over attention scores you
computed yourself (PyTorch, HF transformers, numpy), with the result `maskpos probe` gives.

    acc = maskpos.Accumulator(n_layers=4, n_heads=32, seq=1024, per_head=True, probs=True)
    for batch in loader:
        ...                                   # your forward pass; for each layer l (0-based):
        acc.add(l, scores, ids=input_ids,     # [B, H, S, S] or [H, S, S], pre-softmax; ids: BOS detected
                lengths=attention_mask.sum(1))  # padded sequences: their lengths (padding never read)
    r = acc.result()                          # a maskpos.Result, as maskpos.probe returns
    r.save("runs/mine")                       # the folder `maskpos probe --out` writes

Every sum is the C probe's own (libmaskpos: maskpos_acc_*): fed the scores the C forward pass
computes, every output equals `maskpos probe`'s byte for byte. numpy arrays and CPU tensors
(float32, float64; float16/bfloat16 widened to float32, exactly) go to the library as they are.
CUDA tensors are reduced on the GPU in float64 (maskpos._torch) to [S,S]-sized sums per layer
(and [H,S,S] with per_head), so only those cross to the host; their bits differ from the host
path by the order of the float64 sums (docs/python.md states the bound). With recency=True the
scores of a CUDA tensor go to the host (the exact triple counts need the scores row by row); the
activations of variance, freq and position always do (their rows, as float32).
torch is imported only when a tensor is given. Docs: docs/python.md, "Accumulator".
Tests: python/tests_torch/test_accumulator.py.
"""
import ctypes
import json
import os
import threading
import warnings

import numpy as np

from . import _lib

_DT_F64, _DT_F32 = 0, 1
# MASKPOS_AT_*: the capture points maskpos_acc_add_capture takes
_AT_Q, _AT_K, _AT_ATTN_MIX, _AT_LAYER_OUT = 1, 2, 3, 7

# The model's geometry (freq's heads and RoPE, position's residual stream): Accumulator keyword,
# the field of MaskposAccOptions, its C type (include/maskpos.h).
_GEOMETRY = (("head_dim", "head_dim", ctypes.c_int), ("n_kv_heads", "n_kv_heads", ctypes.c_int),
             ("rot_dim", "rot_dim", ctypes.c_int), ("rope_interleaved", "rope_interleaved", ctypes.c_int),
             ("scale", "scale", ctypes.c_double), ("inv_freq", "inv_freq", ctypes.POINTER(ctypes.c_double)),
             ("rope_base", "rope_base", ctypes.POINTER(ctypes.c_double)), ("hidden_size", "resid_width", ctypes.c_int),
             ("pos_dim", "pos_dim", ctypes.c_int), ("pos_stride", "pos_stride", ctypes.c_int),
             ("pos_ridge", "pos_ridge", ctypes.c_double), ("resid_stride", "resid_stride", ctypes.c_int))


class _Options(ctypes.Structure):
    _fields_ = [("n_layers", ctypes.c_int), ("n_heads", ctypes.c_int), ("seq", ctypes.c_int),
                ("causal", ctypes.c_int), ("windows", ctypes.POINTER(ctypes.c_int)),
                ("layer_ids", ctypes.POINTER(ctypes.c_int)), ("first", ctypes.c_int), ("per_head", ctypes.c_int),
                ("probs", ctypes.c_int), ("recency", ctypes.c_int), ("heads_f64", ctypes.c_int),
                ("stats", ctypes.c_char_p)] + [(field, ct) for _, field, ct in _GEOMETRY]


_P = ctypes.c_void_p
_SIGNATURES = {
    "maskpos_acc_check": (ctypes.c_int, [ctypes.POINTER(_Options)]),
    "maskpos_acc_new": (ctypes.c_int, [ctypes.POINTER(_Options), ctypes.POINTER(_P)]),
    "maskpos_acc_free": (None, [_P]),
    "maskpos_acc_options": (ctypes.c_int, [_P, ctypes.POINTER(_Options)]),
    "maskpos_acc_count": (ctypes.c_int64, [_P, ctypes.c_int], "acc layer"),
    "maskpos_acc_set_meta": (ctypes.c_int, [_P, ctypes.c_char_p], "acc meta"),
    "maskpos_acc_add": (ctypes.c_int, [_P, ctypes.c_int, ctypes.c_int64, ctypes.c_int, _P, _P], "acc layer batch dtype"),
    "maskpos_acc_add_lengths": (ctypes.c_int, [_P, ctypes.c_int, ctypes.c_int64, ctypes.c_int, _P, _P, _P],
                                "acc layer batch dtype"),
    "maskpos_acc_check_add": (ctypes.c_int, [_P, ctypes.c_int, ctypes.c_int64, ctypes.c_int, _P, _P, _P],
                              "acc layer batch dtype"),
    "maskpos_acc_lengths_on": (ctypes.c_int, [_P]),
    "maskpos_acc_add_capture": (ctypes.c_int, [_P, ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int, _P,
                                               ctypes.c_int64], "acc layer point batch dtype width"),
    "maskpos_acc_capture_rows": (ctypes.c_int64, [_P, ctypes.c_int, ctypes.c_int, ctypes.c_int64, _P],
                                 "acc layer point batch"),
    "maskpos_acc_meta": (_P, [_P]),
    "maskpos_acc_open_state": (ctypes.c_int, [ctypes.c_char_p, ctypes.POINTER(_P)], "path"),
    "maskpos_acc_add_sums": (ctypes.c_int, [_P, ctypes.c_int, ctypes.c_int64, ctypes.c_int,
                                            ctypes.POINTER(ctypes.c_char_p), ctypes.POINTER(_P)], "acc layer count len(sums)"),
    "maskpos_acc_merge": (ctypes.c_int, [_P, _P]),
    "maskpos_acc_state_narrays": (ctypes.c_int, [_P]),
    "maskpos_acc_state_array": (ctypes.POINTER(ctypes.c_double), [_P, ctypes.c_int, ctypes.POINTER(ctypes.c_char_p),
                                                                  ctypes.POINTER(ctypes.c_int64)], "acc i"),
    "maskpos_acc_set_counts": (ctypes.c_int, [_P, ctypes.POINTER(ctypes.c_int64)]),
    "maskpos_acc_save_state": (ctypes.c_int, [_P, ctypes.c_char_p], "acc path"),
    "maskpos_acc_load_state": (ctypes.c_int, [_P, ctypes.c_char_p], "acc path"),
    "maskpos_acc_result": (ctypes.c_int, [_P, ctypes.POINTER(_P)]),
    "maskpos_model_scores": (ctypes.c_int, [_P, _P, ctypes.c_int, ctypes.c_int, ctypes.c_int, _P],
                             "model ids len(ids) n_layers bidirectional"),
}
_lib.declare(_SIGNATURES)


def _error():
    from . import Error  # the package's exception (defined in __init__)
    return Error(_lib.lib.maskpos_last_error().decode("utf-8", "replace"))


def _is_torch(x):
    return type(x).__module__.split(".")[0] == "torch"


def _windows(window, n_layers):
    """None, an int (every layer) or a list per layer (None or 0: no window) -> [n_layers] ints."""
    from . import Error
    if window is None:
        return [0] * n_layers
    if not isinstance(window, (list, tuple, np.ndarray)):
        return [_lib.whole(window, "window", 0)] * n_layers
    if len(window) != n_layers:
        raise Error("accumulator: window has %d entries for %d layers" % (len(window), n_layers))
    return [0 if v is None else _lib.whole(v, "window[%d]" % i, 0) for i, v in enumerate(window)]


class MaskposWarning(UserWarning):
    """What maskpos reports without refusing: an input that is probably not what was meant (a BOS
    column counted at first=0, too few sequences); also recorded in the result's meta["warnings"]."""


def _int_rows(x, what, n=None):
    """x (numpy, torch, list) as an int64 numpy array, [n] rows when n is given."""
    from . import Error
    if _is_torch(x):
        x = x.detach().cpu().numpy()
    a = np.asarray(x)
    if a.size and not np.issubdtype(a.dtype, np.integer):
        if np.issubdtype(a.dtype, np.floating) and np.all(a == np.round(a)):
            a = a.astype(np.int64)
        else:
            raise Error("accumulator: %s must be integers, not %s" % (what, a.dtype))
    a = a.astype(np.int64)
    if n is not None and (a.ndim < 1 or a.shape[0] != n):
        raise Error("accumulator: %s has %s rows for a batch of %d" % (what, list(a.shape)[:1] or "no", n))
    return a


# the statistics fed by activations alone (add(attn_out=, hidden=, query=, key=)), not by the scores
_CAPTURED = frozenset(("variance", "freq", "position"))

# a first column this many times the spread of the rest of its rows above them: a BOS or sink (result())
_SINK_SPREADS = 3.0


def _table(x, what, L, P):
    """inv_freq ([P] for every layer, or [L, P]) or rope_base (a number, or [L]) as a list of lists
    [L][P] (P None: a list [L]) of floats; None stays None."""
    from . import Error
    if x is None:
        return None
    if _is_torch(x):
        x = x.detach().cpu().double().numpy()
    a = np.asarray(x, dtype=np.float64)
    want = (L,) if P is None else (L, P)
    if a.ndim == len(want) - 1 and a.shape == want[1:]:
        a = np.broadcast_to(a, want)  # one for every layer
    if a.shape != want:
        raise Error("accumulator: %s of shape %s; expected %s%s" % (what, list(a.shape), list(want),
                                                                   "" if P is None else " or [%d] (every layer)" % P))
    return a.tolist()


def _geometry(L, head_dim=None, n_kv_heads=None, rot_dim=None, rope_interleaved=False, scale=None, inv_freq=None,
              rope_base=None, hidden_size=None, pos_dim=None, pos_stride=None, pos_ridge=None, resid_stride=None):
    """The geometry keywords of Accumulator as options (0: not given, the library's default)."""
    hd = 0 if head_dim is None else _lib.whole(head_dim, "head_dim", 0, 65536)
    rd = 0 if rot_dim is None else _lib.whole(rot_dim, "rot_dim", 0, 65536)
    C = 0 if hidden_size is None else _lib.whole(hidden_size, "hidden_size", 0, 2 ** 20)
    pd = 0 if pos_dim is None else _lib.whole(pos_dim, "pos_dim", 0)
    return dict(head_dim=hd, n_kv_heads=0 if n_kv_heads is None else _lib.whole(n_kv_heads, "n_kv_heads", 0),
                rot_dim=rd, rope_interleaved=bool(rope_interleaved), scale=0.0 if scale is None else float(scale),
                inv_freq=_table(inv_freq, "inv_freq", L, (rd or hd) // 2), rope_base=_table(rope_base, "rope_base", L, None),
                hidden_size=C, pos_dim=C if pos_dim is not None and pd == 0 else pd,  # 0: the whole width, as probe --pos-dim 0
                pos_stride=0 if pos_stride is None else _lib.whole(pos_stride, "pos_stride", 0),
                pos_ridge=0.0 if pos_ridge is None else float(pos_ridge),
                resid_stride=0 if resid_stride is None else _lib.whole(resid_stride, "resid_stride", 0))


def _geometry_c(g, keep):
    """The geometry options g as _Options keyword values (the tables as C arrays appended to keep)."""
    out = {}
    for key, field, ct in _GEOMETRY:
        v = g[key]
        if key in ("inv_freq", "rope_base"):
            flat = None if v is None else np.ascontiguousarray(np.asarray(v, dtype=np.float64).ravel())
            if flat is not None:
                keep.append(flat)
            v = None if flat is None or not flat.size else flat.ctypes.data_as(ctypes.POINTER(ctypes.c_double))
        out[field] = int(v) if ct is ctypes.c_int else v
    return out


def _geometry_of(o):
    """The geometry options of a library _Options o (its tables copied)."""
    L, P = int(o.n_layers), int(o.rot_dim) // 2
    g = {key: getattr(o, field) for key, field, _ in _GEOMETRY}
    g["rope_interleaved"] = bool(g["rope_interleaved"])
    g["inv_freq"] = [[float(o.inv_freq[l * P + p]) for p in range(P)] for l in range(L)] if o.inv_freq and P else None
    g["rope_base"] = [float(o.rope_base[l]) for l in range(L)] if o.rope_base else None
    return g


class Accumulator:
    """Streaming sums of pre-softmax attention scores, as `maskpos probe` keeps them.

    n_layers, n_heads, seq: the layer slots (0-based in add()), query heads and S (the longest
    sequence; shorter ones through add(..., lengths=)).
    causal: query i observes keys j <= i only (False: a bidirectional run).
    window: sliding window W (int for every layer, or a list per layer; None/0: none); query i
        observes key j when i - j < W (and j - i < W without the causal mask), as HF applies it.
    per_head, probs, recency: the probe's --per-head, --probs and --recency outputs.
    stats: more statistics by name, a list or "a,b" (the probe's --stats; probs and recency are two of
        them); options["stats"] lists every optional statistic on.
    first: the statistics cover positions first..S-1 (the maps always cover every position).
        None (default): decided by the first add() that gives ids=, as the probe decides it: 1
        when every sequence starts with BOS (bos_id, or without it the same first id in every
        sequence of that batch), else 0; 0 when no ids are ever given.
    bos_id: the model's BOS token id (for ids=; None: inferred as above).
    layer_ids: 1-based model layer numbers for meta.json (default 1..n_layers).
    meta: dict of keys put into the result's meta.json (e.g. {"model": "gpt2"}).
    heads_f64: per-head maps as float64 (default float32, as `maskpos probe` without --heads-f64;
        summed in double either way).

    The statistics that read activations (docs/python.md, "Variance, frequencies, position") take
    the model's geometry. stats "freq" (RoPE frequency usage; add(query=, key=)): head_dim,
    n_kv_heads (default n_heads), rot_dim (the rotated dims at the start of a head, default
    head_dim: partial rotary), rope_interleaved (True: RoPE rotates dims (2p, 2p+1), GPT-J's and
    GGUF's layout; False: (p, p + rot_dim/2), HF's rotate_half), scale (the score scale, default
    1/sqrt(head_dim); HF's module.scaling), inv_freq ([rot_dim/2] or [n_layers, rot_dim/2], the
    inverse frequencies, 0 for a pair not rotated) and rope_base (a number or one per layer; both
    only reported, as freq_angle and freq_base: NaN when not given). stats "position" (add(hidden=)):
    hidden_size (the residual stream's width), pos_dim (features, default 256; 0 the whole width),
    pos_stride, pos_ridge: as maskpos.probe. resid_stride=K: variance's residual part and the
    position probe read the residual stream of every K-th sequence only (as maskpos.probe; default
    every one): add(hidden=) still takes the whole batch and keeps those rows (on the tensor's
    device, so only they are copied).
    """

    _h = None  # a half-made accumulator (a bad argument) has nothing to free in __del__

    def __init__(self, n_layers, n_heads, seq, causal=True, window=None, per_head=False, probs=False,
                 recency=False, first=None, layer_ids=None, meta=None, heads_f64=False, bos_id=None, stats=None,
                 head_dim=None, n_kv_heads=None, rot_dim=None, rope_interleaved=False, scale=None, inv_freq=None,
                 rope_base=None, hidden_size=None, pos_dim=None, pos_stride=None, pos_ridge=None, resid_stride=None):
        from . import Error
        # one lock per accumulator around every call into C: add() from several threads (a data
        # loader's workers) adds every batch once (issue 40: 4 threads lost updates, 1 try in 6)
        self._lock = threading.RLock()
        # the sizes as C ints, checked by the library (nothing allocated) before the per-layer lists
        # are built from them (Accumulator(2**31, 2, 8) built lists until the OOM killer came)
        L, H, S, f0 = (_lib.whole(v, k) for v, k in ((n_layers, "n_layers"), (n_heads, "n_heads"), (seq, "seq"),
                                                     (0 if first is None else first, "first")))
        words = stats if isinstance(stats, (str, bytes)) or stats is None else ",".join(str(x) for x in stats)
        words = _lib.text(words, "stats") if words is not None else None
        geo = _geometry(L, head_dim, n_kv_heads, rot_dim, rope_interleaved, scale, inv_freq, rope_base, hidden_size,
                        pos_dim, pos_stride, pos_ridge, resid_stride)
        keep = []
        o = _Options(L, H, S, 1 if causal else 0, None, None, f0, *[1 if f else 0 for f in (per_head, probs, recency, heads_f64)],
                     words, **_geometry_c(geo, keep))
        if _lib.lib.maskpos_acc_check(ctypes.byref(o)) != _lib.OK:
            raise _error()
        w = _windows(window, L)
        if layer_ids is not None and len(layer_ids) != L:
            raise Error("accumulator: layer_ids has %d entries for %d layers" % (len(layer_ids), L))
        ids = list(range(1, L + 1)) if layer_ids is None else [_lib.whole(x, "layer_ids[%d]" % i)
                                                              for i, x in enumerate(layer_ids)]
        if meta is not None and not isinstance(meta, dict):
            raise Error("accumulator: meta must be a dict of keys for meta.json, not %s" % type(meta).__name__)
        self._first_auto = first is None
        self.options = dict(n_layers=L, n_heads=H, seq=S, causal=bool(causal), window=w, per_head=bool(per_head),
                            probs=bool(probs), recency=bool(recency), first=f0, layer_ids=ids, heads_f64=bool(heads_f64),
                            stats=words.decode() if words else "", **geo)
        self.bos_id = None if bos_id is None else _lib.whole(bos_id, "bos_id", 0)
        self._make()
        self.meta = dict(meta or {})
        self.warnings = []
        if self.meta:
            self._set_meta()

    def _make(self):
        """The C accumulator of self.options (replacing an empty one); options["probs"], ["recency"]
        and ["stats"] (every optional statistic on, as a list) as the library reads them."""
        o = self.options
        st = o["stats"] if isinstance(o["stats"], str) else ",".join(o["stats"])
        self._wbuf = (ctypes.c_int * len(o["window"]))(*o["window"])
        self._ibuf = (ctypes.c_int * len(o["layer_ids"]))(*o["layer_ids"])
        keep = []
        opts = _Options(o["n_layers"], o["n_heads"], o["seq"], 1 if o["causal"] else 0, self._wbuf, self._ibuf, o["first"],
                        1 if o["per_head"] else 0, 1 if o["probs"] else 0, 1 if o["recency"] else 0,
                        1 if o["heads_f64"] else 0, st.encode() if st else None, **_geometry_c(o, keep))
        h = _P()
        if _lib.lib.maskpos_acc_new(ctypes.byref(opts), ctypes.byref(h)) != _lib.OK:
            raise _error()
        self.close()
        with self._lock:
            self._h = h
        self._read_stats()

    def _read_stats(self):
        """options' probs, recency and stats from the library (the statistics on, however asked for),
        and the geometry with its defaults filled in."""
        on = _Options()
        with self._lock:
            if _lib.lib.maskpos_acc_options(self._h, ctypes.byref(on)) != _lib.OK:
                raise _error()
            self.options.update(probs=bool(on.probs), recency=bool(on.recency),
                                stats=[x for x in (on.stats or b"").decode().split(",") if x], **_geometry_of(on))

    # ------------------------------------------------------------ basics
    def _set_meta(self):
        with self._lock:
            if _lib.lib.maskpos_acc_set_meta(self._h, json.dumps(self.meta).encode()) != _lib.OK:
                raise _error()

    @property
    def n(self):
        """Sequences every layer has seen."""
        with self._lock:
            return int(_lib.lib.maskpos_acc_count(self._h, -1))

    @property
    def counts(self):
        """Sequences seen per layer slot."""
        with self._lock:
            return [int(_lib.lib.maskpos_acc_count(self._h, l)) for l in range(self.options["n_layers"])]

    def close(self):
        lock = getattr(self, "_lock", None)  # (None: __init__ failed before making it)
        if lock is None:
            return
        with lock:
            if self._h:
                _lib.lib.maskpos_acc_free(self._h)
                self._h = None

    def __del__(self):
        self.close()

    def __repr__(self):
        o = self.options
        return "<maskpos.Accumulator %d layers, %d heads, S=%d, %s, first=%d, n=%d>" % (
            o["n_layers"], o["n_heads"], o["seq"], "causal" if o["causal"] else "bidirectional", o["first"], self.n)

    # ------------------------------------------------------------ adding
    def _shape_error(self, what, shape):
        from . import Error
        o = self.options
        return Error("accumulator: %s of shape %s; expected [B, %d, %d, %d] or [%d, %d, %d]" % (
            what, list(shape), o["n_heads"], o["seq"], o["seq"], o["n_heads"], o["seq"], o["seq"]))

    def _host(self, x, what):
        """x as a C-contiguous float32/float64 numpy array [B, H, S, S]."""
        from . import Error
        if _is_torch(x):
            x = x.detach()
            if x.device.type != "cpu":
                x = x.cpu()
            if not x.is_floating_point():
                raise Error("accumulator: %s must be floating point, not %s" % (what, x.dtype))
            if str(x.dtype) not in ("torch.float32", "torch.float64"):
                x = x.float()  # float16 / bfloat16: exact in float32
            x = x.contiguous().numpy()
        else:
            x = np.asarray(x)
            if x.dtype.kind != "f":
                raise Error("accumulator: %s must be floating point, not %s" % (what, x.dtype))
            if x.dtype not in (np.float32, np.float64):
                x = x.astype(np.float32)
        if x.ndim == 3:
            x = x[None]
        o = self.options
        if x.ndim != 4 or x.shape[1:] != (o["n_heads"], o["seq"], o["seq"]):
            raise self._shape_error(what, x.shape)
        return np.ascontiguousarray(x)

    def _check_layer(self, layer):
        from . import Error
        if not isinstance(layer, (int, np.integer)) or isinstance(layer, bool):
            raise Error("accumulator: layer must be an int (0-based), not %r" % (layer,))
        if not 0 <= layer < self.options["n_layers"]:
            raise Error("accumulator: layer %d is out of range [0, %d)" % (layer, self.options["n_layers"]))

    def _batch(self, scores):
        shape = tuple(scores.shape)
        return 1 if len(shape) == 3 else shape[0] if len(shape) == 4 else None

    def _lengths(self, lengths, B):
        """lengths as int32 [B] (None stays None)."""
        if lengths is None:
            return None
        a = _int_rows(lengths, "lengths", B).reshape(-1)
        if a.size != B:
            raise self._shape_error("lengths", a.shape)
        return np.ascontiguousarray(a.astype(np.int32))

    def _warn(self, msg):
        if msg not in self.warnings:
            self.warnings.append(msg)
            warnings.warn(msg, MaskposWarning, stacklevel=3)

    def _ids(self, ids, B):
        """BOS from the token ids, as the probe decides it (docs/python.md, "ids")."""
        from . import Error
        a = _int_rows(ids, "ids")
        if a.ndim == 1:  # one sequence's ids [S] (B = 1), or the first id of each [B]
            a = a[None, :] if B == 1 else a[:, None]
        if a.ndim != 2 or a.shape[1] < 1 or a.shape[0] != B:
            raise Error("accumulator: ids must be [B, S] token ids for a batch of %d, not %s" % (B, list(a.shape)))
        col = a[:, 0]
        empty = not any(self.counts)
        if self._first_auto and empty:
            bos, given = self.bos_id, self.bos_id is not None
            if bos is None and B >= 2 and (col == col[0]).all():
                bos = int(col[0])  # every sequence opens with the same token: the BOS
            if bos is not None and (col == bos).all() and self.options["seq"] >= 3:
                self.options["first"] = 1
                self.bos_id = int(bos)
                self._make()
                self.meta["stats_first_from"] = ("ids: every sequence starts with BOS id %d (%s): the statistics skip "
                                                 "position 0" % (bos, "given" if given else "the same first id in every sequence"))
                self._set_meta()
            self._first_auto = False
            return
        if self.options["first"] == 1 and self.bos_id is not None and not (col == self.bos_id).all():
            k = int(np.nonzero(col != self.bos_id)[0][0])
            raise Error("accumulator: ids[%d] starts with id %d, not BOS %d: the statistics skip position 0 (first=1) of "
                        "sequences that start with BOS; nothing was added" % (k, int(col[k]), self.bos_id))
        if self.options["first"] == 0 and self.bos_id is not None and (col == self.bos_id).all():
            self._warn("every sequence starts with BOS id %d but first=0: its column enters every statistic (a false "
                       "'non-relative' layer 1); make the accumulator with first=1 (or first=None and ids=)" % self.bos_id)

    def _capture(self, x, what, B, heads, rows=None):
        """A capture as a C-contiguous float32 numpy array [len(rows), S, width] (numpy or torch, any
        device: only the rows kept are copied to the host); heads (the number of heads, 0: [B, S, C]):
        [B, S, heads, hd] or [B, heads, S, hd] accepted and merged. rows: the batch's rows kept (None:
        all)."""
        from . import Error
        S = self.options["seq"]
        if x.ndim == 2 or (heads and x.ndim == 3 and x.shape[1] != S):
            x = x[None]  # one sequence: [S, C], or [S, heads, hd] / [heads, S, hd]
        if x.shape[0] != B:
            raise Error("accumulator: %s of shape %s; expected [%d, ...] (the batch of the scores first)"
                        % (what, list(x.shape), B))
        if rows is not None and len(rows) < B:  # (indexed where it lives: only the rows kept are copied)
            if _is_torch(x):
                import torch
                x = x[torch.as_tensor(rows, dtype=torch.long, device=x.device)]
            else:
                x = x[np.asarray(rows, dtype=np.int64)]
        if _is_torch(x):
            x = x.detach()
            if x.device.type != "cpu":
                x = x.cpu()  # one copy to the host per call (docs/python.md, "Variance")
            if not x.is_floating_point():
                raise Error("accumulator: %s must be floating point, not %s" % (what, x.dtype))
            x = x.float().contiguous().numpy()
        else:
            x = np.asarray(x)
            if x.dtype.kind != "f":
                raise Error("accumulator: %s must be floating point, not %s" % (what, x.dtype))
        n = x.shape[0]
        if heads and x.ndim == 4 and x.shape[1] == heads and x.shape[2] == S and x.shape[1] != S:
            x = x.transpose(0, 2, 1, 3)  # [n, heads, S, hd]: HF's layout of queries, keys and softmax(scores)·v
        if heads and x.ndim == 4:
            if x.shape[2] != heads:
                raise Error("accumulator: %s of shape %s; expected [B, %d, %d, head_dim], [B, %d, %d, head_dim] or "
                            "[B, %d, C]" % (what, list(x.shape), S, heads, heads, S, S))
            x = x.reshape(n, x.shape[1], -1)
        if x.ndim != 3 or x.shape[1] != S or (heads and x.shape[2] % heads):
            raise Error("accumulator: %s of shape %s; expected [%d, %d, %s] (the batch of the scores, S positions)"
                        % (what, list(x.shape), B, S, "%d*head_dim" % heads if heads else "C"))
        x = np.ascontiguousarray(x, dtype=np.float32)
        if not np.isfinite(x).all():
            k = np.argwhere(~np.isfinite(x))[0]
            raise Error("accumulator: %s[%d, %d, %d] = %r is not finite; nothing was added"
                        % (what, k[0], k[1], k[2], float(x[tuple(k)])))
        return x

    # the activations add() takes: the statistics that read each
    _READS = {"attn_out": ("variance",), "hidden": ("variance", "position"), "query": ("freq",), "key": ("freq",)}

    def _captures(self, layer, B, attn_out=None, hidden=None, query=None, key=None):
        """[(point, batch, host array)] of the activations given, checked (each read by a statistic
        asked; query and key together, of the geometry's widths); hidden's rows those resid_stride
        keeps (maskpos_acc_capture_rows)."""
        from . import Error
        o = self.options
        given = [k for k, v in (("attn_out", attn_out), ("hidden", hidden), ("query", query), ("key", key)) if v is not None]
        for k in given:
            if not set(self._READS[k]) & set(o["stats"]):
                raise Error("accumulator: %s given but no statistic asked reads it (stats=%s)" % (
                    k, " or ".join('"%s"' % r for r in self._READS[k])))
        if ("query" in given) != ("key" in given):
            raise Error("accumulator: query and key come together (the freq statistic reads the pair)")
        caps = []
        if attn_out is not None:
            caps.append((_AT_ATTN_MIX, B, self._capture(attn_out, "attn_out", B, o["n_heads"])))
        if hidden is not None:
            caps.append((_AT_LAYER_OUT, B, self._capture(hidden, "hidden", B, 0, self.capture_rows(layer, B))))
        if query is not None:
            q = self._capture(query, "query", B, o["n_heads"])
            k = self._capture(key, "key", B, o["n_kv_heads"])
            for what, x, h in (("query", q, o["n_heads"]), ("key", k, o["n_kv_heads"])):
                if x.shape[2] != h * o["head_dim"]:
                    raise Error("accumulator: %s of width %d; expected %d heads x head_dim %d" % (
                        what, x.shape[2], h, o["head_dim"]))
            caps += [(_AT_Q, B, q), (_AT_K, B, k)]
        return caps

    def add(self, layer, scores, probs=None, lengths=None, ids=None, attn_out=None, hidden=None, query=None, key=None):
        """Adds one layer's pre-softmax scores for a batch: [B, H, S, S] or [H, S, S] (numpy, or a
        torch tensor on any device). Entries outside the causal mask or window are never read
        (-inf, NaN or anything). probs: the post-softmax probabilities in the same layout (needs
        probs=True), or None: computed from the scores with the probe's own softmax (host) or
        torch.softmax in float32 (CUDA). lengths: [B] each sequence's length S' <= S (padded
        batches, e.g. attention_mask.sum(1) of right-padded ones): its top-left S' x S' block is
        added, padding never read. ids: [B, S] token ids: the first add() with them decides first
        (BOS) when the accumulator was made with first=None; later ones are checked against it.
        A score of magnitude 1e4 or more in an observed entry is refused as a padding or mask
        value. The activations, each with every batch when a statistic asked reads it (numpy or
        torch, any device: copied to the host in float32): attn_out (stats "variance"), the
        attention output before o_proj, [B, S, H, head_dim], [B, H, S, head_dim] or
        [B, S, H*head_dim]; hidden ("variance", "position"), the residual stream after the layer,
        [B, S, C] (the whole batch: resid_stride keeps its rows); query and key ("freq"), after
        q/k norms and RoPE, [B, H, S, head_dim] and [B, n_kv_heads, S, head_dim] (HF's layout; or
        [B, S, heads, head_dim], [B, S, heads*head_dim]), the keys before GQA's repeat. A bad
        input raises maskpos.Error and adds nothing."""
        from . import Error
        self._check_layer(layer)
        if probs is not None and not self.options["probs"]:
            raise Error("accumulator: probabilities given but the accumulator was made without probs=True")
        B = self._batch(scores)
        if B is None:
            raise self._shape_error("scores", scores.shape)
        lens = self._lengths(lengths, B)
        caps = self._captures(layer, B, attn_out, hidden, query, key)
        if ids is not None:
            self._ids(ids, B)
        self._add_scores(layer, scores, probs, lens)
        self._add_caps(layer, caps)

    def _add_caps(self, layer, caps):
        with self._lock:
            for point, B, x in caps:
                if _lib.lib.maskpos_acc_add_capture(self._h, int(layer), point, B, _DT_F32, x.ctypes.data,
                                                    x.shape[2]) != _lib.OK:
                    raise _error()

    def capture_rows(self, layer, batch):
        """The rows of the next batch of `batch` sequences of layer slot `layer` whose residual stream
        (hidden=) is read: every one, or with resid_stride=K those of sequences s with s % K == 0."""
        rows = (ctypes.c_int64 * max(int(batch), 1))()
        with self._lock:
            n = _lib.lib.maskpos_acc_capture_rows(self._h, int(layer), _AT_LAYER_OUT, int(batch), rows)
        if n < 0:
            raise _error()
        return list(rows[:n])

    def add_captures(self, layer, attn_out=None, hidden=None, query=None, key=None):
        """The activations of add(attn_out=, hidden=, query=, key=) alone, for a forward pass that
        yields them at other times than the scores (the residual stream after the layer's MLP: a
        forward hook; maskpos.hf.probe). The batch is the tensors' first axis (a 2-D hidden [S, C]:
        one sequence). Every sequence's scores and captures must be added before result()."""
        self._check_layer(layer)
        o = self.options
        B = None
        for x, heads in ((attn_out, o["n_heads"]), (hidden, 0), (query, o["n_heads"]), (key, o["n_kv_heads"])):
            if x is not None and B is None:
                B = 1 if x.ndim == 2 or (heads and x.ndim == 3 and x.shape[1] != o["seq"]) else int(x.shape[0])
        if B is not None:
            self._add_caps(layer, self._captures(layer, B, attn_out, hidden, query, key))

    def _add_scores(self, layer, scores, probs, lens):
        from . import Error
        if _is_torch(scores) and scores.device.type != "cpu" and set(self.options["stats"]) - _CAPTURED <= {"probs"}:
            # the sums maskpos._torch computes on the device: the maps' and the probabilities' (the
            # statistics fed by captures alone take theirs apart); recency takes the scores on the host
            from . import _torch
            _torch.add_on_device(self, int(layer), scores, probs, lens)
            return
        s = self._host(scores, "scores")
        p = None
        if probs is not None:
            p = self._host(probs, "probs")
            if p.shape != s.shape:
                raise Error("accumulator: probs of shape %s do not match scores %s" % (list(p.shape), list(s.shape)))
            if p.dtype != s.dtype:
                p = p.astype(s.dtype)
        dt = _DT_F32 if s.dtype == np.float32 else _DT_F64
        with self._lock:
            rc = _lib.lib.maskpos_acc_add_lengths(self._h, int(layer), s.shape[0], dt, s.ctypes.data,
                                                  p.ctypes.data if p is not None else None,
                                                  lens.ctypes.data if lens is not None else None)
            if rc != _lib.OK:
                raise _error()

    def check(self, layer, scores, probs=None, lengths=None):
        """The check add() makes, adding nothing (scores a host array [B, H, S, S])."""
        s = self._host(scores, "scores")
        lens = self._lengths(lengths, s.shape[0])
        p = None if probs is None else self._host(probs, "probs").astype(s.dtype)
        dt = _DT_F32 if s.dtype == np.float32 else _DT_F64
        self._check_layer(layer)
        with self._lock:
            if _lib.lib.maskpos_acc_check_add(self._h, int(layer), s.shape[0], dt, s.ctypes.data,
                                              p.ctypes.data if p is not None else None,
                                              lens.ctypes.data if lens is not None else None) != _lib.OK:
                raise _error()

    def add_sums(self, layer, count, sums):
        """Adds sums computed elsewhere for `count` sequences of one layer: {name: float64 array}
        for every name of state_dict()["arrays"], each that array's slice of this layer; or, for
        the block test, "block_means" [count, nb, nb] (each sequence's, NaN for a block it does
        not observe) in place of bsum, bsumsq, bflip and bcnt."""
        self._check_layer(layer)
        count = _lib.whole(count, "count", 0, 2 ** 53)
        if not isinstance(sums, dict):
            from . import Error
            raise Error("accumulator: sums must be a dict {name: array}, not %s" % type(sums).__name__)
        names = list(sums)
        keep = [np.ascontiguousarray(np.asarray(sums[k], dtype=np.float64)) for k in names]
        state = self._arrays(copy=False)
        from . import Error
        for k, a in zip(names, keep):
            if k in state and a.size != state[k].size // self.options["n_layers"]:
                raise Error("accumulator: sum '%s' has %d values; one layer holds %d" % (
                    k, a.size, state[k].size // self.options["n_layers"]))
        cn = (ctypes.c_char_p * len(names))(*[_lib.text(k, "sums key") for k in names])
        cp = (_P * len(names))(*[a.ctypes.data for a in keep])
        with self._lock:
            if _lib.lib.maskpos_acc_add_sums(self._h, int(layer), count, len(names), cn, cp) != _lib.OK:
                raise _error()

    # ------------------------------------------------------------ combining and state
    def _sync_options(self):
        """self.options["seq"] from the library (a merge grows it to the longer accumulator's)."""
        o = _Options()
        with self._lock:
            if _lib.lib.maskpos_acc_options(self._h, ctypes.byref(o)) != _lib.OK:
                raise _error()
        self.options["seq"] = int(o.seq)

    def merge(self, other):
        """self += other (the same options but seq): the sums added entry by entry, counts per layer.
        Merging in a fixed order gives fixed bits. Of different S, the shorter one's sums enter the
        longer one's top-left block, as sequences of that length would (add(..., lengths=)); self
        takes the longer S."""
        if not isinstance(other, Accumulator):
            from . import Error
            raise Error("accumulator merge: another Accumulator is needed, not %s" % type(other).__name__)
        first, second = sorted((self, other), key=id)  # (one order: a.merge(b) beside b.merge(a) cannot deadlock)
        with first._lock, second._lock:
            if _lib.lib.maskpos_acc_merge(self._h, other._h) != _lib.OK:
                raise _error()
        self._sync_options()
        for w in other.warnings:
            if w not in self.warnings:
                self.warnings.append(w)
        return self

    def _arrays(self, copy=True):
        out = {}
        with self._lock:
            for i in range(_lib.lib.maskpos_acc_state_narrays(self._h)):
                name, n = ctypes.c_char_p(), ctypes.c_int64()
                ptr = _lib.lib.maskpos_acc_state_array(self._h, i, ctypes.byref(name), ctypes.byref(n))
                a = np.ctypeslib.as_array(ptr, shape=(n.value,))
                out[name.value.decode()] = a.copy() if copy else a
        return out

    def state_dict(self):
        """Everything needed to continue: options, counts per layer, meta and every sum (float64
        copies). Accumulator.from_state(d) rebuilds it; np.savez/torch.save can store it."""
        with self._lock:  # (counts and sums of the same moment)
            return {"options": dict(self.options, bos_id=self.bos_id), "counts": self.counts, "meta": dict(self.meta),
                    "arrays": self._arrays()}

    @classmethod
    def from_state(cls, state):
        from . import Error
        for key in ("options", "counts", "arrays"):
            if not isinstance(state, dict) or key not in state:
                raise Error("accumulator state: no %r (a dict from state_dict() is needed)" % key)
        o = dict(state["options"])
        missing = {"n_layers", "n_heads", "seq"} - set(o)
        if missing:
            raise Error("accumulator state: options lack %s" % ", ".join(sorted(missing)))
        acc = cls(meta=state.get("meta"), **o)
        acc._first_auto = False
        given = state["arrays"]
        if "npos" in given and _lib.lib.maskpos_acc_lengths_on(acc._h) != _lib.OK:
            raise _error()
        mine = acc._arrays(copy=False)
        if sorted(given) != sorted(mine):
            raise Error("accumulator state: sums %s, expected %s" % (sorted(given), sorted(mine)))
        for k, a in mine.items():
            g = np.asarray(given[k], dtype=np.float64).ravel()
            if g.size != a.size:
                raise Error("accumulator state: sum '%s' has %d values, expected %d" % (k, g.size, a.size))
            if not np.isfinite(g).all():  # (as the probe's checkpoint loader: finite scores give finite sums)
                raise Error("accumulator state: sum '%s' holds NaN or ±Inf at %d" % (k, int(np.argmin(np.isfinite(g)))))
            a[:] = g
        if len(state["counts"]) != o["n_layers"]:
            raise Error("accumulator state: %d counts for %d layers" % (len(state["counts"]), o["n_layers"]))
        counts = (ctypes.c_int64 * o["n_layers"])(*[_lib.whole(c, "counts[%d]" % i, 0, 2 ** 53)
                                                     for i, c in enumerate(state["counts"])])
        if _lib.lib.maskpos_acc_set_counts(acc._h, counts) != _lib.OK:
            raise _error()
        return acc

    def __reduce__(self):
        """pickle, copy.copy and copy.deepcopy: a new accumulator from this one's state_dict()."""
        return (Accumulator.from_state, (self.state_dict(),))

    def save_state(self, path):
        """The state as one file (written atomically, with a checksum): the options, meta, counts per
        layer and every sum. Accumulator.load_state(path) reads it back alone."""
        if self.meta:
            self._set_meta()
        with self._lock:
            if _lib.lib.maskpos_acc_save_state(self._h, _lib.text(path, "path")) != _lib.OK:
                raise _error()

    @classmethod
    def _from_handle(cls, h):
        """An Accumulator around a library accumulator h (options and meta read from it)."""
        acc = cls.__new__(cls)
        acc._lock = threading.RLock()
        acc._h = h
        o = _Options()
        if _lib.lib.maskpos_acc_options(h, ctypes.byref(o)) != _lib.OK:
            raise _error()
        L = int(o.n_layers)
        acc.options = dict(n_layers=L, n_heads=int(o.n_heads), seq=int(o.seq), causal=bool(o.causal),
                           window=[int(o.windows[l]) for l in range(L)], per_head=bool(o.per_head), probs=bool(o.probs),
                           recency=bool(o.recency), first=int(o.first), layer_ids=[int(o.layer_ids[l]) for l in range(L)],
                           heads_f64=bool(o.heads_f64), stats=[x for x in (o.stats or b"").decode().split(",") if x],
                           **_geometry_of(o))
        acc._wbuf = (ctypes.c_int * L)(*acc.options["window"])
        acc._ibuf = (ctypes.c_int * L)(*acc.options["layer_ids"])
        p = _lib.lib.maskpos_acc_meta(h)
        acc.meta = {}
        if p:
            try:
                acc.meta = json.loads(ctypes.string_at(p).decode())
            finally:
                _lib.lib.maskpos_free(p)
        acc.bos_id = acc.meta.get("bos_id") if isinstance(acc.meta.get("bos_id"), int) else None
        acc._first_auto = False
        acc.warnings = []
        return acc

    @classmethod
    def load_state(cls, path, **options):
        """The accumulator saved in path (save_state): its options, meta, counts and sums. With
        options (also for a state file of an older maskpos, which did not store them), they must
        be the saved ones."""
        from . import Error
        if not options:
            h = _P()
            if _lib.lib.maskpos_acc_open_state(_lib.text(path, "path"), ctypes.byref(h)) != _lib.OK:
                raise _error()
            return cls._from_handle(h)
        try:
            acc = cls(**options)
        except TypeError as e:
            raise Error("load_state(%r, ...): %s" % (os.fspath(path), e))
        with acc._lock:
            if _lib.lib.maskpos_acc_load_state(acc._h, _lib.text(path, "path")) != _lib.OK:
                raise _error()
        acc._first_auto = False
        return acc

    def reduce_distributed(self, dst=0, group=None):
        """torch.distributed: gathers every rank's state to rank dst and merges them there in rank
        order (0, 1, 2, ...), so the bits depend on the ranks' data, never on timing. Collective:
        every rank of the group calls it. Returns the merged Accumulator on dst, None elsewhere.
        With the NCCL backend the state travels as CUDA tensors (torch.cuda.current_device())."""
        from . import _torch
        return _torch.reduce_distributed(self, dst, group)

    # ------------------------------------------------------------ result
    def _first_column(self):
        """A warning when, with first=0, the first key's column stands far above the rest of its rows
        in some layer (a BOS or an attention sink: content, not position), else None."""
        o = self.options
        if o["first"] != 0 or not self.n:
            return None
        S, L, H = o["seq"], o["n_layers"], o["n_heads"]
        st = self._arrays(copy=False)
        cnt = np.asarray(self.counts, dtype=np.float64)
        if "npos" in st:
            cnt = st["npos"].reshape(L, S)[:, :1].ravel()
        sums = st["sum"].reshape(L, S, S)
        i, j = np.arange(S)[:, None], np.arange(S)[None, :]
        seen = (j <= i) if o["causal"] else np.ones((S, S), bool)
        worst = None
        for l in range(L):
            if cnt[l] < 1:
                continue
            m = sums[l] / (cnt[l] * H)
            rows = np.where(seen & (j >= 1), m, np.nan)[1:]            # queries 1.., keys 1..
            mu = np.nanmean(rows, axis=1, keepdims=True)
            spread = np.nanstd(rows - mu)
            excess = float(np.mean(m[1:, 0] - mu[:, 0]))
            if spread > 0 and excess > _SINK_SPREADS * spread and (worst is None or excess / spread > worst[2]):
                worst = (l, excess, excess / spread)
        if worst is None:
            return None
        return ("layer slot %d: the first key's column stands %.3g above the rest of its rows (%.1f times their spread) "
                "while first=0: a BOS or attention-sink token at position 0? It then enters every statistic (layer 1 "
                "reads as non-relative); give add(..., ids=) so BOS is detected, or first=1" % worst)

    def result(self):
        """The maskpos.Result that maskpos.probe returns for these sums (scores, scores_se,
        scores_diagnorm, scores_heads, probs..., stats, meta). What add() and this call noticed
        without refusing (a BOS column at first=0) is warned about (MaskposWarning) and recorded in
        meta["warnings"]."""
        from . import Result
        w = self._first_column()
        if w:
            self._warn(w)
        if self.warnings:
            self.meta["warnings"] = list(self.warnings)
        if self.bos_id is not None:
            self.meta["bos_id"] = self.bos_id
        if self.meta:
            self._set_meta()
        out = _P()
        with self._lock:
            if _lib.lib.maskpos_acc_result(self._h, ctypes.byref(out)) != _lib.OK:
                raise _error()
        return Result(out)

    def save(self, folder, force=False):
        """Writes the run folder `maskpos probe --out` writes (maskpos view / plot / load read it)."""
        r = self.result()
        try:
            r.save(folder, force=force)
        finally:
            r.close()


def model_scores(model, ids, n_layers, bidirectional=False):
    """The pre-softmax scores the C forward pass computes for one sequence ids [S] (what `maskpos
    probe` accumulates): float32 [n_layers, H, S, S], -inf where masked. model: a maskpos.Model."""
    from . import Error
    ids = np.asarray(ids)
    if ids.ndim != 1 or (ids.size and not np.issubdtype(ids.dtype, np.integer)):
        raise Error("model_scores: ids must be one sequence of token ids [S] (got %s %s)" % (ids.dtype, list(ids.shape)))
    ids = np.ascontiguousarray(ids, dtype=np.int32)
    if ids.size < 1:
        raise Error("model_scores: no token ids")
    n_layers = _lib.whole(n_layers, "n_layers", 1, model.layers)  # (before the [L, H, S, S] array)
    out = np.empty((n_layers, model.heads, ids.size, ids.size), dtype=np.float32)
    if _lib.lib.maskpos_model_scores(model._handle, ids.ctypes.data, ids.size, n_layers,
                                     1 if bidirectional else 0, out.ctypes.data) != _lib.OK:
        raise _error()
    return out
