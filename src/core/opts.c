/* opts.c — a command's option table read: argv, one value, --help, settings text; see opts.h.
 *
 * ================================================================ layout
 *   rows       what a row says (its declaration's, or its own), the table's own checks
 *   values     one value into its field, with the command line's messages
 *   argv       getopt_long over the rows
 *   help       the --help text
 *   settings   a config back into "name=value" text
 */
#include "core/opts.h"

#include <getopt.h>
#include <inttypes.h>
#include <string.h>

#include "core/util.h" /* mp_parse_i64, mp_parse_double */

#define OPTS_MAX 128       /* rows of one table (train has 36) */
#define OPTS_HELP_WIDTH 98 /* generated help texts are wrapped to lines of at most 98 columns */

/* ================================================================ rows */

/* The range a number row accepts: its own (MP_OPT_NARROW), another table's, or its declaration's. */
static void opt_range(const MpOpt *o, int64_t *lo, int64_t *hi, double *dlo, double *dhi) {
    const MpOptDecl *d = o->decl;
    if (o->flags & MP_OPT_NARROW) {
        *lo = o->lo, *hi = o->hi, *dlo = o->dlo, *dhi = o->dhi;
    } else if (d->range) {
        *lo = (int64_t)d->range->lo, *hi = (int64_t)d->range->hi, *dlo = d->range->lo, *dhi = d->range->hi;
    } else {
        *lo = d->lo, *hi = d->hi, *dlo = d->dlo, *dhi = d->dhi;
    }
}

static int opt_flags(const MpOpt *o) { return o->flags | o->decl->flags; }

int mp_opts_find(const MpOpt *rows, int n, const char *name) {
    for (int i = 0; i < n; i++)
        if (!strcmp(rows[i].decl->name, name)) return i;
    return -1;
}

/* The rules every table keeps; a table that breaks one is a bug of its command. */
static void opts_table_check(const MpOptTable *t) {
    MP_ASSERT(t->n > 0 && t->n <= OPTS_MAX);
    for (int i = 0; i < t->n; i++) {
        const MpOpt *o = &t->rows[i];
        MP_ASSERT(o->decl && o->decl->name && o->decl->kind >= 0 && o->decl->kind < MP_OPT_KIND_COUNT);
        MP_ASSERT(mp_opts_find(t->rows, t->n, o->decl->name) == i); /* a name once */
        MP_ASSERT((o->flags & (MP_OPT_HIDE | MP_OPT_POSITIONAL)) || mp_opt_help(o) || o->decl->help_fn);
        MP_ASSERT((o->decl->kind == MP_OPT_BOOL) == (mp_opt_arg(o) == NULL)); /* a switch has no metavar */
        MP_ASSERT(o->decl->kind != MP_OPT_CHOICE || o->decl->choices);
        MP_ASSERT(o->decl->kind != MP_OPT_CUSTOM || o->decl->set);
        MP_ASSERT(o->field != MP_OPT_NO_FIELD || o->decl->kind == MP_OPT_BOOL || o->decl->kind == MP_OPT_CUSTOM);
        if (o->flags & MP_OPT_NARROW) { /* within the declaration's range */
            const MpOpt wide = {.decl = o->decl};
            int64_t lo, hi;
            double dlo, dhi;
            opt_range(&wide, &lo, &hi, &dlo, &dhi);
            if (o->decl->kind == MP_OPT_DOUBLE) MP_ASSERT(o->dlo >= dlo && o->dhi <= dhi && o->dlo <= o->dhi);
            else MP_ASSERT(o->lo >= lo && o->hi <= hi && o->lo <= o->hi);
        }
    }
}

/* ================================================================ values */

static int opt_i64(int64_t *out, const MpOpt *o, const char *v, MpErr *e) {
    const char *name = o->decl->name;
    int64_t x, lo, hi;
    double dlo, dhi;
    opt_range(o, &lo, &hi, &dlo, &dhi);
    if (mp_parse_i64(v, INT64_MIN, INT64_MAX, &x) != MP_OK) return mp_err_set(e, "--%s: '%s' is not an integer", name, v);
    if (x < lo || x > hi) return mp_err_set(e, "--%s: %s is outside [%lld, %lld]", name, v, (long long)lo, (long long)hi);
    *out = x;
    return MP_OK;
}

