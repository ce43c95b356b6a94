/* test_probe_table.c — the accumulator's table of statistics (src/model/probe.h, mp_probe_stats in
 * src/model/probe_acc.c) and what reads it:
 *   - every row is complete (name, help, sums; the functions its inputs call) and its name is a
 *     setting: parsed ('-' and '_' alike), written back, refused with the list of names;
 *   - the forward-pass inputs are derived from the rows: the reduced map unless a statistic (or
 *     --per-head) needs every head's rows, probabilities for --probs, the capture points ATTN_MIX
 *     and LAYER_OUT for variance;
 *   - the memory estimate (mp_probe_stats_bytes) counts exactly the sums an accumulator with every
 *     statistic allocates (the same table), with and without --per-head;
 *   - the one-sequence part of the MPI ranks and worker threads (mp_probe_acc_init_like) holds
 *     every statistic of its accumulator, array by array, and merges into it; accumulators of other
 *     statistics do not merge;
 *   - `--stats probs,recency` writes the bytes of `--probs --recency` (every .npy, and meta.json but
 *     for the command line and times), and meta.json's "files" lists every output of every row on;
 *     a bad name is one line and exit 2;
 *   - a checkpoint of other statistics is refused, naming both sets;
 *   - the C API's accumulator takes the statistics by name (stats) as by their switches: options
 *     given back, merge of the two, an unknown name and a statistic it cannot be fed refused;
 *   - every row of the table, whatever it is, end to end (the guard a new statistic meets in a
 *     single-threaded run): `maskpos probe --stats <every name>` writes each row's outputs, listed
 *     in meta.json and finite, with the same bytes at 1 thread, at 2 (sequences in parallel
 *     workers, their one-sequence parts merged: the path of MPI ranks) and after a kill and
 *     --resume (the checkpoint); the C API's accumulator fed the forward pass's scores
 *     (maskpos_model_scores) gives the same bytes for every row it can be fed (all but those that
 *     read captures), as float32 and as the same values widened to float64.
 *
 *   make build/tests/test_probe_table && build/tests/test_probe_table
 */
#include <math.h>
#include <signal.h>

#include "test_model_util.h"

#include "core/json.h"     /* mp_json_read */
#include "maskpos.h"       /* maskpos_acc_* */
#include "model/fwd.h"     /* MP_FWD_AT_ATTN_MIX, MP_FWD_AT_LAYER_OUT */
#include "model/probe.h"   /* mp_probe_stats, MpProbeAcc */

/* An accumulator of 2 layers, 3 heads, S = 40 (skip 1), with the statistics of set. */
static void acc_with(MpProbeAcc *a, unsigned set, int per_head) {
    const unsigned char mask[2] = {1, 1};
    MpErr e;
    if (mp_probe_acc_init(a, mask, 2, 3, 40, per_head, 1, 2, &e) != MP_OK) fail_msg("%s", e.msg);
    mp_probe_acc_skip(a, 1);
    a->fr_hs = 8, a->fr_nkv = 1, a->fr_rot = 6, a->fr_scale = 0.25; /* the heads --stats freq reads */
    if (mp_probe_acc_stats_on(a, set, &e) != MP_OK) fail_msg("%s", e.msg);
}

static unsigned all_stats(void) { return (1u << MP_PROBE_NSTATS) - 1; }
/* The rows this file knows by their sizes (a row added later is met by the end-to-end tests below). */
static unsigned known_stats(void) {
    return MP_PROBE_STAT_BIT(MP_PROBE_STAT_MAPS) | MP_PROBE_STAT_BIT(MP_PROBE_STAT_PROBS) | MP_PROBE_STAT_BIT(MP_PROBE_STAT_RECENCY);
}
/* The refusal of an unknown name: the names of every optional row. */
static const char *refusal(const char *prefix, const char *name) {
    static char want[1024];
    char names[512];
    mp_probe_stats_names(all_stats(), names, sizeof names);
    snprintf(want, sizeof want, "%s'%s' is not a statistic of the probe (one of: %s)", prefix, name, names);
    return want;
}

