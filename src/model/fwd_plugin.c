/* fwd_plugin.c — finding, loading and checking a device backend's plugin; see fwd_plugin.h.
 * Every refusal a plugin backend can give is one row of plugin_refusals below (the device table
 * of the CLI quotes none of them: they reach it through MpErr).
 */
#include "model/fwd_plugin.h"

#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "model/devices.h" /* mp_devices: the backends and their plugin files */


/* ================================================================ the plugin backends */

/* The backends built apart are the rows of the device table (model/devices.h) with a plugin file:
 * their name, file, variable, build command and run-time libraries come from there. */
typedef MpDevice PluginBackend;
#define N_BACKENDS MP_DEVICE_COUNT

/* ================================================================ the refusals, one line each */

typedef enum PluginRefusal {
    REF_ABSENT = 0, /* no plugin file */
    REF_LOAD,       /* dlopen failed (a library it needs is missing, or not a plugin) */
    REF_ENTRY,      /* no entry function, or it returned nothing */
    REF_ABI,        /* another interface version */
    REF_NO_DEVICE,  /* no driver, no device */
    REF_SYNTAX,     /* cuda:N with N not a number */
    REF_ORDINAL,    /* cuda:N beyond the devices */
    REF_NO_OPS,     /* a plugin that has no forward pass (yet) */
    REF_OPS_ABI,    /* its forward pass of another backend interface version */
    REF_MEMORY,     /* the run does not fit in the device's free memory */
    REF_COUNT
} PluginRefusal;

/* printf formats; every one starts with "--device DEVICE: " (the first %s) */
static const char *const plugin_refusals[REF_COUNT] = {
    [REF_ABSENT] = "--device %s: not built: %s (no %s)",
    [REF_LOAD] = "--device %s: the plugin %s cannot be loaded (%s); HINT: it needs %s on the library path (LD_LIBRARY_PATH)",
    [REF_ENTRY] = "--device %s: %s is not a maskpos plugin (%s); HINT: rebuild it with %s",
    [REF_ABI] = "--device %s: %s speaks plugin interface %u (a %u-byte descriptor), this maskpos %u (%u bytes); HINT: rebuild both with %s",
    [REF_NO_DEVICE] = "--device %s: no CUDA device here (%s)",
    [REF_SYNTAX] = "--device %s: '%.40s' is not a device number (%s or %s:N)",
    [REF_ORDINAL] = "--device %s: no device %d (this machine shows %d device%s: cuda:0%s)",
    [REF_NO_OPS] = "--device %s: the plugin %s (%s) has no forward pass: it was built before the backend interface it needs",
    [REF_MEMORY] = "--device %s: the run needs %.2f GiB of GPU memory, %s (%s) has %.2f GiB free of %.2f; HINT: fewer --layers, a "
                   "shorter --seq, --compute bf16 or no --per-head",
    [REF_OPS_ABI] = "--device %s: %s has backend interface %u, this maskpos %u; HINT: rebuild both with %s",
};

/* ================================================================ finding the file */

/* dir [cap] = the folder of path (without the last '/'); 0 when path has none */
static int plugin_dirname(char *dir, size_t cap, const char *path) {
    const char *slash = strrchr(path, '/');
    if (!slash || (size_t)(slash - path) >= cap) return 0;
    memcpy(dir, path, (size_t)(slash - path));
    dir[slash - path] = 0;
    return 1;
}

/* The first of: $ENV (as given), then beside the module that holds this code (the binary, or
 * libmaskpos.so), in ../lib and in .. from it, then likewise from the running program. path
 * gets the one found, or the first place looked at (for the message); 1 when found. */
static int plugin_find(const PluginBackend *b, char *path, size_t cap) {
    const char *env = getenv(b->env);
    if (env && *env) {
        snprintf(path, cap, "%s", env);
        return access(path, F_OK) == 0;
    }
    char dirs[2][PATH_MAX];
    int nd = 0;
    Dl_info di;
    char real[PATH_MAX];
    if (dladdr((void *)plugin_find, &di) && di.dli_fname && realpath(di.dli_fname, real) && plugin_dirname(dirs[nd], sizeof dirs[0], real))
        nd++;
    const ssize_t n = readlink("/proc/self/exe", real, sizeof real - 1);
    if (n > 0) {
        real[n] = 0;
        if (plugin_dirname(dirs[nd], sizeof dirs[0], real) && (nd == 0 || strcmp(dirs[0], dirs[nd]))) nd++;
    }
    path[0] = 0;
    for (int i = 0; i < nd; i++)
        for (int up = 0; up < 3; up++) { /* beside, ../lib (installed), .. (build/tests/ of a test program) */
            static const char *const sub[3] = {"", "../lib/", "../"};
            char cand[PATH_MAX + 64];
            if (snprintf(cand, sizeof cand, "%s/%s%s", dirs[i], sub[up], b->plugin) >= (int)sizeof cand) continue;
            if (!path[0]) snprintf(path, cap, "%s", cand);
            if (access(cand, F_OK) == 0) {
                snprintf(path, cap, "%s", cand);
                return 1;
            }
        }
    if (!path[0]) snprintf(path, cap, "%s", b->plugin);
    return 0;
}

