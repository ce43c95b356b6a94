"""_lib.py — finds libmaskpos.so and declares the C API (include/maskpos.h) to ctypes.

Search order: $MASKPOS_LIB (a path to the library), the folder `make install` recorded in
_libdir.py, a copy beside this package, the build tree this package sits in (python/maskpos ->
build/libmaskpos.so), then the system's search path (libmaskpos.so.0).

Every value that crosses into C is checked here first (issue 40): ctypes cuts a string at its
first NUL byte (save('a\\0b') wrote folder 'a') and wraps an int to its C width
(window=2**32+3 became 3), silently. `lib.NAME` is the C function behind a check of each
argument by its declared type: a C string must hold no NUL, an integer must be a whole number in
its C type's range; else maskpos.Error names the argument. `whole` and `text` are the same checks
for values that reach C another way (struct fields, arrays, option strings).
"""
import ctypes
import math
import operator
import os

_HERE = os.path.dirname(os.path.abspath(__file__))


def _candidates():
    env = os.environ.get("MASKPOS_LIB")
    if env:
        return [env]
    found = []
    try:
        from ._libdir import LIBDIR  # written by `make install`
        found.append(os.path.join(LIBDIR, "libmaskpos.so.0"))
    except ImportError:
        pass
    found.append(os.path.join(_HERE, "libmaskpos.so.0"))
    found.append(os.path.normpath(os.path.join(_HERE, "..", "..", "build", "libmaskpos.so")))
    return found


def _load():
    tried = []
    for path in _candidates():
        if os.path.exists(path):
            return ctypes.CDLL(path), path
        tried.append(path)
    if os.environ.get("MASKPOS_LIB"):
        raise OSError("MASKPOS_LIB=%s: no such file" % os.environ["MASKPOS_LIB"])
    try:
        return ctypes.CDLL("libmaskpos.so.0"), "libmaskpos.so.0"
    except OSError:
        raise OSError("libmaskpos.so not found (tried %s and the system search path); build it with "
                      "`make` in the maskpos repository, `make install`, or set MASKPOS_LIB" % ", ".join(tried))


_cdll, path = _load()


def _error(msg):
    from . import Error  # the package's exception (defined in __init__)
    return Error(msg)


# the integer types of the C API and their ranges
_C_INTS = {ctypes.c_int: ("int", -2 ** 31, 2 ** 31 - 1), ctypes.c_int64: ("int64_t", -2 ** 63, 2 ** 63 - 1),
           ctypes.c_uint64: ("uint64_t", 0, 2 ** 64 - 1)}


def whole(value, name, lo=-2 ** 31, hi=2 ** 31 - 1):
    """value as a Python int: a whole number (an int, a numpy integer, or a float without a
    fraction) in [lo, hi] (default: a C int's range); else maskpos.Error naming it. Checked before
    anything is allocated from it."""
    if isinstance(value, float):
        if not (math.isfinite(value) and value.is_integer()):
            raise _error("%s=%r: not a whole number" % (name, value))
        v = int(value)
    else:
        try:
            v = operator.index(value)
        except TypeError:
            raise _error("%s=%r: a whole number is needed, not %s" % (name, value, type(value).__name__)) from None
    if not lo <= v <= hi:
        raise _error("%s=%r: outside [%d, %d]" % (name, value, lo, hi))
    return v


def nul_error(name, value):
    """maskpos.Error for a string with a NUL byte, which C would end at."""
    shown = value.decode("utf-8", "backslashreplace") if isinstance(value, bytes) else value
    cut = shown.split("\0")[0]
    return _error("%s=%r: holds a NUL byte, where a C string ends (the library would read %r): refused" % (
        name, shown, cut))


def text(value, name):
    """value (str, bytes or a path) as the bytes of a C string; maskpos.Error naming it when it
    holds a NUL byte."""
    b = os.fsencode(value) if isinstance(value, (str, os.PathLike)) else bytes(value)
    if b"\0" in b:
        raise nul_error(name, value)
    return b


