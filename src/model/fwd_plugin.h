/* fwd_plugin.h — device backends built as plugins: a shared library (make CUDA=1:
 * build/libmaskpos-cuda.so) that the ordinary maskpos binary and libmaskpos.so load at run time
 * (dlopen) when --device names its backend, so one binary serves machines with and without a GPU
 * and the plain build links no device library.
 *
 * Implements:
 *   - MpFwdPlugin: what a plugin hands over through its one exported function
 *     (MP_FWD_PLUGIN_ENTRY): its interface version first (a plugin of another version is refused
 *     before anything else of it is read), its devices, their description for meta.json, and its
 *     ops instance;
 *   - the host side: the table of plugin backends (name, file, the variable that points at another
 *     file, how to build it), finding the file (MASKPOS_CUDA_PLUGIN, else beside the module that
 *     holds this code — the binary or libmaskpos.so —, in ../lib or in .. from it), loading it once per
 *     process, the checks (entry, version, a device, the ordinal of "cuda:N"), and every refusal
 *     text of them in one table (fwd_plugin.c), each one line.
 * Does not: run anything on a device (the plugin does), or know the CPU backends (fwd_backend.c
 * asks here for names it does not know).
 * Tested by: tests/test_plugin.c (no plugin; a plugin of another version, without its entry, with
 * no device, with two; the real plugin after make CUDA=1 on a machine without a GPU; the binary
 * and libmaskpos.so both); tests/cuda/test_cuda.c (the plugin's kernels, on a GPU).
 */
#ifndef MP_FWD_PLUGIN_H
#define MP_FWD_PLUGIN_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "core/err.h" /* MpErr */

