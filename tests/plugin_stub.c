/* plugin_stub.c — a stand-in device plugin for tests/test_plugin.c, built by the Makefile three
 * ways: as is (the right interface version; STUB_DEVICES devices, none when unset, and no ops),
 * with -DSTUB_OTHER_ABI (a plugin of the next interface version) and with -DSTUB_NO_ENTRY (a
 * shared library without the entry function).
 * Does not: compute anything; it only answers the loader's questions.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/fwd_plugin.h" /* MpFwdPlugin */

#ifdef STUB_OTHER_ABI
#define STUB_ABI (MP_FWD_PLUGIN_ABI + 1)
#else
#define STUB_ABI MP_FWD_PLUGIN_ABI
#endif

static int stub_count(char *why, size_t cap) {
    const char *v = getenv("STUB_DEVICES");
    const int n = v ? atoi(v) : 0;
    if (n < 1) snprintf(why, cap, "stub: STUB_DEVICES=%s", v ? v : "(unset)");
    return n;
}

static int stub_info(int ordinal, MpFwdDeviceInfo *out, char *why, size_t cap) {
    (void)why;
    (void)cap;
    memset(out, 0, sizeof *out);
    snprintf(out->name, sizeof out->name, "stub device %d", ordinal);
    out->ordinal = ordinal;
    out->cc_major = 9;
    out->mem_total = (int64_t)1 << 30;
    return 0;
}

static const MpFwdPlugin stub = {STUB_ABI, sizeof(MpFwdPlugin), "cuda", "stub", stub_count, stub_info, NULL, 0, NULL};

#ifdef STUB_NO_ENTRY
__attribute__((visibility("default"))) const MpFwdPlugin *maskpos_fwd_plugin_missing(void);
__attribute__((visibility("default"))) const MpFwdPlugin *maskpos_fwd_plugin_missing(void) { return &stub; }
#else
__attribute__((visibility("default"))) const MpFwdPlugin *maskpos_fwd_plugin(void);
__attribute__((visibility("default"))) const MpFwdPlugin *maskpos_fwd_plugin(void) { return &stub; }
#endif