class _Checked:
    """A C function of the library behind the checks of its arguments by their declared ctypes types
    (argtypes; restype and argtypes set on it are the C function's, so declaring a function the
    plain ctypes way keeps the checks). names: the caller's words for the arguments (messages)."""

    def __init__(self, name, f):
        self.__dict__.update(name=name, f=f, names=[], plan=None, planned_for=None)

    def __setattr__(self, key, value):
        setattr(self.f, key, value)

    def __getattr__(self, key):
        return getattr(self.f, key)

    def _checks(self):
        args = tuple(self.f.argtypes or ())
        if self.planned_for != args:
            ints, strings = [], []
            for i, t in enumerate(args):
                what = self.names[i] if i < len(self.names) else "%s argument %d" % (self.name, i + 1)
                if t in _C_INTS:
                    ints.append((i, what) + _C_INTS[t][1:])
                elif t is ctypes.c_char_p:
                    strings.append((i, what))
            self.__dict__.update(plan=(ints, strings), planned_for=args)
        return self.plan

    def __call__(self, *args):
        ints, strings = self._checks()
        for i, what, lo, hi in ints:
            if i < len(args):
                whole(args[i], what, lo, hi)
        for i, what in strings:
            if i < len(args) and isinstance(args[i], bytes) and b"\0" in args[i]:
                raise nul_error(what, args[i])
        return self.f(*args)


class _Library:
    """The library's functions, each behind _Checked (made on first use; declare() names them)."""

    def __init__(self, cdll):
        self._cdll = cdll

    def __getattr__(self, name):
        if name.startswith("_"):
            raise AttributeError(name)
        c = _Checked(name, getattr(self._cdll, name))
        setattr(self, name, c)
        return c


lib = _Library(_cdll)


def declare(signatures):
    """{name: (restype, [argtypes], "names of the arguments")}: each function of lib declared."""
    for name, sig in signatures.items():
        c = getattr(lib, name)
        c.restype, c.argtypes = sig[0], sig[1]
        c.__dict__["names"] = sig[2].split() if len(sig) > 2 else []
        c.__dict__["planned_for"] = None

c_int64_p = ctypes.POINTER(ctypes.c_int64)
PROGRESS = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64)

