/* test_probe_opts.c — the probe's option table (src/job/probe_opts.h) against its consumers: every
 * row is a flag `maskpos probe` accepts, with the table's range and message; every row that is
 * not the command line's own is a setting of the C API (maskpos_probe_option_*, maskpos_config_set,
 * maskpos_probe: device and heads-f64 included, refused at the table's bounds with its message);
 * a config written as settings (what MPI ranks receive, what reproduce's reuse key records) reads
 * back into the same config; the checks across options give the command's messages.
 *
 *   make build/tests/test_probe_opts && build/tests/test_probe_opts
 */
#include "testutil.h"

#include "job/probe_opts.h"
#include "maskpos.h"

/* The probe's rows take their declaration's range (none narrows it). */
static int64_t row_lo(const MpOpt *o) { return o->decl->lo; }
static int64_t row_hi(const MpOpt *o) { return o->decl->hi; }

/* A value the row accepts: its lower bound, or a word of its kind. */
static const char *row_value(char buf[64], const MpOpt *o) {
    switch ((MpOptKind)o->decl->kind) {
    case MP_OPT_BOOL: return NULL;
    case MP_OPT_INT:
    case MP_OPT_I64:
    case MP_OPT_U64: snprintf(buf, 64, "%lld", (long long)row_lo(o)); return buf;
    case MP_OPT_DOUBLE: snprintf(buf, 64, "%g", o->decl->dlo); return buf;
    case MP_OPT_CHOICE: return o->decl->choices[1].word; /* compute: bf16 */
    case MP_OPT_STRING: return o->decl->check ? "cpu" : "1"; /* device: a backend that runs here */
    case MP_OPT_CUSTOM:
    case MP_OPT_KIND_COUNT: break;
    }
    return "?";
}

/* Every row has a name, a help text, a known kind; names are unique; a switch has no metavar and
 * every other flag has one. */
static void test_rows_complete(void **state) {
    (void)state;
    for (int i = 0; i < MP_PROBE_OPT_COUNT; i++) {
        const MpOpt *o = &mp_probe_opts[i];
        if (!mp_opt_name(o) || !(mp_opt_help(o) || o->decl->help_fn)) fail_msg("row %d has no name or no help", i);
        assert_true(o->decl->kind >= MP_OPT_BOOL && o->decl->kind < MP_OPT_KIND_COUNT && o->decl->kind != MP_OPT_CUSTOM);
        assert_int_equal(mp_probe_opt_find(mp_opt_name(o)), i);
        if ((o->decl->kind == MP_OPT_BOOL) != (mp_opt_arg(o) == NULL))
            fail_msg("--%s: a switch has no metavar, a value has one", mp_opt_name(o));
        if (o->field == MP_OPT_NO_FIELD && !(o->flags & MP_OPT_CLI))
            fail_msg("--%s: an option without a field is the command line's own", mp_opt_name(o));
    }
    assert_int_equal(mp_probe_opt_find("no-such-option"), -1);
}

/* Every flag row is accepted by `maskpos probe` (the run then fails on the missing model, which the
 * message names), and --help shows every row with its metavar. */
static void test_cli_accepts_every_row(void **state) {
    (void)state;
    const char *d = mp_test_tmpdir();
    char out[8192], cmd[1024], buf[64];
    for (int i = 0; i < MP_PROBE_OPT_COUNT; i++) {
        const MpOpt *o = &mp_probe_opts[i];
        if ((o->flags & MP_OPT_POSITIONAL) || i == MP_PROBE_OPT_HELP) continue;
        const char *v = row_value(buf, o);
        /* the other flags the checks across options ask for */
        const int pos = i == MP_PROBE_OPT_POS_DIM || i == MP_PROBE_OPT_POS_STRIDE || i == MP_PROBE_OPT_POS_RIDGE;
        const char *base = i == MP_PROBE_OPT_TOKENS ? "--tokens t.npy"
                           : pos                    ? "--data d.txt --n 2 --seq 4 --per-head --stats position"
                                                    : "--data d.txt --n 2 --seq 4 --per-head";
        snprintf(cmd, sizeof cmd, "probe %s/no-model %s --%s %s --out %s/o-%s", d, i == MP_PROBE_OPT_TOKENS ? "" : base,
                 mp_opt_name(o), v ? v : "", d, mp_opt_name(o));
        if (i == MP_PROBE_OPT_OUT) snprintf(cmd, sizeof cmd, "probe %s/no-model %s --out %s/o-out", d, base, d);
        const int rc = mp_test_run(out, sizeof out, "%s", cmd);
        if (rc != 2 || !strstr(out, "no-model")) fail_msg("maskpos %s: want exit 2 naming the model, got %d: %s", cmd, rc, out);
    }
    assert_int_equal(mp_test_run(out, sizeof out, "probe --help"), 0);
    for (int i = 0; i < MP_PROBE_OPT_COUNT; i++) {
        const MpOpt *o = &mp_probe_opts[i];
        if ((o->flags & MP_OPT_POSITIONAL) || i == MP_PROBE_OPT_HELP) continue;
        snprintf(buf, sizeof buf, "\n  --%s%s%s ", mp_opt_name(o), mp_opt_arg(o) ? " " : "", mp_opt_arg(o) ? mp_opt_arg(o) : "");
        if (!strstr(out, buf)) fail_msg("probe --help lacks '%s'", buf + 1);
    }
}

