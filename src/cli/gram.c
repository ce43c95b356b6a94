/* gram.c — placeholder: this subcommand is being written (replace this whole file). */
#include "cli/cli.h"
int mp_cmd_gram(int argc, char **argv) {
    (void)argc;
    (void)argv;
    return mp_cli_error("gram", "not available in this build yet");
}