static void test_rows_complete_and_named(void **state) {
    (void)state;
    for (int id = 0; id < MP_PROBE_NSTATS; id++) {
        const MpProbeStat *s = &mp_probe_stats[id];
        if (!s->name || !s->help || !s->what || !s->arrays[0].name) fail_msg("row %d is incomplete", id);
        unsigned set = 0;
        MpErr e;
        assert_int_equal(mp_probe_stats_parse(s->name, &set, &e), MP_OK);
        assert_int_equal(set, MP_PROBE_STAT_BIT(id)); /* names are unique */
    }
    MpErr e;
    unsigned set = 0;
    assert_int_equal(mp_probe_stats_parse(" probs, recency ,", &set, &e), MP_OK);
    assert_int_equal(set, MP_PROBE_STAT_BIT(MP_PROBE_STAT_PROBS) | MP_PROBE_STAT_BIT(MP_PROBE_STAT_RECENCY));
    char buf[256];
    assert_int_equal(mp_probe_stats_names(set | 1u, buf, sizeof buf), strlen("probs,recency")); /* the maps unnamed */
    assert_string_equal(buf, "probs,recency");
    assert_int_equal(mp_probe_stats_names(set, buf, 4), strlen("probs,recency")); /* snprintf-like */
    assert_string_equal(buf, "pro");
    set = 0;
    assert_int_equal(mp_probe_stats_parse("probs,nope", &set, &e), MP_ERR);
    assert_string_equal(e.msg, refusal("", "nope"));
    assert_int_equal(mp_probe_stats_parse(NULL, &set, &e), MP_OK);
    assert_int_equal(mp_probe_stats_parse("", &set, &e), MP_OK);
}

static void test_inputs_derived_from_rows(void **state) {
    (void)state;
    const unsigned maps = MP_PROBE_STAT_BIT(MP_PROBE_STAT_MAPS);
    assert_int_equal(mp_probe_stats_inputs(maps, 0), MP_PROBE_IN_HEADSUM);
    assert_true(mp_probe_stats_inputs(maps, 1) & MP_PROBE_IN_HEADS); /* --per-head: every head's rows */
    assert_true(mp_probe_stats_inputs(maps | MP_PROBE_STAT_BIT(MP_PROBE_STAT_RECENCY), 0) & MP_PROBE_IN_HEADS);
    assert_int_equal(mp_probe_stats_inputs(maps | MP_PROBE_STAT_BIT(MP_PROBE_STAT_PROBS), 0),
                     MP_PROBE_IN_HEADSUM | MP_PROBE_IN_PROBS);
    assert_int_equal(mp_probe_stats_points(known_stats()), 0); /* none of these reads a capture point */
    /* variance reads the attention output before o_proj and the residual stream after the layer */
    const unsigned var = MP_PROBE_STAT_BIT(MP_PROBE_STAT_VARIANCE);
    assert_int_equal(mp_probe_stats_points(maps | var), 1u << MP_FWD_AT_ATTN_MIX | 1u << MP_FWD_AT_LAYER_OUT);
    assert_int_equal(mp_probe_stats_inputs(maps | var, 0), MP_PROBE_IN_HEADSUM | MP_PROBE_IN_CAPTURE);
    MpProbeAcc a;
    acc_with(&a, MP_PROBE_STAT_BIT(MP_PROBE_STAT_PROBS), 0);
    assert_false(mp_probe_acc_needs_heads(&a));
    mp_probe_acc_free(&a);
    acc_with(&a, MP_PROBE_STAT_BIT(MP_PROBE_STAT_RECENCY), 0);
    assert_true(mp_probe_acc_needs_heads(&a));
    mp_probe_acc_free(&a);
}

