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

Every array of a result is an attribute (r.scores_heads, r.probs, r.recency_probability, ...).
Errors raise maskpos.Error: the command's message, naming Python's arguments. Long runs draw progress (tqdm when it is
installed, a plain line otherwise) and stop cleanly on Ctrl-C (KeyboardInterrupt afterwards).
Docs: docs/python.md. Tests: python/tests (run by tests/test_pyapi.c in `make test`).
"""
import ctypes as _ctypes
import json as _json
import os as _os
import re as _re
import signal as _signal
import sys as _sys
import tempfile as _tempfile
import threading as _threading
import time as _time

import numpy as _np

from . import _lib

__all__ = ["Error", "MaskposWarning", "Result", "Model", "theory", "simulate", "probe", "probe_options", "load", "tokenize",
           "detokenize", "logits", "generate", "plot", "view", "Accumulator", "model_scores", "hf", "library_path", "version",
           "__version__"]

library_path = _lib.path


def version():
    """The library's version ("0.1.0"; also maskpos.__version__)."""
    return _lib.lib.maskpos_version().decode()


__version__ = version()


class Error(Exception):
    """A failed call. str(e) is one line naming the argument and the problem in Python's terms:
    `layers=[7]: layer 7 does not exist (the model has 5)` (the command line says `--layers: ...`)."""


# a flag: "--" not inside a word ("models--org--name" of the HF cache is a name, not two flags)
_FLAG = _re.compile(r"(?<![\w-])--([a-z][a-z0-9]*(?:-[a-z0-9]+)*)")


def _pythonic(msg, given=None, texts=None):
    """The library's message (worded for the command line) in Python's terms: a leading
    `--key: ` becomes `key=<value given>: `, `--key 5` and `--key N` become `key=5`, `key=N`, other
    `--key-name` become `key_name`, and the temporary file of text= documents is called `texts`."""
    if texts:
        msg = msg.replace(texts, "texts")
    m = _FLAG.match(msg)
    if m and msg[m.end():m.end() + 2] == ": ":
        key = m.group(1).replace("-", "_")
        if given and given.get(key) is not None:
            msg = "%s=%r%s" % (key, given[key], msg[m.end():])
        else:
            msg = key + msg[m.end():]
    msg = _re.sub(_FLAG.pattern + r" ([A-Z]+|-?[0-9][0-9.e+-]*)\b",
                  lambda x: "%s=%s" % (x.group(1).replace("-", "_"), x.group(2)), msg)
    return _FLAG.sub(lambda x: x.group(1).replace("-", "_"), msg)


def _fail(given=None, texts=None):
    return Error(_pythonic(_lib.lib.maskpos_last_error().decode("utf-8", "replace"), given, texts))


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
    """The settings of one job; given: the caller's own arguments (for the error messages)."""

    def __init__(self, job, settings, given=None, texts=None):
        self.given, self.texts = given if given is not None else settings, texts
        self.handle = _lib.lib.maskpos_config_new(job.encode())
        if not self.handle:
            raise _fail()
        try:
            for key, value in settings.items():
                if value is None:
                    continue
                word = _word(value)
                if "\0" in word:  # (C would read the setting up to there: tokens='tok.npy\0x' read tok.npy)
                    raise _lib.nul_error(key, value)
                if _lib.lib.maskpos_config_set(self.handle, key.encode(), word.encode()) != _lib.OK:
                    raise self.error()
        except BaseException:
            self.close()
            raise

    def error(self):
        return _fail(self.given, self.texts)

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
        self.show = _sys.stderr.isatty() if show is None else bool(show)
        self.stop = False
        self.bar = None
        self.last = 0.0
        self.drawn = False
        self.callback = _lib.PROGRESS(self._call)

    def _call(self, user, done, total):
        try:
            if self.show:
                self._draw(done, total)
        except Exception as e:  # a broken display must not break the run, nor fail unseen
            self.show = False
            import warnings
            warnings.warn("maskpos %s: the progress display failed (%s: %s); the run goes on without it" % (
                self.label, type(e).__name__, e), RuntimeWarning)
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
        now = _time.monotonic()
        if done < total and now - self.last < 0.1:
            return
        self.last = now
        pct = 100.0 * done / total if total else 100.0
        _sys.stderr.write("\r%s: %d/%d (%.0f%%)" % (self.label, done, total, pct))
        _sys.stderr.flush()
        self.drawn = True

    def close(self):
        if self.bar:
            self.bar.close()
        elif self.drawn:
            _sys.stderr.write("\n")
            _sys.stderr.flush()

    def run(self, call):
        """Runs call(callback) with Ctrl-C turned into a stop request; KeyboardInterrupt afterwards."""
        previous = None
        if _threading.current_thread() is _threading.main_thread():
            def on_sigint(signum, frame):
                self.stop = True
            previous = _signal.signal(_signal.SIGINT, on_sigint)
        try:
            rc = call(self.callback)
        finally:
            if previous is not None:
                _signal.signal(_signal.SIGINT, previous)
            self.close()
        if rc == _lib.STOPPED and self.stop:
            raise KeyboardInterrupt("maskpos: %s stopped by Ctrl-C" % self.label)
        return rc


# ---------------------------------------------------------------- results

