/* devices.h — the devices the forward pass can run on, one table: the names --device accepts
 * (cpu, cuda[:N]), what each is in --help, how to get the ones a build lacks, and every refusal
 * of a device as one line.
 *
 * Implements:
 *   - mp_devices[]: the table, keyed by MpDeviceId (designated initializers; a row missing or out
 *     of order does not compile);
 *   - mp_device_find: "--device NAME[:N]" text into its row and ordinal, or the unknown name's
 *     line;
 *   - mp_device_refuse: the one-line refusal of a device by reason — not built (and how to build
 *     it), its plugin not found (and where it was looked for), no such device on this machine, a
 *     device number that is not one — for the backends' code (model/fwd_backend.c) to give;
 *   - mp_device_help: --device's help text from the rows (probe, logits, generate: the shared
 *     declaration of job/shared_opts.c).
 * Does not: load or run a backend (model/fwd_backend.c picks the instance for a row; a device
 * backend brings its own code), or know which devices a machine has.
 * Tested by: tests/test_opts.c (names, ordinals, every refusal line, the help), tests/test_model_fwd.c
 * (--device refusals of probe, logits and generate),
 * tests/test_cli_texts.c (the --help lines and the messages).
 */
#ifndef MP_MODEL_DEVICES_H
#define MP_MODEL_DEVICES_H

#include <stddef.h>

#include "core/err.h" /* MpErr */

typedef enum MpDeviceId {
    MP_DEVICE_CPU, /* the CPU instances of fwd_backend.c, in every build */
    MP_DEVICE_CUDA,
    MP_DEVICE_COUNT
} MpDeviceId;

typedef struct MpDevice {
    const char *name;   /* --device NAME */
    int ordinals;       /* 1: NAME:N names device N of several (NAME alone: the first) */
    int builtin;        /* 1: in every build; 0: built apart (a plugin) or not at all */
    const char *help;   /* --help: what it is, after "NAME (" */
    const char *build;  /* how a build gets it ("make CUDA=1"); NULL when built in */
    const char *what;   /* what this machine must have ("CUDA device"); NULL for the CPU */
    const char *plugin; /* its plugin's file name, looked for beside the program; NULL: none */
    const char *env;    /* the variable naming another plugin file; NULL: none */
} MpDevice;

extern const MpDevice mp_devices[MP_DEVICE_COUNT];

/* Why a device is refused: each one line of mp_device_refuse. */
typedef enum MpDeviceRefusal {
    MP_DEVICE_NOT_BUILT, /* "--device cuda: not built: make CUDA=1" */
    MP_DEVICE_NO_PLUGIN, /* "--device cuda: plugin not found: PATH (built by make CUDA=1; MASKPOS_CUDA_PLUGIN names another file)" */
    MP_DEVICE_NO_DEVICE, /* "--device cuda: no CUDA device here (DETAIL)" */
    MP_DEVICE_ORDINAL,   /* "--device cuda:x: 'x' is not a device number (cuda or cuda:N)" */
    MP_DEVICE_REFUSAL_COUNT
} MpDeviceRefusal;

/* arg ("cpu", "cuda", "cuda:1") into its row id and *ordinal (-1 when none is given); MP_ERR
 * with the line "--device ARG: no such backend (this build has: cpu)" for a name no row has
 * (or NAME:N of a row without ordinals), and MP_DEVICE_ORDINAL's line for N not a number. */
int mp_device_find(const char *arg, int *ordinal, MpErr *e);

/* The one line refusing device arg (as given; row id) for reason (MpDeviceRefusal); detail: the
 * path looked for (NO_PLUGIN) or the reason (NO_DEVICE), else NULL. Returns MP_ERR. */
int mp_device_refuse(MpErr *e, int id, const char *arg, int reason, const char *detail);

/* --device's help text: "the forward pass's backend: " and every row with its help, into buf [cap]. */
void mp_device_help(char *buf, size_t cap);

#endif
