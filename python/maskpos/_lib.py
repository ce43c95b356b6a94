"""_lib.py — finds libmaskpos.so and declares the C API (include/maskpos.h) to ctypes.

Search order: $MASKPOS_LIB (a path to the library), the folder `make install` recorded in
_libdir.py, a copy beside this package, the build tree this package sits in (python/maskpos ->
build/libmaskpos.so), then the system's search path (libmaskpos.so.0).
"""
import ctypes
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


lib, path = _load()

c_int64_p = ctypes.POINTER(ctypes.c_int64)
PROGRESS = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64)

_SIGNATURES = {
    "maskpos_version": (ctypes.c_char_p, []),
    "maskpos_last_error": (ctypes.c_char_p, []),
    "maskpos_config_new": (ctypes.c_void_p, [ctypes.c_char_p]),
    "maskpos_config_free": (None, [ctypes.c_void_p]),
    "maskpos_config_set": (ctypes.c_int, [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_char_p]),
    "maskpos_theory": (ctypes.c_int, [ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p)]),
    "maskpos_simulate": (ctypes.c_int, [ctypes.c_void_p, PROGRESS, ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p)]),
    "maskpos_model_open": (ctypes.c_int, [ctypes.c_char_p, ctypes.POINTER(ctypes.c_void_p)]),
    "maskpos_model_close": (None, [ctypes.c_void_p]),
    "maskpos_model_info": (ctypes.c_int, [ctypes.c_void_p, ctypes.POINTER(ctypes.c_int), ctypes.POINTER(ctypes.c_int),
                                          c_int64_p, c_int64_p]),
    "maskpos_probe": (ctypes.c_int, [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int,
                                     PROGRESS, ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p)]),
    "maskpos_probe_option_count": (ctypes.c_int, []),
    "maskpos_probe_option_name": (ctypes.c_char_p, [ctypes.c_int]),
    "maskpos_probe_option_kind": (ctypes.c_char_p, [ctypes.c_int]),
    "maskpos_probe_option_help": (ctypes.c_char_p, [ctypes.c_int]),
    "maskpos_load": (ctypes.c_int, [ctypes.c_char_p, ctypes.POINTER(ctypes.c_void_p)]),
    "maskpos_result_free": (None, [ctypes.c_void_p]),
    "maskpos_result_kind": (ctypes.c_char_p, [ctypes.c_void_p]),
    "maskpos_result_narrays": (ctypes.c_int, [ctypes.c_void_p]),
    "maskpos_result_array_name": (ctypes.c_char_p, [ctypes.c_void_p, ctypes.c_int]),
    "maskpos_result_array": (ctypes.c_void_p, [ctypes.c_void_p, ctypes.c_char_p, ctypes.POINTER(ctypes.c_int),
                                               ctypes.POINTER(ctypes.c_int), c_int64_p]),
    "maskpos_result_meta": (ctypes.c_char_p, [ctypes.c_void_p]),
    "maskpos_result_save": (ctypes.c_int, [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int]),
    "maskpos_free": (None, [ctypes.c_void_p]),
    "maskpos_tokenize": (ctypes.c_int, [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_int64, ctypes.c_int,
                                        ctypes.POINTER(ctypes.POINTER(ctypes.c_int32)), c_int64_p]),
    "maskpos_detokenize": (ctypes.c_int, [ctypes.c_char_p, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int,
                                          ctypes.POINTER(ctypes.c_void_p), c_int64_p]),
    "maskpos_logits": (ctypes.c_int, [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64, ctypes.c_char_p, ctypes.c_int,
                                      ctypes.c_void_p]),
    "maskpos_generate": (ctypes.c_int, [ctypes.c_void_p, ctypes.c_int64, ctypes.c_int, ctypes.c_double, ctypes.c_int,
                                        ctypes.c_double, ctypes.c_uint64, ctypes.c_void_p, ctypes.c_int,
                                        ctypes.c_char_p, ctypes.c_int, ctypes.c_void_p,
                                        ctypes.POINTER(ctypes.c_double)]),
    "maskpos_plot": (ctypes.c_int, [ctypes.c_char_p, ctypes.c_void_p, ctypes.c_int, ctypes.c_int, ctypes.c_void_p,
                                    ctypes.c_int, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p,
                                    ctypes.c_int]),
    "maskpos_plot_run": (ctypes.c_int, [ctypes.c_char_p, ctypes.c_void_p, ctypes.c_int, ctypes.c_int, ctypes.c_void_p,
                                        ctypes.c_int, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p,
                                        ctypes.c_int, ctypes.c_char_p, ctypes.c_int]),
    "maskpos_view": (ctypes.c_int, [ctypes.c_char_p, ctypes.POINTER(ctypes.c_char_p), ctypes.POINTER(ctypes.c_char_p),
                                    ctypes.c_int, ctypes.c_char_p, ctypes.c_int]),
}

for _name, (_res, _args) in _SIGNATURES.items():
    _f = getattr(lib, _name)
    _f.restype = _res
    _f.argtypes = _args

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