/* A number outside a row's range, or not a number, is refused by the command line and by the C
 * API with the same one line, built from the row. */
static void test_ranges_refused_with_the_tables_message(void **state) {
    (void)state;
    char out[8192], want[256], v[64];
    for (int i = 0; i < MP_PROBE_OPT_COUNT; i++) {
        const MpOpt *o = &mp_probe_opts[i];
        const int integer = o->decl->kind == MP_OPT_INT || o->decl->kind == MP_OPT_I64 || o->decl->kind == MP_OPT_U64;
        if (!integer && o->decl->kind != MP_OPT_DOUBLE) continue;
        for (int bad = 0; bad < 2; bad++) {
            if (bad == 0 && integer) {
                snprintf(v, sizeof v, "%lld", (long long)row_lo(o) - 1);
                snprintf(want, sizeof want, "--%s: %s is outside [%lld, %lld]", mp_opt_name(o), v, (long long)row_lo(o), (long long)row_hi(o));
            } else if (bad == 0) {
                snprintf(v, sizeof v, "%g", o->decl->dhi * 2);
                snprintf(want, sizeof want, "--%s: %s is outside [%g, %g]", mp_opt_name(o), v, o->decl->dlo, o->decl->dhi);
            } else {
                snprintf(v, sizeof v, "x1");
                snprintf(want, sizeof want, "--%s: 'x1' is %s", mp_opt_name(o), integer ? "not an integer" : "not a number");
            }
            const int rc = mp_test_run(out, sizeof out, "probe m --tokens t.npy --out o --%s %s", mp_opt_name(o), v);
            if (rc != 2 || !strstr(out, want)) fail_msg("probe --%s %s: want exit 2 and '%s', got %d: %s", mp_opt_name(o), v, want, rc, out);
            if (o->flags & MP_OPT_CLI) continue;
            MpProbeConfig c;
            mp_probe_config_init(&c);
            MpErr e;
            assert_int_equal(mp_probe_opt_set(&c, i, v, &e), MP_ERR);
            assert_string_equal(e.msg, want);
        }
    }
    /* the examples the brief and tests/test_badinput.c name */
    assert_int_equal(mp_test_run(out, sizeof out, "probe m --tokens t.npy --out o --seq 0"), 2);
    assert_non_null(strstr(out, "maskpos probe: error: --seq: 0 is outside [1, 1048576]"));
    assert_int_equal(mp_test_run(out, sizeof out, "probe m --tokens t.npy --out o --seq x"), 2);
    assert_non_null(strstr(out, "maskpos probe: error: --seq: 'x' is not an integer"));
}

/* The C API lists exactly the rows that are neither the command line's own nor MODEL, in table
 * order, and takes each of them as a setting. */
static void test_api_lists_and_takes_every_setting(void **state) {
    (void)state;
    int k = 0;
    char buf[64];
    for (int i = 0; i < MP_PROBE_OPT_COUNT; i++) {
        const MpOpt *o = &mp_probe_opts[i];
        if (o->flags & (MP_OPT_CLI | MP_OPT_POSITIONAL)) continue;
        assert_string_equal(maskpos_probe_option_name(k), mp_opt_name(o));
        char made[1024];
        if (!mp_opt_help(o)) o->decl->help_fn(made, sizeof made); /* --device's, from the device table */
        assert_string_equal(maskpos_probe_option_help(k), mp_opt_help(o) ? mp_opt_help(o) : made);
        const char *kind = maskpos_probe_option_kind(k);
        assert_non_null(kind);
        assert_int_equal(!strcmp(kind, "bool"), o->decl->kind == MP_OPT_BOOL);
        MaskposConfig *c = maskpos_config_new("probe");
        const char *v = row_value(buf, o);
        if (maskpos_config_set(c, mp_opt_name(o), v ? v : "1") != MASKPOS_OK)
            fail_msg("maskpos_config_set(\"%s\"): %s", mp_opt_name(o), maskpos_last_error());
        maskpos_config_free(c);
        k++;
    }
    assert_int_equal(maskpos_probe_option_count(), k);
    assert_null(maskpos_probe_option_name(k));
    assert_null(maskpos_probe_option_name(-1));
    MaskposConfig *c = maskpos_config_new("probe");
    assert_int_equal(maskpos_config_set(c, "out", "x"), MASKPOS_ERR); /* the command line's own */
    assert_int_equal(maskpos_config_set(c, "model", "x"), MASKPOS_ERR); /* the API's model handle */
    maskpos_config_free(c);
}