def _meta_array(value):
    """A meta.json value that is a number list (nested, rectangular) as an ndarray (null -> nan),
    else None."""
    if not isinstance(value, list) or not value:
        return None
    flat, stack = [], [value]
    while stack:
        v = stack.pop()
        if isinstance(v, list):
            stack.extend(v)
        elif v is None or (isinstance(v, (int, float)) and not isinstance(v, bool)):
            flat.append(v)
        else:
            return None
    try:
        a = _np.array([[_np.nan if x is None else x for x in row] if isinstance(row, list) else row for row in value]
                      if all(isinstance(r, list) and all(not isinstance(x, list) for x in r) for r in value)
                      else _nan_fill(value), dtype=_np.float64)
    except (ValueError, TypeError):  # ragged
        return None
    if a.dtype == object:
        return None
    if all(isinstance(x, int) for x in flat):
        a = a.astype(_np.int64)
    return a


def _nan_fill(v):
    return [_nan_fill(x) for x in v] if isinstance(v, list) else (_np.nan if v is None else v)


class Result:
    """One run (theory, simulate, probe, or a folder read by maskpos.load).

    Every array is an attribute: r.scores, r.scores_se, r.scores_diagnorm (also r.diagnorm),
    r.probs, r.scores_heads, r.layer_scores, ... (the .npy files of the run folder, by file name;
    r.arrays holds them as a dict), and so is every numeric series meta.json carries, as an
    ndarray (null -> nan): r.recency_probability [L, ...], r.recency_probability_se,
    r.recency_probability_heads, r.residue_block_z, r.residue_by_position, ...
    (r.meta_arrays holds them; r.meta keeps meta.json as it is). dir(r) lists them all.

    .stats   dict statistic -> ndarray over the maps (meta.json "stats": nri, residue_z_rms, ...)
    .meta    meta.json as a dict; meta["command"] is the `maskpos` command line of the same run
    .kind    "theory", "simulate", "probe", ...
    .save(folder), .plot(path, ...)
    """

    def __init__(self, handle):
        self._handle = handle
        self.folder = None  # the run folder it was read from (maskpos.load), else None
        lib = _lib.lib
        self.kind = lib.maskpos_result_kind(handle).decode()
        self.arrays = {}
        for i in range(lib.maskpos_result_narrays(handle)):
            name = lib.maskpos_result_array_name(handle, i).decode()
            dt, nd = _ctypes.c_int(), _ctypes.c_int()
            shape = (_ctypes.c_int64 * _lib.MAX_DIMS)()
            ptr = lib.maskpos_result_array(handle, name.encode(), _ctypes.byref(dt), _ctypes.byref(nd), shape)
            if not ptr:
                raise _fail()
            dims = tuple(shape[d] for d in range(nd.value))
            dtype = _np.dtype(_lib.DTYPES[dt.value])
            count = int(_np.prod(dims)) if dims else 1
            buf = (_ctypes.c_char * (count * dtype.itemsize)).from_address(ptr)
            self.arrays[name] = _np.frombuffer(buf, dtype=dtype, count=count).reshape(dims).copy()
        text = lib.maskpos_result_meta(handle)
        if text is None:
            raise _fail()
        self.meta = _json.loads(text.decode())
        self.stats = _stats_columns(self.meta.get("stats"))
        self.meta_arrays = {}
        for k, v in self.meta.items():
            if k not in ("command", "stats") and k not in self.arrays:
                a = _meta_array(v)
                if a is not None:
                    self.meta_arrays[k] = a

    def __getattr__(self, name):
        # only called for names the instance and class lack: the arrays, then meta's series
        d = self.__dict__
        if name in d.get("arrays", {}):
            return d["arrays"][name]
        if name in d.get("meta_arrays", {}):
            return d["meta_arrays"][name]
        if name.startswith("__") or "arrays" not in d:
            raise AttributeError(name)
        raise AttributeError("this %s result has no %r (arrays: %s; from meta.json: %s)" % (
            d.get("kind", "?"), name, ", ".join(d["arrays"]) or "none", ", ".join(d["meta_arrays"]) or "none"))

    def __dir__(self):
        return sorted(set(object.__dir__(self)) | set(self.arrays) | set(self.meta_arrays))

    def _get(self, *names):
        for n in names:
            if n in self.arrays:
                return self.arrays[n]
        return None

    @property
    def scores(self):
        """Mean pre-softmax scores [L,S,S] (theory: the layer-2 map [n,n]); None when absent."""
        return self._get("scores", "layer2_scores")

    @property
    def scores_se(self):
        """Standard errors of .scores [L,S,S]; None when absent."""
        return self._get("scores_se")

    @property
    def diagnorm(self):
        """The diagonal-mean normalised scores [L,S,S] (scores_diagnorm); None when absent."""
        return self._get("scores_diagnorm")

    @property
    def resolved(self):
        """Per layer: is the residue resolved at this N (block z above its noise level; simulations:
        rms/noise above 1.3; docs/metrics.md) — bool ndarray [L], None when the run does not say."""
        v = self.meta.get("residue_resolved")
        return _np.array(v, dtype=bool) if isinstance(v, list) else None

    @property
    def probs(self):
        """Mean post-softmax attention probabilities [L,S,S]; None unless the run computed them."""
        return self._get("probs")

    def save(self, folder, force=False):
        """Writes the run folder the command writes (same .npy bytes; meta.json last). A folder
        holding another run is refused unless force."""
        if _lib.lib.maskpos_result_save(self._handle, _os.fsencode(folder), 1 if force else 0) != _lib.OK:
            raise _fail(dict(folder=_os.fspath(folder), force=force))

    def _title(self):
        """The figure title of this run: its model (or kind), the mask, N and S."""
        m = self.meta
        name = m.get("model")
        name = _os.path.basename(str(name).rstrip("/")) if name else self.kind
        parts = [name]
        if m.get("causal") is False:
            parts.append("bidirectional")
        n = m.get("n", m.get("batch"))
        if isinstance(n, int):
            parts.append("N = %d" % n)
        if isinstance(m.get("seq"), int):
            parts.append("S = %d" % m["seq"])
        return ", ".join(parts)

    def plot(self, path=None, array=None, layers=None, preset=None, cmap=None, diagnorm=False, title=None,
             force=False, format=None):
        """Draws the run's maps as a figure with the library's plot code (`maskpos plot`), one panel
        per layer titled with its 1-based number and, under it, whether that layer's residue is
        resolved at this N (a residue panel that is not is washed out and framed in red).

        Default (array=None): the residue, as `maskpos probe --plot` draws it: the mean scores
        diagonal-mean normalised, vlag centred on 0, limits +-max(|1st|, |99th| percentile) per panel
        (preset "fig5"), titled with the run. array= names another array (scores_diagnorm and
        other residues get the same look unless preset= or cmap= say otherwise). path: a file name
        (.png, .pdf, .svg), a binary file object (format= "png", "pdf" or "svg"; default its name's
        extension, else png), or None: the PNG's bytes. layers: 1-based panels (default all).
        Returns path (or the bytes)."""
        if array is None:
            array = "scores" if "scores" in self.arrays else "layer2_scores" if "layer2_scores" in self.arrays else None
            if array == "scores" and preset is None and cmap is None and not diagnorm:
                preset = "fig5"
        if array not in self.arrays:
            raise Error("array=%r: this %s result has no such array (it has %s)" % (
                array, self.kind, ", ".join(self.arrays)))
        residue = array.startswith("scores_diagnorm")
        if residue and preset is None and cmap is None:
            preset = "fig5"  # the signed residue: vlag centred on 0 (re-normalising a residue leaves it)
        if title is None and self.kind != "theory":
            title = self._title()
        maps = self.arrays[array]
        meta = _json.dumps(self.meta) if maps.ndim == 3 and array.startswith("scores") else None
        return _plot_to(maps, path, layers, preset, cmap, diagnorm, title, force, format, meta, residue)

    def _repr_png_(self):
        """The figure plot() draws, for notebooks (None when the run has no map to draw)."""
        try:
            return self.plot()
        except Error:
            return None

    def table(self):
        """Per-layer statistics as a tidy pandas DataFrame, one row per layer: the meta.json "stats"
        columns, block z, its noise level and threshold, resolved, the N needed and the
        noise-corrected NRI (where the run has them). Needs pandas (Debian: python3-pandas)."""
        try:
            import pandas as pd
        except ImportError:
            raise Error("table() needs pandas (Debian: apt install python3-pandas); the same numbers are in r.stats and "
                        "r.meta")
        return pd.DataFrame(self._rows())

    to_pandas = table

    def _rows(self):
        """[{column: value}] per layer: stats and significance (the table and _repr_html_)."""
        rows = self.meta.get("stats") if isinstance(self.meta.get("stats"), list) else []
        m = self.meta
        noise = m.get("residue_noise") or {}
        series = {"block_z": m.get("residue_block_z"), "block_z_noise": noise.get("block_z"),
                  "z_needed": noise.get("block_z_threshold"), "resolved": m.get("residue_resolved"),
                  "n_needed": m.get("residue_n_needed"), "nri_corrected": m.get("nri_corrected"),
                  "map_noise_share": m.get("map_noise_share")}
        out = []
        for k, row in enumerate(rows):
            r = {key: (_np.nan if v is None else v) for key, v in row.items()}
            for key, v in series.items():
                if isinstance(v, list) and k < len(v):
                    r[key] = _np.nan if v[k] is None else v[k]
            if isinstance(m.get("n", m.get("batch")), int):
                r["n"] = m.get("n", m.get("batch"))
            out.append(r)
        return out

    def _repr_html_(self):
        """A notebook's view of the run: what it is, each layer's statistics and whether its residue is
        resolved (unresolved in red), warnings, and the figure."""
        import base64
        import html
        rows = self._rows()
        cols = [c for c in ("layer", "nri", "nri_corrected", "residue_min", "residue_max", "residue_z_rms", "block_z",
                            "z_needed", "resolved", "n_needed") if any(c in r for r in rows)]
        h = ["<div class=\"maskpos-result\"><b>%s</b>" % html.escape(repr(self))]
        if self._title():
            h.append("<div>%s</div>" % html.escape(self._title()))
        for w in ([self.meta["warning"]] if isinstance(self.meta.get("warning"), str) else []) + list(
                self.meta.get("warnings") or []):
            h.append("<div style=\"color:#c41414\">warning: %s</div>" % html.escape(str(w)))
        if rows:
            h.append("<table><tr>%s</tr>" % "".join("<th>%s</th>" % html.escape(c) for c in cols))
            for r in rows:
                bad = r.get("resolved") is False
                cells = []
                for c in cols:
                    v = r.get(c, "")
                    t = ("yes" if v else "NO") if isinstance(v, bool) else ("%.4g" % v if isinstance(v, float) else str(v))
                    cells.append("<td>%s</td>" % html.escape(t))
                h.append("<tr%s>%s</tr>" % (" style=\"color:#c41414\"" if bad else "", "".join(cells)))
            h.append("</table>")
        png = self._repr_png_()
        if png:
            h.append("<img src=\"data:image/png;base64,%s\"/>" % base64.b64encode(png).decode())
        h.append("</div>")
        return "\n".join(h)

    def to_xarray(self):
        """The run's arrays as an xarray.Dataset with named dimensions (layer, head, query, key; the
        layer and head coordinates 1-based as the model numbers them, positions from 0) and the
        per-layer statistics as variables over layer; meta.json in .attrs["meta"] (as JSON). Needs
        xarray (Debian: python3-xarray)."""
        try:
            import xarray as xr
        except ImportError:
            raise Error("to_xarray() needs xarray (Debian: apt install python3-xarray); the arrays are in r.arrays")
        m = self.meta
        lay = m.get("layers")
        data = {}
        for name, a in self.arrays.items():
            if a.ndim == 3 and a.shape[1] == a.shape[2]:
                data[name] = (("layer", "query", "key"), a)
            elif a.ndim == 4 and a.shape[2] == a.shape[3]:
                data[name] = (("layer", "head", "query", "key"), a)
            elif a.ndim == 2 and a.shape[0] == a.shape[1]:
                data[name] = (("query", "key"), a)
        L = next((v[1].shape[0] for v in data.values() if v[0][0] == "layer"), None)
        coords = {}
        if L is not None:
            coords["layer"] = list(lay) if isinstance(lay, list) and len(lay) == L else list(range(1, L + 1))
            rows = self._rows()
            if len(rows) == L:
                for c in rows[0]:
                    if c != "layer" and all(isinstance(r.get(c), (int, float, bool)) for r in rows):
                        data[c] = (("layer",), _np.array([r[c] for r in rows]))
        H = next((v[1].shape[1] for v in data.values() if len(v[0]) == 4), None)
        if H is not None:
            coords["head"] = list(range(1, H + 1))
        S = next((v[1].shape[-1] for v in data.values() if "key" in v[0]), None)
        if S is not None:
            coords["query"] = coords["key"] = list(range(S))
        return xr.Dataset(data, coords=coords, attrs={"kind": self.kind, "meta": _json.dumps(m)})

    def view(self, path, title=None, force=False):
        """Writes the page `maskpos view` writes for this run (one self-contained HTML file: layer,
        head and view selectors, hover, zoom, profiles), opening on the residue; returns path. A
        run not read from a folder is saved to a temporary one first (removed afterwards)."""
        return view([self], path, title=title, force=force)

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
            out[k] = _np.array(vals, dtype=_np.int64)
        else:
            out[k] = _np.array([_np.nan if v is None else v for v in vals], dtype=_np.float64)
    return out


