/* opts.h — a command's options as one table: one row per option, from which its getopt table,
 * its values and their one-line messages, its --help text and (for the probe) its settings as
 * "name=value" text all come.
 *
 * Implements:
 *   - MpOptDecl, what an option is wherever it appears (name, kind, metavar, range, words, help);
 *     MpOpt, a row of one command's table: a declaration — its own, or one that several commands
 *     share (job/shared_opts.h: the corpus flags, --threads, --compute, --device ...) — and where
 *     its value goes (the offset of a field of the command's config), with what the command says
 *     differently (its help text, its metavar, a narrower range); MpOptTable, a command's table
 *     with the prose of its --help;
 *   - mp_opts_parse: argv through getopt_long over the rows (long options, their unique prefixes,
 *     --name=value, the rows' short letters, -h), each value into its field with its message —
 *     "--seq: 'x' is not an integer", "--seq: 0 is outside [1, 1048576]", "--norm: 'x' is not l2,
 *     layernorm or none" — and the unknown flag's: "unknown option or missing value: '--x' (see
 *     'maskpos probe --help')";
 *   - mp_opt_set: one value into its field (what the C API and MPI ranks use for the probe);
 *   - mp_opts_help: the --help text: the usage prose, every row's "  --name ARG" padded to the
 *     table's column then its help (continuation lines indented to the column; generated help
 *     wrapped to lines of 98 columns), sections before rows, the closing prose;
 *   - mp_opts_write: the rows whose value differs from a default config, as "name=value" text.
 * Does not: know any command (the tables live beside their commands: src/cli/<command>.c, the
 * probe's in src/job/probe_opts.c), print errors (callers prefix "maskpos <command>: error: "), or
 * check options against each other (the commands do, after parsing).
 * Tested by: tests/test_opts.c (a table of every kind, flag and help layout, by hand),
 * tests/test_cli_texts.c (every command's --help and bad flags against the texts of the binary
 * before these tables), tests/test_probe_opts.c.
 */
#ifndef MP_CORE_OPTS_H
#define MP_CORE_OPTS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "core/err.h" /* MpErr */

/* What a value is, and the type of the field it sets. */
typedef enum MpOptKind {
    MP_OPT_BOOL,   /* int: a switch sets 1 (MP_OPT_OFF: 0); as a setting 1/0, true/false, on/off */
    MP_OPT_INT,    /* int in [lo, hi] */
    MP_OPT_I64,    /* int64_t in [lo, hi] */
    MP_OPT_U64,    /* uint64_t, given in [lo, hi] */
    MP_OPT_DOUBLE, /* double in [dlo, dhi] ([dlo, dhi) with MP_OPT_OPEN) */
    MP_OPT_STRING, /* const char *, borrowed from the caller's text; .check may refuse it */
    MP_OPT_CHOICE, /* int: the value of one of .choices' words */
    MP_OPT_CUSTOM, /* .set takes the text: lists, repeated flags, words of another table */
    MP_OPT_KIND_COUNT
} MpOptKind;

/* Flags of a row (MpOpt.flags) or of a declaration (MpOptDecl.flags): a row has both. */
enum {
    MP_OPT_CLI = 1,        /* the command line's only: not a setting of the C API (probe) */
    MP_OPT_RUN = 2,        /* how the run goes, not what it computes: left out of reuse keys */
    MP_OPT_POSITIONAL = 4, /* not a flag (the probe's MODEL): the CLI's argument */
    MP_OPT_OFF = 8,        /* a switch that sets its field to 0 (--no-special into add_special) */
    MP_OPT_OPEN = 16,      /* DOUBLE: hi is outside the range, "[lo, hi)" */
    MP_OPT_HIDE = 32,      /* no line of --help (another row's line names it: --vmin X, --vmax X) */
    MP_OPT_HELP = 64,      /* the --help switch itself (a row only where --help lists it) */
    MP_OPT_MARK = 128,     /* a mark the command reads from mp_opts_parse's counts (train: a
                              setting --resume takes from the checkpoint) */
    MP_OPT_NARROW = 256,   /* the row's lo, hi (dlo, dhi) instead of its declaration's: a range
                              within the shared one (checked when the table is parsed) */
};

#define MP_OPT_NO_FIELD ((size_t)-1)

/* A word of a CHOICE option and the value it sets. */
typedef struct MpOptChoice {
    const char *word;
    int value;
} MpOptChoice;

/* A range another table owns (a setting also checked elsewhere: train's optimiser settings, read
 * back from a checkpoint): name is the flag ("--lr") or the setting's name. */
typedef struct MpOptRange {
    const char *name;
    double lo, hi;
} MpOptRange;

typedef struct MpOpt MpOpt;

