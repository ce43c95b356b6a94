/* test_opts.c — the option-table reader (src/core/opts.h) on a table of every kind and flag, with
 * the expected values, messages and --help text written out by hand: each kind into its field and
 * its refusals (not a number, outside the range, an unknown word), a switch that clears its field,
 * an open upper bound, a narrowed shared declaration, another table's range, a custom setter, a
 * short letter, unique prefixes and --name=value, counts of rows given, the unknown flag's line,
 * --help's layout (padding, the two spaces after a long head, continuation lines, sections,
 * hidden rows, generated text wrapped at 98 columns; the expected wrap computed apart, by a
 * greedy word wrap) and settings written back as text and read again; the device table's names,
 * the lines refusing a name or a number, and help (src/model/devices.h).
 *
 *   make build/tests/test_opts && build/tests/test_opts
 */
#include "testutil.h"

#include "core/opts.h"
#include "model/devices.h" /* the device table: --device's names, help and refusals */

typedef struct Cfg {
    int flag, keep, choice, n, count;
    int64_t big;
    uint64_t seed;
    double x, half, ranged;
    const char *name, *checked;
    char custom[16];
} Cfg;

enum { R_FLAG, R_KEEP, R_N, R_BIG, R_SEED, R_X, R_HALF, R_RANGED, R_CHOICE, R_NAME, R_CHECKED, R_CUSTOM, R_QUIET, R_COUNT };

static int check_no_x(const char *v, MpErr *e) { return strchr(v, 'x') ? mp_err_set(e, "--checked: '%s' has an x", v) : MP_OK; }

static int set_custom(void *cfg, const MpOpt *o, const char *v, MpErr *e) {
    if (strlen(v) >= sizeof((Cfg *)cfg)->custom) return mp_err_set(e, "--%s: too long", mp_opt_name(o));
    strcpy(((Cfg *)cfg)->custom, v);
    ((Cfg *)cfg)->count++;
    return MP_OK;
}

/* the text a generated help holds: long enough to wrap at 98 columns from column 16 */
static void help_made(char *buf, size_t cap) {
    snprintf(buf, cap, "one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen\nend");
}

static const MpOptChoice words[] = {{"red", 3}, {"green", 5}, {"blue", 7}, {NULL, 0}};
static const MpOptRange other = {"--ranged", 2, 4};
static const MpOptDecl shared_n = {"n", MP_OPT_INT, "N", "shared help", .lo = 1, .hi = 100};

#define F(m) offsetof(Cfg, m)
static const MpOpt rows[R_COUNT] = {
    [R_FLAG] = {MP_OPT_DECL("flag", MP_OPT_BOOL, NULL, .help = "a switch"), F(flag), .before = "section:\n"},
    [R_KEEP] = {MP_OPT_DECL("no-keep", MP_OPT_BOOL, NULL, .help = "a switch that clears"), F(keep), MP_OPT_OFF},
    [R_N] = {&shared_n, F(n), MP_OPT_NARROW, .lo = 2, .hi = 10, .help = "narrowed", .arg = "K"},
    [R_BIG] = {MP_OPT_DECL("big", MP_OPT_I64, "B", .help = "first line\nsecond line", .lo = -5, .hi = INT64_C(1) << 40), F(big)},
    [R_SEED] = {MP_OPT_DECL("seed", MP_OPT_U64, "S", .help = "seed", .lo = 0, .hi = INT64_MAX), F(seed)},
    [R_X] = {MP_OPT_DECL("x", MP_OPT_DOUBLE, "X", .help = "x", .dlo = -1, .dhi = 1), F(x)},
    [R_HALF] = {MP_OPT_DECL("half-open-number", MP_OPT_DOUBLE, "H", .help = "long head", .dlo = 0, .dhi = 1,
                            .flags = MP_OPT_OPEN), F(half)},
    [R_RANGED] = {MP_OPT_DECL("ranged", MP_OPT_DOUBLE, "R", .help = "another table's range", .range = &other), F(ranged)},
    [R_CHOICE] = {MP_OPT_DECL("colour", MP_OPT_CHOICE, "C", .help = "a word", .choices = words), F(choice)},
    [R_NAME] = {MP_OPT_DECL("name", MP_OPT_STRING, "NAME", .letter = 'o', .help_fn = help_made), F(name)},
    [R_CHECKED] = {MP_OPT_DECL("checked", MP_OPT_STRING, "V", .help = "checked", .check = check_no_x), F(checked), MP_OPT_HIDE},
    [R_CUSTOM] = {MP_OPT_DECL("custom", MP_OPT_CUSTOM, "T", .help = "custom", .set = set_custom), F(custom),
                  .head = "--custom T, again"},
    [R_QUIET] = {MP_OPT_DECL("quiet", MP_OPT_BOOL, NULL, .help = "counted only"), MP_OPT_NO_FIELD},
};
static const MpOptTable table = {"tst", rows, R_COUNT, 16, "usage: tst\n\n", "end.\n"};