static int opt_double(double *out, const MpOpt *o, const char *v, MpErr *e) {
    const char *name = o->decl->name;
    int64_t lo, hi;
    double d, dlo, dhi;
    opt_range(o, &lo, &hi, &dlo, &dhi);
    const int open = (opt_flags(o) & MP_OPT_OPEN) != 0;
    if (mp_parse_double(v, &d) != MP_OK) return mp_err_set(e, "--%s: '%s' is not a number", name, v);
    if (d < dlo || d > dhi || (open && d >= dhi))
        return mp_err_set(e, "--%s: %s is outside [%g, %g%c", name, v, dlo, dhi, open ? ')' : ']');
    *out = d;
    return MP_OK;
}

static int opt_bool(int *out, const MpOpt *o, const char *v, MpErr *e) {
    const int on = (opt_flags(o) & MP_OPT_OFF) ? 0 : 1;
    if (!v || !strcmp(v, "1") || !strcmp(v, "true") || !strcmp(v, "on")) *out = on;
    else if (!strcmp(v, "0") || !strcmp(v, "false") || !strcmp(v, "off")) *out = !on;
    else return mp_err_set(e, "--%s: '%s' is not 1 or 0 (true or false)", o->decl->name, v);
    return MP_OK;
}

/* "a or b", "a, b or c"; longer lists "one of a, b, c, d" */
static void opt_words(char *buf, size_t cap, const MpOptChoice *c) {
    int n = 0;
    while (c[n].word) n++;
    size_t k = (size_t)snprintf(buf, cap, "%s", n > 3 ? "one of " : "");
    for (int i = 0; i < n && k < cap; i++)
        k += (size_t)snprintf(buf + k, cap - k, "%s%s", i == 0 ? "" : i == n - 1 && n <= 3 ? " or " : ", ", c[i].word);
}

static int opt_choice(int *out, const MpOpt *o, const char *v, MpErr *e) {
    for (const MpOptChoice *c = o->decl->choices; c->word; c++)
        if (!strcmp(c->word, v)) {
            *out = c->value;
            return MP_OK;
        }
    char words[512];
    opt_words(words, sizeof words, o->decl->choices);
    return mp_err_set(e, "--%s: '%s' is not %s", o->decl->name, v, words);
}

int mp_opt_set(const MpOpt *o, void *cfg, const char *v, MpErr *e) {
    const MpOptDecl *d = o->decl;
    if (d->kind == MP_OPT_CUSTOM) return d->set(cfg, o, v, e);
    if (o->field == MP_OPT_NO_FIELD) return mp_err_set(e, "--%s has no field to set", d->name);
    void *p = (char *)cfg + o->field;
    if (!v && d->kind != MP_OPT_BOOL) return mp_err_set(e, "--%s needs a value", d->name);
    int64_t x;
    switch ((MpOptKind)d->kind) {
    case MP_OPT_BOOL: return opt_bool(p, o, v, e);
    case MP_OPT_INT:
        if (opt_i64(&x, o, v, e) != MP_OK) return MP_ERR;
        *(int *)p = (int)x;
        return MP_OK;
    case MP_OPT_I64: return opt_i64(p, o, v, e);
    case MP_OPT_U64:
        if (opt_i64(&x, o, v, e) != MP_OK) return MP_ERR;
        *(uint64_t *)p = (uint64_t)x;
        return MP_OK;
    case MP_OPT_DOUBLE: return opt_double(p, o, v, e);
    case MP_OPT_STRING:
        if (d->check && d->check(v, e) != MP_OK) return MP_ERR;
        *(const char **)p = v;
        return MP_OK;
    case MP_OPT_CHOICE: return opt_choice(p, o, v, e);
    case MP_OPT_CUSTOM:
    case MP_OPT_KIND_COUNT: break;
    }
    return mp_err_set(e, "--%s: unknown kind %d", d->name, d->kind);
}

const char *mp_opt_kind_name(int kind) {
    switch ((MpOptKind)kind) {
    case MP_OPT_BOOL: return "bool";
    case MP_OPT_INT:
    case MP_OPT_I64:
    case MP_OPT_U64: return "int";
    case MP_OPT_DOUBLE: return "number";
    case MP_OPT_STRING:
    case MP_OPT_CHOICE:
    case MP_OPT_CUSTOM: return "string";
    case MP_OPT_KIND_COUNT: break;
    }
    return NULL;
}

/* ================================================================ argv */

