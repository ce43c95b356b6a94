/* probe_opts.h — the probe's options, declared once: one row per option (its flag name, kind,
 * range, metavar, help text and the MpProbeConfig field it sets), read by every consumer:
 * `maskpos probe`'s getopt table and --help (src/cli/cmd_probe.c), the C API's probe settings
 * (src/api/api_probe.c, maskpos_probe_option_*), the Python module's probe() (through the C API),
 * reproduce (src/repro/stage_models.c: the config it runs, the reuse key) and the ranks of an MPI job
 * (src/cli/mpi_job.c: the settings rank 0 hands them).
 *
 * Implements:
 *   - mp_probe_opts[]: the table (core/opts.h's rows), keyed by MpProbeOptId (designated
 *     initializers; a row missing or out of order does not compile); the corpus flags, --threads,
 *     --compute and --device are the declarations every command shares (job/shared_opts.h);
 *   - mp_probe_opt_set / mp_probe_opt_parse: one value (or one "name=value") into an
 *     MpProbeConfig, with the command line's messages ("--seq: 'x' is not an integer",
 *     "--seq: 0 is outside [1, 1048576]");
 *   - mp_probe_opts_check: the checks across options (one source of tokens, --data needs --n and
 *     --seq, the --data options go with --data, --heads-f64 with --per-head; the names of --stats
 *     are checked by the run, mp_probe_config_stats);
 *   - mp_probe_opts_write: an MpProbeConfig back into "name=value" settings (what MPI ranks
 *     receive; with MP_OPT_RUN rows left out, reproduce's reuse key).
 * Does not: parse argv or print --help (src/cli/cmd_probe.c hands this table to mp_opts_parse and
 * mp_opts_help with its prose), hold the CLI-only switches' values (--plot, --quiet, --force have
 * no field: the CLI keeps them).
 * Tested by: tests/test_probe_opts.c (every row through `maskpos probe`, the C API and back
 * through mp_probe_opts_write), tests/test_mpi.c, python/tests/test_options.py.
 */
#ifndef MP_JOB_PROBE_OPTS_H
#define MP_JOB_PROBE_OPTS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "core/err.h"  /* MpErr */
#include "core/opts.h" /* MpOpt, MP_OPT_CLI, MP_OPT_RUN, MP_OPT_POSITIONAL */
#include "job/probe_job.h" /* MpProbeConfig */

/* One id per row, in the order --help lists them. New options may go anywhere (the ids are not
 * stored in any file): the table's rows are keyed by id. */
typedef enum MpProbeOptId {
    MP_PROBE_OPT_MODEL, /* the positional MODEL */
    MP_PROBE_OPT_TOKENS,
    MP_PROBE_OPT_SEQ,
    MP_PROBE_OPT_N,
    MP_PROBE_OPT_DATA,
    MP_PROBE_OPT_TOKENIZER,
    MP_PROBE_OPT_FIELD,
    MP_PROBE_OPT_WHOLE,
    MP_PROBE_OPT_SHUFFLE,
    MP_PROBE_OPT_SEED,
    MP_PROBE_OPT_NO_SPECIAL,
    MP_PROBE_OPT_PACK,
    MP_PROBE_OPT_LAYERS,
    MP_PROBE_OPT_PER_HEAD,
    MP_PROBE_OPT_HEADS_F64,
    MP_PROBE_OPT_PROBS,
    MP_PROBE_OPT_RECENCY,
    MP_PROBE_OPT_STATS,
    MP_PROBE_OPT_POS_DIM,
    MP_PROBE_OPT_POS_STRIDE,
    MP_PROBE_OPT_POS_RIDGE,
    MP_PROBE_OPT_RESID_STRIDE,
    MP_PROBE_OPT_BIDIRECTIONAL,
    MP_PROBE_OPT_NO_ROPE,
    MP_PROBE_OPT_ROPE_KEEP_HIGH,
    MP_PROBE_OPT_THREADS,
    MP_PROBE_OPT_COMPUTE,
    MP_PROBE_OPT_DEVICE,
    MP_PROBE_OPT_CHECKPOINT_EVERY,
    MP_PROBE_OPT_RESUME,
    MP_PROBE_OPT_ALLOW_LONG,
    MP_PROBE_OPT_FORCE,
    MP_PROBE_OPT_OUT,
    MP_PROBE_OPT_PLOT,
    MP_PROBE_OPT_MAX_MEM_GIB,
    MP_PROBE_OPT_QUIET,
    MP_PROBE_OPT_HELP,
    MP_PROBE_OPT_COUNT
} MpProbeOptId;

/* The rows (core/opts.h): the corpus flags, --threads, --compute and --device point at their
 * shared declarations (job/shared_opts.h); MP_OPT_CLI rows are the command line's only (no
 * setting of the C API), MP_OPT_RUN rows are left out of reuse keys, MODEL is POSITIONAL. */
extern const MpOpt mp_probe_opts[MP_PROBE_OPT_COUNT];

/* The id of the option called name, or -1. */
int mp_probe_opt_find(const char *name);
/* value into c's field of option id (value NULL: a switch given on the command line, i.e. on).
 * MP_ERR with the command line's one-line message; options without a field: MP_ERR. */
int mp_probe_opt_set(MpProbeConfig *c, int id, const char *value, MpErr *e);
/* "name=value" (or a bare "name": a switch that is on) into c. Strings point into s. */
int mp_probe_opt_parse(MpProbeConfig *c, const char *s, MpErr *e);
/* The checks across options of a config whose tokens come from a file or documents (c->ids NULL)
 * or from memory (c->ids set: then neither tokens nor data). */
int mp_probe_opts_check(const MpProbeConfig *c, MpErr *e);
/* c's options with a field whose value differs from mp_probe_config_init's, in table order, as
 * "name=value" each followed by sep, into buf (snprintf-like: the length it needs, without the
 * final NUL; buf may be NULL with cap 0). Rows with any of skip_flags are left out. */
size_t mp_probe_opts_write(char *buf, size_t cap, const MpProbeConfig *c, int skip_flags, char sep);

#endif
