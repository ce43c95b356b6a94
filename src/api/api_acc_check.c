/* api_acc_check.c — the input check of maskpos_acc_add (api_acc.c): every observed entry of a batch
 * of scores (or probabilities) is a number the probe could have computed, and when it is not, the
 * message says what the bad entries look like, so a padded batch or a sliding-window model given
 * without its window is named as such rather than "not finite".
 *
 * Implements: mp_api_acc_check — scores finite and of magnitude below MP_API_ACC_MAX_SCORE (HF's
 * additive masks leave finfo.min, -1e9 or -10000 in masked entries: a padding value is not a score),
 * probabilities finite in [0, 1]; on the first bad entry, its sequence and head are read whole and
 * the bad entries matched against three patterns: positions past a length (right padding),
 * keys before a start (left padding), offsets i − j from a width on (a sliding window). Given
 * probabilities exactly 0 in a band i − j >= W the accumulator observes: a window it lacks.
 * Does not: add anything (api_acc.c), nor decide the options (the caller's).
 * Tested by: python/tests_torch/test_accumulator_more.py (padding, windows, large values).
 *
 * Shape legend: B sequences, H heads, S positions.
 */
#include "api/api_acc_check.h"

#include <math.h>
#include <stdio.h>

#include "api/api.h" /* mp_api_failf */

/* The value at k of x (f32 or f64) as a double. */
static double chk_value(const void *x, int dt, size_t k) {
    return dt == MASKPOS_F32 ? (double)((const float *)x)[k] : ((const double *)x)[k];
}

/* 1 when v cannot be a score (scores) or a probability (probs). */
static int chk_bad(double v, int probs) {
    if (!isfinite(v)) return 1;
    return probs ? v < 0 || v > 1 : fabs(v) >= MP_API_ACC_MAX_SCORE;
}

/* The observed keys [lo, hi) of row i of slot li in a sequence of length len. */
static void chk_keys(const MpProbeAcc *a, int li, int i, int len, int *lo, int *hi) {
    mp_probe_acc_row_keys(a, li, i, lo, hi);
    if (i >= len) *lo = *hi = 0;
    else if (*hi > len) *hi = len;
}

enum { PAT_NONE, PAT_RIGHT, PAT_LEFT, PAT_WINDOW };

/* Which pattern the bad entries of one sequence's head m [S,S] follow (with its parameter *p). */
static int chk_pattern(const MpProbeAcc *a, int li, const void *x, int dt, size_t base, int len, int probs, int *p) {
    const int S = a->S;
    int maxpos = S, minoff = S, maxkey = -1, minkey = S;
    for (int i = 0; i < len; i++) { /* the smallest max(i, j), i - j and j and the largest j of a bad entry */
        int lo, hi;
        chk_keys(a, li, i, len, &lo, &hi);
        for (int j = lo; j < hi; j++)
            if (chk_bad(chk_value(x, dt, base + (size_t)i * S + j), probs)) {
                const int mx = i > j ? i : j;
                if (mx < maxpos) maxpos = mx;
                if (i - j < minoff) minoff = i - j;
                if (j > maxkey) maxkey = j;
                if (j < minkey) minkey = j;
            }
    }
    int right = maxpos > 0, keys = minkey > 0, left = maxkey >= 0 && maxkey + 1 < len, window = minoff > 0;
    for (int i = 0; i < len && (right || keys || left || window); i++) {
        int lo, hi;
        chk_keys(a, li, i, len, &lo, &hi);
        for (int j = lo; j < hi; j++) {
            const int bad = chk_bad(chk_value(x, dt, base + (size_t)i * S + j), probs), mx = i > j ? i : j;
            right &= bad == (mx >= maxpos);
            keys &= bad == (j >= minkey);
            left &= bad == (j <= maxkey);
            window &= bad == (i - j >= minoff);
        }
    }
    if (right) return *p = maxpos, PAT_RIGHT;
    if (keys) return *p = minkey, PAT_RIGHT; /* HF's padding mask: the padded keys of every query */
    if (left) return *p = maxkey, PAT_LEFT;
    if (window) return *p = minoff, PAT_WINDOW;
    return PAT_NONE;
}

