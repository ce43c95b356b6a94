/* common.c — the flags through a subcommand's option table, and error reporting; see cli.h. */
#include "cli/cli.h"

#include <stdarg.h>
#include <stdio.h>

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

int mp_cli_parse(const MpOptTable *t, void *cfg, int argc, char **argv, int *first, int *given) {
    MpErr e;
    const int rc = mp_opts_parse(t, cfg, argc, argv, first, given, &e);
    if (rc == MP_OPTS_HELP) {
        mp_opts_help(stdout, t);
        return MP_EXIT_OK;
    }
    return rc == MP_OK ? MP_CLI_GO : mp_cli_error(t->cmd, "%s", e.msg);
}
