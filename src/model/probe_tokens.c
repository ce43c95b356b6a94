/* probe_tokens.c — mp_probe_tokens_read (probe.h): the probe's token ids, from a .npy
 * (int32/int64/uint32 [N,S']) or a raw little-endian uint32 stream cut into sequences of --seq
 * tokens, every id checked against the vocabulary, hashed (FNV-1a) for the run key.
 * Does not: tokenize text (src/tok), accumulate, or run the model.
 * Errors: one line naming the file and the problem, MP_ERR (never abort).
 * Tested by: tests/test_model_probe.c, tests/test_badinput.c.
 *
 * Shape legend: N sequences, S tokens per sequence.
 */
#include "model/probe.h"

#include <stdlib.h>
#include <string.h>

#include "core/npy.h"  /* mp_npy_parse */
#include "core/util.h" /* mp_fnv1a64, mp_file_read_all, mp_size_mul */

static int tok_read_file(const char *path, unsigned char **buf, size_t *len, MpErr *e) {
    /* a directory or FIFO is refused by name (was "out of memory for 2^63-1 bytes" / a hang) */
    return mp_file_read_all(path, SIZE_MAX - 1, "a token file", (char **)buf, len, e);
}

int mp_probe_tokens_read(MpProbeTokens *tk, const char *path, int seq, int64_t n, int vocab, MpErr *e) {
    memset(tk, 0, sizeof *tk);
    unsigned char *buf = NULL;
    size_t len = 0;
    if (tok_read_file(path, &buf, &len, e) != MP_OK) return MP_ERR;
    int64_t rows = 0, cols = 0;
    MpNpy a;
    memset(&a, 0, sizeof a);
    const int is_npy = len >= 6 && !memcmp(buf, "\x93NUMPY", 6);
    if (is_npy) {
        int rc = mp_npy_parse(buf, len, &a, e);
        free(buf);
        buf = NULL;
        if (rc != MP_OK) return mp_err_prefix(e, "%s", path);
        const MpDtype dt = a.dtype;
        const int nd = a.ndim;
        if (dt != MP_DT_I32 && dt != MP_DT_I64 && dt != MP_DT_U32) {
            mp_npy_free(&a);
            return mp_err_set(e, "%s: token ids must be int32, int64 or uint32, not %s", path, mp_dtype_name(dt));
        }
        if (nd != 2) {
            mp_npy_free(&a);
            return mp_err_set(e, "%s: token ids must be a 2-D array [N, S], not %d-D", path, nd);
        }
        rows = a.shape[0];
        cols = a.shape[1];
        if (cols == 0) { /* (was "sequence length 0 out of range", naming no file) */
            mp_npy_free(&a);
            return mp_err_set(e, "%s: shape [%lld, 0]: sequences of no tokens", path, (long long)rows);
        }
        if (seq == 0) seq = cols > INT32_MAX ? INT32_MAX : (int)cols;
        if (cols < seq) {
            mp_npy_free(&a);
            return mp_err_set(e, "%s: sequences have %lld tokens, fewer than --seq %d", path, (long long)cols, seq);
        }
    } else {
        if (seq <= 0) {
            free(buf);
            return mp_err_set(e, "%s: not a .npy file; a raw uint32 token file needs --seq", path);
        }
        if (len % 4) {
            free(buf);
            return mp_err_set(e, "%s: raw uint32 token file of %zu bytes is not a multiple of 4", path, len);
        }
        cols = seq;
        rows = (int64_t)(len / 4) / seq;
        tk->skipped = (int64_t)(len / 4) % seq;
    }
    tk->available = rows;
    tk->from_npy = is_npy;
    if (n == 0) n = rows;
    if (rows == 0 || n == 0) {
        free(buf);
        mp_npy_free(&a);
        return mp_err_set(e, "%s: no complete sequence of %d tokens (N = 0)", path, seq);
    }
    if (n > rows) {
        free(buf);
        mp_npy_free(&a);
        return mp_err_set(e, "%s: --n %lld but the file holds %lld sequences of %d tokens", path, (long long)n,
                          (long long)rows, seq);
    }
    size_t count;
    if (mp_size_mul((size_t)n, (size_t)seq, &count) != MP_OK || count > ((size_t)1 << 34)) {
        free(buf);
        mp_npy_free(&a);
        return mp_err_set(e, "%s: %lld x %d tokens is too many", path, (long long)n, seq);
    }
    tk->ids = mp_try_malloc(count * sizeof *tk->ids);
    if (!tk->ids) {
        free(buf);
        mp_npy_free(&a);
        return mp_err_set(e, "%s: out of memory for %zu token ids", path, count);
    }
    uint64_t h = MP_FNV_INIT;
    int rc = MP_OK;
    for (int64_t r = 0; r < n && rc == MP_OK; r++)
        for (int c = 0; c < seq; c++) {
            const size_t src = (size_t)r * (size_t)cols + (size_t)c;
            int64_t v;
            if (!is_npy) {
                uint32_t u;
                memcpy(&u, buf + src * 4, 4); /* little-endian host (x86-64, aarch64) */
                v = u;
            } else if (a.dtype == MP_DT_I32) v = ((const int32_t *)a.data)[src];
            else if (a.dtype == MP_DT_I64) v = ((const int64_t *)a.data)[src];
            else v = ((const uint32_t *)a.data)[src];
            if (v < 0 || v >= vocab) {
                rc = mp_err_set(e, "%s: token id %lld (sequence %lld, position %d) is outside the vocabulary [0, %d)",
                                path, (long long)v, (long long)r, c, vocab);
                break;
            }
            int32_t id = (int32_t)v;
            tk->ids[(size_t)r * seq + c] = id;
            h = mp_fnv1a64(&id, 4, h);
        }
    free(buf);
    mp_npy_free(&a);
    if (rc != MP_OK) {
        mp_probe_tokens_free(tk);
        return MP_ERR;
    }
    tk->n = n;
    tk->seq = seq;
    tk->hash = h;
    return MP_OK;
}

void mp_probe_tokens_free(MpProbeTokens *tk) {
    free(tk->ids);
    memset(tk, 0, sizeof *tk);
}
