/* test_reproduce_store.c — the reuse layer and the registry of src/repro, called as a library:
 * a statistic missing from meta.json is an error naming it (never a 0), null is a non-finite
 * value, a short array is refused; settings keys are matched exactly and every stage.json field
 * is checked; inputs are located by environment variable first, and a named input that is not
 * there is not replaced by another; the stage table knows its names; mp_repro_run reports
 * progress per stage and stops cleanly when asked; the names that join the tables (a figure's
 * stage and panel runs, a stage's own names) are checked before any stage runs. */
#include "testutil.h"

#include <math.h>
#include <stdlib.h>

#include "core/json.h"   /* json_loads */
#include "core/util.h"   /* mp_file_exists */
#include "repro/expect.h" /* mp_repro_expect_check */
#include "repro/repro.h"  /* mp_repro_stage_name, mp_repro_stage_find, mp_repro_run_tables */
#include "repro/stage.h"  /* MpReproTables, the stage entries, mp_repro_figs_paper */
#include "repro/store.h"

static const char *stats_json =
    "[{\"layer\": 1, \"nri\": 0.25, \"residue_min\": -0.5, \"residue_max\": 0.75, \"residue_rms\": 0.125, "
    "\"noise_rms\": 0.0625, \"residue_z_rms\": 2.0, \"rising_row_share\": null, \"mean_slope\": -3.5},"
    " {\"layer\": 2, \"nri\": 0.5, \"residue_min\": -1, \"residue_max\": 1, \"residue_rms\": 0.5, "
    "\"noise_rms\": 0.25, \"residue_z_rms\": 4, \"rising_row_share\": 1, \"mean_slope\": 2}]";

static void test_stats_strict(void **state) {
    (void)state;
    json_error_t je;
    json_t *a = json_loads(stats_json, 0, &je);
    assert_non_null(a);
    MpPosStats st[2];
    MpErr e;
    assert_int_equal(mp_repro_store_stats(st, a, 2, &e), MP_OK);
    assert_true(st[0].nri == 0.25 && st[0].res_min == -0.5 && st[0].res_max == 0.75 && st[0].res_rms == 0.125);
    assert_true(st[0].noise_rms == 0.0625 && st[0].z_rms == 2.0 && st[0].mean_slope == -3.5);
    assert_true(isnan(st[0].rise_share)); /* null: written for a non-finite value */
    assert_true(st[1].z_rms == 4 && st[1].rise_share == 1);
    /* three layers asked of a two-layer run */
    assert_int_equal(mp_repro_store_stats(st, a, 3, &e), MP_ERR);
    assert_non_null(strstr(e.msg, "2 layers where 3 were run"));
    /* a missing metric in layer 2: an error naming it, not a 0 */
    json_object_del(json_array_get(a, 1), "noise_rms");
    st[1].noise_rms = 123;
    assert_int_equal(mp_repro_store_stats(st, a, 2, &e), MP_ERR);
    assert_string_equal(e.msg, "stats of layer 2: no number 'noise_rms'");
    /* a metric of the wrong type likewise */
    json_object_set_new(json_array_get(a, 1), "noise_rms", json_string("0.25"));
    assert_int_equal(mp_repro_store_stats(st, a, 2, &e), MP_ERR);
    assert_string_equal(e.msg, "stats of layer 2: no number 'noise_rms'");
    json_decref(a);
}

