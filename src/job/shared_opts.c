/* shared_opts.c — the options several commands have, declared once; see shared_opts.h. */
#include "job/shared_opts.h"

#include <stdint.h>

#include "core/util.h"         /* MP_THREADS_MAX */
#include "model/devices.h"     /* mp_device_help: --device's help from the device table */
#include "model/fwd.h"         /* MP_FWD_COMPUTE_* */
#include "model/fwd_backend.h" /* mp_fwd_device_check */

const MpOptChoice mp_shared_compute_words[] = {{"f32", MP_FWD_COMPUTE_F32}, {"bf16", MP_FWD_COMPUTE_BF16}, {NULL, 0}};

const MpOptDecl mp_shared_opts[MP_SHARED_COUNT] = {
    [MP_SHARED_DATA] = {"data", MP_OPT_STRING, "TEXT",
             "instead of --tokens: documents (.jsonl, text file with blank-line separated\n"
             "documents, or a directory of .txt files) tokenized with the model's own\n"
             "tokenizer (src/tok/, as 'maskpos corpus'); the first N documents with at\n"
             "least S tokens are kept, cut to S (shorter ones are skipped and counted;\n"
             "fewer than N such documents: exit 2). Needs --n and --seq; --tokenizer,\n"
             "--field, --whole, --shuffle, --no-special and --pack go with it"},
    [MP_SHARED_TOKENIZER] = {"tokenizer", MP_OPT_STRING, "PATH",
             "tokenizer for --data: a directory with tokenizer.json, a tokenizer.json\n"
             "or a .gguf (default: MODEL)"},
    [MP_SHARED_FIELD] = {"field", MP_OPT_STRING, "NAME", ".jsonl: the text field (default \"text\")"},
    [MP_SHARED_WHOLE] = {"whole", MP_OPT_BOOL, NULL, "text files: one document per file, not per blank-line block"},
    [MP_SHARED_SHUFFLE] = {"shuffle", MP_OPT_BOOL, NULL, "visit documents in a random order fixed by --seed (default seed 0)"},
    [MP_SHARED_SEED] = {"seed", MP_OPT_U64, "K", "seed of --shuffle", .lo = 0, .hi = INT64_MAX},
    [MP_SHARED_NO_SPECIAL] = {"no-special", MP_OPT_BOOL, NULL, "do not add BOS/EOS"},
    [MP_SHARED_PACK] = {"pack", MP_OPT_BOOL, NULL,
             "concatenate the documents' ids and cut the stream into N rows of S (rows\n"
             "may span documents; for a few long or many short documents); with a\n"
             "tokenizer that adds BOS each row is BOS + the next S-1 ids"},
    [MP_SHARED_N] = {"n", MP_OPT_I64, "N", "use the first N sequences (default all; more than the file holds: exit 2)",
             .lo = 1, .hi = INT64_C(1) << 40},
    [MP_SHARED_SEQ] = {"seq", MP_OPT_INT, "S",
             "tokens per sequence (default: the .npy row length; required for raw).\n"
             ".npy rows shorter than S are an error (exit 2); in a raw stream a\n"
             "trailing remainder shorter than S is skipped and reported",
             .lo = 1, .hi = 1 << 20},
    [MP_SHARED_THREADS] = {"threads", MP_OPT_INT, "N", "worker threads (default: all cores)", .lo = 1, .hi = MP_THREADS_MAX},
    [MP_SHARED_COMPUTE] = {"compute", MP_OPT_CHOICE, "MODE", "f32 (default) or bf16 (docs/speed.md)",
             .choices = mp_shared_compute_words},
    [MP_SHARED_DEVICE] = {"device", MP_OPT_STRING, "NAME", NULL, .check = mp_fwd_device_check, .help_fn = mp_device_help},
};

_Static_assert(sizeof mp_shared_opts / sizeof *mp_shared_opts == MP_SHARED_COUNT, "one row per MpSharedOpt");
