/* figs.h — moved to src/viz/figs.h (the figures are library code); this name stays for the
 * command-line files that still include it. */
#include "viz/figs.h" /* MpFigRow, mp_fig_rows, mp_fig_rows_clip */
