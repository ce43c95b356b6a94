/* test_readme.c — every example of README.md runs as written: the command lines of its indented
 * blocks (`$ build/maskpos ...`, the quick start's `build/maskpos ...` and `M=... T=...` lines,
 * `\` continuations joined) run in README order as one shell script in a scratch folder that sees
 * the repository's data/, models/, tests/ and python/ and this build as build/; the Python
 * session (`>>> ` lines) runs likewise, a statement whose shown output is a Traceback having to
 * raise. Each example must exit 0; the quick start ("your checkpoint -> your figure") must leave
 * its figure, its viewer page and its report.
 *
 * Not run, each for the reason in `readme_skips` (a README example that is neither run nor listed
 * there fails the test, so a new example is covered when it is written): the setup and the full
 * four-minute run of the first screen (the suite itself is what they do), placeholders for the
 * user's own files (path/to/...), the MPI example (build-mpi), and the twelve-minute training of
 * the embedded models.
 * In the sanitizer build the long examples run with fewer sequences and steps (readme_sanitized_cuts).
 * Skipped when python3 with numpy is missing (scripts/setup.sh --test installs it), as test_pyapi.
 */
#include "testutil.h"

#include <ctype.h>

#include "core/util.h" /* mp_file_exists */

/* Examples not run, by a substring of their command line, and why. */
static const struct {
    const char *has, *why;
} readme_skips[] = {
    {"scripts/setup.sh", "the setup, the build and the full run of the first screen: the suite itself"},
    {"path/to/", "a placeholder for the user's own model or text"},
    {"build-mpi/", "needs the MPI build (make MPI=1; tests/test_mpi.c runs it)"},
    {"--out /tmp/cl1", "the MPI example's one-process half (writes /tmp/cl1 beside build-mpi's /tmp/cl2)"},
    {"cmp /tmp/cl1/", "compares the MPI example's two runs"},
    {"--steps 3000", "trains an embedded model: 12 minutes on 2 threads (the 20-step run below is run)"},
    {"gram nope/step-003000", "needs the 3000-step model above"},
};

/* In the sanitizer build (ASan + UBSan run the code ~10x slower) the long examples run with
 * smaller sizes: the same commands and code paths, fewer sequences and steps. The plain build runs
 * every example as written. Each cut is printed with its line. */
static const struct {
    const char *from, *to;
} readme_sanitized_cuts[] = {
    {"reproduce --quick --out results", "reproduce --quick --only fig1,fig4 --batch 500 --out results"},
    {"--batch 20000", "--batch 500"},
    {"--batch 100000", "--batch 500"},
    {"--n 400 ", "--n 16 "},
    {"--n 200 ", "--n 16 "},
    {"--n 100 ", "--n 8 "},
    {"--steps 20 --checkpoint-every 20", "--steps 4 --checkpoint-every 4"},
    {"batch=20000", "batch=500"}, /* the Python session: never longer than what they replace */
    {"2000 * 127), np.uint8).reshape(2000,", "16 * 127), np.uint8).reshape(16,"},
    {"np.full((2000, 1)", "np.full((16, 1)"},
    {"ids[:400]", "ids[:8]"},
};

/* Applies the cuts to cmd (capacity cap) in the sanitizer build; returns how many applied. */
static int readme_cut(char *cmd, size_t cap) {
    int n = 0;
    for (size_t k = 0; MP_TEST_SANITIZED && k < sizeof readme_sanitized_cuts / sizeof readme_sanitized_cuts[0]; k++) {
        char *at = strstr(cmd, readme_sanitized_cuts[k].from);
        if (!at) continue;
        char rest[4096];
        snprintf(rest, sizeof rest, "%s", at + strlen(readme_sanitized_cuts[k].from));
        snprintf(at, cap - (size_t)(at - cmd), "%s%s", readme_sanitized_cuts[k].to, rest);
        n++;
    }
    return n;
}

static char *readme_read(void) {
    char path[4096];
    snprintf(path, sizeof path, "%s/README.md", MP_SOURCE_DIR);
    char *s = mp_test_read_text(path);
    assert_non_null(s);
    return s;
}