def _result(rc, out, config=None):
    if rc != _lib.OK:
        raise config.error() if config is not None else _fail()
    return Result(out)


# ---------------------------------------------------------------- jobs

def theory(alpha=0.0, n=3, layers=None):
    """The closed form of the parameter-free causal decoder (paper §3, `maskpos theory`).

    Returns a Result: .scores = S(2), the layer-2 score map [n, n] (NaN above the diagonal);
    with layers=L, .layer_scores [L, n, n] from the infinite-width recursion; .meta["g"],
    .meta["h"] (also .g, .h as arrays)."""
    given = dict(alpha=alpha, n=n, layers=layers)
    with _Config("theory", given) as c:
        out = _ctypes.c_void_p()
        return _result(_lib.lib.maskpos_theory(c.handle, _ctypes.byref(out)), out, c)


def simulate(batch=None, seq=None, dim=None, layers=None, alpha=None, norm=None, scale=None, rope=None,
             rope_theta=None, bidirectional=None, seed=None, threads=None, layer_form=None, residual=None,
             variance=None, progress=None):
    """The parameter-free decoder by Monte Carlo (`maskpos simulate`, one alpha; same defaults).

    Returns a Result with .scores (mean pre-softmax scores), .scores_se (their standard errors),
    .probs (mean attention probabilities) and .diagnorm (diagonal-mean normalised scores), each
    [L, S, S] (row = query i, column = key j, NaN where the mask hides the pair), and .stats
    (nri, residue_z_rms, ... per layer). variance=True adds .var_attn, .var_closed and their standard
    errors .var_attn_se, .var_closed_se, .var_gap_se [L, S] (the attention output's variance by
    position and the closed form sigma^2 sum_j a_ij^2; docs/metrics.md). progress: None = a bar when
    stderr is a terminal, True/False = always/never."""
    settings = dict(batch=batch, seq=seq, dim=dim, layers=layers, alpha=alpha, norm=norm, scale=scale, rope=rope,
                    rope_theta=rope_theta, bidirectional=bidirectional, seed=seed, threads=threads,
                    layer_form=layer_form, variance=variance)
    given = dict(settings, residual=residual)
    if residual is not None:
        settings["residual"] = residual if isinstance(residual, str) else ("on" if residual else "off")
    with _Config("simulate", settings, given) as c:
        out = _ctypes.c_void_p()
        p = _Progress("simulate", progress)
        rc = p.run(lambda cb: _lib.lib.maskpos_simulate(c.handle, cb, None, _ctypes.byref(out)))
        return _result(rc, out, c)


