/* devices.c — the device table and its texts; see devices.h. */
#include "model/devices.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "core/util.h" /* mp_parse_i64 */

const MpDevice mp_devices[MP_DEVICE_COUNT] = {
    [MP_DEVICE_CPU] = {"cpu", 0, 1, "default"},
    [MP_DEVICE_CUDA] = {"cuda", 1, 0, "NVIDIA GPU N, default 0", "make CUDA=1", "CUDA device", "libmaskpos-cuda.so",
                        "MASKPOS_CUDA_PLUGIN", "the CUDA 13 libraries (libcublasLt.so.13)"},
};

_Static_assert(sizeof mp_devices / sizeof *mp_devices == MP_DEVICE_COUNT, "one row per MpDeviceId");

/* Every row's name, "cpu, cuda" (for the unknown name's line). */
static void device_names(char *buf, size_t cap) {
    size_t k = 0;
    buf[0] = 0;
    for (int d = 0; d < MP_DEVICE_COUNT && k < cap; d++) k += (size_t)snprintf(buf + k, cap - k, "%s%s", k ? ", " : "", mp_devices[d].name);
}

int mp_device_find(const char *arg, int *ordinal, MpErr *e) {
    const char *colon = strchr(arg, ':');
    const size_t len = colon ? (size_t)(colon - arg) : strlen(arg);
    *ordinal = -1;
    for (int d = 0; d < MP_DEVICE_COUNT; d++) {
        const MpDevice *v = &mp_devices[d];
        if (strlen(v->name) != len || strncmp(v->name, arg, len) || (colon && !v->ordinals)) continue;
        if (!colon) return d;
        int64_t n;
        if (mp_parse_i64(colon + 1, 0, INT32_MAX, &n) != MP_OK)
            return mp_err_set(e, "--device %.40s: '%.40s' is not a device number (%s or %s:N)", arg, colon + 1, v->name, v->name);
        *ordinal = (int)n;
        return d;
    }
    char names[128];
    device_names(names, sizeof names);
    mp_err_set(e, "--device %.40s: no such backend (known: %s)", arg, names);
    return -1;
}

void mp_device_help(char *buf, size_t cap) {
    size_t k = (size_t)snprintf(buf, cap, "the forward pass's backend:");
    for (int d = 0; d < MP_DEVICE_COUNT && k < cap; d++) {
        const MpDevice *v = &mp_devices[d];
        k += (size_t)snprintf(buf + k, cap - k, "%s %s%s (%s%s%s)", d == 0 ? "" : d == MP_DEVICE_COUNT - 1 ? " or" : ",",
                              v->name, v->ordinals ? "[:N]" : "", v->help, v->build ? "; needs " : "", v->build ? v->build : "");
    }
}
