/* cli.h — the `maskpos` command-line front end: one thin file per subcommand.
 *
 * Implements: the subcommand table (main.c), and helpers every subcommand uses to reject bad
 * flags with a one-line error and exit code 2 (common.c).
 * Conventions: each subcommand is `int mp_cmd_<name>(int argc, char **argv)` where argv[0] is the
 * subcommand name; it returns the process exit code (0 ok, 1 a stage failed, 2 bad input) and
 * prints `--help` text on `-h/--help`.
 */
#ifndef MP_CLI_H
#define MP_CLI_H

#include <stdint.h>

#include "core/err.h" /* MP_EXIT_* */

int mp_cmd_theory(int argc, char **argv);
int mp_cmd_simulate(int argc, char **argv);
int mp_cmd_reproduce(int argc, char **argv);
int mp_cmd_plot(int argc, char **argv);     /* src/cli/plot.c */
int mp_cmd_inspect(int argc, char **argv);  /* src/cli/inspect.c */
int mp_cmd_mkmodel(int argc, char **argv);  /* src/cli/mkmodel.c */
int mp_cmd_tokenize(int argc, char **argv); /* src/cli/tokenize.c */
int mp_cmd_corpus(int argc, char **argv);   /* src/cli/corpus.c */
int mp_cmd_probe(int argc, char **argv);    /* src/cli/probe.c */
int mp_cmd_logits(int argc, char **argv);   /* src/cli/logits.c */
int mp_cmd_generate(int argc, char **argv); /* src/cli/generate.c */
int mp_cmd_train(int argc, char **argv);    /* src/cli/train.c */
int mp_cmd_gram(int argc, char **argv);     /* src/cli/gram.c */
int mp_cmd_view(int argc, char **argv);     /* src/cli/view.c */

/* Prints "maskpos <cmd>: error: <msg>" and returns MP_EXIT_ERROR. */
int mp_cli_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Same, then exits: for use deep inside option parsing. */
void mp_cli_die(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3), noreturn));

/* Strict flag values: exit 2 with a message naming the flag when the value is bad. */
double mp_cli_double(const char *cmd, const char *flag, const char *arg, double lo, double hi);
int64_t mp_cli_i64(const char *cmd, const char *flag, const char *arg, int64_t lo, int64_t hi);
/* --device NAME of probe (through its option table), logits and generate: NAME when that backend
 * of the forward pass is built and present; else the backend's one-line refusal, exit 2. */
const char *mp_cli_device(const char *cmd, const char *arg);
/* Reports an unknown option or a missing argument the way getopt_long saw it. */
int mp_cli_bad_option(const char *cmd, char **argv, int optind_now, int optopt_now);

#endif