#ifdef __cplusplus
extern "C" {
#endif

/* The version of MpFwdPlugin and of the ops it hands over; bumped when either changes. */
#define MP_FWD_PLUGIN_ABI 2
/* The one function a plugin exports: const MpFwdPlugin *maskpos_fwd_plugin(void). */
#define MP_FWD_PLUGIN_ENTRY "maskpos_fwd_plugin"

/* One device as a plugin sees it (meta.json's "device" block). */
typedef struct MpFwdDeviceInfo {
    char name[128];       /* "NVIDIA H100 80GB HBM3" */
    int ordinal;          /* N of cuda:N */
    int cc_major, cc_minor; /* compute capability */
    int sms;              /* multiprocessors */
    int64_t mem_total;    /* bytes of device memory */
    int64_t mem_free;     /* bytes free when asked */
    int driver;           /* the driver's CUDA version, 1000·major + 10·minor (13000: 13.0) */
    int runtime;          /* the runtime the plugin was built with, likewise */
    int blas;             /* cuBLASLt's version (cublasLtGetVersion: 130000 for 13.0.0); 0 unknown */
} MpFwdDeviceInfo;

/* ---------------------------------------------------------------- the probe's sums on the device */

struct MpFwdCtx; /* fwd_backend.h: a worker's handle on an instance */

/* What a device accumulator is made for (the host's MpProbeAcc, model/probe.h). */
typedef struct MpFwdDevAccDims {
    int L, H, S;
    int causal, skip, nb, per_head, probs;
    int layer_of[256]; /* model layer -> slot in [0, L), or -1 */
    int window[256];   /* [L] the slot's sliding window (< S), 0: none */
} MpFwdDevAccDims;

/* A plugin's accumulator of the probe's sums (the arrays of MpProbeAcc by name), fed by the
 * attention op's device taps (MpFwdTaps.device = 1, fwd_backend.h) on the stream of the ctx it was
 * opened on, so only the sums ever come back. */
typedef struct MpFwdDevAcc {
    /* an accumulator on ctx's device, every sum zero; NULL and why (one line) */
    void *(*open)(struct MpFwdCtx *ctx, const MpFwdDevAccDims *d, char *why, size_t cap);
    void (*close)(void *acc); /* accepts NULL */
    /* the taps, as MpFwdRowsHook / MpFwdHeadsumFn / MpFwdHook with ctx = the accumulator: every
     * head's scores [NH, T, T], or their head-sum map [T, T], of one sequence's layer (one block
     * [0, T)); done() ends the layer; the probabilities [NH, T, T] */
    void (*rows)(void *acc, int layer, const float *scores, int n_heads, int T, int i0, int i1, int worker);
    void (*headsum)(void *acc, int layer, const double *hs, int T, int i0, int i1, int worker);
    void (*done)(void *acc, int layer);
    void (*probs)(void *acc, int layer, const float *p, int n_heads, int T);
    /* array `name` (MpProbeAcc's) of n doubles to the host, or from it (a resumed run's sums):
     * MP_OK, or MP_ERR and why (an unknown name or length, a device error) */
    int (*get)(void *acc, const char *name, double *host, size_t n, char *why, size_t cap);
    int (*put)(void *acc, const char *name, const double *host, size_t n, char *why, size_t cap);
} MpFwdDevAcc;

typedef struct MpFwdPlugin {
    unsigned abi;          /* MP_FWD_PLUGIN_ABI of the plugin's build: the first member, never moved */
    unsigned size;         /* sizeof(MpFwdPlugin) of the plugin's build */
    const char *name;      /* the backend: "cuda" */
    const char *build;     /* how it was built: "CUDA 13.0, sm_80 sm_90" */
    /* devices usable here: >= 1, or 0 and why not in why [cap] (one line: no driver, no device) */
    int (*device_count)(char *why, size_t cap);
    /* device `ordinal`'s description: MP_OK, or MP_ERR and why */
    int (*device_info)(int ordinal, MpFwdDeviceInfo *out, char *why, size_t cap);
    /* the plugin's MpFwdOps instance (fwd_backend.h), or NULL when it has none, and the version
     * of that interface it was built against (MP_FWD_OPS_ABI) */
    const void *ops;
    unsigned ops_abi;
    /* its accumulator of the probe's sums, or NULL (the sums are then made on the host) */
    const MpFwdDevAcc *acc;
} MpFwdPlugin;

typedef const MpFwdPlugin *(*MpFwdPluginEntry)(void);

/* ---------------------------------------------------------------- host side (libmaskpos) */

/* 1 when `device` names a plugin backend ("cuda", "cuda:N"), whether or not it can be loaded. */
int mp_fwd_plugin_known(const char *device);

/* The plugin of `device` loaded and checked: its entry, its version, at least one device and the
 * ordinal asked (N of "cuda:N"; plain "cuda": the first device, or under MPI the local rank
 * modulo the devices seen). MP_OK with *p and *ordinal, or MP_ERR with one line in e that says
 * which check failed and what to do. Loads once per process; later calls repeat the answer. */
int mp_fwd_plugin_open(const char *device, const MpFwdPlugin **p, int *ordinal, MpErr *e);

/* The description of the device `device` names (mp_fwd_plugin_open's checks first). */
int mp_fwd_plugin_device_info(const char *device, MpFwdDeviceInfo *info, MpErr *e);

/* The plugin's ops instance for `device` (an MpFwdOps *, fwd_backend.h, of interface version
 * ops_abi: the caller's MP_FWD_OPS_ABI), or NULL and one line in e: mp_fwd_plugin_open's refusals,
 * a plugin without one, or one of another version. */
const void *mp_fwd_plugin_ops(const char *device, unsigned ops_abi, MpErr *e);

/* MP_OK when a run needing `bytes` of device memory fits in what `device` has free now; else
 * MP_ERR and one line (how much it needs, how much is free, what to do). A name that is no plugin
 * backend's: MP_OK (host memory is checked elsewhere). */
int mp_fwd_plugin_mem_check(const char *device, uint64_t bytes, MpErr *e);

/* The device accumulator of `device`'s plugin (mp_fwd_plugin_open's checks passed), or NULL. */
const MpFwdDevAcc *mp_fwd_plugin_acc(const char *device);

/* The local rank of an MPI launch from its launcher's environment (OpenMPI, MPICH/Hydra, Slurm),
 * or -1 when none is set: plain "cuda" is then device local rank modulo the devices seen (the host
 * and the plugin read it alike). */
static inline int mp_fwd_plugin_local_rank(void) {
    static const char *const vars[] = {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
        const char *v = getenv(vars[i]);
        if (v && *v >= '0' && *v <= '9') return atoi(v);
    }
    return -1;
}

/* The list of plugin backends for messages ("cuda"). */
const char *mp_fwd_plugin_names(void);

#ifdef __cplusplus
}
#endif

#endif