static void test_settings_keys(void **state) {
    (void)state;
    const char *d = mp_test_tmpdir();
    double wall = -1;
    assert_false(mp_repro_store_same(d, "k1", &wall, NULL)); /* no stage.json */
    mp_repro_store_mark(d, "k1", 2.5, NULL);
    assert_true(mp_repro_store_same(d, "k1", &wall, NULL));
    assert_true(wall == 2.5);
    assert_false(mp_repro_store_same(d, "k1 ", &wall, NULL)); /* exactly the key */
    assert_false(mp_repro_store_same(d, "k", &wall, NULL));
    /* extra fields come back to the stage that wrote them */
    json_t *x = json_object(), *back = NULL;
    json_object_set_new(x, "mean_nll", json_real(1.25));
    mp_repro_store_mark(d, "k2", 0, x);
    assert_true(mp_repro_store_same(d, "k2", &wall, &back));
    assert_true(json_number_value(json_object_get(back, "mean_nll")) == 1.25);
    json_decref(back);
    /* a wall time that is not a finite number >= 0: not reused */
    assert_int_equal(mp_test_shell(NULL, 0, "printf '{\"stage_settings\": \"k3\", \"wall_time_s\": -1}' > %s/stage.json", d), 0);
    assert_false(mp_repro_store_same(d, "k3", &wall, NULL));
    assert_int_equal(mp_test_shell(NULL, 0, "printf '{\"stage_settings\": \"k3\"}' > %s/stage.json", d), 0);
    assert_false(mp_repro_store_same(d, "k3", &wall, NULL));
    /* meta.json's stage_settings */
    assert_int_equal(mp_test_shell(NULL, 0, "printf '{\"n\": 3}' > %s/meta.json", d), 0);
    assert_null(mp_repro_store_meta_same(d, "s1"));
    mp_repro_store_meta_mark(d, "s1");
    json_t *m = mp_repro_store_meta_same(d, "s1");
    assert_non_null(m);
    assert_int_equal(json_integer_value(json_object_get(m, "n")), 3); /* the rest kept */
    json_decref(m);
    assert_null(mp_repro_store_meta_same(d, "s2"));
}

static void test_locate(void **state) {
    (void)state;
    const char *d = mp_test_tmpdir();
    char out[4096], file[600];
    snprintf(file, sizeof file, "%s/x.gguf", d);
    assert_int_equal(mp_test_shell(NULL, 0, "touch %s", file), 0);
    setenv("MP_TEST_LOCATE", file, 1);
    assert_int_equal(mp_repro_locate(out, sizeof out, "MP_TEST_LOCATE", "no/such/file", NULL), 1);
    assert_string_equal(out, file);
    assert_int_equal(mp_repro_locate(out, 8, "MP_TEST_LOCATE", "no/such/file", NULL), 0); /* does not fit */
    /* named but absent: not found, even though the fallback would exist */
    setenv("MP_TEST_LOCATE", "/nonexistent/x.gguf", 1);
    assert_int_equal(mp_repro_locate(out, sizeof out, "MP_TEST_LOCATE", "Makefile", NULL), 0);
    unsetenv("MP_TEST_LOCATE");
    /* not named: beside the build folder of the executable (this test: <repo>/build/tests/...) */
    assert_int_equal(mp_repro_locate(out, sizeof out, "MP_TEST_LOCATE", "data/third_party/stories260K/stories260K.gguf", NULL), 1);
    assert_true(mp_file_exists(out));
    assert_non_null(strstr(out, "data/third_party/stories260K/stories260K.gguf"));
    /* the embedded models folder passes only with all three of its files */
    assert_int_equal(mp_repro_models_ok(d), 0);
    char models[600];
    snprintf(models, sizeof models, "%s/models", MP_SOURCE_DIR);
    assert_int_equal(mp_repro_models_ok(models), 1);
}

static void test_stage_table(void **state) {
    (void)state;
    static const char *names[] = {"fig1", "fig2", "fig2ln", "fig3", "fig4", "fig5", "recency", "length", "stories", "beyond"};
    for (int k = 0; k < 10; k++) {
        assert_string_equal(mp_repro_stage_name(k), names[k]);
        assert_int_equal(mp_repro_stage_find(names[k]), k);
    }
    assert_null(mp_repro_stage_name(10));
    assert_int_equal(mp_repro_stage_find("fig9"), -1);
    assert_int_equal(mp_repro_stage_find(""), -1);
}

/* The stage runner as a library call: the progress callback sees every stage asked for, and a
 * nonzero return stops before the next one (the report holds what ran). */
