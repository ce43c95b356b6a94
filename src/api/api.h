/* api.h — the insides of the public C API (include/maskpos.h): the structs behind its opaque
 * handles, shared by the files of src/api.
 *
 * Implements (declares): the per-thread last error; MaskposConfig as the settings of one job, kept
 * both parsed and as the equivalent command line (the run's meta.json "command" names the flags
 * that give the same result with `maskpos`); MaskposResult as named arrays + meta + the writer of
 * the command that made it.
 * Does not: compute (sim/, model/, job/ do), or print.
 * Implemented by: api.c (errors, the config and result), api_jobs.c (the jobs' results),
 *   api_probe.c (the probe's settings).
 * Tested by: tests/test_api.c, tests/test_pyapi.c.
 */
#ifndef MP_API_H
#define MP_API_H

#include <jansson.h>
#include <pthread.h>
#include <stdint.h>

#include "maskpos.h"      /* the public declarations */
#include "core/err.h"     /* MpErr */
#include "core/npy.h"     /* MpNpy, MpDtype */
#include "load/model.h"   /* MpModel */
#include "sim/simulate.h" /* MpSimConfig, MpSimResult */

/* ---------------------------------------------------------------- errors */
/* Stores e->msg as this thread's last error and returns rc (MASKPOS_ERR or MASKPOS_STOPPED). */
int mp_api_fail(const MpErr *e, int rc);
/* printf-style form of the same. */
int mp_api_failf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* ---------------------------------------------------------------- settings */
typedef enum MpApiJob { MP_API_THEORY = 0, MP_API_SIMULATE = 1, MP_API_PROBE = 2 } MpApiJob;

#define MP_API_MAX_ARGS 96 /* words of the equivalent command line */

struct MaskposConfig {
    MpApiJob job;
    /* theory */
    double th_alpha;
    int th_n, th_layers;
    /* simulate: the command's variables before its defaults are resolved */
    MpSimConfig sim;
    int seq_set, norm_set, resid_set;
    char scale_word[8]; /* "" = not set */
    /* probe: the settings as given (words), resolved by the probe adapter */
    char *probe_keys[48], *probe_vals[48];
    int n_probe;
    /* the equivalent command line: argv[0] = job, then --key [value] in the order set */
    char *argv[MP_API_MAX_ARGS];
    int argc;
};

/* ---------------------------------------------------------------- progress */
/* The progress function given to a job (api_jobs.c): calls the caller's callback from the calling
 * thread only; a stop request is sticky. */
typedef struct ApiProgress ApiProgress;
struct ApiProgress {
    MaskposProgressFn fn;
    void *user;
    pthread_t caller;
    int64_t told; /* last done passed to fn (-1: none yet) */
    int stop;
};
void mp_api_progress_init(ApiProgress *p, MaskposProgressFn fn, void *user);
/* The MpProgressFn of the jobs (ctx = ApiProgress*). */
int mp_api_progress(void *ctx, int64_t done, int64_t total);
/* After a finished job: the final count, if the caller has not seen it. */
void mp_api_progress_end(ApiProgress *p, int64_t total);

/* ---------------------------------------------------------------- models */
struct MaskposModel {
    MpModel m; /* owned: mp_model_open / mp_model_free */
};

/* ---------------------------------------------------------------- results */
#define MP_API_MAX_ARRAYS 24

typedef struct MpApiArray {
    char name[64];      /* file name without .npy */
    MpDtype dtype;
    int ndim;
    int64_t shape[MP_NPY_MAX_DIMS];
    const void *data;   /* points into owned or into the job's result */
    void *owned;        /* freed with the result (NULL when borrowed) */
} MpApiArray;

struct MaskposResult {
    char kind[32];
    int n;
    MpApiArray arr[MP_API_MAX_ARRAYS];
    json_t *meta;       /* NULL until known (simulate: built on first request) */
    char *meta_text;    /* cache of maskpos_result_meta */
    /* the job's own result and writer (NULL for a loaded run: arrays + meta are written) */
    void *job;
    int (*write)(const MaskposResult *r, const char *dir, MpErr *e);
    int (*make_meta)(MaskposResult *r, MpErr *e); /* fills r->meta when NULL */
    void (*job_free)(void *job);
    int argc;           /* provenance: the equivalent command line */
    char **argv;
    double wall_s;
};

/* A new zeroed result of that kind (NULL when out of memory). */
MaskposResult *mp_api_result_new(const char *kind);
/* Appends an array (data borrowed unless owned != NULL). MP_ERR when full. */
int mp_api_result_add(MaskposResult *r, const char *name, MpDtype dt, int ndim, const int64_t *shape,
                      const void *data, void *owned, MpErr *e);
/* Writes r with its writer into a private temporary folder and reads back its meta.json (and,
 * when arrays, every .npy it lists, appended to r's arrays), then removes the folder: so that the
 * command's one writer decides every file and key of a result. */
int mp_api_result_through_folder(MaskposResult *r, int arrays, MpErr *e);
/* A probe result (api_probe.c): an empty MpProbeResult (mp_api_probe_result_of) with the probe's
 * writer; fill it, then mp_api_result_through_folder. MP_ERR when out of memory. */
struct MpProbeResult;
int mp_api_probe_result_new(MaskposResult **out, MpErr *e);
struct MpProbeResult *mp_api_probe_result_of(MaskposResult *r);
/* Copies the config's command line into the result (provenance). MP_ERR when out of memory. */
int mp_api_result_argv(MaskposResult *r, const MaskposConfig *c, MpErr *e);

#endif