/* device and heads-f64 reach the probe from the C API: float64 per-head maps, and a backend
 * that is not built refused with the command's line. */
static void test_api_device_and_heads_f64(void **state) {
    (void)state;
    MaskposModel *m = NULL;
    assert_int_equal(maskpos_model_open(MP_SOURCE_DIR "/models/rope", &m), MASKPOS_OK);
    int32_t ids[2 * 8];
    for (int i = 0; i < 16; i++) ids[i] = (i * 7 + 3) % 50;
    MaskposConfig *c = maskpos_config_new("probe");
    assert_int_equal(maskpos_config_set(c, "device", "cpu"), MASKPOS_OK);
    assert_int_equal(maskpos_config_set(c, "per-head", "1"), MASKPOS_OK);
    assert_int_equal(maskpos_config_set(c, "heads_f64", "true"), MASKPOS_OK);
    assert_int_equal(maskpos_config_set(c, "layers", "1"), MASKPOS_OK);
    MaskposResult *r = NULL;
    if (maskpos_probe(m, c, ids, 2, 8, NULL, NULL, &r) != MASKPOS_OK) fail_msg("maskpos_probe: %s", maskpos_last_error());
    int dt = -1, nd = 0;
    int64_t shp[MASKPOS_MAX_DIMS] = {0};
    assert_non_null(maskpos_result_array(r, "scores_heads", &dt, &nd, shp));
    assert_int_equal(dt, MASKPOS_F64);
    assert_int_equal(nd, 4);
    maskpos_result_free(r);
    /* heads-f64 without per-head: the command's cross-option message */
    assert_int_equal(maskpos_config_set(c, "per-head", "0"), MASKPOS_OK);
    assert_int_equal(maskpos_probe(m, c, ids, 2, 8, NULL, NULL, &r), MASKPOS_ERR);
    assert_string_equal(maskpos_last_error(), "--heads-f64 goes with --per-head");
    assert_int_equal(maskpos_config_set(c, "heads-f64", "0"), MASKPOS_OK);
    assert_int_equal(maskpos_config_set(c, "device", "no-such-device"), MASKPOS_OK); /* kept as a word */
    assert_int_equal(maskpos_probe(m, c, ids, 2, 8, NULL, NULL, &r), MASKPOS_ERR);
    char out[4096];
    assert_int_equal(mp_test_run(out, sizeof out, "probe m --tokens t.npy --out o --device no-such-device"), 2);
    assert_non_null(strstr(out, maskpos_last_error()));
    maskpos_config_free(c);
    maskpos_model_close(m);
}

/* A config with every field away from its default, written as settings and read back, is the
 * same config (what rank 0 hands the other ranks); the key form leaves the run's own rows out. */