typedef struct Calls {
    int n, stop_at;
    int64_t done[8], total[8];
} Calls;

static int record(void *ctx, int64_t done, int64_t total) {
    Calls *c = ctx;
    if (c->n < 8) c->done[c->n] = done, c->total[c->n] = total;
    c->n++;
    return done == c->stop_at;
}

/* A small run into out (B = 200, one thread), no stage asked for yet. */
static void small_config(MpReproConfig *cfg, const char *out) {
    memset(cfg, 0, sizeof *cfg);
    mp_sim_config_default(&cfg->base);
    cfg->base.batch = 200;
    cfg->base.threads = 1;
    cfg->out = out;
    cfg->compute = "f32";
}

static void test_run_progress(void **state) {
    (void)state;
    const char *d = mp_test_tmpdir();
    char out[600], path[700];
    snprintf(out, sizeof out, "%s/r", d);
    MpReproConfig cfg;
    small_config(&cfg, out);
    cfg.stages = 1u << mp_repro_stage_find("fig1") | 1u << mp_repro_stage_find("fig2ln");
    Calls calls = {.stop_at = -1};
    cfg.progress = record;
    cfg.progress_ctx = &calls;
    MpReproSummary sum;
    MpErr e;
    assert_int_equal(mp_repro_run(&sum, &cfg, &e), MP_OK);
    assert_int_equal(calls.n, 3);
    assert_true(calls.done[0] == 0 && calls.done[1] == 1 && calls.done[2] == 2 && calls.total[2] == 2);
    assert_int_equal(sum.failed, 0);
    assert_int_equal(sum.nrows, 4); /* Fig. 1 S21, S31, S32 and the LayerNorm appendix */
    snprintf(path, sizeof path, "%s/fig2ln/layernorm_d/scores.npy", out);
    assert_true(mp_file_exists(path));
    /* stopped after the first stage: the second does not run, the report says what ran */
    snprintf(out, sizeof out, "%s/s", d);
    calls = (Calls){.stop_at = 1};
    assert_int_equal(mp_repro_run(&sum, &cfg, &e), MP_ERR);
    assert_string_equal(e.msg, MP_JOB_STOPPED_MSG);
    assert_int_equal(calls.n, 2);
    snprintf(path, sizeof path, "%s/fig1/layer2_scores.npy", out);
    assert_true(mp_file_exists(path));
    snprintf(path, sizeof path, "%s/fig2ln", out);
    assert_false(mp_file_exists(path));
    snprintf(path, sizeof path, "%s/report.md", out);
    assert_true(mp_file_exists(path));
    assert_int_equal(sum.nrows, 3);
}

/* Issue 31: a stage folder that cannot be cleared (a file its marker does not list: yours, or of
 * an older maskpos) fails the stage with one error line, before its run (was: a warning, then
 * the run, whose claim failed with a second line), and nothing in it is removed. */
static int fake_runs;
static int fake_run(void *arg, const char *dir) {
    (void)arg, (void)dir;
    fake_runs++;
    return MP_OK;
}
static int fake_load(void *obj, const char *dir) {
    (void)obj, (void)dir;
    return MP_OK;
}
static void fake_release(void *obj) { (void)obj; }

static void test_stage_clear_refused(void **state) {
    (void)state;
    const char *d = mp_test_tmpdir();
    char dir[512], p[600];
    MpErr e;
    snprintf(dir, sizeof dir, "%s/stage", d);
    assert_int_equal(mp_mkdir_p(dir, &e), MP_OK);
    snprintf(p, sizeof p, "%s/.maskpos-run", dir);
    mp_test_write_file(p, "probe\n", 6); /* a marker that lists nothing */
    snprintf(p, sizeof p, "%s/scores.npy", dir);
    mp_test_write_file(p, "mine", 4);
    const MpReproStoreKind k = {"probe", fake_run, fake_load, fake_release};
    int skipped = 0;
    double wall = 0;
    fake_runs = 0;
    assert_int_equal(mp_repro_store_run(&k, NULL, NULL, dir, "key", 1, &skipped, &wall), MP_ERR);
    assert_int_equal(fake_runs, 0);
    assert_true(mp_file_exists(p));
    /* a marker that lists the file: cleared, and the stage runs */
    snprintf(p, sizeof p, "%s/.maskpos-run", dir);
    mp_test_write_file(p, "probe\nscores.npy\n", 17);
    assert_int_equal(mp_repro_store_run(&k, NULL, NULL, dir, "key", 1, &skipped, &wall), MP_OK);
    assert_int_equal(fake_runs, 1);
    snprintf(p, sizeof p, "%s/scores.npy", dir);
    assert_false(mp_file_exists(p));
}

