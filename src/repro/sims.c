/* sims.c — see sims.h: the table of the parameter-free decoder's runs and the run of one entry.
 * Tested by: tests/test_reproduce.c.
 */
#include "repro/sims.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/json.h"    /* MP_VERSION */
#include "core/util.h"    /* mp_write_no_space */
#include "job/sim_out.h"  /* mp_sim_write_outputs */
#include "repro/store.h"  /* mp_repro_store_meta_same, mp_repro_store_stats */
#include "sim/simulate.h" /* mp_sim_run */

typedef struct PaperRun {
    const char *stage;  /* fig2, fig2ln, fig3, fig4 */
    const char *name;   /* folder under the stage */
    double alpha;
    MpNorm norm;
    const char *scale;  /* "1", "sqrt", "d" */
    int rope, causal;
    int seq;            /* 0: the base setting (50); else this S with B / 5 sequences */
} PaperRun;

static const PaperRun paper_runs[] = {
    {"fig2", "alpha_0", 0.0, MP_NORM_L2, "1", 0, 1, 0},
    {"fig2", "alpha_0.2", 0.2, MP_NORM_L2, "1", 0, 1, 0},
    {"fig2", "alpha_0.4", 0.4, MP_NORM_L2, "1", 0, 1, 0},
    {"fig2", "alpha_0.6", 0.6, MP_NORM_L2, "1", 0, 1, 0},
    {"fig2", "alpha_0.8", 0.8, MP_NORM_L2, "1", 0, 1, 0},
    {"fig2ln", "layernorm_sqrt", 0.0, MP_NORM_LAYERNORM, "sqrt", 0, 1, 0},
    {"fig2ln", "layernorm_d", 0.0, MP_NORM_LAYERNORM, "d", 0, 1, 0},
    {"fig4", "causal_alpha_0", 0.0, MP_NORM_L2, "1", 1, 1, 0},
    {"fig4", "causal_alpha_0.5", 0.5, MP_NORM_L2, "1", 1, 1, 0},
    {"fig4", "bidirectional_alpha_0", 0.0, MP_NORM_L2, "1", 1, 0, 0},
    /* fig3's yardstick: the parameter-free decoder at the embedded models' S, B / 5 sequences */
    {"fig3", "parameter_free_S128", 0.0, MP_NORM_L2, "1", 0, 1, MP_REPRO_MODEL_SEQ},
};
#define N_PAPER_RUNS ((int)(sizeof paper_runs / sizeof paper_runs[0]))

static void sim_settings(char *buf, size_t cap, const PaperRun *run, const MpSimConfig *c) {
    snprintf(buf, cap, "v%s B=%lld S=%d D=%d L=%d alpha=%g norm=%d scale=%s rope=%d causal=%d seed=%llu",
             MP_VERSION, (long long)c->batch, c->seq, c->dim, c->layers, run->alpha, (int)run->norm,
             run->scale, run->rope, run->causal, (unsigned long long)c->seed);
}

/* Reads back a finished run of these settings: its statistics (every metric must be there) and
 * its three maps. MP_OK, or MP_ERR and m is left empty (the run is then computed again). */
static int sim_reuse(MpReproMaps *m, const char *dir, const char *settings, const MpSimConfig *c) {
    json_t *meta = mp_repro_store_meta_same(dir, settings);
    if (!meta) return MP_ERR;
    MpErr e;
    int64_t sh[3];
    int rc = mp_repro_store_stats(m->stats, json_object_get(meta, "stats"), c->layers, &e) == MP_OK &&
                     mp_repro_store_num(&m->wall_s, meta, "sim_wall_time_s", &e) == MP_OK
                 ? MP_OK
                 : MP_ERR;
    json_decref(meta);
    const char *names[3] = {"scores.npy", "scores_se.npy", "scores_diagnorm.npy"};
    double **dst[3] = {&m->scores, &m->se, &m->diagnorm};
    for (int k = 0; k < 3 && rc == MP_OK; k++) {
        rc = mp_repro_store_f64(dst[k], sh, dir, names[k], 3, &e);
        if (rc == MP_OK && (sh[0] != c->layers || sh[1] != c->seq || sh[2] != c->seq))
            rc = mp_err_set(&e, "%s/%s: shape (%lld,%lld,%lld)", dir, names[k], (long long)sh[0], (long long)sh[1],
                            (long long)sh[2]);
    }
    if (rc != MP_OK) {
        printf("          %s: not reused (%s)\n", dir, e.msg);
        free(m->scores), free(m->se), free(m->diagnorm);
        m->scores = m->se = m->diagnorm = NULL;
        return MP_ERR;
    }
    m->L = c->layers;
    m->S = c->seq;
    m->n = c->batch;
    m->ok = m->skipped = 1;
    mp_repro_maps_signif(m, NULL);
    return MP_OK;
}