static void test_estimate_is_the_allocation(void **state) {
    (void)state;
    for (int ph = 0; ph < 2; ph++) {
        MpProbeAcc a;
        acc_with(&a, known_stats(), ph);
        MpProbeArray t[MP_PROBE_MAX_ARRAYS];
        const int n = mp_probe_acc_arrays(&a, t);
        assert_int_equal(n, ph ? 18 : 15); /* the checkpoint's arrays: 9 + 4 + 5 with --per-head */
        uint64_t have = 0, sums, scratch, outs;
        for (int k = 0; k < n; k++) have += 8 * (uint64_t)t[k].n;
        /* the estimate knows nothing of skip: its recency lengths are those of skip 0 (the same at S = 40) */
        mp_probe_stats_bytes(known_stats(), a.L, a.H, a.S, ph, a.threads, &sums, &scratch, &outs);
        print_message("per_head %d: %d sums, %llu bytes; estimate %llu (+ scratch %llu, outputs %llu)\n", ph, n,
                      (unsigned long long)have, (unsigned long long)sums, (unsigned long long)scratch, (unsigned long long)outs);
        assert_int_equal(sums, have);
        /* scratch: the maps' three [S,S] maps and one sequence's [16,16] block means, --probs' [H,S]
         * entropies, --recency's counts and corners */
        const uint64_t S = 40, H = 3;
        assert_int_equal(scratch, 8 * (3 * S * S + 16 * 16 + H * S + (H * S + 3 * 2 * S + 2 * S * S)));
        /* outputs: the maps' (mean, diagnorm, se, and per head 2 more, and three scratch maps), probs.npy
         * [L,S,S] and probs_heads.npy [L,H,S,S] */
        assert_int_equal(outs, 8 * S * S * (2 * (ph ? 3 + 2 * H : 3) + 3) + 8 * S * S * 2 * (ph ? 1 + H : 1));
        mp_probe_acc_free(&a);
    }
}

static void test_part_holds_every_statistic(void **state) {
    (void)state;
    MpProbeAcc a, part, other;
    MpErr e;
    acc_with(&a, all_stats(), 1);
    if (mp_probe_acc_init_like(&part, &a, 1, &e) != MP_OK) fail_msg("%s", e.msg);
    assert_int_equal(part.stats, a.stats);
    MpProbeArray ta[MP_PROBE_MAX_ARRAYS], tp[MP_PROBE_MAX_ARRAYS];
    const int n = mp_probe_acc_arrays(&a, ta);
    assert_int_equal(mp_probe_acc_arrays(&part, tp), n);
    for (int k = 0; k < n; k++) {
        assert_string_equal(ta[k].name, tp[k].name);
        assert_int_equal(ta[k].n, tp[k].n);
        assert_int_equal(ta[k].stat, tp[k].stat);
        for (size_t i = 0; i < tp[k].n; i++) tp[k].p[i] = (double)(k + 1); /* a part's sums, merged below */
    }
    part.n_done = 1;
    assert_int_equal(mp_probe_acc_merge(&a, &part, &e), MP_OK);
    for (int k = 0; k < n; k++) assert_true(ta[k].p[0] == (double)(k + 1) && ta[k].p[ta[k].n - 1] == (double)(k + 1));
    /* one statistic less: not the same run */
    acc_with(&other, all_stats() & ~MP_PROBE_STAT_BIT(MP_PROBE_STAT_RECENCY), 1);
    assert_int_equal(mp_probe_acc_merge(&a, &other, &e), MP_ERR);
    assert_non_null(strstr(e.msg, "statistics differ"));
    mp_probe_acc_free(&other);
    mp_probe_acc_free(&part);
    mp_probe_acc_free(&a);
}

/* meta.json of dir without the keys a run's time and command line make differ. */
static char *meta_of(const char *dir) {
    char path[512];
    MpErr e;
    snprintf(path, sizeof path, "%s/meta.json", dir);
    json_t *j = mp_json_read(path, &e);
    if (!j) fail_msg("%s", e.msg);
    const char *drop[] = {"compute_time_s", "command", "wall_time_s", "peak_rss_bytes"};
    for (size_t i = 0; i < sizeof drop / sizeof drop[0]; i++) json_object_del(j, drop[i]);
    char *s = json_dumps(j, JSON_SORT_KEYS);
    json_decref(j);
    return s;
}

