/* devices.h — the devices the forward pass can run on, one table: the names --device accepts
 * (cpu, cuda[:N]), what each is in --help, how to get the ones a build lacks, and every refusal
 * of a device as one line.
 *
 * Implements:
 *   - mp_devices[]: the table, keyed by MpDeviceId (designated initializers; a row missing or out
 *     of order does not compile);
 *   - mp_device_find: "--device NAME[:N]" text into its row and ordinal, or the unknown name's
 *     line (or the bad number's);
 *   - mp_device_help: --device's help text from the rows (probe, logits, generate: the shared
 *     declaration of job/shared_opts.c).
 * Does not: load or run a backend (model/fwd_backend.c picks the instance for a row; a device
 * backend brings its own code), or know which devices a machine has.
 * Tested by: tests/test_opts.c (names, ordinals, the unknown name's and bad number's lines, the help),
 * tests/test_plugin.c (the plugin's refusals), tests/test_model_fwd.c
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
    const char *libs;   /* the libraries its plugin needs at run time (a refusal's hint); NULL: none */
} MpDevice;

extern const MpDevice mp_devices[MP_DEVICE_COUNT];

/* arg ("cpu", "cuda", "cuda:1") into its row id and *ordinal (-1 when none is given); MP_ERR
 * with the line "--device ARG: no such backend (known: cpu, cuda)" for a name no row has (or
 * NAME:N of a row without ordinals), and "--device cuda:x: 'x' is not a device number (cuda or
 * cuda:N)" for N not a number. Whether a row's backend is built, found and has a device here is
 * the plugin loader's to say (model/fwd_plugin.c: its refusals, one line each). */
int mp_device_find(const char *arg, int *ordinal, MpErr *e);

/* --device's help text: "the forward pass's backend: " and every row with its help, into buf [cap]. */
void mp_device_help(char *buf, size_t cap);

#endif
