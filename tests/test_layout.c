/* test_layout.c — two rules of the house style (docs style.md §1, §11) checked on the tree itself:
 *
 *   - no include circle between units of src/: a unit is x.c with its header x.h (either may be
 *     missing); unit A depends on unit B when x.c or x.h of A includes "B.h" (a header of
 *     src/). Any circle A -> ... -> A fails, named unit by unit;
 *   - no function body in src/ (.c and .h) longer than MP_LAYOUT_MAX_LINES lines, counted from
 *     the line of its opening brace to the line of its closing brace, both included. A function
 *     is a brace at file level whose previous token is ')' (comments, strings, character
 *     constants and preprocessor lines are skipped first), so struct bodies and initialisers
 *     (`= {`) are not counted.
 *   - src/repro in layers (issue 27 item 4): a header there is the interface of one .c (every
 *     function it declares is defined in that one file, its implementation: a header whose
 *     functions live in several files hides a circle from the unit graph above, as stage.h did
 *     for registry.c, models.c and paper.c); with headers mapped to their implementations, no
 *     circle; no file includes the header of a stage file (a .c that defines an MpReproStage
 *     entry: stages share what lies below them, never each other); and repro/repro.h, the
 *     registry's, is included by its implementation and src/cli only.
 *   - no circle between the files of src/ by what they call (issue 27): a file depends on each
 *     header it includes and on the .c files that define the functions of that header it names,
 *     so a header that several .c files implement (cli/cli.h: a command per file; viz/plot.h,
 *     tok/tok.h) links its includer to the ones it really calls, not to all of them.
 *   - one name, one file (issue 35 item 5): no two files of src/ share a name (whatever their
 *     folders), and a header is implemented by the file of its name: every mp_ function a header
 *     x.h declares is defined in x.c (or x.cu), or in a file its purpose block lists on a line
 *     "Implemented by: a.c, b.c, cmd_*.c." (names without a folder are in the header's folder,
 *     a * matches any run of characters; names inside parentheses are notes, not the list; the
 *     list ends at the first '.' before a space), and every name listed is there. A header that
 *     several files implement without saying so hid the circle tok/bpe.c -> tok/hf.h (whose
 *     functions hf_load.c, which calls bpe.c, defined);
 *   - no import circle between the modules of python/maskpos (`from . import _x`, `from ._x
 *     import`, at any indentation: a function-level import is a dependence too); the package's
 *     __init__.py is left out (every module takes the package's Error from it at call time).
 * The checks run first on small files written here (a circle of three units, a circle of calls
 * through a header of two .c files, a function one line over the limit and one at it, a long
 * initialiser, a repro/ tree with each fault, two files of one name, a header two files implement
 * unsaid, a listed file that is not there, two Python modules importing each other inside
 * functions), so they are seen to fail where they must, then on MP_SOURCE_DIR/src and
 * MP_SOURCE_DIR/python/maskpos. Run on the tree before issue 35 item 5 the names checks found 16
 * shared names, 12 headers (44 header-file pairs) and the circle _torch -> _accumulator -> _torch.
 */
#include <dirent.h>
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "testutil.h"

#define MP_LAYOUT_MAX_LINES 120
#define MAX_UNITS 1024

/* ================================================================ files */

typedef struct Units {
    char name[MAX_UNITS][512];   /* "core/util" */
    int n;
    unsigned char *dep;          /* [n, n]: dep[a*MAX_UNITS + b] = 1 when a includes a header of b */
} Units;

/* Every .c and .h (any file when any) under root/rel (rel "" at the top), as paths relative to
 * root, into list. */
static void walk_files(const char *root, const char *rel, char (*list)[512], int *n, int cap, int any) {
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/%s", root, rel);
    DIR *d = opendir(dir);
    if (!d) fail_msg("cannot open %s", dir);
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        if (de->d_name[0] == '.') continue;
        char sub[512], full[1536];
        snprintf(sub, sizeof sub, "%s%s%s", rel, *rel ? "/" : "", de->d_name);
        snprintf(full, sizeof full, "%s/%s", root, sub);
        struct stat st;
        if (stat(full, &st) != 0) continue;
        if (S_ISDIR(st.st_mode)) {
            walk_files(root, sub, list, n, cap, any);
            continue;
        }
        const size_t l = strlen(sub);
        if (any || (l > 2 && sub[l - 2] == '.' && (sub[l - 1] == 'c' || sub[l - 1] == 'h'))) {
            if (*n >= cap) fail_msg("more than %d source files", cap);
            snprintf(list[(*n)++], 512, "%s", sub);
        }
    }
    closedir(d);
}

static void walk(const char *root, const char *rel, char (*list)[512], int *n, int cap) {
    walk_files(root, rel, list, n, cap, 0);
}

/* ================================================================ include circles */

static int unit_index(Units *u, const char *name, int add) {
    for (int i = 0; i < u->n; i++)
        if (!strcmp(u->name[i], name)) return i;
    if (!add) return -1;
    if (u->n >= MAX_UNITS) fail_msg("more than %d units", MAX_UNITS);
    snprintf(u->name[u->n], sizeof u->name[0], "%s", name);
    return u->n++;
}

/* The unit graph of the files under root. */
static void units_read(Units *u, const char *root) {
    static char files[4 * MAX_UNITS][512];
    int nf = 0;
    walk(root, "", files, &nf, 4 * MAX_UNITS);
    u->n = 0;
    for (int i = 0; i < nf; i++) {
        char stem[512];
        snprintf(stem, sizeof stem, "%.*s", (int)strlen(files[i]) - 2, files[i]);
        unit_index(u, stem, 1);
    }
    u->dep = calloc((size_t)MAX_UNITS * MAX_UNITS, 1);
    for (int i = 0; i < nf; i++) {
        char stem[512], full[1536];
        snprintf(stem, sizeof stem, "%.*s", (int)strlen(files[i]) - 2, files[i]);
        snprintf(full, sizeof full, "%s/%s", root, files[i]);
        const int a = unit_index(u, stem, 0);
        char *s = mp_test_read_text(full);
        if (!s) fail_msg("cannot read %s", full);
        for (char *line = s; line && *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
            char inc[512];
            if (sscanf(line, " # include \"%511[^\"]\"", inc) != 1) continue;
            const size_t l = strlen(inc);
            if (l < 3 || strcmp(inc + l - 2, ".h")) continue;
            inc[l - 2] = 0;
            char hdr[1536];
            snprintf(hdr, sizeof hdr, "%s/%s.h", root, inc);
            struct stat st;
            if (stat(hdr, &st) != 0) continue; /* a system or generated header */
            const int b = unit_index(u, inc, 0);
            if (b >= 0 && b != a) u->dep[(size_t)a * MAX_UNITS + b] = 1;
        }
        free(s);
    }
}