class Model:
    """An open checkpoint: an HF folder (config.json + safetensors) or a .gguf file.

    .layers, .heads, .context (trained positions; 0 when not stated), .vocab, .path.
    close() or `with maskpos.Model(path) as m:`."""

    def __init__(self, path):
        self._handle = _ctypes.c_void_p()
        self.path = _os.fspath(path)
        if _lib.lib.maskpos_model_open(_os.fsencode(self.path), _ctypes.byref(self._handle)) != _lib.OK:
            self._handle = None
            raise _fail()
        layers, heads = _ctypes.c_int(), _ctypes.c_int()
        ctx, vocab = _ctypes.c_int64(), _ctypes.c_int64()
        _lib.lib.maskpos_model_info(self._handle, _ctypes.byref(layers), _ctypes.byref(heads), _ctypes.byref(ctx),
                                    _ctypes.byref(vocab))
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
    out = []
    for x in [layers] if isinstance(layers, (int, _np.integer)) else list(layers):
        try:  # (int(1.5) probed layer 1)
            out.append(str(_lib.whole(x, "layer", 1)))
        except Error:
            raise Error("layers=%r: %r is not a layer number (a whole number from 1)" % (layers, x)) from None
    return ",".join(out)


# The probe's settings by keyword (the library's option table, "-" as "_").
_PROBE_SETTINGS = frozenset(name.replace("-", "_") for name, _, _ in _lib.probe_options())