/* The next line of *cur (cut at its newline; empty lines kept, so line numbers are the file's);
 * NULL at the end. */
static char *readme_line(char **cur) {
    char *line = *cur;
    if (!line || !*line) return NULL;
    char *nl = strchr(line, '\n');
    if (nl) {
        *nl = '\0';
        *cur = nl + 1;
    } else
        *cur = line + strlen(line);
    return line;
}

/* A command line of a code block: "$ X" (X), or a bare "build/maskpos ..." / "NAME=..." line. */
static const char *readme_command(const char *line) {
    if (strncmp(line, "    ", 4)) return NULL;
    line += 4;
    if (!strncmp(line, "$ ", 2)) return line + 2;
    if (!strncmp(line, "build/maskpos ", 14) || !strncmp(line, "scripts/", 8) || !strncmp(line, "mpirun ", 7)) return line;
    if (isupper((unsigned char)line[0]) && line[1] == '=') return line; /* the quick start's variables */
    return NULL;
}

static const char *readme_skip_reason(const char *cmd) {
    for (size_t k = 0; k < sizeof readme_skips / sizeof readme_skips[0]; k++)
        if (strstr(cmd, readme_skips[k].has)) return readme_skips[k].why;
    return NULL;
}

/* The scratch folder: the repository's inputs and this build, nothing else. */
static const char *readme_sandbox(void) {
    const char *d = mp_test_tmpdir();
    char build[4096];
    snprintf(build, sizeof build, "%s", MP_TEST_BIN);
    *strrchr(build, '/') = '\0';
    assert_int_equal(mp_test_shell(NULL, 0, "cd %s && ln -s %s/data data && ln -s %s/models models && ln -s %s/tests tests && "
                                            "ln -s %s/python python && ln -s %s build",
                                   d, MP_SOURCE_DIR, MP_SOURCE_DIR, MP_SOURCE_DIR, MP_SOURCE_DIR, build),
                     0);
    return d;
}

static void test_readme_commands(void **state) {
    (void)state;
    char *s = readme_read();
    const char *d = readme_sandbox();
    char script[4200];
    snprintf(script, sizeof script, "%s/readme.sh", d);
    FILE *f = fopen(script, "w");
    assert_non_null(f);
    fprintf(f, "set -e\n");
    int nrun = 0, nskip = 0, lineno = 0, quick = 0;
    char *cur = s;
    for (char *line = readme_line(&cur); line; line = readme_line(&cur)) {
        lineno++;
        const char *cmd = readme_command(line);
        if (!cmd) continue;
        char full[4096];
        snprintf(full, sizeof full, "%s", cmd);
        while (strlen(full) > 0 && full[strlen(full) - 1] == '\\') { /* continuation lines */
            char *next = readme_line(&cur);
            lineno++;
            assert_non_null(next);
            while (*next == ' ') next++;
            full[strlen(full) - 1] = ' ';
            strncat(full, next, sizeof full - strlen(full) - 1);
        }
        const char *why = readme_skip_reason(full);
        if (why) {
            print_message("README line %d not run (%s): %s\n", lineno, why, full);
            nskip++;
            continue;
        }
        quick += strstr(full, "my-probe") != NULL;
        if (readme_cut(full, sizeof full)) print_message("README line %d run smaller (sanitizer build): %s\n", lineno, full);
        fprintf(f, "echo 'README line %d: %s' >&2\n%s\n", lineno, full[0] == 'M' ? "(variables)" : "...", full);
        nrun++;
    }
    fclose(f);
    free(s);
    static char out[1 << 14];
    const int rc = mp_test_shell(out, sizeof out, "cd %s && sh readme.sh > readme.log 2>&1; st=$?; grep '^README line' readme.log | tail -1; "
                                                  "tail -c 3000 readme.log; exit $st", d);
    if (rc != 0) fail_msg("a README example failed (status %d; the last line named is the one):\n%s", rc, out);
    print_message("%d README examples ran, %d not run (listed with their reasons)\n", nrun, nskip);
    assert_true(nrun >= 25);
    assert_true(quick >= 3); /* the quick start's probe, view and plot of my-probe */
    const char *made[] = {"my-probe/scores_diagnorm.png", "my-probe/meta.json", "my-probe.html", "my-fig5/report.md",
                          "my-fig5/fig5/figure5_model.png", "probe-gguf/meta.json", "ids.npy", "fig5.png"};
    for (size_t i = 0; i < sizeof made / sizeof made[0]; i++) {
        char p[4300];
        snprintf(p, sizeof p, "%s/%s", d, made[i]);
        if (!mp_file_exists(p)) fail_msg("README's examples did not make %s", made[i]);
    }
}