/* Depth-first search from v; on a circle, writes it into msg and returns 1. */
static int dfs(const Units *u, int v, int *state, int *stack, int depth, char *msg, size_t cap) {
    state[v] = 1;
    stack[depth] = v;
    for (int w = 0; w < u->n; w++) {
        if (!u->dep[(size_t)v * MAX_UNITS + w]) continue;
        if (state[w] == 1) {
            size_t o = 0;
            int k = depth;
            while (stack[k] != w) k--;
            for (; k <= depth; k++) o += (size_t)snprintf(msg + o, o < cap ? cap - o : 0, "%s -> ", u->name[stack[k]]);
            snprintf(msg + o, o < cap ? cap - o : 0, "%s", u->name[w]);
            return 1;
        }
        if (state[w] == 0 && dfs(u, w, state, stack, depth + 1, msg, cap)) return 1;
    }
    state[v] = 2;
    return 0;
}

/* 1 and the first circle of graph u in msg, 0 when it has none. */
static int graph_circle(const Units *u, char *msg, size_t cap) {
    int *state = calloc(MAX_UNITS, sizeof *state), *stack = calloc(MAX_UNITS, sizeof *stack);
    int found = 0;
    for (int v = 0; v < u->n && !found; v++)
        if (state[v] == 0) found = dfs(u, v, state, stack, 0, msg, cap);
    free(state);
    free(stack);
    return found;
}

/* 1 and the circle in msg when the units under root include each other in a circle. */
static int find_circle(const char *root, char *msg, size_t cap) {
    static Units u;
    units_read(&u, root);
    const int found = graph_circle(&u, msg, cap);
    free(u.dep);
    return found;
}

/* ================================================================ function lengths */

/* s with comments, string and character constants and preprocessor lines blanked (newlines
 * kept, so line numbers stay). */
static void blank_noise(char *s) {
    int line_start = 1;
    for (char *p = s; *p;) {
        if (line_start && (*p == ' ' || *p == '\t')) {
            p++;
            continue;
        }
        if (line_start && *p == '#') { /* a preprocessor line, with its continuations */
            char last = 0;
            for (; *p && !(*p == '\n' && last != '\\'); p++) {
                last = *p == '\n' ? 0 : *p;
                if (*p != '\n') *p = ' ';
            }
            continue;
        }
        line_start = 0;
        if (p[0] == '/' && p[1] == '*') {
            char *e = strstr(p + 2, "*/");
            char *end = e ? e + 2 : p + strlen(p);
            for (; p < end; p++)
                if (*p != '\n') *p = ' ';
        } else if (p[0] == '/' && p[1] == '/') {
            for (; *p && *p != '\n'; p++) *p = ' ';
        } else if (*p == '"' || *p == '\'') {
            const char q = *p++;
            for (; *p && *p != q; p++) {
                if (*p == '\\' && p[1]) *p++ = ' ';
                if (*p != '\n') *p = ' ';
            }
            if (*p) p++;
        } else {
            if (*p == '\n') line_start = 1;
            p++;
        }
    }
}

/* Appends "path:line (n lines)" to msg for every function of the file over max lines; returns
 * how many. */
static int long_functions(const char *path, const char *shown, int max, char *msg, size_t cap) {
    char *s = mp_test_read_text(path);
    if (!s) fail_msg("cannot read %s", path);
    blank_noise(s);
    int depth = 0, line = 1, start = -1, found = 0;
    char prev = 0; /* the last non-blank character at file level */
    for (char *p = s; *p; p++) {
        if (*p == '\n') line++;
        if (*p == '{') {
            if (depth == 0) start = prev == ')' ? line : -1;
            depth++;
        } else if (*p == '}') {
            if (--depth == 0 && start >= 0) {
                const int n = line - start + 1;
                if (n > max) {
                    const size_t o = strlen(msg);
                    snprintf(msg + o, cap - o, "  %s:%d (%d lines)\n", shown, start, n);
                    found++;
                }
                start = -1;
            }
        }
        if (depth == 0 && *p != ' ' && *p != '\t' && *p != '\n') prev = *p;
    }
    free(s);
    return found;
}

static int long_functions_under(const char *root, int max, char *msg, size_t cap) {
    static char files[4 * MAX_UNITS][512];
    int nf = 0, found = 0;
    walk(root, "", files, &nf, 4 * MAX_UNITS);
    for (int i = 0; i < nf; i++) {
        char full[1536];
        snprintf(full, sizeof full, "%s/%s", root, files[i]);
        found += long_functions(full, files[i], max, msg, cap);
    }
    return found;
}


/* ================================================================ src/repro in layers */

#define MAX_FUNCS 4096

typedef struct Funcs {
    char name[MAX_FUNCS][64];
    char file[MAX_FUNCS][512]; /* the file (relative to the root) of each name */
    int n;
} Funcs;

/* The file-level functions of the file at path (shown as rel): declarations (a name, its
 * parameter list, then ';') into decl, definitions (then '{') into def; either may be NULL. Only
 * names with our prefix mp_ count as declarations. */