def probe_options():
    """The settings of probe() from the library's table: {keyword: (kind, help)}, kind "bool",
    "int", "number" or "string", help the text of `maskpos probe --help`."""
    return {name.replace("-", "_"): (kind, text) for name, kind, text in _lib.probe_options()}


def probe(model, tokens=None, text=None, data=None, layers=None, bidirectional=None, no_rope=None, rope_keep_high=None,
          per_head=None,
          n=None, seq=None, probs=None, recency=None, stats=None, compute=None, threads=None, allow_long=None, max_mem_gib=None,
          tokenizer=None, field=None, whole=None, shuffle=None, seed=None, no_special=None, pack=None, heads_f64=None,
          device=None, pos_dim=None, pos_stride=None, pos_ridge=None, resid_stride=None, progress=None):
    """Mean pre-softmax attention-score maps of a model over token sequences (`maskpos probe`).

    model: a Model or a path. One source of tokens:
      tokens = an int array [N, S] (a 1-D array is one sequence) or the path of a token file;
      text   = a str or a list of str (documents, tokenized by the model's own tokenizer; give seq);
      data   = a path of documents (.txt, .jsonl, ...; give n and seq).
    n, seq: use the first n sequences and their first seq tokens (more than there are is an error).
    layers: 1-based, e.g. [1, 2] or "1-4" (default: those `maskpos probe` picks).

    Returns a Result with, each [L, S, S] (row = query i, column = key j, NaN above the diagonal):
      .scores      mean pre-softmax score of every (query, key) pair over the N sequences,
                   averaged over heads;
      .scores_se   its standard error over the sequences;
      .diagnorm    the scores divided by their diagonal's mean (the figures' residue maps);
    and .stats (per layer: nri, residue_min/max/rms, residue_z_rms, ...), .meta (meta.json).
    per_head=True adds .scores_heads [L, H, S, S] (and .scores_heads_se where the library writes it).
    probs=True adds .probs [L, S, S], the mean post-softmax attention probabilities.
    recency=True adds the recency analysis of the probabilities: .recency_probability [L] (the
      chance that a query's largest attention goes to the nearest key, per layer), its standard
      error .recency_probability_se, per head .recency_probability_heads [L, H] (+ _se), and
      .recency_probability_mean_map (arrays from meta.json; docs/recency.md).
    stats: more statistics by name, a list or "a,b" (`maskpos probe --stats`; probs and recency are two
      of them): each adds the arrays its meta.json "files" lists (maskpos.probe_options()["stats"]).
    stats="position" adds .pos_probe [L, 11]: a ridge probe of the position from the residual stream
      (held-out R2, mean absolute error in positions and their chance levels; docs/outputs.md), set by
      pos_dim (features, default 256; 0 the whole width), pos_stride (every k-th position) and
      pos_ridge (the relative ridge, default 1e-3).
    resid_stride=K: stats "variance" (its residual-stream part) and "position" read the residual
      stream of one sequence in K (default: every sequence below 256, else one in 8: the deepest
      probed layer's o_proj and MLP run for those only); .meta["resid_sequences"] says how many.
    heads_f64=True (with per_head): the per-head maps as float64 (default float32; summed in double
      either way). device: the forward pass's backend ("cpu", the default).
    bidirectional=True / no_rope=True: the counterfactuals without the causal mask / without RoPE.
    rope_keep_high=P: the p-RoPE counterfactual, only the highest-frequency floor(P * R/2) frequency
      pairs rotate (docs/probe.md). stats="freq" adds the RoPE frequency usage per layer, head and
      pair: .freq_q_norm, .freq_k_norm, .freq_contrib [L, H, P] (+ _se), .freq_rest [L, H, 3],
      .freq_angle [L, P], .freq_base [L] (docs/metrics.md, "RoPE frequency usage").
    Every other keyword is the `maskpos probe` flag of that name (help: maskpos.probe_options()).
    Errors raise maskpos.Error naming the argument (`layers=[7]: layer 7 does not exist ...`)."""
    # the library's settings, in the order of this signature (the command line recorded in
    # meta.json follows it); tests/test_options.py checks that they are exactly the table's rows
    args = dict(locals())
    given = {k: args[k] for k in args if k in _PROBE_SETTINGS}
    if not isinstance(tokens, (str, bytes, _os.PathLike)):
        given["tokens"] = None
    own = not isinstance(model, Model)
    m = Model(model) if own else model
    tmp = None
    try:
        ids = None
        settings = {k: args[k] for k in args if k in _PROBE_SETTINGS and k not in ("tokens", "data")}
        settings["layers"] = _layers_word(layers)
        sources = sum(x is not None for x in (tokens, text, data))
        if sources != 1:
            raise Error("probe: give exactly one of tokens=, text= or data=")
        if isinstance(tokens, (str, bytes, _os.PathLike)):
            settings["tokens"] = _os.fsdecode(tokens)
        elif tokens is not None:
            arr = _np.asarray(tokens)
            if arr.ndim == 1:
                arr = arr[None, :]
            if arr.ndim != 2 or not _np.issubdtype(arr.dtype, _np.integer):
                raise Error("tokens: an integer array [N, S] is needed (got %s %s)" % (arr.dtype, list(arr.shape)))
            if arr.size and (arr.min() < 0 or arr.max() > _np.iinfo(_np.int32).max):
                raise Error("tokens: token ids must lie in [0, 2^31)")
            ids = _np.ascontiguousarray(arr, dtype=_np.int32)
        elif text is not None:
            docs = [text] if isinstance(text, str) else list(text)
            if seq is None:
                raise Error("text: give seq= (the tokens per sequence; documents shorter than that are skipped)")
            fd, tmp = _tempfile.mkstemp(suffix=".jsonl", prefix="maskpos-text-")
            with _os.fdopen(fd, "w", encoding="utf-8") as f:
                for d in docs:
                    f.write(_json.dumps({"text": d}) + "\n")
            settings["data"] = tmp
            settings["field"] = "text"
            if n is None:
                settings["n"] = len(docs)
        else:
            if n is None or seq is None:
                raise Error("data: give n= and seq= (how many sequences of how many tokens)")
            settings["data"] = _os.fsdecode(data)
        with _Config("probe", settings, given, tmp) as c:
            out = _ctypes.c_void_p()
            p = _Progress("probe", progress)
            ptr = ids.ctypes.data if ids is not None else None
            nrow, ncol = (ids.shape[0], ids.shape[1]) if ids is not None else (0, 0)
            rc = p.run(lambda cb: _lib.lib.maskpos_probe(m._handle, c.handle, ptr, nrow, ncol, cb, None,
                                                         _ctypes.byref(out)))
            return _result(rc, out, c)
    finally:
        if tmp:
            _os.unlink(tmp)
        if own:
            m.close()


