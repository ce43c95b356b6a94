/* cli.h — the `maskpos` command-line front end: one thin file per subcommand.
 *
 * Implements: the subcommand table (main.c), and what every subcommand uses to read its flags
 * through its option table (core/opts.h) and to reject bad input with a one-line error and exit
 * code 2 (common.c).
 * Conventions: each subcommand is `int mp_cmd_<name>(int argc, char **argv)` where argv[0] is the
 * subcommand name; its options are one table (MpOptTable: one row per flag — name, kind, range,
 * metavar, help, the field of its config it sets — with the prose of its --help), from which its
 * getopt table, values, messages and --help come; it returns the process exit code (0 ok, 1 a
 * stage failed, 2 bad input) and prints `--help` text on `-h/--help`.
 * Implemented by: common.c (flags and errors) and cmd_*.c, one file per subcommand
 *   (mp_cmd_<name> in cmd_<name>.c).
 */
#ifndef MP_CLI_H
#define MP_CLI_H

#include <stdint.h>

#include "core/err.h"  /* MP_EXIT_* */
#include "core/opts.h" /* MpOptTable: every subcommand's options */

int mp_cmd_theory(int argc, char **argv);
int mp_cmd_simulate(int argc, char **argv);
int mp_cmd_reproduce(int argc, char **argv);
int mp_cmd_plot(int argc, char **argv);     /* src/cli/cmd_plot.c */
int mp_cmd_inspect(int argc, char **argv);  /* src/cli/cmd_inspect.c */
int mp_cmd_mkmodel(int argc, char **argv);  /* src/cli/cmd_mkmodel.c */
int mp_cmd_tokenize(int argc, char **argv); /* src/cli/cmd_tokenize.c */
int mp_cmd_corpus(int argc, char **argv);   /* src/cli/cmd_corpus.c */
int mp_cmd_probe(int argc, char **argv);    /* src/cli/cmd_probe.c */
int mp_cmd_logits(int argc, char **argv);   /* src/cli/cmd_logits.c */
int mp_cmd_generate(int argc, char **argv); /* src/cli/cmd_generate.c */
int mp_cmd_train(int argc, char **argv);    /* src/cli/cmd_train.c */
int mp_cmd_gram(int argc, char **argv);     /* src/cli/cmd_gram.c */
int mp_cmd_view(int argc, char **argv);     /* src/cli/cmd_view.c */
int mp_cmd_card(int argc, char **argv);     /* src/cli/cmd_card.c */

/* Prints "maskpos <cmd>: error: <msg>" and returns MP_EXIT_ERROR. */
int mp_cli_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* mp_cli_parse's answer when the command goes on; any other answer is the exit status to return. */
#define MP_CLI_GO (-1)
/* argv through the subcommand's option table t into cfg (core/opts.h, mp_opts_parse: the rows'
 * fields are offsets into cfg): MP_CLI_GO with the positional arguments at argv[*first .. argc);
 * MP_EXIT_OK after printing t's --help on stdout; MP_EXIT_ERROR after "maskpos CMD: error: LINE"
 * for a bad flag or value. given: NULL, or [t->n] counts of each row given. */
int mp_cli_parse(const MpOptTable *t, void *cfg, int argc, char **argv, int *first, int *given);

#endif