static void test_readme_python(void **state) {
    (void)state;
    char out[1 << 14];
    if (mp_test_shell(out, sizeof out, "/usr/bin/python3 -c 'import numpy'") != 0) {
        print_message("python3 with numpy is needed (scripts/setup.sh --test): %s\n", out);
        skip();
    }
    char *s = readme_read();
    const char *d = readme_sandbox();
    char script[4200], build[4096];
    snprintf(build, sizeof build, "%s", MP_TEST_BIN);
    *strrchr(build, '/') = '\0';
    snprintf(script, sizeof script, "%s/readme.py", d);
    FILE *f = fopen(script, "w");
    assert_non_null(f);
    fprintf(f, "import sys\nsys.path.insert(0, 'python')\n");
    /* statements in order; a statement followed by a Traceback must raise */
    char *stmt = NULL;
    int nstmt = 0, nraise = 0, nshown = 0, lineno = 0;
    char *cur = s;
    for (char *line = readme_line(&cur); line; line = readme_line(&cur)) {
        lineno++;
        if (!strncmp(line, "    >>> ", 8)) {
            if (stmt) fprintf(f, "%s\n", stmt);
            stmt = line + 8;
            if (readme_cut(stmt, strlen(stmt) + 1)) print_message("README line %d run smaller (sanitizer build): %s\n", lineno, stmt);
            nstmt++;
            fprintf(f, "print('README line %d', file=sys.stderr)\n", lineno);
        } else if (stmt && !strncmp(line, "    ... ", 8)) { /* a continuation line of the statement */
            fprintf(f, "%s\n", stmt);
            stmt = line + 8;
        } else if (stmt && !strncmp(line, "    Traceback", 13)) {
            fprintf(f, "try:\n    %s\nexcept Exception as e:\n    _raised = type(e).__module__ + '.' + type(e).__name__ + "
                       "': ' + str(e)\n    print('raised as shown:', _raised)\nelse:\n"
                       "    raise SystemExit('README line %d: no error where a Traceback is shown')\n", stmt, lineno);
            stmt = NULL;
            nraise++;
        } else if (!stmt && nraise && !strncmp(line, "    maskpos.Error: ", 19)) { /* the message it shows */
            fprintf(f, "assert _raised == r'''%s''', ('README line %d shows another message than', _raised)\n", line + 4,
                    lineno);
            nshown++;
        } else if (stmt && strncmp(line, "    ", 4)) { /* the block ended */
            fprintf(f, "%s\n", stmt);
            stmt = NULL;
        }
    }
    if (stmt) fprintf(f, "%s\n", stmt);
    fclose(f);
    free(s);
    assert_true(nstmt >= 8);
    assert_int_equal(nraise, 1);
    assert_int_equal(nshown, 1);
    char preload[4200];
    mp_test_python_preload(preload, sizeof preload);
    int rc = mp_test_shell(out, sizeof out, "cd %s && mkdir -p results && %s MASKPOS_LIB=%s/libmaskpos.so "
                                            "PYTHONDONTWRITEBYTECODE=1 /usr/bin/python3 readme.py",
                           d, preload, build);
    if (rc != 0) fail_msg("README's Python session failed (the last line named is the one):\n%s", out);
    assert_non_null(strstr(out, "raised as shown: maskpos.Error: alpha=1.5: 1.5 is outside [0, 1)"));
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_readme_commands), cmocka_unit_test(test_readme_python)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
