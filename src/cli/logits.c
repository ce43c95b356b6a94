/* logits.c — placeholder: this subcommand is being written (replace this whole file). */
#include "cli/cli.h"
int mp_cmd_logits(int argc, char **argv) {
    (void)argc;
    (void)argv;
    return mp_cli_error("logits", "not available in this build yet");
}
