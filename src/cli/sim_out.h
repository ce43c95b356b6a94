/* sim_out.h — moved to src/job/sim_out.h (writing simulation results is library code); this name
 * stays for the command-line files that still include it. */
#include "job/sim_out.h" /* mp_sim_write_outputs, mp_sim_print_*, mp_job_stats_json */
#define mp_cli_stats_json mp_job_stats_json /* the old name */
