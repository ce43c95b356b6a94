/* ctx.c — see ctx.h: the context of the stages, its runs and its state blocks. */
#include "repro/ctx.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/err.h" /* MP_ASSERT, mp_calloc_or_die, mp_grow_or_die */
#include "viz/signif.h" /* mp_signif_note_meta, mp_signif_sim_resolved */

void mp_repro_ctx_init(MpReproCtx *c, const MpReproConfig *cfg) {
    memset(c, 0, sizeof *c);
    c->cfg = cfg;
    c->out = cfg->out;
    c->n_embedded = cfg->model_n ? cfg->model_n : cfg->quick ? 400 : 8000; /* 8000 x 128 = the paper's 1000 x 1024 tokens */
    if (cfg->model) {
        const char *slash = strrchr(cfg->model, '/');
        c->user_name = slash && slash[1] ? slash + 1 : cfg->model;
    }
}

void mp_repro_ctx_free(MpReproCtx *c) {
    for (int k = 0; k < c->nruns; k++) {
        mp_repro_maps_free(c->runs[k]);
        free(c->runs[k]);
    }
    free(c->runs);
    mp_repro_gram_free(&c->gram);
    for (int k = c->nstates - 1; k >= 0; k--) { /* in reverse order of creation */
        if (c->states[k].release) c->states[k].release(c->states[k].data);
        free(c->states[k].data);
    }
    free(c->states);
    free(c->failed_names);
    if (c->have_th) mp_theory_free(&c->th);
    memset(c, 0, sizeof *c);
}

int mp_repro_fail(MpReproCtx *c, const char *what) {
    const size_t n = c->failed_names ? strlen(c->failed_names) : 0, add = strlen(what) + 2;
    char *grown = realloc(c->failed_names, n + add + 1);
    if (!grown) mp_die("out of memory for the names of the failed stages");
    snprintf(grown + n, add + 1, "%s%s", n ? ", " : "", what);
    c->failed_names = grown;
    return 1;
}

void mp_repro_maps_signif(MpReproMaps *m, const json_t *meta) {
    for (int l = 0; l < m->L && l < 64; l++) {
        MpFigNote *nt = &m->note[l];
        if (meta) {
            const int r = mp_signif_note_meta(nt->text, sizeof nt->text, meta, l);
            const json_t *t = json_array_get(json_object_get(json_object_get(meta, "residue_noise"), "block_z_threshold"), (size_t)l);
            m->resolved[l] = r == 0;
            nt->unresolved = r != 0;
            m->z_threshold[l] = json_is_number(t) ? json_number_value(t) : NAN;
            const json_t *c = json_array_get(json_object_get(meta, "nri_corrected"), (size_t)l);
            m->nri_corr[l] = json_is_number(c) ? json_number_value(c) : NAN;
        } else {
            m->z_threshold[l] = MP_SIGNIF_SIM_Z;
            m->nri_corr[l] = NAN; /* simulations keep no per-sequence sums (docs/metrics.md) */
            m->resolved[l] = mp_signif_sim_resolved(&m->stats[l], m->n);
            nt->unresolved = mp_signif_note(nt->text, sizeof nt->text, "rms/noise", m->stats[l].z_rms, MP_SIGNIF_SIM_Z,
                                            m->resolved[l], m->n, NAN);
        }
    }
}

MpReproMaps *mp_repro_maps_add(MpReproCtx *c, const char *dir, const char *label) {
    c->runs = mp_grow_or_die(c->runs, &c->cap_runs, c->nruns, sizeof *c->runs, "reproduce's runs");
    MpReproMaps *m = mp_calloc_or_die(1, sizeof *m, "reproduce run");
    MP_ASSERT(strlen(dir) < sizeof m->dir && (!label || strlen(label) < sizeof m->label));
    snprintf(m->dir, sizeof m->dir, "%s", dir);
    snprintf(m->label, sizeof m->label, "%s", label ? label : "");
    c->runs[c->nruns++] = m;
    return m;
}

const MpReproMaps *mp_repro_maps(const MpReproCtx *c, const char *dir) {
    MP_ASSERT(!c->declares || c->declares(c->tables, dir));
    for (int k = c->nruns - 1; k >= 0; k--)
        if (!strcmp(c->runs[k]->dir, dir)) return c->runs[k]->ok ? c->runs[k] : NULL;
    return NULL;
}

void mp_repro_maps_free(MpReproMaps *m) {
    free(m->scores);
    free(m->se);
    free(m->diagnorm);
    memset(m, 0, sizeof *m);
}

void mp_repro_gram_free(MpReproGram *g) {
    free(g->gram);
    memset(g, 0, sizeof *g);
}

void *mp_repro_state(MpReproCtx *c, const char *name, size_t size, void (*release)(void *data)) {
    for (int k = 0; k < c->nstates; k++)
        if (!strcmp(c->states[k].name, name)) {
            MP_ASSERT(c->states[k].size == size && c->states[k].release == release);
            return c->states[k].data;
        }
    c->states = mp_grow_or_die(c->states, &c->cap_states, c->nstates, sizeof *c->states, "reproduce's stage states");
    c->states[c->nstates++] = (MpReproState){name, size, mp_calloc_or_die(1, size, "reproduce stage state"), release};
    return c->states[c->nstates - 1].data;
}

double mp_repro_max_abs_res(const MpPosStats *st, int l) {
    return fabs(st[l].res_min) > fabs(st[l].res_max) ? fabs(st[l].res_min) : fabs(st[l].res_max);
}