/* argv from a line of words (at most 32), argv[0] = "tst". */
static int parse(Cfg *c, int *given, int *first, MpErr *e, const char *line) {
    static char buf[1024];
    static char *argv[34];
    snprintf(buf, sizeof buf, "%s", line);
    int argc = 0;
    argv[argc++] = "tst";
    for (char *s = NULL, *t = strtok_r(buf, " ", &s); t; t = strtok_r(NULL, " ", &s)) argv[argc++] = t;
    argv[argc] = NULL;
    memset(c, 0, sizeof *c);
    c->keep = 1;
    return mp_opts_parse(&table, c, argc, argv, first, given, e);
}

static void test_values(void **state) {
    (void)state;
    Cfg c;
    int given[R_COUNT], first;
    MpErr e;
    assert_int_equal(parse(&c, given, &first, &e,
                           "--flag --no-keep --n 7 --big -5 --seed 9223372036854775807 --x=-0.5 --half 0.25 --ranged 3 "
                           "--colour green -o file --checked ok --custom ab --custom cd --quiet pos1 pos2"),
                     MP_OK);
    assert_int_equal(c.flag, 1);
    assert_int_equal(c.keep, 0);
    assert_int_equal(c.n, 7);
    assert_int_equal(c.big, -5);
    assert_true(c.seed == UINT64_C(9223372036854775807));
    assert_true(c.x == -0.5 && c.half == 0.25 && c.ranged == 3);
    assert_int_equal(c.choice, 5);
    assert_string_equal(c.name, "file");
    assert_string_equal(c.checked, "ok");
    assert_string_equal(c.custom, "cd");
    assert_int_equal(c.count, 2);
    assert_int_equal(given[R_CUSTOM], 2);
    assert_int_equal(given[R_QUIET], 1);
    assert_int_equal(given[R_CHOICE], 1);
    /* the positional arguments after the flags, in their order */
    assert_int_equal(first, 25); /* argv[25] = pos1, after the 24 words of flags */
    /* a unique prefix names its row */
    assert_int_equal(parse(&c, given, &first, &e, "--col blue --ran 4"), MP_OK);
    assert_int_equal(c.choice, 7);
    assert_true(c.ranged == 4);
    assert_int_equal(parse(&c, given, &first, &e, "-h"), MP_OPTS_HELP);
    assert_int_equal(parse(&c, given, &first, &e, "--x 0 --help"), MP_OPTS_HELP);
}

static void test_refusals(void **state) {
    (void)state;
    static const struct {
        const char *line, *msg;
    } cases[] = {
        {"--n 1", "--n: 1 is outside [2, 10]"}, /* the row's narrower range, not the declaration's */
        {"--n 11", "--n: 11 is outside [2, 10]"},
        {"--n 2x", "--n: '2x' is not an integer"},
        {"--big -6", "--big: -6 is outside [-5, 1099511627776]"},
        {"--seed -1", "--seed: -1 is outside [0, 9223372036854775807]"},
        {"--x 1.5", "--x: 1.5 is outside [-1, 1]"},
        {"--x one", "--x: 'one' is not a number"},
        {"--half 1", "--half-open-number: 1 is outside [0, 1)"},
        {"--ranged 5", "--ranged: 5 is outside [2, 4]"},
        {"--colour pink", "--colour: 'pink' is not red, green or blue"},
        {"--checked x", "--checked: 'x' has an x"},
        {"--custom 0123456789abcdef", "--custom: too long"},
        {"--bogus", "unknown option or missing value: '--bogus' (see 'maskpos tst --help')"},
        {"--n", "unknown option or missing value: '--n' (see 'maskpos tst --help')"},
        {"--flag=1", "unknown option or missing value: '--flag=1' (see 'maskpos tst --help')"},
        {"-q", "unknown option '-q' (see 'maskpos tst --help')"},
        {"-o", "unknown option or missing value: '-o' (see 'maskpos tst --help')"}, /* a letter without its value */
        {"--n 3 --x 2 --n 1", "--x: 2 is outside [-1, 1]"}, /* the first bad one, in argv's order */
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        Cfg c;
        int first;
        MpErr e;
        if (parse(&c, NULL, &first, &e, cases[i].line) != MP_ERR || strcmp(e.msg, cases[i].msg))
            fail_msg("'%s': want '%s', got '%s'", cases[i].line, cases[i].msg, e.msg);
    }
    /* one value as the C API sets it */
    Cfg c = {0};
    MpErr e;
    assert_int_equal(mp_opt_set(&rows[R_FLAG], &c, "off", &e), MP_OK);
    assert_int_equal(mp_opt_set(&rows[R_FLAG], &c, "maybe", &e), MP_ERR);
    assert_string_equal(e.msg, "--flag: 'maybe' is not 1 or 0 (true or false)");
    assert_int_equal(mp_opt_set(&rows[R_N], &c, NULL, &e), MP_ERR);
    assert_string_equal(e.msg, "--n needs a value");
    assert_int_equal(mp_opt_set(&rows[R_QUIET], &c, NULL, &e), MP_ERR);
    assert_int_equal(mp_opts_find(rows, R_COUNT, "colour"), R_CHOICE);
    assert_int_equal(mp_opts_find(rows, R_COUNT, "col"), -1);
    assert_string_equal(mp_opt_kind_name(MP_OPT_U64), "int");
    assert_string_equal(mp_opt_kind_name(MP_OPT_CHOICE), "string");
}