static void test_stats_by_name_same_bytes(void **state) {
    (void)state;
    const char *d = mp_test_tmpdir();
    char model[256], ids[256], out[8192], a[512], b[512];
    snprintf(model, sizeof model, "%s/m", d);
    model_make(model, "--arch llama --layers 2 --heads 4 --kv-heads 2 --vocab 300 --seed 5");
    snprintf(ids, sizeof ids, "%s/ids.npy", d);
    ids_write(ids, 3, 24, 300, -1, 9);
    int rc = mp_test_run(out, sizeof out, "probe %s --tokens %s --out %s/flags --per-head --probs --recency --threads 1 --quiet",
                         model, ids, d);
    if (rc != 0) fail_msg("probe --probs --recency: %s", out);
    rc = mp_test_run(out, sizeof out, "probe %s --tokens %s --out %s/names --per-head --stats probs,recency --threads 1 --quiet",
                     model, ids, d);
    if (rc != 0) fail_msg("probe --stats probs,recency: %s", out);
    snprintf(a, sizeof a, "%s/flags/meta.json", d);
    json_t *meta = mp_json_read(a, NULL);
    assert_non_null(meta);
    json_t *files = json_object_get(meta, "files");
    int npy = 0;
    const char *k;
    json_t *v;
    json_object_foreach(files, k, v) {
        if (!strstr(k, ".npy")) continue;
        snprintf(a, sizeof a, "%s/flags/%s", d, k);
        snprintf(b, sizeof b, "%s/names/%s", d, k);
        if (!files_equal(a, b)) fail_msg("%s differs between --probs --recency and --stats probs,recency", k);
        npy++;
    }
    /* every output of every row on is listed (and so written, and an array of the API's result) */
    for (int id = 0; id < MP_PROBE_NSTATS; id++)
        for (int q = 0; q < MP_PROBE_STAT_OUTS && mp_probe_stats[id].outs[q].file && (known_stats() >> id & 1u); q++)
            if (!json_object_get(files, mp_probe_stats[id].outs[q].file))
                fail_msg("meta.json files lacks %s", mp_probe_stats[id].outs[q].file);
    json_decref(meta);
    assert_int_equal(npy, 7); /* scores, diagnorm, se, heads, heads_se, probs, probs_heads */
    snprintf(a, sizeof a, "%s/flags", d);
    snprintf(b, sizeof b, "%s/names", d);
    char *ma = meta_of(a), *mb = meta_of(b);
    assert_string_equal(ma, mb);
    free(ma);
    free(mb);
    rc = mp_test_run(out, sizeof out, "probe %s --tokens %s --out %s/bad --stats probs,entropie --quiet", model, ids, d);
    if (rc != 2 || !strstr(out, refusal("--stats: ", "entropie")) ||
        strchr(out, '\n') != strrchr(out, '\n'))
        fail_msg("a bad name: want exit 2 and one line, got %d: %s", rc, out);
}

static void test_checkpoint_of_other_statistics(void **state) {
    (void)state;
    const char *d = mp_test_tmpdir();
    char model[256], ids[256], out[8192];
    snprintf(model, sizeof model, "%s/m", d);
    model_make(model, "--arch llama --layers 2 --heads 4 --kv-heads 2 --vocab 300 --seed 6");
    snprintf(ids, sizeof ids, "%s/ids.npy", d);
    ids_write(ids, 5, 24, 300, -1, 3);
    int rc = mp_test_shell(out, sizeof out, "MASKPOS_TEST_KILL_AFTER=3 %s probe %s --tokens %s --out %s/res --probs --checkpoint-every 2 --quiet",
                           MP_TEST_BIN, model, ids, d);
    if (rc != 128 + SIGKILL) fail_msg("expected death by SIGKILL, got %d: %s", rc, out);
    rc = mp_test_run(out, sizeof out, "probe %s --tokens %s --out %s/res --stats probs,recency --resume --quiet", model, ids, d);
    if (rc != 2 || !strstr(out, "checkpoint holds the sums of the statistics {probs}, this run {probs,recency}"))
        fail_msg("resume with another statistic: want exit 2 naming both sets, got %d: %s", rc, out);
    rc = mp_test_run(out, sizeof out, "probe %s --tokens %s --out %s/res --stats probs --checkpoint-every 2 --resume",
                     model, ids, d);
    if (rc != 0 || !strstr(out, "2 of 5 sequences already done")) fail_msg("resume by name: %d: %s", rc, out);
}