static void funcs_read(Funcs *decl, Funcs *def, const char *path, const char *rel) {
    char *s = mp_test_read_text(path);
    if (!s) fail_msg("cannot read %s", path);
    blank_noise(s);
    int depth = 0;
    for (char *p = s; *p; p++) {
        if (*p == '{') depth++;
        if (*p == '}') depth--;
        if (depth != 0 || *p != '(') continue;
        char *e = p;
        while (e > s && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\n')) e--;
        char *b = e;
        while (b > s && (b[-1] == '_' || (b[-1] >= 'a' && b[-1] <= 'z') || (b[-1] >= 'A' && b[-1] <= 'Z') || (b[-1] >= '0' && b[-1] <= '9')))
            b--;
        if (b == e || e - b >= 64) continue;
        int paren = 0;
        char *q = p;
        for (; *q; q++) {
            if (*q == '(') paren++;
            if (*q == ')' && --paren == 0) break;
        }
        if (!*q) break;
        q++;
        for (;;) { /* spaces and __attribute__((...)) before ';' or '{' */
            while (*q == ' ' || *q == '\t' || *q == '\n') q++;
            if (strncmp(q, "__attribute__", 13)) break;
            q += 13;
            while (*q == ' ') q++;
            for (paren = 0; *q; q++) {
                if (*q == '(') paren++;
                if (*q == ')' && --paren == 0) break;
            }
            if (*q) q++;
        }
        Funcs *to = *q == ';' && !strncmp(b, "mp_", 3) ? decl : *q == '{' ? def : NULL;
        if (to) {
            if (to->n >= MAX_FUNCS) fail_msg("more than %d functions", MAX_FUNCS);
            snprintf(to->name[to->n], sizeof to->name[0], "%.*s", (int)(e - b), b);
            snprintf(to->file[to->n++], sizeof to->file[0], "%.511s", rel);
        }
        p = q - 1;
    }
    free(s);
}

/* The implementation of header rel ("repro/stage.h"): the one .c defining its functions, or the
 * .c of its name when it declares none; "" when that file does not exist. Appends to msg and
 * returns 1 when its functions are defined in more than one file. */
static int header_impl(char *impl, size_t cap, const Funcs *decl, const Funcs *def, const char *root, const char *rel, char *msg,
                       size_t mcap) {
    impl[0] = 0;
    int bad = 0;
    for (int i = 0; i < decl->n; i++) {
        if (strcmp(decl->file[i], rel)) continue;
        for (int j = 0; j < def->n; j++) {
            if (strcmp(def->name[j], decl->name[i])) continue;
            if (!impl[0]) snprintf(impl, cap, "%s", def->file[j]);
            else if (strcmp(impl, def->file[j]) && !bad) {
                const size_t o = strlen(msg);
                snprintf(msg + o, mcap - o, "  %s declares functions of two files: %s in %s, and others in %s\n", rel, decl->name[i],
                         def->file[j], impl);
                bad = 1;
            }
        }
    }
    if (!impl[0]) {
        char c[1536], full[2048];
        snprintf(c, sizeof c, "%.*s.c", (int)strlen(rel) - 2, rel);
        snprintf(full, sizeof full, "%s/%s", root, c);
        struct stat st;
        if (stat(full, &st) == 0) snprintf(impl, cap, "%.511s", c);
    }
    return bad;
}

/* The checks of the header comment on root/sub ("repro"), with the functions of every file of
 * root. Appends one line per fault to msg; returns how many. */
static int repro_layers(const char *root, const char *sub, char *msg, size_t cap) {
    static char files[4 * MAX_UNITS][512], impl[4 * MAX_UNITS][512];
    static Funcs decl, def;
    int nf = 0, found = 0;
    decl.n = def.n = 0;
    walk(root, "", files, &nf, 4 * MAX_UNITS);
    const size_t ls = strlen(sub);
    for (int i = 0; i < nf; i++) {
        char full[1536];
        snprintf(full, sizeof full, "%.1000s/%.511s", root, files[i]);
        const int in_sub = !strncmp(files[i], sub, ls) && files[i][ls] == '/';
        funcs_read(in_sub ? &decl : NULL, &def, full, files[i]);
    }
    /* every file's unit: a header's implementation (or itself), a source itself */
    int stage_file[4 * MAX_UNITS] = {0};
    for (int i = 0; i < nf; i++) {
        const size_t l = strlen(files[i]);
        snprintf(impl[i], sizeof impl[i], "%s", files[i]);
        const int in_sub = !strncmp(files[i], sub, ls) && files[i][ls] == '/';
        if (in_sub && files[i][l - 1] == 'h') {
            char m[512];
            found += header_impl(m, sizeof m, &decl, &def, root, files[i], msg, cap);
            if (m[0]) snprintf(impl[i], sizeof impl[i], "%s", m);
        }
        if (in_sub && files[i][l - 1] == 'c') {
            char full[1536];
            snprintf(full, sizeof full, "%s/%s", root, files[i]);
            char *s = mp_test_read_text(full);
            stage_file[i] = s && strstr(s, "const MpReproStage mp_repro_stage_") != NULL;
            free(s);
        }
    }
    /* the unit graph of sub's files, headers mapped to their implementations */
    static Units u;
    u.n = 0;
    free(u.dep);
    u.dep = calloc((size_t)MAX_UNITS * MAX_UNITS, 1);
    for (int i = 0; i < nf; i++) {
        if (strncmp(files[i], sub, ls) || files[i][ls] != '/') continue;
        char full[1536];
        snprintf(full, sizeof full, "%.1000s/%.511s", root, files[i]);
        char *s = mp_test_read_text(full);
        const int a = unit_index(&u, impl[i], 1);
        for (char *line = s; line && *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
            char inc[512];
            if (sscanf(line, " # include \"%511[^\"]\"", inc) != 1) continue;
            int j = 0;
            while (j < nf && strcmp(files[j], inc)) j++;
            if (j == nf) continue; /* not a file of root */
            const int b = unit_index(&u, impl[j], 1);
            if (b != a) u.dep[(size_t)a * MAX_UNITS + b] = 1;
            for (int k = 0; k < nf; k++) /* the header's implementation is a stage file (not this one) */
                if (stage_file[k] && !strcmp(files[k], impl[j]) && strcmp(impl[j], impl[i])) {
                    const size_t o = strlen(msg);
                    snprintf(msg + o, cap - o, "  %s includes %s, the header of the stage file %s\n", files[i], inc, files[k]);
                    found++;
                }
        }
        free(s);
    }
    int *state = calloc(MAX_UNITS, sizeof *state), *stack = calloc(MAX_UNITS, sizeof *stack);
    char circle[2048] = "";
    for (int v = 0; v < u.n && !circle[0]; v++)
        if (state[v] == 0 && dfs(&u, v, state, stack, 0, circle, sizeof circle)) {
            const size_t o = strlen(msg);
            snprintf(msg + o, cap - o, "  a circle: %s\n", circle);
            found++;
        }
    free(state);
    free(stack);
    /* the registry's header: its implementation and the command line only */
    char top[600];
    snprintf(top, sizeof top, "%s/repro.h", sub);
    int t = 0;
    while (t < nf && strcmp(files[t], top)) t++;
    for (int i = 0; i < nf && t < nf; i++) {
        char full[1536];
        snprintf(full, sizeof full, "%s/%s", root, files[i]);
        char *s = mp_test_read_text(full), pat[700];
        snprintf(pat, sizeof pat, "\"%s\"", top);
        if (s && strstr(s, pat) && strcmp(files[i], impl[t]) && strcmp(files[i], top) && strncmp(files[i], "cli/", 4)) {
            const size_t o = strlen(msg);
            snprintf(msg + o, cap - o, "  %s includes %s, the registry's header (only %s and cli/ may)\n", files[i], top, impl[t]);
            found++;
        }
        free(s);
    }
    return found;
}

/* ================================================================ src/ in units of implementation */

static int word_char(char c) {
    return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

/* 1 when the identifier name occurs in s as a whole word. */
static int names(const char *s, const char *name) {
    const size_t l = strlen(name);
    for (const char *p = strstr(s, name); p; p = strstr(p + 1, name))
        if ((p == s || !word_char(p[-1])) && !word_char(p[l])) return 1;
    return 0;
}

/* The edges of file i of the graph of impl_circle into u: for each header j of root it
 * includes, one to j (its types) and one to each .c defining a function of j that file i names
 * (defd[d]: the file defining decl's function d, -1 when none does). */
static void impl_edges(Units *u, const char (*files)[512], int nf, const Funcs *decl, const int *defd, const char *root, int i) {
    char full[1536];
    snprintf(full, sizeof full, "%.1000s/%.511s", root, files[i]);
    char *s = mp_test_read_text(full), *text = mp_test_read_text(full);
    if (!s || !text) fail_msg("cannot read %s", full);
    blank_noise(text);
    for (char *line = s; *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : line + strlen(line)) {
        char inc[512];
        if (sscanf(line, " # include \"%511[^\"]\"", inc) != 1) continue;
        int j = 0;
        while (j < nf && strcmp(files[j], inc)) j++;
        if (j == nf || j == i) continue;
        u->dep[(size_t)i * MAX_UNITS + j] = 1;
        for (int d = 0; d < decl->n; d++)
            if (defd[d] >= 0 && defd[d] != i && !strcmp(decl->file[d], inc) && names(text, decl->name[d]))
                u->dep[(size_t)i * MAX_UNITS + defd[d]] = 1;
    }
    free(s);
    free(text);
}

/* 1 and the circle in msg when the files under root call each other in a circle: a file
 * depends on the headers it includes and on the .c files that define the functions of those
 * headers it calls (by name), so a header implemented by several .c files (src/cli/cli.h, the
 * commands) adds only the edges to the ones really called. */
static int impl_circle(const char *root, char *msg, size_t cap) {
    static char files[4 * MAX_UNITS][512];
    static Funcs decl, def;
    static int defd[MAX_FUNCS];
    int nf = 0;
    walk(root, "", files, &nf, 4 * MAX_UNITS);
    if (nf > MAX_UNITS) fail_msg("more than %d files", MAX_UNITS);
    decl.n = def.n = 0;
    for (int i = 0; i < nf; i++) {
        char full[1536];
        snprintf(full, sizeof full, "%.1000s/%.511s", root, files[i]);
        funcs_read(files[i][strlen(files[i]) - 1] == 'h' ? &decl : NULL, &def, full, files[i]);
    }
    for (int d = 0; d < decl.n; d++) {
        int j = 0, c = 0;
        while (j < def.n && strcmp(def.name[j], decl.name[d])) j++;
        while (j < def.n && c < nf && strcmp(files[c], def.file[j])) c++;
        defd[d] = j < def.n && c < nf ? c : -1;
    }
    static Units u;
    u.n = nf;
    for (int i = 0; i < nf; i++) snprintf(u.name[i], sizeof u.name[i], "%s", files[i]);
    u.dep = calloc((size_t)MAX_UNITS * MAX_UNITS, 1);
    for (int i = 0; i < nf; i++) impl_edges(&u, (const char (*)[512])files, nf, &decl, defd, root, i);
    const int found = graph_circle(&u, msg, cap);
    free(u.dep);
    return found;
}

/* ================================================================ one name, one file */

static int ends_with(const char *s, const char *tail) {
    const size_t l = strlen(s), t = strlen(tail);
    return l >= t && !strcmp(s + l - t, tail);
}

static const char *base_name(const char *path) {
    const char *b = strrchr(path, '/');
    return b ? b + 1 : path;
}

/* Appends "  name: a, b" to msg for every file name two files under root share; returns how many
 * names. */
static int shared_names(const char *root, char *msg, size_t cap) {
    static char files[4 * MAX_UNITS][512];
    int nf = 0, found = 0;
    walk_files(root, "", files, &nf, 4 * MAX_UNITS, 1);
    qsort(files, (size_t)nf, sizeof files[0], (int (*)(const void *, const void *))strcmp);
    for (int i = 0; i < nf; i++) {
        int first = 1, seen = 0;
        for (int j = 0; j < i && !seen; j++) seen = !strcmp(base_name(files[i]), base_name(files[j]));
        if (seen) continue; /* listed with the first file of that name */
        for (int j = i + 1; j < nf; j++) {
            if (strcmp(base_name(files[i]), base_name(files[j]))) continue;
            size_t o = strlen(msg);
            if (first) o += (size_t)snprintf(msg + o, o < cap ? cap - o : 0, "  %s: %s", base_name(files[i]), files[i]);
            snprintf(msg + o, o < cap ? cap - o : 0, ", %s", files[j]);
            first = 0;
        }
        if (!first) {
            const size_t o = strlen(msg);
            snprintf(msg + o, o < cap ? cap - o : 0, "\n");
            found++;
        }
    }
    return found;
}

/* The names of the "Implemented by:" line of the purpose block of the header at path (rel under
 * the root) into list, each as a path under the root (a name without '/' is in the header's
 * folder); returns how many (0: no such line). */
static int implemented_by(char (*list)[512], int cap, const char *path, const char *rel) {
    char *s = mp_test_read_text(path);
    if (!s) fail_msg("cannot read %s", path);
    char *end = strstr(s, "*/"), *p = strstr(s, "Implemented by:");
    int n = 0;
    if (p && end && p < end) {
        p += strlen("Implemented by:");
        const char *slash = strrchr(rel, '/');
        const int dir = slash ? (int)(slash - rel) : 0;
        int depth = 0;
        char word[512];
        size_t w = 0;
        for (; p < end; p++) {
            const char c = *p;
            if (c == '.' && (p[1] == ' ' || p[1] == '\n' || p[1] == '*') && depth == 0) break; /* the sentence ends */
            if (word_char(c) || c == '/' || c == '*' || c == '.' || c == '-') {
                if (w + 1 < sizeof word) word[w++] = c;
                continue;
            }
            word[w] = 0;
            if (w && depth == 0 && (ends_with(word, ".c") || ends_with(word, ".cu")) && n < cap)
                snprintf(list[n++], 512, "%.*s%s%.400s", strchr(word, '/') ? 0 : dir, rel, strchr(word, '/') || !dir ? "" : "/", word);
            w = 0;
            if (c == '(') depth++;
            if (c == ')' && depth > 0) depth--;
        }
        word[w] = 0;
        if (w && depth == 0 && (ends_with(word, ".c") || ends_with(word, ".cu")) && n < cap)
            snprintf(list[n++], 512, "%.*s%s%.400s", strchr(word, '/') ? 0 : dir, rel, strchr(word, '/') || !dir ? "" : "/", word);
    }
    free(s);
    return n;
}

/* Appends one line per fault of header rel (index h of files) to msg: a listed name that matches
 * no file, a function defined neither in its file nor in a listed one (one line per such file). */
static int header_faults(const char (*files)[512], int nf, int h, const Funcs *decl, const Funcs *def, const char *root,
                         char *msg, size_t cap) {
    static char list[64][512];
    char full[1536], own_c[512], own_cu[512];
    const char *rel = files[h];
    snprintf(full, sizeof full, "%.1000s/%.511s", root, rel);
    const int nl = implemented_by(list, 64, full, rel);
    snprintf(own_c, sizeof own_c, "%.*s.c", (int)strlen(rel) - 2, rel);
    snprintf(own_cu, sizeof own_cu, "%.*s.cu", (int)strlen(rel) - 2, rel);
    int found = 0;
    for (int k = 0; k < nl; k++) {
        int any = 0;
        for (int i = 0; i < nf && !any; i++) any = !fnmatch(list[k], files[i], FNM_PATHNAME);
        if (!any) {
            const size_t o = strlen(msg);
            snprintf(msg + o, o < cap ? cap - o : 0, "  %s: \"Implemented by\" lists %s, which is not there\n", rel, list[k]);
            found++;
        }
    }
    static char bad[64][512];
    int nbad = 0;
    for (int d = 0; d < decl->n; d++) {
        if (strcmp(decl->file[d], rel)) continue;
        for (int j = 0; j < def->n; j++) {
            const char *f = def->file[j];
            if (strcmp(def->name[j], decl->name[d]) || !strcmp(f, rel) || !strcmp(f, own_c) || !strcmp(f, own_cu)) continue;
            int listed = 0, known = 0;
            for (int k = 0; k < nl && !listed; k++) listed = !fnmatch(list[k], f, FNM_PATHNAME);
            for (int b = 0; b < nbad && !known; b++) known = !strcmp(bad[b], f);
            if (listed || known || nbad >= 64) continue;
            snprintf(bad[nbad++], sizeof bad[0], "%s", f);
            const size_t o = strlen(msg);
            snprintf(msg + o, o < cap ? cap - o : 0, "  %s declares %s, defined in %s: neither %s nor listed on its \"Implemented by:\" line\n",
                     rel, decl->name[d], f, own_c);
            found++;
        }
    }
    return found;
}

/* The header rule on every header under root; one line per fault in msg, returns how many. */
static int headers_implemented(const char *root, char *msg, size_t cap) {
    static char files[4 * MAX_UNITS][512];
    static Funcs decl, def;
    int nf = 0, found = 0;
    walk_files(root, "", files, &nf, 4 * MAX_UNITS, 1);
    decl.n = def.n = 0;
    for (int i = 0; i < nf; i++) {
        const int h = ends_with(files[i], ".h"), c = ends_with(files[i], ".c") || ends_with(files[i], ".cu");
        if (!h && !c) continue;
        char full[1536];
        snprintf(full, sizeof full, "%.1000s/%.511s", root, files[i]);
        funcs_read(h ? &decl : NULL, &def, full, files[i]);
    }
    for (int i = 0; i < nf; i++)
        if (ends_with(files[i], ".h")) found += header_faults((const char (*)[512])files, nf, i, &decl, &def, root, msg, cap);
    return found;
}

/* 1 and the circle in msg when the modules of the Python package at dir (python/maskpos) import
 * each other in a circle; __init__.py is left out. */
static int python_circle(const char *dir, char *msg, size_t cap) {
    static char files[MAX_UNITS][512];
    int nf = 0;
    walk_files(dir, "", files, &nf, MAX_UNITS, 1);
    static Units u;
    u.n = 0;
    for (int i = 0; i < nf; i++)
        if (ends_with(files[i], ".py") && !strchr(files[i], '/') && strcmp(files[i], "__init__.py"))
            snprintf(u.name[u.n++], sizeof u.name[0], "%.*s", (int)strlen(files[i]) - 3, files[i]);
    u.dep = calloc((size_t)MAX_UNITS * MAX_UNITS, 1);
    for (int a = 0; a < u.n; a++) {
        char full[1536];
        snprintf(full, sizeof full, "%.1000s/%.500s.py", dir, u.name[a]);
        char *s = mp_test_read_text(full);
        if (!s) fail_msg("cannot read %s", full);
        for (char *line = s; *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : line + strlen(line)) {
            while (*line == ' ' || *line == '\t') line++;
            char mod[256] = "", names_[512] = "";
            if (sscanf(line, "from .%255[A-Za-z0-9_] import", mod) != 1 && sscanf(line, "from . import %511[^\n#]", names_) != 1)
                continue;
            /* "from ._x import ..." names one module; "from . import _x, _y as z" one per name */
            for (char *tok = mod[0] ? mod : strtok(names_, ", ()"); tok; tok = mod[0] ? NULL : strtok(NULL, ", ()")) {
                if (!strcmp(tok, "as")) {
                    strtok(NULL, ", ()"); /* the alias */
                    continue;
                }
                const int b = unit_index(&u, tok, 0); /* a name of __init__ (Error, Result) is not a module */
                if (b >= 0 && b != a) u.dep[(size_t)a * MAX_UNITS + b] = 1;
            }
        }
        free(s);
    }
    const int found = graph_circle(&u, msg, cap);
    free(u.dep);
    return found;
}

/* ================================================================ tests */

static void put(const char *dir, const char *rel, const char *text) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, rel);
    char *slash = strrchr(path, '/');
    *slash = 0;
    mkdir(path, 0755);
    *slash = '/';
    FILE *f = fopen(path, "w");
    if (!f) fail_msg("cannot write %s", path);
    fputs(text, f);
    fclose(f);
}

