"""maskpos — positional information of the causal mask and RoPE, from Python.

A thin layer over libmaskpos.so (ctypes; include/maskpos.h): the same computation as the
`maskpos` command, the same bits, the same one-line error messages.

    >>> import maskpos
    >>> r = maskpos.theory(alpha=0, n=3)
    >>> r = maskpos.simulate(batch=2000, rope=True)
    >>> m = maskpos.Model("models/rope")
    >>> r = maskpos.probe(m, tokens=ids, layers=[1, 2])      # ids: int array [N, S]
    >>> r.scores, r.scores_se, r.diagnorm, r.stats, r.meta
    >>> r.save("results/run")                                  # the folder the command writes
    >>> maskpos.load("results/run")

Errors raise maskpos.Error with the command's message. Long runs draw progress (tqdm when it is
installed, a plain line otherwise) and stop cleanly on Ctrl-C (KeyboardInterrupt afterwards).
Docs: docs/python.md. Tests: python/tests (run by tests/test_pyapi.c in `make test`).
"""
import ctypes
import json
import os
import signal
import sys
import tempfile
import threading
import time

import numpy as np

from . import _lib

__all__ = ["Error", "Result", "Model", "theory", "simulate", "probe", "load", "library_path", "version"]

library_path = _lib.path


def version():
    """The library's version ("0.1.0")."""
    return _lib.lib.maskpos_version().decode()


class Error(Exception):
    """A failed call; str(e) is the one-line message the command prints after "error: "."""


def _fail():
    return Error(_lib.lib.maskpos_last_error().decode("utf-8", "replace"))


# ---------------------------------------------------------------- settings

def _word(value):
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, (list, tuple)):
        return ",".join(_word(v) for v in value)
    if isinstance(value, float):
        return repr(value)
    return str(value)


class _Config:
    def __init__(self, job, settings):
        self.handle = _lib.lib.maskpos_config_new(job.encode())
        if not self.handle:
            raise _fail()
        try:
            for key, value in settings.items():
                if value is None:
                    continue
                if _lib.lib.maskpos_config_set(self.handle, key.encode(), _word(value).encode()) != _lib.OK:
                    raise _fail()
        except BaseException:
            self.close()
            raise

    def close(self):
        if self.handle:
            _lib.lib.maskpos_config_free(self.handle)
            self.handle = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


# ---------------------------------------------------------------- progress and Ctrl-C

class _Progress:
    """The C progress callback: draws a bar, and asks the job to stop after Ctrl-C."""

    def __init__(self, label, show):
        self.label = label
        self.show = sys.stderr.isatty() if show is None else bool(show)
        self.stop = False
        self.bar = None
        self.last = 0.0
        self.drawn = False
        self.callback = _lib.PROGRESS(self._call)

    def _call(self, user, done, total):
        try:
            if self.show:
                self._draw(done, total)
        except Exception:  # a broken display must not break the run
            self.show = False
        return 1 if self.stop else 0

    def _draw(self, done, total):
        if self.bar is None and not self.drawn:
            try:
                from tqdm import tqdm
                self.bar = tqdm(total=total, desc=self.label, unit="seq", initial=done)
                return
            except ImportError:
                self.bar = False
        if self.bar:
            self.bar.update(done - self.bar.n)
            return
        now = time.monotonic()
        if done < total and now - self.last < 0.1:
            return
        self.last = now
        pct = 100.0 * done / total if total else 100.0
        sys.stderr.write("\r%s: %d/%d (%.0f%%)" % (self.label, done, total, pct))
        sys.stderr.flush()
        self.drawn = True

    def close(self):
        if self.bar:
            self.bar.close()
        elif self.drawn:
            sys.stderr.write("\n")
            sys.stderr.flush()

    def run(self, call):
        """Runs call(callback) with Ctrl-C turned into a stop request; KeyboardInterrupt afterwards."""
        previous = None
        if threading.current_thread() is threading.main_thread():
            def on_sigint(signum, frame):
                self.stop = True
            previous = signal.signal(signal.SIGINT, on_sigint)
        try:
            rc = call(self.callback)
        finally:
            if previous is not None:
                signal.signal(signal.SIGINT, previous)
            self.close()
        if rc == _lib.STOPPED and self.stop:
            raise KeyboardInterrupt("maskpos: %s stopped by Ctrl-C" % self.label)
        return rc


# ---------------------------------------------------------------- results