def load(folder):
    """A finished run folder written by maskpos (simulate, theory, probe, ...) as a Result: every
    .npy its meta.json lists (files inside the folder only) and the meta."""
    out = _ctypes.c_void_p()
    if _lib.lib.maskpos_load(_os.fsencode(folder), _ctypes.byref(out)) != _lib.OK:
        raise _fail()
    r = Result(out)
    r.folder = _os.fspath(folder)
    return r


# ---------------------------------------------------------------- tokens, logits, samples, figures

def _path_of(model):
    return model.path if isinstance(model, Model) else _os.fspath(model)


def _ids_1d(tokens, what="tokens"):
    arr = _np.asarray(tokens)
    if arr.ndim != 1 or (arr.size and not _np.issubdtype(arr.dtype, _np.integer)):
        raise Error("%s: a 1-D integer array of token ids is needed (got %s %s)" % (what, arr.dtype, list(arr.shape)))
    if arr.size and (arr.min() < 0 or arr.max() > _np.iinfo(_np.int32).max):
        raise Error("%s: token ids must lie in [0, 2^31)" % what)
    return _np.ascontiguousarray(arr, dtype=_np.int32)


def tokenize(model, text, special=True):
    """The token ids of text (str) by the model's own tokenizer (`maskpos tokenize --model`).

    model: a Model, a model folder with tokenizer.json, a tokenizer.json or a .gguf.
    special: add BOS/EOS as the tokenizer's config says (HF add_special_tokens).
    Returns an int32 array [T]."""
    if not isinstance(text, (str, bytes, bytearray, memoryview)):  # (bytes(5) is five NUL bytes)
        raise Error("text: a str (or bytes) is needed, not %s" % type(text).__name__)
    data = text.encode("utf-8", "replace") if isinstance(text, str) else bytes(text)
    ptr, n = _ctypes.POINTER(_ctypes.c_int32)(), _ctypes.c_int64()
    if _lib.lib.maskpos_tokenize(_os.fsencode(_path_of(model)), data, len(data), 1 if special else 0,
                                 _ctypes.byref(ptr), _ctypes.byref(n)) != _lib.OK:
        raise _fail()
    try:
        return _np.ctypeslib.as_array(ptr, shape=(n.value,)).copy() if n.value else _np.zeros(0, _np.int32)
    finally:
        _lib.lib.maskpos_free(ptr)