/* --help: column 16 (heads padded to 13), the long head's two spaces, sections, the hidden row
 * left out, the generated text wrapped before column 99 and continued at 16. */
static void test_help(void **state) {
    (void)state;
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    mp_opts_help(f, &table);
    fclose(f);
    const char *want =
        "usage: tst\n"
        "\n"
        "section:\n"
        "  --flag        a switch\n"
        "  --no-keep     a switch that clears\n"
        "  --n K         narrowed\n"
        "  --big B       first line\n"
        "                second line\n"
        "  --seed S      seed\n"
        "  --x X         x\n"
        "  --half-open-number H  long head\n"
        "  --ranged R    another table's range\n"
        "  --colour C    a word\n"
        "  -o, --name NAME  one two three four five six seven eight nine ten eleven twelve thirteen\n"
        "                fourteen fifteen sixteen\n"
        "                end\n"
        "  --custom T, again  custom\n"
        "  --quiet       counted only\n"
        "end.\n";
    assert_string_equal(buf, want);
    free(buf);
}

/* Settings back to text: the rows that differ from the defaults, in table order, and read back. */
static void test_write(void **state) {
    (void)state;
    Cfg a = {.keep = 1}, d = {.keep = 1};
    MpErr e;
    assert_int_equal(mp_opt_set(&rows[R_N], &a, "4", &e), MP_OK);
    assert_int_equal(mp_opt_set(&rows[R_X], &a, "0.1", &e), MP_OK);
    assert_int_equal(mp_opt_set(&rows[R_CHOICE], &a, "blue", &e), MP_OK);
    assert_int_equal(mp_opt_set(&rows[R_KEEP], &a, NULL, &e), MP_OK); /* --no-keep given: keep 0 */
    char buf[256];
    const size_t n = mp_opts_write(buf, sizeof buf, rows, R_COUNT, &a, &d, 0, ' ');
    assert_string_equal(buf, "no-keep=1 n=4 x=0.10000000000000001 colour=blue "); /* the switch as given */
    assert_int_equal(n, strlen(buf));
    assert_int_equal(mp_opts_write(NULL, 0, rows, R_COUNT, &a, &d, 0, ' '), n);
    /* read back, the same config */
    Cfg b = {.keep = 1};
    for (char *s = NULL, *t = strtok_r(buf, " ", &s); t; t = strtok_r(NULL, " ", &s)) {
        char *eq = strchr(t, '=');
        *eq = 0;
        assert_int_equal(mp_opt_set(&rows[mp_opts_find(rows, R_COUNT, t)], &b, eq + 1, &e), MP_OK);
    }
    assert_int_equal(b.keep, 0);
    assert_int_equal(b.n, 4);
    assert_true(b.x == 0.1);
    assert_int_equal(b.choice, 7);
}

/* The device table: the names --device takes, the lines refusing a name or a number, the help from the rows. */
static void test_device_table(void **state) {
    (void)state;
    MpErr e;
    int ord;
    assert_int_equal(mp_device_find("cpu", &ord, &e), MP_DEVICE_CPU);
    assert_int_equal(ord, -1);
    assert_int_equal(mp_device_find("cuda", &ord, &e), MP_DEVICE_CUDA);
    assert_int_equal(ord, -1);
    assert_int_equal(mp_device_find("cuda:3", &ord, &e), MP_DEVICE_CUDA);
    assert_int_equal(ord, 3);
    static const struct {
        const char *arg, *msg;
    } bad[] = {
        {"cuda:x", "--device cuda:x: 'x' is not a device number (cuda or cuda:N)"},
        {"cuda:-1", "--device cuda:-1: '-1' is not a device number (cuda or cuda:N)"},
        {"cpu:0", "--device cpu:0: no such backend (known: cpu, cuda)"},
        {"gpu", "--device gpu: no such backend (known: cpu, cuda)"},
        {"", "--device : no such backend (known: cpu, cuda)"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        if (mp_device_find(bad[i].arg, &ord, &e) != -1 || strcmp(e.msg, bad[i].msg))
            fail_msg("'%s': want '%s', got '%s'", bad[i].arg, bad[i].msg, e.msg);
    }
    char help[512];
    mp_device_help(help, sizeof help);
    assert_string_equal(help, "the forward pass's backend: cpu (default) or cuda[:N] (NVIDIA GPU N, default 0; needs make CUDA=1)");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_values),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_help),
        cmocka_unit_test(test_write),
        cmocka_unit_test(test_device_table),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
