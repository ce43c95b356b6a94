/* shared_opts.h — the options several commands have, declared once: the corpus flags (documents
 * into N rows of S token ids: --data --tokenizer --field --whole --shuffle --seed --no-special
 * --pack --n --seq) and --threads, --compute, --device. A command's table points its row at one of
 * these declarations (name, kind, range, metavar, words, help) and says where the value goes;
 * where its meaning is narrower it says so in its row: its own help text (gram's --data is one
 * text read as windows, not documents), its metavar, a range within this one (MP_OPT_NARROW:
 * corpus --n at most 10000000, gram --seq at most 8192).
 *
 * Implements: mp_shared_opts[], keyed by MpSharedOpt (designated initializers; a row missing or
 * out of order does not compile). Read by: the probe (job/probe_opts.c, and through it the C API,
 * Python, reproduce's probes and MPI ranks), corpus, reproduce, gram, train, simulate, logits,
 * generate, mkmodel (src/cli/).
 * Does not: hold values (each command's config does), or check options against each other (the
 * probe's mp_probe_opts_check; the commands).
 * Tested by: tests/test_cli_texts.c (every command's --help and bad values), tests/test_probe_opts.c.
 */
#ifndef MP_JOB_SHARED_OPTS_H
#define MP_JOB_SHARED_OPTS_H

#include "core/opts.h" /* MpOptDecl */

typedef enum MpSharedOpt {
    /* the corpus flags: documents into N rows of S ids (tok/corpus.h, MpTokCorpusOpts) */
    MP_SHARED_DATA,
    MP_SHARED_TOKENIZER,
    MP_SHARED_FIELD,
    MP_SHARED_WHOLE,
    MP_SHARED_SHUFFLE,
    MP_SHARED_SEED,
    MP_SHARED_NO_SPECIAL,
    MP_SHARED_PACK,
    MP_SHARED_N,
    MP_SHARED_SEQ,
    /* how a run goes */
    MP_SHARED_THREADS,
    MP_SHARED_COMPUTE,
    MP_SHARED_DEVICE,
    MP_SHARED_COUNT
} MpSharedOpt;

extern const MpOptDecl mp_shared_opts[MP_SHARED_COUNT];

/* --compute's words: f32 (MP_FWD_COMPUTE_F32) and bf16 (MP_FWD_COMPUTE_BF16). */
extern const MpOptChoice mp_shared_compute_words[];

#endif