def detokenize(model, ids, skip_special=False):
    """The text of token ids [T] (`maskpos tokenize --decode`); skip_special leaves out special
    tokens (HF skip_special_tokens). Returns a str (invalid UTF-8 replaced)."""
    a = _ids_1d(ids, "ids")
    ptr, n = _ctypes.c_void_p(), _ctypes.c_int64()
    if _lib.lib.maskpos_detokenize(_os.fsencode(_path_of(model)), a.ctypes.data if a.size else None, a.size,
                                   1 if skip_special else 0, _ctypes.byref(ptr), _ctypes.byref(n)) != _lib.OK:
        raise _fail()
    try:
        return _ctypes.string_at(ptr, n.value).decode("utf-8", "replace")
    finally:
        _lib.lib.maskpos_free(ptr)


def logits(model, tokens, log_probs=True, compute=None):
    """The whole model on one sequence of token ids [T] (`maskpos logits`).

    Returns a float64 array [T, V]: row t is the distribution of the token after position t, as
    log-probabilities (log_probs=True: the bits `maskpos logits --out` writes) or raw logits.
    compute: "f32" (default) or "bf16"."""
    own = not isinstance(model, Model)
    m = Model(model) if own else model
    try:
        a = _ids_1d(tokens)
        if not a.size:
            raise Error("tokens: no token ids")
        out = _np.empty((a.size, m.vocab), dtype=_np.float64)
        if _lib.lib.maskpos_logits(m._handle, a.ctypes.data, a.size, compute.encode() if compute else None,
                                   1 if log_probs else 0, out.ctypes.data) != _lib.OK:
            raise _fail(dict(compute=compute))
        return out
    finally:
        if own:
            m.close()


def generate(model, n=1, length=64, temperature=1.0, greedy=False, top_k=0, top_p=1.0, seed=0, prompt=None,
             compute=None, threads=0):
    """Samples n sequences of exactly `length` token ids from the model (`maskpos generate`).

    Each starts with prompt (a str, tokenized with BOS as the model's tokenizer says, or token
    ids; default: the model's BOS) and is extended from the model's next-token distribution at
    the temperature (greedy=True or 0: the most likely id), optionally cut to top_k ids / the
    top_p nucleus. Deterministic for a seed whatever the threads.
    Returns an int32 array [n, length] (the ids `maskpos generate --out` writes); decode a row
    with maskpos.detokenize(model, row)."""
    given = dict(n=n, len=length, temperature=temperature, top_k=top_k, top_p=top_p, seed=seed, compute=compute,
                 threads=threads)
    if greedy:
        if temperature not in (0, 1.0):
            raise Error("greedy=True and temperature=%r contradict each other" % temperature)
        temperature = 0.0
    own = not isinstance(model, Model)
    m = Model(model) if own else model
    try:
        p = None
        if isinstance(prompt, str):
            p = tokenize(m, prompt)
            if not p.size:
                raise Error("prompt=%r gives no token" % prompt)
        elif prompt is not None:
            p = _ids_1d(prompt, "prompt")
            if not p.size:
                raise Error("prompt=%r: no token ids (None: start from the model's BOS)" % (prompt,))
        n, length = _lib.whole(n, "n", -2 ** 63, 2 ** 63 - 1), _lib.whole(length, "length")  # (before the array)
        ids = _np.empty((n, length) if n > 0 and length > 0 else (0,), dtype=_np.int32)
        nll = _ctypes.c_double()
        if _lib.lib.maskpos_generate(m._handle, int(n), int(length), float(temperature), int(top_k), float(top_p),
                                     int(seed), p.ctypes.data if p is not None else None,
                                     int(p.size) if p is not None else 0, compute.encode() if compute else None,
                                     int(threads), ids.ctypes.data, _ctypes.byref(nll)) != _lib.OK:
            raise _fail(given)
        return ids
    finally:
        if own:
            m.close()