static void test_settings_round_trip(void **state) {
    (void)state;
    MpProbeConfig a, b;
    mp_probe_config_init(&a);
    MpErr e;
    char buf[64];
    int fields = 0;
    for (int i = 0; i < MP_PROBE_OPT_COUNT; i++) {
        const MpOpt *o = &mp_probe_opts[i];
        if (o->field == MP_OPT_NO_FIELD) continue;
        const char *v = o->decl->kind == MP_OPT_INT || o->decl->kind == MP_OPT_I64 || o->decl->kind == MP_OPT_U64
                            ? (snprintf(buf, sizeof buf, "%lld", (long long)row_lo(o) + 1), buf)
                        : o->decl->kind == MP_OPT_DOUBLE ? "0.1"
                        : o->decl->kind == MP_OPT_STRING && !o->decl->check ? mp_opt_name(o) /* a different text per row */
                                                          : row_value(buf, o);
        if (mp_probe_opt_set(&a, i, v, &e) != MP_OK) fail_msg("--%s %s: %s", mp_opt_name(o), v ? v : "", e.msg);
        fields++;
    }
    const size_t len = mp_probe_opts_write(NULL, 0, &a, 0, '\0');
    char *s = malloc(len + 1);
    assert_int_equal(mp_probe_opts_write(s, len + 1, &a, 0, '\0'), len);
    mp_probe_config_init(&b);
    int n = 0;
    for (const char *p = s; p < s + len; p += strlen(p) + 1, n++)
        if (mp_probe_opt_parse(&b, p, &e) != MP_OK) fail_msg("'%s': %s", p, e.msg);
    assert_int_equal(n, fields);
    for (int i = 0; i < MP_PROBE_OPT_COUNT; i++) {
        const MpOpt *o = &mp_probe_opts[i];
        if (o->field == MP_OPT_NO_FIELD) continue;
        const char *pa = (const char *)&a + o->field, *pb = (const char *)&b + o->field;
        if (o->decl->kind == MP_OPT_STRING)
            assert_string_equal(*(const char *const *)pa, *(const char *const *)pb);
        else if (memcmp(pa, pb, o->decl->kind == MP_OPT_DOUBLE || o->decl->kind == MP_OPT_I64 || o->decl->kind == MP_OPT_U64 ? 8 : sizeof(int)))
            fail_msg("--%s did not survive the settings", mp_opt_name(o));
    }
    free(s);
    /* the key form: one line, no threads, memory cap or folder; the defaults are not written */
    char key[4096];
    mp_probe_opts_write(key, sizeof key, &a, MP_OPT_RUN, ' ');
    for (int i = 0; i < MP_PROBE_OPT_COUNT; i++) { /* every row that changes the result is in the key */
        const MpOpt *o = &mp_probe_opts[i];
        snprintf(buf, sizeof buf, "%s=", mp_opt_name(o));
        if (o->field != MP_OPT_NO_FIELD && !(o->flags & MP_OPT_RUN) && !strstr(key, buf))
            fail_msg("the key form lacks --%s: '%s'", mp_opt_name(o), key);
    }
    assert_non_null(strstr(key, "heads-f64=1 "));
    assert_non_null(strstr(key, "device=cpu "));
    assert_null(strstr(key, "threads="));
    assert_null(strstr(key, "out="));
    assert_null(strstr(key, "max-mem-gib="));
    mp_probe_config_init(&b);
    assert_int_equal(mp_probe_opts_write(key, sizeof key, &b, 0, ' '), 0);
    assert_string_equal(key, "");
}

/* The checks across options, one message each (the command's). */
static void test_cross_checks(void **state) {
    (void)state;
    MpProbeConfig c;
    MpErr e;
    mp_probe_config_init(&c);
    assert_int_equal(mp_probe_opts_check(&c, &e), MP_ERR);
    assert_string_equal(e.msg, "--tokens FILE or --data TEXT is required");
    c.tokens_path = "t", c.data = "d";
    assert_int_equal(mp_probe_opts_check(&c, &e), MP_ERR);
    assert_string_equal(e.msg, "--tokens and --data exclude each other");
    c.tokens_path = NULL;
    assert_int_equal(mp_probe_opts_check(&c, &e), MP_ERR);
    assert_string_equal(e.msg, "--data needs --n N and --seq S");
    c.n = 1, c.seq = 4;
    assert_int_equal(mp_probe_opts_check(&c, &e), MP_OK);
    c.data = NULL, c.tokens_path = "t", c.pack = 1;
    assert_int_equal(mp_probe_opts_check(&c, &e), MP_ERR);
    assert_string_equal(e.msg, "--tokenizer, --field, --whole, --shuffle, --no-special and --pack go with --data");
    c.pack = 0, c.heads_f64 = 1;
    assert_int_equal(mp_probe_opts_check(&c, &e), MP_ERR);
    assert_string_equal(e.msg, "--heads-f64 goes with --per-head");
    char out[4096];
    assert_int_equal(mp_test_run(out, sizeof out, "probe m --tokens t.npy --out o --heads-f64"), 2);
    assert_non_null(strstr(out, "maskpos probe: error: --heads-f64 goes with --per-head"));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rows_complete),
        cmocka_unit_test(test_cli_accepts_every_row),
        cmocka_unit_test(test_ranges_refused_with_the_tables_message),
        cmocka_unit_test(test_api_lists_and_takes_every_setting),
        cmocka_unit_test(test_api_device_and_heads_f64),
        cmocka_unit_test(test_settings_round_trip),
        cmocka_unit_test(test_cross_checks),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
