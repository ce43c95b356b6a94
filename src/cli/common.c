/* common.c — shared flag parsing and error reporting for subcommands; see cli.h. */
#include "cli/cli.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "core/util.h"          /* mp_parse_double, mp_parse_i64 */
#include "model/fwd_backend.h" /* mp_fwd_device_check */

static void cli_vreport(const char *cmd, const char *fmt, va_list ap) {
    fflush(stdout);
    fprintf(stderr, "maskpos %s: error: ", cmd);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
}

int mp_cli_error(const char *cmd, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    cli_vreport(cmd, fmt, ap);
    va_end(ap);
    return MP_EXIT_ERROR;
}

void mp_cli_die(const char *cmd, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    cli_vreport(cmd, fmt, ap);
    va_end(ap);
    exit(MP_EXIT_ERROR);
}

double mp_cli_double(const char *cmd, const char *flag, const char *arg, double lo, double hi) {
    double v;
    if (mp_parse_double(arg, &v) != MP_OK) mp_cli_die(cmd, "%s: '%s' is not a number", flag, arg);
    if (v < lo || v > hi) mp_cli_die(cmd, "%s: %s is outside [%g, %g]", flag, arg, lo, hi);
    return v;
}

int64_t mp_cli_i64(const char *cmd, const char *flag, const char *arg, int64_t lo, int64_t hi) {
    int64_t v;
    if (mp_parse_i64(arg, INT64_MIN, INT64_MAX, &v) != MP_OK)
        mp_cli_die(cmd, "%s: '%s' is not an integer", flag, arg);
    if (v < lo || v > hi)
        mp_cli_die(cmd, "%s: %s is outside [%lld, %lld]", flag, arg, (long long)lo, (long long)hi);
    return v;
}

const char *mp_cli_device(const char *cmd, const char *arg) {
    MpErr e;
    if (mp_fwd_device_check(arg, &e) != MP_OK) mp_cli_die(cmd, "%s", e.msg);
    return arg;
}

int mp_cli_bad_option(const char *cmd, char **argv, int optind_now, int optopt_now) {
    const char *word = argv[optind_now - 1];
    if (optopt_now && word && word[0] == '-' && word[1] != '-')
        return mp_cli_error(cmd, "unknown option '-%c' (see 'maskpos %s --help')", optopt_now, cmd);
    return mp_cli_error(cmd, "unknown option or missing value: '%s' (see 'maskpos %s --help')",
                        word ? word : "?", cmd);
}
