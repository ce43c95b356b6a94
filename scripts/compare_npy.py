#!/usr/bin/python3
"""compare_npy.py -- how far apart are the .npy files of two `maskpos reproduce` folders?

    scripts/compare_npy.py BEFORE AFTER [--tol 1e-5]

For every .npy under BEFORE: the same shape and dtype under AFTER, NaN and infinities in the same
places, and max |after - before| over the finite entries, relative to max |before| (the scale of
the map), at most --tol. Prints one line per file that is not byte-identical, then a summary.
compare_runs.sh asks for identical bytes; this is for a change that is meant to move numbers by
rounding only (a different summation order or exp). Exit status: 0 within tol, 1 not, 2 bad
arguments. Needs numpy (Debian python3-numpy).
"""
import argparse
import os
import sys

import numpy as np


def compare(a, b):
    """Returns (problem or None, relative max difference)."""
    if a.shape != b.shape or a.dtype != b.dtype:
        return "shape/dtype %s %s vs %s %s" % (a.shape, a.dtype, b.shape, b.dtype), 0.0
    if a.dtype.kind not in "fc":
        return (None, 0.0) if np.array_equal(a, b) else ("integer entries differ", 0.0)
    fa, fb = np.isfinite(a), np.isfinite(b)
    if not np.array_equal(fa, fb) or not np.array_equal(a[~fa].astype(str), b[~fb].astype(str)):
        return "NaN/inf in other places", 0.0
    if not fa.any():
        return None, 0.0
    scale = float(np.abs(a[fa]).max()) or 1.0
    return None, float(np.abs(a[fa].astype(np.float64) - b[fb]).max()) / scale


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("before")
    ap.add_argument("after")
    ap.add_argument("--tol", type=float, default=1e-5)
    args = ap.parse_args()
    if not os.path.isdir(args.before) or not os.path.isdir(args.after):
        ap.error("BEFORE and AFTER must be folders")
    n = same = bad = 0
    worst = (0.0, "")
    for root, _, files in sorted(os.walk(args.before)):
        for f in sorted(files):
            if not f.endswith(".npy"):
                continue
            rel = os.path.relpath(os.path.join(root, f), args.before)
            n += 1
            pa, pb = os.path.join(args.before, rel), os.path.join(args.after, rel)
            if not os.path.exists(pb):
                print("missing: %s" % rel)
                bad += 1
                continue
            if open(pa, "rb").read() == open(pb, "rb").read():
                same += 1
                continue
            problem, rel_diff = compare(np.load(pa), np.load(pb))
            ok = problem is None and rel_diff <= args.tol
            print("%s %s: %s" % ("within" if ok else "OUT", rel, problem or "max rel diff %.3g" % rel_diff))
            bad += not ok
            worst = max(worst, (rel_diff, rel))
    print("npy: %d compared, %d identical, %d within %g, %d not; largest relative difference %.3g (%s)"
          % (n, same, n - same - bad, args.tol, bad, worst[0], worst[1] or "-"))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