static void test_api_accumulator_by_name(void **state) {
    (void)state;
    MaskposAccOptions o = {.n_layers = 2, .n_heads = 2, .seq = 8, .causal = 1, .probs = 1};
    MaskposAcc *x = NULL, *y = NULL;
    assert_int_equal(maskpos_acc_new(&o, &x), MASKPOS_OK);
    o.probs = 0;
    o.stats = "probs";
    assert_int_equal(maskpos_acc_new(&o, &y), MASKPOS_OK);
    MaskposAccOptions back;
    assert_int_equal(maskpos_acc_options(y, &back), MASKPOS_OK);
    assert_int_equal(back.probs, 1);
    assert_int_equal(back.recency, 0);
    assert_string_equal(back.stats, "probs");
    assert_int_equal(maskpos_acc_state_narrays(y), 7 + 3); /* the maps' 7, the probabilities' 3 (no heads) */
    assert_int_equal(maskpos_acc_merge(x, y), MASKPOS_OK);  /* the same statistics either way */
    maskpos_acc_free(y);
    y = NULL;
    o.stats = "recency";
    assert_int_equal(maskpos_acc_new(&o, &y), MASKPOS_OK);
    assert_int_equal(maskpos_acc_merge(x, y), MASKPOS_ERR);
    assert_non_null(strstr(maskpos_last_error(), "different options"));
    maskpos_acc_free(y);
    y = NULL;
    o.stats = "probs,maps,nope";
    assert_int_equal(maskpos_acc_new(&o, &y), MASKPOS_ERR);
    assert_null(y);
    assert_string_equal(maskpos_last_error(), refusal("accumulator: stats: ", "nope"));
    maskpos_acc_free(x);
}

/* Every optional statistic's name, comma-separated; with feedable, only those the accumulator can be
 * fed (no capture points). */
static void every_name(char *buf, size_t cap, int feedable) {
    unsigned set = 0;
    for (int id = 1; id < MP_PROBE_NSTATS; id++)
        if (!feedable || !(mp_probe_stats[id].in & MP_PROBE_IN_CAPTURE)) set |= MP_PROBE_STAT_BIT(id);
    mp_probe_stats_names(set, buf, cap);
}

/* The .npy files of dir/meta.json's "files" equal those of other (and, with finite, each row's
 * outputs finite); returns how many were compared. */
static int folders_equal(const char *dir, const char *other, const char *what) {
    char a[512], b[512];
    snprintf(a, sizeof a, "%s/meta.json", dir);
    json_t *meta = mp_json_read(a, NULL);
    if (!meta) fail_msg("%s: no meta.json", dir);
    json_t *files = json_object_get(meta, "files");
    int n = 0;
    const char *k;
    json_t *v;
    json_object_foreach(files, k, v) {
        if (!strstr(k, ".npy")) continue;
        snprintf(a, sizeof a, "%s/%s", dir, k);
        snprintf(b, sizeof b, "%s/%s", other, k);
        if (!files_equal(a, b)) fail_msg("%s: %s differs", what, k);
        n++;
    }
    json_decref(meta);
    return n;
}

/* probe --stats names (and flags) of model on ids into d/TAG1 at 1 thread, d/TAG2 at 2 threads and
 * d/TAGr killed after 3 sequences and resumed: the three folders' .npy the same bytes; returns how
 * many .npy. */