/* Issue 27 item 4: the tables are checked when they are registered, before any stage runs. A
 * figure whose panel run is mistyped (the old code left the figure out of the report without a
 * word), a figure of a stage not in the table, and a stage whose own check fails each stop the
 * run with one line naming the figure, run or stage; the stage does not run and writes nothing.
 * The same tables with the names right run. */
static int spy_runs;
static int spy_run(MpReproCtx *c) {
    (void)c;
    spy_runs++;
    return 0;
}
static int spy_check_fails(MpErr *e) { return mp_err_set(e, "configuration x: no expected value \"recency.x\""); }

static void test_tables_checked_first(void **state) {
    (void)state;
    const char *d = mp_test_tmpdir();
    char out[600], path[700];
    MpReproConfig cfg;
    small_config(&cfg, out);
    cfg.stages = 3u; /* both stages of the tables below */
    MpReproSummary sum;
    MpErr e;
    assert_int_equal(mp_repro_expect_check(&e), MP_OK); /* the built-in table of expected values */

    MpReproStage spy = {.name = "spy", .run = spy_run, .runs = (const char *const[]){"spy/a", NULL}};
    const MpReproStage *stages[] = {&mp_repro_stage_fig2, &spy};
    MpReproFigure figs[3] = {mp_repro_figs_paper[1], {0}, {0}}; /* fig2/figure2.png, then the end */
    assert_string_equal(figs[0].file, "fig2/figure2.png");
    const MpReproFigure *tables[] = {figs};
    const MpReproTables t = {stages, 2, tables, 1};
    struct {
        const char *what, *want1, *want2;
    } cases[4] = {
        {"panel run", "figure fig2/figure2.png", "panel run \"fig2/alpha_O\" is not a run any stage declares"},
        {"figure stage", "figure spy/f.png", "stage \"spy2\" is not in the stage table"},
        {"stage check", "stage spy", "no expected value \"recency.x\""},
        {"panel of another stage's run", "figure spy/f.png", "panel run \"spy/b\""},
    };
    for (int k = 0; k < 4; k++) {
        MpReproFigure *f = &figs[0];
        *f = mp_repro_figs_paper[1];
        figs[1] = (MpReproFigure){0};
        spy.check = NULL;
        if (k == 0) f->panels[0].run = "fig2/alpha_O";
        if (k == 1) figs[1] = (MpReproFigure){.stage = "spy2", .file = "spy/f.png", .title = "t", .caption_text = "c",
                                              .panels = {{"spy/a", "", 0, 0}}};
        if (k == 2) spy.check = spy_check_fails;
        if (k == 3) figs[1] = (MpReproFigure){.stage = "spy", .file = "spy/f.png", .title = "t", .caption_text = "c",
                                              .panels = {{"spy/a", "", 0, 0}, {"spy/b", "", 0, 0}}};
        snprintf(out, sizeof out, "%s/bad%d", d, k);
        spy_runs = 0;
        assert_int_equal(mp_repro_run_tables(&sum, &cfg, &t, &e), MP_ERR);
        print_message("%s: %s\n", cases[k].what, e.msg);
        assert_non_null(strstr(e.msg, cases[k].want1));
        assert_non_null(strstr(e.msg, cases[k].want2));
        assert_null(strchr(e.msg, '\n'));
        assert_int_equal(spy_runs, 0); /* before any stage ran */
        assert_false(mp_file_exists(out));
    }
    /* the names right: both stages run, the figure is drawn, its rows are there */
    figs[0] = mp_repro_figs_paper[1];
    figs[1] = (MpReproFigure){0};
    spy.check = NULL;
    snprintf(out, sizeof out, "%s/good", d);
    spy_runs = 0;
    assert_int_equal(mp_repro_run_tables(&sum, &cfg, &t, &e), MP_OK);
    assert_int_equal(spy_runs, 1);
    assert_int_equal(sum.failed, 0);
    assert_int_equal(sum.nrows, 6); /* Fig. 2: layers 2-4 x first and previous key (the closed-form row needs fig1) */
    snprintf(path, sizeof path, "%s/fig2/figure2.png", out);
    assert_true(mp_file_exists(path));
}