/* One simulation of the table into out/stage/name; MP_OK or MP_ERR (message printed). */
static int sim_run(MpReproCtx *c, const PaperRun *run) {
    char dir[4096], rel[128], settings[512];
    MpErr e;
    snprintf(rel, sizeof rel, "%s/%s", run->stage, run->name);
    if (snprintf(dir, sizeof dir, "%s/%s", c->out, rel) >= (int)sizeof dir) {
        fprintf(stderr, "maskpos reproduce: error: %s: path too long\n", c->out);
        return MP_ERR;
    }
    MpReproMaps *m = mp_repro_maps_add(c, rel, rel);
    MpSimConfig s = c->cfg->base;
    s.alpha = run->alpha;
    if (run->seq) {
        s.seq = run->seq;
        s.batch = s.batch / 5 > 100 ? s.batch / 5 : 100;
    }
    s.norm = run->norm;
    s.rope = run->rope;
    s.causal = run->causal;
    s.scale = !strcmp(run->scale, "1") ? 1.0 : !strcmp(run->scale, "sqrt") ? sqrt((double)s.dim) : (double)s.dim;
    sim_settings(settings, sizeof settings, run, &s);
    if (!c->cfg->force && sim_reuse(m, dir, settings, &s) == MP_OK) {
        printf("  %-7s %-24s up to date, skipped (--force to redo)\n", run->stage, run->name);
        return MP_OK;
    }
    MpSimResult r;
    memset(&r, 0, sizeof r);
    if (mp_sim_run(&r, &s, &e) != MP_OK ||
        mp_sim_write_outputs(dir, &s, run->scale, &r, 0, c->cfg->argc, c->cfg->argv, &e) != MP_OK) {
        fprintf(stderr, "maskpos reproduce: error: stage %s: %s\n", rel, e.msg);
        mp_repro_fail(c, rel);
        if (r.scores) mp_sim_result_free(&r);
        return MP_ERR;
    }
    mp_repro_store_meta_mark(dir, settings); /* meta.json was written last: the key goes into it */
    m->ok = 1;
    m->L = r.layers;
    m->S = r.seq;
    m->n = s.batch;
    m->scores = r.scores;
    m->se = r.se;
    m->diagnorm = r.diagnorm;
    memcpy(m->stats, r.stats, (size_t)r.layers * sizeof(MpPosStats));
    mp_repro_maps_signif(m, NULL);
    m->wall_s = r.wall_s;
    free(r.probs);
    free(r.stats);
    printf("  %-7s %-24s %6.1f s   NRI by layer:", run->stage, run->name, r.wall_s);
    for (int l = 0; l < m->L; l++) printf(" %.4f", m->stats[l].nri);
    printf("\n");
    return MP_OK;
}

int mp_repro_sims_run(MpReproCtx *c, const char *stage) {
    int failed = 0;
    for (int k = 0; k < N_PAPER_RUNS && !mp_write_no_space(); k++)
        if (!strcmp(paper_runs[k].stage, stage) && sim_run(c, &paper_runs[k]) != MP_OK) failed++;
    return failed;
}

int mp_repro_sims_entry(int k, const char **stage, const char **name) {
    if (k < 0 || k >= N_PAPER_RUNS) return 0;
    *stage = paper_runs[k].stage;
    *name = paper_runs[k].name;
    return 1;
}