static int same_at_threads_and_resume(const char *model, const char *ids, const char *d, const char *names, const char *flags,
                                      const char *tag) {
    char out[8192], a[512], b[512];
    for (int t = 1; t <= 2; t++)
        if (mp_test_run(out, sizeof out, "probe %s --tokens %s --out %s/%s%d --stats %s %s --threads %d --quiet", model, ids, d, tag,
                        t, names, flags, t) != 0)
            fail_msg("probe %s --threads %d: %s", flags, t, out);
    int rc = mp_test_shell(out, sizeof out, "MASKPOS_TEST_KILL_AFTER=3 %s probe %s --tokens %s --out %s/%sr --stats %s %s "
                                            "--checkpoint-every 2 --threads 1 --quiet", MP_TEST_BIN, model, ids, d, tag, names, flags);
    if (rc != 128 + SIGKILL) fail_msg("expected death by SIGKILL, got %d: %s", rc, out);
    rc = mp_test_run(out, sizeof out, "probe %s --tokens %s --out %s/%sr --stats %s %s --checkpoint-every 2 --resume", model, ids, d,
                     tag, names, flags);
    if (rc != 0 || !strstr(out, "2 of 8 sequences already done")) fail_msg("resume %s: %d: %s", flags, rc, out);
    snprintf(a, sizeof a, "%s/%s1", d, tag);
    snprintf(b, sizeof b, "%s/%s2", d, tag);
    const int n = folders_equal(a, b, "--threads 1 and 2");
    snprintf(b, sizeof b, "%s/%sr", d, tag);
    assert_int_equal(folders_equal(a, b, "kill and --resume"), n);
    print_message("%s: %d .npy the same at 1 and 2 threads and after a resume\n", flags, n);
    return n;
}

static void test_every_statistic_end_to_end(void **state) {
    (void)state;
    const char *d = mp_test_tmpdir();
    char model[256], ids[256], names[512], a[512], b[512];
    snprintf(model, sizeof model, "%s/m", d);
    model_make(model, "--arch llama --layers 2 --heads 4 --kv-heads 2 --vocab 300 --seed 7");
    snprintf(ids, sizeof ids, "%s/ids.npy", d);
    ids_write(ids, 8, 20, 300, -1, 11); /* 8: two held-out sequences, so the position probe's R² has its se */
    every_name(names, sizeof names, 0);
    same_at_threads_and_resume(model, ids, d, names, "--per-head", "t");
    /* each row's outputs are listed, written and finite */
    snprintf(a, sizeof a, "%s/t1/meta.json", d);
    json_t *meta = mp_json_read(a, NULL);
    assert_non_null(meta);
    int outs = 0;
    for (int id = 1; id < MP_PROBE_NSTATS; id++)
        for (int q = 0; q < MP_PROBE_STAT_OUTS && mp_probe_stats[id].outs[q].file; q++, outs++) {
            const char *f = mp_probe_stats[id].outs[q].file;
            if (!json_object_get(json_object_get(meta, "files"), f)) fail_msg("meta.json files lacks %s", f);
            snprintf(b, sizeof b, "%s/t1/%s", d, f);
            size_t n;
            double *x = npy_load_f64(b, &n, NULL);
            for (size_t i = 0; i < n; i++)
                if (!isfinite(x[i])) fail_msg("%s[%zu] = %g", f, i, x[i]);
            free(x);
        }
    json_decref(meta);
    print_message("--stats %s: %d outputs of the rows\n", names, outs);
    /* the residual stream of one sequence in 2 (--resid-stride): the same bytes at 1 and 2 threads and after a resume */
    same_at_threads_and_resume(model, ids, d, names, "--resid-stride 2", "s");
    /* and they are other sums than every sequence's: var_resid.npy differs, var_attn.npy does not */
    snprintf(a, sizeof a, "%s/s1/var_resid.npy", d);
    snprintf(b, sizeof b, "%s/t1/var_resid.npy", d);
    assert_false(files_equal(a, b));
    snprintf(a, sizeof a, "%s/s1/var_attn.npy", d);
    snprintf(b, sizeof b, "%s/t1/var_attn.npy", d);
    assert_true(files_equal(a, b));
}