/* ================================================================ loading, once */

/* What loading a backend's plugin gave: the plugin, or the refusal with its words. */
typedef struct PluginState {
    int tried;
    const MpFwdPlugin *plugin;
    int refusal;      /* -1: loaded */
    char path[PATH_MAX];
    char detail[768]; /* dlerror's line, the devices' reason */
    int devices;      /* device_count's answer */
} PluginState;

static PluginState plugin_state[N_BACKENDS];
static pthread_mutex_t plugin_lock = PTHREAD_MUTEX_INITIALIZER;

/* the first line of s, in dst [cap] */
static void plugin_line(char *dst, size_t cap, const char *s) {
    snprintf(dst, cap, "%s", s ? s : "unknown reason");
    dst[strcspn(dst, "\n")] = 0;
}

static void plugin_load(PluginState *st, const PluginBackend *b) {
    st->refusal = -1;
    if (!plugin_find(b, st->path, sizeof st->path)) {
        st->refusal = REF_ABSENT;
        return;
    }
    /* RTLD_LOCAL: the plugin's symbols (and cuBLAS's) stay its own; never closed: device
     * runtimes do not like being unloaded */
    void *h = dlopen(st->path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        plugin_line(st->detail, sizeof st->detail, dlerror());
        st->refusal = REF_LOAD;
        return;
    }
    MpFwdPluginEntry entry;
    *(void **)&entry = dlsym(h, MP_FWD_PLUGIN_ENTRY);
    st->plugin = entry ? entry() : NULL;
    if (!st->plugin) {
        snprintf(st->detail, sizeof st->detail, entry ? "%s() returned nothing" : "no function %s", MP_FWD_PLUGIN_ENTRY);
        st->refusal = REF_ENTRY;
        return;
    }
    if (st->plugin->abi != MP_FWD_PLUGIN_ABI || st->plugin->size != sizeof(MpFwdPlugin)) {
        st->refusal = REF_ABI;
        return;
    }
    st->devices = st->plugin->device_count(st->detail, sizeof st->detail);
    if (st->devices < 1) st->refusal = REF_NO_DEVICE;
}

/* ================================================================ the checks */

static const PluginBackend *plugin_backend(const char *device, int *idx) {
    if (!device) return NULL;
    for (int i = 0; i < N_BACKENDS; i++) {
        const size_t n = strlen(mp_devices[i].name);
        if (mp_devices[i].plugin && !strncmp(device, mp_devices[i].name, n) && (device[n] == 0 || device[n] == ':')) {
            *idx = i;
            return &mp_devices[i];
        }
    }
    return NULL;
}

int mp_fwd_plugin_known(const char *device) {
    int i;
    return plugin_backend(device, &i) != NULL;
}

const char *mp_fwd_plugin_names(void) { /* the device table's rows with a plugin, "cuda" */
    static char names[128];
    size_t k = 0;
    names[0] = 0;
    for (int i = 0; i < N_BACKENDS && k < sizeof names; i++)
        if (mp_devices[i].plugin) k += (size_t)snprintf(names + k, sizeof names - k, "%s%s", k ? ", " : "", mp_devices[i].name);
    return names;
}

/* N of "NAME:N" (>= 0), -1 for plain NAME, or -2 and why in e when the suffix is no number. */
static int plugin_ordinal_parse(const char *device, const PluginBackend *b, MpErr *e) {
    const char *colon = device + strlen(b->name);
    if (!*colon) return -1;
    char *end;
    const long n = strtol(colon + 1, &end, 10);
    if (colon[1] >= '0' && colon[1] <= '9' && !*end && n <= 4096) return (int)n;
    mp_err_set(e, plugin_refusals[REF_SYNTAX], device, colon + 1, b->name, b->name);
    return -2;
}

/* The device `asked` names (-1: plain NAME: 0, or under MPI the local rank modulo the devices),
 * or -1 and why in e when there is no such device. */