/* Issue 27 item 4: the length stage holds at most MP_REPRO_LENGTH_LENS lengths per model; a
 * probe that wrote more (here a meta.json given 30) fails the stage with one line naming the
 * file, where the old code kept the first 24 and wrote its rows without a word. */
static void test_length_limit_refused(void **state) {
    (void)state;
    const char *d = mp_test_tmpdir();
    char out[600], path[700], models[600], stories[600];
    snprintf(out, sizeof out, "%s/len", d);
    snprintf(models, sizeof models, "%s/models", MP_SOURCE_DIR);
    snprintf(stories, sizeof stories, "%s/data/third_party/stories260K/stories260K.gguf", MP_SOURCE_DIR);
    MpReproConfig cfg;
    small_config(&cfg, out);
    cfg.quick = 1;
    cfg.model_n = 8; /* 8 rows per model: the stage, small */
    cfg.models = models;
    cfg.stories = stories;
    cfg.stories_n = 8;
    cfg.stages = 1u << mp_repro_stage_find("length");
    MpReproSummary sum;
    MpErr e;
    assert_int_equal(mp_repro_run(&sum, &cfg, &e), MP_OK);
    assert_int_equal(sum.failed, 0);
    snprintf(path, sizeof path, "%s/length/none/meta.json", out);
    json_error_t je;
    json_t *m = json_load_file(path, 0, &je);
    assert_non_null(m);
    json_t *len = json_object_get(m, "length"), *ls = json_object_get(len, "lengths");
    assert_true(json_array_size(ls) > 0 && json_array_size(ls) < 24);
    while (json_array_size(ls) < 30) json_array_append_new(ls, json_integer(1000));
    static const char *per_layer[3] = {"recency_probability", "recency_probability_se", "residue_block_z"};
    for (int q = 0; q < 3; q++) { /* every layer's series as long, so only the count is wrong */
        json_t *a = json_object_get(len, per_layer[q]);
        assert_true(json_array_size(a) > 0);
        for (size_t l = 0; l < json_array_size(a); l++)
            while (json_array_size(json_array_get(a, l)) < 30) json_array_append_new(json_array_get(a, l), json_real(0.5));
    }
    assert_int_equal(json_dump_file(m, path, 0), 0);
    json_decref(m);
    assert_int_equal(mp_repro_run(&sum, &cfg, &e), MP_OK); /* the probes are reused, the stage fails */
    assert_int_equal(sum.failed, 1);
    snprintf(path, sizeof path, "%s/report.md", out);
    char *md = mp_test_read_text(path);
    assert_non_null(md);
    assert_non_null(strstr(md, "FAILED stages (see the command's error output): length/none."));
    free(md);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_stats_strict),
        cmocka_unit_test(test_settings_keys),
        cmocka_unit_test(test_locate),
        cmocka_unit_test(test_stage_table),
        cmocka_unit_test(test_run_progress), cmocka_unit_test(test_stage_clear_refused),
        cmocka_unit_test(test_tables_checked_first), cmocka_unit_test(test_length_limit_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
