/* fwd_backend.c — the device names of the forward pass's backends and the names of their ops; see
 * fwd_backend.h. The CPU instances are fwd_cpu.c's.
 */
#include "model/fwd_backend.h"

#include <string.h>

#include "model/fwd_plugin.h" /* the device backends built as plugins (cuda) */
#include "model/devices.h"    /* mp_device_find: the names --device takes */

/* ================================================================ op names */

static const char *const fwd_op_names[MP_FWD_OP_COUNT] = {
    [MP_FWD_OP_MATMUL] = "matmul", [MP_FWD_OP_RMSNORM] = "rmsnorm", [MP_FWD_OP_LAYERNORM] = "layernorm",
    [MP_FWD_OP_ROPE_TABLE] = "rope_table", [MP_FWD_OP_QK_PREPARE] = "qk_prepare", [MP_FWD_OP_ATTENTION] = "attention",
    [MP_FWD_OP_BF16_ROUND] = "bf16_round", [MP_FWD_OP_SWIGLU] = "swiglu", [MP_FWD_OP_GEGLU] = "geglu",
    [MP_FWD_OP_GELU] = "gelu", [MP_FWD_OP_SOFTCAP] = "softcap", [MP_FWD_OP_SCALE] = "scale",
    [MP_FWD_OP_ADD_BIAS] = "add_bias", [MP_FWD_OP_ADD] = "add", [MP_FWD_OP_COPY] = "copy", [MP_FWD_OP_ZERO] = "zero",
    [MP_FWD_OP_AMAX] = "amax", [MP_FWD_OP_MOE_ROUTE] = "moe_route", [MP_FWD_OP_MOE_COUNT] = "moe_count",
    [MP_FWD_OP_MOE_GATHER] = "moe_gather", [MP_FWD_OP_MOE_SCATTER] = "moe_scatter",
    [MP_FWD_OP_MOE_SHARED_MIX] = "moe_shared_mix",
};
_Static_assert(sizeof fwd_op_names / sizeof fwd_op_names[0] == MP_FWD_OP_COUNT, "a name per op id");

const char *mp_fwd_op_name(int id) { return id >= 0 && id < MP_FWD_OP_COUNT && fwd_op_names[id] ? fwd_op_names[id] : "?"; }

/* ================================================================ devices */

const MpFwdOps *mp_fwd_ops_for(const char *device, int plain, MpErr *e) {
    int ordinal;
    const int d = device ? mp_device_find(device, &ordinal, e) : MP_DEVICE_CPU; /* the device table, devices.h */
    if (d < 0) return NULL;
    if (d == MP_DEVICE_CPU) return plain ? &mp_fwd_ops_cpu_plain : &mp_fwd_ops_cpu;
    return mp_fwd_plugin_ops(device, MP_FWD_OPS_ABI, e); /* cuda[:N]: its plugin, or why not */
}

int mp_fwd_device_check(const char *device, MpErr *e) { return mp_fwd_ops_for(device, 0, e) ? MP_OK : MP_ERR; }
