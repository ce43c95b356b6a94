/* probe_ckpt.c — checkpoints of the probe's accumulator (probe.h): a fixed header (magic,
 * version, run key, dims, the optional statistics held), then the sums of every statistic held,
 * in the order of the table's rows and arrays (mp_probe_acc_arrays: sum, sumsq, bsum, bsumsq,
 * sum_heads, sumsq_heads, bflip, rsq, csq, psum, psum_heads, sink, entropy, rp_row, rp_lsq, rp_hsq,
 * lbsum, lbsumsq, npos, bcnt, those the run has), then an FNV-1a checksum of all of it; written
 * atomically (temp + rename), read back with every check named.
 * Does not: decide when to save (src/job/probe_job.c), nor compute the run key (it is given).
 * Tested by: tests/test_model_probe.c (resume, corrupt and foreign checkpoints), test_badinput.c.
 */
#include "model/probe.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "core/util.h" /* mp_fnv1a64, MpAtomicFile, mp_input_open */

#define CKPT_MAGIC "MPPRBCK1"
/* 2: Σ of squared head means and the block residue sums after the sums; 3 (runs with per-head
 * sums only): Σ of the heads' squares after the heads' sums; 4 and 5: 2 and 3 under a run
 * key that covers the weights read (mp_model_weights_hash: 2 and 3 are refused, their keys cannot
 * tell two models of one shape apart); 6 and 7 (the notebook branch before the statistics table,
 * never on main): 4 and 5 with bflip, rsq, csq after every other array; 8 and 9: 4 and 5 with the
 * maps row's block test's sign-flipped sums and the noise-corrected NRI's sums (bflip, rsq, csq)
 * after sumsq_heads, before the optional rows' arrays, and with flag 4 (the lengths row) the
 * per-position counts of sequences shorter than S (npos, bcnt) last. 4 to 7 are refused: they hold
 * no sign-flipped sums (4, 5) or the same arrays in another order (6, 7). */
#define CKPT_VERSION(a) ((a)->per_head ? 9u : 8u)
#define CKPT_VERSION_FLIPS 8u /* the first version with the maps row's bflip, rsq, csq */
#define CKPT_VERSION_WEIGHTS 4u /* the first version keyed by the weights */

typedef struct CkptHeader {
    char magic[8];
    uint32_t version;
    uint32_t header_bytes;
    uint64_t key;
    int64_t n_done;
    int32_t L, H, S, per_head;
    int32_t causal, flags; /* bit id - 1: the optional statistic id (MpProbeStatId) is held and its sums
                              follow (bit 0 probs, bit 1 recency, bit 2 lengths); 0 in older files */
} CkptHeader;

/* The optional statistics a holds, as the header's flags (the maps, id 0, are in every file). */
static int32_t ckpt_flags(const MpProbeAcc *a) {
    _Static_assert(MP_PROBE_STAT_MAPS == 0 && MP_PROBE_NSTATS <= 32, "flags: bit id - 1 of the optional statistics");
    return (int32_t)(a->stats >> 1);
}

/* The checksum of the header and the arrays t[0..n), as written. */
static uint64_t ckpt_checksum(const CkptHeader *hd, const MpProbeArray *t, int n) {
    uint64_t ck = mp_fnv1a64(hd, sizeof *hd, MP_FNV_INIT);
    for (int k = 0; k < n; k++) ck = mp_fnv1a64(t[k].p, t[k].n * sizeof(double), ck);
    return ck;
}

int mp_probe_ckpt_save(const char *path, const MpProbeAcc *a, uint64_t key, MpErr *e) {
    if (a->dev_sync && a->dev_sync(a, e) != MP_OK) return MP_ERR; /* the sums of a device (model/probe_dev.c) */
    CkptHeader hd;
    memset(&hd, 0, sizeof hd);
    memcpy(hd.magic, CKPT_MAGIC, 8);
    hd.version = CKPT_VERSION(a);
    hd.header_bytes = sizeof hd;
    hd.key = key;
    hd.n_done = a->n_done;
    hd.L = a->L;
    hd.H = a->H;
    hd.S = a->S;
    hd.per_head = a->per_head;
    hd.causal = a->causal;
    hd.flags = ckpt_flags(a);
    MpProbeArray t[MP_PROBE_MAX_ARRAYS];
    const int n = mp_probe_acc_arrays(a, t);
    const uint64_t ck = ckpt_checksum(&hd, t, n);
    MpAtomicFile af;
    if (mp_atomic_open(&af, path, e) != MP_OK) return MP_ERR;
    int ok = fwrite(&hd, sizeof hd, 1, af.f) == 1;
    for (int k = 0; k < n && ok; k++) ok = fwrite(t[k].p, sizeof(double), t[k].n, af.f) == t[k].n;
    ok = ok && fwrite(&ck, sizeof ck, 1, af.f) == 1;
    if (!ok) {
        mp_atomic_abort(&af);
        return mp_err_set(e, "%s: write failed: %s; HINT: is the disk full?", path, strerror(errno));
    }
    return mp_atomic_commit(&af, e);
}