/* The checks find what they must on a small tree: a circle a -> b -> c -> a through a header
 * and two sources (not a -> d, which is one way), a function of 121 lines and not one of 120. */
static void test_checks_can_fail(void **state) {
    (void)state;
    char root[512];
    snprintf(root, sizeof root, "%s/layout", mp_test_tmpdir());
    mkdir(root, 0755);
    put(root, "m/a.h", "#include \"m/b.h\" /* note */\n#include <stdio.h>\n");
    put(root, "m/b.c", "#include \"m/b.h\"\n#include \"n/c.h\"\n");
    put(root, "m/b.h", "int b(void);\n");
    put(root, "n/c.c", "  #  include \"m/a.h\"\n#include \"m/d.h\"\n");
    put(root, "n/c.h", "int c(void);\n");
    put(root, "m/d.h", "int d(void);\n");
    char msg[4096] = "";
    assert_int_equal(find_circle(root, msg, sizeof msg), 1);
    print_message("found: %s\n", msg);
    assert_non_null(strstr(msg, "m/a"));
    assert_non_null(strstr(msg, "m/b"));
    assert_non_null(strstr(msg, "n/c"));
    assert_null(strstr(msg, "m/d"));
    put(root, "n/c.c", "#include \"m/d.h\"\n"); /* the circle broken */
    msg[0] = 0;
    assert_int_equal(find_circle(root, msg, sizeof msg), 0);

    /* calls: h.h is the header of x.c and y.c; x.c calls z.c, which calls x.c back through h.h */
    put(root, "m/h.h", "int mp_x(void);\nint mp_y(void);\n");
    put(root, "m/x.c", "#include \"m/h.h\"\n#include \"n/z.h\"\nint mp_x(void) { return mp_z(); }\n");
    put(root, "m/y.c", "#include \"m/h.h\"\nint mp_y(void) { return 0; }\n");
    put(root, "n/z.h", "int mp_z(void);\n");
    put(root, "n/z.c", "#include \"n/z.h\"\n#include \"m/h.h\"\nint mp_z(void) { return mp_x(); } /* mp_y */\n");
    msg[0] = 0;
    assert_int_equal(impl_circle(root, msg, sizeof msg), 1);
    print_message("found: %s\n", msg);
    assert_non_null(strstr(msg, "m/x.c"));
    assert_non_null(strstr(msg, "n/z.c"));
    assert_null(strstr(msg, "m/y.c"));
    put(root, "n/z.c", "#include \"n/z.h\"\n#include \"m/h.h\"\nint mp_z(void) { return mp_y(); } /* mp_x */\n");
    msg[0] = 0;
    assert_int_equal(impl_circle(root, msg, sizeof msg), 0); /* z.c calls y.c only: no circle */

    /* f: 121 lines from '{' to '}'; g: 120; a long initialiser and braces in comments/strings */
    char *src = malloc(20000);
    size_t o = 0;
    o += (size_t)sprintf(src + o, "static int f(int x)\n{\n");
    for (int i = 0; i < 119 - 1; i++) o += (size_t)sprintf(src + o, "    x += %d; /* { */\n", i);
    o += (size_t)sprintf(src + o, "    return x;\n}\nint g(void) {\n");
    for (int i = 0; i < 118; i++) o += (size_t)sprintf(src + o, "    puts(\"}\");\n");
    o += (size_t)sprintf(src + o, "}\nstatic const int t[] = {\n");
    for (int i = 0; i < 200; i++) o += (size_t)sprintf(src + o, "    %d,\n", i);
    o += (size_t)sprintf(src + o, "};\n#define M(x) { \\\n  x; \\\n }\n");
    put(root, "m/long.c", src);
    free(src);
    msg[0] = 0;
    assert_int_equal(long_functions_under(root, MP_LAYOUT_MAX_LINES, msg, sizeof msg), 1);
    print_message("found:\n%s", msg);
    assert_non_null(strstr(msg, "m/long.c:2 (121 lines)"));
    msg[0] = 0;
    assert_int_equal(long_functions_under(root, 121, msg, sizeof msg), 0);
}