/* getopt_long's value of row i (above every short option's character). */
#define OPTS_VAL(i) (256 + (i))

/* The unknown flag (or the flag without its value) the way getopt_long saw it. */
static int opts_bad_flag(const MpOptTable *t, char **argv, MpErr *e) {
    const char *word = argv[optind - 1];
    int known = 0; /* a row's letter without its value */
    for (int i = 0; i < t->n; i++) known |= optopt && t->rows[i].decl->letter == optopt;
    if (known) return mp_err_set(e, "unknown option or missing value: '-%c' (see 'maskpos %s --help')", optopt, t->cmd);
    if (optopt && optopt < 256 && word && word[0] == '-' && word[1] != '-')
        return mp_err_set(e, "unknown option '-%c' (see 'maskpos %s --help')", optopt, t->cmd);
    return mp_err_set(e, "unknown option or missing value: '%s' (see 'maskpos %s --help')", word ? word : "?", t->cmd);
}

int mp_opts_parse(const MpOptTable *t, void *cfg, int argc, char **argv, int *first, int *given, MpErr *e) {
    opts_table_check(t);
    struct option lo[OPTS_MAX + 2];
    char shorts[2 * OPTS_MAX + 2] = "h";
    int k = 0, s = 1, help_row = -1;
    for (int i = 0; i < t->n; i++) {
        const MpOpt *o = &t->rows[i];
        if (o->flags & MP_OPT_HELP) help_row = i;
        if (o->flags & MP_OPT_POSITIONAL) continue;
        const int has_arg = o->decl->kind == MP_OPT_BOOL ? no_argument : required_argument;
        lo[k++] = (struct option){o->decl->name, has_arg, 0, OPTS_VAL(i)};
        if (o->decl->letter && o->decl->letter != 'h') {
            shorts[s++] = o->decl->letter;
            if (has_arg == required_argument) shorts[s++] = ':';
        }
    }
    if (help_row < 0) lo[k++] = (struct option){"help", no_argument, 0, 'h'};
    lo[k] = (struct option){0, 0, 0, 0};
    shorts[s] = 0;
    if (given) memset(given, 0, (size_t)t->n * sizeof *given);
    opterr = 0;
    optind = 0; /* 0: glibc starts afresh (a process may parse more than once: tests) */
    int ch;
    while ((ch = getopt_long(argc, argv, shorts, lo, NULL)) != -1) {
        int id = ch - OPTS_VAL(0);
        if (ch == 'h' || (help_row >= 0 && id == help_row)) return MP_OPTS_HELP;
        if (ch > 0 && ch < 256) /* a short letter of a row */
            for (id = 0; id < t->n && t->rows[id].decl->letter != ch; id++) {
            }
        if (ch == '?' || id < 0 || id >= t->n) return opts_bad_flag(t, argv, e);
        const MpOpt *o = &t->rows[id]; /* a switch without a field: the command reads its count */
        if ((o->field != MP_OPT_NO_FIELD || o->decl->kind == MP_OPT_CUSTOM) && mp_opt_set(o, cfg, optarg, e) != MP_OK)
            return MP_ERR;
        if (given) given[id]++;
    }
    *first = optind;
    return MP_OK;
}

/* ================================================================ help */

/* A generated text of f from column start (already there): words as they fit in lines of
 * OPTS_HELP_WIDTH columns, the next lines indented to col; '\n' ends a line where the text says. */
static void help_wrapped(FILE *f, const char *text, int col, int start) {
    int at = start, fresh = 1; /* the column reached; nothing on this line yet */
    for (const char *p = text; *p;) {
        if (*p == ' ') {
            p++;
            continue;
        }
        const int word = *p == '\n' ? 0 : (int)strcspn(p, " \n");
        if (*p == '\n' || (!fresh && at + 1 + word > OPTS_HELP_WIDTH)) {
            fprintf(f, "\n%*s", col, "");
            at = col, fresh = 1;
            p += *p == '\n';
            continue;
        }
        if (!fresh) fputc(' ', f), at++;
        fwrite(p, 1, (size_t)word, f);
        at += word, fresh = 0;
        p += word;
    }
}

/* A written text at column col of f: as it is, lines after the first indented to col. */
static void help_plain(FILE *f, const char *text, int col) {
    for (const char *p = text; *p; p++) {
        fputc(*p, f);
        if (*p == '\n') fprintf(f, "%*s", col, "");
    }
}