def plot(maps, path=None, layers=None, preset=None, cmap=None, diagnorm=False, title=None, force=False, format=None):
    """Draws score maps as a figure with the library's plot code (`maskpos plot`).

    maps: [S, S] (one panel) or [L, S, S] (one panel per layer, titled "Layer 1", "Layer 2", ...:
    1-based, as every figure of maskpos); NaN cells are left blank. path: .png, .pdf or .svg, a
    binary file object (format= "png", "pdf", "svg"; default its name's extension, else png), or
    None (the PNG's bytes are returned). layers: 1-based numbers of the layers to draw (default
    all). preset: "fig1".."fig5" (the paper's figures, as `maskpos plot --preset`); cmap:
    "rocket", "vlag", "RdBu" (+ "_r"); diagnorm: subtract each diagonal's mean first (the
    residue); title: the figure's title. An existing file is replaced only with force=True.
    Returns path (or the bytes). A run's maps with their significance: Result.plot."""
    return _plot_to(maps, path, layers, preset, cmap, diagnorm, title, force, format, None, False)


def _plot_to(maps, path, layers, preset, cmap, diagnorm, title, force, format, meta, residue):
    """plot() into a path, a file object or bytes; meta: the run's meta.json text (each panel's
    significance) or None."""
    if path is None or hasattr(path, "write"):
        name = getattr(path, "name", None)
        fmt = (format or (_os.path.splitext(name)[1][1:] if isinstance(name, str) else "") or "png").lower()
        if fmt not in ("png", "pdf", "svg"):
            raise Error("format=%r: png, pdf or svg" % fmt)
        d = _tempfile.mkdtemp(prefix="maskpos-plot-")
        tmp = _os.path.join(d, "figure." + fmt)
        try:
            _plot_file(maps, tmp, layers, preset, cmap, diagnorm, title, True, meta, residue)
            with open(tmp, "rb") as f:
                data = f.read()
        finally:
            if _os.path.exists(tmp):
                _os.unlink(tmp)
            _os.rmdir(d)
        if path is None:
            return data
        path.write(data)
        return path
    return _plot_file(maps, path, layers, preset, cmap, diagnorm, title, force, meta, residue)


def _plot_file(maps, path, layers, preset, cmap, diagnorm, title, force, meta, residue):
    a = _np.asarray(maps, dtype=_np.float64)
    if a.ndim == 2:
        a = a[None]
    if a.ndim != 3 or a.shape[1] != a.shape[2] or not a.size:
        raise Error("maps: [S, S] or [L, S, S] square maps are needed (got shape %s)" % list(_np.shape(maps)))
    a = _np.ascontiguousarray(a)
    sel = None
    if layers is not None:
        sel = _np.ascontiguousarray([_lib.whole(x, "layers") for x in ([layers] if isinstance(layers, int) else list(layers))],
                                    dtype=_np.intc)
    enc = lambda v: v.encode() if v is not None else None  # noqa: E731
    rc = _lib.lib.maskpos_plot_run(_os.fsencode(path), a.ctypes.data, a.shape[0], a.shape[1],
                                   sel.ctypes.data if sel is not None and sel.size else None,
                                   int(sel.size) if sel is not None else 0, enc(preset), enc(cmap), 1 if diagnorm else 0,
                                   enc(title), 1 if force else 0, enc(meta), 1 if residue else 0)
    if rc != _lib.OK:
        raise _fail(dict(layers=layers, preset=preset, cmap=cmap, title=title))
    return path


def view(runs, path, labels=None, title=None, force=False):
    """Writes the page `maskpos view` writes (one self-contained HTML file) for up to 8 runs: run
    folders (str or path) or Results (saved to temporary folders first, removed afterwards);
    labels: one per run (default the folder names). It opens on the residue, says per layer whether
    it is resolved at this N, and compares the runs side by side. An existing file is replaced only
    with force=True. Returns path."""
    import shutil
    runs = list(runs) if isinstance(runs, (list, tuple)) else [runs]
    tmp, dirs = [], []
    try:
        for k, r in enumerate(runs):
            if isinstance(r, Result):
                if getattr(r, "folder", None):
                    dirs.append(r.folder)
                    continue
                d = _tempfile.mkdtemp(prefix="maskpos-view-")
                tmp.append(d)
                r.save(_os.path.join(d, "run%d" % (k + 1)))
                dirs.append(_os.path.join(d, "run%d" % (k + 1)))
            else:
                dirs.append(_os.fspath(r))
        if labels is None and any(isinstance(r, Result) and not getattr(r, "folder", None) for r in runs):
            labels = [r._title() if isinstance(r, Result) else _os.path.basename(_os.fspath(r).rstrip("/"))
                      for r in runs]
        cd = (_ctypes.c_char_p * len(dirs))(*[_os.fsencode(d) for d in dirs])
        cl = (_ctypes.c_char_p * len(dirs))(*[str(x).encode() for x in labels]) if labels is not None else None
        if labels is not None and len(labels) != len(dirs):
            raise Error("labels: %d for %d runs" % (len(labels), len(dirs)))
        if _lib.lib.maskpos_view(_os.fsencode(path), cd, cl, len(dirs), title.encode() if title else None,
                                 1 if force else 0) != _lib.OK:
            raise _fail(dict(title=title))
    finally:
        for d in tmp:
            shutil.rmtree(d, ignore_errors=True)
    return path


# ---------------------------------------------------------------- scores from elsewhere (issue 26)
from ._accumulator import Accumulator, MaskposWarning, model_scores  # noqa: E402
from . import hf  # noqa: E402  (imports neither torch nor transformers)