/* The failure message of bad entry (b, h, i, j) = v. */
static int chk_fail(const MpProbeAcc *a, int li, const void *x, int dt, int64_t b, int h, int i, int j, int len,
                    const char *what, int probs) {
    const int S = a->S;
    const double v = chk_value(x, dt, (((size_t)b * a->H + h) * S + i) * S + j);
    char where[160];
    snprintf(where, sizeof where, "accumulator: layer %d: %s[%lld, %d, %d, %d] = %g", li, what, (long long)b, h, i, j, v);
    if (probs) return mp_api_failf("%s is not a probability; nothing was added", where);
    int p = 0;
    const int pat = chk_pattern(a, li, x, dt, ((size_t)b * a->H + h) * (size_t)S * S, len, probs, &p);
    const char *kind = isfinite(v) ? "a padding or mask value" : "not finite";
    if (pat == PAT_RIGHT)
        return mp_api_failf("%s: every observed entry of that sequence at position %d or later is %s (padding?): give "
                            "lengths= (each sequence's length; padded positions are never read) or the scores before the "
                            "mask; nothing was added", where, p, kind);
    if (pat == PAT_LEFT)
        return mp_api_failf("%s: keys 0..%d of that sequence are %s in every row (left padding?): the maps need sequences "
                            "that start at position 0; pad on the right (tokenizer.padding_side = 'right') and give "
                            "lengths=; nothing was added", where, p, kind);
    if (pat == PAT_WINDOW)
        return mp_api_failf("%s: every entry with i - j >= %d is %s: a sliding window of %d? give window=%d (this layer "
                            "slot's is %d; 0: none); nothing was added", where, p, kind, p, p, a->window[li]);
    if (isfinite(v))
        return mp_api_failf("%s in an observed entry: |score| >= %g is a padding or mask value (HF's additive mask leaves "
                            "finfo.min or -1e9 there), not a score: give lengths= for padded sequences, or the scores "
                            "before the mask; nothing was added", where, MP_API_ACC_MAX_SCORE);
    return mp_api_failf("%s is not finite in an observed entry; nothing was added", where);
}

/* Probabilities exactly 0 at every observed entry with i - j >= W and nowhere else (W from 1): the
 * model masked a sliding window of W that the accumulator does not have (its scores, finite there,
 * would be counted). Checked on the first sequence's first head; W, or 0 when there is no such band. */
static int chk_prob_window(const MpProbeAcc *a, int li, const void *x, int dt, int len) {
    const int S = a->S;
    int W = S;
    for (int i = 0; i < len; i++) {
        int lo, hi;
        chk_keys(a, li, i, len, &lo, &hi);
        for (int j = lo; j < hi; j++)
            if (chk_value(x, dt, (size_t)i * S + j) == 0.0 && i - j < W) W = i - j;
    }
    if (W < 1 || W >= len) return 0;
    for (int i = 0; i < len; i++) {
        int lo, hi;
        chk_keys(a, li, i, len, &lo, &hi);
        for (int j = lo; j < hi; j++)
            if ((chk_value(x, dt, (size_t)i * S + j) == 0.0) != (i - j >= W)) return 0;
    }
    return W;
}

int mp_api_acc_check(const MpProbeAcc *a, int li, const void *x, int dt, int64_t B, const int32_t *lens, const char *what,
                     int probs) {
    const int H = a->H, S = a->S;
    const size_t SS = (size_t)S * S;
    for (int64_t b = 0; b < B; b++) {
        const int len = lens ? lens[b] : S;
        for (int h = 0; h < H; h++)
            for (int i = 0; i < len; i++) {
                int lo, hi;
                chk_keys(a, li, i, len, &lo, &hi);
                const size_t base = ((size_t)b * H + h) * SS + (size_t)i * S;
                for (int j = lo; j < hi; j++)
                    if (chk_bad(chk_value(x, dt, base + j), probs)) return chk_fail(a, li, x, dt, b, h, i, j, len, what, probs);
            }
    }
    const int W = probs && B > 0 ? chk_prob_window(a, li, x, dt, lens ? lens[0] : S) : 0;
    if (W)
        return mp_api_failf("accumulator: layer %d: %s[0, 0] is exactly 0 at every entry with i - j >= %d: the model masks a "
                            "sliding window of %d that this layer slot does not have (window %d; 0: none), so its scores "
                            "there would be counted: give window=%d; nothing was added",
                            li, what, W, W, a->window[li], W);
    return MP_OK;
}