static void test_no_include_circle_in_src(void **state) {
    (void)state;
    char root[1024], msg[8192] = "";
    snprintf(root, sizeof root, "%s/src", MP_SOURCE_DIR);
    if (find_circle(root, msg, sizeof msg)) fail_msg("an include circle between units of src/: %s", msg);
    if (impl_circle(root, msg, sizeof msg)) fail_msg("a circle of calls between files of src/: %s", msg);
}

static void test_no_long_function_in_src(void **state) {
    (void)state;
    char root[1024], msg[16384] = "";
    snprintf(root, sizeof root, "%s/src", MP_SOURCE_DIR);
    const int n = long_functions_under(root, MP_LAYOUT_MAX_LINES, msg, sizeof msg);
    if (n) fail_msg("%d function(s) of src/ longer than %d lines:\n%s", n, MP_LAYOUT_MAX_LINES, msg);
}

/* The src/repro rules find each fault in a small tree: a header whose functions two files
 * define (the old stage.h), a stage file that includes another stage's header, a unit below
 * that includes the registry's header; and none in the same tree put right. */
static void test_repro_layers_can_fail(void **state) {
    (void)state;
    char root[512];
    snprintf(root, sizeof root, "%s/layers", mp_test_tmpdir());
    mkdir(root, 0755);
    put(root, "repro/repro.h", "int mp_repro_run(void);\n");
    put(root, "repro/registry.c", "#include \"repro/repro.h\"\n#include \"repro/ctx.h\"\nint mp_repro_run(void) { return 0; }\n"
                                  "int mp_repro_fail(void) { return 1; }\n");
    put(root, "repro/ctx.h", "int mp_repro_fail(void);\nint mp_repro_maps(void);\n");
    put(root, "repro/ctx.c", "#include \"repro/ctx.h\"\n#include \"repro/repro.h\"\nint mp_repro_maps(void) { return 0; }\n");
    put(root, "repro/paper.h", "int mp_repro_paper_sims(void);\n");
    put(root, "repro/paper.c", "#include \"repro/ctx.h\"\nconst MpReproStage mp_repro_stage_fig2 = {0};\n"
                               "int mp_repro_paper_sims(void) { return 0; }\n");
    put(root, "repro/models.c", "#include \"repro/paper.h\" /* the yardstick */\nconst MpReproStage mp_repro_stage_fig3 = {0};\n");
    put(root, "cli/reproduce.c", "#include \"repro/repro.h\"\n");
    put(root, "repro/a.h", "int mp_repro_a(void);\n"); /* two units below that include each other */
    put(root, "repro/a.c", "#include \"repro/b.h\"\nint mp_repro_a(void) { return 0; }\n");
    put(root, "repro/b.h", "int mp_repro_b(void);\n");
    put(root, "repro/b.c", "#include \"repro/a.h\"\nint mp_repro_b(void) { return 0; }\n");
    char msg[8192] = "";
    const int n = repro_layers(root, "repro", msg, sizeof msg);
    print_message("found %d:\n%s", n, msg);
    assert_non_null(strstr(msg, "repro/ctx.h declares functions of two files"));
    assert_non_null(strstr(msg, "repro/models.c includes repro/paper.h, the header of the stage file repro/paper.c"));
    assert_non_null(strstr(msg, "repro/ctx.c includes repro/repro.h, the registry's header"));
    assert_non_null(strstr(msg, "a circle: repro/"));
    assert_non_null(strstr(msg, "repro/a.c"));
    assert_non_null(strstr(msg, "repro/b.c"));
    assert_null(strstr(msg, "cli/reproduce.c"));
    /* put right: mp_repro_fail defined in ctx.c, the shared piece below the stages (sims.h) */
    put(root, "repro/registry.c", "#include \"repro/repro.h\"\n#include \"repro/ctx.h\"\nint mp_repro_run(void) { return 0; }\n");
    put(root, "repro/ctx.c", "#include \"repro/ctx.h\"\nint mp_repro_maps(void) { return 0; }\nint mp_repro_fail(void) { return 1; }\n");
    put(root, "repro/paper.h", "\n");
    put(root, "repro/sims.h", "int mp_repro_paper_sims(void);\n");
    put(root, "repro/sims.c", "#include \"repro/sims.h\"\nint mp_repro_paper_sims(void) { return 0; }\n");
    put(root, "repro/paper.c", "#include \"repro/sims.h\"\nconst MpReproStage mp_repro_stage_fig2 = {0};\n");
    put(root, "repro/models.c", "#include \"repro/sims.h\"\nconst MpReproStage mp_repro_stage_fig3 = {0};\n");
    put(root, "repro/b.c", "int mp_repro_b(void) { return 0; }\n");
    msg[0] = 0;
    assert_int_equal(repro_layers(root, "repro", msg, sizeof msg), 0);
}

