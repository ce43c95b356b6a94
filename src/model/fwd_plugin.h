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
 *     holds this code — the binary or libmaskpos.so — or in ../lib from it), loading it once per
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

#include "core/err.h" /* MpErr */

#ifdef __cplusplus
extern "C" {
#endif

/* The version of MpFwdPlugin and of the ops it hands over; bumped when either changes. */
#define MP_FWD_PLUGIN_ABI 1
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

/* The list of plugin backends for messages ("cuda"). */
const char *mp_fwd_plugin_names(void);

#ifdef __cplusplus
}
#endif

#endif