static void test_accumulator_every_statistic(void **state) {
    (void)state;
    const char *d = mp_test_tmpdir();
    char model[256], ids[256], out[8192], names[512], a[512];
    enum { N = 3, S = 20, L = 2, H = 4 };
    snprintf(model, sizeof model, "%s/m", d);
    model_make(model, "--arch llama --layers 2 --heads 4 --kv-heads 2 --vocab 300 --seed 8");
    snprintf(ids, sizeof ids, "%s/ids.npy", d);
    ids_write(ids, N, S, 300, -1, 13);
    every_name(names, sizeof names, 1);
    int rc = mp_test_run(out, sizeof out, "probe %s --tokens %s --out %s/p --layers all --per-head --heads-f64 --stats %s --quiet",
                         model, ids, d, names);
    if (rc != 0) fail_msg("probe: %s", out);
    MaskposModel *m = NULL;
    if (maskpos_model_open(model, &m) != MASKPOS_OK) fail_msg("%s", maskpos_last_error());
    MaskposAccOptions o = {.n_layers = L, .n_heads = H, .seq = S, .causal = 1, .per_head = 1, .heads_f64 = 1, .stats = names};
    MaskposAcc *acc = NULL, *acc64 = NULL;
    if (maskpos_acc_new(&o, &acc) != MASKPOS_OK || maskpos_acc_new(&o, &acc64) != MASKPOS_OK)
        fail_msg("%s", maskpos_last_error());
    snprintf(a, sizeof a, "%s/ids.npy", d);
    size_t cnt;
    double *idd = npy_load_f64(a, &cnt, NULL);
    float *sc = malloc(sizeof(float) * L * H * S * S);
    double *sc64 = malloc(sizeof(double) * H * S * S);
    for (int s = 0; s < N; s++) {
        int32_t seq[S];
        for (int t = 0; t < S; t++) seq[t] = (int32_t)idd[s * S + t];
        if (maskpos_model_scores(m, seq, S, L, 0, sc) != MASKPOS_OK) fail_msg("%s", maskpos_last_error());
        for (int l = 0; l < L; l++) {
            const float *x = sc + (size_t)l * H * S * S;
            for (size_t k = 0; k < (size_t)H * S * S; k++) sc64[k] = x[k]; /* widened: the same values */
            if (maskpos_acc_add(acc, l, 1, MASKPOS_F32, x, NULL) != MASKPOS_OK ||
                maskpos_acc_add(acc64, l, 1, MASKPOS_F64, sc64, NULL) != MASKPOS_OK)
                fail_msg("%s", maskpos_last_error());
        }
    }
    char dir[512];
    snprintf(a, sizeof a, "%s/p", d);
    for (int k = 0; k < 2; k++) {
        MaskposResult *r = NULL;
        if (maskpos_acc_result(k ? acc64 : acc, &r) != MASKPOS_OK) fail_msg("%s", maskpos_last_error());
        snprintf(dir, sizeof dir, "%s/acc%d", d, k);
        if (maskpos_result_save(r, dir, 0) != MASKPOS_OK) fail_msg("%s", maskpos_last_error());
        const int n = folders_equal(dir, a, k ? "the accumulator fed float64 and the probe" : "the accumulator and the probe");
        print_message("--stats %s: %d .npy of the accumulator (%s) the probe's\n", names, n, k ? "float64" : "float32");
        assert_true(n >= 7);
        maskpos_result_free(r);
    }
    maskpos_acc_free(acc);
    maskpos_acc_free(acc64);
    free(sc64);
    maskpos_model_close(m);
    free(sc);
    free(idd);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rows_complete_and_named),    cmocka_unit_test(test_inputs_derived_from_rows),
        cmocka_unit_test(test_estimate_is_the_allocation), cmocka_unit_test(test_part_holds_every_statistic),
        cmocka_unit_test(test_stats_by_name_same_bytes),   cmocka_unit_test(test_checkpoint_of_other_statistics),
        cmocka_unit_test(test_api_accumulator_by_name),    cmocka_unit_test(test_every_statistic_end_to_end),
        cmocka_unit_test(test_accumulator_every_statistic),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