static void test_repro_layers_in_src(void **state) {
    (void)state;
    char root[1024], msg[8192] = "";
    snprintf(root, sizeof root, "%s/src", MP_SOURCE_DIR);
    const int n = repro_layers(root, "repro", msg, sizeof msg);
    if (n) fail_msg("%d fault(s) in the layers of src/repro:\n%s", n, msg);
}

/* The rules of one name, one file find each fault in a small tree: two files of one name in
 * two folders, a header two files implement without saying so (as tok/hf.h was), a listed file
 * that is not there, a Python module pair importing each other inside a function; and none once
 * put right (names in parentheses are notes; a * matches the files of a pattern). */
static void test_names_checks_can_fail(void **state) {
    (void)state;
    char root[512];
    snprintf(root, sizeof root, "%s/names", mp_test_tmpdir());
    mkdir(root, 0755);
    put(root, "a/gram.c", "int mp_a_gram(void) { return 0; }\n");
    put(root, "b/gram.c", "int mp_b_gram(void) { return 0; }\n");
    put(root, "t/hf.h", "/* hf.h — the state.\n */\nint mp_t_load(void);\nint mp_t_piece(void);\n");
    put(root, "t/hf_load.c", "#include \"t/hf.h\"\nint mp_t_load(void) { return mp_t_piece(); }\n");
    put(root, "t/bpe.c", "#include \"t/hf.h\"\nint mp_t_piece(void) { return 0; }\n");
    put(root, "c/cli.h", "/* cli.h — commands.\n * Implemented by: cmd_*.c, gone.c (not main.c).\n */\nint mp_cmd_x(void);\nint mp_cmd_y(void);\n");
    put(root, "c/cmd_x.c", "int mp_cmd_x(void) { return 0; }\n");
    put(root, "c/cmd_y.c", "int mp_cmd_y(void) { return 0; }\n");
    char msg[8192] = "";
    assert_int_equal(shared_names(root, msg, sizeof msg), 1);
    print_message("found:\n%s", msg);
    assert_non_null(strstr(msg, "gram.c: a/gram.c, b/gram.c"));
    msg[0] = 0;
    assert_int_equal(headers_implemented(root, msg, sizeof msg), 3);
    print_message("found:\n%s", msg);
    assert_non_null(strstr(msg, "t/hf.h declares mp_t_load, defined in t/hf_load.c"));
    assert_non_null(strstr(msg, "t/hf.h declares mp_t_piece, defined in t/bpe.c"));
    assert_non_null(strstr(msg, "c/cli.h: \"Implemented by\" lists c/gone.c, which is not there"));
    assert_null(strstr(msg, "main.c"));
    assert_null(strstr(msg, "cmd_x"));
    /* put right: b/gram.c renamed, hf.h says which files implement it, cli.h lists what is there */
    char from[1024], to[1024];
    snprintf(from, sizeof from, "%s/b/gram.c", root);
    snprintf(to, sizeof to, "%s/b/gram_job.c", root);
    assert_int_equal(rename(from, to), 0);
    put(root, "t/hf.h", "/* hf.h — the state.\n * Implemented by: hf_load.c (the whole file), bpe.c. Not: x.c.\n */\nint mp_t_load(void);\nint mp_t_piece(void);\n");
    put(root, "c/cli.h", "/* cli.h — commands.\n * Implemented by: c/cmd_*.c (not main.c).\n */\nint mp_cmd_x(void);\nint mp_cmd_y(void);\n");
    msg[0] = 0;
    assert_int_equal(shared_names(root, msg, sizeof msg), 0);
    assert_int_equal(headers_implemented(root, msg, sizeof msg), 0);
    /* a header of its own file only: bpe.h for bpe.c */
    put(root, "t/hf.h", "/* hf.h — the state.\n * Implemented by: hf_load.c.\n */\nint mp_t_load(void);\n");
    put(root, "t/bpe.h", "int mp_t_piece(void);\n");
    assert_int_equal(headers_implemented(root, msg, sizeof msg), 0);

    char py[600];
    snprintf(py, sizeof py, "%s/py", root);
    put(py, "__init__.py", "from ._acc import Acc\n");
    put(py, "_acc.py", "from . import _lib\n\ndef add():\n    from . import Error, _torch as t\n    return t\n");
    put(py, "_torch.py", "import torch\n\ndef reduce(acc):\n    from ._acc import Acc\n    from . import Error\n");
    put(py, "_lib.py", "def f():\n    from . import Error\n");
    msg[0] = 0;
    assert_int_equal(python_circle(py, msg, sizeof msg), 1);
    print_message("found: %s\n", msg);
    assert_non_null(strstr(msg, "_acc"));
    assert_non_null(strstr(msg, "_torch"));
    assert_null(strstr(msg, "_lib"));
    put(py, "_torch.py", "import torch\n\ndef reduce(acc):\n    cls = type(acc)\n    from . import Error\n");
    msg[0] = 0;
    assert_int_equal(python_circle(py, msg, sizeof msg), 0);
}