class Result:
    """One run: named arrays (numpy copies), statistics and meta.json.

    .arrays     dict name -> ndarray (the .npy files of the run folder, by file name)
    .scores     mean pre-softmax scores [L,S,S] (theory: the layer-2 map [n,n])
    .scores_se  their standard errors, .diagnorm the diagonal-mean normalised scores, .probs
    .stats      dict statistic -> ndarray over the maps (meta.json "stats"; null -> nan)
    .meta       meta.json as a dict
    """

    def __init__(self, handle):
        self._handle = handle
        lib = _lib.lib
        self.kind = lib.maskpos_result_kind(handle).decode()
        self.arrays = {}
        for i in range(lib.maskpos_result_narrays(handle)):
            name = lib.maskpos_result_array_name(handle, i).decode()
            dt, nd = ctypes.c_int(), ctypes.c_int()
            shape = (ctypes.c_int64 * _lib.MAX_DIMS)()
            ptr = lib.maskpos_result_array(handle, name.encode(), ctypes.byref(dt), ctypes.byref(nd), shape)
            if not ptr:
                raise _fail()
            dims = tuple(shape[d] for d in range(nd.value))
            dtype = np.dtype(_lib.DTYPES[dt.value])
            count = int(np.prod(dims)) if dims else 1
            buf = (ctypes.c_char * (count * dtype.itemsize)).from_address(ptr)
            self.arrays[name] = np.frombuffer(buf, dtype=dtype, count=count).reshape(dims).copy()
        text = lib.maskpos_result_meta(handle)
        if text is None:
            raise _fail()
        self.meta = json.loads(text.decode())
        self.stats = _stats_columns(self.meta.get("stats"))

    def _get(self, *names):
        for n in names:
            if n in self.arrays:
                return self.arrays[n]
        return None

    @property
    def scores(self):
        return self._get("scores", "layer2_scores")

    @property
    def scores_se(self):
        return self._get("scores_se")

    @property
    def diagnorm(self):
        return self._get("scores_diagnorm")

    @property
    def probs(self):
        return self._get("probs")

    def save(self, folder, force=False):
        """Writes the run folder the command writes (same .npy bytes; meta.json last). A folder
        holding another run is refused unless force."""
        if _lib.lib.maskpos_result_save(self._handle, os.fsencode(folder), 1 if force else 0) != _lib.OK:
            raise _fail()

    def close(self):
        if self._handle:
            _lib.lib.maskpos_result_free(self._handle)
            self._handle = None

    def __del__(self):
        self.close()

    def __repr__(self):
        shapes = ", ".join("%s%s" % (k, list(v.shape)) for k, v in self.arrays.items())
        return "<maskpos.Result %s: %s>" % (self.kind, shapes)


def _stats_columns(rows):
    if not isinstance(rows, list) or not rows:
        return {}
    keys = []
    for row in rows:
        keys += [k for k in row if k not in keys]
    out = {}
    for k in keys:
        vals = [row.get(k) for row in rows]
        if all(isinstance(v, int) and not isinstance(v, bool) for v in vals):
            out[k] = np.array(vals, dtype=np.int64)
        else:
            out[k] = np.array([np.nan if v is None else v for v in vals], dtype=np.float64)
    return out


def _result(rc, out):
    if rc != _lib.OK:
        raise _fail()
    return Result(out)


# ---------------------------------------------------------------- jobs

def theory(alpha=0.0, n=3, layers=None):
    """The closed form (paper §3): .scores = S(2) [n,n]; with layers, .arrays["layer_scores"]
    [L,n,n] from the infinite-width recursion. meta["g"], meta["h"]."""
    with _Config("theory", {"alpha": alpha, "n": n, "layers": layers}) as c:
        out = ctypes.c_void_p()
        return _result(_lib.lib.maskpos_theory(c.handle, ctypes.byref(out)), out)


def simulate(batch=None, seq=None, dim=None, layers=None, alpha=None, norm=None, scale=None, rope=None,
             rope_theta=None, bidirectional=None, seed=None, threads=None, layer_form=None, residual=None,
             progress=None):
    """The parameter-free decoder by Monte Carlo (`maskpos simulate`, one alpha; same defaults).
    progress: None = a bar when stderr is a terminal, True/False = always/never."""
    settings = dict(batch=batch, seq=seq, dim=dim, layers=layers, alpha=alpha, norm=norm, scale=scale, rope=rope,
                    rope_theta=rope_theta, bidirectional=bidirectional, seed=seed, threads=threads,
                    layer_form=layer_form)
    if residual is not None:
        settings["residual"] = residual if isinstance(residual, str) else ("on" if residual else "off")
    with _Config("simulate", settings) as c:
        out = ctypes.c_void_p()
        p = _Progress("simulate", progress)
        rc = p.run(lambda cb: _lib.lib.maskpos_simulate(c.handle, cb, None, ctypes.byref(out)))
        return _result(rc, out)


