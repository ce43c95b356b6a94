/* reproduce.c — placeholder until the simulation module lands (same session). */
#include "cli/cli.h"
int mp_cmd_reproduce(int argc, char **argv) { (void)argc; (void)argv; return mp_cli_error("reproduce", "not built yet"); }