/* msg line by line (print_message cuts long texts). */
static void print_lines(const char *msg) {
    for (const char *p = msg; *p;) {
        const char *e = strchr(p, '\n');
        const int l = e ? (int)(e - p) : (int)strlen(p);
        print_message("%.*s\n", l, p);
        p += l + (e != NULL);
    }
}

static void test_one_name_one_file_in_src(void **state) {
    (void)state;
    char root[1024], names_msg[16384] = "", hdr_msg[16384] = "";
    snprintf(root, sizeof root, "%s/src", MP_SOURCE_DIR);
    const int n = shared_names(root, names_msg, sizeof names_msg);
    const int h = headers_implemented(root, hdr_msg, sizeof hdr_msg);
    if (n) print_message("%d file name(s) shared by files of src/:\n", n);
    print_lines(names_msg);
    if (h) print_message("%d fault(s) of headers implemented by files of other names:\n", h);
    print_lines(hdr_msg);
    if (n || h) fail_msg("one name, one file: %d shared name(s), %d header fault(s) (listed above)", n, h);
}

static void test_no_import_circle_in_python(void **state) {
    (void)state;
    char dir[1024], msg[4096] = "";
    snprintf(dir, sizeof dir, "%s/python/maskpos", MP_SOURCE_DIR);
    if (python_circle(dir, msg, sizeof msg)) fail_msg("an import circle between modules of python/maskpos: %s", msg);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_checks_can_fail),
        cmocka_unit_test(test_no_include_circle_in_src),
        cmocka_unit_test(test_no_long_function_in_src),
        cmocka_unit_test(test_repro_layers_can_fail),
        cmocka_unit_test(test_repro_layers_in_src),
        cmocka_unit_test(test_names_checks_can_fail),
        cmocka_unit_test(test_one_name_one_file_in_src),
        cmocka_unit_test(test_no_import_circle_in_python),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