static int plugin_ordinal(const char *device, int asked, int devices, MpErr *e) {
    if (asked < 0) return mp_fwd_plugin_local_rank() > 0 ? mp_fwd_plugin_local_rank() % devices : 0;
    if (asked < devices) return asked;
    char last[32] = "";
    if (devices > 1) snprintf(last, sizeof last, " .. cuda:%d", devices - 1);
    mp_err_set(e, plugin_refusals[REF_ORDINAL], device, asked, devices, devices == 1 ? "" : "s", last);
    return -1;
}

int mp_fwd_plugin_open(const char *device, const MpFwdPlugin **p, int *ordinal, MpErr *e) {
    int bi;
    const PluginBackend *b = plugin_backend(device, &bi);
    if (!b) return mp_err_set(e, "--device %.40s: no such plugin backend (known: %s)", device ? device : "(none)", mp_fwd_plugin_names());
    const int asked = plugin_ordinal_parse(device, b, e);
    if (asked == -2) return MP_ERR;
    PluginState *st = &plugin_state[bi];
    pthread_mutex_lock(&plugin_lock);
    if (!st->tried) {
        plugin_load(st, b);
        st->tried = 1;
    }
    pthread_mutex_unlock(&plugin_lock);
    switch (st->refusal) {
    case -1: break;
    case REF_ABSENT: return mp_err_set(e, plugin_refusals[REF_ABSENT], device, b->build, st->path);
    case REF_LOAD: return mp_err_set(e, plugin_refusals[REF_LOAD], device, st->path, st->detail, b->libs);
    case REF_ENTRY: return mp_err_set(e, plugin_refusals[REF_ENTRY], device, st->path, st->detail, b->build);
    case REF_ABI:
        return mp_err_set(e, plugin_refusals[REF_ABI], device, st->path, st->plugin->abi, st->plugin->size, (unsigned)MP_FWD_PLUGIN_ABI,
                          (unsigned)sizeof(MpFwdPlugin), b->build);
    case REF_NO_DEVICE: return mp_err_set(e, plugin_refusals[REF_NO_DEVICE], device, st->detail);
    default: MP_ASSERT(0);
    }
    const int ord = plugin_ordinal(device, asked, st->devices, e);
    if (ord < 0) return MP_ERR;
    *p = st->plugin;
    *ordinal = ord;
    return MP_OK;
}

int mp_fwd_plugin_device_info(const char *device, MpFwdDeviceInfo *info, MpErr *e) {
    const MpFwdPlugin *p;
    int ord;
    if (mp_fwd_plugin_open(device, &p, &ord, e) != MP_OK) return MP_ERR;
    memset(info, 0, sizeof *info);
    char why[512];
    if (p->device_info(ord, info, why, sizeof why) != MP_OK) return mp_err_set(e, "--device %s: %s", device, why);
    return MP_OK;
}

int mp_fwd_plugin_mem_check(const char *device, uint64_t bytes, MpErr *e) {
    if (!mp_fwd_plugin_known(device)) return MP_OK;
    MpFwdDeviceInfo in;
    if (mp_fwd_plugin_device_info(device, &in, e) != MP_OK) return MP_ERR;
    char name[32];
    snprintf(name, sizeof name, "cuda:%d", in.ordinal);
    const double gib = 1073741824.0;
    if (in.mem_free > 0 && (double)bytes > (double)in.mem_free)
        return mp_err_set(e, plugin_refusals[REF_MEMORY], device, (double)bytes / gib, name, in.name, (double)in.mem_free / gib,
                          (double)in.mem_total / gib);
    return MP_OK;
}

const MpFwdDevAcc *mp_fwd_plugin_acc(const char *device) {
    const MpFwdPlugin *p;
    int ord;
    MpErr e;
    return mp_fwd_plugin_open(device, &p, &ord, &e) == MP_OK ? p->acc : NULL;
}

const void *mp_fwd_plugin_ops(const char *device, unsigned ops_abi, MpErr *e) {
    const MpFwdPlugin *p;
    int ord, bi;
    if (mp_fwd_plugin_open(device, &p, &ord, e) != MP_OK) return NULL;
    plugin_backend(device, &bi);
    const char *path = plugin_state[bi].path;
    if (!p->ops) {
        mp_err_set(e, plugin_refusals[REF_NO_OPS], device, path, p->build ? p->build : "?");
        return NULL;
    }
    if (p->ops_abi != ops_abi) {
        mp_err_set(e, plugin_refusals[REF_OPS_ABI], device, path, p->ops_abi, ops_abi, mp_devices[bi].build);
        return NULL;
    }
    return p->ops;
}