_SIGNATURES = {
    "maskpos_version": (ctypes.c_char_p, []),
    "maskpos_last_error": (ctypes.c_char_p, []),
    "maskpos_config_new": (ctypes.c_void_p, [ctypes.c_char_p], "job"),
    "maskpos_config_free": (None, [ctypes.c_void_p]),
    "maskpos_config_set": (ctypes.c_int, [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_char_p], "config key value"),
    "maskpos_theory": (ctypes.c_int, [ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p)]),
    "maskpos_simulate": (ctypes.c_int, [ctypes.c_void_p, PROGRESS, ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p)]),
    "maskpos_model_open": (ctypes.c_int, [ctypes.c_char_p, ctypes.POINTER(ctypes.c_void_p)], "path"),
    "maskpos_model_close": (None, [ctypes.c_void_p]),
    "maskpos_model_info": (ctypes.c_int, [ctypes.c_void_p, ctypes.POINTER(ctypes.c_int), ctypes.POINTER(ctypes.c_int),
                                          c_int64_p, c_int64_p]),
    "maskpos_probe": (ctypes.c_int, [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int,
                                     PROGRESS, ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p)],
                      "model config tokens n seq"),
    "maskpos_probe_option_count": (ctypes.c_int, []),
    "maskpos_probe_option_name": (ctypes.c_char_p, [ctypes.c_int], "i"),
    "maskpos_probe_option_kind": (ctypes.c_char_p, [ctypes.c_int], "i"),
    "maskpos_probe_option_help": (ctypes.c_char_p, [ctypes.c_int], "i"),
    "maskpos_load": (ctypes.c_int, [ctypes.c_char_p, ctypes.POINTER(ctypes.c_void_p)], "folder"),
    "maskpos_result_free": (None, [ctypes.c_void_p]),
    "maskpos_result_kind": (ctypes.c_char_p, [ctypes.c_void_p]),
    "maskpos_result_narrays": (ctypes.c_int, [ctypes.c_void_p]),
    "maskpos_result_array_name": (ctypes.c_char_p, [ctypes.c_void_p, ctypes.c_int], "result i"),
    "maskpos_result_array": (ctypes.c_void_p, [ctypes.c_void_p, ctypes.c_char_p, ctypes.POINTER(ctypes.c_int),
                                               ctypes.POINTER(ctypes.c_int), c_int64_p], "result array"),
    "maskpos_result_meta": (ctypes.c_char_p, [ctypes.c_void_p]),
    "maskpos_result_save": (ctypes.c_int, [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int], "result folder force"),
    "maskpos_free": (None, [ctypes.c_void_p]),
    # tokenize's text is a byte buffer with its length (a NUL in it is text): c_void_p, not a C string
    "maskpos_tokenize": (ctypes.c_int, [ctypes.c_char_p, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int,
                                        ctypes.POINTER(ctypes.POINTER(ctypes.c_int32)), c_int64_p],
                         "model text len(text) special"),
    "maskpos_detokenize": (ctypes.c_int, [ctypes.c_char_p, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int,
                                          ctypes.POINTER(ctypes.c_void_p), c_int64_p], "model ids len(ids) skip_special"),
    "maskpos_logits": (ctypes.c_int, [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64, ctypes.c_char_p, ctypes.c_int,
                                      ctypes.c_void_p], "model tokens len(tokens) compute log_probs"),
    "maskpos_generate": (ctypes.c_int, [ctypes.c_void_p, ctypes.c_int64, ctypes.c_int, ctypes.c_double, ctypes.c_int,
                                        ctypes.c_double, ctypes.c_uint64, ctypes.c_void_p, ctypes.c_int,
                                        ctypes.c_char_p, ctypes.c_int, ctypes.c_void_p,
                                        ctypes.POINTER(ctypes.c_double)],
                         "model n length temperature top_k top_p seed prompt len(prompt) compute threads"),
    "maskpos_plot": (ctypes.c_int, [ctypes.c_char_p, ctypes.c_void_p, ctypes.c_int, ctypes.c_int, ctypes.c_void_p,
                                    ctypes.c_int, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p,
                                    ctypes.c_int], "path maps len(maps) S layers len(layers) preset cmap diagnorm title force"),
    "maskpos_plot_run": (ctypes.c_int, [ctypes.c_char_p, ctypes.c_void_p, ctypes.c_int, ctypes.c_int, ctypes.c_void_p,
                                        ctypes.c_int, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p,
                                        ctypes.c_int, ctypes.c_char_p, ctypes.c_int],
                         "path maps len(maps) S layers len(layers) preset cmap diagnorm title force meta residue"),
    "maskpos_view": (ctypes.c_int, [ctypes.c_char_p, ctypes.POINTER(ctypes.c_char_p), ctypes.POINTER(ctypes.c_char_p),
                                    ctypes.c_int, ctypes.c_char_p, ctypes.c_int], "out dirs labels len(dirs) title force"),
}

declare(_SIGNATURES)

OK, ERR, STOPPED = 0, -1, -2
MAX_DIMS = 8
# MaskposDtype -> numpy dtype string
DTYPES = {0: "<f8", 1: "<f4", 2: "<i4", 3: "<i8", 4: "<u4", 5: "|u1", 6: "<u2", 7: "<i2"}


def probe_options():
    """The probe's settings from the library's option table (the rows `maskpos probe` reads its
    flags from, less the command line's own): [(name, kind, help)], name with "-" as in the flag,
    kind "bool", "int", "number" or "string"."""
    return [(lib.maskpos_probe_option_name(i).decode(), lib.maskpos_probe_option_kind(i).decode(),
             lib.maskpos_probe_option_help(i).decode()) for i in range(lib.maskpos_probe_option_count())]