/* 1 when sums read back cannot come from finite scores (MpProbeArray.check): a checksum proves
 * the bytes are the ones written, not that they are sane. */
static int ckpt_sums_bad(const MpProbeArray *t, int n) {
    for (int k = 0; k < n; k++)
        for (size_t i = 0; t[k].check && i < t[k].n; i++) {
            const double v = t[k].p[i];
            if (!isfinite(v) || (t[k].check == 2 && !(v >= 0))) return 1;
        }
    return 0;
}

/* The header's checks against the run a; MP_OK or MP_ERR with the message. */
static int ckpt_header_check(const char *path, const CkptHeader *hd, const MpProbeAcc *a, uint64_t key, MpErr *e) {
    if (memcmp(hd->magic, CKPT_MAGIC, 8)) return mp_err_set(e, "%s: not a maskpos probe checkpoint", path);
    if (hd->version < CKPT_VERSION_WEIGHTS)
        return mp_err_set(e, "%s: a checkpoint of an older maskpos (version %u; this one writes %u, whose run key covers "
                             "the weights): it cannot be told apart from another model's; HINT: run again without --resume "
                             "(--force replaces the folder)",
                          path, hd->version, CKPT_VERSION(a));
    if (hd->version < CKPT_VERSION_FLIPS)
        return mp_err_set(e, "%s: a checkpoint of an older maskpos (version %u; this one writes %u, with the block "
                             "test's sign-flipped sums in its own order): it cannot be continued; HINT: run again "
                             "without --resume (--force replaces the folder)",
                          path, hd->version, CKPT_VERSION(a));
    if (hd->version != CKPT_VERSION(a) || hd->header_bytes != sizeof *hd)
        return mp_err_set(e, "%s: checkpoint version %u with a %u-byte header; this run reads version %u (%zu bytes)%s", path,
                          hd->version, hd->header_bytes, CKPT_VERSION(a), sizeof *hd,
                          hd->version == 17u - CKPT_VERSION(a) ? " (written with and without --per-head: another run)" : "");
    if (hd->key != key || hd->L != a->L || hd->H != a->H || hd->S != a->S || hd->per_head != a->per_head ||
        hd->causal != a->causal)
        return mp_err_set(e, "%s: checkpoint belongs to another run (model, tokens or flags differ); HINT: remove it or "
                             "use another --out",
                          path);
    if (hd->flags != ckpt_flags(a)) {
        char theirs[256], ours[256];
        mp_probe_stats_names((unsigned)hd->flags << 1, theirs, sizeof theirs);
        mp_probe_stats_names(a->stats, ours, sizeof ours);
        return mp_err_set(e, "%s: checkpoint holds the sums of the statistics {%s}, this run {%s}: another run; HINT: "
                             "the same statistics as the checkpointed run, or remove it or use another --out",
                          path, theirs, ours);
    }
    if (hd->n_done < 0) return mp_err_set(e, "%s: corrupt checkpoint (negative count)", path);
    return MP_OK;
}

int mp_probe_ckpt_load(const char *path, MpProbeAcc *a, uint64_t key, int *missing, MpErr *e) {
    *missing = 0;
    FILE *f = mp_input_open(path, NULL, e);
    if (!f) {
        *missing = !mp_file_exists(path);
        return MP_ERR;
    }
    CkptHeader hd;
    MpProbeArray t[MP_PROBE_MAX_ARRAYS];
    const int n = mp_probe_acc_arrays(a, t);
    int rc = MP_OK;
    if (fread(&hd, sizeof hd, 1, f) != 1) rc = mp_err_set(e, "%s: not a maskpos probe checkpoint", path);
    else rc = ckpt_header_check(path, &hd, a, key, e);
    if (rc == MP_OK) {
        uint64_t stored;
        int ok = 1;
        for (int k = 0; k < n && ok; k++) ok = fread(t[k].p, sizeof(double), t[k].n, f) == t[k].n;
        if (!ok || fread(&stored, sizeof stored, 1, f) != 1 || fgetc(f) != EOF)
            rc = mp_err_set(e, "%s: truncated or oversized checkpoint", path);
        else if (ckpt_checksum(&hd, t, n) != stored)
            rc = mp_err_set(e, "%s: checkpoint checksum mismatch", path);
        else if (ckpt_sums_bad(t, n))
            rc = mp_err_set(e, "%s: corrupt checkpoint (a non-finite sum or a negative sum of squares)", path);
    }
    fclose(f);
    if (rc == MP_OK) a->n_done = hd.n_done;
    else
        for (int k = 0; k < n; k++) memset(t[k].p, 0, t[k].n * sizeof(double));
    return rc;
}