/* What an option is, wherever it appears. */
typedef struct MpOptDecl {
    const char *name;                    /* the flag without "--"; the setting's name */
    int kind;                            /* MpOptKind */
    const char *arg;                     /* metavar in --help ("FILE"); NULL for a switch */
    const char *help;                    /* --help text; lines after the first are indented */
    int64_t lo, hi;                      /* INT, I64, U64 */
    double dlo, dhi;                     /* DOUBLE */
    const MpOptRange *range;             /* numbers: this range instead of lo, hi / dlo, dhi */
    const MpOptChoice *choices;          /* CHOICE: the words, ending with {NULL} */
    int (*check)(const char *v, MpErr *e); /* STRING: MP_ERR and its line for a value refused */
    /* CUSTOM: v into cfg (the row's field, or several of the command's); MP_ERR and its line */
    int (*set)(void *cfg, const MpOpt *o, const char *v, MpErr *e);
    /* help generated from another table (the devices, the families): one text into buf [cap],
     * '\n' where a line must end; mp_opts_help wraps it to lines of 98 columns */
    void (*help_fn)(char *buf, size_t cap);
    char letter;                         /* also -<letter> (-o); 0: none */
    int flags;                           /* MP_OPT_OFF, MP_OPT_OPEN: what the value means */
} MpOptDecl;

/* A row of one command's table. */
struct MpOpt {
    const MpOptDecl *decl; /* its own (MP_OPT_DECL) or a shared one */
    size_t field;          /* offsetof(the command's config, ...), or MP_OPT_NO_FIELD (a switch whose
                              count the command reads from mp_opts_parse's given[], or CUSTOM) */
    int flags;             /* MP_OPT_CLI | _RUN | _POSITIONAL | _OFF | _HIDE | _HELP | _MARK | _NARROW */
    const char *help;      /* NULL: the declaration's */
    const char *arg;       /* NULL: the declaration's */
    int64_t lo, hi;        /* with MP_OPT_NARROW */
    double dlo, dhi;       /* with MP_OPT_NARROW */
    const char *head;      /* --help: this instead of "--name ARG" ("--vmin X, --vmax X") */
    const char *before;    /* --help: text printed before the row (a section's title) */
};

/* A row's own declaration: MP_OPT_DECL("seq", MP_OPT_INT, .lo = 1, ...) */
#define MP_OPT_DECL(...) (&(const MpOptDecl){__VA_ARGS__})

/* One command's table and the prose of its --help. */
typedef struct MpOptTable {
    const char *cmd;   /* "probe": messages and hints name it */
    const MpOpt *rows;
    int n;
    int col;           /* the column where help texts start (probe: 23) */
    const char *usage; /* --help before the rows (ends with its blank line) */
    const char *end;   /* --help after the rows; NULL: nothing */
} MpOptTable;

/* The help text and metavar a row shows (its own, else its declaration's). */
static inline const char *mp_opt_help(const MpOpt *o) { return o->help ? o->help : o->decl->help; }
static inline const char *mp_opt_arg(const MpOpt *o) { return o->arg ? o->arg : o->decl->arg; }
static inline const char *mp_opt_name(const MpOpt *o) { return o->decl->name; }

/* mp_opts_parse's answer besides MP_OK and MP_ERR: --help or -h was given (nothing printed). */
#define MP_OPTS_HELP 1

/* argv [argc] (argv[0] the command) through t into cfg: MP_OK with the positional arguments at
 * argv[*first .. argc) (getopt_long moves them there), MP_OPTS_HELP, or MP_ERR and the line of
 * the first bad flag or value in e. given: NULL, or [t->n] counts of each row given. A table
 * that breaks its own rules (a name twice, a switch with a metavar, a narrowed range outside its
 * declaration's) stops at MP_ASSERT. */
int mp_opts_parse(const MpOptTable *t, void *cfg, int argc, char **argv, int *first, int *given, MpErr *e);

/* value into cfg's field of row o (value NULL: a switch given on the command line, i.e. on).
 * MP_ERR with the command line's line; a row without a field: MP_ERR. */
int mp_opt_set(const MpOpt *o, void *cfg, const char *value, MpErr *e);

/* The index of the row called name in rows [n], or -1. */
int mp_opts_find(const MpOpt *rows, int n, const char *name);

/* The kind's name for the C API: "bool", "int", "number" or "string". */
const char *mp_opt_kind_name(int kind);

/* t's --help: its usage, the rows (but POSITIONAL and HIDE ones), its end. */
void mp_opts_help(FILE *f, const MpOptTable *t);

/* The rows of cfg with a field whose value differs from dflt's (both configs of rows [n]), in
 * table order, as "name=value" each followed by sep, into buf (snprintf-like: the length it needs
 * without the final NUL; buf may be NULL with cap 0). Rows with any of skip_flags are left out;
 * CUSTOM rows too (their text is not kept). */
size_t mp_opts_write(char *buf, size_t cap, const MpOpt *rows, int n, const void *cfg, const void *dflt, int skip_flags,
                     char sep);

#endif