class Model:
    """An open checkpoint (HF folder with config.json + safetensors, or a .gguf file)."""

    def __init__(self, path):
        self._handle = ctypes.c_void_p()
        self.path = os.fspath(path)
        if _lib.lib.maskpos_model_open(os.fsencode(self.path), ctypes.byref(self._handle)) != _lib.OK:
            self._handle = None
            raise _fail()
        layers, heads = ctypes.c_int(), ctypes.c_int()
        ctx, vocab = ctypes.c_int64(), ctypes.c_int64()
        _lib.lib.maskpos_model_info(self._handle, ctypes.byref(layers), ctypes.byref(heads), ctypes.byref(ctx),
                                    ctypes.byref(vocab))
        self.layers, self.heads, self.context, self.vocab = layers.value, heads.value, ctx.value, vocab.value

    def close(self):
        if self._handle:
            _lib.lib.maskpos_model_close(self._handle)
            self._handle = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        self.close()

    def __repr__(self):
        return "<maskpos.Model %s: %d layers, %d heads, context %d, vocab %d>" % (
            self.path, self.layers, self.heads, self.context, self.vocab)


def _layers_word(layers):
    if layers is None or isinstance(layers, str):
        return layers
    if isinstance(layers, int):
        return str(layers)
    return ",".join(str(int(x)) for x in layers)


def probe(model, tokens=None, text=None, data=None, layers=None, bidirectional=None, no_rope=None, per_head=None,
          n=None, seq=None, probs=None, recency=None, compute=None, threads=None, allow_long=None, max_mem_gib=None,
          tokenizer=None, field=None, whole=None, shuffle=None, seed=None, no_special=None, pack=None, progress=None):
    """`maskpos probe`: mean pre-softmax attention-score maps of a model over token sequences.

    model: a Model or a path. One source of tokens: tokens = int array [N, S] (a 1-D array is one
    sequence), text = a str or a list of str (documents, tokenized by the model's tokenizer as
    `--data`; needs seq), data = a path as `--data`, or a token file via data=None and
    tokens=<path>. layers: 1-based, e.g. [1, 2] or "1-4"."""
    own = not isinstance(model, Model)
    m = Model(model) if own else model
    tmp = None
    try:
        ids = None
        settings = dict(layers=_layers_word(layers), bidirectional=bidirectional, no_rope=no_rope, per_head=per_head,
                        n=n, seq=seq, probs=probs, recency=recency, compute=compute, threads=threads,
                        allow_long=allow_long, max_mem_gib=max_mem_gib, tokenizer=tokenizer, field=field,
                        whole=whole, shuffle=shuffle, seed=seed, no_special=no_special, pack=pack)
        sources = sum(x is not None for x in (tokens, text, data))
        if sources != 1:
            raise Error("probe: give exactly one of tokens=, text= or data=")
        if isinstance(tokens, (str, bytes, os.PathLike)):
            settings["tokens"] = os.fsdecode(tokens)
        elif tokens is not None:
            arr = np.asarray(tokens)
            if arr.ndim == 1:
                arr = arr[None, :]
            if arr.ndim != 2 or not np.issubdtype(arr.dtype, np.integer):
                raise Error("probe: tokens must be an integer array [N, S] (got %s %s)" % (arr.dtype, list(arr.shape)))
            if arr.size and (arr.min() < 0 or arr.max() > np.iinfo(np.int32).max):
                raise Error("probe: token ids must lie in [0, 2^31)")
            ids = np.ascontiguousarray(arr, dtype=np.int32)
        elif text is not None:
            docs = [text] if isinstance(text, str) else list(text)
            fd, tmp = tempfile.mkstemp(suffix=".jsonl", prefix="maskpos-text-")
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                for d in docs:
                    f.write(json.dumps({"text": d}) + "\n")
            settings["data"] = tmp
            settings["field"] = "text"
            if n is None:
                settings["n"] = len(docs)
        else:
            settings["data"] = os.fsdecode(data)
        with _Config("probe", settings) as c:
            out = ctypes.c_void_p()
            p = _Progress("probe", progress)
            ptr = ids.ctypes.data if ids is not None else None
            nrow, ncol = (ids.shape[0], ids.shape[1]) if ids is not None else (0, 0)
            rc = p.run(lambda cb: _lib.lib.maskpos_probe(m._handle, c.handle, ptr, nrow, ncol, cb, None,
                                                         ctypes.byref(out)))
            return _result(rc, out)
    finally:
        if tmp:
            os.unlink(tmp)
        if own:
            m.close()


def load(folder):
    """A finished run folder written by maskpos (simulate, theory, probe, ...): every .npy its
    meta.json lists, as a Result."""
    out = ctypes.c_void_p()
    return _result(_lib.lib.maskpos_load(os.fsencode(folder), ctypes.byref(out)), out)