void mp_opts_help(FILE *f, const MpOptTable *t) {
    if (t->usage) fputs(t->usage, f);
    for (int i = 0; i < t->n; i++) {
        const MpOpt *o = &t->rows[i];
        if (o->flags & (MP_OPT_POSITIONAL | MP_OPT_HIDE)) continue;
        if (o->before) fputs(o->before, f);
        char head[128];
        const char *arg = mp_opt_arg(o);
        int k = o->decl->letter ? snprintf(head, sizeof head, "-%c, ", o->decl->letter) : 0;
        if (o->head) snprintf(head, sizeof head, "%s", o->head);
        else snprintf(head + k, sizeof head - (size_t)k, "--%s%s%s", o->decl->name, arg ? " " : "", arg ? arg : "");
        const int w = t->col - 3, hl = (int)strlen(head);
        if (hl <= w) fprintf(f, "  %-*s ", w, head);
        else fprintf(f, "  %s  ", head); /* longer than the column: two spaces, the text goes on */
        if (o->decl->help_fn && !o->help) {
            char buf[2048];
            o->decl->help_fn(buf, sizeof buf);
            help_wrapped(f, buf, t->col, hl <= w ? t->col : hl + 4);
        } else {
            help_plain(f, mp_opt_help(o), t->col);
        }
        fputc('\n', f);
    }
    if (t->end) fputs(t->end, f);
}

/* ================================================================ settings */

/* Row o of c as text into v (cap 32 for numbers; strings are pointed to by *s); 0 when it holds
 * the value of d. */
static int opt_value(char v[32], const char **s, const MpOpt *o, const void *c, const void *d) {
    const char *p = (const char *)c + o->field, *q = (const char *)d + o->field;
    *s = v;
    switch ((MpOptKind)o->decl->kind) {
    case MP_OPT_BOOL: /* the switch as given: on when an MP_OPT_OFF row's field is 0 */
        snprintf(v, 32, "%d", (opt_flags(o) & MP_OPT_OFF) ? !*(const int *)p : *(const int *)p != 0);
        return *(const int *)p != *(const int *)q;
    case MP_OPT_INT:
        snprintf(v, 32, "%d", *(const int *)p);
        return *(const int *)p != *(const int *)q;
    case MP_OPT_CHOICE:
        *s = "?";
        for (const MpOptChoice *w = o->decl->choices; w->word; w++)
            if (w->value == *(const int *)p) *s = w->word;
        return *(const int *)p != *(const int *)q;
    case MP_OPT_I64:
        snprintf(v, 32, "%" PRId64, *(const int64_t *)p);
        return *(const int64_t *)p != *(const int64_t *)q;
    case MP_OPT_U64:
        snprintf(v, 32, "%" PRIu64, *(const uint64_t *)p);
        return *(const uint64_t *)p != *(const uint64_t *)q;
    case MP_OPT_DOUBLE: /* %.17g reads back as the same double */
        snprintf(v, 32, "%.17g", *(const double *)p);
        return memcmp(p, q, sizeof(double)) != 0;
    case MP_OPT_STRING:
        *s = *(const char *const *)p;
        return *s != NULL;
    case MP_OPT_CUSTOM:
    case MP_OPT_KIND_COUNT: break;
    }
    return 0;
}

size_t mp_opts_write(char *buf, size_t cap, const MpOpt *rows, int n, const void *cfg, const void *dflt, int skip_flags,
                     char sep) {
    size_t len = 0;
    for (int i = 0; i < n; i++) {
        const MpOpt *o = &rows[i];
        char num[32];
        const char *v;
        if (o->field == MP_OPT_NO_FIELD || o->decl->kind == MP_OPT_CUSTOM || (opt_flags(o) & skip_flags) ||
            !opt_value(num, &v, o, cfg, dflt))
            continue;
        const size_t nl = strlen(o->decl->name), vl = strlen(v);
        const char *parts[3] = {o->decl->name, "=", v};
        const size_t lens[3] = {nl, 1, vl};
        for (int k = 0; k < 3; k++) {
            if (len + lens[k] < cap) memcpy(buf + len, parts[k], lens[k]);
            len += lens[k];
        }
        if (len + 1 < cap) buf[len] = sep;
        len++;
    }
    if (cap) buf[len < cap ? len : cap - 1] = 0;
    return len;
}
